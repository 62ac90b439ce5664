//! TPC-C NewOrder and Payment as loggable procedures, for the
//! deterministic protocols (`tessera bench tpcc --cc bohm --mix
//! 50,50,0,0,0`): the drawn inputs (the clock readings included), the
//! tables' ids, and what a Payment by last name found in its
//! reconnaissance, which the client runs before submitting (the customer
//! index never changes under NewOrder and Payment, and the body checks the
//! result again: a mismatch aborts it deterministically).
//!
//! Encoding: `11 x table u32 | kind u8 (0 NewOrder, 1 Payment)`, then
//! NewOrder: `w_id u16 | d_id u8 | c_id u32 | o_entry_d u64 | ol_cnt u8 |
//! ol_cnt x (i_id u32 | supply_w_id u16 | quantity u8)`; Payment: `w_id u16
//! | d_id u8 | c_w_id u16 | c_d_id u8 | by u8 (0 id, 1 last name) | c_id
//! u32, or len u8 + last name | h_amount i64 | h_date u64 | h_key [8] |
//! recon c_id: flag u8 + u32`.

use tessera::{KeySet, Request, TableId, Transaction, TxResult};

use super::schema::{District, Tables, Text, Warehouse};
use super::txns::{self, CustomerSel, NewOrderInput, Recon, Scratch};
use super::{TpccTxn, TxnType, MAX_OL_CNT};

/// One TPC-C NewOrder or Payment as an owned, loggable request.
pub struct TpccProc {
    t: Tables,
    txn: TpccTxn,
    s: Scratch,
    /// Lazy: what the now-phase read, for the later phase (not logged:
    /// replay runs the now-phase again).
    now: Option<Now>,
}

/// What a lazy TPC-C transaction's now-phase hands its later phase.
enum Now {
    NewOrder(u32, District),
    Payment(Warehouse, District),
}

impl TpccProc {
    /// The procedure of a drawn transaction; `None` for the types the
    /// deterministic protocols do not run yet (OrderStatus, Delivery,
    /// StockLevel).
    pub fn new(t: Tables, txn: &TpccTxn) -> Option<TpccProc> {
        matches!(txn.kind, TxnType::NewOrder | TxnType::Payment).then(|| TpccProc {
            t,
            txn: txn.clone(),
            s: Scratch::default(),
            now: None,
        })
    }

    /// The transaction's type.
    pub fn kind(&self) -> TxnType {
        self.txn.kind
    }

    fn by_name_unreconnoitered(&self) -> bool {
        self.txn.kind == TxnType::Payment
            && matches!(self.txn.payment.customer, CustomerSel::LastName(_))
            && self.txn.recon.c_id.is_none()
    }
}

impl Request for TpccProc {
    type Output = ();

    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        let (t, x, s) = (&self.t, &self.txn, &mut self.s);
        match x.kind {
            TxnType::Payment => txns::payment(tx, t, &x.payment, &x.recon, s).map(drop),
            _ => txns::new_order(tx, t, &x.new_order, s).map(drop),
        }
    }

    /// A Payment by last name that has not reconnoitered yet; once it has,
    /// the customer it found is part of its arguments.
    fn needs_reconnaissance(&self) -> bool {
        self.by_name_unreconnoitered()
    }

    fn reconnoiter<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        if self.txn.kind == TxnType::Payment {
            self.txn.recon =
                txns::reconnoiter_payment(tx, &self.t, &self.txn.payment, &mut self.s)?;
        }
        Ok(())
    }

    fn declare(&self, keys: &mut KeySet) -> bool {
        match self.txn.kind {
            TxnType::Payment => {
                txns::declare_payment(&self.t, &self.txn.payment, &self.txn.recon, keys)
            }
            _ => {
                txns::declare_new_order(&self.t, &self.txn.new_order, keys);
                true
            }
        }
    }
}

fn tables(t: &Tables) -> [TableId; 11] {
    [
        t.warehouse,
        t.district,
        t.customer,
        t.customer_by_name,
        t.history,
        t.new_order,
        t.order,
        t.order_by_customer,
        t.order_line,
        t.item,
        t.stock,
    ]
}

impl tessera::det::Procedure for TpccProc {
    const ID: tessera::det::ProcId = 0x0300;
    const NAME: &'static str = "tpcc";

    fn encode(&self, out: &mut Vec<u8>) {
        for id in tables(&self.t) {
            out.extend_from_slice(&id.as_u32().to_le_bytes());
        }
        let x = &self.txn;
        match x.kind {
            TxnType::Payment => {
                let p = &x.payment;
                out.push(1);
                out.extend_from_slice(&p.w_id.to_le_bytes());
                out.push(p.d_id);
                out.extend_from_slice(&p.c_w_id.to_le_bytes());
                out.push(p.c_d_id);
                match &p.customer {
                    CustomerSel::Id(c) => {
                        out.push(0);
                        out.extend_from_slice(&c.to_le_bytes());
                    }
                    CustomerSel::LastName(n) => {
                        out.push(1);
                        out.push(n.as_bytes().len() as u8);
                        out.extend_from_slice(n.as_bytes());
                    }
                }
                out.extend_from_slice(&p.h_amount.to_le_bytes());
                out.extend_from_slice(&p.h_date.to_le_bytes());
                out.extend_from_slice(&p.h_key);
                match x.recon.c_id {
                    Some(c) => {
                        out.push(1);
                        out.extend_from_slice(&c.to_le_bytes());
                    }
                    None => out.extend_from_slice(&[0; 5]),
                }
            }
            _ => {
                let n = &x.new_order;
                out.push(0);
                out.extend_from_slice(&n.w_id.to_le_bytes());
                out.push(n.d_id);
                out.extend_from_slice(&n.c_id.to_le_bytes());
                out.extend_from_slice(&n.o_entry_d.to_le_bytes());
                out.push(n.ol_cnt);
                for l in &n.lines[..n.ol_cnt as usize] {
                    out.extend_from_slice(&l.i_id.to_le_bytes());
                    out.extend_from_slice(&l.supply_w_id.to_le_bytes());
                    out.push(l.quantity);
                }
            }
        }
    }

    fn decode(b: &[u8]) -> Result<Self, String> {
        let mut r = tessera::det::ArgReader::new("tpcc", b);
        let mut ids = [TableId::from_u32(0); 11];
        for id in ids.iter_mut() {
            *id = TableId::from_u32(r.u32()?);
        }
        let t = Tables {
            warehouse: ids[0],
            district: ids[1],
            customer: ids[2],
            customer_by_name: ids[3],
            history: ids[4],
            new_order: ids[5],
            order: ids[6],
            order_by_customer: ids[7],
            order_line: ids[8],
            item: ids[9],
            stock: ids[10],
        };
        let mut txn = TpccTxn::default();
        match r.u8()? {
            0 => {
                txn.kind = TxnType::NewOrder;
                let n = &mut txn.new_order;
                *n = NewOrderInput {
                    w_id: r.u16()?,
                    d_id: r.u8()?,
                    c_id: r.u32()?,
                    o_entry_d: r.u64()?,
                    ol_cnt: r.u8()?,
                    ..NewOrderInput::default()
                };
                if n.ol_cnt as usize > MAX_OL_CNT {
                    return Err(format!("tpcc NewOrder with {} lines", n.ol_cnt));
                }
                for l in n.lines[..n.ol_cnt as usize].iter_mut() {
                    l.i_id = r.u32()?;
                    l.supply_w_id = r.u16()?;
                    l.quantity = r.u8()?;
                }
            }
            1 => {
                txn.kind = TxnType::Payment;
                let p = &mut txn.payment;
                p.w_id = r.u16()?;
                p.d_id = r.u8()?;
                p.c_w_id = r.u16()?;
                p.c_d_id = r.u8()?;
                p.customer = match r.u8()? {
                    0 => CustomerSel::Id(r.u32()?),
                    1 => {
                        let len = r.u8()? as usize;
                        if len > 16 {
                            return Err(format!("tpcc last name of {len} bytes"));
                        }
                        CustomerSel::LastName(Text::new(r.take(len)?))
                    }
                    x => return Err(format!("tpcc customer selector {x}")),
                };
                p.h_amount = r.i64()?;
                p.h_date = r.u64()?;
                p.h_key = r.take(8)?.try_into().unwrap();
                let has = r.u8()?;
                let c = r.u32()?;
                txn.recon = Recon {
                    c_id: (has == 1).then_some(c),
                    ..Recon::default()
                };
            }
            x => return Err(format!("tpcc transaction kind {x}")),
        }
        r.finish()?;
        Ok(TpccProc {
            t,
            txn,
            s: Scratch::default(),
            now: None,
        })
    }

    /// Lazy (`--cc lazy`, the thesis's §4.2.4 and §4.4.4): the now-phase
    /// holds what decides the commit and the contended writes, so that
    /// only the stickification thread writes the hot rows. NewOrder: the
    /// item check (an unused id rolls it back) and D_NEXT_O_ID; Payment:
    /// W_YTD and D_YTD. The rest (customer, stock, the order's and
    /// history's rows) is the later phase.
    fn now_phase(&mut self, tx: &mut tessera::Txn<'_>) -> TxResult<tessera::det::NowPhase<()>> {
        let (t, x) = (&self.t, &self.txn);
        self.now = Some(match x.kind {
            TxnType::Payment => {
                let (wh, d) = txns::payment_now(tx, t, &x.payment)?;
                Now::Payment(wh, d)
            }
            _ => {
                let (o_id, d) = txns::new_order_now(tx, t, &x.new_order, &mut self.s)?;
                Now::NewOrder(o_id, d)
            }
        });
        Ok(tessera::det::NowPhase::Ended(()))
    }

    fn later_phase(&mut self, tx: &mut tessera::Txn<'_>) -> TxResult<()> {
        let (t, x, s) = (&self.t, &self.txn, &mut self.s);
        match self.now.as_ref() {
            Some(Now::Payment(wh, d)) => {
                txns::payment_later(tx, t, &x.payment, &x.recon, s, wh, d).map(drop)
            }
            Some(Now::NewOrder(o_id, d)) => {
                txns::new_order_later(tx, t, &x.new_order, s, *o_id, d).map(drop)
            }
            None => Err(tessera::TxError::Error(tessera::Error::InvalidArgument(
                "tpcc: a later phase without its now-phase".into(),
            ))),
        }
    }
}

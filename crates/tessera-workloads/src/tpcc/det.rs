//! TPC-C NewOrder and Payment as loggable procedures, for the
//! deterministic protocols (`tessera bench tpcc --cc bohm --mix
//! 50,50,0,0,0`): the drawn inputs (the clock readings included), the
//! tables' ids, and what a Payment by last name found in its
//! reconnaissance, which the client runs before submitting (the customer
//! index never changes under NewOrder and Payment, and the body checks the
//! result again: a mismatch aborts it deterministically).
//!
//! Encoding: `11 x table u32 | kind u8 (0 NewOrder, 1 Payment)`, then
//! NewOrder: `coarse stock u8 | w_id u16 | d_id u8 | c_id u32 | o_entry_d u64 | ol_cnt u8 |
//! ol_cnt x (i_id u32 | supply_w_id u16 | quantity u8)`; Payment: `w_id u16
//! | d_id u8 | c_w_id u16 | c_d_id u8 | by u8 (0 id, 1 last name) | c_id
//! u32, or len u8 + last name | h_amount i64 | h_date u64 | h_key [8] |
//! recon c_id: flag u8 + u32`.

use tessera::{KeySet, Request, TableId, Transaction, TxResult};

use tessera::det::PieceId;

use super::schema::{
    customer_key, customer_name_range, district_key, item_key, stock_key, warehouse_key, Customer,
    District, Field, Tables, Text, Warehouse,
};
use super::txns::{self, must_get, CustomerSel, NewOrderInput, Recon, Scratch};
use super::{TpccTxn, TxnType, MAX_OL_CNT};

/// One TPC-C NewOrder or Payment as an owned, loggable request.
pub struct TpccProc {
    t: Tables,
    txn: TpccTxn,
    s: Scratch,
    /// PWV-coarse (§6.5.3): NewOrder declares STOCK per supply warehouse
    /// rather than per row (logged: replay declares the same pieces).
    coarse_stock: bool,
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
            coarse_stock: false,
            now: None,
        })
    }

    /// PWV-coarse: declare NewOrder's STOCK rows per supply warehouse (a
    /// piece then holds every STOCK row of that warehouse) instead of per
    /// row; see [`pwv_partition_prefixes`].
    pub fn coarse_stock(mut self, coarse: bool) -> TpccProc {
        self.coarse_stock = coarse;
        self
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

std::thread_local! {
    /// A PWV piece's row buffer (`run_piece` has `&self` only).
    static PIECE_ROW: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    /// A by-name Payment check's customer ids.
    static PIECE_IDS: std::cell::Cell<Vec<u32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Where NewOrder's pieces are (see `TpccProc::pieces`): the `n` item
/// pieces first, then warehouse, district, customer, the stock pieces, the
/// three order rows and the order lines.
struct NoLayout {
    n: usize,
    stock_pieces: usize,
    /// PWV-coarse: the stock pieces' supply warehouses, in the order the
    /// lines first name them.
    warehouses: [u16; MAX_OL_CNT],
}

impl NoLayout {
    fn new(inp: &NewOrderInput, coarse: bool) -> NoLayout {
        let lines = &inp.lines[..inp.ol_cnt as usize];
        let mut lay = NoLayout {
            n: lines.len(),
            stock_pieces: 0,
            warehouses: [0; MAX_OL_CNT],
        };
        if !coarse {
            lay.stock_pieces = lines.len();
            return lay;
        }
        for l in lines {
            if !lay.warehouses[..lay.stock_pieces].contains(&l.supply_w_id) {
                lay.warehouses[lay.stock_pieces] = l.supply_w_id;
                lay.stock_pieces += 1;
            }
        }
        lay
    }
    fn warehouse(&self) -> PieceId {
        self.n as PieceId
    }
    fn district(&self) -> PieceId {
        self.n as PieceId + 1
    }
    fn customer(&self) -> PieceId {
        self.n as PieceId + 2
    }
    fn stock(&self, j: usize) -> PieceId {
        (self.n + 3 + j) as PieceId
    }
    fn order_lines(&self) -> PieceId {
        (self.n + 3 + self.stock_pieces + 3) as PieceId
    }
}

/// Bytes per line in a stock piece's output: S_DIST_xx, then whether
/// S_DATA holds "ORIGINAL".
const STOCK_OUT: usize = <Text<24> as Field>::SIZE + 1;

/// The partition prefixes PWV runs TPC-C with (§6.5.3): the rows of
/// DISTRICT, CUSTOMER (and its name index), NEW-ORDER, ORDER (and its
/// customer index) and ORDER-LINE by (warehouse, district), the first
/// three key bytes; STOCK per row, or per warehouse (the first two bytes)
/// for PWV-coarse; the rest by whole key. Give each to
/// `Database::partition_prefix` before the engine starts.
pub fn pwv_partition_prefixes(t: &Tables, coarse_stock: bool) -> Vec<(TableId, usize)> {
    let mut v: Vec<(TableId, usize)> = [
        t.district,
        t.customer,
        t.customer_by_name,
        t.new_order,
        t.order,
        t.order_by_customer,
        t.order_line,
    ]
    .into_iter()
    .map(|id| (id, 3))
    .collect();
    if coarse_stock {
        v.push((t.stock, 2));
    }
    v
}

impl TpccProc {
    fn new_order_piece(
        &self,
        i: PieceId,
        tx: &mut tessera::Txn<'_>,
        io: &mut tessera::det::PieceIo<'_>,
        row: &mut Vec<u8>,
    ) -> TxResult<()> {
        let (t, n) = (&self.t, &self.txn.new_order);
        let lines = &n.lines[..n.ol_cnt as usize];
        let lay = NoLayout::new(n, self.coarse_stock);
        let i = usize::from(i);
        if i < lay.n {
            let Some((price, original)) = txns::new_order_item(tx, t, lines[i].i_id)? else {
                return tx.user_abort();
            };
            let mut out = [0u8; 9];
            out[..8].copy_from_slice(&price.to_le_bytes());
            out[8] = original as u8;
            io.output(&out);
            return Ok(());
        }
        let o_id = |io: &tessera::det::PieceIo<'_>| -> TxResult<u32> {
            let b = io
                .input(lay.district())
                .ok_or_else(|| piece_bug("district"))?;
            Ok(u32::from_le_bytes(
                b.try_into().map_err(|_| piece_bug("district"))?,
            ))
        };
        let pi = i as PieceId;
        if pi == lay.warehouse() {
            let _: Warehouse = must_get(tx, t.warehouse, &warehouse_key(n.w_id), "warehouse")?;
        } else if pi == lay.district() {
            let (o_id, _) = txns::new_order_district(tx, t, n)?;
            io.output(&o_id.to_le_bytes());
        } else if pi == lay.customer() {
            let _: Customer = must_get(
                tx,
                t.customer,
                &customer_key(n.w_id, n.d_id, n.c_id),
                "customer",
            )?;
        } else if pi < lay.stock(lay.stock_pieces) {
            let j = i - usize::from(lay.stock(0));
            let mut out = [0u8; STOCK_OUT * MAX_OL_CNT];
            let mut at = 0;
            for (k, l) in lines.iter().enumerate() {
                let mine = if self.coarse_stock {
                    l.supply_w_id == lay.warehouses[j]
                } else {
                    k == j
                };
                if mine {
                    let (dist_info, original) = txns::new_order_stock(tx, t, n, l, true)?;
                    dist_info.put(&mut out[at..at + STOCK_OUT - 1]);
                    out[at + STOCK_OUT - 1] = original as u8;
                    at += STOCK_OUT;
                }
            }
            io.output(&out[..at]);
        } else if pi < lay.order_lines() {
            let o_id = o_id(io)?;
            match pi - lay.stock(lay.stock_pieces) {
                0 => txns::insert_order(tx, t, n, o_id, row)?,
                1 => txns::insert_order_by_customer(tx, t, n, o_id)?,
                _ => txns::insert_new_order(tx, t, n, o_id, row)?,
            }
        } else {
            let o_id = o_id(io)?;
            // Each stock piece's output holds its lines in line order.
            let mut next = [0usize; MAX_OL_CNT];
            for (k, l) in lines.iter().enumerate() {
                let item = io.input(k as PieceId).ok_or_else(|| piece_bug("item"))?;
                let price = i64::from_le_bytes(item[..8].try_into().expect("8 bytes"));
                let j = if self.coarse_stock {
                    lay.warehouses[..lay.stock_pieces]
                        .iter()
                        .position(|&w| w == l.supply_w_id)
                        .ok_or_else(|| piece_bug("stock"))?
                } else {
                    k
                };
                let stock = io.input(lay.stock(j)).ok_or_else(|| piece_bug("stock"))?;
                let at = next[j];
                next[j] += STOCK_OUT;
                let b = stock
                    .get(at..at + STOCK_OUT - 1)
                    .ok_or_else(|| piece_bug("stock"))?;
                let dist_info = <Text<24> as Field>::get(b);
                txns::insert_order_line(tx, t, n, o_id, k, price, dist_info, row)?;
            }
        }
        Ok(())
    }

    fn payment_piece(
        &self,
        i: PieceId,
        tx: &mut tessera::Txn<'_>,
        io: &mut tessera::det::PieceIo<'_>,
        row: &mut Vec<u8>,
    ) -> TxResult<()> {
        let (t, p) = (&self.t, &self.txn.payment);
        let by_name = matches!(p.customer, CustomerSel::LastName(_));
        let c_id = match p.customer {
            CustomerSel::Id(c) => c,
            CustomerSel::LastName(_) => self.txn.recon.c_id.ok_or_else(|| piece_bug("recon"))?,
        };
        let first = by_name as PieceId;
        let (pw, pd, pc) = (first, first + 1, first + 2);
        let name = |io: &tessera::det::PieceIo<'_>, piece| -> TxResult<Text<10>> {
            let b = io.input(piece).ok_or_else(|| piece_bug("name"))?;
            if b.len() != <Text<10> as Field>::SIZE {
                return Err(piece_bug("name"));
            }
            Ok(<Text<10> as Field>::get(b))
        };
        let mut out = [0u8; <Text<10> as Field>::SIZE];
        match i {
            _ if by_name && i == 0 => {
                let mut ids = PIECE_IDS.take();
                let r = txns::payment_check_customer(tx, t, p, c_id, &mut ids);
                PIECE_IDS.set(ids);
                r?;
            }
            _ if i == pw => {
                let wh = txns::payment_warehouse(tx, t, p)?;
                wh.w_name.put(&mut out);
                io.output(&out);
            }
            _ if i == pd => {
                let d = txns::payment_district(tx, t, p)?;
                d.d_name.put(&mut out);
                io.output(&out);
            }
            _ if i == pc => {
                let key = customer_key(p.c_w_id, p.c_d_id, c_id);
                let c: Customer = must_get(tx, t.customer, &key, "customer")?;
                let mut data = Vec::new();
                txns::payment_customer(tx, t, p, c_id, c, &mut data)?;
            }
            _ => {
                let (wn, dn) = (name(io, pw)?, name(io, pd)?);
                txns::payment_history(tx, t, p, c_id, wn.as_bytes(), dn.as_bytes(), row)?;
            }
        }
        Ok(())
    }
}

/// A piece's parent output that is missing or malformed: a bug in the
/// decomposition (or the engine), never a TPC-C outcome.
fn piece_bug(what: &str) -> tessera::TxError {
    tessera::TxError::Error(tessera::Error::InvalidArgument(format!(
        "tpcc PWV piece: the {what} piece's output is missing or malformed"
    )))
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
                out.push(self.coarse_stock as u8);
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
        let mut coarse_stock = false;
        match r.u8()? {
            0 => {
                txn.kind = TxnType::NewOrder;
                coarse_stock = match r.u8()? {
                    0 => false,
                    1 => true,
                    x => return Err(format!("tpcc stock granularity {x}")),
                };
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
            coarse_stock,
            now: None,
        })
    }

    /// PWV (`--cc pwv`, the thesis's §6.5.3): one piece per statement,
    /// each in one partition (see [`pwv_partition_prefixes`]).
    ///
    /// NewOrder: the item reads (abortable: an unused id rolls the order
    /// back, so they are the commit point), the warehouse and customer
    /// reads, the district's D_NEXT_O_ID, the STOCK updates (one piece per
    /// line; PWV-coarse: one per supply warehouse, declared as the
    /// warehouse's whole STOCK group), then the ORDER, ORDER-by-customer and
    /// NEW-ORDER rows (after the district piece, which yields the order id)
    /// and the order lines (after the district, item and stock pieces).
    /// The rows whose keys hold the order id are declared as the district's
    /// group of their table, the (warehouse, district) granularity of the
    /// thesis. Payment: a by-name Payment's check of the reconnaissance
    /// (abortable), W_YTD, D_YTD, the customer, and the history row (after
    /// the warehouse and district pieces, whose names it copies).
    fn pieces(&self, plan: &mut tessera::det::PiecePlan) -> bool {
        let (t, x) = (&self.t, &self.txn);
        match x.kind {
            TxnType::NewOrder => {
                let n = &x.new_order;
                let (w, d) = (n.w_id, n.d_id);
                let lay = NoLayout::new(n, self.coarse_stock);
                let lines = &n.lines[..n.ol_cnt as usize];
                for l in lines {
                    let p = plan.piece(true);
                    plan.read(p, t.item, &item_key(l.i_id));
                }
                let pw = plan.piece(false);
                plan.read(pw, t.warehouse, &warehouse_key(w));
                let pd = plan.piece(false);
                plan.write(pd, t.district, &district_key(w, d));
                let pc = plan.piece(false);
                plan.read(pc, t.customer, &customer_key(w, d, n.c_id));
                if self.coarse_stock {
                    for &sw in &lay.warehouses[..lay.stock_pieces] {
                        let p = plan.piece(false);
                        plan.write_group(p, t.stock, &warehouse_key(sw));
                    }
                } else {
                    for l in lines {
                        let p = plan.piece(false);
                        plan.write(p, t.stock, &stock_key(l.supply_w_id, l.i_id));
                    }
                }
                let dk = district_key(w, d);
                for table in [t.order, t.order_by_customer, t.new_order] {
                    let p = plan.piece(false);
                    plan.write_group(p, table, &dk);
                    plan.after(p, pd);
                }
                let pol = plan.piece(false);
                plan.write_group(pol, t.order_line, &dk);
                plan.after(pol, pd);
                for i in 0..lines.len() {
                    plan.after(pol, i as PieceId);
                }
                for j in 0..lay.stock_pieces {
                    plan.after(pol, lay.stock(j));
                }
                debug_assert_eq!(pol, lay.order_lines());
                true
            }
            TxnType::Payment => {
                let p = &x.payment;
                let c_id = match (&p.customer, x.recon.c_id) {
                    (CustomerSel::Id(c), _) => *c,
                    (CustomerSel::LastName(last), Some(c)) => {
                        let k = plan.piece(true);
                        let (lo, _) = customer_name_range(p.c_w_id, p.c_d_id, last);
                        plan.read_group(k, t.customer_by_name, &lo[..3 + 16]);
                        c
                    }
                    // Not reconnoitered: one piece, as the body declares.
                    (CustomerSel::LastName(_), None) => return false,
                };
                let pw = plan.piece(false);
                plan.write(pw, t.warehouse, &warehouse_key(p.w_id));
                let pd = plan.piece(false);
                plan.write(pd, t.district, &district_key(p.w_id, p.d_id));
                let pc = plan.piece(false);
                plan.write(pc, t.customer, &customer_key(p.c_w_id, p.c_d_id, c_id));
                let ph = plan.piece(false);
                plan.write(ph, t.history, &p.h_key);
                plan.after(ph, pw);
                plan.after(ph, pd);
                true
            }
            _ => false,
        }
    }

    fn run_piece(
        &self,
        i: PieceId,
        tx: &mut tessera::Txn<'_>,
        io: &mut tessera::det::PieceIo<'_>,
    ) -> TxResult<()> {
        let mut row = PIECE_ROW.take();
        let r = match self.txn.kind {
            TxnType::NewOrder => self.new_order_piece(i, tx, io, &mut row),
            _ => self.payment_piece(i, tx, io, &mut row),
        };
        PIECE_ROW.set(row);
        r
    }

    fn pieces_output(&mut self, _outputs: &[&[u8]]) -> TxResult<()> {
        Ok(())
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

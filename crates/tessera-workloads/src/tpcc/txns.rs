//! The five TPC-C transactions (clauses 2.4-2.8), each written once against
//! [`Transaction`], so every protocol runs the same code. Each function is
//! one attempt's body: it reads its inputs (drawn before the first attempt,
//! so a retry repeats them), performs the spec's reads and writes and
//! returns the values the terminal would display (only a few, for tests).
//!
//! Rows that must exist (a warehouse, the customer an index entry names, the
//! order a NEW-ORDER row names, ...) are handled in two ways. A `get` that
//! finds nothing is reported as a conflict ([`ConflictReason::Stale`]):
//! under an optimistic protocol the body may read a state no serial
//! execution produces (see [`Transaction`]), and such an attempt must be
//! retried, not stop the run; a database that really lost the row would
//! show up as a retry storm and in the consistency check. An `update` that
//! finds its row missing is a real error: the engine validates everything
//! read before it answers "missing", so the answer is consistent with the
//! earlier read.

use std::ops::Bound;

use tessera::{
    stale_reconnaissance, ConflictReason, Error, KeySet, ScanOptions, Transaction, TxError,
    TxResult,
};

use super::random::has_original;
use super::schema::*;
use super::MAX_OL_CNT;

/// One line of a NewOrder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineInput {
    /// OL_I_ID (an unused id in the last line of a rolled-back order).
    pub i_id: u32,
    /// OL_SUPPLY_W_ID.
    pub supply_w_id: u16,
    /// OL_QUANTITY, 1..=10.
    pub quantity: u8,
}

/// NewOrder inputs (clause 2.4.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewOrderInput {
    /// Home warehouse.
    pub w_id: u16,
    /// District.
    pub d_id: u8,
    /// Customer.
    pub c_id: u32,
    /// O_ENTRY_D (ms since the Unix epoch).
    pub o_entry_d: u64,
    /// Number of lines, 5..=15.
    pub ol_cnt: u8,
    /// The lines; the first `ol_cnt` are used.
    pub lines: [LineInput; MAX_OL_CNT],
}

/// How Payment and OrderStatus select the customer (clauses 2.5.1.2,
/// 2.6.1.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CustomerSel {
    /// By C_ID.
    Id(u32),
    /// By C_LAST: the customer at position ceil(n/2) of the n with that last
    /// name in the district, sorted by C_FIRST.
    LastName(Text<16>),
}

impl Default for CustomerSel {
    fn default() -> Self {
        CustomerSel::Id(1)
    }
}

/// Payment inputs (clause 2.5.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaymentInput {
    /// Home warehouse.
    pub w_id: u16,
    /// District.
    pub d_id: u8,
    /// The customer's warehouse (remote in 15% of Payments).
    pub c_w_id: u16,
    /// The customer's district.
    pub c_d_id: u8,
    /// The customer.
    pub customer: CustomerSel,
    /// H_AMOUNT in cents, 100..=500000.
    pub h_amount: i64,
    /// H_DATE (ms since the Unix epoch).
    pub h_date: u64,
    /// The HISTORY row's key ([`history_key`]).
    pub h_key: [u8; 8],
}

/// OrderStatus inputs (clause 2.6.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OrderStatusInput {
    /// Home warehouse.
    pub w_id: u16,
    /// District.
    pub d_id: u8,
    /// The customer.
    pub customer: CustomerSel,
}

/// Delivery inputs (clause 2.7.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryInput {
    /// Home warehouse.
    pub w_id: u16,
    /// O_CARRIER_ID, 1..=10.
    pub carrier_id: u8,
    /// OL_DELIVERY_D (ms since the Unix epoch).
    pub delivery_d: u64,
}

/// StockLevel inputs (clause 2.8.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StockLevelInput {
    /// Home warehouse.
    pub w_id: u16,
    /// The terminal's district.
    pub d_id: u8,
    /// Threshold, 10..=20.
    pub threshold: i32,
}

/// Buffers reused across transactions (no allocation per transaction once
/// they have grown).
#[derive(Default)]
pub struct Scratch {
    row: Vec<u8>,
    /// NewOrder: (I_PRICE, I_DATA has "ORIGINAL") per line.
    items: Vec<(i64, bool)>,
    /// Customer ids (by-name selection), item ids (StockLevel).
    ids: Vec<u32>,
    /// StockLevel: one bit per item id in `0..=ITEMS + 1`, set for the
    /// ids already taken (cleared again before the transaction returns).
    seen: Vec<u64>,
    /// Delivery: one order's lines, as (OL_NUMBER, OL_AMOUNT).
    amounts: Vec<(u8, i64)>,
    /// Payment: the new C_DATA of a bad-credit customer.
    data: Vec<u8>,
}

/// What a reconnaissance step found (the OLLP trial run of a request whose
/// key sets depend on reads): the body re-checks it and reports
/// [`ConflictReason::Reconnaissance`] if it changed. Empty (the default)
/// on the interactive path, where the body uses what it reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recon {
    /// Payment and OrderStatus: the customer (by last name: the one at
    /// position ceil(n/2)).
    pub c_id: Option<u32>,
    /// OrderStatus: the customer's latest order.
    pub o_id: Option<u32>,
    /// Delivery: per district, the oldest undelivered order and its
    /// customer (`None`: none undelivered).
    pub delivery: Option<[Option<(u32, u32)>; super::DISTRICTS as usize]>,
}

/// What NewOrder displays (part of clause 2.4.3.3).
#[derive(Clone, Debug, PartialEq)]
pub struct NewOrderOutput {
    /// The new order's id.
    pub o_id: u32,
    /// Sum of OL_AMOUNT * (1 - C_DISCOUNT) * (1 + W_TAX + D_TAX), in cents.
    pub total_amount: f64,
    /// Lines whose item and stock data both contain "ORIGINAL" ('B').
    pub brand: u32,
}

/// What Payment displays (part of clause 2.5.3.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaymentOutput {
    /// The customer paid for.
    pub c_id: u32,
    /// Their new balance (cents).
    pub c_balance: i64,
}

/// What OrderStatus displays (part of clause 2.6.3.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatusOutput {
    /// The customer.
    pub c_id: u32,
    /// Their balance (cents).
    pub c_balance: i64,
    /// Their latest order.
    pub o_id: u32,
    /// Its carrier (0: not delivered).
    pub o_carrier_id: u8,
    /// Its lines.
    pub lines: u32,
}

pub(super) fn missing(what: &str, key: &[u8]) -> TxError {
    TxError::Error(Error::InvalidArgument(format!(
        "TPC-C: {what} row with key {key:02x?} is missing"
    )))
}

/// A row that must exist was not found by a read: an inconsistent
/// optimistic read, so retry (see the module documentation).
pub(super) fn vanished() -> TxError {
    TxError::Conflict(ConflictReason::Stale)
}

/// Read and decode the row `key` of table `t`, which must exist.
pub(super) fn must_get<R: Row, T: Transaction>(
    tx: &mut T,
    t: tessera::TableId,
    key: &[u8],
    what: &str,
) -> TxResult<R> {
    match tx.get(t, key)? {
        Some(v) => decode(v, what),
        None => Err(vanished()),
    }
}

/// Bytes `at` of a row that must exist and hold them all (a column read);
/// `column` names the last column asked for, in the error for a shorter
/// row.
fn must_get_slice<'t, T: Transaction>(
    tx: &'t mut T,
    t: tessera::TableId,
    key: &[u8],
    at: std::ops::Range<usize>,
    column: &str,
    what: &str,
) -> TxResult<&'t [u8]> {
    let len = at.end - at.start;
    match tx.get_slice(t, key, at)? {
        Some(v) if v.len() == len => Ok(v),
        Some(_) => Err(short_row(what, column)),
        None => Err(vanished()),
    }
}

/// Write bytes `at..` of a row that was just read; it must still exist.
fn must_update_slice<T: Transaction>(
    tx: &mut T,
    t: tessera::TableId,
    key: &[u8],
    at: usize,
    bytes: &[u8],
    what: &str,
) -> TxResult<()> {
    if tx.update_slice(t, key, at, bytes)? {
        Ok(())
    } else {
        Err(missing(what, key))
    }
}

/// Insert a new row. A key that exists already means a concurrent
/// transaction inserted it first (two NewOrders that read the same
/// D_NEXT_O_ID): under Silo validation would fail anyway, and under a
/// protocol without isolation the retry reads a fresh D_NEXT_O_ID, so this
/// is reported as a conflict.
fn must_insert<T: Transaction>(
    tx: &mut T,
    t: tessera::TableId,
    key: &[u8],
    val: &[u8],
) -> TxResult<()> {
    if tx.insert(t, key, val)? {
        Ok(())
    } else {
        Err(TxError::Conflict(ConflictReason::InsertRace))
    }
}

/// The id of the customer a Payment or OrderStatus selects: by id, or by
/// last name through the `customer_by_name` index (clause 2.5.2.2: all
/// matching customers sorted by C_FIRST, the one at position ceil(n/2)).
fn customer_id<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    w: u16,
    d: u8,
    sel: &CustomerSel,
    ids: &mut Vec<u32>,
) -> TxResult<u32> {
    match sel {
        CustomerSel::Id(c) => Ok(*c),
        CustomerSel::LastName(last) => {
            let (lo, hi) = customer_name_range(w, d, last);
            ids.clear();
            // The index orders one last name's entries by first name (then
            // c_id), which is the order the spec asks for.
            tx.scan(
                t.customer_by_name,
                Bound::Included(&lo[..]),
                Bound::Included(&hi[..]),
                ScanOptions::new(),
                |k, _| {
                    ids.push(customer_name_key_c_id(k));
                    true
                },
            )?;
            // Customers 1..=1000 of every district carry every last name.
            if ids.is_empty() {
                return Err(vanished());
            }
            // Position ceil(n/2), 1-based.
            Ok(ids[ids.len().div_ceil(2) - 1])
        }
    }
}

/// Find and read the customer of a Payment or OrderStatus; `expect` is the
/// reconnaissance's answer, re-checked.
fn select_customer<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    w: u16,
    d: u8,
    sel: &CustomerSel,
    expect: Option<u32>,
    ids: &mut Vec<u32>,
) -> TxResult<(u32, Customer)> {
    let c_id = customer_id(tx, t, w, d, sel, ids)?;
    if expect.is_some_and(|e| e != c_id) {
        return stale_reconnaissance();
    }
    let key = customer_key(w, d, c_id);
    // Every column but C_DATA: its 500 bytes are 8 of the row's 11 cache
    // lines, and only a Payment to a bad-credit customer reads them
    // (`payment_customer`, through a column read of its own).
    let mut row = [0u8; Customer::LEN];
    let head = 0..Customer::DATA.start;
    row[head.clone()].copy_from_slice(must_get_slice(
        tx, t.customer, &key, head, "C_DATA", "customer",
    )?);
    // The zeroed C_DATA decodes as empty text.
    let c = decode(&row, "customer")?;
    Ok((c_id, c))
}

/// The customer's latest order: the last entry of their range in the ORDER
/// index.
fn latest_order<T: Transaction>(tx: &mut T, t: &Tables, w: u16, d: u8, c_id: u32) -> TxResult<u32> {
    let lo = order_customer_key(w, d, c_id, 0);
    let hi = order_customer_key(w, d, c_id, u32::MAX);
    let mut o_id = None;
    tx.scan(
        t.order_by_customer,
        Bound::Included(&lo[..]),
        Bound::Included(&hi[..]),
        ScanOptions::new().reverse().limit(1),
        |k, _| {
            o_id = Some(order_customer_key_o_id(k));
            false
        },
    )?;
    // Every customer has an order from the load on.
    o_id.ok_or_else(vanished)
}

/// The district's oldest undelivered order: its first NEW-ORDER row.
fn oldest_new_order<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    w: u16,
    d: u8,
) -> TxResult<Option<u32>> {
    let lo = new_order_key(w, d, 0);
    let hi = new_order_key(w, d, u32::MAX);
    let mut o_id = None;
    tx.scan(
        t.new_order,
        Bound::Included(&lo[..]),
        Bound::Included(&hi[..]),
        ScanOptions::new().limit(1),
        |k, _| {
            o_id = Some(wd_key_id(k));
            false
        },
    )?;
    Ok(o_id)
}

/// Reconnaissance of a Payment by last name: the customer's id.
pub fn reconnoiter_payment<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
    s: &mut Scratch,
) -> TxResult<Recon> {
    let c_id = customer_id(tx, t, inp.c_w_id, inp.c_d_id, &inp.customer, &mut s.ids)?;
    Ok(Recon {
        c_id: Some(c_id),
        ..Recon::default()
    })
}

/// Reconnaissance of an OrderStatus: the customer and their latest order
/// (which decide the ORDER and ORDER-LINE keys it reads).
pub fn reconnoiter_order_status<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &OrderStatusInput,
    s: &mut Scratch,
) -> TxResult<Recon> {
    let c_id = customer_id(tx, t, inp.w_id, inp.d_id, &inp.customer, &mut s.ids)?;
    let o_id = latest_order(tx, t, inp.w_id, inp.d_id, c_id)?;
    Ok(Recon {
        c_id: Some(c_id),
        o_id: Some(o_id),
        ..Recon::default()
    })
}

/// Reconnaissance of a Delivery: per district, the oldest undelivered order
/// and its customer (the rows it will write).
pub fn reconnoiter_delivery<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &DeliveryInput,
) -> TxResult<Recon> {
    let mut found = [None; super::DISTRICTS as usize];
    for (i, f) in found.iter_mut().enumerate() {
        let d = i as u8 + 1;
        if let Some(o_id) = oldest_new_order(tx, t, inp.w_id, d)? {
            let order: Order = must_get(tx, t.order, &order_key(inp.w_id, d, o_id), "order")?;
            *f = Some((o_id, order.o_c_id));
        }
    }
    Ok(Recon {
        delivery: Some(found),
        ..Recon::default()
    })
}

/// NewOrder's key sets: its items, warehouse and customer read; its
/// district and stock rows written. The order id comes from the district's
/// D_NEXT_O_ID, so the rows it inserts (ORDER, its index entry, NEW-ORDER,
/// ORDER-LINE) are declared as the district's ranges: a coarse declaration
/// (PWV section 6.4.5) rather than a reconnaissance that every concurrent
/// NewOrder of the district would make stale.
pub fn declare_new_order(t: &Tables, inp: &NewOrderInput, keys: &mut KeySet) {
    let (w, d) = (inp.w_id, inp.d_id);
    for l in &inp.lines[..inp.ol_cnt as usize] {
        keys.read(t.item, &item_key(l.i_id));
        keys.write(t.stock, &stock_key(l.supply_w_id, l.i_id));
    }
    keys.read(t.warehouse, &warehouse_key(w));
    keys.write(t.district, &district_key(w, d));
    keys.read(t.customer, &customer_key(w, d, inp.c_id));
    keys.write_range(t.order, &order_key(w, d, 0), &order_key(w, d, u32::MAX));
    keys.write_range(
        t.order_by_customer,
        &order_customer_key(w, d, inp.c_id, 0),
        &order_customer_key(w, d, inp.c_id, u32::MAX),
    );
    keys.write_range(
        t.new_order,
        &new_order_key(w, d, 0),
        &new_order_key(w, d, u32::MAX),
    );
    keys.write_range(
        t.order_line,
        &order_line_key(w, d, 0, 0),
        &order_line_key(w, d, u32::MAX, u8::MAX),
    );
}

/// Payment's key sets (by last name: after reconnaissance, which found the
/// customer); `false` if a by-name Payment has not reconnoitered.
pub fn declare_payment(t: &Tables, inp: &PaymentInput, recon: &Recon, keys: &mut KeySet) -> bool {
    let c_id = match &inp.customer {
        CustomerSel::Id(c) => *c,
        CustomerSel::LastName(last) => {
            let Some(c) = recon.c_id else {
                return false;
            };
            let (lo, hi) = customer_name_range(inp.c_w_id, inp.c_d_id, last);
            keys.read_range(t.customer_by_name, &lo, &hi);
            c
        }
    };
    keys.write(t.warehouse, &warehouse_key(inp.w_id));
    keys.write(t.district, &district_key(inp.w_id, inp.d_id));
    keys.write(t.customer, &customer_key(inp.c_w_id, inp.c_d_id, c_id));
    keys.write(t.history, &inp.h_key);
    true
}

/// OrderStatus's key sets, from its reconnaissance; `false` without one.
pub fn declare_order_status(
    t: &Tables,
    inp: &OrderStatusInput,
    recon: &Recon,
    keys: &mut KeySet,
) -> bool {
    let (Some(c_id), Some(o_id)) = (recon.c_id, recon.o_id) else {
        return false;
    };
    let (w, d) = (inp.w_id, inp.d_id);
    if let CustomerSel::LastName(last) = &inp.customer {
        let (lo, hi) = customer_name_range(w, d, last);
        keys.read_range(t.customer_by_name, &lo, &hi);
    }
    keys.read(t.customer, &customer_key(w, d, c_id));
    keys.read_range(
        t.order_by_customer,
        &order_customer_key(w, d, c_id, 0),
        &order_customer_key(w, d, c_id, u32::MAX),
    );
    keys.read(t.order, &order_key(w, d, o_id));
    keys.read_range(
        t.order_line,
        &order_line_key(w, d, o_id, 0),
        &order_line_key(w, d, o_id, u8::MAX),
    );
    true
}

/// Delivery's key sets, from its reconnaissance; `false` without one.
pub fn declare_delivery(t: &Tables, inp: &DeliveryInput, recon: &Recon, keys: &mut KeySet) -> bool {
    let Some(found) = &recon.delivery else {
        return false;
    };
    let w = inp.w_id;
    for (i, f) in found.iter().enumerate() {
        let d = i as u8 + 1;
        keys.read_range(
            t.new_order,
            &new_order_key(w, d, 0),
            &new_order_key(w, d, u32::MAX),
        );
        if let Some((o_id, c_id)) = *f {
            keys.write(t.new_order, &new_order_key(w, d, o_id));
            keys.write(t.order, &order_key(w, d, o_id));
            keys.write_range(
                t.order_line,
                &order_line_key(w, d, o_id, 0),
                &order_line_key(w, d, o_id, u8::MAX),
            );
            keys.write(t.customer, &customer_key(w, d, c_id));
        }
    }
    true
}

/// StockLevel's key sets: its district, and (coarse, as the lines it reads
/// depend on D_NEXT_O_ID) the district's ORDER-LINE rows and the
/// warehouse's STOCK rows, all read.
pub fn declare_stock_level(t: &Tables, inp: &StockLevelInput, keys: &mut KeySet) {
    let (w, d) = (inp.w_id, inp.d_id);
    keys.read(t.district, &district_key(w, d));
    keys.read_range(
        t.order_line,
        &order_line_key(w, d, 0, 0),
        &order_line_key(w, d, u32::MAX, u8::MAX),
    );
    keys.read_range(t.stock, &stock_key(w, 0), &stock_key(w, u32::MAX));
}

/// NewOrder (clause 2.4.2).
///
/// The items are read first, before any write: the order (and with it the
/// rollback of clause 2.4.2.3 when the last item id is unused) is then
/// decided before anything is written, so the user abort leaves nothing
/// behind even under a protocol that cannot roll back (nocc). Under a
/// serializable protocol the transaction reads and writes the same rows as
/// in the spec's order, so the result is the same.
pub fn new_order<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    s: &mut Scratch,
) -> TxResult<NewOrderOutput> {
    let (o_id, dist) = new_order_now(tx, t, inp, s)?;
    new_order_later(tx, t, inp, s, o_id, &dist)
}

/// NewOrder's commit decision and hot write, the now-phase of a lazy
/// NewOrder (the thesis's §4.2.4 split): the items are read (an unused id
/// rolls the order back) and the district's D_NEXT_O_ID is taken and
/// incremented. Returns the order id and the district row read.
pub fn new_order_now<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    s: &mut Scratch,
) -> TxResult<(u32, District)> {
    let lines = &inp.lines[..inp.ol_cnt as usize];
    // The ITEM and STOCK rows of every line are independent lookups: look
    // them up together first, so that their cache misses overlap (the
    // items are read at once, `get_many`; the stock rows' lookup is a hint
    // for the reads below).
    let ikeys: [[u8; 4]; MAX_OL_CNT] =
        std::array::from_fn(|n| item_key(lines.get(n).map_or(0, |l| l.i_id)));
    let skeys: [[u8; 6]; MAX_OL_CNT] = std::array::from_fn(|n| {
        lines
            .get(n)
            .map_or([0; 6], |l| stock_key(l.supply_w_id, l.i_id))
    });
    let ik: [&[u8]; MAX_OL_CNT] = std::array::from_fn(|n| &ikeys[n][..]);
    let sk: [&[u8]; MAX_OL_CNT] = std::array::from_fn(|n| &skeys[n][..]);
    tx.prefetch(t.stock, &sk[..lines.len()], Stock::LEN);
    s.items.clear();
    let (items, mut unused, mut bad) = (&mut s.items, false, None);
    tx.get_many(t.item, &ik[..lines.len()], 0..Item::LEN, |_, v| match v {
        // Clause 2.4.2.3: an unused item id rolls the transaction back.
        None => unused = true,
        Some(v) => match decode::<Item>(v, "item") {
            Ok(it) => items.push((it.i_price, has_original(it.i_data.as_bytes()))),
            Err(e) => bad = Some(e),
        },
    })?;
    if let Some(e) = bad {
        return Err(e);
    }
    if unused {
        return tx.user_abort();
    }

    new_order_district(tx, t, inp)
}

/// NewOrder's district step: D_NEXT_O_ID taken and incremented. Returns
/// the order id and the district row read.
pub(super) fn new_order_district<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
) -> TxResult<(u32, District)> {
    let dkey = district_key(inp.w_id, inp.d_id);
    let dist: District = must_get(tx, t.district, &dkey, "district")?;
    let o_id = dist.d_next_o_id;
    let next = (o_id + 1).to_le_bytes();
    must_update_slice(
        tx,
        t.district,
        &dkey,
        District::NEXT_O_ID.start,
        &next,
        "district",
    )?;
    Ok((o_id, dist))
}

/// The rest of NewOrder once [`new_order_now`] has taken order id `o_id`
/// from district row `dist` (the later phase of a lazy NewOrder): the
/// warehouse and customer reads, the order's rows, the stock updates.
/// `s.items` holds what the now-phase read of the items.
pub fn new_order_later<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    s: &mut Scratch,
    o_id: u32,
    dist: &District,
) -> TxResult<NewOrderOutput> {
    let lines = &inp.lines[..inp.ol_cnt as usize];
    let wh: Warehouse = must_get(tx, t.warehouse, &warehouse_key(inp.w_id), "warehouse")?;
    let cust: Customer = must_get(
        tx,
        t.customer,
        &customer_key(inp.w_id, inp.d_id, inp.c_id),
        "customer",
    )?;

    insert_order(tx, t, inp, o_id, &mut s.row)?;
    insert_order_by_customer(tx, t, inp, o_id)?;
    insert_new_order(tx, t, inp, o_id, &mut s.row)?;
    let mut sum = 0i64;
    let mut brand = 0;
    for (n, (l, &(price, item_original))) in lines.iter().zip(&s.items).enumerate() {
        // S_DATA is searched only for an original item (a tenth of them).
        let (dist_info, stock_original) = new_order_stock(tx, t, inp, l, item_original)?;
        if stock_original {
            brand += 1;
        }
        sum += insert_order_line(tx, t, inp, o_id, n, price, dist_info, &mut s.row)?;
    }
    let total_amount = sum as f64
        * (1.0 - cust.c_discount as f64 / 10_000.0)
        * (1.0 + (wh.w_tax + dist.d_tax) as f64 / 10_000.0);
    Ok(NewOrderOutput {
        o_id,
        total_amount,
        brand,
    })
}

/// One NewOrder line's ITEM read: I_PRICE and whether I_DATA holds
/// "ORIGINAL"; `None` for an unused id (clause 2.4.2.3: the order rolls
/// back).
pub(super) fn new_order_item<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    i_id: u32,
) -> TxResult<Option<(i64, bool)>> {
    match tx.get_slice(t.item, &item_key(i_id), 0..Item::LEN)? {
        None => Ok(None),
        Some(v) => {
            let it = decode::<Item>(v, "item")?;
            Ok(Some((it.i_price, has_original(it.i_data.as_bytes()))))
        }
    }
}

/// NewOrder's ORDER row.
pub(super) fn insert_order<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    o_id: u32,
    row: &mut Vec<u8>,
) -> TxResult<()> {
    let lines = &inp.lines[..inp.ol_cnt as usize];
    let all_local = lines.iter().all(|l| l.supply_w_id == inp.w_id);
    let order = Order {
        o_id,
        o_d_id: inp.d_id,
        o_w_id: inp.w_id,
        o_c_id: inp.c_id,
        o_entry_d: inp.o_entry_d,
        o_carrier_id: 0,
        o_ol_cnt: inp.ol_cnt,
        o_all_local: all_local as u8,
    };
    order.encode(row);
    must_insert(tx, t.order, &order_key(inp.w_id, inp.d_id, o_id), row)
}

/// NewOrder's entry in the ORDER-by-customer index.
pub(super) fn insert_order_by_customer<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    o_id: u32,
) -> TxResult<()> {
    must_insert(
        tx,
        t.order_by_customer,
        &order_customer_key(inp.w_id, inp.d_id, inp.c_id, o_id),
        &[],
    )
}

/// NewOrder's NEW-ORDER row.
pub(super) fn insert_new_order<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    o_id: u32,
    row: &mut Vec<u8>,
) -> TxResult<()> {
    let no = NewOrder {
        no_o_id: o_id,
        no_d_id: inp.d_id,
        no_w_id: inp.w_id,
    };
    no.encode(row);
    must_insert(
        tx,
        t.new_order,
        &new_order_key(inp.w_id, inp.d_id, o_id),
        row,
    )
}

/// One NewOrder line's STOCK update (clause 2.4.2.2). Returns S_DIST_xx of
/// the order's district and whether S_DATA holds "ORIGINAL" (searched only
/// when `want_original`; false otherwise).
pub(super) fn new_order_stock<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    l: &LineInput,
    want_original: bool,
) -> TxResult<(Text<24>, bool)> {
    let skey = stock_key(l.supply_w_id, l.i_id);
    // The stock row is read whole, but only the columns used are
    // decoded, and only the changed ones are written back (S_QUANTITY
    // and the three counters: 16 of its 334 bytes).
    let Some(row) = tx.get(t.stock, &skey)? else {
        return Err(vanished());
    };
    if row.len() < Stock::LEN {
        return Err(short_row("stock", "S_DATA"));
    }
    let word = |at: usize| u32::from_le_bytes(row[at..at + 4].try_into().expect("4 bytes"));
    let quantity = word(Stock::QUANTITY.start) as i32;
    let c = Stock::COUNTS.start;
    let (mut ytd, mut order_cnt, mut remote_cnt) = (word(c), word(c + 4), word(c + 8));
    let dist_info = Text::<24>::get(&row[Stock::dist_at(inp.d_id)]);
    let original = want_original && has_original(Text::<50>::get(&row[Stock::DATA]).as_bytes());
    let q = l.quantity as i32;
    // Clause 2.4.2.2: decrease by the quantity if at least 10 remain,
    // else restock by 91.
    let quantity = if quantity >= q + 10 {
        quantity - q
    } else {
        quantity - q + 91
    };
    ytd += l.quantity as u32;
    order_cnt += 1;
    if l.supply_w_id != inp.w_id {
        remote_cnt += 1;
    }
    // S_QUANTITY and the counters are adjacent: one column write.
    const _: () = assert!(Stock::QUANTITY.end == Stock::COUNTS.start);
    let mut cols = [0u8; 16];
    for (dst, x) in cols
        .chunks_exact_mut(4)
        .zip([quantity as u32, ytd, order_cnt, remote_cnt])
    {
        dst.copy_from_slice(&x.to_le_bytes());
    }
    if !tx.update_slice(t.stock, &skey, Stock::QUANTITY.start, &cols)? {
        return Err(missing("stock", &skey));
    }
    Ok((dist_info, original))
}

/// Order line `n` (0-based) of NewOrder `o_id`, inserted; returns
/// OL_AMOUNT.
#[allow(clippy::too_many_arguments)]
pub(super) fn insert_order_line<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &NewOrderInput,
    o_id: u32,
    n: usize,
    price: i64,
    dist_info: Text<24>,
    row: &mut Vec<u8>,
) -> TxResult<i64> {
    let l = &inp.lines[n];
    let amount = l.quantity as i64 * price;
    let line = OrderLine {
        ol_o_id: o_id,
        ol_d_id: inp.d_id,
        ol_w_id: inp.w_id,
        ol_number: n as u8 + 1,
        ol_i_id: l.i_id,
        ol_supply_w_id: l.supply_w_id,
        ol_delivery_d: 0,
        ol_quantity: l.quantity,
        ol_amount: amount,
        ol_dist_info: dist_info,
    };
    line.encode(row);
    must_insert(
        tx,
        t.order_line,
        &order_line_key(inp.w_id, inp.d_id, o_id, n as u8 + 1),
        row,
    )?;
    Ok(amount)
}

/// Payment (clause 2.5.2).
///
/// `recon` is empty on the interactive path; after a reconnaissance the
/// customer found is re-checked.
pub fn payment<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
    recon: &Recon,
    s: &mut Scratch,
) -> TxResult<PaymentOutput> {
    let (wh, dist) = payment_now(tx, t, inp)?;
    payment_later(tx, t, inp, recon, s, &wh, &dist)
}

/// Payment's hot writes, the now-phase of a lazy Payment: W_YTD and D_YTD.
/// Returns the warehouse and district rows read (their names go into the
/// history row).
pub fn payment_now<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
) -> TxResult<(Warehouse, District)> {
    let wh = payment_warehouse(tx, t, inp)?;
    let dist = payment_district(tx, t, inp)?;
    Ok((wh, dist))
}

/// Payment's W_YTD; returns the warehouse row read.
pub(super) fn payment_warehouse<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
) -> TxResult<Warehouse> {
    let wkey = warehouse_key(inp.w_id);
    // Only the changed columns are written back (`update_slice`).
    let wh: Warehouse = must_get(tx, t.warehouse, &wkey, "warehouse")?;
    let ytd = (wh.w_ytd + inp.h_amount).to_le_bytes();
    must_update_slice(
        tx,
        t.warehouse,
        &wkey,
        Warehouse::YTD.start,
        &ytd,
        "warehouse",
    )?;
    Ok(wh)
}

/// Payment's D_YTD; returns the district row read.
pub(super) fn payment_district<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
) -> TxResult<District> {
    let dkey = district_key(inp.w_id, inp.d_id);
    let dist: District = must_get(tx, t.district, &dkey, "district")?;
    let ytd = (dist.d_ytd + inp.h_amount).to_le_bytes();
    must_update_slice(tx, t.district, &dkey, District::YTD.start, &ytd, "district")?;
    Ok(dist)
}

/// The rest of Payment once [`payment_now`] has run (the later phase of a
/// lazy Payment): the customer (by id, or by last name as the
/// reconnaissance found it; under NewOrder and Payment the name index never
/// changes, so the check cannot fail there) and the history row.
pub fn payment_later<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
    recon: &Recon,
    s: &mut Scratch,
    wh: &Warehouse,
    dist: &District,
) -> TxResult<PaymentOutput> {
    let (c_id, c) = select_customer(
        tx,
        t,
        inp.c_w_id,
        inp.c_d_id,
        &inp.customer,
        recon.c_id,
        &mut s.ids,
    )?;
    let c = payment_customer(tx, t, inp, c_id, c, &mut s.data)?;
    payment_history(
        tx,
        t,
        inp,
        c_id,
        wh.w_name.as_bytes(),
        dist.d_name.as_bytes(),
        &mut s.row,
    )?;
    Ok(PaymentOutput {
        c_id,
        c_balance: c.c_balance,
    })
}

/// A Payment's by-last-name selection checked against the customer the
/// reconnaissance found, `expect` (PWV's abortable piece).
pub(super) fn payment_check_customer<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
    expect: u32,
    ids: &mut Vec<u32>,
) -> TxResult<()> {
    let c_id = customer_id(tx, t, inp.c_w_id, inp.c_d_id, &inp.customer, ids)?;
    if c_id != expect {
        return stale_reconnaissance();
    }
    Ok(())
}

/// Payment's customer update, of customer `c_id` whose row `c` was read;
/// returns the row as written.
pub(super) fn payment_customer<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
    c_id: u32,
    mut c: Customer,
    data: &mut Vec<u8>,
) -> TxResult<Customer> {
    c.c_balance -= inp.h_amount;
    c.c_ytd_payment += inp.h_amount;
    c.c_payment_cnt += 1;
    let ckey = customer_key(inp.c_w_id, inp.c_d_id, c_id);
    let bad_credit = c.c_credit.as_bytes() == b"BC";
    if bad_credit {
        // `select_customer` left C_DATA out; this Payment rewrites it.
        c.c_data = Text::get(must_get_slice(
            tx,
            t.customer,
            &ckey,
            Customer::DATA,
            "C_DATA",
            "customer",
        )?);
    }
    let mut pay = [0u8; 20];
    pay[..8].copy_from_slice(&c.c_balance.to_le_bytes());
    pay[8..16].copy_from_slice(&c.c_ytd_payment.to_le_bytes());
    pay[16..].copy_from_slice(&c.c_payment_cnt.to_le_bytes());
    const _: () = assert!(Customer::PAYMENT.end - Customer::PAYMENT.start == 20);
    must_update_slice(
        tx,
        t.customer,
        &ckey,
        Customer::PAYMENT.start,
        &pay,
        "customer",
    )?;
    if bad_credit {
        // Clause 2.5.2.2: the payment's ids and amount go in front of C_DATA,
        // which keeps its first 500 characters.
        data.clear();
        use std::io::Write as _;
        let _ = write!(
            data,
            "{} {} {} {} {} {}.{:02} ",
            c_id,
            inp.c_d_id,
            inp.c_w_id,
            inp.d_id,
            inp.w_id,
            inp.h_amount / 100,
            inp.h_amount % 100
        );
        data.extend_from_slice(c.c_data.as_bytes());
        c.c_data.set(data);
        let mut col = [0u8; Customer::DATA.end - Customer::DATA.start];
        c.c_data.put(&mut col);
        must_update_slice(
            tx,
            t.customer,
            &ckey,
            Customer::DATA.start,
            &col,
            "customer",
        )?;
    }

    Ok(c)
}

/// Payment's HISTORY row: H_DATA is W_NAME, four spaces, D_NAME.
pub(super) fn payment_history<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &PaymentInput,
    c_id: u32,
    w_name: &[u8],
    d_name: &[u8],
    row: &mut Vec<u8>,
) -> TxResult<()> {
    // H_DATA: W_NAME, four spaces, D_NAME.
    let mut h_data = [0u8; 24];
    let (wn, dn) = (w_name, d_name);
    h_data[..wn.len()].copy_from_slice(wn);
    h_data[wn.len()..wn.len() + 4].fill(b' ');
    h_data[wn.len() + 4..wn.len() + 4 + dn.len()].copy_from_slice(dn);
    let h = History {
        h_c_id: c_id,
        h_c_d_id: inp.c_d_id,
        h_c_w_id: inp.c_w_id,
        h_d_id: inp.d_id,
        h_w_id: inp.w_id,
        h_date: inp.h_date,
        h_amount: inp.h_amount,
        h_data: Text::new(&h_data[..wn.len() + 4 + dn.len()]),
    };
    h.encode(row);
    must_insert(tx, t.history, &inp.h_key, row)
}

/// OrderStatus (clause 2.6.2): read-only. After a reconnaissance
/// (`recon`), the customer and their latest order are re-checked.
pub fn order_status<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &OrderStatusInput,
    recon: &Recon,
    s: &mut Scratch,
) -> TxResult<OrderStatusOutput> {
    let (c_id, c) = select_customer(
        tx,
        t,
        inp.w_id,
        inp.d_id,
        &inp.customer,
        recon.c_id,
        &mut s.ids,
    )?;
    let o_id = latest_order(tx, t, inp.w_id, inp.d_id, c_id)?;
    if recon.o_id.is_some_and(|e| e != o_id) {
        return stale_reconnaissance();
    }
    let order: Order = must_get(tx, t.order, &order_key(inp.w_id, inp.d_id, o_id), "order")?;
    let lo = order_line_key(inp.w_id, inp.d_id, o_id, 0);
    let hi = order_line_key(inp.w_id, inp.d_id, o_id, u8::MAX);
    let mut lines = 0;
    let mut sink = 0i64;
    let mut bad = false;
    tx.scan(
        t.order_line,
        Bound::Included(&lo[..]),
        Bound::Included(&hi[..]),
        ScanOptions::new(),
        |_, v| {
            // OL_I_ID, OL_SUPPLY_W_ID, OL_QUANTITY, OL_AMOUNT, OL_DELIVERY_D
            // are what the terminal shows.
            match OrderLine::decode(v) {
                Some(l) => {
                    sink =
                        sink.wrapping_add(l.ol_amount + l.ol_i_id as i64 + l.ol_delivery_d as i64);
                    lines += 1;
                    true
                }
                None => {
                    bad = true;
                    false
                }
            }
        },
    )?;
    if bad {
        return Err(TxError::Error(Error::InvalidArgument(
            "malformed order_line row".into(),
        )));
    }
    std::hint::black_box(sink);
    Ok(OrderStatusOutput {
        c_id,
        c_balance: c.c_balance,
        o_id,
        o_carrier_id: order.o_carrier_id,
        lines,
    })
}

/// Delivery (clause 2.7.4), all ten districts in one transaction (as Silo
/// and ERMIA run it; the spec allows queueing it and delivering per district
/// in up to ten). Returns the number of orders delivered; a district
/// without undelivered orders is skipped. After a reconnaissance (`recon`)
/// each district's oldest order and its customer are re-checked.
pub fn delivery<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &DeliveryInput,
    recon: &Recon,
    s: &mut Scratch,
) -> TxResult<u32> {
    let w = inp.w_id;
    let mut delivered = 0;
    for d in 1..=super::DISTRICTS {
        let o_id = oldest_new_order(tx, t, w, d)?;
        let expect = recon.delivery.as_ref().map(|f| f[d as usize - 1]);
        if expect.is_some_and(|e| e.map(|(o, _)| o) != o_id) {
            return stale_reconnaissance();
        }
        let Some(o_id) = o_id else {
            continue;
        };
        // Without isolation (nocc) a concurrent Delivery may have taken it
        // meanwhile: skip the district. Under Silo the scan's read fails
        // validation in that case.
        if !tx.delete(t.new_order, &new_order_key(w, d, o_id))? {
            continue;
        }
        let okey = order_key(w, d, o_id);
        let order: Order = must_get(tx, t.order, &okey, "order")?;
        if expect.is_some_and(|e| e.map(|(_, c)| c) != Some(order.o_c_id)) {
            return stale_reconnaissance();
        }
        let carrier = [inp.carrier_id];
        must_update_slice(
            tx,
            t.order,
            &okey,
            Order::CARRIER_ID.start,
            &carrier,
            "order",
        )?;

        let lo = order_line_key(w, d, o_id, 0);
        let hi = order_line_key(w, d, o_id, u8::MAX);
        // Each line's OL_AMOUNT is read (a column scan) and its
        // OL_DELIVERY_D written (a column write); OL_NUMBER is the key's
        // last byte.
        s.amounts.clear();
        let mut bad = false;
        let amounts = &mut s.amounts;
        tx.scan(
            t.order_line,
            Bound::Included(&lo[..]),
            Bound::Included(&hi[..]),
            ScanOptions::new().slice(OrderLine::AMOUNT),
            |k, v| match (k.last(), <[u8; 8]>::try_from(v)) {
                (Some(&number), Ok(amount)) => {
                    amounts.push((number, i64::from_le_bytes(amount)));
                    true
                }
                _ => {
                    bad = true;
                    false
                }
            },
        )?;
        if bad {
            return Err(TxError::Error(Error::InvalidArgument(
                "malformed order_line row".into(),
            )));
        }
        let mut sum = 0i64;
        let delivery_d = inp.delivery_d.to_le_bytes();
        for i in 0..s.amounts.len() {
            let (number, amount) = s.amounts[i];
            sum += amount;
            let key = order_line_key(w, d, o_id, number);
            let at = OrderLine::DELIVERY_D.start;
            must_update_slice(tx, t.order_line, &key, at, &delivery_d, "order_line")?;
        }
        // C_BALANCE and C_DELIVERY_CNT, read and written as one column
        // range (the two columns between them are written back as read).
        let ckey = customer_key(w, d, order.o_c_id);
        let (at, end) = (Customer::BALANCE.start, Customer::DELIVERY_CNT.end);
        let mut cols = [0u8; Customer::DELIVERY_CNT.end - Customer::BALANCE.start];
        cols.copy_from_slice(must_get_slice(
            tx,
            t.customer,
            &ckey,
            at..end,
            "C_DELIVERY_CNT",
            "customer",
        )?);
        let balance = i64::from_le_bytes(cols[..8].try_into().expect("8 bytes")) + sum;
        let cnt = cols.len() - 4;
        let count = u32::from_le_bytes(cols[cnt..].try_into().expect("4 bytes")) + 1;
        cols[..8].copy_from_slice(&balance.to_le_bytes());
        cols[cnt..].copy_from_slice(&count.to_le_bytes());
        must_update_slice(tx, t.customer, &ckey, at, &cols, "customer")?;
        delivered += 1;
    }
    Ok(delivered)
}

/// Keep the first occurrence of each id in `ids`, in order. Ids up to
/// `ITEMS + 1` are told apart by a bitmap (`seen`, all clear on entry and on
/// return): one test-and-set per id where a sort of StockLevel's ~200 ids
/// cost about 15K instructions. Any other id (a damaged row) goes through a
/// sort of its own.
fn distinct(ids: &mut Vec<u32>, seen: &mut Vec<u64>) {
    let words = (super::ITEMS as usize + 2).div_ceil(64);
    if seen.len() < words {
        seen.resize(words, 0);
    }
    let mut others = Vec::new();
    let mut kept = 0;
    for i in 0..ids.len() {
        let id = ids[i];
        if id > super::ITEMS + 1 {
            others.push(id);
            continue;
        }
        let (w, bit) = (id as usize / 64, 1u64 << (id % 64));
        if seen[w] & bit == 0 {
            seen[w] |= bit;
            ids[kept] = id;
            kept += 1;
        }
    }
    ids.truncate(kept);
    for &id in ids.iter() {
        seen[id as usize / 64] = 0;
    }
    if !others.is_empty() {
        others.sort_unstable();
        others.dedup();
        ids.extend_from_slice(&others);
    }
}

/// StockLevel's stock rows looked up together (see [`Transaction::prefetch`]).
const PREFETCH_CHUNK: usize = 16;

/// StockLevel (clause 2.8.2): read-only. Returns the number of distinct
/// items of the district's last 20 orders whose stock is below the
/// threshold.
pub fn stock_level<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    inp: &StockLevelInput,
    s: &mut Scratch,
) -> TxResult<u32> {
    let dist: District = must_get(
        tx,
        t.district,
        &district_key(inp.w_id, inp.d_id),
        "district",
    )?;
    let next = dist.d_next_o_id;
    // The lines of orders next-20 .. next-1, one range scan.
    let lo = order_line_key(inp.w_id, inp.d_id, next.saturating_sub(20), 0);
    let hi = order_line_key(inp.w_id, inp.d_id, next, 0);
    s.ids.clear();
    let ids = &mut s.ids;
    let mut bad = false;
    tx.scan(
        t.order_line,
        Bound::Included(&lo[..]),
        Bound::Excluded(&hi[..]),
        ScanOptions::new().slice(OrderLine::I_ID),
        |_, v| match OrderLine::i_id_at(v) {
            Some(i_id) => {
                ids.push(i_id);
                true
            }
            None => {
                bad = true;
                false
            }
        },
    )?;
    if bad {
        return Err(short_row("order_line", "OL_I_ID"));
    }
    distinct(&mut s.ids, &mut s.seen);
    let mut low = 0;
    // The stock rows are independent lookups: read S_QUANTITY of a chunk
    // of them at once (`get_many`: their misses overlap).
    for ids in s.ids.chunks(PREFETCH_CHUNK) {
        let keys: [[u8; 6]; PREFETCH_CHUNK] =
            std::array::from_fn(|n| stock_key(inp.w_id, ids.get(n).copied().unwrap_or(0)));
        let k: [&[u8]; PREFETCH_CHUNK] = std::array::from_fn(|n| &keys[n][..]);
        let mut err = None;
        tx.get_many(t.stock, &k[..ids.len()], Stock::QUANTITY, |_, v| {
            match v.map(Stock::quantity_at) {
                Some(Some(q)) => low += (q < inp.threshold) as u32,
                Some(None) => err = Some(short_row("stock", "S_QUANTITY")),
                None => err = Some(vanished()),
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
    }
    Ok(low)
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::distinct;

    /// `distinct` keeps each id once, in first-seen order, for ids in and
    /// out of the bitmap's range, and leaves the bitmap clear.
    #[test]
    fn distinct_keeps_first_occurrences_and_clears_its_bitmap() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut seen = Vec::new();
        for round in 0..200 {
            let n = rng.gen_range(0..300);
            let hi = if round % 10 == 0 {
                u32::MAX
            } else {
                super::super::ITEMS + 1
            };
            let mut ids: Vec<u32> = (0..n)
                .map(|_| rng.gen_range(0..=hi.min(500 + round)))
                .collect();
            if round % 10 == 0 {
                ids.push(u32::MAX);
                ids.push(super::super::ITEMS + 2);
                ids.push(u32::MAX);
            }
            let mut want: Vec<u32> = Vec::new();
            for &id in &ids {
                if id <= super::super::ITEMS + 1 && !want.contains(&id) {
                    want.push(id);
                }
            }
            let mut others: Vec<u32> = ids
                .iter()
                .copied()
                .filter(|&id| id > super::super::ITEMS + 1)
                .collect();
            others.sort_unstable();
            others.dedup();
            want.extend(others);
            distinct(&mut ids, &mut seen);
            assert_eq!(ids, want, "round {round}");
            assert!(
                seen.iter().all(|&w| w == 0),
                "round {round}: bitmap left dirty"
            );
        }
    }
}

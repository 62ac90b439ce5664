//! TPC-C consistency conditions (clause 3.3.2.1 to 3.3.2.12), plus two checks
//! of our own that the secondary indexes match their tables.
//!
//! [`check_consistency`] reads the whole database with one worker, in many
//! short read transactions (chunks of [`CHUNK`] rows), so it is only
//! meaningful when the database is quiescent (after a run). Everything is
//! checked for every warehouse, district, order, line and customer, not a
//! random sample.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Bound;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tessera::{Database, Error, ScanOptions, TableId, Worker};

use super::schema::*;
use super::{TpccConfig, DISTRICTS, FIRST_NEW_ORDER};

/// Rows read per checking transaction.
pub const CHUNK: usize = 4096;

/// Failures described per condition (the rest are only counted).
const MAX_DETAILS: usize = 10;

/// The result of one condition.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Condition {
    /// What it requires.
    pub description: &'static str,
    /// Whether it holds everywhere.
    pub passed: bool,
    /// How many instances (warehouses, districts, rows) were checked.
    pub checked: u64,
    /// How many of them failed.
    pub violations: u64,
    /// The first failures, described.
    pub details: Vec<String>,
}

/// Conditions by name, in clause order (a JSON object keyed by name, in
/// that order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conditions(pub Vec<(String, Condition)>);

impl Serialize for Conditions {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// The outcome of [`check_consistency`].
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ConsistencyReport {
    /// Every condition holds.
    pub passed: bool,
    /// Per condition.
    pub conditions: Conditions,
}

impl ConsistencyReport {
    /// The named condition.
    pub fn get(&self, name: &str) -> Option<&Condition> {
        self.conditions
            .0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, c)| c)
    }

    /// Names of the conditions that failed.
    pub fn failed(&self) -> Vec<&str> {
        self.conditions
            .0
            .iter()
            .filter(|(_, c)| !c.passed)
            .map(|(n, _)| n.as_str())
            .collect()
    }

    /// One line for the human-readable report.
    pub fn summary(&self) -> String {
        let n = self.conditions.0.len();
        if self.passed {
            format!("consistency: all {n} conditions hold (TPC-C 3.3.2.1-3.3.2.12, indexes)")
        } else {
            let f: Vec<String> = self
                .conditions
                .0
                .iter()
                .filter(|(_, c)| !c.passed)
                .map(|(name, c)| {
                    format!(
                        "{name} ({} of {} violated{})",
                        c.violations,
                        c.checked,
                        c.details
                            .first()
                            .map_or(String::new(), |d| format!(", e.g. {d}"))
                    )
                })
                .collect();
            format!(
                "consistency: {} of {n} conditions FAILED: {}",
                f.len(),
                f.join("; ")
            )
        }
    }
}

const CONDITIONS: [(&str, &str); 14] = [
    ("3.3.2.1", "W_YTD = sum(D_YTD) of the warehouse's districts"),
    (
        "3.3.2.2",
        "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) in the district",
    ),
    (
        "3.3.2.3",
        "max(NO_O_ID) - min(NO_O_ID) + 1 = NEW-ORDER rows of the district",
    ),
    ("3.3.2.4", "sum(O_OL_CNT) = ORDER-LINE rows of the district"),
    (
        "3.3.2.5",
        "O_CARRIER_ID is null iff the order has a NEW-ORDER row",
    ),
    ("3.3.2.6", "O_OL_CNT = the order's ORDER-LINE rows"),
    (
        "3.3.2.7",
        "OL_DELIVERY_D is null iff the order's O_CARRIER_ID is null",
    ),
    ("3.3.2.8", "W_YTD = sum(H_AMOUNT) with H_W_ID = W_ID"),
    (
        "3.3.2.9",
        "D_YTD = sum(H_AMOUNT) of the district (H_W_ID, H_D_ID)",
    ),
    (
        "3.3.2.10",
        "C_BALANCE = sum(OL_AMOUNT of delivered lines) - sum(H_AMOUNT) of the customer",
    ),
    (
        "3.3.2.11",
        "count(ORDER) - count(NEW-ORDER) = 2100 + orders delivered since the load, per district",
    ),
    (
        "3.3.2.12",
        "C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT of delivered lines) of the customer",
    ),
    (
        "index.customer_by_name",
        "one customer_by_name entry per customer, matching its C_LAST and C_FIRST",
    ),
    (
        "index.order_by_customer",
        "one order_by_customer entry per order, matching its O_C_ID",
    ),
];

struct Checker {
    conds: Vec<Condition>,
}

impl Checker {
    fn new() -> Checker {
        Checker {
            conds: CONDITIONS
                .iter()
                .map(|&(_, description)| Condition {
                    description,
                    passed: true,
                    checked: 0,
                    violations: 0,
                    details: Vec::new(),
                })
                .collect(),
        }
    }

    /// Record one instance of condition number `i` (index in
    /// [`CONDITIONS`]); `detail` describes a failure.
    fn check(&mut self, i: usize, ok: bool, detail: impl FnOnce() -> String) {
        let c = &mut self.conds[i];
        c.checked += 1;
        if !ok {
            c.passed = false;
            c.violations += 1;
            if c.details.len() < MAX_DETAILS {
                c.details.push(detail());
            }
        }
    }

    fn report(self) -> ConsistencyReport {
        let passed = self.conds.iter().all(|c| c.passed);
        ConsistencyReport {
            passed,
            conditions: Conditions(
                CONDITIONS
                    .iter()
                    .map(|(n, _)| n.to_string())
                    .zip(self.conds)
                    .collect(),
            ),
        }
    }
}

/// Visit the rows of `t` in `[lo, hi]` in key order, [`CHUNK`] rows per
/// read transaction.
fn scan_all(
    w: &mut Worker,
    t: TableId,
    lo: &[u8],
    hi: &[u8],
    mut f: impl FnMut(&[u8], &[u8]),
) -> Result<(), Error> {
    // One chunk's rows, copied into one buffer reused by every chunk (keys
    // and values back to back; `ends` holds each row's key end and value
    // end): the check reads every row of the database, and two allocations
    // per row were most of its cost. The rows are handed to `f` only after
    // the chunk's transaction committed, so a retried attempt is not seen.
    let mut buf: Vec<u8> = Vec::new();
    let mut ends: Vec<(usize, usize)> = Vec::new();
    let mut cursor: Option<Vec<u8>> = None;
    loop {
        let from = match &cursor {
            None => Bound::Included(lo),
            Some(k) => Bound::Excluded(k.as_slice()),
        };
        let n = w.run(|tx| {
            buf.clear();
            ends.clear();
            tx.scan(
                t,
                from,
                Bound::Included(hi),
                ScanOptions::new().limit(CHUNK),
                |k, v| {
                    buf.extend_from_slice(k);
                    let ke = buf.len();
                    buf.extend_from_slice(v);
                    ends.push((ke, buf.len()));
                    true
                },
            )
        })?;
        let mut at = 0;
        for &(ke, ve) in &ends {
            f(&buf[at..ke], &buf[ke..ve]);
            at = ve;
        }
        if n < CHUNK {
            return Ok(());
        }
        let last_start = ends.len().checked_sub(2).map_or(0, |i| ends[i].1);
        let last_key = &buf[last_start..ends[ends.len() - 1].0];
        match &mut cursor {
            Some(c) => {
                c.clear();
                c.extend_from_slice(last_key);
            }
            None => cursor = Some(last_key.to_vec()),
        }
    }
}

fn malformed(what: &str, k: &[u8]) -> Error {
    Error::InvalidArgument(format!("malformed {what} row at key {k:02x?}"))
}

/// Decode every row of `[lo, hi]`; a malformed row is an error.
fn rows_of<R: Row>(
    w: &mut Worker,
    t: TableId,
    lo: &[u8],
    hi: &[u8],
    what: &str,
) -> Result<Vec<R>, Error> {
    let mut out = Vec::new();
    let mut bad = None;
    scan_all(w, t, lo, hi, |k, v| match R::decode(v) {
        Some(r) => out.push(r),
        None => {
            bad.get_or_insert_with(|| malformed(what, k));
        }
    })?;
    match bad {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// What [`check_database`] found besides the conditions.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FoundTpcc {
    /// Warehouses (rows of WAREHOUSE, numbered 1..=W).
    pub warehouses: u32,
    /// Whether the TPC-C-hybrid tables (SUPPLIER, NATION, REGION) are there
    /// too.
    pub hybrid: bool,
}

/// The warehouse count of a TPC-C database: WAREHOUSE must hold exactly
/// the rows 1..=W.
pub fn count_warehouses(db: &Database, t: &Tables) -> Result<u32, Error> {
    let mut w = db.worker()?;
    let rows: Vec<Warehouse> = rows_of(
        &mut w,
        t.warehouse,
        &warehouse_key(0),
        &warehouse_key(u16::MAX),
        "warehouse",
    )?;
    for (i, r) in rows.iter().enumerate() {
        if r.w_id as usize != i + 1 {
            return Err(Error::InvalidArgument(format!(
                "TPC-C: WAREHOUSE is not numbered 1..={}: row {} has W_ID {}",
                rows.len(),
                i + 1,
                r.w_id
            )));
        }
    }
    if rows.is_empty() {
        return Err(Error::InvalidArgument(
            "TPC-C: the WAREHOUSE table is empty".into(),
        ));
    }
    Ok(rows.len() as u32)
}

/// Check the consistency conditions on a TPC-C (or TPC-C-hybrid) database
/// whose configuration is not known, e.g. one just recovered from its log:
/// attach to the tables by name ([`Tables::open`]; a missing table is an
/// error naming it), take the warehouse count from WAREHOUSE, then run
/// [`check_consistency`]. TPC-C-hybrid only adds tables and changes
/// S_QUANTITY, which no condition reads, so its databases are checked the
/// same way.
pub fn check_database(db: &Database) -> Result<(FoundTpcc, ConsistencyReport), Error> {
    let t = Tables::open(db).map_err(|e| match e {
        Error::NoSuchTable(name) => Error::InvalidArgument(format!(
            "not a TPC-C database: no table named '{name}' (it has: {})",
            match db.table_names() {
                n if n.is_empty() => "no tables".to_string(),
                n => n.join(", "),
            }
        )),
        e => e,
    })?;
    let found = FoundTpcc {
        warehouses: count_warehouses(db, &t)?,
        hybrid: super::schema::HybridTables::open(db).is_ok(),
    };
    let report = check_consistency(db, &TpccConfig::new(found.warehouses))?;
    Ok((found, report))
}

/// History sums: per warehouse, per district, per customer (cents).
#[derive(Default)]
struct HistorySums {
    by_w: HashMap<u16, i64>,
    by_d: HashMap<(u16, u8), i64>,
    by_c: HashMap<(u16, u8, u32), i64>,
}

/// Check TPC-C consistency conditions 3.3.2.1-3.3.2.12 and the secondary
/// indexes on a quiescent database loaded by [`super::Tpcc`] with `cfg`.
/// Errors: the tables are missing, a row does not decode, or no worker slot
/// is free.
pub fn check_consistency(db: &Database, cfg: &TpccConfig) -> Result<ConsistencyReport, Error> {
    let t = Tables::open(db)?;
    let mut w = db.worker()?;
    let mut ck = Checker::new();

    // HISTORY has no per-warehouse key: sum it all once.
    let mut h = HistorySums::default();
    let mut bad = None;
    scan_all(
        &mut w,
        t.history,
        &[],
        &[0xff; 13],
        |k, v| match History::decode(v) {
            Some(r) => {
                *h.by_w.entry(r.h_w_id).or_default() += r.h_amount;
                *h.by_d.entry((r.h_w_id, r.h_d_id)).or_default() += r.h_amount;
                *h.by_c
                    .entry((r.h_c_w_id, r.h_c_d_id, r.h_c_id))
                    .or_default() += r.h_amount;
            }
            None => {
                bad.get_or_insert_with(|| malformed("history", k));
            }
        },
    )?;
    if let Some(e) = bad {
        return Err(e);
    }

    for wid in 1..=cfg.warehouses as u16 {
        let wk = warehouse_key(wid);
        let whs: Vec<Warehouse> = rows_of(&mut w, t.warehouse, &wk, &wk, "warehouse")?;
        let Some(wh) = whs.first() else {
            return Err(Error::InvalidArgument(format!(
                "TPC-C: warehouse {wid} is missing"
            )));
        };
        let dists: Vec<District> = rows_of(
            &mut w,
            t.district,
            &district_key(wid, 0),
            &district_key(wid, u8::MAX),
            "district",
        )?;
        let d_sum: i64 = dists.iter().map(|d| d.d_ytd).sum();
        ck.check(
            0,
            wh.w_ytd == d_sum && dists.len() == DISTRICTS as usize,
            || {
                format!(
                    "warehouse {wid}: W_YTD {} vs sum(D_YTD) {d_sum} over {} districts",
                    wh.w_ytd,
                    dists.len()
                )
            },
        );
        let h_w = h.by_w.get(&wid).copied().unwrap_or(0);
        ck.check(7, wh.w_ytd == h_w, || {
            format!("warehouse {wid}: W_YTD {} vs sum(H_AMOUNT) {h_w}", wh.w_ytd)
        });
        for dist in &dists {
            check_district(&mut w, &t, &h, &mut ck, dist)?;
        }
    }
    Ok(ck.report())
}

fn check_district(
    w: &mut Worker,
    t: &Tables,
    h: &HistorySums,
    ck: &mut Checker,
    dist: &District,
) -> Result<(), Error> {
    let (wid, d) = (dist.d_w_id, dist.d_id);
    let lo7 = order_key(wid, d, 0);
    let hi7 = order_key(wid, d, u32::MAX);

    let new_orders: Vec<NewOrder> = rows_of(w, t.new_order, &lo7, &hi7, "new_order")?;
    let orders: Vec<Order> = rows_of(w, t.order, &lo7, &hi7, "order")?;
    let no_ids: Vec<u32> = new_orders.iter().map(|n| n.no_o_id).collect();
    let max_o = orders.last().map_or(0, |o| o.o_id);

    // 3.3.2.2
    let next = dist.d_next_o_id;
    let max_no = no_ids.last().copied();
    ck.check(
        1,
        next.wrapping_sub(1) == max_o && max_no.is_none_or(|m| m == max_o),
        || format!("district ({wid}, {d}): D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}, max(NO_O_ID) = {max_no:?}", next.wrapping_sub(1)),
    );
    // 3.3.2.3
    if let (Some(&min), Some(&max)) = (no_ids.first(), no_ids.last()) {
        let n = no_ids.len() as u64;
        ck.check(2, (max - min) as u64 + 1 == n, || {
            format!("district ({wid}, {d}): NO_O_ID {min}..={max} but {n} NEW-ORDER rows")
        });
    }

    // Orders by id (ids are dense from 1 in a consistent database, but do not
    // rely on it).
    let pos: HashMap<u32, usize> = orders
        .iter()
        .enumerate()
        .map(|(i, o)| (o.o_id, i))
        .collect();
    let mut has_no = vec![false; orders.len()];
    for &o in &no_ids {
        match pos.get(&o) {
            Some(&i) => has_no[i] = true,
            None => ck.check(4, false, || {
                format!("district ({wid}, {d}): NEW-ORDER {o} has no ORDER row")
            }),
        }
    }
    // 3.3.2.5
    for (o, &no) in orders.iter().zip(&has_no) {
        ck.check(4, (o.o_carrier_id == 0) == no, || {
            format!(
                "order ({wid}, {d}, {}): O_CARRIER_ID {} with{} a NEW-ORDER row",
                o.o_id,
                o.o_carrier_id,
                if no { "" } else { "out" }
            )
        });
    }

    // ORDER-LINE: count per order, 3.3.2.7, delivered amounts per customer.
    let mut line_cnt = vec![0u32; orders.len()];
    let mut lines_total = 0u64;
    let mut delivered: HashMap<u32, i64> = HashMap::default();
    let mut bad = None;
    scan_all(
        w,
        t.order_line,
        &order_line_key(wid, d, 0, 0),
        &order_line_key(wid, d, u32::MAX, u8::MAX),
        |k, v| {
            let Some(l) = OrderLine::decode(v) else {
                bad.get_or_insert_with(|| malformed("order_line", k));
                return;
            };
            lines_total += 1;
            match pos.get(&l.ol_o_id) {
                Some(&i) => {
                    line_cnt[i] += 1;
                    let o = &orders[i];
                    if l.ol_delivery_d != 0 {
                        *delivered.entry(o.o_c_id).or_default() += l.ol_amount;
                    }
                    ck.check(6, (l.ol_delivery_d == 0) == (o.o_carrier_id == 0), || {
                        format!(
                            "line ({wid}, {d}, {}, {}): OL_DELIVERY_D {} but O_CARRIER_ID {}",
                            l.ol_o_id, l.ol_number, l.ol_delivery_d, o.o_carrier_id
                        )
                    });
                }
                None => ck.check(6, false, || {
                    format!(
                        "line ({wid}, {d}, {}, {}) has no ORDER row",
                        l.ol_o_id, l.ol_number
                    )
                }),
            }
        },
    )?;
    if let Some(e) = bad {
        return Err(e);
    }
    // 3.3.2.4
    let ol_sum: u64 = orders.iter().map(|o| o.o_ol_cnt as u64).sum();
    ck.check(3, ol_sum == lines_total, || {
        format!("district ({wid}, {d}): sum(O_OL_CNT) {ol_sum} vs {lines_total} ORDER-LINE rows")
    });
    // 3.3.2.6
    for (o, &n) in orders.iter().zip(&line_cnt) {
        ck.check(5, o.o_ol_cnt as u32 == n, || {
            format!(
                "order ({wid}, {d}, {}): O_OL_CNT {} but {n} lines",
                o.o_id, o.o_ol_cnt
            )
        });
    }
    // 3.3.2.9
    let h_d = h.by_d.get(&(wid, d)).copied().unwrap_or(0);
    ck.check(8, dist.d_ytd == h_d, || {
        format!(
            "district ({wid}, {d}): D_YTD {} vs sum(H_AMOUNT) {h_d}",
            dist.d_ytd
        )
    });
    // 3.3.2.11 (see docs/TPCC.md: the literal "= 2100" holds until the first
    // Delivery; each delivered order adds one).
    let delivered_since_load = orders
        .iter()
        .filter(|o| o.o_id >= FIRST_NEW_ORDER && o.o_carrier_id != 0)
        .count() as i64;
    let diff = orders.len() as i64 - no_ids.len() as i64;
    ck.check(10, diff == 2100 + delivered_since_load, || {
        format!(
            "district ({wid}, {d}): count(ORDER) - count(NEW-ORDER) = {diff}, \
             expected 2100 + {delivered_since_load}"
        )
    });

    // CUSTOMER: 3.3.2.10, 3.3.2.12, and the name index.
    let custs: Vec<Customer> = rows_of(
        w,
        t.customer,
        &customer_key(wid, d, 0),
        &customer_key(wid, d, u32::MAX),
        "customer",
    )?;
    let mut names: HashMap<u32, (Text<16>, Text<16>)> =
        HashMap::with_capacity_and_hasher(custs.len(), Default::default());
    for c in &custs {
        let del = delivered.get(&c.c_id).copied().unwrap_or(0);
        let paid = h.by_c.get(&(wid, d, c.c_id)).copied().unwrap_or(0);
        ck.check(9, c.c_balance == del - paid, || {
            format!(
                "customer ({wid}, {d}, {}): C_BALANCE {} vs delivered {del} - paid {paid}",
                c.c_id, c.c_balance
            )
        });
        ck.check(11, c.c_balance + c.c_ytd_payment == del, || {
            format!(
                "customer ({wid}, {d}, {}): C_BALANCE {} + C_YTD_PAYMENT {} vs delivered {del}",
                c.c_id, c.c_balance, c.c_ytd_payment
            )
        });
        names.insert(c.c_id, (c.c_last, c.c_first));
    }

    // Index checks: every entry names a row that matches it, and there are
    // as many entries as rows (so none is missing).
    let mut lo = [0u8; CUSTOMER_NAME_KEY_LEN];
    lo[..3].copy_from_slice(&district_key(wid, d));
    let mut hi = [0xffu8; CUSTOMER_NAME_KEY_LEN];
    hi[..3].copy_from_slice(&district_key(wid, d));
    let mut entries = 0usize;
    scan_all(w, t.customer_by_name, &lo, &hi, |k, _| {
        entries += 1;
        let c = customer_name_key_c_id(k);
        let ok = names
            .get(&c)
            .is_some_and(|(last, first)| customer_name_key(wid, d, last, first, c) == k);
        ck.check(12, ok, || {
            format!("customer_by_name entry {k:02x?} does not match customer {c}")
        });
    })?;
    ck.check(12, entries == custs.len(), || {
        format!(
            "district ({wid}, {d}): {entries} customer_by_name entries for {} customers",
            custs.len()
        )
    });

    let mut entries = 0usize;
    scan_all(
        w,
        t.order_by_customer,
        &order_customer_key(wid, d, 0, 0),
        &order_customer_key(wid, d, u32::MAX, u32::MAX),
        |k, _| {
            entries += 1;
            let c = u32::from_be_bytes(k[3..7].try_into().expect("key"));
            let o = order_customer_key_o_id(k);
            let ok = pos.get(&o).is_some_and(|&i| orders[i].o_c_id == c);
            ck.check(13, ok, || {
                format!("order_by_customer entry (customer {c}, order {o}) does not match an order")
            });
        },
    )?;
    ck.check(13, entries == orders.len(), || {
        format!(
            "district ({wid}, {d}): {entries} order_by_customer entries for {} orders",
            orders.len()
        )
    });
    Ok(())
}

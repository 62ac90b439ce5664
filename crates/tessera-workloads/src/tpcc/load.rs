//! The initial population (clause 4.3.3.1), loaded in parallel.
//!
//! The work is cut into tasks: one per district (its customers with their
//! name-index entries and HISTORY rows, and its orders with their lines,
//! order-index entries and NEW-ORDER rows), ten STOCK chunks per warehouse,
//! ten ITEM chunks, and one task per warehouse for the WAREHOUSE and
//! DISTRICT rows. Loader threads take tasks from a shared counter, so
//! partitioning is by warehouse (and finer), ITEM is split across threads,
//! and one warehouse still loads on every thread. Each task draws from its
//! own RNG seeded from the configuration's seed and the task, so the data
//! does not depend on the number of threads or on which thread ran what.
//!
//! Rows are generated outside the transactions and inserted in batches of
//! [`BATCH`]; a batch retried after a conflict (neighbouring tasks share
//! index leaves) inserts the same rows again.
//!
//! TPC-C-hybrid ([`load_hybrid`]) adds ten SUPPLIER chunks and one task for
//! NATION and REGION to the same task list (after the TPC-C tasks, which stay
//! exactly as they are: plain TPC-C loads the same data either way).

use std::sync::atomic::{AtomicUsize, Ordering};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tessera::{Database, Error, TableId, Worker};

use super::hybrid::{nation_region, NATION_KEYS, REGION_NAMES, SUPPLIERS};
use super::random::{self, nurand, uniform, NuRandC, A_C_LAST};
use super::schema::*;
use super::{TpccConfig, CUSTOMERS, DISTRICTS, FIRST_NEW_ORDER, ITEMS, ORDERS};

/// Rows inserted per loading transaction.
pub const BATCH: usize = 1000;

/// ITEM and each warehouse's STOCK are loaded in this many chunks.
const CHUNKS: u32 = 10;

/// Undelivered orders per district at load.
const NEW_ORDERS: u32 = ORDERS - FIRST_NEW_ORDER + 1;

/// One unit of loading work.
#[derive(Clone, Copy, Debug)]
enum Task {
    /// Customers, history and orders of district `(w, d)`.
    District(u16, u8),
    /// Chunk `c` of warehouse `w`'s STOCK.
    Stock(u16, u32),
    /// Chunk `c` of ITEM.
    Items(u32),
    /// The WAREHOUSE row and its DISTRICT rows.
    Warehouse(u16),
    /// Chunk `c` of SUPPLIER (TPC-C-hybrid).
    Suppliers(u32),
    /// NATION and REGION (TPC-C-hybrid).
    NationsRegions,
}

impl Task {
    /// A number that identifies the task, for its RNG seed.
    fn tag(self) -> u64 {
        match self {
            Task::District(w, d) => (1 << 60) | ((w as u64) << 8) | d as u64,
            Task::Stock(w, c) => (2 << 60) | ((w as u64) << 8) | c as u64,
            Task::Items(c) => (3 << 60) | c as u64,
            Task::Warehouse(w) => (4 << 60) | w as u64,
            // 5 << 60 is taken by the O_OL_CNT streams (`ol_cnt_rng`).
            Task::Suppliers(c) => (6 << 60) | c as u64,
            Task::NationsRegions => 7 << 60,
        }
    }
}

fn mix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn task_rng(seed: u64, tag: u64) -> SmallRng {
    SmallRng::seed_from_u64(mix64(seed ^ mix64(tag)))
}

/// The RNG of district `(w, d)`'s O_OL_CNT values: a stream of its own, so
/// that [`rows_to_load`] can count the order lines without generating them.
fn ol_cnt_rng(seed: u64, w: u16, d: u8) -> SmallRng {
    task_rng(seed, (5 << 60) | ((w as u64) << 8) | d as u64)
}

fn ol_cnts(seed: u64, w: u16, d: u8) -> impl Iterator<Item = u8> {
    let mut rng = ol_cnt_rng(seed, w, d);
    (0..ORDERS).map(move |_| uniform(&mut rng, 5, 15) as u8)
}

/// Rows (index entries included) that [`load`] inserts for `cfg`: exact,
/// the order-line counts are replayed from their RNG streams.
pub fn rows_to_load(cfg: &TpccConfig) -> u64 {
    let mut n = ITEMS as u64;
    for w in 1..=cfg.warehouses as u16 {
        n += 1 + DISTRICTS as u64 + ITEMS as u64;
        for d in 1..=DISTRICTS {
            // Customer, name index, history; order, order index; new orders.
            n += 3 * CUSTOMERS as u64 + 2 * ORDERS as u64 + NEW_ORDERS as u64;
            n += ol_cnts(cfg.seed, w, d).map(u64::from).sum::<u64>();
        }
    }
    n
}

/// Rows [`load_hybrid`] inserts on top of [`rows_to_load`]: SUPPLIER, NATION
/// and REGION.
pub fn hybrid_rows_to_load() -> u64 {
    SUPPLIERS as u64 + NATION_KEYS.len() as u64 + REGION_NAMES.len() as u64
}

/// A task's RNG and string scratch.
struct Gen {
    rng: SmallRng,
    s: Vec<u8>,
}

impl Gen {
    fn astr<const N: usize>(&mut self, x: usize, y: usize) -> Text<N> {
        self.s.clear();
        random::a_string(&mut self.rng, x, y, &mut self.s);
        Text::new(&self.s)
    }

    fn nstr<const N: usize>(&mut self, x: usize, y: usize) -> Text<N> {
        self.s.clear();
        random::n_string(&mut self.rng, x, y, &mut self.s);
        Text::new(&self.s)
    }

    fn zip(&mut self) -> Text<9> {
        self.s.clear();
        random::zip(&mut self.rng, &mut self.s);
        Text::new(&self.s)
    }

    /// I_DATA / S_DATA: 26..50 characters, 10% with "ORIGINAL".
    fn data(&mut self) -> Text<50> {
        self.s.clear();
        random::data_field(&mut self.rng, 26, 50, &mut self.s);
        Text::new(&self.s)
    }

    fn u(&mut self, x: u32, y: u32) -> u32 {
        uniform(&mut self.rng, x, y)
    }

    /// Street 1, street 2, city, state, zip (clause 4.3.3.1).
    #[allow(clippy::type_complexity)]
    fn address(&mut self) -> (Text<20>, Text<20>, Text<20>, Text<2>, Text<9>) {
        (
            self.astr(10, 20),
            self.astr(10, 20),
            self.astr(10, 20),
            self.astr(2, 2),
            self.zip(),
        )
    }
}

/// Rows generated for one loading transaction.
struct Batch {
    /// Keys and values, back to back.
    bytes: Vec<u8>,
    /// `(table, start in bytes, key length, value length)`.
    entries: Vec<(TableId, usize, usize, usize)>,
    row: Vec<u8>,
    /// Table names for the error message of a duplicate key.
    names: Vec<(TableId, &'static str)>,
}

impl Batch {
    fn new(t: &Tables, h: Option<&HybridTables>) -> Batch {
        let mut names = vec![
            (t.warehouse, "warehouse"),
            (t.district, "district"),
            (t.customer, "customer"),
            (t.customer_by_name, "customer_by_name"),
            (t.history, "history"),
            (t.new_order, "new_order"),
            (t.order, "order"),
            (t.order_by_customer, "order_by_customer"),
            (t.order_line, "order_line"),
            (t.item, "item"),
            (t.stock, "stock"),
        ];
        if let Some(h) = h {
            names.extend([
                (h.supplier, "supplier"),
                (h.nation, "nation"),
                (h.region, "region"),
            ]);
        }
        Batch {
            bytes: Vec::with_capacity(BATCH * 128),
            entries: Vec::with_capacity(BATCH + 32),
            row: Vec::with_capacity(1024),
            names,
        }
    }

    fn add<R: Row>(&mut self, t: TableId, key: &[u8], row: &R) {
        let mut buf = std::mem::take(&mut self.row);
        row.encode(&mut buf);
        self.add_raw(t, key, &buf);
        self.row = buf;
    }

    fn add_raw(&mut self, t: TableId, key: &[u8], val: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(val);
        self.entries.push((t, start, key.len(), val.len()));
    }

    /// Insert the rows in one transaction (retried on conflicts), report
    /// them as progress, and clear the batch.
    fn flush(&mut self, w: &mut Worker, progress: &(dyn Fn(u64) + Sync)) -> Result<u64, Error> {
        if self.entries.is_empty() {
            return Ok(0);
        }
        let (bytes, entries) = (&self.bytes, &self.entries);
        let dup = w.run(|tx| {
            for (i, &(t, s, kl, vl)) in entries.iter().enumerate() {
                if !tx.insert(t, &bytes[s..s + kl], &bytes[s + kl..s + kl + vl])? {
                    return Ok(Some(i));
                }
            }
            Ok(None)
        })?;
        if let Some(i) = dup {
            let (t, s, kl, _) = self.entries[i];
            let name = self
                .names
                .iter()
                .find(|(id, _)| *id == t)
                .map_or("?", |(_, n)| n);
            return Err(Error::InvalidArgument(format!(
                "TPC-C table '{name}' already holds key {:02x?}: load into an empty database",
                &self.bytes[s..s + kl]
            )));
        }
        let n = self.entries.len() as u64;
        progress(n);
        self.bytes.clear();
        self.entries.clear();
        Ok(n)
    }

    /// Flush if the batch is full.
    fn maybe_flush(
        &mut self,
        w: &mut Worker,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        if self.entries.len() >= BATCH {
            self.flush(w, progress)
        } else {
            Ok(0)
        }
    }
}

/// Load the population of `cfg.warehouses` warehouses into the (empty)
/// tables `t` with `threads` threads; `c_load` holds the load's NURand
/// constants. Returns the number of rows (index entries included).
pub fn load(
    db: &Database,
    t: &Tables,
    cfg: &TpccConfig,
    c_load: &NuRandC,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    load_all(db, t, None, cfg, c_load, threads, progress)
}

/// [`load`] plus TPC-C-hybrid's SUPPLIER, NATION and REGION into the (empty)
/// tables `h`, in the same parallel pass. The TPC-C tables get exactly the
/// rows [`load`] inserts.
pub fn load_hybrid(
    db: &Database,
    t: &Tables,
    h: &HybridTables,
    cfg: &TpccConfig,
    c_load: &NuRandC,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    load_all(db, t, Some(h), cfg, c_load, threads, progress)
}

fn load_all(
    db: &Database,
    t: &Tables,
    h: Option<&HybridTables>,
    cfg: &TpccConfig,
    c_load: &NuRandC,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    let mut tasks = Vec::new();
    // Biggest first, for balance.
    for w in 1..=cfg.warehouses as u16 {
        for d in 1..=DISTRICTS {
            tasks.push(Task::District(w, d));
        }
    }
    for w in 1..=cfg.warehouses as u16 {
        for c in 0..CHUNKS {
            tasks.push(Task::Stock(w, c));
        }
    }
    for c in 0..CHUNKS {
        tasks.push(Task::Items(c));
    }
    for w in 1..=cfg.warehouses as u16 {
        tasks.push(Task::Warehouse(w));
    }
    if h.is_some() {
        for c in 0..CHUNKS {
            tasks.push(Task::Suppliers(c));
        }
        tasks.push(Task::NationsRegions);
    }
    let next = AtomicUsize::new(0);
    let now = super::now_ms();
    let threads = threads.clamp(1, tasks.len());
    let loaded = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (tasks, next) = (&tasks, &next);
                s.spawn(move || -> Result<u64, Error> {
                    let mut w = db.worker()?;
                    let mut b = Batch::new(t, h);
                    let mut n = 0;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&task) = tasks.get(i) else {
                            return Ok(n);
                        };
                        let mut g = Gen {
                            rng: task_rng(cfg.seed, task.tag()),
                            s: Vec::with_capacity(512),
                        };
                        n += match task {
                            Task::District(wid, d) => load_district(
                                &mut w, &mut b, &mut g, t, cfg, c_load, now, wid, d, progress,
                            )?,
                            Task::Stock(wid, c) => {
                                load_stock(&mut w, &mut b, &mut g, t, wid, c, progress)?
                            }
                            Task::Items(c) => load_items(&mut w, &mut b, &mut g, t, c, progress)?,
                            Task::Warehouse(wid) => {
                                load_warehouse(&mut w, &mut b, &mut g, t, wid, progress)?
                            }
                            // Only queued when `h` is set.
                            Task::Suppliers(c) => match h {
                                Some(h) => load_suppliers(&mut w, &mut b, &mut g, h, c, progress)?,
                                None => 0,
                            },
                            Task::NationsRegions => match h {
                                Some(h) => {
                                    load_nations_regions(&mut w, &mut b, &mut g, h, progress)?
                                }
                                None => 0,
                            },
                        };
                    }
                })
            })
            .collect();
        hs.into_iter().try_fold(0u64, |acc, h| {
            Ok::<u64, Error>(acc + h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))?)
        })
    })?;
    Ok(loaded)
}

/// The ids `chunk` of `CHUNKS` covers in `1..=ITEMS`.
fn chunk_ids(chunk: u32) -> std::ops::RangeInclusive<u32> {
    let per = ITEMS / CHUNKS;
    chunk * per + 1..=if chunk + 1 == CHUNKS {
        ITEMS
    } else {
        (chunk + 1) * per
    }
}

fn load_items(
    w: &mut Worker,
    b: &mut Batch,
    g: &mut Gen,
    t: &Tables,
    chunk: u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    let mut n = 0;
    for i in chunk_ids(chunk) {
        let row = Item {
            i_id: i,
            i_im_id: g.u(1, 10_000),
            i_name: g.astr(14, 24),
            i_price: g.u(100, 10_000) as i64,
            i_data: g.data(),
        };
        b.add(t.item, &item_key(i), &row);
        n += b.maybe_flush(w, progress)?;
    }
    Ok(n + b.flush(w, progress)?)
}

fn load_stock(
    w: &mut Worker,
    b: &mut Batch,
    g: &mut Gen,
    t: &Tables,
    wid: u16,
    chunk: u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    let mut n = 0;
    let mut row = Stock {
        s_w_id: wid,
        ..Default::default()
    };
    for i in chunk_ids(chunk) {
        row.s_i_id = i;
        row.s_quantity = g.u(10, 100) as i32;
        for d in 1..=DISTRICTS {
            *row.dist_mut(d) = g.astr(24, 24);
        }
        row.s_data = g.data();
        b.add(t.stock, &stock_key(wid, i), &row);
        n += b.maybe_flush(w, progress)?;
    }
    Ok(n + b.flush(w, progress)?)
}

fn load_warehouse(
    w: &mut Worker,
    b: &mut Batch,
    g: &mut Gen,
    t: &Tables,
    wid: u16,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    let (s1, s2, city, state, zip) = g.address();
    let row = Warehouse {
        w_id: wid,
        w_name: g.astr(6, 10),
        w_street_1: s1,
        w_street_2: s2,
        w_city: city,
        w_state: state,
        w_zip: zip,
        w_tax: g.u(0, 2000) as i32,
        w_ytd: 30_000_000,
    };
    b.add(t.warehouse, &warehouse_key(wid), &row);
    for d in 1..=DISTRICTS {
        let (s1, s2, city, state, zip) = g.address();
        let row = District {
            d_id: d,
            d_w_id: wid,
            d_name: g.astr(6, 10),
            d_street_1: s1,
            d_street_2: s2,
            d_city: city,
            d_state: state,
            d_zip: zip,
            d_tax: g.u(0, 2000) as i32,
            d_ytd: 3_000_000,
            d_next_o_id: ORDERS + 1,
        };
        b.add(t.district, &district_key(wid, d), &row);
    }
    b.flush(w, progress)
}

/// The supplier keys `chunk` of `CHUNKS` covers in `0..SUPPLIERS`.
fn supplier_chunk(chunk: u32) -> std::ops::Range<u32> {
    let per = SUPPLIERS / CHUNKS;
    chunk * per..if chunk + 1 == CHUNKS {
        SUPPLIERS
    } else {
        (chunk + 1) * per
    }
}

/// SUPPLIER rows (CH-benCHmark's columns, TPC-H's value rules where
/// CH-benCHmark has none; see docs/TPCC.md): the nation is uniform over the
/// 62 nations.
fn load_suppliers(
    w: &mut Worker,
    b: &mut Batch,
    g: &mut Gen,
    h: &HybridTables,
    chunk: u32,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    use std::io::Write as _;
    let mut n = 0;
    let mut text = Vec::with_capacity(32);
    for s in supplier_chunk(chunk) {
        let s = s as u16;
        let nation_idx = g.u(0, NATION_KEYS.len() as u32 - 1) as usize;
        text.clear();
        let _ = write!(text, "Supplier#{s:09}");
        let name = Text::new(&text);
        // TPC-H's phone format: a country code from the nation, then
        // three random groups.
        text.clear();
        let _ = write!(
            text,
            "{:02}-{:03}-{:03}-{:04}",
            nation_idx + 10,
            g.u(100, 999),
            g.u(100, 999),
            g.u(1000, 9999)
        );
        let row = Supplier {
            su_suppkey: s,
            su_name: name,
            su_address: g.astr(10, 40),
            su_nationkey: NATION_KEYS[nation_idx],
            su_phone: Text::new(&text),
            // -999.99 ..= 9,999.99.
            su_acctbal: g.u(0, 1_099_998) as i64 - 99_999,
            su_comment: g.astr(25, 100),
        };
        b.add(h.supplier, &supplier_key(s), &row);
        n += b.maybe_flush(w, progress)?;
    }
    Ok(n + b.flush(w, progress)?)
}

/// The 62 NATION rows and the 5 REGION rows.
fn load_nations_regions(
    w: &mut Worker,
    b: &mut Batch,
    g: &mut Gen,
    h: &HybridTables,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    for (r, name) in REGION_NAMES.iter().enumerate() {
        let row = Region {
            r_regionkey: r as u8,
            r_name: Text::new(name.as_bytes()),
            r_comment: g.astr(31, 115),
        };
        b.add(h.region, &region_key(r as u8), &row);
    }
    let mut name = [0u8; 8];
    for (i, &k) in NATION_KEYS.iter().enumerate() {
        // "Nation x": x is the key's character (CH-benCHmark keys nations
        // by these ASCII codes).
        name[..7].copy_from_slice(b"Nation ");
        name[7] = k;
        let row = Nation {
            n_nationkey: k,
            n_name: Text::new(&name),
            n_regionkey: nation_region(i),
            n_comment: g.astr(31, 114),
        };
        b.add(h.nation, &nation_key(k), &row);
    }
    b.flush(w, progress)
}

#[allow(clippy::too_many_arguments)]
fn load_district(
    w: &mut Worker,
    b: &mut Batch,
    g: &mut Gen,
    t: &Tables,
    cfg: &TpccConfig,
    c_load: &NuRandC,
    now: u64,
    wid: u16,
    d: u8,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<u64, Error> {
    let mut n = 0;
    // CUSTOMER, its name index, HISTORY.
    let mut name = [0u8; 16];
    for c in 1..=CUSTOMERS {
        // Clause 4.3.3.1: the first 1000 customers take each last name
        // once, the rest draw NURand(255, 0, 999) with the load's C.
        let num = if c <= 1000 {
            c - 1
        } else {
            nurand(&mut g.rng, A_C_LAST, c_load.c_last, 0, 999)
        };
        let len = random::last_name(num, &mut name);
        let (s1, s2, city, state, zip) = g.address();
        let row = Customer {
            c_id: c,
            c_d_id: d,
            c_w_id: wid,
            c_first: g.astr(8, 16),
            c_middle: Text::new(b"OE"),
            c_last: Text::new(&name[..len]),
            c_street_1: s1,
            c_street_2: s2,
            c_city: city,
            c_state: state,
            c_zip: zip,
            c_phone: g.nstr(16, 16),
            c_since: now,
            c_credit: Text::new(if g.u(1, 10) == 1 { b"BC" } else { b"GC" }),
            c_credit_lim: 5_000_000,
            c_discount: g.u(0, 5000) as i32,
            c_balance: -1000,
            c_ytd_payment: 1000,
            c_payment_cnt: 1,
            c_delivery_cnt: 0,
            c_data: g.astr(300, 500),
        };
        b.add(t.customer, &customer_key(wid, d, c), &row);
        b.add_raw(
            t.customer_by_name,
            &customer_name_key(wid, d, &row.c_last, &row.c_first, c),
            &[],
        );
        let h = History {
            h_c_id: c,
            h_c_d_id: d,
            h_c_w_id: wid,
            h_d_id: d,
            h_w_id: wid,
            h_date: now,
            h_amount: 1000,
            h_data: g.astr(12, 24),
        };
        let seq = ((wid as u64) << 32) | ((d as u64) << 16) | c as u64;
        b.add(t.history, &history_key(0, seq), &h);
        n += b.maybe_flush(w, progress)?;
    }
    // ORDER (customers in a random permutation), its index, ORDER-LINE,
    // NEW-ORDER for the last 900.
    let mut perm: Vec<u32> = (1..=CUSTOMERS).collect();
    perm.shuffle(&mut g.rng);
    let mut line = OrderLine {
        ol_d_id: d,
        ol_w_id: wid,
        ol_supply_w_id: wid,
        ol_quantity: 5,
        ..Default::default()
    };
    for (o, ol_cnt) in (1..=ORDERS).zip(ol_cnts(cfg.seed, wid, d)) {
        let delivered = o < FIRST_NEW_ORDER;
        let c = perm[o as usize - 1];
        let row = Order {
            o_id: o,
            o_d_id: d,
            o_w_id: wid,
            o_c_id: c,
            o_entry_d: now,
            o_carrier_id: if delivered { g.u(1, 10) as u8 } else { 0 },
            o_ol_cnt: ol_cnt,
            o_all_local: 1,
        };
        b.add(t.order, &order_key(wid, d, o), &row);
        b.add_raw(t.order_by_customer, &order_customer_key(wid, d, c, o), &[]);
        line.ol_o_id = o;
        line.ol_delivery_d = if delivered { now } else { 0 };
        for ol in 1..=ol_cnt {
            line.ol_number = ol;
            line.ol_i_id = g.u(1, ITEMS);
            line.ol_amount = if delivered { 0 } else { g.u(1, 999_999) as i64 };
            line.ol_dist_info = g.astr(24, 24);
            b.add(t.order_line, &order_line_key(wid, d, o, ol), &line);
        }
        if !delivered {
            let no = NewOrder {
                no_o_id: o,
                no_d_id: d,
                no_w_id: wid,
            };
            b.add(t.new_order, &new_order_key(wid, d, o), &no);
        }
        n += b.maybe_flush(w, progress)?;
    }
    Ok(n + b.flush(w, progress)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_items_once() {
        let mut all: Vec<u32> = (0..CHUNKS).flat_map(chunk_ids).collect();
        all.sort_unstable();
        assert_eq!(all, (1..=ITEMS).collect::<Vec<_>>());
    }

    #[test]
    fn supplier_chunks_cover_the_suppliers_once() {
        let all: Vec<u32> = (0..CHUNKS).flat_map(supplier_chunk).collect();
        assert_eq!(all, (0..SUPPLIERS).collect::<Vec<_>>());
    }

    #[test]
    fn rows_to_load_counts_every_row() {
        let cfg = TpccConfig::new(2);
        let n = rows_to_load(&cfg);
        // Per warehouse about 100k stock + 10 * (9000 + 6000 + 900 + ~30000).
        let per_w = (n - ITEMS as u64) / 2;
        assert!((550_000..570_000).contains(&per_w), "{per_w}");
        // Deterministic.
        assert_eq!(n, rows_to_load(&cfg));
    }
}

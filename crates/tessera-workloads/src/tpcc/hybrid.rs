//! TPC-C-hybrid: ERMIA's TPC-C with a read-mostly transaction added, TPC-CH
//! Q2\* (a modified Query 2 of the CH-benCHmark / TPC-CH).
//!
//! ERMIA (SIGMOD 2016, section 4.2) specifies: Q2\* picks a random region
//! and updates the STOCK rows, supplied by that region's suppliers, whose
//! quantity is below a threshold; its size is the fraction of SUPPLIER it
//! scans; the mix is NewOrder 40, Payment 38, Q2\* 10, OrderStatus 4,
//! Delivery 4, StockLevel 4. It leaves the threshold, the update and the
//! exact scan open; docs/TPCC.md ("TPC-C-hybrid") lists every choice made
//! here and why. In short:
//!
//! * **Tables**: CH-benCHmark's SUPPLIER (10,000 rows), NATION (62, keyed by
//!   the ASCII codes of `0-9A-Za-z`) and REGION (5), in
//!   [`schema`](super::schema); loaded with the TPC-C tables in one parallel
//!   pass ([`super::load::load_hybrid`]).
//! * **Stock to supplier**: CH-benCHmark's rule `su_suppkey = (s_w_id *
//!   s_i_id) mod 10000`. No index: [`SupplyMap`] enumerates a supplier's
//!   items in a warehouse arithmetically (a linear congruence), so Q2\* reads
//!   only STOCK rows, never an index that could add reads or go stale.
//! * **Q2\***: read the REGION row, scan NATION for the region's nations,
//!   scan a contiguous, wrapping range of `q2_size_pct`% of the supplier keys
//!   from a random start, keep the suppliers of those nations, and for each
//!   one read every STOCK row it supplies in every warehouse; rows with
//!   S_QUANTITY below [`Q2_THRESHOLD`] (15) get [`Q2_REFILL`] (91, NewOrder's
//!   restock) added. Only S_QUANTITY changes, which no TPC-C consistency
//!   condition reads, so the conditions still hold after a run.
//!
//! [`TpccHybrid`] reuses [`Tpcc`](super::Tpcc) for the five TPC-C
//! transactions (inputs, terminals, execution) and adds Q2\* through
//! [`super::extended`] ([`Q2Star`] is the added transaction); it is one
//! [`Workload`](crate::driver::Workload) for the shared driver, so every
//! protocol runs it unchanged.

use std::ops::Bound;
use std::sync::OnceLock;

use rand::Rng;
use tessera::{
    Database, Error, KeySet, Request, ScanOptions, Transaction, TxError, TxResult, Worker,
};

use super::extended::{ExtendedConfig, ExtendedThread, ExtendedTxn, ExtraTxn, TpccExtended};
use super::random::uniform;
use super::schema::{
    region_key, stock_key, supplier_key, Field, HybridTables, Nation, Region, Row, Stock, Supplier,
    Tables, Text,
};
use super::txns::{missing, must_get, vanished};
use super::{load, TpccThread, TxnType, ITEMS};

/// SUPPLIER rows (CH-benCHmark), keys `0..SUPPLIERS`; also the modulus of
/// the stock-to-supplier rule.
pub const SUPPLIERS: u32 = 10_000;

/// NATION keys: the ASCII codes of `0-9`, `A-Z`, `a-z` (62 nations, as in
/// CH-benCHmark, where a customer's nation is the first character of its
/// C_STATE; our a-strings use exactly these characters).
pub const NATION_KEYS: [u8; 62] = nation_keys();

const fn nation_keys() -> [u8; 62] {
    let mut k = [0u8; 62];
    let mut i = 0;
    while i < 62 {
        k[i] = if i < 10 {
            b'0' + i as u8
        } else if i < 36 {
            b'A' + (i - 10) as u8
        } else {
            b'a' + (i - 36) as u8
        };
        i += 1;
    }
    k
}

/// REGION names (TPC-H's five), for keys `0..5`.
pub const REGION_NAMES: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];

/// The region of the nation at index `i` of [`NATION_KEYS`]: round robin,
/// so each region has 12 or 13 nations and Q2\* does about the same work
/// whichever region it picks.
pub const fn nation_region(i: usize) -> u8 {
    (i % REGION_NAMES.len()) as u8
}

/// Default `--q2-size`: percentage of SUPPLIER a Q2\* scans.
pub const DEFAULT_Q2_SIZE_PCT: u32 = 10;
/// Q2\* refills the STOCK rows whose S_QUANTITY is below this. The loaded
/// quantities are uniform in 10..=100 and NewOrder keeps them there, so
/// about 5.5% of the rows a Q2\* visits qualify.
pub const Q2_THRESHOLD: i32 = 15;
/// What Q2\* adds to S_QUANTITY: NewOrder's restock amount (clause 2.4.2.2),
/// which lifts a refilled row above any threshold up to 101.
pub const Q2_REFILL: i32 = 91;

/// TPC-CH Q2\*, the transaction TPC-C-hybrid adds to TPC-C (as a value, the
/// [`ExtendedTxn::Extra`] of [`HybridTxn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Q2Star;

/// The six transaction types, in report (and `--mix`) order: NewOrder,
/// Payment, Q2\*, OrderStatus, Delivery, StockLevel, the order in which
/// ERMIA lists its mix (40/38/10/4/4/4).
pub type HybridTxn = ExtendedTxn<Q2Star>;

/// TPC-C-hybrid knobs: TPC-C's, the six-way mix (in [`HybridTxn::ALL`]'s
/// order; ERMIA's 40/38/10/4/4/4 by default) and Q2\*'s ([`Q2Knobs`]).
pub type HybridConfig = ExtendedConfig<Q2Star>;

/// Q2\*'s knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Q2Knobs {
    /// Percentage of SUPPLIER one Q2\* scans, 1..=100.
    pub size_pct: u32,
    /// Q2\* refills STOCK rows with S_QUANTITY below this.
    pub threshold: i32,
    /// Amount Q2\* adds to such a row's S_QUANTITY.
    pub refill: i32,
}

impl Default for Q2Knobs {
    /// Scans of [`DEFAULT_Q2_SIZE_PCT`] (10%) of SUPPLIER, [`Q2_THRESHOLD`]
    /// and [`Q2_REFILL`].
    fn default() -> Q2Knobs {
        Q2Knobs {
            size_pct: DEFAULT_Q2_SIZE_PCT,
            threshold: Q2_THRESHOLD,
            refill: Q2_REFILL,
        }
    }
}

impl Q2Knobs {
    /// Suppliers one Q2\* scans.
    pub fn suppliers(&self) -> u32 {
        // 1% is 100 suppliers: exact for every whole percentage.
        SUPPLIERS * self.size_pct / 100
    }
}

// ---------------------------------------------------------------------------
// Stock to supplier

/// How warehouse `w` maps its items to suppliers: `(w * i) mod 10000 = s`
/// has solutions iff `g = gcd(w, 10000)` divides `s`, and then they are
/// `i = (s / g) * inv (mod m)` with `m = 10000 / g` and `inv` the inverse of
/// `w / g` modulo `m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Congruence {
    g: u32,
    m: u32,
    inv: u32,
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The inverse of `a` modulo `m` (`gcd(a, m) = 1`; 0 for `m = 1`).
fn inverse(a: u64, m: u64) -> u64 {
    // Extended Euclid on (a mod m, m), tracking a's coefficient.
    let (mut r0, mut r1) = ((a % m) as i64, m as i64);
    let (mut x0, mut x1) = (1i64, 0i64);
    while r1 != 0 {
        let q = r0 / r1;
        (r0, r1) = (r1, r0 - q * r1);
        (x0, x1) = (x1, x0 - q * x1);
    }
    x0.rem_euclid(m as i64) as u64
}

/// The STOCK rows each supplier supplies, by CH-benCHmark's rule
/// `su_suppkey = (s_w_id * s_i_id) mod 10000`, enumerated arithmetically:
/// one modular inverse per warehouse, precomputed, then every supplied item
/// in O(1) with no table, index or allocation. In warehouse `w` a supplier
/// supplies either no item or `10 * gcd(w, 10000)` of them (10 for every
/// supplier when `gcd = 1`), spaced `10000 / gcd(w, 10000)` apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupplyMap {
    /// Index `w - 1`.
    per_w: Vec<Congruence>,
}

impl SupplyMap {
    /// The map for warehouses `1..=warehouses`.
    pub fn new(warehouses: u32) -> SupplyMap {
        let n = SUPPLIERS as u64;
        let per_w = (1..=warehouses as u64)
            .map(|w| {
                let g = gcd(w, n);
                let m = n / g;
                Congruence {
                    g: g as u32,
                    m: m as u32,
                    inv: inverse(w / g, m) as u32,
                }
            })
            .collect();
        SupplyMap { per_w }
    }

    /// Number of warehouses covered.
    pub fn warehouses(&self) -> u16 {
        self.per_w.len() as u16
    }

    /// The items (ascending) of warehouse `w` (`1..=warehouses`) supplied by
    /// supplier `s` (`0..SUPPLIERS`).
    pub fn items(&self, w: u16, s: u16) -> SuppliedItems {
        let c = self.per_w[w as usize - 1];
        let s = s as u32;
        if !s.is_multiple_of(c.g) {
            return SuppliedItems {
                next: ITEMS + 1,
                step: 1,
            };
        }
        let i0 = ((s / c.g) as u64 * c.inv as u64 % c.m as u64) as u32;
        // Items start at 1: residue 0 is item m (then 2m, ..., 100000).
        SuppliedItems {
            next: if i0 == 0 { c.m } else { i0 },
            step: c.m,
        }
    }
}

/// Iterator of [`SupplyMap::items`].
#[derive(Clone, Debug)]
pub struct SuppliedItems {
    next: u32,
    step: u32,
}

impl Iterator for SuppliedItems {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        if self.next > ITEMS {
            return None;
        }
        let i = self.next;
        self.next += self.step;
        Some(i)
    }
}

// ---------------------------------------------------------------------------
// Q2*

/// Q2\* inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Q2Input {
    /// R_REGIONKEY, 0..5.
    pub region: u8,
    /// The first supplier key scanned, 0..SUPPLIERS.
    pub first: u16,
    /// Suppliers scanned: keys `first, first + 1, ...` wrapping from 9999
    /// to 0; 1..=SUPPLIERS.
    pub suppliers: u16,
    /// Refill rows with S_QUANTITY below this.
    pub threshold: i32,
    /// Amount added to S_QUANTITY.
    pub refill: i32,
}

/// What Q2\* did (for tests and curiosity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Q2Output {
    /// Scanned suppliers whose nation is in the region.
    pub suppliers_in_region: u32,
    /// STOCK rows read.
    pub stock_read: u32,
    /// STOCK rows refilled.
    pub stock_updated: u32,
}

/// Q2\*'s buffers, reused across transactions.
#[derive(Clone, Debug, Default)]
pub struct Q2Scratch {
    /// The region's suppliers among the scanned ones.
    suppliers: Vec<u16>,
    /// A STOCK row being rewritten.
    row: Vec<u8>,
}

impl Q2Scratch {
    /// Buffers already at their largest size.
    pub fn new() -> Q2Scratch {
        Q2Scratch {
            suppliers: Vec::with_capacity(SUPPLIERS as usize),
            row: Vec::with_capacity(Stock::LEN),
        }
    }
}

/// Byte offset of S_QUANTITY in an encoded [`Stock`] row (after S_I_ID and
/// S_W_ID): Q2\* reads and patches it without decoding the 300-byte row.
const S_QUANTITY_AT: usize = <u32 as Field>::SIZE + <u16 as Field>::SIZE;
/// Byte offset of SU_NATIONKEY in an encoded [`Supplier`] row.
const SU_NATIONKEY_AT: usize =
    <u16 as Field>::SIZE + <Text<25> as Field>::SIZE + <Text<40> as Field>::SIZE;

fn malformed(table: &str, len: usize, expected: usize) -> TxError {
    TxError::Error(Error::InvalidArgument(format!(
        "malformed {table} row of {len} bytes (expected {expected})"
    )))
}

/// Q2\* as a transaction request (its inputs, and the body below).
struct Q2Request<'a> {
    t: &'a Tables,
    h: &'a HybridTables,
    supply: &'a SupplyMap,
    inp: &'a Q2Input,
    s: &'a mut Q2Scratch,
}

impl Request for Q2Request<'_> {
    type Output = Q2Output;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<Q2Output> {
        q2_star(tx, self.t, self.h, self.supply, self.inp, self.s)
    }

    /// Coarse sets (the rows depend on what the scans find): REGION,
    /// NATION and SUPPLIER read, and STOCK written, whole tables.
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.read_table(self.h.region);
        keys.read_table(self.h.nation);
        keys.read_table(self.h.supplier);
        keys.write_table(self.t.stock);
        true
    }
}

/// TPC-CH Q2\* as ERMIA describes it, one attempt (see the module
/// documentation and docs/TPCC.md):
///
/// 1. read the REGION row `inp.region`;
/// 2. scan NATION and keep the nations of that region;
/// 3. scan SUPPLIER keys `inp.first ..` (`inp.suppliers` of them, wrapping
///    past 9999 to 0) and keep the suppliers of those nations;
/// 4. for each kept supplier, in every warehouse of `supply`, read each
///    STOCK row it supplies; if S_QUANTITY < `inp.threshold`, add
///    `inp.refill` to it (the only column written).
///
/// REGION, NATION and SUPPLIER are never written, so only the STOCK reads
/// and writes conflict (with NewOrder and other Q2\*s). No allocation once
/// `s` has grown.
pub fn q2_star<T: Transaction>(
    tx: &mut T,
    t: &Tables,
    h: &HybridTables,
    supply: &SupplyMap,
    inp: &Q2Input,
    s: &mut Q2Scratch,
) -> TxResult<Q2Output> {
    // The original query selects the region by R_NAME; reading the row keeps
    // that access (the name itself is not needed).
    let _region: Region = must_get(tx, h.region, &region_key(inp.region), "region")?;

    // The region's nations, as a bitmap over the ASCII key space.
    let mut nations = 0u128;
    let mut bad = None;
    tx.scan(
        h.nation,
        Bound::Unbounded,
        Bound::Unbounded,
        ScanOptions::new(),
        |_, v| match Nation::decode(v) {
            Some(n) => {
                if n.n_regionkey == inp.region && n.n_nationkey < 128 {
                    nations |= 1 << n.n_nationkey;
                }
                true
            }
            None => {
                bad = Some(malformed("nation", v.len(), Nation::LEN));
                false
            }
        },
    )?;
    if let Some(e) = bad {
        return Err(e);
    }

    // The supplier range, split in two where it wraps.
    let first = inp.first as u32;
    let end = first + inp.suppliers as u32;
    let ranges = if end <= SUPPLIERS {
        [(first, end), (0, 0)]
    } else {
        [(first, SUPPLIERS), (0, end - SUPPLIERS)]
    };
    s.suppliers.clear();
    for (lo, hi) in ranges {
        if lo >= hi {
            continue;
        }
        let (lo, hi) = (supplier_key(lo as u16), supplier_key(hi as u16));
        let kept = &mut s.suppliers;
        tx.scan(
            h.supplier,
            Bound::Included(&lo[..]),
            Bound::Excluded(&hi[..]),
            ScanOptions::new(),
            |k, v| {
                // Only the nation is needed: read its byte, no decoding.
                if v.len() != Supplier::LEN || k.len() != 2 {
                    bad = Some(malformed("supplier", v.len(), Supplier::LEN));
                    return false;
                }
                let n = v[SU_NATIONKEY_AT];
                if n < 128 && nations & (1 << n) != 0 {
                    kept.push(u16::from_be_bytes([k[0], k[1]]));
                }
                true
            },
        )?;
        if let Some(e) = bad {
            return Err(e);
        }
    }

    let mut out = Q2Output {
        suppliers_in_region: s.suppliers.len() as u32,
        ..Q2Output::default()
    };
    let q_at = S_QUANTITY_AT..S_QUANTITY_AT + 4;
    for j in 0..s.suppliers.len() {
        let su = s.suppliers[j];
        for w in 1..=supply.warehouses() {
            for i in supply.items(w, su) {
                let key = stock_key(w, i);
                // Stock rows are never deleted.
                let Some(v) = tx.get(t.stock, &key)? else {
                    return Err(vanished());
                };
                if v.len() != Stock::LEN {
                    return Err(malformed("stock", v.len(), Stock::LEN));
                }
                out.stock_read += 1;
                let q = i32::from_le_bytes(v[q_at.clone()].try_into().expect("4 bytes"));
                if q >= inp.threshold {
                    continue;
                }
                // Rewrite the row with only S_QUANTITY changed.
                s.row.clear();
                s.row.extend_from_slice(v);
                s.row[q_at.clone()].copy_from_slice(&(q + inp.refill).to_le_bytes());
                if !tx.update(t.stock, &key, &s.row)? {
                    return Err(missing("stock", &key));
                }
                out.stock_updated += 1;
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// The workload

/// The TPC-C-hybrid workload: [`Tpcc`](super::Tpcc)'s five transactions and
/// terminals, plus Q2\*, with a six-way mix.
pub type TpccHybrid = TpccExtended<Q2Star>;

/// Per-thread state: a TPC-C terminal's (its RNG draws the hybrid's type and
/// Q2\*'s inputs too) plus Q2\*'s inputs and buffers.
pub type TpccHybridThread = ExtendedThread<Q2Star>;

/// What TPC-C-hybrid keeps beside [`Tpcc`](super::Tpcc): the
/// stock-to-supplier map, computed once, and its three tables, once loaded.
pub struct Q2State {
    supply: SupplyMap,
    htables: OnceLock<HybridTables>,
}

impl TpccHybrid {
    /// SUPPLIER, NATION and REGION, once loaded.
    pub fn hybrid_tables(&self) -> Option<HybridTables> {
        self.state.htables.get().copied()
    }

    /// The stock-to-supplier map of this scale.
    pub fn supply_map(&self) -> &SupplyMap {
        &self.state.supply
    }

    /// Q2\*'s inputs with a random region and start, drawn from `rng`.
    pub fn draw_q2<R: Rng>(&self, rng: &mut R) -> Q2Input {
        let k = &self.cfg.extra;
        Q2Input {
            region: uniform(rng, 0, REGION_NAMES.len() as u32 - 1) as u8,
            first: uniform(rng, 0, SUPPLIERS - 1) as u16,
            suppliers: k.suppliers() as u16,
            threshold: k.threshold,
            refill: k.refill,
        }
    }
}

impl ExtraTxn for Q2Star {
    const WORKLOAD: &'static str = "tpcc-hybrid";
    const NAME: &'static str = "q2_star";
    const ORDER: [HybridTxn; 6] = [
        HybridTxn::Tpcc(TxnType::NewOrder),
        HybridTxn::Tpcc(TxnType::Payment),
        HybridTxn::Extra(Q2Star),
        HybridTxn::Tpcc(TxnType::OrderStatus),
        HybridTxn::Tpcc(TxnType::Delivery),
        HybridTxn::Tpcc(TxnType::StockLevel),
    ];
    const DEFAULT_MIX: [u32; 6] = [40, 38, 10, 4, 4, 4];

    type Knobs = Q2Knobs;
    type State = Q2State;
    type Input = Q2Input;
    type Scratch = Q2Scratch;

    fn validate(k: &Q2Knobs) -> Result<(), String> {
        if !(1..=100).contains(&k.size_pct) {
            return Err(format!("--q2-size must be in 1..=100, got {}", k.size_pct));
        }
        Ok(())
    }

    fn state(cfg: &HybridConfig) -> Q2State {
        Q2State {
            supply: SupplyMap::new(cfg.tpcc.warehouses),
            htables: OnceLock::new(),
        }
    }

    fn scratch() -> Q2Scratch {
        Q2Scratch::new()
    }

    fn rows_to_load(wl: &TpccHybrid) -> u64 {
        load::rows_to_load(wl.tpcc.config_ref()) + load::hybrid_rows_to_load()
    }

    /// The TPC-C tables and SUPPLIER, NATION and REGION, in one parallel
    /// pass.
    fn load(
        wl: &TpccHybrid,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        let t = Tables::create(db)?;
        let h = HybridTables::create(db)?;
        let t = *wl.tpcc.tables.get_or_init(|| t);
        let h = *wl.state.htables.get_or_init(|| h);
        load::load_hybrid(
            db,
            &t,
            &h,
            wl.tpcc.config_ref(),
            &wl.tpcc.c_load,
            threads,
            progress,
        )
    }

    fn draw(wl: &TpccHybrid, t: &mut TpccThread) -> Q2Input {
        wl.draw_q2(&mut t.rng)
    }

    fn execute(wl: &TpccHybrid, st: &mut TpccHybridThread, w: &mut Worker) -> TxResult<()> {
        let h = wl
            .state
            .htables
            .get()
            .expect("TPC-C-hybrid run before it was loaded");
        let mut req = Q2Request {
            t: wl.tpcc.t(),
            h,
            supply: &wl.state.supply,
            inp: &st.input,
            s: &mut st.scratch,
        };
        w.try_execute(&mut req).map(drop)
    }

    fn config(k: &Q2Knobs, o: &mut serde_json::Map<String, serde_json::Value>) {
        o.insert("q2_size_pct".into(), k.size_pct.into());
        o.insert("q2_suppliers".into(), k.suppliers().into());
        o.insert("q2_stock_threshold".into(), k.threshold.into());
        o.insert("q2_refill".into(), k.refill.into());
        o.insert(
            "q2_supplier_range".into(),
            "contiguous keys from a uniform start, wrapping".into(),
        );
        o.insert("suppliers".into(), SUPPLIERS.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Workload;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn nation_keys_are_the_62_alphanumerics_and_regions_balance() {
        let s: String = NATION_KEYS.iter().map(|&b| b as char).collect();
        assert_eq!(
            s,
            "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
        );
        let mut per = [0; 5];
        for i in 0..NATION_KEYS.len() {
            per[nation_region(i) as usize] += 1;
        }
        assert_eq!(per, [13, 13, 12, 12, 12]);
    }

    #[test]
    fn inverse_and_gcd() {
        for m in [1u64, 2, 5, 16, 625, 10_000] {
            for a in 1..200u64 {
                if gcd(a, m) == 1 {
                    assert_eq!(a * inverse(a, m) % m, 1 % m, "{a} mod {m}");
                }
            }
        }
    }

    /// The arithmetic enumeration finds exactly the items of the rule, for
    /// every supplier, on warehouses with every kind of gcd with 10000.
    #[test]
    fn supply_map_matches_the_rule() {
        let map = SupplyMap::new(10_000);
        let mut found = vec![u16::MAX; ITEMS as usize + 1];
        for w in (1..=64u16).chain([125, 625, 2000, 5000, 9999, 10_000]) {
            found.fill(u16::MAX);
            for s in 0..SUPPLIERS as u16 {
                let mut n = 0;
                for i in map.items(w, s) {
                    assert_eq!(found[i as usize], u16::MAX, "w {w} item {i} twice");
                    found[i as usize] = s;
                    n += 1;
                }
                let g = gcd(w as u64, SUPPLIERS as u64) as u32;
                assert_eq!(
                    n,
                    if (s as u32).is_multiple_of(g) {
                        10 * g
                    } else {
                        0
                    },
                    "w {w} s {s}"
                );
            }
            for i in 1..=ITEMS {
                assert_eq!(
                    found[i as usize] as u32,
                    w as u32 * i % SUPPLIERS,
                    "w {w} item {i}"
                );
            }
        }
        assert_eq!(map.warehouses(), 10_000);
    }

    #[test]
    fn raw_offsets_match_the_encodings() {
        let mut buf = Vec::new();
        let st = Stock {
            s_i_id: 7,
            s_w_id: 3,
            s_quantity: -123_456,
            ..Default::default()
        };
        st.encode(&mut buf);
        assert_eq!(
            i32::from_le_bytes(buf[S_QUANTITY_AT..S_QUANTITY_AT + 4].try_into().unwrap()),
            -123_456
        );
        let su = Supplier {
            su_suppkey: 9999,
            su_nationkey: b'z',
            su_name: Text::new(b"x"),
            ..Default::default()
        };
        su.encode(&mut buf);
        assert_eq!(buf[SU_NATIONKEY_AT], b'z');
    }

    #[test]
    fn mix_parsing_and_validation() {
        assert_eq!(
            HybridConfig::parse_mix("40,38,10,4,4,4").unwrap(),
            [40, 38, 10, 4, 4, 4]
        );
        let e = HybridConfig::parse_mix("45,43,4,4,4").unwrap_err();
        assert!(e.contains("six"), "{e}");
        let e = HybridConfig::parse_mix("40,38,10,4,4,5").unwrap_err();
        assert!(e.contains("add up to 100") && e.contains("101"), "{e}");
        assert!(HybridConfig::parse_mix("40,38,10,4,4,y").is_err());

        let mut c = HybridConfig::new(1);
        assert!(c.validate().is_ok());
        assert_eq!(c.extra.suppliers(), 1000);
        // The TPC-C mix inside is ignored.
        c.tpcc.mix = [1, 1, 1, 1, 1];
        assert!(c.validate().is_ok());
        for bad in [0, 101] {
            c.extra.size_pct = bad;
            assert!(c.validate().unwrap_err().contains("--q2-size"));
        }
        c.extra.size_pct = 100;
        assert_eq!(c.extra.suppliers(), SUPPLIERS);
        c.mix = [40, 38, 10, 4, 4, 5];
        assert!(c.validate().unwrap_err().contains("--mix"));
        assert!(TpccHybrid::new(c).is_err());
    }

    #[test]
    fn the_mix_draws_each_type_in_proportion() {
        let wl = TpccHybrid::new(HybridConfig::new(2)).unwrap();
        let mut st = wl.thread_state(1, 2, 5);
        let mut n = [0u32; 6];
        for _ in 0..100_000 {
            let ty = wl.next(&mut st);
            n[ty] += 1;
            assert_eq!(
                st.extra_next,
                HybridTxn::ALL[ty] == HybridTxn::Extra(Q2Star)
            );
            if let HybridTxn::Tpcc(k) = HybridTxn::ALL[ty] {
                assert_eq!(st.tpcc.txn().kind, k);
            } else {
                assert!(st.input.region < 5 && (st.input.first as u32) < SUPPLIERS);
                assert_eq!(st.input.suppliers, 1000);
            }
        }
        for (i, &p) in wl.cfg.mix.iter().enumerate() {
            let got = n[i] as f64 / 1000.0;
            assert!((got - p as f64).abs() < 1.0, "type {i}: {got}% vs {p}%");
        }
        let mut rng = SmallRng::seed_from_u64(1);
        let mut regions = [0u32; 5];
        for _ in 0..10_000 {
            regions[wl.draw_q2(&mut rng).region as usize] += 1;
        }
        assert!(regions.iter().all(|&r| r > 1800), "{regions:?}");
        let cfg = wl.config();
        assert_eq!(cfg["q2_size_pct"], 10);
        assert_eq!(cfg["mix_pct"]["q2_star"], 10);
        assert_eq!(cfg["mix_pct"].as_object().unwrap().len(), 6);
    }
}

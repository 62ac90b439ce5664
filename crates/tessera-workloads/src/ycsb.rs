//! YCSB (Cooper et al., SoCC 2010) with the knobs CCBench and the Silo/ERMIA
//! drivers expose: record count, value size, operations per transaction,
//! read ratio, read-modify-write or blind writes, zipfian skew, scans and
//! inserts, and the standard workloads A-F.
//!
//! * Keys are 8 bytes: the big-endian value of a bijective 64-bit mix of the
//!   record number (YCSB's `insertorder=hashed`), so hot records are spread
//!   over the tree instead of clustering in a few leaves.
//! * A transaction draws `ops_per_txn` operations up front (so a retry after a
//!   conflict repeats the same ones). Each is a read (probability
//!   `read_ratio`), a scan (`scan_ratio`), an insert (`insert_ratio`) or else
//!   an update; an update is a blind write, or a read then a write with
//!   `rmw`. As in CCBench, one transaction may touch the same key twice.
//! * Record numbers are drawn uniformly (`theta = 0`) or from the zipfian
//!   distribution of Gray et al. ("Quickly generating billion-record synthetic
//!   databases", SIGMOD 1994), which YCSB uses; workload D reads the latest
//!   records instead.

use std::ops::Bound;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Error, ScanOptions, TableId, TxResult, Worker};

use crate::driver::Workload;

/// A bijective 64-bit mix (the splitmix64 finalizer): record number -> key.
#[inline]
pub fn scramble(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The key of record `i`.
#[inline]
pub fn key_of(i: u64) -> [u8; 8] {
    scramble(i).to_be_bytes()
}

/// Zipfian generator over `0..n` (Gray et al.; item 0 is the hottest).
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipf {
    /// A generator for `n` items with skew `theta` in `[0, 1)`.
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(n > 0 && (0.0..1.0).contains(&theta));
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2.min(n), theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf {
            n,
            theta,
            alpha,
            zetan,
            eta,
            half_pow_theta: 0.5f64.powf(theta),
        }
    }

    /// Draw an item.
    #[inline]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        if self.theta == 0.0 {
            return rng.gen_range(0..self.n);
        }
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1.min(self.n - 1);
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

/// The standard YCSB workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// 50% read, 50% update.
    A,
    /// 95% read, 5% update.
    B,
    /// 100% read.
    C,
    /// 95% read of the latest records, 5% insert.
    D,
    /// 95% short scans, 5% insert.
    E,
    /// 50% read, 50% read-modify-write.
    F,
    /// Only the explicit knobs.
    Custom,
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "a" => Preset::A,
            "b" => Preset::B,
            "c" => Preset::C,
            "d" => Preset::D,
            "e" => Preset::E,
            "f" => Preset::F,
            "custom" => Preset::Custom,
            o => {
                return Err(format!(
                    "unknown YCSB workload '{o}' (a, b, c, d, e, f or custom)"
                ))
            }
        })
    }
}

/// YCSB knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct YcsbConfig {
    /// Preset the ratios came from.
    pub preset: Preset,
    /// Records loaded.
    pub records: u64,
    /// Value size in bytes.
    pub value_size: usize,
    /// Operations per transaction.
    pub ops_per_txn: usize,
    /// Fraction of reads.
    pub read_ratio: f64,
    /// Fraction of scans.
    pub scan_ratio: f64,
    /// Fraction of inserts.
    pub insert_ratio: f64,
    /// Updates read the record first (read-modify-write).
    pub rmw: bool,
    /// Zipfian skew (0 = uniform).
    pub theta: f64,
    /// Maximum scan length (uniform in 1..=max).
    pub scan_length: usize,
    /// Reads pick the latest records (workload D).
    pub read_latest: bool,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            preset: Preset::Custom,
            records: 1_000_000,
            value_size: 100,
            ops_per_txn: 10,
            read_ratio: 0.5,
            scan_ratio: 0.0,
            insert_ratio: 0.0,
            rmw: false,
            theta: 0.0,
            scan_length: 100,
            read_latest: false,
        }
    }
}

impl YcsbConfig {
    /// Apply a preset's ratios and zipfian skew 0.99 (explicit knobs are
    /// applied after, by the caller, and win).
    pub fn with_preset(mut self, p: Preset) -> Self {
        self.preset = p;
        let (r, s, i, rmw, latest) = match p {
            Preset::A => (0.5, 0.0, 0.0, false, false),
            Preset::B => (0.95, 0.0, 0.0, false, false),
            Preset::C => (1.0, 0.0, 0.0, false, false),
            Preset::D => (0.95, 0.0, 0.05, false, true),
            Preset::E => (0.0, 0.95, 0.05, false, false),
            Preset::F => (0.5, 0.0, 0.0, true, false),
            Preset::Custom => return self,
        };
        self.read_ratio = r;
        self.scan_ratio = s;
        self.insert_ratio = i;
        self.rmw = rmw;
        self.read_latest = latest;
        // YCSB's presets use zipfian requests (0.99).
        self.theta = 0.99;
        self
    }

    /// Check the knobs; the message names the offending option.
    pub fn validate(&self) -> Result<(), String> {
        if self.records == 0 {
            return Err("--records must be at least 1".into());
        }
        if self.ops_per_txn == 0 {
            return Err("--ops-per-txn must be at least 1".into());
        }
        if self.value_size > tessera::MAX_VALUE_LEN {
            return Err(format!(
                "--value-size must be at most {}",
                tessera::MAX_VALUE_LEN
            ));
        }
        if !(0.0..=1.0).contains(&self.read_ratio) {
            return Err(format!(
                "--read-ratio must be in [0, 1], got {}",
                self.read_ratio
            ));
        }
        if !(0.0..1.0).contains(&self.theta) {
            return Err(format!("--theta must be in [0, 1), got {}", self.theta));
        }
        if self.scan_length == 0 {
            return Err("--scan-length must be at least 1".into());
        }
        if self.read_ratio + self.scan_ratio + self.insert_ratio > 1.0 + 1e-9 {
            return Err("read, scan and insert ratios add up to more than 1".into());
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Read(u64),
    Update(u64),
    Scan(u64, usize),
    Insert(u64),
}

/// The YCSB workload.
pub struct Ycsb {
    cfg: YcsbConfig,
    zipf: Zipf,
    table: std::sync::OnceLock<TableId>,
}

/// Per-thread YCSB state.
pub struct YcsbThread {
    rng: SmallRng,
    ops: Vec<Op>,
    value: Vec<u8>,
    thread: u64,
    inserted: u64,
}

/// Record numbers of inserted records start here (per thread: `+ thread << 40`).
const INSERT_BASE: u64 = 1 << 48;

impl Ycsb {
    /// A YCSB workload with these knobs (validated).
    pub fn new(cfg: YcsbConfig) -> Result<Ycsb, String> {
        cfg.validate()?;
        let zipf = Zipf::new(cfg.records, cfg.theta);
        Ok(Ycsb {
            cfg,
            zipf,
            table: std::sync::OnceLock::new(),
        })
    }

    /// The knobs.
    pub fn config_ref(&self) -> &YcsbConfig {
        &self.cfg
    }

    fn table(&self) -> TableId {
        *self.table.get().expect("YCSB used before load")
    }
}

impl Workload for Ycsb {
    type Thread = YcsbThread;

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn txn_types(&self) -> &'static [&'static str] {
        &["ycsb"]
    }

    fn rows_to_load(&self) -> u64 {
        self.cfg.records
    }

    fn load(
        &self,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        let t = match db.table("ycsb") {
            Ok(t) => t,
            Err(_) => db.create_table("ycsb")?,
        };
        let _ = self.table.set(t);
        let n = self.cfg.records;
        let per = n.div_ceil(threads as u64);
        let value = vec![b'v'; self.cfg.value_size];
        std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads as u64)
                .map(|th| {
                    let value = &value;
                    s.spawn(move || -> Result<(), Error> {
                        let mut w = db.worker()?;
                        let (lo, hi) = (th * per, ((th + 1) * per).min(n));
                        let mut i = lo;
                        while i < hi {
                            let end = (i + 1000).min(hi);
                            w.run(|tx| {
                                for r in i..end {
                                    tx.put(t, &key_of(r), value)?;
                                }
                                Ok(())
                            })?;
                            progress(end - i);
                            i = end;
                        }
                        Ok(())
                    })
                })
                .collect();
            hs.into_iter()
                .try_for_each(|h| h.join().expect("loader thread panicked"))
        })?;
        Ok(n)
    }

    fn thread_state(&self, thread: usize, seed: u64) -> YcsbThread {
        YcsbThread {
            rng: SmallRng::seed_from_u64(seed ^ 0x5DEE_CE66_D1CE_5EED),
            ops: Vec::with_capacity(self.cfg.ops_per_txn),
            value: vec![b'x'; self.cfg.value_size],
            thread: thread as u64,
            inserted: 0,
        }
    }

    fn next(&self, st: &mut YcsbThread) -> usize {
        st.ops.clear();
        let c = &self.cfg;
        for _ in 0..c.ops_per_txn {
            let p: f64 = st.rng.gen();
            let op = if p < c.read_ratio {
                if c.read_latest {
                    // The newest records: this thread's inserts, then the load's tail.
                    let back = self.zipf.sample(&mut st.rng);
                    if back < st.inserted {
                        Op::Read(INSERT_BASE + (st.thread << 40) + st.inserted - 1 - back)
                    } else {
                        Op::Read(c.records - 1 - (back - st.inserted).min(c.records - 1))
                    }
                } else {
                    Op::Read(self.zipf.sample(&mut st.rng))
                }
            } else if p < c.read_ratio + c.scan_ratio {
                let len = st.rng.gen_range(1..=c.scan_length);
                Op::Scan(self.zipf.sample(&mut st.rng), len)
            } else if p < c.read_ratio + c.scan_ratio + c.insert_ratio {
                let r = INSERT_BASE + (st.thread << 40) + st.inserted;
                st.inserted += 1;
                Op::Insert(r)
            } else {
                Op::Update(self.zipf.sample(&mut st.rng))
            };
            st.ops.push(op);
        }
        // A fresh value per transaction (first byte varies).
        if let Some(b) = st.value.first_mut() {
            *b = b'a' + (st.rng.gen::<u8>() % 26);
        }
        0
    }

    fn execute(&self, st: &mut YcsbThread, w: &mut Worker) -> TxResult<()> {
        let t = self.table();
        let rmw = self.cfg.rmw;
        let (ops, value) = (&st.ops, &st.value);
        w.try_run(|tx| {
            let mut sink = 0u64;
            for op in ops {
                match *op {
                    Op::Read(r) => {
                        if let Some(v) = tx.get(t, &key_of(r))? {
                            sink = sink.wrapping_add(v.len() as u64);
                        }
                    }
                    Op::Update(r) => {
                        let k = key_of(r);
                        if rmw {
                            let old = tx.get(t, &k)?.and_then(|v| v.first().copied());
                            sink = sink.wrapping_add(old.unwrap_or(0) as u64);
                        }
                        tx.put(t, &k, value)?;
                    }
                    Op::Scan(r, len) => {
                        tx.scan(
                            t,
                            Bound::Included(&key_of(r)[..]),
                            Bound::Unbounded,
                            ScanOptions::new().limit(len),
                            |_, v| {
                                sink = sink.wrapping_add(v.len() as u64);
                                true
                            },
                        )?;
                    }
                    Op::Insert(r) => {
                        tx.insert(t, &key_of(r), value)?;
                    }
                }
            }
            std::hint::black_box(sink);
            Ok(())
        })
    }

    fn config(&self) -> serde_json::Value {
        let c = &self.cfg;
        serde_json::json!({
            "preset": format!("{:?}", c.preset).to_lowercase(),
            "records": c.records,
            "value_size": c.value_size,
            "ops_per_txn": c.ops_per_txn,
            "read_ratio": c.read_ratio,
            "scan_ratio": c.scan_ratio,
            "insert_ratio": c.insert_ratio,
            "update_ratio": (1.0 - c.read_ratio - c.scan_ratio - c.insert_ratio).max(0.0),
            "rmw": c.rmw,
            "theta": c.theta,
            "scan_length": c.scan_length,
            "read_latest": c.read_latest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_a_bijection_on_a_sample() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..200_000u64 {
            assert!(seen.insert(scramble(i)));
        }
    }

    #[test]
    fn uniform_zipf_covers_the_range() {
        let z = Zipf::new(100, 0.0);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = [0u32; 100];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (700..1300).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn skewed_zipf_is_skewed_and_in_range() {
        let n = 100_000;
        let z = Zipf::new(n, 0.99);
        let mut rng = SmallRng::seed_from_u64(2);
        let draws = 200_000;
        let mut top = 0;
        for _ in 0..draws {
            let v = z.sample(&mut rng);
            assert!(v < n);
            if v == 0 {
                top += 1;
            }
        }
        // P(item 0) = 1 / zeta(n, 0.99) ~ 1/12.5 for n = 1e5.
        let p = top as f64 / draws as f64;
        assert!((0.06..0.10).contains(&p), "p(top) = {p}");
    }

    #[test]
    fn presets_and_overrides() {
        let c = YcsbConfig::default().with_preset(Preset::B);
        assert_eq!(c.read_ratio, 0.95);
        assert_eq!(c.theta, 0.99);
        let c = YcsbConfig::default().with_preset(Preset::E);
        assert_eq!(c.scan_ratio, 0.95);
        assert_eq!(c.insert_ratio, 0.05);
        assert!("g".parse::<Preset>().is_err());
        assert!(YcsbConfig {
            read_ratio: 1.5,
            ..YcsbConfig::default()
        }
        .validate()
        .unwrap_err()
        .contains("--read-ratio"));
    }

    #[test]
    fn runs_every_preset_briefly() {
        for p in [
            Preset::A,
            Preset::B,
            Preset::C,
            Preset::D,
            Preset::E,
            Preset::F,
        ] {
            let db = Database::open(tessera::Options::in_memory()).unwrap();
            let wl = Ycsb::new(YcsbConfig {
                records: 2000,
                ..YcsbConfig::default().with_preset(p)
            })
            .unwrap();
            wl.load(&db, 2, &|_| {}).unwrap();
            let mut w = db.worker().unwrap();
            let mut st = wl.thread_state(0, 7);
            for _ in 0..200 {
                wl.next(&mut st);
                while wl.execute(&mut st, &mut w).is_err() {}
            }
            assert_eq!(w.stats().commits, 200);
        }
    }
}

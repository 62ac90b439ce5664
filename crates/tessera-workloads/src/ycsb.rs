//! YCSB (Cooper et al., SoCC 2010) in the multi-operation form that CCBench
//! and the Silo/ERMIA drivers use, with their knobs: record count, value
//! size, operations per transaction, read ratio, read-modify-write or blind
//! writes, zipfian skew, scans and inserts, and the standard workloads A-F.
//!
//! # Data
//!
//! One table, `ycsb`, of `records` rows. Record `i`'s key is 8 bytes: the
//! big-endian value of [`scramble`]`(i)`, a bijective 64-bit mix (YCSB's
//! `insertorder=hashed`), so that the hot records of a skewed distribution
//! (record 0, 1, 2, ...) are spread over the whole tree instead of sharing a
//! few leaves, and scans start at unrelated places. Being a bijection, it
//! never maps two records to one key. Values are `value_size` bytes. The
//! loader runs on every driver thread, 1000 inserts per transaction.
//!
//! # Transactions
//!
//! Each transaction is one of three types, drawn with the probabilities
//! below, and performs `ops_per_txn` operations:
//!
//! * **`ycsb`** (probability `1 - scan_ratio - insert_ratio`): the usual
//!   CCBench-style transaction. Each operation is a *read* with probability
//!   `read_ratio / (1 - scan_ratio - insert_ratio)`, else an *update*. An
//!   update is a blind write of a fresh value, or with `rmw` a
//!   read-modify-write: read the record, change a byte of the value read,
//!   write it back.
//! * **`scan`** (probability `scan_ratio`): each operation is a forward scan
//!   of `1..=scan_length` rows (uniform) from a key drawn like a read's.
//! * **`insert`** (probability `insert_ratio`): each operation inserts a new
//!   record. Thread `t`'s `k`-th insert is record `2^48 + t * 2^40 + k`, so
//!   inserts never collide and no shared counter is needed.
//!
//! So `read_ratio`, `scan_ratio` and `insert_ratio` are fractions of all
//! operations, as in YCSB, and the rest are updates; each type is reported
//! separately. With `ops_per_txn = 1` this is exactly YCSB's one-operation
//! mix.
//!
//! A transaction draws all its operations before its first attempt, so a
//! retry after a conflict abort repeats exactly the same ones. As in CCBench,
//! the operations of one transaction are drawn independently and may touch
//! the same key more than once (the engine reads its own writes and keeps one
//! write per record); nothing is deduplicated.
//!
//! # Request distribution
//!
//! Record numbers are drawn uniformly (`theta = 0`) or from the zipfian
//! distribution of Gray et al. ("Quickly generating billion-record synthetic
//! databases", SIGMOD 1994), YCSB's `ZipfianGenerator`, with skew `theta`
//! (YCSB's default is 0.99); see [`Zipf`]. With `read_latest` (workload D)
//! reads draw a zipfian *distance back* from the newest record instead:
//! from the thread's own inserts, newest first, then from the end of the
//! loaded records (a per-thread notion of "latest", which keeps the hot
//! path free of shared counters; YCSB's is global).
//!
//! # Presets
//!
//! [`Preset`] A-F set the operation mix and request distribution of YCSB's
//! core workloads (zipfian with `theta = 0.99`; D reads the latest records);
//! explicit knobs ([`YcsbOverrides`]) override them. `records`, `value_size`,
//! `ops_per_txn` and `scan_length` keep their defaults (1,000,000 records of
//! 100 bytes, 10 operations, scans up to 100 rows) unless given.

use std::ops::Bound;
use std::sync::OnceLock;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{
    Database, Error, KeySet, Request, ScanOptions, TableId, Transaction, TxResult, Worker,
};

use crate::driver::Workload;

/// The table's name.
pub const TABLE: &str = "ycsb";

/// Rows per loading transaction.
pub const LOAD_BATCH: u64 = 1000;

/// Most records a run may load (record numbers of inserts start above).
pub const MAX_RECORDS: u64 = 1 << 40;

/// The most records one long read-only transaction reads (its logged
/// arguments, 9 bytes a record, stay under the input log's 1 MiB limit).
pub const MAX_LONG_READ: usize = 100_000;

/// Record numbers of records inserted while running start here; thread `t`
/// uses `INSERT_BASE + t * 2^40 ..`.
const INSERT_BASE: u64 = 1 << 48;

/// A bijective 64-bit mix of a record number (the splitmix64 / MurmurHash3
/// finalizer: xor-shifts and multiplications by odd constants, each
/// invertible), used as the key so that consecutive or hot record numbers
/// land far apart in key order.
#[inline]
pub fn scramble(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The 8-byte key of record `i`: big-endian [`scramble`]`(i)`.
#[inline]
pub fn key_of(i: u64) -> [u8; 8] {
    scramble(i).to_be_bytes()
}

/// Records up to this count get an exact zeta sum; beyond, the tail is
/// summed in closed form (Euler-Maclaurin).
const ZETA_EXACT: u64 = 1 << 22;

fn zeta_exact(from: u64, to: u64, theta: f64) -> f64 {
    // Smallest terms first, for accuracy.
    (from..=to).rev().map(|i| (i as f64).powf(-theta)).sum()
}

/// `zeta(n, theta) = sum_{i=1..=n} 1 / i^theta`, the normalizing constant
/// of the zipfian distribution. Exact up to 2^22 items; for more, the first
/// 2^22 terms are summed and the rest approximated by the Euler-Maclaurin
/// formula (relative error below 1e-12), so a billion records cost no more
/// than four million.
pub fn zeta(n: u64, theta: f64) -> f64 {
    if n <= ZETA_EXACT {
        return zeta_exact(1, n, theta);
    }
    let m = ZETA_EXACT;
    let (mf, nf) = (m as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let d1 = |x: f64| -theta * x.powf(-theta - 1.0);
    let d3 = |x: f64| -theta * (theta + 1.0) * (theta + 2.0) * x.powf(-theta - 3.0);
    let integral = if theta == 1.0 {
        (nf / mf).ln()
    } else {
        (nf.powf(1.0 - theta) - mf.powf(1.0 - theta)) / (1.0 - theta)
    };
    // sum_{i=m}^{n} f(i) by Euler-Maclaurin, minus f(m).
    let tail = integral + (f(mf) + f(nf)) / 2.0 + (d1(nf) - d1(mf)) / 12.0
        - (d3(nf) - d3(mf)) / 720.0
        - f(mf);
    zeta_exact(1, m, theta) + tail
}

/// The largest Zipf skew accepted.
pub const MAX_THETA: f64 = 10.0;

/// Zipfian generator over `0..n`, item 0 the most popular: Gray et al.'s
/// method as in YCSB's `ZipfianGenerator`, with zeta and every other
/// constant precomputed, so a draw is one uniform `f64`, two comparisons
/// and (for all but the two hottest items) one `powf`. `theta = 0` draws
/// uniformly.
///
/// P(item 0) = 1 / zeta(n, theta), P(item 1) = 2^-theta / zeta(n, theta);
/// the rest follow the continuous approximation of the zipfian law.
///
/// Gray's formula needs `theta < 1` (its exponent `1 / (1 - theta)`); a
/// skew of 1 or more (Cai et al. run 1.04) draws by rejection-inversion
/// instead (Hörmann and Derflinger, 1996), which is exact for any
/// exponent: P(item i) = (i + 1)^-theta / zeta(n, theta).
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    theta: f64,
    nf: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    one_minus_eta: f64,
    /// `u` below this draws item 0.
    p0: f64,
    /// `u` below this (and not below `p0`) draws item 1.
    p01: f64,
    /// `theta >= 1`: the rejection-inversion sampler.
    inversion: Option<RejectionInversion>,
}

/// Rejection-inversion for the Zipf law over `1..=n` with exponent `s`
/// (Hörmann and Derflinger, "Rejection-inversion to generate variates
/// from monotone discrete distributions", 1996): invert the integral `H`
/// of the hat `h(x) = x^-s` on a uniform draw between `H(1.5) - 1` and
/// `H(n + 0.5)`, round, and accept unless the draw fell in the part of the
/// hat above the bar of the rounded value (rare: a handful of percent).
#[derive(Clone, Debug)]
struct RejectionInversion {
    s: f64,
    n: f64,
    h_x1: f64,
    h_n: f64,
    /// Values this close below their rounding point are always accepted.
    squeeze: f64,
}

impl RejectionInversion {
    fn new(n: u64, s: f64) -> RejectionInversion {
        let mut r = RejectionInversion {
            s,
            n: n as f64,
            h_x1: 0.0,
            h_n: 0.0,
            squeeze: 0.0,
        };
        r.h_x1 = r.big_h(1.5) - 1.0;
        r.h_n = r.big_h(n as f64 + 0.5);
        r.squeeze = 2.0 - r.big_h_inv(r.big_h(2.5) - r.h(2.0));
        r
    }

    /// The hat, `x^-s`.
    fn h(&self, x: f64) -> f64 {
        (-self.s * x.ln()).exp()
    }

    /// `H(x) = (x^(1-s) - 1) / (1 - s)`, or `ln x` at `s = 1`, computed as
    /// `ln x * f((1 - s) ln x)` with `f(t) = (e^t - 1) / t`.
    fn big_h(&self, x: f64) -> f64 {
        let l = x.ln();
        l * expm1_over((1.0 - self.s) * l)
    }

    /// The inverse of `H`: `exp(y * g((1 - s) y))` with
    /// `g(t) = ln(1 + t) / t`.
    fn big_h_inv(&self, y: f64) -> f64 {
        let t = (y * (1.0 - self.s)).max(-1.0);
        (y * ln1p_over(t)).exp()
    }

    /// A value in `1..=n`.
    fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        loop {
            let u = self.h_n + rng.gen::<f64>() * (self.h_x1 - self.h_n);
            let x = self.big_h_inv(u);
            let k = x.round().clamp(1.0, self.n);
            if k - x <= self.squeeze || u >= self.big_h(k + 0.5) - self.h(k) {
                return k as u64;
            }
        }
    }
}

/// `(e^t - 1) / t`, 1 at 0, accurate near 0.
fn expm1_over(t: f64) -> f64 {
    if t.abs() > 1e-8 {
        t.exp_m1() / t
    } else {
        1.0 + t * 0.5 * (1.0 + t / 3.0)
    }
}

/// `ln(1 + t) / t`, 1 at 0, accurate near 0.
fn ln1p_over(t: f64) -> f64 {
    if t.abs() > 1e-8 {
        t.ln_1p() / t
    } else {
        1.0 - t * (0.5 - t / 3.0)
    }
}

impl Zipf {
    /// A generator for `n >= 1` items with skew `theta` in
    /// `[0, MAX_THETA]`.
    ///
    /// # Panics
    /// If `n` is 0 or `theta` is outside `[0, MAX_THETA]`.
    pub fn new(n: u64, theta: f64) -> Zipf {
        assert!(n > 0, "Zipf needs at least one item");
        assert!(
            (0.0..=MAX_THETA).contains(&theta),
            "Zipf theta must be in [0, {MAX_THETA}], got {theta}"
        );
        if theta >= 1.0 {
            return Zipf {
                n,
                theta,
                nf: n as f64,
                alpha: 0.0,
                zetan: zeta(n, theta),
                eta: 0.0,
                one_minus_eta: 0.0,
                p0: 0.0,
                p01: 0.0,
                inversion: Some(RejectionInversion::new(n, theta)),
            };
        }
        let zetan = if theta == 0.0 {
            n as f64
        } else {
            zeta(n, theta)
        };
        let zeta2 = zeta(2.min(n), theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = if n > 2 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        } else {
            1.0
        };
        Zipf {
            n,
            theta,
            nf: n as f64,
            alpha,
            zetan,
            eta,
            one_minus_eta: 1.0 - eta,
            p0: 1.0 / zetan,
            p01: (1.0 + 0.5f64.powf(theta)) / zetan,
            inversion: None,
        }
    }

    /// Number of items.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The skew.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// zeta(n, theta) (n for theta = 0).
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// Draw an item in `0..n`. The uniform case is inlined into the caller
    /// (a call cost a third of its instructions); the skewed ones are a call.
    #[inline(always)]
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        if self.theta == 0.0 {
            return self.uniform(rng);
        }
        self.sample_skewed(rng)
    }

    /// [`Zipf::sample`] at theta 0: uniform by a multiply-shift (Lemire),
    /// one multiplication instead of `gen_range`'s rejection loop. The
    /// bias, under n / 2^64 per value, is far below anything a run can see.
    #[inline]
    fn uniform<R: Rng>(&self, rng: &mut R) -> u64 {
        ((rng.next_u64() as u128 * self.n as u128) >> 64) as u64
    }

    /// [`Zipf::sample`] for theta above 0.
    #[inline(never)]
    fn sample_skewed<R: Rng>(&self, rng: &mut R) -> u64 {
        if let Some(r) = &self.inversion {
            return r.sample(rng) - 1;
        }
        let u: f64 = rng.gen();
        if u < self.p0 {
            return 0;
        }
        if u < self.p01 {
            return 1.min(self.n - 1);
        }
        let v = self.nf * (self.eta * u + self.one_minus_eta).powf(self.alpha);
        (v as u64).min(self.n - 1)
    }
}

/// The standard YCSB core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    /// A, update heavy: 50% read, 50% update; zipfian.
    A,
    /// B, read mostly: 95% read, 5% update; zipfian.
    B,
    /// C, read only: 100% read; zipfian.
    C,
    /// D, read latest: 95% read of the newest records, 5% insert.
    D,
    /// E, short ranges: 95% scan, 5% insert; zipfian scan starts.
    E,
    /// F, read-modify-write: 50% read, 50% read-modify-write; zipfian.
    F,
    /// Only the explicit knobs (defaults: 50% read, 50% blind update,
    /// uniform).
    Custom,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 7] = [
        Preset::A,
        Preset::B,
        Preset::C,
        Preset::D,
        Preset::E,
        Preset::F,
        Preset::Custom,
    ];

    /// The name on the command line and in reports (`a` .. `f`, `custom`).
    pub fn name(self) -> &'static str {
        match self {
            Preset::A => "a",
            Preset::B => "b",
            Preset::C => "c",
            Preset::D => "d",
            Preset::E => "e",
            Preset::F => "f",
            Preset::Custom => "custom",
        }
    }
}

impl std::str::FromStr for Preset {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let l = s.to_ascii_lowercase();
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == l)
            .ok_or_else(|| format!("unknown YCSB workload '{s}' (a, b, c, d, e, f or custom)"))
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// YCSB knobs (see the module documentation for their meaning).
#[derive(Clone, Debug, PartialEq)]
pub struct YcsbConfig {
    /// The preset the mix came from.
    pub preset: Preset,
    /// Records loaded.
    pub records: u64,
    /// Value size in bytes.
    pub value_size: usize,
    /// Operations per transaction.
    pub ops_per_txn: usize,
    /// Fraction of operations that read.
    pub read_ratio: f64,
    /// Fraction of operations that scan.
    pub scan_ratio: f64,
    /// Fraction of operations that insert.
    pub insert_ratio: f64,
    /// Updates read the record first (read-modify-write) instead of writing
    /// blindly.
    pub rmw: bool,
    /// Zipfian skew in `[0, 1)`; 0 is uniform.
    pub theta: f64,
    /// Longest scan; lengths are uniform in `1..=scan_length`.
    pub scan_length: usize,
    /// Reads pick the newest records (workload D).
    pub read_latest: bool,
    /// Fraction of transactions that are long and read-only: each reads
    /// `long_read_size` uniformly chosen records (Faleiro's long read-only
    /// mix, thesis Fig. 5.8; the rest are the configured transactions).
    pub long_read_ratio: f64,
    /// Records one long read-only transaction reads.
    pub long_read_size: usize,
    /// Fraction of transactions that are *bulk* (Cai et al.'s hybrid YCSB,
    /// section 3.5): `ops_per_txn - 1` read/write operations as a `ycsb`
    /// transaction has, then one scan of exactly `scan_length` rows from a
    /// start drawn like a record. The book's mix: 10% bulk, 5 operations.
    pub bulk_ratio: f64,
    /// PWV's commit-point sweep (thesis Fig. 6.4): an explicit abort
    /// statement after this many operations, so that the pieces before it
    /// are abortable (their writes hidden until the commit point). The
    /// statement never fires: the protocols that make writes visible only
    /// at the end are unaffected by where it is. `None`: no statement.
    pub commit_point: Option<usize>,
    /// Lazy evaluation's correlated-access microbenchmark (thesis §4.4.1,
    /// "Normal"): the first record of a transaction is drawn as usual, the
    /// others from a normal distribution around it with this standard
    /// deviation (rounded, wrapped into the table, distinct within the
    /// transaction), so that conflicting transactions overlap on several
    /// records. `None`: every record independent.
    pub normal_sigma: Option<f64>,
}

impl Default for YcsbConfig {
    /// The `custom` defaults: 1,000,000 records of 100 bytes, 10 operations
    /// per transaction, 50% reads and 50% blind updates, uniform.
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
            long_read_ratio: 0.0,
            long_read_size: 10_000,
            bulk_ratio: 0.0,
            commit_point: None,
            normal_sigma: None,
        }
    }
}

/// Knobs given explicitly (on the command line); each one that is set
/// overrides the preset's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct YcsbOverrides {
    /// Records loaded.
    pub records: Option<u64>,
    /// Value size in bytes.
    pub value_size: Option<usize>,
    /// Operations per transaction.
    pub ops_per_txn: Option<usize>,
    /// Fraction of reads.
    pub read_ratio: Option<f64>,
    /// Fraction of scans.
    pub scan_ratio: Option<f64>,
    /// Fraction of inserts.
    pub insert_ratio: Option<f64>,
    /// Read-modify-write updates.
    pub rmw: Option<bool>,
    /// Zipfian skew.
    pub theta: Option<f64>,
    /// Longest scan.
    pub scan_length: Option<usize>,
    /// Reads pick the newest records.
    pub read_latest: Option<bool>,
    /// Fraction of long read-only transactions.
    pub long_read_ratio: Option<f64>,
    /// Records per long read-only transaction.
    pub long_read_size: Option<usize>,
    /// Fraction of bulk transactions (see [`YcsbConfig::bulk_ratio`]).
    pub bulk_ratio: Option<f64>,
    /// Where the abort statement is (see [`YcsbConfig::commit_point`]).
    pub commit_point: Option<usize>,
    /// See [`YcsbConfig::normal_sigma`].
    pub normal_sigma: Option<f64>,
}

impl YcsbConfig {
    /// The defaults with preset `p`'s mix and request distribution applied
    /// (YCSB's core workloads use zipfian requests with theta 0.99).
    pub fn preset(p: Preset) -> Self {
        let mut c = YcsbConfig {
            preset: p,
            ..YcsbConfig::default()
        };
        // (read, scan, insert, rmw, read latest); the rest are updates.
        let (r, s, i, rmw, latest) = match p {
            Preset::A => (0.5, 0.0, 0.0, false, false),
            Preset::B => (0.95, 0.0, 0.0, false, false),
            Preset::C => (1.0, 0.0, 0.0, false, false),
            Preset::D => (0.95, 0.0, 0.05, false, true),
            Preset::E => (0.0, 0.95, 0.05, false, false),
            Preset::F => (0.5, 0.0, 0.0, true, false),
            Preset::Custom => return c,
        };
        c.read_ratio = r;
        c.scan_ratio = s;
        c.insert_ratio = i;
        c.rmw = rmw;
        c.read_latest = latest;
        c.theta = 0.99;
        c
    }

    /// Preset `p` with the explicit knobs `o` applied on top, validated.
    pub fn with_overrides(p: Preset, o: &YcsbOverrides) -> Result<Self, String> {
        let mut c = YcsbConfig::preset(p);
        if let Some(v) = o.records {
            c.records = v;
        }
        if let Some(v) = o.value_size {
            c.value_size = v;
        }
        if let Some(v) = o.ops_per_txn {
            c.ops_per_txn = v;
        }
        if let Some(v) = o.read_ratio {
            c.read_ratio = v;
        }
        if let Some(v) = o.scan_ratio {
            c.scan_ratio = v;
        }
        if let Some(v) = o.insert_ratio {
            c.insert_ratio = v;
        }
        if let Some(v) = o.rmw {
            c.rmw = v;
        }
        if let Some(v) = o.theta {
            c.theta = v;
        }
        if let Some(v) = o.scan_length {
            c.scan_length = v;
        }
        if let Some(v) = o.read_latest {
            c.read_latest = v;
        }
        if let Some(v) = o.long_read_ratio {
            c.long_read_ratio = v;
        }
        if let Some(v) = o.long_read_size {
            c.long_read_size = v;
        }
        if let Some(v) = o.bulk_ratio {
            c.bulk_ratio = v;
        }
        if let Some(v) = o.commit_point {
            c.commit_point = Some(v);
        }
        if let Some(v) = o.normal_sigma {
            c.normal_sigma = Some(v);
        }
        c.validate()?;
        Ok(c)
    }

    /// Fraction of operations that update (what the other ratios leave).
    pub fn update_ratio(&self) -> f64 {
        let u = 1.0 - self.read_ratio - self.scan_ratio - self.insert_ratio;
        // Rounded to 9 decimals: the ratios are decimal fractions.
        ((u * 1e9).round() / 1e9).max(0.0)
    }

    /// Check the knobs; the message names the offending option.
    pub fn validate(&self) -> Result<(), String> {
        if self.records == 0 || self.records > MAX_RECORDS {
            return Err(format!(
                "--records must be in 1..={MAX_RECORDS}, got {}",
                self.records
            ));
        }
        if self.ops_per_txn == 0 {
            return Err("--ops-per-txn must be at least 1".into());
        }
        if let Some(s) = self.normal_sigma {
            if !(s.is_finite() && s > 0.0) {
                return Err(format!("--normal-sigma must be a positive number, got {s}"));
            }
            if (self.ops_per_txn as f64) > (self.records as f64).min(6.0 * s + 1.0) {
                return Err(format!(
                    "--normal-sigma {s} leaves too few records around the first for {} distinct \
                     ones per transaction",
                    self.ops_per_txn
                ));
            }
        }
        if self.value_size > tessera::MAX_VALUE_LEN {
            return Err(format!(
                "--value-size must be at most {} bytes, got {}",
                tessera::MAX_VALUE_LEN,
                self.value_size
            ));
        }
        for (flag, v) in [
            ("--read-ratio", self.read_ratio),
            ("--scan-ratio", self.scan_ratio),
            ("--insert-ratio", self.insert_ratio),
            ("--long-read-ratio", self.long_read_ratio),
            ("--bulk-ratio", self.bulk_ratio),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{flag} must be in [0, 1], got {v}"));
            }
        }
        if !(0.0..=MAX_THETA).contains(&self.theta) {
            return Err(format!(
                "--theta must be in [0, {MAX_THETA}], got {}",
                self.theta
            ));
        }
        if self.scan_length == 0 {
            return Err("--scan-length must be at least 1".into());
        }
        if self.long_read_size == 0 || self.long_read_size > MAX_LONG_READ {
            return Err(format!(
                "--long-read-size must be in 1..={MAX_LONG_READ}, got {}",
                self.long_read_size
            ));
        }
        let txns = self.scan_ratio + self.insert_ratio + self.long_read_ratio + self.bulk_ratio;
        if txns > 1.0 + 1e-9 {
            return Err(format!(
                "--scan-ratio ({}) + --insert-ratio ({}) + --long-read-ratio ({}) + --bulk-ratio ({}) \
                 add up to {txns} > 1",
                self.scan_ratio, self.insert_ratio, self.long_read_ratio, self.bulk_ratio
            ));
        }
        let sum = self.read_ratio + self.scan_ratio + self.insert_ratio;
        if sum > 1.0 + 1e-9 {
            return Err(format!(
                "--read-ratio ({}) + --scan-ratio ({}) + --insert-ratio ({}) add up to {sum} > 1 \
                 (the rest of the operations are updates; a preset's ratios may need overriding too)",
                self.read_ratio, self.scan_ratio, self.insert_ratio
            ));
        }
        Ok(())
    }
}

/// The transaction types (the names in reports).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Ycsb,
    Scan,
    Insert,
    LongRead,
    Bulk,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Ycsb => "ycsb",
            Kind::Scan => "scan",
            Kind::Insert => "insert",
            Kind::LongRead => "long_read",
            Kind::Bulk => "bulk",
        }
    }
}

/// One operation of the current transaction (record numbers).
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
    /// The types this mix runs, with the cumulative probability that ends
    /// each one's interval.
    kinds: Vec<(Kind, f64)>,
    names: Vec<&'static str>,
    /// P(read) within a `ycsb` transaction.
    read_in_rw: f64,
    /// Where a `ycsb` transaction's keys are uniform, with neither
    /// `normal_sigma` nor `read_latest`: the bound below which a draw's top
    /// 53 bits make an operation a read. That is exactly the test
    /// `gen::<f64>() < read_in_rw` (the float is those bits times 2^-53,
    /// and `read_in_rw * 2^53` is exact), so [`Ycsb::next`]'s short loop
    /// draws the same operations from the same seed.
    uniform_rw: Option<u64>,
    table: OnceLock<TableId>,
}

/// Per-thread YCSB state: RNG, the current transaction's operations, the
/// value buffers and the insert counter.
pub struct YcsbThread {
    rng: SmallRng,
    ops: Vec<Op>,
    /// The value written by blind updates and inserts (refreshed per
    /// transaction).
    value: Vec<u8>,
    /// Scratch for read-modify-write.
    buf: Vec<u8>,
    /// The seed `value`'s bytes were drawn from, and the current
    /// transaction's stamp in its first 8 bytes (what a deterministic
    /// request carries instead of the bytes).
    seed: u64,
    stamp: u64,
    thread: u64,
    inserted: u64,
}

/// Where a transaction's written value comes from.
#[derive(Clone, Copy)]
enum ValueSrc<'a> {
    /// The bytes (an interactive worker's thread state).
    Bytes(&'a [u8]),
    /// A deterministic request's: the same bytes, made again from the
    /// thread's fill seed and the transaction's stamp, and only when a
    /// write needs them (a read-modify-write of a present record does not).
    Seeded { seed: u64, stamp: u64, size: usize },
}

/// A thread's value bytes: `size` draws of a generator seeded with `seed`
/// (as `thread_state` draws them), with `stamp` in the first 8 bytes.
fn thread_fill(seed: u64, size: usize) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..size).map(|_| rng.gen()).collect()
}

fn put_stamp(value: &mut [u8], stamp: u64) {
    let k = value.len().min(8);
    value[..k].copy_from_slice(&stamp.to_le_bytes()[..k]);
}

std::thread_local! {
    /// The last fill a seeded value was made from (seed and bytes), and
    /// the read-modify-write scratch of deterministic requests. Taken out
    /// while in use: a BOHM executor may run another request's body inside
    /// this one's read (a producer run recursively), which then finds them
    /// empty and makes its own.
    static SEEDED_FILL: std::cell::Cell<Option<(u64, Vec<u8>)>> = const { std::cell::Cell::new(None) };
    static RMW_SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

impl ValueSrc<'_> {
    fn len(&self) -> usize {
        match *self {
            ValueSrc::Bytes(b) => b.len(),
            ValueSrc::Seeded { size, .. } => size,
        }
    }

    /// `f` of the value's bytes.
    fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match *self {
            ValueSrc::Bytes(b) => f(b),
            ValueSrc::Seeded { seed, stamp, size } => {
                let mut v = match SEEDED_FILL.take() {
                    Some((s, v)) if s == seed && v.len() == size => v,
                    _ => thread_fill(seed, size),
                };
                put_stamp(&mut v, stamp);
                let r = f(&v);
                SEEDED_FILL.set(Some((seed, v)));
                r
            }
        }
    }
}

/// The most point operations of one transaction looked up together.
const PREFETCH_OPS: usize = 16;

/// One YCSB transaction as a request: the drawn operations and the values
/// they write.
struct YcsbRequest<'a> {
    t: TableId,
    rmw: bool,
    ops: &'a [Op],
    value: ValueSrc<'a>,
    buf: &'a mut Vec<u8>,
}

impl YcsbRequest<'_> {
    /// One operation (a PWV piece runs one).
    fn run_op<T: Transaction>(&mut self, tx: &mut T, op: Op, sink: &mut u64) -> TxResult<()> {
        match op {
            Op::Read(r) => {
                if let Some(v) = tx.get(self.t, &key_of(r))? {
                    *sink = sink.wrapping_add(v.len() as u64);
                }
            }
            Op::Update(r) => {
                let k = key_of(r);
                if self.rmw {
                    // Read, modify one byte of what was read, write back.
                    match tx.get(self.t, &k)? {
                        Some(old) => {
                            self.buf.clear();
                            self.buf.extend_from_slice(old);
                            if let Some(b) = self.buf.first_mut() {
                                *b = b.wrapping_add(1);
                            }
                            tx.put(self.t, &k, self.buf)?;
                        }
                        None => self.value.with(|v| tx.put(self.t, &k, v))?,
                    }
                } else {
                    self.value.with(|v| tx.put(self.t, &k, v))?;
                }
            }
            Op::Scan(r, len) => {
                tx.scan(
                    self.t,
                    Bound::Included(&key_of(r)[..]),
                    Bound::Unbounded,
                    ScanOptions::new().limit(len),
                    |_, v| {
                        *sink = sink.wrapping_add(v.len() as u64);
                        true
                    },
                )?;
            }
            Op::Insert(r) => {
                let fresh = self.value.with(|v| tx.insert(self.t, &key_of(r), v))?;
                debug_assert!(fresh, "insert of record {r} found it present");
            }
        }
        Ok(())
    }
}

impl Request for YcsbRequest<'_> {
    type Output = ();
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        let mut sink = 0u64;
        // The point reads and updates are independent lookups: look them up
        // together first, so that their cache misses overlap (a hint).
        let mut keys = [[0u8; 8]; PREFETCH_OPS];
        let mut n = 0;
        for op in self.ops.iter() {
            if let Op::Read(r) | Op::Update(r) = *op {
                if n < PREFETCH_OPS {
                    keys[n] = key_of(r);
                    n += 1;
                }
            }
        }
        if n > 1 {
            let refs: [&[u8]; PREFETCH_OPS] = std::array::from_fn(|i| &keys[i][..]);
            tx.prefetch(self.t, &refs[..n], self.value.len());
        }
        for op in self.ops.iter() {
            self.run_op(tx, *op, &mut sink)?;
        }
        std::hint::black_box(sink);
        Ok(())
    }

    /// YCSB's operations name their records: reads read them, updates and
    /// inserts write them; a scan (workload E) declares the table read from
    /// its first key on, as its length counts rows, not keys.
    fn declare(&self, keys: &mut KeySet) -> bool {
        for op in self.ops {
            match *op {
                Op::Read(r) => keys.read(self.t, &key_of(r)),
                Op::Update(r) | Op::Insert(r) => keys.write(self.t, &key_of(r)),
                Op::Scan(r, _) => keys.read_from(self.t, &key_of(r)),
            }
        }
        true
    }
}

/// One YCSB transaction as an owned, loggable request (a
/// `tessera::det::Procedure`) for the deterministic protocols: the drawn
/// operations and the value they write, taken from a thread's current
/// transaction by [`Ycsb::procedure`]. Its body is the interactive
/// request's.
///
/// The value is carried as the seed of the client thread's fill and the
/// transaction's stamp (16 bytes, not `--value-size` bytes): the body
/// makes the same bytes again when a write needs them. A request of
/// 1,000-byte values was allocated by the client, logged whole and freed
/// by an executor, for read-modify-writes that never wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YcsbProc {
    t: TableId,
    rmw: bool,
    /// The abort statement's position (`u32::MAX`: none).
    commit_point: u32,
    ops: Vec<Op>,
    value_seed: u64,
    stamp: u64,
    value_size: u32,
}

impl YcsbProc {
    fn request<'a>(&'a self, buf: &'a mut Vec<u8>) -> YcsbRequest<'a> {
        YcsbRequest {
            t: self.t,
            rmw: self.rmw,
            ops: &self.ops,
            value: ValueSrc::Seeded {
                seed: self.value_seed,
                stamp: self.stamp,
                size: self.value_size as usize,
            },
            buf,
        }
    }
}

impl Request for YcsbProc {
    type Output = ();
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        let mut buf = RMW_SCRATCH.take();
        let r = self.request(&mut buf).run(tx);
        RMW_SCRATCH.set(buf);
        r
    }

    fn declare(&self, keys: &mut KeySet) -> bool {
        self.request(&mut Vec::new()).declare(keys)
    }
}

impl YcsbProc {
    const READ: u8 = 0;
    const UPDATE: u8 = 1;
    const SCAN: u8 = 2;
    const INSERT: u8 = 3;
}

/// Encoding: `table u32 | rmw u8 | nops u32 | nops x (kind u8 | record u64
/// [| scan length u32]) | value_size u32 | value_seed u64 | stamp u64 |
/// commit_point u32`.
///
/// For PWV a transaction of point reads and updates decomposes into one
/// piece per operation (its record's partition), all independent; with a
/// commit point, the operations before it and the abort statement (a
/// keyless piece after them) are abortable. Scans and inserts are not
/// decomposed (the transaction runs as one piece).
impl tessera::det::Procedure for YcsbProc {
    const ID: tessera::det::ProcId = 0x0100;
    const NAME: &'static str = "ycsb";

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.t.as_u32().to_le_bytes());
        out.push(u8::from(self.rmw));
        out.extend_from_slice(&(self.ops.len() as u32).to_le_bytes());
        for op in &self.ops {
            let (kind, r) = match *op {
                Op::Read(r) => (Self::READ, r),
                Op::Update(r) => (Self::UPDATE, r),
                Op::Scan(r, _) => (Self::SCAN, r),
                Op::Insert(r) => (Self::INSERT, r),
            };
            out.push(kind);
            out.extend_from_slice(&r.to_le_bytes());
            if let Op::Scan(_, len) = *op {
                out.extend_from_slice(&(len as u32).to_le_bytes());
            }
        }
        out.extend_from_slice(&self.value_size.to_le_bytes());
        out.extend_from_slice(&self.value_seed.to_le_bytes());
        out.extend_from_slice(&self.stamp.to_le_bytes());
        out.extend_from_slice(&self.commit_point.to_le_bytes());
    }

    /// Lazy (`--cc lazy`): a transaction of updates only returns nothing
    /// the client waits for, so its now-phase ends at once (the thesis's
    /// microbenchmark: every read-modify-write is deferred); one that reads
    /// (an external read) or scans or inserts runs eagerly.
    fn now_phase(&mut self, _tx: &mut tessera::Txn<'_>) -> TxResult<tessera::det::NowPhase<()>> {
        Ok(if self.ops.iter().all(|op| matches!(op, Op::Update(_))) {
            tessera::det::NowPhase::Ended(())
        } else {
            tessera::det::NowPhase::Eager
        })
    }

    fn later_phase(&mut self, tx: &mut tessera::Txn<'_>) -> TxResult<()> {
        tessera::Request::run(self, tx)
    }

    fn pieces(&self, plan: &mut tessera::det::PiecePlan) -> bool {
        if self
            .ops
            .iter()
            .any(|op| matches!(op, Op::Scan(..) | Op::Insert(_)))
        {
            return false;
        }
        // No abort statement: no commit point, nothing abortable.
        let cp = match self.commit_point {
            u32::MAX => 0,
            c => c as usize,
        };
        for (i, op) in self.ops.iter().enumerate() {
            let p = plan.piece(i < cp);
            match *op {
                Op::Read(r) => plan.read(p, self.t, &key_of(r)),
                Op::Update(r) => plan.write(p, self.t, &key_of(r)),
                Op::Scan(..) | Op::Insert(_) => unreachable!("not decomposed"),
            }
        }
        if self.commit_point != u32::MAX {
            let stop = plan.piece(true);
            for p in 0..cp.min(self.ops.len()) {
                plan.after(stop, p as u16);
            }
        }
        true
    }

    fn run_piece(
        &self,
        i: u16,
        tx: &mut tessera::Txn<'_>,
        _io: &mut tessera::det::PieceIo<'_>,
    ) -> TxResult<()> {
        let Some(op) = self.ops.get(usize::from(i)) else {
            // The abort statement: it never fires.
            return Ok(());
        };
        let mut buf = RMW_SCRATCH.take();
        let r = self.request(&mut buf).run_op(tx, *op, &mut 0);
        RMW_SCRATCH.set(buf);
        r
    }

    fn pieces_output(&mut self, _outputs: &[&[u8]]) -> TxResult<()> {
        Ok(())
    }

    fn decode(b: &[u8]) -> Result<Self, String> {
        let mut r = tessera::det::ArgReader::new("ycsb", b);
        let t = TableId::from_u32(r.u32()?);
        let rmw = match r.u8()? {
            0 => false,
            1 => true,
            x => return Err(format!("ycsb rmw flag {x}")),
        };
        let n = r.u32()? as usize;
        if n > b.len() / 9 {
            return Err(format!(
                "ycsb arguments claim {n} operations in {} bytes",
                b.len()
            ));
        }
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            let kind = r.u8()?;
            let key = r.u64()?;
            ops.push(match kind {
                Self::READ => Op::Read(key),
                Self::UPDATE => Op::Update(key),
                Self::SCAN => Op::Scan(key, r.u32()? as usize),
                Self::INSERT => Op::Insert(key),
                x => return Err(format!("ycsb operation kind {x}")),
            });
        }
        let value_size = r.u32()?;
        let value_seed = r.u64()?;
        let stamp = r.u64()?;
        let commit_point = r.u32()?;
        r.finish()?;
        Ok(YcsbProc {
            t,
            rmw,
            commit_point,
            ops,
            value_seed,
            stamp,
            value_size,
        })
    }
}

impl Ycsb {
    /// The current transaction of `st` (drawn by `Workload::next`) as an
    /// owned, loggable request.
    pub fn procedure(&self, st: &YcsbThread) -> YcsbProc {
        YcsbProc {
            t: self.table(),
            rmw: self.cfg.rmw,
            commit_point: self.cfg.commit_point.map_or(u32::MAX, |c| c as u32),
            ops: st.ops.clone(),
            value_seed: st.seed,
            stamp: st.stamp,
            value_size: st.value.len() as u32,
        }
    }

    /// The workload for these knobs (validated).
    pub fn new(cfg: YcsbConfig) -> Result<Ycsb, String> {
        cfg.validate()?;
        let zipf = Zipf::new(cfg.records, cfg.theta);
        // Ratios are decimal fractions; treat float dust (1 - 0.95 - 0.05)
        // as zero.
        let clean = |x: f64| if x < 1e-9 { 0.0 } else { x };
        let rw = clean(1.0 - cfg.scan_ratio - cfg.insert_ratio - cfg.long_read_ratio);
        let mut kinds = Vec::new();
        let mut acc = 0.0;
        for (k, p) in [
            (Kind::Ycsb, clean(rw - cfg.bulk_ratio)),
            (Kind::Bulk, cfg.bulk_ratio),
            (Kind::Scan, cfg.scan_ratio),
            (Kind::Insert, cfg.insert_ratio),
            (Kind::LongRead, cfg.long_read_ratio),
        ] {
            if p > 0.0 {
                acc += p;
                kinds.push((k, acc));
            }
        }
        // Rounding: the last type takes whatever is left.
        if let Some(last) = kinds.last_mut() {
            last.1 = f64::INFINITY;
        }
        let names = kinds.iter().map(|(k, _)| k.name()).collect();
        let read_in_rw = if rw > 0.0 {
            (cfg.read_ratio / rw).min(1.0)
        } else {
            0.0
        };
        let uniform_rw = (zipf.theta == 0.0 && cfg.normal_sigma.is_none() && !cfg.read_latest)
            .then(|| (read_in_rw * (1u64 << 53) as f64).ceil() as u64);
        Ok(Ycsb {
            cfg,
            zipf,
            kinds,
            names,
            read_in_rw,
            uniform_rw,
            table: OnceLock::new(),
        })
    }

    /// The knobs.
    pub fn config_ref(&self) -> &YcsbConfig {
        &self.cfg
    }

    /// The table, once loaded.
    pub fn table_id(&self) -> Option<TableId> {
        self.table.get().copied()
    }

    fn table(&self) -> TableId {
        *self.table.get().expect("YCSB run before it was loaded")
    }

    /// A record near `center` (normal, standard deviation `sigma`, wrapped
    /// into the table), distinct from the transaction's records so far.
    fn near(&self, st: &mut YcsbThread, center: u64, sigma: f64) -> u64 {
        let n = self.cfg.records as i64;
        loop {
            // Box-Muller.
            let u1: f64 = st.rng.gen_range(f64::EPSILON..1.0);
            let u2: f64 = st.rng.gen();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let r = (center as i64 + (z * sigma).round() as i64).rem_euclid(n) as u64;
            let taken = st.ops.iter().any(|op| match *op {
                Op::Read(x) | Op::Update(x) => x == r,
                _ => false,
            });
            if !taken {
                return r;
            }
        }
    }

    /// A record number for a read: zipfian (or uniform), or with
    /// `read_latest` a zipfian distance back from the newest record.
    #[inline]
    fn read_record(&self, st: &mut YcsbThread) -> u64 {
        let back = self.zipf.sample(&mut st.rng);
        if !self.cfg.read_latest {
            return back;
        }
        if back < st.inserted {
            INSERT_BASE + (st.thread << 40) + (st.inserted - 1 - back)
        } else {
            let n = self.cfg.records;
            n - 1 - (back - st.inserted).min(n - 1)
        }
    }
}

impl Workload for Ycsb {
    type Thread = YcsbThread;

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn txn_types(&self) -> &[&'static str] {
        &self.names
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
        let t = match db.table(TABLE) {
            Ok(t) => t,
            Err(_) => db.create_table(TABLE)?,
        };
        let t = *self.table.get_or_init(|| t);
        let n = self.cfg.records;
        let mut value = vec![0u8; self.cfg.value_size];
        for (i, b) in value.iter_mut().enumerate() {
            *b = b'a' + (i % 26) as u8;
        }
        crate::driver::load_rows(
            db,
            n,
            threads,
            LOAD_BATCH,
            progress,
            |tx, r, _| tx.insert(t, &key_of(r), &value),
            &|r| format!("table '{TABLE}' already holds record {r}: load into an empty database"),
        )?;
        Ok(n)
    }

    fn thread_state(&self, thread: usize, _threads: usize, seed: u64) -> YcsbThread {
        // The value's bytes are the first draws of the thread's generator
        // (`thread_fill` makes them again for a deterministic request).
        let value = thread_fill(seed, self.cfg.value_size);
        let mut rng = SmallRng::seed_from_u64(seed);
        for _ in 0..self.cfg.value_size {
            rng.gen::<u8>();
        }
        YcsbThread {
            rng,
            ops: Vec::with_capacity(self.cfg.ops_per_txn),
            value,
            buf: Vec::with_capacity(self.cfg.value_size),
            seed,
            stamp: 0,
            thread: thread as u64,
            inserted: 0,
        }
    }

    fn next(&self, st: &mut YcsbThread) -> usize {
        st.ops.clear();
        let c = &self.cfg;
        let ty = if self.kinds.len() == 1 {
            0
        } else {
            let p: f64 = st.rng.gen();
            self.kinds.iter().position(|&(_, end)| p < end).unwrap_or(0)
        };
        match self.kinds[ty].0 {
            k @ (Kind::Ycsb | Kind::Bulk) => {
                let bulk = k == Kind::Bulk;
                let n = c.ops_per_txn - usize::from(bulk);
                if let Some(read_below) = self.uniform_rw {
                    // The general loop (the `else` branch) with its
                    // per-operation choices settled: two draws an
                    // operation, in the same order.
                    for _ in 0..n {
                        let read = st.rng.gen::<u64>() >> 11 < read_below;
                        let r = self.zipf.uniform(&mut st.rng);
                        st.ops.push(if read { Op::Read(r) } else { Op::Update(r) });
                    }
                } else {
                    let mut first = None;
                    for _ in 0..n {
                        let read = st.rng.gen::<f64>() < self.read_in_rw;
                        let r = match (c.normal_sigma, first) {
                            (Some(sigma), Some(f)) => self.near(st, f, sigma),
                            _ if read => self.read_record(st),
                            _ => self.zipf.sample(&mut st.rng),
                        };
                        first.get_or_insert(r);
                        st.ops.push(if read { Op::Read(r) } else { Op::Update(r) });
                    }
                }
                if bulk {
                    let start = self.zipf.sample(&mut st.rng);
                    st.ops.push(Op::Scan(start, c.scan_length));
                }
                // A fresh value for blind updates: vary its first 8 bytes.
                st.stamp = st.rng.gen::<u64>();
                put_stamp(&mut st.value, st.stamp);
            }
            Kind::Scan => {
                for _ in 0..c.ops_per_txn {
                    let start = self.zipf.sample(&mut st.rng);
                    let len = st.rng.gen_range(1..=c.scan_length);
                    st.ops.push(Op::Scan(start, len));
                }
            }
            Kind::Insert => {
                for _ in 0..c.ops_per_txn {
                    st.ops
                        .push(Op::Insert(INSERT_BASE + (st.thread << 40) + st.inserted));
                    st.inserted += 1;
                }
            }
            Kind::LongRead => {
                for _ in 0..c.long_read_size {
                    st.ops.push(Op::Read(st.rng.gen_range(0..c.records)));
                }
            }
        }
        ty
    }

    fn execute(&self, st: &mut YcsbThread, w: &mut Worker) -> TxResult<()> {
        let YcsbThread {
            ops, value, buf, ..
        } = st;
        w.try_execute(&mut YcsbRequest {
            t: self.table(),
            rmw: self.cfg.rmw,
            ops,
            value: ValueSrc::Bytes(value),
            buf,
        })
    }

    fn config(&self) -> serde_json::Value {
        let c = &self.cfg;
        let mix: serde_json::Map<String, serde_json::Value> = {
            let mut prev = 0.0;
            self.kinds
                .iter()
                .map(|&(k, end)| {
                    let end = if end.is_finite() { end } else { 1.0 };
                    let p = ((end - prev) * 1e9).round() / 1e9;
                    prev = end;
                    (k.name().to_string(), serde_json::json!(p))
                })
                .collect()
        };
        serde_json::json!({
            "preset": c.preset.name(),
            "records": c.records,
            "value_size": c.value_size,
            "ops_per_txn": c.ops_per_txn,
            "read_ratio": c.read_ratio,
            "update_ratio": c.update_ratio(),
            "scan_ratio": c.scan_ratio,
            "insert_ratio": c.insert_ratio,
            "rmw": c.rmw,
            "theta": c.theta,
            "distribution": if c.read_latest { "latest" } else if c.theta > 0.0 { "zipfian" } else { "uniform" },
            "read_latest": c.read_latest,
            "scan_length": c.scan_length,
            "long_read_ratio": c.long_read_ratio,
            "bulk_ratio": c.bulk_ratio,
            "long_read_size": c.long_read_size,
            "commit_point": c.commit_point,
            "normal_sigma": c.normal_sigma,
            "key_order": "hashed",
            "txn_mix": mix,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::{Options, Protocol, TxError};

    /// Inverse of `x ^= x >> s`.
    fn unxorshift(y: u64, s: u32) -> u64 {
        let mut x = y;
        for _ in 0..64 / s {
            x = y ^ (x >> s);
        }
        x
    }

    /// Multiplicative inverse of an odd number mod 2^64 (Newton's method).
    fn inv(c: u64) -> u64 {
        let mut x = c;
        for _ in 0..6 {
            x = x.wrapping_mul(2u64.wrapping_sub(c.wrapping_mul(x)));
        }
        x
    }

    fn unscramble(mut x: u64) -> u64 {
        x = unxorshift(x, 31);
        x = unxorshift(x.wrapping_mul(inv(0x94d0_49bb_1331_11eb)), 27);
        unxorshift(x.wrapping_mul(inv(0xbf58_476d_1ce4_e5b9)), 30)
    }

    /// A deterministic request carries the value as a seed and a stamp:
    /// the bytes its body makes again are the thread's, transaction by
    /// transaction (blind writes and inserts under `--cc bohm` write what
    /// the interactive protocols write), and the thread's later draws are
    /// those of one generator (the value's bytes are its first draws).
    #[test]
    fn seeded_values_are_the_threads_values() {
        let wl = Ycsb::new(YcsbConfig {
            records: 1_000,
            value_size: 100,
            rmw: false,
            ..YcsbConfig::default()
        })
        .unwrap();
        let mut st = wl.thread_state(0, 1, 77);
        let mut rng = SmallRng::seed_from_u64(77);
        let first: Vec<u8> = (0..100).map(|_| rng.gen()).collect();
        assert_eq!(&st.value[8..], &first[8..]);
        assert_eq!(st.rng.gen::<u64>(), rng.gen::<u64>());
        for _ in 0..20 {
            wl.next(&mut st);
            let src = ValueSrc::Seeded {
                seed: st.seed,
                stamp: st.stamp,
                size: st.value.len(),
            };
            src.with(|v| assert_eq!(v, &st.value[..]));
            // Again, from the cached fill.
            src.with(|v| assert_eq!(v, &st.value[..]));
        }
    }

    #[test]
    fn scramble_is_a_bijection() {
        // Injective on a dense sample ...
        let mut seen = std::collections::HashSet::new();
        for i in 0..200_000u64 {
            assert!(seen.insert(scramble(i)), "collision at {i}");
        }
        // ... and invertible everywhere (checked on a spread of values).
        let mut rng = SmallRng::seed_from_u64(3);
        for i in (0..100_000u64).chain((0..100_000).map(|_| rng.gen())) {
            assert_eq!(unscramble(scramble(i)), i);
        }
        // Neighbours land far apart.
        assert!(scramble(0).abs_diff(scramble(1)) > 1 << 40);
        assert_eq!(key_of(5), scramble(5).to_be_bytes());
    }

    #[test]
    fn zeta_closed_form_tail_matches_the_exact_sum() {
        for theta in [0.5, 0.9, 0.99] {
            let n = ZETA_EXACT * 2 + 12345;
            let exact = zeta_exact(1, n, theta);
            let fast = zeta(n, theta);
            assert!(
                ((exact - fast) / exact).abs() < 1e-12,
                "theta {theta}: {exact} vs {fast}"
            );
        }
        assert_eq!(zeta(1, 0.99), 1.0);
        assert!((zeta(2, 0.5) - (1.0 + 1.0 / 2f64.sqrt())).abs() < 1e-15);
    }

    /// A skew of 1 or more (rejection-inversion) draws each item with its
    /// exact Zipf probability, (i + 1)^-theta / zeta(n, theta): a
    /// chi-square test per exponent, and every draw in range.
    #[test]
    fn zipf_at_and_above_one_is_exact() {
        for (theta, seed) in [(1.0, 1u64), (1.04, 2), (1.5, 3), (3.0, 4)] {
            let n = 50u64;
            let z = Zipf::new(n, theta);
            let mut rng = SmallRng::seed_from_u64(seed);
            let draws = 400_000u32;
            let mut counts = vec![0u32; n as usize];
            for _ in 0..draws {
                counts[z.sample(&mut rng) as usize] += 1;
            }
            let zn = zeta_exact(1, n, theta);
            let mut chi2 = 0.0;
            let mut cells = 0;
            for (i, &c) in counts.iter().enumerate() {
                let e = f64::from(draws) * ((i + 1) as f64).powf(-theta) / zn;
                if e >= 5.0 {
                    chi2 += (f64::from(c) - e).powi(2) / e;
                    cells += 1;
                }
            }
            // 49 degrees of freedom at most: the 99.99th percentile is
            // under 100.
            assert!(
                chi2 < 100.0,
                "theta {theta}: chi2 {chi2} over {cells} cells"
            );
        }
        let z = Zipf::new(10_000_000, 1.04);
        let mut rng = SmallRng::seed_from_u64(9);
        assert!((0..10_000).all(|_| z.sample(&mut rng) < 10_000_000));
        assert_eq!(Zipf::new(1, 2.0).sample(&mut rng), 0);
    }

    #[test]
    fn uniform_zipf_covers_the_range_evenly() {
        let z = Zipf::new(100, 0.0);
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = [0u32; 100];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng) as usize] += 1;
        }
        // Expected 1000 each; 5 sigma is about 160.
        assert!(
            counts.iter().all(|&c| (840..1160).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn skewed_zipf_is_skewed_and_in_range() {
        let n = 100_000;
        let z = Zipf::new(n, 0.99);
        let mut rng = SmallRng::seed_from_u64(2);
        let draws = 400_000u64;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let v = z.sample(&mut rng);
            assert!(v < n);
            counts[v as usize] += 1;
        }
        // P(0) = 1 / zeta(1e5, 0.99), about 1 / 11.8.
        let p0 = counts[0] as f64 / draws as f64;
        let want0 = 1.0 / z.zetan();
        assert!((0.075..0.095).contains(&want0), "zeta {}", z.zetan());
        assert!((p0 - want0).abs() < want0 * 0.05, "p(0) {p0} vs {want0}");
        // P(1) = 2^-0.99 / zeta.
        let p1 = counts[1] as f64 / draws as f64;
        let want1 = 0.5f64.powf(0.99) / z.zetan();
        assert!((p1 - want1).abs() < want1 * 0.07, "p(1) {p1} vs {want1}");
        // Heavily skewed: the hottest 1% of the items draw most requests,
        // yet the tail is reached.
        let top: u64 = counts[..(n / 100) as usize].iter().sum();
        assert!(top as f64 / draws as f64 > 0.55, "top 1%: {top}");
        assert!(counts[(n / 2) as usize..].iter().sum::<u64>() > 0);
    }

    /// Speed of a draw (run with `--release -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn zipf_sample_speed() {
        for theta in [0.0, 0.5, 0.99] {
            let z = Zipf::new(1_000_000, theta);
            let mut rng = SmallRng::seed_from_u64(5);
            let n = 50_000_000u64;
            let t = std::time::Instant::now();
            let mut acc = 0u64;
            for _ in 0..n {
                acc = acc.wrapping_add(z.sample(&mut rng));
            }
            std::hint::black_box(acc);
            let ns = t.elapsed().as_nanos() as f64 / n as f64;
            println!("theta {theta}: {ns:.2} ns per draw");
        }
        let t = std::time::Instant::now();
        std::hint::black_box(Zipf::new(1_000_000, 0.99));
        println!("Zipf::new(1e6, 0.99): {:?}", t.elapsed());
        let t = std::time::Instant::now();
        std::hint::black_box(Zipf::new(1_000_000_000, 0.99));
        println!("Zipf::new(1e9, 0.99): {:?}", t.elapsed());
    }

    #[test]
    fn tiny_zipf_domains_work() {
        let mut rng = SmallRng::seed_from_u64(4);
        for n in 1..=3 {
            let z = Zipf::new(n, 0.99);
            for _ in 0..1000 {
                assert!(z.sample(&mut rng) < n);
            }
        }
    }

    #[test]
    fn presets_parse_and_set_their_mix() {
        for p in Preset::ALL {
            assert_eq!(p.name().parse::<Preset>().unwrap(), p);
            assert_eq!(p.name().to_uppercase().parse::<Preset>().unwrap(), p);
        }
        assert!("g".parse::<Preset>().unwrap_err().contains("'g'"));
        let b = YcsbConfig::preset(Preset::B);
        assert_eq!((b.read_ratio, b.theta, b.rmw), (0.95, 0.99, false));
        assert!((b.update_ratio() - 0.05).abs() < 1e-12);
        let c = YcsbConfig::preset(Preset::C);
        assert_eq!(c.update_ratio(), 0.0);
        let d = YcsbConfig::preset(Preset::D);
        assert!(d.read_latest && d.insert_ratio == 0.05 && d.read_ratio == 0.95);
        let e = YcsbConfig::preset(Preset::E);
        assert_eq!(
            (e.scan_ratio, e.insert_ratio, e.read_ratio),
            (0.95, 0.05, 0.0)
        );
        let f = YcsbConfig::preset(Preset::F);
        assert!(f.rmw && f.read_ratio == 0.5);
        assert_eq!(YcsbConfig::preset(Preset::Custom), YcsbConfig::default());
    }

    /// The short loop for uniform keys draws exactly the operations, the
    /// scans and the stamps the general loop draws from the same seed, at
    /// read ratios that are and are not dyadic, with and without scans.
    #[test]
    fn uniform_short_loop_draws_what_the_general_one_draws() {
        for (read_ratio, bulk_ratio) in
            [(0.0, 0.0), (0.5, 0.0), (0.95, 0.1), (0.3, 0.5), (1.0, 0.0)]
        {
            let cfg = YcsbConfig {
                records: 1_000_003,
                ops_per_txn: 10,
                read_ratio,
                bulk_ratio,
                ..YcsbConfig::default()
            };
            let fast = Ycsb::new(cfg.clone()).unwrap();
            assert!(fast.uniform_rw.is_some());
            let mut general = Ycsb::new(cfg).unwrap();
            general.uniform_rw = None;
            let (mut a, mut b) = (fast.thread_state(0, 1, 5), general.thread_state(0, 1, 5));
            let mut reads = 0;
            for _ in 0..5_000 {
                assert_eq!(fast.next(&mut a), general.next(&mut b));
                assert_eq!(a.ops, b.ops);
                assert_eq!(a.stamp, b.stamp);
                reads += a.ops.iter().filter(|op| matches!(op, Op::Read(_))).count();
            }
            if read_ratio > 0.0 && read_ratio < 1.0 {
                assert!(reads > 0, "{read_ratio}");
            }
        }
    }

    /// `normal_sigma`: a transaction's records are distinct and, but for
    /// the first, close to the first (wrapping around the table's ends);
    /// about 68% within one standard deviation.
    #[test]
    fn normal_records_cluster_around_the_first() {
        let wl = Ycsb::new(YcsbConfig {
            records: 1_000,
            ops_per_txn: 10,
            read_ratio: 0.0,
            normal_sigma: Some(30.0),
            ..YcsbConfig::default()
        })
        .unwrap();
        let mut st = wl.thread_state(0, 1, 7);
        let (mut within, mut all) = (0, 0);
        for _ in 0..2_000 {
            wl.next(&mut st);
            let rs: Vec<u64> = st
                .ops
                .iter()
                .map(|op| match *op {
                    Op::Update(r) => r,
                    _ => panic!("{op:?}"),
                })
                .collect();
            let mut d = rs.clone();
            d.sort_unstable();
            d.dedup();
            assert_eq!(d.len(), rs.len(), "{rs:?}");
            for &r in &rs[1..] {
                let gap = r.abs_diff(rs[0]).min(1_000 - r.abs_diff(rs[0]));
                assert!(gap <= 300, "{rs:?}");
                within += usize::from(gap <= 30);
                all += 1;
            }
        }
        let f = within as f64 / all as f64;
        assert!((0.6..0.8).contains(&f), "{f}");
        let bad = YcsbConfig {
            normal_sigma: Some(0.5),
            ..YcsbConfig::default()
        };
        assert!(bad.validate().unwrap_err().contains("--normal-sigma"));
    }

    #[test]
    fn explicit_knobs_override_the_preset() {
        let o = YcsbOverrides {
            theta: Some(0.5),
            read_ratio: Some(0.8),
            records: Some(5000),
            rmw: Some(true),
            ..Default::default()
        };
        let c = YcsbConfig::with_overrides(Preset::A, &o).unwrap();
        assert_eq!(c.preset, Preset::A);
        assert_eq!(
            (c.theta, c.read_ratio, c.records, c.rmw),
            (0.5, 0.8, 5000, true)
        );
        assert_eq!(c.value_size, 100);
        // F's rmw can be switched off.
        let c = YcsbConfig::with_overrides(
            Preset::F,
            &YcsbOverrides {
                rmw: Some(false),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(!c.rmw);
        // No overrides: the preset as is.
        assert_eq!(
            YcsbConfig::with_overrides(Preset::E, &YcsbOverrides::default()).unwrap(),
            YcsbConfig::preset(Preset::E)
        );
    }

    #[test]
    fn bad_knobs_name_their_flag() {
        let bad = |o: YcsbOverrides| YcsbConfig::with_overrides(Preset::Custom, &o).unwrap_err();
        assert!(bad(YcsbOverrides {
            read_ratio: Some(1.5),
            ..Default::default()
        })
        .contains("--read-ratio"));
        assert!(bad(YcsbOverrides {
            theta: Some(10.5),
            ..Default::default()
        })
        .contains("--theta"));
        assert!(bad(YcsbOverrides {
            theta: Some(-0.1),
            ..Default::default()
        })
        .contains("--theta"));
        assert!(bad(YcsbOverrides {
            records: Some(0),
            ..Default::default()
        })
        .contains("--records"));
        assert!(bad(YcsbOverrides {
            ops_per_txn: Some(0),
            ..Default::default()
        })
        .contains("--ops-per-txn"));
        assert!(bad(YcsbOverrides {
            scan_length: Some(0),
            ..Default::default()
        })
        .contains("--scan-length"));
        assert!(bad(YcsbOverrides {
            read_ratio: Some(0.6),
            scan_ratio: Some(0.6),
            ..Default::default()
        })
        .contains("add up to"));
        assert!(bad(YcsbOverrides {
            long_read_size: Some(0),
            ..Default::default()
        })
        .contains("--long-read-size"));
        assert!(bad(YcsbOverrides {
            long_read_ratio: Some(0.5),
            scan_ratio: Some(0.6),
            ..Default::default()
        })
        .contains("--long-read-ratio"));
        // E has 95% scans: raising reads needs lowering scans.
        assert!(YcsbConfig::with_overrides(
            Preset::E,
            &YcsbOverrides {
                read_ratio: Some(0.5),
                ..Default::default()
            }
        )
        .is_err());
    }

    /// The long read-only mix: the fraction of transactions asked for is
    /// long and read-only, reading `long_read_size` records, uniformly
    /// spread over the table; the rest are the configured updates.
    #[test]
    fn long_read_only_transactions_follow_their_ratio() {
        let wl = Ycsb::new(YcsbConfig {
            records: 1_000,
            read_ratio: 0.0,
            rmw: true,
            long_read_ratio: 0.25,
            long_read_size: 300,
            ..YcsbConfig::default()
        })
        .unwrap();
        assert_eq!(wl.txn_types(), ["ycsb", "long_read"]);
        let _ = wl.table.set(TableId::from_u32(0));
        let mut st = wl.thread_state(0, 1, 7);
        let (mut long, mut seen) = (0, std::collections::HashSet::new());
        for _ in 0..2_000 {
            if wl.next(&mut st) == 1 {
                long += 1;
                assert_eq!(st.ops.len(), 300);
                for op in &st.ops {
                    let Op::Read(r) = *op else {
                        panic!("a long read-only transaction with {op:?}")
                    };
                    assert!(r < 1_000);
                    seen.insert(r);
                }
            } else {
                assert!(st.ops.iter().all(|op| matches!(op, Op::Update(_))));
            }
        }
        assert!((400..600).contains(&long), "{long} of 2000");
        assert!(seen.len() > 990, "{} records read", seen.len());
    }

    #[test]
    fn transaction_types_follow_the_mix() {
        let names = |p| {
            Ycsb::new(YcsbConfig::preset(p))
                .unwrap()
                .txn_types()
                .to_vec()
        };
        assert_eq!(names(Preset::A), ["ycsb"]);
        assert_eq!(names(Preset::C), ["ycsb"]);
        assert_eq!(names(Preset::D), ["ycsb", "insert"]);
        assert_eq!(names(Preset::E), ["scan", "insert"]);
        // Mix of E: about 5% insert transactions of ops_per_txn inserts each.
        let wl = Ycsb::new(YcsbConfig {
            records: 1000,
            ..YcsbConfig::preset(Preset::E)
        })
        .unwrap();
        let mut st = wl.thread_state(3, 4, 9);
        let mut inserts = 0;
        for _ in 0..10_000 {
            if wl.next(&mut st) == 1 {
                inserts += 1;
                assert!(st.ops.iter().all(|o| matches!(o, Op::Insert(_))));
                assert_eq!(st.ops.len(), 10);
            } else {
                for o in &st.ops {
                    match *o {
                        Op::Scan(r, len) => assert!(r < 1000 && (1..=100).contains(&len)),
                        _ => panic!("{o:?} in a scan transaction"),
                    }
                }
            }
        }
        assert!((400..600).contains(&inserts), "{inserts}");
        // Inserted record numbers are this thread's and fresh.
        assert_eq!(st.inserted, inserts * 10);
        // Reads in a custom 30% read mix.
        let wl = Ycsb::new(YcsbConfig {
            records: 1000,
            read_ratio: 0.3,
            ..YcsbConfig::default()
        })
        .unwrap();
        let mut st = wl.thread_state(0, 1, 1);
        let (mut reads, mut ops) = (0, 0);
        for _ in 0..2000 {
            assert_eq!(wl.next(&mut st), 0);
            ops += st.ops.len();
            reads += st.ops.iter().filter(|o| matches!(o, Op::Read(_))).count();
        }
        let frac = reads as f64 / ops as f64;
        assert!((0.28..0.32).contains(&frac), "{frac}");
    }

    #[test]
    fn read_latest_reads_recent_records() {
        let wl = Ycsb::new(YcsbConfig {
            records: 10_000,
            ..YcsbConfig::preset(Preset::D)
        })
        .unwrap();
        let mut st = wl.thread_state(2, 4, 5);
        let mut reads = Vec::new();
        for _ in 0..5000 {
            wl.next(&mut st);
            for o in &st.ops {
                if let Op::Read(r) = *o {
                    reads.push(r);
                }
            }
        }
        assert!(st.inserted > 0);
        let own = INSERT_BASE + (2 << 40);
        for &r in &reads {
            assert!(
                r < 10_000 || (own..own + st.inserted).contains(&r),
                "read of record {r}"
            );
        }
        // Most reads hit this thread's inserts or the loaded tail.
        let recent = reads
            .iter()
            .filter(|&&r| r >= own || r >= 10_000 - 1000)
            .count();
        assert!(recent * 2 > reads.len());
    }

    fn run_briefly(p: Preset, protocol: Protocol) {
        let db = Database::open(Options::in_memory().protocol(protocol).workers(2)).unwrap();
        let wl = Ycsb::new(YcsbConfig {
            records: 2000,
            value_size: 16,
            ..YcsbConfig::preset(p)
        })
        .unwrap();
        assert_eq!(wl.load(&db, 2, &|_| {}).unwrap(), 2000);
        let mut w = db.worker().unwrap();
        let mut st = wl.thread_state(0, 1, 7);
        for _ in 0..200 {
            wl.next(&mut st);
            loop {
                match wl.execute(&mut st, &mut w) {
                    Ok(()) => break,
                    Err(TxError::Conflict(_)) => continue,
                    Err(e) => panic!("{p:?}: {e}"),
                }
            }
        }
        assert_eq!(w.stats().commits, 200, "{p:?}");
        // Every loaded record is there, with the value size asked for.
        let t = wl.table_id().unwrap();
        let rows = w
            .run(|tx| {
                let mut n = 0u64;
                for i in 0..2000 {
                    let v = tx.get(t, &key_of(i))?.expect("loaded record");
                    assert_eq!(v.len(), 16);
                    n += 1;
                }
                Ok(n)
            })
            .unwrap();
        assert_eq!(rows, 2000);
    }

    #[test]
    fn every_preset_runs_on_silo() {
        for p in Preset::ALL {
            run_briefly(p, Protocol::Silo);
        }
    }

    #[test]
    fn every_preset_runs_on_nocc() {
        for p in Preset::ALL {
            run_briefly(p, Protocol::NoCc);
        }
    }

    #[test]
    fn rmw_changes_what_it_read() {
        let db = Database::open(Options::in_memory().workers(2)).unwrap();
        let wl = Ycsb::new(YcsbConfig {
            records: 1,
            value_size: 4,
            ops_per_txn: 3,
            read_ratio: 0.0,
            rmw: true,
            ..YcsbConfig::default()
        })
        .unwrap();
        wl.load(&db, 1, &|_| {}).unwrap();
        let t = wl.table_id().unwrap();
        let mut w = db.worker().unwrap();
        let before = w
            .run(|tx| Ok(tx.get(t, &key_of(0))?.unwrap().to_vec()))
            .unwrap();
        let mut st = wl.thread_state(0, 1, 1);
        wl.next(&mut st);
        wl.execute(&mut st, &mut w).unwrap();
        let after = w
            .run(|tx| Ok(tx.get(t, &key_of(0))?.unwrap().to_vec()))
            .unwrap();
        // Three read-modify-writes of the same record in one transaction,
        // each reading the previous one's write.
        assert_eq!(after[0], before[0].wrapping_add(3));
        assert_eq!(after[1..], before[1..]);
    }

    #[test]
    fn loading_twice_is_an_error() {
        let db = Database::open(Options::in_memory().workers(2)).unwrap();
        let wl = Ycsb::new(YcsbConfig {
            records: 10,
            ..YcsbConfig::default()
        })
        .unwrap();
        wl.load(&db, 1, &|_| {}).unwrap();
        let e = wl.load(&db, 1, &|_| {}).unwrap_err();
        assert!(e.to_string().contains("already holds"), "{e}");
    }
}

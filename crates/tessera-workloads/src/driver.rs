//! The benchmark driver every workload shares.
//!
//! A [`Workload`] says how to load its data and how to draw and execute one
//! transaction; the driver does the rest, the same way for every workload
//! and every protocol:
//!
//! * **loading** ([`load`]): the workload's own parallel loader, with an
//!   indicatif progress bar on stderr (hidden when stderr is not a terminal
//!   or when quiet);
//! * **running** ([`run`]): `threads` driver threads, each with its own
//!   [`Worker`]; a warm-up period whose results are discarded, then the
//!   measured period. A transaction's inputs are drawn once
//!   ([`Workload::next`]); a **conflict abort** is retried with the *same*
//!   inputs until it commits (optionally after a randomized exponential
//!   backoff), or, with [`RunConfig::retry`] off, dropped so that the thread
//!   draws a new transaction (Silo's and ERMIA's benchmark drivers do this
//!   unless given `--retry-aborted-transactions`); every abort is counted by
//!   reason and transaction type; a **user abort** is counted apart and not
//!   retried; a real error stops the run. Latency runs from the first
//!   attempt to the commit.
//! * **live progress**: once a second, one line on stderr (elapsed time,
//!   committed txn/s and abort rate over the last second); updated in place
//!   with a carriage return on a terminal, plain lines otherwise, nothing
//!   when quiet.
//! * **results** ([`Report`]): committed transactions per second, aborts by
//!   reason, latency percentiles per transaction type and in total
//!   (hdrhistogram, merged across threads at the end), and the per-thread
//!   spread; [`Report::table`] renders it for humans and `serde_json` turns
//!   it into the JSON object of `tessera bench ... --json`.
//!
//! # Accounting
//!
//! A commit or abort counts if it happens while the measured period is on
//! (by the time it *finishes*): transactions that started in the warm-up and
//! commit in the measured period count, with their whole latency; those
//! still running when the period ends do not. Throughput is committed
//! transactions divided by the measured wall time. The abort rate is
//! conflict aborts divided by attempts that ended in a commit or a conflict
//! abort.
//!
//! # Overhead
//!
//! The worker hot path takes no lock, allocates nothing and writes no shared
//! atomic: counters and histograms are per thread, the only shared state
//! read per transaction is the phase word (written three times per run), and
//! each thread publishes its running totals for the progress display with
//! relaxed stores into its own cache-padded slot.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tessera::{ConflictReason, Database, Durability, Error, LogStats, TxError, TxResult, Worker};

/// A benchmark workload: data loading plus a transaction generator.
///
/// The driver calls [`Workload::next`] once per transaction to draw its
/// inputs into the thread's state, then [`Workload::execute`] (one attempt)
/// until it commits or user-aborts; a conflict-aborted attempt is repeated
/// with the same inputs, so `execute` must not draw new ones.
pub trait Workload: Sync {
    /// Per-thread state: the thread's RNG and the current transaction's
    /// inputs.
    type Thread: Send;

    /// Short name for reports (`ycsb`, `tpcc`).
    fn name(&self) -> &'static str;

    /// Names of the transaction types this configuration runs, indexed by
    /// what [`Workload::next`] returns. Reports list them in this order.
    fn txn_types(&self) -> &[&'static str];

    /// Rows [`Workload::load`] will insert (for the progress bar).
    fn rows_to_load(&self) -> u64;

    /// Create the tables and load the initial data using `threads` threads
    /// (each with its own worker). Call `progress(n)` after every batch of
    /// `n` rows. Returns the number of rows loaded.
    fn load(
        &self,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error>;

    /// Fresh state for driver thread `thread` of `threads` (workloads that
    /// partition data, like TPC-C's home warehouses, use both), with its
    /// own RNG seed.
    fn thread_state(&self, thread: usize, threads: usize, seed: u64) -> Self::Thread;

    /// Draw the next transaction's inputs into `st`; returns its type index
    /// (into [`Workload::txn_types`]).
    fn next(&self, st: &mut Self::Thread) -> usize;

    /// Execute the current transaction once (one `Worker::try_run`) and
    /// return its outcome.
    fn execute(&self, st: &mut Self::Thread, w: &mut Worker) -> TxResult<()>;

    /// The workload's knobs, for the report's `config` object.
    fn config(&self) -> serde_json::Value;
}

/// How to run a benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// Driver threads, each with its own worker.
    pub threads: usize,
    /// Loader threads (0: as many as driver threads). The database needs
    /// that many worker slots while loading.
    pub load_threads: usize,
    /// Length of the measured period in seconds.
    pub seconds: f64,
    /// Warm-up seconds before the measured period; results discarded.
    pub warmup: f64,
    /// No progress bar and no progress lines on stderr.
    pub quiet: bool,
    /// Base RNG seed; thread `i` gets a seed derived from it and `i`.
    pub seed: u64,
    /// Wait a randomized, exponentially growing spin before retrying a
    /// conflict-aborted transaction (as `Worker::run` does). Off: retry at
    /// once.
    pub backoff: bool,
    /// Retry a conflict-aborted transaction with the same inputs until it
    /// commits (the default). Off: count the abort and draw a new
    /// transaction, as Silo's and ERMIA's benchmark drivers do by default
    /// (their `retry_aborted_transactions` is off). ERMIA's Figure 5 is
    /// measured that way: a retried Q2\* keeps its thread away from the
    /// NewOrders that would abort it, which hides OCC's starvation of long
    /// readers.
    pub retry: bool,
    /// The durability mode being measured, for the report. With a logging
    /// database the driver always measures the *acknowledged* (durable)
    /// commit latency besides the commit latency; `Sync` only changes the
    /// label: open the database with `Durability::Async` so that workers
    /// go on while their commits become durable (Silo's benchmark does the
    /// same; a `Sync` database would not slow the driver either, as it
    /// commits through `try_run`, but its loader would wait per batch).
    pub durability: Durability,
    /// Run every request through the batch path's checks
    /// ([`Worker::set_declared`]): reconnaissance where a request needs it,
    /// then its body against its declared key sets only. A workload whose
    /// declarations miss a key fails the run with an error naming it.
    pub declared: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            threads: 1,
            load_threads: 0,
            seconds: 10.0,
            warmup: 2.0,
            quiet: false,
            seed: 42,
            backoff: true,
            retry: true,
            durability: Durability::None,
            declared: false,
        }
    }
}

/// Why a benchmark could not finish.
#[derive(Debug)]
pub enum DriverError {
    /// Bad run configuration (names the setting).
    Config(String),
    /// Loading failed.
    Load(Error),
    /// A worker could not be created.
    Worker(Error),
    /// The log failed (waiting for the last commits to become durable).
    Log(Error),
    /// A transaction failed with a real (not conflict, not user) error.
    Txn {
        /// Its type.
        txn_type: &'static str,
        /// The driver thread that ran it.
        thread: usize,
        /// The error.
        error: Error,
    },
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Config(s) => f.write_str(s),
            DriverError::Load(e) => write!(f, "loading failed: {e}"),
            DriverError::Worker(e) => write!(f, "cannot create a worker: {e}"),
            DriverError::Log(e) => write!(f, "the log failed: {e}"),
            DriverError::Txn {
                txn_type,
                thread,
                error,
            } => write!(
                f,
                "a '{txn_type}' transaction on driver thread {thread} failed: {error}"
            ),
        }
    }
}

impl std::error::Error for DriverError {}

const N_REASONS: usize = ConflictReason::ALL.len();

/// Histograms start covering 1 ns ..= 10 ms at 3 significant digits and
/// grow (rarely, allocating) if a latency exceeds that.
const HIST_INITIAL_MAX_NS: u64 = 10_000_000;

fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_max(HIST_INITIAL_MAX_NS, 3).expect("histogram bounds");
    h.auto(true);
    h
}

/// Record a latency of `ns` nanoseconds. `record` grows an auto-resizing
/// histogram past its initial range (`saturating_record` would clamp every
/// longer latency to that range, as it never resizes).
#[inline]
fn record(h: &mut Histogram<u64>, ns: u64) {
    let ns = ns.max(1);
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

/// Counters of one transaction type on one thread.
struct TypeStats {
    committed: u64,
    aborts: [u64; N_REASONS],
    user_aborts: u64,
    /// Latency in nanoseconds, first attempt to commit.
    hist: Histogram<u64>,
    /// Acknowledged latency in nanoseconds, first attempt to the moment the
    /// driver saw the commit's epoch durable (only with a log).
    durable: Histogram<u64>,
}

impl TypeStats {
    fn new() -> Self {
        TypeStats {
            committed: 0,
            aborts: [0; N_REASONS],
            user_aborts: 0,
            hist: new_histogram(),
            durable: new_histogram(),
        }
    }

    fn merge(&mut self, o: &TypeStats) {
        self.committed += o.committed;
        for (a, b) in self.aborts.iter_mut().zip(&o.aborts) {
            *a += b;
        }
        self.user_aborts += o.user_aborts;
        self.hist
            .add(&o.hist)
            .expect("auto-resizing histograms add");
        self.durable
            .add(&o.durable)
            .expect("auto-resizing histograms add");
    }
}

/// Running totals one thread publishes for the progress display: a single
/// writer, relaxed stores, on the thread's own cache line.
#[derive(Default)]
struct Live {
    commits: AtomicU64,
    aborts: AtomicU64,
    /// Nanoseconds the thread waited at the end for its last commit to be
    /// durable.
    final_wait_ns: AtomicU64,
}

const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURE: u8 = 1;
const PHASE_STOP: u8 = 2;

/// Sets the phase to stop when dropped, so that worker threads end even if
/// the controlling thread unwinds.
struct StopOnDrop<'a>(&'a AtomicU8);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(PHASE_STOP, Ordering::Relaxed);
    }
}

/// Latency summary in microseconds (two decimals).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency {
                p50: 0.0,
                p95: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
                mean: 0.0,
            };
        }
        let us = |ns: u64| round2(ns as f64 / 1000.0);
        Latency {
            p50: us(h.value_at_quantile(0.50)),
            p95: us(h.value_at_quantile(0.95)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: round2(h.mean() / 1000.0),
        }
    }
}

/// Aborts of one transaction type or of the whole run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Aborts {
    /// Conflict aborts (each retried).
    pub total: u64,
    /// Conflict aborts by reason ([`ConflictReason::name`]; every reason is
    /// listed, zeros included).
    pub by_reason: BTreeMap<String, u64>,
    /// User aborts (the transaction's own rollbacks; not retried).
    pub user: u64,
}

impl Aborts {
    fn of(s: &TypeStats) -> Aborts {
        Aborts {
            total: s.aborts.iter().sum(),
            by_reason: ConflictReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), s.aborts[r.index()]))
                .collect(),
            user: s.user_aborts,
        }
    }
}

/// Results of one transaction type.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TypeReport {
    /// Committed transactions.
    pub committed: u64,
    /// Aborts of this type.
    pub aborted: Aborts,
    /// User aborts (the same number as `aborted.user`).
    pub user_aborts: u64,
    /// Conflict aborts / (commits + conflict aborts) of this type.
    pub abort_rate: f64,
    /// Committed per second of measured time.
    pub throughput_txn_per_s: f64,
    /// Latency from the first attempt to the commit.
    pub latency_us: Latency,
    /// Latency from the first attempt to the acknowledgement (the commit's
    /// epoch durable); `null` without a log.
    pub durable_latency_us: Option<Latency>,
}

/// The per-type results in the workload's order (a JSON object whose keys
/// are the type names, in that order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeReports(pub Vec<(String, TypeReport)>);

impl TypeReports {
    /// The report of type `name`.
    pub fn get(&self, name: &str) -> Option<&TypeReport> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, r)| r)
    }

    /// Iterate in the workload's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TypeReport)> {
        self.0.iter().map(|(n, r)| (n.as_str(), r))
    }
}

impl Serialize for TypeReports {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Loading statistics.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LoadReport {
    /// Wall time of the load in seconds.
    pub seconds: f64,
    /// Rows inserted.
    pub records: u64,
    /// Growth of the process's resident memory over the load, in bytes: the
    /// memory the loaded database takes (Linux; `None` elsewhere).
    pub resident_growth_bytes: Option<u64>,
}

/// Resident set size of this process in bytes (Linux `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The results of one run; `tessera bench ... --json` prints it as one JSON
/// object (field names as here).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// Protocol name ([`tessera::Protocol::name`]).
    pub protocol: String,
    /// Workload name.
    pub workload: String,
    /// Driver threads.
    pub threads: usize,
    /// Measured seconds (the actual wall time of the measured period).
    pub seconds: f64,
    /// Warm-up seconds.
    pub warmup_seconds: f64,
    /// Committed transactions in the measured period.
    pub committed: u64,
    /// Aborts in the measured period.
    pub aborted: Aborts,
    /// Conflict aborts / (commits + conflict aborts).
    pub abort_rate: f64,
    /// Committed transactions per second (all types).
    pub throughput_txn_per_s: f64,
    /// Latency over all types.
    pub latency_us: Latency,
    /// Per transaction type, in the workload's order.
    pub transactions: TypeReports,
    /// Committed transactions per driver thread.
    pub per_thread: Vec<u64>,
    /// Whether conflict aborts were retried after a backoff.
    pub backoff: bool,
    /// Whether conflict aborts were retried at all ([`RunConfig::retry`]);
    /// when not, `committed` counts only first attempts that committed.
    pub retry: bool,
    /// Whether requests ran through the batch path's checks
    /// ([`RunConfig::declared`]).
    pub declared: bool,
    /// Base RNG seed.
    pub seed: u64,
    /// Engine settings the caller chose to record (e.g. `epoch_ms`); an
    /// empty object if none.
    pub engine: serde_json::Value,
    /// The workload's knobs ([`Workload::config`]).
    pub config: serde_json::Value,
    /// Loading.
    pub load: LoadReport,
    /// Durability mode (`none`, `async` or `sync`; [`RunConfig::durability`]).
    pub durability: String,
    /// The log's work; `null` without a log.
    pub log: Option<LogReport>,
    /// Acknowledged commit latency over all types: from the first attempt
    /// to the moment the driver saw the commit's epoch durable; `null`
    /// without a log. See [`run`].
    pub durable_latency_us: Option<Latency>,
}

/// What the log did during a run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LogReport {
    /// Bytes written to log segments during the measured period
    /// (approximately: the loggers trail the workers by an epoch or so).
    pub bytes: u64,
    /// `bytes` per transaction committed in the measured period.
    pub bytes_per_txn: f64,
    /// `fdatasync` calls during the measured period.
    pub fsyncs: u64,
    /// Transaction entries logged during the measured period.
    pub txns: u64,
    /// Bytes written by this process in all (the load included).
    pub total_bytes: u64,
    /// `fdatasync` calls in all.
    pub total_fsyncs: u64,
    /// The durable epoch at the end of the run, once every committed
    /// transaction was acknowledged.
    pub durable_epoch: u64,
    /// Seconds the driver threads waited at the end for their last commits
    /// to become durable (the longest).
    pub final_wait_seconds: f64,
    /// Checkpoints taken since the database was opened (the background
    /// checkpointer, `Options::checkpoint_interval`).
    pub checkpoints: u64,
    /// The last background checkpoint failure, if any.
    pub checkpoint_error: Option<String>,
}

impl RunConfig {
    /// Check the settings; the message names the offending one.
    pub fn validate(&self) -> Result<(), DriverError> {
        if self.threads == 0 {
            return Err(DriverError::Config("threads must be at least 1".into()));
        }
        if !(self.seconds > 0.0 && self.seconds.is_finite()) {
            return Err(DriverError::Config(format!(
                "seconds must be positive, got {}",
                self.seconds
            )));
        }
        if !(self.warmup >= 0.0 && self.warmup.is_finite()) {
            return Err(DriverError::Config(format!(
                "warmup must be zero or positive, got {}",
                self.warmup
            )));
        }
        Ok(())
    }
}

/// Load the workload into `db` with `cfg.threads` threads and a progress bar
/// on stderr (unless quiet or stderr is not a terminal).
pub fn load<W: Workload>(
    db: &Database,
    wl: &W,
    cfg: &RunConfig,
) -> Result<LoadReport, DriverError> {
    let total = wl.rows_to_load();
    let bar = if cfg.quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "loading {msg} [{bar:40}] {human_pos}/{human_len} rows ({per_sec}, eta {eta})",
            )
            .expect("progress template")
            .progress_chars("=> "),
        );
        b.set_message(wl.name().to_string());
        b
    };
    let rss0 = resident_bytes();
    let t0 = Instant::now();
    let threads = if cfg.load_threads > 0 {
        cfg.load_threads
    } else {
        cfg.threads.max(1)
    };
    let rows = wl
        .load(db, threads, &|n| bar.inc(n))
        .map_err(DriverError::Load)?;
    bar.finish_and_clear();
    let seconds = t0.elapsed().as_secs_f64();
    if !cfg.quiet {
        eprintln!(
            "loaded {rows} rows in {seconds:.2} s ({:.0} rows/s)",
            rows as f64 / seconds.max(1e-9)
        );
    }
    Ok(LoadReport {
        seconds: (seconds * 1000.0).round() / 1000.0,
        records: rows,
        resident_growth_bytes: rss0.zip(resident_bytes()).map(|(a, b)| b.saturating_sub(a)),
    })
}

/// Load, then run: [`load`] followed by [`run`].
pub fn bench<W: Workload>(db: &Database, wl: &W, cfg: &RunConfig) -> Result<Report, DriverError> {
    cfg.validate()?;
    let l = load(db, wl, cfg)?;
    run(db, wl, cfg, l)
}

/// splitmix64: derive well-spread per-thread seeds from one base seed.
fn mix_seed(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Spin a random number of iterations, up to `16 << min(attempts, 10)`
/// (randomized exponential backoff, as `Worker::run`).
#[cold]
fn backoff(rng: &mut u64, attempts: u32) {
    let mut x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    let cap = 16u64 << attempts.min(10);
    for _ in 0..x % cap {
        std::hint::spin_loop();
    }
    if attempts > 12 {
        std::thread::yield_now();
    }
}

/// One driver thread: run transactions until the phase says stop.
fn worker_loop<W: Workload>(
    wl: &W,
    cfg: &RunConfig,
    i: usize,
    mut w: Worker,
    phase: &AtomicU8,
    live: &Live,
) -> Result<Vec<TypeStats>, DriverError> {
    let types = wl.txn_types();
    let mut st = wl.thread_state(i, cfg.threads, mix_seed(cfg.seed ^ ((i as u64) << 32)));
    let mut stats: Vec<TypeStats> = types.iter().map(|_| TypeStats::new()).collect();
    let mut rng = mix_seed(cfg.seed.wrapping_add(i as u64)) | 1;
    let (mut commits, mut aborts) = (0u64, 0u64);
    // Acknowledgement: with a log, commits of the measured period wait in
    // this FIFO (commit epoch, start, type) until their epoch is durable.
    // A worker's commit epochs do not decrease, so the front is the oldest
    // (were one out of order, it would wait for the one before it: latency
    // could only be overstated).
    let db = w.database();
    let track = db.log_stats().is_some();
    let mut pending: VecDeque<(u64, Instant, usize)> = VecDeque::new();
    while phase.load(Ordering::Relaxed) != PHASE_STOP {
        let ty = wl.next(&mut st);
        let start = Instant::now();
        let mut attempts = 0u32;
        loop {
            match wl.execute(&mut st, &mut w) {
                Ok(()) => {
                    commits += 1;
                    if phase.load(Ordering::Relaxed) == PHASE_MEASURE {
                        let ns = start.elapsed().as_nanos() as u64;
                        let s = &mut stats[ty];
                        s.committed += 1;
                        record(&mut s.hist, ns);
                        if track {
                            pending.push_back((w.last_commit().epoch(), start, ty));
                        }
                    }
                    break;
                }
                Err(TxError::Conflict(r)) => {
                    aborts += 1;
                    match phase.load(Ordering::Relaxed) {
                        PHASE_MEASURE => stats[ty].aborts[r.index()] += 1,
                        PHASE_STOP => break,
                        _ => {}
                    }
                    if !cfg.retry {
                        break;
                    }
                    attempts += 1;
                    if cfg.backoff {
                        backoff(&mut rng, attempts);
                    }
                }
                Err(TxError::UserAbort) => {
                    if phase.load(Ordering::Relaxed) == PHASE_MEASURE {
                        stats[ty].user_aborts += 1;
                    }
                    break;
                }
                Err(TxError::Error(error)) => {
                    phase.store(PHASE_STOP, Ordering::Relaxed);
                    return Err(DriverError::Txn {
                        txn_type: types[ty],
                        thread: i,
                        error,
                    });
                }
            }
        }
        if let Some(&(e, _, _)) = pending.front() {
            let durable = db.durable_epoch();
            if e <= durable {
                acknowledge(&mut pending, &mut stats, durable, Instant::now());
            }
        }
        live.commits.store(commits, Ordering::Relaxed);
        live.aborts.store(aborts, Ordering::Relaxed);
    }
    if !pending.is_empty() {
        // Nothing stays unacknowledged: wait for the last commit.
        let t0 = Instant::now();
        db.wait_durable(w.last_commit()).map_err(DriverError::Log)?;
        let now = Instant::now();
        acknowledge(&mut pending, &mut stats, u64::MAX, now);
        live.final_wait_ns
            .store(now.duration_since(t0).as_nanos() as u64, Ordering::Relaxed);
    }
    Ok(stats)
}

/// Record the acknowledged latency (`now` - start) of every pending commit
/// whose epoch is at most `durable`, oldest first.
fn acknowledge(
    pending: &mut VecDeque<(u64, Instant, usize)>,
    stats: &mut [TypeStats],
    durable: u64,
    now: Instant,
) {
    while let Some(&(e, start, ty)) = pending.front() {
        if e > durable {
            break;
        }
        let ns = now.saturating_duration_since(start).as_nanos() as u64;
        record(&mut stats[ty].durable, ns);
        pending.pop_front();
    }
}

/// The progress line for stderr.
fn progress_line(label: &str, elapsed: f64, of: f64, tps: f64, abort_rate: f64) -> String {
    format!(
        "{label:>6} {elapsed:5.1}/{of:.1} s {tps:>13.0} txn/s  abort rate {:6.2}%",
        100.0 * abort_rate
    )
}

/// Run the benchmark on a database `wl` was loaded into: warm-up, then the
/// measured period; returns the merged results.
pub fn run<W: Workload>(
    db: &Database,
    wl: &W,
    cfg: &RunConfig,
    load: LoadReport,
) -> Result<Report, DriverError> {
    cfg.validate()?;
    let threads = cfg.threads;
    let phase = AtomicU8::new(if cfg.warmup > 0.0 {
        PHASE_WARMUP
    } else {
        PHASE_MEASURE
    });
    let live: Vec<CachePadded<Live>> = (0..threads)
        .map(|_| CachePadded::new(Live::default()))
        .collect();
    let workers = (0..threads)
        .map(|_| {
            db.worker().map(|mut w| {
                w.set_declared(cfg.declared);
                w
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(DriverError::Worker)?;
    if db.log_stats().is_some() {
        // Let the load reach the log first, so that its bytes are not
        // counted as the run's.
        let target = db.epoch();
        let deadline = Instant::now() + Duration::from_secs(10);
        while db.durable_epoch() < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    let mut measured = 0.0f64;
    let mut log_at_measure: Option<LogStats> = None;
    let results: Vec<Result<Vec<TypeStats>, DriverError>> = std::thread::scope(|s| {
        let _stop = StopOnDrop(&phase);
        let start = Instant::now();
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(i, w)| {
                let (phase, live) = (&phase, &*live[i]);
                std::thread::Builder::new()
                    .name(format!("driver-{i}"))
                    .spawn_scoped(s, move || worker_loop(wl, cfg, i, w, phase, live))
                    .expect("spawn a driver thread")
            })
            .collect();

        // This thread switches the phases and shows the progress.
        let show = !cfg.quiet;
        let tty = std::io::stderr().is_terminal();
        let second = Duration::from_secs(1);
        let warm_end = start + Duration::from_secs_f64(cfg.warmup);
        let mut measure_start = (cfg.warmup <= 0.0).then_some(start);
        if measure_start.is_some() {
            log_at_measure = db.log_stats();
        }
        let mut next_tick = start + second;
        let mut last = (start, 0u64, 0u64);
        loop {
            let now = Instant::now();
            if phase.load(Ordering::Relaxed) == PHASE_STOP {
                // A worker failed.
                if let Some(ms) = measure_start {
                    measured = now.duration_since(ms).as_secs_f64();
                }
                break;
            }
            // Progress first, so the second that ends the warm-up is
            // labelled as warm-up.
            if now >= next_tick {
                if show {
                    let c: u64 = live.iter().map(|l| l.commits.load(Ordering::Relaxed)).sum();
                    let a: u64 = live.iter().map(|l| l.aborts.load(Ordering::Relaxed)).sum();
                    let dt = now.duration_since(last.0).as_secs_f64().max(1e-9);
                    let (dc, da) = (c.saturating_sub(last.1), a.saturating_sub(last.2));
                    let line = match measure_start {
                        Some(ms) => progress_line(
                            "run",
                            now.duration_since(ms).as_secs_f64(),
                            cfg.seconds,
                            dc as f64 / dt,
                            da as f64 / ((dc + da) as f64).max(1.0),
                        ),
                        None => progress_line(
                            "warmup",
                            now.duration_since(start).as_secs_f64(),
                            cfg.warmup,
                            dc as f64 / dt,
                            da as f64 / ((dc + da) as f64).max(1.0),
                        ),
                    };
                    let mut err = std::io::stderr().lock();
                    let _ = if tty {
                        write!(err, "\r{line}\x1b[K")
                    } else {
                        writeln!(err, "{line}")
                    };
                    let _ = err.flush();
                    last = (now, c, a);
                }
                while next_tick <= now {
                    next_tick += second;
                }
            }
            if measure_start.is_none() && now >= warm_end {
                phase.store(PHASE_MEASURE, Ordering::Relaxed);
                measure_start = Some(now);
                log_at_measure = db.log_stats();
            }
            let end = measure_start.map(|ms| ms + Duration::from_secs_f64(cfg.seconds));
            if let (Some(ms), Some(end)) = (measure_start, end) {
                if now >= end {
                    phase.store(PHASE_STOP, Ordering::Relaxed);
                    measured = now.duration_since(ms).as_secs_f64();
                    break;
                }
            }
            let deadline = next_tick.min(end.unwrap_or(warm_end));
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        }
        if show && tty {
            eprintln!();
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });

    let mut per_thread_stats = Vec::with_capacity(threads);
    for r in results {
        per_thread_stats.push(r?);
    }
    let mut report = merge(db, wl, cfg, load, measured, &per_thread_stats);
    if let Some(end) = db.log_stats() {
        let begin = log_at_measure.unwrap_or(end);
        let bytes = end.bytes.saturating_sub(begin.bytes);
        let wait_ns = live
            .iter()
            .map(|l| l.final_wait_ns.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        report.log = Some(LogReport {
            bytes,
            bytes_per_txn: round2(bytes as f64 / (report.committed as f64).max(1.0)),
            fsyncs: end.syncs.saturating_sub(begin.syncs),
            txns: end.txns.saturating_sub(begin.txns),
            total_bytes: end.bytes,
            total_fsyncs: end.syncs,
            durable_epoch: end.durable_epoch,
            final_wait_seconds: (wait_ns as f64 / 1e6).round() / 1000.0,
            checkpoints: db.checkpoint_status().0,
            checkpoint_error: db.checkpoint_status().1.map(|e| e.to_string()),
        });
    }
    Ok(report)
}

/// Merge the threads' counters and histograms into the report.
fn merge<W: Workload>(
    db: &Database,
    wl: &W,
    cfg: &RunConfig,
    load: LoadReport,
    measured: f64,
    per_thread_stats: &[Vec<TypeStats>],
) -> Report {
    let types = wl.txn_types();
    let track = db.log_stats().is_some();
    let mut by_type: Vec<TypeStats> = types.iter().map(|_| TypeStats::new()).collect();
    let mut total = TypeStats::new();
    let mut per_thread = Vec::with_capacity(per_thread_stats.len());
    for ts in per_thread_stats {
        per_thread.push(ts.iter().map(|s| s.committed).sum());
        for (i, s) in ts.iter().enumerate() {
            by_type[i].merge(s);
            total.merge(s);
        }
    }
    let secs = measured.max(1e-9);
    let rate = |s: &TypeStats| {
        let a: u64 = s.aborts.iter().sum();
        a as f64 / ((s.committed + a) as f64).max(1.0)
    };
    let transactions = TypeReports(
        types
            .iter()
            .zip(&by_type)
            .map(|(name, s)| {
                (
                    name.to_string(),
                    TypeReport {
                        committed: s.committed,
                        aborted: Aborts::of(s),
                        user_aborts: s.user_aborts,
                        abort_rate: rate(s),
                        throughput_txn_per_s: round2(s.committed as f64 / secs),
                        latency_us: Latency::of(&s.hist),
                        durable_latency_us: track.then(|| Latency::of(&s.durable)),
                    },
                )
            })
            .collect(),
    );
    Report {
        protocol: db.protocol().name().to_string(),
        workload: wl.name().to_string(),
        threads: cfg.threads,
        seconds: (measured * 1000.0).round() / 1000.0,
        warmup_seconds: cfg.warmup,
        committed: total.committed,
        aborted: Aborts::of(&total),
        abort_rate: rate(&total),
        throughput_txn_per_s: round2(total.committed as f64 / secs),
        latency_us: Latency::of(&total.hist),
        transactions,
        per_thread,
        backoff: cfg.backoff,
        retry: cfg.retry,
        declared: cfg.declared,
        seed: cfg.seed,
        engine: serde_json::json!({}),
        config: wl.config(),
        load,
        durability: cfg.durability.name().to_string(),
        log: None,
        durable_latency_us: track.then(|| Latency::of(&total.durable)),
    }
}

impl Report {
    /// The human-readable results: a summary, aborts by reason, one row per
    /// transaction type plus the total, and the per-thread spread.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} on {}: {} thread(s), {:.2} s measured after {:.1} s warm-up; {} rows loaded in {:.2} s",
            self.workload,
            self.protocol,
            self.threads,
            self.seconds,
            self.warmup_seconds,
            self.load.records,
            self.load.seconds
        );
        if let Some(b) = self.load.resident_growth_bytes {
            let _ = writeln!(s, "loaded data: {:.1} MiB resident", b as f64 / 1048576.0);
        }
        let _ = writeln!(
            s,
            "throughput {:.0} txn/s: {} committed, {} conflict aborts ({:.3}% of attempts), {} user aborts",
            self.throughput_txn_per_s,
            self.committed,
            self.aborted.total,
            100.0 * self.abort_rate,
            self.aborted.user
        );
        if self.aborted.total > 0 {
            let reasons: Vec<String> = self
                .aborted
                .by_reason
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            let _ = writeln!(s, "conflict aborts by reason: {}", reasons.join(", "));
        }
        let _ = writeln!(
            s,
            "\n{:<12} {:>12} {:>12} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "type",
            "committed",
            "txn/s",
            "aborts",
            "abort%",
            "user",
            "p50 us",
            "p95 us",
            "p99 us",
            "p99.9 us",
            "max us"
        );
        let mut row = |name: &str, t: &TypeReport| {
            let l = &t.latency_us;
            let _ = writeln!(
                s,
                "{name:<12} {:>12} {:>12.0} {:>10} {:>8.3} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                t.committed,
                t.throughput_txn_per_s,
                t.aborted.total,
                100.0 * t.abort_rate,
                t.user_aborts,
                l.p50,
                l.p95,
                l.p99,
                l.p999,
                l.max
            );
        };
        for (name, t) in self.transactions.iter() {
            row(name, t);
        }
        if self.transactions.0.len() > 1 {
            row(
                "all",
                &TypeReport {
                    committed: self.committed,
                    aborted: self.aborted.clone(),
                    user_aborts: self.aborted.user,
                    abort_rate: self.abort_rate,
                    throughput_txn_per_s: self.throughput_txn_per_s,
                    latency_us: self.latency_us.clone(),
                    durable_latency_us: self.durable_latency_us.clone(),
                },
            );
        }
        if self.durable_latency_us.is_some() {
            let _ = writeln!(
                s,
                "\ndurable commit latency (first attempt to the commit's epoch durable):\n{:<12} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9}",
                "type", "committed", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us"
            );
            let mut drow = |name: &str, committed: u64, l: &Latency| {
                let _ = writeln!(
                    s,
                    "{name:<12} {committed:>12} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                    l.p50, l.p95, l.p99, l.p999, l.max
                );
            };
            for (name, t) in self.transactions.iter() {
                if let Some(l) = &t.durable_latency_us {
                    drow(name, t.committed, l);
                }
            }
            if let (true, Some(l)) = (self.transactions.0.len() > 1, &self.durable_latency_us) {
                drow("all", self.committed, l);
            }
        }
        match &self.log {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "\ndurability {}: {:.2} MiB logged in the measured period ({:.0} B per committed txn, \
                     {} txn entries), {} fsyncs; durable epoch {} at the end (last commits waited {:.3} s); \
                     {:.2} MiB logged in all",
                    self.durability,
                    l.bytes as f64 / 1048576.0,
                    l.bytes_per_txn,
                    l.txns,
                    l.fsyncs,
                    l.durable_epoch,
                    l.final_wait_seconds,
                    l.total_bytes as f64 / 1048576.0
                );
                if l.checkpoints > 0 || l.checkpoint_error.is_some() {
                    let _ = writeln!(
                        s,
                        "checkpoints taken: {}{}",
                        l.checkpoints,
                        l.checkpoint_error
                            .as_ref()
                            .map_or(String::new(), |e| format!("; last failure: {e}"))
                    );
                }
            }
            None => {
                let _ = writeln!(s, "\ndurability {}: no log", self.durability);
            }
        }
        let mut pt = self.per_thread.clone();
        pt.sort_unstable();
        if let (Some(min), Some(max)) = (pt.first(), pt.last()) {
            let _ = writeln!(
                s,
                "\nper-thread committed: min {min}  median {}  max {max}",
                (pt[(pt.len() - 1) / 2] + pt[pt.len() / 2]) / 2
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::{Options, Protocol, TableId};

    /// A test workload: each transaction increments one of 64 counters.
    /// Every attempt-0 of a transaction whose number is divisible by 3
    /// reports a conflict (so it is retried), every 10th transaction user
    /// aborts, and the first attempt sleeps so latency includes it.
    struct Counter {
        table: std::sync::OnceLock<TableId>,
        types: [&'static str; 2],
        /// Transactions abandoned after a conflict (must stay 0 while the
        /// run is on).
        abandoned: AtomicU64,
    }

    struct CounterThread {
        n: u64,
        attempt: u32,
        key: u8,
    }

    impl Workload for Counter {
        type Thread = CounterThread;
        fn name(&self) -> &'static str {
            "counter"
        }
        fn txn_types(&self) -> &[&'static str] {
            &self.types
        }
        fn rows_to_load(&self) -> u64 {
            64
        }
        fn load(
            &self,
            db: &Database,
            _threads: usize,
            progress: &(dyn Fn(u64) + Sync),
        ) -> Result<u64, Error> {
            let t = db.create_table("counter")?;
            self.table.set(t).unwrap();
            let mut w = db.worker()?;
            w.run(|tx| {
                for k in 0..64u8 {
                    tx.put(t, &[k], &0u64.to_le_bytes())?;
                }
                Ok(())
            })?;
            progress(64);
            Ok(64)
        }
        fn thread_state(&self, thread: usize, _threads: usize, _seed: u64) -> CounterThread {
            CounterThread {
                n: 0,
                attempt: 0,
                key: thread as u8,
            }
        }
        fn next(&self, st: &mut CounterThread) -> usize {
            if st.n.is_multiple_of(3) && st.n > 0 && st.attempt < 2 {
                // The driver drew new inputs instead of retrying.
                self.abandoned.fetch_add(1, Ordering::Relaxed);
            }
            st.n += 1;
            st.attempt = 0;
            st.key = st.key.wrapping_add(7) % 64;
            (st.n % 2) as usize
        }
        fn execute(&self, st: &mut CounterThread, w: &mut Worker) -> TxResult<()> {
            let t = *self.table.get().unwrap();
            st.attempt += 1;
            if st.attempt == 1 {
                std::thread::sleep(Duration::from_micros(100));
                if st.n.is_multiple_of(3) {
                    return Err(TxError::Conflict(ConflictReason::ReadValidation));
                }
            }
            let (key, n) = (st.key, st.n);
            w.try_run(|tx| {
                let v = u64::from_le_bytes(tx.get(t, &[key])?.unwrap().try_into().unwrap());
                tx.put(t, &[key], &(v + 1).to_le_bytes())?;
                if n % 10 == 0 {
                    return tx.user_abort();
                }
                Ok(())
            })
        }
        fn config(&self) -> serde_json::Value {
            serde_json::json!({"counters": 64})
        }
    }

    /// A short, quiet, single-thread run (tests override what they vary).
    fn short_run() -> RunConfig {
        RunConfig {
            threads: 1,
            load_threads: 1,
            seconds: 0.3,
            warmup: 0.0,
            quiet: true,
            seed: 1,
            ..RunConfig::default()
        }
    }

    fn counter() -> Counter {
        Counter {
            table: std::sync::OnceLock::new(),
            types: ["even", "odd"],
            abandoned: AtomicU64::new(0),
        }
    }

    #[test]
    fn report_json_has_the_documented_shape() {
        let db = Database::open(Options::in_memory().protocol(Protocol::Silo).workers(2)).unwrap();
        let wl = counter();
        let cfg = RunConfig {
            threads: 2,
            load_threads: 0,
            warmup: 0.1,
            ..short_run()
        };
        let mut rep = bench(&db, &wl, &cfg).unwrap();
        rep.engine = serde_json::json!({"epoch_ms": 40});
        let text = serde_json::to_string(&rep).unwrap();
        // The types come out in the workload's order.
        assert!(text.find("\"even\"").unwrap() < text.find("\"odd\"").unwrap());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for k in [
            "protocol",
            "workload",
            "threads",
            "seconds",
            "warmup_seconds",
            "committed",
            "aborted",
            "abort_rate",
            "throughput_txn_per_s",
            "latency_us",
            "transactions",
            "per_thread",
            "config",
            "load",
            "engine",
            "seed",
            "backoff",
            "retry",
            "declared",
        ] {
            assert!(v.get(k).is_some(), "missing {k} in {text}");
        }
        assert_eq!(v["protocol"], "silo");
        assert_eq!(v["workload"], "counter");
        assert_eq!(v["threads"], 2);
        assert_eq!(v["warmup_seconds"], 0.1);
        assert!(v["committed"].as_u64().unwrap() > 0);
        assert!(v["throughput_txn_per_s"].as_f64().unwrap() > 0.0);
        for r in ConflictReason::ALL {
            assert!(v["aborted"]["by_reason"][r.name()].is_u64());
        }
        assert!(v["aborted"]["total"].is_u64());
        assert!(v["aborted"]["user"].as_u64().unwrap() > 0);
        for k in ["p50", "p95", "p99", "p999", "max", "mean"] {
            assert!(v["latency_us"][k].is_f64(), "latency_us.{k}");
        }
        for ty in ["even", "odd"] {
            let t = &v["transactions"][ty];
            assert!(t["committed"].as_u64().unwrap() > 0, "{ty}");
            assert!(t["aborted"]["by_reason"].is_object());
            assert!(t["user_aborts"].is_u64());
            assert!(t["throughput_txn_per_s"].is_f64());
            assert!(t["latency_us"]["p99"].is_f64());
        }
        assert_eq!(v["per_thread"].as_array().unwrap().len(), 2);
        assert_eq!(v["config"]["counters"], 64);
        assert_eq!(v["load"]["records"], 64);
        assert!(v["load"]["seconds"].is_f64());
        assert_eq!(v["engine"]["epoch_ms"], 40);
        let sum: u64 = v["per_thread"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(sum, rep.committed);
        // The table mentions every type and the spread.
        let t = rep.table();
        assert!(t.contains("even") && t.contains("odd") && t.contains("per-thread"));
    }

    #[test]
    fn conflicts_are_retried_with_the_same_inputs_and_user_aborts_are_not() {
        let db = Database::open(Options::in_memory().workers(1)).unwrap();
        let wl = counter();
        let cfg = RunConfig {
            backoff: false,
            ..short_run()
        };
        let l = load(&db, &wl, &cfg).unwrap();
        let rep = run(&db, &wl, &cfg, l).unwrap();
        let conflicts = rep.aborted.by_reason["read_validation"];
        assert_eq!(rep.aborted.total, conflicts);
        // Every third transaction conflicts once, then commits or user-aborts.
        let finished = rep.committed + rep.aborted.user;
        assert!(
            conflicts.abs_diff(finished / 3) <= 2,
            "{conflicts} conflicts for {finished} transactions"
        );
        // A tenth of the transactions user-abort.
        assert!(rep.aborted.user.abs_diff(finished / 10) <= 2);
        // Latency includes the first attempt's 100 us sleep.
        assert!(rep.latency_us.p50 >= 100.0, "{:?}", rep.latency_us);
        // Counted per type: both types saw some of each.
        let even = rep.transactions.get("even").unwrap();
        let odd = rep.transactions.get("odd").unwrap();
        assert_eq!(even.committed + odd.committed, rep.committed);
        assert_eq!(even.aborted.total + odd.aborted.total, rep.aborted.total);
        // The driver never drew new inputs for a conflict-aborted one.
        assert_eq!(wl.abandoned.load(Ordering::Relaxed), 0);
        // User aborts are only on n % 10 == 0, i.e. even transactions.
        assert_eq!(odd.user_aborts, 0);
        assert!(even.user_aborts > 0);
    }

    #[test]
    fn without_retry_a_conflict_abort_draws_a_new_transaction() {
        let db = Database::open(Options::in_memory().workers(1)).unwrap();
        let wl = counter();
        let cfg = RunConfig {
            retry: false,
            ..short_run()
        };
        let rep = bench(&db, &wl, &cfg).unwrap();
        assert!(!rep.retry);
        let conflicts = rep.aborted.by_reason["read_validation"];
        let drawn = rep.committed + rep.aborted.user + conflicts;
        // Every third transaction conflicts on its only attempt and is
        // dropped, so a third of those drawn never commit.
        assert!(
            conflicts.abs_diff(drawn / 3) <= 2,
            "{conflicts} conflicts of {drawn} drawn"
        );
        assert!(wl.abandoned.load(Ordering::Relaxed) >= conflicts.saturating_sub(2));
    }

    #[test]
    fn worker_loop_stops_and_publishes_its_counts() {
        // Drive the loop by hand through the same code path the threads use.
        let db = Database::open(Options::in_memory().workers(1)).unwrap();
        let wl = counter();
        wl.load(&db, 1, &|_| {}).unwrap();
        let w = db.worker().unwrap();
        let phase = AtomicU8::new(PHASE_MEASURE);
        let live = Live::default();
        let cfg = RunConfig {
            threads: 1,
            backoff: false,
            ..RunConfig::default()
        };
        // Stop after a short while from another thread.
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                phase.store(PHASE_STOP, Ordering::Relaxed);
            });
            let stats = worker_loop(&wl, &cfg, 0, w, &phase, &live).unwrap();
            let c: u64 = stats.iter().map(|s| s.committed).sum();
            assert!(c > 0);
            // The live total also has the commit (if any) that finished
            // after the stop, which the stats leave out.
            let l = live.commits.load(Ordering::Relaxed);
            assert!(l == c || l == c + 1, "live {l}, counted {c}");
        });
    }

    #[test]
    fn durable_latency_is_measured_with_a_log_and_everything_is_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(
            Options::in_memory()
                .workers(2)
                .durability(Durability::Async)
                .data_dir(dir.path())
                .epoch_interval(Duration::from_millis(5)),
        )
        .unwrap();
        let wl = counter();
        let cfg = RunConfig {
            backoff: false,
            durability: Durability::Sync,
            ..short_run()
        };
        let rep = bench(&db, &wl, &cfg).unwrap();
        assert_eq!(rep.durability, "sync");
        let d = rep.durable_latency_us.clone().expect("durable latency");
        // Acknowledged no earlier than committed.
        assert!(d.p50 >= rep.latency_us.p50, "{d:?} vs {:?}", rep.latency_us);
        assert!(d.max > 0.0);
        // Every commit of the measured period was acknowledged.
        let h = &rep.transactions.get("odd").unwrap();
        assert!(h.durable_latency_us.is_some());
        let log = rep.log.clone().expect("log report");
        assert!(log.bytes > 0 && log.fsyncs > 0, "{log:?}");
        assert!(log.durable_epoch >= 1);
        assert!(db.durable_epoch() >= log.durable_epoch);
        let text = rep.table();
        assert!(text.contains("durable commit latency"), "{text}");
        assert!(text.contains("durability sync:"), "{text}");
    }

    #[test]
    fn acknowledge_pops_only_durable_entries_in_order() {
        let mut stats: Vec<TypeStats> = (0..2).map(|_| TypeStats::new()).collect();
        let t0 = Instant::now();
        let mut q: VecDeque<(u64, Instant, usize)> =
            [(3, t0, 0), (3, t0, 1), (5, t0, 0)].into_iter().collect();
        acknowledge(&mut q, &mut stats, 2, t0 + Duration::from_millis(1));
        assert_eq!(q.len(), 3);
        acknowledge(&mut q, &mut stats, 4, t0 + Duration::from_millis(50));
        assert_eq!(q.len(), 1);
        assert_eq!(stats[0].durable.len(), 1);
        assert_eq!(stats[1].durable.len(), 1);
        // 50 ms, beyond the histogram's initial range: recorded, not clamped.
        let v = stats[0].durable.max();
        assert!((49_000_000..51_000_000).contains(&v), "{v}");
        acknowledge(&mut q, &mut stats, u64::MAX, t0 + Duration::from_millis(60));
        assert!(q.is_empty());
        assert_eq!(stats[0].durable.len(), 2);
    }

    #[test]
    fn bad_run_config_is_rejected() {
        let mut c = RunConfig {
            threads: 0,
            ..RunConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("threads"));
        c.threads = 1;
        c.seconds = 0.0;
        assert!(c.validate().unwrap_err().to_string().contains("seconds"));
        c.seconds = 1.0;
        c.warmup = -1.0;
        assert!(c.validate().unwrap_err().to_string().contains("warmup"));
    }
}

//! The benchmark driver every workload shares: worker threads, warm-up, the
//! measured period, retries of conflict-aborted transactions with the same
//! inputs, per-type counters and latency histograms, live progress, and the
//! report (human table or one JSON object).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use serde::Serialize;
use tessera::{ConflictReason, Database, Error, TxError, TxResult, Worker};

/// A benchmark workload: data loading plus a transaction generator. The
/// driver calls [`Workload::next`] once per transaction to draw its inputs,
/// then [`Workload::execute`] until it commits (conflict aborts are retried
/// with the same inputs) or user-aborts.
pub trait Workload: Sync {
    /// Per-thread state: RNG and the current transaction's inputs.
    type Thread: Send;
    /// Short name (`ycsb`, `tpcc`).
    fn name(&self) -> &'static str;
    /// Names of the transaction types, indexed by what `next` returns.
    fn txn_types(&self) -> &'static [&'static str];
    /// Create the tables and load the initial data with `threads` threads;
    /// `progress(n)` reports `n` more rows loaded. Returns rows loaded.
    fn load(
        &self,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error>;
    /// Total rows `load` will insert (for the progress bar).
    fn rows_to_load(&self) -> u64;
    /// Fresh state for driver thread `thread`.
    fn thread_state(&self, thread: usize, seed: u64) -> Self::Thread;
    /// Draw the next transaction's inputs; returns its type index.
    fn next(&self, st: &mut Self::Thread) -> usize;
    /// Execute the current transaction once.
    fn execute(&self, st: &mut Self::Thread, w: &mut Worker) -> TxResult<()>;
    /// The workload's knobs, for the report.
    fn config(&self) -> serde_json::Value;
}

/// How to run a benchmark.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Driver threads (each with its own worker).
    pub threads: usize,
    /// Measured seconds.
    pub seconds: f64,
    /// Warm-up seconds (results discarded).
    pub warmup: f64,
    /// No progress output.
    pub quiet: bool,
    /// Base RNG seed.
    pub seed: u64,
}

const N_REASONS: usize = ConflictReason::ALL.len();

/// Counters of one transaction type on one thread.
struct TypeStats {
    committed: u64,
    aborts: [u64; N_REASONS],
    user_aborts: u64,
    hist: Histogram<u64>,
}

impl TypeStats {
    fn new() -> Self {
        TypeStats {
            committed: 0,
            aborts: [0; N_REASONS],
            user_aborts: 0,
            hist: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds"),
        }
    }
    fn merge(&mut self, o: &TypeStats) {
        self.committed += o.committed;
        for i in 0..N_REASONS {
            self.aborts[i] += o.aborts[i];
        }
        self.user_aborts += o.user_aborts;
        self.hist.add(&o.hist).expect("same bounds");
    }
}

/// Live counters one thread publishes for the progress display (single
/// writer, relaxed; on the thread's own cache line).
#[derive(Default)]
struct Live {
    commits: AtomicU64,
    aborts: AtomicU64,
}

const PHASE_WARMUP: u8 = 0;
const PHASE_MEASURE: u8 = 1;

/// Latency percentiles in microseconds.
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

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        let us = |ns: u64| (ns as f64 / 1000.0 * 100.0).round() / 100.0;
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
        Latency {
            p50: us(h.value_at_quantile(0.50)),
            p95: us(h.value_at_quantile(0.95)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: (h.mean() / 1000.0 * 100.0).round() / 100.0,
        }
    }
}

/// Aborts of a type or of the whole run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Aborts {
    /// Conflict aborts.
    pub total: u64,
    /// Conflict aborts by reason.
    pub by_reason: BTreeMap<String, u64>,
    /// User aborts (the workload's own rollbacks; not retried).
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
    /// Aborts.
    pub aborted: Aborts,
    /// User aborts (also in `aborted.user`).
    pub user_aborts: u64,
    /// Committed per second.
    pub throughput_txn_per_s: f64,
    /// Latency from first attempt to commit.
    pub latency_us: Latency,
}

/// Loading statistics.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LoadReport {
    /// Wall time.
    pub seconds: f64,
    /// Rows inserted.
    pub records: u64,
}

/// The full report; `--json` prints it as one object.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// Protocol name.
    pub protocol: String,
    /// Workload name.
    pub workload: String,
    /// Driver threads.
    pub threads: usize,
    /// Measured seconds (actual).
    pub seconds: f64,
    /// Warm-up seconds.
    pub warmup_seconds: f64,
    /// Committed transactions in the measured period.
    pub committed: u64,
    /// Aborts in the measured period.
    pub aborted: Aborts,
    /// Conflict aborts / (commits + conflict aborts).
    pub abort_rate: f64,
    /// Committed transactions per second.
    pub throughput_txn_per_s: f64,
    /// Latency over all types.
    pub latency_us: Latency,
    /// Per transaction type.
    pub transactions: BTreeMap<String, TypeReport>,
    /// Committed per thread.
    pub per_thread: Vec<u64>,
    /// Workload knobs.
    pub config: serde_json::Value,
    /// Loading.
    pub load: LoadReport,
}

/// Load the workload into `db`, with a progress bar unless quiet.
pub fn load<W: Workload>(db: &Database, wl: &W, cfg: &RunConfig) -> Result<LoadReport, Error> {
    let total = wl.rows_to_load();
    let bar = if cfg.quiet || !std::io::stderr().is_terminal() {
        indicatif::ProgressBar::hidden()
    } else {
        let b = indicatif::ProgressBar::new(total);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "loading {msg} [{bar:40}] {pos}/{len} rows ({per_sec}, eta {eta})",
            )
            .expect("template")
            .progress_chars("=> "),
        );
        b.set_message(wl.name().to_string());
        b
    };
    let t0 = Instant::now();
    let rows = wl.load(db, cfg.threads.max(1), &|n| bar.inc(n))?;
    bar.finish_and_clear();
    let seconds = t0.elapsed().as_secs_f64();
    if !cfg.quiet {
        eprintln!(
            "loaded {rows} rows in {seconds:.1} s ({:.0} rows/s)",
            rows as f64 / seconds.max(1e-9)
        );
    }
    Ok(LoadReport {
        seconds,
        records: rows,
    })
}

/// Run the measured benchmark on a loaded database.
pub fn run<W: Workload>(
    db: &Database,
    wl: &W,
    cfg: &RunConfig,
    load: LoadReport,
) -> Result<Report, Error> {
    let threads = cfg.threads;
    let ntypes = wl.txn_types().len();
    let phase = AtomicU8::new(PHASE_WARMUP);
    let stop = AtomicBool::new(false);
    let live: Vec<CachePadded<Live>> = (0..threads)
        .map(|_| CachePadded::new(Live::default()))
        .collect();
    let mut workers = Vec::with_capacity(threads);
    for _ in 0..threads {
        workers.push(db.worker()?);
    }
    let mut measured = 0.0;
    let results: Vec<Result<Vec<TypeStats>, Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(i, mut w)| {
                let (phase, stop, live) = (&phase, &stop, &*live[i]);
                s.spawn(move || {
                    let mut st = wl.thread_state(i, cfg.seed.wrapping_add(i as u64 * 0x9E37_79B9));
                    let mut stats: Vec<TypeStats> = (0..ntypes).map(|_| TypeStats::new()).collect();
                    let (mut commits, mut aborts) = (0u64, 0u64);
                    while !stop.load(Ordering::Relaxed) {
                        let ty = wl.next(&mut st);
                        let start = Instant::now();
                        let measuring = phase.load(Ordering::Relaxed) == PHASE_MEASURE;
                        loop {
                            match wl.execute(&mut st, &mut w) {
                                Ok(()) => {
                                    commits += 1;
                                    if measuring {
                                        let s = &mut stats[ty];
                                        s.committed += 1;
                                        let ns = start.elapsed().as_nanos() as u64;
                                        s.hist.saturating_record(ns.max(1));
                                    }
                                    break;
                                }
                                Err(TxError::Conflict(r)) => {
                                    aborts += 1;
                                    if measuring {
                                        stats[ty].aborts[r.index()] += 1;
                                    }
                                    if stop.load(Ordering::Relaxed) {
                                        break;
                                    }
                                }
                                Err(TxError::UserAbort) => {
                                    if measuring {
                                        stats[ty].user_aborts += 1;
                                    }
                                    break;
                                }
                                Err(TxError::Error(e)) => {
                                    stop.store(true, Ordering::Relaxed);
                                    return Err(e);
                                }
                            }
                        }
                        live.commits.store(commits, Ordering::Relaxed);
                        live.aborts.store(aborts, Ordering::Relaxed);
                    }
                    Ok(stats)
                })
            })
            .collect();

        // Progress and phase control on this thread.
        let tty = std::io::stderr().is_terminal();
        let warm_end = Instant::now() + Duration::from_secs_f64(cfg.warmup);
        let mut measure_start = None;
        let mut last = (Instant::now(), 0u64, 0u64);
        loop {
            let now = Instant::now();
            if measure_start.is_none() && now >= warm_end {
                phase.store(PHASE_MEASURE, Ordering::Relaxed);
                measure_start = Some(now);
            }
            if let Some(ms) = measure_start {
                if now.duration_since(ms).as_secs_f64() >= cfg.seconds
                    || stop.load(Ordering::Relaxed)
                {
                    measured = now.duration_since(ms).as_secs_f64();
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            let now = Instant::now();
            if !cfg.quiet && now.duration_since(last.0) >= Duration::from_secs(1) {
                let c: u64 = live.iter().map(|l| l.commits.load(Ordering::Relaxed)).sum();
                let a: u64 = live.iter().map(|l| l.aborts.load(Ordering::Relaxed)).sum();
                let dt = now.duration_since(last.0).as_secs_f64();
                let (dc, da) = (c - last.1, a - last.2);
                let label = if measure_start.is_some() {
                    "run"
                } else {
                    "warmup"
                };
                let elapsed = match measure_start {
                    Some(ms) => now.duration_since(ms).as_secs_f64(),
                    None => cfg.warmup - warm_end.saturating_duration_since(now).as_secs_f64(),
                };
                let line = format!(
                    "{label} {elapsed:5.1}s  {:>12.0} txn/s  abort rate {:5.2}%",
                    dc as f64 / dt,
                    100.0 * da as f64 / ((dc + da) as f64).max(1.0)
                );
                let mut err = std::io::stderr().lock();
                if tty {
                    let _ = write!(err, "\r{line}   ");
                } else {
                    let _ = writeln!(err, "{line}");
                }
                let _ = err.flush();
                last = (now, c, a);
            }
        }
        if !cfg.quiet && tty {
            eprintln!();
        }
        handles
            .into_iter()
            .map(|h| h.join().expect("driver thread panicked"))
            .collect()
    });

    let mut per_thread_stats = Vec::new();
    for r in results {
        per_thread_stats.push(r?);
    }
    let mut by_type: Vec<TypeStats> = (0..ntypes).map(|_| TypeStats::new()).collect();
    let mut total = TypeStats::new();
    let mut per_thread = Vec::new();
    for ts in &per_thread_stats {
        per_thread.push(ts.iter().map(|s| s.committed).sum());
        for (i, s) in ts.iter().enumerate() {
            by_type[i].merge(s);
            total.merge(s);
        }
    }
    let secs = measured.max(1e-9);
    let transactions = wl
        .txn_types()
        .iter()
        .zip(&by_type)
        .map(|(name, s)| {
            (
                name.to_string(),
                TypeReport {
                    committed: s.committed,
                    aborted: Aborts::of(s),
                    user_aborts: s.user_aborts,
                    throughput_txn_per_s: s.committed as f64 / secs,
                    latency_us: Latency::of(&s.hist),
                },
            )
        })
        .collect();
    let aborted = Aborts::of(&total);
    Ok(Report {
        protocol: db.protocol().name().to_string(),
        workload: wl.name().to_string(),
        threads,
        seconds: (measured * 1000.0).round() / 1000.0,
        warmup_seconds: cfg.warmup,
        committed: total.committed,
        abort_rate: aborted.total as f64 / ((total.committed + aborted.total) as f64).max(1.0),
        aborted,
        throughput_txn_per_s: total.committed as f64 / secs,
        latency_us: Latency::of(&total.hist),
        transactions,
        per_thread,
        config: wl.config(),
        load,
    })
}

impl Report {
    /// The human-readable results table.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} on {}: {} thread(s), {:.1} s measured after {:.1} s warm-up",
            self.workload, self.protocol, self.threads, self.seconds, self.warmup_seconds
        );
        let _ = writeln!(
            s,
            "committed {:>12}   throughput {:>12.0} txn/s   conflict aborts {} ({:.2}%)   user aborts {}",
            self.committed,
            self.throughput_txn_per_s,
            self.aborted.total,
            100.0 * self.abort_rate,
            self.aborted.user
        );
        let reasons: Vec<String> = self
            .aborted
            .by_reason
            .iter()
            .filter(|(_, &n)| n > 0)
            .map(|(r, n)| format!("{r} {n}"))
            .collect();
        if !reasons.is_empty() {
            let _ = writeln!(s, "aborts by reason: {}", reasons.join(", "));
        }
        let _ = writeln!(
            s,
            "\n{:<14} {:>12} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "type",
            "committed",
            "txn/s",
            "aborts",
            "user",
            "p50 us",
            "p95 us",
            "p99 us",
            "p99.9 us"
        );
        let mut row = |name: &str, c: u64, tps: f64, a: u64, u: u64, l: &Latency| {
            let _ = writeln!(
                s,
                "{name:<14} {c:>12} {tps:>12.0} {a:>9} {u:>9} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                l.p50, l.p95, l.p99, l.p999
            );
        };
        for (name, t) in &self.transactions {
            row(
                name,
                t.committed,
                t.throughput_txn_per_s,
                t.aborted.total,
                t.user_aborts,
                &t.latency_us,
            );
        }
        row(
            "all",
            self.committed,
            self.throughput_txn_per_s,
            self.aborted.total,
            self.aborted.user,
            &self.latency_us,
        );
        let mut pt = self.per_thread.clone();
        pt.sort_unstable();
        if let (Some(min), Some(max)) = (pt.first(), pt.last()) {
            let _ = writeln!(
                s,
                "\nper-thread committed: min {min}  median {}  max {max}",
                pt[pt.len() / 2]
            );
        }
        s
    }
}

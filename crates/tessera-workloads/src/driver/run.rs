//! Loading and running: [`load`], [`bench`](fn@bench) and [`run`], the measuring
//! driver threads ([`worker_loop`]), the phases and the live counters
//! behind the progress line.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use hdrhistogram::Histogram;
use tessera::{ConflictReason, Database, Error, LogStats, TxError, Worker};

use super::report::{
    round2, Aborts, Latency, LoadReport, LogReport, Report, TypeReport, TypeReports,
};
use super::{DriverError, RunConfig, Workload};

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
pub(super) struct TypeStats {
    committed: u64,
    pub(super) aborts: [u64; N_REASONS],
    pub(super) user_aborts: u64,
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
    /// The thread committed its `RunConfig::txns` and stopped.
    done: AtomicBool,
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

/// Resident set size of this process in bytes (Linux `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
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
        resident_growth_after_run_bytes: None,
        resident_before: rss0,
    })
}

/// Load, then run: [`load`] followed by [`run`].
pub fn bench<W: Workload>(db: &Database, wl: &W, cfg: &RunConfig) -> Result<Report, DriverError> {
    cfg.validate()?;
    let l = load(db, wl, cfg)?;
    run(db, wl, cfg, l)
}

/// Driver thread `i`'s seed from the run's `--seed` (every driver, the
/// deterministic engines' clients included, draws the same streams).
pub fn thread_seed(seed: u64, i: usize) -> u64 {
    mix_seed(seed ^ ((i as u64) << 32))
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
// Never inlined: `scripts/callgrind-ipt.sh` counts the instructions spent
// under this function (the measured work of one driver thread).
#[inline(never)]
fn worker_loop<W: Workload>(
    wl: &W,
    cfg: &RunConfig,
    i: usize,
    mut w: Worker,
    phase: &AtomicU8,
    live: &Live,
) -> Result<Vec<TypeStats>, DriverError> {
    let types = wl.txn_types();
    let mut st = wl.thread_state(i, cfg.threads, thread_seed(cfg.seed, i));
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
    let quota = cfg.txns.unwrap_or(u64::MAX);
    let mut measured = 0u64;
    while phase.load(Ordering::Relaxed) != PHASE_STOP && measured < quota {
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
                        measured += 1;
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
                Err(TxError::Error(Error::UserAbort)) => {
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
    live.done.store(true, Ordering::Release);
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
        let period = Duration::from_secs_f64(cfg.seconds);
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
            // With a transaction quota the threads stop by themselves; the
            // period ends when the last one has.
            let end = measure_start.map(|ms| ms + period);
            let all_done =
                cfg.txns.is_some() && live.iter().all(|l| l.done.load(Ordering::Acquire));
            if let (Some(ms), Some(end)) = (measure_start, end) {
                if (cfg.txns.is_none() && now >= end) || all_done {
                    phase.store(PHASE_STOP, Ordering::Relaxed);
                    measured = now.duration_since(ms).as_secs_f64();
                    break;
                }
            }
            let deadline = if cfg.txns.is_some() {
                // Look at the threads often: the end is theirs to say. The
                // period's nominal end is no deadline here (a quota may
                // outlast it, and sleeping until a past instant would spin
                // this thread on a core the workers need).
                next_tick.min(Instant::now() + Duration::from_millis(1))
            } else {
                next_tick.min(end.unwrap_or(warm_end))
            };
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
    let mut load = load;
    load.resident_growth_after_run_bytes = load
        .resident_before
        .zip(resident_bytes())
        .map(|(a, b)| b.saturating_sub(a));
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

#[cfg(test)]
mod tests {
    use super::*;
    use tessera::{Durability, Options};

    use super::super::test_workload::{counter, short_run};

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
    fn a_transaction_quota_ends_the_run_after_exactly_that_many_commits() {
        let db = Database::open(Options::in_memory().workers(2)).unwrap();
        let wl = counter();
        let cfg = RunConfig {
            threads: 2,
            // Far longer than the test may take: the quota must end it.
            seconds: 3600.0,
            txns: Some(250),
            ..short_run()
        };
        let t0 = Instant::now();
        let rep = bench(&db, &wl, &cfg).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(60));
        assert_eq!(rep.committed, 500);
        assert_eq!(rep.per_thread, vec![250, 250]);
        let bad = RunConfig {
            txns: Some(0),
            ..short_run()
        };
        assert!(bad.validate().is_err());
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
}

//! `tessera bench ycsb|smallbank --cc bohm|2pl-ordered`: the deterministic
//! protocols, driven open loop. Client threads (`--threads`) draw the
//! workload's transactions, submit them as procedures and keep a window of
//! receipts in flight (two batches' worth across the clients), as the
//! thesis's harness feeds BOHM a stream of pre-generated transactions; a
//! transaction counts once its batch is released. The engine is a
//! `Database` opened with the deterministic protocol (`Database::submit`);
//! the data is loaded through an in-memory database under the default
//! protocol (the workload's own loader, which reconnaissance reads too)
//! and copied into the engine's tables at timestamp 0 (`Database::load`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use tessera::det::{Outcome, Procedure, SequencerConfig};
use tessera::{Database, Options, Protocol, Request, ScanOptions, TableId};
use tessera_workloads::cart::{Cart, CartProc};
use tessera_workloads::driver::Workload;
use tessera_workloads::smallbank::{SbProc, SmallBank};
use tessera_workloads::tpcc::det::{pwv_partition_prefixes, TpccProc};
use tessera_workloads::tpcc::Tpcc;
use tessera_workloads::ycsb::{Ycsb, YcsbProc};

use crate::bench::Common;
use crate::failure::Failure;

/// The open-loop client's shortest sleep. Requests that fall due within
/// one tick are submitted together when it wakes; a tick is far below
/// the sequencer's batch time, so no batch sees a different arrival
/// pattern than an evenly spaced one would give it.
const OPEN_LOOP_TICK: Duration = Duration::from_micros(100);

/// The CPU time the calling thread has used.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID
    // is supported on every Linux this builds for, and on failure `ts`
    // stays zero.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A workload the deterministic engines run: its transactions as loggable
/// procedures, and what a committed one adds to the run's tally (SmallBank:
/// the money it moved in, for the conservation check).
pub trait DetWorkload: Workload
where
    <Self::Proc as Request>::Output: Send + 'static,
{
    /// The procedure of one drawn transaction.
    type Proc: Procedure;
    /// The current transaction of `st` (drawn by `Workload::next`).
    fn proc(&self, st: &Self::Thread) -> Self::Proc;
    /// A committed outcome's contribution to the tally.
    fn tally(_out: &<Self::Proc as Request>::Output) -> i64 {
        0
    }
    /// Before submission: a reconnaissance the request needs (its result
    /// becomes part of its logged arguments), run on `recon`, a worker of
    /// the loading database.
    fn prepare(
        &self,
        _p: &mut Self::Proc,
        _recon: &mut tessera::Worker,
    ) -> Result<(), tessera::Error> {
        Ok(())
    }
    /// Submitting clients when `--clients` is not given.
    fn default_clients(&self) -> usize {
        1
    }
    /// Before the engine starts: settings of the engine the workload
    /// chooses (PWV's partition prefixes).
    fn configure(&self, _engine: &Database, _protocol: Protocol) -> Result<(), tessera::Error> {
        Ok(())
    }
}

impl DetWorkload for Ycsb {
    type Proc = YcsbProc;
    fn proc(&self, st: &Self::Thread) -> YcsbProc {
        self.procedure(st)
    }
}

impl DetWorkload for Tpcc {
    type Proc = TpccProc;
    fn proc(&self, st: &Self::Thread) -> TpccProc {
        let t = self.tables().expect("TPC-C submitted before it was loaded");
        TpccProc::new(t, st.txn())
            .expect("the deterministic TPC-C mix is NewOrder and Payment")
            .coarse_stock(self.config_ref().coarse_stock)
    }
    /// PWV: the (warehouse, district) partitioning of the thesis's §6.5.3.
    fn configure(&self, engine: &Database, protocol: Protocol) -> Result<(), tessera::Error> {
        if protocol != Protocol::Pwv {
            return Ok(());
        }
        let t = self
            .tables()
            .expect("TPC-C configured before it was loaded");
        for (id, len) in pwv_partition_prefixes(&t, self.config_ref().coarse_stock) {
            engine.partition_prefix(id, len)?;
        }
        Ok(())
    }
    fn prepare(&self, p: &mut TpccProc, recon: &mut tessera::Worker) -> Result<(), tessera::Error> {
        if p.needs_reconnaissance() {
            recon.run(|tx| p.reconnoiter(tx))?;
        }
        Ok(())
    }
    /// One client per warehouse: a TPC-C terminal's home warehouse is its
    /// thread's.
    fn default_clients(&self) -> usize {
        self.config_ref().warehouses as usize
    }
}

impl DetWorkload for Cart {
    type Proc = CartProc;
    fn proc(&self, st: &Self::Thread) -> CartProc {
        self.procedure(st)
    }
    /// Units of stock a purchase took, for the stock check.
    fn tally(out: &i64) -> i64 {
        *out
    }
}

impl DetWorkload for SmallBank {
    type Proc = SbProc;
    fn proc(&self, st: &Self::Thread) -> SbProc {
        self.procedure(st)
    }
    fn tally(out: &i64) -> i64 {
        *out
    }
}

/// The long names of [`DetArgs`]' flags: knobs of the deterministic
/// protocols alone, which the interactive ones refuse (a sweep that varies
/// one runs its interactive lines without it: flat references).
pub const DET_KNOBS: &[&str] = &[
    "cc-threads",
    "exec-threads",
    "clients",
    "batch-size",
    "batch-us",
    "read-annotation",
    "chain-bound",
    "lazy-backlog",
    "offered-rate",
    "burst",
    "max-queue",
];

/// Options of the deterministic protocols (`--cc bohm|2pl-ordered`).
#[derive(Args, Debug, Clone, Copy)]
pub struct DetArgs {
    /// BOHM's concurrency-control threads, each owning a hash partition of
    /// the keys; lazy: with more than one, stickification is partitioned
    /// (they put the stickies in and keep the last-writer table, one more
    /// thread runs the now-phases) [default: 1].
    #[arg(long = "cc-threads", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub cc_threads: Option<usize>,
    /// Execution threads [default: --threads, so that one `tessera sweep
    /// --vary threads=...` compares them with the interactive protocols'
    /// worker threads].
    #[arg(long = "exec-threads", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub exec_threads: Option<usize>,
    /// Client threads that draw and submit the requests (open loop) [default: 1].
    #[arg(long = "clients", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub clients: Option<usize>,
    /// Requests per batch (the thesis's authors ran 10,000) [default: 10000].
    #[arg(long = "batch-size", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 24))]
    pub batch_size: Option<usize>,
    /// A batch is cut this many microseconds after its first request, full
    /// or not [default: 2000].
    #[arg(long = "batch-us", value_name = "US",
          value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=10_000_000))]
    pub batch_us: Option<u64>,
    /// BOHM's read-set annotation: the CC stage names each declared read's
    /// version (on), or reads look their keys up and walk the chain
    /// (off: less work for the CC stage, more for the executors) [default: on].
    #[arg(long = "read-annotation", value_name = "on|off",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub read_annotation: Option<bool>,
    /// Lazy: the bound on a key's chain of unsubstantiated transactions;
    /// past it the transaction is handed to a substantiation worker (1:
    /// substantiate every transaction at once, the thesis's lazy-1)
    /// [default: 100].
    #[arg(long = "chain-bound", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<u32>::new().range(1..=u32::MAX as u64))]
    pub chain_bound: Option<u32>,
    /// Lazy: stickified batches that may wait for substantiation before
    /// the stickification thread waits (a burst shorter than this is
    /// accepted whole; each waiting batch holds the versions its
    /// substantiated transactions wrote, as GC frees nothing above the
    /// oldest incomplete batch) [default: 4].
    #[arg(long = "lazy-backlog", value_name = "BATCHES",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 20))]
    pub lazy_backlog: Option<usize>,
    /// Open loop at a fixed offered rate (transactions per second, all
    /// clients together) instead of as fast as the engine acknowledges: a
    /// request finds its client's queue of unacknowledged requests full
    /// (--max-queue) is dropped, and counted. The report gains a timeline
    /// (every 100 ms: offered, accepted, dropped, acknowledged, under lazy
    /// the transactions waiting for their later phase, and the requests
    /// queued: submitted, not yet acknowledged) [default: closed window, no
    /// drops].
    #[arg(long = "offered-rate", value_name = "TXN_PER_S", value_parser = parse_rate)]
    pub offered_rate: Option<f64>,
    /// With --offered-rate: from FROM to TO seconds into the measured run
    /// the offered rate is RATE (the burst test: 100,000 stepping up to
    /// 660,000 and back in the thesis).
    #[arg(long = "burst", value_name = "FROM:TO:RATE", value_parser = parse_burst)]
    pub burst: Option<(f64, f64, f64)>,
    /// With --offered-rate: unacknowledged requests a client may have
    /// before it drops new ones [default: two batches over the clients].
    #[arg(long = "max-queue", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 26))]
    pub max_queue: Option<usize>,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e9 => Ok(v),
        _ => Err("must be a positive number of transactions per second".into()),
    }
}

fn parse_burst(s: &str) -> Result<(f64, f64, f64), String> {
    let p: Vec<&str> = s.split(':').collect();
    let bad = || "must be FROM:TO:RATE (seconds, seconds, transactions per second)".to_string();
    if p.len() != 3 {
        return Err(bad());
    }
    let f = |x: &str| x.parse::<f64>().map_err(|_| bad());
    let (from, to, rate) = (f(p[0])?, f(p[1])?, parse_rate(p[2])?);
    if !(from >= 0.0 && to > from && to.is_finite()) {
        return Err("FROM must be at least 0 and TO after it".into());
    }
    Ok((from, to, rate))
}

/// The offered load at `t` seconds into the measured run (before it: the
/// base rate).
fn offered_at(base: f64, burst: Option<(f64, f64, f64)>, t: f64) -> f64 {
    match burst {
        Some((from, to, r)) if t >= from && t < to => r,
        _ => base,
    }
}

impl DetArgs {
    fn given(&self) -> bool {
        self.cc_threads.is_some()
            || self.exec_threads.is_some()
            || self.clients.is_some()
            || self.batch_size.is_some()
            || self.batch_us.is_some()
            || self.read_annotation.is_some()
            || self.chain_bound.is_some()
            || self.lazy_backlog.is_some()
            || self.offered_rate.is_some()
            || self.burst.is_some()
            || self.max_queue.is_some()
    }

    /// A usage error if a deterministic knob is given with an interactive
    /// protocol.
    pub fn refuse_unless_det(&self) -> Result<(), Failure> {
        if self.given() {
            return Err(Failure::usage(
                "--cc-threads, --exec-threads, --clients, --batch-size, --batch-us, \
                 --read-annotation, --chain-bound, --lazy-backlog, --offered-rate, --burst \
                 and --max-queue apply to the \
                 deterministic protocols only (bohm, 2pl-ordered, pwv, lazy)",
            ));
        }
        Ok(())
    }

    /// The stages' sizes and batch cutting, with `--threads` as the
    /// execution threads unless `--exec-threads` says otherwise.
    fn stages(&self, threads: usize) -> Stages {
        let d = SequencerConfig::default();
        Stages {
            cc_threads: self.cc_threads.unwrap_or(1),
            exec_threads: self.exec_threads.unwrap_or(threads),
            sequencer: SequencerConfig {
                batch_size: self.batch_size.unwrap_or(d.batch_size),
                batch_time: self.batch_us.map_or(d.batch_time, Duration::from_micros),
            },
            read_annotation: self.read_annotation.unwrap_or(true),
            chain_bound: self.chain_bound.unwrap_or(100),
            lazy_backlog: self.lazy_backlog.unwrap_or(4),
        }
    }
}

/// How a run sizes the engine (what `Options` is given, and reported).
#[derive(Clone, Copy, Debug)]
struct Stages {
    cc_threads: usize,
    exec_threads: usize,
    sequencer: SequencerConfig,
    read_annotation: bool,
    chain_bound: u32,
    lazy_backlog: usize,
}

impl Stages {
    fn apply(&self, o: Options) -> Options {
        o.cc_threads(self.cc_threads)
            .exec_threads(self.exec_threads)
            .batch_size(self.sequencer.batch_size)
            .batch_time(self.sequencer.batch_time)
            .read_annotation(self.read_annotation)
            .chain_bound(self.chain_bound)
            .lazy_backlog(self.lazy_backlog)
    }
}

/// What a run leaves for the workload's consistency check: the engine,
/// every request settled (`Database::dump` reads the final state), and
/// the tally of committed outputs.
pub struct DetRun<'a> {
    /// The engine.
    pub engine: &'a Database,
    /// The sum of [`DetWorkload::tally`] over committed outcomes (the
    /// measured ones and the rest).
    pub tally: i64,
}

/// Load, run open loop, report (one JSON object, or a few lines).
pub fn run<W: DetWorkload>(wl: &W, protocol: Protocol, c: &Common) -> Result<String, Failure> {
    run_checked(wl, protocol, c, |_| Ok(None))
}

/// [`run`], then `check` the stopped engine: its JSON goes into the report
/// (`consistency`), and an error fails the run.
pub fn run_checked<W: DetWorkload>(
    wl: &W,
    protocol: Protocol,
    c: &Common,
    check: impl FnOnce(&DetRun<'_>) -> Result<Option<(Value, String)>, Failure>,
) -> Result<String, Failure> {
    let name = protocol.name();
    if c.txns.is_some() {
        return Err(Failure::usage(format!(
            "--txns is not supported with --cc {name} yet: use --seconds"
        )));
    }
    c.durability.check().map_err(Failure::usage)?;
    if c.durability.durability == tessera::Durability::Async {
        return Err(Failure::usage(format!(
            "--cc {name} releases a batch's outcomes only once its input is durable: use \
             --durability sync (or none)"
        )));
    }
    // The input log: a fresh directory (the benchmark loads fresh data).
    let input_dir = c.durability.data_dir.clone();
    if let Some(dir) = &input_dir {
        let used = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        if used {
            return Err(Failure::usage(format!(
                "--data-dir {} is not empty; --cc {name} writes its input log to a new or empty directory",
                dir.display()
            )));
        }
    }
    if c.declared {
        return Err(Failure::usage(format!(
            "--declared is implied by --cc {name}: every request declares its sets"
        )));
    }
    let cfg = c.det.stages(c.threads);
    let clients = c.det.clients.unwrap_or_else(|| wl.default_clients());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let prefault_secs = crate::bench::prefault(c)?;
    // The workload's loader writes through a database; its rows are copied
    // into the engine's tables (same names, same ids) at timestamp 0.
    let t0 = Instant::now();
    // Every client keeps a worker of it for its reconnaissance (TPC-C's
    // default is a client per warehouse), beside the loader's.
    let db = Database::open(Options::in_memory().workers(cores.max(2).max(clients + 1)))
        .map_err(|e| Failure::from_error("cannot open the loading database: ", &e))?;
    wl.load(&db, cores, &|_| {})
        .map_err(|e| Failure::from_error(&format!("cannot load {}: ", wl.name()), &e))?;
    let names = db.table_names();
    let mut opts = Options::in_memory();
    if let Some(dir) = &input_dir {
        let procs = tessera::det::Procedures::new()
            .register::<W::Proc>()
            .map_err(|e| Failure::from_error("", &e))?;
        opts = Options::durable(dir).procedures(procs);
    }
    let opts = cfg.apply(opts.protocol(protocol));
    let engine = Database::open(opts).map_err(|e| Failure::from_error(&format!("{name}: "), &e))?;
    {
        let mut w = db.worker().map_err(|e| Failure::from_error("", &e))?;
        for n in &names {
            let t = db.table(n).map_err(|e| Failure::from_error("", &e))?;
            if engine.create_table(n).ok() != Some(t) {
                return Err(Failure::run(format!(
                    "table {n}: the engine's id differs from the loader's"
                )));
            }
            copy_table(&mut w, &engine, t)?;
        }
        drop(w);
    }
    wl.configure(&engine, protocol)
        .map_err(|e| Failure::from_error(&format!("{name}: "), &e))?;
    let load_secs = t0.elapsed().as_secs_f64();
    if !c.quiet {
        eprintln!(
            "loaded in {load_secs:.2} s; {name}: {} CC thread(s), {} execution thread(s), batches of {} or {} us",
            cfg.cc_threads,
            cfg.exec_threads,
            cfg.sequencer.batch_size,
            cfg.sequencer.batch_time.as_micros()
        );
    }
    engine
        .start()
        .map_err(|e| Failure::from_error(&format!("cannot start {name}: "), &e))?;
    let measuring = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let committed = AtomicU64::new(0);
    let aborted = AtomicU64::new(0);
    let tally = std::sync::atomic::AtomicI64::new(0);
    let window = (2 * cfg.sequencer.batch_size / clients).max(1);
    // Open loop at an offered rate (`--offered-rate`): requests offered,
    // accepted (submitted) and dropped (their client's queue was full)
    // while measuring.
    let max_queue = c.det.max_queue.unwrap_or(window);
    let offered = AtomicU64::new(0);
    let accepted = AtomicU64::new(0);
    let dropped = AtomicU64::new(0);
    // The open-loop clients' CPU time and wall time in their loops, in
    // nanoseconds, summed over the clients.
    let client_cpu_ns = AtomicU64::new(0);
    let client_wall_ns = AtomicU64::new(0);
    // Requests submitted and not yet acknowledged, all clients together.
    let queued = AtomicI64::new(0);
    // Per transaction type, every client's latencies (merged at its end).
    let latencies: std::sync::Mutex<Vec<hdrhistogram::Histogram<u64>>> = std::sync::Mutex::new(
        (0..wl.txn_types().len())
            .map(|_| hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("bounds"))
            .collect(),
    );
    let t0 = Instant::now();
    let mut timeline: Vec<[f64; 7]> = Vec::new();
    let failure: std::sync::Mutex<Option<tessera::Error>> = std::sync::Mutex::new(None);
    // Background checkpoints (a snapshot at a batch boundary under BOHM, a
    // paused feed under 2pl-ordered): counted, and the last one reported.
    let ckpts = std::sync::Mutex::new((0u64, None::<tessera::CheckpointInfo>));
    let (run_start, run_end, pending_before, pending_after, batch_lat) = std::thread::scope(|s| {
        if let Some(secs) = c.durability.checkpoint_secs {
            let (engine, stop, failure, ckpts) = (&engine, &stop, &failure, &ckpts);
            s.spawn(move || {
                let every = Duration::from_secs_f64(secs);
                let mut next = Instant::now() + every;
                while !stop.load(Ordering::Relaxed) {
                    if Instant::now() < next {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    next = Instant::now() + every;
                    match engine.checkpoint() {
                        Ok(i) => {
                            // With no batch since the last one, the engine
                            // reports the current checkpoint again (the
                            // start's, at first): counted once.
                            let mut g = ckpts.lock().unwrap_or_else(|e| e.into_inner());
                            let start = engine.det_stats().and_then(|d| d.recovered_from);
                            let known = g.1.as_ref().map(|l| &l.file);
                            if known != Some(&i.file) && start.as_ref() != Some(&i.file) {
                                g.0 += 1;
                                g.1 = Some(i);
                            }
                        }
                        Err(e) => give_up(failure, stop, e),
                    }
                }
            });
        }
        for i in 0..clients {
            let (engine, measuring, stop, committed, aborted, failure, tally, db) = (
                &engine, &measuring, &stop, &committed, &aborted, &failure, &tally, &db,
            );
            let (offered, accepted, dropped) = (&offered, &accepted, &dropped);
            let (client_cpu_ns, client_wall_ns, queued) =
                (&client_cpu_ns, &client_wall_ns, &queued);
            let latencies = &latencies;
            s.spawn(move || {
                let mut recon = match db.worker() {
                    Ok(w) => w,
                    Err(e) => return give_up(failure, stop, e),
                };
                let mut st = wl.thread_state(
                    i,
                    clients,
                    tessera_workloads::driver::thread_seed(c.seed, i),
                );
                // Each request's receipt, when it was submitted, its type.
                #[allow(clippy::type_complexity)]
                let mut inflight: VecDeque<(
                    tessera::det::Receipt<<W::Proc as Request>::Output>,
                    Instant,
                    usize,
                )> = VecDeque::with_capacity(window + 1);
                // Per transaction type: latencies (submission to release)
                // of the requests settled while measuring, in microseconds.
                let mut lat: Vec<hdrhistogram::Histogram<u64>> = (0..wl.txn_types().len())
                    .map(|_| {
                        hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)
                            .expect("bounds")
                    })
                    .collect();
                let give_up = |e: tessera::Error| give_up(failure, stop, e);
                let mut my_tally = 0i64;
                let mut settle = |((r, released), submitted, ty): (
                    tessera::det::sequencer::Released<<W::Proc as Request>::Output>,
                    Instant,
                    usize,
                )| {
                    queued.fetch_sub(1, Ordering::Relaxed);
                    match r {
                        Ok(o) => {
                            let measured = measuring.load(Ordering::Relaxed);
                            if measured {
                                if let Some(h) = lat.get_mut(ty) {
                                    let us = released.saturating_duration_since(submitted);
                                    h.saturating_record(us.as_micros() as u64);
                                }
                            }
                            match o {
                                Outcome::Committed(out) => {
                                    my_tally += W::tally(&out);
                                    if measured {
                                        committed.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                                Outcome::Aborted => {
                                    if measured {
                                        aborted.fetch_add(1, Ordering::Relaxed);
                                    }
                                }
                            }
                        }
                        Err(e) => give_up(e),
                    }
                };
                // Draw, prepare and submit the next request, its latency
                // counted from `at` (open loop: when it fell due, so that a
                // late client's delay is the engine's latency, not hidden;
                // closed loop: now); false once the run has failed.
                let mut submit_next = |inflight: &mut VecDeque<_>, at: Option<Instant>| {
                    let ty = wl.next(&mut st);
                    let mut p = wl.proc(&st);
                    if let Err(e) = wl.prepare(&mut p, &mut recon) {
                        give_up(e);
                        return false;
                    }
                    let at = at.unwrap_or_else(Instant::now);
                    match engine.submit(p) {
                        Ok(r) => {
                            inflight.push_back((r, at, ty));
                            queued.fetch_add(1, Ordering::Relaxed);
                            true
                        }
                        Err(e) => {
                            give_up(e);
                            false
                        }
                    }
                };
                // Open loop: submit on a schedule, drop when the queue of
                // unacknowledged requests is full, take acknowledgements
                // as they come.
                let mut due = Instant::now();
                let (cpu0, wall0) = (thread_cpu_time(), due);
                while let Some(base) = c.det.offered_rate.filter(|_| !stop.load(Ordering::Relaxed))
                {
                    while let Some((r, at, ty)) = inflight.pop_front() {
                        match r.try_wait_released() {
                            Ok(done) => settle((done, at, ty)),
                            Err(r) => {
                                inflight.push_front((r, at, ty));
                                break;
                            }
                        }
                    }
                    // The client sleeps until the next request is due,
                    // at least `OPEN_LOOP_TICK`, and then submits every
                    // request that fell due meanwhile. It never spins: on
                    // a machine of two cores a spinning client would take
                    // one of them from the engine it measures (at 40,000
                    // a second a request falls due every 25 us, below any
                    // useful sleep).
                    let now = Instant::now();
                    if now < due {
                        let d = due - now;
                        std::thread::sleep(d.clamp(OPEN_LOOP_TICK, Duration::from_micros(500)));
                        continue;
                    }
                    let t = t0.elapsed().as_secs_f64() - c.warmup;
                    let rate = offered_at(base, c.det.burst, t) / clients as f64;
                    let fell_due = due;
                    due += Duration::from_secs_f64(1.0 / rate);
                    let measured = measuring.load(Ordering::Relaxed);
                    if measured {
                        offered.fetch_add(1, Ordering::Relaxed);
                    }
                    if inflight.len() >= max_queue {
                        if measured {
                            dropped.fetch_add(1, Ordering::Relaxed);
                        }
                        continue;
                    }
                    if !submit_next(&mut inflight, Some(fell_due)) {
                        break;
                    }
                    if measured {
                        accepted.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if c.det.offered_rate.is_some() {
                    let cpu = thread_cpu_time().saturating_sub(cpu0);
                    client_cpu_ns.fetch_add(cpu.as_nanos() as u64, Ordering::Relaxed);
                    client_wall_ns.fetch_add(wall0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                while !stop.load(Ordering::Relaxed) {
                    if !submit_next(&mut inflight, None) {
                        break;
                    }
                    if inflight.len() > window {
                        let (r, at, ty) = inflight.pop_front().unwrap();
                        settle((r.wait_released(), at, ty));
                    }
                }
                for (r, at, ty) in inflight {
                    settle((r.wait_released(), at, ty));
                }
                tally.fetch_add(my_tally, Ordering::Relaxed);
                let mut all = latencies.lock().unwrap_or_else(|e| e.into_inner());
                for (a, h) in all.iter_mut().zip(&lat) {
                    let _ = a.add(h);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(c.warmup));
        committed.store(0, Ordering::Relaxed);
        aborted.store(0, Ordering::Relaxed);
        measuring.store(true, Ordering::SeqCst);
        let pending = || engine.det_stats().map_or(0, |d| d.stages.lazy_pending);
        let pending_before = pending();
        let lat_from = engine.batch_latencies().map_or(0, |l| l.len());
        let a = Instant::now();
        let mut last = 0;
        // Open loop: a sample every 100 ms.
        let step = if c.det.offered_rate.is_some() {
            0.1
        } else {
            1.0
        };
        while a.elapsed().as_secs_f64() < c.seconds {
            let left = c.seconds - a.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_secs_f64(left.clamp(0.0, step)));
            if c.det.offered_rate.is_some() {
                let l = |x: &AtomicU64| x.load(Ordering::Relaxed) as f64;
                timeline.push([
                    a.elapsed().as_secs_f64(),
                    l(&offered),
                    l(&accepted),
                    l(&dropped),
                    l(&committed) + l(&aborted),
                    pending() as f64,
                    queued.load(Ordering::Relaxed) as f64,
                ]);
                continue;
            }
            if !c.quiet {
                let n = committed.load(Ordering::Relaxed);
                eprintln!(
                    "   run {:5.1}/{:.1} s  {:12.0} txn/s",
                    a.elapsed().as_secs_f64().min(c.seconds),
                    c.seconds,
                    (n - last) as f64 / 1.0
                );
                last = n;
            }
        }
        measuring.store(false, Ordering::SeqCst);
        let b = Instant::now();
        let pending_after = pending();
        let lat = engine
            .batch_latencies()
            .map_or_else(Vec::new, |l| l.since(lat_from));
        stop.store(true, Ordering::SeqCst);
        (a, b, pending_before, pending_after, lat)
    });
    std::mem::forget(db); // freed with the process, as `bench` does
    if let Some(e) = failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
        return Err(Failure::from_error(
            &format!("a {name} request failed: "),
            &e,
        ));
    }
    // Every request is settled: the check reads the final state.
    let checked = check(&DetRun {
        engine: &engine,
        tally: tally.load(Ordering::Relaxed),
    })?;
    let stats = engine.det_stats().expect("a deterministic database").stages;
    engine
        .close()
        .map_err(|e| Failure::from_error(&format!("{name}: "), &e))?;
    if stats.lazy_later_errors > 0 {
        // A committed transaction whose later phase failed: its writes are
        // missing from the state, which a benchmark must not report as a
        // result.
        return Err(Failure::new(
            1,
            "later-phase",
            format!(
                "{name}: {} committed transaction(s) failed in their later phase",
                stats.lazy_later_errors
            ),
        ));
    }
    let secs = (run_end - run_start).as_secs_f64();
    let n = committed.load(Ordering::Relaxed);
    // Lazy: the acknowledged commits, less those still waiting for their
    // later phase at the end beyond those waiting at the start.
    let substantiated = (n + pending_before).saturating_sub(pending_after);
    // Logic aborts only: BOHM has no other kind.
    let a = aborted.load(Ordering::Relaxed);
    let abort_rate = if n + a > 0 {
        a as f64 / (n + a) as f64
    } else {
        0.0
    };
    let checkpoints_json = {
        let g = ckpts.lock().unwrap_or_else(|e| e.into_inner());
        json!({
            "taken": g.0,
            "last": g.1.as_ref().map(|i| json!({
                "next_batch": i.epoch,
                "rows": i.records,
                "bytes": i.bytes,
                "seconds": i.seconds,
                "segments_deleted": i.segments_deleted,
            })),
        })
    };
    let mut report = json!({
        "protocol": name,
        "workload": wl.name(),
        "threads": cfg.exec_threads,
        "clients": clients,
        "seconds": secs,
        "warmup_seconds": c.warmup,
        "committed": n,
        "aborted": aborted.load(Ordering::Relaxed),
        "abort_rate": abort_rate,
        // Lazy: a transaction counts once its later phase has run (the
        // thesis counts only fully substantiated transactions); the
        // commits acknowledged in the window are `committed`.
        "throughput_txn_per_s": substantiated as f64 / secs,
        "acknowledged_txn_per_s": n as f64 / secs,
        "seed": c.seed,
        "engine": {
            "cc_threads": cfg.cc_threads,
            "exec_threads": cfg.exec_threads,
            "batch_size": cfg.sequencer.batch_size,
            "batch_us": cfg.sequencer.batch_time.as_micros() as u64,
            "read_annotation": cfg.read_annotation,
            "chain_bound": cfg.chain_bound,
            "lazy_backlog": cfg.lazy_backlog,
            "client_window": window,
            "prefault_bytes": c.prefault,
            "prefault_seconds": prefault_secs,
            "durability": c.durability.durability.name(),
            "data_dir": input_dir.as_ref().map(|d| d.display().to_string()),
        },
        // Open loop (`--offered-rate`): what was offered, accepted and
        // dropped while measuring, and the timeline (seconds into the run,
        // then running totals of offered, accepted, dropped, acknowledged,
        // and the transactions still waiting for their later phase).
        "open_loop": c.det.offered_rate.map(|r| {
            let (o, d) = (offered.load(Ordering::Relaxed), dropped.load(Ordering::Relaxed));
            let w = client_wall_ns.load(Ordering::Relaxed);
            let client_share =
                (w > 0).then(|| client_cpu_ns.load(Ordering::Relaxed) as f64 / w as f64);
            json!({
                "offered_rate": r,
                "burst": c.det.burst.map(|(f, t, b)| json!({"from": f, "to": t, "rate": b})),
                "max_queue": max_queue,
                "offered": o,
                "accepted": accepted.load(Ordering::Relaxed),
                "dropped": d,
                "drop_rate": if o > 0 { d as f64 / o as f64 } else { 0.0 },
                // The share of a core each client used while it offered
                // load (its CPU time over its time in the loop): a load
                // generator that took a core would take it from the engine.
                "client_cpu_share": client_share,
                "timeline_columns": ["seconds", "offered", "accepted", "dropped", "acknowledged", "pending_later_phases", "queued"],
                "max_queued": timeline.iter().map(|r| r[6] as u64).max().unwrap_or(0),
                "timeline": timeline,
            })
        }),
        // Batches released while measuring: from the cut to the release of
        // the outcomes (executed, input durable), the thesis's Table 6.1.
        "batch_latency_ms": batch_latency_json(batch_lat),
        // Per transaction type: from submission to the release of the
        // outcome, while measuring (the thesis's Fig. 4.4 is the CDF of an
        // external read's: YCSB's `--long-read-ratio 0.001
        // --long-read-size 1` are its single-record reads).
        "latency_ms": latency_json(wl.txn_types(), &latencies.lock().unwrap_or_else(|e| e.into_inner())),
        "input_log_bytes": stats.input_bytes,
        "checkpoints": checkpoints_json,
        "stages": {
            "batches": stats.batches,
            // BOHM: one placeholder per declared write; 2pl-ordered: one
            // lock entry per declared key.
            "cc_entry": match protocol {
                Protocol::Bohm | Protocol::Lazy => "placeholder",
                Protocol::Pwv => "ticket",
                _ => "lock",
            },
            "cc_entries": stats.placeholders,
            "recursive_executions": stats.recursive,
            // Executions abandoned on a read whose producer ran on another
            // thread (set aside and run again: no OS wait).
            "set_aside": stats.set_aside,
            "versions_collected": stats.collected,
            // Placeholders that reused a collected version's memory.
            "versions_reused": stats.reused,
            // Records the CC threads' latest maps hold at the end.
            "cc_map_entries": stats.cc_map_entries,
            "cc_busy_seconds": stats.cc_busy_ns as f64 / 1e9,
            "exec_busy_seconds": stats.exec_busy_ns as f64 / 1e9,
            // The CC stage alone: entries (a placeholder per declared write,
            // an RMW each in YCSB) per second of a CC thread's busy time.
            "lazy": {
                "deferred": stats.lazy_deferred,
                "handed_off": stats.lazy_handed_off,
                "substantiated_by_workers": stats.lazy_substantiated,
                "later_errors": stats.lazy_later_errors,
                // Never run: blind writes overwrote all their stickies
                // unread (counted as substantiated).
                "clobbered": stats.lazy_clobbered,
                // Inserts whose uniqueness check met a sticky and did not
                // run its producer (non-substantiating reads).
                "existence_checks_unsubstantiated": stats.lazy_existence_checks,
                // Read-only requests answered by the workers, off the
                // stickification thread.
                "external_reads": stats.lazy_external_reads,
                "backlog_max_batches": stats.lazy_backlog_max,
                "pending_at_start": pending_before,
                "pending_at_end": pending_after,
            },
            "cc_stage_entries_per_busy_s_per_thread": if stats.cc_busy_ns > 0 {
                stats.placeholders as f64 / (stats.cc_busy_ns as f64 / 1e9)
            } else {
                0.0
            },
        },
        "load": { "seconds": load_secs },
        "config": wl.config(),
    });
    let mut line = None;
    if let Some((v, l)) = checked {
        report["consistency"] = v;
        line = Some(l);
    }
    if c.json {
        Ok(serde_json::to_string_pretty(&report).map_err(Failure::run)? + "\n")
    } else {
        let mut out = table(&report);
        if let Some(l) = line {
            out.push_str(&l);
            out.push('\n');
        }
        Ok(out)
    }
}

/// Record the run's first failure and stop every thread.
fn give_up(
    failure: &std::sync::Mutex<Option<tessera::Error>>,
    stop: &AtomicBool,
    e: tessera::Error,
) {
    failure
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(e);
    stop.store(true, Ordering::Relaxed);
}

/// Copy every row of `t` from the loading database into the engine.
fn copy_table(w: &mut tessera::Worker, engine: &Database, t: TableId) -> Result<(), Failure> {
    let mut err = None;
    w.run(|tx| {
        tx.scan(
            t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            ScanOptions::default(),
            |k, v| match engine.load(t, k, v) {
                Ok(()) => true,
                Err(e) => {
                    err = Some(e);
                    false
                }
            },
        )
        .map(|_| ())
    })
    .map_err(|e| Failure::from_error("cannot copy the loaded rows: ", &e))?;
    match err {
        Some(e) => Err(Failure::from_error("cannot load the engine: ", &e)),
        None => Ok(()),
    }
}

/// Per transaction type that ran: count, percentiles and a CDF (latency in
/// milliseconds at fractions 0.01 to 1), from histograms in microseconds.
fn latency_json(types: &[&str], hs: &[hdrhistogram::Histogram<u64>]) -> Value {
    let mut m = serde_json::Map::new();
    for (name, h) in types.iter().zip(hs) {
        if h.is_empty() {
            continue;
        }
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let mut qs: Vec<f64> = (1..=99).map(|i| i as f64 / 100.0).collect();
        qs.extend([0.995, 0.999, 1.0]);
        let cdf: Vec<[f64; 2]> = qs.iter().map(|&q| [ms(q), q]).collect();
        m.insert(
            (*name).to_string(),
            json!({
                "count": h.len(),
                "mean": h.mean() / 1000.0,
                "p50": ms(0.5),
                "p90": ms(0.9),
                "p99": ms(0.99),
                "p999": ms(0.999),
                "max": h.max() as f64 / 1000.0,
                "cdf": cdf,
            }),
        );
    }
    Value::Object(m)
}

/// Percentiles of batch latencies given in microseconds, in milliseconds.
fn batch_latency_json(mut us: Vec<u32>) -> Value {
    us.sort_unstable();
    let n = us.len();
    let at = |q: f64| -> f64 {
        if n == 0 {
            return 0.0;
        }
        let i = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        f64::from(us[i]) / 1000.0
    };
    let mean = if n == 0 {
        0.0
    } else {
        us.iter().map(|&x| f64::from(x)).sum::<f64>() / n as f64 / 1000.0
    };
    json!({
        "batches": n,
        "mean": mean,
        "p50": at(0.5),
        "p95": at(0.95),
        "p99": at(0.99),
        "max": at(1.0),
    })
}

fn table(r: &Value) -> String {
    let lat = &r["batch_latency_ms"];
    let f = |k: &str| lat[k].as_f64().unwrap_or(0.0);
    table_head(r)
        + &format!(
            "batch latency (cut to release) over {} batches: p50 {:.2} ms, p95 {:.2} ms, max {:.2} ms\n",
            lat["batches"],
            f("p50"),
            f("p95"),
            f("max")
        )
}

fn table_head(r: &Value) -> String {
    format!(
        "{} on {}: {} client thread(s), {} CC, {} exec\n\
         committed {} in {:.2} s: {:.0} txn/s ({} aborted by their logic)\n\
         batches {}, CC entries ({}s) {}, producers run by readers {}, versions collected {} (reused {})\n\
         CC stage alone: {:.0} entries per busy second per CC thread\n",
        r["protocol"].as_str().unwrap_or(""),
        r["workload"].as_str().unwrap_or(""),
        r["clients"],
        r["engine"]["cc_threads"],
        r["engine"]["exec_threads"],
        r["committed"],
        r["seconds"].as_f64().unwrap_or(0.0),
        r["throughput_txn_per_s"].as_f64().unwrap_or(0.0),
        r["aborted"],
        r["stages"]["batches"],
        r["stages"]["cc_entry"].as_str().unwrap_or(""),
        r["stages"]["cc_entries"],
        r["stages"]["recursive_executions"],
        r["stages"]["versions_collected"],
        r["stages"]["versions_reused"],
        r["stages"]["cc_stage_entries_per_busy_s_per_thread"]
            .as_f64()
            .unwrap_or(0.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `DET_KNOBS` names exactly `DetArgs`' flags.
    #[test]
    fn det_knobs_are_the_det_flags() {
        let cmd = DetArgs::augment_args(clap::Command::new("t"));
        let mut flags: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        flags.sort_unstable();
        let mut known = DET_KNOBS.to_vec();
        known.sort_unstable();
        assert_eq!(flags, known);
    }
}

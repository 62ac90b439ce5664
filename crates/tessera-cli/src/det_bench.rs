//! `tessera bench ycsb --cc bohm`: the deterministic protocol, driven open
//! loop. Client threads (`--threads`) draw YCSB transactions, submit them
//! as procedures and keep a window of receipts in flight (two batches'
//! worth across the clients), as the thesis's harness feeds BOHM a stream
//! of pre-generated transactions; a transaction counts once its batch is
//! released. The data is loaded through an in-memory database (the YCSB
//! loader) and copied into BOHM's tables at timestamp 0.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use tessera::cc::bohm::{Bohm, BohmConfig};
use tessera::det::{Outcome, SequencerConfig};
use tessera::{Database, Options, ScanOptions};
use tessera_workloads::driver::Workload;
use tessera_workloads::ycsb::{Ycsb, TABLE};

use crate::bench::{Cc, Common};
use crate::failure::Failure;

/// Options of the deterministic protocols (`--cc bohm`).
#[derive(Args, Debug, Clone, Copy)]
pub struct DetArgs {
    /// BOHM's concurrency-control threads, each owning a hash partition of
    /// the keys [default: 1].
    #[arg(long = "cc-threads", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub cc_threads: Option<usize>,
    /// BOHM's execution threads [default: 1].
    #[arg(long = "exec-threads", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub exec_threads: Option<usize>,
    /// Requests per batch (the thesis's authors ran 10,000) [default: 10000].
    #[arg(long = "batch-size", value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1 << 24))]
    pub batch_size: Option<usize>,
    /// A batch is cut this many microseconds after its first request, full
    /// or not [default: 2000].
    #[arg(long = "batch-us", value_name = "US",
          value_parser = clap::builder::RangedU64ValueParser::<u64>::new().range(1..=10_000_000))]
    pub batch_us: Option<u64>,
}

impl DetArgs {
    fn given(&self) -> bool {
        self.cc_threads.is_some()
            || self.exec_threads.is_some()
            || self.batch_size.is_some()
            || self.batch_us.is_some()
    }

    /// A usage error if a deterministic knob is given without `--cc bohm`.
    pub fn refuse_unless_bohm(&self) -> Result<(), Failure> {
        if self.given() {
            return Err(Failure::usage(
                "--cc-threads, --exec-threads, --batch-size and --batch-us apply to --cc bohm only",
            ));
        }
        Ok(())
    }

    fn config(&self) -> BohmConfig {
        BohmConfig {
            cc_threads: self.cc_threads.unwrap_or(1),
            exec_threads: self.exec_threads.unwrap_or(1),
            sequencer: SequencerConfig {
                batch_size: self.batch_size.unwrap_or(10_000),
                batch_time: Duration::from_micros(self.batch_us.unwrap_or(2_000)),
            },
        }
    }
}

/// Load, run open loop, report (one JSON object, or a few lines).
pub fn ycsb_bohm(wl: &Ycsb, c: &Common) -> Result<String, Failure> {
    debug_assert_eq!(c.cc, Cc::Bohm);
    if c.txns.is_some() {
        return Err(Failure::usage(
            "--txns is not supported with --cc bohm yet: use --seconds",
        ));
    }
    c.durability.check().map_err(Failure::usage)?;
    if c.durability.durability == tessera::Durability::Async {
        return Err(Failure::usage(
            "--cc bohm releases a batch's outcomes only once its input is durable: use \
             --durability sync (or none)",
        ));
    }
    if c.durability.checkpoint_secs.is_some() {
        return Err(Failure::usage(
            "--checkpoint-secs is not supported with --cc bohm yet",
        ));
    }
    // The input log: a fresh directory (the benchmark loads fresh data).
    let input_dir = c.durability.data_dir.clone();
    if let Some(dir) = &input_dir {
        let used = std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false);
        if used {
            return Err(Failure::usage(format!(
                "--data-dir {} is not empty; --cc bohm writes its input log to a new or empty directory",
                dir.display()
            )));
        }
    }
    if c.declared {
        return Err(Failure::usage(
            "--declared is implied by --cc bohm: every request declares its sets",
        ));
    }
    let cfg = c.det.config();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let prefault_secs = crate::bench::prefault(c)?;
    // The YCSB loader writes through a database; its rows are copied into
    // BOHM's table at timestamp 0.
    let t0 = Instant::now();
    let mut bohm = Bohm::new(&[TABLE], cfg).map_err(|e| Failure::from_error("BOHM: ", &e))?;
    if let Some(dir) = &input_dir {
        let procs = tessera::det::Procedures::new()
            .register::<tessera_workloads::ycsb::YcsbProc>()
            .map_err(|e| Failure::from_error("", &e))?;
        bohm = bohm.with_input_log(dir, procs);
    }
    {
        let db = Database::open(Options::in_memory().workers(cores.max(2)))
            .map_err(|e| Failure::from_error("cannot open the loading database: ", &e))?;
        wl.load(&db, cores, &|_| {})
            .map_err(|e| Failure::from_error("cannot load YCSB: ", &e))?;
        let t = db.table(TABLE).map_err(|e| Failure::from_error("", &e))?;
        if bohm.table(TABLE).ok() != Some(t) {
            return Err(Failure::run("BOHM's table id differs from the loader's"));
        }
        let mut w = db.worker().map_err(|e| Failure::from_error("", &e))?;
        let mut err = None;
        w.run(|tx| {
            tx.scan(
                t,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                ScanOptions::default(),
                |k, v| match bohm.load(t, k, v) {
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
        if let Some(e) = err {
            return Err(Failure::from_error("cannot load BOHM: ", &e));
        }
        std::mem::forget(db); // freed with the process, as `bench` does
    }
    let load_secs = t0.elapsed().as_secs_f64();
    if !c.quiet {
        eprintln!(
            "loaded in {load_secs:.2} s; bohm: {} CC thread(s), {} execution thread(s), batches of {} or {} us",
            cfg.cc_threads,
            cfg.exec_threads,
            cfg.sequencer.batch_size,
            cfg.sequencer.batch_time.as_micros()
        );
    }
    bohm.start()
        .map_err(|e| Failure::from_error("cannot start BOHM: ", &e))?;
    let measuring = AtomicBool::new(false);
    let stop = AtomicBool::new(false);
    let committed = AtomicU64::new(0);
    let aborted = AtomicU64::new(0);
    let window = (2 * cfg.sequencer.batch_size / c.threads).max(1);
    let failure: std::sync::Mutex<Option<tessera::Error>> = std::sync::Mutex::new(None);
    let (run_start, run_end) = std::thread::scope(|s| {
        for i in 0..c.threads {
            let (bohm, measuring, stop, committed, aborted, failure) =
                (&bohm, &measuring, &stop, &committed, &aborted, &failure);
            s.spawn(move || {
                let mut st = wl.thread_state(i, c.threads, c.seed);
                let mut inflight = VecDeque::with_capacity(window + 1);
                let give_up = |e: tessera::Error| {
                    failure
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                    stop.store(true, Ordering::Relaxed);
                };
                let settle = |r: tessera::det::Receipt<()>| match r.wait() {
                    Ok(o) => {
                        if measuring.load(Ordering::Relaxed) {
                            match o {
                                Outcome::Committed(()) => committed.fetch_add(1, Ordering::Relaxed),
                                Outcome::Aborted => aborted.fetch_add(1, Ordering::Relaxed),
                            };
                        }
                    }
                    Err(e) => give_up(e),
                };
                while !stop.load(Ordering::Relaxed) {
                    wl.next(&mut st);
                    match bohm.submit(wl.procedure(&st)) {
                        Ok(r) => inflight.push_back(r),
                        Err(e) => {
                            give_up(e);
                            break;
                        }
                    }
                    if inflight.len() > window {
                        settle(inflight.pop_front().unwrap());
                    }
                }
                for r in inflight {
                    settle(r);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(c.warmup));
        committed.store(0, Ordering::Relaxed);
        aborted.store(0, Ordering::Relaxed);
        measuring.store(true, Ordering::SeqCst);
        let a = Instant::now();
        let mut last = 0;
        while a.elapsed().as_secs_f64() < c.seconds {
            let left = c.seconds - a.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_secs_f64(left.clamp(0.0, 1.0)));
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
        stop.store(true, Ordering::SeqCst);
        (a, b)
    });
    let stats = bohm
        .shutdown()
        .map_err(|e| Failure::from_error("BOHM: ", &e))?;
    if let Some(e) = failure.lock().unwrap_or_else(|e| e.into_inner()).take() {
        return Err(Failure::from_error("a BOHM request failed: ", &e));
    }
    let secs = (run_end - run_start).as_secs_f64();
    let n = committed.load(Ordering::Relaxed);
    // Logic aborts only: BOHM has no other kind.
    let a = aborted.load(Ordering::Relaxed);
    let abort_rate = if n + a > 0 {
        a as f64 / (n + a) as f64
    } else {
        0.0
    };
    let report = json!({
        "protocol": "bohm",
        "workload": "ycsb",
        "threads": c.threads,
        "seconds": secs,
        "warmup_seconds": c.warmup,
        "committed": n,
        "aborted": aborted.load(Ordering::Relaxed),
        "abort_rate": abort_rate,
        "throughput_txn_per_s": n as f64 / secs,
        "seed": c.seed,
        "engine": {
            "cc_threads": cfg.cc_threads,
            "exec_threads": cfg.exec_threads,
            "batch_size": cfg.sequencer.batch_size,
            "batch_us": cfg.sequencer.batch_time.as_micros() as u64,
            "client_window": window,
            "prefault_bytes": c.prefault,
            "prefault_seconds": prefault_secs,
            "durability": c.durability.durability.name(),
            "data_dir": input_dir.as_ref().map(|d| d.display().to_string()),
        },
        "input_log_bytes": stats.input_bytes,
        "bohm": {
            "batches": stats.batches,
            "placeholders": stats.placeholders,
            "recursive_executions": stats.recursive,
            "versions_collected": stats.collected,
            "cc_busy_seconds": stats.cc_busy_ns as f64 / 1e9,
            "exec_busy_seconds": stats.exec_busy_ns as f64 / 1e9,
            // The CC stage alone: placeholders (one per declared write, an
            // RMW each in YCSB) per second of a CC thread's busy time.
            "cc_stage_placeholders_per_busy_s_per_thread": if stats.cc_busy_ns > 0 {
                stats.placeholders as f64 / (stats.cc_busy_ns as f64 / 1e9)
            } else {
                0.0
            },
        },
        "load": { "seconds": load_secs },
        "config": wl.config(),
    });
    if c.json {
        Ok(serde_json::to_string_pretty(&report).map_err(Failure::run)? + "\n")
    } else {
        Ok(table(&report))
    }
}

fn table(r: &Value) -> String {
    format!(
        "bohm on ycsb: {} client thread(s), {} CC, {} exec\n\
         committed {} in {:.2} s: {:.0} txn/s ({} aborted by their logic)\n\
         batches {}, placeholders {}, producers run by readers {}, versions collected {}\n\
         CC stage alone: {:.0} placeholders per busy second per CC thread\n",
        r["threads"],
        r["engine"]["cc_threads"],
        r["engine"]["exec_threads"],
        r["committed"],
        r["seconds"].as_f64().unwrap_or(0.0),
        r["throughput_txn_per_s"].as_f64().unwrap_or(0.0),
        r["aborted"],
        r["bohm"]["batches"],
        r["bohm"]["placeholders"],
        r["bohm"]["recursive_executions"],
        r["bohm"]["versions_collected"],
        r["bohm"]["cc_stage_placeholders_per_busy_s_per_thread"]
            .as_f64()
            .unwrap_or(0.0),
    )
}

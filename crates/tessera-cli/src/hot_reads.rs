//! `tessera bench hot-reads`: readers of rows that writers hold, through
//! the protocols (Cai et al. chapter 2's claim, measured on whole
//! transactions): under EMS a reader finds the current version in the
//! record's header even while an uncommitted writer holds the record; under
//! ERMIA's `si` it first meets the writer's uncommitted version at the head
//! of the chain and steps past it.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{json, Value};
use tessera::{Database, Options, Protocol, TxError};

use crate::failure::{print_json, Failure};

/// `tessera bench hot-reads`.
#[derive(Args, Debug)]
#[command(after_long_help = HOT_READS_HELP)]
pub struct HotReadsArgs {
    /// Protocols, comma-separated (run interleaved).
    #[arg(long, value_name = "P1,P2,...", value_delimiter = ',', default_value = "ems,si",
          value_parser = crate::bench::ProtocolParser)]
    pub cc: Vec<Protocol>,
    /// Updater thread counts, comma-separated: each protocol runs with each.
    #[arg(
        long,
        value_name = "N1,N2,...",
        value_delimiter = ',',
        default_value = "0,1"
    )]
    pub updaters: Vec<u32>,
    /// Reader threads.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub readers: u32,
    /// Records (every one read and updated).
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub records: u64,
    /// Value size in bytes.
    #[arg(long = "value-size", value_name = "BYTES", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(8..=65_536))]
    pub value_size: u64,
    /// Gets per read-only transaction.
    #[arg(long, value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub reads_per_txn: u32,
    /// Rows each update transaction writes, consecutive keys from a random
    /// start (default: all of them, so nearly every row is held by an
    /// uncommitted writer at any time).
    #[arg(long, value_name = "N")]
    pub update_rows: Option<u64>,
    /// Milliseconds each update transaction holds its rows (sleeping
    /// after its writes, before its commit): the rows are then held by an
    /// uncommitted writer nearly all the time, as in the book's
    /// read-updating runs, rather than rewritten under the readers' caches
    /// all the time (0: commit at once).
    #[arg(long, value_name = "MS", default_value_t = 50)]
    pub hold_ms: u64,
    /// Seconds measured per run.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    pub seconds: f64,
    /// Rounds (each runs every configuration once, in rotated order;
    /// medians reported).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

const HOT_READS_HELP: &str = "\
An in-memory table of --records rows. --readers threads run read-only
transactions of --reads-per-txn gets of uniformly chosen keys; --updaters
threads run transactions that update --update-rows consecutive rows (all
by default) and hold them --hold-ms before committing, so the readers
meet rows held by uncommitted writers. Each
protocol runs with each updater count, interleaved over --reps rounds. The
report gives the readers' gets per second (the figure compared), their
aborts, and the updaters' commits per second.

The issue's target: `--cc ems --updaters 1` reads at least as fast as
`--cc si --updaters 0` (a row under update against a row nobody updates).";

/// One run's figures.
struct Run {
    reads_per_sec: f64,
    reader_aborts: u64,
    update_commits_per_sec: f64,
}

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn run(a: &HotReadsArgs, p: Protocol, updaters: u32) -> Result<Run, String> {
    let db = Database::open(Options::in_memory().protocol(p)).map_err(|e| e.to_string())?;
    let t = db.create_table("hot").map_err(|e| e.to_string())?;
    let n = a.records;
    let val = vec![7u8; a.value_size as usize];
    {
        let mut w = db.worker().map_err(|e| e.to_string())?;
        let mut i = 0;
        while i < n {
            let end = (i + 1000).min(n);
            w.run(|tx| {
                for k in i..end {
                    tx.insert(t, &key(k), &val)?;
                }
                Ok(())
            })
            .map_err(|e| e.to_string())?;
            i = end;
        }
    }
    let rows = a.update_rows.unwrap_or(n).clamp(1, n);
    let stop = AtomicBool::new(false);
    let measuring = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let aborts = AtomicU64::new(0);
    let updates = AtomicU64::new(0);
    let failed: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
    let measured = std::thread::scope(|s| {
        for r in 0..a.readers {
            let (db, stop, measuring, reads, aborts, failed) =
                (&db, &stop, &measuring, &reads, &aborts, &failed);
            s.spawn(move || {
                let mut w = match db.worker() {
                    Ok(w) => w,
                    Err(e) => {
                        *failed.lock().unwrap() = Some(e.to_string());
                        return;
                    }
                };
                let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (u64::from(r) + 1);
                let (mut mine, mut ab) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    let on = measuring.load(Ordering::Relaxed);
                    let mut seed = rng;
                    let res = w.try_run(|tx| {
                        seed = rng;
                        for _ in 0..a.reads_per_txn {
                            let k = xorshift(&mut seed) % n;
                            std::hint::black_box(tx.get(t, &key(k))?);
                        }
                        Ok(())
                    });
                    rng = seed;
                    match res {
                        Ok(()) if on => mine += u64::from(a.reads_per_txn),
                        Ok(()) => {}
                        Err(TxError::Conflict(_)) if on => ab += 1,
                        Err(TxError::Conflict(_)) => {}
                        // Anything but a conflict ends the run as a failure.
                        Err(e) => {
                            *failed.lock().unwrap() = Some(format!("reader: {e}"));
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
                reads.fetch_add(mine, Ordering::Relaxed);
                aborts.fetch_add(ab, Ordering::Relaxed);
            });
        }
        for u in 0..updaters {
            let (db, stop, measuring, updates, val, failed) =
                (&db, &stop, &measuring, &updates, &val, &failed);
            s.spawn(move || {
                let mut w = match db.worker() {
                    Ok(w) => w,
                    Err(e) => {
                        *failed.lock().unwrap() = Some(format!("updater: {e}"));
                        return;
                    }
                };
                let mut rng = 0xD1B5_4A32_D192_ED03u64 ^ (u64::from(u) + 1);
                let mut mine = 0u64;
                let mut v = val.clone();
                while !stop.load(Ordering::Relaxed) {
                    let start = xorshift(&mut rng) % n;
                    v[..8].copy_from_slice(&rng.to_le_bytes());
                    let res = w.try_run(|tx| {
                        for i in 0..rows {
                            tx.update(t, &key((start + i) % n), &v)?;
                        }
                        if a.hold_ms > 0 {
                            std::thread::sleep(Duration::from_millis(a.hold_ms));
                        }
                        Ok(())
                    });
                    match res {
                        Ok(()) if measuring.load(Ordering::Relaxed) => mine += 1,
                        Ok(()) | Err(TxError::Conflict(_)) => {}
                        Err(e) => {
                            *failed.lock().unwrap() = Some(format!("updater: {e}"));
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }
                updates.fetch_add(mine, Ordering::Relaxed);
            });
        }
        // A short warm-up, then the measured window.
        std::thread::sleep(Duration::from_millis(300));
        measuring.store(true, Ordering::Relaxed);
        let began = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(a.seconds));
        measuring.store(false, Ordering::Relaxed);
        let el = began.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        el
    });
    if let Some(e) = failed.into_inner().unwrap() {
        return Err(e);
    }
    Ok(Run {
        reads_per_sec: reads.into_inner() as f64 / measured,
        reader_aborts: aborts.into_inner(),
        update_commits_per_sec: updates.into_inner() as f64 / measured,
    })
}

/// Run `tessera bench hot-reads`.
pub fn main(a: &HotReadsArgs) -> ExitCode {
    if a.seconds.is_nan() || a.seconds <= 0.0 || a.seconds.is_infinite() {
        return Failure::usage(format!("--seconds must be positive, got {}", a.seconds))
            .report(a.json, Value::Null);
    }
    if let Some(p) = a.cc.iter().find(|p| p.caps().deterministic) {
        return Failure::usage(format!(
            "{p} is deterministic: it runs no interactive transactions"
        ))
        .report(a.json, Value::Null);
    }
    let configs: Vec<(Protocol, u32)> =
        a.cc.iter()
            .flat_map(|&p| a.updaters.iter().map(move |&u| (p, u)))
            .collect();
    let mut runs: Vec<((Protocol, u32), Run)> = Vec::new();
    for round in 0..a.reps as usize {
        let n = configs.len();
        for c in (0..n).map(|i| configs[(i + round) % n]) {
            match run(a, c.0, c.1) {
                Ok(r) => {
                    eprintln!(
                        "[round {}] {} with {} updater(s): {:.0} gets/s, {} reader aborts, {:.1} update txn/s",
                        round + 1,
                        c.0,
                        c.1,
                        r.reads_per_sec,
                        r.reader_aborts,
                        r.update_commits_per_sec
                    );
                    runs.push((c, r));
                }
                Err(e) => return Failure::run(e).report(a.json, Value::Null),
            }
        }
    }
    let rows: Vec<Value> = configs
        .iter()
        .map(|&c| {
            let of = |f: &dyn Fn(&Run) -> f64| {
                crate::sweep::median(
                    runs.iter()
                        .filter(|(k, _)| *k == c)
                        .map(|(_, r)| f(r))
                        .collect(),
                )
                .unwrap_or(0.0)
            };
            json!({
                "protocol": c.0.name(),
                "updaters": c.1,
                "gets_per_sec": of(&|r| r.reads_per_sec).round(),
                "reader_aborts": of(&|r| r.reader_aborts as f64),
                "update_txns_per_sec": of(&|r| r.update_commits_per_sec),
            })
        })
        .collect();
    if a.json {
        print_json(&json!({
            "benchmark": "hot-reads",
            "records": a.records,
            "value_size": a.value_size,
            "readers": a.readers,
            "reads_per_txn": a.reads_per_txn,
            "update_rows": a.update_rows.unwrap_or(a.records).clamp(1, a.records),
            "hold_ms": a.hold_ms,
            "seconds": a.seconds,
            "reps": a.reps,
            "runs": rows,
        }));
    } else {
        println!(
            "{} reader(s), {} gets per transaction, {} records of {} B, updates held {} ms, medians of {}",
            a.readers, a.reads_per_txn, a.records, a.value_size, a.hold_ms, a.reps
        );
        println!(
            "{:<8} {:>9} {:>14} {:>14} {:>16}",
            "cc", "updaters", "gets/s", "reader aborts", "update txn/s"
        );
        for r in &rows {
            println!(
                "{:<8} {:>9} {:>14.0} {:>14.0} {:>16.1}",
                r["protocol"].as_str().unwrap_or(""),
                r["updaters"].as_u64().unwrap_or(0),
                r["gets_per_sec"].as_f64().unwrap_or(0.0),
                r["reader_aborts"].as_f64().unwrap_or(0.0),
                r["update_txns_per_sec"].as_f64().unwrap_or(0.0)
            );
        }
    }
    ExitCode::SUCCESS
}

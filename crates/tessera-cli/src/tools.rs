//! `tessera recover`, `tessera inspect` and `tessera check`: tools for the
//! data directory of a durable database.
//!
//! `recover` and `check` open the database, which recovers it (and, like
//! any open, cuts torn log tails and records the new run in
//! `tessera.meta`); `inspect` only reads.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Subcommand};
use serde_json::{json, Value};
use tessera::log::meta::{Meta, META_FILE};
use tessera::log::recovery::LogScan;
use tessera::{Database, Durability, Error, Options, Protocol, RecoveryReport, ScanOptions};
use tessera_workloads::tpcc::check_database;

use crate::bench::ProtocolParser;

/// `tessera recover`.
#[derive(Args, Debug)]
pub struct RecoverArgs {
    /// The database's data directory.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Concurrency-control protocol to open the recovered database with.
    #[arg(long = "cc", value_name = "PROTOCOL", default_value = "silo", value_parser = ProtocolParser)]
    pub cc: Protocol,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `tessera inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The database's data directory (only read).
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `tessera check <workload>`.
#[derive(Subcommand, Debug)]
pub enum CheckCmd {
    /// Recover a database written by `tessera bench tpcc` (or
    /// `tpcc-hybrid`) and check the TPC-C consistency conditions on it.
    Tpcc(CheckTpccArgs),
}

/// `tessera check tpcc`.
#[derive(Args, Debug)]
pub struct CheckTpccArgs {
    /// The database's data directory.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Concurrency-control protocol to open the recovered database with.
    #[arg(long = "cc", value_name = "PROTOCOL", default_value = "silo", value_parser = ProtocolParser)]
    pub cc: Protocol,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(1)
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("a JSON value serializes")
    );
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The directory must hold a tessera database: opening a missing or empty
/// one would create a new, empty database instead.
fn require_database(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if !dir.join(META_FILE).exists() {
        return Err(format!(
            "{} holds no tessera database (no {META_FILE})",
            dir.display()
        ));
    }
    Ok(())
}

/// Open (and so recover) the database in `dir`.
fn open(dir: &Path, cc: Protocol) -> Result<Database, String> {
    require_database(dir)?;
    Database::open(
        Options::in_memory()
            .protocol(cc)
            .durability(Durability::Async)
            .data_dir(dir),
    )
    .map_err(|e| format!("cannot recover {}: {e}", dir.display()))
}

fn recovery_json(r: &RecoveryReport) -> Value {
    json!({
        "durable_epoch": r.durable_epoch,
        "max_epoch_seen": r.max_epoch_seen,
        "segments": r.segments,
        "log_bytes": r.log_bytes,
        "txns_replayed": r.txns_replayed,
        "txns_ignored": r.txns_ignored,
        "writes_replayed": r.writes_replayed,
        "records": r.records,
        "checkpoint": r.checkpoint.as_ref().map(|(f, e)| json!({"file": f, "epoch": e})),
        "warnings": r.warnings,
        "seconds": round3(r.seconds),
        "phase_seconds": {
            "read": round3(r.phase_seconds[0]),
            "decode": round3(r.phase_seconds[1]),
            "apply": round3(r.phase_seconds[2]),
        },
        "mb_per_s": (r.mb_per_s() * 10.0).round() / 10.0,
        "threads": r.threads,
    })
}

fn recovery_text(dir: &Path, r: &RecoveryReport) -> String {
    let mut s = format!(
        "recovered {} in {:.3} s with {} thread(s): durable epoch {} (largest epoch in the log {})\n\
         log: {} segment(s), {:.2} MB read at {:.1} MB/s\n\
         replayed {} txns ({} writes), ignored {} (after the durable epoch or void); {} live records\n\
         phases: read and check {:.3} s, decode {:.3} s, build records and indexes {:.3} s\n",
        dir.display(),
        r.seconds,
        r.threads,
        r.durable_epoch,
        r.max_epoch_seen,
        r.segments,
        r.log_bytes as f64 / 1e6,
        r.mb_per_s(),
        r.txns_replayed,
        r.writes_replayed,
        r.txns_ignored,
        r.records,
        r.phase_seconds[0],
        r.phase_seconds[1],
        r.phase_seconds[2],
    );
    if let Some((f, e)) = &r.checkpoint {
        s += &format!("loaded checkpoint {f} (epoch {e}) before replaying the log\n");
    }
    if r.warnings.is_empty() {
        s += "warnings: none\n";
    } else {
        for w in &r.warnings {
            s += &format!("warning: {w}\n");
        }
    }
    s
}

/// Rows of every table, in creation order: (name, secondary, rows).
fn count_rows(db: &Database, dir: &Path) -> Result<Vec<(String, bool, u64)>, Error> {
    let secondary: Vec<String> = Meta::load(dir)?
        .map(|m| {
            m.tables
                .into_iter()
                .filter(|t| t.secondary)
                .map(|t| t.name)
                .collect()
        })
        .unwrap_or_default();
    let mut w = db.worker()?;
    let mut out = Vec::new();
    for name in db.table_names() {
        let t = db.table(&name)?;
        let mut rows = 0u64;
        let mut cursor: Option<Vec<u8>> = None;
        loop {
            const CHUNK: usize = 4096;
            let (n, last) = w.run(|tx| {
                let mut last = None;
                let lo = match &cursor {
                    None => Bound::Unbounded,
                    Some(k) => Bound::Excluded(k.as_slice()),
                };
                let n = tx.scan(
                    t,
                    lo,
                    Bound::Unbounded,
                    ScanOptions::new().limit(CHUNK),
                    |k, _| {
                        last = Some(k.to_vec());
                        true
                    },
                )?;
                Ok((n, last))
            })?;
            rows += n as u64;
            if n < CHUNK {
                break;
            }
            cursor = last;
        }
        let sec = secondary.contains(&name);
        out.push((name, sec, rows));
    }
    Ok(out)
}

/// `tessera recover`.
pub fn recover(a: &RecoverArgs) -> ExitCode {
    let db = match open(&a.data_dir, a.cc) {
        Ok(db) => db,
        Err(e) => return fail(e),
    };
    let r = db
        .recovery_report()
        .expect("a database opened from a data directory has a recovery report")
        .clone();
    let t0 = Instant::now();
    let tables = match count_rows(&db, &a.data_dir) {
        Ok(t) => t,
        Err(e) => return fail(format!("cannot count the recovered rows: {e}")),
    };
    let count_seconds = t0.elapsed().as_secs_f64();
    if a.json {
        print_json(&json!({
            "data_dir": a.data_dir.display().to_string(),
            "protocol": a.cc.name(),
            "recovery": recovery_json(&r),
            "tables": tables
                .iter()
                .map(|(n, sec, rows)| json!({"name": n, "secondary": sec, "rows": rows}))
                .collect::<Vec<_>>(),
            "count_seconds": round3(count_seconds),
        }));
    } else {
        let mut s = recovery_text(&a.data_dir, &r);
        s += &format!(
            "{} table(s) (rows counted in {count_seconds:.2} s):\n",
            tables.len()
        );
        for (n, sec, rows) in &tables {
            s += &format!(
                "  {n:<24} {rows:>12}{}\n",
                if *sec { "  (secondary index)" } else { "" }
            );
        }
        print!("{s}");
    }
    ExitCode::SUCCESS
}

/// `tessera check tpcc`.
pub fn check(cmd: &CheckCmd) -> ExitCode {
    let CheckCmd::Tpcc(a) = cmd;
    let db = match open(&a.data_dir, a.cc) {
        Ok(db) => db,
        Err(e) => return fail(e),
    };
    let r = db
        .recovery_report()
        .expect("a database opened from a data directory has a recovery report")
        .clone();
    let t0 = Instant::now();
    let (found, cons) = match check_database(&db) {
        Ok(x) => x,
        Err(e) => {
            return fail(format!(
                "cannot check {} as TPC-C: {e}",
                a.data_dir.display()
            ))
        }
    };
    let seconds = t0.elapsed().as_secs_f64();
    if a.json {
        print_json(&json!({
            "data_dir": a.data_dir.display().to_string(),
            "protocol": a.cc.name(),
            "recovery": recovery_json(&r),
            "workload": if found.hybrid { "tpcc-hybrid" } else { "tpcc" },
            "warehouses": found.warehouses,
            "consistency": {
                "passed": cons.passed,
                "conditions": serde_json::to_value(&cons.conditions).expect("conditions serialize"),
                "seconds": round3(seconds),
            },
        }));
    } else {
        print!("{}", recovery_text(&a.data_dir, &r));
        println!(
            "{} data, {} warehouse(s)",
            if found.hybrid {
                "TPC-C-hybrid"
            } else {
                "TPC-C"
            },
            found.warehouses
        );
        println!("{} [checked in {seconds:.2} s]", cons.summary());
    }
    if cons.passed {
        ExitCode::SUCCESS
    } else {
        fail(format!(
            "the recovered database is inconsistent: {}",
            cons.failed().join(", ")
        ))
    }
}

/// `tessera inspect`: read `tessera.meta` and every log segment, change
/// nothing.
pub fn inspect(a: &InspectArgs) -> ExitCode {
    let dir = &a.data_dir;
    let mut out = json!({ "data_dir": dir.display().to_string() });
    let mut text = format!("data dir {}\n", dir.display());
    let result = inspect_into(dir, &mut out, &mut text);
    if let Err(e) = &result {
        out["error"] = json!(e);
    }
    if a.json {
        print_json(&out);
    } else {
        print!("{text}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn inspect_into(dir: &Path, out: &mut Value, text: &mut String) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let meta = Meta::load(dir).map_err(|e| e.to_string())?;
    match &meta {
        None => {
            out["meta"] = Value::Null;
            *text += &format!("{META_FILE}: none\n");
        }
        Some(m) => {
            out["meta"] = json!({
                "tables": m.tables.iter().map(|t| json!({
                    "id": t.id, "name": t.name, "secondary": t.secondary,
                })).collect::<Vec<_>>(),
                "voids": m.voids.iter().map(|(lo, hi)| json!([lo, hi])).collect::<Vec<_>>(),
                "checkpoint": m.checkpoint.as_ref().map(|(f, e)| json!({"file": f, "epoch": e})),
                "run": m.run.map(|(l, d)| json!({"loggers": l, "base_durable_epoch": d})),
            });
            *text += &format!(
                "{META_FILE}: {} table(s); last run: {}; checkpoint: {}; void epochs: {}\n",
                m.tables.len(),
                m.run.map_or("none".to_string(), |(l, d)| format!(
                    "{l} logger(s), started from durable epoch {d}"
                )),
                m.checkpoint
                    .as_ref()
                    .map_or("none".to_string(), |(f, e)| format!("{f} at epoch {e}")),
                if m.voids.is_empty() {
                    "none".to_string()
                } else {
                    m.voids
                        .iter()
                        .map(|(lo, hi)| format!("({lo}, {hi}]"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            );
            if !m.tables.is_empty() {
                let names: Vec<String> = m
                    .tables
                    .iter()
                    .map(|t| {
                        format!(
                            "{} {}{}",
                            t.id,
                            t.name,
                            if t.secondary { " (index)" } else { "" }
                        )
                    })
                    .collect();
                *text += &format!("  tables: {}\n", names.join(", "));
            }
        }
    }
    let scan = LogScan::read(dir).map_err(|e| e.to_string())?;
    let mut streams = Vec::new();
    for s in &scan.streams {
        let segs: Vec<Value> = s
            .segments
            .iter()
            .map(|(segno, path, bytes, valid)| {
                json!({
                    "segno": segno,
                    "file": path.file_name().map(|f| f.to_string_lossy().into_owned()),
                    "bytes": bytes,
                    "valid_bytes": valid,
                })
            })
            .collect();
        streams.push(json!({
            "logger": s.logger,
            "segments": segs,
            "blocks": s.blocks,
            "last_seq": s.last_seq,
            "last_mark": s.last_mark,
            "max_epoch": s.max_epoch,
            "txns": s.txns,
        }));
        *text += &format!(
            "logger {}: {} segment(s), {} blocks (last seq {}), last epoch mark {}, max epoch of a txn block {}{}\n",
            s.logger,
            s.segments.len(),
            s.blocks,
            s.last_seq.map_or("-".to_string(), |x| x.to_string()),
            s.last_mark.map_or("-".to_string(), |x| x.to_string()),
            s.max_epoch,
            // The scan does not count entries in every build of the engine.
            if s.txns > 0 {
                format!(", {} txn entries", s.txns)
            } else {
                String::new()
            }
        );
        for (segno, path, bytes, valid) in &s.segments {
            *text += &format!(
                "  segment {segno}: {} {bytes} bytes, {valid} valid{}\n",
                path.file_name()
                    .map_or(String::new(), |f| f.to_string_lossy().into_owned()),
                if valid < bytes { " (torn tail)" } else { "" }
            );
        }
    }
    let durable = meta
        .as_ref()
        .and_then(|m| m.run)
        .map_or(0, |(loggers, base)| scan.durable_epoch(loggers, base));
    let max = scan.max_epoch();
    out["log"] = json!({
        "streams": streams,
        "valid_bytes": scan.valid_bytes(),
        "max_epoch": max,
        "durable_epoch": durable,
        "torn": scan.torn.iter().map(|(p, off, msg)| json!({
            "file": p.display().to_string(), "offset": off, "message": msg,
        })).collect::<Vec<_>>(),
    });
    if scan.streams.is_empty() {
        *text += "log: no segments\n";
    }
    *text += &format!(
        "recovery would use durable epoch {durable} (largest epoch in the log {max}{}); {} valid log bytes\n",
        if max > durable {
            format!("; entries of epochs {}..={max} would be ignored", durable + 1)
        } else {
            String::new()
        },
        scan.valid_bytes()
    );
    if scan.torn.is_empty() {
        *text += "torn tails: none\n";
    } else {
        for (_, _, msg) in &scan.torn {
            *text += &format!("torn tail (recovery cuts it off): {msg}\n");
        }
    }
    let has_run = matches!(&meta, Some(m) if m.run.is_some());
    if !has_run && !scan.streams.is_empty() {
        return Err(format!(
            "{} holds log segments but no {META_FILE} with a run: recovery would refuse it",
            dir.display()
        ));
    }
    Ok(())
}

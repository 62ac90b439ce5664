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
use tessera::log::frontier::{self, FRONTIER_FILE};
use tessera::log::meta::{Meta, META_FILE};
use tessera::log::recovery::LogScan;
use tessera::{
    Database, Durability, Error, Options, Protocol, RecoveryMode, RecoveryReport, ScanOptions,
};
use tessera_workloads::tpcc::check_database;

use crate::bench::ProtocolParser;
use crate::failure::{print_json, Failure};

/// How an open of the data directory recovers it (shared by `recover`
/// and `check`).
#[derive(Args, Debug, Clone)]
pub struct OpenArgs {
    /// The database's data directory.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// Concurrency-control protocol to open the recovered database with
    /// [default: silo]. A deterministic directory (tessera.det) is
    /// recovered with the protocol it names: --cc may only repeat it.
    #[arg(long = "cc", value_name = "PROTOCOL", value_parser = ProtocolParser)]
    pub cc: Option<Protocol>,
    /// What damage recovery accepts: strict (default: only a torn tail
    /// after the recorded durable frontier), tolerate-tail, point-in-time
    /// or salvage. The last three accept a loss, report it, and keep
    /// copies of what they change in a recovery-* folder of DIR.
    #[arg(long = "recovery-mode", value_name = "MODE", default_value = "strict", value_parser = parse_mode)]
    pub mode: RecoveryMode,
    /// Recover into memory only: change nothing in DIR (no tail cut, no new
    /// run recorded), e.g. on a read-only copy. The report lists what an
    /// ordinary open would change.
    #[arg(long = "dry-run", visible_alias = "read-only")]
    pub dry_run: bool,
    /// Print one JSON object on stdout instead of text (an error object on
    /// failure).
    #[arg(long)]
    pub json: bool,
}

fn parse_mode(s: &str) -> Result<RecoveryMode, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

/// `tessera recover`.
#[derive(Args, Debug)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub open: OpenArgs,
}

/// `tessera backup`.
#[derive(Args, Debug)]
pub struct BackupArgs {
    #[command(flatten)]
    pub open: OpenArgs,
    /// The new directory to write the backup to (absent, or empty). The
    /// copy is written beside it as DIR.partial and renamed into place once
    /// a read-only recovery of it succeeded.
    #[arg(long = "to", value_name = "DIR")]
    pub to: PathBuf,
}

/// `tessera inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The database's data directory (only read).
    #[arg(long = "data-dir", value_name = "DIR")]
    pub data_dir: PathBuf,
    /// The recovery mode whose verdict to report (default strict, the
    /// mode `recover` uses by default).
    #[arg(long = "recovery-mode", value_name = "MODE", default_value = "strict", value_parser = parse_mode)]
    pub mode: RecoveryMode,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `tessera check <workload>`.
#[derive(Subcommand, Debug)]
pub enum CheckCmd {
    /// Recover a database written by `tessera bench tpcc` (or
    /// `tpcc-hybrid`, or `tpcc --cc bohm`: a deterministic directory) and
    /// check the TPC-C consistency conditions on it.
    Tpcc(CheckTpccArgs),
    /// Recover a deterministic engine's data directory (`tessera bench
    /// ycsb|smallbank|tpcc --cc bohm|2pl-ordered --durability sync
    /// --data-dir`)
    /// and check that its state equals a serial replay of the same
    /// checkpoint and input log.
    Det(CheckTpccArgs),
}

/// `tessera check tpcc` and `tessera check det`.
#[derive(Args, Debug)]
pub struct CheckTpccArgs {
    #[command(flatten)]
    pub open: OpenArgs,
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The path must be an existing directory.
fn check_dir(dir: &Path) -> Result<(), Failure> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Failure::new(
            2,
            "invalid_argument",
            format!("{} is not a directory", dir.display()),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::new(
            2,
            "invalid_argument",
            format!("{} does not exist", dir.display()),
        )),
        Err(e) => Err(Failure::from_error(
            "",
            &Error::io(format!("cannot read {}", dir.display()), e),
        )),
    }
}

/// The directory must hold a tessera database (or the remains of one, which
/// recovery then names): opening an empty one would create a new, empty
/// database instead.
fn require_database(dir: &Path) -> Result<(), Failure> {
    check_dir(dir)?;
    let any = std::fs::read_dir(dir)
        .map_err(|e| {
            Failure::from_error("", &Error::io(format!("cannot list {}", dir.display()), e))
        })?
        .flatten()
        .any(|e| e.file_name() != "LOCK");
    if !dir.join(META_FILE).exists() && !any {
        return Err(Failure::new(
            1,
            "no_database",
            format!(
                "{} holds no tessera database (no {META_FILE})",
                dir.display()
            ),
        ));
    }
    Ok(())
}

impl OpenArgs {
    /// The protocol to reopen a redo-log directory with.
    pub fn protocol(&self) -> Protocol {
        self.cc.unwrap_or(Protocol::DEFAULT)
    }
}

/// Open (and so recover) the database in `dir`.
fn open(a: &OpenArgs) -> Result<Database, Failure> {
    require_database(&a.data_dir)?;
    if a.protocol().caps().deterministic {
        return Err(Failure::usage(format!(
            "{} holds a redo log, written by an interactive protocol: --cc {} recovers \
             deterministic directories only (tessera.det)",
            a.data_dir.display(),
            a.protocol()
        )));
    }
    Database::open(
        Options::in_memory()
            .protocol(a.protocol())
            .durability(Durability::Async)
            .data_dir(&a.data_dir)
            .recovery_mode(a.mode)
            .read_only(a.dry_run),
    )
    .map_err(|e| Failure::from_error(&format!("cannot recover {}: ", a.data_dir.display()), &e))
}

fn recovery_json(r: &RecoveryReport) -> Value {
    json!({
        "mode": r.mode.name(),
        "dry_run": r.dry_run,
        "durable_epoch": r.durable_epoch,
        "frontier_epoch": r.frontier_epoch,
        "max_epoch_seen": r.max_epoch_seen,
        "segments": r.segments,
        "log_bytes": r.log_bytes,
        "txns_replayed": r.txns_replayed,
        "txns_covered_by_checkpoint": r.txns_covered,
        "txns_ignored": r.txns_ignored,
        "writes_replayed": r.writes_replayed,
        "checkpoint_rows": r.checkpoint_rows,
        "records": r.records,
        "checkpoint": r.checkpoint.as_ref().map(|(f, e)| json!({"file": f, "epoch": e})),
        "warnings": r.warnings,
        "changes": r.changes,
        "loss": r.loss.as_ref().map(|l| json!({
            "acknowledged_epochs": l.acknowledged_epochs.map(|(lo, hi)| json!({"from": lo + 1, "to": hi})),
            "txns_set_aside": l.txns_set_aside,
            "details": l.details,
            "files": l.files,
            "kept_in": l.kept_in.as_ref().map(|p| p.display().to_string()),
            "consistent": l.consistent,
        })),
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
        "{} {} in {:.3} s with {} thread(s), mode {}: durable epoch {} (frontier recorded {}; largest epoch in the log {})\n\
         log: {} segment(s), {:.2} MB read at {:.1} MB/s\n\
         log entries: {} replayed ({} writes), {} covered by the checkpoint, {} ignored (after the durable epoch or void); {} live records\n\
         phases: read and check {:.3} s, decode {:.3} s, build records and indexes {:.3} s\n",
        if r.dry_run { "recovered (dry run, nothing changed)" } else { "recovered" },
        dir.display(),
        r.seconds,
        r.threads,
        r.mode,
        r.durable_epoch,
        r.frontier_epoch.map_or("nothing".to_string(), |e| format!("epoch {e}")),
        r.max_epoch_seen,
        r.segments,
        r.log_bytes as f64 / 1e6,
        r.mb_per_s(),
        r.txns_replayed,
        r.writes_replayed,
        r.txns_covered,
        r.txns_ignored,
        r.records,
        r.phase_seconds[0],
        r.phase_seconds[1],
        r.phase_seconds[2],
    );
    if let Some((f, e)) = &r.checkpoint {
        s += &format!(
            "loaded checkpoint {f} (epoch {e}, {} rows) before replaying the log\n",
            r.checkpoint_rows
        );
    }
    if r.warnings.is_empty() {
        s += "warnings: none\n";
    } else {
        for w in &r.warnings {
            s += &format!("warning: {w}\n");
        }
    }
    if let Some(l) = &r.loss {
        s += &format!(
            "LOSS ACCEPTED by --recovery-mode {}{}:\n",
            r.mode,
            if l.consistent {
                ""
            } else {
                " (the state is NOT guaranteed consistent)"
            }
        );
        match l.acknowledged_epochs {
            Some((lo, hi)) => s += &format!("  acknowledged epochs {}..={hi} lost\n", lo + 1),
            None => s += "  no acknowledged epoch lost that the frontier could tell\n",
        }
        s += &format!(
            "  {} log entries in the parts cut off or set aside\n",
            l.txns_set_aside
        );
        for d in &l.details {
            s += &format!("  {d}\n");
        }
        if let Some(k) = &l.kept_in {
            s += &format!("  copies and REPORT.txt (how to undo) in {}\n", k.display());
        }
    }
    if r.changes.is_empty() {
        s += "changes to the directory: none\n";
    } else {
        for c in &r.changes {
            s += &format!("change: {c}\n");
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
    let a = &a.open;
    if crate::det_tools::is_det_dir(&a.data_dir) {
        return crate::det_tools::recover(a);
    }
    let base = json!({
        "data_dir": a.data_dir.display().to_string(),
        "protocol": a.protocol().name(),
    });
    let db = match open(a) {
        Ok(db) => db,
        Err(f) => return f.report(a.json, base),
    };
    let r = db
        .recovery_report()
        .expect("a database opened from a data directory has a recovery report")
        .clone();
    let t0 = Instant::now();
    let tables = match count_rows(&db, &a.data_dir) {
        Ok(t) => t,
        Err(e) => {
            return Failure::from_error("cannot count the recovered rows: ", &e)
                .report(a.json, base)
        }
    };
    let count_seconds = t0.elapsed().as_secs_f64();
    if a.json {
        let mut v = base;
        v["recovery"] = recovery_json(&r);
        v["tables"] = tables
            .iter()
            .map(|(n, sec, rows)| json!({"name": n, "secondary": sec, "rows": rows}))
            .collect();
        v["count_seconds"] = json!(round3(count_seconds));
        print_json(&v);
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

/// `tessera backup`: recover the directory (as an ordinary open does),
/// take a fresh checkpoint, copy it with the log after it, verify the copy.
pub fn backup(b: &BackupArgs) -> ExitCode {
    let a = &b.open;
    let base = json!({
        "data_dir": a.data_dir.display().to_string(),
        "to": b.to.display().to_string(),
        "protocol": a.protocol().name(),
    });
    if a.dry_run {
        return Failure::usage(
            "--dry-run: a backup takes a checkpoint in the source directory, which a \
             read-only open cannot; copy a read-only directory with cp -r",
        )
        .report(a.json, base);
    }
    if crate::det_tools::is_det_dir(&a.data_dir) {
        return Failure::usage(format!(
            "{} is a deterministic directory (tessera.det): tessera backup copies \
             interactive databases only; copy a closed deterministic directory with cp -r",
            a.data_dir.display()
        ))
        .report(a.json, base);
    }
    let db = match open(a) {
        Ok(db) => db,
        Err(f) => return f.report(a.json, base),
    };
    let info = match db.backup_to(&b.to) {
        Ok(i) => i,
        Err(e) => {
            return Failure::from_error(&format!("cannot back up to {}: ", b.to.display()), &e)
                .report(a.json, base)
        }
    };
    if let Err(e) = db.close() {
        return Failure::from_error(
            "the backup was written, but closing the source failed: ",
            &e,
        )
        .report(a.json, base);
    }
    if a.json {
        let mut v = base;
        v["backup"] = json!({
            "dir": info.dir.display().to_string(),
            "files": info.files,
            "bytes": info.bytes,
            "checkpoint_epoch": info.checkpoint_epoch,
            "durable_epoch": info.durable_epoch,
            "rows": info.rows,
            "seconds": round3(info.seconds),
        });
        print_json(&v);
    } else {
        println!(
            "backed up {} to {}: {} files, {} bytes, {} rows, checkpoint epoch {}, durable \
             epoch {}, verified by a read-only recovery ({:.2} s)",
            a.data_dir.display(),
            info.dir.display(),
            info.files,
            info.bytes,
            info.rows,
            info.checkpoint_epoch,
            info.durable_epoch,
            info.seconds
        );
    }
    ExitCode::SUCCESS
}

/// `tessera check tpcc`.
pub fn check(cmd: &CheckCmd) -> ExitCode {
    let a = match cmd {
        CheckCmd::Tpcc(a) => &a.open,
        CheckCmd::Det(a) => return crate::det_tools::check(&a.open),
    };
    if crate::det_tools::is_det_dir(&a.data_dir) {
        return crate::det_tools::check_tpcc(a);
    }
    let base = json!({
        "data_dir": a.data_dir.display().to_string(),
        "protocol": a.protocol().name(),
    });
    let db = match open(a) {
        Ok(db) => db,
        Err(f) => return f.report(a.json, base),
    };
    let r = db
        .recovery_report()
        .expect("a database opened from a data directory has a recovery report")
        .clone();
    let t0 = Instant::now();
    let (found, cons) = match check_database(&db) {
        Ok(x) => x,
        Err(e) => {
            let mut v = base;
            v["recovery"] = recovery_json(&r);
            return Failure::new(
                1,
                "not_tpcc",
                format!("cannot check {} as TPC-C: {e}", a.data_dir.display()),
            )
            .report(a.json, v);
        }
    };
    let seconds = t0.elapsed().as_secs_f64();
    let mut v = base;
    v["recovery"] = recovery_json(&r);
    v["workload"] = json!(if found.hybrid { "tpcc-hybrid" } else { "tpcc" });
    v["warehouses"] = json!(found.warehouses);
    v["consistency"] = json!({
        "passed": cons.passed,
        "conditions": serde_json::to_value(&cons.conditions).expect("conditions serialize"),
        "seconds": round3(seconds),
    });
    if !a.json {
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
    crate::failure::verdict(cons.passed, a.json, v, || {
        format!(
            "the recovered database is inconsistent: {}",
            cons.failed().join(", ")
        )
    })
}

/// `tessera inspect`: describe every file of the directory and give the
/// verdict recovery would reach (the same code: a dry-run open), changing
/// nothing.
pub fn inspect(a: &InspectArgs) -> ExitCode {
    let dir = &a.data_dir;
    if crate::det_tools::is_det_dir(dir) {
        return crate::det_tools::inspect(dir, a.mode, a.json);
    }
    let mut out = json!({ "data_dir": dir.display().to_string(), "mode": a.mode.name() });
    let mut text = format!("data dir {}\n", dir.display());
    match inspect_into(dir, a.mode, &mut out, &mut text) {
        Ok(()) => {
            if a.json {
                print_json(&out);
            } else {
                print!("{text}");
            }
            ExitCode::SUCCESS
        }
        Err(f) => {
            if !a.json {
                print!("{text}");
            }
            f.report(a.json, out)
        }
    }
}

fn inspect_into(
    dir: &Path,
    mode: RecoveryMode,
    out: &mut Value,
    text: &mut String,
) -> Result<(), Failure> {
    require_database(dir)?;
    // The control file.
    match Meta::load(dir) {
        Ok(None) => {
            out["meta"] = Value::Null;
            *text += &format!("{META_FILE}: none\n");
        }
        Err(e) => {
            out["meta"] = json!({ "error": e.to_string() });
            *text += &format!("{META_FILE}: {e}\n");
        }
        Ok(Some(m)) => {
            out["meta"] = json!({
                "gen": m.gen,
                "tables": m.tables.iter().map(|t| json!({
                    "id": t.id, "name": t.name, "secondary": t.secondary,
                })).collect::<Vec<_>>(),
                "voids": m.voids.iter().map(|(lo, hi)| json!([lo, hi])).collect::<Vec<_>>(),
                "checkpoint": m.checkpoint.as_ref().map(|(f, e)| json!({
                    "file": f, "epoch": e,
                    "needs_log_through": m.checkpoint_needs.map(|n| n.0),
                    "bytes": m.checkpoint_needs.map(|n| n.1),
                })),
                "run": m.run.map(|(l, d)| json!({"loggers": l, "base_durable_epoch": d})),
            });
            *text += &format!(
                "{META_FILE}: generation {}, {} table(s); last run: {}; checkpoint: {}; void epochs: {}\n",
                m.gen,
                m.tables.len(),
                m.run.map_or("none".to_string(), |(l, d)| format!(
                    "{l} logger(s), started from durable epoch {d}"
                )),
                m.checkpoint.as_ref().map_or("none".to_string(), |(f, e)| format!(
                    "{f} at epoch {e}{}",
                    m.checkpoint_needs
                        .map_or(String::new(), |(n, b)| format!(" ({b} bytes, needs the log through epoch {n})"))
                )),
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
    // The frontier.
    let fr = frontier::read(dir);
    match &fr {
        Ok(None) => {
            out["frontier"] = Value::Null;
            *text += &format!("{FRONTIER_FILE}: none\n");
        }
        Err(e) => {
            out["frontier"] = json!({ "error": e.to_string() });
            *text += &format!("{FRONTIER_FILE}: {e}\n");
        }
        Ok(Some(r)) => {
            let f = &r.frontier;
            out["frontier"] = json!({
                "gen": f.gen,
                "durable_epoch": f.durable,
                "meta_gen": f.meta_gen,
                "warning": r.warning,
                "streams": f.streams.iter().map(|s| json!({
                    "logger": s.logger, "first_segno": s.first_segno, "segno": s.segno,
                    "offset": s.offset, "mark": s.mark,
                })).collect::<Vec<_>>(),
            });
            *text += &format!(
                "{FRONTIER_FILE}: durable epoch {} (write {}, {META_FILE} generation {})\n",
                f.durable, f.gen, f.meta_gen
            );
            for s in &f.streams {
                *text += &format!(
                    "  logger {}: durable through segment {} offset {} (mark {}), oldest needed segment {}\n",
                    s.logger, s.segno, s.offset, s.mark, s.first_segno
                );
            }
            if let Some(w) = &r.warning {
                *text += &format!("  warning: {w}\n");
            }
        }
    }
    // The log, read and checked as recovery reads it.
    let frontier = fr.ok().flatten().map(|r| r.frontier);
    match LogScan::read(dir, frontier.as_ref(), mode) {
        Err(e) => {
            out["log"] = json!({ "error": e.to_string() });
        }
        Ok(scan) => {
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
                    "logger {}: {} segment(s), {} blocks (last seq {}), last epoch mark {}, max epoch of a txn block {}, {} txn entries\n",
                    s.logger,
                    s.segments.len(),
                    s.blocks,
                    s.last_seq.map_or("-".to_string(), |x| x.to_string()),
                    s.last_mark.map_or("-".to_string(), |x| x.to_string()),
                    s.max_epoch,
                    s.txns,
                );
                for (segno, path, bytes, valid) in &s.segments {
                    *text += &format!(
                        "  segment {segno}: {} {bytes} bytes, {valid} valid{}\n",
                        path.file_name()
                            .map_or(String::new(), |f| f.to_string_lossy().into_owned()),
                        if valid < bytes {
                            " (tail cut by recovery)"
                        } else {
                            ""
                        }
                    );
                }
            }
            if scan.streams.is_empty() {
                *text += "log: no segments\n";
            }
            out["log"] = json!({
                "streams": streams,
                "valid_bytes": scan.valid_bytes(),
                "max_epoch": scan.max_epoch(),
                "torn": scan.torn.iter().map(|(p, off, msg)| json!({
                    "file": p.display().to_string(), "offset": off, "message": msg,
                })).collect::<Vec<_>>(),
            });
        }
    }
    // The verdict: recovery itself, as a dry run.
    let db = Database::open(
        Options::in_memory()
            .durability(Durability::Async)
            .data_dir(dir)
            .recovery_mode(mode)
            .read_only(true),
    )
    .map_err(|e| {
        *text += &format!("verdict: recovery ({mode}) would refuse this directory\n");
        Failure::from_error("recovery would refuse it: ", &e)
    })?;
    let r = db.recovery_report().expect("a report").clone();
    out["recovery"] = recovery_json(&r);
    if let Some(log) = out.get_mut("log").and_then(|l| l.as_object_mut()) {
        log.insert("durable_epoch".into(), json!(r.durable_epoch));
    }
    *text += &format!(
        "verdict: recovery ({mode}) would use durable epoch {} (largest epoch in the log {}{}), replay {} log entries, {} covered by the checkpoint, {} ignored; {} live records\n",
        r.durable_epoch,
        r.max_epoch_seen,
        if r.max_epoch_seen > r.durable_epoch {
            format!("; epochs {}..={} would be ignored", r.durable_epoch + 1, r.max_epoch_seen)
        } else {
            String::new()
        },
        r.txns_replayed,
        r.txns_covered,
        r.txns_ignored,
        r.records
    );
    for w in &r.warnings {
        *text += &format!("warning: {w}\n");
    }
    if r.changes.is_empty() {
        *text += "recovery would change nothing\n";
    }
    for c in &r.changes {
        *text += &format!("recovery {c}\n");
    }
    if let Some(l) = &r.loss {
        *text += &format!("recovery would accept a loss: {}\n", l.details.join("; "));
    }
    Ok(())
}

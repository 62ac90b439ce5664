//! `tessera recover` and `tessera check det` on the data directory of a
//! deterministic engine (`tessera bench ... --cc bohm|2pl-ordered
//! --durability sync --data-dir DIR`, marked by `tessera.det`): recovery
//! loads the newest checkpoint and replays the input log after it through
//! BOHM's stages; `check det` also replays the same checkpoint and log
//! serially on an interactive database and compares the two states;
//! `check tpcc` recovers it and checks TPC-C's consistency conditions on
//! the recovered state; `inspect` reads it, changing nothing, and says
//! what recovery would do or why it would refuse.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde_json::{json, Value};
use tessera::det::checkpoint::{dir_tables, read_latest};
use tessera::det::input::{read_input_log, InputScan};
use tessera::det::{serial, Procedures};
use tessera::{Database, Error, Options, Protocol, TableId};

use crate::failure::{print_json, verdict, Failure};
use crate::tools::OpenArgs;

/// Whether `dir` is a deterministic engine's data directory.
pub fn is_det_dir(dir: &Path) -> bool {
    dir.join(tessera::det::checkpoint::DET_FILE).is_file()
}

/// Every procedure the benchmarks log (`bench ycsb|smallbank|tpcc --cc
/// bohm|2pl-ordered`).
fn procedures() -> Result<Procedures, Error> {
    Procedures::new()
        .register::<tessera_workloads::ycsb::YcsbProc>()?
        .register::<tessera_workloads::smallbank::SbProc>()?
        .register::<tessera_workloads::tpcc::det::TpccProc>()
}

use tessera::Rows;

/// What a recovery found and did.
struct Recovered {
    protocol: Protocol,
    tables: Vec<(String, Rows)>,
    checkpoint: PathBuf,
    replay: tessera::cc::bohm::ReplayStats,
    seconds: f64,
}

/// The protocol and tables `dir`'s `tessera.det` names (an error if it
/// has none).
fn marker(dir: &Path) -> Result<(String, Vec<String>), Error> {
    dir_tables(dir)?.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{} is not a deterministic data directory",
            dir.display()
        ))
    })
}

/// Copy the directory's files to a fresh temporary directory (a dry run
/// recovers the copy: recovery cuts torn tails and starts a segment).
fn copy_dir(dir: &Path) -> Result<tempfile::TempDir, Error> {
    let tmp =
        tempfile::tempdir().map_err(|e| Error::io("cannot create a temporary directory", e))?;
    let rd = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("cannot list {}", dir.display()), e))?;
    for e in rd.flatten() {
        if e.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(e.path(), tmp.path().join(e.file_name()))
                .map_err(|err| Error::io(format!("cannot copy {}", e.path().display()), err))?;
        }
    }
    Ok(tmp)
}

/// Recover `dir` with the protocol that wrote it (`tessera.det` names it:
/// both are deterministic and equivalent to the serial order, but they
/// refuse different requests).
fn recover_dir(dir: &Path) -> Result<Recovered, Error> {
    let (protocol, names) = marker(dir)?;
    let protocol = protocol
        .parse::<Protocol>()
        .ok()
        .filter(|p| p.caps().deterministic)
        .ok_or_else(|| {
            Error::Corrupt(format!(
                "{}: written by an unknown deterministic protocol '{protocol}'",
                dir.display()
            ))
        })?;
    let t0 = Instant::now();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // What a program reopening the directory does: `Database::open` with
    // the protocol recovers it (newest checkpoint, then the input log).
    let db = Database::open(
        Options::durable(dir)
            .protocol(protocol)
            .exec_threads(cores.clamp(1, 8))
            .procedures(procedures()?),
    )?;
    let seconds = t0.elapsed().as_secs_f64();
    let mut tables = Vec::new();
    for n in &names {
        let t = db.table(n)?;
        tables.push((n.clone(), db.dump(t)?));
    }
    let st = db.det_stats().expect("a deterministic database");
    db.close()?;
    Ok(Recovered {
        protocol,
        tables,
        checkpoint: st.recovered_from.unwrap_or_default(),
        replay: st.replayed,
        seconds,
    })
}

fn report(dir: &Path, dry_run: bool, r: &Recovered) -> Value {
    json!({
        "data_dir": dir.display().to_string(),
        "deterministic": true,
        "dry_run": dry_run,
        "protocol": r.protocol.name(),
        "recovery": {
            "checkpoint": r.checkpoint.file_name().map(|n| n.to_string_lossy().into_owned()),
            "batches_replayed": r.replay.batches,
            "requests_committed": r.replay.committed,
            "requests_not_committed": r.replay.not_committed,
            "cut_torn_tail": r.replay.cut_torn_tail,
            "seconds": (r.seconds * 1000.0).round() / 1000.0,
        },
        "tables": r.tables.iter().map(|(n, rows)| json!({"name": n, "rows": rows.len()})).collect::<Vec<_>>(),
    })
}

fn text(v: &Value) -> String {
    let r = &v["recovery"];
    let mut s = format!(
        "{}: deterministic data directory ({}){}\nrecovered from {} and {} replayed batch(es) \
         ({} requests committed, {} not){} in {:.2} s\n",
        v["data_dir"].as_str().unwrap_or(""),
        v["protocol"].as_str().unwrap_or(""),
        if v["dry_run"] == true {
            " (dry run: a copy was recovered)"
        } else {
            ""
        },
        r["checkpoint"].as_str().unwrap_or("?"),
        r["batches_replayed"],
        r["requests_committed"],
        r["requests_not_committed"],
        if r["cut_torn_tail"] == true {
            ", a torn tail cut"
        } else {
            ""
        },
        r["seconds"].as_f64().unwrap_or(0.0),
    );
    for t in v["tables"].as_array().into_iter().flatten() {
        s += &format!(
            "  {:<24} {:>12}\n",
            t["name"].as_str().unwrap_or(""),
            t["rows"]
        );
    }
    s
}

/// The directory a (dry-run) recovery works on, and its keeper.
fn target(a: &OpenArgs) -> Result<(PathBuf, Option<tempfile::TempDir>), Error> {
    if a.dry_run {
        let tmp = copy_dir(&a.data_dir)?;
        Ok((tmp.path().to_path_buf(), Some(tmp)))
    } else {
        Ok((a.data_dir.clone(), None))
    }
}

/// A recovery mode other than strict is the redo log's (it accepts a
/// loss); a deterministic directory recovers strictly only: said, not
/// ignored.
fn refuse_lossy_mode(
    mode: tessera::RecoveryMode,
    dir: &Path,
    json_out: bool,
    base: &Value,
) -> Option<ExitCode> {
    (mode != tessera::RecoveryMode::Strict).then(|| {
        Failure::new(
            2,
            "invalid_argument",
            format!(
                "--recovery-mode {} applies to the redo log; a deterministic directory ({}) recovers \
                 strictly only (a damaged input log or checkpoint is an error)",
                mode.name(),
                dir.display()
            ),
        )
        .report(json_out, base.clone())
    })
}

/// What `recover` and `check` refuse on a deterministic directory: a
/// lossy recovery mode, and a `--cc` other than the protocol its
/// `tessera.det` names (which recovery uses; saying nothing would let the
/// flag look obeyed).
fn refuse_redo_options(a: &OpenArgs, base: &Value) -> Option<ExitCode> {
    if let Some(code) = refuse_lossy_mode(a.mode, &a.data_dir, a.json, base) {
        return Some(code);
    }
    let p = a.cc?;
    let written = dir_tables(&a.data_dir).ok().flatten()?.0;
    (p.name() != written).then(|| {
        Failure::new(
            2,
            "invalid_argument",
            format!(
                "{} was written by {written}, which recovers it: leave --cc out or name {written} \
                 (not {p})",
                a.data_dir.display()
            ),
        )
        .report(a.json, base.clone())
    })
}

/// Recover the directory `a` names (a copy of it with `--dry-run`) as
/// `recover` does; a failure already reported (its exit status) otherwise.
fn recover_target(a: &OpenArgs) -> Result<Recovered, ExitCode> {
    let base = json!({ "data_dir": a.data_dir.display().to_string(), "deterministic": true });
    if let Some(code) = refuse_redo_options(a, &base) {
        return Err(code);
    }
    let r = target(a).and_then(|(dir, keep)| {
        let r = recover_dir(&dir);
        drop(keep);
        r
    });
    r.map_err(|e| {
        Failure::from_error(&format!("cannot recover {}: ", a.data_dir.display()), &e)
            .report(a.json, base)
    })
}

/// `tessera recover` on a deterministic data directory.
pub fn recover(a: &OpenArgs) -> ExitCode {
    match recover_target(a) {
        Ok(r) => {
            let v = report(&a.data_dir, a.dry_run, &r);
            if a.json {
                print_json(&v);
            } else {
                print!("{}", text(&v));
            }
            ExitCode::SUCCESS
        }
        Err(code) => code,
    }
}

/// The serial reference: the newest checkpoint loaded into an in-memory
/// database, then every logged batch after it, one request after another.
fn serial_state(dir: &Path, names: &[String], log: &InputScan) -> Result<Vec<Rows>, Error> {
    let db = Database::open(Options::in_memory())?;
    let ids: Vec<TableId> = names
        .iter()
        .map(|n| db.create_table(n))
        .collect::<Result<_, _>>()?;
    let mut w = db.worker()?;
    let ck = read_latest(dir)?
        .ok_or_else(|| Error::Corrupt(format!("{}: no checkpoint", dir.display())))?;
    for chunk in ck.rows.chunks(1_000) {
        w.run(|tx| {
            for (t, k, v) in chunk {
                tx.put(ids[*t as usize], k, v)?;
            }
            Ok(())
        })?;
    }
    let after = InputScan {
        batches: log
            .batches
            .iter()
            .filter(|b| b.number >= ck.next_batch)
            .cloned()
            .collect(),
        ..Default::default()
    };
    serial::replay(
        &mut w,
        &after,
        &procedures()?,
        &tessera::det::expunge::read(dir)?,
    )?;
    ids.iter().map(|&t| db.dump(t)).collect()
}

/// `tessera check det`: recover with BOHM, replay serially, compare.
pub fn check(a: &OpenArgs) -> ExitCode {
    let base = json!({ "data_dir": a.data_dir.display().to_string(), "deterministic": true });
    let fail = |what: &str, e: Error| {
        Failure::from_error(&format!("{what} {}: ", a.data_dir.display()), &e)
            .report(a.json, base.clone())
    };
    if let Some(code) = refuse_redo_options(a, &base) {
        return code;
    }
    if !is_det_dir(&a.data_dir) {
        return Failure::new(
            1,
            "not_deterministic",
            format!(
                "{} is not a deterministic engine's data directory (no {})",
                a.data_dir.display(),
                tessera::det::checkpoint::DET_FILE
            ),
        )
        .report(a.json, base);
    }
    let (dir, keep) = match target(a) {
        Ok(x) => x,
        Err(e) => return fail("cannot copy", e),
    };
    // The serial reference reads the checkpoint and log as recovery will
    // find them (recovery cuts a torn tail, which the reader skips too).
    let names = match dir_tables(&dir) {
        Ok(Some((_, n))) => n,
        Ok(None) => return fail("cannot check", Error::Corrupt("no tessera.det".into())),
        Err(e) => return fail("cannot check", e),
    };
    let t0 = Instant::now();
    let reference = read_input_log(&dir).and_then(|log| serial_state(&dir, &names, &log));
    let serial_seconds = t0.elapsed().as_secs_f64();
    let reference = match reference {
        Ok(r) => r,
        Err(e) => return fail("cannot replay serially", e),
    };
    let r = match recover_dir(&dir) {
        Ok(r) => r,
        Err(e) => return fail("cannot recover", e),
    };
    drop(keep);
    let mut differ = Vec::new();
    for ((n, rows), want) in r.tables.iter().zip(&reference) {
        if rows != want {
            differ.push(n.clone());
        }
    }
    let mut v = report(&a.data_dir, a.dry_run, &r);
    v["consistency"] = json!({
        "check": "the recovered state equals a serial replay of the checkpoint and input log",
        "passed": differ.is_empty(),
        "tables_differing": differ,
        "serial_seconds": (serial_seconds * 1000.0).round() / 1000.0,
    });
    if !a.json {
        print!("{}", text(&v));
        println!(
            "serial replay of the same checkpoint and log: {}",
            if differ.is_empty() {
                "equal".to_string()
            } else {
                format!("DIFFERS in {}", differ.join(", "))
            }
        );
    }
    verdict(differ.is_empty(), a.json, v, || {
        format!(
            "the recovered state differs from a serial replay in {}",
            differ.join(", ")
        )
    })
}

/// `tessera check tpcc` on a deterministic data directory (`bench tpcc --cc
/// bohm --durability sync`): recover it as `recover` does, copy the
/// recovered tables into an in-memory database, and check TPC-C's
/// consistency conditions there.
pub fn check_tpcc(a: &OpenArgs) -> ExitCode {
    let r = match recover_target(a) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let mut v = report(&a.data_dir, a.dry_run, &r);
    let t0 = Instant::now();
    let checked =
        copy_into_memory(&r.tables).and_then(|db| tessera_workloads::tpcc::check_database(&db));
    let (found, cons) = match checked {
        Ok(x) => x,
        Err(e) => {
            return Failure::new(
                1,
                "not_tpcc",
                format!("cannot check {} as TPC-C: {e}", a.data_dir.display()),
            )
            .report(a.json, v)
        }
    };
    let seconds = t0.elapsed().as_secs_f64();
    v["workload"] = json!("tpcc");
    v["warehouses"] = json!(found.warehouses);
    v["consistency"] = json!({
        "passed": cons.passed,
        "conditions": serde_json::to_value(&cons.conditions).expect("conditions serialize"),
        "seconds": (seconds * 1000.0).round() / 1000.0,
    });
    if !a.json {
        print!("{}", text(&v));
        println!("TPC-C data, {} warehouse(s)", found.warehouses);
        println!("{} [checked in {seconds:.2} s]", cons.summary());
    }
    verdict(cons.passed, a.json, v, || {
        format!(
            "the recovered state is inconsistent: {}",
            cons.failed().join(", ")
        )
    })
}

/// Tables (name and rows, in id order) as an in-memory database, where
/// the interactive checkers read them.
pub(crate) fn copy_into_memory(tables: &[(String, Rows)]) -> Result<Database, Error> {
    let db = Database::open(Options::in_memory())?;
    let ids: Vec<TableId> = tables
        .iter()
        .map(|(n, _)| db.create_table(n))
        .collect::<Result<_, _>>()?;
    let mut w = db.worker()?;
    for ((_, rows), &t) in tables.iter().zip(&ids) {
        for chunk in rows.chunks(1_000) {
            w.run(|tx| {
                for (k, v) in chunk {
                    tx.put(t, k, v)?;
                }
                Ok(())
            })?;
        }
    }
    drop(w);
    Ok(db)
}

/// `tessera inspect` on a deterministic data directory: what `tessera.det`
/// names, the checkpoints, the input log, and what recovery would do (load
/// the newest checkpoint, replay the batches after it), read only: nothing
/// is recovered or changed.
pub fn inspect(dir: &Path, mode: tessera::RecoveryMode, json_out: bool) -> ExitCode {
    let mut v = json!({ "data_dir": dir.display().to_string(), "deterministic": true });
    if let Some(code) = refuse_lossy_mode(mode, dir, json_out, &v) {
        return code;
    }
    match inspect_into(dir, &mut v) {
        Ok(()) => {
            if json_out {
                print_json(&v);
            } else {
                print!("{}", inspect_text(&v));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            v["verdict"] = json!("recovery would refuse this directory");
            if !json_out {
                print!("{}", inspect_text(&v));
            }
            Failure::from_error(&format!("recovery would refuse {}: ", dir.display()), &e)
                .report(json_out, v)
        }
    }
}

fn inspect_into(dir: &Path, v: &mut Value) -> Result<(), Error> {
    let (protocol, names) = marker(dir)?;
    v["protocol"] = json!(protocol);
    v["tables"] = json!(names);
    let ckpts = tessera::det::checkpoint::list(dir)?;
    v["checkpoints"] = json!(ckpts
        .iter()
        .map(|(c, p)| json!({
            "file": p.file_name().map(|n| n.to_string_lossy().into_owned()),
            "replay_from_batch": c,
            "bytes": std::fs::metadata(p).map(|m| m.len()).ok(),
        }))
        .collect::<Vec<_>>());
    // The input log is reported as read even when recovery would refuse
    // it.
    let log = read_input_log(dir)?;
    let segments = tessera::log::segment::list_segments(dir)
        .map_err(|e| Error::io(format!("cannot list the input log in {}", dir.display()), e))?;
    let files: Vec<&PathBuf> = segments.values().flatten().map(|(_, p)| p).collect();
    let bytes: u64 = files
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let requests: usize = log.batches.iter().map(|b| b.entries.len()).sum();
    v["input_log"] = json!({
        "segments": files.len(),
        "bytes": bytes,
        "batches": log.batches.len(),
        "first_batch": log.batches.first().map(|b| b.number),
        "last_batch": log.batches.last().map(|b| b.number),
        "requests": requests,
        "torn_tail": log.torn.as_ref().map(|(f, at, why)| json!({
            "file": f.display().to_string(), "offset": at, "why": why,
        })),
    });
    // The requests a system failure expunged (thesis section 6.4.7):
    // recovery replays them as no-ops that abort. A damaged list is
    // refused, as recovery refuses it.
    let expunged = tessera::det::expunge::read(dir)?;
    v["expunged"] = json!(expunged
        .iter()
        .map(|(ts, why)| json!({ "request": ts, "reason": why }))
        .collect::<Vec<_>>());
    // Recovery's own check of how the checkpoint and the log join.
    let ck = tessera::det::checkpoint::read_latest(dir)?;
    let (from, _) = tessera::det::checkpoint::join(dir, &log, ck.as_ref())?;
    let replay = &log.batches[from..];
    let file_name = |c: &tessera::det::checkpoint::DetCheckpoint| {
        c.file
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned())
    };
    v["recovery"] = json!({
        "checkpoint": ck.as_ref().map(file_name),
        "checkpoint_rows": ck.as_ref().map(|c| c.rows.len()),
        "batches_to_replay": replay.len(),
        "requests_to_replay": replay.iter().map(|b| b.entries.len()).sum::<usize>(),
        "cuts_torn_tail": log.torn.is_some(),
    });
    v["verdict"] = json!(match &ck {
        Some(c) => format!(
            "recovery would load {} and replay {} batch(es)",
            file_name(c),
            replay.len()
        ),
        None => "recovery would start a fresh directory (no checkpoint, no input log)".into(),
    });
    Ok(())
}

fn inspect_text(v: &Value) -> String {
    let mut s = format!(
        "data dir {}\ndeterministic data directory, protocol {}, tables: {}\n",
        v["data_dir"].as_str().unwrap_or(""),
        v["protocol"].as_str().unwrap_or("?"),
        v["tables"]
            .as_array()
            .map(|t| t
                .iter()
                .filter_map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", "))
            .unwrap_or_default(),
    );
    for c in v["checkpoints"].as_array().into_iter().flatten() {
        s += &format!(
            "checkpoint {} (replay from batch {}, {} bytes)\n",
            c["file"].as_str().unwrap_or("?"),
            c["replay_from_batch"],
            c["bytes"]
        );
    }
    let l = &v["input_log"];
    if l.is_object() {
        s += &format!(
            "input log: {} segment(s), {} bytes, {} batch(es) ({} to {}), {} request(s){}\n",
            l["segments"],
            l["bytes"],
            l["batches"],
            l["first_batch"],
            l["last_batch"],
            l["requests"],
            if l["torn_tail"].is_null() {
                String::new()
            } else {
                format!(
                    "; a torn tail in {} at {} (never acknowledged; recovery cuts it)",
                    l["torn_tail"]["file"].as_str().unwrap_or("?"),
                    l["torn_tail"]["offset"]
                )
            }
        );
    }
    let expunged = v["expunged"].as_array().map_or(&[][..], |a| &a[..]);
    if !expunged.is_empty() {
        s += &format!(
            "expunged requests (a system failure; replayed as aborts): {}\n",
            expunged.len()
        );
        for e in expunged {
            s += &format!(
                "  request {}: {}\n",
                e["request"],
                e["reason"].as_str().unwrap_or("?")
            );
        }
    }
    if let Some(verdict) = v["verdict"].as_str() {
        s += &format!("verdict: {verdict}\n");
    }
    s
}

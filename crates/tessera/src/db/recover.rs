//! The data-directory side of opening a database: the directory's lock,
//! recovery of what it holds, and the copies and report kept when a
//! recovery accepts a loss.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::catalog::{Table, TableId};
use crate::epoch::Epochs;
use crate::error::Error;
use crate::log::meta::Meta;
use crate::log::recovery::{LogScan, Loss, RecoveryMode, RecoveryReport};
use crate::log::Log;
use crate::storage::RecordLayout;

use super::{Database, Options};

#[cfg(test)]
thread_local! {
    /// The step of `recover` at which a test makes the open fail, leaving
    /// the directory as a crash there would.
    static FAIL_AT: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Fails the open here when a test asked for it (never otherwise).
fn failpoint(_step: &'static str) -> Result<(), Error> {
    #[cfg(test)]
    if FAIL_AT.get() == Some(_step) {
        return Err(Error::InvalidArgument(format!(
            "injected failure before step {_step}"
        )));
    }
    Ok(())
}

/// A data directory path must be a directory (created when `create`).
fn check_dir(dir: &Path, create: bool) -> Result<(), Error> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::InvalidArgument(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => Err(
            Error::InvalidArgument(format!("{} does not exist", dir.display())),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e)),
        Err(e) => Err(Error::io(format!("cannot read {}", dir.display()), e)),
    }
}

/// Names of the tessera files in `dir` other than `LOCK` (segments,
/// checkpoints, the frontier).
fn tessera_files(dir: &Path) -> Result<Vec<String>, Error> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("cannot list {}", dir.display()), e))?;
    let mut v = Vec::new();
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if crate::log::segment::parse_segment_name(&n).is_some()
            || n == crate::log::frontier::FRONTIER_FILE
            || (n.starts_with("ckpt-") && n.ends_with(".tckp"))
        {
            v.push(n);
        }
    }
    v.sort();
    Ok(v)
}

/// Before an accepted loss changes anything: a `recovery-<time>-<mode>`
/// folder in `dir` with copies of `tessera.meta`, `tessera.frontier`, every
/// file cut (copied) and every file set aside (moved there); under salvage
/// also every segment and the checkpoint (the checkpoint salvage takes
/// retires them).
fn keep_copies(
    dir: &Path,
    mode: RecoveryMode,
    scan: &LogScan,
    ckpt: Option<&Path>,
) -> Result<PathBuf, Error> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut kept = dir.join(format!("recovery-{secs}-{}", mode.name()));
    let mut n = 1;
    while kept.exists() {
        n += 1;
        kept = dir.join(format!("recovery-{secs}-{}-{n}", mode.name()));
    }
    let io = |what: &str, p: &Path, e| Error::io(format!("cannot {what} {}", p.display()), e);
    std::fs::create_dir(&kept).map_err(|e| io("create", &kept, e))?;
    let copy = |p: &Path| -> Result<(), Error> {
        let Some(name) = p.file_name() else {
            return Ok(());
        };
        match std::fs::copy(p, kept.join(name)) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("copy", p, e)),
        }
    };
    copy(&dir.join(crate::log::meta::META_FILE))?;
    copy(&dir.join(crate::log::frontier::FRONTIER_FILE))?;
    for (p, _) in &scan.cuts {
        copy(p)?;
    }
    // A torn tail is cut too: keep its bytes with the rest of the evidence.
    for (p, _, _) in &scan.torn {
        copy(p)?;
    }
    if mode == RecoveryMode::Salvage {
        for s in &scan.streams {
            for (_, p, _, _) in &s.segments {
                copy(p)?;
            }
        }
        if let Some(c) = ckpt {
            copy(c)?;
        }
    }
    for p in &scan.set_aside {
        if let Some(name) = p.file_name() {
            std::fs::rename(p, kept.join(name)).map_err(|e| io("move", p, e))?;
        }
    }
    // Make the copies durable before anything they preserve is changed.
    for e in std::fs::read_dir(&kept)
        .map_err(|e| io("list", &kept, e))?
        .flatten()
    {
        if let Ok(f) = std::fs::File::open(e.path()) {
            f.sync_all().map_err(|e2| io("sync", &e.path(), e2))?;
        }
    }
    crate::log::segment::sync_dir(&kept).map_err(|e| io("sync", &kept, e))?;
    crate::log::segment::sync_dir(dir).map_err(|e| io("sync", dir, e))?;
    Ok(kept)
}

/// The text of `REPORT.txt` in a `recovery-*` folder.
fn loss_report(dir: &Path, r: &RecoveryReport) -> String {
    let loss = r.loss.as_ref().expect("a loss to report");
    let mut s = format!(
        "Recovery of {} in mode {} accepted a loss.

",
        dir.display(),
        r.mode
    );
    match loss.acknowledged_epochs {
        Some((lo, hi)) => {
            s += &format!(
                "Acknowledged durable epochs lost: {}..={hi} (recovered to epoch {lo}).
",
                lo + 1
            )
        }
        None => {
            s += "No acknowledged epoch was lost (or tessera.frontier could not tell).
"
        }
    }
    s += &format!(
        "Transaction entries in the parts cut off or set aside: {}.
",
        loss.txns_set_aside
    );
    if !loss.consistent {
        s += "Salvage: the recovered state is NOT guaranteed to be consistent.
";
    }
    s += "
What was found:
";
    for d in &loss.details {
        s += &format!(
            "  {d}
"
        );
    }
    s += "
Files cut or set aside (their originals are in this folder):
";
    for f in &loss.files {
        s += &format!(
            "  {f}
"
        );
    }
    s += "\nTo undo: stop every process using the directory; delete the log segments\n\
           and checkpoints written since this recovery (the next run's segments\n\
           continue right after the last intact one, so they may bear the names of\n\
           files set aside here); then copy the files of this folder, all but\n\
           REPORT.txt, back into the data directory.\n";
    s
}

impl Database {
    /// Lock `dir` for this process (a second open of the same directory,
    /// here or in another process, is refused rather than corrupting it).
    /// A read-only open creates nothing: it takes a shared lock on an
    /// existing `LOCK` file (so it does not read a directory being written)
    /// and goes without one when there is none or it cannot be opened (a
    /// read-only copy).
    pub(crate) fn lock_dir(dir: &Path, read_only: bool) -> Result<Option<std::fs::File>, Error> {
        check_dir(dir, !read_only)?;
        let path = dir.join("LOCK");
        let in_use = || {
            Error::InUse(format!(
                "{} is in use by another open database (drop it first, or open another directory)",
                dir.display()
            ))
        };
        if read_only {
            let Ok(f) = std::fs::File::open(&path) else {
                return Ok(None);
            };
            return match f.try_lock_shared() {
                Ok(()) => Ok(Some(f)),
                Err(std::fs::TryLockError::WouldBlock) => Err(in_use()),
                Err(std::fs::TryLockError::Error(_)) => Ok(None),
            };
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        match f.try_lock() {
            Ok(()) => Ok(Some(f)),
            Err(std::fs::TryLockError::WouldBlock) => Err(in_use()),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Error::io(format!("cannot lock {}", path.display()), e))
            }
        }
    }

    /// Recovery at open, in two phases. First everything is read, checked
    /// and replayed into fresh tables with nothing in the directory
    /// changed, so a refusal (or a read-only open) leaves it as it was:
    /// `tessera.meta`, `tessera.frontier`, every log segment (against the
    /// frontier, under the recovery mode) and the checkpoint. Then, unless
    /// read-only: copies of whatever an accepted loss changes go to a
    /// `recovery-*` folder, torn tails are cut, leftovers removed, the void
    /// range of this crash and the new run are recorded, and the loggers
    /// start (writing a new frontier).
    #[allow(clippy::type_complexity)]
    pub(super) fn recover(
        opts: &Options,
        dir: &Path,
        epochs: &Arc<Epochs>,
        layout: &dyn RecordLayout,
    ) -> Result<(Meta, Vec<Arc<Table>>, Option<Arc<Log>>, RecoveryReport), Error> {
        use crate::log::frontier::{self, FRONTIER_FILE};
        use crate::log::meta::META_FILE;
        let started = std::time::Instant::now();
        let mode = opts.recovery_mode;
        let salvage = mode == RecoveryMode::Salvage;
        let mut report = RecoveryReport {
            mode,
            dry_run: opts.read_only,
            ..RecoveryReport::default()
        };
        let mut losses: Vec<String> = Vec::new();
        let meta = Meta::load(dir)?;
        let frontier = match frontier::read(dir) {
            Ok(Some(r)) => {
                report.warnings.extend(r.warning);
                Some(r.frontier)
            }
            Ok(None) => None,
            Err(e @ Error::Corrupt(_)) if mode != RecoveryMode::Strict => {
                losses.push(format!("{e}: the log's completeness cannot be checked"));
                None
            }
            Err(e) => return Err(e),
        };
        let mut meta = match meta {
            Some(m) => m,
            None => {
                let found = tessera_files(dir)?;
                if !found.is_empty() {
                    return Err(Error::Corrupt(format!(
                        "{} holds {} but no {META_FILE} (deleted or lost): refusing to start an empty database over them",
                        dir.display(),
                        found.join(", ")
                    )));
                }
                if opts.read_only {
                    return Err(Error::InvalidArgument(format!(
                        "{} holds no tessera database (no {META_FILE}), and a read-only open creates none",
                        dir.display()
                    )));
                }
                Meta::default()
            }
        };
        if meta.run.is_some() && frontier.is_none() && losses.is_empty() {
            let e = format!(
                "{} is missing: {} records a run but nothing says how far its log was made durable",
                dir.join(FRONTIER_FILE).display(),
                dir.join(META_FILE).display()
            );
            if mode == RecoveryMode::Strict {
                return Err(Error::Corrupt(format!(
                    "{e}; --recovery-mode tolerate-tail (or a milder loss-accepting mode) recovers what the log holds without that check"
                )));
            }
            losses.push(e);
        }
        if let Some(f) = &frontier {
            if meta.gen < f.meta_gen {
                let e = format!(
                    "{}: generation {} is older than the generation {} that {FRONTIER_FILE} recorded (an older copy of {META_FILE}?)",
                    dir.join(META_FILE).display(),
                    meta.gen,
                    f.meta_gen
                );
                if !salvage {
                    return Err(Error::Corrupt(format!(
                        "{e}; only --recovery-mode salvage opens it"
                    )));
                }
                losses.push(e);
            }
        }
        let scan = LogScan::read(dir, frontier.as_ref(), mode)?;
        losses.extend(scan.losses.iter().cloned());
        report.phase_seconds[0] = started.elapsed().as_secs_f64();
        if meta.run.is_none() && !scan.streams.is_empty() {
            return Err(Error::Corrupt(format!(
                "{} holds log segments but its {META_FILE} records no run",
                dir.display()
            )));
        }
        let tables: Vec<Arc<Table>> = meta
            .tables
            .iter()
            .map(|t| Arc::new(Table::new(TableId(t.id), t.name.clone(), t.secondary)))
            .collect();
        let mut durable = match meta.run {
            Some((loggers, base)) => scan.durable_epoch(loggers, base),
            None => 0,
        };
        let frontier_epoch = frontier.as_ref().map(|f| f.durable);
        if salvage {
            durable = durable.max(frontier_epoch.unwrap_or(0));
        }
        let max_seen = scan.max_epoch();
        // The checkpoint: complete, the size recorded, and the log must
        // reach the epoch it waited for.
        let ckpt_bytes = match &meta.checkpoint {
            Some((name, c)) => {
                let path = dir.join(name);
                let read = crate::log::checkpoint::read(dir, name, *c).and_then(|b| {
                    match meta.checkpoint_needs {
                        Some((_, size)) if size != b.len() as u64 => Err(Error::Corrupt(format!(
                            "checkpoint {}: {} bytes, but {META_FILE} records {size}",
                            path.display(),
                            b.len()
                        ))),
                        _ => Ok(b),
                    }
                });
                match read {
                    Ok(b) => Some((path, b, *c)),
                    Err(e) if salvage => {
                        losses.push(e.to_string());
                        std::fs::read(&path).ok().map(|b| (path, b, *c))
                    }
                    Err(e) => return Err(e),
                }
            }
            None => None,
        };
        if let (Some((name, c)), Some((needs, _))) = (&meta.checkpoint, meta.checkpoint_needs) {
            if durable < needs && !salvage {
                return Err(Error::Corrupt(format!(
                    "checkpoint {} (epoch {c}) needs the log through epoch {needs}, but the log reaches only epoch {durable}: log segments are missing or damaged{}",
                    dir.join(name).display(),
                    if losses.is_empty() {
                        String::new()
                    } else {
                        format!(" ({}); no consistent state survives: only --recovery-mode salvage opens it", losses.join("; "))
                    }
                )));
            }
        }
        if let Some(fd) = frontier_epoch {
            if durable < fd && losses.is_empty() {
                // The per-stream checks imply this; kept as a last guard.
                return Err(Error::Corrupt(format!(
                    "the log reaches durable epoch {durable}, below the epoch {fd} recorded in {}",
                    dir.join(FRONTIER_FILE).display()
                )));
            }
        }
        report.durable_epoch = durable;
        report.frontier_epoch = frontier_epoch;
        report.max_epoch_seen = max_seen;
        report.segments = scan.streams.iter().map(|s| s.segments.len()).sum();
        report.log_bytes = scan.valid_bytes();
        report
            .warnings
            .extend(scan.torn.iter().map(|t| t.2.clone()));
        report.checkpoint = meta.checkpoint.clone();
        if !losses.is_empty() {
            let mut files: Vec<String> = scan
                .cuts
                .iter()
                .map(|c| c.0.clone())
                .chain(scan.set_aside.iter().cloned())
                .map(|p| p.display().to_string())
                .collect();
            files.sort();
            report.loss = Some(Loss {
                acknowledged_epochs: frontier_epoch
                    .filter(|&fd| durable < fd)
                    .map(|fd| (durable, fd)),
                txns_set_aside: scan.txns_set_aside,
                details: losses,
                files,
                kept_in: None,
                consistent: !salvage,
            });
        }
        // Epochs past what a TID holds come only from damage that passed
        // a checksum (the frontier, the control file, the checkpoint).
        let top = durable
            .max(max_seen)
            .max(meta.checkpoint.as_ref().map_or(0, |c| c.1));
        if top > crate::storage::tid::MAX_EPOCH {
            return Err(Error::Corrupt(format!(
                "epoch {top} out of range (recorded in {}, {} or the checkpoint; a TID's epoch field ends at {})",
                dir.join(FRONTIER_FILE).display(),
                dir.join(META_FILE).display(),
                crate::storage::tid::MAX_EPOCH
            )));
        }
        // The next run needs numbers past everything found: refused (before
        // any change) when none are left.
        let exhausted = |what: String| {
            Err(Error::Corrupt(format!(
                "{}: {what} exhausted: no run can follow",
                dir.display()
            )))
        };
        // The run starts above top (at the next snapshot boundary) and
        // needs epochs after it to make anything durable.
        if epochs.first_epoch_after(top) >= crate::storage::tid::MAX_EPOCH {
            return exhausted(format!("epochs (at {top})"));
        }
        for (l, s) in scan.starts(opts.loggers).iter().enumerate() {
            if s.segno > crate::log::segment::MAX_SEGNO || s.seq > crate::log::format::MAX_SEQ {
                return exhausted(format!("logger {l}'s segment or block sequence numbers"));
            }
        }
        if frontier
            .as_ref()
            .is_some_and(|f| f.gen >= crate::log::frontier::MAX_GEN)
        {
            return exhausted(format!("{FRONTIER_FILE} generation numbers"));
        }
        if meta.gen >= crate::log::meta::MAX_GEN {
            return exhausted(format!("{META_FILE} generation numbers"));
        }
        epochs.start_after(top);
        crate::log::recovery::replay(
            &scan,
            ckpt_bytes
                .as_ref()
                .map(|(p, b, c)| (p.as_path(), &b[..], *c)),
            &meta,
            durable,
            &tables,
            layout,
            epochs,
            &mut report,
        )?;
        let stale =
            crate::log::checkpoint::stale(dir, meta.checkpoint.as_ref().map(|c| c.0.as_str()));
        if opts.read_only {
            // Say what an ordinary open would change.
            for (p, len, _) in &scan.torn {
                report
                    .changes
                    .push(format!("would cut {} to {len} bytes", p.display()));
            }
            for p in stale.iter().chain(&scan.leftovers).chain(&scan.empties) {
                report.changes.push(format!("would remove {}", p.display()));
            }
            report.seconds = started.elapsed().as_secs_f64();
            return Ok((meta, tables, None, report));
        }
        // Phase 2: change the directory.
        if let Some(loss) = &mut report.loss {
            let kept = keep_copies(dir, mode, &scan, ckpt_bytes.as_ref().map(|c| c.0.as_path()))?;
            report.changes.push(format!(
                "kept copies of tessera.meta, tessera.frontier and every log file this recovery cuts or sets aside in {}",
                kept.display()
            ));
            loss.kept_in = Some(kept.clone());
            for p in &scan.set_aside {
                report.changes.push(format!(
                    "set aside {} (moved to {})",
                    p.display(),
                    kept.display()
                ));
            }
            std::fs::write(kept.join("REPORT.txt"), loss_report(dir, &report)).map_err(|e| {
                Error::io(
                    format!("cannot write {}", kept.join("REPORT.txt").display()),
                    e,
                )
            })?;
            crate::log::segment::sync_dir(&kept)
                .map_err(|e| Error::io(format!("cannot sync {}", kept.display()), e))?;
        }
        scan.truncate_torn()?;
        for (p, len, _) in &scan.torn {
            report.changes.push(format!(
                "cut the torn tail of {} at {len} bytes",
                p.display()
            ));
        }
        for (p, len) in &scan.cuts {
            crate::log::segment::truncate_file(p, *len)
                .map_err(|e| Error::io(format!("cannot truncate {}", p.display()), e))?;
            report.changes.push(format!(
                "cut {} at offset {len} (the rest is lost)",
                p.display()
            ));
        }
        for p in stale.iter().chain(&scan.leftovers) {
            if std::fs::remove_file(p).is_ok() {
                report
                    .changes
                    .push(format!("removed leftover {}", p.display()));
            }
        }
        for p in &scan.empties {
            std::fs::remove_file(p)
                .map_err(|e| Error::io(format!("cannot remove {}", p.display()), e))?;
            report.changes.push(format!(
                "removed {}: a newest segment with nothing in it (the next run's segment takes its number)",
                p.display()
            ));
        }
        if max_seen > durable {
            meta.voids.push((durable, max_seen));
            report.changes.push(format!(
                "recorded void epochs ({durable}, {max_seen}] in {META_FILE}: entries of those epochs (never durable{}) are ignored from now on",
                if report.loss.is_some() { ", or given up by this recovery" } else { "" }
            ));
        }
        if frontier.is_none() {
            // No frontier on disk: a first run, or one after a recovery that
            // accepted its loss. `tessera.frontier` must exist before
            // `tessera.meta` records a run, or a crash between the two leaves
            // a directory that says it ran but not how far its log got,
            // which a strict recovery refuses as damage. A first open writes
            // `tessera.meta` (without a run) before the frontier, because a
            // frontier beside no `tessera.meta` is refused too. The frontier
            // carries the generation `tessera.meta` has now, so a crash
            // before the store below leaves the two in agreement.
            if meta.gen == 0 {
                meta.store(dir)?;
            }
            failpoint("before-frontier")?;
            crate::log::frontier::FrontierWriter::create(dir, &scan.frontier(None, meta.gen))?;
            failpoint("before-run")?;
        }
        meta.run = Some((opts.loggers as u32, durable));
        meta.store(dir)?;
        failpoint("before-log")?;
        let log = Log::start(
            dir,
            opts.durability,
            Arc::clone(epochs),
            scan.starts(opts.loggers),
            scan.closed_segments(),
            durable,
            scan.frontier(frontier.as_ref(), meta.gen),
            opts.segment_bytes,
            opts.epoch_interval,
        )?;
        report.seconds = started.elapsed().as_secs_f64();
        Ok((meta, tables, Some(log), report))
    }
}

#[cfg(test)]
mod tests {
    use super::FAIL_AT;
    use crate::{Database, Options};

    fn open(dir: &std::path::Path, fail: Option<&'static str>) -> Result<Database, crate::Error> {
        FAIL_AT.set(fail);
        let r = Database::open(Options::durable(dir));
        FAIL_AT.set(None);
        r
    }

    /// An open that dies at any step of a first or a later run leaves a
    /// directory that the next strict open recovers, with every commit
    /// acknowledged before it. (A crash between `tessera.meta` recording a
    /// run and the frontier's creation once left one it refused.)
    #[test]
    fn an_open_cut_short_at_any_step_leaves_an_openable_directory() {
        for step in ["before-frontier", "before-run", "before-log"] {
            let dir = tempfile::tempdir().unwrap();
            let Err(e) = open(dir.path(), Some(step)) else {
                panic!("{step}: the failpoint did not fire");
            };
            assert!(e.to_string().contains(step), "{e}");
            let db = open(dir.path(), None).unwrap_or_else(|e| panic!("{step}: {e}"));
            let t = db.create_table("t").unwrap();
            db.worker()
                .unwrap()
                .run(|tx| tx.put(t, b"k", b"v"))
                .unwrap();
            drop(db);
            // A later run cut short keeps what the first acknowledged.
            if step == "before-log" {
                assert!(open(dir.path(), Some(step)).is_err());
            }
            let db = open(dir.path(), None).unwrap_or_else(|e| panic!("{step}, reopen: {e}"));
            let t = db.open_table("t").unwrap();
            let v = db
                .worker()
                .unwrap()
                .run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
                .unwrap();
            assert_eq!(v.as_deref(), Some(&b"v"[..]), "{step}");
        }
    }
}

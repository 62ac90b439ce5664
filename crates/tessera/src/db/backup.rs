//! `Database::backup_to`: a consistent, openable copy of a durable
//! database's directory, taken while transactions go on.
//!
//! The copy is the state a crash at one moment would leave, which recovery
//! is built to open:
//! 1. a fresh checkpoint (so the copy's log is short), and everything
//!    committed before the call made durable;
//! 2. under the checkpoint lock (no checkpoint deletes a segment or changes
//!    the catalog's checkpoint while the copy runs) and the catalog's lock:
//!    `tessera.meta` read, then `tessera.frontier` read under the log's
//!    frontier lock (no logger rewrites it meanwhile), so the pair is one
//!    the directory itself held; both are written to the copy after the
//!    two locks are released (a logger waits for the frontier lock to
//!    publish a durable epoch);
//! 3. the checkpoint that `tessera.meta` names, then every log segment. A
//!    segment is only appended to, and what the copied frontier covers was
//!    synced before the frontier was written, so each copied segment holds
//!    at least what the frontier promises; what a logger appends meanwhile
//!    lies past the frontier, where recovery treats it as it treats a
//!    crash's torn tail or void epochs.
//!
//! The files go to a sibling folder `DEST.partial`, are synced, the copy is
//! verified by a read-only open (a strict recovery of it), and only then is
//! the folder renamed to `DEST`: a crash or an error leaves no `DEST` that
//! looks complete. `DEST.partial` holds a marker file until the copy is
//! complete; a later backup removes a leftover `DEST.partial` only if the
//! marker is there, and no destination that is, or holds, the database's
//! own directory is accepted.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::Database;
use crate::error::Error;
use crate::log::frontier::FRONTIER_FILE;
use crate::log::meta::META_FILE;
use crate::log::segment::{parse_segment_name, sync_dir};

/// What [`Database::backup_to`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct BackupInfo {
    /// The backup's directory.
    pub dir: PathBuf,
    /// Files copied (the control file, the frontier, the checkpoint, the
    /// log segments).
    pub files: usize,
    /// Bytes copied.
    pub bytes: u64,
    /// The epoch of the checkpoint the backup starts from.
    pub checkpoint_epoch: u64,
    /// The durable epoch the backup recovers to: every transaction of this
    /// epoch or an earlier one is in it (every commit acknowledged before
    /// the call, at least).
    pub durable_epoch: u64,
    /// Rows the verifying open recovered.
    pub rows: u64,
    /// Wall-clock seconds, the checkpoint and the verification included.
    pub seconds: f64,
}

fn io(what: &str, p: &Path, e: std::io::Error) -> Error {
    Error::io(format!("backup: cannot {what} {}", p.display()), e)
}

/// The file that marks `DEST.partial` as this code's unfinished work (so
/// a later backup may remove it); removed before the verification.
const PARTIAL_MARKER: &str = "BACKUP-IN-PROGRESS";

/// Write `bytes` to the new file `to` and sync it.
fn write_synced(to: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let mut f = std::fs::File::create(to).map_err(|e| io("create", to, e))?;
    f.write_all(bytes).map_err(|e| io("write", to, e))?;
    f.sync_all().map_err(|e| io("sync", to, e))
}

/// Copy `from` to `to` and sync it; returns the bytes copied.
fn copy_synced(from: &Path, to: &Path) -> Result<u64, Error> {
    let n = std::fs::copy(from, to).map_err(|e| io("copy", from, e))?;
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(|e| io("sync", to, e))?;
    Ok(n)
}

impl Database {
    /// Write a consistent copy of this durable database to the new
    /// directory `dest` while transactions go on, and verify it by opening
    /// it read-only. The copy holds every transaction committed before the
    /// call (asynchronous commits included: they are made durable first)
    /// and opens like the original after a crash at one moment: with
    /// [`Database::open`] and the same protocol family, or read-only.
    ///
    /// It takes a fresh checkpoint and copies it with the log after it
    /// (see the module notes in the source for why the copy is
    /// consistent). Background checkpoints wait while it copies. `dest`
    /// must not exist, or be an empty directory; the copy is written
    /// beside it as `DEST.partial` and renamed into place once verified.
    /// The verification recovers the copy into memory, so for a moment
    /// the process holds the database twice. A deterministic protocol's
    /// directory (an input log) is not supported yet: back it up while it
    /// is closed.
    ///
    /// ```
    /// # use tessera::{Database, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (src, dest) = (dir.path().join("db"), dir.path().join("backup"));
    /// let db = Database::open(Options::durable(&src))?;
    /// let t = db.create_table("t")?;
    /// db.worker()?.run(|tx| tx.put(t, b"k", b"v"))?;
    /// let info = db.backup_to(&dest)?;
    /// assert!(info.rows >= 1);
    /// let copy = Database::open(Options::durable(&dest))?;
    /// let t = copy.table("t")?;
    /// let v = copy.worker()?.run(|tx| Ok(tx.get(t, b"k")?.map(|v| v.to_vec())))?;
    /// assert_eq!(v.as_deref(), Some(&b"v"[..]));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn backup_to(&self, dest: impl AsRef<Path>) -> Result<BackupInfo, Error> {
        let started = Instant::now();
        let dest = dest.as_ref();
        let inner = &self.inner;
        if inner.det.is_some() {
            return Err(Error::InvalidArgument(format!(
                "backup of a running {} database is not supported yet: close it and copy \
                 its directory",
                inner.opts.protocol
            )));
        }
        if inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        let (Some(log), Some(src)) = (&inner.log, &inner.opts.data_dir) else {
            return Err(Error::InvalidArgument(
                "backup needs a durable database (Options::durable); an in-memory one has \
                 nothing on disk to copy"
                    .into(),
            ));
        };
        let partial = partial_dir(dest)?;
        check_dest(dest)?;
        for p in [dest, &partial] {
            check_not_source(p, src)?;
        }
        if partial.exists() {
            // A backup that crashed or failed before its rename; only a
            // folder this code made (it holds the marker) is removed.
            if !partial.join(PARTIAL_MARKER).is_file() {
                return Err(Error::InvalidArgument(format!(
                    "{} exists and is not an unfinished backup (no {PARTIAL_MARKER} in it): \
                     move it away",
                    partial.display()
                )));
            }
            std::fs::remove_dir_all(&partial).map_err(|e| io("remove", &partial, e))?;
        }
        std::fs::create_dir_all(&partial).map_err(|e| io("create", &partial, e))?;
        std::fs::write(partial.join(PARTIAL_MARKER), b"")
            .map_err(|e| io("create", &partial.join(PARTIAL_MARKER), e))?;
        let copied = (|| {
            // 1. A fresh checkpoint; everything committed so far durable.
            self.checkpoint()?;
            self.flush()?;
            // 2. and 3., with no checkpoint running.
            let _one = inner.checkpoint_lock.lock();
            let (mut files, mut bytes) = (0usize, 0u64);
            // Read under the locks, written after them: a logger waits for
            // the frontier lock to publish a durable epoch.
            let read = |name: &str| {
                std::fs::read(src.join(name)).map_err(|e| io("read", &src.join(name), e))
            };
            let (meta, frontier, checkpoint) = {
                let m = inner.meta.lock();
                let meta = read(META_FILE)?;
                let frontier = log.with_frontier_quiet(|| read(FRONTIER_FILE))?;
                (meta, frontier, m.checkpoint.clone())
            };
            for (name, b) in [(META_FILE, &meta), (FRONTIER_FILE, &frontier)] {
                write_synced(&partial.join(name), b)?;
                bytes += b.len() as u64;
                files += 1;
            }
            let checkpoint_epoch = match &checkpoint {
                Some((name, c)) => {
                    bytes += copy_synced(&src.join(name), &partial.join(name))?;
                    files += 1;
                    *c
                }
                None => 0,
            };
            let mut segments: Vec<(u16, u64, String)> = std::fs::read_dir(src)
                .map_err(|e| io("list", src, e))?
                .filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    let (l, s) = parse_segment_name(&name)?;
                    Some((l, s, name))
                })
                .collect();
            segments.sort();
            for (_, _, name) in &segments {
                bytes += copy_synced(&src.join(name), &partial.join(name))?;
                files += 1;
            }
            std::fs::remove_file(partial.join(PARTIAL_MARKER))
                .map_err(|e| io("remove", &partial.join(PARTIAL_MARKER), e))?;
            sync_dir(&partial).map_err(|e| io("sync", &partial, e))?;
            Ok::<_, Error>((files, bytes, checkpoint_epoch))
        })();
        let (files, bytes, checkpoint_epoch) = match copied {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&partial);
                return Err(e);
            }
        };
        // Verify: a strict recovery of the copy, changing nothing in it.
        let verified = Database::open(
            super::Options::durable(&partial)
                .protocol(inner.opts.protocol)
                .loggers(inner.opts.loggers)
                .read_only(true),
        )
        .and_then(|copy| {
            let r = copy.recovery_report().cloned();
            copy.close()?;
            r.ok_or_else(|| Error::Corrupt("backup: the copy recovered without a report".into()))
        });
        let report = match verified {
            Ok(r) => r,
            Err(e) => {
                return Err(Error::Corrupt(format!(
                    "backup: the copy in {} does not open ({e}); it was kept for inspection",
                    partial.display()
                )))
            }
        };
        if dest.exists() {
            // An empty directory (checked above): rename replaces it.
            std::fs::remove_dir(dest).map_err(|e| io("replace the empty directory", dest, e))?;
        }
        std::fs::rename(&partial, dest).map_err(|e| io("rename into place", dest, e))?;
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent).map_err(|e| io("sync", parent, e))?;
        }
        Ok(BackupInfo {
            dir: dest.to_path_buf(),
            files,
            bytes,
            checkpoint_epoch,
            durable_epoch: report.durable_epoch,
            rows: report.records,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

/// `DEST.partial`, beside `dest`.
fn partial_dir(dest: &Path) -> Result<PathBuf, Error> {
    let name = dest.file_name().ok_or_else(|| {
        Error::InvalidArgument(format!(
            "backup destination {} names no directory",
            dest.display()
        ))
    })?;
    let mut n = name.to_os_string();
    n.push(".partial");
    Ok(dest.with_file_name(n))
}

/// `dest` must be new, or an empty directory.
fn check_dest(dest: &Path) -> Result<(), Error> {
    match std::fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::InvalidArgument(format!(
                    "backup destination {} exists and is not empty",
                    dest.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => {
            return Err(Error::InvalidArgument(format!(
                "backup destination {} exists and is not a directory",
                dest.display()
            )))
        }
        Err(e) => return Err(io("read", dest, e)),
    }
    Ok(())
}

/// `dest` (which a backup may remove or replace) must not be, or hold,
/// the database's directory `src`.
fn check_not_source(dest: &Path, src: &Path) -> Result<(), Error> {
    // The source inside the destination (or the same folder): refused, so
    // that nothing this code removes or replaces can be the database.
    if let (Ok(d), Ok(s)) = (dest.canonicalize(), src.canonicalize()) {
        if s.starts_with(&d) {
            return Err(Error::InvalidArgument(format!(
                "backup destination {} is, or holds, the database's own directory",
                dest.display()
            )));
        }
    }
    Ok(())
}

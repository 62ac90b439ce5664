//! Checkpoints: a fuzzy scan of every table, taken in the background while
//! transactions run, made exact by the log (in the spirit of ERMIA's fuzzy
//! checkpoint plus log, section 3.7, and Silo's checkpointer, 4.10).
//!
//! 1. Pick the checkpoint epoch `C` = the current global epoch, then wait
//!    until every active worker has reflected an epoch >= `C` (the epochs'
//!    reclamation bound). From then on no transaction of an epoch below `C`
//!    is still running: each has installed all its writes.
//! 2. Scan every table in key order, re-pinning every few hundred keys so
//!    the epoch keeps moving, and write the newest committed value of each
//!    key. The scan is not a snapshot: a transaction of epoch >= `C` may
//!    or may not be reflected. Every such transaction is in the log.
//! 3. Write the rows as checksummed blocks (the log's block format) to
//!    `ckpt-<C>.tckp.tmp`, end with an epoch mark of `C` (a file without it
//!    is incomplete), fsync, rename to `ckpt-<C>.tckp`, fsync the
//!    directory.
//! 4. Wait until the durable epoch covers the end of the scan (so the file
//!    holds only durable values), then record the checkpoint in
//!    `tessera.meta` (atomically) with that epoch `E` and the file's size:
//!    that is the commit point. Recovery refuses the checkpoint if the log
//!    does not reach `E` or the size differs. A crash before
//!    it leaves the previous checkpoint in force.
//! 5. Delete the previous checkpoint and every log segment whose entries
//!    all have epochs below `C` (after `tessera.frontier` records each
//!    stream's new oldest segment).
//!
//! Recovery loads the rows as if written at epoch `C - 1` after every log
//! entry of that epoch, and replays log entries of epochs >= `C` over them
//! (newest per record wins). Entries below `C` are older than the rows:
//! their transactions had finished when the scan began.

use std::io::Write;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::catalog::Table;
use crate::epoch::Epochs;
use crate::error::Error;
use crate::index::OrderedIndex;
use crate::storage::{Record, RecordLayout};

use super::meta::Meta;
use super::Log;

use super::format::{self, BlockKind, Damage, WriteOp};
use super::segment;

/// What one checkpoint did.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointInfo {
    /// The checkpoint epoch `C`: log entries below it are covered.
    pub epoch: u64,
    /// The checkpoint file.
    pub file: PathBuf,
    /// Rows written.
    pub records: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Wall-clock seconds, waits included.
    pub seconds: f64,
    /// Log segments deleted because the checkpoint covers them.
    pub segments_deleted: usize,
}

/// File name of the checkpoint of epoch `c`.
pub fn checkpoint_name(c: u64) -> String {
    format!("ckpt-{c:010}.tckp")
}

/// Keys scanned per pin.
const CHUNK: usize = 256;
/// Target payload bytes per block.
const BLOCK_BYTES: usize = 256 << 10;

/// What a checkpoint reads and updates: the database's pieces, handed in
/// by the database (the log imports neither the database nor a protocol).
pub(crate) struct Source<'a> {
    pub log: &'a Log,
    pub dir: &'a Path,
    pub epochs: &'a Arc<Epochs>,
    pub tables: Vec<Arc<Table>>,
    /// The protocol's layout hooks: the newest committed value of a record.
    pub layout: &'a dyn RecordLayout,
    /// The control file, which names the checkpoint.
    pub meta: &'a Mutex<Meta>,
}

/// Take a checkpoint now (see the module docs). The caller holds the
/// database's checkpoint lock (one checkpoint at a time).
pub(crate) fn take(src: Source<'_>) -> Result<CheckpointInfo, Error> {
    let started = Instant::now();
    let (log, dir) = (src.log, src.dir.to_path_buf());
    let epochs = src.epochs;
    let local = epochs.register_internal().ok_or(Error::NoWorkerSlot {
        capacity: epochs.capacity(),
    })?;
    // 1. C, and no transaction of an epoch below C still running.
    let c = epochs.global();
    while epochs.reclaim_bound() < c {
        if let Some(e) = log.failure() {
            return Err(e);
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    // 2 and 3.
    let name = checkpoint_name(c);
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(&name);
    let io = |what: &str, p: &Path, e: std::io::Error| {
        Error::io(format!("checkpoint: cannot {what} {}", p.display()), e)
    };
    let mut file = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(&tmp).map_err(|e| io("create", &tmp, e))?,
    );
    let tables = src.tables;
    let mut payload = Vec::with_capacity(BLOCK_BYTES + (64 << 10));
    let mut block = Vec::with_capacity(BLOCK_BYTES + (64 << 10));
    let mut seq = 0u64;
    let mut records = 0u64;
    let mut bytes = 0u64;
    let mut entry = format::begin_txn(&mut payload, c, 0);
    let mut in_entry = 0u32;
    let mut val = Vec::new();
    let mut flush = |payload: &mut Vec<u8>,
                     file: &mut std::io::BufWriter<std::fs::File>,
                     seq: &mut u64,
                     bytes: &mut u64|
     -> Result<(), Error> {
        block.clear();
        format::write_block(&mut block, BlockKind::Txns, 0, *seq, c, payload);
        file.write_all(&block).map_err(|e| io("write", &tmp, e))?;
        *seq += 1;
        *bytes += block.len() as u64;
        payload.clear();
        Ok(())
    };
    for t in &tables {
        let mut from: Option<Vec<u8>> = None;
        loop {
            let g = local.pin();
            let mut last: Option<Vec<u8>> = None;
            let mut n = 0usize;
            let lo = match &from {
                Some(k) => Bound::Excluded(&k[..]),
                None => Bound::Unbounded,
            };
            t.index.scan(
                lo,
                Bound::Unbounded,
                false,
                &g,
                crate::index::Unobserved,
                |k, v| {
                    // SAFETY: reached through the index while pinned.
                    let rec = unsafe { &*(v as *const Record) };
                    val.clear();
                    // The protocol's layout hook reads the newest committed value.
                    let live = src.layout.read_committed(rec, &mut val);
                    if live {
                        format::push_write(&mut payload, t.id.0, WriteOp::Put, k, &val);
                        in_entry += 1;
                        records += 1;
                    }
                    n += 1;
                    if n >= CHUNK {
                        last = Some(k.to_vec());
                        return false;
                    }
                    true
                },
            );
            drop(g);
            if payload.len() >= BLOCK_BYTES {
                format::finish_txn(&mut payload, entry, in_entry);
                flush(&mut payload, &mut file, &mut seq, &mut bytes)?;
                entry = format::begin_txn(&mut payload, c, 0);
                in_entry = 0;
            }
            match last {
                Some(k) => from = Some(k),
                None => break,
            }
        }
    }
    format::finish_txn(&mut payload, entry, in_entry);
    flush(&mut payload, &mut file, &mut seq, &mut bytes)?;
    block.clear();
    format::write_block(&mut block, BlockKind::EpochMark, 0, seq, c, &[]);
    file.write_all(&block).map_err(|e| io("write", &tmp, e))?;
    bytes += block.len() as u64;
    let file = file
        .into_inner()
        .map_err(|e| io("flush", &tmp, e.into_error()))?;
    file.sync_all().map_err(|e| io("sync", &tmp, e))?;
    drop(file);
    drop(local);
    std::fs::rename(&tmp, &path).map_err(|e| io("rename into", &path, e))?;
    segment::sync_dir(&dir).map_err(|e| io("sync directory", &dir, e))?;
    // 4. Only durable values in the file, then the commit point.
    let end = epochs.global();
    log.wait_durable(end)?;
    // The log must reach `end` for this file to be exact (rows of
    // transactions up to `end` may be in it): recorded beside it, so a
    // recovery whose log ends earlier refuses instead of loading it.
    let old = {
        let mut m = src.meta.lock();
        let old = m.checkpoint.replace((name.clone(), c));
        let old_needs = m.checkpoint_needs.replace((end, bytes));
        if let Err(e) = m.store(&dir) {
            m.checkpoint = old;
            m.checkpoint_needs = old_needs;
            return Err(e);
        }
        log.note_meta_gen(m.gen);
        old
    };
    // 5. What the new checkpoint covers.
    if let Some((f, _)) = old {
        if f != name {
            let _ = std::fs::remove_file(dir.join(f));
        }
    }
    let deleted = log.delete_segments_below(c)?;
    Ok(CheckpointInfo {
        epoch: c,
        file: path,
        records,
        bytes,
        seconds: started.elapsed().as_secs_f64(),
        segments_deleted: deleted,
    })
}

/// Read and check the checkpoint `name` of epoch `c` in `dir`: every block
/// valid, ending with the epoch mark of `c`. Any damage is an error naming
/// the file and offset (a checkpoint has no torn tail: it is renamed into
/// place only once complete and synced).
pub fn read(dir: &Path, name: &str, c: u64) -> Result<Vec<u8>, Error> {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            // tessera.meta names it: a missing checkpoint is damage.
            Error::Corrupt(format!(
                "checkpoint {} is missing ({META} names it as the checkpoint to recover from)",
                path.display(),
                META = super::meta::META_FILE
            ))
        } else {
            Error::io(format!("cannot read checkpoint {}", path.display()), e)
        }
    })?;
    let mut complete = false;
    for b in format::BlockReader::new(&bytes) {
        match b {
            Ok(b) => {
                if complete {
                    return Err(Error::Corrupt(format!(
                        "checkpoint {} offset {}: data after the closing epoch mark",
                        path.display(),
                        b.offset
                    )));
                }
                if b.header.kind == BlockKind::Input {
                    return Err(Error::Corrupt(format!(
                        "checkpoint {} offset {}: an input-log block in a checkpoint",
                        path.display(),
                        b.offset
                    )));
                }
                if b.header.kind == BlockKind::EpochMark {
                    if b.header.epoch != c {
                        return Err(Error::Corrupt(format!(
                            "checkpoint {} offset {}: closing mark of epoch {} but tessera.meta says {c}",
                            path.display(),
                            b.offset,
                            b.header.epoch
                        )));
                    }
                    complete = true;
                }
            }
            Err(Damage::NewerVersion { offset, version }) => {
                return Err(Error::NewerFormat(format!(
                    "checkpoint {} offset {offset}: block of format version {version}; this build reads up to {}",
                    path.display(),
                    format::FORMAT_VERSION
                )))
            }
            Err(Damage::Corrupt { offset, reason }) => {
                return Err(Error::Corrupt(format!(
                    "checkpoint {} offset {offset}: damaged block: {reason}",
                    path.display(),
                )))
            }
            Err(Damage::TornTail { offset, reason }) => {
                return Err(Error::Corrupt(format!(
                    "checkpoint {} offset {offset}: truncated: {reason}",
                    path.display(),
                )))
            }
        }
    }
    if !complete {
        return Err(Error::Corrupt(format!(
            "checkpoint {} has no closing epoch mark (incomplete)",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Leftovers of checkpoints that never became the current one (a
/// `.tckp.tmp` of an unfinished checkpoint, an older checkpoint whose
/// deletion did not finish): removed at open.
pub(crate) fn stale(dir: &Path, current: Option<&str>) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v = Vec::new();
    for e in rd.flatten() {
        let n = e.file_name();
        let Some(n) = n.to_str() else { continue };
        let is_ckpt = n.starts_with("ckpt-") && (n.ends_with(".tckp") || n.ends_with(".tckp.tmp"));
        if is_ckpt && Some(n) != current && e.file_type().is_ok_and(|t| t.is_file()) {
            v.push(e.path());
        }
    }
    v.sort();
    v
}

//! Checkpoints of a deterministic database: the state as of a batch
//! boundary, transactionally consistent (the thesis's recovery: a
//! consistent checkpoint at a log position, then deterministic replay of
//! the input log after it; digest, checklist 6.1).
//!
//! The file is the redo checkpoint's format (`log::checkpoint`): the log's
//! checksummed blocks holding `Txns` entries of `Put` writes, ended by an
//! `EpochMark`, written to `ckpt-<C>.tckp.tmp`, synced and renamed into
//! place. Here `C` is the number of the first batch the checkpoint does
//! *not* cover: the state is the one after batches `< C`, and replay
//! starts at batch `C`. Every entry's stamp is the timestamp the first
//! request of batch `C` gets (where the sequencer continues). The newest
//! complete `ckpt-*.tckp` is the checkpoint; a `.tmp` is an unfinished one.
//!
//! `tessera.det` marks a deterministic data directory: the format, the
//! protocol that writes it and the table names, in id order (checked at
//! every start, so that a checkpoint is never loaded into tables it was
//! not taken from, and a log is replayed by the protocol that wrote it:
//! both are deterministic, but they refuse different requests).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::log::checkpoint::{checkpoint_name, read as read_checkpoint};
use crate::log::format::{self, BlockKind, WriteOp};
use crate::log::segment;

/// The marker file of a deterministic data directory.
pub const DET_FILE: &str = "tessera.det";

/// Receives one live row: table, key, value.
pub type EmitRow<'a> = dyn FnMut(u32, &[u8], &[u8]) + 'a;

/// Payload bytes per checkpoint block.
const BLOCK_BYTES: usize = 1 << 20;

/// A checkpoint read back.
#[derive(Debug, Default)]
pub struct DetCheckpoint {
    /// The first batch it does not cover.
    pub next_batch: u64,
    /// The first timestamp it does not cover.
    pub next_ts: u64,
    /// `(table, key, value)` of every live row.
    pub rows: Vec<(u32, Vec<u8>, Vec<u8>)>,
    /// The file.
    pub file: PathBuf,
}

/// Write `tessera.det` (the protocol, the tables in id order) if it is
/// missing; otherwise check that it names the same protocol and tables.
pub fn mark_dir(dir: &Path, tables: &[String], protocol: &str) -> Result<(), Error> {
    let path = dir.join(DET_FILE);
    match std::fs::read_to_string(&path) {
        Ok(s) => {
            let want = marker(tables, protocol);
            if s != want {
                let found = parse_marker(&path, &s)?;
                return Err(Error::InvalidArgument(if found.0 != protocol {
                    format!(
                        "{} was written by --cc {}: open it with that protocol, not {protocol}",
                        path.display(),
                        found.0
                    )
                } else {
                    format!(
                        "{} describes other tables than this database's ({}): not its data directory",
                        path.display(),
                        tables.join(", ")
                    )
                }));
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
            let tmp = dir.join(format!("{DET_FILE}.tmp"));
            let io = |e| Error::io(format!("cannot write {}", path.display()), e);
            let mut f = std::fs::File::create(&tmp).map_err(io)?;
            f.write_all(marker(tables, protocol).as_bytes())
                .map_err(io)?;
            f.sync_all().map_err(io)?;
            std::fs::rename(&tmp, &path).map_err(io)?;
            segment::sync_dir(dir).map_err(io)
        }
        Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
    }
}

/// The protocol and the table names `tessera.det` of `dir` lists (`None`:
/// not a deterministic data directory).
pub fn dir_tables(dir: &Path) -> Result<Option<(String, Vec<String>)>, Error> {
    let path = dir.join(DET_FILE);
    let s = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
    };
    parse_marker(&path, &s).map(Some)
}

fn parse_marker(path: &Path, s: &str) -> Result<(String, Vec<String>), Error> {
    let mut lines = s.lines();
    let bad = || {
        Error::Corrupt(format!(
            "{}: not a deterministic data directory marker of this format",
            path.display()
        ))
    };
    if lines.next() != Some("tessera deterministic 1") {
        return Err(bad());
    }
    let protocol = lines
        .next()
        .and_then(|l| l.strip_prefix("protocol "))
        .ok_or_else(bad)?
        .to_string();
    Ok((
        protocol,
        lines
            .filter_map(|l| l.strip_prefix("table "))
            .map(str::to_string)
            .collect(),
    ))
}

fn marker(tables: &[String], protocol: &str) -> String {
    let mut s = format!("tessera deterministic 1\nprotocol {protocol}\n");
    for t in tables {
        s.push_str("table ");
        s.push_str(t);
        s.push('\n');
    }
    s
}

/// Write the checkpoint of the state after batches `< next_batch` (whose
/// next timestamp is `next_ts`): `rows` gives every live row, in any
/// order. Synced and renamed into place; older checkpoints are deleted
/// afterwards. Returns the file and its size.
pub fn write(
    dir: &Path,
    next_batch: u64,
    next_ts: u64,
    rows: &mut dyn FnMut(&mut EmitRow<'_>),
) -> Result<(PathBuf, u64), Error> {
    let name = checkpoint_name(next_batch);
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(&name);
    let io = |what: &str, p: &Path, e: std::io::Error| {
        Error::io(format!("checkpoint: cannot {what} {}", p.display()), e)
    };
    let mut file = std::io::BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(&tmp).map_err(|e| io("create", &tmp, e))?,
    );
    let mut payload = Vec::with_capacity(BLOCK_BYTES + (64 << 10));
    let mut block = Vec::new();
    let (mut seq, mut bytes) = (0u64, 0u64);
    let mut failed: Option<std::io::Error> = None;
    let mut entry = format::begin_txn(&mut payload, next_batch, next_ts);
    let mut in_entry = 0u32;
    rows(&mut |t, k, v| {
        if failed.is_some() {
            return;
        }
        format::push_write(&mut payload, t, WriteOp::Put, k, v);
        in_entry += 1;
        if payload.len() >= BLOCK_BYTES {
            format::finish_txn(&mut payload, entry, in_entry);
            block.clear();
            format::write_block(&mut block, BlockKind::Txns, 0, seq, next_batch, &payload);
            if let Err(e) = file.write_all(&block) {
                failed = Some(e);
            }
            seq += 1;
            bytes += block.len() as u64;
            payload.clear();
            entry = format::begin_txn(&mut payload, next_batch, next_ts);
            in_entry = 0;
        }
    });
    if let Some(e) = failed {
        return Err(io("write", &tmp, e));
    }
    format::finish_txn(&mut payload, entry, in_entry);
    block.clear();
    format::write_block(&mut block, BlockKind::Txns, 0, seq, next_batch, &payload);
    format::write_block(
        &mut block,
        BlockKind::EpochMark,
        0,
        seq + 1,
        next_batch,
        &[],
    );
    file.write_all(&block).map_err(|e| io("write", &tmp, e))?;
    bytes += block.len() as u64;
    let file = file
        .into_inner()
        .map_err(|e| io("flush", &tmp, e.into_error()))?;
    file.sync_all().map_err(|e| io("sync", &tmp, e))?;
    drop(file);
    std::fs::rename(&tmp, &path).map_err(|e| io("rename into", &path, e))?;
    segment::sync_dir(dir).map_err(|e| io("sync directory", dir, e))?;
    for (c, p) in list(dir)? {
        if c < next_batch {
            let _ = std::fs::remove_file(p);
        }
    }
    Ok((path, bytes))
}

/// The complete checkpoints of `dir`, oldest first, with the batch each
/// starts the replay at (unfinished `.tmp` files are not listed).
pub fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>, Error> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(format!("cannot list {}", dir.display()), e)),
    };
    let mut v = Vec::new();
    for e in rd.flatten() {
        let n = e.file_name();
        let Some(n) = n.to_str() else { continue };
        if let Some(c) = n
            .strip_prefix("ckpt-")
            .and_then(|r| r.strip_suffix(".tckp"))
            .and_then(|c| c.parse::<u64>().ok())
        {
            v.push((c, e.path()));
        }
    }
    v.sort_unstable();
    Ok(v)
}

/// Remove what an unfinished checkpoint left (`ckpt-*.tckp.tmp`).
pub fn remove_unfinished(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let n = e.file_name();
            if n.to_str()
                .is_some_and(|n| n.starts_with("ckpt-") && n.ends_with(".tckp.tmp"))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Read the newest checkpoint of `dir` (`None`: there is none). Damage is
/// `Error::Corrupt` naming the file: a checkpoint is renamed into place
/// only once complete and synced, so it has no torn tail.
pub fn read_latest(dir: &Path) -> Result<Option<DetCheckpoint>, Error> {
    let Some((c, path)) = list(dir)?.pop() else {
        return Ok(None);
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let bytes = read_checkpoint(dir, &name, c)?;
    let mut out = DetCheckpoint {
        next_batch: c,
        file: path.clone(),
        ..Default::default()
    };
    let mut next_ts = None;
    for b in format::BlockReader::new(&bytes) {
        // `read` validated every block.
        let b = b.map_err(|d| Error::Corrupt(format!("{}: {d}", path.display())))?;
        if b.header.kind != BlockKind::Txns {
            continue;
        }
        for e in format::entries(b.payload) {
            let e = e.map_err(|why| Error::Corrupt(format!("{}: {why}", path.display())))?;
            if e.epoch != c || next_ts.is_some_and(|t| t != e.stamp) {
                return Err(Error::Corrupt(format!(
                    "{}: an entry of batch {} and timestamp {} in the checkpoint of batch {c}",
                    path.display(),
                    e.epoch,
                    e.stamp
                )));
            }
            next_ts = Some(e.stamp);
            for w in e.writes() {
                out.rows.push((w.table, w.key.to_vec(), w.val.to_vec()));
            }
        }
    }
    out.next_ts = next_ts
        .ok_or_else(|| Error::Corrupt(format!("{}: a checkpoint with no entry", path.display())))?;
    Ok(Some(out))
}

/// What recovery of a deterministic directory will load and replay,
/// checked before anything changes (`Bohm`'s start and `tessera inspect`
/// both take it from [`plan_recovery`], so they cannot disagree).
pub struct RecoveryPlan {
    /// The newest checkpoint (`None`: a fresh directory, no input log).
    pub checkpoint: Option<DetCheckpoint>,
    /// The input log as read (its torn tail, if any, is cut by recovery).
    pub log: crate::det::input::InputScan,
    /// Index in `log.batches` of the first batch to replay.
    pub replay_from: usize,
    /// Where the sequencer continues: batch number and timestamp.
    pub next: (u64, u64),
}

impl RecoveryPlan {
    /// The logged batches recovery replays, in order.
    pub fn replay(&self) -> &[crate::det::input::LoggedBatch] {
        &self.log.batches[self.replay_from..]
    }
}

/// Read `dir`'s newest checkpoint and input log and check that they join:
/// an input log needs a checkpoint to replay over, and the batches from
/// the checkpoint's on must follow it and each other with no gap in
/// numbers or timestamps. Changes nothing.
pub fn plan_recovery(dir: &Path) -> Result<RecoveryPlan, Error> {
    let log = crate::det::input::read_input_log(dir)?;
    let checkpoint = read_latest(dir)?;
    let (replay_from, next) = join(dir, &log, checkpoint.as_ref())?;
    Ok(RecoveryPlan {
        checkpoint,
        log,
        replay_from,
        next,
    })
}

/// [`plan_recovery`]'s check, on what was read from `dir`: the index of
/// the first batch to replay, and where the sequencer continues.
pub fn join(
    dir: &Path,
    log: &crate::det::input::InputScan,
    checkpoint: Option<&DetCheckpoint>,
) -> Result<(usize, (u64, u64)), Error> {
    let (mut batch, mut ts) = match checkpoint {
        Some(ck) => (ck.next_batch, ck.next_ts),
        None => {
            if let Some(b) = log.batches.first() {
                return Err(Error::Corrupt(format!(
                    "{}: an input log from batch {} but no checkpoint to replay it over",
                    dir.display(),
                    b.number
                )));
            }
            (0, 1)
        }
    };
    let replay_from = log
        .batches
        .iter()
        .position(|b| b.number >= batch)
        .unwrap_or(log.batches.len());
    for lb in &log.batches[replay_from..] {
        if lb.number != batch || lb.first_ts != ts {
            return Err(Error::Corrupt(format!(
                "{}: the input log continues with batch {} (timestamp {}) after a \
                 checkpoint or batch that ends before batch {batch} (timestamp {ts}): \
                 batches are missing",
                dir.display(),
                lb.number,
                lb.first_ts
            )));
        }
        batch = lb.number + 1;
        ts = lb.first_ts + lb.entries.len() as u64;
    }
    Ok((replay_from, (batch, ts)))
}

/// Delete the input log segments that hold only batches below
/// `next_batch` (a checkpoint covers them), except the newest segment
/// (the sequencer may be writing it). Returns how many were deleted.
pub fn delete_covered_segments(dir: &Path, next_batch: u64) -> Result<usize, Error> {
    let all = segment::list_segments(dir)
        .map_err(|e| Error::io(format!("cannot list the input log in {}", dir.display()), e))?;
    let Some(segs) = all.get(&super::input::INPUT_STREAM) else {
        return Ok(0);
    };
    let mut deleted = 0;
    for (_, path) in segs.iter().take(segs.len().saturating_sub(1)) {
        let bytes = segment::read_segment(path)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        // The last batch of the segment (`Some(None)`: empty, as a start
        // that logged nothing leaves its segment; `None`: damaged).
        let mut last = Some(None);
        for b in format::BlockReader::new(&bytes) {
            match b {
                Ok(b) => last = Some(Some(b.header.epoch)),
                Err(_) => {
                    last = None;
                    break;
                }
            }
        }
        // Only whole, undamaged segments wholly below the checkpoint go
        // (and only in order: a later one stays if an earlier one does).
        match last {
            Some(l) if l.is_none_or(|l| l < next_batch) => {
                std::fs::remove_file(path)
                    .map_err(|e| Error::io(format!("cannot delete {}", path.display()), e))?;
                deleted += 1;
            }
            _ => break,
        }
    }
    if deleted > 0 {
        segment::sync_dir(dir)
            .map_err(|e| Error::io(format!("cannot sync {}", dir.display()), e))?;
    }
    Ok(deleted)
}

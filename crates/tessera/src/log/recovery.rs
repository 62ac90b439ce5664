//! Recovery (Silo section 4.10): read every segment, find the durable epoch
//! `D` from the loggers' epoch marks, and replay, in parallel, exactly the
//! entries with epoch <= `D` that no void range covers; for each record the
//! entry with the largest (epoch, stamp) wins. Anything after `D` is
//! ignored. A torn tail (the last block of a logger's newest segment, only
//! partly written) is reported and cut off; any other damage stops the open
//! with an error that names the file and the offset.
//!
//! Replay order: per record, by (epoch, stamp). Under Silo the stamp is the
//! TID, whose high bits are the epoch (section 4.2); under ERMIA it is the
//! commit stamp, and two writes of one record are ordered the same way by
//! their epochs (the later writer read the epoch after the earlier one
//! committed). Comparing epochs first keeps the order right across runs that
//! used different protocols.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::catalog::Table;
use crate::db::Protocol;
use crate::epoch::Epochs;
use crate::error::Error;
use crate::storage::tid::{make_tid, LATEST};
use crate::storage::Record;

use super::format::{self, BlockKind, Damage, WriteOp};
use super::meta::Meta;
use super::segment;
use super::LoggerStart;

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveryReport {
    /// The durable epoch: every entry at or below it was replayed.
    pub durable_epoch: u64,
    /// The largest epoch in any block (entries above `durable_epoch` are
    /// ignored and voided for later runs).
    pub max_epoch_seen: u64,
    /// Segment files read.
    pub segments: usize,
    /// Bytes of log read.
    pub log_bytes: u64,
    /// Transaction entries replayed.
    pub txns_replayed: u64,
    /// Transaction entries ignored: after the durable epoch or void.
    pub txns_ignored: u64,
    /// Record writes replayed (before picking the newest per record).
    pub writes_replayed: u64,
    /// Live records after recovery.
    pub records: u64,
    /// The checkpoint loaded: (file name, checkpoint epoch).
    pub checkpoint: Option<(String, u64)>,
    /// Warnings (torn tails cut off).
    pub warnings: Vec<String>,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// Of which: reading and checking the files, decoding and routing the
    /// entries, and building the records and indexes.
    pub phase_seconds: [f64; 3],
    /// Threads used.
    pub threads: usize,
}

impl RecoveryReport {
    /// Log bytes replayed per second, in MB/s.
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.log_bytes as f64 / 1e6 / self.seconds
        } else {
            0.0
        }
    }
}

/// One logger's stream as found on disk.
#[derive(Clone, Debug, Default)]
pub struct StreamInfo {
    /// Logger number.
    pub logger: u16,
    /// Segment files, in order: (segno, path, bytes, valid bytes).
    pub segments: Vec<(u64, PathBuf, u64, u64)>,
    /// Blocks read.
    pub blocks: u64,
    /// Sequence number of the last valid block.
    pub last_seq: Option<u64>,
    /// Last epoch mark.
    pub last_mark: Option<u64>,
    /// Largest epoch of any block.
    pub max_epoch: u64,
    /// Transaction entries.
    pub txns: u64,
    /// Largest epoch of any transaction block, per segment (as `segments`).
    pub segment_max_epochs: Vec<u64>,
}

/// The log of a data directory, read and checked (for recovery and
/// `tessera inspect`).
pub struct LogScan {
    /// Per logger.
    pub streams: Vec<StreamInfo>,
    /// Segment bytes, in the order of `files`.
    bytes: Vec<Vec<u8>>,
    /// (logger, segno, path, valid length) per entry of `bytes`.
    files: Vec<(u16, u64, PathBuf, usize)>,
    /// Writes in each file (to size the replay's buffers).
    file_writes: Vec<u64>,
    /// Torn tails found: (path, valid length, message).
    pub torn: Vec<(PathBuf, u64, String)>,
}

/// Cut the newest segment's damaged end at `offset`: record the warning
/// (`what`: "torn tail", "damaged unsynced end") and return the new end of
/// the valid prefix.
fn cut_tail(
    torn: &mut Vec<(PathBuf, u64, String)>,
    path: &Path,
    bytes: &[u8],
    offset: u64,
    what: &str,
    reason: &str,
) -> u64 {
    torn.push((
        path.to_path_buf(),
        offset,
        format!(
            "{}: {what} at offset {offset} ({reason}); {} bytes after it are cut off",
            path.display(),
            bytes.len() as u64 - offset
        ),
    ));
    offset
}

impl LogScan {
    /// Read every segment of `dir` and check it. Damage other than a torn
    /// tail in a logger's newest segment is an error.
    pub fn read(dir: &Path) -> Result<LogScan, Error> {
        let segs = segment::list_segments(dir)
            .map_err(|e| Error::Io(format!("cannot list {}: {e}", dir.display())))?;
        let mut scan = LogScan {
            streams: Vec::new(),
            bytes: Vec::new(),
            files: Vec::new(),
            file_writes: Vec::new(),
            torn: Vec::new(),
        };
        for (logger, files) in segs {
            let mut info = StreamInfo {
                logger,
                ..StreamInfo::default()
            };
            let nfiles = files.len();
            for (k, (segno, path)) in files.into_iter().enumerate() {
                if let Some(&(prev, _, _, _)) = info.segments.last() {
                    if segno != prev + 1 {
                        return Err(Error::Corrupt(format!(
                            "missing log segment {} (logger {logger} has segments {prev} and {segno})",
                            segment::segment_name(logger, prev + 1)
                        )));
                    }
                }
                let bytes = segment::read_segment(&path)
                    .map_err(|e| Error::Io(format!("cannot read {}: {e}", path.display())))?;
                let mut valid = 0u64;
                let mut seg_max = 0u64;
                let mut writes = 0u64;
                for b in format::BlockReader::new(&bytes) {
                    match b {
                        Ok(b) => {
                            if let Some(s) = info.last_seq {
                                if b.header.seq != s + 1 {
                                    return Err(Error::Corrupt(format!(
                                        "{} offset {}: block sequence {} follows {s} (a block or segment is missing)",
                                        path.display(),
                                        b.offset,
                                        b.header.seq
                                    )));
                                }
                            }
                            if b.header.logger != logger {
                                return Err(Error::Corrupt(format!(
                                    "{} offset {}: block of logger {} in logger {logger}'s segment",
                                    path.display(),
                                    b.offset,
                                    b.header.logger
                                )));
                            }
                            info.last_seq = Some(b.header.seq);
                            info.blocks += 1;
                            match b.header.kind {
                                BlockKind::EpochMark => info.last_mark = Some(b.header.epoch),
                                BlockKind::Txns => {
                                    info.max_epoch = info.max_epoch.max(b.header.epoch);
                                    seg_max = seg_max.max(b.header.epoch);
                                    for e in format::entries(b.payload).flatten() {
                                        info.txns += 1;
                                        writes += e.nwrites as u64;
                                    }
                                }
                            }
                            valid = b.offset + (format::HEADER_LEN + b.payload.len()) as u64;
                        }
                        Err(Damage::TornTail { offset, reason }) if k + 1 == nfiles => {
                            valid = cut_tail(&mut scan.torn, &path, &bytes, offset, "torn tail", &reason);
                            break;
                        }
                        Err(Damage::TornTail { offset, reason }) => {
                            return Err(Error::Corrupt(format!(
                                "{} offset {offset}: damaged block in a segment that is not the newest ({reason})",
                                path.display()
                            )))
                        }
                        // Loggers fdatasync once per epoch, when they write a
                        // mark; the bytes of later rounds may reach the disk
                        // out of order after a machine crash. Damage in the
                        // newest segment with at most one mark after it (the
                        // round whose fsync may not have returned) is such an
                        // unsynced end; with two, a completed fsync covered
                        // it, so it is real damage.
                        Err(Damage::Corrupt { offset, reason })
                            if k + 1 == nfiles
                                && format::marks_after(&bytes, offset as usize + 1, 2) < 2 =>
                        {
                            valid = cut_tail(
                                &mut scan.torn,
                                &path,
                                &bytes,
                                offset,
                                "damaged unsynced end",
                                &reason,
                            );
                            break;
                        }
                        Err(Damage::Corrupt { offset, reason }) => {
                            return Err(Error::Corrupt(format!(
                                "{} offset {offset}: {reason}",
                                path.display()
                            )))
                        }
                        Err(Damage::NewerVersion { offset, version }) => {
                            return Err(Error::NewerFormat(format!(
                                "{} offset {offset}: block of format version {version}; this build reads up to {}",
                                path.display(),
                                format::FORMAT_VERSION
                            )))
                        }
                    }
                }
                info.segments
                    .push((segno, path.clone(), bytes.len() as u64, valid));
                info.segment_max_epochs.push(seg_max);
                scan.files.push((logger, segno, path, valid as usize));
                scan.file_writes.push(writes);
                scan.bytes.push(bytes);
            }
            scan.streams.push(info);
        }
        Ok(scan)
    }

    /// Total valid bytes.
    pub fn valid_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.3 as u64).sum()
    }

    /// The durable epoch: the smallest last mark among the loggers of the
    /// last run (`loggers` of them), at least `floor`.
    pub fn durable_epoch(&self, loggers: u32, floor: u64) -> u64 {
        let d = (0..loggers as u16)
            .map(|l| {
                self.streams
                    .iter()
                    .find(|s| s.logger == l)
                    .and_then(|s| s.last_mark)
                    .unwrap_or(0)
            })
            .min()
            .unwrap_or(0);
        d.max(floor)
    }

    /// The largest epoch in any block.
    pub fn max_epoch(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| s.max_epoch.max(s.last_mark.unwrap_or(0)))
            .max()
            .unwrap_or(0)
    }

    /// Where each of `n` loggers of the next run starts: a new segment after
    /// its last one, the block sequence continuing.
    pub(crate) fn starts(&self, n: usize) -> Vec<LoggerStart> {
        (0..n)
            .map(
                |l| match self.streams.iter().find(|s| s.logger as usize == l) {
                    Some(s) => LoggerStart {
                        segno: s.segments.last().map(|x| x.0 + 1).unwrap_or(0),
                        seq: s.last_seq.map(|q| q + 1).unwrap_or(0),
                    },
                    None => LoggerStart { segno: 0, seq: 0 },
                },
            )
            .collect()
    }

    /// Every segment found: all are closed once a new run starts.
    pub(crate) fn closed_segments(&self) -> Vec<super::ClosedSegment> {
        let mut v = Vec::new();
        for s in &self.streams {
            for (i, (segno, path, _, _)) in s.segments.iter().enumerate() {
                v.push(super::ClosedSegment {
                    logger: s.logger,
                    segno: *segno,
                    path: path.clone(),
                    max_epoch: s.segment_max_epochs[i],
                });
            }
        }
        v
    }

    /// Cut the torn tails off their files.
    pub fn truncate_torn(&self) -> Result<(), Error> {
        for (path, len, _) in &self.torn {
            segment::truncate_file(path, *len)
                .map_err(|e| Error::Io(format!("cannot truncate {}: {e}", path.display())))?;
        }
        Ok(())
    }
}

/// A write routed to its shard: (hash of table and key, table, key, write).
type RoutedRow<'a> = (u64, u32, &'a [u8], Winner<'a>);

/// The newest write of one record.
#[derive(Clone, Copy)]
struct Winner<'a> {
    epoch: u64,
    stamp: u64,
    op: WriteOp,
    val: &'a [u8],
}

/// Replay `scan` into `tables` (fresh and empty), keeping entries with epoch
/// <= `durable` outside `meta`'s void ranges.
#[allow(clippy::too_many_arguments)]
pub(crate) fn replay(
    scan: &LogScan,
    checkpoint: Option<(&Path, &[u8], u64)>,
    meta: &Meta,
    durable: u64,
    tables: &[std::sync::Arc<Table>],
    protocol: Protocol,
    epochs: &std::sync::Arc<Epochs>,
    report: &mut RecoveryReport,
) -> Result<(), Error> {
    let started = Instant::now();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 16)
        .min(epochs.capacity());
    let nshards = threads;
    // Phase 1, one file per task: decode and route every write to the
    // shard of its (table, key).
    type Routed<'a> = Vec<Vec<RoutedRow<'a>>>;
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Routed<'_>>> = Mutex::new(Vec::new());
    let counts = Mutex::new((0u64, 0u64, 0u64));
    let err: Mutex<Option<Error>> = Mutex::new(None);
    let ntables = tables.len() as u32;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut mine: Vec<Routed<'_>> = Vec::new();
                let (mut replayed, mut ignored, mut writes) = (0u64, 0u64, 0u64);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    // Per file, buffers sized from the scan's write count:
                    // growing them cost a tenth of recovery in copies.
                    let expect = scan.file_writes.get(i).copied().unwrap_or(0) as usize;
                    let each = expect / nshards + expect / (4 * nshards) + 16;
                    mine.push((0..nshards).map(|_| Vec::with_capacity(each)).collect());
                    let routed = mine.last_mut().expect("just pushed");
                    // Sources: the log segments, then the checkpoint.
                    let (path, bytes, ckpt): (&Path, &[u8], bool) = if i < scan.files.len() {
                        let (_, _, path, valid) = &scan.files[i];
                        (path, &scan.bytes[i][..*valid], false)
                    } else if i == scan.files.len() && checkpoint.is_some() {
                        let (p, b, _) = checkpoint.expect("checked");
                        (p, b, true)
                    } else {
                        break;
                    };
                    for b in format::BlockReader::new(bytes) {
                        let Ok(b) = b else { break };
                        if b.header.kind != BlockKind::Txns {
                            continue;
                        }
                        for e in format::entries(b.payload) {
                            let e = match e {
                                Ok(e) => e,
                                Err(why) => {
                                    *err.lock().unwrap() = Some(Error::Corrupt(format!(
                                        "{} block at offset {}: {why}",
                                        path.display(),
                                        b.offset
                                    )));
                                    return;
                                }
                            };
                            // Checkpoint rows sort after every log entry of
                            // epochs below C and before every entry of C and
                            // later (see the checkpoint module).
                            let (epoch, stamp) = match checkpoint {
                                Some((_, _, c)) if ckpt => (c.saturating_sub(1), u64::MAX),
                                _ => (e.epoch, e.stamp),
                            };
                            if !ckpt {
                                let covered = matches!(checkpoint, Some((_, _, c)) if e.epoch < c);
                                if e.epoch > durable || meta.is_void(e.epoch) || covered {
                                    ignored += 1;
                                    continue;
                                }
                                replayed += 1;
                            }
                            for w in e.writes() {
                                if w.table >= ntables {
                                    *err.lock().unwrap() = Some(Error::Corrupt(format!(
                                        "{} block at offset {}: write to table {} but the catalog has {ntables} tables",
                                        path.display(),
                                        b.offset,
                                        w.table
                                    )));
                                    return;
                                }
                                writes += 1;
                                let h = key_hash(w.table, w.key);
                                routed[(h % nshards as u64) as usize].push((
                                    h,
                                    w.table,
                                    w.key,
                                    Winner {
                                        epoch,
                                        stamp,
                                        op: w.op,
                                        val: w.val,
                                    },
                                ));
                            }
                        }
                    }
                }
                out.lock().unwrap().extend(mine);
                let mut c = counts.lock().unwrap();
                c.0 += replayed;
                c.1 += ignored;
                c.2 += writes;
            });
        }
    });
    if let Some(e) = err.into_inner().unwrap() {
        return Err(e);
    }
    report.phase_seconds[1] = started.elapsed().as_secs_f64();
    let (replayed, ignored, writes) = counts.into_inner().unwrap();
    let mut parts = out.into_inner().unwrap();
    // Regroup by shard.
    let mut shards: Vec<Vec<Vec<RoutedRow<'_>>>> = (0..nshards).map(|_| Vec::new()).collect();
    for p in parts.iter_mut() {
        for (i, v) in p.drain(..).enumerate() {
            shards[i].push(v);
        }
    }
    // Phase 2, one shard per thread: sort the shard's writes by (table,
    // key, epoch, stamp); per record, the newest full write (put or delete)
    // decides, and the patches after it apply over it in order. Live
    // records go into the index in key order.
    let records = AtomicUsize::new(0);
    let err2: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for shard in shards {
            let (records, err2) = (&records, &err2);
            s.spawn(move || {
                let mut rows: Vec<RoutedRow<'_>> =
                    Vec::with_capacity(shard.iter().map(|p| p.len()).sum());
                for part in shard {
                    rows.extend(part);
                }
                // Integer keys first (comparing key bytes for every pair
                // cost 60% of recovery); keys that share a hash are then put
                // in order by a stable sort that keeps their (epoch, stamp)
                // order.
                rows.sort_unstable_by_key(|r| (r.0, r.3.epoch, r.3.stamp));
                let mut i = 0;
                while i < rows.len() {
                    let mut j = i + 1;
                    let mut mixed = false;
                    while j < rows.len() && rows[j].0 == rows[i].0 {
                        mixed |= rows[j].1 != rows[i].1 || rows[j].2 != rows[i].2;
                        j += 1;
                    }
                    if mixed {
                        rows[i..j].sort_by(|a, b| (a.1, a.2).cmp(&(b.1, b.2)));
                    }
                    i = j;
                }
                let local = epochs.register().expect("a free epoch slot for recovery");
                let g = local.pin();
                let mut n = 0;
                let mut val: Vec<u8> = Vec::new();
                let mut i = 0;
                while i < rows.len() {
                    let (t, k) = (rows[i].1, rows[i].2);
                    let mut j = i + 1;
                    while j < rows.len() && rows[j].1 == t && rows[j].2 == k {
                        j += 1;
                    }
                    let group = &rows[i..j];
                    i = j;
                    let Some(full) = group.iter().rposition(|r| r.3.op != WriteOp::Patch) else {
                        *err2.lock().unwrap() = Some(Error::Corrupt(format!(
                            "a patch of key {:?} in table {t} has no earlier full write in the log or checkpoint",
                            String::from_utf8_lossy(k)
                        )));
                        return;
                    };
                    if group[full].3.op == WriteOp::Delete {
                        if group.len() > full + 1 {
                            *err2.lock().unwrap() = Some(Error::Corrupt(format!(
                                "a patch of key {:?} in table {t} follows its delete",
                                String::from_utf8_lossy(k)
                            )));
                            return;
                        }
                        continue;
                    }
                    val.clear();
                    val.extend_from_slice(group[full].3.val);
                    for r in &group[full + 1..] {
                        if let Err(why) = format::apply_patch(&mut val, r.3.val) {
                            *err2.lock().unwrap() = Some(Error::Corrupt(format!(
                                "key {:?} in table {t}: {why}",
                                String::from_utf8_lossy(k)
                            )));
                            return;
                        }
                    }
                    let last = group.last().expect("a group has a row").3.epoch;
                    let rec = load_record(protocol, &val, last);
                    match tables[t as usize].index.insert(k, rec as u64, &g) {
                        crate::index::Insert::Inserted { .. } => n += 1,
                        _ => unreachable!("recovery inserts each key once"),
                    }
                }
                drop(g);
                drop(local);
                records.fetch_add(n, Ordering::Relaxed);
            });
        }
    });
    if let Some(e) = err2.into_inner().unwrap() {
        return Err(e);
    }
    report.txns_replayed += replayed;
    report.txns_ignored += ignored;
    report.writes_replayed += writes;
    report.records += records.load(Ordering::Relaxed) as u64;
    report.threads = threads;
    report.phase_seconds[2] = started.elapsed().as_secs_f64() - report.phase_seconds[1];
    report.seconds += started.elapsed().as_secs_f64();
    Ok(())
}

/// A record holding a recovered value, as the protocol lays records out.
/// Recovered records look like records written long ago: under Silo a TID
/// in their epoch (every new TID is in a later epoch), under ERMIA stamp 1
/// (every new begin stamp is larger).
pub(crate) fn load_record(protocol: Protocol, val: &[u8], epoch: u64) -> *mut Record {
    if protocol.is_multiversion() {
        Record::new_mv(val, 1, protocol == Protocol::Ssn)
    } else {
        Record::new(val, make_tid(epoch, 1) | LATEST, 0)
    }
}

#[cfg(test)]
static COLLIDE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn key_hash(table: u32, key: &[u8]) -> u64 {
    #[cfg(test)]
    if COLLIDE.load(Ordering::Relaxed) {
        // Every key of a table collides: exercises the tie-breaking sort.
        return table as u64;
    }
    // FNV-1a over the key, then a final mix: spreads keys over shards and
    // orders them for the sort.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ table as u64;
    for &b in key {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::format::{begin_txn, finish_txn, push_patch, push_write, write_block};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// Replay a log of puts, patches and deletes of many keys (several
    /// entries per key, in several blocks) and compare with a model, with
    /// and without every key sharing one hash.
    #[test]
    fn replay_folds_patches_in_order_even_when_hashes_collide() {
        for collide in [false, true] {
            COLLIDE.store(collide, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("tessera-replay-{}-{collide}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let mut w = segment::SegmentWriter::create(&dir, 0, 0, 1 << 20).unwrap();
            let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
            let mut out = Vec::new();
            let mut seq = 0;
            let mut stamp = 0;
            for epoch in 1..=6u64 {
                let mut payload = Vec::new();
                for round in 0..40u64 {
                    stamp += 1;
                    let at = begin_txn(&mut payload, epoch, stamp);
                    let key = format!("k{}", (round * 7 + epoch) % 23).into_bytes();
                    let old = model.get(&key).cloned().flatten();
                    let mut new = old.clone().unwrap_or_else(|| vec![b'a'; 40]);
                    new[(stamp % 40) as usize] = b'0' + (stamp % 10) as u8;
                    match (round % 9, &old) {
                        (0, Some(_)) => {
                            push_write(&mut payload, 0, WriteOp::Delete, &key, &[]);
                            model.insert(key, None);
                        }
                        (_, Some(o)) => {
                            push_patch(&mut payload, 0, &key, o, &new);
                            model.insert(key, Some(new));
                        }
                        (_, None) => {
                            push_write(&mut payload, 0, WriteOp::Put, &key, &new);
                            model.insert(key, Some(new));
                        }
                    }
                    finish_txn(&mut payload, at, 1);
                }
                write_block(&mut out, BlockKind::Txns, 0, seq, epoch, &payload);
                seq += 1;
            }
            write_block(&mut out, BlockKind::EpochMark, 0, seq, 6, &[]);
            w.append(&out).unwrap();
            w.sync().unwrap();
            let scan = LogScan::read(&dir).unwrap();
            let epochs = Epochs::new(4, 25);
            let tables = vec![Arc::new(Table::new(
                crate::catalog::TableId(0),
                "t".into(),
                false,
            ))];
            let mut report = RecoveryReport::default();
            let meta = Meta::default();
            replay(
                &scan,
                None,
                &meta,
                6,
                &tables,
                Protocol::Silo,
                &epochs,
                &mut report,
            )
            .unwrap();
            let local = epochs.register().unwrap();
            let g = local.pin();
            let mut got = BTreeMap::new();
            tables[0].index.scan(
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                false,
                &g,
                |_, _| {},
                |k, v| {
                    let mut val = Vec::new();
                    // SAFETY: records of this test's table, pinned.
                    let _ = unsafe { &*(v as *const Record) }.read(&mut val);
                    got.insert(k.to_vec(), val);
                    true
                },
            );
            let want: BTreeMap<Vec<u8>, Vec<u8>> = model
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect();
            assert_eq!(got, want, "collide = {collide}");
            tables[0].free_records(&g);
            drop(g);
            let _ = std::fs::remove_dir_all(&dir);
        }
        COLLIDE.store(false, Ordering::Relaxed);
    }
}

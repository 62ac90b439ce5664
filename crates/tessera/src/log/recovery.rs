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
use crate::epoch::Epochs;
use crate::error::Error;
use crate::index::OrderedIndex;
use crate::storage::RecordLayout;

use super::format::{self, BlockKind, Damage, WriteOp};
use super::frontier::Frontier;
use super::meta::Meta;
use super::segment;
use super::LoggerStart;

/// How much damage recovery accepts (RocksDB's WAL recovery modes, adapted
/// to a log with a recorded durable frontier). Every mode refuses what it
/// does not accept with [`Error::Corrupt`] naming the file, and changes
/// nothing in the directory when it refuses. A mode that accepts a loss
/// reports it ([`RecoveryReport::loss`]) and first keeps a copy of every
/// file it cuts, sets aside or rewrites in a `recovery-*` folder of the
/// data directory, so the decision can be undone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RecoveryMode {
    /// The default: accept only what a crash can leave, a torn or unsynced
    /// tail after the recorded durable frontier (never acknowledged, so
    /// cutting it loses nothing). Everything else is refused.
    #[default]
    Strict,
    /// Also accept a loss at the end of a logger's stream: its newest
    /// segment damaged, truncated or deleted before the frontier. The
    /// stream is cut at the damage; acknowledged commits after it are lost
    /// (reported). Damage further back is refused.
    TolerateTail,
    /// Accept damage anywhere in the log: each stream is cut at its first
    /// damage (a damaged block, a missing segment, a missing stream), and
    /// the database is recovered to the newest epoch every stream still
    /// covers: a consistent, older state. Refused if the checkpoint is
    /// damaged or needs more log than survives.
    PointInTime,
    /// Keep every valid block that can be read, skipping damage, missing
    /// segments and a damaged checkpoint's bad blocks. The result is NOT
    /// guaranteed to be a consistent state; a checkpoint of it is taken at
    /// once, so the damaged files are retired (copies are kept).
    Salvage,
}

impl RecoveryMode {
    /// Every mode, mildest first.
    pub const ALL: [RecoveryMode; 4] = [
        RecoveryMode::Strict,
        RecoveryMode::TolerateTail,
        RecoveryMode::PointInTime,
        RecoveryMode::Salvage,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RecoveryMode::Strict => "strict",
            RecoveryMode::TolerateTail => "tolerate-tail",
            RecoveryMode::PointInTime => "point-in-time",
            RecoveryMode::Salvage => "salvage",
        }
    }

    /// Whether this mode accepts a loss of the given kind.
    fn accepts(self, kind: LossKind) -> bool {
        match kind {
            LossKind::Tail => self != RecoveryMode::Strict,
            LossKind::Middle => matches!(self, RecoveryMode::PointInTime | RecoveryMode::Salvage),
        }
    }

    /// The mode that would accept a loss of `kind`, for messages.
    fn hint(kind: LossKind) -> &'static str {
        match kind {
            LossKind::Tail => {
                "--recovery-mode tolerate-tail (or point-in-time) accepts the loss and reports it"
            }
            LossKind::Middle => {
                "--recovery-mode point-in-time recovers the state before the damage; salvage keeps what can be read"
            }
        }
    }
}

impl std::str::FromStr for RecoveryMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        RecoveryMode::ALL
            .into_iter()
            .find(|m| m.name() == s.to_ascii_lowercase())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "unknown recovery mode '{s}' (known: strict, tolerate-tail, point-in-time, salvage)"
                ))
            })
    }
}

impl std::fmt::Display for RecoveryMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a loss lies in a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LossKind {
    /// In or after the newest segment the frontier records (the end of the
    /// stream).
    Tail,
    /// Further back: an older segment, a gap, the oldest segments.
    Middle,
}

/// What an accepting recovery mode gave up (see [`RecoveryMode`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Loss {
    /// Acknowledged durable epochs that are gone: `(lo, hi]`, from the
    /// durable epoch recovered to the one `tessera.frontier` recorded.
    pub acknowledged_epochs: Option<(u64, u64)>,
    /// Transaction entries found in the parts cut off or set aside.
    pub txns_set_aside: u64,
    /// What was lost and where, one line each (file, offset, why).
    pub details: Vec<String>,
    /// Files cut, set aside or rewritten (their copies are in `kept_in`).
    pub files: Vec<String>,
    /// The folder holding the copies and a report (`None` on a dry run).
    pub kept_in: Option<PathBuf>,
    /// False after salvage: the state may mix epochs.
    pub consistent: bool,
}

/// What recovery found and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveryReport {
    /// The recovery mode used.
    pub mode: RecoveryMode,
    /// A dry run (read-only open): nothing in the directory was changed.
    pub dry_run: bool,
    /// The durable epoch: every entry at or below it was replayed.
    pub durable_epoch: u64,
    /// The durable epoch `tessera.frontier` recorded (every acknowledged
    /// commit is at or below it).
    pub frontier_epoch: Option<u64>,
    /// The largest epoch in any block (entries above `durable_epoch` are
    /// ignored and voided for later runs).
    pub max_epoch_seen: u64,
    /// Segment files read.
    pub segments: usize,
    /// Bytes of log read.
    pub log_bytes: u64,
    /// Transaction entries replayed from the log.
    pub txns_replayed: u64,
    /// Log entries the checkpoint covers (older than its epoch: skipped).
    pub txns_covered: u64,
    /// Log entries ignored: after the durable epoch, or void.
    pub txns_ignored: u64,
    /// Record writes replayed (before picking the newest per record).
    pub writes_replayed: u64,
    /// Rows loaded from the checkpoint.
    pub checkpoint_rows: u64,
    /// Live records after recovery.
    pub records: u64,
    /// The checkpoint loaded: (file name, checkpoint epoch).
    pub checkpoint: Option<(String, u64)>,
    /// Warnings: torn tails cut off (nothing acknowledged in them), a
    /// damaged copy of the frontier, leftovers removed.
    pub warnings: Vec<String>,
    /// Changes made to the directory (empty on a dry run, and when refused).
    pub changes: Vec<String>,
    /// What an accepting mode gave up (`None`: nothing).
    pub loss: Option<Loss>,
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

/// One logger's stream as found on disk (its intact prefix: what recovery
/// uses).
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
    /// The stream was cut by an accepted loss: entries beyond its last mark
    /// may be missing, so the durable epoch is at most that mark.
    pub cut: bool,
}

/// A problem found in one stream: where it is, what it is.
#[derive(Clone, Debug)]
struct Problem {
    /// Index of the file in the stream's list where the intact prefix
    /// ends (the damaged file, or the first file after a gap).
    file: usize,
    /// Offset in that file where the intact prefix ends.
    offset: u64,
    /// The message (names the file).
    msg: String,
}

/// The log of a data directory, read and checked against
/// `tessera.frontier` (for recovery and `tessera inspect`).
pub struct LogScan {
    /// Per logger.
    pub streams: Vec<StreamInfo>,
    /// Segment bytes, in the order of `files`.
    bytes: Vec<Vec<u8>>,
    /// (logger, segno, path, valid length) per entry of `bytes`.
    files: Vec<(u16, u64, PathBuf, usize)>,
    /// Writes in each file (to size the replay's buffers).
    file_writes: Vec<u64>,
    /// Salvage: replay every valid block of each file, past damage.
    salvage: bool,
    /// Tails to cut off (nothing acknowledged in them): (path, valid
    /// length, message).
    pub torn: Vec<(PathBuf, u64, String)>,
    /// Files cut by an accepted loss: (path, new length).
    pub cuts: Vec<(PathBuf, u64)>,
    /// Whole files set aside by an accepted loss.
    pub set_aside: Vec<PathBuf>,
    /// Segments older than the frontier's oldest (a checkpoint covers
    /// them; a deletion that did not finish): removed at open.
    pub leftovers: Vec<PathBuf>,
    /// Newest segments with nothing kept in them: removed at open.
    pub empties: Vec<PathBuf>,
    /// Accepted losses (messages), and entries found in what they cut.
    pub losses: Vec<String>,
    /// Transaction entries in the cut parts.
    pub txns_set_aside: u64,
}

/// Count the transaction entries in the valid blocks of `bytes`.
fn count_entries(bytes: &[u8]) -> u64 {
    format::salvage_blocks(bytes)
        .filter(|b| b.header.kind == BlockKind::Txns)
        .map(|b| format::entries(b.payload).flatten().count() as u64)
        .sum()
}

impl LogScan {
    /// Read every segment of `dir` and check it. With `frontier` (from
    /// `tessera.frontier`), a stream must reach its recorded position and
    /// start at its recorded oldest segment; damage after the position, at
    /// the end of the newest segment, is a tail to cut. What `mode` does not
    /// accept is an error naming the file.
    pub fn read(
        dir: &Path,
        frontier: Option<&Frontier>,
        mode: RecoveryMode,
    ) -> Result<LogScan, Error> {
        let mut segs = segment::list_segments(dir)
            .map_err(|e| Error::io(format!("cannot list {}", dir.display()), e))?;
        let mut scan = LogScan {
            streams: Vec::new(),
            bytes: Vec::new(),
            files: Vec::new(),
            file_writes: Vec::new(),
            salvage: mode == RecoveryMode::Salvage,
            torn: Vec::new(),
            cuts: Vec::new(),
            set_aside: Vec::new(),
            leftovers: Vec::new(),
            empties: Vec::new(),
            losses: Vec::new(),
            txns_set_aside: 0,
        };
        // A stream the frontier records must exist, even if no file of it
        // is left.
        if let Some(f) = frontier {
            for s in &f.streams {
                segs.entry(s.logger).or_default();
            }
        }
        for (logger, mut files) in segs {
            // Segment numbers count up from 0, one per rotation: a name far
            // beyond any real count is not one of ours (and the next run's
            // number after it would overflow).
            if let Some((_, path)) = files.iter().find(|(segno, _)| *segno > segment::MAX_SEGNO) {
                return Err(Error::Corrupt(format!(
                    "{}: segment number out of range (not a segment this engine wrote); move it out of the data directory",
                    path.display()
                )));
            }
            let fr = frontier.and_then(|f| f.stream(logger)).copied();
            if let Some(fr) = &fr {
                // Older than the oldest segment that must exist: covered by
                // the checkpoint, left by a deletion that did not finish.
                files.retain(|(segno, path)| {
                    let keep = *segno >= fr.first_segno;
                    if !keep {
                        scan.leftovers.push(path.clone());
                    }
                    keep
                });
            }
            let mut info = StreamInfo {
                logger,
                ..StreamInfo::default()
            };
            let mut problem: Option<Problem> = None;
            let mut kind = LossKind::Middle;
            let mut datas: Vec<Vec<u8>> = Vec::new();
            // A stream a checkpoint covers whole needs no file at all.
            let fr = fr.filter(|f| f.first_segno <= f.segno);
            if let Some(fr) = &fr {
                let first = files.first().map(|f| f.0);
                if first != Some(fr.first_segno) {
                    let missing = segment::segment_name(logger, fr.first_segno);
                    problem = Some(Problem {
                        file: 0,
                        offset: 0,
                        msg: match first {
                            None => format!(
                                "logger {logger}'s log stream is missing: tessera.frontier records segments {missing} to {} (durable through epoch {}), none is in {}",
                                segment::segment_name(logger, fr.segno),
                                fr.mark,
                                dir.display()
                            ),
                            Some(_) => format!(
                                "missing log segment {missing} (tessera.frontier records it as logger {logger}'s oldest needed segment)"
                            ),
                        },
                    });
                    // Nothing of the stream is left before its newest
                    // recorded segment: the end of the stream is what is
                    // missing.
                    if fr.first_segno == fr.segno && first.is_none_or(|f| f > fr.segno) {
                        kind = LossKind::Tail;
                    }
                }
            }
            let nfiles = files.len();
            'files: for (k, (segno, path)) in files.iter().enumerate() {
                if problem.is_some() && !scan.salvage {
                    break;
                }
                if let Some(&(prev, _, _, _)) = info.segments.last() {
                    if *segno != prev + 1 && problem.is_none() {
                        problem = Some(Problem {
                            file: k,
                            offset: 0,
                            msg: format!(
                                "missing log segment {} (logger {logger} has segments {prev} and {segno})",
                                segment::segment_name(logger, prev + 1)
                            ),
                        });
                        kind = match &fr {
                            Some(fr) if prev + 1 > fr.segno => LossKind::Tail,
                            _ => LossKind::Middle,
                        };
                        if !scan.salvage {
                            break;
                        }
                    }
                }
                let bytes = segment::read_segment(path)
                    .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
                let newest = k + 1 == nfiles;
                // The frontier's position, if it lies in this file.
                let at_or_after_frontier = |off: u64| match &fr {
                    None => true,
                    Some(fr) => *segno > fr.segno || (*segno == fr.segno && off >= fr.offset),
                };
                let mut valid = 0u64;
                let mut seg_max = 0u64;
                let mut writes = 0u64;
                let mut bad: Option<(u64, String, bool)> = None; // offset, reason, torn-like
                let mut seen_block = false;
                for b in format::BlockReader::new(&bytes) {
                    match b {
                        Ok(b) => {
                            // Sequences count blocks from 0: one past
                            // MAX_SEQ is not ours (and the next would
                            // overflow).
                            if b.header.seq > format::MAX_SEQ {
                                bad = Some((
                                    b.offset,
                                    format!("block sequence {} out of range", b.header.seq),
                                    false,
                                ));
                                break;
                            }
                            if b.header.epoch > crate::storage::tid::MAX_EPOCH {
                                bad = Some((
                                    b.offset,
                                    format!(
                                        "block epoch {} out of range (a TID's epoch field ends at {})",
                                        b.header.epoch,
                                        crate::storage::tid::MAX_EPOCH
                                    ),
                                    false,
                                ));
                                break;
                            }
                            if let Some(s) = info.last_seq {
                                if b.header.seq != s + 1 && !scan.salvage {
                                    let why = match info.segments.last() {
                                        // The first block of this file: the
                                        // previous segment lost its end.
                                        Some((_, prev, _, _)) if !seen_block => format!(
                                            "the segment starts at block sequence {} but {} ends at {s}: {} was truncated or emptied (a block or segment is missing)",
                                            b.header.seq,
                                            prev.display(),
                                            prev.display()
                                        ),
                                        _ => format!(
                                            "block sequence {} follows {s} (a block or segment is missing)",
                                            b.header.seq
                                        ),
                                    };
                                    bad = Some((b.offset, why, false));
                                    break;
                                }
                            }
                            if b.header.logger != logger {
                                bad = Some((
                                    b.offset,
                                    format!("block of logger {} in logger {logger}'s segment", b.header.logger),
                                    false,
                                ));
                                break;
                            }
                            info.last_seq = Some(b.header.seq);
                            info.blocks += 1;
                            seen_block = true;
                            match b.header.kind {
                                BlockKind::Input => {
                                    bad = Some((
                                        b.offset,
                                        "an input-log block (a deterministic protocol's log) in a redo log stream".to_string(),
                                        false,
                                    ));
                                    break;
                                }
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
                        Err(Damage::TornTail { offset, reason }) => {
                            bad = Some((offset, reason, true));
                            break;
                        }
                        // Loggers fdatasync once per epoch, when they write a
                        // mark; the bytes of later rounds may reach the disk
                        // out of order after a machine crash. Damage with at
                        // most one mark after it (the round whose fsync may
                        // not have returned) is such an unsynced end; with
                        // two, a completed fsync covered it.
                        Err(Damage::Corrupt { offset, reason }) => {
                            let unsynced = format::marks_after(&bytes, offset as usize + 1, 2) < 2;
                            bad = Some((offset, reason, unsynced));
                            break;
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
                // Every segment but the newest got blocks when it was
                // created (rotation writes into the new file at once): one
                // without any was emptied or zeroed.
                if bad.is_none() && !seen_block && !newest {
                    bad = Some((
                        0,
                        format!(
                            "no valid block in a segment that is not the newest ({} bytes: emptied or zeroed)",
                            bytes.len()
                        ),
                        false,
                    ));
                }
                if let Some((offset, reason, crash_like)) = bad.filter(|_| problem.is_none()) {
                    if newest && crash_like && at_or_after_frontier(offset) {
                        // What a crash leaves: cut it, nothing acknowledged
                        // is in it.
                        let what = if reason.contains("valid block follows") {
                            "damaged unsynced end"
                        } else {
                            "torn tail"
                        };
                        scan.torn.push((
                            path.clone(),
                            offset,
                            format!(
                                "{}: {what} at offset {offset} ({reason}), after the durable frontier; {} bytes after it are cut off",
                                path.display(),
                                bytes.len() as u64 - offset
                            ),
                        ));
                    } else {
                        let before = match &fr {
                            Some(fr) if !at_or_after_frontier(offset) => format!(
                                ", before the durable frontier (tessera.frontier: {} offset {}, epoch {})",
                                segment::segment_name(logger, fr.segno),
                                fr.offset,
                                fr.mark
                            ),
                            _ => String::new(),
                        };
                        problem = Some(Problem {
                            file: k,
                            offset,
                            msg: format!(
                                "{} offset {offset}: {}{reason}{before}",
                                path.display(),
                                if newest {
                                    ""
                                } else {
                                    "damage in a segment that is not the newest: "
                                }
                            ),
                        });
                        kind = match &fr {
                            Some(fr) if *segno >= fr.segno => LossKind::Tail,
                            None if newest => LossKind::Tail,
                            _ => LossKind::Middle,
                        };
                    }
                }
                if let Some(p) = problem.as_ref().filter(|_| !scan.salvage) {
                    // The intact prefix ends inside this file.
                    info.segments
                        .push((*segno, path.clone(), bytes.len() as u64, p.offset));
                    info.segment_max_epochs.push(seg_max);
                    scan.files
                        .push((logger, *segno, path.clone(), p.offset as usize));
                    scan.file_writes.push(writes);
                    datas.push(bytes);
                    break 'files;
                }
                info.segments
                    .push((*segno, path.clone(), bytes.len() as u64, valid));
                info.segment_max_epochs.push(seg_max);
                let len = if scan.salvage {
                    bytes.len()
                } else {
                    valid as usize
                };
                scan.files.push((logger, *segno, path.clone(), len));
                scan.file_writes.push(writes);
                datas.push(bytes);
            }
            // The stream ends before the frontier: newest segments deleted or
            // truncated at a block boundary.
            if problem.is_none() {
                if let Some(fr) = &fr {
                    let end = info.segments.last().map(|s| (s.0, s.3));
                    if end.is_some_and(|(segno, valid)| (segno, valid) < (fr.segno, fr.offset)) {
                        let (segno, valid) = end.expect("checked");
                        problem = Some(Problem {
                            file: nfiles,
                            offset: 0,
                            msg: format!(
                                "logger {logger}'s log stream ends at {} offset {valid}, before the durable frontier in tessera.frontier ({} offset {}, epoch {}): {}",
                                segment::segment_name(logger, segno),
                                segment::segment_name(logger, fr.segno),
                                fr.offset,
                                fr.mark,
                                if segno < fr.segno { "its newest segment(s) are missing" } else { "its newest segment was truncated" }
                            ),
                        });
                        kind = LossKind::Tail;
                    }
                }
            }
            if let Some(p) = problem {
                if !mode.accepts(kind) {
                    return Err(Error::Corrupt(format!(
                        "{}; {}",
                        p.msg,
                        RecoveryMode::hint(kind)
                    )));
                }
                // Accepted: the stream's intact prefix stands; what follows
                // is cut (the damaged file) and set aside (later files).
                // (Salvage replays every file past the damage: its streams
                // are not cut.)
                info.cut = !scan.salvage;
                scan.losses.push(p.msg.clone());
                if !scan.salvage && p.file < nfiles {
                    let (_, path) = &files[p.file];
                    match datas.get(p.file) {
                        // Damage inside the file: its intact prefix stays.
                        Some(data) if p.offset > 0 => {
                            scan.txns_set_aside += count_entries(&data[p.offset as usize..]);
                            scan.cuts.push((path.clone(), p.offset));
                        }
                        // Nothing of the file stands (damage at its first
                        // block, or a file after a gap): it goes aside whole
                        // and leaves the stream, which must end at its last
                        // intact segment: the next run continues right after
                        // it, and a kept empty segment would be damage to the
                        // next recovery.
                        _ => {
                            let data = match datas.get(p.file) {
                                Some(_) => {
                                    info.segments.pop();
                                    info.segment_max_epochs.pop();
                                    scan.files.pop();
                                    scan.file_writes.pop();
                                    datas.pop()
                                }
                                None => segment::read_segment(path).ok(),
                            };
                            scan.txns_set_aside += data.as_deref().map_or(0, count_entries);
                            scan.set_aside.push(path.clone());
                        }
                    }
                    for (_, path) in &files[p.file + 1..] {
                        if let Ok(b) = segment::read_segment(path) {
                            scan.txns_set_aside += count_entries(&b);
                        }
                        scan.set_aside.push(path.clone());
                    }
                }
            }
            // A newest segment with nothing kept (created by a rotation or
            // a start that a crash cut short, or a torn tail from its first
            // block): nothing in it was acknowledged. It goes, so that the
            // next run's segment takes its number; kept, it would be an
            // empty segment that is not the newest, which the next recovery
            // must refuse.
            if !scan.salvage && info.segments.last().is_some_and(|s| s.3 == 0) {
                let (_, path, _, _) = info.segments.pop().expect("checked");
                info.segment_max_epochs.pop();
                scan.files.pop();
                scan.file_writes.pop();
                datas.pop();
                scan.empties.push(path);
            }
            scan.bytes.extend(datas);
            if !info.segments.is_empty() || info.cut {
                scan.streams.push(info);
            }
        }
        Ok(scan)
    }

    /// Total valid bytes.
    pub fn valid_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.3 as u64).sum()
    }

    /// The durable epoch: the smallest last mark among the loggers of the
    /// last run (`loggers` of them), at least `floor`; at most the last mark
    /// of any stream cut by an accepted loss.
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
        let cut = self
            .streams
            .iter()
            .filter(|s| s.cut)
            .map(|s| s.last_mark.unwrap_or(0))
            .min()
            .unwrap_or(u64::MAX);
        d.max(floor).min(cut)
    }

    /// The largest epoch in any block.
    pub fn max_epoch(&self) -> u64 {
        self.streams
            .iter()
            .map(|s| s.max_epoch.max(s.last_mark.unwrap_or(0)))
            .max()
            .unwrap_or(0)
    }

    /// Where each of `n` loggers of the next run starts: a new segment right
    /// after its last intact one, the block sequence continuing. The files
    /// an accepted loss set aside are out of the directory by then (moved
    /// into the recovery folder), so their names may be used again: a
    /// segment number after them would leave a gap that the next recovery
    /// must refuse.
    pub(crate) fn starts(&self, n: usize) -> Vec<LoggerStart> {
        (0..n)
            .map(
                |l| match self.streams.iter().find(|s| s.logger as usize == l) {
                    Some(s) => LoggerStart {
                        segno: s.segments.last().map_or(0, |x| x.0 + 1),
                        seq: s.last_seq.map_or(0, |q| q + 1),
                    },
                    None => LoggerStart { segno: 0, seq: 0 },
                },
            )
            .collect()
    }

    /// The frontier of the streams as recovery leaves them (before the new
    /// run's segments): each stream's end, its last mark and oldest segment.
    pub(crate) fn frontier(&self, old: Option<&Frontier>, meta_gen: u64) -> Frontier {
        let mut f = Frontier {
            gen: old.map_or(0, |f| f.gen),
            durable: 0,
            meta_gen,
            streams: Vec::new(),
        };
        for s in &self.streams {
            let Some(last) = s.segments.last() else {
                continue;
            };
            let first = s.segments.first().expect("non-empty").0;
            let st = f.stream_mut(s.logger);
            st.first_segno = old
                .and_then(|o| o.stream(s.logger))
                .map_or(first, |o| o.first_segno.max(first).min(last.0));
            st.segno = last.0;
            st.offset = last.3;
            st.mark = s.last_mark.unwrap_or(0);
        }
        f
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
                .map_err(|e| Error::io(format!("cannot truncate {}", path.display()), e))?;
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
    layout: &dyn RecordLayout,
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
    let counts = Mutex::new((0u64, 0u64, 0u64, 0u64, 0u64));
    let err: Mutex<Option<Error>> = Mutex::new(None);
    let ntables = tables.len() as u32;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut mine: Vec<Routed<'_>> = Vec::new();
                let (mut replayed, mut ignored, mut writes) = (0u64, 0u64, 0u64);
                let (mut covered, mut rows) = (0u64, 0u64);
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
                    // The log files are cut to their valid prefix (no
                    // damage left to skip) unless salvaging; a salvaged
                    // checkpoint may hold damage too.
                    for b in format::salvage_blocks(bytes) {
                        if b.header.kind != BlockKind::Txns {
                            continue;
                        }
                        for e in format::entries(b.payload) {
                            let e = match e {
                                Ok(e) => e,
                                // Salvage skips the rest of a malformed block.
                                Err(_) if scan.salvage => break,
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
                            if ckpt {
                                rows += e.nwrites as u64;
                            } else {
                                if matches!(checkpoint, Some((_, _, c)) if e.epoch < c) {
                                    covered += 1;
                                    continue;
                                }
                                if e.epoch > durable || meta.is_void(e.epoch) {
                                    ignored += 1;
                                    continue;
                                }
                                replayed += 1;
                            }
                            for w in e.writes() {
                                if w.table >= ntables && scan.salvage {
                                    continue;
                                }
                                if w.table >= ntables {
                                    *err.lock().unwrap() = Some(Error::Corrupt(format!(
                                        "{} block at offset {}: write to table {} but the catalog has {ntables} tables",
                                        path.display(),
                                        b.offset,
                                        w.table
                                    )));
                                    return;
                                }
                                writes += u64::from(!ckpt);
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
                c.3 += covered;
                c.4 += rows;
            });
        }
    });
    if let Some(e) = err.into_inner().unwrap() {
        return Err(e);
    }
    report.phase_seconds[1] = started.elapsed().as_secs_f64();
    let (replayed, ignored, writes, covered, rows) = counts.into_inner().unwrap();
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
    let salvage = scan.salvage;
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
                // Salvage skips a key whose writes do not fold instead of
                // refusing.
                macro_rules! damaged {
                    ($l:lifetime, $e:expr) => {{
                        if salvage {
                            continue $l;
                        }
                        *err2.lock().unwrap() = Some($e);
                        return;
                    }};
                }
                'keys: while i < rows.len() {
                    let (t, k) = (rows[i].1, rows[i].2);
                    let mut j = i + 1;
                    while j < rows.len() && rows[j].1 == t && rows[j].2 == k {
                        j += 1;
                    }
                    let group = &rows[i..j];
                    i = j;
                    let Some(full) = group.iter().rposition(|r| r.3.op != WriteOp::Patch) else {
                        damaged!('keys, Error::Corrupt(format!(
                            "a patch of key {:?} in table {t} has no earlier full write in the log or checkpoint",
                            String::from_utf8_lossy(k)
                        )))
                    };
                    if group[full].3.op == WriteOp::Delete {
                        if group.len() > full + 1 {
                            damaged!('keys, Error::Corrupt(format!(
                                "a patch of key {:?} in table {t} follows its delete",
                                String::from_utf8_lossy(k)
                            )))
                        }
                        continue;
                    }
                    val.clear();
                    val.extend_from_slice(group[full].3.val);
                    for r in &group[full + 1..] {
                        if let Err(why) = format::apply_patch(&mut val, r.3.val) {
                            damaged!('keys, Error::Corrupt(format!(
                                "key {:?} in table {t}: {why}",
                                String::from_utf8_lossy(k)
                            )))
                        }
                    }
                    let last = group.last().expect("a group has a row").3.epoch;
                    let rec = layout.rebuild(&val, last);
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
    report.txns_covered += covered;
    report.checkpoint_rows += rows;
    report.records += records.load(Ordering::Relaxed) as u64;
    report.threads = threads;
    report.phase_seconds[2] = started.elapsed().as_secs_f64() - report.phase_seconds[1];
    report.seconds += started.elapsed().as_secs_f64();
    Ok(())
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
    use crate::storage::Record;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    /// Single-version records, as Silo lays them out (this module's tests
    /// replay without a protocol).
    struct SingleVersion;

    impl RecordLayout for SingleVersion {
        fn read_committed(&self, rec: &Record, out: &mut Vec<u8>) -> bool {
            matches!(rec.read(out), crate::storage::ReadOutcome::Ok(tid) if tid & crate::storage::tid::ABSENT == 0)
        }
        fn rebuild(&self, val: &[u8], epoch: u64) -> *mut Record {
            use crate::storage::tid::{make_tid, LATEST};
            Record::new(val, make_tid(epoch, 1) | LATEST, 0)
        }
        fn free_record(&self) -> unsafe fn(*mut u8) {
            Record::free
        }
    }

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
            let scan = LogScan::read(&dir, None, RecoveryMode::Strict).unwrap();
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
                &SingleVersion,
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
                crate::index::Unobserved,
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
            tables[0].free_records(&g, Record::free);
            drop(g);
            let _ = std::fs::remove_dir_all(&dir);
        }
        COLLIDE.store(false, Ordering::Relaxed);
    }
}

//! The input log: the sequenced requests of a deterministic database, one
//! `Input` block per batch in the redo log's segment files and framing
//! (`log::format`, `log::segment`: the same header, CRC32C, torn-tail and
//! damage rules), written by the sequencer and synced once per batch.
//!
//! ```text
//! Input payload:  first_ts u64 | n u32 | n x entry
//! entry:          proc u16 | len u32 | len bytes (the procedure's encoded arguments)
//! ```
//!
//! The block header's `epoch` field is the batch number, its `logger`
//! field [`INPUT_STREAM`]; the entries' timestamps are `first_ts`,
//! `first_ts + 1`, ... in order. Batches and timestamps continue without a
//! gap from one block to the next: [`read_input_log`] refuses a gap as
//! damage.

use std::io;
use std::path::{Path, PathBuf};

use super::ProcId;
use crate::error::Error;
use crate::log::format::{self, BlockKind, BlockReader, Damage};
use crate::log::segment::{self, SegmentWriter};

/// The stream (the header's `logger` field, the segment files' logger
/// number) of the input log.
pub const INPUT_STREAM: u16 = 0;

/// Fixed part of an `Input` payload: first_ts, n.
const PAYLOAD_FIXED: usize = 8 + 4;
/// Fixed part of an entry: proc, len.
const ENTRY_FIXED: usize = 2 + 4;

/// Append one batch's payload to `out`.
pub fn encode_payload<'a>(
    out: &mut Vec<u8>,
    first_ts: u64,
    entries: impl ExactSizeIterator<Item = (ProcId, &'a [u8])>,
) {
    out.extend_from_slice(&first_ts.to_le_bytes());
    let n = u32::try_from(entries.len()).expect("input batch: over u32::MAX requests");
    out.extend_from_slice(&n.to_le_bytes());
    for (proc, args) in entries {
        let len = u32::try_from(args.len()).expect("input entry: arguments over u32::MAX bytes");
        out.extend_from_slice(&proc.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(args);
    }
}

/// One logged request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputEntry<'a> {
    /// Its timestamp (position in the input log).
    pub ts: u64,
    /// The procedure.
    pub proc: ProcId,
    /// Its encoded arguments.
    pub args: &'a [u8],
}

/// The entries of an `Input` payload, checked whole: `(first_ts, entries)`,
/// or what is malformed.
pub fn decode_payload(p: &[u8]) -> Result<(u64, Vec<InputEntry<'_>>), String> {
    if p.len() < PAYLOAD_FIXED {
        return Err(format!(
            "input payload of {} bytes, shorter than its fixed part",
            p.len()
        ));
    }
    let first_ts = u64::from_le_bytes(p[0..8].try_into().unwrap());
    let n = u32::from_le_bytes(p[8..12].try_into().unwrap()) as usize;
    let mut at = PAYLOAD_FIXED;
    // Each entry takes at least ENTRY_FIXED bytes: bound the allocation.
    if n > (p.len() - at) / ENTRY_FIXED {
        return Err(format!(
            "input payload claims {n} entries in {} bytes",
            p.len()
        ));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        if p.len() - at < ENTRY_FIXED {
            return Err(format!(
                "input entry {i} of {n}: header cut off at byte {at}"
            ));
        }
        let proc = u16::from_le_bytes(p[at..at + 2].try_into().unwrap());
        let len = u32::from_le_bytes(p[at + 2..at + 6].try_into().unwrap()) as usize;
        at += ENTRY_FIXED;
        if p.len() - at < len {
            return Err(format!(
                "input entry {i} of {n}: {len} bytes of arguments, {} left",
                p.len() - at
            ));
        }
        let ts = first_ts
            .checked_add(i as u64)
            .ok_or_else(|| format!("input entry {i}: timestamp past u64::MAX"))?;
        out.push(InputEntry {
            ts,
            proc,
            args: &p[at..at + len],
        });
        at += len;
    }
    if at != p.len() {
        return Err(format!(
            "{} bytes after the last of {n} input entries",
            p.len() - at
        ));
    }
    Ok((first_ts, out))
}

/// Writes the input log: one block per batch, synced on request.
#[derive(Debug)]
pub struct InputLog {
    w: SegmentWriter,
    seq: u64,
    block: Vec<u8>,
    payload: Vec<u8>,
}

impl InputLog {
    /// Start segment `segno` of the input stream in `dir` (the file must
    /// not exist); `seq` is the next block's sequence number.
    pub fn create(dir: &Path, segno: u64, seq: u64, segment_bytes: u64) -> io::Result<InputLog> {
        Ok(InputLog {
            w: SegmentWriter::create(dir, INPUT_STREAM, segno, segment_bytes)?,
            seq,
            block: Vec::new(),
            payload: Vec::new(),
        })
    }

    /// Append batch `batch` (its requests from `first_ts` on) as one block;
    /// not yet durable (see [`InputLog::sync`]).
    pub fn append<'a>(
        &mut self,
        batch: u64,
        first_ts: u64,
        entries: impl ExactSizeIterator<Item = (ProcId, &'a [u8])>,
    ) -> io::Result<()> {
        self.payload.clear();
        encode_payload(&mut self.payload, first_ts, entries);
        self.block.clear();
        format::write_block(
            &mut self.block,
            BlockKind::Input,
            INPUT_STREAM,
            self.seq,
            batch,
            &self.payload,
        );
        self.w.append(&self.block)?;
        self.seq += 1;
        Ok(())
    }

    /// Make every appended batch durable (`fdatasync`).
    pub fn sync(&mut self) -> io::Result<()> {
        self.w.sync()
    }

    /// Bytes written, all segments.
    pub fn bytes_written(&self) -> u64 {
        self.w.bytes_written()
    }

    /// Path of the current segment.
    pub fn path(&self) -> &Path {
        self.w.path()
    }
}

/// A batch read back from the input log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedBatch {
    /// The batch number.
    pub number: u64,
    /// The first request's timestamp.
    pub first_ts: u64,
    /// The requests in timestamp order: procedure and encoded arguments.
    pub entries: Vec<(ProcId, Vec<u8>)>,
}

/// What [`read_input_log`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputScan {
    /// Every whole batch, in order.
    pub batches: Vec<LoggedBatch>,
    /// A torn tail at the end of the last segment: the file and the offset
    /// where the valid prefix ends. A batch is released only after its
    /// block is synced, so what a torn tail held was never acknowledged.
    pub torn: Option<(PathBuf, u64, String)>,
    /// The last segment number and the next block sequence number (where a
    /// writer that continues the stream starts: `segno + 1`, `seq`).
    pub last_segno: Option<u64>,
    /// The sequence number the next block gets.
    pub next_seq: u64,
}

/// Read the input log of `dir` (a missing directory or no input segment:
/// nothing). Damage other than a torn tail of the last segment is
/// `Error::Corrupt`, naming the file and offset; so are a block of another
/// kind, a gap in block sequence, batch numbers or timestamps, and a newer
/// format.
pub fn read_input_log(dir: &Path) -> Result<InputScan, Error> {
    let mut scan = InputScan::default();
    if !dir.is_dir() {
        return Ok(scan);
    }
    let all = segment::list_segments(dir)
        .map_err(|e| Error::io(format!("cannot list the input log in {}", dir.display()), e))?;
    let Some(segs) = all.get(&INPUT_STREAM) else {
        return Ok(scan);
    };
    let mut last_seq: Option<u64> = None;
    // A torn tail is allowed at the end of the stream: in the last segment
    // that holds anything (a restart opens a new, possibly empty, segment
    // after cutting it, and a run may end before writing to its segment).
    let last_nonempty = segs
        .iter()
        .rposition(|(_, p)| std::fs::metadata(p).map_or(true, |m| m.len() > 0))
        .unwrap_or(0);
    for (i, (segno, path)) in segs.iter().enumerate() {
        let last_file = i >= last_nonempty;
        let bytes = segment::read_segment(path)
            .map_err(|e| Error::io(format!("cannot read {}", path.display()), e))?;
        let corrupt = |off: u64, why: String| {
            Error::Corrupt(format!("{} at offset {off}: {why}", path.display()))
        };
        let mut reader = BlockReader::new(&bytes);
        for b in reader.by_ref() {
            let b = match b {
                Ok(b) => b,
                Err(Damage::TornTail { offset, reason }) if last_file => {
                    scan.torn = Some((path.clone(), offset, reason));
                    break;
                }
                Err(Damage::TornTail { offset, reason }) => {
                    return Err(corrupt(
                        offset,
                        format!("{reason} (the end of a segment that later segments follow)"),
                    ))
                }
                Err(Damage::Corrupt { offset, reason }) => return Err(corrupt(offset, reason)),
                Err(Damage::NewerVersion { offset, version }) => {
                    return Err(Error::NewerFormat(format!(
                        "{} at offset {offset}: block format version {version}",
                        path.display()
                    )))
                }
            };
            if b.header.kind != BlockKind::Input || b.header.logger != INPUT_STREAM {
                return Err(corrupt(
                    b.offset,
                    format!(
                        "a {:?} block of stream {} in the input log",
                        b.header.kind, b.header.logger
                    ),
                ));
            }
            if let Some(s) = last_seq {
                if b.header.seq != s + 1 {
                    return Err(corrupt(
                        b.offset,
                        format!(
                            "block sequence {} follows {s} (a block is missing)",
                            b.header.seq
                        ),
                    ));
                }
            }
            last_seq = Some(b.header.seq);
            let (first_ts, entries) =
                decode_payload(b.payload).map_err(|e| corrupt(b.offset, e))?;
            if let Some(prev) = scan.batches.last() {
                let want_ts = prev.first_ts + prev.entries.len() as u64;
                if b.header.epoch != prev.number + 1 || first_ts != want_ts {
                    return Err(corrupt(
                        b.offset,
                        format!(
                            "batch {} from timestamp {first_ts} follows batch {} that ends before {want_ts}",
                            b.header.epoch, prev.number
                        ),
                    ));
                }
            }
            scan.batches.push(LoggedBatch {
                number: b.header.epoch,
                first_ts,
                entries: entries
                    .into_iter()
                    .map(|e| (e.proc, e.args.to_vec()))
                    .collect(),
            });
        }
        scan.last_segno = Some(*segno);
    }
    scan.next_seq = last_seq.map_or(0, |s| s + 1);
    Ok(scan)
}

//! The redo log's on-disk format: blocks, their headers and the
//! transaction entries inside them.
//!
//! All integers are little-endian. A log stream is a sequence of blocks;
//! each block is a [`HEADER_LEN`]-byte header followed by its payload:
//!
//! ```text
//! 0  magic u32          = BLOCK_MAGIC ("TSLG")
//! 4  format_version u16 = FORMAT_VERSION
//! 6  kind u8            (BlockKind: 1 = Txns, 2 = EpochMark, 3 = Input)
//! 7  reserved u8 = 0
//! 8  logger u16         (which logger thread wrote it)
//! 10 reserved u16 = 0
//! 12 payload_len u32
//! 16 seq u64            (block number in this logger's stream)
//! 24 epoch u64
//! 32 crc u32            CRC32C of header bytes 0..32, then the payload
//! 36 reserved u32 = 0
//! ```
//!
//! A `Txns` payload is a sequence of transaction entries:
//!
//! ```text
//! entry:  epoch u64 | stamp u64 | nwrites u32 | nwrites x write
//! write:  table u32 | op u8 (0 = Put, 1 = Delete, 2 = Patch) | key_len u16
//!         | val_len u32 | key bytes | value bytes (val_len = 0 for Delete)
//! patch:  runs of  offset u32 | len u32 | len bytes  (byte ranges of the
//!         new value that differ from the value it overwrote; same length)
//! ```
//!
//! An `EpochMark` payload is empty. An `Input` payload (the input log of a
//! deterministic database) is described in `det::input`.
//!
//! [`BlockReader`] walks the blocks of a segment file and tells a torn tail
//! (the end of a write that never completed, safe to cut off) from real
//! corruption (damage with valid data after it, which must not be cut off
//! silently).

use std::fmt;

/// Magic number at the start of every block ("TSLG" read as a big-endian
/// word; stored little-endian like every other field).
pub const BLOCK_MAGIC: u32 = 0x5453_4C47;

/// The format version this code writes and the newest it can read.
pub const FORMAT_VERSION: u16 = 1;

/// The largest block sequence number: recovery refuses more as damage, a
/// logger stops (an error) rather than write past it.
pub const MAX_SEQ: u64 = i64::MAX as u64;

/// Length in bytes of a block header.
pub const HEADER_LEN: usize = 40;

/// Bytes of the header covered by the checksum (everything before the CRC).
const CRC_COVERED: usize = 32;
/// Fixed part of a transaction entry: epoch, stamp, nwrites.
const ENTRY_FIXED: usize = 8 + 8 + 4;
/// Fixed part of a write: table, op, key_len, val_len.
const WRITE_FIXED: usize = 4 + 1 + 2 + 4;

/// What a block carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockKind {
    /// A sequence of transaction entries.
    Txns = 1,
    /// An empty block promising that every record of this logger's workers
    /// with an epoch at or below the header's epoch precedes it in the stream.
    EpochMark = 2,
    /// A batch of sequenced requests of a deterministic database (its
    /// input log, `det::input`): their procedure ids and arguments.
    Input = 3,
}

impl BlockKind {
    fn from_u8(b: u8) -> Option<BlockKind> {
        match b {
            1 => Some(BlockKind::Txns),
            2 => Some(BlockKind::EpochMark),
            3 => Some(BlockKind::Input),
            _ => None,
        }
    }
}

/// What a logged write does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// Insert or overwrite the key with the value.
    Put = 0,
    /// Remove the key (the value is empty).
    Delete = 1,
    /// Overwrite byte ranges of the key's current value (same length): the
    /// value holds the runs, see [`push_patch`] and [`apply_patch`].
    Patch = 2,
}

impl WriteOp {
    fn from_u8(b: u8) -> Option<WriteOp> {
        match b {
            0 => Some(WriteOp::Put),
            1 => Some(WriteOp::Delete),
            2 => Some(WriteOp::Patch),
            _ => None,
        }
    }
}

/// Bytes of a patch run header (offset u32, len u32).
const RUN_FIXED: usize = 8;

/// Appends a write of `key` whose value went from `old` to `new`: a
/// [`WriteOp::Patch`] holding only the changed byte ranges when that is
/// at most half the size of `new`, otherwise a [`WriteOp::Put`] of `new`.
/// Record-level redo stays record-level (Silo 4.10); only the bytes that
/// changed travel (a TPC-C STOCK update changes 4 of its ~300 bytes).
pub fn push_patch(buf: &mut Vec<u8>, table: u32, key: &[u8], old: &[u8], new: &[u8]) {
    if old.len() != new.len() || new.len() < 4 * RUN_FIXED {
        push_write(buf, table, WriteOp::Put, key, new);
        return;
    }
    let start = buf.len();
    push_write(buf, table, WriteOp::Patch, key, &[]);
    let body = buf.len();
    let n = new.len();
    // Runs of whole eight-byte words (the tail as one short word): one
    // comparison per word, and a run header is never paid for a gap
    // shorter than itself.
    let word = |b: &[u8], w: usize| u64::from_le_bytes(b[w * 8..w * 8 + 8].try_into().expect("8"));
    let words = n / 8;
    let mut w = 0;
    while w < words {
        if word(old, w) == word(new, w) {
            w += 1;
            continue;
        }
        let first = w;
        w += 1;
        while w < words && word(old, w) != word(new, w) {
            w += 1;
        }
        let (i, end) = (first * 8, if w == words { n } else { w * 8 });
        // A run that reaches the last whole word takes the tail too.
        if !emit_run(buf, body, n, i, end, new) {
            buf.truncate(start);
            push_write(buf, table, WriteOp::Put, key, new);
            return;
        }
        if end == n {
            w = words + 1;
        }
    }
    if w == words
        && old[words * 8..] != new[words * 8..]
        && !emit_run(buf, body, n, words * 8, n, new)
    {
        buf.truncate(start);
        push_write(buf, table, WriteOp::Put, key, new);
        return;
    }
    let len = (buf.len() - body) as u32;
    // val_len sits after table u32, op u8 and key_len u16.
    buf[start + 7..start + 11].copy_from_slice(&len.to_le_bytes());
}

/// Append the run `new[i..end]`; false once the patch has grown past half
/// of the value (a plain Put is then cheaper).
#[inline]
fn emit_run(buf: &mut Vec<u8>, body: usize, n: usize, i: usize, end: usize, new: &[u8]) -> bool {
    buf.extend_from_slice(&(i as u32).to_le_bytes());
    buf.extend_from_slice(&((end - i) as u32).to_le_bytes());
    buf.extend_from_slice(&new[i..end]);
    buf.len() - body <= n / 2
}

/// Apply the runs of a [`WriteOp::Patch`] value to `base`.
pub fn apply_patch(base: &mut [u8], patch: &[u8]) -> Result<(), String> {
    let mut p = 0;
    while p < patch.len() {
        if patch.len() - p < RUN_FIXED {
            return Err(format!("patch run header cut at byte {p}"));
        }
        let off = le_u32(patch, p) as usize;
        let len = le_u32(patch, p + 4) as usize;
        p += RUN_FIXED;
        if patch.len() - p < len || off.checked_add(len).is_none_or(|e| e > base.len()) {
            return Err(format!(
                "patch run at byte {} ({len} bytes at offset {off}) outside a {}-byte value",
                p - RUN_FIXED,
                base.len()
            ));
        }
        base[off..off + len].copy_from_slice(&patch[p..p + len]);
        p += len;
    }
    Ok(())
}

/// The decoded fields of a block header (magic, version, reserved fields
/// and checksum are checked by the reader and not kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// What the payload carries.
    pub kind: BlockKind,
    /// The logger thread that wrote the block.
    pub logger: u16,
    /// Length of the payload in bytes.
    pub payload_len: u32,
    /// Block number in this logger's stream (0, 1, 2, ... across segments).
    pub seq: u64,
    /// For `Txns`, the largest epoch of any entry in the block; for
    /// `EpochMark`, the epoch up to which this logger's stream is complete.
    pub epoch: u64,
}

// ---------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------

/// Starts a transaction entry in `buf` (a `Txns` payload being built) and
/// returns its offset, to be passed to [`finish_txn`] once every write has
/// been added with [`push_write`].
pub fn begin_txn(buf: &mut Vec<u8>, epoch: u64, stamp: u64) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&epoch.to_le_bytes());
    buf.extend_from_slice(&stamp.to_le_bytes());
    buf.extend_from_slice(&0u32.to_le_bytes());
    at
}

/// Appends one write to the entry being built in `buf`.
///
/// # Panics
///
/// If the key is longer than `u16::MAX` bytes, the value longer than
/// `u32::MAX` bytes, or `op` is [`WriteOp::Delete`] with a non-empty value.
pub fn push_write(buf: &mut Vec<u8>, table: u32, op: WriteOp, key: &[u8], val: &[u8]) {
    let key_len = u16::try_from(key.len()).expect("log write: key longer than u16::MAX");
    let val_len = u32::try_from(val.len()).expect("log write: value longer than u32::MAX");
    assert!(
        op != WriteOp::Delete || val.is_empty(),
        "log write: a Delete carries no value"
    );
    buf.reserve(WRITE_FIXED + key.len() + val.len());
    let mut hdr = [0u8; WRITE_FIXED];
    hdr[0..4].copy_from_slice(&table.to_le_bytes());
    hdr[4] = op as u8;
    hdr[5..7].copy_from_slice(&key_len.to_le_bytes());
    hdr[7..11].copy_from_slice(&val_len.to_le_bytes());
    buf.extend_from_slice(&hdr);
    buf.extend_from_slice(key);
    buf.extend_from_slice(val);
}

/// Finishes the entry that [`begin_txn`] started at offset `at` of `buf`,
/// recording that it holds `nwrites` writes.
///
/// # Panics
///
/// If `at` is not the offset of an entry header inside `buf`.
// Takes the Vec (not a slice) to match begin_txn/push_write, which callers use
// together on the same buffer.
#[allow(clippy::ptr_arg)]
pub fn finish_txn(buf: &mut Vec<u8>, at: usize, nwrites: u32) {
    buf[at + 16..at + ENTRY_FIXED].copy_from_slice(&nwrites.to_le_bytes());
}

/// Appends a whole block to `out`: its header (with the checksum computed
/// over the header and `payload`) followed by `payload`.
///
/// # Panics
///
/// If the payload is longer than `u32::MAX` bytes, or `kind` is
/// [`BlockKind::EpochMark`] and the payload is not empty.
pub fn write_block(
    out: &mut Vec<u8>,
    kind: BlockKind,
    logger: u16,
    seq: u64,
    epoch: u64,
    payload: &[u8],
) {
    let payload_len = u32::try_from(payload.len()).expect("log block: payload over u32::MAX");
    assert!(
        kind != BlockKind::EpochMark || payload.is_empty(),
        "log block: an EpochMark has an empty payload"
    );
    let mut h = [0u8; HEADER_LEN];
    h[0..4].copy_from_slice(&BLOCK_MAGIC.to_le_bytes());
    h[4..6].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[6] = kind as u8;
    h[8..10].copy_from_slice(&logger.to_le_bytes());
    h[12..16].copy_from_slice(&payload_len.to_le_bytes());
    h[16..24].copy_from_slice(&seq.to_le_bytes());
    h[24..32].copy_from_slice(&epoch.to_le_bytes());
    let crc = block_crc(&h[..CRC_COVERED], payload);
    h[32..36].copy_from_slice(&crc.to_le_bytes());
    out.reserve(HEADER_LEN + payload.len());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
}

fn block_crc(header: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&header[..CRC_COVERED]), payload)
}

// ---------------------------------------------------------------------------
// Little-endian readers (callers check bounds first)
// ---------------------------------------------------------------------------

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

// ---------------------------------------------------------------------------
// Reading blocks
// ---------------------------------------------------------------------------

/// One valid block of a stream, as yielded by [`BlockReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block<'a> {
    /// The decoded header.
    pub header: BlockHeader,
    /// Offset of the header in the stream (the segment file).
    pub offset: u64,
    /// The payload (`header.payload_len` bytes).
    pub payload: &'a [u8],
}

impl Block<'_> {
    /// Offset just past this block in the stream.
    fn end(&self) -> u64 {
        self.offset + (HEADER_LEN + self.payload.len()) as u64
    }
}

/// What is wrong at some offset of a byte stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Damage {
    /// The stream ends inside a block, or the last block's checksum fails and
    /// nothing valid follows it, or only zero bytes follow: the tail of a
    /// write that never completed. Cutting the stream at `offset` is safe.
    TornTail {
        /// Where the incomplete block starts.
        offset: u64,
        /// What was found there.
        reason: String,
    },
    /// A block that fails its checksum or is malformed while a valid block
    /// follows it somewhere later, or a bad magic with non-zero bytes
    /// followed by a valid block: real damage.
    Corrupt {
        /// Where the damaged block (or the unexpected bytes) starts.
        offset: u64,
        /// What was found there.
        reason: String,
    },
    /// A block whose format_version is newer than [`FORMAT_VERSION`].
    NewerVersion {
        /// Where the block starts.
        offset: u64,
        /// The version it claims.
        version: u16,
    },
}

impl Damage {
    /// Offset in the stream where the damage starts.
    pub fn offset(&self) -> u64 {
        match *self {
            Damage::TornTail { offset, .. }
            | Damage::Corrupt { offset, .. }
            | Damage::NewerVersion { offset, .. } => offset,
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::TornTail { offset, reason } => {
                write!(f, "torn tail at offset {offset}: {reason}")
            }
            Damage::Corrupt { offset, reason } => {
                write!(f, "corrupt log at offset {offset}: {reason}")
            }
            Damage::NewerVersion { offset, version } => write!(
                f,
                "log block at offset {offset} has format version {version}, newer than {FORMAT_VERSION}"
            ),
        }
    }
}

impl std::error::Error for Damage {}

/// Why the bytes at some offset are not a valid block.
enum Invalid {
    /// A header that says it is from a newer format.
    Newer(u16),
    /// Anything else: truncated, bad checksum, malformed.
    Bad(String),
}

/// Parses and verifies the block starting at `off`.
fn parse_block(bytes: &[u8], off: usize) -> Result<Block<'_>, Invalid> {
    let rest = &bytes[off..];
    if rest.len() < 4 {
        return Err(Invalid::Bad(format!(
            "stream ends {} bytes into a block header",
            rest.len()
        )));
    }
    let magic = le_u32(rest, 0);
    if magic != BLOCK_MAGIC {
        return Err(Invalid::Bad(format!("bad magic {magic:#010x}")));
    }
    if rest.len() >= 6 {
        let version = le_u16(rest, 4);
        if version > FORMAT_VERSION {
            return Err(Invalid::Newer(version));
        }
    }
    if rest.len() < HEADER_LEN {
        return Err(Invalid::Bad(format!(
            "stream ends {} bytes into a block header",
            rest.len()
        )));
    }
    let h = &rest[..HEADER_LEN];
    let payload_len = le_u32(h, 12);
    let avail = rest.len() - HEADER_LEN;
    if payload_len as usize > avail {
        return Err(Invalid::Bad(format!(
            "payload of {payload_len} bytes but only {avail} bytes remain"
        )));
    }
    let payload = &rest[HEADER_LEN..HEADER_LEN + payload_len as usize];
    let stored = le_u32(h, 32);
    let computed = block_crc(h, payload);
    if stored != computed {
        return Err(Invalid::Bad(format!(
            "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
        )));
    }
    // Checksummed but still possibly malformed (or the uncovered reserved
    // word is damaged).
    let version = le_u16(h, 4);
    if version == 0 {
        return Err(Invalid::Bad("format version 0".into()));
    }
    let kind = BlockKind::from_u8(h[6])
        .ok_or_else(|| Invalid::Bad(format!("unknown block kind {}", h[6])))?;
    if h[7] != 0 || le_u16(h, 10) != 0 || le_u32(h, 36) != 0 {
        return Err(Invalid::Bad("non-zero reserved header field".into()));
    }
    if kind == BlockKind::EpochMark && payload_len != 0 {
        return Err(Invalid::Bad(format!(
            "epoch mark with a {payload_len}-byte payload"
        )));
    }
    Ok(Block {
        header: BlockHeader {
            kind,
            logger: le_u16(h, 8),
            payload_len,
            seq: le_u64(h, 16),
            epoch: le_u64(h, 24),
        },
        offset: off as u64,
        payload,
    })
}

/// Offset of the first valid block starting after `from`, if any.
///
/// Candidates are the positions of the magic bytes; each is parsed and its
/// checksum verified.
fn next_valid_block(bytes: &[u8], from: usize) -> Option<usize> {
    let magic = BLOCK_MAGIC.to_le_bytes();
    let mut i = from;
    while i + HEADER_LEN <= bytes.len() {
        let rel = bytes[i..].iter().position(|&b| b == magic[0])?;
        i += rel;
        if i + HEADER_LEN > bytes.len() {
            return None;
        }
        if bytes[i..i + 4] == magic && parse_block(bytes, i).is_ok() {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// How many valid epoch-mark blocks start after `from` (counting stops at
/// `limit`). Recovery uses it to tell damage in the unsynced end of a
/// logger's newest segment (at most one mark after it: the round whose
/// fsync never returned) from damage that a completed fsync had covered.
pub fn marks_after(bytes: &[u8], from: usize, limit: usize) -> usize {
    let mut n = 0;
    let mut i = from;
    while n < limit {
        let Some(p) = next_valid_block(bytes, i) else {
            break;
        };
        if let Ok(b) = parse_block(bytes, p) {
            if b.header.kind == BlockKind::EpochMark {
                n += 1;
            }
        }
        i = p + 1;
    }
    n
}

/// Iterates the blocks of `bytes` (a whole segment file).
///
/// Yields `Ok(Block)` for each valid block, then at most one `Err(Damage)`
/// and stops. A run of zero bytes at the end (preallocated space) is a clean
/// end, not damage.
///
/// A block that is incomplete, fails its checksum or is malformed is
/// [`Damage::TornTail`] when no valid block follows it anywhere later in the
/// stream, and [`Damage::Corrupt`] when one does. A block claiming a newer
/// format version is [`Damage::NewerVersion`] (checked before the
/// checksum, since a newer format may checksum differently).
#[derive(Clone, Debug)]
pub struct BlockReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> BlockReader<'a> {
    /// A reader over a whole segment file's bytes.
    pub fn new(bytes: &'a [u8]) -> Self {
        BlockReader {
            bytes,
            pos: 0,
            done: false,
        }
    }

    /// Offset just past the last valid block yielded so far (where a torn
    /// tail would be cut).
    pub fn valid_end(&self) -> u64 {
        self.pos as u64
    }
}

impl<'a> Iterator for BlockReader<'a> {
    type Item = Result<Block<'a>, Damage>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        if rest.iter().all(|&b| b == 0) {
            // End of stream, or preallocated zeros after the last block.
            self.done = true;
            return None;
        }
        match parse_block(self.bytes, self.pos) {
            Ok(block) => {
                self.pos = block.end() as usize;
                Some(Ok(block))
            }
            Err(invalid) => {
                self.done = true;
                let offset = self.pos as u64;
                Some(Err(match invalid {
                    Invalid::Newer(version) => Damage::NewerVersion { offset, version },
                    Invalid::Bad(reason) => match next_valid_block(self.bytes, self.pos + 1) {
                        Some(next) => Damage::Corrupt {
                            offset,
                            reason: format!("{reason}; a valid block follows at offset {next}"),
                        },
                        None => Damage::TornTail { offset, reason },
                    },
                }))
            }
        }
    }
}

/// Every valid block of `bytes`, skipping damaged stretches (salvage
/// recovery): after damage, reading resumes at the next position where a
/// whole block with a valid checksum starts. Blocks of a newer format are
/// skipped like damage.
pub fn salvage_blocks(bytes: &[u8]) -> impl Iterator<Item = Block<'_>> {
    let mut reader = BlockReader::new(bytes);
    std::iter::from_fn(move || loop {
        match reader.next()? {
            Ok(b) => return Some(b),
            Err(d) => {
                let next = next_valid_block(bytes, d.offset() as usize + 1)?;
                reader = BlockReader {
                    bytes,
                    pos: next,
                    done: false,
                };
            }
        }
    })
}

// ---------------------------------------------------------------------------
// Reading transaction entries
// ---------------------------------------------------------------------------

/// One transaction entry of a `Txns` payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnEntry<'a> {
    /// The transaction's epoch.
    pub epoch: u64,
    /// The transaction's commit stamp (serialization order within and across
    /// epochs).
    pub stamp: u64,
    /// How many writes the entry holds.
    pub nwrites: u32,
    writes: &'a [u8],
}

impl<'a> TxnEntry<'a> {
    /// The entry's writes, in the order they were pushed.
    pub fn writes(&self) -> WriteIter<'a> {
        WriteIter {
            bytes: self.writes,
            left: self.nwrites,
        }
    }
}

/// One logged write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogWrite<'a> {
    /// The table written.
    pub table: u32,
    /// Put or delete.
    pub op: WriteOp,
    /// The key.
    pub key: &'a [u8],
    /// The new value (empty for a delete).
    pub val: &'a [u8],
}

/// Iterates the writes of a [`TxnEntry`]. The bytes were validated when the
/// entry was parsed, so it cannot fail.
#[derive(Clone, Debug)]
pub struct WriteIter<'a> {
    bytes: &'a [u8],
    left: u32,
}

impl<'a> Iterator for WriteIter<'a> {
    type Item = LogWrite<'a>;

    fn next(&mut self) -> Option<LogWrite<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let b = self.bytes;
        let table = le_u32(b, 0);
        let op = WriteOp::from_u8(b[4]).expect("validated write op");
        let key_len = le_u16(b, 5) as usize;
        let val_len = le_u32(b, 7) as usize;
        let key = &b[WRITE_FIXED..WRITE_FIXED + key_len];
        let val = &b[WRITE_FIXED + key_len..WRITE_FIXED + key_len + val_len];
        self.bytes = &b[WRITE_FIXED + key_len + val_len..];
        Some(LogWrite {
            table,
            op,
            key,
            val,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for WriteIter<'_> {}

/// Iterates the entries of a `Txns` payload; see [`entries`].
#[derive(Clone, Debug)]
pub struct EntryIter<'a> {
    payload: &'a [u8],
    pos: usize,
    done: bool,
}

/// Iterates the entries of a `Txns` payload; a malformed entry gives
/// `Err(String)` describing it (with its offset within the payload) and
/// stops.
pub fn entries(payload: &[u8]) -> EntryIter<'_> {
    EntryIter {
        payload,
        pos: 0,
        done: false,
    }
}

impl<'a> EntryIter<'a> {
    /// Parses and validates the entry at `self.pos`, returning it and its
    /// length.
    fn parse(&self) -> Result<(TxnEntry<'a>, usize), String> {
        let at = self.pos;
        let rest = &self.payload[at..];
        if rest.len() < ENTRY_FIXED {
            return Err(format!(
                "entry at payload offset {at}: {} bytes left, need {ENTRY_FIXED} for its header",
                rest.len()
            ));
        }
        let epoch = le_u64(rest, 0);
        let stamp = le_u64(rest, 8);
        let nwrites = le_u32(rest, 16);
        let mut p = ENTRY_FIXED;
        for i in 0..nwrites {
            let left = rest.len() - p;
            if left < WRITE_FIXED {
                return Err(format!(
                    "entry at payload offset {at}: write {i} of {nwrites} at offset {}: {left} bytes left, need {WRITE_FIXED}",
                    at + p
                ));
            }
            let w = &rest[p..];
            let op = w[4];
            let key_len = le_u16(w, 5) as usize;
            let val_len = le_u32(w, 7) as usize;
            match WriteOp::from_u8(op) {
                None => {
                    return Err(format!(
                        "entry at payload offset {at}: write {i} at offset {}: unknown op {op}",
                        at + p
                    ))
                }
                Some(WriteOp::Delete) if val_len != 0 => {
                    return Err(format!(
                        "entry at payload offset {at}: write {i} at offset {}: delete with a {val_len}-byte value",
                        at + p
                    ))
                }
                Some(_) => {}
            }
            let body = key_len + val_len;
            if body > left - WRITE_FIXED {
                return Err(format!(
                    "entry at payload offset {at}: write {i} at offset {}: key {key_len} + value {val_len} bytes, only {} left",
                    at + p,
                    left - WRITE_FIXED
                ));
            }
            p += WRITE_FIXED + body;
        }
        Ok((
            TxnEntry {
                epoch,
                stamp,
                nwrites,
                writes: &rest[ENTRY_FIXED..p],
            },
            p,
        ))
    }
}

impl<'a> Iterator for EntryIter<'a> {
    type Item = Result<TxnEntry<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.payload.len() {
            return None;
        }
        match self.parse() {
            Ok((entry, len)) => {
                self.pos += len;
                Some(Ok(entry))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod patch_tests {
    use super::*;
    use proptest::prelude::*;

    fn only_write(buf: &[u8]) -> (WriteOp, Vec<u8>) {
        let mut b = Vec::new();
        let at = begin_txn(&mut b, 1, 1);
        b.extend_from_slice(buf);
        finish_txn(&mut b, at, 1);
        let e = entries(&b).next().unwrap().unwrap();
        let w = e.writes().next().unwrap();
        (w.op, w.val.to_vec())
    }

    #[test]
    fn small_change_is_a_patch_large_change_a_put() {
        let old = vec![7u8; 300];
        let mut new = old.clone();
        new[10] = 1;
        new[11] = 2;
        new[200] = 3;
        let mut buf = Vec::new();
        push_patch(&mut buf, 3, b"k", &old, &new);
        let (op, val) = only_write(&buf);
        assert_eq!(op, WriteOp::Patch);
        assert!(val.len() < 40, "{}", val.len());
        let mut base = old.clone();
        apply_patch(&mut base, &val).unwrap();
        assert_eq!(base, new);
        // Everything changed: a Put.
        let mut buf = Vec::new();
        push_patch(&mut buf, 3, b"k", &old, &[9u8; 300]);
        assert_eq!(only_write(&buf).0, WriteOp::Put);
        // Length changed: a Put.
        let mut buf = Vec::new();
        push_patch(&mut buf, 3, b"k", &old, &[7u8; 301]);
        assert_eq!(only_write(&buf).0, WriteOp::Put);
        // Bad patches are refused, not applied out of bounds.
        let mut short = vec![0u8; 4];
        assert!(apply_patch(&mut short, &val).is_err());
        assert!(apply_patch(&mut base, &val[..5]).is_err());
    }

    proptest! {
        #[test]
        fn patch_round_trip(old in proptest::collection::vec(0u8..4, 0..400),
                            flips in proptest::collection::vec((0usize..400, any::<u8>()), 0..40)) {
            let mut new = old.clone();
            for (i, b) in flips {
                if !new.is_empty() {
                    let n = new.len();
                    new[i % n] = b;
                }
            }
            let mut buf = Vec::new();
            push_patch(&mut buf, 1, b"key", &old, &new);
            let (op, val) = only_write(&buf);
            match op {
                WriteOp::Put => prop_assert_eq!(val, new),
                WriteOp::Patch => {
                    let mut base = old.clone();
                    apply_patch(&mut base, &val).unwrap();
                    prop_assert_eq!(base, new);
                }
                WriteOp::Delete => prop_assert!(false),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A transaction as the tests describe it: (epoch, stamp, writes).
    type Txn = (u64, u64, Vec<(u32, WriteOp, Vec<u8>, Vec<u8>)>);

    fn encode_txns(txns: &[Txn]) -> Vec<u8> {
        let mut buf = Vec::new();
        for (epoch, stamp, writes) in txns {
            let at = begin_txn(&mut buf, *epoch, *stamp);
            for (table, op, key, val) in writes {
                push_write(&mut buf, *table, *op, key, val);
            }
            finish_txn(&mut buf, at, writes.len() as u32);
        }
        buf
    }

    fn decode_txns(payload: &[u8]) -> Vec<Txn> {
        entries(payload)
            .map(|e| {
                let e = e.expect("valid entry");
                let writes: Vec<_> = e
                    .writes()
                    .map(|w| (w.table, w.op, w.key.to_vec(), w.val.to_vec()))
                    .collect();
                assert_eq!(writes.len(), e.nwrites as usize);
                (e.epoch, e.stamp, writes)
            })
            .collect()
    }

    fn txns_block(out: &mut Vec<u8>, seq: u64, txns: &[Txn]) {
        let epoch = txns.iter().map(|t| t.0).max().unwrap_or(0);
        write_block(out, BlockKind::Txns, 3, seq, epoch, &encode_txns(txns));
    }

    /// Three small Txns blocks (each 2 entries), offsets returned.
    fn three_blocks() -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut offs = Vec::new();
        for seq in 0..3u64 {
            offs.push(out.len());
            let txns: Vec<Txn> = (0..2)
                .map(|i| {
                    (
                        seq + 1,
                        seq * 10 + i,
                        vec![(1, WriteOp::Put, b"key".to_vec(), vec![seq as u8 + 1; 20])],
                    )
                })
                .collect();
            txns_block(&mut out, seq, &txns);
        }
        (out, offs)
    }

    fn read_all(bytes: &[u8]) -> (Vec<Block<'_>>, Option<Damage>) {
        let mut blocks = Vec::new();
        let mut damage = None;
        for r in BlockReader::new(bytes) {
            match r {
                Ok(b) => {
                    assert!(damage.is_none(), "block after damage");
                    blocks.push(b)
                }
                Err(d) => {
                    assert!(damage.is_none(), "two damages");
                    damage = Some(d)
                }
            }
        }
        (blocks, damage)
    }

    #[test]
    fn round_trip() {
        let big = vec![0xAB; 64 * 1024];
        let t1: Vec<Txn> = vec![
            (
                5,
                100,
                vec![
                    (1, WriteOp::Put, b"alice".to_vec(), b"100".to_vec()),
                    (2, WriteOp::Delete, b"bob".to_vec(), vec![]),
                    (1, WriteOp::Put, vec![], vec![]),
                ],
            ),
            (6, 101, vec![]),
            (7, 102, vec![(9, WriteOp::Put, b"k".to_vec(), big.clone())]),
        ];
        let t2: Vec<Txn> = vec![(
            7,
            103,
            vec![
                (u32::MAX, WriteOp::Delete, vec![], vec![]),
                (0, WriteOp::Put, vec![0xFF; 1024], big.clone()),
            ],
        )];
        let mut out = Vec::new();
        txns_block(&mut out, 0, &t1);
        write_block(&mut out, BlockKind::EpochMark, 3, 1, 6, &[]);
        txns_block(&mut out, 2, &t2);
        write_block(&mut out, BlockKind::Txns, 3, 3, 7, &[]);
        write_block(&mut out, BlockKind::EpochMark, 3, 4, 7, &[]);

        let (blocks, damage) = read_all(&out);
        assert_eq!(damage, None);
        assert_eq!(blocks.len(), 5);
        let kinds: Vec<_> = blocks.iter().map(|b| b.header.kind).collect();
        use BlockKind::*;
        assert_eq!(kinds, [Txns, EpochMark, Txns, Txns, EpochMark]);
        let seqs: Vec<_> = blocks.iter().map(|b| b.header.seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
        let epochs: Vec<_> = blocks.iter().map(|b| b.header.epoch).collect();
        assert_eq!(epochs, [7, 6, 7, 7, 7]);
        assert!(blocks.iter().all(|b| b.header.logger == 3));
        assert_eq!(blocks[0].offset, 0);
        for w in blocks.windows(2) {
            assert_eq!(w[0].end(), w[1].offset);
        }
        assert_eq!(blocks[4].end(), out.len() as u64);
        assert_eq!(decode_txns(blocks[0].payload), t1);
        assert_eq!(decode_txns(blocks[2].payload), t2);
        assert_eq!(decode_txns(blocks[3].payload), Vec::<Txn>::new());
        assert!(blocks[1].payload.is_empty());
        assert_eq!(
            blocks[0].header.payload_len as usize,
            blocks[0].payload.len()
        );
    }

    #[test]
    fn header_layout() {
        let mut out = Vec::new();
        write_block(&mut out, BlockKind::Txns, 0x0102, 7, 9, b"xyz");
        assert_eq!(out.len(), HEADER_LEN + 3);
        assert_eq!(&out[0..4], b"GLST");
        assert_eq!(le_u32(&out, 0), BLOCK_MAGIC);
        assert_eq!(le_u16(&out, 4), FORMAT_VERSION);
        assert_eq!(out[6], 1);
        assert_eq!(out[7], 0);
        assert_eq!(le_u16(&out, 8), 0x0102);
        assert_eq!(le_u16(&out, 10), 0);
        assert_eq!(le_u32(&out, 12), 3);
        assert_eq!(le_u64(&out, 16), 7);
        assert_eq!(le_u64(&out, 24), 9);
        let mut c = out[..32].to_vec();
        c.extend_from_slice(b"xyz");
        assert_eq!(le_u32(&out, 32), crc32c::crc32c(&c));
        assert_eq!(le_u32(&out, 36), 0);
        assert_eq!(&out[40..], b"xyz");
    }

    #[test]
    fn empty_stream_and_all_zeros_are_clean() {
        assert_eq!(read_all(&[]).0.len(), 0);
        assert_eq!(read_all(&[]).1, None);
        assert_eq!(read_all(&[0; 4096]).1, None);
    }

    #[test]
    fn trailing_zeros_are_a_clean_end() {
        let (mut out, _) = three_blocks();
        out.extend_from_slice(&[0; 1000]);
        let (blocks, damage) = read_all(&out);
        assert_eq!(blocks.len(), 3);
        assert_eq!(damage, None);
    }

    fn assert_torn(damage: Option<Damage>, at: usize) {
        match damage {
            Some(Damage::TornTail { offset, .. }) => assert_eq!(offset, at as u64),
            other => panic!("expected TornTail at {at}, got {other:?}"),
        }
    }

    fn assert_corrupt(damage: Option<Damage>, at: usize) {
        match damage {
            Some(Damage::Corrupt { offset, .. }) => assert_eq!(offset, at as u64),
            other => panic!("expected Corrupt at {at}, got {other:?}"),
        }
    }

    #[test]
    fn cut_in_header_is_torn_tail() {
        let (out, offs) = three_blocks();
        for cut in [1, 3, 4, 5, 6, 20, HEADER_LEN - 1] {
            let (blocks, damage) = read_all(&out[..offs[2] + cut]);
            assert_eq!(blocks.len(), 2);
            assert_torn(damage, offs[2]);
        }
    }

    #[test]
    fn cut_in_payload_is_torn_tail() {
        let (out, offs) = three_blocks();
        for cut in [HEADER_LEN, HEADER_LEN + 1, out.len() - offs[2] - 1] {
            let (blocks, damage) = read_all(&out[..offs[2] + cut]);
            assert_eq!(blocks.len(), 2);
            assert_torn(damage, offs[2]);
        }
    }

    #[test]
    fn cut_then_zeros_is_torn_tail() {
        let (out, offs) = three_blocks();
        let mut cut = out[..offs[2] + HEADER_LEN + 5].to_vec();
        cut.extend_from_slice(&[0; 512]);
        let (blocks, damage) = read_all(&cut);
        assert_eq!(blocks.len(), 2);
        assert_torn(damage, offs[2]);
    }

    #[test]
    fn cut_inside_trailing_zeros_then_zero_padded_is_whole() {
        // A payload ending in zeros, cut inside those zeros and padded with
        // preallocated zeros, is byte-for-byte the original block again.
        let mut p = Vec::new();
        let at = begin_txn(&mut p, 0, 0);
        finish_txn(&mut p, at, 0);
        let mut out = Vec::new();
        write_block(&mut out, BlockKind::Txns, 0, 0, 0, &p);
        let mut bytes = out[..out.len() - 5].to_vec();
        bytes.resize(out.len() + 64, 0);
        let (blocks, damage) = read_all(&bytes);
        assert_eq!(damage, None);
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].payload, &p[..]);
    }

    #[test]
    fn flipped_byte_in_last_block_is_torn_tail() {
        let (mut out, offs) = three_blocks();
        let at = offs[2] + HEADER_LEN + 7;
        out[at] ^= 0x10;
        let (blocks, damage) = read_all(&out);
        assert_eq!(blocks.len(), 2);
        assert_torn(damage, offs[2]);
        // Also with preallocated zeros after it.
        out.extend_from_slice(&[0; 256]);
        assert_torn(read_all(&out).1, offs[2]);
    }

    #[test]
    fn flipped_byte_in_middle_block_is_corrupt() {
        let (mut out, offs) = three_blocks();
        out[offs[1] + HEADER_LEN + 3] ^= 0x01;
        let (blocks, damage) = read_all(&out);
        assert_eq!(blocks.len(), 1);
        assert_corrupt(damage, offs[1]);
        // In the header's seq field as well.
        let (mut out, offs) = three_blocks();
        out[offs[1] + 17] ^= 0x80;
        assert_corrupt(read_all(&out).1, offs[1]);
        // In the magic.
        let (mut out, offs) = three_blocks();
        out[offs[1]] ^= 0x01;
        assert_corrupt(read_all(&out).1, offs[1]);
    }

    #[test]
    fn garbage_between_blocks_is_corrupt() {
        let (out, offs) = three_blocks();
        let mut bad = out[..offs[1]].to_vec();
        bad.extend_from_slice(b"this is not a log block at all, clearly");
        bad.extend_from_slice(&out[offs[1]..]);
        let (blocks, damage) = read_all(&bad);
        assert_eq!(blocks.len(), 1);
        assert_corrupt(damage, offs[1]);
        // A hole of zeros followed by a valid block is damage too.
        let mut hole = out[..offs[1]].to_vec();
        hole.extend_from_slice(&[0; 64]);
        hole.extend_from_slice(&out[offs[1]..]);
        assert_corrupt(read_all(&hole).1, offs[1]);
        // Garbage that happens to start with the magic.
        let mut magic = out[..offs[1]].to_vec();
        magic.extend_from_slice(&BLOCK_MAGIC.to_le_bytes());
        magic.extend_from_slice(&[1, 0, 1, 0]);
        magic.extend_from_slice(&[7; 50]);
        magic.extend_from_slice(&out[offs[1]..]);
        assert_corrupt(read_all(&magic).1, offs[1]);
    }

    #[test]
    fn trailing_garbage_is_torn_tail() {
        let (mut out, offs) = three_blocks();
        let end = out.len();
        out.extend_from_slice(&[0x5A; 100]);
        let (blocks, damage) = read_all(&out);
        assert_eq!(blocks.len(), offs.len());
        assert_torn(damage, end);
    }

    #[test]
    fn newer_version_is_reported() {
        let (mut out, offs) = three_blocks();
        out[offs[1] + 4..offs[1] + 6].copy_from_slice(&2u16.to_le_bytes());
        // Re-checksum as a writer of that version would have.
        let plen = le_u32(&out, offs[1] + 12) as usize;
        let crc = block_crc(
            &out[offs[1]..offs[1] + 32],
            &out[offs[1] + HEADER_LEN..offs[1] + HEADER_LEN + plen],
        );
        out[offs[1] + 32..offs[1] + 36].copy_from_slice(&crc.to_le_bytes());
        let (blocks, damage) = read_all(&out);
        assert_eq!(blocks.len(), 1);
        assert_eq!(
            damage,
            Some(Damage::NewerVersion {
                offset: offs[1] as u64,
                version: 2
            })
        );
        // Even when it is the first block and only its beginning is there.
        assert_eq!(
            read_all(&out[offs[1]..offs[1] + 6]).1,
            Some(Damage::NewerVersion {
                offset: 0,
                version: 2
            })
        );
    }

    #[test]
    fn flipped_length_field() {
        // Middle block: its length now points past the end (or elsewhere);
        // a valid block still follows, so it is corruption.
        for flip in [0x01u8, 0x80] {
            for byte in 12..16 {
                let (mut out, offs) = three_blocks();
                out[offs[1] + byte] ^= flip;
                let (blocks, damage) = read_all(&out);
                assert_eq!(blocks.len(), 1, "byte {byte} flip {flip:#x}");
                assert_corrupt(damage, offs[1]);
            }
        }
        // Last block: nothing valid follows, a torn tail.
        for byte in 12..16 {
            let (mut out, offs) = three_blocks();
            out[offs[2] + byte] ^= 0x04;
            let (blocks, damage) = read_all(&out);
            assert_eq!(blocks.len(), 2);
            assert_torn(damage, offs[2]);
        }
    }

    #[test]
    fn malformed_but_checksummed_blocks() {
        // Unknown kind, non-zero reserved word (not covered by the CRC),
        // non-empty epoch mark: malformed, then a valid block follows.
        let (out, offs) = three_blocks();
        let mid = &out[offs[1]..offs[2]];
        let recrc = |b: &mut Vec<u8>| {
            let crc = block_crc(&b[..32], &b[HEADER_LEN..]);
            b[32..36].copy_from_slice(&crc.to_le_bytes());
        };
        let mut kind = mid.to_vec();
        kind[6] = 9;
        recrc(&mut kind);
        let mut reserved = mid.to_vec();
        reserved[37] = 1;
        let mut mark = mid.to_vec();
        mark[6] = BlockKind::EpochMark as u8;
        recrc(&mut mark);
        let mut v0 = mid.to_vec();
        v0[4] = 0;
        recrc(&mut v0);
        for bad in [kind, reserved, mark, v0] {
            let mut s = out[..offs[1]].to_vec();
            s.extend_from_slice(&bad);
            s.extend_from_slice(&out[offs[2]..]);
            assert_corrupt(read_all(&s).1, offs[1]);
        }
    }

    #[test]
    fn malformed_entries() {
        let mut p = Vec::new();
        let at = begin_txn(&mut p, 1, 2);
        push_write(&mut p, 1, WriteOp::Put, b"k", b"v");
        finish_txn(&mut p, at, 1);
        let good = p.len();

        // nwrites says 2, only 1 there.
        let mut two = p.clone();
        finish_txn(&mut two, 0, 2);
        let mut it = entries(&two);
        let e = it.next().unwrap().unwrap_err();
        assert!(e.contains("offset 0"), "{e}");
        assert!(it.next().is_none());

        // A second, truncated entry after a good one.
        let mut cut = p.clone();
        begin_txn(&mut cut, 3, 4);
        cut.truncate(good + 10);
        let mut it = entries(&cut);
        assert_eq!(it.next().unwrap().unwrap().stamp, 2);
        let e = it.next().unwrap().unwrap_err();
        assert!(e.contains(&format!("offset {good}")), "{e}");
        assert!(it.next().is_none());

        // Bad op.
        let mut op = p.clone();
        op[ENTRY_FIXED + 4] = 7;
        assert!(entries(&op).next().unwrap().is_err());

        // Delete with a value.
        let mut del = p.clone();
        del[ENTRY_FIXED + 4] = WriteOp::Delete as u8;
        assert!(entries(&del).next().unwrap().is_err());

        // Key length past the end.
        let mut klen = p.clone();
        klen[ENTRY_FIXED + 5] = 200;
        assert!(entries(&klen).next().unwrap().is_err());
    }

    fn txn_strategy() -> impl Strategy<Value = Txn> {
        let write = (
            any::<u32>(),
            any::<bool>(),
            prop::collection::vec(any::<u8>(), 0..24),
            prop::collection::vec(any::<u8>(), 0..80),
        )
            .prop_map(|(table, del, key, val)| {
                if del {
                    (table, WriteOp::Delete, key, Vec::new())
                } else {
                    (table, WriteOp::Put, key, val)
                }
            });
        (
            any::<u64>(),
            any::<u64>(),
            prop::collection::vec(write, 0..6),
        )
    }

    /// Blocks of transactions, with an epoch mark after some of them.
    fn stream_strategy() -> impl Strategy<Value = Vec<(Vec<Txn>, bool)>> {
        prop::collection::vec(
            (prop::collection::vec(txn_strategy(), 0..5), any::<bool>()),
            0..6,
        )
    }

    /// Encodes a stream; returns the bytes and the end offset of each block.
    fn encode_stream(blocks: &[(Vec<Txn>, bool)]) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        let mut ends = Vec::new();
        let mut seq = 0;
        for (txns, mark) in blocks {
            txns_block(&mut out, seq, txns);
            seq += 1;
            ends.push(out.len());
            if *mark {
                write_block(&mut out, BlockKind::EpochMark, 3, seq, seq * 2, &[]);
                seq += 1;
                ends.push(out.len());
            }
        }
        (out, ends)
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
            ..ProptestConfig::default()
        })]

        #[test]
        fn prop_entries_round_trip(txns in prop::collection::vec(txn_strategy(), 0..12)) {
            let payload = encode_txns(&txns);
            prop_assert_eq!(decode_txns(&payload), txns);
        }

        #[test]
        fn prop_stream_round_trip(blocks in stream_strategy()) {
            let (out, ends) = encode_stream(&blocks);
            let (read, damage) = read_all(&out);
            prop_assert_eq!(damage, None);
            prop_assert_eq!(read.len(), ends.len());
            let txn_blocks: Vec<_> = read.iter().filter(|b| b.header.kind == BlockKind::Txns).collect();
            prop_assert_eq!(txn_blocks.len(), blocks.len());
            for (b, (txns, _)) in txn_blocks.iter().zip(&blocks) {
                prop_assert_eq!(&decode_txns(b.payload), txns);
            }
            for (i, b) in read.iter().enumerate() {
                prop_assert_eq!(b.header.seq, i as u64);
                prop_assert_eq!(b.end() as usize, ends[i]);
            }
        }

        #[test]
        fn prop_truncation_is_never_corrupt(
            blocks in stream_strategy(),
            cut in any::<prop::sample::Index>(),
            zeros in 0usize..100,
        ) {
            let (out, ends) = encode_stream(&blocks);
            let cut = cut.index(out.len() + 1);
            let mut bytes = out[..cut].to_vec();
            // Optionally followed by preallocated zeros.
            bytes.resize(cut + zeros, 0);
            let (read, damage) = read_all(&bytes);
            // Blocks that are whole in `bytes` (a block cut inside a run of
            // zeros at its end is made whole again by the zero padding).
            let whole = ends
                .iter()
                .filter(|&&e| e <= bytes.len() && bytes[..e] == out[..e])
                .count();
            prop_assert_eq!(read.len(), whole);
            let valid_end = if whole == 0 { 0 } else { ends[whole - 1] };
            match damage {
                None => prop_assert!(bytes[valid_end..].iter().all(|&b| b == 0)),
                Some(Damage::TornTail { offset, .. }) => {
                    prop_assert!(valid_end < cut);
                    prop_assert_eq!(offset, valid_end as u64);
                }
                Some(other) => prop_assert!(false, "unexpected {:?}", other),
            }
        }
    }
}

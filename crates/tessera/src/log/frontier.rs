//! The durable frontier, `tessera.frontier`: what every acknowledgement of a
//! durable commit depended on, recorded where a later recovery checks it
//! against what it finds.
//!
//! A commit of epoch `e` is acknowledged once the durable epoch `D >= e`
//! (Silo 4.10). `D` comes from the loggers' epoch marks in the segment
//! files, so on its own a shortened log simply yields a smaller `D`: a
//! deleted newest segment, a stream truncated to half or a logger's whole
//! stream gone would look like an older, clean log. The frontier closes
//! that hole. Before the engine publishes a new `D` (and so before any
//! `Worker::run` under `Durability::Sync` returns or a `wait_durable`
//! wakes), the logger that advanced it writes and `fdatasync`s this file:
//!
//! * `durable`: the durable epoch about to be published;
//! * per logger stream (every stream in the directory, the current run's
//!   and older runs'): the segment and offset just past its newest synced
//!   epoch mark, that mark, and the oldest segment that must still exist
//!   (raised, and recorded here, before a checkpoint deletes the segments
//!   it covers);
//! * `meta_gen`: the generation of `tessera.meta` this frontier was written
//!   under, so an older copy of `tessera.meta` (say, without a void range
//!   written after a crash) is recognized.
//!
//! Recovery refuses a stream that ends before its recorded position, a
//! missing oldest segment, damage before the recorded position, and a
//! `tessera.meta` older than `meta_gen` (see `recovery`). Anything after
//! the frontier was never acknowledged: a crash may leave a torn tail
//! there, and cutting it loses nothing.
//!
//! ## Layout
//!
//! Two fixed slots of [`SLOT_BYTES`], written alternately (slot `gen % 2`)
//! in place, like a file system's superblock copies: a torn write damages
//! only the slot being written, and the other still holds the previous
//! frontier (one epoch older: every acknowledgement it covers is still
//! checked). A slot, little-endian:
//!
//! ```text
//! 0   magic u32 = FRONTIER_MAGIC ("TSFR")
//! 4   version u16 = 1
//! 6   nloggers u16
//! 8   gen u64          (write counter; the valid slot with the larger wins)
//! 16  durable u64
//! 24  meta_gen u64
//! 32  nloggers x { logger u16, 0 u16, 0 u32, first_segno u64, segno u64,
//!                  offset u64, mark u64 }          (40 bytes each)
//! ..  crc u32 = CRC32C of every byte before it; the rest of the slot is 0
//! ```
//!
//! An all-zero slot has never been written (a new file has one) and is not
//! damage; a slot that fails its checksum beside a valid one is reported as
//! a warning (a torn write or damage, the older copy is used); two bad
//! slots are damage.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// File name of the frontier.
pub const FRONTIER_FILE: &str = "tessera.frontier";
/// Bytes of one slot.
pub const SLOT_BYTES: usize = 4096;
/// "TSFR" read as a big-endian word, stored little-endian.
pub const FRONTIER_MAGIC: u32 = 0x5453_4652;
const VERSION: u16 = 1;
const FIXED: usize = 32;
const PER_LOGGER: usize = 40;
/// Most logger streams one frontier can describe.
pub const MAX_STREAMS: usize = (SLOT_BYTES - FIXED - 4) / PER_LOGGER;

/// One logger stream's recorded position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamFrontier {
    /// Logger number.
    pub logger: u16,
    /// The oldest segment that must exist (older ones are covered by the
    /// checkpoint and may be gone; past `segno` when a checkpoint covers
    /// the whole stream).
    pub first_segno: u64,
    /// The segment holding the newest synced epoch mark.
    pub segno: u64,
    /// Offset just past that mark in `segno`.
    pub offset: u64,
    /// That mark's epoch.
    pub mark: u64,
}

/// Contents of one slot of `tessera.frontier`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frontier {
    /// Write counter.
    pub gen: u64,
    /// The durable epoch published after this write.
    pub durable: u64,
    /// Generation of `tessera.meta` when this was written.
    pub meta_gen: u64,
    /// Per logger stream, in logger order.
    pub streams: Vec<StreamFrontier>,
}

impl Frontier {
    /// The stream of `logger`, if recorded.
    pub fn stream(&self, logger: u16) -> Option<&StreamFrontier> {
        self.streams.iter().find(|s| s.logger == logger)
    }

    /// The stream of `logger`, added (at segment 0, offset 0) if missing.
    pub fn stream_mut(&mut self, logger: u16) -> &mut StreamFrontier {
        let i = match self.streams.iter().position(|s| s.logger == logger) {
            Some(i) => i,
            None => {
                self.streams.push(StreamFrontier {
                    logger,
                    ..StreamFrontier::default()
                });
                self.streams.sort_by_key(|s| s.logger);
                self.streams
                    .iter()
                    .position(|s| s.logger == logger)
                    .expect("just added")
            }
        };
        &mut self.streams[i]
    }

    /// Encodes into one slot.
    ///
    /// # Panics
    ///
    /// With more than [`MAX_STREAMS`] streams (the engine allows 64 loggers).
    pub fn encode(&self) -> [u8; SLOT_BYTES] {
        assert!(self.streams.len() <= MAX_STREAMS, "too many logger streams");
        let mut b = [0u8; SLOT_BYTES];
        b[0..4].copy_from_slice(&FRONTIER_MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&VERSION.to_le_bytes());
        b[6..8].copy_from_slice(&(self.streams.len() as u16).to_le_bytes());
        b[8..16].copy_from_slice(&self.gen.to_le_bytes());
        b[16..24].copy_from_slice(&self.durable.to_le_bytes());
        b[24..32].copy_from_slice(&self.meta_gen.to_le_bytes());
        let mut at = FIXED;
        for s in &self.streams {
            b[at..at + 2].copy_from_slice(&s.logger.to_le_bytes());
            b[at + 8..at + 16].copy_from_slice(&s.first_segno.to_le_bytes());
            b[at + 16..at + 24].copy_from_slice(&s.segno.to_le_bytes());
            b[at + 24..at + 32].copy_from_slice(&s.offset.to_le_bytes());
            b[at + 32..at + 40].copy_from_slice(&s.mark.to_le_bytes());
            at += PER_LOGGER;
        }
        let crc = crc32c::crc32c(&b[..at]);
        b[at..at + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes one slot: `Ok(None)` for a never-written (all-zero) slot,
    /// `Err(why)` for a damaged one.
    pub fn decode(b: &[u8]) -> Result<Option<Frontier>, String> {
        if b.len() != SLOT_BYTES {
            return Err(format!("slot of {} bytes, expected {SLOT_BYTES}", b.len()));
        }
        if b.iter().all(|&x| x == 0) {
            return Ok(None);
        }
        let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]);
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let magic = u32::from_le_bytes(b[0..4].try_into().expect("4 bytes"));
        if magic != FRONTIER_MAGIC {
            return Err(format!("bad magic {magic:#010x}"));
        }
        let version = u16_at(4);
        let n = u16_at(6) as usize;
        if n > MAX_STREAMS {
            return Err(format!("{n} logger streams (at most {MAX_STREAMS})"));
        }
        let end = FIXED + n * PER_LOGGER;
        let stored = u32::from_le_bytes(b[end..end + 4].try_into().expect("4 bytes"));
        let computed = crc32c::crc32c(&b[..end]);
        if stored != computed {
            return Err(format!(
                "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
            ));
        }
        if version != VERSION {
            return Err(format!(
                "format version {version}, this build reads {VERSION}"
            ));
        }
        if b[end + 4..].iter().any(|&x| x != 0) {
            return Err("non-zero bytes after the checksum".into());
        }
        // Writers increment the generation (and alternate slots by it): one
        // near the end of the range would wrap and be outranked by the
        // stale slot. No real count of writes gets there.
        if u64_at(8) > MAX_GEN {
            return Err(format!("generation {} out of range", u64_at(8)));
        }
        let mut f = Frontier {
            gen: u64_at(8),
            durable: u64_at(16),
            meta_gen: u64_at(24),
            streams: Vec::with_capacity(n),
        };
        for i in 0..n {
            let at = FIXED + i * PER_LOGGER;
            let s = StreamFrontier {
                logger: u16_at(at),
                first_segno: u64_at(at + 8),
                segno: u64_at(at + 16),
                offset: u64_at(at + 24),
                mark: u64_at(at + 32),
            };
            if u16_at(at + 2) != 0 || b[at + 4..at + 8] != [0; 4] {
                return Err(format!("stream {i}: non-zero reserved bytes"));
            }
            if f.streams.last().is_some_and(|p| p.logger >= s.logger) {
                return Err(format!("stream {i}: loggers out of order"));
            }
            f.streams.push(s);
        }
        Ok(Some(f))
    }
}

/// What [`read`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontierRead {
    /// The newest valid slot.
    pub frontier: Frontier,
    /// A damaged slot beside it (torn write or damage), if any.
    pub warning: Option<String>,
}

/// Reads `dir/tessera.frontier`: `Ok(None)` if there is no such file;
/// `Err(Error::Corrupt)` naming the file if neither slot is valid.
pub fn read(dir: &Path) -> Result<Option<FrontierRead>, Error> {
    let path = dir.join(FRONTIER_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("cannot read {}", path.display()), e)),
    };
    decode_file(&path, &bytes).map(Some)
}

/// Decodes a whole frontier file's bytes (`path` names it in messages).
pub fn decode_file(path: &Path, bytes: &[u8]) -> Result<FrontierRead, Error> {
    if bytes.len() != 2 * SLOT_BYTES {
        return Err(Error::Corrupt(format!(
            "{}: {} bytes, expected {} (truncated, extended or not a frontier file)",
            path.display(),
            bytes.len(),
            2 * SLOT_BYTES
        )));
    }
    let slots = [
        Frontier::decode(&bytes[..SLOT_BYTES]),
        Frontier::decode(&bytes[SLOT_BYTES..]),
    ];
    let mut best: Option<(usize, Frontier)> = None;
    let mut bad = Vec::new();
    for (i, s) in slots.into_iter().enumerate() {
        match s {
            Ok(Some(f)) => {
                if best.as_ref().is_none_or(|(_, b)| f.gen > b.gen) {
                    best = Some((i, f));
                }
            }
            Ok(None) => {}
            Err(why) => bad.push(format!("copy {i} (offset {}): {why}", i * SLOT_BYTES)),
        }
    }
    match best {
        Some((_, frontier)) => Ok(FrontierRead {
            frontier,
            warning: (!bad.is_empty()).then(|| {
                format!(
                    "{}: {}; using the other copy (a torn write, or damage)",
                    path.display(),
                    bad.join("; ")
                )
            }),
        }),
        None if bad.is_empty() => Err(Error::Corrupt(format!(
            "{}: both copies are empty (zeroed)",
            path.display()
        ))),
        None => Err(Error::Corrupt(format!(
            "{}: no valid copy: {}",
            path.display(),
            bad.join("; ")
        ))),
    }
}

/// Writes the frontier in place, alternating slots, and syncs it.
#[derive(Debug)]
pub struct FrontierWriter {
    file: File,
    path: PathBuf,
}

impl FrontierWriter {
    /// Replaces `dir/tessera.frontier` atomically with a file holding `f`
    /// (the other slot zero): written to a temporary file, synced, renamed
    /// into place, the directory synced. A crash leaves the old file or the
    /// new one, never a file without a valid copy.
    pub fn create(dir: &Path, f: &Frontier) -> Result<FrontierWriter, Error> {
        let path = dir.join(FRONTIER_FILE);
        let tmp = dir.join(format!("{FRONTIER_FILE}.tmp"));
        exhausted(&path, f)?;
        let io = |what: &str, p: &Path, e| Error::io(format!("cannot {what} {}", p.display()), e);
        {
            let file = File::create(&tmp).map_err(|e| io("create", &tmp, e))?;
            file.set_len(2 * SLOT_BYTES as u64)
                .and_then(|_| write_at(&file, &f.encode(), (f.gen % 2) * SLOT_BYTES as u64))
                .and_then(|_| file.sync_all())
                .map_err(|e| io("write", &tmp, e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| io("rename into", &path, e))?;
        super::segment::sync_dir(dir).map_err(|e| io("sync", dir, e))?;
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| io("open", &path, e))?;
        Ok(FrontierWriter { file, path })
    }

    /// Writes `f` into slot `f.gen % 2` and `fdatasync`s.
    pub fn write(&mut self, f: &Frontier) -> Result<(), Error> {
        exhausted(&self.path, f)?;
        let slot = f.encode();
        let at = (f.gen % 2) * SLOT_BYTES as u64;
        write_at(&self.file, &slot, at)
            .and_then(|_| self.file.sync_data())
            .map_err(|e| Error::io(format!("cannot write {}", self.path.display()), e))
    }
}

/// The largest generation a frontier may carry: `read` refuses more as
/// damage, and writers stop (an error) rather than pass it, so a slot is
/// never outranked by a stale one through wrapping.
pub const MAX_GEN: u64 = i64::MAX as u64;

fn exhausted(path: &Path, f: &Frontier) -> Result<(), Error> {
    if f.gen > MAX_GEN {
        return Err(Error::Corrupt(format!(
            "{}: generation numbers exhausted (at {MAX_GEN})",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(unix)]
fn write_at(f: &File, buf: &[u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, at)
}

#[cfg(not(unix))]
fn write_at(mut f: &File, buf: &[u8], at: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    f.seek(SeekFrom::Start(at))?;
    f.write_all(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(gen: u64) -> Frontier {
        Frontier {
            gen,
            durable: 40 + gen,
            meta_gen: 3,
            streams: vec![
                StreamFrontier {
                    logger: 0,
                    first_segno: 2,
                    segno: 5,
                    offset: 4096,
                    mark: 40 + gen,
                },
                StreamFrontier {
                    logger: 1,
                    first_segno: 0,
                    segno: 1,
                    offset: 80,
                    mark: 41 + gen,
                },
            ],
        }
    }

    #[test]
    fn slots_alternate_and_the_newest_valid_one_wins() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let mut w = FrontierWriter::create(dir.path(), &sample(1)).unwrap();
        let r = read(dir.path()).unwrap().unwrap();
        assert_eq!((r.frontier, r.warning), (sample(1), None));
        w.write(&sample(2)).unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap().frontier, sample(2));
        // Damage to the newest slot (a torn write): the older one is used,
        // with a warning.
        let p = dir.path().join(FRONTIER_FILE);
        let mut b = std::fs::read(&p).unwrap();
        b[10] ^= 0xff; // slot 0 holds gen 2
        std::fs::write(&p, &b).unwrap();
        let r = read(dir.path()).unwrap().unwrap();
        assert_eq!(r.frontier, sample(1));
        assert!(r.warning.unwrap().contains("copy 0"));
        // Both damaged: refused, naming the file.
        b[SLOT_BYTES + 20] ^= 1;
        std::fs::write(&p, &b).unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(
            matches!(e, Error::Corrupt(ref m) if m.contains(FRONTIER_FILE)),
            "{e}"
        );
        // Truncated.
        std::fs::write(&p, &b[..100]).unwrap();
        assert!(matches!(read(dir.path()), Err(Error::Corrupt(_))));
        // Zeroed: refused.
        std::fs::write(&p, vec![0u8; 2 * SLOT_BYTES]).unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("both copies are empty"), "{e}");
        // Creating again replaces it whole.
        let mut w = FrontierWriter::create(dir.path(), &sample(7)).unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap().frontier, sample(7));
        w.write(&sample(8)).unwrap();
        assert_eq!(read(dir.path()).unwrap().unwrap().frontier, sample(8));
    }

    #[test]
    fn decode_rejects_malformed_slots() {
        let good = sample(1).encode();
        assert_eq!(Frontier::decode(&good).unwrap(), Some(sample(1)));
        // A generation a writer could not follow without wrapping.
        let with_gen = |gen| Frontier { gen, ..sample(1) };
        let last = with_gen(MAX_GEN);
        assert_eq!(Frontier::decode(&last.encode()).unwrap(), Some(last));
        let e = Frontier::decode(&with_gen(u64::MAX).encode()).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        // Too many streams claimed.
        let mut b = good;
        b[6..8].copy_from_slice(&1000u16.to_le_bytes());
        assert!(Frontier::decode(&b).is_err());
        // Non-zero reserved bytes behind a valid checksum.
        let mut b = good;
        b[FIXED + 3] = 1;
        let end = FIXED + 2 * PER_LOGGER;
        let crc = crc32c::crc32c(&b[..end]);
        b[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        assert!(Frontier::decode(&b).unwrap_err().contains("reserved"));
        // Wrong length.
        assert!(Frontier::decode(&good[..100]).is_err());
        // Stream lookup and insertion keep logger order.
        let mut f = sample(1);
        f.stream_mut(5).segno = 3;
        f.stream_mut(3).segno = 2;
        let order: Vec<u16> = f.streams.iter().map(|s| s.logger).collect();
        assert_eq!(order, vec![0, 1, 3, 5]);
        assert_eq!(f.stream(5).unwrap().segno, 3);
        assert_eq!(Frontier::decode(&f.encode()).unwrap(), Some(f));
    }
}

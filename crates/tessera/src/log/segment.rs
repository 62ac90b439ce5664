//! Segment files: each logger appends its stream of blocks to a sequence of
//! files `log-{logger:03}-{segno:08}.tlog` in the log directory, starting a
//! new file once the current one has reached the configured size.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

const PREFIX: &str = "log-";
const SUFFIX: &str = ".tlog";

/// File name of a segment: `log-{logger:03}-{segno:08}.tlog`.
pub fn segment_name(logger: u16, segno: u64) -> String {
    format!("{PREFIX}{logger:03}-{segno:08}{SUFFIX}")
}

/// The largest segment number: recovery refuses more as damage, a logger
/// stops (an error) rather than rotate past it.
pub const MAX_SEGNO: u64 = i64::MAX as u64;

/// Parses a segment file name back into `(logger, segno)`; `None` for any
/// other file (including names that [`segment_name`] would not produce,
/// such as unpadded numbers).
pub fn parse_segment_name(name: &str) -> Option<(u16, u64)> {
    let mid = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    let (l, s) = mid.split_once('-')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !digits(l) || !digits(s) {
        return None;
    }
    let logger: u16 = l.parse().ok()?;
    let segno: u64 = s.parse().ok()?;
    // Only the canonical spelling (exact zero padding) counts.
    (segment_name(logger, segno) == name).then_some((logger, segno))
}

/// Every segment in `dir`, grouped by logger, sorted by segno. Files whose
/// names are not segment names are ignored.
pub fn list_segments(dir: &Path) -> io::Result<BTreeMap<u16, Vec<(u64, PathBuf)>>> {
    let mut out: BTreeMap<u16, Vec<(u64, PathBuf)>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some((logger, segno)) = name.to_str().and_then(parse_segment_name) else {
            continue;
        };
        if !entry.file_type()?.is_file() {
            continue;
        }
        out.entry(logger).or_default().push((segno, entry.path()));
    }
    for segs in out.values_mut() {
        segs.sort_unstable_by_key(|&(segno, _)| segno);
    }
    Ok(out)
}

/// Appends blocks to a logger's current segment and rotates to a new file
/// once `segment_bytes` is exceeded.
///
/// After any I/O error (a failed write or sync) the writer refuses further
/// appends and syncs: the file may hold a partial write, and after a failed
/// fsync the kernel's view of what is durable cannot be trusted.
#[derive(Debug)]
pub struct SegmentWriter {
    dir: PathBuf,
    logger: u16,
    segno: u64,
    segment_bytes: u64,
    file: File,
    path: PathBuf,
    /// Bytes in the current segment.
    cur_len: u64,
    /// Bytes appended through this writer, all segments.
    total: u64,
    failed: bool,
}

/// Creates a new segment file (which must not exist) and makes its name
/// durable.
fn create_segment(dir: &Path, logger: u16, segno: u64) -> io::Result<(File, PathBuf)> {
    let path = dir.join(segment_name(logger, segno));
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    sync_dir(dir)?;
    Ok((file, path))
}

impl SegmentWriter {
    /// Starts (creating `dir` if needed) a new segment `segno` for `logger`;
    /// the file must not exist yet (an `AlreadyExists` error otherwise).
    ///
    /// `segment_bytes` is the size at which the writer moves on to the next
    /// segment; a segment always receives at least one append, so a single
    /// append larger than `segment_bytes` makes one larger segment.
    pub fn create(
        dir: &Path,
        logger: u16,
        segno: u64,
        segment_bytes: u64,
    ) -> io::Result<SegmentWriter> {
        if !dir.is_dir() {
            std::fs::create_dir_all(dir)?;
            // Make the new directory's own name durable.
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
        let (file, path) = create_segment(dir, logger, segno)?;
        Ok(SegmentWriter {
            dir: dir.to_path_buf(),
            logger,
            segno,
            segment_bytes,
            file,
            path,
            cur_len: 0,
            total: 0,
            failed: false,
        })
    }

    fn check(&self) -> io::Result<()> {
        if self.failed {
            Err(io::Error::other(format!(
                "log segment writer for {} failed earlier",
                self.path.display()
            )))
        } else {
            Ok(())
        }
    }

    /// Runs `f`, marking the writer failed if it errs.
    fn guard<T>(&mut self, f: impl FnOnce(&mut Self) -> io::Result<T>) -> io::Result<T> {
        self.check()?;
        let r = f(self);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    /// Appends `bytes` (whole blocks) with one `write_all`. If the current
    /// file has already reached `segment_bytes` before this append, it is
    /// first synced and closed, and segment `segno + 1` is created (with its
    /// directory synced so the new name is durable).
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.guard(|w| {
            if w.cur_len > 0 && w.cur_len >= w.segment_bytes {
                w.rotate()?;
            }
            w.file.write_all(bytes)?;
            w.cur_len += bytes.len() as u64;
            w.total += bytes.len() as u64;
            Ok(())
        })
    }

    fn rotate(&mut self) -> io::Result<()> {
        if self.segno >= MAX_SEGNO {
            return Err(io::Error::other(format!(
                "segment numbers exhausted (at {MAX_SEGNO})"
            )));
        }
        self.file.sync_data()?;
        let (file, path) = create_segment(&self.dir, self.logger, self.segno + 1)?;
        // Dropping the old handle closes it.
        self.file = file;
        self.path = path;
        self.segno += 1;
        self.cur_len = 0;
        Ok(())
    }

    /// Makes everything appended to the current segment durable
    /// (`fdatasync`, [`File::sync_data`]). Earlier segments were synced when
    /// the writer moved past them.
    pub fn sync(&mut self) -> io::Result<()> {
        self.guard(|w| w.file.sync_data())
    }

    /// The logger this writer belongs to.
    pub fn logger(&self) -> u16 {
        self.logger
    }

    /// Number of the current segment.
    pub fn segno(&self) -> u64 {
        self.segno
    }

    /// Path of the current segment file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the current segment.
    pub fn len(&self) -> u64 {
        self.cur_len
    }

    /// Whether the current segment is empty.
    pub fn is_empty(&self) -> bool {
        self.cur_len == 0
    }

    /// Total bytes appended through this writer, over all its segments.
    pub fn bytes_written(&self) -> u64 {
        self.total
    }
}

/// Reads a whole segment file.
pub fn read_segment(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
}

/// Fsyncs a directory, making the names created in it durable. (A no-op on
/// platforms where directories cannot be opened and synced.)
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// Cuts the file at `path` to `len` bytes and syncs it (used to truncate a
/// torn tail).
pub fn truncate_file(path: &Path, len: u64) -> io::Result<()> {
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(len)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::format::{write_block, BlockKind, BlockReader};

    #[test]
    fn name_round_trip() {
        assert_eq!(segment_name(1, 2), "log-001-00000002.tlog");
        assert_eq!(segment_name(65535, 123_456_789), "log-65535-123456789.tlog");
        for (l, s) in [(0, 0), (1, 2), (999, 99_999_999), (1000, 100_000_000)] {
            assert_eq!(parse_segment_name(&segment_name(l, s)), Some((l, s)));
        }
        assert_eq!(
            parse_segment_name(&segment_name(u16::MAX, u64::MAX)),
            Some((u16::MAX, u64::MAX))
        );
        for bad in [
            "",
            "log-001-00000002",
            "log-001-00000002.tlog.tmp",
            "log-1-2.tlog",
            "log-001-2.tlog",
            "log-001-+0000002.tlog",
            "log--00000002.tlog",
            "log-001-.tlog",
            "log-70000-00000002.tlog",
            "log-001-00000002-3.tlog",
            "xlog-001-00000002.tlog",
            "checkpoint-001",
        ] {
            assert_eq!(parse_segment_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn list_groups_and_sorts() {
        let dir = tempfile::tempdir().unwrap();
        for (l, s) in [(2, 5), (0, 3), (2, 1), (0, 10), (0, 1), (7, 0)] {
            std::fs::write(dir.path().join(segment_name(l, s)), b"").unwrap();
        }
        std::fs::write(dir.path().join("README"), b"x").unwrap();
        std::fs::write(dir.path().join("log-1-2.tlog"), b"x").unwrap();
        std::fs::create_dir(dir.path().join(segment_name(9, 9))).unwrap();
        let segs = list_segments(dir.path()).unwrap();
        let got: Vec<(u16, Vec<u64>)> = segs
            .iter()
            .map(|(&l, v)| (l, v.iter().map(|(s, _)| *s).collect()))
            .collect();
        assert_eq!(
            got,
            vec![(0, vec![1, 3, 10]), (2, vec![1, 5]), (7, vec![0])]
        );
        assert_eq!(segs[&2][1].1, dir.path().join(segment_name(2, 5)));
        assert!(list_segments(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn create_refuses_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let w = SegmentWriter::create(dir.path(), 1, 4, 1024).unwrap();
        assert_eq!(w.path(), dir.path().join(segment_name(1, 4)));
        let err = SegmentWriter::create(dir.path(), 1, 4, 1024).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        // Another segno or logger is fine.
        SegmentWriter::create(dir.path(), 1, 5, 1024).unwrap();
        SegmentWriter::create(dir.path(), 2, 4, 1024).unwrap();
    }

    #[test]
    fn create_makes_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a").join("log");
        let mut w = SegmentWriter::create(&sub, 0, 0, 1024).unwrap();
        w.append(b"abc").unwrap();
        w.sync().unwrap();
        assert_eq!(read_segment(w.path()).unwrap(), b"abc");
    }

    #[test]
    fn rotation_after_size_reached() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SegmentWriter::create(dir.path(), 3, 7, 100).unwrap();
        assert_eq!((w.logger(), w.segno()), (3, 7));
        let mut seq = 0;
        let mut block = |len: usize| {
            let mut b = Vec::new();
            write_block(&mut b, BlockKind::Txns, 3, seq, 1, &vec![seq as u8; len]);
            seq += 1;
            b
        };
        // 60 + 60 = 120 bytes: the second append goes into segment 7 (only 60
        // bytes before it), the third starts segment 8.
        let (b0, b1, b2) = (block(20), block(20), block(20));
        w.append(&b0).unwrap();
        assert_eq!(w.segno(), 7);
        w.append(&b1).unwrap();
        assert_eq!(w.segno(), 7);
        w.append(&b2).unwrap();
        assert_eq!(w.segno(), 8);
        assert_eq!(w.path(), dir.path().join(segment_name(3, 8)));
        // One append bigger than the limit still goes whole into a segment.
        let big = block(500);
        w.append(&big).unwrap();
        assert_eq!(w.segno(), 8);
        let b4 = block(0);
        w.append(&b4).unwrap();
        assert_eq!(w.segno(), 9);
        w.sync().unwrap();
        assert_eq!(
            w.bytes_written(),
            (b0.len() + b1.len() + b2.len() + big.len() + b4.len()) as u64
        );

        let segs = list_segments(dir.path()).unwrap();
        let files: Vec<_> = segs[&3].iter().map(|(s, _)| *s).collect();
        assert_eq!(files, vec![7, 8, 9]);
        let contents: Vec<Vec<u8>> = segs[&3]
            .iter()
            .map(|(_, p)| read_segment(p).unwrap())
            .collect();
        assert_eq!(contents[0], [b0, b1].concat());
        assert_eq!(contents[1], [b2, big].concat());
        assert_eq!(contents[2], b4);
        // Block sequence numbers continue across the files.
        let seqs: Vec<u64> = contents
            .iter()
            .flat_map(|c| {
                BlockReader::new(c)
                    .map(|b| b.unwrap().header.seq)
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn rotation_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(segment_name(0, 1)), b"old").unwrap();
        let mut w = SegmentWriter::create(dir.path(), 0, 0, 1).unwrap();
        w.append(b"first").unwrap();
        let err = w.append(b"second").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        // The writer is now failed.
        assert!(w.append(b"third").is_err());
        assert!(w.sync().is_err());
        assert_eq!(
            read_segment(&dir.path().join(segment_name(0, 1))).unwrap(),
            b"old"
        );
    }

    #[test]
    fn truncate_cuts_the_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = SegmentWriter::create(dir.path(), 0, 0, 1 << 20).unwrap();
        w.append(b"0123456789").unwrap();
        w.sync().unwrap();
        let path = w.path().to_path_buf();
        drop(w);
        truncate_file(&path, 4).unwrap();
        assert_eq!(read_segment(&path).unwrap(), b"0123");
        sync_dir(dir.path()).unwrap();
    }
}

//! The data directory's control file, `tessera.meta`: the format version,
//! the catalog (table ids and names, so log records can name tables by id),
//! the void epoch ranges left by earlier crashes, and the newest complete
//! checkpoint. Small, human-readable, checksummed (CRC32C), and replaced
//! atomically (write a temporary file, fsync, rename, fsync the directory),
//! so a crash leaves either the old or the new file, never a mix.
//!
//! Void ranges: after a crash, entries with epochs above the recovered
//! durable epoch `D` may sit in the old segments (written, not yet covered
//! by every logger's mark). They are not part of the database. The next run
//! starts its epochs above every epoch seen, and records `void D M` (epochs
//! `e` with `D < e <= M` are void) here *before* its loggers write anything,
//! so a later recovery, whose durable epoch will exceed `M`, still ignores
//! them without rewriting old segments.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Error;

use super::format::FORMAT_VERSION;

/// File name of the control file.
pub const META_FILE: &str = "tessera.meta";

/// The largest generation `tessera.meta` may record (`Meta::load`
/// refuses more; `Meta::store` refuses to go past it). Far beyond any real
/// count of rewrites, and exact in a JSON number reader using `i64`.
pub const MAX_GEN: u64 = i64::MAX as u64;

/// A table as recorded in the catalog.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaTable {
    /// Table id (its position in creation order).
    pub id: u32,
    /// Secondary index (informational).
    pub secondary: bool,
    /// Name.
    pub name: String,
}

/// Contents of `tessera.meta`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Tables in id order.
    pub tables: Vec<MetaTable>,
    /// Void epoch ranges `(lo, hi)`: epochs `e` with `lo < e <= hi` are void.
    pub voids: Vec<(u64, u64)>,
    /// Newest complete checkpoint: (file name, epoch it is consistent at).
    pub checkpoint: Option<(String, u64)>,
    /// The last run: how many loggers it started, and the durable epoch it
    /// started from (every logger of that run wrote a mark of it first).
    pub run: Option<(u32, u64)>,
    /// With `checkpoint`: the durable epoch the checkpoint waited for before
    /// it was recorded (the log must reach it: rows of transactions up to
    /// that epoch may be in the file), and the file's size in bytes.
    pub checkpoint_needs: Option<(u64, u64)>,
    /// Generation: incremented by every [`Meta::store`]. `tessera.frontier`
    /// records the generation it was written under, so an older copy of
    /// this file is recognized.
    pub gen: u64,
}

impl Meta {
    /// Whether entries of epoch `e` lie in a void range.
    pub fn is_void(&self, e: u64) -> bool {
        self.voids.iter().any(|&(lo, hi)| lo < e && e <= hi)
    }

    fn render(&self) -> String {
        let mut s = format!("tessera-meta {FORMAT_VERSION}\ngen {}\n", self.gen);
        for t in &self.tables {
            s += &format!(
                "table {} {} {}\n",
                t.id,
                if t.secondary { "secondary" } else { "primary" },
                t.name
            );
        }
        for (lo, hi) in &self.voids {
            s += &format!("void {lo} {hi}\n");
        }
        if let Some((f, e)) = &self.checkpoint {
            s += &format!("checkpoint {e} {f}\n");
        }
        if let Some((needs, bytes)) = &self.checkpoint_needs {
            s += &format!("checkpoint-needs {needs} {bytes}\n");
        }
        if let Some((l, d)) = &self.run {
            s += &format!("run {l} {d}\n");
        }
        let crc = crc32c::crc32c(s.as_bytes());
        s += &format!("crc32c {crc:08x}\n");
        s
    }

    fn parse(path: &Path, text: &str) -> Result<Meta, Error> {
        let bad = |line: usize, why: &str| {
            Error::Corrupt(format!("{} line {line}: {why}", path.display()))
        };
        let body_end = text
            .rfind("crc32c ")
            .ok_or_else(|| bad(0, "no crc32c line (truncated or not a tessera file)"))?;
        let (body, tail) = text.split_at(body_end);
        let want = u32::from_str_radix(tail.trim_start_matches("crc32c ").trim(), 16)
            .map_err(|_| bad(body.lines().count() + 1, "malformed crc32c line"))?;
        let got = crc32c::crc32c(body.as_bytes());
        if want != got {
            return Err(bad(
                body.lines().count() + 1,
                &format!("checksum mismatch (stored {want:08x}, computed {got:08x})"),
            ));
        }
        let mut m = Meta::default();
        for (i, line) in body.lines().enumerate() {
            let n = i + 1;
            let mut parts = line.splitn(4, ' ');
            let word = parts.next().unwrap_or("");
            match word {
                "tessera-meta" => {
                    let v: u16 = parts
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad(n, "malformed version"))?;
                    if v > FORMAT_VERSION {
                        return Err(Error::NewerFormat(format!(
                            "{} was written by format version {v}; this build reads up to {FORMAT_VERSION}",
                            path.display()
                        )));
                    }
                }
                "table" => {
                    let id: u32 = parts
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad(n, "malformed table id"))?;
                    let secondary = match parts.next() {
                        Some("primary") => false,
                        Some("secondary") => true,
                        _ => return Err(bad(n, "table kind must be primary or secondary")),
                    };
                    let rest = [parts.next(), parts.next()]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join(" ");
                    if id as usize != m.tables.len() || rest.is_empty() {
                        return Err(bad(n, "tables must be listed in id order with a name"));
                    }
                    m.tables.push(MetaTable {
                        id,
                        secondary,
                        name: rest,
                    });
                }
                "void" => {
                    let lo = parts.next().and_then(|v| v.parse().ok());
                    let hi = parts.next().and_then(|v| v.parse().ok());
                    match (lo, hi) {
                        (Some(lo), Some(hi)) if lo < hi => m.voids.push((lo, hi)),
                        _ => return Err(bad(n, "malformed void range")),
                    }
                }
                "checkpoint" => {
                    let e = parts.next().and_then(|v| v.parse().ok());
                    let f = [parts.next(), parts.next()]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join(" ");
                    match e {
                        Some(e) if !f.is_empty() => m.checkpoint = Some((f, e)),
                        _ => return Err(bad(n, "malformed checkpoint line")),
                    }
                }
                "gen" => {
                    m.gen = parts
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| bad(n, "malformed gen line"))?;
                    // No writer gets near the last generation (one store
                    // per recovery or table creation): found on disk, it is
                    // damage.
                    if m.gen > MAX_GEN {
                        return Err(bad(n, "gen out of range"));
                    }
                }
                "checkpoint-needs" => {
                    let e = parts.next().and_then(|v| v.parse().ok());
                    let b = parts.next().and_then(|v| v.parse().ok());
                    match (e, b) {
                        (Some(e), Some(b)) => m.checkpoint_needs = Some((e, b)),
                        _ => return Err(bad(n, "malformed checkpoint-needs line")),
                    }
                }
                "run" => {
                    let l = parts.next().and_then(|v| v.parse().ok());
                    let d = parts.next().and_then(|v| v.parse().ok());
                    match (l, d) {
                        (Some(l), Some(d)) if l > 0 => m.run = Some((l, d)),
                        _ => return Err(bad(n, "malformed run line")),
                    }
                }
                "" => {}
                other => return Err(bad(n, &format!("unknown entry '{other}'"))),
            }
        }
        if m.checkpoint_needs.is_some() != m.checkpoint.is_some() {
            return Err(bad(
                0,
                "checkpoint and checkpoint-needs lines must come together",
            ));
        }
        Ok(m)
    }

    /// Read `dir/tessera.meta`; `None` if the directory holds none.
    pub fn load(dir: &Path) -> Result<Option<Meta>, Error> {
        let path = dir.join(META_FILE);
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| Error::Corrupt(format!("{}: not UTF-8 text", path.display())))?;
                Meta::parse(&path, &text).map(Some)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("cannot read {}", path.display()), e)),
        }
    }

    /// Replace `dir/tessera.meta` atomically and durably, as the next
    /// generation (`gen` is incremented first, and stays so even if the
    /// store fails: a generation is never reused).
    pub fn store(&mut self, dir: &Path) -> Result<(), Error> {
        if self.gen >= MAX_GEN {
            return Err(Error::Corrupt(format!(
                "{}: generation {} is the last one; the control file cannot be rewritten",
                dir.join(META_FILE).display(),
                self.gen
            )));
        }
        self.gen += 1;
        let path = dir.join(META_FILE);
        let tmp: PathBuf = dir.join(format!("{META_FILE}.tmp"));
        let io = |what: &str, p: &Path, e: std::io::Error| {
            Error::io(format!("cannot {what} {}", p.display()), e)
        };
        {
            let mut f = std::fs::File::create(&tmp).map_err(|e| io("create", &tmp, e))?;
            f.write_all(self.render().as_bytes())
                .map_err(|e| io("write", &tmp, e))?;
            f.sync_all().map_err(|e| io("sync", &tmp, e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| io("rename into", &path, e))?;
        super::segment::sync_dir(dir).map_err(|e| io("sync directory", dir, e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let dir = std::env::temp_dir().join(format!("tessera-meta-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Meta::load(&dir).unwrap(), None);
        let m = Meta {
            tables: vec![
                MetaTable {
                    id: 0,
                    secondary: false,
                    name: "warehouse".into(),
                },
                MetaTable {
                    id: 1,
                    secondary: true,
                    name: "customer by name".into(),
                },
            ],
            voids: vec![(7, 12)],
            checkpoint: Some(("ckpt-00000003.tckp".into(), 40)),
            run: Some((2, 6)),
            checkpoint_needs: Some((42, 123456)),
            gen: 6,
        };
        let mut stored = m.clone();
        stored.store(&dir).unwrap();
        assert_eq!(stored.gen, 7);
        assert_eq!(Meta::load(&dir).unwrap(), Some(stored));
        assert!(m.is_void(8) && m.is_void(12) && !m.is_void(7) && !m.is_void(13));
        // A flipped byte is caught by the checksum.
        let p = dir.join(META_FILE);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[20] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        let e = Meta::load(&dir).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e}");
        // A newer format version is refused with a message.
        let body = "tessera-meta 99\n".to_string();
        let text = format!("{body}crc32c {:08x}\n", crc32c::crc32c(body.as_bytes()));
        std::fs::write(&p, text).unwrap();
        let e = Meta::load(&dir).unwrap_err();
        assert!(matches!(e, Error::NewerFormat(_)), "{e}");
        // Generations past the last are refused; the fuzzer found that
        // u64::MAX loaded and then overflowed `store`.
        for gen in [MAX_GEN + 1, u64::MAX] {
            let body = format!("tessera-meta {FORMAT_VERSION}\ngen {gen}\n");
            let text = format!("{body}crc32c {:08x}\n", crc32c::crc32c(body.as_bytes()));
            std::fs::write(&p, text).unwrap();
            let e = Meta::load(&dir).unwrap_err();
            assert!(e.to_string().contains("gen out of range"), "{e}");
        }
        // The last one loads, and cannot be followed.
        let mut last = Meta {
            gen: MAX_GEN,
            ..Meta::default()
        };
        assert!(last.store(&dir).is_err());
        assert_eq!(last.gen, MAX_GEN);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

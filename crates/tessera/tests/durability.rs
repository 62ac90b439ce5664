//! Durability: what a committed transaction leaves in the log comes back
//! after a reopen, under every logging protocol; damage in the data
//! directory is found and named.
//!
//! The recovery tests form a conformance matrix: they run under every
//! protocol of [`Protocol::INTERACTIVE`] that is `durable`, so a protocol added to
//! the list is checked by being listed. The tests of the log and checkpoint
//! files themselves (damage, torn tails, format versions, the directory
//! lock) do not depend on the protocol and run under Silo only.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

use tessera::{Database, Durability, Error, Options, Protocol, ScanOptions};

/// Every protocol that can log.
fn durable() -> impl Iterator<Item = Protocol> {
    Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| p.caps().durable)
}

/// `f` for every durable protocol, each on its own thread: for tests that
/// wait on log syncs far more than they compute. A failure names its
/// protocol and fails the test once every protocol is done.
fn each_durable_concurrently(f: impl Fn(Protocol) + Sync) {
    std::thread::scope(|s| {
        let f = &f;
        let runs: Vec<_> = durable()
            .map(|p| {
                let h = std::thread::Builder::new()
                    .name(p.name().into())
                    .spawn_scoped(s, move || f(p))
                    .unwrap();
                (p, h)
            })
            .collect();
        assert!(!runs.is_empty(), "no durable protocol");
        let failed: Vec<_> = runs
            .into_iter()
            .filter_map(|(p, h)| h.join().is_err().then_some(p.name()))
            .collect();
        assert!(failed.is_empty(), "failed under {}", failed.join(", "));
    });
}

fn opts(dir: &Path, p: Protocol) -> Options {
    Options::durable(dir)
        .protocol(p)
        .epoch_interval(Duration::from_millis(5))
}

/// Every row of `table`, read in transactions of at most `DUMP_CHUNK` rows
/// (nothing else runs when the tests dump, so the chunks agree): the
/// crash images hold hundreds of thousands of rows, and a 2PL transaction's
/// cost per lock grows with the locks it holds, so one scan of them all
/// would take minutes.
fn dump(db: &Database, table: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    const DUMP_CHUNK: usize = 1024;
    let t = db.table(table).unwrap();
    let mut w = db.worker().unwrap();
    let mut rows = BTreeMap::new();
    let mut after: Option<Vec<u8>> = None;
    loop {
        let lo = after.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let chunk = w
            .run(|tx| {
                tx.scan_collect(
                    t,
                    lo,
                    Bound::Unbounded,
                    ScanOptions::new().limit(DUMP_CHUNK),
                )
            })
            .unwrap();
        let done = chunk.len() < DUMP_CHUNK;
        after = chunk.last().map(|(k, _)| k.clone());
        rows.extend(chunk);
        if done {
            return rows;
        }
    }
}

/// Puts, updates, deletes and re-inserts from two threads; reopen; the
/// tables hold exactly what the last committed transactions wrote.
#[test]
fn reopen_recovers_every_committed_write() {
    each_durable_concurrently(|p| {
        let dir = tempfile::tempdir().unwrap();
        let mut expect = BTreeMap::new();
        {
            let db = Database::open(opts(dir.path(), p)).unwrap();
            let a = db.create_table("a").unwrap();
            let b = db.create_index("b by value").unwrap();
            std::thread::scope(|s| {
                for t in 0..2u32 {
                    let db = db.clone();
                    s.spawn(move || {
                        let mut w = db.worker().unwrap();
                        for i in 0..300u32 {
                            let k = format!("k{t}-{i:04}");
                            w.run(|tx| {
                                tx.put(a, k.as_bytes(), &i.to_le_bytes())?;
                                tx.put(b, format!("{i:04}-{t}").as_bytes(), k.as_bytes())
                            })
                            .unwrap();
                            if i % 3 == 0 {
                                w.run(|tx| tx.put(a, k.as_bytes(), b"updated")).unwrap();
                            }
                            if i % 7 == 0 {
                                w.run(|tx| tx.delete(a, k.as_bytes()).map(|_| ())).unwrap();
                            }
                            if i % 14 == 0 {
                                w.run(|tx| tx.insert(a, k.as_bytes(), b"again").map(|_| ()))
                                    .unwrap();
                            }
                        }
                    });
                }
            });
            expect.insert("a", dump(&db, "a"));
            expect.insert("b by value", dump(&db, "b by value"));
            assert!(db.durable_epoch() > 0);
        }
        let db = Database::open(opts(dir.path(), p)).unwrap();
        assert_eq!(db.table_names(), vec!["a", "b by value"], "{p}");
        for (t, rows) in &expect {
            assert_eq!(&dump(&db, t), rows, "{p}: table {t}");
        }
        let r = db.recovery_report().unwrap();
        assert!(r.txns_replayed >= 600, "{p}: {r:?}");
        assert!(r.warnings.is_empty(), "{p}: {r:?}");
        // The recovered database goes on, and a second reopen still agrees.
        let a = db.open_table("a").unwrap();
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.put(a, b"after", b"reopen")).unwrap();
        drop(w);
        drop(db);
        let db = Database::open(opts(dir.path(), p)).unwrap();
        let rows = dump(&db, "a");
        assert_eq!(
            rows.get(&b"after"[..]).map(|v| &v[..]),
            Some(&b"reopen"[..]),
            "{p}"
        );
        assert_eq!(rows.len(), expect["a"].len() + 1, "{p}");
    });
}

/// Async mode returns before durability and hands out a token to wait on.
#[test]
fn async_commit_token() {
    for p in durable() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(opts(dir.path(), p).durability(Durability::Async)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.put(t, b"x", b"1")).unwrap();
        let token = w.last_commit();
        assert!(token.epoch() > 0, "{p}");
        db.wait_durable(token).unwrap();
        assert!(db.durable_epoch() >= token.epoch(), "{p}");
        let s = db.log_stats().unwrap();
        assert!(s.txns >= 1 && s.syncs >= 1 && s.bytes > 0, "{p}: {s:?}");
    }
}

/// Options that make no sense are refused with a message.
#[test]
fn bad_options() {
    let e = Database::open(Options::in_memory().durability(Durability::Sync))
        .err()
        .unwrap();
    assert!(e.to_string().contains("needs a data directory"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    // A protocol that cannot log is refused a log, by name.
    for p in Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| !p.caps().durable)
    {
        let e = Database::open(Options::durable(dir.path()).protocol(p))
            .err()
            .unwrap_or_else(|| panic!("{p} opened with a log"));
        assert!(e.to_string().contains(p.name()), "{p}: {e}");
    }
    let e = Database::open(Options::durable(dir.path()).loggers(0))
        .err()
        .unwrap();
    assert!(e.to_string().contains("loggers"), "{e}");
}

fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tlog"))
        .collect();
    v.sort();
    v
}

/// Fill a data directory with many small segments.
fn fill(dir: &Path, n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Database::open(opts(dir, Protocol::Silo).segment_bytes(4096)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    for i in 0..n {
        w.run(|tx| tx.put(t, format!("key{i:05}").as_bytes(), &[i as u8; 100]))
            .unwrap();
    }
    drop(w);
    dump(&db, "t")
}

#[test]
fn torn_tail_is_cut_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fill(dir.path(), 50);
    // Half a block at the end of the newest segment: a write that never
    // completed (the epoch mark of the clean close stays before it).
    let last = segments(dir.path()).pop().unwrap();
    let len = std::fs::metadata(&last).unwrap().len();
    let mut bytes = std::fs::read(&last).unwrap();
    // Append the first 70 bytes of the segment's first block of
    // transactions again, as if cut mid-write. The segment starts with
    // 40-byte epoch marks (one, or more when an epoch passed with nothing
    // to log: CI once found a second one at 40, and the bytes copied from
    // there held a whole block, out of sequence). Headers are 40 bytes:
    // the kind at 6 (1: transactions), the payload's length at 12.
    let mut at = 0;
    while bytes[at + 6] != 1 {
        let payload = u32::from_le_bytes(bytes[at + 12..at + 16].try_into().unwrap());
        at += 40 + payload as usize;
    }
    let block = bytes[at..at + 70].to_vec();
    bytes.extend_from_slice(&block);
    std::fs::write(&last, &bytes).unwrap();
    let db = Database::open(opts(dir.path(), Protocol::Silo)).unwrap_or_else(|e| panic!("{e}"));
    let r = db.recovery_report().unwrap();
    assert_eq!(r.warnings.len(), 1, "{r:?}");
    assert!(r.warnings[0].contains("torn tail"), "{r:?}");
    assert_eq!(dump(&db, "t"), rows);
    drop(db);
    assert_eq!(std::fs::metadata(&last).unwrap().len(), len, "cut back");
}

#[test]
fn damage_in_the_middle_is_an_error_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 200);
    let segs = segments(dir.path());
    assert!(segs.len() >= 4, "{segs:?}");
    let victim = &segs[1];
    let mut bytes = std::fs::read(victim).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(victim, &bytes).unwrap();
    let e = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap();
    let name = victim.file_name().unwrap().to_str().unwrap();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
    assert!(
        e.to_string().contains(name) && e.to_string().contains("offset"),
        "{e}"
    );
}

#[test]
fn missing_segment_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 200);
    let segs = segments(dir.path());
    std::fs::remove_file(&segs[2]).unwrap();
    let e = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap();
    assert!(e.to_string().contains("missing log segment"), "{e}");
}

#[test]
fn newer_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 5);
    let meta = dir.path().join("tessera.meta");
    let text = std::fs::read_to_string(&meta).unwrap();
    let body =
        text[..text.rfind("crc32c ").unwrap()].replacen("tessera-meta 1", "tessera-meta 7", 1);
    let crc = crc32c::crc32c(body.as_bytes());
    std::fs::write(&meta, format!("{body}crc32c {crc:08x}\n")).unwrap();
    let e = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap();
    assert!(matches!(e, Error::NewerFormat(_)), "{e}");
    assert!(e.to_string().contains("format version 7"), "{e}");
}

/// A checkpoint in the middle of a run: rows written before and after it,
/// updates and deletes on both sides, all come back; the segments it covers
/// are gone.
#[test]
fn checkpoint_then_reopen() {
    each_durable_concurrently(|p| {
        let dir = tempfile::tempdir().unwrap();
        let expect;
        {
            let db = Database::open(opts(dir.path(), p).segment_bytes(8192)).unwrap();
            let t = db.create_table("t").unwrap();
            let mut w = db.worker().unwrap();
            for i in 0..400u32 {
                w.run(|tx| tx.put(t, format!("k{i:04}").as_bytes(), &[1; 50]))
                    .unwrap();
            }
            let before = segments(dir.path()).len();
            let info = db.checkpoint().unwrap();
            assert_eq!(info.records, 400, "{p}");
            assert!(info.segments_deleted > 0, "{p}: {info:?}");
            assert!(segments(dir.path()).len() < before, "{p}");
            for i in (0..400u32).step_by(3) {
                w.run(|tx| tx.put(t, format!("k{i:04}").as_bytes(), b"after"))
                    .unwrap();
            }
            for i in (0..400u32).step_by(5) {
                w.run(|tx| tx.delete(t, format!("k{i:04}").as_bytes()).map(|_| ()))
                    .unwrap();
            }
            drop(w);
            expect = dump(&db, "t");
        }
        let db = Database::open(opts(dir.path(), p)).unwrap();
        let r = db.recovery_report().unwrap();
        assert!(r.checkpoint.is_some(), "{p}: {r:?}");
        assert_eq!(dump(&db, "t"), expect, "{p}");
    });
}

/// Background checkpoints while two threads write; a reopen agrees.
#[test]
fn background_checkpoints_with_writers() {
    for p in durable() {
        let dir = tempfile::tempdir().unwrap();
        let expect;
        {
            let db = Database::open(
                opts(dir.path(), p)
                    .segment_bytes(16 << 10)
                    .checkpoint_interval(Duration::from_millis(30)),
            )
            .unwrap();
            let t = db.create_table("t").unwrap();
            // The writers run for at least 400 ms and until two background
            // checkpoints have been taken while they write (at most a
            // minute: a loaded CI machine may take long to sync one).
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| {
                for th in 0..2u32 {
                    let db = db.clone();
                    let stop = &stop;
                    s.spawn(move || {
                        let mut w = db.worker().unwrap();
                        let mut i = 0u32;
                        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                            let k = format!("k{}", (i * 7 + th) % 500);
                            w.run(|tx| {
                                if i % 4 == 3 {
                                    tx.delete(t, k.as_bytes()).map(|_| ())
                                } else {
                                    tx.put(t, k.as_bytes(), &i.to_le_bytes())
                                }
                            })
                            .unwrap();
                            i += 1;
                        }
                    });
                }
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_secs(60)
                    && (start.elapsed() < Duration::from_millis(400)
                        || db.checkpoint_status().0 < 2)
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            });
            let (n, err) = db.checkpoint_status();
            assert!(err.is_none(), "{p}: {err:?}");
            assert!(n >= 2, "{p}: only {n} checkpoints");
            expect = dump(&db, "t");
        }
        let db = Database::open(opts(dir.path(), p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(dump(&db, "t"), expect, "{p}");
    }
}

#[test]
fn corrupt_checkpoint_is_an_error_and_stale_ones_are_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let file = {
        let db = Database::open(opts(dir.path(), Protocol::Silo)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        for i in 0..100u32 {
            w.run(|tx| tx.put(t, format!("k{i:04}").as_bytes(), &[7; 30]))
                .unwrap();
        }
        db.checkpoint().unwrap().file
    };
    // A leftover of a checkpoint that crashed half-way is removed.
    let stale = dir.path().join("ckpt-0000999999.tckp.tmp");
    std::fs::write(&stale, b"half a checkpoint").unwrap();
    {
        let db = Database::open(opts(dir.path(), Protocol::Silo)).unwrap();
        assert_eq!(dump(&db, "t").len(), 100);
    }
    assert!(!stale.exists());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[200] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    let e = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(e.to_string().contains(name), "{e}");
    // Checkpoint damage is called checkpoint damage, not log damage.
    let m = e.to_string();
    assert!(
        m.contains("checkpoint") && !m.contains("corrupt log"),
        "{m}"
    );
    // Truncated, and missing: the same.
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let m = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap()
        .to_string();
    assert!(
        m.contains("checkpoint") && m.contains(name) && !m.contains("log"),
        "{m}"
    );
    std::fs::remove_file(&file).unwrap();
    let m = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap()
        .to_string();
    assert!(
        m.contains("checkpoint") && m.contains(name) && m.contains("missing"),
        "{m}"
    );
}

/// Copy every file of `from` into `to` (a crash image: each file as it is
/// at the moment it is read, the newest segment possibly mid-write).
fn copy_image(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    // A copy made file by file while the database runs: the frontier
    // first (an older frontier asks less of the files copied after it),
    // then the control file (it names the run whose marks count), then the
    // log. The directory is listed only after the frontier is copied: a
    // listing taken before could miss a segment that the copied frontier
    // already names (a race of the copy, not a loss; a real crash freezes
    // every file at one instant).
    for n in ["tessera.frontier", "tessera.meta"] {
        if let Ok(bytes) = std::fs::read(from.join(n)) {
            std::fs::write(to.join(n), bytes).unwrap();
        }
    }
    let names: Vec<_> = std::fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n != "tessera.frontier" && n != "tessera.meta")
        .collect();
    for n in names {
        if let Ok(bytes) = std::fs::read(from.join(&n)) {
            std::fs::write(to.join(&n), bytes).unwrap();
        }
    }
}

/// Crash images taken while four threads commit under async durability:
/// every transaction acknowledged (durable) before an image was taken is in
/// it, and no transaction is half there.
#[test]
fn crash_images_keep_every_acknowledged_commit() {
    for p in durable() {
        let dir = tempfile::tempdir().unwrap();
        let images = tempfile::tempdir().unwrap();
        let db = Database::open(
            opts(dir.path(), p)
                .durability(Durability::Async)
                .epoch_interval(Duration::from_millis(2))
                .segment_bytes(32 << 10),
        )
        .unwrap();
        let t = db.create_table("t").unwrap();
        let acked = std::sync::Mutex::new(Vec::<String>::new());
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut taken = Vec::new();
        std::thread::scope(|s| {
            for th in 0..4u32 {
                let (db, acked, done) = (db.clone(), &acked, &done);
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    let mut pending = std::collections::VecDeque::new();
                    let mut i = 0u32;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        let k = format!("{th}-{i}");
                        w.run(|tx| {
                            tx.put(t, k.as_bytes(), b"v")?;
                            tx.put(t, format!("mirror {k}").as_bytes(), b"m")
                        })
                        .unwrap();
                        pending.push_back((w.last_commit(), k));
                        let d = db.durable_epoch();
                        while pending.front().is_some_and(|(tok, _)| tok.epoch() <= d) {
                            acked.lock().unwrap().push(pending.pop_front().unwrap().1);
                        }
                        i += 1;
                    }
                });
            }
            let mut last = 0;
            for n in 0..4u64 {
                // Wait for progress (the machine may be slow), then image at
                // an arbitrary moment.
                let t0 = std::time::Instant::now();
                while acked.lock().unwrap().len() <= last && t0.elapsed() < Duration::from_secs(20)
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                std::thread::sleep(Duration::from_millis(3 + n * 7 % 20));
                let before = acked.lock().unwrap().clone();
                last = before.len();
                let img = images.path().join(format!("img{n}"));
                copy_image(dir.path(), &img);
                taken.push((img, before));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        drop(db);
        let mut checked = 0;
        for (img, before) in taken {
            let db = Database::open(opts(&img, p)).unwrap_or_else(|e| panic!("{p}: {e}"));
            let rows = dump(&db, "t");
            for k in &before {
                assert!(
                    rows.contains_key(k.as_bytes()),
                    "{p}: acknowledged {k} lost in {img:?}"
                );
            }
            for k in rows.keys() {
                let k = String::from_utf8(k.clone()).unwrap();
                if let Some(base) = k.strip_prefix("mirror ") {
                    assert!(rows.contains_key(base.as_bytes()), "{p}: half of {base}");
                } else {
                    assert!(
                        rows.contains_key(format!("mirror {k}").as_bytes()),
                        "{p}: half of {k}"
                    );
                }
            }
            checked += before.len();
        }
        assert!(
            checked > 0,
            "{p}: nothing was acknowledged before any image"
        );
    }
}

/// One directory, one open database: a second open is refused with a
/// message until the first is dropped (workers included).
#[test]
fn a_directory_is_locked_while_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        opts(dir.path(), Protocol::Silo).checkpoint_interval(Duration::from_millis(10)),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| tx.put(t, b"k", b"v")).unwrap();
    let e = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap();
    assert!(e.to_string().contains("in use"), "{e}");
    drop(db);
    // The worker still holds the engine.
    assert!(Database::open(opts(dir.path(), Protocol::Silo)).is_err());
    drop(w);
    let db = Database::open(opts(dir.path(), Protocol::Silo)).unwrap();
    assert_eq!(dump(&db, "t").len(), 1);
}

/// After a machine crash the unsynced end of the newest segment may hold
/// holes before valid-looking blocks. Damage followed by at most one epoch
/// mark is that end (cut with a warning); damage followed by two marks was
/// covered by a completed fsync and is an error.
#[test]
fn damage_in_the_unsynced_end_is_cut_but_not_once_synced() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fill(dir.path(), 60);
    let last = segments(dir.path()).pop().unwrap();
    let clean = std::fs::read(&last).unwrap();
    // A mark and a transaction block of this segment, reused as "valid
    // blocks after a hole".
    use tessera::log::format::{BlockKind, BlockReader, HEADER_LEN};
    let block = |kind: BlockKind| {
        BlockReader::new(&clean)
            .map(|b| b.unwrap())
            .find(|b| b.header.kind == kind)
            .map(|b| {
                let at = b.offset as usize;
                clean[at..at + HEADER_LEN + b.payload.len()].to_vec()
            })
            .expect("the segment holds both kinds")
    };
    let (mark, txns) = (block(BlockKind::EpochMark), block(BlockKind::Txns));
    let hole = vec![0x5Au8; 64];

    // Hole, then a transaction block and one mark: an unsynced end.
    let mut bytes = clean.clone();
    bytes.extend_from_slice(&hole);
    bytes.extend_from_slice(&txns);
    bytes.extend_from_slice(&mark);
    std::fs::write(&last, &bytes).unwrap();
    {
        let db = Database::open(opts(dir.path(), Protocol::Silo)).unwrap_or_else(|e| panic!("{e}"));
        let r = db.recovery_report().unwrap();
        assert!(
            r.warnings.iter().any(|w| w.contains("unsynced end")),
            "{r:?}"
        );
        assert_eq!(dump(&db, "t"), rows);
    }
    assert_eq!(
        std::fs::read(&last).unwrap(),
        clean,
        "cut back to the clean end"
    );

    // Hole, then two marks: a completed fsync covered the hole.
    let mut bytes = clean.clone();
    bytes.extend_from_slice(&hole);
    bytes.extend_from_slice(&mark);
    bytes.extend_from_slice(&txns);
    bytes.extend_from_slice(&mark);
    std::fs::write(&last, &bytes).unwrap();
    let e = Database::open(opts(dir.path(), Protocol::Silo))
        .err()
        .unwrap();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
}

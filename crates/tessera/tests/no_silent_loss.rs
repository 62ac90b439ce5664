//! No silent loss: the four holes a user found (a log shorter than the
//! checkpoint, one logger's stream missing, the newest segment deleted or
//! emptied, an older copy of the control file) are refused by default,
//! naming the file and changing nothing; the loss-accepting recovery modes
//! open them, say what was lost and keep copies that undo the decision; a
//! read-only open changes nothing and refuses writes.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tessera::log::format;
use tessera::{Database, Error, Options, Protocol, RecoveryMode, ScanOptions};

fn opts(dir: &Path) -> Options {
    Options::durable(dir)
        .protocol(Protocol::Silo)
        .epoch_interval(Duration::from_millis(5))
        .segment_bytes(8 << 10)
}

/// Every file of `dir` (LOCK aside) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file() && e.file_name() != "LOCK")
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn segments(dir: &Path, logger: u16) -> Vec<PathBuf> {
    let prefix = format!("log-{logger:03}-");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .collect();
    v.sort();
    v
}

fn dump(db: &Database) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new()))
        .unwrap()
        .into_iter()
        .collect()
}

/// A database with `loggers` loggers and two writer threads; every row
/// acknowledged (sync durability); a checkpoint in the middle when asked.
fn fill(dir: &Path, loggers: usize, checkpoint: bool) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Database::open(opts(dir).loggers(loggers)).unwrap();
    let t = db.create_table("t").unwrap();
    std::thread::scope(|s| {
        for th in 0..2u32 {
            let db = db.clone();
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                for i in 0..150u32 {
                    w.run(|tx| tx.put(t, format!("{th}-{i:04}").as_bytes(), &[i as u8; 60]))
                        .unwrap();
                    if checkpoint && th == 0 && i == 100 {
                        db.checkpoint().unwrap();
                    }
                }
            });
        }
    });
    dump(&db)
}

fn refused(dir: &Path, mode: RecoveryMode, names: &str) -> String {
    let before = snapshot(dir);
    let e = Database::open(opts(dir).recovery_mode(mode)).unwrap_err();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
    let msg = e.to_string();
    assert!(msg.contains(names), "{msg} does not name {names}");
    assert_eq!(
        snapshot(dir),
        before,
        "a refused open changed the directory"
    );
    msg
}

#[test]
fn log_shorter_than_the_checkpoint_is_refused_then_recovered_knowingly() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fill(dir.path(), 1, true);
    let newest = segments(dir.path(), 0).pop().unwrap();
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();
    let len = std::fs::metadata(&newest).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&newest)
        .unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    let msg = refused(dir.path(), RecoveryMode::Strict, &name);
    assert!(msg.contains("tolerate-tail"), "{msg}");
    // A read-only look says the same and changes nothing.
    let before = snapshot(dir.path());
    assert!(Database::open(opts(dir.path()).read_only(true)).is_err());
    assert_eq!(snapshot(dir.path()), before);

    // Accepting the loss: the newest rows are gone, and the report says so.
    let db = Database::open(opts(dir.path()).recovery_mode(RecoveryMode::TolerateTail)).unwrap();
    let r = db.recovery_report().unwrap().clone();
    let loss = r.loss.clone().expect("a loss is reported");
    let (lo, hi) = loss.acknowledged_epochs.expect("acknowledged epochs lost");
    assert!(lo < hi && r.durable_epoch == lo, "{r:?}");
    assert!(loss.details.iter().any(|d| d.contains(&name)), "{loss:?}");
    let kept = loss.kept_in.clone().expect("copies kept");
    assert!(kept.join("REPORT.txt").exists() && kept.join(&name).exists());
    assert_eq!(std::fs::metadata(kept.join(&name)).unwrap().len(), len / 2);
    assert!(kept.join("tessera.meta").exists() && kept.join("tessera.frontier").exists());
    let got = dump(&db);
    assert!(got.len() < rows.len(), "some rows are lost");
    for (k, v) in &got {
        assert_eq!(rows.get(k), Some(v));
    }
    drop(db);
    // The decision is recorded: a strict open now agrees.
    let db = Database::open(opts(dir.path())).unwrap();
    assert_eq!(dump(&db), got);
    assert!(db.recovery_report().unwrap().loss.is_none());
}

#[test]
fn a_missing_logger_stream_is_refused_and_point_in_time_is_undoable() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fill(dir.path(), 2, false);
    let gone = segments(dir.path(), 1);
    assert!(!gone.is_empty());
    let aside = tempfile::tempdir().unwrap();
    for p in &gone {
        std::fs::rename(p, aside.path().join(p.file_name().unwrap())).unwrap();
    }
    let msg = refused(dir.path(), RecoveryMode::Strict, "log-001-");
    assert!(msg.contains("logger 1"), "{msg}");
    refused(dir.path(), RecoveryMode::TolerateTail, "log-001-");
    // Point in time: consistent (here: nothing of logger 1's epochs), the
    // loss reported, the old control file kept.
    let names_before: Vec<String> = snapshot(dir.path()).into_keys().collect();
    let db = Database::open(opts(dir.path()).recovery_mode(RecoveryMode::PointInTime)).unwrap();
    let r = db.recovery_report().unwrap().clone();
    let loss = r.loss.expect("a loss");
    assert!(loss.consistent);
    let kept = loss.kept_in.unwrap();
    let got = dump(&db);
    assert!(got.len() < rows.len());
    drop(db);
    // Undo, as REPORT.txt says: the files back, the new run's files gone.
    let old = snapshot(&kept);
    for (n, _) in snapshot(dir.path()) {
        if !names_before.contains(&n) {
            std::fs::remove_file(dir.path().join(n)).unwrap();
        }
    }
    for (n, b) in old {
        if n != "REPORT.txt" {
            std::fs::write(dir.path().join(n), b).unwrap();
        }
    }
    for p in &gone {
        std::fs::rename(aside.path().join(p.file_name().unwrap()), p).unwrap();
    }
    let db = Database::open(opts(dir.path())).unwrap();
    assert_eq!(dump(&db), rows, "undone: every row is back");
}

#[test]
fn newest_segment_deleted_or_emptied_is_refused() {
    for empty in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        fill(dir.path(), 1, false);
        let newest = segments(dir.path(), 0).pop().unwrap();
        let name = newest.file_name().unwrap().to_string_lossy().into_owned();
        if empty {
            std::fs::write(&newest, b"").unwrap();
        } else {
            std::fs::remove_file(&newest).unwrap();
        }
        refused(dir.path(), RecoveryMode::Strict, &name);
    }
}

#[test]
fn an_older_copy_of_the_control_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("tessera.meta");
    let old;
    {
        let db = Database::open(opts(dir.path())).unwrap();
        let t = db.create_table("t").unwrap();
        old = std::fs::read(&meta).unwrap();
        db.create_table("u").unwrap();
        let mut w = db.worker().unwrap();
        for i in 0..20u32 {
            w.run(|tx| tx.put(t, &i.to_be_bytes(), b"v")).unwrap();
        }
    }
    std::fs::write(&meta, old).unwrap();
    let msg = refused(dir.path(), RecoveryMode::PointInTime, "tessera.meta");
    assert!(msg.contains("older"), "{msg}");
}

#[test]
fn read_only_open_changes_nothing_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fill(dir.path(), 1, true);
    // A torn tail after the frontier: an ordinary open would cut it.
    let newest = segments(dir.path(), 0).pop().unwrap();
    let mut b = std::fs::read(&newest).unwrap();
    let head = b[..30].to_vec();
    b.extend_from_slice(&head);
    std::fs::write(&newest, &b).unwrap();
    let before = snapshot(dir.path());
    let db = Database::open(opts(dir.path()).read_only(true)).unwrap();
    let r = db.recovery_report().unwrap();
    assert!(r.dry_run);
    assert!(r.changes.iter().any(|c| c.contains("would cut")), "{r:?}");
    assert_eq!(dump(&db), rows);
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    assert!(matches!(
        w.run(|tx| tx.put(t, b"x", b"y")),
        Err(Error::ReadOnly)
    ));
    assert!(matches!(db.create_table("new"), Err(Error::ReadOnly)));
    drop(w);
    drop(db);
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a read-only open changed the directory"
    );
    // Missing and non-directory paths are argument errors.
    let e = Database::open(opts(&dir.path().join("nope")).read_only(true)).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    let e = Database::open(opts(&newest)).unwrap_err();
    assert!(e.to_string().contains("is not a directory"), "{e}");
}

/// A copy whose files and directory are all read-only (a backup on
/// read-only media, a directory owned by someone else) opens read-only:
/// nothing is created (no `LOCK`), nothing changes, reads and snapshot
/// reads are served, writes are refused with `Error::ReadOnly`. Run as
/// root the permissions bind nothing, so the test also checks that no
/// file's bytes changed and that no file appeared.
#[test]
fn read_only_open_of_a_directory_whose_files_are_all_read_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let rows = fill(dir.path(), 2, true);
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let before = snapshot(dir.path());
    let names = |p: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    let listed = names(dir.path());
    let set_mode = |mode: u32, dir_mode: u32| {
        for f in before.keys() {
            let p = dir.path().join(f);
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(dir_mode)).unwrap();
    };
    set_mode(0o444, 0o555);
    let opened = Database::open(opts(dir.path()).read_only(true).snapshots(true));
    let db = match opened {
        Ok(db) => db,
        Err(e) => {
            set_mode(0o644, 0o755);
            panic!("a read-only open of a read-only directory failed: {e}");
        }
    };
    assert_eq!(dump(&db), rows);
    let t = db.open_table("t").unwrap();
    let mut w = db.worker().unwrap();
    // The first snapshot boundary lies above every recovered row.
    let n = w
        .run_snapshot(|tx| tx.prefix(t, b"").try_fold(0, |n, r| r.map(|_| n + 1)))
        .unwrap();
    assert_eq!(n, rows.len());
    assert!(matches!(
        w.run(|tx| tx.put(t, b"x", b"y")),
        Err(Error::ReadOnly)
    ));
    assert!(db.checkpoint().is_err());
    drop(w);
    db.close().unwrap();
    set_mode(0o644, 0o755);
    assert_eq!(
        snapshot(dir.path()),
        before,
        "a read-only open changed a file"
    );
    assert_eq!(names(dir.path()), listed, "a read-only open created a file");
}

#[test]
fn salvage_keeps_what_can_be_read_past_damage_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let rows = fill(dir.path(), 1, false);
    let segs = segments(dir.path(), 0);
    assert!(segs.len() >= 3, "{segs:?}");
    // A flipped byte in an older segment: refused by every mode but
    // point-in-time (which stops there) and salvage (which reads past it).
    let mid = &segs[1];
    let mut b = std::fs::read(mid).unwrap();
    // In the payload of a block of transactions from the middle of the file
    // (a flipped epoch mark would cost salvage nothing).
    let at = {
        let txns: Vec<(usize, usize)> = format::BlockReader::new(&b)
            .flatten()
            .filter(|k| k.header.kind == format::BlockKind::Txns && !k.payload.is_empty())
            .map(|k| (k.offset as usize + format::HEADER_LEN, k.payload.len()))
            .collect();
        let (start, len) = txns[txns.len() / 2];
        start + len / 2
    };
    b[at] ^= 0x40;
    std::fs::write(mid, &b).unwrap();
    let name = mid.file_name().unwrap().to_string_lossy().into_owned();
    refused(dir.path(), RecoveryMode::Strict, &name);
    refused(dir.path(), RecoveryMode::TolerateTail, &name);
    let pit = {
        let copy = tempfile::tempdir().unwrap();
        for (n, b) in snapshot(dir.path()) {
            std::fs::write(copy.path().join(n), b).unwrap();
        }
        let db =
            Database::open(opts(copy.path()).recovery_mode(RecoveryMode::PointInTime)).unwrap();
        let got = dump(&db);
        drop(db);
        // The next run continues the cut stream: a strict open is clean.
        let db = Database::open(opts(copy.path())).unwrap();
        assert_eq!(dump(&db), got);
        assert!(db.recovery_report().unwrap().loss.is_none());
        got.len()
    };
    let db = Database::open(opts(dir.path()).recovery_mode(RecoveryMode::Salvage)).unwrap();
    let r = db.recovery_report().unwrap().clone();
    let loss = r.loss.expect("salvage reports");
    assert!(!loss.consistent);
    let got = dump(&db);
    assert!(
        got.len() >= pit && got.len() < rows.len(),
        "{} {pit}",
        got.len()
    );
    for (k, v) in &got {
        assert_eq!(rows.get(k), Some(v));
    }
    drop(db);
    // Salvage took a checkpoint and retired the damaged segments: a strict
    // open is clean and agrees.
    let db = Database::open(opts(dir.path())).unwrap();
    assert_eq!(dump(&db), got);
}

#[test]
fn a_stream_cut_at_a_file_boundary_continues_cleanly() {
    // Damage at the first block of an older segment (zeroed) and a gap:
    // point-in-time sets those files aside whole; the next run's segments
    // follow the last intact one, so later opens, strict ones included,
    // find no gap and no empty segment. (Found by tests/fuzz_readers.rs.)
    for gap in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let rows = fill(dir.path(), 1, false);
        let segs = segments(dir.path(), 0);
        assert!(segs.len() >= 3, "{segs:?}");
        if gap {
            std::fs::remove_file(&segs[1]).unwrap();
        } else {
            let mut b = std::fs::read(&segs[1]).unwrap();
            b[..64].fill(0);
            std::fs::write(&segs[1], &b).unwrap();
        }
        let name = segs[1].file_name().unwrap().to_string_lossy().into_owned();
        refused(dir.path(), RecoveryMode::Strict, &name);
        let db = Database::open(opts(dir.path()).recovery_mode(RecoveryMode::PointInTime)).unwrap();
        let loss = db.recovery_report().unwrap().loss.clone().expect("a loss");
        assert!(loss.consistent);
        let got = dump(&db);
        assert!(got.len() < rows.len());
        for (k, v) in &got {
            assert_eq!(rows.get(k), Some(v));
        }
        drop(db);
        for round in 0..2 {
            let db = Database::open(opts(dir.path())).unwrap();
            assert_eq!(dump(&db), got, "gap {gap}, strict reopen {round}");
            assert!(db.recovery_report().unwrap().loss.is_none());
        }
    }
}

#[test]
fn a_crash_right_after_a_rotation_recovers_again_and_again() {
    // A kill between creating the next segment and writing its first block
    // leaves an empty newest segment (a machine crash may leave garbage in
    // it instead). Nothing in it was acknowledged: recovery removes it and
    // the next run takes its number, so the next open (before this fix: a
    // refusal, "no valid block in a segment that is not the newest") and
    // the one after recover every row. (Found by tests/fuzz_readers.rs.)
    for garbage in [&b""[..], &[0xab; 30][..]] {
        let dir = tempfile::tempdir().unwrap();
        let rows = fill(dir.path(), 1, false);
        let last = segments(dir.path(), 0).pop().unwrap();
        let name = last.file_name().unwrap().to_string_lossy().into_owned();
        let segno: u64 = name["log-000-".len()..name.len() - ".tlog".len()]
            .parse()
            .unwrap();
        let next = dir.path().join(format!("log-000-{:08}.tlog", segno + 1));
        std::fs::write(&next, garbage).unwrap();
        for round in 0..3 {
            let db = Database::open(opts(dir.path())).unwrap();
            assert_eq!(dump(&db), rows, "garbage {}, open {round}", garbage.len());
            let r = db.recovery_report().unwrap();
            assert!(r.loss.is_none());
            if round == 0 {
                assert!(
                    r.changes
                        .iter()
                        .any(|c| c.contains("removed") && c.contains(&*next.to_string_lossy())),
                    "{:?}",
                    r.changes
                );
            }
        }
    }
}

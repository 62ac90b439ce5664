//! `Database::flush` and `Database::close`: the calls that make commits
//! durable, and shutdown errors visible, at a point the program chooses
//! (a drop can only log them).

use std::time::Duration;

use tessera::{Database, Durability, Error, Options, Protocol};

fn opts(dir: &std::path::Path) -> Options {
    // A long epoch: a commit is not durable by chance before the test looks.
    Options::durable(dir)
        .durability(Durability::Async)
        .epoch_interval(Duration::from_millis(300))
}

#[test]
fn flush_makes_every_acknowledged_async_commit_durable() {
    for p in [Protocol::Silo, Protocol::Si, Protocol::Rocc] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(opts(dir.path()).protocol(p)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        for round in 0..3u64 {
            for i in 0..50u64 {
                w.run(|tx| tx.put(t, &i.to_be_bytes(), &round.to_le_bytes()))
                    .unwrap();
            }
            let token = w.last_commit();
            db.flush().unwrap();
            assert!(
                db.durable_epoch() >= token.epoch(),
                "{p}: round {round}: flush returned with epoch {} of the last commit not \
                 durable (durable epoch {})",
                token.epoch(),
                db.durable_epoch()
            );
        }
    }
    // In memory: nothing to wait for.
    let db = Database::open(Options::in_memory()).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
}

#[test]
fn close_of_the_last_handle_closes_and_unlocks_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(opts(dir.path())).unwrap();
    let t = db.create_table("t").unwrap();
    db.worker()
        .unwrap()
        .run(|tx| tx.put(t, b"k", b"v1"))
        .unwrap();
    db.close().unwrap();
    // Unlocked, and the async commit was made durable by the close.
    let db = Database::open(opts(dir.path())).unwrap();
    let t = db.table("t").unwrap();
    let v = db
        .worker()
        .unwrap()
        .run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
        .unwrap();
    assert_eq!(v.as_deref(), Some(&b"v1"[..]));
}

#[test]
fn close_while_a_worker_lives_flushes_and_leaves_it_usable() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(opts(dir.path())).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| tx.put(t, b"a", b"1")).unwrap();
    let token = w.last_commit();
    let clone = db.clone();
    db.close().unwrap();
    // The close flushed what was committed before it.
    assert!(clone.durable_epoch() >= token.epoch());
    // The worker and the clone still run, and the directory is still theirs.
    w.run(|tx| tx.put(t, b"b", b"2")).unwrap();
    assert!(matches!(
        Database::open(opts(dir.path())),
        Err(Error::InUse(_))
    ));
    drop(w);
    clone.close().unwrap();
    let db = Database::open(opts(dir.path())).unwrap();
    let t = db.table("t").unwrap();
    let n = db
        .worker()
        .unwrap()
        .run(|tx| tx.prefix(t, b"").try_fold(0, |n, r| r.map(|_| n + 1)))
        .unwrap();
    assert_eq!(n, 2);
}

/// A background checkpoint that fails (its directory moved away) is an
/// error of `close`, not a line nobody reads.
#[test]
fn close_reports_a_failed_background_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Database::open(Options::durable(&path).checkpoint_interval(Duration::from_millis(20)))
        .unwrap();
    let t = db.create_table("t").unwrap();
    db.worker()
        .unwrap()
        .run(|tx| tx.put(t, b"k", b"v"))
        .unwrap();
    // Moved away at once (a removal could race with the checkpointer's
    // files): the next checkpoint cannot create its file.
    std::fs::rename(&path, dir.path().join("moved")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db.checkpoint_status().1.is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let e = db.close().unwrap_err();
    assert!(matches!(e, Error::Io(_)), "{e:?}");
}

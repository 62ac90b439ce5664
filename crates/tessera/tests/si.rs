//! Snapshot-isolation semantics of the multi-version protocols (ERMIA's `si`,
//! `ssn`, which reads the same snapshots, and `ems`, SI on Cai et al.'s EMS): snapshot reads, first-updater-wins, visibility
//! of inserts and deletes, roll-back, and read-only transactions that never
//! abort under `si`.
//!
//! Concurrency is produced deterministically in one thread by nesting: inside
//! worker A's transaction closure, worker B runs a whole transaction. A's
//! snapshot was taken when its `try_run` began.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{ConflictReason, Database, Options, Protocol, ScanOptions, TableId, TxError, Worker};

const MV: [Protocol; 3] = [Protocol::Si, Protocol::Ssn, Protocol::Ems];
/// The protocols promising plain SI (read-only transactions never abort).
const PLAIN_SI: [Protocol; 2] = [Protocol::Si, Protocol::Ems];

fn k(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn open(p: Protocol) -> (Database, TableId) {
    let db = Database::open(Options::in_memory().protocol(p)).unwrap();
    let t = db.create_table("t").unwrap();
    (db, t)
}

/// `open` with a 1 ms epoch, so that watermarks and memory epochs move
/// while threads race.
fn open_ticking(p: Protocol) -> (Database, TableId) {
    let db = Database::open(
        Options::in_memory()
            .protocol(p)
            .epoch_interval(Duration::from_millis(1)),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    (db, t)
}

fn get(w: &mut Worker, t: TableId, key: u64) -> Option<Vec<u8>> {
    w.run(|tx| Ok(tx.get(t, &k(key))?.map(|v| v.to_vec())))
        .unwrap()
}

fn keys(w: &mut Worker, t: TableId) -> Vec<u64> {
    w.run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new()))
        .unwrap()
        .into_iter()
        .map(|(k, _)| u64::from_be_bytes(k.try_into().unwrap()))
        .collect()
}

fn is_write_conflict<T: std::fmt::Debug>(r: &Result<T, TxError>) -> bool {
    matches!(r, Err(TxError::Conflict(ConflictReason::WriteConflict)))
}

/// A reads x; B updates x (and y) and commits; A reads x, y and scans again
/// and still sees the values of its snapshot. A then commits (read-only,
/// serializable before B), and a new transaction sees B's values.
#[test]
fn snapshot_reads_ignore_later_commits() {
    for p in MV {
        let (db, t) = open(p);
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            tx.insert(t, &k(1), b"x0")?;
            tx.insert(t, &k(2), b"y0")?;
            Ok(())
        })
        .unwrap();
        let r = a.try_run(|tx| {
            assert_eq!(tx.get(t, &k(1))?, Some(&b"x0"[..]));
            b.run(|tb| {
                assert!(tb.update(t, &k(1), b"x1-longer-than-the-first-version")?);
                assert!(tb.update(t, &k(2), b"y1")?);
                Ok(())
            })
            .unwrap();
            // Repeated read, a first read of a key B changed, and a scan: all
            // from A's snapshot.
            assert_eq!(tx.get(t, &k(1))?, Some(&b"x0"[..]), "{p}: repeated read");
            assert_eq!(tx.get(t, &k(2))?, Some(&b"y0"[..]), "{p}: first read");
            let rows =
                tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new())?;
            assert_eq!(
                rows,
                vec![
                    (k(1).to_vec(), b"x0".to_vec()),
                    (k(2).to_vec(), b"y0".to_vec())
                ],
                "{p}: scan"
            );
            // A second round of updates by B: still the same snapshot.
            b.run(|tb| tb.put(t, &k(1), b"x2")).unwrap();
            assert_eq!(
                tx.get(t, &k(1))?,
                Some(&b"x0"[..]),
                "{p}: after two commits"
            );
            Ok(())
        });
        assert!(r.is_ok(), "{p}: read-only snapshot reader aborted: {r:?}");
        assert_eq!(get(&mut a, t, 1).as_deref(), Some(&b"x2"[..]));
        assert_eq!(get(&mut a, t, 2).as_deref(), Some(&b"y1"[..]));
    }
}

/// A holds an uncommitted version of x; B's update, put, delete (and
/// read-modify-write) of x fail at once with a write conflict, not at
/// commit. A's write wins; B's other writes are rolled back.
#[test]
fn first_updater_wins_against_an_uncommitted_writer() {
    for p in MV {
        let (db, t) = open(p);
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            tx.insert(t, &k(1), b"x0")?;
            tx.insert(t, &k(2), b"y0")?;
            Ok(())
        })
        .unwrap();
        let r = a.try_run(|tx| {
            assert!(tx.update(t, &k(1), b"xa")?);
            // Each of B's writes of x fails immediately, whatever the kind.
            type WriteOp = fn(&mut tessera::Txn<'_>, TableId) -> tessera::TxResult<()>;
            let ops: [(&str, WriteOp); 4] = [
                ("update", |tb, t| tb.update(t, &k(1), b"xb").map(|_| ())),
                ("put", |tb, t| tb.put(t, &k(1), b"xb")),
                ("delete", |tb, t| tb.delete(t, &k(1)).map(|_| ())),
                ("insert over a live key", |tb, t| {
                    tb.insert(t, &k(1), b"xb").map(|_| ())
                }),
            ];
            for (name, op) in ops {
                let rb = b.try_run(|tb| {
                    // B's snapshot still sees x0: A has not committed.
                    assert_eq!(tb.get(t, &k(1))?, Some(&b"x0"[..]));
                    assert!(tb.update(t, &k(2), b"yb")?);
                    // The write itself fails, before any commit.
                    let w = op(tb, t);
                    assert!(
                        is_write_conflict(&w),
                        "{p}: B's {name} of a record A holds: {w:?}"
                    );
                    w
                });
                assert!(is_write_conflict(&rb), "{p}: {name}: {rb:?}");
                // B's update of y was rolled back: A can write y.
            }
            assert!(tx.update(t, &k(2), b"ya")?);
            Ok(())
        });
        assert!(r.is_ok(), "{p}: the first updater must commit: {r:?}");
        assert_eq!(get(&mut a, t, 1).as_deref(), Some(&b"xa"[..]));
        assert_eq!(get(&mut a, t, 2).as_deref(), Some(&b"ya"[..]));
    }
}

/// B commits an update (or delete, or insert) of a key after A began; A's
/// write of that key fails with a write conflict, even though A's snapshot
/// still shows the old state.
#[test]
fn first_updater_wins_against_a_later_commit() {
    for p in MV {
        let (db, t) = open(p);
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            for i in 1..=3 {
                tx.insert(t, &k(i), b"v0")?;
            }
            Ok(())
        })
        .unwrap();

        // Update after a committed update; with and without a prior read.
        for read_first in [false, true] {
            let r = a.try_run(|tx| {
                if read_first {
                    assert_eq!(tx.get(t, &k(1))?, Some(&b"v0"[..]));
                } else {
                    // Touch another key so the snapshot is in use.
                    tx.get(t, &k(3))?;
                }
                b.run(|tb| tb.put(t, &k(1), b"b-wins")).unwrap();
                let w = tx.update(t, &k(1), b"a-loses");
                assert!(is_write_conflict(&w), "{p}: {w:?}");
                w.map(|_| ())
            });
            assert!(is_write_conflict(&r), "{p}: {r:?}");
            assert_eq!(get(&mut a, t, 1).as_deref(), Some(&b"b-wins"[..]));
            a.run(|tx| tx.put(t, &k(1), b"v0")).unwrap();
        }

        // Update of a key deleted by a later commit: a conflict, not "missing".
        let r = a.try_run(|tx| {
            assert!(tx.get(t, &k(2))?.is_some());
            b.run(|tb| tb.delete(t, &k(2)).map(|_| ())).unwrap();
            assert!(tx.get(t, &k(2))?.is_some(), "{p}: snapshot sees the row");
            tx.update(t, &k(2), b"a").map(|_| ())
        });
        assert!(is_write_conflict(&r), "{p}: {r:?}");
        assert_eq!(get(&mut a, t, 2), None);

        // Insert of a key that a later commit inserted: a conflict, though
        // A's snapshot has the key absent.
        let r = a.try_run(|tx| {
            assert!(tx.get(t, &k(10))?.is_none());
            b.run(|tb| tb.insert(t, &k(10), b"b").map(|_| ())).unwrap();
            assert!(tx.get(t, &k(10))?.is_none());
            tx.insert(t, &k(10), b"a").map(|_| ())
        });
        assert!(is_write_conflict(&r), "{p}: {r:?}");
        assert_eq!(get(&mut a, t, 10).as_deref(), Some(&b"b"[..]));

        // Re-insert of a key deleted before A began but re-inserted after:
        // the snapshot sees it absent; the insert conflicts.
        b.run(|tb| tb.delete(t, &k(3)).map(|_| ())).unwrap();
        let r = a.try_run(|tx| {
            assert!(tx.get(t, &k(3))?.is_none());
            b.run(|tb| tb.insert(t, &k(3), b"b").map(|_| ())).unwrap();
            assert!(tx.get(t, &k(3))?.is_none());
            tx.insert(t, &k(3), b"a").map(|_| ())
        });
        assert!(is_write_conflict(&r), "{p}: {r:?}");
        assert_eq!(get(&mut a, t, 3).as_deref(), Some(&b"b"[..]));

        // A write after a commit *before* A began is fine.
        b.run(|tb| tb.put(t, &k(1), b"early")).unwrap();
        a.try_run(|tx| {
            assert_eq!(tx.get(t, &k(1))?, Some(&b"early"[..]));
            tx.put(t, &k(1), b"late")
        })
        .unwrap();
        assert_eq!(get(&mut a, t, 1).as_deref(), Some(&b"late"[..]));
    }
}

/// Inserts, committed or not, are invisible to snapshots taken before
/// their commit: to gets, to scans (forward and reverse) and to the
/// "exists" answer of an update/delete.
#[test]
fn inserts_are_invisible_to_older_snapshots() {
    for p in MV {
        let (db, t) = open(p);
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            for i in [10, 30] {
                tx.insert(t, &k(i), b"old")?;
            }
            Ok(())
        })
        .unwrap();
        let scan_keys = |tx: &mut tessera::Txn<'_>, rev: bool| {
            let o = if rev {
                ScanOptions::new().reverse()
            } else {
                ScanOptions::new()
            };
            tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, o)
                .map(|v| {
                    v.into_iter()
                        .map(|(k, _)| u64::from_be_bytes(k.try_into().unwrap()))
                        .collect::<Vec<_>>()
                })
        };
        // Uncommitted insert, seen from a nested reader.
        let r = b.try_run(|tb| {
            assert!(tb.insert(t, &k(20), b"new")?);
            a.try_run(|ta| {
                assert_eq!(ta.get(t, &k(20))?, None, "{p}: uncommitted insert visible");
                assert_eq!(scan_keys(ta, false)?, vec![10, 30]);
                assert_eq!(scan_keys(ta, true)?, vec![30, 10]);
                Ok(())
            })
            .unwrap();
            Ok(())
        });
        assert!(r.is_ok(), "{r:?}");
        // Committed insert, after the reader began.
        let r = a.try_run(|ta| {
            assert_eq!(scan_keys(ta, false)?, vec![10, 20, 30]);
            b.run(|tb| {
                tb.insert(t, &k(25), b"newer")?;
                tb.insert(t, &k(5), b"newer")?;
                tb.insert(t, &k(99), b"newer")?;
                Ok(())
            })
            .unwrap();
            for i in [5, 25, 99] {
                assert_eq!(
                    ta.get(t, &k(i))?,
                    None,
                    "{p}: key {i} visible to an older snapshot"
                );
            }
            assert_eq!(scan_keys(ta, false)?, vec![10, 20, 30], "{p}");
            assert_eq!(scan_keys(ta, true)?, vec![30, 20, 10], "{p}");
            Ok(())
        });
        match p {
            Protocol::Si | Protocol::Ems => assert!(r.is_ok(), "{p}: {r:?}"),
            // The reader scanned the range the inserts went into: SSN's
            // phantom protection (the node set) aborts it at commit; what
            // it saw meanwhile was still its snapshot.
            _ => assert!(
                matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
                "{p}: {r:?}"
            ),
        }
        assert_eq!(keys(&mut a, t), vec![5, 10, 20, 25, 30, 99]);
    }
}

/// A delete is invisible until it commits, and invisible to snapshots taken
/// before its commit; a snapshot taken after the commit sees the key gone.
#[test]
fn deletes_are_visible_only_after_commit() {
    for p in MV {
        let (db, t) = open(p);
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        let mut c = db.worker().unwrap();
        a.run(|tx| {
            for i in 1..=3 {
                tx.insert(t, &k(i), &[i as u8; 3])?;
            }
            Ok(())
        })
        .unwrap();
        // A's snapshot predates B's delete; C's is taken while B is
        // uncommitted.
        let r = a.try_run(|ta| {
            assert_eq!(ta.get(t, &k(1))?, Some(&[1u8; 3][..]));
            b.run(|tb| {
                assert!(tb.delete(t, &k(2))?);
                assert_eq!(tb.get(t, &k(2))?, None, "own delete");
                c.try_run(|tc| {
                    assert_eq!(
                        tc.get(t, &k(2))?,
                        Some(&[2u8; 3][..]),
                        "{p}: uncommitted delete"
                    );
                    let n = tc.scan(
                        t,
                        Bound::Unbounded,
                        Bound::Unbounded,
                        ScanOptions::new(),
                        |_, _| true,
                    )?;
                    assert_eq!(n, 3);
                    Ok(())
                })
                .unwrap();
                Ok(())
            })
            .unwrap();
            // Committed now, but after A began.
            assert_eq!(
                ta.get(t, &k(2))?,
                Some(&[2u8; 3][..]),
                "{p}: delete after begin"
            );
            let n = ta.scan(
                t,
                Bound::Unbounded,
                Bound::Unbounded,
                ScanOptions::new(),
                |_, _| true,
            )?;
            assert_eq!(n, 3);
            // A snapshot taken now sees the key gone.
            c.try_run(|tc| {
                assert_eq!(tc.get(t, &k(2))?, None, "{p}: committed delete");
                assert!(!tc.update(t, &k(2), b"x")?);
                assert!(!tc.delete(t, &k(2))?);
                let n = tc.scan(
                    t,
                    Bound::Unbounded,
                    Bound::Unbounded,
                    ScanOptions::new(),
                    |_, _| true,
                )?;
                assert_eq!(n, 2);
                Ok(())
            })
            .unwrap();
            Ok(())
        });
        assert!(r.is_ok(), "{p}: {r:?}");
        assert_eq!(keys(&mut a, t), vec![1, 3]);
    }
}

/// Rolled-back transactions leave nothing: inserted keys are absent to gets
/// and scans and can be inserted again; deleted and updated keys keep their
/// values. Both user aborts and conflict aborts, and a reader that looked
/// at the uncommitted insert while it existed.
#[test]
fn rolled_back_writes_leave_nothing() {
    for p in MV {
        let (db, t) = open(p);
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            tx.insert(t, &k(1), b"one")?;
            tx.insert(t, &k(2), b"two")?;
            Ok(())
        })
        .unwrap();

        // User abort of inserts (new keys and a re-insert over a deleted
        // key), a delete and an update.
        a.run(|tx| tx.delete(t, &k(2)).map(|_| ())).unwrap();
        let r: Result<(), _> = a.try_run(|tx| {
            for i in 100..200 {
                assert!(tx.insert(t, &k(i), b"doomed")?);
            }
            assert!(tx.insert(t, &k(2), b"doomed re-insert")?);
            assert!(tx.delete(t, &k(1))?);
            tx.user_abort()
        });
        assert!(
            matches!(r, Err(TxError::Error(tessera::Error::UserAbort))),
            "{r:?}"
        );
        assert_eq!(
            keys(&mut a, t),
            vec![1],
            "{p}: rolled-back inserts visible to scans"
        );
        for i in 100..200 {
            assert_eq!(get(&mut b, t, i), None, "{p}: key {i}");
        }
        assert_eq!(get(&mut b, t, 2), None);
        assert_eq!(get(&mut b, t, 1).as_deref(), Some(&b"one"[..]));

        // Conflict abort after an insert: B inserts, then hits A's write.
        let r = a.try_run(|ta| {
            assert!(ta.update(t, &k(1), b"held by a")?);
            let rb = b.try_run(|tb| {
                assert!(tb.insert(t, &k(50), b"doomed")?);
                assert!(!tb.update(t, &k(51), b"none")?);
                tb.put(t, &k(1), b"conflict")
            });
            assert!(is_write_conflict(&rb), "{p}: {rb:?}");
            // A never saw 50; nor does a scan.
            assert_eq!(ta.get(t, &k(50))?, None);
            Ok(())
        });
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(keys(&mut a, t), vec![1]);
        assert_eq!(get(&mut a, t, 1).as_deref(), Some(&b"held by a"[..]));

        // A reader looks at an uncommitted insert (sees it absent), the
        // insert rolls back, the reader looks again.
        let r = a.try_run(|ta| {
            let rb = b.try_run(|tb| {
                assert!(tb.insert(t, &k(60), b"doomed")?);
                assert_eq!(ta.get(t, &k(60))?, None);
                tb.user_abort::<()>()
            });
            assert!(matches!(rb, Err(TxError::Error(tessera::Error::UserAbort))));
            assert_eq!(ta.get(t, &k(60))?, None);
            let n = ta.scan(
                t,
                Bound::Unbounded,
                Bound::Unbounded,
                ScanOptions::new(),
                |_, _| true,
            )?;
            assert_eq!(n, 1);
            Ok(())
        });
        if p == Protocol::Ssn {
            // Under ssn the reader put the leaf into its node set when it saw
            // k60 absent; unlinking the rolled-back record changed the leaf,
            // so the reader may abort (as Silo's reader would: its read of
            // the absent record fails validation). Never anything else.
            assert!(
                r.is_ok() || matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
                "{r:?}"
            );
        } else {
            assert!(r.is_ok(), "{r:?}");
        }

        // The same keys can be inserted again, and are then visible.
        a.run(|tx| {
            for i in (100..200).chain([2, 50, 60]) {
                assert!(tx.insert(t, &k(i), b"second life")?, "{p}: key {i}");
            }
            Ok(())
        })
        .unwrap();
        let all = keys(&mut b, t);
        assert_eq!(all.len(), 1 + 100 + 3);
        assert_eq!(get(&mut b, t, 60).as_deref(), Some(&b"second life"[..]));
        // Many rounds of insert-and-roll-back of one key, then a commit.
        for _ in 0..200 {
            let r: Result<(), _> = a.try_run(|tx| {
                assert!(tx.insert(t, &k(7), b"x")?);
                tx.user_abort()
            });
            assert!(matches!(r, Err(TxError::Error(tessera::Error::UserAbort))));
            assert_eq!(get(&mut b, t, 7), None);
        }
        a.run(|tx| tx.insert(t, &k(7), b"kept").map(|_| ()))
            .unwrap();
        assert_eq!(get(&mut b, t, 7).as_deref(), Some(&b"kept"[..]));
    }
}

/// Under `si` a read-only transaction never aborts: it reads its snapshot
/// and takes no part in conflicts, however the writers interleave with it.
#[test]
fn si_read_only_transactions_never_abort_nested() {
    for p in PLAIN_SI {
        read_only_never_aborts_nested(p);
    }
}

fn read_only_never_aborts_nested(p: Protocol) {
    let (db, t) = open(p);
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    a.run(|tx| {
        for i in 0..10 {
            tx.insert(t, &k(i), b"v")?;
        }
        Ok(())
    })
    .unwrap();
    // Every kind of write by B between A's reads: updates of what A read,
    // inserts into the range A scanned, deletes, a write skew-like pattern.
    let r = a.try_run(|ta| {
        ta.get(t, &k(1))?;
        ta.get(t, &k(100))?;
        ta.scan(
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanOptions::new(),
            |_, _| true,
        )?;
        b.run(|tb| {
            tb.put(t, &k(1), b"w")?;
            tb.insert(t, &k(100), b"w")?;
            tb.insert(t, &k(55), b"w")?;
            tb.delete(t, &k(2))?;
            Ok(())
        })
        .unwrap();
        ta.get(t, &k(2))?;
        ta.scan(
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanOptions::new(),
            |_, _| true,
        )?;
        Ok(())
    });
    assert!(r.is_ok(), "{r:?}");
}

/// Concurrent version: writers churn (updates, deletes, re-inserts) while
/// read-only transactions (gets and scans) run with `try_run`, one attempt
/// each: under `si` every one of them commits, and each sees a consistent
/// snapshot (the writers keep the sum of all values constant).
#[test]
fn si_read_only_transactions_never_abort_concurrent() {
    for p in PLAIN_SI {
        read_only_never_aborts_concurrent(p);
    }
}

fn read_only_never_aborts_concurrent(p: Protocol) {
    let (db, t) = open_ticking(p);
    const KEYS: u64 = 32;
    const TOTAL: u64 = KEYS * 100;
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..KEYS {
            tx.insert(t, &k(i), &100u64.to_le_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let val = |v: &[u8]| u64::from_le_bytes(v.try_into().unwrap());
    let ro_commits = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_millis(1500);
    std::thread::scope(|s| {
        for th in 0..3u64 {
            let db = db.clone();
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = SmallRng::seed_from_u64(0x51 + th);
                while Instant::now() < deadline {
                    let a = rng.gen_range(0..KEYS);
                    let b = (a + rng.gen_range(1..KEYS)) % KEYS;
                    let op = rng.gen_range(0..4);
                    // Move value between a and b; sometimes fold a into b
                    // (delete a) or split b into a (re-insert a).
                    let _ = w.try_run(|tx| {
                        let va = tx.get(t, &k(a))?.map(val);
                        let vb = tx.get(t, &k(b))?.map(val);
                        match (op, va, vb) {
                            (0, Some(x), Some(y)) => {
                                tx.delete(t, &k(a))?;
                                tx.put(t, &k(b), &(x + y).to_le_bytes())?;
                            }
                            (_, None, Some(y)) => {
                                tx.insert(t, &k(a), &(y / 2).to_le_bytes())?;
                                tx.put(t, &k(b), &(y - y / 2).to_le_bytes())?;
                            }
                            (_, Some(x), Some(y)) if x > 0 => {
                                tx.put(t, &k(a), &(x - 1).to_le_bytes())?;
                                tx.put(t, &k(b), &(y + 1).to_le_bytes())?;
                            }
                            _ => {}
                        }
                        Ok(())
                    });
                }
            });
        }
        for th in 0..2u64 {
            let (db, ro_commits) = (db.clone(), &ro_commits);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = SmallRng::seed_from_u64(0x52 + th);
                while Instant::now() < deadline {
                    let scan = rng.gen_bool(0.5);
                    let r = w.try_run(|tx| {
                        let mut sum = 0;
                        if scan {
                            tx.scan(
                                t,
                                Bound::Unbounded,
                                Bound::Unbounded,
                                ScanOptions::new(),
                                |_, v| {
                                    sum += val(v);
                                    true
                                },
                            )?;
                        } else {
                            for i in 0..KEYS {
                                if let Some(v) = tx.get(t, &k(i))? {
                                    sum += val(v);
                                }
                                if i % 8 == 0 {
                                    std::thread::yield_now();
                                }
                            }
                        }
                        Ok(sum)
                    });
                    match r {
                        Ok(sum) => assert_eq!(sum, TOTAL, "inconsistent snapshot (scan={scan})"),
                        Err(e) => panic!("a read-only si transaction aborted: {e:?}"),
                    }
                    ro_commits.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    assert!(ro_commits.load(Ordering::Relaxed) > 100);
    let sum: u64 = w
        .run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new()))
        .unwrap()
        .iter()
        .map(|(_, v)| val(v))
        .sum();
    assert_eq!(sum, TOTAL);
}

/// Version GC under many writers of few rows: every worker prunes chains of
/// the same records with its own watermark, lock-free (`prune_mv`), while
/// long readers hold old snapshots so watermarks lag and differ. A version
/// retired twice, or freed while reachable, would hand one block to two
/// versions. Every value is `len` copies of one byte, `len` from the byte,
/// so a torn or reused block shows as a malformed value; and a reader's
/// snapshot must not move while it is held.
#[test]
fn version_gc_of_shared_chains_under_many_writers() {
    for p in [Protocol::Si, Protocol::Ssn] {
        let (db, t) = open_ticking(p);
        const KEYS: u64 = 6;
        // Values of three block sizes, so records move between their
        // inline first version and out-of-line ones of different classes.
        let value = |b: u8| vec![b; 8 + (b as usize % 3) * 60];
        let check = |v: &[u8]| {
            let b = v[0];
            assert_eq!(v.len(), 8 + (b as usize % 3) * 60, "{p:?}: torn length");
            assert!(v.iter().all(|&x| x == b), "{p:?}: torn value");
            b
        };
        let mut w = db.worker().unwrap();
        w.run(|tx| {
            for i in 0..KEYS {
                tx.insert(t, &k(i), &value(0))?;
            }
            Ok(())
        })
        .unwrap();
        let deadline = Instant::now() + Duration::from_millis(1200);
        let commits = AtomicU64::new(0);
        std::thread::scope(|s| {
            for th in 0..4u64 {
                let (db, commits) = (db.clone(), &commits);
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    let mut rng = SmallRng::seed_from_u64(0x9c + th);
                    while Instant::now() < deadline {
                        let a = rng.gen_range(0..KEYS);
                        let r = w.try_run(|tx| {
                            let b = check(tx.get(t, &k(a))?.expect("never deleted"));
                            tx.put(t, &k(a), &value(b.wrapping_add(1)))?;
                            Ok(())
                        });
                        if r.is_ok() {
                            commits.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
            for th in 0..2u64 {
                let db = db.clone();
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    let mut rng = SmallRng::seed_from_u64(0x9d + th);
                    while Instant::now() < deadline {
                        // A snapshot held for a while: the watermark stays
                        // behind while the writers pile versions on it.
                        let hold = Duration::from_micros(rng.gen_range(0..3000));
                        let _ = w.try_run(|tx| {
                            let first: Vec<u8> = (0..KEYS)
                                .map(|i| Ok(check(tx.get(t, &k(i))?.expect("present"))))
                                .collect::<Result<_, TxError>>()?;
                            std::thread::sleep(hold);
                            for i in 0..KEYS {
                                let again = check(tx.get(t, &k(i))?.expect("present"));
                                assert_eq!(again, first[i as usize], "{p:?}: snapshot moved");
                            }
                            Ok(())
                        });
                    }
                });
            }
        });
        assert!(
            commits.load(Ordering::Relaxed) > 1000,
            "{p:?}: too few commits"
        );
    }
}

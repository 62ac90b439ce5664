//! Phantom protection (Silo section 4.6): scans and missed lookups put index
//! leaves in the node set; an insert into a scanned range by a concurrent
//! transaction must abort the scanner. Also the read-validation counterpart.
//!
//! The scenarios run as a conformance matrix over [`Protocol::INTERACTIVE`],
//! selected by capability: every `phantom_safe` protocol must pass them,
//! so a newly listed one gets them automatically. Today all of them use
//! Silo's node set: `silo`, `ssn` (checked after its exclusion-window
//! test) and the 2PL protocols (validated at commit while every lock is
//! held), hence the `NodeValidation` expectations, except `rocc` and `gwv`, whose
//! scans are validated per logical range (`RangeValidation`, see
//! [`scan_phantom`]), and `mvrcc`, timestamp ordering with range read
//! timestamps, where only an inserter *older* than the scanner is a phantom
//! (`TimestampOrder`; a younger one is ordered after the scanner and both
//! commit: [`younger_insert_aborts_scanner`], and tests/mvrcc.rs); a
//! protocol protecting ranges by other means (range or next-key locks)
//! would need its own.
//! Scenarios that drive two transactions from one thread (one nested in
//! the other's closure) leave out protocols whose operations may wait for
//! another transaction (`caps().blocks`, e.g. `2pl-waitdie`): the waiter
//! would wait for ever for a holder that cannot run. The multi-threaded
//! races include them.
//!
//! A read of a row that a committed transaction later overwrote is *not* a
//! reason to abort under `ssn` (only a dependency cycle is), so that
//! scenario has an `ssn` counterpart that expects a commit, and a
//! `2pl-nowait` one where the writer fails at its lock. Keys that exist in the index as
//! deleted (tombstone) records are protected under `ssn` by the stamps on
//! their versions rather than by the node set; the `ssn_*` tests cover
//! those mechanics, and the missed-key cycles check the property for every
//! phantom-safe protocol.

use std::ops::Bound;
use std::sync::{Arc, Barrier};

use tessera::{
    Capabilities, ConflictReason, Database, Options, Protocol, Row, ScanOptions, ScanValidation,
    TxError, TxResult, Txn,
};

fn k(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// The protocols whose capabilities satisfy `pred`, in the order of
/// [`Protocol::INTERACTIVE`]. Panics if none does (the test would be vacuous).
fn protocols(pred: impl Fn(Capabilities) -> bool) -> Vec<Protocol> {
    let ps: Vec<Protocol> = Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| pred(p.caps()))
        .collect();
    assert!(!ps.is_empty(), "no protocol has the capability under test");
    ps
}

/// The abort a scan's phantom gets under `p`: ROCC validates scans through
/// its range predicates, every other phantom-safe protocol through Silo's
/// node set.
fn scan_phantom(p: Protocol) -> ConflictReason {
    match p {
        Protocol::Rocc | Protocol::Gwv => ConflictReason::RangeValidation,
        // Timestamp ordering: a writer older than a reader of its range.
        Protocol::Mvrcc => ConflictReason::TimestampOrder,
        _ => ConflictReason::NodeValidation,
    }
}

/// Whether an insert by a transaction that began *after* the scanner, and
/// committed first, aborts the scanner. Not under timestamp ordering
/// (`mvrcc`): the inserter's larger timestamp orders it after the scanner,
/// whose view (without the insert) is then the serial one, and both commit;
/// tests/mvrcc.rs has the cases where the inserter is the older one.
fn younger_insert_aborts_scanner(p: Protocol) -> bool {
    p != Protocol::Mvrcc
}

/// Every phantom-safe protocol (for multi-threaded tests).
fn phantom_safe() -> Vec<Protocol> {
    protocols(|c| c.phantom_safe)
}

/// The phantom-safe protocols that one thread can interleave: those whose
/// operations never wait for another transaction (`!caps().blocks`). In a
/// nested test the other transaction runs inside this one's closure, so a
/// wait for it would never end.
fn nestable_phantom_safe() -> Vec<Protocol> {
    protocols(|c| c.phantom_safe && !c.blocks)
}

fn db_with(p: Protocol) -> Database {
    Database::open(Options::in_memory().protocol(p)).unwrap()
}

fn db() -> Database {
    db_with(Protocol::Silo)
}

/// A table holding keys 0, 10, ..., 90, and two workers.
fn every_tenth_key(db: &Database) -> (tessera::TableId, tessera::Worker, tessera::Worker) {
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let b = db.worker().unwrap();
    a.run(|tx| {
        for i in (0..100).step_by(10) {
            tx.put(t, &k(i), b"x")?;
        }
        Ok(())
    })
    .unwrap();
    (t, a, b)
}

/// T1 scans an empty range and writes elsewhere; T2 inserts into the range
/// and commits first: T1 must fail node-set validation.
#[test]
fn scan_then_concurrent_insert_aborts_the_scanner() {
    for (p, reverse) in nestable_phantom_safe()
        .into_iter()
        .flat_map(|p| [(p, false), (p, true)])
    {
        let db = db_with(p);
        let (t, mut a, mut b) = every_tenth_key(&db);
        let mut opts = ScanOptions::new();
        if reverse {
            opts = opts.reverse();
        }
        let r = a.try_run(|tx| {
            let n = tx.scan(
                t,
                Bound::Included(&k(41)),
                Bound::Excluded(&k(50)),
                opts,
                |_, _| true,
            )?;
            assert_eq!(n, 0);
            // T2 inserts into the scanned range and commits. (One attempt:
            // were it to conflict with T1, retrying could only spin.)
            b.try_run(|tx2| tx2.insert(t, &k(45), b"phantom").map(|_| ()))
                .unwrap_or_else(|e| panic!("{p}: T2 must commit: {e:?}"));
            tx.put(t, &k(1000), b"decided: range empty")?;
            Ok(())
        });
        match r {
            Ok(()) if !younger_insert_aborts_scanner(p) => {}
            Err(TxError::Conflict(r)) if r == scan_phantom(p) => {}
            other => {
                panic!("{p}: expected a phantom abort (reverse={reverse}), got {other:?}")
            }
        }
        // Nothing of T1 is visible (all of it under timestamp ordering).
        let seen = a.run(|tx| Ok(tx.get(t, &k(1000))?.is_some())).unwrap();
        assert_eq!(seen, !younger_insert_aborts_scanner(p), "{p}");
    }
}

/// A scan with a limit protects only what it examined: an insert beyond the
/// last row returned (in a different leaf) does not abort it, but one inside
/// does.
#[test]
fn limited_scan_protects_the_rows_it_returned() {
    for p in nestable_phantom_safe() {
        limited_scan(p);
    }
}

fn limited_scan(p: Protocol) {
    let db = db_with(p);
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    a.run(|tx| {
        for i in 0..2000 {
            tx.put(t, &k(i * 2), b"x")?;
        }
        Ok(())
    })
    .unwrap();
    let r = a.try_run(|tx| {
        let n = tx.scan(
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanOptions::new().limit(3),
            |_, _| true,
        )?;
        assert_eq!(n, 3);
        b.try_run(|tx2| tx2.insert(t, &k(3), b"inside").map(|_| ()))
            .unwrap_or_else(|e| panic!("{p}: B must commit: {e:?}"));
        tx.put(t, &k(100_000), b"w")?;
        Ok(())
    });
    if younger_insert_aborts_scanner(p) {
        assert!(
            matches!(r, Err(TxError::Conflict(r)) if r == scan_phantom(p)),
            "{p}: {r:?}"
        );
    } else {
        assert!(r.is_ok(), "{p}: {r:?}");
    }
    let r = a.try_run(|tx| {
        let n = tx.scan(
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanOptions::new().limit(3),
            |_, _| true,
        )?;
        assert_eq!(n, 3);
        b.try_run(|tx2| tx2.insert(t, &k(3_999), b"far away").map(|_| ()))
            .unwrap_or_else(|e| panic!("{p}: B must commit: {e:?}"));
        tx.put(t, &k(100_000), b"w")?;
        Ok(())
    });
    assert!(
        r.is_ok(),
        "{p}: an insert far outside the examined range must not abort: {r:?}"
    );
}

/// A point lookup that misses records the leaf; inserting that key aborts it.
#[test]
fn missed_get_then_concurrent_insert_aborts() {
    for p in nestable_phantom_safe() {
        let db = db_with(p);
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        let r = a.try_run(|tx| {
            assert!(tx.get(t, &k(7))?.is_none());
            b.try_run(|tx2| tx2.insert(t, &k(7), b"now here").map(|_| ()))
                .unwrap_or_else(|e| panic!("{p}: B must commit: {e:?}"));
            tx.put(t, &k(8), b"7 was absent")?;
            Ok(())
        });
        if younger_insert_aborts_scanner(p) {
            assert!(
                matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
                "{p}: {r:?}"
            );
        } else {
            assert!(r.is_ok(), "{p}: {r:?}");
        }
    }
}

/// A record read, then overwritten by a committed transaction: read
/// validation fails (Silo's mechanism; see the `ssn` and 2PL counterparts
/// below).
#[test]
fn read_then_concurrent_update_aborts() {
    let db = db();
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    a.run(|tx| tx.put(t, &k(1), b"old")).unwrap();
    let r = a.try_run(|tx| {
        assert_eq!(tx.get(t, &k(1))?, Some(&b"old"[..]));
        b.run(|tx2| tx2.put(t, &k(1), b"new")).unwrap();
        tx.put(t, &k(2), b"copy of old")?;
        Ok(())
    });
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::ReadValidation))),
        "{r:?}"
    );
    // A read-only transaction is validated too.
    let r = a.try_run(|tx| {
        let v = tx.get(t, &k(1))?.map(|v| v.to_vec());
        b.run(|tx2| tx2.put(t, &k(1), b"newer")).unwrap();
        Ok(v)
    });
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::ReadValidation))),
        "{r:?}"
    );
}

/// Concurrent rounds: each of several threads scans a round's range and
/// inserts its own key only if the range is empty. Serializability allows
/// exactly one insert per round; a missed phantom would let two in. Every
/// phantom-safe protocol, blocking ones included.
#[test]
fn concurrent_scan_insert_race_admits_exactly_one() {
    for p in phantom_safe() {
        scan_insert_race(p, false);
        scan_insert_race(p, true);
    }
}

fn scan_insert_race(p: Protocol, pause: bool) {
    scan_insert_race_with(p, pause, false);
}

/// Rows of `lo..hi` counted by the callback scan, or by the iterator scan
/// (forward in even rounds, reverse in odd ones) when `iterator`.
fn count_range(
    tx: &mut Txn,
    t: tessera::TableId,
    (lo, hi): (u64, u64),
    iterator: bool,
) -> TxResult<usize> {
    if !iterator {
        return tx.scan(
            t,
            Bound::Included(&k(lo)),
            Bound::Excluded(&k(hi)),
            ScanOptions::new(),
            |_, _| true,
        );
    }
    let count = |n: usize, row: TxResult<Row>| row.map(|_| n + 1);
    let mut it = tx.range(t, k(lo)..k(hi));
    if (lo / 100) % 2 == 0 {
        it.try_fold(0, count)
    } else {
        it.rev().try_fold(0, count)
    }
}

fn scan_insert_race_with(p: Protocol, pause: bool, iterator: bool) {
    let db = db_with(p);
    let t = db.create_table("t").unwrap();
    let threads = 4;
    let rounds = 300u64;
    let barrier = Arc::new(Barrier::new(threads));
    std::thread::scope(|s| {
        for th in 0..threads as u64 {
            let (db, barrier) = (db.clone(), Arc::clone(&barrier));
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                for r in 0..rounds {
                    barrier.wait();
                    let (lo, hi) = (r * 100, r * 100 + 100);
                    w.run(|tx| {
                        let n = count_range(tx, t, (lo, hi), iterator)?;
                        if pause {
                            std::thread::yield_now();
                        }
                        if n == 0 {
                            tx.insert(t, &k(lo + 1 + th), b"winner")?;
                        }
                        Ok(())
                    })
                    .unwrap();
                }
            });
        }
    });
    let mut w = db.worker().unwrap();
    for r in 0..rounds {
        let n = w
            .run(|tx| count_range(tx, t, (r * 100, r * 100 + 100), false))
            .unwrap();
        assert_eq!(
            n, 1,
            "{p} (pause={pause}, iterator={iterator}): round {r}: {n} inserts committed"
        );
    }
}

/// The `ssn` counterpart of `read_then_concurrent_update_aborts`: A reads
/// a row that B then overwrites and commits. The only dependency is
/// A -rw-> B, so the history is serializable (A first) and SSN commits A,
/// whether it then writes an unrelated row or nothing. A read the old
/// value (its snapshot).
#[test]
fn ssn_read_then_concurrent_update_commits() {
    for read_only in [false, true] {
        let db = db_with(Protocol::Ssn);
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| tx.put(t, &k(1), b"old")).unwrap();
        let r = a.try_run(|tx| {
            assert_eq!(tx.get(t, &k(1))?, Some(&b"old"[..]));
            b.run(|tx2| tx2.put(t, &k(1), b"new")).unwrap();
            assert_eq!(tx.get(t, &k(1))?, Some(&b"old"[..]));
            if !read_only {
                tx.put(t, &k(2), b"copy of old")?;
            }
            Ok(())
        });
        assert!(r.is_ok(), "read_only={read_only}: {r:?}");
    }
}

/// The `2pl-nowait` counterpart of `read_then_concurrent_update_aborts`:
/// A's read holds a shared lock until A ends, so B's overwrite fails at
/// once on the lock (B does not wait, and there is nothing for A to
/// validate); A commits, whether it then writes or not, and the row keeps
/// A's value.
#[test]
fn twopl_nowait_read_then_concurrent_update_aborts_the_writer() {
    for read_only in [false, true] {
        let db = db_with(Protocol::TwoPlNoWait);
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| tx.put(t, &k(1), b"old")).unwrap();
        let mut rb = None;
        let r = a.try_run(|tx| {
            assert_eq!(tx.get(t, &k(1))?, Some(&b"old"[..]));
            rb = Some(b.try_run(|tx2| tx2.put(t, &k(1), b"new")));
            if !read_only {
                tx.put(t, &k(2), b"copy of old")?;
            }
            Ok(())
        });
        assert!(
            matches!(
                rb,
                Some(Err(TxError::Conflict(ConflictReason::LockConflict)))
            ),
            "read_only={read_only}: B: {rb:?}"
        );
        assert!(r.is_ok(), "read_only={read_only}: A: {r:?}");
        let v = a
            .run(|tx| Ok(tx.get(t, &k(1))?.map(|v| v.to_vec())))
            .unwrap();
        assert_eq!(v.as_deref(), Some(&b"old"[..]));
    }
}

/// Phantom write skew through two ranges: A scans R1 (empty) and inserts
/// into R2; B scans R2 (empty), inserts into R1 and commits first. A cycle
/// (A -rw-> B -rw-> A): every phantom-safe protocol aborts A (node-set
/// validation); `si` commits both.
#[test]
fn range_write_skew_aborts_one() {
    let mut ps = nestable_phantom_safe();
    ps.push(Protocol::Si);
    for p in ps {
        let db = db_with(p);
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            tx.put(t, &k(0), b"lo")?;
            tx.put(t, &k(1000), b"hi")
        })
        .unwrap();
        let empty = |tx: &mut tessera::Txn<'_>, lo: u64| {
            tx.scan(
                t,
                Bound::Included(&k(lo)),
                Bound::Excluded(&k(lo + 100)),
                ScanOptions::new(),
                |_, _| true,
            )
            .map(|n| n == 0)
        };
        let r = a.try_run(|tx| {
            assert!(empty(tx, 100)?);
            b.try_run(|tx2| {
                assert!(empty(tx2, 200)?);
                tx2.insert(t, &k(150), b"B").map(|_| ())
            })
            .unwrap_or_else(|e| panic!("{p}: B must commit: {e:?}"));
            tx.insert(t, &k(250), b"A").map(|_| ())
        });
        if p == Protocol::Si {
            assert!(r.is_ok(), "si commits both: {r:?}");
        } else {
            assert!(
                matches!(r, Err(TxError::Conflict(r)) if r == scan_phantom(p)),
                "{p}: {r:?}"
            );
        }
    }
}

/// Scaffolding for the missed-key cycles: rows `a` and `k`. The scenario
/// (under protocol `p`): A finds `k` absent; B (nested, one attempt) reads
/// `a`, inserts `k`, commits; A overwrites `a`. A -rw-> B (A missed B's
/// insert) and B -rw-> A (B read the `a` that A overwrote): a cycle, so A
/// must not commit. `between` runs right after A's miss, before B starts.
/// If the miss itself fails (2PL: a lock held by another transaction), B
/// still runs and A then returns that failure.
fn missed_key_cycle(
    p: Protocol,
    setup: impl FnOnce(&Database, tessera::TableId) -> Option<tessera::Worker>,
    miss: impl FnOnce(
        &mut tessera::Txn<'_>,
        tessera::TableId,
        &mut tessera::Worker,
    ) -> tessera::TxResult<()>,
    between: impl FnOnce(&Database, tessera::TableId),
) -> tessera::TxResult<()> {
    let db = db_with(p);
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    let mut c = db.worker().unwrap();
    a.run(|tx| tx.put(t, b"a", b"a0")).unwrap();
    let _keep = setup(&db, t);
    let r = a.try_run(|ta| {
        let missed = miss(ta, t, &mut c);
        between(&db, t);
        b.try_run(|tb| {
            assert_eq!(tb.get(t, b"a")?, Some(&b"a0"[..]));
            assert!(tb.insert(t, b"k", b"B")?);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{p}: B must commit: {e:?}"));
        missed?;
        ta.put(t, b"a", b"A")
    });
    // Whatever happened, the final state must come from a serial order: if
    // A committed, B's read of a0 and A's miss of k cannot both be right.
    let mut w = db.worker().unwrap();
    let (a_val, k_val) = w
        .run(|tx| {
            Ok((
                tx.get(t, b"a")?.map(|v| v.to_vec()),
                tx.get(t, b"k")?.map(|v| v.to_vec()),
            ))
        })
        .unwrap();
    assert_eq!(k_val.as_deref(), Some(&b"B"[..]), "{p}");
    if r.is_err() {
        assert_eq!(a_val.as_deref(), Some(&b"a0"[..]), "{p}");
    }
    r
}

fn no_setup(_: &Database, _: tessera::TableId) -> Option<tessera::Worker> {
    None
}

fn nothing_between(_: &Database, _: tessera::TableId) {}

fn plain_miss(
    ta: &mut tessera::Txn<'_>,
    t: tessera::TableId,
    _: &mut tessera::Worker,
) -> tessera::TxResult<()> {
    assert!(ta.get(t, b"k")?.is_none());
    Ok(())
}

/// A scan (not a point get) of a range holding only `k`, found empty.
fn scan_miss(
    ta: &mut tessera::Txn<'_>,
    t: tessera::TableId,
    _: &mut tessera::Worker,
) -> tessera::TxResult<()> {
    let n = ta.scan(
        t,
        Bound::Included(&b"j"[..]),
        Bound::Included(&b"l"[..]),
        ScanOptions::new(),
        |_, _| true,
    )?;
    assert_eq!(n, 0);
    Ok(())
}

/// A's get meets the record of an insert still in flight (by X, on worker
/// `x`), then X rolls back (its record, back to ⊥, is unlinked at once).
/// A must not see X's insert; under 2PL its get fails on X's lock, which
/// this returns once X is gone.
fn rolled_back_miss(
    ta: &mut tessera::Txn<'_>,
    t: tessera::TableId,
    x: &mut tessera::Worker,
) -> tessera::TxResult<()> {
    let mut absent = None;
    let rx: tessera::TxResult<()> = x.try_run(|tx| {
        assert!(tx.insert(t, b"k", b"doomed")?);
        absent = Some(ta.get(t, b"k").map(|v| v.is_none()));
        tx.user_abort()
    });
    assert!(
        matches!(rx, Err(TxError::Error(tessera::Error::UserAbort))),
        "{rx:?}"
    );
    assert!(absent.expect("X ran")?, "A saw X's uncommitted insert");
    Ok(())
}

/// Delete `k` with a worker that is kept alive and not used again (it does
/// not refresh its GC watermark afterwards, so the tombstone stays in the
/// index, under protocols that leave one).
fn deleted_k(db: &Database, t: tessera::TableId) -> Option<tessera::Worker> {
    let mut d = db.worker().unwrap();
    d.run(|tx| tx.put(t, b"k", b"k0")).unwrap();
    d.run(|tx| tx.delete(t, b"k").map(|_| ())).unwrap();
    // Kept alive by the caller (a dropped worker hands its unlinks to the
    // others).
    Some(d)
}

/// Delete `k` with a worker that is then dropped: its queued unlink of the
/// tombstone goes to the database's orphan queue, for
/// [`gc_unlinks_tombstones`] to adopt.
fn deleted_k_handed_to_gc(db: &Database, t: tessera::TableId) -> Option<tessera::Worker> {
    let mut d = db.worker().unwrap();
    d.run(|tx| tx.put(t, b"k", b"k0")).unwrap();
    d.run(|tx| tx.delete(t, b"k").map(|_| ())).unwrap();
    None
}

/// Let the GC run: a fresh worker adopts the orphaned unlinks and runs
/// enough transactions to refresh its watermark. Every running transaction
/// began after the delete, so the tombstone is at or below the watermark
/// and is unlinked from the index.
fn gc_unlinks_tombstones(db: &Database, t: tessera::TableId) {
    drive_gc(&mut db.worker().unwrap(), t);
}

/// As [`gc_unlinks_tombstones`], on worker `w` (which may already hold the
/// orphaned unlinks: the first worker to finish a transaction after the
/// deleter was dropped adopts them).
fn drive_gc(w: &mut tessera::Worker, t: tessera::TableId) {
    for i in 0..200u32 {
        w.run(|tx| tx.get(t, &i.to_be_bytes()).map(|_| ())).unwrap();
    }
}

/// The missed-key cycle must not commit under any phantom-safe protocol,
/// however A found `k` absent:
///
/// * the key never existed (the node set catches it);
/// * the key is a committed tombstone still in the index (SSN: its stamps;
///   2PL unlinks deleted records at commit, so the node set);
/// * the tombstone was unlinked by the GC before B re-inserted the key
///   into a fresh record, A having found it by a point get (SSN once
///   missed this: the get put nothing in the node set because it found a
///   record, and the old tombstone's π was never set) or by a scan;
/// * A's get met an insert in flight that then rolled back, its record
///   unlinked at once (SSN once missed this too: A's read of the old ⊥
///   was never linked to B's insert into a fresh record).
#[test]
fn missed_key_cycles_abort() {
    type Setup = fn(&Database, tessera::TableId) -> Option<tessera::Worker>;
    type Miss =
        fn(&mut tessera::Txn<'_>, tessera::TableId, &mut tessera::Worker) -> tessera::TxResult<()>;
    type Between = fn(&Database, tessera::TableId);
    let cases: [(&str, Setup, Miss, Between); 5] = [
        ("absent key", no_setup, plain_miss, nothing_between),
        ("tombstone", deleted_k, plain_miss, nothing_between),
        (
            "get of a tombstone the GC then unlinks",
            deleted_k_handed_to_gc,
            plain_miss,
            gc_unlinks_tombstones,
        ),
        (
            "scan over a tombstone the GC then unlinks",
            deleted_k_handed_to_gc,
            scan_miss,
            gc_unlinks_tombstones,
        ),
        (
            "rolled-back insert",
            no_setup,
            rolled_back_miss,
            nothing_between,
        ),
    ];
    for p in nestable_phantom_safe() {
        for (what, setup, miss, between) in cases {
            let r = missed_key_cycle(p, setup, miss, between);
            assert!(
                matches!(r, Err(TxError::Conflict(_))),
                "{p} committed a dependency cycle (A missed k: {what}): {r:?}"
            );
        }
    }
}

/// The key never existed: SSN's node set catches it.
#[test]
fn ssn_missed_absent_key_cycle_aborts() {
    let r = missed_key_cycle(Protocol::Ssn, no_setup, plain_miss, nothing_between);
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
        "{r:?}"
    );
}

/// The key is a deleted record (a committed tombstone still in the index):
/// A's miss read the tombstone version, and B's insert overwrote it, so
/// SSN's stamps on it close the cycle.
#[test]
fn ssn_missed_tombstone_cycle_aborts() {
    let r = missed_key_cycle(Protocol::Ssn, deleted_k, plain_miss, nothing_between);
    assert!(
        matches!(
            r,
            Err(TxError::Conflict(
                ConflictReason::SsnExclusion | ConflictReason::NodeValidation
            ))
        ),
        "{r:?}"
    );
}

/// A misses the key while B's insert of it is still in flight (A looks
/// from inside B's closure), B commits, A overwrites the `a` that B read:
/// the same cycle, which no phantom-safe protocol may commit. (Under 2PL
/// A's get fails on B's lock.)
#[test]
fn missed_in_flight_insert_cycle_aborts() {
    for p in nestable_phantom_safe() {
        let db = db_with(p);
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| tx.put(t, b"a", b"a0")).unwrap();
        let r = a.try_run(|ta| {
            let mut absent = None;
            b.try_run(|tb| {
                assert_eq!(tb.get(t, b"a")?, Some(&b"a0"[..]));
                assert!(tb.insert(t, b"k", b"B")?);
                // A looks at k while B's insert is uncommitted.
                absent = Some(ta.get(t, b"k").map(|v| v.is_none()));
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{p}: B must commit: {e:?}"));
            assert!(absent.expect("B ran")?, "{p}: A saw B's uncommitted insert");
            ta.put(t, b"a", b"A")
        });
        assert!(matches!(r, Err(TxError::Conflict(_))), "{p}: {r:?}");
    }
}

/// SSN's mechanism for [`missed_in_flight_insert_cycle_aborts`]: A read the
/// ⊥ version under B's uncommitted one, B's insert overwrote it, and the
/// exclusion-window test sees the cycle.
#[test]
fn ssn_missed_in_flight_insert_cycle_aborts() {
    let db = db_with(Protocol::Ssn);
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    a.run(|tx| tx.put(t, b"a", b"a0")).unwrap();
    let r = a.try_run(|ta| {
        b.run(|tb| {
            assert_eq!(tb.get(t, b"a")?, Some(&b"a0"[..]));
            assert!(tb.insert(t, b"k", b"B")?);
            // A looks at k while B's insert is uncommitted.
            assert!(ta.get(t, b"k").unwrap().is_none());
            Ok(())
        })
        .unwrap();
        ta.put(t, b"a", b"A")
    });
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::SsnExclusion))),
        "{r:?}"
    );
}

/// A scan (not a point get) over a deleted key whose tombstone the GC
/// unlinks before B re-inserts the key: the unlink changes the scanned
/// leaf, so SSN's node set catches the cycle. (Were the tombstone still
/// linked, B's insert would overwrite it and the SSN test would fail
/// first, with `SsnExclusion`: `NodeValidation` shows the unlink happened,
/// which the point-get case of `missed_key_cycles_abort` relies on.)
#[test]
fn ssn_scan_over_unlinked_tombstone_cycle_aborts() {
    let r = missed_key_cycle(
        Protocol::Ssn,
        deleted_k_handed_to_gc,
        scan_miss,
        gc_unlinks_tombstones,
    );
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
        "{r:?}"
    );
}

/// The committed-reader form of the same cycle. B reads `a`; A (nested)
/// finds `k` absent through its tombstone, overwrites `a` and commits;
/// then B inserts `k` and commits last. A -rw-> B (A missed B's k) and
/// B -rw-> A (B read the `a` that A overwrote): exactly one of them may
/// commit. Under SSN, with the tombstone still linked, B's insert
/// overwrites it, and its η (raised by A's commit) makes B fail the
/// exclusion test; SSN once let the cycle commit when the GC unlinked the
/// tombstone before B's insert (B inserted into a fresh record whose ⊥
/// carried no η). Under 2PL, A fails on B's shared lock on `a`.
#[test]
fn committed_reader_of_missed_key_cycle_aborts() {
    let mut bad = Vec::new();
    for p in nestable_phantom_safe() {
        for unlinked in [false, true] {
            let db = db_with(p);
            let t = db.create_table("t").unwrap();
            let mut a = db.worker().unwrap();
            let mut b = db.worker().unwrap();
            a.run(|tx| tx.put(t, b"a", b"a0")).unwrap();
            let _keep = if unlinked {
                deleted_k_handed_to_gc(&db, t)
            } else {
                deleted_k(&db, t)
            };
            let mut ra = None;
            let rb = b.try_run(|tb| {
                assert_eq!(tb.get(t, b"a")?, Some(&b"a0"[..]));
                ra = Some(a.try_run(|ta| {
                    assert!(ta.get(t, b"k")?.is_none());
                    ta.put(t, b"a", b"A")
                }));
                if unlinked {
                    // A adopted the dropped deleter's unlinks at the end of
                    // its transaction: let it run the GC.
                    drive_gc(&mut a, t);
                }
                assert!(tb.insert(t, b"k", b"B")?);
                Ok(())
            });
            let ra = ra.expect("A ran");
            let what = format!(
                "{p}, tombstone unlinked before the insert = {unlinked}: A: {ra:?}, B: {rb:?}"
            );
            for r in [&ra, &rb] {
                assert!(matches!(r, Ok(()) | Err(TxError::Conflict(_))), "{what}");
            }
            if ra.is_ok() == rb.is_ok() {
                bad.push(format!("exactly one must commit: {what}"));
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A barrier whose waiters give up (panic) instead of hanging if another
/// thread died.
struct Gate {
    n: usize,
    state: std::sync::Mutex<(u64, usize)>,
    cv: std::sync::Condvar,
    broken: std::sync::atomic::AtomicBool,
}

impl Gate {
    fn new(n: usize) -> Gate {
        Gate {
            n,
            state: std::sync::Mutex::new((0, 0)),
            cv: std::sync::Condvar::new(),
            broken: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn wait(&self) {
        use std::sync::atomic::Ordering;
        use std::time::{Duration, Instant};
        let mut g = self.state.lock().unwrap();
        let gen = g.0;
        g.1 += 1;
        if g.1 == self.n {
            g.1 = 0;
            g.0 += 1;
            self.cv.notify_all();
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while g.0 == gen {
            if self.broken.load(Ordering::Relaxed) || Instant::now() > deadline {
                self.broken.store(true, Ordering::Relaxed);
                panic!("a thread at the gate died or hung");
            }
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(50))
                .unwrap()
                .0;
        }
    }
}

struct BreakOnPanic<'a>(&'a Gate);
impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0
                .broken
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The scan-then-insert race in lock step: in each round every thread
/// begins its transaction, waits until all have begun (so every snapshot
/// predates every commit of the round), spins a random while, scans the
/// round's range and inserts its own key if the range looked empty, and
/// tries to commit once. A serializable protocol admits at most one insert
/// per round. Returns the number of rounds with more than one.
fn lockstep_scan_insert_race(p: Protocol, threads: usize, rounds: u64) -> u64 {
    lockstep_race_on(&db_with(p), threads, rounds)
}

fn lockstep_race_on(db: &Database, threads: usize, rounds: u64) -> u64 {
    use rand::{Rng, SeedableRng};
    let t = db.create_table("t").unwrap();
    let gate = Gate::new(threads);
    std::thread::scope(|s| {
        for th in 0..threads as u64 {
            let (db, gate) = (db.clone(), &gate);
            s.spawn(move || {
                let _g = BreakOnPanic(gate);
                let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5CA7 + th);
                let mut w = db.worker().unwrap();
                for r in 0..rounds {
                    let (lo, hi) = (r * 100, r * 100 + 100);
                    let spins = rng.gen_range(0..3000u32);
                    let yield_mid = rng.gen_bool(0.3);
                    let res = w.try_run(|tx| {
                        gate.wait();
                        for _ in 0..spins {
                            std::hint::spin_loop();
                        }
                        let n = tx.scan(
                            t,
                            Bound::Included(&k(lo)),
                            Bound::Excluded(&k(hi)),
                            ScanOptions::new(),
                            |_, _| true,
                        )?;
                        if yield_mid {
                            std::thread::yield_now();
                        }
                        if n == 0 {
                            tx.insert(t, &k(lo + 1 + th), b"winner")?;
                        }
                        Ok(())
                    });
                    match res {
                        Ok(()) | Err(TxError::Conflict(_)) => {}
                        Err(e) => panic!("{e:?}"),
                    }
                }
            });
        }
    });
    let mut w = db.worker().unwrap();
    (0..rounds)
        .filter(|r| {
            let n = w
                .run(|tx| {
                    tx.scan(
                        t,
                        Bound::Included(&k(r * 100)),
                        Bound::Excluded(&k(r * 100 + 100)),
                        ScanOptions::new(),
                        |_, _| true,
                    )
                })
                .unwrap();
            n > 1
        })
        .count() as u64
}

/// Every phantom-safe protocol, blocking ones included (each transaction
/// has its own thread). SSN once failed here: the concurrent form of
/// `scan_then_insert_after_the_scanner_committed`.
#[test]
fn lockstep_scan_insert_race_phantom_safe_admits_at_most_one() {
    for p in phantom_safe() {
        let bad = lockstep_scan_insert_race(p, 4, 300);
        assert_eq!(
            bad, 0,
            "{p}: {bad} of 300 rounds committed more than one insert"
        );
    }
}

/// The same race with Silo's scans validated by a repeated scan.
#[test]
fn lockstep_scan_insert_race_reread_admits_at_most_one() {
    let bad = lockstep_race_on(&reread_db(), 4, 300);
    assert_eq!(bad, 0, "{bad} of 300 rounds committed more than one insert");
}

/// Negative control: snapshot isolation lets several inserts in (the
/// scanners all read the same empty snapshot of the range).
#[test]
fn lockstep_scan_insert_race_si_admits_several() {
    assert!(lockstep_scan_insert_race(Protocol::Si, 4, 300) > 0);
}

/// The node set alone orders a scanner only before inserts that happen
/// before it commits. B finds the range empty (a scan, or point gets of k1
/// and k2), inserts k1 and commits; A, whose snapshot is older than B's
/// commit, finds the range empty too (k1 is not in its snapshot; it looks
/// either while B is uncommitted or after B committed), inserts k2 and
/// commits. A -rw-> B (A missed k1) and B -rw-> A (B missed k2): a cycle.
/// B's node set was intact when B committed; A's node-set entries were
/// taken after B's insert; SSN's stamps see only A -rw-> B (A read k1's
/// ⊥, which B overwrote), which alone is no cycle. SSN once committed
/// both: the range held two rows although each transaction inserted only
/// into an empty range. Every phantom-safe protocol that one thread can
/// interleave must keep the range to one row (Silo aborts A at
/// validation; under 2PL, A's look fails on B's lock while B is in flight
/// and shows B's row once B committed).
#[test]
fn scan_then_insert_after_the_scanner_committed() {
    let mut bad = Vec::new();
    for p in nestable_phantom_safe() {
        for by_scan in [true, false] {
            for a_looks_in_flight in [true, false] {
                if let Some(e) = insert_after_scanner_committed(p, by_scan, a_looks_in_flight) {
                    bad.push(e);
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

fn insert_after_scanner_committed(p: Protocol, by_scan: bool, in_flight: bool) -> Option<String> {
    let db = db_with(p);
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    // "The range is empty": a scan of [0, 100), or point gets of the two
    // keys that could be inserted.
    let empty = |tx: &mut tessera::Txn<'_>| -> tessera::TxResult<bool> {
        if by_scan {
            tx.scan(
                t,
                Bound::Included(&k(0)),
                Bound::Excluded(&k(100)),
                ScanOptions::new(),
                |_, _| true,
            )
            .map(|n| n == 0)
        } else {
            Ok(tx.get(t, &k(1))?.is_none() && tx.get(t, &k(2))?.is_none())
        }
    };
    let mut rb = None;
    let mut a_saw = None;
    let ra = a.try_run(|ta| {
        rb = Some(b.try_run(|tb| {
            assert!(empty(tb)?);
            assert!(tb.insert(t, &k(1), b"B")?);
            if in_flight {
                a_saw = Some(empty(ta));
            }
            Ok(())
        }));
        if !in_flight {
            a_saw = Some(empty(ta));
        }
        match a_saw.take() {
            Some(empty) => {
                if empty? {
                    assert!(ta.insert(t, &k(2), b"A")?);
                }
                Ok(())
            }
            None => ta.user_abort(),
        }
    });
    let mut w = db.worker().unwrap();
    let rows = w
        .run(|tx| {
            tx.scan(
                t,
                Bound::Included(&k(0)),
                Bound::Excluded(&k(100)),
                ScanOptions::new(),
                |_, _| true,
            )
        })
        .unwrap();
    (rows > 1).then(|| {
        format!(
            "{p} (by_scan={by_scan}, A looks while B in flight={in_flight}): \
             both inserts committed: A={ra:?} B={rb:?}"
        )
    })
}

// ---------------------------------------------------------------------------
// Silo's second scan validation, `ScanValidation::Reread`: each scan is run
// again at commit and must find the same present rows (no node set).

fn reread_db() -> Database {
    Database::open(
        Options::in_memory()
            .protocol(Protocol::Silo)
            .scan_validation(ScanValidation::Reread),
    )
    .unwrap()
}

fn nodeset_db() -> Database {
    Database::open(
        Options::in_memory()
            .protocol(Protocol::Silo)
            .scan_validation(ScanValidation::NodeSet),
    )
    .unwrap()
}

/// Rows 0, 2, ..., 398 (all in a few leaves).
fn even_rows(db: &Database) -> (tessera::TableId, tessera::Worker, tessera::Worker) {
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let b = db.worker().unwrap();
    a.run(|tx| {
        for i in 0..200 {
            tx.put(t, &k(i * 2), b"x")?;
        }
        Ok(())
    })
    .unwrap();
    (t, a, b)
}

/// What the scanner of `[100, 110]` gets when, between its scan and its
/// commit, another transaction runs `other` and commits; `write` makes the
/// scanner a writer, `reverse` scans backwards, `limit` stops the scan.
fn reread_scan_with(
    db: &Database,
    other: impl Fn(&mut Txn<'_>, tessera::TableId) -> Result<(), TxError>,
    (write, reverse, limit): (bool, bool, Option<usize>),
) -> Result<usize, TxError> {
    let (t, mut a, mut b) = even_rows(db);
    let mut opts = ScanOptions::new();
    if reverse {
        opts = opts.reverse();
    }
    if let Some(n) = limit {
        opts = opts.limit(n);
    }
    a.try_run(|tx| {
        let n = tx.scan(
            t,
            Bound::Included(&k(100)),
            Bound::Included(&k(110)),
            opts,
            |_, _| true,
        )?;
        b.try_run(|tx2| other(tx2, t))
            .unwrap_or_else(|e| panic!("the other transaction must commit: {e:?}"));
        if write {
            tx.put(t, &k(100_000), b"w")?;
        }
        Ok(n)
    })
}

#[test]
fn reread_scan_catches_inserts_into_the_range() {
    for write in [false, true] {
        for reverse in [false, true] {
            let r = reread_scan_with(
                &reread_db(),
                |tx, t| tx.insert(t, &k(105), b"phantom").map(|_| ()),
                (write, reverse, None),
            );
            assert!(
                matches!(r, Err(TxError::Conflict(ConflictReason::ScanReread))),
                "write={write} reverse={reverse}: {r:?}"
            );
        }
    }
}

#[test]
fn reread_scan_catches_deletes_from_the_range() {
    for write in [false, true] {
        let r = reread_scan_with(
            &reread_db(),
            |tx, t| tx.delete(t, &k(104)).map(|_| ()),
            (write, false, None),
        );
        // The deleted row's TID is in the read set, which is checked first.
        assert!(
            matches!(
                r,
                Err(TxError::Conflict(
                    ConflictReason::ReadValidation | ConflictReason::ScanReread
                ))
            ),
            "write={write}: {r:?}"
        );
    }
}

/// The repeated scan is exact at the range's edges, where the node set is
/// not: an insert next to the range, in the same leaf, aborts the scanner
/// under the node set only.
#[test]
fn reread_scan_is_exact_at_the_edges() {
    let outside = |tx: &mut Txn<'_>, t| tx.insert(t, &k(111), b"next door").map(|_| ());
    let r = reread_scan_with(&reread_db(), outside, (true, false, None));
    assert_eq!(r.ok(), Some(6), "reread: the insert is outside the range");
    let r = reread_scan_with(&nodeset_db(), outside, (true, false, None));
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
        "nodeset: the leaf changed: {r:?}"
    );
}

/// A limited scan is repeated up to the last row it returned.
#[test]
fn reread_limited_scan_protects_only_what_it_returned() {
    for reverse in [false, true] {
        // Forward, limit 2 stops at 102; backward at 108.
        let (inside, beyond) = if reverse { (109, 103) } else { (101, 107) };
        let r = reread_scan_with(
            &reread_db(),
            move |tx, t| tx.insert(t, &k(beyond), b"beyond").map(|_| ()),
            (true, reverse, Some(2)),
        );
        assert_eq!(r.ok(), Some(2), "reverse={reverse}: beyond the last row");
        let r = reread_scan_with(
            &reread_db(),
            move |tx, t| tx.insert(t, &k(inside), b"inside").map(|_| ()),
            (true, reverse, Some(2)),
        );
        assert!(
            matches!(r, Err(TxError::Conflict(ConflictReason::ScanReread))),
            "reverse={reverse}: inside the returned rows: {r:?}"
        );
    }
}

/// The scanner's own writes into its range are not phantoms.
#[test]
fn reread_scan_ignores_its_own_writes() {
    let db = reread_db();
    let (t, mut a, _) = even_rows(&db);
    let n = a
        .try_run(|tx| {
            let n = tx.scan(
                t,
                Bound::Included(&k(100)),
                Bound::Included(&k(110)),
                ScanOptions::new(),
                |_, _| true,
            )?;
            tx.insert(t, &k(103), b"mine")?;
            tx.put(t, &k(104), b"changed")?;
            tx.delete(t, &k(106))?;
            Ok(n)
        })
        .unwrap();
    assert_eq!(n, 6);
    let rows = a
        .run(|tx| {
            tx.scan_collect(
                t,
                Bound::Included(&k(100)),
                Bound::Included(&k(110)),
                ScanOptions::new(),
            )
            .map(|v| v.len())
        })
        .unwrap();
    assert_eq!(rows, 6);
}

/// A scan stopped by its visitor (not a limit), over excluded bounds: the
/// repeated scan covers `(100, last row]` and nothing beyond.
#[test]
fn reread_scan_stopped_by_its_visitor_over_excluded_bounds() {
    for (key, aborts) in [(101, true), (103, true), (105, false), (109, false)] {
        let db = reread_db();
        let (t, mut a, mut b) = even_rows(&db);
        let r = a.try_run(|tx| {
            let mut seen = 0;
            tx.scan(
                t,
                Bound::Excluded(&k(100)),
                Bound::Excluded(&k(110)),
                ScanOptions::new(),
                |_, _| {
                    seen += 1;
                    seen < 2 // stop at the second row, 104
                },
            )?;
            b.try_run(|tx2| tx2.insert(t, &k(key), b"new").map(|_| ()))
                .unwrap_or_else(|e| panic!("the insert must commit: {e:?}"));
            tx.put(t, &k(100_000), b"w")?;
            Ok(seen)
        });
        if aborts {
            assert!(
                matches!(r, Err(TxError::Conflict(ConflictReason::ScanReread))),
                "insert of {key}: {r:?}"
            );
        } else {
            assert_eq!(r.ok(), Some(2), "insert of {key} is beyond the last row");
        }
    }
}

/// ROCC and GWV with `RoccRegistration::Scanned`: writers register only in
/// ranges where a scan is in flight. A scanner still aborts on an insert
/// into its range and on an update of a row it scanned (scanned rows are in
/// no read set: only the registration catches the update), and a writer
/// that meets no scan commits and leaves nothing in the list for a later
/// scanner to trip on.
#[test]
fn registration_only_where_scans_are_still_catches_phantoms_and_updates() {
    for p in [Protocol::Rocc, Protocol::Gwv] {
        let db = Database::open(
            Options::in_memory()
                .protocol(p)
                .rocc_registration(tessera::RoccRegistration::Scanned),
        )
        .unwrap();
        let (t, mut a, mut b) = every_tenth_key(&db);
        let scan = |tx: &mut Txn<'_>, lo: u64, hi: u64| {
            tx.scan(
                t,
                Bound::Included(&k(lo)),
                Bound::Excluded(&k(hi)),
                ScanOptions::new(),
                |_, _| true,
            )
        };
        // An insert into the scanned (empty) range.
        let r = a.try_run(|tx| {
            assert_eq!(scan(tx, 41, 50)?, 0);
            b.try_run(|tx2| tx2.insert(t, &k(45), b"phantom").map(|_| ()))
                .unwrap_or_else(|e| panic!("{p}: the inserter must commit: {e:?}"));
            tx.put(t, &k(1000), b"decided: range empty")
        });
        assert!(
            matches!(r, Err(TxError::Conflict(ConflictReason::RangeValidation))),
            "{p}: insert into a scanned range: {r:?}"
        );
        // An update of a scanned row.
        let r = a.try_run(|tx| {
            assert_eq!(scan(tx, 0, 35)?, 4);
            b.try_run(|tx2| tx2.put(t, &k(20), b"changed"))
                .unwrap_or_else(|e| panic!("{p}: the updater must commit: {e:?}"));
            tx.put(t, &k(1001), b"sum of 0..35")
        });
        assert!(
            matches!(r, Err(TxError::Conflict(ConflictReason::RangeValidation))),
            "{p}: update of a scanned row: {r:?}"
        );
        // Writers with no scan in flight, then a scanner of their range:
        // nothing to validate against, it commits.
        b.run(|tx2| tx2.put(t, &k(30), b"unscanned")).unwrap();
        let r = a.try_run(|tx| {
            assert_eq!(scan(tx, 0, 100)?, 11);
            tx.put(t, &k(1002), b"after the writers")
        });
        assert!(r.is_ok(), "{p}: {r:?}");
    }
}

/// An iterator scan (`Txn::range`) run over an empty range, then an insert
/// into it by a transaction that commits first: the scanner aborts as a
/// callback scan's would, forward and reverse.
#[test]
fn iterator_scan_then_concurrent_insert_aborts_the_scanner() {
    for (p, reverse) in nestable_phantom_safe()
        .into_iter()
        .flat_map(|p| [(p, false), (p, true)])
    {
        let db = db_with(p);
        let (t, mut a, mut b) = every_tenth_key(&db);
        let r = a.try_run(|tx| {
            let count = |n: usize, row: TxResult<Row>| row.map(|_| n + 1);
            let mut it = tx.range(t, k(41)..k(50));
            let n = if reverse {
                it.rev().try_fold(0, count)?
            } else {
                it.try_fold(0, count)?
            };
            assert_eq!(n, 0);
            b.try_run(|tx2| tx2.insert(t, &k(45), b"phantom").map(|_| ()))
                .unwrap_or_else(|e| panic!("{p}: T2 must commit: {e:?}"));
            tx.put(t, &k(1000), b"decided: range empty")?;
            Ok(())
        });
        match r {
            Ok(()) if !younger_insert_aborts_scanner(p) => {}
            Err(TxError::Conflict(r)) if r == scan_phantom(p) => {}
            other => panic!("{p}: expected a phantom abort (reverse={reverse}), got {other:?}"),
        }
    }
}

/// An iterator that fetched its range in many chunks protects the whole of
/// it: an insert between two rows far from the first chunk aborts the
/// scanner, from either end (the chunks' union is one scanned range).
#[test]
fn iterator_scan_over_many_chunks_protects_the_whole_range() {
    for (p, reverse) in nestable_phantom_safe()
        .into_iter()
        .flat_map(|p| [(p, false), (p, true)])
    {
        let db = db_with(p);
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            for i in 0..3000 {
                tx.put(t, &k(i * 2), b"x")?;
            }
            Ok(())
        })
        .unwrap();
        // Odd keys are free: one in the middle of the range, one near each end.
        for gap in [2999u64, 11, 5989] {
            let r = a.try_run(|tx| {
                let mut n = 0;
                let mut last: Option<Vec<u8>> = None;
                let rows: Box<dyn Iterator<Item = _>> = if reverse {
                    Box::new(tx.range(t, k(0)..k(6000)).rev())
                } else {
                    Box::new(tx.range(t, k(0)..k(6000)))
                };
                for row in rows {
                    let (key, _) = row?;
                    if let Some(l) = &last {
                        assert_eq!(key < *l, reverse, "{p}: order");
                    }
                    last = Some(key);
                    n += 1;
                }
                assert_eq!(n, 3000);
                b.try_run(|tx2| tx2.insert(t, &k(gap), b"phantom").map(|_| ()))
                    .unwrap_or_else(|e| panic!("{p}: T2 must commit: {e:?}"));
                tx.put(t, &k(100_000), b"decided: 3000 rows")?;
                Ok(())
            });
            match r {
                Ok(()) if !younger_insert_aborts_scanner(p) => {}
                Err(TxError::Conflict(r)) if r == scan_phantom(p) => {}
                other => panic!(
                    "{p}: expected a phantom abort at {gap} (reverse={reverse}), got {other:?}"
                ),
            }
            a.run(|tx| tx.delete(t, &k(gap)).map(|_| ())).unwrap();
        }
    }
}

/// The concurrent scan-insert race of
/// `concurrent_scan_insert_race_admits_exactly_one`, with the range read
/// by an iterator (from the front in even rounds, from the back in odd
/// ones): exactly one insert per round under every phantom-safe protocol.
#[test]
fn concurrent_iterator_insert_race_admits_exactly_one() {
    for p in phantom_safe() {
        scan_insert_race_with(p, true, true);
    }
}

/// ROCC scans in parts of several logical ranges (one index scan per part,
/// the predicates of its ranges constructed first). A limited scan that
/// stops inside a part keeps predicates only up to the row it stopped at:
/// an insert past that row, in its range or in a range of the part it never
/// reached, commits beside it; one inside the rows it covered, in any of
/// the ranges it crossed, aborts it. Forward and reverse, both registration
/// modes, over ranges of ten rows.
#[test]
fn rocc_scan_parts_protect_exactly_what_they_covered() {
    use tessera::RoccRegistration;
    for p in [Protocol::Rocc, Protocol::Gwv] {
        for reg in [RoccRegistration::Always, RoccRegistration::Scanned] {
            for reverse in [false, true] {
                rocc_scan_parts(p, reg, reverse);
            }
        }
    }
}

/// A database under `p` with ROCC's ranges of 10 rows and registration
/// `reg`, and a table of the even keys 0..800: 400 rows, in ranges of 10
/// rows (20 keys wide) once the first range has been split.
fn rocc_even_keys(p: Protocol, reg: tessera::RoccRegistration) -> (Database, tessera::TableId) {
    let db = Database::open(
        Options::in_memory()
            .protocol(p)
            .rocc_range_size(10)
            .rocc_registration(reg),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..400 {
            tx.put(t, &k(i * 2), b"x")?;
        }
        Ok(())
    })
    .unwrap();
    w.run(|tx| tx.put(t, &k(10_000), b"after the split"))
        .unwrap();
    drop(w);
    (db, t)
}

fn rocc_scan_parts(p: Protocol, reg: tessera::RoccRegistration, reverse: bool) {
    let (db, t) = rocc_even_keys(p, reg);
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    // Forward: from 5, 25 rows (6, 8, ..., 54): ranges [0, 20), [20, 40)
    // and [40, 60) reached, [60, 80) in the part but not reached.
    // Reverse: below 699, 25 rows (698 down to 650): ranges [680, 700),
    // [660, 680) and [640, 660) reached, [620, 640) in the part only.
    // Each case inserts one absent (odd) key while the scanner is open.
    let (lo, hi, first, last) = if reverse {
        (Bound::Unbounded, Bound::Excluded(k(699)), 698, 650)
    } else {
        (Bound::Included(k(5)), Bound::Unbounded, 6, 54)
    };
    let cases = if reverse {
        [
            (649, false), // past the stop row, in its range
            (641, false), // past it, the same range's far end
            (631, false), // a range of the part not reached
            (699, false), // the scan's own (excluded) bound
            (701, false), // beyond it, the same range
            (671, true),  // a whole range crossed
            (651, true),  // just before the stop row
            (697, true),  // just inside the scan's bound
        ]
    } else {
        [
            (55, false), // past the stop row, in its range
            (59, false), // past it, the same range's far end
            (61, false), // a range of the part not reached
            (3, false),  // before the scan's own bound, same range
            (5, true),   // the scan's own (included) bound
            (31, true),  // a whole range crossed
            (53, true),  // just before the stop row
            (7, true),   // just after the scan's own bound
        ]
    };
    for (key, aborts) in cases {
        let r = a.try_run(|tx| {
            let mut seen = Vec::new();
            let opts = if reverse {
                ScanOptions::new().limit(25).reverse()
            } else {
                ScanOptions::new().limit(25)
            };
            let lo = lo.as_ref().map(|x| &x[..]);
            let hi = hi.as_ref().map(|x| &x[..]);
            let n = tx.scan(t, lo, hi, opts, |key, _| {
                seen.push(u64::from_be_bytes(key.try_into().unwrap()));
                true
            })?;
            assert_eq!(n, 25, "{p}");
            assert_eq!((seen[0], seen[24]), (first, last), "{p} reverse={reverse}");
            let fresh = b
                .try_run(|tx2| tx2.insert(t, &k(key), b"new"))
                .unwrap_or_else(|e| panic!("{p}: the inserter must commit: {e:?}"));
            assert!(fresh, "{key} was absent");
            tx.put(t, &k(20_000), b"w")
        });
        if aborts {
            assert!(
                matches!(r, Err(TxError::Conflict(ConflictReason::RangeValidation))),
                "{p} {reg:?} reverse={reverse}: an insert of {key} must abort the scan: {r:?}"
            );
        } else {
            assert!(
                r.is_ok(),
                "{p} {reg:?} reverse={reverse}: an insert of {key} must not: {r:?}"
            );
        }
        // Take the key out again for the next case.
        assert!(b.run(|tx2| tx2.delete(t, &k(key))).unwrap());
    }
}

/// Under `RoccRegistration::Scanned` a writer does not register for its own
/// scans (its predicates skip its own entry), but it still must for anyone
/// else's: B scans the range A scanned and writes into it; A, still open,
/// must fail. And a writer alone with its own scan commits.
#[test]
fn a_writer_that_scanned_still_registers_for_other_scanners() {
    for p in [Protocol::Rocc, Protocol::Gwv] {
        let db = Database::open(
            Options::in_memory()
                .protocol(p)
                .rocc_registration(tessera::RoccRegistration::Scanned),
        )
        .unwrap();
        let (t, mut a, mut b) = every_tenth_key(&db);
        let scan = |tx: &mut Txn<'_>| {
            tx.scan(
                t,
                Bound::Included(&k(0)),
                Bound::Excluded(&k(100)),
                ScanOptions::new(),
                |_, _| true,
            )
        };
        // Alone: scan, update a scanned row, commit.
        b.run(|tx| {
            assert_eq!(scan(tx)?, 10);
            tx.put(t, &k(20), b"mine")
        })
        .unwrap();
        let r = a.try_run(|tx| {
            assert_eq!(scan(tx)?, 10);
            b.try_run(|tx2| {
                assert_eq!(scan(tx2)?, 10);
                tx2.put(t, &k(30), b"theirs")
            })
            .unwrap_or_else(|e| panic!("{p}: B must commit: {e:?}"));
            tx.put(t, &k(1000), b"decided on the old 30")
        });
        assert!(
            matches!(r, Err(TxError::Conflict(ConflictReason::RangeValidation))),
            "{p}: B's write into A's scanned range, B having scanned it too: {r:?}"
        );
    }
}

/// A writer looks a table's ranges and scan count up once per run of
/// writes to that table; every write of the run must still register where
/// a scan is in flight. B updates ten rows outside A's scan and one inside
/// it, in one transaction (commit takes them in record-address order, so
/// the one inside is not the run's first); A scanned before B committed and
/// then writes, so it must abort.
#[test]
fn every_write_of_a_run_registers_where_a_scan_is() {
    use tessera::RoccRegistration;
    for p in [Protocol::Rocc, Protocol::Gwv] {
        for reg in [RoccRegistration::Always, RoccRegistration::Scanned] {
            let (db, t) = rocc_even_keys(p, reg);
            let mut a = db.worker().unwrap();
            let mut b = db.worker().unwrap();
            for inside in [400, 410, 418] {
                let mut rb = None;
                let ra = a.try_run(|ta| {
                    let rows = ta.scan_collect(
                        t,
                        Bound::Included(&k(400)[..]),
                        Bound::Excluded(&k(420)[..]),
                        ScanOptions::new(),
                    )?;
                    assert_eq!(rows.len(), 10);
                    rb = Some(b.try_run(|tb| {
                        for i in (0..20).step_by(2).chain([inside]) {
                            assert!(tb.update(t, &k(i), b"y")?);
                        }
                        Ok(())
                    }));
                    ta.put(t, &k(10_001), b"a")
                });
                let what = format!("{p}, {reg:?}, B wrote {inside}");
                assert!(matches!(rb, Some(Ok(()))), "{what}: B {rb:?}");
                assert!(matches!(ra, Err(TxError::Conflict(_))), "{what}: A {ra:?}");
            }
        }
    }
}

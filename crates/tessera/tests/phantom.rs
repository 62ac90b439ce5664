//! Phantom protection (Silo section 4.6): scans and missed lookups put index
//! leaves in the node set; an insert into a scanned range by a concurrent
//! transaction must abort the scanner. Also the read-validation counterpart.

use std::ops::Bound;
use std::sync::{Arc, Barrier};

use tessera::{ConflictReason, Database, Options, ScanOptions, TxError};

fn k(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn db() -> Database {
    Database::open(Options::in_memory()).unwrap()
}

/// T1 scans an empty range and writes elsewhere; T2 inserts into the range
/// and commits first: T1 must fail node-set validation.
#[test]
fn scan_then_concurrent_insert_aborts_the_scanner() {
    for reverse in [false, true] {
        let db = db();
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| {
            for i in (0..100).step_by(10) {
                tx.put(t, &k(i), b"x")?;
            }
            Ok(())
        })
        .unwrap();
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
            // T2 inserts into the scanned range and commits.
            b.run(|tx2| tx2.insert(t, &k(45), b"phantom").map(|_| ()))
                .unwrap();
            tx.put(t, &k(1000), b"decided: range empty")?;
            Ok(())
        });
        match r {
            Err(TxError::Conflict(ConflictReason::NodeValidation)) => {}
            other => panic!("expected a node-validation abort (reverse={reverse}), got {other:?}"),
        }
        // Nothing of T1 is visible.
        let seen = a.run(|tx| Ok(tx.get(t, &k(1000))?.is_some())).unwrap();
        assert!(!seen);
    }
}

/// A scan with a limit protects only what it examined: an insert beyond the
/// last row returned (in a different leaf) does not abort it, but one inside
/// does.
#[test]
fn limited_scan_protects_the_rows_it_returned() {
    let db = db();
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
        b.run(|tx2| tx2.insert(t, &k(3), b"inside").map(|_| ()))
            .unwrap();
        tx.put(t, &k(100_000), b"w")?;
        Ok(())
    });
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
        "{r:?}"
    );
    let r = a.try_run(|tx| {
        let n = tx.scan(
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanOptions::new().limit(3),
            |_, _| true,
        )?;
        assert_eq!(n, 3);
        b.run(|tx2| tx2.insert(t, &k(3_999), b"far away").map(|_| ()))
            .unwrap();
        tx.put(t, &k(100_000), b"w")?;
        Ok(())
    });
    assert!(
        r.is_ok(),
        "an insert far outside the examined range must not abort: {r:?}"
    );
}

/// A point lookup that misses records the leaf; inserting that key aborts it.
#[test]
fn missed_get_then_concurrent_insert_aborts() {
    let db = db();
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    let r = a.try_run(|tx| {
        assert!(tx.get(t, &k(7))?.is_none());
        b.run(|tx2| tx2.insert(t, &k(7), b"now here").map(|_| ()))
            .unwrap();
        tx.put(t, &k(8), b"7 was absent")?;
        Ok(())
    });
    assert!(
        matches!(r, Err(TxError::Conflict(ConflictReason::NodeValidation))),
        "{r:?}"
    );
}

/// A record read, then overwritten by a committed transaction: read validation fails.
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
/// exactly one insert per round; a missed phantom would let two in.
#[test]
fn concurrent_scan_insert_race_admits_exactly_one() {
    let db = db();
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
                        let n = tx.scan(
                            t,
                            Bound::Included(&k(lo)),
                            Bound::Excluded(&k(hi)),
                            ScanOptions::new(),
                            |_, _| true,
                        )?;
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
        assert_eq!(n, 1, "round {r}: {n} inserts committed");
    }
}

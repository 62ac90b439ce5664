//! MVRCC's own rules (multi-version timestamp ordering with range read
//! timestamps; `Protocol::Mvrcc`), where they differ from the OCC and SI
//! expectations of the shared conformance matrix: the order is the order of
//! the timestamps taken at begin, so the tests nest the *older* transaction
//! outside (its closure starts first) and the younger one inside.

use std::ops::Bound;

use tessera::{
    ConflictReason, Database, Options, Protocol, ScanOptions, TableId, TxError, Txn, Worker,
};

fn k(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn db() -> Database {
    Database::open(Options::in_memory().protocol(Protocol::Mvrcc)).unwrap()
}

fn with_rows(db: &Database, rows: &[u64]) -> TableId {
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for &i in rows {
            tx.put(t, &k(i), b"x")?;
        }
        Ok(())
    })
    .unwrap();
    t
}

fn conflict(r: &Result<(), TxError>) -> Option<ConflictReason> {
    match r {
        Err(TxError::Conflict(c)) => Some(*c),
        _ => None,
    }
}

/// The ways a younger transaction can read that a range holds no key 45.
type Miss = fn(&mut Txn<'_>, TableId) -> Result<(), TxError>;

fn misses() -> Vec<(&'static str, Miss)> {
    fn scan(tx: &mut Txn<'_>, t: TableId, opts: ScanOptions) -> Result<(), TxError> {
        let n = tx.scan(
            t,
            Bound::Included(&k(41)),
            Bound::Excluded(&k(50)),
            opts,
            |_, _| true,
        )?;
        assert_eq!(n, 0);
        Ok(())
    }
    vec![
        ("scan", |tx, t| scan(tx, t, ScanOptions::new())),
        ("reverse scan", |tx, t| {
            scan(tx, t, ScanOptions::new().reverse())
        }),
        ("limited scan", |tx, t| {
            // Stops at the first row after the range (50): 41..=50 read.
            let n = tx.scan(
                t,
                Bound::Included(&k(41)),
                Bound::Unbounded,
                ScanOptions::new().limit(1),
                |key, _| {
                    assert_eq!(key, k(50));
                    true
                },
            )?;
            assert_eq!(n, 1);
            Ok(())
        }),
        ("get", |tx, t| {
            assert!(tx.get(t, &k(45))?.is_none());
            Ok(())
        }),
        ("update of a missing key", |tx, t| {
            assert!(!tx.update(t, &k(45), b"y")?);
            Ok(())
        }),
        ("get of a deleted key", |tx, t| {
            // 45 exists as a tombstone here (see the test).
            assert!(tx.get(t, &k(45))?.is_none());
            Ok(())
        }),
    ]
}

/// Run `body` for each kind of miss (the deleted-key one only with
/// `deleted`) on a fresh database holding rows 0, 10, ..., 60 (and 45 as a
/// tombstone for that kind), with two workers, the one to run the older
/// transaction first.
fn for_each_miss(
    deleted: bool,
    mut body: impl FnMut(&str, Miss, &Database, TableId, &mut Worker, &mut Worker),
) {
    for (name, miss) in misses() {
        let is_deleted = name == "get of a deleted key";
        if is_deleted && !deleted {
            continue;
        }
        let db = db();
        let t = with_rows(&db, &[0, 10, 20, 30, 40, 50, 60]);
        if is_deleted {
            let mut w = db.worker().unwrap();
            w.run(|tx| tx.put(t, &k(45), b"gone")).unwrap();
            w.run(|tx| tx.delete(t, &k(45)).map(|_| ())).unwrap();
        }
        let mut old = db.worker().unwrap();
        let mut young = db.worker().unwrap();
        body(name, miss, &db, t, &mut old, &mut young);
    }
}

/// A younger transaction reads that a range is empty (by each kind of
/// read) and commits; an older one then inserts there: in timestamp order
/// the insert came first, and the younger reader missed it, so the insert
/// must abort (the range's read timestamp is above its timestamp).
#[test]
fn an_older_insert_into_a_range_a_younger_transaction_read_aborts() {
    for_each_miss(true, |name, miss, db, t, old, young| {
        let r = old.try_run(|tx| {
            young
                .try_run(|ty| {
                    miss(ty, t)?;
                    ty.put(t, &k(1000), b"45 was absent")
                })
                .unwrap_or_else(|e| panic!("{name}: the younger reader must commit: {e:?}"));
            tx.put(t, &k(45), b"phantom")
        });
        assert_eq!(
            conflict(&r),
            Some(ConflictReason::TimestampOrder),
            "{name}: {r:?}"
        );
        let mut w = db.worker().unwrap();
        let (v45, v1000) = w
            .run(|tx| Ok((tx.get(t, &k(45))?.is_some(), tx.get(t, &k(1000))?.is_some())))
            .unwrap();
        assert!(!v45 && v1000, "{name}: only the younger reader committed");
    });
}

/// The other order: the younger transaction inserts into a range an older
/// one already read; the older is ordered first, so both commit.
#[test]
fn a_younger_insert_into_a_range_an_older_transaction_read_commits() {
    for_each_miss(false, |name, miss, _, t, old, young| {
        let r = old.try_run(|tx| {
            miss(tx, t)?;
            young
                .try_run(|ty| ty.put(t, &k(45), b"after"))
                .unwrap_or_else(|e| panic!("{name}: the younger insert must commit: {e:?}"));
            tx.put(t, &k(1000), b"45 was absent")
        });
        assert!(r.is_ok(), "{name}: {r:?}");
    });
}

/// A scan (or a miss) that meets a writer registered in its range with a
/// smaller timestamp, still running, aborts: that writer's insert may land
/// in what the scan reads.
#[test]
fn a_read_of_a_range_with_an_older_writer_in_flight_aborts() {
    for_each_miss(false, |name, miss, _, t, old, young| {
        let r = old.try_run(|tx| {
            // Registered in the range (an update of an existing row, far
            // from the scanned keys, in the same logical range).
            tx.put(t, &k(10), b"older writer")?;
            let ry = young.try_run(|ty| miss(ty, t));
            assert_eq!(
                conflict(&ry),
                Some(ConflictReason::PendingWrite),
                "{name}: {ry:?}"
            );
            Ok(())
        });
        assert!(r.is_ok(), "{name}: the older writer commits: {r:?}");
    });
}

/// Point reads: an older transaction's uncommitted version aborts a younger
/// reader; a younger one's is skipped by an older reader, which reads the
/// version before it.
#[test]
fn point_reads_see_the_versions_below_their_timestamp() {
    let db = db();
    let t = with_rows(&db, &[1]);
    let mut old = db.worker().unwrap();
    let mut young = db.worker().unwrap();
    let r = old.try_run(|tx| {
        tx.put(t, &k(1), b"older, uncommitted")?;
        let ry = young.try_run(|ty| ty.get(t, &k(1)).map(|_| ()));
        assert_eq!(conflict(&ry), Some(ConflictReason::PendingWrite));
        Ok(())
    });
    assert!(r.is_ok(), "{r:?}");
    let r = old.try_run(|tx| {
        young
            .try_run(|ty| ty.put(t, &k(1), b"younger"))
            .expect("the younger writer commits");
        // Committed, but above our timestamp: invisible.
        assert_eq!(tx.get(t, &k(1))?, Some(&b"older, uncommitted"[..]));
        Ok(())
    });
    assert!(r.is_ok(), "{r:?}");
}

/// The timestamp rule for writes: an older transaction may not overwrite a
/// version a younger one has read (the younger read would have had to see
/// the write), nor a version committed above its timestamp.
#[test]
fn an_older_write_over_a_version_a_younger_transaction_read_aborts() {
    let db = db();
    let t = with_rows(&db, &[1, 2]);
    let mut old = db.worker().unwrap();
    let mut young = db.worker().unwrap();
    let r = old.try_run(|tx| {
        young
            .try_run(|ty| ty.get(t, &k(1)).map(|_| ()))
            .expect("read-only commits");
        tx.put(t, &k(1), b"too late")
    });
    assert_eq!(conflict(&r), Some(ConflictReason::TimestampOrder), "{r:?}");
    let r = old.try_run(|tx| {
        young
            .try_run(|ty| ty.put(t, &k(2), b"younger"))
            .expect("the younger writer commits");
        tx.put(t, &k(2), b"older")
    });
    assert_eq!(conflict(&r), Some(ConflictReason::WriteConflict), "{r:?}");
    let mut w = db.worker().unwrap();
    let v = w
        .run(|tx| {
            Ok((
                tx.get(t, &k(1))?.map(|v| v.to_vec()),
                tx.get(t, &k(2))?.map(|v| v.to_vec()),
            ))
        })
        .unwrap();
    assert_eq!(v, (Some(b"x".to_vec()), Some(b"younger".to_vec())));
}

/// Write skew, the anomaly SI allows (two transactions each read both rows
/// and write a different one): timestamp ordering lets only the older
/// commit, the younger's reads ordered it after the older's write.
#[test]
fn write_skew_is_refused() {
    let db = db();
    let t = with_rows(&db, &[1, 2]);
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    let r = a.try_run(|ta| {
        ta.get(t, &k(1))?;
        ta.get(t, &k(2))?;
        let rb = b.try_run(|tb| {
            tb.get(t, &k(1))?;
            tb.get(t, &k(2))?;
            tb.put(t, &k(2), b"b")
        });
        assert!(rb.is_ok(), "the younger commits first: {rb:?}");
        // Our write of 1 comes after b, younger, read 1.
        ta.put(t, &k(1), b"a")
    });
    assert_eq!(conflict(&r), Some(ConflictReason::TimestampOrder), "{r:?}");
}

/// Tables filled through transactions start with one range; as they grow
/// the partition is replaced (every doubling, once the memory epoch has
/// moved past the last swap: the test runs long enough for several), and
/// scans across the ranges stay exact: each compares a count of every row
/// with a counter that the inserting transactions bump, while other
/// workers insert.
#[test]
fn partitions_are_replaced_as_tables_grow_and_scans_stay_exact() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let db = Database::open(
        Options::in_memory()
            .protocol(Protocol::Mvrcc)
            .rocc_range_size(4),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let counter = k(u64::MAX);
    {
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.put(t, &counter, &0u64.to_be_bytes()))
            .unwrap();
    }
    let stop = AtomicBool::new(false);
    let count = |v: Option<&[u8]>| u64::from_be_bytes(v.unwrap().try_into().unwrap());
    // The counter, and the rows a scan of the whole table counts.
    let census = move |tx: &mut Txn<'_>| -> Result<(u64, u64), TxError> {
        let n = count(tx.get(t, &counter)?);
        let rows = tx.scan(
            t,
            Bound::Unbounded,
            Bound::Excluded(&counter),
            ScanOptions::new(),
            |_, _| true,
        )?;
        Ok((n, rows as u64))
    };
    std::thread::scope(|s| {
        for w in 0..3u64 {
            let (db, stop) = (&db, &stop);
            s.spawn(move || {
                let mut wk = db.worker().unwrap();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Spread over the key space, so every range grows.
                    let key = k((i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 2) + w);
                    wk.run(|tx| {
                        let n = count(tx.get(t, &counter)?);
                        if tx.insert(t, &key, b"row")? {
                            tx.put(t, &counter, &(n + 1).to_be_bytes())?;
                        }
                        Ok(())
                    })
                    .unwrap();
                    i += 1;
                }
            });
        }
        let (db, stop) = (&db, &stop);
        s.spawn(move || {
            let mut wk = db.worker().unwrap();
            let began = std::time::Instant::now();
            while began.elapsed() < std::time::Duration::from_millis(600) {
                let (n, rows) = wk.run(census).unwrap();
                assert_eq!(rows, n, "a scan saw a count the counter does not");
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    let mut w = db.worker().unwrap();
    let (n, rows) = w.run(census).unwrap();
    assert_eq!(rows, n);
    assert!(n > 100, "too few inserts to grow the table: {n}");
}

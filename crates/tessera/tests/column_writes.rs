//! Column writes (`update_slice`) under every protocol: a transaction's
//! reads, scans and commits see exactly what a whole-row `update` with the
//! same bytes changed would give (checked against a model over random
//! operation sequences, own writes and aborts included); ranges outside the
//! row are refused; concurrent column writes to one row lose no update;
//! and a column write survives recovery from the log.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Error, Options, Protocol, ScanOptions, TxError};

fn open(p: Protocol) -> Database {
    open_with(p, p.caps().snapshot_txns)
}

/// With snapshots, Silo keeps old versions and installs a column write as
/// a whole new row; without, it writes the bytes in place.
fn open_with(p: Protocol, snapshots: bool) -> Database {
    Database::open(
        Options::in_memory()
            .protocol(p)
            .snapshots(snapshots)
            .epoch_interval(Duration::from_millis(1)),
    )
    .unwrap()
}

/// Every protocol, and the snapshot setting(s) it has.
fn settings() -> Vec<(Protocol, bool)> {
    Protocol::INTERACTIVE
        .into_iter()
        .flat_map(|p| {
            let snap = p.caps().snapshot_txns;
            [(p, false)].into_iter().chain(snap.then_some((p, true)))
        })
        .collect()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One random transaction of gets, column reads and writes, whole-row
/// writes, inserts, deletes and scans on 8 keys, each result checked
/// against `model` (the transaction's own view); it commits or aborts as
/// the dice say, and `model` is what the database must hold afterwards.
fn random_txn(
    p: Protocol,
    db: &Database,
    t: tessera::TableId,
    rng: &mut StdRng,
    model: &mut Model,
) {
    let mut w = db.worker().unwrap();
    let seed: u64 = rng.gen();
    // nocc does not roll back a user abort: only commit there.
    let abort = p != Protocol::NoCc && rng.gen_bool(0.3);
    let mut view = model.clone();
    let r = w.try_run(|tx| {
        let mut rng = StdRng::seed_from_u64(seed);
        view = model.clone();
        for _ in 0..12 {
            let k = vec![b'k', rng.gen_range(0..8u8)];
            match rng.gen_range(0..8) {
                0 => {
                    let got = tx.get(t, &k)?.map(<[u8]>::to_vec);
                    assert_eq!(got.as_ref(), view.get(&k), "{p}: get {k:?}");
                }
                1 => {
                    let (a, n) = (rng.gen_range(0..40), rng.gen_range(0..40));
                    let got = tx.get_slice(t, &k, a..a + n)?.map(<[u8]>::to_vec);
                    let want = view.get(&k).map(|v| {
                        let e = (a + n).min(v.len());
                        v[a.min(e)..e].to_vec()
                    });
                    assert_eq!(got, want, "{p}: get_slice {k:?} {a}+{n}");
                }
                2 | 3 => {
                    let (a, n) = (rng.gen_range(0..32), rng.gen_range(0..12));
                    let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
                    let r = tx.update_slice(t, &k, a, &bytes);
                    match view.get_mut(&k) {
                        None => assert!(matches!(r, Ok(false)), "{p}: absent {k:?}: {r:?}"),
                        Some(v) if a + n > v.len() => assert!(
                            matches!(r, Err(TxError::Error(Error::InvalidArgument(_)))),
                            "{p}: {a}+{n} of {}: {r:?}",
                            v.len()
                        ),
                        Some(v) => {
                            assert!(r?, "{p}: update_slice {k:?}");
                            v[a..a + n].copy_from_slice(&bytes);
                        }
                    }
                }
                4 => {
                    let v: Vec<u8> = (0..rng.gen_range(16..40)).map(|_| rng.gen()).collect();
                    let present = tx.update(t, &k, &v)?;
                    assert_eq!(present, view.contains_key(&k), "{p}: update {k:?}");
                    if present {
                        view.insert(k, v);
                    }
                }
                5 => {
                    let v: Vec<u8> = (0..rng.gen_range(16..40)).map(|_| rng.gen()).collect();
                    let fresh = tx.insert(t, &k, &v)?;
                    assert_eq!(fresh, !view.contains_key(&k), "{p}: insert {k:?}");
                    view.entry(k).or_insert(v);
                }
                6 => {
                    let existed = tx.delete(t, &k)?;
                    assert_eq!(existed, view.remove(&k).is_some(), "{p}: delete {k:?}");
                }
                _ => {
                    let (a, n) = (rng.gen_range(0..30), rng.gen_range(1..20));
                    let opts = ScanOptions::new().slice(a..a + n);
                    let got = tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, opts)?;
                    let want: Vec<_> = view
                        .iter()
                        .map(|(k, v)| {
                            let e = (a + n).min(v.len());
                            (k.clone(), v[a.min(e)..e].to_vec())
                        })
                        .collect();
                    assert_eq!(got, want, "{p}: scan slice {a}+{n}");
                }
            }
        }
        if abort {
            return tx.user_abort();
        }
        Ok(())
    });
    match r {
        Ok(()) => *model = view,
        Err(TxError::Error(tessera::Error::UserAbort)) => {}
        Err(e) => panic!("{p}: {e:?}"),
    }
    // What committed is what the model holds.
    w.run(|tx| {
        let all = tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new())?;
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(all, want, "{p}: committed state");
        Ok(())
    })
    .unwrap();
}

#[test]
fn column_writes_agree_with_whole_row_updates_under_every_protocol() {
    for (p, snapshots) in settings() {
        let db = open_with(p, snapshots);
        let t = db.create_table("t").unwrap();
        let mut model = Model::new();
        let mut rng = StdRng::seed_from_u64(0xC01 ^ p as u64);
        for _ in 0..300 {
            random_txn(p, &db, t, &mut rng, &mut model);
        }
    }
}

#[test]
fn update_slice_refuses_a_range_outside_the_row() {
    for p in Protocol::INTERACTIVE {
        let db = open(p);
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.insert(t, b"k", &[0u8; 10]).map(|_| ()))
            .unwrap();
        for (at, n) in [(8, 3), (10, 1), (11, 0), (usize::MAX, 2)] {
            let r = w.run(|tx| tx.update_slice(t, b"k", at, &vec![1u8; n]));
            match r {
                Err(Error::InvalidArgument(m)) => {
                    assert!(m.contains("10-byte value"), "{p}: {m}")
                }
                other => panic!("{p}: {at}+{n}: {other:?}"),
            }
        }
        // The row is untouched; a range that ends at the row's end is fine.
        w.run(|tx| {
            assert_eq!(tx.get(t, b"k")?, Some(&[0u8; 10][..]), "{p}");
            assert!(tx.update_slice(t, b"k", 7, b"abc")?, "{p}");
            assert!(tx.update_slice(t, b"k", 10, b"")?, "{p}");
            assert!(!tx.update_slice(t, b"absent", 0, b"x")?, "{p}");
            Ok(())
        })
        .unwrap();
        w.run(|tx| {
            assert_eq!(tx.get(t, b"k")?, Some(&b"\0\0\0\0\0\0\0abc"[..]), "{p}");
            Ok(())
        })
        .unwrap();
    }
}

/// Threads add to their own 8-byte column of one row and to a shared
/// column, each by a column read and a column write: under every protocol
/// that isolates transactions no increment is lost, in either column.
#[test]
fn concurrent_column_writes_lose_no_update() {
    const THREADS: usize = 4;
    const ROUNDS: u64 = 300;
    for (p, snapshots) in settings() {
        // nocc has no isolation; read committed loses updates by design.
        if !(p.caps().serializable || p.caps().snapshot_reads) {
            continue;
        }
        let db = Arc::new(open_with(p, snapshots));
        let t = db.create_table("t").unwrap();
        db.worker()
            .unwrap()
            .run(|tx| tx.insert(t, b"row", &[0u8; 8 * (THREADS + 1)]).map(|_| ()))
            .unwrap();
        let shared = 8 * THREADS;
        std::thread::scope(|s| {
            for i in 0..THREADS {
                let db = Arc::clone(&db);
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    for _ in 0..ROUNDS {
                        w.run(|tx| {
                            for col in [8 * i, shared] {
                                let b = tx.get_slice(t, b"row", col..col + 8)?.unwrap();
                                let n = u64::from_le_bytes(b.try_into().unwrap()) + 1;
                                assert!(tx.update_slice(t, b"row", col, &n.to_le_bytes())?);
                            }
                            Ok(())
                        })
                        .unwrap();
                    }
                });
            }
        });
        db.worker()
            .unwrap()
            .run(|tx| {
                let row = tx.get(t, b"row")?.unwrap();
                let col = |c: usize| u64::from_le_bytes(row[c..c + 8].try_into().unwrap());
                for i in 0..THREADS {
                    assert_eq!(col(8 * i), ROUNDS, "{p}: column {i}");
                }
                assert_eq!(col(shared), ROUNDS * THREADS as u64, "{p}: shared column");
                Ok(())
            })
            .unwrap();
    }
}

/// A column write is logged (as the bytes it changes) and recovered, with
/// and without snapshots (with them, Silo installs whole new versions).
#[test]
fn column_writes_survive_recovery() {
    for p in Protocol::INTERACTIVE {
        if !p.caps().durable {
            continue;
        }
        for snapshots in [false, true] {
            if snapshots && !p.caps().snapshot_txns {
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let opts = || {
                Options::durable(dir.path())
                    .protocol(p)
                    .snapshots(snapshots)
                    .epoch_interval(Duration::from_millis(2))
            };
            {
                let db = Database::open(opts()).unwrap();
                let t = db.create_table("t").unwrap();
                let mut w = db.worker().unwrap();
                w.run(|tx| tx.insert(t, b"k", &[7u8; 40]).map(|_| ()))
                    .unwrap();
                w.run(|tx| {
                    assert!(tx.update_slice(t, b"k", 3, b"abc")?);
                    assert!(tx.update_slice(t, b"k", 38, b"yz")?);
                    Ok(())
                })
                .unwrap();
                drop(db);
            }
            let db = Database::open(opts()).unwrap();
            let t = db.table("t").unwrap();
            let mut want = [7u8; 40];
            want[3..6].copy_from_slice(b"abc");
            want[38..].copy_from_slice(b"yz");
            db.worker()
                .unwrap()
                .run(|tx| {
                    assert_eq!(
                        tx.get(t, b"k")?,
                        Some(&want[..]),
                        "{p} snapshots {snapshots}"
                    );
                    Ok(())
                })
                .unwrap();
        }
    }
}

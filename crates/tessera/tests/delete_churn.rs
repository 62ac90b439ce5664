//! Deletes and writes of the same few keys from many threads: commits must
//! never wait on each other in a cycle. (A commit used to unlink a deleted
//! record while still holding its later write-set locks, out of the global
//! lock order; two such commits deadlocked. TPC-C's Delivery found it.)
//!
//! Under ERMIA's protocols (`si`, `ssn`) nothing is locked at commit, but
//! readers wait for transactions in pre-commit, SSN committers wait for
//! earlier committers, and the GC unlinks tombstones under the record lock
//! while writers install over them: the same workload checks that none of
//! these waits closes a cycle, and a counting variant checks that no
//! committed write is lost across deletes, unlinks and re-inserts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Options, Protocol};

fn never_deadlock(protocol: Protocol, per_thread: usize) {
    let db = Database::open(
        Options::in_memory()
            .protocol(protocol)
            .epoch_interval(Duration::from_millis(1)),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    const KEYS: u64 = 4;
    let (done_tx, done_rx) = mpsc::channel();
    let threads = 4;
    for th in 0..threads {
        let (db, done_tx) = (db.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let mut w = db.worker().unwrap();
            let mut rng = SmallRng::seed_from_u64(th);
            for _ in 0..per_thread {
                let a = rng.gen_range(0..KEYS).to_be_bytes();
                let b = rng.gen_range(0..KEYS).to_be_bytes();
                w.run(|tx| {
                    // Delete or re-create `a`, and write `b`: every commit
                    // holds two locks, and half of them unlink a record.
                    if tx.get(t, &a)?.is_some() {
                        tx.delete(t, &a)?;
                    } else {
                        tx.insert(t, &a, b"x")?;
                    }
                    tx.put(t, &b, b"y")?;
                    Ok(())
                })
                .unwrap();
            }
            let _ = done_tx.send(());
        });
    }
    for i in 0..threads {
        done_rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| {
                panic!("{protocol}: only {i} of {threads} threads finished: deadlock")
            });
    }
}

#[test]
fn deletes_and_writes_never_deadlock() {
    never_deadlock(Protocol::Silo, 100_000);
}

#[test]
fn si_deletes_and_writes_never_deadlock() {
    never_deadlock(Protocol::Si, 50_000);
}

#[test]
fn ssn_deletes_and_writes_never_deadlock() {
    never_deadlock(Protocol::Ssn, 50_000);
}

/// Toggles and counters in one table. Each transaction toggles a key of the
/// toggle range (delete it if present, insert it if absent) and adds one to
/// a counter row, which it first deletes and re-inserts now and then. Every
/// operation reads what it overwrites, so any protocol here (SI included:
/// first-updater-wins orders writers of a key) must end with each toggle
/// key present iff it was toggled an odd number of times, and each counter
/// equal to its number of increments. A lost write, a resurrected
/// tombstone or a double-applied insert breaks one of them.
fn no_lost_writes(protocol: Protocol, threads: u64, per_thread: u64) {
    let db = Database::open(
        Options::in_memory()
            .protocol(protocol)
            .epoch_interval(Duration::from_millis(1)),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    const TOGGLES: u64 = 6;
    const COUNTERS: u64 = 3;
    let toggle_key = |i: u64| i.to_be_bytes();
    let counter_key = |i: u64| (1000 + i).to_be_bytes();
    let toggled: Arc<Vec<AtomicU64>> = Arc::new((0..TOGGLES).map(|_| AtomicU64::new(0)).collect());
    let bumped: Arc<Vec<AtomicU64>> = Arc::new((0..COUNTERS).map(|_| AtomicU64::new(0)).collect());
    let (done_tx, done_rx) = mpsc::channel();
    for th in 0..threads {
        let (db, done_tx, toggled, bumped) =
            (db.clone(), done_tx.clone(), toggled.clone(), bumped.clone());
        std::thread::spawn(move || {
            let mut w = db.worker().unwrap();
            let mut rng = SmallRng::seed_from_u64(0xC0DE + th);
            for _ in 0..per_thread {
                let a = rng.gen_range(0..TOGGLES);
                let c = rng.gen_range(0..COUNTERS);
                let recreate = rng.gen_ratio(1, 4);
                w.run(|tx| {
                    let ka = toggle_key(a);
                    if tx.get(t, &ka)?.is_some() {
                        assert!(
                            tx.delete(t, &ka)?,
                            "a key seen present could not be deleted"
                        );
                    } else {
                        assert!(
                            tx.insert(t, &ka, &[7; 40])?,
                            "a key seen absent could not be inserted"
                        );
                    }
                    let kc = counter_key(c);
                    let n = tx
                        .get(t, &kc)?
                        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                    let v = (n + 1).to_le_bytes();
                    if recreate && n > 0 {
                        assert!(tx.delete(t, &kc)?);
                        assert!(tx.insert(t, &kc, &v)?);
                    } else {
                        tx.put(t, &kc, &v)?;
                    }
                    Ok(())
                })
                .unwrap();
                toggled[a as usize].fetch_add(1, Ordering::Relaxed);
                bumped[c as usize].fetch_add(1, Ordering::Relaxed);
            }
            let _ = done_tx.send(());
        });
    }
    for i in 0..threads {
        done_rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("{protocol}: only {i} of {threads} threads finished"));
    }
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..TOGGLES {
            let odd = toggled[i as usize].load(Ordering::Relaxed) % 2 == 1;
            assert_eq!(
                tx.get(t, &toggle_key(i))?.is_some(),
                odd,
                "{protocol}: toggle key {i} toggled {} times",
                toggled[i as usize].load(Ordering::Relaxed)
            );
        }
        for i in 0..COUNTERS {
            let n = tx
                .get(t, &counter_key(i))?
                .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
            assert_eq!(
                n,
                bumped[i as usize].load(Ordering::Relaxed),
                "{protocol}: counter {i}"
            );
        }
        // Gets and a scan agree.
        let rows = tx.scan_collect(
            t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            tessera::ScanOptions::new(),
        )?;
        let present = (0..TOGGLES)
            .filter(|&i| toggled[i as usize].load(Ordering::Relaxed) % 2 == 1)
            .count()
            + (0..COUNTERS)
                .filter(|&i| bumped[i as usize].load(Ordering::Relaxed) > 0)
                .count();
        assert_eq!(rows.len(), present, "{protocol}: scan vs gets");
        Ok(())
    })
    .unwrap();
}

#[test]
fn silo_delete_churn_loses_no_writes() {
    no_lost_writes(Protocol::Silo, 4, 20_000);
}

#[test]
fn si_delete_churn_loses_no_writes() {
    no_lost_writes(Protocol::Si, 4, 20_000);
}

#[test]
fn ssn_delete_churn_loses_no_writes() {
    no_lost_writes(Protocol::Ssn, 4, 20_000);
}

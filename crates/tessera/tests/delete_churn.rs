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
//! committed write is lost across deletes, unlinks and re-inserts. Under
//! 2PL every operation takes a record lock held to the end: `2pl-nowait`
//! must never wait at all, `2pl-waitdie` only from older to younger.
//!
//! Both tests run under every protocol of [`Protocol::INTERACTIVE`] except those
//! without isolation (`nocc`: its writes race by design).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Options, Protocol};

/// Every protocol that isolates transactions (serializable, or reading a
/// snapshot).
fn isolated() -> impl Iterator<Item = Protocol> {
    Protocol::INTERACTIVE.into_iter().filter(|p| {
        let c = p.caps();
        c.serializable || c.snapshot_reads
    })
}

/// Spawn `body` on a detached thread that reports on `done` how it ended:
/// `Ok`, or the message it panicked with (so that a failure is reported at
/// once rather than as a timeout).
fn spawn_reporting(done: mpsc::Sender<Result<(), String>>, body: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).map_err(|e| {
            e.downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        });
        let _ = done.send(r);
    });
}

/// Wait for `threads` reports from [`spawn_reporting`] threads; `stuck`
/// says what not hearing from one within two minutes means.
fn wait_all(
    protocol: Protocol,
    done: &mpsc::Receiver<Result<(), String>>,
    threads: u64,
    stuck: &str,
) {
    for i in 0..threads {
        match done.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(())) => {}
            Ok(Err(m)) => panic!("{protocol}: a thread failed: {m}"),
            Err(_) => panic!("{protocol}: only {i} of {threads} threads finished: {stuck}"),
        }
    }
}

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
        spawn_reporting(done_tx, move || {
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
                .unwrap_or_else(|e| panic!("{protocol}: {e}"));
            }
        });
    }
    wait_all(protocol, &done_rx, threads, "deadlock");
}

#[test]
fn deletes_and_writes_never_deadlock() {
    for p in isolated() {
        never_deadlock(p, 100_000);
    }
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
        spawn_reporting(done_tx, move || {
            let mut w = db.worker().unwrap();
            let mut rng = SmallRng::seed_from_u64(0xC0DE + th);
            for _ in 0..per_thread {
                let a = rng.gen_range(0..TOGGLES);
                let c = rng.gen_range(0..COUNTERS);
                let recreate = rng.gen_ratio(1, 4);
                // A contradiction fails the test after the rollback: a
                // panic inside `run` would leave a locking protocol's locks
                // held and the other threads retrying for ever.
                let mut contradiction = None;
                let r = w.run(|tx| {
                    contradiction = None;
                    let ka = toggle_key(a);
                    if tx.get(t, &ka)?.is_some() {
                        if !tx.delete(t, &ka)? {
                            contradiction = Some("a key seen present could not be deleted");
                            return tx.user_abort();
                        }
                    } else if !tx.insert(t, &ka, &[7; 40])? {
                        contradiction = Some("a key seen absent could not be inserted");
                        return tx.user_abort();
                    }
                    let kc = counter_key(c);
                    let n = tx
                        .get(t, &kc)?
                        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                    let v = (n + 1).to_le_bytes();
                    if recreate && n > 0 {
                        if !tx.delete(t, &kc)? {
                            contradiction = Some("a counter seen present could not be deleted");
                            return tx.user_abort();
                        }
                        if !tx.insert(t, &kc, &v)? {
                            contradiction = Some("a counter just deleted could not be inserted");
                            return tx.user_abort();
                        }
                    } else {
                        tx.put(t, &kc, &v)?;
                    }
                    Ok(())
                });
                if let Some(m) = contradiction {
                    panic!("{protocol}: {m} (toggle key {a}, counter {c})");
                }
                r.unwrap_or_else(|e| panic!("{protocol}: {e}"));
                toggled[a as usize].fetch_add(1, Ordering::Relaxed);
                bumped[c as usize].fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    wait_all(protocol, &done_rx, threads, "stuck");
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
fn delete_churn_loses_no_writes() {
    for p in isolated() {
        no_lost_writes(p, 4, 20_000);
    }
}

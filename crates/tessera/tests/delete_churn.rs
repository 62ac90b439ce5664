//! Deletes and writes of the same few keys from many threads: commits must
//! never wait on each other in a cycle. (A commit used to unlink a deleted
//! record while still holding its later write-set locks, out of the global
//! lock order; two such commits deadlocked. TPC-C's Delivery found it.)

use std::sync::mpsc;
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Options};

#[test]
fn deletes_and_writes_never_deadlock() {
    let db = Database::open(Options::in_memory().epoch_interval(Duration::from_millis(1))).unwrap();
    let t = db.create_table("t").unwrap();
    const KEYS: u64 = 4;
    let (done_tx, done_rx) = mpsc::channel();
    let threads = 4;
    for th in 0..threads {
        let (db, done_tx) = (db.clone(), done_tx.clone());
        std::thread::spawn(move || {
            let mut w = db.worker().unwrap();
            let mut rng = SmallRng::seed_from_u64(th);
            for _ in 0..100_000 {
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
            .unwrap_or_else(|_| panic!("only {i} of {threads} threads finished: deadlock"));
    }
}

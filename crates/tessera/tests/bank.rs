//! Bank transfers: concurrent transfers conserve the total, and read-only
//! auditors (validated reads, and Silo snapshot transactions) always see
//! the exact total, which only a serializable execution guarantees.
//!
//! A conformance matrix: every test runs under every protocol of
//! [`Protocol::INTERACTIVE`] that isolates transactions (serializable, or reading
//! a snapshot; `nocc` does neither), the snapshot-auditor ones under those
//! with snapshot transactions; a protocol added to the list is checked by
//! being listed.
//!
//! Under ERMIA's `si` the same holds although SI is not serializable:
//! every transfer (and every close/re-open) writes *both* accounts it
//! read, so first-updater-wins orders any two that share an account, and
//! a snapshot is a prefix of the commits. The others are serializable
//! outright.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Options, Protocol, ScanOptions, TableId, TxResult, Txn, Worker};

const INITIAL: u64 = 1_000;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn bal(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().expect("8-byte balance"))
}

fn sum(tx: &mut Txn<'_>, t: TableId) -> TxResult<(u64, usize)> {
    let mut s = 0;
    let n = tx.scan(
        t,
        Bound::Unbounded,
        Bound::Unbounded,
        ScanOptions::new(),
        |_, v| {
            s += bal(v);
            true
        },
    )?;
    Ok((s, n))
}

fn setup(db: &Database, accounts: u64) -> TableId {
    let t = db.create_table("accounts").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..accounts {
            tx.insert(t, &key(i), &INITIAL.to_le_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    t
}

/// One random transfer; with `churn`, sometimes move a whole account into
/// another (delete) or re-open a closed account (insert).
///
/// A `delete` (`insert`) that contradicts the transaction's own read of the
/// account fails the test, but only after the transaction has been rolled
/// back: a panic inside `run` would leave a locking protocol's locks held
/// and the other threads retrying for ever instead of failing.
fn transfer(
    protocol: Protocol,
    w: &mut Worker,
    t: TableId,
    rng: &mut SmallRng,
    accounts: u64,
    churn: bool,
) {
    let a = rng.gen_range(0..accounts);
    let mut b = rng.gen_range(0..accounts);
    if a == b {
        b = (b + 1) % accounts;
    }
    let amount = rng.gen_range(1..300u64);
    let op = if churn { rng.gen_range(0..10) } else { 0 };
    let mut contradiction = None;
    let r = w.run(|tx| {
        contradiction = None;
        let va = tx.get(t, &key(a))?.map(bal);
        let vb = tx.get(t, &key(b))?.map(bal);
        match (op, va, vb) {
            // close a: move everything into b
            (8, Some(x), Some(y)) => {
                if !tx.delete(t, &key(a))? {
                    contradiction = Some(format!("account {a} read present, delete says absent"));
                    return tx.user_abort();
                }
                tx.put(t, &key(b), &(x + y).to_le_bytes())?;
            }
            // re-open a closed a with half of b
            (9, None, Some(y)) => {
                if !tx.insert(t, &key(a), &(y / 2).to_le_bytes())? {
                    contradiction = Some(format!("account {a} read absent, insert says present"));
                    return tx.user_abort();
                }
                tx.put(t, &key(b), &(y - y / 2).to_le_bytes())?;
            }
            (_, Some(x), Some(y)) => {
                if x < amount {
                    return tx.user_abort();
                }
                tx.put(t, &key(a), &(x - amount).to_le_bytes())?;
                tx.put(t, &key(b), &(y + amount).to_le_bytes())?;
            }
            _ => {}
        }
        Ok(())
    });
    if let Some(c) = contradiction {
        panic!("{protocol}: {c}");
    }
    match r {
        Ok(()) | Err(tessera::Error::UserAbort) => {}
        Err(e) => panic!("{protocol}: transfer failed: {e}"),
    }
}

/// The protocols the bank checks: every one that isolates transactions
/// (serializable, or reading a snapshot); `nocc` conserves nothing.
fn isolated() -> impl Iterator<Item = Protocol> {
    Protocol::INTERACTIVE.into_iter().filter(|p| {
        let c = p.caps();
        c.serializable || c.snapshot_reads
    })
}

/// `run_bank_with` for every isolated protocol; with `snapshots`, only
/// those that also offer Silo's snapshot transactions.
fn run_bank(accounts: u64, threads: usize, per_thread: usize, churn: bool, snapshots: bool) {
    let mut ran = Vec::new();
    for p in isolated().filter(|p| !snapshots || p.caps().snapshot_txns) {
        let t0 = std::time::Instant::now();
        run_bank_with(p, accounts, threads, per_thread, churn, snapshots);
        ran.push(format!("{p} {:.2} s", t0.elapsed().as_secs_f64()));
    }
    assert!(!ran.is_empty(), "no protocol ran");
    eprintln!("ran under {}", ran.join(", "));
}

fn run_bank_with(
    protocol: Protocol,
    accounts: u64,
    threads: usize,
    per_thread: usize,
    churn: bool,
    snapshots: bool,
) {
    let db = Database::open(
        Options::in_memory()
            .protocol(protocol)
            .epoch_interval(Duration::from_millis(1))
            .snapshots(snapshots)
            .snapshot_epochs(2),
    )
    .unwrap();
    let t = setup(&db, accounts);
    let total = accounts * INITIAL;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Stop the auditors however this closure ends: a panicking transfer
        // must fail the test, not leave the auditors running forever.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop_auditors = StopOnDrop(&stop);
        // auditors
        for snap in [false, true] {
            if snap && !snapshots {
                continue;
            }
            let (db, stop) = (db.clone(), &stop);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut audits = 0;
                while !stop.load(Ordering::Relaxed) || audits < 5 {
                    let (s, _) = if snap {
                        w.run_snapshot(|tx| sum(tx, t)).unwrap()
                    } else {
                        w.run(|tx| sum(tx, t)).unwrap()
                    };
                    // A snapshot taken before the load committed sees nothing.
                    if !(snap && s == 0) {
                        assert_eq!(
                            s, total,
                            "{protocol}: auditor (snapshot={snap}) saw a wrong total"
                        );
                    }
                    audits += 1;
                }
            });
        }
        let workers: Vec<_> = (0..threads)
            .map(|th| {
                let db = db.clone();
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(0xB4A2 + th as u64);
                    let mut w = db.worker().unwrap();
                    for _ in 0..per_thread {
                        transfer(protocol, &mut w, t, &mut rng, accounts, churn);
                    }
                })
            })
            .collect();
        for h in workers {
            h.join().unwrap();
        }
    });
    let mut w = db.worker().unwrap();
    let (s, n) = w.run(|tx| sum(tx, t)).unwrap();
    assert_eq!(s, total, "{protocol}: total not conserved");
    assert!(n >= 1);
}

#[test]
fn transfers_conserve_the_total() {
    run_bank(200, 6, 3_000, false, false);
}

#[test]
fn hot_accounts_high_contention() {
    run_bank(4, 6, 2_000, false, false);
}

/// Accounts are closed (deleted) and re-opened (inserted) while transfers
/// and auditors run: exercises absent records, unlinking, empty leaves and
/// the early confirmation of `insert`/`delete` answers (a transaction that
/// saw an account missing must never be told it exists; the `assert!`s in
/// `transfer` check it). Under ERMIA deletes leave tombstones that the GC
/// unlinks meanwhile; under 2PL a closed account is an absent key whose
/// protection is the node set.
#[test]
fn transfers_with_account_deletes_and_reinserts() {
    run_bank(64, 6, 3_000, true, false);
}

#[test]
fn hot_accounts_with_deletes_and_reinserts() {
    run_bank(4, 6, 2_000, true, false);
}

/// Silo's snapshot transactions audit too (only the protocols that offer
/// them).
#[test]
fn churn_with_snapshot_auditor() {
    run_bank(64, 4, 2_000, true, true);
}

#[test]
fn snapshot_auditor_sees_consistent_totals() {
    run_bank(100, 4, 3_000, false, true);
}

/// `snapshots(true)` is Silo's option: a protocol without snapshot
/// transactions refuses it (the multi-version ones because every
/// transaction already reads a snapshot), and one with them accepts it.
#[test]
fn snapshots_option_follows_the_capability() {
    for p in Protocol::INTERACTIVE {
        let r = Database::open(Options::in_memory().protocol(p).snapshots(true));
        if p.caps().snapshot_txns {
            assert!(r.is_ok(), "{p}: {:?}", r.err());
        } else {
            assert!(
                matches!(r, Err(tessera::Error::InvalidArgument(_))),
                "{p}: {:?}",
                r.err()
            );
        }
    }
}

//! `Database::backup_to`: a copy taken while writers run opens, holds a
//! consistent state (the bank's total is conserved) and every commit
//! acknowledged before the call; bad destinations are refused clearly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tessera::{Database, Durability, Error, Options, Protocol};

const ACCOUNTS: u64 = 200;
const START: u64 = 1_000;

fn key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn val(v: &[u8]) -> u64 {
    u64::from_le_bytes(v.try_into().unwrap())
}

fn opts(dir: &std::path::Path, p: Protocol, durability: Durability) -> Options {
    Options::durable(dir)
        .protocol(p)
        .durability(durability)
        .epoch_interval(Duration::from_millis(10))
        .segment_bytes(64 << 10)
}

/// The bank's total and each thread's count of acknowledged transfers.
fn audit(db: &Database, threads: u64) -> (u64, Vec<u64>) {
    let bank = db.table("bank").unwrap();
    let done = db.table("done").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        let mut total = 0;
        for row in tx.prefix(bank, b"") {
            total += val(&row?.1);
        }
        let mut counts = Vec::new();
        for th in 0..threads {
            counts.push(tx.get(done, &key(th))?.map_or(0, val));
        }
        Ok((total, counts))
    })
    .unwrap()
}

#[test]
fn a_backup_taken_while_transfers_run_is_consistent_and_complete() {
    for (p, durability) in [
        (Protocol::Silo, Durability::Sync),
        (Protocol::Silo, Durability::Async),
        (Protocol::Ssn, Durability::Async),
        (Protocol::Rocc, Durability::Sync),
        (Protocol::Mvrcc, Durability::Async),
    ] {
        let root = tempfile::tempdir().unwrap();
        let (src, dest) = (root.path().join("db"), root.path().join("copy"));
        let db = Database::open(opts(&src, p, durability)).unwrap();
        let bank = db.create_table("bank").unwrap();
        let done = db.create_table("done").unwrap();
        db.worker()
            .unwrap()
            .run(|tx| {
                for i in 0..ACCOUNTS {
                    tx.put(bank, &key(i), &START.to_le_bytes())?;
                }
                Ok(())
            })
            .unwrap();
        let threads = 3u64;
        let stop = Arc::new(AtomicBool::new(false));
        // Each thread's acknowledged transfers, published after `run` returns.
        let acked: Arc<Vec<std::sync::atomic::AtomicU64>> =
            Arc::new((0..threads).map(|_| Default::default()).collect());
        let info = std::thread::scope(|s| {
            for th in 0..threads {
                let (db, stop, acked) = (db.clone(), Arc::clone(&stop), Arc::clone(&acked));
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    let mut n = 0u64;
                    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ (th + 1);
                    while !stop.load(Ordering::Relaxed) {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let (a, b) = (rng % ACCOUNTS, (rng >> 20) % ACCOUNTS);
                        w.run(|tx| {
                            let x = val(tx.get(bank, &key(a))?.unwrap());
                            let y = val(tx.get(bank, &key(b))?.unwrap());
                            if a != b && x > 0 {
                                tx.put(bank, &key(a), &(x - 1).to_le_bytes())?;
                                tx.put(bank, &key(b), &(y + 1).to_le_bytes())?;
                            }
                            tx.put(done, &key(th), &(n + 1).to_le_bytes())
                        })
                        .unwrap();
                        n += 1;
                        acked[th as usize].store(n, Ordering::Release);
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(150));
            let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::Acquire)).collect();
            let info = db.backup_to(&dest);
            std::thread::sleep(Duration::from_millis(50));
            stop.store(true, Ordering::Relaxed);
            info.map(|i| (i, before))
        });
        let (info, before) = info.unwrap_or_else(|e| panic!("{p}/{durability}: {e}"));
        assert_eq!(info.dir, dest);
        assert!(info.files >= 3 && info.bytes > 0, "{info:?}");
        assert!(!root.path().join("copy.partial").exists());
        let live = audit(&db, threads);
        db.close().unwrap();
        // The copy opens as a database of its own (an ordinary open).
        let copy = Database::open(opts(&dest, p, durability)).unwrap();
        let (total, counts) = audit(&copy, threads);
        assert_eq!(
            total,
            ACCOUNTS * START,
            "{p}/{durability}: money appeared or vanished"
        );
        for th in 0..threads as usize {
            assert!(
                counts[th] >= before[th],
                "{p}/{durability}: thread {th}'s {} acknowledged transfers before the backup, \
                 {} in it",
                before[th],
                counts[th]
            );
            assert!(counts[th] <= live.1[th]);
        }
        copy.close().unwrap();
        // The original still opens, unchanged by the copy.
        let db = Database::open(opts(&src, p, durability)).unwrap();
        assert_eq!(audit(&db, threads), live, "{p}/{durability}");
    }
}

#[test]
fn bad_destinations_and_databases_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let src = root.path().join("db");
    let db = Database::open(opts(&src, Protocol::Silo, Durability::Sync)).unwrap();
    let t = db.create_table("t").unwrap();
    db.worker()
        .unwrap()
        .run(|tx| tx.put(t, b"k", b"v"))
        .unwrap();
    let msg = |e: Error| e.to_string();
    // Not empty.
    let full = root.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let e = msg(db.backup_to(&full).unwrap_err());
    assert!(e.contains("not empty"), "{e}");
    // A file.
    let e = msg(db.backup_to(full.join("x")).unwrap_err());
    assert!(e.contains("not a directory"), "{e}");
    // The source itself.
    let e = msg(db.backup_to(&src).unwrap_err());
    assert!(
        e.contains("not empty") || e.contains("own directory"),
        "{e}"
    );
    // An empty directory is fine, and a second backup elsewhere too.
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    db.backup_to(&empty).unwrap();
    db.backup_to(root.path().join("again")).unwrap();
    // A folder named like an unfinished backup that is not one is left
    // alone; an unfinished one (its marker inside) is replaced.
    let stranger = root.path().join("mine.partial");
    std::fs::create_dir(&stranger).unwrap();
    std::fs::write(stranger.join("precious"), b"x").unwrap();
    let e = msg(db.backup_to(root.path().join("mine")).unwrap_err());
    assert!(e.contains("not an unfinished backup"), "{e}");
    assert!(stranger.join("precious").exists());
    let crashed = root.path().join("later.partial");
    std::fs::create_dir(&crashed).unwrap();
    std::fs::write(crashed.join("BACKUP-IN-PROGRESS"), b"").unwrap();
    std::fs::write(crashed.join("log-000-00000000.tlog"), b"torn").unwrap();
    db.backup_to(root.path().join("later")).unwrap();
    assert!(!crashed.exists());
    db.close().unwrap();
    // A database whose directory is named like the destination's
    // unfinished copy is never removed by a backup.
    let odd = root.path().join("x.partial");
    let db2 = Database::open(opts(&odd, Protocol::Silo, Durability::Sync)).unwrap();
    let e = msg(db2.backup_to(root.path().join("x")).unwrap_err());
    assert!(e.contains("own directory"), "{e}");
    assert!(odd.join("tessera.meta").exists());
    db2.close().unwrap();
    // In memory: nothing to copy.
    let mem = Database::open(Options::in_memory()).unwrap();
    let e = msg(mem.backup_to(root.path().join("m")).unwrap_err());
    assert!(e.contains("durable"), "{e}");
    // Read-only.
    let ro = Database::open(opts(&src, Protocol::Silo, Durability::Sync).read_only(true)).unwrap();
    assert!(matches!(
        ro.backup_to(root.path().join("r")),
        Err(Error::ReadOnly)
    ));
    // The backups open read-only too.
    for d in ["empty", "again"] {
        let c = Database::open(
            opts(&root.path().join(d), Protocol::Silo, Durability::Sync).read_only(true),
        )
        .unwrap();
        let t = c.table("t").unwrap();
        let v = c
            .worker()
            .unwrap()
            .run(|tx| Ok(tx.get(t, b"k")?.map(<[u8]>::to_vec)))
            .unwrap();
        assert_eq!(v.as_deref(), Some(&b"v"[..]), "{d}");
    }
}

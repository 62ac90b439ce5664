//! The deterministic protocols through `Database`: `Options::protocol(
//! Protocol::Bohm)` (and `2pl-ordered`) opens the batch engine, tables are
//! created and loaded before the first submission, `Database::submit`
//! returns receipts, `dump` reads a consistent state, a durable directory
//! recovers through `Database::open`, and what does not apply is refused
//! with a message that says what to do. `submit`, `load` and `dump` work
//! under the interactive protocols too, with the same results.

use std::collections::BTreeMap;
use std::time::Duration;

use tessera::det::{ArgReader, Outcome, ProcId, Procedure, Procedures};
use tessera::{
    Database, Durability, Error, KeySet, Options, Protocol, Request, TableId, Transaction, TxResult,
};

/// Add `by` to counter `key` of table `t`, and return the new value; a
/// negative result aborts (the logic's own abort), leaving nothing.
#[derive(Clone, Debug)]
struct Add {
    t: TableId,
    key: u32,
    by: i64,
}

fn val(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().unwrap())
}

impl Request for Add {
    type Output = i64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<i64> {
        let k = self.key.to_be_bytes();
        let n = tx.get(self.t, &k)?.map_or(0, val) + self.by;
        tx.put(self.t, &k, &n.to_le_bytes())?;
        if n < 0 {
            return tx.user_abort();
        }
        Ok(n)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.write(self.t, &self.key.to_be_bytes());
        true
    }
}

impl Procedure for Add {
    const ID: ProcId = 0x7a01;
    const NAME: &'static str = "add";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.t.as_u32().to_le_bytes());
        out.extend_from_slice(&self.key.to_le_bytes());
        out.extend_from_slice(&self.by.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Result<Self, String> {
        let mut r = ArgReader::new("add", b);
        let a = Add {
            t: TableId::from_u32(r.u32()?),
            key: r.u32()?,
            by: r.i64()?,
        };
        r.finish()?;
        Ok(a)
    }
}

const KEYS: u32 = 16;

/// The request stream of client `c`: every fourth one would go negative on
/// a fresh counter and so aborts unless the key has grown enough.
fn stream(t: TableId, c: u32, n: u32) -> Vec<Add> {
    (0..n)
        .map(|i| Add {
            t,
            key: (c * 7 + i * 3) % KEYS,
            by: if i % 4 == 3 { -25 } else { 10 },
        })
        .collect()
}

/// Submit `n` requests from each of `clients` threads: how many committed,
/// how many aborted, and the sum of the committed adds.
fn drive(db: &Database, t: TableId, clients: u32, n: u32) -> (usize, usize, i64) {
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || {
                    let rs: Vec<_> = stream(t, c, n)
                        .into_iter()
                        .map(|a| (a.by, db.submit(a).expect("submit")))
                        .collect();
                    let (mut ok, mut ab, mut sum) = (0, 0, 0);
                    for (by, r) in rs {
                        match r.wait().expect("outcome") {
                            Outcome::Committed(v) => {
                                assert!(v >= 0);
                                ok += 1;
                                sum += by;
                            }
                            Outcome::Aborted => ab += 1,
                        }
                    }
                    (ok, ab, sum)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
    })
}

fn det_opts(p: Protocol) -> Options {
    Options::in_memory()
        .protocol(p)
        // Lazy: partitioned stickification (two CC threads, a now-phase
        // thread).
        .cc_threads(2)
        .exec_threads(2)
        .batch_size(64)
        .batch_time(Duration::from_micros(300))
}

/// Each counter's final value is its load plus the committed adds; with
/// one client the run is a serial order, so every protocol agrees.
#[test]
fn every_protocol_runs_the_same_requests_through_submit() {
    let mut results = Vec::new();
    for p in Protocol::ALL {
        let opts = if p.caps().deterministic {
            det_opts(p)
        } else {
            Options::in_memory().protocol(p)
        };
        let db = Database::open(opts).unwrap();
        let t = db.create_table("counters").unwrap();
        for k in 0..KEYS {
            db.load(t, &k.to_be_bytes(), &5i64.to_le_bytes()).unwrap();
        }
        let (ok, ab, _) = drive(&db, t, 1, 400);
        assert_eq!(ok + ab, 400, "{p}");
        assert!(ab > 0 && ok > 0, "{p}: {ok} committed, {ab} aborted");
        let rows: BTreeMap<Vec<u8>, i64> = db
            .dump(t)
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k, val(&v)))
            .collect();
        assert_eq!(rows.len(), KEYS as usize, "{p}");
        results.push((p, ok, rows));
    }
    let (p0, ok0, rows0) = &results[0];
    for (p, ok, rows) in &results[1..] {
        if *p == Protocol::NoCc {
            // No-CC does not roll a user abort back.
            continue;
        }
        assert_eq!((ok, rows), (ok0, rows0), "{p} differs from {p0}");
    }
}

/// Several clients: the counters are the load plus every committed add
/// (nothing lost, nothing applied twice), and an aborted request left
/// nothing.
#[test]
fn deterministic_protocols_keep_every_committed_add() {
    for p in [Protocol::Bohm, Protocol::TwoPlOrdered] {
        let db = Database::open(det_opts(p)).unwrap();
        let t = db.create_table("counters").unwrap();
        let (ok, ab, sum) = drive(&db, t, 3, 500);
        assert_eq!(ok + ab, 1500);
        assert!(ab > 0, "{p}: no abort exercised");
        let total: i64 = db.dump(t).unwrap().iter().map(|(_, v)| val(v)).sum();
        assert_eq!(total, sum, "{p}: the counters are not the committed adds");
        for (_, v) in db.dump(t).unwrap() {
            assert!(val(&v) >= 0, "{p}: an aborted add left its write");
        }
        let st = db.det_stats().expect("a deterministic database");
        assert!(st.running && st.stages.batches > 0, "{p}: {st:?}");
        // Placeholders under BOHM, lock tickets under 2pl-ordered.
        assert!(st.stages.placeholders > 0, "{p}: {st:?}");
    }
}

#[test]
fn what_does_not_apply_is_refused_with_a_message() {
    let db = Database::open(det_opts(Protocol::Bohm)).unwrap();
    let t = db.create_table("a").unwrap();
    db.create_index("a_by_b").unwrap();
    assert!(matches!(db.create_table("a"), Err(Error::TableExists(_))));
    assert_eq!(db.table("a").unwrap(), t);
    assert_eq!(db.table_names(), ["a", "a_by_b"]);
    let e = db.worker().unwrap_err().to_string();
    assert!(e.contains("Database::submit"), "{e}");
    db.submit(Add { t, key: 1, by: 1 }).unwrap().wait().unwrap();
    let e = db.create_table("b").unwrap_err().to_string();
    assert!(e.contains("fixed"), "{e}");
    let e = db.load(t, b"k", b"v").unwrap_err().to_string();
    assert!(e.contains("before the first submission"), "{e}");
    let e = db.checkpoint().unwrap_err().to_string();
    assert!(e.contains("durable"), "{e}");
    assert!(Database::open(Options::in_memory())
        .unwrap()
        .det_stats()
        .is_none());

    let dir = tempfile::tempdir().unwrap();
    let e = Database::open(Options::durable(dir.path()).protocol(Protocol::Bohm))
        .unwrap_err()
        .to_string();
    assert!(e.contains("Options::procedures"), "{e}");
    let e = Database::open(
        Options::durable(dir.path())
            .durability(Durability::Async)
            .protocol(Protocol::Bohm)
            .procedures(Procedures::new()),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("sync"), "{e}");
    let e = Database::open(det_opts(Protocol::Bohm).cc_threads(0))
        .unwrap_err()
        .to_string();
    assert!(e.contains("CC threads"), "{e}");
}

fn durable(dir: &std::path::Path, p: Protocol) -> Options {
    det_opts(p)
        .durability(Durability::Sync)
        .data_dir(dir)
        .procedures(Procedures::new().register::<Add>().unwrap())
}

/// A durable deterministic database: everything acknowledged is there
/// after a reopen (tables from `tessera.det`, the newest checkpoint, the
/// input log after it replayed), the state equals the one before, and the
/// directory is refused by another protocol or a second open.
#[test]
fn a_deterministic_directory_recovers_through_database_open() {
    for p in [Protocol::Bohm, Protocol::TwoPlOrdered] {
        let dir = tempfile::tempdir().unwrap();
        let before = {
            let db = Database::open(durable(dir.path(), p)).unwrap();
            let t = db.create_table("counters").unwrap();
            db.create_table("other").unwrap();
            db.load(t, &3u32.to_be_bytes(), &100i64.to_le_bytes())
                .unwrap();
            drive(&db, t, 2, 300);
            let ck = db.checkpoint().unwrap();
            assert!(ck.file.exists() && ck.epoch > 0, "{ck:?}");
            drive(&db, t, 2, 300);
            let e = Database::open(durable(dir.path(), p)).unwrap_err();
            assert!(matches!(e, Error::InUse(_)), "{e}");
            db.dump(t).unwrap()
        };
        let db = Database::open(durable(dir.path(), p)).unwrap();
        assert_eq!(db.table_names(), ["counters", "other"]);
        let t = db.table("counters").unwrap();
        assert_eq!(db.dump(t).unwrap(), before, "{p}");
        let st = db.det_stats().unwrap();
        assert!(st.running && st.replayed.batches > 0, "{p}: {st:?}");
        assert!(st.recovered_from.is_some());
        // It goes on from there.
        let r = db.submit(Add { t, key: 3, by: 1 }).unwrap().wait().unwrap();
        let was = before
            .iter()
            .find(|(k, _)| k[..] == 3u32.to_be_bytes())
            .map(|(_, v)| val(v))
            .unwrap();
        assert_eq!(r, Outcome::Committed(was + 1));
        drop(db);

        let other = if p == Protocol::Bohm {
            Protocol::TwoPlOrdered
        } else {
            Protocol::Bohm
        };
        let e = Database::open(durable(dir.path(), other))
            .unwrap_err()
            .to_string();
        assert!(e.contains(p.name()), "{e}");
        let e = Database::open(Options::durable(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("deterministic") && e.contains(p.name()), "{e}");
    }
    // And a redo-log directory is not opened by a deterministic protocol.
    let dir = tempfile::tempdir().unwrap();
    drop(Database::open(Options::durable(dir.path())).unwrap());
    let e = Database::open(durable(dir.path(), Protocol::Bohm))
        .unwrap_err()
        .to_string();
    assert!(e.contains("redo log"), "{e}");
}

/// Background checkpoints (`Options::checkpoint_interval`) run under a
/// deterministic protocol too, and skip the time before the first
/// submission.
#[test]
fn background_checkpoints_under_bohm() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        durable(dir.path(), Protocol::Bohm).checkpoint_interval(Duration::from_millis(20)),
    )
    .unwrap();
    let t = db.create_table("counters").unwrap();
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(db.checkpoint_status(), (0, None));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while db.checkpoint_status().0 < 2 {
        drive(&db, t, 1, 50);
        assert!(
            std::time::Instant::now() < deadline,
            "no background checkpoint"
        );
    }
    assert_eq!(db.checkpoint_status().1, None);
}

/// Rows loaded into a durable deterministic database that was closed
/// before any submission are not lost: the close starts it, which
/// checkpoints them.
#[test]
fn a_load_survives_a_close_before_any_submission() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(durable(dir.path(), Protocol::Bohm)).unwrap();
        let t = db.create_table("counters").unwrap();
        db.load(t, &1u32.to_be_bytes(), &7i64.to_le_bytes())
            .unwrap();
        assert!(!db.det_stats().unwrap().running);
        db.close().unwrap();
    }
    let db = Database::open(durable(dir.path(), Protocol::Bohm)).unwrap();
    let t = db.table("counters").unwrap();
    assert_eq!(
        db.dump(t).unwrap(),
        vec![(1u32.to_be_bytes().to_vec(), 7i64.to_le_bytes().to_vec())]
    );
    // A submission after close is refused, not a restart.
    let db2 = db.clone();
    db.close().unwrap();
    let e = db2.submit(Add { t, key: 1, by: 1 }).err().expect("refused");
    assert!(e.to_string().contains("closed"), "{e}");
}

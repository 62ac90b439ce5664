//! PWV's corner case (Faleiro's thesis §6.4.7): a piece after the commit
//! point that fails (an overflow it reports, or a panic) cannot be rolled
//! back, so it is a full system failure. The request is expunged from the
//! input log (`tessera.expunged`), its batch fails with
//! `Error::SystemFailure`, and the database recovers from the last
//! checkpoint and the log without it: at once with a data directory (the
//! next submission finds the restarted engine), and on every later open.
//! In memory nothing can be recovered, and the database stays failed.

use std::time::Duration;

use tessera::det::{
    ArgReader, Outcome, PieceId, PieceIo, PiecePlan, ProcId, Procedure, Procedures,
};
use tessera::{
    Database, Durability, Error, KeySet, Options, Protocol, Request, TableId, Transaction, TxError,
    TxResult, Txn,
};

/// Add `by` to the counters `a` and then `b` (u64, little-endian). Two
/// pieces, both after the commit point (nothing can abort): `a` first,
/// then `b`, which fails on an overflow (or panics, with `panic`), after
/// `a`'s write may have been seen.
#[derive(Clone, Debug)]
struct Bump {
    t: TableId,
    by: u64,
    panic: bool,
}

fn get(v: Option<&[u8]>) -> u64 {
    v.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()))
}

fn add_b(tx: &mut impl Transaction, t: TableId, by: u64, panic: bool) -> TxResult<u64> {
    let b = get(tx.get(t, b"b")?);
    if panic {
        panic!("a bug in a piece after the commit point");
    }
    let Some(n) = b.checked_add(by) else {
        return Err(TxError::Error(Error::InvalidArgument(format!(
            "b = {b} + {by} overflows"
        ))));
    };
    tx.put(t, b"b", &n.to_le_bytes())?;
    Ok(n)
}

impl Request for Bump {
    type Output = u64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
        let a = get(tx.get(self.t, b"a")?) + self.by;
        tx.put(self.t, b"a", &a.to_le_bytes())?;
        add_b(tx, self.t, self.by, self.panic)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.write(self.t, b"a");
        keys.write(self.t, b"b");
        true
    }
}

impl Procedure for Bump {
    const ID: ProcId = 0x7b01;
    const NAME: &'static str = "bump";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.t.as_u32().to_le_bytes());
        out.extend_from_slice(&self.by.to_le_bytes());
        out.push(self.panic as u8);
    }
    fn decode(b: &[u8]) -> Result<Self, String> {
        let mut r = ArgReader::new("bump", b);
        let p = Bump {
            t: TableId::from_u32(r.u32()?),
            by: r.u64()?,
            panic: r.u8()? != 0,
        };
        r.finish()?;
        Ok(p)
    }
    fn pieces(&self, plan: &mut PiecePlan) -> bool {
        let a = plan.piece(false);
        plan.write(a, self.t, b"a");
        let b = plan.piece(false);
        plan.write(b, self.t, b"b");
        plan.after(b, a);
        true
    }
    fn run_piece(&self, i: PieceId, tx: &mut Txn<'_>, io: &mut PieceIo<'_>) -> TxResult<()> {
        if i == 0 {
            let a = get(tx.get(self.t, b"a")?) + self.by;
            tx.put(self.t, b"a", &a.to_le_bytes())?;
        } else {
            let n = add_b(tx, self.t, self.by, self.panic)?;
            io.output(&n.to_le_bytes());
        }
        Ok(())
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<u64> {
        Ok(get(outputs.get(1).copied()))
    }
}

const B0: u64 = u64::MAX - 5;

fn opts(base: Options) -> Options {
    base.protocol(Protocol::Pwv)
        .exec_threads(2)
        .batch_size(16)
        .batch_time(Duration::from_micros(300))
}

fn durable(dir: &std::path::Path) -> Options {
    opts(Options::durable(dir))
        .durability(Durability::Sync)
        .procedures(Procedures::new().register::<Bump>().unwrap())
}

fn state(db: &Database, t: TableId) -> (u64, u64) {
    let rows = db.dump(t).unwrap();
    let v = |k: &[u8]| get(rows.iter().find(|(r, _)| r[..] == *k).map(|(_, v)| &v[..]));
    (v(b"a"), v(b"b"))
}

fn bump(db: &Database, t: TableId, by: u64, panic: bool) -> Result<Outcome<u64>, Error> {
    db.submit(Bump { t, by, panic }).unwrap().wait()
}

fn system_failure(r: Result<Outcome<u64>, Error>) -> u64 {
    match r {
        Err(Error::SystemFailure { request, reason }) => {
            assert!(!reason.is_empty());
            request
        }
        other => panic!("expected a system failure, got {other:?}"),
    }
}

#[test]
fn a_failed_piece_after_the_commit_point_is_expunged_and_the_database_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (expunged, after) = {
        let db = Database::open(durable(dir.path())).unwrap();
        let t = db.create_table("c").unwrap();
        db.load(t, b"b", &B0.to_le_bytes()).unwrap();
        assert_eq!(bump(&db, t, 1, false).unwrap(), Outcome::Committed(B0 + 1));
        // b would overflow: piece 0 has already written a.
        let r1 = system_failure(bump(&db, t, 10, false));
        // A dump restarts the engine too, and never shows the partial
        // state (a = 11).
        assert_eq!(state(&db, t), (1, B0 + 1));
        // The next submission meets the restarted engine, recovered
        // without the failed request: a = 1 + 2, not 1 + 10 + 2.
        assert_eq!(bump(&db, t, 2, false).unwrap(), Outcome::Committed(B0 + 3));
        assert_eq!(state(&db, t), (3, B0 + 3));
        // A panic in the piece is a system failure too.
        let r2 = system_failure(bump(&db, t, 1, true));
        assert!(r2 > r1);
        assert_eq!(bump(&db, t, 1, false).unwrap(), Outcome::Committed(B0 + 4));
        assert_eq!(state(&db, t), (4, B0 + 4));
        let st = db.det_stats().unwrap();
        assert_eq!(st.restarts, 2, "{st:?}");
        // The restart replays the whole log since the start's checkpoint:
        // both expunged requests again.
        assert_eq!(st.replayed.expunged, 2, "{st:?}");
        let list = tessera::det::expunge::read(dir.path()).unwrap();
        assert_eq!(list.keys().copied().collect::<Vec<_>>(), [r1, r2]);
        assert!(list[&r1].contains("overflows"), "{list:?}");
        assert!(list[&r2].contains("panicked"), "{list:?}");
        // Checkpoints work again on the restarted engine.
        db.checkpoint().unwrap();
        assert_eq!(bump(&db, t, 1, false).unwrap(), Outcome::Committed(B0 + 5));
        db.close().unwrap();
        ((r1, r2), (5, B0 + 5))
    };
    // Every later open replays without them, too.
    let db = Database::open(durable(dir.path())).unwrap();
    let t = db.table("c").unwrap();
    assert_eq!(state(&db, t), after);
    let list = tessera::det::expunge::read(dir.path()).unwrap();
    assert!(list.contains_key(&expunged.0) && list.contains_key(&expunged.1));
}

#[test]
fn in_memory_a_system_failure_stays() {
    let db = Database::open(opts(Options::in_memory())).unwrap();
    let t = db.create_table("c").unwrap();
    db.load(t, b"b", &B0.to_le_bytes()).unwrap();
    assert_eq!(bump(&db, t, 1, false).unwrap(), Outcome::Committed(B0 + 1));
    let r = system_failure(bump(&db, t, 10, false));
    // Refused from now on, with the same error.
    match db.submit(Bump {
        t,
        by: 1,
        panic: false,
    }) {
        Err(Error::SystemFailure { request, reason }) => {
            assert_eq!(request, r);
            assert!(reason.contains("in memory"), "{reason}");
        }
        Err(e) => panic!("{e}"),
        Ok(rc) => panic!("accepted after a system failure: {:?}", rc.wait()),
    }
}

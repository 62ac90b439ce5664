//! The batch entry point (`Worker::execute_batch`): requests run in batch
//! order, each checked against its declared key sets; a request that
//! declares nothing, or touches a key outside its declaration, gets an
//! error naming it, and the rest of the batch still runs; a stale
//! reconnaissance is reconnoitered again.

use std::ops::Bound;

use tessera::{
    stale_reconnaissance, ConflictReason, Database, Error, KeySet, Options, Protocol, Request,
    ScanOptions, TableId, Transaction, TxResult,
};

/// Move `amount` from `from` to `to` (8-byte balances), declaring exactly
/// the two keys, or (`lie`) the second as read only: its first write then
/// succeeds and its second is refused, so the refusal must roll back.
struct Transfer {
    t: TableId,
    from: u8,
    to: u8,
    amount: i64,
    lie: bool,
}

fn get_i64<T: Transaction>(tx: &mut T, t: TableId, k: u8) -> TxResult<i64> {
    Ok(tx
        .get(t, &[k])?
        .map_or(0, |v| i64::from_le_bytes(v.try_into().unwrap())))
}

impl Request for Transfer {
    type Output = i64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<i64> {
        let a = get_i64(tx, self.t, self.from)? - self.amount;
        let b = get_i64(tx, self.t, self.to)? + self.amount;
        tx.put(self.t, &[self.from], &a.to_le_bytes())?;
        tx.put(self.t, &[self.to], &b.to_le_bytes())?;
        Ok(a)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.write(self.t, &[self.from]);
        if self.lie {
            keys.read(self.t, &[self.to]);
        } else {
            keys.write(self.t, &[self.to]);
        }
        true
    }
}

/// Declares nothing.
struct Closure(TableId);

impl Request for Closure {
    type Output = ();
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        tx.put(self.0, b"x", b"y")
    }
}

/// Reads the largest key of the table (a read-dependent set): its
/// reconnaissance finds it, the body re-checks. `bump` inserts a larger key
/// between the reconnaissance and the first run (once, from `declare`,
/// which runs between them).
struct MaxKey {
    t: TableId,
    found: Option<u8>,
    recons: u32,
    bump: std::cell::Cell<Option<Database>>,
}

fn max_key<T: Transaction>(tx: &mut T, t: TableId) -> TxResult<Option<u8>> {
    let mut m = None;
    tx.scan(
        t,
        Bound::Unbounded,
        Bound::Unbounded,
        ScanOptions::new().reverse().limit(1),
        |k, _| {
            m = Some(k[0]);
            false
        },
    )?;
    Ok(m)
}

impl Request for MaxKey {
    type Output = u8;
    fn needs_reconnaissance(&self) -> bool {
        true
    }
    fn reconnoiter<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        self.recons += 1;
        self.found = max_key(tx, self.t)?;
        Ok(())
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        let Some(k) = self.found else {
            return false;
        };
        if let Some(db) = self.bump.take() {
            let t = self.t;
            std::thread::spawn(move || {
                db.worker()
                    .unwrap()
                    .run(|tx| tx.put(t, &[200], &0i64.to_le_bytes()))
                    .unwrap()
            })
            .join()
            .unwrap();
        }
        keys.read_table(self.t);
        keys.write(self.t, &[k]);
        true
    }
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u8> {
        let m = max_key(tx, self.t)?;
        if m != self.found {
            return stale_reconnaissance();
        }
        let k = m.unwrap();
        tx.put(self.t, &[k], &1i64.to_le_bytes())?;
        Ok(k)
    }
}

/// A reconnaissance that tries to write.
struct WritingRecon(TableId);

impl Request for WritingRecon {
    type Output = ();
    fn needs_reconnaissance(&self) -> bool {
        true
    }
    fn reconnoiter<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        tx.put(self.0, b"recon", b"wrote")
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.read_table(self.0);
        true
    }
    fn run<T: Transaction>(&mut self, _: &mut T) -> TxResult<()> {
        Ok(())
    }
}

/// A reconnaissance is read-only: a write in it is refused, and it counts
/// no commit of its own.
#[test]
fn a_reconnaissance_cannot_write() {
    let db = Database::open(Options::in_memory()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    let e = w
        .execute_batch(&mut [WritingRecon(t)])
        .pop()
        .unwrap()
        .unwrap_err();
    assert!(
        e.to_string().contains("outside its declared key set"),
        "{e}"
    );
    assert!(w.run(|tx| Ok(tx.get(t, b"recon")?.is_none())).unwrap());
    assert_eq!(w.stats().commits, 1, "only the check's own read committed");
}

#[test]
fn batches_run_in_order_and_check_declarations() {
    for p in Protocol::INTERACTIVE {
        let db = Database::open(Options::in_memory().protocol(p)).unwrap();
        let t = db.create_table("acct").unwrap();
        let mut w = db.worker().unwrap();
        let tr = |from, to, amount, lie| Transfer {
            t,
            from,
            to,
            amount,
            lie,
        };
        let mut batch = vec![tr(1, 2, 10, false), tr(2, 3, 4, false), tr(3, 1, 1, true)];
        let out = w.execute_batch(&mut batch);
        // In order: 1 pays 10 to 2, then 2 (now 10) pays 4 to 3.
        assert_eq!(out[0].as_ref().unwrap(), &-10, "{p}");
        assert_eq!(out[1].as_ref().unwrap(), &6, "{p}");
        // The third wrote key 1, which it declared only as read: refused.
        let e = out[2].as_ref().unwrap_err().to_string();
        assert!(
            e.contains("outside its declared key set") && e.contains("[01]"),
            "{p}: {e}"
        );
        // The third's first write (key 3, declared) went in before the
        // refusal: rolled back, except under nocc, which writes in place and
        // cannot roll back (its module docs).
        let rolls_back = p != Protocol::NoCc;
        let bal = |w: &mut tessera::Worker, k| w.run(|tx| get_i64(tx, t, k)).unwrap();
        assert_eq!(
            (bal(&mut w, 1), bal(&mut w, 2), bal(&mut w, 3)),
            (-10, 6, if rolls_back { 4 } else { 3 }),
            "{p}"
        );
        // Undeclared: refused; the batch goes on.
        let mut b2 = vec![Closure(t)];
        let e = w.execute_batch(&mut b2).pop().unwrap().unwrap_err();
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("declare")),
            "{p}: {e}"
        );
        // The same request runs interactively.
        w.execute(&mut Closure(t)).unwrap();
        // A stale reconnaissance is caught and redone.
        let mut m = vec![MaxKey {
            t,
            found: None,
            recons: 0,
            bump: std::cell::Cell::new(Some(db.clone())),
        }];
        let k = w.execute_batch(&mut m).pop().unwrap().unwrap();
        assert_eq!((k, m[0].recons), (200, 2), "{p}");
        assert_eq!(
            w.stats().conflicts[ConflictReason::Reconnaissance.index()],
            1,
            "{p}"
        );
    }
}

//! Iterator scans (`Txn::range`, `Txn::prefix`): the rows, their order and
//! the ends they meet, checked against the callback scan (`scan_collect`)
//! under every interactive protocol and in snapshot transactions, over
//! ranges long enough to take many chunks. Their phantom protection is in
//! tests/phantom.rs.

use std::ops::Bound;

use tessera::{Database, Options, Protocol, Row, ScanOptions, TxError, TxResult};

fn k(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn collect(it: impl Iterator<Item = TxResult<Row>>) -> TxResult<Vec<Row>> {
    it.collect()
}

#[test]
fn iterators_return_what_the_callback_scan_returns() {
    for p in Protocol::INTERACTIVE {
        let snapshots = p.caps().snapshot_txns;
        let db = Database::open(Options::in_memory().protocol(p).snapshots(snapshots)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        // 2,000 even keys from 0 to 3,998.
        for base in (0..2000).step_by(500) {
            w.run(|tx| {
                for i in base..base + 500 {
                    tx.put(t, &k(i * 2), &i.to_le_bytes())?;
                }
                Ok(())
            })
            .unwrap();
        }
        // Past the snapshot epoch boundary: snapshots see the rows too.
        db.tick_epochs(64);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ p as u64);
        for round in 0..60 {
            let (a, b) = (rng.next() % 4200, rng.next() % 4200);
            let (lo, hi) = (a.min(b), a.max(b));
            let snapshot = snapshots && round % 3 == 2;
            let check = |tx: &mut tessera::Txn| -> TxResult<()> {
                let expect = tx.scan_collect(
                    t,
                    Bound::Included(&k(lo)),
                    Bound::Excluded(&k(hi)),
                    ScanOptions::new(),
                )?;
                let fwd = collect(tx.range(t, k(lo)..k(hi)))?;
                assert_eq!(fwd, expect, "{p}: {lo}..{hi} forward");
                let mut rev = collect(tx.range(t, k(lo)..k(hi)).rev())?;
                rev.reverse();
                assert_eq!(rev, expect, "{p}: {lo}..{hi} reverse");
                // Both ends at once, alternating: every row once, in order.
                let mut it = tx.range(t, k(lo)..k(hi));
                let (mut front, mut back) = (Vec::new(), Vec::new());
                loop {
                    let r = if (front.len() + back.len()) % 3 == 0 {
                        it.next_back().map(|r| (r, false))
                    } else {
                        it.next().map(|r| (r, true))
                    };
                    match r {
                        Some((row, true)) => front.push(row?),
                        Some((row, false)) => back.push(row?),
                        None => break,
                    }
                }
                assert!(it.next().is_none() && it.next_back().is_none(), "fused");
                back.reverse();
                front.extend(back);
                assert_eq!(front, expect, "{p}: {lo}..{hi} from both ends");
                // Inclusive and open-ended bounds.
                let incl = collect(tx.range(t, k(lo)..=k(hi)))?;
                let want = tx.scan_collect(
                    t,
                    Bound::Included(&k(lo)),
                    Bound::Included(&k(hi)),
                    ScanOptions::new(),
                )?;
                assert_eq!(incl, want, "{p}: {lo}..={hi}");
                let tail = collect(tx.range(t, k(hi)..))?;
                assert_eq!(
                    tail.len() as u64,
                    2000 - hi.div_ceil(2).min(2000),
                    "{p}: {hi}.."
                );
                let head = collect(tx.range(t, ..k(lo)).rev().take(3))?;
                let want: Vec<u64> = (0..lo.div_ceil(2)).rev().take(3).collect();
                let got: Vec<u64> = head
                    .iter()
                    .map(|(_, v)| u64::from_le_bytes(v[..].try_into().unwrap()))
                    .collect();
                assert_eq!(got, want, "{p}: ..{lo} newest three");
                Ok(())
            };
            if snapshot {
                w.run_snapshot(|tx| check(tx)).unwrap();
            } else {
                w.run(|tx| check(tx)).unwrap();
            }
        }
    }
}

#[test]
fn prefix_scans_and_bound_types() {
    let db = Database::open(Options::in_memory()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for key in [
            &b"a"[..],
            b"ab",
            b"ab\xff",
            b"ab\xff\xff",
            b"ac",
            b"b",
            b"\xff",
            b"\xff\xff",
        ] {
            tx.put(t, key, key)?;
        }
        Ok(())
    })
    .unwrap();
    let keys = |w: &mut tessera::Worker, prefix: &[u8]| -> Vec<Vec<u8>> {
        w.run(|tx| {
            tx.prefix(t, prefix)
                .map(|r| r.map(|(k, _)| k))
                .collect::<TxResult<Vec<_>>>()
        })
        .unwrap()
    };
    assert_eq!(keys(&mut w, b"ab"), [&b"ab"[..], b"ab\xff", b"ab\xff\xff"]);
    assert_eq!(keys(&mut w, b"ab\xff"), [&b"ab\xff"[..], b"ab\xff\xff"]);
    assert_eq!(keys(&mut w, b"\xff"), [&b"\xff"[..], b"\xff\xff"]);
    assert_eq!(keys(&mut w, b"").len(), 8);
    assert!(keys(&mut w, b"z").is_empty());
    // Bounds of several key types; an inverted range is empty.
    let n = w
        .run(|tx| {
            let a = tx.range(t, "a".."b").count();
            let b = tx.range(t, b"a".to_vec()..=b"ac".to_vec()).count();
            let c = tx.range(t, &b"b"[..]..).count();
            let d = tx.range(t, "b".."a").count();
            let e = tx.range(t, "b"..="b").count();
            let f = tx.range(t, "b".."b").count();
            Ok([a, b, c, d, e, f])
        })
        .unwrap();
    assert_eq!(n, [5, 5, 3, 0, 1, 0]);
}

/// An iterator's error ends the closure like any other: a user abort
/// decided from what the iterator read is not retried, and an iterator
/// dropped early leaves the transaction usable.
#[test]
fn iterators_inside_transactions_that_write_and_abort() {
    let db = Database::open(Options::in_memory()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..100 {
            tx.put(t, &k(i), b"v")?;
        }
        Ok(())
    })
    .unwrap();
    // Read the first rows, drop the iterator, then write: the body sees
    // its own writes in a second iterator.
    let seen = w
        .run(|tx| {
            let first: Vec<Row> = collect(tx.range(t, k(0)..).take(2))?;
            tx.put(t, &k(1000), b"new")?;
            tx.delete(t, &k(0))?;
            let all = collect(tx.prefix(t, b""))?;
            Ok((first.len(), all.len(), all.last().unwrap().0.clone()))
        })
        .unwrap();
    assert_eq!(seen, (2, 100, k(1000).to_vec()));
    let r = w.try_run(|tx| {
        let n = tx.prefix(t, b"").try_fold(0, |n, r| r.map(|_| n + 1))?;
        if n > 10 {
            return tx.user_abort();
        }
        Ok(())
    });
    assert!(
        matches!(r, Err(TxError::Error(tessera::Error::UserAbort))),
        "{r:?}"
    );
}

/// An iterator's conflict fails the transaction even when the body drops
/// it (`.flatten()`): under 2PL no-wait, a scan that meets a row another
/// transaction holds locked yields a conflict; a body that counts only
/// the rows it got and writes the count must not commit that count.
#[test]
fn a_conflict_dropped_by_the_body_still_fails_the_transaction() {
    let db = Database::open(Options::in_memory().protocol(Protocol::TwoPlNoWait)).unwrap();
    let t = db.create_table("t").unwrap();
    let mut a = db.worker().unwrap();
    let mut b = db.worker().unwrap();
    a.run(|tx| {
        for i in 0..10 {
            tx.put(t, &k(i), b"v")?;
        }
        Ok(())
    })
    .unwrap();
    a.try_run(|tx| {
        tx.put(t, &k(5), b"locked by a")?;
        let r = b.try_run(|tx2| {
            let n = tx2.range(t, k(0)..k(10)).flatten().count() as u64;
            tx2.put(t, b"count", &n.to_le_bytes())?;
            Ok(n)
        });
        assert!(matches!(r, Err(TxError::Conflict(_))), "{r:?}");
        Ok(())
    })
    .unwrap();
    let count = b
        .run(|tx| Ok(tx.get(t, b"count")?.map(<[u8]>::to_vec)))
        .unwrap();
    assert_eq!(count, None, "a count of a cut-short range committed");
}

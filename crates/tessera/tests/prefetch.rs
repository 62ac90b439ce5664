//! `Txn::prefetch` is a hint: under every protocol it changes no result of
//! the gets that follow (present, absent, long and duplicate keys, own
//! writes, more keys than one prefetch remembers, a table that does not
//! exist), and a record it found that is deleted, unlinked and inserted
//! again before the get is not read in place of the new one.

use std::ops::Bound;
use std::time::Duration;

use tessera::{Database, Options, Protocol, ScanOptions, TableId, TxError, Worker};

fn open(p: Protocol) -> Database {
    Database::open(
        Options::in_memory()
            .protocol(p)
            .epoch_interval(Duration::from_millis(1)),
    )
    .unwrap()
}

fn key(i: u32) -> Vec<u8> {
    // Short keys (the ones a prefetch remembers) and some long ones.
    if i % 5 == 4 {
        format!("long-key-{i:08}").into_bytes()
    } else {
        i.to_be_bytes().to_vec()
    }
}

/// A database of protocol `p` with one table and two workers.
fn two_workers(p: Protocol) -> (Database, TableId, Worker, Worker) {
    let db = open(p);
    let t = db.create_table("t").unwrap();
    let (a, b) = (db.worker().unwrap(), db.worker().unwrap());
    (db, t, a, b)
}

/// Give the records `w` deleted time to be unlinked (and retired: epochs
/// advance every 1 ms), with transactions on `w` for its maintenance.
fn let_unlink(w: &mut Worker, t: TableId) {
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(2));
        w.run(|tx| tx.get(t, b"other").map(|_| ())).unwrap();
    }
}

/// Delete `k` through `w`, give the deleted record time to be unlinked,
/// then insert `k` again as "new".
fn replace(w: &mut Worker, t: TableId, k: &[u8]) {
    w.run(|tx| tx.delete(t, k).map(|_| ())).unwrap();
    let_unlink(w, t);
    w.run(|tx| tx.insert(t, k, b"new").map(|_| ())).unwrap();
}

#[test]
fn prefetch_changes_no_result() {
    for p in Protocol::INTERACTIVE {
        let db = open(p);
        let t = db.create_table("t").unwrap();
        let other = db.create_table("other").unwrap();
        // A table id this database does not have.
        let db2 = open(p);
        let mut missing = db2.create_table("x0").unwrap();
        for i in 1..3 {
            missing = db2.create_table(&format!("x{i}")).unwrap();
        }
        let mut w = db.worker().unwrap();
        w.run(|tx| {
            for i in (0..100u32).step_by(2) {
                tx.insert(t, &key(i), format!("v{i}").as_bytes())?;
                tx.insert(other, &key(i), b"other")?;
            }
            Ok(())
        })
        .unwrap();
        w.run(|tx| {
            // Own writes before the prefetch: an update, a delete, an insert.
            tx.put(t, &key(10), b"mine")?;
            tx.delete(t, &key(12))?;
            tx.insert(t, &key(13), b"new")?;
            // Every key 0..100 (odd ones absent), duplicates, in three
            // prefetches of 40 (more than one batch and than the memo).
            let keys: Vec<Vec<u8>> = (0..120u32).map(|i| key(i % 100)).collect();
            for chunk in keys.chunks(40) {
                let refs: Vec<&[u8]> = chunk.iter().map(|k| &k[..]).collect();
                tx.prefetch(t, &refs, 16);
            }
            tx.prefetch(missing, &[&key(0)[..]], 16);
            // Any length is only a hint (none overflows or runs long).
            tx.prefetch(t, &[&key(0)[..], &key(2)[..]], usize::MAX);
            for i in (0..100u32).rev().chain(0..100) {
                let want: Option<Vec<u8>> = match i {
                    10 => Some(b"mine".to_vec()),
                    12 => None,
                    13 => Some(b"new".to_vec()),
                    _ if i % 2 == 0 => Some(format!("v{i}").into_bytes()),
                    _ => None,
                };
                let got = tx.get(t, &key(i))?.map(|v| v.to_vec());
                assert_eq!(got, want, "{p}: key {i}");
                let got = tx.get_slice(t, &key(i), 1..2)?.map(|v| v.to_vec());
                assert_eq!(
                    got,
                    want.map(|v| v[1..2.min(v.len())].to_vec()),
                    "{p}: slice of {i}"
                );
            }
            // The other table's rows are not mistaken for these.
            assert_eq!(tx.get(other, &key(2))?, Some(&b"other"[..]), "{p}");
            Ok(())
        })
        .unwrap();
    }
}

/// A prefetches `k`; B deletes it and commits; the deleted record is given
/// time to be unlinked (and retired); C inserts `k` again. A's get of `k`
/// must see C's value (or A aborts): never the old record's absence or its
/// value (under snapshot reads: the old value, from A's snapshot).
#[test]
fn a_prefetched_record_replaced_before_the_get_is_not_read() {
    for p in Protocol::INTERACTIVE {
        if p.caps().blocks {
            continue;
        }
        let (_db, t, mut a, mut b) = two_workers(p);
        a.run(|tx| tx.insert(t, b"k", b"old").map(|_| ())).unwrap();
        let r = a.try_run(|ta| {
            ta.prefetch(t, &[&b"k"[..]], 8);
            replace(&mut b, t, b"k");
            Ok(ta.get(t, b"k")?.map(|v| v.to_vec()))
        });
        // A transaction reading from a snapshot taken at its start sees
        // the old value (it serializes before B); one reading the latest
        // committed state sees C's.
        let want: &[u8] = if p.caps().snapshot_reads {
            b"old"
        } else {
            b"new"
        };
        match r {
            Ok(v) => assert_eq!(v.as_deref(), Some(want), "{p}"),
            // A's one read comes after every other transaction ended, so
            // only a multi-version protocol's snapshot can make it conflict.
            Err(TxError::Conflict(_)) if p.caps().multi_version => {}
            Err(e) => panic!("{p}: {e:?}"),
        }
    }
}

/// Blind writes after a prefetch: puts of prefetched keys (present and
/// absent) land as without it, and a put of a prefetched record that was
/// deleted, unlinked and inserted again meanwhile is not lost in the old
/// record (Silo refuses such a commit as `Stale` and the retry writes
/// through the index).
#[test]
fn puts_after_a_prefetch() {
    for p in Protocol::INTERACTIVE {
        if p.caps().blocks {
            continue;
        }
        let (_db, t, mut a, mut b) = two_workers(p);
        a.run(|tx| {
            for i in (0..40u32).step_by(2) {
                tx.insert(t, &key(i), b"old")?;
            }
            Ok(())
        })
        .unwrap();
        a.run(|tx| {
            let keys: Vec<Vec<u8>> = (0..40u32).map(key).collect();
            let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
            tx.prefetch(t, &refs, 8);
            for i in 0..40u32 {
                tx.put(t, &key(i), format!("p{i}").as_bytes())?;
            }
            Ok(())
        })
        .unwrap();
        let mut first = true;
        a.run(|ta| {
            ta.prefetch(t, &[&key(0)[..]], 8);
            if first {
                first = false;
                replace(&mut b, t, &key(0));
            }
            ta.put(t, &key(0), b"mine")
        })
        .unwrap();
        let rows = a
            .run(|tx| {
                tx.scan_collect(
                    t,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    tessera::ScanOptions::new(),
                )
            })
            .unwrap();
        assert_eq!(rows.len(), 40, "{p}");
        for (k, v) in rows {
            let i = (0..40u32).find(|&i| key(i) == k).expect("a key written");
            let want = if i == 0 {
                b"mine".to_vec()
            } else {
                format!("p{i}").into_bytes()
            };
            assert_eq!(v, want, "{p}: key {i}");
        }
    }
}

/// Scans remember the rows they hand out, so that a later write of one
/// needs no lookup (Delivery scans its order lines, then updates each).
/// Under every protocol that isolates: a transaction that scanned a row,
/// then updates it after another transaction deleted it and committed,
/// does not commit; without the interference, the update of every scanned
/// row lands (and a row deleted then written again by the scanner itself
/// reads back as written).
#[test]
fn a_scanned_row_deleted_before_its_update_is_not_updated() {
    for p in Protocol::INTERACTIVE {
        if p.caps().blocks || !(p.caps().serializable || p.caps().snapshot_reads) {
            continue;
        }
        let (_db, t, mut a, mut b) = two_workers(p);
        let keys: Vec<Vec<u8>> = (0..20u32).map(|i| i.to_be_bytes().to_vec()).collect();
        a.run(|tx| {
            for k in &keys {
                tx.insert(t, k, b"v0")?;
            }
            Ok(())
        })
        .unwrap();
        // No interference: every scanned row is updated in place.
        a.run(|tx| {
            let rows =
                tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new())?;
            assert_eq!(rows.len(), keys.len(), "{p}");
            for (k, _) in &rows {
                assert!(tx.update(t, k, b"v1")?, "{p}");
            }
            // Our own delete, then a put, of a row the scan returned.
            assert!(tx.delete(t, &keys[3])?, "{p}");
            tx.put(t, &keys[3], b"again")?;
            Ok(())
        })
        .unwrap();
        a.run(|tx| {
            for (i, k) in keys.iter().enumerate() {
                let want: &[u8] = if i == 3 { b"again" } else { b"v1" };
                assert_eq!(tx.get(t, k)?, Some(want), "{p}: key {i}");
            }
            Ok(())
        })
        .unwrap();
        // B deletes a row A scanned, before A updates it. (A protocol may
        // refuse B's delete while A's scan is in flight, as timestamp
        // ordering does: B tries once, and A then updates as usual.)
        let mut deleted = false;
        let r = a.try_run(|ta| {
            let rows =
                ta.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new())?;
            assert_eq!(rows.len(), keys.len(), "{p}");
            deleted = match b.try_run(|tb| tb.delete(t, &keys[7])) {
                Ok(d) => d,
                Err(TxError::Conflict(_)) => false,
                Err(e) => panic!("{p}: {e:?}"),
            };
            ta.update(t, &keys[7], b"written")
        });
        let want: Option<&[u8]> = if deleted {
            match r {
                Err(TxError::Conflict(_)) => None,
                other => panic!("{p}: the update of a row deleted since the scan gave {other:?}"),
            }
        } else {
            assert!(r.unwrap(), "{p}");
            Some(b"written")
        };
        a.run(|tx| {
            assert_eq!(tx.get(t, &keys[7])?, want, "{p}");
            Ok(())
        })
        .unwrap();
    }
}

/// An update of a prefetched key whose record, when A looks at it, holds a
/// tombstone A's snapshot sees, and has been unlinked since A prefetched it
/// while B inserted the key into a fresh record, reading `y` first. If A
/// took "missing" from the old record and then wrote `y`, A (not seeing B's
/// insert) and B (not seeing A's write of `y`) would each precede the
/// other: a serializable protocol must not commit A. (SSN answers from the
/// memo's record only "present"; an absence is looked up again through the
/// index, whose leaf goes into the node set.) A read-latest protocol sees
/// B's record and may commit after B.
#[test]
fn an_update_of_a_prefetched_tombstone_replaced_meanwhile_is_protected() {
    for p in Protocol::INTERACTIVE {
        let caps = p.caps();
        if caps.blocks || !caps.serializable || !caps.phantom_safe {
            continue;
        }
        let (_db, t, mut a, mut b) = two_workers(p);
        a.run(|tx| {
            tx.insert(t, b"k", b"old")?;
            tx.insert(t, b"y", b"0")
        })
        .unwrap();
        b.run(|tx| tx.delete(t, b"k").map(|_| ())).unwrap();
        let mut first = true;
        let mut answered_missing = false;
        let r = a.try_run(|ta| {
            ta.prefetch(t, &[&b"k"[..]], 8);
            if first {
                first = false;
                // B's worker unlinks the deleted record, then B reads y
                // and inserts k afresh.
                let_unlink(&mut b, t);
                b.run(|tx| {
                    tx.get(t, b"y")?;
                    tx.insert(t, b"k", b"new").map(|_| ())
                })
                .unwrap();
            }
            answered_missing = !ta.update(t, b"k", b"mine")?;
            ta.put(t, b"y", b"1")
        });
        match r {
            // Read-latest protocols see B's record and update it: A after
            // B, a serial order.
            Ok(()) => assert!(
                !answered_missing,
                "{p}: A answered missing and committed beside B"
            ),
            Err(TxError::Conflict(_)) => {}
            Err(e) => panic!("{p}: {e:?}"),
        }
    }
}

/// B deletes `k` before A begins; A prefetches `k` (the tombstone's record,
/// still in the index), then B's worker unlinks that record and inserts `k`
/// afresh; A's blind put of `k` must land in the live record. (No write
/// conflict catches it: the deletion committed before A began, so a write
/// into the old record would pass first-committer-wins and be lost.)
#[test]
fn a_put_through_a_prefetched_record_unlinked_since_is_not_lost() {
    for p in Protocol::INTERACTIVE {
        if p.caps().blocks {
            continue;
        }
        let (_db, t, mut a, mut b) = two_workers(p);
        a.run(|tx| tx.insert(t, b"k", b"old").map(|_| ())).unwrap();
        b.run(|tx| tx.delete(t, b"k").map(|_| ())).unwrap();
        let mut first = true;
        a.run(|ta| {
            ta.prefetch(t, &[&b"k"[..]], 8);
            if first {
                first = false;
                let_unlink(&mut b, t);
                b.run(|tx| tx.insert(t, b"k", b"new").map(|_| ())).unwrap();
            }
            ta.put(t, b"k", b"mine")
        })
        .unwrap();
        let v = a
            .run(|tx| Ok(tx.get(t, b"k")?.map(|v| v.to_vec())))
            .unwrap();
        assert_eq!(v.as_deref(), Some(&b"mine"[..]), "{p}");
    }
}

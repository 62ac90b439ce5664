//! A transaction sees its own writes, whatever mix of get / put / insert /
//! update / delete it makes on one key (these paths share shortcuts: a write
//! right after a `get` reuses its lookup, `insert` tries the index first).

use tessera::{Database, Options, Protocol};

fn check(protocol: Protocol) {
    let db = Database::open(Options::in_memory().protocol(protocol)).unwrap();
    let t = db.create_table("t").unwrap();
    let u = db.create_table("u").unwrap();
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        assert!(tx.insert(t, b"k", b"1")?);
        assert!(tx.insert(u, b"k", b"u1")?);
        Ok(())
    })
    .unwrap();
    w.run(|tx| {
        assert_eq!(tx.get(t, b"k")?, Some(&b"1"[..]));
        // Same key, other table: the shortcut must not confuse them.
        assert!(tx.update(u, b"k", b"u2")?);
        assert!(tx.update(t, b"k", b"2")?);
        assert_eq!(tx.get(t, b"k")?, Some(&b"2"[..]));
        assert!(tx.delete(t, b"k")?);
        assert_eq!(tx.get(t, b"k")?, None);
        assert!(!tx.update(t, b"k", b"x")?);
        assert!(!tx.delete(t, b"k")?);
        assert!(tx.insert(t, b"k", b"3")?);
        assert!(!tx.insert(t, b"k", b"4")?);
        assert_eq!(tx.get(t, b"k")?, Some(&b"3"[..]));
        tx.put(t, b"k", b"5")?;
        assert_eq!(tx.get(u, b"k")?, Some(&b"u2"[..]));
        // A get of a missing key, then writes of it.
        assert_eq!(tx.get(t, b"m")?, None);
        assert!(!tx.update(t, b"m", b"x")?);
        tx.put(t, b"m", b"m1")?;
        assert_eq!(tx.get(t, b"m")?, Some(&b"m1"[..]));
        Ok(())
    })
    .unwrap();
    w.run(|tx| {
        assert_eq!(tx.get(t, b"k")?, Some(&b"5"[..]));
        assert_eq!(tx.get(t, b"m")?, Some(&b"m1"[..]));
        assert_eq!(tx.get(u, b"k")?, Some(&b"u2"[..]));
        // Delete then re-insert of a committed key, then a get-put pair.
        assert!(tx.delete(t, b"k")?);
        assert!(tx.insert(t, b"k", b"6")?);
        assert_eq!(tx.get(t, b"m")?, Some(&b"m1"[..]));
        tx.put(t, b"m", b"m2")?;
        Ok(())
    })
    .unwrap();
    w.run(|tx| {
        assert_eq!(tx.get(t, b"k")?, Some(&b"6"[..]));
        assert_eq!(tx.get(t, b"m")?, Some(&b"m2"[..]));
        Ok(())
    })
    .unwrap();
}

#[test]
fn own_writes_silo() {
    check(Protocol::Silo);
}

#[test]
fn own_writes_nocc() {
    check(Protocol::NoCc);
}

#[test]
fn own_writes_si() {
    check(Protocol::Si);
}

#[test]
fn own_writes_ems() {
    check(Protocol::Ems);
}

#[test]
fn own_writes_ssn() {
    check(Protocol::Ssn);
}

/// Writes of rows a scan just returned (Silo remembers the first rows of
/// the last scan so that such writes skip the descent and the read): every
/// kind of write, short and long keys, rows past the remembered ones, and
/// a second scan that replaces the first's rows, all seen back correctly.
fn writes_after_scan(protocol: Protocol) {
    use std::ops::Bound;
    use tessera::ScanOptions;
    let db = Database::open(Options::in_memory().protocol(protocol)).unwrap();
    let t = db.create_table("t").unwrap();
    let u = db.create_table("u").unwrap();
    let key = |i: u32| -> Vec<u8> {
        // Short keys below 30, long (12-byte) ones from 30 on.
        if i < 30 {
            i.to_be_bytes().to_vec()
        } else {
            let mut k = vec![0xFF; 8];
            k.extend_from_slice(&i.to_be_bytes());
            k
        }
    };
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        for i in 0..40 {
            tx.insert(t, &key(i), &[i as u8])?;
            tx.insert(u, &key(i), &[100 + i as u8])?;
        }
        Ok(())
    })
    .unwrap();
    let all = (Bound::Unbounded, Bound::Unbounded);
    w.run(|tx| {
        let rows = tx.scan_collect(t, all.0, all.1, ScanOptions::new())?;
        assert_eq!(rows.len(), 40);
        for (k, v) in &rows {
            let i = v[0] as u32;
            match i % 4 {
                0 => assert!(tx.update(t, k, &[v[0], 1])?),
                1 => assert!(tx.delete(t, k)?),
                2 => tx.put(t, k, &[v[0], 2])?,
                _ => {}
            }
        }
        // Same keys in the other table: the remembered rows are t's.
        assert_eq!(tx.get(u, &key(4))?, Some(&[104u8][..]));
        assert!(tx.update(u, &key(8), &[108, 9])?);
        // A second scan (of u) replaces the remembered rows.
        let n = tx.scan(u, all.0, all.1, ScanOptions::new().limit(5), |_, _| true)?;
        assert_eq!(n, 5);
        assert!(tx.update(t, &key(3), &[3, 3])?);
        assert!(tx.update(u, &key(0), &[100, 7])?);
        // A row deleted above: a write after the scan sees the delete.
        assert!(!tx.update(t, &key(1), &[0])?);
        Ok(())
    })
    .unwrap();
    w.run(|tx| {
        for i in 0..40u32 {
            let want: Option<Vec<u8>> = match i % 4 {
                _ if i == 3 => Some(vec![3, 3]),
                0 => Some(vec![i as u8, 1]),
                1 => None,
                2 => Some(vec![i as u8, 2]),
                _ => Some(vec![i as u8]),
            };
            assert_eq!(
                tx.get(t, &key(i))?.map(<[u8]>::to_vec),
                want,
                "{protocol}: t {i}"
            );
        }
        assert_eq!(tx.get(u, &key(0))?, Some(&[100u8, 7][..]));
        assert_eq!(tx.get(u, &key(8))?, Some(&[108u8, 9][..]));
        Ok(())
    })
    .unwrap();
}

#[test]
fn writes_after_a_scan_under_every_protocol() {
    for p in Protocol::INTERACTIVE {
        writes_after_scan(p);
    }
}

/// A lost update through a scan: A scans a counter, B increments it and
/// commits, A writes its scanned value plus one. The write reuses the
/// scan's lookup under Silo; it must still fail validation (the scan's read
/// is stale), under every serializable protocol.
#[test]
fn a_write_after_a_stale_scan_does_not_commit() {
    use std::ops::Bound;
    use tessera::{ScanOptions, TxError};
    for p in Protocol::INTERACTIVE {
        let caps = p.caps();
        if !caps.serializable || caps.blocks {
            continue;
        }
        let db = Database::open(Options::in_memory().protocol(p)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        let mut b = db.worker().unwrap();
        a.run(|tx| tx.insert(t, b"c", &[0]).map(|_| ())).unwrap();
        let mut rb = None;
        let ra = a.try_run(|ta| {
            let rows =
                ta.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new())?;
            let seen = rows[0].1[0];
            rb = Some(b.try_run(|tb| {
                let v = tb.get(t, b"c")?.unwrap()[0];
                tb.update(t, b"c", &[v + 1]).map(|_| ())
            }));
            ta.update(t, b"c", &[seen + 1]).map(|_| ())
        });
        let rb = rb.expect("B ran");
        for r in [&ra, &rb] {
            assert!(
                matches!(r, Ok(()) | Err(TxError::Conflict(_))),
                "{p}: {r:?}"
            );
        }
        let committed = ra.is_ok() as u8 + rb.is_ok() as u8;
        let end = a.run(|tx| Ok(tx.get(t, b"c")?.unwrap()[0])).unwrap();
        assert_eq!(
            end, committed,
            "{p}: {committed} increments committed, counter {end}"
        );
    }
}

/// A lost update through a get or a scan: A reads a counter, B increments it and
/// commits, A writes the key. Under Silo's family the write takes the TID
/// the get observed as the one commit checks when it locks the record, and
/// drops the get's read-set entry when it is the last one; either way A
/// must not commit, whatever the write (update, a column update, a delete,
/// a blind put), whether another read came in between or the reads were a
/// scan's (whose last entry is not the written row's), and whether
/// B wrote the key A writes or the other one A read (a write skew, as B
/// reads both keys).
#[test]
fn a_write_after_a_stale_get_does_not_commit() {
    use std::ops::Bound;
    use tessera::{ScanOptions, TxError};
    for p in Protocol::INTERACTIVE {
        let caps = p.caps();
        if !caps.serializable || caps.blocks {
            continue;
        }
        for kind in ["update", "update_slice", "delete", "put"] {
            for (reads, bk) in [
                ("get c", b"c"),
                ("get c, get d", b"c"),
                ("get c, get d", b"d"),
                ("scan c, d", b"c"),
                ("scan c, d", b"d"),
            ] {
                let db = Database::open(Options::in_memory().protocol(p)).unwrap();
                let t = db.create_table("t").unwrap();
                let mut a = db.worker().unwrap();
                let mut b = db.worker().unwrap();
                a.run(|tx| {
                    tx.insert(t, b"c", &[0])?;
                    tx.insert(t, b"d", &[7]).map(|_| ())
                })
                .unwrap();
                let mut rb = None;
                let ra = a.try_run(|ta| {
                    let seen = if reads == "scan c, d" {
                        let all = ScanOptions::new();
                        ta.scan_collect(t, Bound::Unbounded, Bound::Unbounded, all)?[0].1[0]
                    } else {
                        let seen = ta.get(t, b"c")?.unwrap()[0];
                        if reads == "get c, get d" {
                            ta.get(t, b"d")?;
                        }
                        seen
                    };
                    rb = Some(b.try_run(|tb| {
                        // B reads both keys, so that A, which read both
                        // before B committed, must come before B, and
                        // then cannot write what B read.
                        let c = tb.get(t, b"c")?.unwrap()[0];
                        let d = tb.get(t, b"d")?.unwrap()[0];
                        let v = if bk == b"c" { c } else { d };
                        tb.update(t, bk, &[v + 1]).map(|_| ())
                    }));
                    match kind {
                        "update" => ta.update(t, b"c", &[seen + 1]).map(|_| ()),
                        "update_slice" => ta.update_slice(t, b"c", 0, &[seen + 1]).map(|_| ()),
                        "delete" => ta.delete(t, b"c").map(|_| ()),
                        _ => ta.put(t, b"c", &[seen + 1]),
                    }
                });
                let what = format!("{p}, {kind}, A's reads: {reads}, B wrote {}", bk[0] as char);
                match rb.expect("B ran") {
                    Ok(()) => {
                        assert!(matches!(ra, Err(TxError::Conflict(_))), "{what}: A {ra:?}");
                        let end = a.run(|tx| Ok(tx.get(t, bk)?.map(|v| v[0]))).unwrap();
                        let before = if bk == b"c" { 0 } else { 7 };
                        assert_eq!(end, Some(before + 1), "{what}");
                    }
                    // Refused at A's read lock (2PL without waiting): A
                    // may commit.
                    Err(TxError::Conflict(_)) => {
                        assert!(
                            matches!(ra, Ok(()) | Err(TxError::Conflict(_))),
                            "{what}: A {ra:?}"
                        )
                    }
                    Err(e) => panic!("{what}: B {e:?}"),
                }
            }
        }
    }
}

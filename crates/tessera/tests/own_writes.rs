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
fn own_writes_ssn() {
    check(Protocol::Ssn);
}

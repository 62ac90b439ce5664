//! A transaction body that panics rolls back before the panic goes on: no
//! lock stays held, no uncommitted insert stays in the index, and the
//! worker keeps working. Runs over every protocol of the list.

use std::panic::{catch_unwind, AssertUnwindSafe};

use tessera::{Database, Options, Protocol};

#[test]
fn a_panicking_body_leaves_nothing_behind() {
    for p in Protocol::INTERACTIVE {
        let db = Database::open(
            Options::in_memory()
                .protocol(p)
                .workers(4)
                .max_retries(1_000),
        )
        .unwrap();
        let t = db.create_table("t").unwrap();
        let mut a = db.worker().unwrap();
        a.run(|tx| tx.put(t, b"old", b"1")).unwrap();
        let r = catch_unwind(AssertUnwindSafe(|| {
            a.run(|tx| -> tessera::TxResult<()> {
                tx.get(t, b"old")?;
                tx.put(t, b"old", b"2")?;
                tx.insert(t, b"new", b"x")?;
                panic!("the body fails");
            })
        }));
        assert!(r.is_err(), "{p}: the panic must reach the caller");
        // Another worker reads and writes both keys: no lock is left, and
        // the uncommitted insert is gone (or, under nocc, applied).
        let mut b = db.worker().unwrap();
        let (old, new) = b
            .run(|tx| {
                let old = tx.get(t, b"old")?.map(|v| v.to_vec());
                let new = tx.get(t, b"new")?.map(|v| v.to_vec());
                tx.put(t, b"old", b"3")?;
                tx.put(t, b"new", b"y")?;
                Ok((old, new))
            })
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        if p.caps().serializable || p.caps().snapshot_reads {
            assert_eq!(old.as_deref(), Some(&b"1"[..]), "{p}");
            assert_eq!(new, None, "{p}: the panicked insert is visible");
        }
        // The panicked worker goes on.
        a.run(|tx| tx.put(t, b"old", b"4"))
            .unwrap_or_else(|e| panic!("{p}: {e}"));
        let v = b
            .run(|tx| Ok(tx.get(t, b"old")?.map(|v| v.to_vec())))
            .unwrap();
        assert_eq!(v.as_deref(), Some(&b"4"[..]), "{p}");
    }
}

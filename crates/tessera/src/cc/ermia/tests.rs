//! ERMIA's unit tests (the inline first version's reuse; the protocol's
//! isolation is tested by the conformance matrix in `tests/`).

use std::time::{Duration, Instant};

use crate::index::{Lookup, OrderedIndex};
use crate::storage::mvcc::MvRecord;
use crate::{Database, Options, Protocol};

/// A database under `protocol` for two workers, its memory epoch moving
/// every millisecond (so that GC's grace periods pass quickly), and a table.
fn fast_epochs(protocol: Protocol) -> (Database, crate::TableId) {
    let db = Database::open(
        Options::in_memory()
            .protocol(protocol)
            .workers(2)
            .epoch_interval(Duration::from_millis(1)),
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    (db, t)
}

/// A record updated now and then gets its newest version back into its
/// inline first version once GC has cut that version and two memory
/// epochs have passed; every read sees the latest value.
#[test]
fn updates_reuse_the_inline_first_version() {
    for protocol in [Protocol::Si, Protocol::Ssn] {
        let (db, t) = fast_epochs(protocol);
        let table = db.inner.tables.read()[t.0 as usize].clone();
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.put(t, b"k", &0u64.to_le_bytes())).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut n = 0u64;
        let mut reused_at = None;
        while reused_at.is_none() && Instant::now() < deadline {
            n += 1;
            w.run(|tx| tx.put(t, b"k", &n.to_le_bytes())).unwrap();
            let g = w.local.pin();
            if let Lookup::Found(v) = table.index.get(b"k", &g) {
                // SAFETY: reached through the index while pinned.
                let rec = unsafe { MvRecord::from_index(v) };
                // SAFETY: as above.
                if unsafe { &*rec.newest() }.is_first_inline() {
                    reused_at = Some(n);
                }
            }
            drop(g);
            // Let GC refresh its watermark, cut the chain and, two
            // memory epochs later, mark the inline version free.
            for _ in 0..40 {
                let got = w
                    .run(|tx| Ok(tx.get(t, b"k")?.map(|v| v.to_vec())))
                    .unwrap();
                assert_eq!(got.as_deref(), Some(&n.to_le_bytes()[..]));
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        let at = reused_at.unwrap_or_else(|| panic!("{protocol:?}: never reused"));
        assert!(at >= 2, "{protocol:?}: the first update cannot reuse it");
        // Keep going: the slot keeps cycling between chains, values stay right.
        for _ in 0..50 {
            n += 1;
            w.run(|tx| tx.put(t, b"k", &n.to_le_bytes())).unwrap();
            let got = w
                .run(|tx| Ok(tx.get(t, b"k")?.map(|v| v.to_vec())))
                .unwrap();
            assert_eq!(got.as_deref(), Some(&n.to_le_bytes()[..]));
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A dropped worker's version-GC entries go to the shared orphan queue,
/// and a worker whose own queue runs dry adopts them (and prunes the
/// chains they name); the flag that tells workers to look is cleared once
/// the queue is taken.
#[test]
fn a_dropped_workers_gc_entries_are_adopted() {
    use std::sync::atomic::Ordering;
    for protocol in [Protocol::Si, Protocol::Ssn] {
        let (db, t) = fast_epochs(protocol);
        let sh = || {
            db.inner
                .cc
                .as_any()
                .downcast_ref::<super::ErmiaShared>()
                .expect("ERMIA's shared state")
        };
        let mut a = db.worker().unwrap();
        for i in 0..100u64 {
            a.run(|tx| tx.put(t, &i.to_be_bytes(), b"first")).unwrap();
        }
        for i in 0..100u64 {
            a.run(|tx| tx.put(t, &i.to_be_bytes(), b"second")).unwrap();
        }
        drop(a);
        assert!(
            !sh().orphan_gc.lock().is_empty(),
            "{protocol:?}: the dropped worker left no entries"
        );
        assert!(sh().orphan_gc_pending.load(Ordering::Relaxed), "{protocol:?}");
        let mut b = db.worker().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !sh().orphan_gc.lock().is_empty() {
            assert!(Instant::now() < deadline, "{protocol:?}: never adopted");
            b.run(|tx| tx.get(t, &0u64.to_be_bytes()).map(|_| ())).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!sh().orphan_gc_pending.load(Ordering::Relaxed), "{protocol:?}");
        for i in 0..100u64 {
            let got = b
                .run(|tx| Ok(tx.get(t, &i.to_be_bytes())?.map(|v| v.to_vec())))
                .unwrap();
            assert_eq!(got.as_deref(), Some(&b"second"[..]), "{protocol:?}");
        }
    }
}

//! ERMIA's unit tests (the inline first version's reuse; the protocol's
//! isolation is tested by the conformance matrix in `tests/`).

use std::time::{Duration, Instant};

use crate::index::{Lookup, OrderedIndex};
use crate::storage::mvcc::MvRecord;
use crate::{Database, Options, Protocol};

/// A record updated now and then gets its newest version back into its
/// inline first version once GC has cut that version and two memory
/// epochs have passed; every read sees the latest value.
#[test]
fn updates_reuse_the_inline_first_version() {
    for protocol in [Protocol::Si, Protocol::Ssn] {
        let db = Database::open(
            Options::in_memory()
                .protocol(protocol)
                .workers(2)
                .epoch_interval(Duration::from_millis(1)),
        )
        .unwrap();
        let t = db.create_table("t").unwrap();
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

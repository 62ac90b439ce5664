//! Memory stays bounded in a long run: epoch-based reclamation frees deleted
//! records, superseded versions and unlinked index nodes (Silo section 4.8).
//!
//! The check is on the process's resident set size, so it needs Linux's
//! /proc; elsewhere it only checks the final content.

use std::time::Duration;

use tessera::{Database, Options, Protocol};

fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Insert and delete ever-increasing keys with 1 KiB values (the TPC-C
/// NEW-ORDER pattern), and grow/shrink values of a fixed key set so versions
/// are replaced, from two threads. Live data stays around 2,000 rows (~2 MB);
/// without reclamation the run would allocate over 1 GB.
fn churn(protocol: Protocol, snapshots: bool) {
    let db = Database::open(
        Options::in_memory()
            .protocol(protocol)
            .epoch_interval(Duration::from_millis(1))
            .snapshots(snapshots)
            .snapshot_epochs(2),
    )
    .unwrap();
    let t = db.create_table("queue").unwrap();
    let rounds: u64 = 150_000;
    let window: u64 = 1_000;
    let big = vec![7u8; 1024];
    let mut baseline = None;
    let mut peak = 0;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|th| {
                let db = db.clone();
                let big = &big;
                s.spawn(move || {
                    let mut w = db.worker().unwrap();
                    for i in 0..rounds {
                        let k = (th << 56) | i;
                        w.run(|tx| {
                            tx.insert(t, &k.to_be_bytes(), big)?;
                            if i >= window {
                                let old = (th << 56) | (i - window);
                                assert!(tx.delete(t, &old.to_be_bytes())?);
                            }
                            // a value that alternates between 8 bytes and 1 KiB
                            let hot = (th << 56) | (1 << 55) | (i % 64);
                            let v: &[u8] = if i % 2 == 0 { &big[..8] } else { big };
                            tx.put(t, &hot.to_be_bytes(), v)
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        // Sample RSS while the churn runs, after a warm-up.
        let mut i = 0;
        while !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(20));
            if let Some(r) = rss_bytes() {
                if i == 10 {
                    baseline = Some(r);
                }
                if i >= 10 {
                    peak = peak.max(r);
                }
            }
            i += 1;
        }
    });
    if let Some(b) = baseline {
        // Generous bound: allocator slack and garbage in flight, but far below
        // the >300 MB an unreclaimed run allocates.
        assert!(
            peak < b + 128 * 1024 * 1024,
            "RSS grew from {} MB to {} MB",
            b >> 20,
            peak >> 20
        );
    }
    let mut w = db.worker().unwrap();
    let rows = w
        .run(|tx| {
            tx.scan(
                t,
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                tessera::ScanOptions::new(),
                |_, _| true,
            )
        })
        .unwrap();
    assert_eq!(rows as u64, 2 * (window + 64));
}

#[test]
fn silo_churn_memory_is_bounded() {
    churn(Protocol::Silo, false);
}

#[test]
fn silo_churn_with_snapshots_memory_is_bounded() {
    churn(Protocol::Silo, true);
}

#[test]
fn nocc_churn_memory_is_bounded() {
    churn(Protocol::NoCc, false);
}

//! Criterion micro-benchmarks of the hot paths, so that a regression shows
//! without a full TPC-C or YCSB run:
//!
//! * `index/get`, `index/get_batch10` (ten keys looked up together),
//!   `index/insert`, `index/scan100` on a B+-tree of 1M and 10M
//!   random 8-byte keys (`HOT_PATHS_SIZES=1000000,10000000` by default);
//! * `record/read` of a 16-, 100- and 500-byte value (Silo's record read:
//!   TID word, value copy, TID re-check);
//! * `commit/silo` and the other protocols: a transaction of n blind writes
//!   (n = 1, 10, 100) to existing keys of a 100K-row table, run to commit;
//! * `scan/callback`, `scan/collect`, `scan/iterator`: a read-only
//!   transaction reading n = 10, 100, 1000 consecutive rows by the callback
//!   scan, `scan_collect` and the iterator scan (`tx.range`).
//!
//! `cargo bench -p tessera --bench hot_paths` runs them at full size;
//! `cargo bench -p tessera --bench hot_paths -- index/get` one group. Run
//! without `--bench` (`cargo test --benches`) each runs once on a tiny tree.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use tessera::epoch::Epochs;
use tessera::index::{BTree, Lookup, Unobserved};
use tessera::storage::tid::LATEST;
use tessera::storage::{ReadOutcome, Record};
use tessera::{Database, Options, Protocol};

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn full() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn sizes() -> Vec<usize> {
    if !full() {
        return vec![2_000];
    }
    std::env::var("HOT_PATHS_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000_000, 10_000_000])
}

fn index(c: &mut Criterion) {
    let epochs = Epochs::new(2, 25);
    let local = epochs.register().expect("an epoch slot");
    for n in sizes() {
        let tree = BTree::new();
        {
            let g = local.pin();
            for i in 0..n as u64 {
                tree.insert(&splitmix(i).to_be_bytes(), i + 1, &g);
            }
        }
        let mut grp = c.benchmark_group("index");
        grp.throughput(Throughput::Elements(1));
        grp.measurement_time(Duration::from_secs(3));
        let mut i = 0u64;
        grp.bench_function(BenchmarkId::new("get", n), |b| {
            let g = local.pin();
            b.iter(|| {
                i = i.wrapping_add(0x9E37_79B9) % n as u64;
                let k = splitmix(i).to_be_bytes();
                match tree.get(black_box(&k), &g) {
                    Lookup::Found(v) => black_box(v),
                    Lookup::Missing { .. } => unreachable!("key of row {i} missing"),
                };
            })
        });
        // Ten independent lookups at once (as YCSB's transactions make
        // them): per key, against `get` above.
        grp.throughput(Throughput::Elements(10));
        grp.bench_function(BenchmarkId::new("get_batch10", n), |b| {
            let g = local.pin();
            let mut keys = [[0u8; 8]; 10];
            let mut out = [0u64; 10];
            b.iter(|| {
                for k in keys.iter_mut() {
                    i = i.wrapping_add(0x9E37_79B9) % n as u64;
                    *k = splitmix(i).to_be_bytes();
                }
                let refs: [&[u8]; 10] = std::array::from_fn(|j| &keys[j][..]);
                tree.get_batch(black_box(&refs), &mut out, &g);
                assert!(out.iter().all(|&v| v != 0), "a loaded key missing");
            })
        });
        grp.throughput(Throughput::Elements(1));
        // Fresh keys (beyond the loaded ones): the tree grows by at most
        // the number of iterations, small beside n.
        let mut next = n as u64;
        grp.bench_function(BenchmarkId::new("insert", n), |b| {
            let g = local.pin();
            b.iter(|| {
                next += 1;
                black_box(tree.insert(&splitmix(next).to_be_bytes(), next, &g));
            })
        });
        grp.throughput(Throughput::Elements(100));
        grp.bench_function(BenchmarkId::new("scan100", n), |b| {
            let g = local.pin();
            b.iter(|| {
                i = i.wrapping_add(0x9E37_79B9) % n as u64;
                let lo = splitmix(i).to_be_bytes();
                let mut left = 100;
                tree.scan(
                    std::ops::Bound::Included(&lo[..]),
                    std::ops::Bound::Unbounded,
                    false,
                    &g,
                    Unobserved,
                    |k, v| {
                        black_box((k, v));
                        left -= 1;
                        left > 0
                    },
                );
            })
        });
        grp.finish();
        drop(tree);
        for _ in 0..3 {
            epochs.tick();
        }
        local.collect();
    }
}

fn record(c: &mut Criterion) {
    let epochs = Epochs::new(1, 25);
    let local = epochs.register().expect("an epoch slot");
    let mut grp = c.benchmark_group("record");
    grp.throughput(Throughput::Elements(1));
    for len in [16usize, 100, 500] {
        let val = vec![7u8; len];
        let rec = Record::new(&val, LATEST | 8, len);
        let mut out = Vec::with_capacity(len);
        grp.bench_function(BenchmarkId::new("read", len), |b| {
            let _g = local.pin();
            // SAFETY: `rec` is live until freed below, after the bench.
            let r = unsafe { &*rec };
            b.iter(|| {
                out.clear();
                match r.read(black_box(&mut out)) {
                    ReadOutcome::Ok(t) => black_box(t),
                    ReadOutcome::NotLatest => unreachable!(),
                };
            })
        });
        // SAFETY: made above, never shared, freed once.
        unsafe { Record::free(rec as *mut u8) };
    }
    grp.finish();
}

fn commit(c: &mut Criterion) {
    const ROWS: u64 = 100_000;
    let rows = if full() { ROWS } else { 1_000 };
    let protocols: Vec<Protocol> = if full() {
        ["silo", "si", "ssn", "2pl", "nocc"]
            .iter()
            .map(|p| p.parse().expect("a protocol"))
            .collect()
    } else {
        vec![Protocol::DEFAULT]
    };
    for p in protocols {
        let db = Database::open(Options::in_memory().protocol(p).workers(1)).expect("open");
        let t = db.create_table("t").expect("table");
        let mut w = db.worker().expect("worker");
        for chunk in (0..rows).collect::<Vec<_>>().chunks(1000) {
            w.run(|tx| {
                for &i in chunk {
                    tx.put(t, &splitmix(i).to_be_bytes(), &[1u8; 100])?;
                }
                Ok(())
            })
            .expect("load");
        }
        let mut grp = c.benchmark_group(format!("commit/{}", p.name()));
        for n in [1u64, 10, 100] {
            grp.throughput(Throughput::Elements(1));
            let mut i = 0u64;
            grp.bench_function(BenchmarkId::new("writes", n), |b| {
                b.iter_batched(
                    || {
                        i = i.wrapping_add(n * 7919);
                        i
                    },
                    |base| {
                        w.run(|tx| {
                            for j in 0..n {
                                let k = splitmix((base + j * 104_729) % rows).to_be_bytes();
                                tx.put(t, &k, &[2u8; 100])?;
                            }
                            Ok(())
                        })
                        .expect("commit")
                    },
                    BatchSize::SmallInput,
                )
            });
        }
        grp.finish();
        drop(w);
    }
}

/// A read-only Silo transaction that reads `n` consecutive rows (100-byte
/// values) of a 100K-row table three ways: the callback scan (the rows
/// only looked at), `scan_collect` (copied into a `Vec`), and the iterator
/// (`tx.range`, copied in chunks): what the iterator's chunks and copies
/// cost against the other two.
fn scan(c: &mut Criterion) {
    let rows: u64 = if full() { 100_000 } else { 2_000 };
    let db = Database::open(Options::in_memory().workers(1)).expect("open");
    let t = db.create_table("t").expect("table");
    let mut w = db.worker().expect("worker");
    for chunk in (0..rows).collect::<Vec<_>>().chunks(1000) {
        w.run(|tx| {
            for &i in chunk {
                tx.put(t, &i.to_be_bytes(), &[1u8; 100])?;
            }
            Ok(())
        })
        .expect("load");
    }
    let mut grp = c.benchmark_group("scan");
    for n in [10u64, 100, 1000] {
        grp.throughput(Throughput::Elements(n));
        let mut at = 0u64;
        let mut next = move || {
            at = (at + 7919) % (rows - n);
            at
        };
        grp.bench_function(BenchmarkId::new("callback", n), |b| {
            b.iter(|| {
                let lo = next();
                w.run(|tx| {
                    let mut bytes = 0usize;
                    tx.scan(
                        t,
                        std::ops::Bound::Included(&lo.to_be_bytes()),
                        std::ops::Bound::Excluded(&(lo + n).to_be_bytes()),
                        tessera::ScanOptions::new(),
                        |k, v| {
                            bytes += k.len() + v.len();
                            true
                        },
                    )?;
                    Ok(black_box(bytes))
                })
                .expect("scan")
            })
        });
        grp.bench_function(BenchmarkId::new("collect", n), |b| {
            b.iter(|| {
                let lo = next();
                w.run(|tx| {
                    let rows = tx.scan_collect(
                        t,
                        std::ops::Bound::Included(&lo.to_be_bytes()),
                        std::ops::Bound::Excluded(&(lo + n).to_be_bytes()),
                        tessera::ScanOptions::new(),
                    )?;
                    Ok(black_box(rows.len()))
                })
                .expect("scan")
            })
        });
        grp.bench_function(BenchmarkId::new("iterator", n), |b| {
            b.iter(|| {
                let lo = next();
                w.run(|tx| {
                    let mut bytes = 0usize;
                    for row in tx.range(t, lo.to_be_bytes()..(lo + n).to_be_bytes()) {
                        let (k, v) = row?;
                        bytes += k.len() + v.len();
                    }
                    Ok(black_box(bytes))
                })
                .expect("scan")
            })
        });
    }
    grp.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(Duration::from_secs(1));
    targets = index, record, commit, scan
}
criterion_main!(benches);

//! Throughput of the ordered index (`tessera::index::BTree`), single-threaded
//! and with several reader threads.
//!
//! `cargo bench -p tessera --bench index` runs the full size (1M random 8-byte
//! keys by default; `INDEX_BENCH_KEYS=N` to change it). Without `--bench`
//! (e.g. `cargo test --benches`) it runs a tiny smoke size. A plain harness
//! (no extra dependencies): each phase is timed once over all keys, which at
//! 1M keys is long enough to be stable.

use std::hint::black_box;
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera::epoch::{Epochs, Ticker};
use tessera::index::{BTree, Insert, Lookup};

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn report(what: &str, n: usize, d: Duration) {
    let per_s = n as f64 / d.as_secs_f64();
    println!(
        "{what:<44} {n:>9} ops in {:>8.1} ms: {:>7.2} M ops/s ({:>6.0} ns/op)",
        d.as_secs_f64() * 1e3,
        per_s / 1e6,
        1e9 / per_s
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("INDEX_BENCH_KEYS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if full { 1_000_000 } else { 10_000 });
    let threads = std::thread::available_parallelism().map_or(2, |p| p.get());
    let epochs = Epochs::new(threads + 1, 25);
    let _ticker = Ticker::start(Arc::clone(&epochs), Duration::from_millis(40));
    let local = epochs.register().unwrap();

    // Random 8-byte keys (distinct: splitmix is a bijection).
    let keys: Vec<[u8; 8]> = (0..n as u64).map(|i| splitmix(i).to_be_bytes()).collect();
    let tree = BTree::new();
    println!(
        "index bench: {n} random 8-byte keys, leaf {} / inner {} slots",
        tessera::index::LEAF_MAX,
        tessera::index::INNER_MAX
    );

    let t = Instant::now();
    for (i, k) in keys.iter().enumerate() {
        let g = local.pin();
        let r = tree.insert(k, i as u64 + 1, &g);
        debug_assert!(matches!(r, Insert::Inserted { .. }));
        black_box(r);
    }
    report("insert (random order)", n, t.elapsed());

    // The same keys in another random order, laid out contiguously so that
    // reading the next key costs no cache miss of its own.
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (splitmix(i as u64 ^ 0xABCD) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    let shuffled: Vec<([u8; 8], u64)> = order.iter().map(|&i| (keys[i], i as u64 + 1)).collect();
    let t = Instant::now();
    {
        let g = local.pin();
        for (k, v) in &shuffled {
            match tree.get(k, &g) {
                Lookup::Found(got) => assert_eq!(got, *v),
                Lookup::Missing { .. } => panic!("key {k:?} missing"),
            }
        }
    }
    report("get hit (random order)", n, t.elapsed());

    let t = Instant::now();
    {
        let g = local.pin();
        for i in 0..n as u64 {
            let k = splitmix(i + n as u64).to_be_bytes();
            black_box(tree.get(&k, &g));
        }
    }
    report("get miss (random)", n, t.elapsed());

    let mut sorted = keys.clone();
    sorted.sort_unstable();
    let t = Instant::now();
    {
        let g = local.pin();
        for k in &sorted {
            black_box(tree.get(k, &g));
        }
    }
    report("get hit (key order)", n, t.elapsed());

    // Scans of 100 keys from random starting points.
    let scans = n / 100;
    let t = Instant::now();
    let mut total = 0usize;
    for (i, (key, _)) in shuffled.iter().take(scans).enumerate() {
        let g = local.pin();
        let start = &key[..];
        let mut c = 0;
        tree.scan(
            Bound::Included(start),
            Bound::Unbounded,
            i % 2 == 1,
            &g,
            |l, v| {
                black_box((l, v));
            },
            |k, v| {
                black_box((k, v));
                c += 1;
                c < 100
            },
        );
        total += c;
    }
    report("scan 100 keys (half reverse), per key", total, t.elapsed());

    // Readers on all cores, each over the shuffled keys from its own offset.
    let t = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let (tree, shuffled, epochs) = (&tree, &shuffled, &epochs);
            s.spawn(move || {
                let local = epochs.register().unwrap();
                let g = local.pin();
                let off = th * n / threads;
                for i in 0..n {
                    let (k, v) = &shuffled[(off + i) % n];
                    assert_eq!(tree.get(k, &g), Lookup::Found(*v));
                }
            });
        }
    });
    report(
        &format!("get hit, {threads} threads (total)"),
        n * threads,
        t.elapsed(),
    );

    let t = Instant::now();
    for (k, v) in &shuffled {
        let g = local.pin();
        assert!(tree.remove(k, *v, &g));
    }
    report("remove (random order)", n, t.elapsed());
    let g = local.pin();
    assert_eq!(tree.len_slow(&g), 0);
    assert_eq!(tree.node_count_slow(&g), 1);
    drop(g);

    // Ever-increasing keys: insert at the right end, delete at the left end.
    let window = 1000u64;
    let t = Instant::now();
    for i in 0..n as u64 {
        let g = local.pin();
        tree.insert(&i.to_be_bytes(), i + 1, &g);
        if i >= window {
            assert!(tree.remove(&(i - window).to_be_bytes(), i - window + 1, &g));
        }
    }
    report("queue churn (insert right + remove left)", n, t.elapsed());
}

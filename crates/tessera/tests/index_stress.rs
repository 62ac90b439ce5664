//! Concurrency stress tests of the ordered index (`tessera::index::BTree`).
//!
//! Many threads (more than the machine has cores, so schedules interleave
//! preemptively) insert, remove, replace, look up and scan. Each thread writes
//! only the keys it owns, so it knows their exact state at any moment, while
//! reading (and scanning over) everybody's keys. Checks:
//! * every write and every lookup of an own key agrees with the thread's model;
//! * lookups and scans only ever return keys that could exist, with a value
//!   that belongs to that key;
//! * scans return strictly increasing (decreasing) keys within their bounds,
//!   and every own key that exists in the examined range;
//! * after the run, the structure is valid and holds exactly the union of the
//!   threads' models.
//!
//! A second test runs the TPC-C NEW-ORDER pattern (insert at the right end,
//! delete at the left end) and checks that the tree and the garbage lists stay
//! bounded.
//!
//! Seeds come from the clock; set `TESSERA_SEED` to replay one.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::epoch::{Epochs, Ticker};
use tessera::index::{BTree, Insert, Lookup};

const SUFFIXES: [&[u8]; 4] = [b"", b"\0", b"a", b"abcdefghij"];

/// Key number `k` as bytes: `"k"`, `k / 4` big-endian, one of four suffixes.
/// Neighbouring keys share 5..=8 byte prefixes and some are longer than 8
/// bytes, so comparisons go past the inline prefix. Byte order = `k` order.
fn key(k: u32) -> Vec<u8> {
    let mut v = b"k".to_vec();
    v.extend_from_slice(&(k / 4).to_be_bytes());
    v.extend_from_slice(SUFFIXES[(k % 4) as usize]);
    v
}

/// Inverse of [`key`]; `None` for bytes that are not a key of the universe.
fn unkey(b: &[u8]) -> Option<u32> {
    if b.len() < 5 || b[0] != b'k' {
        return None;
    }
    let q = u32::from_be_bytes(b[1..5].try_into().unwrap());
    let r = SUFFIXES.iter().position(|s| *s == &b[5..])? as u32;
    q.checked_mul(4)?.checked_add(r)
}

/// Values carry their key number, so a reader can tell a value that does not
/// belong to the key it was found under.
fn value(k: u32, gen: u32) -> u64 {
    ((k as u64) << 32) | (gen as u64 | 1)
}

fn key_of_value(v: u64) -> u32 {
    (v >> 32) as u32
}

fn base_seed() -> u64 {
    let seed = std::env::var("TESSERA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("index_stress seed: TESSERA_SEED={seed}");
    seed
}

#[derive(Clone, Copy)]
enum Ownership {
    /// Thread `t` owns keys `k` with `k % threads == t`: every leaf is shared.
    Interleaved,
    /// Thread `t` owns a contiguous block: writers mostly touch their own
    /// leaves, scans cross the blocks.
    Blocks,
}

fn owner(k: u32, universe: u32, threads: u32, own: Ownership) -> u32 {
    match own {
        Ownership::Interleaved => k % threads,
        Ownership::Blocks => k / universe.div_ceil(threads),
    }
}

fn bound_of(b: Bound<u32>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(key(k)),
        Bound::Excluded(k) => Bound::Excluded(key(k)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn above(b: Bound<u32>, k: u32) -> bool {
    match b {
        Bound::Included(l) => k >= l,
        Bound::Excluded(l) => k > l,
        Bound::Unbounded => true,
    }
}

fn below(b: Bound<u32>, k: u32) -> bool {
    match b {
        Bound::Included(h) => k <= h,
        Bound::Excluded(h) => k < h,
        Bound::Unbounded => true,
    }
}

struct Config {
    threads: u32,
    universe: u32,
    leaf_cap: usize,
    inner_cap: usize,
    own: Ownership,
    run_for: Duration,
    max_ops: u64,
}

fn mixed(cfg: Config, seed: u64) {
    let tree = BTree::with_node_capacity(cfg.leaf_cap, cfg.inner_cap);
    let epochs = Epochs::new(cfg.threads as usize + 1, 25);
    let ticker = Ticker::start(Arc::clone(&epochs), Duration::from_millis(1));
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let models: Vec<BTreeMap<u32, u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let (tree, epochs, stop, cfg) = (&tree, &epochs, &stop, &cfg);
                s.spawn(move || worker(t, tree, epochs, stop, cfg, seed))
            })
            .collect();
        while start.elapsed() < cfg.run_for && !handles.iter().all(|h| h.is_finished()) {
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    drop(ticker);

    let local = epochs.register().unwrap();
    let g = local.pin();
    tree.check_invariants(&g);
    let mut want: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    for m in &models {
        for (&k, &v) in m {
            assert!(want.insert(key(k), v).is_none(), "key {k} owned twice");
        }
    }
    let mut got = Vec::new();
    tree.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        &g,
        |_, _| {},
        |k, v| {
            got.push((k.to_vec(), v));
            true
        },
    );
    let want: Vec<(Vec<u8>, u64)> = want.into_iter().collect();
    assert_eq!(got.len(), want.len(), "final key count");
    assert!(
        got == want,
        "final content differs from the threads' models"
    );
    for k in 0..cfg.universe {
        let kb = key(k);
        match (tree.get(&kb, &g), models.iter().find_map(|m| m.get(&k))) {
            (Lookup::Found(v), Some(&w)) => assert_eq!(v, w),
            (Lookup::Missing { .. }, None) => {}
            (r, w) => panic!("final get {k}: {r:?}, model {w:?}"),
        }
    }
    assert_eq!(tree.len_slow(&g), got.len());
}

fn worker(
    t: u32,
    tree: &BTree,
    epochs: &Arc<Epochs>,
    stop: &AtomicBool,
    cfg: &Config,
    seed: u64,
) -> BTreeMap<u32, u64> {
    let mut rng = SmallRng::seed_from_u64(seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let local = epochs.register().expect("epoch slot");
    let mut model: BTreeMap<u32, u64> = BTreeMap::new();
    let own: Vec<u32> = (0..cfg.universe)
        .filter(|&k| owner(k, cfg.universe, cfg.threads, cfg.own) == t)
        .collect();
    let mut gen = 0u32;
    let mut ops = 0u64;
    let mut scanned = 0u64;
    while ops < cfg.max_ops && !stop.load(Ordering::Relaxed) {
        // Stay pinned for a random number of operations, like a transaction.
        let g = local.pin();
        for _ in 0..rng.gen_range(1..24) {
            ops += 1;
            gen = gen.wrapping_add(2);
            let roll = rng.gen_range(0..100);
            if roll < 55 {
                // A write to an own key.
                let k = own[rng.gen_range(0..own.len())];
                let kb = key(k);
                let cur = model.get(&k).copied();
                if roll < 30 {
                    let v = value(k, gen);
                    match (tree.insert(&kb, v, &g), cur) {
                        (
                            Insert::Inserted {
                                before,
                                after,
                                leaf,
                                ..
                            },
                            None,
                        ) => {
                            assert_ne!(before, after);
                            // Our own insert bumped the version; others may
                            // have moved it further since.
                            let _ = leaf.version();
                            model.insert(k, v);
                        }
                        (Insert::Exists(old), Some(c)) => assert_eq!(old, c, "insert {k}"),
                        (r, c) => panic!("thread {t}: insert {k} -> {r:?}, model {c:?}"),
                    }
                } else if roll < 48 {
                    let wrong = rng.gen_ratio(1, 5);
                    let expected = match (cur, wrong) {
                        (Some(c), false) => c,
                        (Some(c), true) => c ^ 2,
                        (None, _) => value(k, 1),
                    };
                    let r = tree.remove(&kb, expected, &g);
                    assert_eq!(r, cur == Some(expected), "thread {t}: remove {k}");
                    if r {
                        model.remove(&k);
                    }
                } else {
                    let new = value(k, gen);
                    let expected = cur.unwrap_or(value(k, 1));
                    let r = tree.replace(&kb, expected, new, &g);
                    assert_eq!(r, cur.is_some(), "thread {t}: replace {k}");
                    if r {
                        model.insert(k, new);
                    }
                }
            } else if roll < 80 {
                // A lookup of any key.
                let k = rng.gen_range(0..cfg.universe);
                let r = tree.get(&key(k), &g);
                if owner(k, cfg.universe, cfg.threads, cfg.own) == t {
                    match (r, model.get(&k)) {
                        (Lookup::Found(v), Some(&w)) => assert_eq!(v, w),
                        (Lookup::Missing { leaf, version }, None) => {
                            assert_eq!(version & 3, 0, "stable version has no flag bits");
                            let _ = leaf.version();
                        }
                        (r, w) => panic!("thread {t}: get own {k}: {r:?}, model {w:?}"),
                    }
                } else if let Lookup::Found(v) = r {
                    assert_eq!(key_of_value(v), k, "value of another key under {k}");
                }
            } else {
                // A scan over a random range, either direction, with a limit.
                let a = rng.gen_range(0..cfg.universe);
                let b = (a + rng.gen_range(0..cfg.universe / 4)).min(cfg.universe - 1);
                let pick = |rng: &mut SmallRng, k: u32| match rng.gen_range(0..5) {
                    0 => Bound::Unbounded,
                    1 | 2 => Bound::Excluded(k),
                    _ => Bound::Included(k),
                };
                let (lo, hi) = (pick(&mut rng, a), pick(&mut rng, b));
                let reverse = rng.gen_bool(0.5);
                let limit = rng.gen_range(1..200usize);
                let (lob, hib) = (bound_of(lo), bound_of(hi));
                let mut seen: Vec<(u32, u64)> = Vec::new();
                let mut leaves = 0usize;
                let mut prev: Option<Vec<u8>> = None;
                tree.scan(
                    as_ref(&lob),
                    as_ref(&hib),
                    reverse,
                    &g,
                    |_, _| leaves += 1,
                    |kb, v| {
                        if let Some(p) = &prev {
                            if reverse {
                                assert!(
                                    kb < &p[..],
                                    "reverse scan out of order: {p:?} then {kb:?}"
                                );
                            } else {
                                assert!(kb > &p[..], "scan out of order: {p:?} then {kb:?}");
                            }
                        }
                        prev = Some(kb.to_vec());
                        let k =
                            unkey(kb).unwrap_or_else(|| panic!("scan returned a non-key {kb:?}"));
                        assert!(
                            k < cfg.universe,
                            "scan returned key {k} outside the universe"
                        );
                        assert_eq!(key_of_value(v), k, "scan: value of another key under {k}");
                        seen.push((k, v));
                        seen.len() < limit
                    },
                );
                scanned += seen.len() as u64;
                assert!(leaves >= 1);
                for &(k, _) in &seen {
                    assert!(
                        above(lo, k) && below(hi, k),
                        "scan key {k} outside {lo:?}..{hi:?}"
                    );
                }
                // The range actually examined: up to the last key if the limit
                // stopped the scan.
                let (mut elo, mut ehi) = (lo, hi);
                if seen.len() == limit {
                    let last = seen.last().unwrap().0;
                    if reverse {
                        elo = Bound::Included(last);
                    } else {
                        ehi = Bound::Included(last);
                    }
                }
                let mine_seen: Vec<(u32, u64)> = seen
                    .iter()
                    .copied()
                    .filter(|&(k, _)| owner(k, cfg.universe, cfg.threads, cfg.own) == t)
                    .collect();
                let mut mine_want: Vec<(u32, u64)> = model
                    .iter()
                    .filter(|(&k, _)| above(elo, k) && below(ehi, k))
                    .map(|(&k, &v)| (k, v))
                    .collect();
                if reverse {
                    mine_want.reverse();
                }
                assert_eq!(
                    mine_seen, mine_want,
                    "thread {t}: own keys in scan {lo:?}..{hi:?} rev {reverse}"
                );
            }
        }
        drop(g);
    }
    eprintln!(
        "thread {t}: {ops} ops, {scanned} keys scanned, {} keys owned",
        model.len()
    );
    model
}

#[test]
fn index_concurrent_interleaved_small_nodes() {
    mixed(
        Config {
            threads: 8,
            universe: 2048,
            leaf_cap: 3,
            inner_cap: 3,
            own: Ownership::Interleaved,
            run_for: Duration::from_secs(3),
            max_ops: 400_000,
        },
        base_seed(),
    );
}

#[test]
fn index_concurrent_blocks_small_nodes() {
    mixed(
        Config {
            threads: 8,
            universe: 4096,
            leaf_cap: 4,
            inner_cap: 4,
            own: Ownership::Blocks,
            run_for: Duration::from_secs(3),
            max_ops: 400_000,
        },
        base_seed(),
    );
}

#[test]
fn index_concurrent_interleaved_default_nodes() {
    mixed(
        Config {
            threads: 8,
            universe: 20_000,
            leaf_cap: tessera::index::LEAF_MAX,
            inner_cap: tessera::index::INNER_MAX,
            own: Ownership::Interleaved,
            run_for: Duration::from_secs(3),
            max_ops: 400_000,
        },
        base_seed(),
    );
}

/// Insert at the right end, delete at the left end (TPC-C NEW-ORDER), from
/// several threads with separate key spaces, while others scan. The live data
/// stays at `threads * window` keys; the tree must stay proportional to it
/// and retired nodes must actually be freed.
#[test]
fn index_churn_memory_stays_bounded() {
    let threads = 4u64;
    let window = 500u64;
    let phases = 8;
    let rounds_per_phase = 6_000u64;
    let tree = BTree::with_node_capacity(4, 4);
    let epochs = Epochs::new(threads as usize + 2, 25);
    let ticker = Ticker::start(Arc::clone(&epochs), Duration::from_millis(1));
    let main = epochs.register().unwrap();
    let k = |th: u64, i: u64| ((th << 56) | i).to_be_bytes();
    let mut counts = Vec::new();
    for phase in 0..phases {
        let pending: Vec<usize> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|th| {
                    let (tree, epochs) = (&tree, &epochs);
                    s.spawn(move || {
                        let local = epochs.register().unwrap();
                        let base = phase * rounds_per_phase;
                        for i in base..base + rounds_per_phase {
                            let g = local.pin();
                            assert!(matches!(
                                tree.insert(&k(th, i), i + 1, &g),
                                Insert::Inserted { .. }
                            ));
                            if i >= window {
                                assert!(tree.remove(&k(th, i - window), i - window + 1, &g));
                            }
                            if i % 64 == 0 {
                                // The queue's head, as NEW-ORDER's delivery reads it.
                                let mut first = None;
                                let lo = k(th, 0);
                                tree.scan(
                                    Bound::Included(&lo[..]),
                                    Bound::Unbounded,
                                    false,
                                    &g,
                                    |_, _| {},
                                    |kb, _| {
                                        first = Some(kb.to_vec());
                                        false
                                    },
                                );
                                let want = k(th, i.saturating_sub(window - 1));
                                assert_eq!(first.as_deref(), Some(&want[..]));
                            }
                        }
                        // Let the ticker catch up so our garbage can go.
                        std::thread::sleep(Duration::from_millis(10));
                        local.collect();
                        local.pending()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let g = main.pin();
        tree.check_invariants(&g);
        let live = tree.len_slow(&g);
        assert_eq!(
            live as u64,
            threads * window.min((phase + 1) * rounds_per_phase)
        );
        let nodes = tree.node_count_slow(&g);
        counts.push(nodes);
        drop(g);
        // Leaves hold >= 1 key and inner nodes >= 1 child, and removal unlinks
        // empty nodes: a leaked left edge would grow with every phase.
        assert!(
            nodes <= 3 * live + 64,
            "phase {phase}: {nodes} nodes for {live} keys"
        );
        for p in &pending {
            assert!(
                *p < 20_000,
                "phase {phase}: {p} retired objects still pending after the ticker ran"
            );
        }
    }
    drop(ticker);
    eprintln!("node counts per phase: {counts:?}");
    let (first, last) = (counts[1], *counts.last().unwrap());
    assert!(
        last <= first * 2 + 64,
        "node count grew from {first} to {last}"
    );
}

/// Optimistic reads of one hot leaf: a writer keeps shifting every slot of the
/// leaf (inserting and removing keys below all others, replacing values)
/// while readers look up and scan the other keys. A reader that used a slot
/// without validating would pair a key with a neighbour's value.
#[test]
fn index_hot_leaf_reads_are_consistent() {
    let tree = BTree::new();
    let epochs = Epochs::new(4, 25);
    let ticker = Ticker::start(Arc::clone(&epochs), Duration::from_millis(1));
    let n = 24u32; // keys 8..n stay; keys 0..8 come and go
    {
        let local = epochs.register().unwrap();
        let g = local.pin();
        for k in 8..n {
            tree.insert(&key(k), value(k, 1), &g);
        }
    }
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_millis(1500);
    std::thread::scope(|s| {
        let (tree, epochs, stop) = (&tree, &epochs, &stop);
        s.spawn(move || {
            let local = epochs.register().unwrap();
            let mut i = 0u32;
            while Instant::now() < deadline {
                let g = local.pin();
                for _ in 0..64 {
                    let k = i % 8;
                    tree.insert(&key(k), value(k, i), &g);
                    let j = 8 + i % (n - 8);
                    let Lookup::Found(cur) = tree.get(&key(j), &g) else {
                        panic!("key {j} vanished")
                    };
                    assert!(tree.replace(&key(j), cur, value(j, i), &g));
                    assert!(tree.remove(&key(k), value(k, i), &g));
                    i = i.wrapping_add(1);
                }
            }
            stop.store(true, Ordering::Relaxed);
        });
        for r in 0..2u64 {
            s.spawn(move || {
                let local = epochs.register().unwrap();
                let mut rng = SmallRng::seed_from_u64(r);
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let g = local.pin();
                    for _ in 0..64 {
                        let k = rng.gen_range(8..n);
                        match tree.get(&key(k), &g) {
                            Lookup::Found(v) => assert_eq!(key_of_value(v), k, "get {k}"),
                            Lookup::Missing { .. } => panic!("key {k} missing"),
                        }
                        let mut count = 0;
                        let lo = key(8);
                        tree.scan(
                            Bound::Included(&lo[..]),
                            Bound::Unbounded,
                            r == 1,
                            &g,
                            |_, _| {},
                            |kb, v| {
                                let k = unkey(kb).expect("a key");
                                assert_eq!(key_of_value(v), k, "scan {k}");
                                count += 1;
                                true
                            },
                        );
                        assert_eq!(count, n - 8);
                        reads += 1;
                    }
                }
                assert!(reads > 0);
            });
        }
    });
    drop(ticker);
}

/// Scans while leaves split and are unlinked all the time: tiny nodes and a
/// tiny key space, so that a leaf's key range often grows (its neighbour was
/// unlinked) between a scan's descent and its read of the leaf. Every scan
/// must still return strictly ordered keys, each once.
#[test]
fn index_scans_stay_ordered_under_structure_changes() {
    let tree = BTree::with_node_capacity(2, 3);
    let threads = 8u32;
    let epochs = Epochs::new(threads as usize, 25);
    let ticker = Ticker::start(Arc::clone(&epochs), Duration::from_millis(1));
    let universe = 96u32;
    let deadline = Instant::now() + Duration::from_millis(2500);
    let seed = base_seed();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (tree, epochs) = (&tree, &epochs);
            s.spawn(move || {
                let local = epochs.register().unwrap();
                let mut rng = SmallRng::seed_from_u64(seed ^ t as u64);
                let writer = t % 2 == 0;
                let mut scans = 0u64;
                while Instant::now() < deadline {
                    let g = local.pin();
                    if writer {
                        // Own keys: k % (threads / 2) == t / 2.
                        for _ in 0..16 {
                            let k =
                                rng.gen_range(0..universe / (threads / 2)) * (threads / 2) + t / 2;
                            let kb = key(k);
                            if let Insert::Exists(v) = tree.insert(&kb, value(k, 7), &g) {
                                assert!(tree.remove(&kb, v, &g));
                            }
                        }
                    } else {
                        let reverse = rng.gen_bool(0.5);
                        let lo = key(rng.gen_range(0..universe / 2));
                        let mut prev: Option<Vec<u8>> = None;
                        tree.scan(
                            Bound::Included(&lo[..]),
                            Bound::Unbounded,
                            reverse,
                            &g,
                            |_, _| {},
                            |kb, v| {
                                if let Some(p) = &prev {
                                    assert!(
                                        if reverse { kb < &p[..] } else { kb > &p[..] },
                                        "scan (reverse: {reverse}) out of order: {p:?} then {kb:?}"
                                    );
                                }
                                assert!(kb >= &lo[..]);
                                assert_eq!(Some(key_of_value(v)), unkey(kb));
                                prev = Some(kb.to_vec());
                                true
                            },
                        );
                        scans += 1;
                    }
                }
                if !writer {
                    assert!(scans > 0);
                }
            });
        }
    });
    drop(ticker);
    let local = epochs.register().unwrap();
    let g = local.pin();
    tree.check_invariants(&g);
}

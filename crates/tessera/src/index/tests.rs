//! Unit tests and a model-based property test of the B+-tree.

use super::*;
use crate::epoch::{Epochs, LocalEpoch};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

type ScanHook = Box<dyn FnMut(usize, Option<Vec<u8>>, Option<Vec<u8>>) -> bool>;

thread_local! {
    /// A one-shot hook run by a scan's descent on this thread before it reads
    /// each inner node (depth, lower and upper fence so far); it stays installed until
    /// it returns true.
    static SCAN_HOOK: std::cell::RefCell<Option<ScanHook>> = const { std::cell::RefCell::new(None) };
}

/// Called by `BTree::scan_leaf` in test builds.
pub(super) fn scan_descent_hook(depth: usize, fence_lo: Option<KeyRef>, fence_hi: Option<KeyRef>) {
    let Some(mut f) = SCAN_HOOK.with(|h| h.borrow_mut().take()) else {
        return;
    };
    // SAFETY: fences read while the scan is pinned (the hook runs inside it).
    let bytes = |k: Option<KeyRef>| k.map(|k| unsafe { k.bytes() }.to_vec());
    if !f(depth, bytes(fence_lo), bytes(fence_hi)) {
        SCAN_HOOK.with(|h| *h.borrow_mut() = Some(f));
    }
}

fn epoch() -> (Arc<Epochs>, LocalEpoch) {
    let ep = Epochs::new(1, 25);
    let local = ep.register().unwrap();
    (ep, local)
}

/// Depth of the tree (1 = root leaf).
fn height(t: &BTree) -> usize {
    let mut h = t.root.load(Acquire) as *const Header;
    let mut d = 1;
    // SAFETY: quiescent test; nodes reachable from the root are live.
    while !unsafe { hdr(h) }.is_leaf() {
        // SAFETY: quiescent test; nodes reachable from the root are live.
        h = unsafe { as_inner(h) }.child[0].load(Acquire);
        d += 1;
    }
    d
}

/// `get_batch` of at most `BATCH_MAX` 8-byte keys: the values (0: not
/// found, or "look it up alone").
fn batch_of(t: &BTree, keys: &[[u8; 8]], g: &Guard<'_>) -> Vec<u64> {
    let refs: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    let mut out = vec![0u64; refs.len()];
    t.get_batch(&refs, &mut out, g);
    out
}

fn collect(
    t: &BTree,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    rev: bool,
    g: &Guard<'_>,
) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    let mut leaves = 0;
    t.scan(
        lo,
        hi,
        rev,
        g,
        |_, _| leaves += 1,
        |k, v| {
            out.push((k.to_vec(), v));
            true
        },
    );
    assert!(leaves >= 1, "a scan reports at least one leaf");
    out
}

fn model_range(
    m: &BTreeMap<Vec<u8>, u64>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    rev: bool,
) -> Vec<(Vec<u8>, u64)> {
    let inr = |k: &[u8]| {
        (match lo {
            Bound::Included(l) => k >= l,
            Bound::Excluded(l) => k > l,
            Bound::Unbounded => true,
        }) && (match hi {
            Bound::Included(h) => k <= h,
            Bound::Excluded(h) => k < h,
            Bound::Unbounded => true,
        })
    };
    let mut v: Vec<_> = m
        .iter()
        .filter(|(k, _)| inr(k))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if rev {
        v.reverse();
    }
    v
}

fn bounds(k: &[u8]) -> [Bound<&[u8]>; 3] {
    [Bound::Included(k), Bound::Excluded(k), Bound::Unbounded]
}

#[test]
fn empty_tree() {
    let (_ep, local) = epoch();
    let g = local.pin();
    let t = BTree::new();
    match t.get(b"x", &g) {
        Lookup::Missing { leaf, version } => assert_eq!(leaf.version(), version),
        Lookup::Found(_) => panic!("found in empty tree"),
    }
    assert!(!t.remove(b"x", 1, &g));
    assert!(!t.replace(b"x", 1, 2, &g));
    assert_eq!(t.len_slow(&g), 0);
    for rev in [false, true] {
        assert!(collect(&t, Bound::Unbounded, Bound::Unbounded, rev, &g).is_empty());
    }
    assert_eq!(t.node_count_slow(&g), 1);
    t.check_invariants(&g);
}

#[test]
fn separator_is_shortest_between() {
    assert_eq!(separator(b"abc", b"abd"), b"abd");
    assert_eq!(separator(b"ab", b"abc"), b"abc");
    assert_eq!(separator(b"a", b"bcd"), b"b");
    assert_eq!(separator(b"", b"\0"), b"\0");
    assert_eq!(separator(b"abcdefghij", b"abcdefghzz"), b"abcdefghz");
}

#[test]
fn prefix_order_matches_memcmp() {
    let keys: Vec<&[u8]> = vec![
        b"",
        b"\0",
        b"\0\0",
        b"a",
        b"a\0",
        b"ab",
        b"abcdefgh",
        b"abcdefgh\0",
        b"abcdefgh\0\0",
        b"abcdefgha",
        b"abcdefghb",
        b"abcdefgi",
        b"\xff",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    ];
    for a in &keys {
        for b in &keys {
            let (pa, la) = prefix_of(a);
            let sk = SKey::new(b);
            let s = node::Slots::<1>::new();
            let k = node::OwnedKey::new(a);
            s.set(0, k);
            assert_eq!(s.cmp(0, &sk), a.cmp(b), "{a:?} vs {b:?}");
            // SAFETY: never shared.
            unsafe { k.free() };
            if pa != sk.prefix {
                assert_eq!(pa.cmp(&sk.prefix), a.cmp(b));
            }
            let _ = la;
        }
    }
}

/// The prefix of every key length from 0 to 12 is its first 8 bytes,
/// big-endian, zero padded (the definition, against the two-load form).
#[test]
fn prefix_of_every_length_is_the_padded_big_endian_head() {
    let bytes: Vec<u8> = (0..12u8).map(|i| 0xF1u8.wrapping_mul(i + 3)).collect();
    for n in 0..=bytes.len() {
        let key = &bytes[..n];
        let mut b = [0u8; 8];
        let m = n.min(8);
        b[..m].copy_from_slice(&key[..m]);
        assert_eq!(
            prefix_of(key),
            (u64::from_be_bytes(b), n.min(9) as u8),
            "length {n}"
        );
    }
}

#[test]
fn shared_prefixes_empty_key_and_prefix_keys() {
    let (_ep, local) = epoch();
    let g = local.pin();
    let t = BTree::with_node_capacity(3, 3);
    let keys: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"ab".to_vec(),
        b"abc".to_vec(),
        b"ab\0".to_vec(),
        b"abcdefgh".to_vec(),
        b"abcdefgh\0".to_vec(),
        b"abcdefghX".to_vec(),
        b"abcdefghXY".to_vec(),
        b"abcdefghXZ".to_vec(),
        b"abcdefgh\xff".to_vec(),
        b"abcdefg".to_vec(),
        vec![0u8; 20],
        vec![0u8; 21],
        vec![0u8; 8],
        vec![7u8; 1024],
        {
            let mut k = vec![7u8; 1023];
            k.push(8);
            k
        },
    ];
    let mut m = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        let v = i as u64 + 1;
        assert!(matches!(t.insert(k, v, &g), Insert::Inserted { .. }));
        m.insert(k.clone(), v);
        t.check_invariants(&g);
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(t.get(k, &g), Lookup::Found(i as u64 + 1), "{k:?}");
        assert_eq!(t.insert(k, 99, &g), Insert::Exists(i as u64 + 1));
    }
    for k in [
        &b"a"[..],
        b"abcdefgh\0\0",
        b"abcdefghXYZ",
        &[0u8; 9],
        b"abcdefgg",
    ] {
        assert!(matches!(t.get(k, &g), Lookup::Missing { .. }), "{k:?}");
    }
    let all = collect(&t, Bound::Unbounded, Bound::Unbounded, false, &g);
    assert_eq!(
        all,
        model_range(&m, Bound::Unbounded, Bound::Unbounded, false)
    );
    assert_eq!(all[0].0, b"");
    // Remove the empty key and a prefix key, then put them back.
    assert!(!t.remove(b"", 2, &g));
    assert!(t.remove(b"", 1, &g));
    assert!(t.remove(b"ab", 2, &g));
    assert!(matches!(t.get(b"", &g), Lookup::Missing { .. }));
    assert_eq!(t.get(b"abc", &g), Lookup::Found(3));
    assert!(matches!(t.insert(b"", 5, &g), Insert::Inserted { .. }));
    assert!(matches!(t.insert(b"ab", 6, &g), Insert::Inserted { .. }));
    assert_eq!(t.get(b"", &g), Lookup::Found(5));
    assert_eq!(t.get(b"ab", &g), Lookup::Found(6));
    t.check_invariants(&g);
}

#[test]
fn replace_is_compare_and_set() {
    let (_ep, local) = epoch();
    let g = local.pin();
    let t = BTree::new();
    t.insert(b"k", 1, &g);
    assert!(!t.replace(b"k", 2, 3, &g));
    assert_eq!(t.get(b"k", &g), Lookup::Found(1));
    let Lookup::Missing { leaf, version } = t.get(b"j", &g) else {
        panic!()
    };
    assert!(t.replace(b"k", 1, 3, &g));
    assert_ne!(leaf.version(), version, "replace changes the leaf version");
    assert_eq!(t.get(b"k", &g), Lookup::Found(3));
    assert!(!t.remove(b"k", 1, &g));
    assert!(t.remove(b"k", 3, &g));
    assert_eq!(t.len_slow(&g), 0);
}

#[test]
fn leaf_versions_track_every_change() {
    let (_ep, local) = epoch();
    let g = local.pin();
    let t = BTree::with_node_capacity(4, 3);
    let Lookup::Missing { leaf, version } = t.get(b"b", &g) else {
        panic!()
    };
    let Insert::Inserted {
        leaf: l2,
        before,
        after,
        split,
    } = t.insert(b"b", 1, &g)
    else {
        panic!()
    };
    assert_eq!((l2, before, split), (leaf, version, false));
    assert_ne!(after, before);
    assert_eq!(leaf.version(), after);
    // A failed insert or a miss does not change it.
    assert_eq!(t.insert(b"b", 2, &g), Insert::Exists(1));
    assert!(!t.remove(b"zz", 1, &g));
    assert_eq!(leaf.version(), after);
    for k in [b"a", b"c", b"d"] {
        t.insert(k, 1, &g);
    }
    let v = leaf.version();
    // The fifth key splits the leaf.
    let Insert::Inserted {
        split,
        before,
        after,
        ..
    } = t.insert(b"e", 1, &g)
    else {
        panic!()
    };
    assert!(split);
    assert_eq!(before, v);
    assert_ne!(
        leaf.version(),
        v,
        "a split changes the split leaf's version"
    );
    assert_ne!(before, after);
    // Removing keys changes versions; emptying a non-root leaf unlinks it and
    // its version never matches a stable one again.
    let Lookup::Missing {
        leaf: right,
        version: rv,
    } = t.get(b"f", &g)
    else {
        panic!()
    };
    assert_ne!(right, leaf);
    let keys_right: Vec<Vec<u8>> = collect(&t, Bound::Excluded(b"c"), Bound::Unbounded, false, &g)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    for k in &keys_right {
        assert!(t.remove(k, 1, &g));
    }
    assert_ne!(right.version(), rv);
    assert!(right.version() & OBSOLETE != 0, "unlinked leaf is obsolete");
    t.check_invariants(&g);
    assert_eq!(height(&t), 1, "root collapsed back to a leaf");
}

/// An insert that splits a leaf, is taken back (a transaction aborted) and
/// is redone must not split again: the engine's retry would otherwise fail
/// node-set validation forever. Holds at both ends and in the middle.
#[test]
fn retried_insert_does_not_split_again() {
    let (_ep, local) = epoch();
    let g = local.pin();
    for cap in [2usize, 4, 8, LEAF_MAX] {
        for (name, key) in [("append", 1000u64), ("prepend", 0), ("middle", 501)] {
            let t = BTree::with_node_capacity(cap, 3);
            // One full leaf: keys 1..=cap spread over 10..=990.
            for i in 0..cap as u64 {
                let k = 10 + i * 980 / (cap as u64 - 1).max(1);
                t.insert(&k.to_be_bytes(), k + 1, &g);
            }
            let kb = key.to_be_bytes();
            let Insert::Inserted { split, .. } = t.insert(&kb, 7, &g) else {
                panic!()
            };
            assert!(split, "{name}, cap {cap}: the first insert splits");
            assert!(t.remove(&kb, 7, &g));
            let Insert::Inserted { split, .. } = t.insert(&kb, 7, &g) else {
                panic!()
            };
            assert!(!split, "{name}, cap {cap}: the retried insert split again");
            t.check_invariants(&g);
        }
    }
}

/// Nodes at their full width (`LEAF_MAX`, `INNER_MAX`): enough keys for
/// leaves' parents to split and for a root above them, so that descents
/// cross an inner node whose children are inner nodes (the prefetch of a
/// node's search lines) as well as leaves' parents; every level's
/// `Header::level` is checked by `check_invariants`, and `get_batch` must
/// agree with `get` on every key.
#[test]
#[cfg_attr(miri, ignore)]
fn full_width_nodes_split_at_three_levels() {
    let (ep, local) = epoch();
    let t = BTree::new();
    let n = 150_000u64;
    let keys: Vec<u64> = (0..n).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
    {
        let g = local.pin();
        for &k in &keys {
            assert!(matches!(t.insert(&k.to_be_bytes(), k | 1, &g), Insert::Inserted { .. }));
        }
        t.check_invariants(&g);
        assert!(height(&t) >= 3, "a three-level tree expected, got {}", height(&t));
        for chunk in keys.chunks(BATCH_MAX) {
            let kb: Vec<[u8; 8]> = chunk.iter().map(|k| k.to_be_bytes()).collect();
            let out = batch_of(&t, &kb, &g);
            for (&k, &v) in chunk.iter().zip(&out) {
                assert_eq!(v, k | 1, "get_batch of {k:#x}");
                assert_eq!(t.get(&k.to_be_bytes(), &g), Lookup::Found(k | 1));
            }
        }
        for (i, &k) in keys.iter().enumerate() {
            assert!(t.remove(&k.to_be_bytes(), k | 1, &g), "remove {k:#x}");
            if i % 50_000 == 0 {
                t.check_invariants(&g);
            }
        }
        t.check_invariants(&g);
        assert_eq!(t.len_slow(&g), 0);
    }
    ep.tick();
    local.collect();
}

#[test]
fn splits_at_all_levels_and_remove_to_empty() {
    let (ep, local) = epoch();
    let t = BTree::with_node_capacity(3, 3);
    let n = if cfg!(miri) { 200u64 } else { 3000 };
    let mut keys: Vec<u64> = (0..n)
        .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20)
        .collect();
    keys.sort();
    keys.dedup();
    for order in 0..3 {
        let mut ks = keys.clone();
        match order {
            0 => {}
            1 => ks.reverse(),
            _ => ks.sort_by_key(|k| k.wrapping_mul(0x2545_F491_4F6C_DD1D)),
        }
        {
            let g = local.pin();
            for &k in &ks {
                let key = k.to_be_bytes();
                assert!(matches!(t.insert(&key, k + 1, &g), Insert::Inserted { .. }));
            }
            t.check_invariants(&g);
            let min_height = if cfg!(miri) { 4 } else { 5 };
            assert!(
                height(&t) >= min_height,
                "deep tree expected, got {}",
                height(&t)
            );
            assert_eq!(t.len_slow(&g), ks.len());
            for &k in &ks {
                assert_eq!(t.get(&k.to_be_bytes(), &g), Lookup::Found(k + 1));
            }
            let all = collect(&t, Bound::Unbounded, Bound::Unbounded, false, &g);
            assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
            let rall = collect(&t, Bound::Unbounded, Bound::Unbounded, true, &g);
            assert_eq!(rall.len(), all.len());
            assert!(rall.windows(2).all(|w| w[0].0 > w[1].0));
            // Remove in another order, checking now and then.
            for (i, &k) in ks.iter().rev().enumerate() {
                let key = k.to_be_bytes();
                assert!(t.remove(&key, k + 1, &g), "remove {k}");
                if i % 97 == 0 {
                    t.check_invariants(&g);
                }
            }
            t.check_invariants(&g);
            assert_eq!(t.len_slow(&g), 0);
            assert_eq!(t.node_count_slow(&g), 1, "empty tree is a single leaf");
            assert_eq!(height(&t), 1);
        }
        ep.tick();
        ep.tick();
        ep.tick();
        local.collect();
    }
}

#[test]
fn scans_with_every_bound_combination() {
    let (_ep, local) = epoch();
    let g = local.pin();
    for (lc, ic) in [(2, 3), (3, 4), (LEAF_MAX, INNER_MAX)] {
        let t = BTree::with_node_capacity(lc, ic);
        let mut m = BTreeMap::new();
        for i in 0..60u64 {
            let k = format!("k{:03}", i * 2).into_bytes();
            t.insert(&k, i + 1, &g);
            m.insert(k, i + 1);
        }
        t.check_invariants(&g);
        let mut probes: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"k".to_vec(),
            b"k000".to_vec(),
            b"k001".to_vec(),
            b"k050".to_vec(),
            b"k051".to_vec(),
            b"k060".to_vec(),
            b"k118".to_vec(),
            b"k119".to_vec(),
            b"z".to_vec(),
        ];
        if cfg!(miri) {
            probes.retain(|p| [&b"k"[..], b"k001", b"k060", b"k118"].contains(&&p[..]));
        }
        for a in &probes {
            for b in &probes {
                for lo in bounds(a) {
                    for hi in bounds(b) {
                        for rev in [false, true] {
                            let got = collect(&t, lo, hi, rev, &g);
                            let want = model_range(&m, lo, hi, rev);
                            assert_eq!(got, want, "lo {lo:?} hi {hi:?} rev {rev}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn scan_stops_early_and_reports_leaves() {
    let (_ep, local) = epoch();
    let g = local.pin();
    let t = BTree::with_node_capacity(2, 3);
    for i in 0..100u64 {
        t.insert(&i.to_be_bytes(), i + 1, &g);
    }
    for rev in [false, true] {
        let mut seen = Vec::new();
        let mut leaves = Vec::new();
        t.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            rev,
            &g,
            |l, v| leaves.push((l, v)),
            |k, _| {
                seen.push(k.to_vec());
                seen.len() < 7
            },
        );
        assert_eq!(seen.len(), 7);
        // Leaves of capacity 2: 7 keys span at least 4 leaves, at most 7.
        assert!((4..=7).contains(&leaves.len()), "{} leaves", leaves.len());
        for (l, v) in &leaves {
            assert_eq!(l.version(), *v);
        }
        let first = if rev { 99u64 } else { 0 };
        assert_eq!(seen[0], first.to_be_bytes());
    }
    // An empty range inside one leaf still reports that leaf.
    let mut leaves = 0;
    let lo = 5u64.to_be_bytes();
    t.scan(
        Bound::Excluded(&lo[..]),
        Bound::Excluded(&lo[..]),
        false,
        &g,
        |_, _| leaves += 1,
        |_, _| panic!("nothing in range"),
    );
    assert!(leaves >= 1);
}

/// The node-set guarantee for scans: after a scan, inserting any key inside
/// the scanned range changes the version of one of the reported leaves.
#[test]
fn scan_leaves_cover_the_range() {
    let (_ep, local) = epoch();
    let g = local.pin();
    let t = BTree::with_node_capacity(3, 3);
    for i in (0..200u64).step_by(4) {
        t.insert(&i.to_be_bytes(), i + 1, &g);
    }
    for (a, b, rev) in [
        (10u64, 90u64, false),
        (10, 90, true),
        (0, 300, false),
        (33, 34, true),
    ] {
        let stride = if cfg!(miri) { 7 } else { 1 };
        for probe in (a..=b).step_by(stride) {
            let mut leaves = Vec::new();
            let (lo, hi) = (a.to_be_bytes(), b.to_be_bytes());
            t.scan(
                Bound::Included(&lo[..]),
                Bound::Included(&hi[..]),
                rev,
                &g,
                |l, v| leaves.push((l, v)),
                |_, _| true,
            );
            let key = probe.to_be_bytes();
            if let Insert::Inserted { .. } = t.insert(&key, 7, &g) {
                assert!(
                    leaves.iter().any(|(l, v)| l.version() != *v),
                    "insert of {probe} in [{a}, {b}] not seen by the node set"
                );
                assert!(t.remove(&key, 7, &g));
            }
        }
    }
    t.check_invariants(&g);
}

/// A leaf's key range can grow after a scan read the fences above it (its
/// neighbour is unlinked), and keys can be inserted into the grown part
/// before the scan reads the leaf. The scan must still hand out only the keys
/// within the fences it descended by, or it repeats them in the next step.
/// The hook makes that interleaving happen in the middle of the descent.
fn stale_fence_case(reverse: bool) {
    let (_ep, local) = epoch();
    let g = local.pin();
    let mut triggered = 0;
    let stride = if cfg!(miri) { 23 } else { 1 };
    for start in (0..160u64).step_by(stride) {
        // Sequential inserts: full leaves of 4, inner nodes of fan-out 2..4.
        let t = BTree::with_node_capacity(4, 3);
        for k in 0..160u64 {
            t.insert(&k.to_be_bytes(), k + 1, &g);
        }
        let leaf_parent_depth = height(&t) - 2;
        // Raw pointers: the hook must be 'static.
        let (tr, gr) = (&t as *const BTree, &g as *const Guard<'_> as *const u8);
        let fired = std::rc::Rc::new(std::cell::Cell::new(false));
        let fired2 = fired.clone();
        SCAN_HOOK.with(|h| {
            *h.borrow_mut() = Some(Box::new(move |depth, fence_lo, fence_hi| {
                let fence = if reverse { fence_lo } else { fence_hi };
                let Some(f) = fence.filter(|_| depth == leaf_parent_depth) else {
                    return depth >= leaf_parent_depth;
                };
                // SAFETY: the tree and the guard outlive the scan that runs
                // this hook.
                let (t, g) = unsafe { (&*tr, &*(gr as *const Guard<'_>)) };
                // Unlink everything beyond the fence, so that the leaf
                // parent's first (last) child now covers down to -inf (up to
                // +inf); make room in that child, then insert a key beyond
                // the old fence into it.
                let (beyond, within, extreme) = if reverse {
                    (
                        collect(t, Bound::Unbounded, Bound::Excluded(&f), false, g),
                        collect(t, Bound::Included(&f), Bound::Unbounded, false, g),
                        vec![],
                    )
                } else {
                    (
                        collect(t, Bound::Included(&f), Bound::Unbounded, false, g),
                        collect(t, Bound::Unbounded, Bound::Excluded(&f), true, g),
                        vec![0xff; 8],
                    )
                };
                for (k, v) in beyond {
                    assert!(t.remove(&k, v, g));
                }
                assert!(t.remove(&within[0].0, within[0].1, g));
                assert!(matches!(
                    t.insert(&extreme, 999, g),
                    Insert::Inserted { split: false, .. }
                ));
                fired2.set(true);
                true
            }));
        });
        let at = start.to_be_bytes();
        let got = if reverse {
            collect(&t, Bound::Unbounded, Bound::Included(&at), true, &g)
        } else {
            collect(&t, Bound::Included(&at), Bound::Unbounded, false, &g)
        };
        SCAN_HOOK.with(|h| h.borrow_mut().take());
        if fired.get() {
            triggered += 1;
        }
        for w in got.windows(2) {
            assert!(
                if reverse {
                    w[0].0 > w[1].0
                } else {
                    w[0].0 < w[1].0
                },
                "scan from {start} (reverse: {reverse}): {:?} then {:?}",
                w[0].0,
                w[1].0
            );
        }
        t.check_invariants(&g);
    }
    assert!(
        triggered * stride > 10,
        "the hook fired only {triggered} times"
    );
}

#[test]
fn scan_ignores_keys_beyond_stale_fences() {
    stale_fence_case(false);
}

#[test]
fn reverse_scan_ignores_keys_beyond_stale_fences() {
    stale_fence_case(true);
}

#[derive(Clone, Debug)]
enum Op {
    Insert(Vec<u8>, u64),
    Remove(Vec<u8>, bool),
    Replace(Vec<u8>, bool, u64),
    Get(Vec<u8>),
    Scan(Bound<Vec<u8>>, Bound<Vec<u8>>, bool, usize),
}

fn key_strategy() -> impl Strategy<Value = Vec<u8>> {
    let alpha = prop::sample::select(vec![0u8, 1, b'a', b'b', 0xff]);
    let prefix = prop::sample::select(vec![
        b"".to_vec(),
        b"abcdefg".to_vec(),
        b"abcdefgh".to_vec(),
        b"abcdefgh\0".to_vec(),
        b"abcdefghijklmnop".to_vec(),
    ]);
    (prefix, prop::collection::vec(alpha, 0..4)).prop_map(|(mut p, s)| {
        p.extend(s);
        p
    })
}

fn bound_strategy() -> impl Strategy<Value = Bound<Vec<u8>>> {
    prop_oneof![
        key_strategy().prop_map(Bound::Included),
        key_strategy().prop_map(Bound::Excluded),
        Just(Bound::Unbounded),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (key_strategy(), 1..1000u64).prop_map(|(k, v)| Op::Insert(k, v)),
        2 => (key_strategy(), any::<bool>()).prop_map(|(k, b)| Op::Remove(k, b)),
        1 => (key_strategy(), any::<bool>(), 1..1000u64).prop_map(|(k, b, v)| Op::Replace(k, b, v)),
        1 => key_strategy().prop_map(Op::Get),
        1 => (bound_strategy(), bound_strategy(), any::<bool>(), 1..50usize)
            .prop_map(|(l, h, r, n)| Op::Scan(l, h, r, n)),
    ]
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 1000 },
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]
    #[test]
    fn matches_btreemap(
        caps in (2usize..=4, 3usize..=4),
        ops in prop::collection::vec(op_strategy(), 1..if cfg!(miri) { 60 } else { 300 }),
    ) {
        let (ep, local) = epoch();
        let t = BTree::with_node_capacity(caps.0, caps.1);
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        for (step, op) in ops.iter().enumerate() {
            let g = local.pin();
            match op {
                Op::Insert(k, v) => {
                    let r = t.insert(k, *v, &g);
                    match m.get(k) {
                        Some(&old) => prop_assert_eq!(r, Insert::Exists(old)),
                        None => {
                            let Insert::Inserted { leaf, before, after, .. } = r else {
                                return Err(TestCaseError::fail(format!("{r:?} for absent key")));
                            };
                            prop_assert_ne!(before, after);
                            prop_assert_eq!(leaf.version(), after);
                            m.insert(k.clone(), *v);
                        }
                    }
                }
                Op::Remove(k, right) => {
                    let cur = m.get(k).copied();
                    let expected = if *right { cur.unwrap_or(1) } else { cur.map_or(1, |c| c + 1000) };
                    let r = t.remove(k, expected, &g);
                    prop_assert_eq!(r, cur == Some(expected));
                    if r {
                        m.remove(k);
                    }
                }
                Op::Replace(k, right, new) => {
                    let cur = m.get(k).copied();
                    let expected = if *right { cur.unwrap_or(1) } else { cur.map_or(1, |c| c + 1000) };
                    let r = t.replace(k, expected, *new, &g);
                    prop_assert_eq!(r, cur == Some(expected));
                    if r {
                        m.insert(k.clone(), *new);
                    }
                }
                Op::Get(k) => {
                    match (t.get(k, &g), m.get(k)) {
                        (Lookup::Found(v), Some(&w)) => prop_assert_eq!(v, w),
                        (Lookup::Missing { leaf, version }, None) => prop_assert_eq!(leaf.version(), version),
                        (r, w) => return Err(TestCaseError::fail(format!("get {k:?}: {r:?} vs {w:?}"))),
                    }
                }
                Op::Scan(lo, hi, rev, limit) => {
                    let mut got = Vec::new();
                    t.scan(as_ref(lo), as_ref(hi), *rev, &g, |_, _| {}, |k, v| {
                        got.push((k.to_vec(), v));
                        got.len() < *limit
                    });
                    let mut want = model_range(&m, as_ref(lo), as_ref(hi), *rev);
                    want.truncate(*limit);
                    prop_assert_eq!(got, want, "step {}", step);
                }
            }
            drop(g);
            if step % 16 == 0 {
                ep.tick();
                local.collect();
            }
        }
        let g = local.pin();
        t.check_invariants(&g);
        prop_assert_eq!(collect(&t, Bound::Unbounded, Bound::Unbounded, false, &g),
            model_range(&m, Bound::Unbounded, Bound::Unbounded, false));
        prop_assert_eq!(t.len_slow(&g), m.len());
    }
}

/// Two writers and a reader on a tiny tree: under Miri this checks the
/// optimistic protocol for data races and use-after-free with weak-memory
/// emulation; natively it is a quick smoke test.
#[test]
fn concurrent_smoke() {
    let ep = Epochs::new(3, 25);
    let t = BTree::with_node_capacity(2, 3);
    let rounds: u64 = if cfg!(miri) { 40 } else { 5000 };
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (t, ep) = (&t, &ep);
            s.spawn(move || {
                let local = ep.register().unwrap();
                for i in 0..rounds {
                    let g = local.pin();
                    let k = (w + 2 * (i % 8)).to_be_bytes();
                    if let Insert::Exists(v) = t.insert(&k, i + 1, &g) {
                        assert!(t.remove(&k, v, &g));
                    }
                    drop(g);
                    if i % 8 == 0 {
                        ep.tick();
                    }
                }
            });
        }
        let (t, ep) = (&t, &ep);
        s.spawn(move || {
            let local = ep.register().unwrap();
            for _ in 0..rounds {
                let g = local.pin();
                let mut prev: Option<Vec<u8>> = None;
                t.scan(
                    Bound::Unbounded,
                    Bound::Unbounded,
                    false,
                    &g,
                    |_, _| {},
                    |k, v| {
                        assert!(v >= 1);
                        if let Some(p) = &prev {
                            assert!(p.as_slice() < k);
                        }
                        prev = Some(k.to_vec());
                        true
                    },
                );
                let _ = t.get(&3u64.to_be_bytes(), &g);
            }
        });
    });
    let local = ep.register().unwrap();
    let g = local.pin();
    t.check_invariants(&g);
}

/// `Slots::lower_bound` and `Slots::upper_bound` (the inner nodes'
/// routing) against a plain search over the same sorted keys,
/// for slot arrays of several sizes (a power of two and not, and wider
/// than [`node::Slots::lower_bound`]'s short search), every fill from
/// empty to full, and keys built to hit each of its paths: prefixes
/// that differ, the same prefix with other lengths, and long keys that
/// share their first 8 bytes, and prefixes of all-ones bytes, the vacant
/// slots' very prefix.
fn lower_bound_matches_memcmp_order<const N: usize>(keys: &[Vec<u8>], probes: &[Vec<u8>]) {
    let mut sorted: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    sorted.sort();
    sorted.dedup();
    for fill in 0..=N.min(sorted.len()) {
        let slots = node::Slots::<N>::new();
        let present = &sorted[..fill];
        let copies: Vec<node::OwnedKey> = present.iter().map(|k| node::OwnedKey::new(k)).collect();
        for (i, &k) in copies.iter().enumerate() {
            slots.set(i, k);
        }
        let vacant: [&[u8]; 4] = [&[0xFF; 7], &[0xFF; 8], &[0xFF; 9], &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0]];
        for p in probes
            .iter()
            .map(|p| &p[..])
            .chain(present.iter().copied())
            .chain(vacant)
        {
            let want = present.partition_point(|k| *k < p);
            let found = want < fill && present[want] == p;
            assert_eq!(
                slots.lower_bound(fill, &SKey::new(p)),
                (want, found),
                "N {N}, fill {fill}, probe {p:?}, keys {present:?}"
            );
            assert_eq!(
                slots.upper_bound(fill, &SKey::new(p)),
                present.partition_point(|k| *k <= p),
                "upper bound: N {N}, fill {fill}, probe {p:?}, keys {present:?}"
            );
        }
        for k in copies {
            // SAFETY: made above, never linked into a tree.
            unsafe { k.free() };
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn lower_bound_agrees_with_a_plain_search(
        keys in proptest::collection::vec(
            (0u8..3, proptest::collection::vec(0u8..4, 0..12)), 0..40),
        probes in proptest::collection::vec(
            (0u8..3, proptest::collection::vec(0u8..4, 0..12)), 1..20),
        all_ones in proptest::bool::ANY,
    ) {
        // A small alphabet and a shared first byte make equal prefixes,
        // prefix relations and long ties common; 0xFF makes the vacant
        // slots' prefix.
        let b = |x: u8| if x == 3 { 0xFF } else { x };
        let mk = |v: &[(u8, Vec<u8>)]| -> Vec<Vec<u8>> {
            v.iter().map(|(h, t)| {
                let mut k = vec![if *h == 2 { 0xFF } else { *h }];
                k.extend(t.iter().map(|&x| b(x)));
                k
            }).collect()
        };
        let (mut keys, probes) = (mk(&keys), mk(&probes));
        if all_ones {
            keys.extend([vec![0xFF; 8], vec![0xFF; 10]]);
        }
        lower_bound_matches_memcmp_order::<3>(&keys, &probes);
        lower_bound_matches_memcmp_order::<8>(&keys, &probes);
        lower_bound_matches_memcmp_order::<32>(&keys, &probes);
        // Wider than 32: fills up to 32 take the short search, the others
        // the full one.
        lower_bound_matches_memcmp_order::<40>(&keys, &probes);
        lower_bound_matches_memcmp_order::<256>(&keys, &probes);
    }
}

/// Ops for the hinted-insert model test: runs of ascending keys (what the
/// hint is for), single inserts anywhere, and removals (which unlink
/// leaves, the case that makes an old hint's leaf obsolete).
#[derive(Debug, Clone)]
enum HintOp {
    /// Insert `n` keys `base, base+1, ...` (8-byte big-endian, plus a
    /// suffix making some of them long keys) with the hint.
    Run(u64, u8, bool),
    Remove(u64, bool),
    /// Drop the guard (and with it the hint), let the epoch move on.
    Repin,
}

fn hint_key(i: u64, long: bool) -> Vec<u8> {
    let mut k = (i * 4).to_be_bytes().to_vec();
    if long {
        k.extend_from_slice(b"suffix");
    }
    k
}

fn hint_op_strategy() -> impl Strategy<Value = HintOp> {
    prop_oneof![
        4 => (0..400u64, 1..20u8, prop::bool::weighted(0.2)).prop_map(|(b, n, l)| HintOp::Run(b, n, l)),
        2 => (0..420u64, prop::bool::weighted(0.2)).prop_map(|(k, l)| HintOp::Remove(k, l)),
        1 => Just(HintOp::Repin),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 300 },
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]
    /// `insert_hinted` gives the same answers and the same tree as the model,
    /// whether the hint is used, stale (its leaf changed, split or was
    /// unlinked) or cleared; the leaf it reports carries the version it says.
    #[test]
    fn hinted_inserts_match_btreemap(
        caps in (2usize..=5, 3usize..=4),
        ops in prop::collection::vec(hint_op_strategy(), 1..if cfg!(miri) { 20 } else { 120 }),
    ) {
        let (ep, local) = epoch();
        let t = BTree::with_node_capacity(caps.0, caps.1);
        let mut m: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
        let mut hint = InsertHint::default();
        let mut g = local.pin();
        let mut v = 1u64;
        for op in &ops {
            match op {
                HintOp::Run(base, n, long) => {
                    for i in *base..*base + *n as u64 {
                        let k = hint_key(i, *long);
                        v += 1;
                        let r = t.insert_hinted(&k, v, &g, &mut hint);
                        match m.get(&k) {
                            Some(&old) => prop_assert_eq!(r, Insert::Exists(old)),
                            None => {
                                let Insert::Inserted { leaf, before, after, .. } = r else {
                                    return Err(TestCaseError::fail(format!("{r:?} for absent key")));
                                };
                                prop_assert_ne!(before, after);
                                prop_assert_eq!(leaf.version(), after);
                                m.insert(k, v);
                            }
                        }
                    }
                }
                HintOp::Remove(i, long) => {
                    let k = hint_key(*i, *long);
                    if let Some(old) = m.remove(&k) {
                        prop_assert!(t.remove(&k, old, &g));
                    }
                }
                HintOp::Repin => {
                    hint.clear();
                    drop(g);
                    ep.tick();
                    local.collect();
                    g = local.pin();
                }
            }
        }
        t.check_invariants(&g);
        prop_assert_eq!(collect(&t, Bound::Unbounded, Bound::Unbounded, false, &g),
            model_range(&m, Bound::Unbounded, Bound::Unbounded, false));
        for (k, want) in &m {
            match t.get(k, &g) {
                Lookup::Found(got) => prop_assert_eq!(got, *want),
                r => return Err(TestCaseError::fail(format!("get {k:?}: {r:?}"))),
            }
        }
    }
}

/// An ascending run of inserts in the middle of full leaves (a TPC-C
/// district's newest orders, followed by the next district's oldest)
/// splits where the run is: the run's keys then append at the end of their
/// own leaf and fill it, instead of shifting the next district's keys at
/// every insert and leaving half-full leaves behind. The run is the leaf's
/// own record of its latest insert, so single inserts of one transaction
/// each (ORDER's rows) make one as much as a transaction's hinted run does
/// (ORDER_LINE's).
#[test]
fn an_ascending_run_in_a_full_leaf_splits_at_the_run() {
    for hinted in [false, true] {
        let (_ep, local) = epoch();
        let g = local.pin();
        let t = BTree::new();
        let key = |d: u8, o: u32| {
            let mut k = vec![d];
            k.extend_from_slice(&o.to_be_bytes());
            k
        };
        // One full leaf: district 1's orders 0..16, then district 2's.
        for o in 0..16 {
            for d in [1, 2] {
                assert!(matches!(t.insert(&key(d, o), 1, &g), Insert::Inserted { .. }));
            }
        }
        assert_eq!(t.node_count_slow(&g), 1);
        // District 1 grows by 300 keys: runs of ten, each one transaction's
        // hint, or single inserts.
        let runs = 30;
        for r in 0..runs {
            let mut hint = InsertHint::default();
            for o in 0..10 {
                let k = key(1, 16 + r * 10 + o);
                let ins = if hinted {
                    t.insert_hinted(&k, 1, &g, &mut hint)
                } else {
                    t.insert(&k, 1, &g)
                };
                assert!(matches!(ins, Insert::Inserted { .. }));
            }
        }
        t.check_invariants(&g);
        assert_eq!(t.len_slow(&g), 32 + runs as usize * 10);
        // 332 keys. Split at the run, the leaves behind it are 7/8 full (28
        // keys): 14 nodes with the root. Split in the middle, they hold
        // about 16 keys: 21 nodes.
        let nodes = t.node_count_slow(&g);
        assert!(nodes <= 14, "{nodes} nodes for 332 keys (hinted: {hinted})");
    }
}

/// A leaf's record of its latest insert's slot moves with the keys that
/// removals shift, and is forgotten when that key goes.
#[test]
fn a_leafs_latest_insert_slot_follows_removals() {
    let (_ep, local) = epoch();
    let g = local.pin();
    let t = BTree::new();
    let last = |k: &[u8]| {
        let (_, leaf, _) = t.get_with_leaf(k, &g);
        // SAFETY: a leaf of this tree, reached while pinned.
        unsafe { &*leaf.0 }.h.last.load(Relaxed)
    };
    for k in [10u8, 20, 30, 40] {
        assert!(matches!(t.insert(&[k], 1, &g), Insert::Inserted { .. }));
    }
    assert_eq!(last(&[10]), 3);
    // Slots 10, 20, 25, 30, 40.
    assert!(matches!(t.insert(&[25], 1, &g), Insert::Inserted { .. }));
    assert_eq!(last(&[10]), 2);
    // A removal after it leaves it, one before it moves it down.
    assert!(t.remove(&[40], 1, &g));
    assert_eq!(last(&[10]), 2);
    assert!(t.remove(&[10], 1, &g));
    assert_eq!(last(&[20]), 1);
    // Its own removal forgets it.
    assert!(t.remove(&[25], 1, &g));
    assert_eq!(last(&[20]), NO_SLOT);
}

/// Hinted inserts from two threads into interleaved key ranges, while a
/// third thread removes keys (unlinking leaves and changing the ranges the
/// hints remember): every key inserted and not removed is found, in order.
#[test]
fn concurrent_hinted_inserts() {
    let ep = Epochs::new(3, 25);
    let t = BTree::with_node_capacity(3, 3);
    let rounds: u64 = if cfg!(miri) { 30 } else { 3000 };
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (t, ep) = (&t, &ep);
            s.spawn(move || {
                let local = ep.register().unwrap();
                let mut i = 0u64;
                while i < rounds {
                    let g = local.pin();
                    let mut hint = InsertHint::default();
                    // A run of up to 8 keys of this writer (keys interleave
                    // with the other writer's: w + 2 * j).
                    for _ in 0..8 {
                        let k = (w + 2 * i).to_be_bytes();
                        assert!(matches!(
                            t.insert_hinted(&k, i + 1, &g, &mut hint),
                            Insert::Inserted { .. }
                        ));
                        i += 1;
                    }
                    hint.clear();
                    drop(g);
                    if i.is_multiple_of(64) {
                        ep.tick();
                    }
                }
            });
        }
        let (t, ep) = (&t, &ep);
        s.spawn(move || {
            let local = ep.register().unwrap();
            // Remove the keys of multiples of 3 of writer 0 as they appear.
            let mut next = 0u64;
            let mut spins = 0u64;
            while next < rounds && spins < 50_000_000 {
                spins += 1;
                let g = local.pin();
                let k = (2 * next).to_be_bytes();
                if let Lookup::Found(v) = t.get(&k, &g) {
                    assert!(t.remove(&k, v, &g));
                    next += 3;
                }
                drop(g);
            }
        });
    });
    let local = ep.register().unwrap();
    let g = local.pin();
    t.check_invariants(&g);
    let mut want = Vec::new();
    for j in 0..2 * rounds {
        let (w, i) = (j % 2, j / 2);
        if w == 0 && i % 3 == 0 {
            continue;
        }
        want.push((j.to_be_bytes().to_vec(), i + 1));
    }
    assert_eq!(
        collect(&t, Bound::Unbounded, Bound::Unbounded, false, &g),
        want
    );
}

/// One hint, two trees (a transaction inserting into several tables keeps
/// one hint): a hint made in one tree is never used in the other, whose
/// keys here fall inside the first tree's remembered range.
#[test]
fn a_hint_from_another_tree_is_ignored() {
    let (_ep, local) = epoch();
    let a = BTree::with_node_capacity(4, 3);
    let b = BTree::with_node_capacity(4, 3);
    let g = local.pin();
    let mut hint = InsertHint::default();
    for i in 0..200u64 {
        let t = if i % 3 == 0 { &b } else { &a };
        let k = i.to_be_bytes();
        assert!(matches!(
            t.insert_hinted(&k, i + 1, &g, &mut hint),
            Insert::Inserted { .. }
        ));
    }
    a.check_invariants(&g);
    b.check_invariants(&g);
    let want = |m: u64| -> Vec<(Vec<u8>, u64)> {
        (0..200u64)
            .filter(|i| (i % 3 == 0) == (m == 0))
            .map(|i| (i.to_be_bytes().to_vec(), i + 1))
            .collect()
    };
    assert_eq!(
        collect(&a, Bound::Unbounded, Bound::Unbounded, false, &g),
        want(1)
    );
    assert_eq!(
        collect(&b, Bound::Unbounded, Bound::Unbounded, false, &g),
        want(0)
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 3 } else { 200 },
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]
    /// `get_batch` answers every key as `get` does (0 for an absent key), in
    /// trees of every height, for short and long keys, duplicates among the
    /// probes and more probes than one batch takes (the rest untouched).
    #[test]
    fn get_batch_matches_get(
        caps in (2usize..=6, 3usize..=6),
        keys in prop::collection::vec(key_strategy(), 0..if cfg!(miri) { 40 } else { 400 }),
        probes in prop::collection::vec(key_strategy(), 0..BATCH_MAX + 4),
    ) {
        let (_ep, local) = epoch();
        let t = BTree::with_node_capacity(caps.0, caps.1);
        let g = local.pin();
        for (i, k) in keys.iter().enumerate() {
            t.insert(k, i as u64 + 1, &g);
        }
        // Probe present keys too, not only random ones.
        let mut probes = probes;
        for (i, k) in keys.iter().enumerate().take(BATCH_MAX / 2) {
            probes.insert((i * 7) % (probes.len() + 1), k.clone());
        }
        let refs: Vec<&[u8]> = probes.iter().map(|k| &k[..]).collect();
        let mut out = vec![u64::MAX; refs.len()];
        t.get_batch(&refs, &mut out, &g);
        for (i, k) in refs.iter().enumerate() {
            if i >= BATCH_MAX {
                prop_assert_eq!(out[i], u64::MAX, "probe {} past the batch was written", i);
                continue;
            }
            let want = match t.get(k, &g) {
                Lookup::Found(v) => v,
                Lookup::Missing { .. } => 0,
            };
            prop_assert_eq!(out[i], want, "probe {:?}", k);
        }
    }
}

/// `get_batch` while other threads insert and remove around the keys it
/// looks up (splitting and unlinking the leaves on its paths): a key that is
/// present throughout is answered with its value or with 0 ("look it up
/// alone"), never with another value, and most of the time found.
#[test]
fn concurrent_get_batch() {
    let ep = Epochs::new(3, 25);
    let t = BTree::with_node_capacity(3, 3);
    let stable = |i: u64| (i * 16).to_be_bytes();
    {
        let local = ep.register().unwrap();
        let g = local.pin();
        for i in 0..200u64 {
            t.insert(&stable(i), i + 1, &g);
        }
    }
    let rounds: u64 = if cfg!(miri) { 20 } else { 5000 };
    let found = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (t, ep) = (&t, &ep);
            s.spawn(move || {
                let local = ep.register().unwrap();
                // Churn keys between the stable ones.
                for r in 0..rounds {
                    let g = local.pin();
                    let k = ((r * 7 + w * 3) % 200 * 16 + 1 + w).to_be_bytes();
                    match t.get(&k, &g) {
                        Lookup::Found(v) => assert!(t.remove(&k, v, &g)),
                        Lookup::Missing { .. } => {
                            t.insert(&k, 1_000_000 + r, &g);
                        }
                    }
                    drop(g);
                    if r % 64 == 0 {
                        ep.tick();
                    }
                }
            });
        }
        let (t, ep, found) = (&t, &ep, &found);
        s.spawn(move || {
            let local = ep.register().unwrap();
            for r in 0..rounds {
                let g = local.pin();
                let ids: Vec<u64> = (0..BATCH_MAX as u64)
                    .map(|j| (r * 13 + j * 11) % 200)
                    .collect();
                let keys: Vec<[u8; 8]> = ids.iter().map(|&i| stable(i)).collect();
                let out = batch_of(t, &keys, &g);
                for (&i, &v) in ids.iter().zip(&out) {
                    assert!(v == 0 || v == i + 1, "key {i}: {v}");
                    if v != 0 {
                        found.fetch_add(1, Relaxed);
                    }
                }
            }
        });
    });
    let n = found.load(Relaxed);
    assert!(
        n * 2 > rounds * BATCH_MAX as u64,
        "only {n} of {} lookups answered",
        rounds * BATCH_MAX as u64
    );
}

/// Nodes at full width under concurrency: two writers insert 60,000 keys
/// each, interleaved, so that leaves' parents of 256 separators fill and
/// split (and a root forms above them) while a reader looks a preloaded
/// set up, alone and in batches. Every preloaded key is found with its
/// value or, by `get_batch`, reported for a lone look-up, never another
/// value; afterwards the tree is sound and holds every key.
#[test]
#[cfg_attr(miri, ignore)]
fn full_width_concurrent_splits_keep_lookups_right() {
    let ep = Epochs::new(3, 25);
    let t = BTree::new();
    let stable = |i: u64| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1).to_be_bytes();
    let fresh = |w: u64, i: u64| ((i * 2 + w).wrapping_mul(0xD1B5_4A32_D192_ED03) & !1).to_be_bytes();
    let (stable_n, per_writer) = (5_000u64, 60_000u64);
    {
        let local = ep.register().unwrap();
        let g = local.pin();
        for i in 0..stable_n {
            t.insert(&stable(i), i + 1, &g);
        }
    }
    let done = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for w in 0..2u64 {
            let (t, ep, done) = (&t, &ep, &done);
            s.spawn(move || {
                let local = ep.register().unwrap();
                for i in 0..per_writer {
                    let g = local.pin();
                    assert!(matches!(
                        t.insert(&fresh(w, i), i + 1, &g),
                        Insert::Inserted { .. }
                    ));
                    drop(g);
                    if i % 256 == 0 {
                        ep.tick();
                    }
                }
                done.fetch_add(1, Relaxed);
            });
        }
        let (t, ep, done) = (&t, &ep, &done);
        s.spawn(move || {
            let local = ep.register().unwrap();
            let mut r = 0u64;
            while done.load(Relaxed) < 2 {
                let g = local.pin();
                let ids: Vec<u64> = (0..BATCH_MAX as u64)
                    .map(|j| (r * 131 + j * 17) % stable_n)
                    .collect();
                let keys: Vec<[u8; 8]> = ids.iter().map(|&i| stable(i)).collect();
                let out = batch_of(t, &keys, &g);
                for (&i, &v) in ids.iter().zip(&out) {
                    assert!(v == 0 || v == i + 1, "get_batch of stable key {i}: {v}");
                    assert_eq!(t.get(&stable(i), &g), Lookup::Found(i + 1), "get of stable key {i}");
                }
                r += 1;
            }
        });
    });
    let local = ep.register().unwrap();
    let g = local.pin();
    t.check_invariants(&g);
    assert!(height(&t) >= 3, "a three-level tree expected, got {}", height(&t));
    assert_eq!(t.len_slow(&g), (stable_n + 2 * per_writer) as usize);
    for w in 0..2u64 {
        for i in 0..per_writer {
            assert_eq!(t.get(&fresh(w, i), &g), Lookup::Found(i + 1));
        }
    }
}

/// A scan steps to the next leaf through the last leaf's parent while that
/// parent is unchanged (`BTree::scan_sibling`); splits and unlinks under
/// it, made from inside the scan's visitor just ahead of the scan, send it
/// back to a descent from the root. Either way every key that was there
/// before the scan and is never removed is handed out once, in order.
#[test]
fn scan_steps_between_siblings_across_splits_and_unlinks() {
    let (_ep, local) = epoch();
    let g = local.pin();
    for rev in [false, true] {
        let t = BTree::with_node_capacity(4, 4);
        let originals: Vec<u64> = (0..4000u64).step_by(10).collect();
        for &i in &originals {
            t.insert(&i.to_be_bytes(), i + 1, &g);
        }
        assert!(height(&t) >= 4, "deep enough for siblings at every level");
        let mut removed = std::collections::HashSet::new();
        let mut seen = Vec::new();
        t.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            rev,
            &g,
            |_, _| {},
            |k, v| {
                let i = u64::from_be_bytes(k.try_into().unwrap());
                assert_eq!(v, i + 1);
                seen.push(i);
                let ahead = |d: u64| if rev { i.checked_sub(d) } else { Some(i + d) };
                if i % 10 == 0 {
                    // Split the leaves about to be reached.
                    for d in [15, 25, 35] {
                        if let Some(x) = ahead(d) {
                            t.insert(&x.to_be_bytes(), x + 1, &g);
                        }
                    }
                    // Now and then empty a stretch further on, so that its
                    // leaves are unlinked.
                    if i % 400 == 0 {
                        for d in (210..=240).step_by(10) {
                            if let Some(x) = ahead(d) {
                                if t.remove(&x.to_be_bytes(), x + 1, &g) {
                                    removed.insert(x);
                                }
                            }
                        }
                    }
                }
                true
            },
        );
        for w in seen.windows(2) {
            assert!(
                if rev { w[0] > w[1] } else { w[0] < w[1] },
                "out of order: {} then {} (rev {rev})",
                w[0],
                w[1]
            );
        }
        let got: std::collections::HashSet<u64> = seen.iter().copied().collect();
        for i in originals.iter().filter(|i| !removed.contains(i)) {
            assert!(got.contains(i), "key {i} never removed was skipped (rev {rev})");
        }
        assert!(seen.iter().all(|i| i % 10 == 0 || i % 10 == 5));
        assert!(!removed.is_empty());
    }
}

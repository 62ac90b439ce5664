//! The ordered index: a concurrent B+-tree with optimistic lock coupling.
//!
//! [`BTree`] maps variable-length byte keys (memcmp order: a proper prefix
//! sorts first) to non-zero `u64` values (the engine stores record pointers).
//!
//! # Optimistic lock coupling
//!
//! The design follows Leis et al., "The ART of practical synchronization"
//! (DaMoN 2016). Every node carries a 64-bit *version word*:
//!
//! ```text
//!  63                                   2     1          0
//! +--------------------------------------+----------+--------+
//! |              counter                 | obsolete | locked |
//! +--------------------------------------+----------+--------+
//! ```
//!
//! * Readers never write shared memory. They read a node's version (waiting
//!   while it is locked, restarting from the root if it is obsolete), read the
//!   fields they need with atomic loads, and *validate* that the version is
//!   unchanged. A traversal validates the parent after reading the child's
//!   version (lock coupling), so the child it reached really covered the key.
//! * Writers take the lock bit with a compare-and-swap from the version they
//!   read optimistically ("upgrade"); if the node changed meanwhile the CAS
//!   fails and the operation restarts. Unlocking after a modification adds 4:
//!   the counter moves, so **every modification of a leaf (insert, remove,
//!   replace, split) changes its version**. A node that is unlinked is
//!   unlocked with the obsolete bit set and is never unlocked again.
//! * Inner nodes are split eagerly on the way down by inserts, so a leaf split
//!   always finds room in its (locked) parent. Writers never wait for a lock
//!   while holding one (they only try to upgrade), so there are no deadlocks.
//! * Leaves that become empty are unlinked together with any ancestors left
//!   without children; a root with a single child is replaced by that child.
//!   Under-full nodes are otherwise not merged.
//!
//! # Node layout
//!
//! Leaves and inner nodes hold up to [`LEAF_MAX`] / [`INNER_MAX`] slots. A slot
//! keeps the key's first 8 bytes as a big-endian `u64` (zero padded), a length
//! class (`min(len, 9)`) and, for a key longer than 8 bytes, a pointer to an
//! immutable heap copy of the full key (Masstree-like): binary search compares
//! the inline parts as machine words and only looks at the key copy when two
//! keys longer than 8 bytes share their prefix. A key of at most 8 bytes is
//! whole in its prefix and length class and has no copy (most of TPC-C's and
//! all of YCSB's keys): inserting or removing it allocates or frees nothing.
//! A node puts its values (children) first and its key pointers last, so the
//! prefetch of a node on the way down skips the lines only long keys need. Inner
//! nodes own their own separator copies (shortened to the shortest prefix of
//! the right half's first key that still exceeds the left half's last key), so
//! leaf and separator lifetimes are independent. Every field that a reader
//! loads without the lock is an atomic; optimistically read counts are clamped
//! to the array size, and vacated slots are nulled.
//!
//! # Silo's node set (phantom protection, Silo section 4.6)
//!
//! [`BTree::get`] of an absent key returns the leaf where the key would be and
//! the leaf's stable version; [`BTree::scan`] reports every leaf it examined
//! with its stable version; [`BTree::insert`] returns the leaf's versions just
//! before and just after its own change. A transaction records these
//! `(leaf, version)` pairs and checks at commit that [`LeafRef::version`] is
//! unchanged. That suffices because a leaf's key range can only *shrink* by a
//! split, which changes its version, and a key can only appear in the range
//! through an insert into that leaf, which changes its version too; an
//! unlinked leaf is obsolete, so its version never matches again. (A leaf's
//! range may grow when its neighbour is unlinked; that adds no key to the
//! range recorded.)
//!
//! # Reclamation
//!
//! Every operation takes a [`Guard`]: the caller is pinned in an epoch. Nodes,
//! key copies and separator copies that an operation unlinks are retired
//! through the guard ([`Guard::retire`]) and freed only once no thread pinned
//! early enough to have seen them can still be running. So any pointer an
//! optimistic reader loads from a node it reached is either still linked or
//! retired after the reader pinned: it is always allocated, and key copies are
//! never written after they are published. That is what makes the optimistic
//! reads memory-safe; the version check makes them correct.
//!
//! # Scans
//!
//! A scan does not follow sibling pointers. It descends to the leaf holding the
//! current bound, remembering the leaf's fences (the nearest separators on
//! either side of the path), copies the leaf's entries that are in range *and
//! within the fences* to a stack buffer, validates the leaf, hands them out,
//! and goes on from the upper fence (forward) or to just below the lower fence
//! (reverse): to the neighbouring child of the leaf's parent when the parent
//! is unchanged and both of the neighbour's fences are its separators
//! (`BTree::scan_sibling`), else by a descent from the root. The leaves
//! reported therefore cover the whole range
//! examined, and keys come out strictly ordered, each once, even while the
//! tree changes underneath. (Clamping to the fences matters: a fence read from
//! a higher ancestor may be stale by the time the leaf is read, because a
//! leaf's range grows without a version change when its neighbour is
//! unlinked, and keys inserted into the grown part belong to the next step.)

mod node;

/// The first 8 bytes of `key`, zero padded, as a big-endian word (two keys'
/// words compare as their first 8 bytes do), without a variable-length
/// copy (a call to memcpy): the index's own key prefix.
#[inline]
pub(crate) fn key_word(key: &[u8]) -> u64 {
    node::prefix_of(key).0
}
#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize};

use crate::epoch::Guard;

use node::{
    prefix_of, Header, Inner, KeyRef, Leaf, OwnedKey, Restart, SKey, LOCKED, LONG, NO_SLOT, OBSOLETE,
    STEP, VACANT,
};
pub use node::{INNER_MAX, LEAF_MAX};

/// Identifies a leaf, for a transaction's node set. Compare two `LeafRef`s
/// with `==` (pointer identity) and read the leaf's current version with
/// [`LeafRef::version`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafRef(*const Leaf);

// SAFETY: a LeafRef is only an address plus a method that does an atomic load
// of the leaf's version word; the leaf itself is shared by design (all its
// mutable fields are atomics).
unsafe impl Send for LeafRef {}
// SAFETY: as above.
unsafe impl Sync for LeafRef {}

impl LeafRef {
    /// Current version word of the leaf. It may include the lock or obsolete
    /// bit, so a leaf that is locked or was unlinked never compares equal to a
    /// stable version observed earlier; any modification since that version
    /// was observed makes it differ too.
    ///
    /// The caller must have been pinned (holding a [`Guard`]) continuously
    /// since it obtained this `LeafRef`, so that the leaf is still allocated.
    #[inline]
    pub fn version(&self) -> u64 {
        // SAFETY: per the documented contract the caller has stayed pinned
        // since the leaf was reachable, so it has not been freed.
        unsafe { (*self.0).h.version.load(Acquire) }
    }

    /// Raise the leaf's range stamp to `stamp` (the per-leaf hook; see
    /// [`BTree`]). Same pinning contract as [`LeafRef::version`].
    #[inline]
    pub fn raise_stamp(&self, stamp: u64) {
        // SAFETY: as in `version`.
        unsafe { (*self.0).stamp.fetch_max(stamp, SeqCst) };
    }

    /// The leaf's range stamp. Same pinning contract.
    #[inline]
    pub fn stamp(&self) -> u64 {
        // SAFETY: as in `version`.
        unsafe { (*self.0).stamp.load(SeqCst) }
    }
}

/// "This scan observed this range": the one interface phantom protection
/// goes through. An index reports each unit of key range it read (a B+-tree
/// leaf, with the leaf's version at the read, covering the whole range
/// examined, empty parts included) to the scan's observer. Silo's node set
/// records the pairs and re-checks the versions at commit (section 4.6);
/// SSN then raises the units' range stamps; a range-locking protocol would
/// lock them, and Cai et al.'s range OCC would register them.
pub trait RangeObserver {
    /// The scan read `leaf`'s part of the range at `version`.
    fn observe(&mut self, leaf: LeafRef, version: u64);
}

impl<F: FnMut(LeafRef, u64)> RangeObserver for F {
    #[inline]
    fn observe(&mut self, leaf: LeafRef, version: u64) {
        self(leaf, version)
    }
}

/// The observer of a scan that needs no phantom protection (snapshot
/// reads, checkpoints, recovery, no concurrency control).
pub struct Unobserved;

impl RangeObserver for Unobserved {
    #[inline]
    fn observe(&mut self, _: LeafRef, _: u64) {}
}

/// What protocols need of a table's ordered index: point lookups that say
/// where a missing key would be, inserts that report the leaf they changed,
/// conditional removes and replaces, and ordered scans that report the
/// ranges they observed. Values are record addresses (`u64`, never 0).
/// [`BTree`] is the first implementation; a hash index for point-only
/// tables and FOEDUS's Master-Tree are meant to be others (a table picks
/// its index at creation, [`crate::catalog`]).
pub trait OrderedIndex: Send + Sync {
    /// Look `key` up (see [`Lookup`]).
    fn get(&self, key: &[u8], g: &Guard<'_>) -> Lookup;
    /// Look `key` up and say in which leaf, at which version, whether the
    /// key is there or not.
    fn get_with_leaf(&self, key: &[u8], g: &Guard<'_>) -> (Option<u64>, LeafRef, u64);
    /// Look up to [`BATCH_MAX`] independent keys together: `out[i]` is the
    /// value of `keys[i]`, or 0 when it is absent or was not found for
    /// certain (a concurrent change): the caller looks such a key up alone.
    /// A hint for the cache as much as a lookup: an index that can overlap
    /// the lookups' misses does; the default looks each key up in turn.
    fn get_batch(&self, keys: &[&[u8]], out: &mut [u64], g: &Guard<'_>) {
        for (k, o) in keys.iter().zip(out.iter_mut()).take(BATCH_MAX) {
            *o = match self.get(k, g) {
                Lookup::Found(v) => v,
                Lookup::Missing { .. } => 0,
            };
        }
    }
    /// Insert `key -> value` if absent (see [`Insert`]).
    fn insert(&self, key: &[u8], value: u64, g: &Guard<'_>) -> Insert;
    /// [`insert`](OrderedIndex::insert), starting from where the insert
    /// that last updated `hint` went when `key` belongs there (see
    /// [`InsertHint`]). An index without hints just inserts.
    fn insert_hinted(
        &self,
        key: &[u8],
        value: u64,
        g: &Guard<'_>,
        hint: &mut InsertHint,
    ) -> Insert {
        let _ = hint;
        self.insert(key, value, g)
    }
    /// Remove `key` if it maps to `expected`.
    fn remove(&self, key: &[u8], expected: u64, g: &Guard<'_>) -> bool;
    /// Make `key` map to `new` if it maps to `expected`.
    fn replace(&self, key: &[u8], expected: u64, new: u64, g: &Guard<'_>) -> bool;
    /// Ordered scan of `[lo, hi]`, reporting each range unit read to
    /// `observer` before its entries; `f` returns false to stop.
    fn scan<F, O>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        g: &Guard<'_>,
        observer: O,
        f: F,
    ) where
        F: FnMut(&[u8], u64) -> bool,
        O: RangeObserver;
    /// The largest range stamp of range units no longer in the index.
    fn stamp_floor(&self) -> u64;
}

/// How many rows ahead a scan prefetches the records it is about to hand
/// out (see [`BTree::scan`]).
const SCAN_PREFETCH: usize = 4;
/// The bytes of each such record prefetched: two lines, a record's header
/// and the start of its value under every layout.
const SCAN_PREFETCH_BYTES: usize = 128;

impl OrderedIndex for BTree {
    #[inline]
    fn get(&self, key: &[u8], g: &Guard<'_>) -> Lookup {
        BTree::get(self, key, g)
    }
    #[inline]
    fn get_with_leaf(&self, key: &[u8], g: &Guard<'_>) -> (Option<u64>, LeafRef, u64) {
        BTree::get_with_leaf(self, key, g)
    }
    #[inline]
    fn get_batch(&self, keys: &[&[u8]], out: &mut [u64], g: &Guard<'_>) {
        BTree::get_batch(self, keys, out, g)
    }
    #[inline]
    fn insert(&self, key: &[u8], value: u64, g: &Guard<'_>) -> Insert {
        BTree::insert(self, key, value, g)
    }
    #[inline]
    fn insert_hinted(
        &self,
        key: &[u8],
        value: u64,
        g: &Guard<'_>,
        hint: &mut InsertHint,
    ) -> Insert {
        BTree::insert_hinted(self, key, value, g, hint)
    }
    #[inline]
    fn remove(&self, key: &[u8], expected: u64, g: &Guard<'_>) -> bool {
        BTree::remove(self, key, expected, g)
    }
    #[inline]
    fn replace(&self, key: &[u8], expected: u64, new: u64, g: &Guard<'_>) -> bool {
        BTree::replace(self, key, expected, new, g)
    }
    #[inline]
    fn scan<F, O>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        g: &Guard<'_>,
        observer: O,
        f: F,
    ) where
        F: FnMut(&[u8], u64) -> bool,
        O: RangeObserver,
    {
        BTree::scan(self, lo, hi, reverse, g, observer, f)
    }
    #[inline]
    fn stamp_floor(&self) -> u64 {
        BTree::stamp_floor(self)
    }
}

/// Result of [`BTree::get`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The key is present with this value.
    Found(u64),
    /// The key is absent; `leaf` is where it would be, at stable `version`
    /// (add it to the node set to detect a later insert of the key).
    Missing {
        /// The leaf whose key range holds the key.
        leaf: LeafRef,
        /// The leaf's version when the key was found absent.
        version: u64,
    },
}

/// Result of [`BTree::insert`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Insert {
    /// The key was absent and is now present.
    Inserted {
        /// The leaf that now holds the key.
        leaf: LeafRef,
        /// Stable version of the leaf the key was inserted into, just before
        /// the insert locked it (with `split`, the version of the leaf that
        /// was split, which is `leaf` or its new left neighbour).
        before: u64,
        /// Version of `leaf` just after the insert unlocked it; differs from
        /// `before`.
        after: u64,
        /// The insert split the leaf: node-set entries for the old leaf can
        /// not be carried forward.
        split: bool,
    },
    /// The key was present (nothing changed); its value.
    Exists(u64),
}

/// The most keys one [`OrderedIndex::get_batch`] call looks up (TPC-C's
/// NewOrder has at most 15 lines).
pub const BATCH_MAX: usize = 16;

/// Where an insert went: the leaf, its version just after the insert, and
/// the key range the descent gave it (`lo <= key < hi`, as `(prefix, length
/// class)` pairs of separators of at most 8 bytes, so that they order keys
/// exactly). The next insert whose key falls in that range, while the leaf's
/// version is still the one recorded (nobody changed the leaf since, so it
/// did not split and still owns the range: a leaf's range only grows, when
/// a neighbour is unlinked, unless it splits), goes straight to the leaf:
/// TPC-C's NewOrder inserts its 5-15 order lines in key order into one
/// leaf, and Silo's Masstree descends for each.
///
/// One hint serves one tree at a time: it names the tree, and an insert
/// into another tree ignores it (and replaces it after its descent).
///
/// The hint holds a raw leaf address: it is valid only while the thread
/// that made it stays pinned (a leaf unlinked meanwhile is freed once no
/// thread pinned before its unlinking remains). Keep one per transaction
/// attempt and [`clear`](InsertHint::clear) it when the guard goes.
pub struct InsertHint {
    /// The tree the hint is about (a hint from another table's tree is
    /// ignored).
    tree: *const BTree,
    leaf: *const Leaf,
    version: u64,
    lo: (u64, u8),
    hi: (u64, u8),
}

impl Default for InsertHint {
    fn default() -> Self {
        InsertHint {
            tree: ptr::null(),
            leaf: ptr::null(),
            version: 0,
            lo: (0, 0),
            hi: (0, 0),
        }
    }
}

impl InsertHint {
    /// Forget the leaf (the guard it was made under is going away).
    #[inline]
    pub fn clear(&mut self) {
        self.leaf = ptr::null();
    }
}

/// The smallest and largest `(prefix, length class)` pairs: no fence.
const NO_LO: (u64, u8) = (0, 0);
const NO_HI: (u64, u8) = (u64::MAX, u8::MAX);

/// A concurrent B+-tree over byte keys with `u64` values (see the module
/// docs). `Send + Sync`; every operation takes the caller's epoch [`Guard`].
///
/// # Range stamps (the per-leaf hook)
///
/// Each leaf carries one monotonic `u64` for the protocols, which the tree
/// keeps with the leaf's key range and gives no meaning of its own: raised
/// with [`LeafRef::raise_stamp`] (a maximum), read with [`LeafRef::stamp`].
/// It follows the range: a split copies it to the new leaf, and a leaf
/// unlinked because it became empty hands it to the tree's floor
/// ([`BTree::stamp_floor`]; the range goes to a neighbour, and there are no
/// sibling pointers to find which), so a reader of a range's stamp takes the
/// maximum of the leaf's and the floor. SSN uses it for its absence stamps
/// (the largest commit stamp of a transaction that saw part of the range
/// empty; an inserter orders itself after them).
pub struct BTree {
    root: AtomicPtr<Header>,
    leaf_cap: usize,
    inner_cap: usize,
    /// Range stamps of unlinked leaves.
    stamp_floor: AtomicU64,
    /// Levels of the tree (1: the root is a leaf), changed right after each
    /// root change. Only a hint, for [`BTree::get_batch`]: a reader may see
    /// it one off while the root changes, which costs time, not results.
    height: AtomicUsize,
}

impl Default for BTree {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for BTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BTree")
            .field("leaf_cap", &self.leaf_cap)
            .field("inner_cap", &self.inner_cap)
            .finish_non_exhaustive()
    }
}

/// View a header pointer as a leaf.
///
/// # Safety
/// `h` points to a live (linked or retired-not-freed) node whose `is_leaf()` is
/// true.
#[inline]
unsafe fn as_leaf<'a>(h: *const Header) -> &'a Leaf {
    // SAFETY: forwarded contract; Leaf is repr(C) with the header first.
    unsafe { &*(h as *const Leaf) }
}

/// View a header pointer as an inner node.
///
/// # Safety
/// `h` points to a live node whose `is_leaf()` is false.
#[inline]
unsafe fn as_inner<'a>(h: *const Header) -> &'a Inner {
    // SAFETY: forwarded contract; Inner is repr(C) with the header first.
    unsafe { &*(h as *const Inner) }
}

/// Read a node's header.
///
/// # Safety
/// `h` points to a live node (reached while pinned).
#[inline]
unsafe fn hdr<'a>(h: *const Header) -> &'a Header {
    // SAFETY: forwarded contract.
    unsafe { &*h }
}

/// Back off after a restart: spin a little, then yield (with many threads on
/// few cores, the lock holder may need our core).
#[inline]
fn backoff(tries: &mut u32) {
    crate::backoff::exponential(tries);
}

/// Where a scan step descends to.
#[derive(Clone, Copy)]
enum Target<'k> {
    /// The leaf whose range holds the key.
    At(&'k [u8]),
    /// The leaf whose range holds the keys just below the key.
    Before(&'k [u8]),
    Leftmost,
    Rightmost,
}

/// One validated leaf read of a scan.
struct ScanStep {
    leaf: *const Leaf,
    version: u64,
    /// Entries copied to the buffer.
    n: usize,
    /// Nearest separator below the leaf's range (`None`: leftmost leaf).
    fence_lo: Option<KeyRef>,
    /// Nearest separator above the leaf's range (`None`: rightmost leaf).
    fence_hi: Option<KeyRef>,
    /// The leaf's parent as the step reached it (`None`: the leaf is the
    /// root).
    parent: Option<ScanParent>,
}

/// Where a scan step's leaf hangs: its parent, the parent's version when
/// the step left it for the leaf, the leaf's position among its children
/// and the parent's separator count. The next step takes the neighbouring
/// child from there ([`BTree::scan_sibling`]) instead of descending from
/// the root again, while the parent is unchanged.
#[derive(Clone, Copy)]
struct ScanParent {
    node: *const Inner,
    version: u64,
    pos: usize,
    n: usize,
}

/// The shortest prefix of `rmin` that is greater than `lmax` (`lmax < rmin`).
fn separator<'a>(lmax: &[u8], rmin: &'a [u8]) -> &'a [u8] {
    debug_assert!(lmax < rmin);
    let d = lmax.iter().zip(rmin).take_while(|(a, b)| a == b).count();
    &rmin[..(d + 1).min(rmin.len())]
}

impl BTree {
    /// An empty tree with the default node sizes ([`LEAF_MAX`] entries per
    /// leaf, [`INNER_MAX`] separators per inner node).
    pub fn new() -> Self {
        Self::with_node_capacity(LEAF_MAX, INNER_MAX)
    }

    /// An empty tree whose nodes hold at most `leaf` entries / `inner`
    /// separators (`2 <= leaf <= LEAF_MAX`, `3 <= inner <= INNER_MAX`). Small
    /// nodes make tests reach deep trees and frequent splits quickly.
    pub fn with_node_capacity(leaf: usize, inner: usize) -> Self {
        assert!(
            (2..=LEAF_MAX).contains(&leaf),
            "leaf capacity {leaf} out of 2..={LEAF_MAX}"
        );
        assert!(
            (3..=INNER_MAX).contains(&inner),
            "inner capacity {inner} out of 3..={INNER_MAX}"
        );
        BTree {
            root: AtomicPtr::new(Leaf::alloc(STEP) as *mut Header),
            leaf_cap: leaf,
            inner_cap: inner,
            stamp_floor: AtomicU64::new(0),
            height: AtomicUsize::new(1),
        }
    }

    /// Read the root and its stable version.
    #[inline]
    fn root_begin(&self) -> Result<(*const Header, u64), Restart> {
        let r = self.root.load(Acquire);
        // SAFETY: the root pointer is never null and the root is live while we
        // are pinned (an old root is retired, not freed, when replaced).
        let v = unsafe { hdr(r) }.read_begin()?;
        // The node we versioned must still be the root: a root is only
        // replaced while locked, which changes (or obsoletes) its version, so
        // seeing it as root after reading `v` means it was root at version `v`.
        if !ptr::eq(self.root.load(Acquire), r) {
            return Err(Restart);
        }
        Ok((r, v))
    }

    /// Descend to the leaf whose range holds `sk`; returns it with its stable
    /// version, read while its parent was still valid.
    #[inline]
    fn find_leaf(&self, sk: &SKey<'_>) -> Result<(&Leaf, u64), Restart> {
        let (mut node, mut v) = self.root_begin()?;
        loop {
            // SAFETY: `node` was reached from the root while pinned.
            if unsafe { hdr(node) }.is_leaf() {
                // SAFETY: live node, and it is a leaf.
                return Ok((unsafe { as_leaf(node) }, v));
            }
            // SAFETY: live node, and it is an inner node.
            let inner = unsafe { as_inner(node) };
            let n = inner.h.count(INNER_MAX);
            let pos = inner.route(n, sk);
            (node, v) = inner.child_begin(pos, v)?;
        }
    }

    /// The largest range stamp of the leaves unlinked so far (see the
    /// type's docs).
    #[inline]
    pub fn stamp_floor(&self) -> u64 {
        self.stamp_floor.load(SeqCst)
    }

    /// Look up to [`BATCH_MAX`] keys at once (see [`OrderedIndex::get_batch`]):
    /// the descents go down level by level together, each round reading
    /// the nodes whose fetch every key issued in the round before and
    /// issuing the next level's, so that the cache misses of independent
    /// lookups overlap instead of following one another. Each result is
    /// validated as [`BTree::get`]'s is; a key whose descent met a
    /// concurrent change gets 0 ("look it up alone"), as does an absent
    /// key.
    pub fn get_batch(&self, keys: &[&[u8]], out: &mut [u64], _g: &Guard<'_>) {
        let n = keys.len().min(BATCH_MAX).min(out.len());
        out[..n].fill(0);
        // The upper levels are few nodes, mostly cached: each key descends
        // them alone, down to the leaves' parents (by the height hint); the
        // rounds below interleave the levels that miss, the leaves and
        // whatever is left above them.
        let lone = self.height.load(Relaxed).saturating_sub(2);
        // Per key: its inline prefix and length class (a search key is
        // made from them and the key where needed: an array of `SKey`s
        // would be built, then moved, whole).
        let mut pre = [(0u64, 0u8); BATCH_MAX];
        for (p, k) in pre.iter_mut().zip(&keys[..n]) {
            *p = prefix_of(k);
        }
        let sk = |i: usize| SKey {
            key: keys[i],
            prefix: pre[i].0,
            lc: pre[i].1,
        };
        // Per key: the node to read next, and the parent (with the version
        // it was read at) to re-check once the node's version is read; null
        // once done. After the lone descent the node's version is already
        // known: the parent is null and the version is the node's own.
        let mut at = [(ptr::null::<Header>(), ptr::null::<Inner>(), 0u64); BATCH_MAX];
        // The root and its version are read once for the whole batch: each
        // key's descent re-validates them when it follows its child (as
        // `find_leaf` does), so a root changed meanwhile fails that key
        // alone, and a root that cannot be read now fails them all (each
        // is then looked up alone).
        let Ok((root, rv)) = self.root_begin() else {
            return;
        };
        for (i, a) in at[..n].iter_mut().enumerate() {
            if let Ok((node, v)) = Self::descend_from(root, rv, &sk(i), lone) {
                *a = (node, ptr::null(), v);
            }
        }
        // Rounds: each key reads the node it fetched in the round before
        // (its version first, then the parent's re-check: the order of
        // `Inner::child_begin`), searches it and issues its child's fetch,
        // before the next key does the same; so every key's miss of a level
        // is in flight at once, and a round is one pass over the keys.
        loop {
            let mut pending = false;
            for i in 0..n {
                let (node, parent, pv) = at[i];
                if node.is_null() {
                    continue;
                }
                let v = if parent.is_null() {
                    pv
                } else {
                    // SAFETY: a non-null child pointer read while pinned
                    // points to a node that is linked or retired, not freed.
                    let r = unsafe { hdr(node) }.read_begin();
                    // SAFETY: the parent was reached while pinned.
                    let parent = unsafe { &*parent };
                    match r.and_then(|cv| parent.h.validate(pv).map(|()| cv)) {
                        Ok(cv) => cv,
                        Err(Restart) => {
                            at[i].0 = ptr::null();
                            continue;
                        }
                    }
                };
                // SAFETY: reached from the root while pinned (the guard).
                if unsafe { hdr(node) }.is_leaf() {
                    // SAFETY: live node, and it is a leaf.
                    let leaf = unsafe { as_leaf(node) };
                    let c = leaf.h.count(LEAF_MAX);
                    let (j, eq) = leaf.s.lower_bound(c, &sk(i));
                    let val = if eq { leaf.val[j].load(Relaxed) } else { 0 };
                    if leaf.h.validate(v).is_ok() {
                        out[i] = val;
                    }
                    at[i].0 = ptr::null();
                    continue;
                }
                // SAFETY: live node, and it is an inner node.
                let inner = unsafe { as_inner(node) };
                let c = inner.h.count(INNER_MAX);
                let pos = inner.route(c, &sk(i));
                let child = inner.child_prefetch(pos);
                at[i] = (child, inner, v);
                pending |= !child.is_null();
            }
            if !pending {
                return;
            }
        }
    }

    /// [`BTree::find_leaf`] for at most `levels` levels: the node reached
    /// (a leaf if the tree is that shallow) and its stable version.
    /// Starts from `node` read at stable version `v` (the root, read once
    /// for a whole batch).
    #[inline(always)]
    fn descend_from(
        mut node: *const Header,
        mut v: u64,
        sk: &SKey<'_>,
        levels: usize,
    ) -> Result<(*const Header, u64), Restart> {
        for _ in 0..levels {
            // SAFETY: `node` was reached from the root while pinned.
            if unsafe { hdr(node) }.is_leaf() {
                break;
            }
            // SAFETY: live node, and it is an inner node.
            let inner = unsafe { as_inner(node) };
            let c = inner.h.count(INNER_MAX);
            let pos = inner.route(c, sk);
            (node, v) = inner.child_begin_cached(pos, v)?;
        }
        Ok((node, v))
    }

    /// Look `key` up, returning the value if present and, either way, the
    /// leaf that holds (or would hold) the key with its stable version.
    pub fn get_with_leaf(&self, key: &[u8], _g: &Guard<'_>) -> (Option<u64>, LeafRef, u64) {
        let sk = SKey::new(key);
        let mut tries = 0;
        loop {
            let r = (|| {
                let (leaf, v) = self.find_leaf(&sk)?;
                let n = leaf.h.count(LEAF_MAX);
                let (i, eq) = leaf.s.lower_bound(n, &sk);
                let val = if eq { leaf.val[i].load(Relaxed) } else { 0 };
                leaf.h.validate(v)?;
                Ok::<_, Restart>((eq.then_some(val), LeafRef(leaf), v))
            })();
            if let Ok(r) = r {
                return r;
            }
            backoff(&mut tries);
        }
    }

    /// Look `key` up. On a miss, also return the leaf where the key would be
    /// and its stable version (for the caller's node set).
    pub fn get(&self, key: &[u8], _g: &Guard<'_>) -> Lookup {
        let sk = SKey::new(key);
        let mut tries = 0;
        loop {
            if let Ok(r) = self.try_get(&sk) {
                return r;
            }
            backoff(&mut tries);
        }
    }

    #[inline]
    fn try_get(&self, sk: &SKey<'_>) -> Result<Lookup, Restart> {
        let (leaf, v) = self.find_leaf(sk)?;
        let n = leaf.h.count(LEAF_MAX);
        let (i, eq) = leaf.s.lower_bound(n, sk);
        let val = if eq { leaf.val[i].load(Relaxed) } else { 0 };
        leaf.h.validate(v)?;
        Ok(if eq {
            Lookup::Found(val)
        } else {
            Lookup::Missing {
                leaf: LeafRef(leaf),
                version: v,
            }
        })
    }

    /// Insert `key -> value` if `key` is absent (`value` must not be 0).
    ///
    /// Returns [`Insert::Inserted`] with the leaf now holding the key and its
    /// stable versions immediately before the insert locked it and after it
    /// unlocked it, or [`Insert::Exists`] with the present value.
    pub fn insert(&self, key: &[u8], value: u64, g: &Guard<'_>) -> Insert {
        debug_assert!(value != 0, "index values must be non-zero");
        let sk = SKey::new(key);
        // The key in slot form (a heap copy only for a key longer than 8
        // bytes), made once it is known to be needed; owned here until an
        // attempt links it into a leaf (and takes it).
        let mut kbuf: Option<OwnedKey> = None;
        let mut tries = 0;
        loop {
            match self.try_insert(&sk, value, &mut kbuf, g) {
                Ok(r) => {
                    if let Some(k) = kbuf {
                        // SAFETY: never published, we still own it.
                        unsafe { k.free() };
                    }
                    return r;
                }
                Err(Restart) => backoff(&mut tries),
            }
        }
    }

    /// [`BTree::insert`] with a hint (see [`InsertHint`]): straight into the
    /// hinted leaf when `key` is in its range and the leaf is unchanged;
    /// otherwise a descent, which leaves the hint at the leaf it inserted
    /// into (or empty, after a split or when a fence is a long key).
    pub fn insert_hinted(
        &self,
        key: &[u8],
        value: u64,
        g: &Guard<'_>,
        hint: &mut InsertHint,
    ) -> Insert {
        debug_assert!(value != 0, "index values must be non-zero");
        let sk = SKey::new(key);
        if let Some(r) = self.try_hinted(&sk, value, hint) {
            return r;
        }
        let mut kbuf: Option<OwnedKey> = None;
        let mut tries = 0;
        loop {
            let mut fences = (NO_LO, NO_HI);
            match self.try_insert_fenced(&sk, value, &mut kbuf, g, &mut fences) {
                Ok(r) => {
                    if let Some(k) = kbuf {
                        // SAFETY: never published, we still own it.
                        unsafe { k.free() };
                    }
                    hint.leaf = ptr::null();
                    if let Insert::Inserted {
                        leaf,
                        after,
                        split: false,
                        ..
                    } = r
                    {
                        if fences.0 .1 < LONG && (fences.1 .1 < LONG || fences.1 == NO_HI) {
                            *hint = InsertHint {
                                tree: self,
                                leaf: leaf.0,
                                version: after,
                                lo: fences.0,
                                hi: fences.1,
                            };
                        }
                    }
                    return r;
                }
                Err(Restart) => backoff(&mut tries),
            }
        }
    }

    /// The insert of [`BTree::insert_hinted`] without a descent, if the
    /// hint allows it; `None` sends the caller down from the root.
    #[inline]
    fn try_hinted(&self, sk: &SKey<'_>, value: u64, hint: &mut InsertHint) -> Option<Insert> {
        if hint.leaf.is_null() || !ptr::eq(hint.tree, self) {
            return None;
        }
        let k = (sk.prefix, sk.lc);
        if k < hint.lo || k >= hint.hi {
            return None;
        }
        // SAFETY: the hint's contract: the thread has stayed pinned since
        // the leaf was reachable, so it is not freed (at worst unlinked,
        // which makes its version obsolete and differ).
        let leaf = unsafe { &*hint.leaf };
        let v = hint.version;
        if leaf.h.version.load(Acquire) != v {
            hint.leaf = ptr::null();
            return None;
        }
        let n = leaf.h.count(LEAF_MAX);
        let (i, eq) = leaf.s.lower_bound(n, sk);
        if eq {
            let val = leaf.val[i].load(Relaxed);
            return leaf.h.validate(v).is_ok().then_some(Insert::Exists(val));
        }
        if n >= self.leaf_cap {
            return None;
        }
        let owned = OwnedKey::new(sk.key);
        if leaf.h.try_upgrade(v).is_err() {
            // SAFETY: never published.
            unsafe { owned.free() };
            hint.leaf = ptr::null();
            return None;
        }
        // The upgrade succeeded at `v`: `n` and `i` were read consistently.
        leaf.insert_at(i, n, owned, value);
        leaf.h.unlock();
        hint.version = v + STEP;
        Some(Insert::Inserted {
            leaf: LeafRef(leaf),
            before: v,
            after: v + STEP,
            split: false,
        })
    }

    fn try_insert(
        &self,
        sk: &SKey<'_>,
        value: u64,
        kbuf: &mut Option<OwnedKey>,
        g: &Guard<'_>,
    ) -> Result<Insert, Restart> {
        let mut fences = (NO_LO, NO_HI);
        self.try_insert_fenced(sk, value, kbuf, g, &mut fences)
    }

    /// [`BTree::try_insert`], reporting the inserted-into leaf's key range
    /// as the descent saw it.
    #[inline(always)]
    fn try_insert_fenced(
        &self,
        sk: &SKey<'_>,
        value: u64,
        kbuf: &mut Option<OwnedKey>,
        g: &Guard<'_>,
        fences: &mut ((u64, u8), (u64, u8)),
    ) -> Result<Insert, Restart> {
        let (mut node, mut v) = self.root_begin()?;
        let mut parent: Option<(&Inner, u64, usize)> = None;
        loop {
            // SAFETY: `node` was reached from the root while pinned.
            if unsafe { hdr(node) }.is_leaf() {
                break;
            }
            // SAFETY: live inner node.
            let inner = unsafe { as_inner(node) };
            let n = inner.h.count(INNER_MAX);
            if n >= self.inner_cap {
                // Split full inner nodes on the way down, so that the parent of
                // a splitting leaf always has room; then descend again.
                self.split_inner(node, v, parent, g)?;
                return Err(Restart);
            }
            let pos = inner.route(n, sk);
            // Child `pos` holds the keys in [separator pos-1, separator pos):
            // the tightest bounds seen on the way down are the leaf's range
            // (read optimistically; `child_begin` validates this node).
            if pos > 0 {
                fences.0 = (
                    inner.s.prefix[pos - 1].load(Relaxed),
                    inner.s.lc[pos - 1].load(Relaxed),
                );
            }
            if pos < n {
                fences.1 = (
                    inner.s.prefix[pos].load(Relaxed),
                    inner.s.lc[pos].load(Relaxed),
                );
            }
            let (c, cv) = inner.child_begin(pos, v)?;
            parent = Some((inner, v, pos));
            node = c;
            v = cv;
        }
        // SAFETY: live leaf.
        let leaf = unsafe { as_leaf(node) };
        let n = leaf.h.count(LEAF_MAX);
        let (i, eq) = leaf.s.lower_bound(n, sk);
        if eq {
            let val = leaf.val[i].load(Relaxed);
            leaf.h.validate(v)?;
            return Ok(Insert::Exists(val));
        }
        let k = *kbuf.get_or_insert_with(|| OwnedKey::new(sk.key));
        if n < self.leaf_cap {
            // The upgrade succeeds only if nothing changed since `v`, so `n`
            // and `i` are exact.
            leaf.h.try_upgrade(v)?;
            *kbuf = None;
            leaf.insert_at(i, n, k, value);
            leaf.h.unlock();
            return Ok(Insert::Inserted {
                leaf: LeafRef(leaf),
                before: v,
                after: v + STEP,
                split: false,
            });
        }

        // The leaf is full: split it, with the parent locked. The key
        // continues an ascending run if the leaf's latest insert took the
        // slot just before (read before the lock; the upgrade below
        // succeeds only if the leaf is unchanged since).
        let run = leaf.h.last.load(Relaxed) as usize + 1 == i;
        let holder = match parent {
            Some((p, pv, pos)) => {
                p.h.try_upgrade(pv)?;
                if leaf.h.try_upgrade(v).is_err() {
                    p.h.unlock_unchanged(pv);
                    return Err(Restart);
                }
                let pn = p.h.count(INNER_MAX);
                debug_assert!(pn < self.inner_cap, "eager split left no room");
                *kbuf = None;
                let (sep, right, holder) = self.split_leaf(leaf, v, n, i, k, value, run);
                p.insert_child(pos, pn, sep, right as *mut Header);
                leaf.h.unlock();
                p.h.unlock();
                holder
            }
            None => {
                leaf.h.try_upgrade(v)?;
                if !ptr::eq(self.root.load(Relaxed), node) {
                    leaf.h.unlock_unchanged(v);
                    return Err(Restart);
                }
                *kbuf = None;
                let (sep, right, holder) = self.split_leaf(leaf, v, n, i, k, value, run);
                let root = Inner::alloc(1, STEP);
                // SAFETY: freshly allocated, not yet shared.
                let r = unsafe { &*root };
                r.child[0].store(node as *mut Header, Relaxed);
                r.insert_child(0, 0, sep, right as *mut Header);
                self.root.store(root as *mut Header, Release);
                self.height.fetch_add(1, Relaxed);
                leaf.h.unlock();
                holder
            }
        };
        Ok(Insert::Inserted {
            leaf: LeafRef(holder),
            before: v,
            after: v + STEP,
            split: true,
        })
    }

    /// Split the locked, full leaf `leaf` (at version `v`, `n` entries) and
    /// insert `(k, value)` at position `i`. Returns the separator, the
    /// new right leaf (unpublished, version `v + STEP`, the same as `leaf`
    /// gets on unlock) and the leaf that holds the new key. `run`: the key
    /// goes right after the leaf's latest insert (see [`Header::last`]).
    #[allow(clippy::too_many_arguments)]
    fn split_leaf(
        &self,
        leaf: &Leaf,
        v: u64,
        n: usize,
        i: usize,
        k: OwnedKey,
        value: u64,
        run: bool,
    ) -> (OwnedKey, *mut Leaf, *const Leaf) {
        let right = Leaf::alloc(v + STEP);
        // SAFETY: freshly allocated, not yet shared.
        let r = unsafe { &*right };
        // The new leaf takes over part of the range: it inherits the absence
        // stamp. We hold the leaf's lock; a transaction that raises the
        // stamp and then validates the leaf either saw our lock (and aborts)
        // or raised it before, and the fence makes us see the raise.
        fence(SeqCst);
        r.stamp.store(leaf.stamp.load(SeqCst), Relaxed);
        // Appending at the end leaves the left leaf 7/8 full, so that
        // ever-increasing keys do not leave half-empty leaves behind;
        // prepending does the same the other way round. The new key never
        // gets a leaf to itself: a transaction that aborts and takes its
        // insert back must not unlink the new leaf, or every retry would
        // split (and change the version of) the same full leaf again.
        //
        // A run that ascends in the middle of the leaf (TPC-C's order lines:
        // a district's newest order, followed in the leaf by the next
        // district's oldest) splits where it is: the keys after it go right,
        // the run's key ends the left leaf. The run's next keys then append
        // at the left leaf's end, shifting nothing, and fill it before it
        // splits again (at its end, as above); a split in the middle would
        // leave the run's keys shifting the others' at every insert, and
        // leaves half full behind it.
        let edge = (n / 8).max(1);
        let (m, new_left) = if i == n {
            (n - edge, false)
        } else if i == 0 {
            (edge, true)
        } else if run {
            (i, true)
        } else {
            (n / 2, i < n / 2)
        };
        for j in m..n {
            r.s.copy_from(j - m, &leaf.s, j);
            r.val[j - m].store(leaf.val[j].load(Relaxed), Relaxed);
            leaf.s.clear(j);
            leaf.val[j].store(0, Relaxed);
        }
        leaf.h.set_count(m);
        r.h.set_count(n - m);
        // Slots moved: only the new key's (below) is known to be the latest.
        leaf.h.last.store(NO_SLOT, Relaxed);
        let holder: *const Leaf = if new_left {
            leaf.insert_at(i, m, k, value);
            leaf
        } else {
            r.insert_at(i - m, n - m, k, value);
            right
        };
        let ln = leaf.h.count(LEAF_MAX);
        let (lmax, rmin) = (leaf.s.key_ref(ln - 1), r.s.key_ref(0));
        // SAFETY: both keys are linked in leaves we hold locked (or own).
        let sep = OwnedKey::new(separator(unsafe { lmax.bytes() }, unsafe { rmin.bytes() }));
        (sep, right, holder)
    }

    /// Split the full inner node `node` (read at version `v`), locking its
    /// parent (or replacing the root). Restarts if anything changed.
    fn split_inner(
        &self,
        node_ptr: *const Header,
        v: u64,
        parent: Option<(&Inner, u64, usize)>,
        _g: &Guard<'_>,
    ) -> Result<(), Restart> {
        // SAFETY: reached while pinned; an inner node (the caller checked).
        let node = unsafe { as_inner(node_ptr) };
        match parent {
            Some((p, pv, pos)) => {
                p.h.try_upgrade(pv)?;
                if node.h.try_upgrade(v).is_err() {
                    p.h.unlock_unchanged(pv);
                    return Err(Restart);
                }
                let pn = p.h.count(INNER_MAX);
                if pn >= self.inner_cap {
                    // Cannot happen (we would have split the parent on the way
                    // down), but stay safe.
                    node.h.unlock_unchanged(v);
                    p.h.unlock_unchanged(pv);
                    return Err(Restart);
                }
                let (up, right) = Self::split_inner_locked(node);
                p.insert_child(pos, pn, up, right as *mut Header);
                node.h.unlock();
                p.h.unlock();
            }
            None => {
                node.h.try_upgrade(v)?;
                if !ptr::eq(self.root.load(Relaxed), node_ptr) {
                    node.h.unlock_unchanged(v);
                    return Err(Restart);
                }
                let (up, right) = Self::split_inner_locked(node);
                let root = Inner::alloc(node.h.level + 1, STEP);
                // SAFETY: freshly allocated, not yet shared.
                let r = unsafe { &*root };
                r.child[0].store(node_ptr as *mut Header, Relaxed);
                r.insert_child(0, 0, up, right as *mut Header);
                self.root.store(root as *mut Header, Release);
                self.height.fetch_add(1, Relaxed);
                node.h.unlock();
            }
        }
        Ok(())
    }

    /// Move the upper half of a locked inner node to a new node; returns the
    /// separator that moves up (its copy changes owner, it is not copied) and
    /// the new right node (unpublished).
    fn split_inner_locked(node: &Inner) -> (OwnedKey, *mut Inner) {
        let n = node.h.count(INNER_MAX);
        let right = Inner::alloc(node.h.level, STEP);
        // SAFETY: freshly allocated, not yet shared.
        let r = unsafe { &*right };
        let m = n / 2;
        for j in m + 1..n {
            r.s.copy_from(j - m - 1, &node.s, j);
            node.s.clear(j);
        }
        for j in m + 1..=n {
            r.child[j - m - 1].store(node.child[j].load(Relaxed), Relaxed);
            node.child[j].store(ptr::null_mut(), Release);
        }
        let up = node.s.owned(m);
        node.s.clear(m);
        node.h.set_count(m);
        r.h.set_count(n - m - 1);
        (up, right)
    }

    /// Remove `key` if its value is `expected`; returns whether it did.
    pub fn remove(&self, key: &[u8], expected: u64, g: &Guard<'_>) -> bool {
        let sk = SKey::new(key);
        let mut path = Vec::new();
        let mut want_path = false;
        let mut tries = 0;
        loop {
            match self.try_remove(&sk, expected, want_path, &mut path, g) {
                Ok(Some(r)) => return r,
                Ok(None) => want_path = true,
                Err(Restart) => backoff(&mut tries),
            }
        }
    }

    /// One attempt of [`BTree::remove`]. `Ok(None)`: the leaf would become
    /// empty; try again recording the path (`want_path`).
    fn try_remove(
        &self,
        sk: &SKey<'_>,
        expected: u64,
        want_path: bool,
        path: &mut Vec<(*const Inner, u64, usize)>,
        g: &Guard<'_>,
    ) -> Result<Option<bool>, Restart> {
        path.clear();
        let mut has_parent = false;
        let (mut node, mut v) = self.root_begin()?;
        loop {
            // SAFETY: `node` was reached from the root while pinned.
            if unsafe { hdr(node) }.is_leaf() {
                break;
            }
            // SAFETY: live inner node.
            let inner = unsafe { as_inner(node) };
            let n = inner.h.count(INNER_MAX);
            let pos = inner.route(n, sk);
            let (c, cv) = inner.child_begin(pos, v)?;
            if want_path {
                path.push((node as *const Inner, v, pos));
            }
            has_parent = true;
            node = c;
            v = cv;
        }
        // SAFETY: live leaf.
        let leaf = unsafe { as_leaf(node) };
        let n = leaf.h.count(LEAF_MAX);
        let (i, eq) = leaf.s.lower_bound(n, sk);
        if !eq || leaf.val[i].load(Relaxed) != expected {
            leaf.h.validate(v)?;
            return Ok(Some(false));
        }
        if n > 1 || !has_parent {
            leaf.h.try_upgrade(v)?;
            let kp = leaf.remove_at(i, n);
            leaf.h.unlock();
            // SAFETY: the key was just unlinked from the only place that held
            // it; it is retired once.
            unsafe { kp.retire(g) };
            return Ok(Some(true));
        }
        if !want_path {
            return Ok(None);
        }

        // The leaf becomes empty: unlink it, and with it every ancestor that
        // would be left without children, from the lowest ancestor that has
        // another child (`top`).
        // SAFETY (all derefs of path entries below): the nodes were reached
        // while pinned during this attempt.
        let mut a = path.len();
        // SAFETY: see above.
        while a > 0 && unsafe { &*path[a - 1].0 }.h.count(INNER_MAX) == 0 {
            a -= 1;
        }
        if a == 0 {
            // The whole tree is a chain down to this leaf: empty the leaf in
            // place and let the root shrink to it. The counts above were read
            // optimistically: check them first. (Nodes without separators
            // cannot split, so only the leaf itself could change the chain.)
            for &(p, pv, _) in path.iter() {
                // SAFETY: see above.
                unsafe { &*p }.h.validate(pv)?;
            }
            leaf.h.try_upgrade(v)?;
            let kp = leaf.remove_at(i, n);
            leaf.h.unlock();
            // SAFETY: unlinked just now, retired once.
            unsafe { kp.retire(g) };
            self.collapse_root(g);
            return Ok(Some(true));
        }
        let top = a - 1;
        // Lock top-down with the versions seen on the way down: success means
        // none of these nodes changed since, so the counts read are exact.
        for j in top..path.len() {
            let (p, pv, _) = path[j];
            // SAFETY: see above.
            if unsafe { &*p }.h.try_upgrade(pv).is_err() {
                for &(q, qv, _) in &path[top..j] {
                    // SAFETY: see above; we locked it.
                    unsafe { &*q }.h.unlock_unchanged(qv);
                }
                return Err(Restart);
            }
        }
        if leaf.h.try_upgrade(v).is_err() {
            for &(q, qv, _) in &path[top..] {
                // SAFETY: see above; we locked it.
                unsafe { &*q }.h.unlock_unchanged(qv);
            }
            return Err(Restart);
        }
        let (tp, _, tpos) = path[top];
        // SAFETY: see above; locked by us.
        let t = unsafe { &*tp };
        let tn = t.h.count(INNER_MAX);
        let sep = t.remove_child(tpos, tn);
        for &(q, _, _) in &path[top + 1..] {
            // SAFETY: see above; locked by us, now unlinked (its only child is
            // the chain being removed).
            let qi = unsafe { &*q };
            qi.child[0].store(ptr::null_mut(), Release);
            qi.h.unlock_obsolete();
            // SAFETY: unlinked from its parent above, boxed, retired once.
            unsafe { g.retire_box(q as *mut Inner) };
        }
        let kp = leaf.remove_at(0, 1);
        // The leaf's range goes to a neighbour: hand its absence stamp to the
        // tree's floor (see `split_leaf` for the ordering).
        fence(SeqCst);
        self.stamp_floor.fetch_max(leaf.stamp.load(SeqCst), SeqCst);
        leaf.h.unlock_obsolete();
        // SAFETY: the separator, the key copy and the leaf were all unlinked
        // just now under the locks; each is retired once.
        unsafe {
            sep.retire(g);
            kp.retire(g);
            g.retire_box(node as *mut Leaf);
        }
        t.h.unlock();
        if top == 0 && tn == 1 {
            self.collapse_root(g);
        }
        Ok(Some(true))
    }

    /// While the root is an inner node with a single child, make the child
    /// the root (and retire the old root).
    fn collapse_root(&self, g: &Guard<'_>) {
        let mut spins = 0u32;
        loop {
            let Ok((r, v)) = self.root_begin() else {
                crate::backoff::snooze(&mut spins);
                continue;
            };
            // SAFETY: the root is live while pinned.
            if unsafe { hdr(r) }.is_leaf() {
                return;
            }
            // SAFETY: live inner node.
            let inner = unsafe { as_inner(r) };
            if inner.h.count.load(Relaxed) != 0 {
                return;
            }
            if inner.h.try_upgrade(v).is_err() {
                crate::backoff::snooze(&mut spins);
                continue;
            }
            // Locked at `v`: still the root (a root change locks it), still
            // without separators. Its child's range stays the whole key space.
            let child = inner.child[0].load(Relaxed);
            self.root.store(child, Release);
            self.height.fetch_sub(1, Relaxed);
            inner.child[0].store(ptr::null_mut(), Release);
            inner.h.unlock_obsolete();
            // SAFETY: unlinked (no longer the root, nothing points to it),
            // boxed, retired once.
            unsafe { g.retire_box(r as *mut Inner) };
        }
    }

    /// Replace the value of `key` with `new` if it is currently `expected`;
    /// returns whether it did. Changes the leaf's version.
    pub fn replace(&self, key: &[u8], expected: u64, new: u64, _g: &Guard<'_>) -> bool {
        debug_assert!(new != 0, "index values must be non-zero");
        let sk = SKey::new(key);
        let mut tries = 0;
        loop {
            match self.try_replace(&sk, expected, new) {
                Ok(r) => return r,
                Err(Restart) => backoff(&mut tries),
            }
        }
    }

    fn try_replace(&self, sk: &SKey<'_>, expected: u64, new: u64) -> Result<bool, Restart> {
        let (leaf, v) = self.find_leaf(sk)?;
        let n = leaf.h.count(LEAF_MAX);
        let (i, eq) = leaf.s.lower_bound(n, sk);
        if !eq || leaf.val[i].load(Relaxed) != expected {
            leaf.h.validate(v)?;
            return Ok(false);
        }
        leaf.h.try_upgrade(v)?;
        leaf.val[i].store(new, Relaxed);
        leaf.h.unlock();
        Ok(true)
    }

    /// Ordered scan of the keys in `[lo, hi]` (each end included, excluded or
    /// unbounded), ascending, or descending when `reverse`.
    ///
    /// For each leaf visited, once its entries have been read under a
    /// validated optimistic read, reports `(leaf, version)` to `on_leaf` (the [`RangeObserver`]) and then
    /// `f(key, value)` for each of its entries in range, in scan order; stops
    /// as soon as `f` returns false. The leaves reported cover the whole key
    /// range examined, including leaves with no entry in range. Keys are
    /// handed out strictly increasing (decreasing) even under concurrent
    /// changes. A key slice is valid only during its call of `f` (a short
    /// key is handed out from the scan's own buffer): copy what must outlive
    /// it.
    pub fn scan<F, L>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        _g: &Guard<'_>,
        mut on_leaf: L,
        mut f: F,
    ) where
        F: FnMut(&[u8], u64) -> bool,
        L: RangeObserver,
    {
        let mut buf = [(KeyRef::of(&[]), 0u64); LEAF_MAX];
        // The part of [lo, hi] still to scan: the caller's bounds, then the
        // fences of the leaves scanned (views of keys that stay valid while
        // pinned, or of the caller's slices).
        let mut lower_k = lo.map(KeyRef::of);
        let mut upper_k = hi.map(KeyRef::of);
        let mut parent: Option<ScanParent> = None;
        loop {
            // The caller's keys are borrowed for the whole scan; fences were
            // read from validated nodes while pinned.
            fn view(k: &KeyRef) -> &[u8] {
                // SAFETY: as just said.
                unsafe { k.bytes() }
            }
            let (lower, upper) = (lower_k.as_ref().map(view), upper_k.as_ref().map(view));
            let target = if reverse {
                match upper {
                    Bound::Included(k) => Target::At(k),
                    Bound::Excluded(k) => Target::Before(k),
                    Bound::Unbounded => Target::Rightmost,
                }
            } else {
                match lower {
                    Bound::Included(k) | Bound::Excluded(k) => Target::At(k),
                    Bound::Unbounded => Target::Leftmost,
                }
            };
            let mut tries = 0;
            let st = loop {
                // The neighbour of the last leaf through its parent, if the
                // parent is unchanged; else a descent from the root.
                if let Some(p) = parent.take() {
                    if let Ok(st) = self.scan_sibling(p, reverse, lower, upper, &mut buf) {
                        break st;
                    }
                }
                match self.scan_leaf(target, lower, upper, &mut buf) {
                    Ok(st) => break st,
                    Err(Restart) => backoff(&mut tries),
                }
            };
            parent = st.parent;
            on_leaf.observe(LeafRef(st.leaf), st.version);
            let entries = &buf[..st.n];
            let n = entries.len();
            let mut emit = |j: usize| {
                // The value `SCAN_PREFETCH` rows ahead is a record's address
                // (in every table of the engine; a prefetch of anything else
                // is harmless, it never faults): ask for its first lines now,
                // so that the caller's reads of the rows overlap their misses
                // instead of taking them one after another.
                let ahead = if reverse {
                    j.checked_sub(SCAN_PREFETCH)
                } else {
                    Some(j + SCAN_PREFETCH).filter(|&a| a < n)
                };
                if let Some(a) = ahead {
                    crate::storage::prefetch_bytes(entries[a].1 as *const u8, SCAN_PREFETCH_BYTES);
                }
                let (k, val) = &entries[j];
                // SAFETY: copied from a validated leaf read while pinned: a
                // key copy is linked or retired after we pinned, so it stays
                // allocated while the guard lives.
                f(unsafe { k.bytes() }, *val)
            };
            if n > 0 {
                let first = if reverse { n - 1 } else { 0 };
                for d in 0..SCAN_PREFETCH.min(n) {
                    let a = if reverse { first - d } else { first + d };
                    crate::storage::prefetch_bytes(entries[a].1 as *const u8, SCAN_PREFETCH_BYTES);
                }
            }
            let go_on = if reverse {
                (0..n).rev().all(&mut emit)
            } else {
                (0..n).all(&mut emit)
            };
            if !go_on {
                return;
            }
            if reverse {
                let Some(fence) = st.fence_lo else {
                    return;
                };
                // SAFETY: a separator read from a validated inner node while
                // pinned (see `emit`).
                let fl = unsafe { fence.bytes() };
                match lo {
                    Bound::Included(l) | Bound::Excluded(l) if fl <= l => return,
                    _ => {}
                }
                upper_k = Bound::Excluded(fence);
            } else {
                let Some(fence) = st.fence_hi else {
                    return;
                };
                // SAFETY: as above.
                let fh = unsafe { fence.bytes() };
                match hi {
                    Bound::Included(h) if fh > h => return,
                    Bound::Excluded(h) if fh >= h => return,
                    _ => {}
                }
                lower_k = Bound::Included(fence);
            }
        }
    }

    /// Descend to the scan target and copy the leaf's entries within
    /// `[lower, upper]` into `buf`, under a validated optimistic read.
    fn scan_leaf(
        &self,
        target: Target<'_>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        buf: &mut [(KeyRef, u64); LEAF_MAX],
    ) -> Result<ScanStep, Restart> {
        let tk = match target {
            Target::At(k) | Target::Before(k) => Some(SKey::new(k)),
            _ => None,
        };
        let mut fence_lo: Option<KeyRef> = None;
        let mut fence_hi: Option<KeyRef> = None;
        let mut parent: Option<ScanParent> = None;
        let (mut node, mut v) = self.root_begin()?;
        #[cfg(test)]
        let mut depth = 0;
        loop {
            // SAFETY: `node` was reached from the root while pinned.
            if unsafe { hdr(node) }.is_leaf() {
                break;
            }
            #[cfg(test)]
            {
                tests::scan_descent_hook(depth, fence_lo, fence_hi);
                depth += 1;
            }
            // SAFETY: live inner node.
            let inner = unsafe { as_inner(node) };
            let n = inner.h.count(INNER_MAX);
            let pos = match (target, &tk) {
                (Target::At(_), Some(sk)) => inner.route(n, sk),
                (Target::Before(_), Some(sk)) => inner.s.lower_bound(n, sk).0,
                (Target::Rightmost, _) => n,
                _ => 0,
            };
            // The deepest separators around the path are the leaf's fences.
            // (A separator vacated under us reads as an empty key; the
            // validation in `child_begin` then fails.)
            if pos > 0 {
                fence_lo = Some(inner.s.key_ref(pos - 1));
            }
            if pos < n {
                fence_hi = Some(inner.s.key_ref(pos));
            }
            parent = Some(ScanParent {
                node: inner,
                version: v,
                pos,
                n,
            });
            // Validates `inner` after the fence loads too.
            (node, v) = inner.child_begin(pos, v)?;
        }
        self.scan_entries(node, v, (fence_lo, fence_hi), (lower, upper), parent, buf)
    }

    /// The next leaf of a scan from the last one's parent `p`: its
    /// neighbouring child (right, or left when `reverse`), if the parent is
    /// still at the version the last step left it at and the neighbour's
    /// fences are both separators of it. A changed parent (a split or an
    /// unlink under it) is a `Restart`, and the caller descends from the
    /// root. The hand-over is the descent's own: the neighbour's version is
    /// read before the parent is validated, so the leaf read is one the
    /// unchanged parent pointed to, holding the keys between the two
    /// separators.
    fn scan_sibling(
        &self,
        p: ScanParent,
        reverse: bool,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        buf: &mut [(KeyRef, u64); LEAF_MAX],
    ) -> Result<ScanStep, Restart> {
        // Child `c` holds keys in `[sep[c-1], sep[c])`.
        let c = if reverse {
            if p.pos < 2 {
                return Err(Restart);
            }
            p.pos - 1
        } else {
            if p.pos + 1 >= p.n {
                return Err(Restart);
            }
            p.pos + 1
        };
        // SAFETY: an inner node reached while pinned (by the step before,
        // under the same guard): linked or retired, not freed.
        let inner = unsafe { &*p.node };
        let fences = (Some(inner.s.key_ref(c - 1)), Some(inner.s.key_ref(c)));
        // Validates the parent after the fence loads too.
        let (node, v) = inner.child_begin(c, p.version)?;
        // SAFETY: reached from the validated parent while pinned.
        if !unsafe { hdr(node) }.is_leaf() {
            return Err(Restart);
        }
        let parent = Some(ScanParent { pos: c, ..p });
        self.scan_entries(node, v, fences, (lower, upper), parent, buf)
    }

    /// Copy the entries of leaf `node` (read at version `v`) within
    /// `[lower, upper]` and within the fences it was reached by into `buf`,
    /// under a validated optimistic read.
    #[inline(always)]
    fn scan_entries(
        &self,
        node: *const Header,
        v: u64,
        (fence_lo, fence_hi): (Option<KeyRef>, Option<KeyRef>),
        (lower, upper): (Bound<&[u8]>, Bound<&[u8]>),
        parent: Option<ScanParent>,
        buf: &mut [(KeyRef, u64); LEAF_MAX],
    ) -> Result<ScanStep, Restart> {
        // SAFETY: live leaf.
        let leaf = unsafe { as_leaf(node) };
        let n = leaf.h.count(LEAF_MAX);
        let mut start = match lower {
            Bound::Unbounded => 0,
            Bound::Included(k) => leaf.s.lower_bound(n, &SKey::new(k)).0,
            Bound::Excluded(k) => {
                let (i, eq) = leaf.s.lower_bound(n, &SKey::new(k));
                i + eq as usize
            }
        };
        let mut end = match upper {
            Bound::Unbounded => n,
            Bound::Included(k) => {
                let (i, eq) = leaf.s.lower_bound(n, &SKey::new(k));
                i + eq as usize
            }
            Bound::Excluded(k) => leaf.s.lower_bound(n, &SKey::new(k)).0,
        };
        // Hand out only keys within the fences we descended by. The leaf's
        // range may have grown past a fence read from a higher ancestor since
        // (a neighbour was unlinked) and received keys there; those keys
        // belong to the scan's next step, which starts at that fence, and
        // would otherwise come out twice.
        if let Some(fence) = &fence_lo {
            // SAFETY: a separator read from a validated inner node while
            // pinned: a long one's copy is allocated and immutable.
            let f = SKey::new(unsafe { fence.bytes() });
            start = start.max(leaf.s.lower_bound(n, &f).0);
        }
        if let Some(fence) = &fence_hi {
            // SAFETY: as above.
            let f = SKey::new(unsafe { fence.bytes() });
            end = end.min(leaf.s.lower_bound(n, &f).0);
        }
        let mut cnt = 0;
        for i in start..end.max(start) {
            buf[cnt] = (leaf.s.key_ref(i), leaf.val[i].load(Relaxed));
            cnt += 1;
        }
        leaf.h.validate(v)?;
        Ok(ScanStep {
            leaf,
            version: v,
            n: cnt,
            fence_lo,
            fence_hi,
            parent,
        })
    }

    /// Number of keys (a full scan; not an atomic snapshot under concurrent
    /// changes). For tests and diagnostics.
    pub fn len_slow(&self, g: &Guard<'_>) -> usize {
        let mut n = 0;
        self.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            g,
            |_, _| {},
            |_, _| {
                n += 1;
                true
            },
        );
        n
    }

    /// Number of nodes (leaves and inner nodes) reachable from the root. For
    /// tests and diagnostics (memory stays bounded); quiescent use only.
    pub fn node_count_slow(&self, _g: &Guard<'_>) -> usize {
        fn walk(h: *const Header) -> usize {
            if h.is_null() {
                return 0;
            }
            // SAFETY: reachable nodes are live; quiescent use (documented).
            if unsafe { hdr(h) }.is_leaf() {
                return 1;
            }
            // SAFETY: live inner node.
            let inner = unsafe { as_inner(h) };
            let n = inner.h.count(INNER_MAX);
            1 + (0..=n)
                .map(|i| walk(inner.child[i].load(Acquire)))
                .sum::<usize>()
        }
        walk(self.root.load(Acquire))
    }

    /// Check the structural invariants and panic with a description of the
    /// first violation: keys strictly sorted and inside the fences their
    /// ancestors' separators give; inline prefixes match the key copies;
    /// counts within capacity; vacated slots cleared; every node unlocked and
    /// not obsolete; all leaves at the same depth; only the root leaf may be
    /// empty, and an inner root has at least two children. Quiescent use only.
    pub fn check_invariants(&self, _g: &Guard<'_>) {
        let mut leaf_depth = None;
        // Quiescent, the height hint is exact: the root's level is one less.
        let root_level = self.height.load(Acquire) - 1;
        self.check_node(
            self.root.load(Acquire),
            None,
            None,
            0,
            root_level,
            &mut leaf_depth,
        );
    }

    fn check_node(
        &self,
        h: *const Header,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        depth: usize,
        level: usize,
        leaf_depth: &mut Option<usize>,
    ) {
        assert!(!h.is_null(), "null node at depth {depth}");
        let is_root = depth == 0;
        // SAFETY: reachable nodes are live; quiescent use (documented).
        let hd = unsafe { hdr(h) };
        assert_eq!(
            hd.level as usize, level,
            "node at depth {depth}: level {} where {level} is due",
            hd.level
        );
        let ver = hd.version.load(Acquire);
        assert!(ver & LOCKED == 0, "node at depth {depth} is locked");
        assert!(
            ver & OBSOLETE == 0,
            "obsolete node reachable at depth {depth}"
        );
        let count = hd.count.load(Acquire) as usize;
        let in_fences = |k: &[u8], what: &str| {
            if let Some(l) = lo {
                assert!(
                    l <= k,
                    "{what} {k:?} below the lower fence {l:?} (depth {depth})"
                );
            }
            if let Some(u) = hi {
                assert!(
                    k < u,
                    "{what} {k:?} not below the upper fence {u:?} (depth {depth})"
                );
            }
        };
        if hd.is_leaf() {
            match *leaf_depth {
                None => *leaf_depth = Some(depth),
                Some(d) => assert_eq!(d, depth, "leaves at different depths"),
            }
            // SAFETY: live leaf.
            let leaf = unsafe { as_leaf(h) };
            assert!(
                count <= self.leaf_cap,
                "leaf holds {count} > {} entries",
                self.leaf_cap
            );
            assert!(is_root || count > 0, "empty non-root leaf at depth {depth}");
            for i in count..LEAF_MAX {
                assert_eq!(
                    leaf.s.prefix[i].load(Relaxed),
                    VACANT,
                    "vacant leaf slot {i}"
                );
            }
            let mut prev: Option<&[u8]> = None;
            let keys: Vec<KeyRef> = (0..count).map(|i| leaf.s.key_ref(i)).collect();
            for (i, key) in keys.iter().enumerate() {
                let long = leaf.s.lc[i].load(Relaxed) > 8;
                assert_eq!(
                    !leaf.s.key_ptr(i).is_null(),
                    long,
                    "leaf slot {i} of {count}: a key copy iff the key is long"
                );
                // SAFETY: a linked key (quiescent tree).
                let k = unsafe { key.bytes() };
                let (p, lc) = prefix_of(k);
                assert_eq!(leaf.s.prefix[i].load(Relaxed), p, "leaf prefix of {k:?}");
                assert_eq!(leaf.s.lc[i].load(Relaxed), lc, "leaf length class of {k:?}");
                assert_ne!(leaf.val[i].load(Relaxed), 0, "zero value for key {k:?}");
                if let Some(pk) = prev {
                    assert!(pk < k, "leaf keys out of order: {pk:?} then {k:?}");
                }
                in_fences(k, "key");
                prev = Some(k);
            }
            for i in count..LEAF_MAX {
                assert!(
                    leaf.s.key_ptr(i).is_null(),
                    "vacated leaf slot {i} not cleared"
                );
            }
            return;
        }
        // SAFETY: live inner node.
        let inner = unsafe { as_inner(h) };
        assert!(
            count <= self.inner_cap,
            "inner node holds {count} > {} separators",
            self.inner_cap
        );
        assert!(!is_root || count > 0, "inner root with a single child");
        let sep_keys: Vec<KeyRef> = (0..count).map(|i| inner.s.key_ref(i)).collect();
        let mut seps: Vec<&[u8]> = Vec::with_capacity(count);
        for i in count..INNER_MAX {
            assert_eq!(
                inner.s.prefix[i].load(Relaxed),
                VACANT,
                "vacant separator slot {i}"
            );
        }
        for (i, key) in sep_keys.iter().enumerate() {
            let long = inner.s.lc[i].load(Relaxed) > 8;
            assert_eq!(
                !inner.s.key_ptr(i).is_null(),
                long,
                "separator slot {i} of {count}: a key copy iff the key is long"
            );
            // SAFETY: a linked separator (quiescent tree).
            let k = unsafe { key.bytes() };
            let (p, lc) = prefix_of(k);
            assert_eq!(
                inner.s.prefix[i].load(Relaxed),
                p,
                "separator prefix of {k:?}"
            );
            assert_eq!(
                inner.s.lc[i].load(Relaxed),
                lc,
                "separator length class of {k:?}"
            );
            if let Some(&pk) = seps.last() {
                assert!(pk < k, "separators out of order: {pk:?} then {k:?}");
            }
            if let Some(l) = lo {
                assert!(l < k, "separator {k:?} not above the lower fence {l:?}");
            }
            in_fences(k, "separator");
            seps.push(k);
        }
        for i in count..INNER_MAX {
            assert!(
                inner.s.key_ptr(i).is_null(),
                "vacated separator slot {i} not cleared"
            );
        }
        for i in count + 1..=INNER_MAX {
            assert!(
                inner.child[i].load(Relaxed).is_null(),
                "vacated child slot {i} not cleared"
            );
        }
        for i in 0..=count {
            let clo = if i == 0 { lo } else { Some(seps[i - 1]) };
            let chi = if i == count { hi } else { Some(seps[i]) };
            self.check_node(
                inner.child[i].load(Acquire),
                clo,
                chi,
                depth + 1,
                level - 1,
                leaf_depth,
            );
        }
    }
}

impl Drop for BTree {
    fn drop(&mut self) {
        /// Free a subtree and its key copies.
        ///
        /// # Safety
        /// No other thread uses the tree; `h` is a linked node.
        unsafe fn free(h: *mut Header) {
            // SAFETY: per the contract we own every node and key copy linked
            // below `h`; each is linked exactly once.
            unsafe {
                if (*h).is_leaf() {
                    let leaf = h as *mut Leaf;
                    let n = (*leaf).h.count(LEAF_MAX);
                    for i in 0..n {
                        (*leaf).s.owned(i).free();
                    }
                    drop(Box::from_raw(leaf));
                } else {
                    let inner = h as *mut Inner;
                    let n = (*inner).h.count(INNER_MAX);
                    for i in 0..n {
                        (*inner).s.owned(i).free();
                    }
                    for i in 0..=n {
                        free((*inner).child[i].load(Relaxed));
                    }
                    drop(Box::from_raw(inner));
                }
            }
        }
        // SAFETY: `&mut self`: no concurrent users; retired nodes are not
        // reachable from the root and are freed by the epochs.
        unsafe { free(*self.root.get_mut()) };
    }
}

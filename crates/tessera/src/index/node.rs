//! Node layout, version-word protocol and key copies of the B+-tree.
//!
//! Everything a reader may load without holding the node lock is an atomic;
//! the only plain field of a node, `Header::level`, is written once before
//! the node is published and never again.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cmp::Ordering as Cmp;
use std::ptr;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{fence, AtomicPtr, AtomicU16, AtomicU64, AtomicU8};

/// Slots per leaf (the most a tree may use; [`super::BTree::with_node_capacity`]
/// can lower it for tests).
pub const LEAF_MAX: usize = 32;
/// Separators per inner node (it has one more child than separators).
/// Eight times a leaf's. YCSB's 1M records, as its loader inserts them,
/// make a tree of three levels (four with 64); 1M keys inserted one by one
/// in random order fill a fourth level's root only a little (four levels
/// with 64 too, five with 32). A wide node costs its search two probes
/// more, in lines a descent prefetches together ([`Inner::child_begin`]),
/// and inner nodes are few (docs/BENCHMARKS.md, "Inner nodes of 256
/// separators").
pub const INNER_MAX: usize = 256;

/// Inner nodes of at most this many separators are searched over this many
/// slots only ([`Slots::lower_bound`]).
const SMALL: usize = 32;

/// Version word: bit 0 is the lock bit.
pub(super) const LOCKED: u64 = 1;
/// Version word: bit 1 marks a node that was unlinked (readers restart).
pub(super) const OBSOLETE: u64 = 2;
/// Version word: the counter lives above the two flag bits.
pub(super) const STEP: u64 = 4;

/// An optimistic read saw a concurrent change: start the operation again.
#[derive(Debug)]
pub(super) struct Restart;

/// Bytes of the inline key prefix.
const PREFIX_LEN: usize = 8;
/// Length class stored inline: the key length, or 9 for "longer than 8".
pub(super) const LONG: u8 = PREFIX_LEN as u8 + 1;

/// A search key with its inline-comparable parts precomputed.
#[derive(Clone, Copy)]
pub(super) struct SKey<'k> {
    pub key: &'k [u8],
    pub prefix: u64,
    pub lc: u8,
}

impl<'k> SKey<'k> {
    #[inline]
    pub fn new(key: &'k [u8]) -> Self {
        let (prefix, lc) = prefix_of(key);
        SKey { key, prefix, lc }
    }
}

/// The 8-byte big-endian prefix (zero padded) and the length class of `key`.
///
/// Comparing `(prefix, lc)` orders keys exactly like memcmp order unless both
/// keys are longer than 8 bytes and share the prefix: equal prefixes mean the
/// first `min(len, 8)` bytes agree, so when one key has at most 8 bytes it is a
/// prefix of the other and the shorter one sorts first.
#[inline]
pub(super) fn prefix_of(key: &[u8]) -> (u64, u8) {
    let n = key.len();
    let lc = n.min(LONG as usize) as u8;
    if let Some(head) = key.first_chunk::<PREFIX_LEN>() {
        return (u64::from_be_bytes(*head), lc);
    }
    // A short key (most of TPC-C's: 2 to 7 bytes) in two loads that may
    // overlap, its first and its last 4 (or 2) bytes, each shifted to its
    // place: no variable-length copy, which is a call to memcpy.
    let prefix = if n >= 4 {
        let a = u32::from_be_bytes(key[..4].try_into().expect("4 bytes")) as u64;
        let b = u32::from_be_bytes(key[n - 4..].try_into().expect("4 bytes")) as u64;
        a << 32 | b << (8 * (8 - n))
    } else if n >= 2 {
        let a = u16::from_be_bytes(key[..2].try_into().expect("2 bytes")) as u64;
        let b = u16::from_be_bytes(key[n - 2..].try_into().expect("2 bytes")) as u64;
        a << 48 | b << (8 * (8 - n))
    } else if n == 1 {
        (key[0] as u64) << 56
    } else {
        0
    };
    (prefix, lc)
}

// ---------------------------------------------------------------------------
// Key copies: a u32 length followed by the bytes, one heap allocation,
// immutable once published.

const KEY_HDR: usize = 4;

fn key_layout(len: usize) -> Layout {
    Layout::from_size_align(KEY_HDR + len, 4).expect("key too long")
}

/// A fresh heap copy of `key`. Ownership passes to whoever publishes it.
pub(super) fn key_new(key: &[u8]) -> *mut u8 {
    let len = u32::try_from(key.len()).expect("key longer than 4 GiB");
    let layout = key_layout(key.len());
    // SAFETY: the layout has a non-zero size (at least the 4-byte header).
    let p = unsafe { alloc(layout) };
    if p.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `p` is a fresh allocation of KEY_HDR + len bytes aligned to 4;
    // the source slice cannot overlap it.
    unsafe {
        (p as *mut u32).write(len);
        ptr::copy_nonoverlapping(key.as_ptr(), p.add(KEY_HDR), key.len());
    }
    p
}

/// The bytes of a key copy.
///
/// # Safety
/// `p` comes from [`key_new`] and is not freed while the returned slice lives
/// (it is linked, or retired through an epoch guard that outlives the slice).
#[inline]
pub(super) unsafe fn key_bytes<'a>(p: *const u8) -> &'a [u8] {
    // SAFETY: per the contract, `p` is a live key copy; its header and bytes
    // are never written after `key_new` returned.
    unsafe {
        let len = (p as *const u32).read() as usize;
        std::slice::from_raw_parts(p.add(KEY_HDR), len)
    }
}

/// Free a key copy (also the epoch's destructor for retired key copies).
///
/// # Safety
/// `p` comes from [`key_new`], is unreachable, and is freed only once.
pub(super) unsafe fn key_free(p: *mut u8) {
    // SAFETY: per the contract `p` is a live key copy with a valid header.
    unsafe {
        let len = (p as *const u32).read() as usize;
        dealloc(p, key_layout(len));
    }
}

/// A key as a slot holds it: its inline prefix and length class, and a heap
/// copy (from [`key_new`]) only if it is longer than 8 bytes. A key of at
/// most 8 bytes is all in its prefix: it takes no allocation, and inserting
/// or removing it allocates or frees nothing. Whoever holds an `OwnedKey`
/// owns its copy (if any): it links it into a slot, or frees or retires it.
#[derive(Clone, Copy, Debug)]
pub(super) struct OwnedKey {
    pub prefix: u64,
    pub lc: u8,
    /// The heap copy, or null for a key of at most 8 bytes.
    pub copy: *mut u8,
}

impl OwnedKey {
    /// `key`'s slot form, allocating its copy if it is long.
    pub fn new(key: &[u8]) -> Self {
        let (prefix, lc) = prefix_of(key);
        let copy = if lc == LONG {
            key_new(key)
        } else {
            ptr::null_mut()
        };
        OwnedKey { prefix, lc, copy }
    }

    /// Free the copy, if any, at once.
    ///
    /// # Safety
    /// This key is owned and unreachable.
    pub unsafe fn free(self) {
        if !self.copy.is_null() {
            // SAFETY: per the contract the copy is ours alone.
            unsafe { key_free(self.copy) };
        }
    }

    /// Retire the copy, if any, through the epoch.
    ///
    /// # Safety
    /// This key was just unlinked from the only slot that held it.
    pub unsafe fn retire(self, g: &crate::epoch::Guard<'_>) {
        if !self.copy.is_null() {
            // SAFETY: per the contract it is retired once, after unlinking.
            unsafe { g.retire(self.copy, key_free) };
        }
    }
}

/// A key read out of a node (or given by a caller), for comparisons and to
/// hand out: the bytes of a short key copied inline, or a pointer to the
/// bytes of a long one. Copied out of a node by an optimistic read, it
/// means something only once the read validated, and its pointer stays
/// valid while the reader stays pinned.
#[derive(Clone, Copy, Debug)]
pub(super) struct KeyRef {
    head: [u8; PREFIX_LEN],
    len: u32,
    /// The bytes of a key longer than 8, or null.
    ptr: *const u8,
}

impl KeyRef {
    /// A view of the caller's `key`, which must outlive every use of it.
    pub fn of(key: &[u8]) -> Self {
        let len = u32::try_from(key.len()).expect("key longer than 4 GiB");
        if key.len() <= PREFIX_LEN {
            let mut head = [0u8; PREFIX_LEN];
            head[..key.len()].copy_from_slice(key);
            KeyRef {
                head,
                len,
                ptr: ptr::null(),
            }
        } else {
            KeyRef {
                head: [0; PREFIX_LEN],
                len,
                ptr: key.as_ptr(),
            }
        }
    }

    /// The key's bytes.
    ///
    /// # Safety
    /// For a long key, the bytes it points to are still allocated: a key
    /// copy read from a node while pinned (the reader is still pinned), or
    /// the caller's slice given to [`KeyRef::of`] (still borrowed).
    pub unsafe fn bytes(&self) -> &[u8] {
        if self.ptr.is_null() {
            &self.head[..(self.len as usize).min(PREFIX_LEN)]
        } else {
            // SAFETY: per the contract.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len as usize) }
        }
    }
}

// ---------------------------------------------------------------------------
// Header and version protocol.

/// Common first field of both node kinds (`#[repr(C)]`, so a node pointer can
/// be viewed as a header pointer and back).
#[repr(C)]
pub(super) struct Header {
    /// Lock bit, obsolete bit, and a counter bumped by every write-unlock.
    pub version: AtomicU64,
    /// Leaf: entries. Inner: separators (children = count + 1).
    pub count: AtomicU16,
    /// Height above the leaves: 0 for a leaf, 1 for a leaves' parent.
    /// Written before the node is published, never changed afterwards (the
    /// tree grows and shrinks at the root). A descent reads it to know,
    /// before it loads a child, whether the child is a leaf (worth fetching
    /// whole) or an inner node.
    pub level: u8,
    /// Leaf: the slot its latest insert took ([`NO_SLOT`]: none known),
    /// kept under the lock as later inserts and removals move it. An
    /// insert into the slot right after it continues an ascending run,
    /// and a full leaf splits there (`BTree::split_leaf`). Inner: unused.
    pub last: AtomicU8,
}

/// [`Header::last`] when no insert's slot is known.
pub(super) const NO_SLOT: u8 = u8::MAX;

impl Header {
    fn new(level: u8, version: u64) -> Self {
        Header {
            version: AtomicU64::new(version),
            count: AtomicU16::new(0),
            level,
            last: AtomicU8::new(NO_SLOT),
        }
    }

    /// Whether the node is a leaf (level 0).
    #[inline(always)]
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Start an optimistic read: wait while the node is locked, restart if it
    /// is obsolete, and return the (stable) version.
    #[inline]
    pub fn read_begin(&self) -> Result<u64, Restart> {
        let mut spins = 0u32;
        loop {
            let v = self.version.load(Acquire);
            if v & LOCKED == 0 {
                return if v & OBSOLETE != 0 {
                    Err(Restart)
                } else {
                    Ok(v)
                };
            }
            crate::backoff::snooze(&mut spins);
        }
    }

    /// End (or check) an optimistic read: every load made since `read_begin`
    /// returned `v` saw a consistent node iff the version is still `v`.
    #[inline]
    pub fn validate(&self, v: u64) -> Result<(), Restart> {
        // Keep the data loads above before the version re-load (seqlock
        // reader); pairs with the fence after the writer's lock CAS.
        fence(Acquire);
        if self.version.load(Relaxed) == v {
            Ok(())
        } else {
            Err(Restart)
        }
    }

    /// Take the lock if the version is still `v` (nothing changed since the
    /// optimistic read that returned `v`).
    #[inline]
    pub fn try_upgrade(&self, v: u64) -> Result<(), Restart> {
        match self
            .version
            .compare_exchange(v, v | LOCKED, Acquire, Relaxed)
        {
            Ok(_) => {
                // Data stores below must not become visible before the lock
                // bit (seqlock writer).
                fence(Release);
                Ok(())
            }
            Err(_) => Err(Restart),
        }
    }

    /// Release the lock after a modification: the counter moves forward.
    #[inline]
    pub fn unlock(&self) {
        let v = self.version.load(Relaxed);
        debug_assert!(v & LOCKED != 0);
        self.version.store((v & !LOCKED) + STEP, Release);
    }

    /// Release the lock taken from version `v` without having changed
    /// anything: readers that saw `v` before are still consistent.
    #[inline]
    pub fn unlock_unchanged(&self, v: u64) {
        debug_assert_eq!(self.version.load(Relaxed), v | LOCKED);
        self.version.store(v, Release);
    }

    /// Release the lock and mark the node obsolete (it was unlinked).
    #[inline]
    pub fn unlock_obsolete(&self) {
        let v = self.version.load(Relaxed);
        debug_assert!(v & LOCKED != 0);
        self.version
            .store(((v & !LOCKED) + STEP) | OBSOLETE, Release);
    }

    /// The entry/separator count, clamped to the array size so that an
    /// inconsistent optimistic read can never index out of bounds.
    #[inline]
    pub fn count(&self, max: usize) -> usize {
        (self.count.load(Relaxed) as usize).min(max)
    }

    #[inline]
    pub fn set_count(&self, n: usize) {
        self.count.store(n as u16, Relaxed);
    }
}

// ---------------------------------------------------------------------------
// Key slots shared by both node kinds.

/// Prefix of a vacant slot (at or beyond the count). Vacant slots sort
/// after every occupied one, so the binary search can always run over all
/// `N` slots with a fixed, unrolled number of steps.
pub(super) const VACANT: u64 = u64::MAX;

/// Per slot: inline prefix, length class, and the full key copy.
#[repr(C)]
pub(super) struct Slots<const N: usize> {
    pub prefix: [AtomicU64; N],
    pub lc: [AtomicU8; N],
    pub key: [AtomicPtr<u8>; N],
}

impl<const N: usize> Slots<N> {
    pub fn new() -> Self {
        Slots {
            prefix: [const { AtomicU64::new(VACANT) }; N],
            lc: [const { AtomicU8::new(0) }; N],
            key: [const { AtomicPtr::new(ptr::null_mut()) }; N],
        }
    }

    /// Compare the key in slot `i` with `sk`. On an inconsistent optimistic
    /// read the answer is arbitrary (but memory-safe); the caller validates.
    #[inline]
    pub fn cmp(&self, i: usize, sk: &SKey<'_>) -> Cmp {
        let p = self.prefix[i].load(Relaxed);
        if p != sk.prefix {
            return p.cmp(&sk.prefix);
        }
        let lc = self.lc[i].load(Relaxed);
        if lc != sk.lc || lc < LONG {
            return lc.cmp(&sk.lc);
        }
        let kp = self.key[i].load(Acquire);
        if kp.is_null() {
            return Cmp::Less; // vacated under us: validation will fail
        }
        // SAFETY: a non-null key pointer read from a node we reached while
        // pinned is either linked or retired through the epoch after we
        // pinned, so it is still allocated; key copies are immutable.
        let k = unsafe { key_bytes(kp) };
        k.get(PREFIX_LEN..)
            .unwrap_or(&[])
            .cmp(&sk.key[PREFIX_LEN..])
    }

    /// First slot in `0..n` whose key is `>= sk`, and whether it is equal.
    ///
    /// A branch-free binary search on the inline prefixes finds the first
    /// slot whose prefix is not below `sk`'s. That settles the answer at
    /// once unless the slot has `sk`'s very prefix with another length class
    /// or both keys are longer than 8 bytes ([`Slots::settle_tie`], out of
    /// line: keys of at most 8 bytes that differ in their bytes never get
    /// there, and an exact hit of such a key costs one more load).
    #[inline(always)]
    pub fn lower_bound(&self, n: usize, sk: &SKey<'_>) -> (usize, bool) {
        let n = n.min(N);
        // Binary search on the prefixes alone (one load per probe) over all
        // N slots: vacant ones hold VACANT (the largest prefix), so the
        // prefixes are sorted across the whole array and the search needs no
        // bounds but N, a constant: the loop unrolls into log2(N) steps of
        // load, compare, add. An inner node of at most 32 separators (a
        // small tree's root, nearly every TPC-C table's) is searched over
        // its first 32 slots only: five probes instead of eight, the slots
        // past `n` being vacant all the same.
        let base = self.probe_all::<false>(n, sk);
        // The probes leave `base` one short when every probed slot is below
        // sk (their positions reach N - 1 at most): one last comparison
        // settles it. A key with prefix VACANT ranks among vacant slots:
        // clamp.
        let last = base < N && self.prefix[base.min(N - 1)].load(Relaxed) < sk.prefix;
        let i = (base + last as usize).min(n);
        if i == n || self.prefix[i].load(Relaxed) != sk.prefix {
            // Slot i (if any) has a larger prefix: sk sorts right before it.
            return (i, false);
        }
        if self.lc[i].load(Relaxed) == sk.lc && sk.lc < LONG {
            // Same prefix and the same length of at most 8: the same key.
            return (i, true);
        }
        // A copy for the out-of-line call, made here: the caller's key then
        // never has its address taken on the fast path, so its parts can
        // stay in registers instead of being stored for every search.
        let tie = *sk;
        self.settle_tie(i, n, &tie)
    }

    /// The number of slots in `0..n` whose key is at most `sk`: the child
    /// an inner node routes `sk` to ([`Slots::lower_bound`]'s slot, plus
    /// one on an exact hit).
    ///
    /// The same branch-free search on the prefixes, for the last slot whose
    /// prefix is at most `sk`'s. When that slot's prefix is not `sk`'s very
    /// prefix (nearly always), no slot shares it, every slot counted is
    /// below `sk` and every other above it: done, without `lower_bound`'s
    /// look at the slot after and its equality test. A shared prefix goes
    /// to `lower_bound` (length classes, long keys).
    #[inline(always)]
    pub fn upper_bound(&self, n: usize, sk: &SKey<'_>) -> usize {
        let n = n.min(N);
        let base = self.probe_all::<true>(n, sk);
        let last = base < N && self.prefix[base.min(N - 1)].load(Relaxed) <= sk.prefix;
        let i = (base + last as usize).min(n);
        if i > 0 && self.prefix[i - 1].load(Relaxed) == sk.prefix {
            let (j, eq) = self.lower_bound(n, sk);
            return j + eq as usize;
        }
        i
    }

    /// [`Slots::probe_prefixes`] over every slot that can be occupied: the
    /// first [`SMALL`] of a wide node holding at most that many, else all
    /// `N`.
    #[inline(always)]
    fn probe_all<const AT_MOST: bool>(&self, n: usize, sk: &SKey<'_>) -> usize {
        if N > SMALL && n <= SMALL {
            self.probe_prefixes::<AT_MOST>(SMALL / 2, sk)
        } else {
            self.probe_prefixes::<AT_MOST>(N.next_power_of_two() / 2, sk)
        }
    }

    /// The unrolled binary search of [`Slots::lower_bound`] (and, with
    /// `AT_MOST`, of [`Slots::upper_bound`]) over the first `2 * half`
    /// slots (`half` a power of two, a constant once inlined): how many
    /// leading slots have a prefix below `sk`'s (at most `sk`'s), or one
    /// fewer when every probe was (the callers' last comparison settles
    /// it).
    #[inline(always)]
    fn probe_prefixes<const AT_MOST: bool>(&self, mut half: usize, sk: &SKey<'_>) -> usize {
        let mut base = 0usize;
        while half > 0 {
            let probe = base + half - 1;
            // Selected arithmetically: the outcome is unpredictable, a
            // branch would mispredict half of the time.
            let p = self.prefix[probe.min(N - 1)].load(Relaxed);
            let below = if AT_MOST { p <= sk.prefix } else { p < sk.prefix };
            let less = probe < N && below;
            base += half * less as usize;
            half /= 2;
        }
        base
    }

    /// The rest of [`Slots::lower_bound`] when slot `i` (`< n`) is the first
    /// with `sk`'s prefix: a binary search of slots `i..n` by the full order
    /// ([`Slots::cmp`]: prefix, length class, then the bytes past the
    /// prefix of keys longer than 8 bytes). Slots of another prefix or
    /// length class are told apart without their keys; a run of long keys
    /// that share the prefix (a leaf of the customer-name index can be one
    /// run from end to end) costs a key comparison per probe, and no walk
    /// to the run's end first.
    #[cold]
    #[inline(never)]
    fn settle_tie(&self, i: usize, n: usize, sk: &SKey<'_>) -> (usize, bool) {
        let (mut lo, mut hi) = (i, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.cmp(mid, sk) {
                Cmp::Less => lo = mid + 1,
                Cmp::Greater => hi = mid,
                Cmp::Equal => return (mid, true),
            }
        }
        (lo, false)
    }

    /// Store a key in slot `i` (lock held); the slot now owns its copy.
    #[inline]
    pub fn set(&self, i: usize, k: OwnedKey) {
        self.prefix[i].store(k.prefix, Relaxed);
        self.lc[i].store(k.lc, Relaxed);
        self.key[i].store(k.copy, Release);
    }

    /// The key in slot `i` with its copy (lock held): for moving it to
    /// another slot or node, or for retiring it once it is unlinked.
    #[inline]
    pub fn owned(&self, i: usize) -> OwnedKey {
        OwnedKey {
            prefix: self.prefix[i].load(Relaxed),
            lc: self.lc[i].load(Relaxed),
            copy: self.key[i].load(Acquire),
        }
    }

    /// The key in slot `i`, read optimistically (meaningful once the node's
    /// version validates). A long key whose copy pointer was vacated under
    /// us comes out empty; validation then fails.
    #[inline]
    pub fn key_ref(&self, i: usize) -> KeyRef {
        let lc = self.lc[i].load(Relaxed);
        if lc < LONG {
            return KeyRef {
                head: self.prefix[i].load(Relaxed).to_be_bytes(),
                len: lc as u32,
                ptr: ptr::null(),
            };
        }
        let kp = self.key[i].load(Acquire);
        if kp.is_null() {
            return KeyRef {
                head: [0; PREFIX_LEN],
                len: 0,
                ptr: ptr::null(),
            };
        }
        // SAFETY: a non-null copy read while pinned is linked or retired
        // after we pinned: allocated, and immutable; its header is its length.
        let len = unsafe { (kp as *const u32).read() };
        KeyRef {
            head: [0; PREFIX_LEN],
            len,
            // SAFETY: inside the copy's allocation.
            ptr: unsafe { kp.add(KEY_HDR) },
        }
    }

    /// Copy slot `from` of `src` into slot `to` of `self` (locks held / node
    /// unpublished).
    #[inline]
    pub fn copy_from(&self, to: usize, src: &Self, from: usize) {
        self.prefix[to].store(src.prefix[from].load(Relaxed), Relaxed);
        self.lc[to].store(src.lc[from].load(Relaxed), Relaxed);
        self.key[to].store(src.key[from].load(Relaxed), Release);
    }

    /// Vacate slot `i` (lock held): no stale key pointer stays behind.
    #[inline]
    pub fn clear(&self, i: usize) {
        self.prefix[i].store(VACANT, Relaxed);
        self.lc[i].store(0, Relaxed);
        self.key[i].store(ptr::null_mut(), Release);
    }

    /// The heap copy of slot `i`'s key (null for a key of at most 8 bytes
    /// and for a vacant slot).
    #[inline]
    pub fn key_ptr(&self, i: usize) -> *mut u8 {
        self.key[i].load(Acquire)
    }
}

// ---------------------------------------------------------------------------
// Leaves.

/// Leaves and inner nodes put their values or children before the slots,
/// and the slots' key pointers last: a search reads the prefixes, the
/// length classes and one value or child, and needs a key pointer only when
/// long keys tie on their prefix, so those lines are not prefetched.
#[repr(C, align(64))]
pub(crate) struct Leaf {
    pub h: Header,
    pub val: [AtomicU64; LEAF_MAX],
    pub s: Slots<LEAF_MAX>,
    /// The range stamp: the protocols' per-leaf hook (a monotonic maximum
    /// the tree keeps with the leaf's range). See `BTree` docs.
    pub stamp: AtomicU64,
}

impl Leaf {
    /// A new empty, unlocked leaf with the given version, as a raw box.
    pub fn alloc(version: u64) -> *mut Leaf {
        Box::into_raw(Box::new(Leaf {
            h: Header::new(0, version),
            val: [const { AtomicU64::new(0) }; LEAF_MAX],
            s: Slots::new(),
            stamp: AtomicU64::new(0),
        }))
    }

    /// Insert `(k, value)` at slot `i` of a leaf holding `n < LEAF_MAX`
    /// entries (lock held or leaf unpublished).
    pub fn insert_at(&self, i: usize, n: usize, k: OwnedKey, value: u64) {
        debug_assert!(i <= n && n < LEAF_MAX);
        let mut j = n;
        while j > i {
            self.s.copy_from(j, &self.s, j - 1);
            self.val[j].store(self.val[j - 1].load(Relaxed), Relaxed);
            j -= 1;
        }
        self.s.set(i, k);
        self.val[i].store(value, Relaxed);
        self.h.set_count(n + 1);
        self.h.last.store(i as u8, Relaxed);
    }

    /// Remove slot `i` of a leaf holding `n` entries (lock held) and return
    /// its key, which the caller must retire.
    pub fn remove_at(&self, i: usize, n: usize) -> OwnedKey {
        debug_assert!(i < n && n <= LEAF_MAX);
        let kp = self.s.owned(i);
        for j in i..n - 1 {
            self.s.copy_from(j, &self.s, j + 1);
            self.val[j].store(self.val[j + 1].load(Relaxed), Relaxed);
        }
        self.s.clear(n - 1);
        self.val[n - 1].store(0, Relaxed);
        self.h.set_count(n - 1);
        // The latest insert's slot moves down with the keys after `i`.
        let last = self.h.last.load(Relaxed);
        if last != NO_SLOT && last as usize >= i {
            let moved = if last as usize == i { NO_SLOT } else { last - 1 };
            self.h.last.store(moved, Relaxed);
        }
        kp
    }
}

// ---------------------------------------------------------------------------
// Inner nodes.

#[repr(C, align(64))]
pub(super) struct Inner {
    pub h: Header,
    pub child: [AtomicPtr<Header>; INNER_MAX + 1],
    /// Separators: child `i` holds keys in `[sep[i-1], sep[i])`.
    pub s: Slots<INNER_MAX>,
}

impl Inner {
    /// A new empty, unlocked inner node at `level` (1: its children are
    /// leaves), as a raw box.
    pub fn alloc(level: u8, version: u64) -> *mut Inner {
        debug_assert!(level >= 1);
        Box::into_raw(Box::new(Inner {
            h: Header::new(level, version),
            child: [const { AtomicPtr::new(ptr::null_mut()) }; INNER_MAX + 1],
            s: Slots::new(),
        }))
    }

    /// Index of the child whose range holds `sk` (separators `<= sk`).
    #[inline]
    pub fn route(&self, n: usize, sk: &SKey<'_>) -> usize {
        self.s.upper_bound(n, sk)
    }

    /// Child `pos`'s pointer (null while a writer is mid-change), with its
    /// lines prefetched as a leaf's: the first half of
    /// [`Inner::child_begin`], for a batched descent that issues every key's
    /// child fetch before it reads any of them (the caller then reads the
    /// child's version and re-validates this node, in that order). The
    /// batched descent's rounds are at the leaves' parents (by the tree's
    /// height hint), so the child is almost always a leaf; an inner child
    /// (the hint one off while the root changes) is only fetched less
    /// completely.
    #[inline]
    pub fn child_prefetch(&self, pos: usize) -> *const Header {
        let c = self.child[pos.min(INNER_MAX)].load(Acquire);
        if !c.is_null() {
            prefetch_leaf(c as *const u8);
        }
        c
    }

    /// Optimistically follow child `pos` of this node (read at version `v`):
    /// returns the child and its stable version, after re-validating this node
    /// so that the child's range was the one this node gave it. The child's
    /// lines are prefetched first, by this node's level: a leaf's search
    /// lines under a leaves' parent, else an inner node's header, child
    /// pointers and prefixes (65 lines at 256 separators; its length
    /// classes and key pointers are left out).
    #[inline]
    pub fn child_begin(&self, pos: usize, v: u64) -> Result<(*const Header, u64), Restart> {
        self.follow::<true>(pos, v)
    }

    /// [`Inner::child_begin`] without the prefetch of the child's lines:
    /// for the upper levels of a batched descent, whose nodes are few and
    /// cached (the prefetch would be instructions spent for nothing).
    #[inline]
    pub fn child_begin_cached(&self, pos: usize, v: u64) -> Result<(*const Header, u64), Restart> {
        self.follow::<false>(pos, v)
    }

    #[inline(always)]
    fn follow<const PREFETCH: bool>(&self, pos: usize, v: u64) -> Result<(*const Header, u64), Restart> {
        let c = self.child[pos.min(INNER_MAX)].load(Acquire);
        if c.is_null() {
            return Err(Restart);
        }
        if PREFETCH {
            if self.h.level == 1 {
                prefetch_leaf(c as *const u8);
            } else {
                prefetch_inner_search(c as *const u8);
            }
        }
        // SAFETY: a non-null child pointer read while pinned points to a node
        // that is linked or retired (not freed) since we pinned.
        let cv = unsafe { &*c }.read_begin()?;
        self.h.validate(v)?;
        Ok((c, cv))
    }

    /// Insert separator `kp` at `pos` and `right` as child `pos + 1` into a
    /// node holding `n < INNER_MAX` separators (lock held or unpublished).
    pub(crate) fn insert_child(&self, pos: usize, n: usize, kp: OwnedKey, right: *mut Header) {
        debug_assert!(pos <= n && n < INNER_MAX);
        let mut j = n;
        while j > pos {
            self.s.copy_from(j, &self.s, j - 1);
            self.child[j + 1].store(self.child[j].load(Relaxed), Release);
            j -= 1;
        }
        self.s.set(pos, kp);
        self.child[pos + 1].store(right, Release);
        self.h.set_count(n + 1);
    }

    /// Remove child `pos` of a node holding `n >= 1` separators together with
    /// one adjacent separator (lock held); returns the separator, which the
    /// caller must retire.
    pub fn remove_child(&self, pos: usize, n: usize) -> OwnedKey {
        debug_assert!(n >= 1 && pos <= n);
        // Child 0 goes with separator 0 (child 1 inherits its lower fence);
        // any other child `pos` goes with separator `pos - 1` (child
        // `pos - 1` inherits its upper fence).
        let si = pos.saturating_sub(1);
        let kp = self.s.owned(si);
        for j in si..n - 1 {
            self.s.copy_from(j, &self.s, j + 1);
        }
        self.s.clear(n - 1);
        for j in pos..n {
            self.child[j].store(self.child[j + 1].load(Relaxed), Release);
        }
        self.child[n].store(ptr::null_mut(), Release);
        self.h.set_count(n - 1);
        kp
    }
}

/// Cache lines of a leaf that a search reads: everything up to the key
/// pointers is prefetched, so that the binary search's probes and the final
/// value load are all in flight at once instead of one dependent miss after
/// another.
const LEAF_LINES: usize =
    (std::mem::offset_of!(Leaf, s) + std::mem::offset_of!(Slots<LEAF_MAX>, key)).div_ceil(64);

/// Hint the CPU to fetch the lines of an inner node that a descent reads:
/// the header, the child pointers and the separators' prefixes (not the
/// length classes and key pointers, which only ties read). The child
/// pointers are fetched whole although the search picks one: fetched after
/// the search, that line was one more dependent miss, and a lone lookup in
/// a 10M-key tree took 376 ns instead of 296 (criterion, `index/get`).
#[inline(always)]
fn prefetch_inner_search(p: *const u8) {
    let off = std::mem::offset_of!(Inner, s) + std::mem::offset_of!(Slots<INNER_MAX>, lc);
    crate::storage::prefetch_bytes(p, off);
}

/// Hint the CPU to fetch a leaf we are about to search (only its lines).
#[inline(always)]
fn prefetch_leaf(p: *const u8) {
    crate::storage::prefetch_bytes(p, LEAF_LINES * 64);
}

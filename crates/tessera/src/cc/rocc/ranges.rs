//! ROCC's logical ranges (Cai et al., section 3.3.1): each table's key space
//! cut into contiguous, disjoint ranges `[start, end)` of about equal record
//! counts, each with a lock-free circular array of the writers that
//! registered in it.
//!
//! *The list.* A range's writers are kept in a circular array of `slots`
//! words. Registering takes the next position `q` with one fetch-and-add on
//! the range's `head` and stores the writer's address, tagged with `q`'s lap
//! (`q / slots`, 16 bits), into slot `q % slots`. A predicate remembers the
//! head when it was constructed (`p.ts`); validation examines positions
//! `p.ts..head`. The book keeps the array sorted by commit stamp; here it is
//! in registration order (a writer registers before it takes its stamp, as
//! Algorithm 3.1 orders them), and each entry carries its writer's stamp,
//! which validation compares (see `WriterEntry`).
//!
//! *A full array.* The book blocks a registering writer until garbage
//! collection frees a slot, and frees entries once the oldest running
//! transaction started after their commit. A writer blocked while it runs
//! keeps that oldest start where it is, so a full array under two such
//! writers would never drain (the book's own rule deadlocks). Here the array
//! never blocks: a registration overwrites the oldest lap, and a validator
//! that needs a position that has been overwritten aborts
//! (`ConflictReason::RangeOverflow`), which is safe and counted. Garbage
//! collection of the entries themselves is the memory epoch (see
//! `WriterEntry`), so no collector thread scans the lists.
//!
//! *Re-partitioning* (the book's section on it is missing, "Section ??"):
//! ranges only split. Registrations count the records each range gains;
//! when a range holds more than twice the target, a worker, between
//! transactions, walks it and cuts it into ranges of the target size. The
//! new lists go into a new map; the old list is *sealed* before the new map
//! is published. A writer that finds its list sealed after registering
//! registers again in the new map; a validator whose predicate's list is
//! sealed aborts (`ConflictReason::RangeSplit`). Ranges never merge: a table
//! that shrinks keeps its finer ranges, which costs registrations and
//! predicates, never correctness.

use std::ops::Bound;
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use crate::catalog::{Table, TableId};
use crate::cc::cuts::Cuts;
use crate::epoch::Guard;
use crate::index::{OrderedIndex, Unobserved};

/// A committing writer as the range lists see it: its commit stamp and the
/// keys it wrote. One per writing commit, recycled through the memory epoch
/// by its worker (see `RoccLocal`).
pub(crate) struct WriterEntry {
    /// 0 until the writer takes its commit stamp (Algorithm 3.1 line 5),
    /// then the stamp; [`ABORTED`] is or-ed in if it fails after
    /// registering (the book keeps aborted writers in the lists until
    /// garbage collection; flagging them spares their readers false aborts).
    pub cts: AtomicU64,
    /// The written keys, `[table u32][len u32][key]...`, in write-set order.
    /// Written only while no list reaches the entry (before it is
    /// registered, or once the memory epoch says no validator can hold it).
    pub keys: Vec<u8>,
}

/// The bit of `WriterEntry::cts` that marks an aborted writer.
pub(crate) const ABORTED: u64 = 1 << 63;

impl WriterEntry {
    /// Whether the writer wrote a key of `table` in `[lo, hi)` (bounds as
    /// the predicate holds them).
    pub fn wrote_in(&self, table: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        let mut k = &self.keys[..];
        while k.len() >= 8 {
            let t = u32::from_le_bytes(k[..4].try_into().expect("4 bytes"));
            let n = u32::from_le_bytes(k[4..8].try_into().expect("4 bytes")) as usize;
            let key = &k[8..8 + n];
            k = &k[8 + n..];
            if t == table.0 && in_bounds(key, lo, hi) {
                return true;
            }
        }
        false
    }

    /// Append a written key.
    pub fn push_key(&mut self, table: TableId, key: &[u8]) {
        self.keys.extend_from_slice(&table.0.to_le_bytes());
        self.keys
            .extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.keys.extend_from_slice(key);
    }
}

/// `key` lies within `(lo, hi)`.
#[inline]
pub(crate) fn in_bounds(key: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let above = match lo {
        Bound::Unbounded => true,
        Bound::Included(l) => key >= l,
        Bound::Excluded(l) => key > l,
    };
    above
        && match hi {
            Bound::Unbounded => true,
            Bound::Included(h) => key <= h,
            Bound::Excluded(h) => key < h,
        }
}

/// What a validator finds at a position of a list.
pub(crate) enum Slot<'g> {
    /// The writer registered there.
    Writer(&'g WriterEntry),
    /// Overwritten by a later lap: the position is lost.
    Overwritten,
}

const PTR_BITS: u32 = 48;
/// How many times a validator yields waiting for a claimed position's
/// registrant to publish before it aborts instead.
const AT_YIELDS: u32 = 100_000;
const PTR_MASK: u64 = (1 << PTR_BITS) - 1;

/// One logical range: `[start, end)` and its circular list of writers.
pub(crate) struct RangeList {
    /// Inclusive start (empty: the table's first range).
    pub start: Box<[u8]>,
    /// Exclusive end (`None`: the table's last range).
    pub end: Option<Box<[u8]>>,
    /// Next registration position.
    head: AtomicU64,
    /// Set once a split replaced this range (before the new map is
    /// published).
    sealed: AtomicBool,
    /// Records at partition time plus the inserts registered since.
    count: AtomicI64,
    /// A split has been asked for.
    split_wanted: AtomicBool,
    slots: Box<[AtomicU64]>,
    /// Where the slot array goes when the list is dropped (a table's
    /// lists; GWV's one list has none).
    pool: Option<Arc<SlotPool>>,
    /// Scans in flight over this range (`RoccRegistration::Scanned`): on
    /// a line of its own, which writers only read while nobody scans.
    scanners: ScanCount,
}

impl RangeList {
    fn new(
        start: Box<[u8]>,
        end: Option<Box<[u8]>>,
        records: i64,
        slots: usize,
        pool: Option<&Arc<SlotPool>>,
    ) -> RangeList {
        let n = slots.max(1);
        RangeList {
            start,
            end,
            head: AtomicU64::new(0),
            sealed: AtomicBool::new(false),
            count: AtomicI64::new(records),
            split_wanted: AtomicBool::new(false),
            slots: match pool {
                Some(p) => p.take(n),
                None => zeroed_slots(n),
            },
            pool: pool.cloned(),
            scanners: ScanCount::default(),
        }
    }

    /// The scans in flight over this range (`RoccRegistration::Scanned`):
    /// a scan counts itself in before it constructs its predicate here, so
    /// that a writer that has locked its write set and then finds no
    /// scanner has its locks seen by every row the scan reads (see
    /// `cc::rocc`); it counts itself out once when its transaction ends,
    /// while still pinned.
    #[inline]
    pub fn scans(&self) -> &ScanCount {
        &self.scanners
    }

    /// One range over every key (GWV's global list).
    pub fn whole(slots: usize) -> Arc<RangeList> {
        Arc::new(RangeList::new(Box::from(&[][..]), None, 0, slots, None))
    }

    /// The range version a predicate records before its scan (the book's
    /// `p.ts`): the next registration position.
    #[inline]
    pub fn version(&self) -> u64 {
        self.head.load(Ordering::SeqCst)
    }

    /// Whether a split has replaced this range.
    #[inline]
    pub fn sealed(&self) -> bool {
        self.sealed.load(Ordering::SeqCst)
    }

    /// Whether `[lo, hi)` (a predicate's scope) covers the whole range.
    pub fn covered_by(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        let from_start = match lo {
            Bound::Unbounded => true,
            Bound::Included(l) => l <= &self.start[..],
            // Every key of the range is above `l` iff `start` is.
            Bound::Excluded(l) => l < &self.start[..],
        };
        from_start
            && match (&self.end, hi) {
                (_, Bound::Unbounded) => true,
                (None, _) => false,
                // Keys below `end` are all <= `h` iff `end` <= successor(h),
                // i.e. `end` <= `h` or `end` is `h` + 0x00.
                (Some(e), Bound::Included(h)) => {
                    &e[..] <= h || (e.len() == h.len() + 1 && e.starts_with(h) && e[h.len()] == 0)
                }
                (Some(e), Bound::Excluded(h)) => &e[..] <= h,
            }
    }

    /// Register `w` (Algorithm 3.1 line 3): [`RangeList::claim`], then
    /// [`RangeList::publish`]. Returns true if it asked for a split.
    pub(crate) fn register(&self, w: *const WriterEntry, inserted: i64, target: i64) -> bool {
        let q = self.claim();
        self.publish(q, w);
        self.count(inserted, target)
    }

    /// Hint the CPU to fetch the registration head (a commit registering
    /// in several ranges overlaps their misses).
    #[inline(always)]
    pub fn prefetch_head(&self) {
        crate::storage::prefetch_bytes(&self.head as *const AtomicU64 as *const u8, 8);
    }

    /// Hint the CPU to fetch the scan count (`RoccRegistration::Scanned`).
    #[inline(always)]
    pub fn prefetch_scanners(&self) {
        crate::storage::prefetch_bytes(&*self.scanners.0 as *const AtomicU64 as *const u8, 8);
    }

    /// Take the next registration position, and prefetch its slot.
    #[inline]
    pub fn claim(&self) -> u64 {
        let q = self.head.fetch_add(1, Ordering::SeqCst);
        let n = self.slots.len() as u64;
        crate::storage::prefetch_bytes(
            &self.slots[(q % n) as usize] as *const AtomicU64 as *const u8,
            8,
        );
        q
    }

    /// Store `w`, tagged with `q`'s lap, into position `q`'s slot (unless
    /// a later lap is already there).
    #[inline]
    pub(crate) fn publish(&self, q: u64, w: *const WriterEntry) {
        let n = self.slots.len() as u64;
        let cur = self.slots[(q % n) as usize].load(Ordering::Acquire);
        self.publish_over(q, w, cur);
    }

    /// [`RangeList::publish`]'s store, given the word `cur` last read from
    /// the slot (with acquire ordering).
    ///
    /// Before every attempt it asks the head whether `q` has been lapped.
    /// The lap tag in the word has only 16 bits: a registrant preempted
    /// between its check and its store for 65,536 laps or a multiple
    /// (which a list of a few slots reaches in well under a second) finds
    /// a newer writer's word whose tag equals its own. With a single check
    /// before the loop, its compare-exchange then failed on that word,
    /// took it as "not newer" and overwrote it, and a validator reading
    /// that position met the wrong writer. The head is the authority on
    /// laps: a word read with acquire ordering from a position claimed a
    /// lap (or more) after `q` comes after that claim, so the head read
    /// next shows `q` lapped. A stall between that head read and the
    /// compare-exchange can still let the exchange succeed only if the slot
    /// then holds the very word read before: the same 16-bit lap and the
    /// same writer-entry address.
    #[inline]
    fn publish_over(&self, q: u64, w: *const WriterEntry, mut cur: u64) {
        let n = self.slots.len() as u64;
        debug_assert_eq!(w as u64 & !PTR_MASK, 0, "a user-space address fits 48 bits");
        let word = tag(q / n) | (w as u64 & PTR_MASK);
        let slot = &self.slots[(q % n) as usize];
        loop {
            if self.head.load(Ordering::SeqCst) > q + n {
                // Lapped while preempted: a newer word may be there already.
                return;
            }
            // A later lap got here first (this registration raced a whole
            // lap ahead): leave it; a validator needing `q` sees a newer
            // lap and aborts.
            if cur != 0 && lap_newer(cur >> PTR_BITS, q / n) {
                return;
            }
            match slot.compare_exchange_weak(cur, word, Ordering::Release, Ordering::Acquire) {
                Ok(_) => return,
                Err(c) => cur = c,
            }
        }
    }

    /// Count the records a registered writer adds (negative: removes);
    /// true if the range now asks for a split.
    #[inline]
    pub fn count(&self, inserted: i64, target: i64) -> bool {
        if inserted != 0 {
            let c = self.count.fetch_add(inserted, Ordering::Relaxed) + inserted;
            if c > 2 * target {
                // Asked again by every registration past the bound, so a
                // request the splitter's reset raced with is not lost.
                self.split_wanted.store(true, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// The writer registered at position `q` (which must be below the
    /// head the caller read), waiting for a registration still between its
    /// fetch-and-add and its store.
    #[inline]
    pub fn at<'g>(&self, q: u64, _g: &'g Guard<'_>) -> Slot<'g> {
        let n = self.slots.len() as u64;
        let slot = &self.slots[(q % n) as usize];
        let mut spins = 0u32;
        loop {
            let cur = slot.load(Ordering::Acquire);
            // The head is the authority on laps (16 tag bits wrap): once a
            // position a lap later has been claimed, `q` is lost. Read
            // after the slot, so a word read before that claim is `q`'s
            // or an older lap's, never a newer one.
            if self.head.load(Ordering::SeqCst) > q + n {
                return Slot::Overwritten;
            }
            if cur != 0 && cur >> PTR_BITS == tag(q / n) >> PTR_BITS {
                let p = (cur & PTR_MASK) as *const WriterEntry;
                // SAFETY: the writer registered at `q` after the caller
                // constructed its predicate, so after the caller pinned
                // `_g`; it retires its entry through its own guard, which
                // was pinned while the caller's was, so the memory epoch
                // keeps the entry until `_g` is gone (see
                // `RoccLocal::entry`). The slot's release store published
                // the entry's keys.
                return Slot::Writer(unsafe { &*p });
            }
            // Claimed, not published yet (a few instructions, unless the
            // registrant was preempted). Past a bound, give up the way an
            // overwritten position does: an abort is always safe.
            spins += 1;
            if spins > 64 {
                if spins > 64 + AT_YIELDS {
                    return Slot::Overwritten;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Whether positions from `from` on are still all in the array.
    #[inline]
    pub fn holds_from(&self, from: u64, head: u64) -> bool {
        head - from <= self.slots.len() as u64
    }
}

/// Whether the record at index value `v` holds a committed row (not a
/// deleted one, nor one a running insert has not committed yet): what the
/// range counts are counts of.
fn present(v: u64) -> bool {
    // SAFETY: an index value is a record head of ROCC's layout (Silo's
    // `Record`), reached while the caller's guard pins the epoch.
    let rec = unsafe { &*(v as *const crate::storage::Record) };
    rec.tid_word() & crate::storage::tid::ABSENT == 0
}

/// `n` zeroed slots from a zeroed allocation (`calloc`): fresh pages are
/// not touched until a registration reaches them, so a list that few
/// writers use (most of them, with 5,000 slots) costs no page faults for
/// the rest of its array. (Writing the zeros, as collecting `AtomicU64`s
/// does, faulted every page of every list; under TPC-C, whose appends
/// split a range every 610 inserts, that was a fifth of the run.)
fn zeroed_slots(n: usize) -> Box<[AtomicU64]> {
    let words: Box<[u64]> = vec![0u64; n].into_boxed_slice();
    let len = words.len();
    let p = Box::into_raw(words) as *mut u64 as *mut AtomicU64;
    // SAFETY: `AtomicU64` has the size, alignment and bit validity of
    // `u64` (documented), so the allocation of `len` u64s is one of `len`
    // AtomicU64s, and the box frees it with the same layout.
    unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) }
}

/// The slot arrays of a table's dropped lists, zeroed again, for its next
/// lists. A split replaces a range's list with new ones; the old list is
/// dropped once the memory epoch has retired the map that held it (no
/// validator or writer can reach it then). Under appends (TPC-C's orders
/// and order lines) a table's last range splits every few hundred inserts,
/// and allocating each new 40 KB array put the kernel's page zeroing at 7%
/// of a ROCC TPC-C run; a dropped array needs only its used slots zeroed
/// (positions below its head), in the dropping thread.
#[derive(Default)]
pub(crate) struct SlotPool(Mutex<Vec<Box<[AtomicU64]>>>);

/// The most slot arrays a table keeps for reuse.
const POOL_MAX: usize = 64;

impl SlotPool {
    /// A zeroed array of `n` slots: a dropped list's, or a fresh one.
    fn take(&self, n: usize) -> Box<[AtomicU64]> {
        let reused = {
            let mut free = self.0.lock();
            free.iter()
                .rposition(|s| s.len() == n)
                .map(|i| free.swap_remove(i))
        };
        reused.unwrap_or_else(|| zeroed_slots(n))
    }

    /// Keep `s` (zeroed) for a later list, unless enough are kept.
    fn give(&self, s: Box<[AtomicU64]>) {
        let mut free = self.0.lock();
        if free.len() < POOL_MAX {
            free.push(s);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

impl Drop for RangeList {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        let mut slots = std::mem::take(&mut self.slots);
        // Every registration took a position below the head and stored only
        // into that position's slot.
        let used = (*self.head.get_mut()).min(slots.len() as u64) as usize;
        for s in &mut slots[..used] {
            *s.get_mut() = 0;
        }
        pool.give(slots);
    }
}

/// The tag of lap `lap`, in the slot word's top bits.
#[inline]
fn tag(lap: u64) -> u64 {
    (lap & 0xFFFF) << PTR_BITS
}

/// Whether the stored 16-bit lap `stored` is later than lap `lap`.
#[inline]
fn lap_newer(stored: u64, lap: u64) -> bool {
    let d = (stored as u16).wrapping_sub(lap as u16) as i16;
    d > 0
}

/// One partition of a table: the ranges in key order, and their cuts (a
/// copy of each list's start, kept in one array for the search).
pub(crate) struct RangeMap {
    pub lists: Vec<Arc<RangeList>>,
    cuts: Cuts,
}

impl RangeMap {
    fn new(lists: Vec<Arc<RangeList>>) -> RangeMap {
        let cuts = Cuts::new(lists.iter().map(|l| l.start.clone()).collect());
        RangeMap { lists, cuts }
    }

    /// The index of the range holding `key`.
    #[inline]
    pub fn find(&self, key: &[u8]) -> usize {
        self.cuts.find(key)
    }

    /// The index of the first range that can hold keys within `lo`.
    pub fn first_for(&self, lo: Bound<&[u8]>) -> usize {
        self.cuts.first_for(lo)
    }

    /// The index of the last range that can hold keys within `hi`.
    pub fn last_for(&self, hi: Bound<&[u8]>) -> usize {
        self.cuts.last_for(hi)
    }
}

/// Scans in flight over a range or a table (`RoccRegistration::Scanned`),
/// on a cache line of its own: raised by a scan, then a `SeqCst` fence,
/// before it reads anything it covers; lowered when its transaction ends;
/// read by a writer after its locks and a fence (see `cc::rocc`).
#[derive(Default)]
pub(crate) struct ScanCount(CachePadded<AtomicU64>);

impl ScanCount {
    /// A scan counts itself in, then a fence.
    #[inline]
    pub fn begins(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// The end of a transaction that counted itself in.
    #[inline]
    pub fn done(&self) {
        let was = self.0.fetch_sub(1, Ordering::Release);
        debug_assert!(was > 0);
    }

    /// Whether a scan is in flight (a writer asks after locking its write
    /// set and a `fence(SeqCst)`).
    #[inline]
    pub fn any(&self) -> bool {
        self.0.load(Ordering::SeqCst) != 0
    }

    /// Whether a scan other than the caller's own is in flight: the count
    /// less the `mine` times the caller counted itself in (a writer's own
    /// predicates skip its own entry, so its own scans need no
    /// registration).
    #[inline]
    pub fn others(&self, mine: usize) -> bool {
        self.0.load(Ordering::SeqCst) > mine as u64
    }
}

/// A table's current partition.
pub(crate) struct TableRanges {
    map: AtomicPtr<RangeMap>,
    /// Serializes splits of this table.
    split: Mutex<()>,
    /// Some range asked for a split.
    pending: AtomicBool,
    /// Target records per range.
    target: i64,
    slots: usize,
    /// Slot arrays of this table's dropped lists.
    pool: Arc<SlotPool>,
    /// Scans of this table in flight (`RoccRegistration::Scanned`): the
    /// table-wide gate before the ranges' own counts. A writer that finds
    /// it zero skips its updates' ranges here without looking them up.
    scanners: ScanCount,
}

// SAFETY: the map pointer is only replaced under `split` and freed through
// the memory epoch; everything else is atomics or immutable.
unsafe impl Send for TableRanges {}
// SAFETY: as above.
unsafe impl Sync for TableRanges {}

impl TableRanges {
    /// Partition `table` as it is now into ranges of `target` records.
    pub fn partition(table: &Table, target: usize, slots: usize, g: &Guard<'_>) -> TableRanges {
        let target = target.max(1);
        let pool = Arc::new(SlotPool::default());
        let mut lists = Vec::new();
        let mut start: Box<[u8]> = Box::from(&[][..]);
        let mut n = 0usize;
        table.index.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            g,
            Unobserved,
            |k, v| {
                if !present(v) {
                    // Being inserted: its writer counts it when it registers.
                    return true;
                }
                if n == target {
                    let next: Box<[u8]> = k.into();
                    let s = std::mem::replace(&mut start, next.clone());
                    lists.push(Arc::new(RangeList::new(
                        s,
                        Some(next),
                        n as i64,
                        slots,
                        Some(&pool),
                    )));
                    n = 0;
                }
                n += 1;
                true
            },
        );
        lists.push(Arc::new(RangeList::new(
            start,
            None,
            n as i64,
            slots,
            Some(&pool),
        )));
        TableRanges {
            map: AtomicPtr::new(Box::into_raw(Box::new(RangeMap::new(lists)))),
            split: Mutex::new(()),
            pending: AtomicBool::new(false),
            target: target as i64,
            slots,
            pool,
            scanners: ScanCount::default(),
        }
    }

    /// A partition of one range that never splits (GWV's global list,
    /// shared by every table).
    pub fn single(list: Arc<RangeList>, slots: usize) -> TableRanges {
        TableRanges {
            map: AtomicPtr::new(Box::into_raw(Box::new(RangeMap::new(vec![list])))),
            split: Mutex::new(()),
            pending: AtomicBool::new(false),
            target: i64::MAX / 4,
            slots,
            pool: Arc::default(),
            scanners: ScanCount::default(),
        }
    }

    /// The scans of this table in flight: raised by each scan before its
    /// ranges' counts (see `cc::rocc`).
    #[inline]
    pub fn scans(&self) -> &ScanCount {
        &self.scanners
    }

    /// The current map, for as long as `g` pins the epoch.
    #[inline]
    pub fn map<'g>(&self, _g: &'g Guard<'_>) -> &'g RangeMap {
        // SAFETY: replaced maps are retired through the memory epoch, which
        // `_g` pins; the current one lives until the table's ranges drop.
        unsafe { &*self.map.load(Ordering::SeqCst) }
    }

    /// Target records per range.
    #[inline]
    pub fn target(&self) -> i64 {
        self.target
    }

    /// A range asked for a split.
    #[inline]
    pub fn want_split(&self) {
        self.pending.store(true, Ordering::Relaxed);
    }

    /// Whether a range asked for a split.
    #[inline]
    pub fn split_pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Split every range that asked for it. Called between transactions.
    pub fn split_wanted(&self, table: &Table, g: &Guard<'_>) {
        let Some(_lock) = self.split.try_lock() else {
            return;
        };
        self.pending.store(false, Ordering::Relaxed);
        // Re-read under the lock: another worker may have split already.
        let map = self.map(g);
        let mut lists = Vec::with_capacity(map.lists.len() + 4);
        let mut sealed = Vec::new();
        for l in &map.lists {
            if !l.split_wanted.load(Ordering::Relaxed) || l.sealed() {
                lists.push(l.clone());
                continue;
            }
            // Walk the range and cut it every `target` records.
            let lo = Bound::Included(&l.start[..]);
            let hi = match &l.end {
                Some(e) => Bound::Excluded(&e[..]),
                None => Bound::Unbounded,
            };
            let mut starts: Vec<Box<[u8]>> = vec![l.start.clone()];
            let mut counts = vec![0i64];
            table.index.scan(lo, hi, false, g, Unobserved, |k, v| {
                if !present(v) {
                    return true;
                }
                if *counts.last().expect("one") == self.target {
                    starts.push(k.into());
                    counts.push(0);
                }
                *counts.last_mut().expect("one") += 1;
                true
            });
            if starts.len() == 1 {
                // Its inserts were deleted again: nothing to cut; forget the
                // count that asked.
                l.count.store(counts[0], Ordering::Relaxed);
                l.split_wanted.store(false, Ordering::Relaxed);
                lists.push(l.clone());
                continue;
            }
            for i in 0..starts.len() {
                let end = match starts.get(i + 1) {
                    Some(s) => Some(s.clone()),
                    None => l.end.clone(),
                };
                lists.push(Arc::new(RangeList::new(
                    starts[i].clone(),
                    end,
                    counts[i],
                    self.slots,
                    Some(&self.pool),
                )));
            }
            sealed.push(l.clone());
        }
        if sealed.is_empty() {
            return;
        }
        // Seal first, then publish: a writer that registered in an old list
        // and finds it unsealed registered before every validator that
        // could miss it checked the seal (see the module docs).
        for l in &sealed {
            l.sealed.store(true, Ordering::SeqCst);
        }
        let new = Box::into_raw(Box::new(RangeMap::new(lists)));
        let old = self.map.swap(new, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        // SAFETY: `old` is unreachable for threads that load the map from
        // now on; pinned readers keep it through the epoch.
        unsafe { g.retire_box(old) };
    }
}

impl Drop for TableRanges {
    fn drop(&mut self) {
        // SAFETY: the last owner; nothing can reach the map any more.
        drop(unsafe { Box::from_raw(*self.map.get_mut()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_of(starts: &[Vec<u8>]) -> RangeMap {
        let lists = starts
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let end = starts.get(i + 1).map(|e| e.clone().into_boxed_slice());
                Arc::new(RangeList::new(
                    s.clone().into_boxed_slice(),
                    end,
                    0,
                    4,
                    None,
                ))
            })
            .collect();
        RangeMap::new(lists)
    }

    /// The map's search finds the list whose bounds hold the key (the
    /// search itself is `cc::cuts`'s, tested there).
    #[test]
    fn the_map_finds_the_list_holding_a_key() {
        let starts: Vec<Vec<u8>> = vec![vec![], b"d".to_vec(), b"m".to_vec()];
        let m = map_of(&starts);
        for k in [&b""[..], b"c", b"d", b"l\xff", b"m", b"zz"] {
            let l = &m.lists[m.find(k)];
            assert!(&l.start[..] <= k && l.end.as_deref().is_none_or(|e| k < e));
        }
        assert_eq!(m.last_for(Bound::Excluded(b"m")), 1);
    }

    /// A scope covers a range exactly when every key of the range is in it.
    #[test]
    fn covered_by_is_exact() {
        let l = RangeList::new(Box::from(&b"b"[..]), Some(Box::from(&b"d"[..])), 0, 4, None);
        assert!(l.covered_by(Bound::Included(b"b"), Bound::Excluded(b"d")));
        assert!(l.covered_by(Bound::Unbounded, Bound::Unbounded));
        assert!(!l.covered_by(Bound::Excluded(b"a"), Bound::Included(b"c\xff\xff")));
        // "c\0" is the successor of "c": keys below "d" are not all <= "c".
        assert!(!l.covered_by(Bound::Included(b"b"), Bound::Included(b"c")));
        assert!(!l.covered_by(Bound::Excluded(b"b"), Bound::Unbounded));
        assert!(l.covered_by(Bound::Excluded(b"a"), Bound::Unbounded));
        let tight = RangeList::new(
            Box::from(&b"b"[..]),
            Some(Box::from(&b"c\0"[..])),
            0,
            4,
            None,
        );
        assert!(tight.covered_by(Bound::Included(b"b"), Bound::Included(b"c")));
    }

    /// A committed writer with no keys, for the list tests.
    fn test_entry() -> Box<WriterEntry> {
        Box::new(WriterEntry {
            cts: AtomicU64::new(1),
            keys: Vec::new(),
        })
    }

    /// A registrant preempted between its lap check and its store for a
    /// multiple of 65,536 laps (the lap tag's width) must not overwrite the
    /// newer writer whose word now carries the same tag.
    #[test]
    fn a_registrant_lapped_65536_times_leaves_the_newer_word() {
        let epochs = crate::epoch::Epochs::new(2, 1);
        let local = epochs.register().unwrap();
        let g = local.pin();
        let l = RangeList::new(Box::from(&[][..]), None, 0, 1, None);
        let (stale, newer) = (test_entry(), test_entry());
        // The stale registrant claims position 0 and reads the empty slot,
        // then stalls.
        let q = l.claim();
        let seen = l.slots[0].load(Ordering::Acquire);
        // 65,536 laps of one slot later, a writer registers at the position
        // whose tag equals position 0's.
        let lap = 1u64 << 16;
        l.head.store(lap, Ordering::SeqCst);
        l.register(&*newer, 0, 10);
        assert!(matches!(l.at(lap, &g), Slot::Writer(e) if std::ptr::eq(e, &*newer)));
        // The stale registrant resumes: its compare-exchange fails on the
        // newer word, and it must give up rather than retry over it.
        l.publish_over(q, &*stale, seen);
        assert!(matches!(l.at(lap, &g), Slot::Writer(e) if std::ptr::eq(e, &*newer)));
    }

    /// A position a lap behind the head is overwritten, never read as
    /// another writer's; a published position reads back its writer.
    #[test]
    fn overwritten_positions_are_reported() {
        let epochs = crate::epoch::Epochs::new(2, 1);
        let local = epochs.register().unwrap();
        let g = local.pin();
        let l = RangeList::new(Box::from(&[][..]), None, 0, 2, None);
        let w: Vec<Box<WriterEntry>> = (0..4).map(|_| test_entry()).collect();
        for e in &w[..2] {
            l.register(&**e, 0, 10);
        }
        assert!(matches!(l.at(1, &g), Slot::Writer(e) if std::ptr::eq(e, &*w[1])));
        for e in &w[2..] {
            l.register(&**e, 0, 10);
        }
        assert!(matches!(l.at(0, &g), Slot::Overwritten));
        assert!(matches!(l.at(3, &g), Slot::Writer(e) if std::ptr::eq(e, &*w[3])));
        assert!(!l.holds_from(0, l.version()));
        assert!(l.holds_from(2, l.version()));
    }

    /// A dropped list's slot array goes back to its table's pool zeroed
    /// (only its used positions needed it), and the next list of that size
    /// takes it instead of a fresh allocation; a full pool keeps no more.
    #[test]
    fn dropped_lists_give_their_slots_back_zeroed() {
        let w = WriterEntry {
            cts: AtomicU64::new(1),
            keys: Vec::new(),
        };
        let pool = Arc::new(SlotPool::default());
        for registrations in [0u64, 3, 8, 21] {
            let l = RangeList::new(Box::from(&[][..]), None, 0, 8, Some(&pool));
            assert_eq!(pool.len(), 0, "the new list took the pooled array");
            for _ in 0..registrations {
                l.register(&w, 0, 1000);
            }
            let addr = l.slots.as_ptr() as usize;
            drop(l);
            assert_eq!(pool.len(), 1);
            let again = RangeList::new(Box::from(&[][..]), None, 0, 8, Some(&pool));
            assert_eq!(again.slots.as_ptr() as usize, addr, "reused");
            assert!(again.slots.iter().all(|s| s.load(Ordering::Relaxed) == 0));
            drop(again);
        }
        // Another size is not served from the pool.
        let other = RangeList::new(Box::from(&[][..]), None, 0, 4, Some(&pool));
        assert_eq!(other.slots.len(), 4);
        assert_eq!(pool.len(), 1);
        drop(other);
        for _ in 0..POOL_MAX + 3 {
            pool.give(zeroed_slots(8));
        }
        assert_eq!(pool.len(), POOL_MAX);
    }
}

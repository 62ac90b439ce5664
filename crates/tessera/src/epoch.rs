//! Epochs (Silo section 4.1) and epoch-based reclamation (Silo section 4.8).
//!
//! A global epoch `E` is advanced by a ticker thread every `epoch_interval`
//! (40 ms by default, as in Silo). Every worker owns a slot holding its *local
//! epoch*: the value of `E` it saw when it last pinned (began a transaction),
//! or [`QUIESCENT`] while it is between transactions.
//!
//! * Silo requires `E - e_w <= 1` for every active worker `w`: the ticker only
//!   advances `E` from `e` to `e + 1` once every active worker has reflected `e`.
//!   A long transaction therefore holds the epoch back, exactly as in Silo.
//! * Garbage (unlinked index nodes, record versions, deleted records) is put on
//!   a per-worker list tagged with the retiring worker's local epoch `r`. It is
//!   freed once `r + 2 <= min(E, every active local epoch)`: any thread that can
//!   still hold a pointer to the object pinned before it was unlinked, i.e. while
//!   `E <= r + 1`, so its local epoch is at most `r + 1`. (Silo frees at
//!   "reclamation epoch" `min(e_w) - 1`; the extra epoch here covers the window
//!   in which a worker has read `E` but not yet published it, see [`Epochs::pin`].)
//!   A worker frees its reclaimable garbage at the pace it retires garbage
//!   ([`LocalEpoch::collect_paced`]), not a whole epoch's at once.
//!
//! The same machinery drives Silo's snapshot epochs (section 4.9): a snapshot
//! epoch boundary is a multiple of `k` epochs, at most `E - 1`.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

/// Local-epoch value of a worker that is not inside a transaction.
pub const QUIESCENT: u64 = u64::MAX;

/// How many garbage items a worker accumulates before it tries to free some.
const COLLECT_THRESHOLD: usize = 256;

/// What a paced collection may free beyond twice the items retired since the
/// last one ([`LocalEpoch::collect_paced`]): drains a backlog left by a
/// thread that stopped retiring.
const PACE_SLACK: usize = 32;

/// How far ahead of the item it frees a collection prefetches.
const PACE_AHEAD: usize = 4;

/// A retired object: freed by calling its destructor once no thread can
/// reach it.
struct Garbage {
    epoch: u64,
    ptr: *mut u8,
    free: Free,
}

/// How a retired object is freed.
#[derive(Clone, Copy)]
enum Free {
    /// `free(ptr)`.
    Plain(unsafe fn(*mut u8)),
    /// `free(ptr, size)`: the retirer knew the object's size, so the free
    /// need not read it from the object, whose line is cold by then
    /// ([`Guard::retire_sized`]).
    Sized(unsafe fn(*mut u8, u32), u32),
}

impl Garbage {
    /// Run the destructor.
    ///
    /// # Safety
    /// No thread can reach the object any more (the caller applied the
    /// epoch rule), and it is freed once.
    #[inline]
    unsafe fn free(&self) {
        // SAFETY: caller contract; the destructor is the retirer's.
        unsafe {
            match self.free {
                Free::Plain(f) => f(self.ptr),
                Free::Sized(f, size) => f(self.ptr, size),
            }
        }
    }
}

// SAFETY: garbage is only ever freed, never dereferenced, by whichever thread
// collects it; the retiring code guarantees the free function is thread-agnostic
// (all objects are plain heap allocations).
unsafe impl Send for Garbage {}

struct Slot {
    local: AtomicU64,
    in_use: AtomicBool,
}

/// The epoch state shared by all workers of a database.
pub struct Epochs {
    global: CachePadded<AtomicU64>,
    /// `min(E, active local epochs)` as last computed by the ticker.
    reclaim_bound: CachePadded<AtomicU64>,
    /// Oldest snapshot boundary any snapshot reader may still be using.
    snapshot_min: CachePadded<AtomicU64>,
    slots: Box<[CachePadded<Slot>]>,
    snapshot_k: u64,
    /// Garbage left behind by workers that were dropped.
    orphans: Mutex<Vec<Garbage>>,
}

impl Epochs {
    /// `workers` slots; snapshot boundaries every `snapshot_k` epochs.
    pub fn new(workers: usize, snapshot_k: u64) -> Arc<Self> {
        assert!(workers > 0, "at least one worker slot");
        let slots = (0..workers)
            .map(|_| {
                CachePadded::new(Slot {
                    local: AtomicU64::new(QUIESCENT),
                    in_use: AtomicBool::new(false),
                })
            })
            .collect();
        Arc::new(Epochs {
            global: CachePadded::new(AtomicU64::new(1)),
            reclaim_bound: CachePadded::new(AtomicU64::new(1)),
            snapshot_min: CachePadded::new(AtomicU64::new(0)),
            slots,
            snapshot_k: snapshot_k.max(1),
            orphans: Mutex::new(Vec::new()),
        })
    }

    /// Start the global epoch at `e` (recovery: above every epoch in the
    /// log). Only before any worker or ticker uses these epochs.
    pub fn start_at(&self, e: u64) {
        let e = e.max(1);
        self.global.store(e, Ordering::SeqCst);
        self.reclaim_bound.store(e, Ordering::SeqCst);
    }

    /// Start the global epoch above `top`, the largest epoch recovery
    /// found, at the first epoch whose snapshot boundary lies above `top`
    /// (a multiple of `k`, plus one): a snapshot transaction run right
    /// after the open sees every recovered row, rather than what lay below
    /// an older boundary until `k` more epochs have passed. The epochs
    /// skipped hold no transaction.
    pub fn start_after(&self, top: u64) {
        self.start_at(self.first_epoch_after(top));
        debug_assert!(self.snapshot_boundary() > top);
    }

    /// The epoch [`Epochs::start_after`] starts at (saturating: recovery
    /// refuses a start at or past the largest epoch before it starts).
    pub fn first_epoch_after(&self, top: u64) -> u64 {
        let k = self.snapshot_k;
        (top.saturating_add(1))
            .div_ceil(k)
            .saturating_mul(k)
            .saturating_add(1)
    }

    /// The global epoch `E`.
    #[inline]
    pub fn global(&self) -> u64 {
        self.global.load(Ordering::Acquire)
    }

    /// Number of worker slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Epochs per snapshot epoch (`k`).
    pub fn snapshot_k(&self) -> u64 {
        self.snapshot_k
    }

    /// Snapshot boundary for a global epoch value `e`: the largest multiple of
    /// `k` that is at most `e - 1`. Every transaction whose commit epoch is
    /// below the boundary has finished installing its writes (see module docs).
    #[inline]
    pub fn snapshot_boundary_for(&self, e: u64) -> u64 {
        let last_closed = e.saturating_sub(1);
        last_closed - last_closed % self.snapshot_k
    }

    /// The current snapshot boundary: snapshot transactions read versions whose
    /// epoch is strictly below it.
    #[inline]
    pub fn snapshot_boundary(&self) -> u64 {
        self.snapshot_boundary_for(self.global())
    }

    /// No snapshot reader uses a boundary below this value; versions that are
    /// superseded by a version with an epoch below it can be dropped.
    #[inline]
    pub fn snapshot_min(&self) -> u64 {
        self.snapshot_min.load(Ordering::Acquire)
    }

    /// Claim a worker slot. Returns `None` if all slots are taken.
    pub fn register(self: &Arc<Self>) -> Option<LocalEpoch> {
        self.register_from(false)
    }

    /// Register an internal thread (checkpointer, shutdown) in the highest
    /// free slot, so that it never pushes a worker past `Options::workers`.
    pub fn register_internal(self: &Arc<Self>) -> Option<LocalEpoch> {
        self.register_from(true)
    }

    fn register_from(self: &Arc<Self>, top: bool) -> Option<LocalEpoch> {
        let n = self.slots.len();
        for k in 0..n {
            let i = if top { n - 1 - k } else { k };
            let s = &self.slots[i];
            if s.in_use
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.local.store(QUIESCENT, Ordering::Release);
                return Some(LocalEpoch {
                    epochs: Arc::clone(self),
                    slot: i,
                    garbage: UnsafeCell::new(VecDeque::new()),
                    left: std::cell::Cell::new(0),
                    pinned: std::cell::Cell::new(false),
                });
            }
        }
        None
    }

    /// One tick of the epoch-advancing thread: advance `E` if every active
    /// worker has reflected it, and recompute the reclamation bound.
    pub fn tick(&self) {
        let e = self.global.load(Ordering::SeqCst);
        let mut min = e;
        for s in self.slots.iter() {
            let l = s.local.load(Ordering::SeqCst);
            if l != QUIESCENT {
                min = min.min(l);
            }
        }
        self.reclaim_bound.store(min, Ordering::Release);
        self.snapshot_min
            .store(self.snapshot_boundary_for(min), Ordering::Release);
        // Never past the largest epoch a TID holds (a wrapped epoch would
        // order new commits before old ones).
        if min == e && e < crate::storage::tid::MAX_EPOCH {
            self.global.store(e + 1, Ordering::SeqCst);
        }
        self.collect_orphans(min);
    }

    fn collect_orphans(&self, bound: u64) {
        let mut o = self.orphans.lock();
        if o.is_empty() {
            return;
        }
        o.retain(|g| {
            if g.epoch + 2 <= bound {
                // SAFETY: retired at epoch g.epoch and every active worker is at
                // least two epochs later, so no thread can reach the object.
                unsafe { g.free() };
                false
            } else {
                true
            }
        });
    }

    /// The lowest epoch an active worker may be in (for diagnostics/tests).
    pub fn reclaim_bound(&self) -> u64 {
        self.reclaim_bound.load(Ordering::Acquire)
    }

    /// Whether an object retired by a thread pinned in epoch `retired_in`
    /// can be freed (or reused) now: no pinned thread can still reach it.
    /// The rule [`LocalEpoch::collect`] applies, for owners that keep their
    /// own retired lists (BOHM's version recycling).
    #[inline]
    pub fn reclaimable(&self, retired_in: u64) -> bool {
        retired_in + 2 <= self.reclaim_bound.load(Ordering::Acquire)
    }

    /// Items waiting in the orphan list (for tests).
    pub fn orphan_count(&self) -> usize {
        self.orphans.lock().len()
    }
}

impl Drop for Epochs {
    fn drop(&mut self) {
        // No worker is alive (each holds an Arc), so nothing is reachable.
        for g in self.orphans.get_mut().drain(..) {
            // SAFETY: no thread can reach retired objects any more.
            unsafe { g.free() };
        }
    }
}

/// A worker's epoch slot and its garbage list. Not `Sync`: one per thread.
pub struct LocalEpoch {
    epochs: Arc<Epochs>,
    slot: usize,
    garbage: UnsafeCell<VecDeque<Garbage>>,
    pinned: std::cell::Cell<bool>,
    /// Garbage left on the list by the last collection: what was retired
    /// since is the list's length less this ([`LocalEpoch::collect_paced`]).
    left: std::cell::Cell<usize>,
}

// SAFETY: a LocalEpoch may move to another thread between transactions; it is
// never shared (it is !Sync because of the UnsafeCell/Cell).
unsafe impl Send for LocalEpoch {}

impl LocalEpoch {
    /// The shared epoch state.
    pub fn epochs(&self) -> &Arc<Epochs> {
        &self.epochs
    }

    /// This worker's slot index (stable for the worker's life).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Enter a transaction: publish the current global epoch as this worker's
    /// local epoch. Store, full fence, re-read: either the ticker sees our slot
    /// or we see its new epoch, so the reclamation bound is never computed
    /// past a pinned worker it could not see.
    pub fn pin(&self) -> Guard<'_> {
        assert!(
            !self.pinned.get(),
            "worker pinned twice (nested transaction?)"
        );
        let slot = &self.epochs.slots[self.slot].local;
        let mut e = self.epochs.global.load(Ordering::Acquire);
        loop {
            // A plain store then a full fence: the fence orders the store
            // before the re-read of E (the ticker reads E, then the slots).
            slot.store(e, Ordering::Relaxed);
            fence(Ordering::SeqCst);
            let again = self.epochs.global.load(Ordering::SeqCst);
            if again == e {
                break;
            }
            e = again;
        }
        self.pinned.set(true);
        Guard {
            local: self,
            epoch: e,
        }
    }

    /// Free what can be freed now.
    pub fn collect(&self) {
        self.free_reclaimable(usize::MAX);
    }

    /// Free reclaimable garbage at a pace: at most twice what was retired
    /// since the last collection, plus [`PACE_SLACK`]. Garbage becomes
    /// reclaimable in lumps, a whole epoch's at a time (40 ms of a worker's
    /// transactions, thousands of versions); freed in one lump, most of it
    /// went back to the allocator's free lists and was cold by the time it
    /// was handed out again. Freed at the pace it is retired, each block
    /// reaches the thread's version pool (`storage::pool`) shortly before an
    /// allocation takes it again, and the backlog still drains (the pace is
    /// twice the inflow).
    pub fn collect_paced(&self) {
        let retired = self.pending().saturating_sub(self.left.get());
        self.free_reclaimable(2 * retired + PACE_SLACK);
    }

    /// Free up to `max` reclaimable items, oldest first. Frees look a few
    /// items ahead and prefetch them: the oldest garbage is cold, and a free
    /// reads the object's header.
    fn free_reclaimable(&self, max: usize) {
        // SAFETY: only this worker touches its garbage list, and no reference
        // into it escapes this function.
        let g = unsafe { &mut *self.garbage.get() };
        let mut budget = max;
        while budget > 0 {
            let Some(front) = g.front() else { break };
            if !self.epochs.reclaimable(front.epoch) {
                break;
            }
            let item = g.pop_front().expect("front exists");
            if let Some(ahead) = g.get(PACE_AHEAD) {
                crate::storage::prefetch_bytes(ahead.ptr, 64);
            }
            // SAFETY: see Epochs::collect_orphans.
            unsafe { item.free() };
            budget -= 1;
        }
        self.left.set(g.len());
    }

    /// Number of garbage items waiting on this worker's list.
    pub fn pending(&self) -> usize {
        // SAFETY: single-threaded access, see `collect`.
        unsafe { (*self.garbage.get()).len() }
    }
}

impl Drop for LocalEpoch {
    fn drop(&mut self) {
        let g = self.garbage.get_mut();
        if !g.is_empty() {
            self.epochs.orphans.lock().extend(g.drain(..));
        }
        let s = &self.epochs.slots[self.slot];
        s.local.store(QUIESCENT, Ordering::Release);
        s.in_use.store(false, Ordering::Release);
    }
}

/// Proof that the current thread is pinned in an epoch; objects read through
/// shared structures stay allocated while it lives.
pub struct Guard<'a> {
    local: &'a LocalEpoch,
    epoch: u64,
}

impl Guard<'_> {
    /// The local epoch this guard pinned.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The shared epoch state.
    #[inline]
    pub fn epochs(&self) -> &Epochs {
        &self.local.epochs
    }

    /// Retire `ptr`: `free(ptr)` runs once no pinned thread can reach it.
    ///
    /// # Safety
    /// `ptr` must already be unreachable for threads that pin after this call
    /// (unlinked from every shared structure), must not be retired twice, and
    /// `free` must be a correct destructor for it callable from any thread.
    pub unsafe fn retire(&self, ptr: *mut u8, free: unsafe fn(*mut u8)) {
        // SAFETY: single-threaded access to this worker's list.
        let g = unsafe { &mut *self.local.garbage.get() };
        g.push_back(Garbage {
            epoch: self.epoch,
            ptr,
            free: Free::Plain(free),
        });
    }

    /// [`Guard::retire`] for an object whose size the retirer knows:
    /// `free(ptr, size)` runs once no pinned thread can reach it. The
    /// multi-version GC retires cut versions so (it read their size while
    /// cutting them), and the free then returns the block to its pool
    /// without touching it.
    ///
    /// # Safety
    /// As [`Guard::retire`], with `free` correct for `ptr` and `size`.
    pub unsafe fn retire_sized(&self, ptr: *mut u8, size: u32, free: unsafe fn(*mut u8, u32)) {
        // SAFETY: single-threaded access to this worker's list.
        let g = unsafe { &mut *self.local.garbage.get() };
        g.push_back(Garbage {
            epoch: self.epoch,
            ptr,
            free: Free::Sized(free, size),
        });
    }

    /// Retire a `Box<T>` given as a raw pointer.
    ///
    /// # Safety
    /// As for [`Guard::retire`]; `ptr` must come from `Box::into_raw`.
    pub unsafe fn retire_box<T>(&self, ptr: *mut T) {
        unsafe fn free_box<T>(p: *mut u8) {
            // SAFETY: the caller of retire_box promised a Box-allocated T.
            drop(unsafe { Box::from_raw(p as *mut T) });
        }
        // SAFETY: forwarded contract.
        unsafe { self.retire(ptr as *mut u8, free_box::<T>) }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.local.epochs.slots[self.local.slot]
            .local
            .store(QUIESCENT, Ordering::Release);
        self.local.pinned.set(false);
        if self.local.pending() >= COLLECT_THRESHOLD {
            self.local.collect_paced();
        }
    }
}

/// Runs [`Epochs::tick`] every `interval` on its own thread until dropped.
pub struct Ticker {
    stop: Arc<(parking_lot::Mutex<bool>, parking_lot::Condvar)>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    /// Start the epoch-advancing thread.
    pub fn start(epochs: Arc<Epochs>, interval: std::time::Duration) -> Ticker {
        let stop = Arc::new((parking_lot::Mutex::new(false), parking_lot::Condvar::new()));
        let s2 = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("tessera-epoch".into())
            .spawn(move || {
                let (lock, cv) = &*s2;
                let mut stopped = lock.lock();
                while !*stopped {
                    cv.wait_for(&mut stopped, interval);
                    if *stopped {
                        break;
                    }
                    epochs.tick();
                }
            })
            .expect("spawn epoch ticker thread");
        Ticker {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static FREED: AtomicUsize = AtomicUsize::new(0);

    unsafe fn count_free(p: *mut u8) {
        // SAFETY: a box this test leaked, retired once and freed by the epoch.
        drop(unsafe { Box::from_raw(p as *mut u64) });
        FREED.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn epoch_stops_at_the_largest_a_tid_holds() {
        let ep = Epochs::new(1, 25);
        let max = crate::storage::tid::MAX_EPOCH;
        ep.start_at(max - 1);
        ep.tick();
        assert_eq!(ep.global(), max);
        ep.tick();
        assert_eq!(
            ep.global(),
            max,
            "the epoch wrapped or left the TID's field"
        );
    }

    #[test]
    fn epoch_advances_only_when_workers_caught_up() {
        let ep = Epochs::new(2, 25);
        let a = ep.register().unwrap();
        assert_eq!(ep.global(), 1);
        ep.tick();
        assert_eq!(ep.global(), 2);
        let g = a.pin();
        assert_eq!(g.epoch(), 2);
        ep.tick(); // a is at 2 == E: advance to 3
        assert_eq!(ep.global(), 3);
        ep.tick(); // a still at 2: E - e_a would become 2, so no advance
        assert_eq!(ep.global(), 3);
        drop(g);
        ep.tick();
        assert_eq!(ep.global(), 4);
    }

    #[test]
    fn garbage_freed_two_epochs_later_and_not_before() {
        let ep = Epochs::new(2, 25);
        let a = ep.register().unwrap();
        let b = ep.register().unwrap();
        let before = FREED.load(Ordering::SeqCst);
        let gb = b.pin(); // b holds epoch 1
        {
            let g = a.pin();
            let p = Box::into_raw(Box::new(7u64));
            // SAFETY: a box this test leaked, retired once and freed by the epoch.
            unsafe { g.retire(p as *mut u8, count_free) };
        }
        for _ in 0..5 {
            ep.tick();
        }
        a.collect();
        assert_eq!(a.pending(), 1, "b is still pinned at the retire epoch");
        drop(gb);
        for _ in 0..3 {
            ep.tick();
        }
        a.collect();
        assert_eq!(a.pending(), 0);
        assert!(FREED.load(Ordering::SeqCst) > before);
    }

    #[test]
    fn reclaimable_garbage_is_freed_at_the_pace_it_is_retired() {
        let ep = Epochs::new(1, 25);
        let a = ep.register().unwrap();
        let retire = |g: &Guard<'_>, n: usize| {
            for _ in 0..n {
                let p = Box::into_raw(Box::new(7u64));
                // SAFETY: a box this test leaked, retired once and freed by
                // the epoch.
                unsafe { g.retire(p as *mut u8, count_free) };
            }
        };
        // A lump of 1,000, not reclaimable when its guard drops.
        retire(&a.pin(), 1000);
        assert_eq!(a.pending(), 1000);
        for _ in 0..3 {
            ep.tick();
        }
        // Reclaimable now: each guard that retires nothing frees the slack.
        drop(a.pin());
        assert_eq!(a.pending(), 1000 - PACE_SLACK);
        // A guard that retires 10 frees up to twice that, plus the slack.
        retire(&a.pin(), 10);
        assert_eq!(a.pending(), 1000 - PACE_SLACK + 10 - (2 * 10 + PACE_SLACK));
        // The backlog drains; what is left is the young garbage, below the
        // threshold at which a guard collects.
        for _ in 0..100 {
            drop(a.pin());
        }
        assert!(a.pending() < COLLECT_THRESHOLD);
        a.collect();
        assert_eq!(a.pending(), 10, "the last 10 are not reclaimable yet");
        for _ in 0..3 {
            ep.tick();
        }
        a.collect();
        assert_eq!(a.pending(), 0);
    }

    #[test]
    fn slots_are_limited_and_reused() {
        let ep = Epochs::new(1, 25);
        let a = ep.register().unwrap();
        assert!(ep.register().is_none());
        drop(a);
        assert!(ep.register().is_some());
    }

    #[test]
    fn snapshot_boundaries() {
        let ep = Epochs::new(1, 10);
        assert_eq!(ep.snapshot_boundary_for(1), 0);
        assert_eq!(ep.snapshot_boundary_for(10), 0);
        assert_eq!(ep.snapshot_boundary_for(11), 10);
        assert_eq!(ep.snapshot_boundary_for(25), 20);
    }
}

//! MVRCC's range state (Deuteronomy's range concurrency control, Levandoski
//! et al., VLDB 2015, as Cai, Guo and Zhou run it against ROCC in section
//! 3.6): per table, a partition into logical ranges, each with a **read
//! timestamp** and an **unordered array** of the timestamps of the writers
//! in flight in it. The record rules (multi-version timestamp ordering) are
//! in the ERMIA code beside this module, under [`super::MvrccMode`].
//!
//! *Writers* register in a range ([`register`]) before their first write
//! there: a timestamp stored into a free slot of the range's array, then the
//! range's read timestamp read; one above the writer's timestamp means a
//! transaction ordered after the writer has already read the range, and the
//! writer aborts ([`ConflictReason::TimestampOrder`]). Writers leave every
//! range after post-commit or rollback ([`deregister`]).
//!
//! *Readers of a range* (a scan, a point read that finds no row, or finds
//! only a tombstone) [`protect`] it before reading it: raise its read
//! timestamp to theirs, then examine **every** slot of its array; a writer
//! registered there with a smaller timestamp aborts the reader
//! ([`ConflictReason::PendingWrite`]: its write may land in what the reader
//! reads). A scan protects the whole of each range it touches, boundary
//! ranges included, and reads a range only after protecting it. These two
//! costs, the whole array and the whole boundary range, are what the book
//! says separate MVRCC from ROCC.
//!
//! *Why nothing is missed.* A writer W below a reader's timestamp `t`, and
//! the reader R, each store first (W its slot, R the read timestamp) and
//! then load the other's word, all sequentially consistent: one of them sees
//! the other. If W sees R's read timestamp it aborts. If R sees W's slot, R
//! aborts. If W registered and also left before R's examination, W's writes
//! in the range were installed (and committed: W leaves after post-commit)
//! before R's examination, hence before R reads the range.
//!
//! *Partitions.* A table is cut into ranges of `target` records
//! (`Options::rocc_range_size`, ROCC's) on its first use. Tables loaded
//! through transactions start empty, so a partition is **replaced** (never
//! edited) once the table has grown to twice its size at the last cut, and
//! at least to two ranges' worth: creates count per range, and every
//! `target` of them are added to the table's count. The new partition keeps
//! the old one as `prev`; a writer registers in the current partition and
//! checks the read timestamps of its range there and, for every key it
//! writes, of the key's range in `prev`; a reader
//! protects its ranges in both, and re-reads the table's partition pointer
//! after it has read, aborting ([`ConflictReason::RangeSplit`]) if it
//! changed. A partition is replaced only when the one before it can no
//! longer be reached by a running attempt (two memory epochs after the last
//! swap: registrations live only within a pinned attempt), and that one is
//! then retired through the memory epoch.
//!
//! Each of a writer below `t` and a reader at `t` sees the other across a
//! swap: if both loaded the same partition, as above. If W loaded the new
//! one and R the old: W checks the old partition's read timestamp (its
//! `prev`) after its slot store; R re-reads the partition pointer after its
//! raise. Either R's re-read sees the swap (R aborts), or the swap, and so
//! W's load of the new partition, came after R's raise, and W sees it. If W
//! loaded the old one and R the new: R protects the old one (`prev`) too.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::catalog::Table;
use crate::cc::cuts::Cuts;
use crate::epoch::Guard;
use crate::error::{ConflictReason, TxError, TxResult};
use crate::index::{OrderedIndex, Unobserved};

/// Slots in each range's array of in-flight writers. A writer starts
/// looking at its worker slot modulo this, so with up to this many workers
/// registrations do not collide; a writer that finds every slot taken
/// aborts ([`ConflictReason::RangeOverflow`]).
pub(crate) const MVRCC_SLOTS: usize = 16;

/// One logical range's state.
#[repr(align(64))]
struct RangeTs {
    /// The largest timestamp of a reader that protected the range.
    rts: AtomicU64,
    /// Records created in the range while this partition was current.
    created: AtomicU64,
    /// Timestamps of the writers registered here (0: free).
    slots: [AtomicU64; MVRCC_SLOTS],
}

impl RangeTs {
    fn new() -> RangeTs {
        RangeTs {
            rts: AtomicU64::new(0),
            created: AtomicU64::new(0),
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// A table's partition into logical ranges (its [`Cuts`]), each with its
/// read timestamp and writer array.
pub(crate) struct Partition {
    pub(crate) cuts: Cuts,
    ranges: Box<[RangeTs]>,
    /// The partition this one replaced, while a running attempt may still
    /// use it (null for the first). Not owned: [`MvTable`] frees it.
    prev: *mut Partition,
    /// The memory epoch at which this partition was installed.
    installed: u64,
}

impl Partition {
    fn new(starts: Vec<Box<[u8]>>, prev: *mut Partition, installed: u64) -> Partition {
        let ranges = (0..starts.len()).map(|_| RangeTs::new()).collect();
        Partition {
            cuts: Cuts::new(starts),
            ranges,
            prev,
            installed,
        }
    }

    /// The partition this one replaced, if a running attempt may use it.
    fn prev(&self) -> Option<&Partition> {
        // SAFETY: a `prev` is retired through the memory epoch only when a
        // later partition replaces this one's successor; callers reached
        // `self` while pinned, so `prev` outlives their guard.
        unsafe { self.prev.as_ref() }
    }
}

/// A table's MVRCC state.
pub(crate) struct MvTable {
    part: AtomicPtr<Partition>,
    /// Serializes re-partitioning.
    cut: Mutex<()>,
    /// Records at the last cut.
    size_at_cut: AtomicU64,
    /// Records created since, counted in steps of `target`.
    grown: AtomicU64,
    /// The table has doubled: re-partition between transactions.
    recut: AtomicBool,
    target: u64,
}

// SAFETY: the partition pointers are replaced under `cut` and freed through
// the memory epoch (or on drop, when nothing else can reach them);
// everything else is atomics.
unsafe impl Send for MvTable {}
// SAFETY: as above.
unsafe impl Sync for MvTable {}

impl MvTable {
    fn new(table: &Table, target: usize, g: &Guard<'_>) -> MvTable {
        let (starts, n) = cut(table, target as u64, g);
        MvTable {
            part: AtomicPtr::new(Box::into_raw(Box::new(Partition::new(
                starts,
                std::ptr::null_mut(),
                g.epoch(),
            )))),
            cut: Mutex::new(()),
            size_at_cut: AtomicU64::new(n),
            grown: AtomicU64::new(0),
            recut: AtomicBool::new(false),
            target: target as u64,
        }
    }

    /// The current partition, for as long as `g` pins the epoch.
    #[inline]
    pub(crate) fn current<'g>(&self, _g: &'g Guard<'_>) -> &'g Partition {
        // SAFETY: replaced partitions are retired through the memory epoch
        // (after their successor is replaced in turn), which `_g` pins.
        unsafe { &*self.part.load(Ordering::SeqCst) }
    }

    /// Whether `p` is still the current partition (a reader's re-check).
    #[inline]
    pub(crate) fn is_current(&self, p: &Partition) -> bool {
        std::ptr::eq(self.part.load(Ordering::SeqCst), p)
    }

    /// Count a record created in range `i` of `p`.
    #[inline]
    pub(crate) fn created(&self, p: &Partition, i: usize) {
        let n = p.ranges[i].created.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(self.target) {
            let grown = self.grown.fetch_add(self.target, Ordering::Relaxed) + self.target;
            let at = self.size_at_cut.load(Ordering::Relaxed);
            if at + grown >= (2 * at).max(2 * self.target) {
                self.recut.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Re-partition if the table asked for it and the partition before the
    /// current one can no longer be reached by a running attempt.
    fn maybe_recut(&self, table: &Table, g: &Guard<'_>) {
        if !self.recut.load(Ordering::Relaxed) {
            return;
        }
        let Some(_lock) = self.cut.try_lock() else {
            return;
        };
        let cur = self.part.load(Ordering::SeqCst);
        // SAFETY: the current partition, under the cut lock.
        let (installed, has_prev) = unsafe { ((*cur).installed, !(*cur).prev.is_null()) };
        // Every attempt pinned when `cur` was installed (and so possibly
        // registered in `cur.prev`) has ended: the garbage rule of `epoch.rs`.
        if has_prev && installed + 2 > g.epochs().reclaim_bound() {
            return;
        }
        self.recut.store(false, Ordering::Relaxed);
        let (starts, n) = cut(table, self.target, g);
        let new = Box::into_raw(Box::new(Partition::new(starts, cur, g.epoch())));
        self.size_at_cut.store(n, Ordering::Relaxed);
        self.grown.store(0, Ordering::Relaxed);
        self.part.store(new, Ordering::SeqCst);
        // SAFETY: as above; `cur.prev` is unreachable for every attempt but
        // pinned ones that reached it through `cur`, which the epoch waits
        // for.
        let old_prev = unsafe { (*cur).prev };
        if !old_prev.is_null() {
            // SAFETY: see above.
            unsafe { g.retire_box(old_prev) };
        }
    }
}

impl Drop for MvTable {
    fn drop(&mut self) {
        let p = *self.part.get_mut();
        // SAFETY: nothing else can reach the table's partitions any more;
        // the current one and its `prev` are owned here (older ones were
        // retired).
        unsafe {
            let prev = (*p).prev;
            drop(Box::from_raw(p));
            if !prev.is_null() {
                drop(Box::from_raw(prev));
            }
        }
    }
}

/// Walk `table` and cut it every `target` records: the starts of the
/// ranges, and the records counted.
fn cut(table: &Table, target: u64, g: &Guard<'_>) -> (Vec<Box<[u8]>>, u64) {
    let target = target.max(1);
    let mut starts: Vec<Box<[u8]>> = vec![Box::from(&[][..])];
    let (mut n, mut total) = (0u64, 0u64);
    table.index.scan(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        g,
        Unobserved,
        |k, _| {
            if n == target {
                starts.push(k.into());
                n = 0;
            }
            n += 1;
            total += 1;
            true
        },
    );
    (starts, total)
}

/// MVRCC's database-wide state: every table's ranges.
pub(crate) struct MvrccShared {
    tables: RwLock<Vec<Option<Arc<MvTable>>>>,
    target: usize,
}

impl MvrccShared {
    pub(crate) fn new(target: usize) -> MvrccShared {
        MvrccShared {
            tables: RwLock::new(Vec::new()),
            target: target.max(1),
        }
    }
}

/// A range a transaction registered in.
struct Reg {
    part: *const Partition,
    range: u32,
    slot: u32,
}

/// MVRCC's per-worker state.
#[derive(Default)]
pub(crate) struct MvrccLocal {
    tables: Vec<Option<Arc<MvTable>>>,
    regs: Vec<Reg>,
}

// SAFETY: the partition pointers are only dereferenced by the owning worker
// within the attempt that registered (pinned).
unsafe impl Send for MvrccLocal {}

/// The MVRCC state of `table`, partitioning it on its first use. The
/// pointer stays valid for the worker's life (its cache holds an `Arc`).
#[inline]
pub(crate) fn table_state(
    sh: &MvrccShared,
    local: &mut MvrccLocal,
    table: &Table,
    g: &Guard<'_>,
) -> *const MvTable {
    let i = table.id.0 as usize;
    if let Some(Some(t)) = local.tables.get(i) {
        return Arc::as_ptr(t);
    }
    table_state_slow(sh, local, table, g)
}

#[cold]
fn table_state_slow(
    sh: &MvrccShared,
    local: &mut MvrccLocal,
    table: &Table,
    g: &Guard<'_>,
) -> *const MvTable {
    let i = table.id.0 as usize;
    if local.tables.len() <= i {
        local.tables.resize(i + 1, None);
    }
    let found = sh.tables.read().get(i).cloned().flatten();
    let t = match found {
        Some(t) => t,
        None => {
            // Walk the table without holding the lock; if another worker got
            // there first, its partition wins.
            let mine = Arc::new(MvTable::new(table, sh.target, g));
            let mut all = sh.tables.write();
            if all.len() <= i {
                all.resize(i + 1, None);
            }
            all[i].get_or_insert(mine).clone()
        }
    };
    let p = Arc::as_ptr(&t);
    local.tables[i] = Some(t);
    p
}

/// Register the writer with timestamp `t` (worker slot `hint`) in the range
/// of `key` before it writes there, unless it already is (the replaced
/// partition's read timestamp is checked for every key). Returns the
/// current partition and the range, for [`MvTable::created`].
pub(crate) fn register<'g>(
    local: &mut MvrccLocal,
    mt: &MvTable,
    key: &[u8],
    t: u64,
    hint: usize,
    g: &'g Guard<'_>,
) -> TxResult<(&'g Partition, usize)> {
    let p = mt.current(g);
    let i = p.cuts.find(key);
    let pp = p as *const Partition;
    if local
        .regs
        .iter()
        .any(|r| r.part == pp && r.range as usize == i)
    {
        // Readers of this range of `p` find our slot; but readers of the
        // replaced partition do not, and the range of `prev` holding this
        // key need not be the one the first registration checked (the two
        // partitions' cuts differ): check it for every key.
        prev_check(p, key, t)?;
        return Ok((p, i));
    }
    let r = &p.ranges[i];
    let mut claimed = None;
    for k in 0..MVRCC_SLOTS {
        let s = (hint + k) % MVRCC_SLOTS;
        if r.slots[s].load(Ordering::Relaxed) == 0
            && r.slots[s]
                .compare_exchange(0, t, Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            claimed = Some(s);
            break;
        }
    }
    let Some(s) = claimed else {
        return Err(TxError::Conflict(ConflictReason::RangeOverflow));
    };
    local.regs.push(Reg {
        part: pp,
        range: i as u32,
        slot: s as u32,
    });
    // After the slot store (SeqCst), the read timestamps: see the module
    // docs for why one side sees the other.
    if r.rts.load(Ordering::SeqCst) > t {
        return Err(TxError::Conflict(ConflictReason::TimestampOrder));
    }
    prev_check(p, key, t)?;
    Ok((p, i))
}

/// A writer at `t` about to write `key`: the range of the replaced
/// partition holding `key` must not have been read by a younger reader
/// (one that loaded the old partition: it does not look at our slots in
/// the new one, and its re-check of the partition pointer came before the
/// swap; see the module docs).
#[inline]
fn prev_check(p: &Partition, key: &[u8], t: u64) -> TxResult<()> {
    if let Some(prev) = p.prev() {
        if prev.ranges[prev.cuts.find(key)].rts.load(Ordering::SeqCst) > t {
            return Err(TxError::Conflict(ConflictReason::TimestampOrder));
        }
    }
    Ok(())
}

/// Leave every range the transaction registered in (after post-commit or
/// rollback, still pinned by the attempt that registered).
pub(crate) fn deregister(local: &mut MvrccLocal) {
    for r in local.regs.drain(..) {
        // SAFETY: registered by this attempt, which is still pinned, and a
        // partition is retired only after every such attempt ended.
        let p = unsafe { &*r.part };
        p.ranges[r.range as usize].slots[r.slot as usize].store(0, Ordering::Release);
    }
}

/// A reader at `t` protects range `i` of `p`: raise its read timestamp,
/// then examine every slot; a writer registered with a smaller timestamp
/// aborts the reader.
#[inline]
fn protect_one(p: &Partition, i: usize, t: u64) -> TxResult<()> {
    let r = &p.ranges[i];
    if r.rts.load(Ordering::SeqCst) < t {
        r.rts.fetch_max(t, Ordering::SeqCst);
    }
    for s in &r.slots {
        let w = s.load(Ordering::SeqCst);
        // `w == t`: this transaction's own registration.
        if w != 0 && w < t {
            return Err(TxError::Conflict(ConflictReason::PendingWrite));
        }
    }
    Ok(())
}

/// Protect range `i` of `p` and every range of `p.prev` it overlaps,
/// before reading any of it.
pub(crate) fn protect(p: &Partition, i: usize, t: u64) -> TxResult<()> {
    protect_one(p, i, t)?;
    if let Some(prev) = p.prev() {
        let mut j = prev.cuts.find(p.cuts.start(i));
        loop {
            protect_one(prev, j, t)?;
            j += 1;
            if j >= prev.cuts.len() || p.cuts.end(i).is_some_and(|e| prev.cuts.start(j) >= e) {
                break;
            }
        }
    }
    Ok(())
}

/// Between transactions: re-partition tables that doubled.
pub(crate) fn maintain(local: &MvrccLocal, tables: &[Arc<Table>], g: &Guard<'_>) {
    for (i, t) in local.tables.iter().enumerate() {
        if let (Some(t), Some(table)) = (t, tables.get(i)) {
            t.maybe_recut(table, g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(starts: &[&[u8]]) -> Partition {
        Partition::new(
            starts.iter().map(|s| Box::from(*s)).collect(),
            std::ptr::null_mut(),
            0,
        )
    }

    #[test]
    fn a_reader_and_an_older_writer_see_each_other() {
        let p = part(&[b""]);
        let t_reader = 10;
        // A writer below the reader registered first: the reader aborts.
        p.ranges[0].slots[3].store(7, Ordering::SeqCst);
        assert!(matches!(
            protect(&p, 0, t_reader),
            Err(TxError::Conflict(ConflictReason::PendingWrite))
        ));
        // Its own registration and younger writers do not stop it.
        p.ranges[0].slots[3].store(10, Ordering::SeqCst);
        p.ranges[0].slots[4].store(12, Ordering::SeqCst);
        assert!(protect(&p, 0, t_reader).is_ok());
        assert_eq!(p.ranges[0].rts.load(Ordering::SeqCst), 10);
    }

    /// A second write into a range of the current partition is checked
    /// against the replaced partition's range holding *its* key, which is
    /// not the one the first write's registration checked.
    #[test]
    fn every_write_checks_the_replaced_partition() {
        let ep = crate::epoch::Epochs::new(1, 10);
        let l = ep.register().unwrap();
        let g = l.pin();
        let old = Box::into_raw(Box::new(part(&[b"", b"m"])));
        let cur = Partition::new(vec![Box::from(&b""[..]), Box::from(&b"h"[..])], old, 0);
        let mt = MvTable {
            part: AtomicPtr::new(Box::into_raw(Box::new(cur))),
            cut: Mutex::new(()),
            size_at_cut: AtomicU64::new(0),
            grown: AtomicU64::new(0),
            recut: AtomicBool::new(false),
            target: 4,
        };
        // A younger reader (10) protected the old range "m".. only.
        // SAFETY: owned by `mt`, alive.
        unsafe { &*old }.ranges[1].rts.store(10, Ordering::SeqCst);
        let mut local = MvrccLocal::default();
        // "j" lies in the old "".."m": registers in the new "h".. and passes.
        assert!(register(&mut local, &mt, b"j", 8, 0, &g).is_ok());
        // "n", same new range, old range "m"..: too late.
        assert!(matches!(
            register(&mut local, &mt, b"n", 8, 0, &g),
            Err(TxError::Conflict(ConflictReason::TimestampOrder))
        ));
        assert_eq!(local.regs.len(), 1);
        deregister(&mut local);
    }

    #[test]
    fn protecting_covers_the_replaced_partition() {
        let old = Box::into_raw(Box::new(part(&[b"", b"b", b"f", b"k"])));
        let p = Partition::new(vec![Box::from(&b""[..]), Box::from(&b"g"[..])], old, 0);
        protect(&p, 1, 9).unwrap();
        // SAFETY: freed below, once.
        let o = unsafe { &*old };
        let rts = || -> Vec<u64> {
            o.ranges
                .iter()
                .map(|r| r.rts.load(Ordering::SeqCst))
                .collect()
        };
        // Range "g".. overlaps the old "f".."k" and "k"..; not "".."b", "b".."f".
        assert_eq!(rts(), vec![0, 0, 9, 9]);
        protect(&p, 0, 11).unwrap();
        assert_eq!(rts(), vec![11, 11, 11, 9]);
        drop(p);
        // SAFETY: allocated above, not freed elsewhere.
        drop(unsafe { Box::from_raw(old) });
    }
}

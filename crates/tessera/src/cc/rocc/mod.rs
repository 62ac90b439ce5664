//! ROCC, range-based optimistic concurrency control (Cai, Guo and Zhou,
//! chapter 3): Silo's OCC for point operations, with scans validated per
//! *logical range* (RV) against the writers registered in the ranges they
//! touched, instead of re-reading every scanned row (LRV, Silo's way) or
//! checking every committed writer (GWV, HyPer's way).
//!
//! *Read phase* (section 3.3.3). Point reads are Silo's (record and TID into
//! the read set), except that a record locked by a committing writer is
//! *dirty* and the transaction aborts at once
//! (`ConflictReason::DirtyRead`), as the book says. For each range
//! ([`ranges`]) a scan touches it constructs a predicate
//! `{range, ts, start, end}` whose `ts` is the range's version read
//! *before* any row of the range is read, scans (the same dirty rule), then
//! sets the exact scope it covered. The scan goes in parts of several
//! ranges, each part's predicates constructed first and the part read as
//! one index scan (see [`scan`]). Scanned rows go into neither the read set
//! nor the node set. A point lookup that finds no key keeps Silo's node-set
//! entry (the book says nothing of absent point reads; a leaf version is the
//! cheapest exact predicate on one key).
//!
//! *Commit* (Algorithm 3.1): lock the write set (Silo's global order),
//! register once in each range written (the writer's [`WriterEntry`]: its
//! keys, later its stamp), take the commit stamp from the database's
//! counter (the serialization point), validate the read set (Silo) and
//! every predicate: a writer registered in the predicate's range after
//! `p.ts`, with a stamp below ours (one still without a stamp is waited
//! for: it may have drawn a smaller one), not aborted, that wrote a key in
//! `[p.start, p.end)` aborts us (`ConflictReason::RangeValidation`). When
//! the scope covers the whole range, any such writer is a conflict
//! without looking at its keys (the shortcut of section 3.5.3). Then
//! install with Silo's TIDs (the record version; the commit stamp orders
//! the range lists) and unlock. Inserts and deletes are writes like any
//! other, so predicates catch phantoms (section 3.3.4).
//!
//! *Registration only where scans are* (`RoccRegistration::Scanned`, not
//! the book's; the default is the book's `Always`). A registration is a
//! fetch-and-add on the range's head and a store into a shared slot, cache
//! lines that every writer of a hot range takes from the other cores; with
//! nobody scanning there, nobody reads them. So a scan counts itself into
//! each range it touches (a count on a line of its own) before it reads
//! the range's version and rows, and counts itself out when its
//! transaction ends; a writer, after locking its write set, issues a
//! `SeqCst` fence, reads the count of each range it wrote, and registers
//! only where it is not zero, less its own scans' counts (its own
//! predicates skip its own entry). A writer that registered nowhere and
//! holds no predicate also draws no commit stamp, and takes no entry:
//! stamps only order registered writers against predicates.
//!
//! Why a scan still meets every writer it must. Take a writer W that
//! skipped range R (it read R's count as zero) and a scan S of R that
//! counted itself in. W's lock CASes, then its fence, then its read of the
//! count; S's count increment, then its fence, then its reads of the
//! range's rows: the store-buffering shape, in which two `SeqCst` fences
//! forbid both sides reading the old values. W read the old count, so S's
//! row reads see W's locks or what came after them:
//! - a row W holds locked is a dirty read, and S aborts;
//! - a row W has installed and unlocked is read as W wrote it, so S
//!   follows W, and S's own stamp, drawn later, is larger.
//!
//! The table has a count too, raised by every scan of it before its
//! ranges' counts (and with the same fence): a writer that reads a
//! table's count as zero skips its updates of that table without looking
//! their ranges up (the range search and the ranges' lines were most of a
//! gated writer's registration while a tenth of the transactions scanned).
//! The argument is the same one level up: S raised the table's count
//! before any of its rows' reads, so W reading it as zero orders S's reads
//! after W's locks. Inserts and deletes still find their ranges, whose
//! record counts they change.
//!
//! An insert is a row like any other (it is in the index, locked, before
//! W reads the count). A split does not open a gap: a writer that finds
//! its list sealed registers in the new map's lists by the same rule, and
//! a scanner whose predicate's list was sealed aborts, as before. Counts
//! are dropped at the end of the transaction, while it is still pinned,
//! so a count never outlives its list.
//!
//! The serial order is the commit-stamp order (Theorem 3.1). The stamp is
//! one shared counter drawn once per writing commit (the book's: "GWV uses
//! one counter for both"); read-only transactions only read it. This is the
//! one shared word on ROCC's commit path, as in the book.

pub(crate) mod ranges;

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use self::ranges::{RangeList, Slot, TableRanges, WriterEntry, ABORTED};
use super::silo::{
    abort, commit, delete, get, get_many, get_slice, insert, put, scan_rows, update, update_slice,
    Mode, STx,
};
use super::{max_lo, min_hi, OrphanUnlinks, SvLocal, SvShared, TxnSets, WorkerCore, WriteKind};
use crate::catalog::{Table, TableId};
use crate::engine::Settings;
use crate::epoch::Guard;
use crate::error::{ConflictReason, TxResult};
use crate::txn::ScanOptions;

/// The range-validated OCCs: ROCC (`--cc rocc`, a list per logical range)
/// and GWV (`--cc gwv`, `GLOBAL`: one list for the whole database, HyPer's
/// global write-set validation as the book's baseline: every scan is one
/// predicate over its bounds, checked against every writer that committed
/// during it, with no whole-range shortcut).
pub(crate) struct RangeOcc<const GLOBAL: bool>;
/// ROCC.
pub(crate) type Rocc = RangeOcc<false>;
/// GWV.
pub(crate) type Gwv = RangeOcc<true>;

/// The database-wide state: the commit-stamp counter and each table's
/// ranges (made on the table's first use under ROCC).
pub(crate) struct RoccShared {
    orphans: OrphanUnlinks,
    cts: AtomicU64,
    tables: RwLock<Vec<Option<Arc<TableRanges>>>>,
    /// GWV's one list.
    global: std::sync::OnceLock<Arc<RangeList>>,
    range_size: usize,
    slots: usize,
    /// `RoccRegistration::Scanned`: scans count themselves in their ranges
    /// and writers register only where a scan is in flight.
    gated: bool,
    /// Writer entries of workers that went away (freed at close: a slot
    /// may still point at them).
    spare: Mutex<Vec<(u64, usize)>>,
}

impl SvShared for RoccShared {
    fn new(s: &Settings) -> Self {
        RoccShared {
            orphans: OrphanUnlinks::default(),
            cts: AtomicU64::new(0),
            tables: RwLock::new(Vec::new()),
            global: std::sync::OnceLock::new(),
            range_size: s.rocc.range_size as usize,
            slots: s.rocc.slots as usize,
            gated: s.rocc.registration == crate::engine::RoccRegistration::Scanned,
            spare: Mutex::new(Vec::new()),
        }
    }
    fn orphans(&self) -> &OrphanUnlinks {
        &self.orphans
    }
    #[inline]
    fn begin(ranges: &mut RoccLocal, g: &Guard<'_>) {
        ranges.begin(g.epoch())
    }
    #[inline]
    fn maintain(&self, core: &mut WorkerCore, st: &mut SvLocal, g: &Guard<'_>) {
        maintain(&mut st.ranges, &core.tables, g)
    }
    fn retire(&self, st: &mut SvLocal) {
        retire(self, &mut st.ranges)
    }
    fn close(&mut self) {
        self.orphans.0.get_mut().clear();
        for (_, p) in self.spare.get_mut().drain(..) {
            // SAFETY: made by `Box::into_raw` in `RoccLocal::entry`; no
            // worker and no transaction is left to reach it.
            drop(unsafe { Box::from_raw(p as *mut WriterEntry) });
        }
        self.tables.get_mut().clear();
    }
}

/// A predicate (section 3.3.2): a range, its version before the scan, and
/// the exact scope scanned in it (key bytes in `RoccLocal::pbuf`).
#[derive(Clone, Copy)]
struct Predicate {
    list: *const RangeList,
    ts: u64,
    table: TableId,
    lo: PBound,
    hi: PBound,
}

#[derive(Clone, Copy)]
enum PBound {
    Unbounded,
    Included(u32, u32),
    Excluded(u32, u32),
    /// The range's own start (inclusive), not copied.
    ListStart,
    /// The range's own end (exclusive), not copied.
    ListEnd,
}

impl PBound {
    fn stash(b: Bound<&[u8]>, buf: &mut Vec<u8>) -> PBound {
        let mut put = |k: &[u8]| {
            let off = buf.len() as u32;
            buf.extend_from_slice(k);
            (off, k.len() as u32)
        };
        match b {
            Bound::Unbounded => PBound::Unbounded,
            Bound::Included(k) => {
                let (o, n) = put(k);
                PBound::Included(o, n)
            }
            Bound::Excluded(k) => {
                let (o, n) = put(k);
                PBound::Excluded(o, n)
            }
        }
    }
    /// A bound of a predicate over `l`: `ListStart` or `ListEnd` where it
    /// is the range's own, a copy otherwise.
    fn of<'a>(b: Bound<&'a [u8]>, l: &'a RangeList, buf: &mut Vec<u8>) -> PBound {
        match b {
            Bound::Included(k) if std::ptr::eq(k, &l.start[..]) => PBound::ListStart,
            Bound::Excluded(k) if l.end.as_deref().is_some_and(|e| std::ptr::eq(k, e)) => {
                PBound::ListEnd
            }
            b => PBound::stash(b, buf),
        }
    }
    fn get<'a>(self, buf: &'a [u8], l: &'a RangeList) -> Bound<&'a [u8]> {
        match self {
            PBound::Unbounded => Bound::Unbounded,
            PBound::Included(o, n) => Bound::Included(&buf[o as usize..(o + n) as usize]),
            PBound::Excluded(o, n) => Bound::Excluded(&buf[o as usize..(o + n) as usize]),
            PBound::ListStart => Bound::Included(&l.start[..]),
            PBound::ListEnd => Bound::Excluded(l.end.as_deref().expect("a range with an end")),
        }
    }
}

/// ROCC's per-worker state: the predicate set, the table cache, the
/// writer entry of the commit in progress and the retired ones waiting for
/// the memory epoch. Empty (and untouched) under the other single-version
/// protocols, which share the worker state type.
#[derive(Default)]
pub(crate) struct RoccLocal {
    preds: Vec<Predicate>,
    pbuf: Vec<u8>,
    tables: Vec<Option<Arc<TableRanges>>>,
    /// The registered entry of the commit in progress (null: none).
    entry: usize,
    /// Retired entries: (epoch retired in, address).
    pool: VecDeque<(u64, usize)>,
    /// Lists registered in by the commit in progress.
    registered: Vec<usize>,
    /// For each of `registered`: its table's ranges, the records the
    /// commit adds there, the position claimed.
    claims: Vec<(usize, i64, u64)>,
    /// A scan's stop key (a buffer kept across scans).
    stop_key: Vec<u8>,
    /// The lists this transaction's scans counted themselves in
    /// (`RoccRegistration::Scanned`), once per predicate.
    scanning: Vec<usize>,
    /// The tables (`TableRanges`) its scans counted themselves in, once
    /// per table.
    scanning_tables: Vec<usize>,
}

// SAFETY: the raw pointers are to shared, `Sync` range lists (kept alive by
// the memory epoch and the table cache) and to writer entries this worker
// owns; a worker's state moves between threads only between transactions.
unsafe impl Send for RoccLocal {}

impl RoccLocal {
    /// Start of a transaction attempt.
    #[inline]
    pub(crate) fn begin(&mut self, epoch: u64) {
        if !self.preds.is_empty() {
            self.preds.clear();
            self.pbuf.clear();
        }
        // Left only if a transaction ended without its commit's `finish` or
        // its abort: a panic inside the commit itself (a panic in the body
        // aborts). Counts left raised make writers register where they
        // need not, never miss a scan; the lists may be gone by now, so
        // they are not touched.
        self.scanning.clear();
        self.scanning_tables.clear();
        if self.entry != 0 {
            // A commit unwound after registering: flag its entry and retire
            // it (now, later than it was published).
            // SAFETY: our registered entry.
            unsafe { &*(self.entry as *const WriterEntry) }
                .cts
                .fetch_or(ABORTED, Ordering::Release);
            self.pool.push_back((epoch, self.entry));
            self.entry = 0;
        }
    }

    /// A writer entry to fill: a retired one the memory epoch no longer
    /// protects, or a new one.
    fn entry(&mut self, g: &Guard<'_>, spare: &Mutex<Vec<(u64, usize)>>) -> *mut WriterEntry {
        if self
            .pool
            .front()
            .is_none_or(|&(e, _)| !g.epochs().reclaimable(e))
        {
            // An entry left by a worker that went away, if one is free.
            if let Some(mut sp) = spare.try_lock() {
                if let Some(&(e, p)) = sp.last() {
                    if g.epochs().reclaimable(e) {
                        sp.pop();
                        self.pool.push_front((e, p));
                    }
                }
            }
        }
        if let Some(&(e, p)) = self.pool.front() {
            if g.epochs().reclaimable(e) {
                self.pool.pop_front();
                let w = p as *mut WriterEntry;
                // SAFETY: ours, and no validator can reach it any more: it
                // was retired at epoch `e`, and every thread pinned then has
                // unpinned (see `RangeList::at`).
                unsafe {
                    (*w).keys.clear();
                    (*w).cts.store(0, Ordering::Relaxed);
                }
                return w;
            }
        }
        // Keys of a few writes fit without growing the buffer.
        Box::into_raw(Box::new(WriterEntry {
            cts: AtomicU64::new(0),
            keys: Vec::with_capacity(256),
        }))
    }
}

impl Drop for RoccLocal {
    fn drop(&mut self) {
        // `retire_local` hands the pool over; what is left was never shared.
        for (_, p) in self.pool.drain(..) {
            // SAFETY: made by `Box::into_raw`, reachable by no one (see above).
            drop(unsafe { Box::from_raw(p as *mut WriterEntry) });
        }
    }
}

/// The ranges of `table`, partitioning it on its first use.
#[inline]
fn table_ranges<'t>(
    global: bool,
    local: &'t mut RoccLocal,
    sh: &RoccShared,
    table: &Table,
    g: &Guard<'_>,
) -> &'t TableRanges {
    let i = table.id.0 as usize;
    if matches!(local.tables.get(i), Some(Some(_))) {
        return local.tables[i].as_deref().expect("cached");
    }
    table_ranges_slow(global, local, sh, table, g)
}

#[cold]
fn table_ranges_slow<'t>(
    global: bool,
    local: &'t mut RoccLocal,
    sh: &RoccShared,
    table: &Table,
    g: &Guard<'_>,
) -> &'t TableRanges {
    let i = table.id.0 as usize;
    if local.tables.len() <= i {
        local.tables.resize(i + 1, None);
    }
    if local.tables[i].is_none() {
        let found = sh.tables.read().get(i).cloned().flatten();
        let r = match found {
            Some(r) => r,
            None => {
                // Walk the table without holding the lock; if another worker
                // got there first, its partition wins.
                let mine = Arc::new(if global {
                    let list = sh.global.get_or_init(|| RangeList::whole(sh.slots));
                    TableRanges::single(list.clone(), sh.slots)
                } else {
                    TableRanges::partition(table, sh.range_size, sh.slots, g)
                });
                let mut all = sh.tables.write();
                if all.len() <= i {
                    all.resize(i + 1, None);
                }
                all[i].get_or_insert(mine).clone()
            }
        };
        local.tables[i] = Some(r);
    }
    local.tables[i].as_deref().expect("cached")
}

/// The most logical ranges one part of a scan takes (see [`scan`]): it
/// bounds the ranges a scan that its visitor stops early has counted
/// itself into and constructed predicates for without reaching them.
const PART_RANGES: usize = 64;

/// `Txn::scan` under ROCC: a predicate per range touched (Algorithm 3.2).
///
/// The book scans range by range, constructing each range's predicate (its
/// version) just before scanning it. Here a scan goes in *parts*: a part is
/// a run of consecutive ranges, as many as the rows still wanted should
/// fill at the target density (all that are left for a scan without a
/// limit, at most [`PART_RANGES`]). The predicates of a part's ranges are
/// constructed first (counted in, then the versions read), then the part is
/// one index scan. Each range's version is still read before any row of
/// that range, as the algorithm requires; it is read earlier than the book
/// reads it, which can only add writers to validate against (a stricter
/// check, never a missed one). What it saves is a descent of the index and
/// a hand-over per range. A part the scan stops in keeps the predicates of
/// the ranges it reached, the last one's scope ending at the stop key.
pub(crate) fn scan<P: RangeProto, F>(
    tx: &mut STx<'_, P>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    mut f: F,
) -> TxResult<usize>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let g = tx.g;
    let ranges = table_ranges(P::GLOBAL, &mut tx.st.ranges, tx.sh, table, g) as *const TableRanges;
    // SAFETY: the table cache holds an `Arc` of it for the worker's life.
    let tr = unsafe { &*ranges };
    let map = tr.map(g);
    let (first, last) = (map.first_for(lo), map.last_for(hi));
    if first > last {
        return Ok(0);
    }
    if tx.sh.gated && !tx.st.ranges.scanning_tables.contains(&(ranges as usize)) {
        // The table-wide count first, once per transaction and table: a
        // writer that finds it zero after locking does not look at the
        // ranges (see `register`).
        tr.scans().begins();
        tx.st.ranges.scanning_tables.push(ranges as usize);
    }
    let limit = opts.limit.unwrap_or(usize::MAX);
    let target = tr.target().max(1) as usize;
    let n = last - first + 1;
    // The range at step `s` of the scan (in its direction).
    let at = |s: usize| if opts.reverse { last - s } else { first + s };
    let mut count = 0usize;
    // The key the scan stopped at (kept across transactions: no allocation).
    let mut stop_key = std::mem::take(&mut tx.st.ranges.stop_key);
    let mut done = 0usize;
    while done < n {
        let left = limit - count;
        let take = if left == usize::MAX {
            n - done
        } else {
            // The range it starts in may be partly behind it: one more.
            left / target + 2
        }
        .min(n - done)
        .min(PART_RANGES);
        let local = &mut tx.st.ranges;
        let part_preds = local.preds.len();
        for s in done..done + take {
            let l: &RangeList = &map.lists[at(s)];
            if tx.sh.gated {
                // Count this scan in before the predicate's version is read
                // and before any row of the range (see the module docs).
                l.scans().begins();
                local.scanning.push(l as *const RangeList as usize);
            }
            // Construct the predicate before scanning the range.
            let ts = l.version();
            let (plo, phi) = clip(lo, hi, l);
            let p = Predicate {
                list: l,
                ts,
                table: table.id,
                lo: PBound::of(plo, l, &mut local.pbuf),
                hi: PBound::of(phi, l, &mut local.pbuf),
            };
            local.preds.push(p);
        }
        // The part in key order: from its lowest range's start to its
        // highest range's end.
        let (a, b) = (at(done), at(done + take - 1));
        let (low, high) = if opts.reverse { (b, a) } else { (a, b) };
        let part_lo = clip(lo, hi, &map.lists[low]).0;
        let part_hi = clip(lo, hi, &map.lists[high]).1;
        let part_opts = ScanOptions {
            limit: (left != usize::MAX).then_some(left),
            ..opts
        };
        let r = scan_rows::<_, P>(tx, table, part_lo, part_hi, part_opts, &mut f, &mut stop_key);
        let (got, stopped) = match r {
            Ok(x) => x,
            Err(e) => {
                tx.st.ranges.stop_key = stop_key;
                return Err(e);
            }
        };
        count += got;
        if stopped {
            // The range it stopped in ends the scan's predicates, its scope
            // up to the row the scan stopped at; the part's ranges past it
            // were not reached (their counts stay raised until the
            // transaction ends, which only makes writers register there).
            let k = &stop_key[..];
            let i = map.find(k);
            let s = if opts.reverse { last - i } else { i - first };
            debug_assert!((done..done + take).contains(&s), "stopped outside the part");
            let local = &mut tx.st.ranges;
            local.preds.truncate(part_preds + (s - done) + 1);
            let p = local.preds.last_mut().expect("the range stopped in");
            if opts.reverse {
                p.lo = PBound::stash(Bound::Included(k), &mut local.pbuf);
            } else {
                p.hi = PBound::stash(Bound::Included(k), &mut local.pbuf);
            }
            break;
        }
        done += take;
    }
    tx.st.ranges.stop_key = stop_key;
    Ok(count)
}

/// The scope of a scan `lo..hi` within range `l`.
#[inline]
fn clip<'a>(lo: Bound<&'a [u8]>, hi: Bound<&'a [u8]>, l: &'a RangeList) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    let sub_lo = max_lo(lo, Bound::Included(&l.start[..]));
    let sub_hi = match &l.end {
        Some(e) => min_hi(hi, Bound::Excluded(&e[..])),
        None => hi,
    };
    (sub_lo, sub_hi)
}

/// Algorithm 3.1 lines 1-5, after the write set is locked: register the
/// writer once in every range it writes, then take the commit stamp.
pub(crate) fn register<P: RangeProto>(tx: &mut STx<'_, P>) {
    let g = tx.g;
    let local = &mut tx.st.ranges;
    let sets = &tx.st.sets;
    // The writer entry is taken only where it is published or stamped: a
    // commit that registers nowhere and validates nothing needs none.
    let mut entry: *mut WriterEntry = std::ptr::null_mut();
    local.registered.clear();
    local.claims.clear();
    let gated = tx.sh.gated;
    if gated {
        // The write set is locked: a scan that counts itself into a table
        // or a range after the counts below are read sees those locks (see
        // the module docs).
        std::sync::atomic::fence(Ordering::SeqCst);
    }
    // Three passes, so that the misses of several ranges overlap: find the
    // ranges (prefetching their heads, or their scan counts), claim a
    // position in each (prefetching its slot), publish.
    //
    // The table of the last write, its ranges, and whether a scan other
    // than this transaction's own is in flight there: looked up once per
    // run of writes to one table. One read of the table's count after the
    // fence serves every write there, as all their locks came before it.
    let mut cur: Option<(TableId, *const TableRanges, bool)> = None;
    for w in &sets.writes {
        let inserted = match (
            w.kind,
            w.created || w.locked_tid & crate::storage::tid::ABSENT != 0,
        ) {
            (WriteKind::Delete, _) => -1,
            (_, true) => 1,
            _ => 0,
        };
        let (tr, others) = match cur {
            Some((t, tr, others)) if t == w.table => (tr, others),
            _ => {
                let table = &tx.core.tables[w.table.0 as usize];
                let tr = table_ranges(P::GLOBAL, local, tx.sh, table, g) as *const TableRanges;
                let mine = local.scanning_tables.contains(&(tr as usize)) as usize;
                // SAFETY: the table cache holds an `Arc` of it.
                let others = gated && unsafe { &*tr }.scans().others(mine);
                cur = Some((w.table, tr, others));
                (tr, others)
            }
        };
        // SAFETY: the table cache holds an `Arc` of it.
        let tr = unsafe { &*tr };
        if gated && inserted == 0 && !others {
            // No scan of the table in flight but this transaction's own
            // (whose predicates skip its own entry): an update has nothing
            // to register, and no record count to change.
            continue;
        }
        let map = tr.map(g);
        let l: &RangeList = &map.lists[map.find(sets.stashed(w.key))];
        let addr = l as *const RangeList as usize;
        match local.registered.iter().position(|&a| a == addr) {
            Some(i) => local.claims[i].1 += inserted,
            None => {
                if gated {
                    l.prefetch_scanners();
                } else {
                    l.prefetch_head();
                }
                local.registered.push(addr);
                local
                    .claims
                    .push((tr as *const TableRanges as usize, inserted, 0));
            }
        }
    }
    // Without gating every range is claimed; with it, only scanned ones.
    let mut claimed = !gated;
    if gated {
        for (i, &addr) in local.registered.iter().enumerate() {
            // SAFETY: a list of a map read under `g`: retired maps (and
            // the lists only they hold) outlive the guard.
            let l = unsafe { &*(addr as *const RangeList) };
            let mine = local.scanning.iter().filter(|&&a| a == addr).count();
            if l.scans().others(mine) {
                l.prefetch_head();
                claimed = true;
            } else {
                // No scan in flight here: nothing to register.
                local.claims[i].2 = UNCLAIMED;
            }
        }
    }
    if claimed {
        entry = local.entry(g, &tx.sh.spare);
        local.entry = entry as usize;
        // The keys go in before any position is claimed: a validator that
        // reaches a claimed position waits until it is published.
        push_keys(entry, sets);
        for (i, &addr) in local.registered.iter().enumerate() {
            if local.claims[i].2 != UNCLAIMED {
                // SAFETY: as above.
                local.claims[i].2 = unsafe { &*(addr as *const RangeList) }.claim();
            }
        }
    }
    let mut sealed = false;
    for (i, &addr) in local.registered.iter().enumerate() {
        // SAFETY: as above.
        let l = unsafe { &*(addr as *const RangeList) };
        let (tr, inserted, q) = local.claims[i];
        if q != UNCLAIMED {
            l.publish(q, entry);
        }
        // SAFETY: the table cache holds an `Arc` of it.
        let tr = unsafe { &*(tr as *const TableRanges) };
        if l.count(inserted, tr.target()) {
            tr.want_split();
        }
        sealed |= l.sealed();
    }
    if sealed {
        if !claimed {
            entry = local.entry(g, &tx.sh.spare);
            local.entry = entry as usize;
            push_keys(entry, sets);
        }
        register_after_split(tx, entry);
    } else if !claimed && tx.st.ranges.preds.is_empty() {
        // Registered nowhere and validating no predicate: nobody compares
        // this commit's stamp with anything (stamps order the writers in
        // the lists against predicates), so it draws none, sparing the
        // shared counter, and takes no entry.
        return;
    }
    if entry.is_null() {
        // Unpublished, for the stamp its predicates are validated with.
        let local = &mut tx.st.ranges;
        entry = local.entry(g, &tx.sh.spare);
        local.entry = entry as usize;
    }
    let cts = tx.sh.cts.fetch_add(1, Ordering::SeqCst) + 1;
    // SAFETY: published; the stamp word is atomic.
    unsafe { &*entry }.cts.store(cts, Ordering::Release);
}

/// Put the write set's keys into `entry`, before it is published anywhere.
fn push_keys(entry: *mut WriterEntry, sets: &TxnSets) {
    // SAFETY: not published anywhere yet: the committer's alone.
    let e = unsafe { &mut *entry };
    for w in &sets.writes {
        e.push_key(w.table, sets.stashed(w.key));
    }
}

/// Some list this commit registered in was sealed by a split: register in
/// the new map's lists as well (once the new map is published).
#[cold]
fn register_after_split<P: RangeProto>(tx: &mut STx<'_, P>, entry: *const WriterEntry) {
    let g = tx.g;
    let local = &mut tx.st.ranges;
    let sets = &tx.st.sets;
    for w in &sets.writes {
        let table = &tx.core.tables[w.table.0 as usize];
        let tr = table_ranges(P::GLOBAL, local, tx.sh, table, g) as *const TableRanges;
        // SAFETY: the table cache holds an `Arc` of it.
        let tr = unsafe { &*tr };
        loop {
            let map = tr.map(g);
            let l: &RangeList = &map.lists[map.find(sets.stashed(w.key))];
            let addr = l as *const RangeList as usize;
            if !local.registered.contains(&addr) {
                // Its records were counted in the sealed list. (The fence
                // of `register` came after the locks, before this count.)
                if !tx.sh.gated || l.scans().any() {
                    l.register(entry, 0, tr.target());
                }
                local.registered.push(addr);
            }
            if !l.sealed() {
                break;
            }
            // Sealed, the new map not published yet: wait for it (the
            // splitter publishes right after sealing).
            while std::ptr::eq(tr.map(g), map) {
                std::thread::yield_now();
            }
        }
    }
}

/// Validate the predicate set (Algorithm 3.1 lines 11-15) against the
/// writers with a stamp below `bound`.
pub(crate) fn validate<P: RangeProto>(
    tx: &mut STx<'_, P>,
    bound: u64,
) -> Result<(), ConflictReason> {
    let g = tx.g;
    let own = tx.st.ranges.entry;
    let local = &tx.st.ranges;
    for p in &local.preds {
        // SAFETY: reached through a map while pinned; maps (and the lists
        // only they hold) are retired through the memory epoch.
        let l = unsafe { &*p.list };
        if l.sealed() {
            return Err(ConflictReason::RangeSplit);
        }
        let head = l.version();
        if !l.holds_from(p.ts, head) {
            return Err(ConflictReason::RangeOverflow);
        }
        let (lo, hi) = (p.lo.get(&local.pbuf, l), p.hi.get(&local.pbuf, l));
        // GWV's one list holds every table's writers: no shortcut.
        let whole = !P::GLOBAL && l.covered_by(lo, hi);
        for q in p.ts..head {
            let w = match l.at(q, g) {
                Slot::Overwritten => return Err(ConflictReason::RangeOverflow),
                Slot::Writer(w) => w,
            };
            if w as *const WriterEntry as usize == own {
                continue;
            }
            let mut c = w.cts.load(Ordering::Acquire);
            let mut spins = 0u32;
            while c == 0 {
                // Registered, stamp not drawn yet: it may draw one below
                // ours, so wait (a few instructions unless preempted).
                spins += 1;
                if spins > 64 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
                c = w.cts.load(Ordering::Acquire);
            }
            if c & ABORTED != 0 || c >= bound {
                continue;
            }
            if whole || w.wrote_in(p.table, lo, hi) {
                return Err(ConflictReason::RangeValidation);
            }
        }
    }
    Ok(())
}

/// The commit stamp of the commit in progress (registered), or, for a
/// read-only transaction, the bound of the stamps drawn so far.
pub(crate) fn bound<P: RangeProto>(tx: &STx<'_, P>) -> u64 {
    match tx.st.ranges.entry {
        0 => tx.sh.cts.load(Ordering::SeqCst) + 1,
        e => {
            // SAFETY: our registered entry.
            let c = unsafe { &*(e as *const WriterEntry) }
                .cts
                .load(Ordering::Relaxed);
            // A commit with predicates always draws its stamp (`register`);
            // a bound of 0 would validate nothing.
            debug_assert!(c != 0, "a validating commit without a stamp");
            c
        }
    }
}

/// The transaction's scans are over (`RoccRegistration::Scanned`): count
/// them out of their ranges. Called at the end of every commit and abort,
/// while pinned; a second call finds nothing left.
pub(crate) fn scans_done(local: &mut RoccLocal) {
    for a in local.scanning.drain(..) {
        // SAFETY: a list reached through a map while this transaction was
        // pinned, as it still is; retired lists outlive its guard.
        unsafe { &*(a as *const RangeList) }.scans().done();
    }
    for a in local.scanning_tables.drain(..) {
        // SAFETY: the worker's table cache holds an `Arc` of it.
        unsafe { &*(a as *const TableRanges) }.scans().done();
    }
}

/// The commit in progress ended: count its scans out, flag the entry if it
/// failed, and retire it through the memory epoch.
pub(crate) fn finish<P: RangeProto>(tx: &mut STx<'_, P>, committed: bool) {
    let local = &mut tx.st.ranges;
    scans_done(local);
    if local.entry == 0 {
        return;
    }
    let e = local.entry as *const WriterEntry;
    if !committed {
        // SAFETY: our registered entry.
        unsafe { &*e }.cts.fetch_or(ABORTED, Ordering::Release);
    }
    local.pool.push_back((tx.g.epoch(), local.entry));
    local.entry = 0;
}

/// Between transactions: split the ranges that grew past twice the target.
fn maintain(local: &mut RoccLocal, tables: &[Arc<Table>], g: &Guard<'_>) {
    for (i, tr) in local.tables.iter().enumerate() {
        if let (Some(tr), Some(t)) = (tr, tables.get(i)) {
            if tr.split_pending() {
                tr.split_wanted(t, g);
            }
        }
    }
}

/// The worker goes away: its entries may still be in lists.
fn retire(sh: &RoccShared, local: &mut RoccLocal) {
    let mut spare = sh.spare.lock();
    spare.extend(local.pool.drain(..));
    if local.entry != 0 {
        // A commit unwound after registering (see `RoccLocal::begin`):
        // flag the entry; it is reused only once the memory epoch passes
        // the current one.
        // SAFETY: our registered entry.
        let e = unsafe { &*(local.entry as *const WriterEntry) };
        e.cts.fetch_or(ABORTED, Ordering::Release);
        spare.push((u64::MAX - 2, local.entry));
        local.entry = 0;
    }
}

/// A claim slot of a range this commit need not register in.
const UNCLAIMED: u64 = u64::MAX;

/// What ROCC's code needs of its two protocols.
pub(crate) trait RangeProto: Mode + super::CcProtocol<Shared = RoccShared> {
    /// One list for the whole database (GWV) instead of one per range.
    const GLOBAL: bool;
}

impl RangeProto for Rocc {
    const GLOBAL: bool = false;
}

impl RangeProto for Gwv {
    const GLOBAL: bool = true;
}

macro_rules! range_mode {
    ($ty:ty) => {
        impl Mode for $ty {
            const VALIDATES: bool = true;
            const KEEP_KEYS: bool = true;
            const DIRTY_ABORT: bool = true;
            const RANGE_PREDICATES: bool = true;

            #[inline]
            fn scan_hook<F>(
                tx: &mut STx<'_, Self>,
                table: &Table,
                lo: Bound<&[u8]>,
                hi: Bound<&[u8]>,
                opts: ScanOptions,
                f: F,
            ) -> TxResult<usize>
            where
                F: FnMut(&[u8], &[u8]) -> bool,
            {
                scan(tx, table, lo, hi, opts, f)
            }
            #[inline]
            fn before_lock(tx: &mut STx<'_, Self>) {
                let local = &mut tx.st.ranges;
                let mut last = None;
                for w in &tx.st.sets.writes {
                    // Once per run of writes to one table.
                    if last.replace(w.table) == Some(w.table) {
                        continue;
                    }
                    table_ranges(
                        <$ty as RangeProto>::GLOBAL,
                        local,
                        tx.sh,
                        &tx.core.tables[w.table.0 as usize],
                        tx.g,
                    );
                }
            }
            #[inline]
            fn after_lock(tx: &mut STx<'_, Self>) {
                register(tx)
            }
            #[inline]
            fn validate_more(tx: &mut STx<'_, Self>) -> Result<(), ConflictReason> {
                if tx.st.ranges.preds.is_empty() {
                    return Ok(());
                }
                let b = bound(tx);
                validate(tx, b)
            }
            #[inline]
            fn has_predicates(tx: &STx<'_, Self>) -> bool {
                !tx.st.ranges.preds.is_empty()
            }
            #[inline]
            fn finish(tx: &mut STx<'_, Self>, committed: bool) {
                finish(tx, committed)
            }
            #[inline]
            fn aborted(tx: &mut STx<'_, Self>) {
                scans_done(&mut tx.st.ranges)
            }
        }
    };
}
range_mode!(Rocc);
range_mode!(Gwv);

super::single_version_protocol!(Rocc, RoccShared);
super::single_version_protocol!(Gwv, RoccShared);

//! `--cc ems`: snapshot isolation on EMS, the multi-version storage of Cai,
//! Guo and Zhou (chapter 2, section 2.3; the object is
//! [`crate::storage::ems`]), through the protocol seam.
//!
//! *Records.* Every record is an [`EmsRecord`]: the object header (lock
//! word, regions A and B holding the two newest versions, the oldest-first
//! list behind them), whose lock word also marks the record unlinked
//! from its index. An insert makes an
//! object with no visible version whose lock its inserter holds, and puts
//! the value into the secondary; its commit makes it visible.
//!
//! *Stamps, without the book's commit thread.* The book runs every commit
//! on one thread, so a start stamp handed out is always one whose
//! committer has flipped every object it wrote (the rule the lock-free
//! read relies on). Here committers run in parallel and only the
//! *publication* is ordered: each draws its stamp `c` from a counter
//! (`Stamps::next`, one fetch-and-add), sets and flips its objects, marks
//! `c` finished in a ring of flags, and advances the published stamp
//! (`Stamps::visible`) over the contiguous prefix of finished stamps. A
//! start stamp is `visible`, so every stamp at or below it has all its
//! objects flipped; a commit returns once `visible >= c`, so the
//! committer's next transaction (and anyone it tells) sees it. A worker
//! has at most one drawn, unpublished stamp, so a ring of more flags than
//! workers never wraps onto an unpublished stamp.
//!
//! *SI* (section 2.3.4): reads at the start stamp (never blocked, never
//! aborted); writes take the object's lock word at once (held by another:
//! abort, `WriteConflict`) and refuse a primary committed after the start
//! stamp (first-committer-wins, `WriteConflict`); commit sets each
//! secondary's stamp, then flips; abort releases the lock and leaves the
//! secondary invalid (no undo). Deletes write a tombstone. Scans read the
//! snapshot with no phantom protection, as ERMIA's `si`.
//!
//! *Garbage collection*, in the book's three places, all at the watermark
//! (the oldest running start stamp, from the TID table's slots, refreshed
//! every [`WATERMARK_EVERY`] transactions): the write path (a secondary
//! whose primary is at or below the watermark is expired and reused in
//! place, not listed; list nodes older than the newest one at or below the
//! watermark are freed), the read path (a reader that had to walk the list
//! prunes it if it can take the lock word without waiting), and a
//! background scanner that walks the tables in key order, a slice at a time
//! between transactions on whichever worker finds it free. Versions are
//! freed through the memory epoch. Committed tombstones at or below the
//! watermark, and rolled-back inserts, are unlinked from their index under
//! the object's lock; a writer that then takes the lock of an unlinked
//! record goes back to the index.
//!
//! *Durability.* The redo entry (full rows; deletes) is written under the
//! objects' locks, between the stamp and the flips, with the epoch read
//! after the stamp: a record's next writer takes its lock after the flip,
//! so it draws a larger stamp and reads a later or equal epoch, and the
//! log's (epoch, stamp) order per record is the commit order recovery
//! folds in. Checkpoints read each object's newest committed version; a
//! recovered record is one version stamped 1 (below every new stamp).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use super::xid::XidTable;
use super::{backoff_spin, CcProtocol, OrphanUnlinks, PendingUnlink, Tx, WorkerCore};
use super::{Prefetched, Records, STALE_RETRIES};
use crate::catalog::{Table, TableId};
use crate::engine::{Engine, Settings};
use crate::epoch::Guard;
use crate::error::{ConflictReason, TxError, TxResult};
use crate::index::{Insert, InsertHint, Lookup, OrderedIndex};
use crate::storage::ems::{EmsConflict, EmsFill, EmsRecord};
use crate::storage::Record;
use crate::txn::{check_patch, ScanOptions};

/// Transactions between refreshes of a worker's GC watermark.
const WATERMARK_EVERY: u32 = 32;
/// Transactions between a worker's tries at a slice of the background
/// scan.
const SCAN_EVERY: u32 = 256;
/// Records per slice of the background scan.
const SCAN_SLICE: usize = 32;
/// The lock word's owner while garbage collection holds it (read path and
/// scanner): no transaction id is this large, so no transaction takes it
/// for its own lock.
const GC_TID: u64 = crate::storage::ems::TID_MASK;
/// Back-off steps (spins, then yields: `backoff::snooze`) at a lock word
/// that garbage collection holds before a writer gives up. Garbage
/// collection never waits while it holds one, so it lets go within a list
/// walk or an index removal unless its thread is preempted.
const GC_WAIT: u32 = 256;

fn conflict<T>(r: ConflictReason) -> TxResult<T> {
    Err(TxError::Conflict(r))
}

/// `--cc ems`.
pub(crate) struct Ems;

type ETx<'a> = Tx<'a, Ems>;

/// The commit stamps: drawn from `next`, published through `visible` over
/// the contiguous prefix of finished ones (see the module docs).
pub(crate) struct Stamps {
    /// The last stamp drawn.
    next: CachePadded<AtomicU64>,
    /// The published stamp: every stamp at or below it has flipped all its
    /// objects. Start stamps are read from it.
    visible: CachePadded<AtomicU64>,
    /// `done[c & mask] == c` once stamp `c` has flipped all its objects.
    done: Box<[AtomicU64]>,
    mask: u64,
}

impl Stamps {
    /// Stamps for at most `workers` concurrent committers. Stamp 1 is
    /// taken (recovered records carry it).
    pub(crate) fn new(workers: usize) -> Stamps {
        let n = (workers + 1).next_power_of_two();
        Stamps {
            next: CachePadded::new(AtomicU64::new(1)),
            visible: CachePadded::new(AtomicU64::new(1)),
            done: (0..n).map(|_| AtomicU64::new(0)).collect(),
            mask: n as u64 - 1,
        }
    }

    /// A committer's stamp.
    #[inline]
    pub(crate) fn draw(&self) -> u64 {
        self.next.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The published stamp.
    #[inline]
    pub(crate) fn visible(&self) -> u64 {
        self.visible.load(Ordering::Acquire)
    }

    /// Stamp `c` has flipped every object it wrote: mark it, help publish
    /// the finished prefix, and wait until it covers `c`. The wait is
    /// bounded by the committers holding smaller stamps, none of which
    /// waits for anything in between.
    pub(crate) fn finish(&self, c: u64) {
        // Release: a publisher that reads the flag sees our flips.
        self.done[(c & self.mask) as usize].store(c, Ordering::Release);
        let mut spins = 0;
        loop {
            self.advance();
            if self.visible() >= c {
                return;
            }
            backoff_spin(&mut spins);
        }
    }

    /// Advance `visible` while the next stamp is finished.
    fn advance(&self) {
        loop {
            let s = self.visible.load(Ordering::Acquire);
            let n = s + 1;
            if self.done[(n & self.mask) as usize].load(Ordering::Acquire) != n {
                return;
            }
            // AcqRel: whoever reads the new value (a start stamp) sees the
            // flips the flag published.
            let _ = self
                .visible
                .compare_exchange(s, n, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

/// The shared state of `--cc ems`.
pub(crate) struct EmsShared {
    pub(crate) stamps: Stamps,
    /// Running transactions' start stamps, for the watermark (the TID
    /// table's slots; EMS uses nothing else of it).
    xids: XidTable,
    /// Unlinks of dropped workers.
    orphans: OrphanUnlinks,
    /// Where the background scan stands.
    scanner: Mutex<Scanner>,
}

/// The background scanner's position: a table and the last key done
/// (`after`, if `resume`). `spare` is the next slice's key buffer, so the
/// scan allocates nothing once the buffers have grown.
#[derive(Default)]
struct Scanner {
    table: usize,
    resume: bool,
    after: Vec<u8>,
    spare: Vec<u8>,
}

/// A write of the running transaction.
struct EmsWrite {
    rec: *const EmsRecord,
    table: TableId,
    /// Key bytes in `EmsLocal::wbuf`.
    key: (u32, u32),
    /// We made the record (an insert of a new key).
    created: bool,
}

/// The per-worker state of `--cc ems`.
pub(crate) struct EmsLocal {
    slot: usize,
    /// The running transaction's id (its lock words' owner).
    xid: u64,
    /// Its start stamp.
    sts: u64,
    watermark: u64,
    since_watermark: u32,
    since_scan: u32,
    writes: Vec<EmsWrite>,
    wbuf: Vec<u8>,
    rbuf: Vec<u8>,
    pending_unlinks: VecDeque<PendingUnlink>,
    /// Where this attempt's last insert went (cleared when it begins: the
    /// hint is valid only under the guard it was made under).
    hint: InsertHint,
    /// The records this attempt's prefetches found (`Txn::prefetch`;
    /// cleared when it begins, like the hint).
    prefetched: Prefetched,
}

// SAFETY: the record pointers are only dereferenced by the owning worker
// while it is pinned.
unsafe impl Send for EmsLocal {}

impl EmsLocal {
    fn new(slot: usize) -> EmsLocal {
        EmsLocal {
            slot,
            xid: 0,
            sts: 0,
            watermark: 0,
            since_watermark: 0,
            since_scan: 0,
            writes: Vec::new(),
            wbuf: Vec::new(),
            rbuf: Vec::new(),
            pending_unlinks: VecDeque::new(),
            hint: InsertHint::default(),
            prefetched: Prefetched::default(),
        }
    }

    fn key(&self, k: (u32, u32)) -> &[u8] {
        &self.wbuf[k.0 as usize..(k.0 + k.1) as usize]
    }
}

/// Whether `rec`'s visible version for the transaction is present; its
/// value is then in `rbuf`. A reader that had to walk the list prunes it
/// when it holds expired versions (garbage collection on the read path).
fn read_rec(st: &mut EmsLocal, rec: &EmsRecord, g: &Guard<'_>) -> bool {
    read_rec_cols(st, rec, g, (0, usize::MAX)).is_some()
}

/// [`read_rec`] of bytes `cols.0..cols.1` of the value only: where they
/// start in `rbuf` if present.
#[inline(always)]
fn read_rec_cols(
    st: &mut EmsLocal,
    rec: &EmsRecord,
    g: &Guard<'_>,
    cols: (usize, usize),
) -> Option<usize> {
    match rec.obj.read_cols(st.sts, st.xid, &mut st.rbuf, cols, g) {
        None => None,
        Some((r, skip)) => {
            if r.jumps > 0 && rec.obj.has_expired(st.watermark, g) {
                rec.obj.prune(GC_TID, st.watermark, g);
            }
            (!r.tombstone).then_some(skip)
        }
    }
}

/// The record a prefetch of this attempt found for `key`, if any. Like
/// si's (`cc::ermia`), a record found after the transaction began answers
/// as the index would even if it has been unlinked since: its newest
/// version was then a tombstone (or nothing) that every snapshot sees, and
/// a record inserted for the key after the unlink commits after this
/// snapshot began. A write takes its lock and refuses it unlinked.
#[inline]
fn prefetched<'g>(p: &mut Prefetched, table: &Table, key: &[u8]) -> Option<&'g EmsRecord> {
    // SAFETY: found by this attempt's prefetch while pinned (the memo is
    // cleared when an attempt begins), so not freed; every record of a
    // database running EMS is an `EmsRecord`.
    p.find(table.id, key)
        .map(|r| unsafe { &*(r as *const EmsRecord) })
}

/// Take `rec`'s lock word for the running transaction; waits only while
/// garbage collection holds it.
fn acquire(st: &EmsLocal, rec: &EmsRecord) -> TxResult<()> {
    let mut tries = 0;
    while !rec.obj.acquire(st.xid) {
        if rec.obj.holder() != Some(GC_TID) || tries >= GC_WAIT {
            return conflict(ConflictReason::WriteConflict);
        }
        backoff_spin(&mut tries);
    }
    Ok(())
}

use super::PointWrite as Op;

/// Write `val` (`None`: delete) to `key` under the rules of `op`.
fn write(
    tx: &mut ETx<'_>,
    table: &Table,
    key: &[u8],
    val: Option<&[u8]>,
    op: Op,
) -> TxResult<bool> {
    write_fill(tx, table, key, EmsFill::Value(val), op)
}

/// [`write`] of `fill`: a whole value, or (with `Op::Update`) a column
/// write, whose bytes go over the value this transaction reads, copied
/// straight into the private region (no buffer in between; the bounds are
/// checked against what the update's own read of the snapshot returned,
/// which is the primary whenever first-committer-wins lets the write in).
fn write_fill(
    tx: &mut ETx<'_>,
    table: &Table,
    key: &[u8],
    fill: EmsFill<'_>,
    op: Op,
) -> TxResult<bool> {
    // A column write's bytes must lie inside the value it reads.
    let check = |len: usize| match fill {
        EmsFill::Patch { at, bytes } => check_patch(len, at, bytes.len()),
        EmsFill::Value(_) => Ok(()),
    };
    debug_assert!(
        matches!(fill, EmsFill::Value(_)) || op == Op::Update,
        "a patch is an update"
    );
    let g = tx.g;
    let recs: Records<'_, Ems> = tx.records();
    let st = &mut *tx.st;
    for attempt in 0..STALE_RETRIES {
        // A record a prefetch found first (one unlinked since is refused
        // under its lock below, and the next attempt goes to the index).
        let found = if attempt == 0 {
            prefetched(&mut st.prefetched, table, key)
        } else {
            None
        };
        let Some(rec) = found.or_else(|| recs.lookup(table, key)) else {
            let EmsFill::Value(val) = fill else {
                return Ok(false); // an update of a missing key
            };
            if !op.applies(false) {
                return Ok(false);
            }
            // A new record: invisible until our commit flips it.
            let r = EmsRecord::new_insert(st.xid, val);
            match table.index.insert_hinted(key, r as u64, g, &mut st.hint) {
                Insert::Inserted { .. } => {
                    let k = stash(&mut st.wbuf, key);
                    st.writes.push(EmsWrite {
                        rec: r,
                        table: table.id,
                        key: k,
                        created: true,
                    });
                    return Ok(true);
                }
                Insert::Exists(_) => {
                    // SAFETY: never published.
                    unsafe { EmsRecord::free(r as *mut u8) };
                    continue;
                }
            }
        };
        let obj = &rec.obj;
        if obj.held_by(st.xid) {
            // Our own write: rewrite it in place.
            let present = read_rec(st, rec, g);
            if !op.applies(present) {
                return Ok(false);
            }
            check(st.rbuf.len())?;
            obj.install_fill(false, st.sts, fill, None, g)
                .expect("a rewrite of our own version");
            return Ok(true);
        }
        if op != Op::Put {
            // A record another writer holds conflicts whatever the answer
            // would be, as under `si` (the write would need the lock).
            if obj.holder().is_some_and(|h| h != GC_TID) {
                return conflict(ConflictReason::WriteConflict);
            }
            if !op.applies(read_rec(st, rec, g)) {
                // "Exists" / "missing" is a read of the snapshot.
                return Ok(false);
            }
            check(st.rbuf.len())?;
        }
        acquire(st, rec)?;
        if rec.unlinked() {
            // Unlinked since we found it: go back to the index.
            obj.release_abort();
            continue;
        }
        match obj.install_fill(true, st.sts, fill, Some(st.watermark), g) {
            Ok(()) => {}
            // First-committer-wins (the lock is released).
            Err(EmsConflict::LostUpdate | EmsConflict::Locked) => {
                return conflict(ConflictReason::WriteConflict)
            }
        }
        let k = stash(&mut st.wbuf, key);
        st.writes.push(EmsWrite {
            rec,
            table: table.id,
            key: k,
            created: false,
        });
        return Ok(true);
    }
    conflict(ConflictReason::Stale)
}

fn stash(wbuf: &mut Vec<u8>, key: &[u8]) -> (u32, u32) {
    let at = wbuf.len() as u32;
    wbuf.extend_from_slice(key);
    (at, key.len() as u32)
}

/// Commit: a stamp, the redo entry, the flips, the publication.
fn commit(tx: &mut ETx<'_>) -> TxResult<()> {
    let db = tx.db;
    let sh = tx.sh;
    let g = tx.g;
    let st = &mut *tx.st;
    if st.writes.is_empty() {
        // Durable mode: every version this reader saw was committed, its
        // epoch read, before now.
        if db.log.is_some() {
            tx.core.log.ack = db.epochs.global();
        }
        sh.xids.release(st.slot);
        return Ok(());
    }
    if let Some(log) = &db.log {
        log.announce(tx.core.slot, &mut tx.core.log);
    }
    let c = sh.stamps.draw();
    // After the stamp, before the flips (see the module docs).
    let epoch = db.epochs.global();
    if let Some(log) = &db.log {
        let (writes, wbuf, rbuf) = (&st.writes, &st.wbuf, &mut st.rbuf);
        let (sts, xid) = (st.sts, st.xid);
        log.append(tx.core.slot, &mut tx.core.log, epoch, c, |redo| {
            for w in writes {
                let key = &wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize];
                // SAFETY: pinned; we hold its lock, so it is ours.
                let rec = unsafe { &*w.rec };
                let own = rec.obj.read(sts, xid, rbuf, g).expect("our own version");
                if own.tombstone {
                    redo.delete(w.table, key);
                } else {
                    redo.put(w.table, key, rbuf);
                }
            }
        });
    }
    for w in &st.writes {
        // SAFETY: pinned; we hold its lock.
        let rec = unsafe { &*w.rec };
        if rec.obj.commit(c) {
            let key = st.key(w.key).into();
            st.pending_unlinks.push_back(PendingUnlink {
                table: w.table,
                key,
                rec: w.rec as *const Record,
                tid: c,
            });
        }
    }
    sh.stamps.finish(c);
    sh.xids.release(st.slot);
    Ok(())
}

/// Roll back: release every lock word (the secondaries stay invalid, no
/// undo); records we created go to the unlink queue.
fn abort(tx: &mut ETx<'_>) {
    let st = &mut *tx.st;
    for w in st.writes.iter().rev() {
        // SAFETY: pinned; we hold its lock.
        unsafe { &*w.rec }.obj.abort();
        if w.created {
            let key = st.key(w.key).into();
            st.pending_unlinks.push_back(PendingUnlink {
                table: w.table,
                key,
                rec: w.rec as *const Record,
                tid: 0,
            });
        }
    }
    st.writes.clear();
    tx.sh.xids.release(st.slot);
}

/// Unlink `rec` from `t` if the index still maps `key` to it and, under its
/// lock, it holds no committed version (`stamp` 0: a rolled-back insert)
/// or its primary is the committed tombstone stamped `stamp`. `false` if
/// the lock was busy (try again later).
fn unlink(t: &Table, g: &Guard<'_>, key: &[u8], rec: *const EmsRecord, stamp: u64) -> bool {
    // The record may have been unlinked and freed since it was queued: only
    // touch it if the index still maps the key to it. (Its address may
    // have been reused by a new record for the same key; the checks under
    // the lock then fail, or find a rolled-back insert due anyway.)
    match t.index.get(key, g) {
        Lookup::Found(v) if v == rec as u64 => {}
        _ => return true,
    }
    // SAFETY: reachable from the index, and we are pinned.
    let r = unsafe { &*rec };
    if !r.obj.acquire(GC_TID) {
        return false;
    }
    let due = if stamp == 0 {
        r.obj.is_empty()
    } else {
        r.obj.tombstone_stamp() == Some(stamp)
    };
    if due && t.index.remove(key, rec as u64, g) {
        // Under the lock: its next holder sees it and goes back to the
        // index.
        r.mark_unlinked();
        r.obj.release_abort();
        // SAFETY: unlinked from the index; pinned holders keep it through
        // the epoch; nothing else queues a free of it (a second entry finds
        // it gone from the index).
        unsafe { g.retire(rec as *mut u8, EmsRecord::free) };
    } else {
        r.obj.release_abort();
    }
    true
}

/// Between transactions: the watermark, unlinks below it, and now and then
/// a slice of the background scan.
fn maintain(db: &Engine, core: &mut WorkerCore, sh: &EmsShared, st: &mut EmsLocal, g: &Guard<'_>) {
    st.since_watermark += 1;
    let due = st.since_watermark >= WATERMARK_EVERY
        || st
            .pending_unlinks
            .front()
            .is_some_and(|p| p.tid > st.watermark && st.since_watermark >= 4);
    if due {
        st.since_watermark = 0;
        if let Some(w) = sh.xids.watermark(&sh.stamps.visible) {
            st.watermark = st.watermark.max(w);
        }
    }
    let wm = st.watermark;
    super::drain_unlinks(
        db,
        core,
        &sh.orphans,
        &mut st.pending_unlinks,
        wm,
        |t, p| unlink(t, g, &p.key, p.rec as *const EmsRecord, p.tid),
    );
    st.since_scan += 1;
    if st.since_scan >= SCAN_EVERY {
        st.since_scan = 0;
        scan_slice(core, sh, wm, g);
    }
}

/// One slice of the background scanner, by whichever worker finds it free:
/// up to [`SCAN_SLICE`] records of one table in key order, each list pruned
/// at the watermark `wm` where it holds expired versions. Returns the
/// versions freed.
fn scan_slice(core: &WorkerCore, sh: &EmsShared, wm: u64, g: &Guard<'_>) -> usize {
    let Some(mut s) = sh.scanner.try_lock() else {
        return 0;
    };
    if core.tables.is_empty() {
        return 0;
    }
    if s.table >= core.tables.len() {
        s.table = 0;
        s.resume = false;
    }
    let t = &core.tables[s.table];
    let s = &mut *s;
    let lo = if s.resume {
        Bound::Excluded(&s.after[..])
    } else {
        Bound::Unbounded
    };
    let (mut n, mut freed) = (0, 0);
    let spare = &mut s.spare;
    let mut stopped = false;
    // SAFETY: every record of a database running EMS is an `EmsRecord`;
    // pinned.
    unsafe {
        t.scan_records::<EmsRecord, _>(
            lo,
            Bound::Unbounded,
            false,
            g,
            crate::index::Unobserved,
            |k, rec| {
                if rec.obj.has_expired(wm, g) {
                    freed += rec.obj.prune(GC_TID, wm, g);
                }
                n += 1;
                if n >= SCAN_SLICE {
                    spare.clear();
                    spare.extend_from_slice(k);
                    stopped = true;
                    return false;
                }
                true
            },
        )
    };
    if stopped {
        std::mem::swap(&mut s.after, &mut s.spare);
        s.resume = true;
    } else {
        s.resume = false;
        s.table = (s.table + 1) % core.tables.len();
    }
    freed
}

impl CcProtocol for Ems {
    type Shared = EmsShared;
    type Local = EmsLocal;
    type Rec = EmsRecord;

    fn new_shared(opts: &Settings) -> EmsShared {
        EmsShared {
            stamps: Stamps::new(opts.workers),
            xids: XidTable::new(opts.workers),
            orphans: OrphanUnlinks::default(),
            scanner: Mutex::new(Scanner::default()),
        }
    }
    fn new_local(_: &EmsShared, slot: usize) -> EmsLocal {
        EmsLocal::new(slot)
    }
    #[inline]
    fn begin(tx: &mut ETx<'_>) {
        let st = &mut *tx.st;
        st.writes.clear();
        st.wbuf.clear();
        st.hint.clear();
        st.prefetched.clear();
        let (xid, sts) = tx.sh.xids.begin_from(st.slot, &tx.sh.stamps.visible);
        st.xid = xid;
        st.sts = sts;
    }
    fn get<'t>(tx: &'t mut ETx<'_>, table: &Table, key: &[u8]) -> TxResult<Option<&'t [u8]>> {
        Self::get_slice(tx, table, key, 0, usize::MAX)
    }
    /// A column read copies only the words that hold the bytes asked for.
    fn get_slice<'t>(
        tx: &'t mut ETx<'_>,
        table: &Table,
        key: &[u8],
        start: usize,
        end: usize,
    ) -> TxResult<Option<&'t [u8]>> {
        let g = tx.g;
        let Some(rec) = prefetched(&mut tx.st.prefetched, table, key)
            .or_else(|| tx.records().lookup(table, key))
        else {
            return Ok(None);
        };
        let st = &mut *tx.st;
        Ok(read_rec_cols(st, rec, g, (start, end)).map(|skip| &st.rbuf[skip..]))
    }
    /// The keys are looked up together (`cc::for_each_found`) and each
    /// record found is read at once, as a get reads a prefetched record
    /// (no memo in between); a key the batch did not find goes through
    /// `get_slice`.
    fn get_many(
        tx: &mut ETx<'_>,
        table: &Table,
        keys: &[&[u8]],
        start: usize,
        end: usize,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> TxResult<()> {
        let g = tx.g;
        super::for_each_found::<EmsRecord>(table, keys, end, g, |i, key, rec| {
            if rec.is_null() {
                f(i, Self::get_slice(tx, table, key, start, end)?);
                return Ok(());
            }
            // SAFETY: found through the index while pinned (the attempt's
            // guard), so not freed; every record of a database running EMS
            // is an `EmsRecord`.
            let rec = unsafe { &*(rec as *const EmsRecord) };
            let st = &mut *tx.st;
            let skip = read_rec_cols(st, rec, g, (start, end));
            f(i, skip.map(|s| &st.rbuf[s..]));
            Ok(())
        })
    }
    /// Looks the keys up together and prefetches their records; the gets
    /// and writes of this attempt then start from them (`cc::Prefetched`).
    fn prefetch(tx: &mut ETx<'_>, table: &Table, keys: &[&[u8]], value_len: usize) {
        tx.st
            .prefetched
            .fill::<EmsRecord>(table, keys, value_len, tx.g);
    }
    fn put(tx: &mut ETx<'_>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<()> {
        write(tx, table, key, Some(val), Op::Put).map(|_| ())
    }
    fn insert(tx: &mut ETx<'_>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
        write(tx, table, key, Some(val), Op::Insert)
    }
    fn update(tx: &mut ETx<'_>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
        write(tx, table, key, Some(val), Op::Update)
    }
    /// A column write copies the value it reads straight into the private
    /// region and writes the bytes over it there.
    fn update_slice(
        tx: &mut ETx<'_>,
        table: &Table,
        key: &[u8],
        at: usize,
        bytes: &[u8],
    ) -> TxResult<bool> {
        write_fill(tx, table, key, EmsFill::Patch { at, bytes }, Op::Update)
    }
    fn delete(tx: &mut ETx<'_>, table: &Table, key: &[u8]) -> TxResult<bool> {
        write(tx, table, key, None, Op::Delete)
    }
    fn scan<F>(
        tx: &mut ETx<'_>,
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
        let limit = opts.limit.unwrap_or(usize::MAX);
        let cols = opts.slice.unwrap_or((0, usize::MAX));
        let recs = tx.records();
        let st = &mut *tx.st;
        let mut count = 0usize;
        recs.scan(
            table,
            (lo, hi),
            opts.reverse,
            crate::index::Unobserved,
            |k, rec: &EmsRecord| {
                let Some(skip) = read_rec_cols(st, rec, g, cols) else {
                    return true;
                };
                count += 1;
                f(k, &st.rbuf[skip..]) && count < limit
            },
        );
        Ok(count)
    }
    /// Scans copy only the columns asked for (`ScanOptions::slice`).
    const SLICED_SCANS: bool = true;
    fn commit(tx: &mut ETx<'_>) -> TxResult<()> {
        commit(tx)
    }
    fn abort(tx: &mut ETx<'_>) {
        abort(tx)
    }
    fn maintain(
        db: &Engine,
        core: &mut WorkerCore,
        sh: &EmsShared,
        st: &mut EmsLocal,
        g: &Guard<'_>,
    ) {
        maintain(db, core, sh, st, g)
    }
    fn retire_local(sh: &EmsShared, st: &mut EmsLocal) {
        sh.orphans.adopt(&mut st.pending_unlinks);
    }
    fn close(sh: &mut EmsShared) {
        // Records still linked are freed with their tables.
        sh.orphans.0.get_mut().clear();
    }
    /// The checkpoint's read: the version visible at the published stamp.
    /// The book's checkpoint (section 2.4) is one read-only transaction;
    /// the engine's checkpoint is fuzzy (`log::checkpoint`), so each record
    /// is a snapshot read at the stamp published when it is read. The
    /// checkpoint starts scanning only once every transaction of an epoch below its
    /// own has finished, and a commit finishes after its stamp is
    /// published, so what this read misses (stamps not yet published) is
    /// of the checkpoint's epoch or later, which the log keeps.
    fn read_committed(sh: &EmsShared, rec: &Record, out: &mut Vec<u8>) -> bool {
        // SAFETY: every record of a database running EMS is an `EmsRecord`
        // (made here or by `rebuild`); the caller is pinned.
        let rec = unsafe { &*(rec as *const Record as *const EmsRecord) };
        let at = sh.stamps.visible();
        // SAFETY: as above.
        unsafe { rec.obj.read_pinned(at, 0, out) }.is_some_and(|r| !r.tombstone)
    }
    fn rebuild(val: &[u8], _epoch: u64) -> *mut Record {
        // Like a record written long ago: stamp 1 (every new stamp is
        // larger).
        EmsRecord::new(Some(val), 1) as *mut Record
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoch::Epochs;
    use crate::{Database, Options, Protocol};

    /// A record with committed versions stamped 10, 20, 30, 40 and 50, all
    /// kept (no watermark): 10, 20 and 30 in the list.
    fn five_versions(g: &Guard<'_>) -> *mut EmsRecord {
        let r = EmsRecord::new(Some(b"v10"), 10);
        // SAFETY: fresh, owned by the test.
        let o = unsafe { &(*r).obj };
        for c in [20u64, 30, 40, 50] {
            let v = format!("v{c}");
            o.write(c, c - 1, Some(v.as_bytes()), None, g).unwrap();
            o.commit(c);
        }
        assert_eq!(o.versions(), 5);
        r
    }

    /// Garbage collection on the write path: a writer with a watermark
    /// frees the list nodes no reader can reach (older than the newest
    /// version at or below the watermark) and does not list an expired
    /// secondary.
    #[test]
    fn the_write_path_prunes_the_list() {
        let epochs = Epochs::new(1, 1);
        let local = epochs.register().unwrap();
        let g = local.pin();
        let r = five_versions(&g);
        // SAFETY: owned by the test.
        let o = unsafe { &(*r).obj };
        // Watermark 35: 30 is the newest at or below it; 10 and 20 go. The
        // secondary (40, under the primary 50 > 35) is needed: listed.
        o.write(60, 55, Some(b"v60"), Some(35), &g).unwrap();
        o.commit(60);
        let mut out = Vec::new();
        assert_eq!(o.versions(), 4, "30, 40 listed; 50, 60 in the regions");
        o.read(35, 0, &mut out, &g).unwrap();
        assert_eq!(out, b"v30");
        // Watermark past the primary: the whole list goes, and the
        // secondary (50) is reused in place.
        o.write(70, 65, Some(b"v70"), Some(65), &g).unwrap();
        o.commit(70);
        assert_eq!(o.versions(), 2);
        o.read(69, 0, &mut out, &g).unwrap();
        assert_eq!(out, b"v60");
        drop(g);
        // SAFETY: owned by the test, unpublished.
        unsafe { EmsRecord::free(r as *mut u8) };
    }

    /// Garbage collection on the read path: a reader that walks the list
    /// prunes it (taking the lock word without waiting), and still reads
    /// its snapshot; with the lock held by a writer it leaves the list
    /// alone.
    #[test]
    fn the_read_path_prunes_the_list() {
        let epochs = Epochs::new(1, 1);
        let local = epochs.register().unwrap();
        let g = local.pin();
        let r = five_versions(&g);
        // SAFETY: owned by the test.
        let rec = unsafe { &*r };
        let mut st = EmsLocal::new(0);
        (st.xid, st.sts, st.watermark) = (4096, 33, 32);
        // A writer holds the lock: the reader reads and leaves the list.
        assert!(rec.obj.acquire(77));
        assert!(read_rec(&mut st, rec, &g));
        assert_eq!(st.rbuf, b"v30");
        assert_eq!(rec.obj.versions(), 5, "lock busy: nothing pruned");
        rec.obj.release_abort();
        // Free: 10 and 20 go (30 is the newest at or below 32).
        assert!(read_rec(&mut st, rec, &g));
        assert_eq!(st.rbuf, b"v30");
        assert_eq!(rec.obj.versions(), 3);
        assert_eq!(rec.obj.holder(), None, "the lock word is released");
        drop(g);
        // SAFETY: owned by the test, unpublished.
        unsafe { EmsRecord::free(r as *mut u8) };
    }

    /// Garbage collection by the background scanner: versions a long
    /// reader kept are freed once it ends, by a worker that neither writes
    /// nor reads those records again (only its scan slices between
    /// transactions reach them), and the long reader read its snapshot
    /// throughout.
    #[test]
    fn the_background_scanner_prunes_untouched_records() {
        let db = Database::open(Options::in_memory().protocol(Protocol::Ems).workers(4)).unwrap();
        let t = db.create_table("t").unwrap();
        let other = db.create_table("other").unwrap();
        let table = db.inner.tables.read()[t.0 as usize].clone();
        let mut w = db.worker().unwrap();
        let mut reader = db.worker().unwrap();
        let keys: Vec<[u8; 8]> = (0..100u64).map(|i| i.to_be_bytes()).collect();
        w.run(|tx| {
            for k in &keys {
                tx.insert(t, k, &0u64.to_le_bytes())?;
            }
            tx.insert(other, b"x", b"x")
        })
        .unwrap();
        let versions = |w: &crate::Worker| -> usize {
            let g = w.local.pin();
            keys.iter()
                .map(|k| match table.index.get(k, &g) {
                    // SAFETY: reached through the index while pinned.
                    Lookup::Found(v) => unsafe { &*(v as *const EmsRecord) }.obj.versions(),
                    Lookup::Missing { .. } => panic!("a key vanished"),
                })
                .sum()
        };
        reader
            .run(|tr| {
                assert_eq!(tr.get(t, &keys[0])?, Some(&0u64.to_le_bytes()[..]));
                for n in 1..=6u64 {
                    w.run(|tx| {
                        for k in &keys {
                            tx.put(t, k, &n.to_le_bytes())?;
                        }
                        Ok(())
                    })
                    .unwrap();
                    // Enough transactions for the writer to refresh its
                    // watermark (held at the reader's snapshot).
                    for _ in 0..WATERMARK_EVERY {
                        w.run(|tx| tx.get(other, b"x").map(|_| ())).unwrap();
                    }
                }
                for k in &keys {
                    assert_eq!(tr.get(t, k)?, Some(&0u64.to_le_bytes()[..]), "snapshot");
                }
                Ok(())
            })
            .unwrap();
        let kept = versions(&w);
        assert!(
            kept >= 6 * keys.len(),
            "the reader's versions were kept: {kept}"
        );
        // The reader is gone; the writer only reads another table now.
        for _ in 0..16 * SCAN_EVERY {
            w.run(|tx| tx.get(other, b"x").map(|_| ())).unwrap();
        }
        assert_eq!(
            versions(&w),
            2 * keys.len(),
            "two regions per record, no list"
        );
        let got = w
            .run(|tx| Ok(tx.get(t, &keys[7])?.map(|v| v.to_vec())))
            .unwrap();
        assert_eq!(got.as_deref(), Some(&6u64.to_le_bytes()[..]));
    }

    /// The published stamp covers only a contiguous prefix of finished
    /// stamps: a stamp finished out of order waits for the ones below it.
    #[test]
    fn stamps_publish_a_contiguous_prefix() {
        let s = Stamps::new(4);
        let (a, b, c) = (s.draw(), s.draw(), s.draw());
        assert_eq!((a, b, c), (2, 3, 4));
        std::thread::scope(|sc| {
            let h = sc.spawn(|| s.finish(c));
            std::thread::sleep(std::time::Duration::from_millis(20));
            assert_eq!(s.visible(), 1, "4 finished, 2 and 3 not");
            assert!(!h.is_finished(), "a commit returns only once published");
            s.done[(b & s.mask) as usize].store(b, Ordering::Release);
            s.advance();
            assert_eq!(s.visible(), 1, "3 finished, 2 not");
            s.finish(a);
            h.join().unwrap();
        });
        assert_eq!(s.visible(), 4);
    }

    /// Many committers drawing and finishing stamps concurrently: the
    /// published stamp only grows, never passes an unfinished stamp, and
    /// ends at the last one drawn.
    #[test]
    fn stamps_under_concurrent_committers() {
        let s = Stamps::new(8);
        let finished: Vec<AtomicU64> = (0..40_002).map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|sc| {
            for _ in 0..8 {
                sc.spawn(|| {
                    for _ in 0..5_000 {
                        let c = s.draw();
                        finished[c as usize].store(1, Ordering::SeqCst);
                        s.finish(c);
                        let v = s.visible();
                        assert!(v >= c);
                        assert_eq!(finished[v as usize].load(Ordering::SeqCst), 1);
                    }
                });
            }
        });
        assert_eq!(s.visible(), 40_001);
    }
}

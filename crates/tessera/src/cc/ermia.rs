//! ERMIA's concurrency control (Kim et al., SIGMOD 2016, section 3.6):
//! snapshot isolation (`si`) and SI plus the Serial Safety Net (`ssn`), on
//! the multi-version records of [`crate::storage::mvcc`].
//!
//! *Stamps.* One commit clock (`ErmiaShared::clock`). A transaction's begin
//! stamp is the clock's current value; an update transaction's commit stamp
//! is one fetch-and-add (`+ 1`), ERMIA's commit LSN. When the redo log lands
//! the same fetch-and-add reserves the transaction's log space, so the
//! stamp and the LSN are one number. A version is visible to a snapshot iff
//! its commit stamp is <= the begin stamp.
//!
//! *Visibility* ([`visible`], section 3.6.1). A version stamped with a
//! transaction id belongs to a transaction in flight or in post-commit: the
//! reader asks the TID table ([`super::xid`]). Committed with a stamp <= the
//! begin stamp: visible. Still in pre-commit with a stamp <= the begin stamp
//! (or no stamp yet): the paper leaves this open; we **wait** for the outcome,
//! which keeps SI strict (skipping such a version, as ERMIA's later code
//! does, would let a snapshot miss a transaction that committed before it
//! began). The wait is bounded by one pre-commit. Anything else: skip to the
//! older version. The reader's own uncommitted version is visible to it.
//!
//! *Updates* (section 3.6.1): first-updater-wins with an immediate abort.
//! The head must be committed and visible to the writer's snapshot; an
//! uncommitted head (another writer holds the record), or a committed one
//! newer than the begin stamp, aborts the writer at once. The write installs
//! a new version with one CAS on the head.
//!
//! *SSN* (section 3.6.2, Algorithm 1, and the per-access hooks and parallel
//! commit of the public implementation, per the research digest):
//! per-version η (`pstamp`), π (`sstamp`) and an in-flight readers bitmap;
//! per-transaction η(T), π(T). Reads raise η(T) to the creator's stamp and
//! lower π(T) to π of a committed overwriter; overwrites raise η(T) to the
//! overwritten version's η and mark it with the writer's id. At commit, the
//! exclusion-window test aborts when π(T) <= η(T). Algorithm 1 as printed
//! is safe only if commits are processed one at a time in stamp order; here
//! they run in parallel, and a committer that meets, through a version's
//! π mark or its readers bitmap, another transaction already in pre-commit
//! with a smaller stamp waits for that one's outcome and uses its stamps
//! (ERMIA's `parallel_ssn_commit`). Waits go from larger to smaller stamps
//! only, so they cannot deadlock. Phantoms: Silo's node set (section 4.6 of
//! Silo), validated after the SSN test, as ERMIA does.
//!
//! *Garbage collection.* The watermark is the oldest begin stamp of any
//! running transaction (read from the TID table's slots; refreshed every
//! [`WATERMARK_EVERY`] transactions per worker). A writer that holds a
//! record's head cuts the chain behind the first version visible to the
//! watermark; a committed tombstone at or below the watermark is unlinked
//! from its index and the record retired. Freed memory goes through the
//! memory epoch (`epoch.rs`): two epoch schemes at different time scales,
//! as in ERMIA (the TID table needs none: stale ids are detected by
//! generation). A record's inline first version, once cut and past two
//! memory epochs, is reused by its next writer instead of a new allocation
//! ([`crate::storage::mvcc`]; not in ERMIA).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{fence, Ordering};

use super::xid::{Lookup as XLookup, XidState, XID_FLAG};
use super::NodeEntry;
use super::{
    backoff_spin, CcProtocol, OrphanUnlinks, PendingUnlink, Tx, TxnSets, WorkerCore, STALE_RETRIES,
};
use crate::catalog::{Table, TableId};
use crate::engine::{Engine, Settings};
use crate::epoch::Guard;
use crate::error::{ConflictReason, TxError, TxResult};
use crate::index::OrderedIndex;
use crate::index::{Insert, Lookup};
use crate::storage::mvcc::{free_mv_version, new_mv_version, reinit_inline, SsnMeta, SSTAMP_INF};
use crate::storage::tid::*;
use crate::storage::{Record, Version};
use crate::txn::ScanOptions;

/// Tag (bit 0; versions are 8-aligned) on an SSN read-set entry whose
/// version this transaction also overwrote, set by [`ssn_precommit`].
/// ERMIA's `ssn_read` leaves a version it already overwrote out of the read
/// set; this covers the other order (read, then overwrite), which ERMIA
/// still tracks and updates at post-commit for no reader's benefit.
const OWN_OVERWRITE: usize = 1;

/// Transactions between refreshes of a worker's GC watermark.
pub(crate) const WATERMARK_EVERY: u32 = 32;

fn conflict<T>(r: ConflictReason) -> TxResult<T> {
    Err(TxError::Conflict(r))
}

/// `si` or `ssn`: which of ERMIA's two protocols, known at compile time.
pub(crate) trait Mode: Send + Sync + 'static {
    /// Run the Serial Safety Net (and keep SSN's per-version metadata).
    const SSN: bool;
}

/// ERMIA's snapshot isolation (section 3.6.1).
pub(crate) struct SiMode;
impl Mode for SiMode {
    const SSN: bool = false;
}

/// ERMIA's SI plus the Serial Safety Net (section 3.6.2).
pub(crate) struct SsnMode;
impl Mode for SsnMode {
    const SSN: bool = true;
}

/// ERMIA's concurrency control in mode `M`.
pub(crate) struct Ermia<M>(std::marker::PhantomData<M>);

type ETx<'a, M> = Tx<'a, Ermia<M>>;

/// ERMIA's database-wide state.
pub(crate) struct ErmiaShared {
    /// The commit clock (ERMIA's commit LSN counter).
    pub clock: std::sync::atomic::AtomicU64,
    /// The TID table (section 3.5).
    pub xids: super::xid::XidTable,
    /// Version-GC entries of dropped workers.
    pub orphan_gc: parking_lot::Mutex<Vec<GcEntry>>,
    /// Tombstones of dropped workers waiting to be unlinked.
    pub orphans: OrphanUnlinks,
}

/// ERMIA's per-worker state.
#[derive(Default)]
pub(crate) struct ErmiaLocal {
    /// The running transaction's stamps and this worker's GC queues.
    pub mv: MvState,
    /// Write set bookkeeping shared with Silo's code (keys, values, node
    /// set, the last record found).
    pub sets: TxnSets,
    /// SSN: versions read and tracked for the commit-time checks.
    pub vreads: Vec<*const Version>,
    /// The versions this transaction installed.
    pub mvw: Vec<MvWrite>,
    /// Committed tombstones waiting for the watermark to pass them.
    pub pending_unlinks: VecDeque<PendingUnlink>,
}

// SAFETY: the raw version and record pointers are only dereferenced by the
// owning worker while it is pinned.
unsafe impl Send for ErmiaLocal {}

impl<M: Mode> CcProtocol for Ermia<M> {
    type Shared = ErmiaShared;
    type Local = ErmiaLocal;

    fn new_shared(opts: &Settings) -> ErmiaShared {
        ErmiaShared {
            clock: std::sync::atomic::AtomicU64::new(1),
            xids: super::xid::XidTable::new(opts.workers),
            orphan_gc: parking_lot::Mutex::new(Vec::new()),
            orphans: OrphanUnlinks::default(),
        }
    }
    fn new_local(_: &ErmiaShared, slot: usize) -> ErmiaLocal {
        ErmiaLocal {
            mv: MvState {
                slot,
                ..MvState::default()
            },
            ..ErmiaLocal::default()
        }
    }
    #[inline]
    fn begin(tx: &mut ETx<'_, M>) {
        let st = &mut *tx.st;
        st.sets.clear();
        st.vreads.clear();
        st.mvw.clear();
        begin(tx.sh, st);
    }
    #[inline]
    fn get<'t>(tx: &'t mut ETx<'_, M>, table: &Table, key: &[u8]) -> TxResult<Option<&'t [u8]>> {
        get(tx, table, key)
    }
    #[inline]
    fn put(tx: &mut ETx<'_, M>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<()> {
        put(tx, table, key, val)
    }
    #[inline]
    fn insert(tx: &mut ETx<'_, M>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
        insert(tx, table, key, val)
    }
    #[inline]
    fn update(tx: &mut ETx<'_, M>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
        update(tx, table, key, val)
    }
    #[inline]
    fn delete(tx: &mut ETx<'_, M>, table: &Table, key: &[u8]) -> TxResult<bool> {
        delete(tx, table, key)
    }
    fn scan<F>(
        tx: &mut ETx<'_, M>,
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
    fn commit(tx: &mut ETx<'_, M>) -> TxResult<()> {
        commit(tx)
    }
    #[inline]
    fn abort(tx: &mut ETx<'_, M>) {
        abort(tx)
    }
    #[inline]
    fn maintain(
        db: &Engine,
        core: &mut WorkerCore,
        sh: &ErmiaShared,
        st: &mut ErmiaLocal,
        g: &Guard<'_>,
    ) {
        maintain(db, core, sh, st, g)
    }
    fn retire_local(sh: &ErmiaShared, st: &mut ErmiaLocal) {
        if !st.mv.gc.is_empty() {
            sh.orphan_gc.lock().extend(st.mv.gc.drain(..));
        }
        // Records waiting for their inline version to be marked reusable:
        // hand them over as GC entries (stamp 0: due at once), which only
        // prune and drop the hold; the inline version is then not reused.
        if !st.mv.inline_free.is_empty() {
            let mut o = sh.orphan_gc.lock();
            o.extend(st.mv.inline_free.drain(..).map(|mut e| {
                e.stamp = 0;
                e
            }));
        }
        if !st.pending_unlinks.is_empty() {
            sh.orphans.0.lock().extend(st.pending_unlinks.drain(..));
        }
    }
    fn close(sh: &mut ErmiaShared) {
        sh.orphans.0.get_mut().clear();
        for e in sh.orphan_gc.get_mut().drain(..) {
            // SAFETY: no worker exists; a held record is freed by its last
            // hold once unlinked (linked ones are freed with their table).
            unsafe {
                if (*e.rec).gc_release() {
                    Record::free(e.rec as *mut u8);
                }
            }
        }
    }
    fn read_committed(sh: &ErmiaShared, rec: &Record, out: &mut Vec<u8>) -> bool {
        read_latest_committed(sh, rec, out)
    }
    fn rebuild(val: &[u8], _epoch: u64) -> *mut Record {
        // Like a record written long ago: stamp 1 (every new begin stamp
        // is larger).
        Record::new_mv(val, 1, M::SSN)
    }
}

/// Per-worker ERMIA state: the running transaction's stamps.
#[derive(Default)]
pub(crate) struct MvState {
    /// The worker's TID-table slot.
    pub slot: usize,
    /// The running transaction's id (without the flag).
    pub xid: u64,
    pub begin: u64,
    /// η(T).
    pub pstamp: u64,
    /// π(T).
    pub sstamp: u64,
    /// GC watermark last computed by this worker.
    pub watermark: u64,
    pub since_watermark: u32,
    /// Version GC work: records this worker wrote, with the commit stamp;
    /// once the stamp is at or below the watermark, everything behind the
    /// version visible to the watermark can go. Each entry holds the record
    /// (`Record::gc_hold`) so it is not freed first.
    pub gc: VecDeque<GcEntry>,
    /// Records whose inline first version GC cut, with the memory epoch of
    /// the cut (`stamp`); once two epochs have passed no reader can hold
    /// that version and it is marked free for reuse
    /// ([`Record::mark_inline_free`]). Each entry holds the record.
    pub inline_free: VecDeque<GcEntry>,
}

/// See [`MvState::gc`] and [`MvState::inline_free`].
pub(crate) struct GcEntry {
    pub rec: *const Record,
    /// In `gc`: the commit stamp of our write; in `inline_free`: the memory
    /// epoch of the cut.
    pub stamp: u64,
}

// SAFETY: the record pointers are held (`gc_hold`) and only dereferenced
// by the worker that owns the queue, while pinned.
unsafe impl Send for GcEntry {}

/// A write of the running transaction.
#[derive(Clone, Copy)]
pub(crate) struct MvWrite {
    pub rec: *const Record,
    /// Our version (the record's head while we run).
    pub newv: *mut Version,
    /// The version it overwrote.
    pub oldv: *mut Version,
    pub table: TableId,
    /// Key bytes in `TxnSets::wbuf` (for unlinking deleted or rolled-back
    /// records).
    pub key: (u32, u32),
}

#[inline]
fn ssn<M: Mode>(_: &ETx<'_, M>) -> bool {
    M::SSN
}

#[inline]
fn my_flagged(st: &ErmiaLocal) -> u64 {
    st.mv.xid | XID_FLAG
}

/// Start a transaction: take an id and a begin stamp.
pub(crate) fn begin(sh: &ErmiaShared, st: &mut ErmiaLocal) {
    let (xid, begin) = sh.xids.begin_from(st.mv.slot, &sh.clock);
    st.mv.xid = xid;
    st.mv.begin = begin;
    st.mv.pstamp = 0;
    st.mv.sstamp = SSTAMP_INF;
}

/// What [`visible`] found.
#[derive(Clone, Copy)]
struct Seen {
    v: *const Version,
    /// Commit stamp of `v` (0 for our own version).
    cstamp: u64,
    own: bool,
}

/// The version of `rec` that the snapshot at `begin` sees (section 3.6.1).
/// Never null for a multi-version record: ⊥ (stamp 0) is visible to all,
/// and GC never cuts the chain above the first version the oldest snapshot
/// sees.
fn visible(sh: &ErmiaShared, my: u64, begin: u64, rec: &Record) -> Option<Seen> {
    let mut v = rec.newest() as *const Version;
    let mut spins = 0;
    while !v.is_null() {
        // SAFETY: versions are reclaimed only through the epoch; we are pinned.
        let vr = unsafe { &*v };
        let s = vr.stamp();
        if s & XID_FLAG == 0 {
            if s <= begin {
                return Some(Seen {
                    v,
                    cstamp: s,
                    own: false,
                });
            }
            v = vr.prev();
            continue;
        }
        if s == my {
            return Some(Seen {
                v,
                cstamp: 0,
                own: true,
            });
        }
        match sh.xids.lookup(s) {
            // The owner finished: its versions are restamped (or rolled back
            // and this one is unreachable for new readers). Re-read.
            XLookup::Stale => {
                if vr.stamp() == s {
                    // Still the id: an aborted version; skip it.
                    v = vr.prev();
                }
            }
            XLookup::Current { state, end, .. } => match state {
                XidState::Committed if end <= begin => {
                    return Some(Seen {
                        v,
                        cstamp: end,
                        own: false,
                    })
                }
                XidState::Committing if end == 0 || end <= begin => {
                    // Strict SI: wait for the outcome (see module docs).
                    backoff_spin(&mut spins);
                }
                _ => v = vr.prev(),
            },
        }
    }
    None
}

/// The newest committed value of `rec`, for checkpoints: `false` if that
/// version is a tombstone or ⊥. Waits for an owner in pre-commit, like a
/// reader whose snapshot is "now".
pub(crate) fn read_latest_committed(sh: &ErmiaShared, rec: &Record, out: &mut Vec<u8>) -> bool {
    match visible(sh, 0, u64::MAX >> 1, rec) {
        Some(seen) => {
            // SAFETY: the caller is pinned; versions are reclaimed through
            // the epoch.
            if unsafe { &*seen.v }.is_tombstone() {
                false
            } else {
                // SAFETY: as above.
                unsafe { Version::read_into(seen.v, out) };
                true
            }
        }
        None => false,
    }
}

/// SSN's read hook: the creator of `v` precedes us; a committed overwriter
/// of `v` follows us; otherwise track `v` (in its readers bitmap and our
/// read list) for the commit-time checks.
fn on_read(st: &mut ErmiaLocal, v: *const Version, cstamp: u64) -> TxResult<()> {
    // SAFETY: pinned; SSN databases give every version metadata.
    let m = unsafe { Version::meta(v) }.expect("SSN version metadata");
    st.mv.pstamp = st.mv.pstamp.max(cstamp);
    // Register before looking at π: an overwriter whose mark we miss finds
    // our bit at its commit (our side is SeqCst; its side puts a SeqCst
    // fence between its mark and its bitmap load, see `ssn_precommit`).
    m.readers
        .fetch_or(1u64 << (st.mv.slot % 64), Ordering::SeqCst);
    let s = m.sstamp.load(Ordering::SeqCst);
    if s & XID_FLAG == 0 && s != SSTAMP_INF {
        st.mv.sstamp = st.mv.sstamp.min(s);
    }
    st.vreads.push(v);
    if st.mv.sstamp <= st.mv.pstamp {
        return conflict(ConflictReason::SsnExclusion);
    }
    Ok(())
}

/// SSN's overwrite hook, right after our version went in over `old`.
fn on_overwrite(st: &mut ErmiaLocal, old: *const Version) -> TxResult<()> {
    // SAFETY: as in `on_read`.
    let m = unsafe { Version::meta(old) }.expect("SSN version metadata");
    // Not sequentially consistent by itself (that would be a locked
    // exchange per write on x86): the SeqCst fence at the start of
    // `ssn_precommit` sits between this mark and our look at the readers
    // bitmap, which is what the store-load pairing with `on_read` needs.
    m.sstamp.store(my_flagged(st), Ordering::Release);
    st.mv.pstamp = st.mv.pstamp.max(m.pstamp.load(Ordering::SeqCst));
    if st.mv.sstamp <= st.mv.pstamp {
        return conflict(ConflictReason::SsnExclusion);
    }
    Ok(())
}

/// Read `rec` for the running transaction: the visible version (with the
/// SSN read hook) into `rbuf`; `Ok(false)` if the key is absent to us.
fn read_record<M: Mode>(tx: &mut ETx<'_, M>, rec: &Record) -> TxResult<bool> {
    let st = &mut *tx.st;
    let Some(seen) = visible(tx.sh, my_flagged(st), st.mv.begin, rec) else {
        return Ok(false);
    };
    if !seen.own && M::SSN {
        on_read(st, seen.v, seen.cstamp)?;
    }
    // SAFETY: pinned.
    if unsafe { &*seen.v }.is_tombstone() {
        return Ok(false);
    }
    st.sets.rbuf.clear();
    // SAFETY: a visible version's data never changes (committed), or it is ours.
    unsafe { Version::read_into(seen.v, &mut st.sets.rbuf) };
    Ok(true)
}

/// `Txn::get` under ERMIA.
pub(crate) fn get<'t, M: Mode>(
    tx: &'t mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
) -> TxResult<Option<&'t [u8]>> {
    if !ssn(tx) {
        return match table.index.get(key, tx.g) {
            Lookup::Missing { .. } => Ok(None),
            Lookup::Found(v) => {
                // SAFETY: reached through the index while pinned.
                let rec = unsafe { &*(v as *const Record) };
                let found = read_record(tx, rec)?;
                tx.st.sets.last.set(table.id, key, rec, 0);
                Ok(found.then_some(&tx.st.sets.rbuf[..]))
            }
        };
    }
    // SSN: an answer "absent" goes into the node set whether the key has no
    // record or its visible version is a tombstone (or ⊥): the record may be
    // unlinked and the key inserted into a fresh one, which only the leaf
    // sees (its version, and its absence stamp once we commit).
    let (found, leaf, version) = table.index.get_with_leaf(key, tx.g);
    let Some(v) = found else {
        tx.st.sets.nodes.push(NodeEntry { leaf, version });
        return Ok(None);
    };
    // SAFETY: reached through the index while pinned.
    let rec = unsafe { &*(v as *const Record) };
    let present = read_record(tx, rec)?;
    tx.st.sets.last.set(table.id, key, rec, 0);
    if !present {
        tx.st.sets.nodes.push(NodeEntry { leaf, version });
        return Ok(None);
    }
    Ok(Some(&tx.st.sets.rbuf[..]))
}

/// The kinds of write.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Put,
    Insert,
    Update,
    Delete,
}

/// Create a record for `key` (⊥ plus our version) and link it into the
/// index; `Err(rec)` with the existing record if the key has one.
fn create<M: Mode>(tx: &mut ETx<'_, M>, table: &Table, key: &[u8], val: &[u8]) -> Result<(), u64> {
    let meta = ssn(tx);
    let st = &mut *tx.st;
    let r = Record::new_mv(val, my_flagged(st), meta);
    // SAFETY: fresh, unpublished.
    let rec = unsafe { &*r };
    let newv = rec.newest();
    // SAFETY: as above.
    let bot = unsafe { &*newv }.prev();
    if meta {
        // SAFETY: ⊥ of an SSN record has metadata. Nobody else sees it yet.
        let m = unsafe { Version::meta(bot) }.expect("meta");
        m.sstamp.store(my_flagged(st), Ordering::Relaxed);
    }
    let ins = table.index.insert(key, r as u64, tx.g);
    match ins {
        Insert::Exists(v) => {
            // SAFETY: never published.
            unsafe { Record::free(r as *mut u8) };
            Err(v)
        }
        Insert::Inserted { leaf, .. } => {
            if meta {
                super::own_insert_fixup(&mut st.sets, &ins);
                // Transactions that saw this key's range empty and committed
                // precede us (they did not see our key). Scanners raise the
                // stamp before validating their node set; the fences pair
                // those two steps with our insert and this read.
                fence(Ordering::SeqCst);
                let a = leaf.stamp().max(table.index.stamp_floor());
                st.mv.pstamp = st.mv.pstamp.max(a);
            }
            let k = st.sets.stash(key);
            st.mvw.push(MvWrite {
                rec: r,
                newv,
                oldv: bot,
                table: table.id,
                key: k,
            });
            Ok(())
        }
    }
}

/// Write `val` (`None`: delete) into `rec` under the rules of `op`.
/// `Ok(Some(done))`, or `Ok(None)` if the record was unlinked under us
/// (retry through the index).
fn write_record<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    rec: &Record,
    val: Option<&[u8]>,
    op: Op,
) -> TxResult<Option<bool>> {
    let meta = ssn(tx);
    let db = tx.db;
    let sh = tx.sh;
    // The log names every written record by its key.
    let logging = db.log.is_some();
    let g = tx.g;
    let st = &mut *tx.st;
    let my = my_flagged(st);
    let begin = st.mv.begin;
    let mut spins = 0;
    loop {
        let head = rec.newest();
        // SAFETY: pinned.
        let h = unsafe { &*head };
        let s = h.stamp();
        if s == my {
            // Our own version: rewrite it.
            let tomb = h.is_tombstone();
            match op {
                Op::Insert if !tomb => return Ok(Some(false)),
                Op::Update | Op::Delete if tomb => return Ok(Some(false)),
                _ => {}
            }
            let wi = st
                .mvw
                .iter()
                .rposition(|w| w.newv == head)
                .expect("own version in the write set");
            if h.fits(val.map_or(0, |v| v.len())) {
                // SAFETY: our uncommitted version, large enough.
                unsafe { Version::rewrite(head, val) };
            } else {
                let nv = new_mv_version(val, my, h.prev(), meta);
                rec.set_head(nv);
                st.mvw[wi].newv = nv;
                if !h.is_inline() {
                    // SAFETY: unlinked; readers that hold it are pinned.
                    unsafe { g.retire(head as *mut u8, free_mv_version) };
                }
            }
            if val.is_none() && st.mvw[wi].key.1 == 0 {
                st.mvw[wi].key = st.sets.stash(key);
            }
            return Ok(Some(true));
        }
        // Someone else's version: is it committed and in our snapshot?
        let cstamp = if s & XID_FLAG == 0 {
            s
        } else {
            match sh.xids.lookup(s) {
                XLookup::Stale => continue,
                XLookup::Current { state, end, .. } => match state {
                    XidState::Committed => end,
                    XidState::Committing if end == 0 || end <= begin => {
                        backoff_spin(&mut spins);
                        continue;
                    }
                    XidState::Committing => end,
                    // Uncommitted head: another writer holds the record.
                    XidState::Active | XidState::Aborted => {
                        return conflict(ConflictReason::WriteConflict)
                    }
                },
            }
        };
        if cstamp > begin {
            // Committed after we began: SI forbids the update.
            return conflict(ConflictReason::WriteConflict);
        }
        let tomb = h.is_tombstone();
        let answer_only = match op {
            Op::Insert => !tomb,
            Op::Update | Op::Delete => tomb,
            Op::Put => false,
        };
        if answer_only {
            // "Exists" / "missing" is a read of the head.
            if meta {
                on_read(st, head, cstamp)?;
            }
            return Ok(Some(false));
        }
        // The record's inline first version if GC freed it, else a new one.
        // SAFETY: pinned; `rec` came from the index as a raw address.
        let nv = match unsafe { Record::take_inline(rec, val.map_or(0, |v| v.len())) } {
            Some(a) => {
                // SAFETY: claimed just now, unpublished; the value fits.
                unsafe { reinit_inline(a, val, my, head) };
                a
            }
            None => new_mv_version(val, my, head, meta),
        };
        // Undo the allocation or the claim of a version never published.
        let discard = |nv: *mut Version| {
            // SAFETY: pinned; never published.
            if unsafe { &*nv }.is_inline() {
                rec.give_back_inline();
            } else {
                // SAFETY: never published.
                unsafe { free_mv_version(nv as *mut u8) };
            }
        };
        let installed = if tomb {
            // Over a tombstone: exclude the GC's unlink of this record.
            rec.mv_lock();
            if !rec.mv_linked() {
                rec.mv_unlock();
                discard(nv);
                return Ok(None);
            }
            let ok = rec.cas_head(head, nv);
            rec.mv_unlock();
            ok
        } else {
            rec.cas_head(head, nv)
        };
        if !installed {
            discard(nv);
            return conflict(ConflictReason::WriteConflict);
        }
        let k = if val.is_none() || tomb || logging {
            st.sets.stash(key)
        } else {
            (0, 0)
        };
        st.mvw.push(MvWrite {
            rec,
            newv: nv,
            oldv: head,
            table: table.id,
            key: k,
        });
        if meta {
            // The creator of the version we overwrite precedes us (its
            // post-commit may not have set the version's pstamp yet).
            st.mv.pstamp = st.mv.pstamp.max(cstamp);
            on_overwrite(st, head)?;
        }
        return Ok(Some(true));
    }
}

fn write<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: Option<&[u8]>,
    op: Op,
) -> TxResult<bool> {
    for attempt in 0..STALE_RETRIES {
        let mut node = None;
        let found = if op == Op::Insert {
            // Inserts usually find no key: try the index insert first.
            match create(tx, table, key, val.expect("insert value")) {
                Ok(()) => return Ok(true),
                Err(v) => v,
            }
        } else {
            let last = if attempt == 0 {
                tx.st.sets.last.matches(table.id, key)
            } else {
                None
            };
            match last {
                Some((rec, _)) => rec as u64,
                None => match table.index.get_with_leaf(key, tx.g) {
                    (Some(v), leaf, version) => {
                        node = Some(NodeEntry { leaf, version });
                        v
                    }
                    (None, leaf, version) => {
                        if op != Op::Put {
                            if ssn(tx) {
                                tx.st.sets.nodes.push(NodeEntry { leaf, version });
                            }
                            return Ok(false);
                        }
                        match create(tx, table, key, val.expect("put value")) {
                            Ok(()) => return Ok(true),
                            Err(v) => v,
                        }
                    }
                },
            }
        };
        // SAFETY: reached through the index while pinned.
        let rec = unsafe { &*(found as *const Record) };
        if let Some(done) = write_record(tx, table, key, rec, val, op)? {
            // SSN: "missing" answered from a tombstone is an absence seen
            // (see `get`).
            if !done && matches!(op, Op::Update | Op::Delete) && ssn(tx) {
                if let Some(n) = node {
                    tx.st.sets.nodes.push(n);
                }
            }
            return Ok(done);
        }
        tx.st.sets.last.forget();
    }
    conflict(ConflictReason::Stale)
}

/// `Txn::put` under ERMIA.
pub(crate) fn put<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<()> {
    write(tx, table, key, Some(val), Op::Put).map(|_| ())
}

/// `Txn::insert` under ERMIA.
pub(crate) fn insert<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<bool> {
    write(tx, table, key, Some(val), Op::Insert)
}

/// `Txn::update` under ERMIA.
pub(crate) fn update<M: Mode>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<bool> {
    write(tx, table, key, Some(val), Op::Update)
}

/// `Txn::delete` under ERMIA: a tombstone version.
pub(crate) fn delete<M: Mode>(tx: &mut ETx<'_, M>, table: &Table, key: &[u8]) -> TxResult<bool> {
    write(tx, table, key, None, Op::Delete)
}

/// `Txn::scan` under ERMIA: the snapshot's versions; under SSN every record
/// met is a read and every leaf goes into the node set.
pub(crate) fn scan<M: Mode, F>(
    tx: &mut ETx<'_, M>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    mut f: F,
) -> TxResult<usize>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let limit = opts.limit.unwrap_or(usize::MAX);
    let is_ssn = ssn(tx);
    let sh = tx.sh;
    let st = &mut *tx.st;
    let my = my_flagged(st);
    let begin = st.mv.begin;
    let mut count = 0usize;
    let mut failed: Option<TxError> = None;
    // The node callback and the row callback both need the sets: collect
    // leaves separately and append them after the scan.
    let mut leaves: Vec<NodeEntry> = Vec::new();
    table.index.scan(
        lo,
        hi,
        opts.reverse,
        tx.g,
        |leaf: crate::index::LeafRef, version: u64| {
            if is_ssn {
                leaves.push(NodeEntry { leaf, version })
            }
        },
        |k, v| {
            // SAFETY: reached through the index while pinned.
            let rec = unsafe { &*(v as *const Record) };
            let Some(seen) = visible(sh, my, begin, rec) else {
                return true;
            };
            if is_ssn && !seen.own {
                if let Err(e) = on_read(st, seen.v, seen.cstamp) {
                    failed = Some(e);
                    return false;
                }
            }
            // SAFETY: pinned.
            if unsafe { &*seen.v }.is_tombstone() {
                return true;
            }
            count += 1;
            st.sets.rbuf.clear();
            // SAFETY: committed (immutable) or our own version.
            unsafe { Version::read_into(seen.v, &mut st.sets.rbuf) };
            f(k, &st.sets.rbuf) && count < limit
        },
    );
    st.sets.nodes.extend(leaves);
    match failed {
        Some(e) => Err(e),
        None => Ok(count),
    }
}

/// Wait until the transaction `x` (found in pre-commit or committed with a
/// stamp below ours) has an outcome. Returns its commit stamp and π if it
/// committed, `None` if it aborted, or `Err(())` if it already finished
/// (the caller re-reads the version's stamps, which now hold the result).
fn outcome(sh: &ErmiaShared, x: u64) -> Result<Option<(u64, u64)>, ()> {
    let mut spins = 0;
    loop {
        match sh.xids.lookup(x) {
            XLookup::Stale => return Err(()),
            XLookup::Current {
                state, end, sstamp, ..
            } => match state {
                XidState::Committed => return Ok(Some((end, sstamp))),
                XidState::Aborted | XidState::Active => return Ok(None),
                XidState::Committing => backoff_spin(&mut spins),
            },
        }
    }
}

/// The commit stamp of transaction `x` if it is in pre-commit or committed
/// with a stamp below `c` (waiting while its stamp is being taken); `None`
/// if it will commit after us or is not committing.
fn earlier_committer(sh: &ErmiaShared, x: u64, c: u64) -> Option<()> {
    let mut spins = 0;
    loop {
        match sh.xids.lookup(x) {
            XLookup::Stale => return Some(()), // finished: caller re-reads
            XLookup::Current { state, end, .. } => match state {
                XidState::Committing | XidState::Committed if end == 0 => backoff_spin(&mut spins),
                XidState::Committing | XidState::Committed if end < c => return Some(()),
                _ => return None,
            },
        }
    }
}

/// SSN's commit-time part (Algorithm 1 with the parallel-commit handling):
/// finalise η(T) and π(T), apply the exclusion-window test, then check the
/// node set. Returns π(T).
fn ssn_precommit<M: Mode>(tx: &mut ETx<'_, M>, c: u64) -> TxResult<u64> {
    let sh = tx.sh;
    let st = &mut *tx.st;
    let me = st.mv.slot;
    let mybit = 1u64 << (me % 64);
    let my = my_flagged(st);
    let mut pstamp = st.mv.pstamp;
    let mut sstamp = st.mv.sstamp.min(c);

    // η(T): readers of the versions we overwrote precede us. Committed ones
    // raised the version's pstamp; ones still in pre-commit with a smaller
    // stamp are found through the readers bitmap and waited for.
    // Orders our π marks (`on_overwrite`, plain release stores) before the
    // bitmap loads below: a reader that registered (a SeqCst `fetch_or`)
    // after this fence sees our mark in its SeqCst load of π; one that
    // registered before it is in the bitmap we load.
    if !st.mvw.is_empty() {
        fence(Ordering::SeqCst);
    }
    for w in &st.mvw {
        // SAFETY: pinned; SSN versions have metadata.
        let m: &SsnMeta = unsafe { Version::meta(w.oldv) }.expect("meta");
        // The bitmap first, then η(V): a reader raises η(V) before it
        // clears its bit, so one that we miss in the bitmap has already
        // raised η(V) by the time we read it.
        let mut bits = m.readers.load(Ordering::SeqCst) & !mybit;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let mut slot = b;
            while slot < sh.xids.len() {
                if slot != me {
                    let x = sh.xids.current(slot);
                    if x != 0 && earlier_committer(sh, x, c).is_some() {
                        match outcome(sh, x) {
                            Ok(Some((end, _))) => pstamp = pstamp.max(end),
                            Ok(None) => {}
                            Err(()) => pstamp = pstamp.max(m.pstamp.load(Ordering::SeqCst)),
                        }
                    }
                }
                slot += 64;
            }
        }
        pstamp = pstamp.max(m.pstamp.load(Ordering::SeqCst));
    }

    // π(T): overwriters of the versions we read follow us. Committed ones
    // left their π on the version; ones in pre-commit with a smaller stamp
    // are waited for. A version we overwrote ourselves is tagged
    // ([`OWN_OVERWRITE`]) so that post-commit skips it.
    for r in st.vreads.iter_mut() {
        let v = *r;
        // SAFETY: as above.
        let m: &SsnMeta = unsafe { Version::meta(v) }.expect("meta");
        loop {
            let s = m.sstamp.load(Ordering::SeqCst);
            if s == my {
                *r = v.map_addr(|a| a | OWN_OVERWRITE);
                break;
            }
            if s == SSTAMP_INF {
                break;
            }
            if s & XID_FLAG == 0 {
                sstamp = sstamp.min(s);
                break;
            }
            if earlier_committer(sh, s, c).is_none() {
                break;
            }
            match outcome(sh, s) {
                Ok(Some((_, pi))) => {
                    sstamp = sstamp.min(pi);
                    break;
                }
                Ok(None) => break,
                Err(()) => continue, // finished: re-read the version's π
            }
        }
    }

    if sstamp <= pstamp {
        return conflict(ConflictReason::SsnExclusion);
    }
    // Phantoms: Silo's node set, examined after the SSN test. First raise
    // each leaf's absence stamp (the index's per-leaf range stamp, which
    // SSN gives this meaning) to our commit stamp, so that a transaction
    // that inserts into the range after our validation orders itself after
    // us (an inserter that got there before is caught by the versions).
    for n in &st.sets.nodes {
        n.leaf.raise_stamp(c);
    }
    fence(Ordering::SeqCst);
    for n in &st.sets.nodes {
        if n.leaf.version() != n.version {
            return conflict(ConflictReason::NodeValidation);
        }
    }
    st.mv.pstamp = pstamp;
    st.mv.sstamp = sstamp;
    Ok(sstamp)
}

/// Pre-commit and post-commit. On failure the transaction is rolled back.
pub(crate) fn commit<M: Mode>(tx: &mut ETx<'_, M>) -> TxResult<()> {
    let db = tx.db;
    let sh = tx.sh;
    let is_ssn = ssn(tx);
    let xid = tx.st.mv.xid;
    if tx.st.mvw.is_empty() {
        // Durable mode: every version this read-only transaction saw was
        // committed, its creator's epoch read done, before now.
        if db.log.is_some() {
            tx.core.log.ack = db.epochs.global();
        }
    } else if let Some(log) = &db.log {
        log.announce(tx.core.slot, &mut tx.core.log);
    }
    if tx.st.mvw.is_empty() && !is_ssn {
        // A read-only SI transaction takes no commit stamp.
        sh.xids.finish(xid, XidState::Committed);
        sh.xids.release(tx.st.mv.slot);
        return Ok(());
    }
    // Pre-commit: the commit stamp (ERMIA's commit-LSN fetch-and-add).
    // Read-only SSN transactions take one too: an overwriter that commits
    // later must be able to order itself after this reader (ERMIA's code
    // likewise takes `log->pre_commit()` before `parallel_ssn_commit` for
    // every SSN transaction; the issue's "read-only transactions take no
    // commit stamp" holds for si).
    sh.xids.precommit(xid);
    let c = sh.clock.fetch_add(1, Ordering::SeqCst) + 1;
    // The log's epoch for this commit: read after the stamp and before the
    // transaction shows itself committed, so anyone who reads or overwrites
    // its versions reads a later (or the same) epoch.
    let epoch = db.epochs.global();
    sh.xids.set_end(xid, c);
    let pi = if is_ssn {
        match ssn_precommit(tx, c) {
            Ok(pi) => pi,
            Err(e) => {
                abort(tx);
                return Err(e);
            }
        }
    } else {
        SSTAMP_INF
    };
    if is_ssn {
        sh.xids.publish_sstamp(xid, pi);
    }
    sh.xids.finish(xid, XidState::Committed);

    // Post-commit: stamps replace the transaction id.
    let st = &mut *tx.st;
    for w in &st.mvw {
        // SAFETY: pinned; our versions.
        let nv = unsafe { &*w.newv };
        if is_ssn {
            let m = unsafe { Version::meta(w.newv) }.expect("meta");
            m.pstamp.store(c, Ordering::Relaxed);
            let om = unsafe { Version::meta(w.oldv) }.expect("meta");
            // Release: a reader that finds our id stale re-reads π after
            // seeing our slot's next id (an acquire load), so it sees this.
            om.sstamp.store(pi, Ordering::Release);
        }
        nv.set_stamp(c);
        // Version GC has work unless we overwrote ⊥ (an insert): ⊥ is
        // always a chain's oldest version and lives inline, so there is
        // nothing behind it to free; skip the entry and the later revisit of
        // the record. (Over the inline first version there is work: cutting
        // it lets a later writer reuse it, and behind a reused one lie
        // out-of-line versions.)
        // SAFETY: pinned; the version we overwrote.
        let ov = unsafe { &*w.oldv };
        if !ov.is_inline() || ov.is_first_inline() {
            // SAFETY: pinned; we wrote it.
            unsafe { &*w.rec }.gc_hold();
            st.mv.gc.push_back(GcEntry {
                rec: w.rec,
                stamp: c,
            });
        }
        if nv.is_tombstone() {
            st.pending_unlinks.push_back(PendingUnlink {
                table: w.table,
                key: st.sets.wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize].into(),
                rec: w.rec,
                tid: c,
            });
        }
    }
    if is_ssn {
        let mybit = 1u64 << (st.mv.slot % 64);
        for &v in &st.vreads {
            if v.addr() & OWN_OVERWRITE != 0 {
                // We overwrote this version: only its overwriter (us, done
                // above) ever consults its η or readers bitmap, so neither
                // needs updating, and our bit may stay set (it is masked
                // out by the overwriter, and nobody else can overwrite it).
                continue;
            }
            // SAFETY: pinned.
            let m = unsafe { Version::meta(v) }.expect("meta");
            // Raise η(V) unless a later reader already did (ERMIA's
            // `set_tuple_xstamp` CASes only while below): no locked write
            // then. Either way η(V) >= c before our bit goes.
            if m.pstamp.load(Ordering::SeqCst) < c {
                m.pstamp.fetch_max(c, Ordering::SeqCst);
            }
            m.readers.fetch_and(!mybit, Ordering::SeqCst);
        }
    }
    // The redo entry. ERMIA copies a transaction's log records into one
    // central buffer at the offset its commit LSN reserved (section 3.3);
    // here the commit stamp orders the entry but the bytes go to this
    // worker's own buffer, as under Silo, so the log adds no second shared
    // hot spot beside the clock (docs/ARCHITECTURE.md, Durability).
    if let Some(log) = &db.log {
        if !st.mvw.is_empty() {
            let (mvw, wbuf, scratch) = (&st.mvw, &st.sets.wbuf, &mut st.sets.rbuf);
            let mut old = std::mem::take(&mut tx.core.log.scratch);
            log.append(tx.core.slot, &mut tx.core.log, epoch, c, |redo| {
                for w in mvw {
                    let key = &wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize];
                    // SAFETY: pinned; our version, committed just now, and
                    // the committed version it overwrote (immutable).
                    let (nv, ov) = unsafe { (&*w.newv, &*w.oldv) };
                    if nv.is_tombstone() {
                        redo.delete(w.table, key);
                        continue;
                    }
                    scratch.clear();
                    // SAFETY: as above.
                    unsafe { Version::read_into(w.newv, scratch) };
                    if ov.is_tombstone() {
                        redo.put(w.table, key, scratch);
                    } else {
                        old.clear();
                        // SAFETY: as above.
                        unsafe { Version::read_into(w.oldv, &mut old) };
                        redo.patch(w.table, key, &old, scratch);
                    }
                }
            });
            tx.core.log.scratch = old;
        }
    }
    sh.xids.release(st.mv.slot);
    Ok(())
}

/// Roll back: restore each record's head, retire our versions, forget our
/// marks and reader bits. Records we created (now back to ⊥) and tombstones
/// we had covered go back to the unlink queue.
pub(crate) fn abort<M: Mode>(tx: &mut ETx<'_, M>) {
    let sh = tx.sh;
    let is_ssn = ssn(tx);
    let g = tx.g;
    let st = &mut *tx.st;
    sh.xids.finish(st.mv.xid, XidState::Aborted);
    let my = my_flagged(st);
    for w in st.mvw.iter().rev() {
        // SAFETY: pinned; our write set.
        let rec = unsafe { &*w.rec };
        if is_ssn {
            let om = unsafe { Version::meta(w.oldv) }.expect("meta");
            let _ = om
                .sstamp
                .compare_exchange(my, SSTAMP_INF, Ordering::SeqCst, Ordering::Relaxed);
        }
        rec.set_head(w.oldv);
        // SAFETY: pinned.
        if !unsafe { &*w.newv }.is_inline() {
            // SAFETY: unlinked just now; readers still holding it are pinned.
            unsafe { g.retire(w.newv as *mut u8, free_mv_version) };
        }
        // SAFETY: pinned.
        let old = unsafe { &*w.oldv };
        if old.is_tombstone() {
            st.pending_unlinks.push_back(PendingUnlink {
                table: w.table,
                key: st.sets.wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize].into(),
                rec: w.rec,
                tid: old.stamp(),
            });
        }
    }
    if is_ssn {
        let mybit = 1u64 << (st.mv.slot % 64);
        for &v in &st.vreads {
            // Aborting after pre-commit tagged some: our mark on them is gone
            // now, so others may overwrite them and must not see our bit.
            let v = v.map_addr(|a| a & !OWN_OVERWRITE);
            // SAFETY: pinned.
            let m = unsafe { Version::meta(v) }.expect("meta");
            m.readers.fetch_and(!mybit, Ordering::SeqCst);
        }
    }
    sh.xids.release(st.mv.slot);
}

/// Between transactions: refresh the GC watermark now and then, and unlink
/// committed tombstones at or below it.
pub(crate) fn maintain(
    db: &Engine,
    core: &mut WorkerCore,
    sh: &ErmiaShared,
    st: &mut ErmiaLocal,
    g: &Guard<'_>,
) {
    st.mv.since_watermark += 1;
    let due = st.mv.since_watermark >= WATERMARK_EVERY
        || st
            .pending_unlinks
            .front()
            .is_some_and(|p| p.tid > st.mv.watermark && st.mv.since_watermark >= 4);
    if due {
        st.mv.since_watermark = 0;
        if let Some(w) = sh.xids.watermark(&sh.clock) {
            st.mv.watermark = st.mv.watermark.max(w);
        }
    }
    let wm = st.mv.watermark;
    while st.mv.gc.front().is_some_and(|e| e.stamp <= wm) {
        let e = st.mv.gc.pop_front().expect("front");
        // SAFETY: held by this entry, so not freed; we are pinned.
        let r = unsafe { &*e.rec };
        r.mv_lock();
        let cut = r.prune_mv(r.newest(), wm, g);
        r.mv_unlock();
        if cut.first_inline {
            // Reusable once no pinned reader can hold it: two memory epochs.
            r.gc_hold();
            st.mv.inline_free.push_back(GcEntry {
                rec: e.rec,
                stamp: g.epoch(),
            });
        }
        if r.gc_release() {
            // SAFETY: unlinked from its index, and this was the last hold.
            unsafe { g.retire(e.rec as *mut u8, Record::free) };
        }
    }
    // Inline versions cut two memory epochs ago are free for reuse (the
    // shared bound is read only when something waits).
    if !st.mv.inline_free.is_empty() {
        let bound = db.epochs.reclaim_bound();
        while st
            .mv
            .inline_free
            .front()
            .is_some_and(|e| e.stamp + 2 <= bound)
        {
            let e = st.mv.inline_free.pop_front().expect("front");
            // SAFETY: held by this entry, so not freed; we are pinned.
            let r = unsafe { &*e.rec };
            // Cut at memory epoch `stamp` by a pinned worker; every worker
            // pinned now pinned after that (the garbage rule of `epoch.rs`).
            r.mark_inline_free();
            if r.gc_release() {
                // SAFETY: unlinked from its index, and this was the last hold.
                unsafe { g.retire(e.rec as *mut u8, Record::free) };
            }
        }
    }
    if st.mv.gc.is_empty() {
        if let Some(mut o) = sh.orphan_gc.try_lock() {
            st.mv.gc.extend(o.drain(..));
        }
    }
    if st.pending_unlinks.is_empty() {
        if let Some(mut o) = sh.orphans.0.try_lock() {
            st.pending_unlinks.extend(o.drain(..));
        }
        return;
    }
    // Entries are queued in commit order per worker, except rolled-back ones
    // (stamp 0 or older): look a little past the front.
    let mut n = st.pending_unlinks.len().min(64);
    while n > 0 {
        n -= 1;
        let Some(p) = st.pending_unlinks.pop_front() else {
            break;
        };
        if p.tid > wm {
            st.pending_unlinks.push_back(p);
            continue;
        }
        let i = p.table.0 as usize;
        if i >= core.tables.len() {
            core.tables = db.tables.read().clone();
        }
        unlink_tombstone(&core.tables[i], g, &p.key, p.rec, p.tid);
    }
}

/// Unlink a record whose head is still the committed tombstone with stamp
/// `stamp` (at or below the watermark: every snapshot sees the key absent),
/// and retire it with its chain.
fn unlink_tombstone(t: &Table, g: &Guard<'_>, key: &[u8], rec: *const Record, stamp: u64) {
    // The record may have been unlinked and freed since it was queued (a
    // record can be queued more than once): only touch it if the index
    // still maps the key to it. (Its address may have been reused by a new
    // record for the same key; the stamp check below then fails, or the new
    // record is a rolled-back insert whose ⊥ is due for unlinking anyway.)
    match t.index.get(key, g) {
        Lookup::Found(v) if v == rec as u64 => {}
        _ => return,
    }
    // SAFETY: reachable from the index, and we are pinned.
    let r = unsafe { &*rec };
    let cur = r.mv_lock();
    if cur & LATEST == 0 {
        r.mv_unlock();
        return;
    }
    // SAFETY: pinned.
    let h = unsafe { &*r.newest() };
    if h.is_tombstone() && h.stamp() == stamp && t.index.remove(key, rec as u64, g) {
        // Writers over a tombstone check LATEST under the lock, so nobody
        // installs into it any more.
        if r.mv_mark_unlinked() {
            // SAFETY: unlinked from the index and no GC entry holds it.
            unsafe { g.retire(rec as *mut u8, Record::free) };
        }
    } else {
        r.mv_unlock();
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::index::{Lookup, OrderedIndex};
    use crate::storage::Record;
    use crate::{Database, Options, Protocol};

    /// A record updated now and then gets its newest version back into its
    /// inline first version once GC has cut that version and two memory
    /// epochs have passed; every read sees the latest value.
    #[test]
    fn updates_reuse_the_inline_first_version() {
        for protocol in [Protocol::Si, Protocol::Ssn] {
            let db = Database::open(
                Options::in_memory()
                    .protocol(protocol)
                    .workers(2)
                    .epoch_interval(Duration::from_millis(1)),
            )
            .unwrap();
            let t = db.create_table("t").unwrap();
            let table = db.inner.tables.read()[t.0 as usize].clone();
            let mut w = db.worker().unwrap();
            w.run(|tx| tx.put(t, b"k", &0u64.to_le_bytes())).unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            let mut n = 0u64;
            let mut reused_at = None;
            while reused_at.is_none() && Instant::now() < deadline {
                n += 1;
                w.run(|tx| tx.put(t, b"k", &n.to_le_bytes())).unwrap();
                let g = w.local.pin();
                if let Lookup::Found(v) = table.index.get(b"k", &g) {
                    // SAFETY: reached through the index while pinned.
                    let rec = unsafe { &*(v as *const Record) };
                    // SAFETY: as above.
                    if unsafe { &*rec.newest() }.is_first_inline() {
                        reused_at = Some(n);
                    }
                }
                drop(g);
                // Let GC refresh its watermark, cut the chain and, two
                // memory epochs later, mark the inline version free.
                for _ in 0..40 {
                    let got = w
                        .run(|tx| Ok(tx.get(t, b"k")?.map(|v| v.to_vec())))
                        .unwrap();
                    assert_eq!(got.as_deref(), Some(&n.to_le_bytes()[..]));
                }
                std::thread::sleep(Duration::from_millis(3));
            }
            let at = reused_at.unwrap_or_else(|| panic!("{protocol:?}: never reused"));
            assert!(at >= 2, "{protocol:?}: the first update cannot reuse it");
            // Keep going: the slot keeps cycling between chains, values stay right.
            for _ in 0..50 {
                n += 1;
                w.run(|tx| tx.put(t, b"k", &n.to_le_bytes())).unwrap();
                let got = w
                    .run(|tx| Ok(tx.get(t, b"k")?.map(|v| v.to_vec())))
                    .unwrap();
                assert_eq!(got.as_deref(), Some(&n.to_le_bytes()[..]));
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

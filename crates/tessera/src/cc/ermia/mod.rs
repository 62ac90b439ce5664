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
use crate::storage::mvcc::MvRecord;
use crate::storage::mvcc::{
    free_mv_version, new_mv_version, new_mv_version_fill, reinit_inline, Fill,
};
use crate::storage::tid::*;
use crate::storage::{Record, Version};
use crate::txn::ScanOptions;

mod commit;
mod gc;
pub(crate) mod mvrcc;
mod ops;
mod ssn;
#[cfg(test)]
mod tests;
mod visibility;

pub(crate) use commit::{abort, commit};
pub(crate) use gc::maintain;
pub(crate) use ops::{
    delete, get, get_many, get_slice, insert, put, scan, update, update_slice,
};
use ssn::*;
pub(crate) use visibility::read_latest_committed;
use visibility::*;

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

/// `si`, `ssn` or `mvrcc`: which protocol on ERMIA's records, known at
/// compile time.
pub(crate) trait Mode: Send + Sync + 'static {
    /// Run the Serial Safety Net (and keep SSN's per-version metadata).
    const SSN: bool;
    /// Multi-version timestamp ordering with MVRCC's ranges instead of
    /// snapshot isolation (see [`MvrccMode`]).
    const MVTO: bool = false;
    /// Versions carry the metadata words (SSN's stamps; MVRCC's read
    /// timestamp in the first).
    const META: bool = Self::SSN || Self::MVTO;
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

/// MVRCC (Cai et al. section 3.6's baseline, after Deuteronomy): multi-
/// version timestamp ordering on ERMIA's records, with range read
/// timestamps and writer arrays against phantoms ([`mvrcc`]).
///
/// * A transaction's timestamp `t` is unique, taken at begin (one
///   fetch-and-add on the clock, through the TID table so the GC watermark
///   cannot miss it); transactions serialize in timestamp order and commit
///   validates nothing. Versions are stamped with their writer's `t` (the
///   commit stamp *is* `t`), and each keeps a read timestamp (the first
///   metadata word, SSN's η).
/// * A read at `t` sees the newest version stamped below `t`. An owner
///   still active with a smaller timestamp aborts the reader
///   (`PendingWrite`: the book counts MVRCC's aborts); one in pre-commit is
///   waited for. The reader then raises the version's read timestamp and
///   walks the chain again: a writer below `t` that slipped in meanwhile
///   sends it round again (writer: CAS the head, then read the overwritten
///   version's read timestamp; reader: raise it, then re-read the head; all
///   sequentially consistent, so one of them sees the other).
/// * A write at `t`: ERMIA's first-updater-wins (an uncommitted head, or a
///   committed one stamped above `t`, aborts), plus the timestamp rule: if
///   the overwritten version's read timestamp exceeds `t`, abort
///   (`TimestampOrder`).
/// * Phantoms: [`mvrcc`]'s ranges. Writers register before writing; scans,
///   and point reads answering "absent", protect the ranges they read.
/// * GC, the log and recovery stay ERMIA's: the watermark is the oldest
///   running timestamp, and per record the log's (epoch, stamp) order is the
///   timestamp order, because a record's writers commit in it (a writer
///   overwrites only a committed head stamped below its own timestamp).
pub(crate) struct MvrccMode;
impl Mode for MvrccMode {
    const SSN: bool = false;
    const MVTO: bool = true;
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
    /// `orphan_gc` holds entries (written under its lock): workers read
    /// this before they try the lock, so that a worker whose queue ran dry
    /// does not take the lock's line from the other cores each time.
    pub orphan_gc_pending: std::sync::atomic::AtomicBool,
    /// Tombstones of dropped workers waiting to be unlinked.
    pub orphans: OrphanUnlinks,
    /// MVRCC's ranges (untouched by `si` and `ssn`).
    pub mvrcc: mvrcc::MvrccShared,
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
    /// MVRCC: the ranges this transaction registered in, the tables' range
    /// state.
    pub mvr: mvrcc::MvrccLocal,
}

// SAFETY: the raw version and record pointers are only dereferenced by the
// owning worker while it is pinned.
unsafe impl Send for ErmiaLocal {}

impl<M: Mode> CcProtocol for Ermia<M> {
    type Shared = ErmiaShared;
    type Local = ErmiaLocal;
    type Rec = MvRecord;

    fn new_shared(opts: &Settings) -> ErmiaShared {
        ErmiaShared {
            clock: std::sync::atomic::AtomicU64::new(1),
            xids: super::xid::XidTable::new(opts.workers),
            orphan_gc: parking_lot::Mutex::new(Vec::new()),
            orphan_gc_pending: std::sync::atomic::AtomicBool::new(false),
            orphans: OrphanUnlinks::default(),
            mvrcc: mvrcc::MvrccShared::new(opts.rocc.range_size as usize),
        }
    }
    fn new_local(sh: &ErmiaShared, slot: usize) -> ErmiaLocal {
        ErmiaLocal {
            mv: MvState {
                slot,
                shared_bits: sh.xids.len() > 64,
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
        begin(tx.sh, st, M::MVTO);
    }
    #[inline]
    fn get<'t>(tx: &'t mut ETx<'_, M>, table: &Table, key: &[u8]) -> TxResult<Option<&'t [u8]>> {
        get(tx, table, key)
    }
    #[inline]
    fn get_slice<'t>(
        tx: &'t mut ETx<'_, M>,
        table: &Table,
        key: &[u8],
        start: usize,
        end: usize,
    ) -> TxResult<Option<&'t [u8]>> {
        get_slice(tx, table, key, start, end)
    }
    /// Gets start from a record a prefetch found (under SSN only when it
    /// answers "present": an absent answer needs the leaf for the node set;
    /// see `ops::get`).
    #[inline]
    fn prefetch(tx: &mut ETx<'_, M>, table: &Table, keys: &[&[u8]], value_len: usize) {
        let sets = &mut tx.st.sets;
        sets.prefetched.fill::<MvRecord>(table, keys, value_len, tx.g);
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
    fn get_many(
        tx: &mut ETx<'_, M>,
        table: &Table,
        keys: &[&[u8]],
        start: usize,
        end: usize,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> TxResult<()> {
        get_many(tx, table, keys, start, end, f)
    }
    #[inline]
    fn update_slice(
        tx: &mut ETx<'_, M>,
        table: &Table,
        key: &[u8],
        at: usize,
        bytes: &[u8],
    ) -> TxResult<bool> {
        update_slice(tx, table, key, at, bytes)
    }
    #[inline]
    fn delete(tx: &mut ETx<'_, M>, table: &Table, key: &[u8]) -> TxResult<bool> {
        delete(tx, table, key)
    }
    /// Scans copy only the columns asked for (`ScanOptions::slice`).
    const SLICED_SCANS: bool = true;
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
        maintain(db, core, sh, st, g);
        if M::MVTO {
            mvrcc::maintain(&st.mvr, &core.tables, g);
        }
    }
    fn retire_local(sh: &ErmiaShared, st: &mut ErmiaLocal) {
        if !st.mv.gc.is_empty() {
            let mut o = sh.orphan_gc.lock();
            o.extend(st.mv.gc.drain(..));
            sh.orphan_gc_pending.store(true, Ordering::Relaxed);
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
            sh.orphan_gc_pending.store(true, Ordering::Relaxed);
        }
        sh.orphans.adopt(&mut st.pending_unlinks);
    }
    fn close(sh: &mut ErmiaShared) {
        sh.orphans.0.get_mut().clear();
        for e in sh.orphan_gc.get_mut().drain(..) {
            // SAFETY: no worker exists; a held record is freed by its last
            // hold once unlinked (linked ones are freed with their table).
            unsafe {
                if (*e.rec).gc_release() {
                    MvRecord::free(e.rec as *mut MvRecord);
                }
            }
        }
    }
    fn read_committed(sh: &ErmiaShared, rec: &Record, out: &mut Vec<u8>) -> bool {
        // SAFETY: every record of a database running ERMIA was made by
        // `MvRecord::new_mv` (here or in `rebuild`).
        read_latest_committed(sh, unsafe { MvRecord::from_record(rec) }, out)
    }
    fn rebuild(val: &[u8], _epoch: u64) -> *mut Record {
        // Like a record written long ago: stamp 1 (every new begin stamp
        // is larger).
        MvRecord::new_mv(val, 1, M::META.then_some(SSN_META)) as *mut Record
    }
}

/// Per-worker ERMIA state: the running transaction's stamps.
#[derive(Default)]
pub(crate) struct MvState {
    /// The worker's TID-table slot.
    pub slot: usize,
    /// SSN: the TID table has more than 64 slots, so slots `s` and `s + 64`
    /// share bit `s % 64` of a version's readers bitmap, and reader bits
    /// are never cleared (see [`ssn::SsnMeta::readers`]).
    pub shared_bits: bool,
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
    pub rec: *const MvRecord,
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
    pub rec: *const MvRecord,
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

/// Start a transaction: take an id and a begin stamp (under timestamp
/// ordering, `mvto`, a unique timestamp).
pub(crate) fn begin(sh: &ErmiaShared, st: &mut ErmiaLocal, mvto: bool) {
    let (xid, begin) = if mvto {
        sh.xids.begin_unique(st.mv.slot, &sh.clock)
    } else {
        sh.xids.begin_from(st.mv.slot, &sh.clock)
    };
    st.mv.xid = xid;
    st.mv.begin = begin;
    st.mv.pstamp = 0;
    st.mv.sstamp = SSTAMP_INF;
}

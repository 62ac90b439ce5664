//! Concurrency-control protocols, behind one trait.
//!
//! A protocol is a type implementing [`CcProtocol`]: it owns its
//! database-wide state ([`CcProtocol::Shared`]) and its per-worker state
//! ([`CcProtocol::Local`]), and implements begin, the operations, commit,
//! abort, maintenance between transactions and the record-layout hooks that
//! checkpoints and recovery use. The transaction context [`Tx`] gives it the
//! substrate (database, worker core, epoch guard) and its own state. The
//! protocols are listed once, in [`protocols!`] below: the list generates the
//! public [`Protocol`] enum, its names and capabilities, and the one match
//! per transaction that picks the monomorphized code ([`Protocol::dispatch`]).
//! What several protocols share lives here too: the read/write/node sets of
//! the single-version protocols and the unlinking of deleted records.

pub mod bohm;
pub(crate) mod cuts;
pub mod ems;
pub mod ermia;
pub mod nocc;
pub mod rocc;
pub mod silo;
pub mod snapshot;
pub mod twopl;
pub mod xid;

use std::any::Any;
use std::collections::HashMap;
use std::ops::{Bound, Range};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::catalog::{RecordHead, Table, TableId};
use crate::engine::{Engine, Settings, WorkerStats};
use crate::epoch::Guard;
use crate::error::{ConflictReason, Error, TxError, TxResult};
use crate::index::OrderedIndex;
use crate::index::{Insert, LeafRef};
use crate::log::LogCursor;
use crate::storage::tid::*;
use crate::storage::{Record, RecordLayout};
use crate::txn::{
    check_key, check_patch, check_value, clamp_slice, patch_row, ScanOptions, Transaction, TxnOps,
    GET_MANY_PREFETCH,
};

/// The `CcProtocol` impl of a single-version protocol (Silo, no-CC): the
/// module that invokes it supplies free functions `get`, `put`, `insert`,
/// `update`, `update_slice`, `delete`, `scan`, `commit` and `abort` over
/// `Tx<'_, $ty>`;
/// Silo's snapshot transactions (section 4.9), the unlinks of deleted
/// records and the record layout are common.
macro_rules! single_version_protocol {
    ($ty:ty) => {
        $crate::cc::single_version_protocol!($ty, $crate::cc::OrphanUnlinks);
    };
    ($ty:ty, $sh:ty) => {
        impl $crate::cc::CcProtocol for $ty {
            type Shared = $sh;
            type Local = $crate::cc::SvLocal;
            type Rec = $crate::storage::Record;

            fn new_shared(s: &$crate::engine::Settings) -> $sh {
                <$sh as $crate::cc::SvShared>::new(s)
            }
            fn new_local(_: &$sh, _: usize) -> $crate::cc::SvLocal {
                $crate::cc::SvLocal::default()
            }
            #[inline]
            fn begin(tx: &mut $crate::cc::Tx<'_, $ty>) {
                tx.st.sets.clear();
                <$sh as $crate::cc::SvShared>::begin(&mut tx.st.ranges, tx.g);
            }
            #[inline]
            fn get<'t>(tx: &'t mut $crate::cc::Tx<'_, $ty>, table: &$crate::catalog::Table, key: &[u8]) -> $crate::error::TxResult<Option<&'t [u8]>> {
                if let Some(b) = tx.snapshot {
                    let recs = tx.records();
                    return Ok($crate::cc::snapshot::get(&mut tx.st.sets.rbuf, recs, table, key, b));
                }
                get(tx, table, key)
            }
            #[inline]
            fn get_slice<'t>(
                tx: &'t mut $crate::cc::Tx<'_, $ty>,
                table: &$crate::catalog::Table,
                key: &[u8],
                start: usize,
                end: usize,
            ) -> $crate::error::TxResult<Option<&'t [u8]>> {
                if let Some(b) = tx.snapshot {
                    let recs = tx.records();
                    let v = $crate::cc::snapshot::get(&mut tx.st.sets.rbuf, recs, table, key, b);
                    return Ok(v.map(|v| $crate::txn::clamp_slice(v, start, end)));
                }
                get_slice(tx, table, key, start, end)
            }
            #[inline]
            fn prefetch(
                tx: &mut $crate::cc::Tx<'_, $ty>,
                table: &$crate::catalog::Table,
                keys: &[&[u8]],
                value_len: usize,
            ) {
                if tx.snapshot.is_none() {
                    tx.st.sets.prefetched.fill::<$crate::storage::Record>(table, keys, value_len, tx.g);
                }
            }
            #[inline]
            fn get_many(
                tx: &mut $crate::cc::Tx<'_, $ty>,
                table: &$crate::catalog::Table,
                keys: &[&[u8]],
                start: usize,
                end: usize,
                f: &mut dyn FnMut(usize, Option<&[u8]>),
            ) -> $crate::error::TxResult<()> {
                if tx.snapshot.is_some() {
                    return $crate::cc::get_each(tx, table, keys, start, end, f);
                }
                get_many(tx, table, keys, start, end, f)
            }
            const SLICED_SCANS: bool = true;
            #[inline]
            fn put(tx: &mut $crate::cc::Tx<'_, $ty>, table: &$crate::catalog::Table, key: &[u8], val: &[u8]) -> $crate::error::TxResult<()> {
                put(tx, table, key, val)
            }
            #[inline]
            fn insert(tx: &mut $crate::cc::Tx<'_, $ty>, table: &$crate::catalog::Table, key: &[u8], val: &[u8]) -> $crate::error::TxResult<bool> {
                insert(tx, table, key, val)
            }
            #[inline]
            fn update(tx: &mut $crate::cc::Tx<'_, $ty>, table: &$crate::catalog::Table, key: &[u8], val: &[u8]) -> $crate::error::TxResult<bool> {
                update(tx, table, key, val)
            }
            #[inline]
            fn update_slice(
                tx: &mut $crate::cc::Tx<'_, $ty>,
                table: &$crate::catalog::Table,
                key: &[u8],
                at: usize,
                bytes: &[u8],
            ) -> $crate::error::TxResult<bool> {
                update_slice(tx, table, key, at, bytes)
            }
            #[inline]
            fn delete(tx: &mut $crate::cc::Tx<'_, $ty>, table: &$crate::catalog::Table, key: &[u8]) -> $crate::error::TxResult<bool> {
                delete(tx, table, key)
            }
            fn scan<F>(
                tx: &mut $crate::cc::Tx<'_, $ty>,
                table: &$crate::catalog::Table,
                lo: std::ops::Bound<&[u8]>,
                hi: std::ops::Bound<&[u8]>,
                opts: $crate::txn::ScanOptions,
                f: F,
            ) -> $crate::error::TxResult<usize>
            where
                F: FnMut(&[u8], &[u8]) -> bool,
            {
                if let Some(b) = tx.snapshot {
                    let recs = tx.records();
                    let buf = &mut tx.st.sets.rbuf;
                    let f = $crate::cc::sliced(opts.slice, f);
                    return Ok($crate::cc::snapshot::scan(buf, recs, table, (lo, hi), opts, b, f));
                }
                scan(tx, table, lo, hi, opts, f)
            }
            #[inline]
            fn commit(tx: &mut $crate::cc::Tx<'_, $ty>) -> $crate::error::TxResult<()> {
                if tx.snapshot.is_some() {
                    return Ok(());
                }
                commit(tx)
            }
            #[inline]
            fn abort(tx: &mut $crate::cc::Tx<'_, $ty>) {
                if tx.snapshot.is_some() {
                    return;
                }
                abort(tx)
            }
            #[inline]
            fn maintain(
                db: &$crate::engine::Engine,
                core: &mut $crate::cc::WorkerCore,
                sh: &$sh,
                st: &mut $crate::cc::SvLocal,
                g: &$crate::epoch::Guard<'_>,
            ) {
                <$sh as $crate::cc::SvShared>::maintain(sh, core, st, g);
                $crate::cc::sv_maintain(db, core, <$sh as $crate::cc::SvShared>::orphans(sh), st, g)
            }
            fn retire_local(sh: &$sh, st: &mut $crate::cc::SvLocal) {
                <$sh as $crate::cc::SvShared>::retire(sh, st);
                $crate::cc::sv_retire(<$sh as $crate::cc::SvShared>::orphans(sh), st)
            }
            fn close(sh: &mut $sh) {
                <$sh as $crate::cc::SvShared>::close(sh);
            }
            fn read_committed(_: &$sh, rec: &$crate::storage::Record, out: &mut Vec<u8>) -> bool {
                matches!(rec.read(out), $crate::storage::ReadOutcome::Ok(tid) if tid & $crate::storage::tid::ABSENT == 0)
            }
            fn rebuild(val: &[u8], epoch: u64) -> *mut $crate::storage::Record {
                // Like a record written long ago: a TID in its epoch (every new
                // TID is in a later epoch).
                $crate::storage::Record::new(val, $crate::storage::tid::make_tid(epoch, 1) | $crate::storage::tid::LATEST, 0)
            }
        }
    };
}
pub(crate) use single_version_protocol;

/// What a protocol promises; tests and tools select protocols by these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Every committed history is serializable (phantoms included when
    /// `phantom_safe`).
    pub serializable: bool,
    /// Records keep several versions (readers see a snapshot).
    pub multi_version: bool,
    /// Every transaction reads a consistent snapshot taken at its begin (SI).
    pub snapshot_reads: bool,
    /// Silo's read-only snapshot transactions (`Options::snapshots`,
    /// `Worker::run_snapshot`, Silo section 4.9).
    pub snapshot_txns: bool,
    /// Scans and absent-key reads are protected against phantoms.
    pub phantom_safe: bool,
    /// Commits can be logged (`Durability::Sync`/`Async`).
    pub durable: bool,
    /// An operation may wait, unboundedly, for another transaction to end
    /// (a lock held by it): two interleaved transactions driven from one
    /// thread can then wait for ever, so such tests need two threads.
    pub blocks: bool,
    /// Requests are ordered in batches before they run (Faleiro's
    /// deterministic protocols): no interactive transactions, only
    /// procedures submitted with `Database::submit`.
    pub deterministic: bool,
}

/// A concurrency-control protocol. Everything it needs beyond the substrate
/// it keeps in `Shared` (one per database) and `Local` (one per worker).
///
/// Every function taking a [`Tx`] runs inside one transaction attempt, with
/// the worker pinned; `Worker` calls them monomorphized for the protocol
/// (one match per transaction picks the instance).
pub(crate) trait CcProtocol: Sized + 'static {
    /// Database-wide state (ERMIA: the commit clock, the TID table).
    type Shared: Send + Sync + 'static;
    /// Per-worker state (read/write sets, stamps, GC queues).
    type Local: Send + 'static;
    /// The layout of the records this protocol makes (every record of a
    /// database running it: its inserts, and `rebuild` at recovery).
    type Rec: RecordHead;

    /// The state of a database opened with `opts`.
    fn new_shared(opts: &Settings) -> Self::Shared;
    /// The state of the worker in epoch slot `slot`.
    fn new_local(sh: &Self::Shared, slot: usize) -> Self::Local;

    /// Start a transaction.
    fn begin(tx: &mut Tx<'_, Self>);
    /// `Txn::get`: the value is valid until the next operation.
    fn get<'t>(tx: &'t mut Tx<'_, Self>, table: &Table, key: &[u8]) -> TxResult<Option<&'t [u8]>>;
    /// `Txn::get_slice`: bytes `start..end` of the value (clamped). By
    /// default a whole `get`, sliced; a protocol that can copy only those
    /// bytes out of the record overrides it.
    #[inline]
    fn get_slice<'t>(
        tx: &'t mut Tx<'_, Self>,
        table: &Table,
        key: &[u8],
        start: usize,
        end: usize,
    ) -> TxResult<Option<&'t [u8]>> {
        Ok(Self::get(tx, table, key)?.map(|v| clamp_slice(v, start, end)))
    }
    /// `Txn::prefetch`: a hint that the transaction will soon get `keys`
    /// (at most the first `value_len` bytes of each). Nothing by default.
    #[inline]
    fn prefetch(tx: &mut Tx<'_, Self>, table: &Table, keys: &[&[u8]], value_len: usize) {
        let _ = (tx, table, keys, value_len);
    }
    /// `Txn::get_many`: bytes `start..end` of each of `keys`' values,
    /// handed to `f` in order. By default a `prefetch` and a `get_slice`
    /// per key; a protocol that can read the records a batched lookup
    /// found, with no memo in between, overrides it.
    fn get_many(
        tx: &mut Tx<'_, Self>,
        table: &Table,
        keys: &[&[u8]],
        start: usize,
        end: usize,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> TxResult<()> {
        get_each(tx, table, keys, start, end, f)
    }
    /// Whether `scan` honours [`ScanOptions::slice`] itself; otherwise
    /// `Tx::scan` slices each value before the visitor sees it.
    const SLICED_SCANS: bool = false;
    /// `Txn::put` (upsert, blind).
    fn put(tx: &mut Tx<'_, Self>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<()>;
    /// `Txn::insert`: `false` if the key exists.
    fn insert(tx: &mut Tx<'_, Self>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool>;
    /// `Txn::update`: `false` if the key is absent.
    fn update(tx: &mut Tx<'_, Self>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool>;
    /// `Txn::update_slice`: write `bytes` at `at` of the value if the key
    /// is present. By default a `get` into the worker's scratch buffer, the
    /// bytes written over it, and an `update` of the whole row; a protocol
    /// that can keep only the bytes in its write set overrides it.
    fn update_slice(
        tx: &mut Tx<'_, Self>,
        table: &Table,
        key: &[u8],
        at: usize,
        bytes: &[u8],
    ) -> TxResult<bool> {
        let mut row = std::mem::take(&mut tx.core.scratch);
        row.clear();
        let r = match Self::get(tx, table, key) {
            Ok(Some(v)) => {
                row.extend_from_slice(v);
                patch_row(&mut row, at, bytes).and_then(|()| Self::update(tx, table, key, &row))
            }
            Ok(None) => Ok(false),
            Err(e) => Err(e),
        };
        tx.core.scratch = row;
        r
    }
    /// `Txn::delete`: `false` if the key is absent.
    fn delete(tx: &mut Tx<'_, Self>, table: &Table, key: &[u8]) -> TxResult<bool>;
    /// `Txn::scan`.
    fn scan<F>(
        tx: &mut Tx<'_, Self>,
        table: &Table,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool;
    /// Commit; on `Err` the transaction has been rolled back.
    fn commit(tx: &mut Tx<'_, Self>) -> TxResult<()>;
    /// Roll back (the body returned an error).
    fn abort(tx: &mut Tx<'_, Self>);
    /// Between transactions, still pinned: garbage collection, unlinks.
    fn maintain(
        db: &Engine,
        core: &mut WorkerCore,
        sh: &Self::Shared,
        st: &mut Self::Local,
        g: &Guard<'_>,
    );
    /// The worker is going away: hand what it still owes to `sh`.
    fn retire_local(sh: &Self::Shared, st: &mut Self::Local);
    /// The database is closing and no worker exists: release what `sh`
    /// still holds, before the tables free their records.
    fn close(sh: &mut Self::Shared);

    /// Layout hook for checkpoints: the newest committed value of `rec`
    /// into `out`, `false` if the record holds none (deleted). Pinned.
    fn read_committed(sh: &Self::Shared, rec: &Record, out: &mut Vec<u8>) -> bool;
    /// Layout hook for recovery: a record holding `val`, committed at
    /// epoch `epoch`, in this protocol's layout.
    fn rebuild(val: &[u8], epoch: u64) -> *mut Record;
}

/// A protocol's shared state behind a type-erased face: what the database
/// keeps, and what checkpoints and the database's drop reach it through.
pub(crate) trait SharedState: RecordLayout {
    fn as_any(&self) -> &dyn Any;
    fn new_local(&self, slot: usize) -> Box<dyn Any + Send>;
    fn retire_local(&self, local: &mut (dyn Any + Send));
    fn close(&mut self);
}

struct SharedOf<P: CcProtocol>(P::Shared);

impl<P: CcProtocol> SharedState for SharedOf<P> {
    fn as_any(&self) -> &dyn Any {
        &self.0
    }
    fn new_local(&self, slot: usize) -> Box<dyn Any + Send> {
        Box::new(P::new_local(&self.0, slot))
    }
    fn retire_local(&self, local: &mut (dyn Any + Send)) {
        if let Some(st) = local.downcast_mut::<P::Local>() {
            P::retire_local(&self.0, st);
        }
    }
    fn close(&mut self) {
        P::close(&mut self.0)
    }
}

impl<P: CcProtocol> RecordLayout for SharedOf<P> {
    fn read_committed(&self, rec: &Record, out: &mut Vec<u8>) -> bool {
        P::read_committed(&self.0, rec, out)
    }
    fn rebuild(&self, val: &[u8], epoch: u64) -> *mut Record {
        P::rebuild(val, epoch)
    }
    fn free_record(&self) -> unsafe fn(*mut u8) {
        <P::Rec as RecordHead>::FREE
    }
}

/// What every worker has, whatever the protocol.
pub(crate) struct WorkerCore {
    /// The worker's epoch slot (also its log slot).
    pub slot: usize,
    /// Cache of the catalog's tables.
    pub tables: Vec<Arc<Table>>,
    pub stats: WorkerStats,
    /// Backoff randomness (xorshift64).
    pub rng: u64,
    /// This worker's logging state.
    pub log: LogCursor,
    /// A row buffer for the default `update_slice` (kept across
    /// transactions, so that it allocates only while it grows).
    pub scratch: Vec<u8>,
    /// A conflict that an operation reported and the body may have
    /// dropped (an iterator scan's error, which `.flatten()` would
    /// swallow): the attempt aborts with it instead of committing.
    pub poisoned: Option<ConflictReason>,
}

/// A transaction in progress under protocol `P`: the substrate, the
/// protocol's state, and the snapshot bound of a Silo snapshot
/// transaction. Implements [`Transaction`] without any per-operation
/// dispatch.
pub(crate) struct Tx<'a, P: CcProtocol> {
    pub db: &'a Engine,
    pub core: &'a mut WorkerCore,
    pub sh: &'a P::Shared,
    pub st: &'a mut P::Local,
    pub g: &'a Guard<'a>,
    /// Snapshot boundary of a read-only snapshot transaction.
    pub snapshot: Option<u64>,
}

/// The records of a database running `P`, for as long as the guard pins
/// the epoch: lookups and scans that hand protocols `&'a P::Rec`, with no
/// `unsafe` at the call. Sound because only a `Tx<'a, P>` makes one, and a
/// `Tx<'_, P>` exists only in a database running `P`, whose every record
/// `P` made in its layout `P::Rec`. A copyable token, so a protocol can
/// hold it while it borrows its own state mutably.
pub(crate) struct Records<'a, P: CcProtocol> {
    g: &'a Guard<'a>,
    _p: std::marker::PhantomData<fn() -> P>,
}

impl<P: CcProtocol> Clone for Records<'_, P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P: CcProtocol> Copy for Records<'_, P> {}

impl<'a, P: CcProtocol> Records<'a, P> {
    /// The record of `key` in `table`.
    #[inline]
    pub(crate) fn lookup(self, table: &Table, key: &[u8]) -> Option<&'a P::Rec> {
        // SAFETY: `P::Rec` is this database's layout (see the type's docs).
        unsafe { table.lookup(key, self.g) }
    }

    /// [`Records::lookup`], also naming the leaf whose range holds `key`
    /// and its version (for the node set).
    #[inline]
    pub(crate) fn lookup_with_leaf(
        self,
        table: &Table,
        key: &[u8],
    ) -> (Option<&'a P::Rec>, LeafRef, u64) {
        // SAFETY: as in `lookup`.
        unsafe { table.lookup_with_leaf(key, self.g) }
    }

    /// Ordered scan of `(lo, hi)` in `table`, reporting each leaf read to
    /// `observer` and handing each record to `f`.
    #[inline]
    pub(crate) fn scan<O: crate::index::RangeObserver>(
        self,
        table: &Table,
        (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
        reverse: bool,
        observer: O,
        f: impl FnMut(&[u8], &'a P::Rec) -> bool,
    ) {
        // SAFETY: as in `lookup`.
        unsafe { table.scan_records(lo, hi, reverse, self.g, observer, f) }
    }
}

impl<'a, P: CcProtocol> Tx<'a, P> {
    /// This database's records, bound to the transaction's guard.
    #[inline]
    pub(crate) fn records(&self) -> Records<'a, P> {
        Records {
            g: self.g,
            _p: std::marker::PhantomData,
        }
    }

    /// Resolve a table id. Tables live as long as the database, and the
    /// worker's cache holds an `Arc` to each, so the reference outlives `self`.
    #[inline(always)]
    pub(crate) fn table(&mut self, t: TableId) -> TxResult<&'a Table> {
        let i = t.0 as usize;
        if i >= self.core.tables.len() {
            self.refresh_tables(t)?;
        }
        let p: *const Table = &*self.core.tables[i];
        // SAFETY: tables are never removed from an open database and the
        // database outlives every transaction (the worker holds an Arc).
        Ok(unsafe { &*p })
    }

    /// A table this worker has not seen yet (created after its cache was
    /// filled): refresh the cache, or say the id names no table.
    #[cold]
    #[inline(never)]
    fn refresh_tables(&mut self, t: TableId) -> TxResult<()> {
        self.core.tables = self.db.tables.read().clone();
        if t.0 as usize >= self.core.tables.len() {
            return Err(TxError::Error(Error::BadTableId(t.0)));
        }
        Ok(())
    }

    /// What every write checks first: key and value sizes, a writable
    /// transaction, the table.
    #[inline]
    fn for_write(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<&'a Table> {
        check_key(key)?;
        check_value(val)?;
        if self.snapshot.is_some() || self.db.opts.read_only {
            return Err(TxError::Error(Error::ReadOnly));
        }
        self.table(t)
    }
}

impl<P: CcProtocol> Transaction for Tx<'_, P> {
    #[inline]
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        check_key(key)?;
        let table = self.table(t)?;
        P::get(self, table, key)
    }

    #[inline]
    fn get_slice(&mut self, t: TableId, key: &[u8], at: Range<usize>) -> TxResult<Option<&[u8]>> {
        check_key(key)?;
        let table = self.table(t)?;
        P::get_slice(self, table, key, at.start, at.end)
    }

    #[inline]
    fn prefetch(&mut self, t: TableId, keys: &[&[u8]], value_len: usize) {
        if let Ok(table) = self.table(t) {
            P::prefetch(self, table, keys, value_len);
        }
    }

    #[inline]
    fn get_many<F>(
        &mut self,
        t: TableId,
        keys: &[&[u8]],
        at: Range<usize>,
        mut f: F,
    ) -> TxResult<()>
    where
        F: FnMut(usize, Option<&[u8]>),
    {
        for k in keys {
            check_key(k)?;
        }
        let table = self.table(t)?;
        P::get_many(self, table, keys, at.start, at.end, &mut f)
    }

    #[inline]
    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        let table = self.for_write(t, key, val)?;
        P::put(self, table, key, val)
    }

    #[inline]
    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        let table = self.for_write(t, key, val)?;
        P::insert(self, table, key, val)
    }

    #[inline]
    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        let table = self.for_write(t, key, val)?;
        P::update(self, table, key, val)
    }

    #[inline]
    fn update_slice(&mut self, t: TableId, key: &[u8], at: usize, bytes: &[u8]) -> TxResult<bool> {
        let table = self.for_write(t, key, bytes)?;
        P::update_slice(self, table, key, at, bytes)
    }

    #[inline]
    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        let table = self.for_write(t, key, &[])?;
        P::delete(self, table, key)
    }

    fn scan<F>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool,
    {
        for b in [&lo, &hi] {
            if let Bound::Included(k) | Bound::Excluded(k) = b {
                check_key(k)?;
            }
        }
        if opts.limit == Some(0) {
            return Ok(0);
        }
        let table = self.table(t)?;
        if opts.slice.is_some() && !P::SLICED_SCANS {
            return P::scan(self, table, lo, hi, opts, sliced(opts.slice, f));
        }
        P::scan(self, table, lo, hi, opts, f)
    }

    #[inline]
    fn is_snapshot(&self) -> bool {
        self.snapshot.is_some()
    }

    fn poison(&mut self, r: ConflictReason) {
        self.core.poisoned.get_or_insert(r);
    }
}

/// `f` shown only bytes `slice` of each value (all of it for `None`): a
/// scan's [`ScanOptions::slice`] for protocols that read whole values.
#[inline]
pub(crate) fn sliced<F: FnMut(&[u8], &[u8]) -> bool>(
    slice: Option<(usize, usize)>,
    mut f: F,
) -> impl FnMut(&[u8], &[u8]) -> bool {
    move |k, v| match slice {
        None => f(k, v),
        Some((s, e)) => f(k, clamp_slice(v, s, e)),
    }
}

/// The object-safe face of [`Tx`], behind the application's [`crate::Txn`].
impl<P: CcProtocol> TxnOps for Tx<'_, P> {
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        Transaction::get(self, t, key)
    }
    fn get_slice(&mut self, t: TableId, key: &[u8], at: Range<usize>) -> TxResult<Option<&[u8]>> {
        Transaction::get_slice(self, t, key, at)
    }
    fn prefetch(&mut self, t: TableId, keys: &[&[u8]], value_len: usize) {
        Transaction::prefetch(self, t, keys, value_len)
    }
    fn get_many(
        &mut self,
        t: TableId,
        keys: &[&[u8]],
        at: Range<usize>,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> TxResult<()> {
        Transaction::get_many(self, t, keys, at, f)
    }
    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        Transaction::put(self, t, key, val)
    }
    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        Transaction::insert(self, t, key, val)
    }
    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        Transaction::update(self, t, key, val)
    }
    fn update_slice(&mut self, t: TableId, key: &[u8], at: usize, bytes: &[u8]) -> TxResult<bool> {
        Transaction::update_slice(self, t, key, at, bytes)
    }
    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        Transaction::delete(self, t, key)
    }
    fn scan(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxResult<usize> {
        Transaction::scan(self, t, lo, hi, opts, f)
    }
    fn is_snapshot(&self) -> bool {
        self.snapshot.is_some()
    }
    fn poison(&mut self, r: ConflictReason) {
        Transaction::poison(self, r)
    }
}

/// The lookup half of a protocol's own `Txn::get_many`: `keys` looked up
/// 16 at a time with one batched descent, the first `prefetch` bytes of
/// each record found prefetched (then, for chained records
/// ([`RecordHead::CHAINED`]), those of each record's newest version), then
/// `each(i, key, rec)` for
/// every key in order, `rec` null where the batch found nothing (absent, or
/// its descent met a change: look it up alone). The records are the
/// index's, reached while pinned by `g`.
pub(crate) fn for_each_found<R: RecordHead>(
    table: &Table,
    keys: &[&[u8]],
    prefetch: usize,
    g: &Guard<'_>,
    mut each: impl FnMut(usize, &[u8], *const Record) -> TxResult<()>,
) -> TxResult<()> {
    use crate::index::BATCH_MAX;
    let mut found = [0u64; BATCH_MAX];
    let len = prefetch.min(GET_MANY_PREFETCH);
    for (c, chunk) in keys.chunks(BATCH_MAX).enumerate() {
        table.index.get_batch(chunk, &mut found[..chunk.len()], g);
        for &v in &found[..chunk.len()] {
            if v != 0 {
                Record::prefetch(v as *const Record, len);
            }
        }
        if R::CHAINED {
            // SAFETY: found just now by `get_batch` under `g`, which the
            // caller holds.
            unsafe { prefetch_newest(&found[..chunk.len()], len) };
        }
        for (j, key) in chunk.iter().enumerate() {
            each(c * BATCH_MAX + j, key, found[j] as *const Record)?;
        }
    }
    Ok(())
}

/// [`Record::prefetch_newest`] for each record in `found` (index values, 0
/// for none).
///
/// # Safety
/// Each non-zero value is a record the caller found through an index while
/// pinned, and the caller is still pinned (so none of them is freed).
#[inline]
unsafe fn prefetch_newest(found: &[u64], value_len: usize) {
    for &v in found {
        if v != 0 {
            // SAFETY: the caller's contract.
            unsafe { &*(v as *const Record) }.prefetch_newest(value_len);
        }
    }
}

/// `Txn::get_many` as a `prefetch` and a `get_slice` per key (the default
/// of [`CcProtocol::get_many`]).
pub(crate) fn get_each<P: CcProtocol>(
    tx: &mut Tx<'_, P>,
    table: &Table,
    keys: &[&[u8]],
    start: usize,
    end: usize,
    f: &mut dyn FnMut(usize, Option<&[u8]>),
) -> TxResult<()> {
    P::prefetch(tx, table, keys, end.min(GET_MANY_PREFETCH));
    for (i, k) in keys.iter().enumerate() {
        f(i, P::get_slice(tx, table, k, start, end)?);
    }
    Ok(())
}

/// Something to run with the protocol as a type: [`Protocol::dispatch`]
/// calls `visit::<P>()` for the database's protocol (closures cannot be
/// generic, so callers write a small struct).
pub(crate) trait Visit {
    type Out;
    fn visit<P: CcProtocol>(self) -> Self::Out;
}

/// The protocol list. Each line: the `Protocol` variant (with its doc), the
/// type implementing [`CcProtocol`], its name, other accepted names, and its
/// capabilities. Adding a protocol is its module plus one line here. The
/// second group lists the deterministic protocols: each names the
/// [`bohm::DetProtocol`] mode of the batch engine that runs it, since they
/// have no interactive operations (`Database::submit` drives them).
macro_rules! protocols {
    (
        interactive {
            $( $(#[$doc:meta])* $var:ident => $ty:ty, $name:literal, [$($alias:literal),*], $caps:expr; )*
        }
        deterministic {
            $( $(#[$ddoc:meta])* $dvar:ident => $det:expr, $dname:literal, [$($dalias:literal),*], $dcaps:expr; )*
        }
    ) => {
        /// The concurrency-control protocol, chosen at run time.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Protocol {
            $( $(#[$doc])* $var, )*
            $( $(#[$ddoc])* $dvar, )*
        }

        impl Protocol {
            /// Every protocol, in the order of the list (the interactive
            /// ones first).
            pub const ALL: [Protocol; [$($name,)* $($dname),*].len()] =
                [$(Protocol::$var,)* $(Protocol::$dvar),*];

            /// The protocols that run interactive transactions
            /// ([`Worker::run`](crate::Worker::run)): every one but the
            /// deterministic ones.
            pub const INTERACTIVE: [Protocol; [$($name),*].len()] = [$(Protocol::$var),*];

            /// The name used on the command line and in reports.
            pub fn name(self) -> &'static str {
                match self { $(Protocol::$var => $name,)* $(Protocol::$dvar => $dname,)* }
            }

            /// What the protocol promises.
            pub fn caps(self) -> Capabilities {
                match self { $(Protocol::$var => $caps,)* $(Protocol::$dvar => $dcaps,)* }
            }

            /// The batch engine's mode, for a deterministic protocol.
            pub fn deterministic(self) -> Option<bohm::DetProtocol> {
                match self {
                    $(Protocol::$dvar => Some($det),)*
                    _ => None,
                }
            }

            /// Run `v` with the protocol's type: the one match per call.
            /// Never called for a deterministic protocol (a deterministic
            /// database makes no `Worker`).
            #[inline(always)]
            pub(crate) fn dispatch<V: Visit>(self, v: V) -> V::Out {
                match self {
                    $(Protocol::$var => v.visit::<$ty>(),)*
                    $(Protocol::$dvar => unreachable!(
                        "{} is deterministic: it has no interactive transactions", $dname),)*
                }
            }

            /// The protocol's shared state for a database opened with `opts`.
            /// A deterministic database runs no interactive worker, so its
            /// slot holds no-CC's (empty) state, which nothing uses.
            pub(crate) fn new_shared(self, opts: &Settings) -> Box<dyn SharedState> {
                match self {
                    $(Protocol::$var => Box::new(SharedOf::<$ty>(<$ty>::new_shared(opts))),)*
                    $(Protocol::$dvar => Box::new(SharedOf::<nocc::NoCc>(
                        <nocc::NoCc>::new_shared(opts))),)*
                }
            }
        }

        impl std::str::FromStr for Protocol {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                match s.to_ascii_lowercase().as_str() {
                    $($name $(| $alias)* => Ok(Protocol::$var),)*
                    $($dname $(| $dalias)* => Ok(Protocol::$dvar),)*
                    other => Err(Error::InvalidArgument(format!(
                        "unknown protocol '{other}' (known: {})",
                        Protocol::ALL.map(|p| p.name()).join(", ")
                    ))),
                }
            }
        }
    };
}

const SV: Capabilities = Capabilities {
    serializable: true,
    multi_version: false,
    snapshot_reads: false,
    snapshot_txns: true,
    phantom_safe: true,
    durable: true,
    blocks: false,
    deterministic: false,
};

const TWO_PL: Capabilities = Capabilities {
    snapshot_txns: false,
    ..SV
};

const TWO_PL_WAITING: Capabilities = Capabilities {
    blocks: true,
    ..TWO_PL
};

const DET: Capabilities = Capabilities {
    serializable: true,
    multi_version: true,
    snapshot_reads: false,
    snapshot_txns: false,
    phantom_safe: true,
    durable: true,
    blocks: false,
    deterministic: true,
};

impl Protocol {
    /// The protocol of `Options::in_memory()` and `Options::durable()`
    /// (the command line's `--cc` defaults to it too).
    pub const DEFAULT: Protocol = Protocol::Silo;
}

protocols! {
    interactive {
    /// Silo's OCC (Tu et al., SOSP 2013): serializable.
    Silo => silo::Silo, "silo", [], SV;
    /// ROCC, range-based OCC (Cai, Guo and Zhou, chapter 3): Silo's point
    /// operations, scans validated per logical key range against the
    /// writers registered there. Serializable.
    Rocc => rocc::Rocc, "rocc", ["range-occ"], SV;
    /// GWV, global write-set validation (HyPer's scan validation, the
    /// baseline of Cai et al. chapter 3): ROCC's machinery with one list of
    /// committed writers for the whole database. Serializable.
    Gwv => rocc::Gwv, "gwv", [], SV;
    /// ERMIA's snapshot isolation (Kim et al., SIGMOD 2016, section 3.6.1):
    /// multi-versioned records, first-updater-wins. Not serializable (write
    /// skew is possible).
    Si => ermia::Ermia<ermia::SiMode>, "si", ["ermia-si"], Capabilities {
        serializable: false, multi_version: true, snapshot_reads: true,
        snapshot_txns: false, phantom_safe: false, durable: true, blocks: false,
        deterministic: false };
    /// ERMIA's SI plus the Serial Safety Net (section 3.6.2): serializable.
    Ssn => ermia::Ermia<ermia::SsnMode>, "ssn", ["ermia-ssn", "ermia"], Capabilities {
        serializable: true, multi_version: true, snapshot_reads: true,
        snapshot_txns: false, phantom_safe: true, durable: true, blocks: false,
        deterministic: false };
    /// MVRCC, the timestamp-ordering baseline of Cai et al. section 3.6
    /// (Deuteronomy's range concurrency control): ERMIA's multi-version
    /// records read and written in timestamp order, each version with a
    /// read timestamp, and per logical range a read timestamp and an
    /// unordered array of the writers in flight against phantoms.
    /// Serializable.
    /// Its reads see the versions below the timestamp taken at begin: a
    /// snapshot (`snapshot_reads`), at the price of an abort where an
    /// older transaction's write is still pending.
    Mvrcc => ermia::Ermia<ermia::MvrccMode>, "mvrcc", ["mvto"], Capabilities {
        serializable: true, multi_version: true, snapshot_reads: true,
        snapshot_txns: false, phantom_safe: true, durable: true, blocks: false,
        deterministic: false };
    /// Snapshot isolation on EMS, the version storage of Cai, Guo and Zhou
    /// (chapter 2): each record's two newest versions in its header, older
    /// ones in an oldest-first list; first-committer-wins on the header's
    /// lock word; commit stamps published over a contiguous prefix instead
    /// of the book's single commit thread. Not serializable (write skew is
    /// possible), as `si`.
    Ems => ems::Ems, "ems", ["ems-si"], Capabilities {
        serializable: false, multi_version: true, snapshot_reads: true,
        snapshot_txns: false, phantom_safe: false, durable: true, blocks: false,
        deterministic: false };
    /// Strict two-phase locking, no-wait (DBx1000's NO_WAIT, CCBench's
    /// ss2pl): a lock conflict aborts at once. Serializable.
    TwoPlNoWait => twopl::TwoPl<twopl::NoWait>, "2pl-nowait", ["2pl", "nowait", "no-wait", "ss2pl"], TWO_PL;
    /// Strict two-phase locking, wait-die (DBx1000's WAIT_DIE): an older
    /// requester waits, a younger one aborts. Serializable.
    TwoPlWaitDie => twopl::TwoPl<twopl::WaitDie>, "2pl-waitdie", ["waitdie", "wait-die", "2pl-wait-die"], TWO_PL_WAITING;
    /// Read committed (Adya's PL-2), the OCC baseline of Faleiro's PWV
    /// evaluation: Silo's reads and commit-time write locks with no
    /// validation. **Not serializable** (lost updates and write skew
    /// happen): it measures the price of serializability, nothing more.
    Rc => silo::Rc, "rc", ["read-committed"], Capabilities {
        serializable: false, multi_version: false, snapshot_reads: false,
        snapshot_txns: true, phantom_safe: false, durable: true, blocks: false,
        deterministic: false };
    /// No concurrency control: direct index reads and writes with no read or
    /// write sets, applied immediately (Silo section 5.2's key-value
    /// baseline). Not isolated; a user abort does not roll anything back.
    /// For measuring what tracking costs, never for real data.
    NoCc => nocc::NoCc, "nocc", ["none"], Capabilities {
        serializable: false, multi_version: false, snapshot_reads: false,
        snapshot_txns: true, phantom_safe: false, durable: false, blocks: false,
        deterministic: false };
    }
    deterministic {
    /// BOHM (Faleiro and Abadi, VLDB 2015; the thesis's chapter 5):
    /// batches ordered by a sequencer, placeholders inserted by CC threads
    /// in timestamp order, multi-version reads that never block writes.
    /// Serializable, with no validation and no aborts but the logic's.
    Bohm => bohm::DetProtocol::Bohm, "bohm", [], DET;
    /// The thesis's deterministic 2PL baseline: locks granted in timestamp
    /// order and taken in lexicographic key order, one version per record.
    /// Serializable, deadlock-free.
    TwoPlOrdered => bohm::DetProtocol::TwoPlOrdered, "2pl-ordered", ["2pl-ord"], Capabilities {
        multi_version: false, ..DET };
    /// Piece-wise visibility (the thesis's chapter 6): transactions as
    /// piece DAGs, one executor per key partition, a piece's writes visible
    /// once it completes after its transaction's commit point. One version
    /// per record. Serializable, no cascading aborts.
    Pwv => bohm::DetProtocol::Pwv, "pwv", [], Capabilities {
        multi_version: false, ..DET };
    /// Lazy transactions (the thesis's chapter 4): each transaction's
    /// now-phase runs at once in log order and commits; the rest is left
    /// as stickies (BOHM's placeholders) that substantiation workers, or
    /// the readers that need them, evaluate later. Serializable.
    Lazy => bohm::DetProtocol::Lazy, "lazy", [], DET;
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A deleted record waiting to be unlinked from its index.
pub(crate) struct PendingUnlink {
    pub table: TableId,
    pub key: Box<[u8]>,
    pub rec: *const crate::storage::Record,
    pub tid: u64,
}

// SAFETY: the record pointer is only dereferenced while pinned, and the record
// is only reclaimed by whoever pops this entry.
unsafe impl Send for PendingUnlink {}

/// Deleted records of dropped workers, waiting for a live worker to unlink
/// them (the shared state of the protocols that keep deletions in place).
#[derive(Default)]
pub(crate) struct OrphanUnlinks(pub Mutex<Vec<PendingUnlink>>);

/// The shared state of a single-version protocol (`single_version_protocol!`):
/// the unlinks of deleted records, and whatever else the protocol keeps
/// (ROCC's ranges and commit stamps).
pub(crate) trait SvShared: Send + Sync + 'static {
    fn new(s: &Settings) -> Self;
    fn orphans(&self) -> &OrphanUnlinks;
    /// A transaction attempt begins (ROCC clears its predicates); nothing
    /// for the others, so Silo's begin stays what it was.
    #[inline(always)]
    fn begin(_ranges: &mut rocc::RoccLocal, _g: &Guard<'_>) {}
    /// Between transactions, pinned, before the unlinks.
    #[inline(always)]
    fn maintain(&self, _core: &mut WorkerCore, _st: &mut SvLocal, _g: &Guard<'_>) {}
    /// A worker goes away.
    fn retire(&self, _st: &mut SvLocal) {}
    /// The database closes.
    fn close(&mut self) {
        self.orphans().0.lock().clear();
    }
}

impl SvShared for OrphanUnlinks {
    fn new(_: &Settings) -> Self {
        OrphanUnlinks::default()
    }
    #[inline(always)]
    fn orphans(&self) -> &OrphanUnlinks {
        self
    }
}

/// An entry of the read set: a record and the TID word observed.
#[derive(Clone, Copy)]
pub(crate) struct ReadEntry {
    pub rec: *const Record,
    pub tid: u64,
}

/// The kinds of point write, for the protocols that decide a write's
/// answer at the record (ERMIA's, 2PL's, EMS's).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PointWrite {
    Put,
    Insert,
    Update,
    Delete,
}

impl PointWrite {
    /// Whether the write happens when the key is `present` (else the
    /// operation only answers "exists" or "missing").
    pub(crate) fn applies(self, present: bool) -> bool {
        match self {
            PointWrite::Put => true,
            PointWrite::Insert => !present,
            PointWrite::Update | PointWrite::Delete => present,
        }
    }
}

/// Unlink the deleted records of `pending` that are due (stamp at or
/// below the watermark `wm`): at most 64 entries looked at, in queue order
/// (per worker commit order, except rolled-back ones, stamped 0: so a
/// little past the front). `unlink` does one, in its table; `false` puts
/// the entry back (its record was busy). With nothing pending, the
/// entries of dropped workers are taken over instead.
pub(crate) fn drain_unlinks(
    db: &Engine,
    core: &mut WorkerCore,
    orphans: &OrphanUnlinks,
    pending: &mut std::collections::VecDeque<PendingUnlink>,
    wm: u64,
    mut unlink: impl FnMut(&Table, &PendingUnlink) -> bool,
) {
    if pending.is_empty() {
        if let Some(mut o) = orphans.0.try_lock() {
            pending.extend(o.drain(..));
        }
        return;
    }
    let mut n = pending.len().min(64);
    while n > 0 {
        n -= 1;
        let Some(p) = pending.pop_front() else {
            break;
        };
        if p.tid > wm {
            pending.push_back(p);
            continue;
        }
        let i = p.table.0 as usize;
        if i >= core.tables.len() {
            core.tables = db.tables.read().clone();
        }
        if !unlink(&core.tables[i], &p) {
            pending.push_back(p);
        }
    }
}

/// What a write does at commit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WriteKind {
    Put,
    Delete,
    /// Column writes (`Txn::update_slice`) of a row this transaction read
    /// present: the entry's value is a *patch list* (see [`PatchList`]),
    /// not a row. Only the protocols that write rows in place at commit
    /// make these (Silo); a read of the row applies the list to the
    /// committed value.
    Patch,
}

/// The bytes of a [`WriteKind::Patch`] entry in `TxnSets::wbuf`: the row's
/// length (u32), then one segment per `update_slice` call in call order,
/// each its offset (u32), its length (u32) and its bytes (all little
/// endian). Later segments win where they overlap, as the calls did.
pub(crate) struct PatchList<'a>(pub &'a [u8]);

impl<'a> PatchList<'a> {
    /// The row length the list was checked against.
    #[inline]
    pub fn row_len(&self) -> usize {
        u32::from_le_bytes(self.0[..4].try_into().expect("patch list header")) as usize
    }

    /// The segments, as (offset, bytes).
    #[inline]
    pub fn segments(&self) -> impl Iterator<Item = (usize, &'a [u8])> {
        let mut rest = &self.0[4..];
        std::iter::from_fn(move || {
            if rest.len() < 8 {
                return None;
            }
            let at = u32::from_le_bytes(rest[..4].try_into().expect("offset")) as usize;
            let n = u32::from_le_bytes(rest[4..8].try_into().expect("length")) as usize;
            let bytes = &rest[8..8 + n];
            rest = &rest[8 + n..];
            Some((at, bytes))
        })
    }

    /// Apply the segments to `row` (the committed value, of `row_len`
    /// bytes).
    #[inline]
    pub fn apply(&self, row: &mut [u8]) {
        for (at, bytes) in self.segments() {
            row[at..at + bytes.len()].copy_from_slice(bytes);
        }
    }
}

/// `observed` value of a blind write.
pub(crate) const BLIND: u64 = u64::MAX;

/// An entry of the write set.
#[derive(Clone, Copy)]
pub(crate) struct WriteEntry {
    pub rec: *const Record,
    pub table: TableId,
    pub kind: WriteKind,
    /// Value bytes in `TxnSets::wbuf`.
    pub val: (u32, u32),
    /// Key bytes in `TxnSets::wbuf` (kept for deletes and created records).
    pub key: (u32, u32),
    /// TID word (lock bit clear) that must still be there at commit, or
    /// [`BLIND`].
    pub observed: u64,
    /// This transaction inserted the (absent) record into the index.
    pub created: bool,
    /// TID word found when the commit locked the record.
    pub locked_tid: u64,
}

impl WriteEntry {
    /// A write of `rec` that has not locked anything yet.
    pub(crate) fn new(rec: *const Record, table: TableId, kind: WriteKind, val: (u32, u32)) -> Self {
        WriteEntry {
            rec,
            table,
            kind,
            val,
            key: (0, 0),
            observed: BLIND,
            created: false,
            locked_tid: 0,
        }
    }
}

/// An entry of the node set (Silo section 4.6): a leaf and its version.
#[derive(Clone, Copy)]
pub(crate) struct NodeEntry {
    pub leaf: LeafRef,
    pub version: u64,
}

/// Silo's node set is a range observer: it records each leaf a scan read,
/// with its version, for commit to re-check.
impl crate::index::RangeObserver for &mut Vec<NodeEntry> {
    #[inline]
    fn observe(&mut self, leaf: LeafRef, version: u64) {
        self.push(NodeEntry { leaf, version });
    }
}

/// Hashes a record address for [`AddrMap`]: one multiplication and a fold
/// (the default SipHash cost 3.7% of a Silo worker's instructions under
/// TPC-C, whose NewOrder and Delivery write sets pass `WINDEX_MIN`).
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_usize(self.0 as usize ^ b as usize);
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        // Addresses are aligned, so the product's low bits carry little;
        // fold the high half in (the table indexes by the low bits).
        let x = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
}

/// Record address -> index into the write set.
pub(crate) type AddrMap = HashMap<usize, usize, std::hash::BuildHasherDefault<AddrHasher>>;

/// From this many writes on, own-write lookups use a hash map.
const WINDEX_MIN: usize = 64;

/// Finds a record's entry in the write set. Most lookups are of records the
/// transaction has not written (a `get` must check its own writes first), so
/// a 256-bit filter of the written addresses answers most of them with one
/// load; the rest scan the (short) write set, or ask a hash map once it is
/// long. Under TPC-C the map used to be built for every NewOrder of ten or
/// more lines (24 writes); now only Delivery's write sets reach it.
#[derive(Default)]
pub(crate) struct WriteIndex {
    filter: [u64; 4],
    map: AddrMap,
}

impl WriteIndex {
    /// Word and bit of `rec` in the filter.
    #[inline(always)]
    fn bit(rec: *const Record) -> (usize, u64) {
        let h = (rec as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
        ((h >> 6) as usize, 1 << (h & 63))
    }

    fn clear(&mut self) {
        self.filter = [0; 4];
        self.map.clear();
    }
}

/// The read, write and node sets of the running transaction, plus buffers.
/// Owned by the worker and reused, so a transaction allocates nothing in the
/// steady state.
#[derive(Default)]
pub(crate) struct TxnSets {
    pub reads: Vec<ReadEntry>,
    pub writes: Vec<WriteEntry>,
    pub nodes: Vec<NodeEntry>,
    /// Values and keys of the write set.
    pub wbuf: Vec<u8>,
    /// The value returned by the last read.
    pub rbuf: Vec<u8>,
    /// Finds a record's entry in `writes`.
    pub windex: WriteIndex,
    /// The record the last `get` found, so that a write of the same key
    /// right after it (read-modify-write, the common case in TPC-C) skips
    /// the second index descent and record read; and the first rows of the
    /// last scan, for the same reason (TPC-C's Delivery rewrites every
    /// order line its scan returned).
    pub last: LastFound,
    /// Where this attempt's last insert went (see [`crate::index::InsertHint`]):
    /// made and used under the attempt's guard, cleared with the sets.
    pub hint: crate::index::InsertHint,
    /// Records found by this attempt's `prefetch` calls, for the gets that
    /// follow (see [`Prefetched`]).
    pub prefetched: Prefetched,
    /// Scratch of [`TxnSets::sort_writes`]: the sort keys, and the write
    /// set being rebuilt in order.
    order: Vec<u64>,
    sorted: Vec<WriteEntry>,
    /// Silo with `ScanValidation::Reread`: the scans to run again at commit
    /// and what they found (see `silo::rescan_validates`).
    pub rescans: Rescans,
}

/// The scans of a Silo transaction under `ScanValidation::Reread`: each
/// one's bounds, and the records that were present in it, in scan order.
#[derive(Default)]
pub(crate) struct Rescans {
    pub scans: Vec<Rescan>,
    /// The present records of every scan, one run after another.
    pub recs: Vec<*const crate::storage::Record>,
    /// The bounds' keys.
    pub keys: Vec<u8>,
}

/// One scan to repeat: its table, its bounds (keys in `Rescans::keys`),
/// its direction, and its run of `Rescans::recs`.
#[derive(Clone, Copy)]
pub(crate) struct Rescan {
    pub table: crate::catalog::TableId,
    pub lo: RescanBound,
    pub hi: RescanBound,
    pub reverse: bool,
    pub recs: (u32, u32),
}

/// A scan bound kept by [`Rescans`]: unbounded, or a key (offset and length
/// in `Rescans::keys`) included or excluded.
#[derive(Clone, Copy)]
pub(crate) enum RescanBound {
    Unbounded,
    Included(u32, u32),
    Excluded(u32, u32),
}

impl Rescans {
    pub fn clear(&mut self) {
        self.scans.clear();
        self.recs.clear();
        self.keys.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.scans.is_empty()
    }

    /// Keep `b`'s key.
    pub fn bound(&mut self, b: std::ops::Bound<&[u8]>) -> RescanBound {
        use std::ops::Bound;
        let mut keep = |k: &[u8]| {
            let at = self.keys.len() as u32;
            self.keys.extend_from_slice(k);
            (at, k.len() as u32)
        };
        match b {
            Bound::Unbounded => RescanBound::Unbounded,
            Bound::Included(k) => {
                let (a, n) = keep(k);
                RescanBound::Included(a, n)
            }
            Bound::Excluded(k) => {
                let (a, n) = keep(k);
                RescanBound::Excluded(a, n)
            }
        }
    }

    /// `b` as a bound again.
    pub fn get(&self, b: RescanBound) -> std::ops::Bound<&[u8]> {
        use std::ops::Bound;
        let key = |a: u32, n: u32| &self.keys[a as usize..(a + n) as usize];
        match b {
            RescanBound::Unbounded => Bound::Unbounded,
            RescanBound::Included(a, n) => Bound::Included(key(a, n)),
            RescanBound::Excluded(a, n) => Bound::Excluded(key(a, n)),
        }
    }
}

/// Records that `Txn::prefetch` found through one batched index descent
/// (their lines already on their way into the cache), by short key: a
/// later `get` of one of these keys starts from the record instead of
/// descending the index again.
///
/// Only a lookup is remembered, not a read: the record is read (and enters
/// the read set) when the transaction gets it. A record unlinked from the
/// index since (deleted and retired) has `LATEST` cleared first, so its read
/// says `NotLatest` and the get descends the index after all; the record
/// itself is not freed while the attempt's guard is held, and the memo is
/// cleared with the sets at the end of every attempt. (Entries are
/// [`ScanHit`]s with no TID: nothing was read.)
pub(crate) struct Prefetched {
    hits: [ScanHit; PREFETCH_MEMO],
    n: usize,
    /// Where the next get is most likely to find its key (gets usually
    /// come in the order the keys were prefetched).
    next: usize,
    /// One bit per table (by id, modulo 64) with entries here, so that the
    /// gets of other tables pass by with one test.
    tables: u64,
}

/// Records one transaction attempt's prefetches remember.
const PREFETCH_MEMO: usize = 32;

impl Default for Prefetched {
    fn default() -> Self {
        Prefetched {
            hits: [ScanHit {
                table: u32::MAX,
                word: 0,
                len: 0,
                rec: std::ptr::null(),
                tid: 0,
            }; PREFETCH_MEMO],
            n: 0,
            next: 0,
            tables: 0,
        }
    }
}

impl Prefetched {
    /// The record a prefetch found for `key` in `table`, if any. The one
    /// test every get makes first is the table's bit (none when empty).
    #[inline(always)]
    pub fn find(&mut self, table: TableId, key: &[u8]) -> Option<*const Record> {
        if self.tables & (1 << (table.0 % 64)) == 0 {
            return None;
        }
        self.find_in(table, key)
    }

    #[inline]
    fn find_in(&mut self, table: TableId, key: &[u8]) -> Option<*const Record> {
        let (word, len) = short_key(key)?;
        let is = |h: &ScanHit| h.word == word && h.len == len && h.table == table.0;
        if self.next < self.n && is(&self.hits[self.next]) {
            let rec = self.hits[self.next].rec;
            self.next += 1;
            return Some(rec);
        }
        let i = self.hits[..self.n].iter().position(is)?;
        self.next = i + 1;
        Some(self.hits[i].rec)
    }

    /// Look `keys` up in `table` with one batched descent, prefetch the
    /// first `value_len` bytes of each record's value (of each record's
    /// newest version too for chained records, [`RecordHead::CHAINED`]),
    /// and remember the records found.
    pub fn fill<R: RecordHead>(
        &mut self,
        table: &Table,
        keys: &[&[u8]],
        value_len: usize,
        g: &Guard<'_>,
    ) {
        use crate::index::BATCH_MAX;
        // A hint, whatever the caller asked: a length near `usize::MAX`
        // must neither overflow the prefetch's arithmetic nor loop over
        // terabytes of addresses.
        let value_len = value_len.min(PREFETCH_MAX);
        if self.n + keys.len() > PREFETCH_MEMO {
            // The older prefetches' gets are most likely done.
            self.clear();
        }
        self.tables |= 1 << (table.id.0 % 64);
        let mut out = [0u64; BATCH_MAX];
        for chunk in keys.chunks(BATCH_MAX) {
            table.index.get_batch(chunk, &mut out[..chunk.len()], g);
            for (k, &v) in chunk.iter().zip(&out[..chunk.len()]) {
                if v == 0 {
                    continue;
                }
                let rec = v as *const Record;
                Record::prefetch(rec, value_len);
                if self.n == PREFETCH_MEMO {
                    continue;
                }
                let Some((word, len)) = short_key(k) else {
                    continue;
                };
                self.hits[self.n] = ScanHit {
                    table: table.id.0,
                    word,
                    len,
                    rec,
                    tid: 0,
                };
                self.n += 1;
            }
            if R::CHAINED {
                // SAFETY: found just now by `get_batch` under `g`, which the
                // caller holds.
                unsafe { prefetch_newest(&out[..chunk.len()], value_len) };
            }
        }
    }

    #[inline]
    pub fn clear(&mut self) {
        self.n = 0;
        self.next = 0;
        self.tables = 0;
    }
}

/// Rows of the last scan remembered by [`LastFound`] (its first ones; keys of
/// at most 8 bytes only).
const SCAN_MEMO: usize = 16;

/// A row a scan returned, by its short key.
#[derive(Clone, Copy)]
struct ScanHit {
    table: u32,
    /// The key as one word ([`short_key`]); with `len` it is the key.
    word: u64,
    len: u8,
    rec: *const Record,
    tid: u64,
}

/// See [`TxnSets::last`]. Under the single-version protocols either record
/// it names is in the read set with the TID given, so a write that finds
/// its key here needs neither the descent nor the read again; a record
/// replaced meanwhile by another transaction fails that read's validation
/// at commit. ERMIA remembers its reads and scanned rows with TID 0 (it has
/// no read set): its write checks the record's head again under the
/// first-updater-wins rule, so a version committed since the read is a
/// conflict there.
pub(crate) struct LastFound {
    table: u32,
    /// The last get's key: a short one (at most 8 bytes) as a word and its
    /// length, with no copy into `key`; a longer one in `key` (`len` is
    /// then `LONG_KEY`).
    word: u64,
    len: u8,
    key: Vec<u8>,
    rec: *const Record,
    /// TID word the `get` observed (it is in the read set).
    tid: u64,
    scanned: [ScanHit; SCAN_MEMO],
    n_scanned: usize,
}

/// `LastFound::len` of a key longer than 8 bytes.
const LONG_KEY: u8 = u8::MAX;

impl Default for LastFound {
    fn default() -> Self {
        LastFound {
            table: u32::MAX,
            word: 0,
            len: 0,
            key: Vec::new(),
            rec: std::ptr::null(),
            tid: 0,
            scanned: [ScanHit {
                table: u32::MAX,
                word: 0,
                len: 0,
                rec: std::ptr::null(),
                tid: 0,
            }; SCAN_MEMO],
            n_scanned: 0,
        }
    }
}

/// A key of at most 8 bytes as one word and its length; together they
/// determine the key (the word alone only among keys of one length). Two
/// overlapping loads instead of a copy of variable length (a `memcpy` call):
/// bytes 0..4 and len-4..len for 4 to 8 bytes, bytes 0, len/2 and len-1
/// below 4.
#[inline(always)]
fn short_key(key: &[u8]) -> Option<(u64, u8)> {
    let n = key.len();
    let word = match n {
        0 => 0,
        1..=3 => key[0] as u64 | (key[n / 2] as u64) << 8 | (key[n - 1] as u64) << 16,
        4..=8 => {
            let lo = u32::from_ne_bytes(key[..4].try_into().expect("4 bytes"));
            let hi = u32::from_ne_bytes(key[n - 4..].try_into().expect("4 bytes"));
            lo as u64 | (hi as u64) << 32
        }
        _ => return None,
    };
    Some((word, n as u8))
}

impl LastFound {
    #[inline]
    pub(crate) fn set(&mut self, table: TableId, key: &[u8], rec: *const Record, tid: u64) {
        self.table = table.0;
        match short_key(key) {
            Some((word, len)) => (self.word, self.len) = (word, len),
            None => {
                self.len = LONG_KEY;
                self.key.clear();
                self.key.extend_from_slice(key);
            }
        }
        self.rec = rec;
        self.tid = tid;
    }

    /// The record and observed TID if the last `get`, or a row of the last
    /// scan, was `key` in `table`.
    #[inline]
    pub fn matches(&self, table: TableId, key: &[u8]) -> Option<(*const Record, u64)> {
        if self.table == table.0 {
            let same = match short_key(key) {
                Some((word, len)) => self.word == word && self.len == len,
                None => self.len == LONG_KEY && self.key == key,
            };
            if same {
                return Some((self.rec, self.tid));
            }
        }
        if self.n_scanned == 0 {
            return None;
        }
        self.scanned_match(table, key)
    }

    #[inline(never)]
    fn scanned_match(&self, table: TableId, key: &[u8]) -> Option<(*const Record, u64)> {
        let (word, len) = short_key(key)?;
        self.scanned[..self.n_scanned]
            .iter()
            .find(|h| h.word == word && h.len == len && h.table == table.0)
            .map(|h| (h.rec, h.tid))
    }

    /// A scan begins: forget the previous scan's rows.
    #[inline]
    pub fn scan_begins(&mut self) {
        self.n_scanned = 0;
    }

    /// The scan returned `key` (record `rec`, TID `tid` in the read set).
    #[inline]
    pub(crate) fn scanned(&mut self, table: TableId, key: &[u8], rec: *const Record, tid: u64) {
        if self.n_scanned < SCAN_MEMO {
            if let Some((word, len)) = short_key(key) {
                self.scanned[self.n_scanned] = ScanHit {
                    table: table.0,
                    word,
                    len,
                    rec,
                    tid,
                };
                self.n_scanned += 1;
            }
        }
    }

    #[inline]
    pub fn forget(&mut self) {
        self.table = u32::MAX;
        self.n_scanned = 0;
    }
}

#[cfg(test)]
mod short_key_tests {
    use super::short_key;

    /// Every key of up to 8 bytes over a small alphabet maps to a distinct
    /// (word, length) pair; longer keys map to none.
    #[test]
    fn short_keys_are_told_apart() {
        let mut seen = std::collections::HashMap::new();
        for n in 0..=8usize {
            // All keys of length n over {0, 1, 0xFF} for n <= 5, and a
            // sample of longer ones (every byte position varied).
            let count = 3usize.pow(n.min(5) as u32);
            for mut x in 0..count {
                let mut k = vec![7u8; n];
                for b in k.iter_mut().take(5) {
                    *b = [0, 1, 0xFF][x % 3];
                    x /= 3;
                }
                let id = short_key(&k).expect("short");
                if let Some(other) = seen.insert(id, k.clone()) {
                    assert_eq!(other, k, "two keys, one word");
                }
            }
            for i in 0..n {
                let mut k = vec![9u8; n];
                k[i] = 10;
                let id = short_key(&k).unwrap();
                if let Some(other) = seen.insert(id, k.clone()) {
                    assert_eq!(other, k, "two keys, one word");
                }
            }
        }
        assert!(short_key(&[0; 9]).is_none());
    }
}

// SAFETY: the raw record pointers are only dereferenced by the owning worker
// while it is pinned.
unsafe impl Send for TxnSets {}

impl TxnSets {
    pub fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.nodes.clear();
        self.wbuf.clear();
        self.rbuf.clear();
        self.windex.clear();
        self.last.forget();
        self.hint.clear();
        self.prefetched.clear();
        self.rescans.clear();
    }

    /// Sort the write set by record address (the global lock order of
    /// Silo's commit, section 4.4). The entries are wide (48 bytes), and an
    /// insertion or quick sort moves each of them many times; so the sort
    /// runs over one word per entry instead, the address above the entry's
    /// position (user-space addresses fit in 48 bits), and then the entries
    /// are moved once each, into their places. A write set of at most 16
    /// or more than 65,536 entries, or an address above 48 bits, sorts the
    /// entries directly. The write index is not updated: it serves the body of the
    /// transaction, and commit only binary-searches the sorted set.
    pub fn sort_writes(&mut self) {
        const POS_BITS: u32 = 16;
        let n = self.writes.len();
        // Short write sets (YCSB's five) insertion-sort the entries faster
        // than the detour through keys costs.
        let direct = n <= 16
            || n > 1 << POS_BITS
            || self.writes.iter().fold(0u64, |acc, w| acc | w.rec as u64) >> (64 - POS_BITS) != 0;
        if direct {
            self.writes.sort_unstable_by_key(|w| w.rec as usize);
            return;
        }
        self.order.clear();
        self.order.extend(
            self.writes
                .iter()
                .enumerate()
                .map(|(i, w)| (w.rec as u64) << POS_BITS | i as u64),
        );
        self.order.sort_unstable();
        self.sorted.clear();
        let writes = &self.writes;
        self.sorted.extend(
            self.order
                .iter()
                .map(|&k| writes[(k & ((1 << POS_BITS) - 1)) as usize]),
        );
        std::mem::swap(&mut self.writes, &mut self.sorted);
    }

    /// Index of the write-set entry for `rec`, if any.
    #[inline]
    pub fn find_write(
        writes: &[WriteEntry],
        windex: &WriteIndex,
        rec: *const Record,
    ) -> Option<usize> {
        let (word, bit) = WriteIndex::bit(rec);
        if windex.filter[word] & bit == 0 {
            return None;
        }
        if writes.len() >= WINDEX_MIN {
            return windex.map.get(&(rec as usize)).copied();
        }
        writes.iter().position(|w| w.rec == rec)
    }

    #[inline]
    pub fn push_write(&mut self, w: WriteEntry) {
        let i = self.writes.len();
        let (word, bit) = WriteIndex::bit(w.rec);
        self.windex.filter[word] |= bit;
        self.writes.push(w);
        if self.writes.len() == WINDEX_MIN {
            for (j, w) in self.writes.iter().enumerate() {
                self.windex.map.insert(w.rec as usize, j);
            }
        } else if self.writes.len() > WINDEX_MIN {
            self.windex.map.insert(w.rec as usize, i);
        }
    }

    /// Append bytes to `wbuf`, returning (offset, len).
    #[inline]
    pub fn stash(&mut self, bytes: &[u8]) -> (u32, u32) {
        let off = self.wbuf.len();
        self.wbuf.extend_from_slice(bytes);
        (off as u32, bytes.len() as u32)
    }

    #[inline]
    pub fn stashed(&self, r: (u32, u32)) -> &[u8] {
        &self.wbuf[r.0 as usize..(r.0 + r.1) as usize]
    }

    /// Stash a new [`PatchList`] for a row of `row_len` bytes with one
    /// segment (the caller checked that it fits).
    pub fn stash_patch(&mut self, row_len: usize, at: usize, bytes: &[u8]) -> (u32, u32) {
        let off = self.wbuf.len();
        let mut head = [0u8; 12];
        head[..4].copy_from_slice(&(row_len as u32).to_le_bytes());
        head[4..8].copy_from_slice(&(at as u32).to_le_bytes());
        head[8..].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.wbuf.reserve(12 + bytes.len());
        self.wbuf.extend_from_slice(&head);
        self.wbuf.extend_from_slice(bytes);
        (off as u32, (self.wbuf.len() - off) as u32)
    }

    /// Add a segment to write-set entry `i`'s patch list (moving the list
    /// to the end of `wbuf` first unless it is there already).
    pub fn extend_patch(&mut self, i: usize, at: usize, bytes: &[u8]) -> TxResult<()> {
        let (off, len) = self.writes[i].val;
        check_patch(
            PatchList(self.stashed((off, len))).row_len(),
            at,
            bytes.len(),
        )?;
        let off = if (off + len) as usize == self.wbuf.len() {
            off as usize
        } else {
            let new = self.wbuf.len();
            self.wbuf
                .extend_from_within(off as usize..(off + len) as usize);
            new
        };
        self.push_segment(at, bytes);
        self.writes[i].val = (off as u32, (self.wbuf.len() - off) as u32);
        Ok(())
    }

    fn push_segment(&mut self, at: usize, bytes: &[u8]) {
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&(at as u32).to_le_bytes());
        head[4..].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.wbuf.reserve(8 + bytes.len());
        self.wbuf.extend_from_slice(&head);
        self.wbuf.extend_from_slice(bytes);
    }
}

/// Unlink a deleted record from its index if it is still the deletion with
/// TID `tid`, and retire it. The lock keeps a concurrent re-insert (which
/// reuses the absent record) out; clearing `LATEST` makes anyone still holding
/// the record retry through the index.
pub(crate) fn unlink(t: &Table, g: &Guard<'_>, key: &[u8], rec: *const Record, tid: u64) {
    // SAFETY: the record is still linked (or at least not yet retired: only
    // the holder of this pending entry retires it), and we are pinned.
    let r = unsafe { &*rec };
    let cur = r.lock();
    if cur & !LOCK == tid && cur & ABSENT != 0 {
        let removed = t.index.remove(key, rec as u64, g);
        if !removed {
            // Not linked under this key (cannot happen while LATEST is set);
            // leave the record as it is rather than strand it.
            r.unlock();
            return;
        }
        r.unlock_with((cur & !LOCK) & !LATEST);
        {
            // SAFETY: unlinked from the index just now; nobody else retires it
            // (re-inserts reuse it only while LATEST is set).
            unsafe { g.retire(rec as *mut u8, Record::free) };
        }
    } else {
        r.unlock();
    }
}

/// The per-worker state of the single-version protocols (Silo, no-CC).
#[derive(Default)]
pub(crate) struct SvLocal {
    pub sets: TxnSets,
    /// ROCC's predicates, ranges and writer entries (empty under the
    /// other single-version protocols).
    pub ranges: rocc::RoccLocal,
    /// The last TID this worker chose (Silo 4.2).
    pub last_tid: u64,
    /// Deleted records waiting until no snapshot can see them.
    pub pending_unlinks: std::collections::VecDeque<PendingUnlink>,
}

/// How many times an operation re-walks the index after meeting a record
/// that was unlinked under it, before giving up with a `Stale` abort.
pub(crate) const STALE_RETRIES: usize = 16;

/// The most bytes of a value that [`Prefetched::fill`] prefetches per
/// record (TPC-C's longest rows are about 660 bytes).
pub(crate) const PREFETCH_MAX: usize = 1024;

/// After our own insert into `leaf` moved its version from `before` to
/// `after`, update the node-set entries that saw `before` (the change is ours,
/// not a phantom). A split cannot be accounted for; such entries will fail
/// validation, as in Silo.
pub(crate) fn own_insert_fixup(sets: &mut TxnSets, ins: &Insert) {
    if let Insert::Inserted {
        leaf,
        before,
        after,
        split: false,
    } = *ins
    {
        for n in sets.nodes.iter_mut() {
            if n.leaf == leaf && n.version == before {
                n.version = after;
            }
        }
    }
}

/// Remove an absent record that no transaction ever committed into, and
/// retire it.
pub(crate) fn remove_if_uncommitted(t: &Table, key: &[u8], rec: *const Record, g: &Guard<'_>) {
    // SAFETY: inserted by this worker; it is retired only here or by an
    // unlink after a commit into it, and we are pinned.
    let r = unsafe { &*rec };
    let cur = r.lock();
    if cur & TID_MASK == 0 && cur & LATEST != 0 && t.index.remove(key, rec as u64, g) {
        r.unlock_with(ABSENT);
        // SAFETY: unlinked above and marked not-latest.
        unsafe { g.retire(rec as *mut u8, Record::free) };
    } else {
        r.unlock();
    }
}

/// One step of a spin wait (the engine's one helper, `crate::backoff`).
pub(crate) use crate::backoff::snooze as backoff_spin;

/// Between transactions: unlink deleted records that no snapshot can see any
/// more (only pending when snapshots are on).
/// A scan of single-version records that keeps no node set (snapshot
/// transactions, no concurrency control): `read` reads each record's value
/// into `buf` (false: nothing visible, skip it), and `f` gets the values,
/// up to `opts.limit` of them. Returns how many `f` got.
pub(crate) fn sv_scan<P: CcProtocol<Rec = Record>, F>(
    buf: &mut Vec<u8>,
    recs: Records<'_, P>,
    table: &Table,
    range: (Bound<&[u8]>, Bound<&[u8]>),
    opts: ScanOptions,
    mut read: impl FnMut(&Record, &mut Vec<u8>) -> Option<usize>,
    mut f: F,
) -> usize
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let limit = opts.limit.unwrap_or(usize::MAX);
    let mut count = 0;
    recs.scan(
        table,
        range,
        opts.reverse,
        crate::index::Unobserved,
        |k, rec: &Record| {
            buf.clear();
            let Some(skip) = read(rec, buf) else {
                return true;
            };
            count += 1;
            f(k, &buf[skip..]) && count < limit
        },
    );
    count
}

pub(crate) fn sv_maintain(
    db: &Engine,
    core: &mut WorkerCore,
    orphans: &OrphanUnlinks,
    st: &mut SvLocal,
    g: &Guard<'_>,
) {
    if st.pending_unlinks.is_empty() {
        if db.opts.snapshots {
            if let Some(mut o) = orphans.0.try_lock() {
                st.pending_unlinks.extend(o.drain(..));
            }
        }
        return;
    }
    let min = db.epochs.snapshot_min();
    while let Some(p) = st.pending_unlinks.front() {
        if epoch_of(p.tid) >= min {
            break;
        }
        let p: PendingUnlink = st.pending_unlinks.pop_front().expect("front");
        let i = p.table.0 as usize;
        if i >= core.tables.len() {
            core.tables = db.tables.read().clone();
        }
        unlink(&core.tables[i], g, &p.key, p.rec, p.tid);
    }
}

/// A dropped worker's deleted records go to the database's orphans.
pub(crate) fn sv_retire(orphans: &OrphanUnlinks, st: &mut SvLocal) {
    orphans.adopt(&mut st.pending_unlinks);
}

impl OrphanUnlinks {
    /// Take over a dropped worker's pending unlinks.
    pub(crate) fn adopt(&self, pending: &mut std::collections::VecDeque<PendingUnlink>) {
        if !pending.is_empty() {
            self.0.lock().extend(pending.drain(..));
        }
    }
}

/// A bound's key (`None`: unbounded).
fn bound_key(b: Bound<&[u8]>) -> Option<&[u8]> {
    match b {
        Bound::Unbounded => None,
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
    }
}

/// The tighter of two lower bounds of a key range (a scan's bound and a
/// logical range's start, for the range-based protocols).
pub(crate) fn max_lo<'a>(a: Bound<&'a [u8]>, b: Bound<&'a [u8]>) -> Bound<&'a [u8]> {
    match (bound_key(a), bound_key(b)) {
        (None, _) => b,
        (_, None) => a,
        (Some(x), Some(y)) if x > y => a,
        (Some(x), Some(y)) if x < y => b,
        // Equal keys: the excluded one is the tighter.
        _ => match a {
            Bound::Excluded(_) => a,
            _ => b,
        },
    }
}

/// The tighter of two upper bounds of a key range.
pub(crate) fn min_hi<'a>(a: Bound<&'a [u8]>, b: Bound<&'a [u8]>) -> Bound<&'a [u8]> {
    match (bound_key(a), bound_key(b)) {
        (None, _) => b,
        (_, None) => a,
        (Some(x), Some(y)) if x < y => a,
        (Some(x), Some(y)) if x > y => b,
        _ => match a {
            Bound::Excluded(_) => a,
            _ => b,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names and aliases parse; an unknown name is the public
    /// `Error::InvalidArgument` listing every protocol (the API before the
    /// seam, kept).
    #[test]
    fn protocol_names_parse_and_errors_list_them() {
        for p in Protocol::ALL {
            assert_eq!(p.name().parse::<Protocol>().unwrap(), p);
        }
        assert_eq!("ERMIA".parse::<Protocol>().unwrap(), Protocol::Ssn);
        assert_eq!("ss2pl".parse::<Protocol>().unwrap(), Protocol::TwoPlNoWait);
        match "bogus".parse::<Protocol>() {
            Err(Error::InvalidArgument(m)) => {
                for p in Protocol::ALL {
                    assert!(m.contains(p.name()), "{m}");
                }
            }
            other => panic!("{other:?}"),
        }
    }
}

#[cfg(test)]
mod sort_writes_tests {
    use super::{TxnSets, WriteEntry, WriteKind};
    use crate::catalog::TableId;
    use crate::storage::Record;

    /// Both paths of `sort_writes` (entries sorted directly, and through
    /// keys) leave every entry, with its own fields, in address order.
    #[test]
    fn sorts_by_address_and_keeps_each_entry_whole() {
        for n in [0usize, 1, 2, 5, 16, 17, 23, 130] {
            let mut sets = TxnSets::default();
            // Distinct fake addresses in scrambled order (never dereferenced).
            for i in 0..n {
                let addr = 0x1000 + ((i * 7919) % 1031) * 64;
                let mut w = WriteEntry::new(
                    addr as *const Record,
                    TableId(i as u32),
                    WriteKind::Put,
                    (i as u32, 1),
                );
                w.observed = addr as u64 ^ 0xABCD;
                sets.writes.push(w);
            }
            sets.sort_writes();
            assert_eq!(sets.writes.len(), n);
            for pair in sets.writes.windows(2) {
                assert!(pair[0].rec < pair[1].rec, "n = {n}: not sorted");
            }
            let mut seen = vec![false; n];
            for w in &sets.writes {
                let i = w.table.0 as usize;
                assert!(!seen[i]);
                seen[i] = true;
                assert_eq!(w.val, (i as u32, 1));
                assert_eq!(w.observed, w.rec as u64 ^ 0xABCD);
            }
        }
    }
}

//! BOHM (Faleiro and Abadi, VLDB 2015; Faleiro's thesis, chapter 5;
//! digest section 3 and checklist 6.2): serializable multi-version
//! concurrency control in which reads never block or abort writes and
//! never write to shared memory.
//!
//! The pipeline, on the deterministic substrate (`det`):
//!
//! 1. **Sequencer** (`det::Sequencer`): one thread; a request's timestamp is
//!    its position in the input log; batches.
//! 2. **Concurrency-control stage**: `cc_threads` threads, each owning the
//!    keys with `hash(table, key) % cc_threads` equal to its number. Every
//!    CC thread walks every transaction of a batch in timestamp order and,
//!    for each declared write key it owns, inserts a **placeholder
//!    version** `{begin = ts, end = ∞, txn = T, data = unfilled, prev =
//!    the latest version}` and sets the previous version's `end = ts`. The
//!    latest-version pointer of a record lives in the CC thread's own map
//!    (a record is always handled by the same CC thread, so nothing is
//!    shared between CC threads); the record head that readers start from
//!    is written by that thread alone. A key no version has yet is put in
//!    the ordered index by its owner, before any transaction of the batch
//!    executes. One barrier per batch: the last CC thread to finish it
//!    hands it to the execution stage, while the CC stage goes on with the
//!    next batch.
//! 3. **Execution stage**: `exec_threads` threads; thread `i` is
//!    responsible for transactions `i, i + n, ...` of a batch. A thread
//!    claims a transaction by CAS (Unprocessed -> Executing) and runs its
//!    body. A read takes the version with `begin < ts <= end` (see
//!    [`visible`]); if that version is still unfilled, the reader runs its
//!    producer itself (recursively, Listing 5.1), or, if another thread is
//!    running it, waits for it. Writes go to the transaction's own buffer
//!    and fill its placeholders when it completes: execution writes only
//!    the data (and its state word), never the chain or the index.
//! 4. **Garbage collection** by batch low watermark: each exec thread
//!    publishes the last batch it finished; versions superseded by a
//!    version of a batch at or below the minimum are unreachable for every
//!    later reader, and the owning CC thread cuts them off (memory is freed
//!    through epochs: a reader may still be walking past them).
//!
//! Semantics the thesis leaves open, decided here:
//! - **Logic abort** (and an error): every placeholder of the transaction
//!   becomes `Skipped`; readers continue down the chain. A placeholder of a
//!   committed transaction that did not write its key (a conditional write,
//!   an `insert` of a key that exists) is `Skipped` too.
//! - **Delete** fills the placeholder with a tombstone; **insert** of a key
//!   whose visible version is a value returns `false`.
//! - **Range scans** see, for every key of the range in the index, the
//!   version visible at the scan's timestamp; keys inserted by later
//!   transactions are in the index but show nothing visible, and every key
//!   an earlier transaction inserted is in the index before the scan's
//!   batch executes (the CC stage finishes first): no phantoms, without
//!   range locks or validation.
//! - Declared writes are exact keys (a placeholder needs its key), or
//!   **write ranges for inserts of new keys** whose keys are known only at
//!   execution (TPC-C NewOrder's order id comes from its district). The
//!   range is registered per table until its batch finishes; a reader of
//!   an overlapping key or range at a later timestamp first runs (or waits
//!   for) the range's writer, so the insert is in the index and its chain
//!   before the read (no phantom). At commit the insert becomes a version
//!   at the writer's timestamp, in a new record or linked below the
//!   placeholders of later transactions the CC stage has put there. Reads
//!   of a table that ever had a write range walk from the record's head
//!   (a range insert may sit above a read-set annotation). Only new keys:
//!   an update or delete of an existing key inside a range is an error
//!   (its chain has no placeholder for the writer). A transaction's own
//!   range inserts are visible to its point reads, not to its scans.
//! - A request that declares nothing, or needs a reconnaissance, gets an
//!   `InvalidArgument` outcome (not yet supported).
//! - A write to a key the request did not declare is an error (the
//!   transaction aborts with `InvalidArgument` naming the key).

use std::any::Any;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ops::{Bound, Range};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use crate::catalog::TableId;
use crate::det::input::InputLog;
use crate::det::sequencer::{Batch, BatchRelease};
use crate::det::{
    DynProcedure, Outcome, Procedure, Procedures, Receipt, Sequencer, SequencerConfig,
};
use crate::epoch::{Epochs, Guard, LocalEpoch, Ticker};
use crate::error::{ConflictReason, Error, TxError, TxResult};
use crate::index::{BTree, Insert, Lookup, Unobserved};
use crate::log::segment;
use crate::request::{Access, KeySet};
use crate::txn::{ScanOptions, Txn, TxnOps};

mod lazy;
mod pwv;
#[cfg(test)]
mod tests;
mod wordmap;

use wordmap::WordMap;

/// A transaction's outcome, its output boxed.
type BoxedOutcome = Result<Outcome<Box<dyn Any + Send>>, Error>;
/// Keys and values of a table.
type Rows = Vec<(Vec<u8>, Vec<u8>)>;
/// What a CC thread knows of a record it owns: the record, its newest
/// version (BOHM), and, under `2pl-ordered`, the record's lock sequence:
/// `n` accesses handed out so far and `w`, the number handed out up to and
/// including the last write.
#[derive(Clone, Copy)]
struct Latest {
    rec: *const BRecord,
    v: *mut Version,
    n: u64,
    w: u64,
}

impl Latest {
    /// Nothing known (an empty slot's filler).
    const NONE: Latest = Latest {
        rec: ptr::null(),
        v: ptr::null_mut(),
        n: 0,
        w: 0,
    };
}

/// A CC thread's latest-version map for one table: record and newest
/// version per key. Keys of up to 8 bytes (the benchmarks' integer keys)
/// are kept as a word, compared and hashed as one (no byte comparison, no
/// allocation, one lookup for a hit); longer keys by their bytes.
#[derive(Default)]
struct CcMap {
    /// Keys of exactly 8 bytes.
    w8: WordMap,
    /// Keys of 0 to 7 bytes: the bytes, and the length in the top byte.
    short: WordMap,
    /// Longer keys.
    long: HashMap<Box<[u8]>, Latest, KeyHash>,
    /// The entry of a record just created and not kept in the map (see
    /// [`entry`]).
    scratch: Option<Latest>,
}

impl CcMap {
    /// A hint for where a lookup of `key` will probe (long keys: none).
    fn prefetch(&self, key: &[u8]) {
        match map_word(key) {
            Some((true, w)) => self.w8.prefetch(w),
            Some((false, w)) => self.short.prefetch(w),
            None => {}
        }
    }
}

/// A CC thread's maps, one per table.
type LatestMap = Vec<CcMap>;

/// A fast hash for the CC threads' key maps (FxHash's scheme: rotate, xor
/// a word, multiply), instead of the default SipHash: keys are not chosen
/// by an adversary here, and the map is on the CC stage's hot path.
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    /// FxHash's multiply carries a bit of the input only upwards, so the
    /// low bits of the state depend only on a key's first bytes (a key's
    /// big-endian prefix: a table, a warehouse). hashbrown takes the bucket
    /// from the low bits, and TPC-C's keys, which differ in their last
    /// bytes, all probed one run of buckets. A finalizer makes every bit
    /// depend on every input bit: MurmurHash3's 64-bit finalizer (two
    /// xor-shift-multiply rounds), two multiplications per lookup.
    #[inline]
    fn finish(&self) -> u64 {
        wordmap::mix(self.0)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
}

impl KeyHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

type KeyHash = std::hash::BuildHasherDefault<KeyHasher>;

/// Version states (the state word beside a version's data).
const PENDING: u8 = 0;
const VALUE: u8 = 1;
const TOMBSTONE: u8 = 2;
const SKIPPED: u8 = 3;

/// Transaction states (Listing 5.1).
const UNPROCESSED: u8 = 0;
const EXECUTING: u8 = 1;
const COMPLETE: u8 = 2;

/// A version (Fig. 5.3): Begin Timestamp, End Timestamp, Txn Pointer, Data,
/// Prev Pointer.
struct Version {
    /// The producer's timestamp.
    begin: u64,
    /// The next version's producer's timestamp (`u64::MAX`: none yet).
    /// Written by the owning CC thread.
    end: AtomicU64,
    /// The producer; dereferenced only while the state is `PENDING` (the
    /// batch that holds it is then alive: see `Exec::finish_batch`).
    producer: *const BTxn,
    /// `PENDING` until the producer completes, then `VALUE`, `TOMBSTONE`
    /// or `SKIPPED`.
    state: AtomicU8,
    /// The value (with `VALUE`), written once by the producer's executor
    /// before it publishes the state with a release store.
    data: UnsafeCell<Box<[u8]>>,
    /// The next older version. Written by the owning CC thread (at insert,
    /// and by GC to cut the chain).
    prev: AtomicPtr<Version>,
}

/// What the index points at: the head of a newest-first chain.
///
/// Under `2pl-ordered` the chain is one version, updated in place under the
/// record's lock, and `released` is the lock: the CC stage hands each
/// access to the record a ticket (see [`Latest`]) and an access holds the
/// lock once `released` reaches its ticket; completing it adds one.
struct BRecord {
    head: AtomicPtr<Version>,
    released: AtomicU64,
}

impl BRecord {
    fn new(head: *mut Version) -> *mut BRecord {
        Box::into_raw(Box::new(BRecord {
            head: AtomicPtr::new(head),
            released: AtomicU64::new(0),
        }))
    }
}

/// One declared key of a transaction: its table, its bytes (a range of
/// the transaction's key buffer), the CC thread that owns it, its first
/// word (a fast filter), and what the owning CC thread fills in.
struct Slot {
    table: TableId,
    at: u32,
    len: u32,
    owner: u16,
    /// Lazy: a write declared blind (`KeySet::blind_write`): the
    /// transaction never reads the key.
    blind: bool,
    word: u64,
    /// BOHM: a write's placeholder, or a read's annotation (§5.3.2: the
    /// record's latest version as of the owning CC thread's progress, which
    /// is the latest before `ts` since it handles transactions in
    /// timestamp order; null: no version before `ts`), so that a read
    /// starts there instead of walking the chain from its newest version.
    /// 2pl-ordered: the record's one version.
    ver: AtomicPtr<Version>,
    /// 2pl-ordered: the record, and the ticket the access waits for.
    rec: AtomicPtr<BRecord>,
    wait: AtomicU64,
}

/// A sequenced transaction inside its batch.
struct BTxn {
    ts: u64,
    state: AtomicU8,
    proc: UnsafeCell<Box<dyn DynProcedure>>,
    /// The declared keys' bytes, one buffer for all (few allocations per
    /// transaction: they are freed on another thread).
    keys: Box<[u8]>,
    /// The declared keys: `nw` exact write keys first (one placeholder
    /// each), then the read keys (exact keys, not also written), sorted by
    /// (table, key).
    slots: Box<[Slot]>,
    nw: usize,
    /// BOHM: declared write ranges (inserts of new keys whose keys are
    /// known only at execution, such as TPC-C's order ids): table, and
    /// `lo`, `hi` as ranges of `keys` (`hi` `None`: unbounded).
    wranges: Box<[WRange]>,
    /// 2pl-ordered only (empty under BOHM): the range-lock units this
    /// transaction locks (see [`UnitReg`]), `nxu` exclusive ones (its
    /// write ranges' units) first, then shared ones (registered units that
    /// prefix a key it declared or its own units). Their bytes are in
    /// `keys` too; they are locks only, never read or written.
    units: Box<[Slot]>,
    nxu: usize,
    /// 2pl-ordered only (empty under BOHM): the slots, then the units
    /// (numbered after the slots), in lexicographic (table, key) order, a
    /// unit before a key with its bytes: the order the locks are taken in.
    lorder: Box<[u32]>,
    /// Why the request cannot run under BOHM (decided at planning).
    unusable: Option<Error>,
    outcome: UnsafeCell<Option<BoxedOutcome>>,
    /// PWV only: the transaction's pieces.
    pwv: Option<Box<pwv::PTxn>>,
    /// Lazy only: the now-phase ended (`execute` runs the later phase).
    later: std::sync::atomic::AtomicBool,
    /// Lazy only: the stickies this transaction's reads depend on, found
    /// through the last-writer table when it was stickified (written by
    /// the stickification thread before the batch reaches the workers).
    deps: UnsafeCell<Vec<*mut Version>>,
    /// Lazy only: the declared read ranges (a later phase's scans must lie
    /// in one, or in a write range).
    rranges: Box<[WRange]>,
    /// Lazy only: this transaction's stickies that no blind write has
    /// overwritten yet (see `lazy::Stickifier::clobber`).
    live: std::sync::atomic::AtomicU32,
    /// Lazy only: some later phase may read one of its stickies (a
    /// declared reader, a range reader, a later batch): never skipped.
    pinned: std::sync::atomic::AtomicBool,
    /// Lazy only: the pending versions its own stickies overwrite without
    /// being blind (its later phase may read them: a read-modify-write),
    /// with their tables; they are needed only if this transaction is.
    rmw_prev: UnsafeCell<Vec<(TableId, *mut Version)>>,
    /// Lazy, partitioned stickification: a CC thread found one of its keys
    /// past the chain bound (the now-phase thread hands it off).
    hand: std::sync::atomic::AtomicBool,
    /// Lazy: an external read (no writes, no split) that a worker answers
    /// (see `lazy::deliver`), and whether its outcome went out.
    external: std::sync::atomic::AtomicBool,
    delivered: std::sync::atomic::AtomicBool,
}

/// A declared write range of a transaction.
struct WRange {
    table: TableId,
    lo: (u32, u32),
    hi: Option<(u32, u32)>,
}

impl BTxn {
    fn bytes(&self, (at, len): (u32, u32)) -> &[u8] {
        &self.keys[at as usize..(at + len) as usize]
    }

    /// Whether write range `r` overlaps `[lo, hi]`.
    fn range_overlaps(&self, r: &WRange, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        let (rlo, rhi) = (self.bytes(r.lo), r.hi.map(|h| self.bytes(h)));
        let below_hi = match hi {
            Bound::Included(h) => rlo <= h,
            Bound::Excluded(h) => rlo < h,
            Bound::Unbounded => true,
        };
        let above_lo = match (lo, rhi) {
            (_, None) | (Bound::Unbounded, _) => true,
            (Bound::Included(l), Some(rh)) => rh >= l,
            (Bound::Excluded(l), Some(rh)) => rh > l,
        };
        below_hi && above_lo
    }

    /// Whether `(t, key)` lies in one of the declared write ranges.
    fn in_wrange(&self, t: TableId, key: &[u8]) -> bool {
        self.wranges.iter().any(|r| {
            r.table == t && self.range_overlaps(r, Bound::Included(key), Bound::Included(key))
        })
    }

    /// Whether range `r` holds the whole scan range `[lo, hi]`.
    fn range_contains(&self, r: &WRange, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        let (rlo, rhi) = (self.bytes(r.lo), r.hi.map(|h| self.bytes(h)));
        let lo_ok = match lo {
            Bound::Included(k) | Bound::Excluded(k) => rlo <= k,
            Bound::Unbounded => rlo.is_empty(),
        };
        let hi_ok = match (hi, rhi) {
            (_, None) => true,
            (Bound::Unbounded, Some(_)) => false,
            (Bound::Included(k) | Bound::Excluded(k), Some(h)) => k <= h,
        };
        lo_ok && hi_ok
    }

    /// Lazy: whether it runs after its place in the stickification (a later
    /// phase, an external read): then it may read only what it declared.
    fn runs_late(&self) -> bool {
        self.later.load(Ordering::Relaxed) || self.external.load(Ordering::Relaxed)
    }

    /// Lazy: whether a declared range (read or write) of table `t` holds
    /// the scan range `[lo, hi]` (a key: `lo == hi`, included).
    fn declared_range(&self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        self.wranges
            .iter()
            .chain(self.rranges.iter())
            .any(|r| r.table == t && self.range_contains(r, lo, hi))
    }

    /// Lock `i` of `lorder`: a slot, or a unit (numbered after the slots).
    #[inline]
    fn lock_slot(&self, i: u32) -> &Slot {
        let i = i as usize;
        match self.slots.get(i) {
            Some(s) => s,
            None => &self.units[i - self.slots.len()],
        }
    }

    #[inline]
    fn key(&self, s: &Slot) -> &[u8] {
        &self.keys[s.at as usize..(s.at + s.len) as usize]
    }

    #[inline]
    fn writes(&self) -> &[Slot] {
        &self.slots[..self.nw]
    }

    #[inline]
    fn reads(&self) -> &[Slot] {
        &self.slots[self.nw..]
    }
}

// SAFETY: the cells are written under the protocol's rules: `proc` and
// `outcome` only by the one thread that won the CAS to `EXECUTING` (and
// `outcome` read only after `COMPLETE` is published, or by the batch's
// finisher once every transaction is complete); the rest is immutable or
// atomic.
unsafe impl Sync for BTxn {}
// SAFETY: as above; the raw producer pointers in versions point into
// batches kept alive as `Exec::finish_batch` explains.
unsafe impl Send for BTxn {}

/// A batch in the pipeline.
struct BatchCtx {
    txns: Box<[BTxn]>,
    release: Arc<BatchRelease>,
    /// BOHM: some transaction declared a write range (registered in
    /// `Shared::ranges` until the batch finishes).
    ranges: bool,
    /// 2pl-ordered: the batch registered a new range-lock unit, which the
    /// transactions of earlier batches did not lock: it executes only
    /// once this many batches (every earlier one since the engine
    /// started) have finished.
    drain: Option<u64>,
    /// CC threads still planning it (the per-batch barrier).
    cc_left: AtomicUsize,
    /// Exec threads still running their share.
    exec_left: AtomicUsize,
    /// PWV only: per partition, its pieces in the batch's order.
    parts: Box<[pwv::PartitionPieces]>,
    /// PWV only: some access is a group (a range's unit): the graph build
    /// collects the batch's groups first (a walk over every member, which
    /// a batch of exact keys does not need).
    groups: bool,
    /// Lazy only: the next transaction a draining worker takes, and how
    /// many from the start are complete (see `lazy`).
    lazy_next: AtomicUsize,
    lazy_done: AtomicUsize,
}

/// Which deterministic protocol the stages run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DetProtocol {
    /// BOHM: placeholders, multi-version reads, recursive producers.
    #[default]
    Bohm,
    /// The thesis's 2PL baseline (§5.4, "2PL"): one version per record,
    /// updated in place, under locks on the declared keys. The CC stage
    /// hands out the locks in timestamp order (the lock-table entries are
    /// made before execution, as the thesis preallocates them); an
    /// execution thread takes a transaction's locks in lexicographic key
    /// order, and a transaction whose next lock is held is set aside
    /// while the thread takes other work (the thesis's non-blocking thread
    /// model). Deadlock-free, since the oldest unfinished transaction
    /// can always take every lock, and deterministic, since each lock is
    /// granted in timestamp order. Same sequencer, batches and threads as
    /// BOHM: the comparison isolates multi-versioning.
    TwoPlOrdered,
    /// Piece-wise visibility (the thesis's chapter 6, `pwv`): transactions
    /// as DAGs of pieces, one executor per key partition, a piece's writes
    /// visible once it completes after its transaction's commit point. One
    /// version per record, as `2pl-ordered`. See the `pwv` module.
    Pwv,
    /// Lazy transactions (the thesis's chapter 4, `lazy`): one
    /// stickification thread runs each transaction's now-phase in log
    /// order and leaves stickies for the rest, which substantiation
    /// workers run when a reader needs them. BOHM's versions and
    /// placeholders are the stickies. See the `lazy` module.
    Lazy,
}

impl DetProtocol {
    /// The name `--cc` takes.
    pub fn name(self) -> &'static str {
        match self {
            DetProtocol::Bohm => "bohm",
            DetProtocol::TwoPlOrdered => "2pl-ordered",
            DetProtocol::Pwv => "pwv",
            DetProtocol::Lazy => "lazy",
        }
    }
}

/// How the stages are sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BohmConfig {
    /// Concurrency-control threads (key partitions).
    pub cc_threads: usize,
    /// Execution threads.
    pub exec_threads: usize,
    /// Batch cutting.
    pub sequencer: SequencerConfig,
    /// BOHM or its 2PL baseline.
    pub protocol: DetProtocol,
    /// BOHM's read-set annotation (§5.3.2; default on): the CC thread that
    /// owns a declared read's key writes the record's latest version as of
    /// the transaction's timestamp into the transaction, so that the read
    /// goes straight to it. Off, the CC stage handles writes only and a
    /// read looks its key up in the index and walks the chain from the
    /// newest version, as an undeclared read does: less work for the CC
    /// stage, more for the executors (on a 2-core machine, where the CC
    /// thread shares the cores with them, this can be the better split;
    /// see docs/BENCHMARKS.md). Ignored by 2pl-ordered, which locks its
    /// reads.
    pub read_annotation: bool,
    /// Lazy: the bound on a record's chain of unsubstantiated transactions
    /// (the thesis's "bound on the longest chain", §4.3.1): a transaction
    /// that touches a key touched by more than this many transactions
    /// since the key's chain was last handed off is handed to a
    /// substantiation worker at once (with everything it depends on).
    /// 1 substantiates every transaction at once (the thesis's lazy-1).
    pub chain_bound: u32,
    /// Lazy: how many stickified batches may wait for substantiation
    /// before the stickification thread waits for the workers (memory
    /// stays bounded under an overload; a burst shorter than this is
    /// absorbed whole). Default 4: GC frees nothing above the oldest
    /// incomplete batch, so every waiting batch holds the versions its
    /// substantiated transactions wrote; on YCSB 10-RMW with 1,000-byte
    /// values (two cores) 4 batches ran 1.5x faster than 64
    /// (docs/BENCHMARKS.md). A burst test raises it.
    pub lazy_backlog: usize,
}

impl BohmConfig {
    /// Check the values (the message names the knob).
    pub fn validate(&self) -> Result<(), Error> {
        if self.cc_threads == 0
            || self.cc_threads > 1024
            || self.exec_threads == 0
            || self.exec_threads > 1024
        {
            return Err(Error::InvalidArgument(format!(
                "{} needs 1 to 1024 CC threads and execution threads (got {} and {})",
                self.protocol.name(),
                self.cc_threads,
                self.exec_threads
            )));
        }
        if self.protocol == DetProtocol::Lazy && (self.chain_bound == 0 || self.lazy_backlog == 0) {
            return Err(Error::InvalidArgument(
                "lazy needs a chain bound and a backlog of at least 1".into(),
            ));
        }
        self.sequencer.validate()
    }
}

impl Default for BohmConfig {
    fn default() -> Self {
        BohmConfig {
            cc_threads: 1,
            exec_threads: 1,
            sequencer: SequencerConfig::default(),
            protocol: DetProtocol::Bohm,
            read_annotation: true,
            chain_bound: 100,
            lazy_backlog: 4,
        }
    }
}

/// What the deterministic engine's start replayed from the input log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Batches replayed.
    pub batches: u64,
    /// Requests that committed.
    pub committed: u64,
    /// Requests that did not (their logic aborted, or they failed: as
    /// when they first ran).
    pub not_committed: u64,
    /// Whether a torn tail (a batch never acknowledged) was cut.
    pub cut_torn_tail: bool,
    /// Requests a system failure expunged (`tessera.expunged`), replayed
    /// as no-ops that abort (counted in `not_committed` too).
    pub expunged: u64,
}

/// What the stages did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BohmStats {
    /// Placeholders inserted by the CC stage.
    pub placeholders: u64,
    /// Transactions executed by a thread other than the one responsible
    /// for them (recursive producer execution and stealing).
    pub recursive: u64,
    /// Versions cut off by GC (counted once no reader can reach them, when
    /// they are reused or freed).
    pub collected: u64,
    /// Placeholders that reused a collected version (and its value
    /// buffer) instead of allocating one (see `Recycler`).
    pub reused: u64,
    /// Executions abandoned because a read found its producer running on
    /// another thread (the transaction was set aside and run again later).
    pub set_aside: u64,
    /// Batches executed.
    pub batches: u64,
    /// Bytes written to the input log (after `shutdown`).
    pub input_bytes: u64,
    /// Nanoseconds the CC threads spent planning batches (all of them
    /// together; idle waits excluded): placeholders per busy second per
    /// thread is the CC stage's own throughput.
    pub cc_busy_ns: u64,
    /// Nanoseconds the execution threads spent on batches, waits for
    /// other threads' transactions included.
    pub exec_busy_ns: u64,
    /// Records the CC threads' latest maps hold (after their last batch).
    pub cc_map_entries: u64,
    /// Lazy: transactions whose now-phase ended, leaving stickies.
    pub lazy_deferred: u64,
    /// Lazy: transactions the chain bound handed to a worker.
    pub lazy_handed_off: u64,
    /// Lazy: later phases run by the workers (the rest ran inside a
    /// reader's evaluation or on the stickification thread: see
    /// `recursive`).
    pub lazy_substantiated: u64,
    /// Lazy: later phases that failed (a later phase cannot abort; its
    /// stickies read as skipped). Zero in a correct workload.
    pub lazy_later_errors: u64,
    /// Lazy: transactions never run because blind writes overwrote all
    /// their stickies unread (the thesis's avoided work, §4.4.3); counted
    /// as substantiated.
    pub lazy_clobbered: u64,
    /// Lazy: inserts whose uniqueness check found a sticky and answered
    /// "exists" without running its producer (non-substantiating reads).
    pub lazy_existence_checks: u64,
    /// Lazy: external reads (read-only requests with no now-phase) that a
    /// substantiation worker answered, off the stickification thread.
    pub lazy_external_reads: u64,
    /// Lazy: the most stickified batches waiting for substantiation.
    pub lazy_backlog_max: u64,
    /// Lazy: committed transactions whose later phase has not run yet (a
    /// benchmark counts a transaction once it is substantiated, as the
    /// thesis does: acknowledged commits minus the growth of this).
    pub lazy_pending: u64,
}

struct Shared {
    tables: Vec<BTree>,
    names: Vec<String>,
    epochs: Arc<Epochs>,
    cfg: BohmConfig,
    exec_tx: Mutex<Option<Vec<Sender<Arc<BatchCtx>>>>>,
    /// Per exec thread: the last timestamp of the last batch it finished
    /// (`u64::MAX`: none yet). The minimum is the low watermark: every
    /// transaction at or below it is complete.
    finished: Box<[AtomicU64]>,
    placeholders: AtomicU64,
    recursive: AtomicU64,
    /// Transactions set aside (abandoned and unclaimed) on a blocked read.
    set_aside: AtomicU64,
    collected: AtomicU64,
    reused: AtomicU64,
    batches: AtomicU64,
    cc_busy_ns: AtomicU64,
    exec_busy_ns: AtomicU64,
    /// Per CC thread: the entries of its latest maps.
    cc_map_entries: Box<[AtomicU64]>,
    /// A checkpoint's timestamp while it reads (`u64::MAX`: none): GC keeps
    /// every version visible at it (see [`Shared::watermark`]).
    gc_pin: AtomicU64,
    /// The last batch handed to the CC stage: its number, its last
    /// timestamp, and its release (whose durability a checkpoint waits for).
    cut: Mutex<Option<(u64, u64, Arc<BatchRelease>)>>,
    /// Per table: the write ranges of transactions whose batch has not
    /// finished, and whether the table ever had one (then reads walk from
    /// the record's head: a range insert may sit above a read-set
    /// annotation).
    ranges: Box<[RangeReg]>,
    /// Held (shared) while a batch is handed to the CC stage; a
    /// `2pl-ordered` checkpoint holds it exclusively to stop the feed (one
    /// version per record: no snapshot while later batches run).
    feed: parking_lot::RwLock<()>,
    /// 2pl-ordered: per table, the range-lock units registered so far
    /// (used by the planning thread only), and batches planned since the
    /// start (see [`BatchCtx::drain`]).
    units: Mutex<(Vec<UnitReg>, u64)>,
    /// 2pl-ordered: the lock-only records of the units (in no index),
    /// freed with the engine.
    unit_recs: Mutex<Vec<usize>>,
    /// Executed batches, with the epoch they finished in: freed by the
    /// planning thread (see [`free_spent`]) once no pinned reader can
    /// still reach their transactions.
    spent: Mutex<std::collections::VecDeque<(u64, Arc<BatchCtx>)>>,
    /// PWV: per table, how many leading bytes of a key choose its
    /// partition (0: the whole key); see [`Bohm::partition_prefix`].
    part_prefix: Vec<usize>,
    /// PWV: per partition, what other threads tell its executor has moved.
    wakes: Box<[Mutex<Vec<pwv::Wake>>]>,
    /// Lazy: the backlog and the hand-offs (see `lazy`).
    lazy: lazy::LazyShared,
    /// The sequencer's, once started: a stage thread that panics fails
    /// the pending batches through it.
    failer: std::sync::OnceLock<Arc<crate::det::sequencer::Failer>>,
    /// The input log's directory, once started with one: where a system
    /// failure expunges its request (see [`system_failure`]).
    input_dir: std::sync::OnceLock<std::path::PathBuf>,
    /// A system failure happened (§6.4.7): the state holds part of a
    /// transaction. Set once; the error is the one every caller gets.
    system_failure: std::sync::OnceLock<Error>,
    /// A stage thread died (a panic, a bug): the others stop waiting for
    /// what it would have done (PWV's executors), so a shutdown returns.
    stage_stopped: AtomicBool,
    /// Tests: the first CC thread (PWV: executor 0, at the first of its
    /// members at or past it) panics when it meets this timestamp.
    #[cfg(test)]
    panic_at_ts: AtomicU64,
}

/// 2pl-ordered's range locks (hierarchical locking with units named by the
/// ranges themselves). The thesis's 2PL runs on hash tables and has no
/// range locks; TPC-C's NewOrder declares write ranges (its order id comes
/// from its district), so a single-version 2PL needs them to keep a later
/// range insert away from earlier transactions and a later reader away
/// until the insert is in.
///
/// A write range `[lo, hi]` has a *unit*, the longest common prefix of `lo`
/// and `hi` (empty when unbounded above): every key of the range starts
/// with it, and two ranges whose units are not prefixes of one another do
/// not overlap. A write range locks its unit exclusively and every
/// registered unit that is a proper prefix of it shared; an exact key's
/// access (read or write) locks shared every registered unit that is a
/// prefix of the key. Unit locks are tickets in timestamp order like key
/// locks, on lock-only records; shared locks do not conflict with each
/// other, so exact-key accessors keep their parallelism, while a range
/// writer is ordered against every access under its unit.
#[derive(Default)]
struct UnitReg {
    set: std::collections::HashSet<Box<[u8]>>,
    /// The distinct lengths of the registered units, ascending.
    lens: Vec<usize>,
}

impl UnitReg {
    /// The registered units that prefix `key`, the shortest first (`key`
    /// itself included when `whole`).
    fn prefixes<'k>(&'k self, key: &'k [u8], whole: bool) -> impl Iterator<Item = &'k [u8]> {
        self.lens
            .iter()
            .take_while(move |&&l| l < key.len() || (whole && l == key.len()))
            .map(move |&l| &key[..l])
            .filter(|p| self.set.contains(*p))
    }
}

/// The unit of a write range `[lo, hi]` (see [`UnitReg`]).
fn range_unit<'k>(lo: &'k [u8], hi: Option<&[u8]>) -> &'k [u8] {
    let n = match hi {
        Some(h) => lo.iter().zip(h).take_while(|(a, b)| a == b).count(),
        None => 0,
    };
    &lo[..n]
}

/// The registered write ranges of one table, by range: each range's
/// transactions in timestamp order (a reader looks at the ranges that
/// overlap its keys, and there at the transactions older than itself).
#[derive(Default)]
struct RangeReg {
    /// Sticky: a write range was ever registered.
    ever: std::sync::atomic::AtomicBool,
    list: parking_lot::RwLock<RangeMap>,
}

/// One registered range: `[lo, hi]` (`hi` `None`: unbounded), the
/// transactions that declared it, and the reach of the ranges up to it.
struct RangeEntry {
    lo: Box<[u8]>,
    hi: Option<Box<[u8]>>,
    /// (timestamp, transaction), in timestamp order.
    txns: Vec<(u64, *const BTxn)>,
    /// How many of `txns` from the front are known complete (readers
    /// advance it, so that a district's hundredth NewOrder does not look
    /// at the ninety-nine before it again).
    done: AtomicUsize,
    /// The entry, at or before this one, whose `hi` reaches furthest (a
    /// prefix maximum): a reader walks back from the last range that
    /// starts at or below its key and stops where no earlier range can
    /// reach it, instead of comparing every registered range (NewOrder
    /// registers one range per customer in ORDER's customer index).
    reach: u32,
}

/// A table's registered ranges, sorted by `(lo, hi)`; rebuilt under the
/// write lock once per batch (register, unregister), read under the read
/// lock by every range-table read.
#[derive(Default)]
struct RangeMap {
    ranges: Vec<RangeEntry>,
}

/// A range to register: `(lo, hi, timestamp, transaction)`.
type NewRange = (Box<[u8]>, Option<Box<[u8]>>, u64, *const BTxn);

impl RangeMap {
    /// `a`'s high end is above `b`'s (`None` is unbounded).
    fn higher(a: &Option<Box<[u8]>>, b: &Option<Box<[u8]>>) -> bool {
        match (a, b) {
            (None, None) => false,
            (None, Some(_)) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => a > b,
        }
    }

    /// Recompute the prefix maxima after a change.
    fn settle(&mut self) {
        let mut best = 0u32;
        for i in 0..self.ranges.len() {
            if i == 0 || Self::higher(&self.ranges[i].hi, &self.ranges[best as usize].hi) {
                best = i as u32;
            }
            self.ranges[i].reach = best;
        }
    }

    /// Add `(lo, hi) -> (ts, txn)` entries, sorted by range and then by
    /// timestamp (a batch's are newer than every registered one).
    fn add(&mut self, mut new: Vec<NewRange>) {
        new.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
        let old = std::mem::take(&mut self.ranges);
        let mut merged: Vec<RangeEntry> = Vec::with_capacity(old.len() + new.len());
        let mut old = old.into_iter().peekable();
        let mut new = new.into_iter().peekable();
        loop {
            let take_old = match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(o), Some(n)) => (&o.lo, &o.hi) <= (&n.0, &n.1),
            };
            if take_old {
                merged.push(old.next().unwrap());
                continue;
            }
            let (lo, hi, ts, txn) = new.next().unwrap();
            match merged.last_mut() {
                Some(e) if e.lo == lo && e.hi == hi => e.txns.push((ts, txn)),
                _ => merged.push(RangeEntry {
                    lo,
                    hi,
                    txns: vec![(ts, txn)],
                    done: AtomicUsize::new(0),
                    reach: 0,
                }),
            }
        }
        self.ranges = merged;
        self.settle();
    }

    /// The entries that overlap `[lo, hi]`.
    fn overlapping<'a>(
        &'a self,
        lo: Bound<&'a [u8]>,
        hi: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = &'a RangeEntry> + 'a {
        // Ranges sorted by their low key: the ones at and after `end`
        // start above `hi`.
        let end = self.ranges.partition_point(|e| match hi {
            Bound::Included(h) => &e.lo[..] <= h,
            Bound::Excluded(h) => &e.lo[..] < h,
            Bound::Unbounded => true,
        });
        let ends_before = move |rhi: &Option<Box<[u8]>>| match (lo, rhi) {
            (_, None) | (Bound::Unbounded, _) => false,
            (Bound::Included(l), Some(rh)) => &rh[..] < l,
            (Bound::Excluded(l), Some(rh)) => &rh[..] <= l,
        };
        self.ranges[..end]
            .iter()
            .enumerate()
            .rev()
            .take_while(move |(_, e)| !ends_before(&self.ranges[e.reach as usize].hi))
            .filter(move |(_, e)| !ends_before(&e.hi))
            .map(|(_, e)| e)
    }
}

// SAFETY: the pointers are dereferenced only while the batch that holds
// them is registered (see `register_ranges` and `finish_batch`).
unsafe impl Send for RangeReg {}
// SAFETY: as above.
unsafe impl Sync for RangeReg {}

/// Register the batch's write ranges (before any of its transactions, or a
/// later one, can read).
fn register_ranges(sh: &Shared, ctx: &BatchCtx) {
    if !ctx.ranges {
        return;
    }
    let mut by_table: Vec<Vec<NewRange>> = (0..sh.ranges.len()).map(|_| Vec::new()).collect();
    for t in ctx.txns.iter() {
        for r in t.wranges.iter() {
            by_table[r.table.as_u32() as usize].push((
                t.bytes(r.lo).into(),
                r.hi.map(|h| t.bytes(h).into()),
                t.ts,
                t as *const BTxn,
            ));
        }
    }
    for (reg, new) in sh.ranges.iter().zip(by_table) {
        if !new.is_empty() {
            reg.ever.store(true, Ordering::Release);
            reg.list.write().add(new);
        }
    }
}

/// Unregister a finished batch's write ranges (before the batch is freed).
fn unregister_ranges(sh: &Shared, ctx: &BatchCtx) {
    if !ctx.ranges {
        return;
    }
    let (first, last) = (ctx.txns[0].ts, ctx.txns[ctx.txns.len() - 1].ts);
    for reg in sh.ranges.iter() {
        if reg.ever.load(Ordering::Acquire) {
            let mut l = reg.list.write();
            l.ranges.retain_mut(|e| {
                let before = e.txns.len();
                e.txns.retain(|&(ts, _)| ts < first || ts > last);
                if e.txns.len() != before {
                    *e.done.get_mut() = 0;
                }
                !e.txns.is_empty()
            });
            l.settle();
        }
    }
}

/// What [`Bohm::checkpoint`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct DetCheckpointInfo {
    /// The first batch it does not cover (replay starts there).
    pub next_batch: u64,
    /// The file.
    pub file: std::path::PathBuf,
    /// Live rows written.
    pub rows: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Seconds, waits included.
    pub seconds: f64,
    /// Input log segments deleted (covered by the checkpoint).
    pub segments_deleted: usize,
}

/// A BOHM database: tables on the ordered index, the sequencer and the two
/// stages. Requests are submitted ([`Bohm::submit`]); each outcome comes
/// back once its batch has executed. Applications reach it through
/// `Database` (a database opened with `Protocol::Bohm` or
/// `Protocol::TwoPlOrdered` holds one); tests use it directly.
pub struct Bohm {
    sh: Arc<Shared>,
    seq: Option<Sequencer>,
    /// The sequencer's batch latencies (kept after shutdown).
    latencies: Option<Arc<crate::det::sequencer::BatchLatencies>>,
    cc: Vec<JoinHandle<()>>,
    /// Lazy with several CC threads: the now-phase thread.
    stick: Vec<JoinHandle<()>>,
    exec: Vec<JoinHandle<()>>,
    ticker: Option<Ticker>,
    /// The input log's directory and the procedures it may name.
    input: Option<(std::path::PathBuf, Procedures)>,
    /// What `start` replayed from the input log.
    replayed: ReplayStats,
    /// Bytes the sequencer wrote to the input log.
    input_bytes: u64,
    /// The epoch slot of loads, dumps and teardown (behind a lock so that
    /// clients on several threads can share the engine to submit).
    loader: Mutex<Option<LocalEpoch>>,
    /// Rows loaded before the start.
    loaded: AtomicU64,
    /// The checkpoint `start` recovered from (with an input log).
    start_checkpoint: Option<DetCheckpointInfo>,
    /// The input log's segment size.
    segment_bytes: u64,
    /// The data directory's `LOCK`, held while the engine lives (a second
    /// engine or `tessera recover` on a directory in use is refused).
    dir_lock: Option<std::fs::File>,
    /// One checkpoint at a time (they share GC's pin and file names).
    ckpt_lock: Mutex<()>,
    /// The first timestamp once started (the state before it is the
    /// loaded or recovered one); `None` before the start.
    start_ts: Option<u64>,
    /// Stage threads that panicked (a bug): their batches' placeholders
    /// may be unfilled, so the state is not read.
    panicked: usize,
}

fn partition(t: TableId, key: &[u8], m: usize) -> u16 {
    // MurmurHash3's finalizer over the key's 8-byte words, seeded with the
    // table id and the length, then scaled to `0..m` by a multiply and a
    // shift of its high half (Lemire's range reduction). FNV-1a a byte at
    // a time and a division took about a tenth of PWV's planning (20 keys
    // per YCSB transaction); this is two multiplies per word.
    let mut h = (u64::from(t.as_u32()) << 32) | key.len() as u64;
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        h = wordmap::mix(h ^ u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    let rest = words.remainder();
    if !rest.is_empty() || key.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = wordmap::mix(h ^ u64::from_le_bytes(b));
    }
    (((h >> 32) * m as u64) >> 32) as u16
}

impl Bohm {
    /// Tables `names` (ids 0, 1, ... in order), empty; the threads start
    /// with [`Bohm::start`], after the load.
    pub fn new(names: &[&str], cfg: BohmConfig) -> Result<Bohm, Error> {
        cfg.validate()?;
        let epochs = Epochs::new(cfg.cc_threads + cfg.exec_threads + 2, 1);
        let loader = epochs.register_internal();
        Ok(Bohm {
            sh: Arc::new(Shared {
                tables: names.iter().map(|_| BTree::new()).collect(),
                names: names.iter().map(|s| s.to_string()).collect(),
                epochs,
                cfg,
                exec_tx: Mutex::new(None),
                finished: (0..cfg.exec_threads)
                    .map(|_| AtomicU64::new(u64::MAX))
                    .collect(),
                placeholders: AtomicU64::new(0),
                recursive: AtomicU64::new(0),
                set_aside: AtomicU64::new(0),
                collected: AtomicU64::new(0),
                reused: AtomicU64::new(0),
                batches: AtomicU64::new(0),
                cc_busy_ns: AtomicU64::new(0),
                exec_busy_ns: AtomicU64::new(0),
                cc_map_entries: (0..cfg.cc_threads.max(cfg.exec_threads))
                    .map(|_| AtomicU64::new(0))
                    .collect(),
                gc_pin: AtomicU64::new(u64::MAX),
                ranges: names.iter().map(|_| RangeReg::default()).collect(),
                cut: Mutex::new(None),
                feed: parking_lot::RwLock::new(()),
                units: Mutex::new((Vec::new(), 0)),
                unit_recs: Mutex::new(Vec::new()),
                spent: Mutex::new(Default::default()),
                part_prefix: names.iter().map(|_| 0).collect(),
                wakes: (0..cfg.exec_threads)
                    .map(|_| Mutex::new(Vec::new()))
                    .collect(),
                lazy: lazy::LazyShared::default(),
                failer: std::sync::OnceLock::new(),
                input_dir: std::sync::OnceLock::new(),
                system_failure: std::sync::OnceLock::new(),
                stage_stopped: AtomicBool::new(false),
                #[cfg(test)]
                panic_at_ts: AtomicU64::new(u64::MAX),
            }),
            seq: None,
            latencies: None,
            cc: Vec::new(),
            stick: Vec::new(),
            exec: Vec::new(),
            ticker: None,
            input: None,
            replayed: ReplayStats::default(),
            input_bytes: 0,
            loader: Mutex::new(loader),
            loaded: AtomicU64::new(0),
            start_checkpoint: None,
            segment_bytes: 64 << 20,
            dir_lock: None,
            ckpt_lock: Mutex::new(()),
            start_ts: None,
            panicked: 0,
        })
    }

    /// Add an empty table before the start (its id is the next one).
    /// Refused once started: the CC threads partition the tables they
    /// started with.
    pub fn add_table(&mut self, name: &str) -> Result<TableId, Error> {
        if self.start_ts.is_some() {
            return Err(Error::InvalidArgument(format!(
                "cannot create table {name}: a deterministic database's tables are fixed once \
                 it has started (at its first submission)"
            )));
        }
        if self.sh.names.iter().any(|n| n == name) {
            return Err(Error::TableExists(name.to_string()));
        }
        let sh = Arc::get_mut(&mut self.sh).ok_or_else(|| {
            Error::InvalidArgument(format!("cannot create table {name}: the engine has run"))
        })?;
        sh.tables.push(BTree::new());
        sh.names.push(name.to_string());
        sh.part_prefix.push(0);
        let mut ranges = std::mem::take(&mut sh.ranges).into_vec();
        ranges.push(RangeReg::default());
        sh.ranges = ranges.into_boxed_slice();
        Ok(TableId::from_u32(sh.names.len() as u32 - 1))
    }

    /// The tables' names, by id.
    pub fn table_names(&self) -> &[String] {
        &self.sh.names
    }

    /// PWV: partition table `t`'s records by their first `len` bytes (0,
    /// the default: the whole key), so that the keys of a group (a TPC-C
    /// district's rows, say) live in one partition and a piece that
    /// declares the group runs on one executor. Before the start.
    pub fn partition_prefix(&mut self, t: TableId, len: usize) -> Result<(), Error> {
        let sh = Arc::get_mut(&mut self.sh).filter(|_| self.start_ts.is_none());
        let Some(sh) = sh else {
            return Err(Error::InvalidArgument(
                "partition_prefix: before the engine starts".into(),
            ));
        };
        let slot = sh
            .part_prefix
            .get_mut(t.as_u32() as usize)
            .ok_or(Error::BadTableId(t.as_u32()))?;
        *slot = len;
        Ok(())
    }

    /// Tests: make the first CC thread (PWV: executor 0) panic at
    /// timestamp `ts`.
    #[cfg(test)]
    fn panic_at(&self, ts: u64) {
        self.sh.panic_at_ts.store(ts, Ordering::Relaxed);
    }

    /// Whether batches are logged to a data directory.
    pub fn has_input_log(&self) -> bool {
        self.input.is_some()
    }

    /// A new engine like this one (its tables, configuration, partition
    /// prefixes and input log), not started, that takes over this one's
    /// directory lock: what the restart after a system failure (§6.4.7)
    /// recovers into, from the last checkpoint and the log without the
    /// expunged request. Only with an input log (in memory nothing could
    /// be recovered).
    pub(crate) fn successor(&mut self) -> Result<Bohm, Error> {
        let Some((dir, procs)) = self.input.clone() else {
            return Err(Error::InvalidArgument(
                "an in-memory deterministic engine cannot be restarted".into(),
            ));
        };
        let names: Vec<&str> = self.sh.names.iter().map(String::as_str).collect();
        let mut next = Bohm::new(&names, self.sh.cfg)?
            .with_input_log(&dir, procs)
            .input_segment_bytes(self.segment_bytes);
        for (t, &len) in self.sh.part_prefix.iter().enumerate() {
            next.partition_prefix(TableId::from_u32(t as u32), len)?;
        }
        next.adopt_dir_lock(self.dir_lock.take());
        Ok(next)
    }

    /// Whether the stages run (after [`Bohm::start`], until shutdown).
    pub fn is_running(&self) -> bool {
        self.seq.is_some()
    }

    /// Use `lock`, the data directory's `LOCK` already taken by the
    /// caller (`Database::open`), instead of taking it at the start.
    pub(crate) fn adopt_dir_lock(&mut self, lock: Option<std::fs::File>) {
        self.dir_lock = lock;
    }

    /// Make `dir` the data directory: every batch is logged to its input
    /// log (synced per batch before its outcomes are released), and
    /// checkpoints go there ([`Bohm::checkpoint`]). At [`Bohm::start`] the
    /// newest checkpoint is loaded and the batches logged after it are
    /// replayed through the stages, after cutting a torn tail (never
    /// acknowledged): BOHM is deterministic, so the state is the one the
    /// logged batches produced. A fresh directory gets a first checkpoint
    /// of what was loaded; a directory with one must be started without
    /// loading. `procs` decodes the logged requests.
    pub fn with_input_log(mut self, dir: &std::path::Path, procs: Procedures) -> Bohm {
        self.input = Some((dir.to_path_buf(), procs));
        self
    }

    /// The input log's segment size (default 64 MiB): a checkpoint deletes
    /// the whole segments it covers.
    pub fn input_segment_bytes(mut self, n: u64) -> Bohm {
        self.segment_bytes = n.max(1);
        self
    }

    /// What [`Bohm::start`] replayed.
    pub fn replayed(&self) -> ReplayStats {
        self.replayed
    }

    /// The id of table `name`.
    pub fn table(&self, name: &str) -> Result<TableId, Error> {
        self.sh
            .names
            .iter()
            .position(|n| n == name)
            .map(|i| TableId::from_u32(i as u32))
            .ok_or_else(|| Error::NoSuchTable(name.to_string()))
    }

    /// Load `key -> val` before the start (timestamp 0). Refused once
    /// started.
    pub fn load(&self, t: TableId, key: &[u8], val: &[u8]) -> Result<(), Error> {
        if self.seq.is_some() {
            return Err(Error::InvalidArgument(format!(
                "{}: load before the first submission (the stages have started)",
                self.sh.cfg.protocol.name()
            )));
        }
        let tree = self.sh.table(t)?;
        let loader = self.loader.lock();
        let g = loader.as_ref().expect("loader slot").pin();
        let v = new_version(0, ptr::null(), VALUE, ptr::null_mut());
        // SAFETY: fresh, not yet shared.
        unsafe { *(*v).data.get() = val.into() };
        let rec = BRecord::new(v);
        self.loaded.fetch_add(1, Ordering::Relaxed);
        match tree.insert(key, rec as u64, &g) {
            Insert::Inserted { .. } => Ok(()),
            Insert::Exists(old) => {
                // SAFETY: a loaded record; no thread runs yet.
                unsafe {
                    free_record(rec);
                    let old = &*(old as *const BRecord);
                    let h = old.head.load(Ordering::Relaxed);
                    *(*h).data.get() = val.into();
                }
                Ok(())
            }
        }
    }

    /// Start the sequencer and the stages.
    pub fn start(&mut self) -> Result<(), Error> {
        if self.seq.is_some() {
            return Ok(());
        }
        let cfg = self.sh.cfg;
        self.ticker = Some(Ticker::start(
            self.sh.epochs.clone(),
            Duration::from_millis(1),
        ));
        // PWV: one executor per partition, fed by the planning thread.
        let pwv = cfg.protocol == DetProtocol::Pwv;
        let mut feed_tx = Vec::new();
        for i in (0..cfg.exec_threads).filter(|_| pwv) {
            let (tx, rx) = mpsc::channel::<Arc<BatchCtx>>();
            feed_tx.push(tx);
            let h = self.spawn_stage(format!("pwv-exec-{i}"), 8 << 20, move |sh, local| {
                pwv::exec_main(sh, i, local, rx)
            })?;
            self.exec.push(h);
        }
        // Lazy: the substantiation workers, fed by the stickification
        // thread (the CC stage's one thread).
        let lazy = cfg.protocol == DetProtocol::Lazy;
        for i in (0..cfg.exec_threads).filter(|_| lazy) {
            let h = self.spawn_stage(format!("lazy-sub-{i}"), 64 << 20, move |sh, local| {
                lazy::worker_main(sh, local)
            })?;
            self.exec.push(h);
        }
        // Execution stage, then the CC stage that feeds it.
        let mut exec_tx = Vec::new();
        for i in (0..cfg.exec_threads).filter(|_| !pwv && !lazy) {
            let (tx, rx) = mpsc::channel::<Arc<BatchCtx>>();
            exec_tx.push(tx);
            // Deep recursion into producers needs a large stack.
            let h = self.spawn_stage(format!("bohm-exec-{i}"), 64 << 20, move |sh, local| {
                exec_main(sh, i, local, rx)
            })?;
            self.exec.push(h);
        }
        // Lazy, partitioned stickification: the now-phase thread, fed by
        // the CC threads' barrier as BOHM's executors are.
        if lazy && cfg.cc_threads > 1 {
            let (tx, rx) = mpsc::channel::<Arc<BatchCtx>>();
            exec_tx.push(tx);
            let h = self.spawn_stage("lazy-stick".into(), 64 << 20, move |sh, local| {
                lazy::stick_main(sh, local, rx)
            })?;
            self.stick.push(h);
        }
        *self.sh.exec_tx.lock() = Some(exec_tx);
        let mut cc_tx = feed_tx;
        for i in (0..cfg.cc_threads).filter(|_| !pwv) {
            let (tx, rx) = mpsc::channel::<Arc<BatchCtx>>();
            cc_tx.push(tx);
            let h = self.spawn_stage(format!("bohm-cc-{i}"), 2 << 20, move |sh, local| {
                cc_main(sh, i as u16, local, rx)
            })?;
            self.cc.push(h);
        }
        // The input log: recover from its directory, then continue it.
        let (mut first_batch, mut first_ts, mut log) = (0, 1, None);
        if let Some((dir, procs)) = self.input.clone() {
            let _ = self.sh.input_dir.set(dir.clone());
            let (b, t, l) = self.recover(&dir, &procs, &cc_tx)?;
            (first_batch, first_ts, log) = (b, t, Some(l));
        }
        self.start_ts = Some(first_ts);
        let sh = self.sh.clone();
        let sink = Box::new(move |b: Batch| {
            free_spent(&sh);
            let _feeding = sh.feed.read();
            let last = (
                b.number,
                b.first_ts + b.txns.len() as u64 - 1,
                b.release.clone(),
            );
            let ctx = Arc::new(plan_batch(b, cfg, &sh));
            register_ranges(&sh, &ctx);
            *sh.cut.lock() = Some(last);
            for tx in &cc_tx {
                let _ = tx.send(ctx.clone());
            }
        });
        let seq = Sequencer::start(cfg.sequencer, first_batch, first_ts, log, sink)?;
        self.latencies = Some(seq.batch_latencies().clone());
        let _ = self.sh.failer.set(seq.failer().clone());
        self.seq = Some(seq);
        Ok(())
    }

    /// The system failure (§6.4.7) this engine met, if any: it serves
    /// nothing more, and a restart recovers without the expunged request.
    pub fn system_failure(&self) -> Option<Error> {
        self.sh.system_failure.get().cloned()
    }

    /// The latencies of the batches released since the start, cut to
    /// release (`None` before the start).
    pub fn batch_latencies(&self) -> Option<&Arc<crate::det::sequencer::BatchLatencies>> {
        self.latencies.as_ref()
    }

    /// Start one stage thread with its own epoch slot.
    fn spawn_stage(
        &self,
        name: String,
        stack: usize,
        f: impl FnOnce(&Shared, &LocalEpoch) + Send + 'static,
    ) -> Result<JoinHandle<()>, Error> {
        let sh = self.sh.clone();
        let local = sh
            .epochs
            .register_internal()
            .ok_or_else(|| Error::InvalidArgument(format!("BOHM: no epoch slot for {name}")))?;
        let thread = name.clone();
        std::thread::Builder::new()
            .name(name.clone())
            .stack_size(stack)
            .spawn(move || {
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&sh, &local)));
                if let Err(p) = r {
                    sh.stage_stopped.store(true, Ordering::Release);
                    // A bug (bodies' panics are caught where they run): the
                    // batches this thread would have moved on are never
                    // released, so their submitters, and later ones, get an
                    // error instead of waiting for good.
                    if let Some(f) = sh.failer.get() {
                        f.fail(Error::InvalidArgument(format!(
                            "BOHM: stage thread {thread} panicked: {}",
                            panic_message(&*p)
                        )));
                    }
                    std::panic::resume_unwind(p);
                }
            })
            .map_err(|e| Error::io(format!("cannot start the BOHM thread {name}"), e))
    }

    /// Recovery from the data directory `dir` (at [`Bohm::start`], the
    /// stages running, before any submission):
    ///
    /// 1. `tessera.det` is written, or checked against the tables;
    /// 2. the newest checkpoint is loaded; with none (a fresh directory),
    ///    the loaded state is checkpointed first, as the state before
    ///    batch 0, so that the log never needs the caller's load again;
    /// 3. a torn tail of the input log is cut (never acknowledged);
    /// 4. the logged batches from the checkpoint's on are replayed through
    ///    the stages, and waited for.
    ///
    /// Returns where the sequencer continues (batch, timestamp) and the
    /// input log to continue.
    fn recover(
        &mut self,
        dir: &std::path::Path,
        procs: &Procedures,
        cc_tx: &[Sender<Arc<BatchCtx>>],
    ) -> Result<(u64, u64, InputLog), Error> {
        let cfg = self.sh.cfg;
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e))?;
        if self.dir_lock.is_none() {
            self.dir_lock = crate::db::Database::lock_dir(dir, false)?;
        }
        crate::det::checkpoint::mark_dir(dir, &self.sh.names, cfg.protocol.name())?;
        crate::det::checkpoint::remove_unfinished(dir);
        // Checked whole before anything is replayed (a gap is refused
        // with nothing changed).
        let rp = crate::det::checkpoint::plan_recovery(dir)?;
        match &rp.checkpoint {
            Some(ck) => {
                if self.loaded.load(Ordering::Relaxed) > 0 {
                    return Err(Error::InvalidArgument(format!(
                        "{} holds a checkpoint ({}): start on it without loading rows",
                        dir.display(),
                        ck.file.display()
                    )));
                }
                let started = std::time::Instant::now();
                for (t, k, v) in &ck.rows {
                    self.load(TableId::from_u32(*t), k, v)?;
                }
                self.start_checkpoint = Some(DetCheckpointInfo {
                    next_batch: ck.next_batch,
                    bytes: std::fs::metadata(&ck.file).map_or(0, |m| m.len()),
                    file: ck.file.clone(),
                    rows: ck.rows.len() as u64,
                    seconds: started.elapsed().as_secs_f64(),
                    segments_deleted: 0,
                });
            }
            None => {
                // The loaded rows, at timestamp 0, before batch 0.
                let info = self.write_checkpoint(dir, 0, 0, std::time::Instant::now())?;
                self.start_checkpoint = Some(info);
            }
        }
        let scan = &rp.log;
        if let Some((path, off, _)) = &scan.torn {
            segment::truncate_file(path, *off).map_err(|e| {
                Error::io(format!("cannot cut the torn tail of {}", path.display()), e)
            })?;
        }
        // Requests a system failure expunged (§6.4.7) replay as no-ops.
        // An entry at or past the log's end names a request whose batch
        // never became durable (the expunge is synced as soon as the piece
        // fails, the batch's input possibly later): the sequencer will
        // hand that timestamp to a new request, which must not be skipped.
        let expunged = crate::det::expunge::retain_below(dir, rp.next.1)?;
        let mut waits = Vec::new();
        for lb in rp.replay() {
            let mut ps: Vec<Box<dyn crate::det::DynProcedure>> =
                Vec::with_capacity(lb.entries.len());
            for (i, (id, args)) in lb.entries.iter().enumerate() {
                if expunged.contains_key(&(lb.first_ts + i as u64)) {
                    self.replayed.expunged += 1;
                    ps.push(Box::new(crate::det::expunge::ExpungedRequest { id: *id }));
                    continue;
                }
                ps.push(procs.decode(*id, args)?);
            }
            let (b, w) = Batch::replayed(lb.number, lb.first_ts, ps);
            let last = (
                b.number,
                b.first_ts + b.txns.len() as u64 - 1,
                b.release.clone(),
            );
            free_spent(&self.sh);
            let ctx = Arc::new(plan_batch(b, cfg, &self.sh));
            register_ranges(&self.sh, &ctx);
            *self.sh.cut.lock() = Some(last);
            for tx in cc_tx {
                let _ = tx.send(ctx.clone());
            }
            waits.push(w);
        }
        let alive = || {
            !self
                .cc
                .iter()
                .chain(&self.exec)
                .chain(&self.stick)
                .any(|h| h.is_finished())
        };
        for (i, w) in waits.into_iter().enumerate() {
            // A stage thread that panics during replay (a bug: bodies'
            // panics are caught where they run) would leave the open
            // waiting for good: it fails instead, naming the batch.
            let Some((c, a)) = w.wait_while(alive) else {
                let b = rp.replay().get(i).map_or(0, |lb| lb.number);
                return Err(Error::InvalidArgument(format!(
                    "recovery of {}: a stage thread stopped while batch {b} was replayed \
                     (a panic: see the log of the process)",
                    dir.display()
                )));
            };
            self.replayed.committed += c;
            self.replayed.not_committed += a;
            self.replayed.batches += 1;
        }
        self.replayed.cut_torn_tail = scan.torn.is_some();
        // A request that fails again where it cannot roll back (its
        // expunge did not reach the disk the first time): refuse to start
        // on the partial state; `system_failure` has tried the expunge again.
        if let Some(e) = self.system_failure() {
            return Err(e);
        }
        let segno = scan.last_segno.map_or(1, |s| s + 1);
        let log = InputLog::create(dir, segno, scan.next_seq, self.segment_bytes).map_err(|e| {
            Error::io(
                format!("cannot start the input log in {}", dir.display()),
                e,
            )
        })?;
        Ok((rp.next.0, rp.next.1, log))
    }

    /// The checkpoint `start` loaded or wrote (with an input log).
    pub fn recovered_from(&self) -> Option<&std::path::Path> {
        self.start_checkpoint.as_ref().map(|c| c.file.as_path())
    }

    /// The checkpoint `start` loaded (its load time as `seconds`) or
    /// wrote, with an input log.
    pub fn start_checkpoint(&self) -> Option<&DetCheckpointInfo> {
        self.start_checkpoint.as_ref()
    }

    /// Every live row as of timestamp `x` (every transaction at or below
    /// it complete, and GC held at or below it): for each record, the
    /// newest filled version that begins at or below `x`.
    fn snapshot(
        &self,
        x: u64,
        only: Option<usize>,
        emit: &mut crate::det::checkpoint::EmitRow<'_>,
    ) {
        let loader = self.loader.lock();
        let local = loader.as_ref().expect("loader slot");
        for (i, tree) in self.sh.tables.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let mut from: Option<Vec<u8>> = None;
            loop {
                // Re-pinned every few thousand keys, so the epoch moves.
                let g = local.pin();
                let mut n = 0usize;
                let mut last = None;
                let lo = match &from {
                    Some(k) => Bound::Excluded(&k[..]),
                    None => Bound::Unbounded,
                };
                tree.scan(lo, Bound::Unbounded, false, &g, Unobserved, |k, v| {
                    // SAFETY: records live while the engine runs; versions
                    // reached while pinned are alive.
                    let rec = unsafe { &*(v as *const BRecord) };
                    let mut p = rec.head.load(Ordering::Acquire);
                    while !p.is_null() {
                        // SAFETY: as above.
                        let ver = unsafe { &*p };
                        if ver.begin <= x {
                            match ver.state.load(Ordering::Acquire) {
                                VALUE => {
                                    // SAFETY: filled, so immutable (BOHM),
                                    // or no writer runs (2pl-ordered: the
                                    // feed is stopped and drained).
                                    emit(i as u32, k, unsafe { &(&*ver.data.get())[..] });
                                    break;
                                }
                                TOMBSTONE => break,
                                SKIPPED => {}
                                _ => unreachable!(
                                    "a pending version at or below a checkpoint's timestamp"
                                ),
                            }
                        }
                        p = ver.prev.load(Ordering::Acquire);
                    }
                    n += 1;
                    if n >= 4096 {
                        last = Some(k.to_vec());
                        return false;
                    }
                    true
                });
                match last {
                    Some(k) => from = Some(k),
                    None => break,
                }
            }
        }
    }

    /// Take a checkpoint while the engine runs: the state after the last
    /// batch handed to the CC stage, at its batch boundary, written to the
    /// data directory; then delete the input log segments it covers.
    ///
    /// Under BOHM the checkpoint is a snapshot read at that batch's last
    /// timestamp while later batches go on: the multi-version chains serve
    /// it, and GC is held back to it while it reads. Under `2pl-ordered`
    /// (one version per record) the feed of new batches stops while it
    /// reads, and the stages drain first. Either way it waits for the batch
    /// to be executed and its input durable, so a checkpoint never covers
    /// a batch the log could lose. `Ok(None)`: no batch has run since the
    /// start (the checkpoint `start` wrote or loaded is current).
    pub fn checkpoint(&self) -> Result<Option<DetCheckpointInfo>, Error> {
        self.checkpoint_with(|| {})
    }

    /// [`Bohm::checkpoint`], running `pinned` once the checkpoint's batch
    /// is chosen and GC held back (tests run later batches there).
    fn checkpoint_with(&self, pinned: impl FnOnce()) -> Result<Option<DetCheckpointInfo>, Error> {
        let Some((dir, _)) = &self.input else {
            return Err(Error::InvalidArgument(
                "checkpoints need a data directory (with_input_log)".into(),
            ));
        };
        if self.seq.is_none() {
            return Err(Error::InvalidArgument(
                "checkpoint: the engine is not running".into(),
            ));
        }
        // Never a checkpoint of a state that holds part of a transaction.
        if let Some(e) = self.system_failure() {
            return Err(e);
        }
        let started = std::time::Instant::now();
        let _one = self.ckpt_lock.lock();
        let written = self.at_boundary(pinned, |number, x| match number {
            Some(b) => self.write_checkpoint(dir, b + 1, x, started).map(Some),
            None => Ok(None),
        })?;
        let Some(mut info) = written else {
            return Ok(None);
        };
        info.segments_deleted =
            crate::det::checkpoint::delete_covered_segments(dir, info.next_batch)?;
        info.seconds = started.elapsed().as_secs_f64();
        Ok(Some(info))
    }

    /// Write the checkpoint of the state at timestamp `x`, the end of the
    /// batches below `next_batch` (replay starts at `next_batch`, timestamp
    /// `x + 1`); `started` is when the caller began (for `seconds`).
    fn write_checkpoint(
        &self,
        dir: &std::path::Path,
        next_batch: u64,
        x: u64,
        started: std::time::Instant,
    ) -> Result<DetCheckpointInfo, Error> {
        let mut rows = 0u64;
        let (file, bytes) = crate::det::checkpoint::write(dir, next_batch, x + 1, &mut |emit| {
            self.snapshot(x, None, &mut |t, k, v| {
                rows += 1;
                emit(t, k, v)
            })
        })?;
        Ok(DetCheckpointInfo {
            next_batch,
            file,
            rows,
            bytes,
            seconds: started.elapsed().as_secs_f64(),
            segments_deleted: 0,
        })
    }

    /// Run `read` on the state at the end of the last batch handed to the
    /// CC stage, while later batches may go on: `read` gets that batch's
    /// number (`None`: no batch since the start; the state is the loaded
    /// or recovered one) and the timestamp to read at.
    ///
    /// Under BOHM the state is a snapshot read at that timestamp: the
    /// multi-version chains serve it, and GC is held back to it while
    /// `read` runs (`pinned` runs once it is held). Under `2pl-ordered`
    /// (one version per record) the feed of new batches stops and the
    /// stages drain first. Either way it waits for the batch to be
    /// executed and its input durable, so what `read` sees never depends
    /// on a batch the log could lose (results are released only then).
    fn at_boundary<T>(
        &self,
        pinned: impl FnOnce(),
        read: impl FnOnce(Option<u64>, u64) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let sh = &self.sh;
        // (Multi-version protocols read the snapshot while later batches
        // run.)
        let mv = matches!(sh.cfg.protocol, DetProtocol::Bohm | DetProtocol::Lazy);
        let _quiet = (!mv).then(|| sh.feed.write());
        struct Unpin<'a>(&'a AtomicU64);
        impl Drop for Unpin<'_> {
            fn drop(&mut self) {
                self.0.store(u64::MAX, Ordering::SeqCst);
            }
        }
        let (cut, x) = loop {
            let cut = sh.cut.lock().clone();
            // No batch yet: the loaded state is the one below the first
            // timestamp, and GC collects nothing before a batch ends.
            let x = cut.as_ref().map_or(self.start_ts.unwrap_or(1) - 1, |c| c.1);
            sh.gc_pin.store(x, Ordering::SeqCst);
            std::sync::atomic::fence(Ordering::SeqCst);
            // GC never collected past `x`, unless the executors had
            // already passed it (a later batch was cut and ran since the
            // read above): then pin that later batch instead.
            if sh.executed().is_none_or(|wm| wm <= x) {
                break (cut, x);
            }
            sh.gc_pin.store(u64::MAX, Ordering::SeqCst);
        };
        let _unpin = Unpin(&sh.gc_pin);
        pinned();
        let Some((number, _, release)) = cut else {
            return read(None, x);
        };
        loop {
            if self.cc.iter().chain(&self.exec).any(|h| h.is_finished()) {
                return Err(Error::InvalidArgument(
                    "a BOHM stage thread has stopped".into(),
                ));
            }
            let executed = sh.executed().is_some_and(|wm| wm >= x);
            match release.durability() {
                Some(Err(e)) => return Err(e),
                Some(Ok(())) if executed => break,
                _ => std::thread::sleep(Duration::from_micros(200)),
            }
        }
        read(Some(number), x)
    }

    /// Submit a request.
    pub fn submit<P: Procedure>(&self, p: P) -> Result<Receipt<P::Output>, Error>
    where
        P::Output: Send + 'static,
    {
        match &self.seq {
            Some(s) => s.submit(p),
            None => Err(Error::InvalidArgument("BOHM: submit after start".into())),
        }
    }

    /// Stop: the last batch is cut and executed, the threads end.
    pub fn shutdown(&mut self) -> Result<BohmStats, Error> {
        let r = self.seq.take().map(|s| s.shutdown());
        let mut panicked = 0;
        for h in self.cc.drain(..) {
            panicked += usize::from(h.join().is_err());
        }
        // The CC threads are gone: no more batches for the executors.
        drop(self.sh.exec_tx.lock().take());
        // Lazy, partitioned: the now-phase thread publishes its last
        // batches before the workers may stop.
        for h in self.stick.drain(..) {
            panicked += usize::from(h.join().is_err());
        }
        self.sh.lazy.closed.store(true, Ordering::Release);
        for h in self.exec.drain(..) {
            panicked += usize::from(h.join().is_err());
        }
        self.panicked += panicked;
        if self.panicked > 0 {
            // A bug, not a body's panic (those are caught): say so rather
            // than return statistics as if the run had been whole.
            return Err(Error::InvalidArgument(format!(
                "BOHM: {} stage thread(s) panicked",
                self.panicked
            )));
        }
        let input_bytes = match r {
            Some(Err(e)) => return Err(e),
            Some(Ok(s)) => s.input_bytes,
            None => 0,
        };
        self.input_bytes = self.input_bytes.max(input_bytes);
        Ok(self.stats())
    }

    /// The stages' counters.
    pub fn stats(&self) -> BohmStats {
        BohmStats {
            placeholders: self.sh.placeholders.load(Ordering::Relaxed),
            recursive: self.sh.recursive.load(Ordering::Relaxed),
            collected: self.sh.collected.load(Ordering::Relaxed),
            reused: self.sh.reused.load(Ordering::Relaxed),
            set_aside: self.sh.set_aside.load(Ordering::Relaxed),
            batches: self.sh.batches.load(Ordering::Relaxed),
            input_bytes: self
                .seq
                .as_ref()
                .map_or(self.input_bytes, |s| s.input_bytes()),
            cc_busy_ns: self.sh.cc_busy_ns.load(Ordering::Relaxed),
            exec_busy_ns: self.sh.exec_busy_ns.load(Ordering::Relaxed),
            cc_map_entries: self
                .sh
                .cc_map_entries
                .iter()
                .map(|n| n.load(Ordering::Relaxed))
                .sum(),
            lazy_deferred: self.sh.lazy.deferred.load(Ordering::Relaxed),
            lazy_handed_off: self.sh.lazy.handed_off.load(Ordering::Relaxed),
            lazy_substantiated: self.sh.lazy.substantiated.load(Ordering::Relaxed),
            lazy_later_errors: self.sh.lazy.later_errors.load(Ordering::Relaxed),
            lazy_clobbered: self.sh.lazy.clobbered.load(Ordering::Relaxed),
            lazy_existence_checks: self.sh.lazy.existence_checks.load(Ordering::Relaxed),
            lazy_external_reads: self.sh.lazy.external_reads.load(Ordering::Relaxed),
            lazy_backlog_max: self.sh.lazy.backlog_max.load(Ordering::Relaxed),
            lazy_pending: self
                .sh
                .lazy
                .deferred
                .load(Ordering::Relaxed)
                .saturating_sub(self.sh.lazy.later_done.load(Ordering::Relaxed)),
        }
    }

    /// Every key and its value of table `t`, in key order (a tombstone or
    /// no version: absent). While the engine runs, the state after the
    /// last batch handed to the CC stage, once that batch is executed and
    /// its input durable (see [`Bohm::checkpoint`]: a snapshot under BOHM,
    /// a paused feed under `2pl-ordered`); before the start or once shut
    /// down, the state then.
    pub fn dump(&self, t: TableId) -> Result<Rows, Error> {
        let i = t.as_u32() as usize;
        self.sh.table(t)?;
        if self.panicked > 0 {
            return Err(Error::InvalidArgument(format!(
                "BOHM: {} stage thread(s) panicked, so the state may hold unfilled versions",
                self.panicked
            )));
        }
        // Never the partial state of a system failure (running or not).
        if let Some(e) = self.system_failure() {
            return Err(e);
        }
        let mut out = Vec::new();
        let mut collect = |_: u32, k: &[u8], v: &[u8]| out.push((k.to_vec(), v.to_vec()));
        if self.seq.is_none() {
            self.snapshot(u64::MAX, Some(i), &mut collect);
        } else {
            let _one = self.ckpt_lock.lock();
            self.at_boundary(
                || {},
                |_, x| {
                    self.snapshot(x, Some(i), &mut collect);
                    Ok(())
                },
            )?;
        }
        Ok(out)
    }
}

impl Drop for Bohm {
    fn drop(&mut self) {
        let _ = self.shutdown();
        drop(self.ticker.take());
        for r in self.sh.unit_recs.lock().drain(..) {
            // SAFETY: every stage thread has stopped (shut down above); a
            // unit's record is in no index and is freed once, here.
            unsafe { free_record(r as *mut BRecord) };
        }
        let loader = self.loader.lock();
        let Some(loader) = loader.as_ref() else {
            return;
        };
        let g = loader.pin();
        for tree in &self.sh.tables {
            tree.scan(
                Bound::Unbounded,
                Bound::Unbounded,
                false,
                &g,
                Unobserved,
                |_, v| {
                    // SAFETY: every thread has stopped; each record is in one
                    // index entry and freed once.
                    unsafe { free_record(v as *mut BRecord) };
                    true
                },
            );
        }
    }
}

impl Shared {
    fn table(&self, t: TableId) -> Result<&BTree, Error> {
        self.tables
            .get(t.as_u32() as usize)
            .ok_or(Error::BadTableId(t.as_u32()))
    }

    /// The executors' low watermark: every transaction at or below it is
    /// complete (`None`: some executor has finished no batch yet).
    fn executed(&self) -> Option<u64> {
        let mut m = u64::MAX;
        for f in self.finished.iter() {
            let b = f.load(Ordering::Acquire);
            if b == u64::MAX {
                return None;
            }
            m = m.min(b);
        }
        Some(m)
    }

    /// GC's horizon: the low watermark, held back to a running
    /// checkpoint's timestamp. The fence pairs with the one in
    /// [`Bohm::checkpoint`] (which stores the pin, then reads the
    /// watermark): either this pass sees the pin, or the checkpoint sees a
    /// watermark at least as high as the one this pass collects with.
    fn watermark(&self) -> Option<u64> {
        let wm = self.executed()?;
        std::sync::atomic::fence(Ordering::SeqCst);
        Some(wm.min(self.gc_pin.load(Ordering::SeqCst)))
    }
}

/// The first 8 bytes of `key` (zero-padded) as a big-endian word: two
/// keys' words compare as their first 8 bytes do (equal words leave the
/// order to the whole keys).
#[inline]
fn key_word(key: &[u8]) -> u64 {
    // Not a copy into a padded array: its variable length made it a call
    // to memcpy, half of the planning thread's time on YCSB (the sort of
    // each transaction's keys computes it per comparison).
    crate::index::key_word(key)
}

/// The order of two keys whose `key_word`s are equal. Keys of at most 8
/// bytes then differ only in length (the longer one's extra bytes are
/// zeros, and the shorter is its prefix): no byte comparison, which is a
/// library call.
#[inline]
fn cmp_same_word(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if a.len() <= 8 && b.len() <= 8 {
        a.len().cmp(&b.len())
    } else {
        a.cmp(b)
    }
}

fn new_version(begin: u64, producer: *const BTxn, state: u8, prev: *mut Version) -> *mut Version {
    Box::into_raw(Box::new(Version {
        begin,
        end: AtomicU64::new(u64::MAX),
        producer,
        state: AtomicU8::new(state),
        data: UnsafeCell::new(Box::new([])),
        prev: AtomicPtr::new(prev),
    }))
}

/// The one version of a record `2pl-ordered` creates for a key that has
/// none: absent until a write fills it.
fn absent_version() -> *mut Version {
    new_version(0, ptr::null(), TOMBSTONE, ptr::null_mut())
}

/// Free a record and its whole chain.
///
/// # Safety
/// No thread may use the record or its versions any more.
unsafe fn free_record(r: *mut BRecord) {
    // SAFETY: the caller's contract.
    unsafe {
        free_chain((*r).head.load(Ordering::Relaxed) as *mut u8);
        drop(Box::from_raw(r));
    }
}

/// Free a chain cut off by GC (the epoch callback).
///
/// # Safety
/// `p` heads a chain no reader can reach any more and no pinned reader
/// still walks.
unsafe fn free_chain(p: *mut u8) {
    let mut p = p as *mut Version;
    while !p.is_null() {
        // SAFETY: the caller's contract; each version is in one chain.
        unsafe {
            let next = (*p).prev.load(Ordering::Relaxed);
            drop(Box::from_raw(p));
            p = next;
        }
    }
}

/// Versions a CC thread's GC cut off, reused for its new placeholders with
/// their value buffers.
///
/// Without it every write allocated twice and freed twice on different
/// threads: the CC thread a `Version` for the placeholder, the executor a
/// value buffer for the data, and GC (on the CC thread, through the epoch)
/// both. On YCSB 2RMW-8R with 1,000-byte values about half of the CC
/// thread's time went to the allocator (mostly collecting the executors'
/// buffers freed here), and the CC thread is the stage that bounds a
/// batch. A version comes back here once no pinned reader can reach it
/// (the epoch rule, [`Epochs::reclaimable`]), per table, so that its
/// buffer has the table's row size and the executor that fills it copies
/// the value into it instead of allocating one (`BohmTx::write`).
///
/// The thesis does not say how versions are allocated; its prototype's
/// per-thread allocators play this part.
///
/// `storage::pool` recycles the interactive multi-version protocols'
/// versions, and the two are kept apart on purpose. That pool hands out
/// raw blocks by exact size, freed by whichever worker's epoch collection
/// comes first. This one keeps typed `Version`s with their value buffers,
/// per table, and re-initialises them. It also needs no epoch pass of its
/// own: the CC thread that cut a chain is the thread that reuses it.
struct Recycler {
    /// Chains cut by GC: the epoch they were cut in, the chain, its table.
    cut: std::collections::VecDeque<(u64, *mut Version, u32)>,
    /// Per table: versions no thread can reach.
    free: Vec<Vec<*mut Version>>,
    /// Placeholders taken from `free` since the last `take_reused`.
    reused: u64,
}

/// At most this many versions wait for reuse per table and CC thread; the
/// rest are freed (a batch that only deletes or overwrites a table, once,
/// must not keep its versions for good).
/// (A 10RMW batch of 10,000 cuts 100,000 versions at once, which its
/// successor's placeholders take back.)
const RECYCLE_MAX: usize = 1 << 18;

impl Recycler {
    fn new(tables: usize) -> Recycler {
        Recycler {
            cut: Default::default(),
            free: (0..tables).map(|_| Vec::new()).collect(),
            reused: 0,
        }
    }

    /// Take over a chain GC cut off in the guard's epoch.
    fn retire(&mut self, g: &Guard<'_>, chain: *mut Version, table: u32) {
        self.cut.push_back((g.epoch(), chain, table));
    }

    /// Move the chains no reader can reach any more to the free lists;
    /// how many versions they held.
    fn reclaim(&mut self, epochs: &Epochs) -> u64 {
        let mut n = 0;
        while let Some(&(e, chain, table)) = self.cut.front() {
            if !epochs.reclaimable(e) {
                break;
            }
            self.cut.pop_front();
            let free = &mut self.free[table as usize];
            let mut p = chain;
            while !p.is_null() {
                // SAFETY: cut from its record by this thread's GC and past
                // the epoch: no thread can reach it; each version is in one
                // chain.
                let next = unsafe { (*p).prev.load(Ordering::Relaxed) };
                if free.len() < RECYCLE_MAX {
                    free.push(p);
                } else {
                    // SAFETY: as above; allocated by `new_version`.
                    drop(unsafe { Box::from_raw(p) });
                }
                n += 1;
                p = next;
            }
        }
        n
    }

    /// A pending placeholder of `producer` for a key of `table`: a reused
    /// version (its value buffer kept) or a new one.
    fn placeholder(&mut self, table: u32, producer: &BTxn) -> *mut Version {
        let free = &mut self.free[table as usize];
        match free.pop() {
            Some(p) => {
                // The next one's header is written next time.
                if let Some(&next) = free.last() {
                    wordmap::prefetch_line(next);
                }
                self.reused += 1;
                // SAFETY: unreachable for every other thread (see
                // `reclaim`), so this thread has it to itself.
                let v = unsafe { &mut *p };
                v.begin = producer.ts;
                *v.end.get_mut() = u64::MAX;
                v.producer = producer;
                *v.state.get_mut() = PENDING;
                *v.prev.get_mut() = ptr::null_mut();
                p
            }
            None => new_version(producer.ts, producer, PENDING, ptr::null_mut()),
        }
    }

    /// At the CC thread's end: chains still waiting go to the epoch's own
    /// garbage list (a reader may still walk them).
    fn close(&mut self, g: &Guard<'_>) {
        for (_, chain, _) in self.cut.drain(..) {
            // SAFETY: cut from its record, unreachable for later pins.
            unsafe { g.retire(chain as *mut u8, free_chain) };
        }
    }
}

impl Drop for Recycler {
    fn drop(&mut self) {
        for free in &mut self.free {
            for p in free.drain(..) {
                // SAFETY: unreachable (see `reclaim`), from `new_version`.
                drop(unsafe { Box::from_raw(p) });
            }
        }
        // Chains in `cut` are leaked if `close` was not called (a panic in
        // the CC thread): a reader may still walk them.
    }
}

/// A declared range's bounds, copied into a transaction's key buffer.
fn stash_range(buf: &mut Vec<u8>, d: &crate::request::Declared<'_>) -> WRange {
    let lo = (buf.len() as u32, d.lo.len() as u32);
    buf.extend_from_slice(d.lo);
    let hi = d.hi().map(|h| {
        let at = (buf.len() as u32, h.len() as u32);
        buf.extend_from_slice(h);
        at
    });
    WRange {
        table: d.table,
        lo,
        hi,
    }
}

/// Plan a batch for the configured protocol.
fn plan_batch(b: Batch, cfg: BohmConfig, sh: &Shared) -> BatchCtx {
    match cfg.protocol {
        DetProtocol::Pwv => pwv::plan(b, cfg.exec_threads, sh),
        p => plan(b, cfg.cc_threads, cfg.exec_threads, p, sh),
    }
}

/// Planning on the sequencer's thread: each request's declared writes,
/// their owners, and empty placeholder slots.
fn plan(b: Batch, m: usize, n: usize, protocol: DetProtocol, sh: &Shared) -> BatchCtx {
    let locking = protocol == DetProtocol::TwoPlOrdered;
    let mut keys = KeySet::new();
    // 2pl-ordered: register the batch's new range-lock units before any of
    // its transactions is planned, so that each of them locks every unit
    // that covers its keys (see `UnitReg`).
    let mut units_guard = locking.then(|| sh.units.lock());
    let mut drain = None;
    if let Some(g) = units_guard.as_mut() {
        let (regs, planned) = &mut **g;
        regs.resize_with(sh.tables.len(), UnitReg::default);
        let mut fresh = false;
        for s in &b.txns {
            keys.clear();
            if s.proc.needs_reconnaissance() || !s.proc.declare(&mut keys) {
                continue;
            }
            for d in keys.iter() {
                if d.is_key() {
                    continue;
                }
                let Some(reg) = regs.get_mut(d.table.as_u32() as usize) else {
                    continue;
                };
                let unit = range_unit(d.lo, d.hi());
                if !reg.set.contains(unit) {
                    reg.set.insert(unit.into());
                    if let Err(at) = reg.lens.binary_search(&unit.len()) {
                        reg.lens.insert(at, unit.len());
                    }
                    fresh = true;
                }
            }
        }
        if fresh {
            drain = Some(*planned);
        }
        *planned += 1;
    }
    let units_reg: &[UnitReg] = match units_guard.as_ref() {
        Some(g) => &g.0,
        None => &[],
    };
    let mut us: Vec<(TableId, u32, u32, bool)> = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    // (table, at, len) of the writes and of the reads.
    let mut ws: Vec<(TableId, u32, u32)> = Vec::new();
    let mut rs: Vec<(TableId, u32, u32)> = Vec::new();
    let mut wr: Vec<WRange> = Vec::new();
    // 2pl-ordered and lazy: the declared read ranges (scans).
    let mut rr: Vec<WRange> = Vec::new();
    let lazy = protocol == DetProtocol::Lazy;
    // Lazy: the write keys declared blind, and those declared otherwise.
    let mut wb: Vec<(TableId, u32, u32)> = Vec::new();
    let mut wn: Vec<(TableId, u32, u32)> = Vec::new();
    let txns: Box<[BTxn]> = b
        .txns
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            keys.clear();
            buf.clear();
            ws.clear();
            rs.clear();
            wr.clear();
            rr.clear();
            wb.clear();
            wn.clear();
            let unusable = if s.proc.needs_reconnaissance() {
                Some(Error::InvalidArgument(format!(
                    "BOHM does not yet run requests that need a reconnaissance ('{}')",
                    s.proc.name()
                )))
            } else if !s.proc.declare(&mut keys) {
                Some(Error::InvalidArgument(format!(
                    "'{}' declares no key sets: BOHM needs its write set before it runs",
                    s.proc.name()
                )))
            } else {
                for d in keys.iter() {
                    if d.access == Access::Write && !d.is_key() {
                        // Inserts of new keys in the range (see
                        // `BohmTx::install_fresh`).
                        wr.push(stash_range(&mut buf, &d));
                        continue;
                    }
                    if !d.is_key() {
                        if locking || lazy {
                            // A scan's range: its unit is locked shared.
                            rr.push(stash_range(&mut buf, &d));
                        }
                        continue;
                    }
                    if lazy && d.access == Access::Write {
                        let e = (d.table, buf.len() as u32, d.lo.len() as u32);
                        if d.blind {
                            wb.push(e);
                        } else {
                            wn.push(e);
                        }
                    }
                    let list = if d.access == Access::Write {
                        &mut ws
                    } else {
                        &mut rs
                    };
                    // Duplicates go after sorting (a long read-only
                    // transaction declares thousands of keys).
                    list.push((d.table, buf.len() as u32, d.lo.len() as u32));
                    buf.extend_from_slice(d.lo);
                }
                None
            };
            if unusable.is_some() {
                ws.clear();
                rs.clear();
                wr.clear();
                rr.clear();
            }
            us.clear();
            let key = |e: &(TableId, u32, u32)| &buf[e.1 as usize..(e.1 + e.2) as usize];
            // (table, key), comparing a word of each key before its bytes.
            let order = |a: &(TableId, u32, u32), b: &(TableId, u32, u32)| {
                (a.0, key_word(key(a)))
                    .cmp(&(b.0, key_word(key(b))))
                    .then_with(|| cmp_same_word(key(a), key(b)))
            };
            ws.sort_unstable_by(order);
            ws.dedup_by(|a, b| order(a, b).is_eq());
            rs.sort_unstable_by(order);
            rs.dedup_by(|a, b| order(a, b).is_eq());
            // A key both read and written is read through its placeholder.
            rs.retain(|r| ws.binary_search_by(|w| order(w, r)).is_err());
            // 2pl-ordered's unit locks: (table, bytes in `buf`, exclusive).
            let mut unit_at: Vec<(TableId, Vec<u8>, bool)> = Vec::new();
            if locking && !units_reg.is_empty() {
                // Writers lock exclusively, readers shared, every registered
                // unit that covers what they access: a range's own unit
                // and the registered ones that prefix it, a key's
                // registered prefixes (see `UnitReg`).
                let ranges = wr
                    .iter()
                    .map(|r| (r, true))
                    .chain(rr.iter().map(|r| (r, false)));
                for (r, x) in ranges {
                    let lo = &buf[r.lo.0 as usize..(r.lo.0 + r.lo.1) as usize];
                    let hi = r.hi.map(|h| &buf[h.0 as usize..(h.0 + h.1) as usize]);
                    let unit = range_unit(lo, hi);
                    unit_at.push((r.table, unit.to_vec(), x));
                    if let Some(reg) = units_reg.get(r.table.as_u32() as usize) {
                        for p in reg.prefixes(unit, false) {
                            unit_at.push((r.table, p.to_vec(), x));
                        }
                    }
                }
                let points = ws
                    .iter()
                    .map(|e| (e, true))
                    .chain(rs.iter().map(|e| (e, false)));
                for (e, x) in points {
                    if let Some(reg) = units_reg.get(e.0.as_u32() as usize) {
                        for p in reg.prefixes(key(e), true) {
                            unit_at.push((e.0, p.to_vec(), x));
                        }
                    }
                }
                // One lock per unit, exclusive if any access to it is;
                // exclusive ones first.
                unit_at.sort_unstable_by(|a, b| (!a.2, a.0, &a.1).cmp(&(!b.2, b.0, &b.1)));
                unit_at.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
                let mut seen_x: Vec<(TableId, Vec<u8>)> = Vec::new();
                unit_at.retain(|u| {
                    if u.2 {
                        seen_x.push((u.0, u.1.clone()));
                        true
                    } else {
                        !seen_x.iter().any(|x| x.0 == u.0 && x.1 == u.1)
                    }
                });
                for (t, bytes, x) in &unit_at {
                    us.push((*t, buf.len() as u32, bytes.len() as u32, *x));
                    buf.extend_from_slice(bytes);
                }
            }
            let key = |e: &(TableId, u32, u32)| &buf[e.1 as usize..(e.1 + e.2) as usize];
            // Lazy: a write is blind if declared so and never otherwise.
            let same =
                |a: &(TableId, u32, u32), b: &(TableId, u32, u32)| a.0 == b.0 && key(a) == key(b);
            // (A key also declared as a read is read: not blind. `rs` lost
            // the keys also written above, so the read declarations are
            // looked up among the entries themselves.)
            let blind: Vec<bool> = if wb.is_empty() {
                Vec::new()
            } else {
                ws.iter()
                    .map(|w| {
                        wb.iter().any(|b| same(b, w))
                            && !wn.iter().any(|b| same(b, w))
                            && !keys.iter().any(|d| {
                                d.access == Access::Read
                                    && d.is_key()
                                    && d.table == w.0
                                    && d.lo == key(w)
                            })
                    })
                    .collect()
            };
            let slot = |(i, e): (usize, &(TableId, u32, u32))| Slot {
                table: e.0,
                at: e.1,
                len: e.2,
                owner: partition(e.0, key(e), m),
                blind: blind.get(i).copied().unwrap_or(false),
                word: key_word(key(e)),
                ver: AtomicPtr::new(ptr::null_mut()),
                rec: AtomicPtr::new(ptr::null_mut()),
                wait: AtomicU64::new(0),
            };
            let slots: Box<[Slot]> = ws.iter().chain(rs.iter()).enumerate().map(slot).collect();
            let nxu = us.iter().filter(|u| u.3).count();
            let units: Box<[Slot]> = us
                .iter()
                .map(|u| slot((usize::MAX, &(u.0, u.1, u.2))))
                .collect();
            let lorder = if locking {
                // The slots' keys, then the units (numbered after them).
                let all: Vec<((TableId, u32, u32), bool)> = ws
                    .iter()
                    .chain(rs.iter())
                    .map(|e| (*e, false))
                    .chain(us.iter().map(|u| ((u.0, u.1, u.2), true)))
                    .collect();
                let mut order: Vec<u32> = (0..all.len() as u32).collect();
                // A unit before a key with the same bytes (`!unit`: false
                // sorts first).
                order.sort_unstable_by(|&a, &b| {
                    let (a, b) = (&all[a as usize], &all[b as usize]);
                    (a.0 .0, key(&a.0), !a.1).cmp(&(b.0 .0, key(&b.0), !b.1))
                });
                order.into_boxed_slice()
            } else {
                Box::default()
            };
            BTxn {
                ts: b.first_ts + i as u64,
                state: AtomicU8::new(UNPROCESSED),
                proc: UnsafeCell::new(s.proc),
                keys: buf.as_slice().into(),
                slots,
                nw: ws.len(),
                wranges: std::mem::take(&mut wr).into_boxed_slice(),
                units,
                nxu,
                lorder,
                unusable,
                outcome: UnsafeCell::new(None),
                pwv: None,
                later: Default::default(),
                deps: UnsafeCell::new(Vec::new()),
                rranges: if lazy {
                    std::mem::take(&mut rr).into_boxed_slice()
                } else {
                    Box::default()
                },
                live: Default::default(),
                pinned: Default::default(),
                rmw_prev: UnsafeCell::new(Vec::new()),
                hand: Default::default(),
                external: Default::default(),
                delivered: Default::default(),
            }
        })
        .collect();
    // Under 2pl-ordered the unit locks order range writers and readers;
    // nothing reads the registrations.
    let ranges = !locking && txns.iter().any(|t| !t.wranges.is_empty());
    BatchCtx {
        txns,
        release: b.release,
        ranges,
        drain,
        cc_left: AtomicUsize::new(m),
        exec_left: AtomicUsize::new(n),
        parts: Box::default(),
        groups: false,
        lazy_next: AtomicUsize::new(0),
        lazy_done: AtomicUsize::new(0),
    }
}

/// A CC thread: placeholders for its keys, batch after batch.
fn cc_main(sh: &Shared, me: u16, local: &LocalEpoch, rx: Receiver<Arc<BatchCtx>>) {
    // The latest version of each record this thread owns (thread-local,
    // as the thesis keeps it), and the record itself.
    let mut latest: LatestMap = sh.tables.iter().map(|_| CcMap::default()).collect();
    // Records whose chains grew, with the batch of the version that
    // superseded an older one: GC candidates.
    let mut superseded: std::collections::VecDeque<(u64, *mut Version, u32)> = Default::default();
    let mut recycler = Recycler::new(sh.tables.len());
    let locking = sh.cfg.protocol == DetProtocol::TwoPlOrdered;
    let lazy = sh.cfg.protocol == DetProtocol::Lazy;
    // Lazy with several CC threads (partitioned stickification): these
    // threads put the stickies in, annotate the declared reads (the
    // last-writer table's answer, read by the now-phase thread) and count
    // the chain bound, each for the keys it owns; one thread then runs the
    // now-phases (`lazy::stick_main`).
    let partitioned = lazy && sh.cfg.cc_threads > 1;
    let annotate = sh.cfg.read_annotation || partitioned;
    let bound = u64::from(sh.cfg.chain_bound);
    // 2pl-ordered: the lock sequences of the range-lock units this thread
    // owns, per table.
    let mut unit_maps: Vec<UnitMap> = sh.tables.iter().map(|_| UnitMap::default()).collect();
    let mut ever: Vec<bool> = Vec::new();
    // Lazy with one CC thread: this thread is the stickification thread.
    let mut stick = (lazy && !partitioned).then(lazy::Stickifier::default);
    loop {
        let ctx = match rx.recv_timeout(Duration::from_millis(2)) {
            Ok(ctx) => ctx,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // Idle: collect what the executors have finished since.
                if !superseded.is_empty() {
                    collect(sh, &mut superseded, &mut recycler, &local.pin());
                }
                let n = recycler.reclaim(local.epochs());
                sh.collected.fetch_add(n, Ordering::Relaxed);
                local.collect();
                if me == 0 {
                    // No batch to plan: the last ones are freed here.
                    free_spent(sh);
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        if partitioned {
            // The now-phase thread's backlog bound holds here too: the CC
            // threads run at most `lazy_backlog` batches ahead of it.
            let mut idle = 0;
            while sh.lazy.staged.load(Ordering::Acquire) >= sh.cfg.lazy_backlog {
                crate::backoff::snooze(&mut idle);
            }
        }
        let busy = std::time::Instant::now();
        // Which tables ever had a write range, read once per batch: it
        // cannot change while the batch is in this stage (see the head
        // store below), and the flag shares its line with the range lock
        // that execution threads write.
        ever.clear();
        ever.extend(sh.ranges.iter().map(|r| r.ever.load(Ordering::Acquire)));
        {
            let g = local.pin();
            for txn in ctx.txns.iter().take(PREFETCH_AHEAD) {
                prefetch_entries(me, &latest, txn, locking || annotate);
            }
            for (i, txn) in ctx.txns.iter().enumerate() {
                #[cfg(test)]
                if txn.ts == sh.panic_at_ts.load(Ordering::Relaxed) && me == 0 {
                    panic!("injected CC stage failure at timestamp {}", txn.ts);
                }
                if let Some(ahead) = ctx.txns.get(i + PREFETCH_AHEAD) {
                    prefetch_entries(me, &latest, ahead, locking || annotate);
                }
                if let Some(ahead) = ctx
                    .txns
                    .get(i + PREFETCH_TARGETS_AHEAD)
                    .filter(|_| !locking)
                {
                    prefetch_targets(me, &latest, ahead);
                }
                if locking {
                    lock_entries(sh, me, &mut latest, txn, &g);
                    lock_units(sh, me, &mut unit_maps, txn);
                    continue;
                }
                // Lazy: the chain bound's counters, counted here, where the
                // entries are at hand (the reads' here only when
                // partitioned; else the stickification thread counts them).
                let mut hand = false;
                for r in txn.reads().iter().filter(|_| annotate) {
                    if r.owner != me {
                        continue;
                    }
                    let map = &mut latest[r.table.as_u32() as usize];
                    let v = match entry(sh, map, r.table, txn.key(r), &g, None) {
                        Some(e) => {
                            if partitioned {
                                e.n += 1;
                                if e.n > bound {
                                    hand = true;
                                    e.n = 0;
                                }
                            }
                            e.v
                        }
                        None => ptr::null_mut(),
                    };
                    r.ver.store(v, Ordering::Release);
                }
                for w in txn.writes() {
                    if w.owner != me {
                        continue;
                    }
                    let map = &mut latest[w.table.as_u32() as usize];
                    let slot = entry(sh, map, w.table, txn.key(w), &g, Some(ptr::null_mut))
                        .expect("created when absent");
                    if lazy {
                        slot.n += 1;
                        if slot.n > bound {
                            hand = true;
                            slot.n = 0;
                        }
                    }
                    let v = recycler.placeholder(w.table.as_u32(), txn);
                    // On top of the record's head: the version this thread
                    // put there last, or one a range insert of an earlier
                    // transaction put above it. Only a table with write
                    // ranges needs the CAS: a range writer of a batch at or
                    // below this one registered its range (and set `ever`)
                    // before this batch reached the CC stage, and one of a
                    // later batch installs only after this thread planned
                    // that batch, so past this one.
                    // SAFETY: records live while the engine runs.
                    let head = unsafe { &(*slot.rec).head };
                    let mut prev = head.load(Ordering::Acquire);
                    if ever[w.table.as_u32() as usize] {
                        loop {
                            // SAFETY: `v` is not shared yet.
                            unsafe { (*v).prev.store(prev, Ordering::Relaxed) };
                            match head.compare_exchange(
                                prev,
                                v,
                                Ordering::AcqRel,
                                Ordering::Acquire,
                            ) {
                                Ok(_) => break,
                                Err(cur) => prev = cur,
                            }
                        }
                    } else {
                        // SAFETY: `v` is not shared yet; only this thread
                        // writes this record's head.
                        unsafe { (*v).prev.store(prev, Ordering::Relaxed) };
                        head.store(v, Ordering::Release);
                    }
                    if !prev.is_null() {
                        // SAFETY: a record's head is never freed (GC cuts
                        // only behind older versions).
                        unsafe { (*prev).end.store(txn.ts, Ordering::Release) };
                        superseded.push_back((txn.ts, v, w.table.as_u32()));
                    }
                    slot.v = v;
                    w.ver.store(v, Ordering::Release);
                    sh.placeholders.fetch_add(1, Ordering::Relaxed);
                }
                if let Some(st) = stick.as_mut() {
                    st.now(sh, local, &g, &ctx, i, Some(&mut latest), hand);
                } else if partitioned && hand {
                    txn.hand.store(true, Ordering::Relaxed);
                }
            }
            collect(sh, &mut superseded, &mut recycler, &g);
            let n = recycler.reclaim(local.epochs());
            sh.collected.fetch_add(n, Ordering::Relaxed);
            sh.reused
                .fetch_add(std::mem::take(&mut recycler.reused), Ordering::Relaxed);
        }
        sh.cc_busy_ns
            .fetch_add(busy.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let entries = latest
            .iter()
            .map(|m| m.w8.len() + m.short.len() + m.long.len())
            .sum::<usize>();
        sh.cc_map_entries[me as usize].store(entries as u64, Ordering::Relaxed);
        if let Some(st) = stick.as_mut() {
            st.publish(sh, ctx);
            local.collect();
            continue;
        }
        // The barrier: the last CC thread to finish hands the batch on.
        if ctx.cc_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            if partitioned {
                sh.lazy.staged.fetch_add(1, Ordering::AcqRel);
            }
            if let Some(txs) = sh.exec_tx.lock().as_ref() {
                for tx in txs {
                    let _ = tx.send(ctx.clone());
                }
            }
        }
        local.collect();
    }
    recycler.close(&local.pin());
}

/// A CC thread's entry for `(t, key)`, a key it owns: from its own map,
/// else from the index. An absent key is `None`, or, with `born = Some(f)`,
/// a new record with head `f()` put in the index (BOHM: no version yet, the
/// placeholder goes on top; 2pl-ordered: a tombstone, the one version).
///
/// Under BOHM the map is only a cache of the index (the newest version is
/// the record's head, which only this thread moves in a table without
/// write ranges), and a record created here is not put in it: inserts of
/// keys seldom touched again (TPC-C's HISTORY rows) would otherwise grow
/// the map by one entry each, for good. A later access finds the record in
/// the index and caches it then. `2pl-ordered` keeps every entry: its lock
/// sequence lives there.
fn entry<'m>(
    sh: &Shared,
    map: &'m mut CcMap,
    t: TableId,
    key: &[u8],
    g: &Guard<'_>,
    born: Option<fn() -> *mut Version>,
) -> Option<&'m mut Latest> {
    // The record of an absent key: found in the index, or created.
    let keep_born = sh.cfg.protocol != DetProtocol::Bohm;
    let find = || -> Option<(Latest, bool)> {
        let tree = &sh.tables[t.as_u32() as usize];
        let (rec, v, keep) = match tree.get(key, g) {
            Lookup::Found(r) => {
                let rec = r as *const BRecord;
                // SAFETY: records are never freed while the engine runs.
                (rec, unsafe { (*rec).head.load(Ordering::Acquire) }, true)
            }
            Lookup::Missing { .. } => {
                let v = born?();
                let rec = BRecord::new(v);
                match tree.insert(key, rec as u64, g) {
                    Insert::Inserted { .. } => (rec as *const BRecord, v, keep_born),
                    Insert::Exists(r) => {
                        // A range insert (BOHM) put it there meanwhile.
                        // SAFETY: ours was never shared.
                        unsafe { free_record(rec) };
                        let r = r as *const BRecord;
                        // SAFETY: records live while the engine runs.
                        (r, unsafe { (*r).head.load(Ordering::Acquire) }, true)
                    }
                }
            }
        };
        Some((Latest { rec, v, n: 0, w: 0 }, keep))
    };
    let word = |m: &'m mut WordMap, scratch: &'m mut Option<Latest>, w: u64| {
        if let Some(at) = m.find(w) {
            return Some(m.at_mut(at));
        }
        match find()? {
            (l, true) => Some(m.insert(w, l)),
            (l, false) => Some(scratch.insert(l)),
        }
    };
    match map_word(key) {
        Some((true, w)) => word(&mut map.w8, &mut map.scratch, w),
        Some((false, w)) => word(&mut map.short, &mut map.scratch, w),
        None => {
            if !map.long.contains_key(key) {
                match find()? {
                    (l, true) => {
                        map.long.insert(key.into(), l);
                    }
                    (l, false) => return Some(map.scratch.insert(l)),
                }
            }
            map.long.get_mut(key)
        }
    }
}

/// How a CC map keeps `key`: `(true, word)` in `w8` (8 bytes), `(false,
/// word)` in `short` (the bytes, and the length in the top byte), `None`
/// in `long`.
#[inline]
/// Look up together the records of `keys` (of table `t`) that `map` does
/// not hold yet, and add the ones found as [`entry`] would at their first
/// use (a key absent, or one whose batched descent met a change, is left
/// to `entry`): their index descents overlap their misses
/// (`BTree::get_batch`) where `entry` takes them one at a time.
fn preload_entries(sh: &Shared, map: &mut CcMap, t: TableId, keys: &[&[u8]], g: &Guard<'_>) {
    let mut todo: [&[u8]; crate::index::BATCH_MAX] = [&[]; crate::index::BATCH_MAX];
    let mut words = [(false, 0u64); crate::index::BATCH_MAX];
    let mut n = 0;
    for &k in keys.iter().take(crate::index::BATCH_MAX) {
        // Long keys live in `map.long`: left to `entry`.
        let Some((w8, w)) = map_word(k) else { continue };
        let m = if w8 { &map.w8 } else { &map.short };
        if m.find(w).is_none() {
            (todo[n], words[n]) = (k, (w8, w));
            n += 1;
        }
    }
    // A lone lookup has nothing to overlap with.
    if n < 2 {
        return;
    }
    let mut out = [0u64; crate::index::BATCH_MAX];
    sh.tables[t.as_u32() as usize].get_batch(&todo[..n], &mut out[..n], g);
    for (&(w8, w), &r) in words[..n].iter().zip(&out[..n]) {
        if r == 0 {
            continue;
        }
        let rec = r as *const BRecord;
        // SAFETY: records are never freed while the engine runs.
        let v = unsafe { (*rec).head.load(Ordering::Acquire) };
        let m = if w8 { &mut map.w8 } else { &mut map.short };
        // A key twice in `keys` is found twice: added once.
        if m.find(w).is_none() {
            m.insert(w, Latest { rec, v, n: 0, w: 0 });
        }
    }
}

fn map_word(key: &[u8]) -> Option<(bool, u64)> {
    match key.len() {
        8 => Some((true, u64::from_le_bytes(key.try_into().unwrap()))),
        n if n < 8 => {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(key);
            b[7] = n as u8;
            Some((false, u64::from_le_bytes(b)))
        }
        _ => None,
    }
}

/// Prefetch where the CC maps will look up the keys `me` owns of `txn`.
fn prefetch_entries(me: u16, latest: &LatestMap, txn: &BTxn, reads: bool) {
    let slots = if reads {
        &txn.slots[..]
    } else {
        &txn.slots[..txn.nw]
    };
    for sl in slots.iter().filter(|sl| sl.owner == me) {
        latest[sl.table.as_u32() as usize].prefetch(txn.key(sl));
    }
}

/// How many transactions ahead the CC stage prefetches its map entries.
const PREFETCH_AHEAD: usize = 4;

/// How many transactions ahead the CC stage (BOHM), its map entries cached
/// by then, prefetches what a placeholder's insert writes: the record (its
/// head) and its newest version (its end).
const PREFETCH_TARGETS_AHEAD: usize = 2;

/// The second step of the CC stage's prefetching (see
/// [`PREFETCH_TARGETS_AHEAD`]); a hint, nothing is changed.
fn prefetch_targets(me: u16, latest: &LatestMap, txn: &BTxn) {
    for sl in txn.writes().iter().filter(|sl| sl.owner == me) {
        let map = &latest[sl.table.as_u32() as usize];
        let e = match map_word(txn.key(sl)) {
            Some((true, w)) => map.w8.get(w),
            Some((false, w)) => map.short.get(w),
            None => None,
        };
        if let Some(e) = e {
            wordmap::prefetch_line(e.rec);
            wordmap::prefetch_line(e.v);
        }
    }
}

/// `2pl-ordered`'s CC work for one transaction: a lock ticket for each
/// declared key this thread owns, in timestamp order (the thread walks the
/// batch in order). A write waits for every earlier access to the record
/// to complete; a read, for every access up to the last earlier write, so
/// that consecutive reads share the lock. A key no record has yet gets one
/// (a tombstone) so that every access, a read of an absent key included,
/// is locked.
fn lock_entries(sh: &Shared, me: u16, latest: &mut LatestMap, txn: &BTxn, g: &Guard<'_>) {
    for (i, sl) in txn.slots.iter().enumerate() {
        if sl.owner != me {
            continue;
        }
        let map = &mut latest[sl.table.as_u32() as usize];
        let e = entry(sh, map, sl.table, txn.key(sl), g, Some(absent_version))
            .expect("created when absent");
        hand_ticket(sl, e, i < txn.nw);
        sh.placeholders.fetch_add(1, Ordering::Relaxed);
    }
}

/// A CC thread's lock sequences of the range-lock units it owns in one
/// table (2pl-ordered; see [`UnitReg`]).
type UnitMap = HashMap<Box<[u8]>, Latest>;

/// `2pl-ordered`'s CC work for `txn`'s unit locks this thread owns: tickets
/// as [`lock_entries`] hands them out, on lock-only records (a unit is in
/// no index) created at the unit's first lock.
fn lock_units(sh: &Shared, me: u16, maps: &mut [UnitMap], txn: &BTxn) {
    for (i, sl) in txn.units.iter().enumerate() {
        if sl.owner != me {
            continue;
        }
        let map = &mut maps[sl.table.as_u32() as usize];
        let key = txn.key(sl);
        let e = match map.get_mut(key) {
            Some(e) => e,
            None => {
                let v = absent_version();
                let rec = BRecord::new(v);
                sh.unit_recs.lock().push(rec as usize);
                map.entry(key.into())
                    .or_insert(Latest { rec, v, n: 0, w: 0 })
            }
        };
        hand_ticket(sl, e, i < txn.nxu);
    }
}

/// Hand `sl` the next lock ticket of the record `e` describes: a write
/// waits for every earlier access to complete; a read, for every access
/// up to the last earlier write (consecutive reads share the lock).
fn hand_ticket(sl: &Slot, e: &mut Latest, write: bool) {
    let ticket = if write {
        let t = e.n;
        e.n += 1;
        e.w = e.n;
        t
    } else {
        e.n += 1;
        e.w
    };
    sl.ver.store(e.v, Ordering::Release);
    sl.rec.store(e.rec as *mut BRecord, Ordering::Release);
    sl.wait.store(ticket, Ordering::Release);
}

/// GC by the batch low watermark. The thesis has one designated execution
/// thread compute `min` over the executors' published batches; here each CC
/// thread reads those counters itself when it collects (a few loads), which
/// gives the same minimum without a thread or a shared watermark word.
///
/// For each version that superseded an
/// older one at a timestamp at or below the watermark, cut the chain behind
/// the first value or tombstone at or below it, which every later reader
/// stops at.
///
/// The walk starts at the superseding version, not at the record's newest
/// one: a hot key's chain holds many newer placeholders (of later
/// transactions and batches), and walking past them for every entry made a
/// batch's GC quadratic in the key's updates. The superseding version is
/// still in the chain: only this thread cuts it, behind versions of larger
/// timestamps, whose entries come later in the queue.
fn collect(
    sh: &Shared,
    q: &mut std::collections::VecDeque<(u64, *mut Version, u32)>,
    recycler: &mut Recycler,
    g: &Guard<'_>,
) {
    let Some(wm) = sh.watermark() else {
        return;
    };
    while let Some(&(ts, from, table)) = q.front() {
        if ts > wm {
            break;
        }
        q.pop_front();
        // Every transaction with a timestamp <= wm is complete, so every
        // version it produced has its final state. The first value or
        // tombstone at or below `from` (whose begin is <= wm) is where every
        // reader of a later timestamp stops at the latest (anything newer
        // that it skips is newer still): nothing behind it is reachable for
        // them.
        let mut p = from;
        while !p.is_null() {
            // SAFETY: reachable versions are alive while pinned.
            let v = unsafe { &*p };
            let st = v.state.load(Ordering::Acquire);
            if v.begin <= wm && (st == VALUE || st == TOMBSTONE) {
                let cut = v.prev.swap(ptr::null_mut(), Ordering::AcqRel);
                if !cut.is_null() {
                    // Unreachable from now on; pinned readers that may
                    // still walk it are covered by the epoch, which the
                    // recycler waits out before reusing it.
                    recycler.retire(g, cut, table);
                }
                break;
            }
            p = v.prev.load(Ordering::Acquire);
        }
    }
}

/// An execution thread.
fn exec_main(sh: &Shared, me: usize, local: &LocalEpoch, rx: Receiver<Arc<BatchCtx>>) {
    let locking = sh.cfg.protocol == DetProtocol::TwoPlOrdered;
    // Set-aside transactions: (index, rounds to skip, next skip).
    let mut aside: Vec<(usize, u32, u32)> = Vec::new();
    let mut blocked: Vec<(usize, usize)> = Vec::new();
    while let Ok(ctx) = rx.recv() {
        let busy = std::time::Instant::now();
        aside.clear();
        if locking {
            run_locked(sh, local, &ctx, me, &mut blocked);
        } else {
            // This thread's share: the thesis's round-robin, every n-th
            // transaction from its own index.
            let n = sh.cfg.exec_threads;
            for j in (me..ctx.txns.len()).step_by(n) {
                // The read set is known before the body runs: bring the
                // next transactions' versions in while this one runs.
                let ahead = |d: usize| ctx.txns.get(j + d * n);
                if let Some(t) = ahead(2) {
                    prefetch_versions(t, false);
                }
                if let Some(t) = ahead(1) {
                    prefetch_versions(t, true);
                }
                let txn = &ctx.txns[j];
                if !try_ready(sh, local, txn) && txn.state.load(Ordering::Acquire) != COMPLETE {
                    // Another thread runs it: take other work, come back.
                    aside.push((j, 0, 0));
                }
            }
        }
        // The set-aside transactions: claimed by another thread when this
        // one reached them, or abandoned because a read found its producer
        // running elsewhere. Retried (a waiting thread takes other work
        // rather than wait in the OS); spin, then yield, only when every
        // one still waits for another thread. A transaction that is set
        // aside again is retried after a doubling number of rounds (up to
        // 64): each retry runs its body up to the blocked read again, work
        // that the producer's thread needs the cores for.
        let mut idle = 0u32;
        while !aside.is_empty() {
            let before = aside.len();
            aside.retain_mut(|(j, skip, next)| {
                let t = &ctx.txns[*j];
                if *skip > 0 {
                    *skip -= 1;
                    return true;
                }
                if t.state.load(Ordering::Acquire) == UNPROCESSED && !try_ready(sh, local, t) {
                    *next = (*next * 2).clamp(1, 64);
                    *skip = *next;
                }
                t.state.load(Ordering::Acquire) != COMPLETE
            });
            if aside.len() == before {
                crate::backoff::snooze(&mut idle);
            } else {
                idle = 0;
            }
        }
        if let Some(last) = ctx.txns.last() {
            sh.finished[me].store(last.ts, Ordering::Release);
        }
        sh.exec_busy_ns
            .fetch_add(busy.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if ctx.exec_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            finish_batch(sh, local, ctx);
        }
        local.collect();
    }
}

/// Prefetch what `txn`'s body will read (a hint: nothing is changed):
/// first (`data` false) the version each declared read names and the one
/// below each of its placeholders; then (`data` true, once those are
/// cached) the start of the values of the ones already filled.
fn prefetch_versions(txn: &BTxn, data: bool) {
    for (i, sl) in txn.slots.iter().enumerate() {
        let mut v = sl.ver.load(Ordering::Acquire);
        if v.is_null() {
            continue;
        }
        if i < txn.nw {
            if data {
                // The placeholder's own buffer (a reused version's), which
                // the body's write fills: its first lines.
                // SAFETY: the placeholders of a planned batch are alive;
                // the buffer pointer is read only (a pending version's
                // buffer changes only in its producer's run, and a stale
                // pointer makes a useless hint, not a fault).
                unsafe {
                    let d: &[u8] = &(*(*v).data.get());
                    if !d.is_empty() {
                        wordmap::prefetch_line(d.as_ptr());
                        if d.len() > 64 {
                            wordmap::prefetch_line(d.as_ptr().wrapping_add(64));
                        }
                    }
                }
            }
            // A placeholder: its previous version is the one read.
            // SAFETY: the placeholders of a planned batch are alive, and
            // so is the version below one (superseded in this batch, it is
            // collected only once every executor has finished the batch;
            // this one has not).
            v = unsafe { (*v).prev.load(Ordering::Acquire) };
            if v.is_null() {
                continue;
            }
        }
        if !data {
            wordmap::prefetch_line(v);
            continue;
        }
        // SAFETY: as above (a declared read's version was the newest when
        // this batch was planned, so it is superseded in this batch or
        // later). Its data is immutable once the state says VALUE.
        unsafe {
            if (*v).state.load(Ordering::Acquire) == VALUE {
                let d: &[u8] = &(*(*v).data.get());
                let p = d.as_ptr();
                wordmap::prefetch_line(p);
                if d.len() > 64 {
                    wordmap::prefetch_line(p.wrapping_add(64));
                }
            }
        }
    }
}

/// `2pl-ordered`: run this thread's share of the batch (every n-th,
/// ...). A transaction takes its locks in lexicographic key order; when the
/// next one is held, the transaction is set aside with the locks it has,
/// and the thread goes on with its other transactions, coming back to the
/// set-aside ones (the thesis's non-blocking thread model: no OS wait).
/// Locks are granted in timestamp order, so the oldest unfinished
/// transaction anywhere can always take all of its locks: progress.
fn run_locked(
    sh: &Shared,
    local: &LocalEpoch,
    ctx: &BatchCtx,
    me: usize,
    blocked: &mut Vec<(usize, usize)>,
) {
    blocked.clear();
    if let Some(n) = ctx.drain {
        // A new range-lock unit: every earlier batch's transactions must
        // be complete (they did not lock it). This thread has finished its
        // share of them; the others finish theirs without it.
        let mut idle = 0u32;
        while sh.batches.load(Ordering::Acquire) < n {
            crate::backoff::snooze(&mut idle);
        }
    }
    for j in (me..ctx.txns.len()).step_by(sh.cfg.exec_threads) {
        let mut held = 0;
        if take_locks(&ctx.txns[j], &mut held) {
            run_claimed(sh, local, &ctx.txns[j]);
        } else {
            blocked.push((j, held));
        }
        // Come back to the oldest set-aside transaction now and then:
        // its locks are the likeliest to have been released.
        if let Some(&mut (b, ref mut held)) = blocked.first_mut() {
            if take_locks(&ctx.txns[b], held) {
                run_claimed(sh, local, &ctx.txns[b]);
                blocked.remove(0);
            }
        }
    }
    let mut idle = 0u32;
    while !blocked.is_empty() {
        let before = blocked.len();
        blocked.retain_mut(|(b, held)| {
            if take_locks(&ctx.txns[*b], held) {
                run_claimed(sh, local, &ctx.txns[*b]);
                false
            } else {
                true
            }
        });
        if blocked.len() == before {
            // Every one waits for another thread's transaction.
            crate::backoff::snooze(&mut idle);
        } else {
            idle = 0;
        }
    }
}

/// Take `txn`'s locks in lexicographic order, from the `held`-th on; true
/// once it holds them all. A lock is held once every access its ticket
/// waits for has completed; nobody else can take it then (tickets are
/// handed out once), so a lock taken stays taken.
fn take_locks(txn: &BTxn, held: &mut usize) -> bool {
    while let Some(&i) = txn.lorder.get(*held) {
        let sl = txn.lock_slot(i);
        let rec = sl.rec.load(Ordering::Acquire);
        // SAFETY: records live while the engine runs; the CC stage set
        // every lock before handing the batch on.
        if unsafe { (*rec).released.load(Ordering::Acquire) } < sl.wait.load(Ordering::Relaxed) {
            return false;
        }
        *held += 1;
    }
    true
}

/// Claim (nobody else runs a `2pl-ordered` transaction) and run `txn`,
/// whose locks are held; then release them.
fn run_claimed(sh: &Shared, local: &LocalEpoch, txn: &BTxn) {
    let claimed = try_execute(sh, local, txn);
    debug_assert!(
        claimed,
        "2pl-ordered transactions are run by their own thread only"
    );
    for sl in txn.slots.iter().chain(txn.units.iter()) {
        // SAFETY: as in `take_locks`. The release store publishes this
        // transaction's in-place writes to the next holder.
        unsafe {
            (*sl.rec.load(Ordering::Relaxed))
                .released
                .fetch_add(1, Ordering::Release)
        };
    }
}

/// Claim and run `txn`; true if this thread completed it (false: another
/// thread had claimed it, or it was set aside, unclaimed again).
fn try_execute(sh: &Shared, local: &LocalEpoch, txn: &BTxn) -> bool {
    if txn
        .state
        .compare_exchange(UNPROCESSED, EXECUTING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    let g = local.pin();
    execute(sh, local, &g, txn, 0)
}

/// Claim and run `txn` unless it would wait for a producer that another
/// thread is running (then false, and nothing was run).
///
/// A body that reads such a producer's version is abandoned at that read
/// (set aside, see [`execute`]): the work up to it is lost, and on a
/// contended workload (YCSB 10RMW at theta 0.9, two execution threads)
/// a million bodies a run were set aside, about half a body each wasted.
/// The versions a body will read are known before it runs (its
/// placeholders' predecessors and its read-set annotations), so they are
/// checked first (`waits_elsewhere`); the check is a hint (a dependency it
/// does not see is handled by the body's reads as before).
fn try_ready(sh: &Shared, local: &LocalEpoch, txn: &BTxn) -> bool {
    let g = local.pin();
    let mut budget = WAIT_CHECK_BUDGET;
    if waits_elsewhere(txn, &mut budget) {
        return false;
    }
    if txn
        .state
        .compare_exchange(UNPROCESSED, EXECUTING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return false;
    }
    execute(sh, local, &g, txn, 0)
}

/// How many unclaimed producers `waits_elsewhere` looks into, in all.
const WAIT_CHECK_BUDGET: u32 = 16;

/// Whether running `txn` now would meet a pending version whose producer
/// another thread has claimed, directly or through unclaimed producers it
/// would run first (at most `budget` of them looked into).
fn waits_elsewhere(txn: &BTxn, budget: &mut u32) -> bool {
    for (i, sl) in txn.slots.iter().enumerate() {
        let mut p = sl.ver.load(Ordering::Acquire);
        if i < txn.nw && !p.is_null() {
            // A placeholder: the version below it is the one read.
            // SAFETY: the placeholders of a planned batch are alive.
            p = unsafe { (*p).prev.load(Ordering::Acquire) };
        }
        // SAFETY: the caller is pinned; the walk stops at the first value
        // or tombstone below `ts`, above which GC never cuts while `txn`
        // is unfinished (as in `visible`).
        if let Walk::Pending(v) = unsafe { walk(p, txn.ts) } {
            // SAFETY: a pending version's producer is alive (see
            // `finish_batch`); the version is alive while pinned.
            let prod = unsafe { &*(*v).producer };
            match prod.state.load(Ordering::Acquire) {
                EXECUTING => return true,
                UNPROCESSED if *budget > 0 => {
                    *budget -= 1;
                    if waits_elsewhere(prod, budget) {
                        return true;
                    }
                }
                _ => {}
            }
        }
    }
    false
}

/// [`visible`] without waiting: the version visible at `ts` from `start`
/// (`Some(None)`: absent or a tombstone), or `None` if the walk meets a
/// version whose producer has not completed (the caller reads the key
/// the blocking way, outside any index callback).
fn visible_complete(start: *mut Version, ts: u64) -> Option<Option<*const Version>> {
    // SAFETY: the caller is pinned (reachable versions are alive).
    match unsafe { walk(start, ts) } {
        Walk::Settled(v) => Some(v),
        Walk::Pending(_) => None,
    }
}

/// Where a walk for timestamp `ts` from `start` ends: at the version
/// visible at `ts` (`Settled(None)`: absent or a tombstone), or at the
/// first pending version on the way (skipped versions are passed, and so
/// are versions of `ts` or later).
enum Walk {
    Settled(Option<*const Version>),
    Pending(*const Version),
}

/// The one chain walk of BOHM's readers (`visible`, `visible_complete`,
/// `waits_elsewhere`).
///
/// # Safety
/// The caller is pinned, and `start` is null or a version reachable for
/// a reader at `ts` (a record's head, a placeholder's predecessor, a
/// read-set annotation).
unsafe fn walk(start: *mut Version, ts: u64) -> Walk {
    let mut p = start;
    let mut first = true;
    while !p.is_null() {
        // SAFETY: reachable versions are alive while pinned.
        let v = unsafe { &*p };
        if v.begin >= ts {
            p = v.prev.load(Ordering::Acquire);
            continue;
        }
        // The first version below ts ends at or after ts; one reached by
        // passing skipped versions ends where the skipped one begins.
        debug_assert!(!first || ts <= v.end.load(Ordering::Acquire));
        first = false;
        match v.state.load(Ordering::Acquire) {
            VALUE => return Walk::Settled(Some(p)),
            TOMBSTONE => return Walk::Settled(None),
            SKIPPED => p = v.prev.load(Ordering::Acquire),
            _ => return Walk::Pending(p),
        }
    }
    Walk::Settled(None)
}

/// The deepest recursive execution of producers; below it, a reader sets
/// its transaction aside (the producer's own thread runs its transactions
/// in timestamp order, so it gets there: dependencies point to smaller
/// timestamps).
const MAX_DEPTH: u32 = 256;

/// Spins a read waits for a producer running on another thread before
/// setting its transaction aside.
const PRODUCER_SPINS: u32 = 128;

/// Run `txn`, which this thread has claimed: complete it (true), or, if a
/// read found a producer running on another thread (or below the recursion
/// limit), abandon it (false): its writes were private, nothing of it is
/// visible, and it is unclaimed again for any thread to run later (the
/// thesis's non-blocking thread model, §5.4: a blocked transaction is set
/// aside and the thread takes other work).
///
/// No livelock: the oldest unfinished transaction anywhere reads only
/// complete versions or unclaimed producers, which it runs itself (they
/// are older still, so none of them is claimed elsewhere either); only a
/// transaction with an older one running can be set aside.
fn execute(sh: &Shared, local: &LocalEpoch, g: &Guard<'_>, txn: &BTxn, depth: u32) -> bool {
    let result = match &txn.unusable {
        Some(e) => Err(TxError::Error(e.clone())),
        None => {
            let mut tx = BohmTx {
                sh,
                local,
                g,
                txn,
                depth,
                writes: Vec::with_capacity(txn.nw),
                blocked: false,
                rwrites: Vec::new(),
            };
            // SAFETY: this thread won the claim: it alone touches `proc`.
            let proc = unsafe { &mut *txn.proc.get() };
            // A panicking body must not take the executor down with it
            // (the batch would never be released): it aborts, with an error.
            let later = txn.later.load(Ordering::Relaxed);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut t = Txn::new(&mut tx);
                if later {
                    // Lazy: the rest of a body whose now-phase ended; its
                    // output went to the client at commit.
                    proc.later_phase(&mut t)
                        .map(|()| Box::new(()) as Box<dyn Any + Send>)
                } else {
                    proc.run(&mut t)
                }
            }))
            .unwrap_or_else(|p| {
                if tx.blocked {
                    return Err(TxError::Conflict(ConflictReason::LockConflict));
                }
                let msg = panic_message(&*p);
                Err(TxError::Error(Error::InvalidArgument(format!(
                    "procedure '{}' panicked: {msg}",
                    proc.name()
                ))))
            });
            if tx.blocked {
                // Set aside, whatever the body made of the blocked read.
                drop(r);
                txn.state.store(UNPROCESSED, Ordering::Release);
                sh.set_aside.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            let r = match r {
                Ok(out) if later => lazy::later_complete(&tx).map(|()| out),
                r => r,
            };
            match r {
                Ok(out) => {
                    tx.fill(true);
                    Ok(Outcome::Committed(out))
                }
                Err(e) => Err(e),
            }
        }
    };
    let outcome = match result {
        Ok(o) => Ok(o),
        Err(e) => {
            // Nothing of it may be seen: every placeholder is skipped
            // (2pl-ordered: its writes were never applied; its `ph` are the
            // records' own versions, left as they are).
            // (Lazy: only the stickies; what a now-phase wrote stays.)
            for w in txn
                .writes()
                .iter()
                .filter(|_| matches!(sh.cfg.protocol, DetProtocol::Bohm | DetProtocol::Lazy))
            {
                let v = w.ver.load(Ordering::Acquire);
                // SAFETY: placeholders of a planned batch are alive; only
                // their producer (this thread) sets their state.
                let v = unsafe { &*v };
                if v.state.load(Ordering::Relaxed) == PENDING {
                    v.state.store(SKIPPED, Ordering::Release);
                }
            }
            if txn.later.load(Ordering::Relaxed) {
                // A later phase cannot abort: its commit was promised.
                // Its stickies read as skipped (the values before it);
                // counted, and said in the statistics.
                sh.lazy.later_errors.fetch_add(1, Ordering::Relaxed);
            }
            match e {
                TxError::Error(Error::UserAbort) => Ok(Outcome::Aborted),
                // A reconnaissance that no longer holds aborts the request,
                // deterministically (replay finds the same state), and its
                // client may submit it again.
                TxError::Conflict(ConflictReason::Reconnaissance) => Ok(Outcome::Aborted),
                TxError::Error(e) => Err(e),
                TxError::Conflict(r) => Err(Error::InvalidArgument(format!(
                    "a BOHM transaction cannot have a conflict ({r})"
                ))),
            }
        }
    };
    // SAFETY: claimed by this thread; read only after COMPLETE.
    unsafe { *txn.outcome.get() = Some(outcome) };
    txn.state.store(COMPLETE, Ordering::Release);
    if txn.later.load(Ordering::Relaxed) {
        sh.lazy.later_done.fetch_add(1, Ordering::Relaxed);
    }
    if depth > 0 {
        sh.recursive.fetch_add(1, Ordering::Relaxed);
    }
    true
}

/// A **full system failure** (Faleiro's thesis §6.4.7): request `ts` failed
/// where its protocol cannot roll it back, so the state may hold part of
/// it. Its timestamp is expunged from the input log (durably, before
/// anyone is told), then the batch it is in and everything after it fail
/// with [`Error::SystemFailure`] (none of their outcomes is released: the
/// caller has not completed the failed piece yet, so its batch cannot have
/// been). Recovery replays the log from the last checkpoint without it.
/// Without an input log nothing can be recovered: the engine stays failed.
fn system_failure(sh: &Shared, ts: u64, what: String) {
    let mut reason = what;
    if let Some(dir) = sh.input_dir.get() {
        if let Err(e) = crate::det::expunge::add(dir, ts, &reason) {
            // Recovery would meet the same failure again and refuse to
            // start (and try the expunge again then).
            reason = format!("{reason}; expunging it failed: {e}");
        }
    } else {
        reason = format!("{reason}; in memory, nothing can be recovered");
    }
    let e = Error::SystemFailure {
        request: ts,
        reason,
    };
    // The first failure is the one every caller gets.
    let _ = sh.system_failure.set(e.clone());
    if let Some(f) = sh.failer.get() {
        f.fail(e);
    }
}

/// Every transaction of the batch is complete: hand the outcomes back, and
/// publish the batch. The batch itself (its transactions, which pending
/// versions point at) is dropped through the epoch, after every reader
/// that could have seen one of its versions pending has unpinned.
fn finish_batch(sh: &Shared, local: &LocalEpoch, ctx: Arc<BatchCtx>) {
    let outs = ctx
        .txns
        .iter()
        .map(|t| {
            // SAFETY: every transaction is complete; the outcome is taken
            // once, by this finisher.
            let o = unsafe { (*t.outcome.get()).take() };
            o.unwrap_or_else(|| {
                Err(Error::InvalidArgument(
                    "a BOHM transaction completed without an outcome".into(),
                ))
            })
        })
        .collect();
    unregister_ranges(sh, &ctx);
    ctx.release.executed(outs);
    // Release: 2pl-ordered's drain (`run_locked`) reads it as "every
    // transaction of the batch is complete".
    sh.batches.fetch_add(1, Ordering::Release);
    // Readers of later batches may still hold its transactions (a pending
    // version's producer): freed after the epoch, by the planning thread.
    let e = local.pin().epoch();
    sh.spent.lock().push_back((e, ctx));
}

/// Free the executed batches no pinned reader can reach any more.
///
/// On the planning thread (before it plans the next batch), which
/// allocated their transactions' key sets: freed there, their memory comes
/// back to its allocator at once. An executor freed them before, through
/// the epoch, so every batch cost the executors (the stage that bounds
/// a contended workload) ten thousand frees of another thread's memory, and
/// the planning thread fresh pages.
fn free_spent(sh: &Shared) {
    loop {
        let ctx = {
            let mut q = sh.spent.lock();
            match q.front() {
                Some(&(e, _)) if sh.epochs.reclaimable(e) => q.pop_front().map(|(_, c)| c),
                _ => None,
            }
        };
        match ctx {
            Some(c) => drop(c),
            None => break,
        }
    }
}

/// A buffered insert into a declared write range: table, key, value.
type RangeInsert = (TableId, Box<[u8]>, Box<[u8]>);

/// A transaction's own write of a declared key, until its fill.
enum Own {
    /// The value, in a buffer of its own (moved into the placeholder at
    /// the fill).
    Value(Box<[u8]>),
    /// The value, copied into the placeholder's own buffer (a reused
    /// version's, of the same length; see [`Recycler`]). Nobody reads a
    /// pending version's data: the fill publishes it with the state.
    Placed,
    /// A delete.
    Delete,
}

/// The transaction a body runs on under BOHM.
struct BohmTx<'a> {
    sh: &'a Shared,
    local: &'a LocalEpoch,
    g: &'a Guard<'a>,
    txn: &'a BTxn,
    depth: u32,
    /// Own writes, one entry per declared slot written.
    writes: Vec<(usize, Own)>,
    /// A read found its producer running on another thread: the
    /// transaction is set aside (see [`execute`]).
    blocked: bool,
    /// Inserts of new keys in the declared write ranges.
    rwrites: Vec<RangeInsert>,
}

impl BohmTx<'_> {
    /// The declared write slot of `(t, key)`.
    fn slot(&self, t: TableId, key: &[u8]) -> Option<usize> {
        // Compare a word of each key first: most declared keys differ in
        // their first 8 bytes, and a byte comparison is a library call.
        let w = key_word(key);
        self.txn.writes().iter().position(|sl| {
            sl.word == w && sl.table == t && cmp_same_word(self.txn.key(sl), key).is_eq()
        })
    }

    /// Whether table `t` ever had a declared write range.
    fn ranged(&self, t: TableId) -> Result<bool, Error> {
        let reg = self
            .sh
            .ranges
            .get(t.as_u32() as usize)
            .ok_or(Error::BadTableId(t.as_u32()))?;
        Ok(reg.ever.load(Ordering::Acquire))
    }

    /// Before reading `[lo, hi]` of table `t`: every older transaction
    /// whose declared write range overlaps it is complete (run here, or
    /// waited for briefly, or this transaction is set aside). Its inserts
    /// are then in the index and their chains.
    fn await_ranges(&mut self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> TxResult<()> {
        let reg = &self.sh.ranges[t.as_u32() as usize];
        let mut pending: Vec<*const BTxn> = Vec::new();
        {
            let l = reg.list.read();
            for e in l.overlapping(lo, hi) {
                let older = e.txns.partition_point(|&(ts, _)| ts < self.txn.ts);
                let complete = |w: *const BTxn| {
                    // SAFETY: registered transactions are alive (their
                    // batch unregisters before it is freed).
                    unsafe { &*w }.state.load(Ordering::Acquire) == COMPLETE
                };
                // `done` is published with release after acquiring each
                // transaction's COMPLETE, so acquiring it orders this read
                // after their inserts as acquiring each state would.
                let seen = e.done.load(Ordering::Acquire).min(older);
                let mut d = seen;
                while d < older && complete(e.txns[d].1) {
                    d += 1;
                }
                if d > seen {
                    // Written only when it moves: every reader of a hot
                    // range would otherwise write its cache line.
                    e.done.fetch_max(d, Ordering::AcqRel);
                }
                for &(_, w) in e.txns[d..older].iter() {
                    if !complete(w) {
                        pending.push(w);
                    }
                }
            }
        }
        for w in pending {
            // SAFETY: as above; this thread is pinned, so the batch is not
            // freed while it runs or waits.
            let w = unsafe { &*w };
            run_producer(
                self.sh,
                self.local,
                self.g,
                w,
                self.depth,
                &mut self.blocked,
            )?;
        }
        Ok(())
    }

    /// `2pl-ordered`: a scan under a unit lock this transaction holds (its
    /// declared read or write range's, see [`UnitReg`]): no writer of a key
    /// under the unit runs meanwhile, so the records' one versions are
    /// read in place. A range no held unit covers is refused (it would
    /// hold no lock). Like BOHM's, a scan sees this transaction's writes
    /// of declared keys, not its own range inserts (they reach the index
    /// at commit).
    fn scan_locked(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxResult<usize> {
        let starts = |b: Bound<&[u8]>, u: &[u8]| match b {
            Bound::Included(k) | Bound::Excluded(k) => k.starts_with(u),
            Bound::Unbounded => u.is_empty(),
        };
        let covered = self.txn.units.iter().any(|u| {
            let unit = self.txn.key(u);
            u.table == t && starts(lo, unit) && starts(hi, unit)
        });
        if !covered {
            return Err(TxError::Error(Error::InvalidArgument(format!(
                "2pl-ordered: a scan of table {} that no declared range of the request covers \
                 (it would hold no lock)",
                t.as_u32()
            ))));
        }
        let tree = self.sh.table(t)?;
        // Read in the index's callback: under the unit lock nothing is
        // waited for, and the scan stops at its limit.
        let mut n = 0;
        let this = &*self;
        tree.scan(lo, hi, opts.reverse, self.g, Unobserved, |k, r| {
            if opts.limit.is_some_and(|l| n >= l) {
                return false;
            }
            let own = this.slot(t, k).and_then(|s| this.own(s));
            let v: &[u8] = match own {
                Some(Some(v)) => v,
                Some(None) => return true,
                None => {
                    // SAFETY: records live while the engine runs; the unit
                    // lock keeps writers of the key away while it is read.
                    let v = unsafe { &*(*(r as *const BRecord)).head.load(Ordering::Acquire) };
                    if v.state.load(Ordering::Acquire) != VALUE {
                        return true;
                    }
                    // SAFETY: as above.
                    unsafe { &(&*v.data.get())[..] }
                }
            };
            let v = match opts.slice {
                Some((s, e)) => crate::txn::clamp_slice(v, s, e),
                None => v,
            };
            n += 1;
            f(k, v)
        });
        Ok(n)
    }

    /// `2pl-ordered`: commit a range insert in place, under the range's
    /// unit lock (held exclusively: nobody else touches a key under it).
    /// The key's record, if some CC thread created one (an absent version
    /// for a declared access of a later transaction), gets the value in
    /// its one version; otherwise a new record goes into the index.
    fn install_locked(&self, t: TableId, key: &[u8], val: Box<[u8]>) {
        let tree = &self.sh.tables[t.as_u32() as usize];
        let mut val = Some(val);
        loop {
            if let Lookup::Found(r) = tree.get(key, self.g) {
                // SAFETY: records live while the engine runs; the version
                // is the record's one, and the unit lock keeps every other
                // reader and writer of the key away.
                unsafe {
                    let v = &*(*(r as *const BRecord)).head.load(Ordering::Acquire);
                    *v.data.get() = val.take().expect("once");
                    v.state.store(VALUE, Ordering::Release);
                }
                return;
            }
            let v = new_version(self.txn.ts, self.txn, VALUE, ptr::null_mut());
            // SAFETY: not shared yet.
            unsafe { *(*v).data.get() = val.take().expect("once") };
            let rec = BRecord::new(v);
            match tree.insert(key, rec as u64, self.g) {
                Insert::Inserted { .. } => return,
                Insert::Exists(_) => {
                    // A CC thread created the key's record meanwhile: put
                    // the value there instead.
                    // SAFETY: never shared; take the value back first.
                    unsafe {
                        val = Some(std::mem::take(&mut *(*v).data.get()));
                        free_record(rec);
                    }
                }
            }
        }
    }

    /// Commit a range insert: a version of `key` at this transaction's
    /// timestamp, in a new record, or linked into the key's chain below
    /// every version of a later transaction (the CC stage may have put a
    /// later placeholder there already). Readers of a later timestamp
    /// wait for this transaction first (`await_ranges`); earlier ones skip
    /// the version.
    fn install_fresh(&self, t: TableId, key: &[u8], val: Box<[u8]>) {
        let ts = self.txn.ts;
        let tree = &self.sh.tables[t.as_u32() as usize];
        let v = new_version(ts, self.txn, VALUE, ptr::null_mut());
        // SAFETY: not shared yet.
        unsafe { *(*v).data.get() = val };
        let mut spins = 0u32;
        loop {
            match tree.get(key, self.g) {
                Lookup::Missing { .. } => {
                    let rec = BRecord::new(v);
                    match tree.insert(key, rec as u64, self.g) {
                        Insert::Inserted { .. } => return,
                        Insert::Exists(_) => {
                            // SAFETY: never shared; its version is `v`,
                            // which is kept.
                            unsafe {
                                (*rec).head.store(ptr::null_mut(), Ordering::Relaxed);
                                free_record(rec);
                            }
                        }
                    }
                }
                Lookup::Found(r) => {
                    // SAFETY: records live while the engine runs.
                    let rec = unsafe { &*(r as *const BRecord) };
                    let mut p = rec.head.load(Ordering::Acquire);
                    if p.is_null() {
                        // The owning CC thread is putting its first
                        // placeholder there.
                        crate::backoff::snooze(&mut spins);
                        continue;
                    }
                    // The lowest version of a later transaction, and the
                    // one below it.
                    let mut above: Option<&Version> = None;
                    while !p.is_null() {
                        // SAFETY: reachable versions are alive while pinned.
                        let cur = unsafe { &*p };
                        if cur.begin < ts {
                            break;
                        }
                        above = Some(cur);
                        p = cur.prev.load(Ordering::Acquire);
                    }
                    // SAFETY: `v` is not shared yet.
                    unsafe {
                        (*v).prev.store(p, Ordering::Relaxed);
                        (*v).end
                            .store(above.map_or(u64::MAX, |a| a.begin), Ordering::Relaxed);
                    }
                    let linked = match above {
                        Some(a) => {
                            a.prev
                                .compare_exchange(p, v, Ordering::AcqRel, Ordering::Acquire)
                        }
                        None => {
                            rec.head
                                .compare_exchange(p, v, Ordering::AcqRel, Ordering::Acquire)
                        }
                    };
                    if linked.is_ok() {
                        return;
                    }
                    // A later placeholder arrived meanwhile: again.
                }
            }
        }
    }

    /// The declared read of `(t, key)` (reads are sorted at planning: a
    /// long read-only transaction declares thousands).
    fn declared_read(&self, t: TableId, key: &[u8]) -> Option<usize> {
        // By table and word first: a byte comparison (a library call) only
        // between keys that share their first 8 bytes.
        let w = key_word(key);
        self.txn
            .reads()
            .binary_search_by(|sl| {
                (sl.table, sl.word)
                    .cmp(&(t, w))
                    .then_with(|| cmp_same_word(self.txn.key(sl), key))
            })
            .ok()
    }

    /// This transaction's own write of declared slot `slot`: `Some(None)`
    /// a delete.
    fn own(&self, slot: usize) -> Option<Option<&[u8]>> {
        let (_, w) = self.writes.iter().find(|(s, _)| *s == slot)?;
        Some(match w {
            Own::Value(v) => Some(&v[..]),
            Own::Placed => {
                let ph = self.txn.slots[slot].ver.load(Ordering::Acquire);
                // SAFETY: this transaction's own placeholder, alive with
                // its batch; only its producer (this thread, now) writes
                // the buffer while it is pending.
                Some(unsafe { &(&*(*ph).data.get())[..] })
            }
            Own::Delete => None,
        })
    }

    fn record(&self, t: TableId, key: &[u8]) -> Result<Option<&BRecord>, Error> {
        let tree = self.sh.table(t)?;
        Ok(match tree.get(key, self.g) {
            // SAFETY: records live while the engine runs.
            Lookup::Found(v) => Some(unsafe { &*(v as *const BRecord) }),
            Lookup::Missing { .. } => None,
        })
    }

    /// The value of `(t, key)` visible to this transaction.
    fn read(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.read_known(t, key, None)
    }

    /// [`BohmTx::read`], with the key's record when the caller has it (a
    /// scan found it in the index): no second descent.
    fn read_known(
        &mut self,
        t: TableId,
        key: &[u8],
        known: Option<&BRecord>,
    ) -> TxResult<Option<&[u8]>> {
        if self.sh.cfg.protocol == DetProtocol::TwoPlOrdered {
            return self.read_locked(t, key);
        }
        if let Some((_, _, v)) = self
            .rwrites
            .iter()
            .find(|(tt, k, _)| *tt == t && &k[..] == key)
        {
            let v: *const [u8] = &v[..];
            // SAFETY: `rwrites` is not changed while the slice is out (the
            // borrow of self lasts as long as it).
            return Ok(Some(unsafe { &*v }));
        }
        let slot = self.slot(t, key);
        if self.sh.cfg.protocol == DetProtocol::Lazy {
            self.lazy_may_read(t, key, slot)?;
        }
        let ranged = self.ranged(t)?;
        if ranged {
            self.await_ranges(t, Bound::Included(key), Bound::Included(key))?;
        }
        let start = if let Some(s) = slot {
            if let Some(w) = self.own(s) {
                let w = w.map(|v| v as *const [u8]);
                // SAFETY: `writes` (and the placeholder's buffer) is not
                // changed while the slice is out (the borrow of self lasts
                // as long as it).
                return Ok(w.map(|v| unsafe { &*v }));
            }
            // A declared write: the version before this transaction's own
            // placeholder is the one to read (a read-modify-write reads
            // the previous version), with no walk past later placeholders.
            let ph = self.txn.slots[s].ver.load(Ordering::Acquire);
            // Lazy: a later phase reads what its own now-phase wrote (the
            // placeholder is filled already; under BOHM it is pending
            // while its producer runs).
            if self.sh.cfg.protocol == DetProtocol::Lazy {
                // SAFETY: the placeholders of a planned batch are alive.
                match unsafe { (*ph).state.load(Ordering::Acquire) } {
                    // SAFETY: filled, so immutable and alive while pinned.
                    VALUE => return Ok(Some(unsafe { &(&*(*ph).data.get())[..] })),
                    TOMBSTONE => return Ok(None),
                    _ => {}
                }
            }
            // SAFETY: the placeholders of a planned batch are alive.
            unsafe { (*ph).prev.load(Ordering::Acquire) }
        } else if let Some(r) = self
            .declared_read(t, key)
            .filter(|_| !ranged && self.sh.cfg.read_annotation)
        {
            // The read-set annotation (not in a table with range inserts:
            // one may sit above the version it names).
            self.txn.reads()[r].ver.load(Ordering::Acquire)
        } else {
            let rec = match known {
                Some(r) => Some(r),
                None => self.record(t, key)?,
            };
            match rec {
                Some(rec) => rec.head.load(Ordering::Acquire),
                None => return Ok(None),
            }
        };
        match visible(
            self.sh,
            self.local,
            self.g,
            start,
            self.txn.ts,
            self.depth,
            &mut self.blocked,
        )? {
            // SAFETY: a filled version's data is immutable and alive while
            // pinned.
            Some(v) => Ok(Some(unsafe { &(*v).data.get().as_ref().unwrap()[..] })),
            None => Ok(None),
        }
    }

    /// `2pl-ordered`: the transaction holds the lock of every key it
    /// declared; the record's one version is read in place.
    fn read_locked(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        let v = if let Some(s) = self.slot(t, key) {
            if let Some(w) = self.own(s) {
                let w = w.map(|v| v as *const [u8]);
                // SAFETY: as in `read_known`.
                return Ok(w.map(|v| unsafe { &*v }));
            }
            self.txn.slots[s].ver.load(Ordering::Acquire)
        } else if let Some(r) = self.declared_read(t, key) {
            self.txn.reads()[r].ver.load(Ordering::Acquire)
        } else if self.txn.in_wrange(t, key) {
            // A key of a declared write range: this transaction holds the
            // range's unit exclusively, so no other transaction reads or
            // writes any key under it until it is done (see `UnitReg`).
            if let Some((_, _, v)) = self
                .rwrites
                .iter()
                .find(|(tt, k, _)| *tt == t && &k[..] == key)
            {
                let v: *const [u8] = &v[..];
                // SAFETY: `rwrites` is not changed while the slice is out.
                return Ok(Some(unsafe { &*v }));
            }
            match self.record(t, key)? {
                // SAFETY: records live while the engine runs; 2pl-ordered
                // keeps one version per record.
                Some(rec) => rec.head.load(Ordering::Acquire),
                None => return Ok(None),
            }
        } else {
            return Err(TxError::Error(Error::InvalidArgument(format!(
                "2pl-ordered: a read of table {} key {key:02x?} that the request did not declare \
                 (it would hold no lock)",
                t.as_u32()
            ))));
        };
        // SAFETY: the record's one version; this transaction holds its lock,
        // so no writer replaces the data while the slice is out (the
        // transaction releases its locks only after its body returns).
        let v = unsafe { &*v };
        Ok(match v.state.load(Ordering::Acquire) {
            // SAFETY: as above.
            VALUE => Some(unsafe { &(&*v.data.get())[..] }),
            _ => None,
        })
    }

    fn write(&mut self, t: TableId, key: &[u8], val: Option<&[u8]>) -> TxResult<()> {
        let Some(s) = self.slot(t, key) else {
            if self.txn.in_wrange(t, key) {
                return self.write_in_range(t, key, val);
            }
            return Err(TxError::Error(Error::InvalidArgument(format!(
                "BOHM: a write to table {} key {key:02x?} that the request did not declare",
                t.as_u32()
            ))));
        };
        if self.sh.cfg.protocol == DetProtocol::Lazy {
            let ph = self.txn.slots[s].ver.load(Ordering::Acquire);
            // SAFETY: the placeholders of a planned batch are alive.
            if unsafe { (*ph).state.load(Ordering::Acquire) } != PENDING {
                return Err(TxError::Error(Error::InvalidArgument(format!(
                    "lazy: the later phase writes table {} key {key:02x?}, which its now-phase \
                     wrote already",
                    t.as_u32()
                ))));
            }
        }
        let val = match val {
            None => Own::Delete,
            Some(val) if matches!(self.sh.cfg.protocol, DetProtocol::Bohm | DetProtocol::Lazy) => {
                let ph = self.txn.slots[s].ver.load(Ordering::Acquire);
                // SAFETY: this transaction's own placeholder, pending: only
                // its producer, this thread now, touches its buffer until
                // the fill publishes it (a set-aside run's copy is
                // overwritten by the next run's).
                let buf = unsafe { &mut *(*ph).data.get() };
                if buf.len() == val.len() {
                    buf.copy_from_slice(val);
                    Own::Placed
                } else {
                    Own::Value(val.into())
                }
            }
            Some(val) => Own::Value(val.into()),
        };
        match self.writes.iter_mut().find(|(w, _)| *w == s) {
            Some(w) => w.1 = val,
            None => self.writes.push((s, val)),
        }
        Ok(())
    }

    /// A write to a key of a declared write range (not an exact declared
    /// key): an insert of a key absent at this transaction's timestamp,
    /// buffered until commit. Updating or deleting an existing key there
    /// is refused: its chain belongs to its CC thread, which has no
    /// placeholder for this transaction.
    fn write_in_range(&mut self, t: TableId, key: &[u8], val: Option<&[u8]>) -> TxResult<()> {
        let refuse = |what: &str| {
            Err(TxError::Error(Error::InvalidArgument(format!(
                "BOHM: {what} of table {} key {key:02x?} inside a declared write range: only \
                 inserts of new keys are allowed there (declare the key itself)",
                t.as_u32()
            ))))
        };
        let Some(val) = val else {
            return refuse("a delete");
        };
        if let Some(w) = self
            .rwrites
            .iter_mut()
            .find(|(tt, k, _)| *tt == t && &k[..] == key)
        {
            w.2 = val.into();
            return Ok(());
        }
        if self.read(t, key)?.is_some() {
            return refuse("an update");
        }
        self.rwrites.push((t, key.into(), val.into()));
        Ok(())
    }

    /// Commit: fill every placeholder with the last write to its key, and
    /// (`skip_rest`) skip the others. Lazy's now-phase fills what it wrote
    /// and leaves the rest pending: the stickies.
    fn fill(&mut self, skip_rest: bool) {
        if self.sh.cfg.protocol == DetProtocol::TwoPlOrdered {
            // In place, under the write lock: no reader or writer holds
            // the record (the old value is dropped here).
            for (s, val) in self.writes.drain(..) {
                // SAFETY: the record's one version, locked by this
                // transaction.
                let v = unsafe { &*self.txn.slots[s].ver.load(Ordering::Acquire) };
                match val {
                    Own::Value(val) => {
                        // SAFETY: as above.
                        unsafe { *v.data.get() = val };
                        v.state.store(VALUE, Ordering::Release);
                    }
                    Own::Delete => {
                        // SAFETY: as above.
                        unsafe { *v.data.get() = Box::new([]) };
                        v.state.store(TOMBSTONE, Ordering::Release);
                    }
                    Own::Placed => unreachable!("2pl-ordered writes are not placed"),
                }
            }
            for (t, k, val) in std::mem::take(&mut self.rwrites) {
                self.install_locked(t, &k, val);
            }
            return;
        }
        for (t, k, v) in std::mem::take(&mut self.rwrites) {
            self.install_fresh(t, &k, v);
        }
        // One entry per written slot (`write` replaces): its value is in
        // the placeholder's buffer already, or moves into the version (no
        // copy).
        for (s, val) in self.writes.drain(..) {
            // SAFETY: placeholders of a planned batch are alive; this
            // thread runs their producer.
            let v = unsafe { &*self.txn.slots[s].ver.load(Ordering::Acquire) };
            let st = match val {
                Own::Placed => VALUE,
                Own::Value(val) => {
                    // SAFETY: written once, before the state is published.
                    unsafe { *v.data.get() = val };
                    VALUE
                }
                Own::Delete => TOMBSTONE,
            };
            v.state.store(st, Ordering::Release);
        }
        // Declared but not written: skipped.
        for w in self.txn.writes().iter().filter(|_| skip_rest) {
            // SAFETY: as above; only this producer sets the state.
            let v = unsafe { &*w.ver.load(Ordering::Acquire) };
            if v.state.load(Ordering::Relaxed) == PENDING {
                v.state.store(SKIPPED, Ordering::Release);
            }
        }
    }
}

/// The version visible at `ts` of the chain that `start` is in (the
/// record's newest version, a placeholder's predecessor, or a read-set
/// annotation): a value, or `None` if absent or a tombstone; executing or
/// waiting for unfilled producers.
///
/// The thesis prints the visibility test as `begin <= ts <= end`. Both
/// bounds inclusive is wrong for a read-modify-write: a transaction would
/// see its own placeholder (begin = ts). The test here is `begin < ts <=
/// end` (digest, "Visibility bounds"); a transaction's own writes are read
/// from its buffer.
fn visible(
    sh: &Shared,
    local: &LocalEpoch,
    g: &Guard<'_>,
    start: *mut Version,
    ts: u64,
    depth: u32,
    blocked: &mut bool,
) -> TxResult<Option<*const Version>> {
    loop {
        // SAFETY: the caller is pinned; `start` is reachable at `ts`.
        match unsafe { walk(start, ts) } {
            Walk::Settled(v) => return Ok(v),
            // Run or wait for its producer, then walk again from the start
            // (the version is final now).
            Walk::Pending(v) => {
                // SAFETY: a pending version's producer is alive (see
                // `finish_batch`); the version is alive while pinned.
                let prod = unsafe { &*(*v).producer };
                run_producer(sh, local, g, prod, depth, blocked)?
            }
        }
    }
}

/// Make sure `prod`, an older transaction a reader depends on, is complete:
/// run it here (recursively, Listing 5.1) if nobody has claimed it, or
/// spin briefly for the thread that runs it; otherwise (or below the
/// recursion limit) set the reader aside (`blocked`, and an error that
/// unwinds its body: see [`execute`]).
fn run_producer(
    sh: &Shared,
    local: &LocalEpoch,
    g: &Guard<'_>,
    prod: &BTxn,
    depth: u32,
    blocked: &mut bool,
) -> TxResult<()> {
    if prod.state.load(Ordering::Acquire) == COMPLETE {
        return Ok(());
    }
    let claimed = depth < MAX_DEPTH
        && prod
            .state
            .compare_exchange(UNPROCESSED, EXECUTING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
    let done = if claimed {
        execute(sh, local, g, prod, depth + 1)
    } else {
        // Running elsewhere (or too deep to run here): a short spin, then
        // set this transaction aside.
        (0..PRODUCER_SPINS).any(|_| {
            std::hint::spin_loop();
            prod.state.load(Ordering::Acquire) == COMPLETE
        })
    };
    if !done {
        *blocked = true;
        return Err(TxError::Conflict(ConflictReason::LockConflict));
    }
    Ok(())
}

/// A batch-engine transaction's point reads and writes (BOHM's and PWV's),
/// and the conditional writes of `TxnOps` built on them: an insert writes
/// only an absent key, an update or delete only a present one.
trait PointRw {
    fn read_point(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>>;
    fn write_point(&mut self, t: TableId, key: &[u8], val: Option<&[u8]>) -> TxResult<()>;
    /// Whether `(t, key)` exists, if the protocol can say without reading
    /// its value (lazy's non-substantiating read); `None`: read it.
    fn exists_unread(&mut self, _t: TableId, _key: &[u8]) -> TxResult<Option<bool>> {
        Ok(None)
    }

    fn insert_absent(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        let exists = match self.exists_unread(t, key)? {
            Some(e) => e,
            None => self.read_point(t, key)?.is_some(),
        };
        if exists {
            return Ok(false);
        }
        self.write_point(t, key, Some(val))?;
        Ok(true)
    }

    /// `val` `None`: a delete.
    fn write_present(&mut self, t: TableId, key: &[u8], val: Option<&[u8]>) -> TxResult<bool> {
        if self.read_point(t, key)?.is_none() {
            return Ok(false);
        }
        self.write_point(t, key, val)?;
        Ok(true)
    }
}

impl PointRw for BohmTx<'_> {
    fn read_point(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.read(t, key)
    }
    fn exists_unread(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<bool>> {
        self.lazy_exists(t, key)
    }
    fn write_point(&mut self, t: TableId, key: &[u8], val: Option<&[u8]>) -> TxResult<()> {
        self.write(t, key, val)
    }
}

/// The message of a caught panic (a procedure's body).
fn panic_message(p: &(dyn Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

impl TxnOps for BohmTx<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.read(t, key)
    }

    fn get_slice(&mut self, t: TableId, key: &[u8], at: Range<usize>) -> TxResult<Option<&[u8]>> {
        Ok(self.read(t, key)?.map(|v| {
            let end = at.end.min(v.len());
            &v[at.start.min(end)..end]
        }))
    }

    fn prefetch(&mut self, _t: TableId, _keys: &[&[u8]], _value_len: usize) {}

    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        self.write(t, key, Some(val))
    }

    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.insert_absent(t, key, val)
    }

    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.write_present(t, key, Some(val))
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        self.write_present(t, key, None)
    }

    fn scan(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxResult<usize> {
        if self.sh.cfg.protocol == DetProtocol::TwoPlOrdered {
            return self.scan_locked(t, lo, hi, opts, f);
        }
        if self.sh.cfg.protocol == DetProtocol::Lazy
            && self.txn.runs_late()
            && !self.txn.declared_range(t, lo, hi)
        {
            return Err(TxError::Error(Error::InvalidArgument(format!(
                "lazy: a later phase (or an external read) scanned table {} outside its declared ranges",
                t.as_u32()
            ))));
        }
        let tree = self.sh.table(t)?;
        if self.ranged(t)? {
            // Every older range insert into the scanned range is in the
            // index before the scan (no phantom).
            self.await_ranges(t, lo, hi)?;
        }
        // Read in the index's callback while every key's visible version
        // is complete: a read that would run (or wait for) a producer must
        // not happen inside the callback, so at such a key, or one this
        // transaction wrote or inserted (its own buffers answer), the walk
        // stops there; the key is read outside, and the walk resumes after
        // it. Resuming is safe at any moment: a key's visible version at
        // this timestamp does not change, every older range insert is in
        // the index already (above), and keys are never removed from it (a
        // delete is a tombstone).
        let owned = |b: Bound<&[u8]>| b.map(<[u8]>::to_vec);
        let (mut lo_b, mut hi_b) = (owned(lo), owned(hi));
        let ts = self.txn.ts;
        let mut n = 0;
        loop {
            let mut slow: Option<(Vec<u8>, u64)> = None;
            let mut stop = false;
            {
                let this = &*self;
                tree.scan(
                    lo_b.as_ref().map(Vec::as_slice),
                    hi_b.as_ref().map(Vec::as_slice),
                    opts.reverse,
                    self.g,
                    Unobserved,
                    |k, r| {
                        if opts.limit.is_some_and(|l| n >= l) {
                            stop = true;
                            return false;
                        }
                        let own = this.slot(t, k).is_some()
                            || this
                                .rwrites
                                .iter()
                                .any(|(tt, kk, _)| *tt == t && &kk[..] == k);
                        // SAFETY: records live while the engine runs.
                        let head = unsafe { &*(r as *const BRecord) }
                            .head
                            .load(Ordering::Acquire);
                        let seen = if own {
                            None
                        } else {
                            visible_complete(head, ts)
                        };
                        let Some(seen) = seen else {
                            slow = Some((k.to_vec(), r));
                            return false;
                        };
                        let Some(v) = seen else {
                            return true;
                        };
                        // SAFETY: a complete version's data never changes;
                        // it is alive while pinned.
                        let v: &[u8] = unsafe { &(&*(*v).data.get())[..] };
                        let v = match opts.slice {
                            Some((s, e)) => crate::txn::clamp_slice(v, s, e),
                            None => v,
                        };
                        n += 1;
                        if !f(k, v) {
                            stop = true;
                            return false;
                        }
                        true
                    },
                );
            }
            if stop {
                return Ok(n);
            }
            let Some((k, r)) = slow else {
                return Ok(n);
            };
            // SAFETY: records live while the engine runs.
            let rec = unsafe { &*(r as *const BRecord) };
            if let Some(v) = self.read_known(t, &k, Some(rec))? {
                let v = match opts.slice {
                    Some((s, e)) => crate::txn::clamp_slice(v, s, e),
                    None => v,
                };
                n += 1;
                if !f(&k, v) {
                    return Ok(n);
                }
            }
            if opts.reverse {
                hi_b = Bound::Excluded(k);
            } else {
                lo_b = Bound::Excluded(k);
            }
        }
    }

    fn is_snapshot(&self) -> bool {
        false
    }
}

//! `Database`, `Options`, `Worker`: opening an engine, tables, per-thread workers,
//! and the retry loop.

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::catalog::{Table, TableId};
use crate::cc::ermia::MvState;
use crate::cc::xid::XidTable;
use crate::cc::{self, TxnSets};
use crate::epoch::{Epochs, LocalEpoch, Ticker};
use crate::error::{ConflictReason, Error, TxError, TxResult};
use crate::txn::Txn;

/// The concurrency-control protocol, chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Silo's OCC (Tu et al., SOSP 2013): serializable.
    Silo,
    /// No concurrency control: direct index reads and writes with no read or
    /// write sets, applied immediately (Silo section 5.2's key-value
    /// baseline). Not isolated; a user abort does not roll anything back.
    /// For measuring what tracking costs, never for real data.
    NoCc,
    /// ERMIA's snapshot isolation (Kim et al., SIGMOD 2016, section 3.6.1):
    /// multi-versioned records, first-updater-wins. Not serializable (write
    /// skew is possible).
    Si,
    /// ERMIA's SI plus the Serial Safety Net (section 3.6.2): serializable.
    Ssn,
}

impl Protocol {
    /// Every protocol, for help texts.
    pub const ALL: [Protocol; 4] = [Protocol::Silo, Protocol::Si, Protocol::Ssn, Protocol::NoCc];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Silo => "silo",
            Protocol::NoCc => "nocc",
            Protocol::Si => "si",
            Protocol::Ssn => "ssn",
        }
    }

    /// Whether the protocol keeps multi-versioned records (ERMIA's).
    pub fn is_multiversion(self) -> bool {
        matches!(self, Protocol::Si | Protocol::Ssn)
    }
}

impl std::str::FromStr for Protocol {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "silo" => Ok(Protocol::Silo),
            "nocc" | "none" => Ok(Protocol::NoCc),
            "si" | "ermia-si" => Ok(Protocol::Si),
            "ssn" | "ermia-ssn" | "ermia" => Ok(Protocol::Ssn),
            other => Err(Error::InvalidArgument(format!(
                "unknown protocol '{other}' (known: {})",
                Protocol::ALL.map(|p| p.name()).join(", ")
            ))),
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How to open a database.
#[derive(Clone, Debug)]
pub struct Options {
    pub(crate) protocol: Protocol,
    pub(crate) workers: usize,
    pub(crate) epoch_interval: Duration,
    pub(crate) snapshots: bool,
    pub(crate) snapshot_epochs: u64,
    pub(crate) max_retries: Option<u32>,
}

impl Options {
    /// An in-memory database with Silo, 64 worker slots, 40 ms epochs
    /// (Silo's default) and snapshots off.
    pub fn in_memory() -> Options {
        Options {
            protocol: Protocol::Silo,
            workers: 64,
            epoch_interval: Duration::from_millis(40),
            snapshots: false,
            snapshot_epochs: 25,
            max_retries: None,
        }
    }

    /// The concurrency-control protocol.
    pub fn protocol(mut self, p: Protocol) -> Options {
        self.protocol = p;
        self
    }

    /// Maximum number of workers alive at once.
    pub fn workers(mut self, n: usize) -> Options {
        self.workers = n;
        self
    }

    /// Interval of the global epoch (Silo: 40 ms).
    pub fn epoch_interval(mut self, d: Duration) -> Options {
        self.epoch_interval = d;
        self
    }

    /// Keep old versions for read-only snapshot transactions (Silo section
    /// 4.9). Off by default: with it on, deleted keys stay in the index until
    /// no snapshot can see them.
    pub fn snapshots(mut self, on: bool) -> Options {
        self.snapshots = on;
        self
    }

    /// Epochs per snapshot epoch (Silo: 25, i.e. one second at 40 ms).
    pub fn snapshot_epochs(mut self, k: u64) -> Options {
        self.snapshot_epochs = k;
        self
    }

    /// Give up after this many attempts in [`Worker::run`] (default: never).
    pub fn max_retries(mut self, n: u32) -> Options {
        self.max_retries = Some(n);
        self
    }

    fn validate(&self) -> Result<(), Error> {
        if self.workers == 0 || self.workers > 4096 {
            return Err(Error::InvalidArgument(format!(
                "workers must be in 1..=4096, got {}",
                self.workers
            )));
        }
        if self.epoch_interval.is_zero() || self.epoch_interval > Duration::from_secs(10) {
            return Err(Error::InvalidArgument(format!(
                "epoch interval must be in (0, 10 s], got {:?}",
                self.epoch_interval
            )));
        }
        if self.snapshots && self.protocol.is_multiversion() {
            return Err(Error::InvalidArgument(format!(
                "snapshots(true) enables Silo's read-only snapshots; under {} every \
                 transaction already reads a snapshot",
                self.protocol
            )));
        }
        if self.snapshot_epochs == 0 {
            return Err(Error::InvalidArgument(
                "snapshot_epochs must be at least 1".into(),
            ));
        }
        if self.max_retries == Some(0) {
            return Err(Error::InvalidArgument(
                "max_retries must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

impl Default for Options {
    fn default() -> Self {
        Options::in_memory()
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

pub(crate) struct DbInner {
    pub opts: Options,
    pub epochs: Arc<Epochs>,
    pub tables: RwLock<Vec<Arc<Table>>>,
    pub orphan_unlinks: Mutex<Vec<PendingUnlink>>,
    /// ERMIA version-GC entries of dropped workers.
    pub orphan_gc: Mutex<Vec<crate::cc::ermia::GcEntry>>,
    /// ERMIA's commit clock (the commit LSN counter once the log lands).
    pub clock: AtomicU64,
    /// ERMIA's TID table.
    pub xids: XidTable,
    ticker: Mutex<Option<Ticker>>,
}

impl Drop for DbInner {
    fn drop(&mut self) {
        // Stop the ticker first; then no worker exists (each holds an Arc), so
        // the tables can free their records.
        drop(self.ticker.lock().take());
        self.orphan_unlinks.get_mut().clear();
        for e in self.orphan_gc.get_mut().drain(..) {
            // SAFETY: no worker exists; a held record is freed by its last
            // hold once unlinked (linked ones are freed with their table).
            unsafe {
                if (*e.rec).gc_release() {
                    crate::storage::Record::free(e.rec as *mut u8);
                }
            }
        }
        let local = self.epochs.register().expect("a free slot at drop");
        {
            let g = local.pin();
            for t in self.tables.get_mut().iter() {
                t.free_records(&g);
            }
        }
        drop(local);
        self.tables.get_mut().clear();
    }
}

/// An open database. Cheap to clone; all clones share the engine.
#[derive(Clone)]
pub struct Database {
    pub(crate) inner: Arc<DbInner>,
}

impl Database {
    /// Open a database.
    pub fn open(opts: Options) -> Result<Database, Error> {
        opts.validate()?;
        // One extra slot for internal use (drop, maintenance).
        let epochs = Epochs::new(opts.workers + 1, opts.snapshot_epochs);
        let workers = opts.workers;
        let ticker = Ticker::start(Arc::clone(&epochs), opts.epoch_interval);
        Ok(Database {
            inner: Arc::new(DbInner {
                opts,
                epochs,
                tables: RwLock::new(Vec::new()),
                orphan_unlinks: Mutex::new(Vec::new()),
                orphan_gc: Mutex::new(Vec::new()),
                clock: AtomicU64::new(1),
                xids: XidTable::new(workers),
                ticker: Mutex::new(Some(ticker)),
            }),
        })
    }

    /// The options this database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// The protocol in use.
    pub fn protocol(&self) -> Protocol {
        self.inner.opts.protocol
    }

    /// Create a table (an ordered map from byte keys to byte values).
    pub fn create_table(&self, name: &str) -> Result<TableId, Error> {
        self.create(name, false)
    }

    /// Create a secondary index: an ordered table that the application keeps
    /// in step with its primary table inside the same transactions (Silo
    /// section 4.7: secondary key -> primary key, two tree lookups).
    pub fn create_index(&self, name: &str) -> Result<TableId, Error> {
        self.create(name, true)
    }

    fn create(&self, name: &str, secondary: bool) -> Result<TableId, Error> {
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "table name must not be empty".into(),
            ));
        }
        let mut ts = self.inner.tables.write();
        if ts.iter().any(|t| t.name == name) {
            return Err(Error::TableExists(name.into()));
        }
        let id = TableId(ts.len() as u32);
        ts.push(Arc::new(Table::new(id, name.into(), secondary)));
        Ok(id)
    }

    /// Look a table up by name.
    pub fn table(&self, name: &str) -> Result<TableId, Error> {
        self.inner
            .tables
            .read()
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.id)
            .ok_or_else(|| Error::NoSuchTable(name.into()))
    }

    /// Names of all tables, in creation order.
    pub fn table_names(&self) -> Vec<String> {
        self.inner
            .tables
            .read()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// A worker for the calling thread (one per thread; a `Worker` may move
    /// between threads but is used by one at a time).
    pub fn worker(&self) -> Result<Worker, Error> {
        let local = self
            .inner
            .epochs
            .register()
            .filter(|l| l.slot() < self.inner.opts.workers)
            .ok_or(Error::NoWorkerSlot {
                capacity: self.inner.opts.workers,
            })?;
        let slot = local.slot();
        let seed = 0x9E37_79B9_7F4A_7C15u64 ^ ((slot as u64 + 1) << 17);
        Ok(Worker {
            db: Arc::clone(&self.inner),
            local,
            st: WorkerState {
                tables: Vec::new(),
                sets: TxnSets::default(),
                last_tid: 0,
                stats: WorkerStats::default(),
                rng: seed,
                pending_unlinks: VecDeque::new(),
                mv: MvState {
                    slot,
                    ..MvState::default()
                },
            },
        })
    }

    /// The global epoch (for diagnostics).
    pub fn epoch(&self) -> u64 {
        self.inner.epochs.global()
    }

    /// Advance epochs `n` times right now (tests; the ticker does this on its own).
    pub fn tick_epochs(&self, n: usize) {
        for _ in 0..n {
            self.inner.epochs.tick();
        }
    }
}

/// Per-worker counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Committed transactions.
    pub commits: u64,
    /// Transactions rolled back by their own logic.
    pub user_aborts: u64,
    /// Conflict aborts, indexed by [`ConflictReason::index`].
    pub conflicts: [u64; ConflictReason::ALL.len()],
}

impl WorkerStats {
    /// Total conflict aborts.
    pub fn conflict_total(&self) -> u64 {
        self.conflicts.iter().sum()
    }
}

pub(crate) struct WorkerState {
    pub tables: Vec<Arc<Table>>,
    pub sets: TxnSets,
    pub last_tid: u64,
    pub stats: WorkerStats,
    pub rng: u64,
    pub pending_unlinks: VecDeque<PendingUnlink>,
    /// ERMIA: the running transaction's stamps.
    pub mv: MvState,
}

/// A per-thread handle that runs transactions.
pub struct Worker {
    pub(crate) db: Arc<DbInner>,
    pub(crate) local: LocalEpoch,
    pub(crate) st: WorkerState,
}

impl Worker {
    /// Run a one-shot transaction, retrying conflict aborts with randomized
    /// exponential backoff. `f` may run several times; it must not have
    /// effects outside the transaction. Returns `Error::UserAbort` if `f`
    /// returned `Err(TxError::UserAbort)`.
    pub fn run<T, F>(&mut self, mut f: F) -> Result<T, Error>
    where
        F: FnMut(&mut Txn<'_>) -> TxResult<T>,
    {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match self.try_run(&mut f) {
                Ok(v) => return Ok(v),
                Err(TxError::Conflict(r)) => {
                    if let Some(max) = self.db.opts.max_retries {
                        if attempts >= max {
                            return Err(Error::TooManyRetries { attempts, last: r });
                        }
                    }
                    self.backoff(attempts);
                }
                Err(TxError::UserAbort) => return Err(Error::UserAbort),
                Err(TxError::Error(e)) => return Err(e),
            }
        }
    }

    /// One attempt: execute `f`, then commit. Conflicts are returned, not
    /// retried (benchmark drivers count them).
    pub fn try_run<T, F>(&mut self, f: F) -> TxResult<T>
    where
        F: FnOnce(&mut Txn<'_>) -> TxResult<T>,
    {
        self.attempt(None, f)
    }

    /// Run a read-only snapshot transaction (Silo section 4.9): it reads the
    /// database as of the last snapshot epoch boundary, keeps no read set and
    /// never aborts. Requires `Options::snapshots(true)`.
    pub fn run_snapshot<T, F>(&mut self, f: F) -> Result<T, Error>
    where
        F: FnOnce(&mut Txn<'_>) -> TxResult<T>,
    {
        if !self.db.opts.snapshots {
            return Err(Error::InvalidArgument(
                "snapshot transactions need Options::snapshots(true)".into(),
            ));
        }
        match self.attempt(Some(()), f) {
            Ok(v) => Ok(v),
            Err(TxError::UserAbort) => Err(Error::UserAbort),
            Err(TxError::Error(e)) => Err(e),
            Err(TxError::Conflict(r)) => Err(Error::TooManyRetries {
                attempts: 1,
                last: r,
            }),
        }
    }

    fn attempt<T, F>(&mut self, snapshot: Option<()>, f: F) -> TxResult<T>
    where
        F: FnOnce(&mut Txn<'_>) -> TxResult<T>,
    {
        let g = self.local.pin();
        let snapshot = snapshot.map(|_| self.db.epochs.snapshot_boundary());
        let protocol = self.db.opts.protocol;
        if protocol.is_multiversion() {
            cc::ermia::begin(&self.db, &mut self.st);
        }
        let mut tx = Txn::new(&self.db, &mut self.st, &g, protocol, snapshot);
        let out = f(&mut tx);
        let out = match out {
            Ok(v) => tx.commit().map(|_| v),
            Err(e) => {
                tx.abort();
                Err(e)
            }
        };
        match &out {
            Ok(_) => {
                self.st.stats.commits += 1;
            }
            Err(TxError::Conflict(r)) => self.st.stats.conflicts[r.index()] += 1,
            Err(TxError::UserAbort) => self.st.stats.user_aborts += 1,
            Err(TxError::Error(_)) => {}
        }
        if protocol.is_multiversion() {
            cc::ermia::maintain(&self.db, &mut self.st, &g);
        } else {
            cc::maintain(&self.db, &mut self.st, &g);
        }
        drop(g);
        out
    }

    fn backoff(&mut self, attempts: u32) {
        // xorshift64
        let mut x = self.st.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.st.rng = x;
        let cap = 1u64 << attempts.min(10);
        let spins = x % (cap * 16);
        for _ in 0..spins {
            std::hint::spin_loop();
        }
        if attempts > 12 {
            std::thread::yield_now();
        }
    }

    /// Counters since the worker was created (or last reset).
    pub fn stats(&self) -> &WorkerStats {
        &self.st.stats
    }

    /// Reset the counters.
    pub fn reset_stats(&mut self) {
        self.st.stats = WorkerStats::default();
    }

    /// This worker's slot number (0-based, unique among live workers).
    pub fn id(&self) -> usize {
        self.local.slot()
    }

    /// The database this worker belongs to.
    pub fn database(&self) -> Database {
        Database {
            inner: Arc::clone(&self.db),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.st.mv.gc.is_empty() {
            self.db.orphan_gc.lock().extend(self.st.mv.gc.drain(..));
        }
        // Hand deleted records that still wait for their unlink to the database.
        if !self.st.pending_unlinks.is_empty() {
            self.db
                .orphan_unlinks
                .lock()
                .extend(self.st.pending_unlinks.drain(..));
        }
    }
}

//! `Database`, `Options`, `Worker`: opening an engine, tables, per-thread workers,
//! and the retry loop.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
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
use crate::log::checkpoint::CheckpointInfo;
use crate::log::meta::{Meta, MetaTable};
use crate::log::recovery::{LogScan, RecoveryReport};
use crate::log::{CommitToken, Durability, Log, LogCursor, LogStats};
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
    pub(crate) durability: Durability,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) loggers: usize,
    pub(crate) segment_bytes: u64,
    pub(crate) checkpoint_interval: Option<Duration>,
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
            durability: Durability::None,
            data_dir: None,
            loggers: 1,
            segment_bytes: 64 << 20,
            checkpoint_interval: None,
        }
    }

    /// Take a checkpoint in the background every `d` (durable databases;
    /// default: none, see [`Database::checkpoint`]). A checkpoint lets
    /// recovery skip the log it covers, and the covered segments are
    /// deleted.
    pub fn checkpoint_interval(mut self, d: Duration) -> Options {
        self.checkpoint_interval = Some(d);
        self
    }

    /// A durable database in `dir` (created if missing; recovered if it
    /// holds one): Silo by default, every committed update logged, and
    /// [`Worker::run`] returning only once the transaction is durable
    /// (`Durability::Sync`; see [`Options::durability`]).
    pub fn durable(dir: impl AsRef<Path>) -> Options {
        Options {
            durability: Durability::Sync,
            data_dir: Some(dir.as_ref().to_path_buf()),
            ..Options::in_memory()
        }
    }

    /// When `run` returns relative to the log (needs a data directory
    /// unless `Durability::None`).
    pub fn durability(mut self, d: Durability) -> Options {
        self.durability = d;
        self
    }

    /// The data directory (log segments, checkpoints, `tessera.meta`).
    pub fn data_dir(mut self, dir: impl AsRef<Path>) -> Options {
        self.data_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Logger threads (default 1); workers are spread over them.
    pub fn loggers(mut self, n: usize) -> Options {
        self.loggers = n;
        self
    }

    /// Size at which a log segment file is closed and the next one started
    /// (default 64 MiB).
    pub fn segment_bytes(mut self, n: u64) -> Options {
        self.segment_bytes = n;
        self
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
        if self.durability != Durability::None && self.protocol == Protocol::NoCc {
            return Err(Error::InvalidArgument(
                "nocc applies writes without a commit, so it has nothing to log: \
                 use durability none with nocc"
                    .into(),
            ));
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
        match (self.durability, &self.data_dir) {
            (Durability::None, Some(d)) => {
                return Err(Error::InvalidArgument(format!(
                    "data directory {} given with durability none (use async or sync)",
                    d.display()
                )))
            }
            (Durability::Async | Durability::Sync, None) => {
                return Err(Error::InvalidArgument(format!(
                    "durability {} needs a data directory (Options::data_dir)",
                    self.durability
                )))
            }
            _ => {}
        }
        if let Some(d) = self.checkpoint_interval {
            if self.data_dir.is_none() {
                return Err(Error::InvalidArgument(
                    "checkpoint_interval needs a durable database (a data directory)".into(),
                ));
            }
            if d < Duration::from_millis(10) {
                return Err(Error::InvalidArgument(format!(
                    "checkpoint interval must be at least 10 ms, got {d:?}"
                )));
            }
        }
        if self.loggers == 0 || self.loggers > 64 {
            return Err(Error::InvalidArgument(format!(
                "loggers must be in 1..=64, got {}",
                self.loggers
            )));
        }
        if self.segment_bytes < 4096 {
            return Err(Error::InvalidArgument(format!(
                "segment_bytes must be at least 4096, got {}",
                self.segment_bytes
            )));
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
    /// The redo log, when durable.
    pub log: Option<Arc<Log>>,
    /// The data directory's control file (catalog, void ranges).
    pub meta: Mutex<Meta>,
    /// What recovery did at open.
    pub recovery: Option<RecoveryReport>,
    /// One checkpoint at a time.
    pub checkpoint_lock: Mutex<()>,
    /// The last background checkpoint failure.
    pub checkpoint_error: Mutex<Option<Error>>,
    /// Checkpoints taken.
    pub checkpoints: AtomicU64,
    /// Holds the data directory's lock file (released when closed).
    _dir_lock: Option<std::fs::File>,
    ticker: Mutex<Option<Ticker>>,
}

/// The background checkpoint thread: it holds only a weak reference, so
/// the database can close while it sleeps.
struct Checkpointer {
    stop: Arc<(Mutex<bool>, parking_lot::Condvar)>,
    handle: std::thread::JoinHandle<()>,
}

impl Checkpointer {
    fn start(db: std::sync::Weak<DbInner>, every: Duration) -> Checkpointer {
        let stop = Arc::new((Mutex::new(false), parking_lot::Condvar::new()));
        let s = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("tessera-checkpointer".into())
            .spawn(move || loop {
                {
                    let mut g = s.0.lock();
                    if !*g {
                        s.1.wait_for(&mut g, every);
                    }
                    if *g {
                        return;
                    }
                }
                let Some(db) = db.upgrade() else { return };
                if let Err(e) = crate::log::checkpoint::take(&db) {
                    *db.checkpoint_error.lock() = Some(e);
                }
            })
            .expect("spawn the checkpointer");
        Checkpointer { stop, handle }
    }

    fn stop(self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        // The last reference may be dropped by the checkpointer itself.
        if self.handle.thread().id() != std::thread::current().id() {
            let _ = self.handle.join();
        }
    }
}

impl Drop for DbInner {
    fn drop(&mut self) {
        // Stop the ticker first; then no worker exists (each holds an Arc), so
        // the tables can free their records.
        drop(self.ticker.lock().take());
        if let Some(log) = &self.log {
            // Close the current epoch so the final round marks every commit
            // durable (no worker exists any more).
            self.epochs.tick();
            self.epochs.tick();
            log.shutdown();
        }
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
        let local = self
            .epochs
            .register_internal()
            .expect("a free slot at drop");
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

/// An open database. Cheap to clone; all clones share the engine. The
/// database closes (final log round, background threads stopped, data
/// directory unlocked) when the last `Database` and `Worker` are dropped.
#[derive(Clone)]
pub struct Database {
    // Dropped first: stops the checkpointer, which may hold `inner`.
    closer: Arc<Closer>,
    pub(crate) inner: Arc<DbInner>,
}

/// Stops the background checkpointer when the last user handle (a
/// `Database` or a `Worker`) goes, so that the engine closes on the thread
/// that dropped it, not later on the checkpointer's.
#[derive(Default)]
struct Closer {
    checkpointer: Mutex<Option<Checkpointer>>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        if let Some(c) = self.checkpointer.get_mut().take() {
            c.stop();
        }
    }
}

impl Database {
    /// Open a database. With a data directory, recover what it holds first
    /// (see [`Database::recovery_report`]), then start the loggers.
    pub fn open(opts: Options) -> Result<Database, Error> {
        opts.validate()?;
        // Extra slots for internal use (drop, the checkpointer).
        let epochs = Epochs::new(opts.workers + 2, opts.snapshot_epochs);
        let workers = opts.workers;
        let mut tables = Vec::new();
        let mut meta = Meta::default();
        let mut log = None;
        let mut recovery = None;
        let mut dir_lock = None;
        if let Some(dir) = &opts.data_dir {
            dir_lock = Some(Database::lock_dir(dir)?);
            let (m, t, l, r) = Database::recover(&opts, dir, &epochs)?;
            meta = m;
            tables = t;
            log = Some(l);
            recovery = Some(r);
        }
        let ticker = Ticker::start(Arc::clone(&epochs), opts.epoch_interval);
        let every = opts.checkpoint_interval;
        let db = Database {
            inner: Arc::new(DbInner {
                opts,
                epochs,
                tables: RwLock::new(tables),
                orphan_unlinks: Mutex::new(Vec::new()),
                orphan_gc: Mutex::new(Vec::new()),
                clock: AtomicU64::new(1),
                xids: XidTable::new(workers),
                log,
                meta: Mutex::new(meta),
                recovery,
                checkpoint_lock: Mutex::new(()),
                checkpoint_error: Mutex::new(None),
                checkpoints: AtomicU64::new(0),
                _dir_lock: dir_lock,
                ticker: Mutex::new(Some(ticker)),
            }),
            closer: Arc::new(Closer::default()),
        };
        if let Some(every) = every {
            *db.closer.checkpointer.lock() =
                Some(Checkpointer::start(Arc::downgrade(&db.inner), every));
        }
        Ok(db)
    }

    /// Take a checkpoint now, in the calling thread, while transactions go
    /// on (durable databases only; see `log::checkpoint`).
    pub fn checkpoint(&self) -> Result<CheckpointInfo, Error> {
        crate::log::checkpoint::take(&self.inner)
    }

    /// Checkpoints taken since open, and the last background failure.
    pub fn checkpoint_status(&self) -> (u64, Option<Error>) {
        (
            self.inner
                .checkpoints
                .load(std::sync::atomic::Ordering::Relaxed),
            self.inner.checkpoint_error.lock().clone(),
        )
    }

    /// Lock `dir` for this process (a second open of the same directory,
    /// here or in another process, is refused rather than corrupting it).
    fn lock_dir(dir: &Path) -> Result<std::fs::File, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Io(format!("cannot create {}: {e}", dir.display())))?;
        let path = dir.join("LOCK");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::Io(format!("cannot open {}: {e}", path.display())))?;
        match f.try_lock() {
            Ok(()) => Ok(f),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::InvalidArgument(format!(
                "{} is in use by another open database (drop it first, or open another directory)",
                dir.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Error::Io(format!("cannot lock {}: {e}", path.display())))
            }
        }
    }

    /// Recovery at open: read the control file and the log, replay the
    /// durable prefix into fresh tables, record the void range of this
    /// crash and the new run, start the epochs above everything seen, and
    /// start the loggers.
    #[allow(clippy::type_complexity)]
    fn recover(
        opts: &Options,
        dir: &Path,
        epochs: &Arc<Epochs>,
    ) -> Result<(Meta, Vec<Arc<Table>>, Arc<Log>, RecoveryReport), Error> {
        let started = std::time::Instant::now();
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Io(format!("cannot create {}: {e}", dir.display())))?;
        let mut meta = Meta::load(dir)?.unwrap_or_default();
        let scan = LogScan::read(dir)?;
        let read_seconds = started.elapsed().as_secs_f64();
        if meta.run.is_none() && !scan.streams.is_empty() {
            return Err(Error::Corrupt(format!(
                "{} holds log segments but its tessera.meta records no run",
                dir.display()
            )));
        }
        let tables: Vec<Arc<Table>> = meta
            .tables
            .iter()
            .map(|t| Arc::new(Table::new(TableId(t.id), t.name.clone(), t.secondary)))
            .collect();
        let durable = match meta.run {
            Some((loggers, base)) => scan.durable_epoch(loggers, base),
            None => 0,
        };
        let max_seen = scan.max_epoch();
        let mut report = RecoveryReport {
            durable_epoch: durable,
            max_epoch_seen: max_seen,
            segments: scan.streams.iter().map(|s| s.segments.len()).sum(),
            log_bytes: scan.valid_bytes(),
            warnings: scan.torn.iter().map(|t| t.2.clone()).collect(),
            ..RecoveryReport::default()
        };
        scan.truncate_torn()?;
        epochs.start_at(durable.max(max_seen) + 1);
        let ckpt_bytes = match &meta.checkpoint {
            Some((name, c)) => Some((
                dir.join(name),
                crate::log::checkpoint::read(dir, name, *c)?,
                *c,
            )),
            None => None,
        };
        crate::log::checkpoint::remove_stale(dir, meta.checkpoint.as_ref().map(|c| c.0.as_str()));
        report.checkpoint = meta.checkpoint.clone();
        crate::log::recovery::replay(
            &scan,
            ckpt_bytes
                .as_ref()
                .map(|(p, b, c)| (p.as_path(), &b[..], *c)),
            &meta,
            durable,
            &tables,
            opts.protocol,
            epochs,
            &mut report,
        )?;
        if max_seen > durable {
            meta.voids.push((durable, max_seen));
        }
        meta.run = Some((opts.loggers as u32, durable));
        meta.store(dir)?;
        let log = Log::start(
            dir,
            opts.durability,
            Arc::clone(epochs),
            scan.starts(opts.loggers),
            scan.closed_segments(),
            durable,
            opts.segment_bytes,
            opts.epoch_interval,
        )?;
        report.seconds = started.elapsed().as_secs_f64();
        report.phase_seconds[0] = read_seconds;
        Ok((meta, tables, log, report))
    }

    /// What recovery found and did when this database was opened from a
    /// data directory (`None` for in-memory databases).
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.inner.recovery.as_ref()
    }

    /// The durable epoch (0 for in-memory databases).
    pub fn durable_epoch(&self) -> u64 {
        self.inner.log.as_ref().map_or(0, |l| l.durable_epoch())
    }

    /// Log counters (`None` for in-memory databases).
    pub fn log_stats(&self) -> Option<LogStats> {
        self.inner.log.as_ref().map(|l| l.stats())
    }

    /// Wait until the transaction behind `token` is durable. Returns at
    /// once for in-memory databases; an error if a logger failed.
    pub fn wait_durable(&self, token: CommitToken) -> Result<(), Error> {
        match &self.inner.log {
            Some(l) => l.wait_durable(token.epoch),
            None => Ok(()),
        }
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
        if let Some(dir) = &self.inner.opts.data_dir {
            // The catalog is durable before any log record can name the table.
            let mut m = self.inner.meta.lock();
            m.tables.push(MetaTable {
                id: id.0,
                secondary,
                name: name.into(),
            });
            if let Err(e) = m.store(dir) {
                m.tables.pop();
                return Err(e);
            }
        }
        ts.push(Arc::new(Table::new(id, name.into(), secondary)));
        Ok(id)
    }

    /// The table `name`, created if it does not exist yet (for programs
    /// that reopen a recovered database).
    pub fn open_table(&self, name: &str) -> Result<TableId, Error> {
        match self.table(name) {
            Ok(t) => Ok(t),
            Err(_) => match self.create_table(name) {
                Err(Error::TableExists(_)) => self.table(name),
                r => r,
            },
        }
    }

    /// The secondary index `name`, created if it does not exist yet.
    pub fn open_index(&self, name: &str) -> Result<TableId, Error> {
        match self.table(name) {
            Ok(t) => Ok(t),
            Err(_) => match self.create_index(name) {
                Err(Error::TableExists(_)) => self.table(name),
                r => r,
            },
        }
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
            closer: Arc::clone(&self.closer),
            db: Arc::clone(&self.inner),
            local,
            st: WorkerState {
                tables: Vec::new(),
                sets: TxnSets::default(),
                last_tid: 0,
                stats: WorkerStats::default(),
                rng: seed,
                pending_unlinks: VecDeque::new(),
                log: LogCursor::default(),
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
    /// This worker's logging state.
    pub log: LogCursor,
}

/// A per-thread handle that runs transactions.
pub struct Worker {
    // Keeps the background threads alive while a worker runs.
    closer: Arc<Closer>,
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
                Ok(v) => {
                    if let Some(log) = &self.db.log {
                        if log.mode == Durability::Sync {
                            log.wait_durable(self.st.log.ack)?;
                        }
                    }
                    return Ok(v);
                }
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
        self.st.log.ack = snapshot.unwrap_or(0);
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
        if let Some(log) = &self.db.log {
            log.settle(self.st.mv.slot, &mut self.st.log);
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

    /// The durability point of the last committed transaction: pass it to
    /// [`Database::wait_durable`] (with `Durability::Async`; under `Sync`,
    /// `run` has waited already).
    pub fn last_commit(&self) -> CommitToken {
        CommitToken {
            epoch: self.st.log.ack,
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
            closer: Arc::clone(&self.closer),
            inner: Arc::clone(&self.db),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if !self.st.mv.gc.is_empty() {
            self.db.orphan_gc.lock().extend(self.st.mv.gc.drain(..));
        }
        // Records waiting for their inline version to be marked reusable:
        // hand them over as GC entries (stamp 0: due at once), which only
        // prune and drop the hold; the inline version is then not reused.
        if !self.st.mv.inline_free.is_empty() {
            let mut o = self.db.orphan_gc.lock();
            o.extend(self.st.mv.inline_free.drain(..).map(|mut e| {
                e.stamp = 0;
                e
            }));
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

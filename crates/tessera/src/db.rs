//! `Database`, `Options`, `Worker`: opening an engine, tables, per-thread workers,
//! and the retry loop.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::catalog::{Table, TableId};
use crate::cc::{CcProtocol, SharedState, Tx, Visit, WorkerCore};
use crate::epoch::{Epochs, LocalEpoch, Ticker};
use crate::error::{Error, TxError, TxResult};
use crate::log::checkpoint::CheckpointInfo;
use crate::log::meta::{Meta, MetaTable};
use crate::log::recovery::{LogScan, Loss, RecoveryMode, RecoveryReport};
use crate::log::{CommitToken, Durability, Log, LogCursor, LogStats};
use crate::request::{CheckedRequest, KeySet, Reconnaissance, Request};
use crate::txn::Txn;

pub use crate::engine::WorkerStats;
use crate::engine::{Engine, Settings};
use crate::storage::RecordLayout;

pub use crate::cc::{Capabilities, Protocol};

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
    pub(crate) recovery_mode: RecoveryMode,
    pub(crate) read_only: bool,
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
            recovery_mode: RecoveryMode::Strict,
            read_only: false,
        }
    }

    /// How much damage recovery accepts when the data directory is opened
    /// (default [`RecoveryMode::Strict`]: only a torn tail after the
    /// recorded durable frontier, which holds nothing acknowledged). A
    /// mode that accepts a loss reports it in
    /// [`Database::recovery_report`] and keeps copies of what it changed.
    pub fn recovery_mode(mut self, m: RecoveryMode) -> Options {
        self.recovery_mode = m;
        self
    }

    /// Recover the data directory into memory without changing anything
    /// in it (a dry run: no tail is cut, no `LOCK` or control file is
    /// written, nothing is logged), e.g. to check a read-only copy. The
    /// recovery report says what an ordinary open would change. Writes and
    /// new tables are refused with [`Error::ReadOnly`].
    pub fn read_only(mut self, on: bool) -> Options {
        self.read_only = on;
        self
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
        if self.durability != Durability::None && !self.protocol.caps().durable {
            return Err(Error::InvalidArgument(format!(
                "{} applies writes without a commit, so it has nothing to log: \
                     use durability none with {}",
                self.protocol, self.protocol
            )));
        }
        if self.snapshots && !self.protocol.caps().snapshot_txns {
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
        if self.read_only {
            if self.data_dir.is_none() {
                return Err(Error::InvalidArgument(
                    "read_only(true) needs a data directory to recover from".into(),
                ));
            }
            if self.checkpoint_interval.is_some() {
                return Err(Error::InvalidArgument(
                    "a read-only database takes no checkpoints (drop checkpoint_interval)".into(),
                ));
            }
        }
        match (self.durability, &self.data_dir) {
            (_, Some(_)) if self.read_only => {}
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

/// An open database: the [`Engine`] every protocol reaches (its epochs,
/// tables, log; reached through `Deref`), the protocol's state, and what
/// only the database uses.
pub(crate) struct DbInner {
    pub opts: Options,
    pub engine: Engine,
    /// The protocol's database-wide state (`CcProtocol::Shared`).
    pub cc: Box<dyn SharedState>,
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

impl DbInner {
    /// Take a checkpoint now, one at a time (see `log::checkpoint`).
    pub(crate) fn take_checkpoint(&self) -> Result<CheckpointInfo, Error> {
        let (Some(log), Some(dir)) = (&self.log, &self.opts.data_dir) else {
            return Err(Error::InvalidArgument(
                "checkpoints need a durable database (Options::durable)".into(),
            ));
        };
        let _one = self.checkpoint_lock.lock();
        let info = crate::log::checkpoint::take(crate::log::checkpoint::Source {
            log,
            dir,
            epochs: &self.epochs,
            tables: self.tables.read().clone(),
            layout: &*self.cc,
            meta: &self.meta,
        })?;
        self.checkpoints
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(info)
    }
}

impl std::ops::Deref for DbInner {
    type Target = Engine;
    #[inline]
    fn deref(&self) -> &Engine {
        &self.engine
    }
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
                if let Err(e) = db.take_checkpoint() {
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
        // The protocol releases what it holds (queued records of dropped
        // workers) before the tables free their records.
        self.cc.close();
        let local = self
            .epochs
            .register_internal()
            .expect("a free slot at drop");
        {
            let g = local.pin();
            for t in self.engine.tables.get_mut().iter() {
                t.free_records(&g);
            }
        }
        drop(local);
        self.engine.tables.get_mut().clear();
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

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = &self.inner.opts;
        f.debug_struct("Database")
            .field("protocol", &o.protocol)
            .field("durability", &o.durability)
            .field("data_dir", &o.data_dir)
            .field("tables", &self.inner.tables.read().len())
            .field("durable_epoch", &self.durable_epoch())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("protocol", &self.db.opts.protocol)
            .field("stats", &self.core.stats)
            .finish_non_exhaustive()
    }
}

impl Drop for Closer {
    fn drop(&mut self) {
        if let Some(c) = self.checkpointer.get_mut().take() {
            c.stop();
        }
    }
}

/// A data directory path must be a directory (created when `create`).
fn check_dir(dir: &Path, create: bool) -> Result<(), Error> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Error::InvalidArgument(format!(
            "{} is not a directory",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => Err(
            Error::InvalidArgument(format!("{} does not exist", dir.display())),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir)
            .map_err(|e| Error::io(format!("cannot create {}", dir.display()), e)),
        Err(e) => Err(Error::io(format!("cannot read {}", dir.display()), e)),
    }
}

/// Names of the tessera files in `dir` other than `LOCK` (segments,
/// checkpoints, the frontier).
fn tessera_files(dir: &Path) -> Result<Vec<String>, Error> {
    let rd = std::fs::read_dir(dir)
        .map_err(|e| Error::io(format!("cannot list {}", dir.display()), e))?;
    let mut v = Vec::new();
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if crate::log::segment::parse_segment_name(&n).is_some()
            || n == crate::log::frontier::FRONTIER_FILE
            || (n.starts_with("ckpt-") && n.ends_with(".tckp"))
        {
            v.push(n);
        }
    }
    v.sort();
    Ok(v)
}

/// Before an accepted loss changes anything: a `recovery-<time>-<mode>`
/// folder in `dir` with copies of `tessera.meta`, `tessera.frontier`, every
/// file cut (copied) and every file set aside (moved there); under salvage
/// also every segment and the checkpoint (the checkpoint salvage takes
/// retires them).
fn keep_copies(
    dir: &Path,
    mode: RecoveryMode,
    scan: &LogScan,
    ckpt: Option<&Path>,
) -> Result<PathBuf, Error> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut kept = dir.join(format!("recovery-{secs}-{}", mode.name()));
    let mut n = 1;
    while kept.exists() {
        n += 1;
        kept = dir.join(format!("recovery-{secs}-{}-{n}", mode.name()));
    }
    let io = |what: &str, p: &Path, e| Error::io(format!("cannot {what} {}", p.display()), e);
    std::fs::create_dir(&kept).map_err(|e| io("create", &kept, e))?;
    let copy = |p: &Path| -> Result<(), Error> {
        let Some(name) = p.file_name() else {
            return Ok(());
        };
        match std::fs::copy(p, kept.join(name)) {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io("copy", p, e)),
        }
    };
    copy(&dir.join(crate::log::meta::META_FILE))?;
    copy(&dir.join(crate::log::frontier::FRONTIER_FILE))?;
    for (p, _) in &scan.cuts {
        copy(p)?;
    }
    // A torn tail is cut too: keep its bytes with the rest of the evidence.
    for (p, _, _) in &scan.torn {
        copy(p)?;
    }
    if mode == RecoveryMode::Salvage {
        for s in &scan.streams {
            for (_, p, _, _) in &s.segments {
                copy(p)?;
            }
        }
        if let Some(c) = ckpt {
            copy(c)?;
        }
    }
    for p in &scan.set_aside {
        if let Some(name) = p.file_name() {
            std::fs::rename(p, kept.join(name)).map_err(|e| io("move", p, e))?;
        }
    }
    // Make the copies durable before anything they preserve is changed.
    for e in std::fs::read_dir(&kept)
        .map_err(|e| io("list", &kept, e))?
        .flatten()
    {
        if let Ok(f) = std::fs::File::open(e.path()) {
            f.sync_all().map_err(|e2| io("sync", &e.path(), e2))?;
        }
    }
    crate::log::segment::sync_dir(&kept).map_err(|e| io("sync", &kept, e))?;
    crate::log::segment::sync_dir(dir).map_err(|e| io("sync", dir, e))?;
    Ok(kept)
}

/// The text of `REPORT.txt` in a `recovery-*` folder.
fn loss_report(dir: &Path, r: &RecoveryReport) -> String {
    let loss = r.loss.as_ref().expect("a loss to report");
    let mut s = format!(
        "Recovery of {} in mode {} accepted a loss.

",
        dir.display(),
        r.mode
    );
    match loss.acknowledged_epochs {
        Some((lo, hi)) => {
            s += &format!(
                "Acknowledged durable epochs lost: {}..={hi} (recovered to epoch {lo}).
",
                lo + 1
            )
        }
        None => {
            s += "No acknowledged epoch was lost (or tessera.frontier could not tell).
"
        }
    }
    s += &format!(
        "Transaction entries in the parts cut off or set aside: {}.
",
        loss.txns_set_aside
    );
    if !loss.consistent {
        s += "Salvage: the recovered state is NOT guaranteed to be consistent.
";
    }
    s += "
What was found:
";
    for d in &loss.details {
        s += &format!(
            "  {d}
"
        );
    }
    s += "
Files cut or set aside (their originals are in this folder):
";
    for f in &loss.files {
        s += &format!(
            "  {f}
"
        );
    }
    s += "\nTo undo: stop every process using the directory; delete the log segments\n\
           and checkpoints written since this recovery (the next run's segments\n\
           continue right after the last intact one, so they may bear the names of\n\
           files set aside here); then copy the files of this folder, all but\n\
           REPORT.txt, back into the data directory.\n";
    s
}

impl Database {
    /// Open a database. With a data directory, recover what it holds first
    /// (see [`Database::recovery_report`]), then start the loggers.
    pub fn open(opts: Options) -> Result<Database, Error> {
        opts.validate()?;
        // Extra slots for internal use (drop, the checkpointer).
        let epochs = Epochs::new(opts.workers + 2, opts.snapshot_epochs);
        let mut tables = Vec::new();
        let mut meta = Meta::default();
        let mut log = None;
        let mut recovery = None;
        let mut dir_lock = None;
        let settings = Settings {
            workers: opts.workers,
            snapshots: opts.snapshots,
            read_only: opts.read_only,
        };
        // Recovery rebuilds records through the protocol's layout hooks.
        let cc = opts.protocol.new_shared(&settings);
        if let Some(dir) = &opts.data_dir {
            dir_lock = Database::lock_dir(dir, opts.read_only)?;
            let (m, t, l, r) = Database::recover(&opts, dir, &epochs, &*cc)?;
            meta = m;
            tables = t;
            log = l;
            recovery = Some(r);
        }
        let ticker = Ticker::start(Arc::clone(&epochs), opts.epoch_interval);
        let every = opts.checkpoint_interval;
        #[allow(unused_mut)]
        let mut db = Database {
            inner: Arc::new(DbInner {
                opts,
                engine: Engine {
                    opts: settings,
                    epochs,
                    tables: RwLock::new(tables),
                    log,
                },
                cc,
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
        if db.inner.opts.recovery_mode == RecoveryMode::Salvage
            && db.inner.recovery.as_ref().is_some_and(|r| r.loss.is_some())
            && db.inner.log.is_some()
        {
            // Salvage replayed past damage: a checkpoint of what it kept
            // retires the damaged segments (copies were kept first), so the
            // next open finds a clean directory.
            let info = db.inner.take_checkpoint()?;
            if let Some(r) = Arc::get_mut(&mut db.inner).and_then(|i| i.recovery.as_mut()) {
                r.changes.push(format!(
                    "took checkpoint {} of the salvaged state; {} old log segment(s) deleted",
                    info.file.display(),
                    info.segments_deleted
                ));
            }
        }
        if let Some(every) = every {
            *db.closer.checkpointer.lock() =
                Some(Checkpointer::start(Arc::downgrade(&db.inner), every));
        }
        Ok(db)
    }

    /// Take a checkpoint now, in the calling thread, while transactions go
    /// on (durable databases only; see `log::checkpoint`).
    pub fn checkpoint(&self) -> Result<CheckpointInfo, Error> {
        self.inner.take_checkpoint()
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
    /// A read-only open creates nothing: it takes a shared lock on an
    /// existing `LOCK` file (so it does not read a directory being written)
    /// and goes without one when there is none or it cannot be opened (a
    /// read-only copy).
    fn lock_dir(dir: &Path, read_only: bool) -> Result<Option<std::fs::File>, Error> {
        check_dir(dir, !read_only)?;
        let path = dir.join("LOCK");
        let in_use = || {
            Error::InUse(format!(
                "{} is in use by another open database (drop it first, or open another directory)",
                dir.display()
            ))
        };
        if read_only {
            let Ok(f) = std::fs::File::open(&path) else {
                return Ok(None);
            };
            return match f.try_lock_shared() {
                Ok(()) => Ok(Some(f)),
                Err(std::fs::TryLockError::WouldBlock) => Err(in_use()),
                Err(std::fs::TryLockError::Error(_)) => Ok(None),
            };
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("cannot open {}", path.display()), e))?;
        match f.try_lock() {
            Ok(()) => Ok(Some(f)),
            Err(std::fs::TryLockError::WouldBlock) => Err(in_use()),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(Error::io(format!("cannot lock {}", path.display()), e))
            }
        }
    }

    /// Recovery at open, in two phases. First everything is read, checked
    /// and replayed into fresh tables with nothing in the directory
    /// changed, so a refusal (or a read-only open) leaves it as it was:
    /// `tessera.meta`, `tessera.frontier`, every log segment (against the
    /// frontier, under the recovery mode) and the checkpoint. Then, unless
    /// read-only: copies of whatever an accepted loss changes go to a
    /// `recovery-*` folder, torn tails are cut, leftovers removed, the void
    /// range of this crash and the new run are recorded, and the loggers
    /// start (writing a new frontier).
    #[allow(clippy::type_complexity)]
    fn recover(
        opts: &Options,
        dir: &Path,
        epochs: &Arc<Epochs>,
        layout: &dyn RecordLayout,
    ) -> Result<(Meta, Vec<Arc<Table>>, Option<Arc<Log>>, RecoveryReport), Error> {
        use crate::log::frontier::{self, FRONTIER_FILE};
        use crate::log::meta::META_FILE;
        let started = std::time::Instant::now();
        let mode = opts.recovery_mode;
        let salvage = mode == RecoveryMode::Salvage;
        let mut report = RecoveryReport {
            mode,
            dry_run: opts.read_only,
            ..RecoveryReport::default()
        };
        let mut losses: Vec<String> = Vec::new();
        let meta = Meta::load(dir)?;
        let frontier = match frontier::read(dir) {
            Ok(Some(r)) => {
                report.warnings.extend(r.warning);
                Some(r.frontier)
            }
            Ok(None) => None,
            Err(e @ Error::Corrupt(_)) if mode != RecoveryMode::Strict => {
                losses.push(format!("{e}: the log's completeness cannot be checked"));
                None
            }
            Err(e) => return Err(e),
        };
        let mut meta = match meta {
            Some(m) => m,
            None => {
                let found = tessera_files(dir)?;
                if !found.is_empty() {
                    return Err(Error::Corrupt(format!(
                        "{} holds {} but no {META_FILE} (deleted or lost): refusing to start an empty database over them",
                        dir.display(),
                        found.join(", ")
                    )));
                }
                if opts.read_only {
                    return Err(Error::InvalidArgument(format!(
                        "{} holds no tessera database (no {META_FILE}), and a read-only open creates none",
                        dir.display()
                    )));
                }
                Meta::default()
            }
        };
        if meta.run.is_some() && frontier.is_none() && losses.is_empty() {
            let e = format!(
                "{} is missing: {} records a run but nothing says how far its log was made durable",
                dir.join(FRONTIER_FILE).display(),
                dir.join(META_FILE).display()
            );
            if mode == RecoveryMode::Strict {
                return Err(Error::Corrupt(format!(
                    "{e}; --recovery-mode tolerate-tail (or a milder loss-accepting mode) recovers what the log holds without that check"
                )));
            }
            losses.push(e);
        }
        if let Some(f) = &frontier {
            if meta.gen < f.meta_gen {
                let e = format!(
                    "{}: generation {} is older than the generation {} that {FRONTIER_FILE} recorded (an older copy of {META_FILE}?)",
                    dir.join(META_FILE).display(),
                    meta.gen,
                    f.meta_gen
                );
                if !salvage {
                    return Err(Error::Corrupt(format!(
                        "{e}; only --recovery-mode salvage opens it"
                    )));
                }
                losses.push(e);
            }
        }
        let scan = LogScan::read(dir, frontier.as_ref(), mode)?;
        losses.extend(scan.losses.iter().cloned());
        report.phase_seconds[0] = started.elapsed().as_secs_f64();
        if meta.run.is_none() && !scan.streams.is_empty() {
            return Err(Error::Corrupt(format!(
                "{} holds log segments but its {META_FILE} records no run",
                dir.display()
            )));
        }
        let tables: Vec<Arc<Table>> = meta
            .tables
            .iter()
            .map(|t| Arc::new(Table::new(TableId(t.id), t.name.clone(), t.secondary)))
            .collect();
        let mut durable = match meta.run {
            Some((loggers, base)) => scan.durable_epoch(loggers, base),
            None => 0,
        };
        let frontier_epoch = frontier.as_ref().map(|f| f.durable);
        if salvage {
            durable = durable.max(frontier_epoch.unwrap_or(0));
        }
        let max_seen = scan.max_epoch();
        // The checkpoint: complete, the size recorded, and the log must
        // reach the epoch it waited for.
        let ckpt_bytes = match &meta.checkpoint {
            Some((name, c)) => {
                let path = dir.join(name);
                let read = crate::log::checkpoint::read(dir, name, *c).and_then(|b| {
                    match meta.checkpoint_needs {
                        Some((_, size)) if size != b.len() as u64 => Err(Error::Corrupt(format!(
                            "checkpoint {}: {} bytes, but {META_FILE} records {size}",
                            path.display(),
                            b.len()
                        ))),
                        _ => Ok(b),
                    }
                });
                match read {
                    Ok(b) => Some((path, b, *c)),
                    Err(e) if salvage => {
                        losses.push(e.to_string());
                        std::fs::read(&path).ok().map(|b| (path, b, *c))
                    }
                    Err(e) => return Err(e),
                }
            }
            None => None,
        };
        if let (Some((name, c)), Some((needs, _))) = (&meta.checkpoint, meta.checkpoint_needs) {
            if durable < needs && !salvage {
                return Err(Error::Corrupt(format!(
                    "checkpoint {} (epoch {c}) needs the log through epoch {needs}, but the log reaches only epoch {durable}: log segments are missing or damaged{}",
                    dir.join(name).display(),
                    if losses.is_empty() {
                        String::new()
                    } else {
                        format!(" ({}); no consistent state survives: only --recovery-mode salvage opens it", losses.join("; "))
                    }
                )));
            }
        }
        if let Some(fd) = frontier_epoch {
            if durable < fd && losses.is_empty() {
                // The per-stream checks imply this; kept as a last guard.
                return Err(Error::Corrupt(format!(
                    "the log reaches durable epoch {durable}, below the epoch {fd} recorded in {}",
                    dir.join(FRONTIER_FILE).display()
                )));
            }
        }
        report.durable_epoch = durable;
        report.frontier_epoch = frontier_epoch;
        report.max_epoch_seen = max_seen;
        report.segments = scan.streams.iter().map(|s| s.segments.len()).sum();
        report.log_bytes = scan.valid_bytes();
        report
            .warnings
            .extend(scan.torn.iter().map(|t| t.2.clone()));
        report.checkpoint = meta.checkpoint.clone();
        if !losses.is_empty() {
            let mut files: Vec<String> = scan
                .cuts
                .iter()
                .map(|c| c.0.clone())
                .chain(scan.set_aside.iter().cloned())
                .map(|p| p.display().to_string())
                .collect();
            files.sort();
            report.loss = Some(Loss {
                acknowledged_epochs: frontier_epoch
                    .filter(|&fd| durable < fd)
                    .map(|fd| (durable, fd)),
                txns_set_aside: scan.txns_set_aside,
                details: losses,
                files,
                kept_in: None,
                consistent: !salvage,
            });
        }
        // Epochs past what a TID holds come only from damage that passed
        // a checksum (the frontier, the control file, the checkpoint).
        let top = durable
            .max(max_seen)
            .max(meta.checkpoint.as_ref().map_or(0, |c| c.1));
        if top > crate::storage::tid::MAX_EPOCH {
            return Err(Error::Corrupt(format!(
                "epoch {top} out of range (recorded in {}, {} or the checkpoint; a TID's epoch field ends at {})",
                dir.join(FRONTIER_FILE).display(),
                dir.join(META_FILE).display(),
                crate::storage::tid::MAX_EPOCH
            )));
        }
        // The next run needs numbers past everything found: refused (before
        // any change) when none are left.
        let exhausted = |what: String| {
            Err(Error::Corrupt(format!(
                "{}: {what} exhausted: no run can follow",
                dir.display()
            )))
        };
        // The run starts at top + 1 and needs epochs after it to make
        // anything durable.
        if top + 1 >= crate::storage::tid::MAX_EPOCH {
            return exhausted(format!("epochs (at {top})"));
        }
        for (l, s) in scan.starts(opts.loggers).iter().enumerate() {
            if s.segno > crate::log::segment::MAX_SEGNO || s.seq > crate::log::format::MAX_SEQ {
                return exhausted(format!("logger {l}'s segment or block sequence numbers"));
            }
        }
        if frontier
            .as_ref()
            .is_some_and(|f| f.gen >= crate::log::frontier::MAX_GEN)
        {
            return exhausted(format!("{FRONTIER_FILE} generation numbers"));
        }
        if meta.gen >= crate::log::meta::MAX_GEN {
            return exhausted(format!("{META_FILE} generation numbers"));
        }
        epochs.start_at(top + 1);
        crate::log::recovery::replay(
            &scan,
            ckpt_bytes
                .as_ref()
                .map(|(p, b, c)| (p.as_path(), &b[..], *c)),
            &meta,
            durable,
            &tables,
            layout,
            epochs,
            &mut report,
        )?;
        let stale =
            crate::log::checkpoint::stale(dir, meta.checkpoint.as_ref().map(|c| c.0.as_str()));
        if opts.read_only {
            // Say what an ordinary open would change.
            for (p, len, _) in &scan.torn {
                report
                    .changes
                    .push(format!("would cut {} to {len} bytes", p.display()));
            }
            for p in stale.iter().chain(&scan.leftovers).chain(&scan.empties) {
                report.changes.push(format!("would remove {}", p.display()));
            }
            report.seconds = started.elapsed().as_secs_f64();
            return Ok((meta, tables, None, report));
        }
        // Phase 2: change the directory.
        if let Some(loss) = &mut report.loss {
            let kept = keep_copies(dir, mode, &scan, ckpt_bytes.as_ref().map(|c| c.0.as_path()))?;
            report.changes.push(format!(
                "kept copies of tessera.meta, tessera.frontier and every log file this recovery cuts or sets aside in {}",
                kept.display()
            ));
            loss.kept_in = Some(kept.clone());
            for p in &scan.set_aside {
                report.changes.push(format!(
                    "set aside {} (moved to {})",
                    p.display(),
                    kept.display()
                ));
            }
            std::fs::write(kept.join("REPORT.txt"), loss_report(dir, &report)).map_err(|e| {
                Error::io(
                    format!("cannot write {}", kept.join("REPORT.txt").display()),
                    e,
                )
            })?;
            crate::log::segment::sync_dir(&kept)
                .map_err(|e| Error::io(format!("cannot sync {}", kept.display()), e))?;
        }
        scan.truncate_torn()?;
        for (p, len, _) in &scan.torn {
            report.changes.push(format!(
                "cut the torn tail of {} at {len} bytes",
                p.display()
            ));
        }
        for (p, len) in &scan.cuts {
            crate::log::segment::truncate_file(p, *len)
                .map_err(|e| Error::io(format!("cannot truncate {}", p.display()), e))?;
            report.changes.push(format!(
                "cut {} at offset {len} (the rest is lost)",
                p.display()
            ));
        }
        for p in stale.iter().chain(&scan.leftovers) {
            if std::fs::remove_file(p).is_ok() {
                report
                    .changes
                    .push(format!("removed leftover {}", p.display()));
            }
        }
        for p in &scan.empties {
            std::fs::remove_file(p)
                .map_err(|e| Error::io(format!("cannot remove {}", p.display()), e))?;
            report.changes.push(format!(
                "removed {}: a newest segment with nothing in it (the next run's segment takes its number)",
                p.display()
            ));
        }
        if max_seen > durable {
            meta.voids.push((durable, max_seen));
            report.changes.push(format!(
                "recorded void epochs ({durable}, {max_seen}] in {META_FILE}: entries of those epochs (never durable{}) are ignored from now on",
                if report.loss.is_some() { ", or given up by this recovery" } else { "" }
            ));
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
            scan.frontier(frontier.as_ref(), meta.gen),
            opts.segment_bytes,
            opts.epoch_interval,
        )?;
        report.seconds = started.elapsed().as_secs_f64();
        Ok((meta, tables, Some(log), report))
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
        if self.inner.opts.read_only {
            return Err(Error::ReadOnly);
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
            if let Some(log) = &self.inner.log {
                log.note_meta_gen(m.gen);
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
            local,
            core: WorkerCore {
                slot,
                tables: Vec::new(),
                stats: WorkerStats::default(),
                rng: seed,
                log: LogCursor::default(),
            },
            cc: self.inner.cc.new_local(slot),
            db: Arc::clone(&self.inner),
            declared: false,
            keys: KeySet::new(),
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

/// A per-thread handle that runs transactions.
pub struct Worker {
    // Keeps the background threads alive while a worker runs.
    closer: Arc<Closer>,
    pub(crate) db: Arc<DbInner>,
    pub(crate) local: LocalEpoch,
    pub(crate) core: WorkerCore,
    /// The protocol's per-worker state (`CcProtocol::Local`).
    cc: Box<dyn Any + Send>,
    /// Requests go through the batch path's checks (`set_declared`).
    declared: bool,
    /// The declared key sets of the request on the batch path (reused).
    keys: KeySet,
}

/// `Worker::run`'s attempt, handed to [`Protocol::dispatch`]: the closure
/// gets the dynamic [`Txn`] over the protocol's monomorphized transaction.
struct RunClosure<'w, F> {
    w: &'w mut Worker,
    snapshot: bool,
    f: F,
}

impl<T, F> Visit for RunClosure<'_, F>
where
    F: FnOnce(&mut Txn<'_>) -> TxResult<T>,
{
    type Out = TxResult<T>;
    #[inline]
    fn visit<P: CcProtocol>(self) -> TxResult<T> {
        let f = self.f;
        self.w
            .attempt::<P, T>(self.snapshot, |tx| f(&mut Txn::new(tx)))
    }
}

/// `Worker::try_execute`'s attempt: the request's body monomorphized for
/// the protocol (no per-operation dispatch).
struct RunRequest<'w, 'r, R> {
    w: &'w mut Worker,
    r: &'r mut R,
}

impl<R: Request> Visit for RunRequest<'_, '_, R> {
    type Out = TxResult<R::Output>;
    #[inline]
    fn visit<P: CcProtocol>(self) -> TxResult<R::Output> {
        let r = self.r;
        self.w.attempt::<P, R::Output>(false, |tx| r.run(tx))
    }
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
        self.retrying(|w| w.try_run(&mut f))
    }

    /// One attempt: execute `f`, then commit. Conflicts are returned, not
    /// retried (benchmark drivers count them).
    pub fn try_run<T, F>(&mut self, f: F) -> TxResult<T>
    where
        F: FnOnce(&mut Txn<'_>) -> TxResult<T>,
    {
        let p = self.db.opts.protocol;
        p.dispatch(RunClosure {
            w: self,
            snapshot: false,
            f,
        })
    }

    /// Execute a transaction request, retrying conflict aborts as
    /// [`Worker::run`] does. The request's body runs monomorphized for the
    /// database's protocol: one dispatch per attempt, none per operation.
    pub fn execute<R: Request>(&mut self, r: &mut R) -> Result<R::Output, Error> {
        self.retrying(|w| w.try_execute(r))
    }

    /// One attempt of a request, as [`Worker::try_run`] for closures.
    pub fn try_execute<R: Request>(&mut self, r: &mut R) -> TxResult<R::Output> {
        if self.declared {
            return self.try_execute_declared(r);
        }
        self.dispatch_request(r)
    }

    #[inline]
    fn dispatch_request<R: Request>(&mut self, r: &mut R) -> TxResult<R::Output> {
        let p = self.db.opts.protocol;
        p.dispatch(RunRequest { w: self, r })
    }

    /// Execute an ordered batch of requests with declared key sets, and
    /// return each one's result in batch order; the outcome is as if they
    /// ran one after another in that order. This is the entry point of
    /// deterministic protocols (a sequencer orders a batch, then runs it);
    /// under the interactive protocols each request runs in turn, retried
    /// on conflicts as [`Worker::execute`] does:
    ///
    /// 1. a request that [`needs_reconnaissance`](Request::needs_reconnaissance)
    ///    runs [`reconnoiter`](Request::reconnoiter) in a read-only
    ///    transaction first;
    /// 2. it declares its sets ([`Request::declare`]); one that declares
    ///    nothing gets `Error::InvalidArgument`;
    /// 3. its body runs against its declared keys only: an access outside
    ///    them is `Error::InvalidArgument` naming the table and key (a wrong
    ///    declaration found here, not as a wrong result under a
    ///    deterministic protocol); a body that finds its reconnaissance
    ///    stale ([`ConflictReason::Reconnaissance`]) reconnoiters again.
    ///
    /// A request's failure does not stop the batch.
    pub fn execute_batch<R: Request>(&mut self, batch: &mut [R]) -> Vec<Result<R::Output, Error>> {
        batch
            .iter_mut()
            .map(|r| self.retrying(|w| w.try_execute_declared(r)))
            .collect()
    }

    /// One attempt of a request on the batch path: reconnaissance if it
    /// needs one, its declaration, then its body checked against the
    /// declared sets (see [`Worker::execute_batch`]). A conflict of any
    /// step is returned; the next attempt reconnoiters again.
    pub fn try_execute_declared<R: Request>(&mut self, r: &mut R) -> TxResult<R::Output> {
        if r.needs_reconnaissance() {
            self.dispatch_request(&mut Reconnaissance(&mut *r))?;
        }
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        let out = if r.declare(&mut keys) {
            self.dispatch_request(&mut CheckedRequest { r, keys: &keys })
        } else {
            Err(TxError::Error(Error::InvalidArgument(
                "a request on the batch path must declare its key sets (Request::declare)".into(),
            )))
        };
        self.keys = keys;
        out
    }

    /// Route every request of [`Worker::execute`] and
    /// [`Worker::try_execute`] through the batch path's checks
    /// ([`Worker::try_execute_declared`]): for testing and measuring
    /// workloads' declarations under the interactive protocols.
    pub fn set_declared(&mut self, on: bool) {
        self.declared = on;
    }

    fn retrying<T>(
        &mut self,
        mut once: impl FnMut(&mut Worker) -> TxResult<T>,
    ) -> Result<T, Error> {
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match once(self) {
                Ok(v) => {
                    if let Some(log) = &self.db.log {
                        if log.mode == Durability::Sync {
                            log.wait_durable(self.core.log.ack)?;
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
        let p = self.db.opts.protocol;
        let out = p.dispatch(RunClosure {
            w: self,
            snapshot: true,
            f,
        });
        match out {
            Ok(v) => Ok(v),
            Err(TxError::UserAbort) => Err(Error::UserAbort),
            Err(TxError::Error(e)) => Err(e),
            Err(TxError::Conflict(r)) => Err(Error::TooManyRetries {
                attempts: 1,
                last: r,
            }),
        }
    }

    /// One attempt under protocol `P` (the database's): begin, the body,
    /// commit or abort, the statistics, maintenance.
    #[inline]
    fn attempt<P: CcProtocol, T>(
        &mut self,
        snapshot: bool,
        body: impl FnOnce(&mut Tx<'_, P>) -> TxResult<T>,
    ) -> TxResult<T> {
        let g = self.local.pin();
        let snapshot = snapshot.then(|| self.db.epochs.snapshot_boundary());
        self.core.log.ack = snapshot.unwrap_or(0);
        let db: &DbInner = &self.db;
        let sh = db
            .cc
            .as_any()
            .downcast_ref::<P::Shared>()
            .expect("the database's protocol state");
        let st = self
            .cc
            .downcast_mut::<P::Local>()
            .expect("the worker's protocol state");
        let mut tx = Tx {
            db,
            core: &mut self.core,
            sh,
            st: &mut *st,
            g: &g,
            snapshot,
        };
        P::begin(&mut tx);
        // A body that panics still rolls back (locks released, uncommitted
        // inserts removed) before the panic goes on: otherwise a lock-based
        // protocol would leave its locks held for ever.
        let out = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut tx))) {
            Ok(Ok(v)) => P::commit(&mut tx).map(|_| v),
            Ok(Err(e)) => {
                P::abort(&mut tx);
                Err(e)
            }
            Err(panic) => {
                P::abort(&mut tx);
                if let Some(log) = &db.log {
                    log.settle(tx.core.slot, &mut tx.core.log);
                }
                drop(g);
                std::panic::resume_unwind(panic);
            }
        };
        let core = &mut self.core;
        match &out {
            Ok(_) => core.stats.commits += 1,
            Err(TxError::Conflict(r)) => core.stats.conflicts[r.index()] += 1,
            Err(TxError::UserAbort) => core.stats.user_aborts += 1,
            Err(TxError::Error(_)) => {}
        }
        if let Some(log) = &db.log {
            log.settle(core.slot, &mut core.log);
        }
        P::maintain(db, core, sh, st, &g);
        drop(g);
        out
    }

    fn backoff(&mut self, attempts: u32) {
        // xorshift64
        let mut x = self.core.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.core.rng = x;
        let cap = 1u64 << attempts.min(10);
        crate::backoff::spin(x % (cap * 16));
        if attempts > 12 {
            std::thread::yield_now();
        }
    }

    /// The durability point of the last committed transaction: pass it to
    /// [`Database::wait_durable`] (with `Durability::Async`; under `Sync`,
    /// `run` has waited already).
    pub fn last_commit(&self) -> CommitToken {
        CommitToken {
            epoch: self.core.log.ack,
        }
    }

    /// Counters since the worker was created (or last reset).
    pub fn stats(&self) -> &WorkerStats {
        &self.core.stats
    }

    /// Reset the counters.
    pub fn reset_stats(&mut self) {
        self.core.stats = WorkerStats::default();
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
        // What the protocol still owes (queued GC, deleted records waiting
        // for their unlink) goes to the database.
        self.db.cc.retire_local(&mut *self.cc);
    }
}

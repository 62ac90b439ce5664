//! `Database`, `Options`, `Worker`: opening an engine, tables, per-thread workers,
//! and the retry loop.
//!
//! This module holds the database handle (`Database`, the shared `DbInner`,
//! the background checkpointer); its parts live beside it: `options`
//! (`Options`), `recover` (the data directory: its lock, recovery and the
//! reports of an accepted loss) and `worker` (`Worker` and the retry loop).

mod backup;
mod det;
mod options;
mod recover;
mod worker;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};

use crate::catalog::{Table, TableId};
use crate::cc::SharedState;
use crate::epoch::{Epochs, Ticker};
use crate::error::Error;
use crate::log::checkpoint::CheckpointInfo;
use crate::log::meta::{Meta, MetaTable};
use crate::log::recovery::{RecoveryMode, RecoveryReport};
use crate::log::{CommitToken, LogStats};

pub use crate::engine::WorkerStats;
use crate::engine::{Engine, Settings};

pub use crate::cc::Protocol;
pub use backup::BackupInfo;
pub use det::{DetStats, Rows};
pub use options::Options;
pub use worker::Worker;

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
    /// The batch engine of a deterministic protocol (`bohm`,
    /// `2pl-ordered`); `None` under an interactive one.
    pub det: Option<det::DetDb>,
    ticker: Mutex<Option<Ticker>>,
}

impl DbInner {
    /// Take a checkpoint now, one at a time (see `log::checkpoint`).
    pub(crate) fn take_checkpoint(&self) -> Result<CheckpointInfo, Error> {
        if let Some(d) = &self.det {
            if self.opts.data_dir.is_none() {
                return Err(Error::InvalidArgument(
                    "checkpoints need a durable database (Options::durable)".into(),
                ));
            }
            let info = d.checkpoint()?;
            self.checkpoints
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Ok(info);
        }
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
                if db.det.as_ref().is_some_and(|d| d.idle()) {
                    // A deterministic database before its first submission:
                    // nothing has run since its recovery's checkpoint.
                    continue;
                }
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

impl DbInner {
    /// Stop the engine's threads (no worker exists any more: each holds an
    /// `Arc`): a deterministic protocol's stages cut, execute and release
    /// their last batch; the epoch ticker stops; the loggers run a final
    /// round that makes every commit durable. Returns the first failure
    /// among them (a stage that failed, a logger's I/O error), which
    /// [`Database::close`] reports and a drop can only ignore. Running it
    /// again is harmless.
    fn stop_threads(&self) -> Result<(), Error> {
        let mut first = None;
        if let Some(d) = &self.det {
            if let Err(e) = d.close() {
                first.get_or_insert(e);
            }
        }
        // Stop the ticker first; then the final log round's epochs are ours.
        drop(self.ticker.lock().take());
        if let Some(log) = &self.log {
            // Close the current epoch so the final round marks every commit
            // durable.
            self.epochs.tick();
            self.epochs.tick();
            log.shutdown();
            if let Some(e) = log.failure() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for DbInner {
    fn drop(&mut self) {
        // Errors were given to submitters and committers as they happened;
        // `Database::close` is where a caller sees the last of them.
        let _ = self.stop_threads();
        // The protocol releases what it holds (queued records of dropped
        // workers) before the tables free their records.
        self.cc.close();
        let local = self
            .epochs
            .register_internal()
            .expect("a free slot at drop");
        {
            let g = local.pin();
            let free = self.cc.free_record();
            for t in self.engine.tables.get_mut().iter() {
                t.free_records(&g, free);
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
    /// Workers for `submit`, `load` and `dump` under an interactive
    /// protocol (dropped first: each holds the engine).
    pool: Arc<Mutex<Vec<Worker>>>,
    // Dropped next: stops the checkpointer, which may hold `inner`.
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
        let mut tables = Vec::new();
        let mut meta = Meta::default();
        let mut log = None;
        let mut recovery = None;
        let mut dir_lock = None;
        let settings = Settings {
            workers: opts.workers,
            snapshots: opts.snapshots,
            read_only: opts.read_only,
            rocc: opts.rocc,
            scan_validation: opts.scan_validation,
        };
        // Recovery rebuilds records through the protocol's layout hooks.
        let cc = opts.protocol.new_shared(&settings);
        let mut det = None;
        if let Some(d) = opts.protocol.deterministic() {
            let lock = match &opts.data_dir {
                Some(dir) => Database::lock_dir(dir, false)?,
                None => None,
            };
            det = Some(det::DetDb::open(&opts, d, lock)?);
        } else if let Some(dir) = &opts.data_dir {
            dir_lock = Database::lock_dir(dir, opts.read_only)?;
            if let Some((proto, _)) = crate::det::checkpoint::dir_tables(dir)? {
                return Err(Error::InvalidArgument(format!(
                    "{} is a deterministic data directory written by {proto}: open it with \
                     that protocol, not {}",
                    dir.display(),
                    opts.protocol
                )));
            }
            let (m, t, l, r) = Database::recover(&opts, dir, &epochs, &*cc)?;
            meta = m;
            tables = t;
            log = l;
            recovery = Some(r);
        }
        // The batch engine keeps epochs of its own: a deterministic
        // database's interactive epochs never need to advance.
        let ticker = det
            .is_none()
            .then(|| Ticker::start(Arc::clone(&epochs), opts.epoch_interval));
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
                det,
                ticker: Mutex::new(ticker),
            }),
            pool: Arc::default(),
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

    /// Make everything committed so far durable: wait until the log's
    /// durable epoch covers every transaction that committed before this
    /// call (about one epoch, 40 ms by default, plus an `fdatasync`), and
    /// return the loggers' error if they failed. With
    /// [`Durability::Async`](crate::Durability::Async) this is how a
    /// program makes its acknowledged commits safe before it goes on; with
    /// `Sync` they already are. In-memory databases and deterministic
    /// protocols (whose outcomes are released only once durable) return at
    /// once.
    ///
    /// ```
    /// # use tessera::{Database, Durability, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Database::open(Options::durable(dir.path()).durability(Durability::Async))?;
    /// let t = db.create_table("t")?;
    /// let mut w = db.worker()?;
    /// w.run(|tx| tx.put(t, b"k", b"v"))?; // returns at commit
    /// db.flush()?; // now it survives a crash
    /// assert!(db.durable_epoch() >= w.last_commit().epoch());
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn flush(&self) -> Result<(), Error> {
        if self.inner.det.is_some() {
            return Ok(());
        }
        match &self.inner.log {
            // Every transaction that committed before this call read a
            // commit epoch no larger than the global epoch read now.
            Some(l) => l.wait_durable(self.inner.epochs.global()),
            None => Ok(()),
        }
    }

    /// Close this handle and say what went wrong at the end, which a drop
    /// cannot:
    /// - everything committed so far is made durable ([`Database::flush`]);
    ///   under a deterministic protocol the stages stop (the last batch is
    ///   cut, executed and released);
    /// - the last background checkpoint's failure, if any, is returned;
    /// - if this is the last handle (no clone and no [`Worker`] is left),
    ///   the engine closes here: the checkpointer and the loggers stop
    ///   after a final round, the data directory is unlocked, and a
    ///   logger's failure is returned.
    ///
    /// The first error is returned. Other clones and workers of an
    /// interactive database stay usable, and the engine closes when the
    /// last of them is dropped (a deterministic one's stages have stopped).
    ///
    /// ```
    /// # use tessera::{Database, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Database::open(Options::durable(dir.path()))?;
    /// let t = db.create_table("t")?;
    /// db.worker()?.run(|tx| tx.put(t, b"k", b"v"))?;
    /// db.close()?; // durable, closed and unlocked
    /// let db = Database::open(Options::durable(dir.path()))?;
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn close(self) -> Result<(), Error> {
        let mut first = None;
        let mut note = |r: Result<(), Error>| {
            if let Err(e) = r {
                first.get_or_insert(e);
            }
        };
        if let Some(d) = &self.inner.det {
            note(d.close().map(drop));
        } else {
            note(self.flush());
        }
        if let Some(e) = self.inner.checkpoint_error.lock().take() {
            note(Err(e));
        }
        let Database {
            pool,
            closer,
            inner,
        } = self;
        // The pooled workers go first (they hold the closer and the engine).
        drop(pool);
        // `Arc::into_inner` picks exactly one winner among handles closed
        // at the same time. The last user handle stops the checkpointer
        // (joined here), which leaves the engine to whoever holds its last
        // reference: this thread, normally.
        drop(Arc::into_inner(closer));
        if let Some(inner) = Arc::into_inner(inner) {
            note(inner.stop_threads());
            drop(inner);
        }
        first.map_or(Ok(()), Err)
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
        if let Some(d) = &self.inner.det {
            // A secondary index is an ordinary table to the batch engine:
            // requests keep it in step with their primary table.
            return d.add_table(name);
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
        if let Some(d) = &self.inner.det {
            return d.table(name);
        }
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
        if let Some(d) = &self.inner.det {
            return d.table_names();
        }
        self.inner
            .tables
            .read()
            .iter()
            .map(|t| t.name.clone())
            .collect()
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

//! `Options`: how to open a database.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cc::bohm::{BohmConfig, DetProtocol};
use crate::cc::Protocol;
use crate::det::{Procedures, SequencerConfig};
use crate::engine::{RoccConfig, RoccRegistration, ScanValidation};
use crate::error::Error;
use crate::log::recovery::RecoveryMode;
use crate::log::Durability;

/// The most epochs between two snapshot boundaries
/// ([`Options::snapshot_epochs`]): about 11 hours of 40 ms epochs.
const MAX_SNAPSHOT_EPOCHS: u64 = 1 << 20;

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
    pub(crate) det: DetOptions,
    pub(crate) rocc: RoccConfig,
    pub(crate) scan_validation: ScanValidation,
}

/// The deterministic protocols' knobs (`Options::cc_threads` and the rest).
#[derive(Clone, Debug)]
pub(crate) struct DetOptions {
    pub cc_threads: usize,
    pub exec_threads: usize,
    pub sequencer: SequencerConfig,
    pub read_annotation: bool,
    pub chain_bound: u32,
    pub lazy_backlog: usize,
    pub procedures: Option<Procedures>,
}

impl DetOptions {
    /// The batch engine's configuration under `p`.
    pub fn config(&self, p: DetProtocol) -> BohmConfig {
        BohmConfig {
            cc_threads: self.cc_threads,
            exec_threads: self.exec_threads,
            sequencer: self.sequencer,
            protocol: p,
            read_annotation: self.read_annotation,
            chain_bound: self.chain_bound,
            lazy_backlog: self.lazy_backlog,
        }
    }
}

impl Options {
    /// An in-memory database with the default protocol
    /// ([`Protocol::DEFAULT`], Silo), 64 worker slots, 40 ms epochs (Silo's
    /// default) and snapshots off.
    pub fn in_memory() -> Options {
        Options {
            protocol: Protocol::DEFAULT,
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
            det: DetOptions {
                cc_threads: 1,
                exec_threads: 1,
                sequencer: SequencerConfig::default(),
                read_annotation: true,
                chain_bound: 100,
                lazy_backlog: 4,
                procedures: None,
            },
            rocc: RoccConfig::default(),
            scan_validation: ScanValidation::NodeSet,
        }
    }

    /// How much damage recovery accepts when the data directory is opened
    /// (default [`RecoveryMode::Strict`]: only a torn tail after the
    /// recorded durable frontier, which holds nothing acknowledged). A
    /// mode that accepts a loss reports it in
    /// [`Database::recovery_report`] and keeps copies of what it changed.
    ///
    /// [`Database::recovery_report`]: super::Database::recovery_report
    pub fn recovery_mode(mut self, m: RecoveryMode) -> Options {
        self.recovery_mode = m;
        self
    }

    /// Recover the data directory into memory without changing anything
    /// in it (a dry run: no tail is cut, no `LOCK` or control file is
    /// written, nothing is logged), e.g. to check a read-only copy. The
    /// recovery report says what an ordinary open would change. Writes and
    /// new tables are refused with [`Error::ReadOnly`]. Background
    /// checkpoints are turned off with it. It opens a directory on a
    /// read-only file system, or one whose files are all read-only (it
    /// creates no `LOCK` file where none can be made).
    ///
    /// ```
    /// # use tessera::{Database, Error, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = Database::open(Options::durable(dir.path()))?;
    /// let t = db.create_table("t")?;
    /// db.worker()?.run(|tx| tx.put(t, b"k", b"v"))?;
    /// db.close()?;
    ///
    /// let copy = Database::open(Options::durable(dir.path()).read_only(true))?;
    /// let t = copy.table("t")?;
    /// let mut w = copy.worker()?;
    /// let v = w.run(|tx| Ok(tx.get(t, b"k")?.map(|v| v.to_vec())))?;
    /// assert_eq!(v.as_deref(), Some(&b"v"[..]));
    /// assert_eq!(w.run(|tx| tx.put(t, b"k", b"w")), Err(Error::ReadOnly));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn read_only(mut self, on: bool) -> Options {
        self.read_only = on;
        if on {
            self.checkpoint_interval = None;
        }
        self
    }

    /// Take a checkpoint in the background every `d` (durable databases;
    /// default: every 30 s with [`Options::durable`], none for a data
    /// directory given to [`Options::data_dir`]; see
    /// [`Database::checkpoint`]). A checkpoint lets recovery skip the log
    /// it covers, and the covered segments are deleted.
    ///
    /// [`Database::checkpoint`]: super::Database::checkpoint
    pub fn checkpoint_interval(mut self, d: Duration) -> Options {
        self.checkpoint_interval = Some(d);
        self
    }

    /// A durable database in `dir` (created if missing; recovered if it
    /// holds one), with these defaults:
    /// - Silo, every committed update logged (one logger thread);
    /// - [`Durability::Sync`]: [`Worker::run`] returns only once the
    ///   transaction is durable, that is once its epoch is closed and the
    ///   log synced: about one epoch (40 ms, [`Options::epoch_interval`])
    ///   plus an `fdatasync` per commit, however many transactions commit
    ///   in that epoch (group commit). Many threads keep the throughput;
    ///   one thread gets about 25 commits a second. For lower latency use
    ///   [`Durability::Async`] and [`Database::flush`] (or
    ///   [`Database::wait_durable`]) where the program needs the guarantee;
    /// - a background checkpoint every 30 s
    ///   ([`DEFAULT_CHECKPOINT_INTERVAL`](Options::DEFAULT_CHECKPOINT_INTERVAL)),
    ///   which bounds both the log kept on disk (segments a checkpoint
    ///   covers are deleted) and the time the next open spends replaying
    ///   it. Change it with [`Options::checkpoint_interval`], or turn it
    ///   off with [`Options::no_background_checkpoints`] (then the log
    ///   grows until [`Database::checkpoint`] is called).
    ///
    /// [`Worker::run`]: super::Worker::run
    /// [`Database::flush`]: super::Database::flush
    /// [`Database::wait_durable`]: super::Database::wait_durable
    /// [`Database::checkpoint`]: super::Database::checkpoint
    pub fn durable(dir: impl AsRef<Path>) -> Options {
        Options {
            durability: Durability::Sync,
            data_dir: Some(dir.as_ref().to_path_buf()),
            checkpoint_interval: Some(Options::DEFAULT_CHECKPOINT_INTERVAL),
            ..Options::in_memory()
        }
    }

    /// The background checkpoint interval of [`Options::durable`].
    pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(30);

    /// Take no background checkpoints: the log grows until
    /// [`Database::checkpoint`](super::Database::checkpoint) is called, and
    /// an open replays all of it.
    pub fn no_background_checkpoints(mut self) -> Options {
        self.checkpoint_interval = None;
        self
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

    /// Deterministic protocols: the concurrency-control threads, each
    /// owning a hash partition of the keys (BOHM's CC stage; default 1).
    pub fn cc_threads(mut self, n: usize) -> Options {
        self.det.cc_threads = n;
        self
    }

    /// BOHM: whether the CC stage annotates each declared read with the
    /// version it reads (default on; see `BohmConfig::read_annotation`).
    pub fn read_annotation(mut self, on: bool) -> Options {
        self.det.read_annotation = on;
        self
    }

    /// ROCC: the target number of records per logical range (default 610,
    /// the book's 16,384 ranges over 10M keys; section 3.5.6 finds a scan
    /// best served when it covers 0.5 to 3 ranges). A table is cut when
    /// ROCC first uses it, and a range that grows past twice the target is
    /// cut again between transactions. MVRCC (`Protocol::Mvrcc`) cuts its
    /// tables into ranges of the same size, and replaces a table's whole
    /// partition each time the table has doubled.
    pub fn rocc_range_size(mut self, n: u32) -> Options {
        self.rocc.range_size = n.max(1);
        self
    }

    /// ROCC: the slots of each range's circular list of writers (default
    /// 5,000, the book's). A validator that finds a slot it needs already
    /// reused aborts (`ConflictReason::RangeOverflow`).
    pub fn rocc_slots(mut self, n: u32) -> Options {
        self.rocc.slots = n.max(1);
        self
    }

    /// ROCC and GWV: where a committing writer registers (default
    /// [`RoccRegistration::Always`], the book's: in every range it wrote).
    /// [`RoccRegistration::Scanned`] registers only where a scan is in
    /// flight, which saves writers their shared writes when nobody scans.
    pub fn rocc_registration(mut self, r: RoccRegistration) -> Options {
        self.rocc.registration = r;
        self
    }

    /// Silo: how scans are validated against phantoms (default
    /// [`ScanValidation::NodeSet`], Silo's own). [`ScanValidation::Reread`]
    /// runs each scan again at commit, the baseline Cai et al. call LRV in
    /// the form that re-reads the scanned range. The other protocols have
    /// their own scan validation and ignore this.
    pub fn scan_validation(mut self, v: ScanValidation) -> Options {
        self.scan_validation = v;
        self
    }

    /// Lazy: the bound on a key's chain of unsubstantiated transactions
    /// (default 100; see `BohmConfig::chain_bound`).
    pub fn chain_bound(mut self, n: u32) -> Options {
        self.det.chain_bound = n;
        self
    }

    /// Lazy: how many stickified batches may wait for substantiation
    /// (default 4; see `BohmConfig::lazy_backlog`).
    pub fn lazy_backlog(mut self, n: usize) -> Options {
        self.det.lazy_backlog = n;
        self
    }

    /// Deterministic protocols: the execution threads (default 1).
    pub fn exec_threads(mut self, n: usize) -> Options {
        self.det.exec_threads = n;
        self
    }

    /// Deterministic protocols: requests per batch at most (default
    /// 10,000, as the thesis's authors ran BOHM).
    pub fn batch_size(mut self, n: usize) -> Options {
        self.det.sequencer.batch_size = n;
        self
    }

    /// Deterministic protocols: a batch is cut this long after its first
    /// request arrived, full or not (default 2 ms). A submitter waits
    /// about this long for its outcome when requests are few.
    pub fn batch_time(mut self, d: Duration) -> Options {
        self.det.sequencer.batch_time = d;
        self
    }

    /// Deterministic protocols with a data directory: the procedures the
    /// input log may name, so that recovery can decode and replay it.
    /// Required with [`Options::durable`] under a deterministic protocol;
    /// ignored otherwise.
    pub fn procedures(mut self, p: Procedures) -> Options {
        self.det.procedures = Some(p);
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

    /// Epochs per snapshot epoch (Silo: 25, i.e. one second at 40 ms; at
    /// most 2^20).
    pub fn snapshot_epochs(mut self, k: u64) -> Options {
        self.snapshot_epochs = k;
        self
    }

    /// Give up after this many attempts in [`Worker::run`] (default: never).
    ///
    /// [`Worker::run`]: super::Worker::run
    pub fn max_retries(mut self, n: u32) -> Options {
        self.max_retries = Some(n);
        self
    }

    pub(super) fn validate(&self) -> Result<(), Error> {
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
        if !(1..=MAX_SNAPSHOT_EPOCHS).contains(&self.snapshot_epochs) {
            return Err(Error::InvalidArgument(format!(
                "snapshot_epochs must be in 1..={MAX_SNAPSHOT_EPOCHS}, got {}",
                self.snapshot_epochs
            )));
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
        if let Some(d) = self.protocol.deterministic() {
            let name = d.name();
            if self.durability == Durability::Async {
                return Err(Error::InvalidArgument(format!(
                    "{name} releases a batch's outcomes only once its input is durable: \
                     use durability sync (or none)"
                )));
            }
            if self.read_only {
                return Err(Error::InvalidArgument(format!(
                    "read_only(true) is not supported under {name} (recovery replays the \
                     input log through the running stages): use `tessera inspect` to read a \
                     deterministic directory without changing it"
                )));
            }
            if self.data_dir.is_some() && self.det.procedures.is_none() {
                return Err(Error::InvalidArgument(format!(
                    "a durable {name} database needs Options::procedures: the registry that \
                     decodes its input log for replay"
                )));
            }
            self.det.config(d).validate()?;
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

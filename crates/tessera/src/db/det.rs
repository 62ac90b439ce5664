//! The deterministic protocols (`bohm`, `2pl-ordered`) behind [`Database`],
//! and the calls that work under every protocol: [`Database::submit`],
//! [`Database::load`] and [`Database::dump`].
//!
//! A deterministic database holds the batch engine ([`Bohm`]) instead of
//! interactive workers. Its tables are created before the first submission,
//! which starts the stages; from then on the table set is fixed (the CC
//! threads partition the tables they started with). With a data directory
//! that already holds `tessera.det`, the tables come from it and the engine
//! starts (recovers) at open. See docs/ARCHITECTURE.md, "How they sit in the
//! protocol list".

use std::path::PathBuf;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use crate::catalog::TableId;
use crate::cc::bohm::{Bohm, BohmStats, DetProtocol, ReplayStats};
use crate::det::{Outcome, Procedure, Receipt};
use crate::error::Error;
use crate::log::checkpoint::CheckpointInfo;
use crate::txn::ScanOptions;

use super::{Database, Options};

/// A table's rows, `(key, value)` in key order ([`Database::dump`]).
pub type Rows = Vec<(Vec<u8>, Vec<u8>)>;

/// The batch engine of a deterministic database.
pub(crate) struct DetDb {
    engine: RwLock<Bohm>,
    /// Why the engine could not start (it is not tried again).
    failed: Mutex<Option<Error>>,
    /// Restarts after a system failure (§6.4.7).
    restarts: std::sync::atomic::AtomicU64,
}

/// What a deterministic database's stages did, and what its open
/// recovered ([`Database::det_stats`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DetStats {
    /// The stages' counters.
    pub stages: BohmStats,
    /// What recovery replayed from the input log.
    pub replayed: ReplayStats,
    /// The checkpoint recovery loaded or wrote (with a data directory,
    /// once started).
    pub recovered_from: Option<PathBuf>,
    /// Whether the stages run (they start at the first submission).
    pub running: bool,
    /// Restarts after a system failure (Faleiro §6.4.7: a request failed
    /// where it could not roll back and was expunged; `replayed` is then
    /// the restart's replay).
    pub restarts: u64,
}

impl DetDb {
    /// The engine for `opts` under `d`: the tables of the directory's
    /// `tessera.det`, if it has one (then the engine recovers now), or none
    /// yet. `dir_lock` is the directory's `LOCK`, taken by the caller.
    pub(super) fn open(
        opts: &Options,
        d: DetProtocol,
        dir_lock: Option<std::fs::File>,
    ) -> Result<DetDb, Error> {
        let mut names = Vec::new();
        if let Some(dir) = &opts.data_dir {
            if dir.join(crate::log::meta::META_FILE).exists() {
                return Err(Error::InvalidArgument(format!(
                    "{} holds a redo log (tessera.meta), written by an interactive protocol: \
                     open it with that protocol, not {}",
                    dir.display(),
                    d.name()
                )));
            }
            if let Some((proto, ns)) = crate::det::checkpoint::dir_tables(dir)? {
                if proto != d.name() {
                    return Err(Error::InvalidArgument(format!(
                        "{} was written by {proto}: open it with that protocol, not {}",
                        dir.display(),
                        d.name()
                    )));
                }
                names = ns;
            }
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut engine = Bohm::new(&refs, opts.det.config(d))?;
        if let Some(dir) = &opts.data_dir {
            let procs = opts.det.procedures.clone().unwrap_or_default();
            engine = engine
                .with_input_log(dir, procs)
                .input_segment_bytes(opts.segment_bytes);
            engine.adopt_dir_lock(dir_lock);
            if !names.is_empty() {
                engine.start()?;
            }
        }
        Ok(DetDb {
            engine: RwLock::new(engine),
            failed: Mutex::new(None),
            restarts: Default::default(),
        })
    }

    /// The engine, started (at the first call), or restarted after a
    /// system failure (§6.4.7): the failed engine is shut down and a new
    /// one recovers from the last checkpoint and the input log, without
    /// the expunged request, before this returns. In memory there is
    /// nothing to recover from: the database stays failed.
    fn running(&self) -> Result<RwLockReadGuard<'_, Bohm>, Error> {
        {
            let g = self.engine.read();
            if g.is_running() && g.system_failure().is_none() {
                return Ok(g);
            }
        }
        let mut failed = self.failed.lock();
        if let Some(e) = &*failed {
            return Err(e.clone());
        }
        {
            let mut w = self.engine.write();
            if let Some(e) = w.system_failure() {
                if !w.has_input_log() {
                    *failed = Some(e.clone());
                    return Err(e);
                }
                let next = w.successor();
                // The failed engine stops before its successor recovers
                // (its stages, then the input log it was writing). Its
                // shutdown's own result is not the caller's news: the
                // system failure is, and what the successor recovers from
                // the directory is the state (an input the failed engine
                // could not make durable was never acknowledged).
                let _ = w.shutdown();
                match next {
                    Ok(next) => {
                        *w = next;
                        self.restarts
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(e) => {
                        *failed = Some(e.clone());
                        return Err(e);
                    }
                }
            }
            if !w.is_running() {
                if let Err(e) = w.start() {
                    *failed = Some(e.clone());
                    return Err(e);
                }
            }
        }
        Ok(self.engine.read())
    }

    pub(super) fn add_table(&self, name: &str) -> Result<TableId, Error> {
        self.engine.write().add_table(name)
    }

    pub(super) fn table(&self, name: &str) -> Result<TableId, Error> {
        self.engine.read().table(name)
    }

    pub(super) fn table_names(&self) -> Vec<String> {
        self.engine.read().table_names().to_vec()
    }

    /// A checkpoint at the last batch boundary, in `Database::checkpoint`'s
    /// terms: `epoch` is the first batch it does not cover.
    pub(super) fn checkpoint(&self) -> Result<CheckpointInfo, Error> {
        let engine = self.running()?;
        let taken = engine.checkpoint()?;
        // `None`: no batch since the start, whose checkpoint is current.
        let i = taken
            .as_ref()
            .or(engine.start_checkpoint())
            .ok_or_else(|| Error::InvalidArgument("checkpoints need a data directory".into()))?;
        Ok(CheckpointInfo {
            epoch: i.next_batch,
            file: i.file.clone(),
            records: i.rows,
            bytes: i.bytes,
            seconds: i.seconds,
            segments_deleted: i.segments_deleted,
        })
    }

    /// Whether a background checkpoint has nothing to do: the stages have
    /// not started (no submission yet).
    pub(super) fn idle(&self) -> bool {
        !self.engine.read().is_running()
    }

    pub(super) fn stats(&self) -> DetStats {
        let e = self.engine.read();
        DetStats {
            stages: e.stats(),
            replayed: e.replayed(),
            recovered_from: e.recovered_from().map(PathBuf::from),
            running: e.is_running(),
            restarts: self.restarts.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Stop the stages (the last batch is cut and executed).
    pub(super) fn close(&self) -> Result<BohmStats, Error> {
        // A durable database closed before its first submission: start it
        // now, so that its tables and loaded rows are checkpointed (the
        // start of a fresh directory writes them) rather than dropped.
        let unstarted = {
            let e = self.engine.read();
            !e.is_running() && e.has_input_log() && !e.table_names().is_empty()
        };
        if unstarted && self.failed.lock().is_none() {
            drop(self.running()?);
        }
        // Never started again (a later submission is refused).
        self.failed
            .lock()
            .get_or_insert_with(|| Error::InvalidArgument("the database was closed".into()));
        self.engine.write().shutdown()
    }
}

impl Database {
    fn det(&self) -> Option<&DetDb> {
        self.inner.det.as_ref()
    }

    /// Submit the request `p`; its outcome comes with the receipt.
    ///
    /// Under a deterministic protocol (`bohm`, `2pl-ordered`) the request
    /// is sequenced into a batch and its receipt is released once the batch
    /// has executed and (with a data directory) its input is durable; the
    /// first submission starts the stages and fixes the table set.
    /// Under an interactive protocol it runs at once on a pooled
    /// [`Worker`](super::Worker) ([`Worker::execute`](super::Worker::execute):
    /// retried on conflicts) and the receipt is ready, so a program written
    /// against `submit` runs under every protocol.
    ///
    /// The procedure's own abort is [`Outcome::Aborted`]; `Err` here means
    /// the request was not accepted (the engine could not start, or has
    /// stopped); an error while it ran comes with the receipt.
    ///
    /// ```
    /// use tessera::det::{Outcome, ProcId, Procedure};
    /// use tessera::{Database, KeySet, Options, Protocol, Request, TableId, Transaction, TxResult};
    ///
    /// // Add one to a counter; the request declares the key it writes.
    /// struct Incr(TableId);
    /// impl Request for Incr {
    ///     type Output = u64;
    ///     fn declare(&self, keys: &mut KeySet) -> bool {
    ///         keys.write(self.0, b"n");
    ///         true
    ///     }
    ///     fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
    ///         let n = tx.get(self.0, b"n")?.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
    ///         tx.put(self.0, b"n", &(n + 1).to_le_bytes())?;
    ///         Ok(n + 1)
    ///     }
    /// }
    /// impl Procedure for Incr {
    ///     const ID: ProcId = 1;
    ///     const NAME: &'static str = "incr";
    ///     fn encode(&self, out: &mut Vec<u8>) {
    ///         out.extend_from_slice(&self.0.as_u32().to_le_bytes());
    ///     }
    ///     fn decode(b: &[u8]) -> Result<Self, String> {
    ///         let mut r = tessera::det::ArgReader::new("incr", b);
    ///         let t = TableId::from_u32(r.u32()?);
    ///         r.finish()?;
    ///         Ok(Incr(t))
    ///     }
    /// }
    ///
    /// for p in [Protocol::Silo, Protocol::Bohm] {
    ///     let db = Database::open(Options::in_memory().protocol(p)).unwrap();
    ///     let t = db.create_table("counter").unwrap();
    ///     let r = db.submit(Incr(t)).unwrap();
    ///     assert!(matches!(r.wait().unwrap(), Outcome::Committed(1)));
    ///     assert_eq!(db.dump(t).unwrap(), vec![(b"n".to_vec(), 1u64.to_le_bytes().to_vec())]);
    /// }
    ///     /// ```
    pub fn submit<P: Procedure>(&self, p: P) -> Result<Receipt<P::Output>, Error>
    where
        P::Output: Send + 'static,
    {
        if let Some(d) = self.det() {
            return d.running()?.submit(p);
        }
        let mut p = p;
        let out = self.with_pooled(|w| match w.execute(&mut p) {
            Ok(o) => Ok(Outcome::Committed(o)),
            Err(Error::UserAbort) => Ok(Outcome::Aborted),
            Err(e) => Err(e),
        })?;
        Ok(Receipt::ready(out))
    }

    /// PWV: partition table `t`'s records among the executors by their
    /// first `len` key bytes (0, the default: the whole key), so that a
    /// group of keys (a TPC-C district's order rows, say) lives in one
    /// partition and a piece that declares the group runs on one executor.
    /// A performance knob only: the outcome of every request is the same
    /// under any partitioning. Before the engine starts; accepted and
    /// ignored by the other deterministic protocols, refused by the
    /// interactive ones.
    pub fn partition_prefix(&self, t: TableId, len: usize) -> Result<(), Error> {
        match self.det() {
            Some(d) => d.engine.write().partition_prefix(t, len),
            None => Err(Error::InvalidArgument(format!(
                "partition_prefix applies to the deterministic protocols, not {}",
                self.protocol().name()
            ))),
        }
    }

    /// Under a deterministic protocol, once started: the latency of every
    /// batch released so far, from its cut to the release of its outcomes
    /// (executed, and its input durable), in microseconds and release
    /// order (the thesis's batch latency, Table 6.1). `None` otherwise.
    pub fn batch_latencies(&self) -> Option<std::sync::Arc<crate::det::sequencer::BatchLatencies>> {
        self.det()
            .and_then(|d| d.engine.read().batch_latencies().cloned())
    }

    /// Write `key -> val` into table `t` outside any request: a bulk load.
    /// Under a deterministic protocol, before the first submission only
    /// (the rows are the state before the first batch, timestamp 0; with a
    /// data directory they are durable once the stages start, which
    /// checkpoints them: at the first submission, [`Database::start`], or
    /// the close of a database that never started). Under an interactive protocol it is a committed
    /// put on a pooled worker.
    pub fn load(&self, t: TableId, key: &[u8], val: &[u8]) -> Result<(), Error> {
        if let Some(d) = self.det() {
            return d.engine.read().load(t, key, val);
        }
        self.with_pooled(|w| w.run(|tx| tx.put(t, key, val)))?
    }

    /// Every row of table `t`, in key order: a consistent read of the
    /// committed state. Under a deterministic protocol it is the state after
    /// the last batch cut, once that batch has executed and its input is
    /// durable (BOHM reads it as a snapshot while later batches run;
    /// 2pl-ordered pauses the feed of batches while it reads). Under an
    /// interactive protocol it is one read-only transaction.
    pub fn dump(&self, t: TableId) -> Result<Rows, Error> {
        if let Some(d) = self.det() {
            // After a system failure, the restarted engine's state.
            let failed = d.engine.read().system_failure().is_some();
            if failed {
                drop(d.running()?);
            }
            return d.engine.read().dump(t);
        }
        self.with_pooled(|w| {
            w.run(|tx| {
                tx.scan_collect(
                    t,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    ScanOptions::new(),
                )
            })
        })?
    }

    /// Start a deterministic protocol's stages now (with a fresh data
    /// directory: checkpoint the loaded rows first) rather than at the
    /// first submission; from here on the table set is fixed. Nothing to
    /// do under an interactive protocol.
    pub fn start(&self) -> Result<(), Error> {
        match self.det() {
            Some(d) => d.running().map(drop),
            None => Ok(()),
        }
    }

    /// The stages' counters and what recovery replayed, under a
    /// deterministic protocol (`None` under an interactive one).
    pub fn det_stats(&self) -> Option<DetStats> {
        self.det().map(DetDb::stats)
    }

    /// Run `f` on a worker of the pool (made when the pool is empty).
    fn with_pooled<T>(&self, f: impl FnOnce(&mut super::Worker) -> T) -> Result<T, Error> {
        let pooled = self.pool.lock().pop();
        let mut w = match pooled {
            Some(w) => w,
            None => self.worker()?,
        };
        let out = f(&mut w);
        self.pool.lock().push(w);
        Ok(out)
    }
}

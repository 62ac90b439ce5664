//! `Worker`: a per-thread handle that runs transactions, the retry loop,
//! and the attempt under the database's protocol.

use std::any::Any;
use std::sync::Arc;

use crate::cc::{CcProtocol, Tx, Visit, WorkerCore};
use crate::epoch::LocalEpoch;
use crate::error::{Abort, Error, RunError, TxError, TxResult};
use crate::log::{CommitToken, Durability, LogCursor};
use crate::request::{CheckedRequest, KeySet, Reconnaissance, Request};
use crate::txn::Txn;

use super::{Closer, Database, DbInner, WorkerStats};

impl Database {
    /// A worker for the calling thread (one per thread; a `Worker` may move
    /// between threads but is used by one at a time).
    pub fn worker(&self) -> Result<Worker, Error> {
        if let Some(d) = self.inner.opts.protocol.deterministic() {
            return Err(Error::InvalidArgument(format!(
                "{} is a deterministic protocol: it runs no interactive transactions; \
                 submit procedures with Database::submit",
                d.name()
            )));
        }
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
                scratch: Vec::new(),
                poisoned: None,
            },
            cc: self.inner.cc.new_local(slot),
            db: Arc::clone(&self.inner),
            declared: false,
            keys: KeySet::new(),
        })
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
    /// returned `Err(TxError::Error(Error::UserAbort))`.
    ///
    /// What an `Ok` acknowledges depends on the database's
    /// [`Durability`](crate::Durability): in memory (`None`), that the
    /// transaction committed; with `Sync` (the default of
    /// [`Options::durable`](crate::Options::durable)), that it is also
    /// durable, which takes about one epoch (40 ms) plus an `fdatasync`;
    /// with `Async`, that it committed, and
    /// [`Database::flush`](crate::Database::flush) or
    /// [`Database::wait_durable`](crate::Database::wait_durable) with
    /// [`Worker::last_commit`] make it durable later.
    pub fn run<T, F>(&mut self, mut f: F) -> Result<T, Error>
    where
        F: FnMut(&mut Txn<'_>) -> TxResult<T>,
    {
        self.retrying(|w| w.try_run(&mut f))
    }

    /// Run a one-shot transaction as [`Worker::run`] does, with a closure
    /// that can roll it back for a reason of the application's own type
    /// `E`: it returns `Err(Abort::User(e))`, and the caller gets
    /// `Err(RunError::Aborted(e))`, never retried and never mistaken for
    /// an engine error. Operations pass their outcome on with `?`
    /// (conflicts are retried as by `run`); an engine error comes back as
    /// `RunError::Engine`. (A plain `tx.user_abort()` has no reason to hand
    /// back: it comes back as `RunError::Engine(Error::UserAbort)`.)
    ///
    /// ```
    /// use tessera::{Abort, Database, Options, RunError};
    ///
    /// #[derive(Debug, PartialEq)]
    /// enum BankError {
    ///     Insufficient { balance: u64 },
    /// }
    ///
    /// let db = Database::open(Options::in_memory())?;
    /// let accounts = db.create_table("accounts")?;
    /// let mut w = db.worker()?;
    /// w.run(|tx| tx.put(accounts, b"alice", &10u64.to_le_bytes()))?;
    /// let r = w.run_abortable(|tx| {
    ///     let v = tx.get(accounts, b"alice")?.unwrap();
    ///     let balance = u64::from_le_bytes(v.try_into().unwrap());
    ///     if balance < 30 {
    ///         return Err(Abort::User(BankError::Insufficient { balance }));
    ///     }
    ///     tx.put(accounts, b"alice", &(balance - 30).to_le_bytes())?;
    ///     Ok(())
    /// });
    /// assert_eq!(r, Err(RunError::Aborted(BankError::Insufficient { balance: 10 })));
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn run_abortable<T, E, F>(&mut self, mut f: F) -> Result<T, RunError<E>>
    where
        F: FnMut(&mut Txn<'_>) -> Result<T, Abort<E>>,
    {
        let mut reason = None;
        let out = self.run(|tx| match f(tx) {
            Ok(v) => Ok(v),
            Err(Abort::Tx(e)) => Err(e),
            Err(Abort::User(e)) => {
                reason = Some(e);
                Err(TxError::Error(Error::UserAbort))
            }
        });
        match (out, reason) {
            (Ok(v), _) => Ok(v),
            (Err(Error::UserAbort), Some(e)) => Err(RunError::Aborted(e)),
            (Err(e), _) => Err(RunError::Engine(e)),
        }
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
    ///
    /// [`ConflictReason::Reconnaissance`]: crate::error::ConflictReason::Reconnaissance
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
            // A step of this request, not a transaction of the workload:
            // `stats().commits` counts the request once, when its body
            // commits.
            self.core.stats.commits -= 1;
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
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&mut tx)));
        // Taken on every path, so that no attempt starts with the last one's.
        let poisoned = tx.core.poisoned.take();
        let out = match run {
            Ok(Ok(v)) => match poisoned {
                // A conflict the body dropped: it decided on what it did
                // not read.
                Some(r) => {
                    P::abort(&mut tx);
                    Err(TxError::Conflict(r))
                }
                None => P::commit(&mut tx).map(|_| v),
            },
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
            Err(TxError::Error(Error::UserAbort)) => core.stats.user_aborts += 1,
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
            pool: Arc::default(),
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

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("protocol", &self.db.opts.protocol)
            .field("stats", &self.core.stats)
            .finish_non_exhaustive()
    }
}

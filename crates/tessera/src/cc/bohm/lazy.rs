//! Lazy transactions (Faleiro, Thomson and Abadi, "Lazy Evaluation of
//! Transactions in Database Systems", SIGMOD 2014; the thesis's chapter 4;
//! digest section 2 and checklist 6.4), on BOHM's versions.
//!
//! * **Stickies.** BOHM's placeholders are stickies already: a version that
//!   stands for "the value transaction T computes", filled in place when T
//!   runs, after which nobody evaluates T again. Records are multi-versioned
//!   as BOHM's, so a later phase that runs long after its commit reads the
//!   values as of its place in the log (`begin < ts <= end`).
//! * **Stickification** (one thread, the CC stage's, [`Stickifier`]): for
//!   each transaction of a batch in log order it inserts a placeholder for
//!   every declared write key (BOHM's CC stage, unchanged), then runs the
//!   transaction's **now-phase** ([`crate::det::Procedure::now_phase`])
//!   against the versions visible at its timestamp. What the now-phase
//!   writes is filled at once; the other placeholders stay pending: the
//!   stickies. A now-phase that aborts skips them all; a procedure with no
//!   end of now-phase runs whole, here, in log order (eager). An external
//!   read (a request with no writes and no end of now-phase) is handed to
//!   a substantiation worker instead, which runs it at its place in the
//!   log, substantiating its producers' closure first (the thesis:
//!   "external reads trigger substantiation"); its outcome joins its
//!   batch's release, or follows it (`BatchRelease::defer`, `late`).
//! * **Commit** is returned when the batch's now-phases are done and its
//!   input is durable (the sequencer's release, as for every deterministic
//!   protocol): the stickies are installed by then.
//! * **Last-writer table.** The stickification thread's key map (BOHM's CC
//!   map) is the table: per key, its record, whose newest version is the
//!   last writer's (its producer, with its state: the writer's id and
//!   whether it still owes its value), and a counter of the transactions
//!   that touched the key since its chain was last handed off. A
//!   transaction records, in its dependency array (`BTxn::deps`), the
//!   pending versions its declared reads depend on.
//!   A declared write's predecessor is not a dependency: a
//!   read-modify-write finds it through the version chain when its later
//!   phase reads the key, and a blind write never does.
//! * **Blind writes** ([`Stickifier::clobber`], the thesis's §4.4.3): a
//!   producer all of whose stickies were overwritten by blind writes
//!   (`KeySet::blind_write`) before anyone could need them is never run;
//!   it counts as substantiated (`BohmStats::lazy_clobbered`). What makes
//!   that sound is enforced: a blind write is never read by its writer,
//!   and a later phase reads only what it declared.
//! * **Uniqueness checks** (`BohmTx::lazy_exists`): an insert whose key's
//!   visible version is a sticky answers "exists" without running the
//!   producer (a non-substantiating read): a later phase writes a value
//!   into every sticky it left (enforced when it ends).
//! * **Chain bound** (`BohmConfig::chain_bound`, `--chain-bound`): when a
//!   key's counter passes the bound, the transaction that passed it is
//!   handed to a substantiation worker at once and the counter starts
//!   again; the worker evaluates its dependencies recursively first (so a
//!   chain runs back to back on one core, its records in cache).
//! * **Substantiation workers** ([`worker_main`], `exec_threads` of them)
//!   take hand-offs first, then drain the oldest stickified batch. A
//!   transaction is claimed by CAS on its state word (the thesis's spin
//!   bit), so overlapping dependency graphs are never run twice; a read of
//!   a sticky runs its producer first, recursively (BOHM's Listing 5.1).
//!   A batch is complete once every transaction in it is; complete batches
//!   leave the backlog in log order, which advances BOHM's GC watermark.
//! * **Backlog.** The stickification thread runs ahead of the workers by
//!   at most `BohmConfig::lazy_backlog` batches (then it waits): a burst
//!   shorter than that is accepted whole, and memory stays bounded under a
//!   sustained overload.
//! * **Recovery** is BOHM's: the input log replayed through the same stages
//!   from a checkpoint taken at a batch boundary that every transaction
//!   below has been substantiated past (a checkpoint waits for the workers
//!   to reach it: the thesis's virtual point of consistency, completed as
//!   the pending transactions get substantiated).
//!
//! What is not the thesis's: the later phase is a second method rather than
//! a resumption of the same code (`self` carries what the now-phase
//! computed to it); the later phase cannot abort (an error there is
//! counted in `BohmStats::lazy_later_errors`, its stickies read as skipped).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::BTxn;
use super::{
    entry, execute, panic_message, prefetch_versions, unregister_ranges, walk, BatchCtx, BohmTx,
    BoxedOutcome, DetProtocol, LatestMap, Own, Shared, Version, Walk, COMPLETE, EXECUTING,
    MAX_DEPTH, PENDING, SKIPPED, TOMBSTONE, UNPROCESSED, VALUE,
};
use crate::catalog::TableId;
use crate::det::{NowPhase, Outcome};
use crate::epoch::{Guard, LocalEpoch};
use crate::error::{ConflictReason, Error, TxError, TxResult};
use crate::txn::Txn;

/// What the stickification thread and the workers share.
#[derive(Default)]
pub(super) struct LazyShared {
    /// Stickified batches not yet complete, oldest first.
    backlog: Mutex<VecDeque<Arc<BatchCtx>>>,
    /// Its length, read without the lock.
    backlog_len: AtomicUsize,
    /// Transactions the chain bound hands to the workers.
    handoffs: Mutex<VecDeque<(Arc<BatchCtx>, u32)>>,
    /// No more batches: the workers stop once the backlog is empty.
    pub closed: AtomicBool,
    /// Transactions whose now-phase ended (they left stickies).
    pub deferred: AtomicU64,
    /// Transactions handed off by the chain bound.
    pub handed_off: AtomicU64,
    /// Later phases run by the workers' own claims.
    pub substantiated: AtomicU64,
    /// Later phases complete, wherever they ran (a reader's evaluation,
    /// the stickification thread, a worker).
    pub later_done: AtomicU64,
    /// Later phases that failed (they cannot abort: see the module docs).
    pub later_errors: AtomicU64,
    /// Transactions never run because blind writes overwrote all their
    /// stickies before anyone needed them (they count as substantiated).
    pub clobbered: AtomicU64,
    /// Uniqueness checks answered by a sticky, unsubstantiated.
    pub existence_checks: AtomicU64,
    /// External reads answered by the workers.
    pub external_reads: AtomicU64,
    /// Partitioned stickification: batches the CC threads have handed to
    /// the now-phase thread that it has not published yet.
    pub staged: AtomicUsize,
    /// The most batches the backlog held.
    pub backlog_max: AtomicU64,
}

/// The stickification thread's state for the batch it is on.
#[derive(Default)]
pub(super) struct Stickifier {
    outs: Vec<BoxedOutcome>,
    handoffs: Vec<u32>,
    /// Per table: the timestamp of the last deferred transaction that
    /// declared a range of it (its later phase may read any key there).
    range_ts: Vec<u64>,
    /// Versions whose producers may have become unnecessary.
    work: Vec<(TableId, *mut Version)>,
}

impl Stickifier {
    /// Transaction `i` of `ctx`, whose placeholders are in: run its
    /// now-phase (or all of it, eagerly), then record its dependencies and
    /// apply the chain bound (`hand`: a written key's counter passed it
    /// already, counted when its placeholder went in).
    #[allow(clippy::too_many_arguments)]
    pub fn now(
        &mut self,
        sh: &Shared,
        local: &LocalEpoch,
        g: &Guard<'_>,
        ctx: &BatchCtx,
        i: usize,
        mut latest: Option<&mut LatestMap>,
        mut hand: bool,
    ) {
        let txn = &ctx.txns[i];
        let out = run_now(sh, local, g, txn);
        let external = txn.external.load(Ordering::Relaxed);
        if external {
            // Its outcome comes from the worker that runs it (first:
            // handed off); what it reads is registered below, as a later
            // phase's reads are (it runs later too).
            ctx.release.defer(i);
            hand = true;
            sh.lazy.external_reads.fetch_add(1, Ordering::Relaxed);
        }
        let deferred = external
            || (txn.later.load(Ordering::Relaxed) && txn.state.load(Ordering::Acquire) != COMPLETE);
        let committed = matches!(out, Ok(Outcome::Committed(_)));
        self.outs.push(out);
        if deferred {
            if self.range_ts.len() < sh.tables.len() {
                self.range_ts.resize(sh.tables.len(), 0);
            }
            for r in txn.wranges.iter().chain(txn.rranges.iter()) {
                self.range_ts[r.table.as_u32() as usize] = txn.ts;
            }
        }
        if committed {
            self.clobber(sh, ctx, txn, deferred);
        }
        if !deferred {
            return;
        }
        if !external {
            sh.lazy.deferred.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the batch is not published yet: only this thread touches
        // the dependency array.
        let deps = unsafe { &mut *txn.deps.get() };
        let bound = u64::from(sh.cfg.chain_bound);
        hand |= txn.hand.load(Ordering::Relaxed);
        for sl in txn.reads() {
            // A declared read: the last writer before this transaction.
            let v = match latest.as_deref_mut() {
                Some(latest) => {
                    let map = &mut latest[sl.table.as_u32() as usize];
                    let Some(e) = entry(sh, map, sl.table, txn.key(sl), g, None) else {
                        continue;
                    };
                    e.n += 1;
                    if e.n > bound {
                        hand = true;
                        e.n = 0;
                    }
                    // SAFETY: records live while the engine runs.
                    unsafe { (*e.rec).head.load(Ordering::Acquire) }
                }
                // Partitioned: the owning CC thread's annotation (the
                // record's newest version before this transaction); it
                // counted the chain bound too.
                None => sl.ver.load(Ordering::Acquire),
            };
            // SAFETY: a record's newest version is alive while pinned.
            if !v.is_null() && unsafe { (*v).state.load(Ordering::Acquire) } == PENDING {
                deps.push(v);
                // Its producer is needed by this later phase.
                // SAFETY: a pending version's producer is alive (its batch
                // is freed only through the epoch this thread is pinned in).
                unsafe { (*(*v).producer).pinned.store(true, Ordering::Relaxed) };
            }
        }
        if hand {
            self.handoffs.push(i as u32);
        }
    }

    /// Blind writes (the thesis's §4.4.3): committed transaction `txn`
    /// has overwritten the versions below its placeholders. A blind write
    /// (`KeySet::blind_write`: never read) leaves the sticky below it
    /// unneeded by anyone after it; a producer all of whose stickies are
    /// unneeded, and that nobody between it and its overwriters may read,
    /// never runs: its stickies are retired and it counts as substantiated.
    /// A non-blind overwrite passes the need on: the sticky below is needed
    /// if the overwriter is (its later phase may read it), so skipping a
    /// producer releases the stickies below its own (a cart's chain of
    /// additions, cleared by one blind write, is skipped whole).
    ///
    /// Who else could read a sticky between its producer `P` and its
    /// overwriter, and why none does when `P` is skipped: a now-phase or an
    /// eager transaction (they run here, in log order, and would have run
    /// `P` already, so the claim below fails); a later phase or an external
    /// read (a worker runs it) through a declared read (it pins `P` in
    /// `now`), a declared range (`range_ts`),
    /// or its own write's previous version (a non-blind overwrite, passed
    /// on); an undeclared read (refused in a later phase:
    /// `BohmTx::lazy_may_read`); a checkpoint or a dump (they read at batch
    /// boundaries: `P` must be in the batch being stickified, which is not
    /// published yet, so no worker can have claimed it either).
    fn clobber(&mut self, sh: &Shared, ctx: &BatchCtx, txn: &BTxn, deferred: bool) {
        let first = ctx.txns.first().map_or(u64::MAX, |t| t.ts);
        for w in txn.writes() {
            let ph = w.ver.load(Ordering::Acquire);
            if ph.is_null() {
                continue;
            }
            // SAFETY: placeholders of a planned batch are alive, and the
            // version below one too (GC cuts behind the watermark only).
            let prev = unsafe { (*ph).prev.load(Ordering::Acquire) };
            // SAFETY: as above.
            if prev.is_null() || unsafe { (*prev).state.load(Ordering::Acquire) } != PENDING {
                continue;
            }
            // SAFETY: as above.
            let mine = unsafe { (*ph).state.load(Ordering::Acquire) };
            if w.blind && (mine == VALUE || mine == TOMBSTONE) {
                // Overwritten for good: what readers after this
                // transaction see is its own value or delete.
                self.work.push((w.table, prev));
            } else if deferred && mine == PENDING {
                // A sticky of its own over it (blind or not): the version
                // below is needed if this transaction is (a blind one's
                // later phase may still fail, and its sticky read as
                // skipped, exposing the one below).
                // SAFETY: the batch is not published: only this thread
                // touches the list.
                unsafe { (*txn.rmw_prev.get()).push((w.table, prev)) };
            }
            // Else its write was skipped (declared, not written): the
            // version below stays visible, needed as it was.
        }
        while let Some((table, v)) = self.work.pop() {
            // SAFETY: a pending version's producer is alive (its batch is
            // freed only through the epoch this thread is pinned in).
            let p = unsafe { &*(*v).producer };
            if p.pinned.load(Ordering::Relaxed) {
                continue;
            }
            if !p.wranges.is_empty() {
                // Its later phase inserts into declared ranges, which no
                // sticky stands for: it must run.
                p.pinned.store(true, Ordering::Relaxed);
                continue;
            }
            if p.ts < first
                || self
                    .range_ts
                    .get(table.as_u32() as usize)
                    .copied()
                    .unwrap_or(0)
                    > p.ts
            {
                // Another batch (a checkpoint or a worker may reach it), or
                // a range reader since: needed for good.
                p.pinned.store(true, Ordering::Relaxed);
                continue;
            }
            if p.live.fetch_sub(1, Ordering::Relaxed) != 1 {
                continue;
            }
            if p.state
                .compare_exchange(UNPROCESSED, EXECUTING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                // Run already (a now-phase read it), or running.
                continue;
            }
            for pw in p.writes() {
                // SAFETY: as above; only the producer (this thread, which
                // claimed it) sets a pending placeholder's state.
                let pv = unsafe { &*pw.ver.load(Ordering::Acquire) };
                if pv.state.load(Ordering::Acquire) == PENDING {
                    pv.state.store(SKIPPED, Ordering::Release);
                }
            }
            p.state.store(COMPLETE, Ordering::Release);
            sh.lazy.clobbered.fetch_add(1, Ordering::Relaxed);
            sh.lazy.later_done.fetch_add(1, Ordering::Relaxed);
            // SAFETY: written while its batch (this one) was stickified,
            // by this thread.
            self.work.extend(unsafe { (*p.rmw_prev.get()).drain(..) });
        }
    }

    /// The batch's now-phases are done: its outcomes go to the clients
    /// (once its input is durable), and the batch to the workers.
    pub fn publish(&mut self, sh: &Shared, ctx: Arc<BatchCtx>) {
        ctx.release.executed(std::mem::take(&mut self.outs));
        let mut idle = 0;
        while sh.lazy.backlog_len.load(Ordering::Acquire) >= sh.cfg.lazy_backlog {
            crate::backoff::snooze(&mut idle);
        }
        let n = {
            let mut q = sh.lazy.backlog.lock();
            q.push_back(ctx.clone());
            sh.lazy.backlog_len.store(q.len(), Ordering::Release);
            q.len() as u64
        };
        sh.lazy.backlog_max.fetch_max(n, Ordering::Relaxed);
        if !self.handoffs.is_empty() {
            sh.lazy
                .handed_off
                .fetch_add(self.handoffs.len() as u64, Ordering::Relaxed);
            let mut h = sh.lazy.handoffs.lock();
            h.extend(self.handoffs.drain(..).map(|i| (ctx.clone(), i)));
        }
    }
}

/// Partitioned stickification (`cc_threads > 1`): the CC threads put
/// every batch's stickies in and keep the last-writer table, each for the
/// keys it owns (BOHM's CC stage, with the chain bound counted there);
/// this thread then runs the batch's now-phases in log order, finds their
/// dependencies in the read annotations, and publishes the batch. The CC
/// threads run ahead on the next batches meanwhile (a now-phase reads the
/// versions visible at its timestamp, so later stickies are invisible to
/// it).
pub(super) fn stick_main(
    sh: &Shared,
    local: &LocalEpoch,
    rx: std::sync::mpsc::Receiver<Arc<BatchCtx>>,
) {
    let mut st = Stickifier::default();
    while let Ok(ctx) = rx.recv() {
        let busy = std::time::Instant::now();
        {
            let g = local.pin();
            for i in 0..ctx.txns.len() {
                st.now(sh, local, &g, &ctx, i, None, false);
            }
        }
        sh.cc_busy_ns
            .fetch_add(busy.elapsed().as_nanos() as u64, Ordering::Relaxed);
        st.publish(sh, ctx);
        sh.lazy.staged.fetch_sub(1, Ordering::AcqRel);
        local.collect();
    }
}

/// Run `txn`'s now-phase (on the stickification thread; nobody else can
/// reach it yet). Returns the client's outcome. Ended: its writes are
/// filled, the rest of its placeholders are pending, `later` is set and
/// the state is back to unprocessed (complete if nothing is left to do).
/// Eager: the whole body ran (`execute`), complete.
fn run_now(sh: &Shared, local: &LocalEpoch, g: &Guard<'_>, txn: &BTxn) -> BoxedOutcome {
    let mut idle = 0;
    loop {
        if txn.unusable.is_some() {
            return run_eager(sh, local, g, txn);
        }
        claim_here(txn);
        let mut tx = BohmTx {
            sh,
            local,
            g,
            txn,
            depth: 0,
            writes: Vec::new(),
            blocked: false,
            rwrites: Vec::new(),
        };
        // SAFETY: claimed by this thread: it alone touches `proc`.
        let proc = unsafe { &mut *txn.proc.get() };
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut t = Txn::new(&mut tx);
            proc.now_phase(&mut t)
        }))
        .unwrap_or_else(|p| {
            if tx.blocked {
                return Err(TxError::Conflict(ConflictReason::LockConflict));
            }
            Err(TxError::Error(Error::InvalidArgument(format!(
                "procedure '{}' panicked in its now-phase: {}",
                proc.name(),
                panic_message(&*p)
            ))))
        });
        if tx.blocked {
            // A read met a producer that a worker is running: wait for it
            // (it is older, and runs on), then run the now-phase again.
            drop(r);
            txn.state.store(UNPROCESSED, Ordering::Release);
            sh.set_aside.fetch_add(1, Ordering::Relaxed);
            crate::backoff::snooze(&mut idle);
            continue;
        }
        return match r {
            Ok(NowPhase::Eager) if !tx.writes.is_empty() || !tx.rwrites.is_empty() => {
                // `Eager` means "no split": a now-phase that wrote and then
                // said so would have its writes dropped without a word.
                drop(tx);
                txn.state.store(UNPROCESSED, Ordering::Release);
                skip_all(
                    txn,
                    Err(Error::InvalidArgument(format!(
                        "lazy: procedure '{}' wrote in its now-phase, then returned \
                         NowPhase::Eager (which means the body has no now-phase)",
                        proc.name()
                    ))),
                )
            }
            Ok(NowPhase::Eager) if txn.nw == 0 && txn.wranges.is_empty() => {
                // An external read: nothing later in the log depends on
                // it, so a worker answers it (substantiating what it reads
                // first) while this thread goes on; see `deliver`.
                drop(tx);
                txn.external.store(true, Ordering::Relaxed);
                txn.state.store(UNPROCESSED, Ordering::Release);
                Ok(Outcome::Aborted)
            }
            Ok(NowPhase::Eager) => {
                // No end of now-phase: the whole body, now.
                drop(tx);
                txn.state.store(UNPROCESSED, Ordering::Release);
                run_eager(sh, local, g, txn)
            }
            Ok(NowPhase::Ended(out)) => {
                if !tx.rwrites.is_empty() {
                    drop(tx);
                    txn.state.store(UNPROCESSED, Ordering::Release);
                    return skip_all(
                        txn,
                        Err(Error::InvalidArgument(
                            "lazy: a now-phase inserted into a declared write range (not \
                             supported: declare the keys)"
                                .into(),
                        )),
                    );
                }
                tx.fill(false);
                txn.later.store(true, Ordering::Relaxed);
                let left = txn
                    .writes()
                    .iter()
                    .filter(|w| {
                        // SAFETY: placeholders of a planned batch are alive.
                        let st = unsafe {
                            (*w.ver.load(Ordering::Acquire))
                                .state
                                .load(Ordering::Acquire)
                        };
                        st == PENDING
                    })
                    .count();
                txn.live.store(left as u32, Ordering::Relaxed);
                // Nothing sticky: the later phase could write nothing, so
                // it need not run.
                // (A later phase with write ranges inserts there: it runs.)
                let st = if left > 0 || !txn.wranges.is_empty() {
                    UNPROCESSED
                } else {
                    COMPLETE
                };
                txn.state.store(st, Ordering::Release);
                Ok(Outcome::Committed(out))
            }
            Err(e) => {
                drop(tx);
                txn.state.store(UNPROCESSED, Ordering::Release);
                skip_all(
                    txn,
                    match e {
                        TxError::Error(Error::UserAbort) => Ok(Outcome::Aborted),
                        TxError::Conflict(ConflictReason::Reconnaissance) => Ok(Outcome::Aborted),
                        TxError::Error(e) => Err(e),
                        TxError::Conflict(r) => Err(Error::InvalidArgument(format!(
                            "a lazy transaction cannot have a conflict ({r})"
                        ))),
                    },
                )
            }
        };
    }
}

/// Claim `txn` on the stickification thread, where nobody else can reach
/// it yet (its batch is not published; older transactions never read its
/// versions).
fn claim_here(txn: &BTxn) {
    let claimed = txn
        .state
        .compare_exchange(UNPROCESSED, EXECUTING, Ordering::AcqRel, Ordering::Acquire)
        .is_ok();
    debug_assert!(
        claimed,
        "a transaction being stickified is claimed elsewhere"
    );
}

/// The now-phase aborted or failed: nothing of it may be seen.
fn skip_all(txn: &BTxn, out: BoxedOutcome) -> BoxedOutcome {
    for w in txn.writes() {
        // SAFETY: placeholders of a planned batch are alive; only their
        // producer (this thread) sets their state.
        unsafe {
            (*w.ver.load(Ordering::Acquire))
                .state
                .store(SKIPPED, Ordering::Release)
        };
    }
    txn.state.store(COMPLETE, Ordering::Release);
    out
}

/// Run the whole body of `txn` now (BOHM's `execute`), waiting out
/// producers that workers are running; its outcome.
fn run_eager(sh: &Shared, local: &LocalEpoch, g: &Guard<'_>, txn: &BTxn) -> BoxedOutcome {
    let mut idle = 0;
    loop {
        claim_here(txn);
        if execute(sh, local, g, txn, 0) {
            break;
        }
        crate::backoff::snooze(&mut idle);
    }
    // SAFETY: complete, and run by this thread; taken once, here (the
    // batch's finisher does not read lazy outcomes).
    unsafe { (*txn.outcome.get()).take() }.unwrap_or_else(|| {
        Err(Error::InvalidArgument(
            "a lazy transaction completed without an outcome".into(),
        ))
    })
}

/// Substantiate `txn` (its dependencies first, recursively): run its later
/// phase unless it is complete or another thread has claimed it (that
/// thread completes it). Returns once it is complete or claimed elsewhere.
fn substantiate(sh: &Shared, local: &LocalEpoch, g: &Guard<'_>, txn: &BTxn, depth: u32) {
    if txn.state.load(Ordering::Acquire) != UNPROCESSED {
        return;
    }
    if depth < MAX_DEPTH {
        // SAFETY: written before the batch was published; read-only since.
        for &v in unsafe { &*txn.deps.get() } {
            // SAFETY: a dependency is a version that this transaction
            // reads (GC keeps it while this transaction is incomplete),
            // and a pending version's producer is alive.
            let v: &Version = unsafe { &*v };
            if v.state.load(Ordering::Acquire) == PENDING {
                // SAFETY: a pending version's producer is alive (its batch
                // is freed only once every transaction in it is complete).
                let prod = unsafe { &*v.producer };
                substantiate(sh, local, g, prod, depth + 1);
            }
        }
    }
    let mut idle = 0;
    while txn
        .state
        .compare_exchange(UNPROCESSED, EXECUTING, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        if execute(sh, local, g, txn, depth) {
            if !txn.external.load(Ordering::Relaxed) {
                sh.lazy.substantiated.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        // Set aside: a producer it reads is running on another worker.
        crate::backoff::snooze(&mut idle);
    }
}

/// An external read that has run gives its outcome to its batch's release
/// (which holds it until the batch's input is durable): once, by whichever
/// thread sees it complete first.
fn deliver(ctx: &BatchCtx, i: usize) {
    let txn = &ctx.txns[i];
    if !txn.external.load(Ordering::Relaxed)
        || txn.state.load(Ordering::Acquire) != COMPLETE
        || txn.delivered.swap(true, Ordering::AcqRel)
    {
        return;
    }
    // SAFETY: complete, so its executor has stored the outcome and stopped
    // (the state's release orders it); taken once, by the swap's winner.
    let out = unsafe { (*txn.outcome.get()).take() }.unwrap_or_else(|| {
        Err(Error::InvalidArgument(
            "a lazy external read completed without an outcome".into(),
        ))
    });
    ctx.release.late(i, out);
}

/// How many transactions of a batch a draining worker claims at once.
const DRAIN_CHUNK: usize = 16;

/// A substantiation worker.
pub(super) fn worker_main(sh: &Shared, local: &LocalEpoch) {
    let mut idle = 0u32;
    loop {
        let hand = sh.lazy.handoffs.lock().pop_front();
        if let Some((ctx, i)) = hand {
            let g = local.pin();
            substantiate(sh, local, &g, &ctx.txns[i as usize], 0);
            deliver(&ctx, i as usize);
            idle = 0;
            continue;
        }
        // Drain: the oldest batch with transactions nobody has claimed.
        let next = {
            let q = sh.lazy.backlog.lock();
            q.iter()
                .find(|c| c.lazy_next.load(Ordering::Relaxed) < c.txns.len())
                .cloned()
        };
        if let Some(ctx) = next {
            let from = ctx.lazy_next.fetch_add(DRAIN_CHUNK, Ordering::AcqRel);
            let to = (from + DRAIN_CHUNK).min(ctx.txns.len());
            let g = local.pin();
            // As BOHM's executors do: the versions the next transactions
            // will read are known, so they are fetched while this one runs
            // (a later phase runs long after its batch was stickified: its
            // records are cold).
            for j in from..to.min(ctx.txns.len()) {
                if let Some(t) = ctx.txns.get(j + 2) {
                    prefetch_versions(t, false);
                }
                if let Some(t) = ctx.txns.get(j + 1) {
                    prefetch_versions(t, true);
                }
                substantiate(sh, local, &g, &ctx.txns[j], 0);
                deliver(&ctx, j);
            }
            drop(g);
            if to == ctx.txns.len() {
                retire(sh, local);
            }
            idle = 0;
            continue;
        }
        retire(sh, local);
        local.collect();
        if sh.lazy.closed.load(Ordering::Acquire)
            && sh.lazy.backlog_len.load(Ordering::Acquire) == 0
            && sh.lazy.handoffs.lock().is_empty()
        {
            break;
        }
        if idle > 64 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        } else {
            crate::backoff::snooze(&mut idle);
        }
    }
}

/// Take the complete batches off the front of the backlog, in log order:
/// they advance the GC watermark and are freed through the epoch.
fn retire(sh: &Shared, local: &LocalEpoch) {
    let mut q = sh.lazy.backlog.lock();
    while let Some(front) = q.front() {
        let mut d = front.lazy_done.load(Ordering::Relaxed);
        while d < front.txns.len() && front.txns[d].state.load(Ordering::Acquire) == COMPLETE {
            d += 1;
        }
        front.lazy_done.store(d, Ordering::Relaxed);
        if d < front.txns.len() {
            break;
        }
        let ctx = q.pop_front().expect("the front");
        sh.lazy.backlog_len.store(q.len(), Ordering::Release);
        if let Some(last) = ctx.txns.last() {
            for f in sh.finished.iter() {
                f.store(last.ts, Ordering::Release);
            }
        }
        unregister_ranges(sh, &ctx);
        sh.batches.fetch_add(1, Ordering::Release);
        let e = local.pin().epoch();
        sh.spent.lock().push_back((e, ctx));
    }
}

/// The lazy contract, checked where a lazy transaction reads (see
/// `Stickifier::clobber` and the module docs).
impl BohmTx<'_> {
    /// Lazy: what makes skipping producers whose stickies were all
    /// overwritten blindly sound (`lazy::Stickifier::clobber`): a key
    /// declared as a blind write is never read before this transaction
    /// writes it, and a later phase reads only what it declared (the
    /// `Request::declare` contract, enforced here, where a later phase
    /// running long after its commit could otherwise read a sticky that
    /// nobody was known to need).
    pub(super) fn lazy_may_read(
        &self,
        t: TableId,
        key: &[u8],
        slot: Option<usize>,
    ) -> TxResult<()> {
        let bad = |what: &str| {
            Err(TxError::Error(Error::InvalidArgument(format!(
                "lazy: '{}' read table {} key {key:02x?}, {what}",
                // SAFETY: the running transaction's procedure: this thread
                // claimed it.
                unsafe { &*self.txn.proc.get() }.name(),
                t.as_u32()
            ))))
        };
        if let Some(s) = slot {
            let ph = self.txn.slots[s].ver.load(Ordering::Acquire);
            // Its own write is readable: written in this run, or (a later
            // phase) filled by its now-phase.
            // SAFETY: the placeholders of a planned batch are alive.
            let written = self.own(s).is_some()
                || (!ph.is_null() && unsafe { (*ph).state.load(Ordering::Acquire) } != PENDING);
            if self.txn.slots[s].blind && !written {
                return bad("which it declared as a blind write (never read)");
            }
            return Ok(());
        }
        if self.txn.runs_late()
            && self.declared_read(t, key).is_none()
            && !self
                .txn
                .declared_range(t, Bound::Included(key), Bound::Included(key))
        {
            return bad("which it did not declare, in its later phase (or as an external read)");
        }
        Ok(())
    }

    /// Lazy: a uniqueness check by a *non-substantiating read* (the
    /// thesis's §4.2.3): whether `(t, key)`, a key this transaction
    /// declared as a write and has not written, exists at its timestamp,
    /// answered without running the producer of a sticky it finds: a later
    /// phase writes a value into every one of its stickies (enforced when
    /// it ends: `later_complete`), so a sticky means the key exists.
    /// `None`: not such a case (another protocol, an undeclared or own
    /// key, a table with write ranges): the caller reads. The thesis puts a
    /// Bloom filter in front of the check to avoid index lookups; here the
    /// index is in memory and the check starts from the transaction's own
    /// placeholder, so there is none.
    pub(super) fn lazy_exists(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<bool>> {
        if self.sh.cfg.protocol != DetProtocol::Lazy {
            return Ok(None);
        }
        let slot = self.slot(t, key);
        self.lazy_may_read(t, key, slot)?;
        let Some(s) = slot else {
            return Ok(None);
        };
        if self.own(s).is_some() || self.ranged(t)? {
            return Ok(None);
        }
        let ph = self.txn.slots[s].ver.load(Ordering::Acquire);
        // SAFETY: the placeholders of a planned batch are alive, and so is
        // the version below one while pinned.
        if ph.is_null() || unsafe { (*ph).state.load(Ordering::Acquire) } != PENDING {
            return Ok(None);
        }
        // SAFETY: as above; the walk starts at the placeholder's
        // predecessor, reachable at this timestamp.
        Ok(Some(
            match unsafe { walk((*ph).prev.load(Ordering::Acquire), self.txn.ts) } {
                Walk::Settled(v) => v.is_some(),
                Walk::Pending(_) => {
                    self.sh
                        .lazy
                        .existence_checks
                        .fetch_add(1, Ordering::Relaxed);
                    true
                }
            },
        ))
    }
}

/// Lazy: a later phase must write a value into each of its stickies (the
/// keys its now-phase left): a sticky promises one, which uniqueness
/// checks rely on (`BohmTx::lazy_exists`) without running the producer.
pub(super) fn later_complete(tx: &BohmTx<'_>) -> TxResult<()> {
    for (i, w) in tx.txn.writes().iter().enumerate() {
        // SAFETY: the placeholders of a planned batch are alive.
        if unsafe {
            (*w.ver.load(Ordering::Acquire))
                .state
                .load(Ordering::Acquire)
        } != PENDING
        {
            continue;
        }
        let what = match tx.writes.iter().find(|(s, _)| *s == i) {
            Some((_, Own::Delete)) => "deleted",
            Some(_) => continue,
            None => "did not write",
        };
        return Err(TxError::Error(Error::InvalidArgument(format!(
            "lazy: the later phase of '{}' {what} table {} key {:02x?}, which its now-phase \
             left sticky (a sticky promises a value)",
            // SAFETY: claimed by this thread.
            unsafe { &*tx.txn.proc.get() }.name(),
            w.table.as_u32(),
            tx.txn.key(w)
        ))));
    }
    Ok(())
}

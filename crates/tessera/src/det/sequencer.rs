//! The sequencer (BOHM's and Calvin's single sequencing thread; digest 3.2,
//! 6.1): submissions arrive from any number of client threads; one thread
//! gives each its timestamp, its position in the input log (a local
//! counter: no shared atomic on the hot path), and cuts the stream into
//! batches, by size ([`SequencerConfig::batch_size`], 10,000 as the
//! author's scripts run BOHM) or by time ([`SequencerConfig::batch_time`],
//! so that a trickle of requests is not held back).
//!
//! Each batch is appended to the input log (when there is one), handed to
//! the protocol's sink, then synced: its execution overlaps the `fdatasync`
//! (group commit per batch). Its outcomes are released to the submitters
//! only once the protocol says it has executed *and* the sync has
//! returned ([`BatchRelease`]), so no client sees the result of a request
//! that a crash could lose.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::input::InputLog;
use super::{DynProcedure, Outcome, Procedure, MAX_ARGS_LEN};
use crate::error::Error;

/// How batches are cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequencerConfig {
    /// Requests per batch at most (the thesis's authors ran BOHM at 10,000).
    pub batch_size: usize,
    /// A batch is cut this long after its first request arrived, full or
    /// not.
    pub batch_time: Duration,
}

impl Default for SequencerConfig {
    fn default() -> Self {
        SequencerConfig {
            batch_size: 10_000,
            batch_time: Duration::from_millis(2),
        }
    }
}

impl SequencerConfig {
    /// Check the values (the message names the knob).
    pub fn validate(&self) -> Result<(), Error> {
        if self.batch_size == 0 || self.batch_size > 1 << 24 {
            return Err(Error::InvalidArgument(format!(
                "batch size {} must be between 1 and {}",
                self.batch_size,
                1 << 24
            )));
        }
        if self.batch_time.is_zero() || self.batch_time > Duration::from_secs(10) {
            return Err(Error::InvalidArgument(format!(
                "batch time {:?} must be above zero and at most 10 s",
                self.batch_time
            )));
        }
        Ok(())
    }
}

type BoxedOutcome = Result<Outcome<Box<dyn Any + Send>>, Error>;

/// Where one submitter's outcome lands.
#[derive(Default)]
struct Cell {
    /// The outcome, and when it was released.
    slot: Mutex<Option<(BoxedOutcome, Instant)>>,
    cv: Condvar,
}

impl Cell {
    fn set(&self, o: BoxedOutcome, at: Instant) {
        *self.slot.lock() = Some((o, at));
        self.cv.notify_all();
    }
}

/// A sequenced request, as the protocol receives it.
pub struct Submission {
    /// The request.
    pub proc: Box<dyn DynProcedure>,
    /// Its encoded arguments (what the input log holds).
    pub args: Vec<u8>,
    cell: Arc<Cell>,
}

/// A batch: requests with consecutive timestamps from `first_ts`.
pub struct Batch {
    /// The batch number (0, 1, ...).
    pub number: u64,
    /// The timestamp of `txns[0]`; `txns[i]` has `first_ts + i`.
    pub first_ts: u64,
    /// The requests, in timestamp order.
    pub txns: Vec<Submission>,
    /// Give the outcomes back here once the batch has executed.
    pub release: Arc<BatchRelease>,
}

impl Batch {
    /// A batch read back from the input log, for replay through a
    /// protocol's normal path: already durable, its outcomes kept only
    /// for the returned [`Replayed`] handle to wait on.
    pub fn replayed(
        number: u64,
        first_ts: u64,
        procs: Vec<Box<dyn DynProcedure>>,
    ) -> (Batch, Replayed) {
        let cells: Vec<Arc<Cell>> = procs.iter().map(|_| Arc::default()).collect();
        let release = Arc::new(BatchRelease::new(cells.clone(), None));
        release.durable(Ok(()));
        let txns = procs
            .into_iter()
            .zip(cells.iter().cloned())
            .map(|(proc, cell)| Submission {
                proc,
                args: Vec::new(),
                cell,
            })
            .collect();
        (
            Batch {
                number,
                first_ts,
                txns,
                release,
            },
            Replayed { cells },
        )
    }
}

/// Waits for a replayed batch to execute.
pub struct Replayed {
    cells: Vec<Arc<Cell>>,
}

impl Replayed {
    /// Wait until the batch has executed: how many of its requests
    /// committed, and how many did not (a logic abort, or an error: either
    /// happened when the request first ran too, deterministically). Gives
    /// up (`None`) once `alive` says the stages that would execute the
    /// batch are gone (a stage thread panicked during recovery, before the
    /// sequencer's `Failer` exists): asked every 50 ms while waiting.
    pub fn wait_while(self, alive: impl Fn() -> bool) -> Option<(u64, u64)> {
        let (mut committed, mut aborted) = (0, 0);
        for c in self.cells {
            let mut slot = c.slot.lock();
            let (o, _) = loop {
                if let Some(o) = slot.take() {
                    break o;
                }
                if c.cv
                    .wait_for(&mut slot, std::time::Duration::from_millis(50))
                    .timed_out()
                    && !alive()
                {
                    return None;
                }
            };
            match o {
                Ok(Outcome::Committed(_)) => committed += 1,
                Ok(Outcome::Aborted) => aborted += 1,
                Err(_) => aborted += 1,
            }
        }
        Some((committed, aborted))
    }
}

/// The meeting point of a batch's two conditions for release: executed
/// (the protocol) and durable (the sequencer's sync).
pub struct BatchRelease {
    cells: Vec<Arc<Cell>>,
    st: Mutex<ReleaseState>,
    /// A sequenced batch: when it was cut, and where its latency (cut to
    /// release) goes; `None` for a replayed one.
    cut: Option<(Instant, Arc<BatchLatencies>)>,
}

/// Fails the unreleased batches and every later submission with an error:
/// a stage thread died (a bug), so they would never be released and their
/// submitters would wait for good.
pub struct Failer {
    failed: Arc<Mutex<Option<Error>>>,
    /// The batches cut and not known to be released, oldest first (held:
    /// a dead stage thread's queue drops the batches it had not taken).
    pending: Mutex<std::collections::VecDeque<Arc<BatchRelease>>>,
}

impl Failer {
    /// Fail with `e` (the first failure is the one kept): every pending
    /// batch's submitters get it, and so does every later submission.
    pub fn fail(&self, e: Error) {
        // Before the drain: a batch tracked after it sees the failure.
        self.failed.lock().get_or_insert_with(|| e.clone());
        let pending: Vec<_> = self.pending.lock().drain(..).collect();
        for r in pending {
            r.fail(e.clone());
        }
    }

    fn track(&self, r: &Arc<BatchRelease>) {
        let mut q = self.pending.lock();
        // A released batch stays while it owes deferred outcomes.
        q.retain(|f| !f.settled());
        q.push_back(r.clone());
    }
}

/// The latencies of released batches, from the cut to the release of
/// their outcomes (executed and durable), in microseconds and release
/// order: the thesis's batch latency (Table 6.1). The first
/// [`BatchLatencies::CAP`] are kept.
#[derive(Debug, Default)]
pub struct BatchLatencies(Mutex<Vec<u32>>);

impl BatchLatencies {
    /// The most latencies kept (4 MiB).
    pub const CAP: usize = 1 << 20;

    fn record(&self, d: Duration) {
        let mut v = self.0.lock();
        if v.len() < Self::CAP {
            v.push(d.as_micros().min(u128::from(u32::MAX)) as u32);
        }
    }

    /// The latencies recorded from the `from`-th on.
    pub fn since(&self, from: usize) -> Vec<u32> {
        let v = self.0.lock();
        v.get(from..).map(<[u32]>::to_vec).unwrap_or_default()
    }

    /// How many are recorded.
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[derive(Default)]
struct ReleaseState {
    outcomes: Option<Vec<BoxedOutcome>>,
    durable: Option<Result<(), Error>>,
    released: bool,
    /// Requests whose outcomes come later, one by one (`BatchRelease::late`),
    /// and those that came before the release.
    deferred: Vec<usize>,
    late: Vec<(usize, BoxedOutcome)>,
}

impl BatchRelease {
    fn new(cells: Vec<Arc<Cell>>, cut: Option<(Instant, Arc<BatchLatencies>)>) -> BatchRelease {
        BatchRelease {
            cells,
            st: Mutex::new(ReleaseState::default()),
            cut,
        }
    }

    /// The protocol has executed the batch: `outcomes[i]` is request `i`'s.
    ///
    /// # Panics
    /// If the count differs from the batch's, or the batch was executed
    /// already.
    pub fn executed(&self, outcomes: Vec<Result<Outcome<Box<dyn Any + Send>>, Error>>) {
        assert_eq!(outcomes.len(), self.cells.len(), "outcomes of a batch");
        let mut st = self.st.lock();
        assert!(st.outcomes.is_none(), "a batch executed twice");
        if st.released {
            // Failed already (`Failer`: a stage thread died).
            return;
        }
        st.outcomes = Some(outcomes);
        self.try_release(&mut st);
    }

    /// Request `i`'s outcome will come by [`BatchRelease::late`], after
    /// [`BatchRelease::executed`] (whose entry for it is ignored): a lazy
    /// external read that a worker answers. Before `executed`.
    pub fn defer(&self, i: usize) {
        self.st.lock().deferred.push(i);
    }

    /// The outcome of deferred request `i`: released now if the batch is,
    /// else with it (never before its input is durable).
    pub fn late(&self, i: usize, o: BoxedOutcome) {
        let mut st = self.st.lock();
        if !st.released {
            st.late.push((i, o));
            return;
        }
        // Released: still owed, unless a failure answered it already.
        if let Some(at) = st.deferred.iter().position(|&d| d == i) {
            st.deferred.swap_remove(at);
            self.cells[i].set(o, Instant::now());
        }
    }

    /// A stage thread died (`Failer`): every request of the batch not
    /// answered yet gets `e`.
    fn fail(&self, e: Error) {
        let mut st = self.st.lock();
        if !st.released {
            st.durable = Some(Err(e));
            self.try_release(&mut st);
            return;
        }
        let now = Instant::now();
        for i in std::mem::take(&mut st.deferred) {
            self.cells[i].set(Err(e.clone()), now);
        }
    }

    /// Released, and every deferred outcome delivered.
    fn settled(&self) -> bool {
        let st = self.st.lock();
        st.released && st.deferred.is_empty()
    }

    /// Whether the batch's input is durable (`None`: not yet synced; an
    /// error: it never will be).
    pub fn durability(&self) -> Option<Result<(), Error>> {
        self.st.lock().durable.clone()
    }

    fn durable(&self, r: Result<(), Error>) {
        let mut st = self.st.lock();
        if st.released {
            // Failed already (`Failer`): the sync's word comes too late.
            return;
        }
        st.durable = Some(r);
        self.try_release(&mut st);
    }

    fn try_release(&self, st: &mut ReleaseState) {
        if st.released {
            return;
        }
        match (&st.durable, &mut st.outcomes) {
            // Not durable: nothing it computed may be acknowledged.
            (Some(Err(e)), _) => {
                let now = Instant::now();
                for c in &self.cells {
                    c.set(Err(e.clone()), now);
                }
                st.deferred.clear();
                st.late.clear();
            }
            (Some(Ok(())), Some(outs)) => {
                let now = Instant::now();
                if let Some((at, lat)) = &self.cut {
                    lat.record(now - *at);
                }
                for (i, (c, o)) in self.cells.iter().zip(outs.drain(..)).enumerate() {
                    if !st.deferred.contains(&i) {
                        c.set(o, now);
                    }
                }
                for (i, o) in std::mem::take(&mut st.late) {
                    self.cells[i].set(o, now);
                    st.deferred.retain(|&d| d != i);
                }
            }
            _ => return,
        }
        st.released = true;
    }
}

/// An outcome and when it was released.
pub type Released<T> = (Result<Outcome<T>, Error>, Instant);

/// A submitter's handle on its request's outcome.
pub struct Receipt<T> {
    cell: Arc<Cell>,
    _out: PhantomData<fn() -> T>,
}

impl<T: Send + 'static> Receipt<T> {
    /// A receipt whose outcome is known already (a request that an
    /// interactive protocol ran at once: `Database::submit`).
    pub(crate) fn ready(o: Result<Outcome<T>, Error>) -> Receipt<T> {
        let boxed: BoxedOutcome = o.map(|o| match o {
            Outcome::Committed(t) => Outcome::Committed(Box::new(t) as Box<dyn Any + Send>),
            Outcome::Aborted => Outcome::Aborted,
        });
        let cell = Arc::new(Cell::default());
        cell.set(boxed, Instant::now());
        Receipt {
            cell,
            _out: PhantomData,
        }
    }
}

impl<T: 'static> Receipt<T> {
    fn unbox(o: BoxedOutcome) -> Result<Outcome<T>, Error> {
        match o? {
            Outcome::Aborted => Ok(Outcome::Aborted),
            Outcome::Committed(b) => match b.downcast::<T>() {
                Ok(t) => Ok(Outcome::Committed(*t)),
                Err(_) => Err(Error::InvalidArgument(
                    "a procedure's output has another type than its receipt's".into(),
                )),
            },
        }
    }

    /// Wait until the request's batch is released.
    pub fn wait(self) -> Result<Outcome<T>, Error> {
        self.wait_released().0
    }

    /// [`Receipt::wait`], and when the outcome was released (its batch
    /// executed and durable): the request's latency ends there.
    pub fn wait_released(self) -> (Result<Outcome<T>, Error>, Instant) {
        let mut slot = self.cell.slot.lock();
        loop {
            if let Some((o, at)) = slot.take() {
                return (Self::unbox(o), at);
            }
            self.cell.cv.wait(&mut slot);
        }
    }

    /// The outcome if the batch has been released; the receipt back if not.
    pub fn try_wait(self) -> Result<Result<Outcome<T>, Error>, Receipt<T>> {
        self.try_wait_released().map(|(o, _)| o)
    }

    /// [`Receipt::try_wait`], with the release's time.
    pub fn try_wait_released(self) -> Result<Released<T>, Receipt<T>> {
        let o = self.cell.slot.lock().take();
        match o {
            Some((o, at)) => Ok((Self::unbox(o), at)),
            None => Err(self),
        }
    }
}

/// The sink a protocol gives the sequencer: called on the sequencer's
/// thread with each batch in order.
pub type BatchSink = Box<dyn FnMut(Batch) + Send>;

/// The sequencing thread and its submission queue.
pub struct Sequencer {
    tx: Mutex<Option<mpsc::Sender<Submission>>>,
    /// Whether there is an input log: without one, nothing reads a
    /// request's encoded arguments, and `submit` does not encode them.
    logs: bool,
    failed: Arc<Mutex<Option<Error>>>,
    /// Bytes in the input log, updated before each batch is released.
    written: Arc<std::sync::atomic::AtomicU64>,
    latencies: Arc<BatchLatencies>,
    failer: Arc<Failer>,
    thread: Mutex<Option<JoinHandle<SequencerStats>>>,
}

/// What the sequencer did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SequencerStats {
    /// Batches cut.
    pub batches: u64,
    /// Requests sequenced.
    pub requests: u64,
    /// Bytes written to the input log.
    pub input_bytes: u64,
}

/// Polls in a row that find nothing before [`fill`] blocks instead.
const EMPTY_POLLS: u32 = 8;

/// Fill the batch that `pending`'s first request opened (just now) until
/// it is full or its time is up; false once every sender is gone.
///
/// It takes what is queued, then sleeps a slice (`poll`) of the batch
/// time rather than block on the channel. A receiver blocked in `recv`
/// makes every submission's send wake it (a futex wake per request: 2.6%
/// of all CPU on the client thread alone at 170K requests a second);
/// asleep, sends only queue. After [`EMPTY_POLLS`] slices in a row that
/// found nothing (a whole default batch time), it blocks for the next
/// request instead (one wake), so a slow trickle, or a long batch time,
/// costs no stream of wake-ups.
fn fill(
    rx: &mpsc::Receiver<Submission>,
    pending: &mut Vec<Submission>,
    cfg: &SequencerConfig,
    poll: Duration,
) -> bool {
    let t0 = Instant::now();
    let mut empty = 0u32;
    loop {
        let before = pending.len();
        while pending.len() < cfg.batch_size {
            match rx.try_recv() {
                Ok(s) => pending.push(s),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return false,
            }
        }
        empty = if pending.len() > before { 0 } else { empty + 1 };
        let left = cfg.batch_time.saturating_sub(t0.elapsed());
        if pending.len() >= cfg.batch_size || left.is_zero() {
            return true;
        }
        if empty < EMPTY_POLLS {
            std::thread::sleep(left.min(poll));
            continue;
        }
        match rx.recv_timeout(left) {
            Ok(s) => {
                pending.push(s);
                empty = 0;
            }
            Err(RecvTimeoutError::Timeout) => return true,
            Err(RecvTimeoutError::Disconnected) => return false,
        }
    }
}

impl Sequencer {
    /// Start the sequencing thread. Timestamps start at `first_ts`, batch
    /// numbers at `first_batch` (after a recovery: where the log ended).
    pub fn start(
        cfg: SequencerConfig,
        first_batch: u64,
        first_ts: u64,
        mut input: Option<InputLog>,
        mut sink: BatchSink,
    ) -> Result<Sequencer, Error> {
        cfg.validate()?;
        let logs = input.is_some();
        let (tx, rx) = mpsc::channel::<Submission>();
        let failed: Arc<Mutex<Option<Error>>> = Arc::default();
        let failed2 = failed.clone();
        let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let written2 = written.clone();
        let latencies = Arc::new(BatchLatencies::default());
        let latencies2 = latencies.clone();
        let failer = Arc::new(Failer {
            failed: failed.clone(),
            pending: Mutex::default(),
        });
        let failer2 = failer.clone();
        let thread = std::thread::Builder::new()
            .name("tessera-sequencer".into())
            .spawn(move || {
                let mut stats = SequencerStats::default();
                let mut next_batch = first_batch;
                let mut next_ts = first_ts;
                let mut pending: Vec<Submission> = Vec::with_capacity(cfg.batch_size);
                let mut open = true;
                // How often a filling batch takes what was submitted (see
                // `fill`): an eighth of the batch time, and a batch that
                // filled up waits at most 250 µs to be cut.
                let poll = (cfg.batch_time / 8)
                    .clamp(Duration::from_micros(20), Duration::from_micros(250));
                while open {
                    // No batch is open: block until a request opens one
                    // (the 100 ms timeout only bounds the wait).
                    match rx.recv_timeout(Duration::from_millis(100)) {
                        Ok(s) => {
                            pending.push(s);
                            open = fill(&rx, &mut pending, &cfg, poll);
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => open = false,
                    }
                    if pending.is_empty() {
                        continue;
                    }
                    let txns = std::mem::replace(&mut pending, Vec::with_capacity(cfg.batch_size));
                    let n = txns.len() as u64;
                    let number = next_batch;
                    let batch_ts = next_ts;
                    next_batch += 1;
                    next_ts += n;
                    stats.batches += 1;
                    stats.requests += n;
                    let release = Arc::new(BatchRelease::new(
                        txns.iter().map(|s| s.cell.clone()).collect(),
                        Some((Instant::now(), latencies2.clone())),
                    ));
                    // Tracked before the failure is read (see `Failer::fail`).
                    failer2.track(&release);
                    let earlier_failure = failed2.lock().clone();
                    let logged = match (&earlier_failure, input.as_mut()) {
                        (Some(e), _) => Err(e.clone()),
                        (None, None) => Ok(()),
                        (None, Some(log)) => log
                            .append(
                                number,
                                batch_ts,
                                txns.iter().map(|s| (s.proc.id(), &s.args[..])),
                            )
                            .map_err(|e| {
                                Error::io(
                                    format!("cannot write the input log {}", log.path().display()),
                                    e,
                                )
                            }),
                    };
                    if let Err(e) = logged {
                        // Never executed, never acknowledged.
                        *failed2.lock() = Some(e.clone());
                        release.durable(Err(e));
                        continue;
                    }
                    let rel = release.clone();
                    sink(Batch {
                        number,
                        first_ts: batch_ts,
                        txns,
                        release,
                    });
                    let synced = match input.as_mut() {
                        None => Ok(()),
                        Some(log) => log.sync().map_err(|e| {
                            Error::io(
                                format!("cannot sync the input log {}", log.path().display()),
                                e,
                            )
                        }),
                    };
                    if let Err(e) = &synced {
                        *failed2.lock() = Some(e.clone());
                    }
                    if let Some(log) = &input {
                        written2.store(log.bytes_written(), std::sync::atomic::Ordering::Relaxed);
                    }
                    rel.durable(synced);
                }
                stats.input_bytes = written2.load(std::sync::atomic::Ordering::Relaxed);
                stats
            })
            .map_err(|e| Error::io("cannot start the sequencer thread", e))?;
        Ok(Sequencer {
            tx: Mutex::new(Some(tx)),
            logs,
            failed,
            written,
            latencies,
            failer,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// What fails the pending batches and later submissions when a stage
    /// thread dies.
    pub fn failer(&self) -> &Arc<Failer> {
        &self.failer
    }

    /// The released batches' latencies (cut to release).
    pub fn batch_latencies(&self) -> &Arc<BatchLatencies> {
        &self.latencies
    }

    /// Bytes written to the input log so far (every released batch's
    /// included).
    pub fn input_bytes(&self) -> u64 {
        self.written.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Submit `p`: it gets the next timestamp, and its outcome comes once
    /// its batch has executed and is durable. Refused (`InvalidArgument`)
    /// if its encoded arguments exceed [`MAX_ARGS_LEN`] (with an input
    /// log: without one they are not encoded); an I/O error once
    /// the input log has failed; `InvalidArgument` after shutdown.
    pub fn submit<P: Procedure>(&self, p: P) -> Result<Receipt<P::Output>, Error>
    where
        P::Output: Send + 'static,
    {
        // Without an input log the arguments are not encoded: nothing
        // would read them (nor is their size limit, an input-log entry's,
        // checked then).
        let mut args = Vec::new();
        if self.logs {
            p.encode(&mut args);
        }
        self.submit_boxed(Box::new(p), args).map(|cell| Receipt {
            cell,
            _out: PhantomData,
        })
    }

    fn submit_boxed(&self, proc: Box<dyn DynProcedure>, args: Vec<u8>) -> Result<Arc<Cell>, Error> {
        if args.len() > MAX_ARGS_LEN {
            return Err(Error::InvalidArgument(format!(
                "procedure '{}' encodes {} bytes of arguments, over the {MAX_ARGS_LEN} an input-log entry holds",
                proc.name(),
                args.len()
            )));
        }
        if let Some(e) = self.failed.lock().clone() {
            return Err(e);
        }
        let cell = Arc::new(Cell::default());
        let sub = Submission {
            proc,
            args,
            cell: cell.clone(),
        };
        let tx = self.tx.lock();
        let sent = tx.as_ref().map(|t| t.send(sub).is_ok()).unwrap_or(false);
        if !sent {
            return Err(Error::InvalidArgument("the sequencer has shut down".into()));
        }
        Ok(cell)
    }

    /// Stop taking submissions, cut what is queued as a last batch, and
    /// wait for the thread; its statistics, or the input log's failure.
    pub fn shutdown(&self) -> Result<SequencerStats, Error> {
        drop(self.tx.lock().take());
        let stats = match self.thread.lock().take() {
            Some(h) => h
                .join()
                .map_err(|_| Error::InvalidArgument("the sequencer thread panicked".into()))?,
            None => SequencerStats::default(),
        };
        match self.failed.lock().clone() {
            Some(e) => Err(e),
            None => Ok(stats),
        }
    }
}

impl Drop for Sequencer {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

//! The redo log: Silo's epoch-based group commit (Tu et al., SOSP 2013,
//! section 4.10), shared by every protocol.
//!
//! * **Workers** encode a record-level redo entry per committed update
//!   transaction (table, key, value or delete, its epoch and its stamp: the
//!   Silo TID or the ERMIA commit stamp) straight into a per-worker buffer
//!   ([`Slot`]) at commit. No shared counter, no shared buffer: the only
//!   shared-memory traffic is the worker's own uncontended slot lock.
//! * **Loggers** (threads, `Options::loggers`) take the buffers of their
//!   workers every few milliseconds and write them to segment files with
//!   one large sequential write; once the epoch has moved on they follow
//!   the data with an **epoch mark** ("every record of my workers with
//!   epoch <= m is in this stream before this block") and `fdatasync`: one
//!   sync per epoch. A logger's durable epoch is its last synced mark; the
//!   database's durable epoch `D` is the minimum over loggers (Silo's
//!   `pepoch`). Recovery recomputes `D` the same way from the marks in the
//!   files, so no separate persistent-epoch file needs an extra fsync.
//! * **Commit acknowledgement** follows Silo's rule: a transaction of epoch
//!   `e` is durable once `D >= e`. `Durability::Sync` makes
//!   `Worker::run` wait for that; `Durability::Async` returns at once and
//!   hands out a [`CommitToken`] to wait on.
//!
//! ## Why the durable epoch is safe
//!
//! A worker *announces* itself (`Slot::pend`, sequentially consistent, plus
//! a fence) with a lower bound of its coming commit epoch before it reads
//! the commit epoch, and withdraws the announcement after its entry is in
//! the buffer (or after an abort). A logger reads the global epoch `E`
//! first, then every announcement, then takes the buffers. For each worker,
//! either the logger saw the announcement (its bound is at most the
//! announced epoch) or the worker's epoch read comes after the logger's read
//! of `E`, so its entry has epoch >= `E`. Hence every entry with epoch below
//! `min(E, announcements)` has been taken, and `min(...) - 1` is a correct
//! mark. Idle workers (never announced) do not hold the durable epoch back.
//!
//! Epochs order dependent transactions under every protocol: Silo reads the
//! epoch at its serialization point (section 4.2); ERMIA reads it after its
//! commit stamp and before it marks itself committed, and a transaction
//! that read or overwrote its versions reads the epoch later. So the set of
//! transactions with epoch <= `D` is closed under write-read and
//! write-write dependencies, and replaying exactly that set gives a
//! serializable state (Silo section 4.10's argument).

pub mod checkpoint;
pub mod format;
pub mod frontier;
pub mod meta;
pub mod recovery;
pub mod segment;

use std::path::Path;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};

use crate::catalog::TableId;
use crate::epoch::Epochs;
use crate::error::Error;
use format::BlockKind;
use frontier::{Frontier, FrontierWriter};
use segment::SegmentWriter;

/// When [`crate::Worker::run`] returns relative to the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durability {
    /// No log at all: the in-memory engine (the embedded default).
    None,
    /// Log every committed update; `run` returns at commit, before the
    /// transaction is durable (a crash in the next epoch or so may lose
    /// it). [`crate::Worker::last_commit`] gives a [`CommitToken`] to
    /// wait on ([`crate::Database::wait_durable`]), and
    /// [`crate::Database::flush`] makes every commit so far durable.
    Async,
    /// Log every committed update; `run` returns only once the
    /// transaction's epoch is durable (Silo's rule): the epoch closed
    /// (every 40 ms by default) and the log synced. So a commit waits
    /// about one epoch plus an `fdatasync`, and every commit of an epoch
    /// shares that wait (group commit): throughput comes from many
    /// threads, not from one thread's commits in a row.
    Sync,
}

impl Durability {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Durability::None => "none",
            Durability::Async => "async",
            Durability::Sync => "sync",
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Durability::None),
            "async" => Ok(Durability::Async),
            "sync" => Ok(Durability::Sync),
            other => Err(Error::InvalidArgument(format!(
                "unknown durability '{other}' (known: none, async, sync)"
            ))),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Names the durability point of a committed transaction: it is durable
/// once the database's durable epoch reaches [`CommitToken::epoch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitToken {
    pub(crate) epoch: u64,
}

impl CommitToken {
    /// The epoch the transaction committed in.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// No announcement.
const NONE: u64 = u64::MAX;
/// A worker buffer at this size wakes its logger early.
const SOFT_BUFFER: usize = 1 << 20;
/// A worker buffer at this size makes the worker wait for its logger.
const HARD_BUFFER: usize = 64 << 20;
/// Buffers up to this capacity are kept for reuse by the loggers.
const SPARE_MAX: usize = 8 * SOFT_BUFFER;

/// A worker's log buffer and announcement.
pub(crate) struct Slot {
    /// Lower bound of the epoch of an entry this worker is about to add, or
    /// `NONE`.
    pend: AtomicU64,
    buf: Mutex<SlotBuf>,
}

#[derive(Default)]
struct SlotBuf {
    data: Vec<u8>,
    max_epoch: u64,
    txns: u64,
}

/// A transaction's redo entry being written: the only way protocols reach
/// the log's encoding. Each call adds one write of the committed
/// transaction, by table id and key.
pub(crate) struct RedoWriter<'b> {
    buf: &'b mut Vec<u8>,
    n: u32,
}

impl RedoWriter<'_> {
    /// The row `key` now holds `val` (an insert or an overwrite).
    #[inline]
    pub(crate) fn put(&mut self, table: TableId, key: &[u8], val: &[u8]) {
        format::push_write(self.buf, table.0, format::WriteOp::Put, key, val);
        self.n += 1;
    }

    /// The row `key` was deleted.
    #[inline]
    pub(crate) fn delete(&mut self, table: TableId, key: &[u8]) {
        format::push_write(self.buf, table.0, format::WriteOp::Delete, key, &[]);
        self.n += 1;
    }

    /// The row `key` changed from `old` to `new`: logged as the bytes that
    /// differ when that is smaller (same-length rows), else as a put.
    #[inline]
    pub(crate) fn patch(&mut self, table: TableId, key: &[u8], old: &[u8], new: &[u8]) {
        format::push_patch(self.buf, table.0, key, old, new);
        self.n += 1;
    }
}

/// Worker-private logging state.
#[derive(Default)]
pub(crate) struct LogCursor {
    announced: bool,
    /// The epoch that must be durable before the last committed
    /// transaction may be acknowledged: its commit epoch, or for a
    /// read-only one the newest epoch it can have read.
    pub ack: u64,
    /// A buffer for old values (ERMIA's patch encoding).
    pub scratch: Vec<u8>,
}

/// Counters of the log (see [`crate::Database::log_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Bytes written to segment files by this process.
    pub bytes: u64,
    /// `fdatasync` calls.
    pub syncs: u64,
    /// Transaction entries written.
    pub txns: u64,
    /// The durable epoch.
    pub durable_epoch: u64,
}

/// Where each logger starts writing.
pub(crate) struct LoggerStart {
    pub segno: u64,
    pub seq: u64,
}

/// A segment no logger writes to any more.
pub(crate) struct ClosedSegment {
    pub logger: u16,
    pub segno: u64,
    pub path: std::path::PathBuf,
    /// Largest epoch of any entry in it.
    pub max_epoch: u64,
}

/// The log of one open database.
pub(crate) struct Log {
    pub mode: Durability,
    slots: Box<[CachePadded<Slot>]>,
    nloggers: usize,
    logger_durable: Box<[CachePadded<AtomicU64>]>,
    durable: CachePadded<AtomicU64>,
    waiters: Mutex<()>,
    waiters_cv: Condvar,
    kick: Mutex<bool>,
    kick_cv: Condvar,
    failed: Mutex<Option<Error>>,
    has_failed: AtomicBool,
    stop: AtomicBool,
    threads: Mutex<Vec<JoinHandle<()>>>,
    bytes: AtomicU64,
    syncs: AtomicU64,
    txns: AtomicU64,
    epochs: Arc<Epochs>,
    poll: Duration,
    /// Closed segments, for deletion once a checkpoint covers them.
    closed: Mutex<Vec<ClosedSegment>>,
    /// `tessera.frontier` and its contents: written before a new durable
    /// epoch is published (see the `frontier` module).
    frontier: Mutex<(FrontierWriter, Frontier)>,
}

impl Log {
    /// Start `starts.len()` loggers writing new segments in `dir`; the
    /// durable epoch starts at `durable` (what recovery found). `frontier`
    /// describes the streams already in `dir` as recovery checked them; it
    /// is completed with the new segments and written (atomically) before
    /// the loggers start.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        dir: &Path,
        mode: Durability,
        epochs: Arc<Epochs>,
        starts: Vec<LoggerStart>,
        closed: Vec<ClosedSegment>,
        durable: u64,
        mut frontier: Frontier,
        segment_bytes: u64,
        epoch_interval: Duration,
    ) -> Result<Arc<Log>, Error> {
        let nslots = epochs.capacity();
        let nloggers = starts.len().max(1);
        // Every logger of a run starts with a mark of the durable epoch it
        // starts from, so recovery's minimum over this run's loggers never
        // falls below it; the frontier records those marks before any
        // logger runs.
        let mut writers = Vec::new();
        for (i, s) in starts.iter().enumerate() {
            let mut writer = SegmentWriter::create(dir, i as u16, s.segno, segment_bytes)
                .map_err(|e| io_error("create a log segment in", dir, e))?;
            let mut first = Vec::new();
            format::write_block(
                &mut first,
                BlockKind::EpochMark,
                i as u16,
                s.seq,
                durable,
                &[],
            );
            writer
                .append(&first)
                .and_then(|_| writer.sync())
                .map_err(|e| io_error("write", writer.path(), e))?;
            let had = frontier.stream(i as u16).is_some();
            let f = frontier.stream_mut(i as u16);
            if !had {
                f.first_segno = s.segno;
            }
            f.segno = s.segno;
            f.offset = writer.len();
            f.mark = durable;
            writers.push((writer, s.seq + 1));
        }
        frontier.durable = durable;
        frontier.gen += 1;
        let fw = FrontierWriter::create(dir, &frontier)?;
        let log = Arc::new(Log {
            mode,
            slots: (0..nslots)
                .map(|_| {
                    CachePadded::new(Slot {
                        pend: AtomicU64::new(NONE),
                        buf: Mutex::new(SlotBuf::default()),
                    })
                })
                .collect(),
            nloggers,
            logger_durable: (0..nloggers)
                .map(|_| CachePadded::new(AtomicU64::new(durable)))
                .collect(),
            durable: CachePadded::new(AtomicU64::new(durable)),
            waiters: Mutex::new(()),
            waiters_cv: Condvar::new(),
            kick: Mutex::new(false),
            kick_cv: Condvar::new(),
            failed: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            bytes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            txns: AtomicU64::new(0),
            epochs,
            // Poll the epoch a few times per epoch, so a waiter sees its
            // epoch durable about one fsync after the epoch advanced.
            poll: (epoch_interval / 8).clamp(Duration::from_micros(200), Duration::from_millis(5)),
            closed: Mutex::new(closed),
            frontier: Mutex::new((fw, frontier)),
        });
        let mut handles = Vec::new();
        for (i, (writer, seq)) in writers.into_iter().enumerate() {
            let l = Arc::clone(&log);
            let h = std::thread::Builder::new()
                .name(format!("tessera-logger-{i}"))
                .spawn(move || l.logger_main(i, writer, seq, durable))
                .map_err(|e| Error::io("cannot start a logger thread", e))?;
            handles.push(h);
        }
        *log.threads.lock() = handles;
        Ok(log)
    }

    /// The durable epoch `D`.
    #[inline]
    pub fn durable_epoch(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Counters.
    pub fn stats(&self) -> LogStats {
        LogStats {
            bytes: self.bytes.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            txns: self.txns.load(Ordering::Relaxed),
            durable_epoch: self.durable_epoch(),
        }
    }

    /// The error that stopped a logger, if any.
    pub fn failure(&self) -> Option<Error> {
        if self.has_failed.load(Ordering::Acquire) {
            self.failed.lock().clone()
        } else {
            None
        }
    }

    /// Before an update transaction reads its commit epoch: announce that
    /// this worker may add an entry of an epoch >= the current one.
    #[inline]
    pub fn announce(&self, slot: usize, cur: &mut LogCursor) {
        if !cur.announced {
            let s = &self.slots[slot];
            s.pend.store(self.epochs.global(), Ordering::SeqCst);
            fence(Ordering::SeqCst);
            cur.announced = true;
        }
    }

    /// After a commit or abort: no entry of this worker is in flight any
    /// more.
    #[inline]
    pub fn settle(&self, slot: usize, cur: &mut LogCursor) {
        if cur.announced {
            self.slots[slot].pend.store(NONE, Ordering::SeqCst);
            cur.announced = false;
        }
    }

    /// Add the redo entry of a committed transaction: `fill` hands its
    /// writes to the [`RedoWriter`] (the protocol decides what it writes,
    /// the log how the entry is encoded). `stamp` orders entries of one
    /// epoch (Silo's TID, ERMIA's commit stamp).
    #[inline]
    pub fn append<F>(&self, slot: usize, cur: &mut LogCursor, epoch: u64, stamp: u64, fill: F)
    where
        F: FnOnce(&mut RedoWriter<'_>),
    {
        let s = &self.slots[slot];
        let (before, len) = {
            let mut b = s.buf.lock();
            let before = b.data.len();
            let at = format::begin_txn(&mut b.data, epoch, stamp);
            let mut w = RedoWriter {
                buf: &mut b.data,
                n: 0,
            };
            fill(&mut w);
            let n = w.n;
            format::finish_txn(&mut b.data, at, n);
            b.max_epoch = b.max_epoch.max(epoch);
            b.txns += 1;
            (before, b.data.len())
        };
        cur.ack = epoch;
        self.settle(slot, cur);
        if len >= SOFT_BUFFER {
            // Wake the loggers once, when the buffer crosses the mark (not
            // on every commit while it stays above it).
            if before < SOFT_BUFFER {
                self.kick();
            }
            if len >= HARD_BUFFER {
                // Back-pressure: the loggers fell behind.
                while s.buf.lock().data.len() >= HARD_BUFFER && !self.stop.load(Ordering::Relaxed) {
                    if self.has_failed.load(Ordering::Acquire) {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
        }
    }

    /// Wake the loggers now.
    pub fn kick(&self) {
        let mut k = self.kick.lock();
        *k = true;
        self.kick_cv.notify_all();
    }

    /// Wait until epoch `e` is durable.
    pub fn wait_durable(&self, e: u64) -> Result<(), Error> {
        let mut spins = 0u32;
        loop {
            if self.durable_epoch() >= e {
                return Ok(());
            }
            if let Some(err) = self.failure() {
                return Err(err);
            }
            if crate::backoff::still_spinning(spins) {
                // Spin only: past the spinning phase this wait blocks on the
                // condition variable instead of yielding.
                spins += 1;
                crate::backoff::spin(1);
                continue;
            }
            let mut g = self.waiters.lock();
            if self.durable_epoch() >= e || self.has_failed.load(Ordering::Acquire) {
                continue;
            }
            self.waiters_cv.wait_for(&mut g, Duration::from_millis(20));
        }
    }

    /// Final round and stop (the database is closing: no worker exists).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.kick();
        for h in self.threads.lock().drain(..) {
            let _ = h.join();
        }
    }

    /// Delete closed segments all of whose entries have epochs below `c`
    /// (a checkpoint of epoch `c` covers them), oldest first per logger.
    /// The frontier records each stream's new oldest segment first, so a
    /// crash between the two leaves extra old segments, never a missing
    /// one. Returns how many were deleted.
    pub fn delete_segments_below(&self, c: u64) -> Result<usize, Error> {
        let mut closed = self.closed.lock();
        closed.sort_by_key(|s| (s.logger, s.segno));
        // Only a prefix of each stream goes, so recovery never sees a gap.
        let mut doomed = Vec::new();
        let mut blocked: Vec<u16> = Vec::new();
        for (i, s) in closed.iter().enumerate() {
            if blocked.contains(&s.logger) {
                continue;
            }
            if s.max_epoch >= c {
                blocked.push(s.logger);
                continue;
            }
            doomed.push(i);
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        {
            let mut fr = self.frontier.lock();
            for &i in &doomed {
                let s = &closed[i];
                let f = fr.1.stream_mut(s.logger);
                f.first_segno = f.first_segno.max(s.segno + 1);
            }
            fr.1.gen += 1;
            let (w, f) = &mut *fr;
            w.write(f)?;
        }
        let mut deleted = 0;
        let mut gone = vec![false; closed.len()];
        for &i in &doomed {
            let s = &closed[i];
            match std::fs::remove_file(&s.path) {
                Ok(()) => {
                    deleted += 1;
                    gone[i] = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => gone[i] = true,
                // Left for the next checkpoint (recovery ignores segments
                // older than the frontier's oldest).
                Err(_) => {}
            }
        }
        let mut k = 0;
        closed.retain(|_| {
            k += 1;
            !gone[k - 1]
        });
        Ok(deleted)
    }

    /// Run `f` while no logger writes `tessera.frontier` (a backup copies
    /// the file under this lock).
    pub(crate) fn with_frontier_quiet<R>(&self, f: impl FnOnce() -> R) -> R {
        let _fr = self.frontier.lock();
        f()
    }

    /// `tessera.meta` moved to generation `gen`: the next frontier write
    /// records it.
    pub fn note_meta_gen(&self, gen: u64) {
        let mut fr = self.frontier.lock();
        fr.1.meta_gen = fr.1.meta_gen.max(gen);
    }

    fn fail(&self, err: Error) {
        *self.failed.lock() = Some(err);
        self.has_failed.store(true, Ordering::Release);
        let _g = self.waiters.lock();
        self.waiters_cv.notify_all();
    }

    fn logger_main(&self, me: usize, mut w: SegmentWriter, mut seq: u64, mut mark: u64) {
        let mine: Vec<usize> = (me..self.slots.len()).step_by(self.nloggers).collect();
        let mut out: Vec<u8> = Vec::with_capacity(4 << 20);
        let mut taken: Vec<(Vec<u8>, u64, u64)> = Vec::new();
        let mut spare: Vec<Vec<u8>> = Vec::new();
        // The capacity of the buffers handed to workers: at least twice
        // `SOFT_BUFFER`, more if a taken buffer had grown (up to `SPARE_MAX`).
        let mut high = 2 * SOFT_BUFFER;
        // Enough spares that every slot's buffer can be in flight at once:
        // reused buffers keep their pages, so a worker does not fault in
        // fresh memory as it appends.
        let keep = mine.len() + 4;
        // Largest entry epoch in the current segment.
        let mut seg_max = 0u64;
        loop {
            let stopping = self.stop.load(Ordering::SeqCst);
            // The order matters (see the module docs): E, then the
            // announcements, then the buffers.
            let e = self.epochs.global();
            if e >= crate::storage::tid::MAX_EPOCH {
                // The ticker stops at the last epoch a TID holds, so the
                // commits of that epoch can never become durable: say so
                // (waiters get this error) rather than leave them waiting.
                self.fail(Error::Corrupt(format!(
                    "logger {me}: epochs exhausted (the global epoch reached {}, the last a TID holds)",
                    crate::storage::tid::MAX_EPOCH
                )));
                return;
            }
            fence(Ordering::SeqCst);
            let mut bound = e;
            for &i in &mine {
                let p = self.slots[i].pend.load(Ordering::SeqCst);
                bound = bound.min(p);
            }
            for &i in &mine {
                // The buffer a worker fills next is sized here, off its
                // thread and outside its lock: twice the mark that wakes
                // this logger, or the largest a worker has needed if more.
                // A commit's append then never grows it (no allocation on
                // the commit path) unless the logger, once woken, falls a
                // further `SOFT_BUFFER` behind.
                let mut fresh = spare.pop().unwrap_or_default();
                if fresh.capacity() < high {
                    fresh.reserve_exact(high);
                }
                let mut b = self.slots[i].buf.lock();
                if b.data.is_empty() {
                    drop(b);
                    spare.push(fresh);
                } else {
                    let data = std::mem::replace(&mut b.data, fresh);
                    high = high.max(data.capacity()).min(SPARE_MAX);
                    taken.push((data, b.max_epoch, b.txns));
                    b.max_epoch = 0;
                    b.txns = 0;
                }
            }
            let new_mark = bound.saturating_sub(1);
            if seq + taken.len() as u64 + 1 > format::MAX_SEQ {
                self.fail(Error::Corrupt(format!(
                    "logger {me}: block sequence numbers exhausted (at {})",
                    format::MAX_SEQ
                )));
                return;
            }
            if !taken.is_empty() || new_mark > mark {
                out.clear();
                let mut txns = 0;
                for (data, max_epoch, n) in &taken {
                    format::write_block(
                        &mut out,
                        BlockKind::Txns,
                        me as u16,
                        seq,
                        *max_epoch,
                        data,
                    );
                    seq += 1;
                    txns += n;
                }
                let advance = new_mark > mark;
                if advance {
                    format::write_block(
                        &mut out,
                        BlockKind::EpochMark,
                        me as u16,
                        seq,
                        new_mark,
                        &[],
                    );
                    seq += 1;
                }
                let (segno, path) = (w.segno(), w.path().to_path_buf());
                let round_max = taken.iter().map(|t| t.1).max().unwrap_or(0);
                // fdatasync once per epoch (Silo 4.10): only a round that
                // advances the mark needs its bytes on disk; other rounds
                // only hand data to the kernel early, so the epoch's sync
                // has less left to write.
                let sync = advance || stopping;
                let res = w
                    .append(&out)
                    .and_then(|_| if sync { w.sync() } else { Ok(()) });
                if w.segno() != segno {
                    // Rotated before this round's data: the old segment is
                    // complete.
                    self.closed.lock().push(ClosedSegment {
                        logger: me as u16,
                        segno,
                        path,
                        max_epoch: seg_max,
                    });
                    seg_max = 0;
                }
                seg_max = seg_max.max(round_max);
                if let Err(err) = res {
                    self.fail(Error::io(
                        format!("logger {me}: cannot write or sync {}", w.path().display()),
                        err,
                    ));
                    return;
                }
                self.bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
                if sync {
                    self.syncs.fetch_add(1, Ordering::Relaxed);
                }
                self.txns.fetch_add(txns, Ordering::Relaxed);
                for (mut data, _, _) in taken.drain(..) {
                    if spare.len() < keep && data.capacity() <= SPARE_MAX {
                        data.clear();
                        spare.push(data);
                    }
                }
                if advance {
                    mark = new_mark;
                    // Under the frontier's lock: this stream's synced
                    // position goes into the frontier before its mark can
                    // count towards a durable epoch, and a new durable
                    // epoch is recorded (written and synced) before it is
                    // published to waiters.
                    let mut fr = self.frontier.lock();
                    {
                        let f = fr.1.stream_mut(me as u16);
                        f.segno = w.segno();
                        f.offset = w.len();
                        f.mark = mark;
                    }
                    self.logger_durable[me].store(mark, Ordering::Release);
                    let d = self
                        .logger_durable
                        .iter()
                        .map(|x| x.load(Ordering::Acquire))
                        .min()
                        .unwrap_or(mark);
                    if d > fr.1.durable {
                        fr.1.durable = d;
                        fr.1.gen += 1;
                        let (fw, f) = &mut *fr;
                        if let Err(e) = fw.write(f) {
                            drop(fr);
                            self.fail(e);
                            return;
                        }
                        drop(fr);
                        if self.durable.fetch_max(d, Ordering::AcqRel) < d {
                            let _g = self.waiters.lock();
                            self.waiters_cv.notify_all();
                        }
                    }
                }
            }
            if stopping {
                return;
            }
            let mut k = self.kick.lock();
            if !*k {
                self.kick_cv.wait_for(&mut k, self.poll);
            }
            *k = false;
        }
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("cannot {what} {}", path.display()), e)
}

//! Piece-wise visibility (PWV; Faleiro's thesis §6.4, digest 4.3 and
//! checklist 6.3) on the deterministic substrate that BOHM and
//! `2pl-ordered` share: the same sequencer, batches, input log, release of
//! outcomes per batch, checkpoints and replay, and the same records (one
//! version per record, updated in place, as under `2pl-ordered`).
//!
//! - **Pieces.** A transaction is a DAG of pieces (`det::pieces`); one that
//!   does not decompose itself is one abortable piece with its declared key
//!   set. Pieces are put in a topological order with every abortable piece
//!   (before the commit point) first; a parent of an abortable piece is
//!   abortable too.
//! - **Partitions.** One executor thread per partition (`exec_threads`);
//!   a record belongs to `hash(table, key prefix)` (the prefix is the
//!   whole key unless the table was given a partition prefix, so that a
//!   group of keys such as a TPC-C district's lives in one partition). A
//!   piece whose accesses fall in one partition runs there; one whose
//!   accesses span several (a coarse group shorter than the table's
//!   partition prefix, or a transaction that does not decompose itself) is
//!   a *gang*: it has a member on each of those partitions and runs once,
//!   on the thread of the last member to find itself locally ready, while
//!   the other members hold their partitions' conflicting pieces back. The
//!   thesis replicates such a piece's logic to every partition instead;
//!   the gang runs it once and needs no replica-aware logic.
//! - **The partition-local conflict graph**, built by each executor for
//!   the whole batch before it runs a piece: per record (or group's lock
//!   record), tickets in the batch's global piece order (transactions in
//!   log order, pieces in topological order). A write waits until every
//!   earlier access has completed, a read until every access up to the
//!   last earlier write has: readiness check 1 of Listing 6.1 is one
//!   comparison per key against the record's completion counter. An access
//!   that follows a piece of its own transaction on the same record waits
//!   for that piece to have *executed* instead (it may be an abortable
//!   piece that completes only at the commit decision, which may wait for
//!   this one). Coarse groups and exact keys meet through group lock
//!   records: an exact access also takes a ticket on every group of its
//!   table declared in the same batch on the same partition that prefixes
//!   its key.
//! - **RVPs.** One dependency counter per distinct parent set (pieces with
//!   the same parents share it), decremented by each parent once it has
//!   run; the commit RVP, one `AtomicI64` per transaction: decremented by
//!   each abortable piece that executes, swapped to -1 by the first that
//!   aborts.
//! - **Post-processing (Listing 6.2).** An abortable piece publishes
//!   `EXECUTED` before it touches the RVPs. The thesis's first aborter
//!   undoes the executed abortable pieces at once, on any partition; a
//!   later piece of the same transaction may then still be running on a
//!   record the undo restores (it follows an executed piece of its own
//!   transaction), and a piece that executes after the swap must undo
//!   itself. Here every abortable piece, executed, aborted or skipped,
//!   *settles* a per-transaction counter once it is done with the data;
//!   the last to settle makes the decision effective: on commit it marks
//!   every abortable piece `COMPLETED`, on abort it first undoes the
//!   executed ones in reverse order. The decision itself is the thesis's
//!   (commit RVP), and so is what it releases; only the undo waits for
//!   the transaction's abortable pieces to stop running.
//! - **Readiness** is the thesis's three-way test: a piece of an aborted
//!   transaction is skipped (the footnote's optimization: whatever its
//!   parents), a non-abortable piece waits for the commit RVP to be 0. Every
//!   piece, skipped or not, first passes check 1 (it still counts in its
//!   records' completion counters, which must not move ahead of an earlier
//!   access).
//! - A piece that is not ready goes on its executor's pending list (the
//!   thesis's), kept by what it waits for (`Waits`: a record's ticket, its
//!   transaction's progress, its commit decision); the executor moves on
//!   and looks again at what the completions it is told of have moved (no
//!   OS wait).
//!
//! Corner cases (§6.4.7): a non-abortable piece that fails (an error, a
//! panic, or an abort the author did not declare) is the thesis's full
//! system failure: the request is expunged from the input log
//! (`det::expunge`), its batch and everything after it fail with
//! `Error::SystemFailure`, and recovery reloads the last checkpoint and
//! replays without it (`Database` restarts at once with a data directory;
//! in memory it stays failed).

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::ops::Bound;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU8, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use super::{
    absent_version, entry, free_record, panic_message, partition, range_unit, BRecord, BTxn,
    BatchCtx, CcMap, Latest, LatestMap, PointRw, Shared, Version, TOMBSTONE, VALUE,
};
use crate::catalog::TableId;
use crate::det::sequencer::Batch;
use crate::det::{Outcome, PieceId, PieceIo, PiecePlan};
use crate::epoch::{Guard, LocalEpoch};
use crate::error::{ConflictReason, Error, TxError, TxResult};
use crate::index::{Insert, Lookup, Unobserved};
use crate::request::{Access, KeySet};
use crate::txn::{ScanOptions, Txn, TxnOps};

/// Piece states (§6.4.4): `UNEXECUTED`, `RUNNING` (claimed by the thread
/// that runs it), `EXECUTED` (an abortable piece done with the data, run or
/// skipped, waiting for the commit decision), `COMPLETED`.
const UNEXECUTED: u8 = 0;
const RUNNING: u8 = 1;
const EXECUTED: u8 = 2;
const COMPLETED: u8 = 3;

/// No piece (a ticket with no same-transaction predecessor).
const NONE: u16 = u16::MAX;

/// A lock ticket: the record (a key's, or a group's lock record), the
/// completion count it waits for, and the piece of its own transaction it
/// follows on that record (`NONE`: none).
#[derive(Clone, Copy)]
struct Ticket {
    rec: *const BRecord,
    wait: u64,
    same: u16,
    /// False for a second access of one piece to a record (its first
    /// ticket covers it): neither checked nor released.
    counted: bool,
}

impl Ticket {
    const EMPTY: Ticket = Ticket {
        rec: ptr::null(),
        wait: 0,
        same: NONE,
        counted: false,
    };
}

/// One declared access of a piece.
struct PAcc {
    table: TableId,
    at: u32,
    len: u32,
    group: bool,
    write: bool,
    /// The partition whose executor hands its tickets.
    part: u16,
    /// The key's record (exact keys) or the group's lock record, and the
    /// tickets of the groups that cover it: written by the partition's
    /// executor while it builds its graph, before the piece can run (every
    /// member's arrival orders it before the run).
    ticket: UnsafeCell<Ticket>,
    /// The tickets of the groups that cover an exact key (null: none, the
    /// common case). Allocated by the graph build when it has one, and
    /// freed by `PTxn`'s drop only when `PTxn::extras` says some access
    /// has them: a spent batch's drop then does not walk its accesses
    /// (cold metadata, written long before on the planning thread).
    extra: UnsafeCell<*mut Vec<Ticket>>,
}

impl PAcc {
    /// The group tickets of this access (see `extra`).
    ///
    /// # Safety
    ///
    /// The graph build has written them (the member's arrival orders it
    /// before every reader), and nobody writes them now.
    unsafe fn extra(&self) -> &[Ticket] {
        // SAFETY: per the caller; a non-null pointer is a live box.
        unsafe {
            let x = *self.extra.get();
            match x.as_ref() {
                Some(v) => v.as_slice(),
                None => &[],
            }
        }
    }
}

/// A before-image: the record's state and data before an abortable piece
/// first wrote it.
struct Undo {
    rec: *const BRecord,
    state: u8,
    data: Box<[u8]>,
}

/// One piece of a transaction.
struct Piece {
    state: AtomicU8,
    abortable: bool,
    /// Its accesses: `accs[acc.0..acc.1]`.
    acc: (u32, u32),
    /// Its dependency RVP (`u32::MAX`: no parents).
    rvp: u32,
    /// `PTxn::links[links..]`: the RVPs of its children (`nchild`,
    /// distinct; each is decremented once), then its parents (`nparent`,
    /// author ids, for `PieceIo::input`).
    links: u32,
    nchild: u32,
    nparent: u32,
    /// PartitionPieces (partitions) that have not yet found themselves locally
    /// ready; the one that brings it to zero runs the piece.
    members: AtomicU32,
    /// Its output and before-images (null: neither, the common case),
    /// set once by its runner after the run, before it releases anything
    /// (see `PTxn::out` and `PTxn::undo_log`).
    cells: UnsafeCell<*mut PieceCells>,
}

/// What a piece's run leaves behind: its output (written once, before its
/// children's RVP is released) and its before-images (abortable pieces,
/// read by the last settler). Kept out of `Piece`, which they made 104
/// bytes instead of 40, and allocated only by a piece that has either:
/// the planning thread writes, and the executors read, some 20 pieces per
/// transaction of YCSB 20-RMW, none with an output or an undo log.
#[derive(Default)]
struct PieceCells {
    out: Vec<u8>,
    undo: Vec<Undo>,
}

/// A transaction's PWV state.
pub(super) struct PTxn {
    /// The procedure declared its pieces (else one piece runs its body).
    decomposed: bool,
    /// In author order.
    pieces: Box<[Piece]>,
    /// The topological order used for scheduling: abortable pieces first.
    order: Box<[u16]>,
    accs: Box<[PAcc]>,
    bytes: Box<[u8]>,
    rvps: Box<[AtomicU32]>,
    /// The commit RVP: abortable pieces not yet executed; -1 (or less)
    /// once one aborted.
    commit_rvp: AtomicI64,
    /// Abortable pieces not yet done with the data (see the module docs).
    settle: AtomicU32,
    /// 0 undecided, 1 committed, 2 aborted and undone.
    decided: AtomicU8,
    /// Pieces not yet completed; the one that completes the last makes
    /// the outcome.
    left: AtomicU32,
    /// The error of a failed piece (its transaction's outcome).
    error: parking_lot::Mutex<Option<Error>>,
    /// Its index in the batch, and the partitions its pieces have members
    /// on (told when its progress moves, while `parked`).
    ti: u32,
    parts: Box<[u16]>,
    /// Some executor parked a member until its progress moves.
    parked: std::sync::atomic::AtomicBool,
    /// The pieces' links (see `Piece::links`).
    links: Box<[u32]>,
    /// Some piece has cells, some access group tickets: the drop walks
    /// the pieces, or the accesses, only then. Set (relaxed) by the
    /// thread that allocates them; the batch's finish and the epoch order
    /// that before the drop.
    cells: AtomicBool,
    extras: AtomicBool,
}

impl Drop for PTxn {
    fn drop(&mut self) {
        /// Free the non-null boxes among `ptrs`.
        ///
        /// # Safety
        ///
        /// Each non-null pointer is a box leaked with `Box::into_raw`,
        /// given once and used by nobody after.
        unsafe fn free<T>(ptrs: impl Iterator<Item = *mut T>) {
            for x in ptrs.filter(|x| !x.is_null()) {
                // SAFETY: per the caller.
                drop(unsafe { Box::from_raw(x) });
            }
        }
        // SAFETY: `&mut self`: no piece runs and no graph build writes; a
        // non-null `cells` is the box its runner leaked, a non-null
        // `extra` the graph build's, each freed once here.
        unsafe {
            if *self.cells.get_mut() {
                free(self.pieces.iter().map(|p| *p.cells.get()));
            }
            if *self.extras.get_mut() {
                free(self.accs.iter().map(|a| *a.extra.get()));
            }
        }
    }
}

// SAFETY: the cells are written under the protocol's rules: a ticket and
// an access's `extra` box by the owning partition's executor before the
// piece can run; a piece's `cells` pointer once, by the one thread that
// claimed the piece (RUNNING), after the run and before the release of
// its children's RVPs, its state, `settle` and `left`, which every reader
// acquires first (see `PTxn::out` and `PTxn::undo_log`).
unsafe impl Sync for PTxn {}
// SAFETY: as above; the raw record pointers point at records that live
// while the engine runs.
unsafe impl Send for PTxn {}

impl PTxn {
    fn key(&self, a: &PAcc) -> &[u8] {
        &self.bytes[a.at as usize..(a.at + a.len) as usize]
    }

    fn accs_of(&self, p: &Piece) -> &[PAcc] {
        &self.accs[p.acc.0 as usize..p.acc.1 as usize]
    }

    /// The RVPs of `p`'s children.
    fn child_rvps(&self, p: &Piece) -> &[u32] {
        &self.links[p.links as usize..(p.links + p.nchild) as usize]
    }

    /// `p`'s parents (author ids).
    fn parents(&self, p: &Piece) -> &[u32] {
        let at = (p.links + p.nchild) as usize;
        &self.links[at..at + p.nparent as usize]
    }

    /// `p`'s undo log, if it has cells. Only this field is borrowed: an
    /// aborting runner drains it after it released its children's RVPs,
    /// while an abortable child may already read the output beside it.
    ///
    /// # Safety
    ///
    /// `p` has run and nobody else touches its undo log: the caller is its
    /// runner (after the run), or the last settler (every abortable piece
    /// has settled, ordered by the `settle` count).
    #[allow(clippy::mut_from_ref)]
    unsafe fn undo_log(&self, p: &Piece) -> Option<&mut Vec<Undo>> {
        // SAFETY: per the caller; a non-null pointer is a live box (freed
        // only by the drop), and the borrow covers its `undo` field alone.
        unsafe {
            let c = *p.cells.get();
            (!c.is_null()).then(|| &mut *ptr::addr_of_mut!((*c).undo))
        }
    }

    /// `p`'s output (empty if it wrote none).
    ///
    /// # Safety
    ///
    /// `p` has run: its runner stored the cells before it released the
    /// RVPs of its children (who read this), its state, or the `left`
    /// count (`outcome`), and the caller acquired one of those. Readers
    /// may share it, and nobody writes the output after the run.
    unsafe fn out(&self, p: &Piece) -> &[u8] {
        // SAFETY: per the caller; the borrow covers the `out` field alone
        // (the undo log beside it may be drained at the same time).
        unsafe {
            let c = *p.cells.get();
            if c.is_null() {
                &[]
            } else {
                &*ptr::addr_of!((*c).out)
            }
        }
    }
}

/// The executor of a batch's pieces on one partition: its members in the
/// batch's global order, `(transaction, piece)`.
pub(super) type PartitionPieces = Vec<(u32, u16)>;

/// Plan a batch for PWV on the planning thread: each transaction's pieces
/// (declared, or one piece of its declared key set), their accesses with
/// their partitions, RVPs, and each partition's members in order.
pub(super) fn plan(b: Batch, m: usize, sh: &Shared) -> BatchCtx {
    let mut pp = PiecePlan::new();
    let mut keys = KeySet::new();
    let mut parts: Vec<PartitionPieces> = (0..m).map(|_| Vec::new()).collect();
    let mut sc = BuildScratch::default();
    let txns: Box<[BTxn]> = b
        .txns
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            pp.clear();
            let mut unusable = None;
            let decomposed = s.proc.pieces(&mut pp);
            if decomposed {
                if let Some(e) = pp.error() {
                    unusable = Some(format!("'{}' declares bad pieces: {e}", s.proc.name()));
                }
            } else {
                keys.clear();
                if s.proc.needs_reconnaissance() {
                    unusable = Some(format!(
                        "PWV does not yet run requests that need a reconnaissance ('{}')",
                        s.proc.name()
                    ));
                } else if !s.proc.declare(&mut keys) {
                    unusable = Some(format!(
                        "'{}' declares no key sets: PWV needs them before it runs",
                        s.proc.name()
                    ));
                } else {
                    let p = pp.piece(true);
                    for d in keys.iter() {
                        let w = d.access == Access::Write;
                        if d.is_key() {
                            if w {
                                pp.write(p, d.table, d.lo);
                            } else {
                                pp.read(p, d.table, d.lo);
                            }
                        } else {
                            // A range: its unit, every key with the bounds'
                            // common prefix.
                            let unit = range_unit(d.lo, d.hi());
                            if w {
                                pp.write_group(p, d.table, unit);
                            } else {
                                pp.read_group(p, d.table, unit);
                            }
                        }
                    }
                }
            }
            let ts = b.first_ts + i as u64;
            let built = match unusable {
                None => build(&pp, decomposed, ts, i as u32, m, sh, &mut parts, &mut sc),
                Some(e) => Err(e),
            };
            // A request that cannot run is one keyless piece that fails
            // with the reason (its outcome).
            let (p, unusable) = match built {
                Ok(p) => (p, None),
                Err(e) => {
                    pp.clear();
                    pp.piece(true);
                    let p = build(&pp, false, ts, i as u32, m, sh, &mut parts, &mut sc)
                        .expect("a keyless piece plans");
                    (p, Some(Error::InvalidArgument(e)))
                }
            };
            BTxn {
                ts,
                state: AtomicU8::new(super::UNPROCESSED),
                proc: UnsafeCell::new(s.proc),
                keys: Box::default(),
                slots: Box::default(),
                nw: 0,
                wranges: Box::default(),
                units: Box::default(),
                nxu: 0,
                lorder: Box::default(),
                unusable,
                outcome: UnsafeCell::new(None),
                pwv: Some(Box::new(p)),
                later: Default::default(),
                deps: UnsafeCell::new(Vec::new()),
                rranges: Box::default(),
                live: Default::default(),
                pinned: Default::default(),
                rmw_prev: UnsafeCell::new(Vec::new()),
                hand: Default::default(),
                external: Default::default(),
                delivered: Default::default(),
            }
        })
        .collect();
    BatchCtx {
        txns,
        release: b.release,
        ranges: false,
        drain: None,
        cc_left: std::sync::atomic::AtomicUsize::new(0),
        exec_left: std::sync::atomic::AtomicUsize::new(m),
        parts: parts.into_boxed_slice(),
        groups: sc.groups,
        lazy_next: Default::default(),
        lazy_done: Default::default(),
    }
}

/// The partition of an access: its key's (or prefix's) first
/// `partition prefix` bytes; `None` for a group shorter than that (it
/// spans every partition).
fn part_of(sh: &Shared, t: TableId, key: &[u8], group: bool, m: usize) -> Option<u16> {
    let plen = sh
        .part_prefix
        .get(t.as_u32() as usize)
        .copied()
        .unwrap_or(0);
    if plen == 0 {
        // Whole keys: a group is in one partition only if it is a key.
        return (!group).then(|| partition(t, key, m));
    }
    if key.len() < plen {
        return (!group).then(|| partition(t, key, m));
    }
    Some(partition(t, &key[..plen], m))
}

/// `build`'s working lists, kept by the planning thread across
/// transactions (a plan of 20 pieces took about 30 allocations and frees
/// of short lists, a tenth of the planning thread's time).
#[derive(Default)]
struct BuildScratch {
    abortable: Vec<bool>,
    /// Data dependencies `(child, parent)`, sorted and distinct: each
    /// piece's parents are a run of them (`pstart[c]..pstart[c + 1]`).
    deps: Vec<(PieceId, PieceId)>,
    pstart: Vec<u32>,
    order: Vec<u16>,
    /// The plan's accesses (indices), grouped by piece, deduplicated.
    acc: Vec<u32>,
    /// Each piece's partitions: `parts[prange[p].0..prange[p].1]`.
    parts: Vec<u16>,
    prange: Vec<(u32, u32)>,
    /// Distinct parent sets (a dependency RVP each), as runs of `deps`.
    rvp_sets: Vec<(u32, u32)>,
    rvp_of: Vec<u32>,
    /// Some plan of the batch has a group access.
    groups: bool,
}

/// One transaction's PWV state from its plan, its pieces added to their
/// partitions' member lists; an error (nothing added) if the plan cannot
/// run.
#[allow(clippy::too_many_arguments)]
fn build(
    pp: &PiecePlan,
    decomposed: bool,
    ts: u64,
    ti: u32,
    m: usize,
    sh: &Shared,
    parts: &mut [PartitionPieces],
    sc: &mut BuildScratch,
) -> Result<PTxn, String> {
    let n = pp.len();
    if n == 0 {
        return Err("a procedure declared no pieces".into());
    }
    // Parents, distinct, as runs of the sorted dependency list.
    sc.deps.clear();
    sc.deps.extend_from_slice(pp.dependencies());
    sc.deps.sort_unstable();
    sc.deps.dedup();
    sc.pstart.clear();
    sc.pstart.resize(n + 1, 0);
    for &(c, _) in &sc.deps {
        sc.pstart[c as usize + 1] += 1;
    }
    for c in 0..n {
        sc.pstart[c + 1] += sc.pstart[c];
    }
    let parents_of =
        |sc: &BuildScratch, c: usize| -> (u32, u32) { (sc.pstart[c], sc.pstart[c + 1]) };
    // Abortable: declared so, or a parent of an abortable piece (before the
    // commit point). Parents are earlier, so one backward pass closes it.
    sc.abortable.clear();
    sc.abortable
        .extend((0..n).map(|p| pp.is_abortable(p as PieceId)));
    for c in (0..n).rev() {
        if sc.abortable[c] {
            let (a, b) = parents_of(sc, c);
            for d in a..b {
                let p = sc.deps[d as usize].1;
                sc.abortable[p as usize] = true;
            }
        }
    }
    // Abortable pieces first; each group in declaration order (parents
    // come first within each, and no abortable piece has a non-abortable
    // parent).
    sc.order.clear();
    sc.order
        .extend((0..n as u16).filter(|&p| sc.abortable[p as usize]));
    sc.order
        .extend((0..n as u16).filter(|&p| !sc.abortable[p as usize]));
    // Accesses grouped by piece, deduplicated (a write covers a read);
    // writes first within a piece, so that a piece's first ticket on a
    // record is its strongest.
    let all = pp.accesses();
    let k = |i: u32| {
        let a = &all[i as usize];
        (a.piece, a.table, a.group, pp.key(a), !a.write)
    };
    sc.acc.clear();
    sc.acc.extend(0..all.len() as u32);
    // Plans usually declare each piece's accesses once, pieces in order
    // (YCSB's: one key each): then there is nothing to sort or merge.
    let distinct_in_order = all.windows(2).all(|w| {
        let (x, y) = (&w[0], &w[1]);
        (x.piece, x.table, x.group, pp.key(x)) < (y.piece, y.table, y.group, pp.key(y))
    });
    if !distinct_in_order {
        sc.acc.sort_by(|&x, &y| k(x).cmp(&k(y)));
        sc.acc.dedup_by(|x, y| {
            let (x, y) = (k(*x), k(*y));
            (x.0, x.1, x.2, x.3) == (y.0, y.1, y.2, y.3)
        });
    }
    let piece_order = |i: &u32| (all[*i as usize].piece, !all[*i as usize].write);
    if !sc.acc.is_sorted_by_key(piece_order) {
        sc.acc.sort_by_key(piece_order);
    }
    // Two pieces of one transaction may share a record only if they name
    // it alike (both the key, or both the group): tickets follow a piece
    // of their own transaction by record, and a key under a group of
    // another piece of the same transaction would wait on the group's
    // lock record, held to the commit decision. Only a plan with a group
    // can break it (YCSB's 20 keys have none, and the pairs are 190).
    let has_group = all.iter().any(|a| a.group);
    sc.groups |= has_group;
    if decomposed && has_group {
        for (i, &x) in sc.acc.iter().enumerate() {
            let a = k(x);
            for &y in &sc.acc[i + 1..] {
                let b = k(y);
                if a.0 != b.0 && a.1 == b.1 && a.2 != b.2 {
                    let (g, key) = if a.2 { (a.3, b.3) } else { (b.3, a.3) };
                    if key.starts_with(g) {
                        return Err(format!(
                            "pieces {} and {} access table {} both as a group and as a key under it",
                            a.0,
                            b.0,
                            a.1.as_u32()
                        ));
                    }
                }
            }
        }
    }
    let mut bytes = Vec::with_capacity(sc.acc.iter().map(|&i| all[i as usize].len as usize).sum());
    let mut accs = Vec::with_capacity(sc.acc.len());
    let mut ranges = Vec::with_capacity(n);
    sc.parts.clear();
    sc.prange.clear();
    let mut i = 0;
    for p in 0..n as u16 {
        let start = accs.len() as u32;
        let pstart = sc.parts.len();
        while i < sc.acc.len() && all[sc.acc[i] as usize].piece == p {
            let a = &all[sc.acc[i] as usize];
            let key = pp.key(a);
            let at = bytes.len() as u32;
            bytes.extend_from_slice(key);
            let mut push = |part: u16| {
                accs.push(PAcc {
                    table: a.table,
                    at,
                    len: key.len() as u32,
                    group: a.group,
                    write: a.write,
                    part,
                    ticket: UnsafeCell::new(Ticket::EMPTY),
                    extra: UnsafeCell::new(ptr::null_mut()),
                });
                if !sc.parts[pstart..].contains(&part) {
                    sc.parts.push(part);
                }
            };
            match part_of(sh, a.table, key, a.group, m) {
                Some(part) => push(part),
                // A group across partitions: its lock record on each.
                None => (0..m as u16).for_each(&mut push),
            }
            i += 1;
        }
        // A piece with no keys (an abort statement, a computation on its
        // parents' outputs) runs on a partition of its own: spread by
        // transaction.
        if sc.parts.len() == pstart {
            sc.parts.push((ts % m as u64) as u16);
        }
        sc.prange.push((pstart as u32, sc.parts.len() as u32));
        ranges.push((start, accs.len() as u32));
    }
    // Dependency RVPs, shared between pieces with the same parents.
    sc.rvp_sets.clear();
    sc.rvp_of.clear();
    sc.rvp_of.resize(n, u32::MAX);
    // Runs of `deps` hold their parents sorted and distinct.
    let same = |sc: &BuildScratch, (a, b): (u32, u32), (c, d): (u32, u32)| {
        let (x, y) = (
            &sc.deps[a as usize..b as usize],
            &sc.deps[c as usize..d as usize],
        );
        x.len() == y.len() && x.iter().zip(y).all(|(x, y)| x.1 == y.1)
    };
    for c in 0..n {
        let r = parents_of(sc, c);
        if r.0 == r.1 {
            continue;
        }
        let at = match sc.rvp_sets.iter().position(|&s| same(sc, s, r)) {
            Some(at) => at,
            None => {
                sc.rvp_sets.push(r);
                sc.rvp_sets.len() - 1
            }
        };
        sc.rvp_of[c] = at as u32;
    }
    let mut links = Vec::new();
    let pieces: Box<[Piece]> = (0..n)
        .map(|p| {
            let at = links.len() as u32;
            links.extend(
                sc.rvp_sets
                    .iter()
                    .enumerate()
                    .filter(|(_, &(a, b))| {
                        sc.deps[a as usize..b as usize]
                            .iter()
                            .any(|d| d.1 == p as PieceId)
                    })
                    .map(|(i, _)| i as u32),
            );
            let nchild = links.len() as u32 - at;
            let (a, b) = parents_of(sc, p);
            links.extend(sc.deps[a as usize..b as usize].iter().map(|d| u32::from(d.1)));
            Piece {
                state: AtomicU8::new(UNEXECUTED),
                abortable: sc.abortable[p],
                acc: ranges[p],
                rvp: sc.rvp_of[p],
                links: at,
                nchild,
                nparent: b - a,
                members: AtomicU32::new(sc.prange[p].1 - sc.prange[p].0),
                cells: UnsafeCell::new(ptr::null_mut()),
            }
        })
        .collect();
    for &p in &sc.order {
        let (a, b) = sc.prange[p as usize];
        for &part in &sc.parts[a as usize..b as usize] {
            parts[part as usize].push((ti, p));
        }
    }
    let nab = sc.abortable.iter().filter(|&&a| a).count();
    Ok(PTxn {
        decomposed,
        pieces,
        order: sc.order.as_slice().into(),
        accs: accs.into_boxed_slice(),
        bytes: bytes.into_boxed_slice(),
        rvps: sc
            .rvp_sets
            .iter()
            .map(|&(a, b)| AtomicU32::new(b - a))
            .collect(),
        commit_rvp: AtomicI64::new(nab as i64),
        settle: AtomicU32::new(nab as u32),
        decided: AtomicU8::new(u8::from(nab == 0)),
        left: AtomicU32::new(n as u32),
        error: parking_lot::Mutex::new(None),
        ti,
        parts: {
            sc.parts.sort_unstable();
            sc.parts.dedup();
            sc.parts.as_slice().into()
        },
        parked: AtomicBool::new(false),
        links: links.into_boxed_slice(),
        cells: AtomicBool::new(false),
        extras: AtomicBool::new(false),
    })
}

/// A partition executor's lock sequences of the groups it owns (lock-only
/// records, in no index), per table.
type GroupMap = HashMap<Box<[u8]>, Latest>;

/// The groups declared on this partition in the current batch, per table,
/// for exact keys to take tickets on (see the module docs).
#[derive(Default)]
struct BatchGroups {
    set: std::collections::HashSet<Box<[u8]>>,
    lens: Vec<usize>,
}

/// One partition's executor: for each batch, build the partition-local
/// conflict graph (tickets), then run the pieces.
pub(super) fn exec_main(sh: &Shared, me: usize, local: &LocalEpoch, rx: Receiver<Arc<BatchCtx>>) {
    let mut latest: LatestMap = sh.tables.iter().map(|_| CcMap::default()).collect();
    let mut groups: Vec<GroupMap> = sh.tables.iter().map(|_| GroupMap::default()).collect();
    let mut batch_groups: Vec<BatchGroups> = Vec::new();
    // The current transaction's records so far.
    let mut seen: Vec<Seen> = Vec::new();
    let mut w = Waits::default();
    LOCAL_WAKES.with(|l| *l.borrow_mut() = Some((me as u16, Vec::new())));
    while let Ok(ctx) = rx.recv() {
        let busy = std::time::Instant::now();
        let members = &ctx.parts[me];
        {
            let g = local.pin();
            build_graph(
                sh,
                me as u16,
                &ctx,
                members,
                &mut latest,
                &mut groups,
                &mut batch_groups,
                &mut seen,
                &g,
            );
        }
        if !w.run_batch(sh, local, &ctx, me as u16) {
            return;
        }
        if let Some(last) = ctx.txns.last() {
            sh.finished[me].store(last.ts, Ordering::Release);
        }
        sh.exec_busy_ns
            .fetch_add(busy.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if ctx.exec_left.fetch_sub(1, Ordering::AcqRel) == 1 {
            super::finish_batch(sh, local, ctx);
        }
        local.collect();
    }
}

/// Hand the tickets of this partition's accesses, in the batch's order.
#[allow(clippy::too_many_arguments)]
fn build_graph(
    sh: &Shared,
    me: u16,
    ctx: &BatchCtx,
    members: &PartitionPieces,
    latest: &mut LatestMap,
    groups: &mut [GroupMap],
    batch_groups: &mut Vec<BatchGroups>,
    seen: &mut Vec<Seen>,
    g: &Guard<'_>,
) {
    // The groups declared here this batch.
    batch_groups.iter_mut().for_each(|b| {
        b.set.clear();
        b.lens.clear();
    });
    batch_groups.resize_with(sh.tables.len(), BatchGroups::default);
    let mut any_group = false;
    // A batch of exact keys only (YCSB) needs no walk over its members
    // for groups (their metadata, some 2.5 KB per YCSB 20-RMW
    // transaction, written on the planning thread's core).
    if ctx.groups {
        for &(ti, p) in members {
            let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
            for a in pt.accs_of(&pt.pieces[p as usize]) {
                if a.group && a.part == me {
                    let bg = &mut batch_groups[a.table.as_u32() as usize];
                    if bg.set.insert(pt.key(a).into()) {
                        if let Err(at) = bg.lens.binary_search(&(a.len as usize)) {
                            bg.lens.insert(at, a.len as usize);
                        }
                    }
                    any_group = true;
                }
            }
        }
    }
    let mut cur = u32::MAX;
    let mut placed = 0u64;
    for (ix, &(ti, p)) in members.iter().enumerate() {
        #[cfg(test)]
        if me == 0 && ctx.txns[ti as usize].ts >= sh.panic_at_ts.load(Ordering::Relaxed) {
            panic!(
                "test: PWV executor 0 panics at timestamp {}",
                ctx.txns[ti as usize].ts
            );
        }
        prefetch_meta(ctx, ix, META_AHEAD, |i| members.get(i).copied());
        if ix % BATCH_KEYS == 0 {
            let next = ix + BATCH_KEYS;
            prefetch_slots(
                me,
                ctx,
                members.get(next..members.len().min(next + BATCH_KEYS)).unwrap_or(&[]),
                latest,
            );
            preload(
                sh,
                me,
                ctx,
                &members[ix..members.len().min(ix + BATCH_KEYS)],
                latest,
                g,
            );
        }
        if ti != cur {
            cur = ti;
            seen.clear();
        }
        let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
        for a in pt.accs_of(&pt.pieces[p as usize]) {
            if a.part != me {
                continue;
            }
            let key = pt.key(a);
            let t = a.table.as_u32() as usize;
            let e = if a.group {
                group_entry(sh, &mut groups[t], key)
            } else {
                entry(sh, &mut latest[t], a.table, key, g, Some(absent_version))
                    .expect("created when absent")
            };
            let (tk, fix) = ticket(e, a.write, p, seen, TicketAt::Main(a));
            // SAFETY: this executor owns the access's partition and is the
            // only writer of its tickets, before any member arrives.
            unsafe { *a.ticket.get() = tk };
            if let Some((at, wait)) = fix {
                // SAFETY: as above (the transaction's earlier ticket on the
                // same record is on this partition too).
                unsafe { at.set_wait(wait) };
            }
            placed += 1;
            if any_group {
                let bg = &batch_groups[t];
                let covering = bg
                    .lens
                    .iter()
                    .copied()
                    .filter(|&l| l < key.len() || (!a.group && l == key.len()));
                for l in covering {
                    let pre = &key[..l];
                    if !bg.set.contains(pre) {
                        continue;
                    }
                    let e = group_entry(sh, &mut groups[t], pre);
                    // SAFETY: as above.
                    let at = unsafe {
                        let x = &*a.extra.get();
                        TicketAt::Extra(a, if x.is_null() { 0 } else { (**x).len() as u32 })
                    };
                    let (tk, fix) = ticket(e, a.write, p, seen, at);
                    // SAFETY: as above.
                    unsafe {
                        let x = &mut *a.extra.get();
                        if x.is_null() {
                            *x = Box::into_raw(Box::default());
                            pt.extras.store(true, Ordering::Relaxed);
                        }
                        (**x).push(tk);
                        if let Some((at, wait)) = fix {
                            at.set_wait(wait);
                        }
                    }
                }
            }
        }
    }
    sh.placeholders.fetch_add(placed, Ordering::Relaxed);
    let entries = latest
        .iter()
        .map(|m| m.w8.len() + m.short.len() + m.long.len())
        .sum::<usize>();
    sh.cc_map_entries[me as usize].store(entries as u64, Ordering::Relaxed);
}

/// Members whose exact keys the graph build looks up together.
const BATCH_KEYS: usize = 8;

/// How far ahead of its walk the graph build fetches the members'
/// metadata (`prefetch_meta`'s `d`): two chunks of [`BATCH_KEYS`], so that
/// the next chunk's keys are cached when [`prefetch_slots`] reads them.
const META_AHEAD: usize = 2 * BATCH_KEYS;

/// Hints for where the CC maps will look up the exact keys of `chunk`
/// on partition `me` (the chunk after the one [`preload`] is about to
/// look up): a map of a partition's records seen so far holds up to half
/// a million keys under YCSB, and each first probe of a batch missed.
fn prefetch_slots(me: u16, ctx: &BatchCtx, chunk: &[(u32, u16)], latest: &LatestMap) {
    for &(ti, p) in chunk {
        let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
        for a in pt.accs_of(&pt.pieces[p as usize]) {
            if a.part != me || a.group {
                continue;
            }
            if let Some(map) = latest.get(a.table.as_u32() as usize) {
                map.prefetch(pt.key(a));
            }
        }
    }
}

/// Before the graph build takes tickets for `chunk`'s exact keys on
/// partition `me`, look up the records of those its maps do not hold yet
/// together, table by table (`super::preload_entries`).
fn preload(
    sh: &Shared,
    me: u16,
    ctx: &BatchCtx,
    chunk: &[(u32, u16)],
    latest: &mut LatestMap,
    g: &Guard<'_>,
) {
    let mut keys: [(u32, &[u8]); crate::index::BATCH_MAX] = [(0, &[]); crate::index::BATCH_MAX];
    let mut n = 0;
    'all: for &(ti, p) in chunk {
        let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
        for a in pt.accs_of(&pt.pieces[p as usize]) {
            if a.part == me && !a.group {
                if n == keys.len() {
                    break 'all;
                }
                keys[n] = (a.table.as_u32(), pt.key(a));
                n += 1;
            }
        }
    }
    let keys = &mut keys[..n];
    keys.sort_unstable_by_key(|k| k.0);
    let mut same: [&[u8]; crate::index::BATCH_MAX] = [&[]; crate::index::BATCH_MAX];
    for run in keys.chunk_by(|a, b| a.0 == b.0) {
        for (s, k) in same.iter_mut().zip(run) {
            *s = k.1;
        }
        let t = run[0].0;
        super::preload_entries(
            sh,
            &mut latest[t as usize],
            TableId::from_u32(t),
            &same[..run.len()],
            g,
        );
    }
}

/// The lock sequence of group `key` (a lock-only record, created at its
/// first use).
fn group_entry<'m>(sh: &Shared, map: &'m mut GroupMap, key: &[u8]) -> &'m mut Latest {
    if !map.contains_key(key) {
        let v = absent_version();
        let rec = BRecord::new(v);
        sh.unit_recs.lock().push(rec as usize);
        map.insert(key.into(), Latest { rec, v, n: 0, w: 0 });
    }
    map.get_mut(key).expect("inserted")
}

/// A record the current transaction accessed, as the graph build hands
/// its tickets: the record's counts before the transaction's first access
/// (every access, the last write), the last piece of the transaction
/// there, and where that first access's ticket is and whether it waits
/// as a read.
pub(super) struct Seen {
    rec: *const BRecord,
    n: u64,
    w: u64,
    last: u16,
    first: TicketAt,
    first_reads: bool,
}

/// Where the graph build stores a ticket: an access's own, or its `i`th
/// group ticket.
#[derive(Clone, Copy)]
enum TicketAt {
    Main(*const PAcc),
    Extra(*const PAcc, u32),
}

impl TicketAt {
    /// Make the ticket here wait for completion count `wait`.
    ///
    /// # Safety
    ///
    /// Only the graph build of the ticket's partition, which wrote it, and
    /// before any member of the batch runs.
    unsafe fn set_wait(self, wait: u64) {
        // SAFETY: per the caller: the executor that owns the ticket is the
        // only one touching it, and the access lives in its batch.
        unsafe {
            match self {
                TicketAt::Main(a) => (*(*a).ticket.get()).wait = wait,
                TicketAt::Extra(a, i) => (&mut **(*a).extra.get())[i as usize].wait = wait,
            }
        }
    }
}

/// The next ticket of the record `e` describes, for an access of piece `p`
/// of the current transaction (`seen`: its records so far), to be stored
/// `at`; and an earlier ticket of the transaction to change (where, and
/// what it must wait for).
///
/// A transaction's accesses to one record after its first wait for the
/// piece before them to have *executed*, not for the record's completion
/// count, since an abortable piece completes only at the commit decision,
/// which may wait for them. So the first access alone orders the
/// transaction after the earlier ones, and it must do so as a write if
/// any of the transaction's accesses there writes: a first access that
/// reads waits only for the last earlier write, and the counter would
/// then reach a write's count with an earlier transaction's read still
/// pending, once the first access itself completed (a read after the
/// commit point completes when it runs). The later write would overwrite
/// what that read has yet to see (found by the list-append checker: a
/// transaction read a later one's append). The first ticket is therefore
/// made to wait as a write when a later access writes.
fn ticket(
    e: &mut Latest,
    write: bool,
    p: u16,
    seen: &mut Vec<Seen>,
    at: TicketAt,
) -> (Ticket, Option<(TicketAt, u64)>) {
    let rec = e.rec;
    match seen.iter_mut().find(|s| s.rec == rec) {
        Some(s) => {
            let fix = (write && s.first_reads).then(|| {
                s.first_reads = false;
                (s.first, s.n)
            });
            if s.last == p {
                // A second access of one piece: its first ticket covers it.
                let tk = Ticket {
                    rec,
                    wait: 0,
                    same: NONE,
                    counted: false,
                };
                return (tk, fix);
            }
            // After a piece of its own transaction: what the transaction's
            // first access waited for, and that piece.
            let wait = if write { s.n } else { s.w };
            let same = s.last;
            s.last = p;
            e.n += 1;
            if write {
                e.w = e.n;
            }
            let tk = Ticket {
                rec,
                wait,
                same,
                counted: true,
            };
            (tk, fix)
        }
        None => {
            seen.push(Seen {
                rec,
                n: e.n,
                w: e.w,
                last: p,
                first: at,
                first_reads: !write,
            });
            let wait = if write {
                let t = e.n;
                e.n += 1;
                e.w = e.n;
                t
            } else {
                e.n += 1;
                e.w
            };
            let tk = Ticket {
                rec,
                wait,
                same: NONE,
                counted: true,
            };
            (tk, None)
        }
    }
}

/// Whether a ticket's predecessors are done (readiness check 1): `None`
/// if they are, else what it waits for, from one reading of the counter:
/// the completion count it needs, or 0 if it has it and waits for a piece
/// of its own transaction (the executor parks it on the one or the other,
/// and a reason read twice could name one that has already passed).
fn ticket_wait(pt: &PTxn, t: &Ticket) -> Option<u64> {
    if !t.counted {
        return None;
    }
    // SAFETY: records live while the engine runs.
    if unsafe { (*t.rec).released.load(Ordering::Acquire) } < t.wait {
        return Some(t.wait);
    }
    let own =
        t.same == NONE || pt.pieces[t.same as usize].state.load(Ordering::Acquire) >= EXECUTED;
    (!own).then_some(0)
}

/// Check 1 for this partition's accesses of piece `p`: the first ticket
/// that is not ready, if any, as its record and the completion count it
/// needs (0 if the count is there and it waits for a piece of its own
/// transaction).
fn blocking(pt: &PTxn, p: &Piece, me: u16) -> Option<(*const BRecord, u64)> {
    for a in pt.accs_of(p).iter().filter(|a| a.part == me) {
        // SAFETY: written by this executor while it built the graph.
        let (t, x) = unsafe { (&*a.ticket.get(), a.extra()) };
        for t in std::iter::once(t).chain(x) {
            if let Some(wait) = ticket_wait(pt, t) {
                return Some((t.rec, wait));
            }
        }
    }
    None
}

/// How far ahead of the walk each stage of [`prefetch_member`] runs: the
/// record 12 members ahead, its version 8 ahead (the record is cached by
/// then), the value (up to 1 KiB) 4 ahead. YCSB 20-RMW at theta 0 ran
/// about the same with (8, 5, 2), (16, 12, 8) and (24, 16, 8), and less
/// with (32, 20, 10); the first lines of the value alone (256 bytes)
/// gained about 15% less than the whole value.
const PREFETCH_STAGES: [(usize, u8); 3] = [(12, 0), (8, 1), (4, 2)];

/// Hints for the members after `ix` (`at(i)`: member `i`, if any), ahead
/// of a walk over them, down to each one's first access (a transaction's
/// plan is some 2.5 KB under YCSB 20-RMW, and the planning thread wrote
/// it on the other core, so a walk misses on every level): the member
/// `d + 8` ahead's transaction, the one `d + 4` ahead's PWV state, the
/// one `d` ahead's piece, first access and key bytes. YCSB 20-RMW, 2
/// threads: 1.13x (median of six interleaved pairs at theta 0 and 0.9)
/// in the executors' run walk (`d` = 16); the graph build's walk gained
/// 1.03x with `d` = 4, and runs [`META_AHEAD`] now, for its slot
/// prefetch.
fn prefetch_meta(ctx: &BatchCtx, ix: usize, d: usize, at: impl Fn(usize) -> Option<(u32, u16)>) {
    if let Some((ti, _)) = at(ix + d + 8) {
        crate::storage::prefetch_bytes((&ctx.txns[ti as usize] as *const BTxn).cast(), 1);
    }
    if let Some((ti, _)) = at(ix + d + 4) {
        if let Some(pt) = ctx.txns[ti as usize].pwv.as_deref() {
            crate::storage::prefetch_bytes((pt as *const PTxn).cast(), 128);
        }
    }
    if let Some((ti, p)) = at(ix + d) {
        if let Some(pt) = ctx.txns[ti as usize].pwv.as_deref() {
            let piece = &pt.pieces[p as usize];
            crate::storage::prefetch_bytes((piece as *const Piece).cast(), 1);
            if let Some(a) = pt.accs.get(piece.acc.0 as usize) {
                crate::storage::prefetch_bytes((a as *const PAcc).cast(), 1);
                crate::storage::prefetch_bytes(pt.bytes.as_ptr().wrapping_add(a.at as usize), 1);
            }
        }
    }
}

/// A hint (nothing is changed) for member `(ti, p)`'s exact keys on
/// partition `me`: stage 0 fetches each record, stage 1 its version,
/// stage 2 the value (its first KiB).
fn prefetch_member(ctx: &BatchCtx, ti: u32, p: u16, me: u16, stage: u8) {
    let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
    let piece = &pt.pieces[p as usize];
    for a in pt
        .accs_of(piece)
        .iter()
        .filter(|a| a.part == me && !a.group)
    {
        // SAFETY: written by this executor while it built the graph.
        let rec = unsafe { (*a.ticket.get()).rec };
        if rec.is_null() {
            continue;
        }
        if stage == 0 {
            crate::storage::prefetch_bytes(rec.cast(), 1);
            continue;
        }
        // SAFETY: records live while the engine runs; `head` is atomic.
        let v = unsafe { (*rec).head.load(Ordering::Relaxed) };
        if v.is_null() {
            continue;
        }
        if stage == 1 {
            crate::storage::prefetch_bytes(v.cast(), 1);
            continue;
        }
        // SAFETY: versions live while the engine runs. The buffer pointer
        // is only read for a hint: a piece that holds the record's ticket
        // may replace the buffer meanwhile (a value of another length),
        // and a stale pointer makes a useless hint, never a fault (as
        // BOHM's `prefetch_versions`).
        unsafe {
            let d: &[u8] = &(*(*v).data.get());
            if !d.is_empty() {
                crate::storage::prefetch_bytes(d.as_ptr(), d.len().min(1024));
            }
        }
    }
}

/// Where a member of a piece stands on its partition's executor.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Member {
    /// Not yet locally ready (check 1).
    Waiting,
    /// Locally ready, and another member's thread runs the piece: this one
    /// holds its partition's conflicting pieces back until it completes.
    Holding,
    /// Locally ready, the last member to be: this thread runs the piece.
    Running,
}

/// What a step of a member came to, and so where it waits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The piece has completed.
    Done,
    /// Check 1 failed on this record's ticket, which needs this completion
    /// count (0: it has it, and waits for a piece of its transaction).
    Ticket(*const BRecord, u64),
    /// This thread must run (or skip) the piece once its transaction
    /// moves on: its parents run (check 2), its commit point passes
    /// (check 3), or its abort is undone.
    Txn,
    /// This thread must run (or skip) the piece once its transaction's
    /// commit decision is known (check 3, or an abort undone).
    Decision,
    /// Nothing left for this thread: the piece has run (or another
    /// member's thread runs it) and completes at its transaction's
    /// decision.
    Complete,
}

/// One step of member `(ti, p)` on partition `me`.
fn step(
    sh: &Shared,
    local: &LocalEpoch,
    ctx: &BatchCtx,
    me: u16,
    ti: u32,
    p: u16,
    m: &mut Member,
) -> Step {
    let txn = &ctx.txns[ti as usize];
    let pt = txn.pwv.as_deref().expect("a PWV batch");
    let piece = &pt.pieces[p as usize];
    if piece.state.load(Ordering::Acquire) == COMPLETED {
        return Step::Done;
    }
    if *m == Member::Waiting {
        if let Some((rec, wait)) = blocking(pt, piece, me) {
            return Step::Ticket(rec, wait);
        }
        // Only the last member to arrive runs (or skips) the piece: once.
        *m = if piece.members.fetch_sub(1, Ordering::AcqRel) == 1 {
            Member::Running
        } else {
            Member::Holding
        };
    }
    if *m == Member::Holding {
        return Step::Complete;
    }
    match try_run(sh, local, txn, pt, p) {
        Run::Completed => Step::Done,
        Run::Awaiting => Step::Complete,
        Run::Blocked => Step::Txn,
        Run::Undecided => Step::Decision,
    }
}

/// What `try_run` did.
enum Run {
    Completed,
    /// Executed (or skipped) before the commit point: the transaction's
    /// last settler completes it.
    Awaiting,
    /// Check 2 failed (a parent has not run).
    Blocked,
    /// Check 3 failed, or an aborted transaction is not yet undone.
    Undecided,
}

/// Whether `pt`'s commit decision is known, as the pieces after its commit
/// point need it: committed (every abortable piece executed), or aborted
/// and undone.
fn decided(pt: &PTxn) -> bool {
    pt.commit_rvp.load(Ordering::SeqCst) == 0 || pt.decided.load(Ordering::SeqCst) == 2
}

/// A transaction's commit RVP, settle count, decision and pieces left.
type Progress = (i64, u32, u8, u32);

/// A transaction's progress as its waiting members see it: any change of a
/// dependency RVP, the commit RVP or the decision comes with a change of
/// one of these (an RVP is decremented before its parent settles or
/// completes).
fn progress(pt: &PTxn) -> Progress {
    (
        pt.commit_rvp.load(Ordering::Acquire),
        pt.settle.load(Ordering::Acquire),
        pt.decided.load(Ordering::Acquire),
        pt.left.load(Ordering::Acquire),
    )
}

/// What a partition executor is told has moved (see [`Waits`]): a
/// record's completion counter, or a transaction's progress.
#[derive(Clone, Copy)]
pub(super) enum Wake {
    Rec(usize),
    Txn(u32),
}

std::thread_local! {
    /// A partition executor's own wakes (its partition, and the list): the
    /// pieces it completes itself tell it without a lock.
    static LOCAL_WAKES: std::cell::RefCell<Option<(u16, Vec<Wake>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Tell partition `part`'s executor that `w` moved.
fn wake(sh: &Shared, part: u16, w: Wake) {
    let local = LOCAL_WAKES.with(|l| match &mut *l.borrow_mut() {
        Some((me, v)) if *me == part => {
            v.push(w);
            true
        }
        _ => false,
    });
    if !local {
        sh.wakes[part as usize].lock().push(w);
    }
}

/// Tell the partitions of `pt` that its progress moved, if some executor
/// waits for it (the flag is read after the change; `Waits::park` sets it
/// before it reads the progress again: one of the two sees the other).
fn wake_txn(sh: &Shared, pt: &PTxn) {
    if pt.parked.load(Ordering::SeqCst) {
        for &part in pt.parts.iter() {
            wake(sh, part, Wake::Txn(pt.ti));
        }
    }
}

/// The members waiting for one record's ticket (see [`Waits`]).
#[derive(Default)]
struct RecordWaits {
    heap: std::collections::BinaryHeap<std::cmp::Reverse<u32>>,
    gate: u64,
}

/// A partition executor's members that are not ready, by what they wait
/// for, so that a pass looks only at what may have moved: not a pending
/// list rescanned whole (with abortable pieces holding hot records until
/// their transactions' decisions, a batch of 10,000 at theta 0.9 needed
/// thousands of passes over a hundred thousand members).
#[derive(Default)]
struct Waits {
    /// This batch's members: transaction, piece, and how far each got.
    ms: Vec<(u32, u16, Member)>,
    /// Per record: the members blocked on its ticket, earliest first (the
    /// earliest waiter of a record is the one its next release serves),
    /// and the completion count the earliest needs (a pass looks at it
    /// only once the record's counter has reached it).
    tickets: HashMap<usize, RecordWaits, super::KeyHash>,
    /// Per transaction: its progress when they were parked, and the members
    /// waiting for it to move.
    txns: HashMap<u32, (Progress, Vec<u32>), super::KeyHash>,
    /// Per transaction: the members waiting for its commit decision (looked
    /// at again only once it is known, not at each piece's progress).
    decisions: HashMap<u32, Vec<u32>, super::KeyHash>,
    /// Members with nothing left to do but see their piece complete.
    complete: Vec<u32>,
    /// Scratch: what a pass was told, and the members it parks again.
    wakes: Vec<Wake>,
    moved: Vec<(u32, Step, Progress)>,
    /// Transactions that moved while a member was being parked on them.
    woken: Vec<Wake>,
}

impl Waits {
    /// Run this partition's members of batch `ctx` to completion; false
    /// if it stopped short because another stage thread died.
    fn run_batch(&mut self, sh: &Shared, local: &LocalEpoch, ctx: &BatchCtx, me: u16) -> bool {
        let members = &ctx.parts[me as usize];
        self.ms.clear();
        self.ms
            .extend(members.iter().map(|&(ti, p)| (ti, p, Member::Waiting)));
        // Walk the members in order; one that is not ready waits where its
        // step says, and what has moved since is looked at every few
        // members.
        let n = self.ms.len();
        for ix in 0..n as u32 {
            // The members ahead are known: fetch their records, then their
            // versions, then the start of their values, while this one
            // runs (each is a chain of dependent misses the walk would
            // otherwise take one at a time).
            for (ahead, stage) in PREFETCH_STAGES {
                if let Some(&(ti, p, _)) = self.ms.get(ix as usize + ahead) {
                    prefetch_member(ctx, ti, p, me, stage);
                }
            }
            // And, further ahead, what leads to the records.
            let ms = &self.ms;
            prefetch_meta(ctx, ix as usize, 16, |i| ms.get(i).map(|m| (m.0, m.1)));
            let (r, before) = self.step(sh, local, ctx, me, ix);
            self.park(ctx, ix, r, before);
            if ix % 16 == 15 {
                self.pass(sh, local, ctx, me);
            }
        }
        let mut idle = 0u32;
        while !self.tickets.is_empty() || !self.txns.is_empty() || !self.decisions.is_empty() {
            if self.pass(sh, local, ctx, me) {
                idle = 0;
            } else {
                // Another executor died (a bug, a panic): what this one
                // waits for may never come. Its batches are failed already
                // (the `Failer`); stop, so that a shutdown can join.
                if sh.stage_stopped.load(Ordering::Acquire) {
                    return false;
                }
                crate::backoff::snooze(&mut idle);
            }
        }
        // What is left completes at decisions made by other threads.
        for &ix in &self.complete {
            let (ti, p, _) = self.ms[ix as usize];
            let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
            while pt.pieces[p as usize].state.load(Ordering::Acquire) != COMPLETED {
                if sh.stage_stopped.load(Ordering::Acquire) {
                    return false;
                }
                crate::backoff::snooze(&mut idle);
            }
        }
        self.complete.clear();
        true
    }

    /// Step member `ix`; also the transaction's progress seen before it.
    fn step(
        &mut self,
        sh: &Shared,
        local: &LocalEpoch,
        ctx: &BatchCtx,
        me: u16,
        ix: u32,
    ) -> (Step, Progress) {
        let (ti, p, ref mut m) = self.ms[ix as usize];
        let before = progress(ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch"));
        (step(sh, local, ctx, me, ti, p, m), before)
    }

    fn park(&mut self, ctx: &BatchCtx, ix: u32, r: Step, before: Progress) {
        match r {
            Step::Done => {}
            // Waiting for a piece of its own transaction: its progress.
            Step::Ticket(_, 0) | Step::Txn => {
                let ti = self.ms[ix as usize].0;
                let e = self.txns.entry(ti).or_insert((before, Vec::new()));
                // The progress seen before the earliest of its steps: a
                // change since any of them wakes them all.
                if e.1.is_empty() {
                    e.0 = before;
                }
                e.1.push(ix);
                let since = e.0;
                let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
                pt.parked.store(true, Ordering::SeqCst);
                if progress(pt) != since {
                    // It moved before the flag was seen: look again.
                    self.woken.push(Wake::Txn(ti));
                }
            }
            Step::Ticket(rec, wait) => {
                let w = self.tickets.entry(rec as usize).or_default();
                // The gate is the earliest waiter's need: a new earliest
                // one (a member parked again) resets it.
                if w.heap.peek().is_none_or(|e| e.0 > ix) {
                    w.gate = wait;
                }
                w.heap.push(std::cmp::Reverse(ix));
            }
            Step::Decision => {
                let ti = self.ms[ix as usize].0;
                self.decisions.entry(ti).or_default().push(ix);
                let pt = ctx.txns[ti as usize].pwv.as_deref().expect("a PWV batch");
                pt.parked.store(true, Ordering::SeqCst);
                if decided(pt) {
                    self.woken.push(Wake::Txn(ti));
                }
            }
            Step::Complete => self.complete.push(ix),
        }
    }

    /// Look at what this executor was told has moved (records' counters,
    /// transactions' progress): the earliest waiter of each such record,
    /// every waiter of each such transaction. True if some member was
    /// looked at again.
    fn pass(&mut self, sh: &Shared, local: &LocalEpoch, ctx: &BatchCtx, me: u16) -> bool {
        let mut wakes = std::mem::take(&mut self.wakes);
        wakes.append(&mut self.woken);
        LOCAL_WAKES.with(|l| {
            if let Some((_, v)) = &mut *l.borrow_mut() {
                wakes.append(v);
            }
        });
        wakes.append(&mut sh.wakes[me as usize].lock());
        let mut moved = std::mem::take(&mut self.moved);
        for w in wakes.drain(..) {
            match w {
                Wake::Rec(rec) => {
                    let Some(gate) = self.tickets.get(&rec).map(|w| w.gate) else {
                        continue;
                    };
                    // SAFETY: records live while the engine runs.
                    let released =
                        unsafe { (*(rec as *const BRecord)).released.load(Ordering::Acquire) };
                    if released < gate {
                        continue;
                    }
                    while let Some(&std::cmp::Reverse(ix)) =
                        self.tickets.get(&rec).and_then(|w| w.heap.peek())
                    {
                        let (r, before) = self.step(sh, local, ctx, me, ix);
                        let w = self.tickets.get_mut(&rec).expect("peeked");
                        if let Step::Ticket(again, wait) = r {
                            if again as usize == rec && wait > 0 {
                                w.gate = wait;
                                break;
                            }
                        }
                        w.heap.pop();
                        if w.heap.is_empty() {
                            self.tickets.remove(&rec);
                        } else {
                            // The next waiter's need is not known yet.
                            w.gate = 0;
                        }
                        moved.push((ix, r, before));
                    }
                }
                Wake::Txn(ti) => {
                    // A late wake of an earlier batch may name a
                    // transaction this batch does not have (or another
                    // one: looking again is harmless).
                    let Some(pt) = ctx.txns.get(ti as usize).and_then(|t| t.pwv.as_deref()) else {
                        continue;
                    };
                    let waiting = self.txns.remove(&ti).map(|(_, ixs)| ixs);
                    let deciding = match self.decisions.contains_key(&ti) && decided(pt) {
                        true => self.decisions.remove(&ti),
                        false => None,
                    };
                    for ix in waiting.into_iter().chain(deciding).flatten() {
                        let (r, before) = self.step(sh, local, ctx, me, ix);
                        moved.push((ix, r, before));
                    }
                }
            }
        }
        let progressed = !moved.is_empty();
        for (ix, r, before) in moved.drain(..) {
            self.park(ctx, ix, r, before);
        }
        self.moved = moved;
        self.wakes = wakes;
        progressed
    }
}

/// Checks 2 and 3, then run, skip or wait (on the runner's thread only);
/// true once the piece has completed.
fn try_run(sh: &Shared, local: &LocalEpoch, txn: &BTxn, pt: &PTxn, p: u16) -> Run {
    let piece = &pt.pieces[p as usize];
    match piece.state.load(Ordering::Acquire) {
        COMPLETED => return Run::Completed,
        // Executed, waiting for its transaction's decision (the last
        // settler completes it).
        EXECUTED => return Run::Awaiting,
        _ => {}
    }
    let aborted = pt.commit_rvp.load(Ordering::Acquire) < 0;
    if aborted {
        if piece.abortable {
            // Skipped (the footnote): done with the data without running.
            piece.state.store(EXECUTED, Ordering::Release);
            for &r in pt.child_rvps(piece) {
                pt.rvps[r as usize].fetch_sub(1, Ordering::AcqRel);
            }
            settle(sh, pt, txn);
            return Run::Awaiting;
        }
        // After the commit point of an aborted transaction: nothing to
        // run, once the abortable pieces are undone.
        if pt.decided.load(Ordering::Acquire) != 2 {
            return Run::Undecided;
        }
        complete(sh, pt, piece, txn);
        return Run::Completed;
    }
    if piece.rvp != u32::MAX && pt.rvps[piece.rvp as usize].load(Ordering::Acquire) != 0 {
        return Run::Blocked;
    }
    if !piece.abortable && pt.commit_rvp.load(Ordering::Acquire) != 0 {
        return Run::Undecided;
    }
    let claimed = piece
        .state
        .compare_exchange(UNEXECUTED, RUNNING, Ordering::AcqRel, Ordering::Acquire)
        .is_ok();
    debug_assert!(claimed, "a piece is run by its last member's thread only");
    let r = run(sh, local, txn, pt, p);
    for &c in pt.child_rvps(piece) {
        // Release: the child reads this piece's output and writes.
        pt.rvps[c as usize].fetch_sub(1, Ordering::AcqRel);
    }
    if !piece.abortable {
        if let Err(e) = r {
            // A corner case (§6.4.7): a piece after the commit point keeps
            // no before-images (one copy per write on the common path), and
            // its transaction's earlier pieces may have been read already.
            // The thesis's answer, a full system failure: the request is
            // expunged from the input log, the batch is never released, and
            // recovery replays from the last checkpoint without it. Before
            // `complete`: the batch cannot be released in between.
            let e = e.unwrap_or_else(|| {
                Error::InvalidArgument("a piece after the commit point aborted".into())
            });
            super::system_failure(
                sh,
                txn.ts,
                format!(
                    "procedure '{}', piece {p}: {e}",
                    // SAFETY: the name is immutable.
                    unsafe { (*txn.proc.get()).name() }
                ),
            );
            pt.error.lock().get_or_insert(e);
        }
        complete(sh, pt, piece, txn);
        return Run::Completed;
    }
    match r {
        Ok(()) => {
            // Publish EXECUTED before the commit RVP moves (the first
            // aborter reads states after its swap).
            piece.state.store(EXECUTED, Ordering::SeqCst);
            pt.commit_rvp.fetch_sub(1, Ordering::SeqCst);
        }
        Err(e) => {
            if let Some(e) = e {
                pt.error.lock().get_or_insert(e);
            }
            // Its own partial writes first (nobody else touches them).
            undo(pt, piece);
            pt.commit_rvp.swap(-1, Ordering::SeqCst);
            piece.state.store(EXECUTED, Ordering::SeqCst);
        }
    }
    settle(sh, pt, txn);
    Run::Awaiting
}

/// An abortable piece is done with the data; the last one makes the
/// decision effective: every abortable piece completes, after the undo of
/// the executed ones (in reverse order) on an abort.
fn settle(sh: &Shared, pt: &PTxn, txn: &BTxn) {
    if pt.settle.fetch_sub(1, Ordering::SeqCst) != 1 {
        wake_txn(sh, pt);
        return;
    }
    let aborted = pt.commit_rvp.load(Ordering::Acquire) < 0;
    if aborted {
        for &p in pt.order.iter().rev() {
            let piece = &pt.pieces[p as usize];
            if piece.abortable {
                undo(pt, piece);
            }
        }
    }
    pt.decided
        .store(if aborted { 2 } else { 1 }, Ordering::Release);
    for &p in pt.order.iter() {
        let piece = &pt.pieces[p as usize];
        if piece.abortable {
            complete(sh, pt, piece, txn);
        }
    }
}

/// Restore `piece`'s before-images, newest first.
fn undo(pt: &PTxn, piece: &Piece) {
    // SAFETY: the piece is done running (its runner, or the last settler
    // after every abortable piece settled), and its records are held by
    // its tickets: nobody else reads or writes them.
    let Some(log) = (unsafe { pt.undo_log(piece) }) else {
        return;
    };
    for u in log.drain(..).rev() {
        // SAFETY: as above.
        unsafe {
            let v = &*(*u.rec).head.load(Ordering::Acquire);
            *v.data.get() = u.data;
            v.state.store(u.state, Ordering::Release);
        }
    }
}

/// Complete `piece`: release its tickets, and make the transaction's
/// outcome if it is the last piece.
fn complete(sh: &Shared, pt: &PTxn, piece: &Piece, txn: &BTxn) {
    for a in pt.accs_of(piece) {
        // SAFETY: written before the piece ran; read-only since.
        let (t, x) = unsafe { (&*a.ticket.get(), a.extra()) };
        for t in std::iter::once(t).chain(x.iter()) {
            if t.counted {
                // SAFETY: records live while the engine runs. Release:
                // the piece's writes (or the undo) before the next holder.
                unsafe { (*t.rec).released.fetch_add(1, Ordering::Release) };
                wake(sh, a.part, Wake::Rec(t.rec as usize));
            }
        }
    }
    if pt.left.fetch_sub(1, Ordering::SeqCst) == 1 {
        outcome(pt, txn);
    }
    wake_txn(sh, pt);
    let was = piece.state.swap(COMPLETED, Ordering::Release);
    debug_assert_ne!(was, COMPLETED, "a piece completed twice");
}

/// The transaction's outcome (every piece has completed but for this
/// one's state store, so no piece runs): its error, an abort, or the
/// output (a body's, kept when it ran; a decomposed procedure's, made from
/// its pieces' outputs now).
fn outcome(pt: &PTxn, txn: &BTxn) {
    // SAFETY: no piece of the transaction runs any more, and the batch's
    // finisher reads the outcome only after every piece completed.
    let out = unsafe { &mut *txn.outcome.get() };
    if let Some(e) = txn.unusable.clone().or_else(|| pt.error.lock().take()) {
        *out = Some(Err(e));
        return;
    }
    if pt.commit_rvp.load(Ordering::Acquire) < 0 {
        *out = Some(Ok(Outcome::Aborted));
        return;
    }
    if !pt.decomposed {
        debug_assert!(out.is_some(), "a committed body left its output");
        return;
    }
    // SAFETY: outputs are written once, by their pieces, before this.
    let outs: Vec<&[u8]> = pt
        .pieces
        .iter()
        .map(|p| unsafe { pt.out(p) })
        .collect();
    // SAFETY: no piece runs: the procedure is this thread's alone.
    let proc = unsafe { &mut *txn.proc.get() };
    *out = Some(match proc.pieces_output(&outs) {
        Ok(o) => Ok(Outcome::Committed(o)),
        Err(TxError::Error(Error::UserAbort)) => Err(Error::InvalidArgument(format!(
            "'{}': pieces_output aborted after the commit point",
            proc.name()
        ))),
        Err(TxError::Error(e)) => Err(e),
        Err(TxError::Conflict(r)) => Err(Error::InvalidArgument(format!(
            "a PWV transaction cannot have a conflict ({r})"
        ))),
    });
}

/// Run piece `p`: `Ok` it executed; `Err(None)` it aborted (a user
/// abort), `Err(Some(e))` it failed.
fn run(
    sh: &Shared,
    local: &LocalEpoch,
    txn: &BTxn,
    pt: &PTxn,
    p: u16,
) -> Result<(), Option<Error>> {
    if let Some(e) = &txn.unusable {
        return Err(Some(e.clone()));
    }
    let piece = &pt.pieces[p as usize];
    // Its undo log and output, kept in its cells after the run if either
    // has anything (no allocation otherwise).
    let mut cells = PieceCells::default();
    let mut tx = PwvTx {
        sh,
        local,
        pt,
        piece,
        undo: &mut cells.undo,
    };
    let name = || {
        // SAFETY: the name is immutable.
        unsafe { (*txn.proc.get()).name() }
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if pt.decomposed {
            // SAFETY: pieces run concurrently on `&self` (the procedure
            // is `Sync`); nothing holds it mutably while pieces run.
            let proc = unsafe { &*txn.proc.get() };
            let inputs = |q: PieceId| -> Option<&[u8]> {
                pt.parents(piece)
                    .contains(&u32::from(q))
                    // SAFETY: a parent's output was written before its
                    // child's RVP reached zero (acquired above).
                    .then(|| unsafe { pt.out(&pt.pieces[q as usize]) })
            };
            let mut io = PieceIo::new(&inputs, &mut cells.out);
            let mut t = Txn::new(&mut tx);
            proc.run_piece(p, &mut t, &mut io).map(|()| None)
        } else {
            // SAFETY: a procedure that does not decompose is one piece,
            // run by this thread alone.
            let proc = unsafe { &mut *txn.proc.get() };
            let mut t = Txn::new(&mut tx);
            proc.run(&mut t).map(Some)
        }
    }))
    .unwrap_or_else(|e| {
        let msg = panic_message(&*e);
        Err(TxError::Error(Error::InvalidArgument(format!(
            "procedure '{}' panicked: {msg}",
            name()
        ))))
    });
    if !cells.out.is_empty() || !cells.undo.is_empty() {
        // SAFETY: this thread claimed the piece (RUNNING): its cells are
        // its own until it releases its children's RVPs, its state,
        // `settle` or `left` (in `try_run`, after this), which orders this
        // store before every reader's acquire.
        unsafe { *piece.cells.get() = Box::into_raw(Box::new(cells)) };
        pt.cells.store(true, Ordering::Relaxed);
    }
    match r {
        Ok(out) => {
            if let Some(out) = out {
                // SAFETY: the only piece of its transaction.
                unsafe { *txn.outcome.get() = Some(Ok(Outcome::Committed(out))) };
            }
            Ok(())
        }
        Err(TxError::Error(Error::UserAbort)) if piece.abortable => Err(None),
        Err(TxError::Error(Error::UserAbort)) => Err(Some(Error::InvalidArgument(format!(
            "'{}': piece {p} aborted, but it was not declared abortable (after the commit point)",
            name()
        )))),
        // A reconnaissance that no longer holds aborts the request.
        Err(TxError::Conflict(ConflictReason::Reconnaissance)) if piece.abortable => Err(None),
        Err(TxError::Conflict(r)) => Err(Some(Error::InvalidArgument(format!(
            "a PWV transaction cannot have a conflict ({r})"
        )))),
        Err(TxError::Error(e)) => Err(Some(e)),
    }
}

/// The transaction a piece runs on: its declared records, in place.
struct PwvTx<'a> {
    sh: &'a Shared,
    /// Pinned only around index lookups and scans (keys under a declared
    /// group): a declared key's record is found through its ticket, and
    /// records live while the engine runs, so most pieces never pin.
    local: &'a LocalEpoch,
    pt: &'a PTxn,
    piece: &'a Piece,
    undo: &'a mut Vec<Undo>,
}

impl PwvTx<'_> {
    fn undeclared(&self, what: &str, t: TableId, key: &[u8]) -> TxError {
        TxError::Error(Error::InvalidArgument(format!(
            "PWV: a {what} of table {} key {key:02x?} that the piece did not declare",
            t.as_u32()
        )))
    }

    /// The record of `(t, key)` and whether the piece may write it; `None`
    /// if it has none yet (a key under a declared group). An error if the
    /// piece did not declare it.
    fn find(
        &self,
        t: TableId,
        key: &[u8],
        write: bool,
    ) -> TxResult<(Option<*const BRecord>, bool)> {
        let accs = self.pt.accs_of(self.piece);
        for a in accs {
            if !a.group && a.table == t && self.pt.key(a) == key {
                if write && !a.write {
                    break;
                }
                // SAFETY: tickets were written before the piece ran.
                return Ok((Some(unsafe { (*a.ticket.get()).rec }), a.write));
            }
        }
        for a in accs {
            if a.group && a.table == t && key.starts_with(self.pt.key(a)) && (a.write || !write) {
                let tree = self.sh.table(t)?;
                let rec = match tree.get(key, &self.local.pin()) {
                    Lookup::Found(r) => Some(r as *const BRecord),
                    Lookup::Missing { .. } => None,
                };
                return Ok((rec, a.write));
            }
        }
        Err(self.undeclared(if write { "write" } else { "read" }, t, key))
    }

    fn value(rec: *const BRecord) -> Option<&'static [u8]> {
        // SAFETY: records live while the engine runs; the piece holds the
        // record's ticket, so nobody else writes it while the slice is out
        // (the borrow ends at the transaction's next operation). The
        // `'static` is narrowed by the callers to `&self`.
        unsafe {
            let v = &*(*rec).head.load(Ordering::Acquire);
            (v.state.load(Ordering::Acquire) == VALUE).then(|| &(&*v.data.get())[..])
        }
    }

    fn read(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        Ok(self.find(t, key, false)?.0.and_then(Self::value))
    }

    fn write(&mut self, t: TableId, key: &[u8], val: Option<&[u8]>) -> TxResult<()> {
        let (rec, _) = self.find(t, key, true)?;
        let rec = match rec {
            Some(r) => r,
            None if val.is_none() => return Ok(()),
            None => {
                // A new key under a declared group: its record, absent.
                let tree = self.sh.table(t)?;
                let v = absent_version();
                let rec = BRecord::new(v);
                match tree.insert(key, rec as u64, &self.local.pin()) {
                    Insert::Inserted { .. } => rec as *const BRecord,
                    Insert::Exists(r) => {
                        // SAFETY: ours was never shared.
                        unsafe { free_record(rec) };
                        r as *const BRecord
                    }
                }
            }
        };
        // SAFETY: the piece holds the record's ticket (or its group's):
        // nobody else reads or writes it until the piece completes.
        let v: &Version = unsafe { &*(*rec).head.load(Ordering::Acquire) };
        let state = v.state.load(Ordering::Acquire);
        // SAFETY: as above.
        let data = unsafe { &mut *v.data.get() };
        if self.piece.abortable && !self.undo.iter().any(|u| ptr::eq(u.rec, rec)) {
            self.undo.push(Undo {
                rec,
                state,
                data: data.clone(),
            });
        }
        match val {
            Some(val) => {
                if data.len() == val.len() {
                    data.copy_from_slice(val);
                } else {
                    *data = val.into();
                }
                v.state.store(VALUE, Ordering::Release);
            }
            None => {
                *data = Box::default();
                v.state.store(TOMBSTONE, Ordering::Release);
            }
        }
        Ok(())
    }
}

impl PointRw for PwvTx<'_> {
    fn read_point(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.read(t, key)
    }
    fn write_point(&mut self, t: TableId, key: &[u8], val: Option<&[u8]>) -> TxResult<()> {
        self.write(t, key, val)
    }
}

impl TxnOps for PwvTx<'_> {
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.read(t, key)
    }

    fn get_slice(
        &mut self,
        t: TableId,
        key: &[u8],
        at: std::ops::Range<usize>,
    ) -> TxResult<Option<&[u8]>> {
        Ok(self
            .read(t, key)?
            .map(|v| crate::txn::clamp_slice(v, at.start, at.end)))
    }

    fn prefetch(&mut self, _t: TableId, _keys: &[&[u8]], _value_len: usize) {}

    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        self.write(t, key, Some(val))
    }

    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.insert_absent(t, key, val)
    }

    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.write_present(t, key, Some(val))
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        self.write_present(t, key, None)
    }

    fn scan(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxResult<usize> {
        let starts = |b: Bound<&[u8]>, u: &[u8]| match b {
            Bound::Included(k) | Bound::Excluded(k) => k.starts_with(u),
            Bound::Unbounded => u.is_empty(),
        };
        let covered = self.pt.accs_of(self.piece).iter().any(|a| {
            a.group && a.table == t && starts(lo, self.pt.key(a)) && starts(hi, self.pt.key(a))
        });
        if !covered {
            return Err(TxError::Error(Error::InvalidArgument(format!(
                "PWV: a scan of table {} that no declared group of the piece covers",
                t.as_u32()
            ))));
        }
        let tree = self.sh.table(t)?;
        let mut n = 0;
        let g = self.local.pin();
        tree.scan(lo, hi, opts.reverse, &g, Unobserved, |k, r| {
            if opts.limit.is_some_and(|l| n >= l) {
                return false;
            }
            let Some(v) = Self::value(r as *const BRecord) else {
                return true;
            };
            let v = match opts.slice {
                Some((s, e)) => crate::txn::clamp_slice(v, s, e),
                None => v,
            };
            n += 1;
            f(k, v)
        });
        Ok(n)
    }

    fn is_snapshot(&self) -> bool {
        false
    }
}

//! Strict two-phase locking with reader-writer record locks: `2pl-nowait`
//! and `2pl-waitdie` (DBx1000's `NO_WAIT` and `WAIT_DIE`, Yu et al., VLDB
//! 2014, section 3.1; CCBench's `ss2pl`). Added through the protocol seam:
//! this module and one line in the list of `cc/mod.rs` (its lock word is
//! the newest version's auxiliary word, which the storage layer keeps for
//! the record layout's use; widening it to 64 bits later changed the
//! shared `Version` header's packing, not its size).
//!
//! *Locks.* Every record read takes a shared lock, every write an
//! exclusive one (a read-then-write upgrades when the transaction is the
//! only reader); all are held until the transaction commits or aborts
//! (strict 2PL). The 64-bit lock word lives in the newest version of the
//! record ([`Version::lock_word`]): [`X`] plus the holder's worker slot + 1,
//! or a reader count with the oldest reader's wait-die timestamp.
//! Single-version records never use that word otherwise, so no other
//! protocol's record grows. A commit that installs a larger value
//! moves the record to a new version whose word is free; that is safe
//! because the transaction's outcome is decided by then, and a waiter on
//! the old word re-checks, after acquiring it, that it locked the newest
//! version ([`lock`]).
//!
//! *Conflicts.* `NO_WAIT` aborts at once when a lock is held in a
//! conflicting mode. `WAIT_DIE` gives each transaction a timestamp at its
//! first attempt (kept across its conflict retries, so it ages and
//! eventually wins) and lets a requester wait only for a holder younger
//! than itself; a younger requester dies. Against an exclusive holder the
//! rule is exact (the word names the holder, whose timestamp is in
//! [`TwoPlShared::ts`]). Against shared holders the word keeps the smallest
//! timestamp of a reader since the readers were last none: a requester
//! older than it waits (it is older than every reader), any other dies.
//! DBx1000 keeps an owner list per row and compares with each owner; the
//! bound is the same rule except that a reader leaving does not raise it
//! until the readers drain, so a requester may die where DBx1000 would
//! delay it (never the other way: waits go only from older to younger, so
//! no cycle can form). There is no waiter queue (DBx1000 queues waiters per
//! row): an older writer waiting for readers to drain can be passed by
//! younger readers that keep joining; it waits longer, but the wait ends
//! once they stop, and it never deadlocks.
//!
//! *Phantoms.* A scan and a read that finds a key absent put the index
//! leaves they examined into a node set, validated at commit while every
//! record lock is held (Silo's section 4.6 mechanism, on the same B+-tree
//! leaf versions). We chose it over next-key or range locking because the
//! index already exposes leaf versions and Silo and SSN use the same
//! check, so phantom protection costs 2PL what it costs them and needs no
//! lock manager over key ranges; the price is that a phantom aborts the
//! scanner at commit where range locks would have blocked the inserter.
//!
//! *Commit.* With every lock held, read the epoch (the serialization point,
//! as in Silo), validate the node set, choose a TID by Silo's rule (larger
//! than every TID read or written and the worker's last, in the current
//! epoch; the locks make it agree with the conflict order), log the redo
//! entry, install each write under the record's latch, unlink deleted
//! records, release the locks.

use std::ops::Bound;
use std::sync::atomic::{fence, AtomicU64, Ordering};

use super::{
    own_insert_fixup, unlink, CcProtocol, NodeEntry, OrphanUnlinks, SvLocal, Tx, TxnSets,
    WorkerCore, WriteEntry, WriteKind,
};
use crate::catalog::Table;
use crate::engine::{Engine, Settings};
use crate::epoch::Guard;
use crate::error::{ConflictReason, TxError, TxResult};
use crate::index::Insert;
use crate::index::OrderedIndex;
use crate::storage::tid::*;
use crate::storage::{ReadOutcome, Record, Version};
use crate::txn::{check_patch, clamp_slice, ScanOptions};

/// Lock word (64 bits, the newest version's auxiliary word): held
/// exclusively, the low bits being the holder's slot + 1. Without it, the
/// word is shared: the low [`COUNT_BITS`] bits count the readers and the
/// bits above hold the smallest wait-die timestamp of a reader since the
/// count was last zero (0 under no-wait, which does not track them).
const X: u64 = 1 << 63;
/// Bits of a shared word that count its readers.
const COUNT_BITS: u32 = 16;
/// The reader count of a shared word.
const COUNT: u64 = (1 << COUNT_BITS) - 1;
/// Wait-die timestamps stay below this: above the count, a shared word
/// has 47 bits for one before the exclusive bit.
const TS_LIMIT: u64 = 1 << (63 - COUNT_BITS);

/// A shared word with `n` readers, the oldest of timestamp `ts`.
#[inline]
fn shared_word(n: u64, ts: u64) -> u64 {
    debug_assert!(n <= COUNT && ts < TS_LIMIT);
    n | ts << COUNT_BITS
}

/// The oldest reader's timestamp of a shared word: a lower bound (a reader
/// that leaves does not raise it), so a requester that is older than it is
/// older than every reader.
#[inline]
fn oldest_reader(w: u64) -> u64 {
    (w & !X) >> COUNT_BITS
}

/// How a lock conflict is resolved.
pub(crate) trait Policy: Send + Sync + 'static {
    /// Wait-die (else no-wait).
    const WAIT_DIE: bool;
}

/// DBx1000's `NO_WAIT`: abort on any conflict.
pub(crate) struct NoWait;
impl Policy for NoWait {
    const WAIT_DIE: bool = false;
}

/// DBx1000's `WAIT_DIE`: an older requester waits, a younger one dies.
pub(crate) struct WaitDie;
impl Policy for WaitDie {
    const WAIT_DIE: bool = true;
}

/// Strict 2PL with conflict policy `P`.
pub(crate) struct TwoPl<P>(std::marker::PhantomData<P>);

type LTx<'a, P> = Tx<'a, TwoPl<P>>;

/// 2PL's database-wide state.
pub(crate) struct TwoPlShared {
    /// Wait-die timestamps are drawn from here.
    clock: AtomicU64,
    /// The running transaction's wait-die timestamp, per worker slot.
    ts: Box<[AtomicU64]>,
    /// Deleted records of dropped workers (unused: 2PL unlinks at commit).
    orphans: OrphanUnlinks,
}

/// A lock this transaction holds.
#[derive(Clone, Copy)]
struct Held {
    rec: *const Record,
    /// The version whose word holds the lock.
    ver: *const Version,
    excl: bool,
}

/// 2PL's per-worker state.
#[derive(Default)]
pub(crate) struct TwoPlLocal {
    /// Write set, node set, value buffers, TIDs (shared with Silo's code).
    sv: SvLocal,
    /// The locks held, in acquisition order.
    held: Vec<Held>,
    /// Record address -> index into `held`, once `held` is large (a scan
    /// locks every row it visits; a linear search made large scans
    /// quadratic).
    held_index: super::AddrMap,
    /// The largest TID word of a record read or written (Silo's TID rule).
    max_seen: u64,
    /// Wait-die timestamp of the running transaction.
    ts: u64,
    /// Keep `ts` for the next attempt (this one aborted on a conflict).
    keep_ts: bool,
}

// SAFETY: the raw pointers are only dereferenced by the owning worker
// while it is pinned.
unsafe impl Send for TwoPlLocal {}

fn conflict<T>(st: &mut TwoPlLocal, r: ConflictReason) -> TxResult<T> {
    st.keep_ts = true;
    Err(TxError::Conflict(r))
}

/// Above this many locks, `held` is looked up through `held_index`.
const HELD_INDEX_MIN: usize = 24;

/// Index of our lock on `rec`, if any.
#[inline]
fn held(st: &TwoPlLocal, rec: *const Record) -> Option<usize> {
    if st.held.len() >= HELD_INDEX_MIN {
        return st.held_index.get(&(rec as usize)).copied();
    }
    st.held.iter().position(|h| h.rec == rec)
}

/// Record a new lock.
#[inline]
fn push_held(st: &mut TwoPlLocal, h: Held) {
    let i = st.held.len();
    st.held.push(h);
    if st.held.len() == HELD_INDEX_MIN {
        for (j, h) in st.held.iter().enumerate() {
            st.held_index.insert(h.rec as usize, j);
        }
    } else if st.held.len() > HELD_INDEX_MIN {
        st.held_index.insert(h.rec as usize, i);
    }
}

/// Before answering that a key exists (or is missing) in a way an earlier
/// read of this transaction contradicts: a key found absent took no lock,
/// only a node-set entry, so another transaction may have inserted it since.
/// Validate the node set first, as Silo's `confirm_reads` does, so the body
/// never sees the contradiction; the transaction would fail at commit anyway.
fn confirm_absences(st: &mut TwoPlLocal) -> TxResult<()> {
    if st
        .sv
        .sets
        .nodes
        .iter()
        .any(|n| n.leaf.version() != n.version)
    {
        return conflict(st, ConflictReason::NodeValidation);
    }
    Ok(())
}

/// Try to take `word` in mode `excl` for slot `me` (wait-die timestamp
/// `ts`); an upgrade when `upgrade` (we hold one of the shared locks).
/// `Ok(())` taken, `Err(word)` the word that stood in the way. A lost
/// compare-and-swap is retried against the word it found: two readers
/// racing for a shared lock are not a conflict.
#[inline]
fn try_take(word: &AtomicU64, excl: bool, upgrade: bool, me: u64, ts: u64) -> Result<(), u64> {
    let mut cur = word.load(Ordering::Relaxed);
    loop {
        let readers = cur & COUNT;
        let (ok, new) = if excl {
            let expect = if upgrade { 1 } else { 0 };
            (cur & X == 0 && readers == expect, X | me)
        } else if readers == 0 {
            (cur & X == 0, shared_word(1, ts))
        } else {
            let oldest = oldest_reader(cur).min(ts);
            (
                cur & X == 0 && readers < COUNT,
                shared_word(readers + 1, oldest),
            )
        };
        if !ok {
            return Err(cur);
        }
        match word.compare_exchange_weak(cur, new, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Ok(()),
            Err(actual) => cur = actual,
        }
    }
}

/// Release a lock on `ver`'s word.
#[inline]
fn release(ver: *const Version, excl: bool) {
    // SAFETY: we hold a lock on it, so it has not been reclaimed (a
    // replaced version is retired through the epoch, which we are in).
    let w = unsafe { &*ver }.lock_word();
    if excl {
        w.store(0, Ordering::Release);
    } else {
        // The count is the low bits and at least 1: no borrow reaches the
        // timestamp.
        w.fetch_sub(1, Ordering::Release);
    }
}

/// Lock `rec` in mode `excl` (upgrading a shared lock we hold). Returns
/// `Ok(false)` if the record was unlinked (retry through the index).
fn lock<P: Policy>(tx: &mut LTx<'_, P>, rec: &Record, excl: bool) -> TxResult<bool> {
    let me = tx.core.slot as u64 + 1;
    let ts = tx.st.ts;
    let mine = held(tx.st, rec);
    if let Some(i) = mine {
        if tx.st.held[i].excl || !excl {
            return Ok(true);
        }
    }
    let upgrade = mine.is_some();
    let mut spins = 0u32;
    loop {
        let v = rec.newest();
        // SAFETY: reached from a record found while pinned.
        let word = unsafe { &*v }.lock_word();
        match try_take(word, excl, upgrade, me, ts) {
            Ok(()) => {
                if rec.newest() != v {
                    // A commit replaced the version while we waited for
                    // its word: lock the new one (see the module docs).
                    if upgrade {
                        word.store(shared_word(1, ts), Ordering::Release);
                    } else {
                        release(v, excl);
                    }
                    continue;
                }
                let t = rec.tid_word();
                if t & LATEST == 0 {
                    // Unlinked: a deleter committed. Retry via the index.
                    if upgrade {
                        word.store(shared_word(1, ts), Ordering::Release);
                    } else {
                        release(v, excl);
                    }
                    return Ok(false);
                }
                tx.st.max_seen = tx.st.max_seen.max(t & TID_MASK);
                match mine {
                    Some(i) => tx.st.held[i].excl = true,
                    None => push_held(tx.st, Held { rec, ver: v, excl }),
                }
                return Ok(true);
            }
            Err(cur) => {
                if !P::WAIT_DIE {
                    return conflict(tx.st, ConflictReason::LockConflict);
                }
                // Wait only for holders all younger than us: the exclusive
                // holder the word names, or readers whose oldest is younger
                // (an upgrader counts itself among them, hence `<=`).
                let older = if cur & X != 0 {
                    let h = (cur & !X) as usize - 1;
                    let hts = tx.sh.ts[h].load(Ordering::Acquire);
                    ts < hts
                } else if upgrade {
                    ts <= oldest_reader(cur)
                } else {
                    ts < oldest_reader(cur)
                };
                if !older {
                    return conflict(tx.st, ConflictReason::WaitDie);
                }
                super::backoff_spin(&mut spins);
            }
        }
    }
}

/// The record of `key` in `table`, locked in mode `excl`, or `None` with
/// the leaf where the key would be (for the node set).
fn find_locked<'a, P: Policy>(
    tx: &mut LTx<'a, P>,
    table: &Table,
    key: &[u8],
    excl: bool,
) -> TxResult<Result<&'a Record, NodeEntry>> {
    let recs = tx.records();
    // A record a prefetch found: `lock` says if it was unlinked since.
    if let Some(rec) = tx.st.sv.sets.prefetched.find(table.id, key) {
        // SAFETY: found by this attempt's prefetch while pinned (the guard
        // is the attempt's), so not freed.
        let rec = unsafe { &*rec };
        if lock(tx, rec, excl)? {
            return Ok(Ok(rec));
        }
    }
    for _ in 0..super::STALE_RETRIES {
        let (found, leaf, version) = recs.lookup_with_leaf(table, key);
        let Some(rec) = found else {
            return Ok(Err(NodeEntry { leaf, version }));
        };
        if lock(tx, rec, excl)? {
            return Ok(Ok(rec));
        }
    }
    conflict(tx.st, ConflictReason::Stale)
}

/// `Txn::get`.
fn get<'t, P: Policy>(
    tx: &'t mut LTx<'_, P>,
    table: &Table,
    key: &[u8],
) -> TxResult<Option<&'t [u8]>> {
    let rec = match find_locked(tx, table, key, false)? {
        Ok(r) => r,
        Err(n) => {
            tx.st.sv.sets.nodes.push(n);
            return Ok(None);
        }
    };
    read_locked(tx, table, key, rec)
}

/// The read of `get` once the record is locked (shared or exclusive).
fn read_locked<'t, P: Policy>(
    tx: &'t mut LTx<'_, P>,
    table: &Table,
    key: &[u8],
    rec: &Record,
) -> TxResult<Option<&'t [u8]>> {
    let sets = &mut tx.st.sv.sets;
    if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
        let w = sets.writes[i];
        return Ok((w.kind == WriteKind::Put).then(|| sets.stashed(w.val)));
    }
    sets.rbuf.clear();
    match rec.read(&mut sets.rbuf) {
        ReadOutcome::Ok(t) if t & ABSENT == 0 => Ok(Some(&sets.rbuf[..])),
        _ => {
            // Absent (a committed delete not yet unlinked): we hold its
            // lock, so no one inserts the key into it; an unlink and a new
            // record would change the leaf, which the node set sees.
            let (_, leaf, version) = table.index.get_with_leaf(key, tx.g);
            sets.nodes.push(NodeEntry { leaf, version });
            Ok(None)
        }
    }
}

/// `Txn::get_many` under 2PL: the keys looked up 16 at a time with one
/// batched descent, each record found then locked and read as `get` does
/// after its lookup (no prefetch memo in between); a key the batch did not
/// find, or a record unlinked before its lock, goes through `get`.
fn get_many<P: Policy>(
    tx: &mut LTx<'_, P>,
    table: &Table,
    keys: &[&[u8]],
    start: usize,
    end: usize,
    f: &mut dyn FnMut(usize, Option<&[u8]>),
) -> TxResult<()> {
    let g = tx.g;
    super::for_each_found::<Record>(table, keys, end, g, |i, key, rec| {
        if !rec.is_null() {
            // SAFETY: found through the index while pinned (the guard is the
            // attempt's), so not freed.
            let rec = unsafe { &*rec };
            if lock(tx, rec, false)? {
                let r = read_locked(tx, table, key, rec)?;
                f(i, r.map(|r| clamp_slice(r, start, end)));
                return Ok(());
            }
        }
        let r = get(tx, table, key)?;
        f(i, r.map(|r| clamp_slice(r, start, end)));
        Ok(())
    })
}

use super::PointWrite as Op;

/// A write of `key`: lock the record exclusively (creating an absent one,
/// locked, for a put or insert of a missing key) and record the write.
/// Returns whether the operation applied.
fn write<P: Policy>(
    tx: &mut LTx<'_, P>,
    table: &Table,
    key: &[u8],
    val: Option<&[u8]>,
    op: Op,
) -> TxResult<bool> {
    for _ in 0..super::STALE_RETRIES {
        let rec = match find_locked(tx, table, key, true)? {
            Ok(r) => r,
            Err(n) => {
                if matches!(op, Op::Update | Op::Delete) {
                    tx.st.sv.sets.nodes.push(n);
                    return Ok(false);
                }
                if create(tx, table, key, val.unwrap_or(&[]))? {
                    return Ok(true);
                }
                continue; // someone inserted the key first: lock theirs
            }
        };
        let sets = &mut tx.st.sv.sets;
        let kind = if val.is_some() {
            WriteKind::Put
        } else {
            WriteKind::Delete
        };
        let bytes = val.unwrap_or(&[]);
        if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
            let present = sets.writes[i].kind == WriteKind::Put;
            match op {
                Op::Insert if present => return Ok(false),
                Op::Update | Op::Delete if !present => return Ok(false),
                _ => {}
            }
            let v = sets.stash(bytes);
            let w = &mut sets.writes[i];
            w.kind = kind;
            w.val = v;
            return Ok(true);
        }
        let present = rec.tid_word() & ABSENT == 0;
        match op {
            Op::Insert if present => {
                confirm_absences(tx.st)?;
                return Ok(false);
            }
            Op::Update | Op::Delete if !present => return Ok(false),
            _ => {}
        }
        let v = sets.stash(bytes);
        let k = sets.stash(key);
        sets.push_write(WriteEntry {
            key: k,
            ..WriteEntry::new(rec, table.id, kind, v)
        });
        return Ok(true);
    }
    conflict(tx.st, ConflictReason::Stale)
}

/// `Txn::update_slice` under 2PL: the record locked exclusively (one
/// lookup, where a `get` and an `update` take two), its committed value,
/// which our lock keeps stable, copied into the write set with the bytes
/// written over it.
fn update_slice<P: Policy>(
    tx: &mut LTx<'_, P>,
    table: &Table,
    key: &[u8],
    at: usize,
    bytes: &[u8],
) -> TxResult<bool> {
    let rec = match find_locked(tx, table, key, true)? {
        Ok(r) => r,
        Err(n) => {
            tx.st.sv.sets.nodes.push(n);
            return Ok(false);
        }
    };
    let sets = &mut tx.st.sv.sets;
    if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
        let w = sets.writes[i];
        if w.kind != WriteKind::Put {
            return Ok(false);
        }
        check_patch(w.val.1 as usize, at, bytes.len())?;
        let at = w.val.0 as usize + at;
        sets.wbuf[at..at + bytes.len()].copy_from_slice(bytes);
        return Ok(true);
    }
    let off = sets.wbuf.len();
    match rec.read(&mut sets.wbuf) {
        ReadOutcome::Ok(t) if t & ABSENT == 0 => {}
        _ => {
            sets.wbuf.truncate(off);
            return Ok(false);
        }
    }
    let len = sets.wbuf.len() - off;
    if let Err(e) = check_patch(len, at, bytes.len()) {
        sets.wbuf.truncate(off);
        return Err(e);
    }
    sets.wbuf[off + at..off + at + bytes.len()].copy_from_slice(bytes);
    let k = sets.stash(key);
    sets.push_write(WriteEntry {
        key: k,
        ..WriteEntry::new(rec, table.id, WriteKind::Put, (off as u32, len as u32))
    });
    Ok(true)
}

/// Insert a fresh absent record for `key`, exclusively locked by us, and
/// add the write. `Ok(false)` if a record for the key appeared first.
fn create<P: Policy>(tx: &mut LTx<'_, P>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
    let r = Record::new(&[], ABSENT | LATEST, val.len());
    // SAFETY: fresh, unpublished.
    let rec = unsafe { &*r };
    let v = rec.newest();
    // SAFETY: as above. Locked before anyone can see it.
    unsafe { &*v }
        .lock_word()
        .store(X | (tx.core.slot as u64 + 1), Ordering::Relaxed);
    let ins = table
        .index
        .insert_hinted(key, r as u64, tx.g, &mut tx.st.sv.sets.hint);
    if let Insert::Exists(_) = ins {
        // SAFETY: never published: the insert failed.
        unsafe { Record::free(r as *mut u8) };
        return Ok(false);
    }
    push_held(
        tx.st,
        Held {
            rec: r,
            ver: v,
            excl: true,
        },
    );
    let sets = &mut tx.st.sv.sets;
    own_insert_fixup(sets, &ins);
    let val = sets.stash(val);
    let k = sets.stash(key);
    sets.push_write(WriteEntry {
        key: k,
        created: true,
        ..WriteEntry::new(r, table.id, WriteKind::Put, val)
    });
    Ok(true)
}

/// `Txn::scan`: every leaf examined goes into the node set, every record
/// visited is share-locked.
fn scan<P: Policy, F>(
    tx: &mut LTx<'_, P>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    mut f: F,
) -> TxResult<usize>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let limit = opts.limit.unwrap_or(usize::MAX);
    let mut count = 0usize;
    let mut failed: Option<TxError> = None;
    let mut nodes = std::mem::take(&mut tx.st.sv.sets.nodes);
    let mut val = std::mem::take(&mut tx.st.sv.sets.rbuf);
    let recs = tx.records();
    recs.scan(
        table,
        (lo, hi),
        opts.reverse,
        &mut nodes,
        |k, rec: &Record| {
            match lock(tx, rec, false) {
                Err(e) => {
                    failed = Some(e);
                    return false;
                }
                // Unlinked under us: its removal changed the leaf version,
                // which the node set checks at commit.
                Ok(false) => return true,
                Ok(true) => {}
            }
            let sets = &tx.st.sv.sets;
            if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
                let w = sets.writes[i];
                if w.kind == WriteKind::Delete {
                    return true;
                }
                count += 1;
                return f(k, sets.stashed(w.val)) && count < limit;
            }
            val.clear();
            match rec.read(&mut val) {
                ReadOutcome::Ok(t) if t & ABSENT == 0 => {
                    count += 1;
                    f(k, &val) && count < limit
                }
                _ => true,
            }
        },
    );
    nodes.append(&mut tx.st.sv.sets.nodes);
    tx.st.sv.sets.nodes = nodes;
    tx.st.sv.sets.rbuf = val;
    match failed {
        Some(e) => Err(e),
        None => Ok(count),
    }
}

/// Release every lock, newest first.
fn release_all(st: &mut TwoPlLocal) {
    for h in st.held.drain(..).rev() {
        release(h.ver, h.excl);
    }
    st.held_index.clear();
}

/// Commit (see the module docs).
fn commit<P: Policy>(tx: &mut LTx<'_, P>) -> TxResult<()> {
    let db = tx.db;
    let writing = !tx.st.sv.sets.writes.is_empty();
    if writing {
        if let Some(log) = &db.log {
            log.announce(tx.core.slot, &mut tx.core.log);
        }
    }
    fence(Ordering::SeqCst);
    let e = db.epochs.global();
    // Every lock is held: validate the node set (phantoms).
    if tx
        .st
        .sv
        .sets
        .nodes
        .iter()
        .any(|n| n.leaf.version() != n.version)
    {
        abort(tx);
        return conflict(tx.st, ConflictReason::NodeValidation);
    }
    tx.core.log.ack = e;
    if !writing {
        release_all(tx.st);
        tx.st.keep_ts = false;
        return Ok(());
    }
    let st = &mut *tx.st;
    let tid = next_tid(st.max_seen, st.sv.last_tid, e);
    st.sv.last_tid = tid;
    let sets = &mut st.sv.sets;
    if let Some(log) = &db.log {
        let (writes, wbuf, old) = (&sets.writes, &sets.wbuf, &mut sets.rbuf);
        log.append(tx.core.slot, &mut tx.core.log, e, tid, |redo| {
            for w in writes {
                let key = &wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize];
                if w.kind == WriteKind::Delete {
                    redo.delete(w.table, key);
                    continue;
                }
                let val = &wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize];
                // SAFETY: locked by us; pinned.
                let rec = unsafe { &*w.rec };
                if w.created || rec.tid_word() & ABSENT != 0 {
                    redo.put(w.table, key, val);
                } else {
                    old.clear();
                    // SAFETY: exclusively locked by us, so the newest version
                    // is stable; pinned, so it is not reclaimed.
                    unsafe { Version::read_into(rec.newest(), old) };
                    redo.patch(w.table, key, old, val);
                }
            }
        });
    }
    for w in &sets.writes {
        // SAFETY: exclusively locked by us; pinned.
        let rec = unsafe { &*w.rec };
        // The latch orders the install against seqlock readers (checkpoints).
        let old = rec.lock();
        match w.kind {
            WriteKind::Put => {
                let val = &sets.wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize];
                rec.install(old, Some(val), tid | LATEST, None, tx.g);
            }
            WriteKind::Delete => rec.install(old, None, tid | LATEST | ABSENT, None, tx.g),
            // 2PL's `update_slice` is the default one (whole rows).
            WriteKind::Patch => unreachable!("2PL makes no patch entries"),
        }
    }
    // Deleted records leave the index while we still hold their locks.
    let dtid = tid | LATEST | ABSENT;
    for w in sets.writes.iter().filter(|w| w.kind == WriteKind::Delete) {
        let key = &sets.wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize];
        unlink(&tx.core.tables[w.table.0 as usize], tx.g, key, w.rec, dtid);
    }
    release_all(st);
    st.keep_ts = false;
    Ok(())
}

/// Abort: remove the records this transaction created, release the locks.
fn abort<P: Policy>(tx: &mut LTx<'_, P>) {
    let st = &mut *tx.st;
    let sets = &st.sv.sets;
    for w in sets.writes.iter().filter(|w| w.created) {
        super::remove_if_uncommitted(
            tx.core.tables[w.table.0 as usize].as_ref(),
            sets.stashed(w.key),
            w.rec,
            tx.g,
        );
    }
    release_all(st);
}

impl<P: Policy> CcProtocol for TwoPl<P> {
    type Shared = TwoPlShared;
    type Local = TwoPlLocal;
    type Rec = Record;

    fn new_shared(opts: &Settings) -> TwoPlShared {
        // Extra slots: `Epochs` hands internal users slots past `workers`.
        TwoPlShared {
            clock: AtomicU64::new(0),
            ts: (0..opts.workers + 2).map(|_| AtomicU64::new(0)).collect(),
            orphans: OrphanUnlinks::default(),
        }
    }
    fn new_local(_: &TwoPlShared, _: usize) -> TwoPlLocal {
        TwoPlLocal::default()
    }
    #[inline]
    fn begin(tx: &mut LTx<'_, P>) {
        let st = &mut *tx.st;
        st.sv.sets.clear();
        debug_assert!(st.held.is_empty());
        st.max_seen = 0;
        if P::WAIT_DIE {
            if !st.keep_ts {
                st.ts = tx.sh.clock.fetch_add(1, Ordering::Relaxed) + 1;
                // A shared lock word holds the timestamp above its reader
                // count: past 2^47 it would spill into the exclusive bit
                // and corrupt lock words silently. 2^47 transactions is
                // months at 10M a second; stop loudly instead.
                assert!(
                    st.ts < TS_LIMIT,
                    "2PL wait-die: this database's timestamp space (2^47 transactions) is used up; reopen it"
                );
            }
            tx.sh.ts[tx.core.slot].store(st.ts, Ordering::Release);
        }
        st.keep_ts = false;
    }
    #[inline]
    fn get<'t>(tx: &'t mut LTx<'_, P>, table: &Table, key: &[u8]) -> TxResult<Option<&'t [u8]>> {
        get(tx, table, key)
    }
    fn get_many(
        tx: &mut LTx<'_, P>,
        table: &Table,
        keys: &[&[u8]],
        start: usize,
        end: usize,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> TxResult<()> {
        get_many(tx, table, keys, start, end, f)
    }
    #[inline]
    fn prefetch(tx: &mut LTx<'_, P>, table: &Table, keys: &[&[u8]], value_len: usize) {
        let sets = &mut tx.st.sv.sets;
        sets.prefetched.fill::<Record>(table, keys, value_len, tx.g);
    }
    #[inline]
    fn put(tx: &mut LTx<'_, P>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<()> {
        write(tx, table, key, Some(val), Op::Put).map(drop)
    }
    #[inline]
    fn insert(tx: &mut LTx<'_, P>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
        write(tx, table, key, Some(val), Op::Insert)
    }
    #[inline]
    fn update(tx: &mut LTx<'_, P>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
        write(tx, table, key, Some(val), Op::Update)
    }
    #[inline]
    fn update_slice(
        tx: &mut LTx<'_, P>,
        table: &Table,
        key: &[u8],
        at: usize,
        bytes: &[u8],
    ) -> TxResult<bool> {
        update_slice(tx, table, key, at, bytes)
    }
    #[inline]
    fn delete(tx: &mut LTx<'_, P>, table: &Table, key: &[u8]) -> TxResult<bool> {
        write(tx, table, key, None, Op::Delete)
    }
    fn scan<F>(
        tx: &mut LTx<'_, P>,
        table: &Table,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool,
    {
        scan(tx, table, lo, hi, opts, f)
    }
    #[inline]
    fn commit(tx: &mut LTx<'_, P>) -> TxResult<()> {
        commit(tx)
    }
    #[inline]
    fn abort(tx: &mut LTx<'_, P>) {
        abort(tx)
    }
    fn maintain(
        _: &Engine,
        _: &mut WorkerCore,
        _: &TwoPlShared,
        _: &mut TwoPlLocal,
        _: &Guard<'_>,
    ) {
    }
    fn retire_local(sh: &TwoPlShared, st: &mut TwoPlLocal) {
        super::sv_retire(&sh.orphans, &mut st.sv)
    }
    fn close(sh: &mut TwoPlShared) {
        sh.orphans.0.get_mut().clear();
    }
    fn read_committed(_: &TwoPlShared, rec: &Record, out: &mut Vec<u8>) -> bool {
        // The latch (not the 2PL lock) orders installs against this read.
        matches!(rec.read(out), ReadOutcome::Ok(tid) if tid & ABSENT == 0)
    }
    fn rebuild(val: &[u8], epoch: u64) -> *mut Record {
        Record::new(val, make_tid(epoch, 1) | LATEST, 0)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::{TwoPlShared, TS_LIMIT};
    use crate::{Database, Options, Protocol};

    /// Wait-die timestamps share a lock word with the reader count: at the
    /// end of their 47 bits a transaction stops with a message instead of
    /// writing a timestamp that reads as the exclusive bit.
    #[test]
    fn wait_die_stops_loudly_at_the_end_of_its_timestamps() {
        let db = Database::open(Options::in_memory().protocol(Protocol::TwoPlWaitDie)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.put(t, b"k", b"v")).unwrap();
        let sh = db
            .inner
            .cc
            .as_any()
            .downcast_ref::<TwoPlShared>()
            .expect("2PL's shared state");
        // The last timestamp that fits: one more transaction runs.
        sh.clock.store(TS_LIMIT - 2, Ordering::Relaxed);
        w.run(|tx| tx.put(t, b"k", b"w")).unwrap();
        let stopped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = w.run(|tx| tx.put(t, b"k", b"x"));
        }));
        let msg = stopped.expect_err("the next timestamp does not fit");
        let msg = msg
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| msg.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(msg.contains("timestamp space"), "{msg}");
    }
}

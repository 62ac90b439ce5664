//! Silo's optimistic concurrency control (Tu et al., SOSP 2013, section 4).
//!
//! *Execution.* Reads use the record read protocol (section 4.5) and remember
//! the TID word they saw in the **read set**; writes are buffered in the
//! **write set**; lookups that miss and range scans remember the index leaves
//! they examined, with their versions, in the **node set** (section 4.6).
//! Inserts put an *absent* record into the index before commit so there is
//! something to lock (section 4.5); deletes are writes of an absent version.
//!
//! *Commit* ([`commit`], Figure 2 of the paper):
//! 1. lock every record of the write set in a global order (record address);
//! 2. read the global epoch `E` once: the serialization point;
//! 3. validate: every read record still has the TID read and is not locked by
//!    another transaction; every node-set leaf has the version seen;
//! 4. choose the TID ([`next_tid`]: larger than every TID read or written and
//!    than the worker's last TID, in epoch `E`; no shared counter), then for
//!    each write: update the record, fence, store the TID releasing the lock.
//!
//! A read-only transaction writes no shared memory at commit: it only
//! validates (and, like Silo, never reads `E` because it needs no TID).
//!
//! *Scan validation* (`Options::scan_validation`): the node set above, or,
//! with `ScanValidation::Reread`, each scan run again at step 3 and required
//! to find the same present rows (the two forms of what Cai et al. call
//! LRV; see [`rescan_validates`]).

use std::ops::Bound;
use std::sync::Arc;

use super::Tx;
use super::{
    own_insert_fixup, remove_if_uncommitted, unlink, NodeEntry, PatchList, PendingUnlink,
    ReadEntry, Rescan, RescanBound, Rescans, TxnSets, WriteEntry, WriteKind, BLIND, STALE_RETRIES,
};
use crate::catalog::Table;
use crate::engine::ScanValidation;
use crate::epoch::Guard;
use crate::error::{ConflictReason, TxError, TxResult};
use crate::index::OrderedIndex;
use crate::index::{Insert, Lookup, Unobserved};
use crate::storage::tid::*;
use crate::storage::{ReadOutcome, Record, Version};
use crate::txn::{check_patch, clamp_slice, ScanOptions};

fn conflict<T>(r: ConflictReason) -> TxResult<T> {
    Err(TxError::Conflict(r))
}

/// Insert a fresh absent record for `key` into the index and add it to the
/// write set. Returns `Err(v)` with the index value if a record for the key
/// exists.
fn create_absent<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> Result<(), u64> {
    let rec = Record::new(&[], ABSENT | LATEST, val.len());
    let ins = table
        .index
        .insert_hinted(key, rec as u64, tx.g, &mut tx.st.sets.hint);
    match ins {
        Insert::Exists(v) => {
            // SAFETY: never published: the insert failed.
            unsafe { Record::free(rec as *mut u8) };
            Err(v)
        }
        Insert::Inserted { .. } => {
            let sets = &mut tx.st.sets;
            own_insert_fixup(sets, &ins);
            let val = sets.stash(val);
            let k = sets.stash(key);
            sets.push_write(WriteEntry {
                key: k,
                observed: ABSENT | LATEST,
                created: true,
                ..WriteEntry::new(rec, table.id, WriteKind::Put, val)
            });
            Ok(())
        }
    }
}

/// Before a write operation reports "no such key" or "key exists", check that
/// what this transaction read so far is still current. Silo, like any OCC,
/// lets a transaction's body see a state that commit-time validation will
/// reject; such answers are most confusing exactly here, where they
/// contradict an earlier read of the same key (a `get` saw the key missing,
/// then `insert` finds it). These paths are rare, so paying for an early
/// validation of the read and node sets on them is cheap; a stale transaction
/// aborts at once with the reason commit would have given.
fn confirm_reads<M: Mode>(sets: &TxnSets) -> TxResult<()> {
    if !M::VALIDATES {
        return Ok(());
    }
    for r in &sets.reads {
        // SAFETY: read while pinned; reclaimed only through the epoch.
        if unsafe { &*r.rec }.tid_word() & !LOCK != r.tid {
            return conflict(ConflictReason::ReadValidation);
        }
    }
    for n in &sets.nodes {
        if n.leaf.version() != n.version {
            return conflict(ConflictReason::NodeValidation);
        }
    }
    Ok(())
}

/// Replace the value of an existing write-set entry.
fn rewrite(sets: &mut TxnSets, i: usize, kind: WriteKind, val: &[u8]) {
    let v = sets.stash(val);
    let w = &mut sets.writes[i];
    w.kind = kind;
    w.val = v;
}

/// Where a read's value lives.
enum Found {
    None,
    /// In the read buffer, from this offset on (a column read's words
    /// start at the word holding its first byte).
    ReadBuf(usize),
    Own((u32, u32)),
}

/// The index lookup of a read: on the first attempt, the record a
/// `prefetch` found for `key` if there is one (a record unlinked since reads
/// as `NotLatest`, and the next attempt descends the index).
#[inline(always)]
fn find_record<M: Mode>(tx: &mut STx<'_, M>, table: &Table, key: &[u8], attempt: usize) -> Lookup {
    if attempt == 0 {
        if let Some(rec) = tx.st.sets.prefetched.find(table.id, key) {
            return Lookup::Found(rec as u64);
        }
    }
    table.index.get(key, tx.g)
}

/// `Txn::get` under Silo.
pub(crate) fn get<'t, M: Mode>(
    tx: &'t mut STx<'_, M>,
    table: &Table,
    key: &[u8],
) -> TxResult<Option<&'t [u8]>> {
    let found = get_inner(tx, table, key, None)?;
    let sets = &tx.st.sets;
    Ok(match found {
        Found::None => None,
        Found::ReadBuf(_) => Some(&sets.rbuf),
        Found::Own(r) => Some(sets.stashed(r)),
    })
}

/// `Txn::get_slice` under Silo: the read of [`get`] (the record's TID goes
/// into the read set), copying only the words that hold bytes
/// `start..end`.
pub(crate) fn get_slice<'t, M: Mode>(
    tx: &'t mut STx<'_, M>,
    table: &Table,
    key: &[u8],
    start: usize,
    end: usize,
) -> TxResult<Option<&'t [u8]>> {
    let found = get_inner(tx, table, key, Some((start, end)))?;
    let sets = &tx.st.sets;
    Ok(match found {
        Found::None => None,
        Found::ReadBuf(skip) => Some(&sets.rbuf[skip..]),
        Found::Own(r) => Some(clamp_slice(sets.stashed(r), start, end)),
    })
}

/// `Txn::get_many` under Silo: the keys are looked up 16 at a time with one
/// batched descent, the records found are prefetched, then each is read
/// as `get_slice` reads it (TID into the read set), with no memo between
/// the lookup and the read. A key the batch did not find (absent, or its
/// descent met a change), a record this transaction wrote, or one
/// unlinked since the lookup goes through `get_slice`'s own path.
pub(crate) fn get_many<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    keys: &[&[u8]],
    start: usize,
    end: usize,
    f: &mut dyn FnMut(usize, Option<&[u8]>),
) -> TxResult<()> {
    let g = tx.g;
    super::for_each_found::<Record>(table, keys, end, g, |i, key, rec| {
        let sets = &mut tx.st.sets;
        let mut direct = None;
        if !rec.is_null() && TxnSets::find_write(&sets.writes, &sets.windex, rec).is_none() {
            sets.rbuf.clear();
            // SAFETY: found through the index while pinned.
            let rec_ref = unsafe { &*rec };
            // ROCC: a dirty record (`None`) goes through `get_slice`, which
            // aborts.
            let read = read_row::<M>(rec_ref, Some((start, end)), &mut sets.rbuf);
            if let Some((ReadOutcome::Ok(tid), skip)) = read {
                sets.reads.push(ReadEntry { rec, tid });
                direct = Some((tid & ABSENT == 0).then_some(skip));
            }
        }
        match direct {
            Some(Some(skip)) => f(i, Some(&tx.st.sets.rbuf[skip..])),
            // Absent since the lookup: a committed delete whose record is
            // still linked (its TID is in the read set).
            Some(None) => f(i, None),
            None => f(i, get_slice(tx, table, key, start, end)?),
        }
        Ok(())
    })
}

/// The lookup and read of `get` (the whole value, or bytes `slice` of it,
/// into `rbuf`).
#[inline(always)]
fn get_inner<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    key: &[u8],
    slice: Option<(usize, usize)>,
) -> TxResult<Found> {
    for attempt in 0..STALE_RETRIES {
        match find_record(tx, table, key, attempt) {
            Lookup::Missing { leaf, version } => {
                tx.st.sets.nodes.push(NodeEntry { leaf, version });
                return Ok(Found::None);
            }
            Lookup::Found(v) => {
                let rec = v as *const Record;
                let sets = &mut tx.st.sets;
                if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
                    let w = sets.writes[i];
                    return match w.kind {
                        WriteKind::Put => Ok(Found::Own(w.val)),
                        WriteKind::Delete => Ok(Found::None),
                        WriteKind::Patch => {
                            let TxnSets { wbuf, rbuf, .. } = sets;
                            let list =
                                PatchList(&wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize]);
                            // SAFETY: reached through the index while pinned.
                            if !read_patched(unsafe { &*rec }, list, rbuf) {
                                return conflict(ConflictReason::ReadValidation);
                            }
                            let skip = match slice {
                                None => 0,
                                Some((s, e)) => {
                                    let e = e.min(rbuf.len());
                                    rbuf.truncate(e);
                                    s.min(e)
                                }
                            };
                            Ok(Found::ReadBuf(skip))
                        }
                    };
                }
                sets.rbuf.clear();
                // SAFETY: reached through the index while pinned.
                let rec_ref = unsafe { &*rec };
                let Some((outcome, skip)) = read_row::<M>(rec_ref, slice, &mut sets.rbuf) else {
                    return conflict(ConflictReason::DirtyRead);
                };
                match outcome {
                    ReadOutcome::NotLatest => continue,
                    ReadOutcome::Ok(tid) => {
                        sets.reads.push(ReadEntry { rec, tid });
                        sets.last.set(table.id, key, rec, tid);
                        return Ok(if tid & ABSENT != 0 {
                            Found::None
                        } else {
                            Found::ReadBuf(skip)
                        });
                    }
                }
            }
        }
    }
    conflict(ConflictReason::Stale)
}

/// `Txn::put` under Silo: a blind upsert.
pub(crate) fn put<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<()> {
    // The log names every written record by its key.
    let logging = tx.db.log.is_some() || M::KEEP_KEYS;
    for attempt in 0..STALE_RETRIES {
        // A put right after a `get` of the same key reuses its lookup.
        // (A record a prefetch found and that was unlinked since fails
        // commit's check that it is still the latest: `Stale`.)
        let lookup = match tx.st.sets.last.matches(table.id, key) {
            Some((rec, _)) if attempt == 0 => Lookup::Found(rec as u64),
            _ => find_record(tx, table, key, attempt),
        };
        match lookup {
            Lookup::Found(v) => {
                let rec = v as *const Record;
                let sets = &mut tx.st.sets;
                if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
                    rewrite(sets, i, WriteKind::Put, val);
                    return Ok(());
                }
                let val = sets.stash(val);
                let key = if logging { sets.stash(key) } else { (0, 0) };
                sets.push_write(WriteEntry {
                    key,
                    ..WriteEntry::new(rec, table.id, WriteKind::Put, val)
                });
                return Ok(());
            }
            Lookup::Missing { .. } => {
                if create_absent(tx, table, key, val).is_ok() {
                    return Ok(());
                }
            }
        }
    }
    conflict(ConflictReason::InsertRace)
}

/// `Txn::insert` under Silo: insert if absent.
pub(crate) fn insert<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<bool> {
    for _ in 0..STALE_RETRIES {
        // Inserts usually find no key: try the index insert first, so that
        // the common case descends the tree once.
        let lookup = match create_absent(tx, table, key, val) {
            Ok(()) => return Ok(true),
            Err(v) => Lookup::Found(v),
        };
        match lookup {
            Lookup::Found(v) => {
                let rec = v as *const Record;
                let sets = &mut tx.st.sets;
                if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
                    if sets.writes[i].kind != WriteKind::Delete {
                        return Ok(false);
                    }
                    rewrite(sets, i, WriteKind::Put, val);
                    return Ok(true);
                }
                sets.rbuf.clear();
                // SAFETY: reached through the index while pinned.
                match unsafe { &*rec }.read(&mut sets.rbuf) {
                    ReadOutcome::NotLatest => continue,
                    ReadOutcome::Ok(tid) if tid & ABSENT == 0 => {
                        sets.reads.push(ReadEntry { rec, tid });
                        confirm_reads::<M>(sets)?;
                        return Ok(false);
                    }
                    ReadOutcome::Ok(tid) => {
                        // An absent record (deleted, or another transaction's
                        // pending insert): reuse it; commit checks it is
                        // still absent with this TID.
                        let val = sets.stash(val);
                        let k = sets.stash(key);
                        sets.push_write(WriteEntry {
                            key: k,
                            observed: tid,
                            ..WriteEntry::new(rec, table.id, WriteKind::Put, val)
                        });
                        return Ok(true);
                    }
                }
            }
            // Not reached: `lookup` is `Found`.
            Lookup::Missing { .. } => {}
        }
    }
    conflict(ConflictReason::InsertRace)
}

/// Read the record for `key` into the read set for a conditional write;
/// returns the record and the TID word read if present (`Err(None)` if
/// absent or missing, `Err(Some(i))` if write-set entry `i` has it).
fn read_for_write<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    key: &[u8],
) -> TxResult<Result<(*const Record, u64), Option<usize>>> {
    // A write right after a `get` of the same key: the record and the TID
    // observed are known (and in the read set already).
    let sets = &mut tx.st.sets;
    if let Some((rec, tid)) = sets.last.matches(table.id, key) {
        if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
            return Ok(Err(Some(i)));
        }
        return Ok(if tid & ABSENT == 0 {
            Ok((rec, tid))
        } else {
            Err(None)
        });
    }
    for attempt in 0..STALE_RETRIES {
        match find_record(tx, table, key, attempt) {
            Lookup::Missing { leaf, version } => {
                tx.st.sets.nodes.push(NodeEntry { leaf, version });
                return Ok(Err(None));
            }
            Lookup::Found(v) => {
                let rec = v as *const Record;
                let sets = &mut tx.st.sets;
                if let Some(i) = TxnSets::find_write(&sets.writes, &sets.windex, rec) {
                    return Ok(Err(Some(i)));
                }
                sets.rbuf.clear();
                // SAFETY: reached through the index while pinned.
                match unsafe { &*rec }.read(&mut sets.rbuf) {
                    ReadOutcome::NotLatest => continue,
                    ReadOutcome::Ok(tid) => {
                        sets.reads.push(ReadEntry { rec, tid });
                        return Ok(if tid & ABSENT == 0 {
                            Ok((rec, tid))
                        } else {
                            Err(None)
                        });
                    }
                }
            }
        }
    }
    conflict(ConflictReason::Stale)
}

/// The `observed` word of a write of `rec`, which `read_for_write` read
/// at TID word `tid`: under the validating protocols, `tid` itself, so that
/// commit checks it when it locks the record (Silo's phase 1) and aborts if
/// the row changed since the read. The read set's entry for that read is
/// then redundant, and is dropped when it is the last one (the common case:
/// a write right after its read). Phase 2 would re-read the TID word of a
/// record this transaction has held locked since phase 1 checked that very
/// word; it would pass, after a binary search of the write set to tell the
/// lock for its own. Read committed validates nothing: its writes stay
/// blind.
#[inline]
fn observed_by_write<M: Mode>(sets: &mut TxnSets, rec: *const Record, tid: u64) -> u64 {
    if !M::VALIDATES {
        return BLIND;
    }
    drop_last_read(sets, rec, tid);
    tid
}

/// Drop the read set's last entry if it is `rec` read at `tid` (see
/// [`observed_by_write`]; the caller's write checks `tid` at commit).
#[inline]
fn drop_last_read(sets: &mut TxnSets, rec: *const Record, tid: u64) {
    if sets
        .reads
        .last()
        .is_some_and(|r| std::ptr::eq(r.rec, rec) && r.tid == tid)
    {
        sets.reads.pop();
    }
}

/// `Txn::update` under Silo: overwrite if present.
pub(crate) fn update<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    key: &[u8],
    val: &[u8],
) -> TxResult<bool> {
    match read_for_write(tx, table, key)? {
        Ok((rec, tid)) => {
            let logging = tx.db.log.is_some() || M::KEEP_KEYS;
            let sets = &mut tx.st.sets;
            let observed = observed_by_write::<M>(sets, rec, tid);
            let val = sets.stash(val);
            let key = if logging { sets.stash(key) } else { (0, 0) };
            sets.push_write(WriteEntry {
                key,
                observed,
                ..WriteEntry::new(rec, table.id, WriteKind::Put, val)
            });
            Ok(true)
        }
        Err(Some(i)) => {
            let sets = &mut tx.st.sets;
            if sets.writes[i].kind == WriteKind::Delete {
                return Ok(false);
            }
            rewrite(sets, i, WriteKind::Put, val);
            Ok(true)
        }
        Err(None) => {
            confirm_reads::<M>(&tx.st.sets)?;
            Ok(false)
        }
    }
}

/// `Txn::update_slice` under Silo: the read of `update`, then only the
/// bytes go into the write set (a [`WriteKind::Patch`] entry), and commit
/// writes them into the record in place. Isolation is `update`'s: the row's
/// TID is in the read set, so a concurrent write of any byte of it aborts
/// this transaction, and the bytes kept are those this transaction read.
pub(crate) fn update_slice<M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    key: &[u8],
    at: usize,
    bytes: &[u8],
) -> TxResult<bool> {
    match read_for_write(tx, table, key)? {
        Ok((rec, tid)) => {
            // SAFETY: reached through the index while pinned.
            let (now, len) = unsafe { &*rec }.value_len();
            let tid = if now == tid {
                tid
            } else if !M::VALIDATES && now & (ABSENT | LATEST) == LATEST {
                // Read committed: the patch goes onto the row committed
                // now, checked against its length.
                now
            } else {
                // Changed since this transaction read it: validation would
                // fail, and the length may not be the one read.
                return conflict(ConflictReason::ReadValidation);
            };
            check_patch(len, at, bytes.len())?;
            let logging = tx.db.log.is_some() || M::KEEP_KEYS;
            let sets = &mut tx.st.sets;
            if M::VALIDATES {
                // The lock phase checks `tid` (below): the read's entry is
                // redundant (see `observed_by_write`).
                drop_last_read(sets, rec, tid);
            }
            let val = sets.stash_patch(len, at, bytes);
            let key = if logging { sets.stash(key) } else { (0, 0) };
            // The lock phase checks the TID too: the patch goes onto the
            // very version whose length it was checked against.
            sets.push_write(WriteEntry {
                key,
                observed: tid,
                ..WriteEntry::new(rec, table.id, WriteKind::Patch, val)
            });
            Ok(true)
        }
        Err(Some(i)) => {
            let sets = &mut tx.st.sets;
            match sets.writes[i].kind {
                WriteKind::Delete => Ok(false),
                WriteKind::Put => {
                    let (off, len) = sets.writes[i].val;
                    check_patch(len as usize, at, bytes.len())?;
                    let at = off as usize + at;
                    sets.wbuf[at..at + bytes.len()].copy_from_slice(bytes);
                    Ok(true)
                }
                WriteKind::Patch => sets.extend_patch(i, at, bytes).map(|()| true),
            }
        }
        Err(None) => {
            confirm_reads::<M>(&tx.st.sets)?;
            Ok(false)
        }
    }
}

/// The committed value of `rec` with write-set entry `w`'s patch list
/// applied, into `out` (replacing its contents), for a read of a row this
/// transaction wrote columns of. `false` if the record is no longer the
/// latest (unlinked after a delete: commit will abort this transaction).
fn read_patched(rec: &Record, list: PatchList<'_>, out: &mut Vec<u8>) -> bool {
    out.clear();
    match rec.read(out) {
        ReadOutcome::Ok(tid) if tid & ABSENT == 0 && out.len() == list.row_len() => {
            list.apply(out);
            true
        }
        // Deleted, or rewritten with another length, since this transaction
        // read it: its validation fails at commit.
        _ => false,
    }
}

/// `Txn::delete` under Silo: mark absent at commit (section 4.5).
pub(crate) fn delete<M: Mode>(tx: &mut STx<'_, M>, table: &Table, key: &[u8]) -> TxResult<bool> {
    match read_for_write(tx, table, key)? {
        Ok((rec, tid)) => {
            let sets = &mut tx.st.sets;
            let observed = observed_by_write::<M>(sets, rec, tid);
            let k = sets.stash(key);
            sets.push_write(WriteEntry {
                key: k,
                observed,
                ..WriteEntry::new(rec, table.id, WriteKind::Delete, (0, 0))
            });
            Ok(true)
        }
        Err(Some(i)) => {
            let sets = &mut tx.st.sets;
            if sets.writes[i].kind == WriteKind::Delete {
                return Ok(false);
            }
            if sets.writes[i].key.1 == 0 {
                sets.writes[i].key = sets.stash(key);
            }
            sets.writes[i].kind = WriteKind::Delete;
            Ok(true)
        }
        Err(None) => {
            confirm_reads::<M>(&tx.st.sets)?;
            Ok(false)
        }
    }
}

/// `Txn::scan` under Silo: every leaf examined goes into the node set, every
/// record read into the read set.
pub(crate) fn scan<F, M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    f: F,
) -> TxResult<usize>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    if M::RANGE_PREDICATES {
        return M::scan_hook(tx, table, lo, hi, opts, f);
    }
    scan_rows::<F, M>(tx, table, lo, hi, opts, f, &mut Vec::new()).map(|(n, _)| n)
}

/// Read a record for a transaction under `M`, the whole value or bytes
/// `slice` of it (as `Record::read_slice`), inlined. Under ROCC
/// (`M::DIRTY_ABORT`) a locked record is a dirty read, `None`, tested on the
/// read's own load of the TID word; the other protocols wait the lock out.
#[inline(always)]
fn read_row<M: Mode>(
    rec: &Record,
    slice: Option<(usize, usize)>,
    out: &mut Vec<u8>,
) -> Option<(ReadOutcome, usize)> {
    match (slice, M::DIRTY_ABORT) {
        (None, true) => rec.read_as::<true>(out).map(|o| (o, 0)),
        (None, false) => rec.read_as::<false>(out).map(|o| (o, 0)),
        (Some((s, e)), true) => rec.read_slice_as::<true>(s, e, out),
        (Some((s, e)), false) => rec.read_slice_as::<false>(s, e, out),
    }
}

/// The rows of a scan, read as [`scan`] reads them; a protocol with range
/// predicates (ROCC) calls it once per part of its scan (a run of logical
/// ranges whose predicates it has constructed), and it then records neither
/// the rows nor the leaves. Returns how many rows `f` got and whether the
/// scan stopped before `hi` (`f` said so, or the limit was reached); under
/// range predicates the key it stopped at is then in `stop_key` (untouched
/// otherwise, and under the other protocols).
#[inline]
pub(crate) fn scan_rows<F, M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    f: F,
    stop_key: &mut Vec<u8>,
) -> TxResult<(usize, bool)>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    // Two instances, so that the whole-value scan's per-row code stays as
    // small as it was (and inlined into the leaf walk).
    match opts.slice {
        None => scan_with::<false, F, M>(tx, table, (lo, hi), opts, (0, 0), f, stop_key),
        Some(at) => scan_with::<true, F, M>(tx, table, (lo, hi), opts, at, f, stop_key),
    }
}

/// [`scan`], reading bytes `at` of each value when `SLICE`.
#[inline(always)]
fn scan_with<const SLICE: bool, F, M: Mode>(
    tx: &mut STx<'_, M>,
    table: &Table,
    (lo, hi): (Bound<&[u8]>, Bound<&[u8]>),
    opts: ScanOptions,
    (start, end): (usize, usize),
    mut f: F,
    stop_key: &mut Vec<u8>,
) -> TxResult<(usize, bool)>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let limit = opts.limit.unwrap_or(usize::MAX);
    let mut count = 0usize;
    let mut stopped = false;
    // Under range predicates, the row the scan stopped at bounds the last
    // predicate's scope (once per scan, not per row).
    let mut stop_here = |k: &[u8], go: bool| {
        if M::RANGE_PREDICATES && !go {
            stop_key.clear();
            stop_key.extend_from_slice(k);
            stopped = true;
        }
        go
    };
    let reread = M::VALIDATES
        && !M::RANGE_PREDICATES
        && tx.db.opts.scan_validation == ScanValidation::Reread;
    let TxnSets {
        reads,
        writes,
        nodes,
        wbuf,
        rbuf,
        windex,
        last,
        rescans,
        ..
    } = &mut tx.st.sets;
    last.scan_begins();
    let mut dirty = false;
    let row = |k: &[u8], v: u64| {
        let rec = v as *const Record;
        if let Some(i) = TxnSets::find_write(writes, windex, rec) {
            let w = writes[i];
            if w.kind == WriteKind::Delete {
                return true;
            }
            let mut val = &wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize];
            if w.kind == WriteKind::Patch {
                // SAFETY: reached through the index while pinned.
                if !read_patched(unsafe { &*rec }, PatchList(val), rbuf) {
                    // Deleted since this transaction read it: the read
                    // set's entry fails validation at commit.
                    return true;
                }
                val = &rbuf[..];
            }
            count += 1;
            let val = if SLICE {
                clamp_slice(val, start, end)
            } else {
                val
            };
            let go = f(k, val) && count < limit;
            return stop_here(k, go);
        }
        rbuf.clear();
        // SAFETY: reached through the index while pinned.
        let rec_ref = unsafe { &*rec };
        let Some((outcome, skip)) = read_row::<M>(rec_ref, SLICE.then_some((start, end)), rbuf)
        else {
            dirty = true;
            return false;
        };
        match outcome {
            // Unlinked under us: its removal changed the leaf version, so
            // node-set validation will abort this transaction (under ROCC
            // the deleter registered in the range, so the predicate's
            // validation does).
            ReadOutcome::NotLatest => true,
            ReadOutcome::Ok(tid) => {
                if !M::RANGE_PREDICATES {
                    reads.push(ReadEntry { rec, tid });
                }
                if tid & ABSENT != 0 {
                    return true;
                }
                last.scanned(table.id, k, rec, tid);
                count += 1;
                let go = f(k, &rbuf[skip..]) && count < limit;
                stop_here(k, go)
            }
        }
    };
    if M::RANGE_PREDICATES {
        // The protocol's predicates cover the range, not the leaves.
        table
            .index
            .scan(lo, hi, opts.reverse, tx.g, Unobserved, row);
    } else if reread {
        // LRV by a repeated scan: no node set; keep the bounds and the
        // present records, to be found again at commit.
        let mut row = row;
        let first = rescans.recs.len() as u32;
        let mut stop: Option<(u32, u32)> = None;
        let Rescans { recs, keys, .. } = &mut *rescans;
        table
            .index
            .scan(lo, hi, opts.reverse, tx.g, Unobserved, |k, v| {
                let go = row(k, v);
                let rec = v as *const Record;
                // SAFETY: reached through the index while pinned.
                if present(unsafe { &*rec }.tid_word()) {
                    recs.push(rec);
                }
                if !go {
                    stop = Some((keys.len() as u32, k.len() as u32));
                    keys.extend_from_slice(k);
                }
                go
            });
        // A scan that stopped early is repeated up to its last row.
        let (lo, hi) = match stop {
            None => (rescans.bound(lo), rescans.bound(hi)),
            Some((a, n)) if opts.reverse => (RescanBound::Included(a, n), rescans.bound(hi)),
            Some((a, n)) => (rescans.bound(lo), RescanBound::Included(a, n)),
        };
        let end = rescans.recs.len() as u32;
        rescans.scans.push(Rescan {
            table: table.id,
            lo,
            hi,
            reverse: opts.reverse,
            recs: (first, end),
        });
    } else {
        table
            .index
            .scan(lo, hi, opts.reverse, tx.g, &mut *nodes, row);
    }
    if dirty {
        return conflict(ConflictReason::DirtyRead);
    }
    Ok((count, stopped))
}

/// A record whose TID word says it holds a committed row (under
/// `ScanValidation::Reread`, the rows a repeated scan must find again).
#[inline]
fn present(tid: u64) -> bool {
    tid & (ABSENT | LATEST) == LATEST
}

/// `ScanValidation::Reread`: run every scan of the transaction again and
/// check that it finds the same present records in the same order. Called
/// after the write set is locked and the epoch read (the serialization
/// point), as the node set is checked. The scanned rows' TIDs are in the
/// read set, so a row changed in place fails there; here fail the keys
/// inserted into the range and committed (a record that was not there, or
/// a record present now that was absent), the rows deleted and unlinked,
/// and any row that another transaction holds locked to install (as a
/// locked read-set record fails). The transaction's own writes do not
/// count as locks: their records are locked by it, and are judged by their
/// committed state as at the first scan. That state can change in between
/// only under a blind write (`put` into a record someone else then
/// committed into), and then the scan aborts: conservative, never unsafe.
fn rescan_validates(sets: &TxnSets, tables: &[Arc<Table>], g: &Guard<'_>) -> bool {
    let mine = |rec: *const Record| {
        sets.writes
            .binary_search_by_key(&(rec as usize), |w| w.rec as usize)
            .is_ok()
    };
    let rs = &sets.rescans;
    for s in &rs.scans {
        let want = &rs.recs[s.recs.0 as usize..s.recs.1 as usize];
        let mut found = 0usize;
        let mut same = true;
        let table = &tables[s.table.0 as usize];
        let (lo, hi) = (rs.get(s.lo), rs.get(s.hi));
        table.index.scan(lo, hi, s.reverse, g, Unobserved, |_, v| {
            let rec = v as *const Record;
            // SAFETY: reached through the index while pinned.
            let tid = unsafe { &*rec }.tid_word();
            if tid & LOCK != 0 && !mine(rec) {
                same = false;
            } else if present(tid) {
                same = want.get(found) == Some(&rec);
                found += 1;
            }
            same
        });
        if !same || found != want.len() {
            return false;
        }
    }
    true
}

/// Release the locks of the first `n` (sorted) write-set entries.
fn unlock_first(sets: &TxnSets, n: usize) {
    for w in &sets.writes[..n] {
        // SAFETY: locked by us, still linked or at least not reclaimed (pinned).
        unsafe { &*w.rec }.unlock();
    }
}

/// Silo's commit protocol. On failure it cleans up (see [`abort`]).
pub(crate) fn commit<M: Mode>(tx: &mut STx<'_, M>) -> TxResult<()> {
    match validate_and_install(tx) {
        Ok(()) => {
            M::finish(tx, true);
            Ok(())
        }
        Err(e) => {
            M::finish(tx, false);
            abort(tx);
            Err(e)
        }
    }
}

fn validate_and_install<M: Mode>(tx: &mut STx<'_, M>) -> TxResult<()> {
    let db = tx.db;
    let epochs = &db.epochs;
    let sets = &mut tx.st.sets;

    if sets.writes.is_empty() {
        // Read-only: validation only, no shared-memory writes.
        let mut seen = 0;
        for r in &sets.reads {
            // SAFETY: read while pinned; reclaimed only through the epoch.
            let cur = unsafe { &*r.rec }.tid_word();
            if M::VALIDATES && cur != r.tid {
                return conflict(ConflictReason::ReadValidation);
            }
            seen = seen.max(r.tid & TID_MASK);
        }
        // Durable mode: what this transaction saw is durable once the
        // newest epoch it read is (Silo 4.10 withholds results until then).
        // A key found missing may have been deleted (and unlinked) in an
        // epoch that is not durable yet: then the current epoch, which every
        // such delete's epoch is at or below, bounds it.
        tx.core.log.ack = if sets.nodes.is_empty() && sets.rescans.is_empty() {
            epoch_of(seen)
        } else {
            tx.db.epochs.global()
        };
        if M::VALIDATES {
            for n in &sets.nodes {
                if n.leaf.version() != n.version {
                    return conflict(ConflictReason::NodeValidation);
                }
            }
            if !sets.rescans.is_empty() && !rescan_validates(sets, &tx.core.tables, tx.g) {
                return conflict(ConflictReason::ScanReread);
            }
        }
        if M::RANGE_PREDICATES && M::has_predicates(tx) {
            // Scanned rows are not in the read set: bound the result's
            // durability as a missed key's is.
            tx.core.log.ack = db.epochs.global();
            M::validate_more(tx).or_else(conflict)?;
        }
        return Ok(());
    }

    if M::RANGE_PREDICATES {
        // ROCC: the written tables' ranges, before any lock is held (a
        // table's first use walks it).
        M::before_lock(tx);
    }
    let sets = &mut tx.st.sets;
    // Phase 1: lock the write set in a global order (record addresses).
    sets.sort_writes();
    let mut max_seen = 0u64;
    for i in 0..sets.writes.len() {
        let w = &mut sets.writes[i];
        // SAFETY: the record was reached through the index while pinned.
        let rec = unsafe { &*w.rec };
        let old = rec.lock();
        w.locked_tid = old;
        let reason = if old & LATEST == 0 {
            Some(ConflictReason::Stale)
        } else if w.observed != BLIND
            && old != w.observed
            && !M::patch_fits(w, rec, old, &sets.wbuf)
        {
            Some(ConflictReason::ReadValidation)
        } else {
            None
        };
        if let Some(r) = reason {
            unlock_first(sets, i + 1);
            return conflict(r);
        }
        max_seen = max_seen.max(old & TID_MASK);
    }
    // ROCC: register in the written ranges and draw the commit stamp.
    if M::RANGE_PREDICATES {
        M::after_lock(tx);
    }
    let sets = &mut tx.st.sets;

    // Durable mode: announce a coming log entry before reading its epoch
    // (see the `log` module).
    if let Some(log) = &tx.db.log {
        log.announce(tx.core.slot, &mut tx.core.log);
    }
    // The serialization point: one read of the global epoch, after all locks
    // are held (the lock CASes are Acquire, so this load cannot move earlier).
    let e = epochs.global();

    // Phase 2: validate the read set and the node set (read committed
    // skips it: any committed value read is acceptable).
    let mut failed = None;
    let reads = if M::VALIDATES { &sets.reads[..] } else { &[] };
    for r in reads {
        // SAFETY: as above.
        let cur = unsafe { &*r.rec }.tid_word();
        if cur & !LOCK != r.tid
            || (cur & LOCK != 0
                && sets
                    .writes
                    .binary_search_by_key(&(r.rec as usize), |w| w.rec as usize)
                    .is_err())
        {
            failed = Some(ConflictReason::ReadValidation);
            break;
        }
        max_seen = max_seen.max(r.tid & TID_MASK);
    }
    if failed.is_none() && M::VALIDATES {
        for n in &sets.nodes {
            if n.leaf.version() != n.version {
                failed = Some(ConflictReason::NodeValidation);
                break;
            }
        }
        if failed.is_none()
            && !sets.rescans.is_empty()
            && !rescan_validates(sets, &tx.core.tables, tx.g)
        {
            failed = Some(ConflictReason::ScanReread);
        }
    }
    if failed.is_none() && M::RANGE_PREDICATES {
        failed = M::validate_more(tx).err();
    }
    let sets = &mut tx.st.sets;
    if let Some(r) = failed {
        unlock_first(sets, sets.writes.len());
        return conflict(r);
    }

    // Phase 3: TID, then install and unlock.
    let tid = next_tid(max_seen, tx.st.last_tid, e);
    tx.st.last_tid = tid;
    // The redo entry (Silo 4.10: record-level, the TID orders it), built
    // before the install so an overwrite can be logged as the bytes it
    // changes (the old value is still in place, under our lock).
    if let Some(log) = &tx.db.log {
        let (writes, wbuf, old) = (&sets.writes, &sets.wbuf, &mut sets.rbuf);
        let new = &mut tx.core.scratch;
        log.append(tx.core.slot, &mut tx.core.log, e, tid, |redo| {
            for w in writes {
                let key = &wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize];
                if w.kind == WriteKind::Delete {
                    redo.delete(w.table, key);
                    continue;
                }
                let val = &wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize];
                if w.kind == WriteKind::Patch {
                    // Logged as the bytes that change, like an overwrite:
                    // the old row is in place under our lock.
                    old.clear();
                    // SAFETY: locked by us, so the newest version is stable;
                    // pinned, so it is not reclaimed.
                    unsafe { Version::read_into((*w.rec).newest(), old) };
                    new.clear();
                    new.extend_from_slice(old);
                    PatchList(val).apply(new);
                    redo.patch(w.table, key, old, new);
                } else if w.created || w.locked_tid & ABSENT != 0 {
                    redo.put(w.table, key, val);
                } else {
                    old.clear();
                    // SAFETY: locked by us, so the newest version is stable;
                    // pinned, so it is not reclaimed.
                    unsafe { Version::read_into((*w.rec).newest(), old) };
                    redo.patch(w.table, key, old, val);
                }
            }
        });
    }
    let snapshots = tx.db.opts.snapshots;
    let keep = snapshots.then(|| (epochs.snapshot_k(), epochs.snapshot_min()));
    for w in &sets.writes {
        // SAFETY: locked by us.
        let rec = unsafe { &*w.rec };
        match w.kind {
            WriteKind::Put => {
                let val = &sets.wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize];
                rec.install(w.locked_tid, Some(val), tid | LATEST, keep, tx.g);
            }
            WriteKind::Delete => {
                rec.install(w.locked_tid, None, tid | LATEST | ABSENT, keep, tx.g);
            }
            WriteKind::Patch => {
                let list = PatchList(&sets.wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize]);
                if keep.is_some() {
                    // Snapshots may need the old version kept: install a
                    // whole new row (the old one with the patches).
                    let row = &mut tx.core.scratch;
                    row.clear();
                    // SAFETY: locked by us, so the newest version is
                    // stable; pinned, so it is not reclaimed.
                    unsafe { Version::read_into(rec.newest(), row) };
                    list.apply(row);
                    rec.install(w.locked_tid, Some(row), tid | LATEST, keep, tx.g);
                } else {
                    rec.install_parts(list.segments(), tid | LATEST);
                }
            }
        }
    }

    // Deleted records leave the index only now, with every lock released:
    // `unlink` takes the record's lock again, and taking it while still
    // holding later write-set locks (out of the global order) deadlocked two
    // Deliveries under TPC-C.
    let dtid = tid | LATEST | ABSENT;
    for w in sets.writes.iter().filter(|w| w.kind == WriteKind::Delete) {
        let key = &sets.wbuf[w.key.0 as usize..(w.key.0 + w.key.1) as usize];
        if snapshots {
            tx.st.pending_unlinks.push_back(PendingUnlink {
                table: w.table,
                key: key.into(),
                rec: w.rec,
                tid: dtid,
            });
        } else {
            let t = &tx.core.tables[w.table.0 as usize];
            unlink(t, tx.g, key, w.rec, dtid);
        }
    }
    Ok(())
}

/// Abort: remove the absent records this transaction inserted, unless some
/// other transaction has since committed into them.
///
/// A retried insert must not split its leaf again, or node-set validation
/// could fail on every retry (a livelock we observed with four threads racing
/// to append: the index used to split a full leaf at the insertion point, so
/// the new key sat alone in a new leaf that its removal unlinked again). The
/// index now never gives the new key a leaf of its own (see
/// `BTree::split_leaf` and the test `retried_insert_does_not_split_again`),
/// so removing the key here leaves the retry room to insert without a split.
pub(crate) fn abort<M: Mode>(tx: &mut STx<'_, M>) {
    M::aborted(tx);
    let sets = &tx.st.sets;
    for w in sets.writes.iter().filter(|w| w.created) {
        remove_if_uncommitted(
            tx.core.tables[w.table.0 as usize].as_ref(),
            sets.stashed(w.key),
            w.rec,
            tx.g,
        );
    }
}

/// What distinguishes the protocols built on this module's code.
pub(crate) trait Mode: super::CcProtocol<Local = super::SvLocal, Rec = Record> {
    /// Commit validates the read and node sets (serializable), or does not
    /// (read committed).
    const VALIDATES: bool;
    /// Every write keeps its key (ROCC registers written keys), not only
    /// when logging.
    const KEEP_KEYS: bool = false;
    /// A read that meets a record locked by a committing writer aborts
    /// (ROCC, section 3.3.3) instead of waiting for the install.
    const DIRTY_ABORT: bool = false;
    /// Scans are validated through range predicates ([`Mode::scan_hook`],
    /// [`Mode::after_lock`], [`Mode::validate_more`]), not the read and
    /// node sets.
    const RANGE_PREDICATES: bool = false;

    /// The scan of a protocol with range predicates.
    fn scan_hook<F>(
        _tx: &mut STx<'_, Self>,
        _table: &Table,
        _lo: Bound<&[u8]>,
        _hi: Bound<&[u8]>,
        _opts: ScanOptions,
        _f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool,
    {
        unreachable!("only protocols with range predicates scan through the hook")
    }
    /// Before the write set is locked.
    fn before_lock(_tx: &mut STx<'_, Self>) {}
    /// After the write set is locked, before the serialization point.
    fn after_lock(_tx: &mut STx<'_, Self>) {}
    /// Validation beyond the read and node sets.
    fn validate_more(_tx: &mut STx<'_, Self>) -> Result<(), ConflictReason> {
        Ok(())
    }
    /// Whether the transaction holds range predicates.
    fn has_predicates(_tx: &STx<'_, Self>) -> bool {
        false
    }
    /// The commit ended (`committed` or rolled back).
    #[inline(always)]
    fn finish(_tx: &mut STx<'_, Self>, _committed: bool) {}
    /// The transaction was rolled back (after a failed commit too).
    #[inline(always)]
    fn aborted(_tx: &mut STx<'_, Self>) {}

    /// Commit found `old` in a record of the write set where `w` expected
    /// `w.observed`: may it install anyway? Silo: never (the write was
    /// conditional on what it saw).
    #[inline(always)]
    fn patch_fits(_w: &WriteEntry, _rec: &Record, _old: u64, _wbuf: &[u8]) -> bool {
        false
    }
}

/// Silo's OCC (Tu et al., SOSP 2013).
pub(crate) struct Silo;

impl Mode for Silo {
    const VALIDATES: bool = true;
}

/// The read-committed OCC baseline of Faleiro's PWV evaluation (thesis
/// section 6.5.1): Adya's PL-2. Reads return committed values only (Silo's
/// read protocol: a reader spins while a writer holds the record's TID word
/// locked); writes are buffered until commit, which locks the write set in
/// one global order, installs and unlocks, so conflicting writes are ordered
/// the same way on every record (no G0 write cycle) and nothing uncommitted
/// is ever read (no G1). Commit validates nothing: a transaction may commit
/// having read values that were overwritten meanwhile, so lost updates and
/// write skew happen. **Not serializable**; it is here to show the price of
/// serializability that PWV avoids, never for data that needs isolation.
///
/// Two details differ from the thesis. Write locks are taken in record
/// address order (Silo's order), not in the lexicographic key order the
/// thesis names: any total order gives the same deadlock freedom, and the
/// address order needs no key comparisons. And the thesis co-locates MCS
/// latches with the records; here the TID word's lock bit is the latch, as
/// under Silo, so rc and silo differ in validation only.
///
/// What still aborts: an insert whose key another transaction inserted
/// first (uniqueness is not a read that read committed may get wrong), a
/// write to a record unlinked meanwhile (retried), and a column write
/// (`update_slice`) whose row changed length or was deleted.
pub(crate) struct Rc;

impl Mode for Rc {
    const VALIDATES: bool = false;

    /// A column write (`update_slice`) goes onto whatever committed row is
    /// there now, if that row is present and has the length the patch was
    /// checked against; conditional writes of other kinds (an insert into an
    /// absent record) still require what they saw.
    #[inline]
    fn patch_fits(w: &WriteEntry, rec: &Record, old: u64, wbuf: &[u8]) -> bool {
        if w.kind != WriteKind::Patch || old & ABSENT != 0 {
            return false;
        }
        let list = PatchList(&wbuf[w.val.0 as usize..(w.val.0 + w.val.1) as usize]);
        // SAFETY: the caller holds the record's lock, so the newest version
        // is stable; pinned, so it is not reclaimed.
        unsafe { &*rec.newest() }.value_len() == list.row_len()
    }
}

pub(crate) type STx<'a, M> = Tx<'a, M>;

super::single_version_protocol!(Silo);
super::single_version_protocol!(Rc);

//! No concurrency control: operations go straight to the index and records,
//! with no read, write or node sets, and take effect immediately. This is the
//! key-value baseline of Silo section 5.2 ("MemKV"), used to measure what
//! Silo's tracking costs. It offers no isolation and cannot roll back.

use std::ops::Bound;

use super::unlink;
use super::Tx;
use crate::catalog::Table;
use crate::error::{ConflictReason, TxError, TxResult};
use crate::index::Insert;
use crate::index::OrderedIndex;
use crate::storage::tid::*;
use crate::storage::{ReadOutcome, Record};
use crate::txn::{check_patch, ScanOptions};

const RETRIES: usize = 64;

fn gave_up<T>() -> TxResult<T> {
    Err(TxError::Conflict(ConflictReason::Stale))
}

fn new_tid(tx: &mut STx<'_>, old: u64) -> u64 {
    let t = next_tid(old, tx.st.last_tid, tx.db.epochs.global());
    tx.st.last_tid = t;
    t
}

/// Lock the live record for `key`; `None` if the key has no record.
fn lock_live<'a>(
    tx: &mut STx<'a>,
    table: &Table,
    key: &[u8],
) -> TxResult<Option<(&'a Record, u64)>> {
    for attempt in 0..RETRIES {
        match find(tx, table, key, attempt) {
            None => return Ok(None),
            Some(rec) => {
                let old = rec.lock();
                if old & LATEST == 0 {
                    rec.unlock();
                    continue;
                }
                return Ok(Some((rec, old)));
            }
        }
    }
    gave_up()
}

/// The record of `key`: on the first attempt, the one a `prefetch` found if
/// there is one (a record unlinked since has `LATEST` clear, and the caller
/// tries again through the index).
#[inline(always)]
fn find<'a>(tx: &mut STx<'a>, table: &Table, key: &[u8], attempt: usize) -> Option<&'a Record> {
    if attempt == 0 {
        if let Some(rec) = tx.st.sets.prefetched.find(table.id, key) {
            // SAFETY: found by this attempt's prefetch under its guard, so
            // not freed.
            return Some(unsafe { &*rec });
        }
    }
    tx.records().lookup(table, key)
}

/// Create a present record for `key`; `false` if the key appeared meanwhile.
fn create(tx: &mut STx<'_>, table: &Table, key: &[u8], val: &[u8]) -> bool {
    let tid = new_tid(tx, 0) | LATEST;
    let rec = Record::new(val, tid, 0);
    match table
        .index
        .insert_hinted(key, rec as u64, tx.g, &mut tx.st.sets.hint)
    {
        Insert::Inserted { .. } => true,
        Insert::Exists(_) => {
            // SAFETY: never published.
            unsafe { Record::free(rec as *mut u8) };
            false
        }
    }
}

pub(crate) fn get<'t>(
    tx: &'t mut STx<'_>,
    table: &Table,
    key: &[u8],
) -> TxResult<Option<&'t [u8]>> {
    get_slice(tx, table, key, 0, usize::MAX)
}

/// `Txn::get_slice`: only the words holding bytes `start..end` are copied.
pub(crate) fn get_slice<'t>(
    tx: &'t mut STx<'_>,
    table: &Table,
    key: &[u8],
    start: usize,
    end: usize,
) -> TxResult<Option<&'t [u8]>> {
    for attempt in 0..RETRIES {
        match find(tx, table, key, attempt) {
            None => return Ok(None),
            Some(rec) => {
                let buf = &mut tx.st.sets.rbuf;
                buf.clear();
                let (outcome, skip) = if start == 0 && end == usize::MAX {
                    (rec.read(buf), 0)
                } else {
                    rec.read_slice(start, end, buf)
                };
                match outcome {
                    ReadOutcome::NotLatest => continue,
                    ReadOutcome::Ok(t) if t & ABSENT != 0 => return Ok(None),
                    ReadOutcome::Ok(_) => return Ok(Some(&tx.st.sets.rbuf[skip..])),
                }
            }
        }
    }
    gave_up()
}

/// Write into a locked live record (present or absent).
fn write_locked(tx: &mut STx<'_>, rec: &Record, old: u64, val: &[u8]) {
    let tid = new_tid(tx, old) | LATEST;
    rec.install(old, Some(val), tid, None, tx.g);
}

pub(crate) fn put(tx: &mut STx<'_>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<()> {
    for _ in 0..RETRIES {
        if let Some((rec, old)) = lock_live(tx, table, key)? {
            write_locked(tx, rec, old, val);
            return Ok(());
        }
        if create(tx, table, key, val) {
            return Ok(());
        }
    }
    gave_up()
}

pub(crate) fn insert(tx: &mut STx<'_>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
    for _ in 0..RETRIES {
        if let Some((rec, old)) = lock_live(tx, table, key)? {
            if old & ABSENT == 0 {
                rec.unlock();
                return Ok(false);
            }
            write_locked(tx, rec, old, val);
            return Ok(true);
        }
        if create(tx, table, key, val) {
            return Ok(true);
        }
    }
    gave_up()
}

pub(crate) fn update(tx: &mut STx<'_>, table: &Table, key: &[u8], val: &[u8]) -> TxResult<bool> {
    match lock_live(tx, table, key)? {
        Some((rec, old)) if old & ABSENT == 0 => {
            write_locked(tx, rec, old, val);
            Ok(true)
        }
        Some((rec, _)) => {
            rec.unlock();
            Ok(false)
        }
        None => Ok(false),
    }
}

/// `Txn::get_many` without CC: a prefetch and a get per key.
pub(crate) fn get_many(
    tx: &mut STx<'_>,
    table: &Table,
    keys: &[&[u8]],
    start: usize,
    end: usize,
    f: &mut dyn FnMut(usize, Option<&[u8]>),
) -> TxResult<()> {
    super::get_each(tx, table, keys, start, end, f)
}

/// `Txn::update_slice` without CC: the bytes are written in place under
/// the record's lock, like every no-CC write.
pub(crate) fn update_slice(
    tx: &mut STx<'_>,
    table: &Table,
    key: &[u8],
    at: usize,
    bytes: &[u8],
) -> TxResult<bool> {
    match lock_live(tx, table, key)? {
        Some((rec, old)) if old & ABSENT == 0 => {
            if let Err(e) = check_patch(rec.locked_len(), at, bytes.len()) {
                rec.unlock();
                return Err(e);
            }
            let tid = new_tid(tx, old) | LATEST;
            rec.install_parts(std::iter::once((at, bytes)), tid);
            Ok(true)
        }
        Some((rec, _)) => {
            rec.unlock();
            Ok(false)
        }
        None => Ok(false),
    }
}

pub(crate) fn delete(tx: &mut STx<'_>, table: &Table, key: &[u8]) -> TxResult<bool> {
    match lock_live(tx, table, key)? {
        Some((rec, old)) if old & ABSENT == 0 => {
            let tid = new_tid(tx, old) | LATEST | ABSENT;
            rec.install(old, None, tid, None, tx.g);
            unlink(table, tx.g, key, rec, tid);
            Ok(true)
        }
        Some((rec, _)) => {
            rec.unlock();
            Ok(false)
        }
        None => Ok(false),
    }
}

pub(crate) fn scan<F>(
    tx: &mut STx<'_>,
    table: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    opts: ScanOptions,
    f: F,
) -> TxResult<usize>
where
    F: FnMut(&[u8], &[u8]) -> bool,
{
    let recs = tx.records();
    let buf = &mut tx.st.sets.rbuf;
    let read = |rec: &Record, buf: &mut Vec<u8>| {
        let (outcome, skip) = match opts.slice {
            None => (rec.read(buf), 0),
            Some((s, e)) => rec.read_slice(s, e, buf),
        };
        matches!(outcome, ReadOutcome::Ok(t) if t & ABSENT == 0).then_some(skip)
    };
    Ok(super::sv_scan(buf, recs, table, (lo, hi), opts, read, f))
}

/// No concurrency control (Silo section 5.2's key-value baseline).
pub(crate) struct NoCc;

type STx<'a> = Tx<'a, NoCc>;

/// Nothing to commit: every write was applied when it was made.
#[inline]
fn commit(_: &mut STx<'_>) -> TxResult<()> {
    Ok(())
}

/// Nothing to roll back (not isolated: see the module docs).
#[inline]
fn abort(_: &mut STx<'_>) {}

super::single_version_protocol!(NoCc);

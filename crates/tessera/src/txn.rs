//! `Txn`: the operations a one-shot transaction performs. Written once;
//! each call dispatches on the protocol chosen when the database was opened
//! (one predictable branch), to the protocol's module under `cc/`.

use std::ops::Bound;

use crate::catalog::{Table, TableId};
use crate::cc::{ermia, nocc, silo, snapshot};
use crate::db::{DbInner, Protocol, WorkerState};
use crate::epoch::Guard;
use crate::error::{Error, TxError, TxResult};

/// Largest key accepted (bytes).
pub const MAX_KEY_LEN: usize = 1024;
/// Largest value accepted (bytes).
pub const MAX_VALUE_LEN: usize = 1 << 24;

/// Options of a range scan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanOptions {
    /// Stop after this many rows (`None`: no limit).
    pub limit: Option<usize>,
    /// Descending key order.
    pub reverse: bool,
}

impl ScanOptions {
    /// Ascending, no limit.
    pub fn new() -> Self {
        Self::default()
    }
    /// Stop after `n` rows.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
    /// Descending order.
    pub fn reverse(mut self) -> Self {
        self.reverse = true;
        self
    }
}

/// A transaction in progress. Created by [`crate::Worker::run`].
///
/// # What the transaction body sees
///
/// Under an optimistic protocol (Silo) the body reads without locks and
/// validates only at commit, so it can observe a state that no serial
/// execution produces (OCC gives no *opacity*): two reads may straddle
/// another transaction's commit. Such a transaction never commits (commit
/// validation aborts it and `Worker::run` retries it), but its body runs to
/// the end first. So the body must not treat what it read as an invariant to
/// `panic!` or loop on; check invariants after `run` returns, or return
/// `tx.user_abort()`. Two cases are confirmed early, because their answers
/// would contradict an earlier read of the same key: when `insert` reports
/// that a key exists, or `update`/`delete` that it is missing, everything the
/// transaction read so far is validated first, and a stale transaction gets a
/// conflict instead of the answer.
pub struct Txn<'a> {
    pub(crate) db: &'a DbInner,
    pub(crate) st: &'a mut WorkerState,
    pub(crate) g: &'a Guard<'a>,
    pub(crate) protocol: Protocol,
    /// Snapshot boundary for read-only snapshot transactions.
    pub(crate) snapshot: Option<u64>,
}

fn check_key(key: &[u8]) -> TxResult<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(TxError::Error(Error::InvalidArgument(format!(
            "key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit",
            key.len()
        ))));
    }
    Ok(())
}

fn check_value(val: &[u8]) -> TxResult<()> {
    if val.len() > MAX_VALUE_LEN {
        return Err(TxError::Error(Error::InvalidArgument(format!(
            "value of {} bytes exceeds the {MAX_VALUE_LEN}-byte limit",
            val.len()
        ))));
    }
    Ok(())
}

impl<'a> Txn<'a> {
    pub(crate) fn new(
        db: &'a DbInner,
        st: &'a mut WorkerState,
        g: &'a Guard<'a>,
        protocol: Protocol,
        snapshot: Option<u64>,
    ) -> Txn<'a> {
        st.sets.clear();
        Txn {
            db,
            st,
            g,
            protocol,
            snapshot,
        }
    }

    /// Resolve a table id. Tables live as long as the database, and the
    /// worker's cache holds an `Arc` to each, so the reference outlives `self`.
    #[inline]
    pub(crate) fn table(&mut self, t: TableId) -> TxResult<&'a Table> {
        let i = t.0 as usize;
        if i >= self.st.tables.len() {
            self.st.tables = self.db.tables.read().clone();
            if i >= self.st.tables.len() {
                return Err(TxError::Error(Error::BadTableId(t.0)));
            }
        }
        let p: *const Table = &*self.st.tables[i];
        // SAFETY: tables are never removed from an open database and the
        // database outlives every transaction (the worker holds an Arc).
        Ok(unsafe { &*p })
    }

    fn writable(&self) -> TxResult<()> {
        if self.snapshot.is_some() || self.db.opts.read_only {
            return Err(TxError::Error(Error::ReadOnly));
        }
        Ok(())
    }

    /// Read the value of `key`, or `None` if absent. The slice is valid
    /// until the next operation on this transaction.
    #[inline]
    pub fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        check_key(key)?;
        let table = self.table(t)?;
        if let Some(b) = self.snapshot {
            return Ok(snapshot::get(self, table, key, b));
        }
        match self.protocol {
            Protocol::Silo => silo::get(self, table, key),
            Protocol::NoCc => nocc::get(self, table, key),
            Protocol::Si | Protocol::Ssn => ermia::get(self, table, key),
        }
    }

    /// Write `val` under `key`, inserting it if absent (upsert). A blind
    /// write: it does not read the old value.
    #[inline]
    pub fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        check_key(key)?;
        check_value(val)?;
        self.writable()?;
        let table = self.table(t)?;
        match self.protocol {
            Protocol::Silo => silo::put(self, table, key, val),
            Protocol::NoCc => nocc::put(self, table, key, val),
            Protocol::Si | Protocol::Ssn => ermia::put(self, table, key, val),
        }
    }

    /// Insert `key` if it is absent. Returns `false` (and writes nothing) if
    /// the key exists.
    #[inline]
    pub fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        check_key(key)?;
        check_value(val)?;
        self.writable()?;
        let table = self.table(t)?;
        match self.protocol {
            Protocol::Silo => silo::insert(self, table, key, val),
            Protocol::NoCc => nocc::insert(self, table, key, val),
            Protocol::Si | Protocol::Ssn => ermia::insert(self, table, key, val),
        }
    }

    /// Overwrite `key` only if it exists; returns whether it did.
    #[inline]
    pub fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        check_key(key)?;
        check_value(val)?;
        self.writable()?;
        let table = self.table(t)?;
        match self.protocol {
            Protocol::Silo => silo::update(self, table, key, val),
            Protocol::NoCc => nocc::update(self, table, key, val),
            Protocol::Si | Protocol::Ssn => ermia::update(self, table, key, val),
        }
    }

    /// Delete `key`; returns whether it existed.
    #[inline]
    pub fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        check_key(key)?;
        self.writable()?;
        let table = self.table(t)?;
        match self.protocol {
            Protocol::Silo => silo::delete(self, table, key),
            Protocol::NoCc => nocc::delete(self, table, key),
            Protocol::Si | Protocol::Ssn => ermia::delete(self, table, key),
        }
    }

    /// Visit the rows with keys within `(lo, hi)` in key order (descending
    /// with `opts.reverse`), at most `opts.limit` of them; `f` returns
    /// `false` to stop early. Returns the number of rows visited. Under Silo
    /// the scanned range is protected against phantoms (section 4.6).
    pub fn scan<F>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool,
    {
        for b in [&lo, &hi] {
            if let Bound::Included(k) | Bound::Excluded(k) = b {
                check_key(k)?;
            }
        }
        if opts.limit == Some(0) {
            return Ok(0);
        }
        let table = self.table(t)?;
        if let Some(b) = self.snapshot {
            return Ok(snapshot::scan(self, table, lo, hi, opts, b, f));
        }
        match self.protocol {
            Protocol::Silo => silo::scan(self, table, lo, hi, opts, f),
            Protocol::NoCc => nocc::scan(self, table, lo, hi, opts, f),
            Protocol::Si | Protocol::Ssn => ermia::scan(self, table, lo, hi, opts, f),
        }
    }

    /// Convenience: collect a scan into owned `(key, value)` pairs.
    pub fn scan_collect(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
    ) -> TxResult<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        self.scan(t, lo, hi, opts, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    /// Roll the transaction back on the application's request: return this
    /// from the transaction closure (`return tx.user_abort();`).
    pub fn user_abort<T>(&self) -> TxResult<T> {
        Err(TxError::UserAbort)
    }

    /// Whether this is a read-only snapshot transaction.
    pub fn is_snapshot(&self) -> bool {
        self.snapshot.is_some()
    }

    pub(crate) fn commit(&mut self) -> TxResult<()> {
        if self.snapshot.is_some() {
            return Ok(());
        }
        match self.protocol {
            Protocol::Silo => silo::commit(self),
            Protocol::NoCc => Ok(()),
            Protocol::Si | Protocol::Ssn => ermia::commit(self),
        }
    }

    pub(crate) fn abort(&mut self) {
        if self.snapshot.is_some() {
            return;
        }
        match self.protocol {
            Protocol::Silo => silo::abort(self),
            Protocol::Si | Protocol::Ssn => ermia::abort(self),
            Protocol::NoCc => {}
        }
    }
}

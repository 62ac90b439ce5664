//! The transaction API. [`Transaction`] is the set of operations a
//! transaction body performs; a workload writes its bodies once, generic
//! over it, and `Worker::execute` runs them monomorphized for the
//! database's protocol (one dispatch per transaction). [`Txn`], what
//! `Worker::run`'s closures receive, is the same operations behind one
//! object-safe table ([`TxnOps`]): the application API, protocol-agnostic.

use std::ops::{Bound, Range, RangeBounds};

use crate::catalog::TableId;
use crate::error::{ConflictReason, Error, TxError, TxResult};
use crate::iter::RangeIter;

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
    /// Show the visitor only bytes `start..end` of each value (clamped to
    /// the value's length), as [`Transaction::get_slice`] does for one key.
    pub slice: Option<(usize, usize)>,
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
    /// Visit only bytes `at` of each value (a column read; see
    /// [`Transaction::get_slice`]).
    pub fn slice(mut self, at: Range<usize>) -> Self {
        self.slice = Some((at.start, at.end));
        self
    }
}

/// The most bytes of each value that `get_many` prefetches (its range may
/// be open-ended: `0..usize::MAX` reads whole values).
pub(crate) const GET_MANY_PREFETCH: usize = 256;

/// Bytes `start..end` of `v`, both clamped to its length: what
/// [`Transaction::get_slice`] returns.
#[inline]
pub(crate) fn clamp_slice(v: &[u8], start: usize, end: usize) -> &[u8] {
    let end = end.min(v.len());
    &v[start.min(end)..end]
}

/// Write `bytes` over `row[at..]`: the value change of
/// [`Transaction::update_slice`]; refused if the range leaves the row.
pub(crate) fn patch_row(row: &mut [u8], at: usize, bytes: &[u8]) -> TxResult<()> {
    check_patch(row.len(), at, bytes.len())?;
    row[at..at + bytes.len()].copy_from_slice(bytes);
    Ok(())
}

/// Refuse a column write of `n` bytes at `at` into a value of `len` bytes
/// that does not fit inside it.
#[inline]
pub(crate) fn check_patch(len: usize, at: usize, n: usize) -> TxResult<()> {
    if at.checked_add(n).is_none_or(|end| end > len) {
        return Err(TxError::Error(Error::InvalidArgument(format!(
            "update_slice of bytes {at}..{} of a {len}-byte value",
            at.saturating_add(n)
        ))));
    }
    Ok(())
}

pub(crate) fn check_key(key: &[u8]) -> TxResult<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(TxError::Error(Error::InvalidArgument(format!(
            "key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit",
            key.len()
        ))));
    }
    Ok(())
}

pub(crate) fn check_value(val: &[u8]) -> TxResult<()> {
    if val.len() > MAX_VALUE_LEN {
        return Err(TxError::Error(Error::InvalidArgument(format!(
            "value of {} bytes exceeds the {MAX_VALUE_LEN}-byte limit",
            val.len()
        ))));
    }
    Ok(())
}

/// The operations of a transaction. Implemented by [`Txn`] (dynamic) and by
/// the engine's per-protocol transaction type (monomorphized); a body
/// generic over `T: Transaction` runs on both. See [`Txn`] for what a body
/// may observe.
pub trait Transaction {
    /// Read the value of `key`, or `None` if absent. The slice is valid
    /// until the next operation on this transaction.
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>>;

    /// Read bytes `at` of the value of `key` (a column read), or `None` if
    /// the key is absent. Both ends are clamped to the value's length, so a
    /// short value gives a short (possibly empty) slice. Only those bytes are
    /// copied out of the record; for isolation it is a read of the whole
    /// row (a concurrent write to any byte of it conflicts as with
    /// [`get`](Transaction::get)). The slice is valid until the next
    /// operation on this transaction.
    fn get_slice(&mut self, t: TableId, key: &[u8], at: Range<usize>) -> TxResult<Option<&[u8]>> {
        Ok(self.get(t, key)?.map(|v| clamp_slice(v, at.start, at.end)))
    }

    /// A hint that this transaction will soon read `keys` of table `t`
    /// (about the first `value_len` bytes of each, at most 1 KiB of them
    /// fetched ahead, whatever is asked): a protocol that can
    /// looks them up together, overlapping their cache misses, and starts
    /// each later [`get`](Transaction::get) of one of them from the record
    /// found. It reads nothing, so it changes no result and nothing about
    /// isolation; keys that are absent, or a table that does not exist, are
    /// left to the gets. By default it does nothing.
    ///
    /// TPC-C's NewOrder prefetches its 5-15 ITEM rows, then its STOCK rows:
    /// independent lookups, each a chain of misses from root to record.
    fn prefetch(&mut self, t: TableId, keys: &[&[u8]], value_len: usize) {
        let _ = (t, keys, value_len);
    }

    /// Column reads of many rows: bytes `at` of the value of each of `keys`
    /// (as [`get_slice`](Transaction::get_slice) reads them, `None` for an
    /// absent key), handed to `f(i, value)` in the order of `keys`. A
    /// protocol that can looks the keys up together (a batched descent,
    /// whose cache misses overlap), then reads each record found; by
    /// default it is a [`prefetch`](Transaction::prefetch) and a `get_slice`
    /// per key. Reads, isolation and own writes are exactly those of the
    /// `get_slice` calls. TPC-C's StockLevel reads S_QUANTITY of ~200 rows.
    fn get_many<F>(
        &mut self,
        t: TableId,
        keys: &[&[u8]],
        at: Range<usize>,
        mut f: F,
    ) -> TxResult<()>
    where
        F: FnMut(usize, Option<&[u8]>),
    {
        self.prefetch(t, keys, at.end.min(GET_MANY_PREFETCH));
        for (i, k) in keys.iter().enumerate() {
            let v = self.get_slice(t, k, at.clone())?;
            f(i, v);
        }
        Ok(())
    }

    /// Write `val` under `key`, inserting it if absent (upsert). A blind
    /// write: it does not read the old value.
    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()>;

    /// Insert `key` if it is absent. Returns `false` (and writes nothing) if
    /// the key exists.
    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool>;

    /// Overwrite `key` only if it exists; returns whether it did.
    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool>;

    /// Overwrite bytes `at..at + bytes.len()` of the value of `key` (a
    /// column write), keeping the rest of the row, if the key exists;
    /// returns whether it did. The range must lie within the value, or the
    /// call fails with [`Error::InvalidArgument`]. For isolation it is an
    /// [`update`](Transaction::update) of the whole row with those bytes
    /// changed; a protocol that can overrides it so that only the bytes
    /// change hands (Silo: the write set keeps the bytes, and commit writes
    /// them into the record in place). TPC-C's NewOrder changes four
    /// integers of each 320-byte stock row.
    fn update_slice(&mut self, t: TableId, key: &[u8], at: usize, bytes: &[u8]) -> TxResult<bool> {
        let Some(v) = self.get(t, key)? else {
            return Ok(false);
        };
        let mut row = v.to_vec();
        patch_row(&mut row, at, bytes)?;
        self.update(t, key, &row)
    }

    /// Delete `key`; returns whether it existed.
    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool>;

    /// Visit the rows with keys within `(lo, hi)` in key order (descending
    /// with `opts.reverse`), at most `opts.limit` of them; `f` returns
    /// `false` to stop early. Returns the number of rows visited. Under the
    /// phantom-safe protocols the scanned range is protected against
    /// phantoms (Silo section 4.6).
    fn scan<F>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool;

    /// Whether this is a read-only snapshot transaction.
    fn is_snapshot(&self) -> bool;

    /// Convenience: collect a scan into owned `(key, value)` pairs.
    fn scan_collect(
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

    /// Iterate over the rows with keys in `range` (any Rust range of
    /// byte-slice-like keys: `&[u8]`, `&str`, `Vec<u8>`, byte arrays), in
    /// ascending key order; `.rev()` for descending. Phantom protection is
    /// the callback scan's; see [`RangeIter`].
    fn range<K, R>(&mut self, t: TableId, range: R) -> RangeIter<'_, Self>
    where
        Self: Sized,
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        let (lo, hi) = crate::iter::owned_bounds(range);
        RangeIter::new(self, t, lo, hi)
    }

    /// Iterate over the rows whose keys start with `prefix` (an empty
    /// prefix: the whole table), as [`Transaction::range`] does.
    fn prefix(&mut self, t: TableId, prefix: impl AsRef<[u8]>) -> RangeIter<'_, Self>
    where
        Self: Sized,
    {
        let (lo, hi) = crate::iter::prefix_bounds(prefix.as_ref());
        RangeIter::new(self, t, lo, hi)
    }

    /// Make the transaction fail with conflict `r` at its end even if its
    /// body drops the error (what an iterator scan does with a conflict
    /// it yielded). Engine use; by default nothing.
    #[doc(hidden)]
    fn poison(&mut self, _r: ConflictReason) {}

    /// Roll the transaction back on the application's request: return this
    /// from the transaction body (`return tx.user_abort();`).
    fn user_abort<T>(&self) -> TxResult<T> {
        Err(TxError::Error(Error::UserAbort))
    }
}

/// The object-safe form of [`Transaction`] (a scan takes its visitor as a
/// `dyn FnMut`), which [`Txn`] calls through.
pub(crate) trait TxnOps {
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>>;
    fn get_slice(&mut self, t: TableId, key: &[u8], at: Range<usize>) -> TxResult<Option<&[u8]>>;
    fn prefetch(&mut self, t: TableId, keys: &[&[u8]], value_len: usize);
    /// By default a prefetch and a `get_slice` per key.
    fn get_many(
        &mut self,
        t: TableId,
        keys: &[&[u8]],
        at: Range<usize>,
        f: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> TxResult<()> {
        self.prefetch(t, keys, at.end.min(GET_MANY_PREFETCH));
        for (i, k) in keys.iter().enumerate() {
            let v = self.get_slice(t, k, at.clone())?;
            f(i, v);
        }
        Ok(())
    }
    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()>;
    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool>;
    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool>;
    /// By default a `get`, then an `update` of the patched copy.
    fn update_slice(&mut self, t: TableId, key: &[u8], at: usize, bytes: &[u8]) -> TxResult<bool> {
        let Some(v) = self.get(t, key)? else {
            return Ok(false);
        };
        let mut row = v.to_vec();
        patch_row(&mut row, at, bytes)?;
        self.update(t, key, &row)
    }
    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool>;
    fn scan(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        f: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> TxResult<usize>;
    fn is_snapshot(&self) -> bool;
    /// See [`Transaction::poison`]; by default nothing (the deterministic
    /// protocols' transactions have no conflicts to drop).
    fn poison(&mut self, _r: ConflictReason) {}
}

/// A transaction in progress, as `Worker::run` hands it to a closure:
/// every operation is one call through the protocol's table of operations.
/// Bodies written generic over [`Transaction`] accept it too.
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
    ops: &'a mut (dyn TxnOps + 'a),
}

impl<'a> Txn<'a> {
    pub(crate) fn new(ops: &'a mut (dyn TxnOps + 'a)) -> Txn<'a> {
        Txn { ops }
    }

    /// Read the value of `key`, or `None` if absent. The slice is valid
    /// until the next operation on this transaction.
    #[inline]
    pub fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.ops.get(t, key)
    }

    /// Read bytes `at` of the value of `key` (a column read), or `None` if
    /// absent; see [`Transaction::get_slice`].
    #[inline]
    pub fn get_slice(
        &mut self,
        t: TableId,
        key: &[u8],
        at: Range<usize>,
    ) -> TxResult<Option<&[u8]>> {
        self.ops.get_slice(t, key, at)
    }

    /// A hint that the transaction will soon read `keys`; see
    /// [`Transaction::prefetch`].
    #[inline]
    pub fn prefetch(&mut self, t: TableId, keys: &[&[u8]], value_len: usize) {
        self.ops.prefetch(t, keys, value_len)
    }

    /// Column reads of many rows, handed to `f(i, value)` in order; see
    /// [`Transaction::get_many`].
    #[inline]
    pub fn get_many<F>(
        &mut self,
        t: TableId,
        keys: &[&[u8]],
        at: Range<usize>,
        mut f: F,
    ) -> TxResult<()>
    where
        F: FnMut(usize, Option<&[u8]>),
    {
        self.ops.get_many(t, keys, at, &mut f)
    }

    /// Write `val` under `key`, inserting it if absent (upsert). A blind
    /// write: it does not read the old value.
    #[inline]
    pub fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        self.ops.put(t, key, val)
    }

    /// Insert `key` if it is absent. Returns `false` (and writes nothing) if
    /// the key exists.
    #[inline]
    pub fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.ops.insert(t, key, val)
    }

    /// Overwrite `key` only if it exists; returns whether it did.
    #[inline]
    pub fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.ops.update(t, key, val)
    }

    /// Overwrite bytes `at..at + bytes.len()` of the value of `key` if it
    /// exists; see [`Transaction::update_slice`].
    #[inline]
    pub fn update_slice(
        &mut self,
        t: TableId,
        key: &[u8],
        at: usize,
        bytes: &[u8],
    ) -> TxResult<bool> {
        self.ops.update_slice(t, key, at, bytes)
    }

    /// Delete `key`; returns whether it existed.
    #[inline]
    pub fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        self.ops.delete(t, key)
    }

    /// Visit the rows with keys within `(lo, hi)` in key order (descending
    /// with `opts.reverse`), at most `opts.limit` of them; `f` returns
    /// `false` to stop early. Returns the number of rows visited. Under the
    /// phantom-safe protocols the scanned range is protected against
    /// phantoms (Silo section 4.6).
    pub fn scan<F>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        mut f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool,
    {
        self.ops.scan(t, lo, hi, opts, &mut f)
    }

    /// Convenience: collect a scan into owned `(key, value)` pairs.
    pub fn scan_collect(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
    ) -> TxResult<Vec<(Vec<u8>, Vec<u8>)>> {
        Transaction::scan_collect(self, t, lo, hi, opts)
    }

    /// Iterate over the rows with keys in `range`, in ascending key order
    /// (`.rev()` for descending). `range` is any Rust range over
    /// byte-slice-like keys (`&[u8]`, `&str`, `Vec<u8>`, byte arrays).
    /// Each item is a `(key, value)` pair, or the transaction's error (end
    /// the closure with it, `?`, and `Worker::run` retries a conflict).
    ///
    /// The rows are fetched in chunks through the protocol's own scan, so
    /// an iterator run to its end protects its range against phantoms
    /// exactly as [`Txn::scan`] does, and one dropped early protects what
    /// it fetched. The iterator borrows the transaction: write after
    /// iterating, or collect first.
    ///
    /// ```
    /// # use tessera::{Database, Options};
    /// let db = Database::open(Options::in_memory())?;
    /// let users = db.create_table("users")?;
    /// let mut w = db.worker()?;
    /// w.run(|tx| {
    ///     for (k, v) in [("user001", "ada"), ("user002", "bob"), ("user003", "cy")] {
    ///         tx.put(users, k.as_bytes(), v.as_bytes())?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let names = w.run(|tx| {
    ///     let mut names = Vec::new();
    ///     for row in tx.range(users, "user002"..) {
    ///         let (_key, value) = row?;
    ///         names.push(String::from_utf8(value).unwrap());
    ///     }
    ///     Ok(names)
    /// })?;
    /// assert_eq!(names, ["bob", "cy"]);
    /// // Newest key first, at most two rows.
    /// let keys = w.run(|tx| {
    ///     tx.range(users, "user001"..="user003")
    ///         .rev()
    ///         .take(2)
    ///         .map(|row| row.map(|(k, _)| k))
    ///         .collect::<Result<Vec<_>, _>>()
    /// })?;
    /// assert_eq!(keys, [b"user003".to_vec(), b"user002".to_vec()]);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn range<K, R>(&mut self, t: TableId, range: R) -> RangeIter<'_, Txn<'a>>
    where
        K: AsRef<[u8]> + ?Sized,
        R: RangeBounds<K>,
    {
        Transaction::range(self, t, range)
    }

    /// Iterate over the rows whose keys start with `prefix` (an empty
    /// prefix: the whole table), as [`Txn::range`] does.
    ///
    /// ```
    /// # use tessera::{Database, Options};
    /// let db = Database::open(Options::in_memory())?;
    /// let t = db.create_table("t")?;
    /// let mut w = db.worker()?;
    /// w.run(|tx| {
    ///     for k in ["a/1", "a/2", "b/1"] {
    ///         tx.put(t, k.as_bytes(), b"")?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let n = w.run(|tx| tx.prefix(t, "a/").try_fold(0, |n, row| row.map(|_| n + 1)))?;
    /// assert_eq!(n, 2);
    /// # Ok::<(), tessera::Error>(())
    /// ```
    pub fn prefix(&mut self, t: TableId, prefix: impl AsRef<[u8]>) -> RangeIter<'_, Txn<'a>> {
        Transaction::prefix(self, t, prefix)
    }

    /// Roll the transaction back on the application's request: return this
    /// from the transaction closure (`return tx.user_abort();`).
    pub fn user_abort<T>(&self) -> TxResult<T> {
        Err(TxError::Error(Error::UserAbort))
    }

    /// Whether this is a read-only snapshot transaction.
    pub fn is_snapshot(&self) -> bool {
        self.ops.is_snapshot()
    }
}

impl Transaction for Txn<'_> {
    #[inline]
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.ops.get(t, key)
    }
    #[inline]
    fn get_slice(&mut self, t: TableId, key: &[u8], at: Range<usize>) -> TxResult<Option<&[u8]>> {
        self.ops.get_slice(t, key, at)
    }
    #[inline]
    fn prefetch(&mut self, t: TableId, keys: &[&[u8]], value_len: usize) {
        self.ops.prefetch(t, keys, value_len)
    }
    #[inline]
    fn get_many<F>(
        &mut self,
        t: TableId,
        keys: &[&[u8]],
        at: Range<usize>,
        mut f: F,
    ) -> TxResult<()>
    where
        F: FnMut(usize, Option<&[u8]>),
    {
        self.ops.get_many(t, keys, at, &mut f)
    }
    #[inline]
    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        self.ops.put(t, key, val)
    }
    #[inline]
    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.ops.insert(t, key, val)
    }
    #[inline]
    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.ops.update(t, key, val)
    }
    #[inline]
    fn update_slice(&mut self, t: TableId, key: &[u8], at: usize, bytes: &[u8]) -> TxResult<bool> {
        self.ops.update_slice(t, key, at, bytes)
    }
    #[inline]
    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        self.ops.delete(t, key)
    }
    fn scan<F>(
        &mut self,
        t: TableId,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        opts: ScanOptions,
        mut f: F,
    ) -> TxResult<usize>
    where
        F: FnMut(&[u8], &[u8]) -> bool,
    {
        self.ops.scan(t, lo, hi, opts, &mut f)
    }
    fn is_snapshot(&self) -> bool {
        self.ops.is_snapshot()
    }
    fn poison(&mut self, r: ConflictReason) {
        self.ops.poison(r)
    }
}

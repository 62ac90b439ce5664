//! Transaction requests: what a workload hands the engine instead of a
//! closure. A request's body is generic over [`Transaction`], so
//! `Worker::execute` runs it monomorphized for the database's protocol.
//!
//! A request may also *declare* its read and write sets up front
//! ([`Request::declare`] into a [`KeySet`]), which is what deterministic
//! protocols need (Calvin's lock scheduler, BOHM's placeholders, PWV's piece
//! graph): they order a batch of requests before running any of them. A
//! request whose sets depend on what it reads (TPC-C Payment by last name,
//! OrderStatus, Delivery) first runs a *reconnaissance* step
//! ([`Request::reconnoiter`], the OLLP trial run of Thomson et al. that
//! Calvin and BOHM use): a read-only pass that computes the keys, which the
//! body re-checks when it runs and answers with
//! [`ConflictReason::Reconnaissance`] if they changed meanwhile (a
//! speculation-induced abort: the request reconnoiters again).
//!
//! [`Worker::execute_batch`](crate::Worker::execute_batch) is the batch
//! entry point. Under the interactive protocols it runs the batch in order,
//! each request checked against its declared sets: an access outside them
//! is an error naming the table and key, so a wrong declaration is found
//! here rather than as a wrong result under a deterministic protocol.

use std::fmt;
use std::ops::Bound;

use crate::catalog::TableId;
use crate::error::{ConflictReason, Error, TxError, TxResult};
use crate::txn::{ScanOptions, Transaction};

/// A transaction request: its inputs (the implementing value) and its body.
/// The body may run several times (after conflicts); it must not have
/// effects outside the transaction, except on the request's own fields,
/// which it should reset at the start of each run.
pub trait Request {
    /// What a committed run returns.
    type Output;

    /// The body: the transaction's operations on `tx`.
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<Self::Output>;

    /// Whether the key sets depend on reads, so that
    /// [`Request::reconnoiter`] must run before [`Request::declare`].
    fn needs_reconnaissance(&self) -> bool {
        false
    }

    /// Reconnaissance (OLLP): a read-only pass over `tx` (a write is refused
    /// as an access outside the declaration) that computes and
    /// keeps in the request what [`Request::declare`] needs. The body must
    /// then re-check those values and return
    /// `Err(TxError::Conflict(ConflictReason::Reconnaissance))` if they no
    /// longer hold. An interactive execution (`Worker::execute`) skips this
    /// step, and the body then uses what it reads.
    fn reconnoiter<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        let _ = tx;
        Ok(())
    }

    /// Add the request's read and write sets to `keys`; `false` if the
    /// request does not declare them (it can then only run interactively).
    /// Everything the body reads must be covered by a read or write entry,
    /// everything it writes (put, insert, update, delete) by a write entry;
    /// a scan must lie within one declared range.
    fn declare(&self, keys: &mut KeySet) -> bool {
        let _ = keys;
        false
    }
}

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read only.
    Read,
    /// Written (put, insert, update, delete), and possibly read.
    Write,
}

/// One declared entry of a [`KeySet`]: a key, or an inclusive key range
/// (coarse declarations: a district's orders, a whole table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Declared<'a> {
    /// The table.
    pub table: TableId,
    /// Read or write.
    pub access: Access,
    /// A blind write ([`KeySet::blind_write`]): written without being
    /// read.
    pub blind: bool,
    /// The key, or the range's lowest key.
    pub lo: &'a [u8],
    /// Where the entry ends: see [`Declared::hi`].
    hi: Hi<'a>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hi<'a> {
    /// One key: `lo`.
    Key,
    /// Up to and including this key.
    Incl(&'a [u8]),
    /// Every key from `lo` on.
    Unbounded,
}

impl<'a> Declared<'a> {
    /// Whether this entry is one key (not a range).
    pub fn is_key(&self) -> bool {
        self.hi == Hi::Key
    }

    /// The highest key covered (inclusive); `None` when the range is
    /// unbounded above. For a single key, the key itself.
    pub fn hi(&self) -> Option<&'a [u8]> {
        match self.hi {
            Hi::Key => Some(self.lo),
            Hi::Incl(h) => Some(h),
            Hi::Unbounded => None,
        }
    }

    fn contains(&self, key: &[u8]) -> bool {
        match self.hi {
            Hi::Key => self.lo == key,
            Hi::Incl(h) => self.lo <= key && key <= h,
            Hi::Unbounded => self.lo <= key,
        }
    }

    /// Whether the scan range `(lo, hi)` lies within this entry.
    fn contains_range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        let lo_ok = match lo {
            Bound::Included(k) | Bound::Excluded(k) => self.lo <= k,
            Bound::Unbounded => self.lo.is_empty(),
        };
        let hi_ok = match (hi, self.hi) {
            (_, Hi::Unbounded) => true,
            (Bound::Unbounded, _) => false,
            (Bound::Included(k), Hi::Key) => k <= self.lo,
            (Bound::Included(k), Hi::Incl(h)) => k <= h,
            // Keys below k are all within when k <= h, or when k is the
            // smallest key above h.
            (Bound::Excluded(k), Hi::Key) => k <= self.lo || is_successor(k, self.lo),
            (Bound::Excluded(k), Hi::Incl(h)) => k <= h || is_successor(k, h),
        };
        lo_ok && hi_ok
    }
}

/// Whether `k` is the smallest key above `h` (`h` followed by a zero byte),
/// so that "below `k`" means "at most `h`".
fn is_successor(k: &[u8], h: &[u8]) -> bool {
    k.len() == h.len() + 1 && k.starts_with(h) && k[h.len()] == 0
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    table: TableId,
    access: Access,
    blind: bool,
    lo: (u32, u32),
    hi: HiAt,
}

#[derive(Clone, Copy, Debug)]
enum HiAt {
    Key,
    Incl(u32, u32),
    Unbounded,
}

/// A request's declared read and write sets: keys and inclusive key ranges
/// per table, in the order declared. Kept in one byte buffer (no allocation
/// per key once grown); `clear` keeps the capacity.
#[derive(Clone, Default)]
pub struct KeySet {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl KeySet {
    /// An empty set.
    pub fn new() -> KeySet {
        KeySet::default()
    }

    fn push_bytes(&mut self, b: &[u8]) -> (u32, u32) {
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(b);
        (at, b.len() as u32)
    }

    fn push(&mut self, table: TableId, access: Access, lo: &[u8], hi: Option<Option<&[u8]>>) {
        let lo = self.push_bytes(lo);
        let hi = match hi {
            None => HiAt::Key,
            Some(Some(h)) => {
                let (a, n) = self.push_bytes(h);
                HiAt::Incl(a, n)
            }
            Some(None) => HiAt::Unbounded,
        };
        self.entries.push(Entry {
            table,
            access,
            blind: false,
            lo,
            hi,
        });
    }

    /// Declare a read of `key`.
    pub fn read(&mut self, table: TableId, key: &[u8]) {
        self.push(table, Access::Read, key, None);
    }

    /// Declare a write of `key` (put, insert, update or delete; it may also
    /// be read).
    pub fn write(&mut self, table: TableId, key: &[u8]) {
        self.push(table, Access::Write, key, None);
    }

    /// Declare a *blind* write of `key`: the body puts (or deletes without
    /// asking whether it existed) a value that does not depend on what was
    /// there, and never reads the key. Under `lazy` this lets a producer
    /// whose stickies are all overwritten blindly, and read by nobody, be
    /// skipped (the thesis's §4.4.3); a body that reads a key it declared
    /// blind fails with an error there. Elsewhere it is a write.
    pub fn blind_write(&mut self, table: TableId, key: &[u8]) {
        self.push(table, Access::Write, key, None);
        self.entries.last_mut().expect("just pushed").blind = true;
    }

    /// Declare reads of every key in `lo..=hi` (scans, or keys that are
    /// known only as a range).
    pub fn read_range(&mut self, table: TableId, lo: &[u8], hi: &[u8]) {
        self.push(table, Access::Read, lo, Some(Some(hi)));
    }

    /// Declare writes of any key in `lo..=hi` (inserts whose keys are known
    /// only at execution, such as a TPC-C order id drawn from its district).
    pub fn write_range(&mut self, table: TableId, lo: &[u8], hi: &[u8]) {
        self.push(table, Access::Write, lo, Some(Some(hi)));
    }

    /// Declare reads of every key from `lo` on (a scan bounded by a row
    /// count rather than a key).
    pub fn read_from(&mut self, table: TableId, lo: &[u8]) {
        self.push(table, Access::Read, lo, Some(None));
    }

    /// Declare reads of the whole table.
    pub fn read_table(&mut self, table: TableId) {
        self.push(table, Access::Read, &[], Some(None));
    }

    /// Declare writes anywhere in the table.
    pub fn write_table(&mut self, table: TableId) {
        self.push(table, Access::Write, &[], Some(None));
    }

    /// Forget every entry (keeps the buffers).
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn at(&self, (a, n): (u32, u32)) -> &[u8] {
        &self.bytes[a as usize..(a + n) as usize]
    }

    fn get(&self, e: &Entry) -> Declared<'_> {
        Declared {
            table: e.table,
            access: e.access,
            blind: e.blind,
            lo: self.at(e.lo),
            hi: match e.hi {
                HiAt::Key => Hi::Key,
                HiAt::Incl(a, n) => Hi::Incl(self.at((a, n))),
                HiAt::Unbounded => Hi::Unbounded,
            },
        }
    }

    /// The entries, in the order declared.
    pub fn iter(&self) -> impl Iterator<Item = Declared<'_>> + '_ {
        self.entries.iter().map(|e| self.get(e))
    }

    /// Whether an access of `key` is covered: a read by any entry but a
    /// blind write, a write by a write entry.
    pub fn covers(&self, table: TableId, access: Access, key: &[u8]) -> bool {
        self.iter().any(|d| {
            d.table == table
                && match access {
                    Access::Read => !d.blind,
                    Access::Write => d.access == Access::Write,
                }
                && d.contains(key)
        })
    }

    /// Whether a scan of `(lo, hi)` lies within one declared entry.
    pub fn covers_scan(&self, table: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        self.iter()
            .any(|d| d.table == table && d.contains_range(lo, hi))
    }
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// A transaction that lets through only what a [`KeySet`] declares: the
/// batch path's check of a request's declaration.
pub(crate) struct Checked<'t, 'k, T> {
    pub(crate) tx: &'t mut T,
    pub(crate) keys: &'k KeySet,
    /// Reads go unchecked (a reconnaissance: it reads what it must to find
    /// the keys; it may write nothing, `keys` being empty).
    pub(crate) any_read: bool,
}

fn undeclared(what: &str, t: TableId, key: &[u8]) -> TxError {
    TxError::Error(Error::InvalidArgument(format!(
        "request {what} key {key:02x?} of table {} outside its declared key set",
        t.as_u32()
    )))
}

impl<T: Transaction> Checked<'_, '_, T> {
    #[inline]
    fn check(&self, t: TableId, access: Access, key: &[u8]) -> TxResult<()> {
        if (self.any_read && access == Access::Read) || self.keys.covers(t, access, key) {
            Ok(())
        } else {
            let what = match access {
                Access::Read => "read",
                Access::Write => "wrote",
            };
            Err(undeclared(what, t, key))
        }
    }
}

impl<T: Transaction> Transaction for Checked<'_, '_, T> {
    fn get(&mut self, t: TableId, key: &[u8]) -> TxResult<Option<&[u8]>> {
        self.check(t, Access::Read, key)?;
        self.tx.get(t, key)
    }
    fn get_slice(
        &mut self,
        t: TableId,
        key: &[u8],
        at: std::ops::Range<usize>,
    ) -> TxResult<Option<&[u8]>> {
        self.check(t, Access::Read, key)?;
        self.tx.get_slice(t, key, at)
    }
    // A prefetch reads nothing: the gets that follow are checked.
    fn prefetch(&mut self, t: TableId, keys: &[&[u8]], value_len: usize) {
        self.tx.prefetch(t, keys, value_len)
    }
    fn put(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<()> {
        self.check(t, Access::Write, key)?;
        self.tx.put(t, key, val)
    }
    fn insert(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.check(t, Access::Write, key)?;
        self.tx.insert(t, key, val)
    }
    fn update(&mut self, t: TableId, key: &[u8], val: &[u8]) -> TxResult<bool> {
        self.check(t, Access::Write, key)?;
        self.tx.update(t, key, val)
    }
    fn delete(&mut self, t: TableId, key: &[u8]) -> TxResult<bool> {
        self.check(t, Access::Write, key)?;
        self.tx.delete(t, key)
    }
    fn scan<F>(
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
        if !self.any_read && !self.keys.covers_scan(t, lo, hi) {
            let k = match lo {
                Bound::Included(k) | Bound::Excluded(k) => k,
                Bound::Unbounded => &[],
            };
            return Err(undeclared("scanned from", t, k));
        }
        self.tx.scan(t, lo, hi, opts, f)
    }
    fn is_snapshot(&self) -> bool {
        self.tx.is_snapshot()
    }
}

/// A request run through [`Checked`]: the body sees only its declared keys.
pub(crate) struct CheckedRequest<'r, 'k, R> {
    pub(crate) r: &'r mut R,
    pub(crate) keys: &'k KeySet,
}

impl<R: Request> Request for CheckedRequest<'_, '_, R> {
    type Output = R::Output;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<R::Output> {
        self.r.run(&mut Checked {
            tx,
            keys: self.keys,
            any_read: false,
        })
    }
}

/// A request's reconnaissance as a request (run read-only before the body).
pub(crate) struct Reconnaissance<'r, R>(pub(crate) &'r mut R);

impl<R: Request> Request for Reconnaissance<'_, R> {
    type Output = ();
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<()> {
        // Read-only, enforced: with no key declared, any write is refused.
        let none = KeySet::new();
        self.0.reconnoiter(&mut Checked {
            tx,
            keys: &none,
            any_read: true,
        })
    }
}

/// The speculation-induced abort of a body whose reconnaissance no longer
/// holds.
pub fn stale_reconnaissance<T>() -> TxResult<T> {
    Err(TxError::Conflict(ConflictReason::Reconnaissance))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(n: u32) -> TableId {
        TableId(n)
    }

    #[test]
    fn keys_and_ranges_cover_what_they_declare() {
        let mut k = KeySet::new();
        k.read(t(1), b"a");
        k.write(t(1), b"b");
        k.write_range(t(2), b"d1-", b"d1-\xff");
        k.read_table(t(3));
        assert!(k.covers(t(1), Access::Read, b"a"));
        assert!(!k.covers(t(1), Access::Write, b"a"));
        assert!(k.covers(t(1), Access::Read, b"b"));
        assert!(k.covers(t(1), Access::Write, b"b"));
        assert!(!k.covers(t(1), Access::Read, b"c"));
        assert!(k.covers(t(2), Access::Write, b"d1-7"));
        assert!(!k.covers(t(2), Access::Write, b"d2-7"));
        assert!(k.covers(t(3), Access::Read, b"anything"));
        assert!(!k.covers(t(3), Access::Write, b"anything"));
        assert!(!k.covers(t(4), Access::Read, b"a"));
        assert_eq!(k.len(), 4);
        let d: Vec<_> = k.iter().collect();
        assert!(d[0].is_key() && d[0].hi() == Some(&b"a"[..]));
        assert_eq!(d[2].hi(), Some(&b"d1-\xff"[..]));
        assert_eq!(d[3].hi(), None);
        k.clear();
        assert!(k.is_empty() && !k.covers(t(1), Access::Read, b"a"));
    }

    #[test]
    fn scans_must_lie_within_one_entry() {
        let mut k = KeySet::new();
        k.read_range(t(1), b"b", b"d");
        let (i, e) = (Bound::Included, Bound::Excluded);
        assert!(k.covers_scan(t(1), i(b"b"), i(b"d")));
        assert!(k.covers_scan(t(1), e(b"b"), e(b"d")));
        assert!(k.covers_scan(t(1), i(b"c"), e(b"d\0")));
        assert!(!k.covers_scan(t(1), i(b"a"), i(b"c")));
        assert!(!k.covers_scan(t(1), i(b"b"), i(b"e")));
        assert!(!k.covers_scan(t(1), i(b"b"), Bound::Unbounded));
        assert!(!k.covers_scan(t(1), Bound::Unbounded, i(b"c")));
        assert!(!k.covers_scan(t(2), i(b"b"), i(b"c")));
        k.read_table(t(2));
        assert!(k.covers_scan(t(2), Bound::Unbounded, Bound::Unbounded));
        k.read_from(t(3), b"m");
        assert!(k.covers_scan(t(3), i(b"m"), Bound::Unbounded));
        assert!(!k.covers_scan(t(3), i(b"l"), Bound::Unbounded));
    }
}

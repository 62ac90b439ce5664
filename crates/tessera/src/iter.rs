//! Iterator scans: [`Txn::range`] and [`Txn::prefix`] (and the same on any
//! [`Transaction`]).
//!
//! A [`RangeIter`] is the protocol's own callback scan, run in chunks. Each
//! chunk is one `scan` call over what is left of the range: it starts just
//! past the last key the front end handed out (or just before the last key
//! the back end handed out, for `.rev()`/`next_back`), stops after a batch of
//! rows, and copies them into the iterator's buffer. Chunks start small (so
//! `next()` on a long range reads a few rows, not the range) and double up to
//! [`MAX_CHUNK`].
//!
//! **Phantom protection.** Contiguous chunks of one range are, for every
//! protocol's phantom protection, one scan over their union: Silo's node
//! set gains each chunk's leaves (validated at commit like one scan's), ROCC
//! and GWV gain a predicate per chunk over the logical ranges it touched,
//! MVRCC stamps each chunk's ranges with its read timestamp, and the 2PL
//! protocols validate the union's leaves while their locks are held. So an
//! iterator run to its end protects the whole range exactly as
//! [`Txn::scan`] does, and one dropped early protects what it fetched (a
//! superset of what it handed out), as a scan with a limit does.
//!
//! [`Txn::range`]: crate::Txn::range
//! [`Txn::prefix`]: crate::Txn::prefix
//! [`Txn::scan`]: crate::Txn::scan

use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};

use crate::catalog::TableId;
use crate::error::{TxError, TxResult};
use crate::txn::{ScanOptions, Transaction};

/// The first chunk's size in rows.
const FIRST_CHUNK: usize = 8;
/// The largest chunk in rows.
pub(crate) const MAX_CHUNK: usize = 512;

/// One row of an iterator scan: the key and the value, copied out.
pub type Row = (Vec<u8>, Vec<u8>);

/// An iterator over the rows of a key range inside one transaction, in
/// ascending key order (descending from the back: it is a
/// [`DoubleEndedIterator`], so `.rev()` works). Made by
/// [`Txn::range`](crate::Txn::range) and [`Txn::prefix`](crate::Txn::prefix);
/// see them for an example.
///
/// Each item is a `(key, value)` pair or the transaction's error (a
/// conflict, which `Worker::run` retries once the closure returns it). After
/// an error the iterator ends; a conflict fails the transaction even if
/// the body drops it (a `.flatten()`), so a cut-short range never commits. It borrows the transaction mutably, so the
/// body writes after iterating (or collects first).
#[must_use = "an iterator scan reads nothing until it is iterated"]
pub struct RangeIter<'t, T: Transaction> {
    tx: &'t mut T,
    table: TableId,
    /// The part of the range not yet fetched by either end.
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    /// Rows fetched by the front end, ascending.
    front: VecDeque<Row>,
    /// Rows fetched by the back end, ascending (so `next_back` pops its
    /// back, and `next` pops its front once the middle is empty).
    back: VecDeque<Row>,
    front_chunk: usize,
    back_chunk: usize,
    /// The unfetched middle `(lo, hi)` holds no more rows.
    middle_done: bool,
}

impl<T: Transaction> std::fmt::Debug for RangeIter<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeIter")
            .field("table", &self.table)
            .field("lo", &self.lo)
            .field("hi", &self.hi)
            .field("buffered", &(self.front.len() + self.back.len()))
            .field("middle_done", &self.middle_done)
            .finish()
    }
}

impl<'t, T: Transaction> RangeIter<'t, T> {
    pub(crate) fn new(
        tx: &'t mut T,
        table: TableId,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> Self {
        let middle_done = empty_range(&lo, &hi);
        RangeIter {
            tx,
            table,
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
            front_chunk: FIRST_CHUNK,
            back_chunk: FIRST_CHUNK,
            middle_done,
        }
    }

    /// Fetch the next chunk from the front (`reverse == false`) or the back
    /// of the unfetched middle.
    fn fetch(&mut self, reverse: bool) -> TxResult<()> {
        let chunk = if reverse {
            self.back_chunk
        } else {
            self.front_chunk
        };
        let mut opts = ScanOptions::new().limit(chunk);
        if reverse {
            opts = opts.reverse();
        }
        let rows =
            self.tx
                .scan_collect(self.table, as_slice(&self.lo), as_slice(&self.hi), opts)?;
        if rows.len() < chunk {
            // The scan ran to the far bound: nothing is left between.
            self.middle_done = true;
        }
        if reverse {
            if let Some((k, _)) = rows.last() {
                self.hi = Bound::Excluded(k.clone());
            }
            for r in rows {
                self.back.push_front(r);
            }
            self.back_chunk = (chunk * 2).min(MAX_CHUNK);
        } else {
            if let Some((k, _)) = rows.last() {
                self.lo = Bound::Excluded(k.clone());
            }
            self.front.extend(rows);
            self.front_chunk = (chunk * 2).min(MAX_CHUNK);
        }
        if !self.middle_done && empty_range(&self.lo, &self.hi) {
            self.middle_done = true;
        }
        Ok(())
    }

    /// End the iteration after error `e`. A conflict also fails the
    /// transaction at its end, so a body that drops the error (with
    /// `.flatten()`, say) cannot commit what it decided on a cut-short
    /// range.
    fn stop(&mut self, e: &TxError) {
        if let TxError::Conflict(r) = e {
            self.tx.poison(*r);
        }
        self.middle_done = true;
        self.front.clear();
        self.back.clear();
    }
}

impl<T: Transaction> RangeIter<'_, T> {
    /// The next row from the front, or from the back when `back`: from that
    /// end's buffer (fetched when empty and rows are left between), then
    /// from the other end's once the middle is empty.
    fn step(&mut self, back: bool) -> Option<TxResult<Row>> {
        let own = if back { &self.back } else { &self.front };
        if own.is_empty() && !self.middle_done {
            if let Err(e) = self.fetch(back) {
                self.stop(&e);
                return Some(Err(e));
            }
        }
        let row = if back {
            self.back.pop_back().or_else(|| self.front.pop_back())
        } else {
            self.front.pop_front().or_else(|| self.back.pop_front())
        };
        row.map(Ok)
    }
}

impl<T: Transaction> Iterator for RangeIter<'_, T> {
    type Item = TxResult<Row>;

    fn next(&mut self) -> Option<TxResult<Row>> {
        self.step(false)
    }
}

impl<T: Transaction> DoubleEndedIterator for RangeIter<'_, T> {
    fn next_back(&mut self) -> Option<TxResult<Row>> {
        self.step(true)
    }
}

impl<T: Transaction> std::iter::FusedIterator for RangeIter<'_, T> {}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Whether no key lies within `(lo, hi)` (so no scan is needed).
fn empty_range(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}

/// The owned bounds of `range`.
pub(crate) fn owned_bounds<K, R>(range: R) -> (Bound<Vec<u8>>, Bound<Vec<u8>>)
where
    K: AsRef<[u8]> + ?Sized,
    R: RangeBounds<K>,
{
    let own = |b: Bound<&K>| b.map(|k| k.as_ref().to_vec());
    (own(range.start_bound()), own(range.end_bound()))
}

/// The bounds of the keys that start with `prefix`: from the prefix itself
/// up to, excluding, the smallest key greater than every key that starts
/// with it (the prefix with its last byte below 0xFF incremented and what
/// follows dropped; unbounded when every byte is 0xFF).
pub(crate) fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let hi = match prefix.iter().rposition(|&b| b != 0xFF) {
        Some(i) => {
            let mut end = prefix[..=i].to_vec();
            end[i] += 1;
            Bound::Excluded(end)
        }
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_bounds_cover_exactly_the_prefixed_keys() {
        assert_eq!(
            prefix_bounds(b"ab"),
            (
                Bound::Included(b"ab".to_vec()),
                Bound::Excluded(b"ac".to_vec())
            )
        );
        assert_eq!(
            prefix_bounds(&[1, 0xFF, 0xFF]),
            (
                Bound::Included(vec![1, 0xFF, 0xFF]),
                Bound::Excluded(vec![2])
            )
        );
        assert_eq!(
            prefix_bounds(&[0xFF]),
            (Bound::Included(vec![0xFF]), Bound::Unbounded)
        );
        assert_eq!(
            prefix_bounds(b""),
            (Bound::Included(vec![]), Bound::Unbounded)
        );
    }

    #[test]
    fn empty_ranges_are_recognized() {
        let v = |s: &[u8]| s.to_vec();
        assert!(empty_range(
            &Bound::Included(v(b"b")),
            &Bound::Included(v(b"a"))
        ));
        assert!(!empty_range(
            &Bound::Included(v(b"a")),
            &Bound::Included(v(b"a"))
        ));
        assert!(empty_range(
            &Bound::Included(v(b"a")),
            &Bound::Excluded(v(b"a"))
        ));
        assert!(empty_range(
            &Bound::Excluded(v(b"a")),
            &Bound::Excluded(v(b"a"))
        ));
        assert!(!empty_range(&Bound::Excluded(v(b"a")), &Bound::Unbounded));
    }
}

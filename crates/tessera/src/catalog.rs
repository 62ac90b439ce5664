//! Tables and secondary indexes.
//!
//! A table is an ordered map from byte keys to byte values: one ordered
//! index ([`TableIndex`], an [`OrderedIndex`] chosen per table; the
//! [`BTree`] today) whose values point at [`Record`] heads. A secondary index is a table of
//! the same kind whose keys are secondary keys (made unique by appending the
//! primary key) and whose values are primary keys; the application updates
//! it in the same transaction as the primary table, and a transaction that
//! reads through it validates both (Silo section 4.7). Tables are never
//! dropped while their database is open, so a `TableId` stays valid.

use std::ops::Bound;

use crate::epoch::Guard;
use crate::index::{BTree, Insert, LeafRef, Lookup, OrderedIndex, RangeObserver};
use crate::storage::mvcc::MvRecord;
use crate::storage::Record;

/// A record layout a table's index can name: its values are pointers to
/// heads of this type.
///
/// # Safety
/// Implementors are record heads made by the storage layer and freed only
/// through the epoch after they have left their index, by [`Self::FREE`].
/// Code outside the protocol that made them reads none of their bits: it
/// passes the index's values on (to the protocol's `read_committed`) or
/// frees them with `FREE`, so a layout need not contain a `Record`.
pub(crate) unsafe trait RecordHead: 'static {
    /// Free a record of this layout and everything it owns (the caller
    /// has exclusive access: see [`Record::free`]).
    const FREE: unsafe fn(*mut u8);
    /// A record's value lives in the newest version of a chain that its
    /// head points to, so a batched lookup that prefetches values also
    /// prefetches each found record's newest version
    /// ([`Record::prefetch_newest`]) once the head is in.
    const CHAINED: bool;
}
// SAFETY: the record head itself.
unsafe impl RecordHead for Record {
    const FREE: unsafe fn(*mut u8) = Record::free;
    const CHAINED: bool = false;
}
// SAFETY: `repr(transparent)` over `Record`, whose free walks the chain.
unsafe impl RecordHead for MvRecord {
    const FREE: unsafe fn(*mut u8) = Record::free;
    const CHAINED: bool = true;
}

/// A table's ordered index: one of the [`OrderedIndex`] implementations,
/// chosen when the table is created. Calls go through one `match` (with a
/// single implementation today, none at run time); a hash index for
/// point-only tables and FOEDUS's Master-Tree are meant to be the next
/// variants.
pub(crate) enum TableIndex {
    /// The concurrent B+-tree (`index::BTree`).
    BTree(BTree),
}

macro_rules! on_index {
    ($self:expr, $i:ident => $e:expr) => {
        match $self {
            TableIndex::BTree($i) => $e,
        }
    };
}

impl OrderedIndex for TableIndex {
    #[inline]
    fn get(&self, key: &[u8], g: &Guard<'_>) -> Lookup {
        on_index!(self, i => i.get(key, g))
    }
    #[inline]
    fn get_with_leaf(&self, key: &[u8], g: &Guard<'_>) -> (Option<u64>, LeafRef, u64) {
        on_index!(self, i => i.get_with_leaf(key, g))
    }
    #[inline]
    fn insert(&self, key: &[u8], value: u64, g: &Guard<'_>) -> Insert {
        on_index!(self, i => i.insert(key, value, g))
    }
    #[inline]
    fn get_batch(&self, keys: &[&[u8]], out: &mut [u64], g: &Guard<'_>) {
        on_index!(self, i => i.get_batch(keys, out, g))
    }
    #[inline]
    fn insert_hinted(
        &self,
        key: &[u8],
        value: u64,
        g: &Guard<'_>,
        hint: &mut crate::index::InsertHint,
    ) -> Insert {
        on_index!(self, i => i.insert_hinted(key, value, g, hint))
    }
    #[inline]
    fn remove(&self, key: &[u8], expected: u64, g: &Guard<'_>) -> bool {
        on_index!(self, i => i.remove(key, expected, g))
    }
    #[inline]
    fn replace(&self, key: &[u8], expected: u64, new: u64, g: &Guard<'_>) -> bool {
        on_index!(self, i => i.replace(key, expected, new, g))
    }
    #[inline]
    fn scan<F, O>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        g: &Guard<'_>,
        observer: O,
        f: F,
    ) where
        F: FnMut(&[u8], u64) -> bool,
        O: RangeObserver,
    {
        on_index!(self, i => i.scan(lo, hi, reverse, g, observer, f))
    }
    #[inline]
    fn stamp_floor(&self) -> u64 {
        on_index!(self, i => i.stamp_floor())
    }
}

/// A table handle: a small copyable id, valid for the database that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The numeric id (creation order).
    pub fn as_u32(self) -> u32 {
        self.0
    }

    /// The id whose [`as_u32`](TableId::as_u32) is `n`: for decoding
    /// logged arguments (`det::Procedure::decode`). Ids are stable across
    /// recovery; one this database never handed out is refused where it is
    /// used (`Error::BadTableId`).
    pub const fn from_u32(n: u32) -> TableId {
        TableId(n)
    }
}

/// A table: its name and its primary index.
pub struct Table {
    pub(crate) id: TableId,
    pub(crate) name: String,
    /// True for secondary indexes (informational).
    pub(crate) secondary: bool,
    pub(crate) index: TableIndex,
}

impl Table {
    pub(crate) fn new(id: TableId, name: String, secondary: bool) -> Table {
        Table {
            id,
            name,
            secondary,
            index: TableIndex::BTree(BTree::new()),
        }
    }

    /// The record of `key` in this table's layout `R`, borrowed for as long
    /// as `g` pins the epoch. Protocols reach it safely through
    /// `cc::Records`, which picks `R` from the protocol.
    ///
    /// # Safety
    /// `R` is the layout of this database's records (one per database: its
    /// protocol's).
    #[inline]
    pub(crate) unsafe fn lookup<'g, R: RecordHead>(
        &self,
        key: &[u8],
        g: &'g Guard<'_>,
    ) -> Option<&'g R> {
        match self.index.get(key, g) {
            // SAFETY: every value of a table's index is a record head of the
            // database's layout (the caller's promise), freed only through
            // the epoch after leaving the index, and `g` pins the epoch: it
            // outlives the borrow.
            Lookup::Found(v) => Some(unsafe { &*(v as *const R) }),
            Lookup::Missing { .. } => None,
        }
    }

    /// [`Table::lookup`], also naming the leaf whose range holds `key` and
    /// its version, whether the key is there or not.
    ///
    /// # Safety
    /// As [`Table::lookup`].
    #[inline]
    pub(crate) unsafe fn lookup_with_leaf<'g, R: RecordHead>(
        &self,
        key: &[u8],
        g: &'g Guard<'_>,
    ) -> (Option<&'g R>, LeafRef, u64) {
        let (found, leaf, version) = self.index.get_with_leaf(key, g);
        // SAFETY: as in `lookup`.
        (found.map(|v| unsafe { &*(v as *const R) }), leaf, version)
    }

    /// Ordered scan of `[lo, hi]` handing each record, borrowed for as long
    /// as `g` pins the epoch, to `f` (see [`OrderedIndex::scan`]).
    ///
    /// # Safety
    /// As [`Table::lookup`].
    #[inline]
    pub(crate) unsafe fn scan_records<'g, R: RecordHead, O: RangeObserver>(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        g: &'g Guard<'_>,
        observer: O,
        mut f: impl FnMut(&[u8], &'g R) -> bool,
    ) {
        self.index.scan(lo, hi, reverse, g, observer, |k, v| {
            // SAFETY: as in `lookup`.
            f(k, unsafe { &*(v as *const R) })
        })
    }

    /// Free every record still linked from the index with `free`, the
    /// protocol's [`RecordHead::FREE`] (database drop only).
    pub(crate) fn free_records(&self, g: &Guard<'_>, free: unsafe fn(*mut u8)) {
        let mut recs = Vec::new();
        self.index.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            g,
            crate::index::Unobserved,
            |_, v| {
                recs.push(v);
                true
            },
        );
        for r in recs {
            // SAFETY: the database is being dropped: no worker exists, each
            // record is linked from exactly one index entry, and `free` is
            // the layout's own.
            unsafe { free(r as *mut u8) };
        }
    }
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("secondary", &self.secondary)
            .finish()
    }
}

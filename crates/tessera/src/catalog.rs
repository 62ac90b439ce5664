//! Tables and secondary indexes.
//!
//! A table is an ordered map from byte keys to byte values: one [`BTree`]
//! whose values point at [`Record`] heads. A secondary index is a table of
//! the same kind whose keys are secondary keys (made unique by appending the
//! primary key) and whose values are primary keys; the application updates
//! it in the same transaction as the primary table, and a transaction that
//! reads through it validates both (Silo section 4.7). Tables are never
//! dropped while their database is open, so a `TableId` stays valid.

use std::ops::Bound;

use crate::epoch::Guard;
use crate::index::BTree;
use crate::storage::Record;

/// A table handle: a small copyable id, valid for the database that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableId(pub(crate) u32);

impl TableId {
    /// The numeric id (creation order).
    pub fn as_u32(self) -> u32 {
        self.0
    }
}

/// A table: its name and its primary index.
pub struct Table {
    pub(crate) id: TableId,
    pub(crate) name: String,
    /// True for secondary indexes (informational).
    pub(crate) secondary: bool,
    pub(crate) index: BTree,
}

impl Table {
    pub(crate) fn new(id: TableId, name: String, secondary: bool) -> Table {
        Table {
            id,
            name,
            secondary,
            index: BTree::new(),
        }
    }

    /// Free every record still linked from the index (database drop only).
    pub(crate) fn free_records(&self, g: &Guard<'_>) {
        let mut recs = Vec::new();
        self.index.scan(
            Bound::Unbounded,
            Bound::Unbounded,
            false,
            g,
            |_, _| {},
            |_, v| {
                recs.push(v);
                true
            },
        );
        for r in recs {
            // SAFETY: the database is being dropped: no worker exists, and each
            // record is linked from exactly one index entry.
            unsafe { Record::free(r as *mut u8) };
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

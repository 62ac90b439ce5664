//! Concurrency-control protocols. Each protocol is a module of functions over
//! the shared substrate (records, index, epochs); [`crate::Txn`] dispatches to
//! them. What they share lives here: the per-transaction sets and the
//! unlinking of deleted records.

pub mod ermia;
pub mod nocc;
pub mod silo;
pub mod snapshot;
pub mod xid;

use std::collections::HashMap;

use crate::catalog::{Table, TableId};
use crate::db::{DbInner, PendingUnlink, WorkerState};
use crate::epoch::Guard;
use crate::index::LeafRef;
use crate::storage::tid::*;
use crate::storage::Record;

/// An entry of the read set: a record and the TID word observed.
#[derive(Clone, Copy)]
pub(crate) struct ReadEntry {
    pub rec: *const Record,
    pub tid: u64,
}

/// What a write does at commit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WriteKind {
    Put,
    Delete,
}

/// `observed` value of a blind write.
pub(crate) const BLIND: u64 = u64::MAX;

/// An entry of the write set.
#[derive(Clone, Copy)]
pub(crate) struct WriteEntry {
    pub rec: *const Record,
    pub table: TableId,
    pub kind: WriteKind,
    /// Value bytes in `TxnSets::wbuf`.
    pub val: (u32, u32),
    /// Key bytes in `TxnSets::wbuf` (kept for deletes and created records).
    pub key: (u32, u32),
    /// TID word (lock bit clear) that must still be there at commit, or
    /// [`BLIND`].
    pub observed: u64,
    /// This transaction inserted the (absent) record into the index.
    pub created: bool,
    /// TID word found when the commit locked the record.
    pub locked_tid: u64,
}

impl WriteEntry {
    /// A write of `rec` that has not locked anything yet.
    pub fn new(rec: *const Record, table: TableId, kind: WriteKind, val: (u32, u32)) -> Self {
        WriteEntry {
            rec,
            table,
            kind,
            val,
            key: (0, 0),
            observed: BLIND,
            created: false,
            locked_tid: 0,
        }
    }
}

/// An entry of the node set (Silo section 4.6): a leaf and its version.
#[derive(Clone, Copy)]
pub(crate) struct NodeEntry {
    pub leaf: LeafRef,
    pub version: u64,
}

/// Hashes a record address for [`AddrMap`]: one multiplication and a fold
/// (the default SipHash cost 3.7% of a Silo worker's instructions under
/// TPC-C, whose NewOrder and Delivery write sets pass `WINDEX_MIN`).
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_usize(self.0 as usize ^ b as usize);
        }
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        // Addresses are aligned, so the product's low bits carry little;
        // fold the high half in (the table indexes by the low bits).
        let x = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = x ^ (x >> 29);
    }
}

/// Record address -> index into the write set.
pub(crate) type AddrMap = HashMap<usize, usize, std::hash::BuildHasherDefault<AddrHasher>>;

/// Above this many writes, own-write lookups use a hash map.
const WINDEX_MIN: usize = 24;

/// The read, write and node sets of the running transaction, plus buffers.
/// Owned by the worker and reused, so a transaction allocates nothing in the
/// steady state.
#[derive(Default)]
pub(crate) struct TxnSets {
    pub reads: Vec<ReadEntry>,
    pub writes: Vec<WriteEntry>,
    pub nodes: Vec<NodeEntry>,
    /// Values and keys of the write set.
    pub wbuf: Vec<u8>,
    /// The value returned by the last read.
    pub rbuf: Vec<u8>,
    /// rec -> index into `writes`, once the write set is large.
    pub windex: AddrMap,
    /// The record the last `get` found, so that a write of the same key
    /// right after it (read-modify-write, the common case in TPC-C) skips
    /// the second index descent and record read.
    pub last: LastFound,
    /// ERMIA/SSN: versions read and tracked for the commit-time checks.
    pub vreads: Vec<*const crate::storage::Version>,
    /// ERMIA: the versions this transaction installed.
    pub mvw: Vec<ermia::MvWrite>,
}

/// See [`TxnSets::last`].
pub(crate) struct LastFound {
    pub table: u32,
    pub key: Vec<u8>,
    pub rec: *const Record,
    /// TID word the `get` observed (it is in the read set).
    pub tid: u64,
}

impl Default for LastFound {
    fn default() -> Self {
        LastFound {
            table: u32::MAX,
            key: Vec::new(),
            rec: std::ptr::null(),
            tid: 0,
        }
    }
}

impl LastFound {
    #[inline]
    pub fn set(&mut self, table: TableId, key: &[u8], rec: *const Record, tid: u64) {
        self.table = table.0;
        self.key.clear();
        self.key.extend_from_slice(key);
        self.rec = rec;
        self.tid = tid;
    }

    /// The record and observed TID if the last `get` was of `key` in `table`.
    #[inline]
    pub fn matches(&self, table: TableId, key: &[u8]) -> Option<(*const Record, u64)> {
        (self.table == table.0 && self.key == key).then_some((self.rec, self.tid))
    }

    #[inline]
    pub fn forget(&mut self) {
        self.table = u32::MAX;
    }
}

// SAFETY: the raw record pointers are only dereferenced by the owning worker
// while it is pinned.
unsafe impl Send for TxnSets {}

impl TxnSets {
    pub fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.nodes.clear();
        self.wbuf.clear();
        self.rbuf.clear();
        self.windex.clear();
        self.last.forget();
        self.vreads.clear();
        self.mvw.clear();
    }

    /// Index of the write-set entry for `rec`, if any.
    #[inline]
    pub fn find_write(
        writes: &[WriteEntry],
        windex: &AddrMap,
        rec: *const Record,
    ) -> Option<usize> {
        if writes.len() >= WINDEX_MIN {
            return windex.get(&(rec as usize)).copied();
        }
        writes.iter().position(|w| w.rec == rec)
    }

    #[inline]
    pub fn push_write(&mut self, w: WriteEntry) {
        let i = self.writes.len();
        self.writes.push(w);
        if self.writes.len() == WINDEX_MIN {
            for (j, w) in self.writes.iter().enumerate() {
                self.windex.insert(w.rec as usize, j);
            }
        } else if self.writes.len() > WINDEX_MIN {
            self.windex.insert(w.rec as usize, i);
        }
    }

    /// Append bytes to `wbuf`, returning (offset, len).
    #[inline]
    pub fn stash(&mut self, bytes: &[u8]) -> (u32, u32) {
        let off = self.wbuf.len();
        self.wbuf.extend_from_slice(bytes);
        (off as u32, bytes.len() as u32)
    }

    #[inline]
    pub fn stashed(&self, r: (u32, u32)) -> &[u8] {
        &self.wbuf[r.0 as usize..(r.0 + r.1) as usize]
    }
}

/// Unlink a deleted record from its index if it is still the deletion with
/// TID `tid`, and retire it. The lock keeps a concurrent re-insert (which
/// reuses the absent record) out; clearing `LATEST` makes anyone still holding
/// the record retry through the index.
pub(crate) fn unlink(t: &Table, g: &Guard<'_>, key: &[u8], rec: *const Record, tid: u64) {
    // SAFETY: the record is still linked (or at least not yet retired: only
    // the holder of this pending entry retires it), and we are pinned.
    let r = unsafe { &*rec };
    let cur = r.lock();
    if cur & !LOCK == tid && cur & ABSENT != 0 {
        let removed = t.index.remove(key, rec as u64, g);
        if !removed {
            // Not linked under this key (cannot happen while LATEST is set);
            // leave the record as it is rather than strand it.
            r.unlock();
            return;
        }
        r.unlock_with((cur & !LOCK) & !LATEST);
        {
            // SAFETY: unlinked from the index just now; nobody else retires it
            // (re-inserts reuse it only while LATEST is set).
            unsafe { g.retire(rec as *mut u8, Record::free) };
        }
    } else {
        r.unlock();
    }
}

/// Between transactions: unlink deleted records that no snapshot can see any
/// more (only pending when snapshots are on).
pub(crate) fn maintain(db: &DbInner, st: &mut WorkerState, g: &Guard<'_>) {
    if st.pending_unlinks.is_empty() {
        if db.opts.snapshots {
            if let Some(mut o) = db.orphan_unlinks.try_lock() {
                st.pending_unlinks.extend(o.drain(..));
            }
        }
        return;
    }
    let min = db.epochs.snapshot_min();
    while let Some(p) = st.pending_unlinks.front() {
        if epoch_of(p.tid) >= min {
            break;
        }
        let p: PendingUnlink = st.pending_unlinks.pop_front().expect("front");
        let i = p.table.0 as usize;
        if i >= st.tables.len() {
            st.tables = db.tables.read().clone();
        }
        unlink(&st.tables[i], g, &p.key, p.rec, p.tid);
    }
}

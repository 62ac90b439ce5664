//! ERMIA's transaction-id (TID) table (ERMIA section 3.1, 3.6.1): the
//! context of every in-flight transaction, so that a reader meeting a version
//! stamped with its creator's transaction id can ask that creator its state
//! and commit stamp.
//!
//! ERMIA recycles TIDs from a 64K-entry table guarded by its own epoch
//! manager. Here each worker owns one slot (a worker runs one transaction at
//! a time), and a transaction id is `(generation << SLOT_BITS) | slot`: the
//! generation counts the slot's transactions. A reader that finds a newer
//! generation in the slot than the id it holds knows the owner has finished
//! (committed with its versions re-stamped, or aborted with them removed) and
//! re-reads the version's stamp: ERMIA's "invalid TID (older generation)"
//! rule. Because a stale id is always detected, slots can be reused at once;
//! no TID-recycling epoch is needed.
//!
//! Reading a context is a seqlock read: id, then fields, then the id again;
//! the owner changes the id last when it starts its next transaction.
//!
//! Version stamps: a version's stamp word holds either a commit stamp or a
//! transaction id with [`XID_FLAG`] set (ERMIA tells the two apart with the
//! "address space identifier" bits of its fat pointers; any tag bit will do).

use std::sync::atomic::{fence, AtomicU64, AtomicU8, Ordering};

/// Tag bit of a version stamp that is a transaction id, not a commit stamp
/// (the multi-version layout's, defined with it in `storage::mvcc`).
pub use crate::storage::mvcc::XID_FLAG;
/// Bits of a transaction id that name the slot (at most 4096 workers).
pub const SLOT_BITS: u32 = 12;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// A transaction's state, as other transactions see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum XidState {
    /// Executing: its versions are invisible to others.
    Active = 0,
    /// In pre-commit: it holds a commit stamp (`end`) but may still abort.
    Committing = 1,
    /// Committed: its versions are visible to snapshots after `end`.
    Committed = 2,
    /// Aborted: its versions are being (or have been) removed.
    Aborted = 3,
}

impl XidState {
    fn from_u8(v: u8) -> XidState {
        match v {
            0 => XidState::Active,
            1 => XidState::Committing,
            2 => XidState::Committed,
            _ => XidState::Aborted,
        }
    }
}

/// One slot of the table. Aligned to a cache line: each is written by its
/// owner on every transaction and read by others.
#[repr(align(64))]
#[derive(Default)]
struct Context {
    /// The id of the slot's current (or last) transaction; 0: never used.
    xid: AtomicU64,
    state: AtomicU8,
    /// Begin stamp.
    begin: AtomicU64,
    /// Commit stamp, once in pre-commit (0 until it is known).
    end: AtomicU64,
    /// SSN: π(T), published before the state becomes `Committed`.
    sstamp: AtomicU64,
    /// The begin stamp this slot keeps alive for version GC: [`IDLE`],
    /// [`PENDING`] while a transaction is taking its begin stamp, or the
    /// begin stamp. Outside the seqlock: only the GC watermark reads it.
    snap: AtomicU64,
}

/// `Context::snap` of a slot running no transaction.
const IDLE: u64 = u64::MAX;
/// `Context::snap` while the slot's transaction reads the commit clock.
const PENDING: u64 = u64::MAX - 1;

/// What a reader learned about a transaction id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The transaction is still the slot's current one.
    Current {
        /// Its state when looked up.
        state: XidState,
        /// Its begin stamp.
        begin: u64,
        /// Its commit stamp (0 before pre-commit, and in pre-commit until
        /// the stamp is known).
        end: u64,
        /// SSN: its π, once `Committed`.
        sstamp: u64,
    },
    /// The slot has moved on: the transaction finished; re-read the stamp.
    Stale,
}

/// The table: one context per worker slot.
pub struct XidTable {
    slots: Box<[Context]>,
}

impl XidTable {
    /// A table for `workers` worker slots.
    pub fn new(workers: usize) -> XidTable {
        assert!(
            workers as u64 <= SLOT_MASK + 1,
            "at most {} workers",
            SLOT_MASK + 1
        );
        XidTable {
            slots: (0..workers)
                .map(|_| Context {
                    snap: AtomicU64::new(IDLE),
                    ..Context::default()
                })
                .collect(),
        }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether the table has no slots.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Start slot `slot`'s next transaction, taking its begin stamp from
    /// `clock` in a way the GC watermark cannot miss: the slot is marked
    /// [`PENDING`] before the clock is read, so a watermark computed
    /// concurrently either sees the mark (and does not advance) or read the
    /// clock no later than this transaction did. Returns (id, begin).
    pub fn begin_from(&self, slot: usize, clock: &AtomicU64) -> (u64, u64) {
        let c = &self.slots[slot];
        c.snap.store(PENDING, Ordering::SeqCst);
        let begin = clock.load(Ordering::SeqCst);
        let xid = self.begin(slot, begin);
        c.snap.store(begin, Ordering::SeqCst);
        (xid, begin)
    }

    /// [`XidTable::begin_from`] for timestamp ordering (MVRCC): the begin
    /// stamp is a fresh, unique timestamp, one fetch-and-add on `clock`, so
    /// the clock never falls behind a running transaction's stamp. Returns
    /// (id, timestamp).
    pub fn begin_unique(&self, slot: usize, clock: &AtomicU64) -> (u64, u64) {
        let c = &self.slots[slot];
        c.snap.store(PENDING, Ordering::SeqCst);
        let t = clock.fetch_add(1, Ordering::SeqCst) + 1;
        let xid = self.begin(slot, t);
        c.snap.store(t, Ordering::SeqCst);
        (xid, t)
    }

    /// The slot's transaction is over: it keeps no version alive.
    pub fn release(&self, slot: usize) {
        self.slots[slot].snap.store(IDLE, Ordering::Release);
    }

    /// The GC watermark: no running or future transaction has a begin
    /// stamp below it. `None` while some slot is taking its begin stamp
    /// (try again later).
    pub fn watermark(&self, clock: &AtomicU64) -> Option<u64> {
        let mut min = clock.load(Ordering::SeqCst);
        for c in self.slots.iter() {
            match c.snap.load(Ordering::SeqCst) {
                IDLE => {}
                PENDING => return None,
                b => min = min.min(b),
            }
        }
        Some(min)
    }

    /// The id of slot `slot`'s current (or last) transaction; 0 if none.
    pub fn current(&self, slot: usize) -> u64 {
        self.slots[slot].xid.load(Ordering::Acquire)
    }

    /// Start slot `slot`'s next transaction with begin stamp `begin`; returns
    /// its id (without [`XID_FLAG`]). Only the slot's owner calls this.
    pub fn begin(&self, slot: usize, begin: u64) -> u64 {
        let c = &self.slots[slot];
        // Only the owner stores ids here, and each `begin` ends with a
        // non-zero one, so this is the slot's last id.
        let gen = (c.xid.load(Ordering::Relaxed) >> SLOT_BITS) + 1;
        let xid = (gen << SLOT_BITS) | slot as u64;
        // Seqlock writer: retire the old id first (0 matches no id), then
        // the fields, then publish the new id. A reader that reads any new
        // field value re-checks the id after an acquire fence and finds 0 or
        // the new id, never the old one (the release fence below pairs with
        // it); a reader that sees the new id sees the new fields.
        c.xid.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        c.state.store(XidState::Active as u8, Ordering::Relaxed);
        c.begin.store(begin, Ordering::Relaxed);
        c.end.store(0, Ordering::Relaxed);
        c.sstamp.store(0, Ordering::Relaxed);
        c.xid.store(xid, Ordering::Release);
        xid
    }

    /// Enter pre-commit, before taking the commit stamp. A reader that then
    /// finds `Committing` with no stamp yet waits for it; a reader that finds
    /// `Active` knows the stamp will be larger than its begin stamp (the
    /// store and the clock accesses are sequentially consistent).
    pub fn precommit(&self, xid: u64) {
        let c = self.own(xid);
        c.state.store(XidState::Committing as u8, Ordering::SeqCst);
    }

    /// Publish the commit stamp (ERMIA: the commit LSN).
    pub fn set_end(&self, xid: u64, end: u64) {
        self.own(xid).end.store(end, Ordering::Release);
    }

    /// Enter pre-commit with commit stamp `end` known at once.
    pub fn committing(&self, xid: u64, end: u64) {
        self.precommit(xid);
        self.set_end(xid, end);
    }

    /// SSN: publish π(T) (before `finish(Committed)`).
    pub fn publish_sstamp(&self, xid: u64, sstamp: u64) {
        self.own(xid).sstamp.store(sstamp, Ordering::Relaxed);
    }

    /// The outcome: `Committed` (after `committing`) or `Aborted`.
    pub fn finish(&self, xid: u64, state: XidState) {
        debug_assert!(matches!(state, XidState::Committed | XidState::Aborted));
        self.own(xid).state.store(state as u8, Ordering::Release);
    }

    fn own(&self, xid: u64) -> &Context {
        let c = &self.slots[(xid & SLOT_MASK) as usize];
        debug_assert_eq!(
            c.xid.load(Ordering::Relaxed),
            xid,
            "not the slot's transaction"
        );
        c
    }

    /// What is known about transaction `xid` (with or without the flag).
    pub fn lookup(&self, xid: u64) -> Lookup {
        let xid = xid & !XID_FLAG;
        if xid >> SLOT_BITS == 0 {
            // Generation 0 is never issued; 0 marks a slot being reused.
            return Lookup::Stale;
        }
        let Some(c) = self.slots.get((xid & SLOT_MASK) as usize) else {
            return Lookup::Stale;
        };
        if c.xid.load(Ordering::Acquire) != xid {
            return Lookup::Stale;
        }
        let state = XidState::from_u8(c.state.load(Ordering::SeqCst));
        let begin = c.begin.load(Ordering::Relaxed);
        let end = c.end.load(Ordering::Acquire);
        let sstamp = c.sstamp.load(Ordering::Relaxed);
        // Seqlock reader: the field loads above happen before the re-check.
        fence(Ordering::Acquire);
        if c.xid.load(Ordering::Relaxed) != xid {
            return Lookup::Stale;
        }
        Lookup::Current {
            state,
            begin,
            end,
            sstamp,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn generations_make_old_ids_stale() {
        let t = XidTable::new(4);
        let a = t.begin(2, 10);
        assert_eq!(a & SLOT_MASK, 2);
        assert_eq!(
            t.lookup(a | XID_FLAG),
            Lookup::Current {
                state: XidState::Active,
                begin: 10,
                end: 0,
                sstamp: 0
            }
        );
        t.committing(a, 17);
        t.finish(a, XidState::Committed);
        assert_eq!(
            t.lookup(a),
            Lookup::Current {
                state: XidState::Committed,
                begin: 10,
                end: 17,
                sstamp: 0
            }
        );
        let b = t.begin(2, 20);
        assert_ne!(a, b);
        assert_eq!(t.lookup(a), Lookup::Stale);
        assert!(matches!(t.lookup(b), Lookup::Current { begin: 20, .. }));
        // Ids of other slots and of never-used slots are independent.
        assert_eq!(t.lookup(1 << SLOT_BITS), Lookup::Stale);
        assert_eq!(t.lookup(99), Lookup::Stale);
    }

    /// A reader never sees a mix of two transactions' fields: whatever it
    /// reports as `Current` for an id carries that id's begin stamp.
    #[test]
    fn concurrent_lookups_are_consistent() {
        let t = Arc::new(XidTable::new(1));
        let rounds = if cfg!(miri) { 50 } else { 200_000 };
        let go = Arc::new(std::sync::Barrier::new(2));
        let writer = {
            let (t, go) = (t.clone(), go.clone());
            std::thread::spawn(move || {
                go.wait();
                for i in 1..=rounds {
                    // begin stamp = generation, so readers can check it.
                    let x = t.begin(0, i);
                    assert_eq!(x >> SLOT_BITS, i);
                    t.committing(x, i * 2);
                    t.finish(x, XidState::Committed);
                }
            })
        };
        let mut seen = 0;
        go.wait();
        while !writer.is_finished() || seen == 0 {
            let x = t.slots[0].xid.load(Ordering::Relaxed);
            if let Lookup::Current {
                begin, end, state, ..
            } = t.lookup(x)
            {
                assert_eq!(begin, x >> SLOT_BITS);
                assert!(end == 0 || end == begin * 2);
                if state == XidState::Committed {
                    assert_eq!(end, begin * 2);
                }
                seen += 1;
            }
        }
        writer.join().unwrap();
        assert!(seen > 0);
    }
}

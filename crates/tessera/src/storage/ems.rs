//! EMS, the efficient multi-version storage of Cai, Guo and Zhou (chapter
//! 2): an object header that embeds the **two newest committed versions**
//! (regions A and B) beside a 64-bit lock word, and keeps older versions in
//! an **oldest-first** (O2N) list. A reader finds the current version in
//! the header even while a writer updates the object (Table 2.1: zero jumps
//! for the current version, updating or not; one for the oldest).
//!
//! *Lock word* (section 2.3.1): `[write-bit | primary-bit | tid (62)]`.
//! The primary region holds the newest committed version, the secondary
//! the one before it. [`EmsObject::acquire`] is one CAS `(0,p,*) ->
//! (1,p,tid)`; the two releases are named for what they do, because the
//! book's `release(true/false)` means commit in section 2.3.1 and Fig. 2.3
//! and abort in Algorithm 2.1 and section 2.3.4 (erratum 1 of the digest):
//! [`EmsObject::release_commit`] flips the primary bit,
//! [`EmsObject::release_abort`] keeps it.
//!
//! *Write* (Algorithm 2.1, as corrected): acquire; if the primary was
//! committed after the writer's start stamp, release and abort
//! (first-committer-wins, the lost update); otherwise make the secondary
//! private: if it holds a version some running transaction may still need,
//! append it to the list **first**, then mark the region invalid (cts
//! ∞); then write the new value there. The book's test is inverted twice
//! (errata 2 and 3): a secondary stamped `s` under a primary stamped `p`
//! is *needed* iff some active start stamp lies in `[s, p)`; here,
//! conservatively, it is expired iff `p` is at or below the oldest active
//! start stamp (the caller's watermark), and with no watermark (garbage
//! collection off, as in the book's throughput runs) it is always kept.
//!
//! *Read* (Algorithm 2.2, as corrected): the holder of the write lock reads
//! its own secondary; anyone else takes the newer of the two regions whose
//! stamp is valid and at most its start stamp, else the newest list node
//! stamped at most its start stamp (the book's loop advances on the wrong
//! comparison and has no "nothing visible" case: erratum 4). A region is
//! read seqlock-style (the digest's race): its stamp, then a copy of its
//! version's bytes, then its stamp again; a writer invalidates the stamp
//! before it replaces the version or rewrites its bytes in place, and
//! stamps only grow, so an unchanged stamp means the bytes copied belong
//! to it.
//!
//! *Commit* (section 2.3.4): set the secondary's stamp, then
//! `release_commit`. *Abort*: `release_abort`; the secondary stays invalid
//! and needs no undo.
//!
//! Values are [`Version`]s (the book's "value word" is a pointer): a
//! region holds one, and a version appended to the list is the same
//! allocation, linked through its `prev` pointer, which here points to the
//! next *newer* node. A secondary's version that no reader needs any more
//! (expired, an aborted writer's, the holder's own) is rewritten in place
//! by the next write when the value fits; [`EmsRecord`]s keep one version
//! slot per region inline, so a row whose values keep their size keeps
//! both regions' versions in its own allocation. Versions that a reader may
//! still hold are freed through the memory epoch.

use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};

use super::mvcc::{
    free_mv_version, init_inline_version, inline_version_size, new_mv_version, new_mv_version_fill,
    Fill,
};
use super::Version;
use crate::epoch::Guard;

/// A region's commit stamp while it holds no visible version (the book's
/// ∞).
pub const INVALID: u64 = u64::MAX;

const WRITE_BIT: u64 = 1 << 63;
const PRIMARY_BIT: u64 = 1 << 62;
/// Not part of the book's lock word: set, under the lock, when the object's
/// record is unlinked from its index (`--cc ems`'s garbage collection), and
/// kept by every acquire and release from then on. Kept here rather than in
/// a word of its own so that the record header is 48 bytes (see
/// [`EmsRecord`]).
const UNLINKED_BIT: u64 = 1 << 61;
/// The bits an acquire and both releases carry over.
const KEEP_BITS: u64 = PRIMARY_BIT | UNLINKED_BIT;
/// The holder's id: 61 bits.
pub const TID_MASK: u64 = UNLINKED_BIT - 1;

/// One of the header's two embedded versions.
struct Region {
    /// Its commit stamp, or [`INVALID`].
    cts: AtomicU64,
    /// Its value (null only before the first write into it).
    value: AtomicPtr<Version>,
}

impl Region {
    fn empty() -> Region {
        Region {
            cts: AtomicU64::new(INVALID),
            value: AtomicPtr::new(std::ptr::null_mut()),
        }
    }
}

/// What [`EmsObject::install_fill`] writes into the private region.
#[derive(Clone, Copy, Debug)]
pub enum EmsFill<'a> {
    /// These bytes (`None`: a deletion).
    Value(Option<&'a [u8]>),
    /// A column write: the value the writer reads (its own uncommitted one
    /// on a rewrite, else the newest committed one) with `bytes` written
    /// over it at `at`. The caller has checked that they lie inside it.
    Patch {
        /// Where the bytes go.
        at: usize,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// Why a write failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmsConflict {
    /// Another transaction holds the object's write lock (the book retries
    /// the write; an engine on this object aborts at once, as ERMIA's
    /// first-updater-wins does).
    Locked,
    /// The newest version was committed after the writer started
    /// (first-committer-wins).
    LostUpdate,
}

/// What a read found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmsRead {
    /// The version's commit stamp (0 for the reader's own write).
    pub cts: u64,
    /// Whether it is a deletion.
    pub tombstone: bool,
    /// List nodes dereferenced to reach it (Table 2.1's jumps: 0 for a
    /// region).
    pub jumps: u32,
}

/// An EMS object header (Fig. 2.2).
pub struct EmsObject {
    lock: AtomicU64,
    regions: [Region; 2],
    /// The oldest listed version; each node's `prev` is the next newer.
    list: AtomicPtr<Version>,
}

impl EmsObject {
    /// An object whose one committed version is `val` (`None`: a
    /// deletion), stamped `cts`, in region A.
    pub fn new(val: Option<&[u8]>, cts: u64) -> EmsObject {
        let o = EmsObject {
            lock: AtomicU64::new(0),
            regions: [Region::empty(), Region::empty()],
            list: AtomicPtr::new(std::ptr::null_mut()),
        };
        let v = new_mv_version(val, cts, std::ptr::null_mut(), None);
        o.regions[0].value.store(v, Ordering::Relaxed);
        o.regions[0].cts.store(cts, Ordering::Relaxed);
        o
    }

    /// An object with no visible version, its write lock held by `tid`:
    /// an insert's, whose value goes into the secondary (region B) by
    /// [`EmsObject::install_fill`] and becomes visible at its commit's flip.
    pub fn new_locked(tid: u64) -> EmsObject {
        debug_assert!(tid & !TID_MASK == 0 && tid != 0);
        EmsObject {
            lock: AtomicU64::new(WRITE_BIT | tid),
            regions: [Region::empty(), Region::empty()],
            list: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Whether the object holds no committed version at all (a rolled-back
    /// insert's). Read by the lock holder.
    pub fn is_empty(&self) -> bool {
        self.list.load(Ordering::Relaxed).is_null()
            && self
                .regions
                .iter()
                .all(|r| r.cts.load(Ordering::Relaxed) == INVALID)
    }

    /// The primary's stamp if it is a committed deletion. Read by the lock
    /// holder.
    pub fn tombstone_stamp(&self) -> Option<u64> {
        let l = self.lock.load(Ordering::Relaxed);
        let r = &self.regions[Self::primary(l)];
        let c = r.cts.load(Ordering::Relaxed);
        let v = r.value.load(Ordering::Relaxed);
        // SAFETY: the lock holder's view: the primary's version is live.
        (c != INVALID && unsafe { &*v }.is_tombstone()).then_some(c)
    }

    /// The lock word's primary region (0: A).
    #[inline]
    fn primary(l: u64) -> usize {
        usize::from(l & PRIMARY_BIT != 0)
    }

    /// Whether transaction `tid` holds the write lock.
    #[inline]
    pub fn held_by(&self, tid: u64) -> bool {
        let l = self.lock.load(Ordering::Acquire);
        l & WRITE_BIT != 0 && l & TID_MASK == tid & TID_MASK
    }

    /// The transaction holding the write lock, if any.
    #[inline]
    pub fn holder(&self) -> Option<u64> {
        let l = self.lock.load(Ordering::Relaxed);
        (l & WRITE_BIT != 0).then_some(l & TID_MASK)
    }

    /// `acquire(tid)`: one CAS from unlocked, keeping the primary bit.
    pub fn acquire(&self, tid: u64) -> bool {
        debug_assert!(tid & !TID_MASK == 0 && tid != 0);
        let l = self.lock.load(Ordering::Relaxed);
        l & WRITE_BIT == 0
            && self
                .lock
                .compare_exchange(
                    l,
                    WRITE_BIT | (l & KEEP_BITS) | tid,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Unlock and flip the primary bit: the secondary, which holds the
    /// committing transaction's version, becomes primary.
    pub fn release_commit(&self) {
        let l = self.lock.load(Ordering::Relaxed);
        debug_assert!(l & WRITE_BIT != 0);
        self.lock
            .store((!l & PRIMARY_BIT) | (l & UNLINKED_BIT), Ordering::Release);
    }

    /// Unlock and keep the primary bit (abort).
    pub fn release_abort(&self) {
        let l = self.lock.load(Ordering::Relaxed);
        debug_assert!(l & WRITE_BIT != 0);
        self.lock.store(l & KEEP_BITS, Ordering::Release);
    }

    /// Write `val` (`None`: delete) for transaction `tid`, started at
    /// `sts`. `watermark` is the oldest active start stamp, or `None` to
    /// keep every version (garbage collection off). On `LostUpdate` the
    /// lock has been released again.
    pub fn write(
        &self,
        tid: u64,
        sts: u64,
        val: Option<&[u8]>,
        watermark: Option<u64>,
        g: &Guard<'_>,
    ) -> Result<(), EmsConflict> {
        let mine = self.held_by(tid);
        if !mine && !self.acquire(tid) {
            return Err(EmsConflict::Locked);
        }
        self.install_fill(!mine, sts, EmsFill::Value(val), watermark, g)
    }

    /// The write of [`EmsObject::write`] by the lock holder: `first` if
    /// the lock was acquired for this write (the secondary then holds an
    /// older version or an aborted writer's value, and first-committer-wins
    /// is checked), else a rewrite of the holder's own value. With a
    /// watermark, list nodes no reader can reach any more are freed too
    /// (garbage collection on the write path). On `LostUpdate` the lock has
    /// been released.
    pub fn install_fill(
        &self,
        first: bool,
        sts: u64,
        fill: EmsFill<'_>,
        watermark: Option<u64>,
        g: &Guard<'_>,
    ) -> Result<(), EmsConflict> {
        let l = self.lock.load(Ordering::Relaxed);
        debug_assert!(l & WRITE_BIT != 0, "install without the lock");
        let p = Self::primary(l);
        let s = 1 - p;
        let sec = &self.regions[s];
        let old = sec.value.load(Ordering::Relaxed);
        // Whether `old` leaves the object with this write (else it is in the
        // list now, or null).
        let mut drop_old = !old.is_null();
        if first {
            let pc = self.regions[p].cts.load(Ordering::Relaxed);
            if pc != INVALID && pc > sts {
                self.release_abort();
                return Err(EmsConflict::LostUpdate);
            }
            if sec.cts.load(Ordering::Relaxed) != INVALID {
                if watermark.is_none_or(|w| pc > w) {
                    // Needed: append first, then invalidate, so a reader
                    // that finds the region invalid finds it in the list.
                    // SAFETY: `old` is live (regions own their versions) and
                    // the lock holder alone changes the list's shape.
                    unsafe { self.append(old) };
                    drop_old = false;
                }
                // Release: a reader that finds the region invalid and goes
                // to the list sees the append above.
                sec.cts.store(INVALID, Ordering::Release);
            }
            // Else the region held an aborted writer's value, never
            // visible, or nothing yet (a record's spare inline slot).
            if let Some(w) = watermark {
                self.prune_locked(w, g);
            }
        }
        // A column write's base: our own value on a rewrite, else the
        // primary's, which first-committer-wins has just found to be the
        // newest committed version, at or below our start stamp (so the one
        // the caller read and checked the patch against), and which nobody
        // changes while we hold the lock.
        let fill = match fill {
            EmsFill::Value(v) => Fill::Value(v),
            EmsFill::Patch { at, bytes } => Fill::Patched {
                base: if first {
                    self.regions[p].value.load(Ordering::Relaxed)
                } else {
                    old
                },
                at,
                bytes,
            },
        };
        // SAFETY: a patch's base is live (its region owns it) and stable.
        let len = unsafe { fill.value_len() };
        if drop_old {
            // The region's version left no reader's reach through the list:
            // an expired version, an aborted writer's value, our own earlier
            // one or a spare slot. Rewrite it in place when the value fits
            // (the version stays the region's, so nothing is allocated or
            // freed): a reader copying it meanwhile checked the region's
            // stamp before, and its re-check after the copy finds it
            // invalid (see `read_pinned`).
            // SAFETY: live (the region owns it); the lock holder alone
            // writes it.
            let o = unsafe { &*old };
            if o.fits(len) {
                // The seqlock writer's order: the region's stamp was made
                // invalid (above, or by an earlier holder, or never valid)
                // before any byte changes; the fence keeps our word stores
                // after it for a reader whose re-check follows its copy.
                fence(Ordering::Release);
                // SAFETY: as above; the value fits, and a patch's base is
                // live and stable.
                unsafe { Version::rewrite_fill(old, fill) };
                return Ok(());
            }
        }
        // Our value replaces whatever the private region held: an expired
        // version, an aborted writer's value, or our own earlier one.
        // SAFETY: a patch's base is live and stable (above).
        let v = unsafe { new_mv_version_fill(fill, INVALID, std::ptr::null_mut(), None) };
        sec.value.store(v, Ordering::Release);
        if drop_old {
            // SAFETY: unreachable for new readers now (the region holds `v`
            // and an invalid stamp); a reader that loaded it before re-checks
            // the stamp, and pinned ones keep it through the epoch.
            unsafe { retire_version(old, g) };
        }
        Ok(())
    }

    /// Garbage collection of the list, by the lock holder: every version
    /// older than the newest one stamped at or below `w` (the oldest active
    /// start stamp) is unreachable, since every reader's start stamp is at
    /// least `w` and it reads the newest version at or below its own. The
    /// list is oldest-first and older than both regions, so that is a
    /// prefix of it: all of it if a valid region is stamped at or below
    /// `w`. Cut nodes are freed through the memory epoch (a reader walking
    /// from the old head still finds its way forward through them).
    fn prune_locked(&self, w: u64, g: &Guard<'_>) -> usize {
        let head = self.list.load(Ordering::Relaxed);
        if head.is_null() {
            return 0;
        }
        let region_covers = self.regions.iter().any(|r| {
            let c = r.cts.load(Ordering::Relaxed);
            c != INVALID && c <= w
        });
        // The new head: null if a region covers `w`, else the newest node
        // stamped at or below `w` (the head itself if none is).
        let mut keep = std::ptr::null_mut();
        if !region_covers {
            keep = head;
            let mut n = head;
            while !n.is_null() {
                // SAFETY: list nodes live until retired; the lock holder
                // alone retires them.
                let node = unsafe { &*n };
                if node.stamp() > w {
                    break;
                }
                keep = n;
                n = node.prev();
            }
        }
        if keep == head {
            return 0;
        }
        self.list.store(keep, Ordering::Release);
        let mut n = head;
        let mut freed = 0;
        while n != keep {
            // SAFETY: cut just now: unreachable for new readers; the node's
            // forward pointer is left as it is for readers already on it.
            let next = unsafe { &*n }.prev();
            // SAFETY: as above; pinned readers keep it through the epoch.
            unsafe { retire_version(n, g) };
            freed += 1;
            n = next;
        }
        freed
    }

    /// Whether the list holds a version that pruning at `w`
    /// would free: a cheap look (the head and its successor) for readers
    /// and the background scanner. Pinned (`_g`).
    pub fn has_expired(&self, w: u64, _g: &Guard<'_>) -> bool {
        let head = self.list.load(Ordering::Acquire);
        if head.is_null() {
            return false;
        }
        // SAFETY: pinned; list nodes are freed through the epoch.
        let next = unsafe { &*head }.prev();
        if next.is_null() {
            self.regions.iter().any(|r| {
                let c = r.cts.load(Ordering::Acquire);
                c != INVALID && c <= w
            })
        } else {
            // SAFETY: as above.
            unsafe { &*next }.stamp() <= w
        }
    }

    /// Garbage collection off the write path (a reader's, or the
    /// background scanner's): take the lock word for `tid` without waiting,
    /// prune the list at `w`, release it as it was. Returns the versions
    /// freed (0 if the lock was taken).
    pub fn prune(&self, tid: u64, w: u64, g: &Guard<'_>) -> usize {
        if !self.acquire(tid) {
            return 0;
        }
        let n = self.prune_locked(w, g);
        self.release_abort();
        n
    }

    /// Link `v` at the newest end of the list.
    ///
    /// # Safety
    /// The caller holds the write lock; `v` is live and in no list.
    unsafe fn append(&self, v: *mut Version) {
        // SAFETY: caller contract.
        unsafe { (*v).set_prev(std::ptr::null_mut()) };
        let head = self.list.load(Ordering::Relaxed);
        if head.is_null() {
            self.list.store(v, Ordering::Release);
            return;
        }
        let mut n = head;
        loop {
            // SAFETY: list nodes live until the object drops (or the
            // epoch frees an unlinked one; nothing unlinks here).
            let next = unsafe { &*n }.prev();
            if next.is_null() {
                break;
            }
            n = next;
        }
        // SAFETY: as above.
        unsafe { (*n).set_prev(v) };
    }

    /// Commit the lock holder's write with stamp `cts`: the secondary's
    /// stamp first, then the flip.
    /// Whether the committed version is a deletion.
    pub fn commit(&self, cts: u64) -> bool {
        let l = self.lock.load(Ordering::Relaxed);
        let sec = &self.regions[1 - Self::primary(l)];
        let v = sec.value.load(Ordering::Relaxed);
        // SAFETY: the lock holder's own version, live.
        let v = unsafe { &*v };
        v.set_stamp(cts);
        let tombstone = v.is_tombstone();
        sec.cts.store(cts, Ordering::Release);
        self.release_commit();
        tombstone
    }

    /// Abort the lock holder's write: the secondary stays invalid.
    pub fn abort(&self) {
        self.release_abort();
    }

    /// Read the version that transaction `tid`, started at `sts`, sees,
    /// into `out` (nothing for a deletion); `None` if no version is
    /// visible. The caller is pinned (`_g`).
    ///
    /// Requires what the book's single commit thread gives: a stamp is
    /// handed out as a start stamp only after its committer has flipped
    /// every object it wrote (`--cc ems` publishes a contiguous prefix of
    /// finished stamps). Then the primary read from the lock word is the
    /// newest version visible at any start stamp taken before it.
    #[inline]
    pub fn read(&self, sts: u64, tid: u64, out: &mut Vec<u8>, _g: &Guard<'_>) -> Option<EmsRead> {
        // SAFETY: pinned (`_g`).
        unsafe { self.read_pinned(sts, tid, out) }
    }

    /// [`EmsObject::read`] for a caller that is pinned but has no guard at
    /// hand (a checkpoint's layout hook).
    ///
    /// # Safety
    /// The caller is pinned for the duration of the call.
    #[inline]
    pub unsafe fn read_pinned(&self, sts: u64, tid: u64, out: &mut Vec<u8>) -> Option<EmsRead> {
        // SAFETY: the caller's contract.
        unsafe { self.read_cols_pinned(sts, tid, out, (0, usize::MAX)) }.map(|(r, _)| r)
    }

    /// [`EmsObject::read`] of bytes `cols.0..cols.1` of the visible value
    /// only (clamped to its length): `out` holds the words that cover them,
    /// and the second result is where the bytes start in `out`. The words
    /// are copied inside the seqlock's window like a whole value.
    #[inline]
    pub fn read_cols(
        &self,
        sts: u64,
        tid: u64,
        out: &mut Vec<u8>,
        cols: (usize, usize),
        _g: &Guard<'_>,
    ) -> Option<(EmsRead, usize)> {
        // SAFETY: pinned (`_g`).
        unsafe { self.read_cols_pinned(sts, tid, out, cols) }
    }

    /// [`EmsObject::read_cols`] for a caller that is pinned.
    ///
    /// # Safety
    /// The caller is pinned for the duration of the call.
    #[inline(always)]
    unsafe fn read_cols_pinned(
        &self,
        sts: u64,
        tid: u64,
        out: &mut Vec<u8>,
        cols: (usize, usize),
    ) -> Option<(EmsRead, usize)> {
        'again: loop {
            let l = self.lock.load(Ordering::Acquire);
            if tid != 0 && l & WRITE_BIT != 0 && l & TID_MASK == tid & TID_MASK {
                // Our own write: the private secondary.
                let v = self.regions[1 - Self::primary(l)]
                    .value
                    .load(Ordering::Acquire);
                return Some(Self::take_cols(v, 0, 0, out, cols));
            }
            // The primary, then the secondary (Algorithm 2.2). The primary
            // read from `l` is the newest committed version for any `sts`
            // taken before `l` was loaded: a committer publishes its stamp
            // as a start stamp only after it has flipped every primary.
            let p = Self::primary(l);
            for r in [&self.regions[p], &self.regions[1 - p]] {
                let c = r.cts.load(Ordering::Acquire);
                if c == INVALID || c > sts {
                    continue;
                }
                #[cfg(test)]
                tests::pause_mid_read();
                let v = r.value.load(Ordering::Acquire);
                // The seqlock reader: copy, then re-check the stamp. A
                // writer invalidates it before it replaces the version or
                // rewrites its bytes in place, and stamps only grow, so an
                // unchanged stamp means the copy is the version's.
                let got = Self::take_cols(v, c, 0, out, cols);
                fence(Ordering::Acquire);
                if r.cts.load(Ordering::Relaxed) != c {
                    continue 'again;
                }
                return Some(got);
            }
            // The newest listed version stamped at most `sts`.
            let mut n = self.list.load(Ordering::Acquire) as *const Version;
            let mut jumps = 0;
            let mut found: Option<(*const Version, u32)> = None;
            while !n.is_null() {
                jumps += 1;
                // SAFETY: list nodes are freed through the epoch; pinned.
                let node = unsafe { &*n };
                if node.stamp() > sts {
                    break;
                }
                found = Some((n, jumps));
                n = node.prev();
            }
            // Jumps count every node dereferenced, the one past the answer
            // too (as for a pure O2N chain).
            return found.map(|(v, _)| {
                // SAFETY: as above.
                let c = unsafe { &*v }.stamp();
                Self::take_cols(v, c, jumps, out, cols)
            });
        }
    }

    /// Copy bytes `cols.0..cols.1` of `v`'s value (the words that hold
    /// them) into `out`, and say where they start in it (`(0, usize::MAX)`:
    /// the whole value, at 0). The length is clamped to the version's
    /// capacity, so a length torn by an in-place rewrite (which the
    /// caller's stamp re-check then discards) copies nothing past the slot.
    #[inline(always)]
    fn take_cols(
        v: *const Version,
        cts: u64,
        jumps: u32,
        out: &mut Vec<u8>,
        cols: (usize, usize),
    ) -> (EmsRead, usize) {
        out.clear();
        // SAFETY: a live version (pinned; freed only through the epoch).
        let tombstone = unsafe { &*v }.is_tombstone();
        let skip = if tombstone {
            0
        } else if cols == (0, usize::MAX) {
            // The whole value: the plain copy, with no slice arithmetic.
            // SAFETY: as above; a committed version's bytes never change,
            // and our own is written only by us.
            unsafe { Version::read_into(v, out) };
            0
        } else {
            // SAFETY: as above.
            unsafe { Version::read_slice_into(v, cols.0, cols.1, out) }
        };
        (
            EmsRead {
                cts,
                tombstone,
                jumps,
            },
            skip,
        )
    }

    /// Copy `v`'s whole value into `out`.
    fn take(v: *const Version, cts: u64, jumps: u32, out: &mut Vec<u8>) -> EmsRead {
        Self::take_cols(v, cts, jumps, out, (0, usize::MAX)).0
    }

    /// The oldest version kept (the list's head, else the older region),
    /// into `out`: for the book's "oldest version" reads.
    pub fn read_oldest(&self, out: &mut Vec<u8>, g: &Guard<'_>) -> Option<EmsRead> {
        let head = self.list.load(Ordering::Acquire);
        if !head.is_null() {
            // SAFETY: pinned.
            let c = unsafe { &*head }.stamp();
            return Some(Self::take(head, c, 1, out));
        }
        match self.oldest_region_cts() {
            INVALID => None,
            c => self.read(c, 0, out, g),
        }
    }

    /// The smaller valid region stamp (or [`INVALID`]).
    fn oldest_region_cts(&self) -> u64 {
        self.regions
            .iter()
            .map(|r| r.cts.load(Ordering::Acquire))
            .filter(|&c| c != INVALID)
            .min()
            .unwrap_or(INVALID)
    }

    /// Versions kept: the regions' (an uncommitted one too) and the
    /// list's nodes.
    pub fn versions(&self) -> usize {
        let regions = self
            .regions
            .iter()
            .filter(|r| !r.value.load(Ordering::Acquire).is_null())
            .count();
        let mut n = self.list.load(Ordering::Acquire) as *const Version;
        let mut listed = 0;
        while !n.is_null() {
            listed += 1;
            // SAFETY: the caller is pinned or owns the object.
            n = unsafe { &*n }.prev();
        }
        regions + listed
    }
}

/// Free version `v` once no pinned reader can hold it, unless it lives
/// inside its record's allocation (an [`EmsRecord`]'s first version,
/// freed with the record).
///
/// # Safety
/// `v` is live and unreachable for new readers.
unsafe fn retire_version(v: *mut Version, g: &Guard<'_>) {
    // SAFETY: caller contract.
    if !unsafe { &*v }.is_inline() {
        // SAFETY: caller contract; out-of-line versions come from
        // `new_mv_version`.
        unsafe { g.retire(v as *mut u8, free_mv_version) };
    }
}

/// Free version `v` now unless it is inline (see [`retire_version`]).
///
/// # Safety
/// The caller is `v`'s last owner.
unsafe fn free_owned_version(v: *mut Version) {
    // SAFETY: caller contract.
    if !unsafe { &*v }.is_inline() {
        // SAFETY: as above.
        unsafe { free_mv_version(v as *mut u8) };
    }
}

impl Drop for EmsObject {
    fn drop(&mut self) {
        for r in &mut self.regions {
            let v = *r.value.get_mut();
            if !v.is_null() {
                // SAFETY: the last owner; the region owns its version.
                unsafe { free_owned_version(v) };
            }
        }
        let mut n = *self.list.get_mut();
        while !n.is_null() {
            // SAFETY: the last owner; list nodes are owned by the list.
            let next = unsafe { &*n }.prev();
            // SAFETY: as above.
            unsafe { free_owned_version(n) };
            n = next;
        }
    }
}

/// The record of `--cc ems` (`cc::ems`): an [`EmsObject`], whose lock word
/// also says whether the record was unlinked from its index (ERMIA's
/// `mv_linked` role), with both regions' versions right behind it in the
/// same allocation (as ERMIA's records keep their first: the first read of
/// a row never touched since its insert or its recovery reads one
/// allocation). The unlinked bit is set only under the object's write lock,
/// so a writer that holds the lock and finds the record linked writes into
/// a record the index still maps.
#[repr(C)]
pub struct EmsRecord {
    pub obj: EmsObject,
}

/// The record header's size: 48 bytes. (A separate state word made it 56,
/// and a row of 100-byte values 328 bytes, one allocator size class above
/// the 320 it is now: the resident set of 1M such rows fell from 506 to
/// 444 MB when the word went into the lock word, docs/BENCHMARKS.md.)
const HEAD: usize = std::mem::size_of::<EmsRecord>();
const _: () = assert!(HEAD == 48);

// SAFETY: `FREE` drops the record as the allocation it was made as, with
// every version it owns.
unsafe impl crate::catalog::RecordHead for EmsRecord {
    const FREE: unsafe fn(*mut u8) = EmsRecord::free;
    // The current version is in the header's regions.
    const CHAINED: bool = false;
}

impl EmsRecord {
    /// Allocate a record holding `obj`, with two inline version slots
    /// behind the header, one per region, each with room for `val`: `val`
    /// (stamped `stamp`) in region `region` with stamp `cts`, the other
    /// region's slot empty and invalid. Writers rewrite a region's slot in
    /// place once no reader needs its version, so a row whose values keep
    /// their size keeps both its versions in its own allocation. (One slot,
    /// the other region's version allocated by its first writer, was
    /// measured too: readers of 100,000 rows under update fell by a third,
    /// half the rows' current versions being out of line, with no gain
    /// for rows nobody updates.)
    fn alloc(
        obj: EmsObject,
        val: Option<&[u8]>,
        stamp: u64,
        region: usize,
        cts: u64,
    ) -> *mut EmsRecord {
        let head = HEAD;
        let room = val.map_or(0, |v| v.len());
        let slot = inline_version_size(room);
        let layout = Self::layout(slot);
        // SAFETY: non-zero-size layout.
        let p = unsafe { std::alloc::alloc(layout) } as *mut EmsRecord;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: a fresh allocation of the header and both slots; each
        // slot sits at a multiple of 8 bytes.
        unsafe {
            for i in 0..2 {
                let v = (p as *mut u8).add(head + i * slot) as *mut Version;
                if i == region {
                    init_inline_version(v, room, val, stamp);
                    obj.regions[i].cts.store(cts, Ordering::Relaxed);
                } else {
                    init_inline_version(v, room, None, INVALID);
                }
                obj.regions[i].value.store(v, Ordering::Relaxed);
            }
            std::ptr::write(p, EmsRecord { obj });
        }
        p
    }

    /// The allocation of a record whose two slots take `slot` bytes each:
    /// 64-byte aligned (see [`HEAD`]).
    fn layout(slot: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(HEAD + 2 * slot, 64).expect("record layout")
    }

    /// A record whose one committed version is `val`, stamped `cts`, in
    /// region A.
    pub fn new(val: Option<&[u8]>, cts: u64) -> *mut EmsRecord {
        let obj = EmsObject {
            lock: AtomicU64::new(0),
            regions: [Region::empty(), Region::empty()],
            list: AtomicPtr::new(std::ptr::null_mut()),
        };
        Self::alloc(obj, val, cts, 0, cts)
    }

    /// An insert's record: no visible version, locked by `tid`, with the
    /// inserter's value in the secondary (region B), uncommitted.
    pub fn new_insert(tid: u64, val: Option<&[u8]>) -> *mut EmsRecord {
        Self::alloc(EmsObject::new_locked(tid), val, INVALID, 1, INVALID)
    }

    /// Whether the record has been unlinked (read under the lock).
    #[inline]
    pub fn unlinked(&self) -> bool {
        self.obj.lock.load(Ordering::Relaxed) & UNLINKED_BIT != 0
    }

    /// Mark it unlinked, under the lock (the release of the lock publishes
    /// it to the next holder).
    pub fn mark_unlinked(&self) {
        debug_assert!(self.obj.lock.load(Ordering::Relaxed) & WRITE_BIT != 0);
        self.obj.lock.fetch_or(UNLINKED_BIT, Ordering::Relaxed);
    }

    /// Free a record and every version it owns.
    ///
    /// # Safety
    /// `r` was made by [`EmsRecord::new`] or [`EmsRecord::new_insert`], and
    /// nobody else can reach it.
    pub unsafe fn free(r: *mut u8) {
        let r = r as *mut EmsRecord;
        // SAFETY: caller contract: a live record made by `alloc`, whose
        // first slot's capacity (never changed) gives the slots' size.
        unsafe {
            let first = (r as *const u8).add(HEAD) as *const Version;
            let layout = Self::layout(inline_version_size((*first).capacity()));
            std::ptr::drop_in_place(r);
            std::alloc::dealloc(r as *mut u8, layout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoch::Epochs;

    thread_local! {
        /// Spins a reader on this thread makes between a region's stamp
        /// and its value (0: none): widens the seqlock's window so a
        /// stress test meets the writer there.
        static PAUSE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    /// See [`PAUSE`].
    pub(super) fn pause_mid_read() {
        for _ in 0..PAUSE.with(|p| p.get()) {
            std::hint::spin_loop();
        }
    }

    fn val(o: &EmsObject, sts: u64, tid: u64, g: &Guard<'_>) -> Option<(Vec<u8>, EmsRead)> {
        let mut out = Vec::new();
        o.read(sts, tid, &mut out, g).map(|r| (out, r))
    }

    /// Fig. 2.3's lock word walk, with the two named releases.
    #[test]
    fn lock_word_acquire_and_both_releases() {
        let o = EmsObject::new(Some(b"a"), 1);
        assert!(o.acquire(123));
        assert!(o.held_by(123));
        assert!(!o.acquire(124), "held");
        o.release_commit();
        assert_eq!(o.lock.load(Ordering::Relaxed), PRIMARY_BIT, "(0,1,0)");
        assert!(o.acquire(7));
        o.release_abort();
        assert_eq!(o.lock.load(Ordering::Relaxed), PRIMARY_BIT, "(0,1,0) kept");
        assert!(o.acquire(8));
        o.release_commit();
        assert_eq!(o.lock.load(Ordering::Relaxed), 0, "(0,0,0)");
    }

    /// Versions are read from the header while an update runs, from the
    /// list once older than both regions; first-committer-wins aborts a
    /// writer that started before the primary's commit.
    #[test]
    fn reads_writes_and_the_table_2_1_jumps() {
        let epochs = Epochs::new(1, 1);
        let local = epochs.register().unwrap();
        let g = local.pin();
        let o = EmsObject::new(Some(b"v1"), 10);
        // Update to v2 at 20 (start 15).
        o.write(1, 15, Some(b"v2"), None, &g).unwrap();
        // While it runs: others read v1 from the header, zero jumps; the
        // writer reads its own value.
        let (v, r) = val(&o, 100, 2, &g).unwrap();
        assert_eq!((&v[..], r.jumps, r.cts), (&b"v1"[..], 0, 10));
        assert_eq!(val(&o, 100, 1, &g).unwrap().0, b"v2");
        o.commit(20);
        assert_eq!(val(&o, 25, 2, &g).unwrap().0, b"v2");
        assert_eq!(val(&o, 15, 2, &g).unwrap().0, b"v1", "older snapshot");
        assert!(val(&o, 5, 2, &g).is_none(), "nothing visible before 10");
        // A writer that started at 18 (before 20) loses.
        assert_eq!(
            o.write(3, 18, Some(b"x"), None, &g),
            Err(EmsConflict::LostUpdate)
        );
        assert!(!o.held_by(3), "released on the lost update");
        // v3 at 30: v1 (the secondary) moves to the list first.
        o.write(4, 25, Some(b"v3"), None, &g).unwrap();
        let (v, r) = val(&o, 12, 9, &g).unwrap();
        assert_eq!((&v[..], r.jumps), (&b"v1"[..], 1), "oldest: one jump");
        let (v, r) = val(&o, 100, 9, &g).unwrap();
        assert_eq!((&v[..], r.jumps), (&b"v2"[..], 0), "current while updating");
        o.commit(30);
        // v4 at 40 aborts: v3 stays current, the secondary is invalid.
        o.write(5, 35, Some(b"v4"), None, &g).unwrap();
        o.abort();
        assert_eq!(val(&o, 100, 9, &g).unwrap().0, b"v3");
        // v5 at 50, then a deletion at 60.
        o.write(6, 45, Some(b"v5"), None, &g).unwrap();
        o.commit(50);
        o.write(7, 55, None, None, &g).unwrap();
        o.commit(60);
        let (v, r) = val(&o, 100, 9, &g).unwrap();
        assert!(r.tombstone && v.is_empty());
        for (sts, want, jumps) in [
            // Every node dereferenced counts, the one past the answer too.
            (12, &b"v1"[..], 2),
            (25, b"v2", 3),
            (35, b"v3", 3),
            (55, b"v5", 0),
        ] {
            let (v, r) = val(&o, sts, 9, &g).unwrap();
            assert_eq!((&v[..], r.jumps), (want, jumps), "at {sts}");
        }
        let mut out = Vec::new();
        let r = o.read_oldest(&mut out, &g).unwrap();
        assert_eq!((&out[..], r.jumps), (&b"v1"[..], 1));
        assert_eq!(o.versions(), 5);
    }

    /// With a watermark past the primary's stamp, the secondary is expired
    /// and reused in place: the list does not grow.
    #[test]
    fn expired_secondaries_are_not_listed() {
        let epochs = Epochs::new(1, 1);
        let local = epochs.register().unwrap();
        let g = local.pin();
        let o = EmsObject::new(Some(b"v1"), 10);
        for (i, cts) in (20..120).step_by(10).enumerate() {
            o.write(i as u64 + 1, cts - 1, Some(b"vv"), Some(cts - 1), &g)
                .unwrap();
            o.commit(cts);
        }
        assert_eq!(o.versions(), 2, "two regions, no list");
        // Without a watermark every version is kept.
        let o = EmsObject::new(Some(b"v1"), 10);
        for (i, cts) in (20..120).step_by(10).enumerate() {
            o.write(i as u64 + 1, cts - 1, Some(b"vv"), None, &g)
                .unwrap();
            o.commit(cts);
        }
        assert_eq!(o.versions(), 11);
    }

    /// Readers racing a writer that commits a counter over and over never
    /// see a torn or out-of-snapshot value: every value read is the one
    /// committed at the largest stamp at or below the reader's start.
    #[test]
    fn concurrent_readers_see_their_snapshot() {
        readers_against_a_writer(0, false);
    }

    /// The same with garbage collection on: the writer's watermark is the
    /// oldest reader's start stamp, so expired secondaries are rewritten in
    /// place under the readers (the seqlock's copy-then-check), with and
    /// without the pause.
    #[test]
    fn concurrent_readers_see_their_snapshot_with_in_place_rewrites() {
        readers_against_a_writer(0, true);
        readers_against_a_writer(20_000, true);
    }

    /// The same with every reader pausing between a region's stamp and its
    /// value, long enough for the writer to commit and start its next write
    /// into that region meanwhile: only the stamp's re-check keeps the
    /// reader from returning the new, uncommitted value under the old
    /// stamp (without it this test fails).
    #[test]
    fn readers_paused_mid_region_read_see_their_snapshot() {
        readers_against_a_writer(20_000, false);
    }

    fn readers_against_a_writer(pause: u32, gc: bool) {
        use crate::cc::xid::XidTable;
        use std::sync::atomic::AtomicBool;
        let epochs = Epochs::new(4, 1);
        let r = EmsRecord::new(Some(&0u64.to_le_bytes().repeat(4)), 1);
        // SAFETY: freed at the end, after every thread is done.
        let o = unsafe { &(*r).obj };
        let stop = AtomicBool::new(false);
        let published = AtomicU64::new(1);
        // Readers' start stamps, for the writer's watermark.
        let xids = XidTable::new(4);
        let (mut reused, mut appended) = (0u64, 0u64);
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let local = epochs.register().unwrap();
                // The memory epoch advances, so retired values are freed
                // while the readers run.
                let _ticker = crate::epoch::Ticker::start(
                    epochs.clone(),
                    std::time::Duration::from_micros(200),
                );
                let (mut reused, mut appended) = (0u64, 0u64);
                for n in 1..3_000u64 {
                    let g = local.pin();
                    let sts = published.load(Ordering::Acquire);
                    let wm = if gc { xids.watermark(&published) } else { None };
                    if n % 3 == 0 {
                        // An aborted write: its value is retired (or
                        // rewritten) by the next writer, under the readers'
                        // feet.
                        o.write(1, sts, Some(&[0xEE; 32]), wm, &g).unwrap();
                        o.abort();
                    }
                    let before = o.versions();
                    o.write(1, sts, Some(&n.to_le_bytes().repeat(4)), wm, &g)
                        .unwrap();
                    if o.versions() > before {
                        appended += 1;
                    } else {
                        reused += 1;
                    }
                    // Stamp n + 1 carries value n.
                    o.commit(n + 1);
                    published.store(n + 1, Ordering::Release);
                }
                stop.store(true, Ordering::Release);
                (reused, appended)
            });
            for slot in 0..2 {
                let (xids, published, stop, epochs) = (&xids, &published, &stop, &epochs);
                s.spawn(move || {
                    PAUSE.with(|p| p.set(pause));
                    let local = epochs.register().unwrap();
                    let mut out = Vec::new();
                    while !stop.load(Ordering::Acquire) {
                        let g = local.pin();
                        let (_, sts) = xids.begin_from(slot, published);
                        let r = o.read(sts, 0, &mut out, &g).expect("visible");
                        let n = u64::from_le_bytes(out[..8].try_into().unwrap());
                        assert!(out.chunks(8).all(|c| c == &n.to_le_bytes()[..]), "torn");
                        assert_eq!(r.cts, n + 1, "value and stamp agree");
                        assert_eq!(n + 1, sts, "the newest committed at or below {sts}");
                        xids.release(slot);
                    }
                });
            }
            (reused, appended) = writer.join().unwrap();
        });
        if gc {
            assert!(
                reused > 1_000,
                "regions rewritten in place: {reused} ({appended} listed)"
            );
        }
        // SAFETY: every thread is done.
        unsafe { EmsRecord::free(r as *mut u8) };
    }
}

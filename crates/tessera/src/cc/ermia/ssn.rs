//! The Serial Safety Net (ERMIA section 3.6.2): the per-read and
//! per-overwrite hooks, and the commit-time exclusion-window test with the
//! parallel-commit handling.

use super::*;
use std::sync::atomic::AtomicU64;

use crate::storage::mvcc::{MetaInit, VersionMeta, META_WORDS};

/// π of a version nobody has overwritten: "infinity". Bit 63 is clear, so it
/// is never taken for a transaction id.
pub(crate) const SSTAMP_INF: u64 = !XID_FLAG;

/// SSN's per-version metadata (ERMIA section 3.6.2): the meaning SSN gives
/// the multi-version layout's metadata words ([`VersionMeta`]).
#[repr(C)]
pub(crate) struct SsnMeta {
    /// η(V): the largest commit stamp of a committed reader of this version;
    /// set to the creator's commit stamp at post-commit.
    pub pstamp: AtomicU64,
    /// π(V): [`SSTAMP_INF`] until overwritten; the in-flight overwriter's
    /// transaction id (with [`XID_FLAG`]) while it runs; the committed
    /// overwriter's π after its post-commit.
    pub sstamp: AtomicU64,
    /// In-flight readers: bit `slot % 64` for each worker slot whose running
    /// transaction read this version (ERMIA's readers bitmap, used by a
    /// committing overwriter to find readers that are committing before it).
    ///
    /// With more than 64 slots ([`MvState::shared_bits`]) slots `s`, `s + 64`,
    /// ... share a bit, and a reader that cleared the bit at its post-commit
    /// would also erase the registration of a reader in a sharing slot that
    /// is still running (whose later pre-commit an overwriter would then
    /// miss). So in that case nobody clears a bit: once set it stays set for
    /// the version's life, a reader that finds its bit set does not set it
    /// again, and an overwriter takes each set bit as "a reader may run in
    /// one of these slots" and checks every sharing slot's current
    /// transaction. A bit left by a finished reader only makes the
    /// overwriter order itself after whatever transaction now runs in that
    /// slot if it is committing first (η(T) too large: a possible false
    /// abort, never a missed edge), and the finished reader raised η(V)
    /// before it left its slot. ERMIA's read-mostly optimisation leaves
    /// bits set in the same way (its `serial_register_reader_tx`). Measured
    /// as the general scheme it cost more aborts than it saved (docs/BENCHMARKS.md,
    /// "SSN's readers bitmap beyond 64 workers, and sticky reader bits"), so at 64 slots or fewer bits are exact.
    pub readers: AtomicU64,
}

const _: () = assert!(std::mem::size_of::<SsnMeta>() == std::mem::size_of::<VersionMeta>());
const _: () = assert!(META_WORDS == 3);

/// A new version's SSN metadata: η 0, π infinity, no readers.
pub(super) const SSN_META: MetaInit = [0, SSTAMP_INF, 0];

/// The SSN metadata of version `v`, if it has any.
///
/// # Safety
/// `v` must point to a live version (the caller is pinned).
#[inline]
pub(super) unsafe fn ssn_meta<'a>(v: *const Version) -> Option<&'a SsnMeta> {
    // SAFETY: the caller's contract; `SsnMeta` is three `AtomicU64`s in
    // `repr(C)`, the layout of `VersionMeta`.
    unsafe { Version::meta(v) }.map(|m| unsafe { &*(m as *const VersionMeta as *const SsnMeta) })
}

/// SSN's read hook: the creator of `v` precedes us; a committed overwriter
/// of `v` follows us; otherwise track `v` (in its readers bitmap and our
/// read list) for the commit-time checks.
pub(super) fn on_read(st: &mut ErmiaLocal, v: *const Version, cstamp: u64) -> TxResult<()> {
    // SAFETY: pinned; SSN databases give every version metadata.
    let m = unsafe { ssn_meta(v) }.expect("SSN version metadata");
    st.mv.pstamp = st.mv.pstamp.max(cstamp);
    // Register before looking at π: an overwriter whose mark we miss finds
    // our bit at its commit (our side is SeqCst; its side puts a SeqCst
    // fence between its mark and its bitmap load, see `ssn_precommit`).
    let bit = 1u64 << (st.mv.slot % 64);
    // A set bit that nobody clears (shared bits) needs no second locked
    // write; the SeqCst load orders it before our load of π just as the
    // `fetch_or` would.
    if !st.mv.shared_bits || m.readers.load(Ordering::SeqCst) & bit == 0 {
        m.readers.fetch_or(bit, Ordering::SeqCst);
    }
    let s = m.sstamp.load(Ordering::SeqCst);
    if s & XID_FLAG == 0 && s != SSTAMP_INF {
        st.mv.sstamp = st.mv.sstamp.min(s);
    }
    st.vreads.push(v);
    if st.mv.sstamp <= st.mv.pstamp {
        return conflict(ConflictReason::SsnExclusion);
    }
    Ok(())
}

/// SSN's overwrite hook, right after our version went in over `old`.
pub(super) fn on_overwrite(st: &mut ErmiaLocal, old: *const Version) -> TxResult<()> {
    // SAFETY: as in `on_read`.
    let m = unsafe { ssn_meta(old) }.expect("SSN version metadata");
    // Not sequentially consistent by itself (that would be a locked
    // exchange per write on x86): the SeqCst fence at the start of
    // `ssn_precommit` sits between this mark and our look at the readers
    // bitmap, which is what the store-load pairing with `on_read` needs.
    m.sstamp.store(my_flagged(st), Ordering::Release);
    st.mv.pstamp = st.mv.pstamp.max(m.pstamp.load(Ordering::SeqCst));
    if st.mv.sstamp <= st.mv.pstamp {
        return conflict(ConflictReason::SsnExclusion);
    }
    Ok(())
}

/// Wait until the transaction `x` (found in pre-commit or committed with a
/// stamp below ours) has an outcome. Returns its commit stamp and π if it
/// committed, `None` if it aborted, or `Err(())` if it already finished
/// (the caller re-reads the version's stamps, which now hold the result).
pub(super) fn outcome(sh: &ErmiaShared, x: u64) -> Result<Option<(u64, u64)>, ()> {
    let mut spins = 0;
    loop {
        match sh.xids.lookup(x) {
            XLookup::Stale => return Err(()),
            XLookup::Current {
                state, end, sstamp, ..
            } => match state {
                XidState::Committed => return Ok(Some((end, sstamp))),
                XidState::Aborted | XidState::Active => return Ok(None),
                XidState::Committing => backoff_spin(&mut spins),
            },
        }
    }
}

/// The commit stamp of transaction `x` if it is in pre-commit or committed
/// with a stamp below `c` (waiting while its stamp is being taken); `None`
/// if it will commit after us or is not committing.
pub(super) fn earlier_committer(sh: &ErmiaShared, x: u64, c: u64) -> Option<()> {
    let mut spins = 0;
    loop {
        match sh.xids.lookup(x) {
            XLookup::Stale => return Some(()), // finished: caller re-reads
            XLookup::Current { state, end, .. } => match state {
                XidState::Committing | XidState::Committed if end == 0 => backoff_spin(&mut spins),
                XidState::Committing | XidState::Committed if end < c => return Some(()),
                _ => return None,
            },
        }
    }
}

/// SSN's commit-time part (Algorithm 1 with the parallel-commit handling):
/// finalise η(T) and π(T), apply the exclusion-window test, then check the
/// node set. Returns π(T).
pub(super) fn ssn_precommit<M: Mode>(tx: &mut ETx<'_, M>, c: u64) -> TxResult<u64> {
    let sh = tx.sh;
    let st = &mut *tx.st;
    let me = st.mv.slot;
    // Our own bit is ours alone unless slots share bits; the walk below
    // skips our slot either way.
    let mybit = if st.mv.shared_bits {
        0
    } else {
        1u64 << (me % 64)
    };
    let my = my_flagged(st);
    let mut pstamp = st.mv.pstamp;
    let mut sstamp = st.mv.sstamp.min(c);

    // η(T): readers of the versions we overwrote precede us. Committed ones
    // raised the version's pstamp; ones still in pre-commit with a smaller
    // stamp are found through the readers bitmap and waited for.
    // Orders our π marks (`on_overwrite`, plain release stores) before the
    // bitmap loads below: a reader that registered (a SeqCst `fetch_or`)
    // after this fence sees our mark in its SeqCst load of π; one that
    // registered before it is in the bitmap we load.
    if !st.mvw.is_empty() {
        fence(Ordering::SeqCst);
    }
    for w in &st.mvw {
        // SAFETY: pinned; SSN versions have metadata.
        let m: &SsnMeta = unsafe { ssn_meta(w.oldv) }.expect("meta");
        // The bitmap first, then η(V): a reader raises η(V) before it
        // clears its bit, so one that we miss in the bitmap has already
        // raised η(V) by the time we read it.
        let mut bits = m.readers.load(Ordering::SeqCst) & !mybit;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let mut slot = b;
            while slot < sh.xids.len() {
                if slot != me {
                    let x = sh.xids.current(slot);
                    if x != 0 && earlier_committer(sh, x, c).is_some() {
                        match outcome(sh, x) {
                            Ok(Some((end, _))) => pstamp = pstamp.max(end),
                            Ok(None) => {}
                            Err(()) => pstamp = pstamp.max(m.pstamp.load(Ordering::SeqCst)),
                        }
                    }
                }
                slot += 64;
            }
        }
        pstamp = pstamp.max(m.pstamp.load(Ordering::SeqCst));
    }

    // π(T): overwriters of the versions we read follow us. Committed ones
    // left their π on the version; ones in pre-commit with a smaller stamp
    // are waited for. A version we overwrote ourselves is tagged
    // ([`OWN_OVERWRITE`]) so that post-commit skips it.
    for r in st.vreads.iter_mut() {
        let v = *r;
        // SAFETY: as above.
        let m: &SsnMeta = unsafe { ssn_meta(v) }.expect("meta");
        loop {
            let s = m.sstamp.load(Ordering::SeqCst);
            if s == my {
                *r = v.map_addr(|a| a | OWN_OVERWRITE);
                break;
            }
            if s == SSTAMP_INF {
                break;
            }
            if s & XID_FLAG == 0 {
                sstamp = sstamp.min(s);
                break;
            }
            if earlier_committer(sh, s, c).is_none() {
                break;
            }
            match outcome(sh, s) {
                Ok(Some((_, pi))) => {
                    sstamp = sstamp.min(pi);
                    break;
                }
                Ok(None) => break,
                Err(()) => continue, // finished: re-read the version's π
            }
        }
    }

    if sstamp <= pstamp {
        return conflict(ConflictReason::SsnExclusion);
    }
    // Phantoms: Silo's node set, examined after the SSN test. First raise
    // each leaf's absence stamp (the index's per-leaf range stamp, which
    // SSN gives this meaning) to our commit stamp, so that a transaction
    // that inserts into the range after our validation orders itself after
    // us (an inserter that got there before is caught by the versions).
    for n in &st.sets.nodes {
        n.leaf.raise_stamp(c);
    }
    fence(Ordering::SeqCst);
    for n in &st.sets.nodes {
        if n.leaf.version() != n.version {
            return conflict(ConflictReason::NodeValidation);
        }
    }
    st.mv.pstamp = pstamp;
    st.mv.sstamp = sstamp;
    Ok(sstamp)
}

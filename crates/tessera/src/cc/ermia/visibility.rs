//! Visibility (ERMIA section 3.6.1): which version of a record a snapshot
//! sees, and the newest committed value for checkpoints.

use super::*;

/// What [`visible`] found.
#[derive(Clone, Copy)]
pub(super) struct Seen {
    pub(super) v: *const Version,
    /// Commit stamp of `v` (0 for our own version).
    pub(super) cstamp: u64,
    pub(super) own: bool,
}

/// The version of `rec` that the snapshot at `begin` sees (section 3.6.1).
/// Never null for a multi-version record: ⊥ (stamp 0) is visible to all,
/// and GC never cuts the chain above the first version the oldest snapshot
/// sees.
#[inline]
pub(super) fn visible(sh: &ErmiaShared, my: u64, begin: u64, rec: &MvRecord) -> Option<Seen> {
    visible_to(sh, my, begin, rec, false).unwrap_or(None)
}

/// [`visible`], and under timestamp ordering (`mvto`, MVRCC, where `begin`
/// is the reader's timestamp and an active owner's begin stamp is its
/// timestamp) a version of an active owner with a smaller timestamp is one
/// the reader would have to see: `PendingWrite`.
#[inline]
pub(super) fn visible_to(
    sh: &ErmiaShared,
    my: u64,
    begin: u64,
    rec: &MvRecord,
    mvto: bool,
) -> TxResult<Option<Seen>> {
    let mut v = rec.newest() as *const Version;
    let mut spins = 0;
    while !v.is_null() {
        // SAFETY: versions are reclaimed only through the epoch; we are pinned.
        let vr = unsafe { &*v };
        let s = vr.stamp();
        if s & XID_FLAG == 0 {
            if s <= begin {
                return Ok(Some(Seen {
                    v,
                    cstamp: s,
                    own: false,
                }));
            }
            v = vr.prev();
            continue;
        }
        if s == my {
            return Ok(Some(Seen {
                v,
                cstamp: 0,
                own: true,
            }));
        }
        match sh.xids.lookup(s) {
            // The owner finished: its versions are restamped (or rolled back
            // and this one is unreachable for new readers). Re-read.
            XLookup::Stale => {
                if vr.stamp() == s {
                    // Still the id: an aborted version; skip it.
                    v = vr.prev();
                }
            }
            XLookup::Current {
                state,
                end,
                begin: owner,
                ..
            } => match state {
                XidState::Committed if end <= begin => {
                    return Ok(Some(Seen {
                        v,
                        cstamp: end,
                        own: false,
                    }))
                }
                XidState::Committing if end == 0 || end <= begin => {
                    // Strict SI: wait for the outcome (see module docs).
                    backoff_spin(&mut spins);
                }
                XidState::Active if mvto && owner < begin => {
                    return conflict(ConflictReason::PendingWrite)
                }
                _ => v = vr.prev(),
            },
        }
    }
    Ok(None)
}

/// The newest committed value of `rec`, for checkpoints: `false` if that
/// version is a tombstone or ⊥. Waits for an owner in pre-commit, like a
/// reader whose snapshot is "now".
pub(crate) fn read_latest_committed(sh: &ErmiaShared, rec: &MvRecord, out: &mut Vec<u8>) -> bool {
    match visible(sh, 0, u64::MAX >> 1, rec) {
        Some(seen) => {
            // SAFETY: the caller is pinned; versions are reclaimed through
            // the epoch.
            if unsafe { &*seen.v }.is_tombstone() {
                false
            } else {
                // SAFETY: as above.
                unsafe { Version::read_into(seen.v, out) };
                true
            }
        }
        None => false,
    }
}

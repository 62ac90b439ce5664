//! Silo's TID word (section 4.2): status bits in the low bits, then a
//! sequence number, then the epoch in the high 32 bits, so comparing masked
//! words compares (epoch, sequence) pairs.

/// Lock bit: held by a committing writer.
pub const LOCK: u64 = 1;
/// Latest-version bit: clear once the record has been unlinked from its
/// index (Silo uses it for records superseded by a new record); a reader or
/// writer that meets a non-latest record retries through the index.
pub const LATEST: u64 = 1 << 1;
/// Absent bit: the record is deleted, or inserted but not yet committed.
pub const ABSENT: u64 = 1 << 2;
/// All status bits.
pub const STATUS: u64 = LOCK | LATEST | ABSENT;
/// The (epoch, sequence) part of a TID word.
pub const TID_MASK: u64 = !STATUS;
/// One step of the sequence number.
pub const SEQ_ONE: u64 = 1 << 3;
/// Bit position of the epoch.
pub const EPOCH_SHIFT: u32 = 32;

/// The largest epoch a TID holds (its epoch field has `64 - EPOCH_SHIFT`
/// bits). The epoch ticker stops there rather than wrap (about 5.4 years
/// of 40 ms epochs) and the loggers then fail the log ("epochs exhausted",
/// returned to every waiter); recovery refuses larger epochs as damage,
/// and an open that would start the next run at or past it refuses the
/// directory as exhausted.
pub const MAX_EPOCH: u64 = (1 << (64 - EPOCH_SHIFT)) - 1;

/// Compose a TID (no status bits).
#[inline]
pub const fn make_tid(epoch: u64, seq: u64) -> u64 {
    (epoch << EPOCH_SHIFT) | (seq << 3)
}

/// The epoch of a TID word.
#[inline]
pub const fn epoch_of(tid: u64) -> u64 {
    tid >> EPOCH_SHIFT
}

/// Silo's TID choice (section 4.2): the smallest TID that is (a) larger than
/// every TID read or written (`max_seen`), (b) larger than the worker's last
/// TID, and (c) in the current global epoch `e`. No shared counter.
#[inline]
pub fn next_tid(max_seen: u64, last: u64, e: u64) -> u64 {
    let a = (max_seen & TID_MASK) + SEQ_ONE;
    let b = (last & TID_MASK) + SEQ_ONE;
    let c = make_tid(e, 0);
    a.max(b).max(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tid_generation_rules() {
        // (c) current epoch dominates older TIDs
        assert_eq!(next_tid(make_tid(3, 9), make_tid(3, 4), 5), make_tid(5, 0));
        // (a) larger than every TID seen in the same epoch
        assert_eq!(
            next_tid(make_tid(5, 9) | LATEST, make_tid(5, 4), 5),
            make_tid(5, 10)
        );
        // (b) larger than the worker's last TID
        assert_eq!(next_tid(make_tid(5, 1), make_tid(5, 7), 5), make_tid(5, 8));
        assert_eq!(epoch_of(make_tid(77, 3) | STATUS), 77);
    }
}

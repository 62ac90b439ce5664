//! Waiting without a lock: the engine's one backoff helper. Every spin wait
//! (a record, index node or log waiter that another thread holds) steps
//! through [`snooze`]: a CPU spin hint for the first [`SPIN_LIMIT`] steps,
//! then a yield, because with more threads than cores the holder may need
//! this core. The index's restarts use [`exponential`] (doubling spins),
//! and the retry of a conflict-aborted transaction [`spin`]s a randomized
//! count.

/// Steps of [`snooze`] that spin before it starts yielding.
pub(crate) const SPIN_LIMIT: u32 = 64;

/// One step of a spin wait: spin while `*steps < SPIN_LIMIT`, then yield.
#[inline]
pub(crate) fn snooze(steps: &mut u32) {
    *steps = steps.saturating_add(1);
    if *steps < SPIN_LIMIT {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Whether a wait that has taken `steps` steps should still spin (callers
/// that block on a condition variable after spinning, instead of yielding).
#[inline]
pub(crate) fn still_spinning(steps: u32) -> bool {
    steps < SPIN_LIMIT
}

/// One step of an exponential backoff: 2, 4, ... 64 spins, then yields.
#[inline]
pub(crate) fn exponential(tries: &mut u32) {
    *tries = tries.saturating_add(1);
    if *tries <= 6 {
        spin(1u64 << *tries);
    } else {
        std::thread::yield_now();
    }
}

/// Spin `n` times.
#[inline]
pub(crate) fn spin(n: u64) {
    for _ in 0..n {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snooze_spins_then_yields_and_never_overflows() {
        let mut s = 0;
        for _ in 0..SPIN_LIMIT {
            assert!(still_spinning(s));
            snooze(&mut s);
        }
        assert!(!still_spinning(s));
        let mut s = u32::MAX;
        snooze(&mut s);
        exponential(&mut s);
        assert_eq!(s, u32::MAX);
        let mut t = 0;
        exponential(&mut t);
        assert_eq!(t, 1);
    }
}

//! User aborts: `tx.user_abort()` rolls back and `run` returns
//! `Error::UserAbort`; `run_abortable` hands the application's own reason
//! back unretried, retries conflicts, and keeps engine errors apart.

use tessera::{Abort, Database, Error, Options, Protocol, RunError, TxError};

#[derive(Debug, PartialEq, Eq)]
struct NotEnough(u64);

#[test]
fn an_abort_with_a_reason_reaches_the_caller_and_leaves_nothing() {
    for p in Protocol::INTERACTIVE {
        let db = Database::open(Options::in_memory().protocol(p)).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.put(t, b"a", &5u64.to_le_bytes())).unwrap();
        let mut calls = 0;
        let r: Result<(), RunError<NotEnough>> = w.run_abortable(|tx| {
            calls += 1;
            tx.put(t, b"written-before-the-abort", b"x")?;
            let a = u64::from_le_bytes(tx.get(t, b"a")?.unwrap().try_into().unwrap());
            Err(Abort::User(NotEnough(a)))
        });
        assert_eq!(r, Err(RunError::Aborted(NotEnough(5))), "{p}");
        assert_eq!(calls, 1, "{p}: a user abort is not retried");
        assert_eq!(w.stats().user_aborts, 1, "{p}");
        let left = w
            .run(|tx| Ok(tx.get(t, b"written-before-the-abort")?.is_some()))
            .unwrap();
        // `nocc` applies writes in place, without concurrency control.
        let isolated = p.caps().serializable || p.caps().snapshot_reads;
        assert!(!left || !isolated, "{p}: the aborted write is visible");
        // A commit passes its value through.
        let v: Result<u64, RunError<NotEnough>> = w.run_abortable(|tx| {
            Ok(u64::from_le_bytes(
                tx.get(t, b"a")?.unwrap().try_into().unwrap(),
            ))
        });
        assert_eq!(v, Ok(5));
        // An engine error is an engine error.
        let e: Result<(), RunError<NotEnough>> =
            w.run_abortable(|tx| Ok(tx.put(t, &[0u8; 2000], b"")?));
        assert!(
            matches!(e, Err(RunError::Engine(Error::InvalidArgument(_)))),
            "{p}: {e:?}"
        );
        // The plain form: one user-abort outcome, no payload.
        let r = w.run(|tx| tx.user_abort::<()>());
        assert_eq!(r, Err(Error::UserAbort));
        let r = w.try_run(|tx| tx.user_abort::<()>());
        assert!(matches!(&r, Err(e) if e.is_user_abort()), "{r:?}");
    }
}

/// A conflict inside `run_abortable` is retried like `run`'s; the reason
/// of the attempt that finally aborts is the one returned.
#[test]
fn conflicts_are_retried_and_the_last_attempts_reason_is_returned() {
    let db = Database::open(Options::in_memory()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    let mut attempt = 0u64;
    let r: Result<(), RunError<u64>> = w.run_abortable(|_tx| {
        attempt += 1;
        if attempt < 3 {
            return Err(Abort::Tx(TxError::Conflict(
                tessera::ConflictReason::ReadValidation,
            )));
        }
        Err(Abort::User(attempt))
    });
    assert_eq!(r, Err(RunError::Aborted(3)));
    let _ = t;
    // Display and source for the application's error reporting.
    let e: RunError<std::io::Error> = RunError::Aborted(std::io::Error::other("disk says no"));
    assert_eq!(e.to_string(), "transaction aborted: disk says no");
    assert!(std::error::Error::source(&e).is_some());
}

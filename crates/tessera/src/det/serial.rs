//! The serial executor: a batch's requests one after another, in timestamp
//! order, on a worker of an interactive protocol. It is what every
//! deterministic protocol must be equivalent to (its state after a batch
//! must equal this one's), the executor of the substrate's own tests, and
//! a replay of an input log into any database.

use std::any::Any;

use super::input::InputScan;
use super::sequencer::{Batch, BatchSink};
use super::{DynProcedure, Outcome, Procedures};
use crate::db::Worker;
use crate::error::{ConflictReason, Error, TxError};

/// Run one request to its outcome on `w`: its reconnaissance first when it
/// needs one, then its body. A user abort is [`Outcome::Aborted`]; a body
/// that finds its reconnaissance stale reconnoiters again (it cannot
/// happen when nothing runs between the two, as here, but a worker shared
/// with other threads may see it).
pub fn run_one(
    w: &mut Worker,
    p: &mut dyn DynProcedure,
) -> Result<Outcome<Box<dyn Any + Send>>, Error> {
    loop {
        if p.needs_reconnaissance() {
            w.run(|tx| p.reconnoiter(tx))?;
        }
        let mut stale = false;
        let r = w.run(|tx| match p.run(tx) {
            Err(TxError::Conflict(ConflictReason::Reconnaissance)) => {
                stale = true;
                Ok(None)
            }
            r => r.map(Some),
        });
        match r {
            Ok(Some(out)) => return Ok(Outcome::Committed(out)),
            Ok(None) if stale => continue,
            Ok(None) => unreachable!("no output without a stale reconnaissance"),
            Err(Error::UserAbort) => return Ok(Outcome::Aborted),
            Err(e) => return Err(e),
        }
    }
}

/// A sink for [`super::Sequencer`] that executes each batch on `worker`,
/// on the sequencer's thread, and hands back its outcomes.
pub fn sink(mut worker: Worker) -> BatchSink {
    Box::new(move |batch: Batch| {
        let outs = batch
            .txns
            .into_iter()
            .map(|mut s| run_one(&mut worker, &mut *s.proc))
            .collect();
        batch.release.executed(outs);
    })
}

/// Replay the batches of an input log on `w`, in order: the state a
/// deterministic database must have after executing them. Requests in
/// `expunged` (a system failure's, `det::expunge`) are skipped, as
/// recovery skips them. Returns the number of requests run.
pub fn replay(
    w: &mut Worker,
    log: &InputScan,
    procs: &Procedures,
    expunged: &super::expunge::Expunged,
) -> Result<u64, Error> {
    let mut n = 0;
    for b in &log.batches {
        for (i, (id, args)) in b.entries.iter().enumerate() {
            if expunged.contains_key(&(b.first_ts + i as u64)) {
                continue;
            }
            let mut p = procs.decode(*id, args)?;
            run_one(w, &mut *p)?;
            n += 1;
        }
    }
    Ok(n)
}

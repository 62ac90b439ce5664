//! Transaction requests: what a workload hands the engine instead of a
//! closure. A request's body is generic over [`Transaction`], so
//! `Worker::execute` runs it monomorphized for the database's protocol.

use crate::error::TxResult;
use crate::txn::Transaction;

/// A transaction request: its inputs (the implementing value) and its body.
/// The body may run several times (after conflicts); it must not have
/// effects outside the transaction, except on the request's own fields,
/// which it should reset at the start of each run.
pub trait Request {
    /// What a committed run returns.
    type Output;

    /// The body: the transaction's operations on `tx`.
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<Self::Output>;
}

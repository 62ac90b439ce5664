//! Tessera: a multi-core main-memory OLTP engine.
//!
//! One storage substrate (records with Silo's TID word and version chains),
//! one ordered index, one epoch system; concurrency-control protocols plug
//! into them and are chosen at run time.
//!
//! ```
//! use tessera::{Database, Options, Protocol};
//!
//! let db = Database::open(Options::in_memory().protocol(Protocol::Silo))?;
//! let accounts = db.create_table("accounts")?;
//! let mut w = db.worker()?; // one per thread
//!
//! // A one-shot transaction; conflicts are retried with backoff.
//! w.run(|tx| {
//!     tx.insert(accounts, b"alice", &100u64.to_le_bytes())?;
//!     tx.insert(accounts, b"bob", &50u64.to_le_bytes())?;
//!     Ok(())
//! })?;
//!
//! // Transfer 30 from alice to bob, unless alice cannot pay (a user abort).
//! let moved = w.run(|tx| {
//!     let a = u64::from_le_bytes(tx.get(accounts, b"alice")?.unwrap().try_into().unwrap());
//!     if a < 30 {
//!         return tx.user_abort();
//!     }
//!     let b = u64::from_le_bytes(tx.get(accounts, b"bob")?.unwrap().try_into().unwrap());
//!     tx.put(accounts, b"alice", &(a - 30).to_le_bytes())?;
//!     tx.put(accounts, b"bob", &(b + 30).to_le_bytes())?;
//!     Ok(30)
//! })?;
//! assert_eq!(moved, 30);
//!
//! // An ordered range scan, an iterator: newest key first, at most 10 rows.
//! let rows = w.run(|tx| tx.range(accounts, "a".."z").rev().take(10).collect::<Result<Vec<_>, _>>())?;
//! assert_eq!(rows[0].0, b"bob");
//! assert_eq!(u64::from_le_bytes(rows[1].1.clone().try_into().unwrap()), 70);
//!
//! w.run(|tx| tx.delete(accounts, b"bob").map(|_| ()))?;
//! # Ok::<(), tessera::Error>(())
//! ```
//!
//! # The API at a glance
//!
//! - Opening: [`Database::open`] with [`Options::in_memory`] or
//!   [`Options::durable`] (sync commits, a checkpoint every 30 s; see its
//!   docs for what a commit costs), [`Options::read_only`] for a copy.
//! - Transactions: [`Worker::run`] (one worker per thread; conflicts
//!   retried), [`Worker::run_abortable`] (roll back with your own error),
//!   [`Worker::run_snapshot`]; inside, [`Txn`]: `get`, `put`, `insert`,
//!   `update`, `delete`, [`Txn::range`] and [`Txn::prefix`] iterators, the
//!   callback [`Txn::scan`].
//! - Durability: [`Durability`], [`Database::flush`],
//!   [`Database::wait_durable`], [`Database::checkpoint`],
//!   [`Database::backup_to`], [`Database::close`] (shutdown errors as a
//!   `Result`), [`Database::recovery_report`].
//! - Errors: [`Error`] for everything a call returns; inside a
//!   transaction [`TxError`] adds the retryable conflict.
//! - Deterministic protocols: the [`det`] module's [`det::Procedure`] and
//!   [`Database::submit`].
#![warn(missing_docs)]
// Every unsafe block says why it is sound, and an unsafe fn's body is not
// one implicit unsafe block: each unsafe operation in it is marked.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

/// Declares engine-internal modules: public (and hidden from the docs)
/// with the `internals` feature, which only the CLI, the workloads crate,
/// the benchmarks and the tests enable; private otherwise. Their items are
/// no API: they change without notice, and some of them (raw record
/// pointers, the log's byte formats) let a caller break the engine's
/// invariants. What users need from them is re-exported below.
macro_rules! internal_modules {
    ($($(#[$a:meta])* $m:ident;)*) => {$(
        $(#[$a])*
        #[cfg(feature = "internals")]
        #[doc(hidden)]
        pub mod $m;
        $(#[$a])*
        #[cfg(not(feature = "internals"))]
        #[allow(dead_code, unused_imports)]
        pub(crate) mod $m;
    )*};
}

mod backoff;
mod catalog;
mod db;
pub mod det;
mod engine;
mod error;
mod iter;
mod request;
mod txn;

internal_modules! {
    cc;
    epoch;
    index;
    layouts;
    log;
    storage;
}

pub use catalog::TableId;
pub use cc::{Capabilities, Protocol};
pub use db::{BackupInfo, Database, DetStats, Options, Rows, Worker, WorkerStats};
pub use engine::{RoccRegistration, ScanValidation, ROCC_RANGE_SIZE, ROCC_SLOTS};
pub use error::{Abort, ConflictReason, Error, IoError, RunError, TxError, TxResult};
pub use iter::{RangeIter, Row};
pub use log::checkpoint::CheckpointInfo;
pub use log::recovery::{Loss, RecoveryMode, RecoveryReport};
pub use log::{CommitToken, Durability, LogStats};
pub use request::{stale_reconnaissance, Access, Declared, KeySet, Request};
pub use txn::{ScanOptions, Transaction, Txn, MAX_KEY_LEN, MAX_VALUE_LEN};

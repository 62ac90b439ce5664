//! Errors. Three kinds are kept apart in the types:
//!
//! * a **conflict abort** ([`TxError::Conflict`]): the protocol could not
//!   serialize the transaction; it is retryable and counted by reason;
//! * a **user abort** ([`TxError::UserAbort`]): the transaction's own logic
//!   rolled back (e.g. TPC-C's 1% NewOrder with an unused item); not retried;
//! * a **real error** ([`Error`]): bad input, misuse, I/O; it names what and where.

use std::fmt;

/// Why the concurrency control aborted a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConflictReason {
    /// Silo read-set validation: a record read changed or was locked by
    /// another committing transaction.
    ReadValidation,
    /// Silo node-set validation: a scanned or missed index leaf changed
    /// (phantom protection, section 4.6).
    NodeValidation,
    /// A record was unlinked (no longer latest) while the transaction used it.
    Stale,
    /// An insert lost a race with a concurrent insert of the same key.
    InsertRace,
    /// ERMIA first-updater-wins (`si`, `ssn`): the record's newest version
    /// is uncommitted, or committed after this transaction began.
    WriteConflict,
    /// SSN's exclusion-window test failed: π(T) <= η(T), committing could
    /// close a dependency cycle.
    SsnExclusion,
}

impl ConflictReason {
    /// All reasons, in a stable order (for reports).
    pub const ALL: [ConflictReason; 6] = [
        ConflictReason::ReadValidation,
        ConflictReason::NodeValidation,
        ConflictReason::Stale,
        ConflictReason::InsertRace,
        ConflictReason::WriteConflict,
        ConflictReason::SsnExclusion,
    ];

    /// Short machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            ConflictReason::ReadValidation => "read_validation",
            ConflictReason::NodeValidation => "node_validation",
            ConflictReason::Stale => "stale_record",
            ConflictReason::InsertRace => "insert_race",
            ConflictReason::WriteConflict => "write_conflict",
            ConflictReason::SsnExclusion => "ssn_exclusion",
        }
    }

    /// Index into [`ConflictReason::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The outcome of one transaction attempt that did not commit.
#[derive(Debug)]
pub enum TxError {
    /// Concurrency-control abort; retryable.
    Conflict(ConflictReason),
    /// The transaction's logic asked to roll back; not retried.
    UserAbort,
    /// A real error; not retried.
    Error(Error),
}

impl From<Error> for TxError {
    fn from(e: Error) -> Self {
        TxError::Error(e)
    }
}

impl fmt::Display for TxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxError::Conflict(r) => write!(f, "conflict abort ({r})"),
            TxError::UserAbort => f.write_str("user abort"),
            TxError::Error(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TxError {}

/// A real error (or the final outcome of [`crate::Worker::run`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The transaction rolled back on its own request.
    UserAbort,
    /// The retry limit was reached; `last` is the last conflict seen.
    TooManyRetries {
        /// Attempts made.
        attempts: u32,
        /// The last abort reason.
        last: ConflictReason,
    },
    /// A bad argument: says which and why.
    InvalidArgument(String),
    /// A table with this name exists already.
    TableExists(String),
    /// No table with this name.
    NoSuchTable(String),
    /// A table id that this database never handed out.
    BadTableId(u32),
    /// Every worker slot is taken (see `Options::workers`).
    NoWorkerSlot {
        /// Configured number of slots.
        capacity: usize,
    },
    /// A write in a read-only (snapshot) transaction.
    ReadOnly,
    /// An I/O failure of the log, a checkpoint or the data directory: says
    /// which file and which operation.
    Io(String),
    /// Damage found in the data directory (a checksum failure, garbage in
    /// the middle of the log, a missing segment, a corrupt checkpoint): says
    /// which file and at which offset. Never silently skipped.
    Corrupt(String),
    /// The data directory was written by a newer format version.
    NewerFormat(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::UserAbort => f.write_str("transaction aborted by the user"),
            Error::TooManyRetries { attempts, last } => {
                write!(
                    f,
                    "transaction gave up after {attempts} attempts (last conflict: {last})"
                )
            }
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::TableExists(s) => write!(f, "table '{s}' already exists"),
            Error::NoSuchTable(s) => write!(f, "no table named '{s}'"),
            Error::BadTableId(id) => write!(f, "table id {id} does not belong to this database"),
            Error::NoWorkerSlot { capacity } => write!(
                f,
                "all {capacity} worker slots are in use (raise Options::workers)"
            ),
            Error::ReadOnly => f.write_str("write attempted in a read-only snapshot transaction"),
            Error::Io(s) => write!(f, "I/O error: {s}"),
            Error::Corrupt(s) => write!(f, "damaged data directory: {s}"),
            Error::NewerFormat(s) => write!(f, "unsupported format: {s}"),
        }
    }
}

impl std::error::Error for Error {}

/// Result of a transaction operation.
pub type TxResult<T> = Result<T, TxError>;

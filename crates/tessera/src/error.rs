//! Errors. One enum, [`Error`], is every outcome a user sees from the
//! engine; inside a transaction one more outcome exists, kept apart in the
//! types:
//!
//! * a **conflict abort** ([`TxError::Conflict`]): the protocol could not
//!   serialize the transaction; it is retryable, counted by reason, and
//!   retried by [`Worker::run`](crate::Worker::run) (a conflict reaches
//!   the caller only as [`Error::TooManyRetries`]);
//! * everything else is an [`Error`] ([`TxError::Error`] inside the
//!   closure): a **user abort** ([`Error::UserAbort`], what
//!   `tx.user_abort()` returns: the transaction's own logic rolled back,
//!   e.g. TPC-C's 1% NewOrder with an unused item; not retried) or a
//!   **real error** (bad input, misuse, I/O; it names what and where).
//!
//! A user abort that carries the application's own reason goes through
//! [`Worker::run_abortable`](crate::Worker::run_abortable): its closure
//! returns an [`Abort<E>`] and its caller gets the `E` back in
//! [`RunError::Aborted`].

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
    /// Strict 2PL, no-wait: a lock was held in a conflicting mode.
    LockConflict,
    /// Strict 2PL, wait-die: a younger transaction met an older holder (or
    /// shared holders) and died rather than wait.
    WaitDie,
    /// A request's reconnaissance (OLLP) no longer holds: the keys it
    /// computed before running changed (a speculation-induced abort; the
    /// request reconnoiters again).
    Reconnaissance,
    /// ROCC: a read met a record locked by a committing writer (dirty) and
    /// aborted at once (Cai et al., section 3.3.3).
    DirtyRead,
    /// ROCC range validation: a writer registered in a scanned range wrote
    /// into the scanned scope and committed first (a phantom or an
    /// overwritten scanned row).
    RangeValidation,
    /// ROCC: a range's circular writer list wrapped past a position the
    /// validation needed.
    RangeOverflow,
    /// ROCC: a scanned range was split while the transaction ran.
    RangeSplit,
    /// Silo with `ScanValidation::Reread`: a scan run again at commit did
    /// not find the rows it found before (a phantom, or a row deleted).
    ScanReread,
    /// MVRCC: a write came too late for its timestamp: a transaction with
    /// a larger timestamp has already read the version it overwrites, or
    /// the range it writes in.
    TimestampOrder,
    /// MVRCC: a read met an uncommitted write, or a scanned range a
    /// registered writer, of a transaction with a smaller timestamp (which
    /// the reader would have to see).
    PendingWrite,
}

impl ConflictReason {
    /// All reasons, in a stable order (for reports).
    pub const ALL: [ConflictReason; 16] = [
        ConflictReason::ReadValidation,
        ConflictReason::NodeValidation,
        ConflictReason::Stale,
        ConflictReason::InsertRace,
        ConflictReason::WriteConflict,
        ConflictReason::SsnExclusion,
        ConflictReason::LockConflict,
        ConflictReason::WaitDie,
        ConflictReason::Reconnaissance,
        ConflictReason::DirtyRead,
        ConflictReason::RangeValidation,
        ConflictReason::RangeOverflow,
        ConflictReason::RangeSplit,
        ConflictReason::ScanReread,
        ConflictReason::TimestampOrder,
        ConflictReason::PendingWrite,
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
            ConflictReason::LockConflict => "lock_conflict",
            ConflictReason::WaitDie => "wait_die",
            ConflictReason::Reconnaissance => "stale_reconnaissance",
            ConflictReason::DirtyRead => "dirty_read",
            ConflictReason::RangeValidation => "range_validation",
            ConflictReason::RangeOverflow => "range_overflow",
            ConflictReason::RangeSplit => "range_split",
            ConflictReason::ScanReread => "scan_reread",
            ConflictReason::TimestampOrder => "timestamp_order",
            ConflictReason::PendingWrite => "pending_write",
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

/// The outcome of one transaction attempt that did not commit: what the
/// operations of a [`Txn`](crate::Txn) return, and what its closure
/// returns (with `?`).
#[derive(Debug)]
pub enum TxError {
    /// Concurrency-control abort; retryable.
    Conflict(ConflictReason),
    /// Not retried: a user abort ([`Error::UserAbort`], see
    /// [`TxError::is_user_abort`]) or a real error.
    Error(Error),
}

impl TxError {
    /// Whether this is the transaction's own request to roll back
    /// (`tx.user_abort()`).
    pub fn is_user_abort(&self) -> bool {
        matches!(self, TxError::Error(Error::UserAbort))
    }
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
            TxError::Error(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TxError {}

/// What the closure of [`Worker::run_abortable`](crate::Worker::run_abortable)
/// returns when it does not commit: the engine's outcome of an operation
/// (passed on with `?`), or the application's own reason to roll back.
#[derive(Debug)]
pub enum Abort<E> {
    /// An operation's outcome (a conflict, which is retried; an error).
    Tx(TxError),
    /// Roll back, and hand `E` to the caller of `run_abortable` (not
    /// retried).
    User(E),
}

impl<E> From<TxError> for Abort<E> {
    fn from(e: TxError) -> Self {
        Abort::Tx(e)
    }
}

impl<E> From<Error> for Abort<E> {
    fn from(e: Error) -> Self {
        Abort::Tx(TxError::Error(e))
    }
}

/// The outcome of [`Worker::run_abortable`](crate::Worker::run_abortable)
/// that is not a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError<E> {
    /// The closure rolled the transaction back with [`Abort::User`]: the
    /// application's reason, as it gave it.
    Aborted(E),
    /// The engine's error (the retry limit, bad input, I/O, ...).
    Engine(Error),
}

impl<E> From<Error> for RunError<E> {
    fn from(e: Error) -> Self {
        RunError::Engine(e)
    }
}

impl<E: fmt::Display> fmt::Display for RunError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Aborted(e) => write!(f, "transaction aborted: {e}"),
            RunError::Engine(e) => write!(f, "{e}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for RunError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Aborted(e) => Some(e),
            RunError::Engine(e) => Some(e),
        }
    }
}

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
    /// A write in a read-only snapshot transaction, or in a database
    /// opened with `Options::read_only`.
    ReadOnly,
    /// An I/O failure of the log, a checkpoint or the data directory: says
    /// which file and which operation, and keeps the `std::io::Error` (its
    /// [`std::io::ErrorKind`] and message) as its [`std::error::Error::source`].
    Io(IoError),
    /// Damage found in the data directory (a checksum failure, garbage in
    /// the middle of the log, a missing segment, a corrupt checkpoint): says
    /// which file and at which offset. Never silently skipped.
    Corrupt(String),
    /// The data directory was written by a newer format version.
    NewerFormat(String),
    /// The data directory is open in another `Database` (in this process or
    /// another one): its `LOCK` file is held.
    InUse(String),
    /// A deterministic database's **full system failure** (Faleiro's thesis
    /// §6.4.7): request `request` (its input-log timestamp) failed where its
    /// protocol cannot roll it back (a PWV piece after the commit point
    /// returned an error or panicked), so part of it may have been visible.
    /// It was expunged from the input log (`tessera.expunged`); the batch
    /// it was in and every later submission fail with this error, and none
    /// of their outcomes was released. Recovery (the restart the database
    /// makes with a data directory, or the next open) reloads the last
    /// checkpoint and replays the log without it. A request answered with
    /// this error may or may not have been logged before the failure: its
    /// outcome is unknown, as after a crash. An in-memory database cannot
    /// recover and stays failed.
    SystemFailure {
        /// The failed request's timestamp.
        request: u64,
        /// What failed.
        reason: String,
    },
}

/// The cause of an [`Error::Io`]: what was being done to which path, and the
/// operating system's error.
#[derive(Debug, Clone)]
pub struct IoError {
    context: String,
    source: std::sync::Arc<std::io::Error>,
}

impl IoError {
    /// What was being done, e.g. "cannot read /data/tessera.meta".
    pub fn context(&self) -> &str {
        &self.context
    }

    /// The operating system's error kind (`PermissionDenied`,
    /// `ReadOnlyFilesystem`, `StorageFull`, ...).
    pub fn kind(&self) -> std::io::ErrorKind {
        self.source.kind()
    }

    /// The underlying error.
    pub fn io_error(&self) -> &std::io::Error {
        &self.source
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &Self) -> bool {
        self.context == other.context && self.source.kind() == other.source.kind()
    }
}

impl Eq for IoError {}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.context, self.source)
    }
}

impl Error {
    /// An [`Error::Io`]: `context` says what was being done to which path.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io(IoError {
            context: context.into(),
            source: std::sync::Arc::new(source),
        })
    }

    /// The `std::io::ErrorKind` of an [`Error::Io`].
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            Error::Io(e) => Some(e.kind()),
            _ => None,
        }
    }
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
            Error::ReadOnly => f.write_str(
                "write attempted in a read-only snapshot transaction or a database opened read-only",
            ),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Corrupt(s) => write!(f, "damaged data directory: {s}"),
            Error::NewerFormat(s) => write!(f, "unsupported format: {s}"),
            Error::InUse(s) => write!(f, "in use: {s}"),
            Error::SystemFailure { request, reason } => write!(
                f,
                "system failure: request {request} failed after its commit point ({reason}); \
                 it is expunged from the input log and recovery replays the log without it \
                 (requests answered with this error may or may not have committed)"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(&*e.source),
            _ => None,
        }
    }
}

/// Result of a transaction operation.
pub type TxResult<T> = Result<T, TxError>;

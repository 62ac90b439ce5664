//! The benchmark driver every workload shares.
//!
//! A [`Workload`] says how to load its data and how to draw and execute one
//! transaction; the driver does the rest, the same way for every workload
//! and every protocol:
//!
//! * **loading** ([`load`]): the workload's own parallel loader, with an
//!   indicatif progress bar on stderr (hidden when stderr is not a terminal
//!   or when quiet);
//! * **running** ([`run`](fn@run)): `threads` driver threads, each with its own
//!   [`Worker`]; a warm-up period whose results are discarded, then the
//!   measured period. A transaction's inputs are drawn once
//!   ([`Workload::next`]); a **conflict abort** is retried with the *same*
//!   inputs until it commits (optionally after a randomized exponential
//!   backoff), or, with [`RunConfig::retry`] off, dropped so that the thread
//!   draws a new transaction (Silo's and ERMIA's benchmark drivers do this
//!   unless given `--retry-aborted-transactions`); every abort is counted by
//!   reason and transaction type; a **user abort** is counted apart and not
//!   retried; a real error stops the run. Latency runs from the first
//!   attempt to the commit.
//! * **live progress**: once a second, one line on stderr (elapsed time,
//!   committed txn/s and abort rate over the last second); updated in place
//!   with a carriage return on a terminal, plain lines otherwise, nothing
//!   when quiet.
//! * **results** ([`Report`]): committed transactions per second, aborts by
//!   reason, latency percentiles per transaction type and in total
//!   (hdrhistogram, merged across threads at the end), and the per-thread
//!   spread; [`Report::table`] renders it for humans and `serde_json` turns
//!   it into the JSON object of `tessera bench ... --json`.
//!
//! # Accounting
//!
//! A commit or abort counts if it happens while the measured period is on
//! (by the time it *finishes*): transactions that started in the warm-up and
//! commit in the measured period count, with their whole latency; those
//! still running when the period ends do not. Throughput is committed
//! transactions divided by the measured wall time. The abort rate is
//! conflict aborts divided by attempts that ended in a commit or a conflict
//! abort.
//!
//! # Overhead
//!
//! The worker hot path takes no lock, allocates nothing and writes no shared
//! atomic: counters and histograms are per thread, the only shared state
//! read per transaction is the phase word (written three times per run), and
//! each thread publishes its running totals for the progress display with
//! relaxed stores into its own cache-padded slot.

mod report;
mod run;
#[cfg(test)]
mod test_workload;

use std::fmt;

use tessera::{Database, Durability, Error, ScanOptions, TableId, TxResult, Worker};

pub use report::{Aborts, Latency, LoadReport, LogReport, Report, TypeReport, TypeReports};
pub use run::{bench, load, resident_bytes, run, thread_seed};

/// A benchmark workload: data loading plus a transaction generator.
///
/// The driver calls [`Workload::next`] once per transaction to draw its
/// inputs into the thread's state, then [`Workload::execute`] (one attempt)
/// until it commits or user-aborts; a conflict-aborted attempt is repeated
/// with the same inputs, so `execute` must not draw new ones.
pub trait Workload: Sync {
    /// Per-thread state: the thread's RNG and the current transaction's
    /// inputs.
    type Thread: Send;

    /// Short name for reports (`ycsb`, `tpcc`).
    fn name(&self) -> &'static str;

    /// Names of the transaction types this configuration runs, indexed by
    /// what [`Workload::next`] returns. Reports list them in this order.
    fn txn_types(&self) -> &[&'static str];

    /// Rows [`Workload::load`] will insert (for the progress bar).
    fn rows_to_load(&self) -> u64;

    /// Create the tables and load the initial data using `threads` threads
    /// (each with its own worker). Call `progress(n)` after every batch of
    /// `n` rows. Returns the number of rows loaded.
    fn load(
        &self,
        db: &Database,
        threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error>;

    /// Fresh state for driver thread `thread` of `threads` (workloads that
    /// partition data, like TPC-C's home warehouses, use both), with its
    /// own RNG seed.
    fn thread_state(&self, thread: usize, threads: usize, seed: u64) -> Self::Thread;

    /// Draw the next transaction's inputs into `st`; returns its type index
    /// (into [`Workload::txn_types`]).
    fn next(&self, st: &mut Self::Thread) -> usize;

    /// Execute the current transaction once (one `Worker::try_run`) and
    /// return its outcome.
    fn execute(&self, st: &mut Self::Thread, w: &mut Worker) -> TxResult<()>;

    /// The workload's knobs, for the report's `config` object.
    fn config(&self) -> serde_json::Value;
}

/// Every value of `table`, in key order, read in one transaction on `w`
/// (the workloads' checks after a run).
pub fn table_values(w: &mut Worker, table: TableId) -> Result<Vec<Vec<u8>>, Error> {
    w.run(|tx| {
        let mut out = Vec::new();
        tx.scan(
            table,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            ScanOptions::new(),
            |_, v| {
                out.push(v.to_vec());
                true
            },
        )?;
        Ok(out)
    })
}

/// Load rows `0..n` of a workload from up to `threads` threads, each with
/// its own worker and a slice of the ids, `batch` rows per transaction:
/// `insert(tx, id, scratch)` writes row `id` (the scratch buffer is the
/// thread's own) and says whether it was new. The first row found present
/// already fails the load with `present(id)` (a load goes into an empty
/// database). `progress` is told of every committed transaction's rows.
pub fn load_rows<F>(
    db: &Database,
    n: u64,
    threads: usize,
    batch: u64,
    progress: &(dyn Fn(u64) + Sync),
    insert: F,
    present: &(dyn Fn(u64) -> String + Sync),
) -> Result<(), Error>
where
    F: Fn(&mut tessera::Txn<'_>, u64, &mut Vec<u8>) -> TxResult<bool> + Sync,
{
    let threads = (threads.max(1) as u64).min(n.div_ceil(batch)).max(1);
    let per = n.div_ceil(threads);
    let insert = &insert;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|th| {
                s.spawn(move || -> Result<(), Error> {
                    let mut w = db.worker()?;
                    let mut scratch = Vec::new();
                    let (lo, hi) = (th * per, ((th + 1) * per).min(n));
                    let mut i = lo;
                    while i < hi {
                        let end = (i + batch).min(hi);
                        let dup = w.run(|tx| {
                            for id in i..end {
                                if !insert(tx, id, &mut scratch)? {
                                    return Ok(Some(id));
                                }
                            }
                            Ok(None)
                        })?;
                        if let Some(id) = dup {
                            return Err(Error::InvalidArgument(present(id)));
                        }
                        progress(end - i);
                        i = end;
                    }
                    Ok(())
                })
            })
            .collect();
        hs.into_iter()
            .try_for_each(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    })
}

/// How to run a benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// Driver threads, each with its own worker.
    pub threads: usize,
    /// Loader threads (0: as many as driver threads). The database needs
    /// that many worker slots while loading.
    pub load_threads: usize,
    /// Length of the measured period in seconds.
    pub seconds: f64,
    /// Warm-up seconds before the measured period; results discarded.
    pub warmup: f64,
    /// No progress bar and no progress lines on stderr.
    pub quiet: bool,
    /// Base RNG seed; thread `i` gets a seed derived from it and `i`.
    pub seed: u64,
    /// Wait a randomized, exponentially growing spin before retrying a
    /// conflict-aborted transaction (as `Worker::run` does). Off: retry at
    /// once.
    pub backoff: bool,
    /// Retry a conflict-aborted transaction with the same inputs until it
    /// commits (the default). Off: count the abort and draw a new
    /// transaction, as Silo's and ERMIA's benchmark drivers do by default
    /// (their `retry_aborted_transactions` is off). ERMIA's Figure 5 is
    /// measured that way: a retried Q2\* keeps its thread away from the
    /// NewOrders that would abort it, which hides OCC's starvation of long
    /// readers.
    pub retry: bool,
    /// The durability mode being measured, for the report. With a logging
    /// database the driver always measures the *acknowledged* (durable)
    /// commit latency besides the commit latency; `Sync` only changes the
    /// label: open the database with `Durability::Async` so that workers
    /// go on while their commits become durable (Silo's benchmark does the
    /// same; a `Sync` database would not slow the driver either, as it
    /// commits through `try_run`, but its loader would wait per batch).
    pub durability: Durability,
    /// Run every request through the batch path's checks
    /// ([`Worker::set_declared`]): reconnaissance where a request needs it,
    /// then its body against its declared key sets only. A workload whose
    /// declarations miss a key fails the run with an error naming it.
    pub declared: bool,
    /// Stop each driver thread once it has committed this many
    /// transactions in the measured period, instead of after `seconds`: a
    /// fixed amount of work, for instruction counts that must not depend on
    /// how fast the machine ran (callgrind).
    pub txns: Option<u64>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            threads: 1,
            load_threads: 0,
            seconds: 10.0,
            warmup: 2.0,
            quiet: false,
            seed: 42,
            backoff: true,
            retry: true,
            durability: Durability::None,
            declared: false,
            txns: None,
        }
    }
}

impl RunConfig {
    /// Check the settings; the message names the offending one.
    pub fn validate(&self) -> Result<(), DriverError> {
        if self.threads == 0 {
            return Err(DriverError::Config("threads must be at least 1".into()));
        }
        if !(self.seconds > 0.0 && self.seconds.is_finite()) {
            return Err(DriverError::Config(format!(
                "seconds must be positive, got {}",
                self.seconds
            )));
        }
        if self.txns == Some(0) {
            return Err(DriverError::Config("txns must be at least 1".into()));
        }
        if !(self.warmup >= 0.0 && self.warmup.is_finite()) {
            return Err(DriverError::Config(format!(
                "warmup must be zero or positive, got {}",
                self.warmup
            )));
        }
        Ok(())
    }
}

/// Why a benchmark could not finish.
#[derive(Debug)]
pub enum DriverError {
    /// Bad run configuration (names the setting).
    Config(String),
    /// Loading failed.
    Load(Error),
    /// A worker could not be created.
    Worker(Error),
    /// The log failed (waiting for the last commits to become durable).
    Log(Error),
    /// A transaction failed with a real (not conflict, not user) error.
    Txn {
        /// Its type.
        txn_type: &'static str,
        /// The driver thread that ran it.
        thread: usize,
        /// The error.
        error: Error,
    },
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriverError::Config(s) => f.write_str(s),
            DriverError::Load(e) => write!(f, "loading failed: {e}"),
            DriverError::Worker(e) => write!(f, "cannot create a worker: {e}"),
            DriverError::Log(e) => write!(f, "the log failed: {e}"),
            DriverError::Txn {
                txn_type,
                thread,
                error,
            } => write!(
                f,
                "a '{txn_type}' transaction on driver thread {thread} failed: {error}"
            ),
        }
    }
}

impl std::error::Error for DriverError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_run_config_is_rejected() {
        let mut c = RunConfig {
            threads: 0,
            ..RunConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("threads"));
        c.threads = 1;
        c.seconds = 0.0;
        assert!(c.validate().unwrap_err().to_string().contains("seconds"));
        c.seconds = 1.0;
        c.warmup = -1.0;
        assert!(c.validate().unwrap_err().to_string().contains("warmup"));
    }
}

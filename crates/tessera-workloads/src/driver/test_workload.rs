//! The workload the driver's tests run: [`Counter`], and the run settings
//! they start from.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tessera::{ConflictReason, Database, Error, TableId, TxError, TxResult, Worker};

use super::{RunConfig, Workload};

/// A test workload: each transaction increments one of 64 counters.
/// Every attempt-0 of a transaction whose number is divisible by 3
/// reports a conflict (so it is retried), every 10th transaction user
/// aborts, and the first attempt sleeps so latency includes it.
pub(super) struct Counter {
    table: std::sync::OnceLock<TableId>,
    types: [&'static str; 2],
    /// Transactions abandoned after a conflict (must stay 0 while the
    /// run is on).
    pub(super) abandoned: AtomicU64,
}

pub(super) struct CounterThread {
    n: u64,
    attempt: u32,
    key: u8,
}

impl Workload for Counter {
    type Thread = CounterThread;
    fn name(&self) -> &'static str {
        "counter"
    }
    fn txn_types(&self) -> &[&'static str] {
        &self.types
    }
    fn rows_to_load(&self) -> u64 {
        64
    }
    fn load(
        &self,
        db: &Database,
        _threads: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<u64, Error> {
        let t = db.create_table("counter")?;
        self.table.set(t).unwrap();
        let mut w = db.worker()?;
        w.run(|tx| {
            for k in 0..64u8 {
                tx.put(t, &[k], &0u64.to_le_bytes())?;
            }
            Ok(())
        })?;
        progress(64);
        Ok(64)
    }
    fn thread_state(&self, thread: usize, _threads: usize, _seed: u64) -> CounterThread {
        CounterThread {
            n: 0,
            attempt: 0,
            key: thread as u8,
        }
    }
    fn next(&self, st: &mut CounterThread) -> usize {
        if st.n.is_multiple_of(3) && st.n > 0 && st.attempt < 2 {
            // The driver drew new inputs instead of retrying.
            self.abandoned.fetch_add(1, Ordering::Relaxed);
        }
        st.n += 1;
        st.attempt = 0;
        st.key = st.key.wrapping_add(7) % 64;
        (st.n % 2) as usize
    }
    fn execute(&self, st: &mut CounterThread, w: &mut Worker) -> TxResult<()> {
        let t = *self.table.get().unwrap();
        st.attempt += 1;
        if st.attempt == 1 {
            std::thread::sleep(Duration::from_micros(100));
            if st.n.is_multiple_of(3) {
                return Err(TxError::Conflict(ConflictReason::ReadValidation));
            }
        }
        let (key, n) = (st.key, st.n);
        w.try_run(|tx| {
            let v = u64::from_le_bytes(tx.get(t, &[key])?.unwrap().try_into().unwrap());
            tx.put(t, &[key], &(v + 1).to_le_bytes())?;
            if n % 10 == 0 {
                return tx.user_abort();
            }
            Ok(())
        })
    }
    fn config(&self) -> serde_json::Value {
        serde_json::json!({"counters": 64})
    }
}

/// A short, quiet, single-thread run (tests override what they vary).
pub(super) fn short_run() -> RunConfig {
    RunConfig {
        threads: 1,
        load_threads: 1,
        seconds: 0.3,
        warmup: 0.0,
        quiet: true,
        seed: 1,
        ..RunConfig::default()
    }
}

pub(super) fn counter() -> Counter {
    Counter {
        table: std::sync::OnceLock::new(),
        types: ["even", "odd"],
        abandoned: AtomicU64::new(0),
    }
}

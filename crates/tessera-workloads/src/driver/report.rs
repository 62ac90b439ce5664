//! The results of a run: [`Report`] and its parts, rendered as JSON
//! (`serde`) or as a table for humans ([`Report::table`]).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use tessera::ConflictReason;

use super::run::TypeStats;

/// Latency summary in microseconds (two decimals).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

pub(super) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Latency {
    pub(super) fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency {
                p50: 0.0,
                p95: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
                mean: 0.0,
            };
        }
        let us = |ns: u64| round2(ns as f64 / 1000.0);
        Latency {
            p50: us(h.value_at_quantile(0.50)),
            p95: us(h.value_at_quantile(0.95)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: round2(h.mean() / 1000.0),
        }
    }
}

/// Aborts of one transaction type or of the whole run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Aborts {
    /// Conflict aborts (each retried).
    pub total: u64,
    /// Conflict aborts by reason ([`ConflictReason::name`]; every reason is
    /// listed, zeros included).
    pub by_reason: BTreeMap<String, u64>,
    /// User aborts (the transaction's own rollbacks; not retried).
    pub user: u64,
}

impl Aborts {
    pub(super) fn of(s: &TypeStats) -> Aborts {
        Aborts {
            total: s.aborts.iter().sum(),
            by_reason: ConflictReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), s.aborts[r.index()]))
                .collect(),
            user: s.user_aborts,
        }
    }
}

/// Results of one transaction type.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TypeReport {
    /// Committed transactions.
    pub committed: u64,
    /// Aborts of this type.
    pub aborted: Aborts,
    /// User aborts (the same number as `aborted.user`).
    pub user_aborts: u64,
    /// Conflict aborts / (commits + conflict aborts) of this type.
    pub abort_rate: f64,
    /// Committed per second of measured time.
    pub throughput_txn_per_s: f64,
    /// Latency from the first attempt to the commit.
    pub latency_us: Latency,
    /// Latency from the first attempt to the acknowledgement (the commit's
    /// epoch durable); `null` without a log.
    pub durable_latency_us: Option<Latency>,
}

/// The per-type results in the workload's order (a JSON object whose keys
/// are the type names, in that order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeReports(pub Vec<(String, TypeReport)>);

impl TypeReports {
    /// The report of type `name`.
    pub fn get(&self, name: &str) -> Option<&TypeReport> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, r)| r)
    }

    /// Iterate in the workload's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TypeReport)> {
        self.0.iter().map(|(n, r)| (n.as_str(), r))
    }
}

impl Serialize for TypeReports {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Loading statistics.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LoadReport {
    /// Wall time of the load in seconds.
    pub seconds: f64,
    /// Rows inserted.
    pub records: u64,
    /// Growth of the process's resident memory over the load, in bytes: the
    /// memory the loaded database takes (Linux; `None` elsewhere).
    pub resident_growth_bytes: Option<u64>,
    /// Growth of the process's resident memory from before the load to the
    /// end of the run, in bytes: the database after the rows the run added
    /// (and what its garbage collection has not given back yet).
    pub resident_growth_after_run_bytes: Option<u64>,
    /// The process's resident memory before the load (for the figure above).
    #[serde(skip)]
    pub resident_before: Option<u64>,
}

/// The results of one run; `tessera bench ... --json` prints it as one JSON
/// object (field names as here).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Report {
    /// Protocol name ([`tessera::Protocol::name`]).
    pub protocol: String,
    /// Workload name.
    pub workload: String,
    /// Driver threads.
    pub threads: usize,
    /// Measured seconds (the actual wall time of the measured period).
    pub seconds: f64,
    /// Warm-up seconds.
    pub warmup_seconds: f64,
    /// Committed transactions in the measured period.
    pub committed: u64,
    /// Aborts in the measured period.
    pub aborted: Aborts,
    /// Conflict aborts / (commits + conflict aborts).
    pub abort_rate: f64,
    /// Committed transactions per second (all types).
    pub throughput_txn_per_s: f64,
    /// Latency over all types.
    pub latency_us: Latency,
    /// Per transaction type, in the workload's order.
    pub transactions: TypeReports,
    /// Committed transactions per driver thread.
    pub per_thread: Vec<u64>,
    /// Whether conflict aborts were retried after a backoff.
    pub backoff: bool,
    /// Whether conflict aborts were retried at all
    /// ([`RunConfig::retry`](super::RunConfig::retry)); when not, `committed`
    /// counts only first attempts that committed.
    pub retry: bool,
    /// Whether requests ran through the batch path's checks
    /// ([`RunConfig::declared`](super::RunConfig::declared)).
    pub declared: bool,
    /// Base RNG seed.
    pub seed: u64,
    /// Engine settings the caller chose to record (e.g. `epoch_ms`); an
    /// empty object if none.
    pub engine: serde_json::Value,
    /// The workload's knobs ([`Workload::config`](super::Workload::config)).
    pub config: serde_json::Value,
    /// Loading.
    pub load: LoadReport,
    /// Durability mode (`none`, `async` or `sync`;
    /// [`RunConfig::durability`](super::RunConfig::durability)).
    pub durability: String,
    /// The log's work; `null` without a log.
    pub log: Option<LogReport>,
    /// Acknowledged commit latency over all types: from the first attempt
    /// to the moment the driver saw the commit's epoch durable; `null`
    /// without a log. See [`run`](fn@super::run).
    pub durable_latency_us: Option<Latency>,
}

/// What the log did during a run.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LogReport {
    /// Bytes written to log segments during the measured period
    /// (approximately: the loggers trail the workers by an epoch or so).
    pub bytes: u64,
    /// `bytes` per transaction committed in the measured period.
    pub bytes_per_txn: f64,
    /// `fdatasync` calls during the measured period.
    pub fsyncs: u64,
    /// Transaction entries logged during the measured period.
    pub txns: u64,
    /// Bytes written by this process in all (the load included).
    pub total_bytes: u64,
    /// `fdatasync` calls in all.
    pub total_fsyncs: u64,
    /// The durable epoch at the end of the run, once every committed
    /// transaction was acknowledged.
    pub durable_epoch: u64,
    /// Seconds the driver threads waited at the end for their last commits
    /// to become durable (the longest).
    pub final_wait_seconds: f64,
    /// Checkpoints taken since the database was opened (the background
    /// checkpointer, `Options::checkpoint_interval`).
    pub checkpoints: u64,
    /// The last background checkpoint failure, if any.
    pub checkpoint_error: Option<String>,
}

impl Report {
    /// The human-readable results: a summary, aborts by reason, one row per
    /// transaction type plus the total, and the per-thread spread.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} on {}: {} thread(s), {:.2} s measured after {:.1} s warm-up; {} rows loaded in {:.2} s",
            self.workload,
            self.protocol,
            self.threads,
            self.seconds,
            self.warmup_seconds,
            self.load.records,
            self.load.seconds
        );
        if let Some(b) = self.load.resident_growth_bytes {
            let _ = write!(s, "loaded data: {:.1} MiB resident", b as f64 / 1048576.0);
            if let Some(a) = self.load.resident_growth_after_run_bytes {
                let _ = write!(s, ", {:.1} MiB after the run", a as f64 / 1048576.0);
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(
            s,
            "throughput {:.0} txn/s: {} committed, {} conflict aborts ({:.3}% of attempts), {} user aborts",
            self.throughput_txn_per_s,
            self.committed,
            self.aborted.total,
            100.0 * self.abort_rate,
            self.aborted.user
        );
        if self.aborted.total > 0 {
            let reasons: Vec<String> = self
                .aborted
                .by_reason
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            let _ = writeln!(s, "conflict aborts by reason: {}", reasons.join(", "));
        }
        let _ = writeln!(
            s,
            "\n{:<12} {:>12} {:>12} {:>10} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "type",
            "committed",
            "txn/s",
            "aborts",
            "abort%",
            "user",
            "p50 us",
            "p95 us",
            "p99 us",
            "p99.9 us",
            "max us"
        );
        let mut row = |name: &str, t: &TypeReport| {
            let l = &t.latency_us;
            let _ = writeln!(
                s,
                "{name:<12} {:>12} {:>12.0} {:>10} {:>8.3} {:>8} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                t.committed,
                t.throughput_txn_per_s,
                t.aborted.total,
                100.0 * t.abort_rate,
                t.user_aborts,
                l.p50,
                l.p95,
                l.p99,
                l.p999,
                l.max
            );
        };
        for (name, t) in self.transactions.iter() {
            row(name, t);
        }
        if self.transactions.0.len() > 1 {
            row(
                "all",
                &TypeReport {
                    committed: self.committed,
                    aborted: self.aborted.clone(),
                    user_aborts: self.aborted.user,
                    abort_rate: self.abort_rate,
                    throughput_txn_per_s: self.throughput_txn_per_s,
                    latency_us: self.latency_us.clone(),
                    durable_latency_us: self.durable_latency_us.clone(),
                },
            );
        }
        if self.durable_latency_us.is_some() {
            let _ = writeln!(
                s,
                "\ndurable commit latency (first attempt to the commit's epoch durable):\n{:<12} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9}",
                "type", "committed", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us"
            );
            let mut drow = |name: &str, committed: u64, l: &Latency| {
                let _ = writeln!(
                    s,
                    "{name:<12} {committed:>12} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                    l.p50, l.p95, l.p99, l.p999, l.max
                );
            };
            for (name, t) in self.transactions.iter() {
                if let Some(l) = &t.durable_latency_us {
                    drow(name, t.committed, l);
                }
            }
            if let (true, Some(l)) = (self.transactions.0.len() > 1, &self.durable_latency_us) {
                drow("all", self.committed, l);
            }
        }
        match &self.log {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "\ndurability {}: {:.2} MiB logged in the measured period ({:.0} B per committed txn, \
                     {} txn entries), {} fsyncs; durable epoch {} at the end (last commits waited {:.3} s); \
                     {:.2} MiB logged in all",
                    self.durability,
                    l.bytes as f64 / 1048576.0,
                    l.bytes_per_txn,
                    l.txns,
                    l.fsyncs,
                    l.durable_epoch,
                    l.final_wait_seconds,
                    l.total_bytes as f64 / 1048576.0
                );
                if l.checkpoints > 0 || l.checkpoint_error.is_some() {
                    let _ = writeln!(
                        s,
                        "checkpoints taken: {}{}",
                        l.checkpoints,
                        l.checkpoint_error
                            .as_ref()
                            .map_or(String::new(), |e| format!("; last failure: {e}"))
                    );
                }
            }
            None => {
                let _ = writeln!(s, "\ndurability {}: no log", self.durability);
            }
        }
        let mut pt = self.per_thread.clone();
        pt.sort_unstable();
        if let (Some(min), Some(max)) = (pt.first(), pt.last()) {
            let _ = writeln!(
                s,
                "\nper-thread committed: min {min}  median {}  max {max}",
                (pt[(pt.len() - 1) / 2] + pt[pt.len() / 2]) / 2
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use tessera::{ConflictReason, Database, Options, Protocol};

    use super::super::test_workload::{counter, short_run};
    use super::super::{bench, RunConfig};

    #[test]
    fn report_json_has_the_documented_shape() {
        let db = Database::open(Options::in_memory().protocol(Protocol::Silo).workers(2)).unwrap();
        let wl = counter();
        let cfg = RunConfig {
            threads: 2,
            load_threads: 0,
            warmup: 0.1,
            ..short_run()
        };
        let mut rep = bench(&db, &wl, &cfg).unwrap();
        rep.engine = serde_json::json!({"epoch_ms": 40});
        let text = serde_json::to_string(&rep).unwrap();
        // The types come out in the workload's order.
        assert!(text.find("\"even\"").unwrap() < text.find("\"odd\"").unwrap());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for k in [
            "protocol",
            "workload",
            "threads",
            "seconds",
            "warmup_seconds",
            "committed",
            "aborted",
            "abort_rate",
            "throughput_txn_per_s",
            "latency_us",
            "transactions",
            "per_thread",
            "config",
            "load",
            "engine",
            "seed",
            "backoff",
            "retry",
            "declared",
        ] {
            assert!(v.get(k).is_some(), "missing {k} in {text}");
        }
        assert_eq!(v["protocol"], "silo");
        assert_eq!(v["workload"], "counter");
        assert_eq!(v["threads"], 2);
        assert_eq!(v["warmup_seconds"], 0.1);
        assert!(v["committed"].as_u64().unwrap() > 0);
        assert!(v["throughput_txn_per_s"].as_f64().unwrap() > 0.0);
        for r in ConflictReason::ALL {
            assert!(v["aborted"]["by_reason"][r.name()].is_u64());
        }
        assert!(v["aborted"]["total"].is_u64());
        assert!(v["aborted"]["user"].as_u64().unwrap() > 0);
        for k in ["p50", "p95", "p99", "p999", "max", "mean"] {
            assert!(v["latency_us"][k].is_f64(), "latency_us.{k}");
        }
        for ty in ["even", "odd"] {
            let t = &v["transactions"][ty];
            assert!(t["committed"].as_u64().unwrap() > 0, "{ty}");
            assert!(t["aborted"]["by_reason"].is_object());
            assert!(t["user_aborts"].is_u64());
            assert!(t["throughput_txn_per_s"].is_f64());
            assert!(t["latency_us"]["p99"].is_f64());
        }
        assert_eq!(v["per_thread"].as_array().unwrap().len(), 2);
        assert_eq!(v["config"]["counters"], 64);
        assert_eq!(v["load"]["records"], 64);
        assert!(v["load"]["seconds"].is_f64());
        assert_eq!(v["engine"]["epoch_ms"], 40);
        let sum: u64 = v["per_thread"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        assert_eq!(sum, rep.committed);
        // The table mentions every type and the spread.
        let t = rep.table();
        assert!(t.contains("even") && t.contains("odd") && t.contains("per-thread"));
    }
}

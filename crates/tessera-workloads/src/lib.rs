//! Benchmark workloads for Tessera and the driver they share.
//!
//! Each workload is written once against the engine's transaction API, so
//! every protocol runs it unchanged:
//!
//! * [`driver`]: the [`driver::Workload`] trait and the shared benchmark
//!   driver (threads, warm-up, retries of conflict aborts with the same
//!   inputs, per-type counters and latency histograms, live progress, the
//!   [`driver::Report`] printed as a table or as JSON);
//! * [`ycsb`]: YCSB with CCBench's and Silo's knobs and the core workloads
//!   A-F.
//!
//! ```
//! use tessera::{Database, Options, Protocol};
//! use tessera_workloads::driver::{self, RunConfig};
//! use tessera_workloads::ycsb::{Preset, Ycsb, YcsbConfig, YcsbOverrides};
//!
//! let cfg = YcsbConfig::with_overrides(
//!     Preset::B,
//!     &YcsbOverrides { records: Some(1000), ..Default::default() },
//! )?;
//! let wl = Ycsb::new(cfg)?;
//! let db = Database::open(Options::in_memory().protocol(Protocol::Silo).workers(2))?;
//! let run = RunConfig { threads: 2, seconds: 0.2, warmup: 0.0, quiet: true, ..RunConfig::default() };
//! let report = driver::bench(&db, &wl, &run)?;
//! assert!(report.committed > 0);
//! println!("{}", serde_json::to_string(&report)?);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod cart;
pub mod driver;
pub mod smallbank;
pub mod tpcc;
pub mod ycsb;

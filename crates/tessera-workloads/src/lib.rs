//! Benchmark workloads for Tessera and the driver they share.
//!
//! Each workload is written once against the engine's transaction API, so
//! every protocol runs it unchanged.
#![warn(missing_docs)]

pub mod driver;
pub mod ycsb;

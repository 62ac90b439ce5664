//! `tessera`: benchmarks and tools for the Tessera engine.
//!
//! Subcommands are grouped by purpose: `tessera bench <workload>` (`ycsb`,
//! `tpcc`, `tpcc-hybrid`; in memory or logging to a data directory), and
//! tools for a data directory: `tessera recover`, `tessera inspect` and
//! `tessera check tpcc`.
//!
//! Exit status: 0 on success; 1 when a run fails, or a data directory is
//! damaged (refused), holds no database, or is inconsistent; 2 for bad
//! arguments (clap's errors and ours alike, a `--data-dir` that does not
//! exist or is not a directory); 3 for an I/O error (permission, read-only
//! file system, disk full: the operating system's message is kept); 4 when
//! the data directory is in use by another open database. With `--json`,
//! every failure also prints `{"error": {kind, message, exit_status,
//! io_kind}}` on stdout.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod alloc;
mod bench;
mod det_bench;
mod det_tools;
mod failure;
mod hot_reads;
mod sweep;
mod tools;
mod versions;

#[global_allocator]
static GLOBAL: alloc::Mimalloc = alloc::Mimalloc;

#[derive(Parser, Debug)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a multi-core main-memory OLTP engine",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// Parsed once per process: the size difference between the variants does
// not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run a benchmark on an in-memory database (optionally logging it to
    /// a data directory with --durability and --data-dir).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Recover the database in a data directory and report what recovery
    /// did and the tables' row counts (exit status 1 on damage).
    Recover(tools::RecoverArgs),
    /// Describe a data directory without changing it: tessera.meta, each
    /// logger's segments, the durable epoch recovery would use, torn tails
    /// and damage; for a deterministic directory (tessera.det), its
    /// checkpoints and input log and what recovery would load and replay
    /// (exit status 1 on damage).
    Inspect(tools::InspectArgs),
    /// Write a consistent, verified copy of a data directory to a new
    /// directory (a fresh checkpoint and the log after it). The library's
    /// Database::backup_to does the same while a program runs.
    Backup(tools::BackupArgs),
    /// Recover a data directory and check a workload's invariants on it.
    #[command(subcommand)]
    Check(tools::CheckCmd),
    /// Run a benchmark over several protocols and the values of one knob,
    /// interleaved and repeated; write CSV, JSON and an SVG plot.
    Sweep(sweep::SweepArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print and exit 0.
        Err(e) if e.exit_code() == 0 => e.exit(),
        Err(e) => {
            // clap's own message on stderr, and with --json the error
            // object on stdout, as for every other failure.
            let _ = e.print();
            if std::env::args_os().any(|a| a == "--json") {
                failure::print_json(&serde_json::json!({
                    "error": failure::Failure::from_clap(&e).json()
                }));
            }
            return ExitCode::from(2);
        }
    };
    match cli.cmd {
        Cmd::Bench(b) => bench::main(b),
        Cmd::Recover(a) => tools::recover(&a),
        Cmd::Inspect(a) => tools::inspect(&a),
        Cmd::Backup(a) => tools::backup(&a),
        Cmd::Check(c) => tools::check(&c),
        Cmd::Sweep(a) => sweep::main(&a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn ycsb_flags_parse() {
        let cli = Cli::try_parse_from([
            "tessera",
            "bench",
            "ycsb",
            "--cc",
            "nocc",
            "--threads",
            "3",
            "--workload",
            "f",
            "--rmw=false",
            "--theta",
            "0.5",
            "--records",
            "10",
        ])
        .unwrap();
        let Cmd::Bench(bench::BenchCmd::Ycsb(a)) = cli.cmd else {
            panic!("not ycsb");
        };
        assert_eq!(a.common.cc, tessera::Protocol::NoCc);
        assert_eq!(a.common.threads, 3);
        let c = a.ycsb_config().unwrap();
        assert_eq!(c.preset, tessera_workloads::ycsb::Preset::F);
        assert!(!c.rmw);
        assert_eq!((c.theta, c.records), (0.5, 10));
    }

    #[test]
    fn bad_values_are_usage_errors_naming_the_flag() {
        for (flag, value) in [
            ("--threads", "0"),
            ("--read-ratio", "1.5"),
            ("--theta", "10.5"),
            ("--theta", "-0.5"),
            ("--cc", "bogus"),
            ("--records", "0"),
            ("--seconds", "0"),
            ("--warmup", "-1"),
            ("--threads", "-2"),
            ("--workload", "g"),
            ("--epoch-ms", "0"),
        ] {
            let e = Cli::try_parse_from(["tessera", "bench", "ycsb", flag, value]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{flag} {value}");
            assert!(e.to_string().contains(flag), "{flag} {value}: {e}");
        }
    }

    #[test]
    fn tpcc_flags_parse_and_warehouses_default_to_threads() {
        let cli = Cli::try_parse_from([
            "tessera",
            "bench",
            "tpcc",
            "--threads",
            "3",
            "--mix",
            "50,40,4,4,2",
            "--remote-item-pct",
            "5",
        ])
        .unwrap();
        let Cmd::Bench(bench::BenchCmd::Tpcc(a)) = cli.cmd else {
            panic!("not tpcc");
        };
        let c = a.tpcc_config();
        assert_eq!(c.warehouses, 3);
        assert_eq!(c.mix, [50, 40, 4, 4, 2]);
        assert_eq!((c.remote_item_pct, c.remote_payment_pct), (5, 15));
        assert!(c.validate().is_ok());
        let cli = Cli::try_parse_from(["tessera", "bench", "tpcc", "--warehouses", "2"]).unwrap();
        let Cmd::Bench(bench::BenchCmd::Tpcc(a)) = cli.cmd else {
            panic!("not tpcc");
        };
        assert_eq!(a.tpcc_config().warehouses, 2);
        assert_eq!(a.tpcc_config().mix, [45, 43, 4, 4, 4]);
        for (flag, value) in [
            ("--mix", "1,2,3,4,5"),
            ("--warehouses", "0"),
            ("--remote-payment-pct", "200"),
            ("--rollback-pct", "-1"),
        ] {
            let e = Cli::try_parse_from(["tessera", "bench", "tpcc", flag, value]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{flag} {value}");
            assert!(e.to_string().contains(flag), "{flag} {value}: {e}");
        }
    }

    #[test]
    fn tpcc_hybrid_flags_parse() {
        let cli = Cli::try_parse_from([
            "tessera",
            "bench",
            "tpcc-hybrid",
            "--threads",
            "2",
            "--q2-size",
            "40",
            "--remote-payment-pct",
            "30",
        ])
        .unwrap();
        let Cmd::Bench(bench::BenchCmd::TpccHybrid(a)) = cli.cmd else {
            panic!("not tpcc-hybrid");
        };
        let c = a.hybrid_config();
        assert_eq!(c.tpcc.warehouses, 2);
        assert_eq!(c.mix, [40, 38, 10, 4, 4, 4]);
        assert_eq!((c.extra.size_pct, c.extra.suppliers()), (40, 4000));
        assert_eq!(c.tpcc.remote_payment_pct, 30);
        assert!(c.validate().is_ok());
        for (flag, value) in [
            ("--q2-size", "0"),
            ("--q2-size", "101"),
            ("--mix", "45,43,4,4,4"),
            ("--mix", "40,38,10,4,4,5"),
            ("--warehouses", "0"),
        ] {
            let e =
                Cli::try_parse_from(["tessera", "bench", "tpcc-hybrid", flag, value]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{flag} {value}");
            assert!(e.to_string().contains(flag), "{flag} {value}: {e}");
        }
    }
}

//! `tessera bench versions`: Cai et al.'s chapter 2 microbenchmark of
//! version layouts (N2O, O2N, HyPer's, EMS), see `tessera::layouts`.

use std::process::ExitCode;

use clap::Args;
use serde_json::{json, Value};
use tessera::layouts::{self, Bench, LayoutKind, Work};

use crate::failure::{print_json, Failure};

/// `tessera bench versions`.
#[derive(Args, Debug)]
#[command(after_long_help = VERSIONS_HELP)]
pub struct VersionsArgs {
    /// Layouts, comma-separated: n2o, o2n, hyper, ems (run interleaved).
    #[arg(long, value_name = "L1,L2,...", value_delimiter = ',',
          default_value = "n2o,o2n,hyper,ems", value_parser = parse_layout)]
    pub layout: Vec<LayoutKind>,
    /// read-only, read-updating (every object held by an uncommitted
    /// writer) or write-only.
    #[arg(long, value_name = "WORK", default_value = "read-only", value_parser = parse_work)]
    pub work: Work,
    /// Reads ask for the oldest version kept (else the current one).
    #[arg(long)]
    pub oldest: bool,
    /// Objects (the book: 2,000,000).
    #[arg(long, value_name = "N", default_value_t = 2_000_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub objects: u64,
    /// Committed versions per object before the run (the book: 3).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub preload: u32,
    /// Value size in bytes (the book: 10 and 100).
    #[arg(long = "value-size", value_name = "BYTES", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(0..=65_536))]
    pub value_size: u64,
    /// Threads.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub threads: u64,
    /// Seconds measured per run.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    pub seconds: f64,
    /// Writes pick a hot fifth of the objects 80% of the time.
    #[arg(long)]
    pub hotspot: bool,
    /// Garbage collection on the write path (off in the book's throughput
    /// runs, on for its memory figures).
    #[arg(long)]
    pub gc: bool,
    /// Rounds (each runs every layout once; medians reported).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// Print Table 2.1 (jumps to the current and oldest versions, with this
    /// many versions per object) instead of running.
    #[arg(long, value_name = "M", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub jumps: Option<u32>,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

const VERSIONS_HELP: &str = "\
The book's microbenchmark (section 2.5): objects in an array indexed by key,
each preloaded with --preload committed versions; threads read (the version
visible at the newest stamp, or with --oldest the oldest kept) or write
(lock, install, commit) uniformly chosen objects. read-updating first has a
writer lock every object with an uncommitted version that stays for the run.
Garbage collection is off unless --gc. The report gives operations per
second, mean jumps per read (list nodes dereferenced), and the versions kept
and their bytes after the run.

--jumps M prints Table 2.1 measured on one object with M versions.";

fn parse_layout(s: &str) -> Result<LayoutKind, String> {
    s.trim().parse()
}

fn parse_work(s: &str) -> Result<Work, String> {
    s.trim().parse()
}

/// Run `tessera bench versions`.
pub fn main(a: &VersionsArgs) -> ExitCode {
    if let Some(m) = a.jumps {
        let rows: Vec<Value> = a
            .layout
            .iter()
            .map(|&k| {
                let j = layouts::jump_table(k, m);
                json!({
                    "layout": k.name(),
                    "current": j.current,
                    "current_updating": j.current_updating,
                    "oldest": j.oldest,
                    "oldest_updating": j.oldest_updating,
                })
            })
            .collect();
        if a.json {
            print_json(&json!({ "versions": m, "jumps": rows }));
        } else {
            println!("jumps to reach a version, {m} versions per object (Table 2.1)");
            println!(
                "{:<8} {:>8} {:>18} {:>8} {:>17}",
                "layout", "current", "current, updating", "oldest", "oldest, updating"
            );
            for r in &rows {
                let n = |k: &str| r[k].as_u64().unwrap_or(0);
                println!(
                    "{:<8} {:>8} {:>18} {:>8} {:>17}",
                    r["layout"].as_str().unwrap_or(""),
                    n("current"),
                    n("current_updating"),
                    n("oldest"),
                    n("oldest_updating")
                );
            }
        }
        return ExitCode::SUCCESS;
    }
    if a.seconds.is_nan() || a.seconds <= 0.0 || a.seconds.is_infinite() {
        return Failure::usage(format!("--seconds must be positive, got {}", a.seconds))
            .report(a.json, Value::Null);
    }
    let mut runs: Vec<(LayoutKind, layouts::Report)> = Vec::new();
    for round in 0..a.reps as usize {
        let n = a.layout.len();
        for k in (0..n).map(|i| a.layout[(i + round) % n]) {
            let b = Bench {
                layout: k,
                work: a.work,
                oldest: a.oldest,
                objects: a.objects as usize,
                preload: a.preload,
                value_size: a.value_size as usize,
                threads: a.threads as usize,
                seconds: a.seconds,
                hotspot: a.hotspot,
                gc: a.gc,
            };
            match layouts::run(&b) {
                Ok(r) => {
                    eprintln!(
                        "[round {}] {}: {:.0} ops/s, {:.2} jumps/read, {} versions",
                        round + 1,
                        k.name(),
                        r.ops_per_sec,
                        r.mean_jumps,
                        r.versions
                    );
                    runs.push((k, r));
                }
                Err(e) => return Failure::run(e).report(a.json, Value::Null),
            }
        }
    }
    let rows: Vec<Value> = a
        .layout
        .iter()
        .map(|&k| {
            let of = |f: &dyn Fn(&layouts::Report) -> f64| {
                // Every run of `k` succeeded (a failure ends the command).
                crate::sweep::median(
                    runs.iter()
                        .filter(|(l, _)| *l == k)
                        .map(|(_, r)| f(r))
                        .collect(),
                )
                .unwrap_or(0.0)
            };
            json!({
                "layout": k.name(),
                "ops_per_sec": of(&|r| r.ops_per_sec).round(),
                "mean_jumps": of(&|r| r.mean_jumps),
                "write_failures": of(&|r| r.write_failures as f64),
                "versions": of(&|r| r.versions as f64),
                "version_bytes": of(&|r| r.version_bytes as f64),
            })
        })
        .collect();
    if a.json {
        print_json(&json!({
            "benchmark": "versions",
            "work": a.work.name(),
            "oldest": a.oldest,
            "objects": a.objects,
            "preload": a.preload,
            "value_size": a.value_size,
            "threads": a.threads,
            "seconds": a.seconds,
            "hotspot": a.hotspot,
            "gc": a.gc,
            "reps": a.reps,
            "layouts": rows,
        }));
    } else {
        println!(
            "{} {} version, {} objects x {} versions of {} B, {} thread(s), gc {}",
            a.work.name(),
            if a.oldest { "oldest" } else { "current" },
            a.objects,
            a.preload,
            a.value_size,
            a.threads,
            if a.gc { "on" } else { "off" }
        );
        println!(
            "{:<8} {:>14} {:>11} {:>12} {:>14}",
            "layout", "ops/s", "jumps/read", "versions", "version MiB"
        );
        for r in &rows {
            println!(
                "{:<8} {:>14.0} {:>11.2} {:>12.0} {:>14.1}",
                r["layout"].as_str().unwrap_or(""),
                r["ops_per_sec"].as_f64().unwrap_or(0.0),
                r["mean_jumps"].as_f64().unwrap_or(0.0),
                r["versions"].as_f64().unwrap_or(0.0),
                r["version_bytes"].as_f64().unwrap_or(0.0) / 1048576.0
            );
        }
    }
    ExitCode::SUCCESS
}

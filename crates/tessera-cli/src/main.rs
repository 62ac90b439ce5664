//! `tessera`: benchmarks and tools for the Tessera engine.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tessera::{Database, Options, Protocol};
use tessera_workloads::driver::{self, RunConfig, Workload};
use tessera_workloads::ycsb::{Preset, Ycsb, YcsbConfig};

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a multi-core main-memory OLTP engine"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a benchmark on an in-memory database.
    #[command(subcommand)]
    Bench(Bench),
}

#[derive(Subcommand)]
enum Bench {
    /// YCSB: key-value transactions with a configurable mix and skew.
    Ycsb(YcsbArgs),
}

/// Options every benchmark has.
#[derive(Args, Debug)]
struct Common {
    /// Concurrency-control protocol (silo, nocc).
    #[arg(long = "cc", default_value = "silo")]
    cc: String,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Measured seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Warm-up seconds before measuring (results discarded).
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    /// Epoch interval in milliseconds (Silo: 40).
    #[arg(long = "epoch-ms", default_value_t = 40)]
    epoch_ms: u64,
    /// Print one JSON object on stdout instead of the table (progress stays on stderr).
    #[arg(long)]
    json: bool,
    /// No progress output on stderr.
    #[arg(long)]
    quiet: bool,
    /// RNG seed.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

/// YCSB knobs. A preset (--workload a..f) sets the mix and zipfian skew 0.99;
/// any knob given explicitly overrides the preset.
#[derive(Args, Debug)]
struct YcsbArgs {
    #[command(flatten)]
    common: Common,
    /// Preset: a (50/50 read/update), b (95/5), c (read only), d (read latest,
    /// 5% insert), e (95% scans, 5% insert), f (50% read-modify-write), custom.
    #[arg(long, default_value = "custom")]
    workload: String,
    /// Records loaded.
    #[arg(long)]
    records: Option<u64>,
    /// Value size in bytes.
    #[arg(long = "value-size")]
    value_size: Option<usize>,
    /// Operations per transaction.
    #[arg(long = "ops-per-txn")]
    ops_per_txn: Option<usize>,
    /// Fraction of operations that read (the rest update, unless scans/inserts are set).
    #[arg(long = "read-ratio")]
    read_ratio: Option<f64>,
    /// Fraction of operations that scan.
    #[arg(long = "scan-ratio")]
    scan_ratio: Option<f64>,
    /// Fraction of operations that insert new records.
    #[arg(long = "insert-ratio")]
    insert_ratio: Option<f64>,
    /// Updates read the record first (read-modify-write) instead of writing blindly.
    #[arg(long)]
    rmw: bool,
    /// Zipfian skew in [0, 1); 0 is uniform.
    #[arg(long)]
    theta: Option<f64>,
    /// Longest scan (lengths are uniform in 1..=N).
    #[arg(long = "scan-length")]
    scan_length: Option<usize>,
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {msg}");
    ExitCode::from(2)
}

fn open_db(c: &Common) -> Result<Database, String> {
    let protocol: Protocol = c.cc.parse().map_err(|e| format!("--cc: {e}"))?;
    if c.threads == 0 || c.threads > 1024 {
        return Err(format!("--threads must be in 1..=1024, got {}", c.threads));
    }
    if !(c.seconds > 0.0 && c.seconds.is_finite()) {
        return Err(format!("--seconds must be positive, got {}", c.seconds));
    }
    if !(c.warmup >= 0.0 && c.warmup.is_finite()) {
        return Err(format!(
            "--warmup must be zero or positive, got {}",
            c.warmup
        ));
    }
    if c.epoch_ms == 0 || c.epoch_ms > 10_000 {
        return Err(format!(
            "--epoch-ms must be in 1..=10000, got {}",
            c.epoch_ms
        ));
    }
    Database::open(
        Options::in_memory()
            .protocol(protocol)
            .workers(c.threads + 1)
            .epoch_interval(Duration::from_millis(c.epoch_ms)),
    )
    .map_err(|e| e.to_string())
}

fn ycsb_config(a: &YcsbArgs) -> Result<YcsbConfig, String> {
    let preset: Preset = a.workload.parse().map_err(|e| format!("--workload: {e}"))?;
    let mut c = YcsbConfig::default().with_preset(preset);
    if let Some(v) = a.records {
        c.records = v;
    }
    if let Some(v) = a.value_size {
        c.value_size = v;
    }
    if let Some(v) = a.ops_per_txn {
        c.ops_per_txn = v;
    }
    if let Some(v) = a.read_ratio {
        c.read_ratio = v;
    }
    if let Some(v) = a.scan_ratio {
        c.scan_ratio = v;
    }
    if let Some(v) = a.insert_ratio {
        c.insert_ratio = v;
    }
    if a.rmw {
        c.rmw = true;
    }
    if let Some(v) = a.theta {
        c.theta = v;
    }
    if let Some(v) = a.scan_length {
        c.scan_length = v;
    }
    for (flag, v) in [
        ("--scan-ratio", c.scan_ratio),
        ("--insert-ratio", c.insert_ratio),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(format!("{flag} must be in [0, 1], got {v}"));
        }
    }
    c.validate()?;
    Ok(c)
}

fn bench<W: Workload>(db: &Database, wl: &W, c: &Common) -> ExitCode {
    let cfg = RunConfig {
        threads: c.threads,
        seconds: c.seconds,
        warmup: c.warmup,
        quiet: c.quiet,
        seed: c.seed,
    };
    let load = match driver::load(db, wl, &cfg) {
        Ok(l) => l,
        Err(e) => return fail(format!("loading failed: {e}")),
    };
    let report = match driver::run(db, wl, &cfg, load) {
        Ok(r) => r,
        Err(e) => return fail(format!("benchmark failed: {e}")),
    };
    if c.json {
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => return fail(e),
        }
    } else {
        print!("{}", report.table());
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Bench(Bench::Ycsb(a)) => {
            let cfg = match ycsb_config(&a) {
                Ok(c) => c,
                Err(e) => return fail(e),
            };
            let db = match open_db(&a.common) {
                Ok(db) => db,
                Err(e) => return fail(e),
            };
            let wl = match Ycsb::new(cfg) {
                Ok(w) => w,
                Err(e) => return fail(e),
            };
            bench(&db, &wl, &a.common)
        }
    }
}

//! `tessera sweep`: one benchmark over a list of protocols and one varied
//! knob, interleaved and repeated, written as CSV, JSON and an SVG plot.
//!
//! Each run is a child `tessera bench WORKLOAD --cc P --KNOB V ... --json
//! --quiet`, so every run starts from a fresh process and memory. The
//! order is round by round (every value, every protocol, then the next
//! round), so drift over the sweep hits every configuration alike; the
//! results are the medians over the rounds.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::Args;
use plotters::prelude::*;
use serde_json::{json, Value};

use crate::failure::Failure;
use tessera::Protocol;

const SWEEP_HELP: &str = "\
Example (the YCSB theta sweep of docs/BENCHMARKS.md):

  tessera sweep --workload ycsb --cc silo,si,ssn,2pl-nowait,2pl-waitdie \\
      --vary theta=0,0.5,0.8,0.9,0.99 --reps 3 --out results/ycsb-theta \\
      -- --threads 2 --seconds 3 --warmup 1 --records 1000000 --ops-per-txn 10 \\
      --read-ratio 0.5 --value-size 4

--vary NAME=V1,V2,... passes --NAME V to each run (any flag of the bench:
threads, theta, read-ratio, customers, q2-size, ...). Everything after `--`
goes to every run. Output in --out: sweep.csv (one row per run), sweep.json
(every run's report, the medians, the command lines) and sweep.svg
(throughput and abort rate against the knob, one line per protocol, medians).
A run that fails (a non-zero exit, a consistency or conservation failure
included, a signal, no JSON report, or no committed transaction) is recorded
with its reason and report, left out of the medians, and the sweep goes on;
the exit status is then 1. The protocol order rotates each round.";

/// `tessera sweep`.
#[derive(Args, Debug)]
#[command(after_long_help = SWEEP_HELP)]
pub struct SweepArgs {
    /// The benchmark: ycsb, tpcc, tpcc-hybrid, tpcc-toppayer, smallbank or
    /// cart.
    #[arg(long, value_name = "WORKLOAD", required_unless_present = "replot",
          value_parser = ["ycsb", "tpcc", "tpcc-hybrid", "tpcc-toppayer", "smallbank", "cart"])]
    pub workload: Option<String>,
    /// Protocols, comma-separated (bohm and 2pl-ordered too, for ycsb and
    /// smallbank). A protocol may carry flags of its own, joined by `+`:
    /// `silo+scan-validation=reread` is a line of silo runs with
    /// `--scan-validation reread`.
    #[arg(long = "cc", value_name = "P1,P2,...", value_delimiter = ',',
          required_unless_present = "replot", value_parser = parse_line)]
    pub cc: Vec<Line>,
    /// The varied knob and its values: NAME=V1,V2,... (a knob of the
    /// deterministic protocols alone, such as chain-bound, is left out of
    /// the interactive protocols' runs: their lines are flat references).
    #[arg(long, value_name = "NAME=V1,V2,...", required_unless_present = "replot", value_parser = parse_vary)]
    pub vary: Option<(String, Vec<String>)>,
    /// Run nothing: redraw --out's sweep.svg from its sweep.json (after a
    /// change of --title or of the plotting).
    #[arg(long, conflicts_with_all = ["workload", "cc", "vary"])]
    pub replot: bool,
    /// Rounds (each runs every value under every protocol once).
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// Output directory (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Plot title (default: the workload and the fixed arguments).
    #[arg(long)]
    pub title: Option<String>,
    /// More arguments for the deterministic protocols' runs only (bohm,
    /// 2pl-ordered), space-separated: their own knobs, which the
    /// interactive protocols refuse (e.g. "--batch-size 500 --cc-threads 1").
    #[arg(long = "det-args", value_name = "ARGS", allow_hyphen_values = true)]
    pub det_args: Option<String>,
    /// Arguments for every run (after `--`).
    #[arg(last = true, value_name = "BENCH ARGS")]
    pub rest: Vec<String>,
}

fn parse_vary(s: &str) -> Result<(String, Vec<String>), String> {
    let (name, vals) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=V1,V2,..., got {s:?}"))?;
    let name = name.trim().trim_start_matches("--").to_string();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(format!("bad knob name {name:?}"));
    }
    if name == "cc" {
        return Err("vary a knob, not the protocol: protocols go in --cc".into());
    }
    let vals: Vec<String> = vals
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if vals.is_empty() {
        return Err(format!("no values for {name}"));
    }
    Ok((name, vals))
}

/// One line of a sweep: a protocol, and the bench flags only its runs get
/// (`silo+scan-validation=reread`; a flag without `=V` is a switch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub cc: Protocol,
    flags: Vec<(String, Option<String>)>,
    label: String,
}

impl Line {
    /// The line's name in the plot, the CSV and the JSON (as written).
    fn name(&self) -> &str {
        &self.label
    }

    /// The line's own flags, as bench arguments.
    fn args(&self) -> impl Iterator<Item = String> + '_ {
        self.flags
            .iter()
            .flat_map(|(k, v)| std::iter::once(format!("--{k}")).chain(v.iter().cloned()))
    }

    fn names_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|(k, _)| k == flag)
    }
}

impl std::fmt::Display for Line {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label)
    }
}

fn parse_line(s: &str) -> Result<Line, String> {
    let mut parts = s.trim().split('+');
    let name = parts.next().unwrap_or_default().trim();
    let cc: Protocol = name.parse().map_err(|_| {
        format!(
            "unknown protocol {name:?} (one of: {})",
            Protocol::ALL.map(|p| p.name()).join(", ")
        )
    })?;
    let mut flags = Vec::new();
    let mut label = cc.name().to_string();
    for part in parts {
        let (k, v) = match part.split_once('=') {
            Some((k, v)) => (
                k.trim().trim_start_matches("--"),
                Some(v.trim().to_string()),
            ),
            None => (part.trim().trim_start_matches("--"), None),
        };
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(format!(
                "bad flag {part:?} in {s:?}: expected NAME=VALUE or NAME"
            ));
        }
        if k == "cc" {
            return Err(format!("{s:?}: a line is one protocol"));
        }
        if matches!(k, "json" | "quiet" | "q") {
            return Err(format!("{s:?}: --{k} is set by the sweep"));
        }
        if v.as_deref().is_some_and(|v| {
            v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == ',' || c == '"')
        }) {
            return Err(format!("bad value in {part:?} of {s:?}"));
        }
        label.push('+');
        label.push_str(k);
        if let Some(v) = &v {
            label.push('=');
            label.push_str(v);
        }
        flags.push((k.to_string(), v));
    }
    Ok(Line { cc, flags, label })
}

/// One finished run.
struct Run {
    cc: Line,
    value: String,
    round: u32,
    /// The report (`None`: the run failed).
    report: Option<Value>,
    error: Option<String>,
    args: Vec<String>,
}

impl Run {
    fn num(&self, key: &str) -> Option<f64> {
        self.report.as_ref()?.get(key)?.as_f64()
    }
}

pub(crate) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Run one child; its report (when it printed one) and, if the run is not
/// a success, why: a non-zero exit or a signal (its error message), no
/// JSON report, or no committed transaction.
fn run_child(exe: &Path, args: &[String]) -> (Option<Value>, Option<String>) {
    let o = match Command::new(exe).args(args).output() {
        Ok(o) => o,
        Err(e) => return (None, Some(format!("cannot run {}: {e}", exe.display()))),
    };
    let parsed: Option<Value> = serde_json::from_slice(&o.stdout).ok();
    if !o.status.success() {
        let msg = parsed
            .as_ref()
            .and_then(|p| p["error"]["message"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| String::from_utf8_lossy(&o.stderr).trim().to_string());
        let how = match o.status.code() {
            Some(c) => format!("exit {c}"),
            None => {
                #[cfg(unix)]
                {
                    use std::os::unix::process::ExitStatusExt;
                    format!("killed by signal {}", o.status.signal().unwrap_or(0))
                }
                #[cfg(not(unix))]
                {
                    "killed".to_string()
                }
            }
        };
        return (parsed, Some(format!("{how}: {msg}")));
    }
    let error = match &parsed {
        None => Some("exit 0 but no JSON report on stdout".to_string()),
        Some(p) if p["throughput_txn_per_s"].as_f64().is_none() => {
            Some("the report has no throughput".to_string())
        }
        Some(p) if p["committed"].as_u64() == Some(0) => {
            Some("no transaction committed".to_string())
        }
        Some(_) => None,
    };
    (parsed, error)
}

/// Run `tessera sweep`.
pub fn main(a: &SweepArgs) -> ExitCode {
    match sweep(a) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(f) => f.report(false, Value::Null),
    }
}

fn sweep(a: &SweepArgs) -> Result<bool, Failure> {
    if a.replot {
        replot(a)?;
        return Ok(true);
    }
    let (Some(workload), Some((knob, values))) = (&a.workload, &a.vary) else {
        return Err(Failure::usage("--workload, --cc and --vary are required"));
    };
    if let Some(l) = a.cc.iter().find(|l| l.names_flag(knob)) {
        return Err(Failure::usage(format!(
            "--{knob} is the varied knob; {l} cannot set it too"
        )));
    }
    for bad in ["--cc", "--json", "--quiet", "-q", &format!("--{knob}")] {
        if a.rest
            .iter()
            .any(|r| r == bad || r.starts_with(&format!("{bad}=")))
        {
            return Err(Failure::usage(format!(
                "{bad} is set by the sweep; remove it from the arguments after --"
            )));
        }
    }
    std::fs::create_dir_all(&a.out).map_err(|e| Failure::io("create", &a.out, e))?;
    // Every run uses this very binary: on Linux through /proc/self/exe,
    // which a rebuild of the file during the sweep does not change.
    let exe = match Path::new("/proc/self/exe") {
        p if p.exists() => p.to_path_buf(),
        _ => std::env::current_exe()
            .map_err(|e| Failure::run(format!("cannot find the tessera binary: {e}")))?,
    };
    let total = a.reps as usize * values.len() * a.cc.len();
    let mut runs = Vec::with_capacity(total);
    let t0 = Instant::now();
    for round in 1..=a.reps {
        for v in values {
            // The protocol order rotates each round, so drift within a
            // round does not always fall on the same protocols.
            let n = a.cc.len();
            for cc in (0..n).map(|k| a.cc[(k + round as usize - 1) % n].clone()) {
                let mut args: Vec<String> = vec![
                    "bench".into(),
                    workload.clone(),
                    "--cc".into(),
                    cc.cc.name().into(),
                ];
                // A knob of the deterministic protocols alone (the chain
                // bound, say) is not given to an interactive line, which
                // would refuse it: its runs are the same at every value,
                // a reference line.
                if cc.cc.caps().deterministic
                    || !crate::det_bench::DET_KNOBS.contains(&knob.as_str())
                {
                    args.extend([format!("--{knob}"), v.clone()]);
                }
                args.extend(cc.args());
                args.extend(a.rest.iter().cloned());
                if let (true, Some(extra)) = (cc.cc.caps().deterministic, &a.det_args) {
                    args.extend(extra.split_whitespace().map(String::from));
                }
                args.extend(["--json".into(), "--quiet".into()]);
                let (parsed, error) = run_child(&exe, &args);
                let run = Run {
                    cc,
                    value: v.clone(),
                    round,
                    report: parsed,
                    error,
                    args,
                };
                eprintln!(
                    "[{}/{total}] round {round}, {knob}={v}, {}: {} ({:.0} s)",
                    runs.len() + 1,
                    run.cc,
                    match (&run.error, run.num("throughput_txn_per_s")) {
                        (Some(e), _) => format!("FAILED: {e}"),
                        (None, Some(t)) => format!(
                            "{t:.0} txn/s, abort rate {:.2}%",
                            100.0 * run.num("abort_rate").unwrap_or(0.0)
                        ),
                        (None, None) => "no throughput in the report".into(),
                    },
                    t0.elapsed().as_secs_f64()
                );
                runs.push(run);
            }
        }
    }
    let ok = runs.iter().all(|r| r.error.is_none());
    if !ok {
        eprintln!(
            "{} of {} runs failed (see the error column of sweep.csv); they are left out of the medians",
            runs.iter().filter(|r| r.error.is_some()).count(),
            runs.len()
        );
    }
    write_outputs(a, workload, knob, values, &runs)?;
    eprintln!(
        "wrote {}, {} and {}",
        a.out.join("sweep.csv").display(),
        a.out.join("sweep.json").display(),
        a.out.join("sweep.svg").display()
    );
    Ok(ok)
}

/// Medians per (protocol, value): throughput and abort rate.
/// One point of a protocol's line: the knob's value, median throughput and
/// median abort rate (`None` where every run failed).
type Point = (String, Option<f64>, Option<f64>);

/// Per protocol, its points in the order of the values.
type Medians = Vec<(Line, Vec<Point>)>;

fn medians(a: &SweepArgs, values: &[String], runs: &[Run]) -> Medians {
    a.cc.iter()
        .map(|cc| {
            let pts = values
                .iter()
                .map(|v| {
                    let of = |key: &str| {
                        median(
                            runs.iter()
                                .filter(|r| &r.cc == cc && &r.value == v && r.error.is_none())
                                .filter_map(|r| r.num(key))
                                .collect(),
                        )
                    };
                    (v.clone(), of("throughput_txn_per_s"), of("abort_rate"))
                })
                .collect();
            (cc.clone(), pts)
        })
        .collect()
}

fn io_failure(p: &Path, e: std::io::Error) -> Failure {
    Failure::io("write", p, e)
}

/// RFC 4180: a field holding a comma, a quote or a line break is quoted,
/// its quotes doubled.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The plot title when --title is not given.
fn default_title(workload: &str, args: &[String]) -> String {
    format!("{workload} {}", args.join(" "))
}

/// `--replot`: the medians, knob and title from sweep.json, drawn again.
fn replot(a: &SweepArgs) -> Result<(), Failure> {
    let p = a.out.join("sweep.json");
    let text = std::fs::read_to_string(&p).map_err(|e| Failure::io("read", &p, e))?;
    let bad = |what: &str| Failure::run(format!("{}: {what}", p.display()));
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    let knob = doc["knob"].as_str().ok_or_else(|| bad("no knob"))?;
    let mut meds: Medians = Vec::new();
    for m in doc["medians"].as_array().ok_or_else(|| bad("no medians"))? {
        let cc = m["protocol"]
            .as_str()
            .and_then(|s| parse_line(s).ok())
            .ok_or_else(|| bad("a median without a known protocol"))?;
        let pts = m["points"]
            .as_array()
            .ok_or_else(|| bad("a median without points"))?
            .iter()
            .map(|pt| {
                let v = match &pt[knob] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (
                    v,
                    pt["throughput_txn_per_s"].as_f64(),
                    pt["abort_rate"].as_f64(),
                )
            })
            .collect();
        meds.push((cc, pts));
    }
    if !meds
        .iter()
        .any(|(_, pts)| pts.iter().any(|p| p.1.is_some()))
    {
        return Err(bad(
            "no point has a throughput (did every run fail?): nothing to plot",
        ));
    }
    let title = a.title.clone().unwrap_or_else(|| {
        let args: Vec<String> = doc["bench_args"]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        default_title(doc["workload"].as_str().unwrap_or(""), &args)
    });
    let svg = a.out.join("sweep.svg");
    plot(&svg, &title, knob, &meds)
        .map_err(|e| Failure::run(format!("cannot plot {}: {e}", svg.display())))?;
    eprintln!("wrote {}", svg.display());
    Ok(())
}

fn write_outputs(
    a: &SweepArgs,
    workload: &str,
    knob: &str,
    values: &[String],
    runs: &[Run],
) -> Result<(), Failure> {
    let io = io_failure;
    let mut csv =
        format!("protocol,{knob},round,throughput_txn_per_s,abort_rate,committed,error\n");
    for r in runs {
        let f = |x: Option<f64>| x.map(|v| v.to_string()).unwrap_or_default();
        csv.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            r.cc,
            csv_field(&r.value),
            r.round,
            f(r.num("throughput_txn_per_s")),
            f(r.num("abort_rate")),
            f(r.num("committed")),
            csv_field(r.error.as_deref().unwrap_or(""))
        ));
    }
    let p = a.out.join("sweep.csv");
    std::fs::write(&p, csv).map_err(|e| io(&p, e))?;

    let meds = medians(a, values, runs);
    let doc = json!({
        "workload": workload,
        "knob": knob,
        "values": values,
        "protocols": a.cc.iter().map(|p| p.name()).collect::<Vec<_>>(),
        "reps": a.reps,
        "bench_args": a.rest,
        "det_args": a.det_args,
        "medians": meds.iter().map(|(cc, pts)| json!({
            "protocol": cc.name(),
            "points": pts.iter().map(|(v, t, ab)| json!({
                knob: v, "throughput_txn_per_s": t, "abort_rate": ab
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "runs": runs.iter().map(|r| json!({
            "protocol": r.cc.name(),
            knob: r.value,
            "round": r.round,
            "command": format!("tessera {}", r.args.join(" ")),
            "error": r.error,
            "report": r.report,
        })).collect::<Vec<_>>(),
    });
    let p = a.out.join("sweep.json");
    std::fs::write(
        &p,
        serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
    )
    .map_err(|e| io(&p, e))?;

    let p = a.out.join("sweep.svg");
    let title = a
        .title
        .clone()
        .unwrap_or_else(|| default_title(workload, &a.rest));
    plot(&p, &title, knob, &meds)
        .map_err(|e| Failure::run(format!("cannot plot {}: {e}", p.display())))
}

/// Line colors, distinct on white.
const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(0, 0, 0),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
];

/// Two panels: throughput (left) and abort rate (right) against the knob.
/// Numeric knob values are placed on a numeric axis, others evenly.
fn plot(
    path: &Path,
    title: &str,
    knob: &str,
    meds: &[(Line, Vec<Point>)],
) -> Result<(), Box<dyn std::error::Error>> {
    let values: Vec<String> = meds
        .first()
        .map(|m| m.1.iter().map(|p| p.0.clone()).collect())
        .unwrap_or_default();
    let numeric: Option<Vec<f64>> = values.iter().map(|v| v.parse::<f64>().ok()).collect();
    // A positive numeric knob spanning two decades or more (customers,
    // records) is drawn on a log scale.
    let log = numeric.as_ref().is_some_and(|n| {
        let (lo, hi) = n
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        lo > 0.0 && hi / lo >= 100.0
    });
    let xs: Vec<f64> = match &numeric {
        Some(n) if log => n.iter().map(|v| v.log10()).collect(),
        Some(n) => n.clone(),
        None => (0..values.len()).map(|i| i as f64).collect(),
    };
    let (xmin, xmax) = xs
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
    let pad = ((xmax - xmin) * 0.05).max(0.01);
    let tmax = meds
        .iter()
        .flat_map(|m| m.1.iter().filter_map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.45;
    let amax = (meds
        .iter()
        .flat_map(|m| m.1.iter().filter_map(|p| p.2))
        .fold(0.0f64, f64::max)
        * 100.0
        * 1.45)
        .max(1.0);

    let root = SVGBackend::new(path, (1200, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let panels = root.split_evenly((1, 2));
    let label = |x: &f64| -> String {
        match &numeric {
            Some(_) if log => {
                let v = 10f64.powf(*x);
                if v >= 10.0 {
                    format!("{:.0}", v)
                } else {
                    format!("{:.2}", v)
                }
            }
            Some(_) => {
                // Tick positions are computed: show 3 decimals at most.
                let r = (x * 1000.0).round() / 1000.0;
                format!("{r}")
            }
            None => values.get(x.round() as usize).cloned().unwrap_or_default(),
        }
    };
    for (i, area) in panels.iter().enumerate() {
        let (ymax, ydesc) = if i == 0 {
            (tmax, "committed txn/s (median)")
        } else {
            (amax, "abort rate % (median)")
        };
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((xmin - pad)..(xmax + pad), 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc(if log {
                format!("{knob} (log scale)")
            } else {
                knob.to_string()
            })
            .y_desc(ydesc)
            .x_label_formatter(&label)
            .y_label_formatter(&|y| {
                if *y >= 1e6 {
                    format!("{:.1}M", y / 1e6)
                } else if *y >= 1e3 {
                    format!("{:.0}K", y / 1e3)
                } else {
                    format!("{y:.1}")
                }
            })
            .draw()?;
        for (k, (cc, pts)) in meds.iter().enumerate() {
            let color = COLORS[k % COLORS.len()].to_rgba();
            let series: Vec<(f64, f64)> = pts
                .iter()
                .zip(&xs)
                .filter_map(|(p, &x)| {
                    let y = if i == 0 { p.1 } else { p.2.map(|a| a * 100.0) };
                    y.map(|y| (x, y))
                })
                .collect();
            chart
                .draw_series(LineSeries::new(series.clone(), color.stroke_width(2)))?
                .label(cc.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart.draw_series(
                series
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
            )?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse_with_their_flags() {
        let l = parse_line("silo+scan-validation=reread").unwrap();
        assert_eq!(l.cc, Protocol::Silo);
        assert_eq!(l.name(), "silo+scan-validation=reread");
        assert_eq!(
            l.args().collect::<Vec<_>>(),
            ["--scan-validation", "reread"]
        );
        let l = parse_line("rocc+--rocc-slots=64+no-backoff").unwrap();
        assert_eq!(
            l.args().collect::<Vec<_>>(),
            ["--rocc-slots", "64", "--no-backoff"]
        );
        assert_eq!(l.name(), "rocc+rocc-slots=64+no-backoff");
        // The label parses back to the same line (replot reads it).
        assert_eq!(parse_line(l.name()).unwrap(), l);
        assert_eq!(parse_line("gwv").unwrap().args().count(), 0);
        assert!(parse_line("nope").is_err());
        assert!(parse_line("silo+").is_err());
        assert!(parse_line("silo+cc=rocc").is_err());
        assert!(parse_line("silo+a b=1").is_err());
        assert!(parse_line("silo+json").is_err());
        assert!(parse_line("silo+scan-validation=").is_err());
    }

    #[test]
    fn vary_parses_and_rejects() {
        assert_eq!(
            parse_vary("theta=0,0.5, 0.99").unwrap(),
            (
                "theta".to_string(),
                vec!["0".into(), "0.5".into(), "0.99".into()]
            )
        );
        assert_eq!(parse_vary("--threads=1,2").unwrap().0, "threads");
        assert!(parse_vary("theta").is_err());
        assert!(parse_vary("theta=").is_err());
        assert!(parse_vary("cc=silo").is_err());
        assert!(parse_vary("a b=1").is_err());
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
    }
}

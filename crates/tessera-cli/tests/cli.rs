//! Runs the built `tessera` binary end to end.

use std::process::{Command, Output};

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("run tessera")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A tiny YCSB run of `seconds` with `--json`; returns the parsed report.
fn tiny_json(seconds: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "bench",
        "ycsb",
        "--records",
        "2000",
        "--seconds",
        seconds,
        "--warmup",
        "0",
        "--threads",
        "2",
        "--json",
    ];
    args.extend_from_slice(extra);
    let o = tessera(&args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON object ({e}): {out}"))
}

fn check_report(v: &serde_json::Value, protocol: &str) {
    assert_eq!(v["protocol"], protocol);
    assert_eq!(v["workload"], "ycsb");
    assert_eq!(v["threads"], 2);
    assert_eq!(v["warmup_seconds"], 0.0);
    let secs = v["seconds"].as_f64().unwrap();
    assert!((0.9..3.0).contains(&secs), "seconds {secs}");
    let committed = v["committed"].as_u64().unwrap();
    assert!(committed > 0);
    let tps = v["throughput_txn_per_s"].as_f64().unwrap();
    assert!((tps - committed as f64 / secs).abs() <= 0.01 * tps + 1.0);
    assert!(v["aborted"]["total"].is_u64());
    assert!(v["aborted"]["user"].is_u64());
    for r in tessera::ConflictReason::ALL {
        assert!(v["aborted"]["by_reason"][r.name()].is_u64(), "{}", r.name());
    }
    assert!(v["abort_rate"].is_f64());
    for k in ["p50", "p95", "p99", "p999", "max", "mean"] {
        assert!(v["latency_us"][k].as_f64().unwrap() > 0.0, "latency_us.{k}");
    }
    let t = &v["transactions"]["ycsb"];
    assert_eq!(t["committed"], v["committed"]);
    assert!(t["aborted"]["by_reason"].is_object());
    assert!(t["user_aborts"].is_u64());
    assert!(t["throughput_txn_per_s"].as_f64().unwrap() > 0.0);
    assert!(t["latency_us"]["p99"].as_f64().unwrap() > 0.0);
    let pt = v["per_thread"].as_array().unwrap();
    assert_eq!(pt.len(), 2);
    assert_eq!(
        pt.iter().map(|x| x.as_u64().unwrap()).sum::<u64>(),
        committed
    );
    let c = &v["config"];
    assert_eq!(c["records"], 2000);
    for k in [
        "preset",
        "value_size",
        "ops_per_txn",
        "read_ratio",
        "scan_ratio",
        "insert_ratio",
        "rmw",
        "theta",
        "scan_length",
    ] {
        assert!(c.get(k).is_some(), "config.{k}");
    }
    assert_eq!(v["load"]["records"], 2000);
    assert!(v["load"]["seconds"].is_f64());
    assert_eq!(v["engine"]["epoch_ms"], 40);
}

#[test]
fn ycsb_json_on_silo() {
    let v = tiny_json("1", &["--cc", "silo"]);
    check_report(&v, "silo");
}

/// `--scan-validation reread` runs Silo with its scans repeated at commit
/// (the report says which form ran); other protocols refuse the flag.
#[test]
fn silo_scan_validation_modes() {
    let scans = ["--cc", "silo", "--bulk-ratio", "0.2", "--scan-length", "20"];
    for mode in ["reread", "nodeset"] {
        let mut args = scans.to_vec();
        args.extend(["--scan-validation", mode]);
        let v = tiny_json("1", &args);
        assert_eq!(v["protocol"], "silo");
        assert!(v["committed"].as_u64().unwrap() > 0);
        assert_eq!(v["engine"]["scan_validation"], mode);
    }
    let v = tiny_json("1", &["--cc", "silo"]);
    assert_eq!(v["engine"]["scan_validation"], "nodeset");
    let o = tessera(&[
        "bench",
        "ycsb",
        "--cc",
        "rocc",
        "--scan-validation",
        "reread",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--cc silo only"), "{}", stderr(&o));
    let o = tessera(&["bench", "ycsb", "--scan-validation", "sometimes"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nodeset or reread"), "{}", stderr(&o));
}

#[test]
fn ycsb_json_on_nocc() {
    let v = tiny_json("1", &["--cc", "nocc"]);
    check_report(&v, "nocc");
    // No concurrency control: nothing ever aborts.
    assert_eq!(v["aborted"]["total"], 0);
}

#[test]
fn ycsb_preset_e_reports_scan_and_insert_separately() {
    let v = tiny_json("0.5", &["--workload", "e", "--quiet"]);
    let t = v["transactions"].as_object().unwrap();
    assert_eq!(t.len(), 2, "{t:?}");
    assert!(t["scan"]["committed"].as_u64().unwrap() > 0);
    assert!(t["insert"].is_object());
    assert_eq!(v["config"]["preset"], "e");
    assert_eq!(v["config"]["scan_ratio"], 0.95);
    assert_eq!(v["config"]["theta"], 0.99);
}

#[test]
fn explicit_knobs_override_the_preset() {
    let v = tiny_json(
        "0.3",
        &[
            "--workload",
            "b",
            "--theta",
            "0.5",
            "--ops-per-txn",
            "4",
            "--value-size",
            "8",
            "--quiet",
        ],
    );
    let c = &v["config"];
    assert_eq!(c["preset"], "b");
    assert_eq!(c["read_ratio"], 0.95);
    assert_eq!(c["theta"], 0.5);
    assert_eq!(c["ops_per_txn"], 4);
    assert_eq!(c["value_size"], 8);
}

#[test]
fn table_output_and_progress_on_stderr() {
    let o = tessera(&[
        "bench",
        "ycsb",
        "--records",
        "2000",
        "--seconds",
        "1.3",
        "--warmup",
        "0.2",
        "--threads",
        "2",
        "--workload",
        "f",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    for s in [
        "txn/s",
        "p50 us",
        "p99.9 us",
        "per-thread committed",
        "ycsb on silo",
    ] {
        assert!(out.contains(s), "missing {s:?} in\n{out}");
    }
    // Not a terminal: plain progress lines, one per second.
    let err = stderr(&o);
    assert!(err.contains("txn/s") && err.contains("abort rate"), "{err}");
    assert!(!err.contains('\r'));
}

#[test]
fn quiet_prints_nothing_on_stderr() {
    let o = tessera(&[
        "bench",
        "ycsb",
        "--records",
        "1000",
        "--seconds",
        "1.1",
        "--warmup",
        "0",
        "--quiet",
    ]);
    assert!(o.status.success());
    assert_eq!(stderr(&o), "");
}

#[test]
fn bad_arguments_exit_non_zero_naming_the_flag() {
    for (args, flag) in [
        (&["--threads", "0"][..], "--threads"),
        (&["--read-ratio", "1.5"], "--read-ratio"),
        (&["--theta", "10.5"], "--theta"),
        (&["--theta", "-0.1"], "--theta"),
        (&["--cc", "bogus"], "--cc"),
        (&["--records", "0"], "--records"),
        (&["--workload", "z"], "--workload"),
        (&["--seconds", "-1"], "--seconds"),
        (
            &["--read-ratio", "0.7", "--scan-ratio", "0.7"],
            "--scan-ratio",
        ),
    ] {
        let mut all = vec!["bench", "ycsb"];
        all.extend_from_slice(args);
        let o = tessera(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn help_lists_every_protocol_and_preset() {
    let o = tessera(&["bench", "ycsb", "--help"]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    for p in tessera::Protocol::ALL {
        assert!(out.contains(p.name()), "{} missing from help", p.name());
    }
    assert!(out.contains("override"));
    for p in ["a:", "b:", "c:", "d:", "e:", "f:", "custom:"] {
        assert!(out.contains(p));
    }
}

/// `bench smallbank --json`: the report carries a `conservation` object
/// that holds, for a lock-based and an optimistic protocol, under high
/// contention with a spin.
#[test]
fn smallbank_json_reports_conservation() {
    for cc in ["silo", "2pl-waitdie"] {
        let o = tessera(&[
            "bench",
            "smallbank",
            "--cc",
            cc,
            "--customers",
            "50",
            "--spin-us",
            "5",
            "--threads",
            "2",
            "--seconds",
            "0.5",
            "--warmup",
            "0",
            "--json",
        ]);
        assert!(o.status.success(), "{cc}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["workload"], "smallbank");
        assert_eq!(v["protocol"], cc);
        assert_eq!(v["conservation"]["passed"], true, "{v}");
        assert_eq!(v["conservation"]["savings_rows"], 50);
        assert!(v["committed"].as_u64().unwrap() > 0);
        for t in [
            "balance",
            "deposit_checking",
            "transact_saving",
            "amalgamate",
            "write_check",
        ] {
            assert!(v["transactions"][t].is_object(), "{t} missing: {v}");
        }
    }
    let o = tessera(&["bench", "smallbank", "--customers", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `tessera sweep`: every (round, value, protocol) runs once, interleaved;
/// CSV, JSON and SVG are written; a knob the sweep sets itself is refused.
#[test]
fn sweep_writes_csv_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let o = tessera(&[
        "sweep",
        "--workload",
        "smallbank",
        "--cc",
        "silo,2pl-nowait",
        "--vary",
        "customers=50,5000",
        "--reps",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--",
        "--threads",
        "1",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(
        rows[0],
        "protocol,customers,round,throughput_txn_per_s,abort_rate,committed,error"
    );
    assert_eq!(rows.len(), 1 + 2 * 2 * 2, "{csv}");
    // Interleaved: round 1 runs every value and protocol before round 2.
    assert!(
        rows[1].starts_with("silo,50,1,") && rows[2].starts_with("2pl-nowait,50,1,"),
        "{csv}"
    );
    assert!(rows[5].contains(",2,"), "{csv}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(j["runs"].as_array().unwrap().len(), 8);
    assert_eq!(j["medians"][1]["protocol"], "2pl-nowait");
    assert!(
        j["medians"][0]["points"][0]["throughput_txn_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("2pl-nowait") && svg.contains("silo"));
    // Redraw from sweep.json alone, with another title.
    std::fs::remove_file(out.join("sweep.svg")).unwrap();
    let o = tessera(&[
        "sweep",
        "--replot",
        "--out",
        out.to_str().unwrap(),
        "--title",
        "again",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    assert!(svg.contains("again") && svg.contains("2pl-nowait"));

    let o = tessera(&[
        "sweep",
        "--workload",
        "ycsb",
        "--cc",
        "silo",
        "--vary",
        "theta=0,0.5",
        "--out",
        out.to_str().unwrap(),
        "--",
        "--theta",
        "0.9",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// A sweep whose runs did not produce a report, or committed nothing, fails
/// (exit 1) with the reason in the CSV; redrawing it has nothing to plot and
/// fails too. A run that cannot print its report must never pass for a
/// measurement.
#[test]
fn sweep_fails_on_runs_without_a_report_or_commits() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let o = tessera(&[
        "sweep",
        "--workload",
        "smallbank",
        "--cc",
        "silo",
        "--vary",
        "customers=50",
        "--reps",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--",
        "--help",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert!(csv.contains("no JSON report"), "{csv}");
    let o = tessera(&["sweep", "--replot", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("nothing to plot"), "{}", stderr(&o));

    let o = tessera(&[
        "sweep",
        "--workload",
        "smallbank",
        "--cc",
        "silo",
        "--vary",
        "spin-us=1000000",
        "--reps",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--",
        "--threads",
        "1",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert!(csv.contains("no transaction committed"), "{csv}");
}

/// `--cc bohm` on YCSB: BOHM's engine runs open loop and reports its
/// stages; its knobs are refused without it, and it refuses what it does
/// not run yet.
#[test]
fn bohm_runs_ycsb_and_its_knobs_are_checked() {
    let o = tessera(&[
        "bench",
        "ycsb",
        "--cc",
        "bohm",
        "--records",
        "2000",
        "--read-ratio",
        "0",
        "--rmw",
        "--theta",
        "0.9",
        "--seconds",
        "0.5",
        "--warmup",
        "0.2",
        "--cc-threads",
        "2",
        "--exec-threads",
        "2",
        "--batch-size",
        "200",
        "--json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["protocol"], "bohm");
    assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["engine"]["cc_threads"], 2);
    assert_eq!(v["engine"]["batch_size"], 200);
    assert_eq!(v["stages"]["cc_entry"], "placeholder");
    assert!(v["stages"]["cc_entries"].as_u64().unwrap() > 0, "{v}");
    assert!(
        v["stages"]["cc_stage_entries_per_busy_s_per_thread"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{v}"
    );
    // Durable: the input log is written to the data directory.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("bohm");
    let o = tessera(&[
        "bench",
        "ycsb",
        "--cc",
        "bohm",
        "--records",
        "2000",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--durability",
        "sync",
        "--data-dir",
        d.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["input_log_bytes"].as_u64().unwrap() > 0, "{v}");
    let seg = d.join("log-000-00000001.tlog");
    assert!(std::fs::metadata(&seg).unwrap().len() > 0);
    for (args, expect) in [
        (
            &["ycsb", "--records", "100", "--cc-threads", "2"][..],
            "apply to the deterministic protocols only",
        ),
        (
            &["tpcc-hybrid", "--cc", "bohm"][..],
            "`tessera bench tpcc` (NewOrder and Payment) only",
        ),
        (
            &["ycsb", "--records", "100", "--cc", "bohm", "--txns", "10"][..],
            "--txns is not supported",
        ),
        (
            &[
                "ycsb",
                "--records",
                "100",
                "--cc",
                "bohm",
                "--batch-size",
                "0",
            ][..],
            "--batch-size",
        ),
        (
            &[
                "ycsb",
                "--records",
                "100",
                "--cc",
                "bohm",
                "--durability",
                "async",
                "--data-dir",
                "/nonexistent/x",
            ][..],
            "--durability sync",
        ),
    ] {
        let mut a = vec!["bench"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--seconds", "0.1", "--quiet"]);
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expect), "{args:?}: {}", stderr(&o));
    }
}

/// SmallBank under both deterministic protocols: money is conserved (the
/// engine's balances against its committed outcomes), and 2pl-ordered
/// reports lock entries; YCSB's scans run under 2pl-ordered too (under its
/// range locks).
#[test]
fn deterministic_protocols_run_smallbank_and_conserve_money() {
    for (cc, entry) in [
        ("bohm", "placeholder"),
        ("2pl-ordered", "lock"),
        ("pwv", "ticket"),
        ("lazy", "placeholder"),
    ] {
        let o = tessera(&[
            "bench",
            "smallbank",
            "--cc",
            cc,
            "--customers",
            "50",
            "--spin-us",
            "0",
            "--seconds",
            "0.3",
            "--warmup",
            "0.1",
            "--exec-threads",
            "2",
            "--batch-size",
            "100",
            "--json",
            "--quiet",
        ]);
        assert!(o.status.success(), "{cc}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["protocol"], cc);
        assert_eq!(v["workload"], "smallbank");
        assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["consistency"]["passed"], true, "{v}");
        assert_eq!(v["stages"]["cc_entry"], entry, "{v}");
    }
    let o = tessera(&[
        "bench",
        "ycsb",
        "--cc",
        "2pl-ordered",
        "--records",
        "1000",
        "--workload",
        "e",
        // Small batches and a second: in a debug build on a loaded CI
        // machine a 10,000-request batch of 100-row scans did not finish
        // within 0.2 s once (nothing committed).
        "--batch-size",
        "100",
        "--seconds",
        "1",
        "--warmup",
        "0",
        "--json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
}

/// `tessera sweep --det-args`: the deterministic protocols' own knobs go
/// to their runs only (an interactive protocol refuses them), so one sweep
/// compares both kinds.
#[test]
fn sweep_passes_det_args_to_the_deterministic_runs_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let o = tessera(&[
        "sweep",
        "--workload",
        "smallbank",
        "--cc",
        "silo,bohm",
        "--vary",
        "threads=1",
        "--reps",
        "1",
        "--det-args",
        "--batch-size 100 --cc-threads 1",
        "--out",
        out.to_str().unwrap(),
        "--",
        "--customers",
        "100",
        "--spin-us",
        "0",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    for r in j["runs"].as_array().unwrap() {
        let command = r["command"].as_str().unwrap();
        let det = r["protocol"] == "bohm";
        assert_eq!(command.contains("--batch-size 100"), det, "{r}");
        assert!(r["error"].is_null(), "{r}");
    }
    assert_eq!(j["det_args"], "--batch-size 100 --cc-threads 1");
}

/// `tessera sweep --vary chain-bound=...`: a knob of the deterministic
/// protocols alone is left out of the interactive lines' runs (they would
/// refuse it), which run the same at every value: reference lines.
#[test]
fn sweep_varies_a_det_knob_with_interactive_reference_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s");
    let o = tessera(&[
        "sweep",
        "--workload",
        "ycsb",
        "--cc",
        "lazy,silo",
        "--vary",
        "chain-bound=1,100",
        "--reps",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--",
        "--records",
        "2000",
        "--ops-per-txn",
        "4",
        "--rmw",
        "--read-ratio",
        "0",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for r in runs {
        let command = r["command"].as_str().unwrap();
        let det = r["protocol"] == "lazy";
        assert_eq!(command.contains("--chain-bound"), det, "{r}");
        assert!(r["error"].is_null(), "{r}");
    }
}

/// TPC-C NewOrder+Payment under BOHM and 2pl-ordered (its range locks):
/// each run passes the TPC-C consistency conditions on the engine's state;
/// the full mix is refused with a message that says why.
#[test]
fn bohm_runs_tpcc_new_order_and_payment_consistently() {
    for cc in ["bohm", "2pl-ordered", "pwv", "lazy"] {
        let o = tessera(&[
            "bench",
            "tpcc",
            "--cc",
            cc,
            "--warehouses",
            "1",
            "--mix",
            "50,50,0,0,0",
            "--seconds",
            "0.5",
            "--warmup",
            "0.2",
            "--batch-size",
            "200",
            "--json",
            "--quiet",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["workload"], "tpcc");
        assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["consistency"]["passed"], true, "{cc}: {v}");
    }
    for (cc, mix, expect) in [
        ("bohm", "45,43,4,4,4", "--mix 50,50,0,0,0"),
        ("2pl-ordered", "45,43,4,4,4", "--mix 50,50,0,0,0"),
    ] {
        let o = tessera(&[
            "bench",
            "tpcc",
            "--cc",
            cc,
            "--warehouses",
            "1",
            "--mix",
            mix,
            "--seconds",
            "0.1",
            "--quiet",
        ]);
        assert_eq!(o.status.code(), Some(2), "{cc}: {}", stderr(&o));
        assert!(stderr(&o).contains(expect), "{cc}: {}", stderr(&o));
    }
}

/// YCSB 20-RMW decomposed into pieces under pwv, with and without a commit
/// point (the abortable pieces before it), on two partition executors.
#[test]
fn pwv_runs_ycsb_pieces_with_commit_points() {
    for cp in [None, Some("5")] {
        let mut args = vec![
            "bench",
            "ycsb",
            "--cc",
            "pwv",
            "--records",
            "2000",
            "--ops-per-txn",
            "20",
            "--read-ratio",
            "0",
            "--rmw",
            "--theta",
            "0.9",
            "--exec-threads",
            "2",
            "--batch-size",
            "200",
            "--seconds",
            "0.5",
            "--warmup",
            "0",
            "--json",
            "--quiet",
        ];
        if let Some(c) = cp {
            args.extend(["--commit-point", c]);
        }
        let o = tessera(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["protocol"], "pwv");
        assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
    }
}

/// YCSB read-modify-writes under lazy: each transaction's now-phase ends
/// at once (commit-only), the workers substantiate; with chain bound 1
/// every transaction is handed off. The JSON reports the lazy counters,
/// no later phase fails, and the throughput counts substantiated
/// transactions. `--chain-bound` is refused with an interactive protocol.
#[test]
fn lazy_runs_ycsb_with_chain_bounds() {
    for bound in ["1", "100"] {
        let o = tessera(&[
            "bench",
            "ycsb",
            "--cc",
            "lazy",
            "--records",
            "2000",
            "--ops-per-txn",
            "10",
            "--read-ratio",
            "0",
            "--rmw",
            "--theta",
            "0.9",
            "--chain-bound",
            bound,
            "--exec-threads",
            "2",
            "--batch-size",
            "200",
            "--seconds",
            "0.4",
            "--warmup",
            "0.1",
            "--json",
            "--quiet",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let lazy = &v["stages"]["lazy"];
        assert!(lazy["deferred"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(lazy["later_errors"], 0, "{v}");
        assert_eq!(
            v["engine"]["chain_bound"].as_u64().unwrap().to_string(),
            bound
        );
        if bound == "1" {
            assert!(lazy["handed_off"].as_u64().unwrap() > 0, "{v}");
        }
        assert!(v["throughput_txn_per_s"].as_f64().unwrap() > 0.0, "{v}");
        assert!(
            v["throughput_txn_per_s"].as_f64().unwrap()
                <= v["acknowledged_txn_per_s"].as_f64().unwrap() * 1.5 + 1.0,
            "{v}"
        );
    }
    let o = tessera(&[
        "bench",
        "ycsb",
        "--cc",
        "silo",
        "--chain-bound",
        "5",
        "--seconds",
        "0.1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--chain-bound"), "{}", stderr(&o));
}

/// TPC-C under lazy with more warehouses than cores: a client per
/// warehouse, each with a reconnaissance worker of the loading database
/// (which had only as many slots as cores, and refused the third client).
/// NewOrder and Payment split into now and later phases; consistent.
#[test]
fn lazy_runs_tpcc_with_a_client_per_warehouse() {
    let o = tessera(&[
        "bench",
        "tpcc",
        "--cc",
        "lazy",
        "--warehouses",
        "3",
        "--mix",
        "50,50,0,0,0",
        "--chain-bound",
        "2",
        "--seconds",
        "0.4",
        "--warmup",
        "0.1",
        "--batch-size",
        "200",
        "--json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["consistency"]["passed"], true, "{v}");
    assert_eq!(v["clients"], 3, "{v}");
    assert!(v["stages"]["lazy"]["deferred"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["stages"]["lazy"]["later_errors"], 0, "{v}");
}

/// PWV runs TPC-C as pieces, STOCK fine and coarse, consistent, and
/// reports the batch latency (Table 6.1); `--granularity` is refused for
/// the protocols that declare no pieces.
#[test]
fn pwv_runs_tpcc_pieces_at_both_granularities_with_batch_latency() {
    for g in ["fine", "coarse"] {
        let o = tessera(&[
            "bench",
            "tpcc",
            "--cc",
            "pwv",
            "--warehouses",
            "2",
            "--mix",
            "50,50,0,0,0",
            "--granularity",
            g,
            "--seconds",
            "0.4",
            "--warmup",
            "0.1",
            "--batch-size",
            "200",
            "--json",
            "--quiet",
        ]);
        assert!(o.status.success(), "{g}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["consistency"]["passed"], true, "{g}: {v}");
        assert_eq!(v["config"]["stock_granularity"], g, "{v}");
        let lat = &v["batch_latency_ms"];
        assert!(lat["batches"].as_u64().unwrap() > 0, "{v}");
        let (p50, p95, max) = (
            lat["p50"].as_f64().unwrap(),
            lat["p95"].as_f64().unwrap(),
            lat["max"].as_f64().unwrap(),
        );
        assert!(0.0 < p50 && p50 <= p95 && p95 <= max, "{v}");
    }
    let o = tessera(&[
        "bench",
        "tpcc",
        "--cc",
        "bohm",
        "--mix",
        "50,50,0,0,0",
        "--granularity",
        "coarse",
        "--seconds",
        "0.2",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--cc pwv"), "{}", stderr(&o));
}

/// The shopping cart: under lazy, clears (blind writes) leave the carts'
/// additions unrun (`clobbered`), and the stock check passes under lazy,
/// eager BOHM and an interactive protocol.
#[test]
fn cart_runs_with_blind_writes_and_checks_the_stock() {
    for (cc, blind) in [
        ("lazy", "100"),
        ("lazy", "0"),
        ("bohm", "50"),
        ("silo", "50"),
    ] {
        let o = tessera(&[
            "bench",
            "cart",
            "--cc",
            cc,
            "--items",
            "2000",
            "--adds",
            "5",
            "--blind-pct",
            blind,
            "--threads",
            "2",
            "--seconds",
            "0.3",
            "--warmup",
            "0.1",
            "--json",
            "--quiet",
        ]);
        assert!(o.status.success(), "{cc}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["consistency"]["passed"], true, "{cc}: {v}");
        if cc == "lazy" {
            let clobbered = v["stages"]["lazy"]["clobbered"].as_u64().unwrap();
            assert_eq!(clobbered > 0, blind == "100", "{v}");
            assert_eq!(v["stages"]["lazy"]["later_errors"], 0, "{v}");
        }
    }
}

/// The open-loop driver: a fixed offered rate with a burst reports what
/// was offered, accepted and dropped, and a timeline of running totals
/// (every 100 ms, monotone); bad bursts are usage errors.
#[test]
fn offered_rate_runs_open_loop_with_a_timeline() {
    let o = tessera(&[
        "bench",
        "ycsb",
        "--cc",
        "lazy",
        "--records",
        "2000",
        "--ops-per-txn",
        "4",
        "--read-ratio",
        "0",
        "--rmw",
        "--offered-rate",
        "20000",
        "--burst",
        "0.2:0.4:40000",
        "--seconds",
        "0.6",
        "--warmup",
        "0.1",
        "--batch-size",
        "100",
        "--json",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ol = &v["open_loop"];
    let offered = ol["offered"].as_u64().unwrap();
    let (acc, drop) = (
        ol["accepted"].as_u64().unwrap(),
        ol["dropped"].as_u64().unwrap(),
    );
    assert!(offered > 3_000, "{v}");
    assert_eq!(acc + drop, offered, "{v}");
    // The client sleeps between requests that fall due 25 to 50 us apart
    // instead of spinning (it used to spin below 50 us, its whole core).
    let share = ol["client_cpu_share"].as_f64().unwrap();
    assert!(share > 0.0 && share < 0.5, "{v}");
    let tl = ol["timeline"].as_array().unwrap();
    assert!(tl.len() >= 4, "{v}");
    // The last column: requests submitted and not yet acknowledged, never
    // more than the clients' queue allows.
    assert_eq!(ol["timeline_columns"][6], "queued");
    let max_queue = ol["max_queue"].as_f64().unwrap();
    for row in tl {
        let q = row[6].as_f64().unwrap();
        assert!((0.0..=max_queue).contains(&q), "{v}");
    }
    assert!(ol["max_queued"].as_f64().unwrap() <= max_queue, "{v}");
    for w in tl.windows(2) {
        let (a, b) = (w[0].as_array().unwrap(), w[1].as_array().unwrap());
        for (x, y) in a[1..=4].iter().zip(&b[1..=4]) {
            assert!(y.as_f64() >= x.as_f64(), "{v}");
        }
    }
    for bad in ["3:2:100", "1:2", "0:1:-5"] {
        let o = tessera(&[
            "bench",
            "ycsb",
            "--cc",
            "bohm",
            "--offered-rate",
            "100",
            "--burst",
            bad,
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--burst"), "{bad}: {}", stderr(&o));
    }
}

/// `bench versions`: Table 2.1 as JSON, a short run of every layout, and
/// the usage errors.
#[test]
fn versions_benchmark_json_and_errors() {
    let o = tessera(&["bench", "versions", "--jumps", "4", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ems = &v["jumps"][3];
    assert_eq!(ems["layout"], "ems");
    assert_eq!(
        (ems["current_updating"].as_u64(), ems["oldest"].as_u64()),
        (Some(0), Some(1))
    );
    assert_eq!(v["jumps"][0]["oldest"], 4, "n2o walks to the oldest");
    for work in ["read-only", "read-updating", "write-only"] {
        let o = tessera(&[
            "bench",
            "versions",
            "--objects",
            "2000",
            "--seconds",
            "0.2",
            "--threads",
            "2",
            "--work",
            work,
            "--json",
        ]);
        assert!(o.status.success(), "{work}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["work"], work);
        let rows = v["layouts"].as_array().unwrap();
        assert_eq!(rows.len(), 4);
        for r in rows {
            assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{work}: {r}");
        }
    }
    for (flag, value) in [
        ("--layout", "btree"),
        ("--work", "read-mostly"),
        ("--objects", "0"),
    ] {
        let o = tessera(&["bench", "versions", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}");
    }
    let o = tessera(&["bench", "versions", "--seconds", "-1"]);
    assert_eq!(o.status.code(), Some(2));
}

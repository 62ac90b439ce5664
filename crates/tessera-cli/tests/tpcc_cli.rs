//! `tessera bench tpcc` end to end: the JSON report with its consistency
//! object, and usage errors.

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

#[test]
fn tpcc_json_has_throughput_types_and_consistency() {
    let args = [
        "bench",
        "tpcc",
        "--threads",
        "2",
        "--warehouses",
        "1",
        "--seconds",
        "1",
        "--warmup",
        "0",
        "--json",
        "--quiet",
    ];
    let o = tessera(&args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    // --quiet: nothing on stderr.
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON object ({e}): {out}"));
    assert_eq!(v["workload"], "tpcc");
    assert_eq!(v["protocol"], "silo");
    assert_eq!(v["threads"], 2);
    assert!(v["throughput_txn_per_s"].as_f64().unwrap() > 0.0);
    // The five types, in the spec's order (serde_json's Value sorts keys,
    // so look at the text).
    let at: Vec<usize> = [
        "new_order",
        "payment",
        "order_status",
        "delivery",
        "stock_level",
    ]
    .iter()
    .map(|t| {
        out.find(&format!("\"{t}\": {{"))
            .unwrap_or_else(|| panic!("no {t} in {out}"))
    })
    .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
    assert_eq!(v["transactions"].as_object().unwrap().len(), 5);
    assert!(
        v["transactions"]["new_order"]["committed"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(v["config"]["warehouses"], 1);
    assert_eq!(v["config"]["mix_pct"]["new_order"], 45);
    let c = &v["consistency"];
    assert_eq!(c["passed"], true, "{c}");
    assert_eq!(c["enforced"], true);
    assert!(c["seconds"].is_f64());
    let conds = c["conditions"].as_object().unwrap();
    for n in 1..=12 {
        let name = format!("3.3.2.{n}");
        assert_eq!(conds[&name]["passed"], true, "{name}");
        assert!(conds[&name]["checked"].as_u64().unwrap() > 0, "{name}");
    }
}

#[test]
fn tpcc_table_ends_with_the_consistency_line() {
    let o = tessera(&[
        "bench",
        "tpcc",
        "--threads",
        "1",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.contains("new_order") && out.contains("stock_level"),
        "{out}"
    );
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("consistency: all 14 conditions hold"),
        "{out}"
    );
}

#[test]
fn bad_tpcc_arguments_exit_2_with_a_clear_message() {
    for (args, expect) in [
        (&["--mix", "45,43,4,4,5"][..], "must add up to 100"),
        (
            &["--mix", "45,43,12"][..],
            "five comma-separated percentages",
        ),
        (
            &["--mix", "45,43,4,4,x"][..],
            "'x' is not a whole percentage",
        ),
        (&["--warehouses", "0"][..], "--warehouses"),
        (&["--remote-item-pct", "101"][..], "--remote-item-pct"),
        (&["--remote-payment-pct", "-1"][..], "--remote-payment-pct"),
        (&["--prefault", "3GB"][..], "is not a size"),
        (&["--prefault", "99999999GiB"][..], "too large"),
    ] {
        let mut a = vec!["bench", "tpcc", "--seconds", "0.1", "--quiet"];
        a.extend_from_slice(args);
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(expect), "{args:?}: {e}");
        assert!(o.stdout.is_empty());
    }
}

/// `--prefault`: the load's rows land in memory faulted in before it, so
/// the process's resident size hardly grows during the load (it grows by
/// the whole load without it), and the report says what was pre-faulted.
#[test]
fn prefault_makes_the_load_land_in_resident_memory() {
    let growth = |extra: &[&str]| {
        let mut a = vec![
            "bench",
            "tpcc",
            "--warehouses",
            "1",
            "--txns",
            "500",
            "--warmup",
            "0",
            "--json",
            "--quiet",
        ];
        a.extend_from_slice(extra);
        let o = tessera(&a);
        assert!(o.status.success(), "{a:?} failed: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let Some(g) = v["load"]["resident_growth_bytes"].as_u64() else {
            return None; // no /proc: nothing to compare
        };
        Some((g, v["engine"].clone()))
    };
    let Some((plain, engine)) = growth(&[]) else {
        return;
    };
    assert!(engine.get("prefault_bytes").is_none(), "{engine}");
    let (pre, engine) = growth(&["--prefault", "512MiB"]).unwrap();
    assert_eq!(engine["prefault_bytes"], 512u64 << 20, "{engine}");
    assert!(
        engine["prefault_seconds"].as_f64().unwrap() > 0.0,
        "{engine}"
    );
    // One warehouse is about 170 MB of rows and index.
    assert!(
        plain > 100 << 20,
        "the load grew the process by only {plain} bytes"
    );
    assert!(
        pre < plain / 4,
        "with --prefault the load grew the process by {pre} bytes (without: {plain})"
    );
}

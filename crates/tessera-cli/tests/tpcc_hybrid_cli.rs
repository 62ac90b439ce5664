//! `tessera bench tpcc-hybrid` end to end: the JSON report (six types with
//! `q2_star`, the Q2* size in the config, the consistency object) and usage
//! errors; and `tessera bench tpcc-toppayer` (Cai et al.'s modified TPC-C)
//! the same way.

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

/// `bench tpcc-hybrid` for 1 s on 2 threads and one warehouse at
/// `--q2-size 5`, with `--json --quiet` and `extra`; must succeed.
fn short_json_run(extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "tpcc-hybrid",
        "--threads",
        "2",
        "--warehouses",
        "1",
        "--q2-size",
        "5",
        "--seconds",
        "1",
        "--warmup",
        "0",
        "--json",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let o = tessera(&args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    o
}

#[test]
fn tpcc_hybrid_json_has_q2_star_and_consistency() {
    let o = short_json_run(&[]);
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON object ({e}): {out}"));
    assert_eq!(v["workload"], "tpcc-hybrid");
    assert_eq!(v["protocol"], "silo");
    assert_eq!(v["retry"], true, "conflict aborts are retried by default");
    // The six types in mix order (serde_json's Value sorts keys, so look at
    // the text).
    let at: Vec<usize> = [
        "new_order",
        "payment",
        "q2_star",
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
    let txns = v["transactions"].as_object().unwrap();
    assert_eq!(txns.len(), 6);
    let q2 = &v["transactions"]["q2_star"];
    for key in ["committed", "aborted", "abort_rate", "latency_us"] {
        assert!(!q2[key].is_null(), "q2_star has no {key}: {q2}");
    }
    assert!(
        v["transactions"]["new_order"]["committed"]
            .as_u64()
            .unwrap()
            > 0
    );
    let cfg = &v["config"];
    assert_eq!(cfg["q2_size_pct"], 5);
    assert_eq!(cfg["q2_suppliers"], 500);
    assert_eq!(cfg["warehouses"], 1);
    assert_eq!(cfg["mix_pct"]["q2_star"], 10);
    assert_eq!(cfg["mix_pct"]["new_order"], 40);
    let c = &v["consistency"];
    assert_eq!(c["passed"], true, "{c}");
    assert_eq!(c["enforced"], true);
    assert!(c["conditions"]["3.3.2.12"]["checked"].as_u64().unwrap() > 0);
}

/// `--no-retry` (ERMIA's and Silo's driver default): an aborted transaction
/// is dropped, the report says so, and the consistency conditions still hold.
#[test]
fn no_retry_drops_aborted_transactions_and_stays_consistent() {
    let o = short_json_run(&["--cc", "si", "--no-retry"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["retry"], false);
    assert_eq!(v["protocol"], "si");
    assert!(v["transactions"]["q2_star"]["committed"].as_u64().unwrap() > 0);
    assert_eq!(v["consistency"]["passed"], true, "{}", v["consistency"]);
}

#[test]
fn bad_tpcc_hybrid_arguments_exit_2_with_a_clear_message() {
    for (args, expect) in [
        (&["--q2-size", "0"][..], "--q2-size"),
        (&["--q2-size", "101"][..], "--q2-size"),
        (&["--mix", "40,38,10,4,4,5"][..], "must add up to 100"),
        (
            &["--mix", "45,43,4,4,4"][..],
            "six comma-separated percentages",
        ),
        (&["--warehouses", "0"][..], "--warehouses"),
    ] {
        let mut a = vec!["bench", "tpcc-hybrid", "--seconds", "0.1", "--quiet"];
        a.extend_from_slice(args);
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(expect), "{args:?}: {e}");
        assert!(o.stdout.is_empty());
    }
}

/// `bench tpcc-toppayer`: six types in the book's order with `top_payer`,
/// the scan length in the config, consistency checked; bad knobs refused.
#[test]
fn tpcc_toppayer_json_and_usage_errors() {
    let args = [
        "bench",
        "tpcc-toppayer",
        "--threads",
        "2",
        "--warehouses",
        "1",
        "--top-payer-scan",
        "100",
        "--seconds",
        "1",
        "--warmup",
        "0",
        "--json",
        "--quiet",
    ];
    let o = tessera(&args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON object ({e}): {out}"));
    assert_eq!(v["workload"], "tpcc-toppayer");
    let at: Vec<usize> = [
        "payment",
        "new_order",
        "top_payer",
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
    assert!(
        v["transactions"]["top_payer"]["committed"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(v["config"]["top_payer_scan"], 100);
    assert_eq!(v["config"]["mix_pct"]["top_payer"], 10);
    assert_eq!(v["consistency"]["passed"], true);

    for (flag, value, says) in [
        ("--mix", "40,40,10,4,4", "six"),
        ("--mix", "40,40,10,4,4,3", "add up to 100"),
        ("--top-payer-scan", "3001", "3001"),
        ("--top-payer-scan", "0", "0"),
    ] {
        let o = tessera(&["bench", "tpcc-toppayer", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}");
        assert!(stderr(&o).contains(says), "{flag} {value}: {}", stderr(&o));
    }
    let o = tessera(&["bench", "tpcc-toppayer", "--cc", "bohm"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

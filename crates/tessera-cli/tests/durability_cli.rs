//! Durable benchmarks and the data-directory tools end to end: `bench
//! --durability`, `recover`, `inspect` and `check tpcc` on the built binary.

use std::path::Path;
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

fn json_of(o: &Output) -> serde_json::Value {
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not one JSON object ({e}): {out}"))
}

fn ok_json(args: &[&str]) -> serde_json::Value {
    let o = tessera(args);
    assert!(o.status.success(), "{args:?} failed: {}", stderr(&o));
    json_of(&o)
}

fn dir_str(d: &Path) -> &str {
    d.to_str().expect("temp dir path is UTF-8")
}

/// A deterministic benchmark (`args`: the command, protocol and
/// workload) writing its input log into `dir`, with batches of 500 and a
/// background checkpoint every `ckpt_secs`: its JSON report.
fn det_bench_into(dir: &Path, args: &[&str], ckpt_secs: &str) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend([
        "--batch-size",
        "500",
        "--durability",
        "sync",
        "--data-dir",
        dir_str(dir),
        "--checkpoint-secs",
        ckpt_secs,
        "--json",
        "--quiet",
    ]);
    ok_json(&all)
}

/// A short logged YCSB run into `dir`.
fn ycsb_into(dir: &Path, durability: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "bench",
        "ycsb",
        "--records",
        "2000",
        "--threads",
        "2",
        "--seconds",
        "0.4",
        "--warmup",
        "0",
        "--quiet",
        "--durability",
        durability,
        "--data-dir",
        dir_str(dir),
    ];
    args.extend_from_slice(extra);
    tessera(&args)
}

fn check_latency(l: &serde_json::Value, what: &str) {
    for k in ["p50", "p95", "p99", "p999", "max"] {
        assert!(l[k].as_f64().unwrap() > 0.0, "{what}.{k}: {l}");
    }
}

#[test]
fn tpcc_async_bench_then_recover_then_check() {
    let tmp = tempfile::tempdir().unwrap();
    let d = dir_str(tmp.path());
    let v = ok_json(&[
        "bench",
        "tpcc",
        "--threads",
        "1",
        "--warehouses",
        "1",
        "--seconds",
        "0.5",
        "--warmup",
        "0",
        "--json",
        "--quiet",
        "--durability",
        "async",
        "--data-dir",
        d,
    ]);
    assert_eq!(v["durability"], "async");
    assert_eq!(v["consistency"]["passed"], true);
    let log = &v["log"];
    assert!(log["bytes"].as_u64().unwrap() > 0, "{log}");
    assert!(log["bytes_per_txn"].as_f64().unwrap() > 0.0, "{log}");
    assert!(log["fsyncs"].as_u64().unwrap() > 0, "{log}");
    assert!(log["durable_epoch"].as_u64().unwrap() > 0, "{log}");
    assert!(log["total_bytes"].as_u64().unwrap() >= log["bytes"].as_u64().unwrap());
    assert_eq!(v["engine"]["loggers"], 1);
    check_latency(&v["durable_latency_us"], "durable_latency_us");
    assert!(v["transactions"]["new_order"]["durable_latency_us"]["p50"].is_f64());

    // A deterministic protocol does not reopen a redo log.
    fails_with(
        &["recover", "--data-dir", d, "--cc", "bohm", "--json"],
        2,
        "invalid_argument",
        "holds a redo log",
    );
    let r = ok_json(&["recover", "--data-dir", d, "--json"]);
    let rec = &r["recovery"];
    assert!(rec["txns_replayed"].as_u64().unwrap() > 0, "{rec}");
    assert!(rec["durable_epoch"].as_u64().unwrap() >= log["durable_epoch"].as_u64().unwrap());
    for k in [
        "segments",
        "log_bytes",
        "txns_ignored",
        "records",
        "seconds",
        "mb_per_s",
        "threads",
        "warnings",
    ] {
        assert!(!rec[k].is_null(), "recovery.{k}: {rec}");
    }
    let tables = r["tables"].as_array().unwrap();
    let rows = |name: &str| {
        tables
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {tables:?}"))["rows"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(rows("warehouse"), 1);
    assert_eq!(rows("district"), 10);
    assert_eq!(rows("item"), 100_000);

    let c = ok_json(&["check", "tpcc", "--data-dir", d, "--json"]);
    assert_eq!(c["workload"], "tpcc");
    assert_eq!(c["warehouses"], 1);
    assert_eq!(c["consistency"]["passed"], true, "{c}");
    assert!(c["recovery"]["txns_replayed"].as_u64().unwrap() > 0);

    // The human-readable check ends with the consistency line.
    let o = tessera(&["check", "tpcc", "--data-dir", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("recovered"), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("consistency: all 14 conditions hold"),
        "{out}"
    );

    // A backup of the directory: verified, and a TPC-C database of its own.
    let elsewhere = tempfile::tempdir().unwrap();
    let backup = elsewhere.path().join("backup");
    let b = ok_json(&[
        "backup",
        "--data-dir",
        d,
        "--to",
        dir_str(&backup),
        "--json",
    ]);
    let info = &b["backup"];
    assert!(info["files"].as_u64().unwrap() >= 3, "{b}");
    assert!(info["rows"].as_u64().unwrap() > 100_000, "{b}");
    let c = ok_json(&["check", "tpcc", "--data-dir", dir_str(&backup), "--json"]);
    assert_eq!(c["consistency"]["passed"], true, "{c}");
    // A second backup to the same place is refused, naming it.
    fails_with(
        &[
            "backup",
            "--data-dir",
            d,
            "--to",
            dir_str(&backup),
            "--json",
        ],
        2,
        "invalid_argument",
        "not empty",
    );
    let o = tessera(&[
        "backup",
        "--data-dir",
        d,
        "--to",
        dir_str(&elsewhere.path().join("b2")),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(
        out.starts_with("backed up") && out.contains("verified"),
        "{out}"
    );
}

#[test]
fn sync_bench_reports_durable_commit_latency() {
    let tmp = tempfile::tempdir().unwrap();
    let o = ycsb_into(tmp.path(), "sync", &["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["durability"], "sync");
    check_latency(&v["durable_latency_us"], "durable_latency_us");
    check_latency(
        &v["transactions"]["ycsb"]["durable_latency_us"],
        "transactions.ycsb.durable_latency_us",
    );
    // Acknowledged at the durable epoch: at least the commit itself, and
    // (epochs of 40 ms) typically tens of milliseconds.
    assert!(
        v["durable_latency_us"]["p50"].as_f64().unwrap()
            >= v["latency_us"]["p50"].as_f64().unwrap()
    );
    assert!(v["log"]["bytes_per_txn"].as_f64().unwrap() > 0.0);
    assert!(v["log"]["fsyncs"].as_u64().unwrap() > 0);

    // The table has the durable latency section and the log line.
    let tmp2 = tempfile::tempdir().unwrap();
    let o = ycsb_into(tmp2.path(), "sync", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("durable commit latency"), "{out}");
    assert!(out.contains("durability sync:"), "{out}");
    assert!(out.contains("fsyncs"), "{out}");
}

#[test]
fn in_memory_bench_reports_no_log() {
    let o = tessera(&[
        "bench",
        "ycsb",
        "--records",
        "1000",
        "--seconds",
        "0.2",
        "--warmup",
        "0",
        "--quiet",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["durability"], "none");
    assert!(v["log"].is_null());
    assert!(v["durable_latency_us"].is_null());
}

#[test]
fn bench_refuses_a_directory_holding_a_database() {
    let tmp = tempfile::tempdir().unwrap();
    let o = ycsb_into(tmp.path(), "async", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ycsb_into(tmp.path(), "async", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("already holds a tessera database"), "{e}");
    assert!(
        e.contains("tessera recover") && e.contains("tessera check"),
        "{e}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn durability_flags_are_checked() {
    let base = ["bench", "tpcc", "--seconds", "0.1", "--quiet"];
    for (args, expect) in [
        (
            &["--durability", "sync"][..],
            "--durability sync needs --data-dir",
        ),
        (
            &["--durability", "async"][..],
            "--durability async needs --data-dir",
        ),
        (
            &["--data-dir", "/nonexistent-x"][..],
            "--data-dir needs --durability",
        ),
        (&["--durability", "often"][..], "--durability"),
        (&["--loggers", "0"][..], "--loggers"),
        (
            &["--checkpoint-secs", "1"][..],
            "--checkpoint-secs needs --durability",
        ),
        (&["--checkpoint-secs", "0"][..], "--checkpoint-secs"),
    ] {
        let mut a = base.to_vec();
        a.extend_from_slice(args);
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(expect), "{args:?}: {e}");
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn inspect_reads_a_healthy_dir_and_names_a_damaged_segment() {
    let tmp = tempfile::tempdir().unwrap();
    let d = dir_str(tmp.path());
    let o = ycsb_into(tmp.path(), "async", &[]);
    assert!(o.status.success(), "{}", stderr(&o));

    let v = ok_json(&["inspect", "--data-dir", d, "--json"]);
    assert!(v.get("error").is_none(), "{v}");
    let meta = &v["meta"];
    assert_eq!(meta["run"]["loggers"], 1, "{meta}");
    assert!(meta["tables"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "ycsb"));
    let log = &v["log"];
    assert!(log["durable_epoch"].as_u64().unwrap() > 0, "{log}");
    assert!(log["torn"].as_array().unwrap().is_empty(), "{log}");
    let stream = &log["streams"][0];
    assert!(stream["max_epoch"].as_u64().unwrap() > 0);
    assert!(stream["last_mark"].as_u64().unwrap() > 0);
    assert!(stream["blocks"].as_u64().unwrap() > 2);
    let seg = &stream["segments"][0];
    let file = seg["file"].as_str().unwrap().to_string();
    let valid = seg["valid_bytes"].as_u64().unwrap();
    assert!(valid > 0);

    // The text form lists the logger and its segment.
    let o = tessera(&["inspect", "--data-dir", d]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("logger 0:") && out.contains(&file), "{out}");
    assert!(out.contains("would use durable epoch"), "{out}");

    // Inspect changed nothing.
    let again = ok_json(&["inspect", "--data-dir", d, "--json"]);
    assert_eq!(again["log"], v["log"]);

    // Flip a byte in the middle of the segment's valid part.
    let path = tmp.path().join(&file);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(valid / 2) as usize] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let o = tessera(&["inspect", "--data-dir", d]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&file), "{e}");
    let o = tessera(&["inspect", "--data-dir", d, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let err = &json_of(&o)["error"];
    assert_eq!(err["kind"], "damaged", "{err}");
    assert!(err["message"].as_str().unwrap().contains(&file), "{err}");
    // Recovery refuses it too, naming the file.
    let o = tessera(&["recover", "--data-dir", d]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(&file), "{}", stderr(&o));
}

#[test]
fn check_tpcc_on_other_data_fails_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = dir_str(tmp.path());
    let o = ycsb_into(tmp.path(), "async", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = tessera(&["check", "tpcc", "--data-dir", d]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("not a TPC-C database"), "{e}");
    assert!(e.contains("warehouse") && e.contains("ycsb"), "{e}");

    // A directory without a database: no new one is created.
    let empty = tempfile::tempdir().unwrap();
    for cmd in [&["check", "tpcc"][..], &["recover"][..]] {
        let mut a = cmd.to_vec();
        a.extend_from_slice(&["--data-dir", dir_str(empty.path())]);
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(1), "{cmd:?}");
        assert!(
            stderr(&o).contains("holds no tessera database"),
            "{}",
            stderr(&o)
        );
    }
    assert!(std::fs::read_dir(empty.path()).unwrap().next().is_none());
}

#[test]
fn check_tpcc_accepts_tpcc_hybrid_data() {
    let tmp = tempfile::tempdir().unwrap();
    let d = dir_str(tmp.path());
    let v = ok_json(&[
        "bench",
        "tpcc-hybrid",
        "--threads",
        "1",
        "--warehouses",
        "1",
        "--seconds",
        "0.3",
        "--warmup",
        "0",
        "--json",
        "--quiet",
        "--durability",
        "sync",
        "--data-dir",
        d,
    ]);
    assert_eq!(v["durability"], "sync");
    check_latency(&v["durable_latency_us"], "durable_latency_us");
    let c = ok_json(&["check", "tpcc", "--data-dir", d, "--json"]);
    assert_eq!(c["workload"], "tpcc-hybrid");
    assert_eq!(c["consistency"]["passed"], true, "{c}");
}

#[test]
fn checkpoints_during_a_bench_and_recovery_from_one() {
    let tmp = tempfile::tempdir().unwrap();
    let d = dir_str(tmp.path());
    let o = ycsb_into(tmp.path(), "async", &["--json", "--checkpoint-secs", "0.1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json_of(&o);
    assert_eq!(v["engine"]["checkpoint_secs"], 0.1);
    assert!(
        v["log"]["checkpoints"].as_u64().unwrap() > 0,
        "{}",
        v["log"]
    );
    assert!(v["log"]["checkpoint_error"].is_null());
    let i = ok_json(&["inspect", "--data-dir", d, "--json"]);
    assert!(
        i["meta"]["checkpoint"]["epoch"].as_u64().unwrap() > 0,
        "{i}"
    );
    let r = ok_json(&["recover", "--data-dir", d, "--json"]);
    assert!(r["recovery"]["checkpoint"]["file"].is_string(), "{r}");
    let rows = r["tables"][0]["rows"].as_u64().unwrap();
    assert!(rows >= 2000, "{r}");
}

/// Every file of `dir` (recursively, relative names) with its bytes.
fn dir_state(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, at: &Path, out: &mut std::collections::BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(at).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let name = p.strip_prefix(root).unwrap().display().to_string();
                out.insert(name, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// `args` fails with `status`; with `--json` its stdout is one object with
/// the error object of `kind`, whose message contains `needle`. Returns
/// stderr.
fn fails_with(args: &[&str], status: i32, kind: &str, needle: &str) -> String {
    let o = tessera(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(status), "{args:?}: {e}");
    let v = json_of(&o);
    let err = &v["error"];
    assert_eq!(err["kind"], kind, "{args:?}: {v}");
    assert_eq!(err["exit_status"], status, "{args:?}: {v}");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains(needle), "{args:?}: {msg}");
    assert!(e.contains(needle), "{args:?}: stderr {e}");
    e
}

#[test]
fn every_command_fails_with_an_error_object_and_its_exit_status() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let missing = tmp.path().join("missing");
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    // An I/O error: the control file is a directory (EISDIR), whoever runs
    // the test (permissions do not stop root).
    let broken = tmp.path().join("broken");
    std::fs::create_dir_all(broken.join("tessera.meta")).unwrap();
    let (file, missing, empty, broken) = (
        dir_str(&file),
        dir_str(&missing),
        dir_str(&empty),
        dir_str(&broken),
    );
    let quick = ["--records", "100", "--seconds", "0.1", "--warmup", "0"];
    let benches: [&[&str]; 3] = [
        &["bench", "ycsb"],
        &["bench", "tpcc"],
        &["bench", "tpcc-hybrid"],
    ];
    let tools: [&[&str]; 3] = [&["recover"], &["inspect"], &["check", "tpcc"]];
    for cmd in benches.iter().chain(&tools) {
        // clap's errors: exit status 2, its message and "try '--help'".
        let mut a = cmd.to_vec();
        a.extend(["--no-such-flag", "--json"]);
        let e = fails_with(&a, 2, "invalid_argument", "--no-such-flag");
        assert!(e.contains("--help"), "{e}");
    }
    for cmd in benches {
        let mut base = cmd.to_vec();
        if cmd[1] == "ycsb" {
            base.extend(quick);
        }
        base.extend(["--quiet", "--json", "--durability", "async", "--data-dir"]);
        let run = |dir: &str, status: i32, kind: &str, needle: &str| {
            let mut a = base.clone();
            a.push(dir);
            fails_with(&a, status, kind, needle)
        };
        run(file, 2, "invalid_argument", "is not a directory");
        // A LOCK that cannot be opened is an I/O error, not a usage one.
        let locked = tmp.path().join(format!("lock-{}", cmd[1]));
        std::fs::create_dir_all(locked.join("LOCK")).unwrap();
        let e = run(dir_str(&locked), 3, "io", "LOCK");
        assert!(!e.contains("--help"), "{e}");
        // A run-time usage error found after parsing.
        let mut a = cmd.to_vec();
        a.extend(["--json", "--durability", "sync"]);
        fails_with(
            &a,
            2,
            "invalid_argument",
            "--durability sync needs --data-dir",
        );
    }
    for cmd in tools {
        let run = |dir: &str, status: i32, kind: &str, needle: &str| {
            let mut a = cmd.to_vec();
            a.extend(["--json", "--data-dir", dir]);
            fails_with(&a, status, kind, needle)
        };
        let e = run(file, 2, "invalid_argument", "is not a directory");
        assert!(!e.contains("--help"), "{e}");
        run(missing, 2, "invalid_argument", "does not exist");
        // An empty directory: every tool says the same.
        run(empty, 1, "no_database", "holds no tessera database");
        let e = run(broken, 3, "io", "tessera.meta");
        assert!(!e.contains("--help"), "{e}");
        let o = tessera(&[cmd, &["--json", "--data-dir", broken]].concat());
        assert_eq!(json_of(&o)["error"]["io_kind"], "IsADirectory");
    }
    assert!(
        dir_state(Path::new(empty)).is_empty(),
        "the tools wrote into an empty directory"
    );
}

#[test]
fn a_directory_in_use_is_its_own_error() {
    let tmp = tempfile::tempdir().unwrap();
    let d = dir_str(tmp.path()).to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "bench",
            "ycsb",
            "--records",
            "1000",
            "--threads",
            "1",
            "--seconds",
            "30",
            "--warmup",
            "0",
            "--quiet",
            "--durability",
            "async",
            "--data-dir",
            &d,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a bench");
    let t0 = std::time::Instant::now();
    while !tmp.path().join("tessera.frontier").exists() {
        assert!(t0.elapsed().as_secs() < 60, "the bench did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for cmd in [&["recover"][..], &["inspect"], &["check", "tpcc"]] {
        let mut a = cmd.to_vec();
        a.extend(["--json", "--data-dir", &d]);
        fails_with(&a, 4, "in_use", "in use by another open database");
    }
    let a = ["recover", "--dry-run", "--json", "--data-dir", &d];
    fails_with(&a, 4, "in_use", "in use by another open database");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn dry_run_changes_nothing_and_a_recovery_mode_accepts_a_loss_knowingly() {
    let tmp = tempfile::tempdir().unwrap();
    let d = dir_str(tmp.path());
    let o = ycsb_into(tmp.path(), "sync", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut segs: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tlog"))
        .collect();
    segs.sort();
    let newest = segs.pop().unwrap();
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();

    // A torn tail after the frontier: a dry run reports the cut it would
    // make and makes none; inspect agrees.
    let mut b = std::fs::read(&newest).unwrap();
    let len = b.len();
    b.extend_from_slice(&[0xab; 30]);
    std::fs::write(&newest, &b).unwrap();
    let before = dir_state(tmp.path());
    let v = ok_json(&["recover", "--dry-run", "--json", "--data-dir", d]);
    let r = &v["recovery"];
    assert_eq!(r["dry_run"], true, "{r}");
    assert!(!r["changes"].as_array().unwrap().is_empty(), "{r}");
    assert!(r["loss"].is_null(), "{r}");
    let i = ok_json(&["inspect", "--json", "--data-dir", d]);
    assert_eq!(i["recovery"]["durable_epoch"], r["durable_epoch"]);
    assert_eq!(i["recovery"]["records"], r["records"]);
    assert_eq!(
        dir_state(tmp.path()),
        before,
        "--dry-run or inspect changed the directory"
    );

    // Cut below the frontier: acknowledged commits are gone. Refused by
    // recover, check and inspect alike, naming the file and the mode that
    // would accept it, with the directory unchanged.
    std::fs::write(&newest, &b[..len / 2]).unwrap();
    let before = dir_state(tmp.path());
    for cmd in [&["recover"][..], &["inspect"], &["check", "tpcc"]] {
        let mut a = cmd.to_vec();
        a.extend(["--json", "--data-dir", d]);
        let e = fails_with(&a, 1, "damaged", &name);
        assert!(e.contains("tolerate-tail"), "{e}");
    }
    assert_eq!(
        dir_state(tmp.path()),
        before,
        "a refusal changed the directory"
    );
    // inspect with the mode gives recover's verdict with the loss.
    let i = ok_json(&[
        "inspect",
        "--recovery-mode",
        "tolerate-tail",
        "--json",
        "--data-dir",
        d,
    ]);
    assert!(!i["recovery"]["loss"].is_null(), "{i}");
    assert_eq!(dir_state(tmp.path()), before);
    let v = ok_json(&[
        "recover",
        "--recovery-mode",
        "tolerate-tail",
        "--json",
        "--data-dir",
        d,
    ]);
    let loss = &v["recovery"]["loss"];
    assert!(!loss.is_null(), "{v}");
    assert_eq!(
        v["recovery"]["durable_epoch"],
        i["recovery"]["durable_epoch"]
    );
    let o = tessera(&[
        "recover",
        "--recovery-mode",
        "tolerate-tail",
        "--data-dir",
        d,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The copies and the report are kept.
    let kept: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].join("REPORT.txt").exists());
    // The file cut is kept (when the cut fell on a record boundary, the
    // loss is the missing records after it and nothing is cut).
    let cut = v["recovery"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c.as_str().unwrap().contains(&name) && c.as_str().unwrap().contains("cut"));
    assert!(!cut || kept[0].join(&name).exists(), "{v}");
    // Recorded: the default mode now recovers cleanly, with no loss.
    let v = ok_json(&["recover", "--json", "--data-dir", d]);
    assert!(v["recovery"]["loss"].is_null(), "{v}");
    // A bad mode is a usage error.
    let e = fails_with(
        &[
            "recover",
            "--recovery-mode",
            "lenient",
            "--json",
            "--data-dir",
            d,
        ],
        2,
        "invalid_argument",
        "--recovery-mode",
    );
    assert!(e.contains("--help"), "{e}");
}

/// A deterministic engine's data directory end to end: a SmallBank run
/// under each deterministic protocol with its input log and background
/// checkpoints; `recover` loads the newest checkpoint and replays the log
/// after it; `check det` finds the state equal to a serial replay; a dry
/// run changes nothing; `check tpcc` says it is not a TPC-C database; a
/// `--cc` other than the directory's own is refused.
/// `inspect` lists the requests a system failure expunged (the thesis's
/// section 6.4.7), in JSON and in text, and refuses a damaged list as
/// recovery does, naming the file.
#[test]
fn inspect_lists_expunged_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("det");
    det_bench_into(
        &d,
        &[
            "bench",
            "smallbank",
            "--cc",
            "bohm",
            "--customers",
            "200",
            "--spin-us",
            "0",
            "--seconds",
            "0.5",
            "--warmup",
            "0",
        ],
        "0.2",
    );
    let i = ok_json(&["inspect", "--data-dir", dir_str(&d), "--json"]);
    assert_eq!(i["expunged"], serde_json::json!([]), "{i}");
    tessera::det::expunge::add(&d, 7, "overflow in a piece after the commit point").unwrap();
    let i = ok_json(&["inspect", "--data-dir", dir_str(&d), "--json"]);
    assert_eq!(i["expunged"][0]["request"], 7, "{i}");
    assert_eq!(
        i["expunged"][0]["reason"],
        "overflow in a piece after the commit point"
    );
    let o = tessera(&["inspect", "--data-dir", dir_str(&d)]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("expunged requests") && text.contains("request 7: overflow"),
        "{text}"
    );
    let f = d.join(tessera::det::expunge::EXPUNGE_FILE);
    let mut b = std::fs::read(&f).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(&f, &b).unwrap();
    let e = fails_with(
        &["inspect", "--data-dir", dir_str(&d), "--json"],
        1,
        "damaged",
        "tessera.expunged",
    );
    assert!(e.contains("tessera.expunged"), "{e}");
}

#[test]
fn deterministic_bench_recover_and_check() {
    for cc in ["bohm", "2pl-ordered"] {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("det");
        let v = det_bench_into(
            &d,
            &[
                "bench",
                "smallbank",
                "--cc",
                cc,
                "--customers",
                "200",
                "--spin-us",
                "0",
                "--seconds",
                "1",
                "--warmup",
                "0.2",
            ],
            "0.2",
        );
        assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
        assert!(v["checkpoints"]["taken"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(v["consistency"]["passed"], true, "{v}");
        let before = dir_state(&d);
        // `inspect` reads the directory as recovery will, changing nothing.
        let i = ok_json(&["inspect", "--data-dir", dir_str(&d), "--json"]);
        assert_eq!(i["protocol"], cc, "{i}");
        assert!(
            i["verdict"]
                .as_str()
                .unwrap()
                .starts_with("recovery would load ckpt-"),
            "{i}"
        );
        assert!(i["input_log"]["batches"].as_u64().unwrap() > 0, "{i}");
        assert_eq!(dir_state(&d), before, "{cc}: inspect changed the directory");
        let dry = ok_json(&["recover", "--data-dir", dir_str(&d), "--dry-run", "--json"]);
        assert_eq!(dry["dry_run"], true);
        assert_eq!(
            dir_state(&d),
            before,
            "{cc}: a dry run changed the directory"
        );
        let r = ok_json(&["recover", "--data-dir", dir_str(&d), "--json"]);
        assert_eq!(r["deterministic"], true);
        let ck = r["recovery"]["checkpoint"].as_str().unwrap();
        assert_ne!(ck, "ckpt-0000000000.tckp", "{cc}: {r}");
        assert_eq!(r["tables"][1]["rows"], 200, "{r}");
        fails_with(
            &[
                "recover",
                "--data-dir",
                dir_str(&d),
                "--recovery-mode",
                "salvage",
                "--json",
            ],
            2,
            "invalid_argument",
            "strictly only",
        );
        let c = ok_json(&["check", "det", "--data-dir", dir_str(&d), "--json"]);
        assert_eq!(c["consistency"]["passed"], true, "{c}");
        let other = if cc == "bohm" { "2pl-ordered" } else { "bohm" };
        for cmd in [&["recover"][..], &["check", "det"]] {
            let mut args = cmd.to_vec();
            args.extend(["--data-dir", dir_str(&d), "--cc", other, "--json"]);
            fails_with(&args, 2, "invalid_argument", "leave --cc out");
        }
        ok_json(&[
            "check",
            "det",
            "--data-dir",
            dir_str(&d),
            "--cc",
            cc,
            "--json",
        ]);
        fails_with(
            &["check", "tpcc", "--data-dir", dir_str(&d), "--json"],
            1,
            "not_tpcc",
            "not a TPC-C database",
        );
        // Damage in the newest checkpoint: inspect says recovery would
        // refuse it, as recovery does.
        let newest = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "tckp"))
            .max()
            .unwrap();
        let mut bytes = std::fs::read(&newest).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x5a;
        std::fs::write(&newest, &bytes).unwrap();
        fails_with(
            &["inspect", "--data-dir", dir_str(&d), "--json"],
            1,
            "damaged",
            "recovery would refuse",
        );
        fails_with(
            &["recover", "--data-dir", dir_str(&d), "--json"],
            1,
            "damaged",
            "cannot recover",
        );
        // No checkpoint at all under an input log: inspect refuses it as
        // recovery does (it used to say "replay from an empty state").
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "tckp") {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
        for cmd in [&["inspect"][..], &["recover", "--dry-run"]] {
            let mut args = cmd.to_vec();
            args.extend(["--data-dir", dir_str(&d), "--json"]);
            fails_with(&args, 1, "damaged", "no checkpoint to replay it over");
        }
    }
}

/// TPC-C NewOrder+Payment under BOHM with its input log and checkpoints:
/// the directory recovers (the TPC-C procedure is registered for replay),
/// equals a serial replay, and the recovered state passes TPC-C's
/// consistency conditions.
#[test]
fn deterministic_tpcc_recovers_and_stays_consistent() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("det-tpcc");
    let v = det_bench_into(
        &d,
        &[
            "bench",
            "tpcc",
            "--cc",
            "bohm",
            "--warehouses",
            "1",
            "--mix",
            "50,50,0,0,0",
            "--seconds",
            "1",
            "--warmup",
            "0",
        ],
        "0.3",
    );
    assert!(v["committed"].as_u64().unwrap() > 0, "{v}");
    let c = ok_json(&["check", "det", "--data-dir", dir_str(&d), "--json"]);
    assert_eq!(c["consistency"]["passed"], true, "{c}");
    let t = ok_json(&["check", "tpcc", "--data-dir", dir_str(&d), "--json"]);
    assert_eq!(t["consistency"]["passed"], true, "{t}");
    assert_eq!(t["warehouses"], 1, "{t}");
    let r = ok_json(&["recover", "--data-dir", dir_str(&d), "--json"]);
    assert!(
        r["recovery"]["requests_committed"].as_u64().unwrap() > 0
            || r["recovery"]["checkpoint"] != "ckpt-0000000000.tckp",
        "{r}"
    );
}

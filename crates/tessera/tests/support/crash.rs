//! What the kill -9 crash tests share (`crates/tessera/tests/crash_bank.rs`
//! and `crates/tessera-workloads/tests/crash_tpcc.rs`, which includes this
//! file by path): the child's environment variables, the seed, the work
//! directory and the "was a checkpoint cut short" probe.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Set in a child: the name of the test whose child body to run.
pub const CHILD_ENV: &str = "TESSERA_CRASH_CHILD";
/// Set in a child: the work directory.
pub const DIR_ENV: &str = "TESSERA_CRASH_DIR";
/// Set in a child: the run number.
pub const RUN_ENV: &str = "TESSERA_CRASH_RUN";
/// Reproduce a run: the seed it printed.
pub const SEED_ENV: &str = "TESSERA_CRASH_SEED";

/// In a child: its work directory, run number and seed, from the
/// environment; and a watchdog that ends the child if the parent never
/// kills it within `lifetime`.
pub fn child_setup(lifetime: std::time::Duration) -> (PathBuf, u32, u64) {
    let work = PathBuf::from(std::env::var(DIR_ENV).expect("child needs its directory"));
    let run: u32 = std::env::var(RUN_ENV).unwrap().parse().unwrap();
    let seed: u64 = std::env::var(SEED_ENV).unwrap().parse().unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(lifetime);
        eprintln!("crash child: not killed in time, exiting");
        std::process::exit(3);
    });
    (work, run, seed)
}

/// The seed: `TESSERA_CRASH_SEED`, or the clock.
pub fn seed() -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(s) => s.parse().expect("TESSERA_CRASH_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    }
}

/// A fresh work directory for `test` under the system's temporary folder.
pub fn work_dir(test: &str, seed: u64) -> PathBuf {
    let work = std::env::temp_dir().join(format!("tessera-{test}-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    work
}

/// Whether a kill left a checkpoint unfinished: a `.tckp.tmp` file, or a
/// second checkpoint file not yet recorded (or its predecessor not yet
/// deleted).
pub fn checkpoint_in_progress(db: &Path) -> bool {
    let names: Vec<String> = std::fs::read_dir(db)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.iter().any(|n| n.ends_with(".tckp.tmp"))
        || names.iter().filter(|n| n.ends_with(".tckp")).count() > 1
}

/// The complete lines of a child's acknowledgement file (a kill may cut
/// the last one short; a missing file has none).
pub fn ack_lines(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete.lines().map(str::to_string).collect()
}

/// When to kill a child: mostly while it works (100 to 600 ms), one time
/// in four early (1 to 100 ms), while it starts up and recovers.
pub fn kill_delay(rng: &mut impl rand::Rng) -> std::time::Duration {
    std::time::Duration::from_millis(if rng.gen_range(0..4) == 0 {
        rng.gen_range(1..100)
    } else {
        rng.gen_range(100..=600)
    })
}

/// Run this test binary as child `run` of case `id` of `test` (its stderr
/// to `work/child-r<run>.log`), kill it with SIGKILL after `after`, and
/// reap it. Panics, naming `ctx` and keeping `work`, if it exited by
/// itself first.
pub fn run_and_kill(
    test: &str,
    id: &str,
    work: &Path,
    run: u32,
    seed: u64,
    after: std::time::Duration,
    ctx: &str,
) {
    let log_path = work.join(format!("child-r{run}.log"));
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, id)
        .env(DIR_ENV, work)
        .env(RUN_ENV, run.to_string())
        .env(SEED_ENV, seed.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    if let Some(status) = child.try_wait().unwrap() {
        panic!(
            "{ctx}: child exited by itself ({status}) before the kill; directory kept: {}\n{}",
            work.display(),
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

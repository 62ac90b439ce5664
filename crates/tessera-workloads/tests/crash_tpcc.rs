//! Crash tests for TPC-C: a child process loads one warehouse into a
//! durable database and runs the standard mix on two threads under
//! `Durability::Sync`; the parent kills it with SIGKILL at a random moment,
//! recovers the directory, checks the TPC-C consistency conditions and that
//! every acknowledged NewOrder's order is there. The next child goes on with
//! the recovered directory. A kill during the load must leave a directory
//! that recovers; the next child then starts over on a fresh one, since a
//! half-loaded database is no TPC-C database.
//!
//! The test binary spawns itself (`TESSERA_CRASH_CHILD` selects the child
//! role). The child reports through files only: `loading`, `loaded` and
//! `running-r<child>` markers, and one side file per thread with a line per acknowledged
//! NewOrder, written after `Worker::run` returned.
//!
//! Reproduce a failure with `TESSERA_CRASH_SEED=<seed>`; a failing
//! directory is kept and its path printed.

use std::io::Write;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{Database, Durability, Error, Options, Protocol, ScanOptions};
use tessera_workloads::driver::Workload;
use tessera_workloads::tpcc::random::{self, nurand, uniform, A_C_ID, A_C_LAST, A_OL_I_ID};
use tessera_workloads::tpcc::schema::{self, Order, Row, Tables, Text};
use tessera_workloads::tpcc::txns::{self, CustomerSel, Recon, Scratch};
use tessera_workloads::tpcc::{
    check_consistency, now_ms, Tpcc, TpccConfig, CUSTOMERS, DISTRICTS, ITEMS,
};

#[path = "../../tessera/tests/support/crash.rs"]
mod support;
use support::*;

const THREADS: u32 = 2;
/// A child that outlives this was forgotten by its parent: it exits.
const CHILD_LIFETIME: Duration = Duration::from_secs(60);
/// Longest wait for a child's marker file.
const MARKER_WAIT: Duration = Duration::from_secs(40);

/// The protocol a looping test's child runs under.
const PROTOCOL_ENV: &str = "TESSERA_CRASH_TPCC_PROTOCOL";

#[derive(Clone, Copy, Debug)]
struct Variant {
    protocol: Protocol,
    /// Kills after the load (one more comes during the load).
    kills: u32,
    checkpoint: Option<Duration>,
}

fn options(dir: &Path, v: Variant) -> Options {
    Options::durable(dir)
        .protocol(v.protocol)
        .durability(Durability::Sync)
        .workers(8)
        .segment_bytes(4 << 20)
        .epoch_interval(Duration::from_millis(5))
}

fn child_options(dir: &Path, v: Variant) -> Options {
    match v.checkpoint {
        Some(d) => options(dir, v).checkpoint_interval(d),
        None => options(dir, v),
    }
}

fn config() -> TpccConfig {
    TpccConfig::new(1)
}

fn ack_file(work: &Path, run: u32, thread: u32) -> PathBuf {
    work.join(format!("neworders-r{run}-t{thread}"))
}

/// The child: load (unless a loaded database is there), then run the mix
/// until killed. Never returns.
fn child(v: Variant) -> ! {
    let (work, run, seed) = child_setup(CHILD_LIFETIME);
    let wl = Tpcc::new(config()).unwrap();
    let loaded = work.join("loaded");
    let db;
    let t;
    if loaded.exists() {
        db = Database::open(child_options(&work.join("db"), v))
            .unwrap_or_else(|e| panic!("child {run}: open failed: {e}"));
        t = Tables::open(&db).unwrap();
    } else {
        std::fs::write(work.join("loading"), b"").unwrap();
        db = Database::open(child_options(&work.join("db"), v)).unwrap();
        let t0 = Instant::now();
        wl.load(&db, THREADS as usize, &|_| {}).unwrap();
        // Every load transaction returned under Sync, so it is durable;
        // wait on a fresh token anyway, for a load that did not.
        let mut w = db.worker().unwrap();
        w.run(|_| Ok(())).unwrap();
        db.wait_durable(w.last_commit()).unwrap();
        drop(w);
        eprintln!("child {run}: loaded in {:.2} s", t0.elapsed().as_secs_f64());
        t = wl.tables().unwrap();
        std::fs::write(&loaded, b"").unwrap();
    }
    let c_run = wl.nurand_constants().1;
    std::fs::write(work.join(format!("running-r{run}")), b"").unwrap();
    std::thread::scope(|s| {
        for thread in 0..THREADS {
            let db = db.clone();
            let work = &work;
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed ^ ((run as u64) << 32) ^ thread as u64);
                let mut acks = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(ack_file(work, run, thread))
                    .unwrap();
                let mut w = db.worker().unwrap();
                let mut s = Scratch::default();
                // HISTORY keys: origin 0 is the loader; every child thread
                // gets its own.
                let origin = u16::try_from(1 + run * THREADS + thread).expect("origin");
                let mut hist_seq = 0;
                let customer = |rng: &mut SmallRng| {
                    if uniform(rng, 1, 100) <= 60 {
                        let mut b = [0u8; 16];
                        let n =
                            random::last_name(nurand(rng, A_C_LAST, c_run.c_last, 0, 999), &mut b);
                        CustomerSel::LastName(Text::new(&b[..n]))
                    } else {
                        CustomerSel::Id(nurand(rng, A_C_ID, c_run.c_id, 1, CUSTOMERS))
                    }
                };
                let sl_d_id = thread as u8 + 1;
                loop {
                    let x = uniform(&mut rng, 1, 100);
                    let r = if x <= 45 {
                        let mut no = txns::NewOrderInput {
                            w_id: 1,
                            d_id: uniform(&mut rng, 1, DISTRICTS as u32) as u8,
                            c_id: nurand(&mut rng, A_C_ID, c_run.c_id, 1, CUSTOMERS),
                            o_entry_d: now_ms(),
                            ol_cnt: uniform(&mut rng, 5, 15) as u8,
                            ..Default::default()
                        };
                        let rollback = uniform(&mut rng, 1, 100) == 1;
                        let n = no.ol_cnt as usize;
                        for (i, l) in no.lines[..n].iter_mut().enumerate() {
                            l.i_id = if rollback && i == n - 1 {
                                ITEMS + 1
                            } else {
                                nurand(&mut rng, A_OL_I_ID, c_run.ol_i_id, 1, ITEMS)
                            };
                            l.supply_w_id = 1;
                            l.quantity = uniform(&mut rng, 1, 10) as u8;
                        }
                        w.run(|tx| txns::new_order(tx, &t, &no, &mut s)).map(|out| {
                            // Acknowledged: the order must survive any crash.
                            acks.write_all(format!("{} {}\n", no.d_id, out.o_id).as_bytes())
                                .unwrap();
                            acks.flush().unwrap();
                        })
                    } else if x <= 88 {
                        let d_id = uniform(&mut rng, 1, DISTRICTS as u32) as u8;
                        let p = txns::PaymentInput {
                            w_id: 1,
                            d_id,
                            c_w_id: 1,
                            c_d_id: d_id,
                            customer: customer(&mut rng),
                            h_amount: uniform(&mut rng, 100, 500_000) as i64,
                            h_date: now_ms(),
                            h_key: schema::history_key(origin, hist_seq),
                        };
                        hist_seq += 1;
                        w.run(|tx| txns::payment(tx, &t, &p, &Recon::default(), &mut s))
                            .map(drop)
                    } else if x <= 92 {
                        let o = txns::OrderStatusInput {
                            w_id: 1,
                            d_id: uniform(&mut rng, 1, DISTRICTS as u32) as u8,
                            customer: customer(&mut rng),
                        };
                        w.run(|tx| txns::order_status(tx, &t, &o, &Recon::default(), &mut s))
                            .map(drop)
                    } else if x <= 96 {
                        let d = txns::DeliveryInput {
                            w_id: 1,
                            carrier_id: uniform(&mut rng, 1, 10) as u8,
                            delivery_d: now_ms(),
                        };
                        w.run(|tx| txns::delivery(tx, &t, &d, &Recon::default(), &mut s))
                            .map(drop)
                    } else {
                        let l = txns::StockLevelInput {
                            w_id: 1,
                            d_id: sl_d_id,
                            threshold: uniform(&mut rng, 10, 20) as i32,
                        };
                        w.run(|tx| txns::stock_level(tx, &t, &l, &mut s)).map(drop)
                    };
                    match r {
                        Ok(()) | Err(Error::UserAbort) => {}
                        Err(e) => panic!("child {run} thread {thread}: {e}"),
                    }
                }
            });
        }
    });
    unreachable!("terminal threads never end");
}

/// Acknowledged NewOrders (district, order id) of every child so far
/// (complete lines only).
fn read_acks(work: &Path, runs: u32) -> Vec<(u8, u32)> {
    let mut v = Vec::new();
    for run in 0..runs {
        for thread in 0..THREADS {
            for l in ack_lines(&ack_file(work, run, thread)) {
                let (d, o) = l.split_once(' ').unwrap();
                v.push((d.parse().unwrap(), o.parse().unwrap()));
            }
        }
    }
    v
}

fn wait_for(path: &Path, child: &mut Child, ctx: &str, work: &Path) {
    let t0 = Instant::now();
    // A failure's message also goes into the kept directory (the harness's
    // output of a parallel run is easily lost), with how long it waited.
    let fail = |msg: String| -> ! {
        let _ = std::fs::write(work.join("failure.txt"), &msg);
        panic!("{msg}");
    };
    while !path.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            fail(format!(
                "{ctx}: child exited by itself ({status}) after {:.2} s; directory kept: {}",
                t0.elapsed().as_secs_f64(),
                work.display()
            ));
        }
        if t0.elapsed() > MARKER_WAIT {
            let _ = child.kill();
            let _ = child.wait();
            fail(format!(
                "{ctx}: no {} after {MARKER_WAIT:?} (a hang?); directory kept: {}",
                path.display(),
                work.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Recover `dir`, a copy of a loaded directory just after a kill; check
/// consistency and every acknowledged NewOrder of the first `runs` children.
/// Returns the number of acknowledged NewOrders checked.
fn check(work: &Path, dir: &Path, pristine: &Path, v: Variant, runs: u32, ctx: &str) -> usize {
    let t0 = Instant::now();
    let db = Database::open(options(dir, v)).unwrap_or_else(|e| {
        panic!(
            "{ctx}: recovery failed: {e}; directory as the kill left it: {}",
            pristine.display()
        )
    });
    let r = db.recovery_report().unwrap();
    let report = format!("{r:?}");
    let summary = format!(
        "{} MB of log in {} segments, checkpoint {:?}, {} warnings",
        r.log_bytes >> 20,
        r.segments,
        r.checkpoint,
        r.warnings.len()
    );
    let recovered = t0.elapsed();
    let fail = |what: String| -> ! {
        panic!(
            "{ctx}: {what}\nrecovery report: {report}\ndirectory as the kill left it: {} \
             (recovered: {}; side files in {})",
            pristine.display(),
            dir.display(),
            work.display()
        )
    };
    let rep = check_consistency(&db, &config())
        .unwrap_or_else(|e| fail(format!("consistency check failed to run: {e}")));
    if !rep.passed {
        fail(format!(
            "TPC-C consistency violated: {}\n{}",
            rep.summary(),
            serde_json::to_string_pretty(&rep).unwrap()
        ));
    }
    let t = Tables::open(&db).unwrap();
    let acks = read_acks(work, runs);
    // One read-only transaction for all of them (each `run` of a Sync
    // database waits for an epoch boundary).
    let mut w = db.worker().unwrap();
    let problem = w
        .run(|tx| {
            for &(d, o) in &acks {
                let Some(order) = tx.get(t.order, &schema::order_key(1, d, o))? else {
                    return Ok(Some(format!(
                        "acknowledged NewOrder (w 1, d {d}, o {o}) lost: no ORDER row"
                    )));
                };
                let ol_cnt = Order::decode(order).unwrap().o_ol_cnt;
                let lines = tx.scan(
                    t.order_line,
                    Bound::Included(&schema::order_line_key(1, d, o, 0)[..]),
                    Bound::Included(&schema::order_line_key(1, d, o, u8::MAX)[..]),
                    ScanOptions::new(),
                    |_, _| true,
                )?;
                if lines != ol_cnt as usize {
                    return Ok(Some(format!(
                        "acknowledged NewOrder (w 1, d {d}, o {o}) has {lines} of its {ol_cnt} lines"
                    )));
                }
            }
            Ok(None)
        })
        .unwrap();
    if let Some(p) = problem {
        fail(format!("{p} ({} acknowledged)", acks.len()));
    }
    eprintln!(
        "{ctx}: recovered in {:.2} s ({summary}), checked in {:.2} s, {} acknowledged NewOrders",
        recovered.as_secs_f64(),
        t0.elapsed().as_secs_f64() - recovered.as_secs_f64(),
        acks.len()
    );
    acks.len()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The checker thread's result; its panic (a failed check) is this
/// thread's.
fn join(h: std::thread::JoinHandle<usize>) -> usize {
    h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
}

fn crash_tpcc(test: &str, v: Variant) {
    if std::env::var(CHILD_ENV).as_deref() == Ok(test) {
        // A test that loops over protocols names the child's in the
        // environment (the child runs the whole test function again).
        let mut v = v;
        if let Ok(p) = std::env::var(PROTOCOL_ENV) {
            v.protocol = p.parse().unwrap();
        }
        child(v);
    }
    let seed = seed();
    eprintln!("{test}: seed {seed} (rerun with {SEED_ENV}={seed})");
    let mut rng = SmallRng::seed_from_u64(seed);
    let work = work_dir(test, seed);
    let t0 = Instant::now();
    let (mut during_load, mut after_load, mut before_running, mut acked) = (0, 0, 0, 0);
    let mut mid_checkpoint = 0;
    let mut checker: Option<std::thread::JoinHandle<usize>> = None;
    let mut run = 0;
    // The first child is killed during its load; the others after it.
    while after_load < v.kills {
        let in_load = run == 0;
        let log_path = work.join(format!("child-r{run}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--nocapture", "--test-threads", "1"])
            .env(CHILD_ENV, test)
            .env(PROTOCOL_ENV, v.protocol.name())
            .env(DIR_ENV, &work)
            .env(RUN_ENV, run.to_string())
            .env(SEED_ENV, seed.to_string())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        // The first child dies during its load; the third most likely
        // while it recovers the directory (a recovery killed half-way must
        // leave a directory that recovers); the others while running.
        let (marker, kill_after) = if in_load {
            (
                "loading".to_string(),
                Duration::from_millis(rng.gen_range(20..=300)),
            )
        } else if run == 2 {
            (
                "spawn".to_string(),
                Duration::from_millis(rng.gen_range(50..=1000)),
            )
        } else {
            // Once the (recovered or freshly loaded) database runs the mix.
            (
                format!("running-r{run}"),
                Duration::from_millis(rng.gen_range(100..=600)),
            )
        };
        let ctx = format!(
            "{test}: seed {seed}, child {run}, killed {} ms after '{marker}'",
            kill_after.as_millis()
        );
        let spawned = Instant::now();
        if marker != "spawn" {
            wait_for(&work.join(&marker), &mut child, &ctx, &work);
            eprintln!(
                "{ctx}: '{marker}' {:.2} s after the spawn",
                spawned.elapsed().as_secs_f64()
            );
        }
        std::thread::sleep(kill_after);
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "{ctx}: child exited by itself ({status}) before the kill; directory kept: {}\n{}",
                work.display(),
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        child.kill().unwrap();
        child.wait().unwrap();
        if work.join("loaded").exists() && !work.join(format!("running-r{run}")).exists() {
            before_running += 1;
        }
        run += 1;
        if !work.join("loaded").exists() {
            // Killed during the load: the directory must recover; then
            // start over on a fresh one.
            let db = Database::open(options(&work.join("db"), v)).unwrap_or_else(|e| {
                panic!(
                    "{ctx}: recovery of a half-loaded directory failed: {e}; directory kept: {}",
                    work.display()
                )
            });
            eprintln!(
                "{ctx}: during the load; recovered {:?}",
                db.recovery_report().unwrap()
            );
            drop(db);
            std::fs::remove_dir_all(work.join("db")).unwrap();
            std::fs::remove_file(work.join("loading")).unwrap();
            during_load += 1;
            continue;
        }
        // Check a copy while the next child recovers the directory itself
        // and goes on: a crashed directory is recovered by the next child
        // (and crashed again), the copy by the parent. One more copy stays
        // as the kill left it, for a failure report.
        let pristine = work.join(format!("crashed-r{}", run - 1));
        let checked = work.join(format!("checked-r{}", run - 1));
        copy_dir(&work.join("db"), &pristine);
        if checkpoint_in_progress(&pristine) {
            mid_checkpoint += 1;
        }
        copy_dir(&work.join("db"), &checked);
        if let Some(h) = checker.take() {
            acked = join(h);
        }
        let work2 = work.clone();
        checker = Some(std::thread::spawn(move || {
            let n = check(&work2, &checked, &pristine, v, run, &ctx);
            std::fs::remove_dir_all(&checked).unwrap();
            std::fs::remove_dir_all(&pristine).unwrap();
            n
        }));
        after_load += 1;
    }
    if let Some(h) = checker.take() {
        acked = join(h);
    }
    eprintln!(
        "{test}: {} kills ({during_load} during the load, {before_running} before the mix ran, \
         {mid_checkpoint} leaving a checkpoint unfinished), {acked} acknowledged NewOrders checked, {:.1} s",
        during_load + after_load,
        t0.elapsed().as_secs_f64()
    );
    assert!(during_load > 0, "{test}: no kill landed during the load");
    assert!(acked > 0, "{test}: no NewOrder was acknowledged");
    std::fs::remove_dir_all(&work).unwrap();
}

/// Background checkpoints every 100 ms: the first completes during the
/// load, later ones are cut by the kill (the scan of a loaded warehouse
/// takes longer than a child lives), so recovery starts from a checkpoint
/// with unfinished ones beside it.
#[test]
fn crash_tpcc_silo() {
    crash_tpcc(
        "crash_tpcc_silo",
        Variant {
            protocol: Protocol::Silo,
            kills: 5,
            checkpoint: Some(Duration::from_millis(100)),
        },
    );
}

/// No checkpoints: recovery replays the whole log, the load's included.
#[test]
fn crash_tpcc_ssn() {
    crash_tpcc(
        "crash_tpcc_ssn",
        Variant {
            protocol: Protocol::Ssn,
            kills: 5,
            checkpoint: None,
        },
    );
}

/// The conformance matrix's share: every other durable protocol in the
/// list (the two above have their own variants) gets kills during the load
/// and during the mix, with checkpoints, and must recover consistent with
/// every acknowledged NewOrder. A newly listed durable protocol is covered
/// by being listed.
#[test]
fn crash_tpcc_every_other_durable_protocol() {
    let test = "crash_tpcc_every_other_durable_protocol";
    // A child runs this function again and meets `crash_tpcc` with the
    // first protocol of the loop; `crash_tpcc` takes the child's protocol
    // from the environment.
    for p in Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| p.caps().durable && !matches!(p, Protocol::Silo | Protocol::Ssn))
        // TPC-C's consistency needs isolation: read committed loses
        // updates (of D_NEXT_O_ID, W_YTD, ...) by design; its commit and
        // log path are Silo's.
        .filter(|p| p.caps().serializable || p.caps().snapshot_reads)
    {
        eprintln!("{test}: {p}");
        crash_tpcc(
            test,
            Variant {
                protocol: p,
                kills: 2,
                checkpoint: Some(Duration::from_millis(100)),
            },
        );
    }
}

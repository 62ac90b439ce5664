//! Crash tests of the deterministic engines (BOHM, 2pl-ordered, lazy, PWV): a child
//! process submits bank transfers as procedures, records each transfer
//! whose outcome it was given (released only once its batch's input is
//! durable) in a side file, and is killed with SIGKILL at a random moment,
//! with or without checkpoints running (under PWV a transfer is three
//! pieces: the debit, then the credit and the record, which read the
//! amount it decided). The parent recovers the directory
//! (the newest checkpoint, then replay of the input log after it) and
//! checks:
//!
//! - every acknowledged transfer is in the recovered state;
//! - the state is exactly the effect of the transfers it holds (each
//!   balance is the initial one minus what its recorded transfers took out
//!   plus what they brought in), so money is conserved;
//! - without checkpoints, the state equals a serial execution of the whole
//!   input log over the initial accounts (deterministic replay).
//!
//! The next child recovers the same directory, so a directory that was
//! recovered and crashed again is tested too. Reproduce a failure with
//! `TESSERA_CRASH_SEED=<seed>` (printed at the start of every case).

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::cc::bohm::{Bohm, BohmConfig, DetProtocol};
use tessera::det::input::read_input_log;
use tessera::det::{serial, Outcome, Procedure, Procedures, SequencerConfig};
use tessera::{Database, KeySet, Options, Request, TableId, Transaction, TxResult};

#[path = "support/crash.rs"]
mod support;
use support::*;

const ACCOUNTS: u64 = 100;
const INITIAL: i64 = 1_000;
const CLIENTS: u32 = 2;
const KILLS: u32 = 4;
const CHILD_LIFETIME: Duration = Duration::from_secs(30);
const TABLES: [&str; 2] = ["accounts", "transfers"];

fn account_key(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn transfer_key(run: u32, client: u32, seq: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..4].copy_from_slice(&run.to_be_bytes());
    k[4..8].copy_from_slice(&client.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

fn bal(v: &[u8]) -> i64 {
    i64::from_le_bytes(v.try_into().unwrap())
}

/// Move up to `want` from account `a` to `b` (no overdraft), recording the
/// transfer under its own key.
#[derive(Clone, Debug, PartialEq)]
struct Transfer {
    key: [u8; 12],
    a: u64,
    b: u64,
    want: i64,
    /// Lazy: the amount the now-phase moved (not logged: the now-phase
    /// computes it again on replay).
    moved: i64,
}

const ACC: TableId = TableId::from_u32(0);
const XFER: TableId = TableId::from_u32(1);

impl Request for Transfer {
    type Output = i64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<i64> {
        let va = bal(tx.get(ACC, &account_key(self.a))?.expect("account"));
        let vb = bal(tx.get(ACC, &account_key(self.b))?.expect("account"));
        let amount = self.want.min(va);
        tx.put(ACC, &account_key(self.a), &(va - amount).to_le_bytes())?;
        tx.put(ACC, &account_key(self.b), &(vb + amount).to_le_bytes())?;
        let mut rec = [0u8; 24];
        rec[..8].copy_from_slice(&self.a.to_le_bytes());
        rec[8..16].copy_from_slice(&self.b.to_le_bytes());
        rec[16..].copy_from_slice(&amount.to_le_bytes());
        assert!(tx.insert(XFER, &self.key, &rec)?, "a transfer key twice");
        Ok(amount)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.write(ACC, &account_key(self.a));
        keys.write(ACC, &account_key(self.b));
        keys.write(XFER, &self.key);
        true
    }
}

impl Procedure for Transfer {
    const ID: tessera::det::ProcId = 0x7101;
    const NAME: &'static str = "transfer";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key);
        out.extend_from_slice(&self.a.to_le_bytes());
        out.extend_from_slice(&self.b.to_le_bytes());
        out.extend_from_slice(&self.want.to_le_bytes());
    }
    fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() != 36 {
            return Err(format!("{} bytes", b.len()));
        }
        let u = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Ok(Transfer {
            key: b[..12].try_into().unwrap(),
            a: u(12),
            b: u(20),
            want: u(28) as i64,
            moved: 0,
        })
    }
    /// Lazy: the now-phase decides the amount (no overdraft) and debits
    /// `a`; the credit to `b` and the transfer's record are left sticky.
    fn now_phase(&mut self, tx: &mut tessera::Txn<'_>) -> TxResult<tessera::det::NowPhase<i64>> {
        let va = bal(tx.get(ACC, &account_key(self.a))?.expect("account"));
        self.moved = self.want.min(va);
        tx.put(ACC, &account_key(self.a), &(va - self.moved).to_le_bytes())?;
        Ok(tessera::det::NowPhase::Ended(self.moved))
    }
    /// PWV: three pieces with data dependencies, on up to three
    /// partitions: the debit of `a` decides the amount (its output), then
    /// the credit to `b` and the transfer's record, which read it.
    fn pieces(&self, plan: &mut tessera::det::PiecePlan) -> bool {
        let debit = plan.piece(false);
        plan.write(debit, ACC, &account_key(self.a));
        let credit = plan.piece(false);
        plan.write(credit, ACC, &account_key(self.b));
        plan.after(credit, debit);
        let record = plan.piece(false);
        plan.write(record, XFER, &self.key);
        plan.after(record, debit);
        true
    }
    fn run_piece(
        &self,
        i: u16,
        tx: &mut tessera::Txn<'_>,
        io: &mut tessera::det::PieceIo<'_>,
    ) -> TxResult<()> {
        if i == 0 {
            let va = bal(tx.get(ACC, &account_key(self.a))?.expect("account"));
            let amount = self.want.min(va);
            tx.put(ACC, &account_key(self.a), &(va - amount).to_le_bytes())?;
            io.output(&amount.to_le_bytes());
            return Ok(());
        }
        let amount = bal(io.input(0).expect("the debit's output"));
        if i == 1 {
            let vb = bal(tx.get(ACC, &account_key(self.b))?.expect("account"));
            tx.put(ACC, &account_key(self.b), &(vb + amount).to_le_bytes())?;
        } else {
            let mut rec = [0u8; 24];
            rec[..8].copy_from_slice(&self.a.to_le_bytes());
            rec[8..16].copy_from_slice(&self.b.to_le_bytes());
            rec[16..].copy_from_slice(&amount.to_le_bytes());
            assert!(tx.insert(XFER, &self.key, &rec)?, "a transfer key twice");
        }
        Ok(())
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<i64> {
        Ok(bal(outputs[0]))
    }
    fn later_phase(&mut self, tx: &mut tessera::Txn<'_>) -> TxResult<()> {
        let vb = bal(tx.get(ACC, &account_key(self.b))?.expect("account"));
        tx.put(ACC, &account_key(self.b), &(vb + self.moved).to_le_bytes())?;
        let mut rec = [0u8; 24];
        rec[..8].copy_from_slice(&self.a.to_le_bytes());
        rec[8..16].copy_from_slice(&self.b.to_le_bytes());
        rec[16..].copy_from_slice(&self.moved.to_le_bytes());
        assert!(tx.insert(XFER, &self.key, &rec)?, "a transfer key twice");
        Ok(())
    }
}

#[derive(Clone, Copy, Debug)]
struct Case {
    protocol: DetProtocol,
    checkpoints: bool,
}

fn cases() -> Vec<(String, Case)> {
    let mut v = Vec::new();
    for protocol in [
        DetProtocol::Bohm,
        DetProtocol::TwoPlOrdered,
        DetProtocol::Lazy,
        DetProtocol::Pwv,
    ] {
        for checkpoints in [false, true] {
            let id = format!(
                "{}-{}",
                protocol.name(),
                if checkpoints { "ckpt" } else { "log" }
            );
            v.push((
                id,
                Case {
                    protocol,
                    checkpoints,
                },
            ));
        }
    }
    v
}

fn engine(dir: &Path, c: Case) -> Bohm {
    Bohm::new(
        &TABLES,
        BohmConfig {
            // Lazy: one stickification thread, or partitioned (two CC
            // threads and a now-phase thread) in the checkpointed case.
            cc_threads: if c.protocol == DetProtocol::Lazy && !c.checkpoints {
                1
            } else {
                2
            },
            exec_threads: 2,
            sequencer: SequencerConfig {
                batch_size: 64,
                batch_time: Duration::from_micros(500),
            },
            protocol: c.protocol,
            read_annotation: true,
            ..Default::default()
        },
    )
    .unwrap()
    .with_input_log(dir, Procedures::new().register::<Transfer>().unwrap())
    .input_segment_bytes(16 << 10)
}

fn ack_file(work: &Path, run: u32, client: u32) -> PathBuf {
    work.join(format!("acks-r{run}-c{client}"))
}

/// The child: recover, then transfer from `CLIENTS` threads (a window of
/// receipts each) until killed; with checkpoints, one every 20 ms.
fn child(c: Case) -> ! {
    let (work, run, seed) = child_setup(CHILD_LIFETIME);
    let mut b = engine(&work.join("db"), c);
    b.start()
        .unwrap_or_else(|e| panic!("child {run}: recovery failed: {e}"));
    std::fs::write(work.join(format!("opened-r{run}")), b"").unwrap();
    let b = &b;
    std::thread::scope(|s| {
        if c.checkpoints {
            s.spawn(move || loop {
                if let Err(e) = b.checkpoint() {
                    // Not a panic of this thread alone: the whole child
                    // stops, and the parent sees it exit by itself.
                    eprintln!("child {run}: checkpoint failed: {e}");
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(20));
            });
        }
        for client in 0..CLIENTS {
            let work = &work;
            s.spawn(move || {
                let mut rng =
                    SmallRng::seed_from_u64(seed ^ (u64::from(run) << 32) ^ u64::from(client));
                let mut acks = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(ack_file(work, run, client))
                    .unwrap();
                let mut window = std::collections::VecDeque::new();
                for seq in 0.. {
                    let a = rng.gen_range(0..ACCOUNTS);
                    let t = Transfer {
                        key: transfer_key(run, client, seq),
                        a,
                        b: (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS,
                        want: rng.gen_range(1..300),
                        moved: 0,
                    };
                    window.push_back((seq, b.submit(t).unwrap()));
                    if window.len() >= 32 {
                        let (seq, r) = window.pop_front().unwrap();
                        match r.wait().unwrap() {
                            Outcome::Committed(_) => {}
                            Outcome::Aborted => panic!("a transfer aborted"),
                        }
                        acks.write_all(format!("{seq}\n").as_bytes()).unwrap();
                        acks.flush().unwrap();
                    }
                }
            });
        }
    });
    unreachable!("clients never end");
}

fn read_acks(work: &Path, runs: u32) -> Vec<[u8; 12]> {
    let mut v = Vec::new();
    for run in 0..runs {
        for client in 0..CLIENTS {
            for l in ack_lines(&ack_file(work, run, client)) {
                v.push(transfer_key(run, client, l.parse().unwrap()));
            }
        }
    }
    v
}

type State = Vec<Vec<(Vec<u8>, Vec<u8>)>>;

/// Recover and check; returns (acknowledged, transfers recovered, the
/// checkpoint recovered from).
fn check(work: &Path, c: Case, runs: u32, ctx: &str) -> (usize, usize, PathBuf) {
    let dir = work.join("db");
    // The whole input log, read before recovery cuts its torn tail (for
    // the serial reference below, which must see what recovery sees).
    let scan_before = read_input_log(&dir).unwrap_or_else(|e| panic!("{ctx}: {e}"));
    let mut b = engine(&dir, c);
    b.start()
        .unwrap_or_else(|e| panic!("{ctx}: recovery failed: {e}"));
    b.shutdown().unwrap();
    let from = b.recovered_from().unwrap().to_path_buf();
    let state: State = [ACC, XFER].iter().map(|&t| b.dump(t).unwrap()).collect();
    drop(b);
    let xfers: HashSet<Vec<u8>> = state[1].iter().map(|(k, _)| k.clone()).collect();
    let acked = read_acks(work, runs);
    for k in &acked {
        assert!(
            xfers.contains(&k[..]),
            "{ctx}: acknowledged transfer {k:02x?} lost; directory kept: {}",
            work.display()
        );
    }
    // Balances are exactly the effect of the recorded transfers.
    let mut want: BTreeMap<u64, i64> = (0..ACCOUNTS).map(|i| (i, INITIAL)).collect();
    for (_, v) in &state[1] {
        let u = |i: usize| u64::from_le_bytes(v[i..i + 8].try_into().unwrap());
        let amount = u(16) as i64;
        *want.get_mut(&u(0)).unwrap() -= amount;
        *want.get_mut(&u(8)).unwrap() += amount;
    }
    let got: BTreeMap<u64, i64> = state[0]
        .iter()
        .map(|(k, v)| (u64::from_be_bytes(k[..].try_into().unwrap()), bal(v)))
        .collect();
    assert_eq!(
        got, want,
        "{ctx}: balances are not the recorded transfers' effect"
    );
    if !c.checkpoints {
        // Nothing was ever covered by a checkpoint: the log holds the whole
        // history, and its serial execution is the recovered state.
        let db = Database::open(Options::in_memory()).unwrap();
        for n in TABLES {
            db.create_table(n).unwrap();
        }
        let mut w = db.worker().unwrap();
        w.run(|tx| {
            for i in 0..ACCOUNTS {
                tx.put(ACC, &account_key(i), &INITIAL.to_le_bytes())?;
            }
            Ok(())
        })
        .unwrap();
        let procs = Procedures::new().register::<Transfer>().unwrap();
        serial::replay(&mut w, &scan_before, &procs, &Default::default()).unwrap();
        let serial: State = [ACC, XFER]
            .iter()
            .map(|&t| {
                w.run(|tx| {
                    tx.scan_collect(
                        t,
                        std::ops::Bound::Unbounded,
                        std::ops::Bound::Unbounded,
                        tessera::ScanOptions::new(),
                    )
                })
                .unwrap()
            })
            .collect();
        assert!(
            serial == state,
            "{ctx}: the recovered state differs from a serial replay"
        );
    }
    (acked.len(), xfers.len(), from)
}

fn crash_case(test: &str, id: &str, c: Case, seed: u64) {
    eprintln!("{id}: seed {seed} (rerun with {SEED_ENV}={seed}), {c:?}, {KILLS} kills");
    let mut rng = SmallRng::seed_from_u64(seed);
    let work = work_dir(&format!("{test}-{id}"), seed);
    // The accounts, checkpointed by the first start.
    {
        let mut b = engine(&work.join("db"), c);
        for i in 0..ACCOUNTS {
            b.load(ACC, &account_key(i), &INITIAL.to_le_bytes())
                .unwrap();
        }
        b.start().unwrap();
        b.shutdown().unwrap();
    }
    let t0 = Instant::now();
    let (mut acked, mut present) = (0, 0);
    let mut from = HashSet::new();
    for run in 0..KILLS {
        // The last kill always lands while the child works.
        let kill_after = if run + 1 == KILLS {
            Duration::from_millis(rng.gen_range(300..=600))
        } else {
            kill_delay(&mut rng)
        };
        let ctx = format!(
            "{id}: seed {seed}, child {run}, killed after {} ms",
            kill_after.as_millis()
        );
        run_and_kill(test, id, &work, run, seed, kill_after, &ctx);
        let log = std::fs::read_to_string(work.join(format!("child-r{run}.log"))).unwrap();
        assert!(
            !log.contains("panicked"),
            "{ctx}: the child panicked:\n{log}"
        );
        let f;
        (acked, present, f) = check(&work, c, run + 1, &ctx);
        from.insert(f);
    }
    eprintln!(
        "{id}: {KILLS} kills, {acked} acknowledged transfers checked, {present} recovered, {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(acked > 0, "{id}: no child acknowledged a transfer");
    if c.checkpoints {
        assert!(from.len() > 1, "{id}: recovered only from {from:?}");
        // The first segment (empty: the setup logged nothing) and the
        // ones after it were covered by checkpoints and deleted.
        assert!(
            !work.join("db").join("log-000-00000001.tlog").exists(),
            "{id}: covered input segments were not deleted"
        );
    }
    std::fs::remove_dir_all(&work).unwrap();
}

/// BOHM and 2pl-ordered, each with and without checkpoints.
#[test]
fn crash_det() {
    let test = "crash_det";
    if let Ok(id) = std::env::var(CHILD_ENV) {
        let c = cases()
            .into_iter()
            .find(|(i, _)| *i == id)
            .expect("a known case")
            .1;
        child(c);
    }
    let seed = seed();
    for (id, c) in cases() {
        crash_case(test, &id, c, seed);
    }
}

//! BOHM against the serial executor: with one submitting thread the
//! timestamps are the submission order, and every outcome and the final
//! state must equal a serial execution in that order (BOHM is
//! deterministic and serializable in timestamp order).

use std::ops::Bound;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::db::{Database, Options};
use crate::det::input::read_input_log;
use crate::det::{serial, ProcId};
use crate::log::segment;
use crate::request::Request;
use crate::txn::Transaction;

fn k(i: u64) -> [u8; 8] {
    i.to_be_bytes()
}

fn val(b: Option<&[u8]>) -> u64 {
    b.map_or(0, |v| u64::from_le_bytes(v[..8].try_into().unwrap()))
}

/// The test workload: read-modify-writes of counters (with a logic abort
/// above a cap), inserts, deletes, scans, and an undeclared write.
#[derive(Clone, Debug)]
enum Op {
    /// Add `add` to each key; abort if any would exceed `cap`; output the
    /// sum of the old values.
    Rmw { keys: Vec<u64>, add: u64, cap: u64 },
    /// Insert `key` (output 1 if it was absent) or delete it (1 if present).
    InsDel { key: u64, insert: bool },
    /// Sum and count of `[lo, hi]`, at most `limit` rows (0: all), from
    /// the top when `rev`: output sum * 1000 + count.
    Scan {
        lo: u64,
        hi: u64,
        limit: u64,
        rev: bool,
    },
    /// Writes a key it does not declare.
    Rogue { key: u64 },
    /// Read exact keys (declared reads: the read-set annotation); output
    /// the sum of their values.
    Read { keys: Vec<u64> },
    /// TPC-C NewOrder's shape: take the next id from counter `d`, insert
    /// an order under it in `d`'s order range, declared as a write range
    /// (its key is known only at execution); output id * 2 + inserted.
    Order { d: u64 },
    /// Read each key whole and write it back with its counter (the first
    /// 8 bytes) plus one and a tail whose length changes with the counter;
    /// output a hash of every byte read.
    Grow { keys: Vec<u64> },
    /// Put `val` into each key without reading it, declared as blind
    /// writes; `read` reads the first key first (a body that breaks its
    /// declaration). Lazy: a now-phase that ends at once when there are
    /// several keys (deferred), eager otherwise.
    Set {
        keys: Vec<u64>,
        val: u64,
        read: bool,
    },
    /// Put the value of `from` (a declared read) into `to` (a declared
    /// blind write). Lazy: deferred whole (a later phase with a declared
    /// read).
    Copy { from: u64, to: u64 },
    /// `Order`'s body with output 0. Lazy: deferred whole, so its later
    /// phase holds a sticky (the counter) and inserts into a write range.
    Log { d: u64 },
}

/// Where order ranges start (above every other key of the tests).
const ORDER_BASE: u64 = 1 << 40;

fn order_range(d: u64) -> (u64, u64) {
    let lo = ORDER_BASE + d * 100_000;
    (lo, lo + 99_999)
}

#[derive(Clone, Debug)]
struct P {
    t: TableId,
    op: Op,
}

impl Request for P {
    type Output = u64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
        let t = self.t;
        match &self.op {
            Op::Rmw { keys, add, cap } => {
                let mut sum = 0;
                for &key in keys {
                    let old = val(tx.get(t, &k(key))?);
                    sum += old;
                    if old + add > *cap {
                        return Err(TxError::Error(Error::UserAbort));
                    }
                    tx.put(t, &k(key), &(old + add).to_le_bytes())?;
                }
                Ok(sum)
            }
            Op::InsDel { key, insert } => {
                let done = if *insert {
                    tx.insert(t, &k(*key), &7u64.to_le_bytes())?
                } else {
                    tx.delete(t, &k(*key))?
                };
                Ok(u64::from(done))
            }
            Op::Scan { lo, hi, limit, rev } => {
                let (mut sum, mut n) = (0, 0);
                tx.scan(
                    t,
                    Bound::Included(&k(*lo)[..]),
                    Bound::Included(&k(*hi)[..]),
                    ScanOptions {
                        limit: (*limit > 0).then_some(*limit as usize),
                        reverse: *rev,
                        ..ScanOptions::default()
                    },
                    |_, v| {
                        sum += val(Some(v));
                        n += 1;
                        true
                    },
                )?;
                Ok(sum * 1000 + n)
            }
            Op::Rogue { key } => {
                tx.put(t, &k(*key + 1), b"12345678")?;
                Ok(0)
            }
            Op::Read { keys } => {
                let mut sum = 0;
                for &key in keys {
                    sum += val(tx.get(t, &k(key))?);
                }
                Ok(sum)
            }
            Op::Log { d } => {
                let ck = k(900 + d);
                let id = val(tx.get(t, &ck)?);
                tx.put(t, &ck, &(id + 1).to_le_bytes())?;
                tx.insert(t, &k(order_range(*d).0 + id), &(id + 5).to_le_bytes())?;
                Ok(0)
            }
            Op::Order { d } => {
                let ck = k(900 + d);
                let id = val(tx.get(t, &ck)?);
                tx.put(t, &ck, &(id + 1).to_le_bytes())?;
                let ok = tx.insert(t, &k(order_range(*d).0 + id), &(id + 5).to_le_bytes())?;
                Ok(id * 2 + u64::from(ok))
            }
            Op::Copy { from, to } => {
                let v = val(tx.get(t, &k(*from))?);
                tx.put(t, &k(*to), &v.to_le_bytes())?;
                Ok(0)
            }
            Op::Set { keys, val, read } => {
                if *read {
                    tx.get(t, &k(keys[0]))?;
                }
                // `u64::MAX`: declared, but nothing written.
                for &key in keys.iter().filter(|_| *val != u64::MAX) {
                    tx.put(t, &k(key), &val.to_le_bytes())?;
                }
                Ok(0)
            }
            Op::Grow { keys } => {
                let mut h = 0u64;
                for &key in keys {
                    let old = tx.get(t, &k(key))?;
                    for &b in old.unwrap_or_default() {
                        h = h.rotate_left(5) ^ u64::from(b) ^ 0x9e37;
                    }
                    let c = val(old) + 1;
                    let mut new = c.to_le_bytes().to_vec();
                    new.resize(8 + (c % 7) as usize * 5, c as u8 ^ key as u8);
                    tx.put(t, &k(key), &new)?;
                }
                Ok(h)
            }
        }
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        match &self.op {
            Op::Rmw { keys: ks, .. } => ks.iter().for_each(|&x| keys.write(self.t, &k(x))),
            Op::InsDel { key, .. } | Op::Rogue { key } => keys.write(self.t, &k(*key)),
            Op::Scan { lo, hi, .. } => keys.read_range(self.t, &k(*lo), &k(*hi)),
            Op::Read { keys: ks } => ks.iter().for_each(|&x| keys.read(self.t, &k(x))),
            Op::Grow { keys: ks } => ks.iter().for_each(|&x| keys.write(self.t, &k(x))),
            Op::Set { keys: ks, .. } => ks.iter().for_each(|&x| keys.blind_write(self.t, &k(x))),
            Op::Copy { from, to } => {
                keys.read(self.t, &k(*from));
                keys.blind_write(self.t, &k(*to));
            }
            Op::Order { d } | Op::Log { d } => {
                keys.write(self.t, &k(900 + d));
                let (lo, hi) = order_range(*d);
                keys.write_range(self.t, &k(lo), &k(hi));
            }
        }
        true
    }
}

impl Procedure for P {
    const ID: ProcId = 1;
    const NAME: &'static str = "bohm-test";
    /// Lazy: a read-modify-write decides in its now-phase (it reads every
    /// key and aborts above the cap) and writes its first key there (the
    /// thesis's hot read-modify-write); the rest of its keys are left
    /// sticky for the later phase. Every other request runs eagerly
    /// (reads, scans, inserts: external reads and uniqueness checks).
    fn now_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<crate::det::NowPhase<u64>> {
        if let Op::Copy { .. } | Op::Log { .. } = &self.op {
            return Ok(crate::det::NowPhase::Ended(0));
        }
        if let Op::Set { keys, .. } = &self.op {
            return Ok(if keys.len() > 1 {
                crate::det::NowPhase::Ended(0)
            } else {
                crate::det::NowPhase::Eager
            });
        }
        let Op::Rmw { keys, add, cap } = &self.op else {
            return Ok(crate::det::NowPhase::Eager);
        };
        let t = self.t;
        let mut sum = 0;
        for &key in keys {
            let old = val(tx.get(t, &k(key))?);
            sum += old;
            if old + add > *cap {
                return Err(TxError::Error(Error::UserAbort));
            }
        }
        let first = keys[0];
        let old = val(tx.get(t, &k(first))?);
        tx.put(t, &k(first), &(old + add).to_le_bytes())?;
        Ok(crate::det::NowPhase::Ended(sum))
    }
    fn later_phase(&mut self, tx: &mut Txn<'_>) -> TxResult<()> {
        if let Op::Set { .. } | Op::Copy { .. } | Op::Log { .. } = &self.op {
            return Request::run(self, tx).map(drop);
        }
        let Op::Rmw { keys, add, .. } = &self.op else {
            unreachable!("only read-modify-writes end their now-phase");
        };
        let t = self.t;
        // Its own now-phase's write is visible to it.
        tx.get(t, &k(keys[0]))?;
        for &key in &keys[1..] {
            let old = val(tx.get(t, &k(key))?);
            tx.put(t, &k(key), &(old + add).to_le_bytes())?;
        }
        Ok(())
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let mut w = |x: u64| out.extend_from_slice(&x.to_le_bytes());
        w(u64::from(self.t.as_u32()));
        match &self.op {
            Op::Rmw { keys, add, cap } => {
                w(0);
                w(*add);
                w(*cap);
                w(keys.len() as u64);
                keys.iter().for_each(|&x| w(x));
            }
            Op::InsDel { key, insert } => {
                w(1);
                w(*key);
                w(u64::from(*insert));
            }
            Op::Scan { lo, hi, limit, rev } => {
                w(2);
                w(*lo);
                w(*hi);
                w(*limit);
                w(u64::from(*rev));
            }
            Op::Rogue { key } => {
                w(3);
                w(*key);
            }
            Op::Read { keys } => {
                w(4);
                w(keys.len() as u64);
                keys.iter().for_each(|&x| w(x));
            }
            Op::Order { d } => {
                w(5);
                w(*d);
            }
            Op::Log { d } => {
                w(9);
                w(*d);
            }
            Op::Grow { keys } => {
                w(6);
                w(keys.len() as u64);
                keys.iter().for_each(|&x| w(x));
            }
            Op::Copy { from, to } => {
                w(8);
                w(*from);
                w(*to);
            }
            Op::Set { keys, val, read } => {
                w(7);
                w(*val);
                w(u64::from(*read));
                w(keys.len() as u64);
                keys.iter().for_each(|&x| w(x));
            }
        }
    }
    fn decode(b: &[u8]) -> Result<Self, String> {
        let mut it = b
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()));
        let mut next = || it.next().ok_or_else(|| "cut short".to_string());
        let t = TableId::from_u32(next()? as u32);
        let op = match next()? {
            0 => {
                let (add, cap, n) = (next()?, next()?, next()?);
                let keys = (0..n).map(|_| next()).collect::<Result<_, _>>()?;
                Op::Rmw { keys, add, cap }
            }
            1 => Op::InsDel {
                key: next()?,
                insert: next()? == 1,
            },
            2 => Op::Scan {
                lo: next()?,
                hi: next()?,
                limit: next()?,
                rev: next()? == 1,
            },
            3 => Op::Rogue { key: next()? },
            4 => {
                let n = next()?;
                Op::Read {
                    keys: (0..n).map(|_| next()).collect::<Result<_, _>>()?,
                }
            }
            5 => Op::Order { d: next()? },
            9 => Op::Log { d: next()? },
            6 => {
                let n = next()?;
                Op::Grow {
                    keys: (0..n).map(|_| next()).collect::<Result<_, _>>()?,
                }
            }
            8 => Op::Copy {
                from: next()?,
                to: next()?,
            },
            7 => {
                let (val, read, n) = (next()?, next()? == 1, next()?);
                Op::Set {
                    keys: (0..n).map(|_| next()).collect::<Result<_, _>>()?,
                    val,
                    read,
                }
            }
            x => return Err(format!("op {x}")),
        };
        Ok(P { t, op })
    }
}

fn gen(rng: &mut SmallRng, t: TableId, keys: u64) -> P {
    let op = match rng.gen_range(0..100) {
        0..=69 => {
            let n = rng.gen_range(1..=4);
            let mut ks: Vec<u64> = (0..n).map(|_| rng.gen_range(0..keys)).collect();
            ks.sort_unstable();
            ks.dedup();
            Op::Rmw {
                keys: ks,
                add: rng.gen_range(1..5),
                cap: 400,
            }
        }
        70..=84 => Op::InsDel {
            key: rng.gen_range(0..keys * 2),
            insert: rng.gen_bool(0.6),
        },
        85..=92 => {
            let lo = rng.gen_range(0..keys * 2);
            Op::Scan {
                lo,
                hi: lo + rng.gen_range(0..10),
                limit: rng.gen_range(0..4),
                rev: rng.gen_bool(0.3),
            }
        }
        93..=98 => Op::Read {
            keys: (0..rng.gen_range(1..=5))
                .map(|_| rng.gen_range(0..keys * 2))
                .collect(),
        },
        _ => Op::Rogue {
            key: rng.gen_range(0..keys),
        },
    };
    P { t, op }
}

/// Run `reqs` under BOHM (one submitter) and serially; compare outcomes
/// and final states.
/// Every row of `t` on the serial executor's worker.
fn rows(w: &mut crate::db::Worker, t: TableId) -> Rows {
    w.run(|tx| {
        tx.scan_collect(
            t,
            Bound::Unbounded,
            Bound::Unbounded,
            ScanOptions::default(),
        )
    })
    .unwrap()
}

fn compare(cfg: BohmConfig, reqs: &[P], preload: u64) -> BohmStats {
    compare_in_waves(cfg, reqs, preload, 1)
}

/// `compare`, submitting `reqs` in `waves` parts, each once the one before
/// it has finished and the epoch has moved on (so that GC's versions come
/// back for reuse); the stages' counters.
fn compare_in_waves(cfg: BohmConfig, reqs: &[P], preload: u64, waves: usize) -> BohmStats {
    let mut b = Bohm::new(&["t"], cfg).unwrap();
    let t = b.table("t").unwrap();
    let db = Database::open(Options::in_memory()).unwrap();
    let st = db.create_table("t").unwrap();
    assert_eq!(st, t);
    let mut w = db.worker().unwrap();
    for i in 0..preload {
        b.load(t, &k(i), &10u64.to_le_bytes()).unwrap();
        w.run(|tx| tx.put(t, &k(i), &10u64.to_le_bytes())).unwrap();
    }
    b.start().unwrap();
    let mut got = Vec::new();
    for wave in reqs.chunks(reqs.len().div_ceil(waves).max(1)) {
        let receipts: Vec<_> = wave.iter().map(|r| b.submit(r.clone()).unwrap()).collect();
        got.extend(receipts.into_iter().map(|r| r.wait()));
        if waves > 1 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let stats = b.shutdown().unwrap();
    for (i, r) in reqs.iter().enumerate() {
        if let Op::Rogue { .. } = r.op {
            // BOHM refuses the undeclared write (the serial executor on an
            // interactive worker does not check declarations).
            assert!(
                matches!(&got[i], Err(Error::InvalidArgument(m)) if m.contains("did not declare")),
                "request {i}: {:?}",
                got[i]
            );
            continue;
        }
        let mut p = r.clone();
        let want = serial::run_one(&mut w, &mut p).map(|o| match o {
            Outcome::Committed(b) => Outcome::Committed(*b.downcast::<u64>().unwrap()),
            Outcome::Aborted => Outcome::Aborted,
        });
        match (&got[i], &want) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "request {i}: {r:?}"),
            (Err(a), Err(b)) => {
                assert!(matches!(a, Error::InvalidArgument(_)), "request {i}: {a}");
                assert!(matches!(b, Error::InvalidArgument(_)), "request {i}: {b}");
            }
            (a, b) => panic!("request {i} {r:?}: bohm {a:?}, serial {b:?}"),
        }
    }
    let serial_state = rows(&mut w, t);
    assert_eq!(b.dump(t).unwrap(), serial_state);
    assert!(stats.batches > 0 && stats.placeholders > 0, "{stats:?}");
    stats
}

fn reqs(seed: u64, n: usize, keys: u64) -> Vec<P> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| gen(&mut rng, TableId::from_u32(0), keys))
        .collect()
}

#[test]
fn equals_serial_execution_one_thread_each() {
    for protocol in [DetProtocol::Bohm, DetProtocol::TwoPlOrdered] {
        let cfg = BohmConfig {
            cc_threads: 1,
            exec_threads: 1,
            sequencer: SequencerConfig {
                batch_size: 50,
                batch_time: Duration::from_millis(1),
            },
            protocol,
            read_annotation: true,
            ..Default::default()
        };
        compare(cfg, &reqs(1, 2_000, 20), 10);
    }
}

/// 2pl-ordered on hot keys, many threads: its locks are granted in
/// timestamp order, so outcomes and state equal the serial execution's;
/// and requests whose keys come in every order (the locks are taken in
/// lexicographic order) never deadlock.
#[test]
fn ordered_2pl_equals_serial_execution_with_several_threads() {
    for (seed, m, n, keys) in [(21, 2, 2, 4), (22, 3, 4, 30), (23, 1, 5, 6)] {
        let cfg = BohmConfig {
            cc_threads: m,
            exec_threads: n,
            sequencer: SequencerConfig {
                batch_size: 64,
                batch_time: Duration::from_millis(1),
            },
            protocol: DetProtocol::TwoPlOrdered,
            read_annotation: true,
            ..Default::default()
        };
        let mut rs = reqs(seed, 3_000, keys);
        // Unsorted key lists: the body's order is not the lock order.
        for r in &mut rs {
            if let Op::Rmw { keys, .. } = &mut r.op {
                keys.reverse();
            }
        }
        compare(cfg, &rs, keys / 2);
    }
}

#[test]
fn equals_serial_execution_with_several_cc_and_exec_threads() {
    several_threads(&[(2, 2, 2, 10), (3, 3, 4, 50), (4, 4, 3, 5)], true);
}

/// Without the read-set annotation, declared reads look their keys up and
/// walk the chain from the newest version (the CC stage handles writes
/// only): the same outcomes and state.
#[test]
fn equals_serial_execution_without_read_annotation() {
    several_threads(&[(12, 1, 1, 10), (13, 2, 3, 8), (14, 3, 2, 40)], false);
}

/// `compare` for each (seed, CC threads, execution threads, keys).
fn several_threads(cases: &[(u64, usize, usize, u64)], read_annotation: bool) {
    for &(seed, m, n, keys) in cases {
        let cfg = BohmConfig {
            cc_threads: m,
            exec_threads: n,
            sequencer: SequencerConfig {
                batch_size: 100,
                batch_time: Duration::from_millis(1),
            },
            read_annotation,
            ..Default::default()
        };
        compare(cfg, &reqs(seed, 3_000, keys), keys / 2);
    }
}

/// Versions GC collected come back as placeholders with their value
/// buffers (`Recycler`): a value of the buffer's length is copied into it,
/// one of another length replaces it. Values whose lengths change with
/// every write, read whole by later writers and readers, equal the serial
/// execution's, outcome by outcome and in the final state.
#[test]
fn reused_versions_keep_values_of_every_length() {
    let t = TableId::from_u32(0);
    let mut rng = SmallRng::seed_from_u64(9);
    let mut keys = |n: usize| {
        let mut ks: Vec<u64> = (0..n).map(|_| rng.gen_range(0..16)).collect();
        ks.sort_unstable();
        ks.dedup();
        ks
    };
    let reqs: Vec<P> = (0..4_000)
        .map(|i| P {
            t,
            op: if i % 4 == 3 {
                Op::Read { keys: keys(3) }
            } else {
                Op::Grow { keys: keys(3) }
            },
        })
        .collect();
    for (m, n) in [(1, 1), (2, 3)] {
        let cfg = BohmConfig {
            cc_threads: m,
            exec_threads: n,
            sequencer: SequencerConfig {
                batch_size: 40,
                batch_time: Duration::from_millis(1),
            },
            ..Default::default()
        };
        let stats = compare_in_waves(cfg, &reqs, 16, 20);
        assert!(stats.reused > 0, "{stats:?}");
    }
}

#[test]
fn hot_key_chains_recurse_and_gc_collects() {
    // Every request updates key 0: long chains within a batch, producers
    // run recursively by readers, superseded versions collected.
    let t = TableId::from_u32(0);
    let reqs: Vec<P> = (0..5_000)
        .map(|i| P {
            t,
            op: Op::Rmw {
                keys: vec![0, 1 + i % 3],
                add: 1,
                cap: u64::MAX,
            },
        })
        .collect();
    let cfg = BohmConfig {
        cc_threads: 2,
        exec_threads: 3,
        sequencer: SequencerConfig {
            batch_size: 500,
            batch_time: Duration::from_millis(1),
        },
        ..Default::default()
    };
    let mut b = Bohm::new(&["t"], cfg).unwrap();
    b.start().unwrap();
    let rs: Vec<_> = reqs.iter().map(|r| b.submit(r.clone()).unwrap()).collect();
    // Outputs: the old value of key 0 is the request's position, so the
    // sum of old values is position + old of the other key.
    for (i, r) in rs.into_iter().enumerate() {
        let Outcome::Committed(sum) = r.wait().unwrap() else {
            panic!("aborted")
        };
        assert!(sum >= i as u64, "request {i}: {sum}");
    }
    // Idle CC threads collect what the executors finished.
    let mut stats = b.stats();
    for _ in 0..500 {
        if stats.collected > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
        stats = b.stats();
    }
    assert!(stats.collected > 0, "{stats:?}");
    b.shutdown().unwrap();
    let st = b.dump(t).unwrap();
    assert_eq!(val(Some(&st[0].1)), 5_000);
}

/// Determinism and durability of the input log: a run's batches replayed
/// over the same load by a new engine reach the same state; a replay that
/// continues the log and is replayed again reaches the state after both
/// runs; a torn tail (never acknowledged) is cut, and what remains replays
/// to the serial executor's state.
#[test]
fn the_input_log_replays_to_the_same_state() {
    input_log_replays(DetProtocol::Bohm);
}

#[test]
fn ordered_2pl_input_log_replays_to_the_same_state() {
    input_log_replays(DetProtocol::TwoPlOrdered);
}

fn input_log_replays(protocol: DetProtocol) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BohmConfig {
        cc_threads: if protocol == DetProtocol::Lazy { 1 } else { 2 },
        exec_threads: 2,
        sequencer: SequencerConfig {
            batch_size: 100,
            batch_time: Duration::from_millis(1),
        },
        protocol,
        read_annotation: true,
        ..Default::default()
    };
    let procs = || crate::det::Procedures::new().register::<P>().unwrap();
    let preload = 10u64;
    // The first start checkpoints the load; later ones recover from it.
    let engine = || {
        let b = Bohm::new(&["t"], cfg)
            .unwrap()
            .with_input_log(dir.path(), procs());
        if crate::det::checkpoint::read_latest(dir.path())
            .unwrap()
            .is_none()
        {
            for i in 0..preload {
                b.load(TableId::from_u32(0), &k(i), &10u64.to_le_bytes())
                    .unwrap();
            }
        }
        b
    };
    let t = TableId::from_u32(0);
    let run = |reqs: &[P]| {
        let mut b = engine();
        b.start().unwrap();
        let replayed = b.replayed();
        let rs: Vec<_> = reqs.iter().map(|r| b.submit(r.clone()).unwrap()).collect();
        for r in rs {
            let _ = r.wait();
        }
        b.shutdown().unwrap();
        (replayed, b.dump(t).unwrap())
    };
    let first = reqs(11, 1_500, 20);
    let (r0, after_first) = run(&first);
    assert_eq!(r0.batches, 0);
    // Replayed alone: the same state.
    let (r1, replayed) = run(&[]);
    assert!(
        r1.batches > 0 && r1.committed > 0 && !r1.cut_torn_tail,
        "{r1:?}"
    );
    assert_eq!(r1.committed + r1.not_committed, 1_500);
    assert_eq!(replayed, after_first);
    // Continue the log, then replay everything.
    let second = reqs(12, 700, 20);
    let (_, after_second) = run(&second);
    let (r3, again) = run(&[]);
    assert_eq!(r3.committed + r3.not_committed, 2_200);
    assert_eq!(again, after_second);
    // Tear the last block: replay cuts it and gives the state of what is
    // left, as the serial executor computes it.
    let segs = segment::list_segments(dir.path()).unwrap();
    let (_, last) = segs[&0]
        .iter()
        .rev()
        .find(|(_, p)| std::fs::metadata(p).unwrap().len() > 0)
        .unwrap()
        .clone();
    let len = std::fs::metadata(&last).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&last).unwrap();
    f.set_len(len - 5).unwrap();
    drop(f);
    let scan = read_input_log(dir.path()).unwrap();
    assert!(scan.torn.is_some());
    let db = Database::open(Options::in_memory()).unwrap();
    let st = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    for i in 0..preload {
        w.run(|tx| tx.put(st, &k(i), &10u64.to_le_bytes())).unwrap();
    }
    // The serial reference skips the undeclared writes BOHM refuses.
    for b in &scan.batches {
        for (_, args) in &b.entries {
            let mut p = P::decode(args).unwrap();
            let refused = matches!(p.op, Op::Rogue { .. });
            if !refused {
                let _ = serial::run_one(&mut w, &mut p);
            }
        }
    }
    let want = w
        .run(|tx| {
            tx.scan_collect(
                st,
                Bound::Unbounded,
                Bound::Unbounded,
                ScanOptions::default(),
            )
        })
        .unwrap();
    let (r4, torn) = run(&[]);
    assert!(r4.cut_torn_tail, "{r4:?}");
    assert!(r4.committed + r4.not_committed < 2_200);
    assert_eq!(torn, want);
}

/// Checkpoints taken while requests run (a snapshot at a batch boundary
/// under BOHM; a drained, paused feed under 2pl-ordered): a restart loads
/// the newest one and replays only the batches after it, to the state the
/// run ended in; covered input segments are deleted; a start that loads
/// rows into a directory with a checkpoint is refused.
fn checkpoints_recover(protocol: DetProtocol) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BohmConfig {
        cc_threads: if protocol == DetProtocol::Lazy { 1 } else { 2 },
        exec_threads: 2,
        sequencer: SequencerConfig {
            batch_size: 50,
            batch_time: Duration::from_millis(1),
        },
        protocol,
        read_annotation: true,
        ..Default::default()
    };
    let procs = || crate::det::Procedures::new().register::<P>().unwrap();
    let t = TableId::from_u32(0);
    let engine = || {
        Bohm::new(&["t"], cfg)
            .unwrap()
            .with_input_log(dir.path(), procs())
            .input_segment_bytes(16 << 10)
    };
    let mut b = engine();
    for i in 0..20 {
        b.load(t, &k(i), &10u64.to_le_bytes()).unwrap();
    }
    b.start().unwrap();
    assert_eq!(b.checkpoint().unwrap(), None, "nothing ran yet");
    let rs = reqs(31, 6_000, 40);
    let mut infos = Vec::new();
    std::thread::scope(|s| {
        let b = &b;
        let h = s.spawn(move || {
            let receipts: Vec<_> = rs.iter().map(|r| b.submit(r.clone()).unwrap()).collect();
            for r in receipts {
                let _ = r.wait();
            }
        });
        // A second checkpointer at the same time: checkpoints take turns.
        let h2 = s.spawn(move || {
            let mut mine = Vec::new();
            while !h.is_finished() {
                mine.extend(b.checkpoint().unwrap());
                std::thread::sleep(Duration::from_millis(2));
            }
            mine
        });
        while !h2.is_finished() {
            if let Some(i) = b.checkpoint().unwrap() {
                infos.push(i);
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        infos.extend(h2.join().unwrap());
    });
    b.shutdown().unwrap();
    let want = b.dump(t).unwrap();
    let batches = b.stats().batches;
    drop(b);
    assert!(!infos.is_empty());
    assert!(
        infos.iter().any(|i| i.segments_deleted > 0),
        "no input segment was ever covered: {infos:?}"
    );
    let last = infos.iter().map(|i| i.next_batch).max().unwrap();
    // Recover: the newest checkpoint, then the batches after it.
    let mut b = engine();
    b.start().unwrap();
    let r = b.replayed();
    assert_eq!(
        r.batches,
        batches - last,
        "{r:?}, {batches} batches, checkpoint at {last}"
    );
    assert!(b.recovered_from().is_some());
    b.shutdown().unwrap();
    assert_eq!(b.dump(t).unwrap(), want);
    drop(b);
    // A checkpoint taken at the very end: nothing left to replay.
    let mut b = engine();
    b.start().unwrap();
    let _ = b
        .submit(P {
            t,
            op: Op::Read { keys: vec![1] },
        })
        .unwrap()
        .wait();
    let end = b.checkpoint().unwrap().expect("a batch ran");
    b.shutdown().unwrap();
    drop(b);
    let mut b = engine();
    b.start().unwrap();
    assert_eq!(b.replayed().batches, 0);
    assert_eq!(b.recovered_from(), Some(end.file.as_path()));
    b.shutdown().unwrap();
    assert_eq!(b.dump(t).unwrap(), want);
    drop(b);
    // Loading over a checkpoint is refused.
    let mut b = engine();
    b.load(t, &k(0), b"x").unwrap();
    let e = b.start().unwrap_err();
    assert!(e.to_string().contains("without loading"), "{e}");
}

#[test]
fn bohm_checkpoints_recover() {
    checkpoints_recover(DetProtocol::Bohm);
}

#[test]
fn ordered_2pl_checkpoints_recover() {
    checkpoints_recover(DetProtocol::TwoPlOrdered);
}

/// A BOHM checkpoint reads the versions visible at its batch boundary even
/// when later batches supersede them and GC runs before it reads: GC is
/// held back to the checkpoint's timestamp.
#[test]
fn bohm_checkpoint_holds_gc_back() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BohmConfig {
        sequencer: SequencerConfig {
            batch_size: 1,
            batch_time: Duration::from_micros(100),
        },
        ..Default::default()
    };
    let procs = crate::det::Procedures::new().register::<P>().unwrap();
    let t = TableId::from_u32(0);
    let mut b = Bohm::new(&["t"], cfg)
        .unwrap()
        .with_input_log(dir.path(), procs);
    b.load(t, &k(0), &10u64.to_le_bytes()).unwrap();
    b.start().unwrap();
    let add = |b: &Bohm, n: u64| {
        b.submit(P {
            t,
            op: Op::Rmw {
                keys: vec![0],
                add: n,
                cap: u64::MAX,
            },
        })
        .unwrap()
        .wait()
        .unwrap()
    };
    add(&b, 1); // 11: the checkpoint's state
    let info = b
        .checkpoint_with(|| {
            // Later batches supersede the version the checkpoint reads,
            // and the idle CC thread's GC runs past them.
            let before = b.stats().collected;
            for _ in 0..5 {
                add(&b, 100);
            }
            for _ in 0..500 {
                if b.stats().collected > before + 3 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .unwrap()
        .unwrap();
    b.shutdown().unwrap();
    let ck = crate::det::checkpoint::read_latest(dir.path())
        .unwrap()
        .unwrap();
    assert_eq!(ck.file, info.file);
    assert_eq!(
        ck.rows,
        vec![(0, k(0).to_vec(), 11u64.to_le_bytes().to_vec())]
    );
    assert_eq!(val(Some(&b.dump(t).unwrap()[0].1)), 511);
}

/// Range inserts (TPC-C NewOrder's shape: an id from a counter, a row
/// under it in a declared write range), with scans of those ranges and the
/// usual mix around them: every outcome and the final state equal the
/// serial execution's, so a scan sees exactly the inserts of older
/// transactions (no phantom) and an insert lands below later placeholders.
#[test]
fn bohm_range_inserts_equal_serial_execution() {
    range_inserts_equal_serial_execution(DetProtocol::Bohm);
}

/// The same under 2pl-ordered, whose range locks are units (see
/// `UnitReg`): an order's insert and an exact write of a key under an
/// order range lock the range's unit exclusively, a scan and an exact
/// read shared.
#[test]
fn ordered_2pl_range_inserts_equal_serial_execution() {
    range_inserts_equal_serial_execution(DetProtocol::TwoPlOrdered);
}

fn range_inserts_equal_serial_execution(protocol: DetProtocol) {
    for (seed, m, n) in [(41, 1, 1), (42, 2, 3), (43, 3, 2)] {
        let mut rng = SmallRng::seed_from_u64(seed);
        let t = TableId::from_u32(0);
        let rs: Vec<P> = (0..3_000)
            .map(|_| match rng.gen_range(0..10) {
                // An exact write of a key an older order may insert: its
                // placeholder can be in the chain before the insert lands.
                6 => P {
                    t,
                    op: Op::Rmw {
                        keys: vec![order_range(rng.gen_range(0..3)).0 + rng.gen_range(0..30)],
                        add: 1,
                        cap: u64::MAX,
                    },
                },
                0..=3 => P {
                    t,
                    op: Op::Order {
                        d: rng.gen_range(0..3),
                    },
                },
                4..=5 => {
                    let (lo, _) = order_range(rng.gen_range(0..3));
                    // Long enough to take several of a BOHM scan's chunks
                    // (`SCAN_CHUNK`), with and without a limit, both ways.
                    let lo = lo + rng.gen_range(0..300);
                    P {
                        t,
                        op: Op::Scan {
                            lo,
                            hi: lo + rng.gen_range(0..400),
                            limit: [0, 1, 130, 300][rng.gen_range(0..4)],
                            rev: rng.gen_bool(0.5),
                        },
                    }
                }
                _ => gen(&mut rng, t, 20),
            })
            .collect();
        let cfg = BohmConfig {
            // Lazy: one stickification thread, or partitioned among m.
            cc_threads: m,
            exec_threads: n,
            sequencer: SequencerConfig {
                batch_size: 80,
                batch_time: Duration::from_millis(1),
            },
            protocol,
            read_annotation: true,
            ..Default::default()
        };
        compare(cfg, &rs, 10);
    }
}

/// The CC maps' hash must spread keys that share a long prefix and differ
/// only in their last bytes (TPC-C's composite keys: table, warehouse,
/// district, then an order number): FxHash's bare multiply left their low
/// bits, the bucket index, all equal.
#[test]
fn cc_map_hash_spreads_keys_with_a_common_prefix() {
    use std::hash::{BuildHasher, Hash};
    let build = KeyHash::default();
    let mut words = std::collections::HashSet::new();
    let mut long = std::collections::HashSet::new();
    for i in 0u64..1024 {
        // Six constant bytes, then the varying two (big-endian).
        let key = (0x0102_0304_0506_0000u64 | i).to_be_bytes();
        let w = u64::from_le_bytes(key);
        let mut h = build.build_hasher();
        w.hash(&mut h);
        words.insert(std::hash::Hasher::finish(&h) & 1023);
        let mut key16 = [7u8; 16];
        key16[14..].copy_from_slice(&(i as u16).to_be_bytes());
        long.insert(build.hash_one(&key16[..]) & 1023);
    }
    assert!(words.len() > 512, "{} buckets of 1024", words.len());
    assert!(long.len() > 512, "{} buckets of 1024", long.len());
}

/// `RangeMap::overlapping` finds exactly the registered ranges that a
/// brute-force comparison finds, for random (nested, overlapping,
/// unbounded, repeated) ranges and random query bounds, also after
/// removals.
/// A registered range in `range_map_finds_every_overlapping_range`.
type Registered = (Box<[u8]>, Option<Box<[u8]>>, u64);

#[test]
fn range_map_finds_every_overlapping_range() {
    let mut rng = SmallRng::seed_from_u64(7);
    let key = |rng: &mut SmallRng| -> Box<[u8]> {
        let n = rng.gen_range(0..3);
        (0..n).map(|_| rng.gen_range(0..4u8)).collect()
    };
    let bound = |rng: &mut SmallRng, k: Box<[u8]>| -> Bound<Box<[u8]>> {
        match rng.gen_range(0..3) {
            0 => Bound::Included(k),
            1 => Bound::Excluded(k),
            _ => Bound::Unbounded,
        }
    };
    for round in 0..200 {
        let mut map = RangeMap::default();
        let mut all: Vec<Registered> = Vec::new();
        let mut ts = 0u64;
        for _ in 0..rng.gen_range(1..4) {
            let mut new = Vec::new();
            for _ in 0..rng.gen_range(0..12) {
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                let hi = (!rng.gen_ratio(1, 6)).then_some(hi);
                ts += 1;
                all.push((lo.clone(), hi.clone(), ts));
                new.push((lo, hi, ts, ptr::null()));
            }
            map.add(new);
        }
        if round % 2 == 1 {
            // Unregister the oldest third, as a finished batch does.
            let cut = ts / 3;
            all.retain(|e| e.2 > cut);
            map.ranges.retain_mut(|e| {
                e.txns.retain(|&(t, _)| t > cut);
                !e.txns.is_empty()
            });
            map.settle();
        }
        for _ in 0..50 {
            let (lo, hi) = (key(&mut rng), key(&mut rng));
            let (lo, hi) = (bound(&mut rng, lo), bound(&mut rng, hi));
            fn as_ref(b: &Bound<Box<[u8]>>) -> Bound<&[u8]> {
                match b {
                    Bound::Included(k) => Bound::Included(&k[..]),
                    Bound::Excluded(k) => Bound::Excluded(&k[..]),
                    Bound::Unbounded => Bound::Unbounded,
                }
            }
            let (l, h) = (as_ref(&lo), as_ref(&hi));
            let mut got: Vec<u64> = map
                .overlapping(l, h)
                .flat_map(|e| e.txns.iter().map(|t| t.0))
                .collect();
            got.sort();
            let mut want: Vec<u64> = all
                .iter()
                .filter(|(rlo, rhi, _)| {
                    let above_lo = match (l, rhi) {
                        (_, None) | (Bound::Unbounded, _) => true,
                        (Bound::Included(x), Some(rh)) => &rh[..] >= x,
                        (Bound::Excluded(x), Some(rh)) => &rh[..] > x,
                    };
                    let below_hi = match h {
                        Bound::Included(x) => &rlo[..] <= x,
                        Bound::Excluded(x) => &rlo[..] < x,
                        Bound::Unbounded => true,
                    };
                    above_lo && below_hi
                })
                .map(|e| e.2)
                .collect();
            want.sort();
            assert_eq!(got, want, "round {round}: {lo:?}..{hi:?}");
        }
    }
}

/// Keys written once (TPC-C's HISTORY rows) do not stay in BOHM's CC maps:
/// a record the CC stage creates is not cached, so the maps hold only the
/// records read or written again. 2pl-ordered keeps each (its locks'
/// sequence lives there).
#[test]
fn cc_maps_do_not_keep_records_they_create() {
    let t = TableId::from_u32(0);
    for protocol in [DetProtocol::Bohm, DetProtocol::TwoPlOrdered] {
        let mut b = Bohm::new(
            &["t"],
            BohmConfig {
                protocol,
                ..Default::default()
            },
        )
        .unwrap();
        b.start().unwrap();
        // 2,000 fresh keys, each written once; key 0 updated by every one.
        let rs: Vec<_> = (1..=2_000u64)
            .map(|i| {
                let p = P {
                    t,
                    op: Op::Rmw {
                        keys: vec![0, 10_000 + i],
                        add: 1,
                        cap: u64::MAX,
                    },
                };
                b.submit(p).unwrap()
            })
            .collect();
        for r in rs {
            assert!(matches!(r.wait().unwrap(), Outcome::Committed(_)));
        }
        let stats = b.shutdown().unwrap();
        match protocol {
            DetProtocol::Bohm => assert!(stats.cc_map_entries <= 1, "{stats:?}"),
            // Lazy: the map is the last-writer table.
            DetProtocol::TwoPlOrdered | DetProtocol::Pwv | DetProtocol::Lazy => {
                assert_eq!(stats.cc_map_entries, 2_001, "{stats:?}")
            }
        }
        assert_eq!(val(Some(&b.dump(t).unwrap()[0].1)), 2_000);
    }
}

/// PWV running requests that do not decompose themselves: each is one
/// abortable piece, a gang over the partitions of its keys (scans' groups
/// on every partition), with logic aborts undone. Outcomes and state equal
/// the serial execution's, with one and several partitions.
#[test]
fn pwv_whole_requests_equal_serial_execution() {
    for &(seed, n, keys) in &[(31, 1, 20), (32, 2, 6), (33, 3, 40), (34, 4, 5)] {
        let cfg = BohmConfig {
            cc_threads: 1,
            exec_threads: n,
            sequencer: SequencerConfig {
                batch_size: 64,
                batch_time: Duration::from_millis(1),
            },
            protocol: DetProtocol::Pwv,
            read_annotation: true,
            ..Default::default()
        };
        compare(cfg, &reqs(seed, 2_000, keys), keys / 2);
    }
}

#[test]
fn pwv_input_log_replays_to_the_same_state() {
    input_log_replays(DetProtocol::Pwv);
}

#[test]
fn pwv_checkpoints_recover() {
    checkpoints_recover(DetProtocol::Pwv);
}

/// Range inserts under PWV: a write range is a group (its bounds' common
/// prefix) held by its piece; readers of keys under it take tickets on it.
#[test]
fn pwv_range_inserts_equal_serial_execution() {
    range_inserts_equal_serial_execution(DetProtocol::Pwv);
}

/// A request that decomposes itself for PWV: one read-modify-write piece
/// per key (adding `add`), the first `check_at` of them abortable (each
/// aborts if its key would exceed `cap`), then, if `abort`, an explicit
/// abort statement (a keyless abortable piece after the abortable ones),
/// and a keyless sum piece
/// after every key piece (data dependencies) whose output is the sum of
/// the old values. Its body (the serial executor's) does the same in
/// order.
#[derive(Clone, Debug)]
struct Q {
    t: TableId,
    keys: Vec<u64>,
    add: u64,
    cap: u64,
    check_at: usize,
    abort: bool,
}

impl Request for Q {
    type Output = u64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
        let mut sum = 0;
        for (i, &key) in self.keys.iter().enumerate() {
            if i == self.check_at && self.abort {
                return tx.user_abort();
            }
            let old = val(tx.get(self.t, &k(key))?);
            if i < self.check_at && old + self.add > self.cap {
                return tx.user_abort();
            }
            tx.put(self.t, &k(key), &(old + self.add).to_le_bytes())?;
            sum += old;
        }
        if self.abort && self.check_at >= self.keys.len() {
            return tx.user_abort();
        }
        Ok(sum)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        for &key in &self.keys {
            keys.write(self.t, &k(key));
        }
        true
    }
}

impl Procedure for Q {
    const ID: ProcId = 2;
    const NAME: &'static str = "pwv-test";
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn decode(_b: &[u8]) -> Result<Self, String> {
        Err("not logged".into())
    }
    fn pieces(&self, plan: &mut crate::det::PiecePlan) -> bool {
        let n = self.keys.len();
        for (i, &key) in self.keys.iter().enumerate() {
            let p = plan.piece(i < self.check_at);
            plan.write(p, self.t, &k(key));
        }
        if self.abort {
            // After the writes before it (so that they run, and are undone).
            let stop = plan.piece(true);
            for p in 0..self.check_at.min(n) {
                plan.after(stop, p as u16);
            }
        }
        let sum = plan.piece(false);
        for p in 0..n {
            plan.after(sum, p as u16);
        }
        true
    }
    fn run_piece(
        &self,
        i: u16,
        tx: &mut Txn<'_>,
        io: &mut crate::det::PieceIo<'_>,
    ) -> TxResult<()> {
        let i = usize::from(i);
        let n = self.keys.len();
        if i < n {
            let key = k(self.keys[i]);
            let old = val(tx.get(self.t, &key)?);
            if i < self.check_at && old + self.add > self.cap {
                return tx.user_abort();
            }
            tx.put(self.t, &key, &(old + self.add).to_le_bytes())?;
            io.output(&old.to_le_bytes());
        } else if i == n && self.abort {
            return tx.user_abort();
        } else {
            let sum: u64 = (0..n as u16).map(|p| val(io.input(p))).sum();
            io.output(&sum.to_le_bytes());
        }
        Ok(())
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<u64> {
        Ok(val(outputs.last().copied()))
    }
}

fn pwv_cfg(n: usize, batch: usize) -> BohmConfig {
    BohmConfig {
        cc_threads: 1,
        exec_threads: n,
        sequencer: SequencerConfig {
            batch_size: batch,
            batch_time: Duration::from_millis(1),
        },
        protocol: DetProtocol::Pwv,
        read_annotation: true,
        ..Default::default()
    }
}

/// Decomposed requests under PWV (pieces on several partitions at once,
/// same-transaction accesses to one key, commit points anywhere, logic
/// aborts and abort statements undone by the last settler) against the
/// serial executor running their bodies: the same outcomes and state.
#[test]
fn pwv_pieces_equal_serial_execution() {
    // `plen`: the table's partition prefix (7: every key below 256 in one
    // partition, by its first 7 bytes).
    for &(seed, n, keys, plen) in &[
        (41, 1, 10, 0),
        (42, 2, 4, 0),
        (43, 3, 30, 0),
        (44, 4, 8, 0),
        (45, 2, 2, 0),
        (46, 3, 30, 7),
    ] {
        let mut rng = SmallRng::seed_from_u64(seed);
        let t = TableId::from_u32(0);
        let qs: Vec<Q> = (0..3_000)
            .map(|_| {
                let len = rng.gen_range(1..8);
                Q {
                    t,
                    keys: (0..len).map(|_| rng.gen_range(0..keys)).collect(),
                    add: rng.gen_range(1..4),
                    cap: rng.gen_range(50..400),
                    check_at: rng.gen_range(0..=len),
                    abort: rng.gen_bool(0.1),
                }
            })
            .collect();
        let mut b = Bohm::new(&["t"], pwv_cfg(n, 50)).unwrap();
        b.partition_prefix(t, plen).unwrap();
        let db = Database::open(Options::in_memory()).unwrap();
        db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        for i in 0..keys / 2 {
            b.load(t, &k(i), &10u64.to_le_bytes()).unwrap();
            w.run(|tx| tx.put(t, &k(i), &10u64.to_le_bytes())).unwrap();
        }
        b.start().unwrap();
        let rs: Vec<_> = qs.iter().map(|q| b.submit(q.clone()).unwrap()).collect();
        let got: Vec<_> = rs.into_iter().map(|r| r.wait().unwrap()).collect();
        let stats = b.shutdown().unwrap();
        let mut aborted = 0;
        for (i, q) in qs.iter().enumerate() {
            let mut p = q.clone();
            let want = match serial::run_one(&mut w, &mut p).unwrap() {
                Outcome::Committed(b) => Outcome::Committed(*b.downcast::<u64>().unwrap()),
                Outcome::Aborted => Outcome::Aborted,
            };
            aborted += usize::from(want == Outcome::Aborted);
            assert_eq!(got[i], want, "request {i}: {q:?}");
        }
        assert!(aborted > 100 && aborted < 2_900, "{aborted} aborts");
        let serial_state = rows(&mut w, t);
        assert_eq!(b.dump(t).unwrap(), serial_state, "seed {seed}");
        assert!(stats.batches > 0, "{stats:?}");
    }
}

/// An aborting PWV transaction leaves no trace and aborts nobody else: its
/// pieces before the abort statement wrote and were undone, the
/// transactions after it on the same keys read the values from before it
/// and commit.
#[test]
fn pwv_abort_leaves_no_trace_and_cascades_nowhere() {
    let t = TableId::from_u32(0);
    let mut b = Bohm::new(&["t"], pwv_cfg(2, 1_000)).unwrap();
    for i in 0..4 {
        b.load(t, &k(i), &10u64.to_le_bytes()).unwrap();
    }
    b.start().unwrap();
    let q = |abort: bool, check_at: usize| Q {
        t,
        keys: vec![0, 1, 2, 3],
        add: 5,
        cap: u64::MAX,
        check_at,
        abort,
    };
    // Abort statements after 0, 2 and 4 writes, each followed by a reader
    // of the same keys.
    let mut rs = Vec::new();
    for at in [0, 2, 4] {
        rs.push((true, b.submit(q(true, at)).unwrap()));
        rs.push((false, b.submit(q(false, 0)).unwrap()));
    }
    let mut expect_sum = 40;
    for (aborts, r) in rs {
        let o = r.wait().unwrap();
        if aborts {
            assert_eq!(o, Outcome::Aborted);
        } else {
            assert_eq!(o, Outcome::Committed(expect_sum));
            expect_sum += 20;
        }
    }
    let rows = b.dump(t).unwrap();
    assert!(rows.iter().all(|(_, v)| val(Some(v)) == 25), "{rows:?}");
}

/// A started PWV engine of two partitions for two-request tests: its
/// first batch is cut when the second request is in, so both share it;
/// table `t` partitioned by its keys' first `plen` bytes (the whole key
/// if none), `keys` loaded with the value 1.
fn pwv_pair(t: TableId, plen: Option<usize>, keys: &[u64]) -> Bohm {
    let mut cfg = pwv_cfg(2, 2);
    cfg.sequencer.batch_time = Duration::from_secs(5);
    let mut b = Bohm::new(&["t"], cfg).unwrap();
    if let Some(plen) = plen {
        b.partition_prefix(t, plen).unwrap();
    }
    for &key in keys {
        b.load(t, &k(key), &1u64.to_le_bytes()).unwrap();
    }
    b.start().unwrap();
    b
}

/// What `V`'s reader saw of `x` (`u64::MAX`: it has not run yet).
static V_SEEN: AtomicU64 = AtomicU64::new(u64::MAX);

/// The early-visibility test's requests. The writer (`reader: false`)
/// has two pieces after its commit point (it has no abortable piece): one
/// writes 7 to `x`, the other, on `y`'s partition, writes `y` only once
/// the reader has run, waiting up to 10 s for it. The reader reads `x` and
/// says what it saw.
#[derive(Clone, Debug)]
struct V {
    t: TableId,
    x: u64,
    y: u64,
    reader: bool,
}

impl Request for V {
    type Output = u64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
        if self.reader {
            return Ok(val(tx.get(self.t, &k(self.x))?));
        }
        tx.put(self.t, &k(self.x), &7u64.to_le_bytes())?;
        tx.put(self.t, &k(self.y), &8u64.to_le_bytes())?;
        Ok(0)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        if self.reader {
            keys.read(self.t, &k(self.x));
        } else {
            keys.write(self.t, &k(self.x));
            keys.write(self.t, &k(self.y));
        }
        true
    }
}

impl Procedure for V {
    const ID: ProcId = 4;
    const NAME: &'static str = "pwv-visibility-test";
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn decode(_b: &[u8]) -> Result<Self, String> {
        Err("not logged".into())
    }
    fn pieces(&self, plan: &mut crate::det::PiecePlan) -> bool {
        let p = plan.piece(false);
        if self.reader {
            plan.read(p, self.t, &k(self.x));
        } else {
            plan.write(p, self.t, &k(self.x));
            let q = plan.piece(false);
            plan.write(q, self.t, &k(self.y));
        }
        true
    }
    fn run_piece(
        &self,
        i: u16,
        tx: &mut Txn<'_>,
        io: &mut crate::det::PieceIo<'_>,
    ) -> TxResult<()> {
        match (self.reader, i) {
            (true, _) => {
                let seen = val(tx.get(self.t, &k(self.x))?);
                V_SEEN.store(seen, Ordering::SeqCst);
                io.output(&seen.to_le_bytes());
            }
            (false, 0) => tx.put(self.t, &k(self.x), &7u64.to_le_bytes())?,
            (false, _) => {
                let start = std::time::Instant::now();
                while V_SEEN.load(Ordering::SeqCst) == u64::MAX {
                    if start.elapsed() > Duration::from_secs(10) {
                        return Err(TxError::Error(Error::InvalidArgument(
                            "the reader did not run while this piece waited".into(),
                        )));
                    }
                    std::thread::yield_now();
                }
                tx.put(self.t, &k(self.y), &8u64.to_le_bytes())?;
            }
        }
        Ok(())
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<u64> {
        Ok(match self.reader {
            true => u64::from_le_bytes(outputs[0][..8].try_into().expect("8 bytes")),
            false => 0,
        })
    }
}

/// Piece-wise visibility itself (thesis §6.4): a write of a piece after
/// its transaction's commit point is visible to later transactions as
/// soon as the piece completes, while the transaction's other pieces have
/// yet to run. The writer's second piece (on another partition) waits
/// until the reader, later in the log and in the same batch, has read
/// the first piece's write; were the write hidden until the writer
/// completed, the reader could not run and the piece would give up after
/// 10 s, failing the batch.
#[test]
fn pwv_write_after_the_commit_point_is_visible_before_its_transaction_completes() {
    let t = TableId::from_u32(0);
    let (x, y) = (0..)
        .flat_map(|x| (x + 1..x + 64).map(move |y| (x, y)))
        .find(|&(x, y)| partition(t, &k(x), 2) != partition(t, &k(y), 2))
        .expect("two partitions");
    let mut b = pwv_pair(t, None, &[x, y]);
    V_SEEN.store(u64::MAX, Ordering::SeqCst);
    let w = b.submit(V { t, x, y, reader: false }).unwrap();
    let r = b.submit(V { t, x, y, reader: true }).unwrap();
    assert_eq!(w.wait().unwrap(), Outcome::Committed(0));
    // The reader saw the writer's first piece, then the writer finished.
    assert_eq!(r.wait().unwrap(), Outcome::Committed(7));
    let rows = b.dump(t).unwrap();
    assert_eq!(val(Some(&rows[1].1)), 8, "{rows:?}");
    b.shutdown().unwrap();
}

/// The requests of the read-then-write ordering test. `Early` is the
/// earlier transaction: its first piece (on `y`'s partition) takes 200 ms,
/// and its second, a data dependency of the first, reads `x`, by its exact
/// key or through a group of the keys sharing `x`'s first 7 bytes; it
/// returns what it read. `Late` reads `x` in one piece and writes 99 to
/// it in the next, both after the commit point.
#[derive(Clone, Debug)]
enum Rw {
    Early { t: TableId, x: u64, y: u64, group: bool },
    Late { t: TableId, x: u64 },
}

impl Request for Rw {
    type Output = u64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
        match *self {
            Rw::Early { t, x, y, .. } => {
                tx.put(t, &k(y), &2u64.to_le_bytes())?;
                Ok(val(tx.get(t, &k(x))?))
            }
            Rw::Late { t, x } => {
                tx.put(t, &k(x), &99u64.to_le_bytes())?;
                Ok(0)
            }
        }
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        match *self {
            Rw::Early { t, x, y, .. } => {
                keys.write(t, &k(y));
                keys.read(t, &k(x));
            }
            Rw::Late { t, x } => keys.write(t, &k(x)),
        }
        true
    }
}

impl Procedure for Rw {
    const ID: ProcId = 5;
    const NAME: &'static str = "pwv-read-then-write-test";
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn decode(_b: &[u8]) -> Result<Self, String> {
        Err("not logged".into())
    }
    fn pieces(&self, plan: &mut crate::det::PiecePlan) -> bool {
        match *self {
            Rw::Early { t, x, y, group } => {
                let slow = plan.piece(false);
                plan.write(slow, t, &k(y));
                let read = plan.piece(false);
                if group {
                    plan.read_group(read, t, &k(x)[..7]);
                } else {
                    plan.read(read, t, &k(x));
                }
                plan.after(read, slow);
            }
            Rw::Late { t, x } => {
                let read = plan.piece(false);
                plan.read(read, t, &k(x));
                let write = plan.piece(false);
                plan.write(write, t, &k(x));
            }
        }
        true
    }
    fn run_piece(
        &self,
        i: u16,
        tx: &mut Txn<'_>,
        io: &mut crate::det::PieceIo<'_>,
    ) -> TxResult<()> {
        match (self, i) {
            (&Rw::Early { t, y, .. }, 0) => {
                std::thread::sleep(Duration::from_millis(200));
                tx.put(t, &k(y), &2u64.to_le_bytes())?;
            }
            (&Rw::Early { t, x, .. }, _) => {
                io.output(&val(tx.get(t, &k(x))?).to_le_bytes());
            }
            (&Rw::Late { t, x }, 0) => {
                tx.get(t, &k(x))?;
            }
            (&Rw::Late { t, x }, _) => tx.put(t, &k(x), &99u64.to_le_bytes())?,
        }
        Ok(())
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<u64> {
        Ok(match self {
            Rw::Early { .. } => u64::from_le_bytes(outputs[1][..8].try_into().expect("8 bytes")),
            Rw::Late { .. } => 0,
        })
    }
}

/// A transaction that reads a record in one piece and writes it in a
/// later one does not overtake an earlier transaction's pending read of
/// it (the bug the list-append checker found: the later transaction's
/// first access, a read, waited only for earlier writes, and its own
/// completion then let its write pass the earlier reader). The earlier
/// read is held back 200 ms by a data dependency; it must still see the
/// value from before the later write. Through the exact key, and through a
/// group that covers it (the later transaction's tickets on the group's
/// lock record are its accesses' extra tickets).
#[test]
fn pwv_read_then_write_waits_for_an_earlier_pending_read() {
    let t = TableId::from_u32(0);
    for group in [false, true] {
        let (x, y) = (0..)
            .map(|i| (5, i << 8))
            .find(|&(x, y)| partition(t, &k(x)[..7], 2) != partition(t, &k(y)[..7], 2))
            .expect("two partitions");
        // The table is partitioned by the first 7 bytes, so that the group
        // of `x`'s prefix lives on `x`'s partition.
        let mut b = pwv_pair(t, Some(7), &[x, y]);
        let early = b.submit(Rw::Early { t, x, y, group }).unwrap();
        let late = b.submit(Rw::Late { t, x }).unwrap();
        assert_eq!(
            early.wait().unwrap(),
            Outcome::Committed(1),
            "group {group}: the earlier read saw the later write"
        );
        assert_eq!(late.wait().unwrap(), Outcome::Committed(0));
        let rows = b.dump(t).unwrap();
        assert_eq!(val(Some(&rows[0].1)), 99, "group {group}: {rows:?}");
        b.shutdown().unwrap();
    }
}

/// A decomposed request whose second piece is a gang (a group spanning
/// every partition): piece 0 is an abort statement (fires when `abort`),
/// piece 1, after the commit point, adds `add` to the counter `key`
/// through the group. A gang piece of an aborted transaction is skipped
/// once, by its last member, however many partitions hold it.
#[derive(Clone, Debug)]
struct G {
    t: TableId,
    key: u64,
    add: u64,
    abort: bool,
}

impl Request for G {
    type Output = u64;
    fn run<T: Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
        if self.abort {
            return tx.user_abort();
        }
        let old = val(tx.get(self.t, &k(self.key))?);
        tx.put(self.t, &k(self.key), &(old + self.add).to_le_bytes())?;
        Ok(old)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.write_range(self.t, &k(0), &k(u64::MAX));
        true
    }
}

impl Procedure for G {
    const ID: ProcId = 3;
    const NAME: &'static str = "pwv-gang-test";
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn decode(_b: &[u8]) -> Result<Self, String> {
        Err("not logged".into())
    }
    fn pieces(&self, plan: &mut crate::det::PiecePlan) -> bool {
        plan.piece(true);
        // After the commit point: every member of the gang is ready and
        // waits for the decision, then the piece is skipped (released)
        // once on an abort.
        let p = plan.piece(false);
        plan.write_group(p, self.t, &[]);
        true
    }
    fn run_piece(
        &self,
        i: u16,
        tx: &mut Txn<'_>,
        io: &mut crate::det::PieceIo<'_>,
    ) -> TxResult<()> {
        if i == 0 {
            return if self.abort { tx.user_abort() } else { Ok(()) };
        }
        let old = val(tx.get(self.t, &k(self.key))?);
        tx.put(self.t, &k(self.key), &(old + self.add).to_le_bytes())?;
        io.output(&old.to_le_bytes());
        Ok(())
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> TxResult<u64> {
        Ok(val(outputs.get(1).copied()))
    }
}

#[test]
fn pwv_gang_pieces_of_aborted_transactions_are_skipped_once() {
    let t = TableId::from_u32(0);
    let mut rng = SmallRng::seed_from_u64(51);
    let gs: Vec<G> = (0..2_000)
        .map(|_| G {
            t,
            key: rng.gen_range(0..8),
            add: rng.gen_range(1..5),
            abort: rng.gen_bool(0.3),
        })
        .collect();
    let mut b = Bohm::new(&["t"], pwv_cfg(3, 50)).unwrap();
    let db = Database::open(Options::in_memory()).unwrap();
    db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    b.start().unwrap();
    let rs: Vec<_> = gs.iter().map(|g| b.submit(g.clone()).unwrap()).collect();
    let got: Vec<_> = rs.into_iter().map(|r| r.wait().unwrap()).collect();
    b.shutdown().unwrap();
    for (i, g) in gs.iter().enumerate() {
        let want = match serial::run_one(&mut w, &mut g.clone()).unwrap() {
            Outcome::Committed(b) => Outcome::Committed(*b.downcast::<u64>().unwrap()),
            Outcome::Aborted => Outcome::Aborted,
        };
        assert_eq!(got[i], want, "request {i}: {g:?}");
    }
    let serial_state = rows(&mut w, t);
    assert_eq!(b.dump(t).unwrap(), serial_state);
}

fn lazy_cfg(n: usize, batch: usize, bound: u32) -> BohmConfig {
    BohmConfig {
        cc_threads: 1,
        exec_threads: n,
        sequencer: SequencerConfig {
            batch_size: batch,
            batch_time: Duration::from_millis(1),
        },
        protocol: DetProtocol::Lazy,
        chain_bound: bound,
        ..Default::default()
    }
}

/// Lazy transactions against the serial executor: read-modify-writes end
/// their now-phase after deciding and writing one key (the rest sticky);
/// reads, scans and inserts run eagerly and substantiate what they read.
/// Outcomes (given at commit) and the final state (once every later phase
/// has run) equal a serial execution in log order, for several workers,
/// chain bounds from 1 (substantiate at once) to beyond any chain, and
/// batch sizes.
#[test]
fn lazy_equals_serial_execution() {
    let mut unread = 0;
    for &(seed, n, keys, bound, batch) in &[
        (41, 1, 10, 1, 64),
        (42, 2, 6, 3, 100),
        (43, 3, 40, 100, 64),
        (44, 2, 5, 1_000_000, 500),
        (45, 4, 200, 2, 32),
    ] {
        let stats = compare(
            lazy_cfg(n, batch, bound),
            &reqs(seed, 3_000, keys),
            keys / 2,
        );
        assert!(stats.lazy_deferred > 0, "{stats:?}");
        assert_eq!(stats.lazy_later_errors, 0, "{stats:?}");
        if bound <= 3 {
            assert!(stats.lazy_handed_off > 0, "bound {bound}: {stats:?}");
        }
        unread += stats.lazy_existence_checks;
    }
    // Inserts met stickies and answered without running their producers.
    assert!(unread > 0);
}

/// With a bound beyond any chain and one batch in the backlog at most,
/// the stickification thread waits for the workers; the waves let
/// batches retire and GC collect: the same outcomes and state.
#[test]
fn lazy_backlog_bound_and_gc_keep_serial_equivalence() {
    let cfg = BohmConfig {
        lazy_backlog: 1,
        ..lazy_cfg(2, 50, u32::MAX)
    };
    let stats = compare_in_waves(cfg, &reqs(46, 4_000, 8), 4, 8);
    assert!(stats.collected > 0, "{stats:?}");
    assert_eq!(stats.lazy_backlog_max, 1, "{stats:?}");
}

/// Blind writes (the thesis's §4.4.3): requests that put keys without
/// reading them, declared blind, among lazy read-modify-writes, reads and
/// scans. Producers whose stickies are all overwritten unread are never
/// run (`lazy_clobbered`), and outcomes and state still equal a serial
/// execution.
#[test]
fn lazy_blind_writes_skip_clobbered_producers_and_equal_serial_execution() {
    for &(seed, n, keys, batch) in &[(51, 2, 8, 500), (52, 1, 30, 200), (53, 3, 5, 1000)] {
        let stats = compare(
            lazy_cfg(n, batch, 1_000_000),
            &blind_reqs(seed, keys),
            keys / 2,
        );
        assert!(stats.lazy_clobbered > 0, "seed {seed}: {stats:?}");
        assert_eq!(stats.lazy_later_errors, 0, "{stats:?}");
    }
}

/// `reqs`, with a tenth replaced by copies (a deferred later phase with a
/// declared read and a blind write) and a quarter of the rest by blind
/// puts.
fn blind_reqs(seed: u64, keys: u64) -> Vec<P> {
    let mut rng = SmallRng::seed_from_u64(seed);
    reqs(seed, 3_000, keys)
        .into_iter()
        .map(|r| {
            if rng.gen_bool(0.05) {
                // A deferred producer with a write range, and blind writes
                // of its counter (its only sticky): it must still run.
                let d = rng.gen_range(0..3);
                let op = if rng.gen_bool(0.5) {
                    Op::Log { d }
                } else {
                    Op::Set {
                        keys: vec![900 + d],
                        val: rng.gen_range(0..3),
                        read: false,
                    }
                };
                P { t: r.t, op }
            } else if rng.gen_bool(0.1) {
                P {
                    t: r.t,
                    op: Op::Copy {
                        from: rng.gen_range(0..keys),
                        to: rng.gen_range(0..keys),
                    },
                }
            } else if rng.gen_bool(0.25) {
                let n = rng.gen_range(1..=3);
                let mut ks: Vec<u64> = (0..n).map(|_| rng.gen_range(0..keys)).collect();
                ks.sort_unstable();
                ks.dedup();
                // Now and then a single-key one (eager) that writes nothing:
                // its placeholder is skipped, so the sticky below it stays
                // visible and needed.
                let val = if ks.len() == 1 && rng.gen_bool(0.2) {
                    u64::MAX
                } else {
                    rng.gen_range(0..50)
                };
                P {
                    t: r.t,
                    op: Op::Set {
                        keys: ks,
                        val,
                        read: false,
                    },
                }
            } else {
                r
            }
        })
        .collect()
}

/// Partitioned stickification (several CC threads put the stickies in and
/// keep the last-writer table, one thread runs the now-phases): the same
/// outcomes and state as a serial execution, with chain bounds that hand
/// off and blind writes that skip producers (range inserts:
/// `lazy_range_inserts_equal_serial_execution`, with 1 to 3 CC threads).
#[test]
fn lazy_partitioned_stickification_equals_serial_execution() {
    for &(seed, cc, n, keys, bound, batch) in &[
        (61, 2, 2, 10, 2, 64),
        (62, 3, 1, 40, 100, 500),
        (63, 2, 3, 6, 1_000_000, 200),
    ] {
        let cfg = BohmConfig {
            cc_threads: cc,
            ..lazy_cfg(n, batch, bound)
        };
        let stats = compare(cfg, &blind_reqs(seed, keys), keys / 2);
        assert!(stats.lazy_deferred > 0, "{stats:?}");
        assert_eq!(stats.lazy_later_errors, 0, "{stats:?}");
        if bound <= 2 {
            assert!(stats.lazy_handed_off > 0, "{stats:?}");
        }
        if bound > 100 {
            assert!(stats.lazy_clobbered > 0, "{stats:?}");
        }
    }
}

/// A body that reads a key it declared as a blind write fails there,
/// under lazy (the skip of clobbered producers relies on it); eagerly and
/// in a later phase.
#[test]
fn lazy_refuses_a_read_of_a_blind_write() {
    let mut b = Bohm::new(&["t"], lazy_cfg(1, 10, 100)).unwrap();
    let t = b.table("t").unwrap();
    b.load(t, &k(1), &5u64.to_le_bytes()).unwrap();
    b.start().unwrap();
    for keys in [vec![1], vec![1, 2]] {
        let r = b
            .submit(P {
                t,
                op: Op::Set {
                    keys,
                    val: 3,
                    read: true,
                },
            })
            .unwrap();
        let out = r.wait();
        if let Err(e) = &out {
            assert!(e.to_string().contains("blind"), "{e}");
        }
    }
    let stats = b.shutdown().unwrap();
    // The eager one fails at once; the deferred one in its later phase.
    assert_eq!(stats.lazy_later_errors, 1, "{stats:?}");
}

#[test]
fn lazy_input_log_replays_to_the_same_state() {
    input_log_replays(DetProtocol::Lazy);
}

#[test]
fn lazy_checkpoints_recover() {
    checkpoints_recover(DetProtocol::Lazy);
}

#[test]
fn lazy_range_inserts_equal_serial_execution() {
    range_inserts_equal_serial_execution(DetProtocol::Lazy);
}

/// A stage thread that panics (a bug: bodies' panics are caught where they
/// run) fails the requests of the batches it would have moved on, and every
/// later one, with an error, instead of leaving their submitters waiting
/// for good; the batches before it are released as usual, and shutdown
/// reports the panic.
#[test]
fn a_panicking_stage_thread_fails_requests_instead_of_hanging() {
    // PWV: executor 0 panics (in its graph build); the requests fail and
    // the shutdown returns, reporting it. (The stop of an executor left
    // waiting on the dead one's members, `stage_stopped`, is not reached
    // here: no request of this test leaves one waiting; the next test
    // reaches it.)
    for protocol in [DetProtocol::Bohm, DetProtocol::Lazy, DetProtocol::Pwv] {
        let (b, t) = panicking_at_50(protocol);
        let receipts: Vec<_> = (0..200u64).map(|i| b.submit(add_one(t, i % 7))).collect();
        let outs = errors_within_30s(receipts, &format!("{protocol:?}"));
        // Timestamps 1..=29 are in batches (of at most 20) that end below
        // 50: released before the CC stage reaches 50. (Under PWV the
        // executor that panics may be ahead of the other one, whose
        // unreleased earlier batches then fail too.)
        if protocol != DetProtocol::Pwv {
            assert!(
                outs[..29].iter().all(Option::is_none),
                "{protocol:?}: {outs:?}"
            );
        }
        for o in [&outs[49], &outs[199]] {
            let m = o.as_deref().unwrap_or_default();
            assert!(m.contains("panicked"), "{protocol:?}: {o:?}");
        }
        let e = shutdown_error_within_30s(b, &format!("{protocol:?}"));
        assert!(e.contains("panicked"), "{e}");
    }
}

/// PWV: executor 0 panics in the graph build of the batch that holds
/// timestamp 50, before it arrives at any member of that batch. Every
/// request here writes a key of each partition (one piece with a member
/// on each executor), so executor 1 parks its members of that batch
/// waiting for executor 0's, which never come: it must see
/// `stage_stopped` and stop, or the shutdown cannot join it.
#[test]
fn a_pwv_executor_left_waiting_on_a_dead_one_stops() {
    let (b, t) = panicking_at_50(DetProtocol::Pwv);
    // Keys of partition 0 and of partition 1.
    let on = |part: u16| -> Vec<u64> {
        (0..1000u64)
            .filter(|&i| partition(t, &k(i), 2) == part)
            .take(5)
            .collect()
    };
    let (p0, p1) = (on(0), on(1));
    assert!(p0.len() == 5 && p1.len() == 5, "{p0:?} {p1:?}");
    let receipts: Vec<_> = (0..200usize)
        .map(|i| {
            b.submit(P {
                t,
                op: Op::Rmw {
                    keys: vec![p0[i % 5], p1[i % 5]],
                    add: 1,
                    cap: u64::MAX,
                },
            })
        })
        .collect();
    let outs = errors_within_30s(receipts, "pwv");
    for o in [&outs[49], &outs[199]] {
        let m = o.as_deref().unwrap_or_default();
        assert!(m.contains("panicked"), "{o:?}");
    }
    // Hangs here if executor 1 does not stop on `stage_stopped`.
    let e = shutdown_error_within_30s(b, "pwv");
    assert!(e.contains("panicked"), "{e}");
}

/// A started engine of one CC thread and two executors, in batches of at
/// most 20 requests, whose executor 0 panics at timestamp 50, and its
/// table.
fn panicking_at_50(protocol: DetProtocol) -> (Bohm, TableId) {
    let mut b = Bohm::new(
        &["t"],
        BohmConfig {
            cc_threads: 1,
            exec_threads: 2,
            sequencer: SequencerConfig {
                batch_size: 20,
                batch_time: Duration::from_millis(1),
            },
            protocol,
            ..Default::default()
        },
    )
    .unwrap();
    let t = b.table("t").unwrap();
    b.start().unwrap();
    b.panic_at(50);
    (b, t)
}

/// Each receipt's error (`None`: it committed), waited for on another
/// thread; a failure if they are not all in within 30 s (a hang).
fn errors_within_30s<T: Send + 'static>(
    receipts: Vec<Result<crate::det::Receipt<T>, Error>>,
    what: &str,
) -> Vec<Option<String>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let outs: Vec<Option<String>> = receipts
            .into_iter()
            .map(|r| match r.and_then(|r| r.wait()) {
                Ok(_) => None,
                Err(e) => Some(e.to_string()),
            })
            .collect();
        tx.send(outs).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what}: requests hang after a stage panicked"))
}

/// The error the shutdown of `b` reports, on another thread; a failure if
/// it does not return within 30 s (a stage thread that never stops).
fn shutdown_error_within_30s(mut b: Bohm, what: &str) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let e = b.shutdown().unwrap_err();
        tx.send(e.to_string()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what}: the shutdown hangs after a stage panicked"))
}

/// A request that adds one to key `k`.
fn add_one(t: TableId, k: u64) -> P {
    P {
        t,
        op: Op::Rmw {
            keys: vec![k],
            add: 1,
            cap: u64::MAX,
        },
    }
}

/// A stage thread that panics while recovery replays the input log makes
/// the start fail, naming the batch, instead of waiting for good.
#[test]
fn a_stage_thread_panic_during_replay_fails_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BohmConfig {
        cc_threads: 1,
        exec_threads: 2,
        sequencer: SequencerConfig {
            batch_size: 20,
            batch_time: Duration::from_millis(1),
        },
        ..Default::default()
    };
    let procs = || crate::det::Procedures::new().register::<P>().unwrap();
    let t = TableId::from_u32(0);
    {
        let mut b = Bohm::new(&["t"], cfg)
            .unwrap()
            .with_input_log(dir.path(), procs());
        b.start().unwrap();
        let rs: Vec<_> = (0..100u64)
            .map(|i| b.submit(add_one(t, i % 7)).unwrap())
            .collect();
        for r in rs {
            r.wait().unwrap();
        }
        b.shutdown().unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let d = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let mut b = Bohm::new(&["t"], cfg).unwrap().with_input_log(&d, procs());
        b.panic_at(50);
        let r = b.start().map(drop);
        tx.send(r).unwrap();
        drop(b);
    });
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the start hangs after a stage thread panicked in replay");
    let e = r.unwrap_err().to_string();
    assert!(
        e.contains("stage thread stopped") && e.contains("batch"),
        "{e}"
    );
}

/// The partition function spreads the benchmarks' keys evenly: small
/// sequential integers, big-endian, in keys of 4, 8, 12 and 24 bytes,
/// over 1, 2, 3 and 16 partitions, within 5% of the mean (the worst,
/// 16 partitions of 4-byte keys, is 3.9% off; the test is deterministic),
/// and stays in range (no key maps to `m`; the empty key too).
#[test]
fn partitions_spread_sequential_keys_evenly() {
    for m in [1usize, 2, 3, 16] {
        for len in [0usize, 4, 8, 12, 24] {
            let n = if len == 0 { 1 } else { 60_000 };
            let mut count = vec![0u32; m];
            for i in 0..n as u64 {
                let mut key = vec![0u8; len];
                let b = i.to_be_bytes();
                let w = len.min(8);
                key[len - w..].copy_from_slice(&b[8 - w..]);
                let p = usize::from(partition(TableId::from_u32(3), &key, m));
                assert!(p < m, "partition {p} of {m}");
                count[p] += 1;
            }
            if n > 1 && len >= 4 {
                let mean = n as f64 / m as f64;
                for (p, &c) in count.iter().enumerate() {
                    assert!(
                        (f64::from(c) - mean).abs() < mean * 0.05,
                        "m={m} len={len}: partition {p} has {c} keys, mean {mean}"
                    );
                }
            }
        }
    }
    // Tables are told apart: the same key lands in different partitions.
    let moved = (0..1000u64)
        .filter(|&i| {
            partition(TableId::from_u32(0), &k(i), 16) != partition(TableId::from_u32(1), &k(i), 16)
        })
        .count();
    assert!(moved > 800, "{moved} of 1000 keys change partition with the table");
}

use std::sync::Arc;
use std::time::Duration;

use super::input::{decode_payload, encode_payload, read_input_log, InputLog};
use super::sequencer::{Batch, BatchSink, Sequencer, SequencerConfig};
use super::*;
use crate::catalog::TableId;
use crate::db::{Database, Options};
use crate::error::TxError;
use crate::log::segment;

/// Add `by` to the counter at `key`; abort (logic) if it would pass `cap`.
/// Returns the new value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bump {
    t: TableId,
    key: u64,
    by: u64,
    cap: u64,
}

impl Request for Bump {
    type Output = u64;
    fn run<T: crate::txn::Transaction>(&mut self, tx: &mut T) -> TxResult<u64> {
        let k = self.key.to_be_bytes();
        let old = tx
            .get(self.t, &k)?
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
        let new = old + self.by;
        if new > self.cap {
            return Err(TxError::Error(Error::UserAbort));
        }
        tx.put(self.t, &k, &new.to_le_bytes())?;
        Ok(new)
    }
    fn declare(&self, keys: &mut KeySet) -> bool {
        keys.write(self.t, &self.key.to_be_bytes());
        true
    }
}

impl Procedure for Bump {
    const ID: ProcId = 7;
    const NAME: &'static str = "bump";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.t.as_u32().to_le_bytes());
        for x in [self.key, self.by, self.cap] {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    fn decode(b: &[u8]) -> Result<Self, String> {
        let b: &[u8; 28] = b
            .try_into()
            .map_err(|_| format!("{} bytes, not 28", b.len()))?;
        let w = |i: usize| u64::from_le_bytes(b[4 + 8 * i..12 + 8 * i].try_into().unwrap());
        Ok(Bump {
            t: TableId::from_u32(u32::from_le_bytes(b[0..4].try_into().unwrap())),
            key: w(0),
            by: w(1),
            cap: w(2),
        })
    }
}

/// Another procedure under the same id, to test the registry.
struct Impostor;
impl Request for Impostor {
    type Output = ();
    fn run<T: crate::txn::Transaction>(&mut self, _: &mut T) -> TxResult<()> {
        Ok(())
    }
}
impl Procedure for Impostor {
    const ID: ProcId = 7;
    const NAME: &'static str = "impostor";
    fn encode(&self, _: &mut Vec<u8>) {}
    fn decode(_: &[u8]) -> Result<Self, String> {
        Ok(Impostor)
    }
}

fn procs() -> Procedures {
    Procedures::new().register::<Bump>().unwrap()
}

fn db_with_table() -> (Database, TableId) {
    let db = Database::open(Options::in_memory()).unwrap();
    let t = db.create_table("counters").unwrap();
    (db, t)
}

/// Every counter of `t`, as (key, value).
fn state(db: &Database, t: TableId) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut w = db.worker().unwrap();
    w.run(|tx| {
        tx.scan_collect(
            t,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            crate::ScanOptions::default(),
        )
    })
    .unwrap()
}

#[test]
fn payload_round_trip_and_malformed_payloads_are_refused() {
    let args: Vec<Vec<u8>> = vec![vec![], vec![1, 2, 3], vec![9; 300]];
    let mut p = Vec::new();
    encode_payload(
        &mut p,
        41,
        [(1u16, &args[0][..]), (2, &args[1][..]), (3, &args[2][..])].into_iter(),
    );
    let (first, es) = decode_payload(&p).unwrap();
    assert_eq!(first, 41);
    assert_eq!(es.len(), 3);
    for (i, e) in es.iter().enumerate() {
        assert_eq!(e.ts, 41 + i as u64);
        assert_eq!(e.proc, i as u16 + 1);
        assert_eq!(e.args, &args[i][..]);
    }
    // Every truncation, and trailing bytes, is an error, never a panic.
    for cut in 0..p.len() {
        assert!(decode_payload(&p[..cut]).is_err(), "cut at {cut}");
    }
    let mut longer = p.clone();
    longer.push(0);
    assert!(decode_payload(&longer)
        .unwrap_err()
        .contains("after the last"));
    // A count no payload of this size can hold.
    let mut huge = p.clone();
    huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_payload(&huge).unwrap_err().contains("claims"));
}

#[test]
fn registry_refuses_a_taken_id_and_names_an_unknown_one() {
    let e = procs().register::<Impostor>().unwrap_err();
    assert!(e.to_string().contains("taken by 'bump'"), "{e}");
    // Registering the same procedure twice is fine.
    let p = procs().register::<Bump>().unwrap();
    assert!(p.knows(7) && !p.knows(8));
    let e = p.decode(8, &[]).err().unwrap();
    assert!(
        matches!(e, Error::Corrupt(ref m) if m.contains("id 8")),
        "{e}"
    );
    let e = p.decode(7, &[1, 2]).err().unwrap();
    assert!(
        matches!(e, Error::Corrupt(ref m) if m.contains("'bump'") && m.contains("not 28")),
        "{e}"
    );
}

#[test]
fn submissions_from_many_threads_are_sequenced_executed_and_released() {
    let (db, t) = db_with_table();
    let cfg = SequencerConfig {
        batch_size: 64,
        batch_time: Duration::from_millis(1),
    };
    let seq = Sequencer::start(cfg, 0, 0, None, serial::sink(db.worker().unwrap())).unwrap();
    let threads = 4u64;
    let per = 500u64;
    std::thread::scope(|s| {
        for th in 0..threads {
            let seq = &seq;
            s.spawn(move || {
                // A window of receipts in flight, as an open-loop client.
                let mut window = std::collections::VecDeque::new();
                for i in 0..per {
                    window.push_back(
                        seq.submit(Bump {
                            t,
                            key: th * 1000 + i % 10,
                            by: 1,
                            cap: u64::MAX,
                        })
                        .unwrap(),
                    );
                    if window.len() > 100 {
                        let r = window.pop_front().unwrap().wait().unwrap();
                        assert!(matches!(r, Outcome::Committed(v) if v >= 1));
                    }
                }
                for r in window {
                    assert!(matches!(r.wait().unwrap(), Outcome::Committed(_)));
                }
            });
        }
    });
    let stats = seq.shutdown().unwrap();
    assert_eq!(stats.requests, threads * per);
    assert!(stats.batches >= stats.requests / 64, "{stats:?}");
    // Each thread's 10 keys were bumped per/10 times each.
    let st = state(&db, t);
    assert_eq!(st.len() as u64, threads * 10);
    for (_, v) in st {
        assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), per / 10);
    }
    // After shutdown, a submission is refused.
    assert!(seq
        .submit(Bump {
            t,
            key: 1,
            by: 1,
            cap: 9
        })
        .is_err());
}

#[test]
fn logic_aborts_are_outcomes_and_leave_nothing() {
    let (db, t) = db_with_table();
    let seq = Sequencer::start(
        SequencerConfig::default(),
        0,
        0,
        None,
        serial::sink(db.worker().unwrap()),
    )
    .unwrap();
    let a = seq
        .submit(Bump {
            t,
            key: 1,
            by: 5,
            cap: 8,
        })
        .unwrap();
    let b = seq
        .submit(Bump {
            t,
            key: 1,
            by: 5,
            cap: 8,
        })
        .unwrap();
    let c = seq
        .submit(Bump {
            t,
            key: 1,
            by: 3,
            cap: 8,
        })
        .unwrap();
    assert_eq!(a.wait().unwrap(), Outcome::Committed(5));
    assert_eq!(b.wait().unwrap(), Outcome::Aborted);
    assert_eq!(c.wait().unwrap(), Outcome::Committed(8));
    seq.shutdown().unwrap();
}

#[test]
fn batches_are_cut_by_size_and_by_time_with_consecutive_timestamps() {
    let seen: Arc<parking_lot::Mutex<Vec<(u64, u64, usize)>>> = Arc::default();
    let seen2 = seen.clone();
    let sink: BatchSink = Box::new(move |b: Batch| {
        seen2.lock().push((b.number, b.first_ts, b.txns.len()));
        let n = b.txns.len();
        b.release.executed(
            (0..n)
                .map(|_| Ok(Outcome::Committed(Box::new(0u64) as _)))
                .collect(),
        );
    });
    let cfg = SequencerConfig {
        batch_size: 10,
        batch_time: Duration::from_millis(50),
    };
    let seq = Sequencer::start(cfg, 5, 100, None, sink).unwrap();
    let t = TableId::from_u32(0);
    // 25 at once: two full batches, then 5 cut by time.
    let rs: Vec<_> = (0..25)
        .map(|i| {
            seq.submit(Bump {
                t,
                key: i,
                by: 1,
                cap: 9,
            })
            .unwrap()
        })
        .collect();
    for r in rs {
        r.wait().unwrap();
    }
    seq.shutdown().unwrap();
    let seen = seen.lock().clone();
    // Numbers and timestamps continue without a gap from (5, 100).
    let mut want_ts = 100;
    for (i, &(num, ts, n)) in seen.iter().enumerate() {
        assert_eq!(num, 5 + i as u64);
        assert_eq!(ts, want_ts);
        assert!(n <= 10);
        want_ts += n as u64;
    }
    assert_eq!(want_ts, 125);
    // At least the first batch was full (the 25 were queued together or
    // nearly: the time cut is 50 ms).
    assert!(seen.iter().any(|&(_, _, n)| n == 10), "{seen:?}");
}

#[test]
fn outcomes_are_released_only_after_execution() {
    let held: Arc<parking_lot::Mutex<Vec<Batch>>> = Arc::default();
    let held2 = held.clone();
    let sink: BatchSink = Box::new(move |b| held2.lock().push(b));
    let seq = Sequencer::start(SequencerConfig::default(), 0, 0, None, sink).unwrap();
    let t = TableId::from_u32(0);
    let mut r = seq
        .submit(Bump {
            t,
            key: 1,
            by: 1,
            cap: 9,
        })
        .unwrap();
    // Wait until the batch is cut, then check the receipt is not released.
    while held.lock().is_empty() {
        std::thread::sleep(Duration::from_millis(1));
    }
    for _ in 0..3 {
        r = match r.try_wait() {
            Ok(o) => panic!("released before execution: {o:?}"),
            Err(r) => r,
        };
        std::thread::sleep(Duration::from_millis(5));
    }
    let b = held.lock().pop().unwrap();
    b.release
        .executed(vec![Ok(Outcome::Committed(Box::new(77u64) as _))]);
    assert_eq!(r.wait().unwrap(), Outcome::Committed(77));
    seq.shutdown().unwrap();
}

#[test]
fn the_input_log_holds_every_batch_and_replays_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    let (db, t) = db_with_table();
    let log = InputLog::create(dir.path(), 1, 0, 4096).unwrap();
    let cfg = SequencerConfig {
        batch_size: 16,
        batch_time: Duration::from_millis(1),
    };
    let seq = Sequencer::start(cfg, 0, 0, Some(log), serial::sink(db.worker().unwrap())).unwrap();
    let mut rs = Vec::new();
    for i in 0..300u64 {
        // Some abort: their inputs are logged too.
        rs.push(
            seq.submit(Bump {
                t,
                key: i % 7,
                by: i % 5,
                cap: 60,
            })
            .unwrap(),
        );
    }
    let outcomes: Vec<_> = rs.into_iter().map(|r| r.wait().unwrap()).collect();
    assert!(outcomes.contains(&Outcome::Aborted));
    let stats = seq.shutdown().unwrap();
    assert!(stats.input_bytes > 0);
    // Small segments: the log spans several files.
    assert!(segment::list_segments(dir.path()).unwrap()[&0].len() > 1);
    let scan = read_input_log(dir.path()).unwrap();
    assert!(scan.torn.is_none());
    assert_eq!(
        scan.batches.iter().map(|b| b.entries.len()).sum::<usize>(),
        300
    );
    for (i, (id, args)) in scan
        .batches
        .iter()
        .flat_map(|b| b.entries.iter())
        .enumerate()
    {
        let p = Bump::decode(args).unwrap();
        assert_eq!(*id, 7);
        let i = i as u64;
        assert_eq!(
            p,
            Bump {
                t,
                key: i % 7,
                by: i % 5,
                cap: 60
            }
        );
    }
    // Replay into a fresh database: the same state.
    let (db2, t2) = db_with_table();
    assert_eq!(t2, t);
    let n = serial::replay(
        &mut db2.worker().unwrap(),
        &scan,
        &procs(),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(n, 300);
    assert_eq!(state(&db, t), state(&db2, t2));
}

#[test]
fn a_torn_input_tail_is_cut_and_damage_before_the_end_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = TableId::from_u32(0);
    let mut log = InputLog::create(dir.path(), 1, 0, 1 << 20).unwrap();
    for b in 0..3u64 {
        let args: Vec<Vec<u8>> = (0..4)
            .map(|i| {
                let mut a = Vec::new();
                Procedure::encode(
                    &Bump {
                        t,
                        key: b * 4 + i,
                        by: 1,
                        cap: 9,
                    },
                    &mut a,
                );
                a
            })
            .collect();
        log.append(b, b * 4, args.iter().map(|a| (7u16, &a[..])))
            .unwrap();
    }
    log.sync().unwrap();
    drop(log);
    let path = dir.path().join(segment::segment_name(0, 1));
    let whole = std::fs::read(&path).unwrap();
    assert_eq!(read_input_log(dir.path()).unwrap().batches.len(), 3);
    // A torn last block: two whole batches and the cut position.
    std::fs::write(&path, &whole[..whole.len() - 10]).unwrap();
    let scan = read_input_log(dir.path()).unwrap();
    assert_eq!(scan.batches.len(), 2);
    let (p, off, _) = scan.torn.clone().unwrap();
    assert_eq!(p, path);
    assert_eq!(off as usize, (whole.len()) / 3 * 2);
    // A flipped byte in the first block, with valid blocks after it:
    // damage, named with the file.
    let mut bad = whole.clone();
    bad[60] ^= 0xFF;
    std::fs::write(&path, &bad).unwrap();
    let e = read_input_log(dir.path()).unwrap_err();
    assert!(
        matches!(e, Error::Corrupt(ref m) if m.contains("log-000-00000001")),
        "{e}"
    );
    // A missing batch (the second block removed): a gap, refused.
    let third = whole.len() / 3;
    let mut gap = whole[..third].to_vec();
    gap.extend_from_slice(&whole[2 * third..]);
    std::fs::write(&path, &gap).unwrap();
    let e = read_input_log(dir.path()).unwrap_err();
    assert!(
        matches!(e, Error::Corrupt(ref m) if m.contains("missing") || m.contains("follows")),
        "{e}"
    );
}

#[test]
fn a_redo_log_with_an_input_block_is_refused_as_damage() {
    use crate::log::format::{self, BlockKind, BlockReader};
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(Options::durable(dir.path())).unwrap();
        let t = db.create_table("t").unwrap();
        let mut w = db.worker().unwrap();
        w.run(|tx| tx.put(t, b"k", b"v")).unwrap();
        drop(w);
        drop(db);
    }
    let segs = segment::list_segments(dir.path()).unwrap();
    let (_, path) = segs[&0].last().unwrap().clone();
    let mut bytes = std::fs::read(&path).unwrap();
    let last = BlockReader::new(&bytes)
        .filter_map(Result::ok)
        .last()
        .unwrap()
        .header;
    let mut payload = Vec::new();
    encode_payload(&mut payload, 0, std::iter::empty());
    format::write_block(
        &mut bytes,
        BlockKind::Input,
        0,
        last.seq + 1,
        last.epoch,
        &payload,
    );
    std::fs::write(&path, &bytes).unwrap();
    let e = Database::open(Options::durable(dir.path())).err().unwrap();
    assert!(e.to_string().contains("input-log block"), "{e}");
}

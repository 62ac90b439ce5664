//! Serializability of recorded histories, checked by an independent
//! list-append checker (in the style of Elle, Kingsbury and Alvaro, VLDB
//! 2020). Keys hold lists of integers; transactions read whole lists or
//! append unique values. Because every append is unique and lists only grow,
//! the final list of a key gives that key's version order, every read names
//! the exact version it saw, and the dependency graph is recovered without
//! trusting the engine:
//!
//! * ww: the writer of element i precedes the writer of element i+1;
//! * wr: the writer of a read's last element precedes the reader;
//! * rw: a reader that saw a prefix of length n precedes the writer of
//!   element n (the version it did not see).
//!
//! A history is serializable iff the graph is acyclic and every read is a
//! prefix of the final list (no aborted or intermediate reads). The checker
//! knows nothing about Tessera; controls feed it hand-made histories.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Mutex;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::{
    Capabilities, Database, Options, Protocol, RoccRegistration, ScanOptions, ScanValidation,
    TableId, ROCC_RANGE_SIZE,
};

#[derive(Clone, Debug)]
enum Op {
    /// key, observed list
    Read(u32, Vec<u32>),
    /// key, appended value
    Append(u32, u32),
}

type Txn = Vec<Op>;

/// Check a list-append history; `Err` explains the first anomaly found.
fn check(history: &[Txn], finals: &HashMap<u32, Vec<u32>>) -> Result<(), String> {
    check_edges(history, finals, true)
}

/// With `rw == false`, anti-dependency edges are left out of the graph: the
/// check then accepts write skew (G2) and looks only for what snapshot
/// isolation also forbids: lost or phantom appends, reads of versions that
/// never committed or were intermediate (G1), and cycles of ww/wr edges
/// (G0, G1c).
fn check_edges(history: &[Txn], finals: &HashMap<u32, Vec<u32>>, rw: bool) -> Result<(), String> {
    // Who appended each (key, value)?
    let mut writer: HashMap<(u32, u32), usize> = HashMap::new();
    for (t, ops) in history.iter().enumerate() {
        for op in ops {
            if let Op::Append(k, v) = op {
                if writer.insert((*k, *v), t).is_some() {
                    return Err(format!("value {v} appended twice to key {k}"));
                }
            }
        }
    }
    let empty = Vec::new();
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); history.len()];
    // ww
    for (k, list) in finals {
        for w in list.windows(2) {
            let a = writer
                .get(&(*k, w[0]))
                .ok_or(format!("final {k} holds unknown {}", w[0]))?;
            let b = writer
                .get(&(*k, w[1]))
                .ok_or(format!("final {k} holds unknown {}", w[1]))?;
            if a != b {
                edges[*a].push(*b);
            }
        }
        for v in list {
            if !writer.contains_key(&(*k, *v)) {
                return Err(format!(
                    "key {k} holds {v} that no committed transaction appended"
                ));
            }
        }
    }
    for ((k, v), _) in writer.iter() {
        if !finals.get(k).unwrap_or(&empty).contains(v) {
            return Err(format!("committed append {v} to key {k} is lost"));
        }
    }
    // wr and rw
    for (t, ops) in history.iter().enumerate() {
        for op in ops {
            let Op::Read(k, seen) = op else { continue };
            let fin = finals.get(k).unwrap_or(&empty);
            if seen.len() > fin.len() || fin[..seen.len()] != seen[..] {
                return Err(format!(
                    "txn {t} read {seen:?} of key {k}, not a prefix of {fin:?} (G1)"
                ));
            }
            if let Some(last) = seen.last() {
                let w = writer[&(*k, *last)];
                if w != t {
                    edges[w].push(t);
                }
            }
            if !rw {
                continue;
            }
            if let Some(next) = fin.get(seen.len()) {
                let w = writer[&(*k, *next)];
                if w != t {
                    edges[t].push(w);
                }
            }
        }
    }
    // cycle detection (iterative three-colour DFS)
    let mut colour = vec![0u8; history.len()];
    for start in 0..history.len() {
        if colour[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        colour[start] = 1;
        while let Some((n, i)) = stack.pop() {
            if i < edges[n].len() {
                stack.push((n, i + 1));
                let m = edges[n][i];
                match colour[m] {
                    0 => {
                        colour[m] = 1;
                        stack.push((m, 0));
                    }
                    1 => {
                        let cycle: Vec<usize> = stack
                            .iter()
                            .map(|(x, _)| *x)
                            .skip_while(|x| *x != m)
                            .collect();
                        return Err(format!("dependency cycle through transactions {cycle:?}"));
                    }
                    _ => {}
                }
            } else {
                colour[n] = 2;
            }
        }
    }
    Ok(())
}

#[test]
fn checker_rejects_write_skew() {
    // T0 and T1 both read x and y empty; T0 appends to x, T1 to y: G2.
    let h = vec![
        vec![Op::Read(1, vec![]), Op::Read(2, vec![]), Op::Append(1, 10)],
        vec![Op::Read(1, vec![]), Op::Read(2, vec![]), Op::Append(2, 20)],
    ];
    let finals = HashMap::from([(1, vec![10]), (2, vec![20])]);
    let e = check(&h, &finals).unwrap_err();
    assert!(e.contains("cycle"), "{e}");
}

#[test]
fn checker_rejects_lost_update_and_dirty_read() {
    // Both read x = [] and append; the final order puts T1 after T0 though
    // T1 never saw T0's append: rw T1 -> T0 and ww T0 -> T1.
    let h = vec![
        vec![Op::Read(1, vec![]), Op::Append(1, 10)],
        vec![Op::Read(1, vec![]), Op::Append(1, 11)],
    ];
    let finals = HashMap::from([(1, vec![10, 11])]);
    assert!(check(&h, &finals).is_err());
    // A read of a value no committed transaction wrote (aborted read).
    let h = vec![vec![Op::Read(1, vec![99])]];
    assert!(check(&h, &HashMap::from([(1, vec![])])).is_err());
}

#[test]
fn checker_accepts_a_serial_history() {
    let h = vec![
        vec![Op::Append(1, 10)],
        vec![Op::Read(1, vec![10]), Op::Append(2, 20)],
        vec![
            Op::Read(2, vec![20]),
            Op::Read(1, vec![10]),
            Op::Append(1, 11),
        ],
        vec![Op::Read(1, vec![10, 11])],
    ];
    let finals = HashMap::from([(1, vec![10, 11]), (2, vec![20])]);
    check(&h, &finals).unwrap();
}

fn decode(v: &[u8]) -> Vec<u32> {
    v.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Run random list-append transactions and return the committed history
/// and the final lists.
fn record(
    protocol: Protocol,
    threads: usize,
    per_thread: usize,
    keys: u32,
) -> (Vec<Txn>, HashMap<u32, Vec<u32>>) {
    record_with(protocol, threads, per_thread, keys, false)
}

/// As [`record`]; with `prefill`, every key starts as an empty list (a row
/// with an empty value) instead of absent, so the run does no inserts.
fn record_with(
    protocol: Protocol,
    threads: usize,
    per_thread: usize,
    keys: u32,
    prefill: bool,
) -> (Vec<Txn>, HashMap<u32, Vec<u32>>) {
    record_opts(
        Options::in_memory().protocol(protocol),
        threads,
        per_thread,
        keys,
        prefill,
        false,
        false,
    )
}

/// As [`record_with`], on a database opened with `opts`; with `scans`, a
/// third of the reads are range scans over up to four consecutive keys,
/// each key in the range recorded as a read (an absent key as the empty
/// list): a scan that misses a concurrent insert or append is a read of a
/// version the checker orders, so phantoms show up as cycles. With
/// `spread`, half the threads run in worker slots 0, 1, ... and the other
/// half in slots 64, 65, ... (the slots between are held idle), so that
/// pairs of running transactions share a bit of SSN's per-version readers
/// bitmap; `opts` must then allow `64 + threads` workers.
fn record_opts(
    opts: Options,
    threads: usize,
    per_thread: usize,
    keys: u32,
    prefill: bool,
    scans: bool,
    spread: bool,
) -> (Vec<Txn>, HashMap<u32, Vec<u32>>) {
    let db = Database::open(opts).unwrap();
    let t: TableId = db.create_table("lists").unwrap();
    if prefill {
        let mut w = db.worker().unwrap();
        w.run(|tx| {
            for k in 0..keys {
                tx.insert(t, &k.to_be_bytes(), &[])?;
            }
            Ok(())
        })
        .unwrap();
    }
    let mut workers = Vec::new();
    let mut idle = Vec::new();
    let low = if spread { threads.div_ceil(2) } else { threads };
    let opened = if spread { 64 + threads - low } else { threads };
    // Slots are handed out lowest first.
    for i in 0..opened {
        let w = db.worker().unwrap();
        if i < low || i >= 64 {
            workers.push(w);
        } else {
            idle.push(w);
        }
    }
    let history = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for (th, mut w) in workers.into_iter().enumerate() {
            let history = &history;
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(0x5E71A1 + th as u64);
                let mut next = (th as u32) << 24;
                for _ in 0..per_thread {
                    let n = rng.gen_range(1..=4);
                    let plan: Vec<(bool, u32)> = (0..n)
                        .map(|_| (rng.gen_bool(0.5), rng.gen_range(0..keys)))
                        .collect();
                    // For each read of the plan: scan this many keys from
                    // its key on (0: a point read).
                    let spans: Vec<u32> = plan
                        .iter()
                        .map(|&(append, _)| {
                            if scans && !append && rng.gen_bool(1.0 / 3.0) {
                                rng.gen_range(1..=4)
                            } else {
                                0
                            }
                        })
                        .collect();
                    let mut vals = Vec::new();
                    for _ in 0..n {
                        next += 1;
                        vals.push(next);
                    }
                    // `run` retries conflicts with randomized backoff: a
                    // bare retry loop livelocks 2PL on a hot key when
                    // threads outnumber cores (lock holders get descheduled).
                    let ops = w
                        .run(|tx| {
                            // Half the threads announce their keys first
                            // (`prefetch` is a hint: the history must be as
                            // serializable with it as without).
                            if th % 2 == 0 {
                                let ks: Vec<[u8; 4]> =
                                    plan.iter().map(|&(_, k)| k.to_be_bytes()).collect();
                                let refs: Vec<&[u8]> = ks.iter().map(|k| &k[..]).collect();
                                tx.prefetch(t, &refs, 16);
                            }
                            let mut ops = Vec::new();
                            for (i, &(append, k)) in plan.iter().enumerate() {
                                if spans[i] > 0 {
                                    let end = (k + spans[i]).min(keys);
                                    let mut found = HashMap::new();
                                    tx.scan(
                                        t,
                                        Bound::Included(&k.to_be_bytes()[..]),
                                        Bound::Excluded(&end.to_be_bytes()[..]),
                                        ScanOptions::new(),
                                        |key, v| {
                                            let key = u32::from_be_bytes(key.try_into().unwrap());
                                            found.insert(key, decode(v));
                                            true
                                        },
                                    )?;
                                    for key in k..end {
                                        let l = found.remove(&key).unwrap_or_default();
                                        ops.push(Op::Read(key, l));
                                    }
                                    continue;
                                }
                                let cur =
                                    tx.get(t, &k.to_be_bytes())?.map(decode).unwrap_or_default();
                                if append {
                                    let mut bytes: Vec<u8> =
                                        cur.iter().flat_map(|x| x.to_le_bytes()).collect();
                                    bytes.extend_from_slice(&vals[i].to_le_bytes());
                                    tx.put(t, &k.to_be_bytes(), &bytes)?;
                                    ops.push(Op::Append(k, vals[i]));
                                } else {
                                    ops.push(Op::Read(k, cur));
                                }
                            }
                            Ok(ops)
                        })
                        .unwrap();
                    history.lock().unwrap().push(ops);
                }
            });
        }
    });
    drop(idle);
    let mut w = db.worker().unwrap();
    let mut finals = HashMap::new();
    for k in 0..keys {
        let l = w
            .run(|tx| Ok(tx.get(t, &k.to_be_bytes())?.map(decode).unwrap_or_default()))
            .unwrap();
        finals.insert(k, l);
    }
    (history.into_inner().unwrap(), finals)
}

/// The protocols whose capabilities satisfy `pred`, in the order of
/// [`Protocol::INTERACTIVE`]: a newly listed protocol joins every test below whose
/// property it claims. Panics if none does (a filter that selects nothing
/// would make a test vacuous).
fn protocols(pred: impl Fn(Capabilities) -> bool) -> Vec<Protocol> {
    let ps: Vec<Protocol> = Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| pred(p.caps()))
        .collect();
    assert!(!ps.is_empty(), "no protocol has the capability under test");
    ps
}

/// Every serializable protocol: the checker must find no anomaly, with
/// every key absent at the start (the first append to a key inserts it)
/// and with every key present from the start as an empty list (every
/// transaction then reads and overwrites versions, no inserts: for SSN its
/// stamps alone must order them).
#[test]
fn list_append_histories_are_serializable() {
    for p in protocols(|c| c.serializable) {
        for prefill in [false, true] {
            for keys in [3, 8, 32] {
                let (h, finals) = record_with(p, 6, 1_000, keys, prefill);
                assert_eq!(h.len(), 6 * 1_000, "{p}");
                if let Err(e) = check(&h, &finals) {
                    panic!(
                        "{p} produced a non-serializable history with {keys} keys \
                         (prefill={prefill}): {e}"
                    );
                }
            }
        }
    }
}

/// SSN with more than 64 worker slots: slots `s` and `s + 64` share a bit of
/// a version's readers bitmap, and the threads run in such pairs. A reader
/// that cleared its shared bit at commit would erase a running partner's
/// registration (the bits stay set then; see `SsnMeta::readers`).
#[test]
fn ssn_histories_are_serializable_when_slots_share_reader_bits() {
    for prefill in [false, true] {
        for keys in [3, 8] {
            let opts = Options::in_memory().protocol(Protocol::Ssn).workers(72);
            let (h, finals) = record_opts(opts, 6, 1_000, keys, prefill, false, true);
            assert_eq!(h.len(), 6 * 1_000);
            if let Err(e) = check(&h, &finals) {
                panic!("ssn with shared reader bits, {keys} keys (prefill={prefill}): {e}");
            }
        }
    }
}

/// Every serializable protocol that claims phantom safety, with range scans
/// among the reads: a scan that missed a concurrent insert (or an append
/// to a scanned row) and still committed shows up as a cycle. ROCC runs
/// twice more, with ranges of one and two records (a scan then spans
/// several ranges, and splits happen during the run) and with lists of
/// one slot (positions are overwritten and must abort, not be missed);
/// Silo runs once more with its scans validated by a repeated scan.
#[test]
fn scan_list_append_histories_are_serializable() {
    let mut runs: Vec<(String, Options)> = protocols(|c| c.serializable && c.phantom_safe)
        .into_iter()
        .map(|p| (p.to_string(), Options::in_memory().protocol(p)))
        .collect();
    for (size, slots) in [(1, 5000), (2, 1)] {
        runs.push((
            format!("rocc (range size {size}, {slots} slots)"),
            Options::in_memory()
                .protocol(Protocol::Rocc)
                .rocc_range_size(size)
                .rocc_slots(slots),
        ));
    }
    // Registration only where a scan is in flight: writers skip most
    // ranges, and a scan must still catch every writer it has to (with
    // splits, with the default ranges, and under GWV's one list).
    for (p, size) in [
        (Protocol::Rocc, 1),
        (Protocol::Rocc, ROCC_RANGE_SIZE),
        (Protocol::Gwv, ROCC_RANGE_SIZE),
    ] {
        runs.push((
            format!("{p} (registration scanned, range size {size})"),
            Options::in_memory()
                .protocol(p)
                .rocc_range_size(size)
                .rocc_registration(RoccRegistration::Scanned),
        ));
    }
    // MVRCC with tiny ranges: tables start empty (prefill off) or small,
    // so partitions are replaced while the run goes on (every doubling).
    for size in [1, 3] {
        runs.push((
            format!("mvrcc (range size {size})"),
            Options::in_memory()
                .protocol(Protocol::Mvrcc)
                .rocc_range_size(size),
        ));
    }
    runs.push((
        "silo (scan validation reread)".into(),
        Options::in_memory()
            .protocol(Protocol::Silo)
            .scan_validation(ScanValidation::Reread),
    ));
    for (name, opts) in runs {
        for prefill in [false, true] {
            for keys in [8, 32] {
                let (h, finals) = record_opts(opts.clone(), 6, 800, keys, prefill, true, false);
                if let Err(e) = check(&h, &finals) {
                    panic!(
                        "{name} produced a non-serializable history with scans, {keys} keys \
                         (prefill={prefill}): {e}"
                    );
                }
            }
        }
    }
}

/// Every listed protocol is checked by one of the history tests here: a
/// new protocol that is neither serializable nor snapshot-reading (nor the
/// no-concurrency-control baseline, nor read committed, which the PL-2
/// register test below covers) needs a property of its own.
#[test]
fn every_protocol_has_a_history_check() {
    for p in Protocol::INTERACTIVE {
        let c = p.caps();
        assert!(
            c.serializable || c.snapshot_reads || p == Protocol::NoCc || p == Protocol::Rc,
            "{p}: no list-append history test covers it"
        );
    }
}

/// Without concurrency control, the same workload produces anomalies the
/// checker finds (a sanity check that the test has teeth). Anomalies are
/// likely but not certain in one run, so several runs are tried.
#[test]
fn nocc_histories_are_caught() {
    let caught = (0..5).any(|_| {
        let (h, finals) = record(Protocol::NoCc, 4, 3_000, 2);
        check(&h, &finals).is_err()
    });
    assert!(
        caught,
        "no anomaly found in five contended runs without concurrency control"
    );
}

/// Snapshot isolation (every protocol that reads snapshots without
/// claiming serializability) is not serializable, but it forbids lost
/// updates, dirty and intermediate reads and ww/wr cycles: the checker
/// without rw edges must pass.
#[test]
fn snapshot_list_append_histories_have_no_g0_g1_or_lost_appends() {
    for p in protocols(|c| c.snapshot_reads && !c.serializable) {
        for keys in [3, 8, 32] {
            for prefill in [false, true] {
                let (h, finals) = record_with(p, 6, 1_500, keys, prefill);
                assert_eq!(h.len(), 6 * 1_500, "{p}");
                if let Err(e) = check_edges(&h, &finals, false) {
                    panic!(
                        "{p} produced a G0/G1/lost-update anomaly with {keys} keys \
                         (prefill={prefill}): {e}"
                    );
                }
            }
        }
    }
}

#[test]
fn checker_without_rw_edges_accepts_write_skew_but_not_lost_updates() {
    let h = vec![
        vec![Op::Read(1, vec![]), Op::Read(2, vec![]), Op::Append(1, 10)],
        vec![Op::Read(1, vec![]), Op::Read(2, vec![]), Op::Append(2, 20)],
    ];
    let finals = HashMap::from([(1, vec![10]), (2, vec![20])]);
    check_edges(&h, &finals, false).unwrap();
    // Lost update: both appended to [] but only one survived.
    let h = vec![
        vec![Op::Read(1, vec![]), Op::Append(1, 10)],
        vec![Op::Read(1, vec![]), Op::Append(1, 11)],
    ];
    assert!(check_edges(&h, &HashMap::from([(1, vec![11])]), false).is_err());
    // A ww/wr cycle: T0 reads T1's append to x, T1 reads T0's append to y.
    let h = vec![
        vec![Op::Append(2, 20), Op::Read(1, vec![10])],
        vec![Op::Append(1, 10), Op::Read(2, vec![20])],
    ];
    let finals = HashMap::from([(1, vec![10]), (2, vec![20])]);
    assert!(check_edges(&h, &finals, false).is_err());
}

/// A list-append transaction as a deterministic procedure: reads and
/// appends declared up front (an append reads its key too), its observed
/// history as the output.
///
/// Under PWV it is a piece per operation: the first `cp` of them before
/// the commit point (abortable, their writes hidden until the decision),
/// the rest after it (visible as each completes), and a last abortable
/// piece, the abort statement, which aborts the transaction if `abort` is
/// set, after some of its appends have run.
#[derive(Clone, Debug)]
struct ListAppend {
    t: TableId,
    /// (append?, key, value to append)
    plan: Vec<(bool, u32, u32)>,
    /// The operations before the commit point.
    cp: u8,
    /// The abort statement fires.
    abort: bool,
}

impl ListAppend {
    fn new(t: TableId, plan: Vec<(bool, u32, u32)>) -> ListAppend {
        ListAppend {
            t,
            plan,
            cp: 0,
            abort: false,
        }
    }

    /// Operation `i`: read the list at its key, append if it is an append;
    /// what it observed.
    fn op<T: tessera::Transaction>(&self, i: usize, tx: &mut T) -> tessera::TxResult<Op> {
        let (append, k, v) = self.plan[i];
        let cur = tx
            .get(self.t, &k.to_be_bytes())?
            .map(decode)
            .unwrap_or_default();
        Ok(if append {
            let mut bytes: Vec<u8> = cur.iter().flat_map(|x| x.to_le_bytes()).collect();
            bytes.extend_from_slice(&v.to_le_bytes());
            tx.put(self.t, &k.to_be_bytes(), &bytes)?;
            Op::Append(k, v)
        } else {
            Op::Read(k, cur)
        })
    }
}

impl tessera::Request for ListAppend {
    type Output = Txn;
    fn run<T: tessera::Transaction>(&mut self, tx: &mut T) -> tessera::TxResult<Txn> {
        let ops = (0..self.plan.len())
            .map(|i| self.op(i, tx))
            .collect::<tessera::TxResult<Txn>>()?;
        if self.abort {
            return tx.user_abort();
        }
        Ok(ops)
    }
    fn declare(&self, keys: &mut tessera::KeySet) -> bool {
        for &(append, k, _) in &self.plan {
            if append {
                keys.write(self.t, &k.to_be_bytes());
            } else {
                keys.read(self.t, &k.to_be_bytes());
            }
        }
        true
    }
}

impl tessera::det::Procedure for ListAppend {
    const ID: tessera::det::ProcId = 0x7001;
    const NAME: &'static str = "list-append";
    /// Lazy: a transaction of appends only tells its client nothing it
    /// must read, so its now-phase ends at once and the appends are done
    /// when substantiated; one that reads runs eagerly (an external read).
    fn now_phase(
        &mut self,
        _tx: &mut tessera::Txn<'_>,
    ) -> tessera::TxResult<tessera::det::NowPhase<Txn>> {
        Ok(if self.plan.iter().all(|&(append, _, _)| append) {
            tessera::det::NowPhase::Ended(
                self.plan
                    .iter()
                    .map(|&(_, k, v)| Op::Append(k, v))
                    .collect(),
            )
        } else {
            tessera::det::NowPhase::Eager
        })
    }
    fn later_phase(&mut self, tx: &mut tessera::Txn<'_>) -> tessera::TxResult<()> {
        tessera::Request::run(self, tx).map(|_| ())
    }
    fn pieces(&self, plan: &mut tessera::det::PiecePlan) -> bool {
        for (i, &(append, k, _)) in self.plan.iter().enumerate() {
            let p = plan.piece(i < usize::from(self.cp));
            if append {
                plan.write(p, self.t, &k.to_be_bytes());
            } else {
                plan.read(p, self.t, &k.to_be_bytes());
            }
        }
        // The abort statement, with no keys.
        plan.piece(true);
        true
    }
    fn run_piece(
        &self,
        i: u16,
        tx: &mut tessera::Txn<'_>,
        io: &mut tessera::det::PieceIo<'_>,
    ) -> tessera::TxResult<()> {
        if usize::from(i) == self.plan.len() {
            return if self.abort { tx.user_abort() } else { Ok(()) };
        }
        if let Op::Read(_, seen) = self.op(usize::from(i), tx)? {
            let bytes: Vec<u8> = seen.iter().flat_map(|x| x.to_le_bytes()).collect();
            io.output(&bytes);
        }
        Ok(())
    }
    fn pieces_output(&mut self, outputs: &[&[u8]]) -> tessera::TxResult<Txn> {
        Ok(self
            .plan
            .iter()
            .zip(outputs)
            .map(|(&(append, k, v), out)| {
                if append {
                    Op::Append(k, v)
                } else {
                    Op::Read(k, decode(out))
                }
            })
            .collect())
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.t.as_u32().to_le_bytes());
        out.push(self.cp);
        out.push(u8::from(self.abort));
        for &(a, k, v) in &self.plan {
            out.push(u8::from(a));
            out.extend_from_slice(&k.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    fn decode(b: &[u8]) -> Result<Self, String> {
        if b.len() < 6 || !(b.len() - 6).is_multiple_of(9) {
            return Err(format!("{} bytes", b.len()));
        }
        let u = |s: &[u8]| u32::from_le_bytes(s.try_into().unwrap());
        Ok(ListAppend {
            t: TableId::from_u32(u(&b[..4])),
            cp: b[4],
            abort: b[5] == 1,
            plan: b[6..]
                .chunks_exact(9)
                .map(|c| (c[0] == 1, u(&c[1..5]), u(&c[5..9])))
                .collect(),
        })
    }
}

/// The deterministic protocols (BOHM, its 2PL baseline, lazy
/// transactions, whose histories are checked after substantiation: the
/// final lists are read once every later phase has run, and PWV, with a
/// piece per operation, random commit points and one transaction in eight
/// aborting after its pieces ran), fed by several submitting threads at
/// once through small batches and several CC and execution threads: the
/// checker finds no anomaly in their histories. Under PWV an aborted
/// transaction's appends must leave no trace: an element in a final list
/// that no committed transaction appended fails the check.
#[test]
fn deterministic_list_append_histories_are_serializable() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use tessera::cc::bohm::{Bohm, BohmConfig, DetProtocol};
    use tessera::det::{Outcome, SequencerConfig};
    for protocol in [
        DetProtocol::Bohm,
        DetProtocol::TwoPlOrdered,
        DetProtocol::Lazy,
        DetProtocol::Pwv,
    ] {
        for keys in [3u32, 8, 32] {
            let mut b = Bohm::new(
                &["lists"],
                BohmConfig {
                    // Lazy: one stickification thread at 8 keys,
                    // partitioned otherwise; a small chain bound hands
                    // chains to the workers while readers substantiate.
                    cc_threads: if protocol == DetProtocol::Lazy && keys == 8 {
                        1
                    } else {
                        2
                    },
                    chain_bound: 4,
                    exec_threads: 3,
                    sequencer: SequencerConfig {
                        batch_size: 64,
                        batch_time: std::time::Duration::from_micros(300),
                    },
                    protocol,
                    read_annotation: true,
                    ..Default::default()
                },
            )
            .unwrap();
            let t = b.table("lists").unwrap();
            b.start().unwrap();
            let history = Mutex::new(Vec::new());
            let aborted = AtomicUsize::new(0);
            std::thread::scope(|s| {
                for th in 0..4u32 {
                    let (b, history, aborted) = (&b, &history, &aborted);
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(0xB0B + u64::from(th));
                        let mut next = th << 24;
                        let receipts: Vec<_> = (0..800)
                            .map(|_| {
                                let plan: Vec<_> = (0..rng.gen_range(1..=4))
                                    .map(|_| {
                                        next += 1;
                                        (rng.gen_bool(0.5), rng.gen_range(0..keys), next)
                                    })
                                    .collect();
                                let mut la = ListAppend::new(t, plan);
                                if protocol == DetProtocol::Pwv {
                                    la.cp = rng.gen_range(0..=la.plan.len() as u8);
                                    la.abort = rng.gen_ratio(1, 8);
                                }
                                let abort = la.abort;
                                (b.submit(la).unwrap(), abort)
                            })
                            .collect();
                        for (r, abort) in receipts {
                            match (r.wait().unwrap(), abort) {
                                (Outcome::Committed(ops), false) => {
                                    history.lock().unwrap().push(ops)
                                }
                                (Outcome::Aborted, true) => {
                                    aborted.fetch_add(1, Relaxed);
                                }
                                (o, _) => panic!("{protocol:?}: {o:?}, abort statement {abort}"),
                            }
                        }
                    });
                }
            });
            b.shutdown().unwrap();
            let mut finals: HashMap<u32, Vec<u32>> = (0..keys).map(|k| (k, Vec::new())).collect();
            for (k, v) in b.dump(t).unwrap() {
                finals.insert(u32::from_be_bytes(k[..].try_into().unwrap()), decode(&v));
            }
            let h = history.into_inner().unwrap();
            let aborted = aborted.into_inner();
            assert_eq!(h.len() + aborted, 4 * 800);
            assert_eq!(aborted > 0, protocol == DetProtocol::Pwv, "{protocol:?}");
            if let Err(e) = check(&h, &finals) {
                if let Some(ids) = e.split('[').nth(1) {
                    for i in ids
                        .trim_end_matches(']')
                        .split(", ")
                        .filter_map(|x| x.parse::<usize>().ok())
                    {
                        let brief: Vec<String> = h[i]
                            .iter()
                            .map(|o| match o {
                                Op::Read(k, l) => {
                                    format!("R{k}(len {}, last {:?})", l.len(), l.last())
                                }
                                Op::Append(k, v) => format!("A{k}({v})"),
                            })
                            .collect();
                        eprintln!("txn {i}: {brief:?}");
                    }
                }
                for (k, l) in &finals {
                    eprintln!(
                        "final {k}: len {}, tail {:?}",
                        l.len(),
                        &l[l.len().saturating_sub(12)..]
                    );
                }
                panic!("{protocol:?} produced a non-serializable history with {keys} keys: {e}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Read committed (Adya's PL-2): register histories.
//
// Read committed allows lost updates, so list appends (read, then write the
// longer list) lose elements and the version order is no longer the final
// list. This test uses registers instead: every write is a blind put of a
// value unique to the attempt that wrote it, so each value read names its
// writer. It checks what PL-2 forbids:
//
// * G1a (aborted read): every value read was written by a committed
//   transaction, by its committed attempt (an attempt that aborted and was
//   retried, or a transaction that aborted itself, wrote values no one may
//   see);
// * G1b (intermediate read): a value read is the last its writer wrote to
//   that key;
// * G0 (write cycle), on the final state: if keys a and b were last written
//   by different transactions Ta and Tb, and each of them wrote both keys,
//   then Ta's write of a follows Tb's and Tb's write of b follows Ta's, a
//   cycle of ww edges.
//
// G1c (cycles of ww and wr edges) is not checked: with blind writes the
// version order of a key is known only at its end.
// ---------------------------------------------------------------------------

/// One attempt of a register transaction, as the test recorded it.
#[derive(Clone, Debug, Default)]
struct RegAttempt {
    /// (key, value read; `None` for missing).
    reads: Vec<(u32, Option<u64>)>,
    /// (key, value written), in order; a key may be written twice.
    writes: Vec<(u32, u64)>,
    committed: bool,
}

/// Check a register history against PL-2; `Err` names the first anomaly.
fn check_pl2(attempts: &[RegAttempt], finals: &HashMap<u32, Option<u64>>) -> Result<(), String> {
    // Each value: its attempt, whether it was that attempt's last write of
    // its key.
    let mut by_value: HashMap<u64, (usize, u32, bool)> = HashMap::new();
    for (i, a) in attempts.iter().enumerate() {
        for (j, &(k, v)) in a.writes.iter().enumerate() {
            let last = !a.writes[j + 1..].iter().any(|&(k2, _)| k2 == k);
            if by_value.insert(v, (i, k, last)).is_some() {
                return Err(format!("value {v} written twice"));
            }
        }
    }
    let named = |k: u32, v: u64, what: &str| -> Result<usize, String> {
        let &(i, wk, last) = by_value
            .get(&v)
            .ok_or_else(|| format!("{what} of key {k} saw {v}, which nobody wrote"))?;
        if wk != k {
            return Err(format!("{what} of key {k} saw {v}, written to key {wk}"));
        }
        if !attempts[i].committed {
            return Err(format!(
                "G1a: {what} of key {k} saw {v}, from an aborted attempt"
            ));
        }
        if !last {
            return Err(format!(
                "G1b: {what} of key {k} saw {v}, an intermediate value"
            ));
        }
        Ok(i)
    };
    for a in attempts {
        if !a.committed {
            continue;
        }
        // (The workload reads before it writes: no read sees its own
        // transaction's write.)
        for &(k, v) in &a.reads {
            if let Some(v) = v {
                named(k, v, "a read")?;
            }
        }
    }
    let mut last: Vec<(u32, usize)> = Vec::new();
    for (&k, v) in finals {
        if let Some(v) = v {
            last.push((k, named(k, *v, "the final state")?));
        }
    }
    last.sort();
    let wrote = |i: usize, k: u32| attempts[i].writes.iter().any(|&(k2, _)| k2 == k);
    for (x, &(a, ta)) in last.iter().enumerate() {
        for &(b, tb) in &last[x + 1..] {
            if ta != tb && wrote(ta, b) && wrote(tb, a) {
                return Err(format!(
                    "G0: key {a} was last written by {ta} and key {b} by {tb}, \
                     and each wrote both"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn pl2_checker_rejects_g0_and_g1() {
    let w = |writes: Vec<(u32, u64)>| RegAttempt {
        writes,
        committed: true,
        ..Default::default()
    };
    // T0 and T1 both write keys 1 and 2; the final state has 1 from T0 and
    // 2 from T1.
    let h = vec![w(vec![(1, 10), (2, 11)]), w(vec![(1, 20), (2, 21)])];
    let finals = HashMap::from([(1, Some(10)), (2, Some(21))]);
    assert!(check_pl2(&h, &finals).unwrap_err().starts_with("G0"));
    // The consistent final state passes.
    let finals = HashMap::from([(1, Some(20)), (2, Some(21))]);
    check_pl2(&h, &finals).unwrap();
    // A read of an aborted attempt's value.
    let mut h = vec![w(vec![(1, 10)]), RegAttempt::default()];
    h[0].committed = false;
    h[1].committed = true;
    h[1].reads.push((1, Some(10)));
    let finals = HashMap::from([(1, None)]);
    assert!(check_pl2(&h, &finals).unwrap_err().starts_with("G1a"));
    // A read of an intermediate value.
    let mut h = vec![w(vec![(1, 10), (1, 11)]), RegAttempt::default()];
    h[1].committed = true;
    h[1].reads.push((1, Some(10)));
    let finals = HashMap::from([(1, Some(11))]);
    assert!(check_pl2(&h, &finals).unwrap_err().starts_with("G1b"));
}

/// Run random register transactions: each reads some keys, then blindly
/// writes values unique to the attempt (some keys twice: a first value that
/// is intermediate), and one in eight aborts itself after writing. Returns
/// every attempt and the final state.
fn record_registers(
    protocol: Protocol,
    threads: usize,
    per_thread: usize,
    keys: u32,
) -> (Vec<RegAttempt>, HashMap<u32, Option<u64>>) {
    let db = Database::open(Options::in_memory().protocol(protocol)).unwrap();
    let t: TableId = db.create_table("registers").unwrap();
    let attempts = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for th in 0..threads {
            let (db, attempts) = (db.clone(), &attempts);
            s.spawn(move || {
                let mut w = db.worker().unwrap();
                let mut rng = SmallRng::seed_from_u64(0x9E61 + th as u64);
                let mut next = (th as u64) << 40;
                let mut mine = Vec::new();
                for _ in 0..per_thread {
                    let reads: Vec<u32> = (0..rng.gen_range(0..=3))
                        .map(|_| rng.gen_range(0..keys))
                        .collect();
                    let writes: Vec<u32> = (0..rng.gen_range(1..=3))
                        .map(|_| rng.gen_range(0..keys))
                        .collect();
                    let twice = rng.gen_bool(0.25);
                    let abort = rng.gen_bool(0.125);
                    let r = w.run(|tx| {
                        // Every attempt is recorded as it goes: one that
                        // fails or is retried wrote values nobody may read.
                        mine.push(RegAttempt::default());
                        for &k in &reads {
                            let v = tx
                                .get(t, &k.to_be_bytes())?
                                .map(|v| u64::from_le_bytes(v.try_into().unwrap()));
                            mine.last_mut().unwrap().reads.push((k, v));
                        }
                        for (i, &k) in writes.iter().enumerate() {
                            for _ in 0..if twice && i == 0 { 2 } else { 1 } {
                                next += 1;
                                mine.last_mut().unwrap().writes.push((k, next));
                                tx.put(t, &k.to_be_bytes(), &next.to_le_bytes())?;
                            }
                        }
                        if abort {
                            return tx.user_abort();
                        }
                        Ok(())
                    });
                    match r {
                        Ok(()) => mine.last_mut().unwrap().committed = true,
                        Err(tessera::Error::UserAbort) => {}
                        Err(e) => panic!("{protocol}: {e}"),
                    }
                }
                attempts.lock().unwrap().extend(mine);
            });
        }
    });
    let mut w = db.worker().unwrap();
    let mut finals = HashMap::new();
    for k in 0..keys {
        let v = w
            .run(|tx| {
                Ok(tx
                    .get(t, &k.to_be_bytes())?
                    .map(|v| u64::from_le_bytes(v.try_into().unwrap())))
            })
            .unwrap();
        finals.insert(k, v);
    }
    (attempts.into_inner().unwrap(), finals)
}

/// Every protocol but nocc promises at least PL-2 (serializability and
/// snapshot isolation imply it); read committed promises nothing more.
#[test]
fn register_histories_have_no_g0_or_g1() {
    for p in protocols(|_| true) {
        if p == Protocol::NoCc {
            continue;
        }
        for keys in [2, 4, 16] {
            let (h, finals) = record_registers(p, 6, 1_500, keys);
            if let Err(e) = check_pl2(&h, &finals) {
                panic!("{p} produced a PL-2 anomaly with {keys} keys: {e}");
            }
        }
    }
}

/// Without concurrency control a user abort rolls nothing back and writes
/// are visible at once: the register check must catch it.
#[test]
fn nocc_register_histories_are_caught() {
    let caught = (0..5).any(|_| {
        let (h, finals) = record_registers(Protocol::NoCc, 4, 3_000, 2);
        check_pl2(&h, &finals).is_err()
    });
    assert!(
        caught,
        "no PL-2 anomaly found in five runs without concurrency control"
    );
}

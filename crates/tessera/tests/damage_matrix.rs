//! The damage matrix: every kind of file in a data directory, damaged in
//! every way we can think of, and one rule checked for each.
//!
//! For every damage, opening the damaged directory must have exactly one of
//! two outcomes:
//!
//! * **(a) recovered complete**: `Database::open` succeeds and every
//!   acknowledged commit is there (acknowledged = `Worker::run` returned
//!   `Ok` under `Durability::Sync`, which returns only once the commit is
//!   durable), with its last acknowledged value or a later value its writer
//!   tried to write; and no row holds a key or value nobody wrote; and a
//!   second open, after the first one's changes, finds the same;
//! * **(b) refused, naming the file**: `Database::open` returns
//!   `Error::Corrupt` (or `Error::NewerFormat`) whose message contains the
//!   damaged file's name (for a deleted file, its name; for a duplicate or a
//!   swap, either of the two names involved), and the refused open left the
//!   directory byte-for-byte as it found it (every file and folder except
//!   `LOCK` compared).
//!
//! Anything else is the "third outcome" (an acknowledged commit missing or
//! with a wrong value, a panic, another error kind, a message that does not
//! name the file, a refused open that changed the directory) and fails the
//! test. All such cases are collected and printed together at the end.
//!
//! Configurations: 1 and 2 loggers, with and without checkpoints, Silo and
//! SSN (8 in all). Each builds ONE base directory with two writer threads;
//! every case works on a fresh copy of it.
//!
//! Set `DAMAGE_MATRIX_VERBOSE=1` to print the outcome of every (file kind,
//! damage) pair per configuration.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use tessera::log::format::{BlockKind, BlockReader};
use tessera::log::segment::{parse_segment_name, segment_name};
use tessera::{Database, Error, Options, Protocol, ScanOptions, TableId, Worker};

// ---------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------

/// Segment size: small, so every logger has several segments.
const SEGMENT_BYTES: u64 = 16 << 10;
/// Writer threads (each with its own worker: slots 0 and 1, so with two
/// loggers each logger gets one writer).
const WRITERS: usize = 2;
/// The writers work in rounds; between rounds the main thread takes
/// checkpoints and snapshots "older copies" of files (while the next round
/// runs, so more acknowledged commits always follow a snapshot).
const ROUNDS: usize = 4;
/// Loop iterations per writer per round (each iteration is one or two
/// transactions).
const PER_ROUND: usize = 60;
/// The one table.
const TABLE: &str = "t";
/// Threads running damage cases side by side.
const CASE_THREADS: usize = 4;

const META: &str = "tessera.meta";
const FRONTIER: &str = "tessera.frontier";
const LOCK: &str = "LOCK";

// ---------------------------------------------------------------------------
// Configurations
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct Config {
    protocol: Protocol,
    loggers: usize,
    checkpoints: bool,
}

impl Config {
    fn all() -> Vec<Config> {
        let mut v = Vec::new();
        for protocol in [Protocol::Silo, Protocol::Ssn] {
            for loggers in [1, 2] {
                for checkpoints in [false, true] {
                    v.push(Config {
                        protocol,
                        loggers,
                        checkpoints,
                    });
                }
            }
        }
        v
    }

    fn label(&self) -> String {
        format!(
            "{}/{}L/{}",
            self.protocol,
            self.loggers,
            if self.checkpoints { "ckpt" } else { "no-ckpt" }
        )
    }

    /// The options of the run that builds the base directory; every damaged
    /// copy is opened with the same ones.
    fn options(&self, dir: &Path) -> Options {
        Options::durable(dir)
            .protocol(self.protocol)
            .loggers(self.loggers)
            .segment_bytes(SEGMENT_BYTES)
            .epoch_interval(Duration::from_millis(5))
    }
}

// ---------------------------------------------------------------------------
// The ack log
// ---------------------------------------------------------------------------

/// One key's history: every value its writer tried to write, in order, and
/// how many of them (a prefix) were acknowledged.
#[derive(Clone, Debug, Default)]
struct History {
    written: Vec<Vec<u8>>,
    acked: usize,
}

/// Key -> history. Each writer owns its keys, so each keeps its own log and
/// the logs are merged after the writers finish (no key appears in two).
type AckLog = BTreeMap<Vec<u8>, History>;

/// A value that identifies its key and version, padded to 50..=100 bytes
/// with letters from the writer's seeded generator.
fn value(rng: &mut SmallRng, key: &[u8], version: usize) -> Vec<u8> {
    let mut v = format!("{}#{version}:", String::from_utf8_lossy(key)).into_bytes();
    let len = rng.gen_range(50..=100usize).max(v.len());
    while v.len() < len {
        v.push(b'a' + rng.gen_range(0..26u8));
    }
    v
}

/// One writer: per iteration, insert a new key; every third iteration the
/// same transaction also overwrites an older key of this writer; every fifth
/// iteration a separate transaction overwrites another one. A value is
/// recorded as attempted before `run`, and as acknowledged once `run`
/// returned `Ok`. Errors are collected (not panicked on, so the barrier
/// never strands the other threads).
fn writer(mut w: Worker, t: TableId, th: usize, barrier: &Barrier) -> (AckLog, Vec<String>) {
    let mut rng = SmallRng::seed_from_u64(0xDA4A_6E00 + th as u64);
    let mut log = AckLog::new();
    let mut errors = Vec::new();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut commit =
        |w: &mut Worker, log: &mut AckLog, rng: &mut SmallRng, keys_now: Vec<Vec<u8>>| {
            let mut writes = Vec::new();
            for k in keys_now {
                let h = log.entry(k.clone()).or_default();
                let v = value(rng, &k, h.written.len());
                h.written.push(v.clone());
                writes.push((k, v));
            }
            match w.run(|tx| {
                for (k, v) in &writes {
                    tx.put(t, k, v)?;
                }
                Ok(())
            }) {
                Ok(()) => {
                    for (k, _) in &writes {
                        let h = log.get_mut(k).expect("recorded above");
                        h.acked = h.written.len();
                    }
                }
                Err(e) => errors.push(format!("writer {th}: {e}")),
            }
        };
    for _round in 0..ROUNDS {
        for _ in 0..PER_ROUND {
            let i = keys.len();
            let key = format!("w{th}-{i:05}").into_bytes();
            let mut txn = vec![key.clone()];
            if i % 3 == 2 {
                txn.push(keys[rng.gen_range(0..i)].clone());
            }
            keys.push(key);
            commit(&mut w, &mut log, &mut rng, txn);
            if i % 5 == 4 {
                let old = keys[rng.gen_range(0..i)].clone();
                commit(&mut w, &mut log, &mut rng, vec![old]);
            }
        }
        barrier.wait();
    }
    drop(w);
    (log, errors)
}

// ---------------------------------------------------------------------------
// The base directory
// ---------------------------------------------------------------------------

/// A copy of a file taken during the run (an "older copy").
#[derive(Clone, Debug)]
struct Snapshot {
    point: &'static str,
    name: String,
    bytes: Vec<u8>,
}

/// A closed data directory, in memory, with what was acknowledged in it.
struct Base {
    cfg: Config,
    /// Every file of the directory except `LOCK`.
    files: BTreeMap<String, Vec<u8>>,
    acks: AckLog,
    snapshots: Vec<Snapshot>,
}

/// The epoch in a checkpoint file name `ckpt-{epoch:010}.tckp`.
fn checkpoint_epoch(name: &str) -> Option<u64> {
    let mid = name.strip_prefix("ckpt-")?.strip_suffix(".tckp")?;
    (mid.len() == 10 && mid.bytes().all(|b| b.is_ascii_digit()))
        .then(|| mid.parse().ok())
        .flatten()
}

fn checkpoint_file_name(epoch: u64) -> String {
    format!("ckpt-{epoch:010}.tckp")
}

/// Names of the plain files directly in `dir`, sorted.
fn file_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Segments per logger, by segno.
fn streams<'a>(names: impl IntoIterator<Item = &'a String>) -> BTreeMap<u16, Vec<u64>> {
    let mut out: BTreeMap<u16, Vec<u64>> = BTreeMap::new();
    for n in names {
        if let Some((l, s)) = parse_segment_name(n) {
            out.entry(l).or_default().push(s);
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    out
}

/// Copies of the files that change during a run: `tessera.meta`,
/// `tessera.frontier`, each logger's newest segment and the current
/// checkpoint. A file that vanishes while being read is skipped.
fn take_snapshots(dir: &Path, point: &'static str, out: &mut Vec<Snapshot>) {
    let names = file_names(dir);
    let mut wanted = vec![META.to_string(), FRONTIER.to_string()];
    for (l, segs) in streams(&names) {
        wanted.push(segment_name(
            l,
            *segs.last().expect("a stream has a segment"),
        ));
    }
    if let Some(c) = names.iter().filter_map(|n| checkpoint_epoch(n)).max() {
        wanted.push(checkpoint_file_name(c));
    }
    for name in wanted {
        if let Ok(bytes) = std::fs::read(dir.join(&name)) {
            out.push(Snapshot { point, name, bytes });
        }
    }
}

/// Run the workload of `cfg` in a fresh directory and close it.
fn build_base(cfg: Config) -> Base {
    let label = cfg.label();
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(cfg.options(dir.path()))
        .unwrap_or_else(|e| panic!("{label}: open a fresh directory: {e}"));
    let mut snapshots = Vec::new();
    // P0: before the table exists (an older tessera.meta without it).
    take_snapshots(dir.path(), "P0", &mut snapshots);
    let t = db.create_table(TABLE).unwrap();
    // Made here, one after the other, so they take slots 0 and 1.
    let workers: Vec<Worker> = (0..WRITERS).map(|_| db.worker().unwrap()).collect();
    let barrier = Barrier::new(WRITERS + 1);
    let mut errors = Vec::new();
    let mut acks = AckLog::new();
    std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .into_iter()
            .enumerate()
            .map(|(th, w)| {
                let barrier = &barrier;
                s.spawn(move || writer(w, t, th, barrier))
            })
            .collect();
        for round in 0..ROUNDS {
            barrier.wait();
            // What follows overlaps the writers' next round.
            match round {
                0 if cfg.checkpoints => {
                    if let Err(e) = db.checkpoint() {
                        errors.push(format!("checkpoint 1: {e}"));
                    }
                }
                1 => {
                    take_snapshots(dir.path(), "P1", &mut snapshots);
                    if cfg.checkpoints {
                        if let Err(e) = db.checkpoint() {
                            errors.push(format!("checkpoint 2: {e}"));
                        }
                    }
                }
                2 => take_snapshots(dir.path(), "P2", &mut snapshots),
                _ => {}
            }
        }
        for h in handles {
            let (log, errs) = h.join().expect("writer thread");
            acks.extend(log);
            errors.extend(errs);
        }
    });
    drop(db);
    assert!(
        errors.is_empty(),
        "{label}: the base run failed: {errors:?}"
    );
    let files: BTreeMap<String, Vec<u8>> = file_names(dir.path())
        .into_iter()
        .filter(|n| n != LOCK)
        .map(|n| {
            let bytes = std::fs::read(dir.path().join(&n)).unwrap();
            (n, bytes)
        })
        .collect();
    // The matrix needs several segments per logger (an older one to
    // damage besides the newest) and, with checkpoints, a checkpoint.
    let segs = streams(files.keys());
    assert_eq!(
        segs.len(),
        cfg.loggers,
        "{label}: one stream per logger: {segs:?}"
    );
    assert!(
        segs.values().all(|v| v.len() >= 2),
        "{label}: too few segments per logger: {segs:?}"
    );
    assert_eq!(
        files.keys().any(|n| checkpoint_epoch(n).is_some()),
        cfg.checkpoints,
        "{label}: checkpoint files: {:?}",
        files.keys().collect::<Vec<_>>()
    );
    Base {
        cfg,
        files,
        acks,
        snapshots,
    }
}

// ---------------------------------------------------------------------------
// Damage cases
// ---------------------------------------------------------------------------

/// One change to a directory.
#[derive(Clone, Debug)]
enum Op {
    Truncate(String, u64),
    /// XOR the byte at the offset with 0xFF.
    Flip(String, u64),
    Delete(String),
    /// Create or replace a file with these bytes.
    Write(String, Vec<u8>),
    /// Exchange the names of two files.
    Swap(String, String),
}

#[derive(Clone, Debug)]
struct Case {
    /// File kind (a row group of the table), e.g. "segment L0 newest".
    kind: String,
    /// The damage, generic (the same label in every configuration).
    damage: String,
    /// The damage in full: files, offsets.
    detail: String,
    /// A refusal must name one of these files.
    names: Vec<String>,
    ops: Vec<Op>,
}

impl Case {
    fn new(kind: &str, damage: impl Into<String>, detail: impl Into<String>) -> Case {
        Case {
            kind: kind.to_string(),
            damage: damage.into(),
            detail: detail.into(),
            names: Vec::new(),
            ops: Vec::new(),
        }
    }

    fn names<S: AsRef<str>>(mut self, names: &[S]) -> Case {
        self.names = names.iter().map(|n| n.as_ref().to_string()).collect();
        self
    }

    fn op(mut self, op: Op) -> Case {
        self.ops.push(op);
        self
    }
}

/// Offsets where each valid block of a segment or checkpoint starts, with
/// its kind.
fn blocks(bytes: &[u8]) -> Vec<(u64, BlockKind)> {
    BlockReader::new(bytes)
        .map_while(|b| b.ok())
        .map(|b| (b.offset, b.header.kind))
        .collect()
}

/// Truncation points inside a block stream besides the fractions: block
/// boundaries (a cut there leaves a shorter, clean-looking file) and one in
/// the middle of the last block's header (a torn-looking end).
/// Named offsets in a segment.
type Cuts = Vec<(u64, &'static str)>;

fn block_cuts(bytes: &[u8]) -> (Cuts, Cuts) {
    let b = blocks(bytes);
    let mut cuts = Vec::new();
    let mut flips = Vec::new();
    if b.len() >= 2 {
        cuts.push((b[1].0, "after the first block"));
        cuts.push((b[b.len() / 2].0, "at a block boundary mid-file"));
    }
    if let Some(&(at, _)) = b.last() {
        cuts.push((at, "before the last block"));
        cuts.push((at + 20, "inside the last block's header"));
    }
    if let Some(&(at, _)) = b.iter().rev().find(|(_, k)| *k == BlockKind::Txns) {
        cuts.push((at, "before the last txn block"));
        // A byte of the payload of the last transaction block.
        flips.push((at + 48, "in the last txn block"));
    }
    (cuts, flips)
}

/// Truncations, byte flips, deletion and emptying of the file `name`.
fn basic_damages(
    kind: &str,
    name: &str,
    bytes: &[u8],
    extra_cuts: &[(u64, &'static str)],
    extra_flips: &[(u64, &'static str)],
) -> Vec<Case> {
    let len = bytes.len() as u64;
    let mut out = Vec::new();
    // Two labels may name the same offset (say, the last block is a
    // transaction block): both cases are kept, so that every configuration
    // has the same rows in the table.
    let cuts = [
        (len / 4, "1/4"),
        (len / 2, "1/2"),
        (len.saturating_sub(1), "len-1"),
    ];
    for &(at, label) in cuts.iter().chain(extra_cuts) {
        if at == 0 || at >= len {
            continue;
        }
        out.push(
            Case::new(
                kind,
                format!("truncate {label}"),
                format!("truncate {name} to {at} of {len} bytes ({label})"),
            )
            .names(&[name])
            .op(Op::Truncate(name.into(), at)),
        );
    }
    let flips = [
        (0, "first byte"),
        (len / 2, "middle"),
        (len.saturating_sub(8), "near the end"),
        (len.saturating_sub(1), "last byte"),
    ];
    for &(at, label) in flips.iter().chain(extra_flips) {
        if at >= len {
            continue;
        }
        out.push(
            Case::new(
                kind,
                format!("flip {label}"),
                format!("flip byte {at} of {len} in {name} ({label})"),
            )
            .names(&[name])
            .op(Op::Flip(name.into(), at)),
        );
    }
    out.push(
        Case::new(kind, "delete", format!("delete {name}"))
            .names(&[name])
            .op(Op::Delete(name.into())),
    );
    if len > 0 {
        out.push(
            Case::new(kind, "empty", format!("empty {name} (was {len} bytes)"))
                .names(&[name])
                .op(Op::Truncate(name.into(), 0)),
        );
    }
    out
}

/// A copy of `name` under another name.
fn duplicate(kind: &str, label: &str, name: &str, bytes: &[u8], as_name: &str) -> Case {
    Case::new(
        kind,
        format!("duplicate {label}"),
        format!("copy {name} to {as_name}"),
    )
    .names(&[name, as_name])
    .op(Op::Write(as_name.into(), bytes.to_vec()))
}

/// `name` replaced by each distinct older copy of it taken during the run.
fn older_copies(kind: &str, name: &str, current: &[u8], olders: &[&Snapshot]) -> Vec<Case> {
    let mut seen: Vec<&[u8]> = vec![current];
    let mut out = Vec::new();
    for s in olders {
        if seen.contains(&&s.bytes[..]) {
            continue;
        }
        seen.push(&s.bytes);
        let from = if s.name == name {
            String::new()
        } else {
            format!(" (the bytes of {})", s.name)
        };
        out.push(
            Case::new(
                kind,
                format!("older copy {}", s.point),
                format!(
                    "replace {name} ({} bytes) with its copy from {}{from} ({} bytes)",
                    current.len(),
                    s.point,
                    s.bytes.len()
                ),
            )
            .names(&[name])
            .op(Op::Write(name.into(), s.bytes.clone())),
        );
    }
    out
}

/// Every damage case for a base directory.
fn cases(base: &Base) -> Vec<Case> {
    let files = &base.files;
    let mut out = Vec::new();
    let snaps_named = |name: &str| -> Vec<&Snapshot> {
        base.snapshots.iter().filter(|s| s.name == name).collect()
    };

    // tessera.meta: cut before its crc32c line too.
    if let Some(bytes) = files.get(META) {
        let kind = "tessera.meta";
        let text = String::from_utf8_lossy(bytes);
        let crc_line = text.rfind("crc32c ").map(|at| at as u64);
        let cuts: Vec<_> = crc_line
            .map(|at| (at, "before the crc32c line"))
            .into_iter()
            .collect();
        out.extend(basic_damages(kind, META, bytes, &cuts, &[]));
        out.extend(older_copies(kind, META, bytes, &snaps_named(META)));
        out.push(duplicate(kind, "as .tmp", META, bytes, "tessera.meta.tmp"));
        out.push(duplicate(kind, "as .bak", META, bytes, "tessera.meta.bak"));
    }

    // tessera.frontier (when this build writes one): cut at the slot size.
    if let Some(bytes) = files.get(FRONTIER) {
        let kind = "tessera.frontier";
        out.extend(basic_damages(
            kind,
            FRONTIER,
            bytes,
            &[(4096, "one 4 KiB slot")],
            &[(4096, "second slot start")],
        ));
        out.extend(older_copies(kind, FRONTIER, bytes, &snaps_named(FRONTIER)));
        out.push(duplicate(
            kind,
            "as .tmp",
            FRONTIER,
            bytes,
            "tessera.frontier.tmp",
        ));
    }

    // Segments: per logger its newest, its oldest and one in the middle.
    let segs = streams(files.keys());
    for (&l, nos) in &segs {
        let last = *nos.last().unwrap();
        let mut targets = vec![("newest", last)];
        if nos.len() >= 2 {
            targets.push(("oldest", nos[0]));
        }
        if nos.len() >= 3 {
            targets.push(("middle", nos[nos.len() / 2]));
        }
        for (which, segno) in targets {
            let kind = format!("segment L{l} {which}");
            let name = segment_name(l, segno);
            let bytes = &files[&name];
            let (cuts, flips) = block_cuts(bytes);
            out.extend(basic_damages(&kind, &name, bytes, &cuts, &flips));
            out.extend(older_copies(&kind, &name, bytes, &snaps_named(&name)));
            out.push(duplicate(
                &kind,
                "as next segno",
                &name,
                bytes,
                &segment_name(l, last + 1),
            ));
            out.push(duplicate(
                &kind,
                "as a non-segment name",
                &name,
                bytes,
                &format!("{name}.bak"),
            ));
        }
        // Swaps within the stream: the newest with the one before it, and
        // with the oldest.
        let kind = format!("segment L{l} newest");
        let newest = segment_name(l, last);
        let mut partners = Vec::new();
        if nos.len() >= 2 {
            partners.push(("previous", nos[nos.len() - 2]));
        }
        if nos.len() >= 3 {
            partners.push(("oldest", nos[0]));
        }
        for (which, segno) in partners {
            let other = segment_name(l, segno);
            out.push(
                Case::new(
                    &kind,
                    format!("swap with {which}"),
                    format!("swap {newest} and {other}"),
                )
                .names(&[&newest, &other])
                .op(Op::Swap(newest.clone(), other)),
            );
        }
    }
    // Swaps across loggers: the newest segments, and the oldest ones.
    if let (Some(s0), Some(s1)) = (segs.get(&0), segs.get(&1)) {
        for (which, a, b) in [
            ("newest", *s0.last().unwrap(), *s1.last().unwrap()),
            ("oldest", s0[0], s1[0]),
        ] {
            let (a, b) = (segment_name(0, a), segment_name(1, b));
            out.push(
                Case::new(
                    "segments L0+L1",
                    format!("swap {which}"),
                    format!("swap {a} and {b}"),
                )
                .names(&[&a, &b])
                .op(Op::Swap(a.clone(), b)),
            );
        }
    }

    // The current checkpoint, and a leftover .tmp of a later one.
    let ckpt = files.keys().filter_map(|n| checkpoint_epoch(n)).max();
    if let Some(c) = ckpt {
        let kind = "checkpoint";
        let name = checkpoint_file_name(c);
        let bytes = &files[&name];
        let (cuts, flips) = block_cuts(bytes);
        out.extend(basic_damages(kind, &name, bytes, &cuts, &flips));
        // Older copies: earlier checkpoints' bytes under the current name.
        let olders: Vec<&Snapshot> = base
            .snapshots
            .iter()
            .filter(|s| checkpoint_epoch(&s.name).is_some())
            .collect();
        out.extend(older_copies(kind, &name, bytes, &olders));
        out.push(duplicate(
            kind,
            "as a later checkpoint",
            &name,
            bytes,
            &checkpoint_file_name(c + 1000),
        ));

        let kind = "checkpoint .tmp";
        let tmp = format!("{}.tmp", checkpoint_file_name(c + 1));
        let len = bytes.len() as u64;
        let with_tmp = |damage: &str, detail: String| {
            Case::new(kind, damage, detail)
                .names(&[&tmp])
                .op(Op::Write(tmp.clone(), bytes.clone()))
        };
        out.push(with_tmp("intact", format!("{tmp}: a copy of {name}")));
        out.push(
            with_tmp(
                "truncate 1/2",
                format!("{tmp}: a copy of {name} cut to {}", len / 2),
            )
            .op(Op::Truncate(tmp.clone(), len / 2)),
        );
        out.push(
            with_tmp(
                "flip middle",
                format!("{tmp}: a copy of {name}, byte {} flipped", len / 2),
            )
            .op(Op::Flip(tmp.clone(), len / 2)),
        );
        out.push(with_tmp("empty", format!("{tmp}: empty")).op(Op::Truncate(tmp.clone(), 0)));
    }

    // Older copies of files that are gone by the end (segments and
    // checkpoints a later checkpoint deleted), put back.
    let mut seen = BTreeSet::new();
    for s in &base.snapshots {
        if files.contains_key(&s.name) || !seen.insert(&s.name) {
            continue;
        }
        let kind = match (parse_segment_name(&s.name), checkpoint_epoch(&s.name)) {
            (Some((l, _)), _) => format!("segment L{l} deleted"),
            (_, Some(_)) => "checkpoint replaced".to_string(),
            _ => format!("{} (absent at the end)", s.name),
        };
        out.push(
            Case::new(
                &kind,
                format!("resurrect {}", s.point),
                format!(
                    "put back {} ({} bytes, copied at {})",
                    s.name,
                    s.bytes.len(),
                    s.point
                ),
            )
            .names(&[&s.name])
            .op(Op::Write(s.name.clone(), s.bytes.clone())),
        );
    }
    out
}

fn apply(dir: &Path, op: &Op) {
    let p = |n: &str| dir.join(n);
    match op {
        Op::Truncate(n, len) => std::fs::OpenOptions::new()
            .write(true)
            .open(p(n))
            .and_then(|f| f.set_len(*len))
            .unwrap(),
        Op::Flip(n, at) => {
            let mut b = std::fs::read(p(n)).unwrap();
            b[*at as usize] ^= 0xFF;
            std::fs::write(p(n), b).unwrap();
        }
        Op::Delete(n) => std::fs::remove_file(p(n)).unwrap(),
        Op::Write(n, bytes) => std::fs::write(p(n), bytes).unwrap(),
        Op::Swap(a, b) => {
            let tmp = p("swap-in-progress");
            std::fs::rename(p(a), &tmp).unwrap();
            std::fs::rename(p(b), p(a)).unwrap();
            std::fs::rename(&tmp, p(b)).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------
// Running a case
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// (a)
    Recovered,
    /// (b)
    Refused,
    /// Anything else, with what happened.
    Third(String),
}

/// Every path under `dir` (relative), with the contents of files; `LOCK` at
/// the top is left out.
fn dir_state(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    fn walk(root: &Path, at: &Path, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
        for e in std::fs::read_dir(at).unwrap().flatten() {
            let path = e.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if rel == LOCK {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.insert(format!("{rel}/"), None);
                walk(root, &path, out);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap_or_default()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// What differs between two directory states, in words.
fn describe_change(
    before: &BTreeMap<String, Option<Vec<u8>>>,
    after: &BTreeMap<String, Option<Vec<u8>>>,
) -> String {
    let mut v = Vec::new();
    for (n, b) in before {
        match after.get(n) {
            None => v.push(format!("removed {n}")),
            Some(a) if a != b => v.push(format!(
                "changed {n} ({} -> {} bytes)",
                b.as_ref().map_or(0, |x| x.len()),
                a.as_ref().map_or(0, |x| x.len())
            )),
            _ => {}
        }
    }
    for n in after.keys().filter(|n| !before.contains_key(*n)) {
        v.push(format!("created {n}"));
    }
    v.join(", ")
}

/// Check an opened database against the ack log: `Err` says what is wrong.
fn verify(db: &Database, acks: &AckLog) -> Result<(), String> {
    let acked = acks.values().filter(|h| h.acked > 0).count();
    if !db.table_names().iter().any(|n| n == TABLE) {
        return Err(format!(
            "table '{TABLE}' is missing from the catalog ({acked} acknowledged keys lost)"
        ));
    }
    let t = db
        .open_table(TABLE)
        .map_err(|e| format!("open_table: {e}"))?;
    let mut w = db.worker().map_err(|e| format!("worker: {e}"))?;
    let rows: BTreeMap<Vec<u8>, Vec<u8>> = w
        .run(|tx| tx.scan_collect(t, Bound::Unbounded, Bound::Unbounded, ScanOptions::new()))
        .map_err(|e| format!("scan: {e}"))?
        .into_iter()
        .collect();
    drop(w);
    let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    let mut missing = Vec::new();
    let mut stale = Vec::new();
    let mut foreign = Vec::new();
    for (k, h) in acks.iter().filter(|(_, h)| h.acked > 0) {
        match rows.get(k) {
            None => missing.push(show(k)),
            Some(v) => match h.written.iter().position(|x| x == v) {
                Some(i) if i + 1 >= h.acked => {}
                Some(i) => stale.push(format!("{} (value #{i}, acked #{})", show(k), h.acked - 1)),
                None => stale.push(format!("{} (a value never written)", show(k))),
            },
        }
    }
    for (k, v) in &rows {
        if !acks.get(k).is_some_and(|h| h.written.contains(v)) {
            foreign.push(show(k));
        }
    }
    let mut why = Vec::new();
    let sample = |v: &[String]| v.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if !missing.is_empty() {
        why.push(format!(
            "{} of {acked} acknowledged keys missing (e.g. {})",
            missing.len(),
            sample(&missing)
        ));
    }
    if !stale.is_empty() {
        why.push(format!(
            "{} keys with a wrong value (e.g. {})",
            stale.len(),
            sample(&stale)
        ));
    }
    if !foreign.is_empty() {
        why.push(format!(
            "{} rows nobody wrote (e.g. {})",
            foreign.len(),
            sample(&foreign)
        ));
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join("; "))
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

fn run_case(base: &Base, case: &Case) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    for (n, b) in &base.files {
        std::fs::write(dir.path().join(n), b).unwrap();
    }
    for op in &case.ops {
        apply(dir.path(), op);
    }
    let before = dir_state(dir.path());
    let opened = catch_unwind(AssertUnwindSafe(|| {
        Database::open(base.cfg.options(dir.path())).map(|db| verify(&db, &base.acks))
    }));
    match opened {
        Err(p) => Outcome::Third(format!("panicked: {}", panic_message(&*p))),
        // A recovered directory stays recovered: the next open (after the
        // first one's changes and new run) must be complete as well.
        Ok(Ok(Ok(()))) => {
            let again = catch_unwind(AssertUnwindSafe(|| {
                Database::open(base.cfg.options(dir.path())).map(|db| verify(&db, &base.acks))
            }));
            match again {
                Ok(Ok(Ok(()))) => Outcome::Recovered,
                Err(p) => Outcome::Third(format!("reopen panicked: {}", panic_message(&*p))),
                Ok(Ok(Err(why))) => Outcome::Third(format!("recovered, but on reopen {why}")),
                Ok(Err(e)) => Outcome::Third(format!("recovered, but the reopen is refused: {e}")),
            }
        }
        Ok(Ok(Err(why))) => Outcome::Third(format!("opened, but {why}")),
        Ok(Err(e)) => {
            let mut wrong = Vec::new();
            match &e {
                Error::Corrupt(m) | Error::NewerFormat(m) => {
                    if !case.names.iter().any(|n| m.contains(n.as_str())) {
                        wrong.push(format!("the message names none of {:?}", case.names));
                    }
                }
                _ => wrong.push("not Error::Corrupt or Error::NewerFormat".to_string()),
            }
            let after = dir_state(dir.path());
            if after != before {
                wrong.push(format!(
                    "the refused open changed the directory: {}",
                    describe_change(&before, &after)
                ));
            }
            if wrong.is_empty() {
                Outcome::Refused
            } else {
                Outcome::Third(format!("refused with {e:?}, but {}", wrong.join("; ")))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------

/// Where a file kind goes in the table: control files, then each logger's
/// segments, then checkpoints.
fn kind_rank(kind: &str) -> (u8, u16, u8) {
    if kind == "tessera.meta" {
        return (0, 0, 0);
    }
    if kind == "tessera.frontier" {
        return (1, 0, 0);
    }
    if let Some(rest) = kind.strip_prefix("segment L") {
        let (l, which) = rest.split_once(' ').unwrap_or((rest, ""));
        let w = ["newest", "oldest", "middle", "deleted"]
            .iter()
            .position(|x| *x == which)
            .unwrap_or(9);
        return (2, l.parse().unwrap_or(u16::MAX), w as u8);
    }
    if kind.starts_with("segments ") {
        return (3, 0, 0);
    }
    match kind {
        "checkpoint" => (4, 0, 0),
        "checkpoint .tmp" => (5, 0, 0),
        "checkpoint replaced" => (6, 0, 0),
        _ => (7, 0, 0),
    }
}

/// One row per (file kind, damage), one column per configuration: `a`
/// recovered complete, `b` refused naming the file, `X` third outcome, `.`
/// no such case in that configuration.
fn print_table(configs: &[Config], all: &[(usize, Case)], results: &[Outcome]) {
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut cells: BTreeMap<(String, String, usize), String> = BTreeMap::new();
    for ((b, case), o) in all.iter().zip(results) {
        let row = (case.kind.clone(), case.damage.clone());
        if !rows.contains(&row) {
            rows.push(row.clone());
        }
        let letter = match o {
            Outcome::Recovered => 'a',
            Outcome::Refused => 'b',
            Outcome::Third(_) => 'X',
        };
        cells.entry((row.0, row.1, *b)).or_default().push(letter);
    }
    // Stable: damages keep their order of first appearance within a kind.
    rows.sort_by_key(|r| kind_rank(&r.0));
    let width = rows
        .iter()
        .map(|r| r.0.len() + r.1.len() + 3)
        .max()
        .unwrap_or(0);
    eprintln!(
        "\na = recovered complete, b = refused naming the file, X = third outcome, . = no such case"
    );
    let head: String = configs
        .iter()
        .map(|c| format!("{:>17}", c.label()))
        .collect();
    eprintln!("{:width$}{head}", "file kind / damage");
    for (kind, damage) in &rows {
        let line: String = (0..configs.len())
            .map(|b| {
                let c = cells.get(&(kind.clone(), damage.clone(), b));
                format!("{:>17}", c.map_or(".", |s| s.as_str()))
            })
            .collect();
        eprintln!("{:width$}{line}", format!("{kind} / {damage}"));
    }
}

#[test]
fn every_damage_is_recovered_completely_or_refused_by_name() {
    let started = Instant::now();
    let configs = Config::all();
    // The base runs mostly wait for epochs: build them side by side.
    let bases: Vec<Base> = std::thread::scope(|s| {
        let hs: Vec<_> = configs
            .iter()
            .map(|&cfg| s.spawn(move || build_base(cfg)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("base run"))
            .collect()
    });
    let built = started.elapsed();
    let all: Vec<(usize, Case)> = bases
        .iter()
        .enumerate()
        .flat_map(|(i, b)| cases(b).into_iter().map(move |c| (i, c)))
        .collect();
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; all.len()]);
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..CASE_THREADS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((b, case)) = all.get(i) else { return };
                let o = run_case(&bases[*b], case);
                results.lock().unwrap()[i] = Some(o);
            });
        }
    });
    let results: Vec<Outcome> = results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|o| o.unwrap())
        .collect();

    if std::env::var_os("DAMAGE_MATRIX_VERBOSE").is_some() {
        print_table(&configs, &all, &results);
    }

    let recovered = results.iter().filter(|o| **o == Outcome::Recovered).count();
    let refused = results.iter().filter(|o| **o == Outcome::Refused).count();
    let third: Vec<String> = all
        .iter()
        .zip(&results)
        .filter_map(|((b, case), o)| match o {
            Outcome::Third(what) => Some(format!(
                "[{}] {} / {}: {}\n      -> {what}",
                bases[*b].cfg.label(),
                case.kind,
                case.damage,
                case.detail
            )),
            _ => None,
        })
        .collect();
    eprintln!(
        "damage matrix: {} cases over {} configurations ({} acknowledged keys each), {:.1} s (base runs {:.1} s): \
         {recovered} recovered complete, {refused} refused naming the file, {} third outcome",
        all.len(),
        configs.len(),
        bases[0].acks.values().filter(|h| h.acked > 0).count(),
        started.elapsed().as_secs_f64(),
        built.as_secs_f64(),
        third.len()
    );
    assert!(
        third.is_empty(),
        "{} of {} damage cases had a third outcome:\n  {}",
        third.len(),
        all.len(),
        third.join("\n  ")
    );
}

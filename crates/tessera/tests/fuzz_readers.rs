//! Fuzzing the on-disk readers with proptest.
//!
//! A data directory's bytes come back through a handful of parsers: the log
//! block reader and the transaction-entry decoder (`log::format`), the
//! control file (`Meta::load`), the durable frontier (`frontier::read`),
//! checkpoints (`checkpoint::read`), the whole log (`LogScan::read`) and,
//! around all of them, `Database::open`. Whatever the bytes, each must
//! return (a value or an error): never panic, allocate without bound or
//! run for ever.
//!
//! The inputs are arbitrary bytes and mutated copies of the files of a real
//! data directory, generated once at start (the seed corpus, see
//! [`corpus`]). Mutations: flip a bit, overwrite a range, truncate, extend
//! with random bytes or zeros, duplicate or remove a range, splice two
//! seeds, set an integer field of a block header or of an entry to an
//! interesting value and, the most important one, rebuild a block around a
//! mutated payload or header with a valid checksum (`format::write_block`),
//! so the entry decoder and recovery see garbage the checksum does not
//! catch. The control file is also mutated line by line with its CRC
//! recomputed, so its body parser is reached.
//!
//! Every execution checks:
//! * no panic, in the calling thread or any other (a panic hook counts them);
//! * bounded allocation: the heap's peak during the call stays within
//!   `8 * input + 1 MiB` of its level just before (a counting global
//!   allocator; the properties take turns, see [`serial`]);
//! * bounded time: the call returns within [`time_limit`].
//!
//! Cases per property: `FUZZ_CASES` (default 256) for the parsers and
//! `FUZZ_E2E_CASES` (default 32) for `Database::open`. Each property prints
//! its executions and what the parser answered to stderr (written to the
//! stream directly, so it shows without `--nocapture`).
//!
//! The two bugs these properties found are fixed and have their own tests:
//! a control file of generation `u64::MAX` loaded and storing its
//! successor overflowed (`Meta::load` now refuses generations past
//! `meta::MAX_GEN`, `Meta::store` refuses to pass it); and a stream cut by
//! an accepted loss at a file boundary (a gap, or damage at a file's first
//! block) was continued after the files set aside, leaving a gap or an
//! empty segment that the next open refused
//! (`a_stream_cut_at_a_file_boundary_continues_cleanly` in
//! tests/no_silent_loss.rs).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write as _;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, Once, OnceLock};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use tessera::log::checkpoint;
use tessera::log::format::{self, BlockKind, Damage, WriteOp, HEADER_LEN};
use tessera::log::frontier::{self, Frontier, StreamFrontier, FRONTIER_FILE};
use tessera::log::meta::{self, Meta, MetaTable, META_FILE};
use tessera::log::recovery::LogScan;
use tessera::log::segment;
use tessera::{Database, Durability, Options, RecoveryMode, TableId, Worker};

// ---------------------------------------------------------------------------
// Counting allocator
// ---------------------------------------------------------------------------

/// `System`, counting the bytes currently allocated and their peak.
struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(now, Relaxed);
}

fn shrank(n: usize) {
    LIVE.fetch_sub(n, Relaxed);
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

// ---------------------------------------------------------------------------
// Running one parse under the checks
// ---------------------------------------------------------------------------

/// Panics seen by the hook installed in [`count_panics`], in any thread.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Install (once) a panic hook that counts panics, then runs the default
/// hook (which prints the message and location).
fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Relaxed);
            default(info);
        }));
    });
}

/// The properties take turns (the test harness runs tests in parallel
/// threads, and the allocation counters are process-wide).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    count_panics();
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Allocation allowed above the level before a parse of `len` bytes.
fn alloc_budget(len: usize) -> usize {
    8 * len + (1 << 20)
}

/// How long a parse of `len` bytes may take: 2 s per started MiB. Generous:
/// the dev profile and a busy two-core machine.
fn time_limit(len: usize) -> Duration {
    Duration::from_secs(2 * (1 + (len >> 20) as u64))
}

/// What one call used.
#[derive(Clone, Copy, Debug, Default)]
struct Usage {
    /// Peak heap growth, bytes.
    heap: usize,
    /// Wall-clock time.
    time: Duration,
}

/// Runs `f`, one call of a reader on `len` input bytes, and fails the case
/// if it panicked (in this thread or any other while it ran), or went over
/// [`alloc_budget`] (unless `heap_limit` is false) or over `limit`.
fn bounded<R>(
    what: &str,
    len: usize,
    limit: Duration,
    heap_limit: bool,
    f: impl FnOnce() -> R,
) -> Result<(R, Usage), TestCaseError> {
    // A call that never returns cannot be failed from here: a watchdog
    // reports it and ends the process (the test then fails visibly instead
    // of hanging).
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let grace = limit * 4 + Duration::from_secs(10);
    let name = what.to_string();
    let dog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(grace) {
            eprintln!("fuzz_readers: {name} HUNG on {len} input bytes (no return in {grace:?})");
            std::process::exit(101);
        }
    });
    let panics = PANICS.load(Relaxed);
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let started = Instant::now();
    let out = panic::catch_unwind(AssertUnwindSafe(f));
    let _ = done.send(());
    let _ = dog.join();
    let usage = Usage {
        time: started.elapsed(),
        heap: PEAK.load(Relaxed).saturating_sub(base),
    };
    let out = match out {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            return Err(TestCaseError::fail(format!(
                "{what} PANICKED on {len} input bytes: {msg}"
            )));
        }
    };
    let more = PANICS.load(Relaxed) - panics;
    if more > 0 {
        return Err(TestCaseError::fail(format!(
            "{what}: {more} panic(s) in another thread on {len} input bytes"
        )));
    }
    if heap_limit && usage.heap > alloc_budget(len) {
        return Err(TestCaseError::fail(format!(
            "{what} allocated {} bytes (peak) on {len} input bytes, over the budget of {}",
            usage.heap,
            alloc_budget(len)
        )));
    }
    if usage.time > limit {
        return Err(TestCaseError::fail(format!(
            "{what} took {:?} on {len} input bytes (limit {limit:?})",
            usage.time
        )));
    }
    Ok((out, usage))
}

/// Fails the case with `why` unless `ok`.
fn check(ok: bool, why: impl FnOnce() -> String) -> Result<(), TestCaseError> {
    if ok {
        Ok(())
    } else {
        Err(TestCaseError::fail(why()))
    }
}

/// Counters a property prints when it ends.
#[derive(Default)]
struct Stats {
    executions: u64,
    input_bytes: u64,
    max_heap: usize,
    max_time: Duration,
    /// Named outcome counters, printed in name order.
    counts: BTreeMap<&'static str, u64>,
}

impl Stats {
    fn ran(&mut self, len: usize, u: Usage) {
        self.executions += 1;
        self.input_bytes += len as u64;
        self.max_heap = self.max_heap.max(u.heap);
        self.max_time = self.max_time.max(u.time);
    }

    fn add(&mut self, what: &'static str, n: u64) {
        *self.counts.entry(what).or_default() += n;
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} executions, {} input bytes, peak heap growth {} bytes, slowest call {:?}",
            self.executions, self.input_bytes, self.max_heap, self.max_time
        )?;
        for (k, v) in &self.counts {
            write!(f, "; {k} {v}")?;
        }
        Ok(())
    }
}

/// Cases for a property: the environment variable `var`, else `default`.
fn cases(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `test` on `cases` inputs of `strategy` (failures shrunk, nothing
/// persisted), then prints the executions and `stats` to stderr.
fn fuzz<S: Strategy>(
    name: &str,
    cases: u32,
    strategy: S,
    stats: &RefCell<Stats>,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S::Value: fmt::Debug,
{
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let started = Instant::now();
    let result = runner.run(&strategy, test);
    let s = stats.borrow();
    let crashes = match &result {
        Ok(()) => 0,
        Err(_) => 1,
    };
    // Written straight to the stream: the harness captures only print
    // macros, and the totals are wanted from passing runs.
    let _ = writeln!(
        std::io::stderr(),
        "fuzz_readers: {name}: {cases} cases, {s}, {crashes} failures, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, input)) => {
            panic!("{name}: {why}\nminimal failing input: {input:#?}")
        }
        Err(e) => panic!("{name}: {e}"),
    }
}

// ---------------------------------------------------------------------------
// The seed corpus: a real data directory
// ---------------------------------------------------------------------------

/// Files of a real data directory, and what they hold.
struct Corpus {
    /// Every file of the directory, by name.
    files: BTreeMap<String, Vec<u8>>,
    /// Block streams: each segment (in name order), then the checkpoint.
    streams: Vec<Vec<u8>>,
    /// (logger, segno) of each segment, in the order of `streams`.
    segments: Vec<(u16, u64)>,
    /// The current checkpoint: file name and epoch.
    checkpoint: (String, u64),
    /// Payloads of every `Txns` block of every stream.
    payloads: Vec<Vec<u8>>,
    /// Control files: the directory's, and a richer one (voids, a
    /// secondary table) rendered by `Meta::store`.
    metas: Vec<Vec<u8>>,
    /// The frontier the directory's `tessera.frontier` holds.
    frontier: Frontier,
}

/// The corpus, generated on first use.
fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(build_corpus)
}

/// A value of 240 bytes (long enough for an update of a few bytes to be
/// logged as a patch).
fn long_value(i: u32) -> Vec<u8> {
    (0..240u32)
        .map(|j| (i.wrapping_mul(31) ^ j) as u8)
        .collect()
}

/// 300 transactions: long values updated in two bytes (logged as patches),
/// puts into a table and an index, deletes, short values.
fn workload(w: &mut Worker, t: TableId, ix: TableId, round: u32) {
    for i in 0..300u32 {
        let key = format!("acct-{:04}", (i * 7 + round * 13) % 97);
        w.run(|tx| match i % 6 {
            0..=2 => {
                let mut v = match tx.get(t, key.as_bytes())? {
                    Some(v) if v.len() == 240 => v.to_vec(),
                    _ => long_value(i),
                };
                v[(i as usize * 31) % 240] ^= 0x5A;
                v[(i as usize * 17 + 3) % 240] = i as u8;
                tx.put(t, key.as_bytes(), &v)
            }
            3 => {
                tx.put(t, key.as_bytes(), &long_value(i + round))?;
                tx.put(ix, format!("{i:05}-{round}").as_bytes(), key.as_bytes())
            }
            4 => tx.delete(t, key.as_bytes()).map(|_| ()),
            _ => tx.put(t, key.as_bytes(), &(i + round).to_le_bytes()),
        })
        .unwrap();
    }
}

fn db_options(dir: &Path) -> Options {
    Options::durable(dir)
        .segment_bytes(16 << 10)
        .epoch_interval(Duration::from_millis(5))
}

/// Open a database in a fresh directory, write, checkpoint, write more,
/// close, reopen, write more, close; keep the files.
fn build_corpus() -> Corpus {
    let dir = tempfile::tempdir().unwrap();
    let opts = || db_options(dir.path()).durability(Durability::Async);
    {
        let db = Database::open(opts()).unwrap();
        let t = db.create_table("accounts").unwrap();
        let ix = db.create_index("accounts by round").unwrap();
        let mut w = db.worker().unwrap();
        workload(&mut w, t, ix, 0);
        db.wait_durable(w.last_commit()).unwrap();
        db.checkpoint().unwrap();
        workload(&mut w, t, ix, 1);
        db.wait_durable(w.last_commit()).unwrap();
    }
    {
        let db = Database::open(opts()).unwrap();
        let t = db.open_table("accounts").unwrap();
        let ix = db.open_index("accounts by round").unwrap();
        let mut w = db.worker().unwrap();
        workload(&mut w, t, ix, 2);
        db.wait_durable(w.last_commit()).unwrap();
    }
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            let name = e.file_name().into_string().unwrap();
            files.insert(name, std::fs::read(e.path()).unwrap());
        }
    }
    let meta = Meta::load(dir.path()).unwrap().expect("a tessera.meta");
    let checkpoint = meta.checkpoint.clone().expect("a checkpoint");
    let frontier = frontier::read(dir.path())
        .unwrap()
        .expect("a tessera.frontier")
        .frontier;
    let mut streams = Vec::new();
    let mut segments = Vec::new();
    for (name, bytes) in &files {
        if let Some(id) = segment::parse_segment_name(name) {
            segments.push(id);
            streams.push(bytes.clone());
        }
    }
    streams.push(files[&checkpoint.0].clone());
    assert!(segments.len() >= 2, "segments: {segments:?}");

    let mut payloads = Vec::new();
    let mut patches = 0;
    for s in &streams {
        for b in valid_blocks(s) {
            if b.header.kind == BlockKind::Txns {
                for e in format::entries(b.payload) {
                    let e = e.expect("a valid entry");
                    patches += e.writes().filter(|w| w.op == WriteOp::Patch).count();
                }
                payloads.push(b.payload.to_vec());
            }
        }
    }
    assert!(patches > 0, "the workload logs some patches");

    // A richer control file, rendered by Meta::store.
    let rich = tempfile::tempdir().unwrap();
    let mut m = Meta {
        tables: vec![
            MetaTable {
                id: 0,
                secondary: false,
                name: "warehouse".into(),
            },
            MetaTable {
                id: 1,
                secondary: true,
                name: "customer by last name".into(),
            },
        ],
        voids: vec![(7, 12), (20, 31)],
        checkpoint: Some((checkpoint::checkpoint_name(40), 40)),
        checkpoint_needs: Some((42, 123_456)),
        run: Some((2, 6)),
        ..Meta::default()
    };
    m.store(rich.path()).unwrap();
    let metas = vec![
        files[META_FILE].clone(),
        std::fs::read(rich.path().join(META_FILE)).unwrap(),
    ];

    // The unmutated copy opens (the end-to-end property's baseline).
    let copy = tempfile::tempdir().unwrap();
    for (name, bytes) in &files {
        std::fs::write(copy.path().join(name), bytes).unwrap();
    }
    drop(Database::open(db_options(copy.path())).expect("an intact copy opens"));

    Corpus {
        files,
        streams,
        segments,
        checkpoint,
        payloads,
        metas,
        frontier,
    }
}

/// The valid blocks at the start of `bytes` (up to the first damage).
fn valid_blocks(bytes: &[u8]) -> impl Iterator<Item = format::Block<'_>> {
    format::BlockReader::new(bytes).map_while(Result::ok)
}

// ---------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------

/// Values that sit on boundaries of the format's integer fields.
#[rustfmt::skip]
const INTERESTING: [u64; 30] = [
    0, 1, 2, 3, 7, 8, 11, 19, 20, 39, 40, 41, 0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF,
    0x1_0000, 0x10_0000, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFE, 0xFFFF_FFFF, 0x1_0000_0000,
    i64::MAX as u64, 1 << 63, u64::MAX - 1, u64::MAX,
];

fn interesting() -> BoxedStrategy<u64> {
    prop_oneof![
        4 => proptest::sample::select(&INTERESTING[..]),
        2 => 0u64..64,
        1 => any::<u64>(),
    ]
    .boxed()
}

/// An edit of a byte string.
#[derive(Clone, Debug)]
enum ByteEdit {
    FlipBit {
        at: Index,
        bit: u8,
    },
    Overwrite {
        at: Index,
        bytes: Vec<u8>,
    },
    Truncate {
        at: Index,
    },
    Extend {
        bytes: Vec<u8>,
    },
    /// Zeros at the end (preallocated space).
    Zeros {
        n: usize,
    },
    Duplicate {
        from: Index,
        len: usize,
        to: Index,
    },
    Remove {
        from: Index,
        len: usize,
    },
    /// Set a little-endian integer of `width` bytes anywhere.
    SetInt {
        at: Index,
        width: u8,
        value: u64,
    },
    /// Set one of the format's integer fields (see [`fields`]).
    SetField {
        field: Index,
        value: u64,
    },
    /// Add `delta` to one of the format's integer fields (off-by-one
    /// lengths and counts).
    Nudge {
        field: Index,
        delta: i8,
    },
}

fn byte_edit() -> BoxedStrategy<ByteEdit> {
    let bytes = || proptest::collection::vec(any::<u8>(), 1..64);
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(at, bit)| ByteEdit::FlipBit { at, bit }),
        2 => (any::<Index>(), bytes()).prop_map(|(at, bytes)| ByteEdit::Overwrite { at, bytes }),
        2 => any::<Index>().prop_map(|at| ByteEdit::Truncate { at }),
        1 => proptest::collection::vec(any::<u8>(), 1..2048)
            .prop_map(|bytes| ByteEdit::Extend { bytes }),
        1 => (1usize..4096).prop_map(|n| ByteEdit::Zeros { n }),
        1 => (any::<Index>(), 1usize..2048, any::<Index>())
            .prop_map(|(from, len, to)| ByteEdit::Duplicate { from, len, to }),
        1 => (any::<Index>(), 1usize..512).prop_map(|(from, len)| ByteEdit::Remove { from, len }),
        2 => (any::<Index>(), proptest::sample::select(&[1u8, 2, 4, 8][..]), interesting())
            .prop_map(|(at, width, value)| ByteEdit::SetInt { at, width, value }),
        6 => (any::<Index>(), interesting())
            .prop_map(|(field, value)| ByteEdit::SetField { field, value }),
        3 => (any::<Index>(), -3i8..=3).prop_map(|(field, delta)| ByteEdit::Nudge { field, delta }),
    ]
    .boxed()
}

/// What the bytes being edited are, for [`fields`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A block stream (a segment or a checkpoint).
    Stream,
    /// A `Txns` payload.
    Payload,
    /// Anything else (no known fields).
    Opaque,
}

/// (offset, width) of the integer fields of `b`: for a stream, the header
/// fields of its valid leading blocks; for a payload, the fields of its
/// entries, writes and patch runs, following the documented layout as far
/// as it fits.
fn fields(b: &[u8], layout: Shape) -> Vec<(usize, usize)> {
    let mut f = Vec::new();
    match layout {
        Shape::Opaque => {}
        Shape::Stream => {
            for blk in valid_blocks(b) {
                let o = blk.offset as usize;
                // magic, version, kind, reserved, logger, reserved,
                // payload_len, seq, epoch, crc, reserved.
                for (at, w) in [
                    (0, 4),
                    (4, 2),
                    (6, 1),
                    (7, 1),
                    (8, 2),
                    (10, 2),
                    (12, 4),
                    (16, 8),
                    (24, 8),
                    (32, 4),
                    (36, 4),
                ] {
                    f.push((o + at, w));
                }
            }
        }
        Shape::Payload => {
            let u16_at = |at: usize| u16::from_le_bytes([b[at], b[at + 1]]) as usize;
            let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
            let mut at = 0;
            'entries: while at + 20 <= b.len() {
                // epoch, stamp, nwrites
                f.extend([(at, 8), (at + 8, 8), (at + 16, 4)]);
                let n = u32_at(at + 16);
                let mut w = at + 20;
                for _ in 0..n {
                    if w + 11 > b.len() {
                        break 'entries;
                    }
                    // table, op, key_len, val_len
                    f.extend([(w, 4), (w + 4, 1), (w + 5, 2), (w + 7, 4)]);
                    let val = w + 11 + u16_at(w + 5);
                    let end = val + u32_at(w + 7);
                    if end > b.len() {
                        break 'entries;
                    }
                    if b[w + 4] == WriteOp::Patch as u8 {
                        // runs: offset u32, len u32, bytes
                        let mut r = val;
                        while r + 8 <= end {
                            f.extend([(r, 4), (r + 4, 4)]);
                            r += 8 + u32_at(r + 4);
                        }
                    }
                    w = end;
                }
                at = w;
            }
        }
    }
    f
}

fn set_le(b: &mut [u8], at: usize, width: usize, value: u64) {
    b[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
}

fn get_le(b: &[u8], at: usize, width: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..width].copy_from_slice(&b[at..at + width]);
    u64::from_le_bytes(v)
}

fn apply_edit(b: &mut Vec<u8>, e: &ByteEdit, layout: Shape) {
    let len = b.len();
    match e {
        ByteEdit::FlipBit { at, bit } if len > 0 => b[at.index(len)] ^= 1 << bit,
        ByteEdit::Overwrite { at, bytes } if len > 0 => {
            let i = at.index(len);
            let end = (i + bytes.len()).min(len);
            b[i..end].copy_from_slice(&bytes[..end - i]);
        }
        ByteEdit::Truncate { at } => b.truncate(at.index(len + 1)),
        ByteEdit::Extend { bytes } => b.extend_from_slice(bytes),
        ByteEdit::Zeros { n } => b.resize(len + n, 0),
        ByteEdit::Duplicate { from, len: n, to } if len > 0 => {
            let s = from.index(len);
            let chunk = b[s..(s + n).min(len)].to_vec();
            let t = to.index(len + 1);
            b.splice(t..t, chunk);
        }
        ByteEdit::Remove { from, len: n } if len > 0 => {
            let s = from.index(len);
            b.drain(s..(s + n).min(len));
        }
        ByteEdit::SetInt { at, width, value } if len >= *width as usize => {
            let w = *width as usize;
            set_le(b, at.index(len - w + 1), w, *value);
        }
        ByteEdit::SetField { field, value } => {
            let f = fields(b, layout);
            if !f.is_empty() {
                let (at, w) = f[field.index(f.len())];
                set_le(b, at, w, *value);
            }
        }
        ByteEdit::Nudge { field, delta } => {
            let f = fields(b, layout);
            if !f.is_empty() {
                let (at, w) = f[field.index(f.len())];
                let v = get_le(b, at, w).wrapping_add(*delta as i64 as u64);
                set_le(b, at, w, v);
            }
        }
        _ => {}
    }
}

/// A change to a block header, made before its checksum is computed.
#[derive(Clone, Debug)]
enum HeaderEdit {
    Logger(u16),
    Seq(u64),
    Epoch(u64),
    /// Through `write_block`: the other kind (an epoch mark loses its payload).
    SwapKind,
    /// Raw byte 6 (the kind may become unknown).
    KindByte(u8),
    Version(u16),
    /// One of the reserved fields: byte 7, bytes 10..12, bytes 36..40.
    Reserved {
        which: u8,
        value: u64,
    },
}

fn header_edit() -> BoxedStrategy<HeaderEdit> {
    prop_oneof![
        1 => interesting().prop_map(|v| HeaderEdit::Logger(v as u16)),
        2 => interesting().prop_map(HeaderEdit::Seq),
        2 => interesting().prop_map(HeaderEdit::Epoch),
        1 => Just(HeaderEdit::SwapKind),
        1 => any::<u8>().prop_map(HeaderEdit::KindByte),
        1 => proptest::sample::select(&[0u16, 1, 2, 0xFFFF][..]).prop_map(HeaderEdit::Version),
        1 => (0u8..3, interesting()).prop_map(|(which, value)| HeaderEdit::Reserved { which, value }),
    ]
    .boxed()
}

/// An edit of a block stream.
#[derive(Clone, Debug)]
enum Mutation {
    Bytes(ByteEdit),
    /// Keep `self[..at]`, then `seed[from..]` of another seed.
    Splice {
        seed: Index,
        at: Index,
        from: Index,
    },
    /// Re-encode one valid block, its payload and header edited, with a
    /// valid checksum.
    Reblock {
        block: Index,
        header: Vec<HeaderEdit>,
        payload: Vec<ByteEdit>,
    },
    /// Insert a new block with a valid checksum at a block boundary.
    InsertBlock {
        at: Index,
        block: SynthBlock,
    },
}

fn mutation() -> BoxedStrategy<Mutation> {
    prop_oneof![
        4 => byte_edit().prop_map(Mutation::Bytes),
        1 => (any::<Index>(), any::<Index>(), any::<Index>())
            .prop_map(|(seed, at, from)| Mutation::Splice { seed, at, from }),
        6 => (
            any::<Index>(),
            proptest::collection::vec(header_edit(), 0..3),
            proptest::collection::vec(byte_edit(), 0..4),
        )
            .prop_map(|(block, header, payload)| Mutation::Reblock { block, header, payload }),
        1 => (any::<Index>(), synth_block())
            .prop_map(|(at, block)| Mutation::InsertBlock { at, block }),
    ]
    .boxed()
}

/// Recompute the checksum of the whole block `b` (header and payload).
fn reseal(b: &mut [u8]) {
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..32]), &b[HEADER_LEN..]);
    b[32..36].copy_from_slice(&crc.to_le_bytes());
}

/// Encodes a block with `format::write_block`, then applies the raw header
/// edits `write_block` cannot express and re-checksums.
fn encode_block(
    kind: BlockKind,
    logger: u16,
    seq: u64,
    epoch: u64,
    payload: &[u8],
    raw: &[HeaderEdit],
) -> Vec<u8> {
    let mut b = Vec::new();
    // An epoch mark with a payload is written as Txns, then retyped.
    let as_kind = if payload.is_empty() {
        kind
    } else {
        BlockKind::Txns
    };
    format::write_block(&mut b, as_kind, logger, seq, epoch, payload);
    let mut resealed = false;
    if as_kind != kind {
        b[6] = kind as u8;
        resealed = true;
    }
    for e in raw {
        match e {
            HeaderEdit::KindByte(k) => b[6] = *k,
            HeaderEdit::Version(v) => set_le(&mut b, 4, 2, *v as u64),
            HeaderEdit::Reserved { which, value } => match which {
                0 => b[7] = *value as u8,
                1 => set_le(&mut b, 10, 2, *value),
                _ => set_le(&mut b, 36, 4, *value),
            },
            _ => continue,
        }
        resealed = true;
    }
    if resealed {
        reseal(&mut b);
    }
    b
}

/// Rebuild one valid block of `b` (see [`Mutation::Reblock`]).
fn reblock(b: &mut Vec<u8>, block: &Index, header: &[HeaderEdit], payload_edits: &[ByteEdit]) {
    let blocks: Vec<_> = valid_blocks(b)
        .map(|x| {
            let start = x.offset as usize;
            (start, start + HEADER_LEN + x.payload.len(), x.header)
        })
        .collect();
    if blocks.is_empty() {
        return;
    }
    let (start, end, h) = blocks[block.index(blocks.len())];
    let mut payload = b[start + HEADER_LEN..end].to_vec();
    for e in payload_edits {
        apply_edit(&mut payload, e, Shape::Payload);
    }
    let (mut kind, mut logger, mut seq, mut epoch) = (h.kind, h.logger, h.seq, h.epoch);
    for e in header {
        match e {
            HeaderEdit::Logger(l) => logger = *l,
            HeaderEdit::Seq(s) => seq = *s,
            HeaderEdit::Epoch(x) => epoch = *x,
            HeaderEdit::SwapKind => {
                kind = match kind {
                    BlockKind::Txns => {
                        payload.clear();
                        BlockKind::EpochMark
                    }
                    BlockKind::EpochMark | BlockKind::Input => BlockKind::Txns,
                }
            }
            _ => {}
        }
    }
    let nb = encode_block(kind, logger, seq, epoch, &payload, header);
    b.splice(start..end, nb);
}

/// A block built from scratch.
#[derive(Clone, Debug)]
struct SynthBlock {
    mark: bool,
    logger: u16,
    seq: u64,
    epoch: u64,
    payload: SynthPayload,
}

/// A payload built from scratch.
#[derive(Clone, Debug)]
enum SynthPayload {
    Random(Vec<u8>),
    Entries(Vec<SynthEntry>, Vec<ByteEdit>),
}

/// A transaction entry built with `begin_txn`, `push_write`, `push_patch`
/// and `finish_txn`.
#[derive(Clone, Debug)]
struct SynthEntry {
    epoch: u64,
    stamp: u64,
    writes: Vec<SynthWrite>,
}

/// One write: `op` 0 put, 1 delete, 2 patch from `val` to `val` with
/// `flips` applied (a put when the change is large).
#[derive(Clone, Debug)]
struct SynthWrite {
    table: u32,
    op: u8,
    key: Vec<u8>,
    val: Vec<u8>,
    flips: Vec<(Index, u8)>,
}

fn synth_entry() -> BoxedStrategy<SynthEntry> {
    let write = (
        prop_oneof![3 => 0u32..3, 1 => interesting().prop_map(|v| v as u32)],
        0u8..3,
        proptest::collection::vec(any::<u8>(), 0..16),
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec((any::<Index>(), any::<u8>()), 0..6),
    )
        .prop_map(|(table, op, key, val, flips)| SynthWrite {
            table,
            op,
            key,
            val,
            flips,
        });
    (
        interesting(),
        interesting(),
        proptest::collection::vec(write, 0..5),
    )
        .prop_map(|(epoch, stamp, writes)| SynthEntry {
            epoch,
            stamp,
            writes,
        })
        .boxed()
}

fn synth_payload() -> BoxedStrategy<SynthPayload> {
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..512).prop_map(SynthPayload::Random),
        3 => (
            proptest::collection::vec(synth_entry(), 0..6),
            proptest::collection::vec(byte_edit(), 0..3),
        )
            .prop_map(|(e, x)| SynthPayload::Entries(e, x)),
    ]
    .boxed()
}

fn synth_block() -> BoxedStrategy<SynthBlock> {
    (
        any::<bool>(),
        prop_oneof![3 => Just(0u16), 1 => any::<u16>()],
        interesting(),
        interesting(),
        synth_payload(),
    )
        .prop_map(|(mark, logger, seq, epoch, payload)| SynthBlock {
            mark,
            logger,
            seq,
            epoch,
            payload,
        })
        .boxed()
}

fn encode_entries(entries: &[SynthEntry]) -> Vec<u8> {
    let mut p = Vec::new();
    for e in entries {
        let at = format::begin_txn(&mut p, e.epoch, e.stamp);
        for w in &e.writes {
            match w.op {
                0 => format::push_write(&mut p, w.table, WriteOp::Put, &w.key, &w.val),
                1 => format::push_write(&mut p, w.table, WriteOp::Delete, &w.key, &[]),
                _ => {
                    let mut new = w.val.clone();
                    for (i, x) in &w.flips {
                        if !new.is_empty() {
                            let n = new.len();
                            new[i.index(n)] = *x;
                        }
                    }
                    format::push_patch(&mut p, w.table, &w.key, &w.val, &new);
                }
            }
        }
        format::finish_txn(&mut p, at, e.writes.len() as u32);
    }
    p
}

fn encode_payload(p: &SynthPayload) -> Vec<u8> {
    match p {
        SynthPayload::Random(b) => b.clone(),
        SynthPayload::Entries(entries, edits) => {
            let mut b = encode_entries(entries);
            for e in edits {
                apply_edit(&mut b, e, Shape::Payload);
            }
            b
        }
    }
}

fn encode_synth_block(s: &SynthBlock) -> Vec<u8> {
    let payload = if s.mark {
        Vec::new()
    } else {
        encode_payload(&s.payload)
    };
    let kind = if s.mark {
        BlockKind::EpochMark
    } else {
        BlockKind::Txns
    };
    encode_block(kind, s.logger, s.seq, s.epoch, &payload, &[])
}

/// Inputs are capped at this size (mutations can only grow them a little,
/// but splices and duplicates compound).
const MAX_INPUT: usize = 1 << 20;

fn apply_mutation(b: &mut Vec<u8>, m: &Mutation, seeds: &[Vec<u8>]) {
    match m {
        Mutation::Bytes(e) => apply_edit(b, e, Shape::Stream),
        Mutation::Splice { seed, at, from } => {
            if !seeds.is_empty() {
                let other = &seeds[seed.index(seeds.len())];
                b.truncate(at.index(b.len() + 1));
                b.extend_from_slice(&other[from.index(other.len() + 1)..]);
            }
        }
        Mutation::Reblock {
            block,
            header,
            payload,
        } => reblock(b, block, header, payload),
        Mutation::InsertBlock { at, block } => {
            let mut ends: Vec<usize> = vec![0];
            ends.extend(valid_blocks(b).map(|x| x.offset as usize + HEADER_LEN + x.payload.len()));
            let at = ends[at.index(ends.len())];
            b.splice(at..at, encode_synth_block(block));
        }
    }
    b.truncate(MAX_INPUT);
}

/// Where the bytes of an input come from.
#[derive(Clone, Debug)]
enum Source {
    /// A seed of the corpus.
    Seed(Index),
    Random(Vec<u8>),
    /// A stream of blocks built from scratch.
    Blocks(Vec<SynthBlock>),
}

/// A source and the mutations applied to it.
#[derive(Clone, Debug)]
struct Recipe {
    source: Source,
    mutations: Vec<Mutation>,
}

impl Recipe {
    fn bytes(&self, seeds: &[Vec<u8>]) -> Vec<u8> {
        let mut b = match &self.source {
            Source::Seed(i) if !seeds.is_empty() => seeds[i.index(seeds.len())].clone(),
            Source::Seed(_) => Vec::new(),
            Source::Random(b) => b.clone(),
            Source::Blocks(bs) => bs.iter().flat_map(encode_synth_block).collect(),
        };
        for m in &self.mutations {
            apply_mutation(&mut b, m, seeds);
        }
        b
    }
}

fn recipe() -> BoxedStrategy<Recipe> {
    let source = prop_oneof![
        6 => any::<Index>().prop_map(Source::Seed),
        1 => proptest::collection::vec(any::<u8>(), 0..4096).prop_map(Source::Random),
        2 => proptest::collection::vec(synth_block(), 0..6).prop_map(Source::Blocks),
    ];
    (source, proptest::collection::vec(mutation(), 0..4))
        .prop_map(|(source, mutations)| Recipe { source, mutations })
        .boxed()
}

/// A recipe whose mutations are only edits (for seeds that are not block
/// streams: the frontier).
fn opaque_recipe() -> BoxedStrategy<Recipe> {
    let source = prop_oneof![
        6 => any::<Index>().prop_map(Source::Seed),
        1 => proptest::collection::vec(any::<u8>(), 0..9000).prop_map(Source::Random),
    ];
    (
        source,
        proptest::collection::vec(byte_edit().prop_map(Mutation::Bytes), 0..4),
    )
        .prop_map(|(source, mutations)| Recipe { source, mutations })
        .boxed()
}

// ---------------------------------------------------------------------------
// Control-file mutations (line by line, CRC recomputed)
// ---------------------------------------------------------------------------

/// A token to put into a control-file line.
fn token() -> BoxedStrategy<String> {
    let names: Vec<String> = corpus().files.keys().cloned().collect();
    prop_oneof![
        3 => interesting().prop_map(|v| v.to_string()),
        1 => proptest::sample::select(
            &["", "-1", "+5", "0x10", "18446744073709551616", "99999999999999999999999",
              "primary", "secondary", "1 2", " ", "..", "../..", "/", "\u{e9}t\u{e9}"][..],
        )
        .prop_map(str::to_string),
        1 => proptest::sample::select(names),
        1 => "[ -~]{0,12}",
    ]
    .boxed()
}

/// An edit of the control file's body (its lines before `crc32c`).
#[derive(Clone, Debug)]
enum LineEdit {
    Delete(Index),
    Duplicate(Index),
    Swap(Index, Index),
    /// Replace the `token`-th space-separated word of a line.
    SetToken {
        line: Index,
        token: Index,
        value: String,
    },
    /// Add a word at the end of a line.
    Append {
        line: Index,
        value: String,
    },
    Insert {
        at: Index,
        line: String,
    },
    /// A byte edit of the whole body.
    Bytes(ByteEdit),
}

fn line_edit() -> BoxedStrategy<LineEdit> {
    let keyword = proptest::sample::select(
        &[
            "tessera-meta",
            "gen",
            "table",
            "void",
            "checkpoint",
            "checkpoint-needs",
            "run",
            "crc32c",
            "",
        ][..],
    );
    let new_line = (keyword, proptest::collection::vec(token(), 0..4)).prop_map(|(k, args)| {
        std::iter::once(k.to_string())
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ")
    });
    prop_oneof![
        2 => any::<Index>().prop_map(LineEdit::Delete),
        1 => any::<Index>().prop_map(LineEdit::Duplicate),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| LineEdit::Swap(a, b)),
        6 => (any::<Index>(), any::<Index>(), token())
            .prop_map(|(line, token, value)| LineEdit::SetToken { line, token, value }),
        1 => (any::<Index>(), token()).prop_map(|(line, value)| LineEdit::Append { line, value }),
        3 => (any::<Index>(), new_line).prop_map(|(at, line)| LineEdit::Insert { at, line }),
        1 => byte_edit().prop_map(LineEdit::Bytes),
    ]
    .boxed()
}

/// How a control file is made.
#[derive(Clone, Debug)]
enum MetaRecipe {
    /// A seed (or random bytes) with byte-level mutations, CRC left alone.
    Raw(Recipe),
    /// A seed's body edited line by line; the `crc32c` line recomputed
    /// unless `keep_crc`.
    Lines {
        seed: Index,
        edits: Vec<LineEdit>,
        keep_crc: bool,
    },
}

fn meta_recipe() -> BoxedStrategy<MetaRecipe> {
    prop_oneof![
        1 => opaque_recipe().prop_map(MetaRecipe::Raw),
        4 => (
            any::<Index>(),
            proptest::collection::vec(line_edit(), 1..5),
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(seed, edits, keep_crc)| MetaRecipe::Lines { seed, edits, keep_crc }),
    ]
    .boxed()
}

/// The body of a control file: everything before its last `crc32c ` line.
fn meta_body(text: &[u8]) -> &[u8] {
    let at = text
        .windows(7)
        .rposition(|w| w == b"crc32c ")
        .unwrap_or(text.len());
    &text[..at]
}

/// A body with its `crc32c` trailer: CRC32C of every byte before the
/// `crc32c ` line, 8 hex digits.
fn with_crc(body: &[u8]) -> Vec<u8> {
    let mut t = body.to_vec();
    t.extend_from_slice(format!("crc32c {:08x}\n", crc32c::crc32c(body)).as_bytes());
    t
}

impl MetaRecipe {
    fn bytes(&self, seeds: &[Vec<u8>]) -> Vec<u8> {
        match self {
            MetaRecipe::Raw(r) => r.bytes(seeds),
            MetaRecipe::Lines {
                seed,
                edits,
                keep_crc,
            } => edit_meta(&seeds[seed.index(seeds.len())], edits, *keep_crc),
        }
    }
}

/// Applies `edits` to the body lines of the control file `seed`, then
/// appends a recomputed `crc32c` line (or, with `keep_crc`, the seed's).
fn edit_meta(seed: &[u8], edits: &[LineEdit], keep_crc: bool) -> Vec<u8> {
    let body = meta_body(seed);
    let mut lines: Vec<Vec<u8>> = body.split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
    // The body ends with a newline: drop the empty last piece.
    if lines.last().is_some_and(Vec::is_empty) {
        lines.pop();
    }
    let mut raw: Vec<&ByteEdit> = Vec::new();
    for e in edits {
        edit_lines(&mut lines, e, &mut raw);
    }
    let mut new_body: Vec<u8> = lines.join(&b'\n');
    new_body.push(b'\n');
    for e in raw {
        apply_edit(&mut new_body, e, Shape::Opaque);
    }
    if keep_crc {
        new_body.extend_from_slice(&seed[body.len()..]);
        new_body
    } else {
        with_crc(&new_body)
    }
}

fn edit_lines<'a>(lines: &mut Vec<Vec<u8>>, e: &'a LineEdit, raw: &mut Vec<&'a ByteEdit>) {
    let n = lines.len();
    match e {
        LineEdit::Delete(i) if n > 0 => {
            lines.remove(i.index(n));
        }
        LineEdit::Duplicate(i) if n > 0 => {
            let i = i.index(n);
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        LineEdit::Swap(a, b) if n > 0 => lines.swap(a.index(n), b.index(n)),
        LineEdit::SetToken { line, token, value } if n > 0 => {
            let l = &mut lines[line.index(n)];
            let mut words: Vec<Vec<u8>> = l.split(|&c| c == b' ').map(<[u8]>::to_vec).collect();
            let k = token.index(words.len());
            words[k] = value.as_bytes().to_vec();
            *l = words.join(&b' ');
        }
        LineEdit::Append { line, value } if n > 0 => {
            let l = &mut lines[line.index(n)];
            l.push(b' ');
            l.extend_from_slice(value.as_bytes());
        }
        LineEdit::Insert { at, line } => lines.insert(at.index(n + 1), line.as_bytes().to_vec()),
        LineEdit::Bytes(b) => raw.push(b),
        _ => {}
    }
}

// ---------------------------------------------------------------------------
// 1. The block reader, entries, patches, marks_after
// ---------------------------------------------------------------------------

/// Reads `bytes` the way recovery does: every block, every entry of a
/// `Txns` block and every write of an entry; each patch applied to a
/// value; `marks_after` after damage; `salvage_blocks` over the whole.
/// Checks the reader's documented shape as it goes.
fn read_stream(bytes: &[u8], stats: &mut Stats) -> Result<(), String> {
    let mut reader = format::BlockReader::new(bytes);
    let mut expect_offset = 0u64;
    let mut damage: Option<Damage> = None;
    for item in reader.by_ref() {
        if damage.is_some() {
            return Err("an item after the damage".into());
        }
        match item {
            Ok(b) => {
                stats.add("blocks", 1);
                if b.offset != expect_offset || b.payload.len() != b.header.payload_len as usize {
                    return Err(format!("block at {} breaks the chain", b.offset));
                }
                expect_offset = b.offset + (HEADER_LEN + b.payload.len()) as u64;
                match b.header.kind {
                    BlockKind::Txns => read_entries(b.payload, stats)?,
                    BlockKind::EpochMark if !b.payload.is_empty() => {
                        return Err("an epoch mark with a payload".into())
                    }
                    // An input-log block (a deterministic database's) is
                    // well formed with any payload; recovery of a redo
                    // stream refuses it, a level above the block reader.
                    BlockKind::EpochMark | BlockKind::Input => {}
                }
            }
            Err(d) => {
                stats.add(
                    match d {
                        Damage::TornTail { .. } => "torn tails",
                        Damage::Corrupt { .. } => "corrupt",
                        Damage::NewerVersion { .. } => "newer versions",
                    },
                    1,
                );
                if d.offset() != expect_offset {
                    return Err(format!(
                        "damage at {} after a block ending at {expect_offset}",
                        d.offset()
                    ));
                }
                let marks = format::marks_after(bytes, d.offset() as usize + 1, 2);
                if marks > 2 {
                    return Err(format!("marks_after counted {marks} past its limit 2"));
                }
                damage = Some(d);
            }
        }
    }
    if reader.valid_end() != expect_offset {
        return Err(format!(
            "valid_end {} but the last block ends at {expect_offset}",
            reader.valid_end()
        ));
    }
    let mut last = None;
    for b in format::salvage_blocks(bytes) {
        stats.add("salvaged blocks", 1);
        if last.is_some_and(|l| b.offset < l) {
            return Err("salvage_blocks went backwards".into());
        }
        last = Some(b.offset + (HEADER_LEN + b.payload.len()) as u64);
    }
    Ok(())
}

/// Decodes every entry and write of a `Txns` payload, applying patches to
/// a scratch value.
fn read_entries(payload: &[u8], stats: &mut Stats) -> Result<(), String> {
    let mut scratch = vec![0u8; 240];
    let mut errors = 0;
    for e in format::entries(payload) {
        if errors > 0 {
            return Err("an entry after an entry error".into());
        }
        match e {
            Ok(e) => {
                stats.add("entries", 1);
                let mut n = 0u64;
                for w in e.writes() {
                    n += 1;
                    if w.op == WriteOp::Delete && !w.val.is_empty() {
                        return Err("a delete with a value".into());
                    }
                    if w.op == WriteOp::Patch {
                        let r = format::apply_patch(&mut scratch, w.val);
                        stats.add(
                            if r.is_ok() {
                                "patches applied"
                            } else {
                                "patches refused"
                            },
                            1,
                        );
                    }
                }
                stats.add("writes", n);
                if n != e.nwrites as u64 {
                    return Err(format!("{n} writes in an entry of nwrites {}", e.nwrites));
                }
            }
            Err(_) => {
                stats.add("entry errors", 1);
                errors += 1;
            }
        }
    }
    Ok(())
}

#[test]
fn fuzz_block_reader_entries_and_marks() {
    let _turn = serial();
    let c = corpus();
    let stats = RefCell::new(Stats::default());
    fuzz(
        "BlockReader + entries + writes + apply_patch + marks_after + salvage_blocks",
        cases("FUZZ_CASES", 256),
        recipe(),
        &stats,
        |r| {
            let bytes = r.bytes(&c.streams);
            let mut s = Stats::default();
            let (out, u) = bounded(
                "BlockReader",
                bytes.len(),
                time_limit(bytes.len()),
                true,
                || read_stream(&bytes, &mut s),
            )?;
            out.map_err(TestCaseError::fail)?;
            let mut st = stats.borrow_mut();
            st.ran(bytes.len(), u);
            for (k, v) in s.counts {
                st.add(k, v);
            }
            Ok(())
        },
    );
}

/// A `Txns` payload to decode on its own.
#[derive(Clone, Debug)]
enum PayloadRecipe {
    /// A payload of the corpus, edited.
    Real(Index, Vec<ByteEdit>),
    Random(Vec<u8>),
    Synth(SynthPayload),
}

fn payload_recipe() -> BoxedStrategy<PayloadRecipe> {
    prop_oneof![
        4 => (any::<Index>(), proptest::collection::vec(byte_edit(), 1..5))
            .prop_map(|(i, e)| PayloadRecipe::Real(i, e)),
        1 => proptest::collection::vec(any::<u8>(), 0..1024).prop_map(PayloadRecipe::Random),
        2 => synth_payload().prop_map(PayloadRecipe::Synth),
    ]
    .boxed()
}

#[test]
fn fuzz_entries_on_payloads() {
    let _turn = serial();
    let c = corpus();
    let stats = RefCell::new(Stats::default());
    fuzz(
        "entries + writes on payloads",
        cases("FUZZ_CASES", 256),
        payload_recipe(),
        &stats,
        |r| {
            let payload = match &r {
                PayloadRecipe::Real(i, edits) => {
                    let mut p = c.payloads[i.index(c.payloads.len())].clone();
                    for e in edits {
                        apply_edit(&mut p, e, Shape::Payload);
                    }
                    p
                }
                PayloadRecipe::Random(b) => b.clone(),
                PayloadRecipe::Synth(s) => encode_payload(s),
            };
            let mut s = Stats::default();
            let (out, u) = bounded(
                "entries",
                payload.len(),
                time_limit(payload.len()),
                true,
                || read_entries(&payload, &mut s),
            )?;
            out.map_err(TestCaseError::fail)?;
            let mut st = stats.borrow_mut();
            st.ran(payload.len(), u);
            for (k, v) in s.counts {
                st.add(k, v);
            }
            Ok(())
        },
    );
}

/// A patch: arbitrary bytes, or runs whose fields may disagree with their
/// data and the value.
#[derive(Clone, Debug)]
enum PatchRecipe {
    Random(Vec<u8>),
    Runs(Vec<(u64, u64, Vec<u8>)>),
}

/// Applies `patch` to `base` as documented: runs of offset u32, len u32 and
/// len bytes, each inside the value; `None` if some run is not.
fn model_patch(base: &[u8], patch: &[u8]) -> Option<Vec<u8>> {
    let mut v = base.to_vec();
    let mut p = 0;
    while p < patch.len() {
        let hdr = patch.get(p..p + 8)?;
        let off = u32::from_le_bytes(hdr[..4].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(hdr[4..].try_into().unwrap()) as usize;
        let data = patch.get(p + 8..p + 8 + len)?;
        v.get_mut(off..off + len)?.copy_from_slice(data);
        p += 8 + len;
    }
    Some(v)
}

#[test]
fn fuzz_apply_patch() {
    let _turn = serial();
    let stats = RefCell::new(Stats::default());
    let patch = prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..256).prop_map(PatchRecipe::Random),
        3 => proptest::collection::vec(
            (
                prop_oneof![2 => 0u64..300, 1 => interesting()],
                prop_oneof![2 => 0u64..64, 1 => interesting()],
                proptest::collection::vec(any::<u8>(), 0..64),
            ),
            0..5,
        )
        .prop_map(PatchRecipe::Runs),
    ];
    fuzz(
        "apply_patch",
        cases("FUZZ_CASES", 256),
        (proptest::collection::vec(any::<u8>(), 0..300), patch),
        &stats,
        |(base, patch)| {
            let patch = match patch {
                PatchRecipe::Random(b) => b,
                PatchRecipe::Runs(runs) => {
                    let mut p = Vec::new();
                    for (off, len, data) in runs {
                        p.extend_from_slice(&(off as u32).to_le_bytes());
                        p.extend_from_slice(&(len as u32).to_le_bytes());
                        p.extend_from_slice(&data);
                    }
                    p
                }
            };
            let mut value = base.clone();
            let (r, u) = bounded(
                "apply_patch",
                patch.len(),
                time_limit(patch.len()),
                true,
                || format::apply_patch(&mut value, &patch),
            )?;
            let want = model_patch(&base, &patch);
            check(r.is_ok() == want.is_some(), || {
                format!(
                    "apply_patch said {r:?}, the documented layout says {}",
                    want.is_some()
                )
            })?;
            if let Some(w) = want {
                check(value == w, || {
                    "apply_patch wrote other bytes than its runs".into()
                })?;
            }
            let mut st = stats.borrow_mut();
            st.ran(patch.len(), u);
            st.add(if r.is_ok() { "applied" } else { "refused" }, 1);
            Ok(())
        },
    );
}

#[test]
fn fuzz_marks_after() {
    let _turn = serial();
    let c = corpus();
    let stats = RefCell::new(Stats::default());
    let limit = prop_oneof![0usize..4, Just(usize::MAX)];
    fuzz(
        "marks_after",
        cases("FUZZ_CASES", 256),
        (recipe(), any::<Index>(), limit),
        &stats,
        |(r, from, limit)| {
            let bytes = r.bytes(&c.streams);
            // Any start inside the stream or a little past its end.
            let from = from.index(bytes.len() + 64);
            let (n, u) = bounded(
                "marks_after",
                bytes.len(),
                time_limit(bytes.len()),
                true,
                || format::marks_after(&bytes, from, limit),
            )?;
            check(n <= limit, || format!("{n} marks counted, limit {limit}"))?;
            let mut st = stats.borrow_mut();
            st.ran(bytes.len(), u);
            st.add("marks counted", n as u64);
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// 2. The control file, the frontier, checkpoints
// ---------------------------------------------------------------------------

#[test]
fn fuzz_meta_load() {
    let _turn = serial();
    let c = corpus();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(META_FILE);
    let stats = RefCell::new(Stats::default());
    fuzz(
        "Meta::load",
        cases("FUZZ_CASES", 256),
        meta_recipe(),
        &stats,
        |r| {
            let bytes = r.bytes(&c.metas);
            std::fs::write(&path, &bytes).unwrap();
            let (m, u) = bounded(
                "Meta::load",
                bytes.len(),
                time_limit(bytes.len()),
                true,
                || Meta::load(dir.path()),
            )?;
            let mut st = stats.borrow_mut();
            st.ran(bytes.len(), u);
            match m {
                Ok(Some(m)) => {
                    st.add("loaded", 1);
                    // What loads is what the file says: rendering it again
                    // (as the next generation) loads back the same.
                    let mut again = m.clone();
                    let d2 = tempfile::tempdir().unwrap();
                    let stored = again.store(d2.path());
                    if m.gen == meta::MAX_GEN {
                        // The last generation cannot be followed.
                        check(stored.is_err(), || {
                            format!("{m:?} stored past the last generation")
                        })?;
                    } else {
                        stored.unwrap();
                        let back = Meta::load(d2.path()).unwrap();
                        check(back.as_ref() == Some(&again), || {
                            format!("{m:?} stored and loaded back as {back:?}")
                        })?;
                    }
                }
                Ok(None) => return Err(TestCaseError::fail("the file is there")),
                Err(_) => st.add("refused", 1),
            }
            Ok(())
        },
    );
}

/// Recompute the checksum of each non-zero frontier slot of `b` (its
/// `nloggers` field says where the checksum sits), so the slot's body is
/// parsed.
fn reseal_frontier(b: &mut [u8]) {
    for slot in b.chunks_mut(frontier::SLOT_BYTES) {
        if slot.len() < 8 || slot.iter().all(|&x| x == 0) {
            continue;
        }
        let n = u16::from_le_bytes([slot[6], slot[7]]) as usize;
        let end = 32 + n * 40;
        if end + 4 <= slot.len() {
            let crc = crc32c::crc32c(&slot[..end]);
            slot[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
}

#[test]
fn fuzz_frontier_read() {
    let _turn = serial();
    let c = corpus();
    let seeds = vec![c.files[FRONTIER_FILE].clone()];
    let dir = tempfile::tempdir().unwrap();
    let stats = RefCell::new(Stats::default());
    fuzz(
        "frontier::read",
        cases("FUZZ_CASES", 256),
        (opaque_recipe(), proptest::bool::weighted(0.7)),
        &stats,
        |(r, resealed)| {
            let mut bytes = r.bytes(&seeds);
            if resealed {
                reseal_frontier(&mut bytes);
            }
            std::fs::write(dir.path().join(FRONTIER_FILE), &bytes).unwrap();
            let (f, u) = bounded(
                "frontier::read",
                bytes.len(),
                time_limit(bytes.len()),
                true,
                || frontier::read(dir.path()),
            )?;
            let mut st = stats.borrow_mut();
            st.ran(bytes.len(), u);
            st.add(
                match f {
                    Ok(Some(r)) if r.warning.is_some() => "read with a warning",
                    Ok(Some(_)) => "read",
                    Ok(None) => return Err(TestCaseError::fail("the file is there")),
                    Err(_) => "refused",
                },
                1,
            );
            Ok(())
        },
    );
}

#[test]
fn fuzz_checkpoint_read() {
    let _turn = serial();
    let c = corpus();
    let dir = tempfile::tempdir().unwrap();
    let (name, epoch) = c.checkpoint.clone();
    // The checkpoint first among the seeds, and twice as likely.
    let mut seeds = vec![c.streams.last().unwrap().clone(); 2];
    seeds.extend(c.streams.iter().cloned());
    let stats = RefCell::new(Stats::default());
    fuzz(
        "checkpoint::read",
        cases("FUZZ_CASES", 256),
        (recipe(), prop_oneof![4 => Just(epoch), 1 => interesting()]),
        &stats,
        |(r, c)| {
            let bytes = r.bytes(&seeds);
            std::fs::write(dir.path().join(&name), &bytes).unwrap();
            let (out, u) = bounded(
                "checkpoint::read",
                bytes.len(),
                time_limit(bytes.len()),
                true,
                || checkpoint::read(dir.path(), &name, c),
            )?;
            let mut st = stats.borrow_mut();
            st.ran(bytes.len(), u);
            match out {
                Ok(b) => {
                    check(b == bytes, || {
                        "checkpoint::read returned other bytes".into()
                    })?;
                    st.add("read", 1);
                }
                Err(_) => st.add("refused", 1),
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// 3. The whole log: LogScan::read
// ---------------------------------------------------------------------------

/// The frontier passed to `LogScan::read`.
#[derive(Clone, Debug)]
enum FrontierChoice {
    None,
    /// The corpus directory's own.
    Real,
    /// One that fits the files of the case: logger 0's stream from the
    /// first file to the end of the last (unmutated) file's last mark.
    Fitted,
    /// The corpus directory's, with stream fields set: (stream, field:
    /// 0 first_segno, 1 segno, 2 offset, 3 mark, 4 logger; value).
    Edited(Vec<(Index, u8, u64)>),
}

fn frontier_choice() -> BoxedStrategy<FrontierChoice> {
    prop_oneof![
        2 => Just(FrontierChoice::None),
        1 => Just(FrontierChoice::Real),
        3 => Just(FrontierChoice::Fitted),
        2 => proptest::collection::vec((any::<Index>(), 0u8..5, interesting()), 1..3)
            .prop_map(FrontierChoice::Edited),
    ]
    .boxed()
}

/// The stream position just past the last epoch mark of `bytes`: (offset,
/// mark epoch).
fn last_mark(bytes: &[u8]) -> (u64, u64) {
    valid_blocks(bytes)
        .filter(|b| b.header.kind == BlockKind::EpochMark)
        .map(|b| (b.offset + HEADER_LEN as u64, b.header.epoch))
        .last()
        .unwrap_or((0, 0))
}

impl FrontierChoice {
    /// `files`: (logger, segno, unmutated bytes) of the case's segments.
    fn make(&self, real: &Frontier, files: &[(u16, u64, &[u8])]) -> Option<Frontier> {
        match self {
            FrontierChoice::None => None,
            FrontierChoice::Real => Some(real.clone()),
            FrontierChoice::Fitted => {
                let mut f = real.clone();
                let (first, last) = (files.first()?, files.last()?);
                let (offset, mark) = last_mark(last.2);
                f.streams = vec![StreamFrontier {
                    logger: first.0,
                    first_segno: first.1,
                    segno: last.1,
                    offset,
                    mark,
                }];
                Some(f)
            }
            FrontierChoice::Edited(edits) => {
                let mut f = real.clone();
                for (i, field, v) in edits {
                    if f.streams.is_empty() {
                        f.streams.push(StreamFrontier::default());
                    }
                    let n = f.streams.len();
                    let s = &mut f.streams[i.index(n)];
                    match field {
                        0 => s.first_segno = *v,
                        1 => s.segno = *v,
                        2 => s.offset = *v,
                        3 => s.mark = *v,
                        _ => s.logger = *v as u16,
                    }
                }
                Some(f)
            }
        }
    }
}

/// One or two consecutive segments of the corpus, mutated, maybe renamed.
#[derive(Clone, Debug)]
struct ScanRecipe {
    first: Index,
    two: bool,
    /// Other (logger, segno) names for the files.
    rename: Option<[(u16, u64); 2]>,
    mutations: [Vec<Mutation>; 2],
    frontier: FrontierChoice,
    mode: Index,
}

fn scan_recipe() -> BoxedStrategy<ScanRecipe> {
    let name = (
        prop_oneof![3 => Just(0u16), 1 => interesting().prop_map(|v| v as u16)],
        interesting(),
    );
    let muts = || proptest::collection::vec(mutation(), 0..3);
    (
        any::<Index>(),
        proptest::bool::weighted(0.7),
        proptest::option::weighted(0.15, [name.clone(), name]),
        [muts(), muts()],
        frontier_choice(),
        any::<Index>(),
    )
        .prop_map(
            |(first, two, rename, mutations, frontier, mode)| ScanRecipe {
                first,
                two,
                rename,
                mutations,
                frontier,
                mode,
            },
        )
        .boxed()
}

impl ScanRecipe {
    /// The files to write (name, bytes) and the frontier to pass.
    fn build(&self, c: &Corpus) -> (Vec<(String, Vec<u8>)>, Option<Frontier>) {
        let nseg = c.segments.len();
        let first = self.first.index(nseg);
        let last = if self.two {
            (first + 1).min(nseg - 1)
        } else {
            first
        };
        let mut files = Vec::new();
        let mut originals = Vec::new();
        for (k, i) in (first..=last).enumerate() {
            let (logger, segno) = match &self.rename {
                Some(names) => names[k],
                None => c.segments[i],
            };
            originals.push((logger, segno, &c.streams[i][..]));
            let mut b = c.streams[i].clone();
            for m in &self.mutations[k] {
                apply_mutation(&mut b, m, &c.streams);
            }
            files.push((segment::segment_name(logger, segno), b));
        }
        (files, self.frontier.make(&c.frontier, &originals))
    }
}

/// Removes every file of `dir`.
fn clear(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
}

#[test]
fn fuzz_log_scan_read() {
    let _turn = serial();
    let c = corpus();
    let dir = tempfile::tempdir().unwrap();
    let stats = RefCell::new(Stats::default());
    fuzz(
        "LogScan::read",
        cases("FUZZ_CASES", 256),
        scan_recipe(),
        &stats,
        |r| {
            clear(dir.path());
            let (files, fr) = r.build(c);
            let mut total = 0;
            for (name, bytes) in &files {
                std::fs::write(dir.path().join(name), bytes).unwrap();
                total += bytes.len();
            }
            let mode = RecoveryMode::ALL[r.mode.index(RecoveryMode::ALL.len())];
            let (out, u) = bounded("LogScan::read", total, time_limit(total), true, || {
                LogScan::read(dir.path(), fr.as_ref(), mode).map(|scan| {
                    let loggers = scan.streams.len() as u32;
                    let _ = (scan.max_epoch(), scan.durable_epoch(loggers, 0));
                    scan.valid_bytes()
                })
            })?;
            let mut st = stats.borrow_mut();
            st.ran(total, u);
            match out {
                Ok(valid) => {
                    check(valid <= total as u64, || {
                        format!("{valid} valid bytes of {total}")
                    })?;
                    st.add(
                        match mode {
                            RecoveryMode::Strict => "read (strict)",
                            RecoveryMode::TolerateTail => "read (tolerate-tail)",
                            RecoveryMode::PointInTime => "read (point-in-time)",
                            RecoveryMode::Salvage => "read (salvage)",
                        },
                        1,
                    );
                }
                Err(_) => st.add("refused", 1),
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------
// 4. End to end: Database::open on a damaged directory
// ---------------------------------------------------------------------------

/// An edit of one file of the directory.
#[derive(Clone, Debug)]
enum FileEdit {
    /// Mutate the file the index picks.
    Mutate(Vec<Mutation>),
    /// Edit `tessera.meta`'s lines, its CRC recomputed.
    Meta(Vec<LineEdit>),
    /// Edit `tessera.frontier`, its slots' checksums recomputed.
    Frontier(Vec<ByteEdit>),
    /// Delete the file the index picks.
    Remove,
}

fn file_edit() -> BoxedStrategy<FileEdit> {
    prop_oneof![
        6 => proptest::collection::vec(mutation(), 1..4).prop_map(FileEdit::Mutate),
        3 => proptest::collection::vec(line_edit(), 1..4).prop_map(FileEdit::Meta),
        1 => proptest::collection::vec(byte_edit(), 1..3).prop_map(FileEdit::Frontier),
        1 => Just(FileEdit::Remove),
    ]
    .boxed()
}

/// A damaged copy of the corpus directory, and how to open it.
#[derive(Clone, Debug)]
struct DirRecipe {
    edits: Vec<(Index, FileEdit)>,
    /// An extra segment file: (logger, segno, contents).
    extra: Option<(u16, u64, Recipe)>,
    mode: Index,
    read_only: bool,
}

fn dir_recipe() -> BoxedStrategy<DirRecipe> {
    let extra = (
        prop_oneof![3 => Just(0u16), 1 => interesting().prop_map(|v| v as u16)],
        interesting(),
        recipe(),
    );
    (
        proptest::collection::vec((any::<Index>(), file_edit()), 1..4),
        proptest::option::weighted(0.15, extra),
        any::<Index>(),
        proptest::bool::weighted(0.25),
    )
        .prop_map(|(edits, extra, mode, read_only)| DirRecipe {
            edits,
            extra,
            mode,
            read_only,
        })
        .boxed()
}

impl DirRecipe {
    fn files(&self, c: &Corpus) -> BTreeMap<String, Vec<u8>> {
        let mut files = c.files.clone();
        for (i, e) in &self.edits {
            let names: Vec<String> = files.keys().cloned().collect();
            if names.is_empty() {
                break;
            }
            let name = &names[i.index(names.len())];
            match e {
                FileEdit::Mutate(ms) => {
                    let b = files.get_mut(name).unwrap();
                    for m in ms {
                        apply_mutation(b, m, &c.streams);
                    }
                }
                FileEdit::Meta(edits) => {
                    if let Some(b) = files.get_mut(META_FILE) {
                        *b = edit_meta(b, edits, false);
                    }
                }
                FileEdit::Frontier(edits) => {
                    if let Some(b) = files.get_mut(FRONTIER_FILE) {
                        for e in edits {
                            apply_edit(b, e, Shape::Opaque);
                        }
                        reseal_frontier(b);
                    }
                }
                FileEdit::Remove => {
                    files.remove(name);
                }
            }
        }
        if let Some((logger, segno, r)) = &self.extra {
            files.insert(segment::segment_name(*logger, *segno), r.bytes(&c.streams));
        }
        files
    }
}

/// Every file directly in `dir`, by name (directories as empty entries).
fn snapshot(dir: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = e
                .file_type()
                .unwrap()
                .is_file()
                .then(|| std::fs::read(e.path()).unwrap());
            (name, bytes)
        })
        .collect()
}

/// Opens `opts`, reads every row of every table, closes; the rows read.
fn open_and_read(opts: Options) -> Result<usize, tessera::Error> {
    let db = Database::open(opts)?;
    let mut rows = 0;
    let mut w = db.worker()?;
    for name in db.table_names() {
        let t = db.table(&name)?;
        rows += w
            .run(|tx| {
                tx.scan_collect(
                    t,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                    tessera::ScanOptions::new(),
                )
            })
            .map_or(0, |r| r.len());
    }
    drop(w);
    drop(db);
    Ok(rows)
}

#[test]
fn fuzz_database_open() {
    let _turn = serial();
    let c = corpus();
    let stats = RefCell::new(Stats::default());
    // Opening starts threads, writes and fsyncs files: a generous limit.
    let limit = Duration::from_secs(30);
    fuzz(
        "Database::open",
        cases("FUZZ_E2E_CASES", 32),
        dir_recipe(),
        &stats,
        |r| {
            let dir = tempfile::tempdir().unwrap();
            let files = r.files(c);
            let mut total = 0;
            for (name, bytes) in &files {
                std::fs::write(dir.path().join(name), bytes).unwrap();
                total += bytes.len();
            }
            let mode = RecoveryMode::ALL[r.mode.index(RecoveryMode::ALL.len())];
            let opts = || {
                db_options(dir.path())
                    .recovery_mode(mode)
                    .read_only(r.read_only)
            };
            let before = snapshot(dir.path());
            // No heap budget here: an open allocates its tables and threads.
            let (out, u) = bounded("Database::open", total, limit, false, || {
                open_and_read(opts())
            })?;
            let mut st = stats.borrow_mut();
            st.ran(total, u);
            if r.read_only {
                check(snapshot(dir.path()) == before, || {
                    format!("a read-only open ({mode}) changed the directory")
                })?;
            }
            match out {
                Ok(_) if r.read_only => st.add("opened read-only", 1),
                Ok(_) => {
                    st.add("opened", 1);
                    // A directory that opened and closed cleanly opens again.
                    let (again, _) =
                        bounded("Database::open (again)", total, limit, false, || {
                            open_and_read(opts())
                        })?;
                    // ... unless the run took the last numbers there are
                    // (a mutated file near the end of a range): refused as
                    // exhausted, never as damage.
                    let exhausted = matches!(&again, Err(e) if e.to_string().contains("exhausted"));
                    check(again.is_ok() || exhausted, || {
                        format!("opened ({mode}) and closed, but the reopen fails: {again:?}")
                    })?;
                }
                Err(_) => st.add("refused", 1),
            }
            Ok(())
        },
    );
}

//! The version layouts of Cai, Guo and Zhou's chapter 2 side by side (Fig.
//! 2.1): pure newest-to-oldest chains (N2O, ERMIA's), pure oldest-to-newest
//! chains (O2N), HyPer's (the current version in the header, older ones in
//! an N2O chain) and EMS (the two newest in the header, older ones O2N; see
//! [`crate::storage::ems`]), on the book's microbenchmark (section 2.5):
//! objects in an array indexed by key, values behind a pointer, snapshot
//! reads of the current or the oldest version, first-committer-wins writes,
//! garbage collection off for throughput.
//!
//! [`jump_table`] measures Table 2.1 (list nodes dereferenced to reach a
//! version); [`run`] measures Figs. 2.4 and 2.5 (throughput of read-only,
//! read-updating and write-only work) and, with garbage collection on, the
//! versions kept of Figs. 2.6 and 2.7.
//!
//! Every layout here is this module's own: the engine's protocols keep
//! their records in [`crate::storage`]; the layouts exist to compare the
//! shapes under one set of rules (a 62-bit writer id in a lock word taken
//! by one CAS, a writer that meets a lock aborts, versions freed through
//! the memory epoch).

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::epoch::{Epochs, Guard, Ticker};
use crate::storage::ems::{EmsObject, INVALID};
use crate::storage::mvcc::{free_mv_version, new_mv_version};
use crate::storage::Version;

/// One of the four layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// Newest first: the header points at the newest version.
    N2o,
    /// Oldest first: the header points at the oldest version.
    O2n,
    /// HyPer's: the current version in the header, older ones newest first.
    Hyper,
    /// EMS: the two newest in the header, older ones oldest first.
    Ems,
}

impl LayoutKind {
    /// All four, in the book's order.
    pub const ALL: [LayoutKind; 4] = [
        LayoutKind::N2o,
        LayoutKind::O2n,
        LayoutKind::Hyper,
        LayoutKind::Ems,
    ];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::N2o => "n2o",
            LayoutKind::O2n => "o2n",
            LayoutKind::Hyper => "hyper",
            LayoutKind::Ems => "ems",
        }
    }
}

impl std::str::FromStr for LayoutKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        LayoutKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown layout {s:?}: expected n2o, o2n, hyper or ems"))
    }
}

/// What the layouts must do.
trait Layout: Send + Sync + Sized {
    /// An object with one committed version stamped `cts`.
    fn new(val: &[u8], cts: u64) -> Self;
    /// Start writer `tid`'s update (started at `sts`): lock, check
    /// first-committer-wins, install the new version uncommitted. `Err`
    /// leaves the object unlocked. `gc`: the oldest active start stamp, for
    /// the layouts that collect on the write path.
    fn write(
        &self,
        tid: u64,
        sts: u64,
        val: &[u8],
        gc: Option<u64>,
        g: &Guard<'_>,
    ) -> Result<(), ()>;
    /// Commit the lock holder's version with `cts` and unlock.
    fn commit(&self, cts: u64);
    /// The version visible at `sts` (to `tid`, who may hold the lock) into
    /// `out`; the jumps it took, or `None` if nothing is visible.
    fn read(&self, sts: u64, tid: u64, out: &mut Vec<u8>, g: &Guard<'_>) -> Option<u32>;
    /// The oldest version kept, into `out`; the jumps it took.
    fn read_oldest(&self, out: &mut Vec<u8>, g: &Guard<'_>) -> Option<u32>;
    /// Versions kept (committed or not).
    fn versions(&self) -> usize;
}

/// A version's value into `out`.
fn copy(v: *const Version, out: &mut Vec<u8>) {
    out.clear();
    // SAFETY: a live version (the caller is pinned; versions are freed
    // through the epoch or with their object).
    unsafe { Version::read_into(v, out) };
}

/// Free a chain linked through `prev`.
fn free_chain(mut v: *mut Version) {
    while !v.is_null() {
        // SAFETY: the chain's owner drops it; nothing else reaches it.
        let next = unsafe { &*v }.prev();
        // SAFETY: as above.
        unsafe { free_mv_version(v as *mut u8) };
        v = next;
    }
}

/// Take a layout's lock word for `tid` (0 = free).
fn lock(word: &AtomicU64, tid: u64) -> bool {
    word.compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

// ---------------------------------------------------------------------------
// N2O

/// A single chain of versions behind a one-word writer lock: the shape
/// pure N2O and pure O2N share (they differ in which end `head` is).
struct Chain {
    lock: AtomicU64,
    head: AtomicPtr<Version>,
}

impl Chain {
    fn new(val: &[u8], cts: u64) -> Chain {
        Chain {
            lock: AtomicU64::new(0),
            head: AtomicPtr::new(new_mv_version(Some(val), cts, std::ptr::null_mut(), None)),
        }
    }

    /// First-committer-wins, after [`lock`]: if the newest version (stamped
    /// `newest`) was committed after the writer started at `sts`, unlock
    /// and refuse.
    fn refuse_newer(&self, newest: u64, sts: u64) -> Result<(), ()> {
        if newest > sts {
            self.lock.store(0, Ordering::Release);
            return Err(());
        }
        Ok(())
    }

    /// Whether the reader `tid` (0: none) holds the lock.
    fn owned_by(&self, tid: u64) -> bool {
        tid != 0 && self.lock.load(Ordering::Acquire) == tid
    }

    fn versions(&self) -> usize {
        chain_len(self.head.load(Ordering::Acquire))
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        free_chain(*self.head.get_mut());
    }
}

/// Whether a chain version stamped `s` is the one a reader at `sts` may
/// take: committed at or below `sts`, or the reader's own (`own`) write.
fn chain_visible(s: u64, own: bool, sts: u64) -> bool {
    (s == INVALID && own) || (s != INVALID && s <= sts)
}

/// Newest first (Fig. 2.1b): the head is the newest version, committed or
/// not; an uncommitted head is stamped [`INVALID`].
struct N2o(Chain);

impl std::ops::Deref for N2o {
    type Target = Chain;
    fn deref(&self) -> &Chain {
        &self.0
    }
}

impl Layout for N2o {
    fn new(val: &[u8], cts: u64) -> Self {
        N2o(Chain::new(val, cts))
    }

    fn write(
        &self,
        tid: u64,
        sts: u64,
        val: &[u8],
        gc: Option<u64>,
        g: &Guard<'_>,
    ) -> Result<(), ()> {
        if !lock(&self.lock, tid) {
            return Err(());
        }
        let head = self.head.load(Ordering::Relaxed);
        // SAFETY: live while we hold the lock (only lock holders unlink).
        let hs = unsafe { &*head }.stamp();
        self.refuse_newer(hs, sts)?;
        if let Some(w) = gc {
            // The head is visible to every running transaction once its
            // stamp is at or below the oldest start: cut behind it.
            if hs <= w {
                // SAFETY: as above.
                let rest = unsafe { &*head }.prev();
                if !rest.is_null() {
                    // SAFETY: as above.
                    unsafe { &*head }.set_prev(std::ptr::null_mut());
                    retire_chain(rest, g);
                }
            }
        }
        let v = new_mv_version(Some(val), INVALID, head, None);
        self.head.store(v, Ordering::Release);
        Ok(())
    }

    fn commit(&self, cts: u64) {
        // SAFETY: the lock holder's version.
        unsafe { &*self.head.load(Ordering::Relaxed) }.set_stamp(cts);
        self.lock.store(0, Ordering::Release);
    }

    fn read(&self, sts: u64, tid: u64, out: &mut Vec<u8>, _g: &Guard<'_>) -> Option<u32> {
        let mut v = self.head.load(Ordering::Acquire) as *const Version;
        let mut jumps = 0;
        let own = self.owned_by(tid);
        while !v.is_null() {
            jumps += 1;
            // SAFETY: pinned.
            if chain_visible(unsafe { &*v }.stamp(), own, sts) {
                copy(v, out);
                return Some(jumps);
            }
            // SAFETY: as above.
            v = unsafe { &*v }.prev();
        }
        None
    }

    fn read_oldest(&self, out: &mut Vec<u8>, _g: &Guard<'_>) -> Option<u32> {
        let mut v = self.head.load(Ordering::Acquire) as *const Version;
        let mut jumps = 0;
        let mut last = None;
        while !v.is_null() {
            jumps += 1;
            // SAFETY: pinned.
            if unsafe { &*v }.stamp() != INVALID {
                last = Some((v, jumps));
            }
            // SAFETY: as above.
            v = unsafe { &*v }.prev();
        }
        last.map(|(v, j)| {
            copy(v, out);
            j
        })
    }

    fn versions(&self) -> usize {
        self.0.versions()
    }
}

fn chain_len(mut v: *const Version) -> usize {
    let mut n = 0;
    while !v.is_null() {
        n += 1;
        // SAFETY: the caller is pinned or owns the chain.
        v = unsafe { &*v }.prev();
    }
    n
}

/// Retire every version of a chain cut off its object.
fn retire_chain(mut v: *mut Version, g: &Guard<'_>) {
    while !v.is_null() {
        // SAFETY: unreachable for new readers (cut); pinned readers keep it.
        let next = unsafe { &*v }.prev();
        // SAFETY: as above.
        unsafe { g.retire(v as *mut u8, free_mv_version) };
        v = next;
    }
}

// ---------------------------------------------------------------------------
// O2N

/// Oldest first (Fig. 2.1a): the header points at the oldest version; each
/// version's `prev` pointer is the next newer one. A writer appends its
/// version (stamped [`INVALID`] until commit) at the end.
struct O2n(Chain);

impl std::ops::Deref for O2n {
    type Target = Chain;
    fn deref(&self) -> &Chain {
        &self.0
    }
}

impl O2n {
    /// The newest version (the last), and the one before it.
    fn tail(&self) -> (*mut Version, *mut Version) {
        let mut before = std::ptr::null_mut();
        let mut v = self.head.load(Ordering::Acquire);
        loop {
            // SAFETY: the caller holds the lock or is pinned.
            let next = unsafe { &*v }.prev();
            if next.is_null() {
                return (v, before);
            }
            before = v;
            v = next;
        }
    }
}

impl Layout for O2n {
    fn new(val: &[u8], cts: u64) -> Self {
        O2n(Chain::new(val, cts))
    }

    fn write(
        &self,
        tid: u64,
        sts: u64,
        val: &[u8],
        gc: Option<u64>,
        g: &Guard<'_>,
    ) -> Result<(), ()> {
        if !lock(&self.lock, tid) {
            return Err(());
        }
        let (tail, _) = self.tail();
        // SAFETY: live while we hold the lock.
        let ts = unsafe { &*tail }.stamp();
        self.refuse_newer(ts, sts)?;
        if let Some(w) = gc {
            // Drop the oldest versions while the next newer one is visible
            // to every running transaction (stamp at or below `w`).
            loop {
                let h = self.head.load(Ordering::Relaxed);
                // SAFETY: as above.
                let next = unsafe { &*h }.prev();
                // SAFETY: as above.
                if next.is_null() || unsafe { &*next }.stamp() > w {
                    break;
                }
                self.head.store(next, Ordering::Release);
                // SAFETY: unreachable for new readers; pinned ones keep it.
                unsafe { g.retire(h as *mut u8, free_mv_version) };
            }
        }
        let v = new_mv_version(Some(val), INVALID, std::ptr::null_mut(), None);
        // SAFETY: as above.
        unsafe { &*tail }.set_prev(v);
        Ok(())
    }

    fn commit(&self, cts: u64) {
        let (tail, _) = self.tail();
        // SAFETY: the lock holder's version.
        unsafe { &*tail }.set_stamp(cts);
        self.lock.store(0, Ordering::Release);
    }

    fn read(&self, sts: u64, tid: u64, out: &mut Vec<u8>, _g: &Guard<'_>) -> Option<u32> {
        let own = self.owned_by(tid);
        let mut v = self.head.load(Ordering::Acquire) as *const Version;
        let mut jumps = 0;
        let mut best = None;
        while !v.is_null() {
            jumps += 1;
            // SAFETY: pinned.
            if chain_visible(unsafe { &*v }.stamp(), own, sts) {
                best = Some((v, jumps));
            }
            // SAFETY: as above.
            v = unsafe { &*v }.prev();
        }
        // The whole chain is walked: the newest visible is known only at
        // its end (the book's m jumps).
        best.map(|(v, _)| {
            copy(v, out);
            jumps
        })
    }

    fn read_oldest(&self, out: &mut Vec<u8>, _g: &Guard<'_>) -> Option<u32> {
        let v = self.head.load(Ordering::Acquire);
        copy(v, out);
        Some(1)
    }

    fn versions(&self) -> usize {
        self.0.versions()
    }
}

// ---------------------------------------------------------------------------
// HyPer

/// HyPer's (Fig. 2.1c): the current version in the header (its stamp and
/// value word), older versions newest first behind it. A writer pushes the
/// current version onto the chain, invalidates the header's stamp, then
/// puts its value there; readers read the header seqlock-style, as EMS's
/// regions.
struct Hyper {
    lock: AtomicU64,
    cts: AtomicU64,
    value: AtomicPtr<Version>,
    older: AtomicPtr<Version>,
}

impl Layout for Hyper {
    fn new(val: &[u8], cts: u64) -> Self {
        Hyper {
            lock: AtomicU64::new(0),
            cts: AtomicU64::new(cts),
            value: AtomicPtr::new(new_mv_version(Some(val), cts, std::ptr::null_mut(), None)),
            older: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn write(
        &self,
        tid: u64,
        sts: u64,
        val: &[u8],
        gc: Option<u64>,
        g: &Guard<'_>,
    ) -> Result<(), ()> {
        if !lock(&self.lock, tid) {
            return Err(());
        }
        let c = self.cts.load(Ordering::Relaxed);
        if c > sts {
            self.lock.store(0, Ordering::Release);
            return Err(());
        }
        let cur = self.value.load(Ordering::Relaxed);
        let old = self.older.load(Ordering::Relaxed);
        if gc.is_some_and(|w| c <= w) {
            // The current version is visible to every running transaction:
            // the older ones can go.
            self.older.store(std::ptr::null_mut(), Ordering::Release);
            retire_chain(old, g);
            // SAFETY: live while we hold the lock.
            unsafe { &*cur }.set_prev(std::ptr::null_mut());
        } else {
            // SAFETY: as above.
            unsafe { &*cur }.set_prev(old);
        }
        // Push first, then invalidate: a reader that finds the header
        // invalid finds the version on the chain.
        self.older.store(cur, Ordering::Release);
        self.cts.store(INVALID, Ordering::Release);
        let v = new_mv_version(Some(val), INVALID, std::ptr::null_mut(), None);
        self.value.store(v, Ordering::Release);
        Ok(())
    }

    fn commit(&self, cts: u64) {
        // SAFETY: the lock holder's version.
        unsafe { &*self.value.load(Ordering::Relaxed) }.set_stamp(cts);
        self.cts.store(cts, Ordering::Release);
        self.lock.store(0, Ordering::Release);
    }

    fn read(&self, sts: u64, tid: u64, out: &mut Vec<u8>, _g: &Guard<'_>) -> Option<u32> {
        loop {
            if tid != 0 && self.lock.load(Ordering::Acquire) == tid {
                copy(self.value.load(Ordering::Acquire), out);
                return Some(0);
            }
            let c = self.cts.load(Ordering::Acquire);
            if c != INVALID && c <= sts {
                let v = self.value.load(Ordering::Acquire);
                if self.cts.load(Ordering::Acquire) != c {
                    continue;
                }
                copy(v, out);
                return Some(0);
            }
            let mut v = self.older.load(Ordering::Acquire) as *const Version;
            let mut jumps = 0;
            while !v.is_null() {
                jumps += 1;
                // SAFETY: pinned.
                if unsafe { &*v }.stamp() <= sts {
                    copy(v, out);
                    return Some(jumps);
                }
                // SAFETY: as above.
                v = unsafe { &*v }.prev();
            }
            return None;
        }
    }

    fn read_oldest(&self, out: &mut Vec<u8>, g: &Guard<'_>) -> Option<u32> {
        let mut v = self.older.load(Ordering::Acquire) as *const Version;
        if v.is_null() {
            return self.read(u64::MAX - 1, 0, out, g);
        }
        let mut jumps = 1;
        loop {
            // SAFETY: pinned.
            let next = unsafe { &*v }.prev();
            if next.is_null() {
                copy(v, out);
                return Some(jumps);
            }
            jumps += 1;
            v = next;
        }
    }

    fn versions(&self) -> usize {
        1 + chain_len(self.older.load(Ordering::Acquire))
    }
}

impl Drop for Hyper {
    fn drop(&mut self) {
        free_chain(*self.older.get_mut());
        let v = *self.value.get_mut();
        // SAFETY: the last owner; the header's version is not on the chain.
        unsafe { free_mv_version(v as *mut u8) };
    }
}

// ---------------------------------------------------------------------------
// EMS

impl Layout for EmsObject {
    fn new(val: &[u8], cts: u64) -> Self {
        EmsObject::new(Some(val), cts)
    }

    fn write(
        &self,
        tid: u64,
        sts: u64,
        val: &[u8],
        gc: Option<u64>,
        g: &Guard<'_>,
    ) -> Result<(), ()> {
        EmsObject::write(self, tid, sts, Some(val), gc, g).map_err(drop)
    }

    fn commit(&self, cts: u64) {
        EmsObject::commit(self, cts);
    }

    fn read(&self, sts: u64, tid: u64, out: &mut Vec<u8>, g: &Guard<'_>) -> Option<u32> {
        EmsObject::read(self, sts, tid, out, g).map(|r| r.jumps)
    }

    fn read_oldest(&self, out: &mut Vec<u8>, g: &Guard<'_>) -> Option<u32> {
        EmsObject::read_oldest(self, out, g).map(|r| r.jumps)
    }

    fn versions(&self) -> usize {
        EmsObject::versions(self)
    }
}

// ---------------------------------------------------------------------------
// Table 2.1

/// Table 2.1 measured: per layout, the jumps to the current and the oldest
/// version of an object with `m` committed versions, while nobody updates
/// it and while a writer holds it with an uncommitted version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Jumps {
    /// The current version.
    pub current: u32,
    /// The current version while a writer updates the object.
    pub current_updating: u32,
    /// The oldest version.
    pub oldest: u32,
    /// The oldest version while a writer updates the object.
    pub oldest_updating: u32,
}

/// [`Jumps`] for `kind` with `m` (at least 2) committed versions.
pub fn jump_table(kind: LayoutKind, m: u32) -> Jumps {
    match kind {
        LayoutKind::N2o => jumps_of::<N2o>(m),
        LayoutKind::O2n => jumps_of::<O2n>(m),
        LayoutKind::Hyper => jumps_of::<Hyper>(m),
        LayoutKind::Ems => jumps_of::<EmsObject>(m),
    }
}

fn jumps_of<L: Layout>(m: u32) -> Jumps {
    let epochs = Epochs::new(1, 1);
    let local = epochs.register().expect("one slot");
    let g = local.pin();
    let o = preloaded::<L>(b"value", m as u64, &g);
    let mut out = Vec::new();
    let now = u64::MAX - 1;
    let current = o.read(now, 0, &mut out, &g).expect("current");
    let oldest = o.read_oldest(&mut out, &g).expect("oldest");
    o.write(1 << 40, m as u64, b"updating", None, &g)
        .expect("the writer locks");
    let current_updating = o.read(now, 0, &mut out, &g).expect("current");
    let oldest_updating = o.read_oldest(&mut out, &g).expect("oldest");
    Jumps {
        current,
        current_updating,
        oldest,
        oldest_updating,
    }
}

/// An object with `m` committed versions, stamped 1..=m.
fn preloaded<L: Layout>(val: &[u8], m: u64, g: &Guard<'_>) -> L {
    let o = L::new(val, 1);
    for cts in 2..=m {
        o.write(1, cts - 1, val, None, g).expect("no contention");
        o.commit(cts);
    }
    o
}

// ---------------------------------------------------------------------------
// The microbenchmark

/// What the benchmark's threads do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// Reads of objects nobody updates.
    ReadOnly,
    /// Reads of objects that writers hold with uncommitted versions.
    ReadUpdating,
    /// Writes: lock, install, commit.
    WriteOnly,
}

impl Work {
    /// All three.
    pub const ALL: [Work; 3] = [Work::ReadOnly, Work::ReadUpdating, Work::WriteOnly];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Work::ReadOnly => "read-only",
            Work::ReadUpdating => "read-updating",
            Work::WriteOnly => "write-only",
        }
    }
}

impl std::str::FromStr for Work {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Work::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| {
                format!("unknown work {s:?}: expected read-only, read-updating or write-only")
            })
    }
}

/// The benchmark's settings.
#[derive(Clone, Debug)]
pub struct Bench {
    /// The layout.
    pub layout: LayoutKind,
    /// What the threads do.
    pub work: Work,
    /// Reads ask for the oldest version kept (else the current one).
    pub oldest: bool,
    /// Objects (the book: 2 million).
    pub objects: usize,
    /// Committed versions per object before the run (the book: 3).
    pub preload: u32,
    /// Value size in bytes (the book: 10 or 100).
    pub value_size: usize,
    /// Threads.
    pub threads: usize,
    /// Seconds measured.
    pub seconds: f64,
    /// Writes pick from a hot fifth of the objects 80% of the time (the
    /// book's hotspot for Figs. 2.6 and 2.7); else uniformly.
    pub hotspot: bool,
    /// Garbage collection on the write path (off in the book's throughput
    /// runs).
    pub gc: bool,
}

/// What a run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// The settings.
    pub bench: Bench,
    /// Operations (reads, or committed writes) per second.
    pub ops_per_sec: f64,
    /// Operations in the measured time.
    pub ops: u64,
    /// Writes that failed (a held lock or a lost update).
    pub write_failures: u64,
    /// Mean jumps per read.
    pub mean_jumps: f64,
    /// Versions kept over all objects after the run.
    pub versions: u64,
    /// Bytes those versions take (headers and values).
    pub version_bytes: u64,
    /// Seconds the preload took.
    pub load_seconds: f64,
}

/// Run `b`.
pub fn run(b: &Bench) -> Result<Report, String> {
    if b.objects == 0
        || b.threads == 0
        || b.preload == 0
        || !b.seconds.is_finite()
        || b.seconds <= 0.0
    {
        return Err("objects, threads, preload and seconds must be positive (and finite)".into());
    }
    match b.layout {
        LayoutKind::N2o => run_with::<N2o>(b),
        LayoutKind::O2n => run_with::<O2n>(b),
        LayoutKind::Hyper => run_with::<Hyper>(b),
        LayoutKind::Ems => run_with::<EmsObject>(b),
    }
}

/// A small xorshift generator (each thread its own).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 11) as u128 * n as u128) >> 53) as usize
    }
}

fn run_with<L: Layout + 'static>(b: &Bench) -> Result<Report, String> {
    let epochs = Epochs::new(b.threads + 1, 1);
    // The memory epoch must advance for retired versions to be freed.
    let _ticker = Ticker::start(epochs.clone(), Duration::from_millis(1));
    let val = vec![0x5Au8; b.value_size];
    let t0 = Instant::now();
    let objects: Arc<Vec<L>> = {
        let local = epochs.register().ok_or("no epoch slot")?;
        let g = local.pin();
        Arc::new(
            (0..b.objects)
                .map(|_| preloaded::<L>(&val, b.preload as u64, &g))
                .collect(),
        )
    };
    let load_seconds = t0.elapsed().as_secs_f64();
    // Stamps: the preload used 1..=preload.
    let clock = Arc::new(AtomicU64::new(b.preload as u64));
    if b.work == Work::ReadUpdating {
        // Every object held by a writer that never commits during the run.
        let local = epochs.register().ok_or("no epoch slot")?;
        let g = local.pin();
        for o in objects.iter() {
            o.write(1 << 60, b.preload as u64, &val, None, &g)
                .map_err(|_| "the updating writers could not lock")?;
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(std::sync::Barrier::new(b.threads + 1));
    let mut handles = Vec::new();
    for t in 0..b.threads {
        let (objects, clock, stop, start) =
            (objects.clone(), clock.clone(), stop.clone(), start.clone());
        let local = epochs.register().ok_or("no epoch slot")?;
        let (work, oldest, hotspot, gc, n) = (b.work, b.oldest, b.hotspot, b.gc, b.objects);
        let val = val.clone();
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((t as u64 + 1) * 0x2545_F491_4F6C_DD1D));
            let mut out = Vec::with_capacity(val.len());
            let (mut ops, mut fails, mut jumps) = (0u64, 0u64, 0u64);
            let tid = (t as u64 + 1) << 20;
            start.wait();
            while !stop.load(Ordering::Relaxed) {
                let g = local.pin();
                for _ in 0..64 {
                    let i = if hotspot && rng.below(10) < 8 {
                        rng.below((n / 5).max(1))
                    } else {
                        rng.below(n)
                    };
                    let o = &objects[i];
                    match work {
                        Work::WriteOnly => {
                            let sts = clock.load(Ordering::Acquire);
                            // No reader runs: every version but the newest
                            // (which a writer checks under its lock) is
                            // garbage, so `sts` serves as the watermark.
                            let w = gc.then_some(sts);
                            if o.write(tid, sts, &val, w, &g).is_ok() {
                                let cts = clock.fetch_add(1, Ordering::AcqRel) + 1;
                                o.commit(cts);
                                ops += 1;
                            } else {
                                fails += 1;
                            }
                        }
                        Work::ReadOnly | Work::ReadUpdating => {
                            let j = if oldest {
                                o.read_oldest(&mut out, &g)
                            } else {
                                o.read(clock.load(Ordering::Relaxed), 0, &mut out, &g)
                            };
                            jumps += u64::from(j.expect("a visible version"));
                            ops += 1;
                        }
                    }
                }
            }
            (ops, fails, jumps)
        }));
    }
    start.wait();
    let t1 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(b.seconds));
    stop.store(true, Ordering::Relaxed);
    let (mut ops, mut fails, mut jumps) = (0, 0, 0);
    for h in handles {
        let (o, f, j) = h.join().map_err(|_| "a benchmark thread panicked")?;
        ops += o;
        fails += f;
        jumps += j;
    }
    let secs = t1.elapsed().as_secs_f64();
    let versions: u64 = objects.iter().map(|o| o.versions() as u64).sum();
    // A version: its 32-byte header and its value rounded up to words.
    let per = 32 + b.value_size.div_ceil(8) as u64 * 8;
    Ok(Report {
        bench: b.clone(),
        ops_per_sec: ops as f64 / secs,
        ops,
        write_failures: fails,
        mean_jumps: if b.work == Work::WriteOnly || ops == 0 {
            0.0
        } else {
            jumps as f64 / ops as f64
        },
        versions,
        version_bytes: versions * per,
        load_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 2.1, measured: with m versions, N2O reaches the current
    /// version in one jump (two while updating) and the oldest in m (m + 1);
    /// O2N needs m for the current one and one for the oldest; HyPer zero
    /// (one while updating) and m - 1 (m); EMS zero and one, updating or
    /// not.
    #[test]
    fn table_2_1() {
        for m in [3u32, 5, 8] {
            let j = |current, current_updating, oldest, oldest_updating| Jumps {
                current,
                current_updating,
                oldest,
                oldest_updating,
            };
            assert_eq!(
                jump_table(LayoutKind::N2o, m),
                j(1, 2, m, m + 1),
                "n2o m={m}"
            );
            // The book counts m for the current version while updating;
            // the reader must look at the uncommitted last node too to
            // know the one before it is the newest it may read: m + 1.
            assert_eq!(
                jump_table(LayoutKind::O2n, m),
                j(m, m + 1, 1, 1),
                "o2n m={m}"
            );
            assert_eq!(
                jump_table(LayoutKind::Hyper, m),
                j(0, 1, m - 1, m),
                "hyper m={m}"
            );
            assert_eq!(jump_table(LayoutKind::Ems, m), j(0, 0, 1, 1), "ems m={m}");
        }
    }

    /// Every layout returns, at every start stamp, the version committed
    /// last at or below it, and its writer's own version to the writer.
    #[test]
    fn snapshots_agree_across_layouts() {
        fn check<L: Layout>() {
            let epochs = Epochs::new(1, 1);
            let local = epochs.register().unwrap();
            let g = local.pin();
            let o = L::new(&[1], 10);
            for (i, cts) in [20u64, 30, 40, 50].into_iter().enumerate() {
                o.write(7, cts - 1, &[i as u8 + 2], None, &g).unwrap();
                assert!(o.write(8, cts - 1, &[0], None, &g).is_err(), "locked");
                o.commit(cts);
            }
            assert!(o.write(9, 45, &[0], None, &g).is_err(), "lost update");
            let mut out = Vec::new();
            for (sts, want) in [(10, 1u8), (19, 1), (20, 2), (35, 3), (49, 4), (99, 5)] {
                o.read(sts, 0, &mut out, &g).unwrap();
                assert_eq!(out, [want], "at {sts}");
            }
            assert!(o.read(5, 0, &mut out, &g).is_none());
            o.write(11, 60, &[6], None, &g).unwrap();
            o.read(99, 11, &mut out, &g).unwrap();
            assert_eq!(out, [6], "own write");
            o.read(99, 0, &mut out, &g).unwrap();
            assert_eq!(out, [5], "others");
            o.read_oldest(&mut out, &g).unwrap();
            assert_eq!(out, [1]);
            o.commit(60);
            o.read(99, 0, &mut out, &g).unwrap();
            assert_eq!(out, [6]);
        }
        check::<N2o>();
        check::<O2n>();
        check::<Hyper>();
        check::<EmsObject>();
    }

    /// A short run of each work on each layout: reads find versions, writes
    /// commit, and garbage collection keeps the versions bounded.
    #[test]
    fn short_runs() {
        for layout in LayoutKind::ALL {
            for work in [Work::ReadOnly, Work::ReadUpdating, Work::WriteOnly] {
                for gc in [false, true] {
                    let r = run(&Bench {
                        layout,
                        work,
                        oldest: false,
                        objects: 1000,
                        preload: 3,
                        value_size: 10,
                        threads: 2,
                        seconds: 0.05,
                        hotspot: false,
                        gc,
                    })
                    .unwrap();
                    assert!(r.ops > 0, "{layout:?} {work:?}");
                    if work == Work::WriteOnly && gc {
                        // At most the header's versions plus one or two
                        // per object survive collection.
                        assert!(r.versions <= 3 * 1000, "{layout:?}: {}", r.versions);
                    }
                }
            }
        }
    }
}

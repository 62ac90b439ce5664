//! No allocation on the commit path (issue 14): once a worker has run a few
//! transactions of a shape, running more of them allocates nothing on the
//! worker's thread, under every protocol, in memory and with the redo log.
//! The transaction reads (prefetched and not), reads a column slice, scans,
//! updates rows with values of the same size, reads columns of several rows
//! at once and writes columns, then commits.
//!
//! What may allocate, and is allowed here only where said:
//! - a multi-version protocol (`si`, `ssn`) installs a new version per
//!   update: one allocation per written row (fewer when reclaimed versions
//!   are reused), and the worker's queue of retired versions may double a
//!   few times while reclamation lags (`GROWTH`);
//! - `rocc` and `gwv` reuse a writing commit's writer entry once the
//!   memory epoch has passed it: none is allocated in the steady state,
//!   but while the epoch ticker lags a commit makes one (two allocations);
//! - inserts allocate their record (and a key longer than 8 bytes); this
//!   test has none.
//!
//! The count is per thread (a thread-local counter in a counting global
//! allocator), so the epoch ticker, the loggers and the reclaimer of other
//! threads do not disturb it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ops::Bound;
use std::time::Duration;

use tessera::{
    Database, Durability, Options, Protocol, ScanOptions, ScanValidation, TableId, Worker,
};

struct Counting;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the thread-locals may be gone while a thread exits.
    let _ = ARMED.try_with(|a| {
        if a.get() {
            let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is forwarded to `System`; the counting touches only
// const-initialised thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made on this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|n| n.set(0));
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    ALLOCS.with(|n| n.get())
}

/// Doublings of a multi-version worker's retired-version queue allowed in
/// the measured transactions.
const GROWTH: u64 = 4;

const ROWS: u32 = 2_000;
const VALUE: usize = 64;

fn key(i: u32) -> [u8; 8] {
    (u64::from(i) * 7 + 1).to_be_bytes()
}

/// One transaction: 4 prefetched gets, 2 plain gets, a column slice, a
/// 10-row scan, 3 same-size updates, a `get_many` of 3 rows and 3 column
/// writes to 2 rows. Returns the number of rows written.
fn txn(w: &mut Worker, t: TableId, round: u32) -> u32 {
    let pick = |j: u32| (round.wrapping_mul(2_654_435_761).wrapping_add(j * 97)) % ROWS;
    w.run(|tx| {
        let ks: [[u8; 8]; 4] = [key(pick(0)), key(pick(1)), key(pick(2)), key(pick(3))];
        let refs: [&[u8]; 4] = [&ks[0], &ks[1], &ks[2], &ks[3]];
        tx.prefetch(t, &refs, VALUE);
        let mut sum = 0u64;
        for k in &ks {
            sum += u64::from(tx.get(t, k)?.expect("row")[0]);
        }
        for j in 4..6 {
            sum += u64::from(tx.get(t, &key(pick(j)))?.expect("row")[1]);
        }
        sum += u64::from(tx.get_slice(t, &key(pick(6)), 8..16)?.expect("row")[0]);
        let lo = key(pick(7));
        let mut seen = 0;
        tx.scan(
            t,
            Bound::Included(&lo[..]),
            Bound::Unbounded,
            ScanOptions::default(),
            |_, v| {
                sum += u64::from(v[2]);
                seen += 1;
                seen < 10
            },
        )?;
        let mut val = [0u8; VALUE];
        val[..8].copy_from_slice(&sum.to_le_bytes());
        for j in 8..11 {
            tx.put(t, &key(pick(j)), &val)?;
        }
        // A batched column read, and column writes (two to one row).
        let ms: [[u8; 8]; 3] = [key(pick(11)), key(pick(12)), key(pick(13))];
        let mrefs: [&[u8]; 3] = [&ms[0], &ms[1], &ms[2]];
        tx.get_many(t, &mrefs, 8..16, |_, v| {
            sum += u64::from(v.expect("row")[0])
        })?;
        let b = sum.to_le_bytes();
        assert!(tx.update_slice(t, &key(pick(14)), 4, &b[..4])?);
        assert!(tx.update_slice(t, &key(pick(14)), 20, &b)?);
        assert!(tx.update_slice(t, &key(pick(15)), 0, &b[..2])?);
        Ok(())
    })
    .unwrap();
    5
}

fn check(p: Protocol, durability: Durability) {
    check_with(p, durability, ScanValidation::NodeSet)
}

fn check_with(p: Protocol, durability: Durability, sv: ScanValidation) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = Options::in_memory()
        .protocol(p)
        .scan_validation(sv)
        .epoch_interval(Duration::from_millis(1));
    if durability != Durability::None {
        opts = opts.data_dir(dir.path()).durability(durability);
    }
    let db = Database::open(opts).unwrap();
    let t = db.create_table("t").unwrap();
    let mut w = db.worker().unwrap();
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(200) {
        w.run(|tx| {
            for &i in chunk {
                tx.insert(t, &key(i), &[i as u8; VALUE])?;
            }
            Ok(())
        })
        .unwrap();
    }
    // Warm up: the worker's sets, buffers and log buffers reach their size,
    // and so does ROCC's pool of writer entries (an entry is reused once
    // the memory epoch says no validator can hold it: a few epochs' worth
    // of commits).
    for r in 0..20_000 {
        txn(&mut w, t, r);
    }
    let mut written = 0u64;
    let n = allocations(|| {
        for r in 20_000..21_000 {
            written += u64::from(txn(&mut w, t, r));
        }
    });
    let allowed = if p.caps().multi_version {
        written + GROWTH
    } else if matches!(p, Protocol::Rocc | Protocol::Gwv) {
        // A writing commit's writer entry (its stamp and keys, which range
        // validators read) is reused once the memory epoch says no
        // validator can hold it, like ERMIA's versions: in the steady state
        // nothing is allocated, but when the epoch ticker falls behind (a
        // loaded 2-core machine), a commit makes a new entry (its box and
        // its key buffer).
        2 * written + GROWTH
    } else {
        0
    };
    assert!(
        n <= allowed,
        "{} ({durability:?}, {sv:?}): {n} allocations in 1,000 transactions, at most {allowed} allowed",
        p.name()
    );
}

/// Silo with its scans repeated at commit keeps their bounds and rows in
/// the worker's reused buffers.
#[test]
fn steady_silo_reread_transactions_allocate_nothing() {
    check_with(Protocol::Silo, Durability::None, ScanValidation::Reread);
}

#[test]
fn steady_transactions_allocate_nothing_in_memory() {
    for p in Protocol::INTERACTIVE {
        check(p, Durability::None);
    }
}

#[test]
fn steady_transactions_allocate_nothing_with_the_log() {
    // No-CC applies writes without a commit and has nothing to log.
    for p in Protocol::INTERACTIVE
        .into_iter()
        .filter(|p| p.caps().durable)
    {
        check(p, Durability::Async);
    }
}

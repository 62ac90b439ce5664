//! Records: the storage substrate every protocol shares.
//!
//! An index leaf points at a [`Record`] (Silo's layout, section 4.3): a stable
//! *record head* that lives until the record is deleted and reclaimed. The head
//! holds
//!
//! * the **TID word** ([`tid`]): Silo's lock, latest-version and absent bits
//!   plus the epoch and sequence number of the last writer, and
//! * a pointer to the **newest [`Version`]**, whose `prev` pointer starts the
//!   chain of older versions (Silo keeps them for snapshot transactions,
//!   section 4.9; ERMIA's version chains will hang off the same pointer).
//!
//! The first version is allocated together with the head (one allocation, one
//! or two cache lines), so a read touches the same memory as a Silo record.
//! Committed writers update that version **in place** when the value fits and
//! no snapshot needs the old value (Silo's key optimisation, Figure 11), and
//! install a new version otherwise. Values are stored as `AtomicU64` words so
//! the seqlock-style optimistic read of section 4.5 is free of data races.
//!
//! The record head is also where ERMIA's indirection fits: it *is* an OID
//! slot (a stable cell holding the newest-version pointer that ERMIA installs
//! with one CAS), allocated per record instead of in a dense per-table array;
//! see docs/ARCHITECTURE.md.

pub(crate) mod ems;
pub(crate) mod pool;
pub mod mvcc;
pub mod tid;

use std::alloc::{alloc, dealloc, Layout};
use std::ptr;
use std::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::epoch::Guard;
use tid::*;

/// Hint the CPU to fetch the cache lines of `len` bytes from `p` (at
/// least the line of `p`). Only a hint: nothing is dereferenced and a
/// prefetch never faults, so any address will do, even a dangling one.
/// The index's nodes, records and BOHM's versions and maps all use it.
#[inline(always)]
pub(crate) fn prefetch_bytes(p: *const u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut off = 0;
        loop {
            // SAFETY: a prefetch never faults and dereferences nothing.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off) as *const i8) };
            off += 64;
            if off >= len {
                break;
            }
        }
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    let _ = (p, len);
}

/// Hint the CPU to fetch the cache line of `p` for writing (`prefetchw`):
/// the line comes in exclusive, so the atomic read-modify-write that
/// follows need not ask the other cores for it a second time. For lines
/// the caller is about to write, cold ones above all (the version GC's
/// revisits). Only a hint, like [`prefetch_bytes`]: nothing is
/// dereferenced, any address will do.
#[inline(always)]
pub(crate) fn prefetch_write(p: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `prefetchw` dereferences nothing and never faults; it writes
    // no register, flag or memory. Every x86-64 processor of the last
    // decade implements it (older Intel ones decode it as a no-op).
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    let _ = p;
}

/// A version of a record's value.
#[repr(C)]
pub struct Version {
    /// TID word of the transaction that wrote this version (status bits
    /// included: `ABSENT` marks a deletion). For the newest version the
    /// record's TID word is authoritative; older versions never change.
    tid: AtomicU64,
    /// The next older version, or null.
    prev: AtomicPtr<Version>,
    /// Value length in bytes.
    len: AtomicU32,
    /// Capacity in 8-byte words (the low [`FLAG_SHIFT`] bits) and flags
    /// (the top 3: [`V_INLINE`] if this version lives inside its record's
    /// allocation, [`V_META`] if SSN metadata follows the header,
    /// [`V_BOTTOM`]); immutable. Packed so that the auxiliary word below
    /// gets 64 bits without the header growing past 32 bytes.
    cap_flags: u32,
    /// An auxiliary word whose meaning is the record layout's: on ERMIA's
    /// multi-version versions ([`mvcc::MvRecord`]), 1 if this version is a
    /// tombstone (Silo marks deletions in the record's TID word instead);
    /// on the newest version of a strict-2PL record, its 64-bit
    /// reader-writer lock word ([`Version::lock_word`]). A database uses one
    /// layout.
    aux: AtomicU64,
    // followed, with `V_META`, by an `SsnMeta`, then by `cap_words`
    // AtomicU64 words of value data
}

/// Where the flags start in `Version::cap_flags` (capacities are far
/// below 2^29 words: values are at most 16 MiB).
const FLAG_SHIFT: u32 = 29;
/// The capacity bits of `Version::cap_flags`.
const CAP_MASK: u32 = (1 << FLAG_SHIFT) - 1;

/// `Version::cap_flags` for a capacity and flags.
#[inline]
fn cap_flags(cap_words: usize, flags: u32) -> u32 {
    assert!(
        cap_words <= CAP_MASK as usize,
        "version capacity out of range"
    );
    debug_assert!(flags < 8);
    cap_words as u32 | flags << FLAG_SHIFT
}

/// `Version::flags`: the version is part of its record's allocation.
const V_INLINE: u32 = 1;
/// `Version::flags`: an [`SsnMeta`] follows the data words.
const V_META: u32 = 2;
/// `Version::flags` of a multi-version record's first version: its ⊥
/// version follows it in the record's allocation.
const V_BOTTOM: u32 = 4;

/// Copy `blocks` 64-byte blocks from `src` to `dst` with 16-byte SSE2
/// moves in inline assembly, four per step: the copy loop of both sides of
/// the seqlock, the optimistic reader's ([`copy_words`]) and the lock
/// holder's ([`store_blocks`]), where one side may race with the other.
///
/// # Safety
/// Both ranges are `64 * blocks` bytes inside live allocations and do not
/// overlap; `blocks > 0`.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
unsafe fn sse_copy_blocks(src: *const u8, dst: *mut u8, blocks: usize) {
    // SAFETY: per the contract; the registers named are declared
    // clobbered, and no stack is used.
    unsafe {
        std::arch::asm!(
            "2:",
            "movdqu {a}, [{s}]",
            "movdqu {b}, [{s} + 16]",
            "movdqu {c}, [{s} + 32]",
            "movdqu {d}, [{s} + 48]",
            "movdqu [{t}], {a}",
            "movdqu [{t} + 16], {b}",
            "movdqu [{t} + 32], {c}",
            "movdqu [{t} + 48], {d}",
            "add {s}, 64",
            "add {t}, 64",
            "dec {k}",
            "jnz 2b",
            s = inout(reg) src => _,
            t = inout(reg) dst => _,
            k = inout(reg) blocks => _,
            a = out(xmm_reg) _,
            b = out(xmm_reg) _,
            c = out(xmm_reg) _,
            d = out(xmm_reg) _,
            options(nostack),
        );
    }
}

/// Copy 16 bytes from `src` to `dst` with one SSE2 load and store in
/// inline assembly (racing writers as in [`sse_copy_blocks`]).
///
/// # Safety
/// Both ranges are 16 bytes inside live allocations and do not overlap.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
unsafe fn sse_copy_16(src: *const u8, dst: *mut u8) {
    // SAFETY: per the contract; the register named is declared clobbered,
    // and no stack is used.
    unsafe {
        std::arch::asm!(
            "movdqu {a}, [{s}]",
            "movdqu [{t}], {a}",
            s = in(reg) src,
            t = in(reg) dst,
            a = out(xmm_reg) _,
            options(nostack),
        );
    }
}

/// The bytes `val[from..]` (1 to 7 of them) as the word that holds them
/// zero-padded (`u64::from_ne_bytes` of them followed by zeros), made from
/// overlapping loads of `val`. Copying them into a zeroed 8-byte buffer
/// instead is a call of `memcpy`, then a load that waits for its byte
/// stores to leave the store buffer.
#[inline(always)]
fn tail_word(val: &[u8], from: usize) -> u64 {
    let n = val.len() - from;
    debug_assert!((1..8).contains(&n));
    if cfg!(target_endian = "little") {
        if val.len() >= 8 {
            // The value's last 8 bytes: the tail is their top `n`.
            let w = u64::from_le_bytes(val[val.len() - 8..].try_into().expect("8 bytes"));
            return w >> (8 * (8 - n));
        }
        // A value shorter than a word: two overlapping loads, or-ed (the
        // bytes they share are the same bytes).
        let t = &val[from..];
        if n >= 4 {
            let lo = u64::from(u32::from_le_bytes(t[..4].try_into().expect("4 bytes")));
            let hi = u64::from(u32::from_le_bytes(t[n - 4..].try_into().expect("4 bytes")));
            return lo | hi << (8 * (n - 4));
        }
        if n >= 2 {
            let lo = u64::from(u16::from_le_bytes(t[..2].try_into().expect("2 bytes")));
            let hi = u64::from(u16::from_le_bytes(t[n - 2..].try_into().expect("2 bytes")));
            return lo | hi << (8 * (n - 2));
        }
        return u64::from(t[0]);
    }
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&val[from..]);
    u64::from_ne_bytes(b)
}

/// Copy `n` words of a value that a writer holding the record's lock may be
/// changing meanwhile (the optimistic read of Silo section 4.5, whose caller
/// re-checks the TID word and discards a torn copy) to `dst`.
///
/// On x86-64 the copy goes through 16-byte SSE2 loads and stores in inline
/// assembly: 64-byte blocks four moves a step, then the words left four,
/// two and one at a time (a 100-byte row: one block, then 2 + 2 + 1
/// words, where a loop of words took 25 instructions for the five after
/// its block). Every load starts at a multiple of 16 bytes from the
/// value's first word, so a value that starts on 16 bytes never has a
/// load across two cache lines. (Copying the last 64 bytes again,
/// overlapping, is shorter still, but for a length of an odd number of
/// words its loads start 8 bytes off 16, and one of four can cross a
/// line: Silo's scans of 100-byte rows ran 8% slower with it, wall clock,
/// with 4% fewer instructions.) Assembly is outside Rust's memory model: the hardware
/// performs plain loads, which may see a mix of old and new bytes but
/// never fault on the live allocation, and the re-check throws such a copy
/// away. That is the seqlock reader's usual copy, done where a data race
/// is not undefined. Elsewhere (and under Miri) a loop of relaxed atomic
/// loads does it.
///
/// # Safety
/// `src` points to `n` words inside a live allocation; `dst` is valid for
/// `n * 8` bytes of writes and does not overlap it.
#[inline(always)]
unsafe fn copy_words(src: *const AtomicU64, dst: *mut u8, n: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let s = src as *const u8;
        let mut done = 0;
        let blocks = n / 8;
        if blocks > 0 {
            // SAFETY: 64 * blocks <= 8 * n bytes, in bounds of both per the
            // contract; see above for why the racing reads are sound here.
            unsafe { sse_copy_blocks(s, dst, blocks) };
            done = blocks * 8;
        }
        // The rest, under 8 words: four, two, then one, each step taken or
        // not by one bit of the count (no loop).
        let r = n - done;
        // SAFETY: each step copies words that lie in `done..n`, inside
        // both ranges (contract); see above for the racing reads.
        unsafe {
            if r & 4 != 0 {
                sse_copy_16(s.add(done * 8), dst.add(done * 8));
                sse_copy_16(s.add(done * 8 + 16), dst.add(done * 8 + 16));
                done += 4;
            }
            if r & 2 != 0 {
                sse_copy_16(s.add(done * 8), dst.add(done * 8));
                done += 2;
            }
            if r & 1 != 0 {
                let x = (*src.add(done)).load(Ordering::Relaxed);
                dst.add(done * 8).cast::<u64>().write_unaligned(x);
            }
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    for i in 0..n {
        // SAFETY: i < n: inside both buffers per the contract.
        unsafe {
            let x = (*src.add(i)).load(Ordering::Relaxed);
            dst.add(i * 8).cast::<u64>().write_unaligned(x);
        }
    }
}

/// Store the leading 64-byte blocks of `src` into the words at `dst`, the
/// writer's half of [`copy_words`]: the record is locked, but optimistic
/// readers may be copying the same words meanwhile (they re-check the TID
/// word and discard what they read). On x86-64 the stores are 16-byte SSE2
/// moves in inline assembly, four per step (a 320-byte TPC-C stock row
/// takes 5 steps instead of 40 relaxed 8-byte stores); the hardware performs
/// plain stores, and a racing reader's copy is thrown away by its re-check,
/// as for the reader's side. Returns the words written (a multiple of 8; 0
/// elsewhere and under Miri, where the caller's word loop does it all).
///
/// # Safety
/// `dst` points to at least `src.len() / 8` words of a live allocation that
/// `src` does not overlap.
#[inline(always)]
unsafe fn store_blocks(dst: *const AtomicU64, src: &[u8]) -> usize {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let blocks = src.len() / 64;
        if blocks > 0 {
            // SAFETY: 64 * blocks <= src.len() bytes, in bounds of both per
            // the contract; see above for why the stores that race with
            // optimistic readers are sound here.
            unsafe { sse_copy_blocks(src.as_ptr(), dst as *mut u8, blocks) };
        }
        blocks * 8
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        let _ = (dst, src);
        0
    }
}

/// How a protocol lays its records out, as checkpoints and recovery see
/// them: they reach records only through these hooks (implemented by every
/// protocol's shared state), never by decoding a protocol's bits.
pub(crate) trait RecordLayout: Send + Sync {
    /// The newest committed value of `rec` into `out`; `false` if the
    /// record is absent (deleted, or never committed).
    fn read_committed(&self, rec: &Record, out: &mut Vec<u8>) -> bool;
    /// A record holding `val`, committed at `epoch`, in this layout (as if
    /// written long ago: every new stamp is later).
    fn rebuild(&self, val: &[u8], epoch: u64) -> *mut Record;
    /// How a record of this layout is freed (exclusive access).
    fn free_record(&self) -> unsafe fn(*mut u8);
}

/// A record head. See the module documentation.
#[repr(C)]
pub struct Record {
    /// The Silo TID word.
    tid: AtomicU64,
    /// Newest version.
    data: AtomicPtr<Version>,
    // followed by the inline first Version and its data words
}

const HEAD: usize = std::mem::size_of::<Record>();
// The version header stays one half cache line: the 64-bit auxiliary word
// fits because capacity and flags share a field.
const _: () = assert!(std::mem::size_of::<Version>() == 32);
const VHDR: usize = std::mem::size_of::<Version>();

#[inline]
fn words_for(len: usize) -> usize {
    len.div_ceil(8).max(1)
}

impl Version {
    /// Strict 2PL's record lock word (`cc::twopl`): kept in the newest
    /// version's auxiliary word, which single-version records do not
    /// otherwise use, so the other protocols' records are no larger.
    #[inline]
    pub(crate) fn lock_word(&self) -> &AtomicU64 {
        &self.aux
    }

    /// The `V_*` flags.
    #[inline]
    fn flags(&self) -> u32 {
        self.cap_flags >> FLAG_SHIFT
    }

    /// Capacity in 8-byte words.
    #[inline]
    fn cap_words(&self) -> usize {
        (self.cap_flags & CAP_MASK) as usize
    }

    /// The data words of version `v`. Takes a raw pointer (not `&self`) so the
    /// result keeps the provenance of the whole allocation: a reference to the
    /// header covers only the header.
    #[inline]
    fn words(v: *const Version) -> *const AtomicU64 {
        // The data words follow the header, or the SSN metadata right
        // behind the header (`V_META`: kept next to the header so that SSN's
        // per-read bookkeeping touches the cache line the read already has).
        // Branch-free: V_META is 2 and the metadata is 24 bytes.
        const _: () = assert!(V_META == 2 && std::mem::size_of::<mvcc::VersionMeta>() == 24);
        // SAFETY: `v` points to a live version (callers' contract).
        let off = VHDR + ((unsafe { (*v).cap_flags } >> FLAG_SHIFT) & V_META) as usize * 12;
        // SAFETY: the data words lie in the same allocation at `off` (see
        // `layout_version`, `Record::new` and `mvcc::init_mv`).
        unsafe { (v as *const u8).add(off) as *const AtomicU64 }
    }

    /// Capacity in bytes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap_words() * 8
    }

    /// The TID stored in this version.
    #[inline]
    pub fn tid(&self) -> u64 {
        self.tid.load(Ordering::Acquire)
    }

    /// The value's length in bytes (stable while the record is locked or
    /// the version is no longer the newest).
    #[inline]
    pub fn value_len(&self) -> usize {
        (self.len.load(Ordering::Relaxed) as usize).min(self.capacity())
    }

    /// The next older version.
    #[inline]
    pub fn prev(&self) -> *mut Version {
        self.prev.load(Ordering::Acquire)
    }

    /// Point `prev` at `p` (EMS's oldest-first list links each version to
    /// the next newer one through it).
    #[inline]
    pub(crate) fn set_prev(&self, p: *mut Version) {
        self.prev.store(p, Ordering::Release);
    }

    /// Copy the value into `out` (appending). Word loads are Relaxed: the
    /// caller validates with the record's TID word (seqlock protocol), or the
    /// version is immutable because it is no longer the newest.
    ///
    /// # Safety
    /// `v` must point to a live version (the caller is pinned).
    #[inline]
    pub unsafe fn read_into(v: *const Version, out: &mut Vec<u8>) {
        // SAFETY: caller contract.
        let this = unsafe { &*v };
        let len = (this.len.load(Ordering::Relaxed) as usize).min(this.capacity());
        let n = words_for(len);
        let start = out.len();
        out.reserve(n * 8);
        let w = Version::words(v);
        // Store the words straight into the reserved tail (one capacity
        // check for the whole value, not one per word).
        let dst = out.spare_capacity_mut().as_mut_ptr() as *mut u8;
        // SAFETY: n <= cap_words, so the source words lie inside the live
        // version; the destination has room for n * 8 bytes (reserved above).
        unsafe { copy_words(w, dst, n) };
        // SAFETY: the first n * 8 >= len bytes past `start` were written.
        unsafe { out.set_len(start + len) };
    }

    /// Append the words that hold bytes `start..end` of the value (both
    /// clamped to its length) to `out`, cut at `end`: a column read, which
    /// copies nothing else. Returns where the wanted bytes begin in what was
    /// appended (`start % 8`, or 0 when the clamped slice is empty), so that
    /// they are `out[at + skip..]` for the `at` the output had before. Word
    /// loads are Relaxed, as in [`Version::read_into`].
    ///
    /// # Safety
    /// `v` must point to a live version (the caller is pinned).
    #[inline]
    pub unsafe fn read_slice_into(
        v: *const Version,
        start: usize,
        end: usize,
        out: &mut Vec<u8>,
    ) -> usize {
        // SAFETY: caller contract.
        let this = unsafe { &*v };
        let len = (this.len.load(Ordering::Relaxed) as usize).min(this.capacity());
        let end = end.min(len);
        let start = start.min(end);
        if start == end {
            return 0;
        }
        let (w0, w1) = (start / 8, end.div_ceil(8));
        let at = out.len();
        out.reserve((w1 - w0) * 8);
        let dst = out.spare_capacity_mut().as_mut_ptr() as *mut u8;
        // SAFETY: w1 <= words_for(len) <= cap_words: the source words lie in
        // the live version; the destination has room for (w1 - w0) words.
        unsafe { copy_words(Version::words(v).add(w0), dst, w1 - w0) };
        // SAFETY: the first end - w0 * 8 <= (w1 - w0) * 8 bytes past `at`
        // were written.
        unsafe { out.set_len(at + end - w0 * 8) };
        start - w0 * 8
    }

    /// Overwrite the value; `val.len()` must fit the capacity. Only called
    /// with the record locked (or on a version no reader can see yet).
    ///
    /// # Safety
    /// `v` must point to a live version whose capacity fits `val`.
    #[inline]
    unsafe fn write(v: *const Version, val: &[u8]) {
        // SAFETY: caller contract.
        let this = unsafe { &*v };
        debug_assert!(val.len() <= this.capacity());
        let w = Version::words(v);
        // SAFETY: the capacity fits `val`, so its whole words lie in the
        // version; `val` is a separate buffer.
        let mut i = unsafe { store_blocks(w, val) };
        let mut chunks = val[i * 8..].chunks_exact(8);
        for c in &mut chunks {
            let x = u64::from_ne_bytes(c.try_into().expect("8 bytes"));
            // SAFETY: i < cap_words since val fits.
            unsafe { (*w.add(i)).store(x, Ordering::Relaxed) };
            i += 1;
        }
        if val.len() > i * 8 {
            // SAFETY: as above, the partial word is within capacity.
            unsafe { (*w.add(i)).store(tail_word(val, i * 8), Ordering::Relaxed) };
        }
        this.len.store(val.len() as u32, Ordering::Relaxed);
    }

    /// Overwrite bytes `at..at + bytes.len()` of the value in place, leaving
    /// the others (and the length) as they are; the range must lie within
    /// the value. Only called with the record locked: the partial words at
    /// either end are read back and merged, which no other writer can race.
    ///
    /// # Safety
    /// `v` must point to a live version whose value holds the range.
    #[inline]
    unsafe fn write_at(v: *const Version, at: usize, bytes: &[u8]) {
        // SAFETY: caller contract.
        let this = unsafe { &*v };
        debug_assert!(at + bytes.len() <= this.len.load(Ordering::Relaxed) as usize);
        let w = Version::words(v);
        let (mut pos, mut rest) = (at, bytes);
        while !rest.is_empty() {
            let (word, off) = (pos / 8, pos % 8);
            let n = (8 - off).min(rest.len());
            // SAFETY: `word` holds bytes of the value's range (contract).
            let cell = unsafe { &*w.add(word) };
            let x = if let (0, Some(whole)) = (off, rest.first_chunk::<8>()) {
                u64::from_ne_bytes(*whole)
            } else if cfg!(target_endian = "little") {
                // A partial word (at most 7 bytes): the new bytes from
                // overlapping loads of the patch, merged under a mask. An
                // 8-byte load where the patch has 8 bytes from here on, or
                // its last 8 bytes hold these (the patch's end); the 4/2/1
                // gathering only in a patch shorter than a word. (A byte
                // loop here is a `memcpy` call into a buffer and a load
                // that waits for its stores; gathering four, two and one
                // bytes always took more instructions than that.)
                let new = if let Some(w) = rest.first_chunk::<8>() {
                    // Here `off > 0` and `n == 8 - off`: the shift below
                    // drops the bytes past the word's end.
                    u64::from_le_bytes(*w)
                } else if n == rest.len() {
                    tail_word(bytes, bytes.len() - n)
                } else {
                    tail_word(&rest[..n], 0)
                };
                let mask = (u64::MAX >> (64 - 8 * n)) << (8 * off);
                (cell.load(Ordering::Relaxed) & !mask) | new << (8 * off)
            } else {
                let mut b = cell.load(Ordering::Relaxed).to_ne_bytes();
                for (d, &s) in b[off..off + n].iter_mut().zip(rest) {
                    *d = s;
                }
                u64::from_ne_bytes(b)
            };
            cell.store(x, Ordering::Relaxed);
            pos += n;
            rest = &rest[n..];
        }
    }
}

impl Version {
    /// The layout this version was allocated with (header, data words and,
    /// with `V_META`, the SSN metadata).
    fn layout(&self) -> Layout {
        let meta = if self.flags() & V_META != 0 {
            std::mem::size_of::<mvcc::VersionMeta>()
        } else {
            0
        };
        Layout::from_size_align(VHDR + self.cap_words() * 8 + meta, 8).expect("layout")
    }
}

fn layout_version(cap_words: usize) -> Layout {
    Layout::from_size_align(VHDR + cap_words * 8, 8).expect("version layout")
}

fn layout_record(cap_words: usize) -> Layout {
    Layout::from_size_align(HEAD + VHDR + cap_words * 8, 8).expect("record layout")
}

/// Allocate an out-of-line version holding `val`.
fn new_version(val: &[u8], tid: u64, prev: *mut Version) -> *mut Version {
    let cap = words_for(val.len());
    // SAFETY: layout has non-zero size.
    let p = unsafe { alloc(layout_version(cap)) } as *mut Version;
    if p.is_null() {
        std::alloc::handle_alloc_error(layout_version(cap));
    }
    // SAFETY: p is a fresh allocation large enough for the header and words.
    unsafe {
        ptr::write(
            p,
            Version {
                tid: AtomicU64::new(tid),
                prev: AtomicPtr::new(prev),
                len: AtomicU32::new(0),
                cap_flags: cap_flags(cap, 0),
                aux: AtomicU64::new(0),
            },
        );
        // Zero the words so every word is initialised.
        ptr::write_bytes((p as *mut u8).add(VHDR), 0, cap * 8);
        Version::write(p, val);
    }
    p
}

/// Free an out-of-line version (not its chain).
///
/// # Safety
/// `v` must come from `new_version` and be unreachable.
unsafe fn free_version(v: *mut u8) {
    let v = v as *mut Version;
    // SAFETY: caller contract; inline versions are never passed here.
    unsafe {
        debug_assert_eq!((*v).flags() & V_INLINE, 0);
        dealloc(v as *mut u8, (*v).layout());
    }
}

/// What an optimistic read of the newest version found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A consistent read; `tid` is the observed TID word (lock bit clear).
    /// The value was appended to the buffer unless the record is absent.
    Ok(u64),
    /// The record is no longer the latest (unlinked): retry through the index.
    NotLatest,
}

impl Record {
    /// A new record holding `val`, with TID word `tid`. Space for at least
    /// `min_cap` bytes is reserved inline so later in-place updates fit.
    pub fn new(val: &[u8], tid: u64, min_cap: usize) -> *mut Record {
        let cap = words_for(val.len().max(min_cap));
        let layout = layout_record(cap);
        // SAFETY: non-zero-size layout.
        let p = unsafe { alloc(layout) } as *mut Record;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        // SAFETY: p is a fresh allocation of HEAD + VHDR + cap words.
        unsafe {
            let v = (p as *mut u8).add(HEAD) as *mut Version;
            ptr::write(
                v,
                Version {
                    tid: AtomicU64::new(tid),
                    prev: AtomicPtr::new(ptr::null_mut()),
                    len: AtomicU32::new(0),
                    cap_flags: cap_flags(cap, V_INLINE),
                    aux: AtomicU64::new(0),
                },
            );
            ptr::write_bytes((v as *mut u8).add(VHDR), 0, cap * 8);
            Version::write(v, val);
            ptr::write(
                p,
                Record {
                    tid: AtomicU64::new(tid),
                    data: AtomicPtr::new(v),
                },
            );
        }
        p
    }

    /// The inline first version of record `r` (raw pointer in, raw pointer
    /// out, to keep the provenance of the whole allocation).
    fn inline_version(r: *mut Record) -> *mut Version {
        // SAFETY: the inline version directly follows the head.
        unsafe { (r as *mut u8).add(HEAD) as *mut Version }
    }

    /// The TID word (with status bits, lock bit included).
    #[inline]
    pub fn tid_word(&self) -> u64 {
        self.tid.load(Ordering::Acquire)
    }

    /// The TID word and the newest value's length, read consistently (the
    /// read protocol without the copy); the length is 0 for an absent or
    /// no longer latest record (check the TID word).
    #[inline]
    pub fn value_len(&self) -> (u64, usize) {
        loop {
            let t1 = self.stable_tid();
            let len = if t1 & (ABSENT | LATEST) == LATEST {
                // SAFETY: the newest version is reachable from this record,
                // and versions are reclaimed only through the epoch.
                unsafe {
                    (*self.data.load(Ordering::Acquire))
                        .len
                        .load(Ordering::Relaxed) as usize
                }
            } else {
                0
            };
            fence(Ordering::Acquire);
            if t1 == self.tid.load(Ordering::Relaxed) {
                return (t1, len);
            }
        }
    }

    /// The newest value's length, for the holder of the lock.
    #[inline]
    pub fn locked_len(&self) -> usize {
        // SAFETY: the lock holder's newest version is stable and reachable.
        unsafe {
            (*self.data.load(Ordering::Relaxed))
                .len
                .load(Ordering::Relaxed) as usize
        }
    }

    /// Newest version pointer.
    #[inline]
    pub fn newest(&self) -> *mut Version {
        self.data.load(Ordering::Acquire)
    }

    /// Hint the CPU to fetch the record at `rec`: its head and the first
    /// `value_len` bytes of its inline first version (where a value lives
    /// unless it outgrew it). Only a hint: nothing is dereferenced, so any
    /// address will do.
    #[inline(always)]
    pub fn prefetch(rec: *const Record, value_len: usize) {
        prefetch_bytes(rec as *const u8, HEAD + VHDR + value_len);
    }

    /// Hint the CPU to fetch this record's newest version: its header, the
    /// protocol metadata a version may carry, and the first `value_len`
    /// bytes of its value. For multi-version records, whose newest version
    /// of an updated row lives out of line: the second of two dependent
    /// misses, issued for several records before any is read (the caller
    /// prefetched the records themselves first, so that these loads of
    /// their heads overlap).
    #[inline(always)]
    pub fn prefetch_newest(&self, value_len: usize) {
        debug_assert!(value_len <= 1 << 20, "a prefetch of {value_len} bytes");
        let v = self.newest();
        prefetch_bytes(
            v as *const u8,
            VHDR + std::mem::size_of::<mvcc::VersionMeta>() + value_len,
        );
    }

    /// Spin until the lock bit is clear; returns the TID word seen.
    #[inline]
    pub fn stable_tid(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let t = self.tid.load(Ordering::Acquire);
            if t & LOCK == 0 {
                return t;
            }
            crate::backoff::snooze(&mut spins);
        }
    }

    /// Silo's read protocol (section 4.5): (a) read the TID word, spinning
    /// while locked, (b) check the latest-version bit, (c) read the data,
    /// (d) fence, (e) re-read the TID word; retry if it changed. On success
    /// the value is appended to `out` (nothing is appended for an absent
    /// record; check `ABSENT` in the returned TID).
    #[inline]
    pub fn read(&self, out: &mut Vec<u8>) -> ReadOutcome {
        match self.read_as::<false>(out) {
            Some(o) => o,
            None => unreachable!("a read that waits out locks never finds one"),
        }
    }

    /// A read's first load of the TID word: waiting while it is locked, or
    /// (`DIRTY`) `None` if it is.
    #[inline(always)]
    fn first_tid<const DIRTY: bool>(&self) -> Option<u64> {
        if DIRTY {
            let t = self.tid.load(Ordering::Acquire);
            (t & LOCK == 0).then_some(t)
        } else {
            Some(self.stable_tid())
        }
    }

    /// [`Record::read`], always inlined (a scan's per-row closure and the
    /// point reads call it, where the call and the buffer's set-up cost as
    /// much as the copy). With `DIRTY`, for a protocol that treats a locked
    /// record as a dirty read and aborts (ROCC, section 3.3.3): `None`, with
    /// nothing appended, where `read` would wait for the lock; the lock bit
    /// is tested on the TID word the read loads anyway.
    #[inline(always)]
    pub(crate) fn read_as<const DIRTY: bool>(&self, out: &mut Vec<u8>) -> Option<ReadOutcome> {
        let start = out.len();
        loop {
            let t1 = self.first_tid::<DIRTY>()?;
            if t1 & LATEST == 0 {
                return Some(ReadOutcome::NotLatest);
            }
            if t1 & ABSENT == 0 {
                let v = self.data.load(Ordering::Acquire);
                // SAFETY: the newest version is reachable from this record,
                // and versions are only reclaimed through the epoch, which the
                // caller has pinned.
                unsafe { Version::read_into(v, out) };
            }
            fence(Ordering::Acquire);
            let t2 = self.tid.load(Ordering::Relaxed);
            if t1 == t2 {
                return Some(ReadOutcome::Ok(t1));
            }
            out.truncate(start);
        }
    }

    /// [`Record::read`] of bytes `start..end` of the value only (clamped to
    /// its length): the same seqlock protocol, so the returned TID covers
    /// the whole record. The bytes are `out[at + skip..]`, where `at` is the
    /// output's length before the call and `skip` the second result (see
    /// [`Version::read_slice_into`]).
    #[inline]
    pub fn read_slice(&self, start: usize, end: usize, out: &mut Vec<u8>) -> (ReadOutcome, usize) {
        match self.read_slice_as::<false>(start, end, out) {
            Some(o) => o,
            None => unreachable!("a read that waits out locks never finds one"),
        }
    }

    /// [`Record::read_slice`], inlined and with `DIRTY` as
    /// [`Record::read_as`].
    #[inline(always)]
    pub(crate) fn read_slice_as<const DIRTY: bool>(
        &self,
        start: usize,
        end: usize,
        out: &mut Vec<u8>,
    ) -> Option<(ReadOutcome, usize)> {
        let at = out.len();
        loop {
            let t1 = self.first_tid::<DIRTY>()?;
            if t1 & LATEST == 0 {
                return Some((ReadOutcome::NotLatest, 0));
            }
            let mut skip = 0;
            if t1 & ABSENT == 0 {
                let v = self.data.load(Ordering::Acquire);
                // SAFETY: as in `read`.
                skip = unsafe { Version::read_slice_into(v, start, end, out) };
            }
            fence(Ordering::Acquire);
            if t1 == self.tid.load(Ordering::Relaxed) {
                return Some((ReadOutcome::Ok(t1), skip));
            }
            out.truncate(at);
        }
    }

    /// Read the version visible to a snapshot taken at `boundary`: the newest
    /// version whose epoch is below it (Silo section 4.9). Returns `None` if
    /// no such version exists or it is a deletion; the value is appended to
    /// `out` otherwise.
    pub fn read_snapshot(&self, boundary: u64, out: &mut Vec<u8>) -> Option<u64> {
        let start = out.len();
        loop {
            let t1 = self.stable_tid();
            let head = self.data.load(Ordering::Acquire);
            if epoch_of(t1) < boundary && t1 & TID_MASK != 0 {
                if t1 & ABSENT == 0 {
                    // SAFETY: as in `read`.
                    unsafe { Version::read_into(head, out) };
                }
                fence(Ordering::Acquire);
                if self.tid.load(Ordering::Relaxed) != t1 {
                    out.truncate(start);
                    continue;
                }
                return if t1 & ABSENT == 0 { Some(t1) } else { None };
            }
            // SAFETY: as above; `prev` of the newest version is read under the
            // seqlock and re-validated below.
            let mut v = unsafe { (*head).prev() };
            fence(Ordering::Acquire);
            if self.tid.load(Ordering::Relaxed) != t1 {
                continue;
            }
            // Older versions are immutable; pruning only cuts the chain
            // behind a version older than every live snapshot boundary, so
            // the version this reader needs is never cut off.
            while !v.is_null() {
                // SAFETY: chain versions are reclaimed through the epoch.
                let vr = unsafe { &*v };
                let t = vr.tid();
                if epoch_of(t) < boundary && t & TID_MASK != 0 {
                    if t & ABSENT != 0 {
                        return None;
                    }
                    // SAFETY: as above.
                    unsafe { Version::read_into(v, out) };
                    return Some(t);
                }
                v = vr.prev();
            }
            return None;
        }
    }

    /// Try to set the lock bit; returns the TID word before locking.
    #[inline]
    pub fn try_lock(&self) -> Option<u64> {
        let t = self.tid.load(Ordering::Relaxed);
        if t & LOCK != 0 {
            return None;
        }
        self.tid
            .compare_exchange_weak(t, t | LOCK, Ordering::Acquire, Ordering::Relaxed)
            .ok()
    }

    /// Spin until the lock is ours; returns the TID word before locking.
    #[inline]
    pub fn lock(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            if let Some(t) = self.try_lock() {
                // Order the data writes that follow after the lock bit
                // (seqlock writer side).
                fence(Ordering::Release);
                return t;
            }
            crate::backoff::snooze(&mut spins);
        }
    }

    /// Release the lock, setting the TID word to `tid` (lock bit clear).
    #[inline]
    pub fn unlock_with(&self, tid: u64) {
        debug_assert_eq!(tid & LOCK, 0);
        self.tid.store(tid, Ordering::Release);
    }

    /// Release the lock leaving the TID word as it was.
    #[inline]
    pub fn unlock(&self) {
        let t = self.tid.load(Ordering::Relaxed);
        self.tid.store(t & !LOCK, Ordering::Release);
    }

    /// Install `val` as the new value with TID `new_tid` and unlock (Silo
    /// commit phase 3: update, fence, store the TID, releasing the lock).
    /// Must hold the lock. `old_tid` is the TID word before locking.
    ///
    /// Versions: if a snapshot boundary lies between the old version's epoch
    /// and the new one, the old version is kept (linked behind the new one)
    /// for snapshot readers; chain versions that no snapshot reader can need
    /// any more (`snapshot_min`) are cut and retired. Otherwise the value is
    /// written in place when it fits.
    ///
    /// `val == None` writes a deletion (the caller sets `ABSENT` in `new_tid`).
    pub fn install(
        &self,
        old_tid: u64,
        val: Option<&[u8]>,
        new_tid: u64,
        keep_snapshots: Option<(u64, u64)>,
        g: &Guard<'_>,
    ) {
        let head = self.data.load(Ordering::Relaxed);
        let bytes = val.unwrap_or(&[]);
        // Keep the old version if a snapshot boundary (a multiple of k) lies
        // between its epoch and the new one; deletions are kept too, so a
        // snapshot reader sees the record as absent rather than an older value.
        let keep_old = match keep_snapshots {
            Some((k, _)) => {
                old_tid & TID_MASK != 0 && epoch_of(old_tid) / k < epoch_of(new_tid) / k
            }
            None => false,
        };
        // SAFETY: we hold the lock, so `head` is the newest version and no
        // other writer touches it; readers are protected by the seqlock.
        let h = unsafe { &*head };
        if keep_old {
            // The old newest version becomes immutable: stamp it with its TID.
            h.tid.store(old_tid & !LOCK, Ordering::Relaxed);
            let snapshot_min = keep_snapshots.map(|x| x.1).unwrap_or(0);
            self.prune_chain(head, snapshot_min, g);
            let nv = new_version(bytes, new_tid, head);
            self.data.store(nv, Ordering::Release);
        } else if bytes.len() <= h.capacity() {
            // SAFETY: locked newest version with enough capacity.
            unsafe { Version::write(head, bytes) };
            h.tid.store(new_tid, Ordering::Relaxed);
        } else {
            let nv = new_version(bytes, new_tid, h.prev());
            self.data.store(nv, Ordering::Release);
            if h.flags() & V_INLINE == 0 {
                // SAFETY: `head` was the newest version and is now unlinked;
                // readers that still hold it are pinned.
                unsafe { g.retire(head as *mut u8, free_version) };
            }
        }
        fence(Ordering::Release);
        self.unlock_with(new_tid);
    }

    /// Install column writes (commit phase 3 of `Txn::update_slice`): write
    /// each `(offset, bytes)` of `parts` over the newest value in place,
    /// then publish `new_tid`, releasing the lock. Must hold the lock, and
    /// the value must hold every range. Only for commits that keep no old
    /// version for snapshots (those install the whole new row instead).
    pub fn install_parts<'b>(&self, parts: impl Iterator<Item = (usize, &'b [u8])>, new_tid: u64) {
        let head = self.data.load(Ordering::Relaxed);
        for (at, bytes) in parts {
            // SAFETY: we hold the lock, so `head` is the newest version and
            // no other writer touches it; the caller checked the ranges.
            unsafe { Version::write_at(head, at, bytes) };
        }
        // SAFETY: as above.
        unsafe { &*head }.tid.store(new_tid, Ordering::Relaxed);
        fence(Ordering::Release);
        self.unlock_with(new_tid);
    }

    /// Cut the chain behind the first version (starting at `from`) whose
    /// epoch is below `snapshot_min`: no snapshot reader can need anything
    /// older. Cut versions are retired through the epoch.
    fn prune_chain(&self, from: *mut Version, snapshot_min: u64, g: &Guard<'_>) {
        let mut v = from;
        while !v.is_null() {
            // SAFETY: we hold the record lock; the chain is only cut by lock holders.
            let vr = unsafe { &*v };
            if epoch_of(vr.tid()) < snapshot_min {
                let mut cut = vr.prev.swap(ptr::null_mut(), Ordering::AcqRel);
                while !cut.is_null() {
                    // SAFETY: unlinked above; each chain version is owned by this chain only.
                    let next = unsafe { (*cut).prev() };
                    // SAFETY: as above.
                    if unsafe { (*cut).flags() } & V_INLINE == 0 {
                        // SAFETY: unreachable for new readers; old readers are pinned.
                        unsafe { g.retire(cut as *mut u8, free_version) };
                    }
                    cut = next;
                }
                return;
            }
            v = vr.prev();
        }
    }

    /// Number of versions in the chain (newest included), for tests/stats.
    pub fn chain_len(&self) -> usize {
        let mut n = 0;
        let mut v = self.newest();
        while !v.is_null() {
            n += 1;
            // SAFETY: caller is pinned or has exclusive access.
            v = unsafe { (*v).prev() };
        }
        n
    }

    /// Free a record and every version still linked from it.
    ///
    /// # Safety
    /// `r` must come from [`Record::new`] and be unreachable by any thread.
    pub unsafe fn free(r: *mut u8) {
        let r = r as *mut Record;
        // SAFETY: caller contract: exclusive access.
        unsafe {
            let mut v = (*r).data.load(Ordering::Relaxed);
            while !v.is_null() {
                let next = (*v).prev.load(Ordering::Relaxed);
                if (*v).flags() & V_INLINE == 0 {
                    free_version(v as *mut u8);
                }
                v = next;
            }
            let iv = Record::inline_version(r);
            let mut size = HEAD + (*iv).layout().size();
            if (*iv).flags() & V_BOTTOM != 0 {
                // A multi-version record's ⊥ follows its first version.
                let bot = (iv as *const u8).add((*iv).layout().size()) as *const Version;
                size += (*bot).layout().size();
            }
            dealloc(r as *mut u8, Layout::from_size_align_unchecked(size, 8));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoch::Epochs;

    fn t(epoch: u64, seq: u64) -> u64 {
        make_tid(epoch, seq) | LATEST
    }

    #[test]
    fn copy_words_copies_every_length_exactly() {
        // Every length around the 8-word blocks of the assembly path, into
        // a destination with guard bytes on both sides.
        let src: Vec<AtomicU64> = (0..41u64)
            .map(|i| AtomicU64::new(0x0101_0101_0101_0101u64.wrapping_mul(i + 1) ^ i << 56))
            .collect();
        for n in 0..=src.len() {
            let mut dst = vec![0xEEu8; n * 8 + 16];
            // SAFETY: n words of `src`; dst has n * 8 bytes after the first 8.
            unsafe { copy_words(src.as_ptr(), dst.as_mut_ptr().add(8), n) };
            assert!(dst[..8].iter().all(|&b| b == 0xEE), "n {n}: wrote before");
            assert!(
                dst[8 + n * 8..].iter().all(|&b| b == 0xEE),
                "n {n}: wrote after"
            );
            for (i, w) in src[..n].iter().enumerate() {
                let got = u64::from_ne_bytes(dst[8 + i * 8..16 + i * 8].try_into().unwrap());
                assert_eq!(got, w.load(Ordering::Relaxed), "n {n}: word {i}");
            }
        }
    }

    #[test]
    fn tail_word_is_the_zero_padded_tail() {
        for len in 1usize..=24 {
            let val: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            for from in (0..len).filter(|f| len - f < 8) {
                let mut b = [0u8; 8];
                b[..len - from].copy_from_slice(&val[from..]);
                assert_eq!(tail_word(&val, from), u64::from_ne_bytes(b), "len {len}, from {from}");
            }
        }
    }

    #[test]
    fn write_at_patches_exactly_its_bytes() {
        // Every (at, length) inside values of lengths around word
        // boundaries, against the same patch applied to a plain copy.
        for len in [1usize, 7, 8, 9, 15, 16, 17, 24, 31] {
            let base: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
            for at in 0..len {
                for n in 0..=len - at {
                    let patch: Vec<u8> = (0..n).map(|i| (200 + i * 7) as u8).collect();
                    let v = new_version(&base, 1, ptr::null_mut());
                    // SAFETY: a fresh version whose value holds the range.
                    unsafe { Version::write_at(v, at, &patch) };
                    let mut got = Vec::new();
                    // SAFETY: as above; nothing else reaches it.
                    unsafe { Version::read_into(v, &mut got) };
                    let mut want = base.clone();
                    want[at..at + n].copy_from_slice(&patch);
                    assert_eq!(got, want, "len {len}, at {at}, n {n}");
                    // SAFETY: made by new_version above, unreachable.
                    unsafe { free_version(v as *mut u8) };
                }
            }
        }
    }

    #[test]
    fn read_slice_copies_exactly_the_clamped_bytes() {
        // Every (start, end) over values of lengths around word and block
        // boundaries, appended after existing bytes of the output.
        for len in [0usize, 1, 7, 8, 9, 63, 64, 65, 130] {
            let val: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let r = Record::new(&val, t(1, 1), 0);
            // SAFETY: this test's record, one thread, freed below.
            let rec = unsafe { &*r };
            for start in 0..=len + 2 {
                for end in [
                    0,
                    start,
                    start + 1,
                    start + 5,
                    start + 8,
                    start + 70,
                    len,
                    usize::MAX,
                ] {
                    let mut out = vec![0xAA, 0xBB];
                    let (got, skip) = rec.read_slice(start, end, &mut out);
                    assert_eq!(got, ReadOutcome::Ok(t(1, 1)));
                    let e = end.min(len);
                    let want = &val[start.min(e)..e];
                    assert_eq!(&out[..2], &[0xAA, 0xBB], "len {len} {start}..{end}");
                    assert_eq!(&out[2 + skip..], want, "len {len} {start}..{end}");
                    // Whole words only: at most 7 bytes before the slice.
                    assert!(skip < 8 && out.len() - 2 <= want.len() + 7);
                }
            }
            // SAFETY: never published; freed once.
            unsafe { Record::free(r as *mut u8) };
        }
    }

    #[test]
    fn read_in_place_and_grow() {
        let ep = Epochs::new(1, 10);
        let l = ep.register().unwrap();
        let g = l.pin();
        let r = Record::new(b"hello", t(1, 1), 0);
        // SAFETY: this test's record and versions: alive until the test frees them, one thread.
        let rec = unsafe { &*r };
        let mut out = Vec::new();
        assert_eq!(rec.read(&mut out), ReadOutcome::Ok(t(1, 1)));
        assert_eq!(out, b"hello");
        let old = rec.lock();
        rec.install(old, Some(b"world"), t(1, 2), Some((10, 0)), &g);
        let inline_ptr = rec.newest();
        out.clear();
        rec.read(&mut out);
        assert_eq!(out, b"world");
        assert_eq!(rec.chain_len(), 1);
        // grow past capacity: new version, still one in the chain
        let old = rec.lock();
        let big = vec![7u8; 100];
        rec.install(old, Some(&big), t(1, 3), Some((10, 0)), &g);
        assert_ne!(rec.newest(), inline_ptr);
        out.clear();
        rec.read(&mut out);
        assert_eq!(out, big);
        assert_eq!(rec.chain_len(), 1);
        drop(g);
        // SAFETY: this test's record and versions: alive until the test frees them, one thread.
        unsafe { Record::free(r as *mut u8) };
    }

    #[test]
    fn snapshot_versions_kept_across_boundaries_and_pruned() {
        let ep = Epochs::new(1, 10);
        let l = ep.register().unwrap();
        let g = l.pin();
        let r = Record::new(b"v5", t(5, 1), 0);
        // SAFETY: this test's record and versions: alive until the test frees them, one thread.
        let rec = unsafe { &*r };
        // epoch 12: crosses boundary 10 -> keep v5
        let old = rec.lock();
        rec.install(old, Some(b"v12"), t(12, 1), Some((10, 0)), &g);
        assert_eq!(rec.chain_len(), 2);
        // epoch 15: same period as 12 -> in place
        let old = rec.lock();
        rec.install(old, Some(b"v15"), t(15, 1), Some((10, 0)), &g);
        assert_eq!(rec.chain_len(), 2);
        let mut out = Vec::new();
        assert!(rec.read_snapshot(10, &mut out).is_some());
        assert_eq!(out, b"v5");
        out.clear();
        assert!(rec.read_snapshot(20, &mut out).is_some());
        assert_eq!(out, b"v15");
        out.clear();
        assert!(rec.read_snapshot(5, &mut out).is_none());
        // epoch 25 with snapshot_min 20: keep v15 (needed for boundary 20), cut v5
        let old = rec.lock();
        rec.install(old, Some(b"v25"), t(25, 1), Some((10, 20)), &g);
        assert_eq!(rec.chain_len(), 2);
        out.clear();
        assert!(rec.read_snapshot(20, &mut out).is_some());
        assert_eq!(out, b"v15");
        // delete at epoch 31: keeps v25 for boundary 30
        let old = rec.lock();
        rec.install(old, None, t(31, 1) | ABSENT, Some((10, 30)), &g);
        out.clear();
        assert!(rec.read_snapshot(30, &mut out).is_some());
        assert_eq!(out, b"v25");
        assert!(rec.read_snapshot(40, &mut out).is_none());
        drop(g);
        // SAFETY: this test's record and versions: alive until the test frees them, one thread.
        unsafe { Record::free(r as *mut u8) };
        drop(l);
        for _ in 0..4 {
            ep.tick();
        }
    }

    #[test]
    fn concurrent_seqlock_reads_see_whole_values() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let ep = Epochs::new(2, 10);
        let r = Record::new(&[0u8; 24], t(1, 1), 0) as usize;
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let ep = Arc::clone(&ep);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let l = ep.register().unwrap();
                // SAFETY: this test's record and versions: alive until the test frees them, one thread.
                let rec = unsafe { &*(r as *const Record) };
                let mut out = Vec::new();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) || n < if cfg!(miri) { 20 } else { 1000 } {
                    let g = l.pin();
                    out.clear();
                    rec.read(&mut out);
                    let first = out[0];
                    assert!(out.iter().all(|&b| b == first), "torn read {out:?}");
                    drop(g);
                    n += 1;
                }
            })
        };
        let l = ep.register().unwrap();
        // SAFETY: this test's record and versions: alive until the test frees them, one thread.
        let rec = unsafe { &*(r as *const Record) };
        let iters: u64 = if cfg!(miri) { 200 } else { 20_000 };
        for i in 0..iters {
            let g = l.pin();
            let old = rec.lock();
            let b = (i % 251) as u8;
            let len = if i % 3 == 0 { 24 } else { 40 };
            rec.install(old, Some(&vec![b; len]), t(1, i + 2), None, &g);
            drop(g);
            if i % 500 == 0 {
                ep.tick();
                l.collect();
            }
        }
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        drop(l);
        // SAFETY: this test's record and versions: alive until the test frees them, one thread.
        unsafe { Record::free(r as *mut u8) };
    }
}

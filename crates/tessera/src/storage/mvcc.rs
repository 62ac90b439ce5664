//! Multi-versioned records for ERMIA's protocols (`si`, `ssn`; Kim et al.,
//! SIGMOD 2016, section 3.2).
//!
//! The record head is ERMIA's OID slot: `data` points at the newest version
//! of a newest-first chain. An update never writes in place: it allocates a
//! version stamped with its transaction id ([`XID_FLAG`] set) and installs it
//! with one CAS on the head; that uncommitted head is the record's write lock.
//! Post-commit replaces the id with the commit stamp. A deletion is a
//! tombstone version.
//!
//! Every multi-version record is born with an inline **bottom version** (⊥):
//! a committed tombstone with stamp 0, visible to everyone, meaning "no such
//! key". An insert overwrites ⊥ like any update overwrites a version. That is
//! what lets SSN see the anti-dependency of a reader that found a key missing
//! (it read ⊥) on the transaction that later inserted it (⊥'s overwriter):
//! the paper's per-version stamps need a version to hang on, and a key that
//! did not exist has none. The price is one small version per record.
//!
//! The first version's slot is reused: once GC has cut it from the chain
//! and a memory-epoch grace period has passed, the record's TID word says
//! so ([`Record::mark_inline_free`]) and the next writer builds its version
//! there ([`Record::take_inline`], [`reinit_inline`]) instead of allocating
//! one out of line, which keeps a row that is updated now and then one
//! cache miss away from its head (best-effort inlining, as in Cicada; ERMIA
//! allocates every version out of line).
//!
//! A version may carry [`META_WORDS`] words of protocol metadata
//! ([`VersionMeta`]) between its header and its data words, which the layout
//! initialises and keeps but gives no meaning: SSN keeps η, π and its
//! in-flight readers bitmap there (`cc::ermia::ssn`), so its per-read
//! bookkeeping touches the cache line the read touches anyway; versions of
//! the other protocols carry none.

use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

use super::tid::{LATEST, LOCK};
use super::*;
use crate::epoch::Guard;

/// Tag bit of a version stamp that is a transaction id, not a commit stamp:
/// a version is in flight while its stamp carries it.
pub const XID_FLAG: u64 = 1 << 63;

/// The TID word of a multi-version record keeps `LOCK` and `LATEST` in its
/// low bits and, from this bit up, the number of queued GC entries that
/// will visit the record (so it is not freed under them).
const GC_SHIFT: u32 = 8;
const GC_ONE: u64 = 1 << GC_SHIFT;

/// TID-word bit of a multi-version record: its inline first version is out
/// of every chain and past a memory-epoch grace period, so the next writer
/// may build its version there instead of allocating one (see
/// [`Record::take_inline`]).
const INLINE_FREE: u64 = 1 << 4;

/// What [`Record::prune_mv`] cut.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Versions cut from the chain (inline ones included).
    pub versions: usize,
    /// Whether the record's inline first version was among them: once no
    /// pinned reader can still hold it, it may be reused
    /// ([`Record::mark_inline_free`]).
    pub first_inline: bool,
}

/// Words of protocol metadata a version carries with `V_META`.
pub const META_WORDS: usize = 3;

/// A version's protocol metadata: words the layout keeps, right behind the
/// header, for the protocol to give a meaning (SSN: `cc::ermia::ssn`).
#[repr(C)]
pub struct VersionMeta(pub [AtomicU64; META_WORDS]);

/// The initial values of a new version's metadata.
pub type MetaInit = [u64; META_WORDS];

/// The state of a version written with `val` (`None`: a deletion).
#[inline]
fn mv_state_of(val: Option<&[u8]>) -> MvState {
    if val.is_some() {
        MvState::Value
    } else {
        MvState::Tombstone
    }
}

/// What a multi-version version holds: the meaning of its auxiliary word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub enum MvState {
    /// A value.
    Value = 0,
    /// A deletion.
    Tombstone = 1,
    /// BOHM's placeholder (Faleiro's thesis, section 5.3): a version whose
    /// position in the chain is fixed by its transaction's timestamp before
    /// the transaction runs, and whose value the execution phase produces.
    /// No protocol installs one yet; the state is reserved so the layout
    /// needs no change when BOHM does.
    Placeholder = 2,
}

impl Version {
    /// What this version holds.
    #[inline]
    pub fn state(&self) -> MvState {
        match self.aux.load(Ordering::Acquire) {
            0 => MvState::Value,
            1 => MvState::Tombstone,
            _ => MvState::Placeholder,
        }
    }

    /// The creation stamp: a commit stamp, or the creator's transaction id
    /// with [`XID_FLAG`] while it is in flight.
    #[inline]
    pub fn stamp(&self) -> u64 {
        self.tid.load(Ordering::Acquire)
    }

    /// Replace the transaction id with the commit stamp (post-commit).
    #[inline]
    pub fn set_stamp(&self, s: u64) {
        self.tid.store(s, Ordering::Release);
    }

    /// Whether this version is a tombstone.
    #[inline]
    pub fn is_tombstone(&self) -> bool {
        self.aux.load(Ordering::Relaxed) == MvState::Tombstone as u64
    }

    /// Whether this version lives inside its record's allocation.
    #[inline]
    pub fn is_inline(&self) -> bool {
        self.flags() & V_INLINE != 0
    }

    /// Whether this is a multi-version record's inline first version (the
    /// reusable slot; ⊥, the other inline version, is not).
    #[inline]
    pub fn is_first_inline(&self) -> bool {
        self.flags() & V_BOTTOM != 0
    }

    /// The protocol metadata of version `v`, if it has any.
    ///
    /// # Safety
    /// `v` must point to a live version (the caller is pinned).
    #[inline]
    pub unsafe fn meta<'a>(v: *const Version) -> Option<&'a VersionMeta> {
        // SAFETY: caller contract.
        let this = unsafe { &*v };
        if this.flags() & V_META == 0 {
            return None;
        }
        // SAFETY: with V_META the metadata directly follows the header, in
        // the same allocation (see `init_mv`).
        Some(unsafe { &*((v as *const u8).add(VHDR) as *const VersionMeta) })
    }

    /// Whether `len` bytes fit this version's capacity.
    #[inline]
    pub fn fits(&self, len: usize) -> bool {
        len <= self.capacity()
    }

    /// Rewrite the value of an uncommitted version in place (`None`: make it
    /// a tombstone). Only its creator calls this, and other transactions
    /// never read the data of an uncommitted version.
    ///
    /// # Safety
    /// `v` must be a live version created by the caller's running
    /// transaction whose capacity fits the value.
    #[inline]
    pub unsafe fn rewrite(v: *const Version, val: Option<&[u8]>) {
        // SAFETY: caller contract.
        unsafe { Version::rewrite_fill(v, Fill::Value(val)) }
    }

    /// [`Version::rewrite`] with `fill`: a whole value, or a patch of its
    /// base (which may be `v` itself: then only the bytes are written).
    ///
    /// # Safety
    /// As [`Version::rewrite`]; a `Patched` fill's base is live, does not
    /// change meanwhile, and holds the patch's bytes inside its length.
    #[inline(always)]
    pub unsafe fn rewrite_fill(v: *const Version, fill: Fill<'_>) {
        // SAFETY: caller contract.
        unsafe {
            write_fill(v, fill, false);
            let state = match fill {
                Fill::Value(val) => mv_state_of(val),
                Fill::Patched { .. } => MvState::Value,
            };
            (*v).aux.store(state as u64, Ordering::Relaxed);
        }
    }
}

/// Write `fill`'s value into `v`'s data words and length: the value's bytes
/// (the last word zero-padded), or the base's words with the patch's bytes
/// over them (copied word by word, no buffer; nothing is copied when the
/// base is `v` itself). Nothing past the length is written or cleared.
///
/// `unpublished`: no reader can reach `v` yet (a new version), so its
/// words need no atomic stores.
///
/// # Safety
/// `v` is live, written by the caller alone, with room for the value; a
/// `Patched` fill's base is live and stable, the patch inside its length;
/// if `unpublished`, nothing else can reach `v`.
#[inline(always)]
unsafe fn write_fill(v: *const Version, fill: Fill<'_>, unpublished: bool) {
    // SAFETY: caller contract.
    unsafe {
        match fill {
            Fill::Value(val) => Version::write(v, val.unwrap_or(&[])),
            Fill::Patched { base, at, bytes } => {
                if !ptr::eq(base, v) {
                    let len = (*base).value_len();
                    debug_assert!((*v).fits(len) && at + bytes.len() <= len);
                    let dst = Version::words(v) as *mut u8;
                    super::copy_words(Version::words(base), dst, words_for(len));
                    (*v).len.store(len as u32, Ordering::Relaxed);
                    if unpublished {
                        // Nobody can read the words yet: the patch is a
                        // plain copy over its bytes, not `write_at`'s
                        // read-merge-write of the partial words, whose
                        // loads wait for the copy's stores just made (si's
                        // TPC-C: 691 fewer instructions a transaction, 2%
                        // more throughput at 2 threads).
                        ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(at), bytes.len());
                        return;
                    }
                }
                Version::write_at(v, at, bytes);
            }
        }
    }
}

/// What a new version holds.
#[derive(Clone, Copy)]
pub enum Fill<'a> {
    /// These bytes (`None`: a tombstone).
    Value(Option<&'a [u8]>),
    /// A column write: the value of the committed version `base` with
    /// `bytes` written over it at `at` (the caller checked that they lie
    /// inside it). Copied from `base` word by word straight into the new
    /// version, not through a buffer.
    Patched {
        /// The version written over: committed (immutable) and live.
        base: *const Version,
        /// Where the bytes go.
        at: usize,
        /// The bytes.
        bytes: &'a [u8],
    },
}

impl Fill<'_> {
    /// The length of the value.
    ///
    /// # Safety
    /// A `Patched` base must be live (the caller is pinned).
    #[inline]
    pub unsafe fn value_len(&self) -> usize {
        match *self {
            Fill::Value(v) => v.map_or(0, <[u8]>::len),
            // SAFETY: caller contract.
            Fill::Patched { base, .. } => unsafe { (*base).value_len() },
        }
    }
}

/// Initialise a version header (and metadata) at `v`.
///
/// # Safety
/// `v` must be valid for writes of the version's whole layout and
/// unpublished (nothing else reaches it), and a `Patched` base live and
/// committed.
unsafe fn init_mv(
    v: *mut Version,
    cap: usize,
    fill: Fill<'_>,
    stamp: u64,
    prev: *mut Version,
    flags: u32,
    meta_init: MetaInit,
) {
    let state = match fill {
        Fill::Value(val) => mv_state_of(val),
        Fill::Patched { .. } => MvState::Value,
    };
    // SAFETY: caller contract.
    unsafe {
        ptr::write(
            v,
            Version {
                tid: AtomicU64::new(stamp),
                prev: AtomicPtr::new(prev),
                len: AtomicU32::new(0),
                cap_flags: super::cap_flags(cap, flags),
                aux: AtomicU64::new(state as u64),
            },
        );
        let meta = if flags & V_META != 0 {
            std::mem::size_of::<VersionMeta>()
        } else {
            0
        };
        // The data words are not cleared first: the fill writes every word
        // up to the value's length (the last one zero-padded), and nothing
        // reads a version past its length.
        // A patch's base is committed, so its words are stable, and ours
        // are unpublished.
        write_fill(v, fill, true);
        if meta != 0 {
            let m = (v as *mut u8).add(VHDR) as *mut VersionMeta;
            ptr::write(m, VersionMeta(meta_init.map(AtomicU64::new)));
        }
    }
}

fn mv_size(cap: usize, meta: bool) -> usize {
    VHDR + cap * 8
        + if meta {
            std::mem::size_of::<VersionMeta>()
        } else {
            0
        }
}

/// Allocate an out-of-line version holding `val` (`None`: a tombstone),
/// stamped `stamp`, in front of `prev`; with protocol metadata initialised
/// to `meta` if given.
// `prev` is only stored in the new version, never dereferenced here.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn new_mv_version(
    val: Option<&[u8]>,
    stamp: u64,
    prev: *mut Version,
    meta: Option<MetaInit>,
) -> *mut Version {
    // SAFETY: a `Value` fill has no base.
    unsafe { new_mv_version_fill(Fill::Value(val), stamp, prev, meta) }
}

/// [`new_mv_version`] holding `fill`.
///
/// # Safety
/// A `Patched` fill's base must be live and committed, its bytes inside it.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub unsafe fn new_mv_version_fill(
    fill: Fill<'_>,
    stamp: u64,
    prev: *mut Version,
    meta: Option<MetaInit>,
) -> *mut Version {
    // SAFETY: caller contract.
    let cap = words_for(unsafe { fill.value_len() });
    // From this thread's pool of recycled blocks (`storage::pool`): a warm
    // block, where the allocator would hand out a cold one.
    let p = super::pool::take(mv_size(cap, meta.is_some())) as *mut Version;
    let flags = if meta.is_some() { V_META } else { 0 };
    // SAFETY: a block of the whole size, ours alone (fresh, or recycled by
    // the pool once no reader could reach it).
    unsafe { init_mv(p, cap, fill, stamp, prev, flags, meta.unwrap_or_default()) };
    p
}

/// Bytes a version holding `len` bytes takes inside another allocation
/// (no metadata): for [`init_inline_version`].
pub(crate) fn inline_version_size(len: usize) -> usize {
    mv_size(words_for(len), false)
}

/// Build a version with room for `room` bytes holding `val` (`None`: a
/// tombstone), stamped `stamp`, at `v`, inside its record's allocation:
/// flagged inline, so that it is never freed on its own (EMS's records,
/// `storage::ems`).
///
/// # Safety
/// `v` is 8-aligned, unpublished and valid for writes of
/// [`inline_version_size`]`(room)`; the value fits `room`.
pub(crate) unsafe fn init_inline_version(
    v: *mut Version,
    room: usize,
    val: Option<&[u8]>,
    stamp: u64,
) {
    debug_assert!(val.map_or(0, |v| v.len()) <= room);
    let cap = words_for(room);
    // SAFETY: caller contract.
    unsafe {
        // EMS rewrites a region in place while readers copy it under a
        // seqlock; a copy that raced a rewrite may read past the new length
        // before it is thrown away, so the whole room starts out cleared.
        ptr::write_bytes(v as *mut u8, 0, inline_version_size(room));
        init_mv(
            v,
            cap,
            Fill::Value(val),
            stamp,
            ptr::null_mut(),
            V_INLINE,
            MetaInit::default(),
        )
    }
}

/// Build a new version holding `fill`, stamped `stamp`, in front of
/// `prev`, in a claimed inline first version ([`MvRecord::take_inline`]);
/// capacity and flags stay as they are, and the metadata, if the version
/// has any, starts over from `meta`.
///
/// # Safety
/// `v` must come from [`MvRecord::take_inline`] and be unpublished; the
/// value must fit; a `Patched` fill's base must be live and committed, its
/// bytes inside it.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub unsafe fn reinit_inline(
    v: *mut Version,
    fill: Fill<'_>,
    stamp: u64,
    prev: *mut Version,
    meta: MetaInit,
) {
    // SAFETY: caller contract: nobody else can reach `v` (out of every chain
    // and past the grace period), so its plain fields may be rewritten.
    unsafe {
        let (cap, flags) = ((*v).cap_words(), (*v).flags());
        init_mv(v, cap, fill, stamp, prev, flags, meta);
    }
}

/// Free an out-of-line version (not its chain). Used with `Guard::retire`.
///
/// # Safety
/// `v` must come from [`new_mv_version`] and be unreachable.
pub unsafe fn free_mv_version(v: *mut u8) {
    // SAFETY: caller contract: an out-of-line version, so its size is its
    // layout's, the size `new_mv_version` took from the pool.
    unsafe {
        debug_assert_eq!((*(v as *mut Version)).flags() & V_INLINE, 0);
        give_mv_version(v, (*(v as *mut Version)).layout().size() as u32);
    }
}

/// Give an out-of-line version of `size` bytes back to the pool (not its
/// chain): [`free_mv_version`] with the size already known. Used with
/// `Guard::retire_sized`.
///
/// # Safety
/// `v` must come from [`new_mv_version`], be unreachable, and be `size`
/// bytes long.
unsafe fn give_mv_version(v: *mut u8, size: u32) {
    // SAFETY: caller contract.
    unsafe { super::pool::give(v, size as usize) }
}

/// Whether a TID word `prev`, read by the atomic that dropped a GC hold,
/// says the hold was the last one on a record already unlinked: the
/// dropper must retire the record.
#[inline]
fn last_hold_of_unlinked(prev: u64) -> bool {
    prev >> GC_SHIFT == 1 && prev & LATEST == 0
}

/// ERMIA's multi-version record: the same head as [`Record`] (one word, one
/// newest-version pointer) laid out and used differently. The head word is
/// not a Silo TID but the chain's lock bit, the "still linked" bit, the
/// inline-version-free bit and a count of GC holds; the versions form a
/// CAS-installed chain of stamped versions ending in ⊥. Its own type, so
/// that single-version operations (Silo's TID lock, in-place install) can
/// not be applied to it, nor these to a single-version record.
#[repr(transparent)]
pub struct MvRecord(Record);

impl MvRecord {
    /// View a record as multi-version.
    ///
    /// # Safety
    /// `rec` was made by [`MvRecord::new_mv`] (a database uses one layout;
    /// the protocol that made the record is the one viewing it).
    #[inline]
    pub unsafe fn from_record(rec: &Record) -> &MvRecord {
        // SAFETY: `MvRecord` is `repr(transparent)` over `Record`; the layout
        // is the caller's promise.
        unsafe { &*(rec as *const Record as *const MvRecord) }
    }

    /// The record behind an index value.
    ///
    /// # Safety
    /// `v` is a value of an index whose records are multi-version, read
    /// while pinned (the record is not freed before the guard goes).
    #[inline]
    pub unsafe fn from_index<'g>(v: u64) -> &'g MvRecord {
        // SAFETY: the caller's contract.
        unsafe { &*(v as *const MvRecord) }
    }

    /// The record head, for bookkeeping that treats records as opaque
    /// (a transaction's last-read cache, pending unlinks).
    #[inline]
    pub(crate) fn as_record(&self) -> &Record {
        &self.0
    }

    /// The newest version (the chain's head).
    #[inline]
    pub fn newest(&self) -> *mut Version {
        self.0.newest()
    }

    /// Versions in the chain (tests, diagnostics).
    pub fn chain_len(&self) -> usize {
        self.0.chain_len()
    }

    /// Free a record (and its inline versions).
    ///
    /// # Safety
    /// As [`Record::free`].
    pub unsafe fn free(r: *mut MvRecord) {
        // SAFETY: forwarded.
        unsafe { Record::free(r as *mut u8) }
    }
}

impl MvRecord {
    /// A new multi-version record holding `val`, stamped `stamp` (its
    /// creator's id), over ⊥ (see the module documentation); with `meta`,
    /// its versions carry protocol metadata, initialised so. Both versions live in the record's
    /// allocation, right behind the head, so reading a record that was never
    /// updated costs no more cache misses than under Silo.
    pub fn new_mv(val: &[u8], stamp: u64, meta_init: Option<MetaInit>) -> *mut MvRecord {
        let meta = meta_init.is_some();
        let mi = meta_init.unwrap_or_default();
        let cap = words_for(val.len());
        let first = mv_size(cap, meta);
        let size = HEAD + first + mv_size(1, meta);
        let layout = Layout::from_size_align(size, 8).expect("record layout");
        // SAFETY: non-zero-size layout.
        let p = unsafe { alloc(layout) } as *mut Record;
        if p.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let m = if meta { V_META } else { 0 };
        // SAFETY: fresh allocation of HEAD + both versions' layouts.
        unsafe {
            let v = (p as *mut u8).add(HEAD) as *mut Version;
            let bot = (v as *mut u8).add(first) as *mut Version;
            init_mv(bot, 1, Fill::Value(None), 0, ptr::null_mut(), V_INLINE | m, mi);
            init_mv(v, cap, Fill::Value(Some(val)), stamp, bot, V_INLINE | V_BOTTOM | m, mi);
            ptr::write(
                p,
                Record {
                    tid: AtomicU64::new(LATEST),
                    data: AtomicPtr::new(v),
                },
            );
        }
        p as *mut MvRecord
    }

    /// Install `new` over `old` with one CAS on the head (ERMIA's update).
    /// Fails if the head is no longer `old`: another writer got there first.
    #[inline]
    pub(crate) fn cas_head(&self, old: *mut Version, new: *mut Version) -> bool {
        self.0
            .data
            .compare_exchange(old, new, Ordering::SeqCst, Ordering::Relaxed)
            .is_ok()
    }

    /// Lock the record's TID word (multi-version records: it orders the
    /// unlinking of a tombstone against writers over it; chain pruning
    /// takes no lock, see [`Record::prune_mv`]). Unlike [`Record::lock`] it
    /// keeps the other bits of the word (the GC hold count) intact.
    #[inline]
    pub fn mv_lock(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            let t = self.0.tid.load(Ordering::Relaxed);
            if t & LOCK == 0
                && self
                    .0
                    .tid
                    .compare_exchange_weak(t, t | LOCK, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return t;
            }
            crate::backoff::snooze(&mut spins);
        }
    }

    /// Release [`Record::mv_lock`].
    #[inline]
    pub fn mv_unlock(&self) {
        self.0.tid.fetch_and(!LOCK, Ordering::Release);
    }

    /// Whether the record is still linked from its index.
    #[inline]
    pub fn mv_linked(&self) -> bool {
        self.0.tid.load(Ordering::Acquire) & LATEST != 0
    }

    /// Count one queued GC entry that will visit this record.
    #[inline]
    pub fn gc_hold(&self) {
        self.0.tid.fetch_add(GC_ONE, Ordering::Relaxed);
    }

    /// Drop one GC hold. Returns true if the caller must retire the record:
    /// it was the last hold and the record has been unlinked.
    #[inline]
    pub fn gc_release(&self) -> bool {
        last_hold_of_unlinked(self.0.tid.fetch_sub(GC_ONE, Ordering::AcqRel))
    }

    /// Under [`Record::mv_lock`], after removing the record from its index:
    /// mark it unlinked and release the lock. Returns true if the caller
    /// must retire it (no GC entry holds it; otherwise the last one does).
    #[inline]
    pub fn mv_mark_unlinked(&self) -> bool {
        let prev = self.0.tid.fetch_and(!(LATEST | LOCK), Ordering::AcqRel);
        prev >> GC_SHIFT == 0
    }

    /// Set the head (its holder only: before publishing the record, when
    /// replacing its own uncommitted version, or rolling one back).
    #[inline]
    pub(crate) fn set_head(&self, v: *mut Version) {
        self.0.data.store(v, Ordering::Release);
    }

    /// ERMIA's version garbage collection for one chain: cut everything
    /// behind the first version at or below `from` that is committed with a
    /// stamp <= `watermark` (the oldest begin stamp of any running
    /// transaction). That version is visible to every running and future
    /// transaction, so none can reach past it. Cut versions are retired
    /// through the memory epoch (readers still walking them are pinned).
    ///
    /// Lock-free: two pruners of one chain (GC entries of two updates, run
    /// by two workers with different watermarks) may cut at different
    /// versions at once, and each link they cut, the first and every one
    /// below it, is taken with a swap. Exactly one of them gets each link,
    /// and whoever takes a link owns (retires) the version it points to, so
    /// every cut version is retired once. A pruner may still walk versions
    /// the other retired: it is pinned, so they are not freed under it.
    /// Writers never touch the links of installed versions (they swing the
    /// head), and readers never walk past the first version at or below the
    /// watermark, which no prune cuts.
    pub(crate) fn prune_mv(&self, from: *mut Version, watermark: u64, g: &Guard<'_>) -> Pruned {
        let mut v = from;
        let mut out = Pruned::default();
        while !v.is_null() {
            // SAFETY: chain versions are reclaimed only through the epoch.
            let vr = unsafe { &*v };
            let s = vr.stamp();
            if s & XID_FLAG == 0 && s <= watermark {
                let mut cut = vr.prev.swap(ptr::null_mut(), Ordering::AcqRel);
                while !cut.is_null() {
                    // SAFETY: we took the link to `cut`, so it is ours to
                    // retire, and not retired yet; we are pinned.
                    let c = unsafe { &*cut };
                    let next = c.prev.swap(ptr::null_mut(), Ordering::AcqRel);
                    let flags = c.flags();
                    if flags & V_INLINE == 0 {
                        // Its size now, while its line is in the cache, so
                        // the free does not read it again.
                        let size = c.layout().size() as u32;
                        // SAFETY: unreachable for new readers; old ones are pinned.
                        unsafe { g.retire_sized(cut as *mut u8, size, give_mv_version) };
                    } else if flags & V_BOTTOM != 0 {
                        out.first_inline = true;
                    }
                    out.versions += 1;
                    cut = next;
                }
                return out;
            }
            v = vr.prev();
        }
        out
    }

    /// The inline first version, cut by [`Record::prune_mv`] (which said
    /// `first_inline`), is past a memory-epoch grace period: no pinned
    /// reader can hold it any more. Let the next writer reuse it.
    #[inline]
    pub fn mark_inline_free(&self) {
        self.0.tid.fetch_or(INLINE_FREE, Ordering::Release);
    }

    /// Claim the inline first version for a new version of `len` bytes, if
    /// it is free ([`Record::mark_inline_free`]) and large enough. The
    /// claimer owns that memory until it publishes it with
    /// [`Record::cas_head`] or hands it back with [`Record::give_back_inline`].
    /// This is best-effort inlining in the manner of Cicada: a record
    /// updated now and then keeps its newest version next to its head (one
    /// cache miss per read instead of two, and no allocation), instead of
    /// ERMIA's always out-of-line versions.
    ///
    /// # Safety
    /// `this` must point to a live multi-version record (the caller is
    /// pinned), with the provenance of its whole allocation.
    #[inline]
    pub unsafe fn take_inline(this: *const MvRecord, len: usize) -> Option<*mut Version> {
        // SAFETY: caller contract.
        let r = unsafe { &*this };
        if r.0.tid.load(Ordering::Relaxed) & INLINE_FREE == 0 {
            return None;
        }
        let a = Record::inline_version(this as *mut Record);
        // SAFETY: the inline first version's capacity never changes.
        if !unsafe { &*a }.fits(len) {
            return None;
        }
        if r.0.tid.fetch_and(!INLINE_FREE, Ordering::Acquire) & INLINE_FREE == 0 {
            return None; // another writer claimed it first
        }
        Some(a)
    }

    /// [`Record::mark_inline_free`] and [`Record::gc_release`] in one
    /// atomic add: the GC's revisit of a record whose inline first version
    /// it cut holds the record until then. Returns what `gc_release`
    /// returns.
    #[inline]
    pub fn mark_inline_free_and_release(&self) -> bool {
        // The bit is clear: the version was in the chain until its cut (a
        // claim clears the bit, a new record starts with it clear), and only
        // this revisit sets it. So adding it cannot carry, and the GC count
        // (at least one: ours) cannot borrow.
        let prev = self
            .0
            .tid
            .fetch_add(INLINE_FREE.wrapping_sub(GC_ONE), Ordering::AcqRel);
        debug_assert_eq!(prev & INLINE_FREE, 0);
        debug_assert!(prev >> GC_SHIFT >= 1);
        last_hold_of_unlinked(prev)
    }

    /// Hand back an inline first version claimed with [`Record::take_inline`]
    /// and never published.
    #[inline]
    pub fn give_back_inline(&self) {
        self.0.tid.fetch_or(INLINE_FREE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoch::Epochs;

    /// A new version made from a committed base with a patch over it (the
    /// unpublished path: the base's words copied, the patch's bytes plain
    /// over them) holds the base with exactly the patch's bytes changed:
    /// every (at, length) in values of lengths around word and block
    /// boundaries, with and without SSN's metadata before the words.
    #[test]
    fn a_patched_new_version_holds_the_base_with_exactly_the_patch() {
        for meta in [None, Some([0, 99, 0])] {
            for len in [1usize, 7, 8, 9, 15, 16, 17, 63, 64, 65, 71] {
                let base_val: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
                let base = new_mv_version(Some(&base_val), 3, ptr::null_mut(), meta);
                for at in 0..len {
                    for n in [0, 1, 2, 7, 8, 9, 16, 17, len - at] {
                        if at + n > len {
                            continue;
                        }
                        let patch: Vec<u8> = (0..n).map(|i| (200 + i * 7) as u8).collect();
                        let fill = Fill::Patched {
                            base,
                            at,
                            bytes: &patch,
                        };
                        // SAFETY: the base is live and committed for the
                        // test's length; the patch lies inside it.
                        let v = unsafe { new_mv_version_fill(fill, 4, base, meta) };
                        let mut got = Vec::new();
                        // SAFETY: this test's versions, one thread.
                        unsafe { Version::read_into(v, &mut got) };
                        let mut want = base_val.clone();
                        want[at..at + n].copy_from_slice(&patch);
                        assert_eq!(got, want, "meta {meta:?}, len {len}, at {at}, n {n}");
                        // SAFETY: made above, unreachable.
                        unsafe { free_mv_version(v as *mut u8) };
                    }
                }
                // SAFETY: made above, unreachable now.
                unsafe { free_mv_version(base as *mut u8) };
            }
        }
    }

    #[test]
    fn bottom_chain_meta_holds_and_pruning() {
        let ep = Epochs::new(1, 10);
        let l = ep.register().unwrap();
        // Metadata words as a protocol might initialise them.
        const INIT: MetaInit = [0, 99, 0];
        for meta in [false, true] {
            let mi = meta.then_some(INIT);
            let g = l.pin();
            let r = MvRecord::new_mv(b"one", 5, mi);
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            let rec = unsafe { &*r };
            let v1 = rec.newest();
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            assert!(unsafe { &*v1 }.is_inline());
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            let bot = unsafe { &*v1 }.prev();
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            let b = unsafe { &*bot };
            assert!(b.is_tombstone() && b.is_inline() && b.stamp() == 0);
            assert_eq!(b.state(), MvState::Tombstone);
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            assert_eq!(unsafe { Version::meta(bot) }.is_some(), meta);
            let mut out = Vec::new();
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { Version::read_into(v1, &mut out) };
            assert_eq!(out, b"one");
            // SAFETY: this test's record, alive until the test frees it.
            assert_eq!(unsafe { &*v1 }.state(), MvState::Value);
            let x = new_mv_version(Some(b"x"), 6, v1, mi);
            assert!(!rec.cas_head(bot, x), "a CAS from a stale head fails");
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { free_mv_version(x as *mut u8) };
            let v2 = new_mv_version(Some(&[9u8; 40]), 7 | XID_FLAG, v1, mi);
            assert!(rec.cas_head(v1, v2));
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            if let Some(m) = unsafe { Version::meta(v2) } {
                assert_eq!(m.0[1].load(Ordering::Relaxed), 99);
                m.0[0].store(7, Ordering::Relaxed);
            }
            out.clear();
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { Version::read_into(v2, &mut out) };
            assert_eq!(out, vec![9u8; 40]);
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { Version::rewrite(v2, None) };
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            assert!(unsafe { &*v2 }.is_tombstone());
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { &*v2 }.set_stamp(7);
            assert_eq!(rec.chain_len(), 3);
            // GC holds and unlinking: with a hold pending, the unlinker
            // leaves the retiring to the last hold.
            rec.gc_hold();
            rec.mv_lock();
            assert!(!rec.mv_mark_unlinked(), "a hold is pending");
            assert!(!rec.mv_linked());
            assert!(rec.gc_release(), "last hold of an unlinked record");
            // Watermark 6: v1 (stamp 5) is the oldest anyone needs; ⊥ is cut
            // (inline: not freed separately).
            rec.mv_lock();
            let p = rec.prune_mv(v2, 6, &g);
            assert_eq!((p.versions, p.first_inline), (1, false));
            // Watermark 7: v2 is visible to all; v1 goes.
            let p = rec.prune_mv(v2, 7, &g);
            assert_eq!((p.versions, p.first_inline), (1, true));
            rec.mv_unlock();
            assert_eq!(rec.chain_len(), 1);
            // The cut first version is reusable once marked free: claimed
            // by one writer at a time, only for values that fit, handed back
            // if unused, then rebuilt in place in front of the head.
            // SAFETY: this test's record, alive until the test frees it.
            let taken = unsafe { MvRecord::take_inline(r, 3) };
            assert!(taken.is_none(), "not marked");
            rec.mark_inline_free();
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            assert!(unsafe { MvRecord::take_inline(r, 9) }.is_none(), "too big");
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            let a = unsafe { MvRecord::take_inline(r, 3) }.expect("free and fits");
            assert_eq!(a, v1, "the inline first version");
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            assert!(unsafe { MvRecord::take_inline(r, 3) }.is_none(), "claimed");
            rec.give_back_inline();
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            let a = unsafe { MvRecord::take_inline(r, 3) }.expect("handed back");
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { reinit_inline(a, Fill::Value(Some(b"two")), 8 | XID_FLAG, v2, INIT) };
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            if let Some(m) = unsafe { Version::meta(a) } {
                assert_eq!(m.0[1].load(Ordering::Relaxed), 99);
                assert_eq!(m.0[2].load(Ordering::Relaxed), 0);
            }
            assert!(rec.cas_head(v2, a));
            assert_eq!(rec.chain_len(), 2);
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            assert!(!unsafe { &*a }.is_tombstone() && unsafe { &*a }.is_first_inline());
            out.clear();
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { Version::read_into(a, &mut out) };
            assert_eq!(out, b"two");
            drop(g);
            // SAFETY: this test's record and versions: alive until the test frees them, one thread.
            unsafe { MvRecord::free(r) };
            ep.tick();
            ep.tick();
            l.collect();
        }
    }
}

//! A thread's pool of recycled out-of-line version blocks.
//!
//! The multi-version protocols (`si`, `ssn`, `ems`, the version-layout
//! study) allocate a version for every update. Garbage collection cuts it
//! from its chain some transactions later, and the memory epoch frees it two
//! epochs after that. Freed to the general allocator, such a block goes to
//! the back of a free list, and the allocator hands out blocks freed long
//! ago: cold. It also reads the block's first word (the free-list link)
//! before it returns it, so the next update stalls on a cache miss before it
//! has written a byte. In si's TPC-C profile (2 threads, W = 2) that one
//! load was 7.8% of the workers' samples.
//!
//! The pool keeps freed blocks as pointers on a per-thread stack, one stack
//! for each exact block size in use. Handing a block out reads only the
//! stack, which stays in the cache. It is last in, first out, so the block
//! handed out is the one freed most recently (warm from its free). Each hand
//! out also prefetches the next block on the stack, so that the next update
//! finds its block in the cache too. Silo's allocator keeps per-core free
//! lists for the same reason; ERMIA recycles versions through its own
//! per-thread allocator.
//!
//! What the pool holds is bounded: [`POOL_BYTES`] per thread, over at most
//! [`CLASSES`] block sizes. Blocks beyond the bound, and blocks of a size
//! that finds no class, go back to the allocator. A thread that never
//! allocated from the pool (the epoch ticker collecting orphans) keeps
//! nothing. A thread's pool returns its blocks to the allocator when the
//! thread exits.
//!
//! BOHM keeps its own recycler (`cc::bohm::Recycler`). Its versions are
//! typed, with a value buffer each, and are reused per table by the CC
//! thread that cut them. They are not raw blocks freed through the
//! memory epoch by any worker, so the two are not merged.

use std::alloc::{alloc, dealloc, Layout};
use std::cell::RefCell;

use super::prefetch_bytes;

/// Distinct block sizes one thread pools. A TPC-C run updates six tables,
/// each with one row size.
pub(crate) const CLASSES: usize = 8;

/// Bytes of free blocks one thread keeps at most.
pub(crate) const POOL_BYTES: usize = 8 << 20;

/// Blocks are allocated with this alignment (a version's).
const ALIGN: usize = 8;

struct Class {
    /// Block size in bytes; 0 for a class not in use yet.
    size: usize,
    /// Free blocks of `size` bytes, the most recently freed last.
    free: Vec<*mut u8>,
}

struct Pool {
    classes: [Class; CLASSES],
    /// Bytes held in all classes.
    held: usize,
    /// This thread allocated from the pool: only such threads keep blocks.
    allocates: bool,
}

impl Pool {
    fn class(&mut self, size: usize) -> Option<&mut Class> {
        self.classes.iter_mut().find(|c| c.size == size)
    }

    /// The class of `size`, claiming an unused one if there is none yet.
    fn class_or_claim(&mut self, size: usize) -> Option<&mut Class> {
        let i = self
            .classes
            .iter()
            .position(|c| c.size == size)
            .or_else(|| self.classes.iter().position(|c| c.size == 0))?;
        let c = &mut self.classes[i];
        c.size = size;
        Some(c)
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for c in &mut self.classes {
            for &p in &c.free {
                // SAFETY: every pooled block came from `alloc` with this
                // layout (its class's size) and is owned by the pool alone.
                unsafe { dealloc(p, Layout::from_size_align_unchecked(c.size, ALIGN)) };
            }
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool {
        classes: std::array::from_fn(|_| Class { size: 0, free: Vec::new() }),
        held: 0,
        allocates: false,
    });
}

/// A block of `size` bytes (8-aligned) for a new version: a pooled one if
/// this thread has one of that size, otherwise a fresh allocation.
/// Aborts through `handle_alloc_error` when memory runs out.
#[inline]
pub(crate) fn take(size: usize) -> *mut u8 {
    let pooled = POOL
        .try_with(|p| {
            let mut p = p.borrow_mut();
            p.allocates = true;
            let c = p.class(size)?;
            let b = c.free.pop()?;
            if let Some(&next) = c.free.last() {
                prefetch_bytes(next, size);
            }
            p.held -= size;
            Some(b)
        })
        .ok()
        .flatten();
    if let Some(b) = pooled {
        return b;
    }
    let layout = Layout::from_size_align(size, ALIGN).expect("version layout");
    // SAFETY: versions are never zero-sized (a header at least).
    let b = unsafe { alloc(layout) };
    if b.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    b
}

/// Give back a block of `size` bytes that [`take`] handed out.
///
/// # Safety
/// `b` came from [`take`] with the same `size`, is unreachable, and is
/// given back once.
#[inline]
pub(crate) unsafe fn give(b: *mut u8, size: usize) {
    let kept = POOL
        .try_with(|p| {
            let mut p = p.borrow_mut();
            if !p.allocates || p.held + size > POOL_BYTES {
                return false;
            }
            let Some(c) = p.class_or_claim(size) else {
                return false;
            };
            c.free.push(b);
            p.held += size;
            true
        })
        .unwrap_or(false);
    if !kept {
        // SAFETY: caller contract: allocated by `take` (or `alloc`) with
        // this layout.
        unsafe { dealloc(b, Layout::from_size_align_unchecked(size, ALIGN)) };
    }
}

/// Bytes this thread's pool holds (for tests).
#[cfg(test)]
pub(crate) fn held() -> usize {
    POOL.with(|p| p.borrow().held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_block_is_taken_again_last_in_first_out() {
        std::thread::spawn(|| {
            let a = take(64);
            let b = take(64);
            let c = take(120);
            // SAFETY: each came from `take` with that size, given once.
            unsafe {
                give(a, 64);
                give(b, 64);
                give(c, 120);
            }
            assert_eq!(held(), 64 + 64 + 120);
            assert_eq!(take(64), b);
            assert_eq!(take(64), a);
            assert_eq!(take(120), c);
            assert_eq!(held(), 0);
            for p in [a, b] {
                // SAFETY: as above.
                unsafe { give(p, 64) };
            }
            // SAFETY: as above.
            unsafe { give(c, 120) };
            // The thread's exit gives the three back to the allocator
            // (Miri's leak check sees it).
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_that_never_took_keeps_nothing() {
        let b = std::thread::spawn(|| take(48) as usize).join().unwrap();
        std::thread::spawn(move || {
            // SAFETY: from `take` with this size, given once.
            unsafe { give(b as *mut u8, 48) };
            assert_eq!(held(), 0);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn the_bound_and_the_classes_send_the_rest_to_the_allocator() {
        std::thread::spawn(|| {
            // More sizes than classes: the extra sizes are not pooled.
            let blocks: Vec<(usize, *mut u8)> = (1..=CLASSES + 3)
                .map(|i| (i * 16, take(i * 16)))
                .collect();
            for &(s, b) in &blocks {
                // SAFETY: from `take` with size `s`, given once.
                unsafe { give(b, s) };
            }
            let pooled: usize = (1..=CLASSES).map(|i| i * 16).sum();
            assert_eq!(held(), pooled);
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            // A block that would pass the byte bound is not pooled.
            let half = POOL_BYTES / 2 + 8;
            let (a, b) = (take(half), take(half));
            // SAFETY: from `take` with size `half`, given once each.
            unsafe {
                give(a, half);
                give(b, half);
            }
            assert_eq!(held(), half);
        })
        .join()
        .unwrap();
    }
}

//! The process's allocator: mimalloc, asked the way its fast path wants.
//!
//! `mimalloc::MiMalloc` passes every request to `mi_malloc_aligned`, whatever
//! its alignment. In mimalloc 3, when the size class's page has no free
//! block left, an aligned request whose size is not a power of two falls to
//! the over-allocating path: it asks for `size + align - 1` bytes (often the
//! next size class, so memory is wasted) and walks the generic path. Records,
//! versions and keys are 8-aligned with sizes that are seldom powers of two,
//! so an insert-heavy run (TPC-C's NewOrder) hit that path on every page
//! refill. A plain `mi_malloc` already returns blocks aligned to
//! `min(16, size)` bytes, so requests whose alignment is at most 16 and at
//! most their size go there; the rest keep the aligned entry points.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys as mi;

/// mimalloc's guaranteed alignment for a plain allocation (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

pub struct Mimalloc;

#[inline(always)]
fn plain(layout: &Layout) -> bool {
    layout.align() <= PLAIN_ALIGN && layout.align() <= layout.size()
}

// SAFETY: every entry point forwards to mimalloc, which returns blocks of at
// least the requested size, aligned to `min(16, size)` on the plain path (the
// condition `plain` checks) and to the requested alignment on the aligned
// path; `mi_free` and `mi_realloc` accept blocks from either path.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(&layout) {
            // SAFETY: `layout.size()` is nonzero (align <= size, align >= 1).
            unsafe { mi::mi_malloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's contract for `alloc` is passed on.
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(&layout) {
            // SAFETY: as for `alloc`.
            unsafe { mi::mi_zalloc(layout.size()).cast() }
        } else {
            // SAFETY: the caller's contract for `alloc_zeroed` is passed on.
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract), and
        // mimalloc frees aligned and plain blocks alike.
        unsafe { mi::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN && layout.align() <= new_size {
            // SAFETY: `ptr` came from this allocator; the new block keeps
            // `min(16, new_size)` alignment, which covers `layout.align()`.
            unsafe { mi::mi_realloc(ptr.cast(), new_size).cast() }
        } else {
            // SAFETY: the caller's contract for `realloc` is passed on.
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

/// Silo's pre-faulted memory (its allocator faults its arenas in at start;
/// the C++ Silo's `--numa-memory`): have mimalloc never give freed memory
/// back to the OS, then allocate `bytes` in large blocks, write every 4 KiB
/// page (from several threads) so that the kernel faults it in now, and free
/// the blocks. Their memory stays resident in mimalloc's arenas (which it
/// backs with transparent huge pages where the kernel allows), and the
/// records, versions and index nodes of a run are carved from it: no page
/// fault, and no 2 MiB zeroing, on a worker's insert. Returns the time the
/// faulting took, or an error if the memory could not all be allocated (a
/// run that asked for pre-faulted memory must not go on without it
/// unsaid).
pub fn prefault(bytes: usize) -> Result<std::time::Duration, String> {
    const BLOCK: usize = 1 << 20;
    let start = std::time::Instant::now();
    // SAFETY: setting an option is always allowed; -1 is "never purge".
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    let n = bytes.div_ceil(BLOCK);
    let blocks: Vec<usize> = (0..n)
        .map(|_| {
            // SAFETY: a plain allocation of a nonzero size, freed below.
            unsafe { mi::mi_malloc(BLOCK) as usize }
        })
        .filter(|&p| p != 0)
        .collect();
    if blocks.len() < n {
        for &b in &blocks {
            // SAFETY: each block came from `mi_malloc` above, freed once.
            unsafe { mi::mi_free(b as *mut _) };
        }
        return Err(format!(
            "could allocate only {} of the {} MiB to pre-fault",
            blocks.len() * (BLOCK >> 20),
            n * (BLOCK >> 20)
        ));
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::thread::scope(|s| {
        for part in blocks.chunks(blocks.len().div_ceil(threads).max(1)) {
            s.spawn(move || {
                for &b in part {
                    let mut p = b;
                    while p < b + BLOCK {
                        // SAFETY: `p` is inside a live block of `BLOCK`
                        // bytes that this thread alone writes.
                        unsafe { std::ptr::write_volatile(p as *mut u8, 0) };
                        p += 4096;
                    }
                }
            });
        }
    });
    for b in blocks {
        // SAFETY: each block came from `mi_malloc` above and is freed once.
        unsafe { mi::mi_free(b as *mut _) };
    }
    Ok(start.elapsed())
}

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_e`.
const MI_OPTION_PURGE_DELAY: libc::c_int = 15;

extern "C" {
    // mimalloc.h: `void mi_option_set(mi_option_t option, long value)`; not
    // among libmimalloc-sys's bindings without its `extended` feature.
    fn mi_option_set(option: libc::c_int, value: libc::c_long);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size and alignment the engine asks for comes back aligned,
    /// usable to its last byte, and survives growth and shrinking.
    #[test]
    fn blocks_are_aligned_and_usable() {
        let a = Mimalloc;
        for align in [1usize, 2, 4, 8, 16, 32, 64, 4096] {
            for size in [1usize, 3, 8, 15, 16, 24, 72, 100, 344, 1000, 5000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: nonzero size; every block is freed with its layout.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    p.write_bytes(0xAB, size);
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                    assert!(std::slice::from_raw_parts(q, size)
                        .iter()
                        .all(|&b| b == 0xAB));
                    let grown = Layout::from_size_align(size * 3, align).unwrap();
                    let r = a.realloc(q, grown, size);
                    assert_eq!(r as usize % align, 0);
                    assert!(std::slice::from_raw_parts(r, size)
                        .iter()
                        .all(|&b| b == 0xAB));
                    a.dealloc(r, layout);
                    a.dealloc(z, layout);
                }
            }
        }
    }
}

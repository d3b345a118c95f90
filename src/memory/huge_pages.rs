//! [`HugePageAllocator`]: megabyte buffers as their own huge-page mappings.

/// kin's allocator: the system's, except that an allocation of [`HUGE_FROM`] bytes or more is
/// its own anonymous mapping, 2 MiB aligned and marked for transparent huge pages. A pasted
/// image is megabytes on one line, read into a buffer the request body then shares; other huge
/// messages are also parsed into buffers of their own. Each is touched once, front to back,
/// and on 4 KiB pages a fresh 7 MB buffer cost ~1,700 page faults (~3.5 ms on the 2-core VM
/// kin is measured on), against 4 faults on 2 MiB pages (~0.5 ms). The malloc heap's large
/// chunks are not 2 MiB aligned, which is why the mapping is made here rather than advised
/// after `malloc`. Where huge pages are off (or the kernel says no) the mapping simply takes
/// small pages.
pub struct HugePageAllocator;

/// Where an allocation becomes its own mapping.
const HUGE_FROM: usize = 4 << 20;
/// The huge page size (x86-64, arm64 with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

fn is_huge(layout: std::alloc::Layout) -> bool {
    cfg!(target_os = "linux") && layout.size() >= HUGE_FROM && layout.align() <= HUGE_PAGE
}

/// A mapping's length for `size` bytes: whole huge pages.
fn mapped_len(size: usize) -> usize {
    size.div_ceil(HUGE_PAGE) * HUGE_PAGE
}

#[cfg(target_os = "linux")]
mod huge {
    use super::{mapped_len, HUGE_PAGE};
    use libc::{c_void, MAP_ANONYMOUS, MAP_FAILED, MAP_PRIVATE, PROT_READ, PROT_WRITE};

    /// A new zeroed mapping of `len` bytes (whole huge pages) at a 2 MiB boundary, marked for
    /// huge pages; null if the system has no room.
    fn aligned_mapping(len: usize) -> *mut u8 {
        // Over-map by one huge page and cut the ends off to get the alignment.
        let Some(over) = len.checked_add(HUGE_PAGE) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a new private anonymous mapping; no existing memory is named.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                over,
                PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == MAP_FAILED {
            return std::ptr::null_mut();
        }
        let start = raw as usize;
        let aligned = start.next_multiple_of(HUGE_PAGE);
        let tail = aligned + len;
        // SAFETY: the ends cut off and the range advised lie inside the mapping just made,
        // which nothing else knows of.
        unsafe {
            if aligned > start {
                libc::munmap(raw, aligned - start);
            }
            if start + over > tail {
                libc::munmap(tail as *mut c_void, start + over - tail);
            }
            libc::madvise(aligned as *mut c_void, len, libc::MADV_HUGEPAGE);
        }
        aligned as *mut u8
    }

    /// A mapping for `size` bytes, or null.
    pub(super) fn map(size: usize) -> *mut u8 {
        aligned_mapping(mapped_len(size))
    }

    /// Unmaps what [`map`] returned for `size` bytes.
    pub(super) unsafe fn unmap(ptr: *mut u8, size: usize) {
        // SAFETY: the caller passes a mapping of ours and its size; it is not used again.
        unsafe { libc::munmap(ptr.cast(), mapped_len(size)) };
    }

    /// Resizes a mapping of ours: in place when the address space after it is free, else
    /// moved (its pages, not copies of them) to a new 2 MiB boundary. Null if neither works.
    pub(super) unsafe fn resize(ptr: *mut u8, old: usize, new: usize) -> *mut u8 {
        let (old_len, new_len) = (mapped_len(old), mapped_len(new));
        if old_len == new_len {
            return ptr;
        }
        // SAFETY: resizes our own mapping without letting it move.
        if unsafe { libc::mremap(ptr.cast(), old_len, new_len, 0) } == ptr.cast() {
            return ptr;
        }
        let target = aligned_mapping(new_len);
        if target.is_null() {
            return target;
        }
        // SAFETY: moves our mapping onto the one just made for it (which it replaces); the
        // old address is not used again.
        let moved = unsafe {
            libc::mremap(
                ptr.cast(),
                old_len,
                new_len,
                libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
                target,
            )
        };
        if moved == MAP_FAILED {
            // SAFETY: the new mapping is ours and unused; the old one stays as it was.
            unsafe { libc::munmap(target.cast(), new_len) };
            return std::ptr::null_mut();
        }
        moved.cast()
    }
}

#[cfg(not(target_os = "linux"))]
mod huge {
    pub(super) fn map(_: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
    pub(super) unsafe fn unmap(_: *mut u8, _: usize) {}
    pub(super) unsafe fn resize(_: *mut u8, _: usize, _: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
}

// SAFETY: small allocations are the system allocator's own; large ones are mappings that
// satisfy the layout (2 MiB alignment covers every alignment `is_huge` admits) and are only
// released by `dealloc`/`realloc` with the layout they were made for.
//
// Each method is kept out of line, as the system allocator's are: inlined into every
// allocation and drop in the program, the size test would grow code everywhere and change
// what else the compiler inlines.
unsafe impl std::alloc::GlobalAlloc for HugePageAllocator {
    #[inline(never)]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        match is_huge(layout) {
            true => huge::map(layout.size()),
            // SAFETY: the caller's contract is the system allocator's.
            false => unsafe { std::alloc::System.alloc(layout) },
        }
    }

    #[inline(never)]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        match is_huge(layout) {
            // A fresh anonymous mapping reads as zeros.
            true => huge::map(layout.size()),
            // SAFETY: the caller's contract is the system allocator's.
            false => unsafe { std::alloc::System.alloc_zeroed(layout) },
        }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        match is_huge(layout) {
            // SAFETY: `ptr` came from `alloc` with this layout, so it is our mapping.
            true => unsafe { huge::unmap(ptr, layout.size()) },
            // SAFETY: the caller's contract is the system allocator's.
            false => unsafe { std::alloc::System.dealloc(ptr, layout) },
        }
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `layout.align()` is a valid alignment and the caller guarantees `new_size`
        // does not overflow it when rounded up.
        let new =
            unsafe { std::alloc::Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_huge(layout), is_huge(new)) {
            // SAFETY: the caller's contract is the system allocator's.
            (false, false) => return unsafe { std::alloc::System.realloc(ptr, layout, new_size) },
            // SAFETY: `ptr` is our mapping of `layout.size()` bytes.
            (true, true) => return unsafe { huge::resize(ptr, layout.size(), new_size) },
            _ => {}
        }
        // Between the two kinds: copy over.
        // SAFETY: `new` has the non-zero size the caller guarantees; the copy covers what
        // both blocks hold; the old block is released with its own layout, not used again.
        unsafe {
            let moved = self.alloc(new);
            if !moved.is_null() {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            moved
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout};

    #[test]
    #[cfg(target_os = "linux")]
    fn large_blocks_are_aligned_mappings_that_grow_shrink_and_keep_their_bytes() {
        let allocator = HugePageAllocator;
        let layout = Layout::from_size_align(HUGE_FROM + 3, 8).unwrap();
        unsafe {
            let block = allocator.alloc_zeroed(layout);
            assert!(!block.is_null());
            assert_eq!(block as usize % HUGE_PAGE, 0, "2 MiB aligned");
            assert!(std::slice::from_raw_parts(block, layout.size())
                .iter()
                .all(|&b| b == 0));
            block.write_bytes(7, layout.size());
            // Grown (in place or moved), then shrunk back below the line into malloc's heap.
            let grown = allocator.realloc(block, layout, 3 * HUGE_FROM);
            assert!(!grown.is_null());
            let big = Layout::from_size_align(3 * HUGE_FROM, 8).unwrap();
            assert!(std::slice::from_raw_parts(grown, layout.size())
                .iter()
                .all(|&b| b == 7));
            let small = allocator.realloc(grown, big, 100);
            assert!(std::slice::from_raw_parts(small, 100)
                .iter()
                .all(|&b| b == 7));
            // And from the heap up into a mapping.
            let up = allocator.realloc(small, Layout::from_size_align(100, 8).unwrap(), HUGE_FROM);
            assert_eq!(up as usize % HUGE_PAGE, 0);
            assert!(std::slice::from_raw_parts(up, 100).iter().all(|&b| b == 7));
            allocator.dealloc(up, Layout::from_size_align(HUGE_FROM, 8).unwrap());
        }
    }

    /// With the address space after a block taken, growing it must move its pages elsewhere.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_block_that_cannot_grow_in_place_moves_to_a_new_aligned_mapping() {
        let allocator = HugePageAllocator;
        let layout = Layout::from_size_align(HUGE_FROM, 8).unwrap();
        unsafe {
            let block = allocator.alloc(layout);
            assert!(!block.is_null());
            block.write_bytes(9, layout.size());
            let after = block.add(mapped_len(layout.size()));
            let blocker = libc::mmap(
                after.cast(),
                HUGE_PAGE,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            );
            assert_eq!(
                blocker,
                after.cast(),
                "the page after the block is free to take"
            );
            let grown = allocator.realloc(block, layout, 2 * HUGE_FROM);
            assert!(!grown.is_null());
            assert_ne!(grown, block, "moved");
            assert_eq!(grown as usize % HUGE_PAGE, 0, "2 MiB aligned");
            assert!(std::slice::from_raw_parts(grown, layout.size())
                .iter()
                .all(|&b| b == 9));
            grown.add(2 * HUGE_FROM - 1).write(1);
            allocator.dealloc(grown, Layout::from_size_align(2 * HUGE_FROM, 8).unwrap());
            libc::munmap(blocker, HUGE_PAGE);
        }
    }
}

//! How kin's process holds memory: large buffers on huge pages ([`HugePageAllocator`]), and
//! after a huge message (a pasted image, a prompt of a million parts) the heap it used
//! returned to the system rather than kept resident.

mod huge_pages;

pub use huge_pages::HugePageAllocator;

/// Gives memory freed since back to the system. Parsing one huge line (say a prompt of a
/// million parts that is then refused) leaves hundreds of megabytes free but still resident in
/// glibc's heap; they would count against kin for as long as it runs.
pub(crate) fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

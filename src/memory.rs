//! Giving the heap of a huge message (a pasted image, a prompt of a million parts) back to the
//! system rather than keeping it resident.

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

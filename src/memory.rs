//! How kin's process uses glibc's allocator: megabyte payloads (a pasted image, a long line
//! from the editor) get their own mappings, and memory freed after a huge message goes back to
//! the system.

/// Blocks at least this large are mapped on their own. glibc's default threshold starts at
/// 128 KiB but rises to the size of each large block freed, so after the first pasted image
/// every later one came from the heap: each growth of a buffer then copied it, and the trim
/// after a large line unmapped the heap pages the next payload faulted back in.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAP_FROM_BYTES: libc::c_int = 1024 * 1024;

/// Sets the policy; call once at start, before other threads allocate.
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; a fixed threshold also turns off
    // glibc's dynamic adjustment. It takes no pointers.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MAP_FROM_BYTES);
    }
}

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

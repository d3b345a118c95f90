//! The one way kin takes a `std` mutex or read-write lock, and runs a short blocking read from
//! synchronous code on the runtime.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Locks `mutex`, taking it over even when a thread panicked while holding it: kin's guarded
/// data stays consistent between statements, and a panic is already reported where it happened.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads `lock`, past a panicked writer as [`lock`] does.
pub(crate) fn read_lock<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

/// Writes `lock`, past a panicked holder as [`lock`] does.
pub(crate) fn write_lock<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

/// Runs the blocking `work` (a bounded file read) from synchronous code without holding up the
/// runtime's other tasks: on a multi-threaded runtime this worker hands them to another first
/// (`block_in_place`); elsewhere (no runtime, or a single-threaded test one) it just runs.
pub(crate) fn off_the_workers<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

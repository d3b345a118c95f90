//! The one way kin takes a `std` mutex.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking it over even when a thread panicked while holding it: kin's guarded
/// data stays consistent between statements, and a panic is already reported where it happened.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

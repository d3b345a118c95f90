//! One writer per session across processes. The process that has a session's log open for
//! writing holds an advisory lock (`flock`, exclusive) on the file for as long as it is open:
//! a top-level session while it is live, a continuable child for one activation. Another
//! process that tries to take it is told the session is in use (with the holder's pid when
//! `/proc/locks` shows it) and may still read the file, but never writes or truncates it. A
//! process that dies loses its locks with it, so a crash leaves nothing to clean up.
//!
//! Within one process the lock is shared: every handle on the same file is one entry in a
//! process-wide registry, so a child's activation and the log it writes through never lock
//! each other out. Keeping one writer per session inside a process is the live-session
//! registry's job, not this lock's.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::error::StoreError;
use crate::sync::lock;

/// A held session lock; the lock is released when the last handle on it in this process is
/// dropped.
#[derive(Clone)]
pub(crate) struct SessionLock {
    _held: Arc<Held>,
}

struct Held {
    path: PathBuf,
    /// `None` only while being dropped.
    flock: Option<Flock<File>>,
}

type Registry = HashMap<PathBuf, Weak<Held>>;

fn registry() -> MutexGuard<'static, Registry> {
    static HELD: OnceLock<Mutex<Registry>> = OnceLock::new();
    lock(HELD.get_or_init(Default::default))
}

impl Drop for Held {
    fn drop(&mut self) {
        // Unlocked under the registry's mutex: a new `acquire` of this file waits for it.
        let mut held = registry();
        self.flock.take();
        if held.get(&self.path).is_some_and(|w| w.strong_count() == 0) {
            held.remove(&self.path);
        }
    }
}

impl SessionLock {
    /// Takes the lock on session `id`'s file at `path`, or shares the one this process holds.
    /// `NotFound` if the file does not exist (or was deleted while it was being locked);
    /// `Locked` if another process holds it.
    pub(crate) fn acquire(path: &Path, id: &str) -> Result<Self, StoreError> {
        Self::acquire_with(path, || lock_file(path, id))
    }

    /// [`SessionLock::acquire`] for the file this process has just created at `path`, open
    /// as `file`: that file is locked (through a second handle), with no new open of the path
    /// and no check that the path still names it.
    pub(crate) fn acquire_created(path: &Path, id: &str, file: &File) -> Result<Self, StoreError> {
        Self::acquire_with(path, || {
            let handle = file.try_clone().map_err(io_error(path, id))?;
            flock(handle, path, id)
        })
    }

    fn acquire_with(
        path: &Path,
        take: impl FnOnce() -> Result<Flock<File>, StoreError>,
    ) -> Result<Self, StoreError> {
        let mut held = loop {
            let held = registry();
            match held.get(path).map(Weak::upgrade) {
                Some(Some(live)) => return Ok(Self { _held: live }),
                // Its last handle is being dropped: wait until it is unlocked.
                Some(None) => {
                    drop(held);
                    std::thread::yield_now();
                }
                None => break held,
            }
        };
        let live = Arc::new(Held {
            path: path.to_owned(),
            flock: Some(take()?),
        });
        held.insert(path.to_owned(), Arc::downgrade(&live));
        Ok(Self { _held: live })
    }
}

/// Whether some process (this one included) holds the lock on the session file at `path`,
/// as `/proc/locks` shows it; takes no lock itself. False where that is not available.
pub(crate) fn is_locked(path: &Path) -> bool {
    File::open(path).is_ok_and(|file| holder_pid(&file).is_some())
}

fn io_error<'a>(path: &'a Path, id: &'a str) -> impl Fn(io::Error) -> StoreError + 'a {
    move |source: io::Error| match source.kind() {
        io::ErrorKind::NotFound => StoreError::NotFound { id: id.to_owned() },
        _ => StoreError::Io {
            op: "locking the session log",
            path: path.to_owned(),
            source,
        },
    }
}

fn lock_file(path: &Path, id: &str) -> Result<Flock<File>, StoreError> {
    let file = File::open(path).map_err(io_error(path, id))?;
    let flock = flock(file, path, id)?;
    // Deleted (or replaced) between the open and the lock: this handle is not the session.
    if !same_file(path, &flock).map_err(io_error(path, id))? {
        return Err(StoreError::NotFound { id: id.to_owned() });
    }
    Ok(flock)
}

/// Takes the exclusive lock on `file` (the session `id` at `path`) without waiting.
fn flock(file: File, path: &Path, id: &str) -> Result<Flock<File>, StoreError> {
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(flock) => Ok(flock),
        Err((file, Errno::EWOULDBLOCK)) => Err(StoreError::Locked {
            id: id.to_owned(),
            pid: holder_pid(&file),
        }),
        Err((_, errno)) => Err(io_error(path, id)(io::Error::from(errno))),
    }
}

fn same_file(path: &Path, file: &File) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let opened = file.metadata()?;
    match std::fs::metadata(path) {
        Ok(named) => Ok(named.dev() == opened.dev() && named.ino() == opened.ino()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error),
    }
}

/// The pid of the process holding a `flock` on `file`, as `/proc/locks` shows it (Linux);
/// `None` where that is not available.
fn holder_pid(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = file.metadata().ok()?;
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    find_holder(&locks, meta.dev(), meta.ino())
}

/// The pid in the first `FLOCK` line of a `/proc/locks` text for inode `ino` of device `dev`
/// ("1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF", device as hex major:minor).
fn find_holder(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let dev = dev as libc::dev_t;
    let (major, minor) = (libc::major(dev) as u64, libc::minor(dev) as u64);
    let mut inode_only = None;
    for line in locks.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // Waiters are shown as "1: -> FLOCK ..."; only holders count.
        if fields.get(1) != Some(&"FLOCK") {
            continue;
        }
        let (Some(pid), Some(id)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        let mut parts = id.rsplitn(3, ':');
        let (Some(found_ino), Some(found_minor), Some(found_major)) =
            (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if found_ino.parse::<u64>().ok() != Some(ino) {
            continue;
        }
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let hex = |text: &str| u64::from_str_radix(text, 16).ok();
        let device_matches = hex(found_major) == Some(major) && hex(found_minor) == Some(minor);
        if device_matches {
            return Some(pid);
        }
        // Some file systems (overlays) show another device than `stat` does.
        inode_only.get_or_insert(pid);
    }
    inode_only
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_found_by_device_and_inode() {
        let dev = libc::makedev(0xfd, 0x01);
        let locks = "1: FLOCK  ADVISORY  WRITE 111 fd:01:99 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 222 fd:01:42 0 EOF\n\
                     3: POSIX  ADVISORY  WRITE 333 fd:01:42 0 EOF\n\
                     4: FLOCK  ADVISORY  WRITE 444 08:02:42 0 EOF\n\
                     5: FLOCK  ADVISORY  WRITE 555 fd:01:42 0 EOF\n";
        assert_eq!(find_holder(locks, dev, 42), Some(555));
        assert_eq!(find_holder(locks, libc::makedev(7, 7), 42), Some(444));
        assert_eq!(find_holder(locks, dev, 7), None);
        assert_eq!(find_holder("garbage\n1: FLOCK\n", dev, 42), None);
    }

    #[test]
    fn handles_in_one_process_share_the_lock_and_release_it_with_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "x\n").unwrap();
        let first = SessionLock::acquire(&path, "s").unwrap();
        let second = SessionLock::acquire(&path, "s").unwrap();
        // Another open file description (as another process has) is refused meanwhile.
        let other = || Flock::lock(File::open(&path).unwrap(), FlockArg::LockExclusiveNonblock);
        let error = other().err().map(|(_, errno)| errno);
        assert_eq!(error, Some(Errno::EWOULDBLOCK));
        drop(first);
        assert!(other().is_err(), "still held by the second handle");
        drop(second);
        assert!(other().is_ok(), "released with the last handle");
    }

    #[test]
    fn a_missing_file_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let error = SessionLock::acquire(&dir.path().join("none.jsonl"), "none")
            .err()
            .unwrap();
        assert!(matches!(error, StoreError::NotFound { .. }), "{error}");
    }
}

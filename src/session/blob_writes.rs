//! Blob files written on a background thread once their name is known: a prompt's image is
//! hashed at once (the log line names it) and the model request goes out while the file is
//! still being written. Whoever reads a blob that is still being written waits for it; the
//! prompt that stored it collects a failure with [`take_failed`]; kin waits for all of them
//! before it exits ([`wait_all`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};

use crate::sync::lock;

#[derive(Default)]
struct Writes {
    /// Target paths being written (one entry per write).
    running: Vec<PathBuf>,
    /// Writes that failed, with their error, until [`take_failed`] takes them.
    failed: Vec<(PathBuf, String)>,
}

static WRITES: Mutex<Writes> = Mutex::new(Writes {
    running: Vec::new(),
    failed: Vec::new(),
});
/// Signalled whenever a write ends.
static ENDED: Condvar = Condvar::new();

/// Ends the write of `path` when dropped: a writer that panics still ends, so nobody waits
/// for it forever.
struct Ending {
    path: PathBuf,
    error: Option<String>,
}

impl Ending {
    /// Ends the write with its result.
    fn with(mut self, result: io::Result<()>) {
        self.error = result.err().map(|e| e.to_string());
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        let mut writes = lock(&WRITES);
        if let Some(at) = writes.running.iter().position(|p| *p == self.path) {
            writes.running.swap_remove(at);
        }
        if let Some(error) = self.error.take() {
            writes.failed.push((self.path.clone(), error));
        }
        ENDED.notify_all();
    }
}

/// Runs `write` (which makes the file `path`) on a background thread of its own: at normal
/// priority, copying the megabytes into the page cache took a core from the model request
/// being built and sent beside it (~1.2 ms later on 2 cores). A write whose thread cannot
/// start fails like any other.
pub(crate) fn spawn(path: PathBuf, write: impl FnOnce() -> io::Result<()> + Send + 'static) {
    lock(&WRITES).running.push(path.clone());
    let ending = Ending {
        path,
        error: Some("the blob writer stopped".into()),
    };
    let started = crate::background::spawn("kin-blob-write", move || ending.with(write()));
    if let Err(error) = started {
        tracing::warn!(%error, "could not start a thread to write a blob");
    }
}

/// Waits while any running write's path satisfies `matches`.
fn wait_while(matches: impl Fn(&Path) -> bool) {
    let mut writes = lock(&WRITES);
    while writes.running.iter().any(|p| matches(p)) {
        writes = ENDED.wait(writes).unwrap_or_else(|p| p.into_inner());
    }
}

/// Waits until `path` is not being written.
pub(crate) fn wait_for(path: &Path) {
    wait_while(|p| p == path);
}

/// Waits until no blob of `dir` is being written.
pub(crate) fn wait_dir(dir: &Path) {
    wait_while(|p| p.parent() == Some(dir));
}

/// Waits for every write (before kin exits).
pub(crate) fn wait_all() {
    wait_while(|_| true);
}

/// Waits for `dir`'s writes, then takes the errors of those that failed.
pub(crate) fn take_failed(dir: &Path) -> Vec<String> {
    wait_dir(dir);
    let mut writes = lock(&WRITES);
    let (mine, others) = std::mem::take(&mut writes.failed)
        .into_iter()
        .partition(|(path, _)| path.parent() == Some(dir));
    writes.failed = others;
    mine.into_iter().map(|(_, error)| error).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_waits_for_the_write_and_a_failure_is_taken_once() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().to_owned();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let target = dir.join("a");
        let written = target.clone();
        spawn(target.clone(), move || {
            wait.recv().map_err(io::Error::other)?;
            std::fs::write(&written, b"x")
        });
        let reader = std::thread::spawn(move || {
            wait_for(&target);
            std::fs::read(&target).unwrap()
        });
        go.send(()).unwrap();
        assert_eq!(reader.join().unwrap(), b"x");

        spawn(dir.join("b"), || Err(io::Error::other("disk full")));
        spawn(dir.join("c"), || panic!("a writer that panics"));
        let mut failed = take_failed(&dir);
        failed.sort();
        assert_eq!(failed, ["disk full", "the blob writer stopped"]);
        assert!(take_failed(&dir).is_empty(), "taken once");
    }
}

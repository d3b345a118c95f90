//! What one agent last saw of each file it read or wrote, so that a `write` or `edit` does not
//! silently overwrite a change it never saw (a sibling child, the user, a command): a file
//! whose stamp (size, modification and change times, inode) differs from the one the agent
//! recorded fails the call with a clear error, and a fresh `read` records the file again.
//!
//! A file the agent never read or wrote is not checked: creating a new file, or editing one
//! whose text the model was given some other way, works as it always did (an `edit` still only
//! applies where its old text matches).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::sync::lock;

/// What identifies one version of a file on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    len: u64,
    inode: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Stamp {
    /// The stamp of the file at `path` now; `None` when there is none (or it cannot be told).
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            len: meta.len(),
            inode: meta.ino(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// The stamps of the files one agent saw.
#[derive(Debug, Default)]
pub struct FileStamps {
    seen: Mutex<HashMap<PathBuf, Stamp>>,
}

/// Why a write must not go ahead.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum StaleFile {
    #[error(
        "{shown} changed since you last read or wrote it (another agent or process wrote it); \
         read it again, then redo your change"
    )]
    Changed { shown: String },
    #[error(
        "{shown} was deleted since you last read or wrote it (another agent or process removed \
         it); check before writing it again"
    )]
    Deleted { shown: String },
}

impl FileStamps {
    /// Records `stamp` (taken before the read, so a change during it counts as unseen) as
    /// what this agent saw of `path`.
    pub(crate) fn saw(&self, path: &Path, stamp: Option<Stamp>) {
        let mut seen = lock(&self.seen);
        match stamp {
            Some(stamp) => seen.insert(path.to_owned(), stamp),
            None => seen.remove(path),
        };
    }

    /// Records the file at `path` as it is now (after this agent wrote it).
    pub(crate) fn wrote(&self, path: &Path) {
        self.saw(path, Stamp::of(path));
    }

    /// Refuses when `path` changed since this agent last saw it; `shown` names it.
    pub(crate) fn check(&self, path: &Path, shown: &str) -> Result<(), StaleFile> {
        self.check_against(path, Stamp::of(path), shown)
    }

    /// As [`FileStamps::check`], against `now`, the stamp of the version about to be used.
    pub(crate) fn check_against(
        &self,
        path: &Path,
        now: Option<Stamp>,
        shown: &str,
    ) -> Result<(), StaleFile> {
        let Some(known) = lock(&self.seen).get(path).copied() else {
            return Ok(());
        };
        let shown = shown.to_owned();
        match now {
            Some(now) if now == known => Ok(()),
            Some(_) => Err(StaleFile::Changed { shown }),
            None => Err(StaleFile::Deleted { shown }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_changed_after_it_was_seen_is_refused_until_seen_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.txt");
        let stamps = FileStamps::default();
        // Never seen: not checked, even once it exists.
        assert_eq!(stamps.check(&path, "a.txt"), Ok(()));
        std::fs::write(&path, "one").unwrap();
        assert_eq!(stamps.check(&path, "a.txt"), Ok(()));
        stamps.saw(&path, Stamp::of(&path));
        assert_eq!(stamps.check(&path, "a.txt"), Ok(()));
        // Another writer (a new file in its place, as a rename-based save leaves it).
        let other = dir.path().join("b.txt");
        std::fs::write(&other, "two!").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let refused = stamps.check(&path, "a.txt").unwrap_err();
        assert!(refused
            .to_string()
            .contains("a.txt changed since you last read"));
        stamps.wrote(&path);
        assert_eq!(stamps.check(&path, "a.txt"), Ok(()));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(
            stamps.check(&path, "a.txt"),
            Err(StaleFile::Deleted { .. })
        ));
    }
}

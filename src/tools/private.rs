//! kin's own files that no tool reads and no prompt attaches, even inside a workspace root:
//! the config file (it may hold the model key) and kin's data directory (every session's
//! log, and the credentials kin keeps). kin itself reads them by name; only what is read for
//! the model is refused here.
//!
//! The set is process-wide, like the environment it derives from: `config` sets it at start.

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use crate::sync::{read_lock, write_lock};

static PRIVATE: RwLock<Vec<PathBuf>> = RwLock::new(Vec::new());

/// Marks `paths` (files, or directories with all they hold) as kin's own. Each is kept as
/// given and as resolved, since the paths checked later are resolved ones.
pub fn protect(paths: impl IntoIterator<Item = PathBuf>) {
    let mut private = write_lock(&PRIVATE);
    for path in paths.into_iter().filter(|path| path.is_absolute()) {
        if let Ok(resolved) = path.canonicalize() {
            if !private.contains(&resolved) {
                private.push(resolved);
            }
        }
        if !private.contains(&path) {
            private.push(path);
        }
    }
}

/// Whether `path` (resolved) is one of kin's own files or lies in one of its directories.
pub(crate) fn is_private(path: &Path) -> bool {
    read_lock(&PRIVATE).iter().any(|own| path.starts_with(own))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_directory_covers_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("kin-data-for-private-test");
        std::fs::create_dir_all(&data).unwrap();
        protect([data.clone(), PathBuf::from("relative/ignored")]);
        assert!(is_private(&data.join("sessions/a.jsonl")));
        assert!(is_private(&data.canonicalize().unwrap().join("token")));
        assert!(!is_private(&dir.path().join("other")));
        assert!(!is_private(Path::new("relative/ignored")));
    }
}

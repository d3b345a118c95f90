//! kin's own files that no tool reads and no prompt attaches, even inside a workspace root:
//! the config file (it may hold the model key) and kin's data directory (every session's
//! log, and the credentials kin keeps). kin itself reads them by name; only what is read for
//! the model is refused here.
//!
//! The set is a [`PrivateFiles`] the runtime owns, fixed when it starts, and hands to the tool
//! contexts, the file services of child agents and the readers of prompt links, commands and
//! agent definitions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// kin's own files and directories; cheap to clone. The default is empty (nothing refused).
#[derive(Debug, Clone, Default)]
pub struct PrivateFiles(Arc<[PathBuf]>);

impl PrivateFiles {
    /// `paths` (files, or directories with all they hold) as kin's own. Each is kept as given
    /// and as resolved, since the paths checked later are resolved ones; relative ones are
    /// ignored.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut private: Vec<PathBuf> = Vec::new();
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
        Self(private.into())
    }

    /// Whether `path` (resolved) is one of kin's own files or lies in one of its directories.
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.0.iter().any(|own| path.starts_with(own))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_directory_covers_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("kin-data");
        std::fs::create_dir_all(&data).unwrap();
        let private = PrivateFiles::new([data.clone(), PathBuf::from("relative/ignored")]);
        assert!(private.contains(&data.join("sessions/a.jsonl")));
        assert!(private.contains(&data.canonicalize().unwrap().join("token")));
        assert!(!private.contains(&dir.path().join("other")));
        assert!(!private.contains(Path::new("relative/ignored")));
        assert!(!PrivateFiles::default().contains(&data));
    }
}

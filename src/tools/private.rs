//! kin's own files that no tool reads and no prompt attaches, even inside a workspace root:
//! the config file (it may hold the model key) and kin's data directory (every session's
//! log, and the credentials kin keeps). kin itself reads them by name; only what is read for
//! the model is refused here.
//!
//! Beside them, kin's own directories (the config directory, the data directory) are never
//! written for the model without asking: `write` and `edit` take a path there as outside the
//! workspace (which asks in every mode), and a child agent's file writes there are refused.
//!
//! The set is a [`PrivateFiles`] the runtime owns, fixed when it starts, and hands to the tool
//! contexts, the file services of child agents and the readers of prompt links, commands and
//! agent definitions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// kin's own files and directories; cheap to clone. The default is empty (nothing refused).
#[derive(Debug, Clone, Default)]
pub struct PrivateFiles {
    /// Never read for the model.
    unread: Arc<[PathBuf]>,
    /// Never written for the model without asking.
    unwritten: Arc<[PathBuf]>,
}

impl PrivateFiles {
    /// `paths` (files, or directories with all they hold) as kin's own. Each is kept as given
    /// and as resolved, since the paths checked later are resolved ones; relative ones are
    /// ignored.
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> Self {
        Self {
            unread: both_forms(paths).into(),
            unwritten: Arc::default(),
        }
    }

    /// These files, and `dirs` (kin's config and data directories) never written for the
    /// model without asking.
    pub fn unwritten(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        self.unwritten = both_forms(dirs).into();
        self
    }

    /// Whether `path` (resolved) is one of kin's own files or lies in one of its directories.
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.unread.iter().any(|own| path.starts_with(own))
    }

    /// Whether `path` (resolved) lies in kin's own directories or files, which are not written
    /// for the model without asking.
    pub(crate) fn keeps_from_writes(&self, path: &Path) -> bool {
        self.contains(path) || self.unwritten.iter().any(|own| path.starts_with(own))
    }
}

/// Each absolute path in `paths` as given and as resolved (the paths checked later are
/// resolved ones); relative ones are ignored.
fn both_forms(paths: impl IntoIterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in paths.into_iter().filter(|path| path.is_absolute()) {
        if let Ok(resolved) = path.canonicalize() {
            if !kept.contains(&resolved) {
                kept.push(resolved);
            }
        }
        if !kept.contains(&path) {
            kept.push(path);
        }
    }
    kept
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
        // The config directory is read (commands, agents) but not written.
        let config = dir.path().join("config-kin");
        let private = private.unwritten([config.clone()]);
        assert!(!private.contains(&config.join("commands/x.md")));
        assert!(private.keeps_from_writes(&config.join("commands/x.md")));
        assert!(private.keeps_from_writes(&data.join("token")));
        assert!(!private.keeps_from_writes(&dir.path().join("other")));
    }
}

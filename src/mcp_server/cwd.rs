//! Which directories a `kin` task may work in. Over HTTP, `/` and the home directory are
//! refused unless the server was started with `--allow-broad-cwd`: a task there reads (and in
//! `allow` mode changes) everything the user has, which is seldom what a parent agent meant.

use std::path::{Path, PathBuf};

/// The directories refused as a task's cwd.
#[derive(Debug, Clone, Default)]
pub(crate) struct CwdPolicy {
    refused: Vec<PathBuf>,
}

impl CwdPolicy {
    /// Refuses `/` and `home` (each as written and resolved).
    pub(crate) fn refusing_broad(home: Option<PathBuf>) -> Self {
        let mut refused = vec![PathBuf::from("/")];
        refused.extend(home.filter(|home| home.is_absolute()));
        let resolved: Vec<PathBuf> = refused
            .iter()
            .filter_map(|dir| std::fs::canonicalize(dir).ok())
            .collect();
        refused.extend(resolved);
        Self { refused }
    }

    /// `Err` with the reason when `dir` (resolved, so `/tmp/..` is `/`) is refused.
    pub(crate) fn check(&self, dir: &Path) -> Result<(), String> {
        let resolved = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        match self.refused.iter().find(|refused| **refused == resolved) {
            None => Ok(()),
            Some(_) => Err(format!(
                "cwd {} is {}; over HTTP a task works in a project directory (give one as \
                 `cwd`), unless the server was started with --allow-broad-cwd",
                dir.display(),
                if resolved == Path::new("/") {
                    "the root directory"
                } else {
                    "the home directory"
                }
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_and_home_are_refused_however_written() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        std::fs::create_dir(&project).unwrap();
        let policy = CwdPolicy::refusing_broad(Some(home.path().to_owned()));
        assert!(policy.check(Path::new("/")).is_err());
        assert!(policy.check(Path::new("/tmp/..")).is_err());
        assert!(policy
            .check(home.path())
            .unwrap_err()
            .contains("home directory"));
        assert!(policy.check(&project.join("..")).is_err());
        assert!(policy.check(&project).is_ok());
        assert!(CwdPolicy::default().check(Path::new("/")).is_ok());
    }
}

//! Which directories a `kin` task may work in. Over HTTP, `/` and the home directory are
//! refused unless the server was started with `--allow-broad-cwd`: a task there reads (and in
//! `allow` mode changes) everything the user has, which is seldom what a parent agent meant.

use std::path::{Path, PathBuf};

use crate::process::sandbox::Policy;

/// The directories refused as a task's cwd.
#[derive(Debug, Clone, Default)]
pub(crate) struct CwdPolicy {
    refused: Vec<PathBuf>,
    /// Under a ceiling: its writable paths, outside which no task works.
    bounds: Option<Vec<PathBuf>>,
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
        Self {
            refused,
            bounds: None,
        }
    }

    /// Also refuses a cwd outside `ceiling`'s writable paths, when there is one.
    pub(crate) fn within(mut self, ceiling: Option<&Policy>) -> Self {
        self.bounds = ceiling.map(|ceiling| ceiling.writable.clone());
        self
    }

    /// `Err` with the reason when `dir` (resolved, so `/tmp/..` is `/`) is refused.
    pub(crate) fn check(&self, dir: &Path) -> Result<(), String> {
        let resolved = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        if let Some(bounds) = &self.bounds {
            if !bounds.iter().any(|top| resolved.starts_with(top)) {
                return Err(format!(
                    "cwd {} is outside what this kin may write (it runs inside kin's sandbox, \
                     which lets it write only beneath {}); a task works where its caller may",
                    dir.display(),
                    shown(bounds)
                ));
            }
        }
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

fn shown(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    if shown.is_empty() {
        "nothing".to_owned()
    } else {
        shown.join(", ")
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

    #[test]
    fn under_a_ceiling_a_task_works_only_where_it_may_write() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("ws/sub")).unwrap();
        let ceiling = Policy {
            writable: vec![root.join("ws")],
            network: false,
            required: false,
            unreadable: Vec::new(),
        };
        let policy = CwdPolicy::default().within(Some(&ceiling));
        assert!(policy.check(&root.join("ws/sub")).is_ok());
        let error = policy.check(&root).unwrap_err();
        assert!(error.contains("outside what this kin may write"), "{error}");
        assert!(policy.check(&root.join("ws/sub/../..")).is_err());
    }
}

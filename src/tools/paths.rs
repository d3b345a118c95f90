//! Where tools may reach: the session's workspace roots (its cwd plus additional directories)
//! and the resolution of a path the model gave against them.
//!
//! Resolution follows `..` and symlinks the way the operating system will when the file is
//! opened, so a path that leaves the roots is seen as outside however it is spelled
//! (`../x`, `/etc/x`, `link-to-outside/x`, a dangling link whose target is outside). Components
//! that do not exist yet (a file about to be written) are taken as written. Knows nothing of
//! permissions: whether an outside path may be used is decided elsewhere.

use std::io;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed while resolving one path before giving up (as the kernel's ELOOP).
const MAX_LINKS: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("the path is empty")]
    Empty,
    #[error("too many levels of symbolic links resolving {path}")]
    TooManyLinks { path: String },
    #[error("could not resolve {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: io::Error,
    },
}

/// A path resolved against the roots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Absolute, with every existing symlink and `..` resolved: the file the OS will touch.
    pub path: PathBuf,
    /// Whether `path` lies inside one of the roots.
    pub inside: bool,
}

/// The workspace roots of a session; the first is the cwd, the base of relative paths.
#[derive(Debug, Clone)]
pub struct Roots {
    cwd: PathBuf,
    /// The roots with their own symlinks resolved, cwd first.
    real: Vec<PathBuf>,
}

impl Roots {
    pub fn new(cwd: PathBuf, additional: Vec<PathBuf>) -> Self {
        let real = std::iter::once(&cwd)
            .chain(additional.iter())
            .map(|root| physical(root).unwrap_or_else(|_| lexical(root)))
            .collect();
        Self { cwd, real }
    }

    /// The session cwd as given (not resolved).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The resolved roots, cwd first.
    pub fn real(&self) -> &[PathBuf] {
        &self.real
    }

    /// Resolves `raw` (absolute, or relative to the cwd).
    pub fn resolve(&self, raw: &str) -> Result<Resolved, PathError> {
        if raw.trim().is_empty() {
            return Err(PathError::Empty);
        }
        let raw = Path::new(raw);
        let joined = if raw.is_absolute() {
            raw.to_path_buf()
        } else {
            self.cwd.join(raw)
        };
        let path = physical(&joined)?;
        let inside = self.contains(&path);
        Ok(Resolved { path, inside })
    }

    /// Whether a resolved path lies inside one of the roots.
    pub fn contains(&self, resolved: &Path) -> bool {
        self.real.iter().any(|root| resolved.starts_with(root))
    }

    /// How to show a resolved path to the model: relative to the cwd when inside it.
    pub fn display(&self, resolved: &Path) -> String {
        match self
            .real
            .first()
            .and_then(|cwd| resolved.strip_prefix(cwd).ok())
        {
            Some(rest) if rest.as_os_str().is_empty() => ".".into(),
            Some(rest) => rest.to_string_lossy().into_owned(),
            None => resolved.to_string_lossy().into_owned(),
        }
    }
}

/// `..` and `.` removed without looking at the disk (a fallback for roots that do not exist).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Resolves an absolute path component by component, following symlinks like `open(2)` does;
/// once a component is missing, the rest is taken lexically.
fn physical(path: &Path) -> Result<PathBuf, PathError> {
    let mut links = 0;
    resolve_from(PathBuf::from("/"), path, &mut links)
}

fn resolve_from(start: PathBuf, path: &Path, links: &mut usize) -> Result<PathBuf, PathError> {
    let mut out = start;
    let mut missing = false;
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::CurDir => {}
            Component::RootDir => out = PathBuf::from("/"),
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                let next = out.join(name);
                if missing {
                    out = next;
                    continue;
                }
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        *links += 1;
                        if *links > MAX_LINKS {
                            return Err(PathError::TooManyLinks {
                                path: path.display().to_string(),
                            });
                        }
                        let target = std::fs::read_link(&next).map_err(|source| PathError::Io {
                            path: next.display().to_string(),
                            source,
                        })?;
                        // A relative target is relative to the link's directory (`out`).
                        out = resolve_from(out, &target, links)?;
                    }
                    Ok(_) => out = next,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {
                        missing = true;
                        out = next;
                    }
                    Err(source) => {
                        return Err(PathError::Io {
                            path: next.display().to_string(),
                            source,
                        })
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, Roots, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/secret"), "s").unwrap();
        let roots = Roots::new(ws.clone(), Vec::new());
        let real_ws = physical(&ws).unwrap();
        (dir, roots, real_ws)
    }

    #[test]
    fn relative_paths_resolve_inside_the_cwd() {
        let (_dir, roots, ws) = setup();
        let r = roots.resolve("src/new.rs").unwrap();
        assert_eq!(r.path, ws.join("src/new.rs"));
        assert!(r.inside);
        assert_eq!(roots.display(&r.path), "src/new.rs");
        assert!(roots.resolve("./src/../src").unwrap().inside);
    }

    #[test]
    fn dot_dot_absolute_and_symlink_escapes_are_outside() {
        let (dir, roots, ws) = setup();
        assert!(!roots.resolve("../outside/secret").unwrap().inside);
        assert!(!roots.resolve("src/../../outside/secret").unwrap().inside);
        let abs = dir.path().join("outside/secret");
        assert!(!roots.resolve(&abs.to_string_lossy()).unwrap().inside);

        symlink(dir.path().join("outside"), ws.join("link")).unwrap();
        let through = roots.resolve("link/secret").unwrap();
        assert!(!through.inside);
        assert!(through.path.ends_with("outside/secret"));

        // A dangling link pointing outside must not count as a new file inside.
        symlink(dir.path().join("outside/not-yet"), ws.join("dangling")).unwrap();
        let dangling = roots.resolve("dangling").unwrap();
        assert!(!dangling.inside, "{dangling:?}");
        assert!(dangling.path.ends_with("outside/not-yet"));
    }

    #[test]
    fn a_symlink_inside_that_stays_inside_is_inside() {
        let (_dir, roots, ws) = setup();
        symlink("src", ws.join("alias")).unwrap();
        let r = roots.resolve("alias/x.rs").unwrap();
        assert!(r.inside);
        assert_eq!(r.path, ws.join("src/x.rs"));
        // `..` after a symlink goes to the target's parent, as the OS does.
        symlink(ws.join("src"), ws.join("deep")).unwrap();
        assert_eq!(roots.resolve("deep/..").unwrap().path, ws);
    }

    #[test]
    fn additional_directories_are_roots_and_link_loops_fail() {
        let (dir, _roots, ws) = setup();
        let roots = Roots::new(ws.clone(), vec![dir.path().join("outside")]);
        assert!(roots.resolve("../outside/secret").unwrap().inside);
        symlink(ws.join("b"), ws.join("a")).unwrap();
        symlink(ws.join("a"), ws.join("b")).unwrap();
        assert!(matches!(
            roots.resolve("a"),
            Err(PathError::TooManyLinks { .. })
        ));
        assert!(matches!(roots.resolve(" "), Err(PathError::Empty)));
    }
}

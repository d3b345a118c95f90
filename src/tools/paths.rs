//! Where tools may reach: the session's workspace roots (its cwd plus additional directories)
//! and the resolution of a path the model gave against them.
//!
//! Resolution follows `..` and symlinks the way the operating system will when the file is
//! opened, so a path that leaves the roots is seen as outside however it is spelled
//! (`../x`, `/etc/x`, `link-to-outside/x`, a dangling link whose target is outside). Components
//! that do not exist yet (a file about to be written) are taken as written.
//!
//! Only what lies inside the roots is looked at: the walk stops at the first component beyond
//! them and takes the rest as written, so resolving an outside path stats nothing outside and
//! its result tells nothing about what is there. Knows nothing of permissions: whether an
//! outside path may be used is decided elsewhere, before anything touches it.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed while resolving one path before giving up (as the kernel's ELOOP).
const MAX_LINKS: usize = 40;

#[derive(Debug, thiserror::Error)]
pub(crate) enum PathError {
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
pub(crate) struct Resolved {
    /// Absolute, with every existing symlink and `..` resolved: the file the OS will touch.
    pub(crate) path: PathBuf,
    /// Whether `path` lies inside one of the roots.
    pub(crate) inside: bool,
}

/// The workspace roots of a session; the first is the cwd, the base of relative paths.
#[derive(Debug, Clone)]
pub struct Roots {
    cwd: PathBuf,
    /// The roots as given, cwd first (absolute paths under them are taken as under `real`).
    given: Vec<PathBuf>,
    /// The roots with their own symlinks resolved, cwd first.
    real: Vec<PathBuf>,
    /// Held from a write's staleness check to its end: agents sharing these roots (siblings
    /// in their parent's cwd) cannot both pass the check and then overwrite each other.
    writes: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl Roots {
    /// The roots of a session: its cwd and the additional directories.
    pub fn new(cwd: PathBuf, additional: Vec<PathBuf>) -> Self {
        let given: Vec<PathBuf> = std::iter::once(&cwd)
            .chain(additional.iter())
            .map(|root| lexical(root))
            .collect();
        let real = given
            .iter()
            .map(|root| physical(root).unwrap_or_else(|_| root.clone()))
            .collect();
        Self {
            cwd,
            given,
            real,
            writes: Default::default(),
        }
    }

    /// Waits for the turn to write a file (see `writes`).
    pub(crate) async fn writing(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.writes.lock().await
    }

    /// Every root with its symlinks resolved, cwd first.
    pub(crate) fn all(&self) -> &[PathBuf] {
        &self.real
    }

    /// The session cwd as given (not resolved).
    pub(crate) fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Resolves `raw` (absolute, or relative to the cwd).
    pub(crate) fn resolve(&self, raw: &str) -> Result<Resolved, PathError> {
        if raw.trim().is_empty() {
            return Err(PathError::Empty);
        }
        let raw = Path::new(raw);
        let joined = if raw.is_absolute() {
            self.rebase(raw)
        } else {
            self.real.first().unwrap_or(&self.cwd).join(raw)
        };
        self.walk(&joined)
    }

    /// An absolute path spelled under a root as given, moved under that root resolved, so that
    /// the walk starts inside it (a cwd reached through a symlink stays the workspace).
    fn rebase(&self, raw: &Path) -> PathBuf {
        let under = self.given.iter().zip(&self.real).find_map(|(given, real)| {
            let rest = raw.strip_prefix(given).ok()?;
            (given != real).then(|| real.join(rest))
        });
        under.unwrap_or_else(|| raw.to_path_buf())
    }

    /// Whether `path` is a proper ancestor of a root (the way to a root, known to exist).
    fn leads_to_a_root(&self, path: &Path) -> bool {
        self.real
            .iter()
            .any(|root| root != path && root.starts_with(path))
    }

    /// Resolves an absolute path component by component, following symlinks like `open(2)`
    /// does, while it stays inside the roots (or on the way to one). Once a component is
    /// missing, the rest is taken lexically; once one lies outside, the rest is taken as
    /// written (`..` kept) and the path is outside, without anything there being looked at.
    fn walk(&self, path: &Path) -> Result<Resolved, PathError> {
        let mut pending = Vec::new();
        push_parts(&mut pending, path);
        let mut out = PathBuf::from("/");
        let mut missing = false;
        let mut links = 0;
        while let Some(component) = pending.pop() {
            let name = match component {
                Part::Root => {
                    out = PathBuf::from("/");
                    continue;
                }
                Part::Parent => {
                    out.pop();
                    continue;
                }
                Part::Name(name) => name,
            };
            let next = out.join(name);
            if missing || self.leads_to_a_root(&next) {
                out = next;
                continue;
            }
            if !self.contains(&next) {
                let mut path = next;
                path.extend(pending.iter().rev().map(Part::as_os_str));
                return Ok(Resolved {
                    path,
                    inside: false,
                });
            }
            match std::fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(PathError::TooManyLinks {
                            path: path.display().to_string(),
                        });
                    }
                    let target = std::fs::read_link(&next).map_err(|source| PathError::Io {
                        path: next.display().to_string(),
                        source,
                    })?;
                    // A relative target is relative to the link's directory (`out`).
                    push_parts(&mut pending, &target);
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
        let inside = self.contains(&out);
        Ok(Resolved { path: out, inside })
    }

    /// The root a resolved path lies beneath, and the path relative to it.
    pub(crate) fn beneath<'a>(&'a self, resolved: &'a Path) -> Option<(&'a Path, &'a Path)> {
        self.real.iter().find_map(|root| {
            let relative = resolved.strip_prefix(root).ok()?;
            Some((root.as_path(), relative))
        })
    }

    /// As [`Self::beneath`], also for a path under a root as given (not resolved): the path
    /// relative to that root's resolved form, for a confined open.
    pub(crate) fn beneath_as_given<'a>(&'a self, path: &'a Path) -> Option<(&'a Path, &'a Path)> {
        self.beneath(path).or_else(|| {
            self.given
                .iter()
                .zip(&self.real)
                .find_map(|(given, real)| Some((real.as_path(), path.strip_prefix(given).ok()?)))
        })
    }

    /// Whether a resolved path lies inside one of the roots.
    pub(crate) fn contains(&self, resolved: &Path) -> bool {
        self.real.iter().any(|root| resolved.starts_with(root))
    }

    /// How to show a resolved path to the model: relative to the cwd when inside it.
    pub(crate) fn display(&self, resolved: &Path) -> String {
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

/// One step of a path still to walk.
enum Part {
    Root,
    Parent,
    Name(OsString),
}

impl Part {
    fn as_os_str(&self) -> &OsStr {
        match self {
            Self::Root => OsStr::new("/"),
            Self::Parent => OsStr::new(".."),
            Self::Name(name) => name,
        }
    }
}

/// Puts `path`'s steps on the stack `pending` (its first step on top).
fn push_parts(pending: &mut Vec<Part>, path: &Path) {
    let parts = path.components().filter_map(|component| match component {
        Component::Prefix(_) | Component::CurDir => None,
        Component::RootDir => Some(Part::Root),
        Component::ParentDir => Some(Part::Parent),
        Component::Normal(name) => Some(Part::Name(name.to_owned())),
    });
    let parts: Vec<Part> = parts.collect();
    pending.extend(parts.into_iter().rev());
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

    #[test]
    fn nothing_beyond_the_roots_is_looked_at() {
        let (dir, roots, ws) = setup();
        // Were the outside link followed, this would resolve into the workspace.
        symlink(ws.join("src"), dir.path().join("outside/back")).unwrap();
        let through = roots.resolve("../outside/back/x.rs").unwrap();
        assert!(!through.inside, "{through:?}");
        assert!(through.path.ends_with("outside/back/x.rs"));
        // The rest of an outside path is kept as written, `..` included.
        let back = roots.resolve("../outside/../ws/x").unwrap();
        assert!(!back.inside);
        assert!(back.path.ends_with("outside/../ws/x"), "{back:?}");
    }

    #[test]
    fn a_cwd_reached_through_a_symlink_is_still_the_workspace() {
        let (dir, _roots, ws) = setup();
        let alias = dir.path().join("alias");
        symlink(&ws, &alias).unwrap();
        let roots = Roots::new(alias.clone(), Vec::new());
        assert_eq!(roots.resolve("src/a.rs").unwrap().path, ws.join("src/a.rs"));
        let absolute = alias.join("src/a.rs").display().to_string();
        let r = roots.resolve(&absolute).unwrap();
        assert!(r.inside, "{r:?}");
        assert_eq!(roots.display(&r.path), "src/a.rs");
    }
}

//! The directory walk under `glob` and `grep`, without a race against symlink swaps: the base
//! is opened confined beneath its root (by name only when it lies outside the roots and the
//! user allowed it), and every directory below it is opened from its parent's handle with
//! `O_DIRECTORY | O_NOFOLLOW` and listed through that handle. A directory swapped for a symlink
//! after it was listed is therefore refused, never followed out of the roots.
//!
//! It keeps what the `ignore` crate's walk (`WalkBuilder` with `hidden(false)`,
//! `require_git(false)`, sorted by path) did: entries in path order (each directory before its
//! contents, names compared bytewise), hidden files kept, `.git` skipped, symlinks listed but
//! not followed, ignore rules ([`ignore_rules`]) from the base's parent directories on down;
//! an unreadable directory is listed but not entered.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::ops::ControlFlow;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ignore::gitignore::Gitignore;
use nix::dir::{Dir, Type};
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{fstatat, Mode, SFlag};
use tokio_util::sync::CancellationToken;

use super::confined;
use super::ignore_rules::{self, Present, Rules};
use super::paths::Roots;
use super::private::PrivateFiles;

/// What an entry is, as listed (a symlink is not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    Other,
}

/// One entry met by the walk.
pub struct Entry<'a> {
    /// The base joined with the names on the way.
    pub(crate) path: &'a Path,
    /// The path beneath the base (empty for the base itself).
    pub(crate) relative: &'a Path,
    pub(crate) kind: Kind,
    place: Place<'a>,
}

enum Place<'a> {
    Base(&'a File),
    In(BorrowedFd<'a>, &'a OsStr),
}

impl Entry<'_> {
    /// Opens the entry for reading through the handle it was listed from, never following a
    /// symlink put there since.
    pub fn open(&self) -> io::Result<File> {
        match self.place {
            Place::Base(file) => file.try_clone(),
            Place::In(dir, name) => {
                let flags = OFlag::O_RDONLY
                    | OFlag::O_NONBLOCK
                    | OFlag::O_NOCTTY
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC;
                let fd = nix::fcntl::openat(dir, name, flags, Mode::empty())?;
                Ok(File::from(fd))
            }
        }
    }
}

/// A walk of one base, opened and ready to run.
pub struct Walk {
    base: PathBuf,
    handle: File,
    kind: Kind,
    /// The root the base lies beneath; `None` for a base outside the roots.
    root: Option<PathBuf>,
    /// The rules of the base's parent directories, outermost first.
    parents: Vec<Rules>,
    global: Gitignore,
    /// kin's own files: neither listed nor entered.
    private: PrivateFiles,
}

impl Walk {
    /// Opens `base` (resolved and authorized): beneath its root when inside the roots, by name
    /// when outside. A symlink swapped in on the way fails the open ([`confined::is_escape`]).
    /// The walk skips kin's own files, `private`.
    pub fn open(roots: &Roots, private: &PrivateFiles, base: &Path) -> io::Result<Walk> {
        let (handle, root) = match roots.beneath(base) {
            Some((root, relative)) => (
                confined::open_beneath(root, relative)?,
                Some(root.to_path_buf()),
            ),
            None => (
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                    .open(base)?,
                None,
            ),
        };
        let meta = handle.metadata()?;
        let kind = if meta.is_dir() {
            Kind::Dir
        } else if meta.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        let mut walk = Walk {
            base: base.to_path_buf(),
            handle,
            kind,
            root,
            parents: Vec::new(),
            global: Gitignore::empty(),
            private: private.clone(),
        };
        if kind == Kind::Dir {
            walk.global = ignore_rules::global();
            let mut ancestors: Vec<&Path> = base.ancestors().skip(1).collect();
            ancestors.reverse();
            walk.parents = ancestors
                .into_iter()
                .filter_map(|dir| {
                    let open = |name: &Path| walk.open_by_path(&dir.join(name));
                    Rules::read(dir, &Present::ALL, open, |path| walk.open_by_path(path))
                })
                .collect();
        }
        Ok(walk)
    }

    /// Visits the base and then, for a directory, everything below it that the rules keep, in
    /// path order, until `visit` breaks or `cancel` fires.
    pub fn run(self, cancel: &CancellationToken, visit: impl FnMut(&Entry<'_>) -> ControlFlow<()>) {
        let mut walker = Walker {
            walk: &self,
            cancel,
            visit,
            rules: Vec::new(),
            path: self.base.clone(),
        };
        let base = Entry {
            path: &self.base,
            relative: Path::new(""),
            kind: self.kind,
            place: Place::Base(&self.handle),
        };
        if (walker.visit)(&base).is_break() || self.kind != Kind::Dir {
            return;
        }
        match self.handle.try_clone() {
            Ok(handle) => {
                let _ = walker.dir(handle.into());
            }
            Err(error) => tracing::debug!(%error, "the walk could not list its base"),
        }
    }

    /// Opens a file by its path: confined beneath the root when it lies there, else by name
    /// (the base's parents above the root, a worktree's git dir).
    fn open_by_path(&self, path: &Path) -> io::Result<File> {
        let beneath = self
            .root
            .as_deref()
            .and_then(|root| Some((root, path.strip_prefix(root).ok()?)));
        match beneath {
            Some((root, relative)) => confined::open_beneath(root, relative),
            None => std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                .open(path),
        }
    }
}

struct Walker<'w, F> {
    walk: &'w Walk,
    cancel: &'w CancellationToken,
    visit: F,
    /// The rules of the directories entered so far (after the base's parents').
    rules: Vec<Rules>,
    /// The path of the entry being visited.
    path: PathBuf,
}

impl<F: FnMut(&Entry<'_>) -> ControlFlow<()>> Walker<'_, F> {
    /// Lists the open directory at `self.path`, reads its rules and visits its entries.
    fn dir(&mut self, handle: std::os::fd::OwnedFd) -> ControlFlow<()> {
        let mut dir = match Dir::from_fd(handle) {
            Ok(dir) => dir,
            Err(error) => {
                tracing::debug!(%error, path = %self.path.display(), "the walk skipped a directory");
                return ControlFlow::Continue(());
            }
        };
        let entries = list(&mut dir);
        let present = Present {
            ignore: entries.iter().any(|(name, _)| name == ".ignore"),
            gitignore: entries.iter().any(|(name, _)| name == ".gitignore"),
            git: entries.iter().any(|(name, _)| name == ".git"),
        };
        let rules = self.read_rules(dir.as_fd(), &present);
        let pushed = rules.is_some();
        self.rules.extend(rules);
        let mut flow = ControlFlow::Continue(());
        for (name, kind) in &entries {
            if self.cancel.is_cancelled() {
                flow = ControlFlow::Break(());
                break;
            }
            self.path.push(name);
            flow = self.entry(dir.as_fd(), name, *kind);
            self.path.pop();
            if flow.is_break() {
                break;
            }
        }
        if pushed {
            self.rules.pop();
        }
        flow
    }

    fn entry(&mut self, dir: BorrowedFd<'_>, name: &OsStr, kind: Kind) -> ControlFlow<()> {
        // kin's own files (its config, its data) are not listed or searched for the model.
        if name == ".git"
            || self.walk.private.contains(&self.path)
            || self.is_ignored(kind == Kind::Dir)
        {
            return ControlFlow::Continue(());
        }
        let entry = Entry {
            path: &self.path,
            relative: self
                .path
                .strip_prefix(&self.walk.base)
                .unwrap_or(&self.path),
            kind,
            place: Place::In(dir, name),
        };
        (self.visit)(&entry)?;
        if kind != Kind::Dir {
            return ControlFlow::Continue(());
        }
        match confined::open_subdir(dir, name) {
            Ok(handle) => self.dir(handle),
            Err(error) => {
                tracing::debug!(%error, path = %self.path.display(), "the walk skipped a directory");
                ControlFlow::Continue(())
            }
        }
    }

    fn is_ignored(&self, is_dir: bool) -> bool {
        let (parents, global) = (&self.walk.parents, &self.walk.global);
        if parents.is_empty() && self.rules.is_empty() && global.is_empty() {
            return false;
        }
        let stack = parents.iter().chain(&self.rules);
        ignore_rules::is_ignored(stack, global, &self.path, is_dir)
    }

    /// The rules of the directory being listed, read through its handle. An ignore file that is
    /// a symlink leading out of the directory is read confined beneath the root instead.
    fn read_rules(&self, dir: BorrowedFd<'_>, present: &Present) -> Option<Rules> {
        let path = &self.path;
        let open = |name: &Path| {
            confined::open_in(dir, name).or_else(|error| {
                if confined::is_escape(&error) {
                    self.walk.open_by_path(&path.join(name))
                } else {
                    Err(error)
                }
            })
        };
        Rules::read(path, present, open, |path| self.walk.open_by_path(path))
    }
}

/// The entries of `dir` but `.` and `..`, sorted by name (bytewise). A file type the listing
/// does not give is looked up without following a symlink.
fn list(dir: &mut Dir) -> Vec<(OsString, Kind)> {
    let mut listed: Vec<(OsString, Option<Type>)> = Vec::new();
    for entry in dir.iter() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                tracing::debug!(%error, "the walk stopped listing a directory");
                break;
            }
        };
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        listed.push((OsStr::from_bytes(name).to_os_string(), entry.file_type()));
    }
    let mut entries: Vec<(OsString, Kind)> = listed
        .into_iter()
        .map(|(name, listed)| {
            let kind = match listed {
                Some(kind) => kind_of(kind),
                None => fstatat(dir.as_fd(), name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                    .map_or(Kind::Other, |stat| kind_of_mode(stat.st_mode)),
            };
            (name, kind)
        })
        .collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    entries
}

fn kind_of(listed: Type) -> Kind {
    match listed {
        Type::Directory => Kind::Dir,
        Type::File => Kind::File,
        Type::Symlink => Kind::Symlink,
        _ => Kind::Other,
    }
}

fn kind_of_mode(mode: u32) -> Kind {
    let format = SFlag::from_bits_truncate(mode) & SFlag::S_IFMT;
    if format == SFlag::S_IFDIR {
        Kind::Dir
    } else if format == SFlag::S_IFREG {
        Kind::File
    } else if format == SFlag::S_IFLNK {
        Kind::Symlink
    } else {
        Kind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// `<tmp>/ws` (the root) inside `<tmp>`, whose `.gitignore` the walk reads as a parent's.
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let ws = top.join("ws");
        let files = [
            ("../.gitignore", "from-above.txt\n"),
            (
                ".gitignore",
                "*.log\n!keep.log\nbuild/\n/top-only.txt\nblocked.txt\n",
            ),
            (".ignore", "secret*\n!secret-ok\n!blocked.txt\n"),
            (".git/HEAD", "ref: refs/heads/main\n"),
            (".git/info/exclude", "excluded.txt\n"),
            (".hidden/file", ""),
            (".env", ""),
            ("a", ""),
            ("a.b", ""),
            ("a-b", ""),
            ("B", ""),
            ("\u{e4}", ""),
            ("a.log", ""),
            ("keep.log", ""),
            ("top-only.txt", ""),
            ("blocked.txt", ""),
            ("excluded.txt", ""),
            ("from-above.txt", ""),
            ("secret", ""),
            ("secret-ok", ""),
            ("build/out.txt", ""),
            ("sub/.gitignore", "\u{feff}!*.log\nlocal.txt\n"),
            ("sub/x.log", ""),
            ("sub/local.txt", ""),
            ("sub/top-only.txt", ""),
            ("sub/excluded.txt", ""),
            ("sub/deeper/a.rs", ""),
            ("sub/deeper/build/b.rs", ""),
            ("wt/.git", "gitdir: nowhere\n"),
            ("wt/file", ""),
        ];
        for (name, text) in files {
            let path = ws.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        // A worktree: its `.git` file names a git dir whose common dir has the exclude file.
        let git_dir = top.join("repo/.git/worktrees/wt2");
        std::fs::create_dir_all(&git_dir).unwrap();
        std::fs::create_dir_all(top.join("repo/.git/info")).unwrap();
        std::fs::write(git_dir.join("commondir"), "../..\n").unwrap();
        std::fs::write(top.join("repo/.git/info/exclude"), "wt-excluded.txt\n").unwrap();
        std::fs::create_dir_all(ws.join("wt2")).unwrap();
        let dot_git = format!("gitdir: {}\n", git_dir.display());
        std::fs::write(ws.join("wt2/.git"), dot_git).unwrap();
        std::fs::write(ws.join("wt2/wt-excluded.txt"), "").unwrap();
        std::fs::write(ws.join("wt2/kept.txt"), "").unwrap();
        symlink(ws.join("sub"), ws.join("link-to-sub")).unwrap();
        symlink(&top, ws.join("link-out")).unwrap();
        (dir, ws)
    }

    /// What the `ignore` crate's walk (as glob and grep used it) lists: relative path and
    /// whether it is a directory.
    fn crate_walk(base: &Path) -> Vec<(PathBuf, bool)> {
        ignore::WalkBuilder::new(base)
            .hidden(false)
            .require_git(false)
            .filter_entry(|entry| entry.file_name() != ".git")
            .sort_by_file_path(|a, b| a.cmp(b))
            .build()
            .flatten()
            .map(|entry| {
                let relative = entry.path().strip_prefix(base).unwrap().to_path_buf();
                (relative, entry.file_type().is_some_and(|t| t.is_dir()))
            })
            .collect()
    }

    fn confined_walk(roots: &Roots, base: &Path) -> Vec<(PathBuf, bool)> {
        let mut listed = Vec::new();
        Walk::open(roots, &PrivateFiles::default(), base)
            .unwrap()
            .run(&CancellationToken::new(), |entry| {
                listed.push((entry.relative.to_path_buf(), entry.kind == Kind::Dir));
                ControlFlow::Continue(())
            });
        listed
    }

    #[test]
    fn lists_what_the_ignore_crate_walk_listed() {
        let (_dir, ws) = tree();
        let roots = Roots::new(ws.clone(), Vec::new());
        for base in [ws.clone(), ws.join("sub"), ws.join("sub/x.log")] {
            let listed = confined_walk(&roots, &base);
            assert_eq!(listed, crate_walk(&base), "from {}", base.display());
        }
        let names: Vec<_> = confined_walk(&roots, &ws)
            .into_iter()
            .map(|(path, _)| path.display().to_string())
            .collect();
        // Spot checks, so that a change shared by both walks is seen too.
        let kept = [
            ".env",
            ".hidden/file",
            "keep.log",
            "secret-ok",
            "blocked.txt",
            "wt2/kept.txt",
        ];
        for kept in kept {
            assert!(names.iter().any(|n| n == kept), "{kept} kept: {names:?}");
        }
        let gone = [
            "a.log",
            "build",
            "secret",
            "excluded.txt",
            "from-above.txt",
            ".git",
            "wt2/wt-excluded.txt",
        ];
        for gone in gone {
            assert!(
                !names.iter().any(|n| n == gone),
                "{gone} ignored: {names:?}"
            );
        }
        assert!(names.iter().any(|n| n == "sub/x.log"));
        assert!(names.iter().any(|n| n == "link-out"));
        assert!(!names.iter().any(|n| n.starts_with("link-out/")));
    }

    #[test]
    fn a_base_outside_the_roots_is_walked_by_handle_too() {
        let (_dir, ws) = tree();
        let roots = Roots::new(ws.join("sub/deeper"), Vec::new());
        assert_eq!(confined_walk(&roots, &ws), crate_walk(&ws));
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_is_not_entered() {
        let (_dir, ws) = tree();
        let roots = Roots::new(ws.clone(), Vec::new());
        let mut listed = Vec::new();
        Walk::open(&roots, &PrivateFiles::default(), &ws)
            .unwrap()
            .run(&CancellationToken::new(), |entry| {
                // The walk listed `sub` as a directory; it becomes a link to outside before
                // the walk opens it.
                if entry.relative == Path::new("sub") {
                    std::fs::rename(ws.join("sub"), ws.join("sub-moved")).unwrap();
                    symlink(ws.parent().unwrap(), ws.join("sub")).unwrap();
                }
                listed.push(entry.relative.to_path_buf());
                ControlFlow::Continue(())
            });
        assert!(listed.contains(&PathBuf::from("sub")));
        assert!(
            !listed
                .iter()
                .any(|p| p.starts_with("sub") && p != Path::new("sub")),
            "nothing below the swapped directory: {listed:?}"
        );
        let error = Walk::open(&roots, &PrivateFiles::default(), &ws.join("sub"))
            .err()
            .unwrap();
        assert!(confined::is_escape(&error), "{error}");
    }

    #[test]
    fn stops_when_cancelled_or_told() {
        let (_dir, ws) = tree();
        let roots = Roots::new(ws.clone(), Vec::new());
        let mut seen = 0;
        Walk::open(&roots, &PrivateFiles::default(), &ws)
            .unwrap()
            .run(&CancellationToken::new(), |_| {
                seen += 1;
                if seen == 3 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            });
        assert_eq!(seen, 3);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let mut seen = 0;
        Walk::open(&roots, &PrivateFiles::default(), &ws)
            .unwrap()
            .run(&cancel, |_| {
                seen += 1;
                ControlFlow::Continue(())
            });
        assert_eq!(seen, 1, "only the base");
    }
}

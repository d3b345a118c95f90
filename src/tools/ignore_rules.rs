//! The ignore rules of a directory walk, as the `ignore` crate's walker applies them with
//! `require_git(false)`: each directory's `.ignore`, `.gitignore` and git exclude file
//! (`.git/info/exclude`, or the common git dir's for a worktree), and the global gitignore
//! (`core.excludesFile`). The rules themselves are the crate's [`Gitignore`] matchers; this file
//! only reads their files through whatever handle the walk has, so a walk beneath a root never
//! reads an ignore file by a name that could lead outside.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;
use nix::errno::Errno;

/// The rules one directory contributes (at least one of them not empty).
pub(crate) struct Rules {
    ignore: Gitignore,
    git: Gitignore,
    exclude: Gitignore,
}

/// Which ignore files a directory may have, from its listing (all of them when it was not
/// listed).
pub(crate) struct Present {
    pub(crate) ignore: bool,
    pub(crate) gitignore: bool,
    pub(crate) git: bool,
}

impl Present {
    pub(crate) const ALL: Present = Present {
        ignore: true,
        gitignore: true,
        git: true,
    };
}

impl Rules {
    /// Reads the rules of the directory `dir`; `open` opens a path relative to it (such as
    /// `.git/info/exclude`) and `open_by_name` a path git itself names (a worktree's common
    /// dir). `None` when the directory has no rules.
    pub(crate) fn read(
        dir: &Path,
        present: &Present,
        open: impl Fn(&Path) -> io::Result<File>,
        open_by_name: impl Fn(&Path) -> io::Result<File>,
    ) -> Option<Rules> {
        let from_file = |present: bool, name: &str| {
            if !present {
                return Gitignore::empty();
            }
            match open(Path::new(name)) {
                Ok(file) => matcher(dir, &dir.join(name), file),
                Err(_) => Gitignore::empty(),
            }
        };
        let rules = Rules {
            ignore: from_file(present.ignore, ".ignore"),
            git: from_file(present.gitignore, ".gitignore"),
            exclude: if present.git {
                exclude(dir, &open, &open_by_name)
            } else {
                Gitignore::empty()
            },
        };
        let empty = rules.ignore.is_empty() && rules.git.is_empty() && rules.exclude.is_empty();
        (!empty).then_some(rules)
    }
}

/// The global gitignore, read anew for each walk as the `ignore` crate does.
pub(crate) fn global() -> Gitignore {
    let (global, error) = Gitignore::global();
    if let Some(error) = error {
        tracing::debug!(%error, "the global gitignore was not read");
    }
    global
}

/// Whether `path` (a directory when `is_dir`) is ignored under the rules of the directories
/// above it (outermost first in `stack`): for each kind of file the deepest directory with a
/// matching rule decides, and `.ignore` goes before `.gitignore`, before git's exclude file,
/// before the global gitignore; a whitelist (`!pattern`) that decides keeps the path.
pub(crate) fn is_ignored<'r>(
    stack: impl DoubleEndedIterator<Item = &'r Rules> + Clone,
    global: &Gitignore,
    path: &Path,
    is_dir: bool,
) -> bool {
    let deepest = |pick: fn(&Rules) -> &Gitignore| {
        stack
            .clone()
            .rev()
            .map(|rules| pick(rules).matched(path, is_dir))
            .find(|found| !found.is_none())
            .unwrap_or(Match::None)
    };
    let mut decided = deepest(|r| &r.ignore);
    if decided.is_none() {
        decided = deepest(|r| &r.git);
    }
    if decided.is_none() {
        decided = deepest(|r| &r.exclude);
    }
    if decided.is_none() {
        decided = global.matched(path, is_dir);
    }
    decided.is_ignore()
}

/// The git exclude file of `dir`: `.git/info/exclude`, or in a worktree (whose `.git` is a file
/// naming its git dir) the one in the repository's common git dir.
fn exclude(
    dir: &Path,
    open: &impl Fn(&Path) -> io::Result<File>,
    open_by_name: &impl Fn(&Path) -> io::Result<File>,
) -> Gitignore {
    let path = dir.join(".git/info/exclude");
    match open(Path::new(".git/info/exclude")) {
        Ok(file) => return matcher(dir, &path, file),
        Err(error) if error.raw_os_error() == Some(Errno::ENOTDIR as i32) => {}
        Err(_) => return Gitignore::empty(),
    }
    let common = open(Path::new(".git"))
        .ok()
        .and_then(first_line)
        .and_then(|line| {
            line.strip_prefix("gitdir: ")
                .map(|git_dir| dir.join(git_dir))
        })
        .and_then(|git_dir| {
            let line = first_line(open_by_name(&git_dir.join("commondir")).ok()?)?;
            Some(if line.starts_with('.') {
                git_dir.join(line)
            } else {
                PathBuf::from(line)
            })
        });
    let Some(common) = common else {
        return Gitignore::empty();
    };
    let path = common.join("info/exclude");
    match open_by_name(&path) {
        Ok(file) => matcher(dir, &path, file),
        Err(_) => Gitignore::empty(),
    }
}

fn first_line(file: File) -> Option<String> {
    BufReader::new(file).lines().next()?.ok()
}

/// The rules of one ignore file (`path`, already open as `file`) for paths under `dir`. Lines
/// are read as `GitignoreBuilder::add` reads them: a leading byte-order mark is dropped, lines
/// that are not UTF-8 are skipped, a read error ends the file; a bad pattern drops only its line.
fn matcher(dir: &Path, path: &Path, file: File) -> Gitignore {
    let mut builder = GitignoreBuilder::new(dir);
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let line = match line {
            Ok(line) => line,
            Err(error) if error.kind() == io::ErrorKind::InvalidData => continue,
            Err(_) => break,
        };
        let line = if number == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            &line
        };
        if let Err(error) = builder.add_line(Some(path.to_path_buf()), line) {
            tracing::debug!(%error, path = %path.display(), "an ignore rule was skipped");
        }
    }
    builder.build().unwrap_or_else(|error| {
        tracing::debug!(%error, path = %path.display(), "an ignore file was skipped");
        Gitignore::empty()
    })
}

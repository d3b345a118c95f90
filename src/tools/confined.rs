//! Opens and writes files beneath a workspace root without racing a symlink swap: the path
//! checked is the path opened, because the kernel itself keeps the lookup beneath the root's
//! directory handle.
//!
//! On Linux 5.6+ a file is opened with one `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//! from the root's handle. Where `openat2` is missing (`ENOSYS`, older kernels or other Unixes)
//! the path is walked one component at a time with `openat(O_NOFOLLOW)` (`O_DIRECTORY` for the
//! directories on the way), so no symlink is followed at all. Paths given here are already
//! resolved (their symlinks followed when they were checked), so a symlink met now was put there
//! since: [`is_escape`] tells that error apart.
//!
//! A write creates a temporary file in the opened parent directory and renames it over the name
//! through the same handle (`renameat`), never by a name looked up again from the root.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{fstatat, mkdirat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

/// Mode of a new file or directory (before the umask), as `std::fs` uses.
const NEW_FILE_MODE: u32 = 0o666;
const NEW_DIR_MODE: u32 = 0o777;
const READ_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_NONBLOCK)
    .union(OFlag::O_NOCTTY);

/// Whether an open failed because a symlink on the way would lead elsewhere (out of the root,
/// or anywhere in the fallback walk): the path changed after it was checked.
pub(crate) fn is_escape(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error().map(Errno::from_raw),
        Some(Errno::EXDEV | Errno::ELOOP)
    )
}

/// Opens `relative` (beneath `root`) for reading. A directory opens too; callers look at its
/// metadata through the handle. Non-blocking, so that opening a FIFO cannot hang the call
/// (regular files read as usual).
pub fn open_beneath(root: &Path, relative: &Path) -> io::Result<File> {
    normal_parts(relative)?;
    let root = open_root(root)?;
    let fd = open_at(root.as_fd(), relative, READ_FLAGS)?;
    Ok(File::from(fd))
}

/// Opens `relative` beneath the open directory `dir` for reading, as [`open_beneath`] does
/// beneath a root (for the ignore files of a directory being walked).
pub(crate) fn open_in(dir: BorrowedFd<'_>, relative: &Path) -> io::Result<File> {
    normal_parts(relative)?;
    Ok(File::from(open_at(dir, relative, READ_FLAGS)?))
}

/// Opens the subdirectory `name` of the open directory `dir` without following a symlink
/// (an escape, see [`is_escape`]), for listing.
pub(crate) fn open_subdir(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(open_dir(dir, name)?)
}

/// Replaces (or creates) `relative` beneath `root` with `content`, creating missing parent
/// directories beneath the root. An existing file keeps its permission bits.
pub fn write_beneath(root: &Path, relative: &Path, content: &[u8]) -> io::Result<()> {
    let parts = normal_parts(relative)?;
    let Some((name, parents)) = parts.split_last() else {
        return Err(io::Error::from(io::ErrorKind::IsADirectory));
    };
    let dir = make_dirs(root, parents)?;
    let mode = match fstatat(&dir, *name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {
            return Err(io::Error::from(io::ErrorKind::IsADirectory))
        }
        Ok(stat) if SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => {
            Some(Mode::from_bits_truncate(stat.st_mode & 0o7777))
        }
        // A symlink put there since the check is replaced, not followed.
        Ok(_) => None,
        Err(Errno::ENOENT) => None,
        Err(errno) => return Err(errno.into()),
    };
    let temp = temp_name(name);
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
    let fd = openat(
        &dir,
        temp.as_os_str(),
        flags | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(NEW_FILE_MODE),
    )?;
    let written = fill(File::from(fd), content, mode)
        .and_then(|()| Ok(renameat(&dir, temp.as_os_str(), &dir, *name)?));
    if written.is_err() {
        let _ = unlinkat(&dir, temp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    written
}

/// Creates `relative` and its missing parents as directories beneath `root` (for a file the
/// editor is about to write there).
pub(crate) fn create_dirs_beneath(root: &Path, relative: &Path) -> io::Result<()> {
    make_dirs(root, &normal_parts(relative)?).map(drop)
}

/// Opens (creating what is missing) the directory `parts` beneath `root`, refusing symlinks.
fn make_dirs(root: &Path, parts: &[&OsStr]) -> io::Result<OwnedFd> {
    let mut dir = open_root(root)?;
    for part in parts {
        dir = open_or_make_dir(&dir, part)?;
    }
    Ok(dir)
}

fn fill(mut file: File, content: &[u8], mode: Option<Mode>) -> io::Result<()> {
    if let Some(mode) = mode {
        nix::sys::stat::fchmod(file.as_fd(), mode)?;
    }
    file.write_all(content)
}

/// A hidden name beside `name`, random; `O_EXCL` settles the unlikely clash.
fn temp_name(name: &OsStr) -> std::ffi::OsString {
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(".kin-{}.tmp", uuid::Uuid::new_v4().simple()));
    temp
}

fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(root, flags, Mode::empty())?)
}

/// The path's components, which must all be names (resolved paths have no `.`, `..` or root).
fn normal_parts(relative: &Path) -> io::Result<Vec<&OsStr>> {
    relative
        .components()
        .map(|component| match component {
            Component::Normal(name) => Ok(name),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a plain relative path",
            )),
        })
        .collect()
}

fn open_or_make_dir(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    match open_dir(dir.as_fd(), name) {
        Err(Errno::ENOENT) => {}
        other => return Ok(other?),
    }
    match mkdirat(dir, name, Mode::from_bits_truncate(NEW_DIR_MODE)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(errno) => return Err(errno.into()),
    }
    Ok(open_dir(dir.as_fd(), name)?)
}

/// Opens the directory `name` in `dir` without following a symlink; a symlink there is
/// `ELOOP` (the kernel says `ENOTDIR`, as for a file).
fn open_dir(dir: BorrowedFd<'_>, name: &OsStr) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    openat(dir, name, flags, Mode::empty()).map_err(|errno| {
        let is_link = || {
            fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|stat| {
                SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
            })
        };
        if errno == Errno::ENOTDIR && is_link() {
            Errno::ELOOP
        } else {
            errno
        }
    })
}

/// Opens `relative` beneath `dir` with `flags` (plus `O_CLOEXEC`).
fn open_at(dir: BorrowedFd<'_>, relative: &Path, flags: OFlag) -> io::Result<OwnedFd> {
    #[cfg(target_os = "linux")]
    if let Some(result) = linux::open_beneath(dir, relative, flags) {
        return result;
    }
    walk_open(dir, relative, flags)
}

/// The fallback: one `openat(O_NOFOLLOW)` per component.
fn walk_open(root: BorrowedFd<'_>, relative: &Path, flags: OFlag) -> io::Result<OwnedFd> {
    let parts = normal_parts(relative)?;
    let Some((last, parents)) = parts.split_last() else {
        return Ok(openat(root, ".", flags | OFlag::O_CLOEXEC, Mode::empty())?);
    };
    let mut dir: Option<OwnedFd> = None;
    for part in parents {
        let from = dir.as_ref().map_or(root, |dir| dir.as_fd());
        dir = Some(open_dir(from, part)?);
    }
    let from = dir.as_ref().map_or(root, |dir| dir.as_fd());
    let last_flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(openat(from, *last, last_flags, Mode::empty())?)
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;
    use std::os::fd::{BorrowedFd, OwnedFd};
    use std::path::Path;

    use nix::errno::Errno;
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};

    /// `None` when the kernel has no `openat2` (asked each time: only an old kernel or a
    /// syscall filter says so, and there the walk costs more than the question).
    pub fn open_beneath(
        dir: BorrowedFd<'_>,
        relative: &Path,
        flags: OFlag,
    ) -> Option<io::Result<OwnedFd>> {
        let path = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        let how = OpenHow::new()
            .flags(flags | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        match openat2(dir, path, how) {
            Err(Errno::ENOSYS) => None,
            other => Some(other.map_err(io::Error::from)),
        }
    }
}

/// The `openat2`-free walk, for tests and the benchmark to compare.
#[doc(hidden)]
pub fn open_beneath_by_walk(root: &Path, relative: &Path) -> io::Result<File> {
    let root = open_root(root)?;
    Ok(File::from(walk_open(root.as_fd(), relative, READ_FLAGS)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (ws, outside) = (base.join("ws"), base.join("outside"));
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(ws.join("src/a.txt"), "inside").unwrap();
        std::fs::write(outside.join("a.txt"), "outside").unwrap();
        symlink(&outside, ws.join("out")).unwrap();
        symlink(outside.join("a.txt"), ws.join("out-file")).unwrap();
        (dir, ws, outside)
    }

    fn read(file: io::Result<File>) -> io::Result<String> {
        io::read_to_string(file?)
    }

    #[test]
    fn opens_inside_and_refuses_symlinks_that_leave() {
        let (_dir, ws, _) = setup();
        for open in [open_beneath, open_beneath_by_walk] {
            assert_eq!(read(open(&ws, Path::new("src/a.txt"))).unwrap(), "inside");
            for escape in ["out/a.txt", "out-file"] {
                let error = read(open(&ws, Path::new(escape))).unwrap_err();
                assert!(is_escape(&error), "{escape}: {error}");
            }
            let error = open(&ws, Path::new("../outside/a.txt")).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidInput, "{error}");
            assert!(open(&ws, Path::new(""))
                .unwrap()
                .metadata()
                .unwrap()
                .is_dir());
        }
    }

    #[test]
    fn writes_through_the_directory_handle_and_keep_the_mode() {
        let (_dir, ws, outside) = setup();
        write_beneath(&ws, Path::new("new/dir/b.txt"), b"hello").unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.join("new/dir/b.txt")).unwrap(),
            "hello"
        );
        let script = ws.join("src/run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        write_beneath(&ws, Path::new("src/run.sh"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "new");
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o750);
        // A symlinked directory on the way is refused; a symlink as the name is replaced.
        let error = write_beneath(&ws, Path::new("out/c.txt"), b"x").unwrap_err();
        assert!(is_escape(&error), "{error}");
        write_beneath(&ws, Path::new("out-file"), b"replaced").unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("a.txt")).unwrap(),
            "outside"
        );
        assert!(!std::fs::symlink_metadata(ws.join("out-file"))
            .unwrap()
            .is_symlink());
        let error = write_beneath(&ws, Path::new("src"), b"x").unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::IsADirectory);
        let leftovers = std::fs::read_dir(ws.join("src")).unwrap().count();
        assert_eq!(leftovers, 2, "no temporary file is left behind");
    }
}

//! File text for the file tools: through the editor when it offers `readTextFile` /
//! `writeTextFile` (so unsaved buffers are seen and edits land in them), else on the local disk.
//! Paths given here are already resolved and authorized.
//!
//! On disk, a path inside the workspace roots is opened and written through [`confined`], so a
//! symlink swapped in after the check cannot lead the open outside; an outside path (which the
//! user allowed) is opened by name.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::client::ClientError;
use super::paths::Roots;
use super::private::PrivateFiles;
use super::{confined, ToolContext};

/// Files larger than this are not loaded whole (the read tool pages through them instead).
pub(crate) const MAX_TEXT_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum FsError {
    #[error("{path} does not exist")]
    NotFound { path: String },
    #[error("{path} is a directory")]
    IsDirectory { path: String },
    #[error("{path} is not a text file (it contains NUL bytes or is not UTF-8)")]
    NotText { path: String },
    #[error("{path} is too large ({size} bytes; the limit is {MAX_TEXT_BYTES})")]
    TooLarge { path: String, size: u64 },
    #[error("{path} is not a regular file")]
    NotRegular { path: String },
    #[error("{path} is one of kin's own files (its configuration or data), which are not read for the model")]
    Private { path: String },
    #[error("{path} changed while it was being opened: a symbolic link on the way leads out of the workspace")]
    Escaped { path: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Client(ClientError),
}

impl FsError {
    pub(crate) fn is_cancelled(&self) -> bool {
        matches!(self, Self::Client(ClientError::Cancelled))
    }
}

fn io_error(path: &Path, source: std::io::Error) -> FsError {
    let path = path.display().to_string();
    if confined::is_escape(&source) {
        return FsError::Escaped { path };
    }
    match source.kind() {
        std::io::ErrorKind::NotFound => FsError::NotFound { path },
        std::io::ErrorKind::IsADirectory => FsError::IsDirectory { path },
        _ => FsError::Io { path, source },
    }
}

/// Opens an existing regular file on disk for reading, with its size: confined beneath its
/// root when inside the roots, by name when outside. Never blocks on a FIFO or a device (the
/// open is non-blocking, and only a regular file is taken), and refuses kin's own files
/// (`private`).
pub(crate) fn open_file(
    roots: &Roots,
    private: &PrivateFiles,
    path: &Path,
) -> Result<(File, u64), FsError> {
    open_regular(private, path, || match roots.beneath(path) {
        Some((root, relative)) => confined::open_beneath(root, relative),
        None => open_by_name(path),
    })
}

/// At most `cap` bytes of the regular file at `path`, and whether the file holds more. For
/// files kin reads on its own (prompt links, commands, agent definitions): with `confine`,
/// opened confined beneath the root `path` lies under (a path under no root is refused);
/// without, by name (a file the user allowed, or one of kin's config directory); otherwise as
/// [`open_file`]. A blocking call, for `spawn_blocking`.
pub(crate) fn read_capped(
    confine: Option<&Roots>,
    private: &PrivateFiles,
    path: &Path,
    cap: u64,
) -> Result<(Vec<u8>, bool), FsError> {
    let (file, size) = open_regular(private, path, || match confine {
        Some(roots) => match roots.beneath_as_given(path) {
            Some((root, relative)) => confined::open_beneath(root, relative),
            None => Err(std::io::Error::from_raw_os_error(libc::EXDEV)),
        },
        None => open_by_name(path),
    })?;
    let mut bytes = Vec::with_capacity(size.min(cap) as usize);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    let cut = bytes.len() as u64 > cap;
    bytes.truncate(cap as usize);
    Ok((bytes, cut))
}

/// `open`s `path` unless it is one of kin's own files (`private`), and keeps it only if it is
/// a regular file; with its size.
fn open_regular(
    private: &PrivateFiles,
    path: &Path,
    open: impl FnOnce() -> std::io::Result<File>,
) -> Result<(File, u64), FsError> {
    let shown = || path.display().to_string();
    if private.contains(path) {
        return Err(FsError::Private { path: shown() });
    }
    let file = open().map_err(|e| io_error(path, e))?;
    let meta = file.metadata().map_err(|e| io_error(path, e))?;
    if meta.is_dir() {
        return Err(FsError::IsDirectory { path: shown() });
    }
    if !meta.is_file() {
        return Err(FsError::NotRegular { path: shown() });
    }
    Ok((file, meta.len()))
}

/// Opens `path` for reading as the confined open does (non-blocking, no controlling
/// terminal), but by name.
fn open_by_name(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// Reads a whole text file; `Ok(None)` when it does not exist (neither on disk nor as a buffer
/// the editor reports).
pub(crate) async fn read_text(cx: &ToolContext, path: &Path) -> Result<Option<String>, FsError> {
    let exists = match open_file(&cx.roots, &cx.private, path) {
        Ok(_) => true,
        Err(FsError::NotFound { .. }) => false,
        Err(error) => return Err(error),
    };
    if let Some(client) = cx.client.as_ref().filter(|c| c.features().read_text_file) {
        if !exists {
            return Ok(None);
        }
        return client
            .read_text_file(path.to_path_buf(), cx.cancel.clone())
            .await
            .map(Some)
            .map_err(FsError::Client);
    }
    if !exists {
        return Ok(None);
    }
    let path = path.to_path_buf();
    let (roots, private) = (cx.roots.clone(), cx.private.clone());
    tokio::task::spawn_blocking(move || read_local(&roots, &private, &path))
        .await
        .unwrap_or_else(|join| {
            Err(FsError::Io {
                path: String::new(),
                source: std::io::Error::other(join.to_string()),
            })
        })
        .map(Some)
}

fn read_local(roots: &Roots, private: &PrivateFiles, path: &Path) -> Result<String, FsError> {
    let (mut file, size) = open_file(roots, private, path)?;
    if size > MAX_TEXT_BYTES {
        return Err(FsError::TooLarge {
            path: path.display().to_string(),
            size,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error(path, e))?;
    text_of(path, bytes)
}

/// The bytes as text, refusing binary content.
pub(crate) fn text_of(path: &Path, bytes: Vec<u8>) -> Result<String, FsError> {
    let not_text = || FsError::NotText {
        path: path.display().to_string(),
    };
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(not_text());
    }
    String::from_utf8(bytes).map_err(|_| not_text())
}

/// Writes a whole text file, creating missing parent directories.
pub(crate) async fn write_text(
    cx: &ToolContext,
    path: &Path,
    content: String,
) -> Result<(), FsError> {
    let roots = cx.roots.clone();
    let target = path.to_path_buf();
    let through_editor = cx.client_with(|f| f.write_text_file).is_some();
    let local = tokio::task::spawn_blocking(move || {
        prepare_or_write(&roots, &target, content, through_editor)
    })
    .await
    .unwrap_or_else(|join| {
        Err(FsError::Io {
            path: String::new(),
            source: std::io::Error::other(join.to_string()),
        })
    })?;
    let Some(content) = local else {
        return Ok(());
    };
    match cx.client_with(|f| f.write_text_file) {
        Some(client) => client
            .write_text_file(path.to_path_buf(), content, cx.cancel.clone())
            .await
            .map_err(FsError::Client),
        None => Ok(()),
    }
}

/// On disk: writes the file (`Ok(None)`). For the editor: refuses a directory and creates the
/// missing parents, handing the content back for the editor to write (`Ok(Some)`).
fn prepare_or_write(
    roots: &Roots,
    path: &Path,
    content: String,
    through_editor: bool,
) -> Result<Option<String>, FsError> {
    let is_dir = || FsError::IsDirectory {
        path: path.display().to_string(),
    };
    let Some((root, relative)) = roots.beneath(path) else {
        if path.is_dir() {
            return Err(is_dir());
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io_error(parent, e))?;
        }
        if through_editor {
            return Ok(Some(content));
        }
        std::fs::write(path, content).map_err(|e| io_error(path, e))?;
        return Ok(None);
    };
    if !through_editor {
        confined::write_beneath(root, relative, content.as_bytes())
            .map_err(|e| io_error(path, e))?;
        return Ok(None);
    }
    if let Ok(file) = confined::open_beneath(root, relative) {
        if file.metadata().is_ok_and(|meta| meta.is_dir()) {
            return Err(is_dir());
        }
    }
    if let Some(parent) = relative.parent() {
        confined::create_dirs_beneath(root, parent).map_err(|e| io_error(path, e))?;
    }
    Ok(Some(content))
}

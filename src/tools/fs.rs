//! File text for the file tools: through the editor when it offers `readTextFile` /
//! `writeTextFile` (so unsaved buffers are seen and edits land in them), else on the local disk.
//! Paths given here are already resolved and authorized.

use std::io::Read;
use std::path::Path;

use super::client::ClientError;
use super::ToolContext;

/// Files larger than this are not loaded whole (the read tool pages through them instead).
pub const MAX_TEXT_BYTES: u64 = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{path} does not exist")]
    NotFound { path: String },
    #[error("{path} is a directory")]
    IsDirectory { path: String },
    #[error("{path} is not a text file (it contains NUL bytes or is not UTF-8)")]
    NotText { path: String },
    #[error("{path} is too large ({size} bytes; the limit is {MAX_TEXT_BYTES})")]
    TooLarge { path: String, size: u64 },
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
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Client(ClientError::Cancelled))
    }
}

fn io_error(path: &Path, source: std::io::Error) -> FsError {
    let path = path.display().to_string();
    match source.kind() {
        std::io::ErrorKind::NotFound => FsError::NotFound { path },
        _ => FsError::Io { path, source },
    }
}

/// Checks that `path` is an existing regular file on disk.
pub fn check_file(path: &Path) -> Result<u64, FsError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(path, e))?;
    if meta.is_dir() {
        return Err(FsError::IsDirectory {
            path: path.display().to_string(),
        });
    }
    Ok(meta.len())
}

/// Reads a whole text file; `Ok(None)` when it does not exist (neither on disk nor as a buffer
/// the editor reports).
pub async fn read_text(cx: &ToolContext, path: &Path) -> Result<Option<String>, FsError> {
    let exists = match check_file(path) {
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
    tokio::task::spawn_blocking(move || read_local(&path))
        .await
        .unwrap_or_else(|join| {
            Err(FsError::Io {
                path: String::new(),
                source: std::io::Error::other(join.to_string()),
            })
        })
        .map(Some)
}

fn read_local(path: &Path) -> Result<String, FsError> {
    let size = check_file(path)?;
    if size > MAX_TEXT_BYTES {
        return Err(FsError::TooLarge {
            path: path.display().to_string(),
            size,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    std::fs::File::open(path)
        .and_then(|mut file| file.read_to_end(&mut bytes))
        .map_err(|e| io_error(path, e))?;
    text_of(path, bytes)
}

/// The bytes as text, refusing binary content.
pub fn text_of(path: &Path, bytes: Vec<u8>) -> Result<String, FsError> {
    let not_text = || FsError::NotText {
        path: path.display().to_string(),
    };
    if bytes.iter().take(8192).any(|b| *b == 0) {
        return Err(not_text());
    }
    String::from_utf8(bytes).map_err(|_| not_text())
}

/// Writes a whole text file, creating missing parent directories.
pub async fn write_text(cx: &ToolContext, path: &Path, content: String) -> Result<(), FsError> {
    if path.is_dir() {
        return Err(FsError::IsDirectory {
            path: path.display().to_string(),
        });
    }
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| io_error(parent, e))?;
    }
    if let Some(client) = cx.client.as_ref().filter(|c| c.features().write_text_file) {
        return client
            .write_text_file(path.to_path_buf(), content, cx.cancel.clone())
            .await
            .map_err(FsError::Client);
    }
    tokio::fs::write(path, content)
        .await
        .map_err(|e| io_error(path, e))
}

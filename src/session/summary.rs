//! What the store says about a session without loading it, and how the store fails: the
//! summary `session/list` shows, its title and times, and [`StoreError`]. Shared by the store,
//! the index and the log writer.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::child::ChildInfo;
use super::event::{EventBody, Header};
use super::line::parse_event_line;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session not found: {id}")]
    NotFound { id: String },
    #[error("invalid session id {id:?}: use letters, digits, '-', '_' and '.' only")]
    InvalidId { id: String },
    #[error("session already exists: {id}")]
    Exists { id: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}:{line}: corrupt session log line: {reason}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

pub(super) fn io_error(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// What `session/list` needs about one stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub cwd: Option<String>,
    pub additional_directories: Vec<String>,
    pub title: Option<String>,
    pub updated_ms: u64,
    /// Full-precision modification time, for a stable newest-first order.
    pub updated_ns: u128,
    pub parent_session: Option<String>,
    /// For a child session, what `list_agents` shows; `None` also for a child indexed by an
    /// older kin (read its file instead).
    pub child: Option<ChildInfo>,
}

/// The title of the last `session/title` event in `lines` (log lines); only those are parsed.
pub(crate) fn last_title(lines: &[u8]) -> Option<String> {
    const NEEDLE: &[u8] = b"\"type\":\"session/title\"";
    let mut title = None;
    for line in lines.split(|&b| b == b'\n') {
        if line.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
            let mut parsed = Vec::new();
            if let Ok(text) = std::str::from_utf8(line) {
                if parse_event_line(text, &mut parsed).is_ok() {
                    if let Some(EventBody::SessionTitle(t)) = parsed.pop().map(|e| e.body) {
                        title = Some(t.title);
                    }
                }
            }
        }
    }
    title
}

pub(super) fn summarize(path: &Path) -> Result<Option<SessionSummary>, StoreError> {
    let bytes = fs::read(path).map_err(io_error(path))?;
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(header) = serde_json::from_slice::<Header>(first) else {
        return Ok(None);
    };
    let modified_ns = fs::metadata(path)
        .map(|m| u128::from(modified_ns(&m)))
        .unwrap_or(u128::from(header.created_at) * 1_000_000);
    let title = last_title(&bytes);
    let child = ChildInfo::of_bytes(&header, &bytes);
    Ok(Some(SessionSummary {
        id: header.id,
        cwd: header.cwd,
        additional_directories: header.additional_directories,
        title,
        updated_ms: (modified_ns / 1_000_000) as u64,
        updated_ns: modified_ns,
        parent_session: header.parent_session,
        child,
    }))
}

pub(crate) fn modified_ns(metadata: &fs::Metadata) -> u64 {
    metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

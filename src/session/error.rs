//! What the session store reports when it cannot do what it was asked.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session not found: {id}")]
    NotFound { id: String },
    #[error("invalid session id {id:?}: use letters, digits, '-', '_' and '.' only")]
    InvalidId { id: String },
    #[error("session already exists: {id}")]
    Exists { id: String },
    /// Another process has the session open for writing (see `lock.rs`).
    #[error("session {id} is open for writing in another kin process{}; only one process may write a session at a time", holder(*.pid))]
    Locked { id: String, pid: Option<u32> },
    /// `op` says what kin was doing, e.g. "creating the sessions directory".
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
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

fn holder(pid: Option<u32>) -> String {
    pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
}

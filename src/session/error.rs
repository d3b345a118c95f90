//! What the session store reports when it cannot do what it was asked.

use std::io;
use std::path::PathBuf;

/// Why the session store could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No session has this id.
    #[error("session not found: {id}")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The id has characters a session file name may not have.
    #[error("invalid session id {id:?}: use letters, digits, '-', '_' and '.' only")]
    InvalidId {
        /// The id given.
        id: String,
    },
    /// A session with this id already exists.
    #[error("session already exists: {id}")]
    Exists {
        /// The id.
        id: String,
    },
    /// Another process has the session open for writing (see `lock.rs`).
    #[error("session {id} is open for writing in another kin process{}; only one process may write a session at a time", holder(*.pid))]
    Locked {
        /// The session's id.
        id: String,
        /// The process holding the lock, when known.
        pid: Option<u32>,
    },
    /// `op` says what kin was doing, e.g. "creating the sessions directory".
    #[error("{op} {path}: {source}")]
    Io {
        /// What kin was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A log line that cannot be read, where no later line may be lost by skipping it.
    #[error("{path}:{line}: corrupt session log line: {reason}")]
    Corrupt {
        /// The log file.
        path: PathBuf,
        /// The line's number (1-based).
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

fn holder(pid: Option<u32>) -> String {
    pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default()
}

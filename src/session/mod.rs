//! Durable sessions: the event vocabulary (with the delegation records in `records.rs`), the
//! JSONL store, and folds of a log into what the model sees. Knows nothing of ACP or of any
//! model API.

pub(crate) mod blobs;
mod child;
pub(crate) mod context;
mod error;
pub(crate) mod event;
mod header;
pub mod history;
mod id;
mod index;
mod index_file;
mod layout;
mod line;
mod loaded;
mod lock;
mod log;
pub(crate) mod records;
mod replay_read;
mod scan;
mod store;
mod summary;
mod tool_result;
mod truncated;
mod user_part;
mod view;
mod view_sidecar;
mod view_turns;

pub(crate) use context::{CompactionEnd, CompactionStart, CompactionTrigger, ModelSet, TurnUsage};
pub use error::StoreError;
pub use event::*;
pub use id::SessionId;
pub(crate) use index::ListCursor;
// Tests elsewhere read log lines they write themselves.
#[cfg(test)]
pub(crate) use line::parse_event_line;
pub use loaded::{parse_log, read_log, LoadedSession, LogRead, SetAsideLine};
pub(crate) use lock::is_locked;
pub(crate) use lock::SessionLock;
pub use log::SessionLog;
pub use records::{Descriptor, TaskEnd, TaskEndStatus, TaskKind, TaskStart, ToolFilter};
pub use store::SessionStore;
pub use summary::SessionSummary;

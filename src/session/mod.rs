//! Durable sessions: the event vocabulary (with the delegation records in `records.rs`), the
//! JSONL store, and folds of a log into what the model sees. Knows nothing of ACP or of any
//! model API.

mod child;
mod delta_line;
pub mod event;
pub mod history;
mod id;
mod index;
mod log;
pub mod records;
mod store;

pub use child::ChildInfo;
pub use event::*;
pub use id::SessionId;
pub use log::SessionLog;
pub use records::{Descriptor, TaskEnd, TaskStart, ToolFilter};
pub use store::{parse_log, LoadedSession, SessionStore, SessionSummary, SetAsideLine, StoreError};

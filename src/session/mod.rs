//! Durable sessions: the event vocabulary, the JSONL store, and folds of a log into what the
//! model sees. Knows nothing of ACP or of any model API.

mod child;
pub mod event;
pub mod history;
mod id;
mod index;
mod line;
mod log;
mod store;
mod summary;

pub use child::ChildInfo;
pub use event::*;
pub use id::SessionId;
pub use line::{parse_event_line, LineError};
pub use log::SessionLog;
pub use store::{parse_log, LoadedSession, SessionStore, SetAsideLine};
pub use summary::{SessionSummary, StoreError};

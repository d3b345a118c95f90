//! Durable sessions: the event vocabulary, the JSONL store, and folds of a log into what the
//! model sees. Knows nothing of ACP or of any model API.

mod child;
pub mod context;
mod delta_line;
mod error;
pub mod event;
pub mod history;
mod id;
mod index;
mod lock;
mod log;
mod store;
mod summary;

pub use child::ChildInfo;
pub use context::{CompactionEnd, CompactionStart, CompactionTrigger, ModelSet, TurnUsage};
pub use error::StoreError;
pub use event::*;
pub use id::SessionId;
pub use lock::SessionLock;
pub use log::SessionLog;
pub use store::{parse_log, LoadedSession, SessionStore, SetAsideLine};
pub use summary::SessionSummary;

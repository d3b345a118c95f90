//! Models: the [`Model`] trait and its implementations. A model turns a request (system text,
//! history, tools) into a stream of [`Chunk`]s, the log's `assistant/chunk` vocabulary. Models
//! know nothing of ACP, tools' behaviour or the agent loop.

mod replay;
mod unconfigured;

use std::path::PathBuf;

use futures::stream::BoxStream;
use serde_json::Value;

use crate::session::history::HistoryItem;
pub use crate::session::Chunk;
pub use replay::{ReplayError, ReplayModel};
pub use unconfigured::UnconfiguredModel;

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One model call.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The session making the call (replay binds scripts by it).
    pub session_id: String,
    pub cwd: Option<PathBuf>,
    pub system: String,
    pub history: Vec<HistoryItem>,
    pub tools: Vec<ToolSpec>,
    /// Output-token cap for this call, if any.
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("replay: {0}")]
    Replay(String),
    #[error("no model is configured: {0}")]
    Unconfigured(String),
    /// The endpoint answered with an error or the stream broke.
    #[error("model request failed: {0}")]
    Failed(String),
    /// A failure replayed from a recording, with the message recorded then.
    #[error("{0}")]
    Recorded(String),
}

pub type ChunkStream = BoxStream<'static, Result<Chunk, ModelError>>;

pub trait Model: Send + Sync {
    /// Provider name recorded in `assistant/message` sources.
    fn provider(&self) -> &str;
    /// Model name recorded in `assistant/message` sources.
    fn name(&self) -> &str;
    /// Starts one call. Dropping the stream aborts it.
    fn stream(&self, request: ModelRequest) -> ChunkStream;
}

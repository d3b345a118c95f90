//! Models: the [`Model`] trait and its implementations. A model turns a request (system text,
//! history, tools) into a stream of [`Chunk`]s, the log's `assistant/chunk` vocabulary:
//! [`openai`] over HTTP, [`ReplayModel`] from recorded logs. Models know nothing of ACP, tools'
//! behaviour or the agent loop.

mod catalog;
pub mod openai;
mod replay;
mod unconfigured;

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::Value;

use crate::session::history::ModelHistory;
pub use crate::session::Chunk;
pub use catalog::{
    ModelCatalog, ModelChoice, ModelProfile, Prices, UnknownModel, DEFAULT_COMPACT_AT,
    DEFAULT_MODEL_ID,
};
pub(crate) use openai::OpenAiModel;
pub use replay::{ReplayError, ReplayModel};
pub use unconfigured::UnconfiguredModel;

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What the model is told the tool does.
    pub description: String,
    /// JSON Schema of the arguments object; shared, since every step of every turn offers it.
    pub parameters: Arc<Value>,
}

/// One model call.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The session making the call (replay binds scripts by it).
    pub session_id: String,
    /// The session's working directory, if it has one.
    pub cwd: Option<PathBuf>,
    /// The system prompt.
    pub system: String,
    /// Shared with the agent's fold of its log: cheap to clone.
    pub history: ModelHistory,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Output-token cap for this call, if any.
    pub max_tokens: Option<u32>,
    /// The session's blob directory, where the images and attached files its user messages
    /// name are kept (`None`: parts naming a blob get a placeholder).
    pub blobs: Option<PathBuf>,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The replay model has no answer for the call (the text says why).
    #[error("replay: {0}")]
    Replay(String),
    /// No model is configured (the text says what to set).
    #[error("no model is configured: {0}")]
    Unconfigured(String),
    /// The endpoint answered with an error or the stream broke.
    #[error("model request failed: {0}")]
    Failed(String),
    /// A failure replayed from a recording, with the message recorded then.
    #[error("{0}")]
    Recorded(String),
    /// No API key was found; `hint` says where kin looked and what to set.
    #[error("no API key for the model endpoint: {hint}")]
    MissingKey {
        /// Where kin looked and what to set.
        hint: String,
    },
    /// The endpoint refused the key (HTTP 401 or 403). `source_name` says where the key came
    /// from (a variable or a file), never the key itself.
    #[error("model endpoint rejected the API key from {source_name} (HTTP {status})")]
    Auth {
        /// The HTTP status.
        status: u16,
        /// Where the key came from.
        source_name: String,
    },
    /// The endpoint answered with an HTTP error (after `attempts` tries, when retried).
    #[error("model endpoint answered HTTP {status}{}: {body}", after_attempts(*.attempts))]
    Http {
        /// The HTTP status.
        status: u16,
        /// The body of the answer.
        body: String,
        /// Tries made.
        attempts: u32,
    },
    /// The endpoint could not be reached (after `attempts` tries).
    #[error("could not reach the model endpoint {url}{}: {detail}", after_attempts(*.attempts))]
    Connect {
        /// The endpoint.
        url: String,
        /// The transport error.
        detail: String,
        /// Tries made.
        attempts: u32,
    },
    /// No bytes arrived for the configured stall timeout.
    #[error("model stream stalled: no data for {after}")]
    Stalled {
        /// The stall timeout, as text.
        after: String,
    },
    /// The stream broke after some of the answer had been streamed; it is not retried, since
    /// the answer so far was already delivered.
    #[error("model stream was cut after output began: {0}")]
    Cut(String),
    /// The endpoint sent something that is not a valid event stream of chat completion chunks.
    #[error("model stream is malformed: {0}")]
    Malformed(String),
}

impl ModelError {
    /// Whether the endpoint refused the request for its length (OpenAI's
    /// `context_length_exceeded`, and the wordings of DeepSeek, vLLM and llama.cpp).
    pub(crate) fn is_context_overflow(&self) -> bool {
        let text = match self {
            Self::Http {
                status: 400 | 413 | 422,
                body,
                ..
            } => body,
            Self::Failed(text) | Self::Recorded(text) => text,
            _ => return false,
        };
        let text = text.to_ascii_lowercase();
        text.contains("context_length_exceeded")
            || (text.contains("context") && (text.contains("length") || text.contains("too long")))
            || text.contains("maximum context")
            || text.contains("prompt is too long")
    }
}

fn after_attempts(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (gave up after {attempts} attempts)")
    } else {
        String::new()
    }
}

/// Whether a model has what it needs to be called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// The model needs no credentials (replay, tests).
    NotNeeded,
    /// A key is at hand; `source` names where it came from (never the key).
    Present {
        /// Where the key came from.
        source: String,
    },
    /// No key was found; `hint` says what to set.
    Missing {
        /// What to set.
        hint: String,
    },
}

/// The chunks of one model answer, as they stream in.
pub type ChunkStream = BoxStream<'static, Result<Chunk, ModelError>>;

/// A model kin can call: the OpenAI-compatible client, replay, or the unconfigured stand-in.
pub trait Model: Send + Sync {
    /// Provider name recorded in `assistant/message` sources. Owned: a model reloaded from
    /// the configuration may change its names while a caller holds them.
    fn provider(&self) -> String;
    /// Model name recorded in `assistant/message` sources.
    fn name(&self) -> String;
    /// Starts one call. Dropping the stream aborts it.
    fn stream(&self, request: ModelRequest) -> ChunkStream;
    /// The same endpoint and credentials serving another model, for a session whose options
    /// name one (a delegated child with a model override). `None`: this model cannot switch.
    fn with_model_name(&self, _name: &str) -> Option<std::sync::Arc<dyn Model>> {
        None
    }

    /// Whether calls can be made now, and where the key comes from.
    fn credentials(&self) -> Credentials {
        Credentials::NotNeeded
    }
    /// Looks for credentials again (the configuration may have changed since kin started) and
    /// returns the new state.
    fn reload_credentials(&self) -> BoxFuture<'static, Credentials> {
        Box::pin(std::future::ready(self.credentials()))
    }
    /// Starts, in the background, any costly set-up the first call would otherwise pay (TLS
    /// roots); returns at once. Called once the client has been answered `initialize`.
    fn prepare(&self) {}
    /// Session `id` was just created in this process (replay binds sessions to its scripts in
    /// this order).
    fn session_created(&self, id: &str) {
        let _ = id;
    }
    /// Whether image parts are sent to this model as images (else as a one-line placeholder).
    /// The per-model seam: `images = true` in the config file sets it for now.
    fn accepts_images(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::ModelError;

    #[test]
    fn context_length_refusals_are_told_apart() {
        let http = |status, body: &str| ModelError::Http {
            status,
            body: body.into(),
            attempts: 1,
        };
        assert!(
            http(400, "This model's maximum context length is 8192 tokens").is_context_overflow()
        );
        assert!(http(400, "{\"code\":\"context_length_exceeded\"}").is_context_overflow());
        assert!(http(413, "prompt is too long").is_context_overflow());
        assert!(!http(400, "invalid tool schema").is_context_overflow());
        assert!(!http(500, "maximum context length").is_context_overflow());
    }
}

//! Models: the [`Model`] trait and its implementations. A model turns a request (system text,
//! history, tools) into a stream of [`Chunk`]s, the log's `assistant/chunk` vocabulary:
//! [`openai`] over HTTP, [`ReplayModel`] from recorded logs. Models know nothing of ACP, tools'
//! behaviour or the agent loop.

pub(crate) mod arguments;
mod catalog;
pub mod openai;
pub(crate) mod overflow;
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
    DEFAULT_MAX_OUTPUT, DEFAULT_MODEL_ID,
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
    /// The system prompt: the same in every session of its kind.
    pub system: String,
    /// What differs between sessions (where the session works), sent at the start of the
    /// first user message: after the system prompt and the tool schemas, which then make a
    /// prefix that prompt caches keep from one session to the next. Empty: none.
    pub preamble: String,
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
        /// The error's type or code (`error.code`, else `error.type`), when the body has one.
        code: Option<String>,
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
    /// The answer's first byte did not come within the time-to-first-token limit (a local
    /// server still evaluating a long prompt); `attempts` requests were made.
    #[error(
        "the model sent nothing within {after} of the request{} (a local server may still be \
         evaluating a long prompt: raise `first_token_timeout`)",
        after_attempts(*.attempts)
    )]
    FirstTokenTimeout {
        /// The limit, as text.
        after: String,
        /// Tries made.
        attempts: u32,
    },
    /// The endpoint answered 200 and then an empty body: no event at all (llama-cpp-python's
    /// server answers a streamed request that does not fit its window this way).
    #[error("the endpoint answered with an empty body{hint}")]
    EmptyBody {
        /// Why it may have happened, when kin can tell (`""` else).
        hint: String,
    },
    /// The request does not fit the model's context window and compaction could not make
    /// room; the text gives the figures.
    #[error("{0}")]
    ContextOverflow(String),
    /// The stream broke after some of the answer had been streamed; it is not retried, since
    /// the answer so far was already delivered.
    #[error("model stream was cut after output began: {0}")]
    Cut(String),
    /// The endpoint sent something that is not a valid event stream of chat completion chunks.
    #[error("model stream is malformed: {0}")]
    Malformed(String),
}

impl ModelError {
    /// Whether the endpoint refused the request for its length (see [`overflow`] for the
    /// types, codes and wordings recognised).
    pub(crate) fn is_context_overflow(&self) -> bool {
        match self {
            Self::Http {
                status: 400 | 413 | 422,
                body,
                code,
                ..
            } => overflow::is_overflow(code.as_deref(), body),
            Self::Failed(text) | Self::Recorded(text) => overflow::is_overflow(None, text),
            Self::ContextOverflow(_) => true,
            // An empty answer to a request near the window (the hint says so).
            Self::EmptyBody { hint } => !hint.is_empty(),
            _ => false,
        }
    }

    /// The request's size and the window in tokens, when the endpoint's refusal names them.
    pub(crate) fn overflow_sizes(&self) -> Option<(u64, u64)> {
        match self {
            Self::Http { body, .. } | Self::Failed(body) | Self::Recorded(body) => {
                overflow::reported_sizes(body)
            }
            _ => None,
        }
    }

    /// The same error as it reads while another attempt is still to come: without the
    /// "gave up" its last attempt would report.
    pub(crate) fn before_retry(&self) -> Self {
        let mut error = self.clone();
        match &mut error {
            Self::Http { attempts, .. }
            | Self::Connect { attempts, .. }
            | Self::FirstTokenTimeout { attempts, .. } => *attempts = 1,
            _ => {}
        }
        error
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
    /// Asks the model's server for its context window, once (llama-server's `/props`,
    /// Ollama's `/api/show`); later calls return what the first found. `None`: the server does
    /// not say (hosted APIs are not asked).
    fn discover_window(&self) -> BoxFuture<'static, Option<u64>> {
        Box::pin(std::future::ready(None))
    }
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
            code: None,
        };
        assert!(
            http(400, "This model's maximum context length is 8192 tokens").is_context_overflow()
        );
        assert!(http(400, "{\"code\":\"context_length_exceeded\"}").is_context_overflow());
        assert!(http(413, "prompt is too long").is_context_overflow());
        assert!(!http(400, "invalid tool schema").is_context_overflow());
        assert!(!http(500, "maximum context length is 10").is_context_overflow());
        let typed = ModelError::Http {
            status: 400,
            body: "whatever the message".into(),
            attempts: 1,
            code: Some("exceed_context_size_error".into()),
        };
        assert!(typed.is_context_overflow());
    }

    #[test]
    fn a_retry_in_progress_does_not_say_it_gave_up() {
        let error = ModelError::Connect {
            url: "u".into(),
            detail: "refused".into(),
            attempts: 3,
        };
        assert!(error.to_string().contains("gave up after 3 attempts"));
        assert!(!error.before_retry().to_string().contains("gave up"));
    }
}

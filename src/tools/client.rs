//! The editor as tools see it: a [`ClientBridge`] reads and writes files through the editor
//! (so unsaved buffers count), runs commands in its terminals, and asks the user for permission.
//! Speaks kin's own terms; the ACP implementation lives in `acp::bridge`. A session without an
//! editor (tests, background work) has no bridge and tools act locally.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ToolDisplay, ToolKind};

/// Which editor services the client advertised.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientFeatures {
    /// `fs/read_text_file`.
    pub read_text_file: bool,
    /// `fs/write_text_file`.
    pub write_text_file: bool,
    /// `terminal/*`.
    pub terminal: bool,
    /// `elicitation/create` in form mode (a question with a schema).
    pub elicitation_form: bool,
    /// `elicitation/create` in URL mode (a page the user should open).
    pub elicitation_url: bool,
}

/// Why an editor request failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The request was cancelled (by us or by the client).
    #[error("the editor request was cancelled")]
    Cancelled,
    /// The editor answered with an error.
    #[error("the editor answered {method} with an error: {message}")]
    Failed {
        /// The request.
        method: String,
        /// The editor's message.
        message: String,
    },
    /// Nobody can be asked (`kin run` without a terminal); the text says what to do instead.
    #[error("{0}")]
    NobodyToAsk(String),
}

/// What the user is asked to allow.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionPrompt {
    pub(crate) call_id: String,
    pub(crate) title: String,
    pub(crate) kind: ToolKind,
    /// What the call will do, e.g. the diff of an edit.
    pub(crate) display: ToolDisplay,
    pub(crate) raw_input: Option<Value>,
    /// For an MCP server's tool: the one tool an "always" answer covers (a built-in tool's
    /// "always" covers its kind and scope instead).
    pub(crate) server_tool: Option<ServerTool>,
}

/// One tool of one MCP server, as "always" answers about it remember it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ServerTool {
    pub(crate) server: String,
    /// The name the server knows the tool by.
    pub(crate) tool: String,
}

impl PermissionPrompt {
    /// What an "always" answer covers, as the options shown to the user word it
    /// ("Always allow commands this session", "Always allow the files tool read this session").
    pub(crate) fn always_words(&self) -> String {
        use ToolKind::*;
        if let Some(one) = &self.server_tool {
            return format!("the {} tool {}", one.server, one.tool);
        }
        match self.kind {
            Read => "reads",
            Edit => "edits",
            Delete => "deletions",
            Move => "moves",
            Search => "searches",
            Execute => "commands",
            Think | Fetch | Other => "calls of this kind",
        }
        .into()
    }
}

/// The user's answer to a [`PermissionPrompt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermissionAnswer {
    /// Allow this call.
    AllowOnce,
    /// Allow this call and the like of it for the rest of the session.
    AllowAlways,
    /// Refuse this call.
    RejectOnce,
    /// Refuse this call and the like of it for the rest of the session.
    RejectAlways,
    /// The prompt was dismissed because the turn was cancelled.
    Cancelled,
}

/// A question an MCP server puts to the user (MCP elicitation), during tool call `call_id`
/// (none for a login kin asks for on a server's behalf).
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub(crate) call_id: Option<String>,
    /// What the server says it needs, with the server named.
    pub(crate) message: String,
    pub(crate) mode: QuestionMode,
}

/// What a [`Question`] asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionMode {
    /// Values for a form: the server's JSON Schema (flat, primitive properties).
    Form {
        /// The requested schema.
        schema: Value,
    },
    /// Opening a page outside kin (a login, a payment).
    Url {
        /// The server's id of this question.
        id: String,
        /// The page.
        url: String,
    },
}

/// The user's answer to a [`Question`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Accepted, with the form's values (none for a page).
    Accept(Option<serde_json::Map<String, Value>>),
    /// Said no.
    Decline,
    /// Dismissed it.
    Cancel,
}

/// A command to run in an editor terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalSpec {
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    pub(crate) cwd: PathBuf,
    /// Set for the command on top of the editor's environment (already scrubbed by kin).
    pub(crate) env: Vec<(String, String)>,
    /// The most output the editor should keep (it drops the oldest bytes beyond this).
    pub(crate) output_byte_limit: u64,
}

/// How a terminal's command ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalExit {
    pub(crate) exit_code: Option<u32>,
    pub(crate) signal: Option<String>,
}

/// What a terminal has printed so far, and its exit if it has exited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TerminalOutput {
    pub(crate) output: String,
    /// The editor dropped the oldest output to stay within the limit.
    pub(crate) truncated: bool,
    pub(crate) exit: Option<TerminalExit>,
}

/// What a call to the editor comes to, later.
pub type ClientResult<T> = BoxFuture<'static, Result<T, ClientError>>;

/// The answer of an editor service a bridge does not offer (`kin run`, `kin mcp`): callers
/// check [`ClientBridge::features`] first, so this is only a guard.
fn not_offered<T: Send + 'static>(method: &str) -> ClientResult<T> {
    let error = ClientError::Failed {
        method: method.to_owned(),
        message: "no editor serves this session".into(),
    };
    futures::future::ready(Err(error)).boxed()
}

/// The editor's services for one session. Every request is cancellable; a cancelled request
/// still settles (with [`ClientError::Cancelled`] or the editor's own answer).
pub trait ClientBridge: Send + Sync {
    /// The services the editor advertised.
    fn features(&self) -> ClientFeatures;

    /// The bridge a delegated child of this session uses. By default the child speaks to the
    /// editor as its parent; an editor that shows children as sessions of their own gets the
    /// child's requests under the child's id.
    fn for_child(self: Arc<Self>, _child_session: &str) -> Arc<dyn ClientBridge>;

    /// Whether the editor shows a child's requests as the child's own (under its session id),
    /// so a prompt need not name the child.
    fn shows_children(&self) -> bool {
        false
    }

    /// The whole text of `path` as the editor sees it (its buffer, if open). Callers have
    /// already decided the call may touch `path` (a path outside the roots was allowed by the
    /// mode or the user): the editor is never asked about a path before that, so its answer
    /// (content, or an error saying the file is missing) cannot leak past a refusal.
    /// By default not offered, like every editor service (see [`not_offered`]).
    fn read_text_file(&self, _path: PathBuf, _cancel: CancellationToken) -> ClientResult<String> {
        not_offered("fs/read_text_file")
    }

    /// Replaces the text of `path` (the editor creates the file if missing). Decided first,
    /// as [`ClientBridge::read_text_file`].
    fn write_text_file(
        &self,
        _path: PathBuf,
        _content: String,
        _cancel: CancellationToken,
    ) -> ClientResult<()> {
        not_offered("fs/write_text_file")
    }

    /// Asks the user whether a tool call may run.
    fn request_permission(
        &self,
        prompt: PermissionPrompt,
        cancel: CancellationToken,
    ) -> ClientResult<PermissionAnswer>;

    /// Puts an MCP server's question to the user (ACP `elicitation/create`), where the editor
    /// advertised the question's mode ([`ClientFeatures`]).
    fn elicit(&self, _question: Question, _cancel: CancellationToken) -> ClientResult<Reply> {
        not_offered("elicitation/create")
    }

    /// Tells the editor that the out-of-band step of URL question `id` (an
    /// [`ClientBridge::elicit`] in URL mode the user accepted) has finished (ACP
    /// `elicitation/complete`), so it can stop waiting on it.
    fn elicitation_done(&self, _id: &str) {}

    /// Asks the user to pick one of `choices` about tool call `call_id` (`None`: they picked
    /// none, or dismissed it), as a permission question. By default only a yes/no (two
    /// choices) can be asked, as an allow (the first) or a reject (the second).
    fn choose(
        &self,
        call_id: String,
        title: String,
        choices: Vec<String>,
        cancel: CancellationToken,
    ) -> ClientResult<Option<usize>> {
        if choices.len() != 2 {
            return not_offered("session/request_permission with choices");
        }
        let prompt = PermissionPrompt {
            call_id,
            title,
            kind: ToolKind::Other,
            display: ToolDisplay::default(),
            raw_input: None,
            server_tool: None,
        };
        self.request_permission(prompt, cancel)
            .map(|answer| {
                Ok(match answer? {
                    PermissionAnswer::AllowOnce | PermissionAnswer::AllowAlways => Some(0),
                    PermissionAnswer::RejectOnce | PermissionAnswer::RejectAlways => Some(1),
                    PermissionAnswer::Cancelled => None,
                })
            })
            .boxed()
    }

    /// Starts `spec` in a new terminal shown on tool call `call_id`; returns the terminal id.
    /// The caller must release it with [`ClientBridge::release_terminal`].
    fn create_terminal(
        &self,
        _call_id: String,
        _spec: TerminalSpec,
        _cancel: CancellationToken,
    ) -> ClientResult<String> {
        not_offered("terminal/create")
    }

    /// What the terminal has printed so far.
    fn terminal_output(&self, _terminal_id: String) -> ClientResult<TerminalOutput> {
        not_offered("terminal/output")
    }

    /// Waits until the terminal's command exits.
    fn wait_for_terminal_exit(
        &self,
        _terminal_id: String,
        _cancel: CancellationToken,
    ) -> ClientResult<TerminalExit> {
        not_offered("terminal/wait_for_exit")
    }

    /// Kills the terminal's command; the terminal stays until released.
    fn kill_terminal(&self, _terminal_id: String) -> ClientResult<()> {
        not_offered("terminal/kill")
    }

    /// Releases the terminal (killing its command if it still runs).
    fn release_terminal(&self, _terminal_id: String) -> ClientResult<()> {
        not_offered("terminal/release")
    }

    /// Shows `text` as what the running call `call_id` has done so far (it replaces what was
    /// shown before). An editor that cannot show it ignores it.
    fn show_progress(&self, _call_id: &str, _text: &str) {}

    /// Tells the user something they should know about the session (an ACP `notice`). An
    /// editor that cannot show it ignores it; the log keeps a line either way.
    fn warn_user(&self, text: &str) {
        tracing::warn!("{text}");
    }

    /// Tells the user something worth knowing but not a warning (an ACP `notice` of severity
    /// info), only where the editor shows notices; the log keeps a line either way.
    fn note_user(&self, title: &str, description: &str) {
        tracing::info!(description, "{title}");
    }
}

//! `input.json`: the steps a scenario's client takes.

use serde::Deserialize;
use serde_json::Value;

use super::client::PermissionAnswerEntry;

/// A recorded scenario's input: the client's steps.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// Answers to kin's permission prompts, in order; absent: every prompt is allowed once.
    /// Used up: the run fails.
    #[serde(default)]
    pub permission_answers: Option<Vec<PermissionAnswerEntry>>,
}

/// One client action. `session` picks a session by creation index (0-based); default: the last.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Step {
    /// Sends `initialize`.
    Initialize {
        /// The client capabilities sent (`{}` when absent).
        #[serde(default)]
        client_capabilities: Option<Value>,
    },
    /// Sends `session/new` in a fresh workspace.
    NewSession {
        /// Overrides the generated workspace (e.g. a relative path, to test the error).
        #[serde(default)]
        cwd: Option<String>,
    },
    /// Sends a prompt and waits for its answer.
    Prompt {
        /// The prompt's text.
        text: String,
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends a prompt, waits for its first `session/update` (or, with `cancelOn`, for the
    /// first message kin sends with that method), then sends `session/cancel` and waits for
    /// the answer.
    PromptAndCancel {
        /// The prompt's text.
        text: String,
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
        /// The method to wait for before cancelling.
        #[serde(default)]
        cancel_on: Option<String>,
    },
    /// Sends a prompt and waits only for its first `session/update` (the turn is running).
    StartPrompt {
        /// The prompt's text.
        text: String,
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends `session/cancel`.
    Cancel {
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends `session/load`.
    LoadSession {
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends `session/resume`.
    ResumeSession {
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends `session/list`.
    ListSessions {
        /// Only the sessions of the workspace.
        #[serde(default)]
        filter_cwd: bool,
        /// The page to start from.
        #[serde(default)]
        cursor: Option<String>,
    },
    /// Sends `session/close`.
    CloseSession {
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends `session/delete`.
    DeleteSession {
        /// The session (default: the last).
        #[serde(default)]
        session: Option<usize>,
    },
    /// Any request; `{{cwd}}`, `{{session}}` and `{{session:N}}` in string params are replaced.
    Request {
        /// The method.
        method: String,
        /// Its params.
        #[serde(default)]
        params: Value,
    },
    /// Any notification (same placeholders); nothing is awaited.
    Notify {
        /// The method.
        method: String,
        /// Its params.
        #[serde(default)]
        params: Value,
    },
    /// A raw line, written as is; `replies` says whether an answer is awaited.
    Raw {
        /// The line.
        line: String,
        /// Whether kin answers it.
        #[serde(default)]
        replies: bool,
    },
    /// Waits until every previous prompt has been answered (for steps sent without waiting).
    WaitForTurnEnd {},
    /// Reads (answering kin's requests) until kin sends a message with this method.
    WaitFor {
        /// The method.
        method: String,
    },
}

//! `input.json`: the steps a scenario's client takes.

use serde::Deserialize;
use serde_json::Value;

use super::client::PermissionAnswerEntry;

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Input {
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
    Initialize {
        #[serde(default)]
        client_capabilities: Option<Value>,
    },
    NewSession {
        /// Overrides the generated workspace (e.g. a relative path, to test the error).
        #[serde(default)]
        cwd: Option<String>,
    },
    Prompt {
        text: String,
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends a prompt, waits for its first `session/update` (or, with `cancelOn`, for the
    /// first message kin sends with that method), then sends `session/cancel` and waits for
    /// the answer.
    PromptAndCancel {
        text: String,
        #[serde(default)]
        session: Option<usize>,
        #[serde(default)]
        cancel_on: Option<String>,
    },
    /// Sends a prompt and waits only for its first `session/update` (the turn is running).
    StartPrompt {
        text: String,
        #[serde(default)]
        session: Option<usize>,
    },
    /// Sends `session/cancel`.
    Cancel {
        #[serde(default)]
        session: Option<usize>,
    },
    LoadSession {
        #[serde(default)]
        session: Option<usize>,
    },
    ResumeSession {
        #[serde(default)]
        session: Option<usize>,
    },
    ListSessions {
        #[serde(default)]
        filter_cwd: bool,
        #[serde(default)]
        cursor: Option<String>,
    },
    CloseSession {
        #[serde(default)]
        session: Option<usize>,
    },
    DeleteSession {
        #[serde(default)]
        session: Option<usize>,
    },
    /// Any request; `{{cwd}}`, `{{session}}` and `{{session:N}}` in string params are replaced.
    Request {
        method: String,
        #[serde(default)]
        params: Value,
    },
    /// Any notification (same placeholders); nothing is awaited.
    Notify {
        method: String,
        #[serde(default)]
        params: Value,
    },
    /// A raw line, written as is; `replies` says whether an answer is awaited.
    Raw {
        line: String,
        #[serde(default)]
        replies: bool,
    },
    /// Waits until every previous prompt has been answered (for steps sent without waiting).
    WaitForTurnEnd {},
    /// Reads (answering kin's requests) until kin sends a message with this method.
    WaitFor { method: String },
}

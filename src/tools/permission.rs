//! Whether a tool call may go ahead: the session's [`PermissionMode`], the "always" answers the
//! user gave (per tool kind, and per scope: inside the workspace roots or outside them), and the
//! asking itself, through the editor.
//!
//! - `ask` (default): reads and searches inside the roots are free; edits, commands and anything
//!   outside the roots ask, unless an "always" answer covers them.
//! - `allow`: nothing asks, but edits outside the roots (which kin's sandbox would refuse a
//!   command) still do.
//! - `read-only`: edits and commands are refused; reads outside the roots still ask.
//!
//! An "always" answer about an MCP server's tool covers that one tool (of that server), not
//! its kind: allowing one server's tool for good allows nothing else.
//!
//! Every mode change and every answer is queued as a [`PermissionRecord`] for the session log;
//! the agent loop drains the queue (it owns the log). Knows nothing of ACP or of the log format.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::client::{ClientError, PermissionAnswer, PermissionPrompt, ServerTool};
use super::{ToolContext, ToolKind, ToolOutput};

/// How a session's tool calls are permitted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Reads inside the workspace run freely; edits, commands and paths outside it ask first.
    #[default]
    Ask,
    /// Edits and commands run without asking.
    Allow,
    /// Edits and commands are refused.
    ReadOnly,
}

impl PermissionMode {
    /// Every mode, in the order offered to the editor.
    pub const ALL: [Self; 3] = [Self::Ask, Self::Allow, Self::ReadOnly];

    /// The stable id (ACP mode id, log value).
    pub fn id(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Allow => "allow",
            Self::ReadOnly => "read-only",
        }
    }

    /// The mode with this id, if there is one.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.id() == id)
    }

    /// The stricter of two modes: `read-only` over `ask` over `allow`.
    pub(crate) fn strictest(self, other: Self) -> Self {
        let rank = |mode: Self| match mode {
            Self::Allow => 0,
            Self::Ask => 1,
            Self::ReadOnly => 2,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    /// Whether a call of this kind may change things at all in this mode (`read-only` refuses
    /// edits and commands whoever asks).
    pub(crate) fn permits_changes(self, kind: ToolKind) -> bool {
        self != Self::ReadOnly || !changes_things(kind)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Ask => "Ask",
            Self::Allow => "Allow",
            Self::ReadOnly => "Read-only",
        }
    }

    pub(crate) fn description(self) -> &'static str {
        match self {
            Self::Ask => "Reads inside the workspace are free; edits, commands and paths outside the workspace ask first",
            Self::Allow => "Edits and commands run without asking",
            Self::ReadOnly => "Edits and commands are refused",
        }
    }
}

/// Where a call reaches: inside the workspace roots, or outside them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Scope {
    Workspace,
    Outside,
}

/// One answer the user gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) call_id: String,
    pub(crate) kind: ToolKind,
    pub(crate) scope: Scope,
    pub(crate) allow: bool,
    /// "always": remembered for the rest of the session.
    pub(crate) always: bool,
    /// The MCP server's tool the answer is about (then "always" covers that tool alone).
    pub(crate) server_tool: Option<ServerTool>,
}

/// A change of the session's permission state, waiting to be written to its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PermissionRecord {
    Mode(PermissionMode),
    Decision(Decision),
}

/// What the rules say before anybody is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Allow,
    Ask,
    Refuse(String),
}

/// Kinds that change things; everything else only looks.
fn changes_things(kind: ToolKind) -> bool {
    matches!(
        kind,
        ToolKind::Edit | ToolKind::Delete | ToolKind::Move | ToolKind::Execute | ToolKind::Other
    )
}

fn kind_name(kind: ToolKind) -> &'static str {
    match kind {
        ToolKind::Read => "read",
        ToolKind::Edit => "edit",
        ToolKind::Delete => "delete",
        ToolKind::Move => "move",
        ToolKind::Search => "search",
        ToolKind::Execute => "execute",
        ToolKind::Think => "think",
        ToolKind::Fetch => "fetch",
        ToolKind::Other => "other",
    }
}

fn scope_words(scope: Scope) -> &'static str {
    match scope {
        Scope::Workspace => "",
        Scope::Outside => " outside the workspace",
    }
}

#[derive(Debug, Default)]
struct State {
    mode: PermissionMode,
    remembered: HashMap<(ToolKind, Scope), bool>,
    /// "always" answers about single MCP tools.
    remembered_tools: HashMap<ServerTool, bool>,
    unlogged: Vec<PermissionRecord>,
}

impl State {
    /// Keeps an "always" answer: for its MCP tool, or for its kind and scope.
    fn remember(&mut self, decision: &Decision) {
        match &decision.server_tool {
            Some(one) => {
                self.remembered_tools.insert(one.clone(), decision.allow);
            }
            None => {
                self.remembered
                    .insert((decision.kind, decision.scope), decision.allow);
            }
        }
    }

    /// What the rules say under `mode`, the session's own mode bounded by its ancestors'.
    fn verdict(
        &self,
        mode: PermissionMode,
        kind: ToolKind,
        scope: Scope,
        server_tool: Option<&ServerTool>,
    ) -> Verdict {
        let changes = changes_things(kind);
        if mode == PermissionMode::ReadOnly && changes {
            return Verdict::Refuse(
                "Error: the session is in read-only mode, so edits and commands are refused. \
                 Tell the user what you would change; they can switch the mode."
                    .into(),
            );
        }
        // `allow` lets edits reach no further than the sandbox lets commands write.
        let allowed = match mode {
            PermissionMode::Allow => scope == Scope::Workspace || !changes,
            _ => scope == Scope::Workspace && !changes,
        };
        if allowed {
            return Verdict::Allow;
        }
        if let Some(one) = server_tool {
            return match self.remembered_tools.get(one) {
                Some(true) => Verdict::Allow,
                Some(false) => Verdict::Refuse(format!(
                    "Error: the user chose to always reject the tool `{}` of the MCP server \
                     `{}` in this session.",
                    one.tool, one.server
                )),
                None => Verdict::Ask,
            };
        }
        match self.remembered.get(&(kind, scope)) {
            Some(true) => Verdict::Allow,
            Some(false) => Verdict::Refuse(format!(
                "Error: the user chose to always reject {} calls{} in this session.",
                kind_name(kind),
                scope_words(scope)
            )),
            None => Verdict::Ask,
        }
    }
}

/// The permission state of one session; shared by its tool calls.
#[derive(Debug, Default)]
pub struct SessionPermissions {
    state: Mutex<State>,
    changed: Notify,
    /// The parent session's permissions, for a delegated child: the child's calls are decided
    /// under the strictest mode of its own and every ancestor's, read at each call, so a
    /// parent's switch to `read-only` reaches its running children at once.
    ceiling: OnceLock<Arc<SessionPermissions>>,
}

impl SessionPermissions {
    /// Permissions starting in `mode`, nothing remembered yet.
    pub fn new(mode: PermissionMode) -> Self {
        let permissions = Self::default();
        permissions.lock().mode = mode;
        permissions
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }

    /// The session's own mode (what it was set to, and what its log records).
    pub(crate) fn mode(&self) -> PermissionMode {
        self.lock().mode
    }

    /// The mode calls are decided under: the strictest of this session's own mode and every
    /// ancestor's current one.
    pub(crate) fn effective_mode(&self) -> PermissionMode {
        let own = self.mode();
        match self.ceiling.get() {
            Some(parent) => own.strictest(parent.effective_mode()),
            None => own,
        }
    }

    /// Bounds this session by `parent`'s permissions for the rest of its life. A session is
    /// bound once (a child has one parent); a second call is ignored and returns `false`.
    pub(crate) fn bind_to_parent(&self, parent: Arc<SessionPermissions>) -> bool {
        self.ceiling.set(parent).is_ok()
    }

    /// Switches the mode; returns whether it changed (a change is queued for the log).
    pub(crate) fn set_mode(&self, mode: PermissionMode) -> bool {
        let changed = {
            let mut state = self.lock();
            let changed = state.mode != mode;
            if changed {
                state.mode = mode;
                state.unlogged.push(PermissionRecord::Mode(mode));
            }
            changed
        };
        if changed {
            self.changed.notify_one();
        }
        changed
    }

    /// Restores state read back from the log (nothing is queued).
    pub(crate) fn restore(&self, record: &PermissionRecord) {
        let mut state = self.lock();
        match record {
            PermissionRecord::Mode(mode) => state.mode = *mode,
            PermissionRecord::Decision(d) if d.always => state.remember(d),
            PermissionRecord::Decision(_) => {}
        }
    }

    /// The remembered "always" answer about one MCP server's tool, if any.
    #[cfg(test)]
    pub(crate) fn remembered_tool(&self, tool: &ServerTool) -> Option<bool> {
        self.lock().remembered_tools.get(tool).copied()
    }

    /// The remembered "always" answer for a kind and scope, if any.
    #[cfg(test)]
    pub(crate) fn remembered(&self, kind: ToolKind, scope: Scope) -> Option<bool> {
        self.lock().remembered.get(&(kind, scope)).copied()
    }

    /// Takes the records not yet written to the log.
    pub(crate) fn take_unlogged(&self) -> Vec<PermissionRecord> {
        std::mem::take(&mut self.lock().unlogged)
    }

    /// Resolves when a record may have been queued since the last call.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    fn record_answer(&self, decision: Decision) {
        {
            let mut state = self.lock();
            if decision.always {
                state.remember(&decision);
            }
            state.unlogged.push(PermissionRecord::Decision(decision));
        }
        self.changed.notify_one();
    }

    /// Decides whether the call in `cx` may do `prompt`, asking the user when the rules say so.
    /// An `Err` is the result to give the model (refused, rejected or cancelled).
    pub(crate) async fn authorize(
        &self,
        scope: Scope,
        mut prompt: PermissionPrompt,
        cx: &ToolContext,
    ) -> Result<(), ToolOutput> {
        // Whatever built the title, the user sees every character of it.
        prompt.title = super::display::safe_title(&prompt.title);
        let kind = prompt.kind;
        let mode = self.effective_mode();
        let refuse =
            |text: String| ToolOutput::error("PermissionDenied", "PERMISSION_DENIED", text);
        if !mode.permits_changes(kind) && self.mode() != mode {
            return Err(refuse(
                "Error: a session this one works for is in read-only mode, so edits and commands \
                 are refused here too. Report what you would change instead."
                    .into(),
            ));
        }
        let server_tool = prompt.server_tool.clone();
        let verdict = self.lock().verdict(mode, kind, scope, server_tool.as_ref());
        match verdict {
            Verdict::Allow => return Ok(()),
            Verdict::Refuse(text) => return Err(refuse(text)),
            Verdict::Ask => {}
        }
        let Some(client) = cx.client.clone() else {
            return Err(refuse(format!(
                "Error: this {} call{} needs the user's permission, and there is no editor to ask.",
                kind_name(kind),
                scope_words(scope)
            )));
        };
        let title = prompt.title.clone();
        let answer = client.request_permission(prompt, cx.cancel.clone()).await;
        let answer = match answer {
            Ok(answer) if !cx.cancel.is_cancelled() => answer,
            Ok(_) | Err(ClientError::Cancelled) => PermissionAnswer::Cancelled,
            Err(error) => {
                return Err(ToolOutput::error(
                    "PermissionUnavailable",
                    "PERMISSION_UNAVAILABLE",
                    format!("Error: could not ask the user for permission: {error}"),
                ))
            }
        };
        let (allow, always) = match answer {
            PermissionAnswer::AllowOnce => (true, false),
            PermissionAnswer::AllowAlways => (true, true),
            PermissionAnswer::RejectOnce => (false, false),
            PermissionAnswer::RejectAlways => (false, true),
            PermissionAnswer::Cancelled => return Err(ToolOutput::cancelled()),
        };
        self.record_answer(Decision {
            call_id: cx.call_id.clone(),
            kind,
            scope,
            allow,
            always,
            server_tool,
        });
        if allow {
            Ok(())
        } else {
            Err(refuse(format!(
                "Error: the user rejected this call ({title}). Do not retry it unchanged; \
                 ask the user how to proceed if it matters."
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(mode: PermissionMode, kind: ToolKind, scope: Scope) -> Verdict {
        State::default().verdict(mode, kind, scope, None)
    }

    #[test]
    fn modes_decide_before_anybody_is_asked() {
        use PermissionMode::*;
        use Scope::*;
        assert_eq!(verdict(Ask, ToolKind::Read, Workspace), Verdict::Allow);
        assert_eq!(verdict(Ask, ToolKind::Search, Workspace), Verdict::Allow);
        assert_eq!(verdict(Ask, ToolKind::Read, Outside), Verdict::Ask);
        assert_eq!(verdict(Ask, ToolKind::Edit, Workspace), Verdict::Ask);
        assert_eq!(verdict(Ask, ToolKind::Execute, Workspace), Verdict::Ask);
        assert_eq!(verdict(Allow, ToolKind::Edit, Outside), Verdict::Ask);
        assert_eq!(verdict(Allow, ToolKind::Read, Outside), Verdict::Allow);
        assert_eq!(verdict(Allow, ToolKind::Execute, Workspace), Verdict::Allow);
        assert!(matches!(
            verdict(ReadOnly, ToolKind::Edit, Workspace),
            Verdict::Refuse(text) if text.contains("read-only")
        ));
        assert!(matches!(
            verdict(ReadOnly, ToolKind::Execute, Workspace),
            Verdict::Refuse(_)
        ));
        assert_eq!(verdict(ReadOnly, ToolKind::Read, Workspace), Verdict::Allow);
        assert_eq!(verdict(ReadOnly, ToolKind::Read, Outside), Verdict::Ask);
    }

    #[test]
    fn always_answers_are_per_kind_and_scope() {
        let permissions = SessionPermissions::new(PermissionMode::Ask);
        permissions.record_answer(Decision {
            call_id: "c1".into(),
            kind: ToolKind::Edit,
            scope: Scope::Workspace,
            allow: true,
            always: true,
            server_tool: None,
        });
        permissions.record_answer(Decision {
            call_id: "c2".into(),
            kind: ToolKind::Execute,
            scope: Scope::Workspace,
            allow: false,
            always: true,
            server_tool: None,
        });
        let state = permissions.lock();
        let ask = PermissionMode::Ask;
        assert_eq!(
            state.verdict(ask, ToolKind::Edit, Scope::Workspace, None),
            Verdict::Allow
        );
        assert_eq!(
            state.verdict(ask, ToolKind::Edit, Scope::Outside, None),
            Verdict::Ask
        );
        assert!(matches!(
            state.verdict(ask, ToolKind::Execute, Scope::Workspace, None),
            Verdict::Refuse(text) if text.contains("always reject execute")
        ));
        drop(state);
        assert_eq!(permissions.take_unlogged().len(), 2);
        assert!(permissions.take_unlogged().is_empty());
    }

    #[test]
    fn always_answers_about_a_server_tool_cover_that_tool_alone() {
        let permissions = SessionPermissions::new(PermissionMode::Ask);
        let tool = |server: &str, tool: &str| ServerTool {
            server: server.into(),
            tool: tool.into(),
        };
        let answer = |one: ServerTool, allow| Decision {
            call_id: "c".into(),
            kind: ToolKind::Execute,
            scope: Scope::Workspace,
            allow,
            always: true,
            server_tool: Some(one),
        };
        permissions.record_answer(answer(tool("db", "query"), true));
        permissions.record_answer(answer(tool("db", "drop"), false));
        let state = permissions.lock();
        let (ask, exec, ws) = (PermissionMode::Ask, ToolKind::Execute, Scope::Workspace);
        let query = tool("db", "query");
        assert_eq!(state.verdict(ask, exec, ws, Some(&query)), Verdict::Allow);
        assert!(matches!(
            state.verdict(ask, exec, ws, Some(&tool("db", "drop"))),
            Verdict::Refuse(text) if text.contains("tool `drop` of the MCP server `db`")
        ));
        // The same tool name on another server, and built-in commands, still ask.
        let other = tool("web", "query");
        assert_eq!(state.verdict(ask, exec, ws, Some(&other)), Verdict::Ask);
        assert_eq!(state.verdict(ask, exec, ws, None), Verdict::Ask);
        // read-only still refuses a tool allowed for good.
        let read_only = PermissionMode::ReadOnly;
        assert!(matches!(
            state.verdict(read_only, exec, ws, Some(&query)),
            Verdict::Refuse(_)
        ));
    }

    #[test]
    fn mode_changes_are_queued_once_and_restores_are_not() {
        let permissions = SessionPermissions::new(PermissionMode::Ask);
        assert!(permissions.set_mode(PermissionMode::ReadOnly));
        assert!(!permissions.set_mode(PermissionMode::ReadOnly));
        assert_eq!(
            permissions.take_unlogged(),
            vec![PermissionRecord::Mode(PermissionMode::ReadOnly)]
        );
        permissions.restore(&PermissionRecord::Mode(PermissionMode::Allow));
        assert_eq!(permissions.mode(), PermissionMode::Allow);
        assert!(permissions.take_unlogged().is_empty());
        assert_eq!(
            PermissionMode::from_id("read-only"),
            Some(PermissionMode::ReadOnly)
        );
        assert_eq!(PermissionMode::from_id("yolo"), None);
    }

    #[test]
    fn a_child_is_bounded_by_every_ancestor_at_each_call() {
        use PermissionMode::*;
        let grandparent = Arc::new(SessionPermissions::new(Allow));
        let parent = Arc::new(SessionPermissions::new(Allow));
        let child = SessionPermissions::new(Allow);
        assert!(parent.bind_to_parent(grandparent.clone()));
        assert!(child.bind_to_parent(parent.clone()));
        assert!(!child.bind_to_parent(Arc::new(SessionPermissions::new(Allow))));
        assert_eq!(child.effective_mode(), Allow);

        grandparent.set_mode(ReadOnly);
        assert_eq!(child.effective_mode(), ReadOnly);
        assert_eq!(child.mode(), Allow, "the child's own mode is not rewritten");
        grandparent.set_mode(Ask);
        assert_eq!(child.effective_mode(), Ask);
        // A child cannot widen what its parent allows, whatever it sets itself.
        parent.set_mode(ReadOnly);
        grandparent.set_mode(Allow);
        child.set_mode(Allow);
        assert_eq!(child.effective_mode(), ReadOnly);
        assert!(!child.effective_mode().permits_changes(ToolKind::Execute));
        assert!(child.effective_mode().permits_changes(ToolKind::Read));
    }

    #[test]
    fn strictest_orders_read_only_over_ask_over_allow() {
        use PermissionMode::*;
        for mode in PermissionMode::ALL {
            assert_eq!(mode.strictest(mode), mode);
            assert_eq!(mode.strictest(ReadOnly), ReadOnly);
            assert_eq!(Allow.strictest(mode), mode);
        }
        assert_eq!(Ask.strictest(Allow), Ask);
    }
}

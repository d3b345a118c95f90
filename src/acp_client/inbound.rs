//! What the child sends kin unasked, decoded with the ACP schema types: `session/update`
//! notifications (only agent message text during a prompt is output; other updates only count
//! against the output cap, and are passed on to kin's tree, see [`super::forward`]) and its
//! requests to the client: `session/request_permission` ([`super::permission`]), the file
//! services ([`super::services`]) and terminals ([`super::terminals`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentNotification, AgentRequest, ContentBlock, ContentChunk, SessionNotification, SessionUpdate,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::command::MAX_OUTPUT_BYTES;
use super::forward::Forwarder;
use super::permission::{self, Asker, CommandGrants};
use super::services::FileServices;
use super::shown_terminals;
use super::terminals::TerminalServices;
use crate::config::AcpPermission;
use crate::rpc::{Handler, Reply, RequestContext, RpcError};
use crate::sync::lock;
use crate::tools::{PermissionMode, SessionPermissions};

/// A fault seen while reading the child.
#[derive(Debug, Clone)]
pub(super) enum Fault {
    Garbage(String),
    Flood,
}

/// What the child's messages leave behind; shared with the connection's handler.
#[derive(Default)]
pub(super) struct Collected {
    /// Set while a prompt is in flight: text outside one (e.g. a loaded history) is not output.
    pub(crate) collecting: AtomicBool,
    state: Mutex<CollectedState>,
    /// Tripped on the first fault.
    pub(crate) faulted: CancellationToken,
}

#[derive(Default)]
struct CollectedState {
    /// The child's own session (set once it is opened): only its text is the answer.
    session: String,
    text: String,
    bytes: usize,
    fault: Option<Fault>,
}

impl Collected {
    pub(crate) fn fail(&self, fault: Fault) {
        let mut state = lock(&self.state);
        if state.fault.is_none() {
            state.fault = Some(fault);
        }
        self.faulted.cancel();
    }

    pub(crate) fn fault(&self) -> Option<Fault> {
        lock(&self.state).fault.clone()
    }

    /// Names the child's own session, whose text alone is the answer.
    pub(crate) fn own_session(&self, session: &str) {
        lock(&self.state).session = session.to_owned();
    }

    fn opened(&self) -> bool {
        !lock(&self.state).session.is_empty()
    }

    fn is_own(&self, session: &str) -> bool {
        let state = lock(&self.state);
        !state.session.is_empty() && state.session == session
    }

    /// One `session/update`: its agent message text is output when it is `own` (the child's
    /// session, not one of its children's), anything else only counts.
    fn update(&self, params: &Value, own: bool) {
        if !self.collecting.load(Ordering::Acquire) {
            return;
        }
        let Some(update) = params.get("update") else {
            return;
        };
        let text = match AgentNotification::from_method_and_params("session/update", params) {
            Ok(AgentNotification::SessionNotification(SessionNotification {
                update: SessionUpdate::AgentMessageChunk(ContentChunk { content, .. }),
                ..
            })) => Some(match content {
                ContentBlock::Text(text) => text.text,
                _ => String::new(),
            }),
            _ => None,
        };
        let size = text
            .as_ref()
            .map_or_else(|| update.to_string().len(), String::len);
        let mut state = lock(&self.state);
        state.bytes += size;
        if state.bytes > MAX_OUTPUT_BYTES {
            drop(state);
            return self.fail(Fault::Flood);
        }
        if let Some(text) = text.filter(|_| own) {
            state.text.push_str(&text);
        }
    }

    /// The text collected since the last take.
    pub(crate) fn take(&self) -> String {
        let mut state = lock(&self.state);
        state.bytes = 0;
        std::mem::take(&mut state.text)
    }
}

/// Answers the child's requests to its client and passes its updates on.
pub(super) struct ClientHandler {
    pub(crate) collected: Arc<Collected>,
    pub(crate) permission: AcpPermission,
    pub(crate) ceiling: Option<Arc<SessionPermissions>>,
    /// The child's place in kin's tree, when it has one.
    pub(crate) forwarder: Option<Arc<Forwarder>>,
    /// Its file services (offered when it has a place in the tree).
    pub(crate) files: Option<FileServices>,
    /// Why a remote child's file requests are refused, when they are.
    pub(crate) files_refused: Option<String>,
    /// Its terminals (offered with the file services).
    pub(crate) terminals: Option<Arc<TerminalServices>>,
    /// Commands the user allowed when the child asked.
    pub(crate) grants: Arc<CommandGrants>,
}

impl ClientHandler {
    /// The delegating session's current mode.
    fn mode(&self) -> PermissionMode {
        self.ceiling
            .as_ref()
            .map_or(PermissionMode::Allow, |ceiling| ceiling.effective_mode())
    }

    /// Who asks the editor for the child's session `session` (its own id).
    fn asker(&self, session: &str) -> Option<Asker> {
        let forwarder = self.forwarder.as_ref()?;
        let link = forwarder.link();
        let client = link.client.clone()?;
        // An editor that attributes the request to the child's session needs no name.
        let name = match client.shows_children() {
            true => None,
            false => link.title.clone(),
        };
        Some(Asker {
            client,
            session: forwarder
                .kin_id(session)
                .unwrap_or_else(|| link.child.clone()),
            name,
        })
    }
}

impl ClientHandler {
    /// The refusal of a remote child's file request for `path`.
    fn refusal(&self, path: &std::path::Path) -> RpcError {
        let reason = self.files_refused.as_deref().unwrap_or_default();
        RpcError::invalid_params(format!("{}: {reason}", path.display()))
    }
}

impl ClientHandler {
    /// Whether `session` is the child's own session or one of the children it announced:
    /// traffic under any other id is not its to send (refused and logged).
    fn known_session(&self, session: &str) -> bool {
        // Before the child's session is open nothing it sends is collected or passed on (and
        // the answer naming its id may still be on its way to the task that asked).
        let known = !self.collected.opened()
            || self.collected.is_own(session)
            || self
                .forwarder
                .as_ref()
                .is_some_and(|forwarder| forwarder.kin_id(session).is_some());
        if !known {
            tracing::warn!(
                session,
                "an ACP child sent traffic under a session id that is not its own or one it \
                 announced; refused"
            );
        }
        known
    }
}

impl Handler for ClientHandler {
    fn request(&self, method: String, params: Value, cx: RequestContext) -> Reply {
        if let Some(session) = params.get("sessionId").and_then(Value::as_str) {
            if !self.known_session(session) {
                return Reply::Now(Err(RpcError::invalid_params(format!(
                    "invalid params: session {session} is not this agent's session or one it \
                     announced"
                ))));
            }
        }
        let request = match AgentRequest::from_method_and_params(&method, &params) {
            Ok(request) => request,
            Err(agent_client_protocol_schema::MethodDispatchError::UnknownMethod { .. }) => {
                return Reply::Now(Err(RpcError::method_not_found(&method)))
            }
            Err(error) => return Reply::Now(Err(RpcError::invalid_params(error.to_string()))),
        };
        match (request, &self.files, &self.terminals) {
            (AgentRequest::RequestPermissionRequest(request), _, _) => {
                let asker = self.asker(&request.session_id.0);
                let grants = self.grants.clone();
                permission::reply(
                    self.permission,
                    self.mode(),
                    request,
                    asker,
                    grants,
                    cx.cancel,
                )
            }
            (AgentRequest::ReadTextFileRequest(request), Some(files), _) => {
                files.read(request, cx.cancel)
            }
            (AgentRequest::WriteTextFileRequest(request), Some(files), _) => {
                files.write(request, self.mode(), cx.cancel)
            }
            (AgentRequest::ReadTextFileRequest(request), None, _)
                if self.files_refused.is_some() =>
            {
                Reply::Now(Err(self.refusal(&request.path)))
            }
            (AgentRequest::WriteTextFileRequest(request), None, _)
                if self.files_refused.is_some() =>
            {
                Reply::Now(Err(self.refusal(&request.path)))
            }
            (AgentRequest::CreateTerminalRequest(request), _, Some(terminals)) => {
                let asker = self.asker(&request.session_id.0);
                terminals.create(request, self.permission, self.mode(), asker, cx.cancel)
            }
            (AgentRequest::TerminalOutputRequest(request), _, Some(terminals)) => {
                terminals.output(request)
            }
            (AgentRequest::WaitForTerminalExitRequest(request), _, Some(terminals)) => {
                terminals.wait(request, cx.cancel)
            }
            (AgentRequest::KillTerminalRequest(request), _, Some(terminals)) => {
                terminals.kill(request)
            }
            (AgentRequest::ReleaseTerminalRequest(request), _, Some(terminals)) => {
                terminals.release(request)
            }
            _ => Reply::Now(Err(RpcError::method_not_found(&method))),
        }
    }

    fn notification(&self, method: String, params: Value) {
        if method == "session/update" {
            // Only the child's own session's text is its answer.
            let session = params
                .get("sessionId")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !self.known_session(session) {
                return;
            }
            self.collected
                .update(&params, self.collected.is_own(session));
            if let Some(forwarder) = &self.forwarder {
                if self.collected.collecting.load(Ordering::Acquire) {
                    if let Ok(mut note) = serde_json::from_value::<SessionNotification>(params) {
                        // The editor cannot show a terminal kin ran for the child by its id.
                        let terminals = self.terminals.as_deref();
                        shown_terminals::show(&mut note.update, |id| {
                            terminals.and_then(|terminals| terminals.shown(id))
                        });
                        forwarder.update(note);
                    }
                }
            }
        }
    }

    fn invalid(&self, error: &RpcError) {
        self.collected.fail(Fault::Garbage(error.message.clone()));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn chunk(kind: &str, text: &str) -> Value {
        json!({"sessionId": "s", "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}})
    }

    #[test]
    fn only_message_text_during_a_prompt_is_output() {
        let collected = Collected::default();
        collected.update(&chunk("agent_message_chunk", "history"), true);
        collected.collecting.store(true, Ordering::Release);
        collected.update(&chunk("agent_message_chunk", "a"), true);
        collected.update(&chunk("agent_thought_chunk", "hmm"), true);
        collected.update(
            &json!({"sessionId": "s", "update": {"sessionUpdate": "not_in_acp"}}),
            true,
        );
        collected.update(&chunk("agent_message_chunk", "b"), true);
        collected.update(&chunk("agent_message_chunk", "a child's"), false);
        assert_eq!(collected.take(), "ab");
    }

    #[test]
    fn too_much_output_is_a_flood() {
        let collected = Collected::default();
        collected.collecting.store(true, Ordering::Release);
        let big = "x".repeat(MAX_OUTPUT_BYTES / 2 + 1);
        collected.update(&chunk("agent_message_chunk", &big), true);
        assert!(!collected.faulted.is_cancelled());
        // Updates that are not output count too.
        collected.update(&chunk("agent_thought_chunk", &big), true);
        assert!(collected.faulted.is_cancelled());
        assert!(matches!(collected.fault(), Some(Fault::Flood)));
    }
}

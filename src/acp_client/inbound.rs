//! What the child sends kin unasked, decoded with the ACP schema types: `session/update`
//! notifications (only agent message text during a prompt is output; other updates only count
//! against the output cap) and its requests to the client (only `session/request_permission` is
//! answered, by the configured policy).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentNotification, AgentRequest, ContentBlock, ContentChunk, PermissionOptionKind,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::command::MAX_OUTPUT_BYTES;
use crate::config::AcpPermission;
use crate::rpc::{Handler, Reply, RequestContext, RpcError};
use crate::sync::lock;
use crate::tools::{PermissionMode, SessionPermissions, ToolKind};

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
    pub collecting: AtomicBool,
    state: Mutex<CollectedState>,
    /// Tripped on the first fault.
    pub faulted: CancellationToken,
}

#[derive(Default)]
struct CollectedState {
    text: String,
    bytes: usize,
    fault: Option<Fault>,
}

impl Collected {
    pub fn fail(&self, fault: Fault) {
        let mut state = lock(&self.state);
        if state.fault.is_none() {
            state.fault = Some(fault);
        }
        self.faulted.cancel();
    }

    pub fn fault(&self) -> Option<Fault> {
        lock(&self.state).fault.clone()
    }

    /// One `session/update`: its agent message text is output, anything else only counts.
    fn update(&self, params: &Value) {
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
        if let Some(text) = text {
            state.text.push_str(&text);
        }
    }

    /// The text collected since the last take.
    pub fn take(&self) -> String {
        let mut state = lock(&self.state);
        state.bytes = 0;
        std::mem::take(&mut state.text)
    }
}

/// Answers the child's requests to its client.
pub(super) struct ClientHandler {
    pub collected: Arc<Collected>,
    pub permission: AcpPermission,
    pub ceiling: Option<Arc<SessionPermissions>>,
}

impl Handler for ClientHandler {
    fn request(&self, method: String, params: Value, _cx: RequestContext) -> Reply {
        Reply::Now(
            match AgentRequest::from_method_and_params(&method, &params) {
                Ok(AgentRequest::RequestPermissionRequest(request)) => {
                    let mode = self
                        .ceiling
                        .as_ref()
                        .map_or(PermissionMode::Allow, |ceiling| ceiling.effective_mode());
                    serde_json::to_value(permission_answer(self.permission, mode, &request))
                        .map_err(|error| RpcError::internal(error.to_string()))
                }
                Ok(_)
                | Err(agent_client_protocol_schema::MethodDispatchError::UnknownMethod {
                    ..
                }) => Err(RpcError::method_not_found(&method)),
                Err(error) => Err(RpcError::invalid_params(error.to_string())),
            },
        )
    }

    fn notification(&self, method: String, params: Value) {
        if method == "session/update" {
            self.collected.update(&params);
        }
    }

    fn invalid(&self, error: &RpcError) {
        self.collected.fail(Fault::Garbage(error.message.clone()));
    }
}

/// Answers a child's permission request within `policy` and `mode`, the delegating session's
/// current mode. `allow` picks the child's one-time allowing option: never `allow_always`, which
/// would grant the child more than this one call on the parent's behalf. Everything else is
/// `cancelled`: the `reject` and `ask` policies, a request with no one-time allowing option, and
/// under a `read-only` parent any request to change things (a kind kin cannot read counts as one).
fn permission_answer(
    policy: AcpPermission,
    mode: PermissionMode,
    request: &RequestPermissionRequest,
) -> RequestPermissionResponse {
    if policy == AcpPermission::Ask {
        tracing::info!("a child agent asked for permission; `ask` is answered as `reject` for now");
    }
    // ACP's kinds and kin's share their names; one kin does not know is `other`.
    let kind = request
        .tool_call
        .fields
        .kind
        .and_then(|kind| serde_json::to_value(kind).ok())
        .and_then(|kind| serde_json::from_value::<ToolKind>(kind).ok())
        .unwrap_or(ToolKind::Other);
    let permitted = mode.permits_changes(kind);
    if !permitted {
        tracing::info!(
            ?kind,
            "a child agent asked to change things under a read-only parent"
        );
    }
    let allowing = (policy == AcpPermission::Allow && permitted)
        .then(|| {
            request
                .options
                .iter()
                .find(|option| option.kind == PermissionOptionKind::AllowOnce)
        })
        .flatten();
    RequestPermissionResponse::new(match allowing {
        Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
            option.option_id.clone(),
        )),
        None => RequestPermissionOutcome::Cancelled,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(policy: AcpPermission, mode: PermissionMode, call: Value, options: Value) -> Value {
        let params = json!({"sessionId": "s", "toolCall": call, "options": options});
        let request: RequestPermissionRequest =
            serde_json::from_value(params).expect("a permission request");
        serde_json::to_value(permission_answer(policy, mode, &request)).expect("an answer")
    }

    #[test]
    fn permission_policies() {
        let call = || json!({"toolCallId": "t"});
        let options = json!([
            {"optionId": "no", "kind": "reject_once", "name": "No"},
            {"optionId": "always", "kind": "allow_always", "name": "Always"},
            {"optionId": "yes", "kind": "allow_once", "name": "Yes"},
        ]);
        let selected = |policy| answer(policy, PermissionMode::Ask, call(), options.clone());
        assert_eq!(
            selected(AcpPermission::Allow),
            json!({"outcome": {"outcome": "selected", "optionId": "yes"}})
        );
        for policy in [AcpPermission::Reject, AcpPermission::Ask] {
            assert_eq!(
                selected(policy),
                json!({"outcome": {"outcome": "cancelled"}})
            );
        }
        let only_always = json!([
            {"optionId": "no", "kind": "reject_once", "name": "No"},
            {"optionId": "always", "kind": "allow_always", "name": "Always"},
        ]);
        assert_eq!(
            answer(
                AcpPermission::Allow,
                PermissionMode::Allow,
                call(),
                only_always
            ),
            json!({"outcome": {"outcome": "cancelled"}}),
            "allow_always is never chosen on the parent's behalf"
        );
    }

    #[test]
    fn a_read_only_parent_refuses_its_childs_changes_whatever_the_policy() {
        let options = || json!([{"optionId": "yes", "kind": "allow_once", "name": "Yes"}]);
        let with_kind = |mode, kind: &str| {
            let call = json!({"toolCallId": "c", "kind": kind});
            answer(AcpPermission::Allow, mode, call, options())
        };
        let cancelled = json!({"outcome": {"outcome": "cancelled"}});
        let yes = json!({"outcome": {"outcome": "selected", "optionId": "yes"}});
        for kind in ["edit", "execute", "delete", "move", "other", "unheard-of"] {
            assert_eq!(
                with_kind(PermissionMode::ReadOnly, kind),
                cancelled,
                "{kind}"
            );
            assert_eq!(with_kind(PermissionMode::Ask, kind), yes, "{kind}");
        }
        assert_eq!(with_kind(PermissionMode::ReadOnly, "read"), yes);
        let no_kind = json!({"toolCallId": "c"});
        assert_eq!(
            answer(
                AcpPermission::Allow,
                PermissionMode::ReadOnly,
                no_kind,
                options()
            ),
            cancelled
        );
    }

    fn chunk(kind: &str, text: &str) -> Value {
        json!({"sessionId": "s", "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}})
    }

    #[test]
    fn only_message_text_during_a_prompt_is_output() {
        let collected = Collected::default();
        collected.update(&chunk("agent_message_chunk", "history"));
        collected.collecting.store(true, Ordering::Release);
        collected.update(&chunk("agent_message_chunk", "a"));
        collected.update(&chunk("agent_thought_chunk", "hmm"));
        collected.update(&json!({"sessionId": "s", "update": {"sessionUpdate": "not_in_acp"}}));
        collected.update(&chunk("agent_message_chunk", "b"));
        assert_eq!(collected.take(), "ab");
    }

    #[test]
    fn too_much_output_is_a_flood() {
        let collected = Collected::default();
        collected.collecting.store(true, Ordering::Release);
        let big = "x".repeat(MAX_OUTPUT_BYTES / 2 + 1);
        collected.update(&chunk("agent_message_chunk", &big));
        assert!(!collected.faulted.is_cancelled());
        // Updates that are not output count too.
        collected.update(&chunk("agent_thought_chunk", &big));
        assert!(collected.faulted.is_cancelled());
        assert!(matches!(collected.fault(), Some(Fault::Flood)));
    }
}

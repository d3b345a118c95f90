//! What the child sends kin unasked, decoded with the ACP schema types: `session/update`
//! notifications (only agent message text during a prompt is output; other updates only count
//! against the output cap) and its requests to the client (only `session/request_permission` is
//! answered, by the configured policy).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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
    pub collected: std::sync::Arc<Collected>,
    pub permission: AcpPermission,
}

impl Handler for ClientHandler {
    fn request(&self, method: String, params: Value, _cx: RequestContext) -> Reply {
        Reply::Now(
            match AgentRequest::from_method_and_params(&method, &params) {
                Ok(AgentRequest::RequestPermissionRequest(request)) => {
                    serde_json::to_value(permission_answer(self.permission, &request))
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

/// `allow` picks the first allowing option; everything else is `cancelled`.
fn permission_answer(
    policy: AcpPermission,
    request: &RequestPermissionRequest,
) -> RequestPermissionResponse {
    if policy == AcpPermission::Ask {
        tracing::info!("a child agent asked for permission; `ask` is answered as `reject` for now");
    }
    let allowing = (policy == AcpPermission::Allow)
        .then(|| {
            request.options.iter().find(|option| {
                matches!(
                    option.kind,
                    PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
                )
            })
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

    fn answer(policy: AcpPermission, options: Value) -> Value {
        let params = json!({
            "sessionId": "s",
            "toolCall": {"toolCallId": "t"},
            "options": options,
        });
        let request: RequestPermissionRequest =
            serde_json::from_value(params).expect("a permission request");
        serde_json::to_value(permission_answer(policy, &request)).expect("an answer")
    }

    #[test]
    fn permission_policies() {
        let options = json!([
            {"optionId": "no", "kind": "reject_once", "name": "No"},
            {"optionId": "yes", "kind": "allow_once", "name": "Yes"},
        ]);
        assert_eq!(
            answer(AcpPermission::Allow, options.clone()),
            json!({"outcome": {"outcome": "selected", "optionId": "yes"}})
        );
        for policy in [AcpPermission::Reject, AcpPermission::Ask] {
            assert_eq!(
                answer(policy, options.clone()),
                json!({"outcome": {"outcome": "cancelled"}})
            );
        }
        let no_allow = json!([{"optionId": "no", "kind": "reject_once", "name": "No"}]);
        assert_eq!(
            answer(AcpPermission::Allow, no_allow),
            json!({"outcome": {"outcome": "cancelled"}})
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

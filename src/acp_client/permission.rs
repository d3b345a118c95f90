//! A child's `session/request_permission`, answered within the configured policy and the
//! delegating session's current mode: `allow` picks the child's one-time allowing option,
//! `reject` its rejecting option, and `ask` (the default) asks the editor, attributed to the
//! child, and answers with the child's option matching the user's choice. An answer never says
//! `cancelled` unless the user's prompt was cancelled: to the child that aborts its whole run.
//!
//! Under a `read-only` parent, a request to change things (a kind kin cannot read counts as
//! one) is rejected whatever the policy; under an `allow` parent, `ask` allows without asking,
//! as the parent's own tools do. `allow_always` is only chosen when the user chose it.

use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome,
};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use crate::config::AcpPermission;
use crate::rpc::{Reply, RpcError};
use crate::sync::lock;
use crate::tools::client::{PermissionAnswer, PermissionPrompt};
use crate::tools::{ClientBridge, PermissionMode, ToolDisplay, ToolKind};

/// Who to ask: the editor, and the child as the editor knows it.
pub(super) struct Asker {
    pub(crate) client: Arc<dyn ClientBridge>,
    /// kin's id for the requesting session of the child.
    pub(crate) session: String,
    /// Names the child in the prompt's title (for editors that show it on the parent).
    pub(crate) name: Option<String>,
}

/// What kin decides before anyone is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decision {
    Choose(PermissionAnswer),
    Ask,
}

/// ACP's kinds and kin's share their names; one kin does not know is `other`.
fn kind_of(request: &RequestPermissionRequest) -> ToolKind {
    request
        .tool_call
        .fields
        .kind
        .and_then(|kind| serde_json::to_value(kind).ok())
        .and_then(|kind| serde_json::from_value::<ToolKind>(kind).ok())
        .unwrap_or(ToolKind::Other)
}

pub(super) fn decide(policy: AcpPermission, mode: PermissionMode, kind: ToolKind) -> Decision {
    if !mode.permits_changes(kind) {
        tracing::info!(
            ?kind,
            "a child agent asked to change things under a read-only parent"
        );
        return Decision::Choose(PermissionAnswer::RejectOnce);
    }
    match (policy, mode) {
        (AcpPermission::Allow, _) | (AcpPermission::Ask, PermissionMode::Allow) => {
            Decision::Choose(PermissionAnswer::AllowOnce)
        }
        (AcpPermission::Reject, _) => Decision::Choose(PermissionAnswer::RejectOnce),
        (AcpPermission::Ask, _) => Decision::Ask,
    }
}

/// The child's option for `answer`: the exact kind, else its once/always sibling (never
/// widening an allow-once to always), else `cancelled` when the child offered none.
fn outcome(
    request: &RequestPermissionRequest,
    answer: PermissionAnswer,
) -> RequestPermissionResponse {
    use PermissionOptionKind::*;
    let preferences: &[PermissionOptionKind] = match answer {
        PermissionAnswer::AllowOnce => &[AllowOnce],
        PermissionAnswer::AllowAlways => &[AllowAlways, AllowOnce],
        PermissionAnswer::RejectOnce => &[RejectOnce, RejectAlways],
        PermissionAnswer::RejectAlways => &[RejectAlways, RejectOnce],
        PermissionAnswer::Cancelled => &[],
    };
    let chosen = preferences
        .iter()
        .find_map(|kind| request.options.iter().find(|option| option.kind == *kind));
    let chosen = chosen.or_else(|| {
        // Refusing must not abort the child: any rejecting option will do.
        matches!(answer, PermissionAnswer::AllowOnce)
            .then(|| {
                request
                    .options
                    .iter()
                    .find(|option| matches!(option.kind, RejectOnce | RejectAlways))
            })
            .flatten()
    });
    RequestPermissionResponse::new(match chosen {
        Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
            option.option_id.clone(),
        )),
        None => RequestPermissionOutcome::Cancelled,
    })
}

fn encoded(response: RequestPermissionResponse) -> Result<serde_json::Value, RpcError> {
    serde_json::to_value(response).map_err(|error| RpcError::internal(error.to_string()))
}

/// The prompt's title: the child's, named after the child when `name` is given.
pub(super) fn titled(name: Option<&str>, title: String) -> String {
    match name {
        Some(name) => format!("{name}: {title}"),
        None => title,
    }
}

/// The prompt the user sees for the child's request.
fn prompt(
    request: &RequestPermissionRequest,
    kind: ToolKind,
    name: Option<&str>,
) -> PermissionPrompt {
    let fields = &request.tool_call.fields;
    let title = fields.title.clone().unwrap_or_else(|| "a tool call".into());
    PermissionPrompt {
        call_id: request.tool_call.tool_call_id.0.to_string(),
        title: titled(name, title),
        kind,
        display: ToolDisplay::default(),
        raw_input: fields.raw_input.clone(),
        server_tool: None,
    }
}

/// Commands the user allowed when the child asked about them (a request of kind `execute`),
/// so that the `terminal/create` that follows runs without asking twice: an allow-once covers
/// the next command only, an allow-always every command of the child's session.
#[derive(Default)]
pub(super) struct CommandGrants(Mutex<(bool, bool)>);

impl CommandGrants {
    pub(crate) fn record(&self, answer: PermissionAnswer) {
        let mut grants = lock(&self.0);
        match answer {
            PermissionAnswer::AllowOnce => grants.0 = true,
            PermissionAnswer::AllowAlways => grants.1 = true,
            _ => grants.0 = false,
        }
    }

    /// Whether one command may run on an earlier answer (using up an allow-once).
    pub(crate) fn take(&self) -> bool {
        let mut grants = lock(&self.0);
        grants.1 || std::mem::take(&mut grants.0)
    }
}

/// Answers one permission request of the child (see the module doc); `asker` is `None` when
/// no editor can be asked (then `ask` rejects). The user's answer about a command is kept in
/// `grants`.
pub(super) fn reply(
    policy: AcpPermission,
    mode: PermissionMode,
    request: RequestPermissionRequest,
    asker: Option<Asker>,
    grants: Arc<CommandGrants>,
    cancel: CancellationToken,
) -> Reply {
    let kind = kind_of(&request);
    let answer = match (decide(policy, mode, kind), asker) {
        (Decision::Choose(answer), _) => answer,
        (Decision::Ask, None) => {
            tracing::info!("a child agent asked for permission and no editor can be asked");
            PermissionAnswer::RejectOnce
        }
        (Decision::Ask, Some(asker)) => {
            let shown = prompt(&request, kind, asker.name.as_deref());
            let client = asker.client.for_child(&asker.session);
            return Reply::Later(
                async move {
                    let answer = match client.request_permission(shown, cancel).await {
                        Ok(answer) => answer,
                        Err(error) => {
                            tracing::info!(%error, "the editor did not answer a child's permission request");
                            PermissionAnswer::RejectOnce
                        }
                    };
                    if kind == ToolKind::Execute {
                        grants.record(answer);
                    }
                    encoded(outcome(&request, answer))
                }
                .boxed(),
            );
        }
    };
    Reply::Now(encoded(outcome(&request, answer)))
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn request(kind: Option<&str>, options: Value) -> RequestPermissionRequest {
        let mut call = json!({"toolCallId": "t"});
        if let Some(kind) = kind {
            call["kind"] = kind.into();
        }
        serde_json::from_value(json!({"sessionId": "s", "toolCall": call, "options": options}))
            .expect("a permission request")
    }

    fn all_options() -> Value {
        json!([
            {"optionId": "no", "kind": "reject_once", "name": "No"},
            {"optionId": "always", "kind": "allow_always", "name": "Always"},
            {"optionId": "yes", "kind": "allow_once", "name": "Yes"},
        ])
    }

    fn chosen(request: &RequestPermissionRequest, answer: PermissionAnswer) -> Value {
        serde_json::to_value(outcome(request, answer)).expect("an answer")["outcome"].clone()
    }

    #[test]
    fn policies_decide_within_the_parents_mode() {
        use PermissionMode::*;
        let allow = Decision::Choose(PermissionAnswer::AllowOnce);
        let reject = Decision::Choose(PermissionAnswer::RejectOnce);
        assert_eq!(decide(AcpPermission::Allow, Ask, ToolKind::Edit), allow);
        assert_eq!(decide(AcpPermission::Reject, Allow, ToolKind::Read), reject);
        assert_eq!(
            decide(AcpPermission::Ask, Ask, ToolKind::Execute),
            Decision::Ask
        );
        assert_eq!(decide(AcpPermission::Ask, Allow, ToolKind::Execute), allow);
        for policy in [AcpPermission::Allow, AcpPermission::Ask] {
            for kind in [ToolKind::Edit, ToolKind::Execute, ToolKind::Other] {
                assert_eq!(decide(policy, ReadOnly, kind), reject, "{kind:?}");
            }
            assert_ne!(decide(policy, ReadOnly, ToolKind::Read), reject);
        }
    }

    #[test]
    fn answers_pick_the_childs_matching_option_and_reject_never_cancels() {
        let request = request(Some("execute"), all_options());
        let selected = |id: &str| json!({"outcome": "selected", "optionId": id});
        assert_eq!(
            chosen(&request, PermissionAnswer::AllowOnce),
            selected("yes")
        );
        assert_eq!(
            chosen(&request, PermissionAnswer::AllowAlways),
            selected("always")
        );
        assert_eq!(
            chosen(&request, PermissionAnswer::RejectOnce),
            selected("no")
        );
        assert_eq!(
            chosen(&request, PermissionAnswer::RejectAlways),
            selected("no")
        );
        assert_eq!(
            chosen(&request, PermissionAnswer::Cancelled),
            json!({"outcome": "cancelled"})
        );
        let only_always = request_with(json!([
            {"optionId": "no", "kind": "reject_once", "name": "No"},
            {"optionId": "always", "kind": "allow_always", "name": "Always"},
        ]));
        assert_eq!(
            chosen(&only_always, PermissionAnswer::AllowOnce),
            selected("no"),
            "allow_always is never chosen on the parent's behalf"
        );
    }

    fn request_with(options: Value) -> RequestPermissionRequest {
        request(None, options)
    }

    #[test]
    fn an_unknown_kind_counts_as_a_change() {
        assert_eq!(
            kind_of(&request(Some("unheard-of"), all_options())),
            ToolKind::Other
        );
        assert_eq!(kind_of(&request(None, all_options())), ToolKind::Other);
        assert_eq!(
            kind_of(&request(Some("read"), all_options())),
            ToolKind::Read
        );
    }
}

//! ACP subagent sessions: for a client that opted in (`clientCapabilities.subagents`), each
//! in-process child is announced on its parent with `subagent_update` before anything carries
//! its id, its own events flow as `session/update`s under its own session id, and its state
//! goes `running` -> `idle` with the stop reason. A child agent process is announced and its
//! updates passed on the same way, under ids kin allocated (`acp_client::forward`). Clients
//! that did not opt in see children only as the parent's tool calls, which for a child process
//! carry a summary of what it did.

use agent_client_protocol_schema::v1::{
    ContentBlock, Error as AcpError, ErrorStopReason, IdleStateUpdate, IdleStopReason,
    OtherStopReason, RunningStateUpdate, SessionCancelCapabilities, SessionNotification,
    SessionUpdate, StateUpdate, SubagentSessionCapabilities, SubagentUpdate, ToolCallContent,
    ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::json;

use std::sync::Arc;

use super::{models, updates};
use crate::agent::host::HostEvent;
use crate::agent::Agent;
use crate::agent::StopReason;
use crate::delegation::one_line;
use crate::delegation::Delegation;
use crate::model::ModelCatalog;
use crate::rpc::Peer;
use crate::session::{EventBody, TurnEndReason};

fn idle(stop: StopReason) -> IdleStopReason {
    match stop {
        StopReason::Completed => IdleStopReason::EndTurn,
        StopReason::MaxTokens => IdleStopReason::MaxTokens,
        StopReason::Refusal => IdleStopReason::Refusal,
        StopReason::Cancelled => IdleStopReason::Cancelled,
        StopReason::MaxSteps | StopReason::Error => IdleStopReason::Error(ErrorStopReason::new()),
        // ACP has no stop reason for a limit; `_`-prefixed reasons are the extension space.
        StopReason::TimedOut => {
            IdleStopReason::Other(OtherStopReason::new("_timed_out", Default::default()))
        }
        StopReason::BudgetExhausted => IdleStopReason::Other(OtherStopReason::new(
            "_budget_exhausted",
            Default::default(),
        )),
    }
}

/// Why the last turn of `agent` failed, in one line, from its `turn/end` (the editor shows it
/// with the child's error state).
fn failure_of(agent: &Agent) -> Option<String> {
    agent.with_events(|events| {
        let last = events.iter().rev().find_map(|event| match &event.body {
            EventBody::TurnEnd(end) => Some(&end.reason),
            _ => None,
        });
        match last {
            Some(TurnEndReason::Error {
                message: Some(message),
                ..
            }) => Some(one_line(message)),
            _ => None,
        }
    })
}

/// Whether `agent` is a child delegated in this process (not a session the client opened).
fn is_child(agent: &Agent) -> bool {
    agent.options.subagent_depth.is_some()
}

/// Turns host events into `session/update`s for the client on `peer`: the events of the
/// sessions it prompts always, those of children only if it opted in (`subagents`).
/// After each model call, a `usage_update` (see [`models::usage_update`]; a root session's
/// carries its tree's budget from `delegation`); compaction
/// updates only when the client takes them (`compaction`).
pub(crate) fn forward(
    peer: Peer,
    subagents: bool,
    compaction: bool,
    catalog: Arc<ModelCatalog>,
    delegation: Arc<Delegation>,
) -> impl Fn(&HostEvent<'_>) + Send + Sync + 'static {
    move |event| {
        let (session, update) = match *event {
            HostEvent::Appended { agent, event } => {
                if is_child(agent) && !subagents {
                    return;
                }
                // An MCP tool's call shows the server tool's title.
                let tools = match &event.body {
                    EventBody::ToolCall(call) => agent.tools_for(&call.name),
                    _ => agent.tools.clone(),
                };
                let mut out: Vec<SessionUpdate> =
                    updates::live(event, &tools, Some(&agent.blob_dir()))
                        .into_iter()
                        .collect();
                if matches!(event.body, EventBody::AssistantMessage(_)) {
                    let budget = delegation.budget_meta(&agent.id);
                    out.extend(models::usage_update(&catalog, agent, budget));
                }
                if compaction {
                    out.extend(models::compaction_updates(event));
                }
                for update in out {
                    let note = SessionNotification::new(agent.id.clone(), update);
                    peer.notify("session/update", &note);
                }
                return;
            }
            HostEvent::ChildUpdate { session, update } => {
                if subagents {
                    let note = json!({"sessionId": session, "update": update});
                    peer.notify("session/update", &note);
                }
                return;
            }
            HostEvent::ChildSummary {
                parent,
                call_id,
                text,
            } => {
                if !subagents {
                    let content = ToolCallContent::from(ContentBlock::from(text.to_owned()));
                    let fields = ToolCallUpdateFields::new().content(vec![content]);
                    let update = ToolCallUpdate::new(call_id.to_owned(), fields);
                    (parent.to_owned(), SessionUpdate::ToolCallUpdate(update))
                } else {
                    return;
                }
            }
            HostEvent::ChildStarted { .. } | HostEvent::TurnEnded { .. } if !subagents => return,
            HostEvent::ChildStarted {
                parent,
                child,
                label,
            } => {
                // The client may cancel the child's turn (`session/cancel` on its id).
                let cancel =
                    SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new());
                let mut update = SubagentUpdate::new(child.id.clone())
                    .state(StateUpdate::Running(RunningStateUpdate::new()))
                    .cwd(child.cwd.clone())
                    .capabilities(cancel);
                if let Some(label) = label {
                    update = update.title(label.to_owned());
                }
                (parent.to_owned(), SessionUpdate::SubagentUpdate(update))
            }
            HostEvent::TurnEnded { agent, stop, .. } => {
                let Some(parent) = agent
                    .header()
                    .parent_session
                    .clone()
                    .filter(|_| is_child(agent))
                else {
                    return;
                };
                let reason = match (idle(stop), failure_of(agent)) {
                    (IdleStopReason::Error(error), Some(why)) => {
                        IdleStopReason::Error(error.error(AcpError::new(-32603, why)))
                    }
                    (reason, _) => reason,
                };
                let state = IdleStateUpdate::new().stop_reason(reason);
                let update = SubagentUpdate::new(agent.id.clone()).state(StateUpdate::Idle(state));
                (parent, SessionUpdate::SubagentUpdate(update))
            }
        };
        peer.notify("session/update", &SessionNotification::new(session, update));
    }
}

//! ACP subagent sessions: for a client that opted in (`clientCapabilities.subagents`), each
//! in-process child is announced on its parent with `subagent_update` before anything carries
//! its id, its own events flow as `session/update`s under its own session id, and its state
//! goes `running` -> `idle` with the stop reason. Clients that did not opt in see children only
//! as the parent's tool calls.

use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ErrorStopReason, IdleStateUpdate, IdleStopReason, RunningStateUpdate, SessionNotification,
    SessionUpdate, StateUpdate, SubagentUpdate,
};

use super::updates;
use crate::rpc::Peer;
use crate::runtime::ChildSink;
use crate::subagent::{ChildNotice, StopReason};
use crate::tools::ToolRegistry;

fn idle(stop_reason: StopReason) -> IdleStopReason {
    match stop_reason {
        StopReason::Completed => IdleStopReason::EndTurn,
        StopReason::MaxTokens => IdleStopReason::MaxTokens,
        StopReason::Refusal => IdleStopReason::Refusal,
        StopReason::Aborted => IdleStopReason::Cancelled,
        StopReason::Error => IdleStopReason::Error(ErrorStopReason::new()),
    }
}

/// Reports children to the client over `peer`.
pub fn sink(peer: Peer, tools: Arc<ToolRegistry>) -> ChildSink {
    Arc::new(move |notice| {
        let (session, update) = match notice {
            ChildNotice::Started {
                parent,
                child,
                label,
            } => {
                let mut update = SubagentUpdate::new(child.id.clone())
                    .state(StateUpdate::Running(RunningStateUpdate::new()))
                    .cwd(child.cwd.clone());
                if let Some(label) = label {
                    update = update.title(label.to_owned());
                }
                (parent.to_owned(), SessionUpdate::SubagentUpdate(update))
            }
            ChildNotice::Event { child, event } => match updates::live(event, &tools) {
                Some(update) => (child.to_owned(), update),
                None => return,
            },
            ChildNotice::Settled {
                parent,
                child,
                stop_reason,
            } => {
                let state = IdleStateUpdate::new().stop_reason(idle(stop_reason));
                let update = SubagentUpdate::new(child.to_owned()).state(StateUpdate::Idle(state));
                (parent.to_owned(), SessionUpdate::SubagentUpdate(update))
            }
        };
        peer.notify("session/update", &SessionNotification::new(session, update));
    })
}

//! `session/load` for a client that opted into subagents: after the session's own history,
//! each stored child of it (in-process children and the records of ACP children) is announced
//! on it, oldest first, with the title it was announced with live (its delegation's
//! description, kept in its header), its cwd and true state, then its own children under it,
//! so a reopened editor can rebuild the tree. Loading a child's id then replays its transcript.
//!
//! The tree is the live one: a kin child sharing this store is not shown a level deeper than
//! live, and its children keep the ids they were announced with (see `announce_under`).
//!
//! A child is `running` while one of its activations is: its log has a turn with no end yet
//! and some process (this one or another) holds the log's lock, as an activation does. Else
//! its state is its last turn's stop (`unknown` before any), so a crash mid-turn does not
//! replay as running forever.

use agent_client_protocol_schema::v1::{
    ErrorStopReason, IdleStateUpdate, IdleStopReason, RunningStateUpdate,
    SessionCancelCapabilities, SessionNotification, SessionUpdate, StateUpdate,
    SubagentSessionCapabilities, SubagentUpdate, UnknownStateUpdate,
};

use crate::rpc::Peer;
use crate::session::SessionStore;

/// How deep the replay goes (a guard against a cycle of parents in damaged records).
const MAX_DEPTH: usize = 16;

/// The state a child's last `turn/end` reason (kind) reports; `unknown` without one.
fn last_state(last_stop: Option<&str>) -> StateUpdate {
    let reason = match last_stop {
        None => return StateUpdate::Unknown(UnknownStateUpdate::new()),
        Some("completed") => IdleStopReason::EndTurn,
        Some("max-tokens") => IdleStopReason::MaxTokens,
        Some("refusal") => IdleStopReason::Refusal,
        Some("aborted" | "disposed" | "interrupted") => IdleStopReason::Cancelled,
        Some(_) => IdleStopReason::Error(ErrorStopReason::new()),
    };
    StateUpdate::Idle(IdleStateUpdate::new().stop_reason(reason))
}

/// Whether stored child `id` is the record of an ACP child: a log without a single tool call
/// (an in-process child has children only through its tool calls).
fn is_acp_record(store: &SessionStore, id: &str) -> bool {
    store.has_tool_call(id) == Some(false)
}

/// Announces the stored children of `parent` (and theirs) to the client on `peer`.
pub(crate) fn announce_children(peer: &Peer, store: &SessionStore, parent: &str) {
    announce_under(peer, store, parent, parent, &|id| id.to_owned(), 0);
}

/// Announces the children of stored session `node`, which the client knows as `shown`; `name`
/// gives the client's id for a stored session under it.
///
/// The stored children of an ACP child's record are the child's own sessions (a kin child
/// sharing this store records its session under kin's id for it): as live, where the child's
/// traffic goes under the record's id, they are not a level of their own; their children are
/// shown under the record, named as the live forwarder names them
/// ([`crate::acp_client::child_session_id`]).
fn announce_under(
    peer: &Peer,
    store: &SessionStore,
    node: &str,
    shown: &str,
    name: &dyn Fn(&str) -> String,
    depth: usize,
) {
    if depth >= MAX_DEPTH {
        return;
    }
    let mut children = match store.list_children(node) {
        Ok(children) => children,
        Err(error) => {
            tracing::warn!(%error, parent = node, "could not list a session's children to replay");
            return;
        }
    };
    children.sort_by_key(|child| child.child.as_ref().map_or(0, |info| info.created_at));
    if depth > 0 && !children.is_empty() && is_acp_record(store, node) {
        for own in children {
            let inner = |id: &str| name(&crate::acp_client::child_session_id(node, id));
            announce_under(peer, store, &own.id, shown, &inner, depth + 1);
        }
        return;
    }
    for child in children {
        let id = name(&child.id);
        let last_stop = child
            .child
            .as_ref()
            .and_then(|info| info.last_stop.as_deref());
        let cancel = SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new());
        let state = match store.is_running(&child.id) {
            true => StateUpdate::Running(RunningStateUpdate::new()),
            false => last_state(last_stop),
        };
        let mut update = SubagentUpdate::new(id.clone())
            .state(state)
            .capabilities(cancel);
        // Live, a child is shown under its delegation's description, not its own title.
        let label = store.header(&child.id).and_then(|header| header.label);
        if let Some(title) = label.or_else(|| child.title.clone()) {
            update = update.title(title);
        }
        if let Some(cwd) = &child.cwd {
            update = update.cwd(std::path::PathBuf::from(cwd));
        }
        let note =
            SessionNotification::new(shown.to_owned(), SessionUpdate::SubagentUpdate(update));
        peer.notify("session/update", &note);
        announce_under(peer, store, &child.id, &id, name, depth + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_stops_become_states() {
        let wire = |stop| serde_json::to_value(last_state(stop)).unwrap();
        assert_eq!(wire(None)["state"], "unknown");
        assert_eq!(wire(Some("completed"))["stopReason"], "end_turn");
        assert_eq!(wire(Some("aborted"))["stopReason"], "cancelled");
        assert_eq!(wire(Some("max-steps"))["stopReason"], "error");
    }
}

//! `session/load` for a client that opted into subagents: after the session's own history,
//! each stored child of it (in-process children and the records of ACP children) is announced
//! on it, oldest first, with its title, cwd and last state, then its own children under it,
//! so a reopened editor can rebuild the tree. Loading a child's id then replays its transcript.

use agent_client_protocol_schema::v1::{
    ErrorStopReason, IdleStateUpdate, IdleStopReason, SessionCancelCapabilities,
    SessionNotification, SessionUpdate, StateUpdate, SubagentSessionCapabilities, SubagentUpdate,
    UnknownStateUpdate,
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

/// Announces the stored children of `parent` (and theirs) to the client on `peer`.
pub(crate) fn announce_children(peer: &Peer, store: &SessionStore, parent: &str) {
    announce_under(peer, store, parent, 0);
}

fn announce_under(peer: &Peer, store: &SessionStore, parent: &str, depth: usize) {
    if depth >= MAX_DEPTH {
        return;
    }
    let mut children = match store.list_children(parent) {
        Ok(children) => children,
        Err(error) => {
            tracing::warn!(%error, parent, "could not list a session's children to replay");
            return;
        }
    };
    children.sort_by_key(|child| child.child.as_ref().map_or(0, |info| info.created_at));
    for child in children {
        let last_stop = child
            .child
            .as_ref()
            .and_then(|info| info.last_stop.as_deref());
        let cancel = SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new());
        let mut update = SubagentUpdate::new(child.id.clone())
            .state(last_state(last_stop))
            .capabilities(cancel);
        if let Some(title) = &child.title {
            update = update.title(title.clone());
        }
        if let Some(cwd) = &child.cwd {
            update = update.cwd(std::path::PathBuf::from(cwd));
        }
        let note =
            SessionNotification::new(parent.to_owned(), SessionUpdate::SubagentUpdate(update));
        peer.notify("session/update", &note);
        announce_under(peer, store, &child.id, depth + 1);
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

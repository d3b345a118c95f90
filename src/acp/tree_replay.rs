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

/// Whether a log's last turn has started and not ended (one event a line, as kin writes them).
fn has_open_turn(log: &[u8]) -> bool {
    log.split(|&b| b == b'\n')
        .rev()
        .find_map(|line| {
            if line.starts_with(br#"{"type":"turn/start""#) {
                Some(true)
            } else if line.starts_with(br#"{"type":"turn/end""#) {
                Some(false)
            } else {
                None
            }
        })
        .unwrap_or(false)
}

/// Whether child `id` has an activation running now (see the module doc).
fn is_running(store: &SessionStore, id: &str) -> bool {
    let Ok(path) = store.path(id) else {
        return false;
    };
    // The lock is the cheap test: only a locked log is read.
    crate::session::is_locked(&path) && std::fs::read(&path).is_ok_and(|log| has_open_turn(&log))
}

/// Whether stored child `id` is the record of an ACP child: a log without a single tool call
/// (an in-process child has children only through its tool calls).
fn is_acp_record(store: &SessionStore, id: &str) -> bool {
    let Some(log) = store
        .path(id)
        .ok()
        .and_then(|path| std::fs::read(path).ok())
    else {
        return false;
    };
    !log.split(|&b| b == b'\n')
        .any(|line| line.starts_with(br#"{"type":"tool/call""#))
}

/// The label child `id` was announced under live (its header's), if it has one.
fn label_of(store: &SessionStore, id: &str) -> Option<String> {
    use std::io::BufRead;
    let file = std::fs::File::open(store.path(id).ok()?).ok()?;
    let mut first = String::new();
    std::io::BufReader::new(file).read_line(&mut first).ok()?;
    serde_json::from_str::<crate::session::Header>(&first)
        .ok()?
        .label
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
        let state = match is_running(store, &child.id) {
            true => StateUpdate::Running(RunningStateUpdate::new()),
            false => last_state(last_stop),
        };
        let mut update = SubagentUpdate::new(id.clone())
            .state(state)
            .capabilities(cancel);
        // Live, a child is shown under its delegation's description, not its own title.
        if let Some(title) = label_of(store, &child.id).or_else(|| child.title.clone()) {
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

    #[test]
    fn only_a_started_turn_without_its_end_is_open() {
        let start = r#"{"type":"turn/start","seq":1}"#;
        let end = r#"{"type":"turn/end","seq":2}"#;
        let other = r#"{"type":"user/message","seq":3}"#;
        let log = |lines: &[&str]| lines.join("\n").into_bytes();
        assert!(has_open_turn(&log(&["{}", start, other])));
        assert!(!has_open_turn(&log(&["{}", start, end, other])));
        assert!(has_open_turn(&log(&["{}", start, end, start, ""])));
        assert!(!has_open_turn(&log(&["{}"])));
    }
}

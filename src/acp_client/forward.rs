//! A child's place in kin's tree: its `session/update`s are passed on under session ids kin
//! allocates (the child's own ids mapped; the children it announces re-announced under it,
//! recursively), its run is announced on the parent and its final state set when its prompt
//! answers, and a compact summary of the run (its tool calls as lines, then its answer) is
//! kept for editors that do not show children as sessions. Whether the editor sees the
//! updates or the summary is decided above, where the editor's capabilities are known.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    ContentBlock, ContentChunk, ErrorStopReason, IdleStateUpdate, IdleStopReason,
    RunningStateUpdate, SessionCancelCapabilities, SessionId, SessionMessage, SessionNotification,
    SessionUpdate, StateUpdate, StopReason, SubagentSessionCapabilities, SubagentUpdate,
    ToolCallContent, ToolCallStatus,
};
use agent_client_protocol_schema::MaybeUndefined;
use serde_json::Value;

use crate::sync::lock;
use crate::tools::ClientBridge;

/// Where a child's passed-on traffic goes (kin's host event stream, in practice).
pub trait ChildSink: Send + Sync {
    /// One `session/update` for the editor: `update` is its ACP JSON, `session` kin's id.
    fn update(&self, session: &str, update: &Value);
    /// The summary of the child's run so far, for the parent's tool call `call_id`.
    fn summary(&self, parent: &str, call_id: &str, text: &str);
}

/// How one child is linked into kin's tree.
#[derive(Clone)]
pub struct ChildLink {
    /// The delegating session.
    pub parent: String,
    /// kin's id for the child (its delegation id).
    pub child: String,
    /// The parent's tool call that delegated, which the summary goes on.
    pub call_id: Option<String>,
    /// The label the child is shown under (the delegating tool's `description`).
    pub title: Option<String>,
    /// Where the child's updates, summaries and announced children are passed on.
    pub sink: Arc<dyn ChildSink>,
    /// The editor of the delegating session: the child's permission requests and, where it
    /// has them, file services go to it.
    pub client: Option<Arc<dyn ClientBridge>>,
}

impl fmt::Debug for ChildLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildLink")
            .field("parent", &self.parent)
            .field("child", &self.child)
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// Passes one child's traffic on (see the module doc).
pub(super) struct Forwarder {
    link: ChildLink,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The child's session ids -> kin's.
    ids: HashMap<String, String>,
    /// The child's own session id (its tool calls and answer make the summary).
    root: String,
    /// The root's tool calls, in order: (id, title, failed).
    calls: Vec<(String, String, bool)>,
    answer: String,
}

impl Forwarder {
    pub(crate) fn new(link: ChildLink) -> Self {
        Self {
            link,
            state: Mutex::default(),
        }
    }

    pub(crate) fn link(&self) -> &ChildLink {
        &self.link
    }

    /// The child's own session is `session`: its traffic goes under kin's id for it.
    pub(crate) fn root(&self, session: &str) {
        let mut state = lock(&self.state);
        state.root = session.to_owned();
        state
            .ids
            .insert(session.to_owned(), self.link.child.clone());
    }

    /// kin's id for a session of the child, if it was announced.
    pub(crate) fn kin_id(&self, session: &str) -> Option<String> {
        lock(&self.state).ids.get(session).cloned()
    }

    /// Announces the run on the parent: running, with its title and cwd, cancellable.
    pub(crate) fn announce(&self, cwd: &Path) {
        lock(&self.state).answer.clear();
        let mut update = SubagentUpdate::new(self.link.child.clone())
            .state(StateUpdate::Running(RunningStateUpdate::new()))
            .cwd(cwd.to_owned())
            .capabilities(
                SubagentSessionCapabilities::new().cancel(SessionCancelCapabilities::new()),
            );
        if let Some(title) = &self.link.title {
            update = update.title(title.clone());
        }
        self.send(&self.link.parent, &SessionUpdate::SubagentUpdate(update));
    }

    /// A prompt the parent sent the child: a `session_message` in the child's session, from
    /// the parent.
    pub(crate) fn prompted(&self, text: &str) {
        let message = SessionMessage::new(uuid::Uuid::new_v4().to_string())
            .sender_session_id(SessionId::from(self.link.parent.clone()))
            .recipient_session_id(SessionId::from(self.link.child.clone()))
            .content(vec![ContentBlock::from(text.to_owned())]);
        self.send(&self.link.child, &SessionUpdate::SessionMessage(message));
    }

    /// The run ended: `stop` as the child answered, `None` if it failed. Sets the child's
    /// state on the parent and gives the final summary.
    pub(crate) fn finish(&self, stop: Option<StopReason>) {
        let reason = match stop {
            Some(StopReason::EndTurn) => IdleStopReason::EndTurn,
            Some(StopReason::MaxTokens) => IdleStopReason::MaxTokens,
            Some(StopReason::MaxTurnRequests) => IdleStopReason::MaxTurnRequests,
            Some(StopReason::Refusal) => IdleStopReason::Refusal,
            Some(StopReason::Cancelled) => IdleStopReason::Cancelled,
            _ => IdleStopReason::Error(ErrorStopReason::new()),
        };
        let state = StateUpdate::Idle(IdleStateUpdate::new().stop_reason(reason));
        let update = SubagentUpdate::new(self.link.child.clone()).state(state);
        self.send(&self.link.parent, &SessionUpdate::SubagentUpdate(update));
        self.summarize();
    }

    /// One `session/update` of the child, decoded; dropped when it names a session the child
    /// never announced.
    pub(crate) fn update(&self, notification: SessionNotification) {
        let session = notification.session_id.0.to_string();
        let mut state = lock(&self.state);
        let Some(target) = state.ids.get(&session).cloned() else {
            tracing::debug!(
                session,
                "an ACP child sent an update for a session it never announced"
            );
            return;
        };
        let mut update = notification.update;
        let mut summary_changed = false;
        match &mut update {
            SessionUpdate::SubagentUpdate(child) => {
                let theirs = child.session_id.0.to_string();
                let ours = state
                    .ids
                    .entry(theirs.clone())
                    .or_insert_with(|| child_session_id(&self.link.child, &theirs))
                    .clone();
                child.session_id = ours.into();
            }
            SessionUpdate::SessionMessage(message) => {
                for id in [
                    &mut message.sender_session_id,
                    &mut message.recipient_session_id,
                ] {
                    if let MaybeUndefined::Value(theirs) = id {
                        match state.ids.get(&*theirs.0) {
                            Some(ours) => *theirs = ours.clone().into(),
                            None => return,
                        }
                    }
                }
            }
            SessionUpdate::ToolCall(call) => {
                if !map_references(&state.ids, &mut call.content) {
                    return;
                }
                if session == state.root {
                    let failed = call.status == ToolCallStatus::Failed;
                    let entry = (call.tool_call_id.0.to_string(), call.title.clone(), failed);
                    state.calls.push(entry);
                    summary_changed = true;
                }
            }
            SessionUpdate::ToolCallUpdate(call) => {
                if let Some(content) = &mut call.fields.content {
                    if !map_references(&state.ids, content) {
                        return;
                    }
                }
                if session == state.root {
                    let id = call.tool_call_id.0.to_string();
                    if let Some(known) = state.calls.iter_mut().find(|known| known.0 == id) {
                        if let Some(title) = &call.fields.title {
                            known.1.clone_from(title);
                            summary_changed = true;
                        }
                        if let Some(status) = call.fields.status {
                            known.2 = status == ToolCallStatus::Failed;
                            summary_changed = true;
                        }
                    }
                }
            }
            SessionUpdate::AgentMessageChunk(ContentChunk {
                content: ContentBlock::Text(text),
                ..
            }) if session == state.root => state.answer.push_str(&text.text),
            _ => {}
        }
        drop(state);
        self.send(&target, &update);
        if summary_changed {
            self.summarize();
        }
    }

    fn send(&self, session: &str, update: &SessionUpdate) {
        match serde_json::to_value(update) {
            Ok(value) => self.link.sink.update(session, &value),
            Err(error) => tracing::warn!(%error, "an ACP child's update could not be encoded"),
        }
    }

    fn summarize(&self) {
        let Some(call_id) = &self.link.call_id else {
            return;
        };
        let text = summary_text(&lock(&self.state));
        if !text.is_empty() {
            self.link.sink.summary(&self.link.parent, call_id, &text);
        }
    }
}

/// kin's id for session `theirs` that the ACP child kin knows as `child` announced: derived
/// from both (a SHA-256 of the pair, as a version 8 UUID), so the live tree and a reloaded one
/// (`acp::tree_replay`) name it alike, and no child can make it name another of kin's sessions.
pub(crate) fn child_session_id(child: &str, theirs: &str) -> String {
    let pair = format!("{child}\n{theirs}");
    let digest = ring::digest::digest(&ring::digest::SHA256, pair.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest.as_ref()[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// Maps the session references in tool call content to kin's ids; false if one names a
/// session the child never announced.
fn map_references(ids: &HashMap<String, String>, content: &mut [ToolCallContent]) -> bool {
    content.iter_mut().all(|item| match item {
        ToolCallContent::Session(reference) => match ids.get(&*reference.session_id.0) {
            Some(ours) => {
                reference.session_id = ours.clone().into();
                true
            }
            None => false,
        },
        _ => true,
    })
}

/// The tool calls as lines (`failed` marked), then a blank line and the answer.
fn summary_text(state: &State) -> String {
    let mut text: String = state
        .calls
        .iter()
        .map(|(_, title, failed)| match failed {
            true => format!("- {title} (failed)\n"),
            false => format!("- {title}\n"),
        })
        .collect();
    if !state.answer.is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&state.answer);
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Default)]
    struct Recorded {
        updates: Mutex<Vec<(String, Value)>>,
        summaries: Mutex<Vec<String>>,
    }

    impl ChildSink for Recorded {
        fn update(&self, session: &str, update: &Value) {
            lock(&self.updates).push((session.to_owned(), update.clone()));
        }
        fn summary(&self, parent: &str, call_id: &str, text: &str) {
            assert_eq!((parent, call_id), ("parent", "call"));
            lock(&self.summaries).push(text.to_owned());
        }
    }

    fn forwarder() -> (Arc<Recorded>, Forwarder) {
        let sink = Arc::new(Recorded::default());
        let forwarder = Forwarder::new(ChildLink {
            parent: "parent".into(),
            child: "kin-child".into(),
            call_id: Some("call".into()),
            title: Some("Ask".into()),
            sink: sink.clone(),
            client: None,
        });
        forwarder.root("theirs");
        (sink, forwarder)
    }

    fn feed(forwarder: &Forwarder, session: &str, update: Value) {
        let note = json!({"sessionId": session, "update": update});
        forwarder.update(serde_json::from_value(note).unwrap());
    }

    #[test]
    fn ids_are_mapped_and_grandchildren_re_announced_under_the_child() {
        let (sink, forwarder) = forwarder();
        forwarder.announce(Path::new("/w"));
        feed(
            &forwarder,
            "theirs",
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}),
        );
        feed(
            &forwarder,
            "theirs",
            json!({"sessionUpdate": "subagent_update", "sessionId": "grand"}),
        );
        feed(
            &forwarder,
            "grand",
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "deep"}}),
        );
        feed(
            &forwarder,
            "stranger",
            json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "no"}}),
        );
        forwarder.finish(Some(StopReason::EndTurn));
        let updates = lock(&sink.updates).clone();
        assert_eq!(updates.len(), 5, "{updates:?}");
        assert_eq!(updates[0].0, "parent");
        assert_eq!(updates[0].1["sessionUpdate"], "subagent_update");
        assert_eq!(updates[0].1["sessionId"], "kin-child");
        assert_eq!(updates[0].1["capabilities"], json!({"cancel": {}}));
        assert_eq!(updates[0].1["title"], "Ask");
        assert_eq!(updates[1].0, "kin-child");
        assert_eq!(updates[2].0, "kin-child");
        let grandchild = updates[2].1["sessionId"].as_str().unwrap().to_owned();
        assert_ne!(grandchild, "grand", "the grandchild gets kin's own id");
        assert_eq!(updates[3].0, grandchild);
        assert_eq!(updates[4].0, "parent");
        assert_eq!(updates[4].1["state"]["stopReason"], "end_turn");
    }

    #[test]
    fn a_grandchilds_id_is_derived_from_the_child_and_its_own_id() {
        let id = child_session_id("kin-child", "grand");
        assert_eq!(id, child_session_id("kin-child", "grand"), "stable");
        assert_ne!(id, child_session_id("kin-child", "other"));
        assert_ne!(id, child_session_id("other-child", "grand"));
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    }

    #[test]
    fn the_summary_lists_the_tool_calls_then_the_answer() {
        let (sink, forwarder) = forwarder();
        feed(
            &forwarder,
            "theirs",
            json!({"sessionUpdate": "tool_call", "toolCallId": "1", "title": "ls"}),
        );
        feed(
            &forwarder,
            "theirs",
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "1", "status": "failed"}),
        );
        feed(
            &forwarder,
            "theirs",
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}),
        );
        forwarder.finish(Some(StopReason::EndTurn));
        let summaries = lock(&sink.summaries).clone();
        assert_eq!(summaries.first().map(String::as_str), Some("- ls\n"));
        assert_eq!(
            summaries.last().map(String::as_str),
            Some("- ls (failed)\n\ndone")
        );
    }

    #[test]
    fn a_message_naming_an_unknown_session_is_dropped() {
        let (sink, forwarder) = forwarder();
        feed(
            &forwarder,
            "theirs",
            json!({"sessionUpdate": "session_message", "messageId": "m", "senderSessionId": "nobody"}),
        );
        feed(
            &forwarder,
            "theirs",
            json!({"sessionUpdate": "session_message", "messageId": "m", "senderSessionId": "theirs"}),
        );
        let updates = lock(&sink.updates).clone();
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].1["senderSessionId"], "kin-child");
    }
}

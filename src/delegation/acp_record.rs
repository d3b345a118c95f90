//! The turns of a continuable ACP child, kept in its local record (the session file named by
//! its delegation id): each activation appends `turn/start`, the parent's prompt as
//! `user/message` (with the child's `session/title`, the delegation's description, after the
//! first), and, when the prompt answers, `turn/end` with how it ended (and the cost it
//! reported, as `usage`). So `list_agents` counts its turns and shows its title, last stop and
//! reported cost, and a reloaded parent can show its last state.
//! What the child itself did stays in the child's own session. A child no one will continue
//! gets a record too (without a descriptor: `list_agents` does not show it).

use serde_json::json;

use crate::agent::StopReason;
use crate::session::{
    EventBody, Header, SessionLog, SessionStore, SessionTitle, TurnEnd, TurnEndReason, TurnStart,
    TurnUsage, UserMessage, UserPart,
};

/// The open record of one child, for one activation.
pub(super) struct ChildRecord {
    log: SessionLog,
    /// The turn this activation runs.
    turn: u32,
    has_title: bool,
}

impl ChildRecord {
    /// A new record of child `id` of `parent` that no one will continue (foreground or
    /// one-shot): its session file, with the parent in its header, so a reloaded parent still
    /// shows it. `None` (logged) if it cannot be written.
    pub(super) fn create(
        store: &SessionStore,
        id: &str,
        parent: &str,
        depth: u32,
        cwd: &str,
    ) -> Option<Self> {
        let mut header = Header::new(
            id.to_owned(),
            crate::time::now_ms(),
            cwd.to_owned(),
            Vec::new(),
        );
        header.parent_session = Some(parent.to_owned());
        header.delegation_depth = depth;
        match store.create(&header) {
            Ok(log) => Some(Self {
                log,
                turn: 1,
                has_title: false,
            }),
            Err(error) => {
                tracing::warn!(%error, child = id, "could not write an ACP child's record");
                None
            }
        }
    }

    /// Opens the record of child `id` for appending; `None` (logged) if it cannot be.
    pub(super) fn open(store: &SessionStore, id: &str) -> Option<Self> {
        match store.open_for_append(id) {
            Ok((loaded, log)) => {
                let turns = loaded
                    .events
                    .iter()
                    .filter(|event| matches!(event.body, EventBody::TurnStart(_)))
                    .count();
                let has_title = loaded
                    .events
                    .iter()
                    .any(|event| matches!(event.body, EventBody::SessionTitle(_)));
                Some(Self {
                    log,
                    turn: u32::try_from(turns).unwrap_or(u32::MAX).saturating_add(1),
                    has_title,
                })
            }
            Err(error) => {
                tracing::warn!(%error, child = id, "could not open an ACP child's record");
                None
            }
        }
    }

    /// The activation starts with `prompt`; `title` names the child (its first time).
    pub(super) fn begin(&mut self, prompt: &str, title: Option<&str>) {
        let now = crate::time::now_ms();
        let start = EventBody::TurnStart(TurnStart {
            turn: self.turn,
            trigger: json!({"kind": "message", "source": {"kind": "user"}}),
        });
        let message = EventBody::UserMessage(UserMessage {
            content: vec![UserPart::Text {
                text: prompt.to_owned(),
            }],
            source: json!({"kind": "user"}),
            role: "user".into(),
            id: uuid::Uuid::new_v4().to_string(),
        });
        let written = self.log.append(start, now).and_then(|_| {
            let message = self.log.append(message, now)?;
            match title.filter(|_| !self.has_title) {
                Some(title) => {
                    self.has_title = true;
                    let title = EventBody::SessionTitle(SessionTitle {
                        title: title.to_owned(),
                        message_seqs: vec![message.seq],
                        source: json!({"kind": "fallback"}),
                    });
                    self.log.append(title, now).map(|_| ())
                }
                None => Ok(()),
            }
        });
        if let Err(error) = written.and_then(|()| self.log.sync()) {
            tracing::warn!(%error, "could not record an ACP child's turn");
        }
    }

    /// The activation ended with `stop` (`error`: why it failed), having reported `cost` (the
    /// cumulative `cost` of its `usage_update`s, if it reported any).
    pub(super) fn end(mut self, stop: StopReason, error: Option<&str>, cost: Option<f64>) {
        let reason = match crate::agent::end_reason(stop) {
            TurnEndReason::Error {
                step,
                code,
                failure,
                ..
            } => TurnEndReason::Error {
                step,
                message: error.map(str::to_owned),
                code,
                failure,
            },
            other => other,
        };
        // ACP reports no tokens spent: only the cost the child reported is recorded.
        let usage = cost.map(|cost| TurnUsage {
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: None,
            cost: Some(cost),
            estimated_tokens: None,
        });
        let end = EventBody::TurnEnd(TurnEnd {
            turn: self.turn,
            reason,
            usage,
        });
        let written = self.log.append(end, crate::time::now_ms());
        if let Err(error) = written.and_then(|_| self.log.sync()) {
            tracing::warn!(%error, "could not record the end of an ACP child's turn");
        }
    }
}

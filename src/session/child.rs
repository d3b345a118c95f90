//! What `list_agents` shows of a child session (one with a `parentSession`), kept in the
//! session index so listing a parent's children reads no child's log. Made from a log's bytes
//! or events when a session is indexed or reopened, and kept current by the log's appends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{Event, EventBody, Header};

/// The `type` of a continuable child's descriptor event (written by `subagent::descriptor`).
const DESCRIPTOR_EVENT: &str = "subagent/descriptor";
/// The descriptor version kin resumes; a child with another one is not listed.
const DESCRIPTOR_VERSION: u64 = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChildInfo {
    /// The header's `createdAt`: children are listed oldest first.
    pub created_at: u64,
    /// Turns the child ran itself (a fork's inherited turns are not counted).
    pub turns: u32,
    /// How its last turn ended (`turn/end` reason kind), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop: Option<String>,
    /// From the first resumable descriptor: the subagent provider (`spawn`, `fork`, ...).
    /// Absent until the descriptor is written; a child without one is not continuable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_model: Option<String>,
}

impl ChildInfo {
    /// A child that has no events of its own yet; `None` for a top-level session.
    pub(crate) fn new(header: &Header) -> Option<Self> {
        header.parent_session.as_ref()?;
        Some(Self {
            created_at: header.created_at,
            ..Self::default()
        })
    }

    /// From a loaded log: its own events are those after the `seedLength` inherited ones.
    pub(crate) fn of_events(header: &Header, events: &[Event]) -> Option<Self> {
        let mut info = Self::new(header)?;
        let seed = usize::try_from(header.seed_length.unwrap_or(0)).unwrap_or(usize::MAX);
        for event in events.iter().skip(seed) {
            info.observe(&event.body);
        }
        Some(info)
    }

    /// From a log file's bytes (header line first, one event per line as kin writes them),
    /// decoding only the lines it needs.
    pub(crate) fn of_bytes(header: &Header, bytes: &[u8]) -> Option<Self> {
        let mut info = Self::new(header)?;
        let seed = usize::try_from(header.seed_length.unwrap_or(0)).unwrap_or(usize::MAX);
        let own = bytes
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .skip(1)
            .skip(seed);
        for line in own {
            if line.starts_with(br#"{"type":"turn/start""#) {
                info.turns += 1;
            } else if line.starts_with(br#"{"type":"turn/end""#) {
                info.last_stop =
                    data(line).and_then(|d| d["reason"]["kind"].as_str().map(str::to_owned));
            } else if info.kind.is_none() && line.starts_with(br#"{"type":"subagent/descriptor""#) {
                if let Some(data) = data(line) {
                    info.describe(&data);
                }
            }
        }
        Some(info)
    }

    /// Follows one appended event; true when what is shown changed at once (a descriptor or
    /// a turn start: worth recording before the turn's end does).
    pub(crate) fn observe(&mut self, body: &EventBody) -> bool {
        match body {
            EventBody::TurnStart(_) => {
                self.turns += 1;
                true
            }
            EventBody::TurnEnd(end) => {
                self.last_stop = serde_json::to_value(&end.reason)
                    .ok()
                    .and_then(|reason| reason["kind"].as_str().map(str::to_owned));
                false
            }
            EventBody::Other(other) if other.kind == DESCRIPTOR_EVENT && self.kind.is_none() => {
                self.describe(&other.data);
                self.kind.is_some()
            }
            _ => false,
        }
    }

    fn describe(&mut self, data: &Value) {
        if data["version"].as_u64() != Some(DESCRIPTOR_VERSION) {
            return;
        }
        let text = |key: &str| data[key].as_str().map(str::to_owned);
        self.kind = text("provider");
        self.agent_provider = text("agentProvider");
        self.agent_model = text("agentModel");
    }
}

/// The `data` of one event line.
fn data(line: &[u8]) -> Option<Value> {
    #[derive(Deserialize)]
    struct Line {
        data: Value,
    }
    serde_json::from_slice::<Line>(line).ok().map(|l| l.data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{OtherEvent, TurnEnd, TurnEndReason, TurnStart};

    fn event(seq: u64, body: EventBody) -> Event {
        Event::new(seq, 0, body)
    }

    #[test]
    fn bytes_events_and_appends_agree_and_skip_the_seed() {
        let mut header = Header::new("c".into(), 7, "/w".into(), vec![]);
        header.parent_session = Some("p".into());
        header.seed_length = Some(1);
        let descriptor = serde_json::json!({"version": 1, "provider": "fork", "agentModel": "m"});
        let events = vec![
            // The seed: an ancestor's turn, not counted.
            event(
                0,
                EventBody::TurnStart(TurnStart {
                    turn: 1,
                    trigger: Value::Null,
                }),
            ),
            event(
                1,
                EventBody::TurnStart(TurnStart {
                    turn: 2,
                    trigger: Value::Null,
                }),
            ),
            event(
                2,
                EventBody::Other(OtherEvent {
                    kind: DESCRIPTOR_EVENT.into(),
                    data: descriptor,
                }),
            ),
            event(
                3,
                EventBody::TurnEnd(TurnEnd {
                    turn: 2,
                    reason: TurnEndReason::Aborted,
                    usage: None,
                }),
            ),
        ];
        let mut bytes = serde_json::to_vec(&header).unwrap();
        for e in &events {
            bytes.push(b'\n');
            bytes.extend(serde_json::to_vec(e).unwrap());
        }
        let expected = ChildInfo {
            created_at: 7,
            turns: 1,
            last_stop: Some("aborted".into()),
            kind: Some("fork".into()),
            agent_provider: None,
            agent_model: Some("m".into()),
        };
        assert_eq!(ChildInfo::of_bytes(&header, &bytes), Some(expected.clone()));
        assert_eq!(
            ChildInfo::of_events(&header, &events),
            Some(expected.clone())
        );
        let mut appended = ChildInfo::new(&header).unwrap();
        for e in &events[1..] {
            appended.observe(&e.body);
        }
        assert_eq!(appended, expected);
        header.parent_session = None;
        assert_eq!(ChildInfo::new(&header), None);
    }
}

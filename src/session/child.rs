//! What `list_agents` shows of a child session (one with a `parentSession`), kept in the
//! session index so listing a parent's children reads no child's log. Made from a log's bytes
//! or events when a session is indexed or reopened, and kept current by the log's appends.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{Event, EventBody, Header};
use super::records::Descriptor;

/// How a descriptor line starts, as kin writes it.
const DESCRIPTOR_LINE_START: &[u8] = br#"{"type":"subagent/descriptor""#;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ChildInfo {
    /// The header's `createdAt`: children are listed oldest first.
    pub(crate) created_at: u64,
    /// Turns the child ran itself (a fork's inherited turns are not counted).
    pub(crate) turns: u32,
    /// How its last turn ended (`turn/end` reason kind), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_stop: Option<String>,
    /// From the first resumable descriptor: the subagent provider (`spawn`, `fork`, ...).
    /// Absent until the descriptor is written; a child without one is not continuable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_model: Option<String>,
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
            } else if info.kind.is_none() && line.starts_with(DESCRIPTOR_LINE_START) {
                if let Some(descriptor) = line_data::<Descriptor>(line) {
                    info.describe(&descriptor);
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
            EventBody::SubagentDescriptor(descriptor) if self.kind.is_none() => {
                self.describe(descriptor);
                self.kind.is_some()
            }
            _ => false,
        }
    }

    /// A child whose first descriptor is of another version is not listed.
    fn describe(&mut self, descriptor: &Descriptor) {
        if !descriptor.is_resumable() {
            return;
        }
        self.kind = Some(descriptor.provider.clone());
        self.agent_provider = descriptor.agent_provider.clone();
        self.agent_model = descriptor.agent_model.clone();
    }
}

/// The `data` of one event line.
fn data(line: &[u8]) -> Option<Value> {
    line_data(line)
}

/// The `data` of one event line, as `T`.
fn line_data<T: serde::de::DeserializeOwned>(line: &[u8]) -> Option<T> {
    #[derive(Deserialize)]
    struct Line<T> {
        data: T,
    }
    serde_json::from_slice::<Line<T>>(line).ok().map(|l| l.data)
}

/// A log's header and the first descriptor among its own events (after the seed), read from
/// its bytes without decoding the transcript; the descriptor only if it is resumable. `None`
/// when the header cannot be read.
pub(crate) fn child_record(bytes: &[u8]) -> Option<(Header, Option<Descriptor>)> {
    let mut lines = bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    let header: Header = serde_json::from_slice(lines.next()?).ok()?;
    let seed = usize::try_from(header.seed_length.unwrap_or(0)).ok()?;
    let descriptor = lines
        .skip(seed)
        .find(|line| line.starts_with(DESCRIPTOR_LINE_START))
        .and_then(line_data::<Descriptor>)
        .filter(Descriptor::is_resumable);
    Some((header, descriptor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{TurnEnd, TurnEndReason, TurnStart};

    fn event(seq: u64, body: EventBody) -> Event {
        Event::new(seq, 0, body)
    }

    #[test]
    fn a_child_record_skips_the_seed() {
        let mut header = Header::new("c".into(), 1, "/w".into(), vec![]);
        header.parent_session = Some("p".into());
        header.seed_length = Some(1);
        let inherited = r#"{"type":"subagent/descriptor","seq":0,"time":0,"data":{"version":1,"provider":"spawn"}}"#;
        let own = r#"{"type":"subagent/descriptor","seq":1,"time":0,"data":{"version":1,"provider":"fork"}}"#;
        let head = serde_json::to_string(&header).unwrap();
        let (read, found) =
            child_record(format!("{head}\n{inherited}\n{own}\n").as_bytes()).unwrap();
        assert_eq!(read.id, "c");
        assert_eq!(found.unwrap().provider, "fork");
        let only_seed = format!("{head}\n{inherited}\n");
        assert_eq!(child_record(only_seed.as_bytes()).unwrap().1, None);
        let later = r#"{"type":"subagent/descriptor","seq":1,"time":0,"data":{"version":2,"provider":"fork"}}"#;
        let unresumable = format!("{head}\n{inherited}\n{later}\n");
        assert_eq!(child_record(unresumable.as_bytes()).unwrap().1, None);
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
                EventBody::SubagentDescriptor(serde_json::from_value(descriptor).unwrap()),
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

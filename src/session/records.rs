//! The delegation records a log carries, log-only (never part of the model's history):
//! - `subagent/descriptor`, in a continuable child's log: how to rebuild it for its next
//!   activation;
//! - `task/start` and `task/end`, in the owner's log: a background delegation task began, and
//!   it settled. A later process folds them to show the tasks left unfinished as interrupted.
//!
//! Reading a child's descriptor straight from its file (without decoding its transcript) is
//! here too, so nothing outside `session/` reads log lines.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::event::{Event, EventBody, Header};

/// Restricts the tools a child may use; stored as given (absent lists are omitted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

/// What a cold resume needs to rebuild a child. Optional fields are omitted when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub version: u32,
    /// The subagent provider that made the child (`spawn`, `fork`, `acp:<name>`).
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_filter: Option<ToolFilter>,
    /// What only the provider reads (for `acp:<name>`: the child's own `sessionId` and `cwd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_data: Option<Value>,
}

impl Descriptor {
    /// The event's `type`.
    pub const KIND: &'static str = "subagent/descriptor";
    /// The only descriptor version kin writes and resumes.
    pub const VERSION: u32 = 1;

    /// Whether a resume may use it (a later version is kept, but not resumed).
    pub fn is_resumable(&self) -> bool {
        self.version == Self::VERSION
    }

    /// The first descriptor among `events` (pass only the child's own events, after its
    /// seed, so a fork cannot pick up an ancestor's), if it is resumable.
    pub fn fold(events: &[Event]) -> Option<Self> {
        let first = events.iter().find_map(|event| match &event.body {
            EventBody::SubagentDescriptor(descriptor) => Some(descriptor),
            _ => None,
        })?;
        first.is_resumable().then(|| first.clone())
    }
}

/// `task/start`: a background delegation task began (in the owner's log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStart {
    /// The task id (`subagent-N`).
    pub task: String,
    /// The task kind (`subagent`).
    pub kind: String,
    /// The label shown for it.
    pub label: String,
    /// The continuable child it runs, if any (a one-shot child has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<String>,
}

/// `task/end`: a background task settled (in the owner's log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEnd {
    pub task: String,
    /// `completed`, `killed` or `failed`.
    pub status: String,
}

impl TaskStart {
    pub const KIND: &'static str = "task/start";
}

impl TaskEnd {
    pub const KIND: &'static str = "task/end";
}

/// The tasks `events` show started and not ended, in start order.
pub fn unfinished_tasks(events: &[Event]) -> Vec<TaskStart> {
    let ended: std::collections::HashSet<&str> = events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskEnd(end) => Some(end.task.as_str()),
            _ => None,
        })
        .collect();
    events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskStart(start) if !ended.contains(start.task.as_str()) => {
                Some(start.clone())
            }
            _ => None,
        })
        .collect()
}

/// A log's header and the first descriptor among its own events (after the seed), read from
/// its bytes without decoding the transcript. `None` when the header cannot be read.
pub(crate) fn child_record(bytes: &[u8]) -> Option<(Header, Option<Descriptor>)> {
    let mut lines = bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    let header: Header = serde_json::from_slice(lines.next()?).ok()?;
    let seed = usize::try_from(header.seed_length.unwrap_or(0)).ok()?;
    let descriptor = lines
        .skip(seed)
        .find(|line| line.starts_with(DESCRIPTOR_LINE_START))
        .and_then(|line| line_data::<Descriptor>(line))
        .filter(Descriptor::is_resumable);
    Some((header, descriptor))
}

/// How a descriptor line starts, as kin writes it.
pub(crate) const DESCRIPTOR_LINE_START: &[u8] = br#"{"type":"subagent/descriptor""#;

/// The `data` of one event line, as `T`.
pub(crate) fn line_data<T: serde::de::DeserializeOwned>(line: &[u8]) -> Option<T> {
    #[derive(Deserialize)]
    struct Line<T> {
        data: T,
    }
    serde_json::from_slice::<Line<T>>(line).ok().map(|l| l.data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, body: EventBody) -> Event {
        Event::new(seq, 0, body)
    }

    fn descriptor(data: Value) -> Descriptor {
        serde_json::from_value(data).unwrap()
    }

    #[test]
    fn descriptors_write_only_the_fields_that_are_set() {
        let written = descriptor(json!({"version": 1, "provider": "spawn", "agentModel": "m"}));
        let line =
            serde_json::to_string(&event(3, EventBody::SubagentDescriptor(written))).unwrap();
        assert_eq!(
            line,
            r#"{"type":"subagent/descriptor","seq":3,"time":0,"data":{"version":1,"provider":"spawn","agentModel":"m"}}"#
        );
    }

    #[test]
    fn the_first_descriptor_decides_and_other_versions_are_not_resumable() {
        let v1 =
            descriptor(json!({"version": 1, "provider": "fork", "toolFilter": {"deny": ["bash"]}}));
        let v2 = descriptor(json!({"version": 2, "provider": "spawn"}));
        let events = vec![
            event(0, EventBody::SubagentDescriptor(v1)),
            event(1, EventBody::SubagentDescriptor(v2.clone())),
        ];
        let folded = Descriptor::fold(&events).unwrap();
        assert_eq!(folded.provider, "fork");
        assert_eq!(
            folded.tool_filter.unwrap().deny,
            Some(vec!["bash".to_owned()])
        );
        assert_eq!(
            Descriptor::fold(&[event(0, EventBody::SubagentDescriptor(v2))]),
            None
        );
        assert_eq!(Descriptor::fold(&[]), None);
    }

    #[test]
    fn a_task_is_unfinished_until_its_end_whichever_comes_first_in_the_log() {
        let start = |task: &str| {
            EventBody::TaskStart(TaskStart {
                task: task.into(),
                kind: "subagent".into(),
                label: "l".into(),
                child: None,
            })
        };
        let end = |task: &str| {
            EventBody::TaskEnd(TaskEnd {
                task: task.into(),
                status: "completed".into(),
            })
        };
        let events = vec![
            event(0, end("subagent-2")),
            event(1, start("subagent-1")),
            event(2, start("subagent-2")),
            event(3, start("subagent-3")),
            event(4, end("subagent-3")),
        ];
        let open: Vec<String> = unfinished_tasks(&events)
            .into_iter()
            .map(|t| t.task)
            .collect();
        assert_eq!(open, ["subagent-1"]);
    }

    #[test]
    fn a_child_record_skips_the_seed() {
        let mut header = Header::new("c".into(), 1, "/w".into(), vec![]);
        header.parent_session = Some("p".into());
        header.seed_length = Some(1);
        let inherited = r#"{"type":"subagent/descriptor","seq":0,"time":0,"data":{"version":1,"provider":"spawn"}}"#;
        let own = r#"{"type":"subagent/descriptor","seq":1,"time":0,"data":{"version":1,"provider":"fork"}}"#;
        let text = format!(
            "{}\n{inherited}\n{own}\n",
            serde_json::to_string(&header).unwrap()
        );
        let (read, found) = child_record(text.as_bytes()).unwrap();
        assert_eq!(read.id, "c");
        assert_eq!(found.unwrap().provider, "fork");
        let text = format!("{}\n{inherited}\n", serde_json::to_string(&header).unwrap());
        assert_eq!(child_record(text.as_bytes()).unwrap().1, None);
    }
}

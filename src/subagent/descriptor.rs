//! The durable recipe of a continuable child: the `subagent/descriptor` log event, written in
//! the child's first turn, from which a later activation rebuilds the same child (provider,
//! model, persona, tool filter). Log-only: never part of the model's history.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::ToolFilter;
use crate::session::{Event, EventBody, OtherEvent};

/// The event's `type`.
pub const DESCRIPTOR_EVENT: &str = "subagent/descriptor";
/// The only descriptor version kin writes and resumes.
pub const DESCRIPTOR_VERSION: u32 = 1;

/// What a cold resume needs to rebuild a child. Optional fields are omitted when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub version: u32,
    /// The subagent provider that made the child (`spawn`, `fork`).
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persona: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_filter: Option<StoredToolFilter>,
    /// What only the provider reads (for `acp:<name>`: the child's own `sessionId` and `cwd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_data: Option<Value>,
}

/// A tool filter as stored (absent lists are omitted, never written as `[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToolFilter {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

impl From<&ToolFilter> for StoredToolFilter {
    fn from(filter: &ToolFilter) -> Self {
        Self {
            allow: filter.allow.clone(),
            deny: filter.deny.clone(),
        }
    }
}

impl From<&StoredToolFilter> for ToolFilter {
    fn from(filter: &StoredToolFilter) -> Self {
        Self {
            allow: filter.allow.clone(),
            deny: filter.deny.clone(),
        }
    }
}

impl Descriptor {
    /// The log event carrying this descriptor.
    pub fn to_event(&self) -> EventBody {
        EventBody::Other(OtherEvent {
            kind: DESCRIPTOR_EVENT.into(),
            data: serde_json::to_value(self).unwrap_or(Value::Null),
        })
    }

    /// The first descriptor among `events` (pass only the child's own events, after its
    /// seed, so a fork cannot pick up an ancestor's). `None` when there is none or the first
    /// one is of another version or shape: the child is not resumable.
    pub fn fold(events: &[Event]) -> Option<Self> {
        let data = events.iter().find_map(|event| match &event.body {
            EventBody::Other(other) if other.kind == DESCRIPTOR_EVENT => Some(&other.data),
            _ => None,
        })?;
        Self::parse(data)
    }

    /// Reads a descriptor event's data; `None` unless it is a well-formed version 1.
    pub fn parse(data: &Value) -> Option<Self> {
        let descriptor: Self = Descriptor::deserialize(data).ok()?;
        (descriptor.version == DESCRIPTOR_VERSION).then_some(descriptor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, body: EventBody) -> Event {
        Event::new(seq, 0, body)
    }

    #[test]
    fn writes_only_the_fields_that_are_set() {
        let descriptor = Descriptor {
            version: 1,
            provider: "spawn".into(),
            agent_provider: Some("mock".into()),
            agent_model: Some("mock".into()),
            persona: None,
            tool_filter: None,
            provider_data: None,
        };
        let EventBody::Other(other) = descriptor.to_event() else {
            panic!("not an other event");
        };
        assert_eq!(other.kind, "subagent/descriptor");
        assert_eq!(
            other.data,
            json!({"version": 1, "provider": "spawn", "agentProvider": "mock", "agentModel": "mock"})
        );
    }

    #[test]
    fn the_first_descriptor_decides_and_other_versions_are_not_resumable() {
        let v1 = json!({"version": 1, "provider": "fork", "toolFilter": {"deny": ["bash"]}});
        let v2 = json!({"version": 2, "provider": "spawn"});
        let other = |data: Value| {
            EventBody::Other(OtherEvent {
                kind: DESCRIPTOR_EVENT.into(),
                data,
            })
        };
        let events = vec![event(0, other(v1.clone())), event(1, other(v2.clone()))];
        let folded = Descriptor::fold(&events).unwrap();
        assert_eq!(folded.provider, "fork");
        assert_eq!(
            folded.tool_filter.unwrap().deny,
            Some(vec!["bash".to_owned()])
        );
        assert_eq!(Descriptor::fold(&[event(0, other(v2))]), None);
        assert_eq!(Descriptor::fold(&[event(0, other(json!("junk")))]), None);
        assert_eq!(Descriptor::fold(&[]), None);
    }
}

//! The delegation records a log carries, log-only (never part of the model's history):
//! - `subagent/descriptor`, in a continuable child's log: how to rebuild it for its next
//!   activation;
//! - `task/start` and `task/end`, in the owner's log: a background delegation task began, and
//!   it settled. A later process folds them to show the tasks left unfinished as interrupted.
//!
//! The vocabulary only: reading them back is `child.rs` (a child's descriptor from its file)
//! and the folds of their users.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Restricts the tools a child may use; stored as given (absent lists are omitted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFilter {
    /// Only these tools, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// Never these tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

/// What a cold resume needs to rebuild a child. Optional fields are omitted when unset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub(crate) version: u32,
    /// The subagent provider that made the child (`spawn`, `fork`, `acp:<name>`).
    pub(crate) provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) persona: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool_filter: Option<ToolFilter>,
    /// The child's own permission mode id (from an agent definition), kept on a resume; the
    /// parent's stays its ceiling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) permission: Option<String>,
    /// The wall-clock limit the delegating call set, in milliseconds: every later activation
    /// runs under it too (a continuation cannot widen it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) timeout_ms: Option<u64>,
    /// The token budget the delegating call set, for every activation of the child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) budget_tokens: Option<u64>,
    /// What only the provider reads (for `acp:<name>`: the child's own `sessionId` and `cwd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) provider_data: Option<Value>,
}

impl Descriptor {
    /// The event's `type`.
    pub(crate) const KIND: &'static str = "subagent/descriptor";
    /// The only descriptor version kin writes and resumes.
    pub(crate) const VERSION: u32 = 1;

    /// Whether a resume may use it (a later version is kept, but not resumed).
    pub(crate) fn is_resumable(&self) -> bool {
        self.version == Self::VERSION
    }
}

/// A closed set of names written as plain strings, plus `Other` for a name this build does not
/// know (from an older or newer kin), kept as it was and written back unchanged.
macro_rules! logged_names {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident => $text:literal,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
        #[serde(from = "String")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
            /// A name this build does not know, kept as it was.
            Other(String),
        }

        impl $name {
            /// The name as written in the log.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)*
                    Self::Other(name) => name,
                }
            }
        }

        impl From<String> for $name {
            fn from(name: String) -> Self {
                match name.as_str() {
                    $($text => Self::$variant,)*
                    _ => Self::Other(name),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    };
}

logged_names! {
    /// What kind of work a logged task is.
    TaskKind {
        /// A background delegation (`subagent`).
        Subagent => "subagent",
    }
}

logged_names! {
    /// How a logged task ended.
    TaskEndStatus {
        /// The work finished.
        Completed => "completed",
        /// The work was stopped.
        Killed => "killed",
        /// The work failed.
        Failed => "failed",
        /// An earlier kin process ended before the result was read.
        Interrupted => "interrupted",
    }
}

/// `task/start`: a background delegation task began (in the owner's log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStart {
    /// The task id (`subagent-N`).
    pub(crate) task: String,
    /// The task kind.
    pub(crate) kind: TaskKind,
    /// The label shown for it.
    pub(crate) label: String,
    /// The continuable child it runs, if any (a one-shot child has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) child: Option<String>,
}

/// `task/end`: a background task settled (in the owner's log).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskEnd {
    pub(crate) task: String,
    /// How it ended (`completed`, `killed` or `failed`).
    pub(crate) status: TaskEndStatus,
    /// What the background activation cost (its descendants included), counted for the turn
    /// that started the task, not the one it settled in; absent when nothing was priced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cost: Option<f64>,
}

impl TaskStart {
    pub(crate) const KIND: &'static str = "task/start";
}

impl TaskEnd {
    pub(crate) const KIND: &'static str = "task/end";
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn descriptors_write_only_the_fields_that_are_set() {
        let descriptor: Descriptor =
            serde_json::from_value(json!({"version": 1, "provider": "spawn", "agentModel": "m"}))
                .unwrap();
        assert!(descriptor.is_resumable());
        assert_eq!(
            serde_json::to_string(&descriptor).unwrap(),
            r#"{"version":1,"provider":"spawn","agentModel":"m"}"#
        );
        let later: Descriptor =
            serde_json::from_value(json!({"version": 2, "provider": "fork"})).unwrap();
        assert!(!later.is_resumable());
    }

    #[test]
    fn task_records_keep_kinds_and_statuses_they_do_not_know() {
        let start: TaskStart = serde_json::from_value(
            json!({"task": "subagent-1", "kind": "subagent", "label": "bg"}),
        )
        .unwrap();
        assert_eq!(start.kind, TaskKind::Subagent);
        let end: TaskEnd =
            serde_json::from_value(json!({"task": "subagent-1", "status": "killed"})).unwrap();
        assert_eq!(end.status, TaskEndStatus::Killed);
        // Names from another build load, and are written back as they were.
        let line = r#"{"task":"review-2","kind":"review","label":"r"}"#;
        let start: TaskStart = serde_json::from_str(line).unwrap();
        assert_eq!(start.kind, TaskKind::Other("review".into()));
        assert_eq!(serde_json::to_string(&start).unwrap(), line);
        let line = r#"{"task":"review-2","status":"paused","cost":0.5}"#;
        let end: TaskEnd = serde_json::from_str(line).unwrap();
        assert_eq!(end.status, TaskEndStatus::Other("paused".into()));
        assert_eq!(serde_json::to_string(&end).unwrap(), line);
        for status in ["completed", "killed", "failed", "interrupted"] {
            let end: TaskEnd =
                serde_json::from_value(json!({"task": "t-1", "status": status})).unwrap();
            assert!(!matches!(end.status, TaskEndStatus::Other(_)));
            assert_eq!(end.status.as_str(), status);
        }
    }
}

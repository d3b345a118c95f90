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

/// `task/start`: a background delegation task began (in the owner's log).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStart {
    /// The task id (`subagent-N`).
    pub(crate) task: String,
    /// The task kind (`subagent`).
    pub(crate) kind: String,
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
    /// `completed`, `killed` or `failed`.
    pub(crate) status: String,
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
}

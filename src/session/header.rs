//! Line 1 of every session log: who the session is, where it works, and where it sits in a
//! delegation tree.

use serde::{Deserialize, Serialize};

/// Line 1 of every session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Always `session`.
    #[serde(rename = "type")]
    pub kind: String,
    pub(crate) version: u32,
    /// The session's id.
    pub id: String,
    /// When the session was created (epoch ms).
    pub created_at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) additional_directories: Vec<String>,
    /// The delegating session, for a child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) seed_length: Option<u64>,
    /// How deep in a delegation tree the session is (0: a top-level session).
    #[serde(default)]
    pub delegation_depth: u32,
    /// The front end that created a top-level session when it is not an editor over ACP
    /// (`"mcp"`: `kin mcp`, for a parent agent); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_over: Option<String>,
    /// The agent definition (by name) a top-level session runs as: its persona, tools and
    /// permission are applied again each time the session is opened; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) agent_definition: Option<String>,
    /// For a delegated child: the delegating call's `description`, the title it is shown under
    /// (live and after `session/load`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) label: Option<String>,
}

impl Header {
    pub(crate) const KIND: &'static str = "session";
    pub(crate) const VERSION: u32 = 0;

    /// The header of a new top-level session.
    pub fn new(
        id: String,
        created_at: u64,
        cwd: String,
        additional_directories: Vec<String>,
    ) -> Self {
        Self {
            kind: Self::KIND.into(),
            version: Self::VERSION,
            id,
            created_at,
            cwd: Some(cwd),
            additional_directories,
            parent_session: None,
            seed_length: None,
            delegation_depth: 0,
            started_over: None,
            agent_definition: None,
            label: None,
        }
    }
}

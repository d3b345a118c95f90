//! What to launch as a child agent, and the limits every child run keeps.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::AcpPermission;
use crate::tools::SessionPermissions;

/// Where the delegation depth goes on `session/new`: `_meta` key.
pub const DEPTH_META_KEY: &str = "kin.delegationDepth";
/// ... and the environment variable, for launchers that do not speak ACP.
pub const DEPTH_ENV: &str = "KIN_DELEGATION_DEPTH";
/// The most a child may send in agent message text and other updates in one run.
pub const MAX_OUTPUT_BYTES: usize = 4 << 20;

/// What to launch, and how to treat it.
#[derive(Debug, Clone)]
pub struct ChildCommand {
    pub program: String,
    pub args: Vec<String>,
    /// Added after the credential scrub.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub permission: AcpPermission,
    /// The delegating session's permissions: the child's requests are answered within their
    /// current mode, whatever `permission` says (a `read-only` parent refuses edits and commands).
    pub ceiling: Option<Arc<SessionPermissions>>,
    /// The child's delegation depth (the parent's plus one).
    pub depth: u32,
    pub initialize_timeout: Duration,
    /// Teardown: after stdin closes, the wait before SIGTERM; after SIGTERM, before SIGKILL.
    pub eof_grace: Duration,
    pub term_grace: Duration,
    /// The delegating session's MCP servers as ACP `mcpServers` entries; the child's
    /// `session/new` (and resume or load) gets those its `mcpCapabilities` accept.
    pub mcp_servers: Vec<serde_json::Value>,
}

//! What to launch as a child agent, and the limits every child run keeps.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::AcpPermission;
use crate::process::child_env::ChildEnv;
use crate::process::sandbox::{CommandScope, Sandbox};
use crate::tools::private::PrivateFiles;
use crate::tools::SessionPermissions;

/// Where the delegation depth goes on `session/new`: `_meta` key.
pub const DEPTH_META_KEY: &str = "kin.delegationDepth";
/// Where kin's id for the child goes on `session/new` (`_meta` key): a kin child records it as
/// its session's parent.
pub const PARENT_META_KEY: &str = "kin.parentSession";
/// ... and the environment variable, for launchers that do not speak ACP.
pub const DEPTH_ENV: &str = "KIN_DELEGATION_DEPTH";
/// The most a child may send in agent message text and other updates in one run.
pub const MAX_OUTPUT_BYTES: usize = 4 << 20;

impl ChildCommand {
    /// The working directory the child is told on `session/new`: the remote one, if any.
    pub(crate) fn session_cwd(&self) -> String {
        match &self.remote_cwd {
            Some(remote) => remote.clone(),
            None => self.cwd.to_string_lossy().into_owned(),
        }
    }
}

/// What to launch, and how to treat it.
#[derive(Debug, Clone)]
pub struct ChildCommand {
    /// The program to run (looked up on `PATH` when not a path).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Added after the credential scrub.
    pub env: Vec<(String, String)>,
    /// The credential scrub of its environment and of the commands it runs through kin.
    pub child_env: ChildEnv,
    /// kin's own files, which its file requests never read.
    pub private: PrivateFiles,
    /// Where the local command runs.
    pub cwd: PathBuf,
    /// The child's working directory on the far side of a channel (`ssh`, `docker exec -i`),
    /// sent on `session/new` instead of `cwd`. Such a child gets no file services (its paths
    /// are not this machine's), and its end is a broken connection.
    pub remote_cwd: Option<String>,
    /// How the child's permission requests are answered.
    pub permission: AcpPermission,
    /// The delegating session's permissions: the child's requests are answered within their
    /// current mode, whatever `permission` says (a `read-only` parent refuses edits and commands).
    pub ceiling: Option<Arc<SessionPermissions>>,
    /// The child's delegation depth (the parent's plus one).
    pub depth: u32,
    /// How long the child may take to answer `initialize`.
    pub initialize_timeout: Duration,
    /// Teardown: after stdin closes, the wait before SIGTERM; after SIGTERM, before SIGKILL.
    pub eof_grace: Duration,
    /// After SIGTERM, the wait before SIGKILL.
    pub term_grace: Duration,
    /// The child's place in kin's tree: its updates are passed on, its permission requests
    /// and file requests served through the delegating session's editor.
    pub link: Option<super::forward::ChildLink>,
    /// The delegating session's MCP servers as ACP `mcpServers` entries; the child's
    /// `session/new` (and resume or load) gets those its `mcpCapabilities` accept.
    pub mcp_servers: Vec<serde_json::Value>,
    /// The kernel sandbox the child (a local process) and the commands it runs through kin
    /// are held to; `None`: unconfined.
    pub sandbox: Option<ChildSandbox>,
}

/// How a local child is confined: by the delegating session's sandbox, its commands as the
/// session's are (within the parent's current mode), the child itself also writing where it
/// keeps its own state.
#[derive(Debug, Clone)]
pub struct ChildSandbox {
    /// The delegating kin's sandbox.
    pub sandbox: Arc<Sandbox>,
    /// The delegating session (whose private temp directory the child shares).
    pub session: String,
    /// Where the child keeps its own state (its `KIN_HOME` for a kin child; `writable` of its
    /// `[acp_agents]` table and the defaults of the agents kin knows).
    pub state: Vec<PathBuf>,
    /// Whether the child itself is confined (`sandbox` of its table); its commands through
    /// kin's terminals are either way.
    pub confined: bool,
    /// Added to the environment of a confined child (where it then keeps its state).
    pub env: Vec<(String, String)>,
    /// Its `[acp_agents.<name>]`, named when the sandbox refused it a write.
    pub agent: String,
}

impl ChildSandbox {
    /// Where the child's commands work: its cwd (resolved as it is when the child or its
    /// terminal starts), under the parent's current mode.
    pub(crate) fn scope(&self, cwd: &std::path::Path, read_only: bool) -> CommandScope<'_> {
        CommandScope {
            session: &self.session,
            roots: vec![crate::process::sandbox_policy::canonical(cwd)],
            read_only,
        }
    }
}

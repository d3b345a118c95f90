//! Wiring: the one [`Runtime`] a process holds puts together the session host, the background
//! tasks, and delegation, in one place and in this order: store, tasks, delegation (and its
//! tools), host; then delegation is attached to the host. Passed around as `Arc<Runtime>`; no
//! globals. It also opens, closes and deletes sessions for the front ends (`acp/agent.rs`,
//! `headless.rs`), with what delegation adds to each: restoring interrupted tasks, stopping
//! the tasks a session owns.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agent::host::AgentHost;
use crate::agent::mcp_view::McpView;
use crate::agent::shape::SessionShape;
use crate::agent::Agent;
use crate::config::agents::{self, AgentDefinition, UnknownAgent};
use crate::config::{AcpAgentConfig, DelegationSettings};
use crate::delegation::{Delegation, DEFAULT_MAX_DEPTH};
use crate::limits::Limits;
use crate::mcp::{ServerSpec, SessionServers};
use crate::model::Model;
use crate::process::child_env::ChildEnv;
use crate::process::git_worktree as worktree;
use crate::process::sandbox::Sandbox;
use crate::session::{SessionStore, StoreError};
use crate::tasks::{TaskKillTool, TaskListTool, TaskOutputTool, TaskService};
use crate::tools::private::PrivateFiles;
use crate::tools::ToolRegistry;

pub use crate::agent::host::{HostError as RuntimeError, DEFAULT_MAX_STEPS};

/// Settings of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Steps one turn may take.
    pub max_steps: u32,
    /// Calls of one step that run at once (`[tools] max_parallel`).
    pub max_parallel: usize,
    /// When requests go lean (`[tools] lean`).
    pub lean: crate::agent::lean::LeanMode,
    /// The deepest a delegated child may be (1: children cannot delegate further).
    pub subagent_max_depth: u32,
    /// Child agents over ACP, each with its own delegation tool.
    pub acp_agents: Vec<AcpAgentConfig>,
    /// The configured models (`None`: only the model given to [`Runtime::new`]).
    pub models: Option<crate::model::ModelCatalog>,
    /// Time limits, caps and budgets of delegated children (`[delegation]`).
    pub delegation: DelegationSettings,
    /// MCP servers from the config file, for every session (an editor's of the same name win).
    pub mcp_servers: Vec<ServerSpec>,
    /// How long a session's first prompt waits for its MCP servers to start.
    pub mcp_startup_timeout: Duration,
    /// Caps on sizes the model and the client choose.
    pub limits: Limits,
    /// The most MCP tools offered to the model (`mcp_max_tools`).
    pub mcp_max_tools: usize,
    /// The kernel sandbox of the processes sessions start (default: off).
    pub sandbox: Arc<Sandbox>,
    /// The configured MCP stdio servers that run inside it (`sandbox = true`), by name.
    pub mcp_sandboxed: Vec<String>,
    /// The environment scrub of every process sessions start (tools, child agents, MCP
    /// servers, git): shared, so a key the model loads later is hidden from all of them.
    pub child_env: ChildEnv,
    /// kin's own files, which no tool reads and no prompt attaches.
    pub private: PrivateFiles,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            max_parallel: crate::agent::host::DEFAULT_MAX_PARALLEL,
            lean: Default::default(),
            subagent_max_depth: DEFAULT_MAX_DEPTH,
            acp_agents: Vec::new(),
            models: None,
            delegation: DelegationSettings::default(),
            mcp_servers: Vec::new(),
            mcp_startup_timeout: crate::mcp::DEFAULT_STARTUP_TIMEOUT,
            limits: Limits::DEFAULT,
            mcp_max_tools: crate::mcp::DEFAULT_MAX_TOOLS,
            sandbox: Arc::new(Sandbox::off()),
            mcp_sandboxed: Vec::new(),
            child_env: ChildEnv::default(),
            private: PrivateFiles::default(),
        }
    }
}

/// What became of the agent definition of a session [`Runtime::open_defined`] opened.
pub(crate) enum Reopened {
    /// It records none, or was live already (narrowed when it first opened).
    Plain,
    /// Found again and applied.
    Defined(AgentDefinition),
    /// No longer defined.
    Missing(UnknownAgent),
}

/// The one process-wide runtime: the session host, the background tasks and delegation, put together; the front ends open, close and delete sessions through it.
pub struct Runtime {
    host: Arc<AgentHost>,
    tasks: Arc<TaskService>,
    delegation: Arc<Delegation>,
    /// Cancels background tasks at shutdown.
    shutdown: CancellationToken,
    mcp_servers: Vec<ServerSpec>,
    mcp_startup_timeout: Duration,
    limits: Limits,
    mcp_max_tools: usize,
    sandbox: Arc<Sandbox>,
    mcp_sandboxed: Vec<String>,
}

impl Runtime {
    /// A runtime with `base_tools` plus the delegation and task tools.
    pub fn new(
        home: &Path,
        model: Arc<dyn Model>,
        base_tools: ToolRegistry,
        options: RuntimeOptions,
    ) -> Result<Arc<Self>, StoreError> {
        let store = SessionStore::open(home)?;
        let shutdown = CancellationToken::new();
        let tasks = Arc::new(TaskService::new(shutdown.child_token()));
        let models = Arc::new(
            options
                .models
                .clone()
                .unwrap_or_else(|| crate::model::ModelCatalog::single(model.clone())),
        );
        let delegation = Delegation::new(
            store.clone(),
            tasks.clone(),
            options.subagent_max_depth,
            &options.acp_agents,
            options.delegation.clone(),
            &options.sandbox,
            home,
        );
        let mut tools = base_tools;
        for tool in delegation.tools() {
            tools.register(tool);
        }
        tools.register(Arc::new(TaskOutputTool(tasks.clone())));
        tools.register(Arc::new(TaskListTool(tasks.clone())));
        tools.register(Arc::new(TaskKillTool(tasks.clone())));
        let host = Arc::new(
            AgentHost::new(store, model, Arc::new(tools), options.max_steps)
                .with_models(models)
                .with_limits(options.limits)
                .with_secrets(options.child_env, options.private)
                .with_sandbox(options.sandbox.clone())
                .with_max_parallel(options.max_parallel)
                .with_lean(options.lean),
        );
        delegation.attach(&host);
        Ok(Arc::new(Self {
            host,
            tasks,
            delegation,
            shutdown,
            mcp_servers: options.mcp_servers,
            mcp_startup_timeout: options.mcp_startup_timeout,
            limits: options.limits,
            mcp_max_tools: options.mcp_max_tools,
            sandbox: options.sandbox,
            mcp_sandboxed: options.mcp_sandboxed,
        }))
    }

    /// The size caps in force.
    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Sessions, the model, and the turns they run.
    pub fn host(&self) -> &Arc<AgentHost> {
        &self.host
    }

    /// The background task service.
    pub fn tasks(&self) -> &Arc<TaskService> {
        &self.tasks
    }

    /// The model's delegation verbs.
    pub fn delegation(&self) -> &Arc<Delegation> {
        &self.delegation
    }

    /// The live agent of a stored session (see [`AgentHost::open_session`]); the background
    /// tasks an earlier process left unfinished show as interrupted. A session that records an
    /// agent definition runs as it again (see [`Runtime::open_defined`]).
    pub fn open_session(
        &self,
        id: &str,
        cwd: PathBuf,
        additional: Option<Vec<PathBuf>>,
    ) -> Result<Arc<Agent>, RuntimeError> {
        Ok(self.open_defined(id, cwd, additional)?.0)
    }

    /// [`Runtime::open_session`], saying what became of the agent definition the session
    /// records: found again (for `cwd`) and applied, or gone, in which case the session's
    /// calls are decided within the mode its log records, at most.
    pub(crate) fn open_defined(
        &self,
        id: &str,
        cwd: PathBuf,
        additional: Option<Vec<PathBuf>>,
    ) -> Result<(Arc<Agent>, Reopened), RuntimeError> {
        let mut reopened = Reopened::Plain;
        let host = &self.host;
        let agent = host.open_session(id, cwd, additional, |header, cwd| {
            let Some(name) = header.agent_definition.as_deref() else {
                return SessionShape::default();
            };
            // A session isolated in a worktree finds its definition where it was started: in
            // the checkout the worktree was made from (a workspace's definitions are seldom
            // committed, so the worktree may not have them).
            let workspace = worktree::checkout_of(cwd);
            match agents::find(host, name, workspace.as_deref().unwrap_or(cwd)) {
                Ok(definition) => {
                    let shape = definition.shape();
                    reopened = Reopened::Defined(definition);
                    shape
                }
                Err(missing) => {
                    tracing::warn!(session = id, "{missing}; running within its recorded mode");
                    reopened = Reopened::Missing(missing);
                    SessionShape::default()
                }
            }
        })?;
        if matches!(reopened, Reopened::Missing(_)) {
            agent.cap_permissions(agent.permission_mode());
        }
        self.delegation.restore(&agent);
        Ok((agent, reopened))
    }

    /// Starts the session's MCP servers (the configured ones merged with `editor`'s) in the
    /// background, replacing any it had (which are stopped in the background); `client` hears at
    /// once of a server waiting for a login. Returns at once.
    pub(crate) fn start_mcp(
        &self,
        agent: &Agent,
        editor: Vec<ServerSpec>,
        client: Option<Arc<dyn crate::tools::ClientBridge>>,
    ) {
        let mut specs = crate::mcp::merge(&self.mcp_servers, editor);
        for spec in specs
            .iter_mut()
            .filter(|spec| self.mcp_sandboxed.contains(&spec.name))
        {
            if let Err(error) = self.confine_mcp(agent, spec) {
                tracing::warn!(server = spec.name, %error, "an MCP server is not started");
            }
        }
        let view = (!specs.is_empty()).then(|| McpView {
            servers: SessionServers::start(
                specs,
                agent.cwd.clone(),
                self.mcp_startup_timeout,
                self.mcp_max_tools,
                self.host.child_env().clone(),
                client,
            ),
            keep: agent.own_mcp_keep(),
            owned: true,
        });
        if let Some(old) = agent.set_mcp(view) {
            tokio::spawn(async move { old.stop().await });
        }
    }

    /// Rewrites a stdio server's command to start inside the session's sandbox; one that cannot
    /// be confined under `required` gets a command that fails with the reason.
    fn confine_mcp(&self, agent: &Agent, spec: &mut ServerSpec) -> Result<(), String> {
        use crate::process::sandbox::CommandScope;
        let crate::mcp::Transport::Stdio { command, args, env } = &mut spec.transport else {
            return Ok(());
        };
        let scope = CommandScope {
            session: &agent.id,
            roots: agent.roots().all().to_vec(),
            read_only: agent.permissions().effective_mode()
                == crate::tools::PermissionMode::ReadOnly,
        };
        match self.sandbox.command(&scope, command, args) {
            Ok(launch) => {
                *command = launch.program;
                *args = launch.args;
                env.extend(launch.env);
                Ok(())
            }
            Err(error) => {
                // Started anyway, to fail with the reason as its stderr (the server's error
                // names it).
                let reason = error.to_string();
                *command = "sh".into();
                *args = vec![
                    "-c".into(),
                    "echo \"kin: $1\" >&2; exit 126".into(),
                    "sh".into(),
                    reason.clone(),
                ];
                Err(reason)
            }
        }
    }

    /// The kernel sandbox of the processes sessions start.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// Stops the session's MCP servers and waits until their processes are gone.
    async fn stop_mcp(agent: &Agent) {
        if let Some(servers) = agent.set_mcp(None) {
            servers.stop().await;
        }
    }

    /// Closes a session: the background work it owns is stopped, and it leaves the live
    /// sessions (its turn cancelled and settled). `false` if it is neither live nor stored.
    pub(crate) async fn close_session(&self, id: &str) -> bool {
        let owned: Vec<_> = self
            .tasks
            .list(id)
            .into_iter()
            .filter(|task| task.owner.as_deref() == Some(id) && !task.status.is_terminal())
            .map(|task| task.id)
            .collect();
        self.tasks.cancel_owned(id);
        let closed = match self.host.unpublish(id) {
            Some(agent) => {
                agent.settle().await;
                Self::stop_mcp(&agent).await;
                true
            }
            None => self.host.store().exists(id),
        };
        // Its children report their end before the close is answered: nothing about the
        // session is sent after that.
        for task in owned {
            self.tasks.until_settled(task.as_str()).await;
        }
        closed
    }

    /// Deletes a session and the sessions it delegated to, after stopping the work it owns.
    pub(crate) async fn delete_session(&self, id: &str) -> Result<(), StoreError> {
        self.tasks.cancel_owned(id);
        if let Some(agent) = self.host.live(id) {
            Self::stop_mcp(&agent).await;
        }
        self.host.delete_session(id).await
    }

    /// Cancels every background task, turn and child, and waits until all have settled.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.shutdown().await;
        self.host.shutdown().await;
    }
}

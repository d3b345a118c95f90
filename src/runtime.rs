//! Wiring: the one [`Runtime`] a process holds puts together the session host, the background
//! tasks, and delegation (providers and the tools that reach them). Passed around as
//! `Arc<Runtime>`; no globals. Holds no logic of its own beyond startup and shutdown order.

use std::path::Path;
use std::sync::{Arc, Weak};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent::host::AgentHost;
use crate::agent::UserMessage;
use crate::config::AcpAgentConfig;
use crate::model::Model;
use crate::session::{SessionStore, StoreError, UserPart};
use crate::subagent::{
    AcpProvider, ChildHost, ForkProvider, ListAgentsTool, Provider, SendMessageTool, SpawnProvider,
    SubagentControl, SubagentService, SubagentTool, DEFAULT_MAX_DEPTH,
};
use crate::tasks::{Notice, TaskKillTool, TaskListTool, TaskOutputTool, TaskService};
use crate::tools::ToolRegistry;

pub use crate::agent::host::{HostError as RuntimeError, DEFAULT_MAX_STEPS};

/// Settings of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub max_steps: u32,
    /// The deepest a delegated child may be (1: children cannot delegate further).
    pub subagent_max_depth: u32,
    /// Child agents over ACP, each with its own delegation tool.
    pub acp_agents: Vec<AcpAgentConfig>,
    /// The configured models (`None`: only the model given to [`Runtime::new`]).
    pub models: Option<crate::model::ModelCatalog>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            subagent_max_depth: DEFAULT_MAX_DEPTH,
            acp_agents: Vec::new(),
            models: None,
        }
    }
}

pub struct Runtime {
    host: Arc<AgentHost>,
    subagents: Arc<SubagentService>,
    tasks: Arc<TaskService>,
    /// Continuable background children (`send_message`, `list_agents`).
    control: Arc<SubagentControl>,
    /// Cancels background tasks at shutdown.
    shutdown: CancellationToken,
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
        let subagents = Arc::new(SubagentService::new());
        let models = Arc::new(
            options
                .models
                .clone()
                .unwrap_or_else(|| crate::model::ModelCatalog::single(model.clone())),
        );
        // The host's tools reach the providers, which reach the host: weakly.
        let mut control = None;
        let host = Arc::new_cyclic(|weak: &Weak<AgentHost>| {
            let host: Weak<dyn ChildHost> = weak.clone();
            let acp_host = host.clone();
            let continuable = Arc::new(SubagentControl::new(
                tasks.clone(),
                subagents.clone(),
                store.clone(),
                host.clone(),
            ));
            let mut providers: Vec<(Arc<dyn Provider>, String)> = vec![
                (
                    Arc::new(SpawnProvider::new(host.clone())),
                    "subagent".into(),
                ),
                (Arc::new(ForkProvider::new(host)), "subagent_fork".into()),
            ];
            for agent in &options.acp_agents {
                let tool = agent.tool.clone();
                let provider = AcpProvider::new(agent.clone(), acp_host.clone());
                providers.push((Arc::new(provider), tool));
            }
            let mut tools = base_tools;
            for (provider, tool) in providers {
                let subagent_tool = SubagentTool::new(
                    &tool,
                    provider.name(),
                    provider.inherits_parent_context(),
                    Some(options.subagent_max_depth),
                    subagents.clone(),
                    continuable.clone(),
                );
                tools.register(Arc::new(subagent_tool.with_models(models.clone())));
                if let Err(error) = subagents.register(provider) {
                    tracing::error!(%error, "registering a subagent provider failed");
                }
            }
            tools.register(Arc::new(SendMessageTool(continuable.clone())));
            tools.register(Arc::new(ListAgentsTool(continuable.clone())));
            control = Some(continuable);
            tools.register(Arc::new(TaskOutputTool(tasks.clone())));
            tools.register(Arc::new(TaskListTool(tasks.clone())));
            tools.register(Arc::new(TaskKillTool(tasks.clone())));
            AgentHost::new(store, model, Arc::new(tools), options.max_steps).with_models(models)
        });
        // A background task that settles unseen leaves its owner a notice for the next call.
        let weak = Arc::downgrade(&host);
        tasks.set_notice_sink(Box::new(move |notice| {
            let owner = match &notice {
                Notice::Post { owner, .. } | Notice::Withdraw { owner, .. } => owner,
            };
            let Some(agent) = weak.upgrade().and_then(|host| host.live(owner)) else {
                return;
            };
            match notice {
                Notice::Post { id, text, .. } => agent.inject(UserMessage {
                    content: vec![UserPart::Text { text }],
                    source: json!({"kind": "plugin", "plugin": "tool-tasks"}),
                    role: "user".into(),
                    id,
                }),
                Notice::Withdraw { id, .. } => agent.withdraw(&id),
            }
        }));
        let control = control.ok_or_else(|| StoreError::NotFound {
            id: "the subagent control service".into(),
        })?;
        Ok(Arc::new(Self {
            host,
            subagents,
            tasks,
            control,
            shutdown,
        }))
    }

    /// Sessions, the model, and the turns they run.
    pub fn host(&self) -> &Arc<AgentHost> {
        &self.host
    }

    /// The delegation providers.
    pub fn subagents(&self) -> &Arc<SubagentService> {
        &self.subagents
    }

    pub fn tasks(&self) -> &Arc<TaskService> {
        &self.tasks
    }

    /// Continuable background children.
    pub fn control(&self) -> &Arc<SubagentControl> {
        &self.control
    }

    /// Cancels every background task, turn and child, and waits until all have settled.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.shutdown().await;
        self.host.shutdown().await;
    }
}

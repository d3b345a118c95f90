//! The one `Runtime` a process holds: session store, model, tools, the registry of live
//! agents, background tasks and delegation. Passed around as `Arc<Runtime>`; no globals.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::{system_prompt, Agent, AgentOptions, AgentSpec, TurnDeps, UserMessage};
use crate::model::Model;
use crate::session::{Header, SessionStore, StoreError, UserPart};
use crate::subagent::{
    ChildNotice, ForkProvider, ListAgentsTool, LiveAgents, SendMessageTool, SpawnProvider,
    SubagentControl, SubagentService, SubagentTool, DEFAULT_MAX_DEPTH,
};
use crate::tasks::{TaskKillTool, TaskListTool, TaskOutputTool, TaskService};
use crate::time::unique_now_ms;
use crate::tools::ToolRegistry;

/// Steps (model calls) one turn may take before it is stopped.
pub const DEFAULT_MAX_STEPS: u32 = 100;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("session {id} is already open in this process")]
    AlreadyLive { id: String },
}

/// Settings of a runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    pub max_steps: u32,
    /// The deepest a delegated child may be (1: children cannot delegate further).
    pub subagent_max_depth: u32,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            subagent_max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

pub struct Runtime {
    pub store: SessionStore,
    pub model: Arc<dyn Model>,
    /// Every tool a top-level session offers (children get a filtered copy).
    pub tools: Arc<ToolRegistry>,
    pub max_steps: u32,
    pub subagents: Arc<SubagentService>,
    pub tasks: Arc<TaskService>,
    /// Continuable background children (`send_message`).
    pub control: Arc<SubagentControl>,
    /// The turns of in-process children.
    pub runs: TaskTracker,
    shutdown: CancellationToken,
    agents: Mutex<HashMap<String, Arc<Agent>>>,
    child_sink: Mutex<Option<ChildSink>>,
    /// Models for sessions whose options name another model than `model`, by name.
    named_models: Mutex<HashMap<String, Arc<dyn Model>>>,
}

/// The live registry as the control service sees it.
struct LiveRegistry(Weak<Runtime>);

impl LiveAgents for LiveRegistry {
    fn live(&self, id: &str) -> Option<Arc<Agent>> {
        self.0.upgrade()?.live(id)
    }
}

/// Receives [`ChildNotice`]s (see [`Runtime::set_child_sink`]).
pub type ChildSink = Arc<dyn Fn(ChildNotice<'_>) + Send + Sync>;

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
        let runtime = Arc::new_cyclic(|weak: &Weak<Runtime>| {
            let tasks = Arc::new(TaskService::new(shutdown.child_token()));
            let subagents = Arc::new(SubagentService::new());
            let providers: [Arc<dyn crate::subagent::Provider>; 2] = [
                Arc::new(SpawnProvider::new(weak.clone())),
                Arc::new(ForkProvider::new(weak.clone())),
            ];
            let mut tools = base_tools;
            for (provider, tool) in providers.into_iter().zip(["subagent", "subagent_fork"]) {
                tools.register(Arc::new(SubagentTool::new(
                    tool,
                    provider.name(),
                    provider.inherits_parent_context(),
                    Some(options.subagent_max_depth),
                    weak.clone(),
                )));
                if let Err(error) = subagents.register(provider) {
                    tracing::error!(%error, "registering a built-in subagent provider failed");
                }
            }
            tools.register(Arc::new(SendMessageTool::new(weak.clone())));
            tools.register(Arc::new(ListAgentsTool::new(weak.clone())));
            let control = Arc::new(SubagentControl::new(
                tasks.clone(),
                subagents.clone(),
                store.clone(),
                Arc::new(LiveRegistry(weak.clone())),
            ));
            tools.register(Arc::new(TaskOutputTool(tasks.clone())));
            tools.register(Arc::new(TaskListTool(tasks.clone())));
            tools.register(Arc::new(TaskKillTool(tasks.clone())));
            Self {
                store,
                model,
                tools: Arc::new(tools),
                max_steps: options.max_steps,
                subagents,
                tasks,
                control,
                runs: TaskTracker::new(),
                shutdown,
                agents: Mutex::new(HashMap::new()),
                child_sink: Mutex::new(None),
                named_models: Mutex::new(HashMap::new()),
            }
        });
        let weak = Arc::downgrade(&runtime);
        runtime.tasks.set_notice_sink(Box::new(move |owner, text| {
            let Some(agent) = weak.upgrade().and_then(|runtime| runtime.live(owner)) else {
                return;
            };
            agent.inject(UserMessage {
                content: vec![UserPart::Text { text }],
                source: json!({"kind": "plugin", "plugin": "tool-tasks"}),
                role: "user".into(),
                id: uuid::Uuid::new_v4().to_string(),
            });
        }));
        Ok(runtime)
    }

    /// Where reports about in-process children go (the ACP layer, when the client shows them).
    pub fn set_child_sink(&self, sink: ChildSink) {
        *self.child_sink.lock().unwrap_or_else(|p| p.into_inner()) = Some(sink);
    }

    pub fn notify_child(&self, notice: ChildNotice<'_>) {
        let sink = self
            .child_sink
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(sink) = sink {
            sink(notice);
        }
    }

    fn agents(&self) -> MutexGuard<'_, HashMap<String, Arc<Agent>>> {
        self.agents.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The model a session runs on: the runtime's, or the one its options name.
    pub fn model_for(&self, options: &AgentOptions) -> Arc<dyn Model> {
        let Some(name) = options.model.as_deref().filter(|n| *n != self.model.name()) else {
            return self.model.clone();
        };
        let mut named = self.named_models.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(model) = named.get(name) {
            return model.clone();
        }
        match self.model.with_model_name(name) {
            Some(model) => {
                named.insert(name.to_owned(), model.clone());
                model
            }
            None => {
                tracing::debug!(model = name, "this model cannot switch names; keeping it");
                self.model.clone()
            }
        }
    }

    pub fn turn_deps(&self, agent: &Agent) -> TurnDeps {
        TurnDeps {
            model: self.model_for(&agent.options),
            system: system_prompt(agent),
            max_steps: self.max_steps,
            client: None,
        }
    }

    fn top_level(
        &self,
        header: Header,
        cwd: PathBuf,
        log: crate::session::SessionLog,
        events: Vec<crate::session::Event>,
    ) -> Arc<Agent> {
        Arc::new(Agent::new(AgentSpec {
            header,
            cwd,
            log,
            events,
            options: AgentOptions::default(),
            persona: None,
            tools: self.tools.clone(),
            structured: None,
        }))
    }

    /// Creates, stores and publishes a new top-level session.
    pub fn create_session(
        &self,
        cwd: PathBuf,
        additional_directories: Vec<String>,
    ) -> Result<Arc<Agent>, RuntimeError> {
        let header = Header::new(
            uuid::Uuid::new_v4().to_string(),
            unique_now_ms(),
            cwd.to_string_lossy().into_owned(),
            additional_directories,
        );
        let log = self.store.create(&header)?;
        let agent = self.top_level(header, cwd, log, Vec::new());
        self.publish(agent.clone())?;
        Ok(agent)
    }

    /// The live agent of a stored session, opening it from disk if it is not live yet.
    /// `cwd` is where the client runs it now (it may have moved since it was created).
    pub fn open_session(&self, id: &str, cwd: PathBuf) -> Result<Arc<Agent>, RuntimeError> {
        self.open_session_in(id, cwd, None)
    }

    /// [`Runtime::open_session`] with the additional directories the client sent now (`None`:
    /// those recorded at creation).
    pub fn open_session_in(
        &self,
        id: &str,
        cwd: PathBuf,
        additional: Option<Vec<PathBuf>>,
    ) -> Result<Arc<Agent>, RuntimeError> {
        if let Some(agent) = self.live(id) {
            return Ok(agent);
        }
        let (mut loaded, log) = self.store.open_for_append(id)?;
        if let Some(additional) = additional {
            // The client re-sends its additional directories; they replace the recorded ones.
            loaded.header.additional_directories = additional
                .iter()
                .map(|dir| dir.to_string_lossy().into_owned())
                .collect();
        }
        let agent = self.top_level(loaded.header, cwd, log, loaded.events);
        match self.publish(agent.clone()) {
            Ok(()) => {
                self.control.restore_interrupted(&agent);
                Ok(agent)
            }
            // Another request opened it meanwhile: use theirs, drop our handle.
            Err(RuntimeError::AlreadyLive { .. }) => self
                .live(id)
                .ok_or_else(|| RuntimeError::Store(StoreError::NotFound { id: id.to_owned() })),
            Err(error) => Err(error),
        }
    }

    /// Publishes an agent; the registry is the collision boundary for session ids.
    pub fn publish(&self, agent: Arc<Agent>) -> Result<(), RuntimeError> {
        let mut agents = self.agents();
        if agents.contains_key(&agent.id) {
            return Err(RuntimeError::AlreadyLive {
                id: agent.id.clone(),
            });
        }
        agents.insert(agent.id.clone(), agent);
        Ok(())
    }

    pub fn live(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents().get(id).cloned()
    }

    /// Removes a live agent from the registry (after cancelling its turn).
    pub fn unpublish(&self, id: &str) -> Option<Arc<Agent>> {
        let agent = self.agents().remove(id);
        if let Some(agent) = &agent {
            agent.cancel();
        }
        agent
    }

    /// Removes exactly this agent, if it is the one published under its id.
    pub fn unpublish_agent(&self, agent: &Arc<Agent>) {
        let mut agents = self.agents();
        if agents
            .get(&agent.id)
            .is_some_and(|live| Arc::ptr_eq(live, agent))
        {
            agents.remove(&agent.id);
        }
    }

    /// Deletes a session and, with it, the sessions it delegated to (they are listed nowhere
    /// else). Live ones are closed first. A missing session is not an error.
    pub async fn delete_session(&self, id: &str) -> Result<(), StoreError> {
        let summaries = self.store.list()?;
        let mut doomed = vec![id.to_owned()];
        let mut next = 0;
        while next < doomed.len() {
            let parent = doomed[next].clone();
            doomed.extend(
                summaries
                    .iter()
                    .filter(|s| s.parent_session.as_deref() == Some(parent.as_str()))
                    .map(|s| s.id.clone()),
            );
            next += 1;
        }
        for id in &doomed {
            self.tasks.cancel_owned(id);
            if let Some(agent) = self.unpublish(id) {
                agent.settle().await;
            }
            self.store.delete(id)?;
        }
        Ok(())
    }

    /// Cancels every turn, background task and child, and waits until all have settled.
    pub async fn shutdown(&self) {
        for agent in self.agents().values() {
            agent.cancel();
        }
        self.shutdown.cancel();
        self.tasks.shutdown().await;
        self.runs.close();
        self.runs.wait().await;
    }
}

//! The session host: the live-session registry, the session store, the model (and the models
//! sessions name), and the one way a turn is run. `kin acp`, `kin run` and in-process children
//! all run turns through [`AgentHost::start_turn`]; what happens is reported on one
//! [`HostEvents`] stream, and [`StopReason::of`] is the one reading of how a turn ended.
//! Delegated children are published and started with [`AgentHost::start_child`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::shape::SessionShape;
use super::{
    system_prompt, Agent, AgentOptions, AgentSpec, CompactionOutcome, StopReason, TurnDeps,
    TurnError,
};
use crate::model::{Model, ModelCatalog, UnknownModel};
use crate::process::child_env::ChildEnv;
use crate::process::git_command::Git;
use crate::process::sandbox::Sandbox;
use crate::session::{Event, Header, SessionLog, SessionStore, StoreError, UserPart};
use crate::sync::lock;
use crate::tools::private::PrivateFiles;
use crate::tools::{ClientBridge, ToolRegistry};

/// Steps (model calls) one turn may take before it is stopped.
pub const DEFAULT_MAX_STEPS: u32 = 100;
/// Calls of one model step that run at once, by default (`[tools] max_parallel`).
pub const DEFAULT_MAX_PARALLEL: usize = 8;

/// Why the host could not open a session.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The store failed (the session is missing, locked, corrupt, ...).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session is already live here; it is not opened twice.
    #[error("session {id} is already open in this process")]
    AlreadyLive {
        /// The session's id.
        id: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum SwitchModelError {
    #[error(transparent)]
    Unknown(#[from] UnknownModel),
    #[error("could not record the model switch: {0}")]
    Store(#[from] StoreError),
}

/// What the host reports, in order, to its listeners.
pub enum HostEvent<'a> {
    /// A delegated child was published; nothing carrying its id has been reported before.
    ChildStarted {
        /// The delegating session's id.
        parent: &'a str,
        /// The child just published.
        child: &'a Agent,
        /// Its label (the delegating tool's `description`), if it has one.
        label: Option<&'a str>,
    },
    /// One event of a running turn, just appended to its session's log.
    Appended {
        /// The session the event belongs to.
        agent: &'a Agent,
        /// The event as stored.
        event: &'a Event,
    },
    /// A turn ended (its `turn/end` is in the log).
    TurnEnded {
        /// The session whose turn ended.
        agent: &'a Agent,
        /// How it ended.
        stop: StopReason,
        /// What the turn cost (its settled children included); where a child's goes is
        /// delegation's to decide.
        cost: f64,
    },
    /// An update of a child agent process (or of a child it announced), under kin's session
    /// id: the ACP JSON of a `session/update`'s `update`, for clients that show children as
    /// sessions. Live only: nothing of it is in a log.
    ChildUpdate {
        /// kin's id of the child session.
        session: &'a str,
        /// The update's ACP JSON.
        update: &'a serde_json::Value,
    },
    /// What a child agent process did so far (its tool calls, then its answer), for clients
    /// that do not show children as sessions: shown on the parent's delegating tool call.
    ChildSummary {
        /// The delegating session's id.
        parent: &'a str,
        /// The delegating tool call the summary goes on.
        call_id: &'a str,
        /// The summary so far.
        text: &'a str,
    },
}

type Listener = Arc<dyn Fn(&HostEvent<'_>) + Send + Sync>;

/// The host's event stream. Listeners are called synchronously, in order, on the thread that
/// emits: a session's updates reach a client before the answer to the prompt that caused them.
#[derive(Default)]
pub struct HostEvents {
    listeners: Mutex<Vec<(u64, Listener)>>,
    next: std::sync::atomic::AtomicU64,
}

/// Removes its listener when dropped.
pub struct Subscription {
    events: std::sync::Weak<HostEvents>,
    id: u64,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(events) = self.events.upgrade() {
            lock(&events.listeners).retain(|(id, _)| *id != self.id);
        }
    }
}

impl HostEvents {
    /// Calls `listener` for every event from now until the returned subscription is dropped.
    pub fn subscribe(
        self: &Arc<Self>,
        listener: impl Fn(&HostEvent<'_>) + Send + Sync + 'static,
    ) -> Subscription {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.listeners).push((id, Arc::new(listener)));
        Subscription {
            events: Arc::downgrade(self),
            id,
        }
    }

    pub(crate) fn emit(&self, event: &HostEvent<'_>) {
        let listeners: Vec<Listener> = lock(&self.listeners)
            .iter()
            .map(|(_, listener)| listener.clone())
            .collect();
        for listener in listeners {
            listener(event);
        }
    }
}

/// The session host: the live sessions of this process, the store, the models and tools they run with, the turn driver and the event stream.
pub struct AgentHost {
    store: SessionStore,
    model: Arc<dyn Model>,
    /// Every tool a top-level session offers (children get a filtered copy).
    tools: Arc<ToolRegistry>,
    max_steps: u32,
    /// Calls of one step that run at once.
    max_parallel: usize,
    /// When requests go lean (`[tools] lean`).
    lean: super::lean::LeanMode,
    /// Every running turn.
    turns: TaskTracker,
    events: Arc<HostEvents>,
    agents: Mutex<HashMap<String, Arc<Agent>>>,
    /// Models for sessions whose options name another model than `model`, by name.
    named_models: Mutex<HashMap<String, Arc<dyn Model>>>,
    /// The configured models (the default, `model`, first).
    models: Arc<ModelCatalog>,
    /// The child agent processes running now, for the editor to cancel one.
    remote_children: Arc<super::remote_children::RemoteChildren>,
    /// The longest tool-call arguments a turn runs.
    tool_argument_bytes: usize,
    /// The environment scrub of every process its sessions start.
    child_env: ChildEnv,
    /// kin's own files, which its sessions never read.
    private: PrivateFiles,
    /// The kernel sandbox of the processes it starts, kin's own `git` included.
    sandbox: Arc<Sandbox>,
}

impl AgentHost {
    pub(crate) fn new(
        store: SessionStore,
        model: Arc<dyn Model>,
        tools: Arc<ToolRegistry>,
        max_steps: u32,
    ) -> Self {
        Self {
            store,
            models: Arc::new(ModelCatalog::single(model.clone())),
            model,
            tools,
            max_steps,
            max_parallel: DEFAULT_MAX_PARALLEL,
            lean: Default::default(),
            turns: TaskTracker::new(),
            events: Arc::new(HostEvents::default()),
            agents: Mutex::new(HashMap::new()),
            named_models: Mutex::new(HashMap::new()),
            remote_children: Arc::default(),
            tool_argument_bytes: crate::limits::DEFAULT_TOOL_ARGUMENT_BYTES,
            child_env: ChildEnv::default(),
            private: PrivateFiles::default(),
            sandbox: Arc::new(Sandbox::off()),
        }
    }

    /// This host under the size caps `limits`.
    pub(crate) fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.tool_argument_bytes = limits.tool_argument_bytes;
        self
    }

    /// This host starting processes in the environment `child_env` scrubs and refusing to read
    /// kin's own files, `private`.
    pub(crate) fn with_secrets(mut self, child_env: ChildEnv, private: PrivateFiles) -> Self {
        self.child_env = child_env;
        self.private = private;
        self
    }

    /// The environment scrub of the processes its sessions start.
    pub(crate) fn child_env(&self) -> &ChildEnv {
        &self.child_env
    }

    /// This host confining the processes it starts for itself (`git`) in `sandbox`.
    pub(crate) fn with_sandbox(mut self, sandbox: Arc<Sandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// How kin's own `git` runs for its sessions (worktrees).
    pub(crate) fn git(&self) -> Git {
        Git {
            env: self.child_env.clone(),
            sandbox: self.sandbox.clone(),
        }
    }

    /// kin's own files, which its sessions never read.
    pub(crate) fn private(&self) -> &PrivateFiles {
        &self.private
    }

    /// This host serving `models` (their default replaces the model given to `new`).
    pub(crate) fn with_models(mut self, models: Arc<ModelCatalog>) -> Self {
        self.model = models.default_choice().model.clone();
        self.models = models;
        self
    }

    /// This host running at most `max` calls of one step at once (at least 1).
    pub(crate) fn with_max_parallel(mut self, max: usize) -> Self {
        self.max_parallel = max.max(1);
        self
    }

    /// This host sending lean requests as `lean` says.
    pub(crate) fn with_lean(mut self, lean: super::lean::LeanMode) -> Self {
        self.lean = lean;
        self
    }

    /// Tells the model a session was created here (see [`Model::session_created`]).
    pub(crate) fn note_created(&self, id: &str) {
        self.model.session_created(id);
    }

    /// The session store every session here is kept in.
    pub fn store(&self) -> &SessionStore {
        &self.store
    }

    /// The configured models.
    pub(crate) fn models(&self) -> &Arc<ModelCatalog> {
        &self.models
    }

    /// The id of the configured model `agent` runs on.
    pub(crate) fn model_id(&self, agent: &Agent) -> String {
        agent
            .model_choice(&self.models)
            .unwrap_or_else(|| self.models.default_choice())
            .profile
            .id
            .clone()
    }

    /// Whether prompts of `agent` may carry images: its model's `images` setting.
    pub(crate) fn accepts_images(&self, agent: &Agent) -> bool {
        self.models.accepts_images(&self.model_id(agent))
    }

    /// Switches `agent` to configured model `id` from its next model call (`/model <id>`,
    /// `session/set_config_option model`); logged, and restored when the session is opened.
    pub(crate) fn switch_model(&self, agent: &Agent, id: &str) -> Result<(), SwitchModelError> {
        self.models.lookup(id)?;
        agent.select_model(id)?;
        Ok(())
    }

    /// Compacts `agent`'s conversation now (`/compact`) with the model it runs on; its events
    /// reach the host's listeners like a turn's. Refused (`Busy`) while a turn runs.
    pub(crate) async fn compact(
        &self,
        agent: &Arc<Agent>,
        cancel: CancellationToken,
    ) -> Result<CompactionOutcome, TurnError> {
        let choice = match agent.model_choice(&self.models) {
            Some(choice) => choice.clone(),
            None => crate::model::ModelChoice {
                profile: self.models.default_choice().profile.clone(),
                model: self.model_for(&agent.options),
            },
        };
        let events = self.events.clone();
        let observe = |event: &Event| events.emit(&HostEvent::Appended { agent, event });
        agent.compact(&choice, &observe, cancel).await
    }

    pub(crate) fn remote_children(&self) -> &Arc<super::remote_children::RemoteChildren> {
        &self.remote_children
    }

    /// The model sessions run on unless their options name another.
    pub(crate) fn model(&self) -> &Arc<dyn Model> {
        &self.model
    }

    /// Every tool a top-level session offers.
    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// Steps one turn may take.
    pub fn max_steps(&self) -> u32 {
        self.max_steps
    }

    /// The event stream of every live session.
    pub fn events(&self) -> &Arc<HostEvents> {
        &self.events
    }

    fn agents(&self) -> MutexGuard<'_, HashMap<String, Arc<Agent>>> {
        lock(&self.agents)
    }

    /// The model a session runs on: the host's, or the one its options name.
    pub(crate) fn model_for(&self, options: &AgentOptions) -> Arc<dyn Model> {
        let Some(name) = options.model.as_deref().filter(|n| *n != self.model.name()) else {
            return self.model.clone();
        };
        // A configured model's id.
        if let Some(choice) = self.models.get(name) {
            return choice.model.clone();
        }
        let mut named = lock(&self.named_models);
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

    /// What a turn of `agent` runs with (no editor).
    pub fn turn_deps(&self, agent: &Agent) -> TurnDeps {
        TurnDeps {
            model: self.model_for(&agent.options),
            models: self.models.clone(),
            system: system_prompt(agent, false),
            lean_system: system_prompt(agent, true),
            lean: self.lean,
            max_steps: self.max_steps,
            tool_argument_bytes: self.tool_argument_bytes,
            max_parallel: self.max_parallel,
            client: None,
            child_env: self.child_env.clone(),
            private: self.private.clone(),
        }
    }

    /// Runs one turn of `agent` on a tracked task; every appended event and the turn's end
    /// are reported on [`AgentHost::events`]. The returned future resolves when the turn has
    /// ended and its events are written; dropping it does not stop the turn (`cancel` does).
    pub fn start_turn(
        &self,
        agent: Arc<Agent>,
        prompt: Vec<UserPart>,
        client: Option<Arc<dyn ClientBridge>>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<StopReason, TurnError>> {
        let mut deps = self.turn_deps(&agent);
        deps.client = client;
        let events = self.events.clone();
        let task = self.turns.spawn(async move {
            let cost_before = agent.context.usage().cost;
            let observe = |event: &Event| {
                events.emit(&HostEvent::Appended {
                    agent: &agent,
                    event,
                })
            };
            let result = agent
                .run_turn(prompt, &deps, &observe, cancel.clone())
                .await;
            // A turn refused as busy never started: it has no end to report.
            if !matches!(result, Err(TurnError::Busy { .. })) {
                events.emit(&HostEvent::TurnEnded {
                    agent: &agent,
                    stop: StopReason::of(&result, cancel.is_cancelled()),
                    cost: agent.context.usage().cost - cost_before,
                });
            }
            result
        });
        async move { task.await.unwrap_or(Err(TurnError::Stopped)) }.boxed()
    }

    /// Creates, stores and publishes a new top-level session. `delegation_depth` is not 0
    /// for a session that is itself a delegated child (of an agent in another process).
    pub fn create_session(
        &self,
        cwd: PathBuf,
        additional_directories: Vec<String>,
        delegation_depth: u32,
    ) -> Result<Arc<Agent>, HostError> {
        self.create_session_under(cwd, additional_directories, delegation_depth, None)
    }

    /// As [`AgentHost::create_session`], for a client that is itself a session (kin
    /// delegating over ACP): `parent` is recorded in the header, so the session is listed as
    /// that session's child, not as a top-level one.
    pub(crate) fn create_session_under(
        &self,
        cwd: PathBuf,
        additional_directories: Vec<String>,
        delegation_depth: u32,
        parent: Option<String>,
    ) -> Result<Arc<Agent>, HostError> {
        let mut header = Header::new(
            uuid::Uuid::new_v4().to_string(),
            self.store.creation_time(),
            cwd.to_string_lossy().into_owned(),
            additional_directories,
        );
        header.delegation_depth = delegation_depth;
        header.parent_session = parent;
        self.create_with_header(header, cwd)
    }

    /// Creates, stores and publishes a new top-level session made by a front end other than
    /// an editor (`started_over`, e.g. `"mcp"`, is recorded in its header). A session run as
    /// an agent definition records its name and is narrowed by `shape`. `id` is a fresh UUID
    /// (the caller may need it first: a worktree is named after it).
    pub(crate) fn create_session_started_over(
        &self,
        id: String,
        cwd: PathBuf,
        started_over: &str,
        definition: Option<&str>,
        shape: &SessionShape,
    ) -> Result<Arc<Agent>, HostError> {
        let mut header = Header::new(
            id,
            self.store.creation_time(),
            cwd.to_string_lossy().into_owned(),
            Vec::new(),
        );
        header.started_over = Some(started_over.to_owned());
        header.agent_definition = definition.map(str::to_owned);
        let log = self.store.create(&header)?;
        self.model.session_created(&header.id);
        let agent = self.shaped(header, cwd, log, Vec::new(), shape);
        self.publish(agent.clone())?;
        Ok(agent)
    }

    /// A top-level agent narrowed by `shape`.
    fn shaped(
        &self,
        header: Header,
        cwd: PathBuf,
        log: SessionLog,
        events: Vec<Event>,
        shape: &SessionShape,
    ) -> Arc<Agent> {
        let agent = Arc::new(Agent::new(AgentSpec {
            header,
            cwd,
            log,
            events,
            options: AgentOptions::default(),
            persona: shape.persona.clone(),
            tools: shape.registry(&self.tools),
            structured: None,
            roots: None,
        }));
        shape.bind(&agent);
        agent
    }

    fn create_with_header(&self, header: Header, cwd: PathBuf) -> Result<Arc<Agent>, HostError> {
        let log = self.store.create(&header)?;
        self.model.session_created(&header.id);
        let agent = self.shaped(header, cwd, log, Vec::new(), &SessionShape::default());
        self.publish(agent.clone())?;
        Ok(agent)
    }

    /// The live agent of a stored session, opening it from disk if it is not live yet.
    /// `cwd` is where the client runs it now (it may have moved since it was created);
    /// `additional` the directories the client sent now (`None`: those recorded at creation);
    /// `shape_of` says how the session is narrowed, from its header (asked only when it is
    /// opened from disk: a live session was narrowed when it opened).
    pub(crate) fn open_session(
        &self,
        id: &str,
        cwd: PathBuf,
        additional: Option<Vec<PathBuf>>,
        shape_of: impl FnOnce(&Header, &std::path::Path) -> SessionShape,
    ) -> Result<Arc<Agent>, HostError> {
        if let Some(agent) = self.live(id) {
            return Ok(agent);
        }
        // Only what the model sees and the state needs: a long log's compacted past stays on disk.
        let (mut loaded, log) = self.store.open_view_for_append(id)?;
        if let Some(additional) = additional {
            // The client re-sends its additional directories; they replace the recorded ones.
            loaded.header.additional_directories = additional
                .iter()
                .map(|dir| dir.to_string_lossy().into_owned())
                .collect();
        }
        let shape = shape_of(&loaded.header, &cwd);
        let agent = self.shaped(loaded.header, cwd, log, loaded.events, &shape);
        match self.publish(agent.clone()) {
            Ok(()) => Ok(agent),
            // Another request opened it meanwhile: use theirs, drop our handle.
            Err(HostError::AlreadyLive { .. }) => self
                .live(id)
                .ok_or_else(|| HostError::Store(StoreError::NotFound { id: id.to_owned() })),
            Err(error) => Err(error),
        }
    }

    /// Publishes a delegated child of `parent`, reports it, and runs its first turn (see
    /// [`AgentHost::start_turn`]). Fails, with nothing published, if its id is taken.
    pub(crate) fn start_child(
        &self,
        parent: &str,
        child: Arc<Agent>,
        label: Option<&str>,
        prompt: Vec<UserPart>,
        client: Option<Arc<dyn ClientBridge>>,
        cancel: CancellationToken,
    ) -> Result<BoxFuture<'static, Result<StopReason, TurnError>>, HostError> {
        self.publish(child.clone())?;
        self.events.emit(&HostEvent::ChildStarted {
            parent,
            child: &child,
            label,
        });
        Ok(self.start_turn(child, prompt, client, cancel))
    }

    /// Publishes an agent; the registry is the collision boundary for session ids.
    pub fn publish(&self, agent: Arc<Agent>) -> Result<(), HostError> {
        let mut agents = self.agents();
        if agents.contains_key(&agent.id) {
            return Err(HostError::AlreadyLive {
                id: agent.id.clone(),
            });
        }
        agents.insert(agent.id.clone(), agent);
        Ok(())
    }

    /// The live session with this id, if it is open in this process.
    pub fn live(&self, id: &str) -> Option<Arc<Agent>> {
        self.agents().get(id).cloned()
    }

    /// Removes a live agent from the registry (after cancelling its turn).
    pub(crate) fn unpublish(&self, id: &str) -> Option<Arc<Agent>> {
        let agent = self.agents().remove(id);
        if let Some(agent) = &agent {
            agent.cancel();
        }
        agent
    }

    /// Removes exactly this agent, if it is the one published under its id.
    pub(crate) fn unpublish_agent(&self, agent: &Arc<Agent>) {
        let mut agents = self.agents();
        if agents
            .get(&agent.id)
            .is_some_and(|live| Arc::ptr_eq(live, agent))
        {
            agents.remove(&agent.id);
        }
    }

    /// Deletes a session and, with it, the sessions it delegated to (they are listed nowhere
    /// else). Live ones are closed first. A missing session is not an error. While another
    /// process has any of them open for writing, nothing is closed or deleted (`Locked`).
    pub async fn delete_session(&self, id: &str) -> Result<(), StoreError> {
        let mut doomed = vec![id.to_owned()];
        let mut next = 0;
        while next < doomed.len() {
            let children = self.store.list_children(&doomed[next])?;
            doomed.extend(children.into_iter().map(|s| s.id));
            next += 1;
        }
        // All or nothing: every lock first (this process's own are shared, missing files
        // skipped), held until the files are gone.
        let mut locks = Vec::with_capacity(doomed.len());
        for id in &doomed {
            match self.store.lock(id) {
                Ok(lock) => locks.push(lock),
                Err(StoreError::NotFound { .. } | StoreError::InvalidId { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        for id in &doomed {
            if let Some(agent) = self.unpublish(id) {
                agent.settle().await;
            }
            self.store.delete(id)?;
        }
        Ok(())
    }

    /// Cancels every turn and waits until all have settled.
    pub(crate) async fn shutdown(&self) {
        for agent in self.agents().values() {
            agent.cancel();
        }
        self.turns.close();
        self.turns.wait().await;
        // Their MCP servers go too, and their processes are waited for.
        let live: Vec<Arc<Agent>> = self.agents().values().cloned().collect();
        for agent in live {
            if let Some(servers) = agent.set_mcp(None) {
                servers.stop().await;
            }
        }
    }
}

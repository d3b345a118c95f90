//! Delegation: one service, [`Delegation`], whose entries are the model's verbs. The tools
//! (`tools.rs`) only parse arguments and word results; everything else is decided here.
//!
//! - [`Delegation::delegate`] (`subagent`, `subagent_fork`, `acp:<name>` tools): looks the
//!   caller up by its session id in the host registry, then routes once: foreground (start
//!   the child, await its result, dispose it), background continuable (a durable child with
//!   a stable id, run as one activation task), or background one-shot (one task, no id to
//!   continue). Whether a provider's background children are continuable is known, or only
//!   a launched child can say (an ACP agent): then a probe asks it first.
//! - [`Delegation::send_message`]: into the child's running activation (steer), or, from the
//!   child's own transcript, as the start of a new activation (cold resume).
//! - [`Delegation::list`] (`list_agents`): the caller's continuable children in the store.
//! - [`Delegation::restore`]: on reopening a session, the tasks an earlier process left
//!   unfinished show as interrupted.
//!
//! What a child hands back is worded in one place: its output by one rule, and for a run that
//! did not complete a headline, a one-line diagnostic and its partial output (`outcome.rs`,
//! causes in `diagnostic.rs`), for the foreground tool result and the background task alike.
//!
//! The service owns the provider table (`spawn`, `fork` in process; `acp:<name>` as ACP child
//! processes) and the activation map (`activation.rs`: one task per activation). It reaches
//! the host one way, a `Weak<AgentHost>` set once by the runtime, and passes it to providers.
//! It also turns the task service's notices and records into the owner's log: the notice of
//! a task that settled unseen, `task/start` and `task/end` (`records.rs`).

mod acp_child;
mod acp_prompt;
mod acp_record;
mod acp_tree;
mod acp_watch;
mod activation;
mod budget;
mod child_costs;
mod diagnostic;
mod error;
mod in_process;
pub(crate) mod limits;
mod listing;
mod outcome;
mod provider;
mod queue;
mod records;
mod request;
mod spending;
mod task_sinks;
mod tools;

#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock, Weak};

use futures::future::BoxFuture;
use futures::FutureExt;

use crate::agent::host::AgentHost;
use crate::agent::{Agent, StructuredCapture};
use crate::config::{AcpAgentConfig, DelegationSettings};
use crate::session::{SessionStore, UserPart};
use crate::tasks::{TaskId, TaskOutcome, TaskService};
use crate::tools::{ClientBridge, Tool};

use activation::{lock_child, Activations, Begin};

pub(crate) use acp_child::AcpProvider;
pub(crate) use diagnostic::{of_turn_error as diagnostic_of, one_line};
pub use error::DelegationError;
use in_process::{InProcessProvider, Seed};
pub(crate) use outcome::last_turn_output;
pub(crate) use provider::Run;
pub use provider::SubagentResult;
use provider::{Continuable, Provider};
use request::{Continuation, ResumeRequest};
pub use request::{Mode, Request};
pub(crate) use request::{StartRequest, ToolFilter, DEFAULT_MAX_DEPTH};

/// Where a message went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Into the running activation's turn; its answer is that task's result.
    Steered(TaskId),
    /// A new activation (task) continues the child.
    Started(TaskId),
}

/// One durable child of a parent, for `list_agents`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildSummary {
    /// The child's id (its session id).
    pub id: String,
    /// The child's session title (from its first prompt).
    pub description: Option<String>,
    /// The subagent provider that made it (`spawn`, `fork`).
    pub kind: String,
    /// The model provider and model it runs on.
    pub provider: Option<String>,
    /// The model, if not the provider's default.
    pub model: Option<String>,
    /// The task of the running activation, if one runs in this process.
    pub task: Option<TaskId>,
    /// That task waits for a slot under the concurrency cap.
    pub queued: bool,
    /// How its last turn ended (`turn/end` reason), if one did.
    pub last_stop: Option<String>,
    /// Turns the child ran itself (a fork's inherited turns are not counted).
    pub turns: u32,
}

/// What a delegation gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Delegated {
    /// The foreground child's result (already disposed).
    Answer(SubagentResult),
    /// A continuable background child and the task of its first activation.
    Continuable {
        /// The child's id.
        child: String,
        /// The task of its first activation.
        task: TaskId,
    },
    /// A one-shot background child's task.
    OneShot(TaskId),
}

/// The front door for delegation: every model verb (`delegate`, `send_message`, `list`, `restore`) enters here, and routing (foreground, continuable, one-shot) is decided here.
pub struct Delegation {
    providers: Vec<Arc<dyn Provider>>,
    tasks: Arc<TaskService>,
    store: SessionStore,
    /// The deepest a child may be.
    max_depth: u32,
    /// Set once by the runtime, right after the host exists (the host holds this service's
    /// tools, so it is held weakly).
    host: OnceLock<Weak<AgentHost>>,
    activations: Arc<Activations>,
    /// Where children's costs go (`child_costs.rs`), and the host events that bring them.
    child_costs: Arc<child_costs::ChildCosts>,
    turn_ends: OnceLock<crate::agent::host::Subscription>,
    /// Time limits, caps and budgets (`[delegation]`).
    settings: DelegationSettings,
    budgets: budget::Budgets,
    /// The agent definitions read for each workspace.
    catalogs: crate::config::agents::Catalogs,
}

impl Delegation {
    /// The `[delegation]` settings: time limits, caps and budgets.
    pub(crate) fn settings(&self) -> &DelegationSettings {
        &self.settings
    }

    /// The service with the in-process providers and one per configured ACP agent. It takes
    /// the task service's notices and records.
    pub(crate) fn new(
        store: SessionStore,
        tasks: Arc<TaskService>,
        max_depth: u32,
        acp_agents: &[AcpAgentConfig],
        settings: DelegationSettings,
        sandbox: &Arc<crate::process::sandbox::Sandbox>,
        kin_home: &std::path::Path,
    ) -> Arc<Self> {
        let child_costs = Arc::new(child_costs::ChildCosts::default());
        let mut providers: Vec<Arc<dyn Provider>> = vec![
            Arc::new(InProcessProvider::new(Seed::Fresh, child_costs.clone())),
            Arc::new(InProcessProvider::new(
                Seed::CompletedTurns,
                child_costs.clone(),
            )),
        ];
        for agent in acp_agents {
            let provider = AcpProvider::new(agent.clone(), sandbox.clone(), kin_home.to_owned());
            if providers.iter().any(|p| p.name() == provider.name()) {
                tracing::error!(
                    agent = agent.name,
                    "an ACP agent of this name is already set up"
                );
                continue;
            }
            providers.push(Arc::new(provider));
        }
        let queue = queue::RunQueue::new(settings.max_running, settings.max_running_per_process);
        let delegation = Arc::new(Self {
            providers,
            tasks,
            store,
            max_depth,
            host: OnceLock::new(),
            activations: Arc::new(Activations::new(queue, child_costs.clone())),
            child_costs,
            turn_ends: OnceLock::new(),
            budgets: budget::Budgets::new(&settings),
            catalogs: crate::config::agents::Catalogs::default(),
            settings,
        });
        delegation.listen_to_tasks();
        delegation
    }

    /// Reaches the host, and follows its turns' costs, from now on (once; a second call
    /// changes nothing).
    pub(crate) fn attach(self: &Arc<Self>, host: &Arc<AgentHost>) {
        if self.host.set(Arc::downgrade(host)).is_ok() {
            let _ = self.turn_ends.set(self.follow_turn_costs(host));
        }
    }

    /// The model-facing tools: one delegation tool per provider, `send_message` and
    /// `list_agents`.
    pub(crate) fn tools(self: &Arc<Self>) -> Vec<Arc<dyn Tool>> {
        let mut found: Vec<Arc<dyn Tool>> = Vec::new();
        for provider in &self.providers {
            found.push(Arc::new(tools::SubagentTool::new(
                provider.clone(),
                self.clone(),
            )));
        }
        found.push(Arc::new(tools::SendMessageTool(self.clone())));
        found.push(Arc::new(tools::ListAgentsTool(self.clone())));
        found
    }

    /// The task service activations run on.
    pub(crate) fn tasks(&self) -> &Arc<TaskService> {
        &self.tasks
    }

    fn host(&self) -> Result<Arc<AgentHost>, DelegationError> {
        self.host
            .get()
            .and_then(Weak::upgrade)
            .ok_or_else(|| DelegationError::Setup("kin is shutting down".into()))
    }

    /// The agent definitions for a session in `cwd` (see [`Catalogs::get`]), none read from
    /// kin's own files.
    ///
    /// [`Catalogs::get`]: crate::config::agents::Catalogs::get
    fn catalog(
        &self,
        cwd: &std::path::Path,
        fresh_since: Option<std::time::Instant>,
    ) -> Result<Arc<crate::config::agents::AgentCatalog>, DelegationError> {
        let host = self.host()?;
        Ok(self.catalogs.get(cwd, fresh_since, host.private()))
    }

    fn live(&self, id: &str) -> Option<Arc<Agent>> {
        self.host.get()?.upgrade()?.live(id)
    }

    /// The root session of `agent`'s delegation tree: up through the live parents (a parent
    /// not live in this process is taken as the root).
    fn root_of(&self, agent: &Agent) -> String {
        let mut root = agent.id.clone();
        let mut parent = agent.header().parent_session.clone();
        while let Some(id) = parent {
            parent = self
                .live(&id)
                .and_then(|above| above.header().parent_session.clone());
            root = id;
        }
        root
    }

    /// The calling agent: the live session the tool context names.
    fn caller(&self, id: &str) -> Result<Arc<Agent>, DelegationError> {
        self.live(id).ok_or(DelegationError::NoCaller)
    }

    fn provider(&self, name: &str) -> Result<Arc<dyn Provider>, DelegationError> {
        self.providers
            .iter()
            .find(|p| p.name() == name)
            .cloned()
            .ok_or_else(|| DelegationError::NoProvider(name.to_owned()))
    }

    /// `subagent` and its kin: delegates `request` for the session `caller`, in `mode`.
    pub async fn delegate(
        self: &Arc<Self>,
        caller: &str,
        request: Request,
        mode: Mode,
    ) -> Result<Delegated, DelegationError> {
        let parent = self.caller(caller)?;
        let provider = self.provider(&request.provider)?;
        self.check_budget(&parent)?;
        // The child runs on the model named (one the host knows), else on its parent's.
        let model = match request.model {
            Some(id) => {
                let host = self.host()?;
                host.models()
                    .lookup(&id)
                    .map_err(|unknown| DelegationError::UnknownModel(unknown.to_string()))?;
                Some(id)
            }
            None => parent.context.selected(),
        };
        let mut start = StartRequest::new(request.prompt, parent, request.cancel);
        if let Some(model) = model {
            let mut options = start.parent.options.clone();
            options.model = Some(model);
            start.agent_options = Some(options);
        }
        start.max_depth = Some(self.max_depth);
        start.timeout = request.timeout;
        start.budget_tokens = request.budget_tokens;
        start.label = Some(request.label.clone());
        start.persona = request.persona;
        start.tool_filter = request.tools.map(|allow| ToolFilter {
            allow: Some(allow),
            deny: None,
        });
        (start.permission, start.worktree) = (request.permission, request.worktree);
        start.client = request.client;
        // A background delegation's call is over at once: nothing more is shown on it.
        start.call_id = request.call_id.filter(|_| mode == Mode::Foreground);
        if mode == Mode::Foreground {
            let run = self.start(&provider, start).await?;
            return Ok(Delegated::Answer(run.settle().await));
        }
        // Decided before answering: an ACP child may have to be asked first.
        let continuable = match provider.continuable() {
            Continuable::Known(known) => known,
            Continuable::AskChild => provider.probe(&*self.host()?, &start).await,
        };
        if continuable {
            let (child, task) = self.continuable(&provider, &request.label, start)?;
            return Ok(Delegated::Continuable { child, task });
        }
        start.background = true;
        let owner = start.parent.id.clone();
        let root = self.root_of(&start.parent);
        let service = self.clone();
        let begin: Begin = Box::new(move |cancel| {
            start.cancel = cancel;
            async move { Ok((service.start(&provider, start).await?, None)) }.boxed()
        });
        let task =
            self.activations
                .start(&self.tasks, &root, None, &request.label, &owner, begin)?;
        Ok(Delegated::OneShot(task))
    }

    async fn start(
        &self,
        provider: &Arc<dyn Provider>,
        mut request: StartRequest,
    ) -> Result<Run, DelegationError> {
        let root = self.root_of(&request.parent);
        // Set aside before the child exists: siblings started side by side are admitted one
        // after the other, in the order their calls started.
        let reservation =
            self.budgets
                .admit(&root, self.own_spend(&root), request.budget_tokens)?;
        request.budget = Some(self.budgets.child(&root, request.budget_tokens));
        let caps = provider.capabilities();
        let wanted = [
            (
                "outputSchema",
                request.output_schema.is_some(),
                caps.output_schema,
            ),
            ("depthLimit", request.max_depth.is_some(), caps.depth_limit),
            (
                "toolFilter",
                request.tool_filter.is_some(),
                caps.tool_filter,
            ),
            ("persona", request.persona.is_some(), caps.persona),
        ];
        if let Some((capability, _, _)) = wanted.iter().find(|(_, asked, has)| *asked && !*has) {
            return Err(DelegationError::Unsupported {
                provider: provider.name().to_owned(),
                capability,
            });
        }
        if let Some(schema) = &request.output_schema {
            StructuredCapture::new(schema.clone())
                .map_err(|e| DelegationError::Schema(e.to_string()))?;
        }
        let host = self.host()?;
        let limits = self.time_limits(request.timeout);
        let run = limits::watched(provider.start(&host, request).await?, limits);
        Ok(match reservation {
            Some(reservation) => reservation.hold_for(run),
            None => run,
        })
    }

    /// Starts a continuable child in the background; both ids are fixed before its task
    /// exists. Failures after this point settle the task.
    fn continuable(
        self: &Arc<Self>,
        provider: &Arc<dyn Provider>,
        label: &str,
        mut request: StartRequest,
    ) -> Result<(String, TaskId), DelegationError> {
        let child_id = uuid::Uuid::new_v4().to_string();
        request.background = true;
        request.continuation = Some(Continuation {
            session_id: child_id.clone(),
            descriptor: request.descriptor(provider.name()),
        });
        let owner = request.parent.id.clone();
        let root = self.root_of(&request.parent);
        let provider_name = provider.name().to_owned();
        let service = self.clone();
        let provider = provider.clone();
        let id = child_id.clone();
        let begin: Begin = Box::new(move |cancel| {
            request.cancel = cancel;
            async move {
                let run = service.start(&provider, request).await?;
                // The file exists now; nobody else knows the id yet, so this cannot lose.
                let held = lock_child(&service.store, &id).ok();
                Ok((run, held))
            }
            .boxed()
        });
        let task =
            self.activations
                .start(&self.tasks, &root, Some(&child_id), label, &owner, begin)?;
        if let Some(activation) = self.activations.get(&child_id) {
            let _ = activation.pending.set((provider_name, label.to_owned()));
        }
        Ok((child_id, task))
    }

    /// Cold-resumes a stored child through the provider that made it.
    async fn resume(&self, mut request: ResumeRequest) -> Result<Run, DelegationError> {
        let root = self.root_of(&request.parent);
        // The limits the first call set hold for every later activation.
        let stored = &request.descriptor;
        let timeout = stored.timeout_ms.map(std::time::Duration::from_millis);
        request.budget = Some(self.budgets.child(&root, stored.budget_tokens));
        let name = request.descriptor.provider.clone();
        let provider = self.provider(&name)?;
        if provider.continuable() == Continuable::Known(false) {
            return Err(DelegationError::NoResume(name));
        }
        let host = self.host()?;
        let limits = self.time_limits(timeout);
        Ok(limits::watched(
            provider.resume(&host, request).await?,
            limits,
        ))
    }

    /// `send_message`: delivers a message to a child of `caller`, into its running
    /// activation or as the start of a new one. An error always means the message was not
    /// delivered. The route is chosen before this returns; the future then waits only for a
    /// running child to take or refuse a steered message.
    pub fn send_message(
        self: &Arc<Self>,
        caller: &str,
        child_id: &str,
        message: Vec<UserPart>,
        client: Option<Arc<dyn ClientBridge>>,
    ) -> BoxFuture<'static, Result<Delivery, DelegationError>> {
        let routed = self
            .caller(caller)
            .and_then(|parent| self.route(&parent, child_id, message, client));
        match routed {
            Ok(delivery) => delivery,
            Err(error) => std::future::ready(Err(error)).boxed(),
        }
    }

    fn route(
        self: &Arc<Self>,
        parent: &Arc<Agent>,
        child_id: &str,
        message: Vec<UserPart>,
        client: Option<Arc<dyn ClientBridge>>,
    ) -> Result<BoxFuture<'static, Result<Delivery, DelegationError>>, DelegationError> {
        let activation = self.activations.get(child_id);
        let live = self.live(child_id);
        match (&activation, &live) {
            // Never adopt an agent the service did not start.
            (None, Some(_)) => return Err(DelegationError::OutsideControl(child_id.to_owned())),
            (Some(activation), Some(live)) => {
                let local = activation.local_agent();
                if local.is_some_and(|local| !Arc::ptr_eq(&local, live)) {
                    return Err(DelegationError::NotAssociatedAgent(child_id.to_owned()));
                }
            }
            _ => {}
        }
        if let Some(activation) = activation {
            return self.steer(&activation, parent, child_id, message);
        }
        self.check_budget(parent)?;
        let label = records::resume_label(&message);
        if !self.store.exists(child_id) {
            if self.tasks.peek(child_id, &parent.id).is_ok() {
                return Err(DelegationError::OneShot(child_id.to_owned()));
            }
            // Never stored (unknown, or a start that failed before it wrote anything).
            let unavailable = DelegationError::Unavailable(child_id.to_owned());
            let task = self.failed_at_once(parent, child_id, &label, unavailable)?;
            return Ok(std::future::ready(Ok(Delivery::Started(task))).boxed());
        }
        let root = self.root_of(parent);
        let begin = self.resume_producer(parent.clone(), child_id.to_owned(), message, client);
        let task = self.activations.start(
            &self.tasks,
            &root,
            Some(child_id),
            &label,
            &parent.id,
            begin,
        )?;
        Ok(std::future::ready(Ok(Delivery::Started(task))).boxed())
    }

    /// Joins the running activation; never falls through to a cold resume.
    fn steer(
        &self,
        activation: &activation::Activation,
        parent: &Agent,
        child_id: &str,
        message: Vec<UserPart>,
    ) -> Result<BoxFuture<'static, Result<Delivery, DelegationError>>, DelegationError> {
        let starting = || DelegationError::Starting(child_id.to_owned());
        let task_id = activation.task_id.get().ok_or_else(starting)?;
        let status = self
            .tasks
            .status(task_id, &parent.id)
            .map_err(DelegationError::TaskFence)?;
        if status != crate::tasks::TaskStatus::Running {
            return Err(DelegationError::TaskNotRunning {
                id: child_id.to_owned(),
                task: task_id.to_string(),
                status: status.as_str(),
            });
        }
        let delivery = activation.steer(message).ok_or_else(starting)?;
        let task_id = task_id.clone();
        let child_id = child_id.to_owned();
        Ok(async move {
            match delivery.await {
                Ok(()) => Ok(Delivery::Steered(task_id)),
                // The task was running a moment ago: its turn ended before the child took it.
                Err(DelegationError::NotRunning(_)) => {
                    Err(DelegationError::StoppedBeforeDelivery(child_id))
                }
                Err(other) => Err(other),
            }
        }
        .boxed())
    }

    /// The cold path, run inside the new task: look the child up, check it is this parent's
    /// and resumable, take its lock, and continue it through the provider that made it.
    fn resume_producer(
        self: &Arc<Self>,
        parent: Arc<Agent>,
        child_id: String,
        message: Vec<UserPart>,
        client: Option<Arc<dyn ClientBridge>>,
    ) -> Begin {
        let service = Arc::clone(self);
        Box::new(move |cancel| {
            async move {
                // Under the lock, nobody else writes the child while it is read and run.
                let held = lock_child(&service.store, &child_id)?;
                let store = service.store.clone();
                let id = child_id.clone();
                let (header, descriptor) =
                    tokio::task::spawn_blocking(move || store.child_record(&id))
                        .await
                        .ok()
                        .flatten()
                        .ok_or_else(|| DelegationError::Unavailable(child_id.clone()))?;
                // The store takes no cancellation: a kill during lookup stops here.
                if cancel.is_cancelled() {
                    return Err(DelegationError::CancelledDuringLookup);
                }
                if header.parent_session.as_deref() != Some(parent.id.as_str()) {
                    return Err(DelegationError::Unauthorized(child_id));
                }
                let descriptor =
                    descriptor.ok_or_else(|| DelegationError::NoDescriptor(child_id.clone()))?;
                let request = ResumeRequest {
                    session_id: child_id,
                    prompt: message,
                    parent,
                    cancel,
                    descriptor,
                    client,
                    budget: None,
                };
                Ok((service.resume(request).await?, Some(held)))
            }
            .boxed()
        })
    }

    /// A message that fails at once, as a task settled before this returns (so its notice
    /// has a fixed place).
    fn failed_at_once(
        &self,
        parent: &Agent,
        child_id: &str,
        label: &str,
        error: DelegationError,
    ) -> Result<TaskId, DelegationError> {
        let failed = TaskOutcome::failed(error.detail());
        Ok(self.tasks.start_settled(
            activation::TASK_KIND,
            label,
            Some(parent.id.as_str().into()),
            Some(child_id),
            failed,
        )?)
    }

    /// The task of the child's running activation in this process, if any.
    pub(crate) fn running_task(&self, child_id: &str) -> Option<TaskId> {
        self.activations.get(child_id)?.task_id.get().cloned()
    }

    /// Restores, as `interrupted`, the background tasks `parent`'s log shows started and
    /// never finished: an earlier kin process ended while they ran. Their children stay
    /// continuable with `send_message`.
    pub(crate) fn restore(&self, parent: &Agent) {
        self.restore_spend(parent);
        for (task, label, child) in parent.with_events(records::unfinished) {
            let detail = match child {
                Some(child) => format!(
                    "started by an earlier kin process; send_message to subagent {child} continues it"
                ),
                None => "started by an earlier kin process".to_owned(),
            };
            self.tasks.restore_interrupted(
                &task,
                activation::TASK_KIND,
                &label,
                &parent.id,
                detail,
            );
        }
    }
}

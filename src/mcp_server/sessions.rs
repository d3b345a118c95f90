//! The sessions `kin mcp` runs for its callers. Each is an ordinary top-level kin session
//! (its header says `startedOver: "mcp"`); each task it runs is a background task of the
//! runtime's [`TaskService`](crate::tasks::TaskService), owned by the server, so a foreground
//! call and `kin_output` wait on the same thing. `kin_reply` steers a running task or, when
//! the session is idle (or only on disk, after a restart), runs a new task on it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::clients::Owners;
use super::cwd::CwdPolicy;
use super::isolation;
use super::logged::{self, LoggedTurn};
use super::outcome::{outcome, Ended};
use super::tools::{width, CallMode, ReplyArgs, StartArgs};
use crate::agent::{Agent, Budget};
use crate::config::agents::{self, AgentDefinition, UnknownAgent};
use crate::delegation::limits::limited_turn;
use crate::model::Credentials;
use crate::process::git_worktree::{self as worktree, WorktreeError};
use crate::runtime::{Reopened, Runtime, RuntimeError};
use crate::session::{Header, UserPart};
use crate::sync::lock;
use crate::tasks::{KillResult, TaskError, TaskId, TaskOutcome, TaskSnapshot, TaskStatus};
use crate::tools::{ClientBridge, PermissionMode};

/// The kind of the server's tasks (their ids are `mcp-N`).
const TASK_KIND: &str = "mcp";
/// Who owns the server's tasks: no session has this id, so no session sees them.
const OWNER: &str = "kin-mcp-server";
/// What the header of a session made by `kin mcp` records as `startedOver`.
pub(crate) const STARTED_OVER: &str = "mcp";
/// A foreground call waits this long at most (a cancelled call stops waiting at once).
const FOREVER: Duration = Duration::from_secs(365 * 24 * 3600);

/// Why a call was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error(
        "mode {asked} is wider than this server allows ({ceiling}); the server's `--mode` sets \
         the widest mode a call may ask for"
    )]
    WiderThanCeiling {
        asked: &'static str,
        ceiling: &'static str,
    },
    #[error("cwd must be an absolute path of an existing directory, got {0:?}")]
    BadCwd(String),
    #[error("{0}")]
    BroadCwd(String),
    #[error("session {0} belongs to another client of this server while that client is connected")]
    OtherClient(String),
    #[error(transparent)]
    UnknownAgent(#[from] UnknownAgent),
    /// The session's worktree could not be made (not a repository, git failed, cancelled).
    #[error(transparent)]
    Worktree(#[from] WorktreeError),
    #[error("unknown session {0}")]
    UnknownSession(String),
    #[error(
        "session {0} was not started over MCP; continue it in an editor or with \
         `kin run --session`"
    )]
    NotStartedOverMcp(String),
    #[error("session {0} has run no task yet; continue it with kin_reply")]
    NeverRan(String),
    #[error(
        "session {0} is running in another kin process; cancel it through the server that \
         started that task"
    )]
    RunningElsewhere(String),
    #[error("no API key for the model: {0}")]
    MissingKey(String),
    #[error("{0}")]
    Model(String),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Task(#[from] TaskError),
}

/// How `kin_reply` delivered its message.
pub(crate) enum Delivery {
    /// Into the running task of the session.
    Steered(TaskId),
    /// As the first message of a new task.
    Started(TaskId),
}

/// What `kin_output` (and `kin_cancel`) found: a task of this server, or, for a session whose
/// tasks ran in an earlier server process, its last turn as the log tells it.
pub(crate) enum Output {
    Task(TaskSnapshot),
    Logged(LoggedTurn),
}

/// What the agent definition a session runs as sets for each of its tasks.
#[derive(Debug, Clone, Copy, Default)]
struct TaskLimits {
    /// The widest mode a task runs in.
    ceiling: Option<PermissionMode>,
    /// A task's wall-clock limit.
    timeout: Option<Duration>,
}

/// The server's sessions.
pub(crate) struct Sessions {
    runtime: Arc<Runtime>,
    ceiling: PermissionMode,
    cwd: PathBuf,
    /// Each session this server started or continued, with its latest task, oldest first.
    latest: Mutex<Vec<(String, TaskId)>>,
    /// The limits of the sessions that run as an agent definition (set when the session is
    /// created or reopened).
    limits: Mutex<HashMap<String, TaskLimits>>,
    /// The foreground calls waiting now: each call's id, task and cancellation. MCP cancels a
    /// call's token before it reads the client's next message, so a later call that finds the
    /// token cancelled stops the task itself, without waiting for the cancelled call to wake.
    calls: Mutex<Vec<(u64, TaskId, CancellationToken)>>,
    next_call: std::sync::atomic::AtomicU64,
    /// The worktrees being made for new sessions (waited for by [`Sessions::finish`]).
    setup: TaskTracker,
    /// The directories a task may not work in.
    policy: CwdPolicy,
    /// Which connected client holds which session.
    pub(crate) owners: Arc<Owners>,
}

impl Sessions {
    pub(crate) fn new(runtime: Arc<Runtime>, ceiling: PermissionMode, cwd: PathBuf) -> Self {
        Self {
            runtime,
            ceiling,
            cwd,
            latest: Mutex::default(),
            limits: Mutex::default(),
            calls: Mutex::default(),
            next_call: std::sync::atomic::AtomicU64::new(0),
            setup: TaskTracker::new(),
            policy: CwdPolicy::default(),
            owners: Arc::default(),
        }
    }

    /// Refuses the directories `policy` names as a task's cwd.
    pub(crate) fn with_cwd_policy(mut self, policy: CwdPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// `Ok` when `client` may act on `session` (see [`super::clients`]).
    fn check_client(&self, session: &str, client: u64) -> Result<(), CallError> {
        match self.owners.allows(session, client) {
            true => Ok(()),
            false => Err(CallError::OtherClient(session.to_owned())),
        }
    }

    /// Waits until no worktree is being made (one whose call was cancelled, or whose client
    /// hung up, is removed first); the server calls it once its transport has ended.
    pub(crate) async fn finish(&self) {
        self.setup.close();
        self.setup.wait().await;
    }

    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The mode a call asks for, if the ceiling allows it.
    fn mode(&self, asked: CallMode) -> Result<PermissionMode, CallError> {
        let mode = asked.permission();
        if width(mode) > width(self.ceiling) {
            return Err(CallError::WiderThanCeiling {
                asked: mode.id(),
                ceiling: self.ceiling.id(),
            });
        }
        Ok(mode)
    }

    fn check_key(&self) -> Result<(), CallError> {
        match self.runtime.host().model().credentials() {
            Credentials::Missing { hint } => Err(CallError::MissingKey(hint)),
            _ => Ok(()),
        }
    }

    fn limits_of(&self, session: &str) -> TaskLimits {
        let limits = lock(&self.limits);
        limits.get(session).copied().unwrap_or_default()
    }

    fn set_limits(&self, session: &str, limits: TaskLimits) {
        let mut all = lock(&self.limits);
        all.insert(session.to_owned(), limits);
    }

    /// Puts `agent` under its definition's limits: permission, timeout and token budget.
    fn limit(&self, agent: &Agent, definition: &AgentDefinition) {
        self.set_limits(
            &agent.id,
            TaskLimits {
                ceiling: definition.permission,
                timeout: definition.timeout,
            },
        );
        self.budget(agent, definition.budget_tokens);
    }

    /// Gives each task of `agent` a budget: `tokens` (a definition's), else the `[delegation]`
    /// per-child budget, as a delegated child gets.
    fn budget(&self, agent: &Agent, tokens: Option<u64>) {
        let defaults = self.runtime.delegation().settings();
        let tokens = tokens.or(defaults.child_budget_tokens);
        if tokens.is_some() || defaults.child_budget_cost.is_some() {
            agent.watch.set_budget(Budget {
                tokens,
                cost: defaults.child_budget_cost,
                tree: None,
            });
        }
    }

    /// Creates the session `kin` asks for (nothing runs yet: see [`Sessions::run`]). An
    /// isolated one gets its worktree first; `cancel` stops the checkout, leaving nothing.
    pub(crate) async fn create(
        &self,
        args: &StartArgs,
        cancel: &CancellationToken,
        client: u64,
    ) -> Result<(Arc<Agent>, PermissionMode), CallError> {
        let mode = self.mode(args.mode)?;
        let cwd = match &args.cwd {
            None => self.cwd.clone(),
            Some(dir) => {
                let path = PathBuf::from(dir);
                if !path.is_absolute() || !path.is_dir() {
                    return Err(CallError::BadCwd(dir.clone()));
                }
                path
            }
        };
        self.policy.check(&cwd).map_err(CallError::BroadCwd)?;
        let host = self.runtime.host();
        let definition = match args.agent.as_deref() {
            Some(name) => Some(agents::find(host, name, &cwd)?),
            None => None,
        };
        self.check_key()?;
        let shape = definition
            .as_ref()
            .map(AgentDefinition::shape)
            .unwrap_or_default();
        let id = uuid::Uuid::new_v4().to_string();
        let made = match isolation::wanted(args.isolation, definition.as_ref()) {
            true => {
                let git = host.git();
                Some(isolation::make(&self.setup, &cwd, &id, cancel, &git).await?)
            }
            false => None,
        };
        // The session works in its worktree, and records it as its cwd.
        let session_cwd = made.as_ref().map_or(cwd, |made| made.dir.clone());
        let created = host.create_session_started_over(
            id,
            session_cwd,
            STARTED_OVER,
            args.agent.as_deref(),
            &shape,
        );
        // A session that could not be made (or run) leaves no worktree behind.
        let discard = || {
            if let Some(made) = &made {
                let _ = worktree::settle(made);
            }
        };
        let agent = created.inspect_err(|_| discard())?;
        let mode = shape.ceiling.map_or(mode, |own| mode.strictest(own));
        // The call's model wins over the definition's.
        let model = args
            .model
            .clone()
            .or_else(|| definition.as_ref().and_then(|d| d.model.clone()));
        if let Some(model) = &model {
            if let Err(error) = host.switch_model(&agent, model) {
                host.unpublish_agent(&agent);
                discard();
                return Err(CallError::Model(error.to_string()));
            }
        }
        match &definition {
            Some(definition) => self.limit(&agent, definition),
            None => self.budget(&agent, None),
        }
        self.owners.claim(&agent.id, client);
        self.runtime.start_mcp(&agent, Vec::new(), None);
        Ok((agent, mode))
    }

    /// Runs one task of `agent` for `prompt` in `mode`; returns its id at once. A session run
    /// as an agent definition runs it under the definition's time limit and token budget.
    pub(crate) fn run(
        &self,
        agent: Arc<Agent>,
        mode: PermissionMode,
        prompt: String,
        bridge: Arc<dyn ClientBridge>,
    ) -> Result<TaskId, CallError> {
        agent
            .set_permission_mode(mode)
            .map_err(|error| CallError::Runtime(RuntimeError::from(error)))?;
        let host = self.runtime.host().clone();
        let label = crate::text::visible(&cut(&prompt, 80)).into_owned();
        let session = agent.id.clone();
        // A definition's time limit, else `[delegation]`'s, as a delegated child gets.
        let timeout =
            (self.limits_of(&session).timeout).or(self.runtime.delegation().settings().timeout);
        let task = self.runtime.tasks().start_for(
            TASK_KIND,
            &label,
            Some(OWNER.into()),
            Some(&session),
            move |cancel| {
                async move {
                    // An isolated session's worktree, made again if its last task removed it.
                    let git = host.git();
                    let ensured = isolation::ensure(&agent.id, &agent.cwd, &cancel, &git);
                    let isolated = match ensured.await {
                        Ok(isolated) => isolated,
                        Err(WorktreeError::Cancelled) => return TaskOutcome::killed(),
                        Err(error) => return TaskOutcome::failed(error.to_string()),
                    };
                    // The session's MCP servers are waited for once (up to their startup
                    // timeout), as a first prompt in an editor waits for them.
                    if let Some(view) = agent.mcp() {
                        tokio::select! {
                            not_ready = view.servers.wait_started() => {
                                for line in not_ready {
                                    tracing::warn!(session = %agent.id, "MCP server {line}");
                                }
                            }
                            () = cancel.cancelled() => {}
                        }
                    }
                    agent.watch.begin_activation();
                    let text = vec![UserPart::Text { text: prompt }];
                    let turn_cancel = cancel.child_token();
                    let turn =
                        host.start_turn(agent.clone(), text, Some(bridge), turn_cancel.clone());
                    let (result, expired) = match timeout {
                        Some(wall) => limited_turn(agent.clone(), wall, turn, turn_cancel).await,
                        None => (turn.await, None),
                    };
                    let ended = Ended {
                        result: &result,
                        cancelled: cancel.is_cancelled(),
                        expired,
                    };
                    let mut outcome = outcome(&agent, ended, host.max_steps());
                    if let Some(isolated) = isolated.filter(|isolated| isolated.dir.exists()) {
                        let report = worktree::settle_and_report(isolated).await;
                        isolation::append(&mut outcome.output, &mut outcome.detail, &report);
                    }
                    outcome
                }
                .boxed()
            },
        )?;
        let mut latest = lock(&self.latest);
        match latest.iter_mut().find(|(id, _)| *id == session) {
            Some(entry) => entry.1 = task.clone(),
            None => latest.push((session, task.clone())),
        }
        Ok(task)
    }

    /// The header of stored session `id`, if `kin mcp` made it.
    fn stored_header(&self, id: &str) -> Result<Header, CallError> {
        let host = self.runtime.host();
        if !host.store().exists(id) {
            return Err(CallError::UnknownSession(id.to_owned()));
        }
        let header = host
            .store()
            .load(id)
            .map_err(|error| CallError::Runtime(RuntimeError::from(error)))?
            .header;
        if header.started_over.as_deref() != Some(STARTED_OVER) || header.parent_session.is_some() {
            return Err(CallError::NotStartedOverMcp(id.to_owned()));
        }
        Ok(header)
    }

    /// The session `kin_reply` names, live or opened from disk, if `kin mcp` made it; with a
    /// notice when the agent definition it was started as is gone.
    /// An isolated one opens in its worktree, made again first (`cancel` stops that) if its
    /// last task removed it.
    async fn reopen(
        &self,
        id: &str,
        cancel: &CancellationToken,
    ) -> Result<(Arc<Agent>, Option<String>), CallError> {
        let host = self.runtime.host();
        if let Some(agent) = host.live(id) {
            return match agent.header().started_over.as_deref() {
                Some(STARTED_OVER) => Ok((agent, None)),
                _ => Err(CallError::NotStartedOverMcp(id.to_owned())),
            };
        }
        let header = self.stored_header(id)?;
        let cwd = header.cwd.map_or_else(|| self.cwd.clone(), PathBuf::from);
        isolation::ensure(id, &cwd, cancel, &self.runtime.host().git()).await?;
        let (agent, reopened) = self.runtime.open_defined(id, cwd, None)?;
        let notice = match reopened {
            Reopened::Plain => {
                self.budget(&agent, None);
                None
            }
            Reopened::Defined(definition) => {
                self.limit(&agent, &definition);
                None
            }
            Reopened::Missing(missing) => {
                let recorded = agent.permission_mode();
                self.set_limits(
                    id,
                    TaskLimits {
                        ceiling: Some(recorded),
                        timeout: None,
                    },
                );
                self.budget(&agent, None);
                Some(format!(
                    "the agent definition {:?} this session was started as is no longer \
                     defined (the defined agents are: {}); the task ran as kin, within the \
                     session's recorded mode {}",
                    missing.name,
                    missing.available,
                    recorded.id()
                ))
            }
        };
        self.runtime.start_mcp(&agent, Vec::new(), None);
        Ok((agent, notice))
    }

    /// `kin_reply`: into the running task, else as a new task; with a notice when the
    /// session's agent definition is gone.
    pub(crate) async fn reply(
        &self,
        args: &ReplyArgs,
        bridge: Arc<dyn ClientBridge>,
        cancel: &CancellationToken,
        client: u64,
    ) -> Result<(Delivery, Option<String>), CallError> {
        let mode = self.mode(args.mode)?;
        self.check_client(&args.session_id, client)?;
        let (agent, notice) = self.reopen(&args.session_id, cancel).await?;
        if !self.owners.claim(&agent.id, client) {
            return Err(CallError::OtherClient(agent.id.clone()));
        }
        let mode = self
            .limits_of(&agent.id)
            .ceiling
            .map_or(mode, |own| mode.strictest(own));
        if agent.is_running() {
            if let Some(task) = self.latest(&agent.id) {
                let content = vec![UserPart::Text {
                    text: args.prompt.clone(),
                }];
                if agent.steer(content).is_ok() {
                    return Ok((Delivery::Steered(task), notice));
                }
            }
        }
        self.check_key()?;
        // A steer refused because the turn was just ending: wait for it, then start anew.
        let task = self.run(agent, mode, args.prompt.clone(), bridge)?;
        Ok((Delivery::Started(task), notice))
    }

    /// The latest task of `session` in this server.
    pub(crate) fn latest(&self, session: &str) -> Option<TaskId> {
        let latest = lock(&self.latest);
        latest
            .iter()
            .find(|(id, _)| id == session)
            .map(|(_, task)| task.clone())
    }

    /// The task now, or once it settled, `timeout` passed or `cancel` tripped. A foreground
    /// call passes `None` and its own cancellation: a cancelled call kills the task.
    pub(crate) async fn wait(
        &self,
        task: &TaskId,
        timeout: Option<Duration>,
        cancel: &CancellationToken,
    ) -> Result<TaskSnapshot, CallError> {
        let tasks = self.runtime.tasks();
        let call = timeout.is_none().then(|| self.attend(task, cancel));
        let waited = tasks
            .wait(task, timeout.unwrap_or(FOREVER), OWNER, cancel)
            .await;
        if let Some(call) = call {
            let mut calls = lock(&self.calls);
            calls.retain(|(id, _, _)| *id != call);
        }
        let snapshot = waited?;
        if timeout.is_none() && cancel.is_cancelled() && !snapshot.status.is_terminal() {
            tasks.kill(task, OWNER, Some("the MCP call was cancelled"))?;
            tasks.until_settled(task).await;
            return Ok(tasks.read(task, OWNER)?);
        }
        Ok(snapshot)
    }

    /// Records a foreground call waiting for `task`; returns its id.
    fn attend(&self, task: &TaskId, cancel: &CancellationToken) -> u64 {
        let id = self
            .next_call
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut calls = lock(&self.calls);
        calls.push((id, task.clone(), cancel.clone()));
        id
    }

    /// Stops the tasks of foreground calls the client has cancelled (they stop themselves
    /// too, once their call wakes), so that what a call reads next reflects the cancellation.
    fn stop_cancelled_calls(&self) {
        let cancelled: Vec<TaskId> = {
            let mut calls = lock(&self.calls);
            let (gone, waiting) = std::mem::take(&mut *calls)
                .into_iter()
                .partition(|(_, _, cancel)| cancel.is_cancelled());
            *calls = waiting;
            gone.into_iter().map(|(_, task, _)| task).collect()
        };
        for task in cancelled {
            if let Err(error) =
                self.runtime
                    .tasks()
                    .kill(&task, OWNER, Some("the MCP call was cancelled"))
            {
                tracing::debug!(%task, %error, "stopping a cancelled call's task");
            }
        }
    }

    /// `kin_output`: the session's latest task, after waiting if asked; for a session that
    /// ran no task in this server, its last turn as its log tells it.
    pub(crate) async fn output(
        &self,
        session: &str,
        wait: Option<Duration>,
        cancel: &CancellationToken,
        client: u64,
    ) -> Result<Output, CallError> {
        self.check_client(session, client)?;
        self.stop_cancelled_calls();
        let Some(task) = self.latest(session) else {
            let (mut turn, header) = self.logged(session)?;
            let cwd = header.cwd.map(PathBuf::from).unwrap_or_default();
            // A session another kin process is running now keeps its worktree as it is.
            let path = self.runtime.host().store().path(session);
            if path.is_ok_and(|path| crate::session::is_locked(&path)) {
                return Ok(Output::Logged(turn));
            }
            let git = self.runtime.host().git();
            if let Some(report) = isolation::logged_report(session, &cwd, &git).await {
                isolation::append(&mut turn.answer, &mut turn.detail, &report);
            }
            return Ok(Output::Logged(turn));
        };
        let snapshot = match wait {
            Some(timeout) => self.wait(&task, Some(timeout), cancel).await?,
            None => self.runtime.tasks().read(&task, OWNER)?,
        };
        Ok(Output::Task(snapshot))
    }

    /// The last turn of a stored session `kin mcp` made (a task of an earlier server), with
    /// the session's header.
    fn logged(&self, session: &str) -> Result<(LoggedTurn, Header), CallError> {
        self.stored_header(session)?;
        let loaded = self
            .runtime
            .host()
            .store()
            .load(session)
            .map_err(|error| CallError::Runtime(RuntimeError::from(error)))?;
        let turn = logged::last_turn(&loaded.events)
            .ok_or_else(|| CallError::NeverRan(session.to_owned()))?;
        Ok((turn, loaded.header))
    }

    /// `kin_cancel`: stops the session's running task and waits until it has settled. A
    /// session whose tasks ran in an earlier server has nothing running here: its last turn
    /// is answered from the log, unless another process holds the session open.
    pub(crate) async fn cancel(&self, session: &str, client: u64) -> Result<Output, CallError> {
        self.check_client(session, client)?;
        self.stop_cancelled_calls();
        let Some(task) = self.latest(session) else {
            let (turn, _) = self.logged(session)?;
            let path = self.runtime.host().store().path(session);
            if path.is_ok_and(|path| crate::session::is_locked(&path)) {
                return Err(CallError::RunningElsewhere(session.to_owned()));
            }
            return Ok(Output::Logged(turn));
        };
        let tasks = self.runtime.tasks();
        if let KillResult::AlreadyFinished(snapshot) =
            tasks.kill(&task, OWNER, Some("kin_cancel"))?
        {
            return Ok(Output::Task(snapshot));
        }
        tasks.until_settled(&task).await;
        Ok(Output::Task(tasks.read(&task, OWNER)?))
    }

    /// `kin_list`: each session `client` may see, with its latest task, usage and delegated
    /// children.
    pub(crate) fn list(&self, client: u64) -> Value {
        self.stop_cancelled_calls();
        let mut latest = lock(&self.latest).clone();
        latest.retain(|(id, _)| self.owners.allows(id, client));
        let host = self.runtime.host();
        let sessions: Vec<Value> = latest
            .iter()
            .map(|(id, task)| {
                let snapshot = self.runtime.tasks().peek(task, OWNER).ok();
                let mut entry = json!({
                    "sessionId": id,
                    "taskId": task.as_str(),
                    "state": snapshot.as_ref().map_or("unknown", |s| state(s.status)),
                });
                if let Some(agent) = host.live(id) {
                    let usage = agent.context.usage();
                    entry["usage"] = json!({"contextTokens": usage.used, "cost": usage.cost});
                }
                let children: Vec<Value> = self
                    .runtime
                    .delegation()
                    .list(id)
                    .into_iter()
                    .map(|child| {
                        let state = match (&child.task, child.queued) {
                            (Some(_), true) => "queued".to_owned(),
                            (Some(_), false) => "running".to_owned(),
                            (None, _) => child.last_stop.unwrap_or_else(|| "idle".to_owned()),
                        };
                        json!({
                            "sessionId": child.id,
                            "kind": child.kind,
                            "description": child.description,
                            "state": state,
                            "turns": child.turns,
                        })
                    })
                    .collect();
                entry["children"] = Value::Array(children);
                entry
            })
            .collect();
        json!({ "sessions": sessions })
    }
}

/// How a call reports a task's state: `running`, `completed`, `cancelled` or `failed`.
pub(crate) fn state(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Killed => "cancelled",
        other => other.as_str(),
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

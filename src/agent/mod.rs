//! The agent loop. An [`Agent`] is one live session: its header, its append-only log, its
//! options and tools, and at most one running turn. A turn alternates model calls (steps) and
//! tool calls until the model stops, the turn is cancelled, or something fails; every
//! happening is a log event, handed to an observer as it is appended. [`host`] runs turns for
//! every front end. Delegation reaches an agent only through its tools (looked up by session
//! id), the records it queues (`record`, `record_in_next_turn`) and `steer`/`inject`.

mod argument_cap;
mod assemble;
mod compact;
pub(crate) mod context;
pub mod host;
pub mod lean;
pub(crate) mod mcp_view;
mod permissions;
pub(crate) mod remote_children;
pub(crate) mod shape;
pub mod structured;
mod system;
pub(crate) use system::DEFAULT_PERSONA;
mod title;
mod tool_images;
mod turn;
pub(crate) use turn::end_reason;
mod watch;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use tokio_util::sync::CancellationToken;

use crate::model::{Model, ModelCatalog, ModelChoice, ModelError};
use crate::process::child_env::ChildEnv;
use crate::session::history::{HistoryFold, ModelHistory};
use crate::session::{Event, EventBody, Header, SessionLog, StoreError, UserPart};
use crate::sync::{lock, read_lock, write_lock};
use crate::tools::private::PrivateFiles;
use crate::tools::{
    ClientBridge, FileStamps, PermissionMode, Roots, SessionPermissions, ToolRegistry,
};

pub(crate) use assemble::MessageAssembler;
pub(crate) use compact::CompactionOutcome;
pub use context::SessionContext;
pub use structured::{StructuredCapture, STRUCTURED_TOOL};
pub use system::fixed_cost;
pub(crate) use system::{system_prompt, workspace_preamble};
pub(crate) use title::fallback_title;
pub use watch::{Budget, Spend, Watch};

/// The permission mode a session's log restores (as opening it would).
pub(crate) fn restored_mode(events: &[Event]) -> PermissionMode {
    permissions::restore(events).mode()
}

/// How a turn ended: the one stop reason in kin. Each target maps it in one function beside
/// itself: the log (`turn.rs`), ACP (`acp/agent.rs`), `subagent_update` (`acp/subagents.rs`),
/// task outcomes and tool errors (`delegation/`), exit codes (`headless.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished its answer.
    Completed,
    /// The model hit its output token limit.
    MaxTokens,
    /// The model refused to answer.
    Refusal,
    /// The turn was cancelled (by the client, a parent or shutdown).
    Cancelled,
    /// The step limit was reached while the model still wanted to call tools.
    MaxSteps,
    /// The turn failed (the error says why). A turn that runs returns an error instead.
    Error,
    /// A delegation time limit (wall clock or idle watchdog) stopped the turn.
    TimedOut,
    /// The child reached its token or cost budget (after the step that reached it).
    BudgetExhausted,
}

impl StopReason {
    /// The one reading of a turn's end. Cancellation owns every outcome that did not
    /// complete: a turn that failed while being cancelled counts as cancelled.
    pub fn of(result: &Result<StopReason, TurnError>, cancelled: bool) -> Self {
        match result {
            Ok(Self::Completed) => Self::Completed,
            // A limit stops a turn by cancelling it, and says so.
            Ok(Self::TimedOut) => Self::TimedOut,
            _ if cancelled => Self::Cancelled,
            Ok(reason) => *reason,
            Err(_) => Self::Error,
        }
    }
}

/// Why a turn could not run or went wrong.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// A turn is already running in the session.
    #[error(
        "session {id} is already running a prompt: wait for its answer, or send `session/cancel` \
         and prompt again (a prompt after a cancel waits for the cancelled turn to end, then runs)"
    )]
    Busy {
        /// The session's id.
        id: String,
    },
    /// The model call failed.
    #[error("{error} (turn {turn}, step {step})")]
    Model {
        /// The turn it failed in.
        turn: u32,
        /// The step it failed in.
        step: u32,
        /// The model's error.
        error: ModelError,
    },
    /// The session log could not be written.
    #[error("could not write the session log: {0}")]
    Store(#[from] StoreError),
    /// The task running the turn ended without an answer (it panicked).
    #[error("the turn stopped unexpectedly")]
    Stopped,
    /// A tool reported a failure the turn cannot go on from.
    #[error("tool `{name}` failed: {message}")]
    Tool {
        /// The tool's name.
        name: String,
        /// What it reported.
        message: String,
    },
}

/// Per-agent model settings; a child inherits its parent's unless overridden.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentOptions {
    /// The model provider (the config's name for an endpoint).
    pub provider: Option<String>,
    /// The model's name, if not the provider's default.
    pub model: Option<String>,
    /// Cap on the tokens of one model answer.
    pub max_tokens: Option<u32>,
    /// Runtime delegation depth; the header's `delegationDepth` is the floor.
    pub subagent_depth: Option<u32>,
}

/// What a turn runs with.
#[derive(Clone)]
pub struct TurnDeps {
    /// The model of the session's options (the default, or a child's named model).
    pub model: Arc<dyn Model>,
    /// The configured models: a session that switched to one runs there.
    pub(crate) models: Arc<ModelCatalog>,
    pub(crate) system: String,
    /// The system prompt of a lean request (see [`lean`]).
    pub(crate) lean_system: String,
    /// When requests go lean (`[tools] lean`).
    pub(crate) lean: lean::LeanMode,
    pub(crate) max_steps: u32,
    /// Longer tool-call arguments are not run (the model gets an error result).
    pub(crate) tool_argument_bytes: usize,
    /// Calls of one step that run at once (1: one at a time).
    pub(crate) max_parallel: usize,
    /// The editor, for tools that can work through it and for permission prompts.
    pub(crate) client: Option<Arc<dyn ClientBridge>>,
    /// The environment scrub of the commands its tools start.
    pub(crate) child_env: ChildEnv,
    /// kin's own files, which its tools never read.
    pub(crate) private: PrivateFiles,
}

/// Receives each event right after it was appended to the log; the calls of a step that run
/// side by side are handed to it as they start and end instead (with `seq` 0: the log writes
/// them later, in the model's order, without handing them again).
pub(crate) type Observer<'a> = &'a (dyn Fn(&Event) + Send + Sync);

/// Everything that makes up a live agent besides its log.
pub struct AgentSpec {
    /// The session's header (its first log line).
    pub header: Header,
    /// The working directory its tools run in.
    pub cwd: PathBuf,
    /// The open log new events are appended to.
    pub log: SessionLog,
    /// The events already in the log, in order.
    pub events: Vec<Event>,
    /// The model settings.
    pub options: AgentOptions,
    /// Replaces the persona part of the system prompt (delegated children).
    pub persona: Option<String>,
    /// The tools the session may call.
    pub tools: Arc<ToolRegistry>,
    /// Set when the session must report a structured result.
    pub structured: Option<Arc<StructuredCapture>>,
    /// Its roots, when they are already resolved: a child working in its parent's cwd and
    /// directories shares the parent's (resolving walks every path component). `None`:
    /// resolved from `cwd` and the header.
    pub roots: Option<Arc<Roots>>,
}

/// One live session: its log, history and settings, and the turn that may be running in it.
pub struct Agent {
    /// The session's id.
    pub id: String,
    /// The working directory its tools run in.
    pub cwd: PathBuf,
    /// The model settings.
    pub options: AgentOptions,
    /// Replaces the persona part of the system prompt (delegated children).
    pub persona: Option<String>,
    /// The tools this agent offers its model.
    pub tools: Arc<ToolRegistry>,
    /// Set for a child that must report a structured result.
    pub structured: Option<Arc<StructuredCapture>>,
    header: Header,
    /// Where the log's images and attached files are kept (`<id>.blobs`).
    blob_dir: PathBuf,
    /// Where tools may reach: cwd plus additional directories.
    roots: Arc<Roots>,
    /// Permission mode and remembered answers, restored from the log.
    permissions: Arc<SessionPermissions>,
    /// What its tools last saw of the files they read or wrote (stale writes are refused).
    files: Arc<FileStamps>,
    /// Held for a whole turn: one turn at a time, one writer of the log.
    state: tokio::sync::Mutex<AgentState>,
    /// The log's events so far; readable while a turn runs (a fork copies the completed part).
    transcript: RwLock<Transcript>,
    running: AtomicBool,
    turn_cancel: Mutex<Option<CancellationToken>>,
    /// The running turn was cancelled: a prompt now waits for it to end instead of failing.
    cancelled_turn: AtomicBool,
    /// Signalled whenever a turn (or compaction) lets go of the session.
    idle: tokio::sync::Notify,
    /// Messages delivered into the running turn (`steer`), taken before the next model call.
    steering: Mutex<Steering>,
    /// Notices for the model (e.g. a finished background task), taken before the next call.
    /// Each with the log-only record written right after it (e.g. the `task/end` it reports).
    inbox: Mutex<Vec<(UserMessage, Option<EventBody>)>>,
    /// Log-only records for the next turn to write after its opening message (e.g. a child's
    /// `subagent/descriptor`).
    records: Mutex<Vec<EventBody>>,
    /// Log-only records to write as soon as possible: now when idle, else by the running turn
    /// at its next write (e.g. the owner's `task/start`, `task/end`).
    pending: Mutex<Vec<EventBody>>,
    /// The configured model it runs on, and its usage and cost figures.
    pub context: SessionContext,
    /// Its progress clock and limit stops, for delegation's watchdog.
    pub(crate) watch: Arc<Watch>,
    /// The session's MCP servers as this agent sees them (see [`mcp_view`]).
    mcp: RwLock<Option<mcp_view::McpView>>,
    /// The only MCP tools the session's own servers may offer (its agent definition's list).
    mcp_allow: std::sync::OnceLock<Vec<String>>,
}

pub use crate::session::UserMessage;

/// Messages steered into the running turn, and whether it still takes them.
#[derive(Default)]
struct Steering {
    queue: Vec<UserMessage>,
    open: bool,
}

/// The events, and the model's conversation folded from them as they come.
struct Transcript {
    events: Vec<Event>,
    history: HistoryFold,
}

struct AgentState {
    log: SessionLog,
    last_turn: u32,
    has_title: bool,
    /// The user was told once that this session's model gets a tool's images as placeholders.
    tool_images_told: bool,
    /// The user was told once that compaction cannot make room in the window.
    no_room_told: bool,
}

/// Why a message could not be steered into a turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("subagent child \"{id}\" is not running; the message was not delivered")]
pub(crate) struct NotRunning {
    pub id: String,
}

impl Agent {
    /// A live agent from its parts, its history folded from the events.
    pub fn new(spec: AgentSpec) -> Self {
        let last_turn = spec
            .events
            .iter()
            .filter_map(|event| match &event.body {
                EventBody::TurnStart(start) => Some(start.turn),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let has_title = spec
            .events
            .iter()
            .any(|event| matches!(event.body, EventBody::SessionTitle(_)));
        let roots = match &spec.roots {
            Some(roots) => roots.clone(),
            None => {
                let additional = spec
                    .header
                    .additional_directories
                    .iter()
                    .map(PathBuf::from)
                    .collect();
                Arc::new(Roots::new(spec.cwd.clone(), additional))
            }
        };
        let blob_dir = crate::session::blobs::dir_of(spec.log.path());
        Self {
            id: spec.header.id.clone(),
            blob_dir,
            roots,
            permissions: Arc::new(permissions::restore(&spec.events)),
            files: Arc::default(),
            context: SessionContext::restore(&spec.events),
            cwd: spec.cwd,
            options: spec.options,
            persona: spec.persona,
            tools: spec.tools,
            structured: spec.structured,
            header: spec.header,
            state: tokio::sync::Mutex::new(AgentState {
                log: spec.log,
                last_turn,
                has_title,
                tool_images_told: false,
                no_room_told: false,
            }),
            transcript: RwLock::new(Transcript {
                history: HistoryFold::new(&spec.events),
                events: spec.events,
            }),
            running: AtomicBool::new(false),
            turn_cancel: Mutex::new(None),
            cancelled_turn: AtomicBool::new(false),
            idle: tokio::sync::Notify::new(),
            steering: Mutex::new(Steering::default()),
            inbox: Mutex::new(Vec::new()),
            records: Mutex::new(Vec::new()),
            pending: Mutex::new(Vec::new()),
            watch: Arc::default(),
            mcp: RwLock::new(None),
            mcp_allow: std::sync::OnceLock::new(),
        }
    }

    /// The session's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// `max(header delegationDepth, runtime subagent depth)`.
    pub(crate) fn delegation_depth(&self) -> u32 {
        self.header
            .delegation_depth
            .max(self.options.subagent_depth.unwrap_or(0))
    }

    pub(crate) fn roots(&self) -> &Arc<Roots> {
        &self.roots
    }

    /// The session's blob directory (images and attached files of its prompts).
    pub(crate) fn blob_dir(&self) -> PathBuf {
        self.blob_dir.clone()
    }

    pub(crate) fn permission_mode(&self) -> PermissionMode {
        self.permissions.mode()
    }

    /// What the session's tools last saw of the files they read or wrote.
    pub(crate) fn files(&self) -> &Arc<FileStamps> {
        &self.files
    }

    /// The session's permission state (what tool calls are decided by).
    pub(crate) fn permissions(&self) -> &Arc<SessionPermissions> {
        &self.permissions
    }

    /// Bounds this session, a delegated child, by `parent`'s permissions: its calls are decided
    /// under the strictest of its own mode and its ancestors' current ones. Once per session.
    pub(crate) fn bind_permissions_to(&self, parent: &Agent) {
        if !self.permissions.bind_to_parent(parent.permissions.clone()) {
            tracing::debug!(session = %self.id, "permissions already bound to a parent");
        }
    }

    /// Switches the permission mode; the change is written to the log now if the session is
    /// idle, else by the running turn. Returns whether the mode changed.
    pub fn set_permission_mode(&self, mode: PermissionMode) -> Result<bool, StoreError> {
        let changed = self.permissions.set_mode(mode);
        self.write_idle_records()?;
        Ok(changed)
    }

    /// Writes queued permission and pending records if no turn holds the log (a running turn
    /// writes them itself).
    fn write_idle_records(&self) -> Result<(), StoreError> {
        if let Ok(mut state) = self.state.try_lock() {
            let permissions = self.permissions.take_unlogged();
            let synced = !permissions.is_empty();
            let mut records: Vec<EventBody> = permissions
                .into_iter()
                .map(|record| permissions::event(record, None))
                .collect();
            records.extend(self.take_pending());
            if !records.is_empty() {
                for body in records {
                    let event = state.log.append(body, crate::time::now_ms())?;
                    self.push_event(event);
                }
                // A mode change is durable at once; task records need only reach the file
                // (the next turn end syncs them), so a start costs no fsync.
                if synced {
                    state.log.sync()?;
                } else {
                    state.log.flush()?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Runs `read` over the events so far (a running turn's events included).
    pub fn with_events<T>(&self, read: impl FnOnce(&[Event]) -> T) -> T {
        read(&self.transcript().events)
    }

    /// The conversation the model sees as of the last event.
    pub(crate) fn model_history(&self) -> ModelHistory {
        self.transcript().history.history()
    }

    fn transcript(&self) -> RwLockReadGuard<'_, Transcript> {
        read_lock(&self.transcript)
    }

    fn push_event(&self, event: Event) {
        self.watch.progressed();
        let mut transcript = write_lock(&self.transcript);
        transcript.history.push(&event);
        transcript.events.push(event);
    }

    /// The completed turns' messages as the model sees them (what a compaction summarises).
    fn completed_prefix(&self) -> Vec<Arc<crate::session::history::HistoryItem>> {
        self.transcript().history.completed_prefix()
    }

    /// What an in-turn compaction through `step` of the running turn summarises.
    fn running_prefix(&self, step: u32) -> Vec<Arc<crate::session::history::HistoryItem>> {
        self.transcript().history.running_prefix(step)
    }

    /// Bytes of the running turn's prompt, which an in-turn compaction keeps.
    fn running_prompt_len(&self) -> usize {
        self.transcript().history.running_prompt_len()
    }

    /// The number of the last turn that ended (0: none yet).
    fn last_completed_turn(&self) -> u32 {
        self.with_events(|events| {
            events.iter().rev().find_map(|event| match &event.body {
                EventBody::TurnEnd(end) => Some(end.turn),
                _ => None,
            })
        })
        .unwrap_or(0)
    }

    /// The configured model this session runs on: the one switched to, else the one its
    /// options name, if either is in `models`.
    pub(crate) fn model_choice<'a>(&self, models: &'a ModelCatalog) -> Option<&'a ModelChoice> {
        self.context
            .selected()
            .and_then(|id| models.get(&id))
            .or_else(|| self.options.model.as_deref().and_then(|id| models.get(id)))
    }

    /// Switches the session to configured model `id` from its next model call; the switch
    /// is logged now if the session is idle, else by the running turn before that call.
    pub(crate) fn select_model(&self, id: &str) -> Result<(), StoreError> {
        self.context.select(id);
        if let Ok(mut state) = self.state.try_lock() {
            if let Some(model) = self.context.take_unlogged_switch() {
                let body = model_set(model);
                let event = state.log.append(body, crate::time::now_ms())?;
                self.push_event(event);
                state.log.sync()?;
            }
        }
        Ok(())
    }

    /// Compacts the conversation now (`/compact`), with `choice`'s model; refused while a
    /// turn runs; [`Agent::cancel`] stops it as it stops a turn. Its events are handed to
    /// `observe`.
    pub(crate) async fn compact(
        self: &Arc<Self>,
        choice: &ModelChoice,
        observe: Observer<'_>,
        cancel: CancellationToken,
    ) -> Result<CompactionOutcome, TurnError> {
        if !self.take_turn(&cancel).await? {
            return Ok(CompactionOutcome::Cancelled);
        }
        // `session/cancel` reaches it as it reaches a turn.
        *lock(&self.turn_cancel) = Some(cancel.clone());
        let result = {
            let mut state = self.state.lock().await;
            let trigger = crate::session::CompactionTrigger::Request;
            compact::compact(
                self,
                &mut state,
                choice,
                (trigger, None, None),
                observe,
                &cancel,
            )
            .await
        };
        self.release_turn();
        Ok(result?)
    }

    /// Takes the session for a turn or a compaction. While another runs: waits for it to end
    /// if it was cancelled (a client that cancels and prompts again loses nothing), else
    /// refuses (`Busy`). `Ok(false)` when `cancel` fired while waiting.
    async fn take_turn(&self, cancel: &CancellationToken) -> Result<bool, TurnError> {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if !self.running.swap(true, Ordering::AcqRel) {
                self.cancelled_turn.store(false, Ordering::Release);
                return Ok(true);
            }
            if !self.cancelled_turn.load(Ordering::Acquire) {
                return Err(TurnError::Busy {
                    id: self.id.clone(),
                });
            }
            tokio::select! {
                () = idle => {}
                () = cancel.cancelled() => return Ok(false),
            }
        }
    }

    /// Lets go of the session taken by [`Self::take_turn`].
    fn release_turn(&self) {
        *lock(&self.turn_cancel) = None;
        self.running.store(false, Ordering::Release);
        self.idle.notify_waiters();
    }

    /// Cancels the running turn, if any; it settles as `Cancelled`.
    pub(crate) fn cancel(&self) {
        if let Some(token) = lock(&self.turn_cancel).as_ref() {
            self.cancelled_turn.store(true, Ordering::Release);
            token.cancel();
        }
    }

    /// Waits until no turn holds the session (returns at once when idle).
    pub(crate) async fn settle(&self) {
        drop(self.state.lock().await);
    }

    /// Delivers a message into the running turn; refuses when no turn runs or the running one
    /// has already decided to end (never queues one for later): an accepted message is always
    /// answered within this turn.
    pub(crate) fn steer(&self, content: Vec<UserPart>) -> Result<(), NotRunning> {
        let mut steering = lock(&self.steering);
        if !steering.open {
            return Err(NotRunning {
                id: self.id.clone(),
            });
        }
        steering.queue.push(UserMessage {
            content,
            source: serde_json::json!({"kind": "user"}),
            role: "user".into(),
            id: uuid::Uuid::new_v4().to_string(),
        });
        Ok(())
    }

    /// Leaves a notice for the model; it is logged before the next model call, followed by
    /// `record` (never shown to the model) if there is one.
    pub(crate) fn inject(&self, message: UserMessage, record: Option<EventBody>) {
        lock(&self.inbox).push((message, record));
    }

    /// Takes back notice `id` (and its record) if it has not been logged yet.
    pub(crate) fn withdraw(&self, id: &str) {
        lock(&self.inbox).retain(|(message, _)| message.id != id);
    }

    /// Has the next turn write `body` to the log after its opening message; never shown to
    /// the model.
    pub(crate) fn record_in_next_turn(&self, body: EventBody) {
        lock(&self.records).push(body);
    }

    /// Writes `body` to the log now when idle, else has the running turn write it at its next
    /// write; never shown to the model. A failed write is logged: the record is advisory.
    pub(crate) fn record(&self, body: EventBody) {
        lock(&self.pending).push(body);
        if let Err(error) = self.write_idle_records() {
            tracing::warn!(%error, session = %self.id, "could not write a record");
        }
    }

    fn take_pending(&self) -> Vec<EventBody> {
        std::mem::take(&mut *lock(&self.pending))
    }

    fn take_records(&self) -> Vec<EventBody> {
        std::mem::take(&mut *lock(&self.records))
    }

    fn take_steering(&self) -> Vec<UserMessage> {
        std::mem::take(&mut lock(&self.steering).queue)
    }

    /// Closes the turn to steering unless a message is waiting (then the turn takes another
    /// step to answer it). Returns whether the turn may end.
    fn close_steering_unless_waiting(&self) -> bool {
        let mut steering = lock(&self.steering);
        steering.open = !steering.queue.is_empty();
        !steering.open
    }

    fn take_inbox(&self) -> Vec<(UserMessage, Option<EventBody>)> {
        std::mem::take(&mut *lock(&self.inbox))
    }

    /// Runs one turn for `prompt`. Refuses (without touching the log) while another runs,
    /// unless that one was cancelled: then it runs once that one has ended.
    pub async fn run_turn(
        self: &Arc<Self>,
        prompt: Vec<UserPart>,
        deps: &TurnDeps,
        observe: Observer<'_>,
        cancel: CancellationToken,
    ) -> Result<StopReason, TurnError> {
        if !self.take_turn(&cancel).await? {
            return Ok(StopReason::Cancelled);
        }
        *lock(&self.turn_cancel) = Some(cancel.clone());
        lock(&self.steering).open = true;
        let result = {
            let mut state = self.state.lock().await;
            turn::run(self, &mut state, prompt, deps, observe, &cancel).await
        };
        lock(&self.steering).open = false;
        self.release_turn();
        // A mode switch or record that arrived as the turn was ending is written now.
        if let Err(error) = self.write_idle_records() {
            tracing::warn!(%error, session = %self.id, "could not log a permission change");
        }
        result
    }
}

/// The log record of a switch to configured model `model`.
fn model_set(model: String) -> EventBody {
    EventBody::ModelSet(crate::session::ModelSet {
        model,
        source: serde_json::json!({"kind": "client"}),
    })
}

//! `SubagentControl`: continuable background children. Each child is a durable session with
//! a stable id; each of its turns is one activation run as one background task, and the
//! child is disposed before that task settles. A message to a child either joins the running
//! activation (steer) or starts the next one from the child's own transcript (cold resume).
//!
//! The process-local association child id -> current activation is installed synchronously
//! before anything awaits and removed before the activation's task settles, so a caller that
//! waited for the task and then sends a message always takes the cold path. An advisory lock
//! on the child's session file, held for an activation, keeps two kin processes from running
//! the same child at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::host::ChildHost;
use super::{
    Continuation, Descriptor, ResumeRequest, Run, StartRequest, StopReason, SubagentError,
    SubagentResult, SubagentService, DESCRIPTOR_VERSION,
};
use crate::agent::Agent;
use crate::session::{Header, SessionLock, SessionStore, StoreError, UserPart};
use crate::tasks::{TaskId, TaskOutcome, TaskService, TaskStatus};

/// Task labels made from a follow-up message are cut to this many characters.
pub const RESUME_LABEL_MAX: usize = 80;

/// The identities of a continuable child just started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuableStart {
    pub child_id: String,
    pub task_id: TaskId,
}

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
    pub id: String,
    /// The child's session title (from its first prompt).
    pub description: Option<String>,
    /// The subagent provider that made it (`spawn`, `fork`).
    pub kind: String,
    /// The model provider and model it runs on.
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The task of the running activation, if one runs in this process.
    pub task: Option<TaskId>,
    /// How its last turn ended (`turn/end` reason), if one did.
    pub last_stop: Option<String>,
    /// Turns the child ran itself (a fork's inherited turns are not counted).
    pub turns: u32,
}

/// The running activation of one child.
#[derive(Default)]
struct Activation {
    /// Set in the frame that started the task.
    task_id: OnceLock<TaskId>,
    /// Set once the provider published the child.
    run: Mutex<Option<Run>>,
}

impl Activation {
    fn run(&self) -> Option<Run> {
        lock(&self.run).clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A child's session lock, held for one activation (released on drop).
type ChildLock = SessionLock;

type Begin = Box<
    dyn FnOnce(
            CancellationToken,
        ) -> BoxFuture<'static, Result<(Run, Option<ChildLock>), SubagentError>>
        + Send,
>;

pub struct SubagentControl {
    tasks: Arc<TaskService>,
    subagents: Arc<SubagentService>,
    store: SessionStore,
    /// The live sessions (weakly: the host's tools hold this service).
    host: Weak<dyn ChildHost>,
    activations: Mutex<HashMap<String, Arc<Activation>>>,
}

impl SubagentControl {
    pub fn new(
        tasks: Arc<TaskService>,
        subagents: Arc<SubagentService>,
        store: SessionStore,
        host: Weak<dyn ChildHost>,
    ) -> Self {
        Self {
            tasks,
            subagents,
            store,
            host,
            activations: Mutex::new(HashMap::new()),
        }
    }

    /// The task service activations run on.
    pub fn tasks(&self) -> &Arc<TaskService> {
        &self.tasks
    }

    fn activations(&self) -> MutexGuard<'_, HashMap<String, Arc<Activation>>> {
        lock(&self.activations)
    }

    /// Starts a continuable child in the background. Returns both ids at once; the child's
    /// id is fixed before its task exists. Failures after this point settle the task.
    pub fn start_continuable(
        self: &Arc<Self>,
        provider: &str,
        label: &str,
        mut request: StartRequest,
    ) -> Result<ContinuableStart, SubagentError> {
        let child_id = uuid::Uuid::new_v4().to_string();
        let overrides = request.agent_options.as_ref();
        let descriptor = Descriptor {
            version: DESCRIPTOR_VERSION,
            provider: provider.to_owned(),
            agent_provider: overrides
                .and_then(|o| o.provider.clone())
                .or_else(|| request.parent.options.provider.clone()),
            agent_model: overrides
                .and_then(|o| o.model.clone())
                .or_else(|| request.parent.options.model.clone()),
            persona: request.persona.clone(),
            tool_filter: request.tool_filter.as_ref().map(Into::into),
            provider_data: None,
        };
        request.continuation = Some(Continuation {
            session_id: child_id.clone(),
            descriptor,
        });
        let owner = request.parent.id.clone();
        let subagents = self.subagents.clone();
        let store = self.store.clone();
        let provider = provider.to_owned();
        let id = child_id.clone();
        let begin: Begin = Box::new(move |cancel| {
            request.cancel = cancel;
            async move {
                let run = subagents.start(&provider, request).await?;
                // The file exists now; nobody else knows the id yet, so this cannot lose.
                let held = lock_child(&store, &id).ok();
                Ok((run, held))
            }
            .boxed()
        });
        let task_id = self.start_activation(&child_id, label, owner, begin)?;
        Ok(ContinuableStart { child_id, task_id })
    }

    /// Delivers a message to a child of `parent`: into its running activation, or as the
    /// start of a new one. An error always means the message was not delivered.
    ///
    /// The route is chosen before this returns (nothing awaits first); the future then waits
    /// only for a running child to take or refuse a steered message.
    pub fn send_message(
        self: &Arc<Self>,
        parent: &Arc<Agent>,
        child_id: &str,
        message: Vec<UserPart>,
        client: Option<Arc<dyn crate::tools::ClientBridge>>,
    ) -> BoxFuture<'static, Result<Delivery, SubagentError>> {
        match self.route(parent, child_id, message, client) {
            Ok(delivery) => delivery,
            Err(error) => std::future::ready(Err(error)).boxed(),
        }
    }

    fn route(
        self: &Arc<Self>,
        parent: &Arc<Agent>,
        child_id: &str,
        message: Vec<UserPart>,
        client: Option<Arc<dyn crate::tools::ClientBridge>>,
    ) -> Result<BoxFuture<'static, Result<Delivery, SubagentError>>, SubagentError> {
        let activation = self.activations().get(child_id).cloned();
        let live = self.host.upgrade().and_then(|host| host.live(child_id));
        match (&activation, &live) {
            // Never adopt an agent the service did not start.
            (None, Some(_)) => return Err(SubagentError::OutsideControl(child_id.to_owned())),
            (Some(activation), Some(live)) => {
                let local = activation.run().and_then(|run| run.local_agent);
                if local.is_some_and(|local| !Arc::ptr_eq(&local, live)) {
                    return Err(SubagentError::NotAssociatedAgent(child_id.to_owned()));
                }
            }
            _ => {}
        }
        if let Some(activation) = activation {
            return self.steer(&activation, parent, child_id, message);
        }
        let label = resume_label(&message);
        if !self.store.exists(child_id) {
            if self.tasks.peek(child_id, &parent.id).is_ok() {
                return Err(SubagentError::OneShot(child_id.to_owned()));
            }
            // Never stored (unknown, or a start that failed before it wrote anything): the
            // new task fails at once, before this returns, so its notice has a fixed place.
            let failed =
                TaskOutcome::failed(SubagentError::Unavailable(child_id.to_owned()).detail());
            let task_id = self.tasks.start_settled(
                "subagent",
                &label,
                Some(parent.id.as_str().into()),
                failed,
            )?;
            return Ok(std::future::ready(Ok(Delivery::Started(task_id))).boxed());
        }
        let begin = self.resume_producer(parent.clone(), child_id.to_owned(), message, client);
        let task_id = self.start_activation(child_id, &label, parent.id.clone(), begin)?;
        Ok(std::future::ready(Ok(Delivery::Started(task_id))).boxed())
    }

    /// Joins the running activation; never falls through to a cold resume.
    fn steer(
        &self,
        activation: &Activation,
        parent: &Agent,
        child_id: &str,
        message: Vec<UserPart>,
    ) -> Result<BoxFuture<'static, Result<Delivery, SubagentError>>, SubagentError> {
        let starting = || SubagentError::Starting(child_id.to_owned());
        let task_id = activation.task_id.get().ok_or_else(starting)?;
        let task = self
            .tasks
            .peek(task_id, &parent.id)
            .map_err(SubagentError::TaskFence)?;
        if task.status != TaskStatus::Running {
            return Err(SubagentError::TaskNotRunning {
                id: child_id.to_owned(),
                task: task_id.to_string(),
                status: task.status.as_str(),
            });
        }
        let run = activation.run().ok_or_else(starting)?;
        let delivery = run.steer(message);
        let task_id = task_id.clone();
        let child_id = child_id.to_owned();
        Ok(async move {
            match delivery.await {
                Ok(()) => Ok(Delivery::Steered(task_id)),
                // The task was running a moment ago: its turn ended before the child took it.
                Err(SubagentError::NotRunning(_)) => {
                    Err(SubagentError::StoppedBeforeDelivery(child_id))
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
        client: Option<Arc<dyn crate::tools::ClientBridge>>,
    ) -> Begin {
        let control = Arc::clone(self);
        Box::new(move |cancel| {
            async move {
                // Under the lock, nobody else writes the child while it is read and run.
                let held = lock_child(&control.store, &child_id)?;
                let (header, descriptor) = control.lookup(&child_id).await?;
                // The store takes no cancellation: a kill during lookup stops here.
                if cancel.is_cancelled() {
                    return Err(SubagentError::CancelledDuringLookup);
                }
                if header.parent_session.as_deref() != Some(parent.id.as_str()) {
                    return Err(SubagentError::Unauthorized(child_id));
                }
                let descriptor =
                    descriptor.ok_or_else(|| SubagentError::NoDescriptor(child_id.clone()))?;
                let provider = descriptor.provider.clone();
                let request = ResumeRequest {
                    session_id: child_id,
                    prompt: message,
                    parent,
                    cancel,
                    descriptor,
                    client,
                };
                let run = control.subagents.resume(&provider, request).await?;
                Ok((run, Some(held)))
            }
            .boxed()
        })
    }

    /// The child's header and the descriptor folded from its own events (after its seed).
    /// Reads the lines without decoding the transcript: the provider loads it next.
    async fn lookup(&self, child_id: &str) -> Result<(Header, Option<Descriptor>), SubagentError> {
        let unavailable = || SubagentError::Unavailable(child_id.to_owned());
        let path = self.store.path(child_id).map_err(|_| unavailable())?;
        let bytes = tokio::task::spawn_blocking(move || std::fs::read(path))
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(unavailable)?;
        let (header, own) = own_lines(&bytes).ok_or_else(unavailable)?;
        let descriptor = own
            .into_iter()
            .find(|line| line.starts_with(DESCRIPTOR_PREFIX))
            .and_then(descriptor_of);
        Ok((header, descriptor))
    }

    /// Installs the association, then starts the activation's task. The task disposes the
    /// run, drops the file lock and removes the association before its outcome is recorded.
    fn start_activation(
        self: &Arc<Self>,
        child_id: &str,
        label: &str,
        owner: String,
        begin: Begin,
    ) -> Result<TaskId, SubagentError> {
        let activation = Arc::new(Activation::default());
        self.activations()
            .insert(child_id.to_owned(), activation.clone());
        let control = Arc::clone(self);
        let this = activation.clone();
        let id = child_id.to_owned();
        let started = self
            .tasks
            .start("subagent", label, Some(owner.into()), move |cancel| {
                async move {
                    let outcome = match begin(cancel.clone()).await {
                        Ok((run, held)) => {
                            *lock(&this.run) = Some(run.clone());
                            let outcome = settle_run(&run).await;
                            drop(held);
                            outcome
                        }
                        Err(_) if cancel.is_cancelled() => TaskOutcome::killed(),
                        Err(error) => TaskOutcome::failed(error.detail()),
                    };
                    control.release(&id, &this);
                    outcome
                }
                .boxed()
            });
        match started {
            Ok(task_id) => {
                let _ = activation.task_id.set(task_id.clone());
                Ok(task_id)
            }
            Err(error) => {
                self.release(child_id, &activation);
                Err(error.into())
            }
        }
    }

    /// Removes the association if it still is this activation.
    fn release(&self, child_id: &str, activation: &Arc<Activation>) {
        let mut activations = self.activations();
        if activations
            .get(child_id)
            .is_some_and(|current| Arc::ptr_eq(current, activation))
        {
            activations.remove(child_id);
        }
    }

    /// The task of the child's running activation in this process, if any.
    pub fn running_task(&self, child_id: &str) -> Option<TaskId> {
        let activation = self.activations().get(child_id).cloned()?;
        activation.task_id.get().cloned()
    }

    /// Restores, as `interrupted`, the background tasks `parent`'s log shows started (by the
    /// delegation tools or `send_message`) and never finished: an earlier kin process ended
    /// while they ran. Their children stay continuable with `send_message`.
    pub fn restore_interrupted(&self, parent: &Agent) {
        let unfinished = parent.with_events(unfinished_tasks);
        for (task, label, child) in unfinished {
            let detail = match child {
                Some(child) => format!(
                    "started by an earlier kin process; send_message to subagent {child} continues it"
                ),
                None => "started by an earlier kin process".to_owned(),
            };
            self.tasks
                .restore_interrupted(&task, "subagent", &label, &parent.id, detail);
        }
    }

    /// The continuable children of `parent` in the store, oldest first, with the task of any
    /// activation running now. Read from the session index; only a child indexed by an older
    /// kin (no child record) has its file read. Ids that never reached the store are not listed.
    pub fn list_children(&self, parent: &str) -> Vec<ChildSummary> {
        let sessions = match self.store.list_children(parent) {
            Ok(sessions) => sessions,
            Err(error) => {
                tracing::warn!(%error, "could not list the stored sessions");
                return Vec::new();
            }
        };
        let mut found: Vec<(u64, ChildSummary)> = sessions
            .into_iter()
            .filter_map(|session| {
                let child = match session.child {
                    Some(child) => child,
                    None => self.store.summarize(&session.id)?.child?,
                };
                let summary = ChildSummary {
                    task: self.running_task(&session.id),
                    id: session.id,
                    description: session.title,
                    kind: child.kind?,
                    provider: child.agent_provider,
                    model: child.agent_model,
                    last_stop: child.last_stop,
                    turns: child.turns,
                };
                Some((child.created_at, summary))
            })
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
        found.into_iter().map(|(_, child)| child).collect()
    }
}

/// The subagent tasks a log shows started and never finished (no notice, no terminal
/// `task_output` or `task_kill` result): (task id, label, child id if continuable).
fn unfinished_tasks(events: &[crate::session::Event]) -> Vec<(String, String, Option<String>)> {
    use crate::session::EventBody;
    let mut calls: HashMap<&str, (&str, serde_json::Value)> = HashMap::new();
    let mut started: Vec<(String, String, Option<String>)> = Vec::new();
    let mut finished: Vec<String> = Vec::new();
    let argument = |args: &serde_json::Value, key: &str| {
        args.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    for event in events {
        match &event.body {
            EventBody::ToolCall(call) => {
                let args = serde_json::from_str(&call.arguments).unwrap_or_default();
                calls.insert(call.call_id.as_str(), (call.name.as_str(), args));
            }
            EventBody::ToolResult(result) => {
                let Some(part) = result.message.content.first() else {
                    continue;
                };
                let Some((name, args)) = calls.get(part.tool_call_id.as_str()) else {
                    continue;
                };
                if part.is_error {
                    continue;
                }
                let text = result.text();
                let words: Vec<&str> = text.split(' ').collect();
                match (*name, words.as_slice()) {
                    (_, ["started", "subagent", child, "as", "task", task]) => started.push((
                        (*task).to_owned(),
                        argument(args, "description"),
                        Some((*child).to_owned()),
                    )),
                    (_, ["started", "background", "subagent", "task", task]) => {
                        started.push(((*task).to_owned(), argument(args, "description"), None))
                    }
                    (
                        "send_message",
                        ["message", "started", "task", task, "continuing", "subagent", child],
                    ) => {
                        let message = vec![UserPart::Text {
                            text: argument(args, "message"),
                        }];
                        started.push((
                            (*task).to_owned(),
                            resume_label(&message),
                            Some((*child).to_owned()),
                        ))
                    }
                    ("task_kill", _) => finished.push(argument(args, "task_id")),
                    ("task_output", _) => {
                        let status = text.rsplit("[status: ").next().unwrap_or_default();
                        if !status.starts_with("running") && !status.starts_with("stopping") {
                            finished.push(argument(args, "task_id"));
                        }
                    }
                    _ => {}
                }
            }
            EventBody::UserMessage(message) if message.source["kind"] == "plugin" => {
                for part in &message.content {
                    if let UserPart::Text { text } = part {
                        if let Some(rest) = text.strip_prefix("background task ") {
                            finished.extend(rest.split(' ').next().map(str::to_owned));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    started.retain(|(task, _, _)| !finished.contains(task));
    started
}

/// How a descriptor line starts, as kin writes it.
const DESCRIPTOR_PREFIX: &[u8] = br#"{"type":"subagent/descriptor""#;

/// A log's header and the lines of its own events: those after the `seedLength` inherited
/// ones (kin writes a seed one event per line).
fn own_lines(bytes: &[u8]) -> Option<(Header, Vec<&[u8]>)> {
    let mut lines = bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty());
    let header: Header = serde_json::from_slice(lines.next()?).ok()?;
    let seed = usize::try_from(header.seed_length.unwrap_or(0)).ok()?;
    Some((header, lines.skip(seed).collect()))
}

/// The `data` of one event line, as `T`.
fn event_data<T: serde::de::DeserializeOwned>(line: &[u8]) -> Option<T> {
    #[derive(serde::Deserialize)]
    struct Line<T> {
        data: T,
    }
    serde_json::from_slice::<Line<T>>(line).ok().map(|l| l.data)
}

/// A descriptor line's data, if it is a resumable (version 1) descriptor.
fn descriptor_of(line: &[u8]) -> Option<Descriptor> {
    event_data::<Descriptor>(line).filter(|d| d.version == DESCRIPTOR_VERSION)
}

/// Takes the child's session lock for one activation (see `session::SessionLock`). Another
/// kin process holding it runs the child now.
fn lock_child(store: &SessionStore, child_id: &str) -> Result<ChildLock, SubagentError> {
    match store.lock(child_id) {
        Ok(lock) => Ok(lock),
        Err(StoreError::Locked { .. }) => Err(SubagentError::ActiveElsewhere(child_id.to_owned())),
        Err(error) => {
            tracing::warn!(%error, child = child_id, "could not lock a child's session file");
            Err(SubagentError::Unavailable(child_id.to_owned()))
        }
    }
}

/// A task outcome from a run's result: completed with the answer text, killed when aborted,
/// failed with the stop reason (and the cause, when known) otherwise (partial output dropped).
/// The run is disposed first.
pub(super) async fn settle_run(run: &Run) -> TaskOutcome {
    let result: SubagentResult = run.result().await;
    run.dispose().await;
    match result.stop_reason {
        StopReason::Completed => TaskOutcome::completed(result.text()),
        StopReason::Aborted => TaskOutcome::killed(),
        other => match result.error {
            Some(error) => TaskOutcome::failed(format!("{}: {error}", other.as_str())),
            None => TaskOutcome::failed(other.as_str()),
        },
    }
}

/// A task label from a follow-up: its text on one line, cut to [`RESUME_LABEL_MAX`] chars.
fn resume_label(message: &[UserPart]) -> String {
    let text: String = message
        .iter()
        .filter_map(|part| match part {
            UserPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return "subagent follow-up".into();
    }
    if line.chars().count() > RESUME_LABEL_MAX {
        let cut: String = line.chars().take(RESUME_LABEL_MAX - 1).collect();
        return format!("{cut}…");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Vec<UserPart> {
        vec![UserPart::Text { text: s.into() }]
    }

    #[test]
    fn resume_labels_are_one_trimmed_line_of_at_most_80_chars() {
        assert_eq!(
            resume_label(&text("  Please\n\tcontinue.  ")),
            "Please continue."
        );
        assert_eq!(resume_label(&text(" \n ")), "subagent follow-up");
        let long = "x".repeat(81);
        let label = resume_label(&text(&long));
        assert_eq!(label.chars().count(), 80);
        assert!(label.ends_with('…'));
        assert_eq!(resume_label(&text(&"y".repeat(80))), "y".repeat(80));
    }
}

//! Background tasks: work that outlives the tool call that started it.
//!
//! Ids are `<kind>-N` (a counter per kind, from 1). A task is `running` (first `queued` when
//! its work waits for a slot under a cap), maybe `stopping`
//! after a kill, then settles once as `completed`, `killed` or `failed`. Tasks may belong to a
//! session: only that session can read, wait for or kill them. When a task settles and nobody
//! has seen the result yet (no terminal read or wait, no kill), its owner gets one notice.
//! A task that was running when an earlier kin process ended is restored as `interrupted`
//! when its owner's session is opened again. The starts of owned tasks, and the moments their
//! owners learn how they ended, go to a [`Record`] sink (delegation logs them, so a later
//! process knows which were left unfinished). Knows nothing of what the work is.

mod sinks;
mod status;
pub(crate) mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::session::SessionId;

use crate::sync::lock;
pub use sinks::{Notice, Record};
pub(crate) use sinks::{NoticeSink, RecordSink};
pub use status::TaskStatus;
pub(crate) use tools::{TaskKillTool, TaskListTool, TaskOutputTool};

/// A task's id, `<kind>-N`: what `start` hands out and the `task_*` tools name. Reads as the
/// `str` it is (the model gives ids back as plain strings).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskId(String);

impl TaskId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for TaskId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<&str> for TaskId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// How a task's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    /// The task's final status.
    pub status: TaskStatus,
    /// What else there is to say (why it failed, ...).
    pub detail: Option<String>,
    /// What the work produced.
    pub output: Option<String>,
}

impl TaskOutcome {
    /// The work finished with this output.
    pub fn completed(output: String) -> Self {
        Self {
            status: TaskStatus::Completed,
            detail: None,
            output: Some(output),
        }
    }

    /// The work was stopped.
    pub fn killed() -> Self {
        Self {
            status: TaskStatus::Killed,
            detail: None,
            output: None,
        }
    }

    /// The work failed, for this reason.
    pub fn failed(detail: impl Into<String>) -> Self {
        Self {
            status: TaskStatus::Failed,
            detail: Some(detail.into()),
            output: None,
        }
    }
}

/// A task as seen at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSnapshot {
    /// The task's id.
    pub id: TaskId,
    pub(crate) kind: String,
    pub(crate) label: String,
    pub(crate) owner: Option<SessionId>,
    /// Its status then.
    pub status: TaskStatus,
    /// What else there is to say (why it failed, ...).
    pub detail: Option<String>,
    /// What the work produced, once it did.
    pub output: Option<String>,
}

impl TaskSnapshot {
    /// `[status: <s>]` or `[status: <s>, <detail>]`.
    pub fn status_line(&self) -> String {
        match &self.detail {
            Some(detail) => format!("[status: {}, {detail}]", self.status.as_str()),
            None => format!("[status: {}]", self.status.as_str()),
        }
    }
}

/// Why the task service refused a call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// No task has this id.
    #[error("unknown task {0}")]
    Unknown(String),
    /// The task is another session's.
    #[error("task {0} belongs to another session")]
    Foreign(String),
    /// The task id given is empty.
    #[error("invalid task_id: expected a non-empty string, got \"\"")]
    EmptyId,
    /// A task was started without a kind or a label.
    #[error("a background task needs a non-empty kind and label")]
    BadStart,
    /// The service is shutting down and starts no task.
    #[error("background tasks are shutting down")]
    ShuttingDown,
}

/// What `kill` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillResult {
    /// The task was running and was told to stop.
    Requested,
    /// The task had already ended, as this snapshot shows.
    AlreadyFinished(TaskSnapshot),
}

/// A line `task_output` shows before a task's status line, for the owner named (delegation:
/// its tree's budget, spent and left).
pub(crate) type OutputNote = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

struct Task {
    snapshot: TaskSnapshot,
    /// Someone has seen (or asked not to hear about) the result.
    reported: bool,
    /// `wait` calls in progress; a task settling under a waiter has been seen.
    waiters: usize,
    cancel: CancellationToken,
    settled: watch::Receiver<bool>,
    /// The notice posted for this task, while it may still be withdrawn: (owner, message id).
    notice: Option<(String, String)>,
    /// The owner has been told (or is being told, by the notice) how the task ended.
    ended: bool,
}

#[derive(Default)]
struct State {
    counters: HashMap<String, u64>,
    order: Vec<String>,
    tasks: HashMap<String, Task>,
}

/// Background tasks: starts them, tracks their status, hands out their results to their owner sessions, and stops them all at shutdown.
pub struct TaskService {
    state: Mutex<State>,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    notice: Mutex<Option<NoticeSink>>,
    records: Mutex<Option<RecordSink>>,
    note: Mutex<Option<OutputNote>>,
}

impl Default for TaskService {
    fn default() -> Self {
        Self::new(CancellationToken::new())
    }
}

impl TaskService {
    /// Tasks are cancelled when `shutdown` trips.
    pub fn new(shutdown: CancellationToken) -> Self {
        Self {
            state: Mutex::new(State::default()),
            tracker: TaskTracker::new(),
            shutdown,
            notice: Mutex::new(None),
            records: Mutex::new(None),
            note: Mutex::new(None),
        }
    }

    /// Where completion notices go.
    pub fn set_notice_sink(&self, sink: NoticeSink) {
        *lock(&self.notice) = Some(sink);
    }

    /// What `task_output` adds before the status line.
    pub(crate) fn set_output_note(&self, note: OutputNote) {
        *lock(&self.note) = Some(note);
    }

    /// The note for `owner`'s `task_output`, if any.
    pub(crate) fn output_note(&self, owner: &str) -> Option<String> {
        let note = lock(&self.note);
        note.as_ref().and_then(|note| note(owner))
    }

    /// Where task starts and settlements of owned tasks go.
    pub fn set_record_sink(&self, sink: RecordSink) {
        *lock(&self.records) = Some(sink);
    }

    fn record(&self, record: Record) {
        if let Some(sink) = lock(&self.records).as_ref() {
            sink(record);
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Starts `work` on its own tokio task; returns the new id at once.
    pub fn start(
        self: &Arc<Self>,
        kind: &str,
        label: &str,
        owner: Option<SessionId>,
        work: impl FnOnce(CancellationToken) -> BoxFuture<'static, TaskOutcome>,
    ) -> Result<TaskId, TaskError> {
        self.start_for(kind, label, owner, None, work)
    }

    /// [`TaskService::start`] for work on `subject` (reported with the start's [`Record`]).
    pub(crate) fn start_for(
        self: &Arc<Self>,
        kind: &str,
        label: &str,
        owner: Option<SessionId>,
        subject: Option<&str>,
        work: impl FnOnce(CancellationToken) -> BoxFuture<'static, TaskOutcome>,
    ) -> Result<TaskId, TaskError> {
        self.start_in(TaskStatus::Running, kind, label, owner, subject, work)
    }

    /// [`TaskService::start_for`] for work that first waits for a slot: the task shows as
    /// `queued` until the work calls [`TaskService::mark_running`].
    pub(crate) fn start_queued_for(
        self: &Arc<Self>,
        kind: &str,
        label: &str,
        owner: Option<SessionId>,
        subject: Option<&str>,
        work: impl FnOnce(CancellationToken) -> BoxFuture<'static, TaskOutcome>,
    ) -> Result<TaskId, TaskError> {
        self.start_in(TaskStatus::Queued, kind, label, owner, subject, work)
    }

    /// A queued task has its slot: it shows as `running` (unless it was stopped meanwhile).
    pub(crate) fn mark_running(&self, id: &str) {
        if let Some(task) = self.state().tasks.get_mut(id) {
            if task.snapshot.status == TaskStatus::Queued {
                task.snapshot.status = TaskStatus::Running;
            }
        }
    }

    fn start_in(
        self: &Arc<Self>,
        status: TaskStatus,
        kind: &str,
        label: &str,
        owner: Option<SessionId>,
        subject: Option<&str>,
        work: impl FnOnce(CancellationToken) -> BoxFuture<'static, TaskOutcome>,
    ) -> Result<TaskId, TaskError> {
        let (id, cancel, settled_tx) = self.register(kind, label, owner, subject, status)?;
        let future = work(cancel);
        let service = Arc::clone(self);
        let task_id = id.clone();
        self.tracker.spawn(async move {
            // A panicking task still settles, so nobody waits on it forever.
            let outcome = std::panic::AssertUnwindSafe(future)
                .catch_unwind()
                .await
                .unwrap_or_else(|_| TaskOutcome::failed("Error: the task panicked"));
            service.settle(&task_id, outcome);
            let _ = settled_tx.send(true);
        });
        Ok(id)
    }

    /// Records a task whose outcome is known before it would start (it settles, with its
    /// notice, before this returns).
    pub(crate) fn start_settled(
        &self,
        kind: &str,
        label: &str,
        owner: Option<SessionId>,
        subject: Option<&str>,
        outcome: TaskOutcome,
    ) -> Result<TaskId, TaskError> {
        let (id, _, settled_tx) =
            self.register(kind, label, owner, subject, TaskStatus::Running)?;
        self.settle(&id, outcome);
        let _ = settled_tx.send(true);
        Ok(id)
    }

    /// Allocates the id and records the task as running.
    fn register(
        &self,
        kind: &str,
        label: &str,
        owner: Option<SessionId>,
        subject: Option<&str>,
        status: TaskStatus,
    ) -> Result<(TaskId, CancellationToken, watch::Sender<bool>), TaskError> {
        if kind.is_empty() || label.is_empty() {
            return Err(TaskError::BadStart);
        }
        if self.shutdown.is_cancelled() {
            return Err(TaskError::ShuttingDown);
        }
        let cancel = self.shutdown.child_token();
        let (settled_tx, settled_rx) = watch::channel(false);
        let mut state = self.state();
        let counter = state.counters.entry(kind.to_owned()).or_insert(0);
        *counter += 1;
        let id = TaskId(format!("{kind}-{counter}"));
        state.order.push(id.0.clone());
        let started = owner.as_ref().map(|owner| Record::Started {
            owner: owner.to_string(),
            task: id.clone(),
            kind: kind.to_owned(),
            label: label.to_owned(),
            subject: subject.map(str::to_owned),
        });
        state.tasks.insert(
            id.0.clone(),
            Task {
                snapshot: TaskSnapshot {
                    id: id.clone(),
                    kind: kind.to_owned(),
                    label: label.to_owned(),
                    owner,
                    status,
                    detail: None,
                    output: None,
                },
                reported: false,
                waiters: 0,
                cancel: cancel.clone(),
                settled: settled_rx,
                notice: None,
                ended: false,
            },
        );
        drop(state);
        if let Some(started) = started {
            self.record(started);
        }
        Ok((id, cancel, settled_tx))
    }

    /// Records a task an earlier process started for `owner` and never finished, as
    /// `interrupted` (already reported: no notice). Ids already in use are left alone; later
    /// ids of the kind are numbered after it.
    pub(crate) fn restore_interrupted(
        &self,
        id: &str,
        kind: &str,
        label: &str,
        owner: &str,
        detail: String,
    ) {
        let Some(number) = id
            .strip_prefix(kind)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            return;
        };
        let mut state = self.state();
        if state.tasks.contains_key(id) {
            return;
        }
        let counter = state.counters.entry(kind.to_owned()).or_insert(0);
        *counter = (*counter).max(number);
        let (_, settled) = watch::channel(true);
        state.order.push(id.to_owned());
        state.tasks.insert(
            id.to_owned(),
            Task {
                snapshot: TaskSnapshot {
                    id: TaskId(id.to_owned()),
                    kind: kind.to_owned(),
                    label: label.to_owned(),
                    owner: Some(owner.into()),
                    status: TaskStatus::Interrupted,
                    detail: Some(detail),
                    output: None,
                },
                reported: true,
                waiters: 0,
                cancel: CancellationToken::new(),
                settled,
                notice: None,
                ended: true,
            },
        );
    }

    /// Asks every running task of `owner` to stop (its session closed); they settle as killed.
    pub fn cancel_owned(&self, owner: &str) {
        let mut state = self.state();
        for task in state.tasks.values_mut() {
            if task.snapshot.owner.as_deref() == Some(owner)
                && matches!(
                    task.snapshot.status,
                    TaskStatus::Running | TaskStatus::Queued
                )
            {
                task.cancel.cancel();
                task.snapshot.status = TaskStatus::Stopping;
            }
        }
    }

    /// Records the outcome (first settlement wins) and sends the notice if nobody saw it.
    fn settle(&self, id: &str, outcome: TaskOutcome) {
        let notice = {
            let mut state = self.state();
            let Some(task) = state.tasks.get_mut(id) else {
                return;
            };
            if task.snapshot.status.is_terminal() {
                return;
            }
            task.snapshot.status = outcome.status;
            task.snapshot.detail = outcome.detail;
            task.snapshot.output = outcome.output;
            if task.waiters > 0 {
                task.reported = true;
            }
            match (&task.snapshot.owner, task.reported) {
                (Some(owner), false) => {
                    task.reported = true;
                    let id = uuid::Uuid::new_v4().to_string();
                    task.notice = Some((owner.to_string(), id.clone()));
                    let s = &task.snapshot;
                    task.ended = true;
                    Some(Notice::Post {
                        owner: owner.to_string(),
                        id,
                        task: s.id.clone(),
                        status: s.status,
                        text: format!(
                            "background task {} ({}: {}) finished {}. Read its output with task_output.",
                            s.id,
                            s.kind,
                            s.label,
                            s.status_line()
                        ),
                    })
                }
                _ => None,
            }
        };
        if let Some(notice) = notice {
            self.tell(notice);
        }
    }

    fn tell(&self, notice: Notice) {
        if let Some(sink) = lock(&self.notice).as_ref() {
            sink(notice);
        }
    }

    /// A read of a settled task: it has been seen, so a notice still on its way is withdrawn.
    /// The owner learns from this read how the task ended, unless a notice still waiting
    /// for delivery tells it.
    fn seen(task: &mut Task) -> (Option<Notice>, Option<Record>) {
        if !task.snapshot.status.is_terminal() {
            return (None, None);
        }
        task.reported = true;
        let withdraw = task
            .notice
            .take()
            .map(|(owner, id)| Notice::Withdraw { owner, id });
        if withdraw.is_some() {
            task.ended = false;
        }
        let status = task.snapshot.status;
        (withdraw, Self::ended(task, status))
    }

    /// The [`Record::Ended`] of a task whose owner has not been told yet.
    fn ended(task: &mut Task, status: TaskStatus) -> Option<Record> {
        if task.ended {
            return None;
        }
        task.ended = true;
        let owner = task.snapshot.owner.as_ref()?;
        Some(Record::Ended {
            owner: owner.to_string(),
            task: task.snapshot.id.clone(),
            status,
        })
    }

    /// Tells what a read found.
    fn tell_seen(&self, (withdraw, ended): (Option<Notice>, Option<Record>)) {
        if let Some(withdraw) = withdraw {
            self.tell(withdraw);
        }
        if let Some(ended) = ended {
            self.record(ended);
        }
    }

    fn fenced<'a>(state: &'a mut State, id: &str, caller: &str) -> Result<&'a mut Task, TaskError> {
        if id.is_empty() {
            return Err(TaskError::EmptyId);
        }
        let task = state
            .tasks
            .get_mut(id)
            .ok_or_else(|| TaskError::Unknown(id.to_owned()))?;
        match &task.snapshot.owner {
            Some(owner) if owner.as_str() != caller => Err(TaskError::Foreign(id.to_owned())),
            _ => Ok(task),
        }
    }

    /// A task's status, without counting as having seen its result (and without copying it).
    pub(crate) fn status(&self, id: &str, caller: &str) -> Result<TaskStatus, TaskError> {
        let mut state = self.state();
        Ok(Self::fenced(&mut state, id, caller)?.snapshot.status)
    }

    /// Looks at a task without counting as having seen its result.
    pub fn peek(&self, id: &str, caller: &str) -> Result<TaskSnapshot, TaskError> {
        let mut state = self.state();
        Ok(Self::fenced(&mut state, id, caller)?.snapshot.clone())
    }

    /// Reads a task; a read of a settled task counts as having seen its result.
    pub fn read(&self, id: &str, caller: &str) -> Result<TaskSnapshot, TaskError> {
        let (snapshot, withdraw) = {
            let mut state = self.state();
            let task = Self::fenced(&mut state, id, caller)?;
            (task.snapshot.clone(), Self::seen(task))
        };
        self.tell_seen(withdraw);
        Ok(snapshot)
    }

    /// Waits until the task settles, `timeout` passes or `cancel` trips; then reads it.
    pub async fn wait(
        &self,
        id: &str,
        timeout: Duration,
        caller: &str,
        cancel: &CancellationToken,
    ) -> Result<TaskSnapshot, TaskError> {
        let mut settled = {
            let mut state = self.state();
            let task = Self::fenced(&mut state, id, caller)?;
            task.waiters += 1;
            task.settled.clone()
        };
        tokio::select! {
            _ = settled.wait_for(|done| *done) => {}
            _ = tokio::time::sleep(timeout) => {}
            _ = cancel.cancelled() => {}
        }
        let (snapshot, withdraw) = {
            let mut state = self.state();
            let task = Self::fenced(&mut state, id, caller)?;
            task.waiters -= 1;
            (task.snapshot.clone(), Self::seen(task))
        };
        self.tell_seen(withdraw);
        Ok(snapshot)
    }

    /// Waits until the task settles without reading it: unlike `wait`, this does not count
    /// as seeing the result, so a completion notice is still sent.
    pub async fn until_settled(&self, id: &str) {
        let settled = self.state().tasks.get(id).map(|task| task.settled.clone());
        if let Some(mut settled) = settled {
            let _ = settled.wait_for(|done| *done).await;
        }
    }

    /// Asks a running task to stop; it settles (as killed) once its work has stopped.
    pub fn kill(
        &self,
        id: &str,
        caller: &str,
        reason: Option<&str>,
    ) -> Result<KillResult, TaskError> {
        let (result, ended) = {
            let mut state = self.state();
            let task = Self::fenced(&mut state, id, caller)?;
            task.reported = true;
            if task.snapshot.status.is_terminal() {
                let status = task.snapshot.status;
                let ended = Self::ended(task, status);
                (KillResult::AlreadyFinished(task.snapshot.clone()), ended)
            } else {
                tracing::debug!(
                    task = id,
                    reason = reason.unwrap_or("none"),
                    "killing a background task"
                );
                task.cancel.cancel();
                task.snapshot.status = TaskStatus::Stopping;
                (KillResult::Requested, Self::ended(task, TaskStatus::Killed))
            }
        };
        if let Some(ended) = ended {
            self.record(ended);
        }
        Ok(result)
    }

    /// The caller's tasks, oldest first.
    pub fn list(&self, caller: &str) -> Vec<TaskSnapshot> {
        let state = self.state();
        state
            .order
            .iter()
            .filter_map(|id| state.tasks.get(id))
            .filter(|t| t.snapshot.owner.as_deref().is_none_or(|o| o == caller))
            .map(|t| t.snapshot.clone())
            .collect()
    }

    /// Cancels every task and waits until all have settled (shutdown).
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

//! One background activation of a child, run as one task: begin (start or resume the child)
//! -> settle (its result becomes the task's outcome) -> dispose -> unlock -> release. The one
//! copy, for continuable and one-shot children alike.
//!
//! A continuable child is keyed by its id in [`Activations`]: the association is installed
//! synchronously before anything awaits and removed before the task settles, so a caller that
//! waited for the task and then sends a message always takes the cold path. An advisory lock
//! on the child's session file, held for the activation, keeps two kin processes from running
//! the same child at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::child_costs::ChildCosts;
use super::provider::Run;
use super::queue::{Admission, RunQueue};
use super::DelegationError;
use crate::session::{SessionLock, SessionStore, StoreError};
use crate::sync::lock;
use crate::tasks::{TaskId, TaskOutcome, TaskService};

/// The task kind of every delegation task.
pub(super) const TASK_KIND: &str = "subagent";

/// A child's advisory lock, held for one activation (released on drop).
pub(super) type ChildLock = SessionLock;

/// What an activation's task runs first: starts or resumes the child (and takes its lock).
pub(super) type Begin = Box<
    dyn FnOnce(
            CancellationToken,
        ) -> BoxFuture<'static, Result<(Run, Option<ChildLock>), DelegationError>>
        + Send,
>;

/// The running activation of one continuable child.
#[derive(Default)]
pub(super) struct Activation {
    /// Set in the frame that started the task.
    pub(super) task_id: OnceLock<TaskId>,
    /// Set once the provider published the child.
    run: Mutex<Option<Run>>,
    /// For a continuable start: the child's kind (its provider) and label, so it can be
    /// listed while it waits for a slot, before it exists in the store.
    pub(super) pending: OnceLock<(String, String)>,
}

impl Activation {
    /// The in-process child agent, once the provider published one.
    pub(super) fn local_agent(&self) -> Option<Arc<crate::agent::Agent>> {
        lock(&self.run).as_ref()?.local_agent.clone()
    }

    /// Delivers `content` into the running child (see [`Run::steer`]); `None` before the
    /// provider published the run.
    pub(super) fn steer(
        &self,
        content: Vec<crate::session::UserPart>,
    ) -> Option<BoxFuture<'static, Result<(), DelegationError>>> {
        lock(&self.run).as_ref().map(|run| run.steer(content))
    }
}

/// Continuable child id -> its running activation, in this process; and the cap they run
/// under.
pub(super) struct Activations {
    map: Mutex<HashMap<String, Arc<Activation>>>,
    queue: RunQueue,
    /// Where a settled activation's cost waits for its task's `task/end`.
    costs: Arc<ChildCosts>,
}

impl Activations {
    pub(super) fn new(queue: RunQueue, costs: Arc<ChildCosts>) -> Self {
        Self {
            map: Mutex::default(),
            queue,
            costs,
        }
    }

    /// The most background activations of one tree that run at once.
    pub(super) fn cap(&self) -> usize {
        self.queue.per_tree()
    }

    pub(super) fn get(&self, child_id: &str) -> Option<Arc<Activation>> {
        lock(&self.map).get(child_id).cloned()
    }

    /// Every continuable child with an activation in this process.
    pub(super) fn all(&self) -> Vec<(String, Arc<Activation>)> {
        lock(&self.map)
            .iter()
            .map(|(id, activation)| (id.clone(), activation.clone()))
            .collect()
    }

    /// Removes the association if it still is this activation.
    fn release(&self, child_id: &str, activation: &Arc<Activation>) {
        let mut map = lock(&self.map);
        if map
            .get(child_id)
            .is_some_and(|current| Arc::ptr_eq(current, activation))
        {
            map.remove(child_id);
        }
    }

    /// Starts one activation as a task of `owner`, in the tree of `root` (queued while the
    /// tree or the process runs its cap). With `child` (a continuable child's id), the
    /// association is installed first and removed before the task settles.
    pub(super) fn start(
        self: &Arc<Self>,
        tasks: &Arc<TaskService>,
        root: &str,
        child: Option<&str>,
        label: &str,
        owner: &str,
        begin: Begin,
    ) -> Result<TaskId, DelegationError> {
        let activation = Arc::new(Activation::default());
        let admission = self.queue.admit(root);
        let queued = matches!(admission, Admission::Queued(_));
        // The task's id reaches its work once known (the work may run before `start` returns).
        let (id_tx, id_rx) = tokio::sync::oneshot::channel::<TaskId>();
        let service = tasks.clone();
        if let Some(child) = child {
            lock(&self.map).insert(child.to_owned(), activation.clone());
        }
        let map = Arc::clone(self);
        let this = activation.clone();
        let key = child.map(str::to_owned);
        let work = move |cancel: CancellationToken| {
            async move {
                let _slot = match admission {
                    Admission::Now(slot) => Some(slot),
                    Admission::Queued(waiting) => {
                        // Killed while queued: it still begins, with its token cancelled, so a
                        // continuable child whose id was given out reaches the store.
                        let slot = tokio::select! {
                            biased;
                            _ = cancel.cancelled() => None,
                            slot = waiting => slot.ok(),
                        };
                        if let Ok(id) = id_rx.await {
                            service.mark_running(id.as_str());
                        }
                        slot
                    }
                };
                let outcome = match begin(cancel.clone()).await {
                    Ok((run, held)) => {
                        *lock(&this.run) = Some(run.clone());
                        let outcome = settle(&run).await;
                        drop(held);
                        if let Some(child) = &run.local_agent {
                            let task = this.task_id.get().map(TaskId::as_str);
                            map.costs.settle(&child.id, task);
                        }
                        outcome
                    }
                    Err(_) if cancel.is_cancelled() => TaskOutcome::killed(),
                    Err(error) => TaskOutcome::failed(error.detail()),
                };
                if let Some(key) = &key {
                    map.release(key, &this);
                }
                outcome
            }
            .boxed()
        };
        let owner = Some(owner.into());
        let started = if queued {
            tasks.start_queued_for(TASK_KIND, label, owner, child, work)
        } else {
            tasks.start_for(TASK_KIND, label, owner, child, work)
        };
        match started {
            Ok(task_id) => {
                let _ = activation.task_id.set(task_id.clone());
                let _ = id_tx.send(task_id.clone());
                Ok(task_id)
            }
            Err(error) => {
                if let Some(child) = child {
                    self.release(child, &activation);
                }
                Err(error.into())
            }
        }
    }
}

/// The task outcome of a run: its result, after the run is disposed.
async fn settle(run: &Run) -> TaskOutcome {
    super::outcome::task_outcome(run.settle().await)
}

/// Takes the child's session lock for one activation (see `session::SessionLock`). Another
/// kin process holding it runs the child now.
pub(super) fn lock_child(
    store: &SessionStore,
    child_id: &str,
) -> Result<ChildLock, DelegationError> {
    match store.lock(child_id) {
        Ok(lock) => Ok(lock),
        Err(StoreError::Locked { .. }) => {
            Err(DelegationError::ActiveElsewhere(child_id.to_owned()))
        }
        Err(error) => {
            tracing::warn!(%error, child = child_id, "could not lock a child's session file");
            Err(DelegationError::Unavailable(child_id.to_owned()))
        }
    }
}

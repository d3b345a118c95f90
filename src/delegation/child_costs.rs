//! Where a delegated child's cost goes, in one place. A turn's cost reaches the host's
//! `TurnEnded` event; for a child it goes on from there:
//! - a foreground child's goes to its live parent at once (inside the parent's running turn,
//!   which waits for it);
//! - a background activation's is held while it runs, moved to its task when it settles, and
//!   taken by the task's `task/end` (`spending.rs`), which counts it for the turn that started
//!   the task, not for the one it settles in.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;

use super::provider::Run;
use super::DelegationError;
use crate::agent::Agent;
use crate::sync::lock;

/// The held costs of running background activations and of settled tasks not yet ended.
#[derive(Default)]
pub(crate) struct ChildCosts {
    /// Child session id -> what its background activation has cost so far.
    held: Mutex<HashMap<String, f64>>,
    /// Task id -> what its settled activation cost, until its `task/end` takes it.
    settled: Mutex<HashMap<String, f64>>,
}

impl ChildCosts {
    /// Holds the cost of child `id`'s turns for its task from now on. Called before the
    /// activation's turn starts (a quick turn may end before its start returns).
    pub(super) fn hold(&self, id: &str) {
        lock(&self.held).insert(id.to_owned(), 0.0);
    }

    /// `start`, for child `id` whose cost is held: a start that fails holds nothing.
    pub(super) fn unless_failed(
        self: &Arc<Self>,
        id: String,
        start: BoxFuture<'static, Result<Run, DelegationError>>,
    ) -> BoxFuture<'static, Result<Run, DelegationError>> {
        let costs = self.clone();
        async move {
            let started = start.await;
            if started.is_err() {
                lock(&costs.held).remove(&id);
            }
            started
        }
        .boxed()
    }

    /// A turn of session `id` cost `cost`: held for its task, else added to its live parent.
    pub(super) fn turn_ended(
        &self,
        id: &str,
        cost: f64,
        parent: impl FnOnce() -> Option<Arc<Agent>>,
    ) {
        if cost <= 0.0 {
            return;
        }
        if let Some(held) = lock(&self.held).get_mut(id) {
            *held += cost;
            return;
        }
        if let Some(parent) = parent() {
            parent.context.add_cost(cost);
        }
    }

    /// Child `id`'s activation settled as task `task` (if it has one): its held cost waits
    /// for the task's `task/end`.
    pub(super) fn settle(&self, id: &str, task: Option<&str>) {
        let held = lock(&self.held).remove(id);
        if let (Some(cost), Some(task)) = (held, task) {
            if cost > 0.0 {
                lock(&self.settled).insert(task.to_owned(), cost);
            }
        }
    }

    /// What the settled activation of `task` cost, taken once (for its `task/end`).
    pub(super) fn take(&self, task: &str) -> Option<f64> {
        lock(&self.settled).remove(task)
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// Runs `turn_ended` for `id`; whether it went to the parent.
    fn to_parent(costs: &ChildCosts, id: &str, cost: f64) -> bool {
        let asked = Cell::new(false);
        costs.turn_ended(id, cost, || {
            asked.set(true);
            None
        });
        asked.get()
    }

    #[test]
    fn a_background_activations_cost_waits_for_its_task_end() {
        let costs = ChildCosts::default();
        costs.hold("kid");
        assert!(!to_parent(&costs, "kid", 2.0));
        assert!(!to_parent(&costs, "kid", 1.5));
        costs.settle("kid", Some("subagent-1"));
        assert_eq!(costs.take("subagent-1"), Some(3.5));
        assert_eq!(costs.take("subagent-1"), None);
        // Settled, the child holds nothing more: a later turn's cost goes to its parent.
        assert!(to_parent(&costs, "kid", 1.0));
        // A free turn goes nowhere; a foreground child's goes to its parent.
        assert!(!to_parent(&costs, "other", 0.0));
        assert!(to_parent(&costs, "other", 1.0));
        // An activation that cost nothing leaves nothing for its task.
        costs.hold("idle");
        costs.settle("idle", Some("subagent-2"));
        assert_eq!(costs.take("subagent-2"), None);
    }

    #[tokio::test]
    async fn a_failed_start_holds_nothing() {
        let costs = Arc::new(ChildCosts::default());
        costs.hold("kid");
        let failed = async { Err(DelegationError::AbortedBeforePublication) }.boxed();
        assert!(costs.unless_failed("kid".into(), failed).await.is_err());
        assert!(to_parent(&costs, "kid", 1.0));
    }
}

//! `list_agents`: a session's continuable children, from the session index, with what runs
//! or waits in this process.

use super::{ChildSummary, Delegation};
use crate::tasks::TaskStatus;

impl Delegation {
    /// `list_agents`: the continuable children of `caller` in the store, oldest first, with
    /// the task of any activation running now. Read from the session index; only a child
    /// indexed by an older kin (no child record) has its file read. Ids that never reached
    /// the store are not listed.
    pub fn list(&self, caller: &str) -> Vec<ChildSummary> {
        let sessions = match self.store.list_children(caller) {
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
                let task = self.running_task(&session.id);
                let queued = task.as_ref().is_some_and(|task| {
                    self.tasks
                        .peek(task, caller)
                        .is_ok_and(|t| t.status == TaskStatus::Queued)
                });
                let summary = ChildSummary {
                    task,
                    queued,
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
        // Children still queued for their first activation are not stored yet: listed last.
        for (id, activation) in self.activations.all() {
            let (Some((kind, label)), Some(task)) =
                (activation.pending.get(), activation.task_id.get())
            else {
                continue;
            };
            let waiting = self
                .tasks
                .peek(task, caller)
                .is_ok_and(|t| t.status == TaskStatus::Queued);
            if waiting && !found.iter().any(|(_, child)| child.id == id) {
                let summary = ChildSummary {
                    id,
                    description: Some(label.clone()),
                    kind: kind.clone(),
                    provider: None,
                    model: None,
                    task: Some(task.clone()),
                    queued: true,
                    last_stop: None,
                    turns: 0,
                };
                found.push((u64::MAX, summary));
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
        found.into_iter().map(|(_, child)| child).collect()
    }
}

//! How delegation hears from the task service: a task that settled unseen leaves its owner
//! a notice for its next model call (with the task's `task/end`), each task record goes to
//! its owner's log, and `task_output` notes the tree's budget.

use std::sync::Arc;

use serde_json::json;

use super::Delegation;
use crate::agent::UserMessage;
use crate::session::UserPart;
use crate::tasks::Notice;

impl Delegation {
    /// Installs the task service's sinks (once, as the service is made).
    pub(super) fn listen_to_tasks(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        self.tasks.set_notice_sink(Box::new(move |notice| {
            if let Some(delegation) = weak.upgrade() {
                delegation.deliver(notice);
            }
        }));
        let weak = Arc::downgrade(self);
        self.tasks
            .set_output_note(Box::new(move |owner| weak.upgrade()?.budget_summary(owner)));
        let weak = Arc::downgrade(self);
        self.tasks.set_record_sink(Box::new(move |record| {
            if let Some(delegation) = weak.upgrade() {
                let (owner, body) = delegation.record_event(record);
                if let Some(agent) = delegation.live(&owner) {
                    agent.record(body);
                }
            }
        }));
    }

    /// Leaves the owner of a task that settled unseen its notice (with the task's `task/end`),
    /// or takes one back.
    fn deliver(&self, notice: Notice) {
        match notice {
            Notice::Post {
                owner,
                id,
                text,
                task,
                status,
            } => {
                if let Some(agent) = self.live(&owner) {
                    let message = UserMessage {
                        content: vec![UserPart::Text { text }],
                        source: json!({"kind": "plugin", "plugin": "tool-tasks"}),
                        role: "user".into(),
                        id,
                    };
                    agent.inject(message, Some(self.task_end(&owner, &task, status)));
                }
            }
            Notice::Withdraw { owner, id } => {
                if let Some(agent) = self.live(&owner) {
                    agent.withdraw(&id);
                }
            }
        }
    }
}

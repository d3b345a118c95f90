//! What a delegation tree has spent, as the service sees it: the root's own model calls (from
//! its live agent), its descendants' (counted into the tree as they run) and, after a restart
//! or a reload, what the logs of the tree's sessions say was spent before. Read by the
//! budget check, `list_agents`, `task_output` and the root's `usage_update`.

use std::sync::Arc;

use super::budget::TreeBudget;
use super::{Delegation, DelegationError};
use crate::agent::host::{AgentHost, HostEvent, Subscription};
use crate::agent::Agent;
use crate::session::{Event, EventBody, EventKind, SessionStore};
use crate::tasks::{Record, TaskId, TaskStatus};

impl Delegation {
    /// Follows the host's turn ends: each turn's cost goes where `child_costs.rs` says.
    pub(super) fn follow_turn_costs(self: &Arc<Self>, host: &AgentHost) -> Subscription {
        let weak = Arc::downgrade(self);
        host.events().subscribe(move |event| {
            let HostEvent::TurnEnded { agent, cost, .. } = event else {
                return;
            };
            let Some(delegation) = weak.upgrade() else {
                return;
            };
            let parent = || {
                let id = agent.header().parent_session.clone()?;
                delegation.live(&id)
            };
            delegation.child_costs.turn_ended(&agent.id, *cost, parent);
        })
    }

    /// The root session of the live session `caller` (itself when it is not live).
    fn root_id(&self, caller: &str) -> String {
        match self.live(caller) {
            Some(agent) => self.root_of(&agent),
            None => caller.to_owned(),
        }
    }

    /// What `root`'s tree has spent against its budget (`None`: no tree budget is set).
    pub(crate) fn tree_budget(&self, root: &str) -> Option<TreeBudget> {
        self.budgets.figures(root, self.own_spend(root))
    }

    /// What `caller`'s tree has spent of its budget, if it has one (for `list_agents` and
    /// `task_output`).
    pub(crate) fn budget_summary(&self, caller: &str) -> Option<String> {
        self.tree_budget(&self.root_id(caller))
            .map(|tree| tree.summary())
    }

    /// The `_meta["kin.budget"]` of `session`'s `usage_update`: only for a root session whose
    /// tree has a budget.
    pub(crate) fn budget_meta(&self, session: &str) -> Option<serde_json::Value> {
        let agent = self.live(session)?;
        if agent.header().parent_session.is_some() {
            return None;
        }
        self.tree_budget(session).map(|tree| tree.meta())
    }

    /// The `task/end` of `owner`'s task: with what its background activation cost, which is
    /// added to the owner's cost now, but outside its running turn (the turn that started the
    /// task is the one it counts for).
    pub(super) fn task_end(&self, owner: &str, task: &TaskId, status: TaskStatus) -> EventBody {
        let mut body = super::records::end_of(task, status);
        if let EventBody::TaskEnd(end) = &mut body {
            end.cost = self.child_costs.take(task.as_str());
            if let (Some(cost), Some(agent)) = (end.cost, self.live(owner)) {
                agent.context.add_task_cost(cost);
            }
        }
        body
    }

    /// The owner and the log event of a task record, a `task/end` with its cost.
    pub(super) fn record_event(&self, record: Record) -> (String, EventBody) {
        match record {
            Record::Ended {
                owner,
                task,
                status,
            } => {
                let body = self.task_end(&owner, &task, status);
                (owner, body)
            }
            started => super::records::event_of(started),
        }
    }

    /// Whether any budget, of a tree or of a child, is configured.
    pub(super) fn has_budget(&self) -> bool {
        let settings = &self.settings;
        self.budgets.limited()
            || settings.child_budget_tokens.is_some()
            || settings.child_budget_cost.is_some()
    }

    /// Refuses a start or continuation under `parent` once its tree has spent its budget.
    pub(super) fn check_budget(&self, parent: &Agent) -> Result<(), DelegationError> {
        let root = self.root_of(parent);
        self.budgets.check(&root, self.own_spend(&root))
    }

    /// What the live root session `root` spent on its own model calls in this process.
    pub(super) fn own_spend(&self, root: &str) -> (u64, f64) {
        self.live(root).map_or((0, 0.0), |agent| {
            let spent = agent.watch.spent();
            (spent.tokens(), spent.cost())
        })
    }

    /// On reopening a root session: its tree's spending from the logs (the root's and every
    /// descendant's `turn/end` and `compaction/end` tokens, estimates included; the cost the root's turns recorded, which includes
    /// the children that settled in them), so a tree over its budget stays refused.
    pub(super) fn restore_spend(&self, root: &Agent) {
        if root.header().parent_session.is_some() || !self.budgets.limited() {
            return;
        }
        let (mut tokens, cost) = root.with_events(logged);
        let mut pending = vec![root.id.clone()];
        while let Some(id) = pending.pop() {
            let Ok(children) = self.store.list_children(&id) else {
                continue;
            };
            for child in children {
                tokens = tokens.saturating_add(logged_tokens(&self.store, &child.id));
                pending.push(child.id);
            }
        }
        self.budgets.seed(&root.id, tokens, cost);
    }
}

impl Delegation {
    /// The cost an ACP child reported in its last ended activation, from its record's last
    /// `turn/end` (`None`: it reported none, or the record cannot be read).
    pub(super) fn last_reported_cost(&self, id: &str) -> Option<f64> {
        let mut last = None;
        let read = self
            .store
            .read_events_of(id, &[EventKind::TurnEnd], |event| {
                if let EventBody::TurnEnd(end) = &event.body {
                    last = end.usage.as_ref().and_then(|usage| usage.cost);
                }
            });
        if let Err(error) = read {
            tracing::warn!(%error, child = id, "could not read an ACP child's reported cost");
        }
        last
    }
}

/// The tokens and cost of a session's own `turn/end`s, and its compactions' tokens.
fn logged(events: &[Event]) -> (u64, f64) {
    let mut spent = (0u64, 0.0);
    for event in events {
        if let EventBody::TurnEnd(end) = &event.body {
            if let Some(usage) = &end.usage {
                spent.0 = spent.0.saturating_add(usage.tokens());
                spent.1 += usage.cost.unwrap_or(0.0);
            }
        }
        if let EventBody::CompactionEnd(end) = &event.body {
            spent.0 = spent.0.saturating_add(end.tokens());
        }
    }
    spent
}

/// The tokens of stored session `id`'s `turn/end`s and `compaction/end`s, read as a stream
/// (0 if unreadable).
fn logged_tokens(store: &SessionStore, id: &str) -> u64 {
    let mut tokens = 0u64;
    // Only `turn/end` and `compaction/end` lines are parsed: the rest cannot hold usage.
    let kinds = [EventKind::TurnEnd, EventKind::CompactionEnd];
    let read = store.read_events_of(id, &kinds, |event| match &event.body {
        EventBody::TurnEnd(end) => {
            let used = end.usage.as_ref().map_or(0, |usage| usage.tokens());
            tokens = tokens.saturating_add(used);
        }
        EventBody::CompactionEnd(end) => tokens = tokens.saturating_add(end.tokens()),
        _ => {}
    });
    if let Err(error) = read {
        tracing::warn!(%error, session = id, "could not read a child's spending");
    }
    tokens
}

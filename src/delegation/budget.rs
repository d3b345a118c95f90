//! Token and cost budgets: per child activation (`[delegation] child_budget_tokens`,
//! `child_budget_cost`, or the call's `budget_tokens`) and per delegation tree
//! (`budget_tokens`, `budget_cost`: what a root session and all its descendants spent).
//! Children count their own model calls (`agent::Watch`) into their tree's [`Spend`]; the
//! root's own calls are read from its live agent, and what earlier processes spent is seeded
//! from the logs when the root is opened again. A child at its budget ends `budget_exhausted`
//! after that step, and a tree at its budget refuses the next start or continuation.
//!
//! A child's own token budget is set aside in its tree when it starts ([`Reservation`]) and
//! counts as spent until the child spends it or ends, so siblings started side by side cannot
//! both be admitted on the last of a tree's tokens. A child without a token budget of its own
//! sets nothing aside (what it will spend is unknown); cost budgets are checked on what was
//! spent only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use futures::FutureExt;

use serde_json::{json, Value};

use super::DelegationError;
use crate::agent::{Budget, Spend, Watch};
use crate::config::DelegationSettings;
use crate::sync::lock;

/// The spending of every tree in this process, against the configured budgets.
pub(super) struct Budgets {
    tree_tokens: Option<u64>,
    tree_cost: Option<f64>,
    child_tokens: Option<u64>,
    child_cost: Option<f64>,
    /// Per root session: what its descendants spent (and what the logs say was spent before).
    trees: Mutex<HashMap<String, Arc<Spend>>>,
    /// Per root session: the tokens set aside for its children starting or running now.
    reserved: Mutex<HashMap<String, Vec<Weak<Reservation>>>>,
}

/// Tokens set aside in a tree for one child activation, until it spends them or ends.
#[derive(Debug)]
pub(super) struct Reservation {
    tokens: u64,
    /// The child's spending clock and what it read when the activation started.
    spent_by: OnceLock<(Arc<Watch>, u64)>,
    released: AtomicBool,
}

impl Reservation {
    /// What is still set aside: the tokens less what the child spent since it started.
    fn outstanding(&self) -> u64 {
        if self.released.load(Ordering::Acquire) {
            return 0;
        }
        match self.spent_by.get() {
            Some((watch, before)) => {
                let spent = watch.spent().tokens().saturating_sub(*before);
                self.tokens.saturating_sub(spent)
            }
            None => self.tokens,
        }
    }

    /// Ties the reservation to `run`: what its child spends is taken from it, and it is
    /// released once the run has a result.
    pub(super) fn hold_for(self: Arc<Self>, run: super::Run) -> super::Run {
        if let Some(watch) = run.progress() {
            let before = watch.spent().tokens();
            let _ = self.spent_by.set((watch, before));
        }
        let inner = run.clone();
        let result = async move {
            let result = inner.result().await;
            self.released.store(true, Ordering::Release);
            result
        };
        run.with_result(result.boxed().shared())
    }
}

/// What one tree has spent, against its budget.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TreeBudget {
    pub(crate) tokens: u64,
    pub(crate) cost: f64,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) max_cost: Option<f64>,
}

impl TreeBudget {
    /// The refusal of a tree that has reached its budget.
    fn refusal(&self) -> Option<DelegationError> {
        if let Some(max) = self.max_tokens.filter(|max| self.tokens >= *max) {
            return Some(DelegationError::BudgetSpent(format!(
                "the delegation budget_tokens of {max} is spent ({} tokens used by this \
                 session and its subagents)",
                self.tokens
            )));
        }
        if let Some(max) = self.max_cost.filter(|max| self.cost >= *max) {
            return Some(DelegationError::BudgetSpent(format!(
                "the delegation budget_cost of {max} is spent ({:.4} used by this session and \
                 its subagents)",
                self.cost
            )));
        }
        None
    }

    /// `budget: ...`, the line `list_agents` and `task_output` end with.
    pub(crate) fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(max) = self.max_tokens {
            parts.push(format!(
                "{} of {max} tokens spent, {} left",
                self.tokens,
                max.saturating_sub(self.tokens)
            ));
        }
        if let Some(max) = self.max_cost {
            parts.push(format!(
                "{:.4} of {max} cost spent, {:.4} left",
                self.cost,
                (max - self.cost).max(0.0)
            ));
        }
        format!("budget: {}", parts.join("; "))
    }

    /// The `_meta["kin.budget"]` of the root's `usage_update`: spent, limit and remaining of
    /// each budget set.
    pub(crate) fn meta(&self) -> Value {
        let mut meta = serde_json::Map::new();
        if let Some(max) = self.max_tokens {
            meta.insert(
                "tokens".into(),
                json!({"spent": self.tokens, "limit": max, "remaining": max.saturating_sub(self.tokens)}),
            );
        }
        if let Some(max) = self.max_cost {
            meta.insert(
                "cost".into(),
                json!({"spent": self.cost, "limit": max, "remaining": (max - self.cost).max(0.0)}),
            );
        }
        Value::Object(meta)
    }
}

/// A refusal that counted `outstanding` tokens set aside for running siblings says so.
fn set_aside(refused: DelegationError, outstanding: u64) -> DelegationError {
    match refused {
        DelegationError::BudgetSpent(text) if outstanding > 0 => {
            DelegationError::BudgetSpent(match text.strip_suffix(')') {
                Some(head) => {
                    format!("{head}, {outstanding} of them set aside for subagents still running)")
                }
                None => text,
            })
        }
        other => other,
    }
}

/// What `list_agents` says of an ACP child's spending when a budget is configured: the cost
/// its last activation reported against the child cost budget `max`, or that it cannot be
/// budgeted (it reported none).
pub(super) fn acp_child_line(reported: Option<f64>, max: Option<f64>) -> String {
    match (reported, max) {
        (None, _) => "budget: counts only the cost it reports (none reported: not budgeted)".into(),
        (Some(spent), Some(max)) => format!(
            "budget: {spent:.4} of {max} cost spent in its last activation, {:.4} left",
            (max - spent).max(0.0)
        ),
        (Some(spent), None) => {
            format!("budget: {spent:.4} cost spent in its last activation (no child cost budget)")
        }
    }
}

impl Budgets {
    pub(super) fn new(settings: &DelegationSettings) -> Self {
        Self {
            tree_tokens: settings.budget_tokens,
            tree_cost: settings.budget_cost,
            child_tokens: settings.child_budget_tokens,
            child_cost: settings.child_budget_cost,
            trees: Mutex::default(),
            reserved: Mutex::default(),
        }
    }

    fn tree(&self, root: &str) -> Arc<Spend> {
        lock(&self.trees)
            .entry(root.to_owned())
            .or_default()
            .clone()
    }

    /// Whether a tree budget is configured.
    pub(super) fn limited(&self) -> bool {
        self.tree_tokens.is_some() || self.tree_cost.is_some()
    }

    /// What `root`'s tree spent: its descendants' calls plus `own`, the root's own calls in
    /// this process. `None` when no tree budget is configured.
    pub(super) fn figures(&self, root: &str, own: (u64, f64)) -> Option<TreeBudget> {
        if !self.limited() {
            return None;
        }
        let spent = self.tree(root);
        Some(TreeBudget {
            tokens: spent.tokens().saturating_add(own.0),
            cost: spent.cost() + own.1,
            max_tokens: self.tree_tokens,
            max_cost: self.tree_cost,
        })
    }

    /// Refuses a start or continuation in a tree that has spent its budget.
    pub(super) fn check(&self, root: &str, own: (u64, f64)) -> Result<(), DelegationError> {
        match self.figures(root, own).and_then(|tree| tree.refusal()) {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// Admits a child activation in `root`'s tree, what its siblings set aside counted as
    /// spent, and sets aside its own token budget (`tokens`, else the configured child's),
    /// at most what is left. Refuses as [`Budgets::check`] does; `None` sets nothing aside.
    pub(super) fn admit(
        &self,
        root: &str,
        own: (u64, f64),
        tokens: Option<u64>,
    ) -> Result<Option<Arc<Reservation>>, DelegationError> {
        let Some(mut tree) = self.figures(root, own) else {
            return Ok(None);
        };
        let mut reserved = lock(&self.reserved);
        let held = reserved.entry(root.to_owned()).or_default();
        held.retain(|r| r.upgrade().is_some_and(|r| r.outstanding() > 0));
        let outstanding: u64 = held
            .iter()
            .filter_map(Weak::upgrade)
            .map(|r| r.outstanding())
            .sum();
        tree.tokens = tree.tokens.saturating_add(outstanding);
        if let Some(refused) = tree.refusal() {
            return Err(set_aside(refused, outstanding));
        }
        let left = tree
            .max_tokens
            .map_or(u64::MAX, |max| max.saturating_sub(tree.tokens));
        let Some(tokens) = tokens.or(self.child_tokens).map(|t| t.min(left)) else {
            return Ok(None);
        };
        let reservation = Arc::new(Reservation {
            tokens,
            spent_by: OnceLock::new(),
            released: AtomicBool::new(false),
        });
        held.push(Arc::downgrade(&reservation));
        Ok(Some(reservation))
    }

    /// Raises `root`'s tree to what its logs say was spent (never lowers it: what this
    /// process counted is already in the logs it wrote).
    pub(super) fn seed(&self, root: &str, tokens: u64, cost: f64) {
        self.tree(root).raise_to(tokens, cost);
    }

    /// The budget of one child activation in `root`'s tree; `tokens` is the call's own.
    pub(super) fn child(&self, root: &str, tokens: Option<u64>) -> Budget {
        Budget {
            tokens: tokens.or(self.child_tokens),
            cost: self.child_cost,
            tree: Some(self.tree(root)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(max: u64) -> Budgets {
        Budgets::new(&DelegationSettings {
            budget_tokens: Some(max),
            ..Default::default()
        })
    }

    #[test]
    fn a_tree_at_its_budget_refuses_and_says_what_was_spent() {
        let budgets = tokens(100);
        assert!(budgets.check("root", (0, 0.0)).is_ok());
        let child = budgets.child("root", None);
        child.tree.as_ref().unwrap().add(120, 0.0);
        let error = budgets.check("root", (0, 0.0)).unwrap_err().to_string();
        assert!(
            error.contains("budget_tokens of 100 is spent (120 tokens"),
            "{error}"
        );
        assert!(
            budgets.check("other", (0, 0.0)).is_ok(),
            "trees are counted apart"
        );
        let figures = budgets.figures("root", (0, 0.0)).unwrap();
        assert_eq!(figures.summary(), "budget: 120 of 100 tokens spent, 0 left");
        assert_eq!(
            figures.meta(),
            json!({"tokens": {"spent": 120, "limit": 100, "remaining": 0}})
        );
    }

    #[test]
    fn siblings_cannot_both_be_admitted_on_the_last_of_a_budget() {
        let budgets = tokens(1000);
        // The root spent 500: room for one child of 600 (set aside: the 500 left).
        let first = budgets.admit("root", (500, 0.0), Some(600)).unwrap();
        assert_eq!(first.as_ref().unwrap().outstanding(), 500);
        let error = budgets
            .admit("root", (500, 0.0), Some(600))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("(1000 tokens used by this session and its subagents, 500 of them set aside for subagents still running)"),
            "{error}"
        );
        // Once the first is released, a sibling is admitted again.
        first.unwrap().released.store(true, Ordering::Release);
        assert!(budgets.admit("root", (500, 0.0), Some(600)).is_ok());
        // Without a token budget of its own a child sets nothing aside.
        assert!(budgets.admit("root", (0, 0.0), None).unwrap().is_none());
        let unlimited = Budgets::new(&DelegationSettings::default());
        assert!(unlimited
            .admit("root", (0, 0.0), Some(5))
            .unwrap()
            .is_none());
    }

    #[test]
    fn an_acp_childs_line_says_what_it_reported_against_its_budget() {
        assert_eq!(
            acp_child_line(None, Some(1.0)),
            "budget: counts only the cost it reports (none reported: not budgeted)"
        );
        assert_eq!(
            acp_child_line(Some(1.25), Some(1.0)),
            "budget: 1.2500 of 1 cost spent in its last activation, 0.0000 left"
        );
        assert_eq!(
            acp_child_line(Some(0.5), None),
            "budget: 0.5000 cost spent in its last activation (no child cost budget)"
        );
    }

    #[test]
    fn the_roots_own_spend_and_the_logged_spend_count_once() {
        let budgets = tokens(100);
        assert!(
            budgets.check("root", (100, 0.0)).is_err(),
            "the root's own calls count"
        );
        budgets.seed("root", 60, 0.0);
        budgets.seed("root", 50, 0.0);
        let figures = budgets.figures("root", (10, 0.0)).unwrap();
        assert_eq!(figures.tokens, 70, "seeding raises, it does not add");
        assert!(tokens(1).figures("root", (0, 0.0)).is_some());
        assert!(Budgets::new(&DelegationSettings::default())
            .figures("root", (0, 0.0))
            .is_none());
    }
}

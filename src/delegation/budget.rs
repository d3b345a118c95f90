//! Token and cost budgets: per child activation (`[delegation] child_budget_tokens`,
//! `child_budget_cost`, or the call's `budget_tokens`) and per delegation tree
//! (`budget_tokens`, `budget_cost`: what a root session and all its descendants spent).
//! Children count their own model calls (`agent::Watch`) into their tree's [`Spend`]; the
//! root's own calls are read from its live agent, and what earlier processes spent is seeded
//! from the logs when the root is opened again. A child at its budget ends `budget_exhausted`
//! after that step, and a tree at its budget refuses the next start or continuation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::DelegationError;
use crate::agent::{Budget, Spend};
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

//! Token and cost budgets: per child activation (`[delegation] child_budget_tokens`,
//! `child_budget_cost`, or the call's `budget_tokens`) and per delegation tree
//! (`budget_tokens`, `budget_cost`, what all children of one root session spent in this
//! process). Children count their own model calls (`agent::Watch`); a child at its budget
//! ends `budget_exhausted` after that step, and a tree at its budget refuses the next start or
//! continuation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

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
    trees: Mutex<HashMap<String, Arc<Spend>>>,
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

    /// Refuses a start or continuation in a tree that has spent its budget.
    pub(super) fn check(&self, root: &str) -> Result<(), DelegationError> {
        let spent = self.tree(root);
        if let Some(max) = self.tree_tokens.filter(|max| spent.tokens() >= *max) {
            return Err(DelegationError::BudgetSpent(format!(
                "the delegation budget_tokens of {max} is spent ({} tokens used by this \
                 session's subagents)",
                spent.tokens()
            )));
        }
        if let Some(max) = self.tree_cost.filter(|max| spent.cost() >= *max) {
            return Err(DelegationError::BudgetSpent(format!(
                "the delegation budget_cost of {max} is spent ({:.4} used by this session's \
                 subagents)",
                spent.cost()
            )));
        }
        Ok(())
    }

    /// The budget of one child activation in `root`'s tree; `tokens` is the call's own.
    pub(super) fn child(&self, root: &str, tokens: Option<u64>) -> Budget {
        Budget {
            tokens: tokens.or(self.child_tokens),
            cost: self.child_cost,
            tree: Some(self.tree(root)),
        }
    }

    /// `budget: ...` for `list_agents`, when the tree has a budget.
    pub(super) fn summary(&self, root: &str) -> Option<String> {
        if self.tree_tokens.is_none() && self.tree_cost.is_none() {
            return None;
        }
        let spent = self.tree(root);
        let mut parts = Vec::new();
        if let Some(max) = self.tree_tokens {
            parts.push(format!(
                "{} of {max} tokens spent, {} left",
                spent.tokens(),
                max.saturating_sub(spent.tokens())
            ));
        }
        if let Some(max) = self.tree_cost {
            parts.push(format!(
                "{:.4} of {max} cost spent, {:.4} left",
                spent.cost(),
                (max - spent.cost()).max(0.0)
            ));
        }
        Some(format!("budget: {}", parts.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_at_its_budget_refuses_and_says_what_was_spent() {
        let budgets = Budgets::new(&DelegationSettings {
            budget_tokens: Some(100),
            ..Default::default()
        });
        assert!(budgets.check("root").is_ok());
        let child = budgets.child("root", None);
        child.tree.as_ref().unwrap().add(120, 0.0);
        let error = budgets.check("root").unwrap_err().to_string();
        assert!(
            error.contains("budget_tokens of 100 is spent (120 tokens"),
            "{error}"
        );
        assert!(budgets.check("other").is_ok(), "trees are counted apart");
        assert_eq!(
            budgets.summary("root").as_deref(),
            Some("budget: 120 of 100 tokens spent, 0 left")
        );
    }
}

//! What delegation's limits need from an agent: when it last made progress (any event
//! appended: a model chunk, a tool's update or result), why it was stopped when the stop came
//! from a limit rather than a user (the turn then ends with that reason, not `aborted`), and
//! what it spent against its budget (each model call's tokens and cost, also added to its
//! tree's [`Spend`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::time::Instant;

use super::StopReason;
use crate::sync::lock;

/// Tokens and cost spent, counted from many tasks at once.
#[derive(Debug, Default)]
pub struct Spend {
    tokens: AtomicU64,
    /// In millionths, so it adds atomically.
    cost_micros: AtomicU64,
}

impl Spend {
    pub(crate) fn add(&self, tokens: u64, cost: f64) {
        self.tokens.fetch_add(tokens, Ordering::Relaxed);
        if cost > 0.0 && cost.is_finite() {
            let micros = (cost * 1e6).round() as u64;
            self.cost_micros.fetch_add(micros, Ordering::Relaxed);
        }
    }

    /// Raises the figures to at least `tokens` and `cost` (what a log says was spent).
    pub(crate) fn raise_to(&self, tokens: u64, cost: f64) {
        self.tokens.fetch_max(tokens, Ordering::Relaxed);
        if cost > 0.0 && cost.is_finite() {
            let micros = (cost * 1e6).round() as u64;
            self.cost_micros.fetch_max(micros, Ordering::Relaxed);
        }
    }

    pub(crate) fn tokens(&self) -> u64 {
        self.tokens.load(Ordering::Relaxed)
    }

    pub(crate) fn cost(&self) -> f64 {
        self.cost_micros.load(Ordering::Relaxed) as f64 / 1e6
    }
}

/// What one child activation may spend, and the tree its spending also counts for.
#[derive(Debug, Clone, Default)]
pub struct Budget {
    /// Tokens the activation may spend.
    pub tokens: Option<u64>,
    /// Cost (in the model's price unit) the activation may spend.
    pub cost: Option<f64>,
    /// The whole tree's spending, which the activation's also counts for.
    pub tree: Option<Arc<Spend>>,
}

/// The progress clock, the limit stop and the budget of one agent.
#[derive(Debug)]
pub struct Watch {
    last_progress: Mutex<Instant>,
    /// Set by a limit just before it cancels the turn.
    cause: Mutex<Option<StopReason>>,
    budget: OnceLock<Budget>,
    spent: Spend,
    /// What was spent before the current activation: the budget is each activation's.
    before: Mutex<(u64, f64)>,
}

impl Default for Watch {
    fn default() -> Self {
        Self {
            last_progress: Mutex::new(Instant::now()),
            cause: Mutex::new(None),
            budget: OnceLock::new(),
            spent: Spend::default(),
            before: Mutex::new((0, 0.0)),
        }
    }
}

impl Watch {
    /// Puts the agent under `budget` (once, before it runs).
    pub fn set_budget(&self, budget: Budget) {
        let _ = self.budget.set(budget);
    }

    /// Counts one model call.
    pub fn spend(&self, tokens: u64, cost: f64) {
        self.spent.add(tokens, cost);
        if let Some(tree) = self.budget.get().and_then(|b| b.tree.as_ref()) {
            tree.add(tokens, cost);
        }
    }

    /// What this agent spent (in this process).
    pub(crate) fn spent(&self) -> &Spend {
        &self.spent
    }

    /// Whether the agent has reached its own budget.
    pub fn over_budget(&self) -> bool {
        let Some(budget) = self.budget.get() else {
            return false;
        };
        let (tokens, cost) = *lock(&self.before);
        budget
            .tokens
            .is_some_and(|max| self.spent.tokens().saturating_sub(tokens) >= max)
            || budget
                .cost
                .is_some_and(|max| self.spent.cost() - cost >= max)
    }

    /// Which budget the agent reached and what it spent this activation, for the line that
    /// tells its parent why it stopped; `None` when it reached none.
    pub(crate) fn budget_reached(&self) -> Option<String> {
        let budget = self.budget.get()?;
        let (tokens, cost) = *lock(&self.before);
        let (spent_tokens, spent_cost) = (
            self.spent.tokens().saturating_sub(tokens),
            self.spent.cost() - cost,
        );
        match (budget.tokens, budget.cost) {
            (Some(max), _) if spent_tokens >= max => Some(format!(
                "its token budget of {max} was reached ({spent_tokens} tokens spent)"
            )),
            (_, Some(max)) if spent_cost >= max => Some(format!(
                "its cost budget of {max} was reached ({spent_cost:.4} spent)"
            )),
            _ => None,
        }
    }

    /// Starts a new activation of an agent that runs many (a `kin mcp` session's tasks): its
    /// budget counts from now.
    pub(crate) fn begin_activation(&self) {
        *lock(&self.before) = (self.spent.tokens(), self.spent.cost());
    }

    /// Marks progress now.
    pub fn progressed(&self) {
        *lock(&self.last_progress) = Instant::now();
    }

    /// When the agent last made progress.
    pub(crate) fn last_progress(&self) -> Instant {
        *lock(&self.last_progress)
    }

    /// Says why the turn is about to be cancelled (a limit, e.g. [`StopReason::TimedOut`]).
    pub(crate) fn stop_with(&self, reason: StopReason) {
        *lock(&self.cause) = Some(reason);
    }

    /// The limit that stopped the turn, if one did; taken once, at the turn's end.
    pub(super) fn take_cause(&self) -> Option<StopReason> {
        lock(&self.cause).take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn progress_moves_the_clock_and_a_cause_is_taken_once() {
        let watch = Watch::default();
        let before = watch.last_progress();
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        watch.progressed();
        assert_eq!(
            watch.last_progress() - before,
            std::time::Duration::from_secs(5)
        );
        watch.stop_with(StopReason::TimedOut);
        assert_eq!(watch.take_cause(), Some(StopReason::TimedOut));
        assert_eq!(watch.take_cause(), None);
    }

    #[test]
    fn spending_counts_for_the_agent_and_its_tree_and_stops_at_the_budget() {
        let tree = Arc::new(Spend::default());
        let watch = Watch::default();
        watch.set_budget(Budget {
            tokens: Some(100),
            cost: None,
            tree: Some(tree.clone()),
        });
        watch.spend(60, 0.25);
        assert!(!watch.over_budget());
        watch.spend(40, 0.5);
        assert!(watch.over_budget());
        assert_eq!((tree.tokens(), tree.cost()), (100, 0.75));
        // A new activation has its own budget.
        watch.begin_activation();
        assert!(!watch.over_budget());
        watch.spend(100, 0.0);
        assert!(watch.over_budget());
    }
}

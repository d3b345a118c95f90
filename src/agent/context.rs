//! What a live session knows of its model and context: the configured model it runs on (a
//! `model/set` in its log), how full its context was after the last model call, and what it
//! has cost, its settled children included. Restored from the log on open.

use std::sync::Mutex;

use crate::model::ModelProfile;
use crate::session::{Event, EventBody, TurnUsage, Usage};
use crate::sync::lock;

/// The session's context figures, as of its last model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextUsage {
    /// Tokens in context after the last call (the endpoint's figures, else an estimate).
    pub(crate) used: u64,
    /// The history length (in messages) `used` counts.
    pub(crate) counted_items: usize,
    /// Cost so far, this session's calls and its settled children's.
    pub cost: f64,
}

#[derive(Default)]
struct Figures {
    usage: ContextUsage,
    /// Sums of the running turn.
    turn: TurnUsage,
    turn_cost_start: f64,
}

/// The model choice and the usage figures of one session.
#[derive(Default)]
pub struct SessionContext {
    /// The configured model id switched to, if any (else the options' model, else default).
    selected: Mutex<Option<String>>,
    /// A switch not yet in the log (it came while a turn held the log).
    unlogged_switch: Mutex<Option<String>>,
    figures: Mutex<Figures>,
    /// A background activation's cost, held for its task's `task/end` instead of going to
    /// the parent's running turn (`None`: the cost goes to the parent as the turn settles).
    held_for_task: Mutex<Option<f64>>,
}

impl SessionContext {
    /// The context of a session whose log holds `events`.
    pub(crate) fn restore(events: &[Event]) -> Self {
        let mut selected = None;
        let mut cost = 0.0;
        for event in events {
            match &event.body {
                EventBody::ModelSet(set) => selected = Some(set.model.clone()),
                EventBody::TurnEnd(end) => {
                    cost += end.usage.as_ref().and_then(|u| u.cost).unwrap_or(0.0);
                }
                // A background child's cost, counted for the turn that started it.
                EventBody::TaskEnd(end) => cost += end.cost.unwrap_or(0.0),
                _ => {}
            }
        }
        let context = Self {
            selected: Mutex::new(selected),
            ..Self::default()
        };
        lock(&context.figures).usage.cost = cost;
        context
    }

    pub(crate) fn selected(&self) -> Option<String> {
        lock(&self.selected).clone()
    }

    /// Switches to `id`; the switch waits in [`SessionContext::take_unlogged_switch`].
    pub(crate) fn select(&self, id: &str) {
        *lock(&self.selected) = Some(id.to_owned());
        *lock(&self.unlogged_switch) = Some(id.to_owned());
    }

    pub(crate) fn take_unlogged_switch(&self) -> Option<String> {
        lock(&self.unlogged_switch).take()
    }

    /// How full the context window is, by the last model call.
    pub fn usage(&self) -> ContextUsage {
        lock(&self.figures).usage.clone()
    }

    /// Starts the sums of a new turn.
    pub(crate) fn begin_turn(&self) {
        let mut figures = lock(&self.figures);
        figures.turn = TurnUsage::default();
        figures.turn_cost_start = figures.usage.cost;
    }

    /// Counts one model call of `profile`'s model; `used` is the context after it and
    /// `items` the history length it covers.
    pub(crate) fn record_call(
        &self,
        usage: &Usage,
        profile: &ModelProfile,
        used: u64,
        items: usize,
    ) {
        let mut figures = lock(&self.figures);
        figures.turn.input_tokens += usage.input_tokens;
        figures.turn.output_tokens += usage.output_tokens;
        if let Some(cached) = usage.cache_read_tokens {
            *figures.turn.cache_read_tokens.get_or_insert(0) += cached;
        }
        if let Some(prices) = &profile.prices {
            figures.usage.cost += prices.cost(usage);
        }
        figures.usage.used = used;
        figures.usage.counted_items = items;
    }

    /// Counts tokens estimated for a call whose endpoint reported no usage.
    pub(crate) fn record_estimate(&self, tokens: u64) {
        let mut figures = lock(&self.figures);
        let estimated = figures.turn.estimated_tokens.get_or_insert(0);
        *estimated = estimated.saturating_add(tokens);
    }

    /// The context shrank (a compaction): `used` tokens over `items` messages.
    pub(crate) fn set_used(&self, used: u64, items: usize) {
        let mut figures = lock(&self.figures);
        figures.usage.used = used;
        figures.usage.counted_items = items;
    }

    /// Adds a settled child's cost.
    pub(crate) fn add_cost(&self, cost: f64) {
        lock(&self.figures).usage.cost += cost;
    }

    /// Adds a background child's cost, which its `task/end` records: it is in the session's
    /// cost but not in the running turn's (that turn did not start it).
    pub(crate) fn add_task_cost(&self, cost: f64) {
        let mut figures = lock(&self.figures);
        figures.usage.cost += cost;
        figures.turn_cost_start += cost;
    }

    /// From now on the costs of this session's turns are held for its task (a background
    /// activation), not handed to its parent.
    pub(crate) fn hold_cost_for_task(&self) {
        *lock(&self.held_for_task) = Some(0.0);
    }

    /// Holds `cost` for the task when this session is a background activation.
    pub(crate) fn hold(&self, cost: f64) -> bool {
        match lock(&self.held_for_task).as_mut() {
            Some(held) => {
                *held += cost;
                true
            }
            None => false,
        }
    }

    /// The cost held for the task so far (taken once, as the task settles).
    pub(crate) fn take_held(&self) -> Option<f64> {
        lock(&self.held_for_task).take()
    }

    /// The running turn's sums, for its `turn/end` (none when no call reported usage and no
    /// cost was added).
    pub(crate) fn turn_usage(&self, priced: bool) -> Option<TurnUsage> {
        let figures = lock(&self.figures);
        let mut turn = figures.turn.clone();
        let cost = figures.usage.cost - figures.turn_cost_start;
        if priced || cost > 0.0 {
            turn.cost = Some(cost);
        }
        let empty = turn.tokens() == 0 && turn.cost.is_none();
        (!empty).then_some(turn)
    }
}

/// A rough token count of `text` for when the endpoint gave none: four bytes a token.
pub(crate) fn estimate_tokens(text_len: usize) -> u64 {
    (text_len as u64).div_ceil(4)
}

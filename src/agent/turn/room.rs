//! How a turn fits its request into the window: the compaction threshold, whether a
//! compaction could make room, telling the user once when it cannot, and the error a turn
//! ends with when its request can never fit.

use super::Turn;
use crate::agent::compact::{
    in_turn_through, next_request_tokens, room_check, summary_cap, NoRoom,
};
use crate::model::{ModelChoice, ModelError};

impl Turn<'_> {
    /// The compaction share of a `window`-token window.
    pub(super) fn limit(&self, window: u64) -> u64 {
        (window as f64 * self.deps.models.compact_at()) as u64
    }

    /// Whether the next request would pass the compaction share of the window.
    pub(super) fn over_threshold(&self, window: Option<u64>) -> bool {
        let Some(window) = window else {
            return false;
        };
        let fixed = self.agent.context.usage().fixed_bytes;
        next_request_tokens(self.agent, fixed) > self.limit(window)
    }

    /// Whether a compaction before `step` could bring the request under the threshold
    /// (always assumed when the window is unknown).
    pub(super) fn room(
        &self,
        choice: &ModelChoice,
        window: Option<u64>,
        step: u32,
    ) -> Result<(), NoRoom> {
        let Some(window) = window else {
            return Ok(());
        };
        let in_turn = in_turn_through(self.turn, step);
        let summary = summary_cap(choice, Some(window));
        room_check(self.agent, in_turn, window, self.limit(window), summary)
    }

    /// Tells the user, once a session, that compaction cannot make room, and what to change.
    pub(super) fn tell_no_room(&mut self, no_room: &NoRoom) {
        if std::mem::replace(&mut self.state.no_room_told, true) {
            return;
        }
        let advice = no_room.advice();
        tracing::warn!(session = %self.agent.id, "{advice}");
        if let Some(client) = &self.deps.client {
            client.warn_user(&advice);
        }
    }

    /// The error a turn ends with when its request does not fit and compaction cannot help:
    /// the figures, and that the prompt is left out of later requests.
    pub(super) fn overflow_error(&self, error: &ModelError, window: Option<u64>) -> ModelError {
        let history = self.agent.model_history();
        let prompt_bytes: usize = history
            .iter()
            .rev()
            .find(|item| matches!(item, crate::session::history::HistoryItem::User(_)))
            .map_or(0, |item| item.text_len());
        let prompt = self.agent.context.estimate(prompt_bytes);
        let fixed = self
            .agent
            .context
            .estimate(self.agent.context.usage().fixed_bytes);
        let (request, window) = match (error.overflow_sizes(), window) {
            (Some((request, window)), _) => (Some(request), Some(window)),
            (None, window) => (None, window),
        };
        let window = window.map_or_else(|| "the model's".to_owned(), |w| format!("a {w}-token"));
        let request = request.map_or_else(String::new, |r| format!(" ({r} tokens)"));
        ModelError::ContextOverflow(format!(
            "the request{request} does not fit {window} context window and compaction cannot \
             make room: this prompt alone is about {prompt} tokens, the system prompt and tool \
             definitions about {fixed}. The prompt is left out of later requests; send a shorter \
             one, or give the model a larger window. (The endpoint said: {error})"
        ))
    }
}

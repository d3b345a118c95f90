//! How a turn fits its request into the window: when a compaction is due (the threshold, or
//! a request that would not fit), whether one helps and with what summary cap, telling the
//! user once when none can, and the error a turn ends with when its request can never fit.

use super::Turn;
use crate::agent::compact::CompactionOutcome;
use crate::agent::compact::{
    in_turn_through, next_request_tokens, output_reserve, room_check, summary_cap, NoRoom,
    RoomBounds,
};
use crate::model::{ModelChoice, ModelError};
use crate::session::{CompactionTrigger, StoreError};

/// Whether a compaction helps: the summary's cap if so (`None`: nothing worth summarising).
pub(super) type Room = Result<Option<u32>, NoRoom>;

impl Turn<'_> {
    /// Compacts before `step` when a compaction is due and helps (see `room`); `None` when
    /// none was tried.
    pub(super) async fn compact_if_due(
        &mut self,
        choice: &ModelChoice,
        window: Option<u64>,
        step: u32,
    ) -> Result<Option<CompactionOutcome>, StoreError> {
        let due = self.compaction_due(choice, window, step);
        let (Some(window), Some(current)) = (window, due) else {
            return Ok(None);
        };
        let in_turn = in_turn_through(self.turn, step);
        match self.room(choice, window, in_turn, current) {
            Ok(Some(cap)) => {
                let trigger = CompactionTrigger::Threshold;
                Ok(Some(
                    self.compact(choice, trigger, in_turn, Some(cap)).await?,
                ))
            }
            Ok(None) => Ok(None),
            Err(no_room) => {
                self.tell_no_room(&no_room);
                Ok(None)
            }
        }
    }

    /// What the endpoint's refusal of a request as too long tells: the window it named and
    /// its count of the request (which the estimates then follow).
    pub(super) fn learn_from_overflow(
        &self,
        window: Option<u64>,
        error: &ModelError,
    ) -> (Option<u64>, Option<u64>) {
        let counted = error.overflow_sizes().map(|(request, reported)| {
            self.agent.context.report_window(reported);
            let history = self.agent.model_history().text_len_from(0);
            let fixed = self.agent.context.usage().fixed_bytes;
            self.agent.context.calibrate(fixed, history, request);
            request
        });
        (self.agent.context.window(window), counted)
    }

    /// Whether a compaction helps a refused `current`-token request (else an estimate of
    /// the next) fit `window`: the summary's cap and what it summarises (within the turn,
    /// all its steps when keeping the latest ones leaves no room: a tool result taken before
    /// the window was known may be what overflowed).
    pub(super) fn room_after_overflow(
        &self,
        choice: &ModelChoice,
        window: Option<u64>,
        step: u32,
        current: Option<u64>,
    ) -> (Room, Option<(u32, u32)>) {
        let in_turn = in_turn_through(self.turn, step);
        let Some(known) = window else {
            return (Ok(Some(summary_cap(choice, None))), in_turn);
        };
        let current = current.unwrap_or_else(|| next_request_tokens(self.agent));
        let room = self.room(choice, known, in_turn, current);
        let whole_turn = step
            .checked_sub(1)
            .filter(|s| *s >= 1)
            .map(|s| (self.turn, s));
        match (&room, whole_turn) {
            (Ok(Some(_)), _) | (_, None) => (room, in_turn),
            (_, Some(whole)) => match self.room(choice, known, Some(whole), current) {
                Ok(Some(cap)) => (Ok(Some(cap)), Some(whole)),
                _ => (room, in_turn),
            },
        }
    }

    /// Whether the next request, with the fixed part set now, fits `window` with the
    /// answer's reserve (an unknown window: it may).
    pub(super) fn next_fits(&self, choice: &ModelChoice, window: Option<u64>) -> bool {
        window.is_none_or(|w| next_request_tokens(self.agent) + self.reserve(choice, w) <= w)
    }

    /// The compaction share of a `window`-token window.
    fn limit(&self, window: u64) -> u64 {
        (window as f64 * self.deps.models.compact_at()) as u64
    }

    /// Tokens kept free for the answer of a request to `choice` in a `window`-token window.
    pub(super) fn reserve(&self, choice: &ModelChoice, window: u64) -> u64 {
        let (cap, _) = choice.output_cap(Some(window));
        output_reserve(window, self.agent.options.max_tokens.unwrap_or(cap))
    }

    /// The next request's tokens when a compaction is due before `step`: it would not fit
    /// the window with the answer's reserve, or it passes the threshold and the history has
    /// grown by an eighth of the window since the last compaction; a second one in a turn
    /// only in a long tool loop (one with older steps to summarise).
    fn compaction_due(&self, choice: &ModelChoice, window: Option<u64>, step: u32) -> Option<u64> {
        let window = window?;
        let current = next_request_tokens(self.agent);
        let fits = current + self.reserve(choice, window) <= window;
        let grown = self
            .agent
            .context
            .usage()
            .compacted_to
            .is_none_or(|at| current >= at + window / 8);
        let again = !self.compacted || in_turn_through(self.turn, step).is_some();
        let due = !fits || (current > self.limit(window) && grown && again);
        due.then_some(current)
    }

    /// Whether a compaction (of the completed turns, and of the running one's steps
    /// through `in_turn`) helps a `current`-token request fit a `window`-token window, and
    /// the summary's cap if so (see [`room_check`]).
    fn room(
        &self,
        choice: &ModelChoice,
        window: u64,
        in_turn: Option<(u32, u32)>,
        current: u64,
    ) -> Room {
        let bounds = RoomBounds {
            window,
            reserve: self.reserve(choice, window),
            cap: summary_cap(choice, Some(window)),
            current,
        };
        room_check(self.agent, in_turn, bounds)
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
        let fixed = self.agent.context.fixed_tokens();
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

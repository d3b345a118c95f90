//! What a watchdog outside the turn needs from an agent: when it last made progress (any event
//! appended: a model chunk, a tool's update or result), and why it was stopped when the stop
//! came from a limit rather than a user (the turn then ends with that reason, not `aborted`).

use std::sync::Mutex;

use tokio::time::Instant;

use super::StopReason;
use crate::sync::lock;

/// The progress clock and the limit stop of one agent.
#[derive(Debug)]
pub struct Watch {
    last_progress: Mutex<Instant>,
    /// Set by a limit just before it cancels the turn.
    cause: Mutex<Option<StopReason>>,
}

impl Default for Watch {
    fn default() -> Self {
        Self {
            last_progress: Mutex::new(Instant::now()),
            cause: Mutex::new(None),
        }
    }
}

impl Watch {
    /// Marks progress now.
    pub fn progressed(&self) {
        *lock(&self.last_progress) = Instant::now();
    }

    /// When the agent last made progress.
    pub fn last_progress(&self) -> Instant {
        *lock(&self.last_progress)
    }

    /// Says why the turn is about to be cancelled (a limit, e.g. [`StopReason::TimedOut`]).
    pub fn stop_with(&self, reason: StopReason) {
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
}

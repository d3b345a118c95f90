//! Asking the model's server for its context window beside a model call, never before it: a
//! prompt's first token does not wait for the answer. The model caches what it found, so
//! after the first answer the question is settled at once.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::model::Model;

/// A question about the window, answered or on its way.
pub(super) enum WindowQuestion {
    /// Nothing to wait for: the window is configured, or the model answered from its cache.
    Answered(Option<u64>),
    /// Asked on its own task, beside the model call; aborted when dropped unanswered.
    Asking(JoinHandle<Option<u64>>),
    /// The window is configured: nothing asked.
    NotAsked,
}

impl WindowQuestion {
    /// Asks `model` unless `configured` says the window already.
    pub(super) fn ask(model: &dyn Model, configured: Option<u64>) -> Self {
        use futures::FutureExt;
        if configured.is_some() {
            return Self::NotAsked;
        }
        let mut question = model.discover_window();
        match (&mut question).now_or_never() {
            Some(found) => Self::Answered(found),
            None => Self::Asking(tokio::spawn(question)),
        }
    }

    /// The server's window, once its answer is in; `None` when nothing was asked, the turn
    /// was cancelled first, or the server does not say.
    pub(super) async fn answer(&mut self, cancel: &CancellationToken) -> Option<Option<u64>> {
        let found = match self {
            Self::NotAsked => return None,
            Self::Answered(found) => return Some(*found),
            Self::Asking(task) => tokio::select! {
                _ = cancel.cancelled() => return None,
                found = task => found.ok()?,
            },
        };
        *self = Self::Answered(found);
        Some(found)
    }
}

impl Drop for WindowQuestion {
    fn drop(&mut self) {
        if let Self::Asking(task) = self {
            task.abort();
        }
    }
}

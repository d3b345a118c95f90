//! Progress of running tool calls: rmcp gives each request its own progress token; the
//! server's `notifications/progress` for it are routed back to that call (ones that come
//! before the call has registered wait, a few at most), worded for the editor, and
//! throttled (at most one update per [`MIN_GAP`]; the last one held back is sent when the call
//! ends, so the editor always sees the final state). The call drops reports older than one
//! it has seen (rmcp may hand them over out of order).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::sync::lock;

/// The shortest time between two progress updates of one call.
pub(crate) const MIN_GAP: Duration = Duration::from_millis(100);

/// Notifications kept for calls that have not registered yet.
const EARLY: usize = 64;

type Sender = mpsc::UnboundedSender<ProgressNotificationParam>;

/// The calls of one connection waiting for progress, by token.
#[derive(Clone, Default)]
pub(crate) struct Routes {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    calls: HashMap<ProgressToken, Sender>,
    /// Progress for tokens no call has claimed yet, oldest first.
    early: VecDeque<ProgressNotificationParam>,
}

/// One call's progress; stops being routed when dropped.
pub(crate) struct Route {
    routes: Routes,
    token: ProgressToken,
    pub(crate) updates: mpsc::UnboundedReceiver<ProgressNotificationParam>,
}

impl Routes {
    /// Where the progress of the call with `token` arrives (what came early first).
    pub(crate) fn open(&self, token: ProgressToken) -> Route {
        let (tx, updates) = mpsc::unbounded_channel();
        let mut inner = lock(&self.inner);
        let early = std::mem::take(&mut inner.early);
        for params in early {
            if params.progress_token == token {
                let _ = tx.send(params);
            } else {
                inner.early.push_back(params);
            }
        }
        inner.calls.insert(token.clone(), tx);
        Route {
            routes: self.clone(),
            token,
            updates,
        }
    }

    /// Hands a server's progress notification to its call, or keeps it for a call about to
    /// register (the oldest kept one goes when too many wait).
    pub(crate) fn deliver(&self, params: ProgressNotificationParam) {
        let mut inner = lock(&self.inner);
        match inner.calls.get(&params.progress_token) {
            Some(tx) => {
                let _ = tx.send(params);
            }
            None => {
                if inner.early.len() == EARLY {
                    inner.early.pop_front();
                }
                inner.early.push_back(params);
            }
        }
    }
}

impl Drop for Route {
    fn drop(&mut self) {
        lock(&self.routes.inner).calls.remove(&self.token);
    }
}

/// A progress notification as the editor shows it: `Progress: 3/10 (message)`.
pub(crate) fn words(params: &ProgressNotificationParam) -> String {
    let amount = match params.total {
        Some(total) => format!("{}/{}", params.progress, total),
        None => params.progress.to_string(),
    };
    match params.message.as_deref().map(str::trim) {
        Some(message) if !message.is_empty() => format!("Progress: {amount} ({message})"),
        _ => format!("Progress: {amount}"),
    }
}

/// Lets one text through per [`MIN_GAP`], holding back the latest of the others.
#[derive(Default)]
pub(crate) struct Throttle {
    last: Option<Instant>,
    held: Option<String>,
}

impl Throttle {
    /// `text` if it may be shown now; else it is held (replacing an older held one).
    pub(crate) fn offer(&mut self, now: Instant, text: String) -> Option<String> {
        match self.last {
            Some(last) if now < last + MIN_GAP => {
                self.held = Some(text);
                None
            }
            _ => {
                self.last = Some(now);
                self.held = None;
                Some(text)
            }
        }
    }

    /// When the held text may be shown, if one is held.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.held.as_ref()?;
        Some(self.last.map_or_else(Instant::now, |last| last + MIN_GAP))
    }

    /// The held text, to show now.
    pub(crate) fn release(&mut self, now: Instant) -> Option<String> {
        let held = self.held.take()?;
        self.last = Some(now);
        Some(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rmcp::model::NumberOrString;

    fn token(n: i64) -> ProgressToken {
        ProgressToken(NumberOrString::Number(n))
    }

    #[test]
    fn progress_is_worded_with_total_and_message() {
        let token = token(0);
        let mut params = ProgressNotificationParam::new(token, 3.0);
        assert_eq!(words(&params), "Progress: 3");
        params.total = Some(10.0);
        params.message = Some(" indexing ".into());
        assert_eq!(words(&params), "Progress: 3/10 (indexing)");
    }

    #[test]
    fn the_throttle_passes_one_per_gap_and_keeps_the_latest() {
        let start = Instant::now();
        let mut throttle = Throttle::default();
        assert_eq!(throttle.offer(start, "1".into()).as_deref(), Some("1"));
        assert_eq!(throttle.offer(start, "2".into()), None);
        assert_eq!(throttle.offer(start, "3".into()), None);
        assert_eq!(throttle.due(), Some(start + MIN_GAP));
        assert_eq!(throttle.release(start + MIN_GAP).as_deref(), Some("3"));
        assert_eq!(throttle.due(), None);
        let later = start + MIN_GAP * 3;
        assert_eq!(throttle.offer(later, "4".into()).as_deref(), Some("4"));
    }

    #[tokio::test]
    async fn progress_reaches_its_own_call_also_when_it_came_early() {
        let routes = Routes::default();
        routes.deliver(ProgressNotificationParam::new(token(1), 0.5));
        routes.deliver(ProgressNotificationParam::new(token(2), 9.0));
        let mut route = routes.open(token(1));
        let other = routes.open(token(3));
        routes.deliver(ProgressNotificationParam::new(token(1), 1.0));
        assert_eq!(route.updates.recv().await.map(|p| p.progress), Some(0.5));
        assert_eq!(route.updates.recv().await.map(|p| p.progress), Some(1.0));
        assert!(route.updates.try_recv().is_err(), "nothing of other calls");
        drop((route, other));
        assert!(lock(&routes.inner).calls.is_empty());
        for n in 0..(EARLY as i64 + 5) {
            routes.deliver(ProgressNotificationParam::new(token(100 + n), 1.0));
        }
        assert_eq!(
            lock(&routes.inner).early.len(),
            EARLY,
            "unclaimed ones stay few"
        );
    }
}

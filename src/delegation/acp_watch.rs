//! The limits of an ACP child, read from its traffic: every `session/update` it sends (for
//! itself or its own children) is progress for the idle watchdog, and the cumulative `cost` of
//! its own `usage_update`s is what it spent against its budget. A child that reports no cost
//! spends nothing that kin can see: it cannot be budgeted (the tools say so).

use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::acp_client::{ChildLink, ChildSink};
use crate::agent::{Budget, Watch};
use crate::sync::lock;

/// Passes a child's traffic on, moving its progress clock and counting its reported cost.
struct WatchedSink {
    inner: Arc<dyn ChildSink>,
    /// kin's ids of the delegating session (kin's own updates about the child go there) and
    /// of the child.
    parent: String,
    child: String,
    watch: Arc<Watch>,
    /// The child's last cumulative cost, to count what each report adds.
    reported: Mutex<f64>,
    /// Cancels the activation once the child is over its budget.
    stop: CancellationToken,
}

impl ChildSink for WatchedSink {
    fn update(&self, session: &str, update: &Value) {
        if session != self.parent {
            self.watch.progressed();
        }
        if session == self.child {
            if let Some(total) = reported_cost(update) {
                let added = {
                    let mut reported = lock(&self.reported);
                    let added = (total - *reported).max(0.0);
                    *reported = reported.max(total);
                    added
                };
                self.watch.spend(0, added);
                if self.watch.over_budget() {
                    tracing::info!(child = %self.child, "an ACP child reached its budget");
                    self.stop.cancel();
                }
            }
        }
        self.inner.update(session, update);
    }

    fn summary(&self, parent: &str, call_id: &str, text: &str) {
        self.inner.summary(parent, call_id, text);
    }
}

/// The cumulative cost a `usage_update` reports, if it does.
fn reported_cost(update: &Value) -> Option<f64> {
    if update.get("sessionUpdate")?.as_str()? != "usage_update" {
        return None;
    }
    update
        .pointer("/cost/amount")?
        .as_f64()
        .filter(|cost| cost.is_finite() && *cost >= 0.0)
}

/// Puts `link`'s child under `budget`, returning its progress clock. `stop` cancels the
/// activation when the child's reported cost reaches its budget.
pub(super) fn watch(
    link: &mut ChildLink,
    budget: Option<Budget>,
    stop: CancellationToken,
) -> Arc<Watch> {
    let watch = Arc::new(Watch::default());
    if let Some(budget) = budget {
        watch.set_budget(budget);
    }
    link.sink = Arc::new(WatchedSink {
        inner: link.sink.clone(),
        parent: link.parent.clone(),
        child: link.child.clone(),
        watch: watch.clone(),
        reported: Mutex::new(0.0),
        stop,
    });
    watch
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<usize>);

    impl ChildSink for Seen {
        fn update(&self, _session: &str, _update: &Value) {
            *lock(&self.0) += 1;
        }
        fn summary(&self, _parent: &str, _call_id: &str, _text: &str) {}
    }

    #[tokio::test(start_paused = true)]
    async fn traffic_is_progress_and_reported_cost_counts_against_the_budget() {
        let seen = Arc::new(Seen::default());
        let mut link = ChildLink {
            parent: "p".into(),
            child: "c".into(),
            call_id: None,
            title: None,
            sink: seen.clone(),
            client: None,
        };
        let stop = CancellationToken::new();
        let budget = Budget {
            cost: Some(1.0),
            ..Budget::default()
        };
        let watch = watch(&mut link, Some(budget), stop.clone());
        let before = watch.last_progress();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        link.sink
            .update("p", &json!({"sessionUpdate": "subagent_update"}));
        assert_eq!(
            watch.last_progress(),
            before,
            "kin's own update is no progress"
        );
        let usage = |amount: f64| {
            json!({"sessionUpdate": "usage_update", "used": 1, "size": 9,
                   "cost": {"amount": amount, "currency": "USD"}})
        };
        link.sink.update("c", &usage(0.4));
        assert!(watch.last_progress() > before);
        link.sink.update("c", &usage(0.7));
        assert!(!stop.is_cancelled());
        assert_eq!(
            watch.spent().cost(),
            0.7,
            "the cumulative figure counts once"
        );
        link.sink.update("c", &usage(1.2));
        assert!(stop.is_cancelled(), "at its budget the activation stops");
        assert_eq!(*lock(&seen.0), 4, "everything is passed on");
    }
}

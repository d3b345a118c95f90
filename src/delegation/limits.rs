//! Time limits of one child activation: a wall-clock limit and an idle watchdog (no model
//! output and no tool progress for a while). At 80% of the wall clock the child is steered one
//! message to wrap up; at a limit its activation is cancelled and its result says `timed_out`.
//! The clock starts when the activation starts and never restarts: a model call that is retried
//! inside the activation spends the same clock.

use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, OptionFuture};
use futures::FutureExt;
use tokio::time::{sleep_until, Instant};

use super::provider::{Run, SubagentResult};
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, StopReason, TurnError, Watch};
use crate::session::UserPart;

/// The share of the wall-clock limit after which the child is asked to wrap up.
const WRAP_UP_AT: f64 = 0.8;

/// The time limits of one activation; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TimeLimits {
    pub(crate) wall: Option<Duration>,
    pub(crate) idle: Option<Duration>,
}

impl TimeLimits {
    pub(crate) fn is_unlimited(&self) -> bool {
        self.wall.is_none() && self.idle.is_none()
    }
}

impl super::Delegation {
    /// The time limits of an activation: the call's wall clock, else the configured one.
    pub(super) fn time_limits(&self, timeout: Option<Duration>) -> TimeLimits {
        TimeLimits {
            wall: timeout.or(self.settings.timeout),
            idle: self.settings.idle_timeout,
        }
    }
}

/// Which limit ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expiry {
    Wall(Duration),
    Idle(Duration),
}

impl Expiry {
    fn detail(self) -> String {
        match self {
            Self::Wall(limit) => format!("the time limit of {} was reached", seconds(limit)),
            Self::Idle(limit) => format!("no model output or tool progress for {}", seconds(limit)),
        }
    }
}

fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}s")
    } else {
        format!("{secs:.1}s")
    }
}

/// The one message a child gets at 80% of its wall-clock limit.
pub(super) fn wrap_up_message(limit: Duration) -> String {
    format!(
        "[kin] You have used 80% of your time limit of {}. Wrap up now: start no new work, \
         and give your final answer in your next reply.",
        seconds(limit)
    )
}

/// Waits until a limit runs out, steering the wrap-up message on the way. `progress` is the
/// child's progress clock (none: no idle watchdog).
pub(super) async fn expiry(
    limits: TimeLimits,
    started: Instant,
    progress: Option<Arc<Watch>>,
    wrap_up: impl FnOnce(String) -> BoxFuture<'static, ()>,
) -> Expiry {
    let mut wrap_up = Some(wrap_up);
    let mut delivery: Option<BoxFuture<'static, ()>> = None;
    let idle = limits.idle.filter(|_| progress.is_some());
    loop {
        let now = Instant::now();
        let wall_end = limits.wall.map(|wall| started + wall);
        if let (Some(end), Some(wall)) = (wall_end, limits.wall) {
            if now >= end {
                return Expiry::Wall(wall);
            }
        }
        let idle_end = match (&progress, idle) {
            (Some(watch), Some(limit)) => {
                let end = watch.last_progress().max(started) + limit;
                if now >= end {
                    return Expiry::Idle(limit);
                }
                Some(end)
            }
            _ => None,
        };
        let warn_at = match (limits.wall, &wrap_up) {
            (Some(wall), Some(_)) => Some(started + wall.mul_f64(WRAP_UP_AT)),
            _ => None,
        };
        if let (Some(at), Some(wall)) = (warn_at, limits.wall) {
            if now >= at {
                if let Some(send) = wrap_up.take() {
                    delivery = Some(send(wrap_up_message(wall)));
                }
                continue;
            }
        }
        let Some(next) = [wall_end, idle_end, warn_at].into_iter().flatten().min() else {
            // No limit applies: never expires.
            return std::future::pending().await;
        };
        tokio::select! {
            _ = sleep_until(next) => {}
            Some(()) = OptionFuture::from(delivery.as_mut()), if delivery.is_some() => {
                delivery = None;
            }
        }
    }
}

/// `run` under `limits`: its result resolves as the child's, or, when a limit runs out first,
/// cancels the child (a later `dispose` finds it quiet) and reports `timed_out`.
pub(super) fn watched(run: Run, limits: TimeLimits) -> Run {
    if limits.is_unlimited() {
        return run;
    }
    let started = Instant::now();
    let inner = run.clone();
    let result: BoxFuture<'static, SubagentResult> = async move {
        let progress = inner.progress();
        let steer_into = inner.clone();
        let wrap_up = move |text: String| {
            let delivery = steer_into.steer(vec![UserPart::Text { text }]);
            async move {
                // A child that is no longer running has nothing to wrap up.
                let _ = delivery.await;
            }
            .boxed()
        };
        let expired = tokio::select! {
            result = inner.result() => return result,
            expired = expiry(limits, started, progress, wrap_up) => expired,
        };
        if let Some(watch) = inner.progress() {
            watch.stop_with(StopReason::TimedOut);
        }
        // A failed dispose is the holder's to report: its own dispose gets the same answer.
        let _ = inner.dispose().await;
        let mut result = inner.result().await;
        // A child that finished in the same instant keeps its answer.
        if result.stop_reason != StopReason::Completed {
            result.stop_reason = StopReason::TimedOut;
            result.diagnostic = Some(expired.detail());
            tracing::info!(child = %inner.id, limit = %expired.detail(), "a child timed out");
        }
        result
    }
    .boxed();
    run.with_result(result.shared())
}

/// Runs `turn`, a turn of the top-level `agent` started with `turn_cancel` (a `kin mcp` task
/// run as an agent definition), under the wall-clock limit `wall`: at 80% the agent is
/// steered to wrap up; at the limit its turn is cancelled and ends `timed_out`. Returns the
/// turn's result and, when the limit ran out, what was reached.
pub(crate) async fn limited_turn(
    agent: Arc<Agent>,
    wall: Duration,
    mut turn: BoxFuture<'static, Result<StopReason, TurnError>>,
    turn_cancel: CancellationToken,
) -> (Result<StopReason, TurnError>, Option<String>) {
    let limits = TimeLimits {
        wall: Some(wall),
        idle: None,
    };
    let steer_into = agent.clone();
    let wrap_up = move |text: String| {
        // A turn that is no longer running has nothing to wrap up.
        let _ = steer_into.steer(vec![UserPart::Text { text }]);
        std::future::ready(()).boxed()
    };
    let expired = tokio::select! {
        result = &mut turn => return (result, None),
        expired = expiry(limits, Instant::now(), None, wrap_up) => expired,
    };
    agent.watch.stop_with(StopReason::TimedOut);
    turn_cancel.cancel();
    let result = turn.await;
    tracing::info!(session = %agent.id, limit = %expired.detail(), "a task timed out");
    (result, Some(expired.detail()))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    fn noted(
        log: &Arc<Mutex<Vec<(Duration, String)>>>,
        started: Instant,
    ) -> impl FnOnce(String) -> BoxFuture<'static, ()> {
        let log = log.clone();
        move |text| {
            log.lock().unwrap().push((started.elapsed(), text));
            std::future::ready(()).boxed()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_wall_clock_warns_once_at_80_percent_and_expires_on_time() {
        let started = Instant::now();
        let log = Arc::default();
        let limits = TimeLimits {
            wall: Some(Duration::from_secs(10)),
            idle: None,
        };
        let expired = expiry(limits, started, None, noted(&log, started)).await;
        assert_eq!(expired, Expiry::Wall(Duration::from_secs(10)));
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].0, Duration::from_secs(8));
        assert!(log[0].1.contains("time limit of 10s"), "{}", log[0].1);
    }

    #[tokio::test(start_paused = true)]
    async fn progress_holds_off_the_idle_watchdog_but_not_the_wall_clock() {
        let started = Instant::now();
        let watch = Arc::new(Watch::default());
        let limits = TimeLimits {
            wall: Some(Duration::from_secs(10)),
            idle: Some(Duration::from_secs(3)),
        };
        // Progress every 2s: never idle for 3s, so only the wall clock ends it.
        let ticking = watch.clone();
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                ticking.progressed();
            }
        });
        let expired = expiry(limits, started, Some(watch.clone()), |_| {
            std::future::ready(()).boxed()
        })
        .await;
        ticker.abort();
        assert_eq!(expired, Expiry::Wall(Duration::from_secs(10)));
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        // Silence after that: the idle watchdog fires 3s after the last progress.
        let again = Instant::now();
        watch.progressed();
        let limits = TimeLimits {
            wall: None,
            idle: Some(Duration::from_secs(3)),
        };
        let expired = expiry(limits, again, Some(watch), |_| {
            std::future::ready(()).boxed()
        })
        .await;
        assert_eq!(expired, Expiry::Idle(Duration::from_secs(3)));
        assert_eq!(again.elapsed(), Duration::from_secs(3));
    }

    #[test]
    fn limits_read_as_seconds() {
        assert_eq!(
            Expiry::Wall(Duration::from_millis(1500)).detail(),
            "the time limit of 1.5s was reached"
        );
        assert_eq!(
            Expiry::Idle(Duration::from_secs(30)).detail(),
            "no model output or tool progress for 30s"
        );
    }
}

//! How a `kin mcp` task that ran one turn ended, as the task service records it: completed
//! with the turn's last answer, cancelled, or failed with a reason a parent agent can act on.

use crate::agent::{Agent, StopReason, TurnError};
use crate::tasks::TaskOutcome;

use super::logged;

/// How a task's turn ended.
pub(crate) struct Ended<'a> {
    pub(crate) result: &'a Result<StopReason, TurnError>,
    /// The task was cancelled.
    pub(crate) cancelled: bool,
    /// The limit its time limit reached, when it did.
    pub(crate) expired: Option<String>,
}

/// How a task that ran one turn of `agent` ended.
pub(crate) fn outcome(agent: &Agent, ended: Ended<'_>, max_steps: u32) -> TaskOutcome {
    let result = ended.result;
    let mut failed = match StopReason::of(result, ended.cancelled) {
        StopReason::Completed => {
            return TaskOutcome::completed(agent.with_events(logged::last_answer))
        }
        StopReason::Cancelled => return TaskOutcome::killed(),
        StopReason::TimedOut => TaskOutcome::failed(format!(
            "timed_out: {}",
            ended
                .expired
                .unwrap_or_else(|| "the time limit was reached".to_owned())
        )),
        StopReason::BudgetExhausted => TaskOutcome::failed(
            "budget_exhausted: the token budget of its agent definition was reached".to_owned(),
        ),
        stop => match result {
            // One line, as a delegated child's failure reads.
            Err(error) => TaskOutcome::failed(crate::delegation::diagnostic_of(error)),
            Ok(_) => {
                let (_, message) = crate::headless::exit_status(&Ok(stop), max_steps);
                TaskOutcome::failed(message.unwrap_or_else(|| "the turn failed".to_owned()))
            }
        },
    };
    // What the turn produced before it ended, as a delegated child hands it back.
    let partial = agent.with_events(crate::delegation::last_turn_output);
    failed.output = Some(partial).filter(|text| !text.trim().is_empty());
    failed
}

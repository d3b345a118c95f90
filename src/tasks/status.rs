//! The states a background task goes through.

use crate::session::TaskEndStatus;

/// Where a background task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Waiting for a slot under a concurrency cap; starts running when one frees.
    Queued,
    /// The work is running.
    Running,
    /// It was told to stop and has not yet.
    Stopping,
    /// The work finished.
    Completed,
    /// The work was stopped.
    Killed,
    /// The work failed.
    Failed,
    /// Started by an earlier kin process that ended before the result was read.
    Interrupted,
}

impl TaskStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Completed => "completed",
            Self::Killed => "killed",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
        }
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Killed | Self::Failed | Self::Interrupted
        )
    }
}

/// How a task's end is logged: the same name (a status that is not terminal never ends a
/// task, but would keep its name).
impl From<TaskStatus> for TaskEndStatus {
    fn from(status: TaskStatus) -> Self {
        match status {
            TaskStatus::Completed => Self::Completed,
            TaskStatus::Killed => Self::Killed,
            TaskStatus::Failed => Self::Failed,
            TaskStatus::Interrupted => Self::Interrupted,
            TaskStatus::Queued | TaskStatus::Running | TaskStatus::Stopping => {
                Self::Other(status.as_str().to_owned())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logged_ends_carry_the_status_names() {
        let all = [
            TaskStatus::Queued,
            TaskStatus::Running,
            TaskStatus::Stopping,
            TaskStatus::Completed,
            TaskStatus::Killed,
            TaskStatus::Failed,
            TaskStatus::Interrupted,
        ];
        for status in all {
            let logged = TaskEndStatus::from(status);
            assert_eq!(logged.as_str(), status.as_str());
            assert_eq!(
                matches!(logged, TaskEndStatus::Other(_)),
                !status.is_terminal()
            );
        }
    }
}

//! The states a background task goes through.

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

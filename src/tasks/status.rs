//! The states a background task goes through.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Waiting for a slot under a concurrency cap; starts running when one frees.
    Queued,
    Running,
    Stopping,
    Completed,
    Killed,
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

//! Delegation errors, with the stable messages models and tests rely on.

/// Why a delegation could not start or a message could not be delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelegationError {
    /// The tool context names no live session (the tools word this themselves).
    #[error("no calling agent")]
    NoCaller,
    /// No provider of that name (`spawn`, `fork`, `acp:<name>`).
    #[error("no subagent provider registered for \"{0}\"")]
    NoProvider(String),
    /// The provider cannot do what the request asks.
    #[error("subagent provider \"{provider}\" does not support the \"{capability}\" capability")]
    Unsupported {
        /// The provider's name.
        provider: String,
        /// What it lacks.
        capability: &'static str,
    },
    /// The provider cannot resume a stored child.
    #[error("subagent provider \"{0}\" does not support resuming persisted children (no resume capability)")]
    NoResume(String),
    /// The tree's token or cost budget is spent (the text says which and how much).
    #[error("{0}; no subagent can be started or continued in this session's tree")]
    BudgetSpent(String),
    /// The child would be deeper than allowed.
    #[error("subagent depth {attempted} exceeds maxDepth {max}")]
    Depth {
        /// The child's depth.
        attempted: u32,
        /// The limit.
        max: u32,
    },
    /// The child's depth does not fit a JSON safe integer.
    #[error("subagent child depth exceeds the safe-integer range")]
    DepthOverflow,
    /// The request was cancelled before the child was published.
    #[error("subagent request was aborted before child publication")]
    AbortedBeforePublication,
    /// The tool filter names a tool kin does not have.
    #[error("unknown global tool \"{0}\" in the subagent tool filter")]
    UnknownTool(String),
    /// The `model` a delegation named is not configured (the text lists the ones that are).
    #[error("{0}")]
    UnknownModel(String),
    /// The output schema is not a usable JSON Schema (the text says why).
    #[error("{0}")]
    Schema(String),
    /// The child's provider cannot take a message while it runs.
    #[error(
        "subagent \"{0}\" provider does not accept live delivery; the message was not delivered"
    )]
    NoSteer(String),
    /// The child runs no activation to deliver to.
    #[error("subagent child \"{0}\" is not running; the message was not delivered")]
    NotRunning(String),
    /// The running child answered that it will not take a message now.
    #[error("subagent \"{id}\" is running but did not accept the message ({reason}); the message was not delivered")]
    SteerRefused {
        /// The child's id.
        id: String,
        /// The child's reason.
        reason: String,
    },
    /// The id names a task, e.g. a one-shot background child, which cannot be continued.
    #[error("\"{0}\" is a task id, not a continuable subagent's id (a one-shot background child cannot be continued); the message was not delivered")]
    OneShot(String),
    /// Starting the child failed (worktree, session file, ...).
    #[error("could not set up the subagent: {0}")]
    Setup(String),
    /// The child is live here but not owned by the delegation service.
    #[error("subagent \"{0}\" has a live agent outside control-service ownership; the message was not delivered")]
    OutsideControl(String),
    /// The live agent under the child's id is not its activation's.
    #[error("subagent \"{0}\" registry agent is not the associated activation's agent; the message was not delivered")]
    NotAssociatedAgent(String),
    /// The child's activation is still starting.
    #[error("subagent \"{0}\" activation is starting; the message was not delivered")]
    Starting(String),
    /// The child's task has stopped or is stopping.
    #[error("subagent \"{id}\" task {task} is {status}; the message was not delivered — retry after it settles to start the next activation")]
    TaskNotRunning {
        /// The child's id.
        id: String,
        /// The task's id.
        task: String,
        /// The task's status.
        status: &'static str,
    },
    /// The child stopped before the message reached it.
    #[error("subagent \"{0}\" stopped before delivery; the message was not delivered")]
    StoppedBeforeDelivery(String),
    /// The child cannot be reached.
    #[error("subagent \"{0}\" is unavailable")]
    Unavailable(String),
    /// The child's log has no descriptor kin can continue from.
    #[error("subagent \"{0}\" has no supported continuation descriptor")]
    NoDescriptor(String),
    /// The child is another session's.
    #[error("subagent \"{0}\" belongs to another parent session")]
    Unauthorized(String),
    /// The call was cancelled while the child was looked up.
    #[error("subagent resume was cancelled during lookup")]
    CancelledDuringLookup,
    /// Another kin process holds the child's session.
    #[error("subagent \"{0}\" is active in another kin process; the message was not delivered")]
    ActiveElsewhere(String),
    /// The task service refused.
    #[error("{0}")]
    Task(#[from] crate::tasks::TaskError),
    /// The task a message would join is not the caller's to reach.
    #[error("{0}; the message was not delivered")]
    TaskFence(crate::tasks::TaskError),
}

impl DelegationError {
    /// The error's class name, as rendered in task details (`<Name>: <message>`).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Depth { .. } => "SubagentDepthError",
            Self::DepthOverflow => "RangeError",
            Self::Schema(_) => "JsonSchemaError",
            Self::NoCaller
            | Self::NoProvider(_)
            | Self::Unsupported { .. }
            | Self::NoResume(_)
            | Self::BudgetSpent(_) => "SubagentError",
            Self::NoSteer(_)
            | Self::NotRunning(_)
            | Self::SteerRefused { .. }
            | Self::OneShot(_)
            | Self::OutsideControl(_)
            | Self::NotAssociatedAgent(_)
            | Self::Starting(_)
            | Self::TaskNotRunning { .. }
            | Self::StoppedBeforeDelivery(_)
            | Self::Unavailable(_)
            | Self::NoDescriptor(_)
            | Self::Unauthorized(_)
            | Self::CancelledDuringLookup
            | Self::ActiveElsewhere(_) => "SubagentControlError",
            Self::Task(_) | Self::TaskFence(_) => "TaskError",
            Self::UnknownModel(_) => "ToolArgsError",
            Self::AbortedBeforePublication | Self::UnknownTool(_) | Self::Setup(_) => "Error",
        }
    }

    /// A stable machine-readable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoCaller => "NO_CALLER",
            Self::BudgetSpent(_) => "BUDGET_EXHAUSTED",
            Self::NoProvider(_) => "NO_PROVIDER",
            Self::Unsupported { .. } | Self::NoResume(_) => "UNSUPPORTED_CAPABILITY",
            Self::Depth { .. } | Self::DepthOverflow => "DEPTH_EXCEEDED",
            Self::AbortedBeforePublication => "ABORTED",
            Self::UnknownTool(_) => "UNKNOWN_TOOL",
            Self::UnknownModel(_) => "UNKNOWN_MODEL",
            Self::Schema(_) => "INVALID_SCHEMA",
            Self::NoSteer(_)
            | Self::NotRunning(_)
            | Self::SteerRefused { .. }
            | Self::OneShot(_)
            | Self::Starting(_)
            | Self::TaskNotRunning { .. }
            | Self::StoppedBeforeDelivery(_)
            | Self::ActiveElsewhere(_) => "NOT_DELIVERED",
            Self::Setup(_) => "SETUP_FAILED",
            Self::OutsideControl(_) | Self::NotAssociatedAgent(_) => "OWNERSHIP_CONFLICT",
            Self::Unavailable(_) | Self::NoDescriptor(_) => "NOT_RESUMABLE",
            Self::Unauthorized(_) => "UNAUTHORIZED",
            Self::CancelledDuringLookup => "CANCELLED",
            Self::Task(_) => "TASK_ERROR",
            Self::TaskFence(_) => "NOT_DELIVERED",
        }
    }

    /// `<Name>: <message>`.
    pub fn detail(&self) -> String {
        format!("{}: {self}", self.name())
    }
}

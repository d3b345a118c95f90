//! Delegation errors, with the stable messages models and tests rely on.

/// Why a delegation could not start or a message could not be delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelegationError {
    /// The tool context names no live session (the tools word this themselves).
    #[error("no calling agent")]
    NoCaller,
    #[error("no subagent provider registered for \"{0}\"")]
    NoProvider(String),
    #[error("subagent provider \"{provider}\" does not support the \"{capability}\" capability")]
    Unsupported {
        provider: String,
        capability: &'static str,
    },
    #[error("subagent provider \"{0}\" does not support resuming persisted children (no resume capability)")]
    NoResume(String),
    /// The tree's token or cost budget is spent (the text says which and how much).
    #[error("{0}; no subagent can be started or continued in this session's tree")]
    BudgetSpent(String),
    #[error("subagent depth {attempted} exceeds maxDepth {max}")]
    Depth { attempted: u32, max: u32 },
    #[error("subagent child depth exceeds the safe-integer range")]
    DepthOverflow,
    #[error("subagent request was aborted before child publication")]
    AbortedBeforePublication,
    #[error("unknown global tool \"{0}\" in the subagent tool filter")]
    UnknownTool(String),
    /// The `model` a delegation named is not configured (the text lists the ones that are).
    #[error("{0}")]
    UnknownModel(String),
    #[error("{0}")]
    Schema(String),
    #[error(
        "subagent \"{0}\" provider does not accept live delivery; the message was not delivered"
    )]
    NoSteer(String),
    #[error("subagent child \"{0}\" is not running; the message was not delivered")]
    NotRunning(String),
    /// The running child answered that it will not take a message now.
    #[error("subagent \"{id}\" is running but did not accept the message ({reason}); the message was not delivered")]
    SteerRefused { id: String, reason: String },
    /// The id names a task, e.g. a one-shot background child, which cannot be continued.
    #[error("\"{0}\" is a task id, not a continuable subagent's id (a one-shot background child cannot be continued); the message was not delivered")]
    OneShot(String),
    #[error("could not set up the subagent: {0}")]
    Setup(String),
    #[error("subagent \"{0}\" has a live agent outside control-service ownership; the message was not delivered")]
    OutsideControl(String),
    #[error("subagent \"{0}\" registry agent is not the associated activation's agent; the message was not delivered")]
    NotAssociatedAgent(String),
    #[error("subagent \"{0}\" activation is starting; the message was not delivered")]
    Starting(String),
    #[error("subagent \"{id}\" task {task} is {status}; the message was not delivered — retry after it settles to start the next activation")]
    TaskNotRunning {
        id: String,
        task: String,
        status: &'static str,
    },
    #[error("subagent \"{0}\" stopped before delivery; the message was not delivered")]
    StoppedBeforeDelivery(String),
    #[error("subagent \"{0}\" is unavailable")]
    Unavailable(String),
    #[error("subagent \"{0}\" has no supported continuation descriptor")]
    NoDescriptor(String),
    #[error("subagent \"{0}\" belongs to another parent session")]
    Unauthorized(String),
    #[error("subagent resume was cancelled during lookup")]
    CancelledDuringLookup,
    #[error("subagent \"{0}\" is active in another kin process; the message was not delivered")]
    ActiveElsewhere(String),
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

//! Delegation errors, with the stable messages models and tests rely on.

/// Why a delegation could not start or a message could not be delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubagentError {
    #[error("a subagent provider named \"{0}\" is already registered")]
    DuplicateProvider(String),
    #[error("no subagent provider registered for \"{0}\"")]
    NoProvider(String),
    #[error("subagent provider \"{provider}\" does not support the \"{capability}\" capability")]
    Unsupported {
        provider: String,
        capability: &'static str,
    },
    #[error("subagent provider \"{0}\" does not support resuming persisted children (no resume capability)")]
    NoResume(String),
    #[error("subagent depth {attempted} exceeds maxDepth {max}")]
    Depth { attempted: u32, max: u32 },
    #[error("subagent child depth exceeds the safe-integer range")]
    DepthOverflow,
    #[error("subagent request was aborted before child publication")]
    AbortedBeforePublication,
    #[error("unknown global tool \"{0}\" in the subagent tool filter")]
    UnknownTool(String),
    #[error("{0}")]
    Schema(String),
    #[error(
        "subagent \"{0}\" provider does not accept live delivery; the message was not delivered"
    )]
    NoSteer(String),
    #[error("{0}")]
    NotRunning(String),
    #[error("could not set up the subagent: {0}")]
    Setup(String),
}

impl SubagentError {
    /// The error's class name, as rendered in task details (`<Name>: <message>`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Depth { .. } => "SubagentDepthError",
            Self::DepthOverflow => "RangeError",
            Self::Schema(_) => "JsonSchemaError",
            Self::DuplicateProvider(_)
            | Self::NoProvider(_)
            | Self::Unsupported { .. }
            | Self::NoResume(_) => "SubagentError",
            Self::NoSteer(_) | Self::NotRunning(_) => "SubagentControlError",
            Self::AbortedBeforePublication | Self::UnknownTool(_) | Self::Setup(_) => "Error",
        }
    }

    /// A stable machine-readable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            Self::DuplicateProvider(_) => "DUPLICATE_PROVIDER",
            Self::NoProvider(_) => "NO_PROVIDER",
            Self::Unsupported { .. } | Self::NoResume(_) => "UNSUPPORTED_CAPABILITY",
            Self::Depth { .. } | Self::DepthOverflow => "DEPTH_EXCEEDED",
            Self::AbortedBeforePublication => "ABORTED",
            Self::UnknownTool(_) => "UNKNOWN_TOOL",
            Self::Schema(_) => "INVALID_SCHEMA",
            Self::NoSteer(_) | Self::NotRunning(_) => "NOT_DELIVERED",
            Self::Setup(_) => "SETUP_FAILED",
        }
    }

    /// `<Name>: <message>`.
    pub fn detail(&self) -> String {
        format!("{}: {self}", self.name())
    }
}

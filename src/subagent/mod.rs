//! Delegation: the seam between the model's `subagent` tools and the providers that run
//! children.
//!
//! [`SubagentService`] is a registry of named [`Provider`]s. It checks a request against the
//! provider's capabilities before any child exists, dispatches `start` or `resume`, and reports
//! each run's lifecycle (`subagent/start` once the child is published, `subagent/end` when its
//! result settles). A [`Run`] is one activation of a child: its `result`, an idempotent
//! `dispose` that waits until the child is quiet, and, where the provider supports it, a
//! strict `steer` into the running turn. Providers: `spawn` (fresh child) and `fork` (seeded
//! with the parent's completed turns), both in-process; they reach sessions and turns only
//! through [`ChildHost`]. Both can resume a stored child: [`SubagentControl`] runs continuable
//! background children (stable ids, one task per activation, `send_message`), rebuilt from the
//! [`Descriptor`] their first turn logs. `acp:<name>` runs a configured ACP agent as a one-shot
//! subprocess.

mod acp;
mod control;
mod descriptor;
mod error;
mod fork;
mod host;
mod inprocess;
mod service;
mod spawn;
mod tools;

use std::sync::Arc;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, AgentOptions};
use crate::session::{AssistantBlock, UserPart};

pub use acp::AcpProvider;
pub use control::{ChildSummary, ContinuableStart, Delivery, SubagentControl, RESUME_LABEL_MAX};
pub use descriptor::{Descriptor, StoredToolFilter, DESCRIPTOR_EVENT, DESCRIPTOR_VERSION};
pub use error::SubagentError;
pub use fork::ForkProvider;
pub use host::ChildHost;
pub use service::{Lifecycle, RunIdentity, SubagentService};
pub use spawn::SpawnProvider;
pub use tools::{ListAgentsTool, SendMessageTool, SubagentTool, DEFAULT_MAX_DEPTH};

/// Which optional request fields a provider can honour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    pub output_schema: bool,
    pub depth_limit: bool,
    pub tool_filter: bool,
    pub persona: bool,
}

impl Capabilities {
    pub const ALL: Self = Self {
        output_schema: true,
        depth_limit: true,
        tool_filter: true,
        persona: true,
    };
}

/// Restricts the tools a child may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    pub allow: Option<Vec<String>>,
    pub deny: Option<Vec<String>>,
}

/// Everything a provider needs to start a child.
#[derive(Clone)]
pub struct StartRequest {
    /// Becomes the child's first user message.
    pub prompt: Vec<UserPart>,
    /// The delegating agent.
    pub parent: Arc<Agent>,
    /// Cancels the child: before publication the start fails and leaves nothing behind
    /// (an in-process continuable start still publishes, and its turn ends at once);
    /// after it, the child's turn is cancelled.
    pub cancel: CancellationToken,
    /// Overrides of the model settings the child inherits.
    pub agent_options: Option<AgentOptions>,
    /// JSON Schema (object-rooted) the child's result must satisfy.
    pub output_schema: Option<Value>,
    /// Absolute cap: the child's depth must not exceed it.
    pub max_depth: Option<u32>,
    pub tool_filter: Option<ToolFilter>,
    /// Replaces the child's persona.
    pub persona: Option<String>,
    /// A short label shown to the user (the tool's `description`).
    pub label: Option<String>,
    /// The editor of the delegating session: the child asks it for permissions and uses its
    /// files and terminals, as the parent would.
    pub client: Option<Arc<dyn crate::tools::ClientBridge>>,
    /// Set by the control service for a continuable child: the id to publish it under and
    /// the descriptor its first turn records.
    pub continuation: Option<Continuation>,
}

/// The identity and recipe of a continuable child, fixed before it exists.
#[derive(Debug, Clone)]
pub struct Continuation {
    pub session_id: String,
    pub descriptor: Descriptor,
}

impl StartRequest {
    pub fn new(prompt: Vec<UserPart>, parent: Arc<Agent>, cancel: CancellationToken) -> Self {
        Self {
            prompt,
            parent,
            cancel,
            agent_options: None,
            output_schema: None,
            max_depth: None,
            tool_filter: None,
            persona: None,
            label: None,
            client: None,
            continuation: None,
        }
    }
}

/// Continues a stored child with a new message.
#[derive(Clone)]
pub struct ResumeRequest {
    pub session_id: String,
    pub prompt: Vec<UserPart>,
    /// The live direct parent recorded in the child's header.
    pub parent: Arc<Agent>,
    /// Owned by the activation; exists before the child is looked up.
    pub cancel: CancellationToken,
    /// How to rebuild the child (read from its own events).
    pub descriptor: Descriptor,
    /// The editor of the parent session, as for a start.
    pub client: Option<Arc<dyn crate::tools::ClientBridge>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Completed,
    Aborted,
    Error,
    MaxTokens,
    Refusal,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Aborted => "aborted",
            Self::Error => "error",
            Self::MaxTokens => "max-tokens",
            Self::Refusal => "refusal",
        }
    }
}

impl From<crate::agent::host::StopReason> for StopReason {
    fn from(stop: crate::agent::host::StopReason) -> Self {
        use crate::agent::host::StopReason as Host;
        match stop {
            Host::EndTurn => Self::Completed,
            Host::MaxTokens => Self::MaxTokens,
            Host::Refusal => Self::Refusal,
            Host::Cancelled => Self::Aborted,
            // A child that runs out of steps has not answered: its run failed.
            Host::MaxTurnRequests | Host::Error => Self::Error,
        }
    }
}

/// How one activation of a child ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentResult {
    /// The content of the child's last assistant message of this activation.
    pub output: Vec<AssistantBlock>,
    /// The captured value, when a schema was requested and satisfied.
    pub structured: Option<Value>,
    pub stop_reason: StopReason,
    /// Why the run failed, when the provider knows (e.g. how an ACP child process ended).
    pub error: Option<String>,
}

impl SubagentResult {
    /// The text blocks of the output, concatenated (reasoning is left out).
    pub fn text(&self) -> String {
        self.output
            .iter()
            .filter_map(|block| match block {
                AssistantBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// The depth of a child of `parent`, checked against the request's `max_depth`.
pub(crate) fn child_depth(parent: &Agent, max_depth: Option<u32>) -> Result<u32, SubagentError> {
    let depth = parent
        .delegation_depth()
        .checked_add(1)
        .ok_or(SubagentError::DepthOverflow)?;
    match max_depth {
        Some(max) if depth > max => Err(SubagentError::Depth {
            attempted: depth,
            max,
        }),
        _ => Ok(depth),
    }
}

/// Why a live delivery did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SteerRefusal {
    /// The child's turn is over, or ended before the child took the message.
    Stopped,
    /// The child said it will not take a message now; the reason is its own words.
    Refused(String),
}

/// The provider-specific half of a [`Run`].
pub trait RunControl: Send + Sync {
    /// Cancels what is left and resolves once the child is quiet; safe to call twice.
    fn dispose(&self) -> BoxFuture<'static, ()>;
    /// Live delivery into the running turn, resolving once the child took the message or
    /// refused it; `None` if the provider has none.
    fn steer(&self, content: Vec<UserPart>)
        -> Option<BoxFuture<'static, Result<(), SteerRefusal>>>;
}

/// One activation of a child. The holder must `dispose` it on every path.
#[derive(Clone)]
pub struct Run {
    /// The child session id (in-process), or a fresh id for remote children.
    pub id: String,
    /// The live child agent, for in-process runs.
    pub local_agent: Option<Arc<Agent>>,
    result: Shared<BoxFuture<'static, SubagentResult>>,
    control: Arc<dyn RunControl>,
}

impl Run {
    pub fn new(
        id: String,
        local_agent: Option<Arc<Agent>>,
        result: BoxFuture<'static, SubagentResult>,
        control: Arc<dyn RunControl>,
    ) -> Self {
        Self::from_shared(id, local_agent, result.shared(), control)
    }

    /// [`Run::new`] for a provider that keeps a handle on the result itself.
    pub(crate) fn from_shared(
        id: String,
        local_agent: Option<Arc<Agent>>,
        result: Shared<BoxFuture<'static, SubagentResult>>,
        control: Arc<dyn RunControl>,
    ) -> Self {
        Self {
            id,
            local_agent,
            result,
            control,
        }
    }

    /// The outcome, without the run around it: an observer holding it keeps no control (nor,
    /// once settled, anything of the child) alive.
    pub(crate) fn settled(&self) -> Shared<BoxFuture<'static, SubagentResult>> {
        self.result.clone()
    }

    /// The outcome of this activation; never fails for child-level failures.
    pub async fn result(&self) -> SubagentResult {
        self.result.clone().await
    }

    pub async fn dispose(&self) {
        self.control.dispose().await
    }

    /// Delivers a message into the child's running turn. Resolves once the child took it;
    /// fails when the provider has no live delivery, the child is not running or refuses it.
    pub fn steer(&self, content: Vec<UserPart>) -> BoxFuture<'static, Result<(), SubagentError>> {
        let id = self.id.clone();
        let Some(delivery) = self.control.steer(content) else {
            return std::future::ready(Err(SubagentError::NoSteer(id))).boxed();
        };
        async move {
            delivery.await.map_err(|refusal| match refusal {
                SteerRefusal::Stopped => SubagentError::NotRunning(id),
                SteerRefusal::Refused(reason) => SubagentError::SteerRefused { id, reason },
            })
        }
        .boxed()
    }
}

/// A way of running children.
pub trait Provider: Send + Sync {
    fn name(&self) -> &str;
    fn capabilities(&self) -> Capabilities;
    /// Whether children see the parent's conversation (drives tool wording only).
    fn inherits_parent_context(&self) -> bool;
    /// Publishes a child and starts its first turn; resolves once the child is published.
    fn start(&self, request: StartRequest) -> BoxFuture<'static, Result<Run, SubagentError>>;
    /// Whether [`Provider::resume`] is supported.
    fn can_resume(&self) -> bool {
        false
    }
    /// Whether background children are continuable, if known before one starts (tool wording).
    fn continuable_known(&self) -> Option<bool> {
        Some(self.can_resume())
    }
    /// Whether a background child of `request` would be continuable, decided before it starts.
    /// By default [`Provider::can_resume`]; a provider whose children tell it themselves (ACP)
    /// may launch one to ask.
    fn continuable_start(&self, _request: &StartRequest) -> BoxFuture<'static, bool> {
        std::future::ready(self.can_resume()).boxed()
    }
    /// Cold-resumes a stored child for one more turn.
    fn resume(&self, _request: ResumeRequest) -> BoxFuture<'static, Result<Run, SubagentError>> {
        let name = self.name().to_owned();
        std::future::ready(Err(SubagentError::NoResume(name))).boxed()
    }
}

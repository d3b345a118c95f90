//! What a delegation asks for: the tools' [`Request`], and the start ([`StartRequest`]) or
//! resume ([`ResumeRequest`]) of a child it becomes, run in the foreground or the background
//! ([`Mode`]).

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::DelegationError;
use crate::agent::{Agent, AgentOptions, Budget};
use crate::session::{Descriptor, UserPart};
use crate::tools::ClientBridge;

/// Restricts the tools a child may use (the one type; stored as is in a descriptor).
pub use crate::session::ToolFilter;

/// Children may be this deep unless configured otherwise (a child cannot delegate further).
pub const DEFAULT_MAX_DEPTH: u32 = 1;

/// Where a delegated child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The call waits for the child's answer.
    Foreground,
    /// The call returns at once with a task id (and, when continuable, the child's id).
    Background,
}

/// What the tools hand the service for one delegation.
pub struct Request {
    /// The provider the tool is bound to (`spawn`, `fork`, `acp:<name>`).
    pub provider: String,
    /// The child's prompt.
    pub prompt: Vec<UserPart>,
    /// The tool's `description`: the child's label and its task's.
    pub label: String,
    /// The editor of the calling session.
    pub client: Option<Arc<dyn ClientBridge>>,
    /// The tool call's: cancels a foreground child (a background one has its task's).
    pub cancel: CancellationToken,
    /// The configured model to run the child on; by default the one the caller runs on now.
    pub model: Option<String>,
    /// The delegating tool call (a foreground child process's summary is shown on it).
    pub call_id: Option<String>,
    /// The child's token budget, instead of the configured `child_budget_tokens`.
    pub budget_tokens: Option<u64>,
    /// The child's wall-clock limit, instead of the configured `[delegation] timeout`.
    pub timeout: Option<std::time::Duration>,
    /// Replaces the child's persona (an agent definition's instructions).
    pub persona: Option<String>,
    /// The only tools the child may use (an agent definition's `tools`).
    pub tools: Option<Vec<String>>,
    /// The child's own permission mode, clamped to the caller's.
    pub permission: Option<crate::tools::PermissionMode>,
    /// Run the child in a fresh git worktree (in-process children only).
    pub worktree: bool,
}

/// Everything a provider needs to start a child.
#[derive(Clone)]
pub struct StartRequest {
    /// Becomes the child's first user message.
    pub(crate) prompt: Vec<UserPart>,
    /// The delegating agent.
    pub(crate) parent: Arc<Agent>,
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
    /// Which tools the child may use.
    pub tool_filter: Option<ToolFilter>,
    /// Replaces the child's persona.
    pub persona: Option<String>,
    /// The child's own permission mode; the parent's stays its ceiling (never wider).
    pub(crate) permission: Option<crate::tools::PermissionMode>,
    /// A short label shown to the user (the tool's `description`).
    pub(crate) label: Option<String>,
    /// Run an in-process child in a fresh git worktree of the parent's repository.
    pub worktree: bool,
    /// The wall-clock limit of the child's activation, instead of the configured one.
    pub(crate) timeout: Option<std::time::Duration>,
    /// The child's token budget, instead of the configured `child_budget_tokens`.
    pub(crate) budget_tokens: Option<u64>,
    /// Set by the service: the budget the child runs under.
    pub(crate) budget: Option<Budget>,
    /// Set by the service: the child runs as a background task, whose `task/end` carries its
    /// cost (a foreground child's goes to the parent's running turn).
    pub(crate) background: bool,
    /// The editor of the delegating session: the child asks it for permissions and uses its
    /// files and terminals, as the parent would.
    pub(crate) client: Option<Arc<dyn ClientBridge>>,
    /// The delegating tool call of a foreground child.
    pub(crate) call_id: Option<String>,
    /// Set by the service for a continuable child: the id to publish it under and the
    /// descriptor its first turn records.
    pub(crate) continuation: Option<Continuation>,
}

/// The identity and recipe of a continuable child, fixed before it exists.
#[derive(Debug, Clone)]
pub(crate) struct Continuation {
    pub(crate) session_id: String,
    pub(crate) descriptor: Descriptor,
}

impl StartRequest {
    /// A request for `prompt` under `parent`, cancelled by `cancel`; every option unset (the parent's model and persona, no schema, filter or limits).
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
            permission: None,
            label: None,
            worktree: false,
            timeout: None,
            budget_tokens: None,
            budget: None,
            background: false,
            client: None,
            call_id: None,
            continuation: None,
        }
    }

    /// The recipe a continuable child of this request is rebuilt from.
    pub(crate) fn descriptor(&self, provider: &str) -> Descriptor {
        let overrides = self.agent_options.as_ref();
        Descriptor {
            version: Descriptor::VERSION,
            provider: provider.to_owned(),
            agent_provider: overrides
                .and_then(|o| o.provider.clone())
                .or_else(|| self.parent.options.provider.clone()),
            agent_model: overrides
                .and_then(|o| o.model.clone())
                .or_else(|| self.parent.options.model.clone()),
            persona: self.persona.clone(),
            tool_filter: self.tool_filter.clone(),
            permission: self.permission.map(|mode| mode.id().to_owned()),
            timeout_ms: self
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            budget_tokens: self.budget_tokens,
            provider_data: None,
        }
    }

    /// The depth of the child, checked against `max_depth` (once per start, here).
    pub(crate) fn child_depth(&self) -> Result<u32, DelegationError> {
        child_depth(&self.parent, self.max_depth)
    }
}

/// Continues a stored child with a new message.
#[derive(Clone)]
pub(crate) struct ResumeRequest {
    pub(crate) session_id: String,
    pub(crate) prompt: Vec<UserPart>,
    /// The live direct parent recorded in the child's header.
    pub(crate) parent: Arc<Agent>,
    /// Owned by the activation; exists before the child is looked up.
    pub cancel: CancellationToken,
    /// How to rebuild the child (read from its own events).
    pub(crate) descriptor: Descriptor,
    /// The editor of the parent session, as for a start.
    pub(crate) client: Option<Arc<dyn ClientBridge>>,
    /// Set by the service: the budget the activation runs under.
    pub(crate) budget: Option<Budget>,
}

/// The depth of a child of `parent`, checked against `max_depth`.
pub(crate) fn child_depth(parent: &Agent, max_depth: Option<u32>) -> Result<u32, DelegationError> {
    let depth = parent
        .delegation_depth()
        .checked_add(1)
        .ok_or(DelegationError::DepthOverflow)?;
    match max_depth {
        Some(max) if depth > max => Err(DelegationError::Depth {
            attempted: depth,
            max,
        }),
        _ => Ok(depth),
    }
}

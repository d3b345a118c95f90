//! A way of running children ([`Provider`]), and one activation of a child ([`Run`]): its
//! result, an idempotent `dispose` that waits until the child is quiet, and, where the
//! provider supports it, a strict `steer` into the running turn.

use std::sync::Arc;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use serde_json::Value;

use super::request::{ResumeRequest, StartRequest};
use super::DelegationError;
use crate::agent::host::AgentHost;
use crate::agent::{Agent, StopReason, Watch};
use crate::session::{AssistantBlock, UserPart};

/// Which optional request fields a provider can honour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Capabilities {
    pub(crate) output_schema: bool,
    pub(crate) depth_limit: bool,
    pub(crate) tool_filter: bool,
    pub(crate) persona: bool,
}

impl Capabilities {
    pub(crate) const ALL: Self = Self {
        output_schema: true,
        depth_limit: true,
        tool_filter: true,
        persona: true,
    };
}

/// What runs a provider's children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderKind {
    /// kin itself, in this process (`spawn`, `fork`).
    InProcess,
    /// A child agent process spoken to over ACP (`acp:<name>`).
    Acp,
}

impl ProviderKind {
    /// The kind of the provider named `name` (as records store it): the one place a provider
    /// name is read for its kind.
    pub(crate) fn of(name: &str) -> Self {
        match name.starts_with(ACP_PREFIX) {
            true => Self::Acp,
            false => Self::InProcess,
        }
    }
}

/// How the names of ACP providers start (`acp:<name>`).
pub(crate) const ACP_PREFIX: &str = "acp:";

/// Whether a provider's background children can be continued (`send_message`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Continuable {
    Known(bool),
    /// Only a launched child can tell (an ACP agent says so in its `initialize` answer).
    AskChild,
}

/// A way of running children.
pub(crate) trait Provider: Send + Sync {
    fn name(&self) -> &str;
    /// What runs its children.
    fn kind(&self) -> ProviderKind;
    /// The name of the model-facing tool bound to it.
    fn tool(&self) -> &str;
    fn capabilities(&self) -> Capabilities;
    /// Whether children see the parent's conversation (drives tool wording only).
    fn inherits_parent_context(&self) -> bool;
    /// Publishes a child and starts its first turn; resolves once the child is published.
    fn start(
        &self,
        host: &Arc<AgentHost>,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<Run, DelegationError>>;
    /// Whether background children can be continued, as far as known now.
    fn continuable(&self) -> Continuable {
        Continuable::Known(false)
    }
    /// For [`Continuable::AskChild`]: launches a child of `request` just to ask it.
    fn probe(&self, _host: &AgentHost, _request: &StartRequest) -> BoxFuture<'static, bool> {
        std::future::ready(false).boxed()
    }
    /// Cold-resumes a stored child for one more turn.
    fn resume(
        &self,
        _host: &Arc<AgentHost>,
        _request: ResumeRequest,
    ) -> BoxFuture<'static, Result<Run, DelegationError>> {
        let name = self.name().to_owned();
        std::future::ready(Err(DelegationError::NoResume(name))).boxed()
    }
}

/// How one activation of a child ended.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentResult {
    /// The content of the child's last assistant message of this activation.
    pub output: Vec<AssistantBlock>,
    /// The captured value, when a schema was requested and satisfied.
    pub structured: Option<Value>,
    /// How the child's turn ended.
    pub stop_reason: StopReason,
    /// Why the run did not complete, in one line a model can act on, when known (see
    /// `diagnostic.rs`).
    pub(crate) diagnostic: Option<String>,
    /// The stop reason as the child named it, when kin has no word for it (an ACP child's
    /// `max_turn_requests`): the run "ended abnormally".
    pub(crate) abnormal: Option<String>,
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

    /// A run that failed, with its diagnostic, before it produced anything.
    pub(crate) fn failed(diagnostic: impl Into<String>) -> Self {
        Self {
            output: Vec::new(),
            structured: None,
            stop_reason: StopReason::Error,
            diagnostic: Some(diagnostic.into()),
            abnormal: None,
        }
    }

    /// The same result after a failed dispose: never completed, both causes kept.
    pub(crate) fn with_dispose_failure(mut self, failure: Option<String>) -> Self {
        let Some(failure) = failure else {
            return self;
        };
        if self.stop_reason == StopReason::Completed {
            self.stop_reason = StopReason::Error;
        }
        self.diagnostic = Some(match self.diagnostic.take() {
            Some(run) => format!("{run}; dispose failed: {failure}"),
            None => format!("dispose failed: {failure}"),
        });
        self
    }
}

/// Why a live delivery did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SteerRefusal {
    /// The child's turn is over, or ended before the child took the message.
    Stopped,
    /// The child said it will not take a message now; the reason is its own words.
    Refused(String),
}

/// The provider-specific half of a [`Run`].
pub(crate) trait RunControl: Send + Sync {
    /// Cancels what is left and resolves once the child is quiet; safe to call twice. Resolves
    /// to what went wrong on the way (a child process that would not exit), if anything.
    fn dispose(&self) -> BoxFuture<'static, Option<String>>;
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
    /// The progress clock the idle watchdog reads (an in-process child's is its agent's).
    progress: Option<Arc<Watch>>,
    result: Shared<BoxFuture<'static, SubagentResult>>,
    control: Arc<dyn RunControl>,
}

impl Run {
    pub(crate) fn new(
        id: String,
        local_agent: Option<Arc<Agent>>,
        result: Shared<BoxFuture<'static, SubagentResult>>,
        control: Arc<dyn RunControl>,
    ) -> Self {
        Self {
            id,
            progress: local_agent.as_ref().map(|agent| agent.watch.clone()),
            local_agent,
            result,
            control,
        }
    }

    /// The same activation, its progress read from `watch` (a child in another process).
    pub(crate) fn with_progress(self, watch: Arc<Watch>) -> Self {
        Self {
            progress: Some(watch),
            ..self
        }
    }

    /// The progress clock of the child, if it has one.
    pub(crate) fn progress(&self) -> Option<Arc<Watch>> {
        self.progress.clone()
    }

    /// The same activation with its result read through `result` (a watchdog's, say).
    pub(crate) fn with_result(self, result: Shared<BoxFuture<'static, SubagentResult>>) -> Self {
        Self { result, ..self }
    }

    /// The outcome of this activation; never fails for child-level failures.
    pub async fn result(&self) -> SubagentResult {
        self.result.clone().await
    }

    /// Ends the activation's hold on the child (its session and what the provider keeps for
    /// it). Returns what went wrong while disposing, if anything: the child may not be quiet.
    pub async fn dispose(&self) -> Option<String> {
        self.control.dispose().await
    }

    /// Waits for the result, then disposes: a failed dispose never passes for a completed run,
    /// and never hides the run's own failure (see [`SubagentResult::with_dispose_failure`]).
    pub async fn settle(&self) -> SubagentResult {
        let result = self.result().await;
        let disposed = self.dispose().await;
        if let Some(failure) = &disposed {
            tracing::warn!(child = %self.id, %failure, "a child's dispose failed");
        }
        result.with_dispose_failure(disposed)
    }

    /// Delivers a message into the child's running turn. Resolves once the child took it;
    /// fails when the provider has no live delivery, the child is not running or refuses it.
    pub fn steer(&self, content: Vec<UserPart>) -> BoxFuture<'static, Result<(), DelegationError>> {
        let id = self.id.clone();
        let Some(delivery) = self.control.steer(content) else {
            return std::future::ready(Err(DelegationError::NoSteer(id))).boxed();
        };
        async move {
            delivery.await.map_err(|refusal| match refusal {
                SteerRefusal::Stopped => DelegationError::NotRunning(id),
                SteerRefusal::Refused(reason) => DelegationError::SteerRefused { id, reason },
            })
        }
        .boxed()
    }
}

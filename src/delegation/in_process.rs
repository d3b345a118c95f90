//! The in-process provider: `spawn` (a fresh child that sees only its prompt) and `fork` (a
//! child seeded with the parent's completed turns: everything up to its last `turn/end`; the
//! turn in flight is never copied, and a parent with no completed turn forks like a spawn).
//! Builds and publishes a child agent, runs its turn through the host, and reads the result of
//! that activation. Both can resume a stored child from its own transcript (a fork child never
//! re-reads its parent).
//!
//! Everything up to publication is synchronous, so a start either fails with nothing left
//! behind or returns a published child; after publication, cancellation cancels the child turn.
//! A continuable start is never aborted by cancellation: its child always reaches the store.

use std::sync::{Arc, Mutex, Weak};

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::child_costs::ChildCosts;
use super::outcome::child_output;
use super::provider::{
    Capabilities, Continuable, Provider, ProviderKind, Run, RunControl, SteerRefusal,
};
use super::request::{ResumeRequest, StartRequest, ToolFilter};
use super::{diagnostic, DelegationError, SubagentResult};
use crate::agent::host::AgentHost;
use crate::agent::mcp_view::McpView;
use crate::agent::structured::StructuredOutputTool;
use crate::agent::{Agent, AgentOptions, AgentSpec, StopReason, StructuredCapture, TurnError};
use crate::process::git_worktree::{self as worktree, Worktree};
use crate::session::history::completed_turn_seed;
use crate::session::{AssistantBlock, Empty, Event, EventBody, Header, UserPart};
use crate::sync::lock;
use crate::tools::{ClientBridge, PermissionMode, ToolRegistry};

/// What a child starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seed {
    /// Only its prompt (`spawn`).
    Fresh,
    /// The parent's completed turns (`fork`).
    CompletedTurns,
}

/// One in-process provider.
pub(crate) struct InProcessProvider {
    seed: Seed,
    /// Where a background child's cost is held for its task.
    costs: Arc<ChildCosts>,
}

impl InProcessProvider {
    pub(crate) const SPAWN: &'static str = "spawn";
    pub(crate) const FORK: &'static str = "fork";

    pub(crate) fn new(seed: Seed, costs: Arc<ChildCosts>) -> Self {
        Self { seed, costs }
    }
}

impl Provider for InProcessProvider {
    fn name(&self) -> &str {
        match self.seed {
            Seed::Fresh => Self::SPAWN,
            Seed::CompletedTurns => Self::FORK,
        }
    }

    fn tool(&self) -> &str {
        match self.seed {
            Seed::Fresh => "subagent",
            Seed::CompletedTurns => "subagent_fork",
        }
    }

    fn kind(&self) -> ProviderKind {
        ProviderKind::InProcess
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    fn inherits_parent_context(&self) -> bool {
        self.seed == Seed::CompletedTurns
    }

    fn start(
        &self,
        host: &Arc<AgentHost>,
        request: StartRequest,
    ) -> BoxFuture<'static, Result<Run, DelegationError>> {
        let seed = match self.seed {
            Seed::Fresh => Vec::new(),
            Seed::CompletedTurns => request.parent.with_events(completed_turn_seed),
        };
        let id = match &request.continuation {
            Some(continuation) => continuation.session_id.clone(),
            None => uuid::Uuid::new_v4().to_string(),
        };
        // A background child's cost is its task's, from its first turn on.
        if !request.background {
            return start_maybe_isolated(host, request, seed, id);
        }
        self.costs.hold(&id);
        let started = start_maybe_isolated(host, request, seed, id.clone());
        self.costs.unless_failed(id, started)
    }

    fn continuable(&self) -> Continuable {
        Continuable::Known(true)
    }

    fn resume(
        &self,
        host: &Arc<AgentHost>,
        request: ResumeRequest,
    ) -> BoxFuture<'static, Result<Run, DelegationError>> {
        // A continuation always runs as a background task.
        let id = request.session_id.clone();
        self.costs.hold(&id);
        let resumed = resume_maybe_isolated(host, request);
        self.costs.unless_failed(id, resumed)
    }
}

/// Starts child `id`, first making its worktree when the request asks for one.
fn start_maybe_isolated(
    host: &Arc<AgentHost>,
    request: StartRequest,
    seed: Vec<Event>,
    id: String,
) -> BoxFuture<'static, Result<Run, DelegationError>> {
    if !request.worktree {
        return std::future::ready(start(host, request, seed, id, None)).boxed();
    }
    let host = host.clone();
    async move {
        // Made first, cancellably: a kill during the checkout stops git.
        let worktree = worktree::locate(&request.parent.cwd, &id, &host.git())
            .await
            .map_err(worktree_error)?;
        match worktree::add(&worktree, &request.cancel).await {
            Ok(()) => start(&host, request, seed, id, Some(worktree)),
            // A continuable child's id is the model's already: it is stored anyway, with
            // the worktree it was to work in as its cwd (made again when it is continued),
            // and its turn ends at once as cancelled.
            Err(worktree::WorktreeError::Cancelled) if request.continuation.is_some() => {
                start(&host, request, seed, id, Some(worktree))
            }
            Err(error) => Err(worktree_error(error)),
        }
    }
    .boxed()
}

/// Resumes a stored child; a worktree child continues in its worktree (made again,
/// cancellably, if its last activation left nothing there).
fn resume_maybe_isolated(
    host: &Arc<AgentHost>,
    request: ResumeRequest,
) -> BoxFuture<'static, Result<Run, DelegationError>> {
    let recorded = host
        .store()
        .child_record(&request.session_id)
        .and_then(|(header, _)| header.cwd)
        .map(std::path::PathBuf::from)
        .filter(|cwd| worktree::is_kin_worktree(cwd));
    let Some(recorded) = recorded else {
        return std::future::ready(resume(host, request, None)).boxed();
    };
    let host = host.clone();
    async move {
        let (cwd, cancel) = (&request.parent.cwd, &request.cancel);
        let reopened = worktree::reopen(&recorded, cwd, cancel, &host.git()).await;
        let worktree = reopened.map_err(worktree_error)?;
        resume(&host, request, Some(worktree))
    }
    .boxed()
}

/// The child's tools: the host's, narrowed by the filter, plus a structured-output tool.
fn child_tools(
    base: &ToolRegistry,
    filter: Option<&ToolFilter>,
    structured: Option<&Arc<StructuredCapture>>,
) -> Result<ToolRegistry, DelegationError> {
    let mut tools = base.clone();
    if let Some(filter) = filter {
        let named = filter.allow.iter().chain(filter.deny.iter()).flatten();
        // MCP tools come and go with their servers: their names are not checked here.
        let unknown = named
            .into_iter()
            .find(|name| !name.starts_with("mcp__") && base.get(name).is_none());
        if let Some(unknown) = unknown {
            return Err(DelegationError::UnknownTool(unknown.clone()));
        }
        tools.retain(|name| {
            filter
                .allow
                .as_ref()
                .is_none_or(|allow| allow.iter().any(|a| a == name))
                && filter
                    .deny
                    .as_ref()
                    .is_none_or(|deny| deny.iter().all(|d| d != name))
        });
    }
    if let Some(capture) = structured {
        tools.register(Arc::new(StructuredOutputTool(capture.clone())));
    }
    Ok(tools)
}

/// The parent's MCP servers as the child may use them (no server process per child).
fn child_mcp(parent: &Agent, filter: Option<&ToolFilter>) -> Option<McpView> {
    let (allow, deny) = filter.map_or((None, None), |f| (f.allow.clone(), f.deny.clone()));
    McpView::for_child(parent, allow, deny)
}

fn worktree_error(error: worktree::WorktreeError) -> DelegationError {
    match error {
        worktree::WorktreeError::Cancelled => DelegationError::AbortedBeforePublication,
        other => DelegationError::Setup(other.to_string()),
    }
}

/// Creates, publishes and starts child `id` seeded with `seed` (empty for a fresh child), in
/// `worktree` when it is isolated.
fn start(
    host: &Arc<AgentHost>,
    request: StartRequest,
    seed: Vec<Event>,
    id: String,
    worktree: Option<Worktree>,
) -> Result<Run, DelegationError> {
    let made = worktree.clone();
    let started = start_in(host, request, seed, id, worktree);
    // A failure before the child had its worktree leaves none behind.
    if let (Err(_), Some(worktree)) = (&started, made) {
        if worktree.dir.exists() {
            let _ = worktree::settle(&worktree);
        }
    }
    started
}

fn start_in(
    host: &Arc<AgentHost>,
    request: StartRequest,
    seed: Vec<Event>,
    id: String,
    worktree: Option<Worktree>,
) -> Result<Run, DelegationError> {
    // A continuable child's id was already given to the model, so the child is created even
    // if its task was cancelled before it first ran (a kill, or kin exiting): its turn then
    // ends at once as aborted, and the child stays on disk, continuable.
    if request.cancel.is_cancelled() && request.continuation.is_none() {
        return Err(DelegationError::AbortedBeforePublication);
    }
    let parent = &request.parent;
    let depth = request.child_depth()?;
    let overrides = request.agent_options.clone().unwrap_or_default();
    let options = AgentOptions {
        provider: overrides
            .provider
            .or_else(|| parent.options.provider.clone()),
        model: overrides.model.or_else(|| parent.options.model.clone()),
        max_tokens: overrides.max_tokens.or(parent.options.max_tokens),
        subagent_depth: Some(depth),
    };
    let structured = match &request.output_schema {
        Some(schema) => Some(Arc::new(
            StructuredCapture::new(schema.clone())
                .map_err(|e| DelegationError::Schema(e.to_string()))?,
        )),
        None => None,
    };
    let tools = child_tools(
        host.tools(),
        request.tool_filter.as_ref(),
        structured.as_ref(),
    )?;

    let parent_header = parent.header();
    // An isolated child works in its worktree alone: not the parent's roots.
    let (cwd, additional_directories) = match &worktree {
        Some(worktree) => (worktree.dir.clone(), Vec::new()),
        None => (
            parent.cwd.clone(),
            parent_header.additional_directories.clone(),
        ),
    };
    let header = Header {
        kind: Header::KIND.into(),
        version: Header::VERSION,
        id,
        created_at: host.store().creation_time(),
        cwd: match &worktree {
            Some(worktree) => Some(worktree.dir.display().to_string()),
            None => parent_header.cwd.clone(),
        },
        additional_directories,
        parent_session: Some(parent.id.clone()),
        seed_length: (!seed.is_empty()).then_some(seed.len() as u64),
        delegation_depth: depth,
        started_over: None,
        agent_definition: None,
        label: request.label.clone(),
    };
    let id = header.id.clone();
    let mut log = host
        .store()
        .create(&header)
        .map_err(|e| DelegationError::Setup(e.to_string()))?;
    host.note_created(&id);
    // Until the child is published, a failure removes its file: nothing is left behind.
    let abandon = |error: &dyn std::fmt::Display| {
        let _ = host.store().delete(&id);
        if let Some(worktree) = worktree.as_ref().filter(|worktree| worktree.dir.exists()) {
            let _ = worktree::settle(worktree);
        }
        DelegationError::Setup(error.to_string())
    };
    let mut events = seed;
    if !events.is_empty() {
        // The parent's file already holds these lines: copy them rather than re-encode.
        let copied = match host.store().event_lines(&parent.id, &events) {
            Some(lines) => log.append_raw_lines(&lines, events.last().map_or(0, |e| e.seq + 1)),
            None => log.append_copied(&events),
        };
        let end_seed = copied
            .and_then(|()| log.append(EventBody::SessionEndSeed(Empty {}), crate::time::now_ms()))
            .and_then(|event| log.flush().map(|()| event));
        events.push(end_seed.map_err(|e| abandon(&e))?);
        // The seed's images and attachments: the fork reads them from its own blob directory.
        let _ = host.store().share_blobs(&parent.id, &id);
    }
    let boundary = events.len();
    let child = Arc::new(Agent::new(AgentSpec {
        header,
        cwd,
        log,
        events,
        options,
        persona: request.persona.clone(),
        tools: Arc::new(tools),
        structured,
        roots: worktree.is_none().then(|| parent.roots().clone()),
    }));
    if let Some(budget) = &request.budget {
        child.watch.set_budget(budget.clone());
    }
    child.set_mcp(child_mcp(parent, request.tool_filter.as_ref()));
    if let Some(continuation) = &request.continuation {
        child.record_in_next_turn(EventBody::SubagentDescriptor(
            continuation.descriptor.clone(),
        ));
    }
    let turn = Turn {
        parent,
        permission: request.permission,
        label: request.label.as_deref(),
        prompt: request.prompt.clone(),
        cancel: request.cancel.child_token(),
        boundary,
        client: request.client.clone(),
        worktree: worktree.clone(),
    };
    drive(host, child, turn).map_err(|e| abandon(&e))
}

/// Reopens a stored child from its own transcript, rebuilt as its descriptor says, publishes
/// it and starts one more turn. Its depth stays the one its header records.
fn resume(
    host: &Arc<AgentHost>,
    request: ResumeRequest,
    worktree: Option<Worktree>,
) -> Result<Run, DelegationError> {
    if request.cancel.is_cancelled() {
        return Err(DelegationError::AbortedBeforePublication);
    }
    let id = request.session_id.clone();
    let (loaded, log) = host
        .store()
        .open_for_append(&id)
        .map_err(|_| DelegationError::Unavailable(id.clone()))?;
    let descriptor = &request.descriptor;
    let parent = &request.parent;
    let depth = loaded.header.delegation_depth;
    let options = AgentOptions {
        provider: descriptor.agent_provider.clone(),
        model: descriptor.agent_model.clone(),
        max_tokens: parent.options.max_tokens,
        subagent_depth: Some(depth),
    };
    let tools = child_tools(host.tools(), descriptor.tool_filter.as_ref(), None)?;
    let boundary = loaded.events.len();
    let cwd = worktree
        .as_ref()
        .map_or_else(|| parent.cwd.clone(), |w| w.dir.clone());
    let child = Arc::new(Agent::new(AgentSpec {
        header: loaded.header,
        cwd,
        log,
        events: loaded.events,
        options,
        persona: descriptor.persona.clone(),
        tools: Arc::new(tools),
        structured: None,
        roots: None,
    }));
    if let Some(budget) = &request.budget {
        child.watch.set_budget(budget.clone());
    }
    // A resumed child uses the servers of the session resuming it.
    child.set_mcp(child_mcp(parent, descriptor.tool_filter.as_ref()));
    let turn = Turn {
        parent,
        permission: descriptor
            .permission
            .as_deref()
            .and_then(PermissionMode::from_id),
        label: None,
        prompt: request.prompt.clone(),
        cancel: request.cancel.child_token(),
        boundary,
        client: request.client.clone(),
        worktree,
    };
    drive(host, child, turn).map_err(DelegationError::Setup)
}

/// The turn a child is started with.
struct Turn<'a> {
    parent: &'a Agent,
    /// The child's own mode (an agent definition's), clamped to the parent's.
    permission: Option<PermissionMode>,
    label: Option<&'a str>,
    prompt: Vec<UserPart>,
    cancel: CancellationToken,
    /// Where this activation's events start.
    boundary: usize,
    client: Option<Arc<dyn ClientBridge>>,
    /// The child's worktree, settled (kept or removed) when the activation ends.
    worktree: Option<Worktree>,
}

/// Puts the child under the parent's current permission mode (logged in the child) and binds
/// it to the parent's permissions, has the host publish it and run its turn, and wraps that as a [`Run`]; the error says what failed.
fn drive(host: &Arc<AgentHost>, child: Arc<Agent>, turn: Turn<'_>) -> Result<Run, String> {
    let parent_mode = turn.parent.permission_mode();
    let mode = match turn.permission {
        Some(own) => parent_mode.strictest(own),
        None => parent_mode,
    };
    child.set_permission_mode(mode).map_err(|e| e.to_string())?;
    // Bound by the parent's permissions for the rest of its life: a later switch of the parent
    // (to read-only, say) reaches the running child at once.
    child.bind_permissions_to(turn.parent);
    let client = turn.client.map(|client| client.for_child(&child.id));
    let cancel = turn.cancel;
    let running = host
        .start_child(
            &turn.parent.id,
            child.clone(),
            turn.label,
            turn.prompt,
            client,
            cancel.clone(),
        )
        .map_err(|e| e.to_string())?;
    let reader = child.clone();
    let turn_cancel = cancel.clone();
    let boundary = turn.boundary;
    let worktree = turn.worktree;
    // Once settled, the shared result no longer holds this future (nor the child).
    let result: BoxFuture<'static, SubagentResult> = async move {
        let outcome = running.await;
        let mut result = read_result(&reader, boundary, outcome, turn_cancel.is_cancelled());
        // A worktree whose making was cancelled was never there: nothing to settle.
        if let Some(worktree) = worktree.filter(|worktree| worktree.dir.exists()) {
            let report = worktree::settle_and_report(worktree).await;
            let text = format!("\n{report}");
            result.output.push(AssistantBlock::Text { text });
        }
        result
    }
    .boxed();
    let result = result.shared();
    let control = Arc::new(InProcessControl {
        host: Arc::downgrade(host),
        child: Mutex::new(Some(child.clone())),
        cancel,
        result: result.clone(),
    });
    Ok(Run::new(child.id.clone(), Some(child), result, control))
}

/// The outcome of the activation whose events start at `boundary`: its output by the one
/// rule (`outcome.rs`), and why it did not complete, when it did not.
fn read_result(
    child: &Agent,
    boundary: usize,
    outcome: Result<StopReason, TurnError>,
    cancelled: bool,
) -> SubagentResult {
    let (output, dropped_calls) = child.with_events(|events| {
        let own = events.get(boundary..).unwrap_or_default();
        (child_output(own), dropped_at_the_end(own))
    });
    let mut stop_reason = StopReason::of(&outcome, cancelled);
    let mut structured = None;
    let mut diagnostic = match (&outcome, stop_reason) {
        (Err(error), StopReason::Error) => Some(diagnostic::of_turn_error(error)),
        (_, StopReason::MaxSteps) => {
            Some("the child reached kin's step limit for one turn while still calling tools".into())
        }
        (_, StopReason::MaxTokens) if dropped_calls > 0 => Some(format!(
            "the model's output stopped at its token limit in the middle of {dropped_calls} \
             tool call(s), which were not run"
        )),
        (_, StopReason::MaxTokens) => Some("the model's output stopped at its token limit".into()),
        (_, StopReason::BudgetExhausted) => child.watch.budget_reached(),
        _ => None,
    };
    if let Some(capture) = &child.structured {
        match capture.captured() {
            Some(value) => structured = Some(value),
            // A clean finish without the requested result is a failure, not a success.
            None if stop_reason == StopReason::Completed => {
                stop_reason = if cancelled {
                    StopReason::Cancelled
                } else {
                    diagnostic = Some(format!(
                        "the child finished without calling `{}`",
                        crate::agent::STRUCTURED_TOOL
                    ));
                    StopReason::Error
                };
            }
            None => {}
        }
    }
    SubagentResult {
        output,
        structured,
        stop_reason,
        diagnostic,
        abnormal: None,
    }
}

/// How many tool calls the last step of `events` held when it was cut at the token limit.
fn dropped_at_the_end(events: &[Event]) -> usize {
    events
        .iter()
        .rev()
        .find_map(|event| match &event.body {
            EventBody::AssistantMessage(message) => Some(
                message
                    .dropped_tool_calls
                    .as_ref()
                    .map_or(0, |dropped| dropped.calls.len()),
            ),
            _ => None,
        })
        .unwrap_or(0)
}

/// Holds no [`Run`] (that would be a cycle: the run holds its control) and gives up the child
/// on the first dispose, so a disposed child is freed once its holders drop their runs.
struct InProcessControl {
    host: Weak<AgentHost>,
    /// The child, until the first dispose takes it.
    child: Mutex<Option<Arc<Agent>>>,
    cancel: CancellationToken,
    /// The activation's result (it holds nothing of the child once settled).
    result: Shared<BoxFuture<'static, SubagentResult>>,
}

impl RunControl for InProcessControl {
    fn dispose(&self) -> BoxFuture<'static, Option<String>> {
        self.cancel.cancel();
        let child = lock(&self.child).take();
        let result = self.result.clone();
        let host = self.host.clone();
        async move {
            result.await;
            if let (Some(child), Some(host)) = (child, host.upgrade()) {
                host.unpublish_agent(&child);
            }
            // Its log was settled with its turn: nothing here can fail.
            None
        }
        .boxed()
    }

    fn steer(
        &self,
        content: Vec<UserPart>,
    ) -> Option<BoxFuture<'static, Result<(), SteerRefusal>>> {
        let child = lock(&self.child).clone();
        // In process, delivery is decided at once: the turn is open or it is not.
        let delivered = match child {
            Some(child) => child.steer(content).map_err(|_| SteerRefusal::Stopped),
            None => Err(SteerRefusal::Stopped),
        };
        Some(std::future::ready(delivered).boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentOptions;
    use crate::session::{SessionStore, StoreError};

    /// A child agent with `events` as its log so far.
    fn child_with(store: &SessionStore, events: Vec<Event>) -> Agent {
        let header = Header::new("c1".into(), 1, "/".into(), Vec::new());
        let log = store.create(&header).unwrap();
        Agent::new(AgentSpec {
            header,
            cwd: "/".into(),
            log,
            events,
            options: AgentOptions::default(),
            persona: None,
            tools: Arc::new(ToolRegistry::new()),
            structured: None,
            roots: None,
        })
    }

    fn streamed(seq: u64, text: &str) -> Event {
        let chunk = crate::session::Chunk::TextDelta {
            index: 0,
            text: text.into(),
        };
        let body = EventBody::AssistantChunk(crate::session::AssistantChunk {
            turn: 1,
            step: 1,
            chunk,
        });
        Event::new(seq, 0, body)
    }

    #[test]
    fn a_child_whose_last_log_write_fails_settles_failed_with_that_cause() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        let child = child_with(&store, vec![streamed(0, "Almost done")]);
        // What a turn whose `turn/end` could not be written returns.
        let full = StoreError::Io {
            op: "appending to",
            path: "/sessions/c1.jsonl".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let result = read_result(&child, 0, Err(TurnError::Store(full)), false);
        assert_eq!(result.stop_reason, StopReason::Error);
        assert_eq!(
            result.diagnostic.as_deref(),
            Some("the disk is full: could not write the child's session log /sessions/c1.jsonl")
        );
        assert_eq!(result.text(), "Almost done");
    }

    #[test]
    fn a_child_cut_at_the_token_limit_says_its_calls_were_not_run() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        let data = serde_json::json!({"turn": 1, "step": 1, "message": {"role": "assistant",
            "content": [], "source": {"kind": "model", "provider": "p", "model": "m"},
            "id": "x"}, "droppedToolCalls": {"reason": "cut", "calls": [{"type": "tool-call",
            "id": "c", "name": "read", "arguments": "{\"pa"}]}});
        let message = serde_json::from_value(data).unwrap();
        let events = vec![
            streamed(0, "Reading"),
            Event::new(1, 0, EventBody::AssistantMessage(Box::new(message))),
        ];
        let child = child_with(&store, events);
        let result = read_result(&child, 0, Ok(StopReason::MaxTokens), false);
        assert_eq!(result.stop_reason, StopReason::MaxTokens);
        assert_eq!(
            result.diagnostic.as_deref(),
            Some(
                "the model's output stopped at its token limit in the middle of 1 tool \
                 call(s), which were not run"
            )
        );
        // The empty message left by the cut step does not hide what was streamed.
        assert_eq!(result.text(), "Reading");
    }
}

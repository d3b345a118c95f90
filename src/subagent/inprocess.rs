//! The in-process driver shared by `spawn` and `fork`: builds and publishes a child agent,
//! runs its turn on a tracked task, and reads the result of that activation.
//!
//! Everything up to publication is synchronous, so a start either fails with nothing left
//! behind or returns a published child; after publication, cancellation cancels the child turn.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::{
    ChildNotice, ResumeRequest, Run, RunControl, StartRequest, StopReason, SubagentError,
    SubagentResult, ToolFilter,
};
use crate::agent::structured::StructuredOutputTool;
use crate::agent::{
    Agent, AgentOptions, AgentSpec, NotRunning, StructuredCapture, TurnError, TurnOutcome,
};
use crate::runtime::Runtime;
use crate::session::{AssistantBlock, Empty, Event, EventBody, Header, UserPart};
use crate::time::unique_now_ms;
use crate::tools::ToolRegistry;

/// The runtime, if it is still alive.
pub(super) fn upgrade(runtime: &Weak<Runtime>) -> Result<Arc<Runtime>, SubagentError> {
    runtime
        .upgrade()
        .ok_or_else(|| SubagentError::Setup("kin is shutting down".into()))
}

/// The child's tools: the runtime's, narrowed by the filter, plus a structured-output tool.
fn child_tools(
    base: &ToolRegistry,
    filter: Option<&ToolFilter>,
    structured: Option<&Arc<StructuredCapture>>,
) -> Result<ToolRegistry, SubagentError> {
    let mut tools = base.clone();
    if let Some(filter) = filter {
        let named = filter.allow.iter().chain(filter.deny.iter()).flatten();
        if let Some(unknown) = named.into_iter().find(|name| base.get(name).is_none()) {
            return Err(SubagentError::UnknownTool(unknown.clone()));
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

/// Creates, publishes and starts a child seeded with `seed` (empty for a fresh child).
pub(super) fn start(
    runtime: Arc<Runtime>,
    request: StartRequest,
    seed: Vec<Event>,
) -> Result<Run, SubagentError> {
    if request.cancel.is_cancelled() {
        return Err(SubagentError::AbortedBeforePublication);
    }
    let parent = &request.parent;
    let depth = parent
        .delegation_depth()
        .checked_add(1)
        .ok_or(SubagentError::DepthOverflow)?;
    if let Some(max) = request.max_depth {
        if depth > max {
            return Err(SubagentError::Depth {
                attempted: depth,
                max,
            });
        }
    }
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
                .map_err(|e| SubagentError::Schema(e.to_string()))?,
        )),
        None => None,
    };
    let tools = child_tools(
        &runtime.tools,
        request.tool_filter.as_ref(),
        structured.as_ref(),
    )?;

    let parent_header = parent.header();
    let header = Header {
        kind: Header::KIND.into(),
        version: Header::VERSION,
        id: match &request.continuation {
            Some(continuation) => continuation.session_id.clone(),
            None => uuid::Uuid::new_v4().to_string(),
        },
        created_at: unique_now_ms(),
        cwd: parent_header.cwd.clone(),
        additional_directories: parent_header.additional_directories.clone(),
        parent_session: Some(parent.id.clone()),
        seed_length: (!seed.is_empty()).then_some(seed.len() as u64),
        delegation_depth: depth,
    };
    let id = header.id.clone();
    let mut log = runtime
        .store
        .create(&header)
        .map_err(|e| SubagentError::Setup(e.to_string()))?;
    // Until the child is published, a failure removes its file: nothing is left behind.
    let abandon = |error: &dyn std::fmt::Display| {
        let _ = runtime.store.delete(&id);
        SubagentError::Setup(error.to_string())
    };
    let mut events = seed;
    if !events.is_empty() {
        // The parent's file already holds these lines: copy them rather than re-encode.
        let copied = match runtime.store.event_lines(&parent.id, &events) {
            Some(lines) => log.append_raw_lines(&lines, events.last().map_or(0, |e| e.seq + 1)),
            None => log.append_copied(&events),
        };
        let end_seed = copied
            .and_then(|()| log.append(EventBody::SessionEndSeed(Empty {}), crate::time::now_ms()))
            .and_then(|event| log.flush().map(|()| event));
        events.push(end_seed.map_err(|e| abandon(&e))?);
    }
    let boundary = events.len();
    let child = Arc::new(Agent::new(AgentSpec {
        header,
        cwd: parent.cwd.clone(),
        log,
        events,
        options,
        persona: request.persona.clone(),
        tools: Arc::new(tools),
        structured,
    }));
    if let Some(continuation) = &request.continuation {
        child.record_in_next_turn(continuation.descriptor.to_event());
    }
    // The child works under the parent's current permission mode (logged in the child).
    child
        .set_permission_mode(parent.permission_mode())
        .map_err(|e| abandon(&e))?;
    runtime.publish(child.clone()).map_err(|e| abandon(&e))?;
    runtime.notify_child(ChildNotice::Started {
        parent: &parent.id,
        child: &child,
        label: request.label.as_deref(),
    });
    Ok(drive(
        runtime,
        child,
        request.prompt,
        request.cancel.child_token(),
        boundary,
        request.client,
    ))
}

/// Reopens a stored child from its own transcript, rebuilt as its descriptor says, publishes
/// it and starts one more turn. Its depth stays the one its header records.
pub(super) fn resume(runtime: Arc<Runtime>, request: ResumeRequest) -> Result<Run, SubagentError> {
    if request.cancel.is_cancelled() {
        return Err(SubagentError::AbortedBeforePublication);
    }
    let id = request.session_id.clone();
    let (loaded, log) = runtime
        .store
        .open_for_append(&id)
        .map_err(|_| SubagentError::Unavailable(id.clone()))?;
    let descriptor = &request.descriptor;
    let parent = &request.parent;
    let depth = loaded.header.delegation_depth;
    let options = AgentOptions {
        provider: descriptor.agent_provider.clone(),
        model: descriptor.agent_model.clone(),
        max_tokens: parent.options.max_tokens,
        subagent_depth: Some(depth),
    };
    let filter = descriptor.tool_filter.as_ref().map(ToolFilter::from);
    let tools = child_tools(&runtime.tools, filter.as_ref(), None)?;
    let boundary = loaded.events.len();
    let child = Arc::new(Agent::new(AgentSpec {
        header: loaded.header,
        cwd: parent.cwd.clone(),
        log,
        events: loaded.events,
        options,
        persona: descriptor.persona.clone(),
        tools: Arc::new(tools),
        structured: None,
    }));
    child
        .set_permission_mode(parent.permission_mode())
        .map_err(|e| SubagentError::Setup(e.to_string()))?;
    runtime
        .publish(child.clone())
        .map_err(|e| SubagentError::Setup(e.to_string()))?;
    runtime.notify_child(ChildNotice::Started {
        parent: &parent.id,
        child: &child,
        label: None,
    });
    Ok(drive(
        runtime,
        child,
        request.prompt,
        request.cancel.child_token(),
        boundary,
        request.client,
    ))
}

/// Runs the child's turn on a tracked task and wraps it as a [`Run`].
pub(super) fn drive(
    runtime: Arc<Runtime>,
    child: Arc<Agent>,
    prompt: Vec<UserPart>,
    cancel: CancellationToken,
    boundary: usize,
    client: Option<Arc<dyn crate::tools::ClientBridge>>,
) -> Run {
    let mut deps = runtime.turn_deps(&child);
    deps.client = client.map(|client| client.for_child(&child.id));
    let turn_child = child.clone();
    let turn_cancel = cancel.clone();
    let reporter = Arc::downgrade(&runtime);
    let task = runtime.runs.spawn(async move {
        let child_id = turn_child.id.clone();
        let parent_id = turn_child
            .header()
            .parent_session
            .clone()
            .unwrap_or_default();
        let observe = |event: &Event| {
            if let Some(runtime) = reporter.upgrade() {
                runtime.notify_child(ChildNotice::Event {
                    child: &child_id,
                    event,
                });
            }
        };
        let outcome = turn_child
            .run_turn(prompt, &deps, &observe, turn_cancel.clone())
            .await;
        let result = read_result(&turn_child, boundary, outcome, turn_cancel.is_cancelled());
        if let Some(runtime) = reporter.upgrade() {
            runtime.notify_child(ChildNotice::Settled {
                parent: &parent_id,
                child: &child_id,
                stop_reason: result.stop_reason,
            });
        }
        result
    });
    let result: BoxFuture<'static, SubagentResult> = async move {
        task.await.unwrap_or_else(|_| SubagentResult {
            output: Vec::new(),
            structured: None,
            stop_reason: StopReason::Error,
        })
    }
    .boxed();
    let run_id = child.id.clone();
    let control = Arc::new(InProcessControl {
        runtime: Arc::downgrade(&runtime),
        child: child.clone(),
        cancel,
        result: std::sync::Mutex::new(None),
    });
    let run = Run::new(run_id, Some(child), result, control.clone());
    *control.result.lock().unwrap_or_else(|p| p.into_inner()) = Some(run.clone());
    run
}

/// The outcome of the activation whose events start at `boundary`.
fn read_result(
    child: &Agent,
    boundary: usize,
    outcome: Result<TurnOutcome, TurnError>,
    cancelled: bool,
) -> SubagentResult {
    let output: Vec<AssistantBlock> = child.with_events(|events| {
        events
            .get(boundary..)
            .unwrap_or_default()
            .iter()
            .rev()
            .find_map(|event| match &event.body {
                EventBody::AssistantMessage(message) => Some(message.message.content.clone()),
                _ => None,
            })
            .unwrap_or_default()
    });
    let recorded = match outcome {
        Ok(TurnOutcome::Completed) => StopReason::Completed,
        Ok(TurnOutcome::MaxTokens) => StopReason::MaxTokens,
        Ok(TurnOutcome::Refusal) => StopReason::Refusal,
        Ok(TurnOutcome::Cancelled) => StopReason::Aborted,
        Ok(TurnOutcome::MaxSteps) | Err(_) => StopReason::Error,
    };
    // Cancellation owns every outcome that did not complete.
    let mut stop_reason = match recorded {
        StopReason::Completed => StopReason::Completed,
        _ if cancelled => StopReason::Aborted,
        other => other,
    };
    let mut structured = None;
    if let Some(capture) = &child.structured {
        match capture.captured() {
            Some(value) => structured = Some(value),
            // A clean finish without the requested result is a failure, not a success.
            None if stop_reason == StopReason::Completed => {
                stop_reason = if cancelled {
                    StopReason::Aborted
                } else {
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
    }
}

struct InProcessControl {
    runtime: Weak<Runtime>,
    child: Arc<Agent>,
    cancel: CancellationToken,
    /// The run itself, to await its result on dispose.
    result: std::sync::Mutex<Option<Run>>,
}

impl RunControl for InProcessControl {
    fn dispose(&self) -> BoxFuture<'static, ()> {
        self.cancel.cancel();
        let run = self
            .result
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let runtime = self.runtime.clone();
        let child = self.child.clone();
        async move {
            if let Some(run) = run {
                run.result().await;
            }
            if let Some(runtime) = runtime.upgrade() {
                runtime.unpublish_agent(&child);
            }
        }
        .boxed()
    }

    fn steer(&self, content: Vec<UserPart>) -> Option<Result<(), NotRunning>> {
        Some(self.child.steer(content))
    }
}

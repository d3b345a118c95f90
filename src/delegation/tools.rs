//! The model-facing delegation tools: `subagent` (a fresh child) and `subagent_fork` (a child
//! that inherits this conversation), `send_message` (a follow-up to a background child) and
//! `list_agents` (this session's background children). Each parses its arguments, calls one
//! entry of [`Delegation`], and words the result. Names, parameters and result texts are a
//! wire contract; the descriptions are kin's own.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};

use super::{
    Continuable, Delegated, Delegation, DelegationError, Delivery, Mode, Provider, Request,
};
use crate::agent::StopReason;
use crate::model::ToolSpec;
use crate::session::UserPart;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutput};

/// One delegation tool, bound to one provider.
pub(super) struct SubagentTool {
    provider: Arc<dyn Provider>,
    delegation: Arc<Delegation>,
}

impl SubagentTool {
    pub(super) fn new(provider: Arc<dyn Provider>, delegation: Arc<Delegation>) -> Self {
        Self {
            provider,
            delegation,
        }
    }

    /// Whether background children of this tool can be messaged again, if known yet (an ACP
    /// child agent says so only once it has been launched).
    fn continuable(&self) -> Option<bool> {
        match self.provider.continuable() {
            Continuable::Known(known) => Some(known),
            Continuable::AskChild => None,
        }
    }

    fn inherits_context(&self) -> bool {
        self.provider.inherits_parent_context()
    }

    fn description(&self) -> String {
        let what = if self.inherits_context() {
            "Hand a task to a child agent that starts from this conversation: it sees every \
             completed turn so far (not the turn in progress) and returns only its final answer. \
             Use it for work that builds on what was already said — a review, a follow-up \
             analysis, a continuation — without spending this conversation's context on the \
             intermediate steps."
        } else {
            "Hand a self-contained task to a child agent with a context of its own, and get back \
             only its final answer. Use it for focused, independent work — research, a scoped \
             change, an analysis — so the steps do not fill this conversation. The child does \
             not see this conversation: give it a complete prompt."
        };
        match self.continuable() {
            Some(true) => format!(
                "{what} Set `run_in_background: true` to start it in the background instead: you \
                 get its subagent id and a task id at once; collect the answer with \
                 `task_output`, stop it with `task_kill`, and ask it more with `send_message`."
            ),
            Some(false) => format!(
                "{what} Set `run_in_background: true` to get a task id at once instead; collect \
                 the answer with `task_output` and stop it with `task_kill`."
            ),
            None => format!(
                "{what} Set `run_in_background: true` to get a task id at once instead; collect \
                 the answer with `task_output` and stop it with `task_kill`. Whether you can ask \
                 it more with `send_message` depends on the child agent: the start result says."
            ),
        }
    }
}

fn text_of(arguments: &Value, key: &str) -> Option<String> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
}

fn failure(error: &DelegationError) -> ToolOutput {
    ToolOutput::error(error.name(), error.code(), format!("Error: {error}"))
}

/// The error a failed foreground run reports; partial output is never passed off as an answer.
fn stop_error(reason: StopReason) -> Option<&'static str> {
    match reason {
        StopReason::Completed => None,
        StopReason::Cancelled => Some("subagent run was cancelled"),
        // A child that runs out of steps has not answered: its run failed.
        StopReason::MaxSteps | StopReason::Error => Some("subagent run failed"),
        StopReason::MaxTokens => Some("subagent run hit its token limit before finishing"),
        StopReason::Refusal => Some("subagent declined the task"),
    }
}

impl Tool for SubagentTool {
    fn spec(&self) -> ToolSpec {
        let prompt = if self.inherits_context() {
            "The task for the child. It already knows this conversation's completed turns, so \
             state only what is new."
        } else {
            "The complete task for the child, with everything it needs: it does not see this \
             conversation."
        };
        let background = if self.continuable() == Some(true) {
            "Run in the background and return its subagent id and a task id at once; collect \
             the answer with task_output, stop it with task_kill, follow up with send_message."
        } else {
            "Run in the background and return a task id at once; collect the answer with \
             task_output, stop it with task_kill."
        };
        ToolSpec {
            name: self.provider.tool().to_owned(),
            description: self.description(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A short (3-5 word) label for the task, for display."},
                    "prompt": {"type": "string", "description": prompt},
                    "run_in_background": {"type": "boolean", "description": background},
                    "model": {"type": "string", "description": "The id of a configured model to run the child on (default: the model you run on)."}
                },
                "required": ["description", "prompt"]
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn title(&self, arguments: &Value) -> String {
        let label = text_of(arguments, "description").unwrap_or_else(|| "delegated task".into());
        format!("{}: {label}", self.provider.tool())
    }

    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let delegation = self.delegation.clone();
        let provider = self.provider.name().to_owned();
        async move {
            let (Some(label), Some(prompt)) = (
                text_of(&arguments, "description"),
                text_of(&arguments, "prompt"),
            ) else {
                return ToolOutput::error(
                    "ToolArgsError",
                    "INVALID_ARGS",
                    "Error: `description` and `prompt` must be non-empty strings",
                );
            };
            let mode = match arguments.get("run_in_background").and_then(Value::as_bool) {
                Some(true) => Mode::Background,
                _ => Mode::Foreground,
            };
            let request = Request {
                provider,
                prompt: vec![UserPart::Text { text: prompt }],
                label,
                client: cx.client.clone(),
                cancel: cx.cancel.clone(),
                model: text_of(&arguments, "model"),
                call_id: Some(cx.call_id.clone()),
            };
            match delegation.delegate(&cx.session_id, request, mode).await {
                Ok(Delegated::Continuable { child, task }) => {
                    ToolOutput::ok(format!("started subagent {child} as task {task}"))
                }
                Ok(Delegated::OneShot(task)) => ToolOutput::ok(format!(
                    "started background subagent task {task}\n(one-shot: this child cannot \
                     be continued, send_message cannot reach it)"
                )),
                Ok(Delegated::Answer(result)) => {
                    match (stop_error(result.stop_reason), &result.error) {
                        (None, _) => ToolOutput::ok(result.text()),
                        (Some(message), error) => ToolOutput::error(
                            "SubagentError",
                            "SUBAGENT_FAILED",
                            match error {
                                Some(error) => format!("Error: {message}: {error}"),
                                None => format!("Error: {message}"),
                            },
                        ),
                    }
                }
                Err(DelegationError::NoCaller) => ToolOutput::error(
                    "SubagentError",
                    "NO_CALLER",
                    "Error: subagent tool requires a calling agent",
                ),
                Err(error) => failure(&error),
            }
        }
        .boxed()
    }
}

/// `send_message`: a follow-up to a background child of this session, by its subagent id.
pub(super) struct SendMessageTool(pub(super) Arc<Delegation>);

impl SendMessageTool {
    const NAME: &'static str = "send_message";
}

impl Tool for SendMessageTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: Self::NAME.into(),
            description: "Send a follow-up message to one of your background subagents, by the \
                subagent id you got when you started it. A subagent that is still working gets \
                the message in its current task; one that has finished continues its own \
                conversation in a new task. Either way, read the reply through the task id this \
                returns, with `task_output`. An error means the message was NOT delivered."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "subagent_id": {"type": "string", "description": "The subagent id returned when the background subagent was started."},
                    "message": {"type": "string", "description": "What to tell the subagent."}
                },
                "required": ["subagent_id", "message"]
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn title(&self, arguments: &Value) -> String {
        match text_of(arguments, "subagent_id") {
            Some(id) => format!("send_message: {id}"),
            None => "send_message".into(),
        }
    }

    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let delegation = self.0.clone();
        async move {
            let (Some(child), Some(message)) = (
                arguments.get("subagent_id").and_then(Value::as_str),
                arguments.get("message").and_then(Value::as_str),
            ) else {
                return ToolOutput::error(
                    "ToolArgsError",
                    "INVALID_ARGS",
                    "Error: `subagent_id` and `message` must be strings; the message was not \
                     delivered",
                );
            };
            let content = vec![UserPart::Text {
                text: message.to_owned(),
            }];
            match delegation
                .send_message(&cx.session_id, child, content, cx.client.clone())
                .await
            {
                Ok(Delivery::Steered(task)) => {
                    ToolOutput::ok(format!("message delivered to running task {task}"))
                }
                Ok(Delivery::Started(task)) => ToolOutput::ok(format!(
                    "message started task {task} continuing subagent {child}"
                )),
                Err(DelegationError::NoCaller) => ToolOutput::error(
                    "SubagentError",
                    "NO_CALLER",
                    "Error: send_message requires a calling agent; the message was not delivered",
                ),
                Err(error) => failure(&error),
            }
        }
        .boxed()
    }
}

/// `list_agents`: this session's continuable background children and what each is doing.
pub(super) struct ListAgentsTool(pub(super) Arc<Delegation>);

impl ListAgentsTool {
    const NAME: &'static str = "list_agents";
}

impl Tool for ListAgentsTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: Self::NAME.into(),
            description: "List the background subagents this session started, oldest first: \
                subagent id, how it was made, whether a task of it is running, how its last \
                turn ended, how many turns it has run, and its model. Any of them can be \
                continued with `send_message`."
                .into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, _arguments: &Value) -> String {
        Self::NAME.into()
    }

    fn call(&self, _arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let delegation = self.0.clone();
        async move {
            let parent = cx.session_id.clone();
            let children = tokio::task::spawn_blocking(move || delegation.list(&parent))
                .await
                .unwrap_or_default();
            if children.is_empty() {
                return ToolOutput::ok("(no background subagents)");
            }
            let lines: Vec<String> = children
                .iter()
                .map(|child| {
                    let state = match &child.task {
                        Some(task) => format!("running task {task}"),
                        None => "idle".into(),
                    };
                    let model = match (&child.provider, &child.model) {
                        (Some(provider), Some(model)) => format!("{provider}/{model}"),
                        (None, Some(model)) => model.clone(),
                        (Some(provider), None) => provider.clone(),
                        (None, None) => "default".into(),
                    };
                    format!(
                        "{} [{}] {state}, turns: {}, last stop: {}, model: {model} — {}",
                        child.id,
                        child.kind,
                        child.turns,
                        child.last_stop.as_deref().unwrap_or("none"),
                        child.description.as_deref().unwrap_or("(untitled)")
                    )
                })
                .collect();
            ToolOutput::ok(lines.join("\n"))
        }
        .boxed()
    }
}

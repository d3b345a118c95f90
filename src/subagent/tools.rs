//! The model-facing delegation tools: `subagent` (a fresh child) and `subagent_fork` (a child
//! that inherits this conversation), `send_message` (a follow-up to a background child) and
//! `list_agents` (this session's background children). Names, parameters and result texts are
//! a wire contract; the descriptions are kin's own.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::control::settle_run;
use super::{Delivery, StartRequest, StopReason, SubagentControl, SubagentError, SubagentService};
use crate::agent::Agent;
use crate::model::ToolSpec;
use crate::session::UserPart;
use crate::tasks::{TaskOutcome, TaskService};
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutput};

/// Children may be this deep unless configured otherwise (a child cannot delegate further).
pub const DEFAULT_MAX_DEPTH: u32 = 1;

/// One delegation tool, bound to one provider.
pub struct SubagentTool {
    name: String,
    provider: String,
    inherits_context: bool,
    max_depth: Option<u32>,
    subagents: Arc<SubagentService>,
    /// Where background children run.
    tasks: Arc<TaskService>,
    /// Runs background children of providers that can resume (continuable children).
    control: Arc<SubagentControl>,
    /// The configured models a child may be started on (`model`).
    models: Option<Arc<crate::model::ModelCatalog>>,
}

impl SubagentTool {
    pub fn new(
        name: &str,
        provider: &str,
        inherits_context: bool,
        max_depth: Option<u32>,
        subagents: Arc<SubagentService>,
        control: Arc<SubagentControl>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            provider: provider.to_owned(),
            inherits_context,
            max_depth,
            tasks: control.tasks().clone(),
            subagents,
            control,
            models: None,
        }
    }

    /// Lets the model start children on any of `models` (the `model` argument).
    pub fn with_models(mut self, models: Arc<crate::model::ModelCatalog>) -> Self {
        self.models = Some(models);
        self
    }

    /// Whether background children of this tool can be messaged again, if known yet (an ACP
    /// child agent says so only once it has been launched).
    fn continuable(&self) -> Option<bool> {
        self.subagents
            .get(&self.provider)
            .map_or(Some(false), |provider| provider.continuable_known())
    }

    fn description(&self) -> String {
        let what = if self.inherits_context {
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

fn failure(error: &SubagentError) -> ToolOutput {
    ToolOutput::error(error.name(), error.code(), format!("Error: {error}"))
}

/// The error a failed foreground run reports; partial output is never passed off as an answer.
fn stop_error(reason: StopReason) -> Option<&'static str> {
    match reason {
        StopReason::Completed => None,
        StopReason::Aborted => Some("subagent run was cancelled"),
        StopReason::Error => Some("subagent run failed"),
        StopReason::MaxTokens => Some("subagent run hit its token limit before finishing"),
        StopReason::Refusal => Some("subagent declined the task"),
    }
}

impl Tool for SubagentTool {
    fn spec(&self) -> ToolSpec {
        let prompt = if self.inherits_context {
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
            name: self.name.clone(),
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
        format!("{}: {label}", self.name)
    }

    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let service = self.subagents.clone();
        let tasks = self.tasks.clone();
        let provider = self.provider.clone();
        let max_depth = self.max_depth;
        let control = self.control.clone();
        let models = self.models.clone();
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
            let caller = cx
                .caller
                .clone()
                .and_then(|caller| caller.downcast::<Agent>().ok());
            let Some(parent) = caller else {
                return ToolOutput::error(
                    "SubagentError",
                    "NO_CALLER",
                    "Error: subagent tool requires a calling agent",
                );
            };
            let background =
                arguments.get("run_in_background").and_then(Value::as_bool) == Some(true);
            // Foreground, the child is cancelled with this tool call; in the background, with
            // its task.
            let mut request = StartRequest::new(
                vec![UserPart::Text { text: prompt }],
                parent,
                cx.cancel.clone(),
            );
            // The child runs on the model named, else on the one its parent runs on now.
            let model = match (text_of(&arguments, "model"), &models) {
                (Some(id), Some(models)) => match models.lookup(&id) {
                    Ok(_) => Some(id),
                    Err(unknown) => {
                        return ToolOutput::error(
                            "ToolArgsError",
                            "UNKNOWN_MODEL",
                            format!("Error: {unknown}"),
                        )
                    }
                },
                (Some(id), None) => Some(id),
                (None, _) => request.parent.context.selected(),
            };
            if let Some(model) = model {
                let mut options = request.parent.options.clone();
                options.model = Some(model);
                request.agent_options = Some(options);
            }
            request.max_depth = max_depth;
            request.label = Some(label.clone());
            request.client = cx.client.clone();
            // Decided before answering: an ACP child may have to be asked first.
            let continuable = match service.get(&provider) {
                Some(found) if background => found.continuable_start(&request).await,
                _ => false,
            };
            if continuable {
                return match control.start_continuable(&provider, &label, request) {
                    Ok(started) => ToolOutput::ok(format!(
                        "started subagent {} as task {}",
                        started.child_id, started.task_id
                    )),
                    Err(error) => failure(&error),
                };
            }
            if background {
                let owner = request.parent.id.as_str().into();
                let started = tasks.start(
                    "subagent",
                    &label,
                    Some(owner),
                    move |cancel: CancellationToken| {
                        request.cancel = cancel.clone();
                        async move {
                            match service.start(&provider, request).await {
                                Ok(run) => settle_run(&run).await,
                                Err(_) if cancel.is_cancelled() => TaskOutcome::killed(),
                                Err(error) => TaskOutcome::failed(error.detail()),
                            }
                        }
                        .boxed()
                    },
                );
                return match started {
                    Ok(task) => ToolOutput::ok(format!(
                        "started background subagent task {task}\n(one-shot: this child cannot \
                         be continued, send_message cannot reach it)"
                    )),
                    Err(error) => {
                        ToolOutput::error("TaskError", "TASK_ERROR", format!("Error: {error}"))
                    }
                };
            }
            let run = match service.start(&provider, request).await {
                Ok(run) => run,
                Err(error) => return failure(&error),
            };
            let result = run.result().await;
            run.dispose().await;
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
        .boxed()
    }
}

/// `send_message`: a follow-up to a background child of this session, by its subagent id.
pub struct SendMessageTool(pub Arc<SubagentControl>);

impl SendMessageTool {
    pub const NAME: &'static str = "send_message";
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
        let control = self.0.clone();
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
            let caller = cx
                .caller
                .clone()
                .and_then(|caller| caller.downcast::<Agent>().ok());
            let Some(parent) = caller else {
                return ToolOutput::error(
                    "SubagentError",
                    "NO_CALLER",
                    "Error: send_message requires a calling agent; the message was not delivered",
                );
            };
            let content = vec![UserPart::Text {
                text: message.to_owned(),
            }];
            match control
                .send_message(&parent, child, content, cx.client.clone())
                .await
            {
                Ok(Delivery::Steered(task)) => {
                    ToolOutput::ok(format!("message delivered to running task {task}"))
                }
                Ok(Delivery::Started(task)) => ToolOutput::ok(format!(
                    "message started task {task} continuing subagent {child}"
                )),
                Err(error) => failure(&error),
            }
        }
        .boxed()
    }
}

/// `list_agents`: this session's continuable background children and what each is doing.
pub struct ListAgentsTool(pub Arc<SubagentControl>);

impl ListAgentsTool {
    pub const NAME: &'static str = "list_agents";
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
        let control = self.0.clone();
        async move {
            let parent = cx.session_id.clone();
            let children = tokio::task::spawn_blocking(move || control.list_children(&parent))
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

//! The model-facing delegation tools: `subagent` (a fresh child) and `subagent_fork` (a child
//! that inherits this conversation). Names, parameters and result texts are a wire contract;
//! the descriptions are kin's own.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{Run, StartRequest, StopReason, SubagentError, SubagentResult, SubagentService};
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
}

impl SubagentTool {
    pub fn new(
        name: &str,
        provider: &str,
        inherits_context: bool,
        max_depth: Option<u32>,
        subagents: Arc<SubagentService>,
        tasks: Arc<TaskService>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            provider: provider.to_owned(),
            inherits_context,
            max_depth,
            subagents,
            tasks,
        }
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
        format!(
            "{what} Set `run_in_background: true` to get a task id at once instead; collect the \
             answer with `task_output` and stop it with `task_kill`."
        )
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

/// A background task's outcome from a run's result; disposes the run first.
async fn settle(run: Run) -> TaskOutcome {
    let result: SubagentResult = run.result().await;
    run.dispose().await;
    match result.stop_reason {
        StopReason::Completed => TaskOutcome::completed(result.text()),
        StopReason::Aborted => TaskOutcome::killed(),
        other => match result.error {
            Some(error) => TaskOutcome::failed(format!("{}: {error}", other.as_str())),
            None => TaskOutcome::failed(other.as_str()),
        },
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
        ToolSpec {
            name: self.name.clone(),
            description: self.description(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A short (3-5 word) label for the task, for display."},
                    "prompt": {"type": "string", "description": prompt},
                    "run_in_background": {"type": "boolean", "description": "Run in the background and return a task id at once; collect the answer with task_output, stop it with task_kill."}
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
            request.max_depth = max_depth;
            request.label = Some(label.clone());
            request.client = cx.client.clone();
            if background {
                let owner = request.parent.id.clone();
                let started = tasks.start(
                    "subagent",
                    &label,
                    Some(owner),
                    move |cancel: CancellationToken| {
                        request.cancel = cancel.clone();
                        async move {
                            match service.start(&provider, request).await {
                                Ok(run) => settle(run).await,
                                Err(_) if cancel.is_cancelled() => TaskOutcome::killed(),
                                Err(error) => TaskOutcome::failed(error.detail()),
                            }
                        }
                        .boxed()
                    },
                );
                return match started {
                    Ok(task) => ToolOutput::ok(format!("started background subagent task {task}")),
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

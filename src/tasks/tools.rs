//! The model-facing task tools: `task_output`, `task_list`, `task_kill`. Their names,
//! parameters and result texts are a wire contract shared with other delegation agents.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::{json, Value};

use super::{KillResult, TaskError, TaskService, TaskSnapshot};
use crate::model::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutput};

const DEFAULT_WAIT_MS: u64 = 30_000;
const MAX_WAIT_MS: u64 = 600_000;

fn task_error(error: TaskError) -> ToolOutput {
    ToolOutput::error("TaskError", "TASK_ERROR", format!("Error: {error}"))
}

fn task_id(arguments: &Value) -> &str {
    arguments
        .get("task_id")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A settled task's result (or a note that there is none yet), then its status line.
fn render(snapshot: &TaskSnapshot) -> String {
    let text = match (&snapshot.output, snapshot.status.is_terminal()) {
        (Some(output), true) if !output.is_empty() => output.clone(),
        _ => "(no new output)".to_owned(),
    };
    let newline = if text.ends_with('\n') { "" } else { "\n" };
    format!("{text}{newline}{}", snapshot.status_line())
}

pub struct TaskOutputTool(pub Arc<TaskService>);

impl Tool for TaskOutputTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "task_output".into(),
            description: "Read the result of a background task. A task that has not finished \
                          yet reports no output; the answer always ends with a `[status: ...]` \
                          line. Returns at once unless `wait` is true, which blocks until the \
                          task finishes or the timeout passes."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task_id": {"type": "string", "description": "The id of the task, as returned when it was started."},
                    "wait": {"type": "boolean", "description": "Block until the task finishes or the timeout passes. A wait that times out reports [status: running] and leaves the task running."},
                    "timeout_ms": {"type": "number", "description": "How long to wait, in milliseconds (only with wait: true). Default 30000, at most 600000."}
                },
                "required": ["task_id"]
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, arguments: &Value) -> String {
        format!("Read task {}", task_id(arguments))
    }

    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let tasks = self.0.clone();
        async move {
            let id = task_id(&arguments);
            let wait = arguments
                .get("wait")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let snapshot = if wait {
                let ms = arguments
                    .get("timeout_ms")
                    .and_then(Value::as_f64)
                    .filter(|ms| ms.is_finite() && *ms >= 0.0)
                    .map_or(DEFAULT_WAIT_MS, |ms| ms as u64)
                    .min(MAX_WAIT_MS);
                tasks
                    .wait(id, Duration::from_millis(ms), &cx.session_id, &cx.cancel)
                    .await
            } else {
                tasks.read(id, &cx.session_id)
            };
            match snapshot {
                Ok(snapshot) => ToolOutput::ok(render(&snapshot)),
                Err(error) => task_error(error),
            }
        }
        .boxed()
    }
}

pub struct TaskListTool(pub Arc<TaskService>);

impl Tool for TaskListTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "task_list".into(),
            description: "List the background tasks of this session, running and finished, \
                          with id, kind and status."
                .into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, _arguments: &Value) -> String {
        "List background tasks".into()
    }

    fn call(&self, _arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let tasks = self.0.list(&cx.session_id);
        let text = if tasks.is_empty() {
            "(no background tasks)".to_owned()
        } else {
            tasks
                .iter()
                .map(|t| format!("{} [{}] {} — {}", t.id, t.kind, t.status.as_str(), t.label))
                .collect::<Vec<_>>()
                .join("\n")
        };
        std::future::ready(ToolOutput::ok(text)).boxed()
    }
}

pub struct TaskKillTool(pub Arc<TaskService>);

impl Tool for TaskKillTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "task_kill".into(),
            description: "Ask a running background task to stop. Returns at once; the task \
                          reports `killed` once its work has actually stopped."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task_id": {"type": "string", "description": "The id of the task to stop."},
                    "reason": {"type": "string", "description": "Optional short reason, kept in the log and passed to the task."}
                },
                "required": ["task_id"]
            }),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    fn title(&self, arguments: &Value) -> String {
        format!("Stop task {}", task_id(arguments))
    }

    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let id = task_id(&arguments);
        let reason = arguments.get("reason").and_then(Value::as_str);
        let output = match self.0.kill(id, &cx.session_id, reason) {
            Ok(KillResult::Requested) => {
                ToolOutput::ok(format!("requested cancellation of task {id}"))
            }
            Ok(KillResult::AlreadyFinished(snapshot)) => ToolOutput::ok(format!(
                "task {id} had already finished {}",
                snapshot.status_line()
            )),
            Err(error) => task_error(error),
        };
        std::future::ready(output).boxed()
    }
}

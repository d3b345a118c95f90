//! The model-facing task tools: `task_output`, `task_list`, `task_kill`. Their names,
//! parameters and result texts are a wire contract shared with other delegation agents.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{KillResult, TaskError, TaskService, TaskSnapshot};
use crate::tools::typed::TypedTool;
use crate::tools::{ToolContext, ToolKind, ToolOutput};

const DEFAULT_WAIT_MS: u64 = 30_000;
const MAX_WAIT_MS: u64 = 600_000;

fn task_error(error: TaskError) -> ToolOutput {
    ToolOutput::error("TaskError", "TASK_ERROR", format!("Error: {error}"))
}

/// A settled task's result (or a note that there is none yet), the service's note (a
/// delegation budget) if any, then its status line.
fn render(snapshot: &TaskSnapshot, note: Option<String>) -> String {
    let mut text = match (&snapshot.output, snapshot.status.is_terminal()) {
        (Some(output), true) if !output.is_empty() => output.clone(),
        _ => "(no new output)".to_owned(),
    };
    for line in note.into_iter().chain([snapshot.status_line()]) {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line);
    }
    text
}

/// The arguments of a `task_output` call.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct TaskOutputArgs {
    /// The id of the task, as returned when it was started.
    // Optional to serde, as before typed arguments: a missing id reads as an unknown task.
    #[schemars(required)]
    task_id: Option<String>,
    /// Block until the task finishes or the timeout passes. A wait that times out reports [status: running] and leaves the task running.
    #[serde(default)]
    wait: bool,
    /// How long to wait, in milliseconds (only with wait: true). Default 30000, at most 600000.
    #[serde(default)]
    timeout_ms: Option<f64>,
}

impl TaskOutputArgs {
    fn id(&self) -> &str {
        self.task_id.as_deref().unwrap_or_default()
    }
}

#[derive(Clone)]
pub(crate) struct TaskOutputTool(pub Arc<TaskService>);

impl TypedTool for TaskOutputTool {
    const NAME: &'static str = "task_output";
    const DESCRIPTION: &'static str = "Read the result of a background task. A task that has not \
        finished yet reports no output; the answer always ends with a `[status: ...]` line. \
        Returns at once unless `wait` is true, which blocks until the task finishes or the \
        timeout passes.";
    type Args = TaskOutputArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, args: Option<&TaskOutputArgs>) -> String {
        format!("Read task {}", args.map_or("", TaskOutputArgs::id))
    }

    async fn run(&self, args: TaskOutputArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let id = args.id();
        let snapshot = if args.wait {
            let ms = args
                .timeout_ms
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .map_or(DEFAULT_WAIT_MS, |ms| ms as u64)
                .min(MAX_WAIT_MS);
            let wait = Duration::from_millis(ms);
            self.0.wait(id, wait, &cx.session_id, &cx.cancel).await
        } else {
            self.0.read(id, &cx.session_id)
        };
        snapshot
            .map(|snapshot| ToolOutput::ok(render(&snapshot, self.0.output_note(&cx.session_id))))
            .map_err(task_error)
    }
}

/// `task_list` takes no arguments (and ignores any it is given).
#[derive(Deserialize, JsonSchema)]
pub(crate) struct TaskListArgs {}

#[derive(Clone)]
pub(crate) struct TaskListTool(pub Arc<TaskService>);

impl TypedTool for TaskListTool {
    const NAME: &'static str = "task_list";
    const DESCRIPTION: &'static str = "List the background tasks of this session, running and \
        finished, with id, kind and status.";
    type Args = TaskListArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, _args: Option<&TaskListArgs>) -> String {
        "List background tasks".into()
    }

    async fn run(&self, _args: TaskListArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
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
        Ok(ToolOutput::ok(text))
    }
}

/// The arguments of a `task_kill` call.
#[derive(Deserialize, JsonSchema)]
pub(crate) struct TaskKillArgs {
    /// The id of the task to stop.
    // Optional to serde, as before typed arguments: a missing id reads as an unknown task.
    #[schemars(required)]
    task_id: Option<String>,
    /// Optional short reason, kept in the log and passed to the task.
    #[serde(default)]
    reason: Option<String>,
}

impl TaskKillArgs {
    fn id(&self) -> &str {
        self.task_id.as_deref().unwrap_or_default()
    }
}

#[derive(Clone)]
pub(crate) struct TaskKillTool(pub Arc<TaskService>);

impl TypedTool for TaskKillTool {
    const NAME: &'static str = "task_kill";
    const DESCRIPTION: &'static str = "Ask a running background task to stop. Returns at once; \
        the task reports `killed` once its work has actually stopped.";
    type Args = TaskKillArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    fn title(&self, args: Option<&TaskKillArgs>) -> String {
        format!("Stop task {}", args.map_or("", TaskKillArgs::id))
    }

    async fn run(&self, args: TaskKillArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let id = args.id();
        match self.0.kill(id, &cx.session_id, args.reason.as_deref()) {
            Ok(KillResult::Requested) => Ok(ToolOutput::ok(format!(
                "requested cancellation of task {id}"
            ))),
            Ok(KillResult::AlreadyFinished(snapshot)) => Ok(ToolOutput::ok(format!(
                "task {id} had already finished {}",
                snapshot.status_line()
            ))),
            Err(error) => Err(task_error(error)),
        }
    }
}

//! The tools `kin mcp` offers a calling agent: their argument types (the schemas are generated
//! from them, as for kin's own tools) and the descriptions a calling model reads.

use std::sync::Arc;

use rmcp::model::Tool;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::tools::typed::parameters;
use crate::tools::PermissionMode;

/// What a call's tools may do; never wider than the server's ceiling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CallMode {
    #[default]
    ReadOnly,
    Ask,
    Allow,
}

impl CallMode {
    pub(crate) fn permission(self) -> PermissionMode {
        match self {
            Self::ReadOnly => PermissionMode::ReadOnly,
            Self::Ask => PermissionMode::Ask,
            Self::Allow => PermissionMode::Allow,
        }
    }
}

/// Where a `kin` task's session works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Isolation {
    // (Plain comments: variant docs would make the schema a `oneOf`.)
    // In a fresh git worktree of `cwd`'s repository.
    Worktree,
    // In `cwd` itself.
    None,
}

/// How wide a mode is: `read-only` < `ask` < `allow`.
pub(crate) fn width(mode: PermissionMode) -> u8 {
    match mode {
        PermissionMode::ReadOnly => 0,
        PermissionMode::Ask => 1,
        PermissionMode::Allow => 2,
    }
}

/// Arguments of `kin`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartArgs {
    /// The task for kin, in plain words: what to do, where, and what to report back.
    pub(crate) prompt: String,
    /// Absolute working directory of the new session. Default: the directory `kin mcp` runs in.
    pub(crate) cwd: Option<String>,
    /// What kin's tools may do: `read-only` (default; reads and searches only), `ask` (edits and commands are put to your user when your client supports elicitation, else refused), `allow` (edits and commands run). Never wider than the server was started with.
    #[serde(default)]
    pub(crate) mode: CallMode,
    /// A configured model id to run on (see `kin config`). Default: the configured default model.
    pub(crate) model: Option<String>,
    /// The name of one of the user's agent definitions (`.kin/agents/`, `.claude/agents/` in `cwd`, or `agents/` in kin's config directory) to run as: its instructions, tools, model and permission apply (`model` above wins over its model; its permission can only narrow `mode`). An unknown name is an error that lists the defined ones. Default: kin itself.
    pub(crate) agent: Option<String>,
    /// `worktree`: the session works in a fresh git worktree of `cwd`'s repository, on its own branch `kin/<session id>`, so the main checkout is left alone; each result reports the branch, changed files and a diffstat (a worktree without changes is removed with its branch), and `kin_reply` continues in it. Outside a git repository the call fails. `none`: work in `cwd`. Default: the agent definition's `isolation`, else `none`.
    #[serde(default)]
    #[schemars(with = "Isolation")]
    pub(crate) isolation: Option<Isolation>,
    /// Start the task in the background: the call returns the session id at once; collect the answer with `kin_output`. Default false: the call returns the final answer.
    #[serde(default)]
    pub(crate) background: bool,
}

/// Arguments of `kin_reply`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplyArgs {
    /// The session to continue, as `kin` or `kin_list` returned it.
    pub(crate) session_id: String,
    /// The message. A session that is working now takes it into its running task; an idle one starts a new task with it.
    pub(crate) prompt: String,
    /// As in `kin`: `read-only` (default), `ask` or `allow`, for the new task.
    #[serde(default)]
    pub(crate) mode: CallMode,
    /// Return at once and collect the answer with `kin_output`. Default false: wait for the answer.
    #[serde(default)]
    pub(crate) background: bool,
}

/// Arguments of `kin_output`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputArgs {
    /// The session whose latest task to read.
    pub(crate) session_id: String,
    /// Wait until the task finishes or the timeout passes. Default false: report the state now.
    #[serde(default)]
    pub(crate) wait: bool,
    /// How long to wait, in seconds (only with wait: true). Default 60, at most 600.
    pub(crate) timeout_seconds: Option<u64>,
}

/// Arguments of `kin_cancel`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelArgs {
    /// The session whose running task to cancel.
    pub(crate) session_id: String,
}

/// Arguments of `kin_list` (none).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {}

const KIN: &str = "Delegate a coding task to kin, an agent with file, search and shell tools \
    and its own subagents. It works in `cwd` and answers in text; name one of the user's agent \
    definitions in `agent` to run as that agent; with isolation `worktree` its edits stay in a \
    git worktree on their own branch. By default the call waits and returns the final answer \
    with the session id; with background: true it returns the session id at once (collect the \
    answer with `kin_output`). Continue the session later with `kin_reply`. Progress \
    notifications report what kin is doing while the call runs.";
const KIN_REPLY: &str = "Continue a kin session by id, also one started before the server \
    restarted: a session that is working takes the message into its running task, an idle \
    one runs a new task with it. Waits for the answer unless background: true.";
const KIN_OUTPUT: &str = "Read the state and, once finished, the answer of a session's latest \
    task; with wait: true, wait for it to finish (up to timeout_seconds).";
const KIN_CANCEL: &str = "Cancel the running task of a kin session; it settles as cancelled. \
    The session stays and can be continued with `kin_reply`.";
const KIN_LIST: &str = "List the kin sessions this server started or continued, with the state \
    of their latest task, usage, and the subagents each delegated to.";

/// The names of the server's tools, as listed.
pub(crate) const NAMES: [&str; 5] = ["kin", "kin_reply", "kin_output", "kin_cancel", "kin_list"];

fn tool(name: &'static str, description: &'static str, schema: Arc<Value>) -> Tool {
    let object = match Arc::unwrap_or_clone(schema) {
        Value::Object(object) => object,
        _ => serde_json::Map::new(),
    };
    Tool::new(name, description, Arc::new(object))
}

/// The tools, in [`NAMES`] order.
pub(crate) fn list() -> Vec<Tool> {
    vec![
        tool("kin", KIN, parameters::<StartArgs>()),
        tool("kin_reply", KIN_REPLY, parameters::<ReplyArgs>()),
        tool("kin_output", KIN_OUTPUT, parameters::<OutputArgs>()),
        tool("kin_cancel", KIN_CANCEL, parameters::<CancelArgs>()),
        tool("kin_list", KIN_LIST, parameters::<ListArgs>()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_listed_once_in_order_with_an_object_schema() {
        let tools = list();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, NAMES);
        for tool in &tools {
            assert_eq!(tool.input_schema.get("type"), Some(&Value::from("object")));
        }
    }

    #[test]
    fn unknown_arguments_and_modes_are_refused() {
        let bad: Result<StartArgs, _> =
            serde_json::from_value(serde_json::json!({"prompt": "x", "extra": 1}));
        assert!(bad.is_err());
        let bad: Result<StartArgs, _> =
            serde_json::from_value(serde_json::json!({"prompt": "x", "mode": "wide"}));
        assert!(bad.is_err());
        let good: StartArgs =
            serde_json::from_value(serde_json::json!({"prompt": "x", "mode": "read-only"}))
                .unwrap();
        assert_eq!(good.mode, CallMode::ReadOnly);
    }
}

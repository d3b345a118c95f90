//! Tools the model can call: the [`Tool`] trait and the [`ToolRegistry`] a session offers.
//!
//! A tool failure is told to the model (an error result) and the turn goes on; only the agent
//! loop decides when a turn ends.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::model::ToolSpec;

/// What kind of action a tool performs; mirrors ACP's tool kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    Other,
}

/// Everything a tool call may use.
#[derive(Clone)]
pub struct ToolContext {
    pub session_id: String,
    /// The model's id for this call.
    pub call_id: String,
    pub cwd: PathBuf,
    pub cancel: CancellationToken,
}

/// The result the model will see.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub text: String,
    pub is_error: bool,
    /// Machine-readable error name and code for the log (e.g. `UnknownTool`, `UNKNOWN_TOOL`).
    pub error: Option<(String, String)>,
}

impl ToolOutput {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            error: None,
        }
    }

    pub fn error(name: &str, code: &str, text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            error: Some((name.into(), code.into())),
        }
    }

    pub fn cancelled() -> Self {
        Self::error(
            "Cancelled",
            "CANCELLED",
            "Error: the tool call was cancelled",
        )
    }
}

pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;
    fn kind(&self) -> ToolKind;
    /// A short human title for this call, shown by editors.
    fn title(&self, arguments: &Value) -> String;
    /// Runs the call. Must return promptly once `cx.cancel` trips.
    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput>;
}

/// The tools of a session, kept sorted by name (the order they are offered to the model).
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name, tool);
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Keeps only the tools whose name satisfies `keep`.
    pub fn retain(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.tools.retain(|name, _| keep(name));
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|tool| tool.spec()).collect()
    }

    /// Runs a call by name; unknown tools and unparsable arguments become error results.
    pub async fn call(&self, name: &str, arguments: &str, cx: ToolContext) -> ToolOutput {
        let Some(tool) = self.get(name) else {
            return ToolOutput::error(
                "UnknownTool",
                "UNKNOWN_TOOL",
                format!("Error: unknown tool `{name}`"),
            );
        };
        let parsed = match arguments.trim() {
            "" => Ok(Value::Object(Default::default())),
            text => serde_json::from_str::<Value>(text),
        };
        let arguments = match parsed {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => {
                return ToolOutput::error(
                    "InvalidArguments",
                    "INVALID_ARGUMENTS",
                    "Error: tool arguments must be a JSON object",
                )
            }
            Err(error) => {
                return ToolOutput::error(
                    "InvalidArguments",
                    "INVALID_ARGUMENTS",
                    format!("Error: tool arguments are not valid JSON: {error}"),
                )
            }
        };
        let cancel = cx.cancel.clone();
        tokio::select! {
            biased;
            _ = cancel.cancelled() => ToolOutput::cancelled(),
            output = tool.call(arguments, cx) => output,
        }
    }
}

//! A server tool as a kin [`Tool`]: offered as `mcp__<server>__<tool>` with the server's
//! description and input schema; each call asks the session's permission rules first (an
//! `execute` call, or a `read` one outside the workspace when the server marks the tool
//! `readOnlyHint: true`, so `ask` asks for both and `read-only` refuses only the first).

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;

use super::server::{CallOutcome, Server};
use crate::model::ToolSpec;
use crate::tools::permission::Scope;
use crate::tools::{Tool, ToolContext, ToolDisplay, ToolKind, ToolOutput};

pub(crate) struct McpTool {
    pub(crate) server: Arc<Server>,
    /// The name the server knows it by.
    pub(crate) remote: String,
    /// The name the model calls it by.
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) schema: Value,
    pub(crate) read_only: bool,
}

impl McpTool {
    pub(crate) fn new(server: Arc<Server>, name: String, tool: &rmcp::model::Tool) -> Self {
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        let description = match &tool.description {
            Some(text) => format!("{text} (MCP server `{}`)", server.name),
            None => format!(
                "The `{}` tool of the MCP server `{}`.",
                tool.name, server.name
            ),
        };
        Self {
            remote: tool.name.to_string(),
            schema: Value::Object((*tool.input_schema).clone()),
            server,
            name,
            description,
            read_only,
        }
    }
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.schema.clone(),
        }
    }

    fn kind(&self) -> ToolKind {
        if self.read_only {
            ToolKind::Read
        } else {
            ToolKind::Execute
        }
    }

    fn title(&self, _: &Value) -> String {
        format!("{} ({})", self.remote, self.server.name)
    }

    fn call(&self, arguments: Value, cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let server = self.server.clone();
        let remote = self.remote.clone();
        let (kind, title) = (self.kind(), self.title(&arguments));
        async move {
            let scope = if kind == ToolKind::Read {
                Scope::Outside
            } else {
                Scope::Workspace
            };
            let mut prompt = cx.prompt(kind, title, ToolDisplay::default());
            prompt.raw_input = Some(arguments.clone());
            if let Err(refused) = cx.authorize(scope, prompt).await {
                return refused;
            }
            let arguments = match arguments {
                Value::Object(map) => Some(map),
                _ => None,
            };
            match server.call(&remote, arguments, &cx.cancel).await {
                CallOutcome::Result(result) => super::result::to_output(&server.name, &result),
                CallOutcome::Cancelled => ToolOutput::cancelled(),
                CallOutcome::Failed(reason) => ToolOutput::error(
                    "McpServerUnavailable",
                    "MCP_SERVER_UNAVAILABLE",
                    format!(
                        "Error: the MCP server `{}` could not run `{remote}`: {reason}",
                        server.name
                    ),
                ),
            }
        }
        .boxed()
    }
}

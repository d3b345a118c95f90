//! A server tool as a kin [`Tool`]: offered as `mcp__<server>__<tool>` with the server's
//! description and input schema; each call asks the session's permission rules first (an
//! `execute` call, or a `read` one outside the workspace when the server marks the tool
//! `readOnlyHint: true`, so `ask` asks for both and `read-only` refuses only the first). An
//! "always" answer covers this one tool of this server. The editor shows the tool's own title
//! (`title`, else its annotations' `title`, else `server: tool`), not the model's name for it.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;

use super::elicit::Asker;
use super::server::{CallOutcome, Server};
use crate::model::ToolSpec;
use crate::tools::client::ServerTool;
use crate::tools::permission::Scope;
use crate::tools::{Tool, ToolContext, ToolDisplay, ToolKind, ToolOutput};

pub(crate) struct McpTool {
    pub(crate) server: Arc<Server>,
    /// The name the server knows it by.
    pub(crate) remote: String,
    /// The name the model calls it by.
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) schema: Arc<Value>,
    pub(crate) read_only: bool,
    /// What the editor shows for its calls.
    pub(crate) title: String,
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
        let title = tool
            .title
            .clone()
            .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
            .filter(|title| !title.trim().is_empty())
            .unwrap_or_else(|| format!("{}: {}", server.name, tool.name));
        Self {
            title,
            remote: tool.name.to_string(),
            schema: Arc::new(Value::Object((*tool.input_schema).clone())),
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
        self.title.clone()
    }

    /// The server says the tool changes nothing (`readOnlyHint: true`).
    fn overlaps(&self, _: &Value) -> bool {
        self.read_only
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
            prompt.server_tool = Some(ServerTool {
                server: server.name.clone(),
                tool: remote.clone(),
            });
            if let Err(refused) = cx.authorize(scope, prompt).await {
                return refused;
            }
            let arguments = match arguments {
                Value::Object(map) => Some(map),
                _ => None,
            };
            let show = |text: &str| {
                if let Some(client) = &cx.client {
                    client.show_progress(&cx.call_id, text);
                }
            };
            let asker = Asker {
                client: cx.client.clone(),
                call_id: cx.call_id.clone(),
                cancel: cx.cancel.clone(),
                asked: Arc::default(),
            };
            match server.call(&remote, arguments, asker, &show).await {
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

//! The editor's `mcpServers` (of `session/new`, `load`, `resume`) as kin's server specs, and
//! the per-server warnings for entries kin refuses (SSE).

use agent_client_protocol_schema::v1::McpServer;

use crate::mcp::{ServerSpec, Transport};

pub(crate) fn specs(servers: &[McpServer]) -> Vec<ServerSpec> {
    servers
        .iter()
        .filter_map(|server| match server {
            McpServer::Stdio(stdio) => Some(ServerSpec {
                name: stdio.name.clone(),
                transport: Transport::Stdio {
                    command: stdio.command.to_string_lossy().into_owned(),
                    args: stdio.args.clone(),
                    env: stdio
                        .env
                        .iter()
                        .map(|v| (v.name.clone(), v.value.clone()))
                        .collect(),
                },
                call_timeout: None,
            }),
            McpServer::Http(http) => Some(ServerSpec {
                name: http.name.clone(),
                transport: Transport::Http {
                    url: http.url.clone(),
                    headers: http
                        .headers
                        .iter()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect(),
                    login: None,
                },
                call_timeout: None,
            }),
            McpServer::Sse(sse) => Some(ServerSpec {
                name: sse.name.clone(),
                transport: Transport::Sse {
                    url: sse.url.clone(),
                },
                call_timeout: None,
            }),
            #[allow(unreachable_patterns)]
            _ => None,
        })
        .collect()
}

/// A warning title for each server kin will not connect to.
pub(crate) fn refusals(specs: &[ServerSpec]) -> Vec<String> {
    specs
        .iter()
        .filter(|spec| matches!(spec.transport, Transport::Sse { .. }))
        .map(|spec| {
            format!(
                "MCP server `{}` is not used: kin does not support the SSE transport (use stdio or streamable HTTP)",
                spec.name
            )
        })
        .collect()
}

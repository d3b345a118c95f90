//! MCP servers the wire tests start themselves, and what a tool call showed.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout};

/// Starts tests/mcp/http_server.py with `python`, wanting the header `X-Kin-Test: token-123`;
/// returns the server (killed on drop), the rest of its output and the port it listens on.
pub async fn http_server(python: &Path) -> (Child, Lines<BufReader<ChildStdout>>, String) {
    let mut server = tokio::process::Command::new(python)
        .arg(super::repo().join("tests/mcp/http_server.py"))
        .args(["X-Kin-Test", "token-123"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let port = first.strip_prefix("PORT ").unwrap().to_owned();
    (server, lines, port)
}

/// Everything the updates say about the tool call `call_id`.
pub fn tool_text(updates: &[Value], call_id: &str) -> String {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["toolCallId"] == call_id)
        .map(|u| u["params"]["update"].to_string())
        .collect()
}

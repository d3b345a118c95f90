//! MCP servers through the real binary: the official filesystem server from npm over stdio
//! (installed by `.ci/run` from tests/mcp/package-lock.json), a server that never answers
//! (the startup timeout), one that exits at once; permissions in `read-only`; and no server
//! process left after `session/close`, `session/delete` or a kill -9 of kin; "always" answers
//! per server tool; and, against the Python SDK's stdio server (tests/mcp/stdio_server.py),
//! MCP cancellation, a changed tool list, and a restart after a crash (`sdk_server`); asking
//! and "always" answers per server tool (`permissions`).

mod permissions;
mod sdk_server;

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::mcp::tool_text;
use common::{Script, Wire};
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(60);

/// The filesystem server's entry point, or `None` (with a visible line) when node or the
/// package is missing outside CI; in CI a missing server fails the test.
fn filesystem_server() -> Option<(String, PathBuf)> {
    let script = common::repo()
        .join("tests/mcp/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let node = std::process::Command::new("node").arg("--version").output();
    if node.is_ok_and(|o| o.status.success()) && script.is_file() {
        return Some(("node".into(), script));
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have node and tests/mcp installed (`npm ci` in tests/mcp)"
    );
    eprintln!("SKIPPED: node or @modelcontextprotocol/server-filesystem missing (run `npm ci` in tests/mcp)");
    None
}

/// Polls for a process exit, which has no event to wait on.
async fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `kin acp --replay replay` with a startup timeout generous enough for a loaded machine (the
/// tests run servers in parallel on few cores).
fn start(replay: &std::path::Path) -> Wire {
    let home = common::home_with("mcp_startup_timeout = \"60s\"\n");
    Wire::start_in(Some(replay), home)
}

async fn new_session(wire: &mut Wire, servers: Value) -> String {
    let cwd = wire.cwd();
    let (_, answer) = wire
        .request(1, "session/new", json!({"cwd": cwd, "mcpServers": servers}))
        .await;
    answer["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session: {answer}"))
        .to_owned()
}

/// A new session with `servers`, in mode `allow`.
async fn allowed_session(wire: &mut Wire, servers: Value) -> String {
    let session = new_session(wire, servers).await;
    wire.set_mode(2, &session, "allow").await;
    session
}

fn filesystem_entry(command: &str, script: &std::path::Path, root: &str) -> Value {
    json!([{"name": "files", "command": command, "args": [script, root], "env": []}])
}

#[tokio::test]
async fn the_filesystem_server_answers_a_tool_call_and_is_gone_after_close() {
    let Some((node, script)) = filesystem_server() else {
        return;
    };
    let replay = Script::new()
        .call("c1", "mcp__files__list_directory", json!({"path": "."}))
        .text("Listed.")
        .dir();
    let mut wire = start(replay.path());
    std::fs::write(wire.cwd.path().join("hello-mcp.txt"), "hi").unwrap();
    wire.initialize().await;
    let root = wire.cwd();
    let session = allowed_session(&mut wire, filesystem_entry(&node, &script, &root)).await;
    let updates = wire.turn(3, &session, "Go.").await;
    let text = tool_text(&updates, "c1");
    assert!(text.contains("hello-mcp.txt"), "{text}");
    let marker = script.to_string_lossy().into_owned();
    assert!(!common::marked(&marker).is_empty(), "the server runs");
    let (_, answer) = wire
        .request(4, "session/close", json!({"sessionId": session}))
        .await;
    assert!(answer.get("error").is_none(), "{answer}");
    poll_until("the server process ends", || {
        common::marked(&marker)
            .iter()
            .all(|(_, line)| !line.contains(&root))
    })
    .await;
}

#[tokio::test]
async fn read_only_refuses_a_server_tool_without_the_read_only_hint() {
    let Some((node, script)) = filesystem_server() else {
        return;
    };
    // `write_file` is not annotated read-only by the server.
    let replay = Script::new()
        .call(
            "w1",
            "mcp__files__write_file",
            json!({"path": "made.txt", "content": "x"}),
        )
        .text("Tried.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let root = wire.cwd();
    let session = new_session(&mut wire, filesystem_entry(&node, &script, &root)).await;
    wire.set_mode(2, &session, "read-only").await;
    let updates = wire.turn(3, &session, "Go.").await;
    let text = tool_text(&updates, "w1");
    assert!(text.contains("read-only"), "{text}");
    assert!(!wire.cwd.path().join("made.txt").exists());
}

#[tokio::test]
async fn a_server_that_never_answers_is_left_behind_with_a_notice_and_killed_with_kin() {
    let marker = format!("1000.{}77", std::process::id());
    let home = common::home_with("mcp_startup_timeout = \"300ms\"\n");
    let replay = Script::new().text("Done.").dir();
    let mut wire = Wire::start_in(Some(replay.path()), home);
    wire.initialize().await;
    let servers = json!([
        {"name": "stuck", "command": "sleep", "args": [marker], "env": []},
        {"name": "gone", "command": "false", "args": [], "env": []},
        {"name": "old", "type": "sse", "url": "http://127.0.0.1:9/sse", "headers": []}
    ]);
    let cwd = wire.cwd();
    let (after_new, answer) = wire
        .request(1, "session/new", json!({"cwd": cwd, "mcpServers": servers}))
        .await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    let _ = after_new;
    let updates = wire.turn(3, &session, "Go.").await;
    let all: String = updates.iter().map(Value::to_string).collect();
    assert!(all.contains("MCP server `stuck` is not available"), "{all}");
    assert!(all.contains("MCP server `gone` is not available"), "{all}");
    assert!(all.contains("MCP server `old` is not used"), "{all}");
    assert!(!common::marked(&marker).is_empty(), "the stuck server runs");
    // kill -9 of kin: the process guard takes the server down.
    wire.child.start_kill().unwrap();
    poll_until("the stuck server ends with kin", || {
        common::marked(&marker).is_empty()
    })
    .await;
}

#[tokio::test]
async fn delete_stops_the_servers_of_a_session() {
    let marker = format!("1000.{}78", std::process::id());
    let replay = Script::new().dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let session = new_session(
        &mut wire,
        json!([{"name": "stuck", "command": "sleep", "args": [marker], "env": []}]),
    )
    .await;
    poll_until("the server starts", || !common::marked(&marker).is_empty()).await;
    let (_, answer) = wire
        .request(4, "session/delete", json!({"sessionId": session}))
        .await;
    assert!(answer.get("error").is_none(), "{answer}");
    poll_until("the server ends", || common::marked(&marker).is_empty()).await;
}

#[tokio::test]
async fn an_in_process_child_calls_the_parents_server_through_the_same_process() {
    let Some((node, script)) = filesystem_server() else {
        return;
    };
    let parent = Script::new()
        .call(
            "s1",
            "subagent",
            json!({"description": "List", "prompt": "List the files."}),
        )
        .text("Done.")
        .dir();
    let child = Script::new()
        .call("c1", "mcp__files__list_directory", json!({"path": "."}))
        .text("Child listed.")
        .dir();
    std::fs::copy(
        child.path().join("session.jsonl"),
        parent.path().join("session.1.jsonl"),
    )
    .unwrap();
    let mut wire = Wire::start(Some(parent.path()));
    std::fs::write(wire.cwd.path().join("from-child.txt"), "hi").unwrap();
    wire.initialize().await;
    let root = wire.cwd();
    let session = allowed_session(&mut wire, filesystem_entry(&node, &script, &root)).await;
    wire.turn(3, &session, "Go.").await;
    let marker = script.to_string_lossy().into_owned();
    let servers = common::marked(&marker)
        .into_iter()
        .filter(|(_, line)| line.contains(&root) && !line.contains("__guard"))
        .count();
    assert_eq!(
        servers, 1,
        "one server process for the session and its child"
    );
    // The child's log has the server's answer.
    let logs: String = common::session_files(wire.home.path())
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .collect();
    assert!(logs.contains("from-child.txt"), "{logs}");
}

/// The Python with what these tests import (see `common::python_with`).
fn python_with_mcp() -> Option<PathBuf> {
    common::python_with("mcp.server.mcpserver, uvicorn")
}

#[tokio::test]
async fn an_http_server_gets_the_editors_headers_and_answers_a_call() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let (mut server, _, port) = common::mcp::http_server(&python).await;
    let replay = Script::new()
        .call("h1", "mcp__web__echo", json!({"text": "over http"}))
        .text("Echoed.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let headers = json!([{"name": "X-Kin-Test", "value": "token-123"}]);
    let session = new_session(
        &mut wire,
        json!([{"type": "http", "name": "web", "url": url, "headers": headers}]),
    )
    .await;
    wire.set_mode(2, &session, "allow").await;
    let updates = wire.turn(3, &session, "Go.").await;
    let text = tool_text(&updates, "h1");
    assert!(text.contains("echo: over http"), "{updates:?}");
    let _ = server.start_kill();
}

#[tokio::test]
async fn an_acp_child_gets_the_servers_its_capabilities_accept() {
    let marker = format!("1000.{}79", std::process::id());
    let home = common::home_with(&format!(
            "mcp_startup_timeout = \"200ms\"\n[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"mcp\"]\n",
            common::fake_acp_child().display().to_string()
        ));
    let replay = Script::new()
        .call(
            "a1",
            "subagent_fake",
            json!({"description": "Ask", "prompt": "Which servers?"}),
        )
        .text("Done.")
        .dir();
    let mut wire = Wire::start_in(Some(replay.path()), home);
    wire.initialize().await;
    let servers = json!([
        {"name": "files", "command": "sleep", "args": [marker], "env": []},
        {"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": []}
    ]);
    let session = allowed_session(&mut wire, servers).await;
    let updates = wire.turn(3, &session, "Go.").await;
    let text = tool_text(&updates, "a1");
    // The child takes stdio, and no HTTP (`mcpCapabilities.http: false`).
    assert!(text.contains("mcp files"), "{text}");
    assert!(!text.contains("files,web"), "{text}");
}

#[tokio::test]
async fn a_server_flooding_its_stderr_still_serves() {
    let Some((node, script)) = filesystem_server() else {
        return;
    };
    // 32 MiB on stderr before it serves: kin keeps reading (and only the last lines).
    let flood = format!(
        "head -c 33554432 /dev/zero | tr '\\0' x >&2; exec {node} {} \"$0\"",
        script.display()
    );
    let replay = Script::new()
        .call("f1", "mcp__files__list_directory", json!({"path": "."}))
        .text("Listed.")
        .dir();
    let mut wire = start(replay.path());
    std::fs::write(wire.cwd.path().join("after-flood.txt"), "hi").unwrap();
    wire.initialize().await;
    let root = wire.cwd();
    let servers =
        json!([{"name": "files", "command": "sh", "args": ["-c", flood, root], "env": []}]);
    let session = allowed_session(&mut wire, servers).await;
    let updates = wire.turn(3, &session, "Go.").await;
    let text = tool_text(&updates, "f1");
    assert!(text.contains("after-flood.txt"), "{text}");
}

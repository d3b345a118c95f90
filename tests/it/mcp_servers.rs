//! MCP servers through the real binary: the official filesystem server from npm over stdio
//! (installed by `.ci/run` from tests/mcp/package-lock.json), a server that never answers
//! (the startup timeout), one that exits at once; permissions in `read-only`; and no server
//! process left after `session/close`, `session/delete` or a kill -9 of kin; "always" answers
//! per server tool; and, against the Python SDK's stdio server (tests/mcp/stdio_server.py),
//! MCP cancellation, a changed tool list, and a restart after a crash.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config/kin")).unwrap();
    std::fs::write(
        home.path().join("config/kin/config.toml"),
        "mcp_startup_timeout = \"60s\"\n",
    )
    .unwrap();
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
    set_mode(wire, &session, "allow").await;
    session
}

async fn set_mode(wire: &mut Wire, session: &str, mode: &str) {
    let (_, answer) = wire
        .request(
            2,
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
        )
        .await;
    assert!(answer.get("error").is_none(), "{answer}");
}

/// Prompts and returns the updates sent before the answer.
async fn prompt(wire: &mut Wire, session: &str) -> Vec<Value> {
    let (updates, answer) = wire
        .request(
            3,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "Go."}]}),
        )
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    updates
}

fn filesystem_entry(command: &str, script: &std::path::Path, root: &str) -> Value {
    json!([{"name": "files", "command": command, "args": [script, root], "env": []}])
}

fn tool_text(updates: &[Value], call_id: &str) -> String {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["toolCallId"] == call_id)
        .map(|u| u["params"]["update"].to_string())
        .collect()
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
    let updates = prompt(&mut wire, &session).await;
    let text = tool_text(&updates, "c1");
    assert!(text.contains("hello-mcp.txt"), "{text}");
    let log = std::fs::read_to_string(common::log_file(wire.home.path(), 0)).unwrap_or_default();
    let _ = log;
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
    set_mode(&mut wire, &session, "read-only").await;
    let updates = prompt(&mut wire, &session).await;
    let text = tool_text(&updates, "w1");
    assert!(text.contains("read-only"), "{text}");
    assert!(!wire.cwd.path().join("made.txt").exists());
}

#[tokio::test]
async fn a_server_that_never_answers_is_left_behind_with_a_notice_and_killed_with_kin() {
    let marker = format!("1000.{}77", std::process::id());
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config/kin")).unwrap();
    std::fs::write(
        home.path().join("config/kin/config.toml"),
        "mcp_startup_timeout = \"300ms\"\n",
    )
    .unwrap();
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
    let updates = prompt(&mut wire, &session).await;
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
    prompt(&mut wire, &session).await;
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
    use tokio::io::AsyncBufReadExt;
    let Some(python) = python_with_mcp() else {
        return;
    };
    let mut server = tokio::process::Command::new(python)
        .arg(common::repo().join("tests/mcp/http_server.py"))
        .args(["X-Kin-Test", "token-123"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let port = first.strip_prefix("PORT ").unwrap().to_owned();
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
    set_mode(&mut wire, &session, "allow").await;
    let updates = prompt(&mut wire, &session).await;
    let text = tool_text(&updates, "h1");
    assert!(text.contains("echo: over http"), "{updates:?}");
    let _ = server.start_kill();
}

#[tokio::test]
async fn an_acp_child_gets_the_servers_its_capabilities_accept() {
    let marker = format!("1000.{}79", std::process::id());
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config/kin")).unwrap();
    std::fs::write(
        home.path().join("config/kin/config.toml"),
        format!(
            "mcp_startup_timeout = \"200ms\"\n[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"mcp\"]\n",
            common::fake_acp_child().display().to_string()
        ),
    )
    .unwrap();
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
    let updates = prompt(&mut wire, &session).await;
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
    let updates = prompt(&mut wire, &session).await;
    let text = tool_text(&updates, "f1");
    assert!(text.contains("after-flood.txt"), "{text}");
}

#[tokio::test]
async fn ask_mode_asks_before_each_server_tool_call() {
    let Some((node, script)) = filesystem_server() else {
        return;
    };
    let replay = Script::new()
        .call(
            "w1",
            "mcp__files__write_file",
            json!({"path": "asked.txt", "content": "x"}),
        )
        .call("l1", "mcp__files__list_allowed_directories", json!({}))
        .text("Done.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let root = wire.cwd();
    let session = new_session(&mut wire, filesystem_entry(&node, &script, &root)).await;
    wire.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "Go."}]}}),
    )
    .await;
    // Reject the first question, allow the second, once each.
    let mut asked = Vec::new();
    let mut updates = Vec::new();
    loop {
        let message = wire.read().await.expect("kin answers the prompt");
        if message["method"] == "session/request_permission" {
            let kind = if asked.is_empty() {
                "reject_once"
            } else {
                "allow_once"
            };
            let options = message["params"]["options"].as_array().unwrap();
            let option = options.iter().find(|o| o["kind"] == kind).unwrap();
            asked.push(message["params"]["toolCall"]["title"].to_string());
            wire.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result":
                {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}}))
                .await;
        } else if message["id"] == 3 {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            break;
        } else {
            updates.push(message);
        }
    }
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("Write File"), "{asked:?}");
    assert!(tool_text(&updates, "w1").contains("the user rejected this call"));
    assert!(!wire.cwd.path().join("asked.txt").exists());
    assert!(tool_text(&updates, "l1").contains(&root), "{updates:?}");
}

/// Sends a prompt and answers each permission request with the option of kind `choose(title)`;
/// returns the updates, the permission requests, and the prompt's answer.
async fn prompt_answering(
    wire: &mut Wire,
    session: &str,
    id: i64,
    mut choose: impl FnMut(&str) -> &'static str,
) -> (Vec<Value>, Vec<Value>, Value) {
    wire.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "Go."}]}}),
    )
    .await;
    let (mut updates, mut asked) = (Vec::new(), Vec::new());
    loop {
        let message = wire.read().await.expect("kin answers the prompt");
        if message["method"] == "session/request_permission" {
            let title = message["params"]["toolCall"]["title"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let kind = choose(&title);
            let options = message["params"]["options"].as_array().unwrap();
            let option = options.iter().find(|o| o["kind"] == kind).unwrap();
            wire.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result":
                {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}}))
                .await;
            asked.push(message);
        } else if message["id"] == id {
            return (updates, asked, message);
        } else {
            updates.push(message);
        }
    }
}

#[tokio::test]
async fn always_allowing_a_server_tool_covers_that_tool_alone_and_survives_a_load() {
    let Some((node, script)) = filesystem_server() else {
        return;
    };
    let write = |path: &str| json!({"path": path, "content": "x"});
    let replay = Script::new()
        .calls(&[("w1", "mcp__files__write_file", write("a.txt"))])
        .calls(&[("w2", "mcp__files__write_file", write("b.txt"))])
        .call("d1", "mcp__files__create_directory", json!({"path": "d"}))
        .text("Turn one.")
        .calls(&[("w3", "mcp__files__write_file", write("c.txt"))])
        .text("Turn two.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let root = wire.cwd();
    let servers = filesystem_entry(&node, &script, &root);
    let session = new_session(&mut wire, servers.clone()).await;
    let (_, asked, answer) = prompt_answering(&mut wire, &session, 3, |title| {
        if title == "Write File" {
            "allow_always"
        } else {
            "reject_once"
        }
    })
    .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let titles: Vec<_> = asked
        .iter()
        .map(|m| m["params"]["toolCall"]["title"].clone())
        .collect();
    assert_eq!(titles, [json!("Write File"), json!("Create Directory")]);
    let names: Vec<_> = asked[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        names.contains(&"Always allow the files tool write_file this session".to_owned()),
        "{names:?}"
    );
    let cwd = wire.cwd.path().to_owned();
    assert!(cwd.join("a.txt").exists() && cwd.join("b.txt").exists());
    assert!(!cwd.join("d").exists());

    // Loaded again, the answer still covers write_file.
    let (_, closed) = wire
        .request(4, "session/close", json!({"sessionId": session}))
        .await;
    assert!(closed.get("error").is_none(), "{closed}");
    let (_, loaded) = wire
        .request(
            5,
            "session/load",
            json!({"sessionId": session, "cwd": root, "mcpServers": servers}),
        )
        .await;
    assert!(loaded.get("error").is_none(), "{loaded}");
    let (_, asked, answer) = prompt_answering(&mut wire, &session, 6, |_| "reject_once").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(asked.is_empty(), "{asked:?}");
    assert!(cwd.join("c.txt").exists());
}

/// Lines the test server writes to its FIFO (`tests/mcp/stdio_server.py`), as they come.
struct Marks {
    path: PathBuf,
    /// A FIFO the server reads when a tool waits for the test.
    go: PathBuf,
    lines: tokio::sync::mpsc::UnboundedReceiver<String>,
    _dir: tempfile::TempDir,
}

impl Marks {
    fn new() -> Self {
        use std::io::BufRead;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("marks.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let go = dir.path().join("go.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&go)
            .status()
            .unwrap();
        assert!(made.success());
        // Opened for writing too, so the reader never sees the end of input between writers.
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let (tx, lines) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(fifo).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            path,
            go,
            lines,
            _dir: dir,
        }
    }

    /// Lets the server's waiting tool return.
    async fn go(&self) {
        let go = self.go.clone();
        tokio::task::spawn_blocking(move || std::fs::write(go, "go\n").unwrap())
            .await
            .unwrap();
    }

    /// Waits for the line `want`, skipping others.
    async fn wait_for(&mut self, want: &str) {
        loop {
            let line = tokio::time::timeout(DEADLINE, self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no `{want}` from the server"))
                .expect("the marks reader runs");
            if line == want {
                return;
            }
        }
    }
}

/// The Python test server as the session's only server, `py`; `None` (skipped) without Python.
fn python_server(marks: &Marks) -> Option<Value> {
    let python = python_with_mcp()?;
    let script = common::repo().join("tests/mcp/stdio_server.py");
    let args = json!([script, marks.path, marks.go]);
    Some(json!([{"name": "py", "command": python, "args": args, "env": []}]))
}

#[tokio::test]
async fn a_cancelled_call_reaches_the_server_as_mcp_cancellation() {
    let mut marks = Marks::new();
    let Some(servers) = python_server(&marks) else {
        return;
    };
    let replay = Script::new()
        .call("w1", "mcp__py__wait", json!({}))
        .text("Never.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let session = allowed_session(&mut wire, servers).await;
    wire.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "Go."}]}}),
    )
    .await;
    marks.wait_for("waiting").await;
    wire.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
        "params": {"sessionId": session}}))
        .await;
    let (_, answer) = wire.answer(&json!(3)).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    marks.wait_for("cancelled").await;
}

#[tokio::test]
async fn a_changed_tool_list_is_offered_from_the_next_step_on() {
    let mut marks = Marks::new();
    let Some(servers) = python_server(&marks) else {
        return;
    };
    let replay = Script::new()
        .call("g1", "mcp__py__grow", json!({}))
        .text("Grew.")
        .call("n1", "mcp__py__grown", json!({}))
        .text("Done.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let session = allowed_session(&mut wire, servers).await;
    prompt(&mut wire, &session).await;
    // The relisting the server's notification caused (the first listing was at start).
    marks.wait_for("listed 2").await;
    let updates = prompt(&mut wire, &session).await;
    let text = tool_text(&updates, "n1");
    assert!(text.contains("grown ran"), "{updates:?}");
}

#[tokio::test]
async fn a_crashed_server_is_restarted_and_its_tools_work_again() {
    let mut marks = Marks::new();
    let Some(servers) = python_server(&marks) else {
        return;
    };
    let replay = Script::new()
        .call("x1", "mcp__py__crash", json!({}))
        .text("Crashed.")
        .call("e1", "mcp__py__echo", json!({"text": "again"}))
        .text("Done.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let session = allowed_session(&mut wire, servers).await;
    let updates = prompt(&mut wire, &session).await;
    assert!(
        tool_text(&updates, "x1").contains("MCP server `py`"),
        "{updates:?}"
    );
    // The new process listed its tools for kin.
    marks.wait_for("listed 1").await;
    marks.wait_for("listed 1").await;
    let updates = prompt(&mut wire, &session).await;
    assert!(
        tool_text(&updates, "e1").contains("echo: again"),
        "{updates:?}"
    );
}

#[tokio::test]
async fn progress_of_a_call_shows_on_its_tool_call_and_the_last_report_is_not_lost() {
    let marks = Marks::new();
    let Some(servers) = python_server(&marks) else {
        return;
    };
    let replay = Script::new()
        .call("p1", "mcp__py__count", json!({"n": 5}))
        .text("Counted.")
        .dir();
    let mut wire = start(replay.path());
    wire.initialize().await;
    let session = allowed_session(&mut wire, servers).await;
    wire.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "Go."}]}}),
    )
    .await;
    // Five reports come at once: one shows at once, the latest when its gap has passed, while
    // the call still runs (the throttle's spacing is unit-tested in src/mcp/progress.rs).
    let mut shown = Vec::new();
    while !shown.iter().any(|text: &String| text.contains("5/5")) {
        let message = wire.read().await.expect("kin shows the progress");
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "tool_call" {
            // The editor sees the server tool, not the model's name for it.
            assert_eq!(update["title"], "py: count", "{update}");
        }
        if update["sessionUpdate"] == "tool_call_update"
            && update["toolCallId"] == "p1"
            && update["status"] == "in_progress"
        {
            if let Some(text) = update["content"][0]["content"]["text"].as_str() {
                shown.push(text.to_owned());
            }
        }
    }
    assert_eq!(
        shown.last().map(String::as_str),
        Some("Progress: 5/5 (step 5)")
    );
    let mut sorted = shown.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, shown, "in order, none twice");
    marks.go().await;
    let (updates, answer) = wire.answer(&json!(3)).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        tool_text(&updates, "p1").contains("counted 5"),
        "{updates:?}"
    );
}

#[tokio::test]
async fn a_definitions_server_grant_is_exact_on_the_server_name() {
    let Some((node, script)) = filesystem_server() else {
        return;
    };
    // Servers `git` and `git__admin`: `mcp__git__admin__...` starts as a tool of `git` would.
    let parent = Script::new()
        .call(
            "s1",
            "subagent",
            json!({"description": "List", "prompt": "List the files.", "agent": "gitter"}),
        )
        .text("Done.")
        .dir();
    let child = Script::new()
        .calls(&[
            ("own", "mcp__git__list_directory", json!({"path": "."})),
            (
                "other",
                "mcp__git__admin__list_directory",
                json!({"path": "."}),
            ),
        ])
        .text("Child listed.")
        .dir();
    std::fs::copy(
        child.path().join("session.jsonl"),
        parent.path().join("session.1.jsonl"),
    )
    .unwrap();
    let mut wire = Wire::start(Some(parent.path()));
    let agents = wire.cwd.path().join(".kin/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("gitter.md"),
        "---\ndescription: Uses git only\ntools: [mcp__git]\n---\nList.\n",
    )
    .unwrap();
    std::fs::write(wire.cwd.path().join("granted-listing.txt"), "hi").unwrap();
    wire.initialize().await;
    let root = wire.cwd();
    let entry =
        |name: &str| json!({"name": name, "command": node, "args": [script, root], "env": []});
    let servers = json!([entry("git"), entry("git__admin")]);
    let session = allowed_session(&mut wire, servers).await;
    prompt(&mut wire, &session).await;
    let logs: Vec<Value> = common::session_files(wire.home.path())
        .iter()
        .flat_map(|path| common::read_lines(path))
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .filter(|event| event["type"] == "tool/result")
        .collect();
    let result = |id: &str| {
        let found = logs
            .iter()
            .find(|e| e["data"]["message"]["content"][0]["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {logs:?}"));
        found["data"]["message"]["content"][0].clone()
    };
    let own = result("own");
    assert_eq!(own["isError"], false, "{own}");
    assert!(own.to_string().contains("granted-listing.txt"), "{own}");
    let other = result("other");
    assert_eq!(
        other["isError"], true,
        "the other server's tool is not granted: {other}"
    );
}

//! Against the Python SDK's stdio server (tests/mcp/stdio_server.py): MCP cancellation, a
//! changed tool list, a restart after a crash, and progress.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{allowed_session, python_with_mcp, start, tool_text, DEADLINE};
use crate::common::{self, Script};

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
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let go = dir.path().join("go.fifo");
        nix::unistd::mkfifo(&go, nix::sys::stat::Mode::S_IRWXU).unwrap();
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
    wire.send_prompt(3, &session, "Go.").await;
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
    wire.turn(3, &session, "Go.").await;
    // The relisting the server's notification caused (the first listing was at start).
    marks.wait_for("listed 2").await;
    let updates = wire.turn(3, &session, "Go.").await;
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
    let updates = wire.turn(3, &session, "Go.").await;
    assert!(
        tool_text(&updates, "x1").contains("MCP server `py`"),
        "{updates:?}"
    );
    // The new process listed its tools for kin.
    marks.wait_for("listed 1").await;
    marks.wait_for("listed 1").await;
    let updates = wire.turn(3, &session, "Go.").await;
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
    wire.send_prompt(3, &session, "Go.").await;
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

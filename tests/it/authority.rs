//! Authority never widens down the delegation tree, checked through the real binary: a parent's
//! switch to `read-only` reaches its running in-process child at once, and an ACP child's
//! permission requests are answered within the parent's mode whatever its `permission` policy.

use crate::common;

use std::io::{Read, Write};
use std::path::Path;

use common::{Script, Wire};
use serde_json::{json, Value};

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// The result texts the session logs under `home` hold for tool `name`'s calls.
fn results_of(home: &Path, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    for path in common::session_files(home) {
        let events: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let ids: Vec<String> = events
            .iter()
            .filter(|e| e["type"] == "tool/call" && e["data"]["name"] == name)
            .filter_map(|e| e["data"]["callId"].as_str().map(str::to_owned))
            .collect();
        for event in events.iter().filter(|e| e["type"] == "tool/result") {
            let content = &event["data"]["message"]["content"][0];
            if ids.iter().any(|id| content["toolCallId"] == id.as_str()) {
                found.push(content["content"].to_string());
            }
        }
    }
    found
}

#[tokio::test]
async fn a_parents_switch_to_read_only_reaches_its_running_in_process_child() {
    let replay = tempfile::tempdir().unwrap();
    let parent = Script::new()
        .call(
            "delegate",
            "subagent",
            json!({"description": "Write it", "prompt": "Write out.txt."}),
        )
        .text("PARENT_DONE");
    // The child waits (on a FIFO the test holds) until the parent is read-only, then writes.
    let child = Script::new()
        .call(
            "wait",
            "bash",
            json!({"command": "echo ready > ready.fifo && read line < go.fifo"}),
        )
        .call(
            "write",
            "write",
            json!({"path": "out.txt", "content": "written anyway\n"}),
        )
        .text("CHILD_DONE");
    std::fs::copy(
        parent.dir().path().join("session.jsonl"),
        replay.path().join("session.jsonl"),
    )
    .unwrap();
    std::fs::copy(
        child.dir().path().join("session.jsonl"),
        replay.path().join("session.1.jsonl"),
    )
    .unwrap();

    let mut wire = Wire::start(Some(replay.path()));
    let cwd = wire.cwd.path().to_owned();
    mkfifo(&cwd.join("ready.fifo"));
    mkfifo(&cwd.join("go.fifo"));
    let session = wire.open_session().await;
    wire.set_mode(2, &session, "allow").await;
    wire.send_prompt(7, &session, "Delegate.").await;

    // The child's command is running once it has written to ready.fifo.
    let ready = cwd.join("ready.fifo");
    let said = tokio::task::spawn_blocking(move || {
        let mut text = String::new();
        std::fs::File::open(ready)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        text
    })
    .await
    .unwrap();
    assert_eq!(said.trim(), "ready");
    wire.set_mode(3, &session, "read-only").await;
    let go = cwd.join("go.fifo");
    tokio::task::spawn_blocking(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(go)
            .unwrap()
            .write_all(b"go\n")
            .unwrap()
    })
    .await
    .unwrap();

    let (_, answer) = wire.answer(&json!(7)).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        !cwd.join("out.txt").exists(),
        "the child wrote after its parent switched to read-only"
    );
    let results = results_of(wire.home.path(), "write");
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(results[0].contains("read-only"), "{}", results[0]);
}

#[tokio::test]
async fn an_acp_childs_requests_are_answered_within_a_read_only_parents_mode() {
    let child = Script::new()
        .call(
            "write",
            "write",
            json!({"path": "out.txt", "content": "written anyway\n"}),
        )
        .text("CHILD_DONE");
    let child_dir = child.dir();
    let parent = Script::new()
        .call(
            "ask-kin",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Write out.txt."}),
        )
        .text("PARENT_DONE");
    let parent_dir = parent.dir();
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config").join("kin");
    std::fs::create_dir_all(&config).unwrap();
    // `allow` would let the child write; the parent's read-only mode must win.
    std::fs::write(
        config.join("config.toml"),
        format!(
            "[acp_agents.kin]\ncommand = {:?}\nargs = [\"acp\", \"--replay\", {:?}]\npermission = \"allow\"\n",
            common::kin_binary().display().to_string(),
            child_dir.path().display().to_string(),
        ),
    )
    .unwrap();

    let mut wire = Wire::start_in(Some(parent_dir.path()), home);
    let cwd = wire.cwd.path().to_owned();
    let session = wire.open_session().await;
    wire.set_mode(2, &session, "read-only").await;
    wire.send_prompt(7, &session, "Delegate.").await;
    let (_, answer) = wire.answer(&json!(7)).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        !cwd.join("out.txt").exists(),
        "a read-only parent's ACP child wrote a file"
    );
}

//! Asking before each server tool call, "always" answers per server tool, and grants in agent
//! definitions exact on the server name.

use serde_json::{json, Value};

use super::{allowed_session, filesystem_entry, filesystem_server, new_session, start, tool_text};
use crate::common::{self, Script, Wire};

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
    wire.send_prompt(3, &session, "Go.").await;
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
    wire.send_prompt(id, session, "Go.").await;
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
    wire.turn(3, &session, "Go.").await;
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

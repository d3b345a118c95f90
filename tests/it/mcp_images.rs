//! An MCP tool's images through the real binary, against the Python SDK's stdio server
//! (tests/mcp/stdio_server.py, tool `picture`) and the mock model: a model that takes images
//! gets them in a user message after the tool message; one that does not gets a placeholder
//! and the user a notice; the editor sees the image in the tool call; the log names the image
//! by its blob; and after `session/load` the next request carries the same conversation.

use crate::common;

use std::path::PathBuf;

use common::mock_openai::{text_reply, tool_calls_reply, MockServer};
use common::{EventSchemas, Wire};
use serde_json::{json, Value};

/// base64 of the server's `PICTURE`.
const PICTURE: &str = "iVBORw0KGgpraW4tdGVzdC1waWN0dXJl";

/// The Python with what these tests import (see `common::python_with`).
fn python_with_mcp() -> Option<PathBuf> {
    common::python_with("mcp.server.mcpserver")
}

/// A kin on the mock model, its config file holding `config`.
fn live(server: &MockServer, config: &str) -> Wire {
    let home = common::home_with(&format!("mcp_startup_timeout = \"60s\"\n{config}"));
    Wire::on_mock(server, home, "sk-mcpimg-0001")
}

/// The test server as the session's server `py` (its marks go to plain files nobody reads).
fn servers(python: &PathBuf, kin: &Wire) -> Value {
    let script = common::repo().join("tests/mcp/stdio_server.py");
    let marks = kin.home.path().join("marks");
    let go = kin.home.path().join("go");
    let args = json!([script, marks, go]);
    json!([{"name": "py", "command": python, "args": args, "env": []}])
}

fn messages(server: &MockServer, request: usize) -> Vec<Value> {
    server.requests()[request].body["messages"]
        .as_array()
        .unwrap()
        .clone()
}

/// Opens a session in `allow` mode with the test server, prompts once (the model calls
/// `picture`, then answers), and returns the session id and the prompt's updates.
async fn picture_turn(kin: &mut Wire, python: &PathBuf) -> (String, Vec<Value>) {
    let init = json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}});
    kin.request(0, "initialize", init).await;
    let new = json!({"cwd": kin.cwd(), "mcpServers": servers(python, kin)});
    let (_, answer) = kin.request(1, "session/new", new).await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    kin.set_mode(2, &session, "allow").await;
    let updates = kin.turn(3, &session, "Show me.").await;
    (session, updates)
}

fn push_picture_replies(server: &MockServer) {
    server.push(tool_calls_reply(&[("p1", "mcp__py__picture", "{}")]));
    server.push(text_reply(&["A picture."]));
}

fn has_notice(updates: &[Value]) -> bool {
    updates
        .iter()
        .any(|u| u.pointer("/params/update/sessionUpdate") == Some(&json!("notice")))
}

/// The image entries of call `p1`'s final update.
fn shown_images(updates: &[Value]) -> Vec<Value> {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["toolCallId"] == "p1")
        .filter(|u| u["params"]["update"]["status"] == "completed")
        .flat_map(|u| {
            u["params"]["update"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|c| c["content"]["type"] == "image")
        .collect()
}

#[tokio::test]
async fn a_tool_image_reaches_an_image_model_after_the_tool_message_and_again_after_load() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let server = MockServer::start();
    push_picture_replies(&server);
    let mut kin = live(&server, "images = true\n");
    let (session, updates) = picture_turn(&mut kin, &python).await;
    assert!(!has_notice(&updates), "{updates:?}");
    let shown = shown_images(&updates);
    assert_eq!(shown.len(), 1, "{updates:?}");
    assert_eq!(shown[0]["content"]["data"], PICTURE);
    assert_eq!(shown[0]["content"]["mimeType"], "image/png");

    let sent = messages(&server, 1);
    let at = sent.iter().position(|m| m["role"] == "tool").unwrap();
    let text = sent[at]["content"].as_str().unwrap();
    assert!(text.contains("a test picture"), "{text}");
    assert!(text.contains("[image from the tool: image/png"), "{text}");
    let follow = &sent[at + 1];
    assert_eq!(follow["role"], "user", "{sent:?}");
    assert_eq!(
        follow["content"][1],
        json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PICTURE}")}})
    );

    let log_path = kin.home.path().join(format!("sessions/{session}.jsonl"));
    let log = std::fs::read_to_string(&log_path).unwrap();
    EventSchemas::load().check_log(&log).unwrap();
    assert!(
        !log.contains(PICTURE),
        "the image is a blob, not in the log"
    );

    // Loaded again: the editor sees the image, and the model the same conversation.
    kin.request(4, "session/close", json!({"sessionId": session}))
        .await;
    let (replayed, _) = kin.load(5, &session).await;
    assert_eq!(shown_images(&replayed).len(), 1, "{replayed:?}");
    server.push(text_reply(&["Again."]));
    kin.turn(6, &session, "And?").await;
    let after = messages(&server, 2);
    assert_eq!(
        after[..sent.len()],
        sent[..],
        "the loaded session sends the same history"
    );
}

#[tokio::test]
async fn a_tool_image_is_a_placeholder_and_a_notice_for_a_model_without_images() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let server = MockServer::start();
    push_picture_replies(&server);
    let mut kin = live(&server, "");
    let (_, updates) = picture_turn(&mut kin, &python).await;
    assert!(has_notice(&updates), "{updates:?}");
    assert_eq!(shown_images(&updates).len(), 1, "the editor still sees it");
    let sent = messages(&server, 1);
    let at = sent.iter().position(|m| m["role"] == "tool").unwrap();
    let text = sent[at]["content"].as_str().unwrap();
    assert!(text.contains("this model does not take images"), "{text}");
    assert!(!serde_json::to_string(&sent).unwrap().contains(PICTURE));
    assert_ne!(sent.last().unwrap()["role"], "user", "no image message");
}

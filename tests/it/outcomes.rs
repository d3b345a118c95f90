//! Delegation outcomes a model can act on, through the real binary: a step cut at the token
//! limit runs none of its tool calls; a foreground child that fails hands back its headline, a
//! diagnostic and its partial output; a recording in the reference's newer layout replays; a
//! reloaded tree shows each child under the title it had live.

use crate::common;

use common::mock_openai::{
    chunk, done, error_reply, event, text_reply, tool_calls_reply, usage, MockServer, Reply,
};
use common::{Script, Wire};
use serde_json::{json, Value};

/// kin on the mock model `server`, its client retries off (a failure is final at once).
fn kin_on(server: &MockServer) -> Wire {
    let base_url = server.base_url();
    let env = [
        ("KIN_BASE_URL", base_url.as_str()),
        ("KIN_MODEL", "mock-model"),
        ("KIN_API_KEY", "sk-outcomes-test-0001"),
        ("KIN_RETRIES", "0"),
    ];
    Wire::start_with(None, tempfile::tempdir().unwrap(), &env)
}

/// The text of the tool result for `call_id` in a request's messages.
fn tool_result(request: &Value, call_id: &str) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {call_id} in {request}"))
        .to_owned()
}

/// Every event of every session log under `home`.
fn events(home: &std::path::Path) -> Vec<Value> {
    common::session_files(home)
        .into_iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.lines()
                .skip(1)
                .map(|line| serde_json::from_str::<Value>(line).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn a_step_cut_at_the_token_limit_runs_none_of_its_tool_calls() {
    let server = MockServer::start();
    let mut kin = kin_on(&server);
    let session = kin.open_session().await;
    std::fs::write(
        std::path::Path::new(&kin.cwd()).join("notes.txt"),
        "secret plans\n",
    )
    .unwrap();
    // Some text, then a `read` call whose arguments the token limit cut off.
    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
        "function": {"name": "read", "arguments": "{\"path\": \"notes.t"}}]});
    server.push(Reply::Stream(vec![
        event(&chunk(
            json!({"role": "assistant", "content": "Reading it"}),
            None,
        )),
        event(&chunk(call, None)),
        event(&chunk(json!({}), Some("length"))),
        event(&usage(10, 4096)),
        done(),
    ]));
    let (_, answer) = kin.prompt(2, &session, "Read notes.txt").await;
    assert_eq!(answer["result"]["stopReason"], "max_tokens", "{answer}");
    assert_eq!(
        server.requests().len(),
        1,
        "no model call after the cut step"
    );
    let logged = events(kin.home.path());
    assert!(
        !logged
            .iter()
            .any(|e| e["type"] == "tool/call" || e["type"] == "tool/result"),
        "the call was not run: {logged:?}"
    );
    let message = logged
        .iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(
        message["data"]["message"]["content"],
        json!([{"type": "text", "text": "Reading it"}])
    );
    let dropped = &message["data"]["droppedToolCalls"];
    assert_eq!(dropped["calls"][0]["id"], "call_1", "{message}");
    assert!(dropped["reason"].as_str().unwrap().contains("token limit"));
    let end = logged.iter().find(|e| e["type"] == "turn/end").unwrap();
    assert_eq!(end["data"]["reason"]["kind"], "max-tokens");
}

/// The parent delegates once in the foreground, then answers; `child` is what the child's
/// model call gets. Returns the tool result the parent's model read and every request.
async fn failing_child(child: Reply) -> (String, Vec<common::mock_openai::Request>) {
    let server = MockServer::start();
    let mut kin = kin_on(&server);
    let session = kin.open_session().await;
    let call = r#"{"description":"Doomed child","prompt":"Answer the question."}"#;
    server.push(tool_calls_reply(&[("call_1", "subagent", call)]));
    server.push(child);
    server.push(text_reply(&["The child failed."]));
    let (_, answer) = kin.prompt(2, &session, "Delegate it").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "the parent, the child, the parent");
    (tool_result(&requests[2].body, "call_1"), requests)
}

#[tokio::test]
async fn a_child_that_loses_its_model_connection_hands_back_the_cause_and_its_partial_output() {
    // The child streams half an answer, then the connection drops (not retried: output began).
    let parts = vec![
        event(&chunk(json!({"role": "assistant", "content": ""}), None)),
        event(&chunk(json!({"content": "The answer starts with"}), None)),
    ];
    let (told, requests) = failing_child(Reply::Cut(parts)).await;
    let (headline, rest) = told.split_once('\n').unwrap();
    assert_eq!(headline, "Error: subagent run failed");
    assert!(
        rest.starts_with("Diagnostic: model stream was cut after output began"),
        "{told}"
    );
    assert!(
        told.ends_with("\nPartial output before the run ended:\nThe answer starts with"),
        "{told}"
    );
    // The child was told it works for a parent; the parent was not.
    let system = |at: usize| requests[at].body["messages"][0]["content"].to_string();
    assert!(
        system(1).contains("You are a delegated agent"),
        "{}",
        system(1)
    );
    assert!(!system(0).contains("delegated agent"));
}

#[tokio::test]
async fn a_child_whose_endpoint_fails_names_the_status_and_message() {
    let (told, _) = failing_child(error_reply(500, "upstream overloaded")).await;
    assert_eq!(
        told,
        "Error: subagent run failed\nDiagnostic: model endpoint answered HTTP 500: upstream \
         overloaded"
    );
}

/// A recording in the reference's newer layout: no `seq`/`time` on any event line.
const NEWER_LAYOUT: &str = concat!(
    r#"{"type":"session","version":0,"id":"11111111-1111-4111-8111-111111111111","createdAt":0,"cwd":"/","delegationDepth":0}"#,
    "\n",
    r#"{"type":"turn/start","data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
    "\n",
    r#"{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}"#,
    "\n",
    r#"{"type":"text-chunks","data":{"turn":1,"step":1,"index":0,"dt":[0,0,0],"texts":["PO","N","G"]}}"#,
    "\n",
    r#"{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"PONG"}}}}"#,
    "\n",
    r#"{"type":"assistant/chunk","data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}"#,
    "\n",
);

#[tokio::test]
async fn a_recording_in_the_newer_layout_replays() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("session.jsonl"), NEWER_LAYOUT).unwrap();
    let mut kin = Wire::start(Some(dir.path()));
    let session = kin.open_session().await;
    let updates = kin.turn(2, &session, "Ping").await;
    assert_eq!(common::answer_text(&updates), "PONG");
}

#[tokio::test]
async fn a_reloaded_tree_shows_each_child_under_its_live_title() {
    let parent = Script::new()
        .call(
            "ask",
            "subagent",
            json!({"description": "Count the files", "prompt": "How many files are there?"}),
        )
        .text("PARENT_DONE");
    let dir = parent.dir();
    let child = Script::new().text("Three.").dir();
    std::fs::copy(
        child.path().join("session.jsonl"),
        dir.path().join("session.1.jsonl"),
    )
    .unwrap();
    let mut kin = Wire::start(Some(dir.path()));
    let capabilities = json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}});
    kin.request(0, "initialize", capabilities).await;
    let session = kin.new_session().await;
    let titles = |messages: &[Value]| -> Vec<String> {
        messages
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "subagent_update")
            .filter_map(|m| m["params"]["update"]["title"].as_str().map(str::to_owned))
            .collect()
    };
    let live = kin.turn(2, &session, "go").await;
    assert_eq!(titles(&live), ["Count the files"]);
    let (_, closed) = kin
        .request(3, "session/close", json!({"sessionId": session}))
        .await;
    assert_eq!(closed["result"], json!({}), "{closed}");
    let (replayed, loaded) = kin.load(4, &session).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(titles(&replayed), ["Count the files"]);
}

#[tokio::test]
async fn an_editor_with_subagents_sees_why_a_child_failed() {
    let server = MockServer::start();
    let mut kin = kin_on(&server);
    let capabilities = json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}});
    kin.request(0, "initialize", capabilities).await;
    let session = kin.new_session().await;
    let call = r#"{"description":"Doomed child","prompt":"Answer the question."}"#;
    server.push(tool_calls_reply(&[("call_1", "subagent", call)]));
    server.push(error_reply(503, "no capacity"));
    server.push(text_reply(&["The child failed."]));
    let updates = kin.turn(2, &session, "go").await;
    let idle = updates
        .iter()
        .map(|m| &m["params"]["update"])
        .find(|u| u["sessionUpdate"] == "subagent_update" && u["state"]["state"] == "idle")
        .expect("the child goes idle");
    let state = idle["state"].to_string();
    assert!(state.contains("\"error\""), "{state}");
    assert!(
        state.contains("model endpoint answered HTTP 503: no capacity"),
        "{state}"
    );
}

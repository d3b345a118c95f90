//! An MCP server's questions reach the editor's user: a real stdio server on the official
//! Python SDK (tests/mcp/ask_server.py) asks during its tool calls; the test plays the editor.
//! One that advertises elicitation gets ACP `elicitation/create` (scoped to the session and the
//! call) and its answer reaches the server; one that does not gets a yes/no as a permission
//! question, and a form it cannot show is declined.

use crate::common;

use std::time::Duration;

use common::mcp::tool_text;
use common::{Script, Wire};
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(120);

/// The asking test server as `py`, with `env`.
fn servers_with(env: Value) -> Option<Value> {
    let python = common::python_with("mcp.server.mcpserver, pydantic")?;
    let script = common::repo().join("tests/mcp/ask_server.py");
    Some(json!([{"name": "py", "command": python, "args": [script], "env": env}]))
}

fn servers() -> Option<Value> {
    servers_with(json!([]))
}

/// Starts kin, initializes with `capabilities`, opens a session in mode `allow`.
async fn session(replay: &std::path::Path, capabilities: Value, servers: Value) -> (Wire, String) {
    let mut wire = Wire::start(Some(replay));
    wire.initialize_with(capabilities).await;
    let cwd = wire.cwd();
    let (_, answer) = wire
        .request(1, "session/new", json!({"cwd": cwd, "mcpServers": servers}))
        .await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    wire.set_mode(2, &session, "allow").await;
    (wire, session)
}

/// Prompts; each request kin sends the editor is checked against ACP's schema and goes to
/// `answer` (its result); returns the updates and the requests.
async fn prompt(
    wire: &mut Wire,
    session: &str,
    mut answer: impl FnMut(&Value) -> Value,
) -> (Vec<Value>, Vec<Value>) {
    wire.send_prompt(3, session, "Go.").await;
    let (mut updates, mut asked) = (Vec::new(), Vec::new());
    let mut schema = common::AcpSchema::load();
    let methods = std::collections::HashMap::new();
    loop {
        let message = tokio::time::timeout(DEADLINE, wire.read())
            .await
            .expect("kin answers the prompt")
            .expect("kin is running");
        if message.get("method").is_some() && message.get("id").is_some() {
            // What kin asks is what ACP's schema says it may ask.
            schema.check_agent_message(&message, &methods).unwrap();
            let result = answer(&message);
            wire.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": result}))
                .await;
            asked.push(message);
        } else if message["id"] == 3 {
            assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
            return (updates, asked);
        } else {
            updates.push(message);
        }
    }
}

#[tokio::test]
async fn an_editor_with_elicitation_answers_the_servers_form() {
    let Some(servers) = servers() else {
        return;
    };
    let replay = Script::new()
        .calls(&[("g1", "mcp__py__greet", json!({}))])
        .text("Done.")
        .dir();
    let capabilities = json!({"elicitation": {"form": {}, "url": {}}});
    let (mut wire, session) = session(replay.path(), capabilities, servers).await;
    let (updates, asked) = prompt(&mut wire, &session, |request| {
        assert_eq!(request["method"], "elicitation/create", "{request}");
        json!({"action": "accept", "content": {"name": "Ada"}})
    })
    .await;
    assert_eq!(asked.len(), 1, "{asked:?} {updates:?}");
    let params = &asked[0]["params"];
    assert_eq!(params["mode"], "form");
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["toolCallId"], "g1");
    assert_eq!(
        params["requestedSchema"]["properties"]["name"]["type"],
        "string"
    );
    let message = params["message"].as_str().unwrap();
    assert_eq!(message, "MCP server `py` asks: What is your name?");
    assert!(
        tool_text(&updates, "g1").contains("hello Ada"),
        "{updates:?}"
    );
}

#[tokio::test]
async fn without_elicitation_a_yes_no_is_a_permission_question_and_a_form_is_declined() {
    let Some(servers) = servers() else {
        return;
    };
    let replay = Script::new()
        .calls(&[("p1", "mcp__py__proceed", json!({}))])
        .calls(&[("g1", "mcp__py__greet", json!({}))])
        .text("Done.")
        .dir();
    let (mut wire, session) = session(replay.path(), json!({}), servers).await;
    let (updates, asked) = prompt(&mut wire, &session, |request| {
        assert_eq!(request["method"], "session/request_permission", "{request}");
        let options = request["params"]["options"].as_array().unwrap();
        let yes = options.iter().find(|o| o["name"] == "Yes").unwrap();
        json!({"outcome": {"outcome": "selected", "optionId": yes["optionId"]}})
    })
    .await;
    assert_eq!(asked.len(), 1, "{asked:?} {updates:?}");
    let call = &asked[0]["params"]["toolCall"];
    assert_eq!(call["toolCallId"], "p1");
    assert_eq!(call["title"], "MCP server `py` asks: Go on?");
    assert!(
        tool_text(&updates, "p1").contains("go: True"),
        "{updates:?}"
    );
    // A text field cannot be a permission question: declined, and the server says so.
    assert!(
        tool_text(&updates, "g1").contains("no name (decline)"),
        "{updates:?}"
    );
}

#[tokio::test]
async fn a_server_on_an_older_revision_asks_mid_call_and_the_editor_answers() {
    let legacy = json!([{"name": "KIN_TEST_MCP_LEGACY", "value": "1"}]);
    let Some(servers) = servers_with(legacy) else {
        return;
    };
    let replay = Script::new()
        .calls(&[("g1", "mcp__py__greet_now", json!({}))])
        .text("Done.")
        .dir();
    let capabilities = json!({"elicitation": {"form": {}}});
    let (mut wire, session) = session(replay.path(), capabilities, servers).await;
    let (updates, asked) = prompt(&mut wire, &session, |request| {
        assert_eq!(request["method"], "elicitation/create", "{request}");
        json!({"action": "accept", "content": {"name": "Bo"}})
    })
    .await;
    assert_eq!(asked.len(), 1, "{asked:?} {updates:?}");
    assert_eq!(asked[0]["params"]["toolCallId"], "g1");
    assert!(
        tool_text(&updates, "g1").contains("hello Bo, mid-call"),
        "{updates:?}"
    );
}

#[tokio::test]
async fn a_url_question_the_server_completes_is_completed_in_the_editor() {
    let legacy = json!([{"name": "KIN_TEST_MCP_LEGACY", "value": "1"}]);
    let Some(servers) = servers_with(legacy) else {
        return;
    };
    let replay = Script::new()
        .calls(&[("v1", "mcp__py__visit", json!({}))])
        .text("Done.")
        .dir();
    let capabilities = json!({"elicitation": {"url": {}}});
    let (mut wire, session) = session(replay.path(), capabilities, servers).await;
    let (updates, asked) = prompt(&mut wire, &session, |request| {
        assert_eq!(request["method"], "elicitation/create", "{request}");
        json!({"action": "accept"})
    })
    .await;
    assert_eq!(asked.len(), 1, "{asked:?} {updates:?}");
    let params = &asked[0]["params"];
    assert_eq!(params["mode"], "url");
    assert_eq!(params["url"], "https://example.com/consent");
    assert_eq!(params["elicitationId"], "visit-7");
    // The server's completion reaches the editor as ACP's, before the call's result.
    let completed = updates
        .iter()
        .position(|message| message["method"] == "elicitation/complete")
        .unwrap_or_else(|| panic!("no elicitation/complete: {updates:?}"));
    assert_eq!(updates[completed]["params"]["elicitationId"], "visit-7");
    let mut schema = common::AcpSchema::load();
    let methods = std::collections::HashMap::new();
    schema
        .check_agent_message(&updates[completed], &methods)
        .unwrap();
    assert!(
        tool_text(&updates, "v1").contains("visit: accept"),
        "{updates:?}"
    );
}

#[test]
fn kin_run_asks_a_choice_of_values_on_the_terminal() {
    let Some(python) = common::python_with("mcp.server.mcpserver, pydantic") else {
        return;
    };
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = home.path().join("config/kin");
    std::fs::create_dir_all(&config).unwrap();
    let script = common::repo().join("tests/mcp/ask_server.py");
    std::fs::write(
        config.join("config.toml"),
        format!("[mcp_servers.py]\ncommand = {python:?}\nargs = [{script:?}]\n"),
    )
    .unwrap();
    let replay = Script::new()
        .calls(&[("p1", "mcp__py__pick", json!({}))])
        .text("Done.")
        .dir();
    let mut kin = std::process::Command::new(common::kin_binary());
    for name in common::MODEL_ENV {
        kin.env_remove(name);
    }
    kin.args(["run", "--mode", "allow", "--replay"])
        .arg(replay.path())
        .arg("Go.")
        .env("KIN_HOME", home.path().join("data"))
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .current_dir(cwd.path());
    let Some(mut run) = common::pty::Pty::start(&kin) else {
        return;
    };
    let at = run.wait_for("MCP server `py` asks: Which colour?", 0);
    let at = run.wait_for("[3] blue", at);
    run.wait_for("choose [1-3] (empty: none) ", at);
    run.type_line("2");
    let (code, transcript) = run.finish();
    assert_eq!(code, 0, "{transcript}");
    // The server got the colour picked: its tool result says so, in the session's log.
    let sessions = home.path().join("data/sessions");
    let logs: Vec<String> = std::fs::read_dir(&sessions)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(
        logs.iter().any(|log| log.contains("colour: green")),
        "{transcript}\n{logs:?}"
    );
}

/// A server's message reaches the editor escaped and cut; a URL question whose address is not
/// `https:` is declined without asking; a call asks at most 8 questions.
#[tokio::test]
async fn server_text_is_escaped_and_cut_a_file_url_is_declined_and_questions_are_capped() {
    let legacy = json!([{"name": "KIN_TEST_MCP_LEGACY", "value": "1"}]);
    let Some(servers) = servers_with(legacy) else {
        return;
    };
    let replay = Script::new()
        .calls(&[("l1", "mcp__py__greet_loud", json!({}))])
        .calls(&[("f1", "mcp__py__visit_file", json!({}))])
        .calls(&[("m1", "mcp__py__ask_many", json!({}))])
        .text("Done.")
        .dir();
    let capabilities = json!({"elicitation": {"form": {}, "url": {}}});
    let (mut wire, session) = session(replay.path(), capabilities, servers).await;
    let (updates, asked) = prompt(&mut wire, &session, |request| {
        assert_eq!(request["method"], "elicitation/create", "{request}");
        match request["params"]["mode"].as_str() {
            Some("form")
                if request["params"]["requestedSchema"]["properties"]["go"].is_object() =>
            {
                json!({"action": "accept", "content": {"go": true}})
            }
            _ => json!({"action": "decline"}),
        }
    })
    .await;
    let loud = asked[0]["params"]["message"].as_str().unwrap();
    assert!(loud.contains("Name? \\u{1b}]0;owned\\u{7}"), "{loud}");
    assert!(!loud.contains('\u{1b}'), "{loud}");
    assert!(
        loud.contains("bytes cut]") && loud.len() < 2200,
        "{}",
        loud.len()
    );
    assert!(
        asked.iter().all(|a| a["params"]["mode"] != "url"),
        "the file: address was never shown: {asked:?}"
    );
    assert!(tool_text(&updates, "f1").contains("file visit: decline"));
    assert_eq!(asked.len(), 1 + 8, "the loud question and 8 of the 9");
    let many = tool_text(&updates, "m1");
    assert!(
        many.contains(&format!("{},decline", ["accept"; 8].join(","))),
        "{many}"
    );
}

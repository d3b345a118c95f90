//! An MCP server cannot grow kin without bound or hold its turn: against a real stdio server
//! on the official Python SDK (tests/mcp/paging_server.py) that pages its tools wrongly, lists
//! more tools than the model is offered, never answers a call, or answers one with 17 MiB;
//! and an HTTP server (tests/mcp/http_server.py) that refuses kin's credentials, or answers
//! `server/discover` with an empty result.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::mcp::tool_text;
use common::mock_openai::{text_reply, MockServer};
use common::{Script, Wire};
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(120);

fn python_with_mcp() -> Option<PathBuf> {
    common::python_with("mcp.server.lowlevel, mcp.server.mcpserver, uvicorn")
}

/// A config file naming paging servers (`name`, mode and arguments, extra TOML lines).
fn config(python: &std::path::Path, servers: &[(&str, &[&str], &str)], top: &str) -> String {
    let script = common::repo().join("tests/mcp/paging_server.py");
    let mut text = format!("mcp_startup_timeout = \"60s\"\n{top}");
    for (name, args, extra) in servers {
        let mut all = vec![script.display().to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        text.push_str(&format!(
            "[mcp_servers.{name}]\ncommand = {:?}\nargs = {all:?}\n{extra}\n",
            python.display().to_string()
        ));
    }
    text
}

/// Prompts once in mode `allow`; the updates before the answer.
async fn prompt(wire: &mut Wire) -> Vec<Value> {
    let session = wire.open_session().await;
    wire.set_mode(2, &session, "allow").await;
    let asked = wire.prompt(3, &session, "Go.");
    let (updates, answer) = tokio::time::timeout(DEADLINE, asked)
        .await
        .expect("the prompt never ended");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    updates
}

fn all_text(updates: &[Value]) -> String {
    updates.iter().map(Value::to_string).collect()
}

#[tokio::test]
async fn a_tool_listing_that_repeats_its_cursor_or_never_ends_stops_with_a_notice() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let servers: &[(&str, &[&str], &str)] = &[
        ("rep", &["repeat"], ""),
        ("end", &["endless"], ""),
        ("fine", &["many", "3"], ""),
    ];
    let home = common::home_with(&config(&python, servers, ""));
    let replay = Script::new()
        .call("e1", "mcp__fine__echo", json!({"text": "still here"}))
        .text("Done.")
        .dir();
    let mut wire = Wire::start_in(Some(replay.path()), home);
    let updates = prompt(&mut wire).await;
    let all = all_text(&updates);
    assert!(
        all.contains("MCP server `rep` is not available: its tools/list sent the cursor \\\"again\\\" a second time"),
        "{all}"
    );
    assert!(
        all.contains("MCP server `end` is not available: its tool list runs over 100 pages"),
        "{all}"
    );
    assert!(
        tool_text(&updates, "e1").contains("echo: still here"),
        "{all}"
    );
}

#[tokio::test]
async fn the_model_is_offered_at_most_mcp_max_tools_with_a_notice_naming_the_rest() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let servers: &[(&str, &[&str], &str)] = &[("many", &["many", "150"], "")];
    let home = common::home_with(&config(&python, servers, "mcp_max_tools = 120\n"));
    let model = MockServer::start();
    model.push(text_reply(&["Done."]));
    let url = model.base_url();
    let env = [
        ("KIN_BASE_URL", url.as_str()),
        ("KIN_API_KEY", "sk-test"),
        ("KIN_MODEL", "mock-model"),
    ];
    let mut wire = Wire::start_with(None, home, &env);
    let updates = prompt(&mut wire).await;
    let all = all_text(&updates);
    // 150 numbered tools and echo, slow, big: the last 33 are left out.
    assert!(
        all.contains("at most 120 MCP tools (`mcp_max_tools` in the config file); left out: `many`: 33 (t117, t118, t119, t120, t121, ...)"),
        "{all}"
    );
    let request = model.request(0).unwrap();
    let offered = request.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| {
            let name = tool["function"]["name"].as_str().unwrap_or_default();
            name.starts_with("mcp__")
        })
        .count();
    assert_eq!(offered, 120);
}

#[tokio::test]
async fn a_call_past_its_time_limit_or_with_an_oversized_answer_fails_clearly() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let servers: &[(&str, &[&str], &str)] = &[("odd", &["many", "1"], "call_timeout = \"2s\"\n")];
    let home = common::home_with(&config(&python, servers, ""));
    let replay = Script::new()
        .call("s1", "mcp__odd__slow", json!({}))
        .call("b1", "mcp__odd__big", json!({}))
        .call("e1", "mcp__odd__echo", json!({"text": "after"}))
        .text("Done.")
        .dir();
    let mut wire = Wire::start_in(Some(replay.path()), home);
    let updates = prompt(&mut wire).await;
    let slow = tool_text(&updates, "s1");
    assert!(slow.contains("did not answer within 2 s"), "{slow}");
    let big = tool_text(&updates, "b1");
    assert!(
        big.contains("over kin's limit of 16 MiB for one message"),
        "{big}"
    );
    assert!(tool_text(&updates, "e1").contains("echo: after"));
}

#[tokio::test]
async fn an_http_server_refusing_kins_credentials_is_one_line_and_not_retried() {
    let Some(python) = python_with_mcp() else {
        return;
    };
    let (mut server, mut lines, port) = common::mcp::http_server(&python).await;
    let home = common::home_with(&format!(
        "mcp_startup_timeout = \"60s\"\n[mcp_servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
         headers = {{ X-Kin-Test = \"wrong\" }}\n"
    ));
    let replay = Script::new().text("Done.").dir();
    let mut wire = Wire::start_in(Some(replay.path()), home);
    let updates = prompt(&mut wire).await;
    let notices: Vec<String> = updates
        .iter()
        .map(Value::to_string)
        .filter(|u| u.contains("MCP server `web`"))
        .collect();
    assert_eq!(notices.len(), 1, "{updates:?}");
    assert!(
        notices[0].contains("MCP server `web` is not available: the server needs authentication (HTTP 401 Unauthorized); run `kin mcp login web`, or check the `headers` of [mcp_servers.web] in kin's config file; kin will not retry"),
        "{}",
        notices[0]
    );
    assert!(!notices[0].contains("Error"), "{}", notices[0]);
    // Not retried: the server saw one refused request (each prints REFUSED).
    server.start_kill().unwrap();
    let mut refused = 0;
    while let Ok(Some(line)) = lines.next_line().await {
        refused += usize::from(line == "REFUSED");
    }
    assert_eq!(refused, 1);
}

#[tokio::test]
async fn an_http_server_answering_discover_with_an_empty_result_gets_initialize() {
    use tokio::io::AsyncBufReadExt;
    let Some(python) = python_with_mcp() else {
        return;
    };
    let mut server = tokio::process::Command::new(python)
        .arg(common::repo().join("tests/mcp/http_server.py"))
        .args(["X-Kin-Test", "token-123", "empty-discover"])
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
    let home = common::home_with(&format!(
        "mcp_startup_timeout = \"60s\"\n[mcp_servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
         headers = {{ X-Kin-Test = \"token-123\" }}\n"
    ));
    let replay = Script::new()
        .calls(&[("e1", "mcp__web__echo", json!({"text": "hi"}))])
        .text("Done.")
        .dir();
    let mut wire = Wire::start_in(Some(replay.path()), home);
    let updates = prompt(&mut wire).await;
    assert!(
        tool_text(&updates, "e1").contains("echo: hi"),
        "{updates:?}"
    );
    server.start_kill().unwrap();
    let mut discovered = 0;
    while let Ok(Some(line)) = lines.next_line().await {
        discovered += usize::from(line == "DISCOVER");
    }
    assert_eq!(discovered, 1);
}

/// A server's messages kin cannot decode (tests/mcp/raw_server.py): an answer nested 200 deep
/// fails its call saying why; a line that is not JSON fails the call in flight; a request
/// nested 200 deep is answered -32700 (the server reports the code it got); and the server
/// keeps serving.
#[tokio::test]
async fn undecodable_messages_fail_their_calls_and_a_request_is_answered_32700() {
    let script = common::repo().join("tests/mcp/raw_server.py");
    let config = format!(
        "mcp_startup_timeout = \"60s\"\n[mcp_servers.raw]\ncommand = \"python3\"\nargs = [{:?}]\ncall_timeout = \"60s\"\n",
        script.display().to_string()
    );
    let home = common::home_with(&config);
    let replay = Script::new()
        .call("d1", "mcp__raw__deep", json!({}))
        .call("g1", "mcp__raw__garbled", json!({}))
        .call("a1", "mcp__raw__ask", json!({}))
        .text("Done.")
        .dir();
    let mut wire = Wire::start_in(Some(replay.path()), home);
    let updates = prompt(&mut wire).await;
    let deep = tool_text(&updates, "d1");
    assert!(
        deep.contains("kin cannot decode the server's answer"),
        "{deep}"
    );
    let garbled = tool_text(&updates, "g1");
    assert!(
        garbled.contains("sent a message kin cannot decode"),
        "{garbled}"
    );
    assert!(tool_text(&updates, "a1").contains("answered: -32700"));
}

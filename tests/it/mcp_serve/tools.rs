//! The five tools and their schema files, a task in the foreground and in the background,
//! streamable HTTP, the session list an editor sees, and the modes a call may ask for.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{header, session_id, World, DEADLINE};
use crate::common::mock_openai::{text_reply, tool_calls_reply};
use crate::common::{self, Wire};

fn schema_file(name: &str) -> PathBuf {
    common::repo().join(format!("protocol/schemas/tools/{name}.json"))
}

/// The schema file a listed tool must match: its input schema plus the header keys.
fn expected_file(tool: &Value) -> Value {
    let name = tool["name"].as_str().unwrap();
    let mut file = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("urn:kin:mcp-server:tool:{name}"),
        "title": name,
        "description": tool["description"],
    });
    for (key, value) in tool["inputSchema"].as_object().unwrap() {
        file[key] = value.clone();
    }
    file
}

#[tokio::test]
async fn the_listed_tools_match_their_schema_files() {
    let Some(world) = World::new() else { return };
    let found = world.client(&["tools"]).await;
    let tools = found[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["kin", "kin_reply", "kin_output", "kin_cancel", "kin_list"]
    );
    let refresh = std::env::var("KIN_SCHEMAS").is_ok_and(|v| v == "refresh");
    for tool in tools {
        let path = schema_file(tool["name"].as_str().unwrap());
        let expected = expected_file(tool);
        if refresh {
            let text = serde_json::to_string_pretty(&expected).unwrap() + "\n";
            std::fs::write(&path, text).unwrap();
        }
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(file, expected, "{} is out of date", path.display());
        jsonschema::validator_for(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let kin: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_file("kin")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&kin).unwrap();
    assert!(validator.is_valid(&json!({"prompt": "x", "mode": "allow", "background": true})));
    assert!(!validator.is_valid(&json!({"prompt": "x", "mode": "wide"})));
    assert!(!validator.is_valid(&json!({"mode": "allow"})));
}

#[tokio::test]
async fn a_foreground_task_answers_with_progress_in_a_top_level_session_marked_mcp() {
    let Some(world) = World::new() else { return };
    std::fs::write(world.cwd.path().join("notes.txt"), "the word is heron\n").unwrap();
    world.model.push(tool_calls_reply(&[(
        "c1",
        "read",
        r#"{"path":"notes.txt"}"#,
    )]));
    world.model.push(text_reply(&["The word ", "is heron."]));
    let result = world
        .call("kin", r#"{"prompt": "what is the word?"}"#)
        .await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["state"], "completed", "{result}");
    assert_eq!(result["structured"]["answer"], "The word is heron.");
    assert!(result["text"]
        .as_str()
        .unwrap()
        .contains("The word is heron."));
    let progress: Vec<&str> = result["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        progress.iter().any(|m| m.contains("tool read")),
        "no progress named the tool call: {progress:?}"
    );
    // An ordinary top-level session, marked as started over MCP, in read-only mode.
    let id = session_id(&result);
    let log = world.log(&id);
    let header = header(&log);
    assert_eq!(header["startedOver"], "mcp");
    assert!(header.get("parentSession").is_none());
    assert!(log.contains("read-only"), "{log}");
    // The read really ran: the model saw the file's text.
    let second = &world.model.requests()[1].body;
    assert!(second.to_string().contains("the word is heron"), "{second}");
    // `kin run --session` continues it like any other session.
    world.model.push(text_reply(&["still heron"]));
    let said = world.kin(&["run", "--session", &id, "and now?"]).await;
    assert_eq!(said, "still heron");
}

#[tokio::test]
async fn a_background_task_is_collected_by_kin_output_and_listed() {
    let Some(world) = World::new() else { return };
    world
        .model
        .push(text_reply(&["done in ", "the background"]));
    let found = world.client(&["background", "work quietly"]).await;
    let started = &found[0];
    assert_eq!(started["isError"], false, "{started}");
    assert_eq!(started["structured"]["state"], "running");
    let id = started["structured"]["sessionId"].as_str().unwrap();
    let output = &found[1];
    assert_eq!(output["structured"]["state"], "completed", "{output}");
    assert_eq!(output["structured"]["answer"], "done in the background");
    let listed = &found[2]["structured"]["sessions"];
    assert_eq!(listed[0]["sessionId"], id, "{listed}");
    assert_eq!(listed[0]["state"], "completed");
    assert!(listed[0]["usage"]["contextTokens"].is_u64(), "{listed}");
    assert_eq!(listed[0]["children"], json!([]));
}

#[tokio::test]
async fn without_elicitation_an_ask_is_refused_naming_mode() {
    let Some(world) = World::new() else { return };
    world.model.push(tool_calls_reply(&[(
        "c1",
        "bash",
        r#"{"command":"touch made.txt"}"#,
    )]));
    world.model.push(text_reply(&["I could not run it."]));
    let result = world
        .call("kin", r#"{"prompt": "make a file", "mode": "ask"}"#)
        .await;
    assert_eq!(result["structured"]["answer"], "I could not run it.");
    assert!(!world.cwd.path().join("made.txt").exists());
    let told = world.model.requests()[1].body.to_string();
    assert!(told.contains("did not declare elicitation"), "{told}");
    assert!(told.contains("`mode`"), "{told}");
    // A mode wider than the server's ceiling (ask, by default) is refused outright.
    let wider = world
        .call("kin", r#"{"prompt": "x", "mode": "allow"}"#)
        .await;
    assert_eq!(wider["isError"], true);
    assert!(wider["text"]
        .as_str()
        .unwrap()
        .contains("wider than this server allows"));
}

#[tokio::test]
async fn with_elicitation_an_ask_is_put_to_the_clients_user() {
    let Some(world) = World::new() else { return };
    world.model.push(tool_calls_reply(&[(
        "c1",
        "bash",
        r#"{"command":"touch made.txt"}"#,
    )]));
    world.model.push(text_reply(&["Made it."]));
    let found = world
        .client(&["elicit", r#"{"prompt": "make a file", "mode": "ask"}"#])
        .await;
    let asked = found[0]["asked"].as_str().unwrap_or_default();
    assert!(asked.contains("touch made.txt"), "{found:?}");
    assert_eq!(found[1]["structured"]["answer"], "Made it.", "{found:?}");
    assert!(world.cwd.path().join("made.txt").exists());
}

#[tokio::test]
async fn streamable_http_serves_the_same_tools() {
    use tokio::io::AsyncBufReadExt;
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["over http"]));
    let mut server = world
        .command(&common::kin_binary())
        .args(["mcp", "--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = line
        .strip_prefix("kin: serving MCP on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let said = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(said.starts_with("kin: the bearer token is in "), "{said}");
    let token = std::fs::read_to_string(world.home.path().join("mcp-token")).unwrap();
    let found = world.client(&["http", &url, token.trim(), "hello"]).await;
    assert_eq!(found[0]["names"].as_array().unwrap().len(), 5);
    assert_eq!(
        found[1]["structured"]["answer"], "over http",
        "{}",
        found[1]
    );
    // A non-loopback address is refused without --allow-remote.
    let refused = world
        .command(&common::kin_binary())
        .args(["mcp", "--listen", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-remote"));
    server.start_kill().unwrap();
    let _ = server.wait().await;
}

#[tokio::test]
async fn an_editors_session_list_marks_a_session_started_over_mcp() {
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["made over mcp"]));
    let id = session_id(&world.call("kin", r#"{"prompt": "hello"}"#).await);
    // `kin acp` on the same KIN_HOME: the editor's own session is listed without the mark.
    let home = world.home.path().to_string_lossy().into_owned();
    let mut acp = Wire::start_with(None, tempfile::tempdir().unwrap(), &[("KIN_HOME", &home)]);
    let editors = acp.open_session().await;
    let (_, answer) = acp.request(1, "session/list", json!({})).await;
    let sessions = answer["result"]["sessions"].as_array().unwrap();
    let entry = |wanted: &str| {
        sessions
            .iter()
            .find(|s| s["sessionId"] == wanted)
            .unwrap_or_else(|| panic!("{wanted} is not listed: {answer}"))
            .clone()
    };
    assert_eq!(entry(&id)["_meta"]["kin.startedOver"], "mcp", "{answer}");
    assert!(entry(&editors).get("_meta").is_none(), "{answer}");
}

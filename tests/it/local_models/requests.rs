//! What kin's requests look like to a small window and to prompt caches: malformed tool calls
//! sent back in a form servers parse, the window asked only of local servers and never before
//! the first request, the stable prefix, and the lean request.

use std::process::Command;

use serde_json::{json, Value};

use super::{of_type, ready, start, usage_update, KEY};
use crate::common::mock_openai::{text_reply, tool_calls_reply, LlamaLike, MockServer};
use crate::common::{self, answer_text, kin_binary};

/// The tool calls of the assistant messages of a request, in order.
fn sent_calls(body: &Value) -> Vec<Value> {
    let messages = body["messages"].as_array().unwrap();
    let calls = messages.iter().filter_map(|m| m["tool_calls"].as_array());
    calls.flatten().cloned().collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let names = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap());
    names.map(str::to_owned).collect()
}

// ---- Malformed tool calls -----------------------------------------------------------------

/// A call whose arguments were cut off and one with a raw newline inside a string: the log
/// keeps both as the model sent them, the server (which parses every call in the history, as
/// llama-server does, else HTTP 500) gets `{}` and the repaired text, and every later request
/// succeeds.
#[tokio::test]
async fn malformed_tool_calls_do_not_poison_the_history() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(1_000_000));
    let mut kin = start(&server, "", &[("KIN_RETRIES", "0")]);
    let session = ready(&mut kin).await;
    let truncated = r#"{"path": "notes.txt", "off"#;
    let raw_newline = "{\"pattern\": \"one\ntwo\"}";
    server.push(tool_calls_reply(&[
        ("call_1", "read", truncated),
        ("call_2", "grep", raw_newline),
    ]));
    server.push(text_reply(&["looked"]));
    let (_, answer) = kin.prompt(2, &session, "look").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    server.push(text_reply(&["still fine"]));
    let (updates, answer) = kin.prompt(3, &session, "next").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(answer_text(&updates), "still fine");
    assert_eq!(server.request_count(), 3, "no request was refused");
    let second = server.requests()[1].body.clone();
    let calls = sent_calls(&second);
    assert_eq!(calls[0]["function"]["arguments"], "{}");
    let repaired: Value =
        serde_json::from_str(calls[1]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(repaired["pattern"], "one\ntwo");
    let results: Vec<&Value> = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    let told = results[0]["content"].as_str().unwrap();
    assert!(
        told.contains("not valid JSON") && told.contains("empty arguments"),
        "{told}"
    );
    let log = kin.log(&session);
    let message = &of_type(&log, "assistant/message")[0]["data"]["message"]["content"];
    assert_eq!(
        message[0]["arguments"], truncated,
        "the log keeps what was sent"
    );
    assert_eq!(message[1]["arguments"], raw_newline);
}

// ---- The window question ------------------------------------------------------------------

/// A hosted endpoint (a name, reached here through a proxy) is never asked for its window:
/// the model request is the first and only request.
#[tokio::test]
async fn a_hosted_endpoint_is_not_asked_for_its_window() {
    let server = MockServer::start();
    let proxy = format!("http://{}", server.addr);
    let env = [
        ("KIN_BASE_URL", "http://api.hosted-model.test/v1"),
        ("HTTP_PROXY", proxy.as_str()),
        ("http_proxy", proxy.as_str()),
        ("NO_PROXY", ""),
        ("no_proxy", ""),
    ];
    let mut kin = start(&server, "", &env);
    let session = ready(&mut kin).await;
    for id in [2, 3] {
        server.push(text_reply(&["hi"]));
        let (_, answer) = kin.prompt(id, &session, "hi").await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    assert!(server.probes().is_empty(), "{:?}", server.probes());
    let paths: Vec<String> = server.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths, ["http://api.hosted-model.test/v1/chat/completions"; 2],
        "through the proxy, to the hosted name"
    );
}

/// On a loopback llama-server the window is asked beside the first request and learned by the
/// end of it; the first request does not wait for the answer (it goes out without a window).
#[tokio::test]
async fn a_local_servers_window_is_learned_beside_the_first_request() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(12_288));
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["hi"]));
    let (updates, _) = kin.prompt(2, &session, "hi").await;
    let size = usage_update(&updates).map(|u| u["size"].clone());
    assert_eq!(size, Some(json!(12_288)), "learned during the first turn");
    assert_eq!(
        server.requests()[0].body["max_tokens"],
        4096,
        "the first request was built before the answer came"
    );
    server.push(text_reply(&["hi"]));
    kin.prompt(3, &session, "hi").await;
    assert_eq!(
        server.requests()[1].body["max_tokens"],
        12_288 / 4,
        "later ones use the window"
    );
    assert_eq!(server.probes().len(), 1, "asked once");
}

// ---- The stable prefix --------------------------------------------------------------------

/// The system prompt and the tool schemas are the same in every session (the workspace opens
/// the first user message instead), so a second session in another directory finds them in a
/// hosted API's prefix cache.
#[tokio::test]
async fn a_second_session_in_another_directory_hits_the_prefix_cache() {
    let server = MockServer::start();
    server.cache_prefixes();
    let mut kin = start(&server, "", &[]);
    kin.initialize().await;
    let mut cached = Vec::new();
    for (id, at) in [(2, 0), (3, 1)] {
        let cwd = tempfile::tempdir().unwrap();
        let dir = cwd.path().to_string_lossy().into_owned();
        let params = json!({"cwd": dir, "mcpServers": []});
        let (_, answer) = kin.request(100 + id, "session/new", params).await;
        let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
        server.push(text_reply(&["hi"]));
        kin.prompt(id, &session, "hi").await;
        let body = server.requests()[at].body.clone();
        let first_user = body["messages"][1]["content"].as_str().unwrap().to_owned();
        assert!(
            first_user.contains(&dir),
            "the workspace opens the first user message"
        );
        assert!(!body["messages"][0].to_string().contains(&dir));
        let log = kin.log(&session);
        let usage = &of_type(&log, "assistant/message")[0]["data"]["usage"];
        cached.push(usage["cacheReadTokens"].as_u64().unwrap_or(0));
        if at == 1 {
            let stable = body["messages"][0]["content"].as_str().unwrap().len()
                + body["tools"].to_string().len();
            eprintln!(
                "second session: {} of {} prompt tokens cached; system prompt and tools ~{} tokens",
                cached[1],
                usage["inputTokens"],
                stable / 4
            );
            assert!(
                cached[1] >= stable as u64 / 4,
                "the system prompt and the tools are cached: {cached:?}, {}",
                stable / 4
            );
        }
    }
    assert_eq!(cached[0], 0, "nothing before the first session");
}

// ---- The lean request ---------------------------------------------------------------------

/// The property names, types and required lists of a schema, its descriptions left out.
fn contract(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, value)| {
                    let prose = *key == "description" && value.is_string();
                    !prose && !matches!(key.as_str(), "$schema" | "$id" | "title")
                })
                .map(|(key, value)| (key.clone(), contract(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(contract).collect()),
        other => other.clone(),
    }
}

/// On an 8,000-token window the system prompt and tools would take over a quarter of it: kin
/// sends the lean request (rare tools left out, descriptions shortened, the plan instruction
/// gone) and every tool it keeps, the delegation tools first, keeps its name and parameters.
/// On a large window the request is whole.
#[tokio::test]
async fn a_small_window_gets_the_lean_request_with_the_contracts_intact() {
    let server = MockServer::start();
    let mut kin = start(&server, "context_window = 8000\n", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["hi"]));
    kin.prompt(2, &session, "hi").await;
    let mut large = start(&server, "context_window = 128000\n", &[]);
    let other = ready(&mut large).await;
    server.push(text_reply(&["hi"]));
    large.prompt(2, &other, "hi").await;
    let requests = server.requests();
    let (lean, full) = (&requests[0].body, &requests[1].body);
    let names = tool_names(lean);
    for left_out in ["subagent_fork", "list_agents", "task_list", "update_plan"] {
        assert!(!names.iter().any(|n| n == left_out), "{names:?}");
        assert!(tool_names(full).iter().any(|n| n == left_out));
    }
    assert!(!lean["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("update_plan"));
    let schemas = common::repo().join("protocol/schemas/tools");
    for tool in lean["tools"].as_array().unwrap() {
        let name = tool["function"]["name"].as_str().unwrap();
        let file = std::fs::read_to_string(schemas.join(format!("{name}.json"))).unwrap();
        let file: Value = serde_json::from_str(&file).unwrap();
        assert_eq!(
            contract(&tool["function"]["parameters"]),
            contract(&file),
            "{name}"
        );
        let description = tool["function"]["description"].as_str().unwrap();
        assert!(
            file["description"]
                .as_str()
                .unwrap()
                .starts_with(description),
            "{name}: {description}"
        );
    }
    for delegation in ["subagent", "send_message", "task_output", "task_kill"] {
        assert!(names.iter().any(|n| n == delegation), "{names:?}");
    }
    let (lean_tokens, full_tokens) = (LlamaLike::tokens(lean), LlamaLike::tokens(full));
    eprintln!("first request: lean {lean_tokens} tokens, full {full_tokens}");
    assert!(
        lean_tokens * 10 < full_tokens * 7,
        "{lean_tokens} vs {full_tokens}"
    );
}

/// A 3,000-token llama-server that is not asked in time: the first request goes whole and is
/// refused; the refusal names the window, and the same step is sent lean and answered.
#[tokio::test]
async fn a_request_refused_before_the_window_was_known_is_sent_again_lean() {
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(3_000);
    llama.props = false;
    server.behave_like(llama.clone());
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["answered lean"]));
    let (updates, answer) = kin.prompt(2, &session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(answer_text(&updates), "answered lean");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "refused once, then answered");
    assert!(LlamaLike::tokens(&requests[0].body) > llama.n_ctx);
    assert!(LlamaLike::tokens(&requests[1].body) <= llama.n_ctx);
    assert!(!tool_names(&requests[1].body).contains(&"subagent_fork".to_owned()));
}

/// `kin config` says what the fixed part of a request costs, full and lean, and the setting.
#[test]
fn kin_config_shows_what_the_fixed_part_costs() {
    let home = common::home_with("[tools]\nlean = \"on\"\n");
    let out = Command::new(kin_binary())
        .arg("config")
        .env("KIN_HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("KIN_API_KEY", KEY)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line: {text}"))
            .to_owned()
    };
    assert!(line("tools.lean").contains(" on "), "{text}");
    let tokens = |line: String| -> u64 {
        let after = line.split('~').nth(1).unwrap();
        after.split(' ').next().unwrap().parse().unwrap()
    };
    let (full, lean) = (
        tokens(line("fixed part, full")),
        tokens(line("fixed part, lean")),
    );
    eprintln!("kin config: full ~{full} tokens, lean ~{lean}");
    assert!(full > 2_000 && lean < full * 7 / 10, "{full} {lean}");
    let bad = common::home_with("[tools]\nlean = \"sometimes\"\n");
    let out = Command::new(kin_binary())
        .arg("config")
        .env("KIN_HOME", bad.path())
        .env("XDG_CONFIG_HOME", bad.path().join("config"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let told = String::from_utf8_lossy(&out.stderr);
    assert!(
        told.contains("sometimes") || told.contains("lean"),
        "{told}"
    );
}

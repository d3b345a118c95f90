//! Size caps and safe display, through the real binary: an oversized tool-call argument is
//! refused to the model and not logged whole; an oversized prompt is refused with -32602 before
//! it is stored; `kin run` shows model- and file-chosen escapes escaped on stderr; a workspace
//! of `/` or the home directory gets a warning in the editor.

use crate::common;

use std::process::{Command, Output};

use common::mock_openai::{chunk, done, event, text_reply, usage, MockServer, Reply};
use common::{kin_binary, Wire, MODEL_ENV};
use serde_json::{json, Value};

/// A streamed answer of one tool call whose arguments come in deltas of 64 KiB.
fn big_call_reply(id: &str, name: &str, arguments: &str) -> Reply {
    let mut parts = vec![event(&chunk(
        json!({"role": "assistant", "content": null}),
        None,
    ))];
    parts.push(event(&chunk(
        json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
        None,
    )));
    let bytes = arguments.as_bytes();
    for piece in bytes.chunks(64 * 1024) {
        let piece = std::str::from_utf8(piece).unwrap();
        parts.push(event(&chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
            None,
        )));
    }
    parts.push(event(&chunk(json!({}), Some("tool_calls"))));
    parts.push(event(&usage(20, 5)));
    parts.push(done());
    Reply::Stream(parts)
}

fn kin_run(
    home: &std::path::Path,
    cwd: &std::path::Path,
    server: &MockServer,
    prompt: &str,
) -> Output {
    let mut command = Command::new(kin_binary());
    command.arg("run").arg(prompt);
    for name in MODEL_ENV {
        command.env_remove(name);
    }
    command
        .env("KIN_HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("KIN_BASE_URL", server.base_url())
        .env("KIN_API_KEY", "sk-caps-0000000001")
        .current_dir(cwd);
    command.output().unwrap()
}

fn total_log_bytes(home: &std::path::Path) -> u64 {
    std::fs::read_dir(home.join("sessions"))
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum()
}

/// A 3 MiB `write` call (cap 1 MiB): the model gets an error result naming the cap, the turn
/// goes on to its answer, nothing is written, and the session log holds no more than the cap.
#[test]
fn an_oversized_tool_argument_is_refused_to_the_model_and_not_logged_whole() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let content = "z".repeat(3 * 1024 * 1024);
    let arguments = json!({"path": "big.txt", "content": content}).to_string();
    let server = MockServer::start();
    server.push(big_call_reply("call_big", "write", &arguments));
    server.push(text_reply(&["I will split it."]));
    let out = kin_run(home.path(), cwd.path(), &server, "Write a big file.");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "I will split it.\n");
    assert!(!cwd.path().join("big.txt").exists());

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    let text = tool["content"].as_str().unwrap();
    assert!(
        text.contains(&format!("{} bytes", arguments.len()))
            && text.contains("max_tool_argument_bytes"),
        "{text}"
    );
    // The history keeps a small marker in place of the arguments, valid JSON for the endpoint.
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let sent = assistant["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert!(
        sent.len() < 1024,
        "{} bytes of arguments sent back",
        sent.len()
    );
    let marker: Value = serde_json::from_str(sent).unwrap();
    assert_eq!(marker["kinRefusedArguments"]["bytes"], arguments.len());

    // Deltas are logged as they stream until the call passes the cap (1 MiB), none after.
    let logged = total_log_bytes(home.path());
    assert!(
        logged < 1024 * 1024 + 256 * 1024,
        "the session log is {logged} bytes"
    );
    assert!(stderr.len() < 16 * 1024, "stderr is {} bytes", stderr.len());
}

/// The cap is a config key: at 100 bytes, a 200-byte call is refused.
#[test]
fn the_tool_argument_cap_comes_from_the_config_file() {
    let home = common::home_with("max_tool_argument_bytes = 100\n");
    let cwd = tempfile::tempdir().unwrap();
    let arguments = json!({"path": "a.txt", "content": "y".repeat(200)}).to_string();
    let server = MockServer::start();
    server.push(big_call_reply("call_1", "write", &arguments));
    server.push(text_reply(&["ok"]));
    let out = kin_run(home.path(), cwd.path(), &server, "Write.");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!cwd.path().join("a.txt").exists());
    let requests = server.requests();
    let body = requests[1].body.to_string();
    assert!(body.contains("over kin's limit of 100 bytes"), "{body}");
}

/// Terminal escapes chosen by the model (arguments) and by files (results) reach stderr
/// escaped, never raw.
#[test]
fn kin_run_shows_escapes_on_stderr_escaped() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(
        cwd.path().join("evil.txt"),
        "\u{1b}]0;pwned\u{7}\u{1b}[2Jhello\n",
    )
    .unwrap();
    let arguments = json!({"path": "evil.txt", "note": "\u{1b}[31m\u{202e}"}).to_string();
    let server = MockServer::start();
    server.push(big_call_reply("call_1", "read", &arguments));
    server.push(text_reply(&["done"]));
    let out = kin_run(home.path(), cwd.path(), &server, "Read it.");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(
        !stderr.contains('\u{7}') && !stderr.contains('\u{202e}'),
        "{stderr:?}"
    );
    assert!(stderr.contains("kin: tool read"), "{stderr}");
    assert!(stderr.contains("\\u{1b}"), "{stderr}");
}

fn prompt_params(session: &str, blocks: usize) -> Value {
    let prompt: Vec<Value> = (0..blocks)
        .map(|_| json!({"type": "text", "text": "x"}))
        .collect();
    json!({"sessionId": session, "prompt": prompt})
}

/// Too many content blocks: -32602 naming the cap, and nothing of the prompt is stored.
#[tokio::test]
async fn a_prompt_over_the_block_cap_is_refused_before_it_is_stored() {
    let mut kin = Wire::start(None);
    let session = kin.open_session().await;
    let (_, answer) = kin
        .request(5, "session/prompt", prompt_params(&session, 10_001))
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("10001 content blocks") && message.contains("max_prompt_blocks"),
        "{message}"
    );
    let log = std::fs::read_to_string(kin.home.path().join(format!("sessions/{session}.jsonl")))
        .unwrap_or_default();
    assert!(!log.contains("user/message"), "{log}");
    // kin keeps serving.
    let (_, listed) = kin.request(6, "session/list", json!({})).await;
    assert!(listed["result"].is_object(), "{listed}");
}

/// The caps come from the config file: with `max_prompt_bytes = 10`, an 11-byte prompt is
/// refused with -32602.
#[tokio::test]
async fn the_prompt_caps_come_from_the_config_file() {
    let home = common::home_with("max_prompt_bytes = 10\n");
    let mut kin = Wire::start_in(None, home);
    let session = kin.open_session().await;
    let (_, answer) = kin.prompt(5, &session, "hello world").await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("11 bytes") && message.contains("max_prompt_bytes"),
        "{message}"
    );
}

/// A session in `/` warns through a `notice` (the client takes notices), one in an ordinary
/// directory does not; a client without notices gets the warning as agent text.
#[tokio::test]
async fn a_workspace_of_root_or_home_gets_a_warning_in_the_editor() {
    let mut kin = Wire::start(None);
    let (_, answer) = kin
        .request(
            0,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}}),
        )
        .await;
    assert_eq!(answer["result"]["protocolVersion"], 1);
    let (_, answer) = kin
        .request(1, "session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    let notice = kin.read().await.unwrap();
    assert_eq!(notice["method"], "session/update", "{notice}");
    assert_eq!(notice["params"]["sessionId"], session.as_str());
    let update = &notice["params"]["update"];
    assert_eq!(update["sessionUpdate"], "notice", "{update}");
    assert_eq!(update["severity"], "warning");
    assert!(
        update["title"]
            .as_str()
            .unwrap()
            .contains("whole filesystem"),
        "{update}"
    );

    // An ordinary workspace: the next line is the answer to the next request, no notice.
    let cwd = kin.cwd();
    kin.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": cwd, "mcpServers": []}}))
        .await;
    // Only the sessions' command lists may come between: no second notice.
    let next = skip_commands(&mut kin).await;
    assert_eq!(next["id"], 2, "{next}");
    kin.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "session/list", "params": {}}))
        .await;
    let next = skip_commands(&mut kin).await;
    assert_eq!(next["id"], 3, "{next}");
}

/// The next message that is not an `available_commands_update`.
async fn skip_commands(kin: &mut Wire) -> serde_json::Value {
    loop {
        let next = kin.read().await.unwrap();
        if next["params"]["update"]["sessionUpdate"] != "available_commands_update" {
            return next;
        }
    }
}

#[tokio::test]
async fn without_notices_the_home_warning_is_agent_text() {
    let home = tempfile::tempdir().unwrap();
    let home_dir = home.path().join("user");
    std::fs::create_dir_all(&home_dir).unwrap();
    let home_text = home_dir.to_string_lossy().into_owned();
    let mut kin = Wire::start_with(None, home, &[("HOME", &home_text)]);
    kin.initialize().await;
    let (_, answer) = kin
        .request(
            1,
            "session/new",
            json!({"cwd": home_text, "mcpServers": []}),
        )
        .await;
    assert!(answer["result"]["sessionId"].is_string(), "{answer}");
    let warning = kin.read().await.unwrap();
    let update = &warning["params"]["update"];
    assert_eq!(update["sessionUpdate"], "agent_message_chunk", "{warning}");
    assert!(
        update["content"]["text"]
            .as_str()
            .unwrap()
            .contains("home directory"),
        "{update}"
    );
}

//! The real agents from npm, codex-acp and claude-agent-acp (pinned in
//! tests/acp-agents/package-lock.json, installed by `.ci/run`), as children of kin under the
//! default `[sandbox] mode = "auto"`, answering from the local mock model server: each starts,
//! answers, runs a command, and persists its session, so that a `send_message` (a new child
//! process) continues it. The mock wiring follows ../shared/reference/acp.md §12 (codex: a
//! `mock` model provider speaking the Responses API; claude: ANTHROPIC_BASE_URL speaking the
//! Messages API). Missing agents skip with a visible line, and fail under CI.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{kin_parent_of, log_at_depth, marker};
use crate::common::mock_openai::{MockServer, Reply, Request};
use crate::common::{self, Script};
use kin::process::sandbox::Support;

/// What the child is asked first (it runs a command) and then (continuing the session).
const FIRST: &str = "FIRST_ASK: run the command.";
const SECOND: &str = "SECOND_ASK: say what you ran.";

/// The agent `program` installed from tests/acp-agents, or `None` after a visible skip line.
fn pinned_agent(test: &str, program: &str) -> Option<PathBuf> {
    let path = common::repo()
        .join("tests/acp-agents/node_modules/.bin")
        .join(program);
    let node = std::process::Command::new("node").arg("--version").output();
    if node.is_ok_and(|o| o.status.success()) && path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have node and tests/acp-agents installed (`npm ci` in tests/acp-agents)"
    );
    let line = format!(
        "SKIPPED {test}: node or `{program}` is missing (run `npm ci` in tests/acp-agents)\n"
    );
    // Straight to the stderr handle, so the skip shows without --nocapture.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    None
}

/// Whether kin confines here (the sandbox's own tests require it under CI).
fn confines() -> bool {
    matches!(Support::probe(), Support::Landlock { .. })
}

/// One SSE event named `kind` whose data is `data` with `type: kind`.
fn typed_event(kind: &str, mut data: Value) -> Vec<u8> {
    data["type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n").into_bytes()
}

/// A parent that starts `tool` in the background with [`FIRST`], waits for it, continues it
/// with [`SECOND`] through `send_message`, waits again and finishes.
fn parent_continuing(tool: &str) -> Script {
    Script::new()
        .call(
            "start",
            tool,
            json!({"description": "Ask the peer", "prompt": FIRST, "run_in_background": true}),
        )
        .result("start", "started subagent {{id:1}} as task subagent-1")
        .wait_for("first", "subagent-1")
        .call(
            "again",
            "send_message",
            json!({"subagent_id": "{{id:1}}", "message": SECOND}),
        )
        .wait_for("second", "subagent-2")
        .text("PARENT_DONE")
}

/// What the parent's log must show, and that the second model call carried the first
/// exchange: the child's session was saved and loaded by its second process.
fn assert_continued(logs: &[(Value, String)], mock: &MockServer, ran: &str) {
    let parent_log = log_at_depth(logs, 0);
    assert!(
        parent_log.contains("message started task subagent-2 continuing subagent"),
        "{parent_log}"
    );
    assert!(
        parent_log.contains(ran),
        "the first run's answer: {parent_log}"
    );
    assert!(
        parent_log.contains("CONTINUED_OK"),
        "the second run's answer: {parent_log}"
    );
    let second = mock
        .requests()
        .into_iter()
        // The agent's own turn (with its tools), not a side call such as a title.
        .filter(|r| r.body["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .find(|r| r.body.to_string().contains("SECOND_ASK"))
        .expect("the continued child asked the model");
    assert!(
        second.body.to_string().contains("FIRST_ASK"),
        "the continued child lost its session: {}",
        second.body
    );
}

/// The command the child runs: a write in its cwd, and one outside that kin's sandbox refuses
/// when it confines the child (`outside`).
fn command(outside: &Path) -> String {
    format!(
        "echo ran > ran.txt; echo escaped > {}/escape.txt; echo RAN_DONE",
        outside.display()
    )
}

/// Every file beneath `dir` (none when it is missing).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

// ---- codex-acp: the Responses API --------------------------------------------------------

/// A streamed Responses API answer of `items`.
fn responses(items: &[Value]) -> Reply {
    let mut parts = vec![typed_event(
        "response.created",
        json!({"response": {"id": "resp-1"}}),
    )];
    for (index, item) in items.iter().enumerate() {
        parts.push(typed_event(
            "response.output_item.done",
            json!({"output_index": index, "item": item}),
        ));
    }
    parts.push(typed_event(
        "response.completed",
        json!({"response": {"id": "resp-1", "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11, "input_tokens_details": null, "output_tokens_details": null}}}),
    ));
    Reply::Stream(parts)
}

fn codex_text(text: &str) -> Reply {
    responses(&[
        json!({"type": "message", "role": "assistant", "id": "msg-1", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}]}),
    ])
}

/// A call of codex's shell tool, whichever of its names the request offers.
fn codex_shell_call(request: &Request, command: &str) -> Reply {
    let tools = request.body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let offered = |name: &str| tools.iter().any(|tool| tool["name"] == name);
    let (name, arguments) = if offered("shell_command") {
        ("shell_command", json!({"command": command}))
    } else if offered("exec_command") {
        ("exec_command", json!({"cmd": command}))
    } else {
        ("shell", json!({"command": ["bash", "-lc", command]}))
    };
    responses(&[
        json!({"type": "function_call", "id": "fc-1", "call_id": "call-1",
        "name": name, "arguments": arguments.to_string()}),
    ])
}

/// codex-acp's model: the first ask gets a shell call, its output an answer, the second ask
/// (continuing) another.
fn codex_model(mock: &MockServer, command: String) {
    mock.set_responder(move |request| {
        let input = request.body["input"].as_array()?;
        let last = input.last()?;
        if last["type"] == "function_call_output" {
            return Some(codex_text("RAN_OK"));
        }
        let asked = last.to_string();
        if asked.contains("SECOND_ASK") {
            Some(codex_text("CONTINUED_OK"))
        } else if asked.contains("FIRST_ASK") {
            Some(codex_shell_call(request, &command))
        } else {
            Some(codex_text("OK"))
        }
    });
}

#[tokio::test]
async fn codex_acp_runs_a_command_and_continues_its_session_under_the_default_sandbox() {
    let test = "codex_acp_runs_a_command_and_continues_its_session_under_the_default_sandbox";
    let Some(codex) = pinned_agent(test, "codex-acp") else {
        return;
    };
    let mock = MockServer::start();
    let outside = tempfile::tempdir().unwrap();
    codex_model(&mock, command(outside.path()));
    let codex_home = tempfile::tempdir().unwrap();
    // The provider's name carries the marker: it tags codex-acp's command line.
    let marker = marker("codex-acp");
    let overrides = [
        "model_provider=\"mock\"".to_owned(),
        format!("model_providers.mock.name=\"{marker}\""),
        format!("model_providers.mock.base_url=\"{}\"", mock.base_url()),
        "model_providers.mock.env_key=\"MOCK_KEY\"".to_owned(),
        "model_providers.mock.wire_api=\"responses\"".to_owned(),
        "model=\"mock-model\"".to_owned(),
    ];
    let args: Vec<String> = overrides
        .iter()
        .flat_map(|o| ["-c".to_owned(), o.clone()])
        .collect();
    // No `sandbox` or `writable`: codex-acp's defaults (left to its own sandbox).
    let table = format!(
        "[acp_agents.codex]\ncommand = {:?}\nargs = {args:?}\npermission = \"allow\"\nenv = {{ CODEX_HOME = {:?}, MOCK_KEY = \"x\" }}\n",
        codex.display().to_string(),
        codex_home.path().display().to_string(),
    );
    let logs = kin_parent_of(parent_continuing("subagent_codex"), &table, &marker).await;
    assert_continued(&logs, &mock, "RAN_OK");
    assert!(
        logs.iter()
            .any(|(header, text)| header["delegationDepth"] == 1
                && text.contains(r#""providerData":{"sessionId""#)),
        "the parent's record of the child holds its session id: {logs:?}"
    );
    // The command ran; codex keeps its sessions in CODEX_HOME.
    let ran = mock
        .requests()
        .iter()
        .find(|r| r.body["input"].to_string().contains("function_call_output"))
        .map(|r| r.body["input"].to_string())
        .expect("codex-acp sent the command's output to the model");
    assert!(ran.contains("RAN_DONE"), "{ran}");
    assert!(
        files_under(&codex_home.path().join("sessions"))
            .iter()
            .any(|path| path.extension().is_some_and(|e| e == "jsonl")),
        "codex-acp saved its session"
    );
}

// ---- claude-agent-acp: the Messages API ---------------------------------------------------

/// A Messages API answer of `blocks` (streamed when the request asked for a stream).
fn messages(request: &Request, blocks: &[Value], stop: &str) -> Reply {
    if request.body["stream"] != true {
        let body = json!({"id": "msg-1", "type": "message", "role": "assistant", "model": "mock-model",
            "content": blocks, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}});
        return Reply::Status {
            status: 200,
            headers: Vec::new(),
            body: body.to_string(),
        };
    }
    let mut parts = vec![typed_event(
        "message_start",
        json!({"message": {"id": "msg-1", "type": "message", "role": "assistant", "model": "mock-model", "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 0}}}),
    )];
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = match block["type"].as_str() {
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
            _ => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block["text"]}),
            ),
        };
        parts.push(typed_event(
            "content_block_start",
            json!({"index": index, "content_block": start}),
        ));
        parts.push(typed_event(
            "content_block_delta",
            json!({"index": index, "delta": delta}),
        ));
        parts.push(typed_event("content_block_stop", json!({"index": index})));
    }
    parts.push(typed_event(
        "message_delta",
        json!({"delta": {"stop_reason": stop}, "usage": {"output_tokens": 1}}),
    ));
    parts.push(typed_event("message_stop", json!({})));
    Reply::Stream(parts)
}

fn claude_text(request: &Request, text: &str) -> Reply {
    messages(
        request,
        &[json!({"type": "text", "text": text})],
        "end_turn",
    )
}

/// claude-agent-acp's model: the first ask (with its tools) gets a Bash call, the call's
/// result an answer, the second ask (continuing) another; its side calls get plain text.
fn claude_model(mock: &MockServer, command: String) {
    mock.set_responder(move |request| {
        if !request.path.contains("/messages") {
            return None;
        }
        // The last user message (a system reminder may follow it).
        let last = request.body["messages"]
            .as_array()?
            .iter()
            .rev()
            .find(|message| message["role"] == "user")?
            .to_string();
        let has_bash = request.body["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|tool| tool["name"] == "Bash"));
        if !has_bash {
            return Some(claude_text(request, "OK"));
        }
        if last.contains("tool_result") {
            return Some(claude_text(request, "RAN_OK"));
        }
        if last.contains("SECOND_ASK") {
            return Some(claude_text(request, "CONTINUED_OK"));
        }
        if !last.contains("FIRST_ASK") {
            return Some(claude_text(request, "OK"));
        }
        let call = json!({"type": "tool_use", "id": "toolu_1", "name": "Bash",
            "input": {"command": command, "description": "Run the command"}});
        Some(messages(request, &[call], "tool_use"))
    });
}

#[tokio::test]
async fn claude_agent_acp_runs_a_command_and_continues_its_session_in_the_sandbox() {
    let test = "claude_agent_acp_runs_a_command_and_continues_its_session_in_the_sandbox";
    let Some(claude) = pinned_agent(test, "claude-agent-acp") else {
        return;
    };
    let mock = MockServer::start();
    let outside = tempfile::tempdir().unwrap();
    claude_model(&mock, command(outside.path()));
    let home = tempfile::tempdir().unwrap();
    // No `sandbox` or `writable`: claude-agent-acp's defaults (confined, ~/.claude writable).
    let table = format!(
        "[acp_agents.claude]\ncommand = {:?}\npermission = \"allow\"\nenv = {{ HOME = {:?}, ANTHROPIC_BASE_URL = {:?}, ANTHROPIC_API_KEY = \"x\", IS_SANDBOX = \"1\", DISABLE_TELEMETRY = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\" }}\n",
        claude.display().to_string(),
        home.path().display().to_string(),
        mock.base_url().trim_end_matches("/v1"),
    );
    // Its command line carries no marker of ours; the codex test checks for leftovers.
    let marker = marker("claude");
    let logs = kin_parent_of(parent_continuing("subagent_claude"), &table, &marker).await;
    assert_continued(&logs, &mock, "RAN_OK");
    // The command ran in the child's cwd and, confined, could not write outside.
    let result = mock
        .requests()
        .iter()
        .map(|r| r.body["messages"].to_string())
        .find(|m| m.contains("tool_result"))
        .expect("claude-agent-acp sent the command's result to the model");
    assert!(result.contains("RAN_DONE"), "{result}");
    if confines() {
        assert!(
            !outside.path().join("escape.txt").exists(),
            "the confined child's command wrote outside: {result}"
        );
    }
    // Its transcript is kept beneath ~/.claude, which kin made writable.
    assert!(
        files_under(&home.path().join(".claude/projects"))
            .iter()
            .any(|path| path.extension().is_some_and(|e| e == "jsonl")),
        "claude-agent-acp saved its session"
    );
}

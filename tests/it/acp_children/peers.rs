//! codex-acp and claude-agent-acp as children of kin, answering from the local mock model
//! server. Each runs when its binary is on PATH and writes a SKIPPED line otherwise. The mock
//! wiring follows ../shared/reference/acp.md §12 (codex: a `mock` model provider speaking the
//! Responses API; claude: ANTHROPIC_BASE_URL speaking the Messages API).

use std::path::PathBuf;

use serde_json::{json, Value};

use super::{kin_parent_of, log_at_depth, marker};
use crate::common::{self, Script};

/// The peer `program` on PATH, or `None` after a visible skip line.
fn peer_on_path(test: &str, program: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        let line = format!("SKIPPED {test}: `{program}` is not on PATH\n");
        // Straight to the stderr handle, so the skip shows without --nocapture.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
    found
}

/// One SSE event named `kind` whose data is `data` with `type: kind`.
fn typed_event(kind: &str, mut data: Value) -> Vec<u8> {
    data["type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n").into_bytes()
}

/// A parent that delegates once, in the foreground, to `tool` and then finishes.
fn parent_asking(tool: &str) -> Script {
    Script::new()
        .calls(&[(
            "ask-peer",
            tool,
            json!({"description": "Ask the peer", "prompt": "Reply with PEER_OK."}),
        )])
        .text("PARENT_DONE")
}

#[tokio::test]
async fn codex_acp_answers_from_the_mock_model_and_its_background_child_is_continuable() {
    let test = "codex_acp_answers_from_the_mock_model_and_its_background_child_is_continuable";
    let Some(codex) = peer_on_path(test, "codex-acp") else {
        return;
    };
    let mock = common::mock_openai::MockServer::start();
    let (id, text) = ("msg-1", "PEER_OK");
    mock.set_default(common::mock_openai::Reply::Stream(vec![
        typed_event("response.created", json!({"response": {"id": "resp-1"}})),
        typed_event(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message", "role": "assistant", "id": id, "content": []}}),
        ),
        typed_event(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": 0, "content_index": 0, "delta": text}),
        ),
        typed_event(
            "response.output_item.done",
            json!({"output_index": 0, "item": {"content": [{"type": "output_text", "text": text, "annotations": []}], "status": "completed", "type": "message", "role": "assistant", "id": id}}),
        ),
        typed_event(
            "response.completed",
            json!({"response": {"id": "resp-1", "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11, "input_tokens_details": null, "output_tokens_details": null}}}),
        ),
    ]));
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
    let table = format!(
        "[acp_agents.codex]\ncommand = {:?}\nargs = {args:?}\nenv = {{ CODEX_HOME = {:?}, MOCK_KEY = \"x\" }}\n",
        codex.display().to_string(),
        codex_home.path().display().to_string(),
    );
    // Then in the background: codex-acp's initialize advertises resume, so (asked by a probe
    // launch, as nothing is known yet in this kin) the child is continuable.
    let parent = Script::new()
        .call("start", "subagent_codex", json!({"description": "Ask the peer", "prompt": "Reply with PEER_OK.", "run_in_background": true}))
        .wait_for("collect", "subagent-1")
        .text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(parent_log.contains("started subagent "), "{parent_log}");
    assert!(parent_log.contains("PEER_OK"), "{parent_log}");
    let record = log_at_depth(&logs, 1);
    assert!(
        record.contains(r#""providerData":{"sessionId""#),
        "{record}"
    );
    let logs = kin_parent_of(parent_asking("subagent_codex"), &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(parent_log.contains("PEER_OK"), "{parent_log}");
    assert!(
        mock.requests()
            .iter()
            .any(|r| r.path.ends_with("/responses")),
        "codex-acp asked the mock model"
    );
}

#[tokio::test]
async fn claude_agent_acp_answers_a_delegation_from_the_mock_model() {
    let test = "claude_agent_acp_answers_a_delegation_from_the_mock_model";
    let Some(claude) = peer_on_path(test, "claude-agent-acp") else {
        return;
    };
    let mock = common::mock_openai::MockServer::start();
    let text = "PEER_OK";
    // Every call gets the streamed answer (side calls that expect JSON may fail; the turn
    // does not depend on them).
    mock.set_default(common::mock_openai::Reply::Stream(vec![
        typed_event(
            "message_start",
            json!({"message": {"id": "msg-1", "type": "message", "role": "assistant", "model": "mock-model", "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 0}}}),
        ),
        typed_event(
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        typed_event(
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "text_delta", "text": text}}),
        ),
        typed_event("content_block_stop", json!({"index": 0})),
        typed_event(
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ),
        typed_event("message_stop", json!({})),
    ]));
    let home = tempfile::tempdir().unwrap();
    let table = format!(
        "[acp_agents.claude]\ncommand = {:?}\nenv = {{ HOME = {:?}, ANTHROPIC_BASE_URL = {:?}, ANTHROPIC_API_KEY = \"x\", IS_SANDBOX = \"1\", DISABLE_TELEMETRY = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\" }}\n",
        claude.display().to_string(),
        home.path().display().to_string(),
        mock.base_url().trim_end_matches("/v1"),
    );
    // Its command line carries no marker of ours; the codex test checks for leftovers.
    let logs = kin_parent_of(parent_asking("subagent_claude"), &table, &marker("claude")).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(parent_log.contains("PEER_OK"), "{parent_log}");
    assert!(
        mock.requests()
            .iter()
            .any(|r| r.path.contains("/v1/messages")),
        "claude-agent-acp asked the mock model"
    );
}

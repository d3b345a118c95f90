//! A child's time limit through the real binary and its OpenAI client: the child's first
//! model request breaks before any chunk (the client retries it), the retry stalls, and the
//! child still settles `timed_out` at its limit: the retry spends the same clock.

use crate::common;

use common::mock_openai::{text_reply, tool_calls_reply, MockServer, Reply};
use common::Wire;

#[tokio::test]
async fn a_retried_stall_does_not_reset_the_childs_clock() {
    let server = MockServer::start();
    let base_url = server.base_url();
    let env = [
        ("KIN_BASE_URL", base_url.as_str()),
        ("KIN_MODEL", "mock-model"),
        ("KIN_API_KEY", "sk-limits-test-0001"),
        ("KIN_RETRIES", "3"),
        ("KIN_STALL_TIMEOUT", "10m"),
    ];
    let mut kin = Wire::start_with(None, tempfile::tempdir().unwrap(), &env);
    let session = kin.open_session().await;
    let call = r#"{"description":"slow","prompt":"do it","timeout":2}"#;
    server.push(tool_calls_reply(&[("call_1", "subagent", call)]));
    // The child: a response cut before its first chunk (retried), then one that never ends.
    server.push(Reply::Cut(Vec::new()));
    server.push(Reply::Hang(Vec::new()));
    server.push(text_reply(&["the child ran out of time"]));
    kin.turn(2, &session, "go").await;
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        4,
        "the parent, the child twice (a retry), the parent"
    );
    assert_eq!(
        requests[1].body, requests[2].body,
        "the second child request is the client's retry of the first"
    );
    let told = requests[3].body["messages"].to_string();
    assert!(
        told.contains(
            "Error: subagent run timed_out\\nDiagnostic: the time limit of 2s was reached"
        ),
        "{told}"
    );
    // The child's log says so too, once.
    let child_ends: Vec<String> = common::session_files(kin.home.path())
        .into_iter()
        .filter(|path| path.parent().is_some_and(|dir| dir.ends_with("children")))
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.lines()
                .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
                .filter(|e| e["type"] == "turn/end")
                .map(|e| e["data"]["reason"]["kind"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(child_ends, ["timed_out"]);
}

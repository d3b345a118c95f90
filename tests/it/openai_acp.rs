//! `kin acp` (the real binary) on its configured OpenAI-compatible model, served by the local
//! mock: a prompt end to end, the bad-endpoint errors (kin keeps serving), the auth flow when
//! there is no key, and recording a snapshot scenario then replaying the recording.

use crate::common;

use common::mock_openai::{
    error_reply, hang_after, text_events, text_reply, tool_calls_reply, MockServer, Reply,
};
use common::{
    answer_text, compare_with_recording, play, play_with, read_input, snapshot_dir,
    write_expectations, AcpSchema, ModelSource, Wire,
};
use serde_json::{json, Value};

fn live(server: &MockServer, key: Option<&str>) -> Wire {
    live_with(&server.base_url(), key, &[])
}

fn live_with(base_url: &str, key: Option<&str>, extra: &[(&str, &str)]) -> Wire {
    let mut env = vec![("KIN_BASE_URL", base_url), ("KIN_MODEL", "mock-model")];
    if let Some(key) = key {
        env.push(("KIN_API_KEY", key));
    }
    env.extend_from_slice(extra);
    Wire::start_with(None, tempfile::tempdir().unwrap(), &env)
}

#[tokio::test]
async fn a_prompt_streams_the_models_answer_and_ends_the_turn() {
    let server = MockServer::start();
    server.push(text_reply(&["Hello", " from", " the mock"]));
    let mut kin = live(&server, Some("sk-e2e-key-000001"));
    let session = kin.open_session().await;
    let updates = kin.turn(2, &session, "Say hello").await;
    assert_eq!(answer_text(&updates), "Hello from the mock");
    let sent = &server.requests()[0];
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer sk-e2e-key-000001")
    );
    assert_eq!(sent.body["model"], "mock-model");
    let first = sent.body["messages"][1]["content"].as_str().unwrap();
    assert!(
        first.starts_with("<workspace>\nWorking directory: ")
            && first.ends_with("</workspace>\n\nSay hello"),
        "{first}"
    );

    let log =
        std::fs::read_to_string(kin.home.path().join(format!("sessions/{session}.jsonl"))).unwrap();
    assert!(log.contains(r#""provider":"openai-compatible","model":"mock-model""#));
}

#[tokio::test]
async fn bad_endpoints_give_specific_errors_and_kin_keeps_serving() {
    let server = MockServer::start();
    let mut kin = live(&server, Some("sk-rejected-00001"));
    let session = kin.open_session().await;

    server.push(error_reply(401, "Authentication Fails"));
    let (_, answer) = kin.prompt(2, &session, "a").await;
    assert_eq!(answer["error"]["code"], -32603);
    let message = answer["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        "model endpoint rejected the API key from KIN_API_KEY (HTTP 401) (turn 1, step 1)"
    );

    let mut cut = text_events(&["partial"], "stop");
    cut.truncate(2);
    server.push(Reply::Cut(cut));
    let (updates, answer) = kin.prompt(3, &session, "b").await;
    assert_eq!(answer_text(&updates), "partial");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("model stream was cut after output began"),
        "{message}"
    );

    server.push(error_reply(404, "Model Not Exist"));
    let (_, answer) = kin.prompt(4, &session, "c").await;
    assert_eq!(
        answer["error"]["message"],
        "model endpoint answered HTTP 404: Model Not Exist (turn 3, step 1)"
    );

    // Still serving: the next prompt works, and the log recorded each failure.
    server.push(text_reply(&["fine now"]));
    let (updates, answer) = kin.prompt(5, &session, "d").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(answer_text(&updates), "fine now");
    let log =
        std::fs::read_to_string(kin.home.path().join(format!("sessions/{session}.jsonl"))).unwrap();
    let errors: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "turn/end" && e["data"]["reason"]["kind"] == "error")
        .collect();
    assert_eq!(errors.len(), 3);
    assert_eq!(
        errors[0]["data"]["reason"]["message"],
        "model endpoint rejected the API key from KIN_API_KEY (HTTP 401)"
    );
    assert_eq!(errors[0]["data"]["reason"]["step"], 1);
}

#[tokio::test]
async fn stalled_and_unreachable_endpoints_are_reported_and_kin_keeps_serving() {
    let server = MockServer::start();
    let mut kin = live_with(
        &server.base_url(),
        Some("sk-e2e-key-000002"),
        &[("KIN_STALL_TIMEOUT", "200ms")],
    );
    let session = kin.open_session().await;
    server.push(hang_after(&["wait"]));
    let (_, answer) = kin.prompt(2, &session, "a").await;
    assert_eq!(
        answer["error"]["message"],
        "model stream stalled: no data for 200 ms (turn 1, step 1)"
    );
    let (_, answer) = kin.request(3, "session/list", json!({})).await;
    assert_eq!(answer["result"]["sessions"].as_array().unwrap().len(), 1);

    // Nobody listens on this port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let mut kin = live_with(&url, Some("sk-e2e-key-000003"), &[("KIN_RETRIES", "0")]);
    let session = kin.open_session().await;
    let (_, answer) = kin.prompt(2, &session, "a").await;
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "could not reach the model endpoint {url}/chat/completions"
        )),
        "{message}"
    );
    let (_, answer) = kin.request(3, "session/list", json!({})).await;
    assert!(answer["result"]["sessions"].is_array());
}

#[tokio::test]
async fn without_a_key_kin_asks_for_authentication_and_finds_a_key_added_later() {
    let server = MockServer::start();
    server.set_default(text_reply(&["authenticated"]));
    // Named innocently, but holding the key the config file will give: hidden from the tools
    // once that key is loaded.
    let mut kin = live_with(
        &server.base_url(),
        None,
        &[("KIN_TEST_COPY", "sk-from-config-file")],
    );
    let (_, init) = kin
        .request(0, "initialize", json!({"protocolVersion": 1}))
        .await;
    let ids = std::collections::HashMap::from([("0".to_owned(), "initialize".to_owned())]);
    AcpSchema::load()
        .check_agent_message(&init, &ids)
        .unwrap_or_else(|e| panic!("the initialize answer breaks the ACP schema: {e}"));
    let methods = init["result"]["authMethods"].as_array().unwrap();
    assert_eq!(methods.len(), 1, "{init}");
    assert_eq!(methods[0]["id"], "api-key");
    let description = methods[0]["description"].as_str().unwrap();
    assert!(description.contains("KIN_API_KEY"), "{description}");

    let session = kin.new_session().await;
    let (_, answer) = kin.prompt(2, &session, "hi").await;
    assert_eq!(answer["error"]["code"], -32000);
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("authentication required") && message.contains("KIN_API_KEY"),
        "{message}"
    );
    assert!(server.requests().is_empty());

    let (_, answer) = kin
        .request(3, "authenticate", json!({"methodId": "api-key"}))
        .await;
    assert_eq!(answer["error"]["code"], -32000);
    assert!(answer["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("still no API key"));
    let (_, answer) = kin
        .request(4, "authenticate", json!({"methodId": "password"}))
        .await;
    assert_eq!(answer["error"]["code"], -32602);

    // The user adds a key to the config file; authenticate finds it.
    let config = kin.home.path().join("config/kin/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "api_key = \"sk-from-config-file\"\n").unwrap();
    let (_, answer) = kin
        .request(5, "authenticate", json!({"methodId": "api-key"}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    kin.set_mode(6, &session, "allow").await;
    server.push(tool_calls_reply(&[(
        "env-1",
        "bash",
        r#"{"command":"env"}"#,
    )]));
    let updates = kin.turn(7, &session, "hi").await;
    assert_eq!(answer_text(&updates), "authenticated");
    let requests = server.requests();
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-from-config-file")
    );
    // The command's environment, as the model got it: without the key loaded later.
    let sent = requests[1].body.to_string();
    assert!(sent.contains("KIN_MODEL=mock-model"), "{sent}");
    assert!(!sent.contains("sk-from-config-file"), "{sent}");
}

#[tokio::test]
async fn authenticate_reads_the_whole_config_file_again() {
    // kin starts on a config file naming an endpoint that is never reached, and no key.
    let unused = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config/kin/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let old = format!(
        "base_url = \"{}\"\nmodel = \"old-model\"\n",
        unused.base_url()
    );
    std::fs::write(&config, old).unwrap();
    let mut kin = Wire::start_with(None, home, &[]);
    let session = kin.open_session().await;

    // The user points it at another endpoint and model, without retries, and adds the key.
    let server = MockServer::start();
    let new = format!(
        "base_url = \"{}\"\nmodel = \"new-model\"\nretries = 0\napi_key = \"sk-new-config-01\"\n",
        server.base_url()
    );
    std::fs::write(&config, new).unwrap();
    let (_, answer) = kin
        .request(2, "authenticate", json!({"methodId": "api-key"}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");

    server.push(error_reply(500, "overloaded"));
    let (_, answer) = kin.prompt(3, &session, "a").await;
    assert!(answer.get("error").is_some(), "{answer}");
    assert_eq!(server.requests().len(), 1, "`retries = 0` is in force");

    server.push(text_reply(&["from the new endpoint"]));
    let updates = kin.turn(4, &session, "b").await;
    assert_eq!(answer_text(&updates), "from the new endpoint");
    let sent = &server.requests()[1];
    assert_eq!(sent.body["model"], "new-model");
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer sk-new-config-01")
    );
    assert!(unused.requests().is_empty());
    let log =
        std::fs::read_to_string(kin.home.path().join(format!("sessions/{session}.jsonl"))).unwrap();
    assert!(log.contains(r#""model":"new-model""#), "{log}");
}

#[tokio::test]
async fn replay_mode_advertises_no_auth_and_needs_no_key() {
    let mut kin = Wire::start(Some(&snapshot_dir("text-turn")));
    let (_, init) = kin
        .request(0, "initialize", json!({"protocolVersion": 1}))
        .await;
    assert_eq!(init["result"]["authMethods"], json!([]));
    let session = kin.new_session().await;
    let (_, answer) = kin.prompt(2, &session, "hi").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn a_scenario_recorded_against_the_model_replays_as_recorded() {
    let server = MockServer::start();
    server.set_default(Reply::Stream(
        [
            vec![common::mock_openai::event(&common::mock_openai::chunk(
                json!({"role": "assistant", "content": null, "reasoning_content": "A short word."}),
                None,
            ))],
            text_events(&["PO", "NG"], "stop"),
        ]
        .concat(),
    ));
    let scenario = tempfile::tempdir().unwrap();
    std::fs::copy(
        snapshot_dir("text-turn").join("input.json"),
        scenario.path().join("input.json"),
    )
    .unwrap();
    let config_home = tempfile::tempdir().unwrap();
    let input = read_input(scenario.path());
    let env = vec![
        ("KIN_BASE_URL".to_owned(), server.base_url()),
        ("KIN_API_KEY".to_owned(), "sk-recording-0001".to_owned()),
        ("KIN_MODEL".to_owned(), "mock-model".to_owned()),
        (
            "XDG_CONFIG_HOME".to_owned(),
            config_home.path().to_string_lossy().into_owned(),
        ),
    ];
    let recorded = play_with(ModelSource::Live(env), &input).await;
    write_expectations(scenario.path(), &recorded);
    assert_eq!(server.requests().len(), 1);

    let log = std::fs::read_to_string(scenario.path().join("session.jsonl")).unwrap();
    assert!(log.contains(r#""text":"PONG""#), "{log}");
    assert!(log.contains(r#""provider":"openai-compatible","model":"mock-model""#));
    let stdout = std::fs::read_to_string(scenario.path().join("stdout.expected.jsonl")).unwrap();
    assert!(stdout.contains(r#""stopReason":"end_turn""#));

    // Replaying the recording (no server, no key) gives the same output and log.
    drop(server);
    let replayed = play(scenario.path(), &input).await;
    let failures = compare_with_recording("recorded text-turn", scenario.path(), &replayed);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

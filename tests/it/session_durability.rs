//! Session logs through the real `kin acp`: what the client was shown survives kill -9, and a
//! log with a damaged line in the middle still loads.

use crate::common;

use common::mock_openai::{hang_after, MockServer};
use common::Wire;
use kin::session::{parse_log, Chunk, EventBody, UserPart};
use serde_json::{json, Value};

fn update_kind(message: &Value) -> Option<&str> {
    message
        .pointer("/params/update/sessionUpdate")
        .and_then(Value::as_str)
}

#[tokio::test]
async fn kill_9_mid_step_loses_nothing_the_client_saw() {
    let server = MockServer::start();
    // The model streams two pieces, then nothing more until the client hangs up.
    server.push(hang_after(&["Hello", " wor"]));
    let env = [
        ("KIN_BASE_URL", server.base_url()),
        ("KIN_MODEL", "mock-model".to_owned()),
        ("KIN_API_KEY", "sk-durable-000001".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut kin = Wire::start_with(None, tempfile::tempdir().unwrap(), &env);
    let session = kin.open_session().await;
    kin.send_prompt(2, &session, "Say hello").await;

    // Wait until the client has been shown the last piece the model sent.
    let mut shown = Vec::new();
    loop {
        let message = kin.read().await.expect("kin is running");
        assert!(message.get("id").is_none(), "unexpected answer: {message}");
        let last = message.pointer("/params/update/content/text") == Some(&json!(" wor"));
        shown.push(message);
        if last {
            break;
        }
    }
    kin.child.start_kill().unwrap();
    kin.child.wait().await.unwrap();

    let path = kin.home.path().join(format!("sessions/{session}.jsonl"));
    let loaded = parse_log(&path, &std::fs::read(&path).unwrap()).unwrap();
    let prompt = loaded.events.iter().find_map(|event| match &event.body {
        EventBody::UserMessage(message) => Some(message.content.clone()),
        _ => None,
    });
    assert_eq!(
        prompt,
        Some(vec![UserPart::Text {
            text: "Say hello".into()
        }])
    );
    let deltas: Vec<&str> = loaded
        .events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::AssistantChunk(c) => match &c.chunk {
                Chunk::TextDelta { text, .. } if !text.is_empty() => Some(text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let title = loaded.events.iter().find_map(|event| match &event.body {
        EventBody::SessionTitle(title) => Some(title.title.clone()),
        _ => None,
    });
    for update in &shown {
        match update_kind(update) {
            Some("agent_message_chunk") => {
                let text = update["params"]["update"]["content"]["text"].as_str();
                assert!(
                    deltas.iter().any(|d| Some(*d) == text),
                    "{update} is not in the log: {deltas:?}"
                );
            }
            Some("session_info_update") => {
                assert_eq!(
                    update["params"]["update"]["title"].as_str(),
                    title.as_deref()
                );
            }
            _ => {}
        }
    }
    assert_eq!(deltas, ["Hello", " wor"]);
}

#[tokio::test]
async fn session_load_keeps_every_good_line_around_a_corrupt_one() {
    let mut kin = Wire::start_with(None, tempfile::tempdir().unwrap(), &[]);
    let id = "3b0f7a52-5b1e-4d8e-9a41-2c6f4f1b9e07";
    let cwd = kin.cwd();
    let header = json!({"type": "session", "version": 0, "id": id, "createdAt": 1_767_225_600_000u64,
        "cwd": cwd, "delegationDepth": 0});
    let user = |seq: u64, turn: u32, text: &str| {
        json!({"type": "user/message", "seq": seq, "time": 0, "data": {
            "content": [{"type": "text", "text": text}], "source": {"kind": "user"},
            "role": "user", "id": format!("u{turn}")}, "surfaceOp": "append"})
    };
    let turn = |seq: u64, turn: u32, kind: &str| {
        json!({"type": kind, "seq": seq, "time": 0, "data": {"turn": turn, "reason": {"kind": "completed"},
            "trigger": {"kind": "message", "source": {"kind": "user"}}}})
    };
    let lines = [
        header.to_string(),
        turn(0, 1, "turn/start").to_string(),
        user(1, 1, "first question").to_string(),
        // A user message cut short by a full disk, with the next event glued on.
        format!(
            "{{\"type\":\"turn/end\",\"seq\":2,\"time\":0,\"data\":{{\"tu{}",
            turn(3, 2, "turn/start")
        ),
        user(4, 2, "second question").to_string(),
        turn(5, 2, "turn/end").to_string(),
    ];
    let sessions = kin.home.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::write(
        sessions.join(format!("{id}.jsonl")),
        lines.join("\n") + "\n",
    )
    .unwrap();

    kin.initialize().await;
    let (updates, answer) = kin.load(2, id).await;
    assert!(answer.get("result").is_some(), "{answer}");
    let prompts: Vec<&str> = updates
        .iter()
        .filter(|u| update_kind(u) == Some("user_message_chunk"))
        .filter_map(|u| u.pointer("/params/update/content/text")?.as_str())
        .collect();
    assert_eq!(prompts, ["first question", "second question"]);
    let side = sessions.join(format!("{id}.jsonl.set-aside"));
    assert_eq!(
        std::fs::read_to_string(side).unwrap(),
        format!("{}\n", lines[3])
    );
    let (_, answer) = kin.request(3, "session/list", json!({})).await;
    assert_eq!(answer["result"]["sessions"][0]["sessionId"], id, "{answer}");
}

/// A tree budget holds after a restart when the endpoint reports no usage: the estimates
/// the first process counted are in the logs, and the reopened session's tree is refused.
#[tokio::test]
async fn a_tree_budget_spent_on_estimates_holds_after_a_restart() {
    use common::Script;
    let delegate = || {
        (
            "delegate",
            "subagent",
            json!({"description": "Read a lot", "prompt": "Read big.txt three times."}),
        )
    };
    let parent = Script::new()
        .calls(&[delegate()])
        .text("PARENT_DONE")
        .calls(&[delegate()])
        .text("SECOND_DONE");
    let read = |id| (id, "read", json!({"path": "big.txt"}));
    // Each read brings 50 KiB into the child's next request (about 12,800 tokens estimated).
    let child = Script::new()
        .calls(&[read("r1")])
        .calls(&[read("r2")])
        .calls(&[read("r3")])
        .text("child done");
    let replay = parent.dir();
    std::fs::copy(
        child.dir().path().join("session.jsonl"),
        replay.path().join("session.1.jsonl"),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config/kin");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[delegation]\nbudget_tokens = 20000\n",
    )
    .unwrap();

    let mut first = Wire::start_in(Some(replay.path()), home);
    let line = format!("{}\n", "x".repeat(49));
    std::fs::write(first.cwd.path().join("big.txt"), line.repeat(1000)).unwrap();
    let session = first.open_session().await;
    first.turn(2, &session, "Go.").await;
    let home = first.stop().await;

    let mut second = Wire::start_in(Some(replay.path()), home);
    second.initialize().await;
    let (_, loaded) = second.load(1, &session).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    second.turn(2, &session, "Again.").await;
    let log = std::fs::read_to_string(second.home.path().join(format!("sessions/{session}.jsonl")))
        .unwrap();
    assert!(log.contains("estimatedTokens"), "the estimates are logged");
    assert!(
        log.contains("the delegation budget_tokens of 20000 is spent"),
        "the second delegation is refused: {log}"
    );
}

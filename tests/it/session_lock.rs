//! One writer per session across processes: two real `kin acp` processes on one store. The
//! one that has a session open holds its lock; the other may replay it read-only, but its
//! prompts, resumes, mode changes and deletes are refused naming the writer, and it never
//! cuts what the writer is writing. A writer killed with -9 leaves no lock behind.

use crate::common;

use common::mock_openai::{text_events, text_reply, MockServer, Reply};
use common::{chunk_text, AcpSchema, Wire};
use serde_json::{json, Value};
use std::collections::HashMap;

/// kin's error code for a session another process has open for writing.
const SESSION_LOCKED: i64 = -32001;

/// Two `kin acp` processes on the mock model sharing one `KIN_HOME` (the first one's).
fn two_kins(server: &MockServer) -> (Wire, Wire) {
    let url = server.base_url();
    let env = [
        ("KIN_BASE_URL", url.as_str()),
        ("KIN_MODEL", "mock-model"),
        ("KIN_API_KEY", "sk-lock-test-0001"),
    ];
    let first = Wire::start_with(None, tempfile::tempdir().unwrap(), &env);
    let home = first.home.path().to_string_lossy().into_owned();
    let mut shared = env.to_vec();
    shared.push(("KIN_HOME", home.as_str()));
    let second = Wire::start_with(None, tempfile::tempdir().unwrap(), &shared);
    (first, second)
}

fn log_path(kin: &Wire, session: &str) -> std::path::PathBuf {
    kin.home.path().join(format!("sessions/{session}.jsonl"))
}

/// Sends a prompt whose model answer streams "Hello", " wor" and then hangs, and waits until
/// the client was shown " wor" (so those events are in the log).
async fn start_hanging_turn(server: &MockServer, kin: &mut Wire, id: i64, session: &str) {
    let mut parts = text_events(&["Hello", " wor"], "stop");
    parts.truncate(3);
    server.push(Reply::Hang(parts));
    kin.send_prompt(id, session, "Say hello").await;
    loop {
        let message = kin.read().await.expect("kin is running");
        assert!(message.get("id").is_none(), "unexpected answer: {message}");
        if message.pointer("/params/update/content/text") == Some(&json!(" wor")) {
            return;
        }
    }
}

fn assert_locked_by(answer: &Value, writer: u32, session: &str) {
    assert_eq!(answer["error"]["code"], SESSION_LOCKED, "{answer}");
    assert_eq!(answer["error"]["data"]["pid"], writer, "{answer}");
    assert_eq!(answer["error"]["data"]["sessionId"], session, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!("session {session} is open for writing in another kin process (pid {writer}); only one process may write a session at a time")
    );
}

/// The seqs of a log's events, in file order.
fn seqs(text: &str) -> Vec<u64> {
    text.lines()
        .skip(1)
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|event| event["seq"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_second_process_replays_a_session_being_written_and_never_cuts_its_tail() {
    let server = MockServer::start();
    let (mut writer, mut reader) = two_kins(&server);
    let writer_pid = writer.child.id().unwrap();
    writer.initialize().await;
    reader.initialize().await;
    let session = writer.new_session().await;
    start_hanging_turn(&server, &mut writer, 2, &session).await;

    // The writer is in the middle of writing a line, as it is whenever it appends.
    let path = log_path(&writer, &session);
    let complete = std::fs::read_to_string(&path).unwrap();
    let in_progress = r#"{"type":"assistant/chunk","seq":99,"time":0,"da"#;
    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(in_progress.as_bytes()).unwrap();
    }
    let before = std::fs::read_to_string(&path).unwrap();

    let cwd = reader.cwd();
    let (replayed, answer) = reader.load(3, &session).await;
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        before,
        "the log was not touched"
    );
    assert!(!path.with_extension("jsonl.torn").exists());
    assert_eq!(
        answer["result"]["_meta"]["kin.readOnly"]["writerPid"], writer_pid,
        "{answer}"
    );
    assert_eq!(answer["result"]["modes"]["currentModeId"], "ask");
    let mut schema = AcpSchema::load();
    let methods = HashMap::from([("3".to_owned(), "session/load".to_owned())]);
    for message in replayed.iter().chain([&answer]) {
        schema.check_agent_message(message, &methods).unwrap();
    }
    // (A step still streaming is not replayed: only its prompt is.)
    assert_eq!(chunk_text(&replayed, "user_message_chunk"), "Say hello");

    // Read-only here: everything that would write is refused, naming the writer.
    let (_, answer) = reader.prompt(4, &session, "me too").await;
    assert_locked_by(&answer, writer_pid, &session);
    schema.check_agent_message(&answer, &methods).unwrap();
    let (_, answer) = reader
        .request(
            5,
            "session/set_mode",
            json!({"sessionId": session, "modeId": "allow"}),
        )
        .await;
    assert_locked_by(&answer, writer_pid, &session);
    let (_, answer) = reader
        .request(
            6,
            "session/resume",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_locked_by(&answer, writer_pid, &session);
    let (_, answer) = reader.request(7, "session/list", json!({})).await;
    assert_eq!(answer["result"]["sessions"][0]["sessionId"], session);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);

    // The writer dies mid-line: its lock goes with it, and the next writer recovers the log
    // as after any crash (the torn line cut off and kept beside it).
    writer.child.start_kill().unwrap();
    writer.child.wait().await.unwrap();
    let (replayed, answer) = reader.load(8, &session).await;
    assert!(answer["result"].get("_meta").is_none(), "{answer}");
    assert_eq!(chunk_text(&replayed, "user_message_chunk"), "Say hello");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), complete);
    assert_eq!(
        std::fs::read_to_string(path.with_extension("jsonl.torn")).unwrap(),
        in_progress
    );
}

#[tokio::test]
async fn two_processes_prompting_one_session_leave_one_writer_and_no_duplicate_seq() {
    let server = MockServer::start();
    server.set_default(text_reply(&["fine"]));
    let (mut first, mut second) = two_kins(&server);
    let first_pid = first.child.id().unwrap();
    first.initialize().await;
    second.initialize().await;
    let session = first.new_session().await;
    first.turn(2, &session, "one").await;

    let (_, answer) = second.load(2, &session).await;
    let read_only = answer["result"]["_meta"]["kin.readOnly"].clone();

    // Both at once.
    first.send_prompt(3, &session, "two").await;
    second.send_prompt(3, &session, "also two").await;
    let (_, refused) = second.answer(&json!(3)).await;
    let (_, answered) = first.answer(&json!(3)).await;
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");

    let text = std::fs::read_to_string(log_path(&first, &session)).unwrap();
    let seqs = seqs(&text);
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "{text}");
    assert!(!text.contains("also two"), "{text}");
    assert_locked_by(&refused, first_pid, &session);
    assert_eq!(read_only["writerPid"], first_pid);
}

#[tokio::test]
async fn deleting_a_session_another_process_is_writing_is_refused_and_loses_nothing() {
    let server = MockServer::start();
    let (mut writer, mut other) = two_kins(&server);
    let writer_pid = writer.child.id().unwrap();
    writer.initialize().await;
    other.initialize().await;
    let session = writer.new_session().await;
    start_hanging_turn(&server, &mut writer, 2, &session).await;

    let (_, refused) = other
        .request(2, "session/delete", json!({"sessionId": session}))
        .await;
    let path = log_path(&writer, &session);
    assert!(path.exists());
    assert_locked_by(&refused, writer_pid, &session);

    // The turn goes on writing to the same file, to its end.
    writer
        .send(&json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}))
        .await;
    let (_, answer) = writer.answer(&json!(2)).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(r#""type":"turn/end""#), "{text}");
    assert!(text.contains(r#""text":" wor""#), "{text}");
    let (_, answer) = other.request(3, "session/list", json!({})).await;
    assert_eq!(answer["result"]["sessions"][0]["sessionId"], session);

    // Closed there, it can be deleted here.
    let (_, answer) = writer
        .request(3, "session/close", json!({"sessionId": session}))
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
    let (_, answer) = other
        .request(4, "session/delete", json!({"sessionId": session}))
        .await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(!path.exists());
}

#[tokio::test]
async fn kin_run_refuses_a_session_another_process_has_open() {
    let server = MockServer::start();
    server.set_default(text_reply(&["fine"]));
    let (mut writer, _) = two_kins(&server);
    let writer_pid = writer.child.id().unwrap();
    let session = writer.open_session().await;
    let path = log_path(&writer, &session);
    let before = std::fs::read_to_string(&path).unwrap();

    let mut command = std::process::Command::new(common::kin_binary());
    for name in common::MODEL_ENV {
        command.env_remove(name);
    }
    let output = command
        .args(["run", "--session", &session, "hello"])
        .env("KIN_HOME", writer.home.path())
        .env("XDG_CONFIG_HOME", writer.home.path().join("config"))
        .env("KIN_BASE_URL", server.base_url())
        .env("KIN_API_KEY", "sk-lock-test-0001")
        .current_dir(writer.cwd.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "session {session} is open for writing in another kin process (pid {writer_pid})"
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
}

//! Rich prompts through the real binary: images, embedded resources and linked files as the
//! model receives them (the mock's request body), `update_plan` as plan updates live and on
//! load, user slash commands, notices, and a lenient `initialize`. Every message kin writes is
//! checked against `protocol/schemas/acp.json`, every log line against the event schemas.
//! Linked files outside the roots or swapped under kin are in `links`.

mod links;

use crate::common;

use std::collections::HashMap;

use common::mock_openai::{text_reply, MockServer};
use common::{AcpSchema, EventSchemas, Script, Wire};
use serde_json::{json, Value};

/// A kin on the mock model; `config` is written as its config file when given.
fn live(server: &MockServer, config: Option<&str>) -> Wire {
    Wire::on_mock(
        server,
        common::home_with(config.unwrap_or_default()),
        "sk-rich-000001",
    )
}

/// Checks what kin wrote against the ACP schema, remembering which id was which method.
struct Checked {
    schema: AcpSchema,
    methods: HashMap<String, String>,
}

impl Checked {
    fn new() -> Self {
        Self {
            schema: AcpSchema::load(),
            methods: HashMap::new(),
        }
    }

    async fn request(
        &mut self,
        kin: &mut Wire,
        id: i64,
        method: &str,
        params: Value,
    ) -> (Vec<Value>, Value) {
        self.methods.insert(id.to_string(), method.to_owned());
        let (updates, answer) = kin.request(id, method, params).await;
        for message in updates.iter().chain([&answer]) {
            self.schema
                .check_agent_message(message, &self.methods)
                .unwrap_or_else(|e| panic!("{e}: {message}"));
        }
        (updates, answer)
    }

    /// A `session/prompt` whose permission requests get the option of kind `choose`; returns
    /// the updates, the permission requests, and the answer.
    async fn prompt_answering(
        &mut self,
        kin: &mut Wire,
        id: i64,
        params: Value,
        choose: &str,
    ) -> (Vec<Value>, Vec<Value>, Value) {
        self.methods.insert(id.to_string(), "session/prompt".into());
        kin.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": params}),
        )
        .await;
        let (mut updates, mut asked) = (Vec::new(), Vec::new());
        loop {
            let message = kin.read().await.expect("kin answers the prompt");
            self.schema
                .check_agent_message(&message, &self.methods)
                .unwrap_or_else(|e| panic!("{e}: {message}"));
            if message["method"] == "session/request_permission" {
                let options = message["params"]["options"].as_array().unwrap();
                let option = options.iter().find(|o| o["kind"] == choose).unwrap();
                kin.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result":
                    {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}}))
                    .await;
                asked.push(message);
            } else if message["id"] == id {
                return (updates, asked, message);
            } else {
                updates.push(message);
            }
        }
    }

    /// `initialize` (with `session.notices`) and `session/new`; returns the session id and
    /// the updates that came with the new session.
    async fn open(&mut self, kin: &mut Wire) -> (String, Vec<Value>) {
        let init =
            json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}});
        self.request(kin, 0, "initialize", init).await;
        let cwd = kin.cwd();
        let (_, answer) = self
            .request(kin, 1, "session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let id = answer["result"]["sessionId"].as_str().unwrap().to_owned();
        // The commands update follows the answer; the next answer collects it.
        let (updates, _) = self
            .request(kin, 2, "session/list", json!({"cwd": kin.cwd()}))
            .await;
        (id, updates)
    }
}

fn kinds(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|u| {
            u.pointer("/params/update/sessionUpdate")
                .and_then(Value::as_str)
        })
        .map(str::to_owned)
        .collect()
}

fn log_text(kin: &Wire, session: &str) -> String {
    let path = kin.home.path().join(format!("sessions/{session}.jsonl"));
    let text = std::fs::read_to_string(path).unwrap();
    EventSchemas::load().check_log(&text).unwrap();
    text
}

/// The user message of the model request: its `content`.
fn user_content(server: &MockServer, request: usize) -> Value {
    let body = &server.requests()[request].body;
    let messages = body["messages"].as_array().unwrap();
    let content = &messages.iter().rev().find(|m| m["role"] == "user").unwrap()["content"];
    without_preamble(content)
}

/// A first user message's `content` without the workspace preamble kin puts before it (a text
/// of its own, or the head of the text).
pub(crate) fn without_preamble(content: &Value) -> Value {
    const END: &str = "</workspace>";
    match content {
        Value::String(text) if text.starts_with("<workspace>") => {
            let rest = text.split_once(END).map_or("", |(_, rest)| rest);
            Value::String(rest.trim_start_matches('\n').to_owned())
        }
        Value::Array(parts) => {
            let is_preamble = |part: &Value| {
                part["type"] == "text"
                    && part["text"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("<workspace>"))
            };
            let kept = parts.iter().filter(|part| !is_preamble(part)).cloned();
            Value::Array(kept.collect())
        }
        other => other.clone(),
    }
}

/// A kin on a model that takes images (answering "a cat"), with a session open.
async fn open_with_images() -> (MockServer, Wire, Checked, String) {
    let server = MockServer::start();
    server.push(text_reply(&["a cat"]));
    let mut kin = live(&server, Some("images = true\n"));
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    (server, kin, wire, session)
}

/// A prompt asking about the PNG image `data`.
fn image_prompt(session: &str, data: &str) -> Value {
    json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "mimeType": "image/png", "data": data},
    ]})
}

#[tokio::test]
async fn an_image_reaches_a_model_that_takes_images_and_stays_out_of_the_log() {
    let (server, mut kin, mut wire, session) = open_with_images().await;
    let data = "iVBORw0KGgo".repeat(1000);
    let prompt = image_prompt(&session, &data);
    let (updates, answer) = wire.request(&mut kin, 3, "session/prompt", prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!kinds(&updates).contains(&"notice".to_owned()));
    let content = user_content(&server, 0);
    assert_eq!(content[0], json!({"type": "text", "text": "What is this?"}));
    assert_eq!(content[1]["type"], "image_url");
    assert_eq!(
        content[1]["image_url"]["url"],
        format!("data:image/png;base64,{data}")
    );
    let log = log_text(&kin, &session);
    assert!(!log.contains(&data), "the image is not in the log");
    let blobs = kin.home.path().join(format!("sessions/{session}.blobs"));
    assert_eq!(std::fs::read_dir(&blobs).unwrap().count(), 1);

    // session/load gives the image back to the client.
    wire.request(&mut kin, 4, "session/close", json!({"sessionId": session}))
        .await;
    let load = json!({"sessionId": session, "cwd": kin.cwd(), "mcpServers": []});
    let (replayed, _) = wire.request(&mut kin, 5, "session/load", load).await;
    let image = replayed
        .iter()
        .find(|u| u.pointer("/params/update/content/type") == Some(&json!("image")))
        .expect("the image is replayed");
    assert_eq!(image["params"]["update"]["content"]["data"], data);
}

/// A line of megabytes: what the model and the log get is exactly what the prompt held, on
/// its first request and on the next one (which keeps the first's body).
#[tokio::test]
async fn megabyte_images_and_long_texts_reach_the_model_exactly() {
    let (server, mut kin, mut wire, session) = open_with_images().await;
    server.push(text_reply(&["still a cat"]));
    let image = "iVBORw0KGgo".repeat(200_000);
    let embedded = "R0lGODlh".repeat(20_000);
    let long_text = "word ".repeat(20_000);
    let file_text = "x=1; ".repeat(20_000);
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": long_text},
        {"type": "image", "mimeType": "image/png", "data": image},
        {"type": "resource", "resource":
            {"uri": "file:///w/a.gif", "mimeType": "image/gif", "blob": embedded}},
        {"type": "resource", "resource": {"uri": "file:///w/a.js", "text": file_text}},
    ]});
    let (_, answer) = wire.request(&mut kin, 3, "session/prompt", prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let follow = json!({"sessionId": session, "prompt": [{"type": "text", "text": "And now?"}]});
    let (_, answer) = wire.request(&mut kin, 4, "session/prompt", follow).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    for request in 0..2 {
        let body = &server.requests()[request].body;
        let first_user = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "user")
            .unwrap();
        let content = without_preamble(&first_user["content"]);
        assert_eq!(content[0], json!({"type": "text", "text": long_text}));
        assert_eq!(
            content[1]["image_url"]["url"],
            format!("data:image/png;base64,{image}")
        );
        assert_eq!(
            content[2]["image_url"]["url"],
            format!("data:image/gif;base64,{embedded}")
        );
        let attached = content[3]["text"].as_str().unwrap();
        assert!(
            attached.contains(&format!("\n{file_text}\n")),
            "request {request}"
        );
    }
    let log = log_text(&kin, &session);
    assert!(!log.contains(&image) && !log.contains(&embedded));
    let blobs = kin.home.path().join(format!("sessions/{session}.blobs"));
    let mut stored: Vec<String> = std::fs::read_dir(&blobs)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    stored.sort();
    let mut expected = vec![image, embedded, file_text];
    expected.sort();
    assert!(stored == expected, "each payload is stored whole");
}

/// A payload is stored before the line that names it is logged: one that cannot be stored
/// refuses the prompt with an error naming the cause, nothing is logged or sent to the model,
/// and the session takes the next prompt.
#[tokio::test]
async fn an_image_that_cannot_be_stored_refuses_the_prompt_and_the_session_goes_on() {
    let (server, mut kin, mut wire, session) = open_with_images().await;
    // A blob directory nothing can be created in, root or not.
    let blobs = kin.home.path().join(format!("sessions/{session}.blobs"));
    std::os::unix::fs::symlink("/proc/self/fdinfo", &blobs).unwrap();
    let prompt = image_prompt(&session, &"iVBORw0KGgo".repeat(1000));
    let (_, answer) = wire.request(&mut kin, 3, "session/prompt", prompt).await;
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("could not store a prompt attachment"),
        "{message}"
    );
    assert!(server.requests().is_empty(), "the model was not called");
    assert!(!log_text(&kin, &session).contains("user/message"));
    std::fs::remove_file(&blobs).unwrap();
    let text = json!({"sessionId": session, "prompt": [{"type": "text", "text": "Hello?"}]});
    let (_, answer) = wire.request(&mut kin, 4, "session/prompt", text).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
}

#[tokio::test]
async fn an_image_for_a_model_without_images_is_a_placeholder_and_a_notice() {
    let server = MockServer::start();
    server.push(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "Look"},
        {"type": "image", "mimeType": "image/png", "data": "aGk="},
    ]});
    let (updates, answer) = wire.request(&mut kin, 3, "session/prompt", prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notice = updates
        .iter()
        .find(|u| u.pointer("/params/update/sessionUpdate") == Some(&json!("notice")))
        .expect("a notice about the image");
    assert_eq!(notice["params"]["update"]["severity"], "warning");
    let content = user_content(&server, 0);
    let text = content.as_str().expect("text only");
    assert!(text.starts_with("Look\n\n[an image (image/png"), "{text}");
    assert!(text.contains("this model does not take images"), "{text}");
}

#[tokio::test]
async fn embedded_and_linked_files_are_attached_inside_the_roots_and_outside_only_if_allowed() {
    let server = MockServer::start();
    server.push(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let inside = kin.cwd.path().join("notes.md");
    std::fs::write(&inside, "the notes say hello").unwrap();
    let outside_dir = tempfile::tempdir().unwrap();
    let outside = outside_dir.path().join("secret.md");
    std::fs::write(&outside, "outside secret").unwrap();
    let uri = |p: &std::path::Path| format!("file://{}", p.display());
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "Read these"},
        {"type": "resource", "resource": {"uri": "file:///virtual/spec.txt", "text": "embedded spec text", "mimeType": "text/plain"}},
        {"type": "resource_link", "uri": uri(&inside), "name": "notes.md"},
        {"type": "resource_link", "uri": uri(&outside), "name": "secret.md"},
    ]});
    let (updates, asked, answer) = wire
        .prompt_answering(&mut kin, 3, prompt, "reject_once")
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The outside file is asked about once, before the model call, and left out.
    assert_eq!(asked.len(), 1, "{asked:?}");
    let title = asked[0]["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(
        title.contains("secret.md") && title.contains("outside"),
        "{title}"
    );
    let notices: Vec<_> = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "notice")
        .map(|u| u["params"]["update"].to_string())
        .collect();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("secret.md") && n.contains("not attached")),
        "{notices:?}"
    );
    let content = user_content(&server, 0);
    let text = content.as_str().unwrap();
    assert!(text.contains(
        "<attached-file uri=\"file:///virtual/spec.txt\">\nembedded spec text\n</attached-file>"
    ));
    assert!(text.contains(&format!("[notes.md]({})", uri(&inside))));
    assert!(text.contains(&format!(
        "<attached-file uri=\"{}\">\nthe notes say hello\n</attached-file>",
        uri(&inside)
    )));
    assert!(text.contains(&format!("[secret.md]({})", uri(&outside))));
    assert!(!text.contains("outside secret"), "{text}");
    log_text(&kin, &session);
}

#[tokio::test]
async fn update_plan_sends_plan_updates_live_and_on_load() {
    let entries = json!({"entries": [
        {"content": "Read the code", "priority": "high", "status": "in_progress"},
        {"content": "Fix the bug", "priority": "medium", "status": "pending"},
    ]});
    let script = Script::new()
        .calls(&[("call_plan", "update_plan", entries)])
        .result("call_plan", "Plan updated: 2 entries, 0 completed.")
        .text("Planned.")
        .dir();
    let mut kin = Wire::start(Some(script.path()));
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "Fix it"}]});
    let (updates, answer) = wire.request(&mut kin, 3, "session/prompt", prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let live: Vec<&Value> = updates
        .iter()
        .filter(|u| u.pointer("/params/update/sessionUpdate") == Some(&json!("plan")))
        .collect();
    assert_eq!(live.len(), 1, "{updates:?}");
    let plan = &live[0]["params"]["update"]["entries"];
    assert_eq!(plan[0]["content"], "Read the code");
    assert_eq!(plan[0]["status"], "in_progress");
    assert_eq!(plan[1]["priority"], "medium");
    assert!(!kinds(&updates).contains(&"tool_call".to_owned()));

    wire.request(&mut kin, 4, "session/close", json!({"sessionId": session}))
        .await;
    let load = json!({"sessionId": session, "cwd": kin.cwd(), "mcpServers": []});
    let (replayed, _) = wire.request(&mut kin, 5, "session/load", load).await;
    let again: Vec<&Value> = replayed
        .iter()
        .filter(|u| u.pointer("/params/update/sessionUpdate") == Some(&json!("plan")))
        .collect();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["params"]["update"], live[0]["params"]["update"]);
}

#[tokio::test]
async fn user_commands_expand_their_arguments_and_are_announced() {
    let server = MockServer::start();
    server.push(text_reply(&["one"]));
    server.push(text_reply(&["two"]));
    server.push(text_reply(&["three"]));
    let mut kin = live(&server, None);
    let kin_dir = kin.cwd.path().join(".kin/commands");
    let claude_dir = kin.cwd.path().join(".claude/commands");
    std::fs::create_dir_all(&kin_dir).unwrap();
    std::fs::create_dir_all(&claude_dir).unwrap();
    std::fs::write(
        kin_dir.join("review.md"),
        "---\ndescription: Review a file\nargument-hint: <path>\n---\nReview $ARGUMENTS for bugs.\n",
    )
    .unwrap();
    std::fs::write(claude_dir.join("explain.md"), "Explain $ARGUMENTS simply.").unwrap();
    let mut wire = Checked::new();
    let (session, opened) = wire.open(&mut kin).await;
    let announced = opened
        .iter()
        .find(|u| {
            u.pointer("/params/update/sessionUpdate") == Some(&json!("available_commands_update"))
        })
        .expect("the commands are announced");
    let names: Vec<&str> = announced["params"]["update"]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["agents", "mode", "model", "compact", "explain", "review"]
    );

    let prompt =
        |text: &str| json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
    wire.request(&mut kin, 3, "session/prompt", prompt("/review src/main.rs"))
        .await;
    assert_eq!(
        user_content(&server, 0),
        "/review src/main.rs\n\nReview src/main.rs for bugs."
    );
    wire.request(&mut kin, 4, "session/prompt", prompt("/explain lifetimes"))
        .await;
    assert_eq!(
        user_content(&server, 1),
        "/explain lifetimes\n\nExplain lifetimes simply."
    );
    // An unknown command goes to the model as written.
    wire.request(&mut kin, 5, "session/prompt", prompt("/nosuch thing"))
        .await;
    assert_eq!(user_content(&server, 2), "/nosuch thing");
    let log = log_text(&kin, &session);
    assert!(log.contains("Review src/main.rs for bugs."));
}

#[tokio::test]
async fn builtin_commands_answer_without_the_model() {
    let server = MockServer::start();
    let mut kin = live(&server, None);
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let prompt =
        |text: &str| json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
    let (updates, answer) = wire
        .request(&mut kin, 3, "session/prompt", prompt("/agents"))
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn");
    assert_eq!(
        updates.last().unwrap()["params"]["update"]["content"]["text"],
        "This session has no subagents."
    );
    let (updates, _) = wire
        .request(&mut kin, 4, "session/prompt", prompt("/mode read-only"))
        .await;
    assert!(kinds(&updates).contains(&"current_mode_update".to_owned()));
    let (_, answer) = wire
        .request(&mut kin, 5, "session/prompt", prompt("/mode nonsense"))
        .await;
    assert_eq!(answer["error"]["code"], -32602);
    assert!(server.requests().is_empty(), "the model was not called");
}

#[tokio::test]
async fn initialize_reads_a_numeric_string_version() {
    let mut kin = Wire::start(None);
    let mut wire = Checked::new();
    let (_, answer) = wire
        .request(&mut kin, 0, "initialize", json!({"protocolVersion": "1"}))
        .await;
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    let caps = &answer["result"]["agentCapabilities"]["promptCapabilities"];
    assert_eq!(caps["image"], true);
    assert_eq!(caps["embeddedContext"], true);
    assert_eq!(caps["audio"], false);
}

#[tokio::test]
async fn compaction_is_counted_when_unreported_and_a_runaway_summary_fails_it() {
    use common::mock_openai::{text_events, Reply};
    // A streamed answer without the endpoint's usage figures.
    let unreported = |pieces: &[&str]| {
        let mut events = text_events(pieces, "stop");
        events.remove(events.len() - 2);
        Reply::Stream(events)
    };
    let server = MockServer::start();
    server.push(text_reply(&["first answer"]));
    let piece = "y".repeat(64 * 1024);
    server.push(unreported(&[&piece, &piece, &piece, &piece, &piece]));
    server.push(unreported(&["SHORT SUMMARY"]));
    let mut kin = live(&server, None);
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let prompt =
        |text: &str| json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
    wire.request(&mut kin, 3, "session/prompt", prompt("hello"))
        .await;
    let (updates, _) = wire
        .request(&mut kin, 4, "session/prompt", prompt("/compact"))
        .await;
    let said = updates.last().unwrap()["params"]["update"]["content"]["text"].to_string();
    assert!(said.contains("summary passed"), "{said}");
    wire.request(&mut kin, 5, "session/prompt", prompt("/compact"))
        .await;
    let ends: Vec<Value> = log_text(&kin, &session)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["type"] == "compaction/end")
        .collect();
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert!(ends[0]["data"]["summary"].is_null(), "{}", ends[0]);
    assert_eq!(ends[1]["data"]["summary"], "SHORT SUMMARY");
    for end in &ends {
        let estimated = end["data"]["estimatedTokens"].as_u64().unwrap_or(0);
        assert!(estimated > 0, "an unreported call is estimated: {end}");
    }
}

#[tokio::test]
async fn a_blob_swapped_for_a_symlink_is_not_followed_when_the_session_is_loaded() {
    let server = MockServer::start();
    server.push(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let long = "BLOB-TEXT ".repeat(1000);
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "Read"},
        {"type": "resource", "resource": {"uri": "file:///virtual/long.txt", "text": long}},
    ]});
    wire.request(&mut kin, 3, "session/prompt", prompt).await;
    kin.close_stdin();
    kin.child.wait().await.unwrap();
    // Another process of the user swaps the stored blob for a symlink leading elsewhere.
    let blobs = kin.home.path().join(format!("sessions/{session}.blobs"));
    let blob = std::fs::read_dir(&blobs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "OUTSIDE-BLOB-SECRET").unwrap();
    std::fs::remove_file(&blob).unwrap();
    std::os::unix::fs::symlink(&secret, &blob).unwrap();
    let home = std::mem::replace(&mut kin.home, tempfile::tempdir().unwrap());
    let env = [
        ("KIN_BASE_URL", server.base_url()),
        ("KIN_MODEL", "mock-model".to_owned()),
        ("KIN_API_KEY", "sk-rich-000001".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut again = Wire::start_with(None, home, &env);
    again.initialize().await;
    let (updates, answer) = again.load(1, &session).await;
    assert!(answer.get("result").is_some(), "{answer}");
    let shown: String = updates.iter().map(Value::to_string).collect();
    assert!(!shown.contains("OUTSIDE-BLOB-SECRET"), "{shown}");
}

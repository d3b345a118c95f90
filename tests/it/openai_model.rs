//! The OpenAI-compatible model against a real HTTP server on 127.0.0.1 (the scripted mock):
//! streaming, reasoning, tool calls split into 1-byte fragments, usage, retries, cut and
//! stalled streams, cancellation, malformed streams and a large response.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::mock_openai::{
    chunk, done, error_reply, event, hang_after, text_events, text_reply, tool_calls_reply, usage,
    MockServer, Reply, ServerEvent,
};
use futures::StreamExt;
use kin::agent::StopReason;
use kin::model::openai::{ApiKey, KeyState, OpenAiModel, OpenAiSettings};
use kin::model::{Credentials, Model, ModelError, ModelRequest, ToolSpec};
use kin::runtime::Runtime;
use kin::session::history::HistoryItem;
use kin::session::{AssistantBlock, BlockType, Chunk, Event, EventBody, FinishKind, UserPart};
use kin::tools::ToolRegistry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// A guard against a hung test, not a timing assertion.
const GUARD: Duration = Duration::from_secs(30);

fn settings(server: &MockServer) -> OpenAiSettings {
    let mut settings = OpenAiSettings::new(server.base_url(), "mock-model");
    settings.retry_base = Duration::from_millis(1);
    settings
}

fn key() -> KeyState {
    KeyState::Present(ApiKey::new("sk-test-secret-0001", "KIN_API_KEY"))
}

fn model_with(settings: OpenAiSettings) -> OpenAiModel {
    OpenAiModel::new(settings, key()).unwrap()
}

fn model(server: &MockServer) -> OpenAiModel {
    model_with(settings(server))
}

fn request(text: &str) -> ModelRequest {
    ModelRequest {
        session_id: "s".into(),
        cwd: None,
        system: "You are a test.".into(),
        preamble: String::new(),
        history: vec![HistoryItem::User(vec![UserPart::Text {
            text: text.into(),
        }])]
        .into(),
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Reads a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}})
                .into(),
        }],
        max_tokens: None,
        blobs: None,
    }
}

/// Every chunk of one call, and the error that ended it, if any.
async fn collect(model: &OpenAiModel, request: ModelRequest) -> (Vec<Chunk>, Option<ModelError>) {
    let mut stream = model.stream(request);
    let mut chunks = Vec::new();
    loop {
        match tokio::time::timeout(GUARD, stream.next()).await {
            Err(_) => panic!("the model stream hung"),
            Ok(None) => return (chunks, None),
            Ok(Some(Ok(chunk))) => chunks.push(chunk),
            Ok(Some(Err(error))) => {
                assert!(
                    tokio::time::timeout(GUARD, stream.next())
                        .await
                        .unwrap()
                        .is_none(),
                    "nothing after an error"
                );
                return (chunks, Some(error));
            }
        }
    }
}

fn blocks(chunks: &[Chunk]) -> Vec<AssistantBlock> {
    chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::BlockEnd { block, .. } => Some(block.clone()),
            _ => None,
        })
        .collect()
}

fn finishes(chunks: &[Chunk]) -> Vec<FinishKind> {
    chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::Finish { reason } => Some(reason.kind),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn plain_text_streams_in_order_with_usage_and_one_finish() {
    let server = MockServer::start();
    server.push(text_reply(&["Hel", "lo", " there"]));
    let (chunks, error) = collect(&model(&server), request("hi")).await;
    assert_eq!(error, None);
    let texts: Vec<&str> = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::TextDelta { index: 0, text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["Hel", "lo", " there"]);
    assert_eq!(
        chunks[0],
        Chunk::BlockStart {
            index: 0,
            block_type: BlockType::Text
        }
    );
    assert_eq!(
        blocks(&chunks),
        vec![AssistantBlock::Text {
            text: "Hello there".into()
        }]
    );
    let usage_at = chunks
        .iter()
        .position(|c| matches!(c, Chunk::Usage { usage } if usage.input_tokens == 10 && usage.output_tokens == 3))
        .expect("a usage chunk");
    assert_eq!(
        usage_at,
        chunks.len() - 2,
        "usage comes right before finish"
    );
    assert_eq!(finishes(&chunks), [FinishKind::Stop]);

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer sk-test-secret-0001")
    );
    assert_eq!(sent.body["model"], "mock-model");
    assert_eq!(sent.body["stream"], true);
    assert_eq!(sent.body["stream_options"]["include_usage"], true);
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "system", "content": "You are a test."}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(sent.body["tools"][0]["function"]["name"], "read_file");
}

#[tokio::test]
async fn reasoning_content_becomes_a_reasoning_block_before_the_text() {
    let server = MockServer::start();
    server.push(Reply::Stream(vec![
        event(&chunk(
            json!({"role": "assistant", "content": null, "reasoning_content": ""}),
            None,
        )),
        event(&chunk(
            json!({"content": null, "reasoning_content": "Let me "}),
            None,
        )),
        event(&chunk(
            json!({"content": null, "reasoning_content": "think."}),
            None,
        )),
        event(&chunk(
            json!({"content": "Done.", "reasoning_content": null}),
            None,
        )),
        event(&chunk(json!({}), Some("stop"))),
        event(
            &json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9,
            "prompt_cache_hit_tokens": 4, "completion_tokens_details": {"reasoning_tokens": 6}}}),
        ),
        done(),
    ]));
    let (chunks, error) = collect(&model(&server), request("think")).await;
    assert_eq!(error, None);
    assert_eq!(
        chunks[..2],
        [
            Chunk::BlockStart {
                index: 0,
                block_type: BlockType::Reasoning
            },
            Chunk::ReasoningDelta {
                index: 0,
                text: "Let me ".into()
            }
        ]
    );
    assert_eq!(
        blocks(&chunks),
        vec![
            AssistantBlock::Reasoning {
                text: "Let me think.".into()
            },
            AssistantBlock::Text {
                text: "Done.".into()
            }
        ]
    );
    assert!(chunks.iter().any(|c| matches!(c, Chunk::Usage { usage }
        if usage.cache_read_tokens == Some(4) && usage.reasoning_tokens == Some(6))));
}

#[tokio::test]
async fn one_tool_call_in_one_byte_fragments_is_reassembled() {
    let server = MockServer::start();
    let arguments = r#"{"path":"src/main.rs"}"#;
    server.push(tool_calls_reply(&[("call_1", "read_file", arguments)]));
    let (chunks, error) = collect(&model(&server), request("read")).await;
    assert_eq!(error, None);
    let deltas = chunks
        .iter()
        .filter(|c| matches!(c, Chunk::ToolCallDelta { .. }))
        .count();
    assert!(deltas > arguments.len(), "one delta per byte: {deltas}");
    assert_eq!(
        blocks(&chunks),
        vec![AssistantBlock::ToolCall {
            id: "call_1".into(),
            name: "read_file".into(),
            arguments: arguments.into()
        }]
    );
    assert_eq!(finishes(&chunks), [FinishKind::ToolCalls]);
}

#[tokio::test]
async fn several_interleaved_tool_calls_are_told_apart_by_index() {
    let server = MockServer::start();
    let calls = [
        ("call_a", "read_file", r#"{"path":"a.txt"}"#),
        ("call_b", "read_file", r#"{"path":"b/longer-name.txt"}"#),
        ("call_c", "list", "{}"),
    ];
    server.push(tool_calls_reply(&calls));
    let (chunks, error) = collect(&model(&server), request("read three")).await;
    assert_eq!(error, None);
    let expected: Vec<AssistantBlock> = calls
        .iter()
        .map(|(id, name, arguments)| AssistantBlock::ToolCall {
            id: (*id).into(),
            name: (*name).into(),
            arguments: (*arguments).into(),
        })
        .collect();
    assert_eq!(blocks(&chunks), expected);
    // Every delta of a call carries its id; the name comes with the first.
    for (index, (id, name, _)) in calls.iter().enumerate() {
        let deltas: Vec<_> = chunks
            .iter()
            .filter_map(|c| match c {
                Chunk::ToolCallDelta {
                    index: i, id, name, ..
                } if *i as usize == index => Some((id.clone(), name.clone())),
                _ => None,
            })
            .collect();
        assert!(deltas.iter().all(|(got, _)| got == id));
        assert_eq!(deltas[0].1.as_deref(), Some(*name));
        assert!(deltas[1..].iter().all(|(_, n)| n.is_none()));
    }
}

#[tokio::test]
async fn rate_limit_is_retried_after_the_servers_wait() {
    let server = MockServer::start();
    server.push(Reply::Status {
        status: 429,
        headers: vec![("retry-after".into(), "0".into())],
        body: r#"{"error":{"message":"Rate limit reached"}}"#.into(),
    });
    server.push(text_reply(&["ok"]));
    let (chunks, error) = collect(&model(&server), request("hi")).await;
    assert_eq!(error, None);
    assert_eq!(
        blocks(&chunks),
        vec![AssistantBlock::Text { text: "ok".into() }]
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_until_the_retries_run_out() {
    let server = MockServer::start();
    server.set_default(error_reply(500, "the upstream is down"));
    let mut settings = settings(&server);
    settings.retries = 2;
    let (chunks, error) = collect(&model_with(settings), request("hi")).await;
    assert!(chunks.is_empty());
    let error = error.expect("an error");
    assert_eq!(
        error,
        ModelError::Http {
            status: 500,
            body: "the upstream is down".into(),
            attempts: 3,
            code: Some("mock_error".into()),
        }
    );
    assert_eq!(
        error.to_string(),
        "model endpoint answered HTTP 500 (gave up after 3 attempts): the upstream is down"
    );
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn a_rejected_key_names_its_source_and_is_not_retried() {
    let server = MockServer::start();
    server.set_default(error_reply(401, "Authentication Fails"));
    let (_, error) = collect(&model(&server), request("hi")).await;
    let message = error.expect("an error").to_string();
    assert_eq!(
        message,
        "model endpoint rejected the API key from KIN_API_KEY (HTTP 401)"
    );
    assert!(!message.contains("sk-test-secret"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn other_client_errors_are_reported_at_once() {
    let server = MockServer::start();
    server.set_default(error_reply(400, "Model Not Exist"));
    let (_, error) = collect(&model(&server), request("hi")).await;
    assert_eq!(
        error.expect("an error").to_string(),
        "model endpoint answered HTTP 400: Model Not Exist"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_connect_error_after_retries() {
    // A port nobody listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut settings = OpenAiSettings::new(format!("http://127.0.0.1:{port}/v1"), "m");
    settings.retry_base = Duration::from_millis(1);
    settings.retries = 1;
    let (_, error) = collect(&model_with(settings), request("hi")).await;
    let error = error.expect("an error");
    assert!(
        matches!(&error, ModelError::Connect { attempts: 2, url, .. } if url.ends_with("/v1/chat/completions")),
        "{error:?}"
    );
    assert!(error
        .to_string()
        .starts_with("could not reach the model endpoint"));
}

#[tokio::test]
async fn a_stream_cut_after_output_began_is_an_error_and_not_repeated() {
    let server = MockServer::start();
    let mut parts = text_events(&["Half ", "an ", "answ"], "stop");
    parts.truncate(4); // role delta + three text deltas; no finish, no [DONE]
    server.push(Reply::Cut(parts));
    server.set_default(text_reply(&["must not be requested"]));
    let (chunks, error) = collect(&model(&server), request("hi")).await;
    let texts: String = chunks
        .iter()
        .filter_map(|c| match c {
            Chunk::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, "Half an answ");
    let error = error.expect("an error");
    assert!(matches!(error, ModelError::Cut(_)), "{error:?}");
    assert!(error
        .to_string()
        .starts_with("model stream was cut after output began"));
    assert!(finishes(&chunks).is_empty());
    assert_eq!(server.requests().len(), 1, "no second attempt");
}

#[tokio::test]
async fn a_stream_cut_before_any_output_is_retried() {
    let server = MockServer::start();
    let mut parts = text_events(&["x"], "stop");
    parts.truncate(1); // only the role delta
    server.push(Reply::Cut(parts));
    server.push(text_reply(&["second try"]));
    let (chunks, error) = collect(&model(&server), request("hi")).await;
    assert_eq!(error, None);
    assert_eq!(
        blocks(&chunks),
        vec![AssistantBlock::Text {
            text: "second try".into()
        }]
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_stalled_stream_fails_after_the_stall_timeout_and_hangs_up() {
    let server = MockServer::start();
    server.push(hang_after(&["waiting"]));
    let mut settings = settings(&server);
    settings.stall_timeout = Duration::from_millis(200);
    // (Whether the first delta arrived before the stall does not matter to the outcome.)
    let (chunks, error) = collect(&model_with(settings), request("hi")).await;
    assert!(finishes(&chunks).is_empty());
    assert_eq!(
        error.expect("an error").to_string(),
        "model stream stalled: no data for 200 ms"
    );
    let closed = tokio::time::timeout(GUARD, server.next_event())
        .await
        .unwrap();
    assert_eq!(closed, ServerEvent::ClientClosed { request: 0 });
}

#[tokio::test]
async fn cancelling_a_turn_closes_the_connection() {
    let server = MockServer::start();
    server.push(hang_after(&["streaming"]));
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let model: Arc<dyn Model> = Arc::new(model(&server));
    let runtime =
        Runtime::new(home.path(), model, ToolRegistry::new(), Default::default()).unwrap();
    let agent = runtime
        .host()
        .create_session(cwd.path().to_owned(), Vec::new(), 0)
        .unwrap();
    let deps = runtime.host().turn_deps(&agent);
    let cancel = CancellationToken::new();
    let on_text = cancel.clone();
    let observe = move |event: &Event| {
        if let EventBody::AssistantChunk(c) = &event.body {
            if matches!(c.chunk, Chunk::TextDelta { .. }) {
                on_text.cancel();
            }
        }
    };
    let prompt = vec![UserPart::Text { text: "go".into() }];
    let outcome = tokio::time::timeout(GUARD, agent.run_turn(prompt, &deps, &observe, cancel))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, StopReason::Cancelled);
    let closed = tokio::time::timeout(GUARD, server.next_event())
        .await
        .unwrap();
    assert_eq!(closed, ServerEvent::ClientClosed { request: 0 });
}

#[tokio::test]
async fn malformed_event_streams_are_clear_errors() {
    let server = MockServer::start();
    let mut bad_utf8 = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"".to_vec();
    bad_utf8.extend_from_slice(b"\xff\xfe\"}}]}\n\n");
    let cases = [
        (vec![bad_utf8], "not valid UTF-8"),
        (vec![b"data: {not json\n\n".to_vec()], "not valid JSON"),
        (
            vec![b"data: {\"choices\": \"none\"}\n\n".to_vec()],
            "not valid JSON",
        ),
    ];
    for (parts, expected) in cases {
        server.push(Reply::Stream(parts));
        let (_, error) = collect(&model(&server), request("hi")).await;
        let error = error.expect("an error");
        assert!(matches!(error, ModelError::Malformed(_)), "{error:?}");
        let message = error.to_string();
        assert!(
            message.starts_with("model stream is malformed") && message.contains(expected),
            "{message}"
        );
    }
}

#[tokio::test]
async fn an_error_object_inside_the_stream_is_reported() {
    let server = MockServer::start();
    server.push(Reply::Stream(vec![event(
        &json!({"error": {"message": "Service overloaded", "type": "server_error"}}),
    )]));
    let (_, error) = collect(&model(&server), request("hi")).await;
    assert_eq!(
        error.expect("an error").to_string(),
        "model request failed: the endpoint reported an error: Service overloaded"
    );
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_a_clear_error() {
    let server = MockServer::start();
    server.push(Reply::Status {
        status: 200,
        headers: Vec::new(),
        body: r#"{"choices":[{"message":{"content":"hi"}}]}"#.into(),
    });
    let (_, error) = collect(&model(&server), request("hi")).await;
    let message = error.expect("an error").to_string();
    assert!(message.contains("instead of an event stream"), "{message}");
    assert!(
        message.contains("200") && message.contains("\"application/json\""),
        "{message}"
    );
    assert!(message.contains(r#"{"choices""#), "{message}");
}

/// A 200 that is a web page (a wrong base URL, a captive portal) says what arrived: status,
/// content type and the first bytes, controls escaped and cut.
#[tokio::test]
async fn a_non_stream_answer_says_what_arrived() {
    let server = MockServer::start();
    let page = format!("<html>\u{1b}[31mLogin\r\n{}</html>", "x".repeat(5000));
    server.push(Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "text/html; charset=utf-8".into())],
        body: page,
    });
    let (_, error) = collect(&model(&server), request("hi")).await;
    let message = error.expect("an error").to_string();
    assert!(
        message.contains("200") && message.contains("text/html; charset=utf-8"),
        "{message}"
    );
    assert!(
        message.contains("<html>\\u{1b}[31mLogin\\r\\n"),
        "{message}"
    );
    assert!(message.len() < 600, "{}", message.len());
    assert!(!message.contains('\u{1b}'));
}

#[tokio::test]
async fn a_two_megabyte_response_arrives_whole() {
    let server = MockServer::start();
    let piece = "0123456789abcdef".repeat(64); // 1 KiB
    let big = "x".repeat(512 * 1024);
    let mut pieces: Vec<&str> = vec![piece.as_str(); 1536];
    pieces.push(&big);
    let expected: String = pieces.concat();
    assert!(expected.len() >= 2 * 1024 * 1024);
    server.push(text_reply(&pieces));
    let (chunks, error) = collect(&model(&server), request("a lot")).await;
    assert_eq!(error, None);
    assert_eq!(
        blocks(&chunks),
        vec![AssistantBlock::Text { text: expected }]
    );
    assert_eq!(finishes(&chunks), [FinishKind::Stop]);
}

#[tokio::test]
async fn usage_alone_with_finish_reason_length_maps_to_max_tokens() {
    let server = MockServer::start();
    server.push(Reply::Stream(vec![
        event(&chunk(json!({"content": "trunc"}), Some("length"))),
        event(&usage(3, 4096)),
    ]));
    let (chunks, error) = collect(&model(&server), request("long")).await;
    assert_eq!(
        error, None,
        "a body ending without [DONE] after the finish reason is fine"
    );
    assert_eq!(finishes(&chunks), [FinishKind::MaxTokens]);
    assert!(chunks
        .iter()
        .any(|c| matches!(c, Chunk::Usage { usage } if usage.output_tokens == 4096)));
}

#[tokio::test]
async fn without_a_key_nothing_is_sent_and_a_reload_can_find_one() {
    let server = MockServer::start();
    server.set_default(text_reply(&["ok"]));
    let found = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loader_found = found.clone();
    let model = OpenAiModel::new(
        settings(&server),
        KeyState::Missing {
            hint: "set KIN_API_KEY".into(),
        },
    )
    .unwrap()
    .with_key_loader(Arc::new(move || {
        let state = if loader_found.load(std::sync::atomic::Ordering::SeqCst) {
            KeyState::Present(ApiKey::new("sk-late-key-000000", "KIN_API_KEY"))
        } else {
            KeyState::Missing {
                hint: "set KIN_API_KEY".into(),
            }
        };
        Box::pin(std::future::ready(state))
    }));
    let (_, error) = collect(&model, request("hi")).await;
    assert_eq!(
        error,
        Some(ModelError::MissingKey {
            hint: "set KIN_API_KEY".into()
        })
    );
    assert!(server.requests().is_empty());
    assert!(matches!(
        model.reload_credentials().await,
        Credentials::Missing { .. }
    ));
    found.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        model.reload_credentials().await,
        Credentials::Present {
            source: "KIN_API_KEY".into()
        }
    );
    let (_, error) = collect(&model, request("hi")).await;
    assert_eq!(error, None);
    assert_eq!(
        server.requests()[0].header("authorization"),
        Some("Bearer sk-late-key-000000")
    );
}

//! Local models that keep working, through the real binary on an in-process server that
//! behaves like llama.cpp's on the wire (`LlamaLike`): its 400 `exceed_context_size_error`,
//! llama-cpp-python's empty 200, strict role alternation, streams without usage, headers only
//! with the first token. One test (or more) per fault found with a real local server.
//!
//! `KIN_TEST_LLAMA_URL` (e.g. `http://127.0.0.1:18700/v1`) also runs
//! `a_real_llama_server_keeps_working` against a real llama-server (see docs/local-models.md),
//! in `real_server`.

mod real_server;
mod requests;
mod small_windows;
mod window_sweep;

use crate::common;

use std::process::{Command, Output};
use std::time::Duration;

use common::mock_openai::{
    error_reply, text_events, text_reply, tool_calls_reply, LlamaLike, MockServer, Reply,
    ServerEvent,
};
use common::{answer_text, kin_binary, Wire};
use serde_json::{json, Value};

const KEY: &str = "sk-local-models-01";

fn start(server: &MockServer, config: &str, extra: &[(&str, &str)]) -> Wire {
    let base_url = server.base_url();
    let mut env = vec![
        ("KIN_BASE_URL", base_url.as_str()),
        ("KIN_MODEL", "local-model"),
        ("KIN_API_KEY", KEY),
    ];
    env.extend_from_slice(extra);
    Wire::start_with(None, common::home_with(config), &env)
}

/// Initialized as a client that takes compaction updates, with a new session.
async fn ready(kin: &mut Wire) -> String {
    kin.initialize_with_compaction().await;
    kin.new_session().await
}

/// The first `usage_update` among kin's messages.
fn usage_update(messages: &[Value]) -> Option<&Value> {
    messages
        .iter()
        .filter_map(|m| m.pointer("/params/update"))
        .find(|u| u["sessionUpdate"] == "usage_update")
}

fn of_type<'a>(log: &'a [Value], kind: &str) -> Vec<&'a Value> {
    log.iter().filter(|e| e["type"] == kind).collect()
}

/// The text of every user message of a request, in order.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect()
}

fn is_compaction(body: &Value) -> bool {
    body.to_string().contains("is being compacted")
}

/// `kin run ARGS` on `server` in fresh dirs, with `env` added.
fn run(server: &MockServer, args: &[&str], env: &[(&str, &str)]) -> (Output, tempfile::TempDir) {
    let cwd = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(kin_binary());
    command.arg("run").args(args);
    for name in [
        "KIN_MODEL",
        "KIN_API_KEY",
        "DEEPSEEK_API_KEY",
        "OPENAI_API_KEY",
        "RUST_LOG",
    ] {
        command.env_remove(name);
    }
    command
        .env("KIN_HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("KIN_BASE_URL", server.base_url())
        .env("KIN_API_KEY", KEY)
        .envs(env.iter().copied())
        .current_dir(cwd.path());
    (command.output().unwrap(), cwd)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A prompt the imitation counts as about `tokens` tokens.
fn prompt_of(tokens: u64) -> String {
    "abc ".repeat(tokens as usize)
}

/// An answer the imitation counts as `tokens` tokens, its usage saying as much (one delta,
/// so that long answers stay quick to stream and log).
fn answer_of(tokens: u64) -> Reply {
    let mut parts = text_events(&[&"abcd".repeat(tokens.max(1) as usize)], "stop");
    let at = parts.len() - 2;
    parts[at] = common::mock_openai::event(&common::mock_openai::usage(10, tokens.max(1)));
    Reply::Stream(parts)
}

/// An answer `bytes` long, with usage (llama-server's streams carry it).
fn long_answer(bytes: usize) -> Reply {
    text_reply(&[&"word ".repeat(bytes / 5)])
}

// ---- Overflow is recognised ---------------------------------------------------------------

/// llama-server's 400 `exceed_context_size_error` makes kin compact and call again; a
/// conversation longer than one compaction request is summarised in pieces that each fit.
#[tokio::test]
async fn llama_servers_overflow_is_compacted_away_in_pieces() {
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(1_000_000);
    llama.props = false; // nothing tells kin the window before the refusal does
    server.behave_like(llama.clone());
    // Whole requests: the lean one would fit this window without compacting.
    let mut kin = start(&server, "[tools]\nlean = \"off\"\n", &[]);
    let session = ready(&mut kin).await;
    server.push(long_answer(16_000));
    kin.turn(2, &session, "one").await;
    let base = LlamaLike::tokens(&server.requests()[0].body);
    server.push(long_answer(16_000));
    let (_, answer) = kin.prompt(3, &session, "two").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // The third request does not fit the window: refused, as llama-server refuses it.
    llama.n_ctx = base + 7_000;
    server.behave_like(llama.clone());
    server.push(text_reply(&["first part summarised"]));
    server.push(text_reply(&["all summarised"]));
    server.push(text_reply(&["third answer"]));
    let (updates, answer) = kin.prompt(4, &session, &"three ".repeat(400)).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(answer_text(&updates), "third answer");
    let requests = server.requests();
    let refused = &requests[2].body;
    assert!(
        LlamaLike::tokens(refused) > llama.n_ctx,
        "the third request was refused"
    );
    let compactions: Vec<&Value> = requests
        .iter()
        .map(|r| &r.body)
        .filter(|b| is_compaction(b))
        .collect();
    assert_eq!(compactions.len(), 2, "two pieces");
    for body in &compactions {
        assert!(LlamaLike::tokens(body) <= llama.n_ctx, "each piece fits");
    }
    assert!(
        compactions[1].to_string().contains("first part summarised"),
        "the second piece carries the first one's summary"
    );
    let log = kin.log(&session);
    let start = of_type(&log, "compaction/start");
    assert_eq!(start[0]["data"]["trigger"], "overflow");
    let end = of_type(&log, "compaction/end");
    assert_eq!(end[0]["data"]["summary"], "all summarised");
}

/// llama-cpp-python answers a streamed request over its window with 200 and no body: kin
/// says so, with the likely cause, does not retry it, and the next prompt works.
#[tokio::test]
async fn llama_cpp_pythons_empty_answer_is_named_with_its_likely_cause() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_cpp_python(6_000));
    let mut kin = start(&server, "context_window = 6000\n", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["fine"]));
    kin.prompt(2, &session, "hello").await;
    let base = LlamaLike::tokens(&server.requests()[0].body);
    assert!(base < 5_000, "the tools and system prompt fit: {base}");
    // A prompt that takes the request just over the window.
    let long = "x".repeat(((6_100 - base) * 4) as usize);
    let (_, answer) = kin.prompt(3, &session, &long).await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("empty body"), "{answer}");
    assert!(message.contains("over-long prompt"), "{message}");
    assert_eq!(server.request_count(), 2, "an empty answer is not retried");
    server.push(text_reply(&["still here"]));
    let updates = kin.turn(4, &session, "short").await;
    assert_eq!(answer_text(&updates), "still here");
    let last = &server.requests()[2].body;
    assert!(
        !last.to_string().contains(&long),
        "the refused prompt is not sent again"
    );
}

/// Ollama's, vLLM's and LM Studio's 400 answers to an over-long request are overflows too:
/// kin compacts and calls again rather than failing the turn.
#[tokio::test]
async fn ollama_vllm_and_lm_studio_overflow_answers_are_compacted_away() {
    let wordings = [
        "prompt too long; exceeded max context length by 12 tokens",
        "The prompt (total length 25938) is too long to fit into the model (context length \
         4096). Make sure that `max_model_len` is no smaller than the number of text tokens \
         plus multimodal tokens.",
        "The decoder prompt (length 5951) is longer than the maximum model length of 4096. \
         Make sure that `max_model_len` is no smaller than the number of text tokens.",
        "Trying to keep the first 5000 tokens when context the overflows. However, the model \
         is loaded with context length of only 4096 tokens, which is not enough. Try to load \
         the model with a larger context length, or provide a shorter input",
    ];
    for wording in wordings {
        let server = MockServer::start();
        // The whole request each time: a window learned from the refusal would otherwise try
        // the lean request first (`small_windows` covers that).
        let mut kin = start(&server, "[tools]\nlean = \"off\"\n", &[]);
        let session = ready(&mut kin).await;
        server.push(text_reply(&["first answer"]));
        // Some history to summarise (about 2,500 tokens, one compaction request): kin reads
        // the refusals' figures, and a compaction of a few words would not be worth it.
        kin.turn(2, &session, &format!("one {}", "abcd ".repeat(2_000)))
            .await;
        server.push(error_reply(400, wording));
        // However many pieces the refusal's figures make of it.
        server.answer_compactions_with(text_reply(&["summarised"]));
        server.push(text_reply(&["second answer"]));
        let (updates, answer) = kin.prompt(3, &session, "two").await;
        assert_eq!(
            answer["result"]["stopReason"], "end_turn",
            "{wording}: {answer}"
        );
        assert_eq!(answer_text(&updates), "second answer", "{wording}");
        let log = kin.log(&session);
        let start = of_type(&log, "compaction/start");
        assert_eq!(start.len(), 1, "{wording}");
        assert_eq!(start[0]["data"]["trigger"], "overflow", "{wording}");
    }
}

// ---- Estimates count what is sent ---------------------------------------------------------

/// With no usage from the endpoint, `used` counts the tool schemas too, and the turn's usage
/// carries the estimate (`estimatedTokens`) rather than 0.
#[tokio::test]
async fn without_usage_the_estimate_counts_the_tool_schemas() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_cpp_python(1_000_000));
    let mut kin = start(&server, "context_window = 32768\n", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["hi"]));
    let (updates, _) = kin.prompt(2, &session, "hi").await;
    let counted = LlamaLike::tokens(&server.requests()[0].body);
    let used = usage_update(&updates)
        .map(|u| u["used"].as_u64().unwrap())
        .expect("a usage_update");
    assert!(
        counted > 2_000,
        "the tools alone are thousands of tokens: {counted}"
    );
    assert!(
        used * 10 >= counted * 7 && used <= counted * 2,
        "used {used} is near the {counted} the server counts"
    );
    let log = kin.log(&session);
    let usage = &of_type(&log, "turn/end")[0]["data"]["usage"];
    let estimated = usage["estimatedTokens"].as_u64().unwrap_or(0);
    assert!(
        estimated * 10 >= counted * 7 && estimated <= counted * 2,
        "the estimate {estimated} is near the {counted} the server counts: {usage}"
    );
    assert_eq!(usage["inputTokens"], 0, "nothing was reported: {usage}");
}

/// `kin run` says the figures are estimates, never `0 in, 0 out`.
#[test]
fn kin_run_says_estimates_rather_than_zero() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_cpp_python(1_000_000));
    server.push(text_reply(&["4"]));
    let (out, _) = run(&server, &["What is 2+2?"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let told = stderr(&out);
    assert!(
        told.contains("estimated: the endpoint reported no usage"),
        "{told}"
    );
    assert!(!told.contains("tokens 0 in"), "{told}");
}

/// Without `context_window`, the window is llama-server's `n_ctx` (`GET /props`), asked once.
#[tokio::test]
async fn the_window_is_read_from_llama_servers_props() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(12_288));
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    for id in [2, 3] {
        server.push(text_reply(&["hi"]));
        let (updates, _) = kin.prompt(id, &session, "hi").await;
        let size = usage_update(&updates).map(|u| u["size"].clone());
        assert_eq!(size, Some(json!(12_288)));
    }
    let asked: Vec<String> = server.probes().iter().map(|p| p.path.clone()).collect();
    assert_eq!(asked, ["/props"], "asked once");
}

/// Ollama's window is its `num_ctx` (`POST /api/show`): it cuts longer prompts without an
/// error, so that is what kin must fit.
#[tokio::test]
async fn the_window_is_ollamas_num_ctx() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::ollama(16_384));
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["hi"]));
    let (updates, _) = kin.prompt(2, &session, "hi").await;
    let size = usage_update(&updates).map(|u| u["size"].clone());
    assert_eq!(size, Some(json!(16_384)));
    let probes = server.probes();
    let asked: Vec<&str> = probes.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(asked, ["/props", "/api/show"]);
    assert_eq!(probes[1].body["model"], "local-model");
}

// ---- Futile compaction --------------------------------------------------------------------

/// When the system prompt and tools alone pass the threshold, compacting cannot help: kin
/// does not try (no model call for it) and says once what takes the window and what to change.
#[tokio::test]
async fn a_window_the_fixed_part_fills_is_not_compacted_before_every_turn() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(1_000_000));
    let config = "context_window = 3500\n[tools]\nlean = \"off\"\n";
    let mut kin = start(&server, config, &[]);
    let session = ready(&mut kin).await;
    let mut notices = Vec::new();
    for (id, text) in [(2, "one"), (3, "two"), (4, "three")] {
        server.push(text_reply(&["answer"]));
        let updates = kin.turn(id, &session, text).await;
        notices.extend(updates.into_iter().filter(|u| {
            u.to_string()
                .contains("system prompt and tool definitions take")
        }));
    }
    assert_eq!(server.request_count(), 3, "no compaction calls");
    assert!(of_type(&kin.log(&session), "compaction/start").is_empty());
    assert_eq!(notices.len(), 1, "said once: {notices:?}");
    let told = notices[0].to_string();
    assert!(
        told.contains("of its 3500 tokens") && told.contains("-c 16384"),
        "{told}"
    );
}

// ---- Dead sessions ------------------------------------------------------------------------

/// A prompt the endpoint refuses for its length fails its turn with the figures, and is not
/// sent again: the next prompt works.
#[tokio::test]
async fn a_prompt_refused_for_its_length_does_not_poison_the_session() {
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(1_000_000);
    server.behave_like(llama.clone());
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["first"]));
    kin.prompt(2, &session, "first").await;
    let base = LlamaLike::tokens(&server.requests()[0].body);
    llama.n_ctx = base + 2_000;
    server.behave_like(llama.clone());
    let huge = "paste ".repeat(4_000);
    let (_, answer) = kin.prompt(3, &session, &huge).await;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("this prompt alone is about"), "{answer}");
    assert!(
        message.contains(&format!("{}-token", llama.n_ctx)),
        "{message}"
    );
    let log = kin.log(&session);
    let ends = of_type(&log, "turn/end");
    assert_eq!(
        ends[1]["data"]["reason"]["code"], "context_overflow",
        "{}",
        ends[1]
    );
    for id in 4..6 {
        server.push(text_reply(&["works again"]));
        let updates = kin.turn(id, &session, "short").await;
        assert_eq!(answer_text(&updates), "works again");
    }
    let last = server.requests().last().unwrap().body.clone();
    assert!(
        !last.to_string().contains("paste paste"),
        "the refused prompt stays out"
    );
}

// ---- Consecutive user messages ------------------------------------------------------------

/// Under a template that insists on alternation, every request after a cancelled turn (with
/// and without streamed text), a failed turn, an empty answer and a compaction is accepted.
#[tokio::test]
async fn requests_alternate_after_cancels_failures_empty_answers_and_compaction() {
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(1_000_000);
    llama.strict_alternation = true;
    server.behave_like(llama);
    let mut kin = start(&server, "", &[("KIN_RETRIES", "0")]);
    let session = ready(&mut kin).await;
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    // Cancelled after some streamed text, then before any.
    for (id, parts) in [(2, 2), (3, 0)] {
        let mut events = text_events(&["partial"], "stop");
        events.truncate(parts);
        server.push(Reply::Hang(events));
        kin.send_prompt(id, &session, "cancel me").await;
        if parts > 0 {
            // The streamed text has reached the client (and the log) before the cancel.
            loop {
                let update = kin.read().await.expect("kin streams");
                if update.to_string().contains("agent_message_chunk") {
                    break;
                }
            }
        } else {
            while server.request_count() < (id - 1) as usize {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        kin.send(&cancel).await;
        let ServerEvent::ClientClosed { .. } = server.next_event().await;
        let (_, answer) = kin.answer(&json!(id)).await;
        assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    }
    // A failed turn, then an empty answer.
    server.push(error_reply(404, "Model Not Exist"));
    let (_, answer) = kin.prompt(4, &session, "fails").await;
    assert!(answer["error"].is_object(), "{answer}");
    server.push(text_reply(&[]));
    kin.turn(5, &session, "empty").await;
    server.push(text_reply(&["answered"]));
    let (updates, answer) = kin.prompt(6, &session, "now").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(answer_text(&updates), "answered");
    // The streamed text of the cancelled turn stays, as an interrupted answer.
    let sent = server.requests().last().unwrap().body.clone();
    assert!(
        sent.to_string().contains("partial\\n\\n[interrupted]"),
        "{sent}"
    );
    // A compaction, then the next prompt: the summary and the prompt go as one user turn.
    server.push(text_reply(&["the summary"]));
    kin.turn(7, &session, "/compact").await;
    server.push(text_reply(&["after compaction"]));
    let updates = kin.turn(8, &session, "next").await;
    assert_eq!(answer_text(&updates), "after compaction");
    let users = user_texts(&server.requests().last().unwrap().body);
    assert_eq!(users.len(), 1, "{users:?}");
    assert!(
        users[0].contains("the summary") && users[0].contains("next"),
        "{users:?}"
    );
}

// ---- Slow prompt evaluation ---------------------------------------------------------------

/// llama-server sends its headers only with the first token: the wait for it is not a stall.
#[tokio::test]
async fn a_slow_first_token_is_waited_for_not_taken_for_a_stall() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(1_000_000));
    let mut kin = start(&server, "", &[("KIN_STALL_TIMEOUT", "300ms")]);
    let session = ready(&mut kin).await;
    server.push(Reply::Delayed(
        Duration::from_millis(1_500),
        Box::new(text_reply(&["took a while"])),
    ));
    let updates = kin.turn(2, &session, "go").await;
    assert_eq!(answer_text(&updates), "took a while");
    assert_eq!(server.request_count(), 1);
}

/// Past the first-token limit the request is tried once more, and the retry is logged.
#[test]
fn a_first_token_timeout_is_retried_once_with_the_reason_logged() {
    let server = MockServer::start();
    server.push(Reply::Delayed(
        Duration::from_secs(3),
        Box::new(text_reply(&["too late"])),
    ));
    server.push(text_reply(&["second try"]));
    let env = [
        ("KIN_FIRST_TOKEN_TIMEOUT", "400ms"),
        ("RUST_LOG", "kin=info"),
    ];
    let (out, _) = run(&server, &["go"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "second try\n");
    assert!(
        stderr(&out).contains("first-token limit; retrying once"),
        "{}",
        stderr(&out)
    );
    assert_eq!(server.request_count(), 2);
}

// ---- Smaller faults -----------------------------------------------------------------------

/// A summary cut at the output limit is not kept: kin asks once for a shorter one.
#[tokio::test]
async fn a_summary_cut_at_the_output_limit_is_not_kept() {
    let server = MockServer::start();
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    server.push(text_reply(&["an answer"]));
    kin.prompt(2, &session, "first").await;
    server.push(Reply::Stream(text_events(
        &["a summary that goes on and"],
        "length",
    )));
    server.push(text_reply(&["a short summary"]));
    kin.turn(3, &session, "/compact").await;
    let log = kin.log(&session);
    let end = of_type(&log, "compaction/end");
    assert_eq!(end[0]["data"]["summary"], "a short summary");
    let retry = &server.requests()[2].body;
    assert!(
        retry.to_string().contains("cut off at the output limit"),
        "{retry}"
    );
}

/// Retries in progress say which attempt comes; only the last failure says it gave up.
#[test]
fn retries_count_attempts_and_only_the_last_gives_up() {
    let server = MockServer::start();
    for _ in 0..3 {
        server.push(error_reply(503, "busy"));
    }
    let env = [("RUST_LOG", "kin=info"), ("KIN_RETRIES", "2")];
    let (out, _) = run(&server, &["go"], &env);
    let told = stderr(&out);
    assert!(told.contains("retrying (attempt 2 of 3)"), "{told}");
    assert!(told.contains("retrying (attempt 3 of 3)"), "{told}");
    assert_eq!(told.matches("gave up after").count(), 1, "{told}");
    assert!(told.contains("gave up after 3 attempts"), "{told}");
}

/// With no `max_output`, kin still caps each answer, and the stop names the cap and setting.
#[test]
fn an_unset_max_output_still_caps_and_the_stop_names_the_setting() {
    let server = MockServer::start();
    server.push(Reply::Stream(text_events(&["and on and on"], "length")));
    let (out, _) = run(&server, &["go"], &[("KIN_MODEL", "local-model")]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert_eq!(server.requests()[0].body["max_tokens"], 4096);
    let told = stderr(&out);
    assert!(
        told.contains("output cap of 4096 tokens (kin's default; `max_output`"),
        "{told}"
    );
}

/// An empty answer gets a notice on stderr.
#[test]
fn an_empty_answer_is_told() {
    let server = MockServer::start();
    server.push(text_reply(&[]));
    let (out, _) = run(&server, &["go"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the model returned an empty answer"),
        "{}",
        stderr(&out)
    );
}

/// An unknown tool's error names the tools and the closest one; raw newlines inside a JSON
/// string argument are taken as meant; failed calls are logged at `info`.
#[test]
fn a_small_models_slips_in_tool_calls_are_recoverable() {
    let server = MockServer::start();
    server.push(tool_calls_reply(&[(
        "call_1",
        "read_file",
        r#"{"path":"x"}"#,
    )]));
    let raw = "{\"path\":\"notes.txt\",\"content\":\"line one\nline two\"}";
    server.push(tool_calls_reply(&[("call_2", "write", raw)]));
    server.push(text_reply(&["done"]));
    let env = [("RUST_LOG", "kin=info")];
    let (out, cwd) = run(&server, &["--mode", "allow", "note it"], &env);
    assert!(out.status.success(), "{}", stderr(&out));
    let second = &server.requests()[1].body["messages"];
    let result = second.as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(result.contains("Did you mean `read`?"), "{result}");
    assert!(
        result.contains("The tools are: ") && result.contains("bash"),
        "{result}"
    );
    let written = std::fs::read_to_string(cwd.path().join("notes.txt")).unwrap();
    assert_eq!(written, "line one\nline two");
    assert!(
        stderr(&out).contains("tool call failed"),
        "{}",
        stderr(&out)
    );
}

/// `/agents` lists a child that ran in the foreground, under the description the model gave.
#[tokio::test]
async fn agents_lists_foreground_children() {
    let server = MockServer::start();
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    let args = json!({"description": "count the files", "prompt": "Count the files."});
    server.push(tool_calls_reply(&[(
        "call_1",
        "subagent",
        &args.to_string(),
    )]));
    server.push(text_reply(&["three files"]));
    server.push(text_reply(&["The child counted three."]));
    kin.turn(2, &session, "delegate").await;
    let (updates, _) = kin.prompt(3, &session, "/agents").await;
    let text = answer_text(&updates);
    assert!(
        text.contains("count the files (foreground, turn 1) — done"),
        "{text}"
    );
}

//! Small windows that keep working (issue 49): compaction whenever it helps, whatever the
//! threshold says; estimates that follow the server's count; tool results cut to the window;
//! a cancelled prompt kept apart from the next. Each case through the real binary, on the
//! llama.cpp imitation (`LlamaLike`).

use serde_json::{json, Value};

use super::{answer_of, is_compaction, of_type, prompt_of, ready, start};
use crate::common::answer_text;
use crate::common::mock_openai::{
    text_events, text_reply, tool_calls_reply, LlamaLike, MockServer, Reply, ServerEvent,
};

/// The largest request from `from` on, as the imitation counts it.
fn since(server: &MockServer, from: usize) -> u64 {
    let requests = server.requests();
    let new = &requests[from.min(requests.len())..];
    new.iter()
        .map(|r| LlamaLike::tokens(&r.body))
        .max()
        .unwrap_or(0)
}

/// The compactions in `session`'s log so far (one may take several requests: pieces).
fn compactions_in(kin: &crate::common::Wire, session: &str) -> usize {
    of_type(&kin.log(session), "compaction/start").len()
}

/// An 8,000-token window with `context_window` set: twenty turns of ~1,500 tokens each all
/// complete, every request inside the window, at most one compaction a turn and none on
/// most. (On 42ca44e the room check compared with the threshold, found no room and never
/// compacted again: every request past the third was over the window.)
#[tokio::test]
async fn twenty_long_turns_fit_an_8k_window() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(8_000));
    server.answer_compactions_with(answer_of(150));
    let mut kin = start(&server, "context_window = 8000\n", &[]);
    let session = ready(&mut kin).await;
    let (mut seen, mut compactions) = (0, 0);
    for id in 2..22 {
        server.push(answer_of(500));
        kin.turn(id, &session, &prompt_of(1_000)).await;
        let largest = since(&server, seen);
        seen = server.request_count();
        assert!(largest <= 8_000, "turn {id}: a request of {largest} tokens");
        let compacted = compactions_in(&kin, &session) - compactions;
        assert!(compacted <= 1, "turn {id}: {compacted} compactions");
        compactions += compacted;
    }
    assert!(
        (1..=10).contains(&compactions),
        "{compactions} compactions in 20 turns"
    );
}

/// A 4,096-token llama-server whose window nobody configured: the third long prompt is
/// refused and kin learns the window from the refusal. With the whole request each time
/// (`lean = off`) it compacts (the compacted request fits though it stays above the
/// threshold); by default the lean request it retries with fits without one. Either way the
/// turn completes, and later prompts too. (On 42ca44e the turn failed: "compaction cannot
/// make room".)
#[tokio::test]
async fn a_4k_server_without_a_configured_window_compacts_on_its_refusal() {
    for config in ["[tools]\nlean = \"off\"\n", ""] {
        refused_at_4k_then_fits(config).await;
    }
}

async fn refused_at_4k_then_fits(config: &str) {
    let lean = config.is_empty();
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(4_096);
    llama.props = false;
    server.behave_like(llama);
    server.answer_compactions_with(answer_of(30));
    let mut kin = start(&server, config, &[]);
    let session = ready(&mut kin).await;
    server.push(answer_of(2));
    kin.turn(2, &session, "hi").await;
    let fixed = LlamaLike::tokens(&server.requests()[0].body);
    assert!(fixed < 3_700, "the fixed part leaves room: {fixed}");
    let prompt = prompt_of((4_096 - fixed) / 3 + 20);
    for id in [3, 4] {
        server.push(answer_of(20));
        kin.turn(id, &session, &prompt).await;
    }
    let before = server.request_count();
    server.push(answer_of(20));
    let (updates, answer) = kin.prompt(5, &session, &prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.requests();
    let refused = &requests[before].body;
    assert!(LlamaLike::tokens(refused) > 4_096, "the third was refused");
    let retry = &requests[before + 1].body;
    if lean {
        let tools = |body: &Value| body["tools"].as_array().map_or(0, Vec::len);
        assert!(tools(retry) < tools(refused), "then sent lean: {retry}");
        assert!(LlamaLike::tokens(retry) <= 4_096);
        assert!(of_type(&kin.log(&session), "compaction/start").is_empty());
    } else {
        assert!(is_compaction(retry), "then compacted");
        assert!(LlamaLike::tokens(&requests[before + 2].body) <= 4_096);
        let log = kin.log(&session);
        assert_eq!(
            of_type(&log, "compaction/start")[0]["data"]["trigger"],
            "overflow"
        );
    }
    assert_eq!(answer_text(&updates), "abcd".repeat(20));
    for id in 6..9 {
        let (seen, before) = (server.request_count(), compactions_in(&kin, &session));
        server.push(answer_of(20));
        kin.turn(id, &session, &prompt).await;
        let largest = since(&server, seen);
        let compacted = compactions_in(&kin, &session) - before;
        assert!(largest <= 4_096, "turn {id}: {largest} tokens");
        assert!(compacted <= 1, "turn {id}: {compacted} compactions");
    }
}

/// A history grown on a 16k server that comes back with `-c 4096`: the next prompt is
/// refused, the history is summarised in pieces that fit, and the prompt is answered; the
/// session goes on. (On 42ca44e every later prompt failed: a dead session.)
#[tokio::test]
async fn a_history_grown_on_16k_survives_the_server_coming_back_at_4k() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(16_384));
    server.answer_compactions_with(answer_of(40));
    let mut kin = start(&server, "", &[]);
    let session = ready(&mut kin).await;
    for id in 2..7 {
        server.push(answer_of(200));
        kin.turn(id, &session, &prompt_of(1_500)).await;
    }
    assert!(
        of_type(&kin.log(&session), "compaction/start").is_empty(),
        "the history grew whole"
    );
    server.behave_like(LlamaLike::llama_server(4_096));
    let before = server.request_count();
    server.push(answer_of(20));
    let updates = kin.turn(7, &session, "go on").await;
    assert_eq!(answer_text(&updates), "abcd".repeat(20));
    let requests = server.requests();
    assert!(
        LlamaLike::tokens(&requests[before].body) > 4_096,
        "refused first"
    );
    let pieces = requests[before..]
        .iter()
        .filter(|r| is_compaction(&r.body))
        .count();
    assert!(pieces >= 2, "summarised in pieces: {pieces}");
    for request in &requests[before + 1..] {
        assert!(LlamaLike::tokens(&request.body) <= 4_096, "each fits");
    }
    for id in 8..11 {
        server.push(answer_of(20));
        kin.turn(id, &session, "and more").await;
    }
    let last = server.requests().last().unwrap().body.clone();
    assert!(LlamaLike::tokens(&last) <= 4_096);
}

/// A chat template that drops the tools: the server counts a small fixed part, and kin's
/// room decisions follow that count. Ten turns on a 4,096-token window complete, every
/// request inside it, without the "cannot make room" notice. (On 42ca44e kin estimated the
/// tools it never sent, warned at once, never compacted, and its turns overflowed.)
#[tokio::test]
async fn a_template_that_drops_the_tools_gets_room_by_the_servers_count() {
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(4_096);
    llama.drops_tools = true;
    server.behave_like(llama.clone());
    server.answer_compactions_with(answer_of(60));
    let mut kin = start(&server, "context_window = 4096\n", &[]);
    let session = ready(&mut kin).await;
    for id in 2..12 {
        let seen = server.request_count();
        server.push(answer_of(100));
        let updates = kin.turn(id, &session, &prompt_of(300)).await;
        let told = updates
            .iter()
            .any(|u| u.to_string().contains("Compaction cannot make room"));
        assert!(!told, "turn {id}: told there is no room");
        let requests = server.requests();
        for request in &requests[seen..] {
            let counted = llama.count(&request.body);
            assert!(counted <= 4_096, "turn {id}: {counted} tokens");
        }
    }
    let compactions = compactions_in(&kin, &session);
    assert!(
        compactions >= 1,
        "the conversation outgrew the window and was compacted"
    );
}

/// A tool result longer than the window is cut to what fits, with a marker saying how much
/// was left out and where to read on; the next request fits. (On 42ca44e it overflowed and
/// the turn failed.)
#[tokio::test]
async fn a_tool_result_that_outgrows_the_window_is_cut_to_fit() {
    let server = MockServer::start();
    server.behave_like(LlamaLike::llama_server(8_000));
    let mut kin = start(&server, "context_window = 8000\n", &[]);
    let text: String = (1..=3000)
        .map(|n| format!("line {n} of a long file, padded to some length\n"))
        .collect();
    std::fs::write(kin.cwd.path().join("big.txt"), text).unwrap();
    let session = ready(&mut kin).await;
    server.push(tool_calls_reply(&[(
        "call_1",
        "read",
        r#"{"path":"big.txt"}"#,
    )]));
    server.push(text_reply(&["read it"]));
    let updates = kin.turn(2, &session, "read big.txt").await;
    assert_eq!(answer_text(&updates), "read it");
    let second = &server.requests()[1].body;
    assert!(
        LlamaLike::tokens(second) <= 8_000,
        "{}",
        LlamaLike::tokens(second)
    );
    let messages = second["messages"].as_array().unwrap();
    let result = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(
        result.contains("more bytes (about"),
        "{}",
        &result[result.len() - 400..]
    );
    assert!(result.contains("did not fit the model's context window"));
    let last_line = result
        .lines()
        .rev()
        .find_map(|l| {
            l.split_once('\t')
                .and_then(|(n, _)| n.trim().parse::<u64>().ok())
        })
        .unwrap();
    assert!(
        result.contains(&format!("`read` and `offset` {}", last_line + 1)),
        "{}",
        &result[result.len() - 400..]
    );
}

/// A prompt cancelled before the model answered stays a turn of its own, marked cancelled:
/// `slow` then `next` reach the model as `slow`, the marker, `next` (roles alternating),
/// not as one message `slow\n\nnext` (as on 42ca44e).
#[tokio::test]
async fn a_prompt_cancelled_before_any_answer_stays_apart_from_the_next() {
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(1_000_000);
    llama.strict_alternation = true;
    server.behave_like(llama);
    let mut kin = start(&server, "", &[("KIN_RETRIES", "0")]);
    let session = ready(&mut kin).await;
    let mut events = text_events(&["never"], "stop");
    events.truncate(0);
    server.push(Reply::Hang(events));
    kin.send_prompt(2, &session, "slow").await;
    while server.request_count() < 1 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    kin.send(&cancel).await;
    let ServerEvent::ClientClosed { .. } = server.next_event().await;
    let (_, answer) = kin.answer(&json!(2)).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    server.push(text_reply(&["answered"]));
    let updates = kin.turn(3, &session, "next").await;
    assert_eq!(answer_text(&updates), "answered");
    let sent = server.requests().last().unwrap().body.clone();
    let turns: Vec<(String, String)> = sent["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            let content = match &m["content"] {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            (m["role"].as_str().unwrap().to_owned(), content)
        })
        .collect();
    let roles: Vec<&str> = turns.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{turns:?}");
    assert!(
        turns[0].1.contains("slow") && !turns[0].1.contains("next"),
        "{turns:?}"
    );
    assert!(turns[1].1.contains("cancelled"), "{turns:?}");
    assert!(turns[2].1.contains("next"), "{turns:?}");
}

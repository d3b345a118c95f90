//! `compaction`: a 200-turn session, release `kin acp` on the mock OpenAI-compatible endpoint
//! (its own thread, loopback HTTP/1.1) with a small `context_window`, the mock giving no usage
//! figures (kin estimates, four bytes a token). Checks that every turn answers, that no request
//! is larger than the window, and that compactions come at most once per threshold crossing
//! (a completed turn between any two); measures prompt -> model request for the prompts that
//! follow a compaction and for the others.
//!
//! Target: prompt -> model request under 3 ms after compaction.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

#[path = "../tests/it/common/mock_openai.rs"]
mod mock_openai;

mod common;

use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use mock_openai::{chunk, done, event, MockServer, Reply};
use serde_json::{json, Value};

const TURNS: u64 = 200;
const WINDOW: u64 = 4_000;

/// A text answer without usage figures.
fn answer(text: &str) -> Reply {
    Reply::Stream(vec![
        event(&chunk(json!({"role": "assistant", "content": text}), None)),
        event(&chunk(json!({}), Some("stop"))),
        done(),
    ])
}

/// Bytes of text in a request's messages, over four: kin's own estimate.
fn request_tokens(body: &Value) -> u64 {
    let text: usize = body["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .map(|m| m["content"].as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    (text as u64).div_ceil(4)
}

fn is_summary_request(body: &Value) -> bool {
    body["messages"].to_string().contains("is being compacted")
}

fn main() {
    common::serve_floor_if_asked();
    common::watchdog("compaction", Duration::from_secs(300));
    let server = MockServer::start();
    server.set_default(answer(
        "Done: the part is handled and nothing else changed.",
    ));
    let (home, cwd) = (temp_dir("kin-bench-home-"), temp_dir("kin-bench-cwd-"));
    let config = home.path().join("config/kin");
    std::fs::create_dir_all(&config).expect("creating the config dir");
    let file = format!("context_window = {WINDOW}\ncompact_at = 0.8\n");
    std::fs::write(config.join("config.toml"), file).expect("writing the config file");
    let url = server.base_url();
    let config_home = home.path().join("config");
    let env = [
        ("KIN_BASE_URL", url.as_str()),
        ("KIN_API_KEY", "sk-bench-0000000000000000"),
        (
            "XDG_CONFIG_HOME",
            config_home.to_str().expect("UTF-8 temp path"),
        ),
    ];
    let mut kin = Kin::spawn_with(home.path(), cwd.path(), &[], &env);
    kin.initialize();
    let session = kin.new_session(2, cwd.path());
    let (mut after, mut others) = (Vec::new(), Vec::new());
    let mut compacted_last_turn = false;
    let mut compactions = 0;
    let mut largest = 0;
    for turn in 1..=TURNS {
        let text = format!(
            "Part {turn}: {}",
            "please look at this and carry on. ".repeat(12)
        );
        let id = 10 + turn;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": text}]}})
        .to_string();
        let before = server.requests().len();
        let sent = Instant::now();
        kin.send(&line);
        let (answer, _) = kin.wait_response(id);
        assert_eq!(
            answer["result"]["stopReason"], "end_turn",
            "turn {turn}: {answer}"
        );
        let requests = server.requests();
        let new = &requests[before..];
        let summaries = new.iter().filter(|r| is_summary_request(&r.body)).count();
        assert!(summaries <= 1, "turn {turn}: {summaries} compactions");
        compactions += summaries;
        for request in new {
            let tokens = request_tokens(&request.body);
            largest = largest.max(tokens);
            assert!(
                tokens <= WINDOW,
                "turn {turn}: a request of {tokens} tokens"
            );
        }
        let step = new.last().expect("a model request");
        let took = ms(step.received.duration_since(sent));
        if summaries == 0 {
            if compacted_last_turn {
                &mut after
            } else {
                &mut others
            }
            .push(took);
        }
        compacted_last_turn = summaries == 1;
    }
    kin.finish();
    assert!(compactions > 0, "the session crossed the threshold");
    let (median, p10, p90) = summary(&mut after);
    println!(
        "compaction: {TURNS} turns, window {WINDOW}, {compactions} compactions, largest \
         request {largest} tokens; prompt -> model request after a compaction: median \
         {median:.2} ms (p10 {p10:.2}, p90 {p90:.2}; {} samples; target < 3 ms)",
        after.len()
    );
    let (median, p10, p90) = summary(&mut others);
    println!(
        "compaction: other turns: median {median:.2} ms (p10 {p10:.2}, p90 {p90:.2}; {} samples)",
        others.len()
    );
    println!(
        "compaction: method: one `kin acp`, {TURNS} prompts of ~420 bytes one after another; \
         timed from writing session/prompt to the last byte of the turn's model request"
    );
}

//! `replay_turn`: one replayed single-step turn streaming 1,000 text chunks, end to end.
//!
//! A scenario directory holds a `session.jsonl` with one recorded model call per turn
//! (block-start, 1,000 text-deltas, block-end, finish stop). ONE `kin acp --replay DIR`
//! serves every prompt on ONE session; each sample is the time from writing
//! `session/prompt` to reading its response, with the `session/update` lines in between read
//! and discarded (and counted).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use serde_json::json;

const TURNS: usize = 60;
const WARMUP: usize = 10;
const DELTAS: usize = 1000;

/// Writes `session.jsonl`: the header, then per turn one group of chunks for step 1.
fn write_scenario(dir: &Path) {
    let mut text = String::from(
        r#"{"type":"session","version":0,"id":"00000000-0000-4000-8000-000000000000","createdAt":0,"delegationDepth":0}"#,
    );
    text.push('\n');
    let mut seq = 0u64;
    let mut chunk = |text: &mut String, turn: usize, chunk: serde_json::Value| {
        let line = json!({
            "type": "assistant/chunk",
            "seq": seq,
            "time": 0,
            "data": {"turn": turn, "step": 1, "chunk": chunk},
        });
        writeln!(text, "{line}").expect("writing to a String");
        seq += 1;
    };
    for turn in 1..=TURNS {
        chunk(
            &mut text,
            turn,
            json!({"type": "block-start", "index": 0, "blockType": "text"}),
        );
        let mut full = String::new();
        for i in 0..DELTAS {
            let delta = format!("word{i} ");
            full.push_str(&delta);
            chunk(
                &mut text,
                turn,
                json!({"type": "text-delta", "index": 0, "text": delta}),
            );
        }
        chunk(
            &mut text,
            turn,
            json!({"type": "block-end", "index": 0, "block": {"type": "text", "text": full}}),
        );
        chunk(
            &mut text,
            turn,
            json!({"type": "finish", "reason": {"kind": "stop"}}),
        );
    }
    std::fs::write(dir.join("session.jsonl"), text).expect("writing session.jsonl");
}

fn main() {
    common::watchdog("replay_turn", Duration::from_secs(60));
    let scenario = temp_dir("kin-bench-scenario-");
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    write_scenario(scenario.path());

    let mut kin = Kin::spawn(
        home.path(),
        cwd.path(),
        &["--replay".as_ref(), scenario.path().as_os_str()],
    );
    kin.initialize();
    let session = kin.new_session(2, cwd.path());

    let mut samples = Vec::with_capacity(TURNS);
    let mut min_updates = usize::MAX;
    for turn in 0..TURNS {
        let id = 3 + turn as u64;
        let line = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": format!("turn {}", turn + 1)}]},
        })
        .to_string();
        let start = Instant::now();
        kin.send(&line);
        let (answer, updates) = kin.wait_response(id);
        samples.push(ms(start.elapsed()));
        assert_eq!(
            answer["result"]["stopReason"],
            "end_turn",
            "turn {} ended with {answer}",
            turn + 1
        );
        assert!(
            updates >= DELTAS,
            "turn {} streamed only {updates} session/update lines",
            turn + 1
        );
        min_updates = min_updates.min(updates);
    }
    kin.finish();

    let timed = &samples[WARMUP..];
    let n = timed.len();
    let (median, p10, p90) = summary(&mut timed.to_vec());
    let (early, _, _) = summary(&mut timed[..10].to_vec());
    let (late, _, _) = summary(&mut timed[n - 10..].to_vec());
    println!(
        "replay_turn: 1000-chunk replayed turn answered in median {median:.2} ms (p10 {p10:.2}, \
         p90 {p90:.2}; {n} turns after {WARMUP} warm-ups on one process and session, release \
         build; target < 10 ms)"
    );
    println!(
        "replay_turn: >= {min_updates} session/update lines per turn; median of the first 10 \
         timed turns {early:.2} ms, of the last 10 {late:.2} ms"
    );
    println!(
        "replay_turn: method: `kin acp --replay DIR` -> initialize -> session/new -> \
         session/prompt x{TURNS}, each timed from writing the prompt to reading its response"
    );
}

//! `prompt`: the latency of a prompt on an instant local model (the tests' mock
//! OpenAI-compatible server, on its own thread, over loopback HTTP/1.1), release `kin acp`.
//!
//! - first chunk: `session/prompt` written -> first `agent_message_chunk` read, for the first
//!   prompt of a fresh process (HTTP client built on that call) and for the later ones;
//! - model request: `session/prompt` written -> the request's last byte at the server, in a
//!   session resumed from a 100,000-event log (2,000 turns of 50 events, 82% of them streamed
//!   text chunks), so the whole history goes into each request.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

#[path = "../tests/it/common/mock_openai.rs"]
mod mock_openai;

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use mock_openai::{text_reply, MockServer};
use serde_json::{json, Value};

const PROCESSES: usize = 30;
const PROMPTS: usize = 5;
const BIG_PROCESSES: usize = 3;
const TURNS: u64 = 2_000;
const DELTAS: u64 = 41;

/// Spawns kin on `server` with a session; returns it and the session id.
fn start(server: &MockServer, home: &Path, cwd: &Path) -> Kin {
    let url = server.base_url();
    let env = [
        ("KIN_BASE_URL", url.as_str()),
        ("KIN_API_KEY", "sk-bench-0000000000000000"),
    ];
    let mut kin = Kin::spawn_with(home, cwd, &[], &env);
    kin.initialize();
    kin
}

/// Sends a prompt; returns when it was written and when its first text chunk was read.
fn prompt(kin: &mut Kin, id: u64, session: &str) -> (Instant, Duration) {
    let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "Say ok."}]}});
    let line = line.to_string();
    let sent = Instant::now();
    kin.send(&line);
    let mut first = None;
    loop {
        let line = kin.read_line();
        if first.is_none() && line.contains(r#""sessionUpdate":"agent_message_chunk""#) {
            first = Some(sent.elapsed());
        } else if line.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{id},"#)) {
            assert!(line.contains(r#""stopReason":"end_turn""#), "{line}");
            break;
        }
    }
    (sent, first.expect("the answer streamed a text chunk"))
}

fn first_chunk(server: &MockServer) {
    let (mut first, mut later) = (Vec::new(), Vec::new());
    for _ in 0..PROCESSES {
        let (home, cwd) = (temp_dir("kin-bench-home-"), temp_dir("kin-bench-cwd-"));
        let mut kin = start(server, home.path(), cwd.path());
        let session = kin.new_session(2, cwd.path());
        for n in 0..PROMPTS {
            let (_, elapsed) = prompt(&mut kin, 10 + n as u64, &session);
            if n == 0 { &mut first } else { &mut later }.push(ms(elapsed));
        }
        kin.finish();
    }
    for (name, samples) in [("first prompt", &mut first), ("later prompts", &mut later)] {
        let (median, p10, p90) = summary(samples);
        println!(
            "prompt: {name}: first chunk in median {median:.2} ms (p10 {p10:.2}, p90 {p90:.2}; \
             {} samples; target <= 4 ms)",
            samples.len()
        );
    }
    println!(
        "prompt: method: {PROCESSES} fresh `kin acp` processes (http:// endpoint), each \
         initialize -> session/new -> {PROMPTS} prompts one after another; timed from writing \
         session/prompt to reading the first agent_message_chunk"
    );
}

/// Writes a log of `TURNS` completed turns; returns the number of events.
fn write_log(path: &Path, id: &str, cwd: &Path) -> u64 {
    let header = json!({"type": "session", "version": 0, "id": id, "createdAt": 0,
        "cwd": cwd.to_str().expect("UTF-8 temp path"), "delegationDepth": 0});
    let mut text = format!("{header}\n");
    let mut seq = 0u64;
    let mut line = |text: &mut String, kind: &str, data: Value| {
        writeln!(
            text,
            "{}",
            json!({"type": kind, "seq": seq, "time": seq, "data": data})
        )
        .expect("writing to a String");
        seq += 1;
    };
    for turn in 1..=TURNS {
        let (chunk, source) = (
            |chunk: Value| json!({"turn": turn, "step": 1, "chunk": chunk}),
            json!({"kind": "user"}),
        );
        line(
            &mut text,
            "turn/start",
            json!({"turn": turn, "trigger": {"kind": "message", "source": source}}),
        );
        let content =
            json!([{"type": "text", "text": format!("Please continue with part {turn}.")}]);
        line(
            &mut text,
            "user/message",
            json!({"content": content, "source": source, "role": "user", "id": format!("u{turn}")}),
        );
        line(&mut text, "step/start", json!({"turn": turn, "step": 1}));
        line(
            &mut text,
            "assistant/chunk",
            chunk(json!({"type": "block-start", "index": 0, "blockType": "text"})),
        );
        let mut full = String::new();
        for i in 0..DELTAS {
            let delta = format!("token{i} of turn {turn}; ");
            full.push_str(&delta);
            line(
                &mut text,
                "assistant/chunk",
                chunk(json!({"type": "text-delta", "index": 0, "text": delta})),
            );
        }
        let block = json!({"type": "text", "text": full});
        line(
            &mut text,
            "assistant/chunk",
            chunk(json!({"type": "block-end", "index": 0, "block": block})),
        );
        line(
            &mut text,
            "assistant/chunk",
            chunk(json!({"type": "finish", "reason": {"kind": "stop"}})),
        );
        let message = json!({"role": "assistant", "content": [block], "id": format!("a{turn}"),
            "source": {"kind": "model", "provider": "replay", "model": "replay"}});
        line(
            &mut text,
            "assistant/message",
            json!({"turn": turn, "step": 1, "message": message}),
        );
        line(&mut text, "step/end", json!({"turn": turn, "step": 1}));
        line(
            &mut text,
            "turn/end",
            json!({"turn": turn, "reason": {"kind": "completed"}}),
        );
    }
    std::fs::write(path, text).expect("writing the session log");
    seq
}

fn model_request(server: &MockServer) {
    let mut samples = Vec::new();
    let mut events = 0;
    for _ in 0..BIG_PROCESSES {
        let (home, cwd) = (temp_dir("kin-bench-home-"), temp_dir("kin-bench-cwd-"));
        let id = "bench-100k";
        let sessions = home.path().join("sessions");
        std::fs::create_dir_all(&sessions).expect("creating the sessions dir");
        events = write_log(&sessions.join(format!("{id}.jsonl")), id, cwd.path());
        let mut kin = start(server, home.path(), cwd.path());
        let cwd_text = cwd.path().to_str().expect("UTF-8 temp path");
        kin.call(
            2,
            "session/resume",
            json!({"sessionId": id, "cwd": cwd_text, "mcpServers": []}),
        );
        for n in 0..PROMPTS {
            let before = server.requests().len();
            let (sent, _) = prompt(&mut kin, 10 + n as u64, id);
            let requests = server.requests();
            assert_eq!(requests.len(), before + 1, "one model request per prompt");
            samples.push(ms(requests[before].received.duration_since(sent)));
        }
        kin.finish();
    }
    let (median, p10, p90) = summary(&mut samples);
    println!(
        "prompt: model request at {events} events: median {median:.2} ms (p10 {p10:.2}, p90 \
         {p90:.2}; {} samples; target <= 3 ms)",
        samples.len()
    );
    println!(
        "prompt: method: {BIG_PROCESSES} processes, each session/resume of the log -> \
         {PROMPTS} prompts; timed from writing session/prompt to the request's last byte \
         arriving at the server"
    );
}

fn main() {
    common::serve_floor_if_asked();
    common::watchdog("prompt", Duration::from_secs(300));
    let server = MockServer::start();
    server.set_default(text_reply(&["ok"]));
    first_chunk(&server);
    model_request(&server);
}

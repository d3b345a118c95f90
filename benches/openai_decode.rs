//! `openai_decode`: decoding a local Chat Completions event stream of 10,000 chunks into
//! session-log events, in-process (no network): SSE parsing, JSON decoding of each chunk,
//! mapping to the log's chunk vocabulary, and serializing every result as an
//! `assistant/chunk` log line, as the agent loop does.
//!
//! The stream is a realistic mix: 2,000 reasoning deltas, 7,000 text deltas, one tool call in
//! 996 argument fragments, the finish reason and usage. It is fed two ways: one event per
//! buffer (a remote server flushing every token) and 64 KiB buffers (a fast local server).
//! Target: at least 100,000 chunks/s.
//!
//! Then one huge event (a single text delta of 0.5 to 10 MB) arriving as one buffer: the time
//! must grow linearly with the size (the same MB/s at every size).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

use std::time::{Duration, Instant};

use bytes::Bytes;
use kin::model::openai::SseDecoder;
use kin::session::{AssistantChunk, Event, EventBody};
use serde_json::json;

const CHUNKS: usize = 10_000;
const RUNS: usize = 30;
const WARMUP: usize = 5;

fn events() -> Vec<Vec<u8>> {
    let line = |delta: serde_json::Value, finish: Option<&str>| {
        let chunk = json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600,
            "model": "deepseek-chat", "system_fingerprint": "fp_bench",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        format!("data: {chunk}\n\n").into_bytes()
    };
    let mut out = Vec::with_capacity(CHUNKS + 1);
    for i in 0..2_000 {
        out.push(line(
            json!({"content": null, "reasoning_content": format!("thought {i} ")}),
            None,
        ));
    }
    for i in 0..7_000 {
        out.push(line(json!({"content": format!("word{i} ")}), None));
    }
    out.push(line(
        json!({"tool_calls": [{"index": 0, "id": "call_0", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}),
        None,
    ));
    for i in 0..(CHUNKS - 9_003) {
        let fragment = if i == 0 {
            "{\"p\":\"".to_owned()
        } else {
            "x".to_owned()
        };
        out.push(line(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}),
            None,
        ));
    }
    out.push(line(json!({}), Some("tool_calls")));
    out.push(
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "choices": [],
                   "usage": {"prompt_tokens": 1000, "completion_tokens": 9000, "total_tokens": 10000}})
        )
        .into_bytes(),
    );
    assert_eq!(out.len(), CHUNKS);
    out.push(b"data: [DONE]\n\n".to_vec());
    out
}

/// Decodes one stream; returns (chunks produced, bytes of log lines written).
async fn decode(buffers: Vec<Bytes>) -> (usize, usize) {
    let body = futures::stream::iter(buffers.into_iter().map(Ok::<_, std::io::Error>));
    let mut decoder = SseDecoder::new(body, Duration::from_secs(60));
    let (mut chunks, mut bytes, mut seq) = (0, 0, 0u64);
    let mut line = Vec::with_capacity(512);
    while let Some(item) = decoder.next().await {
        let chunk = item.expect("the bench stream decodes");
        let event = Event {
            seq,
            time: 1_767_225_600_000,
            body: EventBody::AssistantChunk(AssistantChunk {
                turn: 1,
                step: 1,
                chunk,
            }),
            source_event_seqs: None,
            surface_op: None,
        };
        line.clear();
        serde_json::to_writer(&mut line, &event).expect("serializing an event");
        line.push(b'\n');
        bytes += line.len();
        chunks += 1;
        seq += 1;
    }
    (chunks, bytes)
}

fn measure(name: &str, buffers: &[Bytes], runtime: &tokio::runtime::Runtime) {
    let mut rates = Vec::with_capacity(RUNS);
    let mut produced = 0;
    for run in 0..WARMUP + RUNS {
        let input = buffers.to_vec();
        let start = Instant::now();
        let (chunks, _bytes) = runtime.block_on(decode(input));
        let elapsed = start.elapsed();
        produced = chunks;
        if run >= WARMUP {
            rates.push(CHUNKS as f64 / elapsed.as_secs_f64());
        }
    }
    rates.sort_by(f64::total_cmp);
    let q = |f: f64| rates[((rates.len() - 1) as f64 * f).round() as usize];
    println!(
        "openai_decode ({name}): median {:.0} chunks/s (p10 {:.0}, p90 {:.0}; {RUNS} runs of \
         {CHUNKS} stream chunks -> {produced} log events each, after {WARMUP} warm-ups; target >= 100000)",
        q(0.5),
        q(0.1),
        q(0.9)
    );
}

/// One stream whose first event carries `size` bytes of text (ASCII with a two-byte
/// character every 64 bytes), then the finish reason and `[DONE]`, all in one buffer.
fn huge_event(size: usize) -> Bytes {
    let piece = format!("{}\u{e9}", "x".repeat(62));
    let text = piece.repeat(size / piece.len());
    let delta = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
    let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    Bytes::from(format!(
        "data: {delta}\r\n\r\ndata: {finish}\r\n\r\ndata: [DONE]\r\n\r\n"
    ))
}

fn measure_huge(runtime: &tokio::runtime::Runtime) {
    const HUGE_RUNS: usize = 7;
    for megabytes in [0.5, 1.0, 2.0, 4.0, 10.0] {
        let buffer = huge_event((megabytes * 1_000_000.0) as usize);
        let mut times = Vec::with_capacity(HUGE_RUNS);
        for run in 0..1 + HUGE_RUNS {
            let input = vec![buffer.clone()];
            let start = Instant::now();
            let (chunks, _bytes) = runtime.block_on(decode(input));
            let elapsed = start.elapsed();
            assert_eq!(chunks, 4, "block start, text delta, block end, finish");
            if run > 0 {
                times.push(elapsed.as_secs_f64());
            }
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "openai_decode (one {megabytes} MB event in one buffer): median {:.1} ms = {:.0} MB/s \
             (min {:.1}, max {:.1} ms; {HUGE_RUNS} runs after 1 warm-up)",
            median * 1e3,
            buffer.len() as f64 / 1e6 / median,
            times[0] * 1e3,
            times[times.len() - 1] * 1e3,
        );
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let events = events();
    let per_event: Vec<Bytes> = events.iter().map(|e| Bytes::from(e.clone())).collect();
    let joined: Vec<u8> = events.concat();
    let big: Vec<Bytes> = joined
        .chunks(64 * 1024)
        .map(Bytes::copy_from_slice)
        .collect();
    println!(
        "openai_decode: {} bytes of SSE, {} events; release build, one thread",
        joined.len(),
        events.len()
    );
    measure("one event per buffer", &per_event, &runtime);
    measure("64 KiB buffers", &big, &runtime);
    measure_huge(&runtime);
}

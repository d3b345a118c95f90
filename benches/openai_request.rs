//! `openai_request`: per-request overhead of the OpenAI-compatible client against a local
//! server that answers at once (the mock of the tests, on its own thread, over loopback
//! HTTP/1.1 with keep-alive). One sample is the time from starting a call (`Model::stream`)
//! to the end of its stream, for a two-event answer: request building and JSON encoding, the
//! HTTP round trip, SSE and chunk decoding. Target: median under 1 ms.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

#[path = "../tests/it/common/mock_openai.rs"]
mod mock_openai;

use std::time::Instant;

use futures::StreamExt;
use kin::model::openai::{ApiKey, KeyState, OpenAiModel, OpenAiSettings};
use kin::model::{Model, ModelRequest};
use kin::session::history::HistoryItem;
use kin::session::UserPart;
use mock_openai::{text_reply, MockServer};

const REQUESTS: usize = 2_000;
const WARMUP: usize = 100;

fn main() {
    let server = MockServer::start();
    server.set_default(text_reply(&["ok"]));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let model = runtime.block_on(async {
        OpenAiModel::new(
            OpenAiSettings::new(server.base_url(), "bench-model"),
            KeyState::Present(ApiKey::new("sk-bench-key-00000000", "bench")),
        )
        .expect("an HTTP client")
    });
    let request = ModelRequest {
        session_id: "bench".into(),
        cwd: None,
        system: "You are kin, a coding agent.".into(),
        preamble: String::new(),
        history: vec![HistoryItem::User(vec![UserPart::Text {
            text: "Say ok.".into(),
        }])]
        .into(),
        tools: Vec::new(),
        max_tokens: None,
        blobs: None,
    };
    let mut samples = Vec::with_capacity(REQUESTS);
    runtime.block_on(async {
        for n in 0..WARMUP + REQUESTS {
            let start = Instant::now();
            let mut stream = model.stream(request.clone());
            let mut chunks = 0;
            while let Some(item) = stream.next().await {
                item.expect("the local server answers");
                chunks += 1;
            }
            let elapsed = start.elapsed();
            assert!(chunks >= 4, "a whole answer: {chunks} chunks");
            if n >= WARMUP {
                samples.push(elapsed.as_secs_f64() * 1e6);
            }
        }
    });
    samples.sort_by(f64::total_cmp);
    let q = |f: f64| samples[((samples.len() - 1) as f64 * f).round() as usize];
    println!(
        "openai_request: median {:.0} µs per request (p10 {:.0}, p90 {:.0}, p99 {:.0}; {REQUESTS} \
         sequential requests over kept-alive connections after {WARMUP} warm-ups; release \
         build; target < 1000 µs)",
        q(0.5),
        q(0.1),
        q(0.9),
        q(0.99)
    );
    assert_eq!(server.requests().len(), WARMUP + REQUESTS);
    println!(
        "openai_request: {} connections for {} requests",
        server.connections(),
        WARMUP + REQUESTS
    );
}

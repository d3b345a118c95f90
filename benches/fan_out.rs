//! Fan-out: one model step asking for N foreground children, each of whose model calls takes a
//! fixed delay, timed from the prompt to the final answer (in-process, the real runtime and
//! store); and a step of 8 `read`s of 1 MiB files against a step of one. Reported as ratios:
//! the fan-out's time over one child's delay (1.0 = all side by side), the 8 reads' over one.
//! `KIN_BENCH_DELAY_MS` sets the children's delay (default 200), `KIN_BENCH_RUNS` the runs
//! per figure (default 5).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{stream, StreamExt};
use kin::model::{ChunkStream, Model, ModelRequest};
use kin::runtime::{Runtime, RuntimeOptions};
use kin::session::history::HistoryItem;
use kin::session::{AssistantBlock, BlockType, Chunk, FinishKind, FinishReason, UserPart};
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod instant_model;

/// Answers `fan out N` with N `subagent` calls, `read N` with N reads, a child at once after
/// `delay`, and anything after tool results with "OK".
struct FanOutModel {
    delay: Duration,
}

fn calls(calls: Vec<(String, &str, String)>) -> ChunkStream {
    let mut chunks = Vec::new();
    for (index, (id, name, arguments)) in calls.into_iter().enumerate() {
        chunks.push(Chunk::BlockStart {
            index: index as u32,
            block_type: BlockType::ToolCall,
        });
        chunks.push(Chunk::BlockEnd {
            index: index as u32,
            block: AssistantBlock::ToolCall {
                id,
                name: name.into(),
                arguments,
            },
        });
    }
    chunks.push(Chunk::Finish {
        reason: FinishReason {
            kind: FinishKind::ToolCalls,
            failure: None,
        },
    });
    Box::pin(stream::iter(chunks.into_iter().map(Ok)))
}

impl Model for FanOutModel {
    fn provider(&self) -> String {
        "fan-out".into()
    }
    fn name(&self) -> String {
        "fan-out".into()
    }
    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let asked = match request.history.iter().next_back() {
            Some(HistoryItem::User(parts)) => parts
                .iter()
                .find_map(|part| match part {
                    UserPart::Text { text } => Some(text.clone()),
                    _ => None,
                })
                .unwrap_or_default(),
            _ => return instant_model::answer_ok(),
        };
        let count = |prefix: &str| asked.strip_prefix(prefix).and_then(|n| n.parse().ok());
        if let Some(n) = count("fan out ") {
            let children = (0..n)
                .map(|i| {
                    let args = json!({"description": format!("child {i}"), "prompt": "work"});
                    (format!("c{i}"), "subagent", args.to_string())
                })
                .collect();
            return calls(children);
        }
        if let Some(n) = count("read ") {
            let reads = (0..n)
                .map(|i| {
                    let args = json!({"path": format!("big{i}.txt"), "limit": 100_000});
                    (format!("r{i}"), "read", args.to_string())
                })
                .collect();
            return calls(reads);
        }
        // A child: the model takes its time.
        let delay = self.delay;
        Box::pin(stream::once(tokio::time::sleep(delay)).flat_map(|()| instant_model::answer_ok()))
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn spread(samples: &[Duration]) -> (f64, f64) {
    let ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    let min = ms.iter().copied().fold(f64::INFINITY, f64::min);
    let max = ms.iter().copied().fold(0.0, f64::max);
    (min, max)
}

/// Prompt -> final answer of `text` on a new session, `runs` times (after one warm-up).
async fn timed(
    runtime: &Arc<Runtime>,
    cwd: &std::path::Path,
    text: &str,
    runs: usize,
) -> Vec<Duration> {
    let mut samples = Vec::new();
    for run in 0..=runs {
        let session = runtime
            .host()
            .create_session(cwd.to_owned(), vec![], 0)
            .unwrap();
        let deps = runtime.host().turn_deps(&session);
        let prompt = vec![UserPart::Text { text: text.into() }];
        let started = Instant::now();
        session
            .run_turn(prompt, &deps, &|_| {}, CancellationToken::new())
            .await
            .unwrap();
        if run > 0 {
            samples.push(started.elapsed());
        }
    }
    samples
}

fn main() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let delay = Duration::from_millis(env("KIN_BENCH_DELAY_MS", 200));
    let runs = env("KIN_BENCH_RUNS", 5) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let line = "x".repeat(1023) + "\n";
        for i in 0..8 {
            std::fs::write(cwd.path().join(format!("big{i}.txt")), line.repeat(1024)).unwrap();
        }
        let model = Arc::new(FanOutModel { delay });
        let runtime = Runtime::new(
            home.path(),
            model,
            kin::tools::builtin(),
            RuntimeOptions::default(),
        )
        .unwrap();
        let mut one_child = None;
        for n in [1, 3, 8, 16] {
            let samples = timed(&runtime, cwd.path(), &format!("fan out {n}"), runs).await;
            let (min, max) = spread(&samples);
            let median = median(samples);
            let single = *one_child.get_or_insert(median);
            println!(
                "fan_out: {n:>2} children, each model call {} ms: prompt -> answer median {:.1} ms = {:.2}x one child's delay, {:.2}x the fan-out of one (min {min:.1}, max {max:.1} ms; {runs} runs after 1 warm-up; max_parallel 8)",
                delay.as_millis(),
                median.as_secs_f64() * 1000.0,
                median.as_secs_f64() / delay.as_secs_f64(),
                median.as_secs_f64() / single.as_secs_f64(),
            );
        }
        let read_runs = runs * 4;
        let one = timed(&runtime, cwd.path(), "read 1", read_runs).await;
        let eight = timed(&runtime, cwd.path(), "read 8", read_runs).await;
        let (one_min, one_max) = spread(&one);
        let (eight_min, eight_max) = spread(&eight);
        let (one, eight) = (median(one), median(eight));
        println!(
            "fan_out: 8 reads of 1 MiB files in one step: median {:.1} ms (min {eight_min:.1}, max {eight_max:.1}) = {:.2}x a step of one read, median {:.1} ms (min {one_min:.1}, max {one_max:.1}); prompt -> answer, {read_runs} runs after 1 warm-up",
            eight.as_secs_f64() * 1000.0,
            eight.as_secs_f64() / one.as_secs_f64(),
            one.as_secs_f64() * 1000.0,
        );
        runtime.shutdown().await;
    });
}

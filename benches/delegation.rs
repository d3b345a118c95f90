//! Delegation benchmarks, in-process against the real runtime and store with an instant model:
//! 1. a child's start -> result, against a plain top-level turn (the difference is the
//!    delegation overhead: child session file, publication, task, disposal);
//! 2. 1,000 background children started at once, all collected; peak RSS;
//! 3. forking a parent whose log holds 10,000 events (start -> result).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

use std::sync::Arc;
use std::time::{Duration, Instant};

use kin::agent::StopReason;
use kin::runtime::Runtime;
use kin::session::UserPart;
use kin::tasks::TaskStatus;
use tokio_util::sync::CancellationToken;

mod instant_model;
use instant_model::InstantModel;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn prompt(text: &str) -> Vec<UserPart> {
    vec![UserPart::Text { text: text.into() }]
}

async fn child_overhead(runtime: &Arc<Runtime>, cwd: &std::path::Path, runs: usize) {
    let parent = runtime
        .host()
        .create_session(cwd.to_owned(), vec![], 0)
        .unwrap();
    let (mut child_times, mut turn_times) = (Vec::new(), Vec::new());
    for i in 0..20 + runs {
        let started = Instant::now();
        let request = instant_model::request("spawn", "go", "bench child");
        let result = instant_model::answer(runtime, &parent, request).await;
        let elapsed = started.elapsed();
        assert_eq!(result.stop_reason, StopReason::Completed);

        let top = runtime
            .host()
            .create_session(cwd.to_owned(), vec![], 0)
            .unwrap();
        let deps = runtime.host().turn_deps(&top);
        let started = Instant::now();
        top.run_turn(prompt("go"), &deps, &|_| {}, CancellationToken::new())
            .await
            .unwrap();
        let turn = started.elapsed();
        if i >= 20 {
            child_times.push(elapsed);
            turn_times.push(turn);
        }
    }
    let (child, turn) = (median(child_times), median(turn_times));
    println!(
        "delegation: child start -> result median {:.3} ms; a plain turn on a new session {:.3} ms; overhead {:.3} ms per child ({runs} runs after 20 warm-ups; each includes one fsync at turn end)",
        ms(child),
        ms(turn),
        ms(child.saturating_sub(turn))
    );
}

async fn many_background(runtime: &Arc<Runtime>, cwd: &std::path::Path) {
    let parent = runtime
        .host()
        .create_session(cwd.to_owned(), vec![], 0)
        .unwrap();
    let started = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..1000 {
        let request = instant_model::request("spawn", "go", "bench child");
        let (_, task) = instant_model::start_continuable(runtime, &parent, request).await;
        ids.push(task);
    }
    let never = CancellationToken::new();
    let mut completed = 0;
    for id in &ids {
        let snapshot = runtime
            .tasks()
            .wait(id, Duration::from_secs(120), &parent.id, &never)
            .await
            .unwrap();
        completed += usize::from(snapshot.status == TaskStatus::Completed);
    }
    println!(
        "delegation: 1000 background children started at once: {completed}/1000 completed in {:.0} ms; peak RSS of the whole bench process {:.1} MiB",
        ms(started.elapsed()),
        peak_rss_mib()
    );
}

async fn fork_big_parent(runtime: &Arc<Runtime>, cwd: &std::path::Path) {
    let parent = runtime
        .host()
        .create_session(cwd.to_owned(), vec![], 0)
        .unwrap();
    let deps = runtime.host().turn_deps(&parent);
    // Each turn of the instant model writes 10 events.
    for _ in 0..1000 {
        parent
            .run_turn(prompt("grow"), &deps, &|_| {}, CancellationToken::new())
            .await
            .unwrap();
    }
    let events = parent.with_events(|e| e.len());
    let mut samples = Vec::new();
    for i in 0..35 {
        let started = Instant::now();
        let request = instant_model::request("fork", "go", "bench fork");
        instant_model::answer(runtime, &parent, request).await;
        if i >= 5 {
            samples.push(started.elapsed());
        }
    }
    println!(
        "delegation: fork of a parent with a {events}-event log: start -> result median {:.3} ms (30 runs after 5 warm-ups)",
        ms(median(samples))
    );
}

fn main() {
    // `KIN_BENCH_CHILD_RUNS=N` runs only the child start -> result part, N times (for a profile).
    let only = std::env::var("KIN_BENCH_CHILD_RUNS")
        .ok()
        .and_then(|runs| runs.parse::<usize>().ok());
    instant_model::in_process(Arc::new(InstantModel), move |runtime, cwd| async move {
        if let Some(runs) = only {
            child_overhead(&runtime, &cwd, runs).await;
            return;
        }
        // First, so the peak RSS it reports is its own.
        many_background(&runtime, &cwd).await;
        child_overhead(&runtime, &cwd, 500).await;
        fork_big_parent(&runtime, &cwd).await;
    });
}

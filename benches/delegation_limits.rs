//! `delegation_limits`: what the limits of issue 23 cost.
//!
//! 1. Per-step accounting: one step's watchdog and budget work (`Watch::progressed`,
//!    `Watch::spend` into a tree, `Watch::over_budget`), timed over 1,000,000 steps; median of
//!    5 runs, in ns per step. Target: < 1 us.
//! 2. 10,000 background children requested at once under a cap of 64 (`max_running` and
//!    `max_running_per_process`), each a fresh process (this binary re-executed): all must
//!    complete; reported are the wall time, peak RSS (`VmHWM`), and, against the same 10,000
//!    with a cap that never queues, the queue's overhead per activation. Medians of 3 runs.
//!    Targets: peak RSS < 64 MiB, overhead < 20 us per activation.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use kin::agent::{Budget, Spend, Watch};
use kin::config::DelegationSettings;
use kin::runtime::RuntimeOptions;
use kin::tasks::TaskStatus;

mod instant_model;
use instant_model::InstantModel;

const STEPS: u32 = 1_000_000;
const CHILDREN: usize = 10_000;
const CAP: usize = 64;
/// Set in the re-executed process to the cap to measure under.
const CHILD_ENV: &str = "KIN_BENCH_LIMITS_CAP";

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a figure in /proc/self/status")
}

fn accounting_ns_per_step() -> f64 {
    let watch = Watch::default();
    watch.set_budget(Budget {
        tokens: Some(u64::MAX),
        cost: Some(f64::MAX),
        tree: Some(Arc::new(Spend::default())),
    });
    let start = Instant::now();
    let mut stopped = 0u32;
    for _ in 0..STEPS {
        watch.progressed();
        watch.spend(1200, 0.0001);
        stopped += u32::from(std::hint::black_box(watch.over_budget()));
    }
    assert_eq!(stopped, 0);
    start.elapsed().as_nanos() as f64 / f64::from(STEPS)
}

/// One measurement of 10,000 children under `cap`: prints `elapsed_ms peak_kb`.
fn measure(cap: usize) {
    let options = RuntimeOptions {
        delegation: DelegationSettings {
            max_running: cap,
            max_running_per_process: cap,
            ..Default::default()
        },
        ..Default::default()
    };
    instant_model::in_process_with(Arc::new(InstantModel), options, |runtime, cwd| async move {
        let parent = runtime.host().create_session(cwd, vec![], 0).unwrap();
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(CHILDREN);
        for n in 0..CHILDREN {
            let request = instant_model::request("spawn", "go", &format!("child {n}"));
            let (_, task) = instant_model::start_continuable(&runtime, &parent, request).await;
            tasks.push(task);
        }
        for task in &tasks {
            runtime.tasks().until_settled(task.as_str()).await;
        }
        let elapsed = start.elapsed();
        let done = runtime
            .tasks()
            .list(&parent.id)
            .iter()
            .filter(|t| t.status == TaskStatus::Completed)
            .count();
        assert_eq!(done, CHILDREN, "every child completes");
        println!("{} {}", elapsed.as_secs_f64() * 1e3, status_kb("VmHWM:"));
    });
}

fn run_child(cap: usize) -> (f64, f64) {
    let exe = std::env::current_exe().expect("the bench's own path");
    let child = Command::new(&exe)
        .env(CHILD_ENV, cap.to_string())
        .output()
        .expect("re-running the bench");
    assert!(
        child.status.success(),
        "a measurement run failed: {}",
        String::from_utf8_lossy(&child.stderr)
    );
    let line = String::from_utf8_lossy(&child.stdout);
    let mut fields = line
        .split_whitespace()
        .map(|f| f.parse::<f64>().expect("a number"));
    (
        fields.next().expect("elapsed"),
        fields.next().expect("peak"),
    )
}

fn main() {
    if let Some(cap) = std::env::var(CHILD_ENV).ok().and_then(|v| v.parse().ok()) {
        measure(cap);
        return;
    }
    let mut steps: Vec<f64> = (0..5).map(|_| accounting_ns_per_step()).collect();
    println!(
        "delegation_limits accounting: {:.1} ns per step (median of 5 x {STEPS} steps; target < 1000 ns)",
        median(&mut steps)
    );
    let (mut capped_ms, mut peaks, mut open_ms) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        let (elapsed, peak) = run_child(CAP);
        capped_ms.push(elapsed);
        peaks.push(peak);
        open_ms.push(run_child(CHILDREN * 2).0);
    }
    let (capped, open) = (median(&mut capped_ms), median(&mut open_ms));
    let overhead_us = (capped - open) * 1e3 / CHILDREN as f64;
    println!(
        "delegation_limits queue: {CHILDREN} children under a cap of {CAP}: all completed in {capped:.0} ms, \
         peak RSS {:.1} MiB (target < 64 MiB); uncapped {open:.0} ms; queue overhead {overhead_us:.1} us per activation \
         (target < 20 us) (medians of 3 runs)",
        median(&mut peaks) / 1024.0
    );
}

//! `settled_children`: resident memory after 1,000 in-process children have run and been
//! disposed, against the idle baseline of the same process. A disposed child must be freed, so
//! the two should stay within 10% of each other.
//!
//! Each run is a fresh process (this binary re-executed), so runs do not inherit each other's
//! heap: runtime with an instant model and one parent session, one warm-up child, baseline
//! `VmRSS`; then 1,000 `spawn` children one after another (start, result, dispose, drop), then
//! `VmRSS` again. Reported: medians over the runs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

use std::process::Command;
use std::sync::Arc;

use kin::agent::StopReason;
use kin::runtime::Runtime;

mod instant_model;
use instant_model::InstantModel;

const RUNS: usize = 5;
const CHILDREN: usize = 1000;
/// Set in the re-executed process: run one measurement and print `baseline_kb after_kb`.
const CHILD_ENV: &str = "KIN_BENCH_SETTLED_CHILD";

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("reading /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

async fn one_child(runtime: &Arc<Runtime>, parent: &Arc<kin::agent::Agent>) {
    let request = instant_model::request("spawn", "go", "a child");
    let result = instant_model::answer(runtime, parent, request).await;
    assert_eq!(result.stop_reason, StopReason::Completed);
}

/// One measurement, in this process.
fn measure() {
    instant_model::in_process(Arc::new(InstantModel), |runtime, cwd| async move {
        let parent = runtime.host().create_session(cwd, vec![], 0).unwrap();
        one_child(&runtime, &parent).await;
        let baseline = rss_kb();
        for _ in 0..CHILDREN {
            one_child(&runtime, &parent).await;
        }
        let after = rss_kb();
        println!("{baseline} {after}");
    });
}

fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        measure();
        return;
    }
    let exe = std::env::current_exe().expect("the bench's own path");
    let (mut baselines, mut afters, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let child = Command::new(&exe)
            .env(CHILD_ENV, "1")
            .output()
            .expect("re-running the bench");
        assert!(child.status.success(), "a measurement run failed");
        let line = String::from_utf8_lossy(&child.stdout);
        let mut numbers = line.split_whitespace().map(|n| n.parse::<f64>().unwrap());
        let (baseline, after) = (numbers.next().unwrap(), numbers.next().unwrap());
        baselines.push(baseline / 1024.0);
        afters.push(after / 1024.0);
        ratios.push(after / baseline);
    }
    let (min, max) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "settled_children: VmRSS idle baseline median {:.2} MiB; after {CHILDREN} settled children \
         median {:.2} MiB; after/baseline median {:.3} (min {min:.3}, max {max:.3}; {RUNS} runs, \
         each a fresh process; target <= 1.10)",
        median(&mut baselines),
        median(&mut afters),
        median(&mut ratios),
    );
}

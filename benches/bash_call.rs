//! `bash_call`: what the process guard adds to each command a tool runs. `bash -c true` is
//! started, awaited and its output collected through `GroupChild` (as the `bash` tool does),
//! first directly (no guard: only a process group), then under the guard (the release `kin`
//! re-run as `kin __guard`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir};
use kin::process::child_env::ChildEnv;
use kin::process::group::GroupChild;

const WARMUP: usize = 20;
const RUNS: usize = 300;

async fn one_call(cwd: &Path) -> Duration {
    let args = ["-c".to_owned(), "true".to_owned()];
    let start = Instant::now();
    let mut child = GroupChild::spawn("bash", &args, cwd, &ChildEnv::default(), &[], 1024, 1024)
        .expect("spawning bash");
    let status = child.wait().await.expect("waiting for bash");
    child.finish().await;
    let elapsed = start.elapsed();
    assert!(status.success(), "bash -c true failed: {status}");
    elapsed
}

async fn samples(cwd: &Path) -> Vec<f64> {
    for _ in 0..WARMUP {
        one_call(cwd).await;
    }
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        samples.push(ms(one_call(cwd).await));
    }
    samples
}

fn report(what: &str, samples: &mut [f64]) -> f64 {
    let (median, p10, p90) = summary(samples);
    println!("bash_call: {what}: median {median:.2} ms (p10 {p10:.2}, p90 {p90:.2})");
    median
}

fn main() {
    common::watchdog("bash_call", Duration::from_secs(300));
    let cwd = temp_dir("kin-bench-cwd-");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let direct = report("direct", &mut runtime.block_on(samples(cwd.path())));
    kin::process::guard::enable(PathBuf::from(common::KIN));
    let guarded = report("guarded", &mut runtime.block_on(samples(cwd.path())));
    println!(
        "bash_call: the guard adds {:.2} ms per command (median difference); method: spawn \
         `bash -c true` through GroupChild -> wait -> collect output, {RUNS} runs after \
         {WARMUP} warm-ups each, direct first, then guarded; release build",
        guarded - direct
    );
}

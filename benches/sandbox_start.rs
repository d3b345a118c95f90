//! `sandbox_start`: what kin's sandbox adds to the start of a command. `bash -c true` is
//! started, awaited and its output collected through `GroupChild` under the process guard (as
//! the `bash` tool does), unconfined and through the sandbox launcher (`kin sandbox-exec`, which
//! applies the Landlock ruleset and execs bash), the two interleaved run by run so that drift
//! in the machine's load hits both alike.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir};
use kin::process::child_env::ChildEnv;
use kin::process::group::GroupChild;
use kin::process::sandbox::{CommandScope, Sandbox, SandboxSettings, Support};

const WARMUP: usize = 20;
const RUNS: usize = 300;

async fn one_call(program: &str, args: &[String], env: &[(String, String)], cwd: &Path) -> f64 {
    let start = Instant::now();
    let mut child = GroupChild::spawn(program, args, cwd, &ChildEnv::default(), env, 1024, 1024)
        .expect("spawning");
    let status = child.wait().await.expect("waiting");
    child.finish().await;
    let elapsed = start.elapsed();
    assert!(status.success(), "the command failed: {status}");
    ms(elapsed)
}

fn main() {
    common::watchdog("sandbox_start", Duration::from_secs(300));
    let support = Support::probe();
    if !matches!(support, Support::Landlock { .. }) {
        println!("sandbox_start: SKIPPED, this kernel cannot confine ({support:?})");
        return;
    }
    let cwd = temp_dir("kin-bench-cwd-");
    let sandbox = Arc::new(Sandbox::new(
        SandboxSettings::default(),
        support,
        Some(PathBuf::from(common::KIN)),
        None,
    ));
    let scope = CommandScope {
        session: "bench",
        roots: vec![cwd.path().to_owned()],
        read_only: false,
    };
    let args = ["-c".to_owned(), "true".to_owned()];
    let launch = sandbox
        .command(&scope, "bash", &args)
        .expect("a confined launch");
    assert!(launch.policy.is_some());
    kin::process::guard::enable(PathBuf::from(common::KIN));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let (mut direct, mut confined) = runtime.block_on(async {
        let (mut direct, mut confined) = (Vec::new(), Vec::new());
        for run in 0..WARMUP + RUNS {
            let plain = one_call("bash", &args, &[], cwd.path()).await;
            let boxed = one_call(&launch.program, &launch.args, &launch.env, cwd.path()).await;
            if run >= WARMUP {
                direct.push(plain);
                confined.push(boxed);
            }
        }
        (direct, confined)
    });
    let mut differences: Vec<f64> = confined.iter().zip(&direct).map(|(c, d)| c - d).collect();
    for (what, samples) in [
        ("unconfined", &mut direct),
        ("confined", &mut confined),
        ("added (paired difference)", &mut differences),
    ] {
        let (median, p10, p90) = summary(samples);
        println!("sandbox_start: {what}: median {median:.2} ms (p10 {p10:.2}, p90 {p90:.2})");
    }
    println!(
        "sandbox_start: method: `bash -c true` through GroupChild under the guard -> wait -> \
         collect output, unconfined and via `kin sandbox-exec` interleaved, {RUNS} pairs after \
         {WARMUP} warm-ups; release build"
    );
}

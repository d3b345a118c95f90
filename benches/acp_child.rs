//! `acp_child`: kin as an ACP child of kin, through `acp_client` as the `acp` provider drives
//! it (under the process guard, as in kin).
//! - spawn -> result: launch `kin acp --replay` (one recorded answer), `initialize`,
//!   `session/new`, `session/prompt` until the answer; the teardown is not counted;
//! - 100 spawn/cancel cycles (the prompt waits on the model until cancelled): afterwards no
//!   child process is left and this process holds no more file descriptors than before.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1::StopReason;
use common::{ms, summary, temp_dir};
use kin::acp_client::{AcpChild, ChildCommand};
use kin::config::AcpPermission;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const WARMUP: usize = 5;
const RUNS: usize = 50;
const CYCLES: usize = 100;

/// A replay directory whose one model call answers `text`, or hangs until cancelled.
fn scenario(answer: Option<&str>) -> tempfile::TempDir {
    let dir = temp_dir("kin-bench-acp-child-");
    let mut lines = vec![
        json!({"type":"session","version":0,"id":"00000000-0000-4000-8000-000000000000","createdAt":0,"cwd":"/","delegationDepth":0}),
    ];
    let text = answer.unwrap_or("unused");
    for chunk in [
        json!({"type":"block-start","index":0,"blockType":"text"}),
        json!({"type":"text-delta","index":0,"text":text}),
        json!({"type":"block-end","index":0,"block":{"type":"text","text":text}}),
        json!({"type":"finish","reason":{"kind":"stop"}}),
    ] {
        let seq = lines.len() - 1;
        lines.push(json!({"type":"assistant/chunk","seq":seq,"time":0,"data":{"turn":1,"step":1,"chunk":chunk}}));
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("session.jsonl"), text).expect("writing the scenario");
    if answer.is_none() {
        std::fs::write(
            dir.path().join("replay.override.json"),
            r#"[{"kind":"hang"}]"#,
        )
        .expect("writing the override");
    }
    dir
}

fn command(replay: &Path, home: &Path, cwd: &Path) -> ChildCommand {
    ChildCommand {
        program: common::KIN.to_owned(),
        args: vec![
            "acp".into(),
            "--replay".into(),
            replay.display().to_string(),
        ],
        env: vec![("KIN_HOME".into(), home.display().to_string())],
        child_env: Default::default(),
        private: Default::default(),
        cwd: cwd.to_owned(),
        permission: AcpPermission::Reject,
        ceiling: None,
        depth: 1,
        initialize_timeout: Duration::from_secs(30),
        eof_grace: Duration::from_secs(1),
        term_grace: Duration::from_secs(2),
        link: None,
        remote_cwd: None,
        mcp_servers: Vec::new(),
        sandbox: None,
    }
}

async fn spawn_to_result(command: ChildCommand) -> Duration {
    let never = CancellationToken::new();
    let start = Instant::now();
    let mut child = AcpChild::start(command, &never)
        .await
        .expect("starting kin");
    let (_, mut no_steers) = tokio::sync::mpsc::unbounded_channel();
    let outcome = child
        .prompt_steered("Answer.", &never, &mut no_steers)
        .await
        .expect("prompting kin");
    let elapsed = start.elapsed();
    assert_eq!(outcome.text, "ANSWER");
    child.shutdown().await;
    elapsed
}

async fn spawn_and_cancel(command: ChildCommand) {
    let never = CancellationToken::new();
    let mut child = AcpChild::start(command, &never)
        .await
        .expect("starting kin");
    let cancel = CancellationToken::new();
    let cancelling = cancel.clone();
    tokio::spawn(async move {
        tokio::task::yield_now().await;
        cancelling.cancel();
    });
    let (_, mut no_steers) = tokio::sync::mpsc::unbounded_channel();
    let outcome = child
        .prompt_steered("Wait.", &cancel, &mut no_steers)
        .await
        .expect("prompting kin");
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    child.shutdown().await;
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |fds| fds.count())
}

/// Processes whose command line contains `marker`.
fn processes_with(marker: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|raw| String::from_utf8_lossy(&raw).contains(marker))
        })
        .count()
}

fn main() {
    common::watchdog("acp_child", Duration::from_secs(600));
    kin::process::guard::enable(PathBuf::from(common::KIN));
    let (home, cwd) = (temp_dir("kin-bench-home-"), temp_dir("kin-bench-cwd-"));
    let (answer, hang) = (scenario(Some("ANSWER")), scenario(None));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let answering = command(answer.path(), home.path(), cwd.path());
        for _ in 0..WARMUP {
            spawn_to_result(answering.clone()).await;
        }
        let mut samples = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            samples.push(ms(spawn_to_result(answering.clone()).await));
        }
        let (median, p10, p90) = summary(&mut samples);
        println!(
            "acp_child: spawn -> result: median {median:.2} ms (p10 {p10:.2}, p90 {p90:.2}); \
             method: kin acp --replay (one recorded answer) launched under the guard, \
             initialize, session/new, session/prompt until the answer; {RUNS} runs after \
             {WARMUP} warm-ups; teardown not counted; release build"
        );

        let hanging = command(hang.path(), home.path(), cwd.path());
        spawn_and_cancel(hanging.clone()).await;
        let fds_before = open_fds();
        let start = Instant::now();
        for _ in 0..CYCLES {
            spawn_and_cancel(hanging.clone()).await;
        }
        let per_cycle = ms(start.elapsed()) / CYCLES as f64;
        let left = processes_with(&hang.path().display().to_string());
        let fds_after = open_fds();
        println!(
            "acp_child: {CYCLES} spawn/cancel cycles: {left} processes left, open fds \
             {fds_before} -> {fds_after}, {per_cycle:.1} ms per cycle (mean, teardown included)"
        );
        assert_eq!(left, 0, "child processes outlived their runs");
        assert!(fds_after <= fds_before, "file descriptors leaked");
    });
}

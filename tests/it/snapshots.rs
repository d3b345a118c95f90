//! Replays every scenario in `snapshots/` through the real binary and compares the ACP output
//! and the session logs with what was recorded.
//!
//! - `KIN_SNAPSHOT=refresh cargo test --test it snapshots` rewrites the expectations from the
//!   current behaviour (replaying the recorded model output).
//! - `KIN_SNAPSHOT=record KIN_SNAPSHOT_ONLY=name[,name] cargo test --test it snapshots` runs the
//!   named scenarios against the real configured model (its key and settings from the
//!   environment and config file), writes what happened as the new recording and
//!   expectations, then replays the new recording and compares.
//! - `KIN_SNAPSHOT_ONLY` limits any mode to the named scenarios.

use crate::common;

use std::path::PathBuf;

use common::{
    compare_with_recording, play, play_with, read_input, write_expectations, AcpSchema,
    EventSchemas, ModelSource,
};

fn scenarios() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(common::repo().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("input.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// Names from `KIN_SNAPSHOT_ONLY` (comma-separated); `None` when unset.
fn only() -> Option<Vec<String>> {
    std::env::var("KIN_SNAPSHOT_ONLY")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| v.split(',').map(|n| n.trim().to_owned()).collect())
}

#[tokio::test]
async fn every_snapshot_replays_as_recorded() {
    let mode = std::env::var("KIN_SNAPSHOT").unwrap_or_default();
    let (refresh, record) = (mode == "refresh", mode == "record");
    let only = only();
    assert!(
        !record || only.is_some(),
        "KIN_SNAPSHOT=record talks to the real model and overwrites recordings: name the \
         scenarios to record with KIN_SNAPSHOT_ONLY=name[,name]"
    );
    let mut acp = AcpSchema::load();
    let events = EventSchemas::load();
    let mut failures = Vec::new();
    let all = scenarios();
    assert!(
        all.len() >= 7,
        "expected the snapshot scenarios in snapshots/"
    );
    for dir in &all {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if only.as_ref().is_some_and(|only| !only.contains(&name)) {
            continue;
        }
        let input = read_input(dir);
        let source = if record {
            ModelSource::Live(Vec::new())
        } else {
            ModelSource::Replay(dir)
        };
        let outcome = play_with(source, &input).await;
        for line in &outcome.raw_stdout {
            let message: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Err(e) = acp.check_agent_message(&message, &outcome.methods) {
                failures.push(format!("{name}: ACP schema: {e}\n  line: {line}"));
            }
        }
        for log in &outcome.raw_logs {
            if let Err(e) = events.check_log(log) {
                failures.push(format!("{name}: session log schema: {e}"));
            }
        }
        if refresh || record {
            write_expectations(dir, &outcome);
        }
        if refresh {
            continue;
        }
        // Replay mode compares this run; record mode replays what it just recorded.
        let outcome = if record {
            play(dir, &input).await
        } else {
            outcome
        };
        failures.extend(compare_with_recording(&name, dir, &outcome));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A refresh of the demo (its background child races its parent) leaves every file as it is,
/// run after run.
#[tokio::test]
async fn refreshing_the_demo_changes_no_file() {
    let original = common::snapshot_dir("demo");
    let copy = tempfile::tempdir().unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&original)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in &files {
        std::fs::copy(file, copy.path().join(file.file_name().unwrap())).unwrap();
    }
    let input = read_input(&original);
    for run in 1..=3 {
        let outcome = play(&original, &input).await;
        write_expectations(copy.path(), &outcome);
        for file in &files {
            let name = file.file_name().unwrap();
            let (before, after) = (
                std::fs::read(file).unwrap(),
                std::fs::read(copy.path().join(name)).unwrap(),
            );
            assert!(
                before == after,
                "refresh {run} rewrote {}",
                name.to_string_lossy()
            );
        }
    }
}

/// How often each delegation scenario is replayed in a row: children that run side by side
/// must bind their scripts, number their ids and compare the same whatever order they run in.
const REPLAYS: usize = 20;

/// Every delegation scenario (`subagent-*`, `demo`) replays identically [`REPLAYS`] times in a
/// row. The replays of one scenario run a few at a time (each is its own `kin` process); any
/// difference from the recording fails, naming the run.
#[tokio::test]
async fn delegation_scenarios_replay_the_same_every_time() {
    use futures::StreamExt;
    let delegating: Vec<PathBuf> = scenarios()
        .into_iter()
        .filter(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy();
            name.starts_with("subagent-") || name == "demo"
        })
        .collect();
    assert!(delegating.len() >= 8, "the delegation scenarios");
    let mut failures = Vec::new();
    for dir in &delegating {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let input = read_input(dir);
        let runs = futures::stream::iter(1..=REPLAYS)
            .map(|run| {
                let (dir, input) = (dir.clone(), &input);
                async move { (run, play(&dir, input).await) }
            })
            .buffer_unordered(4);
        let outcomes: Vec<_> = runs.collect().await;
        for (run, outcome) in outcomes {
            let differences = compare_with_recording(&name, dir, &outcome);
            if let Some(first) = differences.first() {
                failures.push(format!("{name}, replay {run} of {REPLAYS}: {first}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

//! Replays every scenario in `snapshots/` through the real binary and compares the ACP output
//! and the session logs with what was recorded. `KIN_SNAPSHOT=refresh cargo test --test
//! snapshots` rewrites the expectations from the current behaviour.

mod common;

use std::path::{Path, PathBuf};

use common::{play, read_input, AcpSchema, EventSchemas};

fn scenarios() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(common::repo().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("input.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn log_file(dir: &Path, index: usize) -> PathBuf {
    match index {
        0 => dir.join("session.jsonl"),
        n => dir.join(format!("session.{n}.jsonl")),
    }
}

/// The first difference between two line lists, for a readable failure.
fn diff(what: &str, expected: &[String], actual: &[String]) -> Option<String> {
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e != a {
            return Some(format!(
                "{what} line {}:\n  expected {e}\n  actual   {a}",
                i + 1
            ));
        }
    }
    (expected.len() != actual.len()).then(|| {
        format!(
            "{what}: expected {} lines, got {} (first extra: {:?})",
            expected.len(),
            actual.len(),
            actual.get(expected.len()).or(expected.get(actual.len()))
        )
    })
}

#[tokio::test]
async fn every_snapshot_replays_as_recorded() {
    let refresh = std::env::var("KIN_SNAPSHOT").is_ok_and(|v| v == "refresh");
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
        let outcome = play(dir, &read_input(dir)).await;
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
        if refresh {
            let mut text = outcome.stdout.join("\n");
            text.push('\n');
            std::fs::write(dir.join("stdout.expected.jsonl"), text).unwrap();
            for n in outcome.logs.len().max(1).. {
                if std::fs::remove_file(log_file(dir, n)).is_err() {
                    break;
                }
            }
            for (i, log) in outcome.logs.iter().enumerate() {
                std::fs::write(log_file(dir, i), log.join("\n") + "\n").unwrap();
            }
            continue;
        }
        let expected = read_lines(&dir.join("stdout.expected.jsonl"));
        failures.extend(diff(&format!("{name}: stdout"), &expected, &outcome.stdout));
        let expected_logs = (0..)
            .map(|i| log_file(dir, i))
            .take_while(|p| p.is_file())
            .count();
        if expected_logs != outcome.logs.len().max(1) {
            failures.push(format!(
                "{name}: expected {expected_logs} session logs, kin wrote {}",
                outcome.logs.len()
            ));
        }
        for (i, log) in outcome.logs.iter().enumerate() {
            let expected = read_lines(&log_file(dir, i));
            failures.extend(diff(
                &format!("{name}: {}", log_file(dir, i).display()),
                &expected,
                log,
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

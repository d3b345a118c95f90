//! Compatibility with the reference system's recorded scenarios: their recorded model output,
//! replayed through kin, must give the same final agent messages and stop reasons.
//! The fixtures are read from `../shared/reference/dsh-snapshots/` at test time; without that
//! directory (a fresh clone) the tests are skipped, unless `CI` is set.

use crate::common;

use serde_json::Value;

/// Per answered prompt: (agent message text streamed before the answer, stop reason).
fn turns(stdout: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut text = String::new();
    for line in stdout {
        let message: Value = serde_json::from_str(line).unwrap();
        if message
            .pointer("/params/update/sessionUpdate")
            .and_then(Value::as_str)
            == Some("agent_message_chunk")
        {
            text.push_str(
                message
                    .pointer("/params/update/content/text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            );
        }
        if let Some(stop) = message
            .pointer("/result/stopReason")
            .and_then(Value::as_str)
        {
            out.push((std::mem::take(&mut text), stop.to_owned()));
        }
    }
    out
}

/// `text` with each UUID replaced by `{{id:N}}`, numbered by first appearance in `seen`, so
/// ids minted at run time (a background child's) compare equal across runs.
fn normalize_ids(text: &str, seen: &mut Vec<String>) -> String {
    let is_uuid = |s: &str| {
        s.len() == 36
            && s.char_indices().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit(),
            })
    };
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.get(..36).filter(|head| is_uuid(head)) {
            Some(id) => {
                let n = match seen.iter().position(|s| s == id) {
                    Some(n) => n,
                    None => {
                        seen.push(id.to_owned());
                        seen.len() - 1
                    }
                };
                out.push_str(&format!("{{{{id:{}}}}}", n + 1));
                rest = &rest[36..];
            }
            None => {
                let c = rest.chars().next().unwrap_or_default();
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// (tool name, result text, isError) of every tool call in a log, in order.
fn tool_results(log: &str) -> Vec<(String, String, bool)> {
    let events: Vec<Value> = log
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let name_of = |call_id: &Value| {
        events
            .iter()
            .find(|e| e["type"] == "tool/call" && &e["data"]["callId"] == call_id)
            .and_then(|e| e["data"]["name"].as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let mut seen = Vec::new();
    events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| {
            let part = &e["data"]["message"]["content"][0];
            let text: String = part["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|t| t["text"].as_str())
                .collect();
            (
                name_of(&part["toolCallId"]),
                normalize_ids(&text, &mut seen),
                part["isError"].as_bool().unwrap(),
            )
        })
        .collect()
}

async fn check(name: &str, prompts: usize) {
    let Some(reference) = common::shared_reference(&format!("reference_fixtures {name}")) else {
        return;
    };
    let dir = reference.join("dsh-snapshots").join(name);
    let input = common::read_input(&dir);
    let outcome = common::play(&dir, &input).await;
    let expected: Vec<String> = std::fs::read_to_string(dir.join("stdout.expected.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let expected_turns = turns(&expected);
    assert_eq!(expected_turns.len(), prompts, "{name}: fixture prompts");
    assert!(expected_turns.iter().all(|(text, _)| !text.is_empty()));
    assert_eq!(
        turns(&outcome.stdout),
        expected_turns,
        "{name}: final messages and stop reasons"
    );
    let sessions = |lines: &[String]| {
        lines
            .iter()
            .filter(|l| l.contains("\"sessionId\":") && l.contains("\"result\""))
            .count()
    };
    assert_eq!(
        sessions(&outcome.stdout),
        sessions(&expected),
        "{name}: sessions created"
    );
    let recorded_logs = (0..)
        .map(|i| match i {
            0 => dir.join("session.jsonl"),
            n => dir.join(format!("session.{n}.jsonl")),
        })
        .take_while(|p| p.is_file())
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect::<Vec<_>>();
    assert_eq!(
        outcome.raw_logs.len(),
        recorded_logs.len(),
        "{name}: one log per recorded session"
    );
    if name.starts_with("subagent") {
        assert!(
            !tool_results(&recorded_logs[0]).is_empty(),
            "{name}: the parent delegates"
        );
    }
    for (ours, recorded) in outcome.raw_logs.iter().zip(&recorded_logs) {
        assert_eq!(
            tool_results(ours),
            tool_results(recorded),
            "{name}: tool results"
        );
    }
    assert!(
        outcome.stderr.is_empty() || !outcome.stderr.contains("ERROR"),
        "{}",
        outcome.stderr
    );
}

#[tokio::test]
async fn handshake_matches_the_reference() {
    check("handshake", 0).await;
}

#[tokio::test]
async fn text_turn_matches_the_reference() {
    check("text-turn", 1).await;
}

#[tokio::test]
async fn multi_turn_matches_the_reference() {
    check("multi-turn", 2).await;
}

#[tokio::test]
async fn subagent_spawn_matches_the_reference() {
    check("subagent-spawn", 1).await;
}

#[tokio::test]
async fn subagent_fork_matches_the_reference() {
    check("subagent-fork", 2).await;
}

#[tokio::test]
async fn subagent_continuable_matches_the_reference() {
    check("subagent-continuable", 1).await;
}

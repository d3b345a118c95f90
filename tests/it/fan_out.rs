//! Fan-out through the real binary and its OpenAI client: the calls of one model step that may
//! overlap run side by side (asserted at the mock model, by the overlap of the children's
//! requests), anything else runs alone in the model's order, and the log and the next request
//! stay what a one-at-a-time run gives.

use crate::common;

use std::time::Duration;

use common::mock_openai::{text_reply, tool_calls_reply, MockServer, Reply};
use common::{prompt, Wire};
use serde_json::{json, Value};

const KEY: &str = "sk-fan-out-test-0001";

/// kin on `server`, with `config` as its config file (if any).
fn kin_on(server: &MockServer, config: Option<&str>) -> Wire {
    Wire::on_mock(server, common::home_with(config.unwrap_or_default()), KEY)
}

/// Sends prompt `id` and reads until its answer, handing every request kin makes to `on_ask`
/// (which answers it, now or later) and keeping every other message.
async fn drive(
    kin: &mut Wire,
    id: i64,
    params: Value,
    mut on_ask: impl FnMut(&Value, &[Value]) -> Vec<Value>,
) -> (Vec<Value>, Value) {
    kin.send(&json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": params}))
        .await;
    let mut seen = Vec::new();
    loop {
        let message = kin.read().await.expect("kin answered the prompt");
        if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
            return (seen, message);
        }
        let replies = if message.get("method").is_some() && message.get("id").is_some() {
            on_ask(&message, &seen)
        } else {
            Vec::new()
        };
        seen.push(message);
        for reply in replies {
            kin.send(&reply).await;
        }
    }
}

/// The answer selecting the option of `kind` in permission request `ask`.
fn choose(ask: &Value, kind: &str) -> Value {
    let options = ask["params"]["options"].as_array().unwrap();
    let option = options.iter().find(|o| o["kind"] == kind).unwrap();
    json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}})
}

/// `session/update`s of `kind` for `call`, in the order kin sent them.
fn updates<'a>(seen: &'a [Value], call: &str) -> Vec<&'a Value> {
    seen.iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .filter(|u| u["toolCallId"] == call)
        .collect()
}

fn started(seen: &[Value], call: &str) -> bool {
    updates(seen, call)
        .iter()
        .any(|u| u["sessionUpdate"] == "tool_call")
}

fn finished(seen: &[Value], call: &str) -> bool {
    updates(seen, call)
        .iter()
        .any(|u| u["status"] == "completed" || u["status"] == "failed")
}

/// The `tool` messages of a model request: (call id, content).
fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].to_string(),
            )
        })
        .collect()
}

/// The events of the one top-level session log under `home`.
fn root_log(kin: &Wire) -> Vec<Value> {
    let path = common::session_files(kin.home.path())
        .into_iter()
        .find(|p| !p.parent().unwrap().ends_with("children"))
        .unwrap();
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// (type, call id) of the log's tool events, in log order.
fn tool_events(log: &[Value]) -> Vec<(String, String)> {
    log.iter()
        .filter_map(|e| {
            let id = match e["type"].as_str()? {
                "tool/call" => e["data"]["callId"].as_str()?,
                "tool/result" => e["data"]["message"]["source"]["callId"].as_str()?,
                _ => return None,
            };
            Some((e["type"].as_str()?.to_owned(), id.to_owned()))
        })
        .collect()
}

/// What a one-at-a-time run logs for `calls`: each call, then its result.
fn in_model_order(calls: &[&str]) -> Vec<(String, String)> {
    let event = |kind: &str, id: &str| (kind.to_owned(), id.to_owned());
    calls
        .iter()
        .flat_map(|id| [event("tool/call", id), event("tool/result", id)])
        .collect()
}

fn child_call(label: &str) -> String {
    json!({"description": label, "prompt": format!("answer as {label}")}).to_string()
}

/// The parent's step asking for three foreground children, `c1`..`c3`.
fn ask_three_children(server: &MockServer) {
    let calls = [child_call("one"), child_call("two"), child_call("three")];
    server.push(tool_calls_reply(&[
        ("c1", "subagent", &calls[0]),
        ("c2", "subagent", &calls[1]),
        ("c3", "subagent", &calls[2]),
    ]));
}

/// The parent asks for three children, each answered after `delay`, then ends.
fn script_three_children(server: &MockServer, delay: Duration) {
    ask_three_children(server);
    for _ in 0..3 {
        let answer = text_reply(&["a child's answer"]);
        server.push(Reply::Delayed(delay, Box::new(answer)));
    }
    server.push(text_reply(&["all three answered"]));
}

#[tokio::test]
async fn three_foreground_children_run_side_by_side_and_commit_in_order() {
    let server = MockServer::start();
    let mut kin = kin_on(&server, None);
    let session = kin.open_session().await;
    script_three_children(&server, Duration::from_millis(300));
    let (seen, answer) = drive(&mut kin, 2, prompt(&session, "fan out"), |_, _| vec![]).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Every child asked the model before any child was answered: they ran side by side.
    let asked = (1..4).map(|n| server.request(n).unwrap().received).max();
    let first_answer = (1..4).map(|n| server.answered(n).unwrap()).min();
    assert!(
        asked < first_answer,
        "the children's model calls overlapped"
    );
    // All three were shown started before any finished.
    let first_done = seen
        .iter()
        .position(|m| m["params"]["update"]["status"] == "completed")
        .unwrap();
    for call in ["c1", "c2", "c3"] {
        let shown = seen
            .iter()
            .position(|m| {
                m["params"]["update"]["toolCallId"] == call
                    && m["params"]["update"]["sessionUpdate"] == "tool_call"
            })
            .unwrap();
        assert!(shown < first_done, "{call} shown started first");
    }
    // The log and the next request are a one-at-a-time run's.
    assert_eq!(
        tool_events(&root_log(&kin)),
        in_model_order(&["c1", "c2", "c3"])
    );
    let told = tool_messages(&server.request(4).unwrap().body);
    let ids: Vec<&str> = told.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
    assert!(told
        .iter()
        .all(|(_, text)| text.contains("a child's answer")));
}

#[tokio::test]
async fn a_write_between_two_reads_waits_for_the_first_and_holds_back_the_second() {
    let server = MockServer::start();
    let mut kin = kin_on(&server, None);
    std::fs::write(kin.cwd.path().join("f.txt"), "old text\n").unwrap();
    let session = kin.open_session().await;
    let read = json!({"path": "f.txt"}).to_string();
    let write = json!({"path": "f.txt", "content": "new text\n"}).to_string();
    server.push(tool_calls_reply(&[
        ("r1", "read", &read),
        ("w", "write", &write),
        ("r2", "read", &read),
    ]));
    server.push(text_reply(&["done"]));
    let mut asked = 0;
    let (_, answer) = drive(
        &mut kin,
        2,
        prompt(&session, "read, write, read"),
        |ask, seen| {
            assert_eq!(ask["method"], "session/request_permission");
            asked += 1;
            // The write asks (`ask` mode): the first read is over, the second not begun.
            assert!(
                finished(seen, "r1"),
                "the first read ended before the write"
            );
            assert!(!started(seen, "r2"), "the second read waits for the write");
            vec![choose(ask, "allow_once")]
        },
    )
    .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(asked, 1);
    let told = tool_messages(&server.request(1).unwrap().body);
    assert!(told[0].1.contains("old text"), "{told:?}");
    assert!(told[2].1.contains("new text"), "{told:?}");
}

#[tokio::test]
async fn two_siblings_permission_asks_are_both_pending_and_each_answered() {
    let server = MockServer::start();
    let mut kin = kin_on(&server, None);
    let outside = tempfile::tempdir().unwrap();
    for name in ["a.txt", "b.txt"] {
        std::fs::write(outside.path().join(name), format!("text of {name}\n")).unwrap();
    }
    let session = kin.open_session().await;
    let path = |name: &str| json!({"path": outside.path().join(name)}).to_string();
    let (a, b) = (path("a.txt"), path("b.txt"));
    server.push(tool_calls_reply(&[("ra", "read", &a), ("rb", "read", &b)]));
    server.push(text_reply(&["both read"]));
    let mut pending: Vec<Value> = Vec::new();
    let (_, answer) = drive(&mut kin, 2, prompt(&session, "read both"), |ask, _| {
        pending.push(ask.clone());
        if pending.len() < 2 {
            return Vec::new();
        }
        // Both are at the editor at once, each for its own call; answered last first.
        let mut calls: Vec<&str> = pending
            .iter()
            .map(|p| p["params"]["toolCall"]["toolCallId"].as_str().unwrap())
            .collect();
        calls.sort();
        assert_eq!(calls, ["ra", "rb"]);
        pending
            .iter()
            .rev()
            .map(|p| choose(p, "allow_once"))
            .collect()
    })
    .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(pending.len(), 2, "each call asked once");
    let told = tool_messages(&server.request(1).unwrap().body);
    assert!(told[0].1.contains("text of a.txt"), "{told:?}");
    assert!(told[1].1.contains("text of b.txt"), "{told:?}");
}

#[tokio::test]
async fn cancel_during_a_fan_out_answers_cancelled_with_a_result_for_every_call() {
    let server = MockServer::start();
    let mut kin = kin_on(&server, None);
    let session = kin.open_session().await;
    ask_three_children(&server);
    server.set_default(Reply::Hang(Vec::new()));
    kin.send_prompt(2, &session, "fan out").await;
    // Once all three are shown started, the user cancels.
    let mut shown = 0;
    while shown < 3 {
        let message = kin.read().await.unwrap();
        if message["params"]["update"]["sessionUpdate"] == "tool_call" {
            shown += 1;
        }
    }
    kin.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}),
    )
    .await;
    let (_, answer) = kin.answer(&json!(2)).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let log = root_log(&kin);
    let expected = in_model_order(&["c1", "c2", "c3"]);
    assert_eq!(tool_events(&log), expected, "every call has its result");
    for result in log.iter().filter(|e| e["type"] == "tool/result") {
        assert_eq!(result["data"]["error"]["code"], "CANCELLED", "{result}");
    }
}

#[tokio::test]
async fn a_budget_with_room_for_one_more_child_admits_exactly_one_of_two_siblings() {
    let server = MockServer::start();
    // The parent's first call spends 25 tokens; each child may spend 1000 of the 300.
    let config = "[delegation]\nbudget_tokens = 300\nchild_budget_tokens = 1000\n";
    let mut kin = kin_on(&server, Some(config));
    let session = kin.open_session().await;
    let (one, two) = (child_call("one"), child_call("two"));
    server.push(tool_calls_reply(&[
        ("c1", "subagent", &one),
        ("c2", "subagent", &two),
    ]));
    server.push(text_reply(&["the admitted child's answer"]));
    server.push(text_reply(&["done"]));
    let (_, answer) = drive(&mut kin, 2, prompt(&session, "two children"), |_, _| vec![]).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(server.request_count(), 3, "one child asked the model");
    let told = tool_messages(&server.request(2).unwrap().body);
    let admitted = told
        .iter()
        .filter(|(_, text)| text.contains("the admitted child's answer"))
        .count();
    let refused: Vec<&String> = told
        .iter()
        .map(|(_, text)| text)
        .filter(|text| text.contains("budget_tokens of 300 is spent"))
        .collect();
    assert_eq!((admitted, refused.len()), (1, 1), "{told:?}");
    assert!(
        refused[0].contains("set aside for subagents still running"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn two_siblings_editing_one_file_the_second_edit_fails_clearly() {
    let server = MockServer::start();
    let mut kin = kin_on(&server, Some("[tools]\nmax_parallel = 8\n"));
    std::fs::write(kin.cwd.path().join("f.txt"), "base\n").unwrap();
    let session = kin.open_session().await;
    // The session allows edits without asking.
    let mode = json!({"sessionId": session, "modeId": "allow"});
    let (_, answer) = kin.request(3, "session/set_mode", mode).await;
    assert!(answer.get("error").is_none(), "{answer}");
    let (one, two) = (child_call("one"), child_call("two"));
    server.push(tool_calls_reply(&[
        ("c1", "subagent", &one),
        ("c2", "subagent", &two),
    ]));
    // Each child reads the file (once both have asked), then edits it (once both have read).
    let read = json!({"path": "f.txt"}).to_string();
    for _ in 0..2 {
        server.push(Reply::Gated {
            requests: 3,
            reply: Box::new(tool_calls_reply(&[("read", "read", &read)])),
        });
    }
    for n in 1..3 {
        let edit =
            json!({"path": "f.txt", "old_string": "base", "new_string": format!("child {n}")});
        let reply = tool_calls_reply(&[("edit", "edit", &edit.to_string())]);
        server.push(Reply::Gated {
            requests: 5,
            reply: Box::new(reply),
        });
    }
    server.push(text_reply(&["a child's answer"]));
    server.push(text_reply(&["a child's answer"]));
    server.push(text_reply(&["done"]));
    let (_, answer) = drive(&mut kin, 2, prompt(&session, "two editors"), |_, _| vec![]).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // One edit landed; the other was refused, saying why, and did not overwrite it.
    let edits: Vec<String> = (5..7)
        .map(|n| server.request(n).unwrap().body)
        .flat_map(|body| tool_messages(&body))
        .filter(|(id, _)| id == "edit")
        .map(|(_, text)| text)
        .collect();
    let refused: Vec<&String> = edits
        .iter()
        .filter(|t| t.contains("f.txt changed since you last read or wrote it"))
        .collect();
    assert_eq!(refused.len(), 1, "{edits:?}");
    assert_eq!(edits.len(), 2, "{edits:?}");
    let text = std::fs::read_to_string(kin.cwd.path().join("f.txt")).unwrap();
    assert!(text == "child 1\n" || text == "child 2\n", "{text}");
}

/// Three children with a model delay under `config`; whether their model calls overlapped.
async fn children_overlap(config: &str) -> bool {
    let server = MockServer::start();
    let mut kin = kin_on(&server, Some(config));
    let session = kin.open_session().await;
    script_three_children(&server, Duration::from_millis(100));
    let (_, answer) = drive(&mut kin, 2, prompt(&session, "fan out"), |_, _| vec![]).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    // Overlap: some child asked before another child's answer was out.
    (1..4).any(|a| {
        (1..4).any(|b| {
            a != b
                && server.request(a).unwrap().received < server.answered(b).unwrap()
                && server.request(b).unwrap().received < server.answered(a).unwrap()
        })
    })
}

#[tokio::test]
async fn max_parallel_of_one_and_a_cap_of_one_request_run_the_children_one_at_a_time() {
    assert!(children_overlap("[tools]\nmax_parallel = 3\n").await);
    assert!(!children_overlap("[tools]\nmax_parallel = 1\n").await);
    assert!(!children_overlap("max_concurrent_requests = 1\n").await);
}

#[tokio::test]
async fn a_max_parallel_of_zero_is_refused_clearly() {
    let home = common::home_with("[tools]\nmax_parallel = 0\n");
    let output = std::process::Command::new(common::kin_binary())
        .arg("config")
        .env("XDG_CONFIG_HOME", home.path().join("config"))
        .env("KIN_HOME", home.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("`tools.max_parallel` must be a whole number above zero, got 0"),
        "{stderr}"
    );
}

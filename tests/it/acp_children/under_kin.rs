//! The fake child under a kin parent: one-shot background runs, the fs bridge, time limits,
//! the idle watchdog, cost budgets, partial output and a foreign session's text.

use serde_json::{json, Value};

use super::{ask_fake, command_for, fake_agent, kin_parent_of, log_at_depth, marker, run};
use crate::common::{self, assert_none_left, Script};

#[tokio::test]
async fn a_background_child_that_cannot_continue_sessions_is_a_one_shot_task() {
    // The fake child's initialize advertises nothing: its background run is a plain task, and
    // a message to that task's id is refused, not delivered.
    let marker = marker("one-shot");
    let table = fake_agent("", &marker, "ok");
    let parent = ask_fake(true)
        .wait_for("collect", "subagent-1")
        .call(
            "again",
            "send_message",
            json!({"subagent_id": "subagent-1", "message": "More."}),
        )
        .text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains("started background subagent task subagent-1\\n(one-shot"),
        "{parent_log}"
    );
    assert!(
        parent_log.contains("depth 1 env 1"),
        "task_output gives the child's answer: {parent_log}"
    );
    assert!(
        parent_log.contains(
            "is a task id, not a continuable subagent's id (a one-shot background child cannot be \
             continued); the message was not delivered"
        ),
        "{parent_log}"
    );
    assert!(!parent_log.contains("providerData"), "{parent_log}");
}

#[tokio::test]
async fn a_background_child_that_crashes_before_saying_is_a_failed_one_shot_task() {
    // The probe learns nothing (the child exits on initialize): the one-shot run reports why.
    let marker = marker("probe-crash");
    let table = fake_agent("", &marker, "crash");
    let parent = ask_fake(true)
        .wait_for("collect", "subagent-1")
        .text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains("started background subagent task subagent-1"),
        "{parent_log}"
    );
    assert!(
        parent_log.contains("the ACP child exited during initialize (exit code 3)"),
        "{parent_log}"
    );
}

#[tokio::test]
async fn a_misbehaving_child_cannot_write_outside_its_cwd_through_the_fs_bridge() {
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path().join("work");
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, cwd.join("link")).unwrap();
    let marker = marker("fs-escape");
    let mut command = command_for("fs-escape", &marker, &cwd);
    command.link = Some(kin::acp_client::ChildLink {
        parent: "parent".into(),
        child: "child".into(),
        call_id: None,
        title: None,
        sink: std::sync::Arc::new(common::Nowhere),
        client: None,
    });
    assert_eq!(run(command).await.unwrap(), "ok error error");
    assert_eq!(
        std::fs::read_to_string(cwd.join("inside.txt")).unwrap(),
        "x"
    );
    assert!(!root.path().join("escaped.txt").exists());
    assert!(!elsewhere.join("escaped.txt").exists());
}

#[tokio::test]
async fn an_acp_child_past_its_time_limit_is_cancelled_and_reports_timed_out() {
    // The fake child in `wait` mode answers its prompt only when cancelled: the call's
    // `timeout` is what ends it.
    let marker = marker("acp-timeout");
    let table = fake_agent("", &marker, "wait");
    let parent = Script::new()
        .call(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello.", "timeout": 0.5}),
        )
        .text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains(
            "Error: subagent run timed_out\\nDiagnostic: the time limit of 0.5s was reached"
        ),
        "{parent_log}"
    );
    assert!(parent_log.contains("SUBAGENT_TIMED_OUT"), "{parent_log}");
    assert_none_left(&marker).await;
}

/// The text of the parent's `tool/result` for call `call_id` in `log`.
fn result_text(log: &str, call_id: &str) -> String {
    log.lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|e| e["type"] == "tool/result" && e["data"]["message"]["source"]["callId"] == call_id)
        .and_then(|e| {
            e["data"]["message"]["content"][0]["content"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no result for {call_id}: {log}"))
}

#[tokio::test]
async fn an_acp_child_that_crashes_mid_answer_hands_back_its_exit_stderr_and_partial_output() {
    let marker = marker("acp-partial");
    let table = fake_agent("", &marker, "partial-crash");
    let parent = ask_fake(false).text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let told = result_text(log_at_depth(&logs, 0), "ask");
    assert_eq!(
        told,
        "Error: subagent run failed\nDiagnostic: the ACP child exited during session/prompt \
         (exit code 3); last stderr line: fake child: lost the model, Authorization: Bearer \
         [redacted]\nPartial output before the run ended:\nHalf an answer"
    );
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn an_acp_child_that_goes_quiet_meets_the_idle_watchdog() {
    // The child answers the handshake, then sends nothing: no update for 0.3s is idle.
    let marker = marker("idle");
    let table = fake_agent(
        "[delegation]\nidle_timeout = \"300ms\"\n\n",
        &marker,
        "wait",
    );
    let parent = ask_fake(false).text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains(
            "Error: subagent run timed_out\\nDiagnostic: no model output or tool progress for 0.3s"
        ),
        "{parent_log}"
    );
}

#[tokio::test]
async fn an_acp_child_is_stopped_at_the_budget_of_the_cost_it_reports() {
    // The child reports a cost of 0.5 in a usage_update, then waits: over a 0.25 budget.
    let marker = marker("budget");
    let table = fake_agent(
        "[delegation]\nchild_budget_cost = 0.25\n\n",
        &marker,
        "usage",
    );
    let parent = ask_fake(false).text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains("Error: subagent run budget_exhausted"),
        "{parent_log}"
    );
}

#[tokio::test]
async fn list_agents_shows_what_an_acp_child_reported_against_its_cost_budget() {
    // The child advertises loadSession (so it is continuable and listed), reports a cost of
    // 0.5 and answers: under a child cost budget of 2.
    let marker = marker("priced");
    let table = fake_agent(
        "[delegation]\nchild_budget_cost = 2.0\n\n",
        &marker,
        "priced",
    );
    let parent = ask_fake(true)
        .wait_for("first", "subagent-1")
        .call("listed", "list_agents", json!({}))
        .text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains(
            "turns: 1, last stop: completed, model: default, budget: 0.5000 of 2 cost spent in \
             its last activation, 1.5000 left — Ask fake"
        ),
        "{parent_log}"
    );
}

#[tokio::test]
async fn text_a_child_sends_under_another_sessions_id_is_refused() {
    let marker = marker("foreign");
    let table = fake_agent("", &marker, "foreign");
    let parent = ask_fake(false).text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains("own answer, foreign request refused"),
        "{parent_log}"
    );
    assert!(!parent_log.contains("INJECTED"), "{parent_log}");
}

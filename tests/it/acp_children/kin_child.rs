//! kin as the child of kin: the depth across the process boundary, one-shot and continuable
//! children, a child session reopened in a new process and continued after a parent restart.

use std::path::Path;
use std::time::Duration;

use kin::acp_client::{AcpChild, ChildCommand, ChildError};
use kin::config::AcpPermission;
use kin::scenario::{RunOptions, Runner, Step};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{
    ask_kin_steps, command_for, kin_parent_of_kin, log_at_depth, marker, prompt, session_logs,
    write_config,
};
use crate::common::{self, assert_none_left, Script};

#[tokio::test]
async fn kin_delegates_to_kin_over_acp_and_the_depth_crosses_the_process_boundary() {
    // The child tries to delegate further (refused: depth 2 > 1), then answers.
    let child = Script::new()
        .call(
            "deeper",
            "subagent",
            json!({"description": "Go deeper", "prompt": "Go deeper."}),
        )
        .text("ANSWER_FROM_THE_CHILD");
    let parent = Script::new()
        .call(
            "ask-kin",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say CHILD_OK."}),
        )
        .text("PARENT_DONE");
    let logs = kin_parent_of_kin(parent, child, "").await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains(r#""text":"ANSWER_FROM_THE_CHILD""#),
        "the child's answer is the tool result: {parent_log}"
    );
    let child_log = log_at_depth(&logs, 1);
    assert!(
        child_log.contains("subagent depth 2 exceeds maxDepth 1"),
        "the child's own delegation is refused: {child_log}"
    );
}

#[tokio::test]
async fn a_background_child_configured_not_continuable_is_a_one_shot_task() {
    let child = Script::new().text("ANSWER_FROM_THE_CHILD");
    let parent = Script::new()
        .call(
            "ask-kin",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say CHILD_OK.", "run_in_background": true}),
        )
        .wait_for("collect", "subagent-1")
        .text("PARENT_DONE");
    let logs = kin_parent_of_kin(parent, child, "continuable = false\n").await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains("started background subagent task subagent-1"),
        "{parent_log}"
    );
    assert!(
        parent_log.contains("ANSWER_FROM_THE_CHILD"),
        "task_output gives the child's answer: {parent_log}"
    );
}

#[tokio::test]
async fn session_new_records_the_depth_a_parent_sends_and_refuses_a_bad_one() {
    let root = tempfile::tempdir().unwrap();
    let (home, cwd) = (root.path().join("home"), root.path().join("cwd"));
    std::fs::create_dir_all(&cwd).unwrap();
    let replay = Script::new().text("unused").dir();
    let options = RunOptions {
        binary: common::kin_binary(),
        replay_dir: Some(replay.path().to_owned()),
        env: Vec::new(),
        home: home.clone(),
        cwd: cwd.clone(),
    };
    let mut runner = Runner::start(&options, |_| {}).unwrap();
    let new_session = |depth: Value| Step::Request {
        method: "session/new".into(),
        params: json!({"cwd": "{{cwd}}", "mcpServers": [], "_meta": {"kin.delegationDepth": depth}}),
    };
    for step in [
        Step::Initialize {
            client_capabilities: None,
        },
        new_session(json!(3)),
        new_session(json!("three")),
    ] {
        runner.play(&step).await.unwrap();
    }
    let (stdout, _) = runner.finish().await.unwrap();
    let logs = session_logs(&home);
    assert_eq!(logs.len(), 1, "only the valid request made a session");
    assert_eq!(logs[0].0["delegationDepth"], 3);
    assert!(
        stdout
            .iter()
            .any(|line| line.contains("-32602") && line.contains("kin.delegationDepth")),
        "{stdout:?}"
    );
}

#[tokio::test]
async fn a_kin_child_is_reopened_in_a_new_process_and_continues_its_session() {
    let root = tempfile::tempdir().unwrap();
    let (home, cwd) = (root.path().join("home"), root.path().join("cwd"));
    std::fs::create_dir_all(&cwd).unwrap();
    let replay = Script::new().text("ANSWER_FROM_THE_CHILD").dir();
    kin::process::guard::enable(common::kin_binary());
    let command = ChildCommand {
        program: common::kin_binary().display().to_string(),
        args: vec![
            "acp".into(),
            "--replay".into(),
            replay.path().display().to_string(),
        ],
        env: vec![("KIN_HOME".into(), home.display().to_string())],
        child_env: Default::default(),
        private: Default::default(),
        cwd: cwd.clone(),
        permission: AcpPermission::Reject,
        ceiling: None,
        depth: 1,
        initialize_timeout: Duration::from_secs(20),
        eof_grace: Duration::from_secs(1),
        term_grace: Duration::from_secs(1),
        link: None,
        remote_cwd: None,
        mcp_servers: Vec::new(),
        sandbox: None,
    };
    let cancel = CancellationToken::new();
    let mut first = AcpChild::start(command.clone(), &cancel).await.unwrap();
    assert_eq!(first.continuation_method(), Some("session/resume"));
    let session = first.session_id.clone();
    let answer = prompt(&mut first, "First.", &cancel).await.unwrap();
    assert_eq!(answer.text, "ANSWER_FROM_THE_CHILD");
    first.shutdown().await;

    let mut second = AcpChild::reopen(command.clone(), &session, &cancel)
        .await
        .unwrap();
    // A fresh process replays its script from the start: the same answer, one more turn.
    let answer = prompt(&mut second, "Second.", &cancel).await.unwrap();
    assert_eq!(answer.text, "ANSWER_FROM_THE_CHILD");
    second.shutdown().await;

    let logs = session_logs(&home);
    assert_eq!(logs.len(), 1, "one child session, continued");
    assert_eq!(logs[0].0["id"], session.as_str());
    assert_eq!(logs[0].0["delegationDepth"], 1);
    let turns = logs[0].1.matches(r#""type":"turn/start""#).count();
    assert_eq!(turns, 2, "{}", logs[0].1);
    assert_none_left(&replay.path().display().to_string()).await;

    // A child that can continue no session says so.
    let marker = marker("not-continuable");
    let error = AcpChild::reopen(command_for("ok", &marker, &cwd), "fake-session", &cancel)
        .await
        .err()
        .unwrap();
    assert_eq!(error, ChildError::NotContinuable);
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_continuable_kin_child_answers_a_follow_up_in_a_new_process() {
    let child = Script::new().text("ANSWER_FROM_THE_CHILD");
    let parent = Script::new()
        .call(
            "start",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say it.", "run_in_background": true}),
        )
        .result("start", "started subagent {{id:1}} as task subagent-1")
        .wait_for("first", "subagent-1")
        .call(
            "again",
            "send_message",
            json!({"subagent_id": "{{id:1}}", "message": "Say it again."}),
        )
        .wait_for("second", "subagent-2")
        .call("listed", "list_agents", json!({}))
        .text("PARENT_DONE");
    // Not configured: kin's initialize advertises resume and load, so the child is continuable.
    let logs = kin_parent_of_kin(parent, child, "").await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains("turns: 2, last stop: completed") && parent_log.contains("— Ask kin"),
        "list_agents shows the ACP child's turns, last stop and title: {parent_log}"
    );
    assert!(
        parent_log.contains("message started task subagent-2 continuing subagent"),
        "{parent_log}"
    );
    assert_eq!(
        parent_log.matches("ANSWER_FROM_THE_CHILD").count(),
        2,
        "both activations answered: {parent_log}"
    );
    // At depth 1: the parent's record of the child (its descriptor holds the child's own
    // session id) and the child kin's session, continued: two turns in one file.
    let children: Vec<&(Value, String)> = logs
        .iter()
        .filter(|(header, _)| header["delegationDepth"] == 1)
        .collect();
    assert_eq!(children.len(), 2);
    let (record, session) = if children[0].1.contains(r#""type":"subagent/descriptor""#) {
        (children[0], children[1])
    } else {
        (children[1], children[0])
    };
    // The child kin's session names the record (kin's id for the child) as its parent; the
    // record keeps the turns the parent gave it, titled by the delegation's description.
    assert_eq!(session.0["parentSession"], record.0["id"]);
    assert_eq!(record.1.matches(r#""type":"turn/start""#).count(), 2);
    assert_eq!(record.1.matches(r#""type":"turn/end""#).count(), 2);
    assert!(record.1.contains(r#""title":"Ask kin""#), "{}", record.1);
    let remote = session.0["id"].as_str().unwrap();
    assert!(
        record
            .1
            .contains(&format!(r#""providerData":{{"sessionId":"{remote}""#)),
        "{}",
        record.1
    );
    assert_eq!(session.1.matches(r#""type":"turn/start""#).count(), 2);
}

#[tokio::test]
async fn a_continuable_kin_child_is_continued_after_the_parent_restarts() {
    let root = tempfile::tempdir().unwrap();
    let (home, cwd, config) = (
        root.path().join("home"),
        root.path().join("cwd"),
        root.path().join("config"),
    );
    std::fs::create_dir_all(&cwd).unwrap();
    let child_dir = Script::new().text("ANSWER_FROM_THE_CHILD").dir();
    write_config(
        &config,
        &format!(
            "[acp_agents.kin]\ncommand = {:?}\nargs = [\"acp\", \"--replay\", {:?}]\n",
            common::kin_binary().display().to_string(),
            child_dir.path().display().to_string(),
        ),
    );
    let parent = |replay: &Path| RunOptions {
        binary: common::kin_binary(),
        replay_dir: Some(replay.to_owned()),
        env: vec![("XDG_CONFIG_HOME".into(), config.display().to_string())],
        home: home.clone(),
        cwd: cwd.clone(),
    };
    let started = "started subagent {{id:1}} as task subagent-1";
    // The first parent process starts the child and collects its answer.
    let first = Script::new()
        .call(
            "start",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say it.", "run_in_background": true}),
        )
        .result("start", started)
        .wait_for("first", "subagent-1")
        .text("FIRST_DONE")
        .dir();
    let mut runner = Runner::start(&parent(first.path()), |_| {}).unwrap();
    for step in ask_kin_steps() {
        runner.play(&step).await.unwrap();
    }
    runner.finish().await.unwrap();
    let logs = session_logs(&home);
    let parent_id = logs
        .iter()
        .find(|(header, _)| header["delegationDepth"] == 0)
        .map(|(header, _)| header["id"].as_str().unwrap().to_owned())
        .unwrap();

    // A new parent process loads the session and continues the child.
    let second = Script::new()
        .result("start", started)
        .call(
            "again",
            "send_message",
            json!({"subagent_id": "{{id:1}}", "message": "Say it again."}),
        )
        .wait_for("second", "subagent-1")
        .text("PARENT_DONE")
        .dir();
    let mut runner = Runner::start(&parent(second.path()), |_| {}).unwrap();
    for step in [
        Step::Initialize {
            client_capabilities: None,
        },
        Step::Request {
            method: "session/load".into(),
            params: json!({"sessionId": parent_id, "cwd": "{{cwd}}", "mcpServers": []}),
        },
        Step::Request {
            method: "session/prompt".into(),
            params: json!({"sessionId": parent_id, "prompt": [{"type": "text", "text": "Again."}]}),
        },
    ] {
        runner.play(&step).await.unwrap();
    }
    runner.finish().await.unwrap();
    let logs = session_logs(&home);
    let parent_log = log_at_depth(&logs, 0);
    assert!(parent_log.contains("continuing subagent"), "{parent_log}");
    assert_eq!(
        parent_log.matches("ANSWER_FROM_THE_CHILD").count(),
        2,
        "the child answered before and after the restart: {parent_log}"
    );
    assert_none_left(&child_dir.path().display().to_string()).await;
}

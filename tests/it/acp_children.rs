//! ACP child agents through real processes: the fake misbehaving child
//! (`examples/fake_acp_child.rs`) for each fault, each named and leaving no process; and kin as
//! the child of kin, the delegation depth crossing the process boundary; and, when they are on
//! PATH, the real peers codex-acp and claude-agent-acp answering from a local mock model.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1::StopReason;
use common::Script;
use kin::acp_client::{AcpChild, ChildCommand, ChildError, PromptOutcome, Steer};
use kin::config::AcpPermission;
use kin::scenario::{RunOptions, Runner, Step};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// A guard against a broken kin, not a timing assertion.
const DEADLINE: Duration = Duration::from_secs(60);

/// A string unique to this test process and `name`: it tags the processes of one test.
fn marker(name: &str) -> String {
    format!("acp-child-marker-{}-{name}", std::process::id())
}

/// Polls until no process carries `marker`: process exits have no event to wait on here.
async fn assert_none_left(marker: &str) {
    let start = Instant::now();
    while !common::marked(marker).is_empty() {
        assert!(
            start.elapsed() < DEADLINE,
            "processes outlived their run: {:?}",
            common::marked(marker)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn command_for(mode: &str, marker: &str, cwd: &Path) -> ChildCommand {
    // Children run under the process guard, as in kin.
    kin::process::guard::enable(common::kin_binary());
    ChildCommand {
        program: common::fake_acp_child().display().to_string(),
        args: vec![marker.to_owned(), mode.to_owned()],
        env: Vec::new(),
        cwd: cwd.to_owned(),
        permission: AcpPermission::Reject,
        ceiling: None,
        depth: 1,
        initialize_timeout: Duration::from_secs(20),
        eof_grace: Duration::from_millis(200),
        term_grace: Duration::from_millis(200),
        link: None,
        remote_cwd: None,
        mcp_servers: Vec::new(),
        sandbox: None,
    }
}

/// One prompt with nothing steered into it.
async fn prompt(
    child: &mut AcpChild,
    text: &str,
    cancel: &CancellationToken,
) -> Result<PromptOutcome, ChildError> {
    let (_, mut no_steers) = tokio::sync::mpsc::unbounded_channel();
    child.prompt_steered(text, cancel, &mut no_steers).await
}

/// Starts the fake child in `mode` and prompts it once; returns the answer text or the error,
/// after the teardown.
async fn run(command: ChildCommand) -> Result<String, ChildError> {
    let cancel = CancellationToken::new();
    let mut child = AcpChild::start(command, &cancel).await?;
    let outcome = prompt(&mut child, "hello", &cancel).await;
    child.shutdown().await;
    outcome.map(|outcome| outcome.text)
}

#[tokio::test]
async fn a_well_behaved_child_answers_with_its_message_text_and_gets_the_depth() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("ok");
    let answer = run(command_for("ok", &marker, cwd.path())).await.unwrap();
    assert_eq!(
        answer, "depth 1 env 1",
        "thoughts are not part of the answer"
    );
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_child_that_takes_images_and_resources_gets_its_prompt_as_those_blocks() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("rich");
    let cancel = CancellationToken::new();
    let mut child = AcpChild::start(command_for("rich", &marker, cwd.path()), &cancel)
        .await
        .unwrap();
    assert_eq!(
        child.capabilities["promptCapabilities"],
        json!({"image": true, "embeddedContext": true})
    );
    let content = vec![
        json!({"type": "text", "text": "look"}),
        json!({"type": "image", "mimeType": "image/png", "data": "iVBO"}),
        json!({"type": "resource", "resource": {"uri": "file:///w/a.md", "text": "hello"}}),
    ];
    let (_steer, mut no_steers) = tokio::sync::mpsc::unbounded_channel::<Steer>();
    let outcome = child
        .prompt_content_steered("look", content, &cancel, &mut no_steers)
        .await
        .unwrap();
    assert_eq!(
        outcome.text,
        "blocks text,image:iVBO,resource:file:///w/a.md"
    );
    child.shutdown().await;
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_slow_start_is_waited_for() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("slow");
    let answer = run(command_for("slow", &marker, cwd.path())).await.unwrap();
    assert_eq!(answer, "depth 1 env 1");
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_crash_names_its_exit_status_and_stderr() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("crash");
    let error = run(command_for("crash", &marker, cwd.path()))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("exited during initialize (exit code 3)")
            && error.contains("fake child: crashing on purpose"),
        "{error}"
    );
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_remote_child_that_goes_away_is_a_broken_connection() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("remote-crash");
    let mut command = command_for("crash", &marker, cwd.path());
    command.remote_cwd = Some("/on/the/other/host".into());
    let error = run(command).await.unwrap_err().to_string();
    assert!(
        error.starts_with(
            "the connection to the remote ACP child broke during initialize (exit code 3)"
        ),
        "{error}"
    );
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_child_that_never_answers_initialize_times_out_and_is_killed() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("hang");
    let mut command = command_for("hang", &marker, cwd.path());
    command.initialize_timeout = Duration::from_millis(300);
    let error = run(command).await.unwrap_err();
    assert!(
        matches!(error, ChildError::InitializeTimeout { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("within 300ms"), "{error}");
    // It ignores stdin's end and SIGTERM: only SIGKILL ended it.
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn garbage_output_is_named() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("garbage");
    let error = run(command_for("garbage", &marker, cwd.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ChildError::Garbage { .. }) && error.to_string().contains("not JSON-RPC"),
        "{error}"
    );
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_stop_reason_that_is_not_acp_is_named() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("bad-stop");
    let error = run(command_for("bad-stop", &marker, cwd.path()))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ChildError::BadAnswer { method, .. } if method == "session/prompt"),
        "{error}"
    );
    assert!(error.to_string().contains("paused"), "{error}");
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_flood_is_cut_off() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("flood");
    let error = run(command_for("flood", &marker, cwd.path()))
        .await
        .unwrap_err();
    assert!(matches!(error, ChildError::Flood { .. }), "{error}");
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn permission_requests_follow_the_policy() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("permission");
    let mut allow = command_for("permission", &marker, cwd.path());
    allow.permission = AcpPermission::Allow;
    let answer: Value = serde_json::from_str(&run(allow).await.unwrap()).unwrap();
    assert_eq!(answer, json!({"outcome": "selected", "optionId": "yes"}));
    // Rejecting picks the child's reject option (`cancelled` would abort its run); `ask`
    // with no editor to ask rejects.
    for policy in [AcpPermission::Reject, AcpPermission::Ask] {
        let mut command = command_for("permission", &marker, cwd.path());
        command.permission = policy;
        // Under an `allow` parent (or none), `ask` allows as the parent's own tools would.
        command.ceiling = Some(std::sync::Arc::new(kin::tools::SessionPermissions::new(
            kin::tools::PermissionMode::Ask,
        )));
        let answer: Value = serde_json::from_str(&run(command).await.unwrap()).unwrap();
        assert_eq!(
            answer,
            json!({"outcome": "selected", "optionId": "no"}),
            "{policy:?}"
        );
    }
    assert_none_left(&marker).await;
}

#[tokio::test]
async fn cancelling_a_prompt_tells_the_child_and_tears_it_down() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker("wait");
    let cancel = CancellationToken::new();
    let mut child = AcpChild::start(command_for("wait", &marker, cwd.path()), &cancel)
        .await
        .unwrap();
    let prompting = CancellationToken::new();
    prompting.cancel();
    let outcome = prompt(&mut child, "hello", &prompting).await.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    child.shutdown().await;
    assert_none_left(&marker).await;
}

/// Prompts `child` with `prompt` and, once `ready` resolves, steers "also this" into the
/// running prompt; a refused steer leaves the child busy, so the prompt is cancelled then.
/// Returns the steer's verdict and the prompt's outcome, after the teardown.
async fn steer_into(
    mut child: AcpChild,
    prompt: &str,
    ready: impl std::future::Future<Output = ()>,
) -> (Result<(), String>, Result<PromptOutcome, ChildError>) {
    let (steers, mut steered) = tokio::sync::mpsc::unbounded_channel();
    let prompting = CancellationToken::new();
    let stop = prompting.clone();
    let steer = async move {
        ready.await;
        let (verdict, taken) = tokio::sync::oneshot::channel();
        let text = "also this".to_owned();
        steers.send(Steer { text, verdict }).unwrap();
        let verdict = taken.await.expect("a verdict");
        if verdict.is_err() {
            stop.cancel();
        }
        verdict
    };
    let (verdict, outcome) = tokio::join!(
        steer,
        child.prompt_steered(prompt, &prompting, &mut steered)
    );
    child.shutdown().await;
    (verdict, outcome)
}

/// [`steer_into`] the fake child in `mode`, at once (it reads one message at a time).
async fn steer_fake(mode: &str) -> (Result<(), String>, Result<PromptOutcome, ChildError>) {
    let cwd = tempfile::tempdir().unwrap();
    let marker = marker(mode);
    let command = command_for(mode, &marker, cwd.path());
    let child = AcpChild::start(command, &CancellationToken::new())
        .await
        .unwrap();
    let answer = steer_into(child, "hello", async {}).await;
    assert_none_left(&marker).await;
    answer
}

#[tokio::test]
async fn a_child_that_takes_a_second_prompt_is_steered_and_answers_both() {
    let (verdict, outcome) = steer_fake("steer").await;
    assert_eq!(verdict, Ok(()));
    let outcome = outcome.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::EndTurn);
    assert_eq!(outcome.text, "took: also this");
}

#[tokio::test]
async fn a_child_that_refuses_a_second_prompt_keeps_running_and_the_message_is_not_delivered() {
    let (verdict, outcome) = steer_fake("wait").await;
    assert_eq!(verdict, Err("busy with another prompt".to_owned()));
    // The refusal did not end the run: only the cancel after it did.
    assert_eq!(outcome.unwrap().stop_reason, StopReason::Cancelled);
}

#[tokio::test]
async fn a_busy_kin_child_refuses_a_steered_prompt_and_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut command = command_for("unused", &marker("busy-kin"), cwd.path());
    // The replayed turn streams one chunk and then waits until it is cancelled.
    command.program = common::kin_binary().display().to_string();
    let replay = common::snapshot_dir("busy-session");
    command.args = vec![
        "acp".into(),
        "--replay".into(),
        replay.display().to_string(),
    ];
    command.env = vec![
        ("KIN_HOME".into(), home.path().display().to_string()),
        (
            "XDG_CONFIG_HOME".into(),
            home.path().join("config").display().to_string(),
        ),
    ];
    let child = AcpChild::start(command, &CancellationToken::new())
        .await
        .unwrap();
    let log = home
        .path()
        .join(format!("sessions/{}.jsonl", child.session_id));
    // The child's turn is running once its first chunk is logged; no event tells us here.
    let running = async move {
        let start = Instant::now();
        while !std::fs::read_to_string(&log).is_ok_and(|text| text.contains("Working on it")) {
            assert!(start.elapsed() < DEADLINE, "the child's turn never started");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let (verdict, outcome) = steer_into(child, "Take your time.", running).await;
    let reason = verdict.unwrap_err();
    assert!(reason.contains("is already running a prompt"), "{reason}");
    let outcome = outcome.unwrap();
    assert_eq!(outcome.stop_reason, StopReason::Cancelled);
    assert_eq!(outcome.text, "Working on it");
}

#[tokio::test]
async fn a_missing_program_fails_to_start() {
    let cwd = tempfile::tempdir().unwrap();
    let mut command = command_for("ok", &marker("missing"), cwd.path());
    // Under the guard the start itself succeeds; the guard then exits 127.
    command.program = "/nonexistent/acp-agent".into();
    let error = run(command).await.unwrap_err().to_string();
    assert!(
        error.contains("exit code 127") || error.contains("could not start"),
        "{error}"
    );
}

/// Writes `text` as `$dir/kin/config.toml`.
fn write_config(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join("kin")).unwrap();
    std::fs::write(dir.join("kin/config.toml"), text).unwrap();
}

/// Every session log under `home`: (header, whole text).
fn session_logs(home: &Path) -> Vec<(Value, String)> {
    let mut found = Vec::new();
    let mut pending = vec![home.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap();
                if let Some(header) = text
                    .lines()
                    .next()
                    .and_then(|l| serde_json::from_str(l).ok())
                {
                    found.push((header, text));
                }
            }
        }
    }
    found
}

/// Runs `kin acp --replay parent` with one prompt; its config names `kin acp --replay child`
/// as the ACP agent `kin`. Returns the session logs and checks that no child kin is left.
async fn kin_parent_of_kin(parent: Script, child: Script, extra: &str) -> Vec<(Value, String)> {
    let child_dir = child.dir();
    let table = format!(
        "[acp_agents.kin]\ncommand = {:?}\nargs = [\"acp\", \"--replay\", {:?}]\n{extra}",
        common::kin_binary().display().to_string(),
        child_dir.path().display().to_string(),
    );
    kin_parent_of(parent, &table, &child_dir.path().display().to_string()).await
}

/// Runs `kin acp --replay parent` with one prompt and `config` as its config file. Returns the
/// session logs and checks that no process carrying `marker` is left.
async fn kin_parent_of(parent: Script, config_text: &str, marker: &str) -> Vec<(Value, String)> {
    let root = tempfile::tempdir().unwrap();
    let (home, cwd, config) = (
        root.path().join("home"),
        root.path().join("cwd"),
        root.path().join("config"),
    );
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let parent_dir = parent.dir();
    write_config(&config, config_text);
    let options = RunOptions {
        binary: common::kin_binary(),
        replay_dir: Some(parent_dir.path().to_owned()),
        env: vec![("XDG_CONFIG_HOME".into(), config.display().to_string())],
        home: home.clone(),
        cwd: cwd.clone(),
    };
    let mut runner = Runner::start(&options, |_| {}).unwrap();
    for step in [
        Step::Initialize {
            client_capabilities: None,
        },
        Step::NewSession { cwd: None },
        Step::Prompt {
            text: "Ask kin.".into(),
            session: None,
        },
    ] {
        runner.play(&step).await.unwrap();
    }
    let (stdout, _) = runner.finish().await.unwrap();
    assert!(
        stdout.iter().any(|line| line.contains("PARENT_DONE")),
        "the parent finished its turn"
    );
    assert_none_left(marker).await;
    session_logs(&home)
}

/// The log of the session at `depth` that ran a model (there is one; the parent's record of
/// an ACP child, at the same depth as the child's own session, ran none).
fn log_at_depth(logs: &[(Value, String)], depth: u32) -> &str {
    let found: Vec<&str> = logs
        .iter()
        .filter(|(header, _)| header["delegationDepth"] == depth)
        .filter(|(_, text)| text.contains(r#""type":"step/start""#))
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one session at depth {depth}");
    found[0]
}

#[tokio::test]
async fn kin_delegates_to_kin_over_acp_and_the_depth_crosses_the_process_boundary() {
    // The child tries to delegate further (refused: depth 2 > 1), then answers.
    let child = Script::new()
        .calls(&[(
            "deeper",
            "subagent",
            json!({"description": "Go deeper", "prompt": "Go deeper."}),
        )])
        .text("ANSWER_FROM_THE_CHILD");
    let parent = Script::new()
        .calls(&[(
            "ask-kin",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say CHILD_OK."}),
        )])
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
async fn a_background_child_that_cannot_continue_sessions_is_a_one_shot_task() {
    // The fake child's initialize advertises nothing: its background run is a plain task, and
    // a message to that task's id is refused, not delivered.
    let marker = marker("one-shot");
    let table = format!(
        "[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"ok\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello.", "run_in_background": true}),
        )])
        .calls(&[(
            "collect",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
        .calls(&[(
            "again",
            "send_message",
            json!({"subagent_id": "subagent-1", "message": "More."}),
        )])
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
    let table = format!(
        "[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"crash\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello.", "run_in_background": true}),
        )])
        .calls(&[(
            "collect",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
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
async fn a_background_child_configured_not_continuable_is_a_one_shot_task() {
    let child = Script::new().text("ANSWER_FROM_THE_CHILD");
    let parent = Script::new()
        .calls(&[(
            "ask-kin",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say CHILD_OK.", "run_in_background": true}),
        )])
        .calls(&[(
            "collect",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
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
        .calls(&[(
            "start",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say it.", "run_in_background": true}),
        )])
        .result("start", "started subagent {{id:1}} as task subagent-1")
        .calls(&[(
            "first",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
        .calls(&[(
            "again",
            "send_message",
            json!({"subagent_id": "{{id:1}}", "message": "Say it again."}),
        )])
        .calls(&[(
            "second",
            "task_output",
            json!({"task_id": "subagent-2", "wait": true}),
        )])
        .calls(&[("listed", "list_agents", json!({}))])
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
        .calls(&[(
            "start",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say it.", "run_in_background": true}),
        )])
        .result("start", started)
        .calls(&[(
            "first",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
        .text("FIRST_DONE")
        .dir();
    let mut runner = Runner::start(&parent(first.path()), |_| {}).unwrap();
    for step in [
        Step::Initialize {
            client_capabilities: None,
        },
        Step::NewSession { cwd: None },
        Step::Prompt {
            text: "Ask kin.".into(),
            session: None,
        },
    ] {
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
        .calls(&[(
            "again",
            "send_message",
            json!({"subagent_id": "{{id:1}}", "message": "Say it again."}),
        )])
        .calls(&[(
            "second",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
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

// ---- real peers (optional) ----------------------------------------------------------------
//
// codex-acp and claude-agent-acp as children of kin, answering from the local mock model
// server. Each runs when its binary is on PATH and writes a SKIPPED line otherwise. The mock
// wiring follows ../shared/reference/acp.md §12 (codex: a `mock` model provider speaking the
// Responses API; claude: ANTHROPIC_BASE_URL speaking the Messages API).

/// The peer `program` on PATH, or `None` after a visible skip line.
fn peer_on_path(test: &str, program: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        let line = format!("SKIPPED {test}: `{program}` is not on PATH\n");
        // Straight to the stderr handle, so the skip shows without --nocapture.
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    }
    found
}

/// One SSE event named `kind` whose data is `data` with `type: kind`.
fn typed_event(kind: &str, mut data: Value) -> Vec<u8> {
    data["type"] = json!(kind);
    format!("event: {kind}\ndata: {data}\n\n").into_bytes()
}

/// A parent that delegates once, in the foreground, to `tool` and then finishes.
fn parent_asking(tool: &str) -> Script {
    Script::new()
        .calls(&[(
            "ask-peer",
            tool,
            json!({"description": "Ask the peer", "prompt": "Reply with PEER_OK."}),
        )])
        .text("PARENT_DONE")
}

#[tokio::test]
async fn codex_acp_answers_from_the_mock_model_and_its_background_child_is_continuable() {
    let test = "codex_acp_answers_from_the_mock_model_and_its_background_child_is_continuable";
    let Some(codex) = peer_on_path(test, "codex-acp") else {
        return;
    };
    let mock = common::mock_openai::MockServer::start();
    let (id, text) = ("msg-1", "PEER_OK");
    mock.set_default(common::mock_openai::Reply::Stream(vec![
        typed_event("response.created", json!({"response": {"id": "resp-1"}})),
        typed_event(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "message", "role": "assistant", "id": id, "content": []}}),
        ),
        typed_event(
            "response.output_text.delta",
            json!({"item_id": id, "output_index": 0, "content_index": 0, "delta": text}),
        ),
        typed_event(
            "response.output_item.done",
            json!({"output_index": 0, "item": {"content": [{"type": "output_text", "text": text, "annotations": []}], "status": "completed", "type": "message", "role": "assistant", "id": id}}),
        ),
        typed_event(
            "response.completed",
            json!({"response": {"id": "resp-1", "usage": {"input_tokens": 10, "output_tokens": 1, "total_tokens": 11, "input_tokens_details": null, "output_tokens_details": null}}}),
        ),
    ]));
    let codex_home = tempfile::tempdir().unwrap();
    // The provider's name carries the marker: it tags codex-acp's command line.
    let marker = marker("codex-acp");
    let overrides = [
        "model_provider=\"mock\"".to_owned(),
        format!("model_providers.mock.name=\"{marker}\""),
        format!("model_providers.mock.base_url=\"{}\"", mock.base_url()),
        "model_providers.mock.env_key=\"MOCK_KEY\"".to_owned(),
        "model_providers.mock.wire_api=\"responses\"".to_owned(),
        "model=\"mock-model\"".to_owned(),
    ];
    let args: Vec<String> = overrides
        .iter()
        .flat_map(|o| ["-c".to_owned(), o.clone()])
        .collect();
    let table = format!(
        "[acp_agents.codex]\ncommand = {:?}\nargs = {args:?}\nenv = {{ CODEX_HOME = {:?}, MOCK_KEY = \"x\" }}\n",
        codex.display().to_string(),
        codex_home.path().display().to_string(),
    );
    // Then in the background: codex-acp's initialize advertises resume, so (asked by a probe
    // launch, as nothing is known yet in this kin) the child is continuable.
    let parent = Script::new()
        .calls(&[(
            "start",
            "subagent_codex",
            json!({"description": "Ask the peer", "prompt": "Reply with PEER_OK.", "run_in_background": true}),
        )])
        .calls(&[(
            "collect",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
        .text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(parent_log.contains("started subagent "), "{parent_log}");
    assert!(parent_log.contains("PEER_OK"), "{parent_log}");
    let record = log_at_depth(&logs, 1);
    assert!(
        record.contains(r#""providerData":{"sessionId""#),
        "{record}"
    );
    let logs = kin_parent_of(parent_asking("subagent_codex"), &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(parent_log.contains("PEER_OK"), "{parent_log}");
    assert!(
        mock.requests()
            .iter()
            .any(|r| r.path.ends_with("/responses")),
        "codex-acp asked the mock model"
    );
}

#[tokio::test]
async fn claude_agent_acp_answers_a_delegation_from_the_mock_model() {
    let test = "claude_agent_acp_answers_a_delegation_from_the_mock_model";
    let Some(claude) = peer_on_path(test, "claude-agent-acp") else {
        return;
    };
    let mock = common::mock_openai::MockServer::start();
    let text = "PEER_OK";
    // Every call gets the streamed answer (side calls that expect JSON may fail; the turn
    // does not depend on them).
    mock.set_default(common::mock_openai::Reply::Stream(vec![
        typed_event(
            "message_start",
            json!({"message": {"id": "msg-1", "type": "message", "role": "assistant", "model": "mock-model", "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 0}}}),
        ),
        typed_event(
            "content_block_start",
            json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        typed_event(
            "content_block_delta",
            json!({"index": 0, "delta": {"type": "text_delta", "text": text}}),
        ),
        typed_event("content_block_stop", json!({"index": 0})),
        typed_event(
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}}),
        ),
        typed_event("message_stop", json!({})),
    ]));
    let home = tempfile::tempdir().unwrap();
    let table = format!(
        "[acp_agents.claude]\ncommand = {:?}\nenv = {{ HOME = {:?}, ANTHROPIC_BASE_URL = {:?}, ANTHROPIC_API_KEY = \"x\", IS_SANDBOX = \"1\", DISABLE_TELEMETRY = \"1\", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC = \"1\" }}\n",
        claude.display().to_string(),
        home.path().display().to_string(),
        mock.base_url().trim_end_matches("/v1"),
    );
    // Its command line carries no marker of ours; the codex test checks for leftovers.
    let logs = kin_parent_of(parent_asking("subagent_claude"), &table, &marker("claude")).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(parent_log.contains("PEER_OK"), "{parent_log}");
    assert!(
        mock.requests()
            .iter()
            .any(|r| r.path.contains("/v1/messages")),
        "claude-agent-acp asked the mock model"
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
    let table = format!(
        "[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"wait\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello.", "timeout": 0.5}),
        )])
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
    let table = format!(
        "[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"partial-crash\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello."}),
        )])
        .text("PARENT_DONE");
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
    let table = format!(
        "[delegation]\nidle_timeout = \"300ms\"\n\n[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"wait\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello."}),
        )])
        .text("PARENT_DONE");
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
    let table = format!(
        "[delegation]\nchild_budget_cost = 0.25\n\n[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"usage\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello."}),
        )])
        .text("PARENT_DONE");
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
    let table = format!(
        "[delegation]\nchild_budget_cost = 2.0\n\n[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"priced\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "start",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello.", "run_in_background": true}),
        )])
        .calls(&[(
            "first",
            "task_output",
            json!({"task_id": "subagent-1", "wait": true}),
        )])
        .calls(&[("listed", "list_agents", json!({}))])
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
    let table = format!(
        "[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"foreign\"]\n",
        common::fake_acp_child().display().to_string(),
    );
    let parent = Script::new()
        .calls(&[(
            "ask",
            "subagent_fake",
            json!({"description": "Ask fake", "prompt": "Hello."}),
        )])
        .text("PARENT_DONE");
    let logs = kin_parent_of(parent, &table, &marker).await;
    let parent_log = log_at_depth(&logs, 0);
    assert!(
        parent_log.contains("own answer, foreign request refused"),
        "{parent_log}"
    );
    assert!(!parent_log.contains("INJECTED"), "{parent_log}");
}

//! The fake child driven directly (`AcpChild`): each fault named, no process left.

use std::time::{Duration, Instant};

use agent_client_protocol_schema::v1::StopReason;
use kin::acp_client::{AcpChild, ChildError, PromptOutcome, Steer};
use kin::config::AcpPermission;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{command_for, marker, prompt, run};
use crate::common::{self, assert_none_left};

/// A guard against a broken kin, not a timing assertion.
const DEADLINE: Duration = Duration::from_secs(60);

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

//! The coding tools through the real binary: confinement escapes, process-group cleanup of
//! cancelled and timed-out commands (locally and in the client's terminal), the editor used
//! exactly when the client offers it, and permission state restored after a restart.

use crate::common;

use common::{open_in_mode, pid_fifo, pidfd, Dirs, Script};
use kin::scenario::{Input, PermissionAnswerEntry, PermissionScript, Step};
use serde_json::{json, Value};

fn messages(stdout: &[String]) -> Vec<Value> {
    stdout
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The final `tool_call_update` (with a status) of each call, by call id.
fn results(messages: &[Value]) -> std::collections::HashMap<String, Value> {
    messages
        .iter()
        .filter_map(|m| m.pointer("/params/update"))
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_some())
        .map(|u| (u["toolCallId"].as_str().unwrap().to_owned(), u.clone()))
        .collect()
}

fn text_of(update: &Value) -> String {
    update["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.pointer("/content/text").and_then(Value::as_str))
        .collect()
}

fn answers(kinds: &[PermissionScript]) -> Vec<PermissionAnswerEntry> {
    kinds
        .iter()
        .map(|&kind| PermissionAnswerEntry {
            kind,
            tool_call_id: None,
        })
        .collect()
}

fn prompt(text: &str) -> Step {
    Step::Prompt {
        text: text.into(),
        session: None,
    }
}

#[tokio::test]
async fn confinement_escapes_are_refused_unless_the_user_allows_them() {
    let dirs = Dirs::new();
    std::fs::write(dirs.outside.join("secret.txt"), "the secret\n").unwrap();
    std::os::unix::fs::symlink(&dirs.outside, dirs.cwd.join("link")).unwrap();
    let absolute = dirs.outside.join("secret.txt").display().to_string();
    let script = Script::new()
        .calls(&[
            ("dotdot", "read", json!({"path": "../outside/secret.txt"})),
            ("absolute", "read", json!({"path": absolute})),
            ("symlink", "read", json!({"path": "link/secret.txt"})),
            (
                "write-out",
                "write",
                json!({"path": "link/new.txt", "content": "x"}),
            ),
            (
                "grep-out",
                "grep",
                json!({"pattern": "secret", "path": "link"}),
            ),
            ("allowed", "read", json!({"path": "link/secret.txt"})),
        ])
        .text("done");
    let replay = script.dir();
    let input = Input {
        steps: vec![
            Step::Initialize {
                client_capabilities: None,
            },
            Step::NewSession { cwd: None },
            prompt("Read what is outside."),
        ],
        permission_answers: Some(answers(&[
            PermissionScript::RejectOnce,
            PermissionScript::RejectOnce,
            PermissionScript::RejectOnce,
            PermissionScript::RejectOnce,
            PermissionScript::RejectOnce,
            PermissionScript::AllowOnce,
        ])),
    };
    let (stdout, _) = dirs.runner(replay.path(), &[]).run(&input).await.unwrap();
    let messages = messages(&stdout);
    let prompts: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert_eq!(prompts.len(), 6, "every escape asks the user");
    for prompt in &prompts {
        let title = prompt
            .pointer("/params/toolCall/title")
            .unwrap()
            .as_str()
            .unwrap();
        assert!(
            title.contains(&dirs.outside.display().to_string()),
            "{title}"
        );
    }
    let results = results(&messages);
    for id in ["dotdot", "absolute", "symlink", "write-out", "grep-out"] {
        assert_eq!(results[id]["status"], "failed", "{id}");
        assert!(
            text_of(&results[id]).contains("the user rejected this call"),
            "{id}"
        );
    }
    assert!(!dirs.outside.join("new.txt").exists(), "the write escaped");
    assert_eq!(results["allowed"]["status"], "completed");
    assert!(text_of(&results["allowed"]).contains("the secret"));
}

/// Runs a command that leaves a grandchild behind and reports its pid, then cancels the turn
/// (or lets the command time out), and checks the grandchild is gone.
async fn no_survivor(in_terminal: bool, cancel: bool) {
    let dirs = Dirs::new();
    let (fifo, pid) = pid_fifo(&dirs.cwd);
    let command = format!("sleep 1000 & echo $! > {}; wait", fifo.display());
    let timeout = if cancel { 600 } else { 1 };
    let script = Script::new()
        .call(
            "run",
            "bash",
            json!({"command": command, "timeout": timeout}),
        )
        .text("done");
    let replay = script.dir();
    let mut runner = dirs.runner(replay.path(), &[]);
    let capabilities = in_terminal.then(|| json!({"terminal": true}));
    open_in_mode(&mut runner, capabilities, "allow").await;
    if cancel {
        runner
            .play(&Step::StartPrompt {
                text: "Run it.".into(),
                session: None,
            })
            .await
            .unwrap();
        if in_terminal {
            // The client starts the command when it answers terminal/create; wait until then.
            let started = Step::WaitFor {
                method: "terminal/wait_for_exit".into(),
            };
            runner.play(&started).await.unwrap();
        }
        let grandchild = pidfd(pid.await.unwrap());
        runner.play(&Step::Cancel { session: None }).await.unwrap();
        runner.play(&Step::WaitForTurnEnd {}).await.unwrap();
        grandchild.exited().await;
    } else {
        runner.play(&prompt("Run it.")).await.unwrap();
        pidfd(pid.await.unwrap()).exited().await;
    }
    let (stdout, _) = runner.finish().await.unwrap();
    let messages = messages(&stdout);
    let result = &results(&messages)["run"];
    assert_eq!(result["status"], "failed");
    let expected = if cancel {
        "cancelled"
    } else {
        "timed out after 1 s"
    };
    assert!(text_of(result).contains(expected), "{result}");
    let sent = |method: &str| messages.iter().filter(|m| m["method"] == method).count();
    if in_terminal {
        assert_eq!(sent("terminal/create"), 1);
        assert_eq!(sent("terminal/kill"), 1);
        assert_eq!(sent("terminal/release"), 1);
    } else {
        assert_eq!(sent("terminal/create"), 0);
    }
}

#[tokio::test]
async fn a_cancelled_local_command_leaves_no_process_behind() {
    no_survivor(false, true).await;
}

#[tokio::test]
async fn a_timed_out_local_command_leaves_no_process_behind() {
    no_survivor(false, false).await;
}

#[tokio::test]
async fn a_cancelled_terminal_command_leaves_no_process_behind() {
    no_survivor(true, true).await;
}

#[tokio::test]
async fn a_timed_out_terminal_command_leaves_no_process_behind() {
    no_survivor(true, false).await;
}

#[tokio::test]
async fn kin_uses_the_editor_exactly_when_the_client_offers_it() {
    let methods = |stdout: &[String]| -> Vec<String> {
        messages(stdout)
            .iter()
            .filter(|m| m.get("id").is_some())
            .filter_map(|m| m["method"].as_str().map(str::to_owned))
            .collect()
    };
    let dir = common::snapshot_dir("tools-editor");
    let editor = common::play(&dir, &common::read_input(&dir)).await;
    let used = methods(&editor.raw_stdout);
    for method in [
        "fs/read_text_file",
        "fs/write_text_file",
        "terminal/create",
        "terminal/output",
    ] {
        assert!(
            used.iter().any(|m| m == method),
            "{method} not used: {used:?}"
        );
    }
    let count = |name: &str| used.iter().filter(|m| *m == name).count();
    assert_eq!(
        count("terminal/create"),
        count("terminal/release"),
        "every terminal is released"
    );

    let dir = common::snapshot_dir("tools-local");
    let local = common::play(&dir, &common::read_input(&dir)).await;
    let used = methods(&local.raw_stdout);
    assert!(
        used.iter()
            .all(|m| !m.starts_with("fs/") && !m.starts_with("terminal/")),
        "{used:?}"
    );
    assert!(used.iter().any(|m| m == "session/request_permission"));
}

#[tokio::test]
async fn the_mode_and_always_answers_survive_a_restart() {
    let dirs = Dirs::new();
    let first = Script::new()
        .call("w1", "write", json!({"path": "a.txt", "content": "a"}))
        .text("written")
        .dir();
    let mut runner = dirs.runner(first.path(), &[]);
    runner.script_permissions(Some(&answers(&[PermissionScript::AllowAlways])));
    runner
        .play(&Step::Initialize {
            client_capabilities: None,
        })
        .await
        .unwrap();
    runner.play(&Step::NewSession { cwd: None }).await.unwrap();
    runner.play(&prompt("Write a.txt")).await.unwrap();
    runner
        .play(&Step::Request {
            method: "session/set_mode".into(),
            params: json!({"sessionId": "{{session}}", "modeId": "read-only"}),
        })
        .await
        .unwrap();
    let session = runner.sessions()[0].clone();
    runner.finish().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(dirs.cwd.join("a.txt")).unwrap(),
        "a"
    );

    // A new process: the mode comes back read-only; back in `ask`, edits are still allowed
    // without asking, because of the "always" answer.
    let second = Script::new()
        .call("w2", "write", json!({"path": "b.txt", "content": "b"}))
        .text("written")
        .dir();
    let mut runner = dirs.runner(second.path(), &[]);
    runner.script_permissions(Some(&[]));
    let cwd = dirs.cwd.display().to_string();
    for step in [
        Step::Initialize {
            client_capabilities: None,
        },
        Step::Request {
            method: "session/load".into(),
            params: json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        },
        Step::Request {
            method: "session/set_mode".into(),
            params: json!({"sessionId": session, "modeId": "ask"}),
        },
        Step::Request {
            method: "session/prompt".into(),
            params: json!({"sessionId": session, "prompt": [{"type": "text", "text": "Write b.txt"}]}),
        },
    ] {
        runner.play(&step).await.unwrap();
    }
    let (stdout, _) = runner.finish().await.unwrap();
    let messages = messages(&stdout);
    let loaded = messages
        .iter()
        .find(|m| m["id"] == 2 && m.get("result").is_some())
        .unwrap();
    assert_eq!(loaded["result"]["modes"]["currentModeId"], "read-only");
    assert_eq!(
        loaded["result"]["configOptions"][0]["currentValue"],
        "read-only"
    );
    assert!(messages
        .iter()
        .all(|m| m["method"] != "session/request_permission"));
    assert_eq!(
        std::fs::read_to_string(dirs.cwd.join("b.txt")).unwrap(),
        "b"
    );
}

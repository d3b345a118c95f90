//! What the sandbox keeps from the model beside its commands, through the real binary in
//! `allow` mode: kin's own `git` runs nothing the repository configures (hooks, fsmonitor,
//! filters); a root swapped for a symbolic link after the session opened is no longer
//! writable; kin's config and data directories stay unwritable inside a root; and `write`
//! asks outside the roots and in kin's directories.

use std::path::{Path, PathBuf};

use kin::scenario::{PermissionAnswerEntry, PermissionScript, Runner, Step};
use serde_json::{json, Value};

use super::sandbox::{dirs_with_keep, landlock, logged_results};
use crate::common::{open_in_mode, Dirs, Script};

/// Plays a session opened in `cwd` (default: the workspace) in `mode`, then one prompt;
/// `between` runs after the session opened, before the prompt.
async fn session_in(
    runner: &mut Runner<'_>,
    cwd: Option<&Path>,
    mode: &str,
    between: impl FnOnce(),
) {
    let steps = [
        Step::Initialize {
            client_capabilities: None,
        },
        Step::NewSession {
            cwd: cwd.map(|cwd| cwd.display().to_string()),
        },
        Step::Request {
            method: "session/set_mode".into(),
            params: json!({"sessionId": "{{session}}", "modeId": mode}),
        },
    ];
    for step in steps {
        runner.play(&step).await.unwrap();
    }
    between();
    let prompt = Step::Prompt {
        text: "Go.".into(),
        session: None,
    };
    runner.play(&prompt).await.unwrap();
}

/// Runs `script` in a session opened in `cwd` in `allow` mode; `between` runs before the
/// prompt. The client traffic.
async fn run_allowed(
    dirs: &Dirs,
    script: &Script,
    cwd: Option<&Path>,
    answers: Option<&[PermissionAnswerEntry]>,
    between: impl FnOnce(),
) -> Vec<Value> {
    let replay = script.dir();
    let mut runner = dirs.runner(replay.path(), &[]);
    runner.script_permissions(answers);
    session_in(&mut runner, cwd, "allow", between).await;
    let (stdout, _) = runner.finish().await.unwrap();
    stdout
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn git(dir: &Path, args: &[&str]) {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.email=k@k", "-c", "user.name=k"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
}

/// Makes the workspace a repository whose hook, fsmonitor and clean filter each leave a mark
/// in `marks` when they run.
fn hostile_repository(dirs: &Dirs, marks: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let ws = &dirs.cwd;
    git(ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("README"), "hello\n").unwrap();
    let touch = |name: &str| format!("touch '{}'; true", marks.join(name).display());
    let hook = ws.join(".git/hooks/post-checkout");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    std::fs::write(&hook, format!("#!/bin/sh\n{}\n", touch("hook"))).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ws.join(".gitattributes"), "* filter=evil\n").unwrap();
    git(ws, &["config", "core.fsmonitor", &touch("fsmonitor")]);
    git(
        ws,
        &[
            "config",
            "filter.evil.clean",
            &format!("{}; cat", touch("clean")),
        ],
    );
    git(
        ws,
        &[
            "config",
            "filter.evil.smudge",
            &format!("{}; cat", touch("smudge")),
        ],
    );
    git(ws, &["add", "-A"]);
    git(ws, &["commit", "-qm", "first"]);
    // The setup's own git ran them: the marks start over.
    assert!(marks.join("clean").exists());
    for entry in std::fs::read_dir(marks).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
}

#[tokio::test]
async fn kins_own_git_runs_nothing_the_repository_configures() {
    let dirs = Dirs::new();
    let marks = tempfile::tempdir().unwrap();
    hostile_repository(&dirs, marks.path());
    let parent = Script::new()
        .call(
            "sub",
            "subagent",
            json!({"description": "x", "prompt": "edit", "isolation": "worktree"}),
        )
        .text("done");
    let child = Script::new()
        .call("w", "write", json!({"path": "new.txt", "content": "new\n"}))
        .text("edited");
    let replay = parent.dir();
    let child_dir = child.dir();
    std::fs::copy(
        child_dir.path().join("session.jsonl"),
        replay.path().join("session.1.jsonl"),
    )
    .unwrap();
    let mut runner = dirs.runner(replay.path(), &[]);
    open_in_mode(&mut runner, None, "allow").await;
    let prompt = Step::Prompt {
        text: "Go.".into(),
        session: None,
    };
    runner.play(&prompt).await.unwrap();
    runner.finish().await.unwrap();
    // The worktree was made, staged and diffed.
    let results = logged_results(&dirs.home).join("\n");
    assert!(results.contains("changed files:\n  new.txt"), "{results}");
    let ran: Vec<_> = std::fs::read_dir(marks.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(ran.is_empty(), "the repository's commands ran: {ran:?}");
}

fn bash(command: &str) -> Script {
    Script::new()
        .call("run", "bash", json!({ "command": command }))
        .text("done")
}

#[tokio::test]
async fn a_root_swapped_for_a_symlink_after_the_session_opened_is_not_writable() {
    if !landlock("a_root_swapped_for_a_symlink_after_the_session_opened_is_not_writable") {
        return;
    }
    let dirs = dirs_with_keep();
    let script = bash("echo x > escaped.txt; echo wrote=$?");
    let moved = dirs.cwd.with_file_name("workspace-before");
    let messages = run_allowed(&dirs, &script, None, None, || {
        std::fs::rename(&dirs.cwd, &moved).unwrap();
        std::os::unix::fs::symlink(&dirs.outside, &dirs.cwd).unwrap();
    })
    .await;
    let result = logged_results(&dirs.home).join("\n");
    assert!(!dirs.outside.join("escaped.txt").exists(), "{result}");
    assert!(
        result.contains("wrote=") && !result.contains("wrote=0"),
        "{result}"
    );
    let told = messages
        .iter()
        .filter(|m| m.to_string().contains("Commands may no longer write"))
        .count();
    assert_eq!(told, 1, "{messages:?}");
}

/// The root holding the run's directories (workspace, kin's data and config, outside).
fn base(dirs: &Dirs) -> PathBuf {
    dirs.cwd.parent().unwrap().to_owned()
}

#[tokio::test]
async fn kins_directories_are_not_writable_even_inside_a_root() {
    if !landlock("kins_directories_are_not_writable_even_inside_a_root") {
        return;
    }
    let dirs = dirs_with_keep();
    std::fs::create_dir_all(dirs.config.join("kin/agents")).unwrap();
    let script = bash(
        "echo x > home/evil.txt; echo home=$?\n\
         echo x > config/kin/agents/evil.md; echo config=$?\n\
         echo ok > workspace/fine.txt; echo workspace=$?",
    );
    let base = base(&dirs);
    run_allowed(&dirs, &script, Some(&base), None, || {}).await;
    let result = logged_results(&dirs.home).join("\n");
    assert!(!dirs.home.join("evil.txt").exists(), "{result}");
    assert!(!dirs.config.join("kin/agents/evil.md").exists(), "{result}");
    // The rest of the root is writable: the test can fail.
    assert!(dirs.cwd.join("fine.txt").exists(), "{result}");
    assert!(result.contains("workspace=0"), "{result}");
}

#[tokio::test]
async fn allow_mode_write_asks_outside_the_roots_and_in_kins_directories() {
    let dirs = Dirs::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let bashrc = elsewhere.path().join(".bashrc");
    let script = Script::new()
        .call("w1", "write", json!({"path": bashrc, "content": "evil\n"}))
        .call(
            "w2",
            "write",
            json!({"path": "config/kin/agents/evil.md", "content": "evil\n"}),
        )
        .call(
            "w3",
            "write",
            json!({"path": "workspace/fine.txt", "content": "ok\n"}),
        )
        .text("done");
    let reject = PermissionAnswerEntry {
        kind: PermissionScript::RejectOnce,
        tool_call_id: None,
    };
    let answers = [reject.clone(), reject];
    let base = base(&dirs);
    let messages = run_allowed(&dirs, &script, Some(&base), Some(&answers), || {}).await;
    let asked: Vec<String> = messages
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .map(|m| m["params"]["toolCall"]["toolCallId"].to_string())
        .collect();
    assert_eq!(asked, ["\"w1\"", "\"w2\""], "{messages:?}");
    assert!(!bashrc.exists());
    assert!(!dirs.config.join("kin/agents/evil.md").exists());
    assert_eq!(
        std::fs::read_to_string(dirs.cwd.join("fine.txt")).unwrap(),
        "ok\n"
    );
}

#[test]
fn kin_run_in_allow_mode_refuses_a_write_outside_without_a_terminal() {
    let dirs = Dirs::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let bashrc = elsewhere.path().join(".bashrc");
    let script = Script::new()
        .call("w", "write", json!({"path": bashrc, "content": "evil\n"}))
        .text("done");
    let replay = script.dir();
    let out = std::process::Command::new(crate::common::kin_binary())
        .arg("run")
        .arg("--replay")
        .arg(replay.path())
        .args(["--mode", "allow", "Go."])
        .env("KIN_HOME", &dirs.home)
        .env("XDG_CONFIG_HOME", &dirs.config)
        .current_dir(&dirs.cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let results = logged_results(&dirs.home).join("\n");
    assert!(!bashrc.exists(), "{out:?}\n{results}");
    assert!(results.contains("no terminal to ask on"), "{results}");
}

//! `kin run --mode` (the real binary against the mock model): `allow` runs a model's `bash`
//! call, `ask` without a terminal refuses it naming `--mode`, `read-only` refuses it. Also
//! the order of `kin run`'s first errors: an unknown session before a missing key.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::mock_openai::{text_reply, tool_calls_reply, MockServer};
use common::{kin_binary, MODEL_ENV};

/// `kin run ARGS` in `cwd` with a fresh home, stdin and stdout not terminals.
fn kin_run(
    home: &Path,
    cwd: &Path,
    server: &MockServer,
    key: Option<&str>,
    args: &[&str],
) -> Output {
    let mut command = Command::new(kin_binary());
    command.arg("run").args(args);
    for name in MODEL_ENV {
        command.env_remove(name);
    }
    command
        .env("KIN_HOME", home)
        .env("XDG_CONFIG_HOME", cwd.join("no-config"))
        .env("KIN_BASE_URL", server.base_url())
        .stdin(Stdio::null())
        .current_dir(cwd);
    if let Some(key) = key {
        command.env("KIN_API_KEY", key);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs one turn in which the model asks `bash` to create a file; returns the output, whether
/// the file exists afterwards, and the tool result the model was sent.
fn bash_turn(mode: Option<&str>) -> (Output, bool, String) {
    let server = MockServer::start();
    server.push(tool_calls_reply(&[(
        "call_1",
        "bash",
        r#"{"command":"echo made > made-by-bash.txt && echo MADE"}"#,
    )]));
    server.push(text_reply(&["Done."]));
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut args = Vec::new();
    if let Some(mode) = mode {
        args.extend(["--mode", mode]);
    }
    args.push("make the file");
    let out = kin_run(
        home.path(),
        cwd.path(),
        &server,
        Some("sk-mode-0000001"),
        &args,
    );
    let made = cwd.path().join("made-by-bash.txt").is_file();
    let requests = server.requests();
    let result = requests
        .get(1)
        .map(|r| r.body["messages"][3]["content"].to_string())
        .unwrap_or_default();
    (out, made, result)
}

#[test]
fn mode_allow_runs_the_models_bash_call() {
    let (out, made, result) = bash_turn(Some("allow"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(made, "bash did not run: {}", text(&out.stderr));
    assert!(result.contains("MADE"), "{result}");
    assert_eq!(text(&out.stdout), "Done.\n");
}

#[test]
fn mode_ask_without_a_terminal_refuses_naming_the_flag() {
    let (out, made, result) = bash_turn(None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!made, "bash ran without permission");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--mode allow"), "{stderr}");
    assert!(result.contains("--mode allow"), "{result}");
}

#[test]
fn mode_read_only_refuses_commands() {
    let (out, made, result) = bash_turn(Some("read-only"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!made, "bash ran in read-only mode");
    assert!(result.contains("read-only"), "{result}");
}

#[test]
fn an_unknown_mode_is_a_usage_error() {
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let out = kin_run(
        home.path(),
        home.path(),
        &server,
        None,
        &["--mode", "yolo", "hi"],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("ask, allow, read-only"), "{stderr}");
}

#[test]
fn an_unknown_session_is_reported_before_a_missing_key() {
    let server = MockServer::start();
    let home = tempfile::tempdir().unwrap();
    let out = kin_run(
        home.path(),
        home.path(),
        &server,
        None,
        &["--session", "nope", "hi"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("nope"), "{stderr}");
    assert!(!stderr.contains("API key"), "{stderr}");
}

#[test]
fn a_store_that_cannot_be_made_names_the_operation_and_the_path() {
    let server = MockServer::start();
    let temp = tempfile::tempdir().unwrap();
    // A file where the home's parent should be: nothing can be created under it.
    let blocker = temp.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let home = blocker.join("kinhome");
    let out = kin_run(
        &home,
        temp.path(),
        &server,
        Some("sk-mode-0000002"),
        &["hi"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let wanted = format!(
        "creating the sessions directory {}",
        home.join("sessions").display()
    );
    assert!(stderr.contains(&wanted), "{stderr}");
}

#[test]
fn the_demo_never_creates_a_missing_tmpdir() {
    let temp = tempfile::tempdir().unwrap();
    let missing = temp.path().join("no-such-tmp");
    let out = Command::new(kin_binary())
        .arg("demo")
        .env("TMPDIR", &missing)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(!missing.exists(), "kin created TMPDIR");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("TMPDIR must be an existing directory"),
        "{stderr}"
    );
}

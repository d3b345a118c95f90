//! What a new user meets in their first hour, through the real binary (against the mock
//! model): `kin run --mode` (`allow` runs a model's `bash` call, `ask` asks on a terminal and
//! refuses naming `--mode` without one, `read-only` refuses), `kin acp` typed on a terminal,
//! errors that name their culprit (config values, the store, an unknown session before a
//! missing key, a missing TMPDIR), `kin config`'s agent tables and a full endpoint URL.

use crate::common;

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
        .env("XDG_CONFIG_HOME", "/nonexistent/kin-first-hour-config")
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

/// `script` (util-linux) runs kin on a pseudo-terminal, as a person at a terminal would.
fn on_a_terminal(home: &Path, cwd: &Path, server: &MockServer, typed: &str) -> Option<Output> {
    use std::io::Write;
    let found = Command::new("script").arg("--version").output();
    if !found.is_ok_and(|out| out.status.success()) {
        let line = "SKIPPED mode_ask_on_a_terminal: `script` (util-linux) is not installed\n";
        let _ = std::io::stderr().write_all(line.as_bytes());
        return None;
    }
    let mut command = Command::new("script");
    command.args(["-qec", "\"$KIN_BIN\" run 'make the file'", "/dev/null"]);
    for name in MODEL_ENV {
        command.env_remove(name);
    }
    let mut child = command
        .env("KIN_BIN", kin_binary())
        .env("KIN_HOME", home)
        .env("XDG_CONFIG_HOME", home.join("no-config"))
        .env("KIN_BASE_URL", server.base_url())
        .env("KIN_API_KEY", "sk-mode-0000003")
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Typed ahead: the terminal holds it until kin reads its answer.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(typed.as_bytes())
        .unwrap();
    Some(child.wait_with_output().unwrap())
}

#[test]
fn mode_ask_on_a_terminal_asks_with_the_editor_options_and_takes_the_answer() {
    for (typed, runs) in [("y\n", true), ("n\n", false)] {
        let server = MockServer::start();
        server.push(tool_calls_reply(&[(
            "call_1",
            "bash",
            r#"{"command":"echo made > made-by-bash.txt"}"#,
        )]));
        server.push(text_reply(&["Done."]));
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let Some(out) = on_a_terminal(home.path(), cwd.path(), &server, typed) else {
            return;
        };
        // On a terminal stdout and stderr arrive together.
        let screen = text(&out.stdout);
        assert!(out.status.success(), "{screen}");
        assert!(screen.contains("permission needed"), "{screen}");
        assert!(
            screen.contains("Always allow commands this session"),
            "{screen}"
        );
        let made = cwd.path().join("made-by-bash.txt").is_file();
        assert_eq!(made, runs, "typed {typed:?}: {screen}");
    }
}

#[test]
fn kin_acp_on_a_terminal_says_what_it_is_on_stderr_only() {
    use std::io::Write;
    if !Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success())
    {
        let line = "SKIPPED kin_acp_on_a_terminal: `script` (util-linux) is not installed\n";
        let _ = std::io::stderr().write_all(line.as_bytes());
        return;
    }
    let home = tempfile::tempdir().unwrap();
    // stdin is the terminal, stdout a file: the line must go to stderr (the terminal).
    let stdout = home.path().join("stdout");
    let out = Command::new("script")
        .args([
            "-qec",
            "\"$KIN_BIN\" acp --replay \"$REPLAY\" > \"$OUT\"",
            "/dev/null",
        ])
        .env("KIN_BIN", kin_binary())
        .env("REPLAY", common::snapshot_dir("text-turn"))
        .env("OUT", &stdout)
        .env("KIN_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let screen = text(&out.stdout);
    assert!(screen.contains("kin demo"), "{screen}");
    assert_eq!(std::fs::read_to_string(&stdout).unwrap(), "");
}

#[test]
fn a_base_url_ending_in_chat_completions_is_the_endpoint_with_a_warning() {
    let server = MockServer::start();
    server.push(text_reply(&["ok"]));
    let home = tempfile::tempdir().unwrap();
    let full = format!("{}/chat/completions", server.base_url());
    let out = kin_run(
        home.path(),
        home.path(),
        &server,
        Some("sk-mode-0000004"),
        &["--base-url", &full, "hi"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let requests = server.requests();
    assert!(
        requests[0].path.ends_with("/chat/completions")
            && !requests[0].path.contains("/chat/completions/chat"),
        "{}",
        requests[0].path
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("already ends in /chat/completions"),
        "{stderr}"
    );
}

#[test]
fn kin_config_shows_the_acp_agent_tables_with_secrets_masked() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("kin/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        "[acp_agents.codex]\ncommand = \"codex-acp\"\nenv = { OPENAI_API_KEY = \"sk-hidden-value-8765\" }\n",
    )
    .unwrap();
    let out = Command::new(kin_binary())
        .arg("config")
        .env("XDG_CONFIG_HOME", home.path())
        .env("KIN_API_KEY", "sk-config-0000005")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    assert!(report.contains("[acp_agents.codex]"), "{report}");
    assert!(report.contains("OPENAI_API_KEY=****8765"), "{report}");
    assert!(!report.contains("hidden-value"), "{report}");
}

#[test]
fn a_config_value_of_the_wrong_type_names_file_line_key_and_type() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("kin/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "model = \"m\"\nretries = \"three\"\n").unwrap();
    let out = Command::new(kin_binary())
        .arg("config")
        .env("XDG_CONFIG_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let wanted = format!(
        "{}:2: `retries`: invalid type: string \"three\", expected a whole number",
        file.display()
    );
    assert!(stderr.contains(&wanted), "{stderr}");
    assert!(!stderr.contains("not valid TOML"), "{stderr}");
}

//! `kin run` (the real binary): the answer on stdout, tool activity on stderr, exit codes,
//! `--json`, `--session`, and `--replay` without a key. Also `kin config`.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::mock_openai::{
    error_reply, text_events, text_reply, tool_calls_reply, MockServer, Reply,
};
use common::{kin_binary, snapshot_dir, MODEL_ENV};
use serde_json::Value;

struct Dirs {
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
        }
    }

    /// Runs `kin run ARGS` against `server` (when given) with no other model configuration.
    fn run(&self, server: Option<&MockServer>, key: Option<&str>, args: &[&str]) -> Output {
        let mut command = Command::new(kin_binary());
        command.arg("run").args(args);
        for name in MODEL_ENV {
            command.env_remove(name);
        }
        command
            .env("KIN_HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .current_dir(self.cwd.path());
        if let Some(server) = server {
            command.env("KIN_BASE_URL", server.base_url());
        }
        if let Some(key) = key {
            command.env("KIN_API_KEY", key);
        }
        command.output().unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn session_id(stderr: &str) -> String {
    let rest = stderr
        .split("kin: session ")
        .nth(1)
        .unwrap_or_else(|| panic!("no session id in: {stderr}"));
    rest.split_whitespace().next().unwrap().to_owned()
}

#[test]
fn the_answer_goes_to_stdout_and_exit_is_zero() {
    let server = MockServer::start();
    server.push(text_reply(&["The answer", " is 42."]));
    let dirs = Dirs::new();
    let out = dirs.run(Some(&server), Some("sk-run-000000001"), &["What is it?"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "The answer is 42.\n");
    let stderr = text(&out.stderr);
    let id = session_id(&stderr);
    assert!(dirs
        .home
        .path()
        .join(format!("sessions/{id}.jsonl"))
        .is_file());
    let sent = &server.requests()[0];
    // The workspace opens the first user message (the system prompt is the same everywhere).
    let first = sent.body["messages"][1]["content"].as_str().unwrap();
    assert!(first.ends_with("</workspace>\n\nWhat is it?"), "{first}");
    let cwd = dirs.cwd.path().canonicalize().unwrap();
    assert!(
        first.contains(&cwd.to_string_lossy().into_owned())
            || first.contains(&dirs.cwd.path().to_string_lossy().into_owned()),
        "the session runs in the current directory: {first}"
    );
}

#[test]
fn tool_activity_goes_to_stderr() {
    let server = MockServer::start();
    server.push(tool_calls_reply(&[(
        "call_1",
        "read_file",
        r#"{"path":"x"}"#,
    )]));
    server.push(text_reply(&["No such tool here."]));
    let dirs = Dirs::new();
    let out = dirs.run(Some(&server), Some("sk-run-000000002"), &["Read x"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "No such tool here.\n");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(r#"kin: tool read_file {"path":"x"}"#),
        "{stderr}"
    );
    assert!(
        stderr.contains("-> failed: Error: unknown tool `read_file`"),
        "{stderr}"
    );
    // The second call carried the tool call and its result back to the model.
    let second = &server.requests()[1].body["messages"];
    assert_eq!(second[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_1");
}

#[test]
fn json_writes_the_session_events_as_lines() {
    let server = MockServer::start();
    server.push(text_reply(&["a", "b"]));
    let dirs = Dirs::new();
    let out = dirs.run(Some(&server), Some("sk-run-000000003"), &["--json", "hi"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"turn/start"));
    assert_eq!(types.last(), Some(&"turn/end"));
    assert!(types.contains(&"assistant/message"));
    assert_eq!(
        events.last().unwrap()["data"]["reason"]["kind"],
        "completed"
    );
    // The same lines as the stored log (after its header).
    let id = session_id(&text(&out.stderr));
    let log =
        std::fs::read_to_string(dirs.home.path().join(format!("sessions/{id}.jsonl"))).unwrap();
    let stored: Vec<&str> = log.lines().skip(1).collect();
    assert_eq!(stored, text(&out.stdout).lines().collect::<Vec<_>>());
}

#[test]
fn session_continues_a_stored_conversation() {
    let server = MockServer::start();
    server.push(text_reply(&["First answer."]));
    server.push(text_reply(&["Second answer."]));
    let dirs = Dirs::new();
    let first = dirs.run(Some(&server), Some("sk-run-000000004"), &["one"]);
    assert!(first.status.success());
    let id = session_id(&text(&first.stderr));
    let second = dirs.run(
        Some(&server),
        Some("sk-run-000000004"),
        &["--session", &id, "two"],
    );
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert_eq!(text(&second.stdout), "Second answer.\n");
    assert_eq!(session_id(&text(&second.stderr)), id);
    let messages = &server.requests()[1].body["messages"];
    let roles: Vec<&str> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(messages[2]["content"], "First answer.");

    let missing = dirs.run(
        Some(&server),
        Some("sk-run-000000004"),
        &["--session", "00000000-0000-4000-8000-000000000000", "x"],
    );
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        text(&missing.stderr).contains("not found"),
        "{}",
        text(&missing.stderr)
    );
}

#[test]
fn failures_exit_non_zero_with_a_message() {
    let server = MockServer::start();
    server.set_default(error_reply(503, "Server overloaded"));
    let dirs = Dirs::new();
    let out = dirs.run(
        Some(&server),
        Some("sk-run-000000005"),
        &["--retries", "0", "hi"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("kin: model endpoint answered HTTP 503: Server overloaded"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(server.requests().len(), 1, "--retries 0 means one attempt");

    let out = dirs.run(Some(&server), None, &["hi"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("kin: no API key for the model") && stderr.contains("KIN_API_KEY"),
        "{stderr}"
    );
}

#[test]
fn a_turn_stopped_by_the_output_limit_exits_three() {
    let server = MockServer::start();
    server.push(Reply::Stream(text_events(&["cut sh"], "length")));
    let dirs = Dirs::new();
    let out = dirs.run(Some(&server), Some("sk-run-000000006"), &["hi"]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(text(&out.stdout), "cut sh\n");
    assert!(text(&out.stderr).contains("max_tokens"));
}

#[test]
fn replay_needs_no_key() {
    let dirs = Dirs::new();
    let replay = snapshot_dir("text-turn");
    let out = dirs.run(None, None, &["--replay", path(&replay), "anything"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "PONG\n");
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn config_shows_effective_values_their_origins_and_a_masked_key() {
    let dirs = Dirs::new();
    let file = dirs.home.path().join("config/kin/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(
        &file,
        "model = \"file-model\"\nbase_url = \"http://127.0.0.1:9/v1\"\nstall_timeout = \"200ms\"\nretries = 1\npass_env = [\"GH_TOKEN\", \"NPM_TOKEN\"]\n",
    )
    .unwrap();
    let mut command = Command::new(kin_binary());
    for name in MODEL_ENV {
        command.env_remove(name);
    }
    let out = command
        .args(["config", "--retries", "7"])
        .env("XDG_CONFIG_HOME", dirs.home.path().join("config"))
        .env("KIN_MODEL", "env-model")
        .env("KIN_API_KEY", "sk-very-secret-value-9876")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    let line = |name: &str| {
        report
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} line in:\n{report}"))
            .to_owned()
    };
    assert!(line("model").contains("env-model") && line("model").contains("environment KIN_MODEL"));
    assert!(
        line("base_url").contains("http://127.0.0.1:9/v1")
            && line("base_url").contains("config file")
    );
    assert!(line("endpoint").contains("http://127.0.0.1:9/v1/chat/completions"));
    assert!(line("stall_timeout").contains("200 ms"));
    assert!(line("retries").contains('7') && line("retries").contains("flag --retries"));
    assert!(line("connect_timeout").contains("default"));
    assert!(line("api_key").contains("****9876") && line("api_key").contains("KIN_API_KEY"));
    assert!(
        line("pass_env").contains("GH_TOKEN, NPM_TOKEN")
            && line("pass_env").contains("config file")
    );
    assert!(!report.contains("very-secret"), "{report}");
}

#[test]
fn a_background_child_still_running_at_exit_is_cancelled_and_its_log_ends_cleanly() {
    let dirs = Dirs::new();
    let fixture = common::repo().join("tests/fixtures/background-shutdown");
    let out = dirs.run(
        None,
        None,
        &["--replay", fixture.to_str().unwrap(), "start a long job"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Started it."));
    let sessions = common::session_files(dirs.home.path());
    assert_eq!(sessions.len(), 2, "the parent and its background child");
    for path in sessions {
        let log = std::fs::read_to_string(&path).unwrap();
        let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "turn/end", "{}", path.display());
    }
}

impl Dirs {
    /// Runs `kin ARGS` with `env` and no model configuration from outside the test.
    fn kin(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut command = Command::new(kin_binary());
        command.args(args);
        for name in MODEL_ENV
            .iter()
            .chain(&["RUST_LOG", "RUST_BACKTRACE", "RUST_LIB_BACKTRACE"])
        {
            command.env_remove(name);
        }
        command
            .env("KIN_HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .envs(env.iter().copied())
            .current_dir(self.cwd.path())
            .output()
            .unwrap()
    }
}

/// Checks stderr is kin's one error line (no anyhow `Error:`/`Caused by:`, no backtrace) and
/// returns it.
fn one_error_line(out: &Output) -> String {
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("kin: "), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    for not_ours in ["Error:", "Caused by", "backtrace"] {
        assert!(!stderr.contains(not_ours), "{stderr}");
    }
    stderr.trim_end().to_owned()
}

#[test]
fn errors_print_as_one_kin_line_with_their_causes_and_no_backtrace() {
    let dirs = Dirs::new();
    // A message with a cause, and RUST_BACKTRACE set: still one line, no backtrace.
    let out = dirs.kin(
        &["acp", "--replay", path(&snapshot_dir("text-turn"))],
        &[("KIN_SUBAGENT_MAX_DEPTH", "deep"), ("RUST_BACKTRACE", "1")],
    );
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(
        line.starts_with("kin: KIN_SUBAGENT_MAX_DEPTH must be a non-negative integer")
            && line.ends_with(": invalid digit found in string"),
        "{line}"
    );

    // A backtrace only when asked for with RUST_LIB_BACKTRACE.
    let out = dirs.kin(
        &["acp", "--replay", path(&snapshot_dir("text-turn"))],
        &[
            ("KIN_SUBAGENT_MAX_DEPTH", "deep"),
            ("RUST_LIB_BACKTRACE", "1"),
        ],
    );
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("kin: KIN_SUBAGENT_MAX_DEPTH") && stderr.contains("\nbacktrace:\n"));

    // Usage mistakes too.
    let out = dirs.kin(&["acp", "--no-such-flag"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("kin: unexpected argument '--no-such-flag'"),
        "{stderr}"
    );
}

#[test]
fn replay_of_a_missing_directory_says_it_does_not_exist() {
    let dirs = Dirs::new();
    let missing = dirs.home.path().join("no-such-scenario");
    for command in ["acp", "run"] {
        let mut args = vec![command, "--replay", path(&missing)];
        if command == "run" {
            args.push("hi");
        }
        let out = dirs.kin(&args, &[]);
        assert_eq!(out.status.code(), Some(1));
        let line = one_error_line(&out);
        assert!(
            line.ends_with(&format!(
                "replay directory {} does not exist",
                missing.display()
            )),
            "{line}"
        );
    }
}

#[test]
fn logs_on_a_pipe_have_no_colour_codes() {
    let server = MockServer::start();
    server.push(text_reply(&["fine"]));
    let dirs = Dirs::new();
    let config = dirs.home.path().join("config/kin/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "no_such_setting = 1\n").unwrap();
    let out = dirs.kin(
        &["run", "hi"],
        &[
            ("RUST_LOG", "debug"),
            ("KIN_BASE_URL", &server.base_url()),
            ("KIN_API_KEY", "sk-run-000000009"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("ignoring an unknown key in the config file"),
        "{stderr}"
    );
    assert!(stderr.contains("DEBUG"), "debug logs are on: {stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[test]
fn headless_edit_outside_the_workspace_quotes_nothing_of_the_file() {
    let server = MockServer::start();
    let dirs = Dirs::new();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("credentials");
    std::fs::write(&secret, "AWS_SECRET=hunter2\n").unwrap();
    let arguments = serde_json::json!({
        "path": secret.display().to_string(),
        "patch": "@@ -1 +1 @@\n-AWS_SECRET=guess\n+x\n",
    })
    .to_string();
    server.push(tool_calls_reply(&[("call_1", "edit", &arguments)]));
    server.push(text_reply(&["Could not."]));
    let out = dirs.run(Some(&server), Some("sk-run-000000010"), &["Edit it"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let result = &server.requests()[1].body["messages"][3];
    assert_eq!(result["role"], "tool");
    let told = result["content"].as_str().unwrap();
    assert!(
        told.contains("--mode"),
        "refused for want of a terminal to ask: {told}"
    );
    assert!(!told.contains("hunter2"), "the model was told: {told}");
    assert!(
        !text(&out.stderr).contains("hunter2"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "AWS_SECRET=hunter2\n"
    );
}

/// The answer of a script whose text carries terminal control sequences.
const HOSTILE: &str = "before\u{1b}]0;retitled\u{7}\u{1b}[2Jafter\ttab\nnext line";

#[test]
fn the_models_control_sequences_are_shown_escaped_on_a_terminal() {
    let dirs = Dirs::new();
    let replay = common::Script::new().text(HOSTILE).dir();
    let replay = path(replay.path()).to_owned();
    // Into a pipe (a script reading the answer): the text as the model wrote it.
    let out = dirs.run(None, None, &["--replay", &replay, "go"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{HOSTILE}\n"));
    // On a terminal (`script` gives kin one): escaped, its own lines and tabs kept.
    let Ok(found) = Command::new("script").arg("--version").output() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "`script` is required under CI"
        );
        println!("SKIPPED: no `script` command to give kin a terminal");
        return;
    };
    assert!(found.status.success());
    let kin = format!(
        "{} run --replay {replay} go 2>/dev/null",
        kin_binary().display()
    );
    let mut command = Command::new("script");
    command.args(["-qec", &kin, "/dev/null"]);
    for name in MODEL_ENV {
        command.env_remove(name);
    }
    let out = command
        .env("KIN_HOME", dirs.home.path())
        .env("XDG_CONFIG_HOME", dirs.home.path().join("config"))
        .current_dir(dirs.cwd.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
        "{shown:?}"
    );
    assert!(
        shown.contains(r"before\u{1b}]0;retitled\u{7}\u{1b}[2Jafter"),
        "{shown:?}"
    );
    assert!(shown.contains("after\ttab"), "{shown:?}");
    assert!(shown.contains("next line"), "{shown:?}");
}

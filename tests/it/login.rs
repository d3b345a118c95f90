//! `kin login` and `kin logout` through the real binary: the interactive sign-in in a
//! pseudo-terminal (util-linux `script` gives kin one, as an editor's terminal would), the
//! flags for scripts, Ctrl-C and refusals leaving the config as it was, and the stored key
//! kept from kin's own `read` tool.

use crate::common;

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::mock_openai::{error_reply, text_reply, tool_calls_reply, MockServer, Reply};
use common::pty::Pty;
use common::{kin_binary, MODEL_ENV};
use serde_json::{json, Value};

fn model_list(ids: &[&str]) -> Reply {
    let data: Vec<Value> = ids.iter().map(|id| json!({"id": id})).collect();
    Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: json!({"object": "list", "data": data}).to_string(),
    }
}

fn completion() -> Reply {
    Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: json!({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).to_string(),
    }
}

/// kin with no model settings from the environment; its config directory is `config/kin`
/// under `home`, and the key goes to the file there.
fn kin_command(home: &Path) -> Command {
    let mut command = Command::new(kin_binary());
    for name in MODEL_ENV {
        command.env_remove(name);
    }
    command
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("KIN_HOME", home.join("data"))
        .env("KIN_KEY_STORE", "file");
    command
}

fn config_path(home: &Path) -> PathBuf {
    home.join("config/kin/config.toml")
}

fn key_path(home: &Path) -> PathBuf {
    home.join("config/kin/api-key")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

const BEFORE: &str = "# my kin settings\nmodel = \"old-model\"\nretries = 5\n\n[acp_agents.codex]\ncommand = \"codex-acp\"\n";

#[test]
fn an_interactive_sign_in_hides_the_key_lists_the_models_and_keeps_the_rest() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config_path(home.path()).parent().unwrap()).unwrap();
    std::fs::write(config_path(home.path()), BEFORE).unwrap();
    let server = MockServer::start();
    // The first key is refused by the check; the user is told why and pastes another.
    server.push(model_list(&["alpha-model", "mock-model"]));
    server.push(error_reply(401, "Incorrect API key provided"));
    server.push(model_list(&["alpha-model", "mock-model"]));
    server.push(completion());
    let Some(mut login) = Pty::start(kin_command(home.path()).arg("login")) else {
        return;
    };
    let at = login.wait_for("Endpoint [1]: ", 0);
    login.type_line("5");
    let at = login.wait_for("API root", at);
    login.type_line(&server.base_url());
    let at = login.wait_for("(hidden", at);
    login.type_line("sk-pty-wrong-0000");
    let at = login.wait_for("2) mock-model", at);
    let at = login.wait_for("Model (number or name) [1]: ", at);
    login.type_line("2");
    let at = login.wait_for("refused the key (HTTP 401): Incorrect API key provided", at);
    let at = login.wait_for("[q]uit? [k] ", at);
    login.type_line("");
    let at = login.wait_for("(hidden", at);
    login.type_line("sk-pty-secret-4242");
    let at = login.wait_for("Model (number or name) [1]: ", at);
    login.type_line("mock-model");
    login.wait_for("Signed in", at);
    let (code, transcript) = login.finish();
    assert_eq!(code, 0, "{transcript}");
    for key in ["sk-pty-secret-4242", "sk-pty-wrong"] {
        assert!(
            !transcript.contains(key),
            "the key was shown:\n{transcript}"
        );
    }
    assert!(transcript.contains("1) alpha-model"), "{transcript}");

    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/models");
    let bearer = |n: usize| requests[n].header("authorization").map(str::to_owned);
    assert_eq!(bearer(1).as_deref(), Some("Bearer sk-pty-wrong-0000"));
    assert_eq!(bearer(3).as_deref(), Some("Bearer sk-pty-secret-4242"));
    assert_eq!(requests[3].body["model"], "mock-model");
    let config = std::fs::read_to_string(config_path(home.path())).unwrap();
    assert_eq!(mode(&config_path(home.path())), 0o600);
    assert!(
        config.starts_with("# my kin settings\nmodel = \"mock-model\""),
        "{config}"
    );
    assert!(config.contains("retries = 5") && config.contains("[acp_agents.codex]"));
    assert!(config.contains("api_key_store = \"file\""), "{config}");
    assert!(!config.contains("sk-pty"), "{config}");
    assert_eq!(mode(&key_path(home.path())), 0o600);
    let key = std::fs::read_to_string(key_path(home.path())).unwrap();
    assert_eq!(key.trim(), "sk-pty-secret-4242");
}

#[test]
fn ctrl_c_at_the_key_leaves_the_config_as_it_was() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config_path(home.path()).parent().unwrap()).unwrap();
    std::fs::write(config_path(home.path()), BEFORE).unwrap();
    let Some(mut login) = Pty::start(kin_command(home.path()).arg("login")) else {
        return;
    };
    let at = login.wait_for("Endpoint [1]: ", 0);
    login.type_line("1");
    login.wait_for("API key for DeepSeek (hidden): ", at);
    login.input.write_all(b"sk-half-typed\x03").unwrap();
    login.input.flush().unwrap();
    let (code, transcript) = login.finish();
    assert_eq!(code, 130, "{transcript}");
    assert!(
        transcript.contains("cancelled; nothing was changed"),
        "{transcript}"
    );
    assert!(!transcript.contains("sk-half-typed"), "{transcript}");
    assert_eq!(
        std::fs::read_to_string(config_path(home.path())).unwrap(),
        BEFORE
    );
    assert!(!key_path(home.path()).exists());
}

/// Runs `kin login ARGS` with `stdin` as its input; returns (exit code, stderr).
fn login(home: &Path, args: &[&str], stdin: &str) -> (i32, String) {
    let mut child = kin_command(home)
        .arg("login")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code().unwrap_or(-1), said)
}

#[test]
fn a_refused_key_fails_the_scripted_sign_in_and_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(config_path(home.path()).parent().unwrap()).unwrap();
    std::fs::write(config_path(home.path()), BEFORE).unwrap();
    let server = MockServer::start();
    server.push(error_reply(401, "Incorrect API key provided"));
    let url = server.base_url();
    let args = ["--base-url", &url, "--model", "m", "--api-key-stdin"];
    let (code, said) = login(home.path(), &args, "sk-wrong-000000\n");
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("refused the key (HTTP 401): Incorrect API key provided"),
        "{said}"
    );
    assert!(!said.contains("sk-wrong"), "{said}");
    assert_eq!(
        std::fs::read_to_string(config_path(home.path())).unwrap(),
        BEFORE
    );
    assert!(!key_path(home.path()).exists());

    // Without a terminal, a missing answer is named, not asked.
    let (code, said) = login(home.path(), &["--base-url", &url], "");
    assert_eq!(code, 1);
    assert!(said.contains("--api-key-stdin or --no-key"), "{said}");
    // A closed stdin before the key is no sign-in either.
    let (code, said) = login(home.path(), &args, "");
    assert_eq!(code, 1);
    assert!(said.contains("stdin closed"), "{said}");
    assert_eq!(
        std::fs::read_to_string(config_path(home.path())).unwrap(),
        BEFORE
    );
}

#[test]
fn the_stored_key_is_refused_to_read_and_logout_removes_it() {
    let home = tempfile::tempdir().unwrap();
    let server = MockServer::start();
    server.push(model_list(&["mock-model"]));
    server.push(completion());
    let url = server.base_url();
    let (code, said) = login(
        home.path(),
        &["--base-url", &url, "--api-key-stdin"],
        "sk-keep-out-0077\n",
    );
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("kin uses mock-model"), "{said}");

    // The model asks to read the key file; kin refuses even with every permission.
    let key_file = key_path(home.path());
    let arguments = json!({"path": key_file}).to_string();
    server.push(tool_calls_reply(&[("call-1", "read", &arguments)]));
    server.push(text_reply(&["done"]));
    let workspace = tempfile::tempdir().unwrap();
    let output = kin_command(home.path())
        .args(["run", "--mode", "allow", "read the key"])
        .current_dir(workspace.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = server.requests();
    let turn = requests.last().unwrap();
    assert_eq!(
        turn.header("authorization"),
        Some("Bearer sk-keep-out-0077")
    );
    let sent = turn.body.to_string();
    assert!(sent.contains("holds kin's credentials"), "{sent}");
    assert_eq!(sent.matches("sk-keep-out-0077").count(), 0, "{sent}");

    let output = kin_command(home.path()).arg("logout").output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("Removed the key from"), "{said}");
    assert!(!key_file.exists());
    let config = std::fs::read_to_string(config_path(home.path())).unwrap();
    assert!(!config.contains("api_key_store"), "{config}");
    assert!(config.contains("model = \"mock-model\""), "{config}");
}

#[test]
fn another_endpoint_at_a_presets_address_still_asks_for_the_key() {
    let home = tempfile::tempdir().unwrap();
    let Some(mut login) = Pty::start(kin_command(home.path()).arg("login")) else {
        return;
    };
    let at = login.wait_for("Endpoint [1]: ", 0);
    login.type_line("5");
    let at = login.wait_for("API root", at);
    // llama.cpp's preset address, typed as "another endpoint": it may be a server with a key.
    login.type_line("http://127.0.0.1:8080/v1");
    login.wait_for("API key (hidden; Enter if the server takes none): ", at);
    login.input.write_all(b"sk-typed-8080\x03").unwrap();
    login.input.flush().unwrap();
    let (code, transcript) = login.finish();
    assert_eq!(code, 130, "{transcript}");
    assert!(!transcript.contains("sk-typed-8080"), "{transcript}");
    assert!(!key_path(home.path()).exists());
}

#[test]
fn a_key_on_stdin_is_kept_for_a_keyless_presets_address() {
    let home = tempfile::tempdir().unwrap();
    let args = [
        "--base-url",
        "http://127.0.0.1:8080/v1",
        "--model",
        "local",
        "--api-key-stdin",
        "--no-check",
    ];
    let (code, said) = login(home.path(), &args, "sk-stdin-8080\n");
    assert_eq!(code, 0, "{said}");
    let key = std::fs::read_to_string(key_path(home.path())).unwrap();
    assert_eq!(key.trim(), "sk-stdin-8080", "{said}");
}

#[test]
fn the_key_choice_after_a_refusal_asks_for_a_key_even_at_a_keyless_preset() {
    // Ollama's preset address; a server there (another test's or the user's) is left alone.
    let Some(server) = MockServer::start_at(11434) else {
        eprintln!("skipped: 127.0.0.1:11434 is taken");
        return;
    };
    let home = tempfile::tempdir().unwrap();
    server.push(model_list(&["qwen3"]));
    server.push(error_reply(401, "this server wants a key"));
    server.push(model_list(&["qwen3"]));
    server.push(completion());
    let Some(mut login) = Pty::start(kin_command(home.path()).arg("login")) else {
        return;
    };
    let at = login.wait_for("Endpoint [1]: ", 0);
    login.type_line("4");
    let at = login.wait_for("lists 1 model:", at);
    let at = login.wait_for("Model (number or name) [1]: ", at);
    login.type_line("");
    let at = login.wait_for("[q]uit? [k] ", at);
    login.type_line("k");
    let at = login.wait_for("(hidden", at);
    login.type_line("sk-ollama-1111");
    let at = login.wait_for("Model (number or name) [1]: ", at);
    login.type_line("");
    login.wait_for("Signed in", at);
    let (code, transcript) = login.finish();
    assert_eq!(code, 0, "{transcript}");
    let requests = server.requests();
    assert_eq!(
        requests[3].header("authorization"),
        Some("Bearer sk-ollama-1111")
    );
}

#[test]
fn no_keyring_is_said_plainly_and_the_key_goes_to_the_file() {
    let home = tempfile::tempdir().unwrap();
    let server = MockServer::start();
    let url = server.base_url();
    let mut command = kin_command(home.path());
    command
        .env_remove("KIN_KEY_STORE")
        // No Secret Service can answer at this address.
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            "unix:path=/nonexistent/kin-test-bus",
        )
        .args(["login", "--base-url", &url, "--model", "m"])
        .args(["--api-key-stdin", "--no-check", "--key-store", "keyring"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"sk-no-keyring-5\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(said.contains("no keyring service answered"), "{said}");
    assert!(!said.to_lowercase().contains("zbus"), "{said}");
    let key = std::fs::read_to_string(key_path(home.path())).unwrap();
    assert_eq!(key.trim(), "sk-no-keyring-5");
}

//! A real OAuth login to an HTTP MCP server of the config file: tests/mcp/oauth_server.py is
//! both the protected MCP server (the official Python SDK) and its own authorization server on
//! loopback. kin finds the authorization server from the resource's 401 and metadata, registers
//! itself, sends the user (a `$BROWSER` script that fetches the URL with curl) through the
//! authorization with PKCE, takes the loopback redirect, and keeps the tokens in a 0600 file;
//! a session then calls the server's tool with them, refreshes them when the server stops
//! taking the access token, and `kin mcp logout` removes them.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::mcp::tool_text;
use common::{Script, Wire};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const DEADLINE: Duration = Duration::from_secs(120);

/// The server's event lines, read as they come.
struct Events(tokio::sync::mpsc::UnboundedReceiver<String>);

impl Events {
    /// Waits for the line `want`, skipping others.
    async fn wait_for(&mut self, want: &str) {
        self.until(want).await;
    }

    /// Waits for the line `want`; the lines before it.
    async fn until(&mut self, want: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = tokio::time::timeout(DEADLINE, self.0.recv())
                .await
                .unwrap_or_else(|_| panic!("no `{want}` from the server"))
                .expect("the server is running");
            if line == want {
                return seen;
            }
            seen.push(line);
        }
    }
}

fn kin(home: &Path, browser: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(common::kin_binary());
    command
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("KIN_HOME", home)
        .env("KIN_KEY_STORE", "file")
        .env("BROWSER", browser)
        .env_remove("KIN_API_KEY");
    command
}

/// Prompts once in mode `allow`; the updates before the answer.
async fn prompt(wire: &mut Wire, session: &str, id: i64) -> Vec<Value> {
    let asked = wire.prompt(id, session, "Go.");
    let (updates, answer) = tokio::time::timeout(DEADLINE, asked).await.unwrap();
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    updates
}

/// Starts the OAuth server: its process, its stdin (commands), its port and its events.
async fn start_server(
    python: &Path,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    String,
    Events,
) {
    start_server_in(python, "").await
}

/// As [`start_server`], in `mode` (see tests/mcp/oauth_server.py).
async fn start_server_in(
    python: &Path,
    mode: &str,
) -> (
    tokio::process::Child,
    tokio::process::ChildStdin,
    String,
    Events,
) {
    let mut server = tokio::process::Command::new(python)
        .arg(common::repo().join("tests/mcp/oauth_server.py"))
        .arg(mode)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let control = server.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(server.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let port = first.strip_prefix("PORT ").unwrap().to_owned();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    (server, control, port, Events(rx))
}

/// A home whose config file names the server as `docs`, and a `$BROWSER` script (`browser`).
fn home_for(port: &str, browser: &str) -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("config/kin")).unwrap();
    std::fs::write(
        home.path().join("config/kin/config.toml"),
        format!("[mcp_servers.docs]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"),
    )
    .unwrap();
    let script = home.path().join("browser.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{browser}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    (home, script)
}

/// Prompts twice: `echo` "one" (call `c1`), then, once every token so far has expired,
/// `echo` "two" (call `c2`), which must go through on a refreshed token; the second prompt's
/// updates.
async fn call_expire_and_call_again(
    wire: &mut Wire,
    session: &str,
    control: &mut tokio::process::ChildStdin,
    events: &mut Events,
) -> Vec<Value> {
    let updates = prompt(wire, session, 3).await;
    assert!(
        tool_text(&updates, "c1").contains("echo: one"),
        "{updates:?}"
    );
    events.wait_for("CALLED 1").await;
    control.write_all(b"expire\n").await.unwrap();
    events.wait_for("EXPIRED").await;
    let updates = prompt(wire, session, 4).await;
    assert!(
        tool_text(&updates, "c2").contains("echo: two"),
        "{updates:?}"
    );
    for event in ["REFUSED", "REFRESHED", "CALLED 2"] {
        events.wait_for(event).await;
    }
    updates
}

/// Adds `lines` to the `docs` table of the config file in `home` (see [`home_for`]).
fn add_to_docs(home: &Path, lines: &str) {
    let config = home.join("config/kin/config.toml");
    let table = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{table}{lines}")).unwrap();
}

/// Opens a session in mode `allow`.
async fn allowed_session(wire: &mut Wire) -> String {
    let session = wire.open_session().await;
    wire.set_mode(2, &session, "allow").await;
    session
}

#[tokio::test]
async fn login_call_expiry_refresh_and_logout_against_a_real_authorization_server() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, mut control, port, mut events) = start_server(&python).await;
    // The headless browser: follows the authorization server's redirect to kin's loopback port.
    let (home, browser) = home_for(&port, "exec curl -sfL -o /dev/null \"$1\"");

    let login = kin(home.path(), &browser)
        .args(["mcp", "login", "docs"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&login.stderr);
    assert!(login.status.success(), "{said}");
    assert!(said.contains("code_challenge_method=S256"), "{said}");
    assert!(
        said.contains(&format!("http://127.0.0.1:{port}/authorize?")),
        "{said}"
    );
    assert!(
        said.contains("logged in to the MCP server `docs`"),
        "{said}"
    );
    for event in ["REGISTERED", "AUTHORIZED", "TOKEN"] {
        events.wait_for(event).await;
    }
    let tokens: PathBuf = home.path().join("mcp-oauth/docs.json");
    let mode = std::fs::metadata(&tokens).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let before = std::fs::read_to_string(&tokens).unwrap();
    let shown = kin(home.path(), &browser).arg("config").output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("mcp server docs login: logged in"),
        "{shown}"
    );

    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "one"}))])
        .text("Done.")
        .calls(&[("c2", "mcp__docs__echo", json!({"text": "two"}))])
        .calls(&[("r1", "read", json!({"path": tokens}))])
        .text("Done.")
        .dir();
    let env = [("KIN_KEY_STORE", "file")];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    // The access token stops working (as at its expiry): the next call refreshes it once.
    let updates = call_expire_and_call_again(&mut wire, &session, &mut control, &mut events).await;
    // The rotated refresh token was kept (the old one is spent at the server).
    let after = std::fs::read_to_string(&tokens).unwrap();
    assert_ne!(before, after);
    // kin's own `read` refuses the token file.
    let read = tool_text(&updates, "r1");
    assert!(read.contains("holds kin's credentials"), "{read}");
    assert!(!read.contains("access_token"), "{read}");

    let home = wire.home.path().to_owned();
    let logout = kin(&home, &browser)
        .args(["mcp", "logout", "docs"])
        .output()
        .unwrap();
    assert!(logout.status.success());
    assert!(!tokens.exists());
    let shown = kin(&home, &browser).arg("config").output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("mcp server docs login: not logged in"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_session_shows_the_login_address_and_connects_once_the_user_is_back() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, _control, port, mut events) = start_server(&python).await;
    // This browser only hands the address to the test (through a FIFO), as a user's would
    // show it; the test plays the user later.
    let fifo = tempfile::tempdir().unwrap();
    let opened = fifo.path().join("opened");
    nix::unistd::mkfifo(&opened, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let (home, browser) = home_for(&port, &format!("echo \"$1\" > {}", opened.display()));
    let reader = {
        let opened = opened.clone();
        tokio::task::spawn_blocking(move || std::fs::read_to_string(opened).unwrap())
    };
    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "early"}))])
        .text("Later.")
        .calls(&[("c2", "mcp__docs__echo", json!({"text": "now"}))])
        .text("Done.")
        .dir();
    let browser = browser.to_string_lossy().into_owned();
    let env = [("KIN_KEY_STORE", "file"), ("BROWSER", browser.as_str())];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    let address = tokio::time::timeout(DEADLINE, reader)
        .await
        .unwrap()
        .unwrap();
    let address = address.trim().to_owned();
    assert!(
        address.starts_with(&format!("http://127.0.0.1:{port}/authorize?")),
        "{address}"
    );

    // The editor is told where to log in; the server is not used meanwhile.
    let updates = prompt(&mut wire, &session, 3).await;
    let text: String = updates.iter().map(Value::to_string).collect();
    assert!(
        text.contains("MCP server `docs` is not available: it needs a login: open"),
        "{text}"
    );
    assert!(text.contains(&address), "{text}");
    // Never listed, its tools are not offered yet.
    assert!(
        tool_text(&updates, "c1").contains("unknown tool `mcp__docs__echo`"),
        "{updates:?}"
    );

    // The user opens it; kin takes the redirect, stores the tokens and connects.
    let fetched = tokio::process::Command::new("curl")
        .args(["-sfL", "-o", "/dev/null", &address])
        .status()
        .await
        .unwrap();
    assert!(fetched.success());
    events.wait_for("TOKEN").await;
    events.wait_for("CALLED 1").await;
    let updates = prompt(&mut wire, &session, 4).await;
    assert!(
        tool_text(&updates, "c2").contains("echo: now"),
        "{updates:?}"
    );
    let tokens = wire.home.path().join("mcp-oauth/docs.json");
    let mode = std::fs::metadata(&tokens).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn an_editor_taking_url_questions_is_asked_to_open_the_login_at_once() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, _control, port, mut events) = start_server(&python).await;
    // No $BROWSER: the editor is the only way to the address.
    let (home, _) = home_for(&port, "exit 1");
    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "there"}))])
        .text("Done.")
        .dir();
    let env = [("KIN_KEY_STORE", "file"), ("BROWSER", "")];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    wire.initialize_with(json!({"elicitation": {"url": {}}}))
        .await;
    let session = wire.new_session().await;
    // Before any prompt, kin asks the editor to open the authorization URL.
    let asked = loop {
        let message = tokio::time::timeout(DEADLINE, wire.read())
            .await
            .unwrap()
            .unwrap();
        if message["method"] == "elicitation/create" {
            break message;
        }
    };
    let params = &asked["params"];
    assert_eq!(params["mode"], "url", "{asked}");
    assert_eq!(params["sessionId"], session.as_str());
    let address = params["url"].as_str().unwrap().to_owned();
    assert!(
        address.starts_with(&format!("http://127.0.0.1:{port}/authorize?")),
        "{asked}"
    );
    assert!(
        params["message"]
            .as_str()
            .unwrap()
            .contains("needs a login"),
        "{asked}"
    );
    wire.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}))
        .await;
    // The editor opened it for the user.
    let fetched = tokio::process::Command::new("curl")
        .args(["-sfL", "-o", "/dev/null", &address])
        .status()
        .await
        .unwrap();
    assert!(fetched.success());
    // Once the login is done, the editor hears that the question's step is complete.
    let id = asked["params"]["elicitationId"].clone();
    let completed = loop {
        let message = tokio::time::timeout(DEADLINE, wire.read())
            .await
            .unwrap()
            .unwrap();
        if message["method"] == "elicitation/complete" {
            break message;
        }
    };
    assert_eq!(completed["params"]["elicitationId"], id, "{completed}");
    events.wait_for("TOKEN").await;
    events.wait_for("CALLED 1").await;
    wire.set_mode(2, &session, "allow").await;
    let updates = prompt(&mut wire, &session, 3).await;
    assert!(
        tool_text(&updates, "c1").contains("echo: there"),
        "{updates:?}"
    );
}

#[tokio::test]
async fn a_session_waiting_for_a_login_takes_one_made_elsewhere() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, _control, port, mut events) = start_server(&python).await;
    let (home, browser) = home_for(&port, "exec curl -sfL -o /dev/null \"$1\"");
    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "early"}))])
        .text("Later.")
        .calls(&[("c2", "mcp__docs__echo", json!({"text": "now"}))])
        .text("Done.")
        .dir();
    // The session's own login address goes nowhere: nobody opens it.
    let env = [("KIN_KEY_STORE", "file"), ("BROWSER", "true")];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    let updates = prompt(&mut wire, &session, 3).await;
    let text: String = updates.iter().map(Value::to_string).collect();
    assert!(text.contains("it needs a login: open"), "{text}");

    // The user logs in at a terminal instead (or in another session).
    let login = kin(wire.home.path(), &browser)
        .args(["mcp", "login", "docs"])
        .output()
        .unwrap();
    assert!(
        login.status.success(),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );
    events.wait_for("TOKEN").await;
    // The session's next prompt finds that login and has the server's tools.
    let updates = prompt(&mut wire, &session, 4).await;
    assert!(
        tool_text(&updates, "c2").contains("echo: now"),
        "{updates:?}"
    );
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, needle));
        } else if std::fs::read(&path)
            .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        {
            found.push(path);
        }
    }
    found
}

#[tokio::test]
async fn a_pre_registered_client_logs_in_and_refreshes_with_its_secret_which_stays_hidden() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, mut control, port, mut events) = start_server(&python).await;
    let (home, browser) = home_for(&port, "exec curl -sfL -o /dev/null \"$1\"");
    // The secret comes from a variable whose name does not look like a credential's, so only
    // kin's knowing the value keeps it from the tools.
    add_to_docs(
        home.path(),
        "client_id = \"kin-test-client\"\nclient_secret_env = \"DOCS_LOGIN\"\n",
    );
    let secret = "kin-test-secret-8d1f";

    let login = kin(home.path(), &browser)
        .args(["mcp", "login", "docs"])
        .env("DOCS_LOGIN", secret)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&login.stderr);
    assert!(login.status.success(), "{said}");
    assert!(!said.contains(secret), "{said}");
    // No registration: the configured client, authenticated with its secret at /token.
    events.wait_for("CLIENT kin-test-client").await;
    events.wait_for("AUTHORIZED").await;
    events.wait_for("TOKEN").await;

    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "one"}))])
        .text("Done.")
        .calls(&[("c2", "mcp__docs__echo", json!({"text": "two"}))])
        .calls(&[("e1", "bash", json!({"command": "env"}))])
        .text("Done.")
        .dir();
    let env = [("KIN_KEY_STORE", "file"), ("DOCS_LOGIN", secret)];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    // The refresh authenticates with the secret too (the server refuses it otherwise).
    let updates = call_expire_and_call_again(&mut wire, &session, &mut control, &mut events).await;
    // A command's environment lacks the variable holding it.
    let listed = tool_text(&updates, "e1");
    assert!(listed.contains("PATH="), "{listed}");
    assert!(!listed.contains(secret), "{listed}");
    // Nothing kin wrote (session logs, token file) holds it.
    assert_eq!(
        files_holding(wire.home.path(), secret),
        Vec::<PathBuf>::new()
    );
}

#[tokio::test]
async fn a_client_metadata_url_is_the_client_id_where_the_server_takes_one() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, _control, port, mut events) = start_server(&python).await;
    let (home, browser) = home_for(&port, "exec curl -sfL -o /dev/null \"$1\"");
    let document = "https://kin.example/oauth/client.json";
    add_to_docs(
        home.path(),
        &format!("client_metadata_url = \"{document}\"\n"),
    );
    let login = kin(home.path(), &browser)
        .args(["mcp", "login", "docs"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&login.stderr);
    assert!(login.status.success(), "{said}");
    // The URL is the client id: no registration.
    let seen = events.until("TOKEN").await;
    assert!(seen.contains(&format!("CLIENT {document}")), "{seen:?}");
    assert!(!seen.iter().any(|line| line == "REGISTERED"), "{seen:?}");
}

#[tokio::test]
async fn a_call_refused_for_want_of_scope_logs_in_again_for_it_and_goes_through() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, _control, port, mut events) = start_server(&python).await;
    let (home, browser) = home_for(&port, "exec curl -sfL -o /dev/null \"$1\"");
    let login = kin(home.path(), &browser)
        .args(["mcp", "login", "docs"])
        .output()
        .unwrap();
    assert!(login.status.success());
    let seen = events.until("TOKEN").await;
    assert!(seen.contains(&"SCOPE docs".to_owned()), "{seen:?}");

    let replay = Script::new()
        .calls(&[("n1", "mcp__docs__note", json!({"text": "first"}))])
        .text("Done.")
        .calls(&[("n2", "mcp__docs__note", json!({"text": "second"}))])
        .text("Done.")
        .dir();
    let browser = browser.to_string_lossy().into_owned();
    let env = [("KIN_KEY_STORE", "file"), ("BROWSER", browser.as_str())];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    let updates = prompt(&mut wire, &session, 3).await;
    // Refused for want of `docs:write`: kin logs in again (same client, the wider scope; the
    // editor is told where), then the call goes through.
    events.wait_for("STEP-UP").await;
    let seen = events.until("TOKEN").await;
    assert!(!seen.iter().any(|line| line == "REGISTERED"), "{seen:?}");
    let scope = seen.iter().find(|line| line.starts_with("SCOPE ")).unwrap();
    assert!(scope.split(' ').any(|s| s == "docs:write"), "{scope}");
    let text: String = updates.iter().map(Value::to_string).collect();
    assert!(
        text.contains("needs more access than kin's login has (scope \\\"docs docs:write\\\")"),
        "{text}"
    );
    assert!(
        tool_text(&updates, "n1").contains("noted: first"),
        "{updates:?}"
    );
    // The wider token serves the next call at once.
    let updates = prompt(&mut wire, &session, 4).await;
    assert!(
        tool_text(&updates, "n2").contains("noted: second"),
        "{updates:?}"
    );
    let seen = events.until("CALLED 2").await;
    assert!(!seen.iter().any(|line| line == "STEP-UP"), "{seen:?}");
}

#[tokio::test]
async fn a_2025_03_26_server_logs_in_with_its_origins_metadata_whatever_its_issuers_path() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, _control, port, mut events) = start_server_in(&python, "legacy").await;
    let (home, browser) = home_for(&port, "exec curl -sfL -o /dev/null \"$1\"");
    let login = kin(home.path(), &browser)
        .args(["mcp", "login", "docs"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&login.stderr);
    assert!(login.status.success(), "{said}");
    events.wait_for("TOKEN").await;
    // A session takes the same metadata for the stored login.
    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "old"}))])
        .text("Done.")
        .dir();
    let mut wire = Wire::start_with(Some(replay.path()), home, &[("KIN_KEY_STORE", "file")]);
    let session = allowed_session(&mut wire).await;
    let updates = prompt(&mut wire, &session, 3).await;
    assert!(
        tool_text(&updates, "c1").contains("echo: old"),
        "{updates:?}"
    );

    // With protected resource metadata, the issuer rule holds: such metadata is refused.
    let (_server, _control, port, _events) = start_server_in(&python, "foreign-issuer").await;
    let (home, browser) = home_for(&port, "exec curl -sfL -o /dev/null \"$1\"");
    let login = kin(home.path(), &browser)
        .args(["mcp", "login", "docs"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&login.stderr);
    assert!(!login.status.success(), "{said}");
    assert!(said.contains("issuer mismatch"), "{said}");
}

#[tokio::test]
async fn a_client_acting_for_itself_gets_its_token_without_anyone_logging_in() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, mut control, port, mut events) = start_server(&python).await;
    // No browser: nobody logs in.
    let (home, _) = home_for(&port, "exit 1");
    add_to_docs(
        home.path(),
        "client_id = \"kin-test-client\"\nclient_secret_env = \"DOCS_LOGIN\"\n\
             grant = \"client_credentials\"\nscopes = [\"docs\"]\n",
    );
    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "machine"}))])
        .text("Done.")
        .calls(&[("c2", "mcp__docs__echo", json!({"text": "again"}))])
        .text("Done.")
        .dir();
    let env = [
        ("KIN_KEY_STORE", "file"),
        ("DOCS_LOGIN", "kin-test-secret-8d1f"),
        ("BROWSER", ""),
    ];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    let updates = prompt(&mut wire, &session, 3).await;
    assert!(
        tool_text(&updates, "c1").contains("echo: machine"),
        "{updates:?}"
    );
    let seen = events.until("CALLED 1").await;
    assert!(seen.contains(&"GRANTED docs".to_owned()), "{seen:?}");
    assert!(!seen.iter().any(|line| line == "AUTHORIZED"), "{seen:?}");
    // Its token stops working (no refresh token for such a client): the next call gets a
    // fresh one and goes through.
    control.write_all(b"expire\n").await.unwrap();
    events.wait_for("EXPIRED").await;
    let updates = prompt(&mut wire, &session, 4).await;
    assert!(
        tool_text(&updates, "c2").contains("echo: again"),
        "{updates:?}"
    );
    let seen = events.until("CALLED 2").await;
    assert!(seen.contains(&"GRANTED docs".to_owned()), "{seen:?}");
}

#[tokio::test]
async fn a_client_signing_its_token_requests_gets_its_token_and_its_key_stays_private() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn, jwt, cryptography")
    else {
        return;
    };
    let (_server, mut control, port, mut events) = start_server(&python).await;
    let (home, _) = home_for(&port, "exit 1");
    let key = home.path().join("config/kin/signer.pem");
    let command = format!("signer-key {}\n", key.display());
    control.write_all(command.as_bytes()).await.unwrap();
    events.wait_for("SIGNER KEY").await;
    add_to_docs(
        home.path(),
        "client_id = \"kin-test-signer\"\ngrant = \"client_credentials\"\n\
             private_key_file = \"signer.pem\"\nscopes = [\"docs\"]\n",
    );
    let read = json!({"path": key.display().to_string()});
    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "signed"}))])
        .text("Done.")
        .calls(&[("r1", "read", read)])
        .text("Done.")
        .dir();
    let env = [("KIN_KEY_STORE", "file"), ("BROWSER", "")];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    let updates = prompt(&mut wire, &session, 3).await;
    assert!(
        tool_text(&updates, "c1").contains("echo: signed"),
        "{updates:?}"
    );
    let seen = events.until("CALLED 1").await;
    assert!(seen.contains(&"SIGNED GRANT docs".to_owned()), "{seen:?}");
    // The key is kin's own: its `read` refuses it.
    let updates = prompt(&mut wire, &session, 4).await;
    let refused = tool_text(&updates, "r1");
    assert!(refused.contains("is one of kin's own files"), "{refused}");
    assert!(!refused.contains("PRIVATE KEY"), "{refused}");
}

#[tokio::test]
async fn an_enterprise_identity_is_exchanged_for_the_servers_token_without_a_browser() {
    let Some(python) = common::python_with("mcp.server.mcpserver, uvicorn") else {
        return;
    };
    let (_server, _control, port, mut events) = start_server(&python).await;
    let (home, _) = home_for(&port, "exit 1");
    let base = format!("http://127.0.0.1:{port}");
    add_to_docs(
        home.path(),
        &format!(
            "client_id = \"kin-test-client\"\nclient_secret_env = \"DOCS_LOGIN\"\n\
             grant = \"enterprise\"\nidp_issuer = \"{base}/idp\"\n\
             idp_token_endpoint = \"{base}/idp/token\"\nidp_client_id = \"kin-at-idp\"\n\
             id_token_command = \"printf %s kin-test-id-token-5c2e\"\n"
        ),
    );
    let replay = Script::new()
        .calls(&[("c1", "mcp__docs__echo", json!({"text": "enterprise"}))])
        .text("Done.")
        .dir();
    let env = [
        ("KIN_KEY_STORE", "file"),
        ("DOCS_LOGIN", "kin-test-secret-8d1f"),
        ("BROWSER", ""),
    ];
    let mut wire = Wire::start_with(Some(replay.path()), home, &env);
    let session = allowed_session(&mut wire).await;
    let updates = prompt(&mut wire, &session, 3).await;
    assert!(
        tool_text(&updates, "c1").contains("echo: enterprise"),
        "{updates:?}"
    );
    let seen = events.until("CALLED 1").await;
    for event in ["EXCHANGED", "ASSERTED"] {
        assert!(seen.iter().any(|line| line == event), "{seen:?}");
    }
    assert!(!seen.iter().any(|line| line == "AUTHORIZED"), "{seen:?}");
}

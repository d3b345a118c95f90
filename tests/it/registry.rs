//! kin as the ACP registry lists it: the registry's handshake check against the real binary in
//! a fresh HOME, the terminal sign-in it offers found by `authenticate` without a restart, and
//! the registry entry (dist/registry/kin) checked against the registry's own schema, the
//! release configuration and the icon rules.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::mock_openai::{text_reply, MockServer, Reply};
use common::{kin_binary, repo, AcpSchema, Wire, MODEL_ENV};
use serde_json::{json, Value};

/// The registry's auth check, written again from its client (agentclientprotocol/registry,
/// `.github/workflows/client.py`, commit cc4c9a79b92740da7134573bb2fbe60b6beab531): the agent
/// runs in a temporary HOME with `TERM=dumb`, gets one `initialize` with the validator's
/// capabilities, and passes when the answer has no error and offers at least one auth method
/// of type `agent` or `terminal` (the `type` field, else the `_meta` keys `terminal-auth` /
/// `agent-auth`, else `agent`).
#[test]
fn the_registry_handshake_check_passes_in_a_fresh_home() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut command = Command::new(kin_binary());
    command.arg("acp");
    for name in MODEL_ENV
        .iter()
        .chain(&["XDG_CONFIG_HOME", "XDG_DATA_HOME", "KIN_HOME"])
    {
        command.env_remove(name);
    }
    let mut child = command
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .current_dir(cwd.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let initialize = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": 1,
            "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
            "clientCapabilities": {
                "terminal": true,
                "fs": {"readTextFile": true, "writeTextFile": true},
                "_meta": {"terminal_output": true, "terminal-auth": true},
            },
        },
    });
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{initialize}").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let response: Value = serde_json::from_str(&line).unwrap();
    assert!(response.get("error").is_none(), "agent error: {response}");
    let ids = std::collections::HashMap::from([("1".to_owned(), "initialize".to_owned())]);
    AcpSchema::load()
        .check_agent_message(&response, &ids)
        .unwrap_or_else(|e| panic!("the initialize answer breaks the ACP schema: {e}"));
    let methods = response["result"]["authMethods"].as_array().cloned();
    let methods = methods.unwrap_or_default();
    let types: Vec<String> = methods.iter().map(registry_auth_type).collect();
    assert!(
        types.iter().any(|t| t == "agent" || t == "terminal"),
        "No auth method with type 'agent' or 'terminal'. Found types: {types:?}"
    );
    // What kin offers such a client: its terminal sign-in, then the agent method.
    assert_eq!(types, ["terminal", "agent"], "{response}");
    assert_eq!(methods[0]["id"], "kin-login");
    assert_eq!(methods[0]["args"], json!(["login"]));
}

/// The auth type as the registry's client reads it.
fn registry_auth_type(method: &Value) -> String {
    if let Some(kind) = method["type"].as_str() {
        return kind.to_owned();
    }
    let meta = &method["_meta"];
    if meta.get("terminal-auth").is_some() {
        "terminal".into()
    } else {
        "agent".into()
    }
}

/// What the mock answers the check (a plain, unstreamed chat completion) with.
fn completion() -> Reply {
    Reply::Status {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})
            .to_string(),
    }
}

#[tokio::test]
async fn a_terminal_sign_in_is_found_by_authenticate_without_a_restart() {
    let server = MockServer::start();
    let mut kin = Wire::start_with(None, tempfile::tempdir().unwrap(), &[]);
    let (_, init) = kin
        .request(
            0,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}}),
        )
        .await;
    let methods = init["result"]["authMethods"].as_array().unwrap();
    assert_eq!(methods[0]["type"], "terminal", "{init}");
    let session = kin.new_session().await;

    // Before the sign-in: the prompt is refused, naming the method that fixes it.
    let (_, answer) = kin.prompt(2, &session, "hi").await;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("\"kin-login\""), "{message}");
    assert_eq!(answer["error"]["data"]["authMethods"][0]["id"], "kin-login");
    assert!(server.requests().is_empty());

    // The client runs `kin login` (here with its flags, as a script would).
    server.push(completion());
    let config_home = kin.home.path().join("config");
    let mut login = Command::new(kin_binary());
    for name in MODEL_ENV {
        login.env_remove(name);
    }
    let mut child = login
        .args([
            "login",
            "--base-url",
            &server.base_url(),
            "--model",
            "mock-model",
        ])
        .args(["--api-key-stdin", "--key-store", "file"])
        .env("XDG_CONFIG_HOME", &config_home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "sk-signed-in-0001").unwrap();
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}");
    assert!(
        said.contains("Signed in") && !said.contains("sk-signed-in-0001"),
        "{said}"
    );
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].body["model"], "mock-model");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-signed-in-0001")
    );

    // The same kin finds it.
    server.push(text_reply(&["signed in"]));
    let (_, answer) = kin
        .request(3, "authenticate", json!({"methodId": "kin-login"}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    kin.turn(4, &session, "hi").await;
    let sent = &server.requests()[1];
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer sk-signed-in-0001")
    );
    assert_eq!(sent.body["model"], "mock-model");
}

/// The Rust targets dist-workspace.toml builds.
fn release_targets() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("dist-workspace.toml")).unwrap();
    let config: toml::Table = text.parse().unwrap();
    let mut targets: Vec<String> = config["dist"]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    targets.sort();
    targets
}

/// The registry's name for a Rust target's platform.
fn platform_of(target: &str) -> String {
    let arch = target.split('-').next().unwrap();
    let os = if target.contains("apple-darwin") {
        "darwin"
    } else if target.contains("linux") {
        "linux"
    } else {
        "windows"
    };
    format!("{os}-{arch}")
}

fn check_entry(entry: &Value) {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("dist/registry/agent.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(entry)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "the entry breaks the registry schema: {errors:?}"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(entry["id"], "kin");
    assert_eq!(entry["version"], version);
    let repository = entry["repository"].as_str().unwrap();
    assert_eq!(repository, env!("CARGO_PKG_REPOSITORY"));
    let binary = entry["distribution"]["binary"].as_object().unwrap();
    let mut platforms: Vec<&String> = binary.keys().collect();
    platforms.sort();
    let targets = release_targets();
    let mut expected: Vec<String> = targets.iter().map(|t| platform_of(t)).collect();
    expected.sort();
    assert_eq!(
        platforms,
        expected.iter().collect::<Vec<_>>(),
        "platforms vs dist targets"
    );
    for target in &targets {
        let item = &binary[&platform_of(target)];
        let name = format!("kin-{target}");
        assert_eq!(
            item["archive"],
            format!("{repository}/releases/download/v{version}/{name}.tar.gz")
        );
        assert_eq!(item["cmd"], format!("./{name}/kin"));
        assert_eq!(item["args"], json!(["acp"]));
    }
}

#[test]
fn the_registry_entry_matches_the_schema_the_version_and_the_release() {
    let path = repo().join("dist/registry/kin/agent.json");
    let committed: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    check_entry(&committed);

    // The script fills the hashes from archives: here, stand-ins for the four.
    let archives = tempfile::tempdir().unwrap();
    for target in release_targets() {
        let archive = archives.path().join(format!("kin-{target}.tar.gz"));
        std::fs::write(archive, format!("archive of {target}")).unwrap();
    }
    let out = archives.path().join("agent.json");
    let status = Command::new("python3")
        .arg(repo().join("dist/registry/fill.py"))
        .arg("--archives")
        .arg(archives.path())
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let filled: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    check_entry(&filled);
    let linux = &filled["distribution"]["binary"]["linux-x86_64"];
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        b"archive of x86_64-unknown-linux-gnu",
    );
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(linux["sha256"], hex);
    // Without hashes, the filled entry is the committed one: the script wrote it.
    let mut stripped = filled.clone();
    for item in stripped["distribution"]["binary"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        item.as_object_mut().unwrap().remove("sha256");
    }
    assert_eq!(stripped, committed, "rerun dist/registry/fill.py");
}

/// The registry's icon rules (its build script): a 16x16 square SVG drawn in `currentColor`,
/// no fill or stroke of another colour.
#[test]
fn the_registry_icon_is_16_by_16_and_monochrome() {
    let icon = std::fs::read_to_string(repo().join("dist/registry/kin/icon.svg")).unwrap();
    assert!(
        icon.contains("width=\"16\"") && icon.contains("height=\"16\""),
        "{icon}"
    );
    assert!(icon.contains("currentColor"));
    for attribute in ["fill=\"", "stroke=\""] {
        for value in icon.split(attribute).skip(1) {
            let value = value.split('"').next().unwrap().to_lowercase();
            assert!(
                ["currentcolor", "none", "inherit"].contains(&value.as_str()),
                "{attribute}{value}"
            );
        }
    }
}

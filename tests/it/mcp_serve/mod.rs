//! `kin mcp` driven by an independently written MCP client: the official Python SDK
//! (tests/mcp/kin_client.py, `mcp` from tests/interop/requirements.txt) over real pipes, and
//! once over streamable HTTP. The model is the scripted OpenAI-compatible mock server.
//! Outside CI, without a Python that has the `mcp` package, each test prints a visible skip.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::mock_openai::{
    chunk, event, text_reply, tool_calls_reply, MockServer, Reply, ServerEvent,
};
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(120);

/// The Python with what these tests import (see `common::python_with`).
fn python_with_mcp() -> Option<PathBuf> {
    common::python_with("mcp.client.stdio, mcp.client.streamable_http")
}

/// One server's world: its store, its cwd and its model.
struct World {
    python: PathBuf,
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    model: MockServer,
}

impl World {
    fn new() -> Option<Self> {
        Some(Self {
            python: python_with_mcp()?,
            home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            model: MockServer::start(),
        })
    }

    fn command(&self, program: &Path) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(program);
        for name in common::MODEL_ENV {
            command.env_remove(name);
        }
        command
            .env("XDG_CONFIG_HOME", self.home.path().join("config"))
            .env("KIN_HOME", self.home.path())
            .env("KIN_BASE_URL", self.model.base_url())
            .env("KIN_API_KEY", "sk-test")
            .env("KIN_MODEL", "mock-model")
            .current_dir(self.cwd.path())
            .kill_on_drop(true);
        command
    }

    /// Runs one client scenario against a fresh `kin mcp`; its JSON lines.
    async fn client(&self, args: &[&str]) -> Vec<Value> {
        let mut command = self.command(&self.python);
        command
            .arg(common::repo().join("tests/mcp/kin_client.py"))
            .arg(common::kin_binary())
            .args(args);
        let output = tokio::time::timeout(DEADLINE, command.output())
            .await
            .expect("the client scenario timed out")
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "client {args:?} failed: {}\nstdout: {stdout}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// The session log of `id`, as text.
    fn log(&self, id: &str) -> String {
        let path = self
            .home
            .path()
            .join("sessions")
            .join(format!("{id}.jsonl"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
}

fn schema_file(name: &str) -> PathBuf {
    common::repo().join(format!("protocol/schemas/tools/{name}.json"))
}

/// The schema file a listed tool must match: its input schema plus the header keys.
fn expected_file(tool: &Value) -> Value {
    let name = tool["name"].as_str().unwrap();
    let mut file = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("urn:kin:mcp-server:tool:{name}"),
        "title": name,
        "description": tool["description"],
    });
    for (key, value) in tool["inputSchema"].as_object().unwrap() {
        file[key] = value.clone();
    }
    file
}

/// The session id a `kin` call's result names.
fn session_id(result: &Value) -> String {
    result["structured"]["sessionId"]
        .as_str()
        .expect("the result names its session")
        .to_owned()
}

#[tokio::test]
async fn the_listed_tools_match_their_schema_files() {
    let Some(world) = World::new() else { return };
    let found = world.client(&["tools"]).await;
    let tools = found[0]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["kin", "kin_reply", "kin_output", "kin_cancel", "kin_list"]
    );
    let refresh = std::env::var("KIN_SCHEMAS").is_ok_and(|v| v == "refresh");
    for tool in tools {
        let path = schema_file(tool["name"].as_str().unwrap());
        let expected = expected_file(tool);
        if refresh {
            let text = serde_json::to_string_pretty(&expected).unwrap() + "\n";
            std::fs::write(&path, text).unwrap();
        }
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(file, expected, "{} is out of date", path.display());
        jsonschema::validator_for(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let kin: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_file("kin")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&kin).unwrap();
    assert!(validator.is_valid(&json!({"prompt": "x", "mode": "allow", "background": true})));
    assert!(!validator.is_valid(&json!({"prompt": "x", "mode": "wide"})));
    assert!(!validator.is_valid(&json!({"mode": "allow"})));
}

#[tokio::test]
async fn a_foreground_task_answers_with_progress_in_a_top_level_session_marked_mcp() {
    let Some(world) = World::new() else { return };
    std::fs::write(world.cwd.path().join("notes.txt"), "the word is heron\n").unwrap();
    world.model.push(tool_calls_reply(&[(
        "c1",
        "read",
        r#"{"path":"notes.txt"}"#,
    )]));
    world.model.push(text_reply(&["The word ", "is heron."]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "what is the word?"}"#])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["state"], "completed", "{result}");
    assert_eq!(result["structured"]["answer"], "The word is heron.");
    assert!(result["text"]
        .as_str()
        .unwrap()
        .contains("The word is heron."));
    let progress: Vec<&str> = result["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        progress.iter().any(|m| m.contains("tool read")),
        "no progress named the tool call: {progress:?}"
    );
    // An ordinary top-level session, marked as started over MCP, in read-only mode.
    let id = result["structured"]["sessionId"].as_str().unwrap();
    let log = world.log(id);
    let header: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(header["startedOver"], "mcp");
    assert!(header.get("parentSession").is_none());
    assert!(log.contains("read-only"), "{log}");
    // The read really ran: the model saw the file's text.
    let second = &world.model.requests()[1].body;
    assert!(second.to_string().contains("the word is heron"), "{second}");
    // `kin run --session` continues it like any other session.
    world.model.push(text_reply(&["still heron"]));
    let run = world
        .command(&common::kin_binary())
        .args(["run", "--session", id, "and now?"])
        .output()
        .await
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "still heron");
}

#[tokio::test]
async fn a_background_task_is_collected_by_kin_output_and_listed() {
    let Some(world) = World::new() else { return };
    world
        .model
        .push(text_reply(&["done in ", "the background"]));
    let found = world.client(&["background", "work quietly"]).await;
    let started = &found[0];
    assert_eq!(started["isError"], false, "{started}");
    assert_eq!(started["structured"]["state"], "running");
    let id = started["structured"]["sessionId"].as_str().unwrap();
    let output = &found[1];
    assert_eq!(output["structured"]["state"], "completed", "{output}");
    assert_eq!(output["structured"]["answer"], "done in the background");
    let listed = &found[2]["structured"]["sessions"];
    assert_eq!(listed[0]["sessionId"], id, "{listed}");
    assert_eq!(listed[0]["state"], "completed");
    assert!(listed[0]["usage"]["contextTokens"].is_u64(), "{listed}");
    assert_eq!(listed[0]["children"], json!([]));
}

#[tokio::test]
async fn kin_reply_continues_a_session_after_the_server_restarted() {
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["first answer"]));
    world.model.push(text_reply(&["second answer"]));
    let first = world
        .client(&["call", "kin", r#"{"prompt": "remember the number 41"}"#])
        .await;
    let id = session_id(&first[0]);
    // A new `kin mcp` process: the session comes from disk.
    let arguments = json!({"session_id": id, "prompt": "and add one"}).to_string();
    let second = world.client(&["call", "kin_reply", &arguments]).await;
    let result = &second[0];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["sessionId"], id.as_str());
    assert_eq!(result["structured"]["answer"], "second answer");
    // The model saw the whole conversation, and both turns are in the one log.
    let request = world.model.requests()[1].body.to_string();
    assert!(request.contains("remember the number 41"), "{request}");
    assert!(request.contains("first answer"), "{request}");
    let log = world.log(&id);
    assert!(
        log.contains("and add one") && log.contains("second answer"),
        "{log}"
    );
    // A session that was not started over MCP is refused.
    let other = json!({"session_id": "00000000-0000-4000-8000-000000000000", "prompt": "x"});
    let refused = world
        .client(&["call", "kin_reply", &other.to_string()])
        .await;
    assert_eq!(refused[0]["isError"], true);
    assert!(refused[0]["text"]
        .as_str()
        .unwrap()
        .contains("unknown session"));
}

#[tokio::test]
async fn a_cancelled_call_cancels_the_run_and_it_settles_cancelled() {
    let Some(world) = World::new() else { return };
    // The model starts answering, then holds the response open until kin hangs up.
    world.model.push(Reply::Hang(vec![
        event(&chunk(json!({"role": "assistant", "content": ""}), None)),
        event(&chunk(json!({"content": "thinking about it"}), None)),
    ]));
    let found = world.client(&["cancel", "take your time"]).await;
    assert!(
        found.iter().all(|line| line.get("unexpected").is_none()),
        "{found:?}"
    );
    let listed = &found[0]["structured"]["sessions"];
    // Listed at once after the cancellation: stopping, or already settled.
    let state = listed[0]["state"].as_str().unwrap();
    assert!(["stopping", "cancelled"].contains(&state), "{listed}");
    let output = &found[1];
    assert_eq!(output["isError"], true, "{output}");
    assert_eq!(output["structured"]["state"], "cancelled");
    // kin hung up on the model: the request does not outlive the call.
    let closed = tokio::time::timeout(DEADLINE, world.model.next_event()).await;
    assert_eq!(closed.unwrap(), ServerEvent::ClientClosed { request: 0 });
}

#[tokio::test]
async fn without_elicitation_an_ask_is_refused_naming_mode() {
    let Some(world) = World::new() else { return };
    world.model.push(tool_calls_reply(&[(
        "c1",
        "bash",
        r#"{"command":"touch made.txt"}"#,
    )]));
    world.model.push(text_reply(&["I could not run it."]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "make a file", "mode": "ask"}"#])
        .await;
    assert_eq!(found[0]["structured"]["answer"], "I could not run it.");
    assert!(!world.cwd.path().join("made.txt").exists());
    let told = world.model.requests()[1].body.to_string();
    assert!(told.contains("did not declare elicitation"), "{told}");
    assert!(told.contains("`mode`"), "{told}");
    // A mode wider than the server's ceiling (ask, by default) is refused outright.
    let wider = world
        .client(&["call", "kin", r#"{"prompt": "x", "mode": "allow"}"#])
        .await;
    assert_eq!(wider[0]["isError"], true);
    assert!(wider[0]["text"]
        .as_str()
        .unwrap()
        .contains("wider than this server allows"));
}

#[tokio::test]
async fn with_elicitation_an_ask_is_put_to_the_clients_user() {
    let Some(world) = World::new() else { return };
    world.model.push(tool_calls_reply(&[(
        "c1",
        "bash",
        r#"{"command":"touch made.txt"}"#,
    )]));
    world.model.push(text_reply(&["Made it."]));
    let found = world
        .client(&["elicit", r#"{"prompt": "make a file", "mode": "ask"}"#])
        .await;
    let asked = found[0]["asked"].as_str().unwrap_or_default();
    assert!(asked.contains("touch made.txt"), "{found:?}");
    assert_eq!(found[1]["structured"]["answer"], "Made it.", "{found:?}");
    assert!(world.cwd.path().join("made.txt").exists());
}

#[tokio::test]
async fn streamable_http_serves_the_same_tools() {
    use tokio::io::AsyncBufReadExt;
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["over http"]));
    let mut server = world
        .command(&common::kin_binary())
        .args(["mcp", "--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = line
        .strip_prefix("kin: serving MCP on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let said = tokio::time::timeout(DEADLINE, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(said.starts_with("kin: the bearer token is in "), "{said}");
    let token = std::fs::read_to_string(world.home.path().join("mcp-token")).unwrap();
    let found = world.client(&["http", &url, token.trim(), "hello"]).await;
    assert_eq!(found[0]["names"].as_array().unwrap().len(), 5);
    assert_eq!(
        found[1]["structured"]["answer"], "over http",
        "{}",
        found[1]
    );
    // A non-loopback address is refused without --allow-remote.
    let refused = world
        .command(&common::kin_binary())
        .args(["mcp", "--listen", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--allow-remote"));
    server.start_kill().unwrap();
    let _ = server.wait().await;
}

#[tokio::test]
async fn an_editors_session_list_marks_a_session_started_over_mcp() {
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["made over mcp"]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "hello"}"#])
        .await;
    let id = session_id(&found[0]);
    // `kin acp` on the same KIN_HOME: the editor's own session is listed without the mark.
    let home = world.home.path().to_string_lossy().into_owned();
    let mut acp =
        common::Wire::start_with(None, tempfile::tempdir().unwrap(), &[("KIN_HOME", &home)]);
    acp.initialize().await;
    let editors = acp.new_session().await;
    let (_, answer) = acp.request(1, "session/list", json!({})).await;
    let sessions = answer["result"]["sessions"].as_array().unwrap();
    let entry = |wanted: &str| {
        sessions
            .iter()
            .find(|s| s["sessionId"] == wanted)
            .unwrap_or_else(|| panic!("{wanted} is not listed: {answer}"))
            .clone()
    };
    assert_eq!(entry(&id)["_meta"]["kin.startedOver"], "mcp", "{answer}");
    assert!(entry(&editors).get("_meta").is_none(), "{answer}");
}

#[tokio::test]
async fn kin_reply_steers_a_task_that_is_mid_turn() {
    let Some(world) = World::new() else { return };
    let fifo = world.cwd.path().join("gate");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // The model's command blocks reading the FIFO: the task is mid-turn until the client
    // writes to it, which it does only after kin_reply answered.
    let command =
        json!({"command": format!("read -r line < {} && echo got $line", fifo.display())});
    world
        .model
        .push(tool_calls_reply(&[("c1", "bash", &command.to_string())]));
    world
        .model
        .push(text_reply(&["Counting in French: un, deux, trois."]));
    let fifo_arg = fifo.to_string_lossy().into_owned();
    let found = world
        .client(&["steer", &fifo_arg, "count to three", "answer in French"])
        .await;
    let started = &found[0]["structured"];
    let replied = &found[1];
    assert_eq!(replied["isError"], false, "{replied}");
    assert_eq!(replied["structured"]["delivered"], "into the running task");
    assert_eq!(replied["structured"]["taskId"], started["taskId"]);
    let output = &found[2];
    assert_eq!(output["structured"]["state"], "completed", "{output}");
    assert_eq!(
        output["structured"]["answer"],
        "Counting in French: un, deux, trois."
    );
    // The model's second request, in the same task, carried the steering message after the
    // command's result.
    let requests = world.model.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body.to_string();
    assert!(second.contains("answer in French"), "{second}");
    assert!(second.contains("got go"), "{second}");
}

#[tokio::test]
async fn the_agent_argument_runs_the_task_as_a_users_agent_definition() {
    let Some(world) = World::new() else { return };
    world.configure("[models.small]\nmodel = \"mock-small\"\n");
    world.define(
        "pirate",
        "---\ndescription: Reads and talks like a pirate\ntools: [Read, grep]\nmodel: small\n\
         permission: read-only\n---\nAlways answer like a pirate.\n",
    );
    world.model.push(text_reply(&["Arr, nothing to report."]));
    let found = world
        .client(&[
            "call",
            "kin",
            r#"{"prompt": "report", "agent": "pirate", "mode": "ask"}"#,
        ])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["answer"], "Arr, nothing to report.");
    // The definition's instructions, tools and model reached the model.
    let request = &world.model.requests()[0].body;
    assert_eq!(request["model"], "mock-small", "{request}");
    assert!(
        request.to_string().contains("Always answer like a pirate."),
        "{request}"
    );
    let mut tools: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools, ["grep", "read"], "{request}");
    // Its permission narrowed the call's `ask` to read-only.
    let id = result["structured"]["sessionId"].as_str().unwrap();
    let log = world.log(id);
    assert!(log.contains("read-only"), "{log}");
    // An unknown name is refused, listing the defined ones.
    let unknown = world
        .client(&["call", "kin", r#"{"prompt": "x", "agent": "parrot"}"#])
        .await;
    assert_eq!(unknown[0]["isError"], true, "{}", unknown[0]);
    let text = unknown[0]["text"].as_str().unwrap();
    assert!(
        text.contains("unknown agent \"parrot\"") && text.contains("pirate"),
        "{text}"
    );
}

impl World {
    /// Writes the agent definition `name` into the workspace's `.kin/agents/`.
    fn define(&self, name: &str, text: &str) -> PathBuf {
        let agents = self.cwd.path().join(".kin/agents");
        std::fs::create_dir_all(&agents).unwrap();
        let path = agents.join(format!("{name}.md"));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes kin's config file.
    fn configure(&self, text: &str) {
        let config = self.home.path().join("config/kin");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.toml"), text).unwrap();
    }

    /// One `kin_reply` call on a fresh server.
    async fn reply(&self, id: &str, prompt: &str, mode: &str) -> Value {
        let arguments = json!({"session_id": id, "prompt": prompt, "mode": mode}).to_string();
        self.client(&["call", "kin_reply", &arguments])
            .await
            .remove(0)
    }
}

/// The names of the tools a model request offered, sorted.
fn offered(request: &Value) -> Vec<String> {
    let mut tools: Vec<String> = request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    tools.sort_unstable();
    tools
}

/// The mode the last `permission/mode` event of a log set.
fn last_mode(log: &str) -> String {
    log.lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "permission/mode")
        .map(|event| {
            event["data"]["mode"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_agent_definition_still_applies_after_the_server_restarted() {
    let Some(world) = World::new() else { return };
    let definition = world.define(
        "pirate",
        "---\ndescription: Reads like a pirate\ntools: [read]\npermission: read-only\n---\n\
         Always answer like a pirate.\n",
    );
    world.model.push(text_reply(&["Arr, first."]));
    let found = world
        .client(&[
            "call",
            "kin",
            r#"{"prompt": "report", "agent": "pirate", "mode": "ask"}"#,
        ])
        .await;
    let id = session_id(&found[0]);
    // A new server reopens the session from disk: the model is offered only `read`, under the
    // definition's instructions, and the call's `ask` is narrowed to read-only again. The
    // model's `bash` is not a tool of this session, so nothing runs.
    world.model.push(tool_calls_reply(&[(
        "c1",
        "bash",
        r#"{"command":"touch made.txt"}"#,
    )]));
    world.model.push(text_reply(&["Arr, second."]));
    let result = world.reply(&id, "and now?", "ask").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["answer"], "Arr, second.");
    let requests = world.model.requests();
    let reopened = &requests[1].body;
    assert_eq!(offered(reopened), ["read"], "{reopened}");
    assert!(
        reopened
            .to_string()
            .contains("Always answer like a pirate."),
        "{reopened}"
    );
    assert!(!world.cwd.path().join("made.txt").exists());
    assert_eq!(last_mode(&world.log(&id)), "read-only");
    let log = world.log(&id);
    let header: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!(header["agentDefinition"], "pirate", "{header}");
    // The definition deleted: the result says so, the session runs as kin, but within the
    // mode its log records (read-only), whatever the call asks for.
    std::fs::remove_file(definition).unwrap();
    world.model.push(text_reply(&["third"]));
    let result = world.reply(&id, "once more", "ask").await;
    assert_eq!(result["isError"], false, "{result}");
    let notice = result["structured"]["notice"].as_str().unwrap_or_default();
    assert!(
        notice.contains("\"pirate\"") && notice.contains("no longer defined"),
        "{result}"
    );
    assert!(result["text"]
        .as_str()
        .unwrap()
        .contains("no longer defined"));
    assert_eq!(last_mode(&world.log(&id)), "read-only");
}

/// A configured stdio MCP server named `t` (tests/mcp/stdio_server.py, its marks going to
/// plain files): tools `mcp__t__count`, `crash`, `echo`, `grow`, `wait`.
fn configure_mcp_server(world: &World) {
    let marks = world.home.path().join("marks");
    let go = world.home.path().join("go");
    let server = json!({
        "command": world.python,
        "args": [common::repo().join("tests/mcp/stdio_server.py"), marks, go],
    });
    let config = format!(
        "mcp_startup_timeout = \"60s\"\n\n[mcp_servers.t]\ncommand = {}\nargs = {}\n",
        server["command"], server["args"]
    );
    world.configure(&config);
}

#[tokio::test]
async fn a_definitions_tools_limit_the_configured_mcp_servers_tools_too() {
    let Some(world) = World::new() else { return };
    configure_mcp_server(&world);
    world.define(
        "echoer",
        "---\ndescription: Reads and echoes\ntools: [read, mcp__t__echo]\n---\nEcho things.\n",
    );
    world.define(
        "server-user",
        "---\ndescription: Uses the whole server\ntools: [grep, mcp__t]\n---\nUse t.\n",
    );
    // The kin tool run as a definition: its one MCP tool, named as the model sees it.
    world.model.push(text_reply(&["echoed"]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "echo", "agent": "echoer"}"#])
        .await;
    assert_eq!(found[0]["isError"], false, "{}", found[0]);
    let first = &world.model.requests()[0].body;
    assert_eq!(offered(first), ["mcp__t__echo", "read"], "{first}");
    // A session without a definition sees every tool of the server; its subagent child run
    // as a definition naming the server sees all of them and only its own kin tool.
    let call = json!({"description": "use t", "prompt": "use the server", "agent": "server-user"});
    world
        .model
        .push(tool_calls_reply(&[("c1", "subagent", &call.to_string())]));
    world.model.push(text_reply(&["child done"]));
    world.model.push(text_reply(&["parent done"]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "delegate"}"#])
        .await;
    assert_eq!(
        found[0]["structured"]["answer"], "parent done",
        "{}",
        found[0]
    );
    let requests = world.model.requests();
    let parent = offered(&requests[1].body);
    assert!(
        parent.iter().any(|t| t == "mcp__t__wait") && parent.iter().any(|t| t == "bash"),
        "{parent:?}"
    );
    let child = &requests[2].body;
    assert!(child.to_string().contains("use the server"), "{child}");
    assert_eq!(
        offered(child),
        [
            "grep",
            "mcp__t__count",
            "mcp__t__crash",
            "mcp__t__echo",
            "mcp__t__grow",
            "mcp__t__picture",
            "mcp__t__wait"
        ],
        "{child}"
    );
}

#[tokio::test]
async fn a_definitions_timeout_and_budget_end_an_mcp_task_definitely() {
    let Some(world) = World::new() else { return };
    world.define(
        "hasty",
        "---\ndescription: Has one second\ntimeout: 1\n---\nBe quick.\n",
    );
    world.define(
        "frugal",
        "---\ndescription: Has twenty tokens\nbudget: 20\n---\nBe brief.\n",
    );
    // The model stalls: the definition's time limit ends the task, which settles isError
    // naming timed_out, and kin hangs up on the model.
    world.model.push(Reply::Hang(vec![event(&chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "stall", "agent": "hasty"}"#])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structured"]["state"], "failed", "{result}");
    let error = result["structured"]["error"].as_str().unwrap();
    assert!(error.starts_with("timed_out"), "{result}");
    assert!(result["text"].as_str().unwrap().contains("timed_out"));
    let closed = tokio::time::timeout(DEADLINE, world.model.next_event()).await;
    assert_eq!(closed.unwrap(), ServerEvent::ClientClosed { request: 0 });
    let id = result["structured"]["sessionId"].as_str().unwrap();
    assert!(world.log(id).contains("timed_out"));
    // A step of 25 tokens spends the budget of 20: the task stops there, budget_exhausted.
    std::fs::write(world.cwd.path().join("a.txt"), "a\n").unwrap();
    world
        .model
        .push(tool_calls_reply(&[("c1", "read", r#"{"path":"a.txt"}"#)]));
    world.model.push(text_reply(&["never asked"]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "read", "agent": "frugal"}"#])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], true, "{result}");
    let error = result["structured"]["error"].as_str().unwrap();
    assert!(error.starts_with("budget_exhausted"), "{result}");
    assert_eq!(world.model.requests().len(), 2);
}

#[tokio::test]
async fn the_delegation_time_limit_bounds_a_plain_kin_task() {
    let Some(world) = World::new() else { return };
    world.configure("[delegation]\ntimeout = \"1s\"\n");
    world.model.push(Reply::Hang(vec![event(&chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "stall"}"#])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], true, "{result}");
    let error = result["structured"]["error"].as_str().unwrap();
    assert!(error.starts_with("timed_out"), "{result}");
    let closed = tokio::time::timeout(DEADLINE, world.model.next_event()).await;
    assert_eq!(closed.unwrap(), ServerEvent::ClientClosed { request: 0 });
}

#[tokio::test]
async fn a_failed_kin_task_hands_back_what_it_wrote_so_far() {
    let Some(world) = World::new() else { return };
    world.configure("[delegation]\ntimeout = \"1s\"\n");
    world.model.push(Reply::Hang(vec![
        event(&chunk(json!({"role": "assistant", "content": ""}), None)),
        event(&chunk(json!({"content": "half an answer"}), None)),
    ]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "stall"}"#])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structured"]["state"], "failed", "{result}");
    assert_eq!(result["structured"]["partialOutput"], "half an answer");
    assert!(result["structured"].get("answer").is_none(), "{result}");
    let text = result["text"].as_str().unwrap();
    assert!(
        text.ends_with("\nPartial output before the run ended:\nhalf an answer"),
        "{text}"
    );
}

#[tokio::test]
async fn kin_output_after_a_restart_answers_from_the_log() {
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["the answer ", "is 42"]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "what is it?"}"#])
        .await;
    let id = session_id(&found[0]);
    // A new server never ran a task on it: the last turn is read from the log.
    let arguments = json!({"session_id": id}).to_string();
    let output = world.client(&["call", "kin_output", &arguments]).await;
    let result = &output[0];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["state"], "completed", "{result}");
    assert_eq!(result["structured"]["answer"], "the answer is 42");
    assert_eq!(result["structured"]["fromLog"], true);
    assert!(result["text"]
        .as_str()
        .unwrap()
        .contains("the answer is 42"));
    // Nothing of it runs in this server: kin_cancel says so from the log, and stops nothing.
    let cancel = world.client(&["call", "kin_cancel", &arguments]).await;
    let result = &cancel[0];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["cancelled"], false, "{result}");
    assert_eq!(result["structured"]["fromLog"], true, "{result}");
    assert_eq!(result["structured"]["state"], "completed", "{result}");
    // A session kin mcp does not know is still refused.
    let other = json!({"session_id": "00000000-0000-4000-8000-000000000000"}).to_string();
    let refused = world.client(&["call", "kin_output", &other]).await;
    assert_eq!(refused[0]["isError"], true);
    assert!(refused[0]["text"]
        .as_str()
        .unwrap()
        .contains("unknown session"));
}

/// Runs `git args` in `dir` (a commit needs no configured identity).
fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(["-c", "user.email=k@k", "-c", "user.name=k", "-C"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

impl World {
    /// Makes the server's cwd a git repository with one commit.
    fn git_init(&self) {
        let cwd = self.cwd.path();
        git(cwd, &["init", "-q", "-b", "main"]);
        std::fs::write(cwd.join("README"), "a repository\n").unwrap();
        git(cwd, &["add", "README"]);
        git(cwd, &["commit", "-q", "-m", "first"]);
    }

    /// The number of stored sessions.
    fn stored(&self) -> usize {
        std::fs::read_dir(self.home.path().join("sessions"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|entry| entry.path().extension().is_some_and(|e| e == "jsonl"))
                    .count()
            })
            .unwrap_or(0)
    }
}

/// The `cwd` a session's header records.
fn recorded_cwd(log: &str) -> PathBuf {
    let header: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    PathBuf::from(header["cwd"].as_str().unwrap())
}

#[tokio::test]
async fn a_definitions_worktree_isolation_runs_the_task_in_its_own_worktree() {
    let Some(world) = World::new() else { return };
    world.git_init();
    // Not committed: found in the checkout, also when the session is reopened in its worktree.
    world.define(
        "isolated",
        "---\ndescription: Works apart\nisolation: worktree\n---\nWork carefully.\n",
    );
    world.model.push(tool_calls_reply(&[(
        "c1",
        "write",
        r#"{"path":"made.txt","content":"one\ntwo\n"}"#,
    )]));
    world.model.push(text_reply(&["wrote it"]));
    let found = world
        .client(&[
            "allowed",
            "kin",
            r#"{"prompt": "write made.txt", "agent": "isolated", "mode": "allow"}"#,
        ])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], false, "{result}");
    let id = session_id(result);
    // The file is in the session's worktree (its recorded cwd), not in the main checkout.
    let dir = recorded_cwd(&world.log(&id));
    assert!(
        dir.ends_with(format!(".git/kin-worktrees/{id}")),
        "{}",
        dir.display()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(!world.cwd.path().join("made.txt").exists());
    assert_eq!(
        git(world.cwd.path(), &["status", "--porcelain"]),
        "?? .kin/"
    );
    // The result names the branch, the changed file and the diffstat, after the answer.
    let branch = format!("kin/{id}");
    let answer = result["structured"]["answer"].as_str().unwrap();
    assert!(answer.starts_with("wrote it\n[worktree: "), "{answer}");
    assert!(answer.contains(&format!("on branch {branch}]")), "{answer}");
    assert!(answer.contains("  made.txt"), "{answer}");
    assert!(
        answer.contains("1 file changed, 2 insertions(+)"),
        "{answer}"
    );
    assert!(result["text"].as_str().unwrap().contains(&branch));
    assert_eq!(
        git(
            world.cwd.path(),
            &["branch", "--list", "--format=%(refname:short)", "kin/*"]
        ),
        branch
    );

    // A restarted server continues in the same worktree, as the same definition.
    world.model.push(tool_calls_reply(&[(
        "c1",
        "read",
        r#"{"path":"made.txt"}"#,
    )]));
    world.model.push(text_reply(&["read it"]));
    let result = world.reply(&id, "read it back", "read-only").await;
    assert_eq!(result["isError"], false, "{result}");
    assert!(result["structured"].get("notice").is_none(), "{result}");
    let answer = result["structured"]["answer"].as_str().unwrap();
    assert!(answer.starts_with("read it\n[worktree: "), "{answer}");
    assert!(answer.contains(&branch), "{answer}");
    let requests = world.model.requests();
    let read = requests[3].body.to_string();
    assert!(read.contains(r"1\tone\n"), "{read}");
    assert!(read.contains("Work carefully."), "{read}");
    // kin_output in a later server reads the log and reports the worktree too.
    let arguments = json!({"session_id": id}).to_string();
    let output = world.client(&["call", "kin_output", &arguments]).await;
    let answer = output[0]["structured"]["answer"].as_str().unwrap();
    assert_eq!(output[0]["structured"]["fromLog"], true, "{}", output[0]);
    assert!(answer.starts_with("read it\n[worktree: "), "{answer}");
    assert!(answer.contains("  made.txt"), "{answer}");
}

#[tokio::test]
async fn a_worktree_task_without_changes_reports_it_removed_and_outside_a_repository_fails() {
    let Some(world) = World::new() else { return };
    world.git_init();
    // The call's own `isolation`: a task that changes nothing.
    world.model.push(text_reply(&["nothing to change"]));
    let found = world
        .client(&[
            "call",
            "kin",
            r#"{"prompt": "look around", "isolation": "worktree"}"#,
        ])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structured"]["answer"],
        "nothing to change\n[worktree: no changes; worktree and branch removed]",
        "{result}"
    );
    let id = result["structured"]["sessionId"].as_str().unwrap();
    let dir = recorded_cwd(&world.log(id));
    assert!(dir.ends_with(format!(".git/kin-worktrees/{id}")));
    assert!(!dir.exists());
    assert_eq!(
        git(
            world.cwd.path(),
            &["branch", "--list", "--format=%(refname:short)", "kin/*"]
        ),
        ""
    );
    // kin_reply makes it again where it was, and the task runs there.
    world.model.push(text_reply(&["still nothing"]));
    let result = world.reply(id, "and now?", "read-only").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structured"]["answer"],
        "still nothing\n[worktree: no changes; worktree and branch removed]",
        "{result}"
    );

    // Not a git repository: a definite error naming why, and no session left behind.
    let elsewhere = tempfile::tempdir().unwrap();
    let before = world.stored();
    let call = json!({"prompt": "x", "cwd": elsewhere.path(), "isolation": "worktree"});
    let found = world.client(&["call", "kin", &call.to_string()]).await;
    let result = &found[0];
    assert_eq!(result["isError"], true, "{result}");
    let text = result["text"].as_str().unwrap();
    assert!(
        text.starts_with("isolation \"worktree\" needs a git repository;")
            && text.contains(&elsewhere.path().display().to_string()),
        "{text}"
    );
    assert_eq!(world.stored(), before);
    assert_eq!(world.model.requests().len(), 2);
}

#[tokio::test]
async fn a_call_cancelled_while_its_worktree_is_checked_out_leaves_nothing_behind() {
    use std::os::unix::fs::PermissionsExt;

    let Some(world) = World::new() else { return };
    world.git_init();
    // The checkout's hook says it started, then never ends: git is still adding.
    let fifo = world.home.path().join("started");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let hook = world.cwd.path().join(".git/hooks/post-checkout");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    let script = format!(
        "#!/bin/sh\necho started > '{}'\nexec sleep 600\n",
        fifo.display()
    );
    std::fs::write(&hook, script).unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let fifo = fifo.display().to_string();
    let found = world
        .client(&[
            "cancel-when",
            &fifo,
            r#"{"prompt": "x", "isolation": "worktree"}"#,
        ])
        .await;
    assert_eq!(found, [json!({"hook": "started"})]);
    // No session, worktree or branch: the server removed what git had made before it ended.
    assert_eq!(world.stored(), 0);
    let kept = world.cwd.path().join(".git/kin-worktrees");
    let entries = std::fs::read_dir(&kept).map_or(0, |dir| dir.count());
    assert_eq!(entries, 0, "{}", kept.display());
    let listed = git(world.cwd.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    let branches = git(
        world.cwd.path(),
        &["branch", "--list", "--format=%(refname:short)", "kin/*"],
    );
    assert_eq!(branches, "");
    assert!(world.model.requests().is_empty());
}

#[tokio::test]
async fn kin_run_session_reopens_a_definitions_session_within_its_permission() {
    let Some(world) = World::new() else { return };
    world.define(
        "reader",
        "---\ndescription: Only reads\ntools: [read, write]\npermission: read-only\n---\n\
         Only read.\n",
    );
    world.model.push(text_reply(&["hello"]));
    let found = world
        .client(&["call", "kin", r#"{"prompt": "hi", "agent": "reader"}"#])
        .await;
    let id = session_id(&found[0]);
    // Opened by a user with `--mode allow`: the definition's tools, instructions and
    // read-only ceiling apply again, so the write is refused.
    world.model.push(tool_calls_reply(&[(
        "c1",
        "write",
        r#"{"path":"made.txt","content":"x\n"}"#,
    )]));
    world.model.push(text_reply(&["could not write"]));
    let run = world
        .command(&common::kin_binary())
        .args(["run", "--mode", "allow", "--session", &id, "write made.txt"])
        .output()
        .await
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&run.stdout).trim(),
        "could not write"
    );
    assert!(!world.cwd.path().join("made.txt").exists());
    let requests = world.model.requests();
    let reopened = &requests[1].body;
    assert_eq!(offered(reopened), ["read", "write"], "{reopened}");
    assert!(reopened.to_string().contains("Only read."), "{reopened}");
    let refused = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(refused.contains("read-only"), "{refused}");
}

//! `kin mcp` driven by an independently written MCP client: the official Python SDK
//! (tests/mcp/kin_client.py, `mcp` from tests/interop/requirements.txt) over real pipes, and
//! once over streamable HTTP. The model is the scripted OpenAI-compatible mock server.
//! Outside CI, without a Python that has the `mcp` package, each test prints a visible skip.
//!
//! The tools, the ways in and the modes (`tools`); continuing, steering, cancelling and
//! ending tasks (`tasks`); tasks run as a user's agent definition (`definitions`); tasks in
//! their own git worktree (`worktrees`).

mod definitions;
mod tasks;
mod tools;
mod worktrees;

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::mock_openai::{MockServer, ServerEvent};
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(120);

/// One server's world: its store, its cwd and its model.
struct World {
    python: PathBuf,
    home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    model: MockServer,
}

impl World {
    /// `None` (a visible skip) without a Python that has what these tests import.
    fn new() -> Option<Self> {
        Some(Self {
            python: common::python_with("mcp.client.stdio, mcp.client.streamable_http")?,
            home: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            model: MockServer::start(),
        })
    }

    /// `program` in the world's cwd, with its store, config and model (and nothing of the
    /// developer's own model settings).
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

    /// The result of one call of `tool` with `arguments` (JSON) on a fresh server.
    async fn call(&self, tool: &str, arguments: &str) -> Value {
        self.client(&["call", tool, arguments]).await.remove(0)
    }

    /// One `kin_reply` call on a fresh server.
    async fn reply(&self, id: &str, prompt: &str, mode: &str) -> Value {
        let arguments = json!({"session_id": id, "prompt": prompt, "mode": mode});
        self.call("kin_reply", &arguments.to_string()).await
    }

    /// `kin args` run to success in the world; what it printed, trimmed.
    async fn kin(&self, args: &[&str]) -> String {
        let run = self
            .command(&common::kin_binary())
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        String::from_utf8_lossy(&run.stdout).trim().to_owned()
    }

    /// Waits for kin to hang up on the model's first request.
    async fn assert_model_hung_up(&self) {
        let closed = tokio::time::timeout(DEADLINE, self.model.next_event()).await;
        assert_eq!(closed.unwrap(), ServerEvent::ClientClosed { request: 0 });
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
}

/// The session id a `kin` call's result names.
fn session_id(result: &Value) -> String {
    result["structured"]["sessionId"]
        .as_str()
        .expect("the result names its session")
        .to_owned()
}

/// A session log's header (its first line).
fn header(log: &str) -> Value {
    serde_json::from_str(log.lines().next().unwrap()).unwrap()
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

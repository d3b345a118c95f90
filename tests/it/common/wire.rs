//! A raw-pipe ACP client for wire-level tests: `kin acp` started in fresh dirs, lines
//! written and read one by one, and the step lists most tests share (initialize, a session,
//! a text prompt, the session's log).

use std::path::Path;

use serde_json::{json, Value};

use super::{kin_binary, MODEL_ENV};

/// The text of the `kind` updates (e.g. `user_message_chunk`) among kin's messages, joined.
pub fn chunk_text(messages: &[Value], kind: &str) -> String {
    messages
        .iter()
        .filter(|m| m.pointer("/params/update/sessionUpdate") == Some(&json!(kind)))
        .filter_map(|m| m.pointer("/params/update/content/text")?.as_str())
        .collect()
}

/// The agent's answer among kin's messages: its `agent_message_chunk` texts, joined.
pub fn answer_text(messages: &[Value]) -> String {
    chunk_text(messages, "agent_message_chunk")
}

/// The params of a `session/prompt` with one text block.
pub fn prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// A raw-pipe client for wire-level tests: writes lines, reads kin's lines one by one.
pub struct Wire {
    pub child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    pub home: tempfile::TempDir,
    pub cwd: tempfile::TempDir,
}

impl Wire {
    /// Starts `kin acp`, with `--replay replay` when given, in fresh home and workspace dirs.
    pub fn start(replay: Option<&Path>) -> Self {
        Self::start_in(replay, tempfile::tempdir().unwrap())
    }

    pub fn start_in(replay: Option<&Path>, home: tempfile::TempDir) -> Self {
        Self::start_with(replay, home, &[])
    }

    /// Starts kin with no model configuration from the environment or a config file but
    /// `env` (and `$XDG_CONFIG_HOME` = `<home>/config`, empty unless the test writes there).
    pub fn start_with(
        replay: Option<&Path>,
        home: tempfile::TempDir,
        env: &[(&str, &str)],
    ) -> Self {
        use tokio::io::AsyncBufReadExt;
        let cwd = tempfile::tempdir().unwrap();
        let mut command = tokio::process::Command::new(kin_binary());
        command.arg("acp");
        if let Some(dir) = replay {
            command.arg("--replay").arg(dir);
        }
        for name in MODEL_ENV {
            command.env_remove(name);
        }
        command.env("XDG_CONFIG_HOME", home.path().join("config"));
        command.env("KIN_HOME", home.path());
        // `env` may override the above (e.g. two processes sharing one KIN_HOME).
        command.envs(env.iter().copied());
        let mut child = command
            .current_dir(cwd.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            lines,
            home,
            cwd,
        }
    }

    pub fn cwd(&self) -> String {
        self.cwd.path().to_string_lossy().into_owned()
    }

    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).await.unwrap();
        stdin.flush().await.unwrap();
    }

    pub async fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.send_bytes(line.as_bytes()).await;
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// The next line kin writes (None at EOF). Guarded by a generous timeout against hangs.
    pub async fn read(&mut self) -> Option<Value> {
        let line = self.read_line().await?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    /// The next line kin writes as text, for checks on exact spelling. The guard is 60 s, or
    /// `KIN_TEST_READ_TIMEOUT` seconds (a real local model on a busy machine can take minutes).
    pub async fn read_line(&mut self) -> Option<String> {
        let seconds = std::env::var("KIN_TEST_READ_TIMEOUT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(60);
        let guard = std::time::Duration::from_secs(seconds);
        tokio::time::timeout(guard, self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("kin answered within {seconds} s"))
            .unwrap()
    }

    /// Reads until the answer to `id`; returns (notifications before it, the answer).
    pub async fn answer(&mut self, id: &Value) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self
                .read()
                .await
                .expect("kin closed stdout before answering");
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return (before, message);
            }
            before.push(message);
        }
    }

    pub async fn request(&mut self, id: i64, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.answer(&json!(id)).await
    }

    pub async fn initialize(&mut self) {
        let (_, answer) = self
            .request(0, "initialize", json!({"protocolVersion": 1}))
            .await;
        assert_eq!(answer["result"]["protocolVersion"], 1);
    }

    pub async fn new_session(&mut self) -> String {
        let cwd = self.cwd();
        let (_, answer) = self
            .request(1000, "session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        answer["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// Initializes, then opens a new session in kin's cwd; its id.
    pub async fn open_session(&mut self) -> String {
        self.initialize().await;
        self.new_session().await
    }

    /// Initializes as a client with these `clientCapabilities`.
    pub async fn initialize_with(&mut self, capabilities: Value) {
        let params = json!({"protocolVersion": 1, "clientCapabilities": capabilities});
        let (_, answer) = self.request(0, "initialize", params).await;
        assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    }

    /// Initializes as a client that takes compaction updates.
    pub async fn initialize_with_compaction(&mut self) {
        self.initialize_with(json!({"session": {"compaction": {}}}))
            .await;
    }

    /// Sets `session`'s mode to `mode` as request `id`, which must succeed.
    pub async fn set_mode(&mut self, id: i64, session: &str, mode: &str) {
        let params = json!({"sessionId": session, "modeId": mode});
        let (_, answer) = self.request(id, "session/set_mode", params).await;
        assert!(answer.get("error").is_none(), "{answer}");
    }

    /// Prompts `session` with `text` as request `id`; (notifications before the answer, the
    /// answer).
    pub async fn prompt(&mut self, id: i64, session: &str, text: &str) -> (Vec<Value>, Value) {
        self.request(id, "session/prompt", prompt(session, text))
            .await
    }

    /// That prompt, whose turn must end (`end_turn`); the notifications before the answer.
    pub async fn turn(&mut self, id: i64, session: &str, text: &str) -> Vec<Value> {
        let (updates, answer) = self.prompt(id, session, text).await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
        updates
    }

    /// Sends that prompt without waiting for its answer.
    pub async fn send_prompt(&mut self, id: i64, session: &str, text: &str) {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                             "params": prompt(session, text)});
        self.send(&message).await;
    }

    /// Loads `session` in kin's cwd as request `id`; (the replayed notifications, the answer).
    pub async fn load(&mut self, id: i64, session: &str) -> (Vec<Value>, Value) {
        let params = json!({"sessionId": session, "cwd": self.cwd(), "mcpServers": []});
        self.request(id, "session/load", params).await
    }

    /// The events of `session`'s log (header first).
    pub fn log(&self, session: &str) -> Vec<Value> {
        let path = self.home.path().join(format!("sessions/{session}.jsonl"));
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Ends kin (stdin closed, exit awaited) and hands back its home.
    pub async fn stop(mut self) -> tempfile::TempDir {
        self.close_stdin();
        self.child.wait().await.unwrap();
        std::mem::replace(&mut self.home, tempfile::tempdir().unwrap())
    }
}

//! Drives one `kin acp` child through a scenario's steps, recording every line it writes.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::client::{ClientSide, Reply};
use super::{Input, Step};
use crate::rpc::{Frame, LineReader};

/// A guard against a broken agent, not a timing assertion: no scenario step comes near it.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a scenario run failed.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// kin could not be started.
    #[error("could not start {binary}: {source}")]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Reading from or writing to kin failed.
    #[error("talking to kin failed: {0}")]
    Io(#[from] std::io::Error),
    /// kin closed its stdout (the text says during what).
    #[error("kin closed its stdout while {0}")]
    Eof(String),
    /// kin wrote a line that is not JSON.
    #[error("kin wrote a line that is not JSON: {0}")]
    NotJson(String),
    /// kin did not answer in time (the text says what was awaited).
    #[error("no answer within {STEP_TIMEOUT:?} while {0}")]
    Timeout(String),
    /// A step failed.
    #[error("step {step}: {reason}")]
    Step {
        /// The step's index.
        step: usize,
        /// What went wrong.
        reason: String,
    },
    /// kin sent a request the scenario has no answer for.
    #[error("kin asked something the scenario cannot answer: {0}")]
    Client(String),
}

/// What the runner saw, for printing a transcript.
pub enum RunEvent<'a> {
    /// A message the client sent.
    Sent(&'a Value),
    /// A message kin wrote.
    Received(&'a Value),
}

/// How to run kin for a scenario.
pub struct RunOptions {
    /// The `kin` binary.
    pub binary: PathBuf,
    /// Scenario directory served with `--replay`; `None` runs kin on its configured model
    /// (recording).
    pub replay_dir: Option<PathBuf>,
    /// Extra environment for the child (e.g. the model configuration when recording).
    pub env: Vec<(String, String)>,
    /// `KIN_HOME` for the child.
    pub home: PathBuf,
    /// The workspace new sessions are created in. A `workspace/` directory in the scenario is
    /// copied into it before kin starts.
    pub cwd: PathBuf,
}

/// Drives one `kin acp` process as a scripted client.
pub struct Runner<'a> {
    child: Child,
    stdin: Option<ChildStdin>,
    /// kin's stdout, one frame at a time, read by a task (so waiting on it can be interrupted).
    frames: mpsc::UnboundedReceiver<std::io::Result<Frame>>,
    /// Answers the client sends late (`terminal/wait_for_exit`).
    deferred: mpsc::UnboundedReceiver<Value>,
    client: ClientSide,
    stderr: tokio::task::JoinHandle<String>,
    cwd: PathBuf,
    next_id: i64,
    sessions: Vec<String>,
    /// Ids of prompts sent but not yet answered.
    open_prompts: HashSet<i64>,
    /// Every line kin wrote to stdout, in order.
    pub(crate) stdout: Vec<String>,
    observe: Box<dyn FnMut(RunEvent<'_>) + Send + 'a>,
}

impl<'a> Runner<'a> {
    /// Starts `kin acp` with `options`; `observe` sees every message both ways.
    pub fn start(
        options: &RunOptions,
        observe: impl FnMut(RunEvent<'_>) + Send + 'a,
    ) -> Result<Self, ScenarioError> {
        let mut command = Command::new(&options.binary);
        command.arg("acp");
        if let Some(dir) = &options.replay_dir {
            let workspace = dir.join("workspace");
            if workspace.is_dir() {
                copy_tree(&workspace, &options.cwd)?;
            }
            if let Some(config) = scenario_config(dir, options)? {
                command.env("XDG_CONFIG_HOME", config);
            }
            command.arg("--replay").arg(dir);
        }
        let mut child = command
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .env("KIN_HOME", &options.home)
            .current_dir(&options.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| ScenarioError::Spawn {
                binary: options.binary.clone(),
                source,
            })?;
        let (Some(stdin), Some(stdout), Some(mut stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ScenarioError::Eof("starting".into()));
        };
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        let (frames_tx, frames) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = LineReader::new(stdout);
            loop {
                let frame = lines.next_frame().await.transpose();
                let end = !matches!(frame, Some(Ok(_)));
                if let Some(frame) = frame {
                    let _ = frames_tx.send(frame);
                }
                if end {
                    break;
                }
            }
        });
        let (deferred_tx, deferred) = mpsc::unbounded_channel();
        Ok(Self {
            child,
            stdin: Some(stdin),
            frames,
            deferred,
            client: ClientSide::new(deferred_tx),
            stderr,
            cwd: options.cwd.clone(),
            next_id: 1,
            sessions: Vec::new(),
            open_prompts: HashSet::new(),
            stdout: Vec::new(),
            observe: Box::new(observe),
        })
    }

    /// Session ids in creation order.
    pub fn sessions(&self) -> &[String] {
        &self.sessions
    }

    /// Plays every step, then shuts kin down (stdin EOF) and collects what it wrote last.
    pub async fn run(mut self, input: &Input) -> Result<(Vec<String>, String), ScenarioError> {
        self.script_permissions(input.permission_answers.as_deref());
        for (index, step) in input.steps.iter().enumerate() {
            self.step(index, step).await?;
        }
        self.finish().await
    }

    /// Sets the answers to kin's permission prompts (None: allow each once).
    pub fn script_permissions(&mut self, answers: Option<&[super::PermissionAnswerEntry]>) {
        self.client.script_permissions(answers);
    }

    /// Plays one step (for tests that interleave their own checks between steps).
    pub async fn play(&mut self, step: &Step) -> Result<(), ScenarioError> {
        self.step(0, step).await
    }

    /// Closes stdin, reads kin's last words and waits for it to exit.
    pub async fn finish(mut self) -> Result<(Vec<String>, String), ScenarioError> {
        drop(self.stdin.take());
        loop {
            match tokio::time::timeout(STEP_TIMEOUT, self.read_line()).await {
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) => break,
                Ok(Err(error)) => return Err(error),
                Err(_) => return Err(ScenarioError::Timeout("waiting for kin to exit".into())),
            }
        }
        match tokio::time::timeout(STEP_TIMEOUT, self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => {
                let _ = self.child.kill().await;
                return Err(ScenarioError::Timeout("waiting for kin to exit".into()));
            }
        }
        let stderr = self.stderr.await.unwrap_or_default();
        Ok((self.stdout, stderr))
    }

    fn session(&self, step: usize, index: Option<usize>) -> Result<String, ScenarioError> {
        let found = match index {
            Some(i) => self.sessions.get(i),
            None => self.sessions.last(),
        };
        found.cloned().ok_or_else(|| ScenarioError::Step {
            step,
            reason: "no such session (create one with newSession first)".into(),
        })
    }

    fn fill(&self, value: &Value) -> Value {
        match value {
            Value::String(s) => {
                let mut out = s.replace("{{cwd}}", &self.cwd.to_string_lossy());
                for (i, id) in self.sessions.iter().enumerate() {
                    out = out.replace(&format!("{{{{session:{i}}}}}"), id);
                }
                if let Some(last) = self.sessions.last() {
                    out = out.replace("{{session}}", last);
                }
                Value::String(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.fill(v)).collect()),
            Value::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), self.fill(v))).collect())
            }
            other => other.clone(),
        }
    }

    async fn step(&mut self, index: usize, step: &Step) -> Result<(), ScenarioError> {
        let cwd = self.cwd.to_string_lossy().into_owned();
        match step {
            Step::Initialize {
                client_capabilities,
            } => {
                let capabilities = client_capabilities.clone().unwrap_or_else(|| json!({}));
                self.client.advertise(&capabilities);
                let params = json!({
                    "protocolVersion": 1,
                    "clientCapabilities": capabilities,
                    "clientInfo": {"name": "kin-scenario", "version": env!("CARGO_PKG_VERSION")},
                });
                self.call("initialize", params).await?;
            }
            Step::NewSession { cwd: custom } => {
                let cwd = custom.clone().unwrap_or(cwd);
                let answer = self
                    .call("session/new", json!({"cwd": cwd, "mcpServers": []}))
                    .await?;
                if let Some(id) = answer.pointer("/result/sessionId").and_then(Value::as_str) {
                    self.sessions.push(id.to_owned());
                }
            }
            Step::Prompt { text, session } => {
                let id = self.session(index, *session)?;
                self.call("session/prompt", prompt_params(&id, text))
                    .await?;
            }
            Step::StartPrompt { text, session } => {
                let id = self.session(index, *session)?;
                self.start_prompt(&id, text).await?;
            }
            Step::PromptAndCancel {
                text,
                session,
                cancel_on,
            } => {
                let id = self.session(index, *session)?;
                match cancel_on {
                    None => self.start_prompt(&id, text).await?,
                    Some(method) => {
                        let prompt = self
                            .send_request("session/prompt", prompt_params(&id, text))
                            .await?;
                        self.open_prompts.insert(prompt);
                        self.read_until(&format!("waiting for kin to send {method}"), |m| {
                            m.get("method").and_then(Value::as_str) == Some(method.as_str())
                        })
                        .await?;
                    }
                }
                self.notify("session/cancel", json!({"sessionId": id}))
                    .await?;
                self.wait_for_prompts().await?;
            }
            Step::Cancel { session } => {
                let id = self.session(index, *session)?;
                self.notify("session/cancel", json!({"sessionId": id}))
                    .await?;
            }
            Step::WaitForTurnEnd {} => self.wait_for_prompts().await?,
            Step::WaitFor { method } => {
                self.read_until(&format!("waiting for kin to send {method}"), |m| {
                    m.get("method").and_then(Value::as_str) == Some(method.as_str())
                })
                .await?;
            }
            Step::LoadSession { session } | Step::ResumeSession { session } => {
                let id = self.session(index, *session)?;
                let method = match step {
                    Step::LoadSession { .. } => "session/load",
                    _ => "session/resume",
                };
                self.call(
                    method,
                    json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
                )
                .await?;
            }
            Step::ListSessions { filter_cwd, cursor } => {
                let mut params = json!({});
                if *filter_cwd {
                    params["cwd"] = json!(cwd);
                }
                if let Some(cursor) = cursor {
                    params["cursor"] = json!(cursor);
                }
                self.call("session/list", params).await?;
            }
            Step::CloseSession { session } | Step::DeleteSession { session } => {
                let id = self.session(index, *session)?;
                let method = match step {
                    Step::CloseSession { .. } => "session/close",
                    _ => "session/delete",
                };
                self.call(method, json!({"sessionId": id})).await?;
            }
            Step::Request { method, params } => {
                let params = self.fill(params);
                self.call(method, params).await?;
            }
            Step::Notify { method, params } => {
                let params = self.fill(params);
                self.notify(method, params).await?;
            }
            Step::Raw { line, replies } => {
                self.write_line(line).await?;
                if *replies {
                    self.read_until(
                        &format!("waiting for the answer to raw line {line:?}"),
                        |m| m.get("id").is_some() && m.get("method").is_none(),
                    )
                    .await?;
                }
            }
        }
        Ok(())
    }

    async fn start_prompt(&mut self, session: &str, text: &str) -> Result<(), ScenarioError> {
        let id = self
            .send_request("session/prompt", prompt_params(session, text))
            .await?;
        self.open_prompts.insert(id);
        let session = session.to_owned();
        // The session's slash commands are announced when it opens, not by the prompt; its
        // title is announced as the prompt is taken, before the turn streams anything. Waiting
        // past both keeps what the next step sends after the turn's first output.
        self.read_until("waiting for the prompt's first update", |m| {
            m.get("method").and_then(Value::as_str) == Some("session/update")
                && m.pointer("/params/sessionId").and_then(Value::as_str) == Some(session.as_str())
                && !matches!(
                    m.pointer("/params/update/sessionUpdate")
                        .and_then(Value::as_str),
                    Some("available_commands_update" | "session_info_update")
                )
        })
        .await?;
        Ok(())
    }

    async fn wait_for_prompts(&mut self) -> Result<(), ScenarioError> {
        while !self.open_prompts.is_empty() {
            let open = self.open_prompts.clone();
            self.read_until("waiting for open prompts to be answered", |m| {
                m.get("method").is_none()
                    && m.get("id")
                        .and_then(Value::as_i64)
                        .is_some_and(|id| open.contains(&id))
            })
            .await?;
        }
        Ok(())
    }

    async fn write_line(&mut self, line: &str) -> Result<(), ScenarioError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| ScenarioError::Eof("writing".into()))?;
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    async fn send(&mut self, message: Value) -> Result<(), ScenarioError> {
        (self.observe)(RunEvent::Sent(&message));
        self.write_line(&message.to_string()).await
    }

    async fn send_request(&mut self, method: &str, params: Value) -> Result<i64, ScenarioError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    async fn notify(&mut self, method: &str, params: Value) -> Result<(), ScenarioError> {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await
    }

    /// Sends a request and reads until its answer; returns the answer.
    async fn call(&mut self, method: &str, params: Value) -> Result<Value, ScenarioError> {
        let id = self.send_request(method, params).await?;
        self.read_until(&format!("waiting for the answer to {method}"), |m| {
            m.get("id") == Some(&json!(id)) && m.get("method").is_none()
        })
        .await
    }

    /// Reads lines (answering kin's own requests) until one satisfies `done`.
    async fn read_until(
        &mut self,
        doing: &str,
        mut done: impl FnMut(&Value) -> bool,
    ) -> Result<Value, ScenarioError> {
        loop {
            let line = match tokio::time::timeout(STEP_TIMEOUT, self.read_line()).await {
                Ok(line) => line?,
                Err(_) => return Err(ScenarioError::Timeout(doing.to_owned())),
            };
            let Some(message) = line else {
                return Err(ScenarioError::Eof(doing.to_owned()));
            };
            if done(&message) {
                return Ok(message);
            }
        }
    }

    /// Reads one line, records it, answers it if it is a request to the client. Late client
    /// answers are sent while waiting.
    async fn read_line(&mut self) -> Result<Option<Value>, ScenarioError> {
        let frame = loop {
            tokio::select! {
                frame = self.frames.recv() => break frame,
                Some(answer) = self.deferred.recv(), if self.stdin.is_some() => self.send(answer).await?,
            }
        };
        let line = match frame {
            None => return Ok(None),
            Some(Err(error)) => return Err(error.into()),
            Some(Ok(Frame::Line(line))) => String::from_utf8_lossy(&line).into_owned(),
            Some(Ok(Frame::TooLong { len })) => {
                return Err(ScenarioError::NotJson(format!("<{len} bytes>")))
            }
        };
        let message: Value =
            serde_json::from_str(&line).map_err(|_| ScenarioError::NotJson(line.clone()))?;
        self.stdout.push(line);
        (self.observe)(RunEvent::Received(&message));
        if let Some(id) = message.get("id").and_then(Value::as_i64) {
            if message.get("method").is_none() {
                self.open_prompts.remove(&id);
            }
        }
        match (
            message.get("id"),
            message.get("method").and_then(Value::as_str),
        ) {
            (Some(id), Some(method)) => {
                let reply = self
                    .client
                    .answer(id, method, &message["params"])
                    .map_err(ScenarioError::Client)?;
                let answer = match reply {
                    Reply::Later => None,
                    Reply::Now(answer) => Some(answer),
                    Reply::CancelTurnThen(session, answer) => {
                        self.client.answer_on_cancel(id, answer);
                        self.notify("session/cancel", json!({"sessionId": session}))
                            .await?;
                        None
                    }
                };
                if let Some(answer) = answer {
                    let mut response = json!({"jsonrpc": "2.0", "id": id});
                    match answer {
                        Ok(result) => response["result"] = result,
                        Err(error) => response["error"] = error,
                    }
                    self.send(response).await?;
                }
            }
            (None, Some(method)) => self.client.notified(method, &message["params"]),
            _ => {}
        }
        Ok(Some(message))
    }
}

/// Copies a scenario's `workspace/` into the run's cwd (files, directories and symlinks).
/// A scenario's `config.toml`, its `{{kin}}`, `{{examples}}` (the example binaries built beside
/// it, such as the test suite's fake ACP agent), `{{scenario}}` and `{{home}}` replaced, written
/// as the config file of the run; returns the config directory to point `XDG_CONFIG_HOME` at.
fn scenario_config(dir: &Path, options: &RunOptions) -> std::io::Result<Option<PathBuf>> {
    let text = match std::fs::read_to_string(dir.join("config.toml")) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let examples = options.binary.with_file_name("examples");
    let text = text
        .replace("{{kin}}", &options.binary.to_string_lossy())
        .replace("{{examples}}", &examples.to_string_lossy())
        .replace("{{scenario}}", &dir.to_string_lossy())
        .replace("{{home}}", &options.home.to_string_lossy());
    let config = options.home.join("config");
    std::fs::create_dir_all(config.join("kin"))?;
    std::fs::write(config.join("kin/config.toml"), text)?;
    Ok(Some(config))
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source)?, &target)?;
        } else if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

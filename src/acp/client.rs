//! kin as the client of an ACP agent subprocess (a child agent): launch, handshake, one prompt
//! at a time, and a teardown that leaves no process behind.
//!
//! The child runs in a process group of its own, under the process guard when kin runs it
//! (`tools::guard`), with the scrubbed tool environment (`tools::child_env`) plus what its
//! configuration adds, and the delegation depth in `KIN_DELEGATION_DEPTH`. It speaks JSON-RPC on
//! its stdin/stdout through the same [`Peer`] that serves the editor; its stderr is kept, last
//! lines only, for error reports. Only `agent_message_chunk` text collected during a prompt is
//! the answer; other updates (tool calls, thoughts, plans) are kept aside.
//!
//! Any fault settles to a [`ChildError`] naming its cause: a start failure, no answer to
//! `initialize` in time, an exit (status and last stderr lines), output that is not JSON-RPC,
//! or output beyond [`MAX_OUTPUT_BYTES`].

use std::collections::VecDeque;
use std::fmt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::AcpPermission;
use crate::rpc::{Handler, Peer, Reply, RequestContext, RpcError};
use crate::tools::child_env;
use crate::tools::guard::{self, Lifeline};
use crate::tools::process::describe_status;
use crate::tools::{PermissionMode, SessionPermissions, ToolKind};

/// Where the delegation depth goes on `session/new`: `_meta` key.
pub const DEPTH_META_KEY: &str = "kin.delegationDepth";
/// ... and the environment variable, for launchers that do not speak ACP.
pub const DEPTH_ENV: &str = "KIN_DELEGATION_DEPTH";
/// The most a child may send in agent message text and kept-aside updates in one run.
pub const MAX_OUTPUT_BYTES: usize = 4 << 20;
/// Stderr lines kept for error reports, and the longest kept line.
const STDERR_LINES: usize = 10;
const STDERR_LINE_BYTES: usize = 400;
/// How long a closed connection may wait for the exit status that explains it.
const EXIT_REPORT_WAIT: Duration = Duration::from_secs(2);

/// What to launch, and how to treat it.
#[derive(Debug, Clone)]
pub struct ChildCommand {
    pub program: String,
    pub args: Vec<String>,
    /// Added after the credential scrub.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub permission: AcpPermission,
    /// The delegating session's permissions: the child's requests are answered within their
    /// current mode, whatever `permission` says (a `read-only` parent refuses edits and commands).
    pub ceiling: Option<Arc<SessionPermissions>>,
    /// The child's delegation depth (the parent's plus one).
    pub depth: u32,
    pub initialize_timeout: Duration,
    /// Teardown: after stdin closes, the wait before SIGTERM; after SIGTERM, before SIGKILL.
    pub eof_grace: Duration,
    pub term_grace: Duration,
}

/// The last stderr lines of a child, as an error detail (`; stderr: a | b`, or nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StderrTail(pub Vec<String>);

impl fmt::Display for StderrTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        write!(f, "; last stderr lines: {}", self.0.join(" | "))
    }
}

/// Why a child run failed; the message names the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChildError {
    #[error("could not start the ACP child `{program}`: {reason}")]
    Spawn { program: String, reason: String },
    #[error("the ACP child did not answer initialize within {}ms{stderr}", timeout.as_millis())]
    InitializeTimeout {
        timeout: Duration,
        stderr: StderrTail,
    },
    #[error("the ACP child exited during {stage} ({status}){stderr}")]
    Exited {
        stage: String,
        status: String,
        stderr: StderrTail,
    },
    #[error("the ACP child wrote output that is not JSON-RPC ({detail}){stderr}")]
    Garbage { detail: String, stderr: StderrTail },
    #[error("the ACP child flooded its output: more than {limit} bytes in one run")]
    Flood { limit: usize },
    #[error("the ACP child answered {method} with an error: {message}")]
    Refused { method: String, message: String },
    #[error("the ACP child answered session/new without a session id")]
    NoSessionId,
    #[error("the ACP child cannot continue a session (it advertises neither session/resume nor session/load)")]
    NotContinuable,
    #[error("the ACP child run was cancelled")]
    Cancelled,
}

/// How one prompt ended.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptOutcome {
    /// The ACP stop reason (`end_turn`, `cancelled`, ...).
    pub stop_reason: String,
    /// The agent message text of this prompt.
    pub text: String,
    /// The other updates of this prompt (tool calls, thoughts, plans), for display only.
    pub updates: Vec<Value>,
}

/// A message for the child's running prompt, and where to say whether the child took it:
/// `Ok`, or `Err` with the child's reason for refusing it. A verdict dropped unsent means the
/// run ended before the child took the message.
pub struct Steer {
    pub text: String,
    pub verdict: oneshot::Sender<Result<(), String>>,
}

/// A fault seen while reading the child.
#[derive(Debug, Clone)]
enum Fault {
    Garbage(String),
    Flood,
}

/// What the child's messages leave behind; shared with the connection's handler.
#[derive(Default)]
struct Collected {
    /// Set while a prompt is in flight: text outside one (e.g. a loaded history) is not output.
    collecting: AtomicBool,
    state: Mutex<CollectedState>,
    /// Tripped on the first fault.
    faulted: CancellationToken,
}

#[derive(Default)]
struct CollectedState {
    text: String,
    updates: Vec<Value>,
    bytes: usize,
    fault: Option<Fault>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Collected {
    fn fail(&self, fault: Fault) {
        let mut state = lock(&self.state);
        if state.fault.is_none() {
            state.fault = Some(fault);
        }
        self.faulted.cancel();
    }

    fn update(&self, params: &Value) {
        if !self.collecting.load(Ordering::Acquire) {
            return;
        }
        let Some(update) = params.get("update") else {
            return;
        };
        let text = (update.get("sessionUpdate").and_then(Value::as_str)
            == Some("agent_message_chunk"))
        .then(|| update.pointer("/content/text").and_then(Value::as_str))
        .map(Option::unwrap_or_default);
        let mut state = lock(&self.state);
        let size = text.map_or_else(|| update.to_string().len(), str::len);
        state.bytes += size;
        if state.bytes > MAX_OUTPUT_BYTES {
            drop(state);
            return self.fail(Fault::Flood);
        }
        match text {
            Some(text) => state.text.push_str(text),
            None => state.updates.push(update.clone()),
        }
    }

    fn take(&self) -> (String, Vec<Value>) {
        let mut state = lock(&self.state);
        state.bytes = 0;
        (
            std::mem::take(&mut state.text),
            std::mem::take(&mut state.updates),
        )
    }
}

/// Answers the child's requests to its client.
struct ClientHandler {
    collected: Arc<Collected>,
    permission: AcpPermission,
    ceiling: Option<Arc<SessionPermissions>>,
}

impl Handler for ClientHandler {
    fn request(&self, method: String, params: Value, _cx: RequestContext) -> Reply {
        Reply::Now(match method.as_str() {
            "session/request_permission" => {
                let mode = self
                    .ceiling
                    .as_ref()
                    .map_or(PermissionMode::Allow, |ceiling| ceiling.effective_mode());
                Ok(permission_answer(self.permission, mode, &params))
            }
            _ => Err(RpcError::method_not_found(&method)),
        })
    }

    fn notification(&self, method: String, params: Value) {
        if method == "session/update" {
            self.collected.update(&params);
        }
    }

    fn invalid(&self, error: &RpcError) {
        self.collected.fail(Fault::Garbage(error.message.clone()));
    }
}

/// Answers a child's permission request within `policy` and `mode`, the delegating session's
/// current mode. `allow` picks the child's one-time allowing option: never `allow_always`, which
/// would grant the child more than this one call on the parent's behalf. Everything else is
/// `cancelled`: the `reject` and `ask` policies, a request with no one-time allowing option, and
/// under a `read-only` parent any request to change things (a kind kin cannot read counts as one).
fn permission_answer(policy: AcpPermission, mode: PermissionMode, params: &Value) -> Value {
    if policy == AcpPermission::Ask {
        tracing::info!("a child agent asked for permission; `ask` is answered as `reject` for now");
    }
    let kind = params
        .pointer("/toolCall/kind")
        .and_then(|kind| serde_json::from_value::<ToolKind>(kind.clone()).ok())
        .unwrap_or(ToolKind::Other);
    let permitted = mode.permits_changes(kind);
    if !permitted {
        tracing::info!(
            ?kind,
            "a child agent asked to change things under a read-only parent"
        );
    }
    let allowing = (policy == AcpPermission::Allow && permitted)
        .then(|| params.get("options").and_then(Value::as_array))
        .flatten()
        .and_then(|options| {
            options
                .iter()
                .find(|option| option.get("kind").and_then(Value::as_str) == Some("allow_once"))
        })
        .and_then(|option| option.get("optionId").cloned());
    match allowing {
        Some(id) => json!({"outcome": {"outcome": "selected", "optionId": id}}),
        None => json!({"outcome": {"outcome": "cancelled"}}),
    }
}

/// The child process: its group, its guard's lifeline, its exit status and its stderr.
struct Process {
    pgid: Option<Pid>,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    stderr_reader: Option<JoinHandle<()>>,
    lifeline: Option<Lifeline>,
}

impl Process {
    fn exited(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// Waits up to `limit` for the exit; true when it has exited.
    async fn wait_exit(&self, limit: Duration) -> bool {
        let mut exit = self.exit.clone();
        let waited = tokio::time::timeout(limit, exit.wait_for(Option::is_some)).await;
        // A closed channel means the waiter is gone: nothing left to wait for.
        waited.is_ok()
    }

    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            if let Err(error) = killpg(pgid, signal) {
                if error != nix::errno::Errno::ESRCH {
                    tracing::warn!(%error, pgid = pgid.as_raw(), "could not signal a child agent");
                }
            }
        }
    }

    /// The last stderr lines: those read so far, or (with a `limit`) once the stderr pipe
    /// has ended or `limit` has passed.
    async fn stderr_tail(&mut self, limit: Option<Duration>) -> StderrTail {
        if let Some(reader) = limit.and_then(|_| self.stderr_reader.take()) {
            let abort = reader.abort_handle();
            if tokio::time::timeout(limit.unwrap_or_default(), reader)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        StderrTail(lock(&self.stderr).iter().cloned().collect())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Dropped without a teardown (a cancelled caller, a panic): nothing may survive.
        if self.exited().is_none() {
            self.signal(Signal::SIGKILL);
        }
    }
}

/// A launched child agent with an ACP session. Call [`AcpChild::shutdown`] on every path.
pub struct AcpChild {
    command: ChildCommand,
    peer: Peer,
    writer: Option<JoinHandle<()>>,
    reader: Option<JoinHandle<()>>,
    collected: Arc<Collected>,
    process: Process,
    /// The child's `agentCapabilities` from `initialize`.
    pub capabilities: Value,
    /// The child's own session id.
    pub session_id: String,
}

impl AcpChild {
    /// Launches the child, `initialize`s it and opens a session in `command.cwd`. On any failure
    /// (or `cancel`) the child is torn down before this returns.
    pub async fn start(
        command: ChildCommand,
        cancel: &CancellationToken,
    ) -> Result<Self, ChildError> {
        Self::open(command, None, cancel).await
    }

    /// Launches the child and continues its session `session_id` (from an earlier launch):
    /// `session/resume` when the child advertises it, else `session/load` (the history it
    /// replays is not collected as output). Fails with [`ChildError::NotContinuable`] when it
    /// advertises neither.
    pub async fn reopen(
        command: ChildCommand,
        session_id: &str,
        cancel: &CancellationToken,
    ) -> Result<Self, ChildError> {
        Self::open(command, Some(session_id), cancel).await
    }

    /// Launches the child only to learn its `agentCapabilities` from `initialize`, then tears
    /// it down (no session is opened).
    pub async fn probe(
        command: ChildCommand,
        cancel: &CancellationToken,
    ) -> Result<Value, ChildError> {
        if cancel.is_cancelled() {
            return Err(ChildError::Cancelled);
        }
        let mut child = Self::launch(command)?;
        let initialized = child.initialize(cancel).await;
        let capabilities = child.capabilities.clone();
        child.shutdown().await;
        initialized.map(|()| capabilities)
    }

    async fn open(
        command: ChildCommand,
        session_id: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Self, ChildError> {
        if cancel.is_cancelled() {
            return Err(ChildError::Cancelled);
        }
        let mut child = Self::launch(command)?;
        let opened = match child.initialize(cancel).await {
            Ok(()) => match session_id {
                None => child.new_session(cancel).await,
                Some(id) => child.continue_session(id, cancel).await,
            },
            Err(error) => Err(error),
        };
        match opened {
            Ok(()) => Ok(child),
            Err(error) => {
                child.shutdown().await;
                Err(error)
            }
        }
    }

    /// Where the child runs.
    pub fn cwd(&self) -> &std::path::Path {
        &self.command.cwd
    }

    /// How this child can continue a session of an earlier launch (see [`continuation_method`]).
    pub fn continuation_method(&self) -> Option<&'static str> {
        continuation_method(&self.capabilities)
    }

    fn launch(command: ChildCommand) -> Result<Self, ChildError> {
        let spawn_error = |error: std::io::Error| ChildError::Spawn {
            program: command.program.clone(),
            reason: error.to_string(),
        };
        let (mut launcher, lifeline) =
            guard::command(&command.program, &command.args).map_err(spawn_error)?;
        launcher
            .current_dir(&command.cwd)
            .env_clear()
            .envs(child_env::scrubbed())
            .envs(command.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env(DEPTH_ENV, command.depth.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // A guard is stopped through its lifeline and the group signals below.
            .kill_on_drop(lifeline.is_none());
        let mut process = launcher.spawn().map_err(spawn_error)?;
        drop(launcher);
        let pgid = process
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        let (Some(stdin), Some(stdout), Some(stderr)) = (
            process.stdin.take(),
            process.stdout.take(),
            process.stderr.take(),
        ) else {
            return Err(spawn_error(std::io::Error::other("missing pipes")));
        };
        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            if let Ok(status) = process.wait().await {
                let _ = exit_tx.send(Some(status));
            }
        });
        let stderr_lines = Arc::new(Mutex::new(VecDeque::new()));
        let stderr_reader = tokio::spawn(keep_last_lines(stderr, stderr_lines.clone()));

        let collected = Arc::new(Collected::default());
        let handler = Arc::new(ClientHandler {
            collected: collected.clone(),
            permission: command.permission,
            ceiling: command.ceiling.clone(),
        });
        let (peer, writer) = Peer::new(stdin);
        let reading = peer.clone();
        let reader = tokio::spawn(async move {
            reading
                .serve(stdout, handler, CancellationToken::new())
                .await;
        });
        Ok(Self {
            command,
            peer,
            writer: Some(writer),
            reader: Some(reader),
            collected,
            process: Process {
                pgid,
                exit,
                stderr: stderr_lines,
                stderr_reader: Some(stderr_reader),
                lifeline,
            },
            capabilities: Value::Null,
            session_id: String::new(),
        })
    }

    async fn initialize(&mut self, cancel: &CancellationToken) -> Result<(), ChildError> {
        let initialize = json!({
            "protocolVersion": 1,
            "clientCapabilities": {},
            "clientInfo": {"name": "kin", "version": env!("CARGO_PKG_VERSION")},
        });
        let timeout = self.command.initialize_timeout;
        let answer =
            match tokio::time::timeout(timeout, self.call("initialize", &initialize, cancel)).await
            {
                Ok(answer) => answer?,
                Err(_) => {
                    let stderr = self.process.stderr_tail(None).await;
                    return Err(ChildError::InitializeTimeout { timeout, stderr });
                }
            };
        self.capabilities = answer
            .get("agentCapabilities")
            .cloned()
            .unwrap_or(Value::Null);
        Ok(())
    }

    async fn new_session(&mut self, cancel: &CancellationToken) -> Result<(), ChildError> {
        let mut meta = serde_json::Map::new();
        meta.insert(DEPTH_META_KEY.into(), self.command.depth.into());
        let new_session = json!({
            "cwd": self.command.cwd,
            "mcpServers": [],
            "_meta": meta,
        });
        let answer = self.call("session/new", &new_session, cancel).await?;
        self.session_id = answer
            .get("sessionId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .ok_or(ChildError::NoSessionId)?
            .to_owned();
        Ok(())
    }

    async fn continue_session(
        &mut self,
        session_id: &str,
        cancel: &CancellationToken,
    ) -> Result<(), ChildError> {
        let method = self
            .continuation_method()
            .ok_or(ChildError::NotContinuable)?;
        let params = json!({"sessionId": session_id, "cwd": self.command.cwd, "mcpServers": []});
        // Updates before a prompt (a loaded history) are not collected.
        self.call(method, &params, cancel).await?;
        self.session_id = session_id.to_owned();
        Ok(())
    }

    /// Sends `text` as one prompt and collects the answer. On `cancel`, tells the child
    /// (`session/cancel`) and returns at once with what was collected, stop reason `cancelled`.
    pub async fn prompt(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<PromptOutcome, ChildError> {
        let (_, mut no_steers) = mpsc::unbounded_channel();
        self.prompt_steered(text, cancel, &mut no_steers).await
    }

    /// [`AcpChild::prompt`], also sending each message from `steers` to the busy child (see
    /// [`Steer`]); collects until the child has answered every prompt it took.
    pub async fn prompt_steered(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
        steers: &mut mpsc::UnboundedReceiver<Steer>,
    ) -> Result<PromptOutcome, ChildError> {
        self.collected.take();
        self.collected.collecting.store(true, Ordering::Release);
        let answered = self.answer_prompts(text, cancel, steers).await;
        self.collected.collecting.store(false, Ordering::Release);
        // Whatever is still queued comes too late (its verdict is dropped unsent).
        steers.close();
        while steers.try_recv().is_ok() {}
        let stop_reason = answered?;
        let (text, updates) = self.collected.take();
        Ok(PromptOutcome {
            stop_reason,
            text,
            updates,
        })
    }

    /// The prompt loop: sends each steered message as one more `session/prompt` while the
    /// child is busy, and returns the stop reason of the last prompt to be answered.
    ///
    /// A steered prompt the child answers with an error was refused (not delivered). One it
    /// has not refused when the first prompt is answered was taken: the child is still working
    /// on it, so the run waits for its answer too.
    async fn answer_prompts(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
        steers: &mut mpsc::UnboundedReceiver<Steer>,
    ) -> Result<String, ChildError> {
        const METHOD: &str = "session/prompt";
        let faulted = self.collected.faulted.clone();
        let request = |peer: Peer, session: String, text: String, at: usize| {
            async move {
                let params =
                    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
                (at, peer.request(METHOD, &params).await)
            }
            .boxed()
        };
        let mut in_flight = FuturesUnordered::new();
        in_flight.push(request(
            self.peer.clone(),
            self.session_id.clone(),
            text.to_owned(),
            0,
        ));
        // One slot per prompt: the verdict a steered prompt still owes its sender.
        let mut verdicts: Vec<Option<oneshot::Sender<Result<(), String>>>> = vec![None];
        let mut stop_reason = String::new();
        let mut open = true;
        loop {
            tokio::select! {
                biased;
                _ = faulted.cancelled() => return Err(self.fault_error().await),
                _ = cancel.cancelled() => {
                    self.peer
                        .notify("session/cancel", &json!({"sessionId": self.session_id}));
                    return Ok("cancelled".to_owned());
                }
                answered = in_flight.next() => {
                    let Some((at, answer)) = answered else {
                        return Ok(stop_reason);
                    };
                    let owed = verdicts[at].take();
                    match answer {
                        Ok(answer) => {
                            stop_reason = answer
                                .get("stopReason")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_owned();
                            if let Some(verdict) = owed {
                                let _ = verdict.send(Ok(()));
                            }
                            if at == 0 {
                                // The child moved on with every steered prompt still open.
                                for verdict in verdicts.iter_mut().filter_map(Option::take) {
                                    let _ = verdict.send(Ok(()));
                                }
                            }
                        }
                        // A refusal of a steered prompt costs the run nothing.
                        Err(error) => match owed {
                            Some(verdict)
                                if error != RpcError::connection_closed()
                                    && !faulted.is_cancelled() =>
                            {
                                let _ = verdict.send(Err(error.message));
                            }
                            _ => return Err(self.call_error(METHOD, error).await),
                        },
                    }
                }
                steer = steers.recv(), if open => match steer {
                    Some(steer) => {
                        in_flight.push(request(
                            self.peer.clone(),
                            self.session_id.clone(),
                            steer.text,
                            verdicts.len(),
                        ));
                        verdicts.push(Some(steer.verdict));
                    }
                    None => open = false,
                },
            }
        }
    }

    /// One request, raced against faults, the child's end and `cancel`.
    async fn call(
        &mut self,
        method: &str,
        params: &Value,
        cancel: &CancellationToken,
    ) -> Result<Value, ChildError> {
        let faulted = self.collected.faulted.clone();
        let answer = tokio::select! {
            answer = self.peer.request(method, params) => answer,
            _ = faulted.cancelled() => return Err(self.fault_error().await),
            _ = cancel.cancelled() => return Err(ChildError::Cancelled),
        };
        match answer {
            Ok(answer) => Ok(answer),
            Err(error) => Err(self.call_error(method, error).await),
        }
    }

    /// What an error answer to `method` means: a fault can also end the connection (then it,
    /// not the end, is the cause); a closed connection is the child's end; anything else is
    /// the child's refusal.
    async fn call_error(&mut self, method: &str, error: RpcError) -> ChildError {
        if self.collected.faulted.is_cancelled() {
            self.fault_error().await
        } else if error == RpcError::connection_closed() {
            self.closed_error(method).await
        } else {
            ChildError::Refused {
                method: method.to_owned(),
                message: error.message,
            }
        }
    }

    async fn fault_error(&mut self) -> ChildError {
        let fault = lock(&self.collected.state).fault.clone();
        match fault {
            Some(Fault::Flood) | None => ChildError::Flood {
                limit: MAX_OUTPUT_BYTES,
            },
            Some(Fault::Garbage(detail)) => ChildError::Garbage {
                detail,
                stderr: self.process.stderr_tail(None).await,
            },
        }
    }

    /// The child closed its stdout: report how it ended.
    async fn closed_error(&mut self, method: &str) -> ChildError {
        self.process.wait_exit(EXIT_REPORT_WAIT).await;
        let status = match self.process.exited() {
            Some(status) => describe_status(status),
            None => "it closed its output but is still running".to_owned(),
        };
        ChildError::Exited {
            stage: method.to_owned(),
            status,
            stderr: self.process.stderr_tail(Some(EXIT_REPORT_WAIT)).await,
        }
    }

    /// Tears the child down: close stdin, wait `eof_grace`, SIGTERM the group, wait
    /// `term_grace`, SIGKILL. Returns once the child is gone.
    pub async fn shutdown(mut self) {
        if let Some(writer) = self.writer.take() {
            // A child that does not read could keep the last write from finishing.
            let abort = writer.abort_handle();
            if tokio::time::timeout(self.command.eof_grace, self.peer.close(writer))
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        let process = &self.process;
        if !process.wait_exit(self.command.eof_grace).await {
            process.signal(Signal::SIGTERM);
            if !process.wait_exit(self.command.term_grace).await {
                process.signal(Signal::SIGKILL);
                if !process.wait_exit(self.command.term_grace).await {
                    tracing::warn!(
                        program = self.command.program,
                        "a child agent survived SIGKILL"
                    );
                }
            }
        }
        // Gone or not, nothing is left to ask of it: drop the lifeline and stop reading.
        self.process.lifeline = None;
        for task in [self.reader.take(), self.process.stderr_reader.take()]
            .into_iter()
            .flatten()
        {
            let abort = task.abort_handle();
            if tokio::time::timeout(self.command.term_grace, task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

/// How an agent with these `agentCapabilities` continues a session of an earlier launch:
/// `session/resume` when advertised, else `session/load`, else not at all.
pub fn continuation_method(capabilities: &Value) -> Option<&'static str> {
    if capabilities
        .pointer("/sessionCapabilities/resume")
        .is_some_and(Value::is_object)
    {
        Some("session/resume")
    } else if capabilities.get("loadSession") == Some(&Value::Bool(true)) {
        Some("session/load")
    } else {
        None
    }
}

/// Reads `pipe` to its end, keeping the last [`STDERR_LINES`] lines (each cut to
/// [`STDERR_LINE_BYTES`]).
async fn keep_last_lines(pipe: impl AsyncRead + Unpin, kept: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = BufReader::new(pipe);
    let mut line = Vec::new();
    loop {
        line.clear();
        // Bounded reads: a line without end must not grow without end.
        match (&mut lines)
            .take(64 * 1024)
            .read_until(b'\n', &mut line)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                let text = text.trim_end();
                if text.is_empty() {
                    continue;
                }
                let mut cut: String = text.chars().take(STDERR_LINE_BYTES).collect();
                if cut.len() < text.len() {
                    cut.push('…');
                }
                let mut kept = lock(&kept);
                if kept.len() == STDERR_LINES {
                    kept.pop_front();
                }
                kept.push_back(cut);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_policies() {
        let params = json!({"options": [
            {"optionId": "no", "kind": "reject_once", "name": "No"},
            {"optionId": "always", "kind": "allow_always", "name": "Always"},
            {"optionId": "yes", "kind": "allow_once", "name": "Yes"},
        ]});
        let selected = |policy| permission_answer(policy, PermissionMode::Ask, &params);
        assert_eq!(
            selected(AcpPermission::Allow),
            json!({"outcome": {"outcome": "selected", "optionId": "yes"}})
        );
        for policy in [AcpPermission::Reject, AcpPermission::Ask] {
            assert_eq!(
                selected(policy),
                json!({"outcome": {"outcome": "cancelled"}})
            );
        }
        let only_always = json!({"options": [
            {"optionId": "no", "kind": "reject_once", "name": "No"},
            {"optionId": "always", "kind": "allow_always", "name": "Always"},
        ]});
        assert_eq!(
            permission_answer(AcpPermission::Allow, PermissionMode::Allow, &only_always),
            json!({"outcome": {"outcome": "cancelled"}}),
            "allow_always is never chosen on the parent's behalf"
        );
    }

    #[test]
    fn a_read_only_parent_refuses_its_childs_changes_whatever_the_policy() {
        let request = |kind: &str| {
            json!({"toolCall": {"toolCallId": "c", "kind": kind}, "options": [
                {"optionId": "yes", "kind": "allow_once", "name": "Yes"},
            ]})
        };
        let answer = |mode, kind| permission_answer(AcpPermission::Allow, mode, &request(kind));
        let cancelled = json!({"outcome": {"outcome": "cancelled"}});
        let yes = json!({"outcome": {"outcome": "selected", "optionId": "yes"}});
        for kind in ["edit", "execute", "delete", "move", "other", "unheard-of"] {
            assert_eq!(answer(PermissionMode::ReadOnly, kind), cancelled, "{kind}");
            assert_eq!(answer(PermissionMode::Ask, kind), yes, "{kind}");
        }
        assert_eq!(answer(PermissionMode::ReadOnly, "read"), yes);
        let no_kind = json!({"options": [{"optionId": "yes", "kind": "allow_once", "name": "Y"}]});
        assert_eq!(
            permission_answer(AcpPermission::Allow, PermissionMode::ReadOnly, &no_kind),
            cancelled
        );
    }

    #[test]
    fn only_message_text_during_a_prompt_is_output() {
        let collected = Collected::default();
        let chunk = |text: &str| json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}});
        collected.update(&chunk("history"));
        collected.collecting.store(true, Ordering::Release);
        collected.update(&chunk("a"));
        collected.update(&json!({"sessionId": "s", "update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}}));
        collected.update(&chunk("b"));
        let (text, updates) = collected.take();
        assert_eq!(text, "ab");
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0]["sessionUpdate"], "agent_thought_chunk");
    }

    #[test]
    fn too_much_output_is_a_flood() {
        let collected = Collected::default();
        collected.collecting.store(true, Ordering::Release);
        let big = "x".repeat(MAX_OUTPUT_BYTES / 2 + 1);
        let chunk = json!({"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": big}}});
        collected.update(&chunk);
        assert!(!collected.faulted.is_cancelled());
        collected.update(&chunk);
        assert!(collected.faulted.is_cancelled());
        assert!(matches!(lock(&collected.state).fault, Some(Fault::Flood)));
    }

    #[test]
    fn resume_is_preferred_to_load() {
        let method = |caps: Value| continuation_method(&caps);
        assert_eq!(
            method(json!({"loadSession": true, "sessionCapabilities": {"resume": {}}})),
            Some("session/resume")
        );
        assert_eq!(method(json!({"loadSession": true})), Some("session/load"));
        assert_eq!(method(json!({"loadSession": false})), None);
        assert_eq!(method(Value::Null), None);
    }

    #[test]
    fn stderr_tail_reads_as_a_detail() {
        assert_eq!(StderrTail::default().to_string(), "");
        assert_eq!(
            StderrTail(vec!["a".into(), "b".into()]).to_string(),
            "; last stderr lines: a | b"
        );
    }
}

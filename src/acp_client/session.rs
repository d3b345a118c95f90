//! [`AcpChild`]: one ACP session with a launched child agent. `initialize`, then a new or a
//! continued session, then prompts one at a time (with steered messages sent as more prompts
//! while one runs), then a teardown that leaves no process behind.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol_schema::v1::{NewSessionResponse, PromptResponse, StopReason};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::command::{ChildCommand, DEPTH_META_KEY, MAX_OUTPUT_BYTES, PARENT_META_KEY};
use super::error::ChildError;
use super::forward::Forwarder;
use super::inbound::{ClientHandler, Collected, Fault};
use super::permission::CommandGrants;
use super::process::Process;
use super::services;
use super::terminals::TerminalServices;
use crate::rpc::{Peer, RpcError};

/// How long a closed connection may wait for the exit status that explains it.
const EXIT_REPORT_WAIT: Duration = Duration::from_secs(2);

/// How one prompt ended.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptOutcome {
    /// The ACP stop reason of the last prompt answered (`Cancelled` when kin cancelled it).
    pub stop_reason: StopReason,
    /// The agent message text of this prompt.
    pub text: String,
}

/// A message for the child's running prompt, and where to say whether the child took it:
/// `Ok`, or `Err` with the child's reason for refusing it. A verdict dropped unsent means the
/// run ended before the child took the message.
pub struct Steer {
    /// The message.
    pub text: String,
    /// Gets the child's verdict on it.
    pub verdict: oneshot::Sender<Result<(), String>>,
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
    /// Passes the child's traffic on, when it has a place in kin's tree.
    forwarder: Option<Arc<Forwarder>>,
    /// The terminals it may run, released at its teardown.
    terminals: Option<Arc<TerminalServices>>,
    /// Whether it is offered file services.
    offers_files: bool,
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
    pub(crate) async fn probe(
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
    pub(crate) fn cwd(&self) -> &std::path::Path {
        &self.command.cwd
    }

    /// The working directory the child was told (the remote one, if any).
    pub(crate) fn command_cwd(&self) -> String {
        self.command.session_cwd()
    }

    /// How this child can continue a session of an earlier launch (see [`continuation_method`]).
    pub fn continuation_method(&self) -> Option<&'static str> {
        continuation_method(&self.capabilities)
    }

    fn launch(command: ChildCommand) -> Result<Self, ChildError> {
        let (process, pipes) = Process::launch(&command)?;
        let collected = Arc::new(Collected::default());
        let forwarder = command
            .link
            .clone()
            .map(|link| Arc::new(Forwarder::new(link)));
        // A remote child's paths are not this machine's: no terminals for it, and files only
        // where the editor's workspace covers them.
        let local = command
            .link
            .as_ref()
            .filter(|_| command.remote_cwd.is_none());
        let (files, files_refused) = services::for_command(&command);
        let grants = Arc::new(CommandGrants::default());
        let terminals = local.map(|link| {
            Arc::new(
                TerminalServices::new(
                    Arc::new(crate::tools::Roots::new(command.cwd.clone(), Vec::new())),
                    link.client.clone(),
                    link.call_id.clone(),
                    grants.clone(),
                    command.child_env.clone(),
                )
                .confined(command.sandbox.clone()),
            )
        });
        let offers_files = files.is_some();
        let handler = Arc::new(ClientHandler {
            collected: collected.clone(),
            permission: command.permission,
            ceiling: command.ceiling.clone(),
            forwarder: forwarder.clone(),
            files,
            files_refused,
            terminals: terminals.clone(),
            grants,
        });
        let (peer, writer) = Peer::new(pipes.stdin);
        let reading = peer.clone();
        let reader = tokio::spawn(async move {
            reading
                .serve(pipes.stdout, handler, CancellationToken::new())
                .await;
        });
        Ok(Self {
            command,
            peer,
            writer: Some(writer),
            reader: Some(reader),
            collected,
            process,
            capabilities: Value::Null,
            session_id: String::new(),
            forwarder,
            terminals,
            offers_files,
        })
    }

    async fn initialize(&mut self, cancel: &CancellationToken) -> Result<(), ChildError> {
        // A child with a place in the tree may show its own children and use kin's files.
        let mut client_capabilities = json!({});
        if self.forwarder.is_some() {
            client_capabilities["subagents"] = json!({});
        }
        if self.offers_files {
            client_capabilities["fs"] = json!({"readTextFile": true, "writeTextFile": true});
        }
        if self.terminals.is_some() {
            client_capabilities["terminal"] = true.into();
        }
        let initialize = json!({
            "protocolVersion": 1,
            "clientCapabilities": client_capabilities,
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

    /// The session's MCP servers this child takes: stdio always, `http` and `sse` entries only
    /// when its `initialize` answer's `mcpCapabilities` says so.
    fn mcp_servers(&self) -> Vec<Value> {
        let accepts = |kind: &str| {
            self.capabilities["mcpCapabilities"][kind]
                .as_bool()
                .unwrap_or(false)
        };
        let servers = self.command.mcp_servers.iter();
        servers
            .filter(|server| match server.get("type").and_then(Value::as_str) {
                None | Some("stdio") => true,
                Some(kind) => accepts(kind),
            })
            .cloned()
            .collect()
    }

    async fn new_session(&mut self, cancel: &CancellationToken) -> Result<(), ChildError> {
        let mut meta = serde_json::Map::new();
        meta.insert(DEPTH_META_KEY.into(), self.command.depth.into());
        if let Some(link) = &self.command.link {
            meta.insert(PARENT_META_KEY.into(), link.child.clone().into());
        }
        let new_session = json!({
            "cwd": self.command.session_cwd(),
            "mcpServers": self.mcp_servers(),
            "_meta": meta,
        });
        let answer = self.call("session/new", &new_session, cancel).await?;
        let opened = serde_json::from_value::<NewSessionResponse>(answer)
            .map_err(|_| ChildError::NoSessionId)?;
        let id = opened.session_id.0;
        if id.is_empty() {
            return Err(ChildError::NoSessionId);
        }
        self.session_id = id.to_string();
        self.collected.own_session(&self.session_id);
        if let Some(forwarder) = &self.forwarder {
            forwarder.root(&self.session_id);
        }
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
        let params = json!({"sessionId": session_id, "cwd": self.command.session_cwd(), "mcpServers": self.mcp_servers()});
        // Updates before a prompt (a loaded history) are not collected, but they are the
        // session's own.
        self.collected.own_session(session_id);
        self.call(method, &params, cancel).await?;
        self.session_id = session_id.to_owned();
        if let Some(forwarder) = &self.forwarder {
            forwarder.root(session_id);
        }
        Ok(())
    }

    /// Sends `text` as one prompt and collects the answer, also sending each message from
    /// `steers` to the busy child (see [`Steer`]); collects until the child has answered every
    /// prompt it took. On `cancel`, tells the child (`session/cancel`) and returns at once with
    /// what was collected, stop reason `Cancelled`.
    pub async fn prompt_steered(
        &mut self,
        text: &str,
        cancel: &CancellationToken,
        steers: &mut mpsc::UnboundedReceiver<Steer>,
    ) -> Result<PromptOutcome, ChildError> {
        let content = vec![json!({"type": "text", "text": text})];
        self.prompt_content_steered(text, content, cancel, steers)
            .await
    }

    /// [`AcpChild::prompt_steered`] with the first prompt given as its ACP content blocks
    /// (`text` is what the child's record and the editor show of it).
    pub async fn prompt_content_steered(
        &mut self,
        text: &str,
        content: Vec<Value>,
        cancel: &CancellationToken,
        steers: &mut mpsc::UnboundedReceiver<Steer>,
    ) -> Result<PromptOutcome, ChildError> {
        self.collected.take();
        if let Some(forwarder) = &self.forwarder {
            forwarder.announce(std::path::Path::new(&self.command.session_cwd()));
            forwarder.prompted(text);
        }
        self.collected.collecting.store(true, Ordering::Release);
        let answered = self.answer_prompts(content, cancel, steers).await;
        self.collected.collecting.store(false, Ordering::Release);
        if let Some(forwarder) = &self.forwarder {
            forwarder.finish(answered.as_ref().ok().copied());
        }
        // Whatever is still queued comes too late (its verdict is dropped unsent).
        steers.close();
        while steers.try_recv().is_ok() {}
        let stop_reason = answered?;
        Ok(PromptOutcome {
            stop_reason,
            text: self.collected.take(),
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
        content: Vec<Value>,
        cancel: &CancellationToken,
        steers: &mut mpsc::UnboundedReceiver<Steer>,
    ) -> Result<StopReason, ChildError> {
        const METHOD: &str = "session/prompt";
        let faulted = self.collected.faulted.clone();
        let request = |peer: Peer, session: String, content: Vec<Value>, at: usize| {
            async move {
                let params = json!({"sessionId": session, "prompt": content});
                (at, peer.request(METHOD, &params).await)
            }
            .boxed()
        };
        let mut in_flight = FuturesUnordered::new();
        in_flight.push(request(
            self.peer.clone(),
            self.session_id.clone(),
            content,
            0,
        ));
        // One slot per prompt: the verdict a steered prompt still owes its sender.
        let mut verdicts: Vec<Option<oneshot::Sender<Result<(), String>>>> = vec![None];
        // Every prompt is answered before the loop ends, so this is always replaced.
        let mut stop_reason = StopReason::EndTurn;
        let mut open = true;
        loop {
            tokio::select! {
                biased;
                _ = faulted.cancelled() => return Err(self.fault_error().await),
                _ = cancel.cancelled() => {
                    self.peer
                        .notify("session/cancel", &json!({"sessionId": self.session_id}));
                    return Ok(StopReason::Cancelled);
                }
                answered = in_flight.next() => {
                    let Some((at, answer)) = answered else {
                        return Ok(stop_reason);
                    };
                    let owed = verdicts[at].take();
                    match answer {
                        Ok(answer) => {
                            stop_reason = serde_json::from_value::<PromptResponse>(answer)
                                .map_err(|error| ChildError::BadAnswer {
                                    method: METHOD.to_owned(),
                                    detail: error.to_string(),
                                })?
                                .stop_reason;
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
                        if let Some(forwarder) = &self.forwarder {
                            forwarder.prompted(&steer.text);
                        }
                        in_flight.push(request(
                            self.peer.clone(),
                            self.session_id.clone(),
                            vec![json!({"type": "text", "text": steer.text})],
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
            let note = self.process.sandbox_note(&error.message);
            ChildError::Refused {
                method: method.to_owned(),
                message: note.map_or(error.message.clone(), |note| {
                    format!("{note} {}", error.message)
                }),
            }
        }
    }

    async fn fault_error(&mut self) -> ChildError {
        match self.collected.fault() {
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
        let (stage, status) = (method.to_owned(), self.process.status());
        let stderr = self.process.stderr_tail(Some(EXIT_REPORT_WAIT)).await;
        match self.command.remote_cwd {
            Some(_) => ChildError::ConnectionLost {
                stage,
                status,
                stderr,
            },
            None => ChildError::Exited {
                stage,
                status,
                stderr,
            },
        }
    }

    /// Tears the child down: close stdin, wait `eof_grace`, SIGTERM the group, wait
    /// `term_grace`, SIGKILL. Returns once the child is gone, with what went wrong if it is
    /// not (it outlived SIGKILL).
    pub async fn shutdown(mut self) -> Option<String> {
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
        let (stderr_reader, survived) = self.process.stop(&self.command).await;
        // Nothing is left to ask of it: stop reading.
        for task in [self.reader.take(), stderr_reader].into_iter().flatten() {
            let abort = task.abort_handle();
            if tokio::time::timeout(self.command.term_grace, task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        // Nothing it started in a terminal outlives its session.
        if let Some(terminals) = &self.terminals {
            terminals.close().await;
        }
        survived
    }

    /// The agent message text of the prompt that just failed: what the child had produced
    /// when its run ended.
    pub fn partial_text(&self) -> String {
        self.collected.take()
    }
}

/// How an agent with these `agentCapabilities` continues a session of an earlier launch:
/// `session/resume` when advertised, else `session/load`, else not at all.
pub fn continuation_method(capabilities: &Value) -> Option<&'static str> {
    if capabilities
        .get("sessionCapabilities")
        .and_then(|session| session.get("resume"))
        .is_some_and(Value::is_object)
    {
        Some("session/resume")
    } else if capabilities.get("loadSession") == Some(&Value::Bool(true)) {
        Some("session/load")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

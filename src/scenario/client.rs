//! The scripted client's side of kin's requests: permission prompts answered from the
//! scenario's `permissionAnswers` (or `allow_once` when it has none), and, when the scenario's
//! `initialize` advertised them, `fs/*` on the real file system and `terminal/*` as real
//! processes in their own process groups. Anything not advertised gets `-32601`, so a kin that
//! calls what the client does not offer shows up in the recorded output.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::process::child_env::ChildEnv;
use crate::process::group::Terminal;

/// One scripted answer to a `session/request_permission`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionScript {
    /// Answer `allow_once`.
    AllowOnce,
    /// Answer `allow_always`.
    AllowAlways,
    /// Answer `reject_once`.
    RejectOnce,
    /// Answer `reject_always`.
    RejectAlways,
    /// Answer `cancelled` (a dismissed prompt).
    Cancelled,
    /// Send `session/cancel` for the session first, then answer `cancelled`, as a client does
    /// when the user stops the turn while a prompt is open.
    CancelTurn,
}

/// One entry of a scenario's `permissionAnswers`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PermissionAnswerEntry {
    /// The answer to give.
    pub kind: PermissionScript,
    /// The tool call it answers (calls running side by side ask in any order); without one,
    /// the entry answers the next prompt no entry names.
    #[serde(default, rename = "toolCallId")]
    pub tool_call_id: Option<String>,
}

/// How the runner should answer one request from kin.
pub(crate) enum Reply {
    Now(Result<Value, Value>),
    /// The answer comes later through the deferred channel.
    Later,
    /// Send `session/cancel` for this session; answer once kin cancels the request (with
    /// `$/cancel_request`, as it does for every request a cancelled turn still waits on).
    CancelTurnThen(String, Result<Value, Value>),
}

/// The client's state across a scenario.
pub(crate) struct ClientSide {
    fs_read: bool,
    fs_write: bool,
    terminal: bool,
    /// None: answer every prompt with `allow_once`.
    answers: Option<VecDeque<PermissionAnswerEntry>>,
    terminals: HashMap<String, Arc<Terminal>>,
    next_terminal: usize,
    /// Requests answered later (`terminal/wait_for_exit`), by request id, for `$/cancel_request`.
    waiting: HashMap<String, CancellationToken>,
    /// Answers sent when kin cancels the request (by request id): whole response messages.
    on_cancel: HashMap<String, Value>,
    deferred: mpsc::UnboundedSender<Value>,
}

fn error(code: i64, message: impl Into<String>) -> Result<Value, Value> {
    Err(json!({"code": code, "message": message.into()}))
}

fn not_offered(method: &str) -> Result<Value, Value> {
    error(
        -32601,
        format!("method not found: {method} (not advertised by this client)"),
    )
}

impl ClientSide {
    pub(crate) fn new(deferred: mpsc::UnboundedSender<Value>) -> Self {
        Self {
            fs_read: false,
            fs_write: false,
            terminal: false,
            answers: None,
            terminals: HashMap::new(),
            next_terminal: 0,
            waiting: HashMap::new(),
            on_cancel: HashMap::new(),
            deferred,
        }
    }

    /// Takes what the scenario's `initialize` advertised.
    pub(crate) fn advertise(&mut self, capabilities: &Value) {
        let flag = |pointer: &str| capabilities.pointer(pointer) == Some(&Value::Bool(true));
        self.fs_read = flag("/fs/readTextFile");
        self.fs_write = flag("/fs/writeTextFile");
        self.terminal = flag("/terminal");
    }

    pub(crate) fn script_permissions(&mut self, answers: Option<&[PermissionAnswerEntry]>) {
        self.answers = answers.map(|a| a.iter().cloned().collect());
    }

    /// A notification from kin (only `$/cancel_request` matters to the client).
    pub(crate) fn notified(&mut self, method: &str, params: &Value) {
        if method != "$/cancel_request" {
            return;
        }
        let Some(id) = params.get("requestId").map(Value::to_string) else {
            return;
        };
        if let Some(token) = self.waiting.remove(&id) {
            token.cancel();
        }
        if let Some(response) = self.on_cancel.remove(&id) {
            let _ = self.deferred.send(response);
        }
    }

    /// Sends `answer` to request `id` once kin cancels it.
    pub(crate) fn answer_on_cancel(&mut self, id: &Value, answer: Result<Value, Value>) {
        let mut response = json!({"jsonrpc": "2.0", "id": id});
        match answer {
            Ok(result) => response["result"] = result,
            Err(error) => response["error"] = error,
        }
        self.on_cancel.insert(id.to_string(), response);
    }

    pub(crate) fn answer(
        &mut self,
        id: &Value,
        method: &str,
        params: &Value,
    ) -> Result<Reply, String> {
        Ok(match method {
            "session/request_permission" => return self.permission(params),
            "fs/read_text_file" if self.fs_read => Reply::Now(read_text_file(params)),
            "fs/write_text_file" if self.fs_write => Reply::Now(write_text_file(params)),
            "terminal/create" if self.terminal => Reply::Now(self.create_terminal(params)),
            "terminal/output" if self.terminal => Reply::Now(self.with_terminal(params, |t| {
                let (output, truncated, exit) = t.output();
                let mut answer = json!({"output": output, "truncated": truncated});
                if let Some(status) = exit {
                    answer["exitStatus"] = exit_status(status);
                }
                answer
            })),
            "terminal/kill" if self.terminal => Reply::Now(self.with_terminal(params, |t| {
                t.kill();
                json!({})
            })),
            "terminal/release" if self.terminal => {
                let id = params["terminalId"].as_str().unwrap_or_default();
                Reply::Now(match self.terminals.remove(id) {
                    Some(terminal) => {
                        terminal.kill();
                        Ok(json!({}))
                    }
                    None => error(-32002, format!("unknown terminal {id}")),
                })
            }
            "terminal/wait_for_exit" if self.terminal => self.wait_for_exit(id, params),
            _ => Reply::Now(not_offered(method)),
        })
    }

    fn permission(&mut self, params: &Value) -> Result<Reply, String> {
        let call = params
            .pointer("/toolCall/toolCallId")
            .and_then(Value::as_str);
        let script = match &mut self.answers {
            None => PermissionScript::AllowOnce,
            Some(queue) => {
                let named = queue
                    .iter()
                    .position(|e| e.tool_call_id.is_some() && e.tool_call_id.as_deref() == call);
                let at = named.or_else(|| queue.iter().position(|e| e.tool_call_id.is_none()));
                at.and_then(|at| queue.remove(at))
                    .map(|entry| entry.kind)
                    .ok_or_else(|| {
                        format!(
                            "kin asked for permission ({}) but the scenario's permissionAnswers are used up",
                            params.pointer("/toolCall/title").and_then(Value::as_str).unwrap_or("?")
                        )
                    })?
            }
        };
        let kind = match script {
            PermissionScript::AllowOnce => "allow_once",
            PermissionScript::AllowAlways => "allow_always",
            PermissionScript::RejectOnce => "reject_once",
            PermissionScript::RejectAlways => "reject_always",
            PermissionScript::Cancelled => {
                return Ok(Reply::Now(Ok(json!({"outcome": {"outcome": "cancelled"}}))))
            }
            PermissionScript::CancelTurn => {
                let session = params["sessionId"].as_str().unwrap_or_default().to_owned();
                return Ok(Reply::CancelTurnThen(
                    session,
                    Ok(json!({"outcome": {"outcome": "cancelled"}})),
                ));
            }
        };
        let option = params["options"]
            .as_array()
            .and_then(|options| options.iter().find(|o| o["kind"] == kind))
            .and_then(|o| o.get("optionId"))
            .ok_or_else(|| format!("kin offered no {kind} option: {params}"))?;
        Ok(Reply::Now(Ok(
            json!({"outcome": {"outcome": "selected", "optionId": option}}),
        )))
    }

    fn create_terminal(&mut self, params: &Value) -> Result<Value, Value> {
        let command = params["command"].as_str().unwrap_or_default();
        let args: Vec<String> = params["args"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let env: Vec<(String, String)> = params["env"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|e| {
                        Some((
                            e["name"].as_str()?.to_owned(),
                            e["value"].as_str()?.to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let cwd = params["cwd"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("."));
        let limit = params["outputByteLimit"]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(1 << 20);
        match Terminal::spawn(command, &args, &cwd, &ChildEnv::default(), &env, limit) {
            Ok(terminal) => {
                self.next_terminal += 1;
                let id = format!("term-{}", self.next_terminal);
                self.terminals.insert(id.clone(), Arc::new(terminal));
                Ok(json!({"terminalId": id}))
            }
            Err(e) => error(-32603, format!("could not start {command}: {e}")),
        }
    }

    fn with_terminal(
        &self,
        params: &Value,
        act: impl FnOnce(&Terminal) -> Value,
    ) -> Result<Value, Value> {
        let id = params["terminalId"].as_str().unwrap_or_default();
        match self.terminals.get(id) {
            Some(terminal) => Ok(act(terminal)),
            None => error(-32002, format!("unknown terminal {id}")),
        }
    }

    fn wait_for_exit(&mut self, id: &Value, params: &Value) -> Reply {
        let terminal_id = params["terminalId"].as_str().unwrap_or_default();
        let Some(terminal) = self.terminals.get(terminal_id).cloned() else {
            return Reply::Now(error(-32002, format!("unknown terminal {terminal_id}")));
        };
        let cancel = CancellationToken::new();
        self.waiting.insert(id.to_string(), cancel.clone());
        let (deferred, id) = (self.deferred.clone(), id.clone());
        tokio::spawn(async move {
            let mut answer = json!({"jsonrpc": "2.0", "id": id});
            tokio::select! {
                status = terminal.wait() => {
                    answer["result"] = status.map(exit_status).unwrap_or_else(|| json!({}));
                }
                _ = cancel.cancelled() => {
                    answer["error"] = json!({"code": -32800, "message": "request cancelled"});
                }
            }
            let _ = deferred.send(answer);
        });
        Reply::Later
    }
}

fn exit_status(status: std::process::ExitStatus) -> Value {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => json!({"exitCode": code}),
        (None, Some(signal)) => {
            let name = nix::sys::signal::Signal::try_from(signal)
                .map(|s| s.as_str().to_owned())
                .unwrap_or_else(|_| signal.to_string());
            json!({"signal": name})
        }
        _ => json!({}),
    }
}

fn read_text_file(params: &Value) -> Result<Value, Value> {
    let path = params["path"].as_str().unwrap_or_default();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return error(-32002, format!("resource not found: {path}"))
        }
        Err(e) => return error(-32603, format!("{path}: {e}")),
    };
    let line = params["line"].as_u64().unwrap_or(1).max(1) as usize;
    let lines = text.split_inclusive('\n').skip(line - 1);
    let content: String = match params["limit"].as_u64() {
        Some(limit) => lines.take(limit as usize).collect(),
        None => lines.collect(),
    };
    Ok(json!({"content": content}))
}

fn write_text_file(params: &Value) -> Result<Value, Value> {
    let path = PathBuf::from(params["path"].as_str().unwrap_or_default());
    let content = params["content"].as_str().unwrap_or_default();
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, content));
    match written {
        Ok(()) => Ok(json!({})),
        Err(e) => error(-32603, format!("{}: {e}", path.display())),
    }
}

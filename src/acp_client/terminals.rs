//! The terminals kin offers a child (`terminal/create`, `terminal/output`,
//! `terminal/wait_for_exit`, `terminal/kill`, `terminal/release`): run in the delegating
//! session's editor when it offers terminals (shown on the delegating tool call), else locally
//! in a process group under kin's guard, with the scrubbed environment and an output cap. The
//! `env` the child asks for is scrubbed by the same rule on both paths.
//!
//! A command runs only in the child's roots and within its permission: never under a
//! `read-only` parent or a `reject` policy; under `ask`, the user is asked (attributed to the
//! child) unless they just allowed the child's own request to run a command (see
//! [`CommandGrants`]). A child reaches only the terminals it created; whatever it leaves open
//! is released when its session ends ([`TerminalServices::close`], or the drop of the table).

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse,
    ReleaseTerminalRequest, ReleaseTerminalResponse, TerminalExitStatus, TerminalOutputRequest,
    TerminalOutputResponse, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
};
use futures::future::BoxFuture;
use futures::FutureExt;
use serde::Serialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::command::ChildSandbox;
use super::permission::{self, Asker, CommandGrants, Decision};
use super::services::confine;
use super::shown_terminals::{self, Shown};
use crate::config::AcpPermission;
use crate::process::child_env::ChildEnv;
use crate::process::group::Terminal;
use crate::process::sandbox::Launch;
use crate::rpc::{Reply, RpcError};
use crate::sync::lock;
use crate::tools::client::{
    ClientError, PermissionAnswer, PermissionPrompt, TerminalExit, TerminalSpec,
};
use crate::tools::{ClientBridge, PermissionMode, Roots, ToolDisplay, ToolKind};

/// The most output one terminal keeps, whatever the child asks for.
const MAX_OUTPUT_BYTES: u64 = 1 << 20;
/// What a terminal keeps when the child names no limit.
const DEFAULT_OUTPUT_BYTES: u64 = 64 * 1024;
/// The JSON-RPC code of a command kin refused to run (implementation-defined range).
const REFUSED: i32 = -32000;
/// Released terminals whose showing is remembered: a child's last update of a tool call
/// names its terminal after releasing it.
const REMEMBERED: usize = 32;

/// Where one child's terminals run, and the ones it has open.
pub(super) struct TerminalServices {
    roots: Arc<Roots>,
    /// The editor's terminals, when it offers them, and the tool call they are shown on.
    editor: Option<(Arc<dyn ClientBridge>, String)>,
    grants: Arc<CommandGrants>,
    /// The credential scrub of its commands' environment.
    child_env: ChildEnv,
    /// The child's sandbox, which its commands are held to (`None`: unconfined).
    sandbox: Option<ChildSandbox>,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    next: u64,
    /// By the id the child was given.
    open: HashMap<String, Open>,
    /// How the last released terminals show, oldest first.
    released: VecDeque<(String, Shown)>,
    /// The child's session ended: nothing new starts.
    closed: bool,
}

#[derive(Clone)]
enum Open {
    /// Kin's own process; dropping the last handle kills its group.
    Local(Arc<Terminal>),
    /// The editor's terminal, under the editor's id (so the child's tool calls can show it).
    Editor(String),
}

fn refused(message: &str) -> RpcError {
    RpcError::new(REFUSED, message)
}

fn client_error(error: ClientError) -> RpcError {
    match error {
        ClientError::Cancelled => RpcError::cancelled(),
        error => RpcError::internal(error.to_string()),
    }
}

fn encoded(answer: impl Serialize) -> Result<Value, RpcError> {
    serde_json::to_value(answer).map_err(|error| RpcError::internal(error.to_string()))
}

fn local_exit(status: ExitStatus) -> TerminalExitStatus {
    use std::os::unix::process::ExitStatusExt;
    let signal = status.signal().map(|signal| {
        nix::sys::signal::Signal::try_from(signal)
            .map(|name| name.as_str().to_owned())
            .unwrap_or_else(|_| signal.to_string())
    });
    let code = status.code().and_then(|code| u32::try_from(code).ok());
    TerminalExitStatus::new().exit_code(code).signal(signal)
}

fn editor_exit(exit: TerminalExit) -> TerminalExitStatus {
    TerminalExitStatus::new()
        .exit_code(exit.exit_code)
        .signal(exit.signal)
}

impl TerminalServices {
    /// `client` is the delegating session's editor and `call_id` its delegating tool call;
    /// both are needed for the editor's terminals. Its commands run in the environment
    /// `child_env` scrubs.
    pub(crate) fn new(
        roots: Arc<Roots>,
        client: Option<Arc<dyn ClientBridge>>,
        call_id: Option<String>,
        grants: Arc<CommandGrants>,
        child_env: ChildEnv,
    ) -> Self {
        let editor = client
            .filter(|client| client.features().terminal)
            .zip(call_id);
        Self {
            roots,
            editor,
            grants,
            child_env,
            sandbox: None,
            table: Mutex::default(),
        }
    }

    /// Its commands confined by `sandbox`, wherever they run.
    pub(crate) fn confined(mut self, sandbox: Option<ChildSandbox>) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// `terminal/create`: decided (see the module doc), then started.
    pub(crate) fn create(
        self: &Arc<Self>,
        request: CreateTerminalRequest,
        policy: AcpPermission,
        mode: PermissionMode,
        asker: Option<Asker>,
        cancel: CancellationToken,
    ) -> Reply {
        if lock(&self.table).closed {
            return Reply::Now(Err(refused("the child agent's session has ended")));
        }
        let cwd = request
            .cwd
            .clone()
            .unwrap_or_else(|| self.roots.cwd().to_owned());
        let cwd = match confine(&self.roots, &cwd) {
            Ok(cwd) => cwd,
            Err(error) => return Reply::Now(Err(error)),
        };
        let allowed = self.allowed(&request, &cwd, policy, mode, asker, cancel.clone());
        let services = self.clone();
        Reply::Later(
            async move {
                allowed.await?;
                let read_only = mode == PermissionMode::ReadOnly;
                let id = services.start(request, cwd, read_only, cancel).await?;
                encoded(CreateTerminalResponse::new(id))
            }
            .boxed(),
        )
    }

    /// Whether the command may run: at once, or once the user answers.
    fn allowed(
        &self,
        request: &CreateTerminalRequest,
        cwd: &std::path::Path,
        policy: AcpPermission,
        mode: PermissionMode,
        asker: Option<Asker>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), RpcError>> {
        let decided = match permission::decide(policy, mode, ToolKind::Execute) {
            Decision::Choose(PermissionAnswer::AllowOnce) => Ok(()),
            Decision::Choose(_) if mode == PermissionMode::ReadOnly => Err(refused(
                "the delegating session is read-only: the child agent may not run commands",
            )),
            Decision::Choose(_) => Err(refused(
                "the child agent's permission policy is reject: it may not run commands",
            )),
            Decision::Ask if self.grants.take() => Ok(()),
            Decision::Ask => match asker {
                None => Err(refused(
                    "no editor can be asked to allow the child agent's command",
                )),
                Some(asker) => return self.ask(request, cwd, asker, cancel),
            },
        };
        futures::future::ready(decided).boxed()
    }

    fn ask(
        &self,
        request: &CreateTerminalRequest,
        cwd: &std::path::Path,
        asker: Asker,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<(), RpcError>> {
        let line = std::iter::once(request.command.as_str())
            .chain(request.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let shown = PermissionPrompt {
            call_id: format!("terminal-{}", uuid::Uuid::new_v4()),
            title: permission::titled(asker.name.as_deref(), format!("Run `{line}`")),
            kind: ToolKind::Execute,
            display: ToolDisplay::default(),
            raw_input: Some(json!({"command": request.command, "args": request.args, "cwd": cwd})),
            server_tool: None,
        };
        let client = asker.client.for_child(&asker.session);
        let grants = self.grants.clone();
        async move {
            match client.request_permission(shown, cancel).await {
                Ok(PermissionAnswer::AllowOnce) => Ok(()),
                Ok(PermissionAnswer::AllowAlways) => {
                    grants.record(PermissionAnswer::AllowAlways);
                    Ok(())
                }
                Ok(PermissionAnswer::Cancelled) | Err(ClientError::Cancelled) => {
                    Err(RpcError::cancelled())
                }
                Ok(_) => Err(refused("the user did not allow the child agent's command")),
                Err(error) => Err(refused(&format!(
                    "the editor did not answer about the child agent's command: {error}"
                ))),
            }
        }
        .boxed()
    }

    /// Starts an allowed command and files it under a new id.
    async fn start(
        &self,
        request: CreateTerminalRequest,
        cwd: PathBuf,
        read_only: bool,
        cancel: CancellationToken,
    ) -> Result<String, RpcError> {
        let limit = request
            .output_byte_limit
            .unwrap_or(DEFAULT_OUTPUT_BYTES)
            .min(MAX_OUTPUT_BYTES);
        // What the child asked for, scrubbed as kin's own environment is, wherever it runs.
        let mut env = self.child_env.allowed(
            request
                .env
                .into_iter()
                .map(|variable| (variable.name, variable.value))
                .collect(),
        );
        let launch = match &self.sandbox {
            Some(child) => child
                .sandbox
                .command(
                    &child.scope(&cwd, read_only),
                    &request.command,
                    &request.args,
                )
                .map_err(|error| refused(&error.to_string()))?,
            None => Launch::direct(&request.command, &request.args),
        };
        env.extend(launch.env);
        let (id, open) = match &self.editor {
            Some((client, call_id)) => {
                let spec = TerminalSpec {
                    command: launch.program,
                    args: launch.args,
                    cwd,
                    env,
                    output_byte_limit: limit,
                };
                let id = client
                    .create_terminal(call_id.clone(), spec, cancel)
                    .await
                    .map_err(client_error)?;
                (id.clone(), Open::Editor(id))
            }
            None => {
                let limit = usize::try_from(limit).unwrap_or(usize::MAX);
                let terminal = Terminal::spawn(
                    &launch.program,
                    &launch.args,
                    &cwd,
                    &self.child_env,
                    &env,
                    limit,
                )
                .map_err(|error| {
                    RpcError::internal(format!("could not start {}: {error}", request.command))
                })?;
                let mut table = lock(&self.table);
                table.next += 1;
                let id = format!("kin-terminal-{}", table.next);
                (id, Open::Local(Arc::new(terminal)))
            }
        };
        let late = {
            let mut table = lock(&self.table);
            match table.closed {
                true => Some(open),
                false => {
                    table.open.insert(id.clone(), open);
                    None
                }
            }
        };
        match late {
            Some(open) => {
                self.release_open(open).await;
                Err(refused("the child agent's session has ended"))
            }
            None => Ok(id),
        }
    }

    /// How the editor is shown terminal `id` that the child's tool call names: the editor's
    /// own keeps its id, one kin runs becomes its output; `None` for an id kin never gave
    /// this child (or released too long ago).
    pub(crate) fn shown(&self, id: &str) -> Option<Shown> {
        let table = lock(&self.table);
        match table.open.get(id) {
            Some(Open::Editor(_)) => Some(Shown::Editor),
            Some(Open::Local(terminal)) => Some(shown_terminals::local(terminal)),
            None => table
                .released
                .iter()
                .find(|(known, _)| known == id)
                .map(|(_, shown)| shown.clone()),
        }
    }

    fn find(&self, id: &str) -> Result<Open, RpcError> {
        lock(&self.table)
            .open
            .get(id)
            .cloned()
            .ok_or_else(|| RpcError::invalid_params(format!("unknown terminal {id}")))
    }

    fn editor(&self) -> Result<Arc<dyn ClientBridge>, RpcError> {
        self.editor
            .as_ref()
            .map(|(client, _)| client.clone())
            .ok_or_else(|| RpcError::internal("the editor's terminals are gone"))
    }

    /// `terminal/output`.
    pub(crate) fn output(&self, request: TerminalOutputRequest) -> Reply {
        let open = match self.find(&request.terminal_id.0) {
            Ok(open) => open,
            Err(error) => return Reply::Now(Err(error)),
        };
        match open {
            Open::Local(terminal) => {
                let (text, truncated, status) = terminal.output();
                let answer = TerminalOutputResponse::new(text, truncated)
                    .exit_status(status.map(local_exit));
                Reply::Now(encoded(answer))
            }
            Open::Editor(id) => match self.editor() {
                Ok(client) => Reply::Later(
                    async move {
                        let output = client.terminal_output(id).await.map_err(client_error)?;
                        let answer = TerminalOutputResponse::new(output.output, output.truncated)
                            .exit_status(output.exit.map(editor_exit));
                        encoded(answer)
                    }
                    .boxed(),
                ),
                Err(error) => Reply::Now(Err(error)),
            },
        }
    }

    /// `terminal/wait_for_exit`.
    pub(crate) fn wait(
        &self,
        request: WaitForTerminalExitRequest,
        cancel: CancellationToken,
    ) -> Reply {
        let open = match self.find(&request.terminal_id.0) {
            Ok(open) => open,
            Err(error) => return Reply::Now(Err(error)),
        };
        let client = self.editor();
        Reply::Later(
            async move {
                let exit = match open {
                    Open::Local(terminal) => tokio::select! {
                        status = terminal.wait() => status.map(local_exit).unwrap_or_default(),
                        _ = cancel.cancelled() => return Err(RpcError::cancelled()),
                    },
                    Open::Editor(id) => client?
                        .wait_for_terminal_exit(id, cancel)
                        .await
                        .map(editor_exit)
                        .map_err(client_error)?,
                };
                encoded(WaitForTerminalExitResponse::new(exit))
            }
            .boxed(),
        )
    }

    /// `terminal/kill`: the command ends, the terminal stays readable.
    pub(crate) fn kill(&self, request: KillTerminalRequest) -> Reply {
        let open = match self.find(&request.terminal_id.0) {
            Ok(open) => open,
            Err(error) => return Reply::Now(Err(error)),
        };
        match open {
            Open::Local(terminal) => {
                terminal.kill();
                Reply::Now(encoded(KillTerminalResponse::new()))
            }
            Open::Editor(id) => match self.editor() {
                Ok(client) => Reply::Later(
                    async move {
                        client.kill_terminal(id).await.map_err(client_error)?;
                        encoded(KillTerminalResponse::new())
                    }
                    .boxed(),
                ),
                Err(error) => Reply::Now(Err(error)),
            },
        }
    }

    /// `terminal/release`: killed if still running, and forgotten.
    pub(crate) fn release(self: &Arc<Self>, request: ReleaseTerminalRequest) -> Reply {
        let open = {
            let mut table = lock(&self.table);
            let open = table.open.remove(&*request.terminal_id.0);
            if let Some(open) = &open {
                let shown = match open {
                    Open::Editor(_) => Shown::Editor,
                    Open::Local(terminal) => shown_terminals::kept(terminal),
                };
                if table.released.len() >= REMEMBERED {
                    table.released.pop_front();
                }
                let id = request.terminal_id.0.to_string();
                table.released.push_back((id, shown));
            }
            open
        };
        let Some(open) = open else {
            let id = request.terminal_id.0;
            return Reply::Now(Err(RpcError::invalid_params(format!(
                "unknown terminal {id}"
            ))));
        };
        let services = self.clone();
        Reply::Later(
            async move {
                services.release_open(open).await;
                encoded(ReleaseTerminalResponse::new())
            }
            .boxed(),
        )
    }

    async fn release_open(&self, open: Open) {
        match open {
            Open::Local(terminal) => terminal.kill(),
            Open::Editor(id) => {
                if let Ok(client) = self.editor() {
                    if let Err(error) = client.release_terminal(id.clone()).await {
                        tracing::warn!(%error, terminal = %id, "could not release a child's terminal");
                    }
                }
            }
        }
    }

    /// The child's session ended: every terminal it left open is killed and released, and
    /// none starts after.
    pub(crate) async fn close(&self) {
        let open: Vec<Open> = {
            let mut table = lock(&self.table);
            table.closed = true;
            table.open.drain().map(|(_, open)| open).collect()
        };
        for open in open {
            self.release_open(open).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::testing::{FakeEditor, Workspace};
    use agent_client_protocol_schema::v1::EnvVariable;

    async fn answer(reply: Reply) -> Result<Value, RpcError> {
        match reply {
            Reply::Now(answer) | Reply::NowThen(answer, _) => answer,
            Reply::Later(answer) => answer.await,
        }
    }

    fn services(ws: &Workspace, editor: Option<Arc<FakeEditor>>) -> Arc<TerminalServices> {
        let roots = Arc::new(Roots::new(ws.path(""), Vec::new()));
        let client = editor.map(|editor| editor as Arc<dyn ClientBridge>);
        let grants = Arc::new(CommandGrants::default());
        Arc::new(TerminalServices::new(
            roots,
            client,
            Some("call".into()),
            grants,
            ChildEnv::default(),
        ))
    }

    fn echo(ws: &Workspace) -> CreateTerminalRequest {
        CreateTerminalRequest::new("s", "echo")
            .args(vec!["hi".into()])
            .cwd(ws.path(""))
    }

    fn asker(editor: &Arc<FakeEditor>) -> Option<Asker> {
        Some(Asker {
            client: editor.clone(),
            session: "child".into(),
            name: None,
        })
    }

    #[tokio::test]
    async fn ask_asks_the_editor_unless_the_user_just_allowed_the_childs_command() {
        let ws = Workspace::new();
        let editor = ws.editor();
        let services = services(&ws, None);
        let create = |asker| {
            let request = echo(&ws);
            services.create(
                request,
                AcpPermission::Ask,
                PermissionMode::Ask,
                asker,
                CancellationToken::new(),
            )
        };
        editor.answer(PermissionAnswer::AllowOnce);
        assert!(answer(create(asker(&editor))).await.is_ok());
        assert_eq!(editor.permission_prompts(), 1);
        // The child's own request was allowed: its command runs without a second prompt.
        services.grants.record(PermissionAnswer::AllowOnce);
        assert!(answer(create(asker(&editor))).await.is_ok());
        assert_eq!(editor.permission_prompts(), 1);
        // The grant is used up: asked again, and refused.
        editor.answer(PermissionAnswer::RejectOnce);
        let refused = answer(create(asker(&editor))).await.unwrap_err();
        assert_eq!(editor.permission_prompts(), 2);
        assert_eq!(refused.code, REFUSED);
        let outside = CreateTerminalRequest::new("s", "true").cwd(ws.outside(""));
        let error = answer(services.create(
            outside,
            AcpPermission::Allow,
            PermissionMode::Allow,
            None,
            CancellationToken::new(),
        ))
        .await
        .unwrap_err();
        assert!(error.message.contains("outside"), "{error:?}");
    }

    /// The output of `echo $KIN_TERMINAL_SEEN-$KIN_TERMINAL_TOKEN` run with both set.
    async fn env_output(services: &Arc<TerminalServices>, ws: &Workspace) -> Value {
        let request = CreateTerminalRequest::new("s", "sh")
            .args(vec![
                "-c".into(),
                "echo \"$KIN_TERMINAL_SEEN-$KIN_TERMINAL_TOKEN\"".into(),
            ])
            .env(vec![
                EnvVariable::new("KIN_TERMINAL_SEEN", "seen"),
                EnvVariable::new("KIN_TERMINAL_TOKEN", "secret"),
            ])
            .cwd(ws.path(""));
        let created = services.create(
            request,
            AcpPermission::Allow,
            PermissionMode::Allow,
            None,
            CancellationToken::new(),
        );
        let id = answer(created).await.unwrap()["terminalId"]
            .as_str()
            .unwrap()
            .to_owned();
        let wait = WaitForTerminalExitRequest::new("s", id.clone());
        answer(services.wait(wait, CancellationToken::new()))
            .await
            .unwrap();
        let output = answer(services.output(TerminalOutputRequest::new("s", id)));
        output.await.unwrap()["output"].clone()
    }

    #[tokio::test]
    async fn the_childs_env_reaches_its_command_scrubbed_in_the_editor_and_locally() {
        let ws = Workspace::new();
        let editor = ws.editor().with_terminal();
        let in_editor = services(&ws, Some(editor.clone()));
        assert_eq!(env_output(&in_editor, &ws).await, "seen-\n");
        assert_eq!(editor.calls().len(), 3, "the editor ran it");
        let local = services(&ws, None);
        assert_eq!(env_output(&local, &ws).await, "seen-\n");
    }

    #[tokio::test]
    async fn the_editors_terminals_serve_the_child_and_are_released_when_it_ends() {
        let ws = Workspace::new();
        let editor = ws.editor().with_terminal();
        let services = services(&ws, Some(editor.clone()));
        let created = services.create(
            echo(&ws),
            AcpPermission::Allow,
            PermissionMode::Ask,
            None,
            CancellationToken::new(),
        );
        let id = answer(created).await.unwrap()["terminalId"]
            .as_str()
            .unwrap()
            .to_owned();
        let wait = WaitForTerminalExitRequest::new("s", id.clone());
        let exit = answer(services.wait(wait, CancellationToken::new())).await;
        assert_eq!(exit.unwrap()["exitCode"], 0);
        let output = answer(services.output(TerminalOutputRequest::new("s", id.clone())));
        assert_eq!(output.await.unwrap()["output"], "hi\n");
        // An id the child was not given is unknown to it.
        let stranger = services.output(TerminalOutputRequest::new("s", "term-99"));
        assert!(answer(stranger).await.is_err());
        services.close().await;
        assert_eq!(
            editor.calls(),
            [
                "terminal/create echo hi".to_owned(),
                format!("terminal/wait_for_exit {id}"),
                format!("terminal/output {id}"),
                format!("terminal/release {id}"),
            ]
        );
        let late = services.create(
            echo(&ws),
            AcpPermission::Allow,
            PermissionMode::Allow,
            None,
            CancellationToken::new(),
        );
        assert!(answer(late).await.is_err(), "nothing starts after the end");
    }
}

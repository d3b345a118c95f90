//! Test support for the tools: a temporary workspace with a directory outside it, a fake editor
//! implementing [`ClientBridge`] against the real disk and real processes, and a way to wait
//! for a process to end without sleeping.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::client::*;
use super::{
    PermissionMode, Roots, SessionPermissions, Tool, ToolContext, ToolOutput, ToolRegistry,
};
use crate::process::child_env::ChildEnv;
use crate::process::group::Terminal;

/// `<tmp>/ws` (the cwd) and `<tmp>/outside`.
pub(crate) struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

impl Workspace {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("ws")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        Self {
            _dir: dir,
            root: base.join("ws"),
        }
    }

    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    pub(crate) fn outside(&self, name: &str) -> PathBuf {
        self.root.parent().unwrap().join("outside").join(name)
    }

    pub(crate) fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    pub(crate) fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    /// A context in `ask` mode without an editor.
    pub(crate) fn cx(&self) -> ToolContext {
        let mut cx = ToolContext::new("s", self.root.clone(), CancellationToken::new());
        cx.roots = Arc::new(Roots::new(self.root.clone(), Vec::new()));
        cx.call_id = "call-1".into();
        cx
    }

    pub(crate) fn cx_in_mode(&self, mode: PermissionMode) -> ToolContext {
        let mut cx = self.cx();
        cx.permissions = Arc::new(SessionPermissions::new(mode));
        cx
    }

    pub(crate) fn cx_with(&self, editor: &Arc<FakeEditor>) -> ToolContext {
        let mut cx = self.cx();
        cx.client = Some(editor.clone());
        cx
    }

    /// An editor offering file reads and writes (terminals with `with_terminal`).
    pub(crate) fn editor(&self) -> Arc<FakeEditor> {
        Arc::new(FakeEditor {
            root: self.root.clone(),
            terminal: false,
            state: Mutex::default(),
        })
    }
}

/// Runs a tool through a registry (as the agent loop does).
pub(crate) async fn call(
    tool: &(impl Tool + Clone + 'static),
    arguments: Value,
    cx: &ToolContext,
) -> ToolOutput {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(tool.clone()));
    let name = tool.spec().name;
    registry
        .call(&name, &arguments.to_string(), cx.clone())
        .await
}

#[derive(Default)]
struct EditorState {
    calls: Vec<String>,
    buffers: HashMap<PathBuf, String>,
    answers: VecDeque<PermissionAnswer>,
    prompts: usize,
    terminals: HashMap<String, Arc<Terminal>>,
    next_terminal: usize,
}

/// An editor for tests: records every request, serves unsaved buffers, answers permission
/// prompts from a queue (empty: cancelled), runs terminals as real process groups.
pub(crate) struct FakeEditor {
    root: PathBuf,
    terminal: bool,
    state: Mutex<EditorState>,
}

impl FakeEditor {
    pub(crate) fn with_terminal(self: Arc<Self>) -> Arc<Self> {
        Arc::new(FakeEditor {
            root: self.root.clone(),
            terminal: true,
            state: Mutex::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, EditorState> {
        self.state.lock().unwrap()
    }

    fn log(&self, call: String) {
        self.state().calls.push(call);
    }

    fn shown(&self, path: &Path) -> String {
        path.strip_prefix(&self.root)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.display().to_string())
    }

    pub(crate) fn buffer(&self, path: &Path, text: &str) {
        self.state().buffers.insert(path.to_owned(), text.into());
    }

    pub(crate) fn answer(&self, answer: PermissionAnswer) {
        self.state().answers.push_back(answer);
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }

    pub(crate) fn permission_prompts(&self) -> usize {
        self.state().prompts
    }

    fn terminal(&self, id: &str) -> Result<Arc<Terminal>, ClientError> {
        self.state()
            .terminals
            .get(id)
            .cloned()
            .ok_or(ClientError::Failed {
                method: "terminal".into(),
                message: format!("no terminal {id}"),
            })
    }
}

fn ready<T: Send + 'static>(value: Result<T, ClientError>) -> ClientResult<T> {
    std::future::ready(value).boxed()
}

impl ClientBridge for FakeEditor {
    fn features(&self) -> ClientFeatures {
        ClientFeatures {
            read_text_file: true,
            write_text_file: true,
            terminal: self.terminal,
            ..ClientFeatures::default()
        }
    }

    fn for_child(self: Arc<Self>, _child_session: &str) -> Arc<dyn ClientBridge> {
        self
    }

    fn read_text_file(&self, path: PathBuf, _cancel: CancellationToken) -> ClientResult<String> {
        self.log(format!("read {}", self.shown(&path)));
        let buffered = self.state().buffers.get(&path).cloned();
        ready(match buffered {
            Some(text) => Ok(text),
            None => std::fs::read_to_string(&path).map_err(|e| ClientError::Failed {
                method: "fs/read_text_file".into(),
                message: e.to_string(),
            }),
        })
    }

    fn write_text_file(
        &self,
        path: PathBuf,
        content: String,
        _cancel: CancellationToken,
    ) -> ClientResult<()> {
        self.log(format!("write {}", self.shown(&path)));
        self.state().buffers.remove(&path);
        ready(
            std::fs::write(&path, content).map_err(|e| ClientError::Failed {
                method: "fs/write_text_file".into(),
                message: e.to_string(),
            }),
        )
    }

    fn request_permission(
        &self,
        prompt: PermissionPrompt,
        _cancel: CancellationToken,
    ) -> ClientResult<PermissionAnswer> {
        let kind = serde_json::to_value(prompt.kind).unwrap();
        self.log(format!(
            "permission {} {}",
            kind.as_str().unwrap(),
            prompt.title
        ));
        let mut state = self.state();
        state.prompts += 1;
        let answer = state
            .answers
            .pop_front()
            .unwrap_or(PermissionAnswer::Cancelled);
        ready(Ok(answer))
    }

    fn create_terminal(
        &self,
        _call_id: String,
        spec: TerminalSpec,
        _cancel: CancellationToken,
    ) -> ClientResult<String> {
        self.log(format!(
            "terminal/create {} {}",
            spec.command,
            spec.args.join(" ")
        ));
        let terminal = Terminal::spawn(
            &spec.command,
            &spec.args,
            &spec.cwd,
            &ChildEnv::default(),
            &spec.env,
            usize::try_from(spec.output_byte_limit).unwrap(),
        );
        let mut state = self.state();
        state.next_terminal += 1;
        let id = format!("term-{}", state.next_terminal);
        ready(match terminal {
            Ok(terminal) => {
                state.terminals.insert(id.clone(), Arc::new(terminal));
                Ok(id)
            }
            Err(e) => Err(ClientError::Failed {
                method: "terminal/create".into(),
                message: e.to_string(),
            }),
        })
    }

    fn terminal_output(&self, id: String) -> ClientResult<TerminalOutput> {
        self.log(format!("terminal/output {id}"));
        ready(self.terminal(&id).map(|t| {
            let (output, truncated, exit) = t.output();
            TerminalOutput {
                output,
                truncated,
                exit: exit.map(exit_of),
            }
        }))
    }

    fn wait_for_terminal_exit(
        &self,
        id: String,
        cancel: CancellationToken,
    ) -> ClientResult<TerminalExit> {
        self.log(format!("terminal/wait_for_exit {id}"));
        let terminal = self.terminal(&id);
        async move {
            let terminal = terminal?;
            tokio::select! {
                status = terminal.wait() => Ok(status.map(exit_of).unwrap_or_default()),
                _ = cancel.cancelled() => Err(ClientError::Cancelled),
            }
        }
        .boxed()
    }

    fn kill_terminal(&self, id: String) -> ClientResult<()> {
        self.log(format!("terminal/kill {id}"));
        ready(self.terminal(&id).map(|t| t.kill()))
    }

    fn release_terminal(&self, id: String) -> ClientResult<()> {
        self.log(format!("terminal/release {id}"));
        let removed = self.state().terminals.remove(&id);
        ready(removed.map(|t| t.kill()).ok_or(ClientError::Failed {
            method: "terminal/release".into(),
            message: format!("no terminal {id}"),
        }))
    }
}

fn exit_of(status: std::process::ExitStatus) -> TerminalExit {
    use std::os::unix::process::ExitStatusExt;
    TerminalExit {
        exit_code: status.code().and_then(|c| u32::try_from(c).ok()),
        signal: status.signal().map(|s| s.to_string()),
    }
}

/// A handle on a running process that becomes readable when it exits (Linux pidfd), so a test
/// can wait for the exit itself rather than sleep.
pub(crate) struct ProcessHandle {
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
    pid: i32,
}

/// Opens a pidfd for `pid`; a process that is already gone yields a handle that is ready.
pub(crate) fn pidfd(pid: i32) -> ProcessHandle {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new file descriptor or -1.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let fd = (raw >= 0).then(|| {
        // SAFETY: the syscall returned a fresh descriptor that nothing else owns; the AsyncFd
        // owns it from here on and deregisters it before it is closed.
        unsafe {
            let owned = std::os::fd::OwnedFd::from_raw_fd(raw as i32);
            tokio::io::unix::AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE)
        }
        .unwrap()
    });
    ProcessHandle { fd, pid }
}

impl ProcessHandle {
    /// Waits for the process to exit; fails the test if it is still alive after a generous
    /// guard (a hang guard, not a timing assertion).
    pub(crate) async fn exited(self) {
        let Some(fd) = self.fd else { return };
        let waited = tokio::time::timeout(std::time::Duration::from_secs(30), fd.readable()).await;
        assert!(waited.is_ok(), "process {} survived", self.pid);
    }
}

/// Waits until `pid` has exited (see [`ProcessHandle::exited`]).
pub(crate) async fn wait_for_exit(pid: i32) {
    pidfd(pid).exited().await
}

//! `bash`: runs a command with `bash -c` in the session cwd, with a timeout and an output cap.
//! In the editor's terminal when it offers one (the tool call shows the terminal), else locally
//! in its own process group. On timeout or cancel the whole group is killed (locally) or the
//! terminal is killed (editor); every editor terminal is released. Either way the command starts
//! inside kin's sandbox when it has one (`process::sandbox`): in the editor's terminal it is kin's
//! launcher that the editor runs, which confines itself and then execs `bash`.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::client::{ClientBridge, ClientError, TerminalExit, TerminalSpec};
use super::permission::Scope;
use super::typed::TypedTool;
use super::PermissionMode;
use super::{ToolContext, ToolDisplay, ToolKind, ToolOutput};
use crate::process::group::{describe_status, GroupChild};
use crate::process::sandbox::{CommandScope, Launch, Sandbox};
use crate::process::sandbox_hint;
use crate::process::truncate::head_tail;

pub(crate) const NAME: &str = "bash";
const DEFAULT_TIMEOUT_SECS: u64 = 120;
const MAX_TIMEOUT_SECS: u64 = 1800;
/// Output bytes the model sees at most (head and tail).
const MAX_OUTPUT: usize = 30 * 1024;
/// What an editor terminal is asked to keep.
const TERMINAL_OUTPUT_LIMIT: u64 = 64 * 1024;
/// How long a killed terminal's pending `wait_for_exit` may take to settle.
const TERMINAL_SETTLE: Duration = Duration::from_secs(5);
const SHELL: &str = "bash";

/// The arguments of a `bash` call.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ShellArgs {
    /// The command line, run as `bash -c <command>` in the working directory.
    command: String,
    /// Seconds before the command is killed. Default 120.
    #[serde(default)]
    #[schemars(range(min = 1, max = MAX_TIMEOUT_SECS))]
    timeout: Option<u64>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct ShellTool {
    /// The kernel sandbox commands start in (`None`: unconfined).
    sandbox: Option<Arc<Sandbox>>,
}

impl ShellTool {
    /// Commands started inside `sandbox`.
    pub(crate) fn confined(sandbox: Arc<Sandbox>) -> Self {
        Self {
            sandbox: Some(sandbox),
        }
    }
}

impl TypedTool for ShellTool {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Run a shell command with bash in the working directory and \
        return its output (stdout and stderr together) and exit code. Has no input; interactive \
        programs will not work. Stopped, with everything it started, after `timeout` seconds \
        (default 120). Long output is shortened to its beginning and end.";
    type Args = ShellArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    /// The whole command, never cut (a hidden second line is what a prompt must not hide), its
    /// controls made visible; a command of several lines says so first.
    fn title(&self, args: Option<&ShellArgs>) -> String {
        let command = args.map_or("", |a| a.command.as_str());
        if command.trim().is_empty() {
            return "Run a command".into();
        }
        let shown = crate::text::visible(command.trim_end_matches('\n'));
        match command.trim_end_matches('\n').lines().count() {
            0 | 1 => shown.into_owned(),
            lines => format!("[{lines} lines] {shown}"),
        }
    }

    async fn run(&self, args: ShellArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let title = TypedTool::title(self, Some(&args));
        run(args, title, self.sandbox.as_deref(), cx).await
    }
}

/// How a run ended.
enum Ended {
    Exited(String, bool),
    TimedOut,
    Cancelled,
}

async fn run(
    params: ShellArgs,
    title: String,
    sandbox: Option<&Sandbox>,
    cx: ToolContext,
) -> Result<ToolOutput, ToolOutput> {
    if params.command.trim().is_empty() {
        return Err(ToolOutput::error(
            "InvalidArguments",
            "INVALID_ARGUMENTS",
            "Error: `command` is empty",
        ));
    }
    let timeout = Duration::from_secs(
        params
            .timeout
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .clamp(1, MAX_TIMEOUT_SECS),
    );
    let mut prompt = cx.prompt(ToolKind::Execute, title, ToolDisplay::default());
    prompt.raw_input = Some(json!({"command": params.command}));
    cx.authorize(Scope::Workspace, prompt).await?;
    let launch = launch(sandbox, &cx, &params.command)?;
    let (ended, output, display) = match cx.client_with(|f| f.terminal) {
        Some(client) => in_terminal(client.clone(), &cx, &launch, timeout).await?,
        None => locally(&cx, &launch, timeout).await?,
    };
    let mut output = head_tail(&output, MAX_OUTPUT);
    // Also after a success: a command may have gone on past a refused write.
    if let (Ended::Exited(..), Some(policy)) = (&ended, &launch.policy) {
        if let Some(note) = sandbox_hint::explain(&output, policy, &cx.cwd) {
            output = format!("{output}\n{note}");
        }
    }
    let result = match ended {
        Ended::Exited(status, true) => ToolOutput::ok(format!("{output}\n[{status}]")),
        Ended::Exited(status, false) => ToolOutput::error(
            "CommandFailed",
            "COMMAND_FAILED",
            format!("{output}\n[{status}]"),
        ),
        Ended::TimedOut => ToolOutput::error(
            "Timeout",
            "TIMEOUT",
            format!(
                "{output}\n[timed out after {} s; the command and everything it started were killed]",
                timeout.as_secs()
            ),
        ),
        Ended::Cancelled => ToolOutput::cancelled(),
    };
    Ok(result.with_display(display))
}

/// How `bash -c command` starts: inside the sandbox when there is one (the user hears once per
/// session how commands run).
fn launch(
    sandbox: Option<&Sandbox>,
    cx: &ToolContext,
    command: &str,
) -> Result<Launch, ToolOutput> {
    let args = vec!["-c".to_owned(), command.to_owned()];
    let Some(sandbox) = sandbox else {
        return Ok(Launch::direct(SHELL, &args));
    };
    let session = cx.session_id.to_string();
    if let (Some((warning, title, description)), Some(client)) =
        (sandbox.first_notice(&session), &cx.client)
    {
        match warning {
            true => client.warn_user(&format!("{title}: {description}")),
            false => client.note_user(&title, &description),
        }
    }
    let scope = CommandScope {
        session: &session,
        roots: cx.roots.all().to_vec(),
        read_only: cx.permissions.effective_mode() == PermissionMode::ReadOnly,
    };
    let launch = sandbox.command(&scope, SHELL, &args).map_err(|error| {
        ToolOutput::error(
            "SandboxUnavailable",
            "SANDBOX_UNAVAILABLE",
            format!("Error: {error}"),
        )
    })?;
    if let (Some(warning), Some(client)) = (
        sandbox.dropped_notice(&session, &launch.dropped),
        &cx.client,
    ) {
        client.warn_user(&warning);
    }
    Ok(launch)
}

fn start_failed(what: impl std::fmt::Display) -> ToolOutput {
    ToolOutput::error(
        "CommandNotStarted",
        "COMMAND_NOT_STARTED",
        format!("Error: could not start the command: {what}"),
    )
}

async fn locally(
    cx: &ToolContext,
    launch: &Launch,
    timeout: Duration,
) -> Result<(Ended, String, ToolDisplay), ToolOutput> {
    let mut child = GroupChild::spawn(
        &launch.program,
        &launch.args,
        &cx.cwd,
        &cx.child_env,
        &launch.env,
        MAX_OUTPUT / 2,
        MAX_OUTPUT - MAX_OUTPUT / 2,
    )
    .map_err(start_failed)?;
    let ended = tokio::select! {
        biased;
        status = child.wait() => match status {
            Ok(status) => Ended::Exited(describe_status(status), status.success()),
            Err(error) => Ended::Exited(format!("could not wait for it: {error}"), false),
        },
        _ = cx.cancel.cancelled() => Ended::Cancelled,
        _ = tokio::time::sleep(timeout) => Ended::TimedOut,
    };
    if !matches!(ended, Ended::Exited(..)) {
        child.stop().await;
    }
    let output = child.finish().await.finish();
    Ok((ended, output, ToolDisplay::default()))
}

async fn in_terminal(
    client: std::sync::Arc<dyn ClientBridge>,
    cx: &ToolContext,
    launch: &Launch,
    timeout: Duration,
) -> Result<(Ended, String, ToolDisplay), ToolOutput> {
    let spec = TerminalSpec {
        command: launch.program.clone(),
        args: launch.args.clone(),
        cwd: cx.cwd.clone(),
        env: launch.env.clone(),
        output_byte_limit: TERMINAL_OUTPUT_LIMIT,
    };
    let id = match client
        .create_terminal(cx.call_id.clone(), spec, cx.cancel.clone())
        .await
    {
        Ok(id) => id,
        Err(ClientError::Cancelled) => return Err(ToolOutput::cancelled()),
        Err(error) => return Err(start_failed(error)),
    };
    let display = ToolDisplay {
        terminal_id: Some(id.clone()),
        ..ToolDisplay::default()
    };
    let ran = run_terminal(&*client, &id, &cx.cancel, timeout).await;
    // Released whatever happened above: the editor keeps showing its output.
    if let Err(error) = client.release_terminal(id.clone()).await {
        tracing::warn!(%error, terminal = %id, "could not release a terminal");
    }
    let (ended, output) = ran.map_err(|e| e.with_display(display.clone()))?;
    Ok((ended, output, display))
}

async fn run_terminal(
    client: &dyn ClientBridge,
    id: &str,
    cancel: &CancellationToken,
    timeout: Duration,
) -> Result<(Ended, String), ToolOutput> {
    let stop_waiting = CancellationToken::new();
    let mut wait = client.wait_for_terminal_exit(id.to_owned(), stop_waiting.clone());
    let waited = tokio::select! {
        biased;
        exit = &mut wait => Some(exit),
        _ = cancel.cancelled() => None,
        _ = tokio::time::sleep(timeout) => None,
    };
    let (ended, exit) = match waited {
        Some(Ok(exit)) => (exit_ended(&exit), Some(exit)),
        Some(Err(error)) => (Ended::Exited(format!("unknown ({error})"), false), None),
        None => {
            let ended = if cancel.is_cancelled() {
                Ended::Cancelled
            } else {
                Ended::TimedOut
            };
            // Tell the editor we stopped waiting (polling once sends `$/cancel_request`), then
            // kill the command; the wait settles once it has died.
            stop_waiting.cancel();
            let settled = (&mut wait).now_or_never().is_some();
            if let Err(error) = client.kill_terminal(id.to_owned()).await {
                tracing::warn!(%error, terminal = %id, "could not kill a terminal");
            }
            if !settled {
                let _ = tokio::time::timeout(TERMINAL_SETTLE, wait).await;
            }
            (ended, None)
        }
    };
    let output = match client.terminal_output(id.to_owned()).await {
        Ok(output) => {
            let mut text = output.output;
            if output.truncated {
                text = format!("[... earlier output dropped by the terminal ...]\n{text}");
            }
            if let (Ended::Exited(..), None, Some(exit)) = (&ended, &exit, output.exit) {
                return Ok((exit_ended(&exit), text));
            }
            text
        }
        Err(error) => format!("[the terminal's output could not be read: {error}]"),
    };
    Ok((ended, output))
}

fn exit_ended(exit: &TerminalExit) -> Ended {
    match (exit.exit_code, &exit.signal) {
        (Some(code), _) => Ended::Exited(format!("exit code {code}"), code == 0),
        (None, Some(signal)) => Ended::Exited(format!("killed by signal {signal}"), false),
        (None, None) => Ended::Exited("ended".into(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::client::PermissionAnswer;
    use crate::tools::testing::{call, wait_for_exit, Workspace};
    use crate::tools::{PermissionMode, Tool};

    #[test]
    fn titles_show_the_whole_command_and_mark_several_lines() {
        let title =
            |command: &str| Tool::title(&ShellTool::default(), &json!({ "command": command }));
        assert_eq!(title("ls -la"), "ls -la");
        assert_eq!(title(""), "Run a command");
        assert_eq!(title("ls\nrm -rf ~\n"), "[2 lines] ls\\nrm -rf ~");
        let long = format!("echo {} && rm -rf ~", "a".repeat(300));
        assert_eq!(title(&long), long);
        assert_eq!(title("printf '\u{1b}[2J'"), "printf '\\u{1b}[2J'");
    }

    #[tokio::test]
    async fn runs_in_the_cwd_and_reports_output_and_exit_code() {
        let ws = Workspace::new();
        ws.write("f.txt", "hello\n");
        let cx = ws.cx_in_mode(PermissionMode::Allow);
        let out = call(
            &ShellTool::default(),
            json!({"command": "cat f.txt; echo err >&2"}),
            &cx,
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(out.text, "hello\nerr\n\n[exit code 0]");
        let out = call(&ShellTool::default(), json!({"command": "exit 3"}), &cx).await;
        assert!(out.is_error);
        assert_eq!(out.text, "\n[exit code 3]");
        assert_eq!(out.error.unwrap().name, "CommandFailed");
    }

    #[tokio::test]
    async fn large_output_keeps_head_and_tail() {
        let ws = Workspace::new();
        let cx = ws.cx_in_mode(PermissionMode::Allow);
        let out = call(
            &ShellTool::default(),
            json!({"command": "seq 1 100000"}),
            &cx,
        )
        .await;
        assert!(out.text.starts_with("1\n2\n3\n"), "{}", &out.text[..20]);
        assert!(out.text.ends_with("99999\n100000\n\n[exit code 0]"));
        assert!(out.text.contains("bytes cut from the middle of the output"));
        assert!(out.text.len() < MAX_OUTPUT + 200);
    }

    /// A command that starts a grandchild, reports its pid through a FIFO, and waits.
    fn grandchild_command(ws: &Workspace) -> (String, std::path::PathBuf) {
        let fifo = ws.path("pid.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        (
            format!("sleep 1000 & echo $! > {}; wait", fifo.display()),
            fifo,
        )
    }

    fn read_pid(fifo: std::path::PathBuf) -> tokio::task::JoinHandle<i32> {
        tokio::task::spawn_blocking(move || {
            std::fs::read_to_string(fifo)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_process_group() {
        let ws = Workspace::new();
        let (command, fifo) = grandchild_command(&ws);
        let pid = read_pid(fifo);
        let cx = ws.cx_in_mode(PermissionMode::Allow);
        let out = call(
            &ShellTool::default(),
            json!({"command": command, "timeout": 1}),
            &cx,
        )
        .await;
        assert_eq!(out.error.as_ref().unwrap().name, "Timeout", "{}", out.text);
        assert!(out.text.contains("timed out after 1 s"));
        wait_for_exit(pid.await.unwrap()).await;
    }

    #[tokio::test]
    async fn cancel_kills_the_whole_process_group() {
        let ws = Workspace::new();
        let (command, fifo) = grandchild_command(&ws);
        let cx = ws.cx_in_mode(PermissionMode::Allow);
        let cancel = cx.cancel.clone();
        let running = tokio::spawn({
            let cx = cx.clone();
            async move { call(&ShellTool::default(), json!({"command": command}), &cx).await }
        });
        let pid = read_pid(fifo).await.unwrap();
        let alive = crate::tools::testing::pidfd(pid);
        cancel.cancel();
        let out = running.await.unwrap();
        assert!(out.is_cancelled(), "{}", out.text);
        alive.exited().await;
    }

    #[tokio::test]
    async fn asks_before_running_and_a_rejection_runs_nothing() {
        let ws = Workspace::new();
        let editor = ws.editor();
        editor.answer(PermissionAnswer::RejectOnce);
        let out = call(
            &ShellTool::default(),
            json!({"command": "touch made"}),
            &ws.cx_with(&editor),
        )
        .await;
        assert!(
            out.text
                .contains("the user rejected this call (touch made)"),
            "{}",
            out.text
        );
        assert!(!ws.path("made").exists());
        let out = call(
            &ShellTool::default(),
            json!({"command": "touch made"}),
            &ws.cx_in_mode(PermissionMode::ReadOnly),
        )
        .await;
        assert!(out.text.contains("read-only"));
        assert!(!ws.path("made").exists());
    }

    #[tokio::test]
    async fn runs_in_the_editor_terminal_and_releases_it() {
        let ws = Workspace::new();
        let editor = ws.editor().with_terminal();
        editor.answer(PermissionAnswer::AllowOnce);
        let out = call(
            &ShellTool::default(),
            json!({"command": "echo hi; exit 2"}),
            &ws.cx_with(&editor),
        )
        .await;
        assert_eq!(out.text, "hi\n\n[exit code 2]");
        assert_eq!(out.display.terminal_id.as_deref(), Some("term-1"));
        assert_eq!(
            editor.calls(),
            vec![
                "permission execute echo hi; exit 2",
                "terminal/create bash -c echo hi; exit 2",
                "terminal/wait_for_exit term-1",
                "terminal/output term-1",
                "terminal/release term-1"
            ]
        );
    }

    #[tokio::test]
    async fn an_editor_terminal_is_killed_on_timeout_and_still_released() {
        let ws = Workspace::new();
        let (command, fifo) = grandchild_command(&ws);
        let pid = read_pid(fifo);
        let editor = ws.editor().with_terminal();
        let cx = ws.cx_with(&editor);
        cx.permissions.set_mode(PermissionMode::Allow);
        let out = call(
            &ShellTool::default(),
            json!({"command": command, "timeout": 1}),
            &cx,
        )
        .await;
        assert_eq!(out.error.as_ref().unwrap().name, "Timeout", "{}", out.text);
        let calls = editor.calls();
        assert_eq!(
            &calls[calls.len() - 3..],
            [
                "terminal/kill term-1",
                "terminal/output term-1",
                "terminal/release term-1"
            ]
        );
        wait_for_exit(pid.await.unwrap()).await;
    }
}

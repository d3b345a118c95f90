//! The child agent's OS process: launched in a process group of its own (under the process
//! guard when kin runs it), with the scrubbed environment plus what its configuration adds; its
//! exit status watched, the last lines of its stderr kept, and a teardown that escalates from
//! end of input to SIGTERM to SIGKILL. Dropping it without a teardown kills the group.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{ChildStdin, ChildStdout};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::command::{ChildCommand, DEPTH_ENV};
use super::error::{ChildError, StderrTail};
use crate::process::group::describe_status;
use crate::process::guard::{self, Lifeline};
use crate::process::sandbox::{Launch, Policy};
use crate::process::sandbox_hint::explain_child;
use crate::process::stderr_tail::keep_last_lines;
use crate::sync::lock;
use crate::tools::PermissionMode;

/// Stderr lines kept for error reports, and the longest kept line.
const STDERR_LINES: usize = 10;
const STDERR_LINE_BYTES: usize = 400;

/// The child process: its group, its guard's lifeline, its exit status and its stderr.
pub(super) struct Process {
    pgid: Option<Pid>,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    stderr_reader: Option<JoinHandle<()>>,
    lifeline: Option<Lifeline>,
    refusals: Option<Refusals>,
}

/// The pipes kin speaks ACP over.
pub(super) struct Pipes {
    pub(crate) stdin: ChildStdin,
    pub(crate) stdout: ChildStdout,
}

impl Process {
    /// Starts `command` with piped stdin, stdout and stderr.
    pub(crate) fn launch(command: &ChildCommand) -> Result<(Self, Pipes), ChildError> {
        let spawn_error = |error: std::io::Error| ChildError::Spawn {
            program: command.program.clone(),
            reason: error.to_string(),
        };
        let launch = confined(command)?;
        let (mut launcher, lifeline) =
            guard::command(&launch.program, &launch.args).map_err(spawn_error)?;
        launcher
            .current_dir(&command.cwd)
            .env_clear()
            .envs(command.child_env.scrubbed())
            .envs(command.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .envs(launch.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
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
        let stderr_reader = tokio::spawn(keep_last_lines(
            stderr,
            stderr_lines.clone(),
            STDERR_LINES,
            STDERR_LINE_BYTES,
        ));
        let process = Self {
            pgid,
            exit,
            stderr: stderr_lines,
            stderr_reader: Some(stderr_reader),
            lifeline,
            refusals: launch.policy.map(|policy| Refusals {
                policy,
                cwd: command.cwd.clone(),
                agent: command
                    .sandbox
                    .as_ref()
                    .map_or_else(String::new, |child| child.agent.clone()),
            }),
        };
        Ok((process, Pipes { stdin, stdout }))
    }

    pub(crate) fn exited(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// How the process ended, as an error detail.
    pub(crate) fn status(&self) -> String {
        match self.exited() {
            Some(status) => describe_status(status),
            None => "it closed its output but is still running".to_owned(),
        }
    }

    /// Waits up to `limit` for the exit; true when it has exited.
    pub(crate) async fn wait_exit(&self, limit: Duration) -> bool {
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
    pub(crate) async fn stderr_tail(&mut self, limit: Option<Duration>) -> StderrTail {
        if let Some(reader) = limit.and_then(|_| self.stderr_reader.take()) {
            let abort = reader.abort_handle();
            if tokio::time::timeout(limit.unwrap_or_default(), reader)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        let mut lines: Vec<String> = lock(&self.stderr).iter().cloned().collect();
        lines.extend(self.sandbox_note(&lines.join("\n")));
        StderrTail(lines)
    }

    /// Once its input is closed: waits `eof_grace`, SIGTERMs the group, waits `term_grace`,
    /// SIGKILLs it. Returns the stderr reader, still to be stopped, and, if the child
    /// outlived all of that, what to say about it.
    pub(crate) async fn stop(
        &mut self,
        command: &ChildCommand,
    ) -> (Option<JoinHandle<()>>, Option<String>) {
        let mut survived = None;
        if !self.wait_exit(command.eof_grace).await {
            self.signal(Signal::SIGTERM);
            if !self.wait_exit(command.term_grace).await {
                self.signal(Signal::SIGKILL);
                if !self.wait_exit(command.term_grace).await {
                    tracing::warn!(program = command.program, "a child agent survived SIGKILL");
                    survived = Some(format!(
                        "the ACP child `{}` did not exit after stdin closed, SIGTERM and SIGKILL",
                        command.program
                    ));
                }
            }
        }
        // Gone or not, nothing is left to ask of it: drop the lifeline.
        self.lifeline = None;
        (self.stderr_reader.take(), survived)
    }
}

/// How `command` is started: inside its sandbox when it has one and runs here (a child reached
/// through a channel such as ssh is the far side's to confine).
fn confined(command: &ChildCommand) -> Result<Launch, ChildError> {
    let sandbox = command
        .sandbox
        .as_ref()
        .filter(|_| command.remote_cwd.is_none());
    let Some(child) = sandbox.filter(|child| child.confined) else {
        return Ok(Launch::direct(&command.program, &command.args));
    };
    let read_only = command
        .ceiling
        .as_ref()
        .is_some_and(|ceiling| ceiling.effective_mode() == PermissionMode::ReadOnly);
    let mut launch = child
        .sandbox
        .agent(
            &child.scope(&command.cwd, read_only),
            &child.state,
            &command.program,
            &command.args,
        )
        .map_err(|error| ChildError::Spawn {
            program: command.program.clone(),
            reason: error.to_string(),
        })?;
    if launch.policy.is_some() {
        launch.env.extend(child.env.iter().cloned());
    }
    Ok(launch)
}

/// What a confined child is held to, for the note on a write the sandbox refused it.
struct Refusals {
    policy: Policy,
    cwd: PathBuf,
    agent: String,
}

impl Process {
    /// The sandbox's note on `output` (stderr lines, an error the child answered), when it
    /// names a path the sandbox refused this child.
    pub(crate) fn sandbox_note(&self, output: &str) -> Option<String> {
        let refusals = self.refusals.as_ref()?;
        explain_child(output, &refusals.policy, &refusals.cwd, &refusals.agent)
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

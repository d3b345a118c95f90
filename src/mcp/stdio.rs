//! A stdio MCP server's process, under kin's process supervision: its own process group, the
//! process guard when kin runs it (nothing survives the session or kin, kill -9 included), the
//! scrubbed environment ([`StdioStart`]) plus the server's `env`. Its stderr is read as it
//! comes (a server that floods it never blocks) and only the last lines are kept, for error
//! reports.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::process::child_env::ChildEnv;
use crate::process::group::describe_status;
use crate::process::guard::{self, Lifeline, TERM_GRACE};
use crate::process::stderr_tail::keep_last_lines;
use crate::sync::lock;

/// Stderr lines kept, and the longest kept line.
const STDERR_LINES: usize = 5;
const STDERR_LINE_CHARS: usize = 300;

/// Where a session's stdio servers start, and the scrub of the environment they start with.
#[derive(Debug, Clone)]
pub(crate) struct StdioStart {
    pub(crate) cwd: PathBuf,
    pub(crate) env: ChildEnv,
}

pub(crate) struct StdioProcess {
    child: Child,
    pgid: Option<Pid>,
    lifeline: Option<Lifeline>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl StdioProcess {
    /// Starts `command args` as `start` says; returns the process and the pipes MCP runs over.
    pub(crate) fn launch(
        command: &str,
        args: &[String],
        env: &[(String, String)],
        start: &StdioStart,
    ) -> std::io::Result<(Self, ChildStdout, ChildStdin)> {
        let (mut launcher, lifeline) = guard::command(command, args)?;
        launcher
            .current_dir(&start.cwd)
            .env_clear()
            .envs(start.env.scrubbed())
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // A guard is stopped through its lifeline.
            .kill_on_drop(lifeline.is_none());
        let mut child = launcher.spawn()?;
        drop(launcher);
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("missing pipes"));
        };
        let kept = Arc::new(Mutex::new(VecDeque::new()));
        tokio::spawn(keep_last_lines(
            stderr,
            kept.clone(),
            STDERR_LINES,
            STDERR_LINE_CHARS,
        ));
        let process = Self {
            child,
            pgid,
            lifeline,
            stderr: kept,
        };
        Ok((process, stdout, stdin))
    }

    /// How it ended (or that it still runs), with its last stderr lines.
    pub(crate) fn report(&mut self) -> String {
        let status = match self.child.try_wait() {
            Ok(Some(status)) => describe_status(status),
            _ => "still running".to_owned(),
        };
        let lines = lock(&self.stderr);
        match lines.back() {
            Some(_) => format!(
                "{status}; stderr: {}",
                lines.iter().cloned().collect::<Vec<_>>().join(" | ")
            ),
            None => status,
        }
    }

    /// Stops the whole group: the guard does it once its lifeline closes (SIGTERM, a grace,
    /// SIGKILL); without a guard, SIGTERM, the grace, then SIGKILL here.
    pub(crate) async fn stop(&mut self) {
        if self.lifeline.take().is_some() {
            let _ = self.child.wait().await;
            return;
        }
        self.signal(Signal::SIGTERM);
        if tokio::time::timeout(TERM_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.signal(Signal::SIGKILL);
            let _ = self.child.wait().await;
        }
        self.signal(Signal::SIGKILL);
    }

    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            let _ = killpg(pgid, signal);
        }
    }
}

impl Drop for StdioProcess {
    fn drop(&mut self) {
        // Dropped without `stop`: the lifeline goes with `self`; without a guard, kill here.
        if self.lifeline.is_none() {
            self.signal(Signal::SIGKILL);
        }
    }
}

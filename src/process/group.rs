//! A command run in its own process group, under a guard (see [`guard`]) when kin runs it, with
//! the environment a [`ChildEnv`] scrubs and its output (stdout and stderr through one
//! pipe, so in the order written) collected into a [`HeadTail`]. Stopping it or dropping it
//! takes down the whole group and whatever the command left running. Used by the shell tool and
//! by the scenario client's terminals.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Child;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::child_env::ChildEnv;
use super::guard::{self, Lifeline, TERM_GRACE};
use super::truncate::HeadTail;
use crate::sync::lock;

/// How long output readers may take to see end of file once the group is gone. Only a process
/// that left the group (setsid) and kept the pipe open, with no guard to kill it, can make them
/// wait this long.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// A running command and its process group.
pub struct GroupChild {
    /// The guard, or the command itself when there is no guard.
    child: Child,
    pgid: Option<Pid>,
    /// Held while a guard runs the command; dropped to stop it.
    lifeline: Option<Lifeline>,
    guarded: bool,
    output: Arc<Mutex<HeadTail>>,
    readers: Vec<JoinHandle<()>>,
    /// The group was killed after the leader ended, nothing is left to signal.
    done: bool,
}

impl GroupChild {
    /// Starts `program args` in `cwd` in a new process group, with the environment
    /// `child_env` scrubs plus `env`; output beyond `head + tail` bytes keeps only its first
    /// `head` and last `tail` bytes.
    pub fn spawn(
        program: &str,
        args: &[String],
        cwd: &Path,
        child_env: &ChildEnv,
        env: &[(String, String)],
        head: usize,
        tail: usize,
    ) -> std::io::Result<Self> {
        // One pipe for stdout and stderr, so the output keeps the order it was written in.
        let (reader, writer) = std::io::pipe()?;
        let writer_too = writer.try_clone()?;
        let (mut command, lifeline) = guard::command(program, args)?;
        let guarded = lifeline.is_some();
        command
            .current_dir(cwd)
            .env_clear()
            .envs(child_env.scrubbed())
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(writer_too))
            .process_group(0)
            // A guard is stopped through its lifeline: killed, it could not clean up.
            .kill_on_drop(!guarded);
        let child = command.spawn()?;
        // Our copies of the write end must close, or the output never ends.
        drop(command);
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        let output = Arc::new(Mutex::new(HeadTail::new(head, tail)));
        let pipe =
            tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader))?;
        let readers = vec![tokio::spawn(collect(pipe, output.clone()))];
        Ok(Self {
            child,
            pgid,
            lifeline,
            guarded,
            output,
            readers,
            done: false,
        })
    }

    /// Waits for the leader to exit.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// The leader's status if it has exited.
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `signal` to every process in the group; a group that is gone is fine.
    pub(crate) fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid.filter(|_| !self.done) {
            if let Err(error) = killpg(pgid, signal) {
                if error != nix::errno::Errno::ESRCH {
                    tracing::warn!(%error, pgid = pgid.as_raw(), "could not signal a process group");
                }
            }
        }
    }

    /// Stops the group: SIGTERM, a short grace for the leader, then SIGKILL to whatever is
    /// left (the guard does this once its lifeline is dropped); returns the command's status.
    pub(crate) async fn stop(&mut self) -> Option<ExitStatus> {
        if self.guarded {
            self.lifeline = None;
            return self.child.wait().await.ok();
        }
        self.signal(Signal::SIGTERM);
        let status = match tokio::time::timeout(TERM_GRACE, self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => None,
        };
        self.signal(Signal::SIGKILL);
        match status {
            Some(status) => Some(status),
            None => self.child.wait().await.ok(),
        }
    }

    /// After the leader ended: kills what it left running in its group, waits for the output
    /// to end, and returns the collected output.
    pub async fn finish(&mut self) -> HeadTail {
        self.drain().await;
        lock(&self.output).clone()
    }

    async fn drain(&mut self) {
        self.signal(Signal::SIGKILL);
        self.done = true;
        for reader in self.readers.drain(..) {
            let abort = reader.abort_handle();
            if tokio::time::timeout(DRAIN_GRACE, reader).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        // Dropped without `finish` (e.g. the tool was abandoned): take the whole group down. A
        // running guard does that itself once its lifeline (dropped with `self`) closes, and
        // must not be killed on the way.
        if !self.guarded || self.try_wait().is_some() {
            self.signal(Signal::SIGKILL);
        }
    }
}

async fn collect(mut pipe: impl AsyncRead + Unpin, output: Arc<Mutex<HeadTail>>) {
    let mut buffer = vec![0u8; 8192];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => lock(&output).push(&buffer[..n]),
        }
    }
}

/// A shell exit status as text: `exit code N` or `killed by signal S`.
pub(crate) fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(signal) => format!("killed by signal {}", signal.as_str()),
            Err(_) => format!("killed by signal {signal}"),
        },
        (None, None) => "ended".into(),
    }
}

/// A command as an editor terminal holds it: its output can be read at any time, its end
/// awaited from several places, and it can be killed; a task owns the process meanwhile.
/// Output beyond the limit drops the oldest bytes. Dropping it kills the group.
pub(crate) struct Terminal {
    output: Arc<Mutex<HeadTail>>,
    exit: watch::Receiver<Option<ExitStatus>>,
    kill: Arc<Notify>,
}

impl Terminal {
    pub fn spawn(
        program: &str,
        args: &[String],
        cwd: &Path,
        child_env: &ChildEnv,
        env: &[(String, String)],
        output_limit: usize,
    ) -> std::io::Result<Self> {
        let mut child = GroupChild::spawn(program, args, cwd, child_env, env, 0, output_limit)?;
        let output = child.output.clone();
        let (exit_tx, exit) = watch::channel(None);
        let kill = Arc::new(Notify::new());
        let killed = kill.clone();
        tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status.ok(),
                _ = killed.notified() => child.stop().await,
            };
            child.drain().await;
            let _ = exit_tx.send(status.or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                Some(ExitStatus::from_raw(9))
            }));
        });
        Ok(Self { output, exit, kill })
    }

    /// The output kept so far, whether older output was dropped, and the exit status if ended.
    pub(crate) fn output(&self) -> (String, bool, Option<ExitStatus>) {
        let output = lock(&self.output);
        (output.snapshot(), output.cut() > 0, *self.exit.borrow())
    }

    /// Waits until the command (and its group) has ended.
    pub async fn wait(&self) -> Option<ExitStatus> {
        let mut exit = self.exit.clone();
        let status = exit.wait_for(Option::is_some).await.ok().and_then(|s| *s);
        status
    }

    /// Kills the whole group (the terminal stays readable).
    pub(crate) fn kill(&self) {
        self.kill.notify_one();
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.kill.notify_one();
    }
}

//! The process guard: kin starts each command through a copy of itself (`kin __guard PROGRAM
//! ARGS...`) that makes sure nothing the command started outlives it, its caller, or kin.
//!
//! kin runs the guard as the leader of a new process group and holds the write end of a pipe
//! whose read end is the guard's fd 3 (the lifeline). The guard
//! - is a child subreaper, so whatever the command leaves behind (`setsid cmd &`, double forks)
//!   is re-parented to it rather than to init;
//! - runs the command in that group, with a parent-death signal (SIGKILL) on it; the guard is
//!   single-threaded, so that signal is tied to the guard's whole life. The guard survives the
//!   SIGTERM, SIGINT and SIGHUP sent to its group, to clean up;
//! - waits for the command to end or for the lifeline to close. kin closes it to stop the
//!   command, and the kernel closes it when kin dies, however it dies (kill -9 too). On a
//!   stop, the group gets SIGTERM and [`TERM_GRACE`] to end;
//! - then kills and reaps every process left below it, and exits as the command did (its
//!   exit code, or the same signal).
//!
//! Watching a pipe rather than setting a parent-death signal on the guard avoids that signal's
//! traps: it fires when the *thread* that forked the child exits (tokio's blocking threads
//! come and go), and it is not inherited by grandchildren.
//!
//! kin itself is not a subreaper: one per command keeps each call's leftovers apart from other
//! calls' processes and from what kin starts otherwise (a key command's `gpg-agent`, later
//! child agents), with no bookkeeping of which orphan belongs to which call.
//!
//! Only the `kin` executable can be a guard: `main` calls [`init`] first. Code run in another
//! executable (unit tests) starts commands directly, in their own group only.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::prctl;
use nix::sys::signal::{kill, killpg, raise, signal, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{getpgrp, getpid, getppid, setpgid, Pid};

/// The hidden first argument that makes `kin` a guard.
pub(crate) const ARG: &str = "__guard";
/// How long a stopped command gets between SIGTERM and SIGKILL.
pub(crate) const TERM_GRACE: Duration = Duration::from_secs(2);
/// The guard's end of the lifeline.
const LIFELINE_FD: i32 = 3;
/// The guard's exit code when it could not run the command (as a shell's "not found").
const NOT_STARTED: i32 = 127;

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Called first in `main`: when this process was started as a guard, guards the command and
/// exits; otherwise lets this process start its commands under guards (copies of itself).
pub fn init() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|arg| arg == ARG) {
        let args: Vec<OsString> = args.collect();
        std::process::exit(guard(&args));
    }
    enable(PathBuf::from("/proc/self/exe"));
}

/// Starts commands under `program`, which must be a `kin` executable (benches use this).
pub fn enable(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// Kept by kin while a guarded command runs; dropping it tells the guard to stop the command.
/// (The kernel drops it too when kin dies.)
pub(crate) struct Lifeline {
    _kept: OwnedFd,
    /// The guard's end, kept open here until the guard has been started with it as fd 3.
    _given: OwnedFd,
}

/// A command that runs `program args` under a guard when guards are enabled (see [`init`]),
/// else directly. With a guard, keep the returned [`Lifeline`] from before `spawn` until the
/// command should stop. Either way, put the process in a new group (`process_group(0)`): it
/// then holds the command and everything it starts.
pub(crate) fn command(
    program: &str,
    args: &[String],
) -> std::io::Result<(tokio::process::Command, Option<Lifeline>)> {
    let Some(guard) = PROGRAM.get() else {
        let mut command = tokio::process::Command::new(program);
        command.args(args);
        return Ok((command, None));
    };
    let (given, kept) = std::io::pipe()?;
    let lifeline = Lifeline {
        _kept: OwnedFd::from(kept),
        _given: OwnedFd::from(given),
    };
    let raw = lifeline._given.as_raw_fd();
    let mut command = tokio::process::Command::new(guard);
    command.arg(ARG).arg(program).args(args);
    // SAFETY: dup2 and fcntl are async-signal-safe; the closure touches nothing else. Both
    // pipe ends are close-on-exec, so only the guard gets the read end, as fd 3 (dup2 clears
    // the flag; fcntl clears it when the pipe already was fd 3).
    unsafe {
        command.pre_exec(move || {
            if nix::libc::dup2(raw, LIFELINE_FD) < 0
                || nix::libc::fcntl(LIFELINE_FD, nix::libc::F_SETFD, 0) < 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok((command, Some(lifeline)))
}

/// Runs the guard; returns the exit code, or does not return when it re-raises a signal.
fn guard(args: &[OsString]) -> i32 {
    // Its memory and environment stay closed to the command it runs (same user); `exec`
    // makes the command itself dumpable again.
    if let Err(why) = super::own_env::set_non_dumpable() {
        eprintln!("kin: {ARG}: {why}");
    }
    let Some((program, args)) = args.split_first() else {
        eprintln!("kin: {ARG} needs a program to run");
        return NOT_STARTED;
    };
    let lifeline = match take_lifeline() {
        Ok(lifeline) => lifeline,
        Err(error) => {
            eprintln!("kin: {ARG} is started by kin, with a lifeline as fd {LIFELINE_FD}: {error}");
            return NOT_STARTED;
        }
    };
    match run(&lifeline, program, args) {
        Ok(status) => exit_like(status),
        Err(error) => {
            eprintln!("kin: could not run {}: {error}", program.to_string_lossy());
            NOT_STARTED
        }
    }
}

/// fd 3, kept from the command.
fn take_lifeline() -> std::io::Result<OwnedFd> {
    // SAFETY: fcntl only sets a flag; it fails (EBADF) when kin passed no fd 3.
    if unsafe { nix::libc::fcntl(LIFELINE_FD, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd 3 is open (checked above) and is the lifeline; nothing else here owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(LIFELINE_FD) })
}

fn run(
    lifeline: &OwnedFd,
    program: &OsString,
    args: &[OsString],
) -> std::io::Result<Option<WaitStatus>> {
    use std::os::unix::process::CommandExt;
    if getpgrp() != getpid() {
        setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
    }
    prctl::set_child_subreaper(true)?;
    // The guard signals its own group; it must live on to clean up. A handler, unlike
    // SIG_IGN, is reset in the command by exec.
    for stop in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: the handler does nothing, so it is async-signal-safe.
        unsafe { signal(stop, SigHandler::Handler(ignore_signal)) }?;
    }
    let guard = getpid();
    let mut command = std::process::Command::new(program);
    command.args(args);
    // SAFETY: prctl and getppid are async-signal-safe. If the guard died before the
    // parent-death signal was set, the command must not run at all.
    unsafe {
        command.pre_exec(move || {
            prctl::set_pdeathsig(Signal::SIGKILL)?;
            if getppid() != guard {
                return Err(std::io::Error::other("the guard is gone"));
            }
            Ok(())
        });
    }
    let child = command.spawn()?;
    let leader = Pid::from_raw(i32::try_from(child.id()).map_err(std::io::Error::other)?);
    // The status is collected below with waitpid, not through `child`.
    drop(child);
    let waited = pidfd(leader).and_then(|ended| wait_for_end(lifeline, &ended));
    let status = kill_the_rest(guard, leader);
    waited.map(|()| status)
}

extern "C" fn ignore_signal(_: nix::libc::c_int) {}

/// A descriptor that becomes readable when `pid` ends.
fn pidfd(pid: Pid) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let raw = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let raw = i32::try_from(raw).map_err(std::io::Error::other)?;
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Returns when the command has ended, or when the lifeline closed and the command, sent
/// SIGTERM, has ended or used up its grace.
fn wait_for_end(lifeline: &OwnedFd, ended: &OwnedFd) -> std::io::Result<()> {
    let mut deadline: Option<Instant> = None;
    loop {
        let mut fds = vec![PollFd::new(ended.as_fd(), PollFlags::POLLIN)];
        let timeout = match deadline {
            // The lifeline stays readable once closed: watch it only until then.
            None => {
                fds.push(PollFd::new(lifeline.as_fd(), PollFlags::POLLIN));
                PollTimeout::NONE
            }
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX)
            }
        };
        match poll(&mut fds, timeout) {
            Err(Errno::EINTR) => continue,
            Err(error) => return Err(error.into()),
            Ok(0) => return Ok(()),
            Ok(_) => {}
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        if ready(&fds[0]) {
            return Ok(());
        }
        if deadline.is_none() && fds.get(1).is_some_and(ready) {
            let _ = killpg(getpgrp(), Signal::SIGTERM);
            deadline = Some(Instant::now() + TERM_GRACE);
        }
    }
}

/// Kills and reaps every process below the guard (the command, what it left in its group, and
/// what was re-parented to the guard); returns the command's status.
fn kill_the_rest(guard: Pid, leader: Pid) -> Option<WaitStatus> {
    let mut status = None;
    let mut blocking = false;
    loop {
        let flags = (!blocking).then_some(WaitPidFlag::WNOHANG);
        blocking = false;
        match waitpid(None, flags) {
            Ok(WaitStatus::StillAlive) => {
                // Some still run: kill every child (a killed child's own children are then
                // re-parented here and killed on the next round), then wait for one to end.
                for child in children_of(guard) {
                    let _ = kill(child, Signal::SIGKILL);
                }
                blocking = true;
            }
            Ok(ended) if ended.pid() == Some(leader) => status = Some(ended),
            Ok(_) | Err(Errno::EINTR) => {}
            // ECHILD: nothing is left.
            Err(_) => return status,
        }
    }
}

/// The processes whose parent is `parent`, from /proc.
fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| parent_of(pid) == Some(parent.as_raw()))
        .map(Pid::from_raw)
        .collect()
}

/// The parent pid in /proc/PID/stat: the 4th field, after the parenthesized command name
/// (which may itself contain spaces and parentheses).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after_name) = stat.rsplit_once(')')?;
    after_name.split_whitespace().nth(1)?.parse().ok()
}

/// Ends the guard as the command ended: the same exit code, or killed by the same signal.
fn exit_like(status: Option<WaitStatus>) -> i32 {
    match status {
        Some(WaitStatus::Exited(_, code)) => code,
        Some(WaitStatus::Signaled(_, signal_, _)) => {
            // No core file of the guard for a command's crash.
            let _ = prctl::set_dumpable(false);
            // SAFETY: restoring the default action has no handler to be unsafe about.
            let _ = unsafe { signal(signal_, SigHandler::SigDfl) };
            let _ = raise(signal_);
            128 + signal_ as i32
        }
        _ => NOT_STARTED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_parent_from_stat() {
        assert_eq!(
            parent_of(std::process::id() as i32),
            Some(getppid().as_raw())
        );
        assert_eq!(parent_of(-1), None);
    }

    #[test]
    fn lists_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        assert!(children_of(getpid()).contains(&pid));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

//! Keeps kin's secrets out of reach of the processes it starts, which run as the same user:
//! kin (and the guard) are made non-dumpable, so another process of the user cannot read
//! their memory, `/proc/<pid>/environ` or `/proc/<pid>/mem`; and the credentials kin was
//! started with are moved out of its initial environment block.
//!
//! That block is what `/proc/<pid>/environ` shows, and `remove_var` never changes it (it only
//! edits the C library's copy). So, when the environment holds a credential, kin re-executes
//! itself at once (same pid, same arguments) without those variables, handing them over an
//! inherited pipe; the new image reads them back into its own (heap) environment and closes
//! the pipe. Root keeps reading any process's memory (`CAP_SYS_PTRACE`), which is why the
//! block must not hold the key at all. `set_var` is sound here: it runs before any thread
//! exists. The one `unsafe` takes the inherited fd number as the pipe it is.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};

use super::child_env::is_credential_name;

/// Names the fd of the pipe that carries the moved variables into the re-executed kin.
const HANDOFF_FD: &str = "KIN_ENV_HANDOFF_FD";
/// The first bytes on that pipe: anything else on the named fd is not kin's handoff.
const MAGIC: &[u8] = b"kin-env-handoff-1\0";
/// A pipe holds this much without a reader; larger sets of credentials are left in place.
const MAX_HANDOFF: usize = 60 * 1024;

/// What [`hide_secrets`] did, for the log once logging is set up.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to hide.
    Clean,
    /// The credentials came back over the pipe: this image's environment block has none.
    Restored(usize),
    /// They could not be moved (the reason); they stay readable by root.
    Failed(String),
}

/// Called first in `main`, before any thread: makes kin non-dumpable, then either restores the
/// variables a previous image handed over or, when the environment holds credentials,
/// re-executes kin without them (this call then does not return).
pub fn hide_secrets() -> Outcome {
    let dumpable = set_non_dumpable();
    let outcome = match std::env::var_os(HANDOFF_FD) {
        // Credentials in this image's block were not moved by a kin before it (whoever set
        // the variable): they are moved now, with whatever the handoff brought.
        Some(fd) => match (moved_names().is_empty(), restore(&fd)) {
            (true, restored) => restored,
            (false, _) => reexec_without(&moved_names()),
        },
        None => reexec_without(&moved_names()),
    };
    match (dumpable, outcome) {
        (Err(why), Outcome::Clean) => Outcome::Failed(why),
        (_, outcome) => outcome,
    }
}

/// Makes this process non-dumpable (reset by every `exec`, so each image sets it again).
pub(crate) fn set_non_dumpable() -> Result<(), String> {
    nix::sys::prctl::set_dumpable(false).map_err(|e| format!("PR_SET_DUMPABLE: {e}"))
}

/// The variables to move: every credential-like name (as the tool environment drops them),
/// `KIN_API_KEY`, and the one `--api-key-env` names.
fn moved_names() -> Vec<OsString> {
    let named = api_key_env_arg();
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| {
            let text = name.to_string_lossy();
            is_credential_name(&text) || named.as_deref() == Some(name.as_os_str())
        })
        .collect()
}

/// The value of `--api-key-env VAR` / `--api-key-env=VAR` on the command line.
fn api_key_env_arg() -> Option<OsString> {
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--api-key-env" {
            return args.next();
        }
        if let Some(value) = arg.as_bytes().strip_prefix(b"--api-key-env=") {
            return Some(OsString::from_vec(value.to_vec()));
        }
    }
    None
}

fn reexec_without(names: &[OsString]) -> Outcome {
    if names.is_empty() {
        return Outcome::Clean;
    }
    let mut payload = MAGIC.to_vec();
    for name in names {
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        for part in [name.as_os_str(), value.as_os_str()] {
            payload.extend_from_slice(part.as_bytes());
            payload.push(0);
        }
    }
    if payload.len() > MAX_HANDOFF {
        return Outcome::Failed(format!(
            "the credentials in the environment are over {MAX_HANDOFF} bytes"
        ));
    }
    let (read, write) = match nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK) {
        Ok(ends) => ends,
        Err(e) => return Outcome::Failed(format!("pipe: {e}")),
    };
    // Non-blocking: the payload must fit the pipe's buffer, as nobody reads it before `exec`.
    if let Err(e) = std::fs::File::from(write).write_all(&payload) {
        return Outcome::Failed(format!("writing the handoff pipe: {e}"));
    }
    if let Err(e) = fcntl(&read, FcntlArg::F_SETFD(FdFlag::empty())) {
        return Outcome::Failed(format!("handing the pipe over: {e}"));
    }
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new("/proc/self/exe");
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    command.args(args);
    for name in names {
        command.env_remove(name);
    }
    command.env(HANDOFF_FD, read.as_raw_fd().to_string());
    let error = command.exec();
    Outcome::Failed(format!("re-executing kin: {error}"))
}

/// Reads the handed-over variables back into this image's environment.
fn restore(fd: &OsStr) -> Outcome {
    std::env::remove_var(HANDOFF_FD);
    let Some(fd) = fd.to_str().and_then(|fd| fd.parse::<i32>().ok()) else {
        return Outcome::Failed(format!("{HANDOFF_FD} is not a file descriptor"));
    };
    // Only a pipe is taken as the handoff; an fd that is not one is left alone.
    let is_pipe = std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .is_ok_and(|meta| std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
    if fd < 3 || !is_pipe {
        return Outcome::Failed(format!("{HANDOFF_FD}={fd} is not kin's handoff pipe"));
    }
    // SAFETY: `fd` is open (just checked: a pipe) and is the read end the previous image left
    // for this one; this runs first in `main`, so nothing else in the process holds it, and
    // owning it here closes it after the read. (nix and std take only owned or borrowed fds,
    // which a number inherited through `exec` can only become this way.)
    let pipe = unsafe { OwnedFd::from_raw_fd(fd) };
    let Some(payload) = read_whole(pipe) else {
        return Outcome::Failed("the handoff pipe did not carry kin's handoff".into());
    };
    let Some(body) = payload.strip_prefix(MAGIC) else {
        return Outcome::Failed("the handoff pipe did not carry kin's handoff".into());
    };
    let mut parts = body.split(|b| *b == 0);
    let mut restored = 0;
    while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
        if name.is_empty() {
            break;
        }
        std::env::set_var(OsStr::from_bytes(name), OsStr::from_bytes(value));
        restored += 1;
    }
    Outcome::Restored(restored)
}

/// All of `pipe` up to its end, read without ever waiting: kin's own handoff is whole in the
/// pipe, its writer closed at `exec`. `None` when a read would wait (a pipe someone else
/// still writes to), fails, or goes past [`MAX_HANDOFF`].
fn read_whole(pipe: OwnedFd) -> Option<Vec<u8>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut file = std::fs::File::from(pipe);
    let mut payload = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLIN)];
        if !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0) {
            return None;
        }
        match file.read(&mut buffer) {
            Ok(0) => return Some(payload),
            Ok(n) if payload.len() + n <= MAX_HANDOFF => payload.extend_from_slice(&buffer[..n]),
            Ok(_) => return None,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_key_env_argument_is_found_in_both_spellings() {
        // The test binary's own arguments carry no such flag.
        assert_eq!(api_key_env_arg(), None);
    }

    #[test]
    fn a_pipe_someone_still_writes_to_is_not_waited_for() {
        let (read, write) = nix::unistd::pipe().unwrap();
        assert_eq!(read_whole(read), None, "nothing there, the writer open");
        let (read, write_again) = nix::unistd::pipe().unwrap();
        std::fs::File::from(write_again)
            .write_all(b"whole")
            .unwrap();
        assert_eq!(read_whole(read).as_deref(), Some(&b"whole"[..]));
        drop(write);
    }
}

//! The process's own stdin and stdout as async streams.
//!
//! Editors and parent agents connect kin through pipes. A pipe is driven by the runtime's event
//! loop like a socket. Tokio's `stdin()`/`stdout()` instead hand every read and write to a
//! blocking thread, because they must also work for files and terminals: that starts two
//! threads before the first answer and adds a thread hop to every message. So pipes are used
//! directly and anything else falls back to tokio's stdio.
//!
//! Driving a pipe this way sets `O_NONBLOCK` on its open file description, which is shared
//! with every process holding the same end. kin gives its own children fresh pipes or
//! `/dev/null`, never its stdin or stdout, and [`StdioFlags::restore`] puts the flags back
//! when kin is done, for whoever shares the pipe and goes on reading or writing after kin.

use std::os::fd::{AsFd, BorrowedFd};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

pub type Input = Box<dyn AsyncRead + Send + Unpin>;
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// The file status flags stdin and stdout had before [`stdio`], to put back.
pub struct StdioFlags {
    stdin: Option<OFlag>,
    stdout: Option<OFlag>,
}

/// Stdin and stdout; must be called inside the runtime (a pipe registers with its driver).
/// Each pipe stream owns a duplicate (close-on-exec) of fd 0 or 1, which itself stays open.
pub fn stdio() -> (Input, Output, StdioFlags) {
    let flags = StdioFlags {
        stdin: flags_of(std::io::stdin().as_fd()),
        stdout: flags_of(std::io::stdout().as_fd()),
    };
    let stdin = std::io::stdin().as_fd().try_clone_to_owned();
    let input: Input = match stdin.and_then(pipe::Receiver::from_owned_fd) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let stdout = std::io::stdout().as_fd().try_clone_to_owned();
    let output: Output = match stdout.and_then(pipe::Sender::from_owned_fd) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (input, output, flags)
}

impl StdioFlags {
    /// Puts the flags back; call once the streams from [`stdio`] are dropped.
    pub fn restore(self) {
        for (fd, flags) in [
            (std::io::stdin().as_fd(), self.stdin),
            (std::io::stdout().as_fd(), self.stdout),
        ] {
            if let Some(flags) = flags {
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
        }
    }
}

fn flags_of(fd: BorrowedFd<'_>) -> Option<OFlag> {
    fcntl(fd, FcntlArg::F_GETFL)
        .ok()
        .map(OFlag::from_bits_truncate)
}

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
//! `/dev/null`, never its stdin or stdout, and [`restore_blocking`] clears the flag when kin is
//! done, for whoever shares the pipe and goes on writing or reading after kin.

use std::os::fd::AsFd;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

pub type Input = Box<dyn AsyncRead + Send + Unpin>;
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// Stdin and stdout; must be called inside the runtime (a pipe registers with its driver).
/// Each pipe stream owns a duplicate of fd 0 or 1 (close-on-exec), which stays open itself.
pub fn stdio() -> (Input, Output) {
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
    (input, output)
}

/// Puts stdin and stdout back in blocking mode (after the streams from [`stdio`] are dropped).
pub fn restore_blocking() {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    for fd in [std::io::stdin().as_fd(), std::io::stdout().as_fd()] {
        if let Ok(flags) = fcntl(fd, FcntlArg::F_GETFL) {
            let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
            let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
        }
    }
}

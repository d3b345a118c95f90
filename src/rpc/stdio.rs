//! The process's own stdin and stdout as async streams.
//!
//! Editors and parent agents connect kin through pipes, or through stream sockets (Node's
//! child processes get a socket pair per stream). Both can be driven by the runtime's event
//! loop. Tokio's `stdin()`/`stdout()` instead hand every read and write to a blocking thread,
//! because they must also work for files and terminals: that starts two threads before the
//! first answer and adds a thread hop to every message. So pipes and sockets are used directly
//! and anything else falls back to tokio's stdio.
//!
//! Driving a pipe or socket this way sets `O_NONBLOCK` on its open file description, which is
//! shared with every process holding the same end. kin gives its own children fresh pipes or
//! `/dev/null`, never its stdin or stdout, and [`StdioFlags::restore`] puts the flags back
//! when kin is done, for whoever shares the end and goes on reading or writing after kin.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::unix::pipe;

pub(crate) type Input = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// The file status flags stdin and stdout had before [`stdio`], to put back.
pub(crate) struct StdioFlags {
    stdin: Option<OFlag>,
    stdout: Option<OFlag>,
}

/// Stdin and stdout; must be called inside the runtime (pipes and sockets register with its
/// driver). Each evented stream owns a duplicate (close-on-exec) of fd 0 or 1, which itself
/// stays open.
pub(crate) fn stdio() -> (Input, Output, StdioFlags) {
    let flags = StdioFlags {
        stdin: flags_of(std::io::stdin().as_fd()),
        stdout: flags_of(std::io::stdout().as_fd()),
    };
    let input = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(evented_input)
        .unwrap_or_else(|_| Box::new(tokio::io::stdin()));
    let output = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(evented_output)
        .unwrap_or_else(|_| Box::new(tokio::io::stdout()));
    (input, output, flags)
}

/// `fd` read through the event loop, if it is a pipe or a socket.
fn evented_input(fd: OwnedFd) -> std::io::Result<Input> {
    Ok(match is_socket(&fd) {
        true => Box::new(socket(fd)?),
        false => Box::new(pipe::Receiver::from_owned_fd(fd)?),
    })
}

/// `fd` written through the event loop, if it is a pipe or a socket.
fn evented_output(fd: OwnedFd) -> std::io::Result<Output> {
    Ok(match is_socket(&fd) {
        true => Box::new(socket(fd)?),
        false => Box::new(pipe::Sender::from_owned_fd(fd)?),
    })
}

fn is_socket(fd: &OwnedFd) -> bool {
    use nix::sys::stat::{fstat, SFlag};
    fstat(fd).is_ok_and(|stat| {
        SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFSOCK
    })
}

/// A socket as an async stream; only read or only written here, so tokio's Unix stream type
/// serves whatever the socket's family.
fn socket(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let socket = std::os::unix::net::UnixStream::from(fd);
    socket.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(socket)
}

impl StdioFlags {
    /// Puts the flags back; call once the streams from [`stdio`] are dropped.
    pub(crate) fn restore(self) {
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

//! Who may drive `kin mcp --socket`: a process of the same user that kin's sandbox does not
//! confine. The kernel gives the connecting process (`SO_PEERCRED`); every process kin's
//! sandbox confines has `no_new_privs` set (Landlock needs it, and it is inherited by all it
//! starts and can never be unset), so a peer whose `/proc/<pid>/status` says `NoNewPrivs: 1`
//! is refused, whatever token it sends. Other programs that set `no_new_privs` (systemd
//! units with `NoNewPrivileges=`, container and Flatpak sandboxes) are refused too.
//! Where the kernel gives a pidfd of the peer (`SO_PEERPIDFD`, Linux 6.5), the pid read is
//! checked to still be that process afterwards, so a pid reused meanwhile is not believed.

use tokio::net::UnixStream;

/// Why the peer of `stream` is refused, or `None` when it may go on.
pub(crate) fn refusal(stream: &UnixStream) -> Option<String> {
    let credentials = match stream.peer_cred() {
        Ok(credentials) => credentials,
        Err(error) => return Some(format!("the client's credentials cannot be read: {error}")),
    };
    let me = nix::unistd::geteuid().as_raw();
    if credentials.uid() != me {
        return Some(format!(
            "the client runs as user id {}, not as {me}",
            credentials.uid()
        ));
    }
    confined(stream, credentials.pid())
}

#[cfg(target_os = "linux")]
fn confined(stream: &UnixStream, pid: Option<i32>) -> Option<String> {
    use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
    let Some(pid) = pid.filter(|pid| *pid > 0) else {
        return Some("the client's process id is unknown".to_owned());
    };
    // Taken before the pid is read, so that a pid reused meanwhile shows as an exit.
    let pidfd = getsockopt(stream, PeerPidfd).ok();
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return Some("the client's process is gone".to_owned());
    };
    if pidfd.as_ref().is_some_and(exited) {
        return Some("the client's process is gone".to_owned());
    }
    let no_new_privs = status
        .lines()
        .find_map(|line| line.strip_prefix("NoNewPrivs:"))
        .map(str::trim);
    match no_new_privs {
        Some("0") => None,
        Some(_) => Some(
            "the client runs with no_new_privs set, as every process kin's sandbox confines \
             does; a confined command may not drive kin mcp"
                .to_owned(),
        ),
        None => Some("the client's process status says nothing of no_new_privs".to_owned()),
    }
}

/// Whether the process of `pidfd` has exited (its pidfd reads as ready).
#[cfg(target_os = "linux")]
fn exited(pidfd: &std::os::fd::OwnedFd) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    !matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
}

/// No kin sandbox outside Linux: nothing is confined.
#[cfg(not(target_os = "linux"))]
fn confined(_stream: &UnixStream, _pid: Option<i32>) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_peer_is_judged_by_its_no_new_privs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let _client = UnixStream::connect(&path).await.unwrap();
        let (served, _) = listener.accept().await.unwrap();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        match refusal(&served) {
            None => assert!(status.contains("NoNewPrivs:\t0"), "{status}"),
            Some(why) => {
                assert!(status.contains("NoNewPrivs:\t1"), "{why}");
                assert!(why.contains("no_new_privs"), "{why}");
            }
        }
    }
}

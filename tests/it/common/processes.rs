//! Processes under test: waiting for an exit (pidfd), a pid handed over through a FIFO, and
//! the processes a test left behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A running process that becomes "readable" when it exits (Linux pidfd): tests wait for the
/// exit itself, never sleep.
pub struct ProcessHandle {
    fd: Option<std::os::fd::OwnedFd>,
    pid: i32,
}

/// Opens a pidfd for `pid` (a process already gone gives a handle that is ready at once).
pub fn pidfd(pid: i32) -> ProcessHandle {
    use rustix::process::{pidfd_open, Pid, PidfdFlags};
    let fd = Pid::from_raw(pid).and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    ProcessHandle { fd, pid }
}

impl ProcessHandle {
    /// Waits for the exit (on a blocking thread); a generous guard turns a survivor into a
    /// failure, not a hang.
    pub async fn exited(self) {
        use nix::poll::{poll, PollFd, PollFlags};
        use std::os::fd::AsFd;
        let Some(fd) = self.fd else { return };
        let exited = tokio::task::spawn_blocking(move || {
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            loop {
                match poll(&mut fds, 30_000u16) {
                    Err(nix::errno::Errno::EINTR) => continue,
                    ready => return ready.unwrap() > 0,
                }
            }
        })
        .await
        .unwrap();
        assert!(exited, "process {} survived", self.pid);
    }
}

/// A FIFO in `dir` and a task that reads one pid from it (written by the command under test).
pub fn pid_fifo(dir: &Path) -> (PathBuf, tokio::task::JoinHandle<i32>) {
    let fifo = dir.join("pid.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let reading = fifo.clone();
    let pid = tokio::task::spawn_blocking(move || {
        std::fs::read_to_string(reading)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    });
    (fifo, pid)
}

/// Polls until no process carries `marker`: process exits have no event to wait on here.
pub async fn assert_none_left(marker: &str) {
    let start = Instant::now();
    while !marked(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "processes outlived their run: {:?}",
            marked(marker)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Pids and command lines of the processes whose command line contains `marker`.
pub fn marked(marker: &str) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            line.contains(marker).then_some((pid, line))
        })
        .collect()
}

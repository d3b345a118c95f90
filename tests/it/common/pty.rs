//! A kin command in a pseudo-terminal (util-linux `script` gives it one, as an editor's or a
//! person's terminal would): what it prints is collected as it comes, so a test answers each
//! question once it is asked, never ahead of it.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Pty {
    child: Child,
    pub input: ChildStdin,
    output: Arc<(Mutex<String>, Condvar)>,
    reader: JoinHandle<()>,
}

/// `text` as one word for `sh`.
fn quoted(text: &std::ffi::OsStr) -> String {
    format!("'{}'", text.to_string_lossy().replace('\'', r"'\''"))
}

impl Pty {
    /// Runs `kin` (its program, arguments, environment and directory) in a terminal; `None`,
    /// with a visible skip, where there is no `script` (CI must have it).
    pub fn start(kin: &Command) -> Option<Self> {
        if Command::new("script").arg("--version").output().is_err() {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must have util-linux `script`"
            );
            eprintln!("SKIPPED: no `script` (util-linux) to give kin a terminal");
            return None;
        }
        let line: Vec<String> = std::iter::once(kin.get_program())
            .chain(kin.get_args())
            .map(quoted)
            .collect();
        let mut command = Command::new("script");
        command.args(["--quiet", "--return", "--command"]);
        command.arg(line.join(" "));
        command.arg("/dev/null");
        for (name, value) in kin.get_envs() {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        if let Some(dir) = kin.get_current_dir() {
            command.current_dir(dir);
        }
        let mut child = command
            .env("SHELL", "/bin/sh")
            .env("TERM", "dumb")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let output = Arc::new((Mutex::new(String::new()), Condvar::new()));
        let sink = output.clone();
        let reader = std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                let (text, arrived) = &*sink;
                text.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
                arrived.notify_all();
            }
        });
        Some(Self {
            child,
            input,
            output,
            reader,
        })
    }

    /// Waits until kin has printed `text` (after `from` bytes of output); returns where it
    /// ends.
    pub fn wait_for(&self, text: &str, from: usize) -> usize {
        let (output, arrived) = &*self.output;
        let guard = output.lock().unwrap();
        let (guard, timeout) = arrived
            .wait_timeout_while(guard, Duration::from_secs(60), |seen| {
                !seen.get(from..).is_some_and(|rest| rest.contains(text))
            })
            .unwrap();
        assert!(!timeout.timed_out(), "kin never printed {text:?}:\n{guard}");
        from + guard[from..].find(text).unwrap() + text.len()
    }

    /// Types `line` and Enter.
    pub fn type_line(&mut self, line: &str) {
        self.input
            .write_all(format!("{line}\r").as_bytes())
            .unwrap();
        self.input.flush().unwrap();
    }

    /// Waits for kin to exit: its exit code and all it printed.
    pub fn finish(mut self) -> (i32, String) {
        let status = self.child.wait().unwrap();
        // The last bytes may still be in the pipe when the process exits: the reader
        // thread ends at the pipe's end, so wait for it before reading the transcript.
        drop(self.input);
        self.reader.join().unwrap();
        let (output, _) = &*self.output;
        let text = output.lock().unwrap().clone();
        (status.code().unwrap_or(-1), text)
    }
}

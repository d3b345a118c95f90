//! Shared helpers for the `kin` benchmarks: drive the real release binary over pipes with
//! blocking std I/O (no async runtime on the client side, so the client adds as little as
//! possible to what is measured), summarize samples, and the floor program figures are
//! compared with.
#![allow(dead_code)]

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

/// The `kin` binary of this package, built with the bench (release) profile.
pub const KIN: &str = env!("CARGO_BIN_EXE_kin");

/// Set to another `kin` binary to measure it instead (e.g. a build of the base commit, to
/// compare before and after in one run).
pub const KIN_OVERRIDE: &str = "KIN_BENCH_BIN";

/// Set (by [`Kin::spawn_floor`]) to make a bench binary run [`serve_floor_if_asked`] instead.
const FLOOR: &str = "KIN_BENCH_FLOOR";

/// The binary the benches measure.
pub fn kin_binary() -> OsString {
    std::env::var_os(KIN_OVERRIDE).unwrap_or_else(|| KIN.into())
}

/// The floor: the least a Rust agent on tokio can do, serving `initialize` over stdio with the
/// same runtime shape as kin (2 workers, tokio stdin/stdout, serde_json) and nothing else. A
/// bench calls this first in `main`; when spawned by [`Kin::spawn_floor`] the bench binary
/// becomes this program and exits at stdin EOF, so the floor is built by the same `cargo
/// bench` with the same profile and never ships.
pub fn serve_floor_if_asked() {
    match std::env::var(FLOOR).as_deref() {
        Err(_) => return,
        Ok(PIPE_FLOOR) => serve_pipe_floor(),
        Ok(_) => {}
    }
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        let mut stdout = tokio::io::stdout();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(request) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            // `initialize` as an agent answers it; any other request at once, with nothing
            // (what reading and parsing a message costs, for benches that need that floor).
            let answer = match request["method"] == "initialize" {
                true => json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                    "protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}}),
                false => json!({"jsonrpc": "2.0", "id": request["id"], "result": {}}),
            };
            if request.get("id").is_some() {
                let mut line = answer.to_string();
                line.push('\n');
                stdout.write_all(line.as_bytes()).await.expect("writing");
                stdout.flush().await.expect("flushing");
            }
        }
    });
    // stdin's reader thread may still be parked in a read; do not wait for it.
    std::process::exit(0);
}

/// [`FLOOR`]'s value for [`serve_pipe_floor`].
const PIPE_FLOOR: &str = "pipe";

/// The floor of moving a line through a pipe: the pipe widened to 1 MiB (as kin widens its
/// stdin), blocking reads into one buffer kept for the whole run (so its pages are in place
/// after the first line), a SIMD search for the newline, the `id` read off the line's start,
/// an empty result. No parsing, no runtime.
fn serve_pipe_floor() -> ! {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    let _ = nix::fcntl::fcntl(
        std::io::stdin().as_fd(),
        nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20),
    );
    let (mut stdin, mut stdout) = (std::io::stdin().lock(), std::io::stdout().lock());
    let mut buffer = vec![0u8; 32 << 20];
    let (mut filled, mut scanned) = (0, 0);
    loop {
        if let Some(at) = memchr::memchr(b'\n', &buffer[scanned..filled]) {
            let end = scanned + at;
            if let Some(id) = leading_id(&buffer[..end]) {
                let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}\n");
                stdout.write_all(answer.as_bytes()).expect("writing");
                stdout.flush().expect("flushing");
            }
            buffer.copy_within(end + 1..filled, 0);
            (filled, scanned) = (filled - end - 1, 0);
            continue;
        }
        scanned = filled;
        match stdin.read(&mut buffer[filled..]) {
            Ok(0) | Err(_) => std::process::exit(0),
            Ok(n) => filled += n,
        }
    }
}

/// The numeric `id` of a line that starts `{"jsonrpc":"2.0","id":N`, as the benches write.
fn leading_id(line: &[u8]) -> Option<u64> {
    let head = &line[..line.len().min(64)];
    let at = head.windows(5).position(|w| w == b"\"id\":")? + 5;
    let digits = head[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&head[at..at + digits])
        .ok()?
        .parse()
        .ok()
}

/// The `initialize` request every bench starts with (id 1).
pub const INITIALIZE: &str =
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;

/// How a `session/update` notification line starts, as kin serializes it (no `id`, `method`
/// first). Lines that do not match are parsed in full, so a change of field order only makes
/// the client slower, never wrong.
const UPDATE_PREFIX: &str = r#"{"jsonrpc":"2.0","method":"session/update""#;

/// Ends the bench process (and thereby, through stdin EOF, every kin it started) if the whole
/// bench has not finished within `limit`: a guard against a hung agent, not a measurement.
pub fn watchdog(bench: &'static str, limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("{bench}: gave up after {limit:?} (kin stopped answering?)");
        std::process::exit(2);
    });
}

/// One running `kin acp` child.
pub struct Kin {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
    out: Vec<u8>,
}

impl Kin {
    /// Spawns `kin acp <extra args>` with `KIN_HOME=home`, stderr discarded.
    pub fn spawn(home: &Path, cwd: &Path, extra: &[&OsStr]) -> Self {
        Self::spawn_with(home, cwd, extra, &[])
    }

    /// [`Kin::spawn`] with extra environment variables.
    pub fn spawn_with(home: &Path, cwd: &Path, extra: &[&OsStr], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(kin_binary());
        command.arg("acp").args(extra).env("KIN_HOME", home);
        command.envs(env.iter().copied()).current_dir(cwd);
        Self::start(command)
    }

    /// Spawns `kin <args>` (another subcommand than `acp`) with `KIN_HOME=home`.
    pub fn spawn_subcommand(home: &Path, cwd: &Path, args: &[&str]) -> Self {
        let mut command = Command::new(kin_binary());
        command.args(args).env("KIN_HOME", home).current_dir(cwd);
        Self::start(command)
    }

    /// Spawns the floor program (see [`serve_floor_if_asked`]).
    pub fn spawn_floor(cwd: &Path) -> Self {
        let mut command = Command::new(std::env::current_exe().expect("the bench's own path"));
        command.env(FLOOR, "1").current_dir(cwd);
        Self::start(command)
    }

    /// The pipe floor ([`serve_pipe_floor`]): what moving a line costs with nothing done to it.
    pub fn spawn_pipe_floor(cwd: &Path) -> Self {
        let mut command = Command::new(std::env::current_exe().expect("the bench's own path"));
        command.env(FLOOR, PIPE_FLOOR).current_dir(cwd);
        Self::start(command)
    }

    fn start(mut command: Command) -> Self {
        let mut child = command
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {command:?}: {e}"));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        Self {
            child,
            stdin: Some(stdin),
            stdout: BufReader::with_capacity(1 << 16, stdout),
            line: String::with_capacity(1 << 12),
            out: Vec::with_capacity(1 << 10),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one message line (a single write of line + `\n`).
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        if line.len() > 64 * 1024 {
            // Megabytes are written as they are: copying them first would be timed as kin's.
            stdin.write_all(line.as_bytes()).expect("writing to kin");
            stdin.write_all(b"\n").expect("writing to kin");
        } else {
            self.out.clear();
            self.out.extend_from_slice(line.as_bytes());
            self.out.push(b'\n');
            stdin.write_all(&self.out).expect("writing to kin");
        }
        stdin.flush().expect("flushing to kin");
    }

    /// Reads the next line (without its `\n`); panics if kin closed stdout.
    pub fn read_line(&mut self) -> &str {
        self.line.clear();
        let n = self
            .stdout
            .read_line(&mut self.line)
            .expect("reading from kin");
        assert!(n > 0, "kin closed its stdout");
        self.line.trim_end_matches(['\n', '\r'])
    }

    /// Reads until the response to request `id`; returns it with the number of
    /// `session/update` notifications read on the way. Error responses and requests from kin
    /// (none are expected in these benches) panic.
    pub fn wait_response(&mut self, id: u64) -> (Value, usize) {
        let mut updates = 0usize;
        loop {
            let line = self.read_line();
            if line.starts_with(UPDATE_PREFIX) {
                updates += 1;
                continue;
            }
            let message: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("kin wrote a non-JSON line ({e}): {line}"));
            match (message.get("method"), message.get("id")) {
                (Some(method), None) => {
                    if method == "session/update" {
                        updates += 1;
                    }
                }
                (Some(method), Some(_)) => panic!("unexpected request from kin: {method}"),
                (None, Some(got)) if got.as_u64() == Some(id) => {
                    if let Some(error) = message.get("error") {
                        panic!("request {id} failed: {error}");
                    }
                    return (message, updates);
                }
                _ => panic!("unexpected line while waiting for response {id}: {line}"),
            }
        }
    }

    /// Sends a request and waits for its response (see [`Kin::wait_response`]).
    pub fn call(&mut self, id: u64, method: &str, params: Value) -> (Value, usize) {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&line.to_string());
        self.wait_response(id)
    }

    /// `initialize` (id 1).
    pub fn initialize(&mut self) {
        self.send(INITIALIZE);
        self.wait_response(1);
    }

    /// `session/new` in `cwd`; returns the session id.
    pub fn new_session(&mut self, id: u64, cwd: &Path) -> String {
        let (answer, _) = self.call(
            id,
            "session/new",
            json!({"cwd": cwd.to_str().expect("UTF-8 temp path"), "mcpServers": []}),
        );
        answer["result"]["sessionId"]
            .as_str()
            .expect("session/new answered a sessionId")
            .to_owned()
    }

    /// Closes stdin (kin's signal to shut down) and waits for it to exit.
    pub fn finish(mut self) {
        drop(self.stdin.take());
        let status = self.child.wait().expect("waiting for kin");
        assert!(status.success(), "kin exited with {status}");
    }

    /// Kills kin without waiting for a clean shutdown (reaps it).
    pub fn kill(mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The value at quantile `q` (0..=1) of sorted samples, interpolating linearly.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    assert!(!sorted.is_empty(), "no samples");
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Sorts samples in place and returns (median, p10, p90).
pub fn summary(samples: &mut [f64]) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        quantile(samples, 0.5),
        quantile(samples, 0.1),
        quantile(samples, 0.9),
    )
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `kB` value of a `Vm*:` line of `/proc/<pid>/status`.
pub fn proc_status_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"))
}

/// CPU time (ms) all threads of `pid` have run so far, from `/proc/<pid>/task/*/schedstat`:
/// unlike wall time, it hardly changes with the load of a busy machine.
pub fn cpu_ms(pid: u32) -> f64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap_or_else(|e| panic!("listing /proc/{pid}/task: {e}"));
    let ns: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e6
}

/// A fresh temporary directory (removed on drop).
pub fn temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("creating a temp dir")
}

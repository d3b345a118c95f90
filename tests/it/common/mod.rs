//! Shared test support: schema validation of everything kin writes, scenario playing and
//! comparing, a raw-pipe ACP client, and a scripted OpenAI-compatible server.
#![allow(dead_code)]

mod dirs;
mod harvest;
mod homes;
pub mod mcp;
pub mod mock_openai;
pub mod normalize;
mod processes;
pub mod pty;
mod script;
mod wire;

pub use dirs::{open_in_mode, prompt_in_mode, Dirs};
pub use homes::{child_log_path, home_with, session_files};
pub use processes::{assert_none_left, marked, pid_fifo, pidfd};
pub use script::Script;
pub use wire::{answer_text, chunk_text, prompt, Wire};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use harvest::harvest_logs;
use jsonschema::Validator;
use kin::scenario::{Input, RunEvent, RunOptions, Runner};
use normalize::Normalizer;
use serde_json::{json, Value};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The fake ACP child example (`cargo test` builds examples), beside the test binary.
pub fn fake_acp_child() -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let path = deps
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples/fake_acp_child");
    assert!(
        path.is_file(),
        "{} is missing: build it with `cargo build --example fake_acp_child`",
        path.display()
    );
    path
}

/// Takes a linked ACP child's passed-on traffic and drops it.
pub struct Nowhere;

impl kin::acp_client::ChildSink for Nowhere {
    fn update(&self, _: &str, _: &Value) {}
    fn summary(&self, _: &str, _: &str, _: &str) {}
}

/// The Python the MCP tests use (`KIN_PYTHON`, else the CI venv) if `import {modules}` works in
/// it. Outside CI a missing package is a visible skip (`None`); in CI it fails the test.
pub fn python_with(modules: &str) -> Option<PathBuf> {
    let python = std::env::var_os("KIN_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/ci-venv/bin/python"));
    let ok = std::process::Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must have the Python `mcp` package (tests/interop/requirements.txt)"
    );
    eprintln!("SKIPPED: no Python with the `mcp` package (set KIN_PYTHON)");
    None
}

/// `../shared/reference`, beside the repository (read at test time, never copied), for the
/// test named `test`. A fresh clone has none: then this returns `None` after writing a skip
/// line, unless `KIN_REQUIRE_REFERENCE=1` (set by `.ci/run` when the folder is there), where
/// the reference is required and this panics.
pub fn shared_reference(test: &str) -> Option<PathBuf> {
    let dir = repo().join("../shared/reference");
    if dir.is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("KIN_REQUIRE_REFERENCE").is_none_or(|v| v != "1"),
        "{test}: {} is missing; it is required when KIN_REQUIRE_REFERENCE=1",
        dir.display()
    );
    let line = format!(
        "SKIPPED {test}: {} does not exist (required when KIN_REQUIRE_REFERENCE=1)\n",
        dir.display()
    );
    // Straight to the stderr handle: libtest captures the print macros, so a skip written
    // with eprintln! would only show with --nocapture.
    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
    None
}

/// The ACP v1 JSON Schema kin ships (generated from the pinned schema crate).
pub fn acp_schema_path() -> PathBuf {
    repo().join("protocol/schemas/acp.json")
}

pub fn kin_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kin"))
}

/// Validators for the ACP v1 schema, one per `$defs` entry, built on demand.
pub struct AcpSchema {
    root: Value,
    by_method: HashMap<(String, String), String>,
    cache: HashMap<String, Validator>,
}

impl AcpSchema {
    pub fn load() -> Self {
        let path = acp_schema_path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let root: Value = serde_json::from_str(&text).unwrap();
        let mut by_method = HashMap::new();
        for (name, def) in root["$defs"].as_object().unwrap() {
            if let (Some(method), Some(side)) = (def["x-method"].as_str(), def["x-side"].as_str()) {
                let role = if name.ends_with("Response") {
                    "response"
                } else if name.ends_with("Notification") {
                    "notification"
                } else {
                    "request"
                };
                by_method.insert((format!("{side}:{role}"), method.to_owned()), name.clone());
            }
        }
        Self {
            root,
            by_method,
            cache: HashMap::new(),
        }
    }

    fn check(&mut self, def: &str, instance: &Value) -> Result<(), String> {
        if !self.cache.contains_key(def) {
            let schema = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$ref": format!("#/$defs/{def}"),
                "$defs": self.root["$defs"].clone(),
            });
            let validator = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
            self.cache.insert(def.to_owned(), validator);
        }
        let validator = &self.cache[def];
        let errors: Vec<String> = validator
            .iter_errors(instance)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(format!("{def}: {}", errors.join("; ")))
        }
    }

    /// Validates one message kin wrote; `methods` maps the ids the client used to methods.
    pub fn check_agent_message(
        &mut self,
        message: &Value,
        methods: &HashMap<String, String>,
    ) -> Result<(), String> {
        if message["jsonrpc"] != "2.0" {
            return Err("missing jsonrpc 2.0".into());
        }
        if let Some(method) = message["method"].as_str() {
            let role = if message.get("id").is_some() {
                "request"
            } else {
                "notification"
            };
            // Protocol-level messages (`$/cancel_request`) may go either way.
            let def = self
                .by_method
                .get(&(format!("client:{role}"), method.to_owned()))
                .or_else(|| {
                    self.by_method
                        .get(&(format!("protocol:{role}"), method.to_owned()))
                })
                .cloned()
                .ok_or_else(|| format!("kin sent unknown {role} {method}"))?;
            return self.check(&def, &message["params"]);
        }
        if let Some(error) = message.get("error") {
            return self.check("Error", error);
        }
        let id = message["id"].to_string();
        let method = methods
            .get(&id)
            .ok_or_else(|| format!("answer to unknown id {id}"))?;
        let def = self
            .by_method
            .get(&("agent:response".to_owned(), method.clone()))
            .cloned()
            .ok_or_else(|| format!("no response schema for {method}"))?;
        self.check(&def, &message["result"])
    }
}

/// The session-log schemas in `protocol/schemas/events/`.
pub struct EventSchemas {
    by_file: HashMap<String, Validator>,
}

impl EventSchemas {
    pub fn load() -> Self {
        let dir = repo().join("protocol/schemas/events");
        let mut by_file = HashMap::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let validator = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            by_file.insert(name, validator);
        }
        Self { by_file }
    }

    /// Validates every line of a log kin wrote (header, then events).
    pub fn check_log(&self, text: &str) -> Result<(), String> {
        for (number, line) in text.lines().enumerate() {
            let value: Value =
                serde_json::from_str(line).map_err(|e| format!("line {}: {e}", number + 1))?;
            let schema = if number == 0 {
                "header".to_owned()
            } else {
                let kind = value["type"].as_str().unwrap_or_default().replace('/', ".");
                if self.by_file.contains_key(&kind) {
                    kind
                } else {
                    return Err(format!(
                        "line {}: kin wrote an event type with no schema: {kind}",
                        number + 1
                    ));
                }
            };
            let errors: Vec<String> = self.by_file[&schema]
                .iter_errors(&value)
                .map(|e| format!("{e} at {}", e.instance_path))
                .collect();
            if !errors.is_empty() {
                return Err(format!(
                    "line {} ({schema}): {}",
                    number + 1,
                    errors.join("; ")
                ));
            }
        }
        Ok(())
    }
}

/// What one scenario run produced, normalized.
pub struct Outcome {
    pub raw_stdout: Vec<String>,
    pub stdout: Vec<String>,
    pub logs: Vec<Vec<String>>,
    pub raw_logs: Vec<String>,
    pub stderr: String,
    /// Client request id -> method, for schema checks.
    pub methods: HashMap<String, String>,
}

/// Environment variables that configure kin's model; tests that start kin clear them so a
/// developer's own settings never leak in.
pub const MODEL_ENV: &[&str] = &[
    "KIN_MODEL",
    "KIN_BASE_URL",
    "KIN_API_KEY",
    "KIN_CONNECT_TIMEOUT",
    "KIN_STALL_TIMEOUT",
    "KIN_RETRIES",
    "KIN_PASS_ENV",
    "DEEPSEEK_API_KEY",
    "OPENAI_API_KEY",
];

/// Where the model of a scenario run comes from.
pub enum ModelSource<'a> {
    /// `kin acp --replay DIR`.
    Replay(&'a Path),
    /// `kin acp` on its configured model, with this extra environment (recording).
    Live(Vec<(String, String)>),
}

/// Plays `input` against `kin acp --replay replay_dir` in fresh temporary directories.
pub async fn play(replay_dir: &Path, input: &Input) -> Outcome {
    play_with(ModelSource::Replay(replay_dir), input).await
}

/// Plays `input` against `kin acp` with the given model, in fresh temporary directories.
pub async fn play_with(source: ModelSource<'_>, input: &Input) -> Outcome {
    let root = tempfile::tempdir().unwrap();
    let (home, cwd) = (root.path().join("home"), root.path().join("workspace"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let (replay_dir, env) = match source {
        ModelSource::Replay(dir) => (Some(dir.to_owned()), Vec::new()),
        ModelSource::Live(env) => (None, env),
    };
    let label = replay_dir
        .as_ref()
        .map_or_else(|| "(live model)".to_owned(), |d| d.display().to_string());
    let options = RunOptions {
        binary: kin_binary(),
        replay_dir,
        env,
        home: home.clone(),
        cwd: cwd.clone(),
    };
    let mut methods = HashMap::new();
    let runner = Runner::start(&options, |event| {
        if let RunEvent::Sent(message) = event {
            if let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) {
                methods.insert(id.to_string(), method.to_owned());
            }
        }
    })
    .unwrap();
    let (raw_stdout, stderr) = runner
        .run(input)
        .await
        .unwrap_or_else(|e| panic!("scenario {label} failed: {e}"));
    let harvested = harvest_logs(&home, &raw_stdout).unwrap();
    let mut normalizer = Normalizer::new(&cwd, &home);
    // Session ids are numbered by creation order, whichever the output names first.
    normalizer.number_first(harvested.iter().map(|(id, _)| id.as_str()));
    let stdout = raw_stdout
        .iter()
        .map(|l| normalizer.stdout_line(l))
        .collect();
    let logs = harvested
        .iter()
        .map(|(_, text)| normalizer.log(text))
        .collect();
    let raw_logs = harvested.into_iter().map(|(_, text)| text).collect();
    Outcome {
        raw_stdout,
        stdout,
        logs,
        raw_logs,
        stderr,
        methods,
    }
}

pub fn read_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| {
            t.lines()
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `session.jsonl` for the first session, `session.N.jsonl` for the others.
pub fn log_file(dir: &Path, index: usize) -> PathBuf {
    match index {
        0 => dir.join("session.jsonl"),
        n => dir.join(format!("session.{n}.jsonl")),
    }
}

/// The first difference between two line lists, for a readable failure.
pub fn diff(what: &str, expected: &[String], actual: &[String]) -> Option<String> {
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        if e != a {
            return Some(format!(
                "{what} line {}:\n  expected {e}\n  actual   {a}",
                i + 1
            ));
        }
    }
    (expected.len() != actual.len()).then(|| {
        format!(
            "{what}: expected {} lines, got {} (first extra: {:?})",
            expected.len(),
            actual.len(),
            actual.get(expected.len()).or(expected.get(actual.len()))
        )
    })
}

/// Writes a run's stdout and logs as the scenario's expectations (refresh and record), and
/// removes stale `session.N.jsonl` files.
/// The stdout expectation is kept as it is when the run differs from it only in the order
/// between streams that is free (see [`streams`]): a background child's updates interleave
/// with its parent's differently from run to run, and a refresh must not rewrite the file
/// each time.
pub fn write_expectations(dir: &Path, outcome: &Outcome) {
    let stdout = dir.join("stdout.expected.jsonl");
    if streams(&read_lines(&stdout)) != streams(&outcome.stdout) {
        let mut text = outcome.stdout.join("\n");
        text.push('\n');
        std::fs::write(&stdout, text).unwrap();
    }
    for n in outcome.logs.len().max(1).. {
        if std::fs::remove_file(log_file(dir, n)).is_err() {
            break;
        }
    }
    for (i, log) in outcome.logs.iter().enumerate() {
        // A recording in the reference's newer layout stays in it.
        let log = in_layout_of(&read_lines(&log_file(dir, i)), log);
        std::fs::write(log_file(dir, i), log.join("\n") + "\n").unwrap();
    }
}

/// Splits normalized stdout into streams that keep their own order: each tool call's updates
/// and permission asks under `<session> call <id>`, each child session's other
/// `session/update` notifications (with the parent's `subagent_update`s about that child)
/// under the child's id, everything else (the client's own sessions, responses, requests)
/// under "". Background children and sibling calls run side by side, so only the order
/// between streams is free.
fn streams(lines: &[String]) -> BTreeMap<String, Vec<String>> {
    let parsed: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or(Value::Null))
        .collect();
    let subject = |message: &Value| -> Option<String> {
        if message.get("method")?.as_str()? != "session/update" {
            return None;
        }
        let update = message.pointer("/params/update")?;
        let id = if update.get("sessionUpdate")?.as_str()? == "subagent_update" {
            update.get("sessionId")?
        } else {
            message.pointer("/params/sessionId")?
        };
        Some(id.as_str()?.to_owned())
    };
    let children: HashSet<String> = parsed
        .iter()
        .filter(|m| m.pointer("/params/update/sessionUpdate") == Some(&json!("subagent_update")))
        .filter_map(|m| Some(m.pointer("/params/update/sessionId")?.as_str()?.to_owned()))
        .collect();
    // A call's progress and end, and the permission asks it makes, in a stream of its own:
    // sibling calls run side by side and end in any order.
    let call = |message: &Value| -> Option<String> {
        let (session, id) = match message.get("method")?.as_str()? {
            "session/update" => {
                let update = message.pointer("/params/update")?;
                if update.get("sessionUpdate")?.as_str()? != "tool_call_update" {
                    return None;
                }
                (
                    message.pointer("/params/sessionId")?,
                    update.get("toolCallId")?,
                )
            }
            "session/request_permission" => (
                message.pointer("/params/sessionId")?,
                message.pointer("/params/toolCall/toolCallId")?,
            ),
            _ => return None,
        };
        Some(format!("{} call {}", session.as_str()?, id.as_str()?))
    };
    let mut streams = BTreeMap::<String, Vec<String>>::new();
    for (line, message) in lines.iter().zip(&parsed) {
        let key = call(message)
            .or_else(|| subject(message).filter(|id| children.contains(id)))
            .unwrap_or_default();
        streams.entry(key).or_default().push(line.clone());
    }
    streams
}

/// Every difference between a run and the scenario's recorded expectations.
pub fn compare_with_recording(name: &str, dir: &Path, outcome: &Outcome) -> Vec<String> {
    let mut failures = Vec::new();
    let expected = read_lines(&dir.join("stdout.expected.jsonl"));
    let (expected, actual) = (streams(&expected), streams(&outcome.stdout));
    let keys: BTreeSet<&String> = expected.keys().chain(actual.keys()).collect();
    for key in keys {
        let what = match key.as_str() {
            "" => format!("{name}: stdout"),
            call if call.contains(" call ") => format!("{name}: stdout of session {call}"),
            child => format!("{name}: stdout of child session {child}"),
        };
        let none = Vec::new();
        let (e, a) = (
            expected.get(key).unwrap_or(&none),
            actual.get(key).unwrap_or(&none),
        );
        failures.extend(diff(&what, e, a));
    }
    let expected_logs = (0..)
        .map(|i| log_file(dir, i))
        .take_while(|p| p.is_file())
        .count();
    if expected_logs != outcome.logs.len().max(1) {
        failures.push(format!(
            "{name}: expected {expected_logs} session logs, kin wrote {}",
            outcome.logs.len()
        ));
    }
    for (i, log) in outcome.logs.iter().enumerate() {
        let expected = read_lines(&log_file(dir, i));
        failures.extend(diff(
            &format!("{name}: {}", log_file(dir, i).display()),
            &expected,
            &in_layout_of(&expected, log),
        ));
    }
    failures
}

/// Whether a recorded log is in the reference's newer layout: event lines without `seq`
/// (packed rows without `seq0`).
fn is_newer_layout(lines: &[String]) -> bool {
    lines
        .get(1)
        .is_some_and(|line| !line.contains("\"seq\":") && !line.contains("\"seq0\":"))
}

/// The lines kin wrote (`log`), as the recording `recorded` lays them out: in the newer
/// layout, without `seq`/`time` and `seq0`/`time0` (kin always writes them).
pub fn in_layout_of(recorded: &[String], log: &[String]) -> Vec<String> {
    if !is_newer_layout(recorded) {
        return log.to_vec();
    }
    log.iter()
        .enumerate()
        .map(|(i, line)| {
            let Ok(Value::Object(mut event)) = serde_json::from_str::<Value>(line) else {
                return line.clone();
            };
            if i == 0 {
                return line.clone();
            }
            for key in ["seq", "time", "seq0", "time0"] {
                event.shift_remove(key);
            }
            Value::Object(event).to_string()
        })
        .collect()
}

pub fn read_input(dir: &Path) -> Input {
    let path = dir.join("input.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn snapshot_dir(name: &str) -> PathBuf {
    repo().join("snapshots").join(name)
}

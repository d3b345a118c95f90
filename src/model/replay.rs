//! The replay model: serves recorded `assistant/chunk` events back as model output.
//!
//! A scenario directory holds `session.jsonl` (the primary session) and `session.1.jsonl`,
//! `session.2.jsonl`, ... (further sessions, in creation order). Each file becomes one script:
//! its chunks grouped by (turn, step), one group per model call. Live sessions are bound to
//! scripts in the order they are created in this process (children of one step are created
//! in the model's call order before any runs, so concurrent children that reach the model in
//! any order still get their own scripts); a session kin did not report created is bound, at
//! its first call, to the next free script that has calls. A group that never finished was cut off
//! while recording: if its turn ended in an error, replay fails the call with that error;
//! otherwise it streams the recorded chunks and then waits until the caller cancels.
//!
//! The model is reported under the provider and model names of the first recorded
//! `assistant/message` of the primary log (`replay` when there is none), so a scenario recorded
//! against a real model replays to the same log.
//!
//! Recorded logs are normalized: a UUID the model echoed (a subagent id it got from a tool)
//! reads `{{id:N}}` in the recorded tool-call arguments. Replay learns what each placeholder
//! stands for in this run by matching the recorded tool results against the live ones in the
//! request, and writes the live value into the arguments it streams.
//!
//! An optional `replay.override.json` replaces or patches the primary script (reference format:
//! a bare list of entries, or `{"patches":[{"at":N,"entry":{...}}]}`; entries are
//! `{"kind":"chunks","chunks":[...]}`, `{"kind":"throw","chunks":[...],"message":"..."}` and
//! `{"kind":"hang","readyFile":"..."}`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures::stream::{self, StreamExt};
use serde::Deserialize;

use super::{Chunk, ChunkStream, Model, ModelError, ModelRequest};
use crate::session::{parse_log, EventBody, LoadedSession, StoreError, TurnEndReason};
use crate::sync::lock;

/// Why a recording could not be loaded for replay.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The directory does not exist.
    #[error("replay directory {0} does not exist")]
    MissingDir(PathBuf),
    /// The path is not a directory.
    #[error("replay path {0} is not a directory")]
    NotADir(PathBuf),
    /// The directory has no `session.jsonl`.
    #[error("replay directory {0} has no session.jsonl")]
    MissingPrimary(PathBuf),
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A recorded log could not be read.
    #[error(transparent)]
    Log(#[from] StoreError),
    /// An override file is not valid.
    #[error("{path}: bad override file: {reason}")]
    Override {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// One recorded model call.
#[derive(Debug, Clone, PartialEq)]
enum Entry {
    /// A complete call, ending in a `finish` chunk.
    Chunks(Vec<Chunk>),
    /// A call cut off by cancellation: stream these, then wait for the caller to cancel.
    Hang {
        chunks: Vec<Chunk>,
        ready_file: Option<String>,
    },
    /// A call that failed: stream these, then fail with `message`.
    Throw { chunks: Vec<Chunk>, message: String },
}

#[derive(Debug)]
struct Script {
    name: String,
    entries: Vec<Entry>,
    cursor: usize,
    /// The recorded tool-result texts that hold `{{id:N}}` placeholders.
    templates: Vec<String>,
}

#[derive(Debug, Default)]
struct Bindings {
    scripts: Vec<Script>,
    by_session: HashMap<String, usize>,
    /// The script the next created session is bound to (or the first free one after it).
    next_created: usize,
}

/// A model that answers from recorded session logs, one script per session.
#[derive(Debug)]
pub struct ReplayModel {
    state: Mutex<Bindings>,
    provider: String,
    name: String,
}

impl ReplayModel {
    /// Loads the scripts of a scenario directory.
    pub fn from_dir(dir: &Path) -> Result<Self, ReplayError> {
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(ReplayError::NotADir(dir.to_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ReplayError::MissingDir(dir.to_owned()))
            }
            Err(source) => {
                return Err(ReplayError::Io {
                    path: dir.to_owned(),
                    source,
                })
            }
        }
        let primary = dir.join("session.jsonl");
        if !primary.is_file() {
            return Err(ReplayError::MissingPrimary(dir.to_owned()));
        }
        let mut files = vec![primary];
        for n in 1.. {
            let path = dir.join(format!("session.{n}.jsonl"));
            if !path.is_file() {
                break;
            }
            files.push(path);
        }
        let mut scripts = Vec::new();
        let mut source = None;
        for path in files {
            let bytes = std::fs::read(&path).map_err(|source| ReplayError::Io {
                path: path.clone(),
                source,
            })?;
            let log = parse_log(&path, &bytes)?;
            source = source.or_else(|| recorded_source(&log));
            scripts.push(Script {
                name: file_name(&path),
                entries: entries_from_log(&log),
                cursor: 0,
                templates: templates_from_log(&log),
            });
        }
        let override_path = dir.join("replay.override.json");
        if override_path.is_file() {
            apply_override(&override_path, &mut scripts[0].entries)?;
        }
        Ok(Self::from_scripts(scripts, source))
    }

    /// One script per log, in binding order.
    #[cfg(test)]
    pub(crate) fn from_logs(logs: &[(String, LoadedSession)]) -> Self {
        let source = logs.first().and_then(|(_, log)| recorded_source(log));
        Self::from_scripts(
            logs.iter()
                .map(|(name, log)| Script {
                    name: name.clone(),
                    entries: entries_from_log(log),
                    cursor: 0,
                    templates: templates_from_log(log),
                })
                .collect(),
            source,
        )
    }

    fn from_scripts(scripts: Vec<Script>, source: Option<(String, String)>) -> Self {
        let (provider, name) = source.unwrap_or_else(|| ("replay".into(), "replay".into()));
        Self {
            state: Mutex::new(Bindings {
                scripts,
                by_session: HashMap::new(),
                next_created: 0,
            }),
            provider,
            name,
        }
    }

    /// Scripts not fully consumed, as `name: used/total` (empty when all were).
    #[cfg(test)]
    pub(crate) fn unconsumed(&self) -> Vec<String> {
        let state = lock(&self.state);
        state
            .scripts
            .iter()
            .filter(|s| s.cursor < s.entries.len())
            .map(|s| format!("{}: {}/{}", s.name, s.cursor, s.entries.len()))
            .collect()
    }

    fn next_entry(&self, request: &ModelRequest) -> Result<Entry, ModelError> {
        let session_id = request.session_id.as_str();
        let mut state = lock(&self.state);
        let index = match state.by_session.get(session_id) {
            Some(&index) => index,
            None => {
                // The next script nobody holds; scripts of sessions that never called the
                // model (no entries) are skipped.
                let taken: std::collections::HashSet<usize> =
                    state.by_session.values().copied().collect();
                let free = (0..state.scripts.len())
                    .find(|i| !taken.contains(i) && !state.scripts[*i].entries.is_empty());
                let Some(index) = free else {
                    return Err(ModelError::Replay(format!(
                        "session {session_id} is session #{} to call the model, but the scenario recorded only {}",
                        taken.len() + 1,
                        state.scripts.iter().filter(|s| !s.entries.is_empty()).count()
                    )));
                };
                state.by_session.insert(session_id.to_owned(), index);
                index
            }
        };
        let script = &mut state.scripts[index];
        let Some(entry) = script.entries.get(script.cursor).cloned() else {
            return Err(ModelError::Replay(format!(
                "session {session_id} made model call #{} but {} recorded only {}",
                script.cursor + 1,
                script.name,
                script.entries.len()
            )));
        };
        script.cursor += 1;
        Ok(fill_placeholders(entry, &script.templates, request))
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl Model for ReplayModel {
    fn provider(&self) -> String {
        self.provider.clone()
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn session_created(&self, id: &str) {
        let mut state = lock(&self.state);
        if state.by_session.contains_key(id) {
            return;
        }
        let taken: std::collections::HashSet<usize> = state.by_session.values().copied().collect();
        let free = (state.next_created..state.scripts.len()).find(|i| !taken.contains(i));
        if let Some(index) = free {
            state.by_session.insert(id.to_owned(), index);
            state.next_created = index + 1;
        }
    }

    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let entry = match self.next_entry(&request) {
            Ok(entry) => entry,
            Err(error) => return Box::pin(stream::once(std::future::ready(Err(error)))),
        };
        match entry {
            Entry::Chunks(chunks) => Box::pin(stream::iter(chunks.into_iter().map(Ok))),
            Entry::Throw { chunks, message } => {
                Box::pin(stream::iter(chunks.into_iter().map(Ok)).chain(stream::once(
                    std::future::ready(Err(ModelError::Recorded(message))),
                )))
            }
            Entry::Hang { chunks, ready_file } => {
                if let (Some(file), Some(cwd)) = (ready_file, &request.cwd) {
                    let path = cwd.join(file);
                    if let Err(error) = std::fs::write(&path, b"") {
                        tracing::warn!(path = %path.display(), %error, "could not write the replay ready file");
                    }
                }
                Box::pin(stream::iter(chunks.into_iter().map(Ok)).chain(stream::pending()))
            }
        }
    }
}

/// (provider, model) of the first `assistant/message` a log recorded.
fn recorded_source(log: &LoadedSession) -> Option<(String, String)> {
    log.events.iter().find_map(|event| match &event.body {
        EventBody::AssistantMessage(message) => {
            let source = &message.message.source;
            let field = |key: &str| source.get(key).and_then(|v| v.as_str()).map(str::to_owned);
            field("provider").zip(field("model"))
        }
        _ => None,
    })
}

/// The texts of a log's tool results that carry `{{id:N}}` placeholders.
fn templates_from_log(log: &LoadedSession) -> Vec<String> {
    log.events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::ToolResult(result) => Some(result.text()),
            _ => None,
        })
        .filter(|text| text.contains("{{id:"))
        .collect()
}

/// Splits a template into its literal pieces and the placeholders between them.
fn split_template(template: &str) -> (Vec<&str>, Vec<&str>) {
    let (mut literals, mut holes) = (Vec::new(), Vec::new());
    let mut rest = template;
    while let Some(start) = rest.find("{{id:") {
        let Some(len) = rest[start..].find("}}") else {
            break;
        };
        literals.push(&rest[..start]);
        holes.push(&rest[start..start + len + 2]);
        rest = &rest[start + len + 2..];
    }
    literals.push(rest);
    (literals, holes)
}

/// What each placeholder of `template` stands for in `text`, if `text` has its shape.
fn match_template<'t>(template: &'t str, text: &str) -> Option<Vec<(&'t str, String)>> {
    let (literals, holes) = split_template(template);
    let mut rest = text.strip_prefix(literals[0])?;
    let mut found = Vec::new();
    for (hole, literal) in holes.iter().zip(&literals[1..]) {
        let end = if literal.is_empty() {
            rest.len()
        } else {
            rest.find(literal)?
        };
        let value = &rest[..end];
        if value.is_empty() || value.contains(char::is_whitespace) {
            return None;
        }
        found.push((*hole, value.to_owned()));
        rest = &rest[end + literal.len()..];
    }
    rest.is_empty().then_some(found)
}

/// Writes this run's values for the placeholders into the tool-call arguments of `entry`.
fn fill_placeholders(entry: Entry, templates: &[String], request: &ModelRequest) -> Entry {
    if templates.is_empty() {
        return entry;
    }
    let mut known: HashMap<&str, String> = HashMap::new();
    for item in request.history.iter() {
        if let crate::session::history::HistoryItem::ToolResult { text, .. } = item {
            for template in templates {
                for (hole, value) in match_template(template, text).unwrap_or_default() {
                    known.entry(hole).or_insert(value);
                }
            }
        }
    }
    let fill = |text: &mut String| {
        for (hole, value) in &known {
            if text.contains(hole) {
                *text = text.replace(hole, value);
            }
        }
    };
    let fill_all = |mut chunks: Vec<Chunk>| {
        for chunk in &mut chunks {
            match chunk {
                Chunk::ToolCallDelta {
                    arguments_delta, ..
                } => fill(arguments_delta),
                Chunk::BlockEnd {
                    block: crate::session::AssistantBlock::ToolCall { arguments, .. },
                    ..
                } => fill(arguments),
                _ => {}
            }
        }
        chunks
    };
    match entry {
        Entry::Chunks(chunks) => Entry::Chunks(fill_all(chunks)),
        Entry::Hang { chunks, ready_file } => Entry::Hang {
            chunks: fill_all(chunks),
            ready_file,
        },
        Entry::Throw { chunks, message } => Entry::Throw {
            chunks: fill_all(chunks),
            message,
        },
    }
}

/// Groups a log's own chunks (after any inherited seed) into one entry per model call.
fn entries_from_log(log: &LoadedSession) -> Vec<Entry> {
    let seed = log.header.seed_length.unwrap_or(0);
    let mut groups: Vec<((u32, u32), Vec<Chunk>)> = Vec::new();
    let mut turn_errors: HashMap<u32, String> = HashMap::new();
    for event in log.events.iter().filter(|e| e.seq >= seed) {
        match &event.body {
            EventBody::AssistantChunk(c) => {
                let key = (c.turn, c.step);
                match groups.last_mut() {
                    Some((last, chunks)) if *last == key => chunks.push(c.chunk.clone()),
                    _ => groups.push((key, vec![c.chunk.clone()])),
                }
            }
            EventBody::TurnEnd(end) => {
                if let TurnEndReason::Error { message, .. } = &end.reason {
                    turn_errors.insert(
                        end.turn,
                        message
                            .clone()
                            .unwrap_or_else(|| "recorded model failure".into()),
                    );
                }
            }
            _ => {}
        }
    }
    groups
        .into_iter()
        .map(|((turn, _), chunks)| {
            let finished = chunks.iter().any(|c| matches!(c, Chunk::Finish { .. }));
            match (finished, turn_errors.get(&turn)) {
                (true, _) => Entry::Chunks(chunks),
                (false, Some(message)) => Entry::Throw {
                    chunks,
                    message: message.clone(),
                },
                (false, None) => Entry::Hang {
                    chunks,
                    ready_file: None,
                },
            }
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OverrideFile {
    Replace(Vec<OverrideEntry>),
    Patches { patches: Vec<Patch> },
}

#[derive(Deserialize)]
struct Patch {
    at: usize,
    entry: OverrideEntry,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
enum OverrideEntry {
    Chunks {
        chunks: Vec<Chunk>,
    },
    Throw {
        #[serde(default)]
        chunks: Vec<Chunk>,
        message: String,
    },
    #[serde(rename_all = "camelCase")]
    Hang {
        #[serde(default)]
        chunks: Vec<Chunk>,
        ready_file: Option<String>,
    },
}

impl From<OverrideEntry> for Entry {
    fn from(entry: OverrideEntry) -> Self {
        match entry {
            OverrideEntry::Chunks { chunks } => Entry::Chunks(chunks),
            OverrideEntry::Throw { chunks, message } => Entry::Throw { chunks, message },
            OverrideEntry::Hang { chunks, ready_file } => Entry::Hang { chunks, ready_file },
        }
    }
}

fn apply_override(path: &Path, entries: &mut Vec<Entry>) -> Result<(), ReplayError> {
    let bad = |reason: String| ReplayError::Override {
        path: path.to_owned(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let parsed: OverrideFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    match parsed {
        OverrideFile::Replace(list) => *entries = list.into_iter().map(Entry::from).collect(),
        OverrideFile::Patches { patches } => {
            let mut seen = std::collections::HashSet::new();
            for Patch { at, entry } in patches {
                if !seen.insert(at) {
                    return Err(bad(format!("two patches at index {at}")));
                }
                match at.cmp(&entries.len()) {
                    std::cmp::Ordering::Less => entries[at] = entry.into(),
                    std::cmp::Ordering::Equal => entries.push(entry.into()),
                    std::cmp::Ordering::Greater => {
                        return Err(bad(format!(
                            "patch at {at} is past the end of a {}-call script",
                            entries.len()
                        )))
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn log(lines: &[&str]) -> LoadedSession {
        let mut text = String::from(
            r#"{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}"#,
        );
        for line in lines {
            text.push('\n');
            text.push_str(line);
        }
        text.push('\n');
        parse_log(Path::new("test.jsonl"), text.as_bytes()).unwrap()
    }

    fn chunk(turn: u32, step: u32, chunk: &str) -> String {
        format!(
            r#"{{"type":"assistant/chunk","seq":{},"time":0,"data":{{"turn":{turn},"step":{step},"chunk":{chunk}}}}}"#,
            turn * 100 + step * 10 + chunk.len() as u32 % 10
        )
    }

    fn request(session: &str) -> ModelRequest {
        ModelRequest {
            session_id: session.into(),
            cwd: None,
            system: String::new(),
            preamble: String::new(),
            history: Default::default(),
            tools: Vec::new(),
            max_tokens: None,
            blobs: None,
        }
    }

    #[tokio::test]
    async fn binds_sessions_in_call_order_and_fails_loud_when_exhausted() {
        let text = r#"{"type":"text-delta","index":0,"text":"hi"}"#;
        let finish = r#"{"type":"finish","reason":{"kind":"stop"}}"#;
        let a = log(&[&chunk(1, 1, text), &chunk(1, 1, finish)]);
        let b = log(&[&chunk(1, 1, finish)]);
        let model = ReplayModel::from_logs(&[("a".into(), a), ("b".into(), b)]);
        let first: Vec<_> = model.stream(request("x")).collect().await;
        assert_eq!(first.len(), 2);
        let second: Vec<_> = model.stream(request("y")).collect().await;
        assert_eq!(second.len(), 1);
        assert!(model.unconsumed().is_empty());
        let extra: Vec<_> = model.stream(request("x")).collect().await;
        assert!(matches!(&extra[0], Err(ModelError::Replay(m)) if m.contains("recorded only 1")));
        let third: Vec<_> = model.stream(request("z")).collect().await;
        assert!(matches!(&third[0], Err(ModelError::Replay(m)) if m.contains("session #3")));
    }

    #[tokio::test]
    async fn created_sessions_take_scripts_in_creation_order_whoever_calls_first() {
        let finish = r#"{"type":"finish","reason":{"kind":"stop"}}"#;
        let text = |t: &str| format!(r#"{{"type":"text-delta","index":0,"text":"{t}"}}"#);
        let logs: Vec<(String, LoadedSession)> = ["root", "first", "second"]
            .iter()
            .map(|name| {
                let chunks = [chunk(1, 1, &text(name)), chunk(1, 1, finish)];
                (name.to_string(), log(&[&chunks[0], &chunks[1]]))
            })
            .collect();
        let model = ReplayModel::from_logs(&logs);
        for id in ["r", "a", "b"] {
            model.session_created(id);
        }
        // The second child reaches the model first: it still gets the second child's script.
        for (id, expected) in [("b", "second"), ("a", "first"), ("r", "root")] {
            let got: Vec<_> = model.stream(request(id)).collect().await;
            assert!(
                matches!(&got[0], Ok(Chunk::TextDelta { text, .. }) if text == expected),
                "{id}: {got:?}"
            );
        }
    }

    #[test]
    fn a_missing_replay_directory_is_named_as_missing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let error = ReplayModel::from_dir(&missing).unwrap_err();
        assert!(matches!(&error, ReplayError::MissingDir(p) if *p == missing));
        assert!(
            error.to_string().ends_with("nope does not exist"),
            "{error}"
        );
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let error = ReplayModel::from_dir(&file).unwrap_err();
        assert!(matches!(error, ReplayError::NotADir(_)));
        let error = ReplayModel::from_dir(dir.path()).unwrap_err();
        assert!(matches!(error, ReplayError::MissingPrimary(_)));
    }

    #[test]
    fn unfinished_groups_hang_or_throw_by_how_their_turn_ended() {
        let text = r#"{"type":"text-delta","index":0,"text":"hi"}"#;
        let cut = log(&[
            &chunk(1, 1, text),
            r#"{"type":"turn/end","seq":500,"time":0,"data":{"turn":1,"reason":{"kind":"aborted"}}}"#,
            &chunk(2, 1, text),
            r#"{"type":"turn/end","seq":501,"time":0,"data":{"turn":2,"reason":{"kind":"error","message":"boom"}}}"#,
        ]);
        let entries = entries_from_log(&cut);
        assert!(matches!(&entries[0], Entry::Hang { .. }));
        assert!(matches!(&entries[1], Entry::Throw { message, .. } if message == "boom"));
    }

    #[test]
    fn placeholders_are_learned_from_the_live_tool_results() {
        let template = "started subagent {{id:2}} as task subagent-1";
        assert_eq!(
            match_template(template, "started subagent abc-1 as task subagent-1"),
            Some(vec![("{{id:2}}", "abc-1".to_owned())])
        );
        assert_eq!(
            match_template(template, "started subagent abc-1 as task subagent-2"),
            None
        );
        assert_eq!(
            match_template("id {{id:3}}", "id xyz"),
            Some(vec![("{{id:3}}", "xyz".to_owned())])
        );
        assert_eq!(match_template("id {{id:3}}", "id two words"), None);
    }
}

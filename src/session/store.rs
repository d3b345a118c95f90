//! The on-disk store: one JSONL file per session under `<home>/sessions/`.
//!
//! Loading is tolerant of exactly one kind of damage, the torn last line a crash mid-write
//! leaves; anything else that does not parse is reported with file and line, never skipped.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::event::{parse_event_line, Event, EventBody, Header};
use super::log::SessionLog;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("session not found: {id}")]
    NotFound { id: String },
    #[error("invalid session id {id:?}: use letters, digits, '-', '_' and '.' only")]
    InvalidId { id: String },
    #[error("session already exists: {id}")]
    Exists { id: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}:{line}: corrupt session log line: {reason}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A session read from disk.
#[derive(Debug)]
pub struct LoadedSession {
    pub header: Header,
    pub events: Vec<Event>,
    /// Bytes of the file that hold complete lines; a torn tail lies beyond.
    pub(crate) valid_len: u64,
    /// The unterminated last line that did not parse, if the file ended with one.
    pub torn_tail: Option<Vec<u8>>,
}

impl LoadedSession {
    pub fn next_seq(&self) -> u64 {
        self.events.last().map_or(0, |event| event.seq + 1)
    }
}

/// What `session/list` needs about one stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub cwd: Option<String>,
    pub additional_directories: Vec<String>,
    pub title: Option<String>,
    pub updated_ms: u64,
    /// Full-precision modification time, for a stable newest-first order.
    pub updated_ns: u128,
    pub parent_session: Option<String>,
}

#[derive(Debug, Clone)]
pub struct SessionStore {
    dir: PathBuf,
}

impl SessionStore {
    /// The store under `home`. Its directory is made by the first [`SessionStore::create`],
    /// not here: starting kin writes nothing.
    pub fn open(home: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            dir: home.join("sessions"),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`; refuses ids that could escape the store directory.
    pub fn path(&self, id: &str) -> Result<PathBuf, StoreError> {
        let valid = !id.is_empty()
            && id.len() <= 128
            && !id.starts_with('.')
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !valid {
            return Err(StoreError::InvalidId { id: id.to_owned() });
        }
        Ok(self.dir.join(format!("{id}.jsonl")))
    }

    pub fn exists(&self, id: &str) -> bool {
        self.path(id).is_ok_and(|path| path.is_file())
    }

    /// Creates the file of a new session and writes its header.
    pub fn create(&self, header: &Header) -> Result<SessionLog, StoreError> {
        let path = self.path(&header.id)?;
        fs::create_dir_all(&self.dir).map_err(io_error(&self.dir))?;
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|source| match source.kind() {
                io::ErrorKind::AlreadyExists => StoreError::Exists {
                    id: header.id.clone(),
                },
                _ => StoreError::Io {
                    path: path.clone(),
                    source,
                },
            })?;
        let mut log = SessionLog::new(path, file, 0);
        log.write_header(header)?;
        // Handed to the OS now; made durable with the first turn's end (fsync per turn).
        log.flush()?;
        Ok(log)
    }

    /// Reads a whole session.
    pub fn load(&self, id: &str) -> Result<LoadedSession, StoreError> {
        let path = self.path(id)?;
        let bytes = fs::read(&path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => StoreError::NotFound { id: id.to_owned() },
            _ => StoreError::Io {
                path: path.clone(),
                source,
            },
        })?;
        parse_log(&path, &bytes)
    }

    /// Reads a session and reopens it for appending. A torn tail is cut off first (and kept
    /// beside the log as `<id>.jsonl.torn`), so new events never glue onto half a line.
    pub fn open_for_append(&self, id: &str) -> Result<(LoadedSession, SessionLog), StoreError> {
        let loaded = self.load(id)?;
        let path = self.path(id)?;
        if let Some(tail) = &loaded.torn_tail {
            let side = path.with_extension("jsonl.torn");
            fs::write(&side, tail).map_err(io_error(&side))?;
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io_error(&path))?;
            file.set_len(loaded.valid_len).map_err(io_error(&path))?;
            tracing::warn!(path = %path.display(), kept = %side.display(), "cut a torn last line off the session log");
        }
        let mut file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_error(&path))?;
        if needs_newline(&path, loaded.valid_len)? {
            file.write_all(b"\n").map_err(io_error(&path))?;
        }
        let log = SessionLog::new(path, file, loaded.next_seq());
        Ok((loaded, log))
    }

    /// Every stored session, newest first.
    pub fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            // No session was ever created.
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(io_error(&self.dir)(source)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|ext| ext != "jsonl") {
                continue;
            }
            match summarize(&path) {
                Ok(Some(summary)) => out.push(summary),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, "skipping an unreadable session in the listing")
                }
            }
        }
        out.sort_by(|a, b| b.updated_ns.cmp(&a.updated_ns).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// The lines of session `id`'s file that hold exactly `events` (its first events, one per
    /// line, as kin writes them), to copy a seed without re-encoding it. `None` when the file
    /// does not line up with them (e.g. a log written with packed rows): encode them instead.
    pub fn event_lines(&self, id: &str, events: &[Event]) -> Option<Vec<u8>> {
        let (first, last) = (events.first()?, events.last()?);
        let bytes = fs::read(self.path(id).ok()?).ok()?;
        let body_start = bytes.iter().position(|&b| b == b'\n')? + 1;
        let mut end = body_start;
        let mut last_line = (body_start, body_start);
        for _ in 0..events.len() {
            let line_end = end + bytes.get(end..)?.iter().position(|&b| b == b'\n')?;
            last_line = (end, line_end);
            end = line_end + 1;
        }
        let first_line_end = body_start + bytes[body_start..].iter().position(|&b| b == b'\n')?;
        let seq_of = |line: &[u8]| {
            let mut parsed = Vec::new();
            let text = std::str::from_utf8(line).ok()?;
            parse_event_line(text, &mut parsed).ok()?;
            (parsed.len() == 1).then(|| parsed[0].seq)
        };
        let lines_up = seq_of(&bytes[body_start..first_line_end]) == Some(first.seq)
            && seq_of(&bytes[last_line.0..last_line.1]) == Some(last.seq)
            && last.seq - first.seq + 1 == events.len() as u64;
        lines_up.then(|| bytes[body_start..end].to_vec())
    }

    /// Removes a session's file; `Ok(false)` if there was none.
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let path = self.path(id)?;
        let _ = fs::remove_file(path.with_extension("jsonl.torn"));
        match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(StoreError::Io { path, source }),
        }
    }
}

/// True when the file's last kept byte is not a newline (a complete last line that lost it).
fn needs_newline(path: &Path, valid_len: u64) -> Result<bool, StoreError> {
    use std::io::{Read, Seek, SeekFrom};
    if valid_len == 0 {
        return Ok(false);
    }
    let mut file = File::open(path).map_err(io_error(path))?;
    file.seek(SeekFrom::Start(valid_len - 1))
        .map_err(io_error(path))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last).map_err(io_error(path))?;
    Ok(last[0] != b'\n')
}

/// Parses a log's bytes: header, events, and the torn-tail rule.
pub fn parse_log(path: &Path, bytes: &[u8]) -> Result<LoadedSession, StoreError> {
    let corrupt = |line: usize, reason: String| StoreError::Corrupt {
        path: path.to_owned(),
        line,
        reason,
    };
    let mut header = None;
    let mut events = Vec::new();
    let mut offset = 0usize;
    let mut valid_len = 0u64;
    let mut torn_tail = None;
    let mut number = 0usize;
    while offset < bytes.len() {
        number += 1;
        let rest = &bytes[offset..];
        let (line, terminated) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => (&rest[..end], true),
            None => (rest, false),
        };
        offset += line.len() + usize::from(terminated);
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|text| parse_line(text, number, &mut header, &mut events));
        match parsed {
            Ok(()) => valid_len = offset as u64,
            Err(_) if !terminated && header.is_some() => {
                tracing::warn!(path = %path.display(), line = number, "dropping a torn last line");
                torn_tail = Some(line.to_vec());
            }
            Err(reason) => return Err(corrupt(number, reason)),
        }
    }
    let header = header.ok_or_else(|| corrupt(1, "the file has no header line".into()))?;
    Ok(LoadedSession {
        header,
        events,
        valid_len,
        torn_tail,
    })
}

fn parse_line(
    text: &str,
    number: usize,
    header: &mut Option<Header>,
    events: &mut Vec<Event>,
) -> Result<(), String> {
    let text = text.trim_end_matches('\r');
    if header.is_none() {
        let parsed: Header = serde_json::from_str(text).map_err(|e| format!("bad header: {e}"))?;
        if parsed.kind != Header::KIND || parsed.version != Header::VERSION {
            return Err(format!(
                "unsupported header (type {:?}, version {}); expected type \"session\" version 0",
                parsed.kind, parsed.version
            ));
        }
        *header = Some(parsed);
        return Ok(());
    }
    if text.trim().is_empty() {
        return Err(format!("line {number} is empty"));
    }
    parse_event_line(text, events).map_err(|e| e.to_string())
}

fn summarize(path: &Path) -> Result<Option<SessionSummary>, StoreError> {
    let bytes = fs::read(path).map_err(io_error(path))?;
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(header) = serde_json::from_slice::<Header>(first) else {
        return Ok(None);
    };
    let modified_ns = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(u128::from(header.created_at) * 1_000_000, |d| d.as_nanos());
    // The title is the last `session/title` event; only those lines are parsed.
    const NEEDLE: &[u8] = b"\"type\":\"session/title\"";
    let mut title = None;
    for line in bytes.split(|&b| b == b'\n') {
        if line.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
            let mut parsed = Vec::new();
            if let Ok(text) = std::str::from_utf8(line) {
                if parse_event_line(text, &mut parsed).is_ok() {
                    if let Some(EventBody::SessionTitle(t)) = parsed.pop().map(|e| e.body) {
                        title = Some(t.title);
                    }
                }
            }
        }
    }
    Ok(Some(SessionSummary {
        id: header.id,
        cwd: header.cwd,
        additional_directories: header.additional_directories,
        title,
        updated_ms: (modified_ns / 1_000_000) as u64,
        updated_ns: modified_ns,
        parent_session: header.parent_session,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{EventBody, StepRef};

    #[test]
    fn the_directory_is_made_by_the_first_session_not_by_open() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        assert!(!store.dir().exists());
        assert!(store.list().unwrap().is_empty());
        store
            .create(&Header::new("s1".into(), 1, "/w".into(), vec![]))
            .unwrap();
        assert_eq!(store.list().unwrap().len(), 1);
    }

    #[test]
    fn event_lines_are_the_files_own_lines_or_none_when_they_do_not_line_up() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        let header = Header::new("s1".into(), 1, "/w".into(), vec![]);
        let mut log = store.create(&header).unwrap();
        let events: Vec<Event> = (1..=3)
            .map(|step| {
                log.append(EventBody::StepStart(StepRef { turn: 1, step }), 7)
                    .unwrap()
            })
            .collect();
        log.flush().unwrap();
        let text = fs::read_to_string(store.path("s1").unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let two = store.event_lines("s1", &events[..2]).unwrap();
        assert_eq!(
            String::from_utf8(two).unwrap(),
            format!("{}\n{}\n", lines[1], lines[2])
        );

        // A log whose deltas are packed into one row has fewer lines than events.
        let packed = r#"{"type":"session","version":0,"id":"s2","createdAt":0,"delegationDepth":0}
{"type":"text-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}
{"type":"step/end","seq":2,"time":0,"data":{"turn":1,"step":1}}
"#;
        fs::write(store.path("s2").unwrap(), packed).unwrap();
        let loaded = store.load("s2").unwrap();
        assert_eq!(loaded.events.len(), 3);
        assert!(store.event_lines("s2", &loaded.events).is_none());
        assert!(store.event_lines("missing", &loaded.events).is_none());
    }
}

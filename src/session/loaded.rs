//! A session log's bytes read back: the header, the events, and what loading left out (a torn
//! last line, lines that do not parse). Knows nothing of where the file lives or who may write.

use std::io::BufRead;
use std::path::Path;

use super::error::StoreError;
use super::event::{Event, Header};
use super::line::parse_event_line_from;

/// A session read from disk.
#[derive(Debug)]
pub struct LoadedSession {
    /// The session's header.
    pub header: Header,
    /// The events that parsed, in order.
    pub events: Vec<Event>,
    /// Bytes of the file that hold complete lines; a torn tail lies beyond.
    pub(crate) valid_len: u64,
    /// The unterminated last line that did not parse, if the file ended with one.
    pub torn_tail: Option<Vec<u8>>,
    /// Complete lines after the header that did not parse: left out of `events`.
    pub set_aside: Vec<SetAsideLine>,
}

/// A line of a log that loading left out because it does not parse.
#[derive(Debug, Clone, PartialEq)]
pub struct SetAsideLine {
    /// 1-based line number in the file.
    pub(crate) line: usize,
    /// Why it does not parse.
    pub reason: String,
    pub(crate) bytes: Vec<u8>,
}

impl LoadedSession {
    pub(crate) fn next_seq(&self) -> u64 {
        self.events.last().map_or(0, |event| event.seq + 1)
    }
}

/// Parses a log's bytes: header, events, the torn-tail rule, and lines set aside.
pub fn parse_log(path: &Path, bytes: &[u8]) -> Result<LoadedSession, StoreError> {
    // One event per line (more only for packed rows): sized once, as events are large and a
    // long log has many.
    let mut events = Vec::with_capacity(memchr::memchr_iter(b'\n', bytes).count());
    let read = read_log(path, bytes, |event| events.push(event))?;
    Ok(read.into_loaded(events))
}

/// What reading a log found besides its events.
#[derive(Debug)]
pub struct LogRead {
    /// The session's header.
    pub header: Header,
    pub(crate) valid_len: u64,
    /// The unterminated last line that did not parse, if the file ended with one.
    pub torn_tail: Option<Vec<u8>>,
    /// Complete lines after the header that did not parse.
    pub set_aside: Vec<SetAsideLine>,
}

impl LogRead {
    pub(crate) fn into_loaded(self, events: Vec<Event>) -> LoadedSession {
        LoadedSession {
            header: self.header,
            events,
            valid_len: self.valid_len,
            torn_tail: self.torn_tail,
            set_aside: self.set_aside,
        }
    }
}

/// Reads a log line by line from `reader`, handing each event to `on_event` in order as soon
/// as its line is read: only one line is held at a time. Same rules as [`parse_log`].
pub fn read_log(
    path: &Path,
    reader: impl BufRead,
    mut on_event: impl FnMut(Event),
) -> Result<LogRead, StoreError> {
    read_log_at(path, reader, |_, _| false, |event, _| on_event(event))
}

/// As [`read_log`], handing each event with the offset in bytes where its line ends, and
/// leaving unparsed (as if it loaded) each complete line after the header that `skip`, given
/// the line and that offset, says is not needed.
pub(crate) fn read_log_at(
    path: &Path,
    mut reader: impl BufRead,
    mut skip: impl FnMut(&[u8], u64) -> bool,
    mut on_event: impl FnMut(Event, u64),
) -> Result<LogRead, StoreError> {
    let corrupt = |line: usize, reason: String| StoreError::Corrupt {
        path: path.to_owned(),
        line,
        reason,
    };
    let mut header = None;
    let mut parsed = Vec::new();
    let mut line = Vec::new();
    let mut offset = 0u64;
    let mut valid_len = 0u64;
    let mut torn_tail = None;
    let mut set_aside = Vec::new();
    let mut number = 0usize;
    // What an event line without `seq` is numbered (the reference's newer layout).
    let mut next_seq = 0u64;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| StoreError::Io {
                op: "reading the session log",
                path: path.to_owned(),
                source,
            })?;
        if read == 0 {
            break;
        }
        number += 1;
        offset += read as u64;
        let terminated = line.last() == Some(&b'\n');
        if terminated {
            line.pop();
            if header.is_some() && skip(&line, offset) {
                valid_len = offset;
                continue;
            }
        }
        let result = std::str::from_utf8(&line)
            .map_err(|e| e.to_string())
            .and_then(|text| parse_line(text, number, next_seq, &mut header, &mut parsed));
        match result {
            Ok(()) => {
                valid_len = offset;
                if let Some(last) = parsed.last() {
                    next_seq = last.seq + 1;
                }
                parsed.drain(..).for_each(|event| on_event(event, offset));
            }
            Err(_) if !terminated && header.is_some() => {
                tracing::warn!(path = %path.display(), line = number, "dropping a torn last line");
                torn_tail = Some(line.clone());
            }
            Err(reason) if header.is_some() => {
                tracing::warn!(path = %path.display(), line = number, %reason, "setting aside a corrupt session log line");
                valid_len = offset;
                set_aside.push(SetAsideLine {
                    line: number,
                    reason,
                    bytes: line.clone(),
                });
            }
            Err(reason) => return Err(corrupt(number, reason)),
        }
    }
    let header = header.ok_or_else(|| corrupt(1, "the file has no header line".into()))?;
    Ok(LogRead {
        header,
        valid_len,
        torn_tail,
        set_aside,
    })
}

fn parse_line(
    text: &str,
    number: usize,
    next_seq: u64,
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
    parse_event_line_from(text, next_seq, events).map_err(|e| e.to_string())
}

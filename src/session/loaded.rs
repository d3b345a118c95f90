//! A session log's bytes read back: the header, the events, and what loading left out (a torn
//! last line, lines that do not parse). Knows nothing of where the file lives or who may write.

use std::path::Path;

use super::error::StoreError;
use super::event::{Event, Header};
use super::line::parse_event_line;

/// A session read from disk.
#[derive(Debug)]
pub struct LoadedSession {
    pub header: Header,
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
    pub line: usize,
    pub reason: String,
    pub bytes: Vec<u8>,
}

impl LoadedSession {
    pub fn next_seq(&self) -> u64 {
        self.events.last().map_or(0, |event| event.seq + 1)
    }
}

/// Parses a log's bytes: header, events, the torn-tail rule, and lines set aside.
pub fn parse_log(path: &Path, bytes: &[u8]) -> Result<LoadedSession, StoreError> {
    let corrupt = |line: usize, reason: String| StoreError::Corrupt {
        path: path.to_owned(),
        line,
        reason,
    };
    let mut header = None;
    // One event per line (more only for packed rows): sized once, as events are large and a
    // long log has many.
    let mut events = Vec::with_capacity(memchr::memchr_iter(b'\n', bytes).count());
    let mut offset = 0usize;
    let mut valid_len = 0u64;
    let mut torn_tail = None;
    let mut set_aside = Vec::new();
    let mut number = 0usize;
    while offset < bytes.len() {
        number += 1;
        let rest = &bytes[offset..];
        let (line, terminated) = match memchr::memchr(b'\n', rest) {
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
            Err(reason) if header.is_some() => {
                tracing::warn!(path = %path.display(), line = number, %reason, "setting aside a corrupt session log line");
                valid_len = offset as u64;
                set_aside.push(SetAsideLine {
                    line: number,
                    reason,
                    bytes: line.to_vec(),
                });
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
        set_aside,
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

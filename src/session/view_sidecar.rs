//! `<id>.jsonl.view` beside a log: what opening it kept of the events before its compaction
//! cut (`view.rs`), so the next open of the same cut reads only the log after it. A cache:
//! written under the session's lock, checked against the log (the cut's offset and its line)
//! before use, and read past (the log read whole) when missing, stale or damaged.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::line::parse_event_line;

/// The longest cut line looked for when writing (a `turn/end` or the header is short).
const MAX_CUT_LINE: u64 = 64 * 1024;

/// The sidecar format written now; a sidecar of another (or none, the first) is stale.
/// 1: the turns before the cut are folded (`view_turns.rs`).
const VERSION: u32 = 1;

/// The sidecar's first line; the kept events follow, one a line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    version: u32,
    /// The offset where the part after the cut begins.
    cut: u64,
    /// The log's line that ends there, without its newline.
    cut_line: String,
}

pub(crate) fn path_of(log: &Path) -> PathBuf {
    log.with_extension("jsonl.view")
}

/// The line of `file` that ends (with its newline) at `cut`.
fn cut_line(file: &mut File, cut: u64) -> io::Result<Option<Vec<u8>>> {
    let start = cut.saturating_sub(MAX_CUT_LINE);
    let mut before = vec![0; usize::try_from(cut - start).unwrap_or(0)];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut before)?;
    if before.pop() != Some(b'\n') {
        return Ok(None);
    }
    Ok(match memchr::memrchr(b'\n', &before) {
        Some(at) => Some(before[at + 1..].to_vec()),
        None if start == 0 => Some(before),
        None => None,
    })
}

/// The events kept before `cut`, if the sidecar of the log at `path` was written for this cut
/// of this log.
pub(crate) fn read(path: &Path, file: &mut File, cut: u64) -> Option<Vec<Event>> {
    let bytes = fs::read(path_of(path)).ok()?;
    let mut lines = bytes.split(|&b| b == b'\n');
    let head: Head = serde_json::from_slice(lines.next()?).ok()?;
    if head.version != VERSION
        || head.cut != cut
        || cut_line(file, cut).ok()?? != head.cut_line.as_bytes()
    {
        return None;
    }
    let mut events = Vec::new();
    for line in lines.filter(|line| !line.is_empty()) {
        parse_event_line(std::str::from_utf8(line).ok()?, &mut events).ok()?;
    }
    Some(events)
}

/// Records `events`, kept before `cut` of the log at `path` (its lock held).
pub(crate) fn write(path: &Path, file: &mut File, cut: u64, events: &[Event]) -> io::Result<()> {
    let Some(line) = cut_line(file, cut)? else {
        return Ok(());
    };
    let Ok(cut_line) = String::from_utf8(line) else {
        return Ok(());
    };
    let head = Head {
        version: VERSION,
        cut,
        cut_line,
    };
    let mut bytes = serde_json::to_vec(&head)?;
    bytes.push(b'\n');
    for event in events {
        serde_json::to_writer(&mut bytes, event)?;
        bytes.push(b'\n');
    }
    let side = path_of(path);
    let temporary = side.with_extension("view.tmp");
    fs::write(&temporary, bytes)?;
    fs::rename(&temporary, &side)
}

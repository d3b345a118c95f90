//! The index file's records and how they are written: appended a line each, or the whole file
//! rewritten in listing order behind a header line that says how long the sorted part is, so
//! a fresh reader can serve the first pages from its start (see `index.rs`).

use std::cmp::Reverse;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::child::ChildInfo;
use super::summary::SessionSummary;

/// Where a listing page starts: after the session with this sort key (newest first, then by
/// id). A key names a place in the order, not an offset, so it stays valid while sessions
/// are created or deleted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ListCursor {
    newest_first: Reverse<u64>,
    pub(crate) id: String,
}

impl ListCursor {
    /// The place of the session `id` last modified at `updated_ns`.
    pub(crate) fn new(updated_ns: u64, id: String) -> Self {
        Self {
            newest_first: Reverse(updated_ns),
            id,
        }
    }
}

/// One line of the index: a session's entry, its removal, a directory stamp, or the header of
/// a sorted index.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    /// Empty on a stamp record and on the header.
    #[serde(default)]
    pub(crate) id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) deleted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) additional_directories: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) parent_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// The session file's modification time, ns since the epoch.
    #[serde(default)]
    pub(crate) updated_ns: u64,
    /// For a child session, what `list_agents` shows. Records written before this field
    /// existed lack it: their children are summarized from their files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) child: Option<ChildInfo>,
    /// The header's `startedOver` (`"mcp"`). Records written before this field existed lack
    /// it and read as `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) started_over: Option<String>,
    /// On a stamp record only: the directory's modification time (ns) when its files were
    /// last found to match the records before this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) dir_modified_ns: Option<u64>,
    /// On the header only (the first line of a rewritten index): the length in bytes of the
    /// records after it that are in listing order. The header is also a removal of the empty
    /// id, so a kin that does not know it reads it as a no-op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) sorted_bytes: Option<u64>,
    /// On the header only: when it was written (ns since the epoch), which tells two
    /// rewrites of the same length apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rewritten_ns: Option<u64>,
}

impl Record {
    pub(crate) fn from_summary(summary: SessionSummary) -> Self {
        Self {
            id: summary.id,
            cwd: summary.cwd,
            additional_directories: summary.additional_directories,
            parent_session: summary.parent_session,
            title: summary.title,
            updated_ns: u64::try_from(summary.updated_ns).unwrap_or(u64::MAX),
            child: summary.child,
            started_over: summary.started_over,
            ..Self::default()
        }
    }

    /// A session's entry as its header gives it (the time and title set later).
    pub(crate) fn entry(header: &super::event::Header, title: Option<String>) -> Self {
        Self {
            id: header.id.clone(),
            cwd: header.cwd.clone(),
            additional_directories: header.additional_directories.clone(),
            parent_session: header.parent_session.clone(),
            title,
            started_over: header.started_over.clone(),
            ..Self::default()
        }
    }

    pub(crate) fn removal(id: String) -> Self {
        Self {
            id,
            deleted: true,
            ..Self::default()
        }
    }

    pub(crate) fn stamp(dir_modified_ns: u64) -> Self {
        Self {
            dir_modified_ns: Some(dir_modified_ns),
            ..Self::default()
        }
    }

    pub(crate) fn cursor(&self) -> ListCursor {
        ListCursor::new(self.updated_ns, self.id.clone())
    }

    pub(crate) fn into_summary(self) -> SessionSummary {
        SessionSummary {
            id: self.id,
            cwd: self.cwd,
            additional_directories: self.additional_directories,
            title: self.title,
            updated_ms: self.updated_ns / 1_000_000,
            updated_ns: u128::from(self.updated_ns),
            parent_session: self.parent_session,
            child: self.child,
            started_over: self.started_over,
        }
    }
}

/// Appends `records`, one line each, in one write.
pub(crate) fn append_records(index: &Path, records: &[Record]) -> io::Result<()> {
    let mut lines = Vec::with_capacity(256 * records.len());
    for record in records {
        serde_json::to_writer(&mut lines, record)?;
        lines.push(b'\n');
    }
    let mut file = OpenOptions::new().append(true).create(true).open(index)?;
    file.write_all(&lines)
}

/// Replaces the index with a header and one record per session, `records` being in listing
/// order; returns the header line.
pub(crate) fn rewrite<'a>(
    index: &Path,
    records: impl Iterator<Item = &'a Record>,
) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    for record in records {
        serde_json::to_writer(&mut body, record)?;
        body.push(b'\n');
    }
    let header = Record {
        deleted: true,
        sorted_bytes: Some(body.len() as u64),
        rewritten_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .and_then(|since| u64::try_from(since.as_nanos()).ok()),
        ..Record::default()
    };
    let mut header_line = serde_json::to_vec(&header)?;
    let mut file_bytes = Vec::with_capacity(header_line.len() + 1 + body.len());
    file_bytes.extend_from_slice(&header_line);
    file_bytes.push(b'\n');
    file_bytes.extend_from_slice(&body);
    drop(body);
    let temporary = index.with_extension("tmp");
    fs::write(&temporary, &file_bytes)?;
    fs::rename(&temporary, index)?;
    header_line.shrink_to_fit();
    Ok(header_line)
}

/// A header line is short; a longer first line is no header.
const MAX_HEADER: usize = 256;

/// The first line of `file` (read from its start) if it is a sorted index's header whose
/// sorted part fits in `len` bytes: (the line, its length with the newline, the sorted bytes).
pub(crate) fn read_header(file: &mut File, len: u64) -> io::Result<Option<(Vec<u8>, u64, u64)>> {
    let mut head = Vec::with_capacity(MAX_HEADER);
    Read::by_ref(file)
        .take(MAX_HEADER as u64)
        .read_to_end(&mut head)?;
    let Some(end) = memchr::memchr(b'\n', &head) else {
        return Ok(None);
    };
    head.truncate(end);
    let sorted = match serde_json::from_slice::<Record>(&head) {
        Ok(Record {
            sorted_bytes: Some(sorted),
            ..
        }) => sorted,
        _ => return Ok(None),
    };
    let header_len = end as u64 + 1;
    Ok(
        (header_len.checked_add(sorted).is_some_and(|end| end <= len))
            .then_some((head, header_len, sorted)),
    )
}

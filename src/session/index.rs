//! The session index: one small JSONL file in the sessions directory (`.index`) holding
//! what `session/list` shows of every session, so listing reads no session log.
//!
//! Each line is a record: a session's whole summary (the last one per id wins) or its removal.
//! Writers append a record on create, title, delete and at every `sync` (turn end), so the
//! index follows the logs without being rewritten. A listing checks the index against the
//! directory: a `<id>.jsonl` with no entry (made by another program, or by a kin that died
//! before indexing it) is summarized from its file and added; an entry with no file is dropped.
//! A missing index is thus rebuilt from every file. When the records outnumber the sessions
//! well, the listing rewrites the index compactly (temporary file, then rename).

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::event::Header;
use super::store::SessionSummary;

/// The index's file name inside the sessions directory: not `*.jsonl`, which are the logs.
pub(crate) const INDEX_FILE: &str = ".index";

/// Serializes this process's index writes with its compaction (which replaces the file).
/// Other processes only append, a line per write; a record one of them appends while another
/// compacts can be lost, which the next listing's check repairs for creates and deletes.
static WRITING: Mutex<()> = Mutex::new(());

fn writing() -> MutexGuard<'static, ()> {
    WRITING.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    additional_directories: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_session: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    /// The session file's modification time, ns since the epoch.
    #[serde(default)]
    updated_ns: u64,
}

impl Record {
    fn from_summary(summary: SessionSummary) -> Self {
        Self {
            id: summary.id,
            deleted: false,
            cwd: summary.cwd,
            additional_directories: summary.additional_directories,
            parent_session: summary.parent_session,
            title: summary.title,
            updated_ns: u64::try_from(summary.updated_ns).unwrap_or(u64::MAX),
        }
    }

    fn into_summary(self) -> SessionSummary {
        SessionSummary {
            id: self.id,
            cwd: self.cwd,
            additional_directories: self.additional_directories,
            title: self.title,
            updated_ms: self.updated_ns / 1_000_000,
            updated_ns: u128::from(self.updated_ns),
            parent_session: self.parent_session,
        }
    }
}

/// One session's entry, kept by its writer and re-recorded when it changes.
#[derive(Debug)]
pub(crate) struct IndexEntry {
    index: PathBuf,
    record: Record,
}

impl IndexEntry {
    pub(crate) fn new(dir: &Path, header: &Header, title: Option<String>) -> Self {
        Self {
            index: dir.join(INDEX_FILE),
            record: Record {
                id: header.id.clone(),
                deleted: false,
                cwd: header.cwd.clone(),
                additional_directories: header.additional_directories.clone(),
                parent_session: header.parent_session.clone(),
                title,
                updated_ns: 0,
            },
        }
    }

    pub(crate) fn set_title(&mut self, title: &str) {
        self.record.title = Some(title.to_owned());
    }

    /// Records the entry with `log`'s current modification time.
    pub(crate) fn refresh(&mut self, log: &File) -> io::Result<()> {
        self.record.updated_ns = modified_ns(&log.metadata()?);
        append(&self.index, std::slice::from_ref(&self.record))
    }
}

/// Records that session `id` is gone.
pub(crate) fn remove(dir: &Path, id: &str) -> io::Result<()> {
    let record = Record {
        id: id.to_owned(),
        deleted: true,
        ..Record::default()
    };
    append(&dir.join(INDEX_FILE), &[record])
}

fn append(index: &Path, records: &[Record]) -> io::Result<()> {
    let mut lines = Vec::with_capacity(256 * records.len());
    for record in records {
        serde_json::to_writer(&mut lines, record)?;
        lines.push(b'\n');
    }
    let _writing = writing();
    let mut file = OpenOptions::new().append(true).create(true).open(index)?;
    file.write_all(&lines)
}

pub(crate) fn modified_ns(metadata: &fs::Metadata) -> u64 {
    metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Every session in `dir`, from the index, after checking it against the directory (see the
/// module doc). `summarize` reads one session file, for sessions the index lacks.
pub(crate) fn list(
    dir: &Path,
    summarize: impl Fn(&Path) -> Option<SessionSummary>,
) -> io::Result<Vec<SessionSummary>> {
    let index = dir.join(INDEX_FILE);
    let on_disk = session_ids(dir)?;
    let _writing = writing();
    let bytes = match fs::read(&index) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(error) => return Err(error),
    };
    let mut entries: HashMap<String, Record> = HashMap::with_capacity(on_disk.len());
    let (mut lines, mut unreadable) = (0usize, 0usize);
    for line in bytes.split(|&b| b == b'\n').filter(|line| !line.is_empty()) {
        lines += 1;
        match serde_json::from_slice::<Record>(line) {
            Ok(record) if record.deleted => {
                entries.remove(&record.id);
            }
            Ok(record) => {
                entries.insert(record.id.clone(), record);
            }
            Err(_) => unreadable += 1,
        }
    }
    let mut changes = Vec::new();
    entries.retain(|id, _| {
        let kept = on_disk.contains(id);
        if !kept {
            changes.push(Record {
                id: id.clone(),
                deleted: true,
                ..Record::default()
            });
        }
        kept
    });
    for id in &on_disk {
        if !entries.contains_key(id) {
            if let Some(summary) = summarize(&dir.join(format!("{id}.jsonl"))) {
                let record = Record::from_summary(summary);
                changes.push(record.clone());
                entries.insert(id.clone(), record);
            }
        }
    }
    if unreadable > 0 || lines + changes.len() > 2 * entries.len() + 64 {
        rewrite(&index, entries.values())?;
    } else if !changes.is_empty() {
        drop(_writing);
        append(&index, &changes)?;
    }
    let mut out: Vec<SessionSummary> = entries.into_values().map(Record::into_summary).collect();
    out.sort_by(|a, b| b.updated_ns.cmp(&a.updated_ns).then(a.id.cmp(&b.id)));
    Ok(out)
}

/// The ids of the `<id>.jsonl` files in `dir` (none if it does not exist yet).
fn session_ids(dir: &Path) -> io::Result<HashSet<String>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(error) => return Err(error),
    };
    let mut ids = HashSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(id) = name.strip_suffix(".jsonl") {
            if !id.is_empty() && !id.starts_with('.') {
                ids.insert(id.to_owned());
            }
        }
    }
    Ok(ids)
}

/// Replaces the index with one record per session.
fn rewrite<'a>(index: &Path, records: impl Iterator<Item = &'a Record>) -> io::Result<()> {
    let mut lines = Vec::new();
    for record in records {
        serde_json::to_writer(&mut lines, record)?;
        lines.push(b'\n');
    }
    let temporary = index.with_extension("tmp");
    fs::write(&temporary, &lines)?;
    fs::rename(&temporary, index)
}

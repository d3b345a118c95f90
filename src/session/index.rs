//! The session index: one small JSONL file in the sessions directory (`.index`) holding
//! what `session/list` shows of every session, so listing reads no session log.
//!
//! Each line is a record: a session's whole summary (the last one per id wins) or its removal.
//! Writers append a record on create, title, delete and at every `sync` (turn end), so the
//! index follows the logs without being rewritten. When the records outnumber the sessions
//! well, a listing rewrites the index compactly (temporary file, then rename).
//!
//! A store reads the index once and keeps it in memory ([`IndexCache`]), in listing order, so
//! a page is served from memory. Before each listing it checks two stamps: the index file's
//! identity and length (only the records appended since are read; the whole file again only
//! if another process replaced it), and the directory's modification time. When the latter
//! moved, the directory is compared with the entries: a `<id>.jsonl` with no entry (made by
//! another program, or by a kin that died before indexing it) is summarized from its file and
//! added, and an entry with no file is dropped. A missing index is thus rebuilt from every file.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Bound::{Excluded, Unbounded};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::child::ChildInfo;
use super::event::{EventBody, Header};
use super::summary::SessionSummary;
use crate::sync::lock;

/// The index's file name inside the sessions directory: not `*.jsonl`, which are the logs.
pub(crate) const INDEX_FILE: &str = ".index";

/// A store's reading of the index, behind the lock that also serializes the store's index
/// writes with compaction (which replaces the file). Each store (and its clones and logs)
/// shares one. Other stores and processes only append, a line per write; a record one of them
/// appends while another compacts can be lost, which the next check of the directory repairs
/// for creates and deletes.
#[derive(Debug, Default)]
pub(crate) struct IndexCache(Mutex<Option<Folded>>);

impl IndexCache {
    fn folded(&self) -> MutexGuard<'_, Option<Folded>> {
        lock(&self.0)
    }
}

/// Where a listing page starts: after the session with this sort key (newest first, then by
/// id). A key names a place in the order, not an offset, so it stays valid while sessions
/// are created or deleted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ListCursor {
    newest_first: Reverse<u64>,
    id: String,
}

impl ListCursor {
    pub(crate) fn new(updated_ns: u64, id: String) -> Self {
        Self {
            newest_first: Reverse(updated_ns),
            id,
        }
    }
}

/// What the index's records fold to, as far as they were read: a listing reads only the records
/// appended since the last one, unless the file was replaced.
#[derive(Debug, Default)]
struct Folded {
    dir: PathBuf,
    /// (device, inode) and first line of the file read, to notice a replaced one.
    file: Option<(u64, u64)>,
    first_line: Vec<u8>,
    /// Bytes read so far: complete lines only.
    len: u64,
    lines: usize,
    unreadable: usize,
    entries: HashMap<String, Record>,
    /// Every entry's place in the listing order.
    order: BTreeSet<ListCursor>,
    /// The directory's modification time (ns) when its files were last compared with the
    /// entries (here or by the process that wrote the last stamp record read); `None` until
    /// then, or when that time was too recent to tell later changes from it.
    dir_checked: Option<u64>,
}

impl Folded {
    fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            ..Self::default()
        }
    }

    fn put(&mut self, record: Record) {
        let key = record.cursor();
        if let Some(old) = self.entries.insert(record.id.clone(), record) {
            self.order.remove(&old.cursor());
        }
        self.order.insert(key);
    }

    fn take(&mut self, id: &str) {
        if let Some(old) = self.entries.remove(id) {
            self.order.remove(&old.cursor());
        }
    }

    /// Reads the records appended to `index` since the last call (all, if it was replaced).
    fn catch_up(&mut self, index: &Path) -> io::Result<()> {
        let mut file = match File::open(index) {
            Ok(file) => file,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                if self.file.is_some() {
                    self.restart(None);
                }
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        let metadata = file.metadata()?;
        let identity = Some((metadata.dev(), metadata.ino()));
        if self.file == identity && metadata.len() == self.len {
            // Unchanged since the last read (the stamp: same file, same length).
            return Ok(());
        }
        let mut head = vec![0; self.first_line.len()];
        let same = self.file == identity
            && metadata.len() >= self.len
            && file.read_exact(&mut head).is_ok()
            && head == self.first_line;
        if !same {
            self.restart(identity);
        }
        file.seek(SeekFrom::Start(self.len))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail)?;
        // A line another process is still writing is left for the next listing.
        let complete = tail
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        for line in tail[..complete]
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
        {
            if self.first_line.is_empty() {
                self.first_line = line.to_vec();
            }
            self.lines += 1;
            match serde_json::from_slice::<Record>(line) {
                Ok(record) if record.dir_modified_ns.is_some() => {
                    self.dir_checked = record.dir_modified_ns;
                }
                Ok(record) if record.deleted => self.take(&record.id),
                Ok(record) => self.put(record),
                Err(_) => self.unreadable += 1,
            }
        }
        self.len += complete as u64;
        Ok(())
    }

    /// Forgets what was read: the file was replaced (by another process) or removed.
    fn restart(&mut self, identity: Option<(u64, u64)>) {
        *self = Self::new(&self.dir);
        self.file = identity;
    }

    /// Compares the entries with the `<id>.jsonl` files when the directory changed since the
    /// last comparison; returns the records that bring the index file in line.
    fn check_dir(
        &mut self,
        summarize: &impl Fn(&Path) -> Option<SessionSummary>,
    ) -> io::Result<Vec<Record>> {
        let metadata = match fs::metadata(&self.dir) {
            Ok(metadata) => Some(metadata),
            Err(error) if error.kind() == io::ErrorKind::NotFound => None,
            Err(error) => return Err(error),
        };
        let modified = metadata.as_ref().and_then(|m| m.modified().ok());
        let modified_ns = metadata.as_ref().map(modified_ns);
        if modified_ns.is_some() && modified_ns == self.dir_checked {
            return Ok(Vec::new());
        }
        // File times come from a coarse clock: a change made within the same tick as the
        // time read here would not move it, so a time that recent is not trusted later.
        let settled = modified.is_some_and(|time| {
            SystemTime::now()
                .duration_since(time)
                .is_ok_and(|age| age > CLOCK_TICK)
        });
        let on_disk = session_ids(&self.dir)?;
        let mut changes = Vec::new();
        let gone: Vec<String> = self
            .entries
            .keys()
            .filter(|id| !on_disk.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            self.take(&id);
            changes.push(Record::removal(id));
        }
        for id in &on_disk {
            if !self.entries.contains_key(id) {
                if let Some(summary) = summarize(&self.dir.join(format!("{id}.jsonl"))) {
                    let record = Record::from_summary(summary);
                    changes.push(record.clone());
                    self.put(record);
                }
            }
        }
        self.dir_checked = modified_ns.filter(|_| settled);
        if let Some(ns) = self.dir_checked {
            // For the next process: it need not scan the directory while the time stays.
            changes.push(Record {
                dir_modified_ns: Some(ns),
                ..Record::default()
            });
        }
        Ok(changes)
    }

    /// Writes `changes`, or the whole index anew when it holds many more records than
    /// sessions (or lines it cannot read); what was read stays valid either way.
    fn record(&mut self, index: &Path, changes: &[Record]) -> io::Result<()> {
        if self.unreadable > 0 || self.lines + changes.len() > 2 * self.entries.len() + 64 {
            // The rename moves the directory's time: the next listing scans it again.
            let first_line = rewrite(index, self.entries.values())?;
            let metadata = fs::metadata(index)?;
            self.file = Some((metadata.dev(), metadata.ino()));
            self.len = metadata.len();
            self.first_line = first_line;
            self.lines = self.entries.len();
            self.unreadable = 0;
        } else if !changes.is_empty() {
            append_locked(index, changes)?;
            // Read back by the next catch-up like any other append (they are already folded).
        }
        Ok(())
    }

    /// Reads what changed in the index file and the directory and records the repairs.
    fn sync(
        &mut self,
        index: &Path,
        summarize: &impl Fn(&Path) -> Option<SessionSummary>,
    ) -> io::Result<()> {
        self.catch_up(index)?;
        let changes = self.check_dir(summarize)?;
        self.record(index, &changes)
    }

    fn summaries<'a>(
        &'a self,
        from: Option<&'a ListCursor>,
    ) -> impl Iterator<Item = &'a Record> + 'a {
        let range = match from {
            Some(cursor) => self.order.range((Excluded(cursor), Unbounded)),
            None => self.order.range::<ListCursor, _>(..),
        };
        range.filter_map(|key| self.entries.get(&key.id))
    }
}

/// Longer than the kernel's file time granularity (a scheduler tick, at most 10 ms).
const CLOCK_TICK: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    /// Empty on a stamp record (below).
    #[serde(default)]
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
    /// For a child session, what `list_agents` shows. Records written before this field
    /// existed lack it: their children are summarized from their files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    child: Option<ChildInfo>,
    /// On a stamp record only: the directory's modification time (ns) when its files were
    /// last found to match the records before this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dir_modified_ns: Option<u64>,
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
            child: summary.child,
            dir_modified_ns: None,
        }
    }

    fn removal(id: String) -> Self {
        Self {
            id,
            deleted: true,
            ..Self::default()
        }
    }

    fn cursor(&self) -> ListCursor {
        ListCursor::new(self.updated_ns, self.id.clone())
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
            child: self.child,
        }
    }
}

/// One session's entry, kept by its writer and re-recorded when it changes.
#[derive(Debug)]
pub(crate) struct IndexEntry {
    cache: Arc<IndexCache>,
    index: PathBuf,
    record: Record,
}

impl IndexEntry {
    /// `child` is what the log holds so far (for a child session).
    pub(crate) fn new(
        cache: &Arc<IndexCache>,
        dir: &Path,
        header: &Header,
        title: Option<String>,
        child: Option<ChildInfo>,
    ) -> Self {
        Self {
            cache: cache.clone(),
            index: dir.join(INDEX_FILE),
            record: Record {
                id: header.id.clone(),
                deleted: false,
                cwd: header.cwd.clone(),
                additional_directories: header.additional_directories.clone(),
                parent_session: header.parent_session.clone(),
                title,
                updated_ns: 0,
                child,
                dir_modified_ns: None,
            },
        }
    }

    pub(crate) fn set_title(&mut self, title: &str) {
        self.record.title = Some(title.to_owned());
    }

    /// Follows an event the session itself appended; true when the entry should be recorded
    /// at once (see [`ChildInfo::observe`]).
    pub(crate) fn observe(&mut self, body: &EventBody) -> bool {
        self.record
            .child
            .as_mut()
            .is_some_and(|child| child.observe(body))
    }

    /// Records the entry with `log`'s current modification time.
    pub(crate) fn refresh(&mut self, log: &File) -> io::Result<()> {
        self.record.updated_ns = modified_ns(&log.metadata()?);
        append(&self.cache, &self.index, std::slice::from_ref(&self.record))
    }
}

/// Records that session `id` is gone.
pub(crate) fn remove(cache: &IndexCache, dir: &Path, id: &str) -> io::Result<()> {
    append(
        cache,
        &dir.join(INDEX_FILE),
        &[Record::removal(id.to_owned())],
    )
}

fn append(cache: &IndexCache, index: &Path, records: &[Record]) -> io::Result<()> {
    let _writing = cache.folded();
    append_locked(index, records)
}

fn append_locked(index: &Path, records: &[Record]) -> io::Result<()> {
    let mut lines = Vec::with_capacity(256 * records.len());
    for record in records {
        serde_json::to_writer(&mut lines, record)?;
        lines.push(b'\n');
    }
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

/// Runs `read` on the index of `dir`, brought up to date first (see the module doc).
/// `summarize` reads one session file, for sessions the index lacks.
fn with_index<T>(
    cache: &IndexCache,
    dir: &Path,
    summarize: impl Fn(&Path) -> Option<SessionSummary>,
    read: impl FnOnce(&Folded) -> T,
) -> io::Result<T> {
    let mut state = cache.folded();
    let mut folded = match state.take() {
        Some(folded) if folded.dir == dir => folded,
        _ => Folded::new(dir),
    };
    let start = std::time::Instant::now();
    let synced = folded.sync(&dir.join(INDEX_FILE), &summarize);
    let synced_at = start.elapsed();
    let out = read(&folded);
    tracing::debug!(dir = %dir.display(), sessions = folded.entries.len(), sync_us = synced_at.as_micros(), read_us = (start.elapsed() - synced_at).as_micros(), "read the session index");
    *state = Some(folded);
    synced.map(|()| out)
}

/// The sessions in `dir` whose parent is `parent` (the top-level ones for `None`), newest
/// first.
pub(crate) fn list(
    cache: &IndexCache,
    dir: &Path,
    parent: Option<&str>,
    summarize: impl Fn(&Path) -> Option<SessionSummary>,
) -> io::Result<Vec<SessionSummary>> {
    with_index(cache, dir, summarize, |folded| {
        folded
            .summaries(None)
            .filter(|record| record.parent_session.as_deref() == parent)
            .cloned()
            .map(Record::into_summary)
            .collect()
    })
}

/// Up to `limit` top-level sessions in `dir` (in `cwd`, if given) after `from`, newest first,
/// and whether more follow.
pub(crate) fn page(
    cache: &IndexCache,
    dir: &Path,
    cwd: Option<&str>,
    from: Option<&ListCursor>,
    limit: usize,
    summarize: impl Fn(&Path) -> Option<SessionSummary>,
) -> io::Result<(Vec<SessionSummary>, bool)> {
    with_index(cache, dir, summarize, |folded| {
        let mut matching = folded.summaries(from).filter(|record| {
            record.parent_session.is_none() && (cwd.is_none() || record.cwd.as_deref() == cwd)
        });
        let page: Vec<SessionSummary> = matching
            .by_ref()
            .take(limit)
            .cloned()
            .map(Record::into_summary)
            .collect();
        let more = matching.next().is_some();
        (page, more)
    })
}

/// Moves the records of sessions `ids` from the index in `from` to the one in `to` (their
/// files moved there), leaving `from`'s index without them.
pub(crate) fn move_records(
    (from_cache, from): (&IndexCache, &Path),
    (to_cache, to): (&IndexCache, &Path),
    ids: &[String],
) -> io::Result<()> {
    let mut state = from_cache.folded();
    let mut folded = Folded::new(from);
    folded.catch_up(&from.join(INDEX_FILE))?;
    let records: Vec<Record> = ids
        .iter()
        .filter_map(|id| folded.entries.get(id).cloned())
        .collect();
    for id in ids {
        folded.take(id);
    }
    append(to_cache, &to.join(INDEX_FILE), &records)?;
    rewrite(&from.join(INDEX_FILE), folded.entries.values())?;
    // Read anew by the next listing.
    *state = None;
    Ok(())
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

/// Replaces the index with one record per session; returns its first line.
fn rewrite<'a>(index: &Path, records: impl Iterator<Item = &'a Record>) -> io::Result<Vec<u8>> {
    let mut lines = Vec::new();
    for record in records {
        serde_json::to_writer(&mut lines, record)?;
        lines.push(b'\n');
    }
    let temporary = index.with_extension("tmp");
    fs::write(&temporary, &lines)?;
    fs::rename(&temporary, index)?;
    let first = lines.iter().position(|&b| b == b'\n').unwrap_or(0);
    Ok(lines[..first].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(path: &Path) -> Option<SessionSummary> {
        let id = path.file_stem()?.to_str()?.to_owned();
        Some(SessionSummary {
            id,
            cwd: None,
            additional_directories: Vec::new(),
            title: None,
            updated_ms: 0,
            updated_ns: 1,
            parent_session: None,
            child: None,
        })
    }

    fn set_dir_time(dir: &Path, time: SystemTime) {
        File::open(dir).unwrap().set_modified(time).unwrap();
    }

    fn ids(dir: &Path) -> Vec<String> {
        let fresh = IndexCache::default();
        let listed = list(&fresh, dir, None, summary_of).unwrap();
        listed.into_iter().map(|s| s.id).collect()
    }

    #[test]
    fn a_fresh_reader_trusts_the_stamp_until_the_directory_changes() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path();
        fs::write(dir.join("a.jsonl"), "").unwrap();
        let past = UNIX_EPOCH + Duration::from_secs(1_600_000_000);
        set_dir_time(dir, past);
        assert_eq!(ids(dir), ["a"]);
        let index = fs::read_to_string(dir.join(INDEX_FILE)).unwrap();
        assert!(index.contains("dirModifiedNs"), "{index}");

        // A file added behind the index's back, the directory's time put back: not scanned.
        fs::write(dir.join("b.jsonl"), "").unwrap();
        set_dir_time(dir, past);
        assert_eq!(ids(dir), ["a"]);
        // Once the time moves, the next reader scans and finds it.
        set_dir_time(dir, past + Duration::from_secs(1));
        assert_eq!(ids(dir), ["a", "b"]);
    }

    #[test]
    fn a_recent_directory_time_is_not_trusted() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path();
        fs::write(dir.join("a.jsonl"), "").unwrap();
        let future = SystemTime::now() + Duration::from_secs(3600);
        set_dir_time(dir, future);
        let cache = IndexCache::default();
        assert_eq!(list(&cache, dir, None, summary_of).unwrap().len(), 1);
        // Same time, yet a new file is seen: the time was too recent to stamp.
        fs::write(dir.join("b.jsonl"), "").unwrap();
        set_dir_time(dir, future);
        assert_eq!(list(&cache, dir, None, summary_of).unwrap().len(), 2);
    }
}

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

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::ops::Bound::{Excluded, Unbounded};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::child::ChildInfo;
use super::event::{EventBody, Header};
pub(crate) use super::index_file::ListCursor;
use super::index_file::{append_records, read_header, rewrite, Record};
use super::summary::SessionSummary;
use crate::sync::lock;

/// The index's file name inside the sessions directory: not `*.jsonl`, which are the logs.
pub(crate) const INDEX_FILE: &str = ".index";

/// Records after the sorted part that make a listing rewrite the index: a fresh reader
/// parses them all before its first page, so they are kept few.
const TAIL_LIMIT: usize = 1024;

/// Sorted records read at a time while a page still needs more of them.
const PREFIX_BATCH: usize = 256;

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

/// The part of a sorted index not read yet: the records in listing order after the header,
/// read from the file as it was opened (a rewrite renames a new file over it; appends only
/// add beyond this part).
#[derive(Debug)]
struct Prefix {
    reader: BufReader<io::Take<File>>,
    /// The last key read from it: every sorted record up to here is known.
    last: Option<ListCursor>,
}

/// What the index's records fold to, as far as they were read: a listing reads only the records
/// appended since the last one, unless the file was replaced.
#[derive(Debug, Default)]
struct Folded {
    dir: PathBuf,
    /// (device, inode) and first line of the file read, to notice a replaced one.
    file: Option<(u64, u64)>,
    first_line: Vec<u8>,
    /// Bytes read so far (the sorted part counted as read): complete lines only.
    len: u64,
    lines: usize,
    /// Lines after the sorted part (every line of an index with no header).
    tail_lines: usize,
    unreadable: usize,
    entries: HashMap<String, Record>,
    /// Every entry's place in the listing order.
    order: BTreeSet<ListCursor>,
    /// The sorted records still to read, while pages have not needed them all.
    prefix: Option<Prefix>,
    /// While `prefix` is unread: the ids that records after it name (those win over it).
    tail_ids: HashSet<String>,
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

    /// Reads the records appended to `index` since the last call (all, if it was replaced;
    /// of a sorted index, only the header and what follows the sorted part).
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
        // A fresh read of a sorted index: its sorted part is read later, as pages need it.
        let mut sorted_part = None;
        if self.len == 0 {
            file.seek(SeekFrom::Start(0))?;
            if let Some((line, header_len, sorted)) = read_header(&mut file, metadata.len())? {
                sorted_part = Some((header_len, sorted));
                self.first_line = line;
                self.lines = 1;
                self.len = header_len + sorted;
            }
        }
        file.seek(SeekFrom::Start(self.len))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail)?;
        if let Some((header_len, sorted)) = sorted_part {
            file.seek(SeekFrom::Start(header_len))?;
            self.prefix = Some(Prefix {
                reader: BufReader::with_capacity(64 * 1024, file.take(sorted)),
                last: None,
            });
        }
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
            self.tail_lines += 1;
            match serde_json::from_slice::<Record>(line) {
                Ok(record) if record.dir_modified_ns.is_some() => {
                    self.dir_checked = record.dir_modified_ns;
                }
                Ok(record) if record.sorted_bytes.is_some() => {}
                Ok(record) => {
                    if self.prefix.is_some() {
                        self.tail_ids.insert(record.id.clone());
                    }
                    if record.deleted {
                        self.take(&record.id);
                    } else {
                        self.put(record);
                    }
                }
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

    /// Reads up to `batch` more of the sorted records (all of them for `usize::MAX`).
    fn read_prefix(&mut self, batch: usize) -> io::Result<()> {
        let Some(mut prefix) = self.prefix.take() else {
            return Ok(());
        };
        let mut line = Vec::new();
        for _ in 0..batch {
            line.clear();
            if prefix.reader.read_until(b'\n', &mut line)? == 0 {
                // All read: from now on the entries are the whole index.
                self.tail_ids = HashSet::new();
                return Ok(());
            }
            self.lines += 1;
            match serde_json::from_slice::<Record>(line.trim_ascii_end()) {
                Ok(record) if record.deleted || record.id.is_empty() => {}
                Ok(record) => {
                    prefix.last = Some(record.cursor());
                    if !self.tail_ids.contains(&record.id) {
                        self.put(record);
                    }
                }
                Err(_) => self.unreadable += 1,
            }
        }
        self.prefix = Some(prefix);
        Ok(())
    }

    /// Reads the rest of the sorted records.
    fn finish(&mut self) -> io::Result<()> {
        self.read_prefix(usize::MAX)
    }

    /// Reads sorted records until `need` entries after `from` that `keep` accepts are known
    /// for certain (or all are read): the first `need` of [`Folded::summaries`] are then
    /// right.
    fn read_for_page(
        &mut self,
        from: Option<&ListCursor>,
        need: usize,
        keep: &impl Fn(&Record) -> bool,
    ) -> io::Result<()> {
        while let Some(prefix) = &self.prefix {
            let known = match &prefix.last {
                Some(last) => self
                    .summaries(from)
                    .take_while(|record| record.cursor() <= *last)
                    .filter(|record| keep(record))
                    .take(need)
                    .count(),
                None => 0,
            };
            if known >= need {
                break;
            }
            self.read_prefix(PREFIX_BATCH)?;
        }
        Ok(())
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
        // Comparing needs every entry.
        self.finish()?;
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
            changes.push(Record::stamp(ns));
        }
        Ok(changes)
    }

    /// Writes `changes`, or the whole index anew (sorted) when it holds many more records
    /// than sessions, lines it cannot read, or many records after its sorted part; what was
    /// read stays valid either way.
    fn record(&mut self, index: &Path, changes: &[Record]) -> io::Result<()> {
        if self.tail_lines + changes.len() > TAIL_LIMIT {
            self.finish()?;
        }
        let rewrite_due = self.unreadable > 0
            || self.lines + changes.len() > 2 * self.entries.len() + 64
            || self.tail_lines + changes.len() > TAIL_LIMIT;
        if self.prefix.is_none() && rewrite_due {
            // The rename moves the directory's time: the next listing scans it again.
            let sorted = self
                .order
                .iter()
                .filter_map(|key| self.entries.get(&key.id));
            let first_line = rewrite(index, sorted)?;
            let metadata = fs::metadata(index)?;
            self.file = Some((metadata.dev(), metadata.ino()));
            self.len = metadata.len();
            self.first_line = first_line;
            self.lines = self.entries.len() + 1;
            self.tail_lines = 0;
            self.unreadable = 0;
        } else if !changes.is_empty() {
            append_records(index, changes)?;
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
        let mut record = Record::entry(header, title);
        record.child = child;
        Self {
            cache: cache.clone(),
            index: dir.join(INDEX_FILE),
            record,
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
    append_records(index, records)
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
    read: impl FnOnce(&mut Folded) -> io::Result<T>,
) -> io::Result<T> {
    let mut state = cache.folded();
    let mut folded = match state.take() {
        Some(folded) if folded.dir == dir => folded,
        _ => Folded::new(dir),
    };
    let start = std::time::Instant::now();
    let synced = folded.sync(&dir.join(INDEX_FILE), &summarize);
    let synced_at = start.elapsed();
    let out = read(&mut folded);
    tracing::debug!(dir = %dir.display(), sessions = folded.entries.len(), sync_us = synced_at.as_micros(), read_us = (start.elapsed() - synced_at).as_micros(), "read the session index");
    *state = Some(folded);
    synced.and(out)
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
        folded.finish()?;
        Ok(folded
            .summaries(None)
            .filter(|record| record.parent_session.as_deref() == parent)
            .cloned()
            .map(Record::into_summary)
            .collect())
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
    let keep = |record: &Record| {
        record.parent_session.is_none() && (cwd.is_none() || record.cwd.as_deref() == cwd)
    };
    with_index(cache, dir, summarize, |folded| {
        folded.read_for_page(from, limit.saturating_add(1), &keep)?;
        let mut matching = folded.summaries(from).filter(|record| keep(record));
        let page: Vec<SessionSummary> = matching
            .by_ref()
            .take(limit)
            .cloned()
            .map(Record::into_summary)
            .collect();
        let more = matching.next().is_some();
        Ok((page, more))
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
    folded.finish()?;
    let records: Vec<Record> = ids
        .iter()
        .filter_map(|id| folded.entries.get(id).cloned())
        .collect();
    for id in ids {
        folded.take(id);
    }
    append(to_cache, &to.join(INDEX_FILE), &records)?;
    let sorted = folded
        .order
        .iter()
        .filter_map(|key| folded.entries.get(&key.id));
    rewrite(&from.join(INDEX_FILE), sorted)?;
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

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;

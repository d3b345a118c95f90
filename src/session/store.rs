//! The on-disk store: one JSONL file per session under `<home>/sessions/`, and the index
//! `session/list` reads (`index.rs`).
//!
//! Loading never refuses a session over a damaged line after the header: a torn last line (a
//! crash mid-write, or a write in progress in the process holding the session's lock) is left
//! out, and any other line that does not parse is set aside (reported, and copied beside the
//! log when it is next opened for appending) while every good line is kept. Only the holder of
//! the session's lock (`lock.rs`) writes, cuts or deletes its file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::child::ChildInfo;
use super::error::StoreError;
use super::event::{Event, EventBody, EventKind, Header};
use super::index::{self, IndexEntry, ListCursor};
use super::layout::Layout;
use super::line::{line_kind, parse_event_line};
use super::loaded::{read_log_at, LoadedSession, LogRead};
use super::lock::SessionLock;
use super::log::SessionLog;
use super::records::Descriptor;
use super::summary::{last_title, SessionSummary};

/// Bytes read from a log at a time.
const READ_BUFFER: usize = 256 * 1024;

fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Where sessions are kept: one JSONL log per session, top-level sessions and delegated children in their own directories, each with an index for listing.
#[derive(Debug, Clone)]
pub struct SessionStore {
    /// The two directories (top level, children) and what this store has read of their
    /// indexes; shared by its clones and its logs.
    layout: Arc<Layout>,
    /// The creation time last handed out (see [`SessionStore::creation_time`]).
    last_created: Arc<AtomicU64>,
}

impl SessionStore {
    /// The store under `home`. Its directory is made by the first [`SessionStore::create`],
    /// not here: starting kin writes nothing.
    pub fn open(home: &Path) -> Result<Self, StoreError> {
        Ok(Self {
            layout: Arc::new(Layout::new(home.join("sessions"))),
            last_created: Arc::default(),
        })
    }

    /// The creation time of a session made now (epoch milliseconds), strictly increasing over
    /// this store's calls: creation times order its sessions (e.g. children of one parent) even
    /// when several are made within a millisecond.
    pub(crate) fn creation_time(&self) -> u64 {
        let now = crate::time::now_ms();
        let after = |last: u64| now.max(last + 1);
        let last = self
            .last_created
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
                Some(after(last))
            })
            .unwrap_or_else(|last| last);
        after(last)
    }

    /// The sessions directory (top-level sessions; children are in its `children/`).
    pub fn dir(&self) -> &Path {
        &self.layout.top.dir
    }

    /// The file of session `id` (where a top-level one would be, if there is none); refuses
    /// ids that could escape the store directory.
    pub fn path(&self, id: &str) -> Result<PathBuf, StoreError> {
        check_id(id)?;
        Ok(self.layout.find(id))
    }

    /// Where the session's large prompt payloads are kept (see [`super::blobs`]).
    pub(crate) fn blob_dir(&self, id: &str) -> Result<PathBuf, StoreError> {
        Ok(super::blobs::dir_of(&self.path(id)?))
    }

    /// Lets session `to` (a fork) read the blobs of session `from` (its parent).
    pub(crate) fn share_blobs(&self, from: &str, to: &str) -> Result<(), StoreError> {
        super::blobs::share(&self.blob_dir(from)?, &self.blob_dir(to)?);
        Ok(())
    }

    pub(crate) fn exists(&self, id: &str) -> bool {
        self.path(id).is_ok_and(|path| path.is_file())
    }

    /// Creates the file of a new session and writes its header.
    pub fn create(&self, header: &Header) -> Result<SessionLog, StoreError> {
        check_id(&header.id)?;
        let shelf = self.layout.shelf_of(header);
        let path = shelf.file(&header.id);
        if header.parent_session.is_none() && self.layout.children.file(&header.id).exists()
            || header.parent_session.is_some() && self.layout.top.file(&header.id).exists()
        {
            return Err(StoreError::Exists {
                id: header.id.clone(),
            });
        }
        let open = || OpenOptions::new().append(true).create_new(true).open(&path);
        // The directory is made (or its failure named) when an open fails for want of it, not
        // checked before every create.
        let file = match open() {
            Err(error) if error.kind() != io::ErrorKind::AlreadyExists && !shelf.dir.is_dir() => {
                self.layout
                    .make_dir(shelf)
                    .map_err(io_error("creating the sessions directory", &shelf.dir))?;
                open()
            }
            opened => opened,
        }
        .map_err(|source| match source.kind() {
            io::ErrorKind::AlreadyExists => StoreError::Exists {
                id: header.id.clone(),
            },
            _ => StoreError::Io {
                op: "creating the session log",
                path: path.clone(),
                source,
            },
        })?;
        // Nobody else knows the new id yet, so this is only refused by a foreign program.
        let lock = match SessionLock::acquire_created(&path, &header.id, &file) {
            Ok(lock) => lock,
            Err(error) => {
                let _ = fs::remove_file(&path);
                return Err(error);
            }
        };
        let entry = IndexEntry::new(
            &shelf.index,
            &shelf.dir,
            header,
            None,
            ChildInfo::new(header),
        );
        let mut log = SessionLog::new(path.clone(), file, lock, 0, 0, entry);
        // Handed to the OS now; made durable with the first turn's end (fsync per turn).
        if let Err(error) = log.write_header(header) {
            // A file without a header is no session: leave nothing behind.
            let _ = fs::remove_file(&path);
            return Err(error);
        }
        log.refresh_index();
        Ok(log)
    }

    /// Reads a whole session.
    pub fn load(&self, id: &str) -> Result<LoadedSession, StoreError> {
        let mut events = Vec::new();
        let read = self.read_events(id, |_| false, |event| events.push(event))?;
        Ok(read.into_loaded(events))
    }

    /// Reads only the events of session `id` of one of `kinds`, as a stream (one line in
    /// memory): each goes to `on_event` in order; the other lines are left unparsed.
    pub(crate) fn read_events_of(
        &self,
        id: &str,
        kinds: &[EventKind],
        on_event: impl FnMut(Event),
    ) -> Result<LogRead, StoreError> {
        let wanted = |kind: &str| kinds.iter().any(|wanted| wanted.as_str() == kind);
        self.read_events(id, |line| !line_kind(line).is_some_and(wanted), on_event)
    }

    /// Reads session `id` as a stream (one line in memory, see `loaded.rs`): each event goes
    /// to `on_event` in order; a complete line `skip` accepts is left unparsed.
    pub(super) fn read_events(
        &self,
        id: &str,
        mut skip: impl FnMut(&[u8]) -> bool,
        mut on_event: impl FnMut(Event),
    ) -> Result<LogRead, StoreError> {
        let (path, file) = self.open_log(id)?;
        let reader = BufReader::with_capacity(READ_BUFFER, file);
        read_log_at(&path, reader, |line, _| skip(line), |e, _| on_event(e))
    }

    /// Session `id`'s file opened for reading.
    fn open_log(&self, id: &str) -> Result<(PathBuf, File), StoreError> {
        let path = self.path(id)?;
        match File::open(&path) {
            Ok(file) => Ok((path, file)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(StoreError::NotFound { id: id.to_owned() })
            }
            Err(source) => Err(io_error("reading the session log", &path)(source)),
        }
    }

    /// Takes session `id`'s writer lock (shared with any handle this process already holds):
    /// `Locked` when another process has the session open for writing.
    pub(crate) fn lock(&self, id: &str) -> Result<SessionLock, StoreError> {
        SessionLock::acquire(&self.path(id)?, id)
    }

    /// Takes the session's writer lock, reads it and reopens it for appending; the returned
    /// log holds the lock. Under the lock a torn tail is a crash's, not a write in progress:
    /// it is cut off first (and kept beside the log as `<id>.jsonl.torn`), so new events never
    /// glue onto half a line. Lines set aside stay in the log and are copied to
    /// `<id>.jsonl.set-aside`.
    pub(crate) fn open_for_append(
        &self,
        id: &str,
    ) -> Result<(LoadedSession, SessionLog), StoreError> {
        self.open_with(id, |store| store.load(id))
    }

    /// As [`SessionStore::open_for_append`], keeping only the events the model's view and the
    /// session's state need (none of the conversation before the last compaction: `view.rs`).
    pub(crate) fn open_view_for_append(
        &self,
        id: &str,
    ) -> Result<(LoadedSession, SessionLog), StoreError> {
        self.open_with(id, |store| {
            let (path, file) = store.open_log(id)?;
            super::view::load_view(&path, file)
        })
    }

    fn open_with(
        &self,
        id: &str,
        load: impl FnOnce(&Self) -> Result<LoadedSession, StoreError>,
    ) -> Result<(LoadedSession, SessionLog), StoreError> {
        let lock = self.lock(id)?;
        let loaded = load(self)?;
        let path = self.path(id)?;
        if !loaded.set_aside.is_empty() {
            let side = path.with_extension("jsonl.set-aside");
            let mut copy = Vec::new();
            for line in &loaded.set_aside {
                copy.extend_from_slice(&line.bytes);
                copy.push(b'\n');
            }
            fs::write(&side, copy).map_err(io_error("keeping set-aside lines in", &side))?;
            tracing::warn!(path = %path.display(), kept = %side.display(), lines = loaded.set_aside.len(), "opened a session log with lines set aside");
        }
        if let Some(tail) = &loaded.torn_tail {
            let side = path.with_extension("jsonl.torn");
            fs::write(&side, tail).map_err(io_error("keeping the torn last line in", &side))?;
            let file = OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(io_error("opening for repair the session log", &path))?;
            file.set_len(loaded.valid_len)
                .map_err(io_error("cutting the torn last line off", &path))?;
            tracing::warn!(path = %path.display(), kept = %side.display(), "cut a torn last line off the session log");
        }
        let mut file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io_error("opening for appending the session log", &path))?;
        let mut len = loaded.valid_len;
        if needs_newline(&path, len)? {
            file.write_all(b"\n")
                .map_err(io_error("ending the last line of", &path))?;
            len += 1;
        }
        let title = loaded
            .events
            .iter()
            .rev()
            .find_map(|event| match &event.body {
                EventBody::SessionTitle(title) => Some(title.title.clone()),
                _ => None,
            });
        let child = ChildInfo::of_events(&loaded.header, &loaded.events);
        let shelf = self.layout.shelf_holding(&path);
        let entry = IndexEntry::new(&shelf.index, &shelf.dir, &loaded.header, title, child);
        let log = SessionLog::new(path, file, lock, len, loaded.next_seq(), entry);
        Ok((loaded, log))
    }

    /// Every stored top-level session, newest first, read from the index (see `index.rs`).
    pub fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.list_where(None)
    }

    /// The stored children of session `parent`, newest first, read from the index.
    pub fn list_children(&self, parent: &str) -> Result<Vec<SessionSummary>, StoreError> {
        self.list_where(Some(parent))
    }

    /// Up to `limit` top-level sessions (in `cwd`, if given) after `from`, newest first, and
    /// whether more follow; served from what this store keeps of the index.
    pub(crate) fn list_page(
        &self,
        cwd: Option<&str>,
        from: Option<&ListCursor>,
        limit: usize,
    ) -> Result<(Vec<SessionSummary>, bool), StoreError> {
        self.layout.migrate();
        let top = &self.layout.top;
        index::page(&top.index, &top.dir, cwd, from, limit, summarize_or_skip)
            .map_err(io_error("listing the sessions in", &top.dir))
    }

    fn list_where(&self, parent: Option<&str>) -> Result<Vec<SessionSummary>, StoreError> {
        self.layout.migrate();
        let shelf = match parent {
            None => &self.layout.top,
            Some(_) => &self.layout.children,
        };
        index::list(&shelf.index, &shelf.dir, parent, summarize_or_skip)
            .map_err(io_error("listing the sessions in", &shelf.dir))
    }

    /// A stored child's header and the resumable descriptor among its own events, read from
    /// its file without decoding the transcript; `None` when it cannot be read.
    pub(crate) fn child_record(&self, id: &str) -> Option<(Header, Option<Descriptor>)> {
        let bytes = std::fs::read(self.path(id).ok()?).ok()?;
        super::child::child_record(&bytes)
    }

    /// Session `id`'s summary read from its file, not the index (`None` if unreadable).
    pub(crate) fn summarize(&self, id: &str) -> Option<SessionSummary> {
        summarize(&self.path(id).ok()?).ok().flatten()
    }

    /// The lines of session `id`'s file that hold exactly `events` (its first events, one per
    /// line, as kin writes them), to copy a seed without re-encoding it. `None` when the file
    /// does not line up with them (e.g. a log written with packed rows): encode them instead.
    pub(crate) fn event_lines(&self, id: &str, events: &[Event]) -> Option<Vec<u8>> {
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
        // The last line must be the last event itself, not only carry its seq: a fork seed
        // may end with renumbered events (compactions after the completed-turn prefix).
        let last_is_same = serde_json::to_vec(last)
            .is_ok_and(|encoded| encoded == bytes[last_line.0..last_line.1]);
        let lines_up = seq_of(&bytes[body_start..first_line_end]) == Some(first.seq)
            && last_is_same
            && last.seq - first.seq + 1 == events.len() as u64;
        lines_up.then(|| bytes[body_start..end].to_vec())
    }

    /// Removes a session's file; `Ok(false)` if there was none, `Locked` (and nothing
    /// removed) while another process has it open for writing.
    pub fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let path = self.path(id)?;
        // Held until the file is gone: nobody opens it for writing meanwhile.
        let _lock = match SessionLock::acquire(&path, id) {
            Ok(lock) => lock,
            Err(StoreError::NotFound { .. }) => return Ok(false),
            Err(error) => return Err(error),
        };
        let _ = fs::remove_file(path.with_extension("jsonl.torn"));
        let _ = fs::remove_file(path.with_extension("jsonl.set-aside"));
        let _ = fs::remove_file(super::view_sidecar::path_of(&path));
        let _ = fs::remove_dir_all(super::blobs::dir_of(&path));
        match fs::remove_file(&path) {
            Ok(()) => {
                let shelf = self.layout.shelf_holding(&path);
                if let Err(error) = index::remove(&shelf.index, &shelf.dir, id) {
                    tracing::warn!(%error, "could not update the session index");
                }
                Ok(true)
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(StoreError::Io {
                op: "deleting the session log",
                path,
                source,
            }),
        }
    }
}

/// Refuses ids that could escape the store directory.
fn check_id(id: &str) -> Result<(), StoreError> {
    let valid = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if valid {
        Ok(())
    } else {
        Err(StoreError::InvalidId { id: id.to_owned() })
    }
}

/// True when the file's last kept byte is not a newline (a complete last line that lost it).
fn needs_newline(path: &Path, valid_len: u64) -> Result<bool, StoreError> {
    use std::io::{Read, Seek, SeekFrom};
    if valid_len == 0 {
        return Ok(false);
    }
    let op = "reading the last byte of";
    let mut file = File::open(path).map_err(io_error(op, path))?;
    file.seek(SeekFrom::Start(valid_len - 1))
        .map_err(io_error(op, path))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last).map_err(io_error(op, path))?;
    Ok(last[0] != b'\n')
}

fn summarize_or_skip(path: &Path) -> Option<SessionSummary> {
    summarize(path).unwrap_or_else(|error| {
        tracing::warn!(%error, "skipping an unreadable session in the listing");
        None
    })
}

fn summarize(path: &Path) -> Result<Option<SessionSummary>, StoreError> {
    let bytes = fs::read(path).map_err(io_error("reading the session log", path))?;
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(header) = serde_json::from_slice::<Header>(first) else {
        return Ok(None);
    };
    let modified_ns = fs::metadata(path)
        .map(|m| u128::from(index::modified_ns(&m)))
        .unwrap_or(u128::from(header.created_at) * 1_000_000);
    let title = last_title(&bytes);
    let child = ChildInfo::of_bytes(&header, &bytes);
    Ok(Some(SessionSummary {
        id: header.id,
        cwd: header.cwd,
        additional_directories: header.additional_directories,
        title,
        updated_ms: (modified_ns / 1_000_000) as u64,
        updated_ns: modified_ns,
        parent_session: header.parent_session,
        child,
        started_over: header.started_over,
    }))
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;

//! Appending to one session's log file.
//!
//! Every event is handed to the OS (one `write(2)` of its whole line, no buffering across
//! events) before `append` returns, so before any client is shown it: a crash of kin loses
//! nothing it reported. `sync` at turn end makes the lines durable against a crash of the
//! machine. An append is all or nothing: when a write fails part way (a full disk), the file is
//! cut back to the end of its last complete line, so later appends never glue onto half a line.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::StoreError;
use super::event::{Event, EventBody, Header};
use super::index::IndexEntry;
use super::lock::SessionLock;
use super::summary::last_title;

/// A session's log open for appending: one JSON line per event, written by this process alone (it holds the session's lock).
pub struct SessionLog {
    path: PathBuf,
    file: File,
    /// This process's writer lock on the file, held as long as the log is open.
    _lock: SessionLock,
    /// Length of the file up to the end of its last complete line.
    len: u64,
    /// A failed write may have left part of a line beyond `len` that could not be cut off
    /// yet; it is cut before the next write.
    torn: bool,
    /// The line being written, kept to reuse its allocation.
    line: Vec<u8>,
    next_seq: u64,
    /// What `session/list` shows of this session, refreshed in the store's index.
    index: IndexEntry,
    /// Appends since the index entry was last refreshed.
    unindexed: bool,
    /// Test hook: the next write lets this many bytes through, then fails as a full disk.
    #[cfg(test)]
    fail_after: Option<usize>,
}

impl SessionLog {
    pub(crate) fn new(
        path: PathBuf,
        file: File,
        lock: SessionLock,
        len: u64,
        next_seq: u64,
        index: IndexEntry,
    ) -> Self {
        Self {
            path,
            file,
            _lock: lock,
            len,
            torn: false,
            line: Vec::with_capacity(512),
            next_seq,
            index,
            unindexed: false,
            #[cfg(test)]
            fail_after: None,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self) -> impl FnOnce(io::Error) -> StoreError + '_ {
        |source| StoreError::Io {
            op: "writing to the session log",
            path: self.path.clone(),
            source,
        }
    }

    pub(crate) fn write_header(&mut self, header: &Header) -> Result<(), StoreError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, header).map_err(|e| self.io()(e.into()))?;
        self.line.push(b'\n');
        self.write_pending()
    }

    /// Writes `self.line` (whole lines) to the file, or nothing: a failed write is cut back.
    fn write_pending(&mut self) -> Result<(), StoreError> {
        if self.torn {
            self.file.set_len(self.len).map_err(|e| self.io()(e))?;
            self.torn = false;
        }
        let line = std::mem::take(&mut self.line);
        let written = self.write_all(&line);
        self.line = line;
        match written {
            Ok(()) => {
                self.len += self.line.len() as u64;
                self.unindexed = true;
                Ok(())
            }
            Err(error) => {
                // O_APPEND: cutting the file back also moves the next write back here.
                self.torn = self.file.set_len(self.len).is_err();
                tracing::warn!(path = %self.path.display(), %error, cut_back = !self.torn, "a session log write failed");
                Err(self.io()(error))
            }
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        if let Some(limit) = self.fail_after.take() {
            self.file.write_all(&bytes[..limit.min(bytes.len())])?;
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        self.file.write_all(bytes)
    }

    /// Appends a plain event, stamping seq and time.
    pub(crate) fn append(&mut self, body: EventBody, time: u64) -> Result<Event, StoreError> {
        self.append_with(body, time, None, None)
    }

    /// Appends a surface event (a message the model sees), linked to the events it came from.
    pub(crate) fn append_surface(
        &mut self,
        body: EventBody,
        time: u64,
        source_event_seqs: Option<Vec<u64>>,
    ) -> Result<Event, StoreError> {
        self.append_with(body, time, source_event_seqs, Some(Value::from("append")))
    }

    fn append_with(
        &mut self,
        body: EventBody,
        time: u64,
        source_event_seqs: Option<Vec<u64>>,
        surface_op: Option<Value>,
    ) -> Result<Event, StoreError> {
        let event = Event {
            seq: self.next_seq,
            time,
            body,
            source_event_seqs,
            surface_op: surface_op.map(Box::new),
        };
        self.line.clear();
        serde_json::to_writer(&mut self.line, &event).map_err(|e| self.io()(e.into()))?;
        self.line.push(b'\n');
        self.write_pending()?;
        self.next_seq += 1;
        if let EventBody::SessionTitle(title) = &event.body {
            self.index.set_title(&title.title);
            self.refresh_index();
        } else if self.index.observe(&event.body) {
            self.refresh_index();
        }
        Ok(event)
    }

    /// Appends lines taken verbatim from another log (a fork seed read from the parent's
    /// file); `next_seq` is the seq after the last of them.
    pub(crate) fn append_raw_lines(
        &mut self,
        lines: &[u8],
        next_seq: u64,
    ) -> Result<(), StoreError> {
        self.line.clear();
        self.line.extend_from_slice(lines);
        self.write_pending()?;
        self.next_seq = next_seq;
        if let Some(title) = last_title(lines) {
            self.index.set_title(&title);
        }
        Ok(())
    }

    /// Copies already-stamped events verbatim (a fork seed); seqs must continue this log.
    /// Encoded into one buffer and written at once: a seed can be tens of thousands of lines.
    pub(crate) fn append_copied(&mut self, events: &[Event]) -> Result<(), StoreError> {
        self.line.clear();
        for event in events {
            serde_json::to_writer(&mut self.line, event).map_err(|e| self.io()(e.into()))?;
            self.line.push(b'\n');
        }
        self.write_pending()?;
        if let Some(last) = events.last() {
            self.next_seq = last.seq + 1;
        }
        let title = events.iter().rev().find_map(|event| match &event.body {
            EventBody::SessionTitle(title) => Some(&title.title),
            _ => None,
        });
        if let Some(title) = title {
            self.index.set_title(title);
        }
        Ok(())
    }

    /// Kept for callers that mark step boundaries: every append is already in the file.
    pub(crate) fn flush(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Waits until the lines written so far are on disk, and brings the session's entry in
    /// the store's index up to date.
    pub(crate) fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(|e| self.io()(e))?;
        if self.unindexed {
            self.refresh_index();
        }
        Ok(())
    }

    /// Records the session's current summary in the index; a failure only makes the index
    /// stale (the next listing rebuilds it), so it is logged, not returned.
    pub(crate) fn refresh_index(&mut self) {
        self.unindexed = false;
        if let Err(error) = self.index.refresh(&self.file) {
            tracing::warn!(%error, "could not update the session index");
        }
    }
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        if self.unindexed {
            self.refresh_index();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{SessionStore, StepRef};

    fn step(turn: u32) -> EventBody {
        EventBody::StepStart(StepRef { turn, step: 1 })
    }

    #[test]
    fn a_failed_write_is_cut_back_and_later_appends_continue_the_log() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        let header = Header::new("s1".into(), 1, "/w".into(), vec![]);
        let mut log = store.create(&header).unwrap();
        log.append(step(1), 7).unwrap();
        let good = std::fs::read(log.path()).unwrap();

        log.fail_after = Some(10);
        let error = log.append(step(2), 7).unwrap_err();
        assert!(
            error.to_string().contains("No space left on device"),
            "{error}"
        );
        assert_eq!(
            std::fs::read(log.path()).unwrap(),
            good,
            "the torn line was cut off"
        );

        // Space is back: the next event takes the seq the failed one did not use.
        let event = log.append(step(3), 7).unwrap();
        assert_eq!(event.seq, 1);
        let loaded = store.load("s1").unwrap();
        assert_eq!(loaded.events.len(), 2);
        assert!(loaded.torn_tail.is_none() && loaded.set_aside.is_empty());
    }

    #[test]
    fn a_failed_fork_seed_copy_leaves_only_the_header() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        let header = Header::new("s1".into(), 1, "/w".into(), vec![]);
        let mut log = store.create(&header).unwrap();
        let good = std::fs::read(log.path()).unwrap();
        log.fail_after = Some(100);
        let seed: Vec<Event> = (0..20).map(|seq| Event::new(seq, 0, step(1))).collect();
        assert!(log.append_copied(&seed).is_err());
        assert_eq!(std::fs::read(log.path()).unwrap(), good);
    }

    #[test]
    fn each_event_is_in_the_file_when_append_returns() {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        let header = Header::new("s1".into(), 1, "/w".into(), vec![]);
        let mut log = store.create(&header).unwrap();
        for turn in 1..=3 {
            log.append(step(turn), 7).unwrap();
            // Read through another handle, as a reader after kill -9 would.
            let loaded = store.load("s1").unwrap();
            assert_eq!(loaded.events.len(), turn as usize);
        }
    }
}

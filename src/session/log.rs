//! Appending to one session's log file.
//!
//! Events are buffered as they happen, written out at every step boundary (`flush`) and made
//! durable at turn end (`sync`); a crash loses at most the step in flight, and what it leaves
//! behind is at worst one torn last line, which loading tolerates.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::event::{Event, EventBody, Header};
use super::store::StoreError;

pub struct SessionLog {
    path: PathBuf,
    file: BufWriter<File>,
    next_seq: u64,
}

impl SessionLog {
    pub(crate) fn new(path: PathBuf, file: File, next_seq: u64) -> Self {
        Self {
            path,
            file: BufWriter::new(file),
            next_seq,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        |source| StoreError::Io {
            path: self.path.clone(),
            source,
        }
    }

    pub(crate) fn write_header(&mut self, header: &Header) -> Result<(), StoreError> {
        let line = serde_json::to_vec(header).map_err(|e| self.io()(e.into()))?;
        self.write_line(&line)
    }

    fn write_line(&mut self, line: &[u8]) -> Result<(), StoreError> {
        self.file.write_all(line).map_err(|e| self.io()(e))?;
        self.file.write_all(b"\n").map_err(|e| self.io()(e))
    }

    /// Appends a plain event, stamping seq and time.
    pub fn append(&mut self, body: EventBody, time: u64) -> Result<Event, StoreError> {
        self.append_with(body, time, None, None)
    }

    /// Appends a surface event (a message the model sees), linked to the events it came from.
    pub fn append_surface(
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
            surface_op,
        };
        let line = serde_json::to_vec(&event).map_err(|e| self.io()(e.into()))?;
        self.write_line(&line)?;
        self.next_seq += 1;
        Ok(event)
    }

    /// Appends lines taken verbatim from another log (a fork seed read from the parent's
    /// file); `next_seq` is the seq after the last of them.
    pub fn append_raw_lines(&mut self, lines: &[u8], next_seq: u64) -> Result<(), StoreError> {
        self.file.write_all(lines).map_err(|e| self.io()(e))?;
        self.next_seq = next_seq;
        Ok(())
    }

    /// Copies already-stamped events verbatim (a fork seed); seqs must continue this log.
    /// Encoded into one buffer and written at once: a seed can be tens of thousands of lines.
    pub fn append_copied(&mut self, events: &[Event]) -> Result<(), StoreError> {
        let mut lines = Vec::with_capacity(events.len() * 256);
        for event in events {
            serde_json::to_writer(&mut lines, event).map_err(|e| self.io()(e.into()))?;
            lines.push(b'\n');
        }
        self.file.write_all(&lines).map_err(|e| self.io()(e))?;
        if let Some(last) = events.last() {
            self.next_seq = last.seq + 1;
        }
        Ok(())
    }

    /// Hands buffered lines to the OS.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.file.flush().map_err(|e| self.io()(e))
    }

    /// Flushes and waits until the data is on disk.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.flush()?;
        self.file.get_ref().sync_data().map_err(|e| self.io()(e))
    }
}

impl Drop for SessionLog {
    fn drop(&mut self) {
        if let Err(error) = self.file.flush() {
            tracing::warn!(path = %self.path.display(), %error, "could not flush a session log on close");
        }
    }
}

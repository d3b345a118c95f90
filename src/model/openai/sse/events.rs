//! Server-Sent Events text -> events, fed bytes as they arrive.
//!
//! Our own parser rather than a crate's because it must stay linear in the size of what it is
//! fed: every byte is scanned for a line end once, however it is split into buffers, and a
//! buffer is compacted only when all its complete lines are used up (so at most the bytes of
//! the last read are moved). Lines end at `\r\n`, `\n` or `\r`; a multi-byte character never
//! straddles a line end, so each line is checked as UTF-8 once, whole.
//!
//! Of the fields only `event` and `data` matter to us; `id`, `retry` and comments are skipped.

/// One dispatched event: its type (`message` unless an `event:` field said otherwise) and its
/// `data` lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub(crate) kind: String,
    pub(crate) data: String,
}

/// A line of the stream is not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the event stream is not valid UTF-8")]
pub(crate) struct NotUtf8;

pub(crate) struct EventParser {
    /// Bytes received and not yet compacted away; `buf[..start]` is read already.
    buf: Vec<u8>,
    /// Where the next line starts.
    start: usize,
    /// Where to go on looking for a line end: `buf[start..scan]` has none.
    scan: usize,
    /// The last line ended in `\r` at the end of the buffer; a `\n` next belongs to it.
    skip_lf: bool,
    /// No line was read yet (a byte-order mark may open the stream).
    first_line: bool,
    fields: Fields,
}

/// The event being built from its field lines.
#[derive(Default)]
struct Fields {
    kind: String,
    data: String,
}

impl EventParser {
    pub(crate) fn new() -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            scan: 0,
            skip_lf: false,
            first_line: true,
            fields: Fields::default(),
        }
    }

    /// Appends bytes read from the stream. Call [`EventParser::next_event`] until it returns
    /// `None` before pushing again.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scan -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete event in what was pushed, or `None` when more bytes are needed. An
    /// event still open when the stream ends is never dispatched (as the SSE spec says).
    pub(crate) fn next_event(&mut self) -> Result<Option<Event>, NotUtf8> {
        while let Some((from, to)) = self.next_line() {
            let mut line = std::str::from_utf8(&self.buf[from..to]).map_err(|_| NotUtf8)?;
            if std::mem::take(&mut self.first_line) {
                line = line.strip_prefix('\u{feff}').unwrap_or(line);
            }
            if let Some(event) = self.fields.line(line) {
                return Ok(Some(event));
            }
        }
        Ok(None)
    }

    /// The bounds of the next complete line, consuming it and its line end.
    fn next_line(&mut self) -> Option<(usize, usize)> {
        if self.skip_lf {
            let next = *self.buf.get(self.start)?;
            self.skip_lf = false;
            if next == b'\n' {
                self.start += 1;
                self.scan = self.scan.max(self.start);
            }
        }
        let found = self.buf[self.scan..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r');
        let Some(offset) = found else {
            self.scan = self.buf.len();
            return None;
        };
        let end = self.scan + offset;
        let line = (self.start, end);
        self.start = end + 1;
        if self.buf[end] == b'\r' {
            match self.buf.get(self.start) {
                Some(b'\n') => self.start += 1,
                Some(_) => {}
                None => self.skip_lf = true,
            }
        }
        self.scan = self.start;
        Some(line)
    }
}

impl Fields {
    /// Takes one line; an empty line ends the event and dispatches it if it has data.
    fn line(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            let kind = std::mem::take(&mut self.kind);
            let mut data = std::mem::take(&mut self.data);
            if data.is_empty() {
                return None;
            }
            data.pop(); // the `\n` after the last data line
            let kind = if kind.is_empty() {
                "message".to_owned()
            } else {
                kind
            };
            return Some(Event { kind, data });
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.kind),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            // Comments (empty field name), `id`, `retry` and unknown fields.
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `parts` one by one and collects every event.
    fn parse(parts: &[&[u8]]) -> Result<Vec<Event>, NotUtf8> {
        let mut parser = EventParser::new();
        let mut events = Vec::new();
        for part in parts {
            parser.push(part);
            while let Some(event) = parser.next_event()? {
                events.push(event);
            }
        }
        Ok(events)
    }

    fn event(kind: &str, data: &str) -> Event {
        Event {
            kind: kind.into(),
            data: data.into(),
        }
    }

    #[test]
    fn fields_comments_and_line_ends() {
        let text = "\u{feff}: comment\r\nevent: error\rdata: a\ndata:b\r\nid: 7\nretry: 10\n\n\
                    data\n\ndata: x\n\nevent: only-a-type\n\ndata: open at the end\n";
        let events = parse(&[text.as_bytes()]).unwrap();
        assert_eq!(
            events,
            [
                event("error", "a\nb"),
                event("message", ""),
                event("message", "x")
            ]
        );
    }

    #[test]
    fn every_split_of_a_crlf_stream_gives_the_same_events() {
        let text = "data: h\u{e9}llo \u{1f600}\r\n\r\ndata: two\r\n\r\n\r\nevent: e\rdata: 3\r\r";
        let whole = parse(&[text.as_bytes()]).unwrap();
        assert_eq!(
            whole,
            [
                event("message", "h\u{e9}llo \u{1f600}"),
                event("message", "two"),
                event("e", "3")
            ]
        );
        let bytes = text.as_bytes();
        for at in 1..bytes.len() {
            for second in at + 1..bytes.len() {
                let parts = [&bytes[..at], &bytes[at..second], &bytes[second..]];
                assert_eq!(parse(&parts).unwrap(), whole, "split at {at} and {second}");
            }
        }
    }

    #[test]
    fn a_multi_megabyte_event_split_at_awkward_points_decodes_whole() {
        // 3 MiB of data made of 4-byte characters with `\r\n` line ends, cut mid-character and
        // between each `\r` and its `\n`.
        let data = "\u{1f600}".repeat(3 << 18);
        let text = format!("data: {data}\r\ndata: tail\r\n\r\n");
        let bytes = text.as_bytes();
        let crlf = bytes.len() - "\n\r\n".len();
        assert_eq!(&bytes[crlf - 1..crlf + 1], b"\r\n");
        let first_crlf = "data: ".len() + data.len();
        let cuts = [
            0,
            1,
            7,
            8,
            9,
            4096 + 2,
            1 << 20,
            (2 << 20) + 3,
            first_crlf + 1,
            crlf,
            bytes.len(),
        ];
        let parts: Vec<&[u8]> = cuts.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
        let events = parse(&parts).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), data.len() + "\ntail".len());
        assert!(events[0].data.starts_with(&data) && events[0].data.ends_with("\ntail"));
    }

    #[test]
    fn a_line_that_is_not_utf8_is_an_error() {
        assert_eq!(parse(&[b"data: \xff\n\n"]), Err(NotUtf8));
        // A character cut across buffers is fine.
        let events = parse(&[b"data: \xc3", b"\xa9\n\n"]).unwrap();
        assert_eq!(events, [event("message", "\u{e9}")]);
    }
}

//! Newline-delimited framing with a hard cap on line length.
//!
//! We read with our own loop rather than a lines codec: a codec ends the stream on
//! an over-long line or bad UTF-8, while a protocol peer must report the bad line and go on.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Longest line we accept, in bytes (the ACP SDKs use the same default).
pub(crate) const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// Room asked of the kernel per read. The buffer is never zero-filled (`read_buf` writes into
/// spare capacity), so memory is only touched as far as input actually arrives: a 64 KiB
/// zeroed buffer cost a new `kin acp` about 16 page faults before its first request.
const READ_SIZE: usize = 64 * 1024;

/// One unit read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A complete line without its `\n` (and without a trailing `\r`).
    Line(Vec<u8>),
    /// A line longer than the cap; its bytes were discarded up to the next `\n`.
    TooLong { len: usize },
}

pub(crate) struct LineReader<R> {
    inner: R,
    /// Bytes read and not yet handed out are `buffer[start..]`.
    buffer: Vec<u8>,
    start: usize,
    cap: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(reader: R) -> Self {
        Self::with_cap(reader, MAX_LINE_BYTES)
    }

    pub(crate) fn with_cap(reader: R, cap: usize) -> Self {
        Self {
            inner: reader,
            buffer: Vec::new(),
            start: 0,
            cap,
        }
    }

    /// The next frame, or `None` at end of stream. A final line without `\n` still counts.
    pub(crate) async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        let mut line = Vec::new();
        let mut len = 0usize;
        loop {
            if self.start == self.buffer.len() {
                self.buffer.clear();
                self.start = 0;
                self.buffer.reserve(READ_SIZE);
                if self.inner.read_buf(&mut self.buffer).await? == 0 {
                    return Ok(match len {
                        0 => None,
                        _ => Some(self.finish(line, len)),
                    });
                }
            }
            let buf = &self.buffer[self.start..];
            let (take, found) = match memchr::memchr(b'\n', buf) {
                Some(pos) => (pos, true),
                None => (buf.len(), false),
            };
            if len + take <= self.cap {
                line.extend_from_slice(&buf[..take]);
            } else if !line.is_empty() {
                // Over the cap: stop keeping bytes, keep counting.
                line = Vec::new();
            }
            len += take;
            self.start += take + usize::from(found);
            if found {
                return Ok(Some(self.finish(line, len)));
            }
        }
    }

    fn finish(&self, mut line: Vec<u8>, len: usize) -> Frame {
        if len > self.cap {
            return Frame::TooLong { len };
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Frame::Line(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], cap: usize) -> Vec<Frame> {
        let mut reader = LineReader::with_cap(input, cap);
        let mut out = Vec::new();
        while let Some(frame) = reader.next_frame().await.unwrap() {
            out.push(frame);
        }
        out
    }

    #[tokio::test]
    async fn splits_lines_and_strips_cr() {
        let got = frames(b"a\r\nbc\n\nlast", 100).await;
        assert_eq!(
            got,
            vec![
                Frame::Line(b"a".to_vec()),
                Frame::Line(b"bc".to_vec()),
                Frame::Line(Vec::new()),
                Frame::Line(b"last".to_vec()),
            ]
        );
    }

    /// Lines longer than one read (64 KiB), kept and over the cap.
    #[tokio::test]
    async fn lines_spanning_several_reads() {
        let long = vec![b'x'; 200 * 1024];
        let mut input = long.clone();
        input.extend_from_slice(b"\nshort\n");
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\r\n");
        let got = frames(&input, 300 * 1024).await;
        assert_eq!(
            got,
            vec![
                Frame::Line(long.clone()),
                Frame::Line(b"short".to_vec()),
                Frame::Line(long.clone()),
            ]
        );
        let got = frames(&input, 100 * 1024).await;
        assert_eq!(
            got,
            vec![
                Frame::TooLong { len: long.len() },
                Frame::Line(b"short".to_vec()),
                Frame::TooLong {
                    len: long.len() + 1
                },
            ]
        );
    }

    #[tokio::test]
    async fn over_long_line_is_reported_and_reading_goes_on() {
        let got = frames(b"0123456789\nok\n", 4).await;
        assert_eq!(
            got,
            vec![Frame::TooLong { len: 10 }, Frame::Line(b"ok".to_vec())]
        );
    }
}

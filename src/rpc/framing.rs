//! Newline-delimited framing with a hard cap on line length.
//!
//! We read with our own `fill_buf` loop rather than a lines codec: a codec ends the stream on
//! an over-long line or bad UTF-8, while a protocol peer must report the bad line and go on.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// Longest line we accept, in bytes (the ACP SDKs use the same default).
pub const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// One unit read from the stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its `\n` (and without a trailing `\r`).
    Line(Vec<u8>),
    /// A line longer than the cap; its bytes were discarded up to the next `\n`.
    TooLong { len: usize },
}

pub struct LineReader<R> {
    inner: BufReader<R>,
    cap: usize,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub fn new(reader: R) -> Self {
        Self::with_cap(reader, MAX_LINE_BYTES)
    }

    pub fn with_cap(reader: R, cap: usize) -> Self {
        Self {
            inner: BufReader::with_capacity(64 * 1024, reader),
            cap,
        }
    }

    /// The next frame, or `None` at end of stream. A final line without `\n` still counts.
    pub async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        let mut line = Vec::new();
        let mut len = 0usize;
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                return Ok(match len {
                    0 => None,
                    _ => Some(self.finish(line, len)),
                });
            }
            let (take, found) = match memchr(buf) {
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
            self.inner.consume(take + usize::from(found));
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

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
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

    #[tokio::test]
    async fn over_long_line_is_reported_and_reading_goes_on() {
        let got = frames(b"0123456789\nok\n", 4).await;
        assert_eq!(
            got,
            vec![Frame::TooLong { len: 10 }, Frame::Line(b"ok".to_vec())]
        );
    }
}

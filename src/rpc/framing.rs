//! Newline-delimited framing with a hard cap on line length.
//!
//! We read with our own loop rather than a lines codec: a codec ends the stream on
//! an over-long line or bad UTF-8, while a protocol peer must report the bad line and go on.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Longest line we accept, in bytes (the ACP SDKs use the same default).
pub(crate) const MAX_LINE_BYTES: usize = 32 * 1024 * 1024;

/// Room asked of the kernel per read. The buffer is never zero-filled (`read_buf` writes into
/// spare capacity), so memory is only touched as far as input actually arrives.
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
    /// Bytes read and not yet handed out are `buffer[start..]`; of those, `buffer[start..scanned]`
    /// hold no `\n`. A line longer than one read grows the buffer and is read straight into it,
    /// so a megabyte line is handed out without being copied again.
    buffer: Vec<u8>,
    start: usize,
    scanned: usize,
    /// Bytes of an over-long line dropped so far (its rest is dropped up to the next `\n`).
    dropped: Option<usize>,
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
            scanned: 0,
            dropped: None,
            cap,
        }
    }

    /// The next frame, or `None` at end of stream. A final line without `\n` still counts.
    /// Cancel-safe: what was read stays in the reader.
    pub(crate) async fn next_frame(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            if let Some(pos) = memchr::memchr(b'\n', &self.buffer[self.scanned..]) {
                let end = self.scanned + pos;
                return Ok(Some(self.take(end, 1)));
            }
            self.scanned = self.buffer.len();
            let pending = self.scanned - self.start;
            if pending > self.cap || self.dropped.is_some() {
                // Over the cap: stop keeping bytes, keep counting.
                *self.dropped.get_or_insert(0) += pending;
                self.buffer.clear();
                (self.start, self.scanned) = (0, 0);
            } else if self.start > 0 && self.buffer.capacity() - self.buffer.len() < READ_SIZE {
                // Move the start of a line to the front rather than grow the buffer for it.
                self.buffer.drain(..self.start);
                (self.start, self.scanned) = (0, pending);
            }
            self.buffer.reserve(READ_SIZE);
            if self.inner.read_buf(&mut self.buffer).await? == 0 {
                let end = self.buffer.len();
                return Ok((end > self.start || self.dropped.is_some()).then(|| self.take(end, 0)));
            }
        }
    }

    /// Hands out `buffer[start..end]` and skips `skip` more bytes (the `\n`).
    fn take(&mut self, end: usize, skip: usize) -> Frame {
        let len = end - self.start + self.dropped.take().unwrap_or(0);
        let next = end + skip;
        let frame = if len > self.cap {
            self.start = next;
            Frame::TooLong { len }
        } else if end - self.start > self.buffer.len() - next {
            // The line is most of the buffer: hand the buffer itself out and keep what follows.
            let rest = self.buffer.split_off(next);
            let mut line = std::mem::replace(&mut self.buffer, rest);
            line.truncate(end);
            line.drain(..self.start);
            self.start = 0;
            Frame::Line(without_cr(line))
        } else {
            let line = self.buffer[self.start..end].to_vec();
            self.start = next;
            Frame::Line(without_cr(line))
        };
        if self.start >= self.buffer.len() {
            self.start = 0;
            match self.buffer.capacity() > 4 * READ_SIZE {
                // A long line's room is not kept for the short lines that follow.
                true => self.buffer = Vec::new(),
                false => self.buffer.clear(),
            }
        }
        self.scanned = self.start;
        frame
    }
}

fn without_cr(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    line
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

    /// Hands out its input a few bytes at a time, as a pipe may.
    struct Trickle {
        input: Vec<u8>,
        at: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let end = (self.at + self.step).min(self.input.len());
            let take = (end - self.at).min(buf.remaining());
            buf.put_slice(&self.input[self.at..self.at + take]);
            self.at += take;
            self.step = self.step % 97 + 31;
            std::task::Poll::Ready(Ok(()))
        }
    }

    /// Every way a read can split lines (mid-line, mid-`\r\n`, several lines in one read, a
    /// long line followed by the start of the next) gives the same frames.
    #[tokio::test]
    async fn frames_do_not_depend_on_how_reads_split_the_input() {
        let mut input = Vec::new();
        for n in 0..300 {
            input.extend(std::iter::repeat_n(b'a' + (n % 26) as u8, (n * 37) % 2000));
            input.extend_from_slice(if n % 3 == 0 { b"\r\n" } else { b"\n" });
        }
        input.extend_from_slice(b"tail");
        let whole: Vec<Frame> = input
            .split(|&b| b == b'\n')
            .map(|line| match line.len() > 1500 {
                true => Frame::TooLong { len: line.len() },
                false => Frame::Line(line.strip_suffix(b"\r").unwrap_or(line).to_vec()),
            })
            .collect();
        assert_eq!(frames(&input, 1500).await, whole);
        for step in [1, 7, 64, 1000] {
            let mut reader = LineReader::with_cap(
                Trickle {
                    input: input.clone(),
                    at: 0,
                    step,
                },
                1500,
            );
            let mut got = Vec::new();
            while let Some(frame) = reader.next_frame().await.unwrap() {
                got.push(frame);
            }
            assert_eq!(got, whole, "reads of {step} bytes and on");
        }
        assert_eq!(whole.len(), 301);
        assert_eq!(whole[300], Frame::Line(b"tail".to_vec()));
        assert!(whole.iter().any(|f| matches!(f, Frame::TooLong { .. })));
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

//! A request body held in parts, so that a long payload kept elsewhere (a pasted image's
//! base64, which is a slice of the line it came in) goes into it without being copied.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// Payloads at least this long are shared, not copied: below it a copy costs less than a part.
const SHARE_FROM: usize = 64 * 1024;

/// A finished body: its parts in order.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestBody {
    parts: Vec<Part>,
}

#[derive(Clone, Debug)]
struct Part {
    bytes: Bytes,
    /// Someone else's payload: never taken back to be written into.
    shared: bool,
}

impl RequestBody {
    pub(crate) fn len(&self) -> usize {
        self.parts.iter().map(|part| part.bytes.len()).sum()
    }

    /// Whether the body opens with `prefix`.
    pub(crate) fn starts_with(&self, mut prefix: &[u8]) -> bool {
        for part in &self.parts {
            let n = part.bytes.len().min(prefix.len());
            if part.bytes[..n] != prefix[..n] {
                return false;
            }
            prefix = &prefix[n..];
        }
        prefix.is_empty()
    }

    /// The body for one request: a body of one part goes as it is; parts go one after
    /// another, with their total length announced.
    pub(crate) fn to_reqwest(&self) -> reqwest::Body {
        match self.parts.as_slice() {
            [] => reqwest::Body::from(Bytes::new()),
            [one] => reqwest::Body::from(one.bytes.clone()),
            parts => reqwest::Body::wrap(Parts {
                left: self.len() as u64,
                parts: parts.iter().map(|part| part.bytes.clone()).collect(),
            }),
        }
    }

    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.parts
            .iter()
            .flat_map(|part| part.bytes.to_vec())
            .collect()
    }
}

/// Writes a body; bytes go into an open buffer, long payloads in as parts of their own.
#[derive(Default)]
pub(crate) struct BodyWriter {
    parts: Vec<Part>,
    /// Bytes in `parts`.
    done: usize,
    open: Vec<u8>,
}

impl BodyWriter {
    /// Goes on from the first `keep` bytes of `last`. The part they end in is written on in
    /// place when nobody else holds it (the last call has let go), else it is cut (without
    /// a copy) and a new buffer opens after it.
    pub(crate) fn resume(last: RequestBody, keep: usize) -> Self {
        let mut writer = Self::default();
        for part in last.parts {
            let room = keep - writer.done;
            if part.bytes.len() < room {
                writer.done += part.bytes.len();
                writer.parts.push(part);
                continue;
            }
            if !part.shared && part.bytes.is_unique() {
                let mut open = Vec::from(part.bytes);
                open.truncate(room);
                writer.open = open;
            } else if room > 0 {
                writer.done += room;
                writer.parts.push(Part {
                    bytes: part.bytes.slice(..room),
                    shared: part.shared,
                });
            }
            break;
        }
        writer
    }

    pub(crate) fn len(&self) -> usize {
        self.done + self.open.len()
    }

    pub(crate) fn last(&self) -> Option<u8> {
        match self.open.last() {
            Some(&byte) => Some(byte),
            None => self
                .parts
                .last()
                .and_then(|part| part.bytes.last().copied()),
        }
    }

    pub(crate) fn push(&mut self, byte: u8) {
        self.open.push(byte);
    }

    pub(crate) fn extend_from_slice(&mut self, bytes: &[u8]) {
        self.open.extend_from_slice(bytes);
    }

    /// Appends `bytes`: a long payload as a part of its own, shared with whoever holds it.
    pub(crate) fn share(&mut self, bytes: &Bytes) {
        if bytes.len() < SHARE_FROM {
            return self.extend_from_slice(bytes);
        }
        self.close_open();
        self.done += bytes.len();
        self.parts.push(Part {
            bytes: bytes.clone(),
            shared: true,
        });
    }

    pub(crate) fn finish(mut self) -> RequestBody {
        self.close_open();
        RequestBody { parts: self.parts }
    }

    fn close_open(&mut self) {
        if !self.open.is_empty() {
            let bytes = Bytes::from(std::mem::take(&mut self.open));
            self.done += bytes.len();
            self.parts.push(Part {
                bytes,
                shared: false,
            });
        }
    }
}

impl std::io::Write for BodyWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The parts of a body as an HTTP body of known length (sent with `Content-Length`).
struct Parts {
    parts: VecDeque<Bytes>,
    left: u64,
}

impl http_body::Body for Parts {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let next = self.parts.pop_front();
        if let Some(part) = &next {
            self.left -= part.len() as u64;
        }
        Poll::Ready(next.map(|part| Ok(Frame::data(part))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload() -> Bytes {
        Bytes::from(vec![b'x'; SHARE_FROM])
    }

    #[test]
    fn a_long_payload_goes_in_shared_and_the_rest_is_written_around_it() {
        let image = payload();
        let mut writer = BodyWriter::default();
        writer.extend_from_slice(b"[\"");
        writer.share(&image);
        writer.push(b'"');
        writer.share(&Bytes::from_static(b",\"short\""));
        writer.push(b']');
        assert_eq!(writer.last(), Some(b']'));
        let body = writer.finish();
        assert_eq!(body.parts.len(), 3);
        assert_eq!(body.parts[1].bytes.as_ptr(), image.as_ptr(), "not copied");
        let text = body.to_vec();
        assert_eq!(text.len(), body.len());
        assert!(text.ends_with(b"\",\"short\"]"));
        assert!(body.starts_with(b"[\"xx") && !body.starts_with(b"[\"y"));
        assert!(!RequestBody::default().starts_with(b"["));
    }

    #[test]
    fn resuming_keeps_a_prefix_and_never_writes_into_a_held_or_shared_part() {
        let image = payload();
        let mut writer = BodyWriter::default();
        writer.extend_from_slice(b"ab");
        writer.share(&image);
        writer.extend_from_slice(b"cd");
        let body = writer.finish();
        let held = body.clone();
        // Cut inside the image: the image part is sliced, not reused.
        let mut cut = BodyWriter::resume(body.clone(), 3);
        cut.push(b'!');
        let cut = cut.finish();
        assert_eq!(cut.to_vec(), b"abx!");
        assert_eq!(image, vec![b'x'; SHARE_FROM], "the payload is as it was");
        // Cut in the last part, still held by `held`: copied around, `held` unchanged.
        let mut on = BodyWriter::resume(body, 2 + SHARE_FROM + 1);
        on.push(b'?');
        let on = on.finish();
        assert!(on.to_vec().ends_with(b"xc?"));
        assert!(held.to_vec().ends_with(b"xcd"));
        // Nobody holds the last part any more: it is written on in place.
        drop(held);
        let last = on.parts[2].bytes.as_ptr();
        let mut again = BodyWriter::resume(on, 2 + SHARE_FROM + 1);
        assert_eq!(again.open.as_ptr(), last, "reused");
        again.push(b'.');
        assert!(again.finish().to_vec().ends_with(b"xc."));
    }

    #[test]
    fn the_http_body_gives_every_part_and_announces_the_length() {
        use http_body::Body as _;
        let mut writer = BodyWriter::default();
        writer.extend_from_slice(b"{");
        writer.share(&payload());
        writer.push(b'}');
        let body = writer.finish();
        let mut parts = Parts {
            left: body.len() as u64,
            parts: body.parts.iter().map(|p| p.bytes.clone()).collect(),
        };
        assert_eq!(parts.size_hint().exact(), Some(body.len() as u64));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut got = Vec::new();
        while let Poll::Ready(Some(Ok(frame))) = Pin::new(&mut parts).poll_frame(&mut cx) {
            got.extend_from_slice(&frame.into_data().unwrap());
        }
        assert_eq!(got, body.to_vec());
        assert!(parts.is_end_stream());
        assert_eq!(parts.size_hint().exact(), Some(0));
    }
}

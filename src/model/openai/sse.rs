//! A response body (a stream of byte buffers) -> chunks: guards against stalls, parses
//! Server-Sent Events with `eventsource-stream`, and feeds each event's data to the
//! [`ChunkDecoder`]. Knows nothing of HTTP status codes or retries; failures are reported as
//! [`StreamFailure`]s and the caller decides what they mean.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStream, EventStreamError};
use futures::stream::{BoxStream, Stream, StreamExt};

use super::decode::{excerpt, ChunkDecoder, DecodeError};
use crate::session::Chunk;

/// The largest buffer handed to the SSE parser at once. The parser copies its unparsed rest
/// after every line, so a huge buffer (a fast local server can deliver hundreds of kilobytes
/// in one read) would cost time quadratic in its size; small slices keep it linear.
const MAX_SLICE: usize = 4096;

/// Why a body stopped yielding chunks.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamFailure {
    /// Reading the body failed (connection reset, ...).
    Transport(String),
    /// No bytes arrived within the stall timeout.
    Stalled,
    /// The body ended before the response was complete.
    EndedEarly,
    /// The bytes are not an event stream of JSON chunks.
    Malformed(String),
    /// The endpoint sent an error object or event inside the stream.
    Reported(String),
}

impl StreamFailure {
    /// Whether trying the request again could help, when nothing was streamed yet.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Transport(_) | Self::EndedEarly)
    }
}

#[derive(Debug)]
enum Transport {
    Read(String),
    Stalled,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Read(detail) => f.write_str(detail),
            Self::Stalled => f.write_str("stalled"),
        }
    }
}

type Guarded = BoxStream<'static, Result<Bytes, Transport>>;

/// Wraps a body: each read must produce bytes within `stall`, else the stream yields
/// `Transport::Stalled` and ends; large buffers are cut into slices of at most [`MAX_SLICE`].
fn guard<S, E>(body: S, stall: Duration) -> Guarded
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + 'static,
{
    struct State<S> {
        body: std::pin::Pin<Box<S>>,
        rest: Bytes,
        ended: bool,
    }
    let state = State {
        body: Box::pin(body),
        rest: Bytes::new(),
        ended: false,
    };
    futures::stream::unfold(state, move |mut state| async move {
        if state.ended {
            return None;
        }
        while state.rest.is_empty() {
            match tokio::time::timeout(stall, state.body.next()).await {
                Err(_) => {
                    state.ended = true;
                    return Some((Err(Transport::Stalled), state));
                }
                Ok(None) => return None,
                Ok(Some(Err(error))) => {
                    state.ended = true;
                    return Some((Err(Transport::Read(error_chain(&error))), state));
                }
                Ok(Some(Ok(bytes))) => state.rest = bytes,
            }
        }
        let slice = state.rest.split_to(state.rest.len().min(MAX_SLICE));
        Some((Ok(slice), state))
    })
    .boxed()
}

/// An error and its causes, `: `-separated (reqwest puts the useful part in the sources).
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Decodes one response body into chunks.
pub struct SseDecoder {
    events: EventStream<Guarded>,
    decoder: ChunkDecoder,
    pending: VecDeque<Chunk>,
    scratch: Vec<Chunk>,
    done: bool,
}

impl SseDecoder {
    pub fn new<S, E>(body: S, stall: Duration) -> Self
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        Self {
            events: EventStream::new(guard(body, stall)),
            decoder: ChunkDecoder::new(),
            pending: VecDeque::new(),
            scratch: Vec::new(),
            done: false,
        }
    }

    /// The next chunk; `None` once the response is complete (after its `finish` chunk) or
    /// after a failure was returned.
    pub async fn next(&mut self) -> Option<Result<Chunk, StreamFailure>> {
        loop {
            if let Some(chunk) = self.pending.pop_front() {
                return Some(Ok(chunk));
            }
            if self.done {
                return None;
            }
            let result = match self.events.next().await {
                Some(Ok(event)) => self.event(&event.event, &event.data),
                Some(Err(error)) => Err(match error {
                    EventStreamError::Transport(Transport::Stalled) => StreamFailure::Stalled,
                    EventStreamError::Transport(Transport::Read(detail)) => {
                        StreamFailure::Transport(detail)
                    }
                    EventStreamError::Utf8(_) => {
                        StreamFailure::Malformed("the event stream is not valid UTF-8".into())
                    }
                    EventStreamError::Parser(error) => StreamFailure::Malformed(format!(
                        "not a valid event stream near {:?}",
                        excerpt(&error.input)
                    )),
                }),
                // Some endpoints end the body without `[DONE]` after the finish reason.
                None if self.decoder.saw_finish_reason() => {
                    self.decoder.finish(&mut self.scratch);
                    self.done = true;
                    Ok(())
                }
                None => Err(StreamFailure::EndedEarly),
            };
            if let Err(failure) = result {
                self.done = true;
                self.pending.clear();
                return Some(Err(failure));
            }
            self.pending.extend(self.scratch.drain(..));
        }
    }

    fn event(&mut self, kind: &str, data: &str) -> Result<(), StreamFailure> {
        if kind == "error" {
            return Err(StreamFailure::Reported(excerpt(data)));
        }
        if data.trim() == "[DONE]" {
            self.decoder.finish(&mut self.scratch);
            self.done = true;
            return Ok(());
        }
        self.decoder
            .push(data, &mut self.scratch)
            .map_err(|error| match error {
                DecodeError::Reported(message) => StreamFailure::Reported(message),
                other => StreamFailure::Malformed(other.to_string()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(parts: Vec<&'static str>) -> Vec<Result<Chunk, StreamFailure>> {
        let body = futures::stream::iter(
            parts
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(Bytes::from(p))),
        );
        let mut decoder = SseDecoder::new(body, Duration::from_secs(5));
        let mut out = Vec::new();
        while let Some(item) = decoder.next().await {
            out.push(item);
        }
        out
    }

    #[tokio::test]
    async fn events_split_anywhere_decode_to_chunks_ending_in_finish() {
        let text = concat!(
            ": keep-alive\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\u{e9}\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        // Every split point, including inside the two-byte character.
        for at in 1..text.len() {
            let (a, b) = text.as_bytes().split_at(at);
            let body = futures::stream::iter(vec![
                Ok::<_, std::io::Error>(Bytes::copy_from_slice(a)),
                Ok(Bytes::copy_from_slice(b)),
            ]);
            let mut decoder = SseDecoder::new(body, Duration::from_secs(5));
            let mut chunks = Vec::new();
            while let Some(item) = decoder.next().await {
                chunks.push(item.unwrap());
            }
            assert_eq!(chunks.len(), 4, "split at {at}: {chunks:?}");
            assert_eq!(
                chunks[1],
                Chunk::TextDelta {
                    index: 0,
                    text: "h\u{e9}".into()
                }
            );
        }
    }

    #[tokio::test]
    async fn a_body_that_ends_early_is_a_failure() {
        let out = run(vec![
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n",
        ])
        .await;
        assert_eq!(out.last(), Some(&Err(StreamFailure::EndedEarly)));
    }

    #[tokio::test]
    async fn error_events_and_bad_json_are_failures() {
        let out = run(vec!["event: error\ndata: {\"message\":\"busy\"}\n\n"]).await;
        assert!(matches!(out.as_slice(), [Err(StreamFailure::Reported(m))] if m.contains("busy")));
        let out = run(vec!["data: {\"choices\": [\n\n"]).await;
        assert!(matches!(out.as_slice(), [Err(StreamFailure::Malformed(_))]));
    }
}

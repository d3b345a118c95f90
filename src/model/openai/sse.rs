//! A response body (a stream of byte buffers) -> chunks: guards against stalls, parses
//! Server-Sent Events ([`events`]) and feeds each event's data to the [`ChunkDecoder`]. Knows
//! nothing of HTTP status codes or retries; failures are reported as [`StreamFailure`]s and
//! the caller decides what they mean.

mod events;

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, Stream, StreamExt};

use self::events::EventParser;
use super::decode::{excerpt, ChunkDecoder, DecodeError};
use crate::session::Chunk;

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
    pub(crate) fn retryable(&self) -> bool {
        matches!(self, Self::Transport(_) | Self::EndedEarly)
    }
}

/// An error and its causes, `: `-separated (reqwest puts the useful part in the sources).
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
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
    /// The body, its read errors already turned into text.
    body: BoxStream<'static, Result<Bytes, String>>,
    /// How long one read may take before the stream counts as stalled.
    stall: Duration,
    events: EventParser,
    decoder: ChunkDecoder,
    pending: VecDeque<Chunk>,
    scratch: Vec<Chunk>,
    done: bool,
}

impl SseDecoder {
    /// Decodes `body`, giving up when no bytes arrive for `stall`.
    pub fn new<S, E>(body: S, stall: Duration) -> Self
    where
        S: Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        Self {
            body: body.map(|read| read.map_err(|e| error_chain(&e))).boxed(),
            stall,
            events: EventParser::new(),
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
            if let Err(failure) = self.advance().await {
                self.done = true;
                self.pending.clear();
                return Some(Err(failure));
            }
            self.pending.extend(self.scratch.drain(..));
        }
    }

    /// Decodes the next complete event, reading the body until there is one.
    async fn advance(&mut self) -> Result<(), StreamFailure> {
        loop {
            let event = self
                .events
                .next_event()
                .map_err(|error| StreamFailure::Malformed(error.to_string()))?;
            if let Some(event) = event {
                return self.event(&event.kind, &event.data);
            }
            match tokio::time::timeout(self.stall, self.body.next()).await {
                Err(_) => return Err(StreamFailure::Stalled),
                Ok(Some(Err(detail))) => return Err(StreamFailure::Transport(detail)),
                Ok(Some(Ok(bytes))) => self.events.push(&bytes),
                // Some endpoints end the body without `[DONE]` after the finish reason.
                Ok(None) if self.decoder.saw_finish_reason() => {
                    self.decoder.finish(&mut self.scratch);
                    self.done = true;
                    return Ok(());
                }
                Ok(None) => return Err(StreamFailure::EndedEarly),
            }
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
    async fn a_multi_megabyte_delta_cut_mid_character_and_mid_crlf_decodes_whole() {
        let text = "\u{e9}\u{1f600}".repeat(1 << 19); // 3 MiB
        let delta = serde_json::json!({"choices":[{"index":0,"delta":{"content":text}}]});
        let stream = format!(
            "data: {delta}\r\n\r\ndata: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\r\n\r\n"
        );
        let bytes = Bytes::from(stream);
        let end_of_delta = "data: ".len() + delta.to_string().len();
        // Inside the first `é`, inside a later emoji, between `\r` and `\n`, and after them.
        let cuts = [
            0,
            50,
            1_000_001,
            end_of_delta + 1,
            end_of_delta + 3,
            bytes.len(),
        ];
        let parts: Vec<_> = cuts
            .windows(2)
            .map(|w| Ok::<_, std::io::Error>(bytes.slice(w[0]..w[1])))
            .collect();
        let mut decoder = SseDecoder::new(futures::stream::iter(parts), Duration::from_secs(5));
        let mut chunks = Vec::new();
        while let Some(item) = decoder.next().await {
            chunks.push(item.unwrap());
        }
        assert_eq!(chunks.len(), 4, "block start, text, block end, finish");
        assert_eq!(chunks[1], Chunk::TextDelta { index: 0, text });
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

//! One model call: posts the request, retries what may be retried, and streams the chunks.
//!
//! Retried, while nothing has been streamed yet: connect errors, HTTP 429 and 5xx, and bodies
//! that break before their first chunk. Once a chunk was streamed, a broken body ends the call
//! with [`ModelError::Cut`]: a second attempt would stream the answer again. Everything lives
//! inside the returned stream, so dropping it aborts the request (the connection is closed).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use reqwest::header::{HeaderMap, ACCEPT, CONTENT_TYPE, RETRY_AFTER};

use super::retry::{backoff, parse_retry_after, retryable_status, MAX_RETRY_AFTER};
use super::sse::{error_chain, SseDecoder, StreamFailure};
use super::{human_duration, ApiKey, OpenAiSettings};
use crate::model::{ChunkStream, ModelError};
use crate::session::Chunk;

/// The most of an error body kept for the message.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

pub(super) struct Call {
    client: reqwest::Client,
    settings: Arc<OpenAiSettings>,
    key: ApiKey,
    body: Bytes,
    /// Requests sent so far.
    attempts: u32,
    /// Whether a chunk was handed to the caller.
    streamed: bool,
    body_stream: Option<SseDecoder>,
    done: bool,
    /// Whether the one retry after a first-token timeout was made.
    first_token_retried: bool,
    /// The endpoint's requests in flight; a permit is held from the first attempt to the end.
    requests: Option<Arc<tokio::sync::Semaphore>>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

pub(super) fn stream(call: Call) -> ChunkStream {
    Box::pin(futures::stream::unfold(call, |mut call| async move {
        let item = call.next().await?;
        Some((item, call))
    }))
}

/// What the first part of an attempt (up to the response headers) came to.
enum Attempt {
    Streaming(Box<SseDecoder>),
    /// Worth another try after the wait (a `Retry-After`, or the backoff when `None`).
    Retry(ModelError, Option<Duration>),
    /// No response within the first-token limit.
    FirstTokenTimeout,
    Fail(ModelError),
}

/// Prompt evaluation assumed for the default first-token limit: slow on purpose (a 2-core
/// machine evaluates ~220 tokens/s), so a local server is never cut off while it works.
const SLOW_PROMPT_TOKENS_PER_SECOND: u64 = 50;

/// The first-token limit when none is configured: the stall timeout, plus the time a slow
/// local server takes to evaluate a body of `body_len` bytes (about four bytes a token).
pub(super) fn first_token_default(stall: Duration, body_len: usize) -> Duration {
    let tokens = body_len as u64 / 4;
    stall + Duration::from_secs(tokens / SLOW_PROMPT_TOKENS_PER_SECOND)
}

impl Call {
    pub(super) fn new(
        client: reqwest::Client,
        settings: Arc<OpenAiSettings>,
        key: ApiKey,
        body: Bytes,
    ) -> Self {
        Self {
            client,
            settings,
            key,
            body,
            attempts: 0,
            streamed: false,
            body_stream: None,
            done: false,
            first_token_retried: false,
            requests: None,
            permit: None,
        }
    }

    /// This call waiting for one of `requests`' permits before its first attempt.
    pub(super) fn limited_by(mut self, requests: Arc<tokio::sync::Semaphore>) -> Self {
        self.requests = Some(requests);
        self
    }

    fn stall_text(&self) -> String {
        human_duration(self.settings.stall_timeout)
    }

    /// How long to wait for the answer's first byte: the configured limit, else the stall
    /// timeout plus time for the server to evaluate the prompt at a slow local pace.
    fn first_token_limit(&self) -> Duration {
        self.settings
            .first_token_timeout
            .unwrap_or_else(|| first_token_default(self.settings.stall_timeout, self.body.len()))
    }

    fn first_token_error(&self) -> ModelError {
        ModelError::FirstTokenTimeout {
            after: human_duration(self.first_token_limit()),
            attempts: self.attempts,
        }
    }

    /// The one retry after a first-token timeout (a server evaluating a long prompt usually
    /// caches what it evaluated, so the second try starts further on); `false` once made.
    fn retry_first_token(&mut self) -> bool {
        if std::mem::replace(&mut self.first_token_retried, true) {
            return false;
        }
        tracing::info!(
            limit = %human_duration(self.first_token_limit()),
            "the model sent nothing within the first-token limit; retrying once"
        );
        true
    }

    async fn next(&mut self) -> Option<Result<Chunk, ModelError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(requests) = self.requests.take() {
                // Never closed; were it, the request would go without a permit.
                self.permit = requests.acquire_owned().await.ok();
            }
            let Some(body) = self.body_stream.as_mut() else {
                match self.attempt().await {
                    Attempt::Streaming(body) => self.body_stream = Some(*body),
                    Attempt::Retry(error, wait) => {
                        if let Err(error) = self.wait_for_retry(error, wait).await {
                            return self.fail(error);
                        }
                    }
                    Attempt::FirstTokenTimeout => {
                        if !self.retry_first_token() {
                            let error = self.first_token_error();
                            return self.fail(error);
                        }
                    }
                    Attempt::Fail(error) => return self.fail(error),
                }
                continue;
            };
            match body.next().await {
                Some(Ok(chunk)) => {
                    self.streamed = true;
                    return Some(Ok(chunk));
                }
                None => {
                    self.done = true;
                    self.permit = None;
                    return None;
                }
                Some(Err(StreamFailure::FirstByteTimeout)) if !self.streamed => {
                    self.body_stream = None;
                    if !self.retry_first_token() {
                        let error = self.first_token_error();
                        return self.fail(error);
                    }
                }
                Some(Err(failure)) => {
                    self.body_stream = None;
                    let error = self.failure_error(&failure);
                    if !failure.retryable() || self.streamed {
                        return self.fail(error);
                    }
                    if let Err(error) = self.wait_for_retry(error, None).await {
                        return self.fail(error);
                    }
                }
            }
        }
    }

    fn fail(&mut self, error: ModelError) -> Option<Result<Chunk, ModelError>> {
        self.done = true;
        self.permit = None;
        Some(Err(error))
    }

    /// Waits before the next attempt, or returns the error when no attempt is left.
    async fn wait_for_retry(
        &mut self,
        error: ModelError,
        wait: Option<Duration>,
    ) -> Result<(), ModelError> {
        if self.attempts > self.settings.retries {
            return Err(error);
        }
        let wait = wait.unwrap_or_else(|| backoff(self.settings.retry_base, self.attempts - 1));
        tracing::info!(
            error = %error.before_retry(),
            ?wait,
            "retrying (attempt {} of {})",
            self.attempts + 1,
            self.settings.retries + 1
        );
        tokio::time::sleep(wait).await;
        Ok(())
    }

    fn failure_error(&self, failure: &StreamFailure) -> ModelError {
        let cut_or_failed = |detail: String| {
            if self.streamed {
                ModelError::Cut(detail)
            } else {
                ModelError::Failed(detail)
            }
        };
        match failure {
            StreamFailure::Stalled => ModelError::Stalled {
                after: self.stall_text(),
            },
            StreamFailure::FirstByteTimeout => self.first_token_error(),
            StreamFailure::Empty => ModelError::EmptyBody {
                hint: String::new(),
            },
            StreamFailure::Transport(detail) => {
                cut_or_failed(format!("reading the response failed: {detail}"))
            }
            StreamFailure::EndedEarly => {
                cut_or_failed("the endpoint closed the response before it was complete".into())
            }
            StreamFailure::Malformed(detail) => ModelError::Malformed(detail.clone()),
            StreamFailure::Reported(message) => {
                ModelError::Failed(format!("the endpoint reported an error: {message}"))
            }
        }
    }

    async fn attempt(&mut self) -> Attempt {
        self.attempts += 1;
        let url = self.settings.endpoint();
        let mut request = self.client.post(&url);
        // An empty key is a server that takes none (`kin login` for a local server).
        if !self.key.secret().is_empty() {
            request = request.bearer_auth(self.key.secret());
        }
        let request = request
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(self.body.clone())
            .send();
        // A server may send nothing, not even headers, until it has evaluated the prompt.
        let response = match tokio::time::timeout(self.first_token_limit(), request).await {
            Err(_) => return Attempt::FirstTokenTimeout,
            Ok(Err(error)) => {
                let detail = if error.is_timeout() {
                    format!(
                        "no connection within {}",
                        human_duration(self.settings.connect_timeout)
                    )
                } else {
                    error_chain(&error)
                };
                return Attempt::Retry(
                    ModelError::Connect {
                        url,
                        detail,
                        attempts: self.attempts,
                    },
                    None,
                );
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if response.status().is_success() {
            return self.accept(response).await;
        }
        if status == 401 || status == 403 {
            return Attempt::Fail(ModelError::Auth {
                status,
                source_name: self.key.source().to_owned(),
            });
        }
        let retry_after = retry_after(response.headers());
        let (body, code) = error_body(response, self.settings.stall_timeout).await;
        let error = ModelError::Http {
            status,
            body,
            attempts: self.attempts,
            code,
        };
        if !retryable_status(status) {
            return Attempt::Fail(error);
        }
        match retry_after {
            Some(wait) if wait > MAX_RETRY_AFTER => Attempt::Fail(ModelError::Http {
                status,
                body: format!(
                    "{} (the endpoint asked to retry after {}, longer than kin waits)",
                    error_body_of(&error),
                    human_duration(wait)
                ),
                attempts: self.attempts,
                code: None,
            }),
            wait => Attempt::Retry(error, wait),
        }
    }

    /// A 2xx response: an event stream, or (from endpoints that ignore `stream: true`) JSON.
    async fn accept(&mut self, response: reqwest::Response) -> Attempt {
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        // No content type at all is taken on trust (some proxies drop it); anything else that
        // is not an event stream is reported as what it is.
        if !content_type.is_empty() && !content_type.starts_with("text/event-stream") {
            let status = response.status().as_u16();
            let start = first_bytes(response, self.settings.stall_timeout).await;
            let hint = if content_type.starts_with("application/json") {
                " (JSON instead of an event stream: does the endpoint support `stream: true`?)"
            } else {
                " instead of an event stream (is the base URL that of an OpenAI-compatible API?)"
            };
            return Attempt::Fail(ModelError::Malformed(format!(
                "the endpoint answered {status} with content type {content_type:?}{hint}; the \
                 answer began: {start}"
            )));
        }
        Attempt::Streaming(Box::new(
            SseDecoder::new(response.bytes_stream(), self.settings.stall_timeout)
                .first_byte_within(self.first_token_limit()),
        ))
    }
}

/// The readable part of an error response (the JSON `error.message` when there is one, else
/// the start of the body) and its type or code. Reading gives up at a stall.
async fn error_body(mut response: reqwest::Response, stall: Duration) -> (String, Option<String>) {
    let mut bytes = Vec::new();
    // A read error or a stall just ends what we show.
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout(stall, response.chunk()).await {
        bytes.extend_from_slice(&chunk);
        if bytes.len() >= ERROR_BODY_LIMIT {
            break;
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    (readable_error(&text), error_code(&text))
}

/// `error.code` of a JSON error body when it is a string (OpenAI's), else `error.type`
/// (llama.cpp puts the HTTP status in `code` and the kind in `type`).
fn error_code(body: &str) -> Option<String> {
    let parsed: serde_json::Value = serde_json::from_str(body).ok()?;
    let error = parsed
        .get("error")
        .filter(|e| e.is_object())
        .unwrap_or(&parsed);
    ["code", "type"]
        .iter()
        .find_map(|key| error.get(*key)?.as_str().map(str::to_owned))
}

/// How much of a non-stream answer is quoted.
const FIRST_BYTES: usize = 200;

/// The first bytes of an answer, quoted with controls made visible, `(empty body)` if none.
async fn first_bytes(mut response: reqwest::Response, stall: Duration) -> String {
    let mut bytes = Vec::new();
    while let Ok(Ok(Some(chunk))) = tokio::time::timeout(stall, response.chunk()).await {
        bytes.extend_from_slice(&chunk);
        if bytes.len() >= FIRST_BYTES {
            break;
        }
    }
    if bytes.is_empty() {
        return "(empty body)".into();
    }
    let cut = bytes.len() > FIRST_BYTES;
    bytes.truncate(FIRST_BYTES);
    let text = String::from_utf8_lossy(&bytes);
    format!(
        "\"{}\"{}",
        crate::text::visible(&text),
        if cut { "…" } else { "" }
    )
}

fn error_body_of(error: &ModelError) -> &str {
    match error {
        ModelError::Http { body, .. } => body,
        _ => "",
    }
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?;
    parse_retry_after(value, SystemTime::now())
}

/// `error.message` (or `message`, or `error` as a string) of a JSON error body, else the
/// trimmed start of the text.
pub(crate) fn readable_error(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(|m| m.as_str())
    });
    match message {
        Some(message) => message.to_owned(),
        None if body.trim().is_empty() => "(empty body)".into(),
        None => super::decode::excerpt(body.trim()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_made_readable() {
        assert_eq!(
            readable_error(r#"{"error":{"message":"Model Not Exist","type":"x"}}"#),
            "Model Not Exist"
        );
        assert_eq!(readable_error("  Bad Gateway \n"), "Bad Gateway");
        assert_eq!(readable_error(""), "(empty body)");
    }

    #[test]
    fn error_codes_are_read_from_code_else_type() {
        let llama = r#"{"error":{"code":400,"message":"request (6711 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":6711,"n_ctx":4096}}"#;
        assert_eq!(
            error_code(llama).as_deref(),
            Some("exceed_context_size_error")
        );
        let openai = r#"{"error":{"message":"m","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert_eq!(
            error_code(openai).as_deref(),
            Some("context_length_exceeded")
        );
        assert_eq!(error_code("Bad Gateway"), None);
    }

    #[test]
    fn the_default_first_token_limit_grows_with_the_prompt() {
        let stall = Duration::from_secs(60);
        assert_eq!(first_token_default(stall, 100), stall);
        // 16k tokens of prompt: five more minutes at the slow pace.
        assert_eq!(
            first_token_default(stall, 65_536),
            stall + Duration::from_secs(327)
        );
    }
}

//! The bidirectional peer: one reader loop, one ordered writer task, a table of our pending
//! outgoing requests, and one task per incoming request that has to wait for its answer (the
//! reader answers the others itself).

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;
use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::message::is_negative_zero;
use super::{classify, Frame, Incoming, LineReader, RpcError, MAX_LINE_BYTES};
use crate::sync::lock;

const CANCEL_REQUEST: &str = "$/cancel_request";

/// What a peer does with the messages the other side sends it.
pub(crate) trait Handler: Send + Sync + 'static {
    /// Called in arrival order, before the next line is read, so state changes made here (such
    /// as "initialized") are seen by the next message. The reply is the one answer to the
    /// request.
    fn request(&self, method: String, params: Value, cx: RequestContext) -> Reply;

    /// Called in arrival order; must not block. Unknown notifications are to be ignored.
    fn notification(&self, method: String, params: Value);

    /// Called for each line that is not a JSON-RPC message (which is also answered with the
    /// error); lets a handler that must not tolerate such output (a child agent's) give up.
    fn invalid(&self, _error: &RpcError) {}
}

/// How a [`Handler`] answers a request.
pub(crate) enum Reply {
    /// Known already (no waiting needed): sent by the reader itself, with no task in between.
    Now(Result<Value, RpcError>),
    /// Known already, with work to start once the answer has been written and flushed, so
    /// the work cannot delay it.
    NowThen(Result<Value, RpcError>, AfterWrite),
    /// Runs on its own task; its output is the answer.
    Later(BoxFuture<'static, Result<Value, RpcError>>),
}

/// Given to each incoming request: its cancellation (tripped by `$/cancel_request` or by
/// shutdown) and the peer, to send notifications and requests while answering.
#[derive(Clone)]
pub(crate) struct RequestContext {
    pub(crate) cancel: CancellationToken,
    pub(crate) peer: Peer,
    after_answer: Arc<Mutex<Vec<AfterWrite>>>,
}

impl RequestContext {
    /// Runs `work` just after this request's answer is queued, so whatever it sends follows
    /// the answer (e.g. a notice about, or the commands of, a session the answer creates).
    pub(crate) fn after_answer(&self, work: AfterWrite) {
        lock(&self.after_answer).push(work);
    }
}

type PendingReply = oneshot::Sender<Result<Value, RpcError>>;

/// Work for the writer task to run once what was queued before it is out.
pub(crate) type AfterWrite = Box<dyn FnOnce() + Send>;

/// What the writer task is handed, in order.
enum Outgoing {
    Line(String),
    Then(AfterWrite),
    /// Flush and stop.
    Close,
}

/// A handle to one JSON-RPC connection; cheap to clone.
#[derive(Clone)]
pub(crate) struct Peer {
    inner: Arc<Inner>,
}

struct Inner {
    out: mpsc::UnboundedSender<Outgoing>,
    next_id: AtomicI64,
    pending: Mutex<HashMap<i64, PendingReply>>,
    in_flight: Mutex<HashMap<String, CancellationToken>>,
    /// Tripped when the connection shuts down; every incoming request token is its child.
    closed: CancellationToken,
    /// The longest line sent: `MAX_LINE_BYTES` (tests use less).
    max_line: usize,
}

#[derive(Serialize)]
struct Envelope<'a, P: Serialize> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "write_id")]
    id: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
}

/// Writes an id as it came in: serde_json holds `-0` as -0.0, which it would print `-0.0`.
fn write_id<S: Serializer>(id: &Option<&Value>, out: S) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) if is_negative_zero(id) => {
            let minus_zero = RawValue::from_string("-0".to_owned()).map_err(S::Error::custom)?;
            minus_zero.serialize(out)
        }
        _ => id.serialize(out),
    }
}

impl<'a, P: Serialize> Envelope<'a, P> {
    fn empty() -> Self {
        Self {
            jsonrpc: "2.0",
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
        }
    }
}

impl Peer {
    /// Starts the writer task on `writer`. Call [`Peer::serve`] to read.
    pub(crate) fn new<W>(writer: W) -> (Self, JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::with_max_line(writer, MAX_LINE_BYTES)
    }

    fn with_max_line<W>(writer: W, max_line: usize) -> (Self, JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (out, rx) = mpsc::unbounded_channel();
        let peer = Self {
            inner: Arc::new(Inner {
                out,
                next_id: AtomicI64::new(0),
                pending: Mutex::new(HashMap::new()),
                in_flight: Mutex::new(HashMap::new()),
                closed: CancellationToken::new(),
                max_line,
            }),
        };
        let writer = tokio::spawn(write_loop(rx, writer));
        (peer, writer)
    }

    /// Reads and dispatches until end of input or `shutdown`, then settles: cancels every
    /// incoming request, fails our pending requests and waits until each incoming request has
    /// been answered. The writer stays open (notifications can still go out) until [`Peer::close`].
    pub(crate) async fn serve<R, H>(&self, reader: R, handler: Arc<H>, shutdown: CancellationToken)
    where
        R: AsyncRead + Unpin,
        H: Handler,
    {
        let tracker = TaskTracker::new();
        let mut lines = LineReader::new(reader);
        loop {
            let frame = tokio::select! {
                _ = shutdown.cancelled() => break,
                frame = lines.next_frame() => frame,
            };
            match frame {
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "reading the connection failed; shutting it down");
                    break;
                }
                Ok(Some(Frame::TooLong { len })) => {
                    let error = RpcError::parse_error(format!(
                        "parse error: line of {len} bytes exceeds the {} byte limit",
                        super::MAX_LINE_BYTES
                    ));
                    handler.invalid(&error);
                    self.respond(&Value::Null, Err(error));
                }
                Ok(Some(Frame::Line(line))) => self.dispatch(line, &handler, &tracker),
            }
        }
        self.inner.closed.cancel();
        for (_, reply) in lock(&self.inner.pending).drain() {
            let _ = reply.send(Err(RpcError::connection_closed()));
        }
        tracker.close();
        tracker.wait().await;
    }

    /// Flushes everything sent so far and stops the writer; later output is dropped.
    pub(crate) async fn close(&self, writer: JoinHandle<()>) {
        let _ = self.inner.out.send(Outgoing::Close);
        let _ = writer.await;
    }

    /// Handles one line. The heap a huge line took is given back once it is handled: at once,
    /// or after its answer when a task answers it (not while the handler still works on it).
    fn dispatch<H: Handler>(&self, line: Vec<u8>, handler: &Arc<H>, tracker: &TaskTracker) {
        let release = ReleaseWhenDone(line.len() >= RELEASE_AFTER_BYTES);
        let parsed = classify(&line);
        drop(line);
        let incoming = match parsed {
            Ok(Some(incoming)) => incoming,
            Ok(None) => return,
            Err(rejected) => {
                handler.invalid(&rejected.error);
                self.respond(&rejected.id, Err(rejected.error));
                return;
            }
        };
        match incoming {
            Incoming::Request { id, method, params } => {
                let key = id.to_string();
                let cancel = self.inner.closed.child_token();
                lock(&self.inner.in_flight).insert(key.clone(), cancel.clone());
                let after_answer = Arc::new(Mutex::new(Vec::new()));
                let cx = RequestContext {
                    cancel,
                    peer: self.clone(),
                    after_answer: after_answer.clone(),
                };
                let started = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    handler.request(method, params, cx)
                }));
                let future = match started {
                    Ok(Reply::Later(future)) => future,
                    Ok(Reply::Now(answer)) => {
                        lock(&self.inner.in_flight).remove(&key);
                        self.respond(&id, answer);
                        return;
                    }
                    Ok(Reply::NowThen(answer, then)) => {
                        lock(&self.inner.in_flight).remove(&key);
                        self.respond(&id, answer);
                        // Dropped unrun when the writer is gone.
                        let _ = self.inner.out.send(Outgoing::Then(then));
                        return;
                    }
                    Err(_) => {
                        lock(&self.inner.in_flight).remove(&key);
                        self.respond(&id, handler_panicked());
                        return;
                    }
                };
                let peer = self.clone();
                tracker.spawn(async move {
                    let answer = AssertUnwindSafe(future)
                        .catch_unwind()
                        .await
                        .unwrap_or_else(|_| handler_panicked());
                    lock(&peer.inner.in_flight).remove(&key);
                    peer.respond(&id, answer);
                    let after: Vec<AfterWrite> = std::mem::take(&mut *lock(&after_answer));
                    for work in after {
                        work();
                    }
                    drop(release);
                });
            }
            Incoming::Notification { method, params } if method == CANCEL_REQUEST => {
                if let Some(id) = params.get("requestId") {
                    if let Some(token) = lock(&self.inner.in_flight).get(&id.to_string()) {
                        token.cancel();
                    }
                }
            }
            Incoming::Notification { method, params } => {
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    handler.notification(method, params)
                }));
                if outcome.is_err() {
                    tracing::error!("a notification handler panicked");
                }
            }
            Incoming::Response { id, result } => {
                let number = match &id {
                    Value::Number(n) => n.as_i64(),
                    Value::String(s) => s.parse().ok(),
                    _ => None,
                };
                let reply = number.and_then(|n| lock(&self.inner.pending).remove(&n));
                match reply {
                    Some(reply) => {
                        let _ = reply.send(result);
                    }
                    None => tracing::debug!(%id, "response to no pending request; ignored"),
                }
            }
        }
    }

    /// Queues the message; false (and nothing sent) when it cannot be encoded or its line would
    /// be longer than any line we accept ourselves (`MAX_LINE_BYTES`): the other side would have
    /// to drop it. Callers bound what they put in a message; this is the last guard.
    fn send<P: Serialize>(&self, envelope: &Envelope<'_, P>) -> bool {
        match serde_json::to_string(envelope) {
            Ok(line) if line.len() > self.inner.max_line => {
                tracing::error!(
                    bytes = line.len(),
                    limit = self.inner.max_line,
                    method = envelope.method.unwrap_or_default(),
                    "an outgoing message is longer than a line may be; it is not sent"
                );
                false
            }
            Ok(line) => {
                // After shutdown the writer is gone; dropping late output is all we can do.
                let _ = self.inner.out.send(Outgoing::Line(line));
                true
            }
            Err(error) => {
                tracing::error!(%error, "could not encode an outgoing message");
                false
            }
        }
    }

    fn respond(&self, id: &Value, answer: Result<Value, RpcError>) {
        let mut envelope = Envelope::<()>::empty();
        envelope.id = Some(id);
        match &answer {
            Ok(result) => envelope.result = Some(result),
            Err(error) => envelope.error = Some(error),
        }
        if !self.send(&envelope) {
            // The request is still owed its one answer.
            let error = RpcError::internal(format!(
                "internal error: the answer could not be sent (longer than the {} bytes a line \
                 may have, or not encodable)",
                self.inner.max_line
            ));
            let mut envelope = Envelope::<()>::empty();
            envelope.id = Some(id);
            envelope.error = Some(&error);
            self.send(&envelope);
        }
    }

    /// Sends a notification; ordered after everything sent before it on this peer.
    pub(crate) fn notify<P: Serialize>(&self, method: &str, params: &P) {
        let mut envelope = Envelope::empty();
        envelope.method = Some(method);
        envelope.params = Some(params);
        self.send(&envelope);
    }

    /// Sends a request and waits for its answer.
    pub(crate) async fn request<P: Serialize>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<Value, RpcError> {
        self.request_cancellable(method, params, &CancellationToken::new())
            .await
    }

    /// Sends a request; when `cancel` trips first, tells the peer with `$/cancel_request` and
    /// keeps waiting, since the peer still owes exactly one answer.
    pub(crate) async fn request_cancellable<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let number = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply_tx, mut reply_rx) = oneshot::channel();
        lock(&self.inner.pending).insert(number, reply_tx);
        if self.inner.closed.is_cancelled() {
            lock(&self.inner.pending).remove(&number);
            return Err(RpcError::connection_closed());
        }
        let id = Value::from(number);
        let mut envelope = Envelope::empty();
        envelope.id = Some(&id);
        envelope.method = Some(method);
        envelope.params = Some(params);
        if !self.send(&envelope) {
            lock(&self.inner.pending).remove(&number);
            return Err(RpcError::internal(format!(
                "internal error: the {method} request could not be sent (longer than the {} \
                 bytes a line may have, or not encodable)",
                self.inner.max_line
            )));
        }
        tokio::select! {
            reply = &mut reply_rx => return reply.unwrap_or_else(|_| Err(RpcError::connection_closed())),
            _ = cancel.cancelled() => {}
        }
        self.notify(CANCEL_REQUEST, &json!({ "requestId": number }));
        reply_rx
            .await
            .unwrap_or_else(|_| Err(RpcError::connection_closed()))
    }
}

/// Lines at least this long are followed by [`crate::memory::release_freed`].
const RELEASE_AFTER_BYTES: usize = 4 * 1024 * 1024;

/// When dropped (its line handled), and `true`, calls [`crate::memory::release_freed`]: the one
/// place kin gives the heap of a huge message back to the system.
struct ReleaseWhenDone(bool);

impl Drop for ReleaseWhenDone {
    fn drop(&mut self) {
        if self.0 {
            crate::memory::release_freed();
        }
    }
}

fn handler_panicked() -> Result<Value, RpcError> {
    tracing::error!("a request handler panicked");
    Err(RpcError::internal(
        "internal error while handling the request",
    ))
}

async fn write_loop<W: AsyncWrite + Unpin>(mut rx: mpsc::UnboundedReceiver<Outgoing>, writer: W) {
    let mut writer = BufWriter::with_capacity(64 * 1024, writer);
    if let Err(error) = write_messages(&mut rx, &mut writer).await {
        tracing::warn!(%error, "writing to the connection failed; further output is dropped");
    }
}

async fn write_messages<W: AsyncWrite + Unpin>(
    rx: &mut mpsc::UnboundedReceiver<Outgoing>,
    writer: &mut BufWriter<W>,
) -> std::io::Result<()> {
    while let Some(first) = rx.recv().await {
        // Batch whatever is already queued, then flush once: same order, fewer syscalls.
        let mut next = Some(first);
        while let Some(item) = next {
            match item {
                Outgoing::Line(line) => {
                    writer.write_all(line.as_bytes()).await?;
                    writer.write_all(b"\n").await?;
                }
                Outgoing::Then(work) => {
                    writer.flush().await?;
                    work();
                }
                Outgoing::Close => return writer.flush().await,
            }
            next = rx.try_recv().ok();
        }
        writer.flush().await?;
    }
    writer.flush().await
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod tests;

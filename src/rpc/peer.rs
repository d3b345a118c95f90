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
                Ok(Some(Frame::Line(line))) => {
                    let big = line.len() >= RELEASE_AFTER_BYTES;
                    let answering = self.dispatch(&line, &handler, &tracker, big);
                    if big && !answering {
                        drop(line);
                        crate::memory::release_freed();
                    }
                }
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

    /// Handles one line; `true` when a task now answers it, which calls
    /// [`crate::memory::release_freed`] after its answer when `big` (not while the handler is
    /// still working on the payload it came with).
    fn dispatch<H: Handler>(
        &self,
        line: &[u8],
        handler: &Arc<H>,
        tracker: &TaskTracker,
        big: bool,
    ) -> bool {
        let incoming = match classify(line) {
            Ok(Some(incoming)) => incoming,
            Ok(None) => return false,
            Err(rejected) => {
                handler.invalid(&rejected.error);
                self.respond(&rejected.id, Err(rejected.error));
                return false;
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
                        return false;
                    }
                    Ok(Reply::NowThen(answer, then)) => {
                        lock(&self.inner.in_flight).remove(&key);
                        self.respond(&id, answer);
                        // Dropped unrun when the writer is gone.
                        let _ = self.inner.out.send(Outgoing::Then(then));
                        return false;
                    }
                    Err(_) => {
                        lock(&self.inner.in_flight).remove(&key);
                        self.respond(&id, handler_panicked());
                        return false;
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
                    if big {
                        crate::memory::release_freed();
                    }
                });
                return true;
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
        false
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
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// Answers `echo` with its params and `wait` only when cancelled; records notifications.
    struct TestHandler {
        notes: Mutex<Vec<String>>,
    }

    impl Handler for TestHandler {
        fn request(&self, method: String, params: Value, cx: RequestContext) -> Reply {
            match method.as_str() {
                "now" => Reply::Now(Ok(params)),
                "then" => {
                    let peer = cx.peer.clone();
                    Reply::NowThen(Ok(params), Box::new(move || peer.notify("after", &())))
                }
                "echo" => Reply::Later(async move { Ok(params) }.boxed()),
                "big" => Reply::Now(Ok(Value::from("x".repeat(TEST_MAX_LINE)))),
                "wait" => Reply::Later(
                    async move {
                        cx.cancel.cancelled().await;
                        Err(RpcError::cancelled())
                    }
                    .boxed(),
                ),
                _ => Reply::Now(Err(RpcError::method_not_found(&method))),
            }
        }

        fn notification(&self, method: String, _params: Value) {
            self.notes.lock().unwrap().push(method);
        }
    }

    type Output = tokio::io::Lines<BufReader<tokio::io::DuplexStream>>;

    /// The line cap of the test peer: small, so over-long messages are cheap to make.
    const TEST_MAX_LINE: usize = 64 * 1024;

    /// A peer serving `TestHandler` over two in-memory pipes (one per direction, so dropping
    /// the test's input end is end of input); the test writes `input` and reads `output`.
    fn serve() -> (Peer, tokio::io::DuplexStream, Output, JoinHandle<()>) {
        let (input, their_read) = tokio::io::duplex(1 << 20);
        let (their_write, output) = tokio::io::duplex(1 << 20);
        let (peer, writer) = Peer::with_max_line(their_write, TEST_MAX_LINE);
        let handler = Arc::new(TestHandler {
            notes: Mutex::new(Vec::new()),
        });
        let serving = peer.clone();
        let task = tokio::spawn(async move {
            serving
                .serve(their_read, handler, CancellationToken::new())
                .await;
            serving.close(writer).await;
        });
        (peer, input, BufReader::new(output).lines(), task)
    }

    async fn next(lines: &mut Output) -> Value {
        serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap()
    }

    /// No line goes out longer than we would accept: an over-long answer becomes an error
    /// answer, an over-long request fails at once, an over-long notification is not sent.
    #[tokio::test]
    async fn no_outgoing_line_is_longer_than_an_incoming_one_may_be() {
        let (peer, mut input, mut output, _task) = serve();
        let huge = "y".repeat(TEST_MAX_LINE);
        peer.notify("too/big", &huge);
        let error = peer.request("too/big", &huge).await.unwrap_err();
        assert!(error.to_string().contains("could not be sent"), "{error}");
        input
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"big\"}\n")
            .await
            .unwrap();
        let answer = next(&mut output).await;
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], RpcError::INTERNAL_ERROR);
        assert!(answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"));
    }

    #[tokio::test]
    async fn answers_requests_with_their_ids_unchanged() {
        let (_peer, mut input, mut output, _task) = serve();
        input
            .write_all(
                b"{\"jsonrpc\":\"2.0\",\"id\":\"abc\",\"method\":\"echo\",\"params\":{\"x\":1}}\n",
            )
            .await
            .unwrap();
        let answer = next(&mut output).await;
        assert_eq!(answer, json!({"jsonrpc":"2.0","id":"abc","result":{"x":1}}));
    }

    /// The work of a `NowThen` reply starts only once its answer is out: what it sends
    /// follows the answer.
    #[tokio::test]
    async fn work_after_an_answer_runs_once_the_answer_is_written() {
        let (_peer, mut input, mut output, _task) = serve();
        input
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"then\",\"params\":[7]}\n")
            .await
            .unwrap();
        assert_eq!(
            next(&mut output).await,
            json!({"jsonrpc":"2.0","id":1,"result":[7]})
        );
        assert_eq!(next(&mut output).await["method"], "after");
    }

    #[tokio::test]
    async fn minus_zero_ids_are_written_back_as_minus_zero() {
        let (_peer, mut input, mut output, _task) = serve();
        input
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"echo\"}\n{\"jsonrpc\":\"2.0\",\"id\":-0,\"method\":\"echo\",\"params\":true}\n")
            .await
            .unwrap();
        // The error is written at once, the answer by the request's task: either may be first.
        let mut replies = vec![
            output.next_line().await.unwrap().unwrap(),
            output.next_line().await.unwrap().unwrap(),
        ];
        replies.sort();
        assert!(
            replies[0].starts_with(r#"{"jsonrpc":"2.0","id":-0,"error":{"code":-32600"#),
            "{replies:?}"
        );
        assert_eq!(replies[1], r#"{"jsonrpc":"2.0","id":-0,"result":{}}"#);
    }

    #[tokio::test]
    async fn replies_known_at_once_are_answered_in_arrival_order() {
        let (_peer, mut input, mut output, _task) = serve();
        let lines = (1..=3)
            .map(|id| {
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"now\",\"params\":[{id}]}}\n"
                )
            })
            .collect::<String>();
        input.write_all(lines.as_bytes()).await.unwrap();
        for id in 1..=3 {
            assert_eq!(
                next(&mut output).await,
                json!({"jsonrpc":"2.0","id":id,"result":[id]})
            );
        }
    }

    #[tokio::test]
    async fn outgoing_requests_match_replies_by_number_or_string() {
        let (peer, mut input, mut output, _task) = serve();
        let asking = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request("ask", &json!({})).await }
        });
        let request = next(&mut output).await;
        assert_eq!(request["method"], "ask");
        let id = request["id"].as_i64().unwrap();
        let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":\"{id}\",\"result\":42}}\n");
        input.write_all(reply.as_bytes()).await.unwrap();
        assert_eq!(asking.await.unwrap(), Ok(json!(42)));
    }

    #[tokio::test]
    async fn cancelling_an_outgoing_request_tells_the_peer_and_still_takes_its_answer() {
        let (peer, mut input, mut output, _task) = serve();
        let cancel = CancellationToken::new();
        let asking = tokio::spawn({
            let (peer, cancel) = (peer.clone(), cancel.clone());
            async move { peer.request_cancellable("ask", &json!({}), &cancel).await }
        });
        let id = next(&mut output).await["id"].as_i64().unwrap();
        cancel.cancel();
        let notice = next(&mut output).await;
        assert_eq!(notice["method"], CANCEL_REQUEST);
        assert_eq!(notice["params"]["requestId"], id);
        let reply = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32800,\"message\":\"cancelled\"}}}}\n");
        input.write_all(reply.as_bytes()).await.unwrap();
        assert_eq!(
            asking.await.unwrap().unwrap_err().code,
            RpcError::REQUEST_CANCELLED
        );
    }

    #[tokio::test]
    async fn cancel_request_notification_cancels_an_incoming_request() {
        let (_peer, mut input, mut output, _task) = serve();
        input
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"wait\"}\n{\"jsonrpc\":\"2.0\",\"method\":\"$/cancel_request\",\"params\":{\"requestId\":9}}\n")
            .await
            .unwrap();
        let answer = next(&mut output).await;
        assert_eq!(answer["id"], 9);
        assert_eq!(answer["error"]["code"], RpcError::REQUEST_CANCELLED);
    }

    #[tokio::test]
    async fn end_of_input_answers_every_open_request_and_fails_pending_ones() {
        let (peer, mut input, mut output, task) = serve();
        input
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"wait\"}\n")
            .await
            .unwrap();
        let asking = tokio::spawn({
            let peer = peer.clone();
            async move { peer.request("ask", &json!({})).await }
        });
        assert_eq!(next(&mut output).await["method"], "ask");
        drop(input);
        let answer = next(&mut output).await;
        assert_eq!(answer["id"], 1);
        assert_eq!(answer["error"]["code"], RpcError::REQUEST_CANCELLED);
        assert_eq!(asking.await.unwrap(), Err(RpcError::connection_closed()));
        task.await.unwrap();
        assert!(
            output.next_line().await.unwrap().is_none(),
            "writer closed after the last answer"
        );
        assert!(peer.request("late", &json!({})).await.is_err());
    }
}

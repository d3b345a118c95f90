//! A scripted OpenAI-compatible HTTP/1.1 server on 127.0.0.1, for tests and benches.
//!
//! It runs on its own thread (with its own tokio runtime), so it keeps serving whatever the
//! caller does meanwhile, blocking calls included. Each request gets the next scripted
//! [`Reply`] (or the default one); every request is recorded, and the moments the client
//! hangs up on a held-open response are reported as [`ServerEvent::ClientClosed`], so a test can
//! wait for them instead of sleeping. Connections are kept alive between requests.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the server answers to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// `200 text/event-stream`; each part goes out as its own HTTP chunk, then the body ends.
    Stream(Vec<Vec<u8>>),
    /// Like `Stream`, but the connection is dropped after the parts, with the body unfinished.
    Cut(Vec<Vec<u8>>),
    /// Like `Stream`, but after the parts nothing more is sent until the client hangs up.
    Hang(Vec<Vec<u8>>),
    /// Any status, with extra headers and a body.
    Status {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// The reply, sent after the delay (a model that takes its time).
    Delayed(std::time::Duration, Box<Reply>),
    /// The reply, held until the server has received `requests` requests in all (siblings
    /// that must all have asked before any is answered).
    Gated { requests: usize, reply: Box<Reply> },
}

/// What the server does besides answering from its script, the way llama.cpp's servers do
/// on the wire (see `LlamaLike::llama_server` and `LlamaLike::llama_cpp_python`).
#[derive(Clone, Debug)]
pub struct LlamaLike {
    /// The context window in tokens; a request counts a token per four bytes of its messages
    /// and tools as JSON.
    pub n_ctx: u64,
    /// Whether `GET /props` reports `n_ctx` (llama-server does; llama-cpp-python's does not).
    pub props: bool,
    /// Refuse `user, user` and `assistant, assistant` (Gemma's, Mistral's, Llama 2's
    /// templates): HTTP 400 `Conversation roles must alternate ...`.
    pub strict_alternation: bool,
    /// A request over the window: HTTP 200 and an empty body (llama-cpp-python's streamed
    /// overflow) instead of llama-server's HTTP 400 `exceed_context_size_error`.
    pub empty_on_overflow: bool,
    /// Whether streams end with a usage chunk (llama-cpp-python's never do).
    pub usage: bool,
    /// Answer `POST /api/show` as Ollama does, with this `num_ctx` in the parameters.
    pub ollama_num_ctx: Option<u64>,
    /// The chat template leaves the tool definitions out of the prompt (Gemma's, Mistral's):
    /// they count nothing.
    pub drops_tools: bool,
}

impl LlamaLike {
    /// llama.cpp's `llama-server` with `-c n_ctx`.
    pub fn llama_server(n_ctx: u64) -> Self {
        Self {
            n_ctx,
            props: true,
            strict_alternation: false,
            empty_on_overflow: false,
            usage: true,
            ollama_num_ctx: None,
            drops_tools: false,
        }
    }

    /// Ollama serving a model whose `num_ctx` is `n_ctx` (it cuts longer prompts silently;
    /// here they are refused like llama-server's, to keep the mock simple).
    pub fn ollama(n_ctx: u64) -> Self {
        Self {
            props: false,
            ollama_num_ctx: Some(n_ctx),
            ..Self::llama_server(n_ctx)
        }
    }

    /// llama-cpp-python's server with `n_ctx`.
    pub fn llama_cpp_python(n_ctx: u64) -> Self {
        Self {
            n_ctx,
            props: false,
            strict_alternation: false,
            empty_on_overflow: true,
            usage: false,
            ollama_num_ctx: None,
            drops_tools: false,
        }
    }

    /// The tokens the server counts for a chat request body.
    pub fn tokens(body: &Value) -> u64 {
        let bytes = body["messages"].to_string().len() + body["tools"].to_string().len();
        bytes as u64 / 4
    }

    /// The tokens this server counts for a chat request body (its template may drop the
    /// tools).
    pub fn count(&self, body: &Value) -> u64 {
        match self.drops_tools {
            true => body["messages"].to_string().len() as u64 / 4,
            false => Self::tokens(body),
        }
    }

    /// The refusal for `body`, if this server would refuse it.
    fn refusal(&self, body: &Value) -> Option<Reply> {
        if let Some(bad) = unparseable_arguments(body) {
            // llama-server parses every call's arguments to render its template: HTTP 500.
            return Some(Reply::Status {
                status: 500,
                headers: Vec::new(),
                body: json!({"error": {"code": 500, "type": "server_error", "message":
                    format!("[json.exception.parse_error.101] parse error: syntax error while parsing value; last read: {bad}")}})
                .to_string(),
            });
        }
        if self.strict_alternation {
            let roles: Vec<&str> = body["messages"]
                .as_array()
                .map(|m| m.iter().filter_map(|m| m["role"].as_str()).collect())
                .unwrap_or_default();
            let roles: Vec<&str> = roles.into_iter().filter(|r| *r != "system").collect();
            let repeated = roles
                .windows(2)
                .any(|w| w[0] == w[1] && (w[0] == "user" || w[0] == "assistant"));
            if repeated || roles.first().is_some_and(|r| *r != "user") {
                return Some(Reply::Status {
                    status: 400,
                    headers: Vec::new(),
                    body: json!({"error": {"code": 400, "type": "invalid_request_error",
                        "message": "Conversation roles must alternate user/assistant/user/assistant/..."}})
                    .to_string(),
                });
            }
        }
        let tokens = self.count(body);
        if tokens > self.n_ctx {
            if self.empty_on_overflow {
                return Some(Reply::Stream(Vec::new()));
            }
            let message = format!(
                "request ({tokens} tokens) exceeds the available context size ({} tokens), try increasing it",
                self.n_ctx
            );
            return Some(Reply::Status {
                status: 400,
                headers: Vec::new(),
                body: json!({"error": {"code": 400, "message": message,
                    "type": "exceed_context_size_error", "n_prompt_tokens": tokens,
                    "n_ctx": self.n_ctx}})
                .to_string(),
            });
        }
        None
    }

    /// `reply` as this server would send it: its usage chunk with the prompt tokens it
    /// counted (`prompt_tokens`), or none when it reports none.
    fn shape(&self, reply: Reply, prompt_tokens: u64) -> Reply {
        let reports = self.usage;
        map_usage(reply, &|completion| {
            reports.then(|| usage(prompt_tokens, completion))
        })
    }
}

/// `reply` with each usage chunk replaced by what `make` gives for its completion tokens
/// (dropped for `None`).
fn map_usage(reply: Reply, make: &dyn Fn(u64) -> Option<Value>) -> Reply {
    let map = |parts: Vec<Vec<u8>>| -> Vec<Vec<u8>> {
        parts
            .into_iter()
            .filter_map(|part| {
                let text = String::from_utf8_lossy(&part);
                if !text.contains("\"usage\"") {
                    return Some(part);
                }
                let data: Value =
                    serde_json::from_str(text.trim().trim_start_matches("data:").trim()).ok()?;
                let completion = data
                    .pointer("/usage/completion_tokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                make(completion).map(|chunk| event(&chunk))
            })
            .collect()
    };
    match reply {
        Reply::Stream(parts) => Reply::Stream(map(parts)),
        Reply::Hang(parts) => Reply::Hang(map(parts)),
        Reply::Cut(parts) => Reply::Cut(map(parts)),
        Reply::Delayed(after, reply) => Reply::Delayed(after, Box::new(map_usage(*reply, make))),
        other => other,
    }
}

/// A hosted API's prompt cache, simulated: a request's prompt is rendered as chat templates
/// with tools render it (the system message's text, then the tool schemas, then the other
/// messages), and the tokens it shares as a prefix with an earlier request's (4 bytes a
/// token) are reported as `prompt_tokens_details.cached_tokens`.
#[derive(Default)]
struct PrefixCache {
    prompts: Vec<String>,
}

impl PrefixCache {
    fn render(body: &Value) -> String {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let (system, rest) = match messages.split_first() {
            Some((first, rest)) if first["role"] == "system" => (
                first["content"].as_str().unwrap_or_default().to_owned(),
                rest,
            ),
            _ => (String::new(), &messages[..]),
        };
        let rest: Vec<String> = rest.iter().map(Value::to_string).collect();
        format!("{system}{}{}", body["tools"], rest.concat())
    }

    /// The cached tokens of `body`, which is remembered for later requests.
    fn cached_tokens(&mut self, body: &Value) -> u64 {
        let prompt = Self::render(body);
        let shared = self
            .prompts
            .iter()
            .map(|earlier| {
                let common = earlier
                    .bytes()
                    .zip(prompt.bytes())
                    .take_while(|(a, b)| a == b);
                common.count()
            })
            .max()
            .unwrap_or(0);
        self.prompts.push(prompt);
        shared as u64 / 4
    }
}

/// The first tool call's arguments in `body`'s history that are not a JSON object, if any.
fn unparseable_arguments(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let calls = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten();
    calls
        .filter_map(|call| call.pointer("/function/arguments"))
        .map(|arguments| arguments.as_str().unwrap_or_default())
        .find(|text| !matches!(serde_json::from_str(text), Ok(Value::Object(_))))
        .map(str::to_owned)
}

/// A request as the server received it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The JSON body (`Null` if it was not JSON).
    pub body: Value,
    /// When its head (request line and headers) had arrived: the client had built the body.
    pub started: Instant,
    /// When its last byte had arrived.
    pub received: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ServerEvent {
    /// The client closed the connection of request number `request` (0-based) while its
    /// response was held open.
    ClientClosed { request: usize },
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    default: Option<Reply>,
    requests: Vec<Request>,
    /// When each request's reply had been written (by request number).
    answered: Vec<Option<Instant>>,
    connections: usize,
    /// Behaving like a llama.cpp server, when set.
    llama: Option<LlamaLike>,
    /// Requests to other paths than chat completions (`/props`, `/api/show`).
    probes: Vec<Request>,
    /// Picks the reply from the request, before the queue (agents that make side calls).
    responder: Option<Responder>,
    /// Reporting cached prompt tokens as a hosted API does, when set.
    prefix_cache: Option<PrefixCache>,
}

/// Answers a request by what it asks; `None` leaves it to the queue.
pub type Responder = Arc<dyn Fn(&Request) -> Option<Reply> + Send + Sync>;

pub struct MockServer {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<ServerEvent>>,
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MockServer {
    /// Binds 127.0.0.1 on a free port and serves until dropped.
    pub fn start() -> Self {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1");
        Self::serve_on(std_listener)
    }

    /// Serves on 127.0.0.1:`port` (a well-known server's port), or `None` when it is taken.
    pub fn start_at(port: u16) -> Option<Self> {
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", port)).ok()?;
        Some(Self::serve_on(std_listener))
    }

    fn serve_on(std_listener: std::net::TcpListener) -> Self {
        std_listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let addr = std_listener.local_addr().expect("local address");
        let state = Arc::new(Mutex::new(State::default()));
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let stop = CancellationToken::new();
        let thread = {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("mock server runtime");
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(std_listener).expect("tokio listener");
                    loop {
                        let accepted = tokio::select! {
                            _ = stop.cancelled() => break,
                            accepted = listener.accept() => accepted,
                        };
                        let Ok((socket, _)) = accepted else { continue };
                        state.lock().unwrap().connections += 1;
                        let _ = socket.set_nodelay(true);
                        let (state, events, stop) =
                            (state.clone(), events_tx.clone(), stop.clone());
                        tokio::spawn(async move {
                            tokio::select! {
                                _ = stop.cancelled() => {}
                                _ = serve(socket, state, events) => {}
                            }
                        });
                    }
                });
            })
        };
        Self {
            addr,
            state,
            events: tokio::sync::Mutex::new(events_rx),
            stop,
            thread: Some(thread),
        }
    }

    /// The API root to configure kin with.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues the reply to the next request not yet answered.
    pub fn push(&self, reply: Reply) {
        self.state.lock().unwrap().replies.push_back(reply);
    }

    /// The reply for requests when the queue is empty (else they get a 500 saying so).
    pub fn set_default(&self, reply: Reply) {
        self.state.lock().unwrap().default = Some(reply);
    }

    /// Answers each request `responder` has a reply for with it, before the queue.
    pub fn set_responder(
        &self,
        responder: impl Fn(&Request) -> Option<Reply> + Send + Sync + 'static,
    ) {
        self.state.lock().unwrap().responder = Some(Arc::new(responder));
    }

    /// Answers every compaction request (kin's summary instruction) with `reply`, apart from
    /// the script.
    pub fn answer_compactions_with(&self, reply: Reply) {
        self.set_responder(move |request| {
            request
                .body
                .to_string()
                .contains("is being compacted")
                .then(|| reply.clone())
        });
    }

    /// Behaves like a llama.cpp server from now on (see [`LlamaLike`]).
    pub fn behave_like(&self, llama: LlamaLike) {
        self.state.lock().unwrap().llama = Some(llama);
    }

    /// Reports the prompt tokens each answer's request shares with an earlier one, as hosted
    /// APIs' prefix caches do (`usage.prompt_tokens_details.cached_tokens`; see `PrefixCache`).
    pub fn cache_prefixes(&self) {
        self.state.lock().unwrap().prefix_cache = Some(PrefixCache::default());
    }

    /// The requests for the window (`/props`, `/api/show`), kept apart from the script.
    pub fn probes(&self) -> Vec<Request> {
        self.state.lock().unwrap().probes.clone()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.lock().unwrap().connections
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many requests came in (without copying them: a bench's may be megabytes each).
    pub fn request_count(&self) -> usize {
        self.state.lock().unwrap().requests.len()
    }

    /// The request numbered `at` (from 0), if it came in.
    pub fn request(&self, at: usize) -> Option<Request> {
        self.state.lock().unwrap().requests.get(at).cloned()
    }

    /// When the reply to request `at` had been written, if it has.
    pub fn answered(&self, at: usize) -> Option<Instant> {
        let state = self.state.lock().unwrap();
        state.answered.get(at).copied().flatten()
    }

    /// Waits for the next event (a client hanging up on a held response).
    pub async fn next_event(&self) -> ServerEvent {
        self.events
            .lock()
            .await
            .recv()
            .await
            .expect("the mock server is running")
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn serve(
    mut socket: TcpStream,
    state: Arc<Mutex<State>>,
    events: mpsc::UnboundedSender<ServerEvent>,
) {
    let mut buffer = Vec::new();
    loop {
        let Some(request) = read_request(&mut socket, &mut buffer).await else {
            return;
        };
        if matches!(request.path.as_str(), "/props" | "/api/show") {
            // kin asking for the window (llama-server's `/props`, Ollama's `/api/show`): never
            // a scripted reply.
            let reply = {
                let mut state = state.lock().unwrap();
                let props = match &state.llama {
                    Some(llama) if llama.props && request.path == "/props" => Some(json!({
                        "default_generation_settings": {"n_ctx": llama.n_ctx},
                        "total_slots": 1,
                    })),
                    Some(LlamaLike {
                        ollama_num_ctx: Some(num_ctx),
                        ..
                    }) if request.path == "/api/show" => Some(json!({
                        "parameters": format!("stop \"<end_of_turn>\"\nnum_ctx {num_ctx}"),
                        "model_info": {"gemma3.context_length": 131072},
                    })),
                    _ => None,
                };
                state.probes.push(request);
                match props {
                    Some(props) => Reply::Status {
                        status: 200,
                        headers: Vec::new(),
                        body: props.to_string(),
                    },
                    None => Reply::Status {
                        status: 404,
                        headers: Vec::new(),
                        body: json!({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}).to_string(),
                    },
                }
            };
            if write_reply(&mut socket, &reply).await.is_err() {
                return;
            }
            continue;
        }
        let (number, reply) = {
            let mut state = state.lock().unwrap();
            let llama = state.llama.clone();
            let refusal = llama.as_ref().and_then(|l| l.refusal(&request.body));
            let prompt_tokens = llama.as_ref().map_or_else(
                || LlamaLike::tokens(&request.body),
                |l| l.count(&request.body),
            );
            let chosen = state.responder.as_ref().and_then(|pick| pick(&request));
            let cached = state
                .prefix_cache
                .as_mut()
                .map(|cache| cache.cached_tokens(&request.body));
            state.requests.push(request);
            state.answered.push(None);
            let reply = match refusal {
                Some(refusal) => Some(refusal),
                None => chosen
                    .or_else(|| state.replies.pop_front())
                    .or_else(|| state.default.clone()),
            };
            let reply = match (llama, reply) {
                (Some(llama), Some(reply)) => Some(llama.shape(reply, prompt_tokens)),
                (_, reply) => reply,
            };
            let reply = match (cached, reply) {
                (Some(cached), Some(reply)) => Some(map_usage(reply, &|completion| {
                    let mut chunk = usage(prompt_tokens, completion);
                    chunk["usage"]["prompt_tokens_details"] = json!({"cached_tokens": cached});
                    Some(chunk)
                })),
                (_, reply) => reply,
            };
            (state.requests.len() - 1, reply)
        };
        let mut reply = reply.unwrap_or_else(|| Reply::Status {
            status: 500,
            headers: Vec::new(),
            body: r#"{"error":{"message":"the mock server has no scripted reply"}}"#.into(),
        });
        let reply = loop {
            reply = match reply {
                Reply::Delayed(delay, inner) => {
                    tokio::time::sleep(delay).await;
                    *inner
                }
                Reply::Gated { requests, reply } => {
                    while state.lock().unwrap().requests.len() < requests {
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    }
                    *reply
                }
                ready => break ready,
            };
        };
        if write_reply(&mut socket, &reply).await.is_err() {
            return;
        }
        state.lock().unwrap().answered[number] = Some(Instant::now());
        match reply {
            Reply::Stream(_) | Reply::Status { .. } => {}
            Reply::Delayed(..) | Reply::Gated { .. } => unreachable!("unwrapped above"),
            Reply::Cut(_) => return,
            Reply::Hang(_) => {
                // Nothing more is sent; a read returning (EOF or error) means the client left.
                let mut scratch = [0u8; 1024];
                loop {
                    match socket.read(&mut scratch).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                let _ = events.send(ServerEvent::ClientClosed { request: number });
                return;
            }
        }
    }
}

async fn read_request(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<Request> {
    let head_end = loop {
        if let Some(at) = find(buffer, b"\r\n\r\n") {
            break at;
        }
        let mut chunk = [0u8; 8192];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_owned(), first.next()?.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let started = Instant::now();
    let body_start = head_end + 4;
    // Read the body straight into the buffer, sized once from Content-Length.
    buffer.reserve((body_start + length).saturating_sub(buffer.len()));
    while buffer.len() < body_start + length {
        let n = socket.read_buf(buffer).await.ok()?;
        if n == 0 {
            return None;
        }
    }
    let received = Instant::now();
    let body =
        serde_json::from_slice(&buffer[body_start..body_start + length]).unwrap_or(Value::Null);
    buffer.drain(..body_start + length);
    Some(Request {
        method,
        path,
        headers,
        body,
        started,
        received,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

async fn write_reply(socket: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let parts = match reply {
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} Scripted\r\ncontent-length: {}\r\n",
                body.len()
            );
            // JSON unless the script names another content type.
            if !headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            {
                head.push_str("content-type: application/json\r\n");
            }
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            head.push_str("\r\n");
            socket.write_all(head.as_bytes()).await?;
            socket.write_all(body.as_bytes()).await?;
            return socket.flush().await;
        }
        Reply::Stream(parts) | Reply::Cut(parts) | Reply::Hang(parts) => parts,
        Reply::Delayed(..) | Reply::Gated { .. } => unreachable!("unwrapped before writing"),
    };
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        )
        .await?;
    for part in parts {
        if part.is_empty() {
            continue;
        }
        let mut framed = format!("{:x}\r\n", part.len()).into_bytes();
        framed.extend_from_slice(part);
        framed.extend_from_slice(b"\r\n");
        socket.write_all(&framed).await?;
        socket.flush().await?;
    }
    if matches!(reply, Reply::Stream(_)) {
        socket.write_all(b"0\r\n\r\n").await?;
    }
    socket.flush().await
}

// ---- building replies -------------------------------------------------------------------

/// One SSE event carrying `value` as its data.
pub fn event(value: &Value) -> Vec<u8> {
    format!("data: {value}\n\n").into_bytes()
}

pub fn done() -> Vec<u8> {
    b"data: [DONE]\n\n".to_vec()
}

/// A `chat.completion.chunk` with one choice.
pub fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}

pub fn usage(prompt: u64, completion: u64) -> Value {
    json!({
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    })
}

/// The events of a streamed text answer (role delta, one delta per piece, finish, usage,
/// `[DONE]`), without the reply wrapper.
pub fn text_events(pieces: &[&str], finish_reason: &str) -> Vec<Vec<u8>> {
    let mut parts = vec![event(&chunk(
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    for piece in pieces {
        parts.push(event(&chunk(json!({"content": piece}), None)));
    }
    parts.push(event(&chunk(json!({}), Some(finish_reason))));
    parts.push(event(&usage(10, pieces.len() as u64)));
    parts.push(done());
    parts
}

/// A streamed text answer that ends with `stop`.
pub fn text_reply(pieces: &[&str]) -> Reply {
    Reply::Stream(text_events(pieces, "stop"))
}

/// The start of a streamed text answer (role delta, one delta per piece), then nothing more
/// until the client hangs up: a model that stalls mid-answer.
pub fn hang_after(pieces: &[&str]) -> Reply {
    let mut parts = text_events(pieces, "stop");
    parts.truncate(1 + pieces.len());
    Reply::Hang(parts)
}

/// A streamed answer of tool calls `(id, name, arguments)`, each call's arguments sent one
/// byte per delta, the calls' deltas interleaved.
pub fn tool_calls_reply(calls: &[(&str, &str, &str)]) -> Reply {
    let mut parts = vec![event(&chunk(
        json!({"role": "assistant", "content": null}),
        None,
    ))];
    for (index, (id, name, _)) in calls.iter().enumerate() {
        parts.push(event(&chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        )));
    }
    let longest = calls.iter().map(|(_, _, a)| a.len()).max().unwrap_or(0);
    for at in 0..longest {
        for (index, (_, _, arguments)) in calls.iter().enumerate() {
            if let Some(byte) = arguments.get(at..at + 1) {
                parts.push(event(&chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": byte}}]}),
                    None,
                )));
            }
        }
    }
    parts.push(event(&chunk(json!({}), Some("tool_calls"))));
    parts.push(event(&usage(20, 5)));
    parts.push(done());
    Reply::Stream(parts)
}

/// An error status with an OpenAI-style JSON error body.
pub fn error_reply(status: u16, message: &str) -> Reply {
    Reply::Status {
        status,
        headers: Vec::new(),
        body: json!({"error": {"message": message, "type": "mock_error"}}).to_string(),
    }
}

//! A stdio server's messages on their way to rmcp, one line each. rmcp drops a line over its
//! 16 MiB limit without a word, so the call it answered would wait for ever: here such a line
//! is replaced by a JSON-RPC error for the same request id, and the call fails saying why. The
//! id is read from the line's start or end (where SDKs put it); a line whose id cannot be
//! found (or a request or notification of the server's) is dropped with a warning, and the
//! call's own time limit ends it.
//!
//! A line rmcp could not decode (not JSON, or nested past the parser's depth) would be
//! dropped just as silently: an answer of kin's call becomes an error
//! for it saying why; a request of the server's is answered `-32700` on the server's stdin
//! (written between kin's own lines); a line that says neither fails every call of kin's
//! still waiting on that server, with the reason.

use std::sync::{Arc, Mutex};

use memchr::memchr;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

use crate::sync::lock;

/// The longest message passed on, newline included (rmcp's own limit).
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;
/// How much of an oversized line's start and end is kept to find its id.
const KEEP: usize = 4096;

/// What rmcp reads and writes instead of the server's stdout (`from`) and stdin (`to`): the
/// same lines, an oversized or undecodable one replaced as the module says.
pub(crate) fn bounded<R, W>(server: &str, from: R, to: W) -> (DuplexStream, DuplexStream)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (reads, mut ours) = tokio::io::duplex(64 * 1024);
    let (writes, requests) = tokio::io::duplex(64 * 1024);
    let (inject, injected) = mpsc::channel(16);
    let check = Check {
        server: server.to_owned(),
        in_flight: InFlight::default(),
        inject,
    };
    tokio::spawn(forward(requests, to, check.in_flight.clone(), injected));
    tokio::spawn(async move {
        if let Err(error) = copy_lines(from, &mut ours, MAX_LINE, &check).await {
            tracing::debug!(server = check.server, %error, "reading an MCP server's output ended");
        }
    });
    (reads, writes)
}

/// The ids (as JSON) of kin's requests to the server not answered yet.
#[derive(Clone, Default)]
struct InFlight(Arc<Mutex<Vec<String>>>);

impl InFlight {
    fn add(&self, id: String) {
        lock(&self.0).push(id);
    }

    fn answered(&self, id: &str) {
        lock(&self.0).retain(|open| open != id);
    }

    fn take_all(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.0))
    }
}

/// What judges the server's lines: its name, kin's calls in flight, and the way to answer
/// the server itself.
struct Check {
    server: String,
    in_flight: InFlight,
    inject: mpsc::Sender<Vec<u8>>,
}

impl Check {
    /// What rmcp gets for whole `line`: itself, or the error answers standing for it.
    fn judge(&self, line: &[u8]) -> Vec<u8> {
        let (head, tail) = ends(line);
        let shape = shape(head, tail);
        let Some(error) = undecodable(line) else {
            if let Some(Shape {
                id: Some(id),
                method: false,
            }) = &shape
            {
                self.in_flight.answered(id);
            }
            return line.to_vec();
        };
        let server = &self.server;
        match shape {
            Some(Shape {
                id: Some(id),
                method: false,
            }) => {
                self.in_flight.answered(&id);
                let reason = format!("kin cannot decode the server's answer: {error}");
                error_answer(&id, -32603, &reason)
            }
            Some(Shape {
                id: Some(id),
                method: true,
            }) => {
                tracing::warn!(server, %error, "an MCP server's request kin cannot decode; answered -32700");
                let reason = format!("kin cannot decode this request: {error}");
                // Full only when the server floods kin with them: those are left unanswered.
                let _ = self.inject.try_send(error_answer(&id, -32700, &reason));
                Vec::new()
            }
            _ => {
                let failed = self.in_flight.take_all();
                tracing::warn!(server, %error, calls = failed.len(), "an MCP server sent a message kin cannot decode; its calls in flight fail");
                let reason = format!(
                    "the server sent a message kin cannot decode ({error}), so its calls in \
                     flight fail"
                );
                failed
                    .iter()
                    .flat_map(|id| error_answer(id, -32603, &reason))
                    .collect()
            }
        }
    }
}

/// Deeper than this, a message is failed here: JSON parsers (rmcp's too) stop at 128 levels,
/// counting the levels of the message's own envelope.
const MAX_DEPTH: usize = 100;

/// Why `line` cannot be decoded (not JSON, or nested past [`MAX_DEPTH`]); `None` when it can.
/// Both checks run without building the message.
fn undecodable(line: &[u8]) -> Option<String> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &byte in line {
        match (in_string, byte) {
            (true, _) if escaped => escaped = false,
            (true, b'\\') => escaped = true,
            (true, b'"') => in_string = false,
            (true, _) => {}
            (false, b'"') => in_string = true,
            (false, b'[' | b'{') => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(format!("the message nests deeper than {MAX_DEPTH} levels"));
                }
            }
            (false, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    serde_json::from_slice::<serde::de::IgnoredAny>(line)
        .err()
        .map(|error| format!("it is not JSON ({error})"))
}

/// A JSON-RPC error answer to `id` (JSON text), one line.
fn error_answer(id: &str, code: i64, message: &str) -> Vec<u8> {
    let error = serde_json::json!({"code": code, "message": message});
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{error}}}\n").into_bytes()
}

/// The first and last [`KEEP`] bytes of `line`.
fn ends(line: &[u8]) -> (&[u8], &[u8]) {
    (
        &line[..line.len().min(KEEP)],
        &line[line.len().saturating_sub(KEEP)..],
    )
}

/// Passes kin's lines to the server's stdin, noting the ids of kin's requests, and writes the
/// answers [`Check`] makes for the server between them. Closes the server's stdin when rmcp
/// closes its end.
async fn forward<W: AsyncWrite + Unpin>(
    from: DuplexStream,
    mut to: W,
    in_flight: InFlight,
    mut injected: mpsc::Receiver<Vec<u8>>,
) {
    let mut from = BufReader::new(from);
    let mut line = Vec::new();
    loop {
        // `read_until` keeps what it read when the other branch wins: the line goes on.
        let written = tokio::select! {
            read = from.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let (head, tail) = ends(&line);
                    if let Some(Shape { id: Some(id), method: true }) = shape(head, tail) {
                        in_flight.add(id);
                    }
                    let written = to.write_all(&line).await;
                    line.clear();
                    written
                }
            },
            Some(answer) = injected.recv() => to.write_all(&answer).await,
        };
        if written.is_err() || to.flush().await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// An oversized line being skipped: its start, its latest bytes, its length so far.
struct Skipped {
    head: Vec<u8>,
    tail: Vec<u8>,
    len: usize,
}

async fn copy_lines<R, W>(from: R, to: &mut W, max: usize, check: &Check) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut from = BufReader::with_capacity(64 * 1024, from);
    let mut line = Vec::new();
    let mut skipped: Option<Skipped> = None;
    loop {
        let available = from.fill_buf().await?;
        if available.is_empty() {
            return Ok(());
        }
        let newline = memchr(b'\n', available);
        let take = newline.map_or(available.len(), |at| at + 1);
        let chunk = &available[..take];
        match &mut skipped {
            None if line.len() + take <= max => line.extend_from_slice(chunk),
            None => {
                let mut whole = std::mem::take(&mut line);
                whole.extend_from_slice(chunk);
                let len = whole.len();
                let tail = whole[len.saturating_sub(KEEP)..].to_vec();
                whole.truncate(KEEP);
                skipped = Some(Skipped {
                    head: whole,
                    tail,
                    len,
                });
            }
            Some(skip) => {
                skip.len += take;
                skip.tail.extend_from_slice(chunk);
                let extra = skip.tail.len().saturating_sub(KEEP);
                skip.tail.drain(..extra);
            }
        }
        from.consume(take);
        if newline.is_none() {
            continue;
        }
        match skipped.take() {
            None => to.write_all(&check.judge(&line)).await?,
            Some(skip) => match answered_id(&skip.head, &skip.tail) {
                Some(id) => {
                    check.in_flight.answered(&id);
                    to.write_all(&refusal(&id, skip.len, max)).await?;
                }
                None => tracing::warn!(
                    server = check.server,
                    bytes = skip.len,
                    "an MCP server sent a message over {} MiB that answers no call of kin's; \
                     dropped",
                    max / (1024 * 1024)
                ),
            },
        }
        line.clear();
    }
}

/// The error answer that stands for an oversized one.
fn refusal(id: &str, len: usize, max: usize) -> Vec<u8> {
    let message = format!(
        "the server's answer is {len} bytes, over kin's limit of {} MiB for one message; \
         ask it for less",
        max / (1024 * 1024)
    );
    let error = serde_json::json!({"code": -32603, "message": message});
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{error}}}\n").into_bytes()
}

/// The id (as JSON) of a response whose start is `head` and end is `tail`: read from the
/// members before the first object or array (`{"jsonrpc":"2.0","id":7,"result":...`), else
/// from the last member (`...,"jsonrpc":"2.0","id":7}`). `None` for a request or
/// notification (a `method` member), or when neither end says.
fn answered_id(head: &[u8], tail: &[u8]) -> Option<String> {
    match shape(head, tail)? {
        Shape {
            id: Some(id),
            method: false,
        } => Some(id),
        _ => None,
    }
}

/// What the ends of a message say of it: its id (as JSON), and whether it has a `method` (a
/// request or notification) rather than being an answer.
#[derive(Debug, PartialEq)]
struct Shape {
    id: Option<String>,
    method: bool,
}

/// The [`Shape`] of the message whose start is `head` and end is `tail`, read from the members
/// before its first object or array, and the id also from its last member; `None` when `head`
/// is not an object's start, or an answer's big member is neither `result` nor `error`.
fn shape(head: &[u8], tail: &[u8]) -> Option<Shape> {
    let mut at = skip_ws(head, 0);
    if head.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let mut found = Shape {
        id: None,
        method: false,
    };
    loop {
        at = skip_ws(head, at);
        let mut values = serde_json::Deserializer::from_slice(&head[at..]).into_iter::<String>();
        let Some(Ok(key)) = values.next() else {
            break;
        };
        at = skip_ws(head, at + values.byte_offset());
        if head.get(at) != Some(&b':') {
            break;
        }
        at = skip_ws(head, at + 1);
        found.method |= key == "method";
        if matches!(head.get(at), Some(b'{' | b'[')) {
            // The big member: an answer's `result` or `error`, or a request's `params`.
            if !found.method && key != "result" && key != "error" {
                return None;
            }
            break;
        }
        let mut values =
            serde_json::Deserializer::from_slice(&head[at..]).into_iter::<serde_json::Value>();
        let Some(Ok(value)) = values.next() else {
            break;
        };
        if key == "id" {
            found.id = Some(value.to_string());
        }
        at = skip_ws(head, at + values.byte_offset());
        if head.get(at) != Some(&b',') {
            break;
        }
        at += 1;
    }
    if found.id.is_none() {
        found.id = last_member_id(tail);
    }
    Some(found)
}

/// The id of `...,"id":7}` or `...,"id":"x"}` at the very end of `tail`.
fn last_member_id(tail: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(tail).ok()?.trim_end();
    let text = text.strip_suffix('}')?.trim_end();
    let value_start = if let Some(quoted) = text.strip_suffix('"') {
        quoted.rfind('"')?
    } else {
        text.rfind(|c: char| !(c.is_ascii_digit() || c == '-'))? + 1
    };
    let value = &text[value_start..];
    let before = text[..value_start].trim_end().strip_suffix(':')?.trim_end();
    let before = before.strip_suffix("\"id\"")?.trim_end();
    if !before.ends_with(',') || value.is_empty() {
        return None;
    }
    let parsed: serde_json::Value = serde_json::from_str(value).ok()?;
    (parsed.is_number() || parsed.is_string()).then(|| parsed.to_string())
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> (Check, mpsc::Receiver<Vec<u8>>) {
        let (inject, injected) = mpsc::channel(16);
        let check = Check {
            server: "s".into(),
            in_flight: InFlight::default(),
            inject,
        };
        (check, injected)
    }

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn an_undecodable_answer_fails_its_call_and_a_request_is_answered_32700() {
        let (check, mut injected) = check();
        check.in_flight.add("4".into());
        check.in_flight.add("5".into());
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{\"content\":{}}}}}\n",
            nested(200)
        );
        let answer: serde_json::Value =
            serde_json::from_slice(&check.judge(deep.as_bytes())).unwrap();
        assert_eq!(answer["id"], 4);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("cannot decode the server's answer"),
            "{message}"
        );
        let request = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"elicitation/create\",\"params\":{}}}\n",
            nested(200)
        );
        assert!(check.judge(request.as_bytes()).is_empty());
        let sent: serde_json::Value =
            serde_json::from_slice(&injected.try_recv().unwrap()).unwrap();
        assert_eq!(
            (sent["id"].clone(), sent["error"]["code"].clone()),
            (9.into(), (-32700).into())
        );
        // Neither an answer nor a request: the call still in flight fails.
        let failed = check.judge(b"not json\n");
        let failed: serde_json::Value = serde_json::from_slice(&failed).unwrap();
        assert_eq!(failed["id"], 5);
        assert!(check.in_flight.take_all().is_empty());
        // A good answer passes as it is.
        let good = b"{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}}\n";
        assert_eq!(check.judge(good), good.to_vec());
    }

    #[test]
    fn the_id_is_found_where_sdks_put_it() {
        let python = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","#;
        assert_eq!(answered_id(python, b"").as_deref(), Some("7"));
        let typescript = br#"{"result":{"content":[{"type":"text","text":"xx"#;
        let end = br#"xxxx"}]},"jsonrpc":"2.0","id":"a-1"}"#;
        assert_eq!(answered_id(typescript, end).as_deref(), Some("\"a-1\""));
        let request = br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"#;
        assert_eq!(answered_id(request, br#""id":3}"#), None);
        let unknown = br#"{"result":{"content":"#;
        assert_eq!(answered_id(unknown, br#"xx"}]}}"#), None);
    }

    #[tokio::test]
    async fn an_oversized_answer_becomes_an_error_for_its_call() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{{\"text\":\"{}\"}}}}\n",
            "x".repeat(300)
        );
        let input = format!("{{\"small\":1}}\n{big}{{\"after\":2}}\n");
        let mut out = Vec::new();
        copy_lines(input.as_bytes(), &mut out, 100, &check().0)
            .await
            .unwrap();
        let lines: Vec<serde_json::Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["small"], 1);
        assert_eq!(lines[1]["id"], 4);
        let message = lines[1]["error"]["message"].as_str().unwrap();
        assert!(message.contains("bytes, over kin's limit"), "{message}");
        assert_eq!(lines[2]["after"], 2);
    }
}

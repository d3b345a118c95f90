//! A stdio server's messages on their way to rmcp, one line each. rmcp drops a line over its
//! 16 MiB limit without a word, so the call it answered would wait for ever: here such a line
//! is replaced by a JSON-RPC error for the same request id, and the call fails saying why. The
//! id is read from the line's start or end (where SDKs put it); a line whose id cannot be
//! found (or a request or notification of the server's) is dropped with a warning, and the
//! call's own time limit ends it.

use memchr::memchr;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};

/// The longest message passed on, newline included (rmcp's own limit).
pub(crate) const MAX_LINE: usize = 16 * 1024 * 1024;
/// How much of an oversized line's start and end is kept to find its id.
const KEEP: usize = 4096;

/// What rmcp reads instead of `from`: the same lines, an oversized answer replaced.
pub(crate) fn bounded<R: AsyncRead + Unpin + Send + 'static>(
    server: &str,
    from: R,
) -> DuplexStream {
    let (theirs, mut ours) = tokio::io::duplex(64 * 1024);
    let server = server.to_owned();
    tokio::spawn(async move {
        if let Err(error) = copy_lines(&server, from, &mut ours, MAX_LINE).await {
            tracing::debug!(server, %error, "reading an MCP server's output ended");
        }
    });
    theirs
}

/// An oversized line being skipped: its start, its latest bytes, its length so far.
struct Skipped {
    head: Vec<u8>,
    tail: Vec<u8>,
    len: usize,
}

async fn copy_lines<R, W>(server: &str, from: R, to: &mut W, max: usize) -> std::io::Result<()>
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
            None => to.write_all(&line).await?,
            Some(skip) => match answered_id(&skip.head, &skip.tail) {
                Some(id) => to.write_all(&refusal(&id, skip.len, max)).await?,
                None => tracing::warn!(
                    server,
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
    let mut at = skip_ws(head, 0);
    if head.get(at) != Some(&b'{') {
        return None;
    }
    at += 1;
    let mut id = None;
    loop {
        at = skip_ws(head, at);
        let mut values = serde_json::Deserializer::from_slice(&head[at..]).into_iter::<String>();
        let key = values.next()?.ok()?;
        at = skip_ws(head, at + values.byte_offset());
        if head.get(at) != Some(&b':') {
            return None;
        }
        at = skip_ws(head, at + 1);
        if key == "method" {
            return None;
        }
        if matches!(head.get(at), Some(b'{' | b'[')) {
            // The big member: the answer's `result` or `error`, when it is one.
            if key != "result" && key != "error" {
                return None;
            }
            return id.or_else(|| last_member_id(tail));
        }
        let mut values =
            serde_json::Deserializer::from_slice(&head[at..]).into_iter::<serde_json::Value>();
        let value = values.next()?.ok()?;
        if key == "id" {
            id = Some(value.to_string());
        }
        at = skip_ws(head, at + values.byte_offset());
        if head.get(at) != Some(&b',') {
            return None;
        }
        at += 1;
    }
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
        copy_lines("s", input.as_bytes(), &mut out, 100)
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

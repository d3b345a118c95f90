//! [`ModelRequest`] -> the JSON body of a streaming Chat Completions request.
//!
//! The system prompt is the first message; the preamble (what differs between sessions)
//! opens the first user message, so the system prompt and the tools make a prefix that is the
//! same in every session; user parts become one text message; assistant
//! blocks become one assistant message with `tool_calls`; tool results become `tool` messages
//! (their images, if any, a user message after them: see [`super::tool_images`]).
//!
//! Reasoning is sent back as DeepSeek's thinking mode requires: between two user messages, if
//! the model called a tool, every assistant message of that stretch carries its
//! `reasoning_content` (the API rejects the request otherwise); in stretches without tool calls
//! reasoning is left out (the API ignores it there, and older DeepSeek models reject it).
//! Endpoints that never produced reasoning never see the field.
//!
//! A long session's history is encoded once, not at every step: [`EncodedHistory`] keeps the
//! last body and where each message ends in it, and the next body keeps those bytes up to the
//! first message that is new or changed, encoding only the rest. The agent's requests share
//! their messages, so an unchanged one is known by its address, without reading it.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::alternate;
use super::tool_images;
use super::user_content::{self, UserEncoding};
use crate::model::{ModelRequest, ToolSpec};
use crate::session::history::HistoryItem;
use crate::session::{AssistantBlock, UserPart};

/// The request body for `model`, encoding every message (no earlier request to reuse).
#[cfg(test)]
pub(crate) fn body(model: &str, request: &ModelRequest, images: bool) -> Bytes {
    EncodedHistory::default().body(model, request, images)
}

/// A tool as the chat completions API takes it; serialised from the spec's own fields, so the
/// shared schemas are not copied for each request.
#[derive(serde::Serialize)]
struct ToolJson<'a> {
    r#type: &'static str,
    function: FunctionJson<'a>,
}

#[derive(serde::Serialize)]
struct FunctionJson<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn tool(spec: &ToolSpec) -> ToolJson<'_> {
    ToolJson {
        r#type: "function",
        function: FunctionJson {
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
        },
    }
}

/// One session's last request body, and where each history message ends in it.
#[derive(Debug, Default)]
pub(crate) struct EncodedHistory {
    /// One per history item of the last request, in order.
    items: Vec<EncodedItem>,
    /// The last body. The next one keeps its bytes up to the first message that changed
    /// (in place once the last call has let go of the buffer, else copied) and encodes only
    /// what follows: a long session's body is megabytes, of which a step adds a little.
    body: Bytes,
    /// Length of the body's opening: `{"model":…,"messages":[` and the system message.
    head_len: usize,
    /// The preamble the first user message was sent with.
    preamble: String,
}

#[derive(Debug)]
struct EncodedItem {
    item: Arc<HistoryItem>,
    kind: Kind,
    send_reasoning: bool,
    /// Whether the images of the tool results up to this one were written after it.
    ends_run: bool,
    /// Where the body's messages end once this item's is written (an item may send none).
    end: usize,
}

/// What the reasoning decision needs of an item, kept so an unchanged item is not read again.
#[derive(Debug, Clone, Copy)]
struct Kind {
    user: bool,
    tool_call: bool,
    reasoning: bool,
}

impl Kind {
    fn of(item: &HistoryItem) -> Self {
        let blocks: &[AssistantBlock] = match item {
            HistoryItem::Assistant(blocks) => blocks,
            _ => &[],
        };
        Self {
            user: matches!(item, HistoryItem::User(_)),
            tool_call: blocks
                .iter()
                .any(|b| matches!(b, AssistantBlock::ToolCall { .. })),
            reasoning: blocks
                .iter()
                .any(|b| matches!(b, AssistantBlock::Reasoning { .. })),
        }
    }
}

impl EncodedHistory {
    /// The request body for `model`, byte for byte what encoding it whole would give. The
    /// last body is kept up to the first item that is not the one at its place last time
    /// (the same shared item, or an equal one) or whose stretch now makes another reasoning
    /// decision; the items from there on are encoded afresh.
    pub(crate) fn body(&mut self, model: &str, request: &ModelRequest, images: bool) -> Bytes {
        let how = UserEncoding {
            images,
            blobs: request.blobs.as_deref(),
        };
        let history = alternate::alternating(request.history.items());
        let history = &history[..];
        // The preamble rides on the first user message: a new one re-encodes from there.
        let head = head(model, &request.system);
        let same = self
            .items
            .iter()
            .zip(history)
            .take_while(|(kept, item)| Arc::ptr_eq(&kept.item, item) || kept.item == **item)
            .count();
        let kinds: Vec<Kind> = history
            .iter()
            .enumerate()
            .map(|(at, item)| match self.items.get(at) {
                Some(kept) if at < same => kept.kind,
                _ => Kind::of(item),
            })
            .collect();
        let decisions = reasoning_decisions(&kinds);
        let ends_run: Vec<bool> = (0..history.len())
            .map(|at| tool_images::ends_run(history, at))
            .collect();
        let keep = if self.body.get(..self.head_len) == Some(head.as_bytes())
            && self.preamble == request.preamble
        {
            self.items[..same]
                .iter()
                .zip(decisions.iter().zip(&ends_run))
                .take_while(|(kept, (send, ends))| {
                    kept.send_reasoning == **send && kept.ends_run == **ends
                })
                .count()
        } else {
            0
        };
        let keep_bytes = match keep {
            0 => 0,
            _ => self.items[keep - 1].end,
        };
        let last = std::mem::take(&mut self.body);
        let mut out = if last.is_unique() {
            let mut reused = Vec::from(last);
            reused.truncate(keep_bytes);
            reused
        } else {
            last[..keep_bytes].to_vec()
        };
        if keep == 0 {
            out.clear();
            out.extend_from_slice(head.as_bytes());
        }
        self.head_len = head.len();
        self.preamble.clone_from(&request.preamble);
        self.items.truncate(keep);
        let first_user = history
            .iter()
            .position(|item| matches!(**item, HistoryItem::User(_)));
        for (at, item) in history.iter().enumerate().skip(keep) {
            let send_reasoning = decisions[at];
            let images = ends_run[at]
                .then(|| tool_images::follow_up(history, at, how))
                .flatten();
            if let HistoryItem::User(parts) = &**item {
                comma(&mut out);
                if Some(at) == first_user && !request.preamble.is_empty() {
                    let text = request.preamble.clone();
                    let parts: Vec<UserPart> = std::iter::once(UserPart::Text { text })
                        .chain(parts.iter().cloned())
                        .collect();
                    user_content::write_message(&parts, how, &mut out);
                } else {
                    user_content::write_message(parts, how, &mut out);
                }
            } else if let Some(message) = message(item, send_reasoning, how) {
                comma(&mut out);
                out.extend_from_slice(message.to_string().as_bytes());
            }
            if let Some(parts) = images {
                comma(&mut out);
                user_content::write_message(&parts, how, &mut out);
            }
            self.items.push(EncodedItem {
                item: item.clone(),
                kind: kinds[at],
                send_reasoning,
                ends_run: ends_run[at],
                end: out.len(),
            });
        }
        out.push(b']');
        if !request.tools.is_empty() {
            out.extend_from_slice(br#","tools":"#);
            let tools: Vec<ToolJson<'_>> = request.tools.iter().map(tool).collect();
            // Into a `Vec`, of strings and JSON values: this cannot fail.
            let _ = serde_json::to_writer(&mut out, &tools);
        }
        if let Some(max_tokens) = request.max_tokens {
            out.extend_from_slice(format!(r#","max_tokens":{max_tokens}"#).as_bytes());
        }
        out.extend_from_slice(br#","stream":true,"stream_options":{"include_usage":true}}"#);
        self.body = Bytes::from(out);
        self.body.clone()
    }
}

/// The array's first message follows its `[`; any other, a comma.
fn comma(out: &mut Vec<u8>) {
    if out.last() != Some(&b'[') {
        out.push(b',');
    }
}

/// The body up to its first history message: model, and the system prompt if any.
fn head(model: &str, system: &str) -> String {
    let mut head = format!(r#"{{"model":{},"messages":["#, Value::from(model));
    if !system.is_empty() {
        head.push_str(&json!({"role": "system", "content": system}).to_string());
    }
    head
}

/// The [`EncodedHistory`] of each session that called most recently, so that a session's next
/// step starts from its last one. Bounded: a session pushed out just encodes afresh.
#[derive(Debug, Default)]
pub(crate) struct RecentHistories {
    /// Least recently used first.
    sessions: Vec<(String, EncodedHistory)>,
}

impl RecentHistories {
    const KEPT: usize = 16;

    /// Takes out `session`'s history (an empty one if none is kept), to build a body with it
    /// while no lock is held; [`RecentHistories::put`] returns it.
    pub(crate) fn take(&mut self, session: &str) -> EncodedHistory {
        match self.sessions.iter().position(|(id, _)| id == session) {
            Some(at) => self.sessions.remove(at).1,
            None => EncodedHistory::default(),
        }
    }

    pub(crate) fn put(&mut self, session: String, encoded: EncodedHistory) {
        if self.sessions.len() >= Self::KEPT {
            self.sessions.remove(0);
        }
        self.sessions.push((session, encoded));
    }
}

/// For each history item, whether its assistant message is to carry `reasoning_content`:
/// decided per stretch, from a user message (or the start) up to the next one.
fn reasoning_decisions(kinds: &[Kind]) -> Vec<bool> {
    let mut decisions = vec![false; kinds.len()];
    let mut start = 0;
    while start < kinds.len() {
        let end = kinds[start + 1..]
            .iter()
            .position(|kind| kind.user)
            .map_or(kinds.len(), |at| start + 1 + at);
        let stretch = &kinds[start..end];
        let send = stretch.iter().any(|k| k.tool_call) && stretch.iter().any(|k| k.reasoning);
        decisions[start..end].fill(send);
        start = end;
    }
    decisions
}

/// The message of an assistant or tool item (user messages are written by `user_content`).
fn message(item: &HistoryItem, send_reasoning: bool, how: UserEncoding<'_>) -> Option<Value> {
    match item {
        HistoryItem::User(_) => None,
        HistoryItem::Assistant(blocks) => assistant(blocks, send_reasoning),
        HistoryItem::ToolResult {
            call_id,
            text,
            images,
            ..
        } if !images.is_empty() && !how.images => Some(json!({
            "role": "tool",
            "tool_call_id": call_id,
            "content": format!("{text}\n{}", tool_images::placeholder(images.len())),
        })),
        HistoryItem::ToolResult { call_id, text, .. } => Some(json!({
            "role": "tool",
            "tool_call_id": call_id,
            "content": text,
        })),
    }
}

/// An assistant message; `None` for one with neither text nor tool calls (a reasoning-only or
/// empty step), which chat APIs reject.
fn assistant(blocks: &[AssistantBlock], send_reasoning: bool) -> Option<Value> {
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block {
            AssistantBlock::Text { text: t } => text.push_str(t),
            AssistantBlock::Reasoning { text: t } => reasoning.push_str(t),
            AssistantBlock::ToolCall {
                id,
                name,
                arguments,
            } => calls.push(json!({
                "id": id,
                "type": "function",
                "function": {
                    "name": name,
                    // What every endpoint parses (see `crate::model::arguments`).
                    "arguments": crate::model::arguments::sendable(arguments),
                },
            })),
        }
    }
    if text.is_empty() && calls.is_empty() {
        return None;
    }
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), json!(text));
    if send_reasoning {
        message.insert("reasoning_content".into(), json!(reasoning));
    }
    if !calls.is_empty() {
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    Some(Value::Object(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> HistoryItem {
        HistoryItem::User(vec![UserPart::Text { text: text.into() }])
    }

    fn request(history: Vec<HistoryItem>) -> ModelRequest {
        ModelRequest {
            session_id: "s".into(),
            cwd: None,
            system: "be brief".into(),
            preamble: String::new(),
            history: history.into(),
            tools: vec![ToolSpec {
                name: "ls".into(),
                description: "list".into(),
                parameters: json!({"type": "object"}).into(),
            }],
            max_tokens: None,
            blobs: None,
        }
    }

    fn parsed_body(request: &ModelRequest) -> Value {
        serde_json::from_slice(&body("m", request, false)).unwrap()
    }

    fn messages(request: &ModelRequest) -> Vec<Value> {
        match parsed_body(request)["messages"].take() {
            Value::Array(messages) => messages,
            other => panic!("messages is not an array: {other}"),
        }
    }

    #[test]
    fn body_has_system_first_tools_and_usage_option() {
        let body = parsed_body(&request(vec![user("hi")]));
        assert_eq!(body["model"], "m");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(
            body.get("max_tokens").is_none(),
            "no cap unless the session has one"
        );
        assert_eq!(
            body["messages"],
            json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
        );
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "ls");
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
    }

    #[test]
    fn the_preamble_opens_the_first_user_message_only() {
        let mut request = request(vec![user("one"), user("two")]);
        request.history = vec![
            user("one"),
            HistoryItem::Assistant(vec![AssistantBlock::Text { text: "a".into() }]),
            user("two"),
        ]
        .into();
        request.preamble = "<workspace>here</workspace>".into();
        let mut cache = EncodedHistory::default();
        let sent: Value = serde_json::from_slice(&cache.body("m", &request, false)).unwrap();
        assert_eq!(
            sent["messages"][0]["content"], "be brief",
            "the system prompt is fixed"
        );
        assert_eq!(
            sent["messages"][1]["content"],
            "<workspace>here</workspace>\n\none"
        );
        assert_eq!(sent["messages"][3]["content"], "two");
        // Another preamble (say, a new agent definition): encoded afresh, never stale.
        request.preamble = "<workspace>there</workspace>".into();
        let kept = cache.body("m", &request, false);
        assert_eq!(kept, body("m", &request, false));
    }

    #[test]
    fn reasoning_goes_back_only_in_stretches_with_tool_calls() {
        let history = vec![
            user("first"),
            HistoryItem::Assistant(vec![
                AssistantBlock::Reasoning { text: "r1".into() },
                AssistantBlock::Text { text: "a1".into() },
            ]),
            user("second"),
            HistoryItem::Assistant(vec![
                AssistantBlock::Reasoning { text: "r2".into() },
                AssistantBlock::ToolCall {
                    id: "c".into(),
                    name: "ls".into(),
                    arguments: String::new(),
                },
            ]),
            HistoryItem::ToolResult {
                call_id: "c".into(),
                text: "out".into(),
                is_error: false,
                images: Vec::new(),
            },
            HistoryItem::Assistant(vec![AssistantBlock::Text { text: "a2".into() }]),
        ];
        let messages = messages(&request(history));
        assert_eq!(
            messages[2],
            json!({"role": "assistant", "content": "a1"}),
            "no tool call in the first stretch: no reasoning"
        );
        assert_eq!(
            messages[4],
            json!({"role": "assistant", "content": "", "reasoning_content": "r2", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ]})
        );
        assert_eq!(
            messages[5],
            json!({"role": "tool", "tool_call_id": "c", "content": "out"})
        );
        assert_eq!(
            messages[6],
            json!({"role": "assistant", "content": "a2", "reasoning_content": ""})
        );
    }

    #[test]
    fn without_reasoning_the_field_is_never_sent_and_empty_steps_are_dropped() {
        let history = vec![
            user("q"),
            HistoryItem::Assistant(vec![AssistantBlock::ToolCall {
                id: "c".into(),
                name: "ls".into(),
                arguments: "{\"a\":1}".into(),
            }]),
            HistoryItem::ToolResult {
                call_id: "c".into(),
                text: "x".into(),
                is_error: true,
                images: Vec::new(),
            },
            HistoryItem::User(vec![
                UserPart::Text { text: "see".into() },
                UserPart::ResourceLink {
                    uri: "file:///a.rs".into(),
                    name: "a.rs".into(),
                    mime_type: None,
                    title: None,
                    description: None,
                    size: None,
                },
            ]),
            HistoryItem::Assistant(vec![AssistantBlock::Reasoning {
                text: "only thoughts".into(),
            }]),
        ];
        let messages = messages(&request(history));
        assert_eq!(messages.len(), 5);
        assert!(messages[2].get("reasoning_content").is_none());
        assert_eq!(messages[4]["content"], "see\n\n[a.rs](file:///a.rs)");
    }

    #[test]
    fn a_kept_encoding_gives_the_same_bytes_as_encoding_afresh() {
        let reasoning_then_text = HistoryItem::Assistant(vec![
            AssistantBlock::Reasoning { text: "r".into() },
            AssistantBlock::Text {
                text: "a \"quoted\" é".into(),
            },
        ]);
        let call = HistoryItem::Assistant(vec![AssistantBlock::ToolCall {
            id: "c".into(),
            name: "ls".into(),
            arguments: "{}".into(),
        }]);
        let mut history = vec![user("one"), reasoning_then_text.clone()];
        let mut cache = EncodedHistory::default();
        let mut request = request(history.clone());
        let check = |request: &ModelRequest, cache: &mut EncodedHistory| {
            let kept = cache.body("m", request, false);
            assert_eq!(kept, body("m", request, false));
            let reparsed: Value = serde_json::from_slice(&kept).unwrap();
            assert_eq!(
                kept,
                reparsed.to_string(),
                "compact, in the order of a Value"
            );
        };
        check(&request, &mut cache);
        // A tool call later in the stretch makes the earlier message carry its reasoning.
        history.push(call);
        request.history = history.clone().into();
        check(&request, &mut cache);
        assert!(cache.items[1].send_reasoning);
        // A new stretch, a cap, then a shorter history (e.g. another model call's view).
        history.push(user("two"));
        request.history = history.clone().into();
        request.max_tokens = Some(5);
        check(&request, &mut cache);
        request.history = history[..1].to_vec().into();
        request.tools.clear();
        check(&request, &mut cache);
        assert_eq!(cache.items.len(), 1);
    }

    #[test]
    fn a_folded_history_reuses_what_it_shares_and_gives_the_same_bytes() {
        use crate::session::history::HistoryFold;
        use crate::session::parse_event_line;

        let lines = [
            r#"{"type":"user/message","seq":0,"time":0,"data":{"content":[{"type":"text","text":"one"}],"source":{"kind":"user"},"role":"user","id":"u"}}"#,
            r#"{"type":"assistant/message","seq":1,"time":0,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"reasoning","text":"r"},{"type":"tool-call","id":"c","name":"ls","arguments":"{}"}],"source":{},"id":"a"}}}"#,
            r#"{"type":"tool/result","seq":2,"time":0,"data":{"turn":1,"step":1,"message":{"source":{},"content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"out"}],"isError":false}],"role":"user","id":"r"}}}"#,
            r#"{"type":"assistant/message","seq":3,"time":0,"data":{"turn":1,"step":2,"message":{"role":"assistant","content":[{"type":"text","text":"done"}],"source":{},"id":"b"}}}"#,
        ];
        let mut events = Vec::new();
        for line in lines {
            parse_event_line(line, &mut events).unwrap();
        }
        let mut fold = HistoryFold::default();
        let mut cache = EncodedHistory::default();
        let mut request = request(Vec::new());
        let mut held = Vec::new();
        for (at, event) in events.iter().enumerate() {
            fold.push(event);
            request.history = fold.history();
            // While the call is open the view ends in an interrupted result, which the
            // next step's real result replaces.
            let kept = cache.body("m", &request, false);
            assert_eq!(kept, body("m", &request, false));
            // A body still held (a call in flight) is never written over; a released one's
            // buffer is reused.
            if at % 2 == 0 {
                held.push((kept, body("m", &request, false)));
            }
        }
        for (kept, fresh) in held {
            assert_eq!(kept, fresh);
        }
        let shared = request.history.items();
        assert_eq!(cache.items.len(), shared.len());
        assert!(cache
            .items
            .iter()
            .zip(shared)
            .all(|(kept, item)| Arc::ptr_eq(&kept.item, item)));
    }
}

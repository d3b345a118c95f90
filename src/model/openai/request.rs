//! [`ModelRequest`] -> the JSON body of a streaming Chat Completions request.
//!
//! The system prompt is the first message; user parts become one text message; assistant
//! blocks become one assistant message with `tool_calls`; tool results become `tool` messages.
//!
//! Reasoning is sent back as DeepSeek's thinking mode requires: between two user messages, if
//! the model called a tool, every assistant message of that stretch carries its
//! `reasoning_content` (the API rejects the request otherwise); in stretches without tool calls
//! reasoning is left out (the API ignores it there, and older DeepSeek models reject it).
//! Endpoints that never produced reasoning never see the field.

use serde_json::{json, Map, Value};

use crate::model::{ModelRequest, ToolSpec};
use crate::session::history::HistoryItem;
use crate::session::{AssistantBlock, UserPart};

/// The request body for `model`.
pub fn body(model: &str, request: &ModelRequest) -> Value {
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    out.insert("messages".into(), Value::Array(messages(request)));
    if !request.tools.is_empty() {
        out.insert(
            "tools".into(),
            Value::Array(request.tools.iter().map(tool).collect()),
        );
    }
    if let Some(max_tokens) = request.max_tokens {
        out.insert("max_tokens".into(), json!(max_tokens));
    }
    out.insert("stream".into(), json!(true));
    out.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(out)
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
    })
}

pub fn messages(request: &ModelRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.history.len() + 1);
    if !request.system.is_empty() {
        out.push(json!({"role": "system", "content": request.system}));
    }
    let history = &request.history;
    let mut stretch_start = 0;
    while stretch_start < history.len() {
        // A stretch: one user message (or the start) up to the next user message.
        let stretch_end = history[stretch_start + 1..]
            .iter()
            .position(|item| matches!(item, HistoryItem::User(_)))
            .map_or(history.len(), |at| stretch_start + 1 + at);
        let stretch = &history[stretch_start..stretch_end];
        let send_reasoning = stretch.iter().any(has_tool_call) && stretch.iter().any(has_reasoning);
        for item in stretch {
            if let Some(message) = message(item, send_reasoning) {
                out.push(message);
            }
        }
        stretch_start = stretch_end;
    }
    out
}

fn has_tool_call(item: &HistoryItem) -> bool {
    matches!(item, HistoryItem::Assistant(blocks)
        if blocks.iter().any(|b| matches!(b, AssistantBlock::ToolCall { .. })))
}

fn has_reasoning(item: &HistoryItem) -> bool {
    matches!(item, HistoryItem::Assistant(blocks)
        if blocks.iter().any(|b| matches!(b, AssistantBlock::Reasoning { .. })))
}

fn message(item: &HistoryItem, send_reasoning: bool) -> Option<Value> {
    match item {
        HistoryItem::User(parts) => Some(json!({"role": "user", "content": user_text(parts)})),
        HistoryItem::Assistant(blocks) => assistant(blocks, send_reasoning),
        HistoryItem::ToolResult { call_id, text, .. } => Some(json!({
            "role": "tool",
            "tool_call_id": call_id,
            "content": text,
        })),
    }
}

fn user_text(parts: &[UserPart]) -> String {
    parts
        .iter()
        .map(|part| match part {
            UserPart::Text { text } => text.clone(),
            UserPart::ResourceLink { uri, name, .. } => format!("[{name}]({uri})"),
        })
        .collect::<Vec<_>>()
        .join("\n\n")
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
                    // Some endpoints reject an empty string where JSON is expected.
                    "arguments": if arguments.trim().is_empty() { "{}" } else { arguments.as_str() },
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
            history,
            tools: vec![ToolSpec {
                name: "ls".into(),
                description: "list".into(),
                parameters: json!({"type": "object"}),
            }],
            max_tokens: None,
        }
    }

    #[test]
    fn body_has_system_first_tools_and_usage_option() {
        let body = body("m", &request(vec![user("hi")]));
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
}

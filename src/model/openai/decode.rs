//! Chat Completions stream chunks (the JSON in each SSE `data:` line) -> the log's chunk
//! vocabulary. Pure: no I/O, no timing; fed one `data` payload at a time.
//!
//! Block indices are handed out in order of first appearance: the reasoning text, the answer
//! text and each tool call (keyed by the endpoint's tool-call `index`) get one block each. Every
//! block is closed with `block-end` when the response finishes, followed by `usage` (when the
//! endpoint reported it) and exactly one `finish`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::json;

use crate::session::{AssistantBlock, BlockType, Chunk, FinishKind, FinishReason, Usage};

/// Why a `data` payload could not be decoded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("a chunk is not valid JSON ({error}): {excerpt}")]
    NotJson { error: String, excerpt: String },
    #[error("the endpoint reported an error in the stream: {0}")]
    Reported(String),
}

#[derive(Deserialize)]
struct StreamChunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<ApiUsage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    /// DeepSeek, vLLM (older) and others.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM (newer), Ollama, OpenRouter.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Deserialize)]
struct ToolCallDelta {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionDelta>,
}

#[derive(Deserialize)]
struct FunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct ApiUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    /// DeepSeek's name for cached prompt tokens.
    #[serde(default)]
    prompt_cache_hit_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

struct TextBlock {
    index: u32,
    text: String,
}

struct CallBlock {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

/// Decoding state of one response.
#[derive(Default)]
pub(crate) struct ChunkDecoder {
    next_index: u32,
    reasoning: Option<TextBlock>,
    text: Option<TextBlock>,
    /// Keyed by the endpoint's tool-call index.
    calls: BTreeMap<u32, CallBlock>,
    /// The key of the call the last index-less delta belonged to.
    last_call: Option<u32>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    finished: bool,
}

impl ChunkDecoder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Whether the endpoint has said why the response ended.
    pub(crate) fn saw_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Decodes one `data` payload, appending the chunks it yields to `out`.
    pub(crate) fn push(&mut self, data: &str, out: &mut Vec<Chunk>) -> Result<(), DecodeError> {
        let chunk: StreamChunk = serde_json::from_str(data).map_err(|e| DecodeError::NotJson {
            error: e.to_string(),
            excerpt: excerpt(data),
        })?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(|m| m.as_str())
                .map_or_else(|| error.to_string(), str::to_owned);
            return Err(DecodeError::Reported(message));
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
                cache_read_tokens: usage
                    .prompt_tokens_details
                    .and_then(|d| d.cached_tokens)
                    .or(usage.prompt_cache_hit_tokens),
                cache_write_tokens: None,
                reasoning_tokens: usage
                    .completion_tokens_details
                    .and_then(|d| d.reasoning_tokens),
            });
        }
        Ok(())
    }

    fn delta(&mut self, delta: Delta, out: &mut Vec<Chunk>) {
        let reasoning = delta.reasoning_content.or(delta.reasoning);
        if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
            let block = open_text(
                &mut self.reasoning,
                &mut self.next_index,
                BlockType::Reasoning,
                out,
            );
            out.push(Chunk::ReasoningDelta {
                index: block.index,
                text: text.clone(),
            });
            block.text.push_str(&text);
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            let block = open_text(&mut self.text, &mut self.next_index, BlockType::Text, out);
            out.push(Chunk::TextDelta {
                index: block.index,
                text: text.clone(),
            });
            block.text.push_str(&text);
        }
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            self.tool_call(position, call, out);
        }
    }

    /// Most endpoints number tool calls with `index`; for those that do not, a new `id` starts a
    /// new call and a delta with neither continues the last one.
    fn call_key(&self, position: usize, call: &ToolCallDelta) -> u32 {
        if let Some(index) = call.index {
            return index;
        }
        let fresh = || {
            self.calls
                .keys()
                .next_back()
                .map_or(position as u32, |k| k + 1)
        };
        match call.id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, c)| c.id == id)
                .map_or_else(fresh, |(k, _)| *k),
            None => self.last_call.unwrap_or_else(fresh),
        }
    }

    fn tool_call(&mut self, position: usize, call: ToolCallDelta, out: &mut Vec<Chunk>) {
        let key = self.call_key(position, &call);
        self.last_call = Some(key);
        let block = match self.calls.entry(key) {
            std::collections::btree_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::btree_map::Entry::Vacant(entry) => {
                let index = self.next_index;
                self.next_index += 1;
                out.push(Chunk::BlockStart {
                    index,
                    block_type: BlockType::ToolCall,
                });
                entry.insert(CallBlock {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                })
            }
        };
        if let Some(id) = call.id.filter(|id| !id.is_empty()) {
            if block.id.is_empty() {
                block.id = id;
            }
        }
        let (name, arguments) = match call.function {
            Some(f) => (f.name, f.arguments.unwrap_or_default()),
            None => (None, String::new()),
        };
        let new_name = name.filter(|n| !n.is_empty() && block.name.is_empty());
        if let Some(name) = &new_name {
            block.name.clone_from(name);
        }
        if new_name.is_none() && arguments.is_empty() {
            return;
        }
        block.arguments.push_str(&arguments);
        out.push(Chunk::ToolCallDelta {
            index: block.index,
            id: block.id.clone(),
            name: new_name,
            arguments_delta: arguments,
        });
    }

    /// Closes the response: `block-end` for every block in index order, `usage`, then one
    /// `finish`. Without a finish reason from the endpoint the response counts as complete
    /// (`[DONE]` arrived): tool calls, if any, else stop. Later calls yield nothing.
    pub(crate) fn finish(&mut self, out: &mut Vec<Chunk>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let mut ends: Vec<(u32, AssistantBlock)> = Vec::new();
        if let Some(block) = self.reasoning.take() {
            ends.push((block.index, AssistantBlock::Reasoning { text: block.text }));
        }
        if let Some(block) = self.text.take() {
            ends.push((block.index, AssistantBlock::Text { text: block.text }));
        }
        let had_calls = !self.calls.is_empty();
        for (key, call) in std::mem::take(&mut self.calls) {
            let id = if call.id.is_empty() {
                format!("call_{key}")
            } else {
                call.id
            };
            ends.push((
                call.index,
                AssistantBlock::ToolCall {
                    id,
                    name: call.name,
                    arguments: call.arguments,
                },
            ));
        }
        ends.sort_by_key(|(index, _)| *index);
        out.extend(
            ends.into_iter()
                .map(|(index, block)| Chunk::BlockEnd { index, block }),
        );
        if let Some(usage) = self.usage.take() {
            out.push(Chunk::Usage { usage });
        }
        let reason = match self.finish_reason.as_deref() {
            Some("stop") => finish(FinishKind::Stop),
            Some("tool_calls" | "function_call") => finish(FinishKind::ToolCalls),
            Some("length") => finish(FinishKind::MaxTokens),
            Some("content_filter") => finish(FinishKind::Refusal),
            Some(other) => FinishReason {
                kind: FinishKind::Error,
                failure: Some(json!({
                    "message": format!("the endpoint ended the response with finish_reason {other:?}")
                })),
            },
            None if had_calls => finish(FinishKind::ToolCalls),
            None => finish(FinishKind::Stop),
        };
        out.push(Chunk::Finish { reason });
    }
}

fn finish(kind: FinishKind) -> FinishReason {
    FinishReason {
        kind,
        failure: None,
    }
}

fn open_text<'a>(
    slot: &'a mut Option<TextBlock>,
    next_index: &mut u32,
    block_type: BlockType,
    out: &mut Vec<Chunk>,
) -> &'a mut TextBlock {
    slot.get_or_insert_with(|| {
        let index = *next_index;
        *next_index += 1;
        out.push(Chunk::BlockStart { index, block_type });
        TextBlock {
            index,
            text: String::new(),
        }
    })
}

/// The start of a payload, for error messages.
pub(super) fn excerpt(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(lines: &[&str]) -> Vec<Chunk> {
        let mut decoder = ChunkDecoder::new();
        let mut out = Vec::new();
        for line in lines {
            decoder.push(line, &mut out).unwrap();
        }
        decoder.finish(&mut out);
        out
    }

    #[test]
    fn reasoning_then_text_get_their_own_blocks_and_one_finish() {
        let chunks = decode(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Think"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"Hi","reasoning_content":null}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"prompt_cache_hit_tokens":5,"completion_tokens_details":{"reasoning_tokens":1}}}"#,
        ]);
        assert_eq!(
            chunks,
            vec![
                Chunk::BlockStart {
                    index: 0,
                    block_type: BlockType::Reasoning
                },
                Chunk::ReasoningDelta {
                    index: 0,
                    text: "Think".into()
                },
                Chunk::BlockStart {
                    index: 1,
                    block_type: BlockType::Text
                },
                Chunk::TextDelta {
                    index: 1,
                    text: "Hi".into()
                },
                Chunk::TextDelta {
                    index: 1,
                    text: "!".into()
                },
                Chunk::BlockEnd {
                    index: 0,
                    block: AssistantBlock::Reasoning {
                        text: "Think".into()
                    }
                },
                Chunk::BlockEnd {
                    index: 1,
                    block: AssistantBlock::Text { text: "Hi!".into() }
                },
                Chunk::Usage {
                    usage: Usage {
                        input_tokens: 7,
                        output_tokens: 3,
                        cache_read_tokens: Some(5),
                        cache_write_tokens: None,
                        reasoning_tokens: Some(1),
                    }
                },
                Chunk::Finish {
                    reason: finish(FinishKind::Stop)
                },
            ]
        );
    }

    #[test]
    fn tool_calls_are_reassembled_by_index() {
        let chunks = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"ls","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"cat","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"}"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        let ends: Vec<_> = chunks
            .iter()
            .filter_map(|c| match c {
                Chunk::BlockEnd { index, block } => Some((*index, block.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(
            ends,
            vec![
                (
                    0,
                    AssistantBlock::ToolCall {
                        id: "a".into(),
                        name: "ls".into(),
                        arguments: "{}".into()
                    }
                ),
                (
                    1,
                    AssistantBlock::ToolCall {
                        id: "b".into(),
                        name: "cat".into(),
                        arguments: "{}".into()
                    }
                ),
            ]
        );
        assert_eq!(
            chunks[1],
            Chunk::ToolCallDelta {
                index: 0,
                id: "a".into(),
                name: Some("ls".into()),
                arguments_delta: String::new()
            }
        );
        assert_eq!(
            chunks.last(),
            Some(&Chunk::Finish {
                reason: finish(FinishKind::ToolCalls)
            })
        );
    }

    #[test]
    fn calls_without_index_are_told_apart_by_id() {
        let chunks = decode(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"a","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"y","function":{"name":"b","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
        ]);
        let calls: Vec<_> = chunks
            .iter()
            .filter_map(|c| match c {
                Chunk::BlockEnd {
                    block: AssistantBlock::ToolCall { id, arguments, .. },
                    ..
                } => Some((id.as_str(), arguments.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(calls, vec![("x", "{}"), ("y", "{}")]);
    }

    #[test]
    fn finish_reasons_map_to_the_log_kinds() {
        for (reason, kind) in [
            ("stop", FinishKind::Stop),
            ("tool_calls", FinishKind::ToolCalls),
            ("length", FinishKind::MaxTokens),
            ("content_filter", FinishKind::Refusal),
            ("something_else", FinishKind::Error),
        ] {
            let line =
                format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{reason}"}}]}}"#);
            let chunks = decode(&[&line]);
            assert!(
                matches!(chunks.as_slice(), [Chunk::Finish { reason }] if reason.kind == kind),
                "{reason}: {chunks:?}"
            );
        }
    }

    #[test]
    fn bad_json_and_reported_errors_are_errors() {
        let mut decoder = ChunkDecoder::new();
        let mut out = Vec::new();
        assert!(matches!(
            decoder.push("{not json", &mut out),
            Err(DecodeError::NotJson { .. })
        ));
        assert_eq!(
            decoder.push(r#"{"error":{"message":"overloaded"}}"#, &mut out),
            Err(DecodeError::Reported("overloaded".into()))
        );
        assert!(out.is_empty());
    }
}

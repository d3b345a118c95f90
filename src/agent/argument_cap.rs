//! The cap on one tool call's arguments (`limits::Limits::tool_argument_bytes`). Arguments over
//! it are neither kept, logged nor run: their streamed deltas are dropped once the cap is
//! passed, and the finished call carries a small marker (size and a short prefix) instead, which
//! the turn answers with an error result, so the model learns why and the turn goes on.

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::session::{AssistantBlock, Chunk};

/// How much of refused arguments is kept to show what they were.
const PREFIX_BYTES: usize = 200;
/// The marker's one key; a model sending it itself only has its call refused.
const MARKER_KEY: &str = "kinRefusedArguments";

#[derive(Default)]
struct CallSize {
    bytes: usize,
    prefix: String,
    over: bool,
}

/// Watches the chunks of one model call.
pub(crate) struct ArgumentCap {
    max: usize,
    calls: HashMap<u32, CallSize>,
}

/// Refused arguments, as the marker records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) bytes: usize,
    pub(crate) limit: usize,
    pub(crate) prefix: String,
}

impl Refused {
    /// The error text given to the model.
    pub(crate) fn message(&self) -> String {
        format!(
            "Error: the arguments of this call are {} bytes, over kin's limit of {} bytes \
             (max_tool_argument_bytes); the call was not run. Send less per call, e.g. write a \
             large file in several smaller edits.",
            self.bytes, self.limit
        )
    }
}

impl ArgumentCap {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            calls: HashMap::new(),
        }
    }

    /// The chunk as it is to be kept and logged, or `None` to drop it.
    pub(crate) fn filter(&mut self, chunk: Chunk) -> Option<Chunk> {
        match chunk {
            Chunk::ToolCallDelta {
                index,
                id,
                name,
                arguments_delta,
            } => {
                let call = self.calls.entry(index).or_default();
                call.bytes += arguments_delta.len();
                if call.prefix.len() < PREFIX_BYTES {
                    let room = PREFIX_BYTES - call.prefix.len();
                    call.prefix
                        .push_str(crate::text::prefix(&arguments_delta, room));
                }
                if call.bytes > self.max && !call.over {
                    call.over = true;
                    tracing::warn!(
                        index,
                        limit = self.max,
                        prefix = %crate::text::visible(&call.prefix),
                        "a tool call's arguments passed the cap; the rest is dropped"
                    );
                }
                match (call.over, name) {
                    (false, name) => Some(Chunk::ToolCallDelta {
                        index,
                        id,
                        name,
                        arguments_delta,
                    }),
                    (true, Some(name)) => Some(Chunk::ToolCallDelta {
                        index,
                        id,
                        name: Some(name),
                        arguments_delta: String::new(),
                    }),
                    (true, None) => None,
                }
            }
            Chunk::BlockEnd {
                index,
                block:
                    AssistantBlock::ToolCall {
                        id,
                        name,
                        arguments,
                    },
            } => {
                let call = self.calls.remove(&index).unwrap_or_default();
                let bytes = call.bytes.max(arguments.len());
                let arguments = if call.over || arguments.len() > self.max {
                    let refused = Refused {
                        bytes,
                        limit: self.max,
                        prefix: crate::text::prefix(&arguments, PREFIX_BYTES).to_owned(),
                    };
                    tracing::warn!(
                        call_id = %id,
                        bytes,
                        limit = self.max,
                        prefix = %crate::text::visible(&refused.prefix),
                        "refusing a tool call whose arguments are over the cap"
                    );
                    marker(&refused)
                } else {
                    arguments
                };
                Some(Chunk::BlockEnd {
                    index,
                    block: AssistantBlock::ToolCall {
                        id,
                        name,
                        arguments,
                    },
                })
            }
            other => Some(other),
        }
    }
}

/// The arguments kept in place of refused ones: valid JSON, so the history stays acceptable to
/// endpoints that check it.
fn marker(refused: &Refused) -> String {
    json!({ MARKER_KEY: {
        "bytes": refused.bytes,
        "limit": refused.limit,
        "prefix": refused.prefix,
    }})
    .to_string()
}

/// The refusal a call's (logged) arguments stand for, if they are a marker.
pub(crate) fn refused(arguments: &str) -> Option<Refused> {
    if arguments.len() > 4 * PREFIX_BYTES + 200 || !arguments.contains(MARKER_KEY) {
        return None;
    }
    let value: Value = serde_json::from_str(arguments).ok()?;
    let inner = value
        .as_object()
        .filter(|o| o.len() == 1)?
        .get(MARKER_KEY)?;
    Some(Refused {
        bytes: usize::try_from(inner.get("bytes")?.as_u64()?).ok()?,
        limit: usize::try_from(inner.get("limit")?.as_u64()?).ok()?,
        prefix: inner.get("prefix")?.as_str()?.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(index: u32, name: Option<&str>, text: &str) -> Chunk {
        Chunk::ToolCallDelta {
            index,
            id: "c".into(),
            name: name.map(str::to_owned),
            arguments_delta: text.into(),
        }
    }

    fn end(index: u32, arguments: &str) -> Chunk {
        Chunk::BlockEnd {
            index,
            block: AssistantBlock::ToolCall {
                id: "c".into(),
                name: "write".into(),
                arguments: arguments.into(),
            },
        }
    }

    #[test]
    fn calls_under_the_cap_pass_unchanged() {
        let mut cap = ArgumentCap::new(10);
        assert_eq!(
            cap.filter(delta(0, Some("w"), "{}")),
            Some(delta(0, Some("w"), "{}"))
        );
        assert_eq!(cap.filter(end(0, "{}")), Some(end(0, "{}")));
        assert_eq!(refused("{}"), None);
    }

    #[test]
    fn calls_over_the_cap_drop_their_deltas_and_end_as_a_marker() {
        let mut cap = ArgumentCap::new(10);
        assert!(cap.filter(delta(1, Some("w"), "{\"a\":")).is_some());
        // This delta passes the cap: it is dropped, and so is every later one.
        assert_eq!(cap.filter(delta(1, None, "\"0123456789")), None);
        assert_eq!(cap.filter(delta(1, None, "more\"}")), None);
        // Another call keeps its own count.
        assert!(cap.filter(delta(2, Some("r"), "{}")).is_some());
        let whole = "{\"a\":\"0123456789more\"}";
        let Some(Chunk::BlockEnd {
            block: AssistantBlock::ToolCall { arguments, .. },
            ..
        }) = cap.filter(end(1, whole))
        else {
            panic!("a block end stays")
        };
        assert!(arguments.len() < 300, "{arguments}");
        let refusal = refused(&arguments).unwrap();
        assert_eq!(refusal.bytes, whole.len());
        assert_eq!(refusal.limit, 10);
        assert_eq!(refusal.prefix, whole);
        assert!(refusal.message().contains("max_tool_argument_bytes"));
    }

    #[test]
    fn arguments_given_whole_at_the_end_are_capped_too() {
        let mut cap = ArgumentCap::new(4);
        let big = "x".repeat(1000);
        let Some(Chunk::BlockEnd {
            block: AssistantBlock::ToolCall { arguments, .. },
            ..
        }) = cap.filter(end(0, &big))
        else {
            panic!()
        };
        let refusal = refused(&arguments).unwrap();
        assert_eq!((refusal.bytes, refusal.prefix.len()), (1000, PREFIX_BYTES));
    }
}

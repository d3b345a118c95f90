//! The session log vocabulary: the typed events that follow the header line (`header.rs`).
//!
//! The shapes follow `protocol/session-log.md`. Event types kin does not know (written by other
//! implementations, or by later versions) are kept as [`EventBody::Other`] and written back
//! unchanged, so reading and rewriting a log never loses anything.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use super::header::Header;
use super::records::{Descriptor, TaskEnd, TaskStart};
pub(crate) use super::tool_result::ToolResultContent;
pub use super::user_part::UserPart;

/// One event line: envelope plus typed body.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The event's place in the session (0, 1, 2, ... without gaps).
    pub seq: u64,
    /// When it was recorded (epoch ms); not monotonic, order by `seq`.
    pub time: u64,
    /// What happened.
    pub body: EventBody,
    /// The earlier events this one was derived from.
    pub source_event_seqs: Option<Vec<u64>>,
    /// Boxed, as it is rare: most events are streamed chunks.
    pub surface_op: Option<Box<Value>>,
}

impl Event {
    /// An event with no source events and no surface operation (most events).
    pub fn new(seq: u64, time: u64, body: EventBody) -> Self {
        Self {
            seq,
            time,
            body,
            source_event_seqs: None,
            surface_op: None,
        }
    }
}

/// The typed body of an event, one variant per event type of the session-log format.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum EventBody {
    /// `turn/start`: a turn began.
    TurnStart(TurnStart),
    /// `user/message`: a prompt or a runtime notice in the user role.
    UserMessage(UserMessage),
    /// `session/title`: the session's title.
    SessionTitle(SessionTitle),
    /// `step/start`: a model call began.
    StepStart(StepRef),
    /// `step/end`: a model call and its tool calls ended.
    StepEnd(StepRef),
    /// `assistant/chunk`: one streamed piece of the model's answer.
    AssistantChunk(AssistantChunk),
    // Boxed: the largest bodies, and rare next to chunks; an event stays small (a long log
    // holds one per line in memory).
    /// `assistant/message`: the model's whole answer of one step.
    AssistantMessage(Box<AssistantMessage>),
    /// `tool/call`: the model called a tool.
    ToolCall(ToolCall),
    /// `tool/result`: what the tool returned.
    ToolResult(Box<ToolResult>),
    /// `turn/end`: a turn ended, and how.
    TurnEnd(TurnEnd),
    /// `session/end-seed`: the end of the events a fork child copied from its parent.
    SessionEndSeed(Empty),
    /// `steering/message`: a message delivered into a running turn.
    SteeringMessage(SteeringMessage),
    /// `permission/mode`: the permission mode was switched.
    PermissionMode(PermissionModeSet),
    /// `permission/decision`: a permission prompt was answered.
    PermissionDecision(PermissionDecision),
    /// `subagent/descriptor`: how a delegated child was made, to continue it later.
    SubagentDescriptor(Descriptor),
    /// `task/start`: a background task began.
    TaskStart(TaskStart),
    /// `task/end`: a background task ended.
    TaskEnd(TaskEnd),
    /// `model/set`: the session switched models.
    ModelSet(super::context::ModelSet),
    /// `compaction/start`: the history is being compacted.
    CompactionStart(super::context::CompactionStart),
    /// `compaction/end`: the compacted history replaces the older events.
    CompactionEnd(super::context::CompactionEnd),
    /// Any type kin does not know, kept as it was.
    Other(OtherEvent),
}

/// An event type kin does not interpret; kept verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct OtherEvent {
    /// The event's type.
    pub kind: String,
    pub(crate) data: Value,
}

impl Serialize for OtherEvent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.data.serialize(serializer)
    }
}

// Record kinds (`lenient`) whose data does not have the shape kin reads are kept verbatim as
// `Other`, so an odd record never makes a log unreadable.
macro_rules! event_kinds {
    ($($variant:ident => $name:literal,)* ; lenient: $($lenient:ident => $lname:path,)*) => {
        /// The event types kin decodes: which lines a read of only some of them decodes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum EventKind {
            $(#[doc = concat!("`", $name, "`")] $variant,)*
            $(#[doc = concat!("The `", stringify!($lenient), "` record.")] $lenient,)*
        }

        impl EventKind {
            /// The `type` string of events of this kind on disk.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                    $(Self::$lenient => $lname,)*
                }
            }
        }

        impl EventBody {
            /// The `type` string of this event on disk.
            pub fn kind(&self) -> &str {
                match self {
                    $(Self::$variant(_) => $name,)*
                    $(Self::$lenient(_) => $lname,)*
                    Self::Other(other) => &other.kind,
                }
            }

            pub(super) fn decode(kind: &str, data: &str) -> serde_json::Result<Self> {
                let other = || -> serde_json::Result<Self> {
                    Ok(Self::Other(OtherEvent { kind: kind.to_owned(), data: serde_json::from_str(data)? }))
                };
                Ok(match kind {
                    $($name => Self::$variant(serde_json::from_str(data)?),)*
                    $($lname => match serde_json::from_str(data) {
                        Ok(body) => Self::$lenient(body),
                        Err(_) => other()?,
                    },)*
                    _ => other()?,
                })
            }
        }
    };
}

event_kinds! {
    TurnStart => "turn/start",
    UserMessage => "user/message",
    SessionTitle => "session/title",
    StepStart => "step/start",
    StepEnd => "step/end",
    AssistantChunk => "assistant/chunk",
    AssistantMessage => "assistant/message",
    ToolCall => "tool/call",
    ToolResult => "tool/result",
    TurnEnd => "turn/end",
    SessionEndSeed => "session/end-seed",
    SteeringMessage => "steering/message",
    PermissionMode => "permission/mode",
    PermissionDecision => "permission/decision",
    ModelSet => "model/set",
    CompactionStart => "compaction/start",
    CompactionEnd => "compaction/end",
    ;
    lenient:
    SubagentDescriptor => Descriptor::KIND,
    TaskStart => TaskStart::KIND,
    TaskEnd => TaskEnd::KIND,
}

/// An event with no data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Empty {}

/// Data of `turn/start`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    /// The turn's number (1-based).
    pub turn: u32,
    pub(crate) trigger: Value,
}

/// Data of `step/start` and `step/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRef {
    /// The turn.
    pub turn: u32,
    /// The step within it (1-based).
    pub step: u32,
}

/// A message in the user role: a prompt, a runtime notice, or a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    /// What the message says.
    pub content: Vec<UserPart>,
    pub(crate) source: Value,
    pub(crate) role: String,
    /// The message's id.
    pub id: String,
}

/// A message delivered into a running turn (`send_message` to a working child).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteeringMessage {
    /// The turn it was delivered into.
    pub turn: u32,
    pub(crate) message: UserMessage,
}

/// Data of `session/title`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTitle {
    /// The title.
    pub title: String,
    pub(crate) message_seqs: Vec<u64>,
    pub(crate) source: Value,
}

/// Data of `assistant/chunk`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantChunk {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    /// The piece.
    pub chunk: Chunk,
}

/// What a model streams; the `assistant/chunk` vocabulary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "kebab-case",
    rename_all_fields = "camelCase",
    try_from = "ChunkFields"
)]
pub enum Chunk {
    /// A block of the answer begins.
    BlockStart {
        /// The block's index in the answer.
        index: u32,
        /// What kind of block.
        block_type: BlockType,
    },
    /// More text of a text block.
    TextDelta {
        /// The block's index.
        index: u32,
        /// The text.
        text: String,
    },
    /// More text of a reasoning block.
    ReasoningDelta {
        /// The block's index.
        index: u32,
        /// The text.
        text: String,
    },
    /// More of a tool call.
    ToolCallDelta {
        /// The block's index.
        index: u32,
        /// The call's id.
        id: String,
        /// The tool's name (on the first delta).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// More of the arguments' JSON text.
        arguments_delta: String,
    },
    /// A block is complete.
    BlockEnd {
        /// The block's index.
        index: u32,
        /// The whole block.
        block: AssistantBlock,
    },
    /// The tokens the call used.
    Usage {
        /// The counts.
        usage: Usage,
    },
    /// The model stopped.
    Finish {
        /// Why.
        reason: FinishReason,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
enum ChunkKind {
    BlockStart,
    TextDelta,
    ReasoningDelta,
    ToolCallDelta,
    BlockEnd,
    Usage,
    Finish,
}

/// Every chunk type's fields in one flat struct, read in one pass. (Serde reads an internally
/// tagged enum by buffering each value first: several times slower, and a long log is mostly
/// chunks.)
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChunkFields {
    #[serde(rename = "type")]
    kind: ChunkKind,
    index: Option<u32>,
    block_type: Option<BlockType>,
    text: Option<String>,
    id: Option<String>,
    name: Option<String>,
    arguments_delta: Option<String>,
    block: Option<AssistantBlock>,
    usage: Option<Usage>,
    reason: Option<FinishReason>,
}

impl TryFrom<ChunkFields> for Chunk {
    type Error = String;

    fn try_from(f: ChunkFields) -> Result<Self, String> {
        fn need<T>(value: Option<T>, field: &str) -> Result<T, String> {
            value.ok_or_else(|| format!("missing field `{field}`"))
        }
        let index = || need(f.index, "index");
        Ok(match f.kind {
            ChunkKind::BlockStart => Chunk::BlockStart {
                index: index()?,
                block_type: need(f.block_type, "blockType")?,
            },
            ChunkKind::TextDelta => Chunk::TextDelta {
                index: index()?,
                text: need(f.text, "text")?,
            },
            ChunkKind::ReasoningDelta => Chunk::ReasoningDelta {
                index: index()?,
                text: need(f.text, "text")?,
            },
            ChunkKind::ToolCallDelta => Chunk::ToolCallDelta {
                index: index()?,
                id: need(f.id, "id")?,
                name: f.name,
                arguments_delta: need(f.arguments_delta, "argumentsDelta")?,
            },
            ChunkKind::BlockEnd => Chunk::BlockEnd {
                index: index()?,
                block: need(f.block, "block")?,
            },
            ChunkKind::Usage => Chunk::Usage {
                usage: need(f.usage, "usage")?,
            },
            ChunkKind::Finish => Chunk::Finish {
                reason: need(f.reason, "reason")?,
            },
        })
    }
}

/// The kinds of blocks in an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockType {
    /// Text for the user.
    Text,
    /// The model's reasoning.
    Reasoning,
    /// A tool call.
    ToolCall,
}

/// One finished block of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum AssistantBlock {
    /// Text for the user.
    Text {
        /// The text.
        text: String,
    },
    /// The model's reasoning.
    Reasoning {
        /// The text.
        text: String,
    },
    /// A tool call.
    ToolCall {
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments as the model wrote them (JSON text that may not parse).
        arguments: String,
    },
}

/// The tokens one model call used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Tokens sent.
    pub input_tokens: u64,
    /// Tokens received.
    pub output_tokens: u64,
    /// Of the tokens sent, those read from the provider's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Of the tokens sent, those written to the provider's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Of the tokens received, those spent on reasoning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FinishReason {
    /// The kind of stop.
    pub kind: FinishKind,
    /// What went wrong, for an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Value>,
}

/// The kinds of model stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FinishKind {
    /// The answer is complete.
    Stop,
    /// The model wants its tool calls run.
    ToolCalls,
    /// The output token limit was hit.
    MaxTokens,
    /// The model refused.
    Refusal,
    /// The call was aborted.
    Aborted,
    /// The call failed.
    Error,
}

/// Data of `assistant/message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    pub(crate) message: AssistantMessageBody,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<Usage>,
    /// The tool calls of a step cut at the token limit, taken out of `message` and not run.
    #[serde(
        rename = "droppedToolCalls",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub(crate) dropped_tool_calls: Option<DroppedToolCalls>,
}

/// The tool calls a step that finished at the token limit held, left unrun (see
/// `truncated.rs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedToolCalls {
    /// Why they were not run.
    pub reason: String,
    /// The calls, as the model wrote them.
    pub calls: Vec<AssistantBlock>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AssistantMessageBody {
    pub(crate) role: String,
    pub content: Vec<AssistantBlock>,
    pub(crate) source: Value,
    pub id: String,
}

/// Data of `tool/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    pub(crate) call_id: String,
    pub(crate) name: String,
    /// The raw JSON text the model produced; it may not parse.
    pub(crate) arguments: String,
}

/// Data of `tool/result`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The turn.
    pub turn: u32,
    /// The step.
    pub step: u32,
    pub(crate) message: ToolResultMessage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<ToolResultError>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) meta: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolResultMessage {
    pub(crate) source: Value,
    pub content: Vec<ToolResultPart>,
    pub(crate) role: String,
    pub id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolResultPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub(crate) tool_call_id: String,
    pub content: Vec<ToolResultContent>,
    pub(crate) is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ToolResultError {
    pub(crate) name: String,
    pub(crate) code: String,
}

impl ToolResult {
    /// The concatenated text the tool returned.
    pub(crate) fn text(&self) -> String {
        self.message
            .content
            .iter()
            .flat_map(|part| &part.content)
            .filter_map(|content| match content {
                ToolResultContent::Text { text } => Some(text.as_str()),
                ToolResultContent::Image { .. } => None,
            })
            .collect()
    }

    /// The images the tool returned, as user-message image parts.
    pub(crate) fn images(&self) -> Vec<UserPart> {
        self.message
            .content
            .iter()
            .flat_map(|part| &part.content)
            .filter_map(|content| match content {
                ToolResultContent::Image {
                    mime_type,
                    blob,
                    size,
                } => Some(UserPart::Image {
                    mime_type: mime_type.clone(),
                    blob: blob.clone(),
                    size: *size,
                    uri: None,
                }),
                ToolResultContent::Text { .. } => None,
            })
            .collect()
    }

    pub(crate) fn is_error(&self) -> bool {
        self.message.content.iter().any(|part| part.is_error)
    }

    pub(crate) fn call_id(&self) -> &str {
        self.message
            .content
            .first()
            .map(|part| part.tool_call_id.as_str())
            .unwrap_or_default()
    }
}

/// Data of `turn/end`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnEnd {
    /// The turn.
    pub turn: u32,
    pub(crate) reason: TurnEndReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<super::context::TurnUsage>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub(crate) enum TurnEndReason {
    Completed,
    Aborted,
    MaxTokens,
    Refusal,
    Disposed,
    Interrupted,
    /// kin's step limit was reached while the model still wanted tools.
    MaxSteps,
    /// A delegation time limit stopped a child's turn (its wall-clock limit or its idle
    /// watchdog).
    #[serde(rename = "timed_out")]
    TimedOut,
    /// A delegated child reached its token or cost budget.
    #[serde(rename = "budget_exhausted")]
    BudgetExhausted,
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<Value>,
    },
}

/// The session's permission mode was switched (`ask`, `allow` or `read-only`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionModeSet {
    pub(crate) mode: String,
    /// Who switched it, e.g. `{"kind":"client"}`.
    pub(crate) source: Value,
}

/// The user answered a permission prompt for one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionDecision {
    /// The turn of the call, if it ran in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The step of the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<u32>,
    pub(crate) call_id: String,
    /// The tool kind the answer is about (`edit`, `execute`, `read`, ...).
    pub kind: String,
    /// `workspace` (inside the session's roots) or `outside`.
    pub(crate) scope: String,
    /// `allow` or `reject`.
    pub(crate) decision: String,
    /// `once`, or `always` (remembered for the rest of the session).
    pub(crate) remember: String,
    /// For an MCP server's tool: the server, and the tool by the server's name for it (an
    /// `always` answer then covers that tool alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) tool: Option<String>,
}

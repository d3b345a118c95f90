//! Session events -> ACP `SessionUpdate`s, in one place: live (as a turn runs) and replayed
//! (`session/load`), so an editor sees the same conversation both ways. The one difference: a
//! command's editor terminal is shown live, its output text on replay (the terminal is gone).

use agent_client_protocol_schema::v1::{
    ContentBlock, ContentChunk, Diff, ResourceLink, SessionInfoUpdate, SessionUpdate, Terminal,
    ToolCall as AcpToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind as AcpToolKind,
};
use serde_json::Value;

use crate::session::{AssistantBlock, Chunk, Event, EventBody, ToolCall, ToolResult, UserPart};
use crate::time::iso8601;
use crate::tools::{ToolDisplay, ToolKind, ToolRegistry};

fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(text.to_owned()))
}

/// The updates to send while a turn runs, for one freshly appended event.
pub fn live(event: &Event, tools: &ToolRegistry) -> Option<SessionUpdate> {
    match &event.body {
        EventBody::AssistantChunk(c) => match &c.chunk {
            Chunk::TextDelta { text, .. } if !text.is_empty() => {
                Some(SessionUpdate::AgentMessageChunk(text_chunk(text)))
            }
            Chunk::ReasoningDelta { text, .. } if !text.is_empty() => {
                Some(SessionUpdate::AgentThoughtChunk(text_chunk(text)))
            }
            _ => None,
        },
        EventBody::ToolCall(call) => Some(tool_call(call, tools)),
        EventBody::ToolResult(result) => Some(tool_result(result, true)),
        EventBody::SessionTitle(title) => Some(SessionUpdate::SessionInfoUpdate(
            SessionInfoUpdate::new()
                .title(title.title.clone())
                .updated_at(iso8601(event.time)),
        )),
        _ => None,
    }
}

fn tool_call(call: &ToolCall, tools: &ToolRegistry) -> SessionUpdate {
    let arguments: Value = serde_json::from_str(&call.arguments)
        .unwrap_or_else(|_| Value::from(call.arguments.clone()));
    let (title, kind) = match tools.get(&call.name) {
        Some(tool) => (tool.title(&arguments), tool.kind()),
        None => (call.name.clone(), ToolKind::Other),
    };
    SessionUpdate::ToolCall(
        AcpToolCall::new(call.call_id.clone(), title)
            .kind(acp_kind(kind))
            .status(ToolCallStatus::InProgress)
            .raw_input(arguments),
    )
}

fn tool_result(result: &ToolResult, live: bool) -> SessionUpdate {
    let failed = result.is_error();
    let status = if failed {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let display = ToolDisplay::from_meta(result.meta.as_ref());
    let mut content = Vec::new();
    if live {
        content.extend(display.terminal_id.clone().map(terminal_content));
    }
    if !failed {
        content.extend(diff_content(&display));
    }
    if content.is_empty() || failed {
        content.push(ToolCallContent::from(result.text()));
    }
    let mut fields = ToolCallUpdateFields::new().status(status).content(content);
    if !display.locations.is_empty() {
        fields = fields.locations(locations(&display));
    }
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(result.call_id().to_owned(), fields))
}

fn terminal_content(terminal_id: String) -> ToolCallContent {
    ToolCallContent::Terminal(Terminal::new(terminal_id))
}

/// The diffs of a display as ACP content.
pub fn diff_content(display: &ToolDisplay) -> Vec<ToolCallContent> {
    display
        .diffs
        .iter()
        .map(|diff| {
            ToolCallContent::from(
                Diff::new(diff.path.clone(), diff.new_text.clone()).old_text(diff.old_text.clone()),
            )
        })
        .collect()
}

/// The locations of a display as ACP locations.
pub fn locations(display: &ToolDisplay) -> Vec<ToolCallLocation> {
    display
        .locations
        .iter()
        .map(|location| ToolCallLocation::new(location.path.clone()).line(location.line))
        .collect()
}

/// Shows a command's editor terminal on its tool call while it runs.
pub fn terminal_attached(call_id: &str, terminal_id: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().content(vec![terminal_content(terminal_id.to_owned())]),
    ))
}

pub fn acp_kind(kind: ToolKind) -> AcpToolKind {
    match kind {
        ToolKind::Read => AcpToolKind::Read,
        ToolKind::Edit => AcpToolKind::Edit,
        ToolKind::Delete => AcpToolKind::Delete,
        ToolKind::Move => AcpToolKind::Move,
        ToolKind::Search => AcpToolKind::Search,
        ToolKind::Execute => AcpToolKind::Execute,
        ToolKind::Think => AcpToolKind::Think,
        ToolKind::Fetch => AcpToolKind::Fetch,
        ToolKind::Other => AcpToolKind::Other,
    }
}

fn user_block(part: &UserPart) -> ContentBlock {
    match part {
        UserPart::Text { text } => ContentBlock::from(text.clone()),
        UserPart::ResourceLink {
            uri,
            name,
            mime_type,
            title,
            description,
            size,
        } => {
            let mut link = ResourceLink::new(name.clone(), uri.clone());
            link.mime_type.clone_from(mime_type);
            link.title.clone_from(title);
            link.description.clone_from(description);
            link.size = *size;
            ContentBlock::ResourceLink(link)
        }
    }
}

/// The whole stored conversation as updates, for `session/load`: user prompts, the model's
/// reasoning and text, tool calls with their results, the title, and compactions. Text a cancelled step
/// streamed before it was cut off is replayed too, though it never became a message.
pub fn replay(events: &[Event], tools: &ToolRegistry) -> Vec<SessionUpdate> {
    let mut out = Vec::new();
    let mut partial: Vec<(bool, String)> = Vec::new();
    let mut step_has_message = false;
    for event in events {
        match &event.body {
            EventBody::UserMessage(message)
                if message.source.get("kind").and_then(Value::as_str) == Some("user") =>
            {
                out.extend(message.content.iter().map(|part| {
                    SessionUpdate::UserMessageChunk(ContentChunk::new(user_block(part)))
                }));
            }
            EventBody::StepStart(_) => {
                partial.clear();
                step_has_message = false;
            }
            EventBody::AssistantChunk(c) => match &c.chunk {
                Chunk::TextDelta { text, .. } | Chunk::ReasoningDelta { text, .. } => {
                    let is_text = matches!(c.chunk, Chunk::TextDelta { .. });
                    match partial.last_mut() {
                        Some((last_is_text, acc)) if *last_is_text == is_text => acc.push_str(text),
                        _ => partial.push((is_text, text.clone())),
                    }
                }
                _ => {}
            },
            EventBody::AssistantMessage(message) => {
                step_has_message = true;
                for block in &message.message.content {
                    match block {
                        AssistantBlock::Text { text } => {
                            out.push(SessionUpdate::AgentMessageChunk(text_chunk(text)))
                        }
                        AssistantBlock::Reasoning { text } => {
                            out.push(SessionUpdate::AgentThoughtChunk(text_chunk(text)))
                        }
                        AssistantBlock::ToolCall { .. } => {}
                    }
                }
            }
            EventBody::StepEnd(_) if !step_has_message => {
                for (is_text, text) in partial.drain(..) {
                    out.push(if is_text {
                        SessionUpdate::AgentMessageChunk(text_chunk(&text))
                    } else {
                        SessionUpdate::AgentThoughtChunk(text_chunk(&text))
                    });
                }
            }
            EventBody::ToolResult(result) => out.push(tool_result(result, false)),
            EventBody::ToolCall(_) | EventBody::SessionTitle(_) => {
                out.extend(live(event, tools));
            }
            EventBody::CompactionStart(_) | EventBody::CompactionEnd(_) => {
                out.extend(super::models::compaction_updates(event));
            }
            _ => {}
        }
    }
    out
}

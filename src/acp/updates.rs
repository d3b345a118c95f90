//! Session events -> ACP `SessionUpdate`s, in one place: live (as a turn runs) and replayed
//! (`session/load`), so an editor sees the same conversation both ways. The one difference: a
//! command's editor terminal is shown live, its output text on replay (the terminal is gone).

use std::path::Path;

use agent_client_protocol_schema::v1::{
    ContentBlock, ContentChunk, Diff, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus,
    SessionInfoUpdate, SessionNotification, SessionUpdate, Terminal, ToolCall as AcpToolCall,
    ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
    ToolKind as AcpToolKind,
};
use serde_json::Value;

use crate::acp_client::content::{self, LinkDetails};
use crate::rpc::RequestContext;
use crate::session::{
    blobs, AssistantBlock, Chunk, Event, EventBody, ToolCall, ToolResult, UserPart,
};
use crate::time::iso8601;
use crate::tools::plan::{self, Priority, Status};
use crate::tools::{ToolDisplay, ToolKind, ToolRegistry};

/// The most text of one field (a message chunk, a tool's output, a diff side, a title) put in
/// one update: several such fields, JSON-escaped, still fit a line the editor accepts
/// (`rpc::MAX_LINE_BYTES`, 32 MiB). Longer text is cut with a note saying how much.
pub(crate) const MAX_FIELD_BYTES: usize = 4 * 1024 * 1024;

/// `text`, cut to [`MAX_FIELD_BYTES`].
pub(crate) fn field(text: &str) -> String {
    crate::text::bounded(text, MAX_FIELD_BYTES).into_owned()
}

/// A JSON value (tool input) whose text is over [`MAX_FIELD_BYTES`] becomes its cut text.
pub(crate) fn bounded_value(value: Value) -> Value {
    match serde_json::to_string(&value) {
        Ok(text) if text.len() > MAX_FIELD_BYTES => Value::from(field(&text)),
        _ => value,
    }
}

fn text_chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::from(field(text)))
}

/// The updates to send while a turn runs, for one freshly appended event.
/// `blob_dir` is the session's, where a tool's images are read from.
pub(crate) fn live(
    event: &Event,
    tools: &ToolRegistry,
    blob_dir: Option<&Path>,
) -> Option<SessionUpdate> {
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
        EventBody::ToolCall(call) if call.name == plan::NAME => plan_update(&call.arguments),
        EventBody::ToolCall(call) => Some(tool_call(call, tools)),
        EventBody::ToolResult(result) => tool_result(result, true, blob_dir),
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
        AcpToolCall::new(call.call_id.clone(), field(&crate::text::visible(&title)))
            .kind(acp_kind(kind))
            .status(ToolCallStatus::InProgress)
            .raw_input(bounded_value(arguments)),
    )
}

/// An `update_plan` call as the plan it sets (nothing for arguments that are not a plan: the
/// tool refuses them).
fn plan_update(arguments: &str) -> Option<SessionUpdate> {
    let entries = plan::entries(arguments)?;
    let entries = entries
        .into_iter()
        .map(|entry| {
            let priority = match entry.priority {
                Priority::High => PlanEntryPriority::High,
                Priority::Medium => PlanEntryPriority::Medium,
                Priority::Low => PlanEntryPriority::Low,
            };
            let status = match entry.status {
                Status::Pending => PlanEntryStatus::Pending,
                Status::InProgress => PlanEntryStatus::InProgress,
                Status::Completed => PlanEntryStatus::Completed,
            };
            PlanEntry::new(entry.content, priority, status)
        })
        .collect();
    Some(SessionUpdate::Plan(Plan::new(entries)))
}

/// A result as an update of its call; none for a call editors are not shown (`hidden`).
fn tool_result(result: &ToolResult, live: bool, blob_dir: Option<&Path>) -> Option<SessionUpdate> {
    let display = ToolDisplay::from_meta(result.meta.as_ref());
    if display.hidden {
        return None;
    }
    let failed = result.is_error();
    let status = if failed {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let mut content = Vec::new();
    if live {
        content.extend(display.terminal_id.clone().map(terminal_content));
    }
    if !failed {
        content.extend(diff_content(&display));
    }
    if content.is_empty() || failed {
        content.push(ToolCallContent::from(field(&result.text())));
    }
    // A tool's images (an MCP server's), as the editor shows a prompt's.
    content.extend(
        result
            .images()
            .iter()
            .filter_map(|part| user_block(part, blob_dir))
            .map(ToolCallContent::from),
    );
    let mut fields = ToolCallUpdateFields::new().status(status).content(content);
    if !display.locations.is_empty() {
        fields = fields.locations(locations(&display));
    }
    Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        result.call_id().to_owned(),
        fields,
    )))
}

fn terminal_content(terminal_id: String) -> ToolCallContent {
    ToolCallContent::Terminal(Terminal::new(terminal_id))
}

/// The diffs of a display as ACP content.
pub(crate) fn diff_content(display: &ToolDisplay) -> Vec<ToolCallContent> {
    display
        .diffs
        .iter()
        .map(|diff| {
            ToolCallContent::from(
                Diff::new(diff.path.clone(), field(&diff.new_text))
                    .old_text(diff.old_text.as_deref().map(field)),
            )
        })
        .collect()
}

/// The locations of a display as ACP locations.
pub(crate) fn locations(display: &ToolDisplay) -> Vec<ToolCallLocation> {
    display
        .locations
        .iter()
        .map(|location| ToolCallLocation::new(location.path.clone()).line(location.line))
        .collect()
}

/// Shows a command's editor terminal on its tool call while it runs.
/// What a running tool reported so far (an MCP server's progress), shown on its call.
pub(crate) fn progress_shown(call_id: &str, text: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::InProgress)
            .content(vec![ToolCallContent::from(field(text))]),
    ))
}

pub(crate) fn terminal_attached(call_id: &str, terminal_id: &str) -> SessionUpdate {
    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
        call_id.to_owned(),
        ToolCallUpdateFields::new().content(vec![terminal_content(terminal_id.to_owned())]),
    ))
}

pub(crate) fn acp_kind(kind: ToolKind) -> AcpToolKind {
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

/// A logged prompt part as the content block the client sent; `None` for a file kin attached
/// for a link (the link itself is replayed). Payloads come from the blob directory; one that
/// is missing there is replayed as a note.
fn user_block(part: &UserPart, blob_dir: Option<&Path>) -> Option<ContentBlock> {
    let read = |blob: &str, size: u64| blob_dir.and_then(|dir| blobs::get_text(dir, blob, size));
    let missing = |what: &str| ContentBlock::from(format!("[{what}: its data is missing]"));
    Some(match part {
        UserPart::Text { text } => ContentBlock::from(field(text)),
        UserPart::Image {
            mime_type,
            blob,
            uri,
            size,
        } => match read(blob, *size) {
            Some(data) => content::image(data, mime_type, uri.as_ref()),
            None => missing("image"),
        },
        UserPart::Resource {
            from_link: true, ..
        } => return None,
        UserPart::Resource {
            uri,
            mime_type,
            text,
            blob,
            binary,
            size,
            ..
        } => match text
            .clone()
            .or_else(|| blob.as_deref().and_then(|blob| read(blob, *size)))
        {
            Some(data) => content::resource(uri, mime_type.as_ref(), data, *binary),
            None => missing(uri),
        },
        UserPart::ResourceLink {
            uri,
            name,
            mime_type,
            title,
            description,
            size,
        } => content::link(
            name,
            uri,
            LinkDetails {
                mime_type: mime_type.as_ref(),
                title: title.as_ref(),
                description: description.as_ref(),
                size: *size,
            },
        ),
    })
}

/// The whole stored conversation as updates, for `session/load`: user prompts, the model's
/// reasoning and text, tool calls with their results, the title, and compactions. Text a cancelled step
/// streamed before it was cut off is replayed too, though it never became a message.
pub fn replay(
    events: &[Event],
    tools: &ToolRegistry,
    blob_dir: Option<&Path>,
) -> Vec<SessionUpdate> {
    let mut replay = Replay::default();
    let mut out = Vec::new();
    for event in events {
        replay.push(event, tools, blob_dir, &mut out);
    }
    out
}

/// [`replay`] one event at a time, for a log read as a stream: what the updates of the next
/// event depend on of the earlier ones (the current step's streamed text).
#[derive(Default)]
pub(crate) struct Replay {
    partial: Vec<(bool, String)>,
    step_has_message: bool,
}

impl Replay {
    /// Appends the updates `event` replays as to `out`.
    pub(crate) fn push(
        &mut self,
        event: &Event,
        tools: &ToolRegistry,
        blob_dir: Option<&Path>,
        out: &mut Vec<SessionUpdate>,
    ) {
        let Self {
            partial,
            step_has_message,
        } = self;
        match &event.body {
            EventBody::UserMessage(message)
                if message.source.get("kind").and_then(Value::as_str) == Some("user") =>
            {
                out.extend(message.content.iter().filter_map(|part| {
                    let block = user_block(part, blob_dir)?;
                    Some(SessionUpdate::UserMessageChunk(ContentChunk::new(block)))
                }));
            }
            EventBody::StepStart(_) => {
                partial.clear();
                *step_has_message = false;
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
                *step_has_message = true;
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
            EventBody::StepEnd(_) if !*step_has_message => {
                for (is_text, text) in partial.drain(..) {
                    out.push(if is_text {
                        SessionUpdate::AgentMessageChunk(text_chunk(&text))
                    } else {
                        SessionUpdate::AgentThoughtChunk(text_chunk(&text))
                    });
                }
            }
            EventBody::ToolResult(result) => out.extend(tool_result(result, false, blob_dir)),
            EventBody::ToolCall(_) | EventBody::SessionTitle(_) => {
                out.extend(live(event, tools, blob_dir));
            }
            EventBody::CompactionStart(_) | EventBody::CompactionEnd(_) => {
                out.extend(super::models::compaction_updates(event));
            }
            _ => {}
        }
    }
}

/// `session/load`'s replay, sent to the client event by event.
pub(super) struct Replayed<'a> {
    cx: &'a RequestContext,
    id: &'a str,
    compaction: bool,
    replay: Replay,
    out: Vec<SessionUpdate>,
}

impl<'a> Replayed<'a> {
    pub(super) fn new(cx: &'a RequestContext, id: &'a str, compaction: bool) -> Self {
        Self {
            cx,
            id,
            compaction,
            replay: Replay::default(),
            out: Vec::new(),
        }
    }

    pub(super) fn push(&mut self, event: &Event, tools: &ToolRegistry, blob_dir: Option<&Path>) {
        self.replay.push(event, tools, blob_dir, &mut self.out);
        for update in self.out.drain(..) {
            if !self.compaction && super::models::is_compaction(&update) {
                continue;
            }
            self.cx.peer.notify(
                "session/update",
                &SessionNotification::new(self.id.to_owned(), update),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_over_the_bound_are_cut_with_a_note() {
        assert_eq!(field("short"), "short");
        let long = "a".repeat(MAX_FIELD_BYTES + 10);
        let cut = field(&long);
        assert!(cut.len() < MAX_FIELD_BYTES + 100);
        assert!(cut.ends_with(&format!("[kin: 10 of {} bytes cut]", long.len())));
        let input = serde_json::json!({ "content": long });
        let bounded = bounded_value(input);
        assert!(bounded
            .as_str()
            .is_some_and(|text| text.len() < MAX_FIELD_BYTES + 100));
        let small = serde_json::json!({ "path": "a" });
        assert_eq!(bounded_value(small.clone()), small);
    }
}

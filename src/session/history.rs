//! Folds of a session log: the conversation the model sees, and the completed-turn prefix.

use super::event::{AssistantBlock, Event, EventBody, UserPart};

/// One message of the model-facing conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryItem {
    User(Vec<UserPart>),
    Assistant(Vec<AssistantBlock>),
    ToolResult {
        call_id: String,
        text: String,
        is_error: bool,
    },
}

/// Text given as the result of a tool call whose turn ended before it produced one.
pub const INTERRUPTED_TOOL_RESULT: &str = "Error: the tool call was interrupted before it finished";

/// The conversation as the model should see it: user messages, assistant messages and tool
/// results, in log order. Every tool call gets a result: one that has none (its turn was
/// cancelled or crashed) gets an interrupted-error result, since chat APIs reject dangling calls.
pub fn model_history(events: &[Event]) -> Vec<HistoryItem> {
    let mut items = Vec::new();
    let mut open_calls: Vec<String> = Vec::new();
    let close_open = |items: &mut Vec<HistoryItem>, open: &mut Vec<String>| {
        for call_id in open.drain(..) {
            items.push(HistoryItem::ToolResult {
                call_id,
                text: INTERRUPTED_TOOL_RESULT.into(),
                is_error: true,
            });
        }
    };
    for event in events {
        match &event.body {
            EventBody::UserMessage(message) => {
                close_open(&mut items, &mut open_calls);
                items.push(HistoryItem::User(message.content.clone()));
            }
            EventBody::SteeringMessage(steering) => {
                close_open(&mut items, &mut open_calls);
                items.push(HistoryItem::User(steering.message.content.clone()));
            }
            EventBody::AssistantMessage(message) => {
                close_open(&mut items, &mut open_calls);
                for block in &message.message.content {
                    if let AssistantBlock::ToolCall { id, .. } = block {
                        open_calls.push(id.clone());
                    }
                }
                items.push(HistoryItem::Assistant(message.message.content.clone()));
            }
            EventBody::ToolResult(result) => {
                let call_id = result.call_id().to_owned();
                open_calls.retain(|open| *open != call_id);
                items.push(HistoryItem::ToolResult {
                    call_id,
                    text: result.text(),
                    is_error: result.is_error(),
                });
            }
            _ => {}
        }
    }
    close_open(&mut items, &mut open_calls);
    items
}

/// The events up to and including the last `turn/end`: what a fork may inherit. The turn in
/// flight, if any, is never part of it.
pub fn completed_turn_prefix(events: &[Event]) -> &[Event] {
    let end = events
        .iter()
        .rposition(|event| matches!(event.body, EventBody::TurnEnd(_)))
        .map_or(0, |at| at + 1);
    &events[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::*;
    use serde_json::json;

    fn event(seq: u64, body: EventBody) -> Event {
        Event {
            seq,
            time: 0,
            body,
            source_event_seqs: None,
            surface_op: None,
        }
    }

    fn user(text: &str) -> EventBody {
        EventBody::UserMessage(UserMessage {
            content: vec![UserPart::Text { text: text.into() }],
            source: json!({"kind": "user"}),
            role: "user".into(),
            id: "u".into(),
        })
    }

    #[test]
    fn dangling_tool_calls_get_an_interrupted_result() {
        let call = EventBody::AssistantMessage(AssistantMessage {
            turn: 1,
            step: 1,
            message: AssistantMessageBody {
                role: "assistant".into(),
                content: vec![AssistantBlock::ToolCall {
                    id: "c1".into(),
                    name: "x".into(),
                    arguments: "{}".into(),
                }],
                source: json!({}),
                id: "a".into(),
            },
            usage: None,
        });
        let events = vec![
            event(0, user("hi")),
            event(1, call),
            event(2, user("again")),
        ];
        let history = model_history(&events);
        assert_eq!(history.len(), 4);
        assert_eq!(
            history[2],
            HistoryItem::ToolResult {
                call_id: "c1".into(),
                text: INTERRUPTED_TOOL_RESULT.into(),
                is_error: true
            }
        );
    }

    #[test]
    fn prefix_stops_at_the_last_turn_end() {
        let end = EventBody::TurnEnd(TurnEnd {
            turn: 1,
            reason: TurnEndReason::Completed,
        });
        let events = vec![event(0, user("a")), event(1, end), event(2, user("b"))];
        assert_eq!(completed_turn_prefix(&events).len(), 2);
        assert!(completed_turn_prefix(&events[..1]).is_empty());
    }
}

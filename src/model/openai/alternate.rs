//! Requests whose user and assistant turns alternate: chat templates that insist on it (Gemma's,
//! Mistral's, Llama 2's) refuse `user, user`. Adjacent user messages (a prompt after a failed
//! or empty turn, a compaction summary and the prompt after it, notices and steering) are sent
//! as one, their parts in order; an assistant message with nothing to send (an empty or
//! reasoning-only answer) between two of them is left out first, as it would be anyway.

use std::borrow::Cow;
use std::sync::Arc;

use crate::session::history::HistoryItem;
use crate::session::AssistantBlock;

/// `items` with no two user messages in a row (borrowed when there were none).
pub(super) fn alternating(items: &[Arc<HistoryItem>]) -> Cow<'_, [Arc<HistoryItem>]> {
    if !needs_merging(items) {
        return Cow::Borrowed(items);
    }
    let mut out: Vec<Arc<HistoryItem>> = Vec::with_capacity(items.len());
    for (at, item) in items.iter().enumerate() {
        match &**item {
            HistoryItem::Assistant(blocks) if silent(blocks) && user_follows(items, at) => {}
            HistoryItem::User(parts) => match out.last_mut() {
                Some(last) if matches!(**last, HistoryItem::User(_)) => {
                    let mut merged = match &**last {
                        HistoryItem::User(earlier) => earlier.clone(),
                        _ => Vec::new(),
                    };
                    merged.extend(parts.iter().cloned());
                    *last = Arc::new(HistoryItem::User(merged));
                }
                _ => out.push(item.clone()),
            },
            _ => out.push(item.clone()),
        }
    }
    Cow::Owned(out)
}

/// Whether an assistant message sends nothing (no text, no tool call).
fn silent(blocks: &[AssistantBlock]) -> bool {
    blocks.iter().all(|block| match block {
        AssistantBlock::Text { text } => text.is_empty(),
        AssistantBlock::Reasoning { .. } => true,
        AssistantBlock::ToolCall { .. } => false,
    })
}

/// Whether the next message after `at` that sends anything is a user message.
fn user_follows(items: &[Arc<HistoryItem>], at: usize) -> bool {
    items[at + 1..]
        .iter()
        .find(|item| !matches!(&***item, HistoryItem::Assistant(blocks) if silent(blocks)))
        .is_some_and(|item| matches!(**item, HistoryItem::User(_)))
}

fn needs_merging(items: &[Arc<HistoryItem>]) -> bool {
    let mut last_user = false;
    for item in items {
        match &**item {
            HistoryItem::User(_) if last_user => return true,
            HistoryItem::User(_) => last_user = true,
            HistoryItem::Assistant(blocks) if silent(blocks) => {}
            _ => last_user = false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::UserPart;

    fn user(text: &str) -> Arc<HistoryItem> {
        Arc::new(HistoryItem::User(vec![UserPart::Text {
            text: text.into(),
        }]))
    }

    fn said(text: &str) -> Arc<HistoryItem> {
        Arc::new(HistoryItem::Assistant(vec![AssistantBlock::Text {
            text: text.into(),
        }]))
    }

    #[test]
    fn adjacent_user_messages_become_one_and_silent_answers_between_them_go() {
        let thinking = Arc::new(HistoryItem::Assistant(vec![AssistantBlock::Reasoning {
            text: "hm".into(),
        }]));
        let items = vec![
            user("summary"),
            user("one"),
            said("a"),
            user("two"),
            thinking,
            said(""),
            user("three"),
        ];
        let out = alternating(&items);
        let texts: Vec<String> = out
            .iter()
            .map(|item| match &**item {
                HistoryItem::User(parts) => parts
                    .iter()
                    .map(|p| match p {
                        UserPart::Text { text } => text.clone(),
                        _ => String::new(),
                    })
                    .collect::<Vec<_>>()
                    .join("+"),
                HistoryItem::Assistant(_) => "A".into(),
                _ => "T".into(),
            })
            .collect();
        assert_eq!(texts, ["summary+one", "A", "two+three"]);
    }

    #[test]
    fn an_alternating_history_is_borrowed() {
        let items = vec![user("one"), said("a"), user("two")];
        assert!(matches!(alternating(&items), Cow::Borrowed(_)));
    }
}

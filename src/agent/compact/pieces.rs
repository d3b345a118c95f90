//! A history too long for one compaction request, cut into pieces that each fit: cuts fall
//! between messages, never between a tool call and its results; a single message longer than
//! a piece is shortened in its middle for the summary (the log keeps it whole).

use crate::session::history::HistoryItem;
use crate::session::{AssistantBlock, UserPart};

/// `items` in order, in pieces of at most `budget` bytes of text each (a piece may run over
/// only to keep tool results with their call).
pub(super) fn split(items: Vec<HistoryItem>, budget: usize) -> Vec<Vec<HistoryItem>> {
    let budget = budget.max(MIN_PIECE);
    let mut pieces: Vec<Vec<HistoryItem>> = Vec::new();
    let mut current: Vec<HistoryItem> = Vec::new();
    let mut size = 0;
    for item in items {
        let item = shorten(item, budget);
        let len = item.text_len();
        let result = matches!(item, HistoryItem::ToolResult { .. });
        if !current.is_empty() && size + len > budget && !result {
            pieces.push(std::mem::take(&mut current));
            size = 0;
        }
        size += len;
        current.push(item);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// The smallest piece worth a model call.
const MIN_PIECE: usize = 1024;

/// `item` with its long texts cut in the middle so that it holds at most about `max` bytes.
fn shorten(item: HistoryItem, max: usize) -> HistoryItem {
    if item.text_len() <= max {
        return item;
    }
    match item {
        HistoryItem::User(parts) => {
            let share = max / parts.len().max(1);
            HistoryItem::User(
                parts
                    .into_iter()
                    .map(|part| match part {
                        UserPart::Text { text } => UserPart::Text {
                            text: middle_cut(&text, share),
                        },
                        other => other,
                    })
                    .collect(),
            )
        }
        HistoryItem::Assistant(blocks) => {
            let share = max / blocks.len().max(1);
            HistoryItem::Assistant(
                blocks
                    .into_iter()
                    .map(|block| match block {
                        AssistantBlock::Text { text } => AssistantBlock::Text {
                            text: middle_cut(&text, share),
                        },
                        AssistantBlock::Reasoning { text } => AssistantBlock::Reasoning {
                            text: middle_cut(&text, share),
                        },
                        // Arguments must stay JSON: they are left whole.
                        call => call,
                    })
                    .collect(),
            )
        }
        HistoryItem::ToolResult {
            call_id,
            text,
            is_error,
            images,
        } => HistoryItem::ToolResult {
            call_id,
            text: middle_cut(&text, max),
            is_error,
            images,
        },
    }
}

/// `text` with its middle replaced by a note, when longer than `max` bytes.
fn middle_cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let keep = max / 2;
    let head = floor_boundary(text, keep);
    let tail = ceil_boundary(text, text.len() - keep);
    format!(
        "{}\n[... {} bytes left out of the summary's input ...]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> HistoryItem {
        HistoryItem::User(vec![UserPart::Text { text: text.into() }])
    }

    fn result(text: &str) -> HistoryItem {
        HistoryItem::ToolResult {
            call_id: "c".into(),
            text: text.into(),
            is_error: false,
            images: Vec::new(),
        }
    }

    #[test]
    fn pieces_fit_and_keep_results_with_their_call() {
        let call = HistoryItem::Assistant(vec![AssistantBlock::ToolCall {
            id: "c".into(),
            name: "read".into(),
            arguments: "{}".into(),
        }]);
        let items = vec![
            user(&"a".repeat(1020)),
            call,
            result(&"b".repeat(900)),
            user(&"c".repeat(900)),
        ];
        let pieces = split(items, 1024);
        let shapes: Vec<usize> = pieces.iter().map(Vec::len).collect();
        assert_eq!(shapes, [1, 2, 1], "the result stays with its call");
    }

    #[test]
    fn a_message_longer_than_a_piece_is_cut_in_the_middle() {
        let long = format!("start{}end", "é".repeat(5000));
        let pieces = split(vec![result(&long)], 2000);
        let HistoryItem::ToolResult { text, .. } = &pieces[0][0] else {
            panic!("a result")
        };
        assert!(text.starts_with("start") && text.ends_with("end"), "{text}");
        assert!(text.len() < 2100, "{}", text.len());
        assert!(text.contains("left out of the summary's input"));
    }
}

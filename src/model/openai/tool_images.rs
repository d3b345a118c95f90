//! A tool's images in a Chat Completions request. A `tool` message carries text only, so for
//! a model that takes images the images of a step's tool results follow those results in one
//! user message; a model that does not gets a line in the tool message saying so instead.

use super::user_content::UserEncoding;
use crate::session::history::HistoryItem;
use crate::session::UserPart;

/// The line a model without images reads after a tool's text.
pub(crate) fn placeholder(count: usize) -> String {
    format!("[the tool returned {count} image(s); this model does not take images, so they are not shown]")
}

/// Whether the item at `at` is the last tool result of a run of them (where their images go).
pub(crate) fn ends_run(items: &[std::sync::Arc<HistoryItem>], at: usize) -> bool {
    let is_result = |item: Option<&std::sync::Arc<HistoryItem>>| {
        matches!(
            item.map(|item| &**item),
            Some(HistoryItem::ToolResult { .. })
        )
    };
    is_result(items.get(at)) && !is_result(items.get(at + 1))
}

/// The parts of the user message with the images of the run of tool results ending at `at`;
/// `None` when they returned none or the model does not take images.
pub(crate) fn follow_up(
    items: &[std::sync::Arc<HistoryItem>],
    at: usize,
    how: UserEncoding<'_>,
) -> Option<Vec<UserPart>> {
    if !how.images {
        return None;
    }
    let mut parts = Vec::new();
    for item in items[..=at].iter().rev() {
        let HistoryItem::ToolResult {
            call_id, images, ..
        } = &**item
        else {
            break;
        };
        if images.is_empty() {
            continue;
        }
        let mut these = vec![UserPart::text(format!(
            "The images the tool call {call_id} returned:"
        ))];
        these.extend(images.iter().cloned());
        // Walking back: this call's parts go before the later calls'.
        parts.splice(0..0, these);
    }
    (!parts.is_empty()).then_some(parts)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn result(call_id: &str, images: usize, blob: &str) -> Arc<HistoryItem> {
        let image = UserPart::Image {
            mime_type: "image/png".into(),
            blob: blob.into(),
            size: 4,
            uri: None,
        };
        Arc::new(HistoryItem::ToolResult {
            call_id: call_id.into(),
            text: "t".into(),
            is_error: false,
            images: vec![image; images],
        })
    }

    #[test]
    fn the_images_of_a_run_follow_its_last_result_in_call_order() {
        let dir = tempfile::tempdir().unwrap();
        let sha = crate::session::blobs::put(dir.path(), b"iVBO").unwrap();
        let items = vec![
            Arc::new(HistoryItem::User(vec![UserPart::text("q")])),
            result("a", 1, &sha),
            result("b", 0, &sha),
            result("c", 2, &sha),
        ];
        assert!(!ends_run(&items, 0) && !ends_run(&items, 2) && ends_run(&items, 3));
        let how = UserEncoding {
            images: true,
            blobs: Some(dir.path()),
        };
        let parts = follow_up(&items, 3, how).unwrap();
        let texts: Vec<&str> = parts
            .iter()
            .filter_map(|part| match part {
                UserPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(parts.len(), 5, "two texts, three images");
        assert_eq!(
            texts,
            [
                "The images the tool call a returned:",
                "The images the tool call c returned:"
            ]
        );
        let without = UserEncoding {
            images: false,
            ..how
        };
        assert!(follow_up(&items, 3, without).is_none());
    }
}

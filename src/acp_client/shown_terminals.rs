//! How a child's terminals reach the editor in its passed-on tool calls. A tool call's content
//! may name a terminal (`{"type": "terminal", "terminalId"}`): one kin created in the editor
//! for the child keeps its id (the editor shows it live); one kin runs locally for the child,
//! or an id kin never gave it, means nothing to the editor, so the content becomes text: the
//! output kin holds for that terminal, or a note that there is none.

use agent_client_protocol_schema::v1::{SessionUpdate, ToolCallContent};

use crate::process::group::Terminal;

/// The most of a released local terminal's output kept for showing (its last bytes).
const KEPT_BYTES: usize = 16 * 1024;

/// How one of the child's terminals is shown to the editor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shown {
    /// The editor's own terminal: its id means something there.
    Editor,
    /// A terminal kin runs: what it printed, as text.
    Output(String),
}

/// A local terminal as the editor is shown it now.
pub(crate) fn local(terminal: &Terminal) -> Shown {
    let (text, truncated, status) = terminal.output();
    Shown::Output(rendered(&text, truncated, status.is_some()))
}

/// A local terminal being released, as the editor is shown it from now on (its last
/// [`KEPT_BYTES`]).
pub(crate) fn kept(terminal: &Terminal) -> Shown {
    let (text, truncated, _) = terminal.output();
    let mut start = text.len().saturating_sub(KEPT_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let truncated = truncated || start > 0;
    Shown::Output(rendered(&text[start..], truncated, true))
}

fn rendered(text: &str, truncated: bool, ended: bool) -> String {
    let mut shown = String::new();
    if truncated {
        shown.push_str("[... earlier output dropped ...]\n");
    }
    shown.push_str(text);
    if shown.is_empty() {
        shown.push_str(match ended {
            true => "(no output)",
            false => "(running, no output yet)",
        });
    }
    shown
}

/// Rewrites the terminals named in a tool call (or its update) for the editor, as `lookup`
/// says each is shown; an id it does not know becomes a note.
pub(crate) fn show(update: &mut SessionUpdate, lookup: impl Fn(&str) -> Option<Shown>) {
    let content = match update {
        SessionUpdate::ToolCall(call) => &mut call.content,
        SessionUpdate::ToolCallUpdate(call) => match &mut call.fields.content {
            Some(content) => content,
            None => return,
        },
        _ => return,
    };
    for item in content.iter_mut() {
        let ToolCallContent::Terminal(terminal) = item else {
            continue;
        };
        let id = terminal.terminal_id.0.to_string();
        let text = match lookup(&id) {
            Some(Shown::Editor) => continue,
            Some(Shown::Output(text)) => text,
            None => format!("[terminal {id}: its output is not available]"),
        };
        *item = ToolCallContent::from(text);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn shown(update: Value) -> Value {
        let mut update: SessionUpdate = serde_json::from_value(update).unwrap();
        show(&mut update, |id| match id {
            "term-1" => Some(Shown::Editor),
            "kin-terminal-1" => Some(Shown::Output("RAN\n".into())),
            _ => None,
        });
        serde_json::to_value(update).unwrap()
    }

    #[test]
    fn local_and_unknown_terminals_become_text_and_the_editors_keep_their_id() {
        let update = shown(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "c",
            "content": [{"type": "terminal", "terminalId": "kin-terminal-1"},
                        {"type": "terminal", "terminalId": "term-1"},
                        {"type": "terminal", "terminalId": "stranger"},
                        {"type": "content", "content": {"type": "text", "text": "kept"}}]}),
        );
        assert_eq!(
            update["content"],
            json!([{"type": "content", "content": {"type": "text", "text": "RAN\n"}},
                   {"type": "terminal", "terminalId": "term-1"},
                   {"type": "content", "content": {"type": "text",
                        "text": "[terminal stranger: its output is not available]"}},
                   {"type": "content", "content": {"type": "text", "text": "kept"}}])
        );
        let call = shown(
            json!({"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t",
            "content": [{"type": "terminal", "terminalId": "kin-terminal-1"}]}),
        );
        assert_eq!(call["content"][0]["content"]["text"], "RAN\n");
    }

    #[test]
    fn empty_and_cut_output_say_so() {
        assert_eq!(rendered("", false, false), "(running, no output yet)");
        assert_eq!(rendered("", false, true), "(no output)");
        assert_eq!(
            rendered("tail", true, true),
            "[... earlier output dropped ...]\ntail"
        );
    }
}

//! A step cut off at the output token limit owes no tool calls: the arguments of its calls may
//! be cut anywhere. Its calls are taken out of the assistant message (so the model never sees
//! a call without a result) and kept beside it, unrun, with the reason.

use super::event::{AssistantBlock, DroppedToolCalls};

/// Why the calls of a truncated step were not run (written in the log beside them).
pub(crate) const TRUNCATED_STEP: &str = "the model's output stopped at its token limit \
    (finish reason length), so these tool calls may be cut off; none was run";

impl DroppedToolCalls {
    /// Takes the tool calls out of `blocks`, keeping text and reasoning in order; `None` when
    /// there were none.
    pub(crate) fn take_from(blocks: &mut Vec<AssistantBlock>) -> Option<Self> {
        let (calls, kept): (Vec<_>, Vec<_>) = std::mem::take(blocks)
            .into_iter()
            .partition(|block| matches!(block, AssistantBlock::ToolCall { .. }));
        *blocks = kept;
        (!calls.is_empty()).then(|| Self {
            reason: TRUNCATED_STEP.to_owned(),
            calls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_go_and_the_text_stays() {
        let call = AssistantBlock::ToolCall {
            id: "c1".into(),
            name: "bash".into(),
            arguments: "{\"command\": \"rm -rf /tm".into(),
        };
        let text = AssistantBlock::Text {
            text: "Cleaning up".into(),
        };
        let mut blocks = vec![text.clone(), call.clone()];
        let dropped = DroppedToolCalls::take_from(&mut blocks).unwrap();
        assert_eq!(blocks, vec![text.clone()]);
        assert_eq!(dropped.calls, vec![call]);
        assert!(dropped.reason.contains("token limit"));
        let mut only_text = vec![text];
        assert_eq!(DroppedToolCalls::take_from(&mut only_text), None);
        assert_eq!(only_text.len(), 1);
    }
}

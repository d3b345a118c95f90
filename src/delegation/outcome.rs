//! What a child's run hands back to its parent's model. Its output follows one rule
//! ([`child_output`]); a run that did not complete answers with texts that are a wire contract
//! ([`failure_text`]): `Error: <headline>`, then `\nDiagnostic: <one line>` when the cause is
//! known, then `\nPartial output before the run ended:\n<text>` when the child produced any.
//! A background child's task carries the same text as its output.

use super::SubagentResult;
use crate::agent::StopReason;
use crate::session::{AssistantBlock, Chunk, Event, EventBody};
use crate::tasks::TaskOutcome;

/// The one rule for a child's output, over the events of one activation: the content of its
/// last assistant message that has text, else the text it streamed. An empty message (what a
/// step cut at the token limit that held only a tool call leaves) never erases an earlier
/// answer.
pub(crate) fn child_output(events: &[Event]) -> Vec<AssistantBlock> {
    let last = events.iter().rev().find_map(|event| match &event.body {
        EventBody::AssistantMessage(message) if has_text(&message.message.content) => {
            Some(message.message.content.clone())
        }
        _ => None,
    });
    if let Some(content) = last {
        return content;
    }
    let streamed: String = events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::AssistantChunk(chunk) => match &chunk.chunk {
                Chunk::TextDelta { text, .. } => Some(text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    match streamed.is_empty() {
        true => Vec::new(),
        false => vec![AssistantBlock::Text { text: streamed }],
    }
}

/// The text of the last turn in `events` by the same rule (a `kin mcp` task's partial output).
pub(crate) fn last_turn_output(events: &[Event]) -> String {
    let start = events
        .iter()
        .rposition(|event| matches!(event.body, EventBody::TurnStart(_)))
        .unwrap_or(0);
    child_output(&events[start..])
        .iter()
        .filter_map(|block| match block {
            AssistantBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn has_text(content: &[AssistantBlock]) -> bool {
    content
        .iter()
        .any(|block| matches!(block, AssistantBlock::Text { text } if !text.trim().is_empty()))
}

/// The headline of a run that did not complete; `None` for one that did.
pub(crate) fn headline(result: &SubagentResult) -> Option<String> {
    let text = match result.stop_reason {
        StopReason::Completed => return None,
        StopReason::Cancelled => "subagent run was cancelled",
        StopReason::MaxTokens => "subagent run hit its token limit before finishing",
        StopReason::Refusal => "subagent declined the task",
        // kin's own limits keep their words.
        StopReason::TimedOut => "subagent run timed_out",
        StopReason::BudgetExhausted => "subagent run budget_exhausted",
        StopReason::MaxSteps | StopReason::Error => match &result.abnormal {
            Some(reason) => return Some(format!("subagent run ended abnormally ({reason})")),
            // A child that runs out of steps has not answered: its run failed.
            None => "subagent run failed",
        },
    };
    Some(text.to_owned())
}

/// What the parent's model reads for a run that did not complete; `None` for one that did.
pub(crate) fn failure_text(result: &SubagentResult) -> Option<String> {
    let mut text = format!("Error: {}", headline(result)?);
    if let Some(diagnostic) = &result.diagnostic {
        text.push_str("\nDiagnostic: ");
        text.push_str(diagnostic);
    }
    let partial = result.text();
    if !partial.trim().is_empty() {
        text.push_str("\nPartial output before the run ended:\n");
        text.push_str(&partial);
    }
    Some(text)
}

/// The error code of a foreground run that did not complete: a limit has its own.
pub(crate) fn failure_code(reason: StopReason) -> &'static str {
    match reason {
        StopReason::TimedOut => "SUBAGENT_TIMED_OUT",
        StopReason::BudgetExhausted => "SUBAGENT_BUDGET_EXHAUSTED",
        _ => "SUBAGENT_FAILED",
    }
}

/// A background activation's task outcome: completed with the answer text, killed when
/// cancelled; otherwise failed, its status detail the stop reason and the diagnostic, its
/// output the text a foreground call would have answered (partial output included).
pub(crate) fn task_outcome(result: SubagentResult) -> TaskOutcome {
    let reason = match result.stop_reason {
        StopReason::Completed => return TaskOutcome::completed(result.text()),
        StopReason::Cancelled => return TaskOutcome::killed(),
        StopReason::MaxTokens => "max-tokens",
        StopReason::Refusal => "refusal",
        StopReason::TimedOut => "timed_out",
        StopReason::BudgetExhausted => "budget_exhausted",
        StopReason::MaxSteps | StopReason::Error => "error",
    };
    let mut outcome = match &result.diagnostic {
        Some(diagnostic) => TaskOutcome::failed(format!("{reason}: {diagnostic}")),
        None => TaskOutcome::failed(reason),
    };
    outcome.output = failure_text(&result);
    outcome
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::session::{AssistantChunk, AssistantMessage};
    use crate::tasks::TaskStatus;

    fn result(stop_reason: StopReason, diagnostic: Option<&str>, output: &str) -> SubagentResult {
        SubagentResult {
            output: match output {
                "" => Vec::new(),
                text => vec![AssistantBlock::Text { text: text.into() }],
            },
            structured: None,
            stop_reason,
            diagnostic: diagnostic.map(str::to_owned),
            abnormal: None,
        }
    }

    fn message(seq: u64, content: serde_json::Value) -> Event {
        let data = json!({"turn": 1, "step": seq, "message": {"role": "assistant",
            "content": content, "source": {"kind": "model", "provider": "p", "model": "m"},
            "id": "x"}});
        let message: AssistantMessage = serde_json::from_value(data).unwrap();
        Event::new(seq, 0, EventBody::AssistantMessage(Box::new(message)))
    }

    fn delta(seq: u64, text: &str) -> Event {
        let chunk = Chunk::TextDelta {
            index: 0,
            text: text.into(),
        };
        let body = EventBody::AssistantChunk(AssistantChunk {
            turn: 1,
            step: 1,
            chunk,
        });
        Event::new(seq, 0, body)
    }

    fn text_of(blocks: &[AssistantBlock]) -> String {
        blocks
            .iter()
            .filter_map(|block| match block {
                AssistantBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_output_is_the_last_message_with_text() {
        let events = [
            delta(0, "Half"),
            message(1, json!([{"type": "text", "text": "First answer"}])),
            message(
                2,
                json!([{"type": "text", "text": "Final answer"},
                {"type": "tool-call", "id": "c", "name": "read", "arguments": "{}"}]),
            ),
        ];
        assert_eq!(text_of(&child_output(&events)), "Final answer");
    }

    #[test]
    fn an_empty_message_never_erases_an_earlier_answer() {
        // What a step cut at the token limit that held only a tool call leaves.
        let events = [
            message(1, json!([{"type": "text", "text": "The answer is 42."}])),
            message(2, json!([])),
            message(
                3,
                json!([{"type": "tool-call", "id": "c", "name": "read",
                "arguments": "{}"}]),
            ),
        ];
        assert_eq!(text_of(&child_output(&events)), "The answer is 42.");
    }

    #[test]
    fn without_a_message_with_text_the_output_is_what_was_streamed() {
        let events = [
            delta(0, "Thinking"),
            delta(1, " hard"),
            message(2, json!([])),
        ];
        assert_eq!(text_of(&child_output(&events)), "Thinking hard");
        assert!(child_output(&[message(0, json!([]))]).is_empty());
    }

    #[test]
    fn every_headline_is_the_reference_text() {
        let cases = [
            (StopReason::Cancelled, "subagent run was cancelled"),
            (StopReason::Error, "subagent run failed"),
            (StopReason::MaxSteps, "subagent run failed"),
            (
                StopReason::MaxTokens,
                "subagent run hit its token limit before finishing",
            ),
            (StopReason::Refusal, "subagent declined the task"),
            (StopReason::TimedOut, "subagent run timed_out"),
            (StopReason::BudgetExhausted, "subagent run budget_exhausted"),
        ];
        for (reason, expected) in cases {
            assert_eq!(
                headline(&result(reason, None, "")).as_deref(),
                Some(expected)
            );
        }
        assert_eq!(headline(&result(StopReason::Completed, None, "")), None);
        let mut odd = result(StopReason::Error, None, "");
        odd.abnormal = Some("max_turn_requests".into());
        assert_eq!(
            headline(&odd).as_deref(),
            Some("subagent run ended abnormally (max_turn_requests)")
        );
    }

    #[test]
    fn a_failure_reads_headline_diagnostic_and_partial_output() {
        let failed = result(
            StopReason::Error,
            Some("model endpoint answered HTTP 500: overloaded"),
            "Thinking",
        );
        assert_eq!(
            failure_text(&failed).unwrap(),
            "Error: subagent run failed\nDiagnostic: model endpoint answered HTTP 500: \
             overloaded\nPartial output before the run ended:\nThinking"
        );
        let bare = result(StopReason::Refusal, None, "  ");
        assert_eq!(
            failure_text(&bare).unwrap(),
            "Error: subagent declined the task"
        );
        assert_eq!(
            failure_text(&result(StopReason::Completed, None, "ok")),
            None
        );
    }

    #[test]
    fn a_failed_dispose_is_reported_beside_the_runs_failure() {
        let failed = result(StopReason::Error, Some("transport gone"), "")
            .with_dispose_failure(Some("reap failed".into()));
        assert_eq!(
            failed.diagnostic.as_deref(),
            Some("transport gone; dispose failed: reap failed")
        );
        // A completed run whose child would not go away is not a clean completion; its answer
        // stays as the partial output.
        let done = result(StopReason::Completed, None, "answer")
            .with_dispose_failure(Some("reap failed".into()));
        assert_eq!(
            failure_text(&done).unwrap(),
            "Error: subagent run failed\nDiagnostic: dispose failed: reap failed\nPartial \
             output before the run ended:\nanswer"
        );
        let clean = result(StopReason::Completed, None, "answer").with_dispose_failure(None);
        assert_eq!(clean.stop_reason, StopReason::Completed);
    }

    #[test]
    fn task_outcomes_carry_the_same_text() {
        let done = task_outcome(result(StopReason::Completed, None, "partial"));
        assert_eq!(done.output.as_deref(), Some("partial"));
        assert_eq!(
            task_outcome(result(StopReason::Cancelled, None, "partial")).status,
            TaskStatus::Killed
        );
        let steps = task_outcome(result(StopReason::MaxSteps, None, ""));
        assert_eq!(
            (steps.status, steps.detail.as_deref()),
            (TaskStatus::Failed, Some("error"))
        );
        let tokens = task_outcome(result(StopReason::MaxTokens, Some("cut"), "half"));
        assert_eq!(tokens.detail.as_deref(), Some("max-tokens: cut"));
        assert_eq!(
            tokens.output.as_deref(),
            Some(
                "Error: subagent run hit its token limit before finishing\nDiagnostic: cut\n\
                 Partial output before the run ended:\nhalf"
            )
        );
    }
}

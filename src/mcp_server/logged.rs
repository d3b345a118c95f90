//! `kin_output` of a session whose tasks ran in an earlier `kin mcp` process: this process's
//! task service knows nothing of them, so the answer is read from the session's log: how its
//! last turn ended, and the text of that turn's last assistant message.

use crate::session::{AssistantBlock, Event, EventBody, TurnEndReason};
use crate::tasks::TaskStatus;

/// The last turn of a session, as its log tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoggedTurn {
    /// The turn's number.
    pub(crate) turn: u32,
    /// How it ended (`Interrupted`: the log has no end for it).
    pub(crate) status: TaskStatus,
    /// Its final answer, when it completed; what it produced, when it failed.
    pub(crate) answer: Option<String>,
    /// Why it did not complete.
    pub(crate) detail: Option<String>,
}

/// The last turn in `events`, if the session ran any.
pub(crate) fn last_turn(events: &[Event]) -> Option<LoggedTurn> {
    let start = events
        .iter()
        .rposition(|event| matches!(event.body, EventBody::TurnStart(_)))?;
    let EventBody::TurnStart(opened) = &events[start].body else {
        return None;
    };
    let turn = opened.turn;
    let since = &events[start..];
    let ended = since.iter().find_map(|event| match &event.body {
        EventBody::TurnEnd(end) if end.turn == turn => Some(&end.reason),
        _ => None,
    });
    let (status, detail) = match ended {
        None => (
            TaskStatus::Interrupted,
            Some("the server that ran it ended before the turn did".to_owned()),
        ),
        Some(TurnEndReason::Completed) => (TaskStatus::Completed, None),
        Some(TurnEndReason::Aborted) => (TaskStatus::Killed, None),
        Some(TurnEndReason::Interrupted | TurnEndReason::Disposed) => (
            TaskStatus::Interrupted,
            Some("the turn was interrupted".to_owned()),
        ),
        Some(TurnEndReason::TimedOut) => (
            TaskStatus::Failed,
            Some("timed_out: the time limit was reached".to_owned()),
        ),
        Some(TurnEndReason::BudgetExhausted) => (
            TaskStatus::Failed,
            Some("budget_exhausted: the token budget was reached".to_owned()),
        ),
        Some(TurnEndReason::MaxTokens) => (
            TaskStatus::Failed,
            Some("the model stopped at its output limit".to_owned()),
        ),
        Some(TurnEndReason::Refusal) => (
            TaskStatus::Failed,
            Some("the model refused to answer".to_owned()),
        ),
        Some(TurnEndReason::MaxSteps) => (
            TaskStatus::Failed,
            Some("the turn reached kin's step limit".to_owned()),
        ),
        Some(TurnEndReason::Error { message, .. }) => (
            TaskStatus::Failed,
            Some(
                crate::text::visible(message.as_deref().unwrap_or("the turn failed")).into_owned(),
            ),
        ),
    };
    let answer = match status {
        TaskStatus::Completed => Some(last_answer(since)),
        // What a failed turn produced before it ended (`partialOutput`).
        TaskStatus::Failed => Some(crate::delegation::last_turn_output(since))
            .filter(|partial| !partial.trim().is_empty()),
        _ => None,
    };
    Some(LoggedTurn {
        turn,
        status,
        answer,
        detail,
    })
}

/// The text of the last assistant message in `events` (empty when there is none).
pub(crate) fn last_answer(events: &[Event]) -> String {
    events
        .iter()
        .rev()
        .find_map(|event| match &event.body {
            EventBody::AssistantMessage(message) => Some(
                message
                    .message
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        AssistantBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::parse_event_line;

    fn events(lines: &[String]) -> Vec<Event> {
        let mut events = Vec::new();
        for line in lines {
            parse_event_line(line, &mut events).unwrap();
        }
        events
    }

    fn start(seq: u64, turn: u32) -> String {
        format!(
            r#"{{"type":"turn/start","seq":{seq},"time":0,"data":{{"turn":{turn},"trigger":{{"kind":"user"}}}}}}"#
        )
    }

    fn answer(seq: u64, turn: u32, text: &str) -> String {
        format!(
            r#"{{"type":"assistant/message","seq":{seq},"time":0,"data":{{"turn":{turn},"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"{text}"}}],"source":{{}},"id":"a{seq}"}}}}}}"#
        )
    }

    fn end(seq: u64, turn: u32, reason: &str) -> String {
        format!(
            r#"{{"type":"turn/end","seq":{seq},"time":0,"data":{{"turn":{turn},"reason":{{"kind":"{reason}"}}}}}}"#
        )
    }

    #[test]
    fn the_last_turn_is_read_with_its_own_answer() {
        let log = events(&[
            start(0, 1),
            answer(1, 1, "first"),
            end(2, 1, "completed"),
            start(3, 2),
            answer(4, 2, "second"),
            end(5, 2, "completed"),
        ]);
        let turn = last_turn(&log).unwrap();
        assert_eq!((turn.turn, turn.status), (2, TaskStatus::Completed));
        assert_eq!(turn.answer.as_deref(), Some("second"));
        assert_eq!(turn.detail, None);
    }

    #[test]
    fn an_unfinished_or_stopped_turn_says_how_it_ended() {
        let open = events(&[start(0, 1), answer(1, 1, "half")]);
        let turn = last_turn(&open).unwrap();
        assert_eq!(turn.status, TaskStatus::Interrupted);
        assert_eq!(turn.answer, None);
        let aborted = events(&[start(0, 1), end(1, 1, "aborted")]);
        assert_eq!(last_turn(&aborted).unwrap().status, TaskStatus::Killed);
        let timed_out = events(&[start(0, 1), end(1, 1, "timed_out")]);
        let turn = last_turn(&timed_out).unwrap();
        assert_eq!(turn.status, TaskStatus::Failed);
        assert!(turn.detail.unwrap().starts_with("timed_out"));
        assert_eq!(turn.answer, None);
        let cut = events(&[start(0, 1), answer(1, 1, "half"), end(2, 1, "max-tokens")]);
        let turn = last_turn(&cut).unwrap();
        assert_eq!(turn.status, TaskStatus::Failed);
        assert_eq!(turn.answer.as_deref(), Some("half"), "its partial output");
        assert_eq!(last_turn(&[]), None);
    }
}

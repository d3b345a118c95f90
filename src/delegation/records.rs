//! What delegation writes to logs and reads back: the `task/start` / `task/end` records of an
//! owner's background tasks (made from the task service's [`Record`]s: a task began; its owner
//! learned how it ended), and the fold that finds, after a restart, the tasks an earlier
//! process left unfinished.

use std::collections::HashSet;

use crate::session::{Event, EventBody, TaskEnd, TaskKind, TaskStart, UserPart};
use crate::tasks::Record;

/// Task labels made from a follow-up message are cut to this many characters.
pub(crate) const RESUME_LABEL_MAX: usize = 80;

/// The log record of a task service [`Record`], and the owner whose log it goes to.
pub(super) fn event_of(record: Record) -> (String, EventBody) {
    match record {
        Record::Started {
            owner,
            task,
            kind,
            label,
            subject,
        } => (
            owner,
            EventBody::TaskStart(TaskStart {
                task: task.to_string(),
                kind: TaskKind::from(kind),
                label,
                child: subject,
            }),
        ),
        Record::Ended {
            owner,
            task,
            status,
        } => (owner, end_of(&task, status)),
    }
}

/// An unfinished task: (task id, label, child id if continuable).
pub(super) type Unfinished = (String, String, Option<String>);

/// The `task/end` a notice about `task` carries.
pub(super) fn end_of(task: &crate::tasks::TaskId, status: crate::tasks::TaskStatus) -> EventBody {
    EventBody::TaskEnd(TaskEnd {
        task: task.to_string(),
        status: status.into(),
        cost: None,
    })
}

/// The delegation tasks an owner's log shows started and never ended, in start order (typed
/// records decide; the ended ones are a set, whatever their order).
pub(super) fn unfinished(events: &[Event]) -> Vec<Unfinished> {
    let ended: HashSet<&str> = events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskEnd(end) => Some(end.task.as_str()),
            _ => None,
        })
        .collect();
    events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskStart(start) if !ended.contains(start.task.as_str()) => {
                Some((start.task.clone(), start.label.clone(), start.child.clone()))
            }
            _ => None,
        })
        .collect()
}

/// A task label from a follow-up: its text on one line, cut to [`RESUME_LABEL_MAX`] chars.
pub(super) fn resume_label(message: &[UserPart]) -> String {
    let text: String = message
        .iter()
        .filter_map(|part| match part {
            UserPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return "subagent follow-up".into();
    }
    if line.chars().count() > RESUME_LABEL_MAX {
        let cut: String = line.chars().take(RESUME_LABEL_MAX - 1).collect();
        return format!("{cut}…");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ToolCall;

    fn text(s: &str) -> Vec<UserPart> {
        vec![UserPart::Text { text: s.into() }]
    }

    #[test]
    fn resume_labels_are_one_trimmed_line_of_at_most_80_chars() {
        assert_eq!(
            resume_label(&text("  Please\n\tcontinue.  ")),
            "Please continue."
        );
        assert_eq!(resume_label(&text(" \n ")), "subagent follow-up");
        let long = "x".repeat(81);
        let label = resume_label(&text(&long));
        assert_eq!(label.chars().count(), 80);
        assert!(label.ends_with('…'));
        assert_eq!(resume_label(&text(&"y".repeat(80))), "y".repeat(80));
    }

    /// A log line of the given type and data, decoded as kin reads it.
    fn line(seq: u64, kind: &str, data: serde_json::Value) -> Event {
        let text = serde_json::json!({"type": kind, "seq": seq, "time": 0, "data": data});
        let mut out = Vec::new();
        crate::session::parse_event_line(&text.to_string(), &mut out).unwrap();
        out.remove(0)
    }

    fn call(seq: u64, id: &str, name: &str, args: serde_json::Value) -> Event {
        let body = ToolCall {
            turn: 1,
            step: 1,
            call_id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
        };
        line(seq, "tool/call", serde_json::to_value(body).unwrap())
    }

    fn result(seq: u64, id: &str, text: &str) -> Event {
        line(
            seq,
            "tool/result",
            serde_json::json!({"turn":1,"step":1,"message":{"content":[{"type":"tool-result","toolCallId":id,"content":[{"type":"text","text":text}],"isError":false}],"source":{"kind":"tool","callId":id},"role":"user","id":"m"}}),
        )
    }

    #[test]
    fn delegation_tasks_are_logged_as_subagent_tasks() {
        let kind = TaskKind::from(super::super::activation::TASK_KIND.to_owned());
        assert_eq!(kind, TaskKind::Subagent);
    }

    #[test]
    fn typed_records_decide_where_they_exist() {
        let events = vec![
            call(
                0,
                "c1",
                "subagent",
                serde_json::json!({"description": "bg"}),
            ),
            result(1, "c1", "started subagent kid as task subagent-1"),
            line(
                2,
                "task/start",
                serde_json::json!({"task": "subagent-1", "kind": "subagent", "label": "bg", "child": "kid"}),
            ),
            line(
                3,
                "task/end",
                serde_json::json!({"task": "subagent-1", "status": "completed"}),
            ),
            line(
                4,
                "task/start",
                serde_json::json!({"task": "subagent-2", "kind": "subagent", "label": "two"}),
            ),
            // A task that failed at once may end before its start is written.
            line(
                5,
                "task/end",
                serde_json::json!({"task": "subagent-3", "status": "failed"}),
            ),
            line(
                6,
                "task/start",
                serde_json::json!({"task": "subagent-3", "kind": "subagent", "label": "three"}),
            ),
            // Kinds and statuses from another build still start and end tasks.
            line(
                7,
                "task/start",
                serde_json::json!({"task": "review-1", "kind": "review", "label": "four"}),
            ),
            line(
                8,
                "task/end",
                serde_json::json!({"task": "review-1", "status": "paused"}),
            ),
        ];
        assert!(
            matches!(&events[7].body, EventBody::TaskStart(start) if start.kind == TaskKind::Other("review".into()))
        );
        assert_eq!(
            unfinished(&events),
            [("subagent-2".into(), "two".into(), None)]
        );
    }
}

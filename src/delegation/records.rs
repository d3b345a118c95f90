//! What delegation writes to logs and reads back: the `task/start` / `task/end` records of an
//! owner's background tasks (made from the task service's [`Record`]s: a task began; its owner
//! learned how it ended), and the fold that finds, after a restart, the tasks an earlier
//! process left unfinished.
//!
//! Logs written before the typed records existed are still read: for them (tasks with no
//! `task/start`), the fold falls back to the tool results and notices those versions wrote.

use std::collections::{HashMap, HashSet};

use crate::session::{Event, EventBody, TaskEnd, TaskStart, UserPart};
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
                kind,
                label,
                child: subject,
            }),
        ),
        Record::Ended {
            owner,
            task,
            status,
        } => (
            owner,
            EventBody::TaskEnd(TaskEnd {
                task: task.to_string(),
                status: status.as_str().to_owned(),
                cost: None,
            }),
        ),
    }
}

/// An unfinished task: (task id, label, child id if continuable).
pub(super) type Unfinished = (String, String, Option<String>);

/// The `task/end` a notice about `task` carries.
pub(super) fn end_of(task: &crate::tasks::TaskId, status: crate::tasks::TaskStatus) -> EventBody {
    EventBody::TaskEnd(TaskEnd {
        task: task.to_string(),
        status: status.as_str().to_owned(),
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
    let typed: Vec<Unfinished> = events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskStart(start) if !ended.contains(start.task.as_str()) => {
                Some((start.task.clone(), start.label.clone(), start.child.clone()))
            }
            _ => None,
        })
        .collect();
    let recorded: HashSet<&str> = events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskStart(start) => Some(start.task.as_str()),
            _ => None,
        })
        .collect();
    let mut found = legacy_unfinished(events);
    found.retain(|(task, _, _)| !recorded.contains(task.as_str()));
    found.extend(typed);
    found
}

/// For logs of kin versions without task records: the subagent tasks the tool results show
/// started and never finished (no notice, no terminal `task_output` or `task_kill` result).
fn legacy_unfinished(events: &[Event]) -> Vec<Unfinished> {
    let mut calls: HashMap<&str, (&str, serde_json::Value)> = HashMap::new();
    let mut started: Vec<Unfinished> = Vec::new();
    let mut finished: Vec<String> = Vec::new();
    let argument = |args: &serde_json::Value, key: &str| {
        args.get(key)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    for event in events {
        match &event.body {
            EventBody::ToolCall(call) => {
                let args = serde_json::from_str(&call.arguments).unwrap_or_default();
                calls.insert(call.call_id.as_str(), (call.name.as_str(), args));
            }
            EventBody::ToolResult(result) => {
                let Some(part) = result.message.content.first() else {
                    continue;
                };
                let Some((name, args)) = calls.get(part.tool_call_id.as_str()) else {
                    continue;
                };
                if part.is_error {
                    continue;
                }
                let text = result.text();
                let words: Vec<&str> = text.split(' ').collect();
                match (*name, words.as_slice()) {
                    (_, ["started", "subagent", child, "as", "task", task]) => started.push((
                        (*task).to_owned(),
                        argument(args, "description"),
                        Some((*child).to_owned()),
                    )),
                    (_, ["started", "background", "subagent", "task", task]) => {
                        started.push(((*task).to_owned(), argument(args, "description"), None))
                    }
                    (
                        "send_message",
                        ["message", "started", "task", task, "continuing", "subagent", child],
                    ) => {
                        let message = vec![UserPart::Text {
                            text: argument(args, "message"),
                        }];
                        started.push((
                            (*task).to_owned(),
                            resume_label(&message),
                            Some((*child).to_owned()),
                        ))
                    }
                    ("task_kill", _) => finished.push(argument(args, "task_id")),
                    ("task_output", _) => {
                        let status = text.rsplit("[status: ").next().unwrap_or_default();
                        if !status.starts_with("running") && !status.starts_with("stopping") {
                            finished.push(argument(args, "task_id"));
                        }
                    }
                    _ => {}
                }
            }
            EventBody::UserMessage(message) if message.source["kind"] == "plugin" => {
                for part in &message.content {
                    if let UserPart::Text { text } = part {
                        if let Some(rest) = text.strip_prefix("background task ") {
                            finished.extend(rest.split(' ').next().map(str::to_owned));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    started.retain(|(task, _, _)| !finished.contains(task));
    started
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
    fn old_logs_without_task_records_restore_from_their_tool_results() {
        let events = vec![
            call(
                0,
                "c1",
                "subagent",
                serde_json::json!({"description": "bg"}),
            ),
            result(1, "c1", "started subagent kid as task subagent-1"),
            call(
                2,
                "c2",
                "subagent",
                serde_json::json!({"description": "one"}),
            ),
            result(3, "c2", "started background subagent task subagent-2"),
            call(
                4,
                "c3",
                "task_kill",
                serde_json::json!({"task_id": "subagent-2"}),
            ),
            result(5, "c3", "killed"),
        ];
        assert_eq!(
            unfinished(&events),
            [("subagent-1".into(), "bg".into(), Some("kid".into()))]
        );
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
        ];
        assert_eq!(
            unfinished(&events),
            [("subagent-2".into(), "two".into(), None)]
        );
    }
}

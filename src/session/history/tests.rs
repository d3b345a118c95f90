//! The fold checked against a from-scratch fold of every event kind, compaction, seeds.
use super::*;
use crate::session::event::*;
use crate::session::parse_event_line;

/// The fold as a single pass over a whole log, the way it was written before it became
/// incremental: the specification [`HistoryFold`] is checked against.
fn from_scratch(events: &[Event]) -> Vec<HistoryItem> {
    let mut items = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut partial = String::new();
    let mut turn_start = 0;
    let close = |items: &mut Vec<HistoryItem>, open: &mut Vec<String>| {
        items.extend(open.drain(..).map(|id| interrupted(&id)));
    };
    let keep = |items: &mut Vec<HistoryItem>, open: &mut Vec<String>, partial: &mut String| {
        if !partial.trim().is_empty() {
            close(items, open);
            let text = format!("{partial}\n\n{INTERRUPTED_ANSWER}");
            items.push(HistoryItem::Assistant(vec![AssistantBlock::Text { text }]));
        }
        partial.clear();
    };
    for event in events {
        match &event.body {
            EventBody::AssistantChunk(chunk) => {
                if let Chunk::TextDelta { text, .. } = &chunk.chunk {
                    partial.push_str(text);
                }
            }
            EventBody::StepStart(_) => partial.clear(),
            EventBody::StepEnd(_) => keep(&mut items, &mut open, &mut partial),
            EventBody::TurnEnd(end) => {
                keep(&mut items, &mut open, &mut partial);
                close(&mut items, &mut open);
                let unanswered = matches!(items.last(), Some(HistoryItem::User(_)));
                if overflowed(&end.reason) {
                    open.clear();
                    items.truncate(turn_start);
                } else if end.reason == TurnEndReason::Aborted
                    && items.len() > turn_start
                    && unanswered
                {
                    let text = CANCELLED_BEFORE_ANSWER.to_owned();
                    items.push(HistoryItem::Assistant(vec![AssistantBlock::Text { text }]));
                }
                turn_start = items.len();
            }
            EventBody::UserMessage(message) => {
                close(&mut items, &mut open);
                items.push(HistoryItem::User(message.content.clone()));
            }
            EventBody::SteeringMessage(steering) => {
                close(&mut items, &mut open);
                items.push(HistoryItem::User(steering.message.content.clone()));
            }
            EventBody::AssistantMessage(message) => {
                close(&mut items, &mut open);
                partial.clear();
                for block in &message.message.content {
                    if let AssistantBlock::ToolCall { id, .. } = block {
                        open.push(id.clone());
                    }
                }
                items.push(HistoryItem::Assistant(message.message.content.clone()));
            }
            EventBody::ToolResult(result) => {
                open.retain(|id| id != result.call_id());
                items.push(HistoryItem::ToolResult {
                    call_id: result.call_id().to_owned(),
                    text: result.text(),
                    is_error: result.is_error(),
                    images: result.images(),
                });
            }
            _ => {}
        }
    }
    close(&mut items, &mut open);
    items
}

fn events(lines: &[String]) -> Vec<Event> {
    let mut events = Vec::new();
    for line in lines {
        parse_event_line(line, &mut events).unwrap();
    }
    events
}

/// A log with every event kind: a fork seed ending in `session/end-seed`, a completed turn
/// with two tool calls, a cancelled one (a call without result, partial chunks, no
/// message), steering, a notice, title and permission records, an unknown event.
fn every_kind() -> Vec<String> {
    let user = |text: &str, kind: &str| {
        format!(
            r#"{{"content":[{{"type":"text","text":"{text}"}},{{"type":"resource-link","uri":"file:///a","name":"a"}}],"source":{{"kind":"{kind}"}},"role":"user","id":"u"}}"#
        )
    };
    let call =
        |id: &str| format!(r#"{{"type":"tool-call","id":"{id}","name":"ls","arguments":"{{}}"}}"#);
    let message = |turn: u32, step: u32, blocks: &str| {
        format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"role":"assistant","content":[{blocks}],"source":{{}},"id":"a"}}}}"#
        )
    };
    let result = |id: &str, error: bool| {
        format!(
            r#"{{"turn":2,"step":1,"message":{{"source":{{}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"out {id}"}}],"isError":{error}}}],"role":"user","id":"r"}}}}"#
        )
    };
    let tool_call = |id: &str| {
        format!(r#"{{"turn":2,"step":1,"callId":"{id}","name":"ls","arguments":"{{}}"}}"#)
    };
    let chunk = |turn: u32, chunk: &str| format!(r#"{{"turn":{turn},"step":1,"chunk":{chunk}}}"#);
    let plain = |data: &str| data.to_owned();
    let bodies = [
        ("turn/start", plain(r#"{"turn":1,"trigger":{}}"#)),
        ("user/message", user("seeded", "user")),
        (
            "assistant/message",
            message(1, 1, r#"{"type":"text","text":"seed answer"}"#),
        ),
        (
            "turn/end",
            plain(r#"{"turn":1,"reason":{"kind":"completed"}}"#),
        ),
        ("session/end-seed", plain("{}")),
        (
            "permission/mode",
            plain(r#"{"mode":"allow","source":{"kind":"client"}}"#),
        ),
        ("turn/start", plain(r#"{"turn":2,"trigger":{}}"#)),
        ("user/message", user("go", "user")),
        (
            "session/title",
            plain(r#"{"title":"go","messageSeqs":[7],"source":{}}"#),
        ),
        ("step/start", plain(r#"{"turn":2,"step":1}"#)),
        (
            "assistant/chunk",
            chunk(2, r#"{"type":"reasoning-delta","index":0,"text":"hm"}"#),
        ),
        (
            "assistant/chunk",
            chunk(2, r#"{"type":"finish","reason":{"kind":"tool-calls"}}"#),
        ),
        (
            "assistant/message",
            message(
                2,
                1,
                &format!(
                    r#"{{"type":"reasoning","text":"hm"}},{},{}"#,
                    call("c1"),
                    call("c2")
                ),
            ),
        ),
        ("tool/call", tool_call("c1")),
        (
            "permission/decision",
            plain(
                r#"{"callId":"c1","kind":"read","scope":"workspace","decision":"allow","remember":"once"}"#,
            ),
        ),
        ("tool/result", result("c1", false)),
        ("tool/call", tool_call("c2")),
        ("tool/result", result("c2", true)),
        ("step/end", plain(r#"{"turn":2,"step":1}"#)),
        (
            "steering/message",
            format!(r#"{{"turn":2,"message":{}}}"#, user("steer", "user")),
        ),
        ("step/start", plain(r#"{"turn":2,"step":2}"#)),
        ("assistant/message", message(2, 2, &call("c3"))),
        (
            "turn/end",
            plain(r#"{"turn":2,"reason":{"kind":"aborted"}}"#),
        ),
        ("turn/start", plain(r#"{"turn":3,"trigger":{}}"#)),
        ("user/message", user("a notice", "runtime")),
        ("step/start", plain(r#"{"turn":3,"step":1}"#)),
        (
            "assistant/chunk",
            chunk(3, r#"{"type":"text-delta","index":0,"text":"cut"}"#),
        ),
        ("step/end", plain(r#"{"turn":3,"step":1}"#)),
        ("request/header", plain(r#"{"reason":"initial"}"#)),
        (
            "assistant/message",
            message(
                3,
                2,
                &format!(r#"{},{{"type":"text","text":"left open"}}"#, call("c4")),
            ),
        ),
    ];
    bodies
        .iter()
        .enumerate()
        .map(|(seq, (kind, data))| {
            format!(r#"{{"type":"{kind}","seq":{seq},"time":0,"data":{data}}}"#)
        })
        .collect()
}

#[test]
fn the_fold_equals_a_fold_from_scratch_after_every_event() {
    let events = events(&every_kind());
    let mut fold = HistoryFold::default();
    for (at, event) in events.iter().enumerate() {
        fold.push(event);
        let expected = from_scratch(&events[..=at]);
        assert_eq!(
            fold.history(),
            ModelHistory::from(expected),
            "after event {at} ({})",
            event.body.kind()
        );
    }
    // The last message's call is still open: it is answered as interrupted, but only in
    // the view, so a later result replaces it.
    let last = fold.history();
    assert_eq!(last.last(), Some(&interrupted("c4")));
    assert_eq!(HistoryFold::new(&events).history(), last);
    let kinds: Vec<&str> = events.iter().map(|e| e.body.kind()).collect();
    for kind in [
        "session/end-seed",
        "steering/message",
        "permission/decision",
        "request/header",
    ] {
        assert!(kinds.contains(&kind), "{kind} is covered");
    }
}

fn typed(seq: u64, body: EventBody) -> Event {
    let mut events = Vec::new();
    let line = format!(
        r#"{{"type":"{}","seq":{seq},"time":0,"data":{}}}"#,
        body.kind(),
        serde_json::to_string(&body).unwrap()
    );
    parse_event_line(&line, &mut events).unwrap();
    events.remove(0)
}

fn said(seq: u64, text: &str) -> Event {
    typed(
        seq,
        EventBody::UserMessage(UserMessage {
            content: vec![UserPart::Text { text: text.into() }],
            source: serde_json::json!({"kind": "user"}),
            role: "user".into(),
            id: "u".into(),
        }),
    )
}

fn turn_end(seq: u64, turn: u32) -> Event {
    typed(
        seq,
        EventBody::TurnEnd(TurnEnd {
            turn,
            reason: TurnEndReason::Completed,
            usage: None,
        }),
    )
}

/// A prompt cancelled before any answer is answered by the marker, and the next prompt stays
/// a user turn of its own; one cancelled after streamed text keeps that text instead.
#[test]
fn a_prompt_cancelled_before_any_answer_gets_the_marker() {
    let aborted = |seq, turn| {
        let body = EventBody::TurnEnd(TurnEnd {
            turn,
            reason: TurnEndReason::Aborted,
            usage: None,
        });
        typed(seq, body)
    };
    let log = vec![
        said(0, "slow"),
        aborted(1, 1),
        said(2, "next"),
        turn_end(3, 2),
    ];
    let history = HistoryFold::new(&log).history();
    let items: Vec<HistoryItem> = history.iter().cloned().collect();
    assert_eq!(items, from_scratch(&log));
    assert_eq!(items.len(), 3, "{items:?}");
    assert_eq!(
        items[1],
        HistoryItem::Assistant(vec![AssistantBlock::Text {
            text: CANCELLED_BEFORE_ANSWER.into()
        }])
    );
}

fn compaction(seq: u64, id: &str, summary: Option<&str>) -> [Event; 2] {
    let start = EventBody::CompactionStart(crate::session::CompactionStart {
        compaction_id: id.into(),
        through_turn: 1,
        trigger: crate::session::CompactionTrigger::Request,
        through_step: None,
    });
    let end = EventBody::CompactionEnd(crate::session::CompactionEnd {
        compaction_id: id.into(),
        summary: summary.map(str::to_owned),
        error: summary.is_none().then(|| "no".to_owned()),
        usage: None,
        estimated_tokens: None,
    });
    [typed(seq, start), typed(seq + 1, end)]
}

fn texts(history: &ModelHistory) -> Vec<String> {
    history
        .iter()
        .map(|item| match item {
            HistoryItem::User(parts) => match &parts[0] {
                UserPart::Text { text } => text.clone(),
                other => format!("{other:?}"),
            },
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn a_compaction_replaces_the_completed_turns_with_its_summary() {
    let mut log = vec![said(1, "one"), turn_end(2, 1), said(3, "two")];
    // A failed compaction changes nothing.
    log.extend(compaction(4, "c0", None));
    assert_eq!(texts(&HistoryFold::new(&log).history()), ["one", "two"]);
    log.extend(compaction(6, "c1", Some("S")));
    let fold = HistoryFold::new(&log);
    let after = texts(&fold.history());
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after[0].starts_with(SUMMARY_PREFIX) && after[0].ends_with("S"));
    assert_eq!(after[1], "two", "the turn in flight keeps its messages");
    assert!(
        fold.completed_prefix().is_empty(),
        "nothing new to summarise"
    );
    log.push(turn_end(8, 2));
    assert_eq!(HistoryFold::new(&log).completed_prefix().len(), 2);
}

#[test]
fn a_fork_seed_carries_the_compactions_after_the_last_turn() {
    let mut log = vec![said(0, "one"), turn_end(1, 1), said(2, "in flight")];
    log.extend(compaction(3, "c1", Some("S")));
    let seed = completed_turn_seed(&log);
    let seqs: Vec<u64> = seed.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        [0, 1, 2, 3],
        "the prefix, then the compaction renumbered"
    );
    let history = texts(&HistoryFold::new(&seed).history());
    assert_eq!(history.len(), 1, "{history:?}");
    assert!(history[0].ends_with('S'));
}

#[test]
fn a_request_shares_the_messages_of_the_fold() {
    let events = events(&every_kind());
    // With no call open, the list itself is shared; once the request is dropped, the
    // fold appends in place.
    let mut fold = HistoryFold::new(&events[..4]);
    let request = fold.history();
    assert!(Arc::ptr_eq(&request.0, &fold.items));
    drop(request);
    fold.push(&events[7]);
    assert_eq!(Arc::strong_count(&fold.items), 1);
    // With calls open, the messages still are.
    let fold = HistoryFold::new(&events);
    let (one, two) = (fold.history(), fold.history());
    assert!(one
        .items()
        .iter()
        .zip(two.items())
        .take(fold.items.len())
        .all(|(a, b)| Arc::ptr_eq(a, b)));
}

#[test]
fn dangling_tool_calls_get_an_interrupted_result() {
    let lines = every_kind();
    let history = HistoryFold::new(&events(&lines)).history();
    let results: Vec<(&str, bool)> = history
        .iter()
        .filter_map(|item| match item {
            HistoryItem::ToolResult { call_id, text, .. } => {
                Some((call_id.as_str(), text == INTERRUPTED_TOOL_RESULT))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [("c1", false), ("c2", false), ("c3", true), ("c4", true)]
    );
}

#[test]
fn prefix_stops_at_the_last_turn_end() {
    let lines = every_kind();
    let events = events(&lines);
    let last_end = events
        .iter()
        .rposition(|e| e.body.kind() == "turn/end")
        .unwrap();
    assert_eq!(completed_turn_prefix(&events).len(), last_end + 1);
    assert!(completed_turn_prefix(&events[..3]).is_empty());
}

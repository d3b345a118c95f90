//! Folds of a session log: the conversation the model sees, and the completed-turn prefix.
//!
//! The conversation is folded event by event ([`HistoryFold`]) as the agent appends to its
//! log, so a model step takes it as it stands instead of walking the whole log again, and the
//! request shares its messages ([`ModelHistory`]) instead of copying them.

use std::sync::Arc;

use super::event::{AssistantBlock, Event, EventBody, UserPart};

/// One message of the model-facing conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum HistoryItem {
    /// A user message (a prompt, a notice, a steering message).
    User(Vec<UserPart>),
    /// The model's answer of one step.
    Assistant(Vec<AssistantBlock>),
    /// The result of one tool call.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// What the tool returned.
        text: String,
        /// Whether the tool failed.
        is_error: bool,
        /// Images the tool returned (image parts naming their blobs).
        images: Vec<UserPart>,
    },
}

/// Text given as the result of a tool call whose turn ended before it produced one.
pub(crate) const INTERRUPTED_TOOL_RESULT: &str =
    "Error: the tool call was interrupted before it finished";

/// The conversation of one model request, in log order, shared with the agent's
/// [`HistoryFold`]: taking it copies no message (nor, usually, the list of them), and an
/// encoder that kept the messages of the last request can tell an unchanged one by its address.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelHistory(Arc<Vec<Arc<HistoryItem>>>);

impl ModelHistory {
    /// The messages, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &HistoryItem> + ExactSizeIterator {
        self.0.iter().map(|item| &**item)
    }

    /// The latest message.
    pub fn last(&self) -> Option<&HistoryItem> {
        self.0.last().map(|item| &**item)
    }

    /// How many messages there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The shared messages themselves.
    pub(crate) fn items(&self) -> &[Arc<HistoryItem>] {
        &self.0
    }

    /// Bytes of text in messages `from..` (for token estimates).
    pub(crate) fn text_len_from(&self, from: usize) -> usize {
        self.0.iter().skip(from).map(|item| item.text_len()).sum()
    }
}

impl HistoryItem {
    /// Bytes of text the model reads in this message.
    pub fn text_len(&self) -> usize {
        match self {
            Self::User(parts) => parts.iter().map(UserPart::text_len).sum(),
            Self::Assistant(blocks) => blocks
                .iter()
                .map(|block| match block {
                    AssistantBlock::Text { text } | AssistantBlock::Reasoning { text } => {
                        text.len()
                    }
                    AssistantBlock::ToolCall {
                        name, arguments, ..
                    } => name.len() + arguments.len(),
                })
                .sum(),
            Self::ToolResult { text, images, .. } => {
                text.len() + images.iter().map(UserPart::text_len).sum::<usize>()
            }
        }
    }
}

impl From<Vec<HistoryItem>> for ModelHistory {
    fn from(items: Vec<HistoryItem>) -> Self {
        Self(Arc::new(items.into_iter().map(Arc::new).collect()))
    }
}

/// The conversation as the model should see it, kept up to date one event at a time: user
/// messages, assistant messages and tool results, in log order. Every tool call gets a result:
/// one that has none yet (its turn was cancelled or crashed) gets an interrupted-error result
/// before the next message, and in [`HistoryFold::history`] while it is the last, since chat
/// APIs reject dangling calls.
#[derive(Debug, Default)]
pub(crate) struct HistoryFold {
    /// Shared with the requests taken from it; appended to in place once they are dropped
    /// (a model drops its request once it has encoded it), else copied first.
    items: Arc<Vec<Arc<HistoryItem>>>,
    /// Tool calls of the assistant messages so far that have no result yet.
    open_calls: Vec<String>,
    /// How many of `items` belong to completed turns (as of the last `turn/end`).
    completed_len: usize,
    /// Whether `items` opens with a compaction summary.
    summarised: bool,
    /// Where a compaction under way cuts (`completed_len` when it started).
    compaction_cut: Option<usize>,
    /// Where each step of the running turn starts in `items` (`step/start`s since `turn/end`).
    step_starts: Vec<usize>,
    /// A compaction under way within the running turn: it also summarises the turn's items
    /// from the end of its prompt (`step_starts[0]`) up to this cut.
    in_turn_cut: Option<usize>,
}

/// How a compaction summary opens the conversation it replaces.
pub(crate) const SUMMARY_PREFIX: &str =
    "[Summary of the earlier conversation, written by kin's compaction]";

impl HistoryFold {
    pub(crate) fn new(events: &[Event]) -> Self {
        let mut fold = Self::default();
        for event in events {
            fold.push(event);
        }
        fold
    }

    /// Folds in the event appended after the ones folded so far.
    pub(crate) fn push(&mut self, event: &Event) {
        match &event.body {
            EventBody::UserMessage(message) => {
                self.close_open();
                self.add(HistoryItem::User(message.content.clone()));
            }
            EventBody::SteeringMessage(steering) => {
                self.close_open();
                self.add(HistoryItem::User(steering.message.content.clone()));
            }
            EventBody::AssistantMessage(message) => {
                self.close_open();
                for block in &message.message.content {
                    if let AssistantBlock::ToolCall { id, .. } = block {
                        self.open_calls.push(id.clone());
                    }
                }
                self.add(HistoryItem::Assistant(message.message.content.clone()));
            }
            EventBody::ToolResult(result) => {
                let call_id = result.call_id().to_owned();
                self.open_calls.retain(|open| *open != call_id);
                self.add(HistoryItem::ToolResult {
                    call_id,
                    text: result.text(),
                    is_error: result.is_error(),
                    images: result.images(),
                });
            }
            EventBody::TurnStart(_) => self.step_starts.clear(),
            EventBody::StepStart(_) => self.step_starts.push(self.items.len()),
            EventBody::TurnEnd(_) => {
                self.completed_len = self.items.len();
                self.step_starts.clear();
            }
            EventBody::CompactionStart(start) => match start.through_step {
                None => self.compaction_cut = Some(self.completed_len),
                Some(step) => self.in_turn_cut = self.step_cut(step),
            },
            EventBody::CompactionEnd(end) => {
                let cut = self.compaction_cut.take();
                let in_turn = self.in_turn_cut.take();
                match (cut, in_turn, &end.summary) {
                    (Some(cut), _, Some(summary)) => self.replace_prefix(cut, summary),
                    (None, Some(cut), Some(summary)) => self.replace_steps(cut, summary),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// Where the running turn's step `step + 1` starts, when steps 1..=`step` hold anything
    /// past the turn's prompt.
    fn step_cut(&self, step: u32) -> Option<usize> {
        let prompt_end = *self.step_starts.first()?;
        let cut = *self.step_starts.get(usize::try_from(step).ok()?)?;
        (cut > prompt_end).then_some(cut)
    }

    /// What an in-turn compaction through `step` summarises: everything before the start of
    /// step `step + 1` (empty when those steps hold nothing new).
    pub(crate) fn running_prefix(&self, step: u32) -> Vec<Arc<HistoryItem>> {
        match self.step_cut(step) {
            Some(cut) => self.items[..cut].to_vec(),
            None => Vec::new(),
        }
    }

    /// An in-turn compaction: the completed turns and the running turn's items from its
    /// prompt's end up to `cut` become the summary; the prompt and the later steps stay.
    fn replace_steps(&mut self, cut: usize, summary: &str) {
        let prompt = self.completed_len.min(self.items.len())..self.step_starts[0].min(cut);
        let mut items = Vec::with_capacity(self.items.len() - cut + prompt.len() + 1);
        items.push(Arc::new(HistoryItem::User(vec![UserPart::Text {
            text: format!("{SUMMARY_PREFIX}\n\n{summary}"),
        }])));
        items.extend(self.items[prompt.clone()].iter().cloned());
        let base = items.len();
        items.extend(self.items[cut..].iter().cloned());
        for start in &mut self.step_starts {
            *start = if *start >= cut {
                *start - cut + base
            } else {
                base
            };
        }
        self.completed_len = 1;
        self.items = Arc::new(items);
        self.summarised = true;
    }

    /// The completed turns' messages, replaced by one user message carrying `summary`; the
    /// turn in flight keeps its messages.
    fn replace_prefix(&mut self, cut: usize, summary: &str) {
        let cut = cut.min(self.items.len());
        let mut items = Vec::with_capacity(self.items.len() - cut + 1);
        items.push(Arc::new(HistoryItem::User(vec![UserPart::Text {
            text: format!("{SUMMARY_PREFIX}\n\n{summary}"),
        }])));
        items.extend(self.items[cut..].iter().cloned());
        // The running turn's steps (all past the cut) move with its items.
        for start in &mut self.step_starts {
            *start = start.saturating_sub(cut) + 1;
        }
        self.completed_len = self.completed_len.saturating_sub(cut) + 1;
        self.items = Arc::new(items);
        self.summarised = true;
    }

    /// The completed turns' messages, a compaction summary included: what a compaction
    /// summarises. Empty when there is nothing new to summarise.
    pub(crate) fn completed_prefix(&self) -> Vec<Arc<HistoryItem>> {
        if self.completed_len <= usize::from(self.summarised) {
            return Vec::new();
        }
        self.items[..self.completed_len].to_vec()
    }

    /// The conversation as it stands, with an interrupted result for each call still open.
    pub(crate) fn history(&self) -> ModelHistory {
        if self.open_calls.is_empty() {
            return ModelHistory(self.items.clone());
        }
        let mut items = Vec::with_capacity(self.items.len() + self.open_calls.len());
        items.extend(self.items.iter().cloned());
        items.extend(self.open_calls.iter().map(|id| Arc::new(interrupted(id))));
        ModelHistory(Arc::new(items))
    }

    fn add(&mut self, item: HistoryItem) {
        Arc::make_mut(&mut self.items).push(Arc::new(item));
    }

    fn close_open(&mut self) {
        for call_id in std::mem::take(&mut self.open_calls) {
            self.add(interrupted(&call_id));
        }
    }
}

fn interrupted(call_id: &str) -> HistoryItem {
    HistoryItem::ToolResult {
        call_id: call_id.to_owned(),
        text: INTERRUPTED_TOOL_RESULT.into(),
        is_error: true,
        images: Vec::new(),
    }
}

/// The events up to and including the last `turn/end`: what a fork may inherit. The turn in
/// flight, if any, is never part of it.
pub(crate) fn completed_turn_prefix(events: &[Event]) -> &[Event] {
    let end = events
        .iter()
        .rposition(|event| matches!(event.body, EventBody::TurnEnd(_)))
        .map_or(0, |at| at + 1);
    &events[..end]
}

/// What a fork is seeded with: the completed-turn prefix, and the compactions finished since
/// (they summarise only completed turns), so the child starts from the compacted view.
pub(crate) fn completed_turn_seed(events: &[Event]) -> Vec<Event> {
    let prefix = completed_turn_prefix(events);
    let rest = &events[prefix.len()..];
    let finished: Vec<&str> = rest
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::CompactionEnd(end) => Some(end.compaction_id.as_str()),
            _ => None,
        })
        .collect();
    let mut seed = prefix.to_vec();
    // A compaction within the running turn summarises steps the fork does not get.
    let compactions = rest.iter().filter(|event| match &event.body {
        EventBody::CompactionStart(start) => {
            start.through_step.is_none() && finished.contains(&start.compaction_id.as_str())
        }
        EventBody::CompactionEnd(_) => true,
        _ => false,
    });
    // Renumbered: a seed's seqs are 0..N-1 (session-log.md §6).
    for event in compactions {
        let mut event = event.clone();
        event.seq = seed.len() as u64;
        seed.push(event);
    }
    seed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::event::*;
    use crate::session::parse_event_line;

    /// The fold as a single pass over a whole log, the way it was written before it became
    /// incremental: the specification [`HistoryFold`] is checked against.
    fn from_scratch(events: &[Event]) -> Vec<HistoryItem> {
        let mut items = Vec::new();
        let mut open: Vec<String> = Vec::new();
        let close = |items: &mut Vec<HistoryItem>, open: &mut Vec<String>| {
            items.extend(open.drain(..).map(|id| interrupted(&id)));
        };
        for event in events {
            match &event.body {
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
        let call = |id: &str| {
            format!(r#"{{"type":"tool-call","id":"{id}","name":"ls","arguments":"{{}}"}}"#)
        };
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
        let chunk =
            |turn: u32, chunk: &str| format!(r#"{{"turn":{turn},"step":1,"chunk":{chunk}}}"#);
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
}

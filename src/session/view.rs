//! What opening a session for writing keeps of its log. After a compaction the model sees the
//! summary and what followed, so the conversation before the last compaction's cut is not
//! kept: only the events the session's state is restored from (turns, titles, permissions,
//! model, tasks, descriptors, compactions) and an assistant message whose tool calls are still
//! unanswered there; its turns are folded into two events (`view_turns.rs`). Folded, the kept
//! events give the same model view, turn numbers and spend as the whole log.
//!
//! The cut is found by reading the log backwards from its end: the last `compaction/end`
//! with a summary, the `compaction/start` before it, and the `turn/end` before that (the
//! compaction summarised the turns completed when it started). A log without one is kept
//! whole.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::error::StoreError;
use super::event::{AssistantBlock, Event, EventBody};
use super::line::{line_kind, parse_event_line};
use super::loaded::{read_log_at, LoadedSession};
use super::view_sidecar;
use super::view_turns::FoldedTurns;

/// Bytes read at a time, backwards or forwards.
const CHUNK: usize = 1 << 20;

/// What the backward scan looks for next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Looking {
    CompactionEnd,
    CompactionStart,
    TurnEnd,
}

/// The body of `line` if it is an event of kind `kind` (as kin writes it: `type` first).
fn event_of(line: &[u8], kind: &str) -> Option<EventBody> {
    if line_kind(line) != Some(kind) {
        return None;
    }
    let text = std::str::from_utf8(line).ok()?;
    let mut parsed = Vec::new();
    parse_event_line(text.trim_end_matches('\r'), &mut parsed).ok()?;
    (parsed.len() == 1).then(|| parsed.remove(0).body)
}

/// The step of the backward scan for one complete line; true when it is the cut.
fn visit(looking: &mut Looking, line: &[u8]) -> bool {
    match looking {
        Looking::CompactionEnd => {
            if let Some(EventBody::CompactionEnd(end)) = event_of(line, "compaction/end") {
                if end.summary.is_some() {
                    *looking = Looking::CompactionStart;
                }
            }
            false
        }
        Looking::CompactionStart => {
            if let Some(EventBody::CompactionStart(_)) = event_of(line, "compaction/start") {
                *looking = Looking::TurnEnd;
            }
            false
        }
        Looking::TurnEnd => matches!(event_of(line, "turn/end"), Some(EventBody::TurnEnd(_))),
    }
}

/// The offset in bytes where the part of the log kept whole begins (the end of the cut's
/// `turn/end` line, or of the header when no turn had ended); `None` without a compaction.
pub(crate) fn view_start(file: &mut File) -> io::Result<Option<u64>> {
    let len = file.metadata()?.len();
    let mut looking = Looking::CompactionEnd;
    let mut pos = len;
    // The start of the file's unread part's last line, read already (with its newline).
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let start = pos.saturating_sub(CHUNK as u64);
        let mut chunk = vec![0; usize::try_from(pos - start).unwrap_or(CHUNK)];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut chunk)?;
        chunk.extend_from_slice(&pending);
        let mut line_end = chunk.len();
        for newline in memchr::memrchr_iter(b'\n', &chunk) {
            // An unterminated last line is torn: never the cut.
            if line_end < chunk.len() {
                let line = &chunk[newline + 1..line_end];
                if visit(&mut looking, line) {
                    return Ok(Some(start + line_end as u64 + 1));
                }
            }
            line_end = newline;
        }
        if start == 0 {
            // What is left is the header: the cut is right after it when no turn ended.
            let header_end = (line_end < chunk.len()).then_some(line_end as u64 + 1);
            return Ok(header_end.filter(|_| looking == Looking::TurnEnd));
        }
        chunk.truncate((line_end + 1).min(chunk.len()));
        pending = chunk;
        pos = start;
    }
}

/// Keeps, of the events up to the cut, what restoring the session needs (see the module doc).
#[derive(Debug, Default)]
struct ViewKeeper {
    cut: Option<u64>,
    kept: Vec<Event>,
    /// How many of `kept` come from before the cut, once an event after it was read.
    before_cut: Option<usize>,
    /// The last assistant message before the cut while some of its tool calls are open: the
    /// places in `kept` of it and of the results it has, and the calls still open.
    open: Option<(Vec<usize>, Vec<String>)>,
    /// The turns before the cut, kept as two events (`view_turns.rs`).
    turns: FoldedTurns,
}

impl ViewKeeper {
    fn push(&mut self, event: Event, line_end: u64) {
        if self.cut.is_none_or(|cut| line_end > cut) {
            self.close_cut();
            self.kept.push(event);
            return;
        }
        let Some(event) = self.turns.fold(event) else {
            return;
        };
        match &event.body {
            EventBody::UserMessage(_) | EventBody::SteeringMessage(_) => self.resolve(),
            EventBody::AssistantMessage(message) => {
                self.resolve();
                let calls: Vec<String> = message
                    .message
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        AssistantBlock::ToolCall { id, .. } => Some(id.clone()),
                        _ => None,
                    })
                    .collect();
                if !calls.is_empty() {
                    self.open = Some((vec![self.kept.len()], calls));
                    self.kept.push(event);
                }
            }
            EventBody::ToolResult(result) => {
                let Some((places, calls)) = &mut self.open else {
                    return;
                };
                let before = calls.len();
                calls.retain(|call| call != result.call_id());
                if calls.is_empty() {
                    self.resolve();
                } else if calls.len() < before {
                    // Kept with its message: the fold must see this call answered.
                    places.push(self.kept.len());
                    self.kept.push(event);
                }
            }
            EventBody::AssistantChunk(_)
            | EventBody::ToolCall(_)
            | EventBody::StepStart(_)
            | EventBody::StepEnd(_) => {}
            _ => self.kept.push(event),
        }
    }

    /// Whether the line ending at `line_end` can be left unparsed: a line before the cut that
    /// would be dropped anyway, its effect on the open message (if any) applied here.
    fn skips(&mut self, line: &[u8], line_end: u64) -> bool {
        if self.cut.is_none_or(|cut| line_end > cut) {
            return false;
        }
        let Some(kind) = line_kind(line) else {
            return false;
        };
        match kind {
            "user/message" | "steering/message" => {
                self.resolve();
                true
            }
            // One with tool calls is read: it may be kept.
            "assistant/message" if memchr::memmem::find(line, b"\"tool-call\"").is_none() => {
                self.resolve();
                true
            }
            "tool/result" => self.open.is_none(),
            _ => UNREAD_BEFORE_CUT.contains(&kind),
        }
    }

    /// Ends the part before the cut (once): its folded turns follow what it kept.
    fn close_cut(&mut self) {
        if self.before_cut.is_none() {
            self.kept.extend(self.turns.take());
            self.before_cut = Some(self.kept.len());
        }
    }

    /// The open assistant message's calls are answered or closed: it is no longer needed.
    fn resolve(&mut self) {
        if let Some((places, _)) = self.open.take() {
            for at in places.into_iter().rev() {
                self.kept.remove(at);
            }
        }
    }
}

/// Reads the log in `file` (at `path`) keeping what the model's view and the session's state
/// need; the same header, torn tail and lines set aside as a whole read.
pub(crate) fn load_view(path: &Path, mut file: File) -> Result<LoadedSession, StoreError> {
    let io_error = |source| StoreError::Io {
        op: "reading the session log",
        path: path.to_owned(),
        source,
    };
    let cut = view_start(&mut file).map_err(io_error)?;
    if let Some(cut) = cut {
        if let Some(before) = view_sidecar::read(path, &mut file, cut) {
            return load_after(path, file, cut, before);
        }
    }
    file.seek(SeekFrom::Start(0)).map_err(io_error)?;
    let mut sidecar_file = file.try_clone().map_err(io_error)?;
    let keeper = RefCell::new(ViewKeeper {
        cut,
        ..ViewKeeper::default()
    });
    let read = read_log_at(
        path,
        BufReader::with_capacity(CHUNK, file),
        |line, line_end| keeper.borrow_mut().skips(line, line_end),
        |event, line_end| keeper.borrow_mut().push(event, line_end),
    )?;
    let mut keeper = keeper.into_inner();
    keeper.close_cut();
    if let Some(cut) = cut {
        let before = &keeper.kept[..keeper.before_cut.unwrap_or(keeper.kept.len())];
        if let Err(error) = view_sidecar::write(path, &mut sidecar_file, cut, before) {
            tracing::warn!(%error, path = %path.display(), "could not record what the session keeps before its cut");
        }
    }
    Ok(read.into_loaded(keeper.kept))
}

/// Reads the log after `cut` (its header first), after the events `before` it that the
/// sidecar kept. Line numbers of lines set aside count from the cut.
fn load_after(
    path: &Path,
    mut file: File,
    cut: u64,
    mut events: Vec<Event>,
) -> Result<LoadedSession, StoreError> {
    let io_error = |source| StoreError::Io {
        op: "reading the session log",
        path: path.to_owned(),
        source,
    };
    file.seek(SeekFrom::Start(0)).map_err(io_error)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut header = Vec::new();
    reader.read_until(b'\n', &mut header).map_err(io_error)?;
    let header_len = header.len() as u64;
    let mut file = reader.into_inner();
    file.seek(SeekFrom::Start(cut)).map_err(io_error)?;
    let rest = io::Cursor::new(header).chain(file);
    let mut read = read_log_at(
        path,
        BufReader::with_capacity(CHUNK, rest),
        |_, _| false,
        |event, _| events.push(event),
    )?;
    read.valid_len = cut + read.valid_len.saturating_sub(header_len);
    Ok(read.into_loaded(events))
}

/// Kinds whose lines before the cut are dropped unread (packed rows are chunks too).
const UNREAD_BEFORE_CUT: [&str; 7] = [
    "assistant/chunk",
    "step/start",
    "step/end",
    "tool/call",
    "text-chunks",
    "reasoning-chunks",
    "tool-call-chunks",
];

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;
    use crate::session::history::HistoryFold;
    use crate::session::loaded::parse_log;

    /// A log of the kinds of lines `kind(args)` names, numbered in order.
    struct Log {
        text: String,
        seq: u64,
    }

    impl Log {
        fn new() -> Self {
            let header = r#"{"type":"session","version":0,"id":"s","createdAt":0,"cwd":"/w","delegationDepth":0}"#;
            Self {
                text: format!("{header}\n"),
                seq: 0,
            }
        }

        fn line(&mut self, kind: &str, data: &str) -> &mut Self {
            let seq = self.seq;
            self.seq += 1;
            writeln!(
                self.text,
                r#"{{"type":"{kind}","seq":{seq},"time":0,"data":{data}}}"#
            )
            .unwrap();
            self
        }

        fn turn(
            &mut self,
            turn: u32,
            said: &str,
            answered: &str,
            open_call: Option<&str>,
        ) -> &mut Self {
            self.line(
                "turn/start",
                &format!(r#"{{"turn":{turn},"trigger":{{"kind":"message"}}}}"#),
            );
            self.line("user/message", &format!(r#"{{"content":[{{"type":"text","text":"{said}"}}],"source":{{"kind":"user"}},"role":"user","id":"u{turn}"}}"#));
            self.line("step/start", &format!(r#"{{"turn":{turn},"step":1}}"#));
            self.line("assistant/chunk", &format!(r#"{{"turn":{turn},"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{answered}"}}}}"#));
            let call = |id: &str| {
                format!(r#",{{"type":"tool-call","id":"{id}","name":"bash","arguments":"{{}}"}}"#)
            };
            let calls = format!(
                "{}{}",
                call(&format!("done{turn}")),
                open_call.map(call).unwrap_or_default()
            );
            self.line("assistant/message", &format!(r#"{{"turn":{turn},"step":1,"message":{{"role":"assistant","content":[{{"type":"text","text":"{answered}"}}{calls}],"source":{{"kind":"model"}},"id":"a{turn}"}}}}"#));
            let id = format!("done{turn}");
            self.line("tool/result", &format!(r#"{{"turn":{turn},"step":1,"message":{{"source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[{{"type":"text","text":"ok"}}],"isError":false}}],"role":"user","id":"r{turn}"}}}}"#));
            self.line("step/end", &format!(r#"{{"turn":{turn},"step":1}}"#));
            self.line(
                "turn/end",
                &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}}}}"#),
            )
        }

        fn compaction(&mut self, id: &str, summary: Option<&str>) -> &mut Self {
            self.line(
                "compaction/start",
                &format!(r#"{{"compactionId":"{id}","throughTurn":1,"trigger":"threshold"}}"#),
            );
            let outcome = match summary {
                Some(summary) => format!(r#""summary":"{summary}""#),
                None => r#""error":"failed""#.to_owned(),
            };
            self.line(
                "compaction/end",
                &format!(r#"{{"compactionId":"{id}",{outcome}}}"#),
            )
        }
    }

    fn both(text: &str) -> (LoadedSession, LoadedSession) {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("s.jsonl");
        std::fs::write(&path, text).unwrap();
        let view = load_view(&path, File::open(&path).unwrap()).unwrap();
        (parse_log(&path, text.as_bytes()).unwrap(), view)
    }

    #[test]
    fn the_kept_events_fold_to_the_model_view_of_the_whole_log() {
        let mut log = Log::new();
        log.turn(1, "one", "a1", None).compaction("c1", Some("S1"));
        log.turn(2, "two", "a2", None)
            .turn(3, "three", "a3", Some("open3"));
        log.line(
            "permission/mode",
            r#"{"mode":"read-only","source":{"kind":"client"}}"#,
        );
        // Turn 4 is in flight when the last good compaction starts: it stays whole.
        log.line("turn/start", r#"{"turn":4,"trigger":{"kind":"message"}}"#);
        log.line("user/message", r#"{"content":[{"type":"text","text":"four"}],"source":{"kind":"user"},"role":"user","id":"u4"}"#);
        log.compaction("c2", Some("S2"));
        log.line("turn/end", r#"{"turn":4,"reason":{"kind":"completed"}}"#);
        log.turn(5, "five", "a5", None).compaction("c3", None);
        // A torn last line.
        log.text.push_str(r#"{"type":"step/st"#);

        let (whole, view) = both(&log.text);
        assert_eq!(
            HistoryFold::new(&view.events).history(),
            HistoryFold::new(&whole.events).history()
        );
        assert_eq!(whole.set_aside, []);
        assert!(
            view.events.len() + 12 < whole.events.len(),
            "{} of {}",
            view.events.len(),
            whole.events.len()
        );
        fn kinds(loaded: &LoadedSession) -> Vec<&str> {
            loaded.events.iter().map(|e| e.body.kind()).collect()
        }
        // Nothing of turns 1 and 2's conversation, turn 3's message with its open call, and
        // every event from the cut on.
        let kept = kinds(&view);
        assert_eq!(kept.iter().filter(|k| **k == "assistant/chunk").count(), 1);
        assert_eq!(
            kept.iter().filter(|k| **k == "assistant/message").count(),
            2
        );
        assert!(kept.contains(&"permission/mode"));
        let from_cut = kinds(&whole)[whole.events.len() - 15..].to_vec();
        assert_eq!(kept[kept.len() - 15..], from_cut[..]);
        assert_eq!(view.next_seq(), whole.next_seq());
        assert_eq!(view.torn_tail, whole.torn_tail);
        assert_eq!(view.valid_len, whole.valid_len);
    }

    #[test]
    fn the_turns_before_the_cut_keep_their_count_last_end_and_spend_in_two_events() {
        let mut log = Log::new();
        for turn in 1..=50 {
            log.line(
                "turn/start",
                &format!(r#"{{"turn":{turn},"trigger":{{"kind":"message"}}}}"#),
            );
            log.line("turn/end", &format!(r#"{{"turn":{turn},"reason":{{"kind":"completed"}},"usage":{{"inputTokens":{turn},"outputTokens":2,"cost":0.5}}}}"#));
        }
        log.compaction("c1", Some("S")).turn(51, "after", "a", None);
        let (whole, view) = both(&log.text);
        // (turn/starts, last turn/end's turn, tokens, cost) as a reopened session reads them.
        let figures = |loaded: &LoadedSession| {
            let (mut starts, mut last_end, mut tokens, mut cost) = (0, 0, 0, 0.0);
            for event in &loaded.events {
                match &event.body {
                    EventBody::TurnStart(_) => starts += 1,
                    EventBody::TurnEnd(end) => {
                        last_end = end.turn;
                        let usage = end.usage.clone().unwrap_or_default();
                        tokens += usage.input_tokens + usage.output_tokens;
                        cost += usage.cost.unwrap_or(0.0);
                    }
                    _ => {}
                }
            }
            (starts, last_end, tokens, cost)
        };
        assert_eq!(figures(&whole), (51, 51, 1275 + 100, 25.0));
        assert_eq!(figures(&view), (2, 51, 1275 + 100, 25.0));
        assert_eq!(
            HistoryFold::new(&view.events).history(),
            HistoryFold::new(&whole.events).history()
        );
        let last_turn = |loaded: &LoadedSession| {
            loaded
                .events
                .iter()
                .filter_map(|e| match &e.body {
                    EventBody::TurnStart(start) => Some(start.turn),
                    _ => None,
                })
                .max()
        };
        assert_eq!(last_turn(&view), Some(51));
    }

    #[test]
    fn a_log_without_a_good_compaction_is_kept_whole() {
        let mut log = Log::new();
        log.turn(1, "one", "a1", None).compaction("c1", None);
        log.text.push_str("not json\n");
        log.turn(2, "two", "a2", None);
        let (whole, view) = both(&log.text);
        assert_eq!(view.events, whole.events);
        assert_eq!(view.set_aside, whole.set_aside);
        assert_eq!(view.set_aside.len(), 1, "{:?}", view.set_aside);
    }

    #[test]
    fn a_compaction_before_any_turn_ended_cuts_after_the_header() {
        let mut log = Log::new();
        log.line("turn/start", r#"{"turn":1,"trigger":{"kind":"message"}}"#);
        log.compaction("c1", Some("S"));
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("s.jsonl");
        std::fs::write(&path, &log.text).unwrap();
        let header_len = log.text.find('\n').unwrap() as u64 + 1;
        assert_eq!(
            view_start(&mut File::open(&path).unwrap()).unwrap(),
            Some(header_len)
        );
    }

    #[test]
    fn the_backward_scan_reads_lines_across_chunks() {
        // Lines longer than a chunk, so each is split over reads.
        let mut log = Log::new();
        let long = "x".repeat(CHUNK + 10);
        log.turn(1, &long, &long, None).compaction("c1", Some("S"));
        log.turn(2, &long, "a2", None);
        let (whole, view) = both(&log.text);
        assert_eq!(
            HistoryFold::new(&view.events).history(),
            HistoryFold::new(&whole.events).history()
        );
        assert_eq!(
            view.events
                .iter()
                .filter(|e| e.body.kind() == "assistant/chunk")
                .count(),
            1
        );
    }

    #[test]
    fn the_next_open_reads_the_kept_events_from_the_sidecar_and_the_log_after_the_cut() {
        let mut log = Log::new();
        log.turn(1, "one", "a1", Some("open1"))
            .turn(2, "two", "a2", None);
        log.compaction("c1", Some("S"));
        log.turn(3, "three", "a3", None);
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("s.jsonl");
        std::fs::write(&path, &log.text).unwrap();
        let open = || load_view(&path, File::open(&path).unwrap()).unwrap();
        let first = open();
        let side = view_sidecar::path_of(&path);
        assert!(side.is_file());
        // The conversation before the cut is not read again: damage there goes unseen.
        let chunk_at = log.text.find("text-delta").unwrap();
        let mut damaged = log.text.clone().into_bytes();
        damaged[chunk_at..chunk_at + 10].copy_from_slice(b"##########");
        std::fs::write(&path, &damaged).unwrap();
        let second = open();
        assert_eq!(second.events, first.events);
        assert_eq!(second.valid_len, first.valid_len);
        assert_eq!(second.set_aside, []);

        // A stale or damaged sidecar is read past: the log is read again from its start,
        // and the sidecar written anew.
        let text = std::fs::read_to_string(&side).unwrap();
        for stale in [
            text.replacen("\"cut\":", "\"cut\":1", 1),
            "garbage".to_owned(),
        ] {
            std::fs::write(&side, stale).unwrap();
            let again = open();
            assert_eq!(std::fs::read_to_string(&side).unwrap(), text);
            assert_eq!(
                HistoryFold::new(&again.events).history(),
                HistoryFold::new(&first.events).history()
            );
        }
    }
}

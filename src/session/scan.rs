//! Quick questions about a stored log, answered from its lines' types without decoding its
//! events (one event a line, `type` first, as kin writes them).

use std::io::BufRead;

use super::event::{EventKind, Header};
use super::line::line_kind;
use super::store::SessionStore;

impl SessionStore {
    /// Session `id`'s header, read from its first line only; `None` when it cannot be read.
    pub(crate) fn header(&self, id: &str) -> Option<Header> {
        let file = std::fs::File::open(self.path(id).ok()?).ok()?;
        let mut first = String::new();
        std::io::BufReader::new(file).read_line(&mut first).ok()?;
        serde_json::from_str(&first).ok()
    }

    /// Whether session `id` has an activation running now: some process (this one or
    /// another) holds its log's lock, as an activation does, and its last turn has not ended.
    pub(crate) fn is_running(&self, id: &str) -> bool {
        let Ok(path) = self.path(id) else {
            return false;
        };
        // The lock is the cheap test: only a locked log is read.
        super::is_locked(&path) && std::fs::read(&path).is_ok_and(|log| has_open_turn(&log))
    }

    /// Whether session `id`'s log holds a tool call; `None` when it cannot be read.
    pub(crate) fn has_tool_call(&self, id: &str) -> Option<bool> {
        let log = std::fs::read(self.path(id).ok()?).ok()?;
        let found = lines(&log).any(|line| is(line, EventKind::ToolCall));
        Some(found)
    }
}

fn lines(log: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    log.split(|&b| b == b'\n')
}

fn is(line: &[u8], kind: EventKind) -> bool {
    line_kind(line) == Some(kind.as_str())
}

/// Whether a log's last turn has started and not ended.
fn has_open_turn(log: &[u8]) -> bool {
    lines(log)
        .rev()
        .find_map(|line| {
            if is(line, EventKind::TurnStart) {
                Some(true)
            } else if is(line, EventKind::TurnEnd) {
                Some(false)
            } else {
                None
            }
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::EventBody;

    /// A store holding session `s1` with `lines` after its header (a child, labelled `bg`).
    fn store_with(lines: &[&str]) -> (tempfile::TempDir, SessionStore) {
        let home = tempfile::tempdir().unwrap();
        let store = SessionStore::open(home.path()).unwrap();
        let mut header = Header::new("s1".into(), 1, "/w".into(), vec![]);
        header.label = Some("bg".into());
        store.create(&header).unwrap();
        let path = store.path("s1").unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        std::fs::write(&path, text).unwrap();
        (home, store)
    }

    const TURN_START: &str =
        r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"trigger":{}}}"#;
    const STEP_START: &str = r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":1}}"#;
    const CHUNK: &str = r#"{"type":"assistant/chunk","seq":2,"time":0,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"hi"}}}"#;
    const STEP_END: &str = r#"{"type":"step/end","seq":3,"time":0,"data":{"turn":1,"step":1}}"#;
    const TOOL_CALL: &str = r#"{"type":"tool/call","seq":4,"time":0,"data":{"turn":1,"step":1,"callId":"c","name":"read","arguments":"{}"}}"#;
    const TURN_END: &str =
        r#"{"type":"turn/end","seq":5,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;

    #[test]
    fn headers_and_tool_calls_are_read_from_the_file() {
        let (_home, store) = store_with(&[TURN_START, TURN_END]);
        assert_eq!(store.header("s1").unwrap().label.as_deref(), Some("bg"));
        assert_eq!(store.has_tool_call("s1"), Some(false));
        assert!(store.header("missing").is_none());
        assert_eq!(store.has_tool_call("missing"), None);
        let (_home, store) = store_with(&[TURN_START, TOOL_CALL]);
        assert_eq!(store.has_tool_call("s1"), Some(true));
        // Not locked by anyone: not running, whatever its turns.
        assert!(!store.is_running("s1"));
    }

    #[test]
    fn a_read_of_some_kinds_decodes_only_those() {
        let (_home, store) = store_with(&[TURN_START, STEP_START, TURN_END]);
        let mut kinds = Vec::new();
        store
            .read_events_of("s1", &[EventKind::TurnEnd, EventKind::StepStart], |event| {
                kinds.push(event.body.kind().to_owned())
            })
            .unwrap();
        assert_eq!(kinds, ["step/start", "turn/end"]);
    }

    #[test]
    fn a_replay_read_gives_a_steps_chunks_only_when_it_has_no_message() {
        let (_home, store) = store_with(&[TURN_START, STEP_START, CHUNK, STEP_END, TURN_END]);
        let mut kinds = Vec::new();
        store
            .read_for_replay("s1", |event| kinds.push(event.body.kind().to_owned()))
            .unwrap();
        assert_eq!(
            kinds,
            [
                "turn/start",
                "step/start",
                "assistant/chunk",
                "step/end",
                "turn/end"
            ]
        );
        let message = r#"{"type":"assistant/message","seq":3,"time":0,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"source":{"kind":"model"},"id":"a1"}}}"#;
        let (_home, store) = store_with(&[STEP_START, CHUNK, message, STEP_END]);
        let mut bodies = Vec::new();
        store
            .read_for_replay("s1", |event| bodies.push(event.body))
            .unwrap();
        assert!(matches!(
            bodies.as_slice(),
            [
                EventBody::StepStart(_),
                EventBody::AssistantMessage(_),
                EventBody::StepEnd(_)
            ]
        ));
    }

    #[test]
    fn only_a_started_turn_without_its_end_is_open() {
        let start = r#"{"type":"turn/start","seq":1}"#;
        let end = r#"{"type":"turn/end","seq":2}"#;
        let other = r#"{"type":"user/message","seq":3}"#;
        let log = |lines: &[&str]| lines.join("\n").into_bytes();
        assert!(has_open_turn(&log(&["{}", start, other])));
        assert!(!has_open_turn(&log(&["{}", start, end, other])));
        assert!(has_open_turn(&log(&["{}", start, end, start, ""])));
        assert!(!has_open_turn(&log(&["{}"])));
    }
}

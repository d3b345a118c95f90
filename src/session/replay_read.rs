//! A log read for `session/load`'s replay, each event handed over as it is read. A step's
//! streamed text is replayed only when the step has no message (it was cut off), so its chunk
//! lines are held unparsed until the step ends and parsed only then: most never are.

use std::cell::RefCell;

use super::error::StoreError;
use super::event::{Event, EventBody};
use super::line::{line_kind, parse_event_line};
use super::loaded::LogRead;
use super::store::SessionStore;

/// Kinds of the lines that hold a step's streamed chunks (packed rows included).
const CHUNK_KINDS: [&str; 4] = [
    "assistant/chunk",
    "text-chunks",
    "reasoning-chunks",
    "tool-call-chunks",
];

/// The current step's chunk lines, unparsed, one per line.
#[derive(Default)]
struct HeldChunks {
    lines: Vec<u8>,
    step_has_message: bool,
}

impl HeldChunks {
    /// Holds `line` if it is a chunk (dropped at once when the step has its message).
    fn holds(&mut self, line: &[u8]) -> bool {
        if !line_kind(line).is_some_and(|kind| CHUNK_KINDS.contains(&kind)) {
            return false;
        }
        if !self.step_has_message {
            self.lines.extend_from_slice(line);
            self.lines.push(b'\n');
        }
        true
    }

    /// Follows `event`; at the end of a step with no message, the chunks it streamed.
    fn release(&mut self, event: &Event) -> Vec<Event> {
        let mut chunks = Vec::new();
        match &event.body {
            EventBody::StepStart(_) => {
                self.lines.clear();
                self.step_has_message = false;
            }
            EventBody::AssistantMessage(_) => {
                self.lines.clear();
                self.step_has_message = true;
            }
            EventBody::StepEnd(_) if !self.step_has_message => {
                for line in self.lines.split(|&b| b == b'\n') {
                    // A damaged line is left out, as the reader sets it aside.
                    if let Ok(text) = std::str::from_utf8(line) {
                        let _ = parse_event_line(text.trim_end_matches('\r'), &mut chunks);
                    }
                }
                self.lines.clear();
            }
            _ => {}
        }
        chunks
    }
}

impl SessionStore {
    /// Reads session `id` as a stream for a replay: each event goes to `on_event` in order,
    /// but a step's streamed chunks only when the step ended without its message, just
    /// before its `step/end`.
    pub(crate) fn read_for_replay(
        &self,
        id: &str,
        mut on_event: impl FnMut(Event),
    ) -> Result<LogRead, StoreError> {
        let held = RefCell::new(HeldChunks::default());
        self.read_events(
            id,
            |line| held.borrow_mut().holds(line),
            |event| {
                for chunk in held.borrow_mut().release(&event) {
                    on_event(chunk);
                }
                on_event(event);
            },
        )
    }
}

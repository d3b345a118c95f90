//! `session/load`'s replay read straight from the log, each event sent as it is read. A step's
//! streamed text is replayed only when the step has no message (it was cut off), so its chunk
//! lines are held unparsed until the step ends and parsed only then: most never are.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use crate::session::{line_kind, parse_event_line, Event, EventBody, SessionStore, StoreError};
use crate::tools::ToolRegistry;

use super::updates::Replayed;

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

/// The registry an event's tool is described by (MCP tools have their own).
pub(super) type ToolsOf<'a> = &'a dyn Fn(&Event) -> Arc<ToolRegistry>;

/// Replays session `id`'s log through `replay`, handing each event to `also` too.
pub(super) fn replay_log(
    store: &SessionStore,
    id: &str,
    replay: &mut Replayed<'_>,
    (tools, blob_dir): (ToolsOf<'_>, Option<&Path>),
    mut also: impl FnMut(&Event),
) -> Result<(), StoreError> {
    let held = RefCell::new(HeldChunks::default());
    // The whole log is read here, in one go: off the worker, so the writer task (woken on
    // this worker by each update) sends the updates as they are made instead of after.
    off_the_worker(|| {
        store.read_events(
            id,
            |line| held.borrow_mut().holds(line),
            |event| {
                for chunk in held.borrow_mut().release(&event) {
                    replay.push(&chunk, &tools(&chunk), blob_dir);
                }
                replay.push(&event, &tools(&event), blob_dir);
                also(&event);
            },
        )
    })?;
    Ok(())
}

/// Runs `work`, which blocks for long, with this worker's other tasks handed to another
/// thread meanwhile (on a multi-threaded runtime; elsewhere it just runs).
fn off_the_worker<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

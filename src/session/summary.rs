//! What a listing knows about one stored session, and reading a title out of log lines.

use super::child::ChildInfo;
use super::event::EventBody;
use super::line::parse_event_line;

/// What `session/list` needs about one stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    pub(crate) cwd: Option<String>,
    pub(crate) additional_directories: Vec<String>,
    pub(crate) title: Option<String>,
    pub(crate) updated_ms: u64,
    /// Full-precision modification time, for a stable newest-first order.
    pub(crate) updated_ns: u128,
    pub(crate) parent_session: Option<String>,
    /// For a child session, what `list_agents` shows; `None` also for a child indexed by an
    /// older kin (read its file instead).
    pub(crate) child: Option<ChildInfo>,
    /// The front end that made a top-level session when not an editor (`"mcp"`), from its
    /// header; `None` also for a session indexed by an older kin.
    pub(crate) started_over: Option<String>,
}

/// The title of the last `session/title` event in `lines` (log lines); only those are parsed.
pub(crate) fn last_title(lines: &[u8]) -> Option<String> {
    const NEEDLE: &[u8] = b"\"type\":\"session/title\"";
    let mut title = None;
    for line in lines.split(|&b| b == b'\n') {
        if line.windows(NEEDLE.len()).any(|w| w == NEEDLE) {
            let mut parsed = Vec::new();
            if let Ok(text) = std::str::from_utf8(line) {
                if parse_event_line(text, &mut parsed).is_ok() {
                    if let Some(EventBody::SessionTitle(t)) = parsed.pop().map(|e| e.body) {
                        title = Some(t.title);
                    }
                }
            }
        }
    }
    title
}

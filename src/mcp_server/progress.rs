//! MCP progress notifications for a running `kin` call: what the session is doing (its latest
//! tool call and the tail of its answer text), at most one notification per [`INTERVAL`].

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::agent::host::{HostEvent, HostEvents, Subscription};
use crate::session::{AssistantChunk, Chunk, EventBody};

/// The shortest time between two notifications of one call.
const INTERVAL: Duration = Duration::from_millis(250);
/// How much of the answer text a notification carries (characters).
const TAIL: usize = 200;

/// One thing the session did.
enum Step {
    Tool(String),
    Text(String),
}

/// What the latest notification says.
#[derive(Default)]
struct Summary {
    tool: Option<String>,
    tail: String,
}

impl Summary {
    fn apply(&mut self, step: Step) {
        match step {
            Step::Tool(line) => {
                self.tool = Some(line);
                self.tail.clear();
            }
            Step::Text(text) => {
                self.tail.push_str(&text);
                let count = self.tail.chars().count();
                if count > TAIL {
                    let cut = self
                        .tail
                        .char_indices()
                        .nth(count - TAIL)
                        .map_or(0, |(at, _)| at);
                    self.tail.drain(..cut);
                }
            }
        }
    }

    fn message(&self) -> String {
        match (&self.tool, self.tail.trim()) {
            (Some(tool), "") => tool.clone(),
            (Some(tool), tail) => format!("{tool}\n{tail}"),
            (None, tail) => tail.to_owned(),
        }
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// Forwards one session's activity as progress notifications until [`Forwarder::finish`].
pub(crate) struct Forwarder {
    subscription: Subscription,
    done: CancellationToken,
    task: JoinHandle<()>,
}

impl Forwarder {
    /// Starts forwarding what session `session` does to `peer` under `token`.
    pub(crate) fn start(
        events: &Arc<HostEvents>,
        session: String,
        peer: Peer<RoleServer>,
        token: ProgressToken,
    ) -> Self {
        let (steps, mut received) = mpsc::unbounded_channel();
        let subscription = events.subscribe(move |event| {
            let HostEvent::Appended { agent, event } = event else {
                return;
            };
            if agent.id != session {
                return;
            }
            let step = match &event.body {
                EventBody::ToolCall(call) => {
                    Step::Tool(format!("tool {} {}", call.name, cut(&call.arguments, 120)))
                }
                EventBody::AssistantChunk(AssistantChunk {
                    chunk: Chunk::TextDelta { text, .. },
                    ..
                }) if !text.is_empty() => Step::Text(text.clone()),
                _ => return,
            };
            let _ = steps.send(step);
        });
        let done = CancellationToken::new();
        let finished = done.clone();
        let task = tokio::spawn(async move {
            let mut summary = Summary::default();
            let mut sent = 0u32;
            while let Some(step) = received.recv().await {
                summary.apply(step);
                while let Ok(step) = received.try_recv() {
                    summary.apply(step);
                }
                sent += 1;
                let note = ProgressNotificationParam::new(token.clone(), f64::from(sent))
                    .with_message(summary.message());
                if peer.notify_progress(note).await.is_err() {
                    break;
                }
                // Rate limit; once the call is over, what is left goes out at once.
                tokio::select! {
                    () = tokio::time::sleep(INTERVAL) => {}
                    () = finished.cancelled() => {}
                }
            }
        });
        Self {
            subscription,
            done,
            task,
        }
    }

    /// Stops listening, sends what is pending, and returns once the last notification is out
    /// (so it precedes the call's answer).
    pub(crate) async fn finish(self) {
        drop(self.subscription);
        self.done.cancel();
        let _ = self.task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_keeps_the_latest_tool_and_a_short_text_tail() {
        let mut summary = Summary::default();
        summary.apply(Step::Text("hello".into()));
        assert_eq!(summary.message(), "hello");
        summary.apply(Step::Tool("tool read {}".into()));
        assert_eq!(summary.message(), "tool read {}");
        summary.apply(Step::Text("x".repeat(TAIL + 50)));
        let message = summary.message();
        assert!(message.starts_with("tool read {}\n"), "{message}");
        assert_eq!(message.chars().count(), "tool read {}\n".len() + TAIL);
    }
}

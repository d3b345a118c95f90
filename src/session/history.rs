//! Folds of a session log: the conversation the model sees, and the completed-turn prefix.
//!
//! The conversation is folded event by event ([`HistoryFold`]) as the agent appends to its
//! log, so a model step takes it as it stands instead of walking the whole log again, and the
//! request shares its messages ([`ModelHistory`]) instead of copying them.

use std::sync::Arc;

use super::event::{AssistantBlock, Chunk, Event, EventBody, TurnEndReason, UserPart};

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

/// The `turn/end` error code of a turn whose request did not fit the context window: the
/// fold leaves that turn out, so its prompt is not sent again.
pub(crate) const CONTEXT_OVERFLOW_CODE: &str = "context_overflow";

/// Ends the text a step streamed before it was cut short (cancelled, or the stream broke),
/// kept as the step's assistant message so the conversation still alternates.
pub(crate) const INTERRUPTED_ANSWER: &str = "[interrupted]";

/// The answer a prompt gets in the conversation when its turn was cancelled before the model
/// answered: the model sees that it went unanswered, and the next prompt stays a turn of its
/// own (roles still alternate).
pub(crate) const CANCELLED_BEFORE_ANSWER: &str = "[cancelled by the user before any answer]";

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
    /// The text the running step streamed so far, until its `assistant/message` (a step that
    /// ends without one keeps it as an interrupted answer).
    partial: String,
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
                self.partial.clear();
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
            EventBody::AssistantChunk(chunk) => {
                if let Chunk::TextDelta { text, .. } = &chunk.chunk {
                    self.partial.push_str(text);
                }
            }
            EventBody::TurnStart(_) => self.step_starts.clear(),
            EventBody::StepStart(_) => {
                self.partial.clear();
                self.step_starts.push(self.items.len());
            }
            EventBody::StepEnd(_) => self.keep_partial(),
            EventBody::TurnEnd(end) => {
                self.keep_partial();
                // A call left open is answered within its turn, so a compaction of the turn
                // takes its result too.
                self.close_open();
                if overflowed(&end.reason) {
                    self.open_calls.clear();
                    let start = self.completed_len.min(self.items.len());
                    Arc::make_mut(&mut self.items).truncate(start);
                } else if end.reason == TurnEndReason::Aborted && self.ends_unanswered() {
                    self.add(HistoryItem::Assistant(vec![AssistantBlock::Text {
                        text: CANCELLED_BEFORE_ANSWER.into(),
                    }]));
                }
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

    /// Bytes of the running turn's prompt (what an in-turn compaction keeps before the steps).
    pub(crate) fn running_prompt_len(&self) -> usize {
        let Some(&prompt_end) = self.step_starts.first() else {
            return 0;
        };
        let start = self.completed_len.min(prompt_end);
        self.items[start..prompt_end.min(self.items.len())]
            .iter()
            .map(|item| item.text_len())
            .sum()
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

    /// Whether the running turn added messages and the last is a user message (its prompt,
    /// or a message steered in) that nothing answered.
    fn ends_unanswered(&self) -> bool {
        self.items.len() > self.completed_len
            && matches!(
                self.items.last().map(|item| &**item),
                Some(HistoryItem::User(_))
            )
    }

    /// A step that streamed text but logged no message: the text stays, marked interrupted.
    fn keep_partial(&mut self) {
        if self.partial.trim().is_empty() {
            self.partial.clear();
            return;
        }
        let text = format!(
            "{}\n\n{INTERRUPTED_ANSWER}",
            std::mem::take(&mut self.partial)
        );
        self.close_open();
        self.add(HistoryItem::Assistant(vec![AssistantBlock::Text { text }]));
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

/// Whether a turn ended because its request did not fit the context window.
fn overflowed(reason: &TurnEndReason) -> bool {
    matches!(reason, TurnEndReason::Error { code: Some(code), .. } if code == CONTEXT_OVERFLOW_CODE)
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
mod tests;

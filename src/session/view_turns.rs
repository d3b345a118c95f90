//! The turns before a view's compaction cut (`view.rs`), folded: what a reopened session needs
//! of them is the last turn's number (its `turn/start`), the last turn that ended and how (its
//! `turn/end`), and what they all used and cost together (the sums of their `turn/end`
//! usage). So the view keeps two events for them, however many turns the log holds: the last
//! `turn/start`, and the last `turn/end` carrying the summed usage of every `turn/end` up to
//! the cut.

use super::context::TurnUsage;
use super::event::{Event, EventBody};

/// The folded `turn/start` and `turn/end` events read so far before the cut.
#[derive(Debug, Default)]
pub(super) struct FoldedTurns {
    last_start: Option<Event>,
    last_end: Option<Event>,
    /// The sums of the usage of every `turn/end` read (`None` while none had usage).
    usage: Option<TurnUsage>,
}

impl FoldedTurns {
    /// Folds `event` in if it is a `turn/start` or `turn/end`; hands it back otherwise.
    pub(super) fn fold(&mut self, event: Event) -> Option<Event> {
        match &event.body {
            EventBody::TurnStart(_) => self.last_start = Some(event),
            EventBody::TurnEnd(end) => {
                if let Some(usage) = &end.usage {
                    add(self.usage.get_or_insert_with(TurnUsage::default), usage);
                }
                self.last_end = Some(event);
            }
            _ => return Some(event),
        }
        None
    }

    /// The folded events, in log order.
    pub(super) fn take(&mut self) -> impl Iterator<Item = Event> {
        let usage = self.usage.take();
        let end = self.last_end.take().map(|mut event| {
            if let EventBody::TurnEnd(end) = &mut event.body {
                end.usage = usage;
            }
            event
        });
        // The cut is right after a `turn/end`: the last start before it is of that turn or
        // an earlier one.
        self.last_start.take().into_iter().chain(end)
    }
}

fn add(total: &mut TurnUsage, usage: &TurnUsage) {
    total.input_tokens = total.input_tokens.saturating_add(usage.input_tokens);
    total.output_tokens = total.output_tokens.saturating_add(usage.output_tokens);
    if let Some(cached) = usage.cache_read_tokens {
        let sum = total.cache_read_tokens.unwrap_or(0).saturating_add(cached);
        total.cache_read_tokens = Some(sum);
    }
    if let Some(cost) = usage.cost {
        total.cost = Some(total.cost.unwrap_or(0.0) + cost);
    }
    if let Some(estimated) = usage.estimated_tokens {
        let sum = total
            .estimated_tokens
            .unwrap_or(0)
            .saturating_add(estimated);
        total.estimated_tokens = Some(sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{StepRef, TurnEnd, TurnEndReason, TurnStart};

    fn end(seq: u64, turn: u32, usage: Option<TurnUsage>) -> Event {
        let body = EventBody::TurnEnd(TurnEnd {
            turn,
            reason: TurnEndReason::Completed,
            usage,
        });
        Event::new(seq, 0, body)
    }

    fn start(seq: u64, turn: u32) -> Event {
        let trigger = serde_json::json!({"kind": "message"});
        let body = EventBody::TurnStart(TurnStart { turn, trigger });
        Event::new(seq, 0, body)
    }

    #[test]
    fn many_turns_fold_into_the_last_start_and_an_end_with_the_summed_usage() {
        let used = |input, output, cached, cost| TurnUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cached,
            cost,
            estimated_tokens: None,
        };
        let mut folded = FoldedTurns::default();
        let events = [
            start(0, 1),
            end(1, 1, Some(used(10, 1, None, Some(0.5)))),
            start(2, 2),
            end(3, 2, None),
            start(4, 3),
            end(5, 3, Some(used(5, 1, Some(3), Some(0.25)))),
        ];
        for event in events {
            assert!(folded.fold(event).is_none());
        }
        let other = Event::new(6, 0, EventBody::StepStart(StepRef { turn: 3, step: 1 }));
        assert!(folded.fold(other).is_some());
        let kept: Vec<Event> = folded.take().collect();
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0], start(4, 3));
        assert_eq!(kept[1], end(5, 3, Some(used(15, 2, Some(3), Some(0.75)))));
        assert_eq!(folded.take().count(), 0);
    }
}

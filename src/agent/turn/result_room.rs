//! Tool results that outgrow the window: a result is cut to the room the conversation has
//! for it, with a marker that says how much was left out and how to read the rest, so the
//! next request fits instead of being refused. The log holds the result as the model saw it.

use super::Turn;
use crate::agent::compact::{next_request_tokens, MIN_SUMMARY_TOKENS};
use crate::session::{ToolResult, ToolResultContent};

/// The fewest bytes of a result kept, however full the window (the model must see what the
/// call came to).
const MIN_RESULT_BYTES: usize = 512;

impl Turn<'_> {
    /// Bytes a tool result may take: what fits now (the window less the next request and
    /// the answer's reserve), or, when more and no compaction ran this turn, what fits after
    /// one that keeps the running turn with a short summary; at most half the room beside
    /// the fixed part.
    /// `None`: the window is unknown.
    fn result_budget(&self) -> Option<usize> {
        let choice = self.choice();
        let context = &self.agent.context;
        let window = context.window(choice.profile.context_window)?;
        let reserve = self.reserve(&choice, window);
        let fixed = context.fixed_tokens();
        let room = window.saturating_sub(fixed + reserve);
        let now = window.saturating_sub(next_request_tokens(self.agent) + reserve);
        let history = self.agent.model_history();
        let kept = context.estimate(history.text_len_from(self.agent.completed_prefix().len()));
        let after_compaction = match self.compacted {
            true => 0,
            false => room.saturating_sub(kept + 2 * MIN_SUMMARY_TOKENS),
        };
        let tokens = now.max(after_compaction).min(room / 2);
        Some(context.estimate_bytes(tokens).max(MIN_RESULT_BYTES))
    }

    /// Cuts `result`'s text to the room the window has for it (see `result_budget`).
    pub(super) fn fit_result(&self, tool: &str, result: &mut ToolResult) {
        let Some(budget) = self.result_budget() else {
            return;
        };
        for part in &mut result.message.content {
            let texts = part.content.iter_mut().filter_map(|piece| match piece {
                ToolResultContent::Text { text } => Some(text),
                ToolResultContent::Image { .. } => None,
            });
            for text in texts {
                if text.len() > budget {
                    let bytes_per_token = self.agent.context.estimate_bytes(1).max(1);
                    *text = cut_to(text, budget, tool, bytes_per_token);
                    tracing::info!(session = %self.agent.id, tool, budget, "a tool result was cut to fit the window");
                }
            }
        }
    }
}

/// `text`'s head in about `budget` bytes (cut at a line end where there is one), and a marker
/// saying what was left out and how `tool`'s caller can read the rest.
fn cut_to(text: &str, budget: usize, tool: &str, bytes_per_token: usize) -> String {
    let mut end = budget.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = match text[..end].rfind('\n') {
        Some(line_end) if line_end > end / 2 => &text[..line_end],
        _ => &text[..end],
    };
    let left_out = text.len() - head.len();
    let how = match last_line_number(head) {
        Some(line) if tool == "read" => format!(
            "Read the rest with `read` and `offset` {} (a smaller `limit` keeps each part in \
             the window).",
            line + 1
        ),
        _ => "For a file, read the rest with `read` and an `offset` (and a `limit`); for a \
              command's output, narrow it (head, tail, grep) or write it to a file and read \
              that in parts."
            .to_owned(),
    };
    format!(
        "{head}\n[... {left_out} more bytes (about {} tokens) of this result were left out: \
         they did not fit the model's context window. {how}]",
        left_out.div_ceil(bytes_per_token)
    )
}

/// The number of `text`'s last line as `read` renders it (`   123\tline`).
fn last_line_number(text: &str) -> Option<usize> {
    let last = text.lines().last()?;
    let (number, _) = last.split_once('\t')?;
    number.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_result_is_cut_at_a_line_and_says_where_to_read_on() {
        let text: String = (1..=200).map(|n| format!("{n:>6}\tline {n}\n")).collect();
        let cut = cut_to(&text, 1000, "read", 4);
        let (head, marker) = cut.split_once("\n[...").unwrap();
        assert!(head.len() <= 1000, "{}", head.len());
        let last = last_line_number(head).unwrap();
        assert!(
            marker.contains(&format!("`offset` {}", last + 1)),
            "{marker}"
        );
        let left_out = text.len() - head.len();
        assert!(
            marker.contains(&format!("{left_out} more bytes")),
            "{marker}"
        );
    }

    #[test]
    fn other_results_name_the_ways_to_see_the_rest() {
        let text = "é".repeat(2000);
        let cut = cut_to(&text, 1001, "bash", 4);
        assert!(cut.starts_with(&"é".repeat(500)), "cut on a char boundary");
        assert!(cut.contains("narrow it (head, tail, grep)"), "{cut}");
        assert!(cut.len() < 1400, "{}", cut.len());
    }
}

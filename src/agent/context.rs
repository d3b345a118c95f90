//! What a live session knows of its model and context: the configured model it runs on (a
//! `model/set` in its log), how full its context was after the last model call, and what it
//! has cost, its settled children included. Restored from the log on open.

use std::sync::Mutex;

use crate::model::ModelProfile;
use crate::session::{Event, EventBody, TurnUsage, Usage};
use crate::sync::lock;

/// The session's context figures, as of its last model call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextUsage {
    /// Tokens in context after the last call (the endpoint's figures, else an estimate).
    pub(crate) used: u64,
    /// The history length (in messages) `used` counts.
    pub(crate) counted_items: usize,
    /// Tokens of the fixed part (system prompt and tool schemas) within `used`: the next
    /// request's fixed part may differ (the lean form came or went).
    pub(crate) used_fixed: u64,
    /// Bytes of request per token, from the last request the endpoint counted (`None`: none
    /// was counted yet, and [`DEFAULT_BYTES_PER_TOKEN`] is assumed).
    pub(crate) bytes_per_token: Option<f64>,
    /// Bytes of the last request's fixed part: the system prompt and the tool schemas.
    pub(crate) fixed_bytes: usize,
    /// What an endpoint counted for the fixed part, by the first request it counted with
    /// that part: (its bytes then, its tokens). A template that drops the tools makes it
    /// far smaller than the bytes say.
    pub(crate) fixed_count: Option<(usize, u64)>,
    /// The request's tokens right after the last compaction (the next one waits until the
    /// history has grown by a share of the window since).
    pub(crate) compacted_to: Option<u64>,
    /// The window an endpoint named when it refused a request as too long.
    pub(crate) reported_window: Option<u64>,
    /// The window the model's server reported when asked (llama-server's `/props`).
    pub(crate) server_window: Option<u64>,
    /// Cost so far, this session's calls and its settled children's.
    pub cost: f64,
}

#[derive(Default)]
struct Figures {
    usage: ContextUsage,
    /// Sums of the running turn.
    turn: TurnUsage,
    turn_cost_start: f64,
    /// The last answer that stopped at its output cap: the cap, and what set it.
    output_cap_hit: Option<(u32, &'static str)>,
}

/// The model choice and the usage figures of one session.
#[derive(Default)]
pub struct SessionContext {
    /// The configured model id switched to, if any (else the options' model, else default).
    selected: Mutex<Option<String>>,
    /// A switch not yet in the log (it came while a turn held the log).
    unlogged_switch: Mutex<Option<String>>,
    figures: Mutex<Figures>,
}

impl SessionContext {
    /// The context of a session whose log holds `events`.
    pub(crate) fn restore(events: &[Event]) -> Self {
        let mut selected = None;
        let mut cost = 0.0;
        for event in events {
            match &event.body {
                EventBody::ModelSet(set) => selected = Some(set.model.clone()),
                EventBody::TurnEnd(end) => {
                    cost += end.usage.as_ref().and_then(|u| u.cost).unwrap_or(0.0);
                }
                // A background child's cost, counted for the turn that started it.
                EventBody::TaskEnd(end) => cost += end.cost.unwrap_or(0.0),
                _ => {}
            }
        }
        let context = Self {
            selected: Mutex::new(selected),
            ..Self::default()
        };
        lock(&context.figures).usage.cost = cost;
        context
    }

    pub(crate) fn selected(&self) -> Option<String> {
        lock(&self.selected).clone()
    }

    /// Switches to `id`; the switch waits in [`SessionContext::take_unlogged_switch`].
    pub(crate) fn select(&self, id: &str) {
        // Another model may count the fixed part otherwise (another template).
        lock(&self.figures).usage.fixed_count = None;
        *lock(&self.selected) = Some(id.to_owned());
        *lock(&self.unlogged_switch) = Some(id.to_owned());
    }

    pub(crate) fn take_unlogged_switch(&self) -> Option<String> {
        lock(&self.unlogged_switch).take()
    }

    /// How full the context window is, by the last model call.
    pub fn usage(&self) -> ContextUsage {
        lock(&self.figures).usage.clone()
    }

    /// Starts the sums of a new turn.
    pub(crate) fn begin_turn(&self) {
        let mut figures = lock(&self.figures);
        figures.turn = TurnUsage::default();
        figures.turn_cost_start = figures.usage.cost;
        figures.output_cap_hit = None;
    }

    /// An answer of the running turn stopped at its output cap of `cap` tokens, set by
    /// `setting`.
    pub(crate) fn note_output_cap(&self, cap: u32, setting: &'static str) {
        lock(&self.figures).output_cap_hit = Some((cap, setting));
    }

    /// The output cap the running (or last) turn's answer stopped at, and what set it.
    pub fn output_cap_hit(&self) -> Option<(u32, &'static str)> {
        lock(&self.figures).output_cap_hit
    }

    /// Counts one model call of `profile`'s model; `used` is the context after it and
    /// `items` the history length it covers.
    pub(crate) fn record_call(
        &self,
        usage: &Usage,
        profile: &ModelProfile,
        used: u64,
        items: usize,
    ) {
        let mut figures = lock(&self.figures);
        figures.turn.input_tokens += usage.input_tokens;
        figures.turn.output_tokens += usage.output_tokens;
        if let Some(cached) = usage.cache_read_tokens {
            *figures.turn.cache_read_tokens.get_or_insert(0) += cached;
        }
        if let Some(prices) = &profile.prices {
            figures.usage.cost += prices.cost(usage);
        }
        figures.usage.used = used;
        figures.usage.used_fixed = fixed_tokens_of(&figures.usage);
        figures.usage.counted_items = items;
    }

    /// The endpoint counted `prompt_tokens` for a request of `fixed_bytes` of system prompt and
    /// tool schemas and `history_bytes` of messages. The first count (or the first after the
    /// fixed part changed) sets the fixed part's tokens: the count less the history's estimate.
    /// Later counts set the history's bytes per token from what they counted beyond it.
    pub(crate) fn calibrate(&self, fixed_bytes: usize, history_bytes: usize, prompt_tokens: u64) {
        if prompt_tokens == 0 {
            return;
        }
        let usage = &mut lock(&self.figures).usage;
        match usage.fixed_count {
            Some((bytes, fixed)) if bytes == fixed_bytes => {
                let history_tokens = prompt_tokens.saturating_sub(fixed);
                if history_bytes >= MIN_CALIBRATION_BYTES && history_tokens > 0 {
                    let ratio = (history_bytes as f64 / history_tokens as f64).clamp(1.0, 8.0);
                    usage.bytes_per_token = Some(ratio);
                }
            }
            _ => {
                let ratio = usage.bytes_per_token.unwrap_or(DEFAULT_BYTES_PER_TOKEN);
                let history_tokens = (history_bytes as f64 / ratio).ceil() as u64;
                let fixed = prompt_tokens.saturating_sub(history_tokens);
                usage.fixed_count = Some((fixed_bytes, fixed));
            }
        }
    }

    /// Tokens of the fixed part (system prompt and tool schemas): the endpoint's count when
    /// it counted one (adjusted for bytes added or taken since), else an estimate.
    pub(crate) fn fixed_tokens(&self) -> u64 {
        fixed_tokens_of(&lock(&self.figures).usage)
    }

    /// Tokens in context after the last call, with the fixed part it counted replaced by
    /// the current one.
    pub(crate) fn used_with_current_fixed(&self) -> u64 {
        let usage = &lock(&self.figures).usage;
        usage.used.saturating_sub(usage.used_fixed) + fixed_tokens_of(usage)
    }

    /// Tokens of a request whose messages are `history_bytes` long.
    pub(crate) fn request_tokens(&self, history_bytes: usize) -> u64 {
        self.fixed_tokens() + self.estimate(history_bytes)
    }

    /// The fixed part of this session's requests (system prompt and tool schemas) is
    /// `bytes` long.
    pub(crate) fn set_fixed_bytes(&self, bytes: usize) {
        lock(&self.figures).usage.fixed_bytes = bytes;
    }

    /// The endpoint refused a request as too long for its `window`-token window.
    pub(crate) fn report_window(&self, window: u64) {
        lock(&self.figures).usage.reported_window = Some(window);
    }

    /// The model's server reported its `window` when asked.
    pub(crate) fn set_server_window(&self, window: Option<u64>) {
        lock(&self.figures).usage.server_window = window;
    }

    /// The window to work with: `known` (configured, else what the server reported when
    /// asked), or the one an endpoint named in a refusal when that is smaller or nothing else
    /// is known.
    pub(crate) fn window(&self, known: Option<u64>) -> Option<u64> {
        let usage = &lock(&self.figures).usage;
        let known = known.or(usage.server_window);
        match (known, usage.reported_window) {
            (Some(known), Some(reported)) => Some(known.min(reported)),
            (known, reported) => known.or(reported),
        }
    }

    /// Tokens of `bytes` of request, by the last calibration (else four bytes a token).
    pub(crate) fn estimate(&self, bytes: usize) -> u64 {
        let ratio = lock(&self.figures)
            .usage
            .bytes_per_token
            .unwrap_or(DEFAULT_BYTES_PER_TOKEN);
        (bytes as f64 / ratio).ceil() as u64
    }

    /// Bytes of request that make about `tokens` tokens, by the last calibration.
    pub(crate) fn estimate_bytes(&self, tokens: u64) -> usize {
        let ratio = lock(&self.figures)
            .usage
            .bytes_per_token
            .unwrap_or(DEFAULT_BYTES_PER_TOKEN);
        (tokens as f64 * ratio) as usize
    }

    /// Counts tokens estimated for a call whose endpoint reported no usage.
    pub(crate) fn record_estimate(&self, tokens: u64) {
        let mut figures = lock(&self.figures);
        let estimated = figures.turn.estimated_tokens.get_or_insert(0);
        *estimated = estimated.saturating_add(tokens);
    }

    /// The context shrank (a compaction): `used` tokens over `items` messages.
    pub(crate) fn set_used(&self, used: u64, items: usize) {
        let mut figures = lock(&self.figures);
        figures.usage.compacted_to = Some(used);
        figures.usage.used = used;
        figures.usage.used_fixed = fixed_tokens_of(&figures.usage);
        figures.usage.counted_items = items;
    }

    /// Adds a settled child's cost.
    pub(crate) fn add_cost(&self, cost: f64) {
        lock(&self.figures).usage.cost += cost;
    }

    /// Adds a background child's cost, which its `task/end` records: it is in the session's
    /// cost but not in the running turn's (that turn did not start it).
    pub(crate) fn add_task_cost(&self, cost: f64) {
        let mut figures = lock(&self.figures);
        figures.usage.cost += cost;
        figures.turn_cost_start += cost;
    }

    /// The running turn's sums, for its `turn/end` (none when no call reported usage and no
    /// cost was added).
    pub(crate) fn turn_usage(&self, priced: bool) -> Option<TurnUsage> {
        let figures = lock(&self.figures);
        let mut turn = figures.turn.clone();
        let cost = figures.usage.cost - figures.turn_cost_start;
        if priced || cost > 0.0 {
            turn.cost = Some(cost);
        }
        let empty = turn.tokens() == 0 && turn.cost.is_none();
        (!empty).then_some(turn)
    }
}

/// Tokens of `usage`'s fixed part: the endpoint's count when it counted one (adjusted for
/// bytes added or taken since), else an estimate.
fn fixed_tokens_of(usage: &ContextUsage) -> u64 {
    let ratio = usage.bytes_per_token.unwrap_or(DEFAULT_BYTES_PER_TOKEN);
    let tokens = |bytes: usize| (bytes as f64 / ratio).ceil() as u64;
    match usage.fixed_count {
        Some((bytes, fixed)) if usage.fixed_bytes >= bytes => {
            fixed + tokens(usage.fixed_bytes - bytes)
        }
        Some((bytes, fixed)) => fixed.saturating_sub(tokens(bytes - usage.fixed_bytes)),
        None => tokens(usage.fixed_bytes),
    }
}

/// Bytes of history a count must cover before it sets the bytes per token (a few messages'
/// framing would throw a smaller sample off).
const MIN_CALIBRATION_BYTES: usize = 2048;

/// Bytes a token before any endpoint count calibrated it (about right for English and code
/// with the common tokenizers).
pub(crate) const DEFAULT_BYTES_PER_TOKEN: f64 = 4.0;

/// Bytes the model reads of `tools`' definitions: names, descriptions and JSON schemas (a
/// chat template renders them into the prompt; 14 built-in tools are ~13 KB).
pub(crate) fn tool_schema_bytes(tools: &[crate::model::ToolSpec]) -> usize {
    tools
        .iter()
        .map(|tool| {
            let schema = serde_json::to_string(&*tool.parameters).map_or(0, |s| s.len());
            // The `{"type":"function","function":{...}}` wrapper around each.
            tool.name.len() + tool.description.len() + schema + 60
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_follow_the_endpoints_count() {
        let context = SessionContext::default();
        context.set_fixed_bytes(10_000);
        assert_eq!(context.estimate(4000), 1000);
        assert_eq!(context.fixed_tokens(), 2500);
        // A template that drops the tools: the server counts 160 for 10,000 bytes of fixed
        // part and 400 of prompt (100 tokens at four bytes a token).
        context.calibrate(10_000, 400, 160);
        assert_eq!(context.fixed_tokens(), 60);
        assert_eq!(context.request_tokens(400), 160);
        // Then 12,560 bytes of history counted as 2,512 tokens beyond the fixed part: five
        // bytes a token.
        context.calibrate(10_000, 12_560, 60 + 2_512);
        assert_eq!(context.estimate(5000), 1000);
        assert_eq!(context.fixed_tokens(), 60, "the fixed part's count stays");
        // Bytes added to the fixed part (an MCP server's tools) add their estimate.
        context.set_fixed_bytes(10_500);
        assert_eq!(context.fixed_tokens(), 160);
        // A count with the new fixed part sets its count afresh.
        context.calibrate(10_500, 400, 240);
        assert_eq!(context.fixed_tokens(), 160);
        // Nonsense counts do not throw the estimate off by more than the clamp allows.
        context.calibrate(10_500, 100_000, 1_000_000);
        assert_eq!(context.estimate(100), 100);
    }

    #[test]
    fn tool_schemas_count() {
        let spec = crate::model::ToolSpec {
            name: "read".into(),
            description: "Reads a file.".into(),
            parameters: std::sync::Arc::new(serde_json::json!({"type": "object"})),
        };
        assert_eq!(tool_schema_bytes(&[spec]), 4 + 13 + 17 + 60);
    }
}

//! Compaction: the model summarises the conversation through the last completed turn (inside
//! a long turn, also that turn's older steps, keeping its prompt and latest steps), and the
//! summary replaces those messages in later requests (the fold of `compaction/end`, see
//! `session::history`). The log keeps everything; a compaction that fails changes nothing.

use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

mod pieces;

use super::{Agent, AgentState, Observer};
use crate::model::{ModelChoice, ModelRequest};
use crate::session::history::{HistoryItem, ModelHistory, SUMMARY_PREFIX};
use crate::session::{
    Chunk, CompactionEnd, CompactionStart, CompactionTrigger, EventBody, FinishKind, StoreError,
    Usage, UserPart,
};
use crate::time::now_ms;

/// Bytes of summary taken at most: a summary is to shrink the conversation, and an endpoint
/// that streams on past this (whatever `max_tokens` said) fails the compaction instead of
/// growing kin.
pub(crate) const MAX_SUMMARY_BYTES: usize = 256 * 1024;

/// The fixed instruction the summary is written to (documented in protocol/session-log.md).
pub(crate) const COMPACTION_INSTRUCTION: &str =
    "The conversation above is being compacted: it will be \
replaced by the summary you write now, and the work goes on from that summary alone. Write it \
for yourself: the user's goals and constraints, what was decided and why, what was done (files \
read or changed, commands run, results), what failed, and what is still open. Keep names, paths, \
numbers and exact identifiers. Answer with the summary only, no tool calls.";

/// How a compaction ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CompactionOutcome {
    /// The summary now stands for turns 1..=`through_turn`.
    Compacted {
        through_turn: u32,
        summary: String,
    },
    /// Nothing to compact: no completed turn since the last compaction.
    NothingToCompact,
    /// It failed; the conversation is as it was.
    Failed {
        reason: String,
    },
    Cancelled,
}

/// The tokens of `agent`'s next request: the context after the last call (with the next
/// request's fixed part, which the lean form may have changed) plus an estimate of
/// what came since, or, when nothing was counted yet, an estimate of the whole request (its
/// fixed part, system prompt and tool schemas, by the endpoint's count when it gave one).
pub(super) fn next_request_tokens(agent: &Agent) -> u64 {
    let history = agent.model_history();
    let usage = agent.context.usage();
    if usage.counted_items == 0 || usage.counted_items > history.len() {
        agent.context.request_tokens(history.text_len_from(0))
    } else {
        agent.context.used_with_current_fixed()
            + agent
                .context
                .estimate(history.text_len_from(usage.counted_items))
    }
}

/// Tokens a summary may take: the model's output cap, at most a quarter of the window.
pub(super) fn summary_cap(choice: &ModelChoice, window: Option<u64>) -> u32 {
    let cap = choice.profile.max_output.unwrap_or(DEFAULT_SUMMARY_TOKENS);
    match window {
        Some(window) => cap
            .min(u32::try_from(window / 4).unwrap_or(u32::MAX))
            .max(256),
        None => cap,
    }
}

/// The summary's cap when the model has no configured output cap.
const DEFAULT_SUMMARY_TOKENS: u32 = 4096;

/// Tokens a request leaves free in a `window`-token window for the answer (whose cap is
/// `output_cap`), when kin judges whether it fits: a sixteenth of the window, so that small
/// windows keep most of their room for the conversation.
pub(crate) fn output_reserve(window: u64, output_cap: u32) -> u64 {
    (window / 16).min(u64::from(output_cap))
}

/// The smallest summary worth asking for, and the fewest tokens a compaction must save.
pub(super) const MIN_SUMMARY_TOKENS: u64 = 64;

/// What bounds a compaction of a `window`-token window: the `reserve` kept for the answer, the
/// summary's own `cap`, and the `current` request's tokens it is to shrink.
#[derive(Debug, Clone, Copy)]
pub(super) struct RoomBounds {
    pub(super) window: u64,
    pub(super) reserve: u64,
    pub(super) cap: u32,
    pub(super) current: u64,
}

/// What stays of the request however much is compacted, when that leaves no room for a
/// summary and the answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NoRoom {
    /// Tokens of the system prompt and the tool schemas.
    pub(crate) fixed: u64,
    /// Tokens of what a compaction keeps (the running turn's prompt and latest steps).
    pub(crate) kept: u64,
    /// Tokens kept free for the answer.
    pub(crate) reserve: u64,
    pub(crate) window: u64,
}

impl NoRoom {
    /// What to tell the user, once: the figures and what to change.
    pub(crate) fn advice(&self) -> String {
        format!(
            "Compaction cannot make room in this model's context window: the system prompt and \
             tool definitions take {} of its {} tokens, and with the current turn the request \
             would still be {} tokens, leaving too little for a summary and the {} tokens kept \
             for the answer. Give the model a larger window (for llama-server, `-c 16384` or \
             more, and `context_window` in kin's config to match), offer fewer tools (fewer MCP \
             servers), or start a new session.",
            self.fixed,
            self.window,
            self.fixed + self.kept,
            self.reserve
        )
    }
}

/// Whether compacting `agent` now helps, and with what summary cap: the compacted request
/// (fixed part, kept messages, a summary at its cap) must be smaller than the current one by
/// a margin and fit the window with the answer's reserve. The cap is what is left of the
/// window, at most half of what the summary replaces. `Ok(None)`: nothing worth summarising
/// yet; `Err`: what a compaction keeps leaves no room for any summary.
pub(super) fn room_check(
    agent: &Agent,
    in_turn: Option<(u32, u32)>,
    bounds: RoomBounds,
) -> Result<Option<u32>, NoRoom> {
    let history = agent.model_history();
    let running = in_turn.map_or(0, |(_, step)| agent.running_prefix(step).len());
    let (summarised, prompt) = match running {
        0 => (agent.completed_prefix().len(), 0),
        running => (running, agent.running_prompt_len()),
    };
    let fixed = agent.context.fixed_tokens();
    let kept_bytes = history.text_len_from(summarised) + prompt;
    let kept = agent.context.estimate(kept_bytes);
    let replaced = agent
        .context
        .estimate(history.text_len_from(0).saturating_sub(kept_bytes));
    // A server that counted more than kin estimates is right: both parts grow in proportion.
    let counted = bounds.current.saturating_sub(fixed);
    let (kept, replaced) = match kept + replaced {
        estimated if estimated > 0 && counted > estimated => {
            let scale = counted as f64 / estimated as f64;
            (
                (kept as f64 * scale) as u64,
                (replaced as f64 * scale) as u64,
            )
        }
        _ => (kept, replaced),
    };
    let left = bounds.window.saturating_sub(bounds.reserve + fixed + kept);
    if left < MIN_SUMMARY_TOKENS {
        return Err(NoRoom {
            fixed,
            kept,
            reserve: bounds.reserve,
            window: bounds.window,
        });
    }
    let cap = u64::from(bounds.cap).min(left).min(replaced / 2);
    let saved = bounds.current.saturating_sub(fixed + kept + cap);
    let worth = summarised > 0 && cap >= MIN_SUMMARY_TOKENS && saved >= MIN_SUMMARY_TOKENS;
    Ok(worth.then(|| u32::try_from(cap).unwrap_or(u32::MAX)))
}

/// How many of a running turn's latest steps an in-turn compaction keeps as they are.
pub(super) const KEEP_STEPS: u32 = 2;

/// The (turn, step) an in-turn compaction before step `step` of turn `turn` summarises
/// through (keeping the turn's prompt and its [`KEEP_STEPS`] latest steps), if the turn has
/// steps enough.
pub(super) fn in_turn_through(turn: u32, step: u32) -> Option<(u32, u32)> {
    let through = step
        .checked_sub(1 + KEEP_STEPS)
        .filter(|through| *through >= 1)?;
    Some((turn, through))
}

/// Runs one compaction with `choice`'s model, writing its events through `state`'s log. With
/// `in_turn` (the running turn and a step), it summarises that turn's steps up to there too,
/// when there are any; else only the completed turns. A conversation longer than the window
/// is summarised in pieces, each summary carried into the next piece. The summary's cap is
/// `cap` when the caller weighed the room (else the model's, at most a quarter of the window).
pub(super) async fn compact(
    agent: &Arc<Agent>,
    state: &mut AgentState,
    choice: &ModelChoice,
    (trigger, in_turn, cap): (CompactionTrigger, Option<(u32, u32)>, Option<u32>),
    observe: Observer<'_>,
    cancel: &CancellationToken,
) -> Result<CompactionOutcome, StoreError> {
    let running = in_turn.map(|(turn, step)| (turn, step, agent.running_prefix(step)));
    let (through_turn, through_step, prefix) = match running {
        Some((turn, step, prefix)) if !prefix.is_empty() => (turn, Some(step), prefix),
        _ => (agent.last_completed_turn(), None, agent.completed_prefix()),
    };
    if prefix.is_empty() {
        return Ok(CompactionOutcome::NothingToCompact);
    }
    let compaction_id = uuid::Uuid::new_v4().to_string();
    let emit = |state: &mut AgentState, body: EventBody| -> Result<(), StoreError> {
        let event = state.log.append(body, now_ms())?;
        observe(&event);
        agent.push_event(event);
        Ok(())
    };
    emit(
        state,
        EventBody::CompactionStart(CompactionStart {
            compaction_id: compaction_id.clone(),
            through_turn,
            trigger,
            through_step,
        }),
    )?;
    let window = agent.context.window(choice.profile.context_window);
    let max_tokens = cap.unwrap_or_else(|| summary_cap(choice, window));
    let items: Vec<HistoryItem> = prefix.iter().map(|item| (**item).clone()).collect();
    let pieces = match window {
        Some(window) => {
            // One request when the whole prefix fits beside the instruction and the answer;
            // else pieces, each request holding the last summary, the piece and the
            // instruction, with room left for the answer.
            let room = |summaries: u64| {
                let taken = u64::from(max_tokens) * summaries + INSTRUCTION_TOKENS;
                agent.context.estimate_bytes(window.saturating_sub(taken))
            };
            let bytes: usize = items.iter().map(HistoryItem::text_len).sum();
            match bytes <= room(1) {
                true => vec![items],
                false => pieces::split(items, room(2)),
            }
        }
        None => vec![items],
    };
    if pieces.len() > 1 {
        tracing::info!(
            session = %agent.id,
            pieces = pieces.len(),
            "the conversation is longer than the window: summarising it in pieces"
        );
    }
    let mut summary: Option<String> = None;
    let mut spent = Spent::default();
    let mut failure = None;
    for piece in pieces {
        let mut items = Vec::with_capacity(piece.len() + 2);
        if let Some(summary) = &summary {
            items.push(HistoryItem::User(vec![UserPart::Text {
                text: format!("{SUMMARY_PREFIX}\n\n{summary}"),
            }]));
        }
        items.extend(piece);
        match summarise(agent, choice, items, max_tokens, cancel, &mut spent).await {
            Ok(text) => summary = Some(text),
            Err(reason) => {
                failure = Some(reason);
                break;
            }
        }
    }
    let summary = summary.unwrap_or_default();
    let cancelled = cancel.is_cancelled();
    // The calls count against budgets as a turn's calls do; estimated when not reported.
    let Spent { usage, estimated } = spent;
    let end = CompactionEnd {
        compaction_id,
        summary: failure.is_none().then(|| summary.clone()),
        error: failure.clone(),
        usage: usage.clone(),
        estimated_tokens: estimated,
    };
    let tokens = end.tokens();
    emit(state, EventBody::CompactionEnd(end))?;
    state.log.flush()?;
    let cost = match (&usage, &choice.profile.prices) {
        (Some(usage), Some(prices)) => prices.cost(usage),
        _ => 0.0,
    };
    agent.context.add_cost(cost);
    agent.watch.spend(tokens, cost);
    Ok(match failure {
        _ if cancelled => CompactionOutcome::Cancelled,
        Some(reason) => CompactionOutcome::Failed { reason },
        None => {
            let history = agent.model_history();
            let used = agent.context.request_tokens(history.text_len_from(0));
            agent.context.set_used(used, history.len());
            CompactionOutcome::Compacted {
                through_turn,
                summary,
            }
        }
    })
}

/// Tokens of the instruction and the message framing of a compaction request.
const INSTRUCTION_TOKENS: u64 = 256;

/// Asked instead when a summary was cut at the output limit.
const SHORTER_INSTRUCTION: &str = "Your last summary was cut off at the output limit. Write a \
shorter one: the same points, tersely, well under the limit. Answer with the summary only.";

/// What a compaction's calls spent: the usage the endpoint reported, and kin's estimate of
/// the calls it reported none for.
#[derive(Default)]
struct Spent {
    usage: Option<Usage>,
    estimated: Option<u64>,
}

impl Spent {
    /// Adds one call: its reported `usage`, else an estimate of its `bytes` of request and
    /// answer.
    fn add(&mut self, agent: &Agent, usage: Option<Usage>, bytes: usize) {
        let Some(usage) = usage else {
            let estimate = agent.context.estimate(bytes);
            *self.estimated.get_or_insert(0) += estimate;
            return;
        };
        let total = self.usage.get_or_insert_with(Usage::default);
        total.input_tokens += usage.input_tokens;
        total.output_tokens += usage.output_tokens;
        if let Some(cached) = usage.cache_read_tokens {
            *total.cache_read_tokens.get_or_insert(0) += cached;
        }
    }
}

/// One summary of `items`: asked once, and once more for a shorter one when the first was
/// cut at the output limit (a cut summary is never kept). What the calls spent is added to
/// `spent`, whether they succeed or fail.
async fn summarise(
    agent: &Arc<Agent>,
    choice: &ModelChoice,
    items: Vec<HistoryItem>,
    max_tokens: u32,
    cancel: &CancellationToken,
    spent: &mut Spent,
) -> Result<String, String> {
    for instruction in [COMPACTION_INSTRUCTION, SHORTER_INSTRUCTION] {
        let mut items = items.clone();
        items.push(HistoryItem::User(vec![UserPart::Text {
            text: instruction.into(),
        }]));
        let request_len: usize = items.iter().map(HistoryItem::text_len).sum();
        let request = ModelRequest {
            session_id: agent.id.clone(),
            cwd: Some(agent.cwd.clone()),
            system: String::new(),
            preamble: String::new(),
            history: ModelHistory::from(items),
            tools: Vec::new(),
            max_tokens: Some(max_tokens),
            blobs: Some(agent.blob_dir()),
        };
        let call = one_call(choice, request, cancel).await;
        spent.add(agent, call.usage, request_len + call.text.len());
        if let Some(reason) = call.failure {
            return Err(reason);
        }
        let summary = call.text.trim().to_owned();
        if call.cut {
            tracing::info!(session = %agent.id, max_tokens, "the summary was cut at the output limit");
            continue;
        }
        if summary.is_empty() {
            return Err("the model wrote an empty summary".to_owned());
        }
        return Ok(summary);
    }
    Err(format!(
        "the summary was cut at its output limit of {max_tokens} tokens twice"
    ))
}

/// What one summary call came to.
struct SummaryCall {
    text: String,
    usage: Option<Usage>,
    failure: Option<String>,
    /// The model stopped at the output limit.
    cut: bool,
}

async fn one_call(
    choice: &ModelChoice,
    request: ModelRequest,
    cancel: &CancellationToken,
) -> SummaryCall {
    let mut stream = choice.model.stream(request);
    let mut call = SummaryCall {
        text: String::new(),
        usage: None,
        failure: None,
        cut: false,
    };
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                call.failure = Some("cancelled".to_owned());
                break;
            }
            next = stream.next() => next,
        };
        match next {
            Some(Ok(Chunk::TextDelta { text, .. })) => {
                call.text.push_str(&text);
                if call.text.len() > MAX_SUMMARY_BYTES {
                    call.failure = Some(format!(
                        "the summary passed {MAX_SUMMARY_BYTES} bytes (the model did not stop)"
                    ));
                    break;
                }
            }
            Some(Ok(Chunk::Usage { usage })) => call.usage = Some(usage),
            Some(Ok(Chunk::Finish { reason })) => {
                match reason.kind {
                    FinishKind::Error => {
                        call.failure = Some("the model reported an error".to_owned())
                    }
                    FinishKind::MaxTokens => call.cut = true,
                    _ => {}
                }
                break;
            }
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                call.failure = Some(error.to_string());
                break;
            }
            None => {
                call.failure = Some("the model stream ended without a finish chunk".to_owned());
                break;
            }
        }
    }
    call
}

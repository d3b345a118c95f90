//! Compaction: the model summarises the conversation through the last completed turn (inside
//! a long turn, also that turn's older steps, keeping its prompt and latest steps), and the
//! summary replaces those messages in later requests (the fold of `compaction/end`, see
//! `session::history`). The log keeps everything; a compaction that fails changes nothing.

use std::sync::Arc;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::context::estimate_tokens;
use super::{Agent, AgentState, Observer};
use crate::model::{ModelChoice, ModelRequest};
use crate::session::history::{HistoryItem, ModelHistory};
use crate::session::{
    Chunk, CompactionEnd, CompactionStart, CompactionTrigger, EventBody, StoreError, UserPart,
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

/// The tokens of `agent`'s next request: the context after the last call plus an estimate of
/// what came since (the whole conversation, with a system prompt of `system_len` bytes,
/// estimated when nothing was counted yet).
pub(super) fn next_request_tokens(agent: &Agent, system_len: usize) -> u64 {
    let history = agent.model_history();
    let usage = agent.context.usage();
    if usage.counted_items == 0 || usage.counted_items > history.len() {
        estimate_tokens(system_len + history.text_len_from(0))
    } else {
        usage.used + estimate_tokens(history.text_len_from(usage.counted_items))
    }
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
/// when there are any; else only the completed turns.
pub(super) async fn compact(
    agent: &Arc<Agent>,
    state: &mut AgentState,
    choice: &ModelChoice,
    (trigger, in_turn): (CompactionTrigger, Option<(u32, u32)>),
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
    let mut items: Vec<HistoryItem> = prefix.iter().map(|item| (**item).clone()).collect();
    items.push(HistoryItem::User(vec![UserPart::Text {
        text: COMPACTION_INSTRUCTION.into(),
    }]));
    let request_len = items.iter().map(HistoryItem::text_len).sum::<usize>();
    let request = ModelRequest {
        session_id: agent.id.clone(),
        cwd: Some(agent.cwd.clone()),
        system: String::new(),
        history: ModelHistory::from(items),
        tools: Vec::new(),
        max_tokens: choice.profile.max_output,
        blobs: Some(agent.blob_dir()),
    };
    let mut stream = choice.model.stream(request);
    let mut summary = String::new();
    let mut usage = None;
    let mut failure = None;
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                failure = Some("cancelled".to_owned());
                break;
            }
            next = stream.next() => next,
        };
        match next {
            Some(Ok(Chunk::TextDelta { text, .. })) => {
                summary.push_str(&text);
                if summary.len() > MAX_SUMMARY_BYTES {
                    failure = Some(format!(
                        "the summary passed {MAX_SUMMARY_BYTES} bytes (the model did not stop)"
                    ));
                    break;
                }
            }
            Some(Ok(Chunk::Usage { usage: u })) => usage = Some(u),
            Some(Ok(Chunk::Finish { reason })) => {
                if reason.kind == crate::session::FinishKind::Error {
                    failure = Some("the model reported an error".to_owned());
                }
                break;
            }
            Some(Ok(_)) => {}
            Some(Err(error)) => {
                failure = Some(error.to_string());
                break;
            }
            None => {
                failure = Some("the model stream ended without a finish chunk".to_owned());
                break;
            }
        }
    }
    drop(stream);
    let summary = summary.trim().to_owned();
    if failure.is_none() && summary.is_empty() {
        failure = Some("the model wrote an empty summary".to_owned());
    }
    let cancelled = cancel.is_cancelled();
    // The call counts against budgets as a turn's calls do; estimated when not reported.
    let estimated_tokens = usage
        .is_none()
        .then(|| estimate_tokens(request_len + summary.len()));
    let end = CompactionEnd {
        compaction_id,
        summary: failure.is_none().then(|| summary.clone()),
        error: failure.clone(),
        usage: usage.clone(),
        estimated_tokens,
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
            agent
                .context
                .set_used(estimate_tokens(history.text_len_from(0)), history.len());
            CompactionOutcome::Compacted {
                through_turn,
                summary,
            }
        }
    })
}

//! One turn: user message, then steps (model call, tool calls) until the model stops.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

mod calls;

use super::argument_cap::ArgumentCap;
use super::compact::{compact, CompactionOutcome};
use super::context::tool_schema_bytes;
use super::lean::lean_specs;
use super::{
    permissions, workspace_preamble, Agent, AgentState, MessageAssembler, Observer, StopReason,
    TurnDeps, TurnError,
};
use crate::model::{ModelChoice, ModelError, ModelRequest, ToolSpec};
use crate::session::*;
use crate::time::now_ms;
use crate::tools::SpecScope;
use calls::PlannedCall;
use window_question::WindowQuestion;

/// How one step ended.
enum StepEnd {
    /// The model asked for tools; their results are in the log; call the model again.
    Continue,
    Finished(StopReason),
}

struct Turn<'a> {
    agent: &'a Arc<Agent>,
    state: &'a mut AgentState,
    deps: &'a TurnDeps,
    observe: Observer<'a>,
    cancel: &'a CancellationToken,
    turn: u32,
    /// A tool call ended as cancelled (e.g. its permission prompt was dismissed): the turn stops
    /// after the current step, as if cancelled.
    tool_cancelled: bool,
    /// A compaction ran this turn (another waits for the next turn unless a request would
    /// not fit).
    compacted: bool,
    /// The built-in tools' specs, made once per turn.
    builtin_specs: Vec<ToolSpec>,
    /// Their lean form, made the first time a step goes lean.
    lean_builtin: Option<Vec<ToolSpec>>,
    /// Where the session works, as its requests say (see `system::workspace_preamble`): made
    /// once per turn, since the tools' notes may read files in the cwd (the agent definitions
    /// `subagent` can run).
    preamble: String,
}

/// The system prompt and the tools of one request.
struct FixedPart {
    system: String,
    tools: Vec<ToolSpec>,
    /// Whether this is the lean form (see `agent::lean`).
    lean: bool,
}

impl FixedPart {
    /// Bytes of the request's fixed part with the workspace `preamble`.
    fn bytes(&self, preamble: &str) -> usize {
        self.system.len() + preamble.len() + tool_schema_bytes(&self.tools)
    }
}

pub(super) async fn run(
    agent: &Arc<Agent>,
    state: &mut AgentState,
    prompt: Vec<UserPart>,
    deps: &TurnDeps,
    observe: Observer<'_>,
    cancel: &CancellationToken,
) -> Result<StopReason, TurnError> {
    state.last_turn += 1;
    let turn = state.last_turn;
    let scope = SpecScope {
        cwd: &agent.cwd,
        fresh_since: agent
            .header
            .parent_session
            .is_none()
            .then(std::time::Instant::now),
    };
    let mut this = Turn {
        agent,
        state,
        deps,
        observe,
        cancel,
        turn,
        tool_cancelled: false,
        compacted: false,
        builtin_specs: agent.tools.specs(),
        lean_builtin: None,
        preamble: workspace_preamble(agent, &agent.tools.workspace_notes(scope)),
    };
    agent.context.begin_turn();
    let result = this.run(prompt).await;
    // A limit that cancelled the turn names the reason it ended with.
    let result = match agent.watch.take_cause() {
        Some(cause) if cancel.is_cancelled() => Ok(cause),
        _ => result,
    };
    let result = match this.log_permission_records(None) {
        Ok(()) => result,
        Err(error) => result.and(Err(error.into())),
    };
    let reason = match &result {
        Ok(outcome) => end_reason(*outcome),
        Err(TurnError::Model { step, error, .. }) => TurnEndReason::Error {
            step: Some(*step),
            message: Some(error.to_string()),
            // The fold leaves such a turn out of later requests (see `session::history`).
            code: matches!(error, ModelError::ContextOverflow(_))
                .then(|| crate::session::history::CONTEXT_OVERFLOW_CODE.to_owned()),
            failure: None,
        },
        Err(error) => TurnEndReason::Error {
            step: None,
            message: Some(error.to_string()),
            code: None,
            failure: None,
        },
    };
    let priced = this.choice().profile.prices.is_some();
    let usage = agent.context.turn_usage(priced);
    let ended = this
        .emit(EventBody::TurnEnd(TurnEnd {
            turn,
            reason,
            usage,
        }))
        .and_then(|()| this.state.log.sync());
    match (result, ended) {
        (Ok(outcome), Ok(())) => Ok(outcome),
        (Ok(_), Err(error)) => Err(error.into()),
        (Err(error), _) => Err(error),
    }
}

/// The log's `turn/end` reason for a turn that ran to an end.
pub(crate) fn end_reason(stop: StopReason) -> TurnEndReason {
    match stop {
        StopReason::Completed => TurnEndReason::Completed,
        StopReason::MaxTokens => TurnEndReason::MaxTokens,
        StopReason::Refusal => TurnEndReason::Refusal,
        StopReason::Cancelled => TurnEndReason::Aborted,
        StopReason::MaxSteps => TurnEndReason::MaxSteps,
        StopReason::TimedOut => TurnEndReason::TimedOut,
        StopReason::BudgetExhausted => TurnEndReason::BudgetExhausted,
        StopReason::Error => TurnEndReason::Error {
            step: None,
            message: None,
            code: None,
            failure: None,
        },
    }
}

impl Turn<'_> {
    fn push(&mut self, event: Event) {
        (self.observe)(&event);
        self.agent.push_event(event);
    }

    fn emit(&mut self, body: EventBody) -> Result<(), StoreError> {
        let event = self.state.log.append(body, now_ms())?;
        self.push(event);
        Ok(())
    }

    /// Writes the permission changes queued since the last call; `at` is the (turn, step) of
    /// the tool call being run, if any.
    fn log_permission_records(&mut self, at: Option<(u32, u32)>) -> Result<(), StoreError> {
        for record in self.agent.permissions.take_unlogged() {
            self.emit(permissions::event(record, at))?;
        }
        Ok(())
    }

    fn emit_surface(
        &mut self,
        body: EventBody,
        sources: Option<Vec<u64>>,
    ) -> Result<u64, StoreError> {
        let event = self.state.log.append_surface(body, now_ms(), sources)?;
        let seq = event.seq;
        self.push(event);
        Ok(seq)
    }

    async fn run(&mut self, prompt: Vec<UserPart>) -> Result<StopReason, TurnError> {
        let turn = self.turn;
        self.log_permission_records(None)?;
        self.emit(EventBody::TurnStart(TurnStart {
            turn,
            trigger: json!({"kind": "message", "source": {"kind": "user"}}),
        }))?;
        let first_text: String = prompt
            .iter()
            .filter_map(|part| match part {
                UserPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" ");
        let message_seq = self.emit_surface(
            EventBody::UserMessage(UserMessage {
                content: prompt,
                source: json!({"kind": "user"}),
                role: "user".into(),
                id: uuid::Uuid::new_v4().to_string(),
            }),
            None,
        )?;
        if !self.state.has_title {
            let title = super::fallback_title(&first_text);
            if !title.is_empty() {
                self.state.has_title = true;
                self.emit(EventBody::SessionTitle(SessionTitle {
                    title,
                    message_seqs: vec![message_seq],
                    source: json!({"kind": "fallback"}),
                }))?;
            }
        }
        let mut records = self.agent.take_records();
        records.extend(self.agent.take_pending());
        if !records.is_empty() {
            for body in records {
                self.emit(body)?;
            }
            // On disk at once: a child that crashes in its first step stays continuable.
            self.state.log.flush()?;
        }
        let (mut compacted_on_overflow, mut retried_lean) = (false, false);
        // At most one threshold compaction a turn (more only when a request would not fit
        // the window); a failed one is not retried this turn.
        let mut failed = false;
        for step in 1..=self.deps.max_steps {
            if self.cancel.is_cancelled() {
                return Ok(StopReason::Cancelled);
            }
            self.deliver_pending()?;
            let choice = self.choice();
            let mut question = WindowQuestion::ask(&*choice.model, choice.profile.context_window);
            if let WindowQuestion::Answered(found) = &question {
                self.agent.context.set_server_window(*found);
            }
            let window = self.agent.context.window(choice.profile.context_window);
            let fixed = self.fixed_part(window);
            let sent_lean = fixed.lean;
            self.agent
                .context
                .set_fixed_bytes(fixed.bytes(&self.preamble));
            if !failed {
                let outcome = self.compact_if_due(&choice, window, step).await?;
                failed = matches!(outcome, Some(CompactionOutcome::Failed { .. }));
            }
            self.emit(EventBody::StepStart(StepRef { turn, step }))?;
            let result = self.step(step, &choice, fixed, window, &mut question).await;
            // Asked beside the call (see `step`): in by now, also when the call failed.
            if let Some(found) = question.answer(self.cancel).await {
                self.agent.context.set_server_window(found);
            }
            self.emit(EventBody::StepEnd(StepRef { turn, step }))?;
            self.state.log.flush()?;
            let result = match result {
                // Too long for the endpoint: compact once and call again, when compacting can
                // make room; else the turn fails, and its prompt is left out of later requests.
                Err(TurnError::Model { error, .. }) if error.is_context_overflow() => {
                    let (window, mut current) = self.learn_from_overflow(window, &error);
                    // Sent whole while the window was unknown: the lean form may fit; if it
                    // does not, the compaction is weighed with it (the next step sends it).
                    let lean = self.fixed_part(window);
                    if !sent_lean && !retried_lean && lean.lean {
                        retried_lean = true;
                        self.agent
                            .context
                            .set_fixed_bytes(lean.bytes(&self.preamble));
                        if self.next_fits(&choice, window) {
                            continue;
                        }
                        current = None;
                    }
                    let (room, in_turn) = self.room_after_overflow(&choice, window, step, current);
                    if !compacted_on_overflow {
                        if let Ok(Some(cap)) = room {
                            compacted_on_overflow = true;
                            let trigger = CompactionTrigger::Overflow;
                            if let CompactionOutcome::Compacted { .. } =
                                self.compact(&choice, trigger, in_turn, Some(cap)).await?
                            {
                                continue;
                            }
                        }
                    }
                    if let Err(no_room) = &room {
                        self.tell_no_room(no_room);
                    }
                    let error = self.overflow_error(&error, window);
                    Err(TurnError::Model { turn, step, error })
                }
                result => result,
            };
            match result? {
                // A child at its budget stops after the step that reached it.
                StepEnd::Continue if self.agent.watch.over_budget() => {
                    return Ok(StopReason::BudgetExhausted)
                }
                StepEnd::Continue => {}
                // A message steered in before the turn closed still gets its answer.
                // (Not after a structured result: that ends the run.)
                StepEnd::Finished(StopReason::Completed)
                    if !self.structured_captured()
                        && !self.agent.close_steering_unless_waiting() => {}
                StepEnd::Finished(outcome) => return Ok(outcome),
            }
        }
        Ok(StopReason::MaxSteps)
    }

    fn structured_captured(&self) -> bool {
        self.agent
            .structured
            .as_ref()
            .is_some_and(|s| s.is_captured())
    }

    /// The model of the next call: the configured one the session runs on, else the deps'.
    fn choice(&self) -> ModelChoice {
        match self.agent.model_choice(&self.deps.models) {
            Some(choice) => choice.clone(),
            None => ModelChoice {
                profile: self.deps.models.default_choice().profile.clone(),
                model: self.deps.model.clone(),
            },
        }
    }

    /// Compacts the completed turns, and the running turn's steps through `in_turn` when
    /// given and there are any.
    async fn compact(
        &mut self,
        choice: &ModelChoice,
        trigger: CompactionTrigger,
        in_turn: Option<(u32, u32)>,
        cap: Option<u32>,
    ) -> Result<CompactionOutcome, StoreError> {
        let what = (trigger, in_turn, cap);
        let outcome = compact(
            self.agent,
            self.state,
            choice,
            what,
            self.observe,
            self.cancel,
        );
        let outcome = outcome.await?;
        self.compacted |= matches!(outcome, CompactionOutcome::Compacted { .. });
        if let CompactionOutcome::Failed { reason } = &outcome {
            tracing::warn!(session = %self.agent.id, %reason, "compaction failed");
        }
        Ok(outcome)
    }

    /// Writes the records queued for the running turn (`Agent::record`).
    fn write_pending(&mut self) -> Result<(), StoreError> {
        for body in self.agent.take_pending() {
            self.emit(body)?;
        }
        Ok(())
    }

    /// Logs the notices and steering messages that arrived since the last model call, and a
    /// model switch made while the turn ran.
    fn deliver_pending(&mut self) -> Result<(), StoreError> {
        self.write_pending()?;
        if let Some(model) = self.agent.context.take_unlogged_switch() {
            self.emit(super::model_set(model))?;
        }
        for (notice, record) in self.agent.take_inbox() {
            self.emit_surface(EventBody::UserMessage(notice), None)?;
            if let Some(record) = record {
                self.emit(record)?;
            }
        }
        for message in self.agent.take_steering() {
            let turn = self.turn;
            self.emit_surface(
                EventBody::SteeringMessage(SteeringMessage { turn, message }),
                None,
            )?;
        }
        Ok(())
    }

    /// The system prompt and tools of the next request: the agent's own tools, then its MCP
    /// servers' tools as they are now; lean when the full form would crowd `window`.
    fn fixed_part(&mut self, window: Option<u64>) -> FixedPart {
        // MCP tools are read at every step: a server's list may change during the turn.
        let mcp = self.agent.mcp_tools().map(|mcp| mcp.specs());
        let mcp = mcp.unwrap_or_default();
        let full = self.deps.system.len()
            + self.preamble.len()
            + tool_schema_bytes(&self.builtin_specs)
            + tool_schema_bytes(&mcp);
        let fixed_tokens = self.agent.context.estimate(full);
        if !self.deps.lean.applies(fixed_tokens, window) {
            let mut tools = self.builtin_specs.clone();
            tools.extend(mcp);
            let system = self.deps.system.clone();
            return FixedPart {
                system,
                tools,
                lean: false,
            };
        }
        let builtin = &self.builtin_specs;
        let mut tools = self
            .lean_builtin
            .get_or_insert_with(|| lean_specs(builtin))
            .clone();
        tools.extend(lean_specs(&mcp));
        let system = self.deps.lean_system.clone();
        FixedPart {
            system,
            tools,
            lean: true,
        }
    }

    async fn step(
        &mut self,
        step: u32,
        choice: &ModelChoice,
        fixed: FixedPart,
        window: Option<u64>,
        question: &mut WindowQuestion,
    ) -> Result<StepEnd, TurnError> {
        let turn = self.turn;
        let model_error = |error| TurnError::Model { turn, step, error };
        let history = self.agent.model_history();
        let history_len = history.text_len_from(0);
        let (output_cap, cap_source) = choice.output_cap(window);
        let max_tokens = self.agent.options.max_tokens.unwrap_or(output_cap);
        let request = ModelRequest {
            session_id: self.agent.id.clone(),
            cwd: Some(self.agent.cwd.clone()),
            system: fixed.system,
            preamble: self.preamble.clone(),
            history,
            tools: fixed.tools,
            max_tokens: Some(max_tokens),
            blobs: Some(self.agent.blob_dir()),
        };
        let near_window = |tokens: u64| window.is_some_and(|w| tokens * 10 >= w * 9);
        let request_tokens = self.agent.context.request_tokens(history_len);
        let mut stream = choice.model.stream(request);
        let mut message = MessageAssembler::default();
        let mut chunk_seqs = Vec::new();
        let mut argument_cap = ArgumentCap::new(self.deps.tool_argument_bytes);
        let finish = loop {
            let next = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Ok(StepEnd::Finished(StopReason::Cancelled)),
                next = stream.next() => next,
            };
            let chunk = match next {
                Some(Ok(chunk)) => chunk,
                // An empty answer to a request near the window: most likely too long.
                Some(Err(ModelError::EmptyBody { .. })) if near_window(request_tokens) => {
                    return Err(model_error(ModelError::EmptyBody {
                        hint: format!(
                            " (the request was about {request_tokens} tokens of a {}-token \
                             window: an over-long prompt is a common cause)",
                            window.unwrap_or_default()
                        ),
                    }))
                }
                Some(Err(error)) => return Err(model_error(error)),
                None => {
                    return Err(model_error(ModelError::Failed(
                        "the model stream ended without a finish chunk".into(),
                    )))
                }
            };
            let Some(chunk) = argument_cap.filter(chunk) else {
                continue;
            };
            message.push(&chunk);
            let finish = match &chunk {
                Chunk::Finish { reason } => Some(reason.clone()),
                _ => None,
            };
            let event = self.state.log.append(
                EventBody::AssistantChunk(AssistantChunk { turn, step, chunk }),
                now_ms(),
            )?;
            chunk_seqs.push(event.seq);
            self.push(event);
            if let Some(finish) = finish {
                break finish;
            }
        };
        drop(stream);
        // Asked beside the call: its answer is in by now, for the usage and decisions that follow.
        if let Some(found) = question.answer(self.cancel).await {
            self.agent.context.set_server_window(found);
        }
        if finish.kind == FinishKind::Error {
            let detail = finish
                .failure
                .as_ref()
                .map_or_else(|| "the model reported an error".into(), |f| f.to_string());
            return Err(model_error(ModelError::Failed(detail)));
        }
        let mut blocks = message.blocks();
        // Counted before the message is logged: its observers see the figures after it.
        let reply_len: usize = blocks
            .iter()
            .map(|block| crate::session::history::HistoryItem::Assistant(vec![block.clone()]))
            .map(|item| item.text_len())
            .sum();
        let (used, usage) = match &message.usage {
            Some(usage) => {
                let counted = usage.input_tokens;
                tracing::debug!(estimated = request_tokens, counted, "request tokens");
                let fixed = self.agent.context.usage().fixed_bytes;
                self.agent.context.calibrate(fixed, history_len, counted);
                (usage.input_tokens + usage.output_tokens, usage.clone())
            }
            // No usage from the endpoint: estimated from what was sent and received, never 0.
            None => {
                let estimate = request_tokens + self.agent.context.estimate(reply_len);
                // Logged in the turn's `turn/end`, so a budget still counts it after a restart.
                self.agent.context.record_estimate(estimate);
                (estimate, Usage::default())
            }
        };
        let items = self.agent.model_history().len() + 1;
        let cost_before = self.agent.context.usage().cost;
        self.agent
            .context
            .record_call(&usage, &choice.profile, used, items);
        let cost = self.agent.context.usage().cost - cost_before;
        self.agent.watch.spend(used, cost);
        let dropped = match finish.kind {
            // Cut at the token limit: the calls may be cut too, so the step owes none.
            FinishKind::MaxTokens => DroppedToolCalls::take_from(&mut blocks),
            _ => None,
        };
        if let Some(dropped) = &dropped {
            let (session, calls) = (&self.agent.id, dropped.calls.len());
            tracing::warn!(%session, turn, step, calls, "tool calls dropped: {}", dropped.reason);
        }
        let calls: Vec<PlannedCall> = blocks
            .iter()
            .filter_map(|block| match block {
                AssistantBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some(PlannedCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: arguments.clone(),
                }),
                _ => None,
            })
            .collect();
        self.emit_surface(
            EventBody::AssistantMessage(Box::new(AssistantMessage {
                turn,
                step,
                message: AssistantMessageBody {
                    role: "assistant".into(),
                    content: blocks,
                    source: json!({
                        "kind": "model",
                        "provider": choice.model.provider(),
                        "model": choice.model.name(),
                    }),
                    id: uuid::Uuid::new_v4().to_string(),
                },
                usage: message.usage.clone(),
                dropped_tool_calls: dropped,
            })),
            Some(chunk_seqs),
        )?;
        if finish.kind == FinishKind::Aborted {
            return Ok(StepEnd::Finished(StopReason::Cancelled));
        }
        if calls.is_empty() && reply_len == 0 {
            tracing::warn!(session = %self.agent.id, turn, step, "the model returned an empty answer");
        }
        if finish.kind == FinishKind::MaxTokens {
            let setting = if self.agent.options.max_tokens.is_some() {
                "the session's own cap"
            } else {
                cap_source
            };
            let text =
                format!("The answer stopped at the output cap of {max_tokens} tokens ({setting}).");
            tracing::info!(session = %self.agent.id, "{text}");
            self.agent.context.note_output_cap(max_tokens, setting);
        }
        self.run_calls(step, &calls, choice.profile.images).await?;
        if self.cancel.is_cancelled() || self.tool_cancelled {
            return Ok(StepEnd::Finished(StopReason::Cancelled));
        }
        if self.structured_captured() {
            // The structured result is in: the run is complete, no further model call.
            return Ok(StepEnd::Finished(StopReason::Completed));
        }
        Ok(match finish.kind {
            _ if !calls.is_empty() => StepEnd::Continue,
            FinishKind::MaxTokens => StepEnd::Finished(StopReason::MaxTokens),
            FinishKind::Refusal => StepEnd::Finished(StopReason::Refusal),
            _ => StepEnd::Finished(StopReason::Completed),
        })
    }
}

mod result_room;
mod room;
#[cfg(test)]
mod tests;
mod window_question;

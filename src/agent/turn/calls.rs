//! The tool calls of one model step. In the model's order they are split into runs: calls
//! that may overlap (each tool says so from its arguments, [`crate::tools::Tool::overlaps`])
//! run side by side, at most `max_parallel` at once; any other call runs alone, after
//! everything before it and before anything after it.
//!
//! What the log and the model see does not depend on that: every call's `tool/call` and
//! `tool/result` are committed in the model's order (a result that is in early waits for
//! those before it), so the log and the next request are what a run one call at a time
//! writes. Only the observer (the editor's live updates) sees a side-by-side run as it
//! happens: each call shown started before any runs, each result as soon as it is in.

use std::ops::Range;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::Turn;
use crate::agent::{Agent, Observer, TurnDeps, TurnError};
use crate::session::*;
use crate::time::now_ms;
use crate::tools::{ToolContext, ToolOutput};

/// One tool call the model asked for.
pub(super) struct PlannedCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) arguments: String,
}

/// A call's outcome, ready to be committed.
struct Finished {
    result: ToolResult,
    cancelled: bool,
    /// The message of a failure the turn cannot go on from.
    fatal: Option<String>,
    /// Whether the tool returned images.
    images: bool,
}

/// The runs of `calls`, in order: a maximal stretch of calls that may overlap, or one call.
fn runs(overlaps: &[bool]) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for (index, &overlap) in overlaps.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if overlap && overlaps[run.start] => run.end = index + 1,
            _ => runs.push(index..index + 1),
        }
    }
    runs
}

impl Turn<'_> {
    /// Runs the calls of `step`; each `tool/call` gets its `tool/result`, also when cancelled.
    pub(super) async fn run_calls(
        &mut self,
        step: u32,
        calls: &[PlannedCall],
        model_takes_images: bool,
    ) -> Result<(), TurnError> {
        let overlaps: Vec<bool> = calls
            .iter()
            .map(|call| {
                let tools = self.agent.tools_for(&call.name);
                tools.overlaps(&call.name, &call.arguments)
            })
            .collect();
        for run in runs(&overlaps) {
            let run = &calls[run];
            match run {
                [call] => self.run_alone(step, call, model_takes_images).await?,
                _ => self.run_side_by_side(step, run, model_takes_images).await?,
            }
        }
        Ok(())
    }

    fn call_body(&self, step: u32, call: &PlannedCall) -> EventBody {
        EventBody::ToolCall(ToolCall {
            turn: self.turn,
            step,
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        })
    }

    /// The answer a call gets without running (the turn is over, its arguments are too
    /// large, the structured result is in), if any.
    fn answer_without_running(&self, call: &PlannedCall) -> Option<ToolOutput> {
        if self.cancel.is_cancelled() || self.tool_cancelled {
            return Some(ToolOutput::cancelled());
        }
        if let Some(refused) = crate::agent::argument_cap::refused(&call.arguments) {
            return Some(ToolOutput::error(
                "ArgumentsTooLarge",
                "ARGUMENTS_TOO_LARGE",
                refused.message(),
            ));
        }
        self.structured_captured()
            .then(|| crate::agent::StructuredCapture::refusal(&call.name))
    }

    /// A call that runs alone: its `tool/call` is logged before it runs, and the answers to
    /// its permission prompts as they come.
    async fn run_alone(
        &mut self,
        step: u32,
        call: &PlannedCall,
        model_takes_images: bool,
    ) -> Result<(), TurnError> {
        let turn = self.turn;
        let body = self.call_body(step, call);
        let logged = self.state.log.append(body, now_ms())?;
        let call_seq = logged.seq;
        self.push(logged);
        let output = match self.answer_without_running(call) {
            Some(output) => output,
            None => {
                let agent = self.agent;
                let running = execute(agent, self.deps, self.cancel.child_token(), call);
                tokio::pin!(running);
                loop {
                    tokio::select! {
                        output = &mut running => break output,
                        _ = agent.permissions.changed() => {
                            self.log_permission_records(Some((turn, step)))?;
                        }
                    }
                }
            }
        };
        let done = finish(self.agent, turn, step, call, output).await;
        self.commit(step, call, call_seq, done, model_takes_images, false)
    }

    /// Calls that may overlap: all shown started at once, run at most `max_parallel` at a
    /// time, committed in the model's order. A call that ends cancelled on its own (its
    /// permission prompt was dismissed) cancels the rest of the run, as the calls after it
    /// would not have run one at a time.
    async fn run_side_by_side(
        &mut self,
        step: u32,
        calls: &[PlannedCall],
        model_takes_images: bool,
    ) -> Result<(), TurnError> {
        let turn = self.turn;
        for call in calls {
            preview(self.observe, self.call_body(step, call));
        }
        let run_cancel = self.cancel.child_token();
        let answers: Vec<Option<ToolOutput>> = calls
            .iter()
            .map(|call| self.answer_without_running(call))
            .collect();
        let mut running: Vec<BoxFuture<'_, Finished>> = Vec::with_capacity(calls.len());
        for (call, answer) in calls.iter().zip(answers) {
            let side = Side {
                agent: self.agent,
                deps: self.deps,
                observe: self.observe,
                turn_cancel: self.cancel,
                run_cancel: run_cancel.clone(),
                turn,
                step,
            };
            running.push(side.run(call, answer).boxed());
        }
        let parallel = self.deps.max_parallel.max(1);
        let mut finished = futures::stream::iter(running).buffered(parallel);
        let mut failure = None;
        for call in calls {
            // Every started call settles before the turn goes on, even after a failure.
            let Some(done) = finished.next().await else {
                break;
            };
            if failure.is_some() {
                continue;
            }
            let committed = self
                .state
                .log
                .append(self.call_body(step, call), now_ms())
                .map_err(TurnError::from)
                .and_then(|logged| {
                    let seq = logged.seq;
                    self.agent.push_event(logged);
                    self.commit(step, call, seq, done, model_takes_images, true)
                });
            if let Err(error) = committed {
                run_cancel.cancel();
                failure = Some(error);
            }
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Logs a call's outcome after its `tool/call` (seq `call_seq`): the permission answers
    /// given meanwhile, the result, and what the call recorded (a task it started). `shown`:
    /// the observer saw the result already (a side-by-side call's, as it ended).
    fn commit(
        &mut self,
        step: u32,
        call: &PlannedCall,
        call_seq: u64,
        done: Finished,
        model_takes_images: bool,
        shown: bool,
    ) -> Result<(), TurnError> {
        let Finished {
            result,
            cancelled,
            fatal,
            images,
        } = done;
        self.log_permission_records(Some((self.turn, step)))?;
        if cancelled && !self.cancel.is_cancelled() {
            self.tool_cancelled = true;
        }
        if images && !model_takes_images && !self.state.tool_images_told {
            self.state.tool_images_told = true;
            if let Some(client) = &self.deps.client {
                client.warn_user(&format!(
                    "The model does not take images: the images `{}` returned are given to it \
                     as placeholders",
                    call.name
                ));
            }
        }
        let mut result = result;
        self.fit_result(&call.name, &mut result);
        let body = EventBody::ToolResult(Box::new(result));
        let logged = self
            .state
            .log
            .append_surface(body, now_ms(), Some(vec![call_seq]))?;
        if shown {
            self.agent.push_event(logged);
        } else {
            self.push(logged);
        }
        self.write_pending()?;
        if let Some(message) = fatal {
            return Err(TurnError::Tool {
                name: call.name.clone(),
                message,
            });
        }
        Ok(())
    }
}

/// What one call of a side-by-side run needs.
struct Side<'a> {
    agent: &'a Arc<Agent>,
    deps: &'a TurnDeps,
    observe: Observer<'a>,
    turn_cancel: &'a CancellationToken,
    /// Cancels the whole run.
    run_cancel: CancellationToken,
    turn: u32,
    step: u32,
}

impl<'a> Side<'a> {
    async fn run(self, call: &'a PlannedCall, answer: Option<ToolOutput>) -> Finished {
        let output = match answer {
            Some(output) => output,
            None => execute(self.agent, self.deps, self.run_cancel.child_token(), call).await,
        };
        if output.is_cancelled() && !self.turn_cancel.is_cancelled() {
            self.run_cancel.cancel();
        }
        let done = finish(self.agent, self.turn, self.step, call, output).await;
        preview(
            self.observe,
            EventBody::ToolResult(Box::new(done.result.clone())),
        );
        done
    }
}

/// Hands the observer an event that is not in the log yet (its `seq` is 0: the log gives it
/// one when the call is committed in the model's order).
fn preview(observe: Observer<'_>, body: EventBody) {
    observe(&Event {
        seq: 0,
        time: now_ms(),
        body,
        source_event_seqs: None,
        surface_op: None,
    });
}

/// Runs one call of `agent`'s under `cancel`.
async fn execute(
    agent: &Arc<Agent>,
    deps: &TurnDeps,
    cancel: CancellationToken,
    call: &PlannedCall,
) -> ToolOutput {
    let cx = ToolContext {
        session_id: agent.id.clone().into(),
        cwd: agent.cwd.clone(),
        cancel,
        call_id: call.id.clone(),
        roots: agent.roots.clone(),
        permissions: agent.permissions.clone(),
        client: deps.client.clone(),
        files: agent.files.clone(),
        child_env: deps.child_env.clone(),
        private: deps.private.clone(),
    };
    let tools = agent.tools_for(&call.name);
    tools.call(&call.name, &call.arguments, cx).await
}

/// `call`'s outcome with its `tool/result` (the images stored beside the log first).
async fn finish(
    agent: &Agent,
    turn: u32,
    step: u32,
    call: &PlannedCall,
    output: ToolOutput,
) -> Finished {
    let (cancelled, images) = (output.is_cancelled(), !output.images.is_empty());
    if output.is_error {
        let first = output.text.lines().next().unwrap_or_default();
        let (session, tool) = (&agent.id, &call.name);
        tracing::info!(%session, %tool, error = %first, "tool call failed");
    }
    // Logged like any result first; then the turn ends.
    let fatal = output.is_fatal().then(|| output.text.clone());
    let mut content = vec![ToolResultContent::Text { text: output.text }];
    content.extend(crate::agent::tool_images::store(agent.blob_dir(), output.images).await);
    let result = ToolResult {
        turn,
        step,
        message: ToolResultMessage {
            source: json!({"kind": "tool", "callId": call.id}),
            content: vec![ToolResultPart {
                kind: "tool-result".into(),
                tool_call_id: call.id.clone(),
                content,
                is_error: output.is_error,
            }],
            role: "user".into(),
            id: uuid::Uuid::new_v4().to_string(),
        },
        error: output.error.map(|error| ToolResultError {
            name: error.name,
            code: error.code,
        }),
        meta: output.display.to_meta(),
    };
    Finished {
        result,
        cancelled,
        fatal,
        images,
    }
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn overlapping_neighbours_form_one_run_and_others_run_alone() {
        assert_eq!(runs(&[]), Vec::<std::ops::Range<usize>>::new());
        assert_eq!(runs(&[true, true, false, true]), [0..2, 2..3, 3..4]);
        assert_eq!(runs(&[false, false]), [0..1, 1..2]);
        assert_eq!(runs(&[true, false, true, true, true]), [0..1, 1..2, 2..5]);
    }
}

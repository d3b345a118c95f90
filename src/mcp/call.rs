//! One call of a server's tool: sent, its progress shown, cancelled at the server when the
//! user or kin's time limit stops it. A server on the stateless revision (2026-07-28) that
//! needs the user's input answers `input_required` instead of asking mid-call; kin puts its
//! questions to the user ([`super::elicit`]) and sends the call again with the answers and the
//! server's state, a few rounds at most.

use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, InputRequiredResult, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::elicit::Asker;
use super::progress::{self, Throttle};
use super::server::{CallOutcome, Connected, Server, State};
use super::signin::{token_refusal, ScopeRefusal};

/// How long telling a server that a call was cancelled may take.
const CANCEL_NOTICE_TIMEOUT: Duration = Duration::from_secs(1);
/// The most `input_required` rounds one call may take.
const MAX_INPUT_ROUNDS: usize = 8;

/// What one round of a call came to.
enum Round {
    Done(CallOutcome),
    /// The server needs input first (stateless revision).
    Input(InputRequiredResult),
    /// The server refused kin's token (for want of a scope, or at all).
    Refused(ScopeRefusal),
}

impl Server {
    /// Calls `tool` with `arguments` for `asker`'s tool call; a trip of its cancel token sends
    /// MCP cancellation. The server's progress reports go to `show`, throttled (see
    /// [`progress`]); its questions to `asker`'s user.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, Value>>,
        asker: Asker,
        show: &(dyn Fn(&str) + Send + Sync),
    ) -> CallOutcome {
        let connected = match self.state() {
            State::Ready(connected) => connected,
            State::Starting => return CallOutcome::Failed("it is still starting".into()),
            State::Down { reason, .. } | State::Refused { reason } => {
                return CallOutcome::Failed(format!("it is not available ({reason})"))
            }
            State::Login { address } => {
                return CallOutcome::Failed(format!(
                    "it waits for a login; the user can open {address} to log in"
                ))
            }
        };
        // The server's questions during the call (revisions with `initialize`) go to its user.
        let _asking = connected.askers.open(asker.clone());
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let deadline = Instant::now() + self.call_timeout;
        // A call refused for want of scope gets one login for it (a step-up), then is sent again.
        let mut stepped_up = false;
        for _ in 0..MAX_INPUT_ROUNDS {
            let seen = match &self.step_up {
                Some(step_up) => step_up.generation().await,
                None => 0,
            };
            let round = self
                .round(&connected, params.clone(), &asker.cancel, deadline, show)
                .await;
            let needed = match round {
                Round::Done(outcome) => return outcome,
                Round::Input(needed) => needed,
                Round::Refused(refusal) => {
                    let answered = self
                        .step_up
                        .as_ref()
                        .filter(|step_up| !stepped_up && step_up.answers(&refusal));
                    let Some(step_up) = answered else {
                        return CallOutcome::Failed(match refusal.insufficient {
                            true => format!(
                                "it refused the call: it needs more access than kin's credentials give ({})",
                                refusal.wanted()
                            ),
                            false => refusal.error,
                        });
                    };
                    stepped_up = true;
                    tokio::select! {
                        _ = asker.cancel.cancelled() => return CallOutcome::Cancelled,
                        done = step_up.run(&refusal, seen) => match done {
                            Ok(()) => continue,
                            Err(why) => return CallOutcome::Failed(why),
                        },
                    }
                }
            };
            let requests = needed.input_requests.unwrap_or_default();
            if requests.is_empty() && needed.request_state.is_none() {
                return CallOutcome::Failed("it asked for input without saying what".into());
            }
            let answers = tokio::select! {
                _ = asker.cancel.cancelled() => return CallOutcome::Cancelled,
                answers = super::elicit::fulfil(&self.name, &asker, requests) => answers,
            };
            params.input_responses = match answers {
                Ok(answers) => (!answers.is_empty()).then_some(answers),
                Err(why) => return CallOutcome::Failed(why),
            };
            params.request_state = needed.request_state;
        }
        CallOutcome::Failed(format!(
            "it still asked for input after {MAX_INPUT_ROUNDS} rounds"
        ))
    }

    /// Sends the call once and waits for its answer, showing its progress meanwhile.
    async fn round(
        &self,
        connected: &Connected,
        params: CallToolRequestParams,
        cancel: &CancellationToken,
        deadline: Instant,
        show: &(dyn Fn(&str) + Send + Sync),
    ) -> Round {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let sent = connected
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options());
        let mut handle = tokio::select! {
            _ = cancel.cancelled() => return Round::Done(CallOutcome::Cancelled),
            sent = sent => match sent {
                Ok(handle) => handle,
                Err(error) => return failed(error),
            },
        };
        let mut route = connected.progress.open(handle.progress_token.clone());
        let mut throttle = Throttle::default();
        // rmcp hands notifications over on tasks of their own, so they may come out of order;
        // progress only grows, so an older report is dropped.
        let mut highest = f64::NEG_INFINITY;
        loop {
            let due = throttle.due();
            let held_due = async {
                match due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => {
                    // Tells the server (`notifications/cancelled`); a server that stopped
                    // reading does not hold up the cancellation.
                    let told = handle.cancel(Some("cancelled by the user".into()));
                    let _ = tokio::time::timeout(CANCEL_NOTICE_TIMEOUT, told).await;
                    return Round::Done(CallOutcome::Cancelled);
                }
                () = tokio::time::sleep_until(deadline) => {
                    let told = handle.cancel(Some("kin's time limit for the call passed".into()));
                    let _ = tokio::time::timeout(CANCEL_NOTICE_TIMEOUT, told).await;
                    return Round::Done(CallOutcome::Failed(format!(
                        "it did not answer within {} s (the server's `call_timeout`)",
                        self.call_timeout.as_secs_f64()
                    )));
                }
                answer = &mut handle.rx => {
                    if let Some(text) = throttle.release(Instant::now()) {
                        show(&text);
                    }
                    return match answer {
                        Ok(Ok(ServerResult::CallToolResult(result))) => {
                            Round::Done(match serde_json::to_value(&result) {
                                Ok(value) => CallOutcome::Result(value),
                                Err(error) => CallOutcome::Failed(error.to_string()),
                            })
                        }
                        Ok(Ok(ServerResult::InputRequiredResult(needed))) => Round::Input(needed),
                        Ok(Ok(_)) => Round::Done(CallOutcome::Failed(
                            "it answered with something other than a tool result".into(),
                        )),
                        Ok(Err(error)) => failed(error),
                        Err(_) => Round::Done(CallOutcome::Failed("the connection closed".into())),
                    };
                }
                Some(update) = route.updates.recv() => {
                    if update.progress <= highest {
                        continue;
                    }
                    highest = update.progress;
                    if let Some(text) = throttle.offer(Instant::now(), progress::words(&update)) {
                        show(&text);
                    }
                }
                _ = held_due => {
                    if let Some(text) = throttle.release(Instant::now()) {
                        show(&text);
                    }
                }
            }
        }
    }
}

/// The round of a request that failed with `error`.
fn failed(error: rmcp::ServiceError) -> Round {
    match token_refusal(&error) {
        Some(refusal) => Round::Refused(refusal),
        None => Round::Done(CallOutcome::Failed(error.to_string())),
    }
}

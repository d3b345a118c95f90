//! `session/prompt`: slash commands first (built-ins answer without the model, user commands
//! expand), then the content is converted ([`super::prompt_content`]) and the turn runs.
//! Also the `available_commands_update`s a session gets when it opens and when its commands
//! change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AvailableCommandsUpdate, ClientCapabilities, ContentBlock, ContentChunk, PromptRequest,
    PromptResponse, SessionNotification, SessionUpdate, StopReason,
};
use serde_json::Value;

use super::answers::{answer, live_agent, switch_mode, unknown_mode};
use super::bridge::AcpBridge;
use super::commands::{self, Builtin, Commands, Invoked};
use super::modes;
use super::notice::{self, Severity};
use super::prompt_content::{self, PromptContext};
use crate::agent::StopReason as TurnStop;
use crate::agent::{Agent, CompactionOutcome, TurnError};
use crate::model::Credentials;
use crate::rpc::{Peer, RequestContext, RpcError};
use crate::runtime::Runtime;
use crate::session::UserPart;
use crate::sync::lock;
use crate::tools::private::PrivateFiles;
use crate::tools::PermissionMode;

/// The command set last sent to the client for each session, so a change is sent once.
#[derive(Default)]
pub(crate) struct Announced(Mutex<HashMap<String, Commands>>);

impl Announced {
    /// Reads `agent`'s commands as found now, none from kin's own files (`private`), on a
    /// blocking thread (see [`Commands::load`]).
    pub(crate) async fn load(agent: &Agent, private: &PrivateFiles) -> Commands {
        let config_dir = crate::config::config_dir(&crate::config::process_env);
        let dirs = commands::dirs(&agent.cwd, config_dir.as_deref());
        let (roots, private) = (agent.roots().clone(), private.clone());
        tokio::task::spawn_blocking(move || Commands::load(&dirs, &roots, &private))
            .await
            .unwrap_or_default()
    }

    /// Reads and sends `agent`'s commands unless the client has them already.
    pub(crate) async fn refresh(&self, peer: &Peer, agent: &Agent, private: &PrivateFiles) {
        let found = Self::load(agent, private).await;
        self.send(peer, &agent.id, found);
    }

    /// Sends `found` as `session`'s commands unless the client has them already.
    pub(crate) fn send(&self, peer: &Peer, session: &str, found: Commands) {
        let mut sent = lock(&self.0);
        if sent.get(session) == Some(&found) {
            return;
        }
        let update = AvailableCommandsUpdate::new(found.available());
        peer.notify(
            "session/update",
            &SessionNotification::new(
                session.to_owned(),
                SessionUpdate::AvailableCommandsUpdate(update),
            ),
        );
        sent.insert(session.to_owned(), found);
    }

    /// Sends the commands afresh next time (the session was opened again).
    pub(crate) fn forget(&self, session: &str) {
        let mut sent = lock(&self.0);
        sent.remove(session);
    }

    /// The commands last sent for `session`.
    fn current(&self, session: &str) -> Commands {
        let sent = lock(&self.0);
        sent.get(session).cloned().unwrap_or_default()
    }
}

/// Sends agent text the client shows as the answer to a built-in command.
fn reply(peer: &Peer, session: &str, text: String) {
    let chunk = ContentChunk::new(ContentBlock::from(text));
    peer.notify(
        "session/update",
        &SessionNotification::new(session.to_owned(), SessionUpdate::AgentMessageChunk(chunk)),
    );
}

/// Runs a built-in command; its answer is agent text, and how the prompt ends (`cancelled`
/// for a `/compact` the client cancelled). Only `/compact` calls the model (for the summary).
async fn run_builtin(
    runtime: &Runtime,
    agent: &Arc<Agent>,
    builtin: Builtin,
    args: &str,
    cx: &RequestContext,
) -> Result<StopReason, RpcError> {
    let mut stop = StopReason::EndTurn;
    let text = match builtin {
        Builtin::Agents => agents_text(runtime, agent),
        Builtin::Mode => {
            let ids: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.id()).collect();
            if args.is_empty() {
                format!(
                    "The mode is {}. Modes: {}.",
                    agent.permission_mode().id(),
                    ids.join(", ")
                )
            } else {
                let mode = PermissionMode::from_id(args).ok_or_else(|| unknown_mode(args))?;
                switch_mode(agent, mode, cx, &modes::current_mode_update)?;
                cx.peer.notify(
                    "session/update",
                    &SessionNotification::new(
                        agent.id.clone(),
                        super::models::options_update(runtime.host(), agent),
                    ),
                );
                format!("The mode is now {}.", mode.id())
            }
        }
        Builtin::Model => {
            let host = runtime.host();
            if args.is_empty() {
                let ids: Vec<&str> = host
                    .models()
                    .choices()
                    .iter()
                    .map(|c| c.profile.id.as_str())
                    .collect();
                format!(
                    "The model is {}. Models: {}.",
                    host.model_id(agent),
                    ids.join(", ")
                )
            } else {
                host.switch_model(agent, args).map_err(|error| {
                    RpcError::invalid_params(format!("invalid params: {error}"))
                })?;
                cx.peer.notify(
                    "session/update",
                    &SessionNotification::new(
                        agent.id.clone(),
                        super::models::options_update(host, agent),
                    ),
                );
                format!("The model is now {args}, from the next model call.")
            }
        }
        Builtin::Compact => {
            let outcome = runtime
                .host()
                .compact(agent, cx.cancel.child_token())
                .await
                .map_err(|error| RpcError::invalid_request(format!("invalid request: {error}")))?;
            match outcome {
                CompactionOutcome::Compacted { through_turn, .. } => {
                    format!("Compacted: a summary now stands for turns 1 to {through_turn}.")
                }
                CompactionOutcome::NothingToCompact => {
                    "Nothing to compact: no completed turn since the last compaction.".into()
                }
                CompactionOutcome::Failed { reason } => {
                    format!("The compaction failed, and the conversation is as it was: {reason}")
                }
                CompactionOutcome::Cancelled => {
                    stop = StopReason::Cancelled;
                    "The compaction was cancelled; the conversation is as it was.".into()
                }
            }
        }
    };
    reply(&cx.peer, &agent.id, text);
    Ok(stop)
}

/// `/agents`: the session's children, one line each: the continuable ones, then those that
/// ran in the foreground (from the session's own log, under the description the model gave).
fn agents_text(runtime: &Runtime, agent: &Agent) -> String {
    let children = runtime.delegation().list(&agent.id);
    let foreground = agent.with_events(foreground_children);
    if children.is_empty() && foreground.is_empty() {
        return "This session has no subagents.".into();
    }
    let mut lines: Vec<String> = children
        .iter()
        .map(|child| {
            let state = match (&child.task, &child.last_stop) {
                (Some(_), _) => "running".to_owned(),
                (None, Some(stop)) => format!("idle (last turn: {stop})"),
                (None, None) => "idle".to_owned(),
            };
            let label = child.description.as_deref().unwrap_or("(untitled)");
            format!(
                "- {} ({}): {label} — {state}, {} turns",
                child.id, child.kind, child.turns
            )
        })
        .collect();
    lines.extend(foreground);
    format!("Subagents of this session:\n{}", lines.join("\n"))
}

/// The foreground `subagent` and `subagent_fork` calls in `events`, one line each with how they ended.
fn foreground_children(events: &[crate::session::Event]) -> Vec<String> {
    use crate::session::EventBody;
    let mut lines = Vec::new();
    for event in events {
        let EventBody::ToolCall(call) = &event.body else {
            continue;
        };
        let args: Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        // `subagent` and `subagent_fork`.
        let delegates = call.name == "subagent" || call.name == "subagent_fork";
        if !delegates || args["run_in_background"] == Value::Bool(true) {
            continue;
        }
        let result = events.iter().find_map(|e| match &e.body {
            EventBody::ToolResult(result) if result.call_id() == call.call_id => Some(result),
            _ => None,
        });
        let state = match result {
            None => "running",
            Some(result) if result.is_error() => "failed",
            Some(_) => "done",
        };
        let label = args["description"].as_str().unwrap_or("(untitled)");
        lines.push(format!(
            "- {label} (foreground, turn {}) — {state}",
            call.turn
        ));
    }
    lines
}

pub(crate) async fn prompt(
    runtime: Arc<Runtime>,
    client: ClientCapabilities,
    announced: Arc<Announced>,
    req: PromptRequest,
    cx: RequestContext,
) -> Result<Value, RpcError> {
    let id = req.session_id.0.to_string();
    let agent = live_agent(&runtime, &id)?;
    announced
        .refresh(&cx.peer, &agent, runtime.host().private())
        .await;
    let commands = announced.current(&id);
    let blocks = req.prompt;
    super::prompt_size::check(&blocks, &runtime.limits())?;
    // A prompt opening with `/name` runs or expands that command; an unknown one goes on as is.
    let opening = match blocks.first() {
        Some(ContentBlock::Text(text)) => Some(text.text.clone()),
        _ => None,
    };
    let mut expansion = None;
    if let Some(text) = &opening {
        match commands.invoked(text) {
            Some(Invoked::Builtin(builtin, args)) => {
                let stop = run_builtin(&runtime, &agent, builtin, args, &cx).await?;
                return answer(Ok(PromptResponse::new(stop)));
            }
            Some(Invoked::User(command, args)) => expansion = Some(command.expand(args)),
            None => {}
        }
    }
    let blob_dir = agent.blob_dir();
    // The model the session runs on decides (a `/model` switch included).
    let images = runtime.host().accepts_images(&agent);
    let (dir, roots) = (blob_dir.clone(), agent.roots().clone());
    // Payloads are stored (on the blocking pool) before the turn logs the parts naming them.
    let converted = tokio::task::spawn_blocking(move || {
        let context = PromptContext {
            blob_dir: &dir,
            roots: &roots,
            images,
        };
        prompt_content::convert(blocks, &context)
    })
    .await
    .map_err(|_| RpcError::internal("internal error: converting the prompt panicked"))??;
    let mut parts = converted.parts;
    if let Credentials::Missing { hint } = runtime.host().model().credentials() {
        return Err(super::auth::required(&hint, &client));
    }
    let bridge = Arc::new(AcpBridge::new(cx.peer.clone(), agent.id.clone(), &client));
    // Linked files; outside the roots, the permission rules decide before they are read.
    let link_notices = super::prompt_links::attach(
        &agent,
        runtime.host().private(),
        converted.links,
        &mut parts,
        bridge.clone(),
        &cx.cancel,
        &blob_dir,
    )
    .await?;
    // Logged as the user wrote it, then the command's text.
    if let Some(expansion) = expansion {
        parts.insert(1.min(parts.len()), UserPart::text(expansion));
    }
    for text in converted.notices.iter().chain(&link_notices) {
        notice::send(&cx.peer, &client, &id, Severity::Warning, text, None);
    }
    // The first prompt waits for the session's MCP servers, up to their startup timeout.
    if let Some(view) = agent.mcp() {
        for text in view.servers.wait_started().await {
            notice::send(&cx.peer, &client, &id, Severity::Warning, &text, None);
        }
    }
    // The turn's events reach the client through the host's event stream (see `initialize`).
    let cancel = cx.cancel.child_token();
    let outcome = runtime
        .host()
        .start_turn(agent, parts, Some(bridge), cancel.clone())
        .await;
    if let Err(error @ TurnError::Busy { .. }) = &outcome {
        return Err(RpcError::invalid_request(format!(
            "invalid request: {error}"
        )));
    }
    let stop = match TurnStop::of(&outcome, cancel.is_cancelled()) {
        TurnStop::Completed => StopReason::EndTurn,
        TurnStop::MaxTokens => StopReason::MaxTokens,
        TurnStop::Refusal => StopReason::Refusal,
        // Limits stop children only; a session the editor prompts is never timed out.
        TurnStop::Cancelled | TurnStop::TimedOut | TurnStop::BudgetExhausted => {
            StopReason::Cancelled
        }
        TurnStop::MaxSteps => StopReason::MaxTurnRequests,
        TurnStop::Error => {
            let detail = outcome
                .err()
                .map_or_else(|| "the turn failed".into(), |e| e.to_string());
            return Err(RpcError::internal(detail));
        }
    };
    answer(Ok(PromptResponse::new(stop)))
}

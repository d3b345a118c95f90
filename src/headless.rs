//! `kin run`: one turn without an editor, for scripts and parent processes. Runs the turn
//! through the session host in-process: the answer text streams to stdout, tool activity to
//! stderr; or, with `json`, every session event is written to stdout as its log line. Knows
//! nothing of ACP.

mod ask;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::agent::host::HostEvent;
use crate::agent::{StopReason, TurnError};
use crate::model::Credentials;
use crate::runtime::{Runtime, RuntimeError};
use crate::session::{AssistantChunk, Chunk, Event, EventBody, UserPart};
use crate::tools::{ClientBridge, PermissionMode};

pub(crate) use ask::TerminalAsk;

/// Exit status of a turn that ended without an answer being complete (limit, refusal).
pub(crate) const EXIT_STOPPED: u8 = 3;
/// Exit status of a cancelled turn (as after SIGINT).
pub(crate) const EXIT_CANCELLED: u8 = 130;

/// What `kin run` was asked to do.
pub struct HeadlessOptions {
    /// The prompt's text.
    pub prompt: String,
    /// Continue this stored session instead of creating one.
    pub session: Option<String>,
    /// The session's working directory.
    pub cwd: PathBuf,
    /// Write the session's events as JSON lines instead of the answer text.
    pub json: bool,
    /// The permission mode to run the turn in; `None` keeps the session's (`ask` when new).
    pub mode: Option<PermissionMode>,
}

/// Why `kin run` failed.
#[derive(Debug, thiserror::Error)]
pub enum HeadlessError {
    /// The model has no API key (the text says where kin looked).
    #[error("no API key for the model: {0}")]
    MissingKey(String),
    /// The session could not be opened or created.
    #[error(transparent)]
    Session(#[from] RuntimeError),
    /// The turn failed.
    #[error(transparent)]
    Turn(#[from] TurnError),
}

/// What the command line reports: the exit status and, unless the turn completed, a message.
pub fn exit_status(
    result: &Result<StopReason, HeadlessError>,
    max_steps: u32,
) -> (u8, Option<String>) {
    match result {
        Ok(StopReason::Completed) => (0, None),
        Ok(StopReason::Cancelled) => (EXIT_CANCELLED, Some("the turn was cancelled".into())),
        Ok(StopReason::MaxTokens) => (
            EXIT_STOPPED,
            Some(
                "the answer stopped at its output cap (stop reason max_tokens); `max_output` in \
                 kin's config raises it"
                    .into(),
            ),
        ),
        Ok(StopReason::Refusal) => (
            EXIT_STOPPED,
            Some("the model refused to answer (stop reason refusal)".into()),
        ),
        Ok(StopReason::MaxSteps) => (
            EXIT_STOPPED,
            Some(format!(
                "the turn reached kin's limit of {max_steps} model calls (stop reason max_turn_requests)"
            )),
        ),
        Ok(StopReason::Error) => (1, Some("the turn failed".into())),
        Ok(StopReason::TimedOut) => (EXIT_STOPPED, Some("the turn ran out of time".into())),
        Ok(StopReason::BudgetExhausted) => (
            EXIT_STOPPED,
            Some("the turn reached its budget".into()),
        ),
        // Errors quote the endpoint, files and the model: made visible, not interpreted.
        Err(error) => (1, Some(crate::text::visible(&error.to_string()).into_owned())),
    }
}

/// Runs one turn for `options.prompt`; returns once the turn has ended and its events are
/// written. `cancel` ends the turn early (it then counts as cancelled).
pub async fn run(
    runtime: &Arc<Runtime>,
    options: &HeadlessOptions,
    cancel: CancellationToken,
) -> Result<StopReason, HeadlessError> {
    let host = runtime.host();
    let missing_key = || match host.model().credentials() {
        Credentials::Missing { hint } => Err(HeadlessError::MissingKey(hint)),
        _ => Ok(()),
    };
    // An unknown session is the first thing to report; a new session is only created once
    // there is a key to run it with.
    let agent = match &options.session {
        Some(id) => {
            let agent = runtime.open_session(id, options.cwd.clone(), None)?;
            missing_key()?;
            agent
        }
        None => {
            missing_key()?;
            host.create_session(options.cwd.clone(), Vec::new(), 0)?
        }
    };
    if let Some(mode) = options.mode {
        agent
            .set_permission_mode(mode)
            .map_err(|error| HeadlessError::Session(RuntimeError::from(error)))?;
    }
    // The configured MCP servers; the turn waits for them up to their startup timeout.
    runtime.start_mcp(&agent, Vec::new(), None);
    if let Some(view) = agent.mcp() {
        for line in view.servers.wait_started().await {
            let _ = writeln!(std::io::stderr(), "kin: {line}");
        }
    }
    let asker: Arc<dyn ClientBridge> = Arc::new(TerminalAsk::new());
    let printer = Arc::new(Printer {
        json: options.json,
        terminal: std::io::stdout().is_terminal(),
        wrote_text: AtomicBool::new(false),
        ends_with_newline: AtomicBool::new(true),
    });
    let session = agent.id.clone();
    let shown = printer.clone();
    let _printing = host.events().subscribe(move |event| {
        if let HostEvent::Appended { agent, event } = event {
            if agent.id == session {
                shown.event(event);
            }
        }
    });
    let prompt = vec![UserPart::Text {
        text: options.prompt.clone(),
    }];
    let outcome = host
        .start_turn(agent.clone(), prompt, Some(asker), cancel.clone())
        .await;
    printer.finish();
    if let Some((cap, setting)) = agent.context.output_cap_hit() {
        let _ = writeln!(
            std::io::stderr(),
            "kin: the answer stopped at the output cap of {cap} tokens ({setting})"
        );
    }
    if outcome.is_ok() && agent.with_events(ended_empty) {
        let _ = writeln!(
            std::io::stderr(),
            "kin: the model returned an empty answer (no text, no tool call)"
        );
    }
    if let Some(line) = usage_line(host, &agent) {
        let _ = writeln!(std::io::stderr(), "{line}");
    }
    let _ = writeln!(
        std::io::stderr(),
        "kin: session {id} (continue it with --session {id})",
        id = agent.id
    );
    match StopReason::of(&outcome, cancel.is_cancelled()) {
        StopReason::Error => Err(outcome
            .err()
            .map_or(HeadlessError::Turn(TurnError::Stopped), HeadlessError::Turn)),
        stop => Ok(stop),
    }
}

/// The last turn's tokens and cost (from its `turn/end`), e.g.
/// `kin: tokens 1200 in (800 cached), 85 out; cost 0.000915 USD`, or `kin: tokens ~1400
/// (estimated: the endpoint reported no usage)` for an endpoint that reports none.
fn usage_line(host: &crate::agent::host::AgentHost, agent: &crate::agent::Agent) -> Option<String> {
    let usage = agent.with_events(|events| {
        events.iter().rev().find_map(|event| match &event.body {
            EventBody::TurnEnd(end) => Some(end.usage.clone()),
            _ => None,
        })
    })??;
    let reported = usage.input_tokens + usage.output_tokens > 0 || usage.estimated_tokens.is_none();
    let mut line = "kin: tokens".to_owned();
    if reported {
        line.push_str(&format!(" {} in", usage.input_tokens));
        if let Some(cached) = usage.cache_read_tokens {
            line.push_str(&format!(" ({cached} cached)"));
        }
        line.push_str(&format!(", {} out", usage.output_tokens));
    }
    // Calls the endpoint reported no usage for are kin's estimate, said so, never shown as 0.
    if let Some(estimated) = usage.estimated_tokens {
        let (and, which) = if reported {
            (" and", "for the calls the endpoint reported no usage for")
        } else {
            ("", "the endpoint reported no usage")
        };
        line.push_str(&format!("{and} ~{estimated} (estimated: {which})"));
    }
    let choice = agent
        .model_choice(host.models())
        .unwrap_or_else(|| host.models().default_choice());
    if let (Some(cost), Some(prices)) = (usage.cost, &choice.profile.prices) {
        line.push_str(&format!("; cost {cost:.6} {}", prices.currency));
        let background = agent.with_events(background_cost);
        if background > 0.0 {
            line.push_str(&format!(
                " (+ {background:.6} {} of background subagents it started)",
                prices.currency
            ));
        }
    }
    Some(line)
}

/// Whether the last turn's last answer was empty: no text and no tool call.
fn ended_empty(events: &[Event]) -> bool {
    let last_turn = events
        .iter()
        .rposition(|event| matches!(event.body, EventBody::TurnStart(_)))
        .unwrap_or(0);
    let last_answer = events[last_turn..]
        .iter()
        .rev()
        .find_map(|event| match &event.body {
            EventBody::AssistantMessage(message) => Some(&message.message.content),
            _ => None,
        });
    last_answer.is_some_and(|blocks| {
        blocks.iter().all(|block| match block {
            crate::session::AssistantBlock::Text { text } => text.trim().is_empty(),
            crate::session::AssistantBlock::Reasoning { .. } => true,
            crate::session::AssistantBlock::ToolCall { .. } => false,
        })
    })
}

/// The cost of the background tasks the last turn started that have settled: their
/// `task/end`s carry it (a background child's cost counts for the turn that started it).
fn background_cost(events: &[crate::session::Event]) -> f64 {
    let last_turn = events
        .iter()
        .rposition(|event| matches!(event.body, EventBody::TurnStart(_)))
        .unwrap_or(0);
    let started: Vec<&str> = events[last_turn..]
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskStart(start) => Some(start.task.as_str()),
            _ => None,
        })
        .collect();
    events
        .iter()
        .filter_map(|event| match &event.body {
            EventBody::TaskEnd(end) if started.contains(&end.task.as_str()) => end.cost,
            _ => None,
        })
        .sum()
}

/// Writes events as they happen. Write errors (a closed pipe) are ignored: the turn still
/// ends normally and is logged.
struct Printer {
    json: bool,
    /// stdout is a terminal: the model's control characters (escape sequences that retitle
    /// the window, rewrite the screen or the clipboard) are shown escaped, not obeyed.
    terminal: bool,
    wrote_text: AtomicBool,
    ends_with_newline: AtomicBool,
}

impl Printer {
    fn event(&self, event: &Event) {
        if self.json {
            if let Ok(line) = serde_json::to_string(event) {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            return;
        }
        match &event.body {
            EventBody::AssistantChunk(AssistantChunk {
                chunk: Chunk::TextDelta { text, .. },
                ..
            }) if !text.is_empty() => {
                let text = if self.terminal {
                    crate::text::visible_lines(text)
                } else {
                    std::borrow::Cow::Borrowed(text.as_str())
                };
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(text.as_bytes());
                let _ = out.flush();
                self.wrote_text.store(true, Ordering::Relaxed);
                self.ends_with_newline
                    .store(text.ends_with('\n'), Ordering::Relaxed);
            }
            EventBody::ToolCall(call) => {
                self.break_line();
                let _ = writeln!(
                    std::io::stderr(),
                    "kin: tool {} {}",
                    shown(&call.name, 200),
                    shown(&call.arguments, 200)
                );
            }
            EventBody::ToolResult(result) => {
                let status = if result.is_error() { "failed" } else { "done" };
                let text = result.text();
                let first = text.lines().next().unwrap_or_default();
                let _ = writeln!(
                    std::io::stderr(),
                    "kin:   -> {status}: {}",
                    shown(first, 200)
                );
            }
            _ => {}
        }
    }

    /// Ends a half-written answer line, so what follows starts on its own line.
    fn break_line(&self) {
        if self.wrote_text.load(Ordering::Relaxed)
            && !self.ends_with_newline.swap(true, Ordering::Relaxed)
        {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"\n");
            let _ = out.flush();
        }
    }

    fn finish(&self) {
        if !self.json {
            self.break_line();
        }
    }
}

/// At most `max` characters of `text` for a stderr line, terminal escapes and other control
/// characters made visible: the model and files choose this text, not the terminal's owner.
fn shown(text: &str, max: usize) -> String {
    let cut = match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    };
    crate::text::visible(&cut).into_owned()
}

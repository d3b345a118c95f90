//! The agent loop. An [`Agent`] is one live session: its header, its append-only log, and at
//! most one running turn. A turn alternates model calls (steps) and tool calls until the model
//! stops, the turn is cancelled, or something fails; every happening is a log event, handed to
//! an observer as it is appended. Knows nothing of ACP.

mod assemble;
mod permissions;
mod system;
mod title;
mod turn;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use crate::model::{Model, ModelError};
use crate::session::{Event, Header, SessionLog, StoreError, TurnEndReason, UserPart};
use crate::tools::{ClientBridge, PermissionMode, Roots, SessionPermissions, ToolRegistry};

pub use assemble::MessageAssembler;
pub use system::system_prompt;
pub use title::fallback_title;

/// How a turn ended, when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    Completed,
    MaxTokens,
    Refusal,
    Cancelled,
    /// The step limit was reached while the model still wanted to call tools.
    MaxSteps,
}

#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("session {id} is already running a prompt; wait for it to finish or cancel it")]
    Busy { id: String },
    #[error("{error} (turn {turn}, step {step})")]
    Model {
        turn: u32,
        step: u32,
        error: ModelError,
    },
    #[error("could not write the session log: {0}")]
    Store(#[from] StoreError),
}

/// What a turn runs with.
#[derive(Clone)]
pub struct TurnDeps {
    pub model: Arc<dyn Model>,
    pub tools: Arc<ToolRegistry>,
    pub system: String,
    pub max_steps: u32,
    /// The editor, for tools that can work through it and for permission prompts.
    pub client: Option<Arc<dyn ClientBridge>>,
}

/// Receives each event right after it was appended to the log.
pub type Observer<'a> = &'a (dyn Fn(&Event) + Send + Sync);

pub struct Agent {
    pub id: String,
    pub cwd: PathBuf,
    header: Header,
    /// Where tools may reach: cwd plus additional directories.
    roots: Arc<Roots>,
    /// Permission mode and remembered answers, restored from the log.
    permissions: Arc<SessionPermissions>,
    state: tokio::sync::Mutex<AgentState>,
    running: AtomicBool,
    turn_cancel: Mutex<Option<CancellationToken>>,
}

struct AgentState {
    log: SessionLog,
    events: Vec<Event>,
    last_turn: u32,
    has_title: bool,
}

impl Agent {
    /// A live agent over an opened log and the events it already holds.
    pub fn new(header: Header, cwd: PathBuf, log: SessionLog, events: Vec<Event>) -> Self {
        let last_turn = events
            .iter()
            .filter_map(|event| match &event.body {
                crate::session::EventBody::TurnStart(start) => Some(start.turn),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let has_title = events
            .iter()
            .any(|event| matches!(event.body, crate::session::EventBody::SessionTitle(_)));
        let additional = header
            .additional_directories
            .iter()
            .map(PathBuf::from)
            .collect();
        Self {
            id: header.id.clone(),
            roots: Arc::new(Roots::new(cwd.clone(), additional)),
            permissions: Arc::new(permissions::restore(&events)),
            cwd,
            header,
            state: tokio::sync::Mutex::new(AgentState {
                log,
                events,
                last_turn,
                has_title,
            }),
            running: AtomicBool::new(false),
            turn_cancel: Mutex::new(None),
        }
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Replaces the additional directories (a client re-sends them on load and resume).
    pub fn with_additional_directories(mut self, additional: Vec<PathBuf>) -> Self {
        self.roots = Arc::new(Roots::new(self.cwd.clone(), additional));
        self
    }

    pub fn roots(&self) -> &Arc<Roots> {
        &self.roots
    }

    pub fn permission_mode(&self) -> PermissionMode {
        self.permissions.mode()
    }

    /// Switches the permission mode; the change is written to the log now if the session is
    /// idle, else by the running turn. Returns whether the mode changed.
    pub fn set_permission_mode(&self, mode: PermissionMode) -> Result<bool, StoreError> {
        let changed = self.permissions.set_mode(mode);
        self.write_permission_records()?;
        Ok(changed)
    }

    /// Writes queued permission records if no turn holds the log (a running turn writes them
    /// itself).
    fn write_permission_records(&self) -> Result<(), StoreError> {
        if let Ok(mut state) = self.state.try_lock() {
            let records = self.permissions.take_unlogged();
            if !records.is_empty() {
                for record in records {
                    let body = permissions::event(record, None);
                    let event = state.log.append(body, crate::time::now_ms())?;
                    state.events.push(event);
                }
                state.log.sync()?;
            }
        }
        Ok(())
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Runs `read` over the events so far (waits while a turn holds the session).
    pub async fn with_events<T>(&self, read: impl FnOnce(&[Event]) -> T) -> T {
        read(&self.state.lock().await.events)
    }

    /// Cancels the running turn, if any; it settles as `Cancelled`.
    pub fn cancel(&self) {
        if let Some(token) = self
            .turn_cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            token.cancel();
        }
    }

    /// Runs one turn for `prompt`. Refuses (without touching the log) while another runs.
    pub async fn run_turn(
        &self,
        prompt: Vec<UserPart>,
        deps: &TurnDeps,
        observe: Observer<'_>,
        cancel: CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        if self.running.swap(true, Ordering::AcqRel) {
            return Err(TurnError::Busy {
                id: self.id.clone(),
            });
        }
        *self.turn_cancel.lock().unwrap_or_else(|p| p.into_inner()) = Some(cancel.clone());
        let result = {
            let mut state = self.state.lock().await;
            turn::run(self, &mut state, prompt, deps, observe, &cancel).await
        };
        *self.turn_cancel.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.running.store(false, Ordering::Release);
        // A mode switch that arrived as the turn was ending is written now.
        if let Err(error) = self.write_permission_records() {
            tracing::warn!(%error, session = %self.id, "could not log a permission change");
        }
        result
    }
}

impl TurnOutcome {
    fn end_reason(self) -> TurnEndReason {
        match self {
            Self::Completed => TurnEndReason::Completed,
            Self::MaxTokens => TurnEndReason::MaxTokens,
            Self::Refusal => TurnEndReason::Refusal,
            Self::Cancelled => TurnEndReason::Aborted,
            Self::MaxSteps => TurnEndReason::MaxSteps,
        }
    }
}

impl Agent {
    /// Waits until no turn holds the session (returns at once when idle).
    pub async fn settle(&self) {
        drop(self.state.lock().await);
    }
}

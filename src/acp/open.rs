//! Opening a session for the editor: `session/new`, `session/load` and `session/resume`, one
//! function each, and what the three do alike once the session is open (the broad-workspace
//! warning, the session's MCP servers, the slash commands, the mode and config options of the
//! answer).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ClientCapabilities, LoadSessionRequest, LoadSessionResponse, McpServer, NewSessionRequest,
    NewSessionResponse, ResumeSessionRequest, ResumeSessionResponse, SessionConfigOption,
    SessionModeState,
};
use serde_json::{json, Value};

use super::answers::{answer, runtime_error, session_locked, store_error};
use super::notice::{self, Severity};
use super::prompt::Announced;
use super::replay_log::{replay_log, ToolsOf};
use super::{models, modes, updates};
use crate::agent::Agent;
use crate::rpc::{RequestContext, RpcError};
use crate::runtime::{Runtime, RuntimeError};
use crate::session::{Event, EventBody, StoreError};

/// Where a `session/load` answer says the session was opened read-only: `_meta` key.
const READ_ONLY_META_KEY: &str = "kin.readOnly";

/// One open request's context: the runtime, what the client offers, the commands it was sent,
/// and the request (for its peer and what goes out after the answer).
pub(super) struct Opening<'a> {
    pub(super) runtime: &'a Arc<Runtime>,
    pub(super) client: &'a ClientCapabilities,
    pub(super) announced: &'a Arc<Announced>,
    pub(super) cx: &'a RequestContext,
}

impl Opening<'_> {
    /// `session/new`: a session in the client's cwd (a kin parent names itself in `_meta`, so
    /// the session is listed as its child, not as a top-level one).
    pub(super) async fn new_session(
        &self,
        req: NewSessionRequest,
    ) -> Result<NewSessionResponse, RpcError> {
        let additional = check_roots(&req.cwd, &req.additional_directories)?;
        let depth = delegation_depth(req.meta.as_ref())?;
        let parent = req
            .meta
            .as_ref()
            .and_then(|meta| meta.get(crate::acp_client::PARENT_META_KEY))
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && id.len() <= 128)
            .map(str::to_owned);
        let agent = self
            .runtime
            .host()
            .create_session_under(req.cwd.clone(), additional, depth, parent)
            .map_err(runtime_error)?;
        let refused = self.opened(&agent, &req.mcp_servers);
        self.announce_after_answer(&agent, refused).await;
        let (modes, options) = self.state(&agent);
        Ok(NewSessionResponse::new(agent.id.clone())
            .modes(modes)
            .config_options(options))
    }

    /// `session/load`: opens a stored session and replays its history as updates (read-only
    /// when another process is writing it).
    pub(super) async fn load_session(&self, req: LoadSessionRequest) -> Result<Value, RpcError> {
        let id = &req.session_id.0;
        let agent = match open_idle(self.runtime, id, req.cwd, req.additional_directories)? {
            Opened::Writable(agent) => agent,
            Opened::LockedElsewhere(locked) => {
                return load_read_only(self.runtime, self.client, id, locked, self.cx);
            }
        };
        for title in self.opened(&agent, &req.mcp_servers) {
            notice::send(
                &self.cx.peer,
                self.client,
                &agent.id,
                Severity::Warning,
                &title,
                None,
            );
        }
        let blob_dir = agent.blob_dir();
        // Streamed from the log, each event sent as it is read: the agent keeps only what
        // its model sees, and no list of every update is built.
        let mut replay = updates::Replayed::new(self.cx, &agent.id, compaction(self.client));
        let store = self.runtime.host().store();
        let tools_of = |event: &Event| match &event.body {
            EventBody::ToolCall(call) => agent.tools_for(&call.name),
            _ => agent.tools.clone(),
        };
        let context = (&tools_of as ToolsOf<'_>, Some(blob_dir.as_path()));
        replay_log(store, &agent.id, &mut replay, context, |_| {}).map_err(store_error)?;
        if self.client.subagents.is_some() {
            super::tree_replay::announce_children(&self.cx.peer, store, &agent.id);
        }
        self.announced.forget(&agent.id);
        self.announced
            .refresh(&self.cx.peer, &agent, self.runtime.host().private())
            .await;
        let (modes, options) = self.state(&agent);
        answer(Ok(LoadSessionResponse::new()
            .modes(modes)
            .config_options(options)))
    }

    /// `session/resume`: opens a stored session to go on with it, without replaying it.
    /// Another process writing it is an error: resuming is for continuing.
    pub(super) async fn resume_session(
        &self,
        req: ResumeSessionRequest,
    ) -> Result<ResumeSessionResponse, RpcError> {
        let id = &req.session_id.0;
        let agent = match open_idle(self.runtime, id, req.cwd, req.additional_directories)? {
            Opened::Writable(agent) => agent,
            Opened::LockedElsewhere(locked) => return Err(session_locked(locked)),
        };
        let refused = self.opened(&agent, &req.mcp_servers);
        self.announce_after_answer(&agent, refused).await;
        let (modes, options) = self.state(&agent);
        Ok(ResumeSessionResponse::new()
            .modes(modes)
            .config_options(options))
    }

    /// What every open does once the session is open: warn of a broad workspace and start
    /// the session's MCP servers. Returns the warnings for the servers kin refuses.
    fn opened(&self, agent: &Agent, servers: &[McpServer]) -> Vec<String> {
        warn_broad_workspace(self.cx, self.client, &agent.id, &agent.cwd);
        start_mcp(self.runtime, agent, servers, self.cx, self.client)
    }

    /// After the answer (the client knows the session once it has it): the `refused` servers'
    /// warnings and the session's slash commands.
    async fn announce_after_answer(&self, agent: &Arc<Agent>, refused: Vec<String>) {
        self.announced.forget(&agent.id);
        let commands = Announced::load(agent, self.runtime.host().private()).await;
        let (peer, client) = (self.cx.peer.clone(), self.client.clone());
        let (session, announced) = (agent.id.clone(), self.announced.clone());
        self.cx.after_answer(Box::new(move || {
            for title in refused {
                notice::send(&peer, &client, &session, Severity::Warning, &title, None);
            }
            announced.send(&peer, &session, commands);
        }));
    }

    /// The mode and config options an open answers with.
    fn state(&self, agent: &Agent) -> (SessionModeState, Vec<SessionConfigOption>) {
        let mode = modes::mode_state(agent.permission_mode());
        (mode, models::options_of(self.runtime.host(), agent))
    }
}

/// `cwd` and additional directories must be absolute; `cwd` must be a directory.
fn check_roots(cwd: &Path, additional: &[PathBuf]) -> Result<Vec<String>, RpcError> {
    if !cwd.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "invalid params: `cwd` must be an absolute path, got {:?}",
            cwd.display().to_string()
        )));
    }
    if !cwd.is_dir() {
        return Err(RpcError::invalid_params(format!(
            "invalid params: `cwd` {:?} is not an existing directory",
            cwd.display().to_string()
        )));
    }
    additional
        .iter()
        .map(|dir| {
            if dir.is_absolute() {
                Ok(dir.to_string_lossy().into_owned())
            } else {
                Err(RpcError::invalid_params(format!(
                    "invalid params: `additionalDirectories` entries must be absolute paths, got {:?}",
                    dir.display().to_string()
                )))
            }
        })
        .collect()
}

/// A warning for a workspace that is the whole filesystem or the user's home directory: every
/// file under it counts as inside, so reads there never ask.
fn broad_workspace(cwd: &Path, home: Option<&Path>) -> Option<String> {
    // Resolved once: every resolution reads each component's link.
    let resolved = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let cwd = resolved(cwd);
    let what = if cwd == Path::new("/") {
        "the whole filesystem (/)"
    } else if home.is_some_and(|home| cwd == resolved(home)) {
        "your home directory"
    } else {
        return None;
    };
    Some(format!("The workspace is {what}"))
}

/// After the answer that opens a session in `cwd`: warns the user when the workspace is broad.
fn warn_broad_workspace(
    cx: &RequestContext,
    client: &ClientCapabilities,
    session: &str,
    cwd: &Path,
) {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let Some(title) = broad_workspace(cwd, home.as_deref()) else {
        return;
    };
    let (peer, client, session) = (cx.peer.clone(), client.clone(), session.to_owned());
    cx.after_answer(Box::new(move || {
        super::notice::send(
            &peer,
            &client,
            &session,
            super::notice::Severity::Warning,
            &title,
            Some(
                "Every file under it counts as inside the workspace: kin reads and searches \
                 there without asking. Open a project directory instead to keep kin to it.",
            ),
        )
    }));
}

/// Starts the session's MCP servers in the background (a server waiting for a login tells the
/// editor at once); returns the warnings for servers kin refuses (SSE), one each.
fn start_mcp(
    runtime: &Runtime,
    agent: &Agent,
    servers: &[McpServer],
    cx: &RequestContext,
    client: &ClientCapabilities,
) -> Vec<String> {
    let specs = super::mcp::specs(servers);
    let refused = super::mcp::refusals(&specs);
    let usable = specs
        .into_iter()
        .filter(|spec| !matches!(spec.transport, crate::mcp::Transport::Sse { .. }))
        .collect();
    let editor = super::bridge::AcpBridge::new(cx.peer.clone(), agent.id.clone(), client);
    runtime.start_mcp(agent, usable, Some(Arc::new(editor)));
    refused
}

/// The delegation depth of a new session: from the parent kin's `_meta`, else from the
/// environment of a launcher that does not speak ACP, else 0 (a top-level session).
fn delegation_depth(meta: Option<&serde_json::Map<String, Value>>) -> Result<u32, RpcError> {
    use crate::acp_client::{DEPTH_ENV, DEPTH_META_KEY};
    let invalid = |what: String| {
        RpcError::invalid_params(format!(
            "invalid params: {what} must be a non-negative integer"
        ))
    };
    if let Some(value) = meta.and_then(|meta| meta.get(DEPTH_META_KEY)) {
        return value
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| invalid(format!("_meta.{DEPTH_META_KEY}")));
    }
    match std::env::var(DEPTH_ENV) {
        // Failing beats guessing 0: a wrong depth would lift the limit.
        Ok(text) if !text.trim().is_empty() => text
            .trim()
            .parse()
            .map_err(|_| invalid(DEPTH_ENV.to_owned())),
        _ => Ok(0),
    }
}

/// What `open_idle` found.
enum Opened {
    /// Open in this process for writing (its lock held here).
    Writable(Arc<Agent>),
    /// Another process has it open for writing: the `StoreError::Locked` naming it.
    LockedElsewhere(StoreError),
}

/// Opens a session for load or resume (after checking the roots the client sent); one with a
/// prompt in flight is refused.
fn open_idle(
    runtime: &Runtime,
    id: &str,
    cwd: PathBuf,
    additional: Vec<PathBuf>,
) -> Result<Opened, RpcError> {
    check_roots(&cwd, &additional)?;
    // Opening restores the delegation records (interrupted background tasks show as such).
    let agent = match runtime.open_session(id, cwd, Some(additional)) {
        Ok(agent) => agent,
        Err(RuntimeError::Store(locked @ StoreError::Locked { .. })) => {
            return Ok(Opened::LockedElsewhere(locked))
        }
        Err(error) => return Err(runtime_error(error)),
    };
    if agent.is_running() {
        return Err(RpcError::invalid_request(format!(
            "invalid request: session {id} is running a prompt; cancel it or wait for it first"
        )));
    }
    Ok(Opened::Writable(agent))
}

/// `session/load` of a session another process is writing: its history as the file holds it
/// now is replayed, and nothing is opened here (no lock, no write, a torn last line is that
/// process's write in progress and is left alone). The answer says so in `_meta`; prompts
/// and mode changes are refused with `-32001` until the session is loaded again after the
/// other process has closed it.
fn load_read_only(
    runtime: &Runtime,
    client: &ClientCapabilities,
    id: &str,
    locked: StoreError,
    cx: &RequestContext,
) -> Result<Value, RpcError> {
    let pid = match &locked {
        StoreError::Locked { pid, .. } => *pid,
        _ => None,
    };
    tracing::info!(session = id, writer = ?pid, "replaying a session another process is writing, read-only");
    let store = runtime.host().store();
    let blob_dir = store.blob_dir(id).ok();
    // Streamed: each event is replayed and sent as it is read, and only the few events the
    // mode and model options are restored from are kept.
    let mut replay = updates::Replayed::new(cx, id, compaction(client));
    let mut settings = Vec::new();
    let tools_of = |_: &Event| runtime.host().tools().clone();
    let context = (&tools_of as ToolsOf<'_>, blob_dir.as_deref());
    replay_log(store, id, &mut replay, context, |event| {
        if matches!(
            event.body,
            EventBody::PermissionMode(_)
                | EventBody::PermissionDecision(_)
                | EventBody::ModelSet(_)
        ) {
            settings.push(event.clone());
        }
    })
    .map_err(store_error)?;
    let mode = crate::agent::restored_mode(&settings);
    let options = models::options_of_log(runtime.host(), &settings);
    let mut meta = serde_json::Map::new();
    meta.insert(
        READ_ONLY_META_KEY.into(),
        json!({ "writerPid": pid, "reason": locked.to_string() }),
    );
    answer(Ok(LoadSessionResponse::new()
        .modes(modes::mode_state(mode))
        .config_options(options)
        .meta(meta)))
}

/// Whether the client takes compaction updates (`session.compaction`).
fn compaction(client: &ClientCapabilities) -> bool {
    client
        .session
        .as_ref()
        .is_some_and(|session| session.compaction.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_and_home_are_broad_workspaces_and_projects_are_not() {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join("project");
        std::fs::create_dir(&project).unwrap();
        assert!(broad_workspace(Path::new("/"), Some(home.path()))
            .is_some_and(|w| w.contains("whole filesystem")));
        assert!(broad_workspace(home.path(), Some(home.path()))
            .is_some_and(|w| w.contains("home directory")));
        // Another spelling of the same directory counts too.
        assert!(broad_workspace(&project.join(".."), Some(home.path())).is_some());
        assert_eq!(broad_workspace(&project, Some(home.path())), None);
        assert_eq!(broad_workspace(&project, None), None);
    }
}

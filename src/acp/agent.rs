//! Editor-facing ACP agent: decodes requests, calls the session host, answers, and streams
//! host events as `session/update` notifications.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentCapabilities, CancelNotification, ClientCapabilities, ClientNotification, ClientRequest,
    CloseSessionResponse, DeleteSessionResponse, Implementation, InitializeResponse,
    ListSessionsResponse, LoadSessionResponse, McpCapabilities, McpServer, NewSessionResponse,
    PromptCapabilities, ResumeSessionResponse, SessionAdditionalDirectoriesCapabilities,
    SessionCapabilities, SessionCloseCapabilities, SessionDeleteCapabilities, SessionInfo,
    SessionListCapabilities, SessionResumeCapabilities, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use agent_client_protocol_schema::{MethodDispatchError, ProtocolVersion};
use futures::FutureExt;
use serde_json::{json, Value};

use super::answers::{
    answer, live_agent, runtime_error, session_locked, session_not_found, store_error, switch_mode,
    unknown_mode,
};
use super::notice::{self, Severity};
use super::prompt::Announced;
use super::replay_log::{replay_log, ToolsOf};
use super::{models, modes, updates};
use crate::agent::host::Subscription;
use crate::agent::Agent;
use crate::rpc::{Handler, Reply, RequestContext, RpcError};
use crate::runtime::{Runtime, RuntimeError};
use crate::session::{Event, EventBody, ListCursor, StoreError};
use crate::sync::lock;
use crate::time::iso8601;
use crate::tools::PermissionMode;

/// Where a `session/load` answer says the session was opened read-only: `_meta` key.
const READ_ONLY_META_KEY: &str = "kin.readOnly";
/// Sessions per `session/list` page.
const LIST_PAGE: usize = 50;

pub(crate) struct AcpAgent {
    runtime: Arc<Runtime>,
    initialized: AtomicBool,
    /// What the client said it offers in `initialize` (fs, terminal, ...).
    client: Mutex<ClientCapabilities>,
    /// Session events to the client as `session/update`s, from `initialize` on.
    updates: Mutex<Option<Subscription>>,
    /// The slash commands each session's client was last sent.
    announced: Arc<Announced>,
}

impl AcpAgent {
    pub(crate) fn new(runtime: Arc<Runtime>) -> Self {
        Self {
            runtime,
            initialized: AtomicBool::new(false),
            client: Mutex::new(ClientCapabilities::new()),
            updates: Mutex::new(None),
            announced: Arc::default(),
        }
    }

    fn client_capabilities(&self) -> ClientCapabilities {
        lock(&self.client).clone()
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

impl Handler for AcpAgent {
    fn request(&self, method: String, mut params: Value, cx: RequestContext) -> Reply {
        let ready = Reply::Now;
        if method == "session/prompt" && self.initialized.load(Ordering::Acquire) {
            if let Err(error) = super::prompt_size::check_raw(&params, &self.runtime.limits()) {
                return ready(Err(error));
            }
        }
        if method == "initialize" {
            super::request_params::numeric_protocol_version(&mut params);
        }
        let request = match super::request_params::client_request(&method, params) {
            Ok(request) => request,
            Err(MethodDispatchError::UnknownMethod { .. })
                if !self.initialized.load(Ordering::Acquire) =>
            {
                return ready(Err(not_initialized(&method)))
            }
            Err(MethodDispatchError::UnknownMethod { .. }) => {
                return ready(Err(RpcError::method_not_found(&method)))
            }
            Err(MethodDispatchError::InvalidPayload { source, .. }) => {
                return ready(Err(RpcError::invalid_params(format!(
                    "invalid params for {method}: {source}"
                ))))
            }
            Err(other) => return ready(Err(RpcError::invalid_params(other.to_string()))),
        };
        if let ClientRequest::InitializeRequest(init) = &request {
            // Set before the next line is read, so pipelined requests see it.
            self.initialized.store(true, Ordering::Release);
            let session = init.client_capabilities.session.as_ref();
            let forward = super::subagents::forward(
                cx.peer.clone(),
                init.client_capabilities.subagents.is_some(),
                session.is_some_and(|s| s.compaction.is_some()),
                self.runtime.host().models().clone(),
                self.runtime.delegation().clone(),
            );
            *lock(&self.updates) = Some(self.runtime.host().events().subscribe(forward));
            tracing::debug!(version = ?init.protocol_version, client = ?init.client_info, "initialize");
            *lock(&self.client) = init.client_capabilities.clone();
            let response = answer(Ok(initialize_response(
                &self.runtime,
                &init.client_capabilities,
            )));
            // Warming the model's client up starts a thread: only once the answer is out.
            let model = self.runtime.host().model().clone();
            return Reply::NowThen(response, Box::new(move || model.prepare()));
        }
        if !self.initialized.load(Ordering::Acquire) {
            return ready(Err(not_initialized(&method)));
        }
        let runtime = self.runtime.clone();
        let client = self.client_capabilities();
        let announced = self.announced.clone();
        Reply::Later(
            async move { dispatch(runtime, client, announced, request, method, cx).await }.boxed(),
        )
    }

    fn notification(&self, method: String, params: Value) {
        if !self.initialized.load(Ordering::Acquire) {
            return;
        }
        match ClientNotification::from_method_and_params(&method, &params) {
            Ok(ClientNotification::CancelNotification(CancelNotification {
                session_id, ..
            })) => {
                let host = self.runtime.host();
                match host.live(&session_id.0) {
                    Some(agent) => agent.cancel(),
                    // A child agent process: its activation alone.
                    None => {
                        host.remote_children().cancel(&session_id.0);
                    }
                }
            }
            Ok(_) => {}
            Err(error) => tracing::debug!(%error, "ignoring a notification"),
        }
    }
}

fn not_initialized(method: &str) -> RpcError {
    RpcError::invalid_request(format!(
        "invalid request: `initialize` must come first (got {method} before it)"
    ))
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

fn initialize_response(runtime: &Runtime, client: &ClientCapabilities) -> InitializeResponse {
    let sessions = SessionCapabilities::new()
        .list(SessionListCapabilities::new())
        .resume(SessionResumeCapabilities::new())
        .close(SessionCloseCapabilities::new())
        .delete(SessionDeleteCapabilities::new())
        .additional_directories(SessionAdditionalDirectoriesCapabilities::new());
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
        .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
        .session_capabilities(sessions);
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .auth_methods(super::auth::methods(runtime, client))
        .agent_info(Implementation::new("kin", env!("CARGO_PKG_VERSION")).title("kin".to_owned()))
}

async fn dispatch(
    runtime: Arc<Runtime>,
    client: ClientCapabilities,
    announced: Arc<Announced>,
    request: ClientRequest,
    method: String,
    cx: RequestContext,
) -> Result<Value, RpcError> {
    match request {
        ClientRequest::AuthenticateRequest(req) => {
            super::auth::authenticate(&runtime, &req.method_id.0).await
        }
        ClientRequest::NewSessionRequest(req) => answer(
            async {
                let additional = check_roots(&req.cwd, &req.additional_directories)?;
                let depth = delegation_depth(req.meta.as_ref())?;
                // A kin parent names its id for this session: listed as its child, not top-level.
                let parent = req
                    .meta
                    .as_ref()
                    .and_then(|meta| meta.get(crate::acp_client::PARENT_META_KEY))
                    .and_then(Value::as_str)
                    .filter(|id| !id.is_empty() && id.len() <= 128)
                    .map(str::to_owned);
                let agent = runtime
                    .host()
                    .create_session_under(req.cwd.clone(), additional, depth, parent)
                    .map_err(runtime_error)?;
                warn_broad_workspace(&cx, &client, &agent.id, &req.cwd);
                let refused = start_mcp(&runtime, &agent, &req.mcp_servers, &cx, &client);
                let commands = Announced::load(&agent, runtime.host().private()).await;
                let (peer, session) = (cx.peer.clone(), agent.id.clone());
                let announced = announced.clone();
                // After the answer: the client knows the session once it has it.
                cx.after_answer(Box::new(move || {
                    for title in refused {
                        notice::send(&peer, &client, &session, Severity::Warning, &title, None);
                    }
                    announced.send(&peer, &session, commands);
                }));
                let mode = agent.permission_mode();
                Ok(NewSessionResponse::new(agent.id.clone())
                    .modes(modes::mode_state(mode))
                    .config_options(models::options_of(runtime.host(), &agent)))
            }
            .await,
        ),
        ClientRequest::LoadSessionRequest(req) => {
            let id = &req.session_id.0;
            let agent = match open_idle(&runtime, id, req.cwd, req.additional_directories)? {
                Opened::Writable(agent) => agent,
                Opened::LockedElsewhere(locked) => {
                    return load_read_only(&runtime, &client, id, locked, &cx);
                }
            };
            warn_broad_workspace(&cx, &client, &agent.id, &agent.cwd);
            for title in start_mcp(&runtime, &agent, &req.mcp_servers, &cx, &client) {
                notice::send(
                    &cx.peer,
                    &client,
                    &agent.id,
                    Severity::Warning,
                    &title,
                    None,
                );
            }
            let blob_dir = agent.blob_dir();
            // Streamed from the log, each event sent as it is read: the agent keeps only what
            // its model sees, and no list of every update is built.
            let mut replay = updates::Replayed::new(&cx, &agent.id, compaction(&client));
            let store = runtime.host().store();
            let tools_of = |event: &Event| match &event.body {
                EventBody::ToolCall(call) => agent.tools_for(&call.name),
                _ => agent.tools.clone(),
            };
            let context = (&tools_of as ToolsOf<'_>, Some(blob_dir.as_path()));
            replay_log(store, &agent.id, &mut replay, context, |_| {}).map_err(store_error)?;
            if client.subagents.is_some() {
                super::tree_replay::announce_children(&cx.peer, runtime.host().store(), &agent.id);
            }
            announced.forget(&agent.id);
            announced
                .refresh(&cx.peer, &agent, runtime.host().private())
                .await;
            let mode = agent.permission_mode();
            answer(Ok(LoadSessionResponse::new()
                .modes(modes::mode_state(mode))
                .config_options(models::options_of(runtime.host(), &agent))))
        }
        ClientRequest::ResumeSessionRequest(req) => {
            let id = &req.session_id.0;
            // Resuming is for continuing the session; another process is writing it.
            let agent = match open_idle(&runtime, id, req.cwd, req.additional_directories)? {
                Opened::Writable(agent) => agent,
                Opened::LockedElsewhere(locked) => return Err(session_locked(locked)),
            };
            warn_broad_workspace(&cx, &client, &agent.id, &agent.cwd);
            let refused = start_mcp(&runtime, &agent, &req.mcp_servers, &cx, &client);
            announced.forget(&agent.id);
            let commands = Announced::load(&agent, runtime.host().private()).await;
            let (peer, session) = (cx.peer.clone(), agent.id.clone());
            let announced = announced.clone();
            cx.after_answer(Box::new(move || {
                for title in refused {
                    notice::send(&peer, &client, &session, Severity::Warning, &title, None);
                }
                announced.send(&peer, &session, commands)
            }));
            let mode = agent.permission_mode();
            answer(Ok(ResumeSessionResponse::new()
                .modes(modes::mode_state(mode))
                .config_options(models::options_of(runtime.host(), &agent))))
        }
        ClientRequest::SetSessionModeRequest(req) => {
            set_mode(&runtime, &req, &cx)?;
            answer(Ok(SetSessionModeResponse::new()))
        }
        ClientRequest::SetSessionConfigOptionRequest(req) => {
            let agent = live_agent(&runtime, &req.session_id.0)?;
            if &*req.config_id.0 == models::MODEL_OPTION
                && runtime.host().models().choices().len() > 1
            {
                models::set_model(runtime.host(), &agent, &req)?;
            } else {
                set_config_option(&agent, &req, &cx)?;
            }
            answer(Ok(SetSessionConfigOptionResponse::new(models::options_of(
                runtime.host(),
                &agent,
            ))))
        }
        ClientRequest::ListSessionsRequest(req) => answer(list_sessions(
            &runtime,
            req.cwd.as_deref(),
            req.cursor.as_deref(),
        )),
        ClientRequest::CloseSessionRequest(req) => {
            let id = &req.session_id.0;
            if !runtime.close_session(id).await {
                return Err(session_not_found(id, None));
            }
            answer(Ok(CloseSessionResponse::new()))
        }
        ClientRequest::DeleteSessionRequest(req) => {
            runtime
                .delete_session(&req.session_id.0)
                .await
                .map_err(store_error)?;
            answer(Ok(DeleteSessionResponse::new()))
        }
        ClientRequest::PromptRequest(req) => {
            super::prompt::prompt(runtime, client, announced, req, cx).await
        }
        _ => Err(RpcError::method_not_found(&method)),
    }
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

/// `session/list`: a page of top-level sessions. The cursor names the last session of the
/// page before (`kin2:<updatedNs>:<id>`), so paging neither repeats nor skips a session
/// while others are created or deleted.
fn list_sessions(
    runtime: &Runtime,
    cwd: Option<&Path>,
    cursor: Option<&str>,
) -> Result<ListSessionsResponse, RpcError> {
    let from = cursor.map(parse_cursor).transpose()?;
    let cwd = cwd.map(|c| c.to_string_lossy().into_owned());
    let (sessions, more) = runtime
        .host()
        .store()
        .list_page(cwd.as_deref(), from.as_ref(), LIST_PAGE)
        .map_err(store_error)?;
    let next = sessions
        .last()
        .filter(|_| more)
        .map(|s| format!("{CURSOR_PREFIX}{}:{}", s.updated_ns, s.id));
    let page: Vec<SessionInfo> = sessions
        .into_iter()
        .map(|s| {
            let mut info = SessionInfo::new(s.id, s.cwd.unwrap_or_default());
            info.additional_directories =
                s.additional_directories.iter().map(PathBuf::from).collect();
            info.title = s.title;
            info.updated_at = Some(iso8601(s.updated_ms));
            if let Some(front_end) = s.started_over {
                info.meta = Some(serde_json::Map::from_iter([(
                    STARTED_OVER_META_KEY.to_owned(),
                    Value::String(front_end),
                )]));
            }
            info
        })
        .collect();
    let mut response = ListSessionsResponse::new(page);
    response.next_cursor = next;
    Ok(response)
}

const CURSOR_PREFIX: &str = "kin2:";
/// The `session/list` entry's `_meta` key naming the front end that made the session
/// (`"mcp"`), present only for a session not made by an editor.
const STARTED_OVER_META_KEY: &str = "kin.startedOver";

fn parse_cursor(cursor: &str) -> Result<ListCursor, RpcError> {
    cursor
        .strip_prefix(CURSOR_PREFIX)
        .and_then(|rest| rest.split_once(':'))
        .and_then(|(ns, id)| Some(ListCursor::new(ns.parse().ok()?, id.to_owned())))
        .ok_or_else(|| {
            RpcError::invalid_params(format!("invalid params: unknown cursor {cursor:?}"))
        })
}

fn set_mode(
    runtime: &Runtime,
    req: &SetSessionModeRequest,
    cx: &RequestContext,
) -> Result<(), RpcError> {
    let agent = live_agent(runtime, &req.session_id.0)?;
    let mode =
        PermissionMode::from_id(&req.mode_id.0).ok_or_else(|| unknown_mode(&req.mode_id.0))?;
    // The mode was set through modes; keep the config option view in step.
    let options = |_| models::options_update(runtime.host(), &agent);
    switch_mode(&agent, mode, cx, &options)
}

fn set_config_option(
    agent: &Arc<Agent>,
    req: &SetSessionConfigOptionRequest,
    cx: &RequestContext,
) -> Result<PermissionMode, RpcError> {
    if &*req.config_id.0 != modes::MODE_OPTION {
        return Err(RpcError::invalid_params(format!(
            "invalid params: unknown config option {:?}; kin has {:?}",
            req.config_id.0,
            modes::MODE_OPTION
        )));
    }
    let value = req.value.as_value_id().ok_or_else(|| {
        RpcError::invalid_params(
            "invalid params: the `mode` option takes a value id, not a boolean",
        )
    })?;
    let mode = PermissionMode::from_id(&value.0).ok_or_else(|| unknown_mode(&value.0))?;
    // Set through config options; keep the modes view in step.
    switch_mode(agent, mode, cx, &modes::current_mode_update)?;
    Ok(mode)
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

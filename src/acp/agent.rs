//! Editor-facing ACP agent: decodes requests, calls the session host, answers, and streams
//! host events as `session/update` notifications.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthenticateResponse, CancelNotification,
    ClientCapabilities, ClientNotification, ClientRequest, CloseSessionResponse, ContentBlock,
    DeleteSessionResponse, Implementation, InitializeResponse, ListSessionsResponse,
    LoadSessionResponse, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    ResumeSessionResponse, SessionAdditionalDirectoriesCapabilities, SessionCapabilities,
    SessionCloseCapabilities, SessionDeleteCapabilities, SessionInfo, SessionListCapabilities,
    SessionNotification, SessionResumeCapabilities, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol_schema::{MethodDispatchError, ProtocolVersion};
use futures::FutureExt;
use serde::Serialize;
use serde_json::{json, Value};

use super::bridge::AcpBridge;
use super::{models, modes, updates};
use crate::agent::host::{StopReason as TurnStop, Subscription};
use crate::agent::{Agent, TurnError};
use crate::model::Credentials;
use crate::rpc::{Handler, Reply, RequestContext, RpcError};
use crate::runtime::{Runtime, RuntimeError};
use crate::session::{StoreError, UserPart};
use crate::time::iso8601;
use crate::tools::PermissionMode;

/// ACP's "resource not found" code, used for unknown sessions.
const RESOURCE_NOT_FOUND: i32 = -32002;
/// ACP's "authentication required" code: a prompt while the model has no key.
const AUTH_REQUIRED: i32 = -32000;
/// kin's code for a session another process has open for writing (a server-defined code).
const SESSION_LOCKED: i32 = -32001;
/// Where a `session/load` answer says the session was opened read-only: `_meta` key.
const READ_ONLY_META_KEY: &str = "kin.readOnly";
/// The auth method kin advertises when the model has no API key: the client calls
/// `authenticate` with it after the user has provided a key, and kin looks for it again.
const API_KEY_METHOD: &str = "api-key";
/// Sessions per `session/list` page.
const LIST_PAGE: usize = 50;

pub struct AcpAgent {
    runtime: Arc<Runtime>,
    initialized: AtomicBool,
    /// What the client said it offers in `initialize` (fs, terminal, ...).
    client: Mutex<ClientCapabilities>,
    /// Session events to the client as `session/update`s, from `initialize` on.
    updates: Mutex<Option<Subscription>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl AcpAgent {
    pub fn new(runtime: Arc<Runtime>) -> Self {
        Self {
            runtime,
            initialized: AtomicBool::new(false),
            client: Mutex::new(ClientCapabilities::new()),
            updates: Mutex::new(None),
        }
    }

    fn client_capabilities(&self) -> ClientCapabilities {
        self.client
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

fn answer<T: Serialize>(result: Result<T, RpcError>) -> Result<Value, RpcError> {
    result.and_then(|value| {
        serde_json::to_value(value)
            .map_err(|e| RpcError::internal(format!("encoding the answer failed: {e}")))
    })
}

fn session_not_found(id: &str, detail: Option<&str>) -> RpcError {
    let message = match detail {
        Some(detail) => format!("session not found: {id} ({detail})"),
        None => format!("session not found: {id}"),
    };
    RpcError::new(RESOURCE_NOT_FOUND, message).with_data(json!({ "sessionId": id }))
}

fn store_error(error: StoreError) -> RpcError {
    match error {
        StoreError::NotFound { id } | StoreError::InvalidId { id } => session_not_found(&id, None),
        locked @ StoreError::Locked { .. } => session_locked(locked),
        other => RpcError::internal(other.to_string()),
    }
}

/// `-32001` for a session another process has open for writing, naming that process.
fn session_locked(error: StoreError) -> RpcError {
    let StoreError::Locked { id, pid } = &error else {
        return RpcError::internal(error.to_string());
    };
    let data = json!({ "sessionId": id, "pid": pid });
    RpcError::new(SESSION_LOCKED, error.to_string()).with_data(data)
}

fn runtime_error(error: RuntimeError) -> RpcError {
    match error {
        RuntimeError::Store(error) => store_error(error),
        other => RpcError::internal(other.to_string()),
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

fn prompt_parts(blocks: Vec<ContentBlock>) -> Result<Vec<UserPart>, RpcError> {
    blocks
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => Ok(UserPart::Text { text: text.text }),
            ContentBlock::ResourceLink(link) => Ok(UserPart::ResourceLink {
                uri: link.uri,
                name: link.name,
                mime_type: link.mime_type,
                title: link.title,
                description: link.description,
                size: link.size,
            }),
            other => Err(RpcError::invalid_params(format!(
                "invalid params: prompt content of type {:?} is not supported (see promptCapabilities)",
                serde_json::to_value(&other)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| "unknown".into())
            ))),
        })
        .collect()
}

impl Handler for AcpAgent {
    fn request(&self, method: String, params: Value, cx: RequestContext) -> Reply {
        let ready = Reply::Now;
        let request = match ClientRequest::from_method_and_params(&method, &params) {
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
            );
            *lock(&self.updates) = Some(self.runtime.host().events().subscribe(forward));
            tracing::debug!(version = ?init.protocol_version, client = ?init.client_info, "initialize");
            *self.client.lock().unwrap_or_else(|p| p.into_inner()) =
                init.client_capabilities.clone();
            let response = answer(Ok(initialize_response(&self.runtime)));
            // Warming the model's client up starts a thread: only once the answer is out.
            let model = self.runtime.host().model().clone();
            return Reply::NowThen(response, Box::new(move || model.prepare()));
        }
        if !self.initialized.load(Ordering::Acquire) {
            return ready(Err(not_initialized(&method)));
        }
        let runtime = self.runtime.clone();
        let client = self.client_capabilities();
        Reply::Later(async move { dispatch(runtime, client, request, method, cx).await }.boxed())
    }

    fn notification(&self, method: String, params: Value) {
        if !self.initialized.load(Ordering::Acquire) {
            return;
        }
        match ClientNotification::from_method_and_params(&method, &params) {
            Ok(ClientNotification::CancelNotification(CancelNotification {
                session_id, ..
            })) => {
                if let Some(agent) = self.runtime.host().live(&session_id.0) {
                    agent.cancel();
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

/// The auth method to advertise: only while the model lacks its key.
fn auth_methods(runtime: &Runtime) -> Vec<AuthMethod> {
    match runtime.host().model().credentials() {
        Credentials::Missing { hint } => vec![AuthMethod::Agent(
            AuthMethodAgent::new(API_KEY_METHOD, "API key").description(format!(
                "kin has no API key for its model: {hint}. A key added to the config file is \
                 found when you authenticate again; one set in kin's environment needs a \
                 restart of kin."
            )),
        )],
        Credentials::NotNeeded | Credentials::Present { .. } => Vec::new(),
    }
}

fn auth_required(hint: &str) -> RpcError {
    RpcError::new(
        AUTH_REQUIRED,
        format!("authentication required: kin has no API key for its model: {hint}"),
    )
}

/// `authenticate` with kin's method: reads the whole model configuration again (config file,
/// key command, environment) and succeeds once there is a key.
async fn authenticate(runtime: &Runtime, method: &str) -> Result<Value, RpcError> {
    if method != API_KEY_METHOD || runtime.host().model().credentials() == Credentials::NotNeeded {
        return Err(RpcError::invalid_params(format!(
            "invalid params: unknown authentication method {method:?}; {}",
            match runtime.host().model().credentials() {
                Credentials::NotNeeded => "kin advertises none".to_owned(),
                _ => format!("kin advertises only {API_KEY_METHOD:?}"),
            }
        )));
    }
    match runtime.host().model().reload_credentials().await {
        Credentials::Missing { hint } => Err(RpcError::new(
            AUTH_REQUIRED,
            format!("still no API key for the model: {hint}"),
        )),
        Credentials::Present { source } => {
            tracing::info!(%source, "found the API key");
            answer(Ok(AuthenticateResponse::new()))
        }
        Credentials::NotNeeded => answer(Ok(AuthenticateResponse::new())),
    }
}

fn initialize_response(runtime: &Runtime) -> InitializeResponse {
    let sessions = SessionCapabilities::new()
        .list(SessionListCapabilities::new())
        .resume(SessionResumeCapabilities::new())
        .close(SessionCloseCapabilities::new())
        .delete(SessionDeleteCapabilities::new())
        .additional_directories(SessionAdditionalDirectoriesCapabilities::new());
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(PromptCapabilities::new())
        .session_capabilities(sessions);
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .auth_methods(auth_methods(runtime))
        .agent_info(Implementation::new("kin", env!("CARGO_PKG_VERSION")).title("kin".to_owned()))
}

async fn dispatch(
    runtime: Arc<Runtime>,
    client: ClientCapabilities,
    request: ClientRequest,
    method: String,
    cx: RequestContext,
) -> Result<Value, RpcError> {
    match request {
        ClientRequest::AuthenticateRequest(req) => authenticate(&runtime, &req.method_id.0).await,
        ClientRequest::NewSessionRequest(req) => answer((|| {
            let additional = check_roots(&req.cwd, &req.additional_directories)?;
            if !req.mcp_servers.is_empty() {
                tracing::warn!(
                    count = req.mcp_servers.len(),
                    "MCP servers are not supported yet; ignoring them"
                );
            }
            let depth = delegation_depth(req.meta.as_ref())?;
            let agent = runtime
                .host()
                .create_session_at_depth(req.cwd.clone(), additional, depth)
                .map_err(runtime_error)?;
            let mode = agent.permission_mode();
            Ok(NewSessionResponse::new(agent.id.clone())
                .modes(modes::mode_state(mode))
                .config_options(models::options_of(runtime.host(), &agent)))
        })()),
        ClientRequest::LoadSessionRequest(req) => {
            let id = &req.session_id.0;
            let agent = match open_idle(&runtime, id, req.cwd, req.additional_directories)? {
                Opened::Writable(agent) => agent,
                Opened::LockedElsewhere(locked) => {
                    return load_read_only(&runtime, &client, id, locked, &cx);
                }
            };
            let mut replayed = agent.with_events(|events| updates::replay(events, &agent.tools));
            replayed.retain(|update| compaction(&client) || !models::is_compaction(update));
            for update in replayed {
                cx.peer.notify(
                    "session/update",
                    &SessionNotification::new(agent.id.clone(), update),
                );
            }
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
            // Closing a session stops the background work it owns.
            runtime.tasks().cancel_owned(id);
            match runtime.host().unpublish(id) {
                Some(agent) => agent.settle().await,
                None if runtime.host().store().exists(id) => {}
                None => return Err(session_not_found(id, None)),
            }
            answer(Ok(CloseSessionResponse::new()))
        }
        ClientRequest::DeleteSessionRequest(req) => {
            runtime.tasks().cancel_owned(&req.session_id.0);
            runtime
                .host()
                .delete_session(&req.session_id.0)
                .await
                .map_err(store_error)?;
            answer(Ok(DeleteSessionResponse::new()))
        }
        ClientRequest::PromptRequest(req) => prompt(runtime, client, req, cx).await,
        _ => Err(RpcError::method_not_found(&method)),
    }
}

/// The delegation depth of a new session: from the parent kin's `_meta`, else from the
/// environment of a launcher that does not speak ACP, else 0 (a top-level session).
fn delegation_depth(meta: Option<&serde_json::Map<String, Value>>) -> Result<u32, RpcError> {
    use super::client::{DEPTH_ENV, DEPTH_META_KEY};
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
    let agent = match runtime.host().open_session_in(id, cwd, Some(additional)) {
        Ok(agent) => agent,
        Err(RuntimeError::Store(locked @ StoreError::Locked { .. })) => {
            return Ok(Opened::LockedElsewhere(locked))
        }
        Err(error) => return Err(runtime_error(error)),
    };
    // Background tasks an earlier process left unfinished show as interrupted.
    runtime.control().restore_interrupted(&agent);
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
    let loaded = runtime.host().store().load(id).map_err(store_error)?;
    tracing::info!(session = id, writer = ?pid, "replaying a session another process is writing, read-only");
    let compaction = compaction(client);
    for update in updates::replay(&loaded.events, runtime.host().tools()) {
        if !compaction && models::is_compaction(&update) {
            continue;
        }
        cx.peer.notify(
            "session/update",
            &SessionNotification::new(id.to_owned(), update),
        );
    }
    let mode = crate::agent::restored_mode(&loaded.events);
    let options = models::options_of_log(runtime.host(), &loaded.events);
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

fn list_sessions(
    runtime: &Runtime,
    cwd: Option<&Path>,
    cursor: Option<&str>,
) -> Result<ListSessionsResponse, RpcError> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .strip_prefix("kin1:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| {
                RpcError::invalid_params(format!("invalid params: unknown cursor {cursor:?}"))
            })?,
    };
    let cwd = cwd.map(|c| c.to_string_lossy().into_owned());
    let sessions: Vec<_> = runtime
        .host()
        .store()
        .list()
        .map_err(store_error)?
        .into_iter()
        .filter(|s| s.parent_session.is_none())
        .filter(|s| cwd.is_none() || s.cwd == cwd)
        .collect();
    let page: Vec<SessionInfo> = sessions
        .iter()
        .skip(start)
        .take(LIST_PAGE)
        .map(|s| {
            let mut info = SessionInfo::new(s.id.clone(), s.cwd.clone().unwrap_or_default());
            info.additional_directories =
                s.additional_directories.iter().map(PathBuf::from).collect();
            info.title.clone_from(&s.title);
            info.updated_at = Some(iso8601(s.updated_ms));
            info
        })
        .collect();
    let end = start + page.len();
    let mut response = ListSessionsResponse::new(page);
    if end < sessions.len() {
        response.next_cursor = Some(format!("kin1:{end}"));
    }
    Ok(response)
}

/// The live agent of a session a request names; a stored but closed one says how to open it,
/// or, while another process has it open for writing, names that process (`-32001`).
fn live_agent(runtime: &Runtime, id: &str) -> Result<Arc<Agent>, RpcError> {
    if let Some(agent) = runtime.host().live(id) {
        return Ok(agent);
    }
    let store = runtime.host().store();
    if !store.exists(id) {
        return Err(session_not_found(id, None));
    }
    match store.lock(id) {
        Err(locked @ StoreError::Locked { .. }) => Err(session_locked(locked)),
        _ => Err(session_not_found(
            id,
            Some("it is stored but not open: call session/load or session/resume first"),
        )),
    }
}

/// Switches a session's permission mode, logs it, and tells the editor's other view of it.
fn switch_mode(
    agent: &Agent,
    mode: PermissionMode,
    cx: &RequestContext,
    echo: &dyn Fn(PermissionMode) -> agent_client_protocol_schema::v1::SessionUpdate,
) -> Result<(), RpcError> {
    let changed = agent
        .set_permission_mode(mode)
        .map_err(|e| RpcError::internal(format!("could not record the mode change: {e}")))?;
    if changed {
        cx.peer.notify(
            "session/update",
            &SessionNotification::new(agent.id.clone(), echo(mode)),
        );
    }
    Ok(())
}

fn unknown_mode(id: &str) -> RpcError {
    let known: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.id()).collect();
    RpcError::invalid_params(format!(
        "invalid params: unknown mode {id:?}; kin's modes are {}",
        known.join(", ")
    ))
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

async fn prompt(
    runtime: Arc<Runtime>,
    client: ClientCapabilities,
    req: PromptRequest,
    cx: RequestContext,
) -> Result<Value, RpcError> {
    let id = req.session_id.0.to_string();
    let agent = live_agent(&runtime, &id)?;
    let parts = prompt_parts(req.prompt)?;
    if let Credentials::Missing { hint } = runtime.host().model().credentials() {
        return Err(auth_required(&hint));
    }
    let bridge = Arc::new(AcpBridge::new(cx.peer.clone(), agent.id.clone(), &client));
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
        TurnStop::EndTurn => StopReason::EndTurn,
        TurnStop::MaxTokens => StopReason::MaxTokens,
        TurnStop::Refusal => StopReason::Refusal,
        TurnStop::Cancelled => StopReason::Cancelled,
        TurnStop::MaxTurnRequests => StopReason::MaxTurnRequests,
        TurnStop::Error => {
            let detail = outcome
                .err()
                .map_or_else(|| "the turn failed".into(), |e| e.to_string());
            return Err(RpcError::internal(detail));
        }
    };
    answer(Ok(PromptResponse::new(stop)))
}

//! Editor-facing ACP agent: decodes requests, calls the session host, answers, and streams
//! host events as `session/update` notifications.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol_schema::v1::{
    AgentCapabilities, CancelNotification, ClientCapabilities, ClientNotification, ClientRequest,
    CloseSessionResponse, DeleteSessionResponse, Implementation, InitializeResponse,
    ListSessionsResponse, McpCapabilities, PromptCapabilities,
    SessionAdditionalDirectoriesCapabilities, SessionCapabilities, SessionCloseCapabilities,
    SessionDeleteCapabilities, SessionInfo, SessionListCapabilities, SessionResumeCapabilities,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol_schema::{MethodDispatchError, ProtocolVersion};
use futures::FutureExt;
use serde_json::Value;

use super::answers::{
    answer, live_agent, session_not_found, store_error, switch_mode, unknown_mode,
};
use super::open::Opening;
use super::prompt::Announced;
use super::{models, modes};
use crate::agent::host::Subscription;
use crate::agent::Agent;
use crate::rpc::{Handler, Reply, RequestContext, RpcError};
use crate::runtime::Runtime;
use crate::session::ListCursor;
use crate::sync::lock;
use crate::time::iso8601;
use crate::tools::PermissionMode;

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
    let opening = Opening {
        runtime: &runtime,
        client: &client,
        announced: &announced,
        cx: &cx,
    };
    match request {
        ClientRequest::AuthenticateRequest(req) => {
            super::auth::authenticate(&runtime, &req.method_id.0).await
        }
        ClientRequest::NewSessionRequest(req) => answer(opening.new_session(req).await),
        ClientRequest::LoadSessionRequest(req) => opening.load_session(req).await,
        ClientRequest::ResumeSessionRequest(req) => answer(opening.resume_session(req).await),
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

//! Answers and errors shared by the ACP request handlers: encoding an answer, the error codes
//! for unknown and locked sessions, finding a request's live session, switching its mode.

use std::sync::Arc;

use agent_client_protocol_schema::v1::SessionNotification;
use serde::Serialize;
use serde_json::{json, Value};

use crate::agent::Agent;
use crate::rpc::{RequestContext, RpcError};
use crate::runtime::{Runtime, RuntimeError};
use crate::session::StoreError;
use crate::tools::PermissionMode;

/// ACP's "resource not found" code, used for unknown sessions.
const RESOURCE_NOT_FOUND: i32 = -32002;
/// ACP's "authentication required" code: a prompt while the model has no key.
pub(super) const AUTH_REQUIRED: i32 = -32000;
/// kin's code for a session another process has open for writing (a server-defined code).
const SESSION_LOCKED: i32 = -32001;

pub(super) fn answer<T: Serialize>(result: Result<T, RpcError>) -> Result<Value, RpcError> {
    result.and_then(|value| {
        serde_json::to_value(value)
            .map_err(|e| RpcError::internal(format!("encoding the answer failed: {e}")))
    })
}

pub(super) fn session_not_found(id: &str, detail: Option<&str>) -> RpcError {
    let message = match detail {
        Some(detail) => format!("session not found: {id} ({detail})"),
        None => format!("session not found: {id}"),
    };
    RpcError::new(RESOURCE_NOT_FOUND, message).with_data(json!({ "sessionId": id }))
}

pub(super) fn store_error(error: StoreError) -> RpcError {
    match error {
        StoreError::NotFound { id } | StoreError::InvalidId { id } => session_not_found(&id, None),
        locked @ StoreError::Locked { .. } => session_locked(locked),
        other => RpcError::internal(other.to_string()),
    }
}

/// `-32001` for a session another process has open for writing, naming that process.
pub(super) fn session_locked(error: StoreError) -> RpcError {
    let StoreError::Locked { id, pid } = &error else {
        return RpcError::internal(error.to_string());
    };
    let data = json!({ "sessionId": id, "pid": pid });
    RpcError::new(SESSION_LOCKED, error.to_string()).with_data(data)
}

pub(super) fn runtime_error(error: RuntimeError) -> RpcError {
    match error {
        RuntimeError::Store(error) => store_error(error),
        other => RpcError::internal(other.to_string()),
    }
}

/// The live agent of a session a request names; a stored but closed one says how to open it,
/// or, while another process has it open for writing, names that process (`-32001`).
pub(super) fn live_agent(runtime: &Runtime, id: &str) -> Result<Arc<Agent>, RpcError> {
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
pub(super) fn switch_mode(
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

pub(super) fn unknown_mode(id: &str) -> RpcError {
    let known: Vec<&str> = PermissionMode::ALL.iter().map(|m| m.id()).collect();
    RpcError::invalid_params(format!(
        "invalid params: unknown mode {id:?}; kin's modes are {}",
        known.join(", ")
    ))
}

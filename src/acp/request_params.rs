//! A request's params as ACP's typed request: lenient where it costs nothing, and without
//! copying a prompt's megabytes.

use agent_client_protocol_schema::v1::ClientRequest;
use agent_client_protocol_schema::MethodDispatchError;
use serde_json::Value;

/// The typed request. A prompt's params are moved into it, not copied as the schema's
/// dispatch would: they may hold megabytes of images.
pub(super) fn client_request(
    method: &str,
    params: Value,
) -> Result<ClientRequest, MethodDispatchError> {
    if method != "session/prompt" {
        return ClientRequest::from_method_and_params(method, &params);
    }
    serde_json::from_value(params)
        .map(ClientRequest::PromptRequest)
        .map_err(|source| MethodDispatchError::InvalidPayload {
            method: method.to_owned(),
            source,
        })
}

/// Reads a `protocolVersion` sent as a numeric string (`"1"`, as some clients do) as that
/// number; anything else is left for the usual decoding to judge.
pub(super) fn numeric_protocol_version(params: &mut Value) {
    let Some(version) = params.get_mut("protocolVersion") else {
        return;
    };
    if let Some(number) = version
        .as_str()
        .and_then(|text| text.trim().parse::<u16>().ok())
    {
        *version = Value::from(number);
    }
}

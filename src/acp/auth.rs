//! ACP authentication: the methods `initialize` offers while the model has no key, the
//! `authenticate` request, and the `auth_required` error a prompt gets meanwhile.
//!
//! Two methods: `kin-login`, of type `terminal` (the client runs `kin login` in a terminal),
//! offered only to clients that can run one (`clientCapabilities.auth.terminal`, or the
//! `terminal-auth` `_meta` key older clients and the ACP registry's validator send); and
//! `api-key`, of type `agent`, for every client: kin reads its configuration again. Either way
//! `authenticate` finds a key written since kin started, without a restart.

use agent_client_protocol_schema::v1::{
    AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateResponse, ClientCapabilities,
};
use serde_json::{json, Value};

use super::answers::{answer, AUTH_REQUIRED};
use crate::model::Credentials;
use crate::rpc::RpcError;
use crate::runtime::Runtime;

/// The `agent` method: the client calls `authenticate` once the user has given a key.
const API_KEY_METHOD: &str = "api-key";
/// The `terminal` method: the client runs `kin login`, then calls `authenticate`.
const TERMINAL_METHOD: &str = "kin-login";
/// The `_meta` key of `clientCapabilities` by which clients before `auth.terminal` say they
/// can run a terminal method.
const TERMINAL_AUTH_META: &str = "terminal-auth";

/// Whether the client can run a `terminal` auth method.
pub(super) fn runs_terminal(client: &ClientCapabilities) -> bool {
    client.auth.terminal
        || client
            .meta
            .as_ref()
            .and_then(|meta| meta.get(TERMINAL_AUTH_META))
            .is_some_and(|value| value.as_bool() == Some(true))
}

/// The methods to offer: none while the model has its key (or needs none).
pub(super) fn methods(runtime: &Runtime, client: &ClientCapabilities) -> Vec<AuthMethod> {
    match runtime.host().model().credentials() {
        Credentials::Missing { hint } => offered(&hint, runs_terminal(client)),
        Credentials::NotNeeded | Credentials::Present { .. } => Vec::new(),
    }
}

fn offered(hint: &str, terminal: bool) -> Vec<AuthMethod> {
    let mut methods = Vec::with_capacity(2);
    if terminal {
        methods.push(AuthMethod::Terminal(
            AuthMethodTerminal::new(TERMINAL_METHOD, "Sign in (kin login)")
                .description(
                    "Runs `kin login` in a terminal: choose the endpoint and the model, paste \
                     the API key (kept in the OS keyring), checked with one request."
                        .to_owned(),
                )
                .args(vec!["login".to_owned()]),
        ));
    }
    methods.push(AuthMethod::Agent(
        AuthMethodAgent::new(API_KEY_METHOD, "API key").description(format!(
            "kin has no API key for its model: {hint}. A key given with `kin login` or added \
             to the config file is found when you authenticate again; one set in kin's \
             environment needs a restart of kin."
        )),
    ));
    methods
}

/// `authenticate` with either method: reads the whole model configuration again (config file,
/// stored key, key command, environment) and succeeds once there is a key.
pub(super) async fn authenticate(runtime: &Runtime, method: &str) -> Result<Value, RpcError> {
    let credentials = runtime.host().model().credentials();
    if ![API_KEY_METHOD, TERMINAL_METHOD].contains(&method) || credentials == Credentials::NotNeeded
    {
        return Err(RpcError::invalid_params(format!(
            "invalid params: unknown authentication method {method:?}; {}",
            match credentials {
                Credentials::NotNeeded => "kin advertises none".to_owned(),
                _ => format!("kin advertises {TERMINAL_METHOD:?} and {API_KEY_METHOD:?}"),
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

/// The error of a prompt while the model has no key: names the method that fixes it, and
/// lists the methods in `data.authMethods`.
pub(super) fn required(hint: &str, client: &ClientCapabilities) -> RpcError {
    let terminal = runs_terminal(client);
    let fix = if terminal {
        format!("sign in with the {TERMINAL_METHOD:?} auth method (`kin login`)")
    } else {
        format!(
            "run `kin login` in a terminal, then authenticate with the {API_KEY_METHOD:?} method"
        )
    };
    let methods = serde_json::to_value(offered(hint, terminal)).unwrap_or(Value::Null);
    RpcError::new(
        AUTH_REQUIRED,
        format!("authentication required: kin has no API key for its model: {hint}; {fix}"),
    )
    .with_data(json!({ "authMethods": methods }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(json: Value) -> ClientCapabilities {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn the_terminal_method_goes_to_clients_that_can_run_it() {
        assert!(runs_terminal(&client(json!({"auth": {"terminal": true}}))));
        assert!(runs_terminal(&client(
            json!({"_meta": {"terminal-auth": true}})
        )));
        assert!(!runs_terminal(&client(
            json!({"_meta": {"terminal-auth": false}})
        )));
        assert!(!runs_terminal(&client(json!({"terminal": true}))));
        let methods = serde_json::to_value(offered("no key", true)).unwrap();
        assert_eq!(methods[0]["type"], "terminal");
        assert_eq!(methods[0]["id"], TERMINAL_METHOD);
        assert_eq!(methods[0]["args"], json!(["login"]));
        assert_eq!(methods[1]["id"], API_KEY_METHOD);
        let methods = serde_json::to_value(offered("no key", false)).unwrap();
        assert_eq!(methods.as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn auth_required_names_the_method_to_use() {
        let error = required("no key", &client(json!({"auth": {"terminal": true}})));
        assert_eq!(error.code, AUTH_REQUIRED);
        assert!(error.message.contains("\"kin-login\""), "{}", error.message);
        let error = required("no key", &ClientCapabilities::new());
        assert!(error.message.contains("\"api-key\""), "{}", error.message);
    }
}

//! OAuth for HTTP MCP servers of the config file, through rmcp's `auth` support: `kin mcp
//! login NAME` (the browser step, [`login`]), the tokens of each server kept by kin
//! ([`store`]) and sent, refreshed when they expire, on every request of its connection, and
//! `kin mcp logout NAME`. An editor's server never gets these: it keeps its own headers.

mod assertion;
mod enterprise;
mod legacy;
mod login;
mod store;

use std::time::Duration;

use rmcp::transport::auth::{
    AuthClient, AuthError, AuthorizationManager, ClientCredentialsConfig, OAuthClientConfig,
    OAuthState, WWWAuthenticateParams,
};
use tokio_util::sync::CancellationToken;

pub(crate) use login::login;
use store::TokenStore;

use super::{ClientSecret, Grant, OAuthSettings, ServerSpec, Transport};
use crate::process::child_env::ChildEnv;

/// Why a login, a logout or a logged-in connection failed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// rmcp's OAuth flow failed (discovery, registration, token exchange, refresh).
    #[error("{0}")]
    Flow(String),
    /// The loopback redirect could not be served.
    #[error("the login's loopback redirect: {0}")]
    Redirect(String),
    /// The authorization server sent the user back with an error.
    #[error("{0}")]
    Refused(String),
    /// No redirect came in time.
    #[error("no answer from the browser within {0} minutes")]
    TimedOut(u64),
    /// The user or the session stopped it.
    #[error("the login was cancelled")]
    Cancelled,
    /// `kin mcp login NAME` names no configured server.
    #[error("no MCP server `{0}` in the config file ([mcp_servers.{0}])")]
    NoSuchServer(String),
    /// The server is not one kin logs in to.
    #[error("the MCP server `{0}` is not an HTTP server of the config file (`url`); only those have a login")]
    NotHttp(String),
    /// `client_secret_env` names a variable that is not set.
    #[error("`client_secret_env` of [mcp_servers.{0}] names `{1}`, which is not set")]
    SecretUnset(String, String),
    /// The token store failed.
    #[error("the token store: {0}")]
    Store(String),
}

impl From<AuthError> for OAuthError {
    fn from(error: AuthError) -> Self {
        Self::Flow(error.to_string())
    }
}

/// The token store of server `name` at `url` (deciding keyring or file may ask D-Bus).
async fn store_for(name: &str, url: &str) -> TokenStore {
    let (name, url) = (name.to_owned(), url.to_owned());
    let fallback = (name.clone(), url.clone());
    tokio::task::spawn_blocking(move || TokenStore::new(&name, &url))
        .await
        .unwrap_or_else(|_| TokenStore::new(&fallback.0, &fallback.1))
}

/// rmcp's OAuth machinery for the server at `url`, its tokens in `store`. Its HTTP client
/// speaks TLS through kin's rustls provider (`ring`), as the model client does.
async fn manager(url: &str, store: TokenStore) -> Result<AuthorizationManager, OAuthError> {
    // `Err` only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut manager = AuthorizationManager::new(url).await?;
    manager.set_credential_store(store);
    Ok(manager)
}

/// The pre-registered client's secret of server `name`, when its settings give one.
fn client_secret(name: &str, settings: &OAuthSettings) -> Result<Option<String>, OAuthError> {
    match &settings.client_secret {
        None => Ok(None),
        Some(ClientSecret::Value(secret)) => Ok(Some(secret.clone())),
        Some(ClientSecret::Unset(variable)) => {
            Err(OAuthError::SecretUnset(name.to_owned(), variable.clone()))
        }
    }
}

/// Gets server `name`'s tokens without a user at hand (see [`OAuthSettings::unattended`]).
async fn unattended(
    name: &str,
    url: &str,
    settings: &OAuthSettings,
    challenge: Option<&str>,
    env: &ChildEnv,
) -> Result<(), OAuthError> {
    match &settings.grant {
        Grant::Enterprise(idp) => enterprise::exchange(name, url, settings, idp, env).await,
        _ => client_credentials(name, url, settings, challenge).await,
    }
}

/// Gets server `name`'s tokens with the client credentials grant (its configured client id and
/// secret; no user): the configured scopes, else the ones the server's `challenge` names.
async fn client_credentials(
    name: &str,
    url: &str,
    settings: &OAuthSettings,
    challenge: Option<&str>,
) -> Result<(), OAuthError> {
    let mut scopes = settings.scopes.clone();
    if let (true, Some(challenge), Ok(base)) =
        (scopes.is_empty(), challenge, reqwest::Url::parse(url))
    {
        let asked = WWWAuthenticateParams::parse(challenge, &base).scope;
        scopes = asked
            .iter()
            .flat_map(|s| s.split_whitespace())
            .map(str::to_owned)
            .collect();
    }
    let client_id = settings.client_id.clone();
    if let (Some(client_id), Some(key_file)) = (&client_id, &settings.private_key_file) {
        return assertion::client_credentials(name, url, client_id, key_file, &scopes).await;
    }
    let (Some(client_id), Some(client_secret)) = (client_id, client_secret(name, settings)?) else {
        return Err(OAuthError::Flow(
            "the client credentials grant needs `client_id` and its secret or signing key".into(),
        ));
    };
    let store = store_for(name, url).await;
    let mut state = OAuthState::Unauthorized(manager(url, store).await?);
    let config = ClientCredentialsConfig::ClientSecret {
        client_id,
        client_secret,
        scopes,
        resource: Some(url.to_owned()),
    };
    state.authenticate_client_credentials(config).await?;
    Ok(())
}

/// An HTTP client that sends server `name`'s stored token (refreshing it when it expires), or
/// `None` when kin holds no login for it (the connection goes without, and a 401 says to log in).
pub(crate) async fn authorized(
    name: &str,
    url: &str,
    settings: &OAuthSettings,
    http: reqwest::Client,
    env: &ChildEnv,
) -> Result<Option<AuthClient<reqwest::Client>>, OAuthError> {
    let store = store_for(name, url).await;
    let stored = store.clone();
    let has = tokio::task::spawn_blocking(move || stored.stored())
        .await
        .map_err(|error| OAuthError::Store(error.to_string()))?
        .map_err(|error| OAuthError::Store(error.to_string()))?;
    if has.is_none_or(|credentials| credentials.token_response.is_none()) {
        if !settings.unattended() {
            return Ok(None);
        }
        // A login that needs no one is done now.
        unattended(name, url, settings, None, env).await?;
    }
    let mut manager = manager(url, store.clone()).await?;
    let loaded = match manager.initialize_from_store().await {
        Err(error) if legacy::is_issuer_mismatch(&error) => {
            // A 2025-03-26 server's metadata, as the login took it (see `legacy`).
            let Some(metadata) = legacy::origin_metadata(url).await else {
                return Err(error.into());
            };
            manager = self::manager(url, store).await?;
            manager.set_metadata(metadata);
            manager.initialize_from_store().await?
        }
        loaded => loaded?,
    };
    if !loaded {
        return Ok(None);
    }
    // A confidential client refreshes with its secret (the store keeps only its id).
    if let (Some(client_id), Some(secret)) = (&settings.client_id, client_secret(name, settings)?) {
        let (stored_id, _) = manager.get_credentials().await?;
        if stored_id == *client_id {
            manager.configure_client(
                OAuthClientConfig::new(client_id.as_str(), url).with_client_secret(secret),
            )?;
        }
    }
    Ok(Some(AuthClient::new(http, manager)))
}

/// The client id kin's stored login of server `name` at `url` was made with, if any.
pub(crate) async fn stored_client_id(name: &str, url: &str) -> Option<String> {
    let store = store_for(name, url).await;
    let stored = tokio::task::spawn_blocking(move || store.stored()).await;
    Some(stored.ok()?.ok()??.client_id).filter(|id| !id.is_empty())
}

/// The access token kin holds for server `name` at `url` (from a login in any session or
/// process), if any: compared, never shown.
pub(crate) async fn stored_token(name: &str, url: &str) -> Option<String> {
    use oauth2::TokenResponse;
    let store = store_for(name, url).await;
    let stored = tokio::task::spawn_blocking(move || store.stored()).await;
    let response = stored.ok()?.ok()??.token_response?;
    Some(response.access_token().secret().clone())
}

/// Whether kin holds a login for server `name` at `url`, for `kin config`: where, or `None`.
pub async fn login_state(name: &str, url: &str) -> Result<Option<String>, OAuthError> {
    let store = store_for(name, url).await;
    let stored = store
        .stored()
        .map_err(|error| OAuthError::Store(error.to_string()))?;
    Ok(stored
        .filter(|credentials| credentials.token_response.is_some())
        .map(|_| store.describe()))
}

/// How long `kin mcp login` waits for the server's answer to its first MCP request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The OAuth challenge (`WWW-Authenticate`) of the server at `url`, from its answer to the
/// first request of a session, sent as a session sends it (its `headers`, no token): the login
/// then starts where an in-session login starts (the challenge's `resource_metadata` and
/// `scope`). `None` when it sends none (it answered, refused without one, or did not answer in
/// time): discovery then starts from the URL.
async fn challenge_of(url: &str, headers: &[(String, String)]) -> Option<String> {
    use rmcp::service::ClientServiceExt;
    use rmcp::transport::StreamableHttpClientTransport as Http;
    let (client, config) = super::http::parts(url, headers).ok()?;
    let handshake =
        ().serve_with_lifecycle(Http::with_client(client, config), super::http::lifecycle());
    match tokio::time::timeout(PROBE_TIMEOUT, handshake).await {
        Ok(Ok(service)) => {
            let _ = service.cancel().await;
            None
        }
        Ok(Err(error)) => super::http::auth_refusal(&error)?.challenge,
        Err(_) => None,
    }
}

/// `kin mcp login NAME`: logs in, printing the URL on stderr; says where the tokens went.
/// Like a session, it first sends the server an MCP request (with its `headers`) and starts
/// from the server's challenge when it answers with one.
pub async fn login_at_terminal(
    name: &str,
    url: &str,
    headers: &[(String, String)],
    settings: &OAuthSettings,
) -> Result<String, OAuthError> {
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop.cancel();
        }
    });
    let tell = |address: &str| {
        eprintln!("kin: open this address to log in to the MCP server `{name}`:\n\n  {address}\n");
        eprintln!("kin: waiting for the browser to come back (Ctrl-C stops)...");
    };
    let challenge = tokio::select! {
        _ = cancel.cancelled() => None,
        challenge = challenge_of(url, headers) => challenge,
    };
    let done = match cancel.is_cancelled() {
        true => Err(OAuthError::Cancelled),
        // A login at the terminal starts no tool process: nothing to hide from one.
        false => {
            let env = ChildEnv::default();
            login(
                name,
                url,
                settings,
                challenge.as_deref(),
                &tell,
                &cancel,
                &env,
            )
            .await
        }
    };
    ctrl_c.abort();
    done?;
    Ok(store_for(name, url).await.describe())
}

/// `kin mcp logout NAME`: removes the stored tokens; `true` when there were some.
pub async fn logout(name: &str, url: &str) -> Result<bool, OAuthError> {
    let store = store_for(name, url).await;
    store
        .remove()
        .map_err(|error| OAuthError::Store(error.to_string()))
}

/// `kin mcp login NAME` (`login`) or `kin mcp logout NAME` against the configured `servers`;
/// says what happened on stderr; the exit code.
pub async fn command(login: bool, name: &str, servers: &[ServerSpec]) -> Result<u8, OAuthError> {
    let Some(server) = servers.iter().find(|server| server.name == name) else {
        return Err(OAuthError::NoSuchServer(name.to_owned()));
    };
    let Transport::Http {
        url,
        headers,
        login: Some(settings),
    } = &server.transport
    else {
        return Err(OAuthError::NotHttp(name.to_owned()));
    };
    if !login {
        match logout(name, url).await? {
            true => eprintln!("kin: logged out of the MCP server `{name}`; its tokens are removed"),
            false => eprintln!("kin: kin held no login for the MCP server `{name}`"),
        }
        return Ok(0);
    }
    match login_at_terminal(name, url, headers, settings).await {
        Ok(place) => {
            eprintln!("kin: logged in to the MCP server `{name}`; the tokens are in {place}");
            Ok(0)
        }
        Err(OAuthError::Cancelled) => {
            eprintln!("kin mcp login: cancelled; nothing was stored");
            Ok(130)
        }
        Err(error) => Err(error),
    }
}

/// `kin config`'s line on each configured HTTP server's login.
pub async fn render_logins(servers: &[ServerSpec]) -> String {
    let mut text = String::new();
    for server in servers {
        let Transport::Http {
            url,
            headers,
            login: Some(_),
        } = &server.transport
        else {
            continue;
        };
        let name = &server.name;
        let state = match login_state(name, url).await {
            _ if super::http::has_authorization(headers) => {
                "its Authorization header is sent (no login used)".to_owned()
            }
            Ok(Some(place)) => format!("logged in (tokens in {place})"),
            Ok(None) => format!("not logged in (`kin mcp login {name}` if it asks for one)"),
            Err(error) => format!("unknown ({error})"),
        };
        text.push_str(&format!("mcp server {name} login: {state}\n"));
    }
    text
}

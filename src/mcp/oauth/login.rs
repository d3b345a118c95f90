//! The browser step of a login: rmcp discovers the authorization server from the MCP server,
//! picks kin's client id (the configured one, with its secret; else the configured client
//! metadata document's URL where the server takes one; else it registers kin) and builds the
//! authorization URL with PKCE; kin shows the URL, opens it with `$BROWSER` when set, and waits
//! on a loopback port for the redirect, whose code rmcp exchanges for tokens kept in the token
//! store. A client acting for itself (client credentials) skips the browser.

use std::time::Duration;

use rmcp::transport::auth::{AuthorizationRequest, AuthorizationSession, OAuthState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::OAuthError;
use crate::mcp::OAuthSettings;
use crate::process::child_env::ChildEnv;

/// How long the user has to finish in the browser.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(600);
/// The most of a redirect request kin reads (its request line is all it needs).
const MAX_REQUEST: usize = 16 * 1024;
/// The most of an authorization server's `error` and `error_description` shown.
const MAX_SERVER_TEXT: usize = 500;
/// The path of the loopback redirect.
const CALLBACK: &str = "/callback";

/// Logs in to server `name` at `url` (discovery starts from its 401 `challenge` when there is
/// one, else from its URL): `tell` gets the authorization URL (and is all the user
/// sees when `$BROWSER` is not set); returns once tokens are stored, or fails.
pub(crate) async fn login(
    name: &str,
    url: &str,
    settings: &OAuthSettings,
    challenge: Option<&str>,
    tell: &(dyn Fn(&str) + Send + Sync),
    cancel: &CancellationToken,
    env: &ChildEnv,
) -> Result<(), OAuthError> {
    if settings.unattended() {
        return tokio::select! {
            _ = cancel.cancelled() => Err(OAuthError::Cancelled),
            done = super::unattended(name, url, settings, challenge, env) => done,
        };
    }
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|error| OAuthError::Redirect(error.to_string()))?;
    let port = listener
        .local_addr()
        .map_err(|error| OAuthError::Redirect(error.to_string()))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}{CALLBACK}");
    let store = super::store_for(name, url).await;
    let mut state = OAuthState::Unauthorized(super::manager(url, store.clone()).await?);
    let mut request = AuthorizationRequest::new(&redirect).with_client_name("kin");
    if let Some(client_id) = &settings.client_id {
        request = request.with_preregistered_client(client_id);
        if let Some(secret) = super::client_secret(name, settings)? {
            request = request.with_client_secret(secret);
        }
    }
    if let Some(document) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(document);
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    if !settings.scopes.is_empty() {
        request = request.with_scopes(settings.scopes.clone());
    }
    if let Err(error) = state.start_authorization(request.clone()).await {
        // A 2025-03-26 server whose metadata rmcp refused for its issuer (see `legacy`).
        let metadata = match super::legacy::is_issuer_mismatch(&error) {
            true => super::legacy::origin_metadata(url).await,
            false => None,
        };
        let Some(metadata) = metadata else {
            return Err(error.into());
        };
        let mut manager = super::manager(url, store).await?;
        manager.set_metadata(metadata);
        let session = AuthorizationSession::new(manager, request).await;
        state = OAuthState::Session(session.map_err(|(_, error)| error)?);
    }
    let address = state.get_authorization_url().await?;
    // The address comes from the server's metadata: nothing but a web page is opened.
    crate::mcp::links::openable(&address).map_err(|why| {
        OAuthError::Flow(format!("kin did not open the authorization page: {why}"))
    })?;
    tell(&address);
    let mut browser = open_browser(&address);
    let waited = tokio::select! {
        _ = cancel.cancelled() => Err(OAuthError::Cancelled),
        waited = tokio::time::timeout(LOGIN_TIMEOUT, redirected(&listener, &mut state, port, name)) => {
            waited.unwrap_or(Err(OAuthError::TimedOut(LOGIN_TIMEOUT.as_secs() / 60)))
        }
    };
    if let Some(browser) = browser.as_mut() {
        // A launcher that returned is reaped; one still running is not kin's to keep.
        if tokio::time::timeout(Duration::from_secs(5), browser.wait())
            .await
            .is_err()
        {
            let _ = browser.start_kill();
            let _ = browser.wait().await;
        }
    }
    waited
}

/// Serves the loopback port until a redirect carrying a code has been exchanged for tokens.
async fn redirected(
    listener: &TcpListener,
    state: &mut OAuthState,
    port: u16,
    name: &str,
) -> Result<(), OAuthError> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|error| OAuthError::Redirect(error.to_string()))?;
        let Some(target) = request_target(&mut stream).await else {
            let _ = answer(&mut stream, "400 Bad Request", "Not an HTTP request.").await;
            continue;
        };
        if !target.starts_with(CALLBACK) {
            let _ = answer(&mut stream, "404 Not Found", "Not here.").await;
            continue;
        }
        let callback = format!("http://127.0.0.1:{port}{target}");
        if let Some(refusal) = refusal(&callback) {
            let _ = answer(&mut stream, "400 Bad Request", &format!("kin: {refusal}")).await;
            return Err(OAuthError::Refused(refusal));
        }
        match state.handle_callback_url(&callback).await {
            Ok(()) => {
                let page = format!(
                    "kin is logged in to the MCP server `{name}`; you can close this page."
                );
                let _ = answer(&mut stream, "200 OK", &page).await;
                return Ok(());
            }
            Err(error) => {
                let _ = answer(
                    &mut stream,
                    "400 Bad Request",
                    "kin could not finish the login.",
                )
                .await;
                return Err(error.into());
            }
        }
    }
}

/// The authorization server's `error` (and description) on a redirect that carries one.
fn refusal(callback: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(callback).ok()?;
    let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
    let error = pairs.iter().find(|(k, _)| k == "error")?.1.clone();
    Some(match pairs.iter().find(|(k, _)| k == "error_description") {
        Some((_, description)) => format!(
            "the authorization server answered {}: {}",
            crate::text::visible_capped(&error, MAX_SERVER_TEXT),
            crate::text::visible_capped(description, MAX_SERVER_TEXT)
        ),
        None => format!(
            "the authorization server answered {}",
            crate::text::visible_capped(&error, MAX_SERVER_TEXT)
        ),
    })
}

/// The target of a `GET` request (`/callback?code=...`), read within [`MAX_REQUEST`].
async fn request_target(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .ok()?
            .ok()?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let line = head.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim_end();
    let mut parts = line.split(' ');
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) => Some(target.to_owned()),
        _ => None,
    }
}

async fn answer(stream: &mut TcpStream, status: &str, text: &str) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{text}",
        text.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// Starts `$BROWSER` on `address` (the usual convention: a `%s` in it stands for the URL, else
/// the URL is its last argument; of a `:`-separated list, the first); `None` when unset.
fn open_browser(address: &str) -> Option<tokio::process::Child> {
    let browser = std::env::var("BROWSER").ok()?;
    let command = browser.split(':').next()?.trim().to_owned();
    if command.is_empty() {
        return None;
    }
    let script = match command.contains("%s") {
        true => command.replace("%s", "\"$1\""),
        false => format!("{command} \"$1\""),
    };
    let started = tokio::process::Command::new("sh")
        .args(["-c", &script, "sh", address])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn();
    match started {
        Ok(child) => Some(child),
        Err(error) => {
            tracing::warn!(%error, "could not start $BROWSER");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_redirect_says_why() {
        let line = refusal("http://127.0.0.1:1/callback?error=access_denied&error_description=no");
        assert_eq!(
            line.as_deref(),
            Some("the authorization server answered access_denied: no")
        );
        assert_eq!(refusal("http://127.0.0.1:1/callback?code=c&state=s"), None);
        let hostile = format!(
            "http://127.0.0.1:1/callback?error=x&error_description=%1B%5D0%3Bowned%07{}",
            "a".repeat(5000)
        );
        let line = refusal(&hostile).unwrap();
        assert!(line.contains("\\u{1b}]0;owned\\u{7}"), "{line}");
        assert!(line.contains("bytes cut]") && line.len() < 700, "{line}");
    }
}

//! Logins run from within a session, for a configured HTTP server: the first one, when the
//! server answers kin's first request with an OAuth challenge, and a step-up one, when a call
//! is refused for want of a scope kin's login lacks (403 `insufficient_scope`): the user
//! authorizes the wider scope and the call is sent again. Both show the address the same way:
//! `$BROWSER`, a notice to the editor at once, and an `elicitation/create` in URL mode where the
//! editor takes one.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Mutex, Notify};
use tokio_util::sync::CancellationToken;

use super::oauth::OAuthError;
use super::spec::{OAuthSettings, ServerSpec, Transport};
use crate::process::child_env::ChildEnv;
use crate::tools::client::{ClientBridge, Question, QuestionMode, Reply};

/// How long an editor may take to answer a withdrawn login question.
const WITHDRAW_WAIT: Duration = Duration::from_secs(5);
/// The most step-up logins of one server in a session (each call tries one at most).
const MAX_STEP_UPS: u32 = 3;

/// Runs a login of `spec` with `settings`, starting from the server's `challenge`: the address
/// goes to `shown` (and the log), to the editor at once (a notice saying `need`, e.g. "needs a
/// login", and an `elicitation/create` in URL mode where it takes one), and the task waits for
/// the redirect, or for `cancel`.
pub(super) async fn sign_in(
    spec: &ServerSpec,
    settings: &OAuthSettings,
    challenge: &str,
    need: &str,
    shown: &(dyn Fn(&str) + Send + Sync),
    scope: &LoginScope,
    elsewhere: Option<&Notify>,
) -> Result<(), OAuthError> {
    let (cancel, client) = (&scope.cancel, scope.client.as_ref());
    let Transport::Http { url, .. } = &spec.transport else {
        return Err(OAuthError::NotHttp(spec.name.clone()));
    };
    let (told, mut address) = watch::channel(String::new());
    let tell = |address: &str| {
        tracing::info!(server = spec.name, "MCP server waits for a login");
        shown(address);
        told.send_replace(address.to_owned());
    };
    let env = &scope.env;
    let own = super::oauth::login(
        &spec.name,
        url,
        settings,
        Some(challenge),
        &tell,
        cancel,
        env,
    );
    // A login finished elsewhere (see `Server::take_login_from_elsewhere`) ends this one.
    let login = async {
        let Some(elsewhere) = elsewhere else {
            return own.await;
        };
        tokio::select! {
            done = own => done,
            () = elsewhere.notified() => Ok(()),
        }
    };
    let Some(client) = client else {
        return login.await;
    };
    tokio::pin!(login);
    let asked = CancellationToken::new();
    // The id of the URL question the user accepted, if they did.
    let ask = async {
        // A login without a browser step (client credentials) shows no address.
        let seen = tokio::select! {
            _ = asked.cancelled() => return None,
            seen = address.wait_for(|address| !address.is_empty()) => seen.map(|a| a.clone()),
        };
        let Ok(address) = seen else {
            return None;
        };
        let message = format!(
            "MCP server `{}` {need}: open {address} to log in; kin goes on once it is done",
            spec.name
        );
        client.warn_user(&message);
        if !client.features().elicitation_url {
            return None;
        }
        let id = uuid::Uuid::new_v4().to_string();
        let question = Question {
            call_id: None,
            message,
            mode: QuestionMode::Url {
                id: id.clone(),
                url: address,
            },
        };
        // The answer changes nothing: the login ends with the redirect, or with the session.
        match client.elicit(question, asked.clone()).await {
            Ok(Reply::Accept(_)) => Some(id),
            _ => None,
        }
    };
    tokio::pin!(ask);
    let mut asking = true;
    let done = tokio::select! {
        done = &mut login => done,
        accepted = &mut ask => {
            asking = false;
            let done = (&mut login).await;
            // The editor may still show the accepted question as under way.
            if let Some(id) = accepted {
                client.elicitation_done(&id);
            }
            done
        }
    };
    if asking {
        // The question still open in the editor is withdrawn (`$/cancel_request`); an editor
        // that never answers it does not hold up the connection.
        asked.cancel();
        let _ = tokio::time::timeout(WITHDRAW_WAIT, &mut ask).await;
    }
    done
}

/// A request the server refused kin's token for: for want of scope (403
/// `insufficient_scope`), or at all (401); its `WWW-Authenticate` challenge and the scope it
/// names.
pub(super) struct ScopeRefusal {
    pub(super) challenge: String,
    pub(super) scope: Option<String>,
    /// 403 `insufficient_scope` (else a 401).
    pub(super) insufficient: bool,
    /// The error, as it reads.
    pub(super) error: String,
}

impl ScopeRefusal {
    /// The scope asked for, for people.
    pub(super) fn wanted(&self) -> String {
        match &self.scope {
            Some(scope) => format!("scope \"{scope}\""),
            None => "a wider scope".into(),
        }
    }
}

/// How `error` is a refusal of kin's token, if it is one.
pub(super) fn token_refusal(error: &rmcp::ServiceError) -> Option<ScopeRefusal> {
    use rmcp::transport::streamable_http_client::{AuthRequiredError, InsufficientScopeError};
    let rmcp::ServiceError::TransportSend(transport) = error else {
        return None;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(transport.error.as_ref());
    while let Some(current) = cause {
        if let Some(refused) = current.downcast_ref::<InsufficientScopeError>() {
            return Some(ScopeRefusal {
                challenge: refused.www_authenticate_header.clone(),
                scope: refused.required_scope.clone(),
                insufficient: true,
                error: error.to_string(),
            });
        }
        if let Some(refused) = current.downcast_ref::<AuthRequiredError>() {
            return Some(ScopeRefusal {
                challenge: refused.www_authenticate_header.clone(),
                scope: None,
                insufficient: false,
                error: error.to_string(),
            });
        }
        cause = current.source();
    }
    None
}

/// The step-up logins of a configured server that logs in (no `Authorization` header of its
/// own): one at a time, [`MAX_STEP_UPS`] at most in a session; for a client acting for itself
/// (client credentials), a fresh token whenever its token is refused, as often as needed.
/// What a session gives the logins of its servers: its editor (where an address is shown at
/// once), its cancel token (it stops a login under way) and the environment scrub (what a
/// login reads, such as an ID token, is hidden from the processes tools start).
#[derive(Clone)]
pub(super) struct LoginScope {
    pub(super) client: Option<Arc<dyn ClientBridge>>,
    pub(super) cancel: CancellationToken,
    pub(super) env: ChildEnv,
}

pub(super) struct StepUp {
    spec: ServerSpec,
    scope: LoginScope,
    /// Step-ups done; held while one runs, so calls refused together share it.
    done: Mutex<u32>,
    tried: AtomicU32,
}

impl StepUp {
    /// For `spec` when it is a server kin logs in to, else `None`.
    pub(super) fn new(spec: &ServerSpec, scope: LoginScope) -> Option<Self> {
        match &spec.transport {
            Transport::Http {
                headers,
                login: Some(_),
                ..
            } if !super::http::has_authorization(headers) => Some(Self {
                spec: spec.clone(),
                scope,
                done: Mutex::new(0),
                tried: AtomicU32::new(0),
            }),
            _ => None,
        }
    }

    /// Whether it answers `refusal`: a want of scope, or any refusal of a client acting for
    /// itself (its tokens expire with no refresh token).
    pub(super) fn answers(&self, refusal: &ScopeRefusal) -> bool {
        refusal.insufficient || self.silent()
    }

    /// Whether its logins need no one (client credentials, enterprise identity).
    fn silent(&self) -> bool {
        matches!(&self.spec.transport, Transport::Http { login: Some(settings), .. } if settings.unattended())
    }

    /// The number of step-ups done so far (pass it to [`Self::run`]).
    pub(super) async fn generation(&self) -> u32 {
        *self.done.lock().await
    }

    /// Logs in again with the scope `refusal` asks for, unless another call did since `seen`
    /// (then its tokens serve). Reuses kin's client id with the authorization server.
    pub(super) async fn run(&self, refusal: &ScopeRefusal, seen: u32) -> Result<(), String> {
        let mut done = self.done.lock().await;
        if *done != seen {
            return Ok(());
        }
        if !self.silent() && self.tried.fetch_add(1, Ordering::Relaxed) >= MAX_STEP_UPS {
            return Err(format!(
                "it asks for more access than kin's login has ({}), and kin already logged in \
                 again {MAX_STEP_UPS} times in this session",
                refusal.wanted()
            ));
        }
        let Transport::Http {
            url,
            login: Some(settings),
            ..
        } = &self.spec.transport
        else {
            return Err("it is not a server kin logs in to".into());
        };
        let mut settings = settings.clone();
        if settings.client_id.is_none() {
            settings.client_id = super::oauth::stored_client_id(&self.spec.name, url).await;
        }
        // Configured scopes widened by the asked one (none configured: rmcp takes the
        // challenge's).
        if !settings.scopes.is_empty() {
            for scope in refusal.scope.iter().flat_map(|s| s.split_whitespace()) {
                if !settings.scopes.iter().any(|have| have == scope) {
                    settings.scopes.push(scope.to_owned());
                }
            }
        }
        let need = format!(
            "needs more access than kin's login has ({})",
            refusal.wanted()
        );
        // Without an editor (`kin run`), the terminal gets the address through the log.
        let shown = |address: &str| {
            if self.scope.client.is_none() {
                let server = &self.spec.name;
                tracing::warn!("MCP server `{server}` {need}: open {address} to log in");
            }
        };
        let challenge = &refusal.challenge;
        // A wider scope than the stored tokens have: only this login gives it.
        let signed = sign_in(
            &self.spec,
            &settings,
            challenge,
            &need,
            &shown,
            &self.scope,
            None,
        );
        match signed.await {
            Ok(()) => {
                *done += 1;
                Ok(())
            }
            Err(error) => Err(format!(
                "it asks for more access than kin's login has ({}); logging in again failed: {error}",
                refusal.wanted()
            )),
        }
    }
}

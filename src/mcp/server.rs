//! One MCP server of a session: a task that connects to it (starting its process for stdio),
//! lists its tools, relists them on `notifications/tools/list_changed`, and reconnects with
//! backoff when it goes away. Others read its [`State`] and call its tools through [`Server`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    FormElicitationCapability, Implementation, ProgressNotificationParam, ProtocolVersion,
    UrlElicitationCapability,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, RunningService,
    RunningServiceCancellationToken,
};
use rmcp::ClientHandler;
use serde_json::Value;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use super::elicit::Askers;
use super::oauth::OAuthError;
use super::progress::Routes;
use super::signin::{sign_in, LoginScope, StepUp};
use super::spec::{ServerSpec, Transport};
use super::stdio::{StdioProcess, StdioStart};
use crate::sync::lock;
use crate::tools::client::ClientBridge;

/// Waits between reconnections: doubling from the first, up to the last.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long connecting (start and handshake) may take before the attempt counts as failed.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Failed attempts in a row after which the first prompt stops waiting for a server.
const GIVE_UP_AFTER: u32 = 3;
/// MCP's notification that the out-of-band step of a URL question has finished.
const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
/// How long a tool call may take unless its server's `call_timeout` says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// Where a server is.
#[derive(Clone)]
pub(crate) enum State {
    /// Its first connection is under way.
    Starting,
    Ready(Arc<Connected>),
    /// It went away or could not start; kin tries again after a pause. `failures`: attempts
    /// in a row that failed.
    Down {
        reason: String,
        failures: u32,
    },
    /// kin will not connect to it (an unsupported transport, credentials the server refused,
    /// a tool listing past kin's bounds, or the session closed).
    Refused {
        reason: String,
    },
    /// A server of the config file asked for a login: kin waits for the user to finish it at
    /// `address` (the authorization URL), then connects.
    Login {
        address: String,
    },
}

/// A live connection.
pub(crate) struct Connected {
    pub(super) peer: Peer<RoleClient>,
    pub(super) progress: Routes,
    pub(super) askers: Askers,
}

/// The tools a server offered when last listed; kept while it is down, so a crash does not
/// change the model's tool list (the calls answer an error naming the server meanwhile).
#[derive(Default, Clone)]
pub(crate) struct Listed {
    /// Bumped on every listing.
    pub(crate) generation: u64,
    pub(crate) tools: Arc<Vec<rmcp::model::Tool>>,
}

/// A handle on one server's task.
pub(crate) struct Server {
    pub(crate) name: String,
    pub(super) call_timeout: Duration,
    state: watch::Receiver<State>,
    listed: Arc<Mutex<Listed>>,
    /// Whether a relisting the server asked for (`tools/list_changed`) is under way.
    relisting: watch::Receiver<bool>,
    /// Logging in again for a wider scope, for a server kin logs in to.
    pub(super) step_up: Option<StepUp>,
    /// The URL of a server kin logs in to.
    login_url: Option<String>,
    login_wait: Arc<LoginWait>,
}

/// A server's wait for its own login (see [`Server::take_login_from_elsewhere`]).
#[derive(Default)]
struct LoginWait {
    /// Ends the wait: a login finished elsewhere.
    done_elsewhere: Notify,
    /// The token kin held when the wait began (one the server refused), if any: a login made
    /// elsewhere since has stored another.
    token_before: Mutex<Option<String>>,
}

/// What a call to a server tool came to.
pub(crate) enum CallOutcome {
    /// The result as MCP sent it (`content`, `structuredContent`, `isError`).
    Result(Value),
    Cancelled,
    /// The server could not be reached or answered with a protocol error.
    Failed(String),
}

impl Server {
    /// Starts the server's task; it ends when `cancel` trips, taking the server down.
    /// `client` is the session's editor (or terminal): where a login's address is shown at once.
    pub(crate) fn start(
        spec: ServerSpec,
        start: StdioStart,
        cancel: CancellationToken,
        client: Option<Arc<dyn ClientBridge>>,
    ) -> Arc<Self> {
        let initial = match &spec.transport {
            Transport::Sse { .. } => State::Refused {
                reason: "the SSE transport is not supported; use stdio or streamable HTTP".into(),
            },
            _ => State::Starting,
        };
        let refused = matches!(initial, State::Refused { .. });
        let (tx, state) = watch::channel(initial);
        let name = spec.name.clone();
        let call_timeout = spec.call_timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        let listed = Arc::new(Mutex::new(Listed::default()));
        let (relisting_tx, relisting) = watch::channel(false);
        let scope = LoginScope {
            client,
            cancel,
            env: start.env.clone(),
        };
        let step_up = StepUp::new(&spec, scope.clone());
        let login_url = match &spec.transport {
            Transport::Http {
                url,
                login: Some(_),
                ..
            } => Some(url.clone()),
            _ => None,
        };
        let login_wait = Arc::new(LoginWait::default());
        if !refused {
            let relisting_tx = Arc::new(relisting_tx);
            tokio::spawn(supervise(
                spec,
                start,
                tx,
                listed.clone(),
                relisting_tx,
                scope,
                login_wait.clone(),
            ));
        }
        Arc::new(Self {
            name,
            call_timeout,
            state,
            listed,
            relisting,
            step_up,
            login_url,
            login_wait,
        })
    }

    /// The tools it offered when last listed.
    pub(crate) fn listed(&self) -> Listed {
        lock(&self.listed).clone()
    }

    /// Waits until no relisting the server asked for is under way (at once if none is).
    pub(crate) async fn relisted(&self) {
        let mut relisting = self.relisting.clone();
        let _ = relisting.wait_for(|busy| !busy).await;
    }

    /// Waits until its task has ended (its process, if any, gone).
    pub(crate) async fn stopped(&self) {
        let mut state = self.state.clone();
        while state.changed().await.is_ok() {}
    }

    /// A server waiting for its login, when kin now holds one made elsewhere (another
    /// session, `kin mcp login`): drops its own and connects with that one; returns once it
    /// has started (or given up, as at a start).
    pub(crate) async fn take_login_from_elsewhere(&self) {
        let Some(url) = &self.login_url else {
            return;
        };
        if !matches!(self.state(), State::Login { .. }) {
            return;
        }
        let now = super::oauth::stored_token(&self.name, url).await;
        if now.is_none() || now == *lock(&self.login_wait.token_before) {
            return;
        }
        self.login_wait.done_elsewhere.notify_one();
        let mut state = self.state.clone();
        let _ = state
            .wait_for(|state| !matches!(state, State::Login { .. }))
            .await;
        self.started().await;
    }

    pub(crate) fn state(&self) -> State {
        self.state.borrow().clone()
    }

    /// Waits until the server is ready, refused, or has failed [`GIVE_UP_AFTER`] attempts in
    /// a row (a server not listening yet gets a few quick tries; one that cannot start does
    /// not hold up the first prompt for the whole startup timeout).
    pub(crate) async fn started(&self) {
        let mut state = self.state.clone();
        let _ = state
            .wait_for(|s| match s {
                State::Starting => false,
                State::Down { failures, .. } => *failures >= GIVE_UP_AFTER,
                State::Ready(_) | State::Refused { .. } | State::Login { .. } => true,
            })
            .await;
    }
}

/// What kin tells servers, and what it hears from them.
#[derive(Clone, Default)]
struct Events {
    /// The server's name, for its questions' logs.
    server: Arc<str>,
    askers: Askers,
    tools_changed: Arc<Notify>,
    /// Set when the server says its tools changed; cleared once they are listed again.
    relisting: Option<Arc<watch::Sender<bool>>>,
    progress: Routes,
}

impl ClientHandler for Events {
    fn on_custom_notification(
        &self,
        notification: rmcp::model::CustomNotification,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        // rmcp has no type for it: a URL question the server asked is done with.
        if notification.method == ELICITATION_COMPLETE {
            let params = notification.params.as_ref();
            match params.and_then(|params| params["elicitationId"].as_str()) {
                Some(id) => self.askers.completed(&self.server, id),
                None => tracing::debug!(
                    server = &*self.server,
                    "{ELICITATION_COMPLETE} without an id"
                ),
            }
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        if let Some(relisting) = &self.relisting {
            relisting.send_replace(true);
        }
        self.tools_changed.notify_one();
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: rmcp::service::NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.progress.deliver(params);
        std::future::ready(())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Ok(super::elicit::ask_newest(&self.server, &self.askers, request).await)
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(
            ElicitationCapability::new()
                .with_form(FormElicitationCapability::new())
                .with_url(UrlElicitationCapability::new()),
        );
        ClientConfig::new(
            capabilities,
            Implementation::new("kin", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Opens an HTTP connection. A server that answers `server/discover` with a result that is
/// not one (some older servers answer every method they do not know with `{}`) is neither
/// stateless nor told apart as older by rmcp: it gets the `initialize` handshake on a fresh
/// connection.
async fn serve_http<C>(
    events: Events,
    client: C,
    config: rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
) -> Result<RunningService<RoleClient, Events>, rmcp::service::ClientInitializeError>
where
    C: rmcp::transport::streamable_http_client::StreamableHttpClient,
{
    use rmcp::transport::StreamableHttpClientTransport as Http;
    let transport = Http::with_client(client.clone(), config.clone());
    match events
        .clone()
        .serve_with_lifecycle(transport, super::http::lifecycle())
        .await
    {
        Err(rmcp::service::ClientInitializeError::ExpectedInitResult(_)) => {
            tracing::debug!("MCP server answered server/discover oddly; using initialize");
            let transport = Http::with_client(client, config);
            events
                .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
                .await
        }
        other => other,
    }
}

/// A running connection and, for stdio, its process.
struct Link {
    peer: Peer<RoleClient>,
    stop: Option<RunningServiceCancellationToken>,
    /// Resolves when the connection's service loop has ended.
    ended: Option<BoxFuture<'static, ()>>,
    process: Option<StdioProcess>,
}

impl Link {
    fn new(service: RunningService<RoleClient, Events>, process: Option<StdioProcess>) -> Self {
        Self {
            peer: service.peer().clone(),
            stop: Some(service.cancellation_token()),
            ended: Some(service.waiting().map(|_| ()).boxed()),
            process,
        }
    }
}

async fn supervise(
    spec: ServerSpec,
    start: StdioStart,
    state: watch::Sender<State>,
    listed: Arc<Mutex<Listed>>,
    relisting: Arc<watch::Sender<bool>>,
    scope: LoginScope,
    login_wait: Arc<LoginWait>,
) {
    let cancel = scope.cancel.clone();
    let mut backoff = FIRST_BACKOFF;
    let mut failures = 0;
    let askers = Askers::default();
    // A login is tried once per session: a server that refuses the fresh token is refused.
    let mut logged_in = false;
    loop {
        let events = Events {
            server: spec.name.as_str().into(),
            askers: askers.clone(),
            relisting: Some(relisting.clone()),
            ..Events::default()
        };
        let connecting =
            tokio::time::timeout(CONNECT_TIMEOUT, connect(&spec, &start, events.clone()));
        let attempt = tokio::select! {
            _ = cancel.cancelled() => break,
            attempt = connecting => attempt.unwrap_or_else(|_| Err(Failure::Retry("it did not finish starting in time".into()))),
        };
        let reason = match attempt {
            Err(Failure::Fatal(reason)) => {
                refuse(&spec.name, &state, reason);
                return;
            }
            Err(Failure::Login { line, challenge }) if !logged_in => {
                logged_in = true;
                // The address goes to the server's state: the next prompt's notice carries it.
                let shown = |address: &str| {
                    state.send_replace(State::Login {
                        address: address.to_owned(),
                    });
                };
                let signed = match &spec.transport {
                    Transport::Http {
                        url,
                        login: Some(settings),
                        ..
                    } => {
                        let before = super::oauth::stored_token(&spec.name, url).await;
                        *lock(&login_wait.token_before) = before;
                        let need = "needs a login";
                        let elsewhere = Some(&login_wait.done_elsewhere);
                        sign_in(&spec, settings, &challenge, need, &shown, &scope, elsewhere).await
                    }
                    _ => Err(OAuthError::NotHttp(spec.name.clone())),
                };
                match signed {
                    Ok(()) => {
                        // Connecting again: a first prompt waits for it as for any start, later
                        // ones (briefly) for the tools it is about to list.
                        state.send_replace(State::Starting);
                        relisting.send_replace(true);
                        continue;
                    }
                    Err(OAuthError::Cancelled) => break,
                    Err(error) => {
                        refuse(
                            &spec.name,
                            &state,
                            format!("{line}; the login failed: {error}"),
                        );
                        return;
                    }
                }
            }
            Err(Failure::Login { line, .. }) => {
                refuse(&spec.name, &state, line);
                return;
            }
            Err(Failure::Retry(reason)) => {
                relisting.send_replace(false);
                reason
            }
            Ok(mut link) => {
                // A client acting for itself gets a fresh token silently whenever one is refused
                // after it worked (they expire and have no refresh token).
                if matches!(&spec.transport, Transport::Http { login: Some(settings), .. } if settings.unattended())
                {
                    logged_in = false;
                }
                if let Some(info) = link.peer.peer_info() {
                    let revision = info.protocol_version.as_str();
                    tracing::info!(server = spec.name, revision, "MCP server connected");
                }
                // Connected: its tools are read at once; a prompt coming now waits for them.
                relisting.send_replace(true);
                let reason = serve(&spec.name, &mut link, &events, &state, &listed, &cancel).await;
                relisting.send_replace(false);
                if let Some(stop) = link.stop.take() {
                    stop.cancel();
                }
                ended(&mut link.ended).await;
                let report = match link.process.as_mut() {
                    Some(process) => {
                        // Gone or not, the process is stopped before anything else starts.
                        let report = process.report();
                        process.stop().await;
                        Some(report)
                    }
                    None => None,
                };
                match (reason, report) {
                    (None, _) => break,
                    (Some(Failure::Fatal(reason) | Failure::Login { line: reason, .. }), _) => {
                        refuse(&spec.name, &state, reason);
                        return;
                    }
                    // It had worked: the next try comes soon, and counts afresh.
                    (Some(Failure::Retry(reason)), report) => {
                        backoff = FIRST_BACKOFF;
                        failures = 0;
                        match report {
                            Some(report) => format!("{reason} ({report})"),
                            None => reason,
                        }
                    }
                }
            }
        };
        tracing::warn!(server = spec.name, %reason, "MCP server unavailable; retrying");
        failures += 1;
        state.send_replace(State::Down { reason, failures });
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    state.send_replace(State::Refused {
        reason: "the session's servers were stopped".into(),
    });
}

/// Why a connection failed or ended: worth another try, or not (kin stops using the server),
/// or a configured server that asks for a login kin can run.
enum Failure {
    Retry(String),
    Fatal(String),
    /// `line` says what happened; `challenge` is the server's `WWW-Authenticate`.
    Login {
        line: String,
        challenge: String,
    },
}

/// Marks the server refused for `reason`, for good.
fn refuse(server: &str, state: &watch::Sender<State>, reason: String) {
    tracing::warn!(server, %reason, "MCP server not used");
    state.send_replace(State::Refused { reason });
}

/// Lists tools and keeps them current until the connection ends (`Some(why)`) or the session
/// stops it (`None`).
async fn serve(
    server: &str,
    link: &mut Link,
    events: &Events,
    state: &watch::Sender<State>,
    listed: &Mutex<Listed>,
    cancel: &CancellationToken,
) -> Option<Failure> {
    let peer = link.peer.clone();
    let mut changes = tokio::select! {
        _ = cancel.cancelled() => return None,
        changes = super::changes::subscribe(server, &peer) => changes,
    };
    loop {
        let tools = tokio::select! {
            _ = cancel.cancelled() => return None,
            tools = super::listing::list_tools(&peer) => tools,
        };
        match tools {
            Ok(tools) => {
                {
                    let mut listed = lock(listed);
                    listed.generation += 1;
                    listed.tools = Arc::new(dedup(tools));
                }
                state.send_replace(State::Ready(Arc::new(Connected {
                    peer: peer.clone(),
                    progress: events.progress.clone(),
                    askers: events.askers.clone(),
                })));
            }
            Err(error) if error.is_misbehaviour() => {
                return Some(Failure::Fatal(error.to_string()))
            }
            Err(error) => return Some(Failure::Retry(error.to_string())),
        }
        if let Some(relisting) = &events.relisting {
            relisting.send_replace(false);
        }
        tokio::select! {
            _ = cancel.cancelled() => return None,
            _ = events.tools_changed.notified() => {}
            () = super::changes::tools_changed(&mut changes) => {
                if let Some(relisting) = &events.relisting {
                    relisting.send_replace(true);
                }
            }
            _ = ended(&mut link.ended) => return Some(Failure::Retry("the connection closed".into())),
        }
    }
}

/// Resolves when the connection has ended (at once if it was seen to end before).
async fn ended(ended: &mut Option<BoxFuture<'static, ()>>) {
    if let Some(running) = ended {
        running.await;
        *ended = None;
    }
}

/// One tool per name (a server listing a name twice keeps the first).
fn dedup(tools: Vec<rmcp::model::Tool>) -> Vec<rmcp::model::Tool> {
    let mut seen = HashMap::new();
    tools
        .into_iter()
        .filter(|tool| seen.insert(tool.name.to_string(), ()).is_none())
        .collect()
}

async fn connect(spec: &ServerSpec, start: &StdioStart, events: Events) -> Result<Link, Failure> {
    match &spec.transport {
        Transport::Stdio { command, args, env } => {
            let (mut process, stdout, stdin) = StdioProcess::launch(command, args, env, start)
                .map_err(|error| Failure::Retry(format!("could not start `{command}`: {error}")))?;
            let (stdout, stdin) = super::frames::bounded(&spec.name, stdout, stdin);
            match events
                .serve_with_lifecycle((stdout, stdin), super::http::lifecycle())
                .await
            {
                Ok(service) => Ok(Link::new(service, Some(process))),
                Err(error) => {
                    let report = process.report();
                    process.stop().await;
                    let reason = format!("the MCP handshake failed: {error} ({report})");
                    Err(Failure::Retry(reason))
                }
            }
        }
        Transport::Http {
            url,
            headers,
            login,
        } => {
            let (client, config) = super::http::parts(url, headers).map_err(Failure::Fatal)?;
            let token = match login {
                Some(settings) if !super::http::has_authorization(headers) => {
                    super::oauth::authorized(&spec.name, url, settings, client.clone(), &start.env)
                        .await
                        .map_err(|error| Failure::Retry(format!("its login: {error}")))?
                }
                _ => None,
            };
            let served = match token {
                Some(client) => serve_http(events, client, config).await,
                None => serve_http(events, client, config).await,
            };
            let service = served.map_err(|error| match super::http::auth_refusal(&error) {
                Some(refusal) => {
                    let line = super::http::auth_line(
                        refusal.status,
                        &spec.name,
                        login.is_some(),
                        headers,
                    );
                    // An OAuth challenge from a configured server without credentials of its
                    // own: kin can log in (a 403 is a refusal a login would not change).
                    match refusal.challenge {
                        Some(challenge)
                            if login.is_some() && !super::http::has_authorization(headers) =>
                        {
                            Failure::Login { line, challenge }
                        }
                        _ => Failure::Fatal(line),
                    }
                }
                None => Failure::Retry(format!("the MCP handshake failed: {error}")),
            })?;
            Ok(Link::new(service, None))
        }
        Transport::Sse { .. } => Err(Failure::Fatal("the SSE transport is not supported".into())),
    }
}

//! The OpenAI-compatible model: Chat Completions with `stream: true`, spoken by DeepSeek,
//! OpenAI, vLLM, llama.cpp, Ollama and most gateways.
//!
//! - [`request`]: the request body (messages, tools, reasoning sent back as DeepSeek requires);
//! - [`decode`]: stream chunks -> the log's chunk vocabulary;
//! - [`sse`]: response body -> events -> chunks, with the stall guard;
//! - [`call`]: one call: HTTP, retries with backoff, failures -> [`ModelError`]s;
//! - [`retry`]: the backoff policy and `Retry-After`.
//!
//! Knows nothing of where its settings and key come from (see `crate::config`).

mod alternate;
#[cfg(test)]
mod alternation_tests;
mod call;
pub(crate) mod decode;
pub(crate) mod request;
pub(crate) mod retry;
pub(crate) mod sse;
mod tool_images;
mod user_content;
pub(crate) mod window;

use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;

use super::{ChunkStream, Credentials, Model, ModelError, ModelRequest};
use crate::sync::{read_lock, write_lock};

pub(crate) use call::readable_error;
pub(crate) use sse::error_chain;
pub use sse::{SseDecoder, StreamFailure};

/// DeepSeek's API root; `/chat/completions` is appended to it.
pub(crate) const DEFAULT_BASE_URL: &str = "https://api.deepseek.com";
pub(crate) const DEFAULT_MODEL: &str = "deepseek-chat";
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(60);
pub(crate) const DEFAULT_RETRIES: u32 = 3;
pub(crate) const DEFAULT_RETRY_BASE: Duration = Duration::from_millis(500);
/// Requests in flight at once to one endpoint, by default: a fan-out of the default
/// `[tools] max_parallel` children, and their parents, without waiting.
pub(crate) const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 16;

/// How to reach the endpoint and how patient to be with it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiSettings {
    /// The API root, e.g. `https://api.deepseek.com` or `http://127.0.0.1:8080/v1`.
    pub(crate) base_url: String,
    pub(crate) model: String,
    /// Recorded in `assistant/message` sources.
    pub(crate) provider: String,
    pub(crate) connect_timeout: Duration,
    /// A response that sends no bytes for this long fails (counted from its first byte).
    pub stall_timeout: Duration,
    /// How long the first byte may take; `None`: the stall timeout plus time for a slow local
    /// server to evaluate the prompt (see `call::first_token_default`).
    pub first_token_timeout: Option<Duration>,
    /// Extra attempts after the first, for failures before any output was streamed.
    pub retries: u32,
    /// The first retry waits about this long; each further one twice as long.
    pub retry_base: Duration,
    /// Whether the model takes image parts (off by default: DeepSeek's chat models do not).
    pub(crate) images: bool,
    /// Requests in flight at once; more wait (a nested fan-out slows down, it does not fail).
    pub max_concurrent_requests: usize,
}

impl OpenAiSettings {
    /// Settings for `model` at `base_url`, every other setting at its default.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let base_url = base_url.into();
        Self {
            provider: provider_name(&base_url).to_owned(),
            base_url,
            model: model.into(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            first_token_timeout: None,
            retries: DEFAULT_RETRIES,
            retry_base: DEFAULT_RETRY_BASE,
            images: false,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
        }
    }

    /// The URL requests are posted to: the API root with `/chat/completions` appended, or the
    /// base URL itself when it already ends in `/chat/completions` (never doubled).
    pub(crate) fn endpoint(&self) -> String {
        let root = self.base_url.trim_end_matches('/');
        if root.ends_with(CHAT_COMPLETIONS) {
            return root.to_owned();
        }
        format!("{root}{CHAT_COMPLETIONS}")
    }
}

/// The path of the Chat Completions API under an API root.
pub(crate) const CHAT_COMPLETIONS: &str = "/chat/completions";

/// `200 ms`, `1.5 s`, `60 s`.
pub(crate) fn human_duration(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// A short provider name for the log, from the API root's host.
pub(crate) fn provider_name(base_url: &str) -> &'static str {
    match host(base_url) {
        Some(host) if host == "deepseek.com" || host.ends_with(".deepseek.com") => "deepseek",
        Some(host) if host == "openai.com" || host.ends_with(".openai.com") => "openai",
        _ => "openai-compatible",
    }
}

/// The host of a URL, lower-cased (no port, no user info).
pub(crate) fn host(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        authority.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// An API key and where it came from. Its `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    value: String,
    source: String,
}

impl ApiKey {
    /// `source` names where the key came from, e.g. `KIN_API_KEY` or a file path.
    pub fn new(value: impl Into<String>, source: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            source: source.into(),
        }
    }

    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The key with all but its last four characters hidden (all of it, if it is short).
    pub(crate) fn masked(&self) -> String {
        let chars: Vec<char> = self.value.chars().collect();
        if chars.len() < 12 {
            return "****".into();
        }
        let tail: String = chars[chars.len() - 4..].iter().collect();
        format!("****{tail}")
    }

    pub(crate) fn secret(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKey({} from {})", self.masked(), self.source)
    }
}

/// The key the model calls with, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyState {
    /// A key, and where it came from.
    Present(ApiKey),
    /// `hint` tells the user what to set.
    Missing {
        /// What to set.
        hint: String,
    },
}

/// Looks for the key again (for ACP `authenticate`).
pub(crate) type KeyLoader = Arc<dyn Fn() -> BoxFuture<'static, KeyState> + Send + Sync>;

/// The HTTP client could not be built (the text says why).
#[derive(Debug, Clone, thiserror::Error)]
#[error("could not set up the HTTP client: {0}")]
pub struct ClientError(String);

/// A model behind an OpenAI-compatible chat completions endpoint, streamed.
pub struct OpenAiModel {
    settings: Arc<OpenAiSettings>,
    /// Built by [`Model::prepare`] in the background or else by the first call: loading the
    /// system's root certificates costs milliseconds that neither `initialize` nor the first
    /// prompt should wait for.
    client: Arc<OnceLock<Result<reqwest::Client, ClientError>>>,
    key: Arc<RwLock<KeyState>>,
    loader: Option<KeyLoader>,
    /// What the last request of each recent session encoded, reused by its next one.
    encoded: Arc<Mutex<request::RecentHistories>>,
    /// The context window the server reported, once asked (see [`window`]).
    window: Arc<tokio::sync::OnceCell<Option<u64>>>,
    /// One permit per request in flight to the endpoint (`max_concurrent_requests`).
    requests: Arc<tokio::sync::Semaphore>,
}

impl OpenAiModel {
    /// The model for these settings and this key; the HTTP client itself is built later.
    pub fn new(settings: OpenAiSettings, key: KeyState) -> Result<Self, ClientError> {
        Ok(Self {
            requests: Arc::new(tokio::sync::Semaphore::new(
                settings.max_concurrent_requests.max(1),
            )),
            settings: Arc::new(settings),
            client: Arc::new(OnceLock::new()),
            key: Arc::new(RwLock::new(key)),
            loader: None,
            encoded: Arc::default(),
            window: Arc::default(),
        })
    }

    /// The permits of its requests in flight, to share with a model of the same endpoint.
    pub(crate) fn requests(&self) -> Arc<tokio::sync::Semaphore> {
        self.requests.clone()
    }

    /// This model counting its requests with `requests` (another's of the same endpoint).
    pub(crate) fn sharing_requests(mut self, requests: Arc<tokio::sync::Semaphore>) -> Self {
        self.requests = requests;
        self
    }

    /// The HTTP client, built on first use (or waited for, while [`Model::prepare`] builds it).
    fn client(&self) -> Result<reqwest::Client, ClientError> {
        self.client
            .get_or_init(|| build_client(&self.settings))
            .clone()
    }

    /// Lets [`Model::reload_credentials`] look for the key again with `loader`.
    pub fn with_key_loader(mut self, loader: KeyLoader) -> Self {
        self.loader = Some(loader);
        self
    }

    pub(crate) fn settings(&self) -> &OpenAiSettings {
        &self.settings
    }

    fn key(&self) -> KeyState {
        read_lock(&self.key).clone()
    }
}

/// The HTTP client for `settings`. An `http://` endpoint gets one that trusts no certificate,
/// so no root store is loaded for it; an `https://` one trusts the system's roots (read from
/// disk, a few hundred CA files, which is why [`Model::prepare`] builds it early).
fn build_client(settings: &OpenAiSettings) -> Result<reqwest::Client, ClientError> {
    // `Err` only means a provider is installed already (this one, by an earlier client).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .tcp_nodelay(true)
        .user_agent(concat!("kin/", env!("CARGO_PKG_VERSION")));
    let builder = if needs_roots(&settings.base_url) {
        builder
    } else {
        builder.tls_certs_only(std::iter::empty())
    };
    builder
        .build()
        .map_err(|e| ClientError(sse::error_chain(&e)))
}

/// The HTTP client model calls to `settings`' endpoint use (also `kin login`'s requests).
pub(crate) fn http_client(settings: &OpenAiSettings) -> Result<reqwest::Client, ClientError> {
    build_client(settings)
}

/// Whether calls to `base_url` can need TLS: anything but a plain `http://` URL.
fn needs_roots(base_url: &str) -> bool {
    let scheme = base_url.split_once("://").map_or("", |(scheme, _)| scheme);
    !scheme.eq_ignore_ascii_case("http")
}

fn credentials(key: &KeyState) -> Credentials {
    match key {
        KeyState::Present(key) => Credentials::Present {
            source: key.source().to_owned(),
        },
        KeyState::Missing { hint } => Credentials::Missing { hint: hint.clone() },
    }
}

impl Model for OpenAiModel {
    fn provider(&self) -> String {
        self.settings.provider.clone()
    }

    fn name(&self) -> String {
        self.settings.model.clone()
    }

    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let key = match self.key() {
            KeyState::Present(key) => key,
            KeyState::Missing { hint } => {
                return Box::pin(futures::stream::once(std::future::ready(Err(
                    ModelError::MissingKey { hint },
                ))))
            }
        };
        let client = match self.client() {
            Ok(client) => client,
            Err(error) => {
                return Box::pin(futures::stream::once(std::future::ready(Err(
                    ModelError::Failed(error.to_string()),
                ))))
            }
        };
        let recent = || crate::sync::lock(&self.encoded);
        let mut encoded = recent().take(&request.session_id);
        let body = encoded.body(&self.settings.model, &request, self.settings.images);
        recent().put(request.session_id, encoded);
        let call = call::Call::new(client, self.settings.clone(), key, body);
        call::stream(call.limited_by(self.requests.clone()))
    }

    fn with_model_name(&self, name: &str) -> Option<Arc<dyn Model>> {
        let mut settings = (*self.settings).clone();
        settings.model = name.to_owned();
        Some(Arc::new(Self {
            settings: Arc::new(settings),
            client: self.client.clone(),
            key: self.key.clone(),
            loader: self.loader.clone(),
            encoded: self.encoded.clone(),
            // Another model may have another window (Ollama's are per model).
            window: Arc::default(),
            requests: self.requests.clone(),
        }))
    }

    fn credentials(&self) -> Credentials {
        credentials(&self.key())
    }

    fn accepts_images(&self) -> bool {
        self.settings.images
    }

    fn discover_window(&self) -> BoxFuture<'static, Option<u64>> {
        let (cell, settings, client) = (self.window.clone(), self.settings.clone(), self.client());
        Box::pin(async move {
            let client = client.ok()?;
            // Asked again next time when the server did not answer at all.
            let found = cell
                .get_or_try_init(|| async { window::discover(&client, &settings).await })
                .await;
            found.ok().copied().flatten()
        })
    }

    fn prepare(&self) {
        // Only worth a thread when building loads roots and a call can follow.
        if self.client.get().is_some()
            || !needs_roots(&self.settings.base_url)
            || matches!(self.key(), KeyState::Missing { .. })
        {
            return;
        }
        let (slot, settings) = (self.client.clone(), self.settings.clone());
        let spawned = crate::background::spawn("kin-http-client", move || {
            slot.get_or_init(|| build_client(&settings));
        });
        if let Err(error) = spawned {
            tracing::debug!(%error, "could not prepare the HTTP client early; the first call will");
        }
    }

    fn reload_credentials(&self) -> BoxFuture<'static, Credentials> {
        let Some(loader) = self.loader.clone() else {
            return Box::pin(std::future::ready(self.credentials()));
        };
        let slot = self.key.clone();
        Box::pin(async move {
            let fresh = loader().await;
            let result = credentials(&fresh);
            *write_lock(&slot) = fresh;
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_appends_chat_completions_to_the_api_root() {
        let s = OpenAiSettings::new("http://127.0.0.1:8080/v1/", "m");
        assert_eq!(s.endpoint(), "http://127.0.0.1:8080/v1/chat/completions");
        assert_eq!(
            OpenAiSettings::new(DEFAULT_BASE_URL, DEFAULT_MODEL).endpoint(),
            "https://api.deepseek.com/chat/completions"
        );
        let full = OpenAiSettings::new("http://127.0.0.1:8080/v1/chat/completions/", "m");
        assert_eq!(full.endpoint(), "http://127.0.0.1:8080/v1/chat/completions");
    }

    #[test]
    fn provider_names_come_from_the_host() {
        assert_eq!(provider_name("https://api.deepseek.com"), "deepseek");
        assert_eq!(provider_name("https://api.openai.com/v1"), "openai");
        assert_eq!(
            provider_name("http://127.0.0.1:8080/v1"),
            "openai-compatible"
        );
        assert_eq!(
            provider_name("https://deepseek.com.evil.example/v1"),
            "openai-compatible"
        );
        assert_eq!(host("http://u:p@[::1]:80/x").as_deref(), Some("::1"));
    }

    #[test]
    fn only_plain_http_endpoints_go_without_roots() {
        assert!(!needs_roots("http://127.0.0.1:8080/v1"));
        assert!(!needs_roots("HTTP://localhost"));
        assert!(needs_roots("https://api.deepseek.com"));
        assert!(needs_roots("api.deepseek.com"));
    }

    #[test]
    fn a_plain_http_client_builds_without_a_root_store() {
        build_client(&OpenAiSettings::new("http://127.0.0.1:1/v1", DEFAULT_MODEL)).unwrap();
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(human_duration(Duration::from_millis(200)), "200 ms");
        assert_eq!(human_duration(Duration::from_secs(60)), "60 s");
        assert_eq!(human_duration(Duration::from_millis(1500)), "1.5 s");
    }

    #[test]
    fn keys_are_masked_in_debug_output() {
        let key = ApiKey::new("sk-0123456789abcdef", "KIN_API_KEY");
        let debug = format!("{key:?}");
        assert!(!debug.contains("0123456789"), "{debug}");
        assert!(debug.contains("****cdef") && debug.contains("KIN_API_KEY"));
        assert_eq!(ApiKey::new("short", "x").masked(), "****");
    }
}

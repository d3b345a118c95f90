//! The streamable-HTTP transport to a server: rmcp's client over kin's reqwest and rustls (the
//! `ring` provider, as the model client), with the server's headers on every request.

use std::collections::HashMap;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn transport(
    url: &str,
    headers: &[(String, String)],
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let mut custom = HashMap::new();
    for (name, value) in headers {
        let name = HeaderName::try_from(name.as_str())
            .map_err(|_| format!("the header name `{name}` is not valid"))?;
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|_| format!("the value of header `{name}` is not valid"))?;
        custom.insert(name, value);
    }
    // `Err` only means a provider is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .user_agent(concat!("kin/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|error| format!("could not build the HTTP client: {error}"))?;
    let config =
        StreamableHttpClientTransportConfig::with_uri(url.to_owned()).custom_headers(custom);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// The HTTP status (401 or 403) when the handshake failed because the server refused kin's
/// credentials: trying again with the same headers cannot help.
pub(crate) fn auth_refusal(error: &rmcp::service::ClientInitializeError) -> Option<u16> {
    use rmcp::service::ClientInitializeError;
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    // The transport's error is a field, not a `source`, of the handshake's.
    let ClientInitializeError::TransportError { error, .. } = error else {
        return None;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        match error.downcast_ref::<E<reqwest::Error>>() {
            Some(E::AuthRequired(_)) => return Some(401),
            Some(E::InsufficientScope(_)) => return Some(403),
            Some(E::HttpStatus(status)) if matches!(status.status, 401 | 403) => {
                return Some(status.status)
            }
            // A refusal without a challenge keeps only its status line in the text.
            Some(E::UnexpectedServerResponse(text)) => {
                for status in [401, 403] {
                    if text.starts_with(&format!("HTTP {status} ")) {
                        return Some(status);
                    }
                }
            }
            _ => {}
        }
        cause = error.source();
    }
    None
}

/// The one line that says a server refused kin's credentials.
pub(crate) fn auth_line(status: u16) -> String {
    let what = match status {
        403 => "refused kin's credentials (HTTP 403 Forbidden)",
        _ => "needs authentication (HTTP 401 Unauthorized)",
    };
    format!(
        "the server {what}; check the headers kin sends it (`headers` of its \
         [mcp_servers.<name>] entry, or the editor's entry for it); kin will not retry"
    )
}

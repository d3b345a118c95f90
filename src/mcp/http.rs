//! The streamable-HTTP transport to a server: rmcp's client over kin's reqwest and rustls (the
//! `ring` provider, as the model client), with the server's headers on every request.

use std::collections::HashMap;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client and the transport's settings (the server's headers on every request).
pub(crate) fn parts(
    url: &str,
    headers: &[(String, String)],
) -> Result<(reqwest::Client, StreamableHttpClientTransportConfig), String> {
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
    Ok((client, config))
}

/// How kin opens a connection: the stateless revision's `server/discover` first (2026-07-28),
/// and for a server that answers it as an older one would (an error), the `initialize`
/// handshake of the newest revision that has one (2025-11-25); the server may answer with an
/// older revision (2024-11-05 on), which rmcp accepts.
pub(crate) fn lifecycle() -> rmcp::service::ClientLifecycleMode {
    rmcp::service::ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        legacy_version: Some(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE),
    }
}

/// Whether the headers carry credentials of their own (then kin sends no login's token).
pub(crate) fn has_authorization(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(header, _)| header.eq_ignore_ascii_case("authorization"))
}

/// How a server refused kin's credentials: the HTTP status (401 or 403) and, when it sent one,
/// its `WWW-Authenticate` challenge (an OAuth server's says where to log in).
pub(crate) struct Refusal {
    pub(crate) status: u16,
    pub(crate) challenge: Option<String>,
}

/// How the handshake failed when the server refused kin's credentials: trying again with the
/// same headers cannot help.
pub(crate) fn auth_refusal(error: &rmcp::service::ClientInitializeError) -> Option<Refusal> {
    use rmcp::service::ClientInitializeError;
    use rmcp::transport::streamable_http_client::StreamableHttpError as E;
    // The transport's error is a field, not a `source`, of the handshake's.
    let ClientInitializeError::TransportError { error, .. } = error else {
        return None;
    };
    let bare = |status| {
        Some(Refusal {
            status,
            challenge: None,
        })
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = cause {
        match error.downcast_ref::<E<reqwest::Error>>() {
            Some(E::AuthRequired(required)) => {
                return Some(Refusal {
                    status: 401,
                    challenge: Some(required.www_authenticate_header.clone()),
                })
            }
            Some(E::InsufficientScope(_)) => return bare(403),
            Some(E::HttpStatus(status)) if matches!(status.status, 401 | 403) => {
                return bare(status.status)
            }
            // A refusal without a challenge keeps only its status line in the text.
            Some(E::UnexpectedServerResponse(text)) => {
                for status in [401, 403] {
                    if text.starts_with(&format!("HTTP {status} ")) {
                        return bare(status);
                    }
                }
            }
            _ => {}
        }
        cause = error.source();
    }
    None
}

/// The one line that says a server refused kin's credentials, and what to do about it: for a
/// server of the config file, log in (`kin mcp login NAME`) or fix its headers; for the editor's,
/// the header the editor passes.
pub(crate) fn auth_line(
    status: u16,
    name: &str,
    login: bool,
    headers: &[(String, String)],
) -> String {
    let what = match status {
        403 => "refused kin's credentials (HTTP 403 Forbidden)",
        _ => "needs authentication (HTTP 401 Unauthorized)",
    };
    let todo = match (login, headers.is_empty(), has_authorization(headers)) {
        (false, _, _) => {
            format!("check the headers the editor passes for `{name}` (its `mcpServers` entry)")
        }
        (true, true, _) => format!("run `kin mcp login {name}`"),
        (true, false, false) => format!(
            "run `kin mcp login {name}`, or check the `headers` of [mcp_servers.{name}] in \
             kin's config file"
        ),
        (true, false, true) => format!(
            "check the `headers` of [mcp_servers.{name}] in kin's config file, or remove its \
             Authorization header and run `kin mcp login {name}`"
        ),
    };
    format!("the server {what}; {todo}; kin will not retry")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_auth_line_says_what_to_do_for_this_server() {
        let line = auth_line(401, "docs", true, &[]);
        assert_eq!(
            line,
            "the server needs authentication (HTTP 401 Unauthorized); run `kin mcp login docs`; \
             kin will not retry"
        );
        let bearer = [("authorization".to_owned(), "Bearer x".to_owned())];
        let line = auth_line(403, "docs", true, &bearer);
        assert!(line.contains("HTTP 403"), "{line}");
        assert!(line.contains("[mcp_servers.docs]"), "{line}");
        let line = auth_line(401, "ed", false, &bearer);
        assert!(
            line.contains("the headers the editor passes for `ed`"),
            "{line}"
        );
        assert!(!line.contains("kin mcp login"), "{line}");
    }
}

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

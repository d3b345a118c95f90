//! What every request to `kin mcp --listen` passes before rmcp's streamable-HTTP service sees
//! it: the bearer token (401 naming the token's file), a cap on live MCP sessions, and a body
//! read within a size cap and a time limit and counted before it is parsed ([`super::body`]).
//! `Origin` and `Host` are checked by rmcp itself (configured in [`super::listen`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;

use super::body;
use super::handler::KinServer;
use super::token::Token;

/// The most MCP sessions (clients) live at once; a session idle for rmcp's keep-alive (five
/// minutes) is closed and frees its place.
pub(crate) const MAX_SESSIONS: usize = 64;
/// How long a request's body may take to arrive once its head has.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) type ResponseBody = BoxBody<Bytes, Infallible>;

/// The checks, and the service behind them.
pub(crate) struct Gate {
    pub(crate) token: Token,
    pub(crate) service: StreamableHttpService<KinServer, LocalSessionManager>,
    /// rmcp's live MCP sessions (counted for the cap).
    pub(crate) manager: Arc<LocalSessionManager>,
}

impl Gate {
    pub(crate) async fn handle(&self, request: Request<Incoming>) -> Response<ResponseBody> {
        let authorization = request.headers().get(header::AUTHORIZATION);
        if !self
            .token
            .accepts(authorization.map(|value| value.as_bytes()))
        {
            let message = format!(
                "kin mcp needs the header `Authorization: Bearer <token>`; the token is in {} \
                 (readable by the user who runs kin)",
                self.token.path().display()
            );
            let mut response = refusal(StatusCode::UNAUTHORIZED, message);
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"kin mcp\""),
            );
            return response;
        }
        let opens_session =
            request.method() == Method::POST && !request.headers().contains_key("mcp-session-id");
        if opens_session && self.manager.sessions.read().await.len() >= MAX_SESSIONS {
            let message = format!(
                "kin mcp has {MAX_SESSIONS} live MCP sessions, its most; end one (HTTP DELETE) \
                 or wait until an idle one expires"
            );
            return refusal(StatusCode::SERVICE_UNAVAILABLE, message);
        }
        let (parts, incoming) = request.into_parts();
        let bytes = match read_body(incoming).await {
            Ok(bytes) => bytes,
            Err(response) => return response,
        };
        if parts.method == Method::POST {
            if let Err(error @ body::BodyError::TooManyValues) = body::check(&bytes) {
                return refusal(StatusCode::PAYLOAD_TOO_LARGE, error.to_string());
            }
        }
        let request = Request::from_parts(parts, Full::new(bytes));
        self.service.handle(request).await
    }
}

/// The whole body, or the response refusing it (too large, too slow, broken off).
async fn read_body(incoming: Incoming) -> Result<Bytes, Response<ResponseBody>> {
    let too_large = || {
        let message = format!("the request body is over {} bytes", body::MAX_BYTES);
        refusal(StatusCode::PAYLOAD_TOO_LARGE, message)
    };
    let collected = Limited::new(incoming, body::MAX_BYTES).collect();
    match tokio::time::timeout(BODY_TIMEOUT, collected).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Ok(Err(error)) => Err(refusal(
            StatusCode::BAD_REQUEST,
            format!("reading the request body failed: {error}"),
        )),
        Err(_) => Err(refusal(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                BODY_TIMEOUT.as_secs()
            ),
        )),
    }
}

/// A plain-text refusal.
pub(crate) fn refusal(status: StatusCode, message: String) -> Response<ResponseBody> {
    let mut response = Response::new(Full::new(Bytes::from(message + "\n")).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

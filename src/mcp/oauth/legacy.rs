//! Servers of the 2025-03-26 revision: no protected resource metadata; the authorization
//! server's metadata sits at the MCP server's origin (`/.well-known/oauth-authorization-server`).
//! rmcp holds that metadata to RFC 8414's issuer rule (the `issuer` must be the URL the
//! well-known path was put into, here the bare origin) and refuses one that names a path of the
//! same origin (`https://host/oauth`). That revision has no issuer to check against but the
//! server's own origin, so kin takes such metadata when its issuer is on that origin and the
//! server publishes no protected resource metadata (had it, the newer rules would apply in
//! full).

use std::time::Duration;

use rmcp::transport::auth::{AuthError, AuthorizationMetadata};

/// How long one metadata request may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
const AS_METADATA: &str = "/.well-known/oauth-authorization-server";
const PRM: &str = "/.well-known/oauth-protected-resource";

/// Whether `error` is rmcp's refusal of an issuer that does not match the metadata's URL.
pub(super) fn is_issuer_mismatch(error: &AuthError) -> bool {
    matches!(error, AuthError::AuthorizationServerMismatch { .. })
}

/// The authorization server metadata at the origin of the MCP server at `url`, for a server of
/// the 2025-03-26 revision whose metadata names an issuer on its own origin; `None` otherwise
/// (protected resource metadata exists, the issuer is elsewhere, nothing answers).
pub(super) async fn origin_metadata(url: &str) -> Option<AuthorizationMetadata> {
    let server = reqwest::Url::parse(url).ok()?;
    let origin = server.origin().ascii_serialization();
    let http = reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let path = server.path().trim_end_matches('/');
    for prm in [format!("{origin}{PRM}{path}"), format!("{origin}{PRM}")] {
        match http.get(&prm).send().await {
            Ok(answer) if answer.status().is_success() => return None,
            Ok(_) => {}
            Err(error) => {
                tracing::debug!(%error, "protected resource metadata request failed");
                return None;
            }
        }
    }
    let answer = http
        .get(format!("{origin}{AS_METADATA}"))
        .send()
        .await
        .ok()?;
    if !answer.status().is_success() {
        return None;
    }
    let metadata: AuthorizationMetadata = answer.json().await.ok()?;
    let issuer = reqwest::Url::parse(metadata.issuer.as_deref()?).ok()?;
    (issuer.origin().ascii_serialization() == origin).then_some(metadata)
}

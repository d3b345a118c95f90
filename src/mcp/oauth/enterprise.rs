//! Enterprise-managed authorization (`grant = "enterprise"`): the user's ID token from the
//! enterprise IdP (printed by `id_token_command`) is exchanged there for an identity assertion
//! bound to the MCP server (ID-JAG, RFC 8693 token exchange), which the server's authorization
//! server takes for an access token (RFC 7523 JWT bearer grant), through rmcp's `enterprise`
//! module. No browser; the IdP decides whether the user may use the server.

use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest,
};
use rmcp::transport::auth::{
    default_oauth_http_client, CredentialStore, OAuthTokenResponse, StoredCredentials,
};

use super::OAuthError;
use crate::mcp::{EnterpriseIdp, OAuthSettings};
use crate::process::child_env::ChildEnv;

/// Gets server `name`'s token at `url` from the user's enterprise identity, and stores it.
pub(super) async fn exchange(
    name: &str,
    url: &str,
    settings: &OAuthSettings,
    idp: &EnterpriseIdp,
    env: &ChildEnv,
) -> Result<(), OAuthError> {
    let (Some(client_id), Some(secret)) = (
        settings.client_id.clone(),
        super::client_secret(name, settings)?,
    ) else {
        return Err(OAuthError::Flow(
            "the enterprise grant needs `client_id` and its secret".into(),
        ));
    };
    let id_token = crate::config::run_secret_command(&idp.id_token_command)
        .await
        .map_err(|why| OAuthError::Flow(format!("`id_token_command` {why}")))?;
    env.hide_value(&id_token);
    // The server's own authorization server, as its metadata names it.
    let store = super::store_for(name, url).await;
    let manager = super::manager(url, store.clone()).await?;
    let metadata = manager.resolve_metadata().await?.metadata;
    let issuer = metadata.issuer.clone().ok_or_else(|| {
        OAuthError::Flow("the authorization server's metadata names no issuer".into())
    })?;
    let resource_as = EmaAuthorizationServer::new(&issuer, &metadata.token_endpoint, &client_id)
        .with_client_authentication(EmaClientAuthentication::ClientSecretBasic(
            oauth2::ClientSecret::new(secret),
        ));
    let enterprise = EmaAuthorizationServer::new(&idp.issuer, &idp.token_endpoint, &idp.client_id);
    let http = default_oauth_http_client()?;
    let token = EmaExchangeRequest::new_with_id_token(enterprise, resource_as, url, &id_token)
        .with_scopes(settings.scopes.clone())
        .exchange(&http, &http)
        .await
        .map_err(|error| OAuthError::Flow(format!("the enterprise token exchange: {error}")))?;
    let scopes: Vec<String> = token.scopes.iter().cloned().collect();
    let mut response = serde_json::json!({
        "access_token": token.access_token.secret(),
        "token_type": "bearer",
    });
    if let Some(lifetime) = token.expires_in {
        response["expires_in"] = lifetime.as_secs().into();
    }
    if !scopes.is_empty() {
        response["scope"] = scopes.join(" ").into();
    }
    let response: OAuthTokenResponse = serde_json::from_value(response)
        .map_err(|error| OAuthError::Flow(format!("the enterprise token: {error}")))?;
    let received = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .ok();
    let stored = StoredCredentials::new(client_id, Some(response), scopes, received)
        .with_issuer(Some(issuer));
    store.save(stored).await?;
    Ok(())
}

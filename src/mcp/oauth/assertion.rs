//! The client credentials grant with a signed assertion instead of a secret
//! (`private_key_jwt`, RFC 7523): for each token request kin signs a short-lived JWT saying the
//! client is itself, with the client's own P-256 key (ES256), and the authorization server
//! checks it against the public key it holds for the client. rmcp offers this only with a
//! second crypto library; the signature here is ring's, which kin's TLS already uses.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
use rmcp::transport::auth::{CredentialStore, OAuthTokenResponse, StoredCredentials};
use serde_json::{json, Value};

use super::OAuthError;

/// How long an assertion is good for: the one token request it is made for.
const LIFETIME: Duration = Duration::from_secs(300);
/// How long the token endpoint may take to answer.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// The most of a token response kin reads: a token is a few kilobytes.
const MAX_RESPONSE: usize = 1 << 20;

/// The token endpoint's answer, up to [`MAX_RESPONSE`].
async fn body_of(mut answer: reqwest::Response) -> Result<String, OAuthError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|error| OAuthError::Flow(format!("the token response: {error}")))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_RESPONSE {
            return Err(OAuthError::Flow("the token response is over 1 MiB".into()));
        }
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The DER inside a PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
fn pkcs8_der(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem
        .lines()
        .skip_while(|line| line.trim() != "-----BEGIN PRIVATE KEY-----")
        .skip(1)
        .take_while(|line| !line.starts_with("-----END"))
        .map(str::trim)
        .collect();
    if body.is_empty() {
        return Err("it holds no `BEGIN PRIVATE KEY` block (a PKCS#8 key)".into());
    }
    STANDARD
        .decode(body)
        .map_err(|error| format!("its key block is not base64: {error}"))
}

/// An ES256 assertion that `client_id` is itself, for the authorization server `audience`,
/// signed with the PKCS#8 key `pem`.
fn sign(pem: &str, client_id: &str, audience: &str, now: u64) -> Result<String, String> {
    let rng = SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &pkcs8_der(pem)?, &rng)
        .map_err(|_| "its key is not a P-256 private key (ES256)".to_owned())?;
    let header = json!({"alg": "ES256", "typ": "JWT"});
    let claims = json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + LIFETIME.as_secs(),
        "jti": uuid::Uuid::new_v4().to_string(),
    });
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let signature = key
        .sign(&rng, signed.as_bytes())
        .map_err(|_| "signing with it failed".to_owned())?;
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// Gets server `name`'s token at `url` for `client_id` itself, authenticated with an assertion
/// signed with the key in `key_file`, asking for `scopes`; stores it as a login's.
pub(super) async fn client_credentials(
    name: &str,
    url: &str,
    client_id: &str,
    key_file: &Path,
    scopes: &[String],
) -> Result<(), OAuthError> {
    let about_key =
        |why: String| OAuthError::Flow(format!("`private_key_file` {}: {why}", key_file.display()));
    let pem = tokio::fs::read_to_string(key_file)
        .await
        .map_err(|error| about_key(error.to_string()))?;
    let store = super::store_for(name, url).await;
    let manager = super::manager(url, store.clone()).await?;
    let metadata = manager.resolve_metadata().await?.metadata;
    let token_endpoint = metadata.token_endpoint.clone();
    // RFC 7523: the audience is the authorization server (its issuer), else its token endpoint.
    let audience = metadata.issuer.clone().unwrap_or(token_endpoint.clone());
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default();
    let assertion = sign(&pem, client_id, &audience, now).map_err(about_key)?;
    let form = {
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials")
            .append_pair("client_id", client_id)
            .append_pair("client_assertion_type", ASSERTION_TYPE)
            .append_pair("client_assertion", &assertion)
            .append_pair("resource", url);
        if !scopes.is_empty() {
            form.append_pair("scope", &scopes.join(" "));
        }
        form.finish()
    };
    let (http, _) = crate::mcp::http::parts(&token_endpoint, &[]).map_err(OAuthError::Flow)?;
    let answer = http
        .post(&token_endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(form)
        .timeout(TOKEN_TIMEOUT)
        .send()
        .await
        .map_err(|error| OAuthError::Flow(format!("the token request: {error}")))?;
    let status = answer.status();
    let body = body_of(answer).await?;
    if !status.is_success() {
        let why = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|error| Some(error.get("error")?.as_str()?.to_owned()))
            .unwrap_or_else(|| status.to_string());
        return Err(OAuthError::Flow(format!(
            "the authorization server refused the client's signed assertion: {why}"
        )));
    }
    let mut response: Value = serde_json::from_str(&body)
        .map_err(|error| OAuthError::Flow(format!("the token response: {error}")))?;
    // oauth2's token type is lower case; servers write "Bearer".
    if let Some(kind) = response.get("token_type").and_then(Value::as_str) {
        response["token_type"] = kind.to_ascii_lowercase().into();
    }
    let response: OAuthTokenResponse = serde_json::from_value(response)
        .map_err(|error| OAuthError::Flow(format!("the token response: {error}")))?;
    let stored = StoredCredentials::new(
        client_id.to_owned(),
        Some(response),
        scopes.to_vec(),
        Some(now),
    )
    .with_issuer(metadata.issuer);
    store.save(stored).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    fn pem_of(der: &[u8]) -> String {
        let body = STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|line| std::str::from_utf8(line).unwrap())
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    #[test]
    fn the_assertion_is_signed_by_the_clients_key_for_the_authorization_server() {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.as_ref(), &rng).unwrap();
        let jwt = sign(&pem_of(der.as_ref()), "svc", "https://as.example", 1_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref());
        let signed = format!("{}.{}", parts[0], parts[1]);
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        public.verify(signed.as_bytes(), &signature).unwrap();
        let decode = |part: &str| -> Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
        };
        assert_eq!(decode(parts[0]), json!({"alg": "ES256", "typ": "JWT"}));
        let claims = decode(parts[1]);
        assert_eq!(claims["iss"], "svc");
        assert_eq!(claims["sub"], "svc");
        assert_eq!(claims["aud"], "https://as.example");
        assert_eq!(claims["exp"], 1_300);
        assert!(claims["jti"].as_str().is_some_and(|jti| !jti.is_empty()));
    }

    #[test]
    fn a_file_without_a_p256_pkcs8_key_is_refused_with_the_reason() {
        let why = sign("not a key", "svc", "aud", 0).unwrap_err();
        assert!(why.contains("no `BEGIN PRIVATE KEY` block"), "{why}");
        let why = sign(&pem_of(b"\x30\x03\x02\x01\x00"), "svc", "aud", 0).unwrap_err();
        assert!(why.contains("not a P-256 private key"), "{why}");
    }
}

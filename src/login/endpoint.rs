//! The endpoints `kin login` offers and what it asks of them: the model list (`GET /models`)
//! and one small chat request that proves the key and the model answer.

use std::time::Duration;

use serde_json::{json, Value};

use crate::model::openai::{self, OpenAiSettings};

/// A provider kin knows, with its API root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Preset {
    /// `--provider` spells it so.
    pub(crate) id: &'static str,
    pub(crate) name: &'static str,
    pub(crate) base_url: &'static str,
    /// Whether the endpoint wants a key (local servers do not).
    pub(crate) needs_key: bool,
    /// The model picked when the user just presses Enter and the list has it.
    pub(crate) default_model: Option<&'static str>,
}

pub(crate) const PRESETS: [Preset; 4] = [
    Preset {
        id: "deepseek",
        name: "DeepSeek",
        base_url: "https://api.deepseek.com",
        needs_key: true,
        default_model: Some("deepseek-chat"),
    },
    Preset {
        id: "openai",
        name: "OpenAI",
        base_url: "https://api.openai.com/v1",
        needs_key: true,
        default_model: None,
    },
    Preset {
        id: "llama-cpp",
        name: "llama.cpp server on this machine",
        base_url: "http://127.0.0.1:8080/v1",
        needs_key: false,
        default_model: None,
    },
    Preset {
        id: "ollama",
        name: "Ollama on this machine",
        base_url: "http://127.0.0.1:11434/v1",
        needs_key: false,
        default_model: None,
    },
];

/// The preset `--provider` names.
pub(crate) fn preset(id: &str) -> Option<Preset> {
    PRESETS.into_iter().find(|preset| preset.id == id)
}

/// The preset whose API root `base_url` is (trailing slashes aside).
pub(crate) fn preset_at(base_url: &str) -> Option<Preset> {
    let url = base_url.trim_end_matches('/');
    PRESETS.into_iter().find(|preset| preset.base_url == url)
}

/// How long the model list and the check may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(20);
const CHECK_TIMEOUT: Duration = Duration::from_secs(90);

/// What went wrong with a request, sorted by what the user should change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// The endpoint could not be reached (or is not an OpenAI-compatible API).
    #[error("{0}")]
    Endpoint(String),
    /// The endpoint refused the key (401/403).
    #[error("{0}")]
    Key(String),
    /// The endpoint does not serve the model (404, or a 400 naming the model).
    #[error("{0}")]
    Model(String),
    /// Anything else (rate limits, server errors).
    #[error("{0}")]
    Other(String),
}

/// An HTTP client for `base_url`, as kin's model client builds it (same TLS and timeouts).
fn client(base_url: &str) -> Result<reqwest::Client, Refusal> {
    openai::http_client(&OpenAiSettings::new(base_url, ""))
        .map_err(|error| Refusal::Endpoint(error.to_string()))
}

fn with_key(request: reqwest::RequestBuilder, key: Option<&str>) -> reqwest::RequestBuilder {
    match key.filter(|key| !key.is_empty()) {
        Some(key) => request.bearer_auth(key),
        None => request,
    }
}

/// The model ids the endpoint lists, sorted; `Ok(None)` when it lists none (no `/models`,
/// or an answer in another shape). A refused key is an error.
pub(crate) async fn models(
    base_url: &str,
    key: Option<&str>,
) -> Result<Option<Vec<String>>, Refusal> {
    let url = format!("{}/models", base_url.trim_end_matches('/'));
    let request = with_key(client(base_url)?.get(&url), key).timeout(LIST_TIMEOUT);
    let response = request
        .send()
        .await
        .map_err(|error| unreachable(base_url, &error))?;
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    if status == 401 || status == 403 {
        return Err(Refusal::Key(refused_key(status, &body)));
    }
    if !(200..300).contains(&status) {
        return Ok(None);
    }
    let Ok(listed) = serde_json::from_str::<Value>(&body) else {
        return Ok(None);
    };
    let mut ids: Vec<String> = listed["data"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|model| model["id"].as_str())
        .map(str::to_owned)
        .collect();
    ids.sort();
    ids.dedup();
    Ok((!ids.is_empty()).then_some(ids))
}

/// One chat request to `model`: `Ok` when the endpoint answers it.
pub(crate) async fn check(base_url: &str, key: Option<&str>, model: &str) -> Result<(), Refusal> {
    let settings = OpenAiSettings::new(base_url, model);
    let url = settings.endpoint();
    let client = client(base_url)?;
    let mut body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Reply with the one word: ok"}],
        "max_tokens": 16,
        "stream": false,
    });
    for attempt in 0..2 {
        let request = with_key(client.post(&url), key)
            .json(&body)
            .timeout(CHECK_TIMEOUT);
        let response = request
            .send()
            .await
            .map_err(|error| unreachable(base_url, &error))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        // Some models take `max_completion_tokens` only: ask once more without a cap.
        if status == 400 && attempt == 0 && text.contains("max_tokens") {
            if let Some(fields) = body.as_object_mut() {
                fields.remove("max_tokens");
            }
            continue;
        }
        let message = server_message(&text);
        return Err(match status {
            401 | 403 => Refusal::Key(refused_key(status, &text)),
            404 => Refusal::Model(format!(
                "the endpoint does not serve the model {model:?} (HTTP 404): {message}"
            )),
            400 | 422 if message.to_lowercase().contains("model") => Refusal::Model(format!(
                "the endpoint refused the model {model:?} (HTTP {status}): {message}"
            )),
            _ => Refusal::Other(format!("the endpoint answered HTTP {status}: {message}")),
        });
    }
    Err(Refusal::Other("the endpoint refused every request".into()))
}

fn unreachable(base_url: &str, error: &reqwest::Error) -> Refusal {
    let why = openai::error_chain(error);
    Refusal::Endpoint(format!("could not reach {base_url}: {why}"))
}

fn refused_key(status: u16, body: &str) -> String {
    format!(
        "the endpoint refused the key (HTTP {status}): {}",
        server_message(body)
    )
}

/// What an error body says, on one line (the model client's reading of OpenAI-style bodies).
fn server_message(body: &str) -> String {
    let message = openai::readable_error(body);
    message.lines().next().unwrap_or_default().trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_found_by_id_and_by_url() {
        assert_eq!(
            preset("deepseek").map(|p| p.base_url),
            Some("https://api.deepseek.com")
        );
        assert_eq!(
            preset_at("http://127.0.0.1:8080/v1/").map(|p| p.id),
            Some("llama-cpp")
        );
        assert!(preset("nope").is_none() && preset_at("http://example.com").is_none());
        assert!(PRESETS
            .iter()
            .all(|p| p.needs_key == p.base_url.starts_with("https://")));
    }

    #[test]
    fn server_messages_come_from_the_error_body() {
        assert_eq!(
            server_message(r#"{"error":{"message":"Invalid API key","type":"auth"}}"#),
            "Invalid API key"
        );
        assert_eq!(server_message("Not Found\nmore"), "Not Found");
        assert_eq!(server_message(""), "(empty body)");
    }
}

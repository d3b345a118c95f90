//! The context window as a local server reports it, asked once per model: llama.cpp's
//! llama-server (`GET /props`: `default_generation_settings.n_ctx`) and Ollama (`POST
//! /api/show`: the `num_ctx` parameter, else its default). Only endpoints a local server can
//! answer for are asked (see [`worth_asking`]): a hosted API (DeepSeek, OpenAI, a gateway) is
//! never sent two extra round trips. Ollama cuts a prompt longer than `num_ctx` without an
//! error, so kin warns once and takes `num_ctx` as the window.

use std::time::Duration;

use serde_json::{json, Value};

use super::{OpenAiSettings, CHAT_COMPLETIONS};

/// Ollama's `num_ctx` when a model sets none (its documented default).
pub(crate) const OLLAMA_DEFAULT_NUM_CTX: u64 = 4096;

/// How long one question may take: a local server answers at once or not at all.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The server's window for `settings`' model (`Ok(None)` when it does not say), or `Err`
/// when the server could not be reached (asked again next time).
pub(super) async fn discover(
    client: &reqwest::Client,
    settings: &OpenAiSettings,
) -> Result<Option<u64>, Unreachable> {
    if !worth_asking(settings) {
        return Ok(None);
    }
    let root = server_root(&settings.base_url);
    if let Some(window) = llama_props(client, &root).await? {
        tracing::info!(window, "llama-server reports its context window (n_ctx)");
        return Ok(Some(window));
    }
    let Some((num_ctx, trained)) = ollama_show(client, &root, &settings.model).await? else {
        return Ok(None);
    };
    let window = num_ctx.unwrap_or(OLLAMA_DEFAULT_NUM_CTX);
    tracing::warn!(
        "Ollama cuts prompts longer than the model's num_ctx ({window} tokens{}) without an \
         error; kin takes {window} as the context window. For agent work raise it (the \
         OLLAMA_CONTEXT_LENGTH variable of `ollama serve`, or `PARAMETER num_ctx 16384` in a \
         Modelfile) and set `context_window` in kin's config to match.",
        trained.map_or_else(String::new, |t| format!("; the model was trained for {t}"))
    );
    Ok(Some(window))
}

/// Whether `settings`' endpoint may be a local server that knows its window: a loopback or
/// private address (or `localhost`), or a host that names llama.cpp or Ollama (`ollama:11434`
/// in a compose file, `llamacpp.lan`). Names are not resolved to find out.
pub(super) fn worth_asking(settings: &OpenAiSettings) -> bool {
    if settings.provider != "openai-compatible" {
        return false;
    }
    let Some(host) = super::host(&settings.base_url) else {
        return false;
    };
    if host == "localhost" || host.ends_with(".localhost") || host.contains("llama") {
        return true;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(std::net::IpAddr::V6(ip)) => {
            let first = ip.segments()[0];
            // Unique local (fc00::/7) and link-local (fe80::/10) addresses.
            ip.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
        Err(_) => false,
    }
}

/// The server did not answer at all.
#[derive(Debug)]
pub(super) struct Unreachable;

/// The server's root: the API root without its `/v1` (or the chat completions path).
fn server_root(base_url: &str) -> String {
    let root = base_url.trim_end_matches('/');
    let root = root.strip_suffix(CHAT_COMPLETIONS).unwrap_or(root);
    let root = root.trim_end_matches('/');
    root.strip_suffix("/v1").unwrap_or(root).to_owned()
}

/// The JSON answer to `request`; `Ok(None)` for any answer that is not a JSON success.
async fn get_json(request: reqwest::RequestBuilder) -> Result<Option<Value>, Unreachable> {
    let response = match tokio::time::timeout(ASK_TIMEOUT, request.send()).await {
        Ok(Ok(response)) => response,
        _ => return Err(Unreachable),
    };
    if !response.status().is_success() {
        return Ok(None);
    }
    let bytes = tokio::time::timeout(ASK_TIMEOUT, response.bytes()).await;
    Ok(bytes
        .ok()
        .and_then(Result::ok)
        .and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

async fn llama_props(client: &reqwest::Client, root: &str) -> Result<Option<u64>, Unreachable> {
    let Some(props) = get_json(client.get(format!("{root}/props"))).await? else {
        return Ok(None);
    };
    Ok(props
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| props.get("n_ctx"))
        .and_then(Value::as_u64)
        .filter(|n| *n > 0))
}

/// Ollama's `num_ctx` for `model` (if its parameters set one) and the length it was trained
/// for; `None` when the server is not Ollama.
async fn ollama_show(
    client: &reqwest::Client,
    root: &str,
    model: &str,
) -> Result<Option<(Option<u64>, Option<u64>)>, Unreachable> {
    let body = json!({ "model": model }).to_string();
    let request = client
        .post(format!("{root}/api/show"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body);
    let Some(show) = get_json(request).await? else {
        return Ok(None);
    };
    let Some(info) = show.get("model_info").and_then(Value::as_object) else {
        return Ok(None);
    };
    let trained = info
        .iter()
        .find(|(key, _)| key.ends_with(".context_length"))
        .and_then(|(_, value)| value.as_u64());
    let num_ctx = show
        .get("parameters")
        .and_then(Value::as_str)
        .and_then(parameter_num_ctx);
    Ok(Some((num_ctx, trained)))
}

/// `num_ctx` from Ollama's `parameters` text (`name value` lines).
fn parameter_num_ctx(parameters: &str) -> Option<u64> {
    parameters.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("num_ctx"))
            .then(|| words.next()?.parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_root_drops_the_api_path() {
        assert_eq!(
            server_root("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(server_root("http://h:11434/v1/"), "http://h:11434");
        assert_eq!(server_root("http://h/v1/chat/completions"), "http://h");
        assert_eq!(server_root("http://h:8080"), "http://h:8080");
    }

    #[test]
    fn only_endpoints_a_local_server_may_answer_for_are_asked() {
        let asked = |url: &str| worth_asking(&OpenAiSettings::new(url, "m"));
        for local in [
            "http://127.0.0.1:8080/v1",
            "http://localhost:11434/v1",
            "http://[::1]:8080/v1",
            "http://192.168.1.20:8080/v1",
            "http://10.0.0.5/v1",
            "http://172.20.0.3:8000/v1",
            "http://ollama:11434/v1",
            "http://llamacpp.lan/v1",
            "http://[fd00::2]:8080/v1",
        ] {
            assert!(asked(local), "{local}");
        }
        for hosted in [
            "https://api.deepseek.com",
            "https://api.openai.com/v1",
            "https://openrouter.ai/api/v1",
            "http://8.8.8.8/v1",
            "http://172.32.0.1/v1",
        ] {
            assert!(!asked(hosted), "{hosted}");
        }
    }

    #[test]
    fn num_ctx_is_read_from_ollamas_parameters() {
        let parameters = "stop                           \"<end_of_turn>\"\nnum_ctx                        8192\ntemperature 1";
        assert_eq!(parameter_num_ctx(parameters), Some(8192));
        assert_eq!(parameter_num_ctx("temperature 1"), None);
    }
}

//! `kin config`: the effective configuration as text, secrets masked, with each value's origin.

use std::fmt::Write as _;

use super::resolve::{ModelConfig, Setting};
use crate::model::openai::human_duration as human;
use crate::model::openai::KeyState;

/// A model's name and profile in one line, e.g. `deepseek-chat, 128000 tokens, images,
/// 0.27/1.1 USD per M in/out`.
fn describe(profile: &crate::model::ModelProfile, model: &str) -> String {
    let mut text = model.to_owned();
    if let Some(window) = profile.context_window {
        text.push_str(&format!(", {window} tokens"));
    }
    if let Some(max) = profile.max_output {
        text.push_str(&format!(", max output {max}"));
    }
    if profile.images {
        text.push_str(", images");
    }
    if let Some(prices) = &profile.prices {
        text.push_str(&format!(
            ", {}/{}/{} {} per M in/cached/out",
            prices.input, prices.cached_input, prices.output, prices.currency
        ));
    }
    text
}

/// The report `kin config` prints.
pub fn render(config: &ModelConfig, key: &KeyState) -> String {
    let mut out = String::new();
    let mut row = |name: &str, value: &str, origin: &str| {
        let line = format!("{name:<16} {value:<40} {origin}");
        let _ = writeln!(out, "{}", line.trim_end());
    };
    let file = match &config.file {
        Some(path) if config.file_found => path.display().to_string(),
        Some(path) => format!("{} (not found)", path.display()),
        None => "(none: neither XDG_CONFIG_HOME nor HOME is set)".into(),
    };
    row("config file", &file, "");
    let show = |setting: &Setting<String>| (setting.value.clone(), setting.origin.to_string());
    let (model, origin) = show(&config.model);
    row("model", &model, &origin);
    let (base_url, origin) = show(&config.base_url);
    row("base_url", &base_url, &origin);
    row("endpoint", &config.settings().endpoint(), "");
    match key {
        KeyState::Present(key) => row("api_key", &key.masked(), key.source()),
        KeyState::Missing { hint } => row("api_key", "(none)", hint),
    }
    row(
        "connect_timeout",
        &human(config.connect_timeout.value),
        &config.connect_timeout.origin.to_string(),
    );
    row(
        "stall_timeout",
        &human(config.stall_timeout.value),
        &config.stall_timeout.origin.to_string(),
    );
    row(
        "retries",
        &config.retries.value.to_string(),
        &config.retries.origin.to_string(),
    );
    let pass_env = match config.pass_env.value.as_slice() {
        [] => "(none)".to_owned(),
        names => names.join(", "),
    };
    row("pass_env", &pass_env, &config.pass_env.origin.to_string());
    row("compact_at", &config.compact_at.to_string(), "");
    row(
        "profile",
        &describe(&config.profile, &config.model.value),
        "",
    );
    for model in &config.models {
        let id = format!("models.{}", model.profile.id);
        let key = match &model.config.key {
            super::KeyPlan::Found(key) => key.masked(),
            super::KeyPlan::Command { source, .. } => format!("(from {source})"),
            super::KeyPlan::Missing { hint } => format!("(none: {hint})"),
        };
        let what = format!(
            "{} at {}, key {key}",
            describe(&model.profile, &model.config.model.value),
            model.config.base_url.value
        );
        row(&id, &what, "");
    }
    if !config.unknown_keys.is_empty() {
        row(
            "ignored keys",
            &config.unknown_keys.join(", "),
            "not known to this version of kin",
        );
    }
    out
}

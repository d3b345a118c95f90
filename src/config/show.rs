//! `kin config`: the effective configuration as text, secrets masked, with each value's origin.

use std::fmt::Write as _;

use super::resolve::{ModelConfig, Setting};
use crate::model::openai::human_duration as human;
use crate::model::openai::KeyState;

/// The report `kin config` prints.
pub fn render(config: &ModelConfig, key: &KeyState) -> String {
    let mut out = String::new();
    let mut row = |name: &str, value: &str, origin: &str| {
        let line = format!("{name:<24} {value:<40} {origin}");
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
    for (name, setting) in [
        ("max_tool_argument_bytes", &config.max_tool_argument_bytes),
        ("max_prompt_bytes", &config.max_prompt_bytes),
        ("max_prompt_blocks", &config.max_prompt_blocks),
    ] {
        row(
            name,
            &setting.value.to_string(),
            &setting.origin.to_string(),
        );
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

//! `kin config`: the effective configuration as text, secrets masked, with each value's origin.

use std::fmt::Write as _;

use super::acp_agents::AcpAgentConfig;
use super::resolve::{ModelConfig, Setting};
use crate::model::openai::human_duration as human;
use crate::model::openai::{ApiKey, KeyState};
use crate::process::child_env::is_credential_name;

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
    let first_token = config.first_token_timeout.value.map_or_else(
        || "scaled to the prompt (stall_timeout + 1 s per 50 tokens)".to_owned(),
        human,
    );
    row(
        "first_token_timeout",
        &first_token,
        &config.first_token_timeout.origin.to_string(),
    );
    row(
        "retries",
        &config.retries.value.to_string(),
        &config.retries.origin.to_string(),
    );
    row(
        "max_concurrent_requests",
        &config.max_concurrent_requests.value.to_string(),
        &config.max_concurrent_requests.origin.to_string(),
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
            super::KeyPlan::Stored { store, .. } => format!("(kin login, {})", store.id()),
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

/// The `[acp_agents.<name>]` tables of the config file, as kin will launch them; values of
/// credential-like variables in `env` are masked like the key.
pub fn render_agents(agents: &[AcpAgentConfig]) -> String {
    let mut out = String::new();
    let mut row = |name: &str, value: &str| {
        let line = format!("{name:<16} {value}");
        let _ = writeln!(out, "{}", line.trim_end());
    };
    for agent in agents {
        let command = std::iter::once(agent.command.as_str())
            .chain(agent.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        row(&format!("[acp_agents.{}]", agent.name), "");
        row("  command", &command);
        row("  tool", &agent.tool);
        row("  permission", agent.permission.id());
        let env: Vec<String> = agent
            .env
            .iter()
            .map(|(name, value)| match is_credential_name(name) {
                true => format!("{name}={}", ApiKey::new(value.as_str(), "").masked()),
                false => format!("{name}={value}"),
            })
            .collect();
        if !env.is_empty() {
            row("  env", &env.join(" "));
        }
        let cwd = agent.cwd.as_ref().map(|cwd| cwd.display().to_string());
        row(
            "  cwd",
            cwd.as_deref().unwrap_or("(the delegating session's)"),
        );
        let continuable = match agent.continuable {
            Some(true) => "yes (forced)",
            Some(false) => "no (forced)",
            None => "as the child's initialize answer says",
        };
        row("  continuable", continuable);
        row("  sandbox", &agent.confinement.describe());
        row(
            "  timeouts",
            &format!(
                "initialize {}, eof_grace {}, term_grace {}",
                human(agent.initialize_timeout),
                human(agent.eof_grace),
                human(agent.term_grace)
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_tables_are_shown_with_credentials_masked() {
        let mut agent = AcpAgentConfig::new("codex", "codex-acp", vec!["-c".into(), "x=1".into()]);
        agent.env = vec![
            ("RUST_LOG".into(), "warn".into()),
            ("OPENAI_API_KEY".into(), "sk-secret-value-4321".into()),
        ];
        let text = render_agents(&[agent]);
        assert!(text.contains("[acp_agents.codex]"), "{text}");
        assert!(text.contains("codex-acp -c x=1"), "{text}");
        assert!(text.contains("subagent_codex"), "{text}");
        assert!(text.contains("RUST_LOG=warn"), "{text}");
        assert!(text.contains("OPENAI_API_KEY=****4321"), "{text}");
        assert!(
            text.contains("  sandbox        off (default for codex-acp): left to its own sandbox"),
            "{text}"
        );
        assert!(!text.contains("secret-value"), "{text}");
    }
}

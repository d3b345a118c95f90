//! Where kin keeps its data, and how it finds its model: the effective configuration from
//! command-line flags, environment variables and the config file (see `resolve`).

mod acp_agents;
pub mod agents;
mod delegation;
mod duration;
mod file;
mod key;
mod mcp_servers;
mod models;
mod reloadable;
mod resolve;
mod show;

use std::path::{Path, PathBuf};

pub use acp_agents::{AcpAgentConfig, AcpPermission};
pub use delegation::{DelegationSettings, DEFAULT_MAX_RUNNING, DEFAULT_MAX_RUNNING_PER_PROCESS};
pub use duration::parse_duration;
pub use file::ConfigFile;
pub use key::load as load_key;
pub use mcp_servers::{render as render_mcp_servers, McpSettings};
pub(crate) use reloadable::ReloadableModel;
pub use resolve::{
    resolve, resolve_in, ConfiguredModel, KeyPlan, ModelConfig, Origin, Overrides, Setting,
    ENV_API_KEY, ENV_BASE_URL, ENV_CONNECT_TIMEOUT, ENV_DEEPSEEK_KEY, ENV_MODEL, ENV_OPENAI_KEY,
    ENV_RETRIES, ENV_STALL_TIMEOUT,
};
pub use show::{render, render_agents};

/// Reads an environment variable; empty values count as unset.
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// kin's config directory (`$XDG_CONFIG_HOME/kin`, else `~/.config/kin`), where user-wide
/// slash commands live in `commands/`.
pub(crate) fn config_dir(env: EnvLookup<'_>) -> Option<PathBuf> {
    file::path(env).and_then(|path| path.parent().map(Path::to_owned))
}

/// The process environment as an [`EnvLookup`].
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Why the configuration could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("reading the config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The config file is not TOML.
    #[error("the config file {path} is not valid TOML (line {line}): {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The line of the first error.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// Valid TOML with a value of the wrong type or form; `message` says what was expected.
    #[error("{path}:{line}: `{key}`: {message}")]
    Value {
        /// The file.
        path: PathBuf,
        /// The line of the value.
        line: usize,
        /// The key, dotted (`delegation.timeout`).
        key: String,
        /// What was expected.
        message: String,
    },
    /// A setting has a value kin cannot use.
    #[error("{origin}: {reason}")]
    Invalid {
        /// Where the value came from (flag, environment, file).
        origin: String,
        /// Why it is not usable.
        reason: String,
    },
    /// The model client could not be built from the settings.
    #[error(transparent)]
    Client(#[from] crate::model::openai::ClientError),
}

/// The configured OpenAI-compatible model (with or without a key yet), ready to serve. ACP
/// `authenticate` rebuilds it from the flags and the environment and config file as they are
/// then (see [`ReloadableModel`]).
pub(crate) async fn build_model(
    overrides: &Overrides,
    config: ModelConfig,
) -> Result<ReloadableModel, ConfigError> {
    ReloadableModel::new(overrides, config).await
}

/// Every configured model: the default (as [`build_model`]) first, then the `[models.<id>]`
/// tables, each with its own endpoint model, base URL and key when it names them.
pub async fn build_models(
    overrides: &Overrides,
    config: ModelConfig,
) -> Result<crate::model::ModelCatalog, ConfigError> {
    use crate::model::{ModelCatalog, ModelChoice, OpenAiModel};
    use std::sync::Arc;
    let profile = config.profile.clone();
    let compact_at = config.compact_at;
    let others = config.models.clone();
    let default = ModelChoice {
        profile,
        model: Arc::new(build_model(overrides, config).await?),
    };
    let mut choices = Vec::with_capacity(others.len());
    for other in others {
        let key = load_key(&other.config.key).await;
        let model = OpenAiModel::new(other.config.settings(), key)?;
        choices.push(ModelChoice {
            profile: other.profile,
            model: Arc::new(model),
        });
    }
    Ok(ModelCatalog::new(default, choices, compact_at))
}

/// `$KIN_HOME`, else `$XDG_DATA_HOME/kin`, else `~/.local/share/kin`, else `./.kin`.
pub fn kin_home() -> PathBuf {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(home) = from_env("KIN_HOME") {
        return home;
    }
    if let Some(data) = from_env("XDG_DATA_HOME") {
        return data.join("kin");
    }
    match from_env("HOME") {
        Some(home) => home.join(".local/share/kin"),
        None => PathBuf::from(".kin"),
    }
}

/// Tells the environment scrub of tool processes (`process::child_env`) what the configuration
/// (resolved from `overrides`) says: `pass_env`, the model key's variables, and the key itself
/// when it is at hand. Used in every mode, replay too; a configuration that does not resolve
/// leaves the default scrub.
pub fn configure_tool_env(overrides: &Overrides, config: Result<&ModelConfig, &ConfigError>) {
    use crate::process::child_env;
    match config {
        Ok(config) => {
            child_env::configure(config.pass_env.value.clone(), config.key_vars.clone());
            if let KeyPlan::Found(key) = &config.key {
                child_env::hide_value(key.secret());
            }
        }
        Err(error) => {
            tracing::debug!(%error, "the tool environment keeps its default scrub");
            child_env::configure(Vec::new(), overrides.api_key_env.iter().cloned().collect());
        }
    }
}

/// The configuration's size caps (see `crate::limits`); the defaults when it does not resolve.
pub fn limits(config: Result<&ModelConfig, &ConfigError>) -> crate::limits::Limits {
    config.map_or(crate::limits::Limits::DEFAULT, ModelConfig::limits)
}

/// The delegation limits of the config file's `[delegation]` table (defaults without one).
pub fn delegation_settings(config: &ConfigFile) -> DelegationSettings {
    config
        .file
        .as_ref()
        .and_then(|file| file.delegation.as_ref())
        .map(DelegationSettings::from_entry)
        .unwrap_or_default()
}

/// The child agents of the config file's `[acp_agents.<name>]` tables (none without a file).
pub fn acp_agents(config: &ConfigFile) -> Result<Vec<AcpAgentConfig>, ConfigError> {
    match (&config.file, &config.path) {
        (Some(file), Some(path)) => acp_agents::resolve(&file.acp_agents, path),
        _ => Ok(Vec::new()),
    }
}

/// The MCP servers of the config file (none without one).
pub fn mcp_servers(config: &ConfigFile) -> Result<McpSettings, ConfigError> {
    match (&config.file, &config.path) {
        (Some(file), Some(path)) => {
            mcp_servers::resolve(&file.mcp_servers, file.mcp_startup_timeout.as_ref(), path)
        }
        _ => Ok(McpSettings::default()),
    }
}

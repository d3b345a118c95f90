//! Where kin keeps its data, and how it finds its model: the effective configuration from
//! command-line flags, environment variables and the config file (see `resolve`).

mod acp_agents;
mod acp_sandbox;
pub mod agents;
mod credentials;
mod delegation;
mod duration;
mod edit;
mod file;
mod key;
mod mcp_servers;
mod models;
mod reloadable;
mod resolve;
mod sandbox;
mod show;

use std::path::{Path, PathBuf};

use crate::agent::context::DEFAULT_BYTES_PER_TOKEN;
use crate::agent::lean::{FixedCost, LeanMode, LEAN_SHARE};
use crate::process::child_env::ChildEnv;

pub use acp_agents::{AcpAgentConfig, AcpPermission};
pub use acp_sandbox::{ChildConfinement, KnownAgent};
pub use credentials::{
    credential_file, is_credential_file, mcp_token_dir, KeyStore, ENV_KEY_STORE,
};
pub(crate) use credentials::{keyring_delete, keyring_get, keyring_set, write_private};
pub(crate) use credentials::{remove as remove_key, save as save_key, CredentialError};
pub use delegation::{DelegationSettings, DEFAULT_MAX_RUNNING, DEFAULT_MAX_RUNNING_PER_PROCESS};
pub use duration::parse_duration;
pub(crate) use edit::{forget_sign_in, write_sign_in, SignIn};
pub use file::ConfigFile;
pub use key::load as load_key;
pub(crate) use key::run as run_secret_command;
pub use mcp_servers::{render as render_mcp_servers, McpSettings};
pub(crate) use reloadable::ReloadableModel;
pub use resolve::{
    resolve, resolve_in, ConfiguredModel, KeyPlan, ModelConfig, Origin, Overrides, Setting,
    ENV_API_KEY, ENV_BASE_URL, ENV_CONNECT_TIMEOUT, ENV_DEEPSEEK_KEY, ENV_MODEL, ENV_OPENAI_KEY,
    ENV_RETRIES, ENV_STALL_TIMEOUT,
};
pub use sandbox::render as render_sandbox;
pub use show::{render, render_agents};

/// Reads an environment variable; empty values count as unset.
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The config file's path (`$XDG_CONFIG_HOME/kin/config.toml`, else
/// `~/.config/kin/config.toml`); `None` when neither variable is set.
pub(crate) fn config_file(env: EnvLookup<'_>) -> Option<PathBuf> {
    file::path(env)
}

/// kin's config directory (`$XDG_CONFIG_HOME/kin`, else `~/.config/kin`), where user-wide
/// slash commands live in `commands/`.
pub(crate) fn config_dir(env: EnvLookup<'_>) -> Option<PathBuf> {
    file::path(env).and_then(|path| path.parent().map(Path::to_owned))
}

/// kin's own files, which tools must not read for the model: the config file and the data
/// directory `home`.
pub fn own_files(home: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = file::path(&process_env).into_iter().collect();
    files.push(home.to_owned());
    files
}

/// kin's own directories, which nothing kin confines may write: the config directory (the
/// config file, the key file, user-wide commands and agents) and the data directory `home`.
pub fn own_dirs(home: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = config_dir(&process_env).into_iter().collect();
    dirs.push(home.to_owned());
    dirs
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
    /// The config file could not be written.
    #[error("writing the config file {path}: {source}")]
    Write {
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
/// then (see [`ReloadableModel`]). Every key it loads is hidden through `env`.
pub(crate) async fn build_model(
    overrides: &Overrides,
    config: ModelConfig,
    env: &ChildEnv,
) -> Result<ReloadableModel, ConfigError> {
    ReloadableModel::new(overrides, config, env.clone()).await
}

/// Every configured model: the default (as [`build_model`]) first, then the `[models.<id>]`
/// tables, each with its own endpoint model, base URL and key when it names them. Every key
/// they load is hidden through `env`.
pub async fn build_models(
    overrides: &Overrides,
    config: ModelConfig,
    env: &ChildEnv,
) -> Result<crate::model::ModelCatalog, ConfigError> {
    use crate::model::{ModelCatalog, ModelChoice, OpenAiModel};
    use std::sync::Arc;
    let profile = config.profile.clone();
    let compact_at = config.compact_at;
    let others = config.models.clone();
    let default = ModelChoice {
        profile,
        model: Arc::new(build_model(overrides, config, env).await?),
    };
    let mut choices = Vec::with_capacity(others.len());
    // Tables naming the same endpoint share its cap on requests in flight.
    let mut by_endpoint = std::collections::HashMap::new();
    for other in others {
        let key = key::load_hidden(&other.config.key, env).await;
        let settings = other.config.settings();
        let endpoint = settings.endpoint();
        let mut model = OpenAiModel::new(settings, key)?;
        match by_endpoint.get(&endpoint) {
            Some(requests) => model = model.sharing_requests(Arc::clone(requests)),
            None => {
                by_endpoint.insert(endpoint, model.requests());
            }
        }
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

/// The environment scrub of the processes kin starts (`process::child_env`) as the
/// configuration (resolved from `overrides`) says: `pass_env`, the model key's variables, and
/// the key itself when it is at hand. Used in every mode, replay too; a configuration that
/// does not resolve gets the default scrub.
pub fn child_env(overrides: &Overrides, config: Result<&ModelConfig, &ConfigError>) -> ChildEnv {
    match config {
        Ok(config) => {
            let env = ChildEnv::new(config.pass_env.value.clone(), config.key_vars.clone());
            if let KeyPlan::Found(key) = &config.key {
                env.hide_value(key.secret());
            }
            env
        }
        Err(error) => {
            tracing::debug!(%error, "the tool environment keeps its default scrub");
            ChildEnv::new(Vec::new(), overrides.api_key_env.iter().cloned().collect())
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

/// `[tools] max_parallel` of the config file: calls of one model step that run at once.
pub fn max_parallel(config: &ConfigFile) -> Result<Setting<usize>, ConfigError> {
    let value = config
        .file
        .as_ref()
        .and_then(|file| file.tools.as_ref())
        .and_then(|tools| tools.max_parallel);
    let found = resolve::file_cap(value, "tools.max_parallel", &config.path)?;
    Ok(match found {
        Some((value, path)) => Setting {
            value,
            origin: Origin::File(path),
        },
        None => Setting {
            value: crate::agent::host::DEFAULT_MAX_PARALLEL,
            origin: Origin::Default,
        },
    })
}

/// `[tools] lean` of the config file: when requests go lean (default `auto`).
pub fn lean_mode(config: &ConfigFile) -> Setting<LeanMode> {
    let value = config
        .file
        .as_ref()
        .and_then(|file| file.tools.as_ref())
        .and_then(|tools| tools.lean);
    match (value, &config.path) {
        (Some(value), Some(path)) => Setting {
            value,
            origin: Origin::File(path.clone()),
        },
        _ => Setting {
            value: LeanMode::default(),
            origin: Origin::Default,
        },
    }
}

/// The `kin config` lines of `[tools]`: [`max_parallel`], [`lean_mode`], and what the fixed
/// part of a request costs, full and lean.
pub fn render_tools(
    max_parallel: &Setting<usize>,
    lean: &Setting<LeanMode>,
    cost: FixedCost,
) -> String {
    // At the estimate kin uses before an endpoint has counted any.
    let tokens = |bytes: usize| (bytes as f64 / DEFAULT_BYTES_PER_TOKEN).ceil() as u64;
    let rows = [
        (
            "tools.max_parallel",
            max_parallel.value.to_string(),
            max_parallel.origin.to_string(),
        ),
        (
            "tools.lean",
            lean.value.as_str().to_owned(),
            lean.origin.to_string(),
        ),
        (
            "fixed part, full",
            format!(
                "~{} tokens ({} bytes)",
                tokens(cost.full_bytes),
                cost.full_bytes
            ),
            "system prompt and tool schemas".to_owned(),
        ),
        (
            "fixed part, lean",
            format!(
                "~{} tokens ({} bytes)",
                tokens(cost.lean_bytes),
                cost.lean_bytes
            ),
            format!(
                "sent when the full part passes {}% of the window (lean = auto)",
                (LEAN_SHARE * 100.0) as u32
            ),
        ),
    ];
    let mut out = String::new();
    for (name, value, origin) in rows {
        let line = format!("{name:<24} {value:<40} {origin}");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The child agents of the config file's `[acp_agents.<name>]` tables (none without a file).
pub fn acp_agents(config: &ConfigFile) -> Result<Vec<AcpAgentConfig>, ConfigError> {
    match (&config.file, &config.path) {
        (Some(file), Some(path)) => {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            acp_agents::resolve(&file.acp_agents, home.as_deref(), path)
        }
        _ => Ok(Vec::new()),
    }
}

/// The MCP servers of the config file (none without one).
pub fn mcp_servers(config: &ConfigFile) -> Result<McpSettings, ConfigError> {
    match (&config.file, &config.path) {
        (Some(file), Some(path)) => {
            let timeout = file.mcp_startup_timeout.as_ref();
            let settings = mcp_servers::resolve(&file.mcp_servers, timeout, path)?;
            Ok(McpSettings {
                max_tools: file.mcp_max_tools,
                ..settings
            })
        }
        _ => Ok(McpSettings::default()),
    }
}

/// The `[sandbox]` settings of the config file (defaults without one), with the `kin mcp`
/// token in kin's data directory unreadable to confined processes.
pub fn sandbox_settings(
    config: &ConfigFile,
) -> Result<crate::process::sandbox::SandboxSettings, ConfigError> {
    let mut settings = match (&config.file, &config.path) {
        (Some(file), Some(path)) => match &file.sandbox {
            Some(entry) => {
                let home = std::env::var_os("HOME").map(PathBuf::from);
                sandbox::resolve(entry, home.as_deref(), path)?
            }
            None => Default::default(),
        },
        _ => Default::default(),
    };
    settings.unreadable = vec![kin_home().join(MCP_TOKEN_FILE)];
    Ok(settings)
}

/// The file name of the `kin mcp --listen` token, in kin's data directory.
pub(crate) const MCP_TOKEN_FILE: &str = "mcp-token";

//! The effective model configuration: command-line flags over environment variables over the
//! config file over defaults, each value with where it came from.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::duration::{duration_value, parse_duration, DurationValue};
use super::file::{ConfigFile, FileConfig};
pub use super::key::KeyPlan;
use super::{ConfigError, EnvLookup};
use crate::model::openai::{self, ApiKey, OpenAiSettings};

/// Environment variable naming the model.
pub const ENV_MODEL: &str = "KIN_MODEL";
/// Environment variable with the endpoint's base URL.
pub const ENV_BASE_URL: &str = "KIN_BASE_URL";
/// Environment variable with the API key.
pub const ENV_API_KEY: &str = "KIN_API_KEY";
/// Environment variable with the connect timeout.
pub const ENV_CONNECT_TIMEOUT: &str = "KIN_CONNECT_TIMEOUT";
/// Environment variable with the stall timeout (no bytes from the model for this long).
pub const ENV_STALL_TIMEOUT: &str = "KIN_STALL_TIMEOUT";
/// Environment variable with the number of retries of a model request.
pub const ENV_RETRIES: &str = "KIN_RETRIES";
/// Names separated by commas or spaces.
pub(crate) const ENV_PASS_ENV: &str = "KIN_PASS_ENV";
/// Used only for DeepSeek's API.
pub const ENV_DEEPSEEK_KEY: &str = "DEEPSEEK_API_KEY";
/// Used for every endpoint but DeepSeek's (the OpenAI SDKs' convention).
pub const ENV_OPENAI_KEY: &str = "OPENAI_API_KEY";

/// Values given on the command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// The name of the environment variable holding the key.
    pub api_key_env: Option<String>,
    /// `--connect-timeout`.
    pub connect_timeout: Option<Duration>,
    /// `--stall-timeout`.
    pub stall_timeout: Option<Duration>,
    /// `--retries`.
    pub retries: Option<u32>,
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Kin's built-in value.
    Default,
    /// A command-line flag.
    Flag(&'static str),
    /// An environment variable.
    Env(String),
    /// The config file.
    File(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Flag(flag) => write!(f, "flag {flag}"),
            Self::Env(name) => write!(f, "environment {name}"),
            Self::File(path) => write!(f, "config file {}", path.display()),
        }
    }
}

/// A resolved value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub(crate) value: T,
    pub(crate) origin: Origin,
}

impl<T: Copy> Setting<T> {
    /// The value in force.
    pub fn value(&self) -> T {
        self.value
    }
}

/// The model configuration as resolved from flags, environment and the config file.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// The config file looked at, and whether it exists.
    pub(crate) file: Option<PathBuf>,
    pub(crate) file_found: bool,
    /// Keys in the config file kin does not know.
    pub(crate) unknown_keys: Vec<String>,
    /// The model's name.
    pub model: Setting<String>,
    /// The endpoint's base URL.
    pub base_url: Setting<String>,
    /// How long connecting may take.
    pub connect_timeout: Setting<Duration>,
    /// How long the model may send nothing before the request is given up.
    pub stall_timeout: Setting<Duration>,
    /// How often a failed model request is retried.
    pub retries: Setting<u32>,
    /// Model requests in flight at once to the endpoint; more wait for a free one.
    pub(crate) max_concurrent_requests: Setting<usize>,
    /// Whether prompt images are sent to the model as images; the file's `images` key.
    pub(crate) images: bool,
    /// Where the API key comes from.
    pub key: KeyPlan,
    /// Credential-like variables tool processes may see anyway.
    pub(crate) pass_env: Setting<Vec<String>>,
    /// The variables the model key is, or could have been, read from.
    pub(crate) key_vars: Vec<String>,
    pub(crate) max_tool_argument_bytes: Setting<usize>,
    pub(crate) max_prompt_bytes: Setting<usize>,
    pub(crate) max_prompt_blocks: Setting<usize>,
    /// What kin knows of the default model (top-level `context_window`, prices, ...).
    pub(crate) profile: crate::model::ModelProfile,
    /// Share of the context window at which sessions are compacted.
    pub(crate) compact_at: f64,
    /// The `[models.<id>]` tables.
    pub(crate) models: Vec<ConfiguredModel>,
}

/// A configured model besides the default: its profile and how to reach it.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfiguredModel {
    pub(crate) profile: crate::model::ModelProfile,
    /// The default model's settings with this table's model, base URL and key.
    pub(crate) config: ModelConfig,
}

impl ModelConfig {
    pub(crate) fn settings(&self) -> OpenAiSettings {
        let mut settings =
            OpenAiSettings::new(self.base_url.value.clone(), self.model.value.clone());
        settings.connect_timeout = self.connect_timeout.value;
        settings.stall_timeout = self.stall_timeout.value;
        settings.retries = self.retries.value;
        settings.max_concurrent_requests = self.max_concurrent_requests.value;
        settings.images = self.images;
        settings
    }

    /// The size caps to enforce.
    pub(crate) fn limits(&self) -> crate::limits::Limits {
        crate::limits::Limits {
            tool_argument_bytes: self.max_tool_argument_bytes.value,
            prompt_bytes: self.max_prompt_bytes.value,
            prompt_blocks: self.max_prompt_blocks.value,
        }
    }
}

/// Picks the first value given: flag, environment, file, default.
fn pick<T>(
    flag: Option<(T, &'static str)>,
    env: Option<(T, String)>,
    file: Option<(T, PathBuf)>,
    default: T,
) -> Setting<T> {
    if let Some((value, flag)) = flag {
        return Setting {
            value,
            origin: Origin::Flag(flag),
        };
    }
    if let Some((value, name)) = env {
        return Setting {
            value,
            origin: Origin::Env(name),
        };
    }
    if let Some((value, path)) = file {
        return Setting {
            value,
            origin: Origin::File(path),
        };
    }
    Setting {
        value: default,
        origin: Origin::Default,
    }
}

/// Resolves the configuration from `overrides`, the environment `env` and the config file.
pub fn resolve(overrides: &Overrides, env: EnvLookup<'_>) -> Result<ModelConfig, ConfigError> {
    resolve_in(overrides, env, &ConfigFile::read(env)?)
}

/// [`resolve`] with the config file already read.
pub fn resolve_in(
    overrides: &Overrides,
    env: EnvLookup<'_>,
    config: &ConfigFile,
) -> Result<ModelConfig, ConfigError> {
    let path = config.path.clone();
    let file_found = config.file.is_some();
    let empty = FileConfig::default();
    let file = config.file.as_ref().unwrap_or(&empty);
    let in_file = |value: Option<_>| value.zip(path.clone());
    let from_env = |name: &str| env(name).map(|v| (v, name.to_owned()));

    let model = pick(
        overrides.model.clone().map(|v| (v, "--model")),
        from_env(ENV_MODEL),
        in_file(file.model.clone()),
        openai::DEFAULT_MODEL.to_owned(),
    );
    let base_url = pick(
        overrides.base_url.clone().map(|v| (v, "--base-url")),
        from_env(ENV_BASE_URL),
        in_file(file.base_url.clone()),
        openai::DEFAULT_BASE_URL.to_owned(),
    );
    check_url(&base_url)?;
    let connect_timeout = pick(
        overrides.connect_timeout.map(|v| (v, "--connect-timeout")),
        env_duration(env, ENV_CONNECT_TIMEOUT)?,
        file_duration(&file.connect_timeout, "connect_timeout", &path)?,
        openai::DEFAULT_CONNECT_TIMEOUT,
    );
    let stall_timeout = pick(
        overrides.stall_timeout.map(|v| (v, "--stall-timeout")),
        env_duration(env, ENV_STALL_TIMEOUT)?,
        file_duration(&file.stall_timeout, "stall_timeout", &path)?,
        openai::DEFAULT_STALL_TIMEOUT,
    );
    let retries = pick(
        overrides.retries.map(|v| (v, "--retries")),
        match env(ENV_RETRIES) {
            Some(text) => Some((
                text.trim()
                    .parse::<u32>()
                    .map_err(|_| ConfigError::Invalid {
                        origin: Origin::Env(ENV_RETRIES.into()).to_string(),
                        reason: format!("{text:?} is not a whole number"),
                    })?,
                ENV_RETRIES.to_owned(),
            )),
            None => None,
        },
        file.retries.zip(path.clone()),
        openai::DEFAULT_RETRIES,
    );
    let key = key_plan(overrides, env, file, path.as_ref(), &base_url.value);
    let pass_env = pick(
        None,
        from_env(ENV_PASS_ENV).map(|(text, name)| (split_names(&text), name)),
        file.pass_env.clone().zip(path.clone()),
        Vec::new(),
    );
    let key_vars = key_vars(overrides, file, &key);
    let cap = |value: Option<u64>, name: &str, default: usize| {
        file_cap(value, name, &path).map(|value| pick(None, None, value, default))
    };
    let max_tool_argument_bytes = cap(
        file.max_tool_argument_bytes,
        "max_tool_argument_bytes",
        crate::limits::DEFAULT_TOOL_ARGUMENT_BYTES,
    )?;
    let max_prompt_bytes = cap(
        file.max_prompt_bytes,
        "max_prompt_bytes",
        crate::limits::DEFAULT_PROMPT_BYTES,
    )?;
    let max_prompt_blocks = cap(
        file.max_prompt_blocks,
        "max_prompt_blocks",
        crate::limits::DEFAULT_PROMPT_BLOCKS,
    )?;
    let max_concurrent_requests = cap(
        file.max_concurrent_requests,
        "max_concurrent_requests",
        openai::DEFAULT_MAX_CONCURRENT_REQUESTS,
    )?;
    let profile = super::models::profile(
        crate::model::DEFAULT_MODEL_ID,
        &model.value,
        &file.profile,
        &path.as_ref().map_or_else(
            || "the config file".into(),
            |p| format!("config file {}", p.display()),
        ),
    )?;
    let compact_at = super::models::compact_at(file.compact_at, path.as_deref())?;
    let mut config = ModelConfig {
        unknown_keys: file.unknown.keys().cloned().collect(),
        file: path.clone(),
        file_found,
        model,
        base_url,
        connect_timeout,
        stall_timeout,
        retries,
        max_concurrent_requests,
        images: file.profile.images.unwrap_or(false),
        key,
        pass_env,
        key_vars,
        max_tool_argument_bytes,
        max_prompt_bytes,
        max_prompt_blocks,
        profile,
        compact_at,
        models: Vec::new(),
    };
    for entry in super::models::entries(&file.models, path.as_ref(), env)? {
        let file_origin = || path.clone().map_or(Origin::Default, Origin::File);
        let mut table = config.clone();
        table.model = Setting {
            value: entry.model,
            origin: file_origin(),
        };
        if let Some(base_url) = entry.base_url {
            table.base_url = Setting {
                value: base_url,
                origin: file_origin(),
            };
            check_url(&table.base_url)?;
        }
        if let Some(key) = entry.key {
            table.key = key;
        }
        config.models.push(ConfiguredModel {
            profile: entry.profile,
            config: table,
        });
    }
    Ok(config)
}

/// A size cap from the config file: a whole number above zero.
pub(super) fn file_cap(
    value: Option<u64>,
    name: &str,
    path: &Option<PathBuf>,
) -> Result<Option<(usize, PathBuf)>, ConfigError> {
    let (Some(value), Some(path)) = (value, path) else {
        return Ok(None);
    };
    match usize::try_from(value) {
        Ok(cap) if cap > 0 => Ok(Some((cap, path.clone()))),
        _ => Err(ConfigError::Invalid {
            origin: Origin::File(path.clone()).to_string(),
            reason: format!("`{name}` must be a whole number above zero, got {value}"),
        }),
    }
}

fn split_names(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `KIN_API_KEY`, the variables `--api-key-env` and `api_key_env` name, and the provider's
/// variable when the key came from it.
fn key_vars(overrides: &Overrides, file: &FileConfig, key: &KeyPlan) -> Vec<String> {
    let mut vars = vec![ENV_API_KEY.to_owned()];
    vars.extend(overrides.api_key_env.iter().cloned());
    vars.extend(file.api_key_env.iter().cloned());
    if let KeyPlan::Found(key) = key {
        if [ENV_DEEPSEEK_KEY, ENV_OPENAI_KEY].contains(&key.source()) {
            vars.push(key.source().to_owned());
        }
    }
    vars
}

fn check_url(base_url: &Setting<String>) -> Result<(), ConfigError> {
    let url = &base_url.value;
    if !(url.starts_with("http://") || url.starts_with("https://")) || openai::host(url).is_none() {
        return Err(ConfigError::Invalid {
            origin: base_url.origin.to_string(),
            reason: format!(
                "base URL {url:?} must be an http:// or https:// URL such as https://api.deepseek.com"
            ),
        });
    }
    if url
        .trim_end_matches('/')
        .ends_with(openai::CHAT_COMPLETIONS)
    {
        tracing::warn!(
            "base_url {url} ({}) already ends in {}: kin uses it as the endpoint as it is; \
             base_url is meant to be the API root, e.g. {}",
            base_url.origin,
            openai::CHAT_COMPLETIONS,
            url.trim_end_matches('/')
                .trim_end_matches(openai::CHAT_COMPLETIONS)
        );
    }
    Ok(())
}

fn env_duration(
    env: EnvLookup<'_>,
    name: &'static str,
) -> Result<Option<(Duration, String)>, ConfigError> {
    let Some(text) = env(name) else {
        return Ok(None);
    };
    parse_duration(&text)
        .map(|d| Some((d, name.to_owned())))
        .map_err(|reason| ConfigError::Invalid {
            origin: Origin::Env(name.into()).to_string(),
            reason,
        })
}

fn file_duration(
    value: &Option<DurationValue>,
    key: &str,
    path: &Option<PathBuf>,
) -> Result<Option<(Duration, PathBuf)>, ConfigError> {
    let (Some(value), Some(path)) = (value, path) else {
        return Ok(None);
    };
    duration_value(value)
        .map(|d| Some((d, path.clone())))
        .map_err(|reason| ConfigError::Invalid {
            origin: format!("{key} in config file {}", path.display()),
            reason,
        })
}

/// Where the key comes from: `--api-key-env`, then `KIN_API_KEY`, then the config file
/// (`api_key_command`, `api_key_env`, `api_key`), then the provider's usual variable.
fn key_plan(
    overrides: &Overrides,
    env: EnvLookup<'_>,
    file: &FileConfig,
    path: Option<&PathBuf>,
    base_url: &str,
) -> KeyPlan {
    if let Some(name) = &overrides.api_key_env {
        return match env(name) {
            Some(value) => KeyPlan::Found(ApiKey::new(value, name.clone())),
            None => KeyPlan::Missing {
                hint: format!("--api-key-env names {name}, which is not set"),
            },
        };
    }
    if let Some(value) = env(ENV_API_KEY) {
        return KeyPlan::Found(ApiKey::new(value, ENV_API_KEY));
    }
    let file_name = path.map_or_else(|| "the config file".into(), |p| p.display().to_string());
    if let Some(command) = &file.api_key_command {
        return KeyPlan::Command {
            command: command.clone(),
            source: format!("api_key_command in {file_name}"),
        };
    }
    if let Some(name) = &file.api_key_env {
        return match env(name) {
            Some(value) => KeyPlan::Found(ApiKey::new(value, name.clone())),
            None => KeyPlan::Missing {
                hint: format!("api_key_env in {file_name} names {name}, which is not set"),
            },
        };
    }
    if let Some(value) = file.api_key.as_ref().filter(|v| !v.is_empty()) {
        return KeyPlan::Found(ApiKey::new(
            value.clone(),
            format!("api_key in {file_name}"),
        ));
    }
    // What `kin login` stored beats the provider's variable: signing in is the later choice.
    if let Some(store) = file.api_key_store {
        return KeyPlan::Stored {
            store,
            file: super::credentials::credential_file(env),
        };
    }
    let provider_var = if openai::provider_name(base_url) == "deepseek" {
        ENV_DEEPSEEK_KEY
    } else {
        ENV_OPENAI_KEY
    };
    if let Some(value) = env(provider_var) {
        return KeyPlan::Found(ApiKey::new(value, provider_var));
    }
    KeyPlan::Missing {
        hint: format!(
            "run `kin login`, or set {ENV_API_KEY} (or {provider_var}) to your API key for \
             {base_url}, or set api_key_command in {file_name}"
        ),
    }
}

#[cfg(test)]
mod tests;

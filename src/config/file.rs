//! The config file, `$XDG_CONFIG_HOME/kin/config.toml` (else `~/.config/kin/config.toml`).
//! Only reads and parses it; precedence is `resolve`'s job.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::duration::DurationValue;
use super::{ConfigError, EnvLookup};

/// The keys kin reads; others are kept so `kin config` can point them out.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FileConfig {
    pub(crate) model: Option<String>,
    pub(crate) base_url: Option<String>,
    /// The key itself (prefer `api_key_command` or `api_key_env`).
    pub(crate) api_key: Option<String>,
    /// The name of an environment variable holding the key.
    pub(crate) api_key_env: Option<String>,
    /// A shell command printing the key, e.g. `pass show deepseek`.
    pub(crate) api_key_command: Option<String>,
    /// Where `kin login` put the key (see `credentials`).
    pub(crate) api_key_store: Option<super::credentials::KeyStore>,
    pub(crate) connect_timeout: Option<DurationValue>,
    pub(crate) stall_timeout: Option<DurationValue>,
    pub(crate) first_token_timeout: Option<DurationValue>,
    pub(crate) retries: Option<u32>,
    /// Credential-like variables tool processes may see (see `process::child_env`).
    pub(crate) pass_env: Option<Vec<String>>,
    /// Caps on sizes the model and the client choose (see `crate::limits`).
    pub(crate) max_tool_argument_bytes: Option<u64>,
    pub(crate) max_prompt_bytes: Option<u64>,
    pub(crate) max_prompt_blocks: Option<u64>,
    /// What kin knows of the default model (see `models`).
    #[serde(flatten)]
    pub(crate) profile: ProfileEntry,
    /// Share of the context window at which sessions are compacted (0 < x <= 1).
    pub(crate) compact_at: Option<f64>,
    /// More models, by id (see `models`).
    #[serde(default)]
    pub(crate) models: BTreeMap<String, ModelEntry>,
    /// Child agents over ACP (see `acp_agents`).
    #[serde(default)]
    pub(crate) acp_agents: BTreeMap<String, super::acp_agents::AcpAgentEntry>,
    /// Limits of delegated children (see `delegation`).
    #[serde(default)]
    pub(crate) delegation: Option<super::delegation::DelegationEntry>,
    /// How tool calls run (`[tools]`).
    #[serde(default)]
    pub(crate) tools: Option<ToolsEntry>,
    /// Model requests in flight at once to one endpoint.
    pub(crate) max_concurrent_requests: Option<u64>,
    /// MCP servers for every session (see `mcp_servers`).
    #[serde(default)]
    pub(crate) mcp_servers: BTreeMap<String, super::mcp_servers::McpServerEntry>,
    pub(crate) mcp_startup_timeout: Option<DurationValue>,
    /// The most MCP tools offered to the model (see `mcp_servers`).
    pub(crate) mcp_max_tools: Option<usize>,
    /// How commands are confined (see `sandbox`).
    #[serde(default)]
    pub(crate) sandbox: Option<super::sandbox::SandboxEntry>,
    #[serde(flatten)]
    pub(crate) unknown: BTreeMap<String, toml::Value>,
}

/// `[tools]` as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolsEntry {
    /// Calls of one model step that run at once (1: one at a time).
    pub(crate) max_parallel: Option<u64>,
    /// When requests go lean: `auto`, `on` or `off`.
    pub(crate) lean: Option<crate::agent::lean::LeanMode>,
}

/// The profile keys, at the top level (the default model) or in a `[models.<id>]` table.
#[derive(Debug, Default, Clone, Deserialize)]
pub(crate) struct ProfileEntry {
    pub(crate) context_window: Option<u64>,
    pub(crate) max_output: Option<u32>,
    pub(crate) images: Option<bool>,
    /// Prices per million tokens.
    pub(crate) input_price: Option<f64>,
    pub(crate) cached_input_price: Option<f64>,
    pub(crate) output_price: Option<f64>,
    pub(crate) currency: Option<String>,
}

/// One `[models.<id>]` table.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ModelEntry {
    /// Shown in the editor's model selector (default: the id).
    pub(crate) name: Option<String>,
    /// The model name the endpoint knows (default: the id).
    pub(crate) model: Option<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) api_key: Option<String>,
    pub(crate) api_key_env: Option<String>,
    pub(crate) api_key_command: Option<String>,
    pub(crate) context_window: Option<u64>,
    pub(crate) max_output: Option<u32>,
    pub(crate) images: Option<bool>,
    pub(crate) input_price: Option<f64>,
    pub(crate) cached_input_price: Option<f64>,
    pub(crate) output_price: Option<f64>,
    pub(crate) currency: Option<String>,
}

impl ModelEntry {
    pub(crate) fn profile_entry(&self) -> ProfileEntry {
        ProfileEntry {
            context_window: self.context_window,
            max_output: self.max_output,
            images: self.images,
            input_price: self.input_price,
            cached_input_price: self.cached_input_price,
            output_price: self.output_price,
            currency: self.currency.clone(),
        }
    }
}

/// Where the config file is looked for (it need not exist).
pub(crate) fn path(env: EnvLookup<'_>) -> Option<PathBuf> {
    if let Some(dir) = env("XDG_CONFIG_HOME").map(PathBuf::from) {
        if dir.is_absolute() {
            return Some(dir.join("kin/config.toml"));
        }
    }
    env("HOME").map(|home| PathBuf::from(home).join(".config/kin/config.toml"))
}

/// The config file as one read gives it: start-up takes the model, delegation, child-agent
/// and MCP settings from the same read (it was read and parsed once for each).
#[derive(Debug, Default)]
pub struct ConfigFile {
    pub(crate) path: Option<PathBuf>,
    /// `None` when there is no file.
    pub(crate) file: Option<FileConfig>,
}

impl ConfigFile {
    /// Reads the config file `env` points at.
    pub fn read(env: EnvLookup<'_>) -> Result<Self, ConfigError> {
        let path = path(env);
        let file = match &path {
            Some(path) => load(path)?,
            None => None,
        };
        Ok(Self { path, file })
    }
}

/// Reads the file; `Ok(None)` when there is none.
pub(crate) fn load(path: &Path) -> Result<Option<FileConfig>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            })
        }
    };
    // Syntax first: only text that is not TOML at all is "not valid TOML".
    if let Err(error) = text.parse::<toml::Table>() {
        return Err(ConfigError::Parse {
            path: path.to_owned(),
            line: error.span().map_or(0, |span| line_of(&text, span.start)),
            message: error.message().to_owned(),
        });
    }
    toml::from_str(&text).map(Some).map_err(|error| {
        let at = error.span().map_or(0, |span| span.start);
        ConfigError::Value {
            path: path.to_owned(),
            line: line_of(&text, at),
            key: key_at(&text, at),
            // serde names Rust types; the file's readers know TOML's.
            message: error
                .message()
                .replace("expected u32", "expected a whole number"),
        }
    })
}

/// The 1-based line holding byte `at`.
fn line_of(text: &str, at: usize) -> usize {
    let at = at.min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The dotted key whose value starts at byte `at`: the key on that line (`retries = ...`),
/// under the table header above it (`[acp_agents.codex]`), or the header itself.
fn key_at(text: &str, at: usize) -> String {
    let before = text.get(..at).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or_default().trim();
    let header = |line: &str| {
        let inner = line.strip_prefix('[')?.split(']').next()?;
        Some(inner.trim_matches(['[', ' ']).to_owned())
    };
    if line.starts_with('[') {
        return header(line).unwrap_or_default();
    }
    let key = line.split('=').next().unwrap_or_default().trim();
    let table = text[..line_start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| line.starts_with('['))
        .and_then(header);
    match table {
        Some(table) if !table.is_empty() => format!("{table}.{key}"),
        _ => key.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_known_keys_and_keeps_unknown_ones() {
        let file: FileConfig = toml::from_str(
            "model = \"m\"\nstall_timeout = \"200ms\"\nconnect_timeout = 5\nretries = 2\nfoo = 1\npass_env = [\"GH_TOKEN\"]\n",
        )
        .unwrap();
        assert_eq!(file.model.as_deref(), Some("m"));
        assert!(matches!(file.stall_timeout, Some(DurationValue::Text(ref t)) if t == "200ms"));
        assert!(matches!(file.connect_timeout, Some(DurationValue::Seconds(s)) if s == 5.0));
        assert_eq!(file.retries, Some(2));
        assert_eq!(file.pass_env, Some(vec!["GH_TOKEN".to_owned()]));
        assert!(file.unknown.contains_key("foo"));
    }

    fn value_error(text: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let error = load(&path).unwrap_err();
        assert!(matches!(error, ConfigError::Value { .. }), "{error}");
        error.to_string()
    }

    #[test]
    fn value_errors_name_the_file_line_key_and_expected_type() {
        let error = value_error("model = \"m\"\nretries = \"three\"\n");
        assert!(error.contains("config.toml:2: `retries`"), "{error}");
        assert!(error.contains("expected a whole number"), "{error}");
        assert!(!error.contains("not valid TOML"), "{error}");
        let error = value_error("stall_timeout = true\n");
        assert!(error.contains(":1: `stall_timeout`"), "{error}");
        assert!(error.contains("expected a duration"), "{error}");
        let error = value_error("connect_timeout = \"soon\"\n");
        assert!(error.contains("\"soon\" is not a duration"), "{error}");
        let error = value_error("[acp_agents.codex]\ncommand = \"x\"\nargs = \"nope\"\n");
        assert!(error.contains(":3: `acp_agents.codex.args`"), "{error}");
        assert!(error.contains("expected a sequence"), "{error}");
    }

    #[test]
    fn a_missing_file_is_none_and_a_bad_one_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(&dir.path().join("none.toml")).unwrap().is_none());
        let bad = dir.path().join("config.toml");
        std::fs::write(&bad, "model = ").unwrap();
        let error = load(&bad).unwrap_err().to_string();
        assert!(
            error.contains("config.toml") && error.contains("not valid TOML (line 1)"),
            "{error}"
        );
    }
}

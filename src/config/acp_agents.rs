//! The child agents kin can delegate to over ACP: the `[acp_agents.<name>]` tables of the
//! config file, checked and with their defaults filled in.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::acp_sandbox::ChildConfinement;
use super::duration::{duration_value, DurationValue};
use super::ConfigError;

/// How kin answers the permission requests of a child agent (always within the delegating
/// session's current mode; see `acp_client::permission`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AcpPermission {
    /// The child's rejecting option is picked.
    Reject,
    /// The child's one-time allowing option is picked.
    Allow,
    /// The editor asks the user, attributed to the child.
    #[default]
    Ask,
}

impl AcpPermission {
    /// The value as the config file writes it.
    pub(crate) fn id(self) -> &'static str {
        match self {
            Self::Reject => "reject",
            Self::Allow => "allow",
            Self::Ask => "ask",
        }
    }
}

/// One `[acp_agents.<name>]` table as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcpAgentEntry {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    remote_cwd: Option<String>,
    #[serde(default)]
    permission: AcpPermission,
    tool: Option<String>,
    continuable: Option<bool>,
    initialize_timeout: Option<DurationValue>,
    eof_grace: Option<DurationValue>,
    term_grace: Option<DurationValue>,
    sandbox: Option<bool>,
    #[serde(default)]
    writable: Vec<String>,
}

/// A child agent, ready to launch.
#[derive(Debug, Clone, PartialEq)]
pub struct AcpAgentConfig {
    pub(crate) name: String,
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    /// Added to the child's environment after the credential scrub.
    pub(crate) env: Vec<(String, String)>,
    /// `None`: the delegating session's cwd.
    pub(crate) cwd: Option<PathBuf>,
    /// For a child reached through a channel (`ssh host kin acp`, `docker exec -i`): the
    /// working directory on the other side, sent on `session/new` and not checked here. The
    /// local command still runs in `cwd`.
    pub(crate) remote_cwd: Option<String>,
    pub(crate) permission: AcpPermission,
    /// The delegation tool's name (default `subagent_<name>`).
    pub(crate) tool: String,
    /// Forces whether background children are continuable (`send_message`). `None` (the
    /// default): learned from the child's `initialize` answer (`sessionCapabilities.resume` or
    /// `loadSession`), see [`crate::delegation::AcpProvider`].
    pub(crate) continuable: Option<bool>,
    /// How long the child has to answer `initialize`.
    pub(crate) initialize_timeout: Duration,
    /// After its stdin is closed, how long the child has to exit before SIGTERM.
    pub(crate) eof_grace: Duration,
    /// After SIGTERM, how long the child has before SIGKILL.
    pub(crate) term_grace: Duration,
    /// Whether kin's sandbox confines the child, and where the child itself (not its
    /// commands) keeps state it must write, e.g. `~/.claude` (`sandbox`, `writable`).
    pub(crate) confinement: ChildConfinement,
}

pub(crate) const DEFAULT_INITIALIZE_TIMEOUT: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_EOF_GRACE: Duration = Duration::from_secs(1);
pub(crate) const DEFAULT_TERM_GRACE: Duration = Duration::from_secs(2);

impl AcpAgentConfig {
    /// A child agent with the default tool name, permission policy and timeouts.
    pub fn new(name: &str, command: &str, args: Vec<String>) -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let confinement =
            super::acp_sandbox::resolve(command, &args, None, Vec::new(), &[], home.as_deref());
        Self {
            name: name.to_owned(),
            command: command.to_owned(),
            args,
            env: Vec::new(),
            cwd: None,
            remote_cwd: None,
            permission: AcpPermission::default(),
            tool: format!("subagent_{name}"),
            continuable: None,
            initialize_timeout: DEFAULT_INITIALIZE_TIMEOUT,
            eof_grace: DEFAULT_EOF_GRACE,
            term_grace: DEFAULT_TERM_GRACE,
            confinement,
        }
    }
}

/// Checks the tables of `path`, in name order; `~/` in paths is `home`.
pub(crate) fn resolve(
    entries: &BTreeMap<String, AcpAgentEntry>,
    home: Option<&Path>,
    path: &Path,
) -> Result<Vec<AcpAgentConfig>, ConfigError> {
    entries
        .iter()
        .map(|(name, entry)| {
            let invalid = |key: &str, reason: String| ConfigError::Invalid {
                origin: format!("acp_agents.{name}.{key} in config file {}", path.display()),
                reason,
            };
            if entry.command.trim().is_empty() {
                return Err(invalid("command", "must not be empty".into()));
            }
            if let Some(cwd) = &entry.cwd {
                if !cwd.is_absolute() {
                    return Err(invalid(
                        "cwd",
                        format!("must be an absolute path: {}", cwd.display()),
                    ));
                }
            }
            if let Some(remote) = &entry.remote_cwd {
                if !remote.starts_with('/') {
                    return Err(invalid(
                        "remote_cwd",
                        format!("must be an absolute path on the remote side: {remote:?}"),
                    ));
                }
            }
            let tool = entry
                .tool
                .clone()
                .unwrap_or_else(|| format!("subagent_{name}"));
            if tool.is_empty()
                || !tool
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(invalid(
                    "tool",
                    format!("must be letters, digits, `_` or `-`: {tool:?}"),
                ));
            }
            let duration = |key: &str, value: &Option<DurationValue>, default: Duration| match value
            {
                None => Ok(default),
                Some(value) => duration_value(value).map_err(|reason| invalid(key, reason)),
            };
            let mut agent = AcpAgentConfig::new(name, &entry.command, entry.args.clone());
            agent.env = entry.env.clone().into_iter().collect();
            agent.cwd = entry.cwd.clone();
            agent.remote_cwd = entry.remote_cwd.clone();
            agent.permission = entry.permission;
            agent.tool = tool;
            agent.continuable = entry.continuable;
            agent.initialize_timeout = duration(
                "initialize_timeout",
                &entry.initialize_timeout,
                DEFAULT_INITIALIZE_TIMEOUT,
            )?;
            agent.eof_grace = duration("eof_grace", &entry.eof_grace, DEFAULT_EOF_GRACE)?;
            agent.term_grace = duration("term_grace", &entry.term_grace, DEFAULT_TERM_GRACE)?;
            let writable = entry
                .writable
                .iter()
                .map(|raw| {
                    super::sandbox::absolute(raw, home).ok_or_else(|| {
                        invalid(
                            "writable",
                            format!("must be absolute paths (or start with ~/): {raw:?}"),
                        )
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            agent.confinement = super::acp_sandbox::resolve(
                &entry.command,
                &entry.args,
                entry.sandbox,
                writable,
                &agent.env,
                home,
            );
            Ok(agent)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<AcpAgentConfig>, ConfigError> {
        let file: super::super::file::FileConfig = toml::from_str(text).unwrap();
        resolve(
            &file.acp_agents,
            Some(Path::new("/h")),
            Path::new("/c/config.toml"),
        )
    }

    #[test]
    fn reads_a_table_with_defaults() {
        let agents = parse(
            "[acp_agents.codex]\ncommand = \"codex-acp\"\nargs = [\"-c\", \"x\"]\nenv = { RUST_LOG = \"warn\" }\npermission = \"allow\"\neof_grace = \"200ms\"\n[acp_agents.kin]\ncommand = \"kin\"\ntool = \"ask_kin\"\n",
        )
        .unwrap();
        assert_eq!(agents.len(), 2);
        assert_eq!(agents[0].tool, "subagent_codex");
        assert_eq!(agents[0].args, ["-c", "x"]);
        assert_eq!(agents[0].env, [("RUST_LOG".to_owned(), "warn".to_owned())]);
        assert_eq!(agents[0].permission, AcpPermission::Allow);
        assert_eq!(agents[0].eof_grace, Duration::from_millis(200));
        assert_eq!(agents[0].term_grace, DEFAULT_TERM_GRACE);
        assert_eq!(agents[1].tool, "ask_kin");
        assert_eq!(agents[1].permission, AcpPermission::Ask);
        assert_eq!(agents[1].cwd, None);
        assert_eq!(agents[0].continuable, None);
        assert_eq!(agents[0].remote_cwd, None);
        let remote = parse("[acp_agents.r]\ncommand = \"ssh\"\nremote_cwd = \"/srv/w\"\n").unwrap();
        assert_eq!(remote[0].remote_cwd.as_deref(), Some("/srv/w"));
        let relative = parse("[acp_agents.r]\ncommand = \"ssh\"\nremote_cwd = \"w\"\n");
        assert!(relative.unwrap_err().to_string().contains("remote_cwd"));
        let forced = parse("[acp_agents.a]\ncommand = \"x\"\ncontinuable = false\n").unwrap();
        assert_eq!(forced[0].continuable, Some(false));
    }

    #[test]
    fn rejects_bad_values_naming_the_key() {
        let error = parse("[acp_agents.a]\ncommand = \"x\"\ncwd = \"rel\"\n").unwrap_err();
        assert!(error.to_string().contains("acp_agents.a.cwd"), "{error}");
        let error = parse("[acp_agents.a]\ncommand = \" \"\n").unwrap_err();
        assert!(
            error.to_string().contains("acp_agents.a.command"),
            "{error}"
        );
        // A bad duration is refused as the file is read (with its line, see `file`).
        let error = toml::from_str::<super::super::file::FileConfig>(
            "[acp_agents.a]\ncommand = \"x\"\nterm_grace = -1\n",
        )
        .unwrap_err();
        assert!(error.message().contains("not a positive"), "{error}");
        assert!(toml::from_str::<super::super::file::FileConfig>(
            "[acp_agents.a]\ncommand = \"x\"\nbogus = 1\n"
        )
        .is_err());
        assert!(toml::from_str::<super::super::file::FileConfig>(
            "[acp_agents.a]\ncommand = \"x\"\npermission = \"maybe\"\n"
        )
        .is_err());
    }
}

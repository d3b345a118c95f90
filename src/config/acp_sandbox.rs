//! How kin's sandbox treats one child agent (`sandbox` and `writable` of its
//! `[acp_agents.<name>]` table), with the defaults of the agents kin knows by command name:
//!
//! - `codex-acp` is left to its own sandbox: it confines its commands with bubblewrap, which
//!   cannot start under kin's Landlock, so kin does not confine it; kin's answers to its
//!   permission requests are the gate. With `sandbox = true`, `~/.codex` (or `CODEX_HOME`) is
//!   writable, and its own sandbox fails.
//! - `claude-agent-acp` is confined, writing `~/.claude` (or `CLAUDE_CONFIG_DIR`) and the
//!   socket directories Claude Code keeps outside the temp directory (`/tmp/cc-socks-<uid>`,
//!   `$XDG_RUNTIME_DIR/cc-socks`). Claude Code keeps one file directly in the home directory,
//!   `~/.claude.json`, written through temporary files and a lock directory beside it: that
//!   would need all of `$HOME` writable, so kin sets `CLAUDE_CONFIG_DIR` to `~/.claude` and
//!   that file is `~/.claude/.claude.json` for a confined child.
//! - `gemini` is confined, writing `~/.gemini`.
//! - `kin` is confined, writing its own `KIN_HOME` (added at launch), its commands held to
//!   the parent's command policy.
//!
//! Any other child is confined with nothing writable beyond what its commands may write.

use std::path::{Path, PathBuf};

/// An agent kin knows by its command's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnownAgent {
    /// `codex-acp` (`@zed-industries/codex-acp`).
    Codex,
    /// `claude-agent-acp` (`@agentclientprotocol/claude-agent-acp`, formerly under
    /// `@zed-industries`).
    Claude,
    /// Google's `gemini` CLI.
    Gemini,
    /// kin itself.
    Kin,
}

impl KnownAgent {
    /// The agent `command args` run, recognised by the file name of the command or of an
    /// argument (`npx -y @agentclientprotocol/claude-agent-acp@0.101`, `node .../codex-acp`).
    pub fn recognise(command: &str, args: &[String]) -> Option<Self> {
        std::iter::once(command)
            .chain(args.iter().map(String::as_str))
            .find_map(|word| {
                let name = word.rsplit('/').next().unwrap_or(word);
                let name = name.split('@').next().unwrap_or(name);
                let name = name.strip_suffix(".js").unwrap_or(name);
                match name {
                    "codex-acp" => Some(Self::Codex),
                    "claude-agent-acp" | "claude-code-acp" => Some(Self::Claude),
                    "gemini" => Some(Self::Gemini),
                    _ => None,
                }
            })
            .or_else(|| {
                let name = command.rsplit('/').next().unwrap_or(command);
                (name == "kin").then_some(Self::Kin)
            })
    }

    /// The name `kin config` gives it.
    pub fn id(self) -> &'static str {
        match self {
            Self::Codex => "codex-acp",
            Self::Claude => "claude-agent-acp",
            Self::Gemini => "gemini",
            Self::Kin => "kin",
        }
    }
}

/// How kin's sandbox treats one child agent, resolved.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChildConfinement {
    /// Whether kin confines the child itself (its commands through kin's terminals are
    /// confined either way).
    pub confined: bool,
    /// Directories the child itself may write (not its commands), made 0700 when missing.
    pub writable: Vec<PathBuf>,
    /// Added to a confined child's environment (Claude Code's `CLAUDE_CONFIG_DIR`).
    pub env: Vec<(String, String)>,
    /// The agent kin recognised, whose defaults apply.
    pub known: Option<KnownAgent>,
    /// `sandbox` was set in the table (not a default).
    pub configured: bool,
}

/// What the table's `sandbox` and `writable` (absolute, `~` expanded) and its `env` make of
/// the child `command args`, under home directory `home` (the child's `HOME` if `env` sets it).
pub fn resolve(
    command: &str,
    args: &[String],
    sandbox: Option<bool>,
    writable: Vec<PathBuf>,
    env: &[(String, String)],
    home: Option<&Path>,
) -> ChildConfinement {
    let known = KnownAgent::recognise(command, args);
    let set = |name: &str| {
        env.iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| PathBuf::from(value))
    };
    // The child's own `HOME`, when its table sets one, is where it keeps its state.
    let home = set("HOME").or_else(|| home.map(Path::to_owned));
    let at_home = |rest: &str| home.as_ref().map(|home| home.join(rest));
    let mut own = Vec::new();
    let mut added_env = Vec::new();
    match known {
        Some(KnownAgent::Codex) => own.extend(set("CODEX_HOME").or_else(|| at_home(".codex"))),
        Some(KnownAgent::Claude) => {
            let config = set("CLAUDE_CONFIG_DIR").or_else(|| at_home(".claude"));
            if let (Some(config), None) = (&config, set("CLAUDE_CONFIG_DIR")) {
                added_env.push((
                    "CLAUDE_CONFIG_DIR".to_owned(),
                    config.to_string_lossy().into_owned(),
                ));
            }
            own.extend(config);
            own.push(PathBuf::from(format!(
                "/tmp/cc-socks-{}",
                nix::unistd::getuid()
            )));
            let runtime = std::env::var_os("XDG_RUNTIME_DIR").filter(|dir| !dir.is_empty());
            own.extend(runtime.map(|dir| PathBuf::from(dir).join("cc-socks")));
        }
        Some(KnownAgent::Gemini) => own.extend(at_home(".gemini")),
        Some(KnownAgent::Kin) | None => {}
    }
    for path in writable {
        if !own.contains(&path) {
            own.push(path);
        }
    }
    ChildConfinement {
        confined: sandbox.unwrap_or(known != Some(KnownAgent::Codex)),
        writable: own,
        env: added_env,
        known,
        configured: sandbox.is_some(),
    }
}

impl ChildConfinement {
    /// The decision in one line, for `kin config`.
    pub fn describe(&self) -> String {
        let origin = match (self.configured, self.known) {
            (true, _) => "configured".to_owned(),
            (false, Some(known)) => format!("default for {}", known.id()),
            (false, None) => "default".to_owned(),
        };
        if !self.confined {
            return format!(
                "off ({origin}): left to its own sandbox; kin does not confine it, and kin's \
                 answers to its permission requests are the only gate"
            );
        }
        let mut writes: Vec<String> = self
            .writable
            .iter()
            .map(|path| path.display().to_string())
            .collect();
        if self.known == Some(KnownAgent::Kin) {
            writes.push("its KIN_HOME".into());
        }
        let writes = match writes.is_empty() {
            true => "nothing more".to_owned(),
            false => writes.join(", "),
        };
        format!("on ({origin}): the child writes what its commands may, and {writes}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn recognises_agents_by_command_or_package_name() {
        let known = |command: &str, list: &[&str]| KnownAgent::recognise(command, &args(list));
        assert_eq!(known("codex-acp", &[]), Some(KnownAgent::Codex));
        assert_eq!(
            known("/x/node_modules/.bin/codex-acp", &[]),
            Some(KnownAgent::Codex)
        );
        assert_eq!(
            known(
                "npx",
                &["-y", "@agentclientprotocol/claude-agent-acp@0.101.0"]
            ),
            Some(KnownAgent::Claude)
        );
        assert_eq!(
            known("gemini", &["--experimental-acp"]),
            Some(KnownAgent::Gemini)
        );
        assert_eq!(known("/usr/bin/kin", &["acp"]), Some(KnownAgent::Kin));
        assert_eq!(known("my-agent", &["--kin"]), None);
    }

    #[test]
    fn defaults_leave_codex_to_its_sandbox_and_confine_the_others() {
        let home = Path::new("/h");
        let codex = resolve("codex-acp", &[], None, Vec::new(), &[], Some(home));
        assert!(!codex.confined);
        assert!(codex.describe().contains("left to its own sandbox"));
        let claude = resolve("claude-agent-acp", &[], None, Vec::new(), &[], Some(home));
        assert!(claude.confined);
        assert_eq!(claude.writable[0], Path::new("/h/.claude"));
        assert!(claude.writable[1]
            .to_string_lossy()
            .starts_with("/tmp/cc-socks-"));
        assert_eq!(
            claude.env,
            [("CLAUDE_CONFIG_DIR".to_owned(), "/h/.claude".to_owned())]
        );
        let gemini = resolve("gemini", &[], None, vec!["/x".into()], &[], Some(home));
        assert_eq!(gemini.writable, [PathBuf::from("/h/.gemini"), "/x".into()]);
        let other = resolve("agent", &[], None, Vec::new(), &[], Some(home));
        assert!(other.confined && other.writable.is_empty());
    }

    #[test]
    fn the_table_overrides_the_defaults() {
        let home = Some(Path::new("/h"));
        let env = [("CODEX_HOME".to_owned(), "/c".to_owned())];
        let codex = resolve("codex-acp", &[], Some(true), Vec::new(), &env, home);
        assert!(codex.confined && codex.configured);
        assert_eq!(codex.writable, [PathBuf::from("/c")]);
        let env = [("HOME".to_owned(), "/other".to_owned())];
        let gemini = resolve("gemini", &[], None, Vec::new(), &env, home);
        assert_eq!(gemini.writable, [PathBuf::from("/other/.gemini")]);
        let env = [("CLAUDE_CONFIG_DIR".to_owned(), "/cc".to_owned())];
        let claude = resolve("claude-agent-acp", &[], Some(false), Vec::new(), &env, home);
        assert!(!claude.confined);
        assert_eq!(claude.writable[0], Path::new("/cc"));
        assert!(
            claude.env.is_empty(),
            "the user's own CLAUDE_CONFIG_DIR stays"
        );
        assert!(claude.describe().starts_with("off (configured)"));
    }
}

//! The `git` kin runs for itself in a repository (the worktrees of `isolation: "worktree"`).
//! A repository is the model's to change, `.git` included (a command's or `write`'s), so
//! nothing it configures may run with kin's rights: every such `git` starts through the
//! sandbox's launcher, writing only where the caller says (the repository's git directory) and
//! without the network, and with what git would run from its configuration switched off:
//! hooks, the fsmonitor, filter drivers (`clean`, `smudge`, `process`, found in the
//! configuration before each run that may apply them), the pager, credential helpers,
//! transports (so no ssh command and no fetch of a partial clone's objects), submodule
//! recursion and automatic gc. Callers add `--no-ext-diff --no-textconv` to `diff`. The
//! system configuration is not read. Where the kernel cannot confine, git runs unconfined
//! with all of that still switched off.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::child_env::ChildEnv;
use super::sandbox::{Sandbox, SandboxError};

/// Settings every `git` kin runs gets, with the command line's precedence.
const NEUTRAL: [(&str, &str); 8] = [
    // No hook runs (post-checkout, reference-transaction, ...): /dev/null holds none.
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.pager", "cat"),
    // No transport, so no `core.sshCommand`, `core.gitProxy` or lazy fetch runs.
    ("protocol.allow", "never"),
    ("credential.helper", ""),
    ("submodule.recurse", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
];

/// How kin's own `git` runs: the environment scrub and the sandbox that confines it.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    pub(crate) env: ChildEnv,
    pub(crate) sandbox: Arc<Sandbox>,
}

/// One `git` run, ready to start in its directory.
#[derive(Debug)]
pub(crate) struct GitLaunch {
    pub(crate) program: String,
    pub(crate) args: Vec<String>,
    /// Added to the scrubbed environment.
    pub(crate) env: Vec<(String, String)>,
}

impl GitLaunch {
    /// The process, for a blocking run in `dir`.
    pub(crate) fn command(&self, git: &Git, dir: &Path) -> std::process::Command {
        let mut command = std::process::Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .envs(git.env.scrubbed())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(dir)
            .stdin(std::process::Stdio::null());
        command
    }
}

impl Git {
    /// `git args`, run in its directory, writing only beneath `writable`, with the filter
    /// drivers named `filters` switched off besides [`NEUTRAL`].
    pub(crate) fn launch(
        &self,
        writable: &[PathBuf],
        filters: &[String],
        args: &[&str],
    ) -> Result<GitLaunch, SandboxError> {
        let args: Vec<String> = std::iter::once("--no-pager")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect();
        let launch = self.sandbox.helper(writable, "git", &args)?;
        let mut env = launch.env;
        env.push(("GIT_CONFIG_NOSYSTEM".into(), "1".into()));
        env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
        env.extend(config_env(filters));
        Ok(GitLaunch {
            program: launch.program,
            args: launch.args,
            env,
        })
    }

    /// The filter drivers the configuration seen from `dir` defines (any of `clean`, `smudge`,
    /// `process`): those to switch off in a run there that may apply them. Read by a confined
    /// `git config`, which runs nothing.
    pub(crate) fn filters(&self, dir: &Path) -> Result<Vec<String>, String> {
        let launch = self
            .launch(&[], &[], &["config", "-z", "--get-regexp", r"^filter\."])
            .map_err(|e| e.to_string())?;
        let output = launch
            .command(self, dir)
            .output()
            .map_err(|e| e.to_string())?;
        // 1: no such key.
        if !output.status.success() && output.status.code() != Some(1) {
            return Err(String::from_utf8_lossy(&output.stderr).trim().to_owned());
        }
        Ok(filter_names(&output.stdout))
    }
}

/// The driver names in `git config -z --get-regexp` output (`filter.<name>.<key>\n<value>\0`).
fn filter_names(listing: &[u8]) -> Vec<String> {
    let mut names = Vec::new();
    for entry in listing.split(|b| *b == 0) {
        let key = entry.split(|b| *b == b'\n').next().unwrap_or_default();
        let key = String::from_utf8_lossy(key);
        let name = key
            .strip_prefix("filter.")
            .and_then(|rest| rest.rsplit_once('.'))
            .map(|(name, _)| name.to_owned());
        if let Some(name) = name.filter(|name| !names.contains(name)) {
            names.push(name);
        }
    }
    names
}

/// [`NEUTRAL`] and the switched-off `filters` as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`
/// (a driver name may hold `=` or `.`, which `-c` could not carry).
fn config_env(filters: &[String]) -> Vec<(String, String)> {
    let mut settings: Vec<(String, String)> = NEUTRAL
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect();
    for name in filters {
        for key in ["clean", "smudge", "process"] {
            settings.push((format!("filter.{name}.{key}"), String::new()));
        }
        settings.push((format!("filter.{name}.required"), "false".into()));
    }
    let mut env = vec![("GIT_CONFIG_COUNT".to_owned(), settings.len().to_string())];
    for (n, (key, value)) in settings.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{n}"), key));
        env.push((format!("GIT_CONFIG_VALUE_{n}"), value));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_filter_driver_once() {
        let listing = b"filter.lfs.clean\ngit-lfs clean -- %f\0filter.lfs.smudge\nx\0\
            filter.a.b=c.process\ny\0";
        assert_eq!(filter_names(listing), ["lfs", "a.b=c"]);
        assert!(filter_names(b"").is_empty());
    }

    #[test]
    fn switches_off_what_git_would_run() {
        let env = config_env(&["evil".to_owned()]);
        let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!(get("GIT_CONFIG_COUNT"), Some("12"));
        assert_eq!(get("GIT_CONFIG_KEY_0"), Some("core.hooksPath"));
        assert_eq!(get("GIT_CONFIG_KEY_8"), Some("filter.evil.clean"));
        assert_eq!(get("GIT_CONFIG_VALUE_8"), Some(""));
        assert_eq!(get("GIT_CONFIG_VALUE_11"), Some("false"));
    }
}

//! The environment of the processes kin starts for tools (and child agents): kin's own,
//! without the model key and without anything named like a credential.
//!
//! Dropped: every variable whose value is the model key; the variables the key is read from
//! (`KIN_API_KEY`, the one named by `--api-key-env` or `api_key_env`, the provider's); and
//! every name containing `KEY`, `TOKEN`, `SECRET` or `PASSWORD` (any case) unless it is listed
//! in `pass_env`. The model key and its variables are never passed, whatever `pass_env` says.
//!
//! The policy is a [`ChildEnv`] the runtime owns and hands to everything that starts processes
//! (tools, child agents, MCP servers, git worktrees): the configuration sets it up, and a key
//! loaded later (a reload on `authenticate`) is hidden through it from every process started
//! after, in every session.

use crate::sync::{read_lock, write_lock};
use std::ffi::{OsStr, OsString};
use std::sync::{Arc, RwLock};

/// Name parts that mark a variable as a credential (compared upper-case).
const CREDENTIAL_MARKS: [&str; 4] = ["KEY", "TOKEN", "SECRET", "PASSWORD"];

/// What to drop and what to let through.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct EnvPolicy {
    /// Credential-like names let through anyway (`pass_env`).
    pub(crate) pass: Vec<String>,
    /// Variables the model key is read from: always dropped.
    pub(crate) key_vars: Vec<String>,
    /// Model keys (the current one and any loaded before): variables holding them are dropped.
    pub(crate) key_values: Vec<String>,
}

/// The environment scrub of the processes kin starts; clones share it, so a key hidden
/// through one is hidden for all. The default drops credential-named variables only.
#[derive(Clone, Default)]
pub struct ChildEnv(Arc<RwLock<EnvPolicy>>);

/// Names the variables let through and dropped by name, never the hidden keys.
impl std::fmt::Debug for ChildEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let policy = read_lock(&self.0);
        f.debug_struct("ChildEnv")
            .field("pass", &policy.pass)
            .field("key_vars", &policy.key_vars)
            .finish_non_exhaustive()
    }
}

impl ChildEnv {
    /// Lets the credential-named `pass` through and drops the model key's variables `key_vars`.
    pub fn new(pass: Vec<String>, key_vars: Vec<String>) -> Self {
        Self(Arc::new(RwLock::new(EnvPolicy {
            pass,
            key_vars,
            key_values: Vec::new(),
        })))
    }

    /// Drops, from now on, every variable whose value is `key` (a model key kin loaded).
    pub fn hide_value(&self, key: &str) {
        let key = key.trim();
        if key.is_empty() {
            return;
        }
        let mut policy = write_lock(&self.0);
        if !policy.key_values.iter().any(|known| known == key) {
            policy.key_values.push(key.to_owned());
        }
    }

    /// kin's environment as started processes get it.
    pub(crate) fn scrubbed(&self) -> Vec<(OsString, OsString)> {
        scrub(std::env::vars_os(), &read_lock(&self.0))
    }

    /// The variables a child agent asked to set for a command it runs through kin (its
    /// `terminal/create` `env`), without those the policy drops from kin's own: a child cannot
    /// put a credential-named variable or the model key into a command's environment.
    pub(crate) fn allowed(&self, vars: Vec<(String, String)>) -> Vec<(String, String)> {
        let policy = read_lock(&self.0);
        vars.into_iter()
            .filter(|(name, value)| keeps(&policy, OsStr::new(name), OsStr::new(value)))
            .collect()
    }
}

/// `vars` without what `policy` drops.
pub(crate) fn scrub(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    policy: &EnvPolicy,
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(name, value)| keeps(policy, name, value))
        .collect()
}

/// Whether a name looks like it holds a credential.
pub(crate) fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_MARKS.iter().any(|mark| upper.contains(mark))
}

fn keeps(policy: &EnvPolicy, name: &OsStr, value: &OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let value = value.as_bytes().trim_ascii();
    if policy.key_values.iter().any(|key| key.as_bytes() == value) {
        return false;
    }
    let name = name.to_string_lossy();
    if policy.key_vars.iter().any(|var| *var == name) {
        return false;
    }
    !is_credential_name(&name) || policy.pass.iter().any(|pass| *pass == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(policy: &EnvPolicy, vars: &[(&str, &str)]) -> Vec<String> {
        let vars = vars.iter().map(|(n, v)| (n.into(), v.into()));
        scrub(vars, policy)
            .into_iter()
            .map(|(n, _)| n.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn credential_names_go_unless_passed() {
        let policy = EnvPolicy {
            pass: vec!["GITHUB_TOKEN".into()],
            ..EnvPolicy::default()
        };
        let kept = names(
            &policy,
            &[
                ("PATH", "/bin"),
                ("OPENAI_API_KEY", "a"),
                ("foo_token", "b"),
                ("DB_PASSWORD", "c"),
                ("AWS_SECRET_ACCESS_KEY", "d"),
                ("GITHUB_TOKEN", "e"),
                ("HOME", "/h"),
            ],
        );
        assert_eq!(kept, ["PATH", "GITHUB_TOKEN", "HOME"]);
    }

    #[test]
    fn the_model_key_goes_by_name_and_by_value_even_when_passed() {
        let policy = EnvPolicy {
            pass: vec!["MY_LLM".into(), "KIN_API_KEY".into()],
            key_vars: vec!["MY_LLM".into(), "KIN_API_KEY".into()],
            key_values: vec!["sk-secret".into()],
        };
        let kept = names(
            &policy,
            &[
                ("MY_LLM", "something else"),
                ("KIN_API_KEY", "x"),
                ("COPY", "sk-secret"),
                ("COPY_WITH_NEWLINE", "sk-secret\n"),
                ("PREFIXED", "sk-secret-not"),
                ("TERM", "xterm"),
            ],
        );
        assert_eq!(kept, ["PREFIXED", "TERM"]);
    }

    #[test]
    fn hidden_values_accumulate_ignore_blanks_and_reach_every_clone() {
        let env = ChildEnv::new(Vec::new(), Vec::new());
        let shared = env.clone();
        env.hide_value("  ");
        env.hide_value("sk-child-env-test");
        shared.hide_value("sk-child-env-test");
        assert_eq!(read_lock(&shared.0).key_values, ["sk-child-env-test"]);
        let asked = vec![
            ("COPY".to_owned(), "sk-child-env-test".to_owned()),
            ("TERM".to_owned(), "xterm".to_owned()),
        ];
        assert_eq!(
            shared.allowed(asked),
            [("TERM".to_owned(), "xterm".to_owned())]
        );
    }
}

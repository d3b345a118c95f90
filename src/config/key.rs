//! Turning a [`KeyPlan`] into a key: running `api_key_command`, or reading the keyring or file
//! `kin login` put it in, when that is where it lives.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use super::credentials::{self, KeyStore};
use crate::model::openai::{ApiKey, KeyState};
use crate::process::child_env::ChildEnv;

/// Where the API key is to come from.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyPlan {
    /// A key given directly (flag, environment or file).
    Found(ApiKey),
    /// Run this shell command; its output is the key.
    Command {
        /// The shell command.
        command: String,
        /// Where the command was configured, for messages.
        source: String,
    },
    /// Read the key `kin login` kept in the keyring or the credential file.
    Stored {
        /// Which of the two.
        store: KeyStore,
        /// The credential file (for [`KeyStore::File`]).
        file: Option<PathBuf>,
    },
    /// No key is configured.
    Missing {
        /// Tells the user how to give one.
        hint: String,
    },
}

/// A key command that takes longer than this is given up on.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// [`load`], the key found hidden from the processes started through `env` from then on.
pub(crate) async fn load_hidden(plan: &KeyPlan, env: &ChildEnv) -> KeyState {
    let state = load(plan).await;
    if let KeyState::Present(key) = &state {
        env.hide_value(key.secret());
    }
    state
}

/// The key the plan leads to, or why there is none.
pub async fn load(plan: &KeyPlan) -> KeyState {
    match plan {
        KeyPlan::Found(key) => KeyState::Present(key.clone()),
        KeyPlan::Missing { hint } => KeyState::Missing { hint: hint.clone() },
        KeyPlan::Command { command, source } => match run(command).await {
            Ok(value) => KeyState::Present(ApiKey::new(value, source.clone())),
            Err(why) => KeyState::Missing {
                hint: format!("{source} {why}"),
            },
        },
        KeyPlan::Stored { store, file } => stored(*store, file.clone()).await,
    }
}

/// The key `kin login` kept; the keyring is asked on a blocking thread (it may wait on D-Bus).
async fn stored(store: KeyStore, file: Option<PathBuf>) -> KeyState {
    let read = tokio::task::spawn_blocking(move || credentials::load(store, file.as_deref()));
    let source = match store {
        KeyStore::Keyring => "the OS keyring (kin login)",
        KeyStore::File | KeyStore::None => "the key file of kin login",
    };
    match read.await {
        Ok(Ok(Some(key))) => KeyState::Present(ApiKey::new(key, source)),
        // The endpoint takes no key: an empty one sends no `Authorization` header.
        Ok(Ok(None)) => KeyState::Present(ApiKey::new("", "none needed (kin login)")),
        Ok(Err(error)) => KeyState::Missing {
            hint: format!("the key kin login kept cannot be read ({error}); run `kin login` again"),
        },
        Err(error) => KeyState::Missing {
            hint: format!("reading the key kin login kept failed: {error}"),
        },
    }
}

/// Runs a shell command whose output is a secret (a key, a token); the output, or why none.
pub(crate) async fn run(command: &str) -> Result<String, String> {
    let child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(COMMAND_TIMEOUT, child).await {
        Err(_) => return Err(format!("did not finish within {COMMAND_TIMEOUT:?}")),
        Ok(Err(error)) => return Err(format!("could not be started: {error}")),
        Ok(Ok(output)) => output,
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.trim();
        return Err(format!(
            "failed ({}){}",
            output.status,
            if stderr.is_empty() {
                String::new()
            } else {
                format!(": {}", stderr.lines().next().unwrap_or_default())
            }
        ));
    }
    let value = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if value.is_empty() {
        return Err("printed nothing".into());
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn commands_give_keys_or_say_why_not() {
        let plan = |command: &str| KeyPlan::Command {
            command: command.into(),
            source: "api_key_command in f".into(),
        };
        match load(&plan("echo '  sk-from-command  '")).await {
            KeyState::Present(key) => {
                assert_eq!(key.source(), "api_key_command in f");
                assert_eq!(key.masked(), "****mand");
            }
            other => panic!("{other:?}"),
        }
        let KeyState::Missing { hint } = load(&plan("echo oops >&2; exit 3")).await else {
            panic!("a failing command gives no key")
        };
        assert!(
            hint.contains("oops") && hint.contains("api_key_command"),
            "{hint}"
        );
        let KeyState::Missing { hint } = load(&plan("true")).await else {
            panic!("an empty output is no key")
        };
        assert!(hint.contains("printed nothing"), "{hint}");
    }
}

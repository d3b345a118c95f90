//! Where `kin login` keeps the API key: the OS keyring when one answers, else a file of its own
//! (mode 0600) in kin's config directory. The config file's `api_key_store` says which holds it
//! (or that the endpoint takes no key). Only the key lives here; nothing here logs it.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::EnvLookup;

/// The environment variable (and `kin login --key-store`) that picks where a new key goes.
pub const ENV_KEY_STORE: &str = "KIN_KEY_STORE";
/// The keyring service of every secret kin keeps, and the user name of the API key's entry.
#[cfg(feature = "keyring")]
const KEYRING_SERVICE: &str = "kin";
const KEYRING_API_KEY: &str = "api-key";
/// The key file's name in kin's config directory.
const CREDENTIAL_FILE_NAME: &str = "api-key";

/// Where the key of `kin login` is kept (the config file's `api_key_store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyStore {
    /// The OS keyring (Keychain, Credential Manager, Secret Service).
    Keyring,
    /// The credential file, [`credential_file`].
    File,
    /// The endpoint takes no key (a local server).
    None,
}

impl KeyStore {
    /// The config file's spelling.
    pub fn id(self) -> &'static str {
        match self {
            Self::Keyring => "keyring",
            Self::File => "file",
            Self::None => "none",
        }
    }

    /// The store named `id` (`keyring`, `file`, `none`).
    pub fn from_id(id: &str) -> Option<Self> {
        [Self::Keyring, Self::File, Self::None]
            .into_iter()
            .find(|store| store.id() == id)
    }
}

/// Why a key could not be stored, read or removed.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The OS keyring refused or is absent.
    #[error("the OS keyring: {0}")]
    Keyring(String),
    /// The credential file could not be written, read or removed.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Neither `XDG_CONFIG_HOME` nor `HOME` is set, so there is no config directory.
    #[error("no config directory (neither XDG_CONFIG_HOME nor HOME is set)")]
    NoConfigDir,
    /// The store holds no key.
    #[error("{0} holds no key")]
    Empty(String),
}

/// The file the key goes to when there is no keyring: `api-key` in kin's config directory
/// (`$XDG_CONFIG_HOME/kin`, else `~/.config/kin`). kin's own file tools and prompt
/// attachments refuse it (see [`is_credential_file`]).
pub fn credential_file(env: EnvLookup<'_>) -> Option<PathBuf> {
    super::config_dir(env).map(|dir| dir.join(CREDENTIAL_FILE_NAME))
}

/// Where `kin mcp login` keeps MCP servers' OAuth tokens when there is no keyring: a file (0600)
/// per server in this directory of kin's data directory, beside their lock files.
pub fn mcp_token_dir() -> PathBuf {
    super::kin_home().join("mcp-oauth")
}

/// Whether `meta` (of a file kin was asked to read) is kin's credential file or one of its MCP
/// token files, by device and inode, so a link or another spelling of the path is caught too.
pub fn is_credential_file(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    let same = |own: std::fs::Metadata| own.dev() == meta.dev() && own.ino() == meta.ino();
    let key = credential_file(&super::process_env);
    if key.is_some_and(|path| std::fs::metadata(path).is_ok_and(same)) {
        return true;
    }
    let Ok(tokens) = std::fs::read_dir(mcp_token_dir()) else {
        return false;
    };
    tokens
        .flatten()
        .any(|entry| std::fs::metadata(entry.path()).is_ok_and(same))
}

/// Keeps `key` in `store`: the keyring, or the credential file. `Keyring` falls back to the
/// file when no keyring answers; the store actually used is returned with, for a fallback,
/// why the keyring was not used.
pub(crate) fn save(
    store: KeyStore,
    key: &str,
    env: EnvLookup<'_>,
) -> Result<(KeyStore, Option<String>), CredentialError> {
    let fallback = match store {
        KeyStore::None => return Ok((KeyStore::None, None)),
        KeyStore::File => None,
        KeyStore::Keyring => match keyring_set(KEYRING_API_KEY, key) {
            Ok(()) => {
                // A key left in the file from an earlier sign-in would only mislead.
                let _ = remove_file(env);
                return Ok((KeyStore::Keyring, None));
            }
            Err(error) => Some(error.to_string()),
        },
    };
    let path = credential_file(env).ok_or(CredentialError::NoConfigDir)?;
    write_private(&path, format!("{key}\n").as_bytes())
        .map_err(|source| CredentialError::File { path, source })?;
    Ok((KeyStore::File, fallback))
}

/// The key kept in `store` (`None` for [`KeyStore::None`]).
pub(crate) fn load(
    store: KeyStore,
    file: Option<&Path>,
) -> Result<Option<String>, CredentialError> {
    let key = match store {
        KeyStore::None => return Ok(None),
        KeyStore::Keyring => keyring_get(KEYRING_API_KEY)?,
        KeyStore::File => {
            let path = file.ok_or(CredentialError::NoConfigDir)?;
            std::fs::read_to_string(path).map_err(|source| CredentialError::File {
                path: path.to_owned(),
                source,
            })?
        }
    };
    let key = key.trim();
    if key.is_empty() {
        let place = match (store, file) {
            (KeyStore::File, Some(path)) => path.display().to_string(),
            _ => "the OS keyring".to_owned(),
        };
        return Err(CredentialError::Empty(place));
    }
    Ok(Some(key.to_owned()))
}

/// Removes the key from the keyring and the credential file; says where one was removed.
pub(crate) fn remove(env: EnvLookup<'_>) -> Result<Vec<String>, CredentialError> {
    let mut removed = Vec::new();
    if keyring_delete(KEYRING_API_KEY)? {
        removed.push("the OS keyring".to_owned());
    }
    if let Some(path) = remove_file(env)? {
        removed.push(path.display().to_string());
    }
    Ok(removed)
}

/// Removes the credential file; `Ok(Some(path))` when there was one.
fn remove_file(env: EnvLookup<'_>) -> Result<Option<PathBuf>, CredentialError> {
    let Some(path) = credential_file(env) else {
        return Ok(None);
    };
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(Some(path)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CredentialError::File { path, source }),
    }
}

/// Writes `bytes` to `path` readable by the owner only, whole or not at all: a temporary file
/// beside it (created 0600) is renamed over it, so an interrupted write leaves the old file.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let name = path
        .file_name()
        .map_or_else(|| "kin".into(), |name| name.to_string_lossy().into_owned());
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// What a user is told when no keyring service answers (the platform's own error, a D-Bus
/// library's text on Linux, goes to the debug log).
#[cfg(feature = "keyring")]
const NO_KEYRING_SERVICE: &str = "no keyring service answered (on Linux one comes with a desktop \
session: GNOME Keyring, KWallet or KeePassXC)";

/// A keyring failure in words a user can act on; the platform's own detail is logged.
#[cfg(feature = "keyring")]
fn keyring_error(error: &keyring::Error) -> CredentialError {
    tracing::debug!(%error, "keyring");
    match error {
        keyring::Error::NoStorageAccess(_) => {
            CredentialError::Keyring("the keyring is locked or refused access".into())
        }
        keyring::Error::PlatformFailure(_) | keyring::Error::NoDefaultStore => {
            CredentialError::Keyring(NO_KEYRING_SERVICE.into())
        }
        other => CredentialError::Keyring(other.to_string()),
    }
}

#[cfg(feature = "keyring")]
fn keyring_entry(user: &str) -> Result<keyring::Entry, CredentialError> {
    if let Err(error) = keyring::Entry::store_status() {
        tracing::debug!(%error, "keyring store");
        return Err(CredentialError::Keyring(NO_KEYRING_SERVICE.into()));
    }
    keyring::Entry::new(KEYRING_SERVICE, user).map_err(|error| keyring_error(&error))
}

/// Keeps `secret` in the OS keyring under kin's service and `user`.
#[cfg(feature = "keyring")]
pub(crate) fn keyring_set(user: &str, secret: &str) -> Result<(), CredentialError> {
    keyring_entry(user)?
        .set_password(secret)
        .map_err(|error| keyring_error(&error))
}

/// The secret kept in the OS keyring under kin's service and `user`.
#[cfg(feature = "keyring")]
pub(crate) fn keyring_get(user: &str) -> Result<String, CredentialError> {
    keyring_entry(user)?
        .get_password()
        .map_err(|error| keyring_error(&error))
}

/// `Ok(true)` when the keyring held a key and it is gone; no keyring is nothing to delete.
#[cfg(feature = "keyring")]
pub(crate) fn keyring_delete(user: &str) -> Result<bool, CredentialError> {
    let Ok(entry) = keyring_entry(user) else {
        return Ok(false);
    };
    match entry.delete_credential() {
        Ok(()) => Ok(true),
        // No entry, or no keyring to hold one.
        Err(
            keyring::Error::NoEntry
            | keyring::Error::NoDefaultStore
            | keyring::Error::NoStorageAccess(_)
            | keyring::Error::PlatformFailure(_),
        ) => Ok(false),
        Err(error) => Err(keyring_error(&error)),
    }
}

#[cfg(not(feature = "keyring"))]
const NO_KEYRING: &str = "this kin was built without keyring support";

#[cfg(not(feature = "keyring"))]
pub(crate) fn keyring_set(_user: &str, _secret: &str) -> Result<(), CredentialError> {
    Err(CredentialError::Keyring(NO_KEYRING.into()))
}

#[cfg(not(feature = "keyring"))]
pub(crate) fn keyring_get(_user: &str) -> Result<String, CredentialError> {
    Err(CredentialError::Keyring(NO_KEYRING.into()))
}

#[cfg(not(feature = "keyring"))]
pub(crate) fn keyring_delete(_user: &str) -> Result<bool, CredentialError> {
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_file_store_is_private_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_string_lossy().into_owned();
        let env = move |name: &str| (name == "XDG_CONFIG_HOME").then(|| home.clone());
        let (store, why) = save(KeyStore::File, "sk-first-000000", &env).unwrap();
        assert_eq!((store, why), (KeyStore::File, None));
        let path = credential_file(&env).unwrap();
        assert_eq!(path, dir.path().join("kin/api-key"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        save(KeyStore::File, "sk-second-00000", &env).unwrap();
        let key = load(KeyStore::File, Some(&path)).unwrap();
        assert_eq!(key.as_deref(), Some("sk-second-00000"));
        // Only the key file is left: no temporary beside it.
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["api-key"]);
        assert_eq!(remove(&env).unwrap(), [path.display().to_string()]);
        assert!(!path.exists());
        assert!(matches!(
            load(KeyStore::File, Some(&path)),
            Err(CredentialError::File { .. })
        ));
    }

    #[test]
    fn an_empty_file_is_no_key_and_none_needs_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api-key");
        std::fs::write(&path, "\n").unwrap();
        let error = load(KeyStore::File, Some(&path)).unwrap_err().to_string();
        assert!(error.contains("holds no key"), "{error}");
        assert_eq!(load(KeyStore::None, None).unwrap(), None);
        assert_eq!(KeyStore::from_id("keyring"), Some(KeyStore::Keyring));
        assert_eq!(KeyStore::from_id("vault"), None);
    }
}

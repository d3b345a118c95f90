//! Where a configured server's OAuth tokens live: the OS keyring when one answers (unless
//! `KIN_KEY_STORE=file`), else a file of its own (0600) in kin's data directory
//! ([`mcp_token_dir`]), which kin's `read` and prompt attachments refuse. A token refresh holds
//! an exclusive lock on a file beside it, so kin processes sharing the store never both spend
//! one refresh token (one that the server rotated would be lost).

use std::path::PathBuf;

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

use crate::config::{mcp_token_dir, CredentialError, ENV_KEY_STORE};

/// One server's tokens, in the keyring or its file.
#[derive(Debug, Clone)]
pub(crate) struct TokenStore {
    /// The server's URL: tokens stored for another URL (the config changed) are not used.
    url: String,
    place: Place,
    lock: PathBuf,
}

#[derive(Debug, Clone)]
enum Place {
    /// The keyring entry's user name.
    Keyring(String),
    File(PathBuf),
}

/// What is stored: the credentials and the URL they are for.
#[derive(Serialize, Deserialize)]
struct Stored {
    url: String,
    credentials: StoredCredentials,
}

impl TokenStore {
    /// The store of server `name` at `url`.
    pub(crate) fn new(name: &str, url: &str) -> Self {
        let dir = mcp_token_dir();
        // A server name is a config table key: anything but `/` and `.` is kept readable.
        let file: String = name
            .chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => c,
                _ => '_',
            })
            .collect();
        let in_file = std::env::var(ENV_KEY_STORE).is_ok_and(|store| store == "file");
        let place = match in_file || !keyring_answers() {
            true => Place::File(dir.join(format!("{file}.json"))),
            false => Place::Keyring(format!("mcp-oauth/{name}")),
        };
        Self {
            url: url.to_owned(),
            place,
            lock: dir.join(format!("{file}.lock")),
        }
    }

    /// Where the tokens are, for people.
    pub(crate) fn describe(&self) -> String {
        match &self.place {
            Place::Keyring(_) => "the OS keyring".to_owned(),
            Place::File(path) => path.display().to_string(),
        }
    }

    fn read(&self) -> Result<Option<String>, CredentialError> {
        match &self.place {
            Place::Keyring(user) => match crate::config::keyring_get(user) {
                Ok(text) => Ok(Some(text)),
                // No entry, or no keyring: nothing stored.
                Err(_) => Ok(None),
            },
            Place::File(path) => match std::fs::read_to_string(path) {
                Ok(text) => Ok(Some(text)),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(source) => Err(CredentialError::File {
                    path: path.clone(),
                    source,
                }),
            },
        }
    }

    /// The stored credentials, if any are for this URL.
    pub(crate) fn stored(&self) -> Result<Option<StoredCredentials>, CredentialError> {
        let Some(text) = self.read()? else {
            return Ok(None);
        };
        Ok(serde_json::from_str::<Stored>(&text)
            .ok()
            .filter(|stored| stored.url == self.url)
            .map(|stored| stored.credentials))
    }

    /// Removes the tokens; `true` when there were some.
    pub(crate) fn remove(&self) -> Result<bool, CredentialError> {
        match &self.place {
            Place::Keyring(user) => crate::config::keyring_delete(user),
            Place::File(path) => match std::fs::remove_file(path) {
                Ok(()) => Ok(true),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(source) => Err(CredentialError::File {
                    path: path.clone(),
                    source,
                }),
            },
        }
    }

    fn write(&self, credentials: StoredCredentials) -> Result<(), CredentialError> {
        let stored = Stored {
            url: self.url.clone(),
            credentials,
        };
        let text = serde_json::to_string(&stored).unwrap_or_default();
        match &self.place {
            Place::Keyring(user) => crate::config::keyring_set(user, &text),
            Place::File(path) => {
                crate::config::write_private(path, text.as_bytes()).map_err(|source| {
                    CredentialError::File {
                        path: path.clone(),
                        source,
                    }
                })
            }
        }
    }
}

fn keyring_answers() -> bool {
    #[cfg(feature = "keyring")]
    return keyring::Entry::store_status().is_ok();
    #[cfg(not(feature = "keyring"))]
    false
}

fn store_error(error: CredentialError) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let store = self.clone();
        blocking(move || store.stored()).await
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || store.write(credentials)).await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let store = self.clone();
        blocking(move || store.remove().map(|_| ())).await
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let path = self.lock.clone();
        let lock = blocking(move || {
            use nix::fcntl::{Flock, FlockArg};
            use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
            let io = |source| CredentialError::File {
                path: path.clone(),
                source,
            };
            if let Some(dir) = path.parent() {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(io)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&path)
                .map_err(io)?;
            Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, errno)| io(errno.into()))
        })
        .await?;
        Ok(Some(CredentialRefreshGuard::new(lock)))
    }
}

/// Runs store I/O (a keyring's D-Bus round trip, a file, a lock wait) off the async workers.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, CredentialError> + Send + 'static,
) -> Result<T, AuthError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| AuthError::CredentialStoreError(error.to_string()))?
        .map_err(store_error)
}

//! The bearer token of `kin mcp --listen`: whoever holds it can run tasks as the user who
//! started kin, so it lives in a file only that user can read. Made at random on first use
//! (`mcp-token` in kin's data directory, kept across restarts), or the user's own file
//! (`--token-file`). Requests are checked against it in constant time.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq;

/// The file name of the token kin makes, in its data directory.
pub(crate) const FILE_NAME: &str = crate::config::MCP_TOKEN_FILE;
/// A token shorter than this is too easy to guess.
const MIN_CHARS: usize = 16;
/// More than a token file holds: the rest of a larger file is not read.
const MAX_BYTES: u64 = 4096;

/// Why the token could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read or written.
    #[error("cannot read or create the MCP token {}: {source}", path.display())]
    Io {
        /// The token's file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Other users could read the token.
    #[error(
        "the MCP token file {} can be read by other users (mode {mode:o}); make it private \
         with `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    Readable {
        /// The token's file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The file is not the user's own regular file (a symlink, or another user's).
    #[error(
        "the MCP token file {} {why}; kin reads only a regular file of the user who runs it",
        path.display()
    )]
    NotOwn {
        /// The token's file.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// The token is too easy to guess.
    #[error("the MCP token in {} is shorter than {MIN_CHARS} characters", path.display())]
    TooShort {
        /// The token's file.
        path: PathBuf,
    },
    /// The system had no random bytes to give.
    #[error("no random bytes for the MCP token")]
    Random,
}

/// The token requests must carry, and where it is.
pub(crate) struct Token {
    secret: String,
    path: PathBuf,
}

impl Token {
    /// The token in `path`; with `create`, a new random one is written there (0600) when the
    /// file does not exist yet.
    pub(crate) fn load(path: &Path, create: bool) -> Result<Self, TokenError> {
        let io = |source| TokenError::Io {
            path: path.to_owned(),
            source,
        };
        if create && !path.exists() {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io)?;
            }
            match write_new(path) {
                Ok(()) => {}
                // Another kin made it first: use theirs.
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(io(error)),
            }
        }
        let secret = read_own(path)?;
        if secret.chars().count() < MIN_CHARS {
            return Err(TokenError::TooShort {
                path: path.to_owned(),
            });
        }
        Ok(Self {
            secret,
            path: path.to_owned(),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether an `Authorization` header value is `Bearer <token>` (the scheme is
    /// case-insensitive), compared in constant time.
    pub(crate) fn accepts(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some((scheme, given)) = value.split_at_checked(7) else {
            return false;
        };
        scheme.eq_ignore_ascii_case(b"bearer ")
            && bool::from(given.trim_ascii().ct_eq(self.secret.as_bytes()))
    }
}

/// The token in `path`, opened without following a symlink and read only when the file is a
/// regular one, owned by this user and private to them.
fn read_own(path: &Path) -> Result<String, TokenError> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let io = |source| TokenError::Io {
        path: path.to_owned(),
        source,
    };
    let not_own = |why: String| TokenError::NotOwn {
        path: path.to_owned(),
        why,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|error| match error.raw_os_error() {
            Some(libc::ELOOP) => not_own("is a symlink".to_owned()),
            _ => io(error),
        })?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(not_own("is not a regular file".to_owned()));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(not_own(format!(
            "belongs to user id {}, not to {me}",
            meta.uid()
        )));
    }
    let mode = meta.mode();
    if mode & 0o077 != 0 {
        return Err(TokenError::Readable {
            path: path.to_owned(),
            mode: mode & 0o777,
        });
    }
    let mut text = String::new();
    file.take(MAX_BYTES).read_to_string(&mut text).map_err(io)?;
    Ok(text.trim().to_owned())
}

/// Writes a fresh random token to `path`, readable by its owner only from the start.
fn write_new(path: &Path) -> std::io::Result<()> {
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .map_err(|_| std::io::Error::other(TokenError::Random))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(format!("{hex}\n").as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_token_is_private_kept_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join(FILE_NAME);
        let token = Token::load(&path, true).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(token.secret.len(), 64);
        let again = Token::load(&path, true).unwrap();
        assert_eq!(again.secret, token.secret, "kept across restarts");
        let header = format!("Bearer {}", token.secret);
        assert!(token.accepts(Some(header.as_bytes())));
        assert!(token.accepts(Some(header.to_lowercase().as_bytes())));
        assert!(!token.accepts(Some(b"Bearer wrong")));
        assert!(!token.accepts(Some(token.secret.as_bytes())));
        assert!(!token.accepts(None));
    }

    #[test]
    fn a_users_file_must_be_private_and_long_enough() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "short\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = Token::load(&path, false).err().unwrap().to_string();
        assert!(error.contains("chmod 600"), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = Token::load(&path, false).err().unwrap().to_string();
        assert!(error.contains("shorter"), "{error}");
        let missing = Token::load(&dir.path().join("none"), false);
        assert!(matches!(missing, Err(TokenError::Io { .. })));
    }

    #[test]
    fn a_symlink_or_a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::write(&real, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Token::load(&real, false).is_ok());
        let link = dir.path().join(FILE_NAME);
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let error = Token::load(&link, true).err().unwrap().to_string();
        assert!(error.contains("is a symlink"), "{error}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let error = Token::load(&fifo, false).err().unwrap().to_string();
        assert!(error.contains("not a regular file"), "{error}");
    }
}

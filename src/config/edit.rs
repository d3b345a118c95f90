//! Changes to the config file that `kin login` and `kin logout` make: only the keys they own
//! change; comments, order and every other key stay as the user left them. The file is
//! replaced whole (a temporary file renamed over it), readable by its owner only.

use std::path::Path;

use toml_edit::{value, DocumentMut};

use super::credentials::{write_private, KeyStore};
use super::ConfigError;

/// Keys naming another source of the key; each would beat the one `kin login` stores.
const OTHER_KEY_SOURCES: [&str; 3] = ["api_key", "api_key_env", "api_key_command"];

/// What a sign-in writes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SignIn {
    pub(crate) base_url: String,
    pub(crate) model: String,
    pub(crate) store: KeyStore,
}

/// Writes `sign_in` into the config file at `path` (created if missing); returns the keys it
/// removed because they named another key source.
pub(crate) fn write_sign_in(path: &Path, sign_in: &SignIn) -> Result<Vec<String>, ConfigError> {
    let mut doc = read(path)?;
    doc["base_url"] = value(sign_in.base_url.as_str());
    doc["model"] = value(sign_in.model.as_str());
    doc["api_key_store"] = value(sign_in.store.id());
    let removed = OTHER_KEY_SOURCES
        .into_iter()
        .filter(|key| doc.remove(key).is_some())
        .map(str::to_owned)
        .collect();
    write(path, &doc)?;
    Ok(removed)
}

/// Removes `api_key_store` from the config file; `false` when it had none (nothing written).
pub(crate) fn forget_sign_in(path: &Path) -> Result<bool, ConfigError> {
    if !path.exists() {
        return Ok(false);
    }
    let mut doc = read(path)?;
    if doc.remove("api_key_store").is_none() {
        return Ok(false);
    }
    write(path, &doc)?;
    Ok(true)
}

/// The file as an editable document (empty when there is none). A file that is not TOML is
/// an error: overwriting it would lose whatever the user meant by it.
fn read(path: &Path) -> Result<DocumentMut, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            })
        }
    };
    text.parse::<DocumentMut>()
        .map_err(|error| ConfigError::Parse {
            path: path.to_owned(),
            line: error
                .span()
                .map_or(0, |span| text[..span.start].matches('\n').count() + 1),
            message: error.message().to_owned(),
        })
}

fn write(path: &Path, doc: &DocumentMut) -> Result<(), ConfigError> {
    let mut text = doc.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    write_private(path, text.as_bytes()).map_err(|source| ConfigError::Write {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const BEFORE: &str = "\
# my settings
model = \"old-model\" # the old one
api_key_env = \"MY_KEY\"
retries = 5

[acp_agents.codex]
command = \"codex-acp\"
";

    #[test]
    fn a_sign_in_changes_its_keys_and_keeps_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kin/config.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, BEFORE).unwrap();
        let sign_in = SignIn {
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "qwen".into(),
            store: KeyStore::File,
        };
        let removed = write_sign_in(&path, &sign_in).unwrap();
        assert_eq!(removed, ["api_key_env"]);
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(
            after.starts_with("# my settings\nmodel = \"qwen\""),
            "{after}"
        );
        assert!(after.contains("retries = 5"), "{after}");
        assert!(after.contains("[acp_agents.codex]\ncommand = \"codex-acp\""));
        assert!(!after.contains("MY_KEY"), "{after}");
        // The top-level keys stay above the tables, so they still read as top-level.
        let parsed: toml::Table = after.parse().unwrap();
        assert_eq!(parsed["api_key_store"].as_str(), Some("file"));
        assert_eq!(
            parsed["base_url"].as_str(),
            Some("http://127.0.0.1:8080/v1")
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        assert!(forget_sign_in(&path).unwrap());
        let parsed: toml::Table = std::fs::read_to_string(&path).unwrap().parse().unwrap();
        assert!(!parsed.contains_key("api_key_store"));
        assert_eq!(parsed["model"].as_str(), Some("qwen"));
        assert!(!forget_sign_in(&path).unwrap());
    }

    #[test]
    fn a_file_that_is_not_toml_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "model = \n").unwrap();
        let sign_in = SignIn {
            base_url: "https://api.deepseek.com".into(),
            model: "deepseek-chat".into(),
            store: KeyStore::Keyring,
        };
        let error = write_sign_in(&path, &sign_in).unwrap_err().to_string();
        assert!(error.contains("not valid TOML (line 1)"), "{error}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "model = \n");
    }
}

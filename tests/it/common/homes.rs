//! kin homes for the wire tests: one with a config file written in, kin on the mock model,
//! and the session logs a home holds.

use std::path::{Path, PathBuf};

use super::mock_openai::MockServer;
use super::Wire;

/// A kin home (`KIN_HOME`; its config directory is `config/kin`, as [`Wire`] sets
/// `XDG_CONFIG_HOME`) whose config file holds `config`.
pub fn home_with(config: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("config/kin");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), config).unwrap();
    home
}

impl Wire {
    /// `kin acp` in `home` on the mock server's `mock-model`, with the API key `key`.
    pub fn on_mock(server: &MockServer, home: tempfile::TempDir, key: &str) -> Self {
        let url = server.base_url();
        let env = [
            ("KIN_BASE_URL", url.as_str()),
            ("KIN_MODEL", "mock-model"),
            ("KIN_API_KEY", key),
        ];
        Self::start_with(None, home, &env)
    }
}

/// Every session log under `home`: top-level ones in `sessions/`, children in
/// `sessions/children/`.
pub fn session_files(home: &Path) -> Vec<PathBuf> {
    let sessions = home.join("sessions");
    [sessions.clone(), sessions.join("children")]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "jsonl"))
        .collect()
}

/// The log of child session `id` under `home`.
pub fn child_log_path(home: &Path, id: &str) -> PathBuf {
    home.join(format!("sessions/children/{id}.jsonl"))
}

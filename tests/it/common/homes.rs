//! kin homes for the wire tests: one with a config file written in, and kin on the mock model.

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

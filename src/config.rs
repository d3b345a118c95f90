//! Where kin keeps its data.

use std::path::PathBuf;

/// `$KIN_HOME`, else `$XDG_DATA_HOME/kin`, else `~/.local/share/kin`, else `./.kin`.
pub fn kin_home() -> PathBuf {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(home) = from_env("KIN_HOME") {
        return home;
    }
    if let Some(data) = from_env("XDG_DATA_HOME") {
        return data.join("kin");
    }
    match from_env("HOME") {
        Some(home) => home.join(".local/share/kin"),
        None => PathBuf::from(".kin"),
    }
}

//! The `[sandbox]` table: how the processes kin starts for the model are confined (see
//! `process::sandbox`), and its lines in `kin config`.
//!
//! ```toml
//! [sandbox]
//! mode = "auto"              # "auto" | "required" | "off"
//! writable = ["~/.cargo"]    # also writable by commands, besides the workspace
//! network = true             # default: on, off in read-only mode
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ConfigError;
use crate::process::sandbox::{Sandbox, SandboxMode, SandboxSettings};

/// `[sandbox]` as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SandboxEntry {
    #[serde(default)]
    mode: SandboxMode,
    #[serde(default)]
    writable: Vec<String>,
    network: Option<bool>,
}

/// The settings `entry` gives, its paths made absolute (`~/` is `home`).
pub(crate) fn resolve(
    entry: &SandboxEntry,
    home: Option<&Path>,
    path: &Path,
) -> Result<SandboxSettings, ConfigError> {
    let writable = entry
        .writable
        .iter()
        .map(|raw| {
            absolute(raw, home).ok_or_else(|| ConfigError::Invalid {
                origin: format!("sandbox.writable in config file {}", path.display()),
                reason: format!("{raw:?} is not an absolute path (or one starting with ~/)"),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(SandboxSettings {
        mode: entry.mode,
        writable,
        network: entry.network,
        unreadable: Vec::new(),
    })
}

/// `raw` with a leading `~/` (or `~`) taken as `home`; `None` when that is not absolute.
pub(crate) fn absolute(raw: &str, home: Option<&Path>) -> Option<PathBuf> {
    let expanded = match (raw.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if raw == "~" => home.map(Path::to_owned).unwrap_or_default(),
        _ => PathBuf::from(raw),
    };
    expanded.is_absolute().then_some(expanded)
}

/// The `kin config` lines of `sandbox`.
pub fn render(sandbox: &Sandbox) -> String {
    let settings = sandbox.settings();
    let mut out = String::new();
    let mut row = |name: &str, value: &str| {
        out.push_str(format!("{name:<24} {value}").trim_end());
        out.push('\n');
    };
    let (_, title, _) = sandbox.notice();
    row(
        "sandbox",
        &format!("{} ({})", settings.mode.id(), title.to_lowercase()),
    );
    row("sandbox kernel", &sandbox.support().describe());
    let mut writable = vec![
        "workspace roots".to_owned(),
        "a private temp dir".to_owned(),
    ];
    writable.extend(settings.writable.iter().map(|p| p.display().to_string()));
    row("sandbox writable", &writable.join(", "));
    let own: Vec<String> = sandbox
        .own_dirs()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    if !own.is_empty() {
        row("sandbox never writable", &own.join(", "));
    }
    let network = match settings.network {
        None => "on (off in read-only mode)",
        Some(true) => "on",
        Some(false) => "off",
    };
    row("sandbox network", network);
    if let Some(ceiling) = sandbox.ceiling() {
        let paths: Vec<String> = ceiling
            .writable
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        row(
            "sandbox ceiling",
            &format!(
                "set by the kin above: writable {}; network {}",
                if paths.is_empty() {
                    "(nothing)".into()
                } else {
                    paths.join(", ")
                },
                if ceiling.network { "on" } else { "off" }
            ),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> SandboxEntry {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn reads_mode_paths_and_network() {
        let settings = resolve(
            &entry("mode = \"required\"\nwritable = [\"~/.cargo\", \"/opt/x\"]\nnetwork = false\n"),
            Some(Path::new("/home/u")),
            Path::new("c.toml"),
        )
        .unwrap();
        assert_eq!(settings.mode, SandboxMode::Required);
        assert_eq!(
            settings.writable,
            [PathBuf::from("/home/u/.cargo"), PathBuf::from("/opt/x")]
        );
        assert_eq!(settings.network, Some(false));
        assert_eq!(
            resolve(&entry(""), None, Path::new("c.toml")).unwrap(),
            SandboxSettings::default()
        );
    }

    #[test]
    fn refuses_relative_paths_and_unknown_modes() {
        let error = resolve(&entry("writable = [\"cache\"]"), None, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("sandbox.writable") && error.contains("\"cache\""),
            "{error}"
        );
        assert!(toml::from_str::<SandboxEntry>("mode = \"strict\"").is_err());
    }

    #[test]
    fn kin_config_says_what_applies() {
        let shown = render(&Sandbox::off());
        assert!(shown.contains("sandbox                  off"), "{shown}");
        assert!(
            shown.contains("sandbox network          on (off in read-only mode)"),
            "{shown}"
        );
    }
}

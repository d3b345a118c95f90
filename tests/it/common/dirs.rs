//! The directories of one run of the real binary, under one temporary root, and the steps
//! most such runs open with.

use std::path::{Path, PathBuf};

use kin::scenario::{RunOptions, Runner, Step};
use serde_json::{json, Value};

/// `<tmp>/workspace` (the cwd), `<tmp>/home` (KIN_HOME), `<tmp>/config` (XDG_CONFIG_HOME,
/// its config file empty until [`Dirs::configure`]) and `<tmp>/outside` (outside every root).
pub struct Dirs {
    _root: tempfile::TempDir,
    pub cwd: PathBuf,
    pub home: PathBuf,
    pub config: PathBuf,
    pub outside: PathBuf,
}

impl Dirs {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let dirs = Self {
            cwd: base.join("workspace"),
            home: base.join("home"),
            config: base.join("config"),
            outside: base.join("outside"),
            _root: root,
        };
        for dir in [
            &dirs.cwd,
            &dirs.home,
            &dirs.config.join("kin"),
            &dirs.outside,
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        dirs
    }

    /// Writes `toml` as the config file.
    pub fn configure(&self, toml: &str) {
        std::fs::write(self.config.join("kin/config.toml"), toml).unwrap();
    }

    /// `kin acp --replay replay` in these directories, with `env` added.
    pub fn runner(&self, replay: &Path, env: &[(&str, &str)]) -> Runner<'static> {
        let mut all = vec![(
            "XDG_CONFIG_HOME".to_owned(),
            self.config.to_string_lossy().into_owned(),
        )];
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let options = RunOptions {
            binary: super::kin_binary(),
            replay_dir: Some(replay.to_owned()),
            env: all,
            home: self.home.clone(),
            cwd: self.cwd.clone(),
        };
        Runner::start(&options, |_| {}).unwrap()
    }
}

/// Plays the opening most scenario runs share: initialize (with `capabilities`), a new
/// session, and `session/set_mode` to `mode`.
pub async fn open_in_mode(runner: &mut Runner<'_>, capabilities: Option<Value>, mode: &str) {
    for step in [
        Step::Initialize {
            client_capabilities: capabilities,
        },
        Step::NewSession { cwd: None },
        Step::Request {
            method: "session/set_mode".into(),
            params: json!({"sessionId": "{{session}}", "modeId": mode}),
        },
    ] {
        runner.play(&step).await.unwrap();
    }
}

/// That opening, then a prompt of `text`, played until its answer.
pub async fn prompt_in_mode(
    runner: &mut Runner<'_>,
    capabilities: Option<Value>,
    mode: &str,
    text: &str,
) {
    open_in_mode(runner, capabilities, mode).await;
    let prompt = Step::Prompt {
        text: text.into(),
        session: None,
    };
    runner.play(&prompt).await.unwrap();
}

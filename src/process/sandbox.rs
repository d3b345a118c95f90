//! The kernel sandbox of the processes kin starts for the model (its commands, ACP children
//! run as local processes, MCP stdio servers that opt in): what each may write and whether it
//! may use the network, and how it is launched so that the kernel holds it to that.
//!
//! A confined process is started through kin's own launcher ([`super::sandbox_exec`]), which
//! applies a Landlock ruleset to itself and then execs the program. Reads stay as the user's
//! everywhere; writes are allowed only beneath the workspace roots, a private temp directory
//! of the session, the configured `[sandbox] writable` paths and a few devices; in read-only
//! mode, only in the private temp directory. A kin started inside a sandbox learns its parent's
//! command policy from [`CEILING_ENV`] and never grants its own commands more.
//!
//! `[sandbox] mode`: `auto` confines where the kernel can and says plainly where it cannot;
//! `required` refuses to start a process it cannot confine; `off` confines nothing. Knows
//! nothing of tools, sessions or ACP: callers say where a command works.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Deserialize;

use super::sandbox_policy::canonical;
pub use super::sandbox_policy::Policy;
use super::sandbox_writable::{carve, still_fixed};
use crate::sync::lock;

/// The command policy of the kin above, for a kin started inside its sandbox (JSON).
pub const CEILING_ENV: &str = "KIN_SANDBOX_CEILING";
/// Set (non-empty) to act as if this kernel had no Landlock: how tests check `required`.
pub const NO_LANDLOCK_ENV: &str = "KIN_SANDBOX_SIMULATE_NO_LANDLOCK";

/// `[sandbox] mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    /// Confine where the kernel can; run unconfined, and say so, where it cannot.
    #[default]
    Auto,
    /// Confine, or refuse to start the process.
    Required,
    /// Confine nothing.
    Off,
}

impl SandboxMode {
    /// The value as the config file writes it.
    pub fn id(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Required => "required",
            Self::Off => "off",
        }
    }
}

/// The `[sandbox]` table, resolved.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSettings {
    /// `auto`, `required` or `off`.
    pub mode: SandboxMode,
    /// Also writable by commands (absolute, `~` expanded).
    pub writable: Vec<PathBuf>,
    /// The network of commands; `None`: on, except in read-only mode.
    pub network: Option<bool>,
    /// Files no confined process may read (kin's `mcp-token`); not a config key.
    pub unreadable: Vec<PathBuf>,
}

/// What the kernel here can enforce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    /// Landlock, at least at this ABI (kin probes up to 6); `network`: TCP rules (ABI 4+).
    Landlock {
        /// The highest ABI probed that the kernel has.
        abi: u8,
        /// TCP rules are enforced.
        network: bool,
    },
    /// No Landlock, and why.
    Missing(String),
}

impl Support {
    /// Probes the running kernel (no ruleset is enforced).
    pub fn probe() -> Self {
        use landlock::{
            Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, ABI,
        };
        if std::env::var_os(NO_LANDLOCK_ENV).is_some_and(|v| !v.is_empty()) {
            return Self::Missing(format!("simulated by {NO_LANDLOCK_ENV}"));
        }
        if !cfg!(target_os = "linux") {
            return Self::Missing("Landlock is Linux's; no sandbox is done for this OS yet".into());
        }
        let handles = |abi: ABI, net: bool| {
            let ruleset = Ruleset::default()
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessFs::from_all(abi));
            match (ruleset, net) {
                (Ok(ruleset), true) => ruleset.handle_access(AccessNet::from_all(abi)).is_ok(),
                (ruleset, _) => ruleset.is_ok(),
            }
        };
        let levels = [
            (6, ABI::V6),
            (5, ABI::V5),
            (4, ABI::V4),
            (3, ABI::V3),
            (2, ABI::V2),
            (1, ABI::V1),
        ];
        for (abi, level) in levels {
            if handles(level, abi >= 4) {
                return Self::Landlock {
                    abi,
                    network: abi >= 4,
                };
            }
        }
        Self::Missing(
            "this kernel has no Landlock (Linux 5.13+ with `landlock` in its LSMs)".into(),
        )
    }

    /// For `kin config` and notices.
    pub fn describe(&self) -> String {
        match self {
            Self::Landlock { abi, network: true } => {
                format!("Landlock ABI {abi}+: file writes and TCP enforced")
            }
            Self::Landlock { abi, .. } => format!(
                "Landlock ABI {abi}: file writes enforced; network rules need ABI 4 (Linux 6.7), \
                 so the network is not confined"
            ),
            Self::Missing(why) => format!("none: {why}"),
        }
    }
}

/// Where a command works, as its caller knows it.
pub struct CommandScope<'a> {
    /// The session it works for: its private temp directory.
    pub session: &'a str,
    /// The workspace roots, as resolved when the session or child opened: one that no longer
    /// resolves to itself (swapped for a symbolic link since) is left out.
    pub roots: Vec<PathBuf>,
    /// The session's effective mode is `read-only`.
    pub read_only: bool,
}

/// How to start a process: the program, its arguments, variables to add, and the policy it is
/// held to (`None`: unconfined).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// What to run: kin's launcher when confined.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Added to its environment (the private temp dir, the ceiling for a kin below).
    pub env: Vec<(String, String)>,
    /// The policy it is held to.
    pub policy: Option<Policy>,
    /// Roots left out of the policy: swapped for a symbolic link since they were fixed.
    pub dropped: Vec<PathBuf>,
}

impl Launch {
    /// `program args` as they are, unconfined.
    pub(crate) fn direct(program: &str, args: &[String]) -> Self {
        Self {
            program: program.to_owned(),
            args: args.to_vec(),
            env: Vec::new(),
            policy: None,
            dropped: Vec::new(),
        }
    }
}

/// Why a process was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// `required`, where nothing can be confined.
    #[error(
        "kin's sandbox is required (`[sandbox] mode = \"required\"`) but cannot confine \
         processes here ({0}), so the command was not run; use a kernel with Landlock or set \
         `[sandbox] mode = \"auto\"` to run commands unconfined"
    )]
    Unavailable(String),
    /// The private temp directory could not be made.
    #[error("could not make the sandbox's private temp directory {path}: {reason}")]
    Temp {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
}

/// The sandbox of this kin process: its settings, what the kernel supports, the launcher,
/// the ceiling inherited from a kin above, and the sessions' private temp directories.
#[derive(Debug)]
pub struct Sandbox {
    settings: SandboxSettings,
    support: Support,
    /// The kin executable that launches confined processes (`None`: confinement unavailable).
    launcher: Option<PathBuf>,
    ceiling: Option<Policy>,
    /// kin's own directories (config and data), resolved: never writable by what it confines.
    own: Vec<PathBuf>,
    /// This process's directory of private temp directories, made on first use.
    temp: Mutex<Option<PathBuf>>,
    /// Sessions told how their commands run.
    told: Mutex<HashSet<String>>,
}

impl Sandbox {
    /// Confines nothing (tests, and code run outside the `kin` executable).
    pub fn off() -> Self {
        Self::new(
            SandboxSettings {
                mode: SandboxMode::Off,
                ..SandboxSettings::default()
            },
            Support::Missing("off".into()),
            None,
            None,
        )
    }

    /// A sandbox from its parts (tests build one for a kernel they pretend to have).
    pub fn new(
        settings: SandboxSettings,
        support: Support,
        launcher: Option<PathBuf>,
        ceiling: Option<Policy>,
    ) -> Self {
        Self {
            settings,
            support,
            launcher,
            ceiling,
            own: Vec::new(),
            temp: Mutex::new(None),
            told: Mutex::default(),
        }
    }

    /// This process's sandbox as `settings` say, on this kernel, launched by this executable,
    /// under the ceiling a kin above set (a ceiling that cannot be read leaves nothing writable).
    pub fn for_this_process(settings: SandboxSettings) -> Self {
        let launcher = std::env::current_exe().ok();
        let ceiling = std::env::var(CEILING_ENV).ok().map(|json| {
            serde_json::from_str(&json).unwrap_or(Policy {
                writable: Vec::new(),
                network: false,
                required: true,
                unreadable: Vec::new(),
            })
        });
        Self::new(settings, Support::probe(), launcher, ceiling)
    }

    /// This sandbox keeping `dirs` (kin's config and data directories) out of every writable
    /// set, even where a root or a `writable` entry holds them.
    pub fn protecting(mut self, dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        for dir in dirs {
            let resolved = canonical(&std::path::absolute(&dir).unwrap_or(dir));
            if !self.own.contains(&resolved) {
                self.own.push(resolved);
            }
        }
        self
    }

    /// kin's own directories, resolved, which nothing confined may write.
    pub fn own_dirs(&self) -> &[PathBuf] {
        &self.own
    }

    /// The `[sandbox]` settings.
    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    /// What the kernel can enforce.
    pub fn support(&self) -> &Support {
        &self.support
    }

    /// The policy a kin above holds this one to.
    pub fn ceiling(&self) -> Option<&Policy> {
        self.ceiling.as_ref()
    }

    /// Whether started processes are confined.
    pub fn confines(&self) -> bool {
        self.mode() != SandboxMode::Off
            && matches!(self.support, Support::Landlock { .. })
            && self.launcher.is_some()
    }

    /// The mode in force: a kin started inside a sandbox cannot turn it off for what it starts
    /// (the kernel would hold them anyway; this keeps what kin reports true).
    fn mode(&self) -> SandboxMode {
        match (self.settings.mode, &self.ceiling) {
            (SandboxMode::Off, Some(_)) => SandboxMode::Auto,
            (mode, _) => mode,
        }
    }

    /// The launch of a command working in `scope`.
    pub fn command(
        &self,
        scope: &CommandScope<'_>,
        program: &str,
        args: &[String],
    ) -> Result<Launch, SandboxError> {
        let Some((policy, dropped)) = self.plan(scope)? else {
            return Ok(Launch::direct(program, args));
        };
        let temp = self.private_temp(scope.session)?;
        let mut launch = self.wrap(&policy, program, args);
        launch.env = self.env_for(&policy, &temp);
        launch.dropped = dropped;
        Ok(launch)
    }

    /// The launch of a child agent working in `scope`: what its commands may do, plus
    /// `state` (where agents keep their own sessions, e.g. kin's home) and the network (it
    /// talks to its model). The child is told its commands' policy as its ceiling.
    pub fn agent(
        &self,
        scope: &CommandScope<'_>,
        state: &[PathBuf],
        program: &str,
        args: &[String],
    ) -> Result<Launch, SandboxError> {
        let Some((commands, dropped)) = self.plan(scope)? else {
            return Ok(Launch::direct(program, args));
        };
        let temp = self.private_temp(scope.session)?;
        let mut own = commands.clone();
        super::sandbox_dirs::make_missing(state);
        let state = super::sandbox_dirs::owned(state);
        own.writable.extend(state.iter().map(|p| canonical(p)));
        own.network = true;
        let mut launch = self.wrap(&own, program, args);
        launch.env = self.env_for(&commands, &temp);
        launch.dropped = dropped;
        Ok(launch)
    }

    /// The launch of a helper kin runs for itself in a workspace (`git`): it may write only
    /// beneath `writable` (kin's own directories carved out) and has no network. Unconfined
    /// where commands run unconfined, refused where they are refused.
    pub(crate) fn helper(
        &self,
        writable: &[PathBuf],
        program: &str,
        args: &[String],
    ) -> Result<Launch, SandboxError> {
        if !self.confining()? {
            return Ok(Launch::direct(program, args));
        }
        let mut paths = Vec::new();
        for path in writable {
            carve(&canonical(path), &self.own, &mut paths);
        }
        let policy = self.bounded(Policy {
            writable: paths,
            network: false,
            required: self.mode() == SandboxMode::Required,
            unreadable: self.unreadable(),
        });
        Ok(self.wrap(&policy, program, args))
    }

    /// The policy of a command in `scope`, or `None` when it runs unconfined.
    pub fn command_policy(&self, scope: &CommandScope<'_>) -> Result<Option<Policy>, SandboxError> {
        Ok(self.plan(scope)?.map(|(policy, _)| policy))
    }

    /// The policy of a command in `scope` and the roots left out of it, or `None` when it runs
    /// unconfined.
    fn plan(
        &self,
        scope: &CommandScope<'_>,
    ) -> Result<Option<(Policy, Vec<PathBuf>)>, SandboxError> {
        if !self.confining()? {
            return Ok(None);
        }
        let mut writable = vec![self.private_temp(scope.session)?];
        let mut dropped = Vec::new();
        if !scope.read_only {
            for root in &scope.roots {
                if still_fixed(root) {
                    carve(root, &self.own, &mut writable);
                } else {
                    dropped.push(root.clone());
                }
            }
            super::sandbox_dirs::make_missing(&self.settings.writable);
            for path in &self.settings.writable {
                carve(&canonical(path), &self.own, &mut writable);
            }
        }
        let policy = self.bounded(Policy {
            writable,
            network: self.settings.network.unwrap_or(!scope.read_only),
            required: self.mode() == SandboxMode::Required,
            unreadable: self.unreadable(),
        });
        Ok(Some((policy, dropped)))
    }

    /// The files no confined process may read, resolved.
    fn unreadable(&self) -> Vec<PathBuf> {
        self.settings
            .unreadable
            .iter()
            .map(|p| canonical(p))
            .collect()
    }

    /// Whether processes are confined; an error where they must be but cannot.
    fn confining(&self) -> Result<bool, SandboxError> {
        match (self.mode(), self.confines()) {
            (SandboxMode::Off, _) | (SandboxMode::Auto, false) => Ok(false),
            (_, true) => Ok(true),
            (SandboxMode::Required, false) => Err(SandboxError::Unavailable(self.missing())),
        }
    }

    /// `policy` within the ceiling a kin above set.
    fn bounded(&self, policy: Policy) -> Policy {
        match &self.ceiling {
            Some(ceiling) => policy.within(ceiling),
            None => policy,
        }
    }

    /// Once per session and root: the warning that `dropped` roots are no longer writable by
    /// commands, or `None` when the session was told already.
    pub fn dropped_notice(&self, session: &str, dropped: &[PathBuf]) -> Option<String> {
        let mut told = lock(&self.told);
        let new: Vec<String> = dropped
            .iter()
            .filter(|root| told.insert(format!("{session}\n{}", root.display())))
            .map(|root| root.display().to_string())
            .collect();
        (!new.is_empty()).then(|| {
            format!(
                "Commands may no longer write {}: it was replaced by a symbolic link after the \
                 session opened, and kin's sandbox keeps to the roots as they were then",
                new.join(", ")
            )
        })
    }

    fn missing(&self) -> String {
        match (&self.support, &self.launcher) {
            (Support::Missing(why), _) => why.clone(),
            (_, None) => {
                "kin's own executable, which launches confined processes, is unknown".into()
            }
            _ => String::new(),
        }
    }

    fn wrap(&self, policy: &Policy, program: &str, args: &[String]) -> Launch {
        let Some(launcher) = &self.launcher else {
            return Launch::direct(program, args);
        };
        let json = serde_json::to_string(policy).unwrap_or_default();
        let mut wrapped = vec![
            super::sandbox_exec::ARG.to_owned(),
            "--policy".to_owned(),
            json,
            "--".to_owned(),
            program.to_owned(),
        ];
        wrapped.extend_from_slice(args);
        Launch {
            program: launcher.to_string_lossy().into_owned(),
            args: wrapped,
            env: Vec::new(),
            policy: Some(policy.clone()),
            dropped: Vec::new(),
        }
    }

    fn env_for(&self, commands: &Policy, temp: &Path) -> Vec<(String, String)> {
        let temp = temp.to_string_lossy().into_owned();
        let ceiling = serde_json::to_string(commands).unwrap_or_default();
        vec![
            ("TMPDIR".to_owned(), temp.clone()),
            ("TMP".to_owned(), temp.clone()),
            ("TEMP".to_owned(), temp),
            (CEILING_ENV.to_owned(), ceiling),
        ]
    }

    /// The session's private temp directory (0700, beneath this process's own one), made now
    /// if need be.
    fn private_temp(&self, session: &str) -> Result<PathBuf, SandboxError> {
        use std::os::unix::fs::DirBuilderExt;
        let make = |path: &Path| match std::fs::DirBuilder::new().mode(0o700).create(path) {
            Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => {
                Err(SandboxError::Temp {
                    path: path.to_owned(),
                    reason: error.to_string(),
                })
            }
            _ => Ok(()),
        };
        let base = {
            let mut temp = lock(&self.temp);
            match &*temp {
                Some(base) => base.clone(),
                None => {
                    let name = format!(
                        "kin-{}-{}",
                        std::process::id(),
                        uuid::Uuid::new_v4().simple()
                    );
                    let base = canonical(&std::env::temp_dir()).join(name);
                    make(&base)?;
                    *temp = Some(base.clone());
                    base
                }
            }
        };
        let name: String = session
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(80)
            .collect();
        let dir = base.join(if name.is_empty() {
            "session".into()
        } else {
            name
        });
        make(&dir)?;
        Ok(dir)
    }

    /// Once per session: how its commands run, as (warning, title, description), or `None`
    /// when it was told already.
    pub fn first_notice(&self, session: &str) -> Option<(bool, String, String)> {
        if !lock(&self.told).insert(session.to_owned()) {
            return None;
        }
        Some(self.notice())
    }

    /// How commands run here, as (warning, title, description).
    pub fn notice(&self) -> (bool, String, String) {
        let writable = match self.settings.writable.len() {
            0 => String::new(),
            n => format!(", {n} configured path(s) (`[sandbox] writable`)"),
        };
        if self.confines() {
            let network = match (&self.support, self.settings.network) {
                (Support::Landlock { network: false, .. }, _) => {
                    "the network is not confined (this kernel lacks Landlock's TCP rules)"
                }
                (_, Some(false)) => "the network is off",
                (_, Some(true)) => "the network is on",
                (_, None) => "the network is on (off in read-only mode)",
            };
            let description = format!(
                "Commands may write only beneath the workspace, a private temp directory{writable}; \
                 in read-only mode only the temp directory; {network}. Kernel: {}.",
                self.support.describe()
            );
            return (false, "Commands run in kin's sandbox".into(), description);
        }
        match self.mode() {
            SandboxMode::Off => (
                true,
                "Commands run without a sandbox".into(),
                "`[sandbox] mode = \"off\"`: commands and what they start can write anywhere \
                 you can."
                    .into(),
            ),
            SandboxMode::Required => (
                true,
                "Commands are refused".into(),
                format!(
                    "`[sandbox] mode = \"required\"`, but processes cannot be confined here \
                     ({}).",
                    self.missing()
                ),
            ),
            SandboxMode::Auto => (
                true,
                "Commands run without a sandbox".into(),
                format!(
                    "kin cannot confine them here ({}), so commands and what they start can \
                     write anywhere you can. Use `ask` mode to review each command, or set \
                     `[sandbox] mode = \"required\"` to refuse commands.",
                    self.missing()
                ),
            ),
        }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Some(base) = lock(&self.temp).take() {
            let _ = std::fs::remove_dir_all(base);
        }
    }
}

#[cfg(test)]
#[path = "sandbox_tests.rs"]
mod tests;

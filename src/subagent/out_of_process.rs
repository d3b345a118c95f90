//! Helpers for providers whose children run outside this process (ACP agents launched as
//! subprocesses): what they advertise, where a child runs, how an attempt settles, and a run
//! handle whose dispose tears the child down once.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::{Capabilities, RunControl, StopReason, SubagentError, SubagentResult};
use crate::agent::NotRunning;
use crate::session::UserPart;

/// A subprocess child honours none of the start-time options.
pub const NO_START_CAPABILITIES: Capabilities = Capabilities {
    output_schema: false,
    depth_limit: false,
    tool_filter: false,
    persona: false,
};

/// A bound (timeout, size) must be a positive finite number.
pub fn positive_finite(name: &str, value: f64) -> Result<f64, SubagentError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(SubagentError::Setup(format!(
            "{name} must be a positive finite number, got {value}"
        )))
    }
}

/// An absolute, existing directory the child can enter.
pub fn validate_child_cwd(path: &Path) -> Result<PathBuf, SubagentError> {
    use std::os::unix::fs::PermissionsExt;
    let bad = |why: &str| {
        SubagentError::Setup(format!("child working directory {}: {why}", path.display()))
    };
    if !path.is_absolute() {
        return Err(bad("must be an absolute path"));
    }
    let metadata = std::fs::metadata(path).map_err(|e| bad(&format!("cannot be used ({e})")))?;
    if !metadata.is_dir() {
        return Err(bad("is not a directory"));
    }
    if metadata.permissions().mode() & 0o111 == 0 {
        return Err(bad("cannot be entered (no search permission)"));
    }
    Ok(path.to_owned())
}

/// A configured directory: unset is fine, empty is an error, relative resolves against `base`
/// (at configuration time, so later cwd changes do not move it).
pub fn validate_configured_cwd(
    configured: Option<&str>,
    base: &Path,
) -> Result<Option<PathBuf>, SubagentError> {
    match configured {
        None => Ok(None),
        Some("") => Err(SubagentError::Setup(
            "the configured child cwd is empty".into(),
        )),
        Some(path) => Ok(Some(base.join(path))),
    }
}

/// Where a child runs: the configured override, else the parent's cwd; both are checked.
pub fn resolve_child_cwd(
    configured: Option<&Path>,
    parent_cwd: Option<&Path>,
) -> Result<PathBuf, SubagentError> {
    match (configured, parent_cwd) {
        (Some(path), _) | (None, Some(path)) => validate_child_cwd(path),
        (None, None) => Err(SubagentError::Setup(
            "no working directory for the child: configure one or give the parent session a cwd"
                .into(),
        )),
    }
}

/// Flattens one attempt into a result: a failure is `error` (reported to `on_error`), unless
/// cancellation already happened, in which case the failure is the cancellation: `aborted`.
pub async fn settle_run_result<E>(
    attempt: impl Future<Output = Result<SubagentResult, E>>,
    cancel: &CancellationToken,
    on_error: Option<&(dyn Fn(&E) + Send + Sync)>,
) -> SubagentResult {
    match attempt.await {
        Ok(result) => result,
        Err(error) => {
            let stop_reason = if cancel.is_cancelled() {
                StopReason::Aborted
            } else {
                if let Some(sink) = on_error {
                    sink(&error);
                }
                StopReason::Error
            };
            SubagentResult {
                output: Vec::new(),
                structured: None,
                stop_reason,
            }
        }
    }
}

/// The run control of a subprocess child: dispose cancels locally and awaits the teardown
/// (closing the child, killing its process group) exactly once, however often it is called.
pub struct SubprocessRunHandle {
    cancel: CancellationToken,
    teardown: Shared<BoxFuture<'static, ()>>,
}

impl SubprocessRunHandle {
    pub fn new(cancel: CancellationToken, teardown: BoxFuture<'static, ()>) -> Arc<Self> {
        Arc::new(Self {
            cancel,
            teardown: teardown.shared(),
        })
    }
}

impl RunControl for SubprocessRunHandle {
    fn dispose(&self) -> BoxFuture<'static, ()> {
        self.cancel.cancel();
        self.teardown.clone().boxed()
    }

    fn steer(&self, _content: Vec<UserPart>) -> Option<Result<(), NotRunning>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn no_start_capabilities_advertise_nothing() {
        assert_eq!(NO_START_CAPABILITIES, Capabilities::default());
    }

    #[test]
    fn positive_finite_bounds() {
        assert_eq!(positive_finite("timeout", 1.5).unwrap(), 1.5);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(positive_finite("timeout", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn child_cwd_must_be_an_enterable_absolute_directory() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert!(validate_child_cwd(dir.path()).is_ok());
        assert!(validate_child_cwd(Path::new("relative/dir")).is_err());
        assert!(validate_child_cwd(&dir.path().join("missing")).is_err());
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(validate_child_cwd(&file)
            .unwrap_err()
            .to_string()
            .contains("not a directory"));
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(validate_child_cwd(&locked)
            .unwrap_err()
            .to_string()
            .contains("search permission"));
    }

    #[test]
    fn configured_and_resolved_child_cwd() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(validate_configured_cwd(None, dir.path()).unwrap(), None);
        assert!(validate_configured_cwd(Some(""), dir.path()).is_err());
        assert_eq!(
            validate_configured_cwd(Some("sub"), dir.path()).unwrap(),
            Some(dir.path().join("sub"))
        );
        let other = tempfile::tempdir().unwrap();
        assert_eq!(
            resolve_child_cwd(Some(other.path()), Some(dir.path())).unwrap(),
            other.path()
        );
        assert_eq!(
            resolve_child_cwd(None, Some(dir.path())).unwrap(),
            dir.path()
        );
        assert!(resolve_child_cwd(None, Some(Path::new("rel"))).is_err());
        assert!(resolve_child_cwd(None, None).is_err());
    }

    fn done() -> SubagentResult {
        SubagentResult {
            output: Vec::new(),
            structured: None,
            stop_reason: StopReason::Completed,
        }
    }

    #[tokio::test]
    async fn settling_attempts() {
        let cancel = CancellationToken::new();
        let ok = settle_run_result(async { Ok::<_, String>(done()) }, &cancel, None).await;
        assert_eq!(ok.stop_reason, StopReason::Completed);
        let seen = AtomicUsize::new(0);
        let sink = |_: &String| {
            seen.fetch_add(1, Ordering::SeqCst);
        };
        let failed = settle_run_result(
            async { Err::<SubagentResult, _>("transport gone".to_owned()) },
            &cancel,
            Some(&sink),
        )
        .await;
        assert_eq!(failed.stop_reason, StopReason::Error);
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        let failed = settle_run_result(
            async { Err::<SubagentResult, _>("x".to_owned()) },
            &cancel,
            None,
        )
        .await;
        assert_eq!(failed.stop_reason, StopReason::Error, "no sink is fine too");
        cancel.cancel();
        let cancelled = settle_run_result(
            async { Err::<SubagentResult, _>("closed".to_owned()) },
            &cancel,
            Some(&sink),
        )
        .await;
        assert_eq!(cancelled.stop_reason, StopReason::Aborted);
        assert_eq!(
            seen.load(Ordering::SeqCst),
            1,
            "a failure caused by cancellation is not an error"
        );
    }

    #[tokio::test]
    async fn subprocess_dispose_cancels_and_tears_down_once() {
        let cancel = CancellationToken::new();
        let teardowns = Arc::new(AtomicUsize::new(0));
        let counter = teardowns.clone();
        let watched = cancel.clone();
        let handle = SubprocessRunHandle::new(
            cancel.clone(),
            async move {
                watched.cancelled().await;
                counter.fetch_add(1, Ordering::SeqCst);
            }
            .boxed(),
        );
        handle.dispose().await;
        handle.dispose().await;
        assert!(cancel.is_cancelled());
        assert_eq!(teardowns.load(Ordering::SeqCst), 1);
    }
}

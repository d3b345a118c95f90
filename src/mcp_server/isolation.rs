//! Worktree isolation of `kin` tasks. A session started with `isolation: worktree` (the call's
//! or its agent definition's) works in a fresh git worktree of its cwd's repository, made by
//! the same code as an isolated `subagent` child's ([`crate::process::git_worktree`]) and named
//! after the session: branch `kin/<session id>`, recorded as the session's cwd. Each task
//! settles it as a child's activation does (kept and reported, or removed when nothing
//! changed), and the next task makes it again where it was if it was removed.

use std::path::Path;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::tools::Isolation;
use crate::config::agents::AgentDefinition;
use crate::process::git_command::Git;
use crate::process::git_worktree::{self as worktree, Settled, Worktree, WorktreeError};

/// Whether a new session works in a worktree: the call's `isolation`, else its definition's.
pub(crate) fn wanted(asked: Option<Isolation>, definition: Option<&AgentDefinition>) -> bool {
    match asked {
        Some(isolation) => isolation == Isolation::Worktree,
        None => definition.is_some_and(|definition| definition.isolation.is_some()),
    }
}

/// Makes the worktree of new session `id` from the repository `cwd` is in, as a task of
/// `setup`, which the server waits for before it exits: a checkout cancelled because the
/// client hung up is removed before the process ends. `cancel` stops the checkout and
/// removes what it had made; so does a cancel that comes just as it finished. `git` runs as
/// `git` says.
pub(crate) async fn make(
    setup: &TaskTracker,
    cwd: &Path,
    id: &str,
    cancel: &CancellationToken,
    git: &Git,
) -> Result<Worktree, WorktreeError> {
    let (cwd, id, cancel, git) = (cwd.to_owned(), id.to_owned(), cancel.clone(), git.clone());
    let making = setup.spawn(async move {
        let made = worktree::create(&cwd, &id, &cancel, &git).await?;
        if cancel.is_cancelled() {
            // Nothing will work in it: removed (it has no changes) with its branch.
            let _ = tokio::task::spawn_blocking(move || worktree::settle(&made)).await;
            return Err(WorktreeError::Cancelled);
        }
        Ok(made)
    });
    making.await.unwrap_or_else(|error| {
        Err(WorktreeError::Git {
            command: "worktree".into(),
            message: error.to_string(),
        })
    })
}

/// Whether `cwd` is session `id`'s own worktree (not one of a subagent child's, which a plain
/// session may have been pointed at).
fn owned(id: &str, cwd: &Path) -> bool {
    worktree::is_kin_worktree(cwd) && cwd.file_name().is_some_and(|name| name == id)
}

/// The worktree of session `id` whose cwd is `cwd`, as it is recorded (nothing is made);
/// `None` when the session is not isolated.
fn recorded(id: &str, cwd: &Path, git: &Git) -> Option<Worktree> {
    let repo = worktree::checkout_of(cwd).filter(|_| owned(id, cwd))?;
    Some(Worktree {
        dir: cwd.to_owned(),
        branch: format!("kin/{id}"),
        repo,
        git: git.clone(),
    })
}

/// The worktree session `id` works in, there for its next task: made again (cancellably)
/// where it was when its last task changed nothing. `None` when the session is not isolated.
pub(crate) async fn ensure(
    id: &str,
    cwd: &Path,
    cancel: &CancellationToken,
    git: &Git,
) -> Result<Option<Worktree>, WorktreeError> {
    let Some(found) = recorded(id, cwd, git) else {
        return Ok(None);
    };
    worktree::reopen(&found.dir, &found.repo, cancel, git)
        .await
        .map(Some)
}

/// What became of session `id`'s worktree, for a task read from the log: settled now if it is
/// still there (a server that died mid-task never settled it), else removed.
pub(crate) async fn logged_report(id: &str, cwd: &Path, git: &Git) -> Option<String> {
    let found = recorded(id, cwd, git)?;
    if !found.dir.is_dir() {
        return Some(Settled::Removed.report(&found));
    }
    Some(worktree::settle_and_report(found).await)
}

/// Adds a worktree's report to what a task says: after its answer, else after the reason it
/// has none (failed or cancelled).
pub(crate) fn append(answer: &mut Option<String>, detail: &mut Option<String>, report: &str) {
    let target = if answer.is_some() { answer } else { detail };
    match target {
        Some(text) => {
            text.push('\n');
            text.push_str(report);
        }
        None => *target = Some(report.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_sessions_own_worktree_counts() {
        let id = "5b0c";
        let own = Path::new("/r/.git/kin-worktrees/5b0c");
        let env = Git {
            env: Default::default(),
            sandbox: std::sync::Arc::new(crate::process::sandbox::Sandbox::off()),
        };
        let found = recorded(id, own, &env).unwrap();
        assert_eq!(found.branch, "kin/5b0c");
        assert_eq!(found.repo, Path::new("/r"));
        assert!(recorded(id, Path::new("/r/.git/kin-worktrees/other"), &env).is_none());
        assert!(recorded(id, Path::new("/r/src/5b0c"), &env).is_none());
    }

    #[test]
    fn the_report_follows_the_answer_else_the_reason() {
        let (mut answer, mut detail) = (Some("done".to_owned()), None);
        append(&mut answer, &mut detail, "[worktree: x]");
        assert_eq!(answer.as_deref(), Some("done\n[worktree: x]"));
        assert_eq!(detail, None);
        let (mut answer, mut detail) = (None, None);
        append(&mut answer, &mut detail, "[worktree: x]");
        assert_eq!(detail.as_deref(), Some("[worktree: x]"));
    }

    #[test]
    fn the_calls_isolation_wins_over_the_definitions() {
        assert!(wanted(Some(Isolation::Worktree), None));
        assert!(!wanted(Some(Isolation::None), None));
        assert!(!wanted(None, None));
    }
}

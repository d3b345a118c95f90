//! Worktree isolation: an in-process child that runs in a fresh `git worktree` of its session's
//! repository, on its own branch `kin/<child-id>`, under `<git common dir>/kin-worktrees/<id>`
//! (inside `.git`, so it never shows up as a change of the main checkout). When an activation
//! settles, a worktree with changes is kept and reported (branch, changed files, diffstat); one
//! without is removed with its branch. `git` runs as kin's own confined git
//! ([`super::git_command`]): it writes only beneath the repository's git directory, and
//! nothing the repository configures (hooks, fsmonitor, filters) runs. `git worktree add` (a
//! checkout, which may take long) runs in its own process group under kin's supervision and
//! is stopped when the start is cancelled, removing what it had made.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use crate::process::git_command::Git;
use crate::process::group::{describe_status, GroupChild};

/// The most of `git worktree add`'s output kept for an error message.
const ADD_OUTPUT: usize = 4096;

/// Where kin keeps its worktrees inside a repository's git directory.
const DIR: &str = "kin-worktrees";

/// `git diff` without the external diff or textconv commands a repository may configure.
const DIFF: [&str; 4] = ["diff", "--no-ext-diff", "--no-textconv", "--cached"];

/// Why a worktree could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorktreeError {
    #[error("isolation \"worktree\" needs a git repository; {0} is not inside one")]
    NotARepository(String),
    #[error("git {command} failed: {message}")]
    Git { command: String, message: String },
    /// The start was cancelled while `git worktree add` ran.
    #[error("the worktree was not made: the start was cancelled")]
    Cancelled,
}

/// A child's worktree.
#[derive(Debug, Clone)]
pub(crate) struct Worktree {
    pub(crate) dir: PathBuf,
    pub(crate) branch: String,
    /// The checkout it was made from (where `git worktree remove` runs).
    pub(crate) repo: PathBuf,
    /// How kin's own `git` runs (environment scrub, sandbox).
    pub(crate) git: Git,
}

impl Worktree {
    /// The repository's (common) git directory, which holds the worktree: where its `git` may
    /// write.
    fn git_dir(&self) -> Vec<PathBuf> {
        self.dir
            .parent()
            .and_then(Path::parent)
            .map(Path::to_owned)
            .into_iter()
            .collect()
    }

    /// A run of `git` that writes beneath the git directory, with the filter drivers the
    /// configuration seen from `dir` defines switched off.
    fn writing(&self, dir: &Path) -> Result<Run<'_>, WorktreeError> {
        let filters = self
            .git
            .filters(dir)
            .map_err(|message| git_failed("config", message))?;
        Ok(Run {
            git: &self.git,
            writable: self.git_dir(),
            filters,
        })
    }
}

/// One operation's `git`: where it may write and the filter drivers switched off.
struct Run<'a> {
    git: &'a Git,
    writable: Vec<PathBuf>,
    filters: Vec<String>,
}

impl<'a> Run<'a> {
    /// A `git` that writes nothing (it only reads the repository).
    fn reading(git: &'a Git) -> Self {
        Self {
            git,
            writable: Vec::new(),
            filters: Vec::new(),
        }
    }

    /// Runs `git args` in `dir`; its trimmed stdout, or what it said on failure.
    fn run(&self, dir: &Path, args: &[&str]) -> Result<String, WorktreeError> {
        let failed = |message: String| WorktreeError::Git {
            command: args.first().copied().unwrap_or_default().to_owned(),
            message,
        };
        let launch = self
            .git
            .launch(&self.writable, &self.filters, args)
            .map_err(|e| failed(e.to_string()))?;
        let output = launch
            .command(self.git, dir)
            .output()
            .map_err(|e| failed(e.to_string()))?;
        if !output.status.success() {
            return Err(failed(
                String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }
}

/// Whether `dir` is one of kin's worktrees (a child's recorded cwd).
pub(crate) fn is_kin_worktree(dir: &Path) -> bool {
    dir.parent()
        .and_then(Path::file_name)
        .is_some_and(|name| name == DIR)
}

/// The checkout the kin worktree at `dir` was made from: `dir` is
/// `<git common dir>/kin-worktrees/<id>`, and the common dir is that checkout's `.git`. `None`
/// when `dir` is not one of kin's worktrees.
pub(crate) fn checkout_of(dir: &Path) -> Option<PathBuf> {
    if !is_kin_worktree(dir) {
        return None;
    }
    let common = dir.parent()?.parent()?;
    common.parent().map(Path::to_owned)
}

/// The worktree of child `id`, made from the repository `cwd` is in, on a new branch
/// `kin/<id>` from its `HEAD`. A `cancel` during `git worktree add` stops git (its whole
/// process group) and removes the half-made worktree and branch.
pub(crate) async fn create(
    cwd: &Path,
    id: &str,
    cancel: &CancellationToken,
    git: &Git,
) -> Result<Worktree, WorktreeError> {
    let found = locate(cwd, id, git).await?;
    add(&found, cancel).await?;
    Ok(found)
}

/// Where the worktree of child `id` goes, in the repository `cwd` is in (nothing is made);
/// `git` runs as `git` says.
pub(crate) async fn locate(cwd: &Path, id: &str, git: &Git) -> Result<Worktree, WorktreeError> {
    let (cwd, id, git) = (cwd.to_owned(), id.to_owned(), git.clone());
    let found = tokio::task::spawn_blocking(move || -> Result<_, WorktreeError> {
        let reading = Run::reading(&git);
        let repo = reading
            .run(&cwd, &["rev-parse", "--show-toplevel"])
            .map_err(|_| WorktreeError::NotARepository(cwd.display().to_string()))?;
        let repo = PathBuf::from(repo);
        let common = reading.run(
            &repo,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )?;
        let dir = Path::new(&common).join(DIR).join(&id);
        Ok(Worktree {
            dir,
            branch: format!("kin/{id}"),
            repo,
            git,
        })
    })
    .await
    .map_err(|e| git_failed("rev-parse", e.to_string()))??;
    Ok(found)
}

fn git_failed(command: &str, message: String) -> WorktreeError {
    WorktreeError::Git {
        command: command.to_owned(),
        message,
    }
}

/// `git worktree add` of `worktree`, stopped by `cancel` (which removes what it had made).
pub(crate) async fn add(
    worktree: &Worktree,
    cancel: &CancellationToken,
) -> Result<(), WorktreeError> {
    let shown = worktree.dir.display().to_string();
    let launch = {
        let worktree = worktree.clone();
        tokio::task::spawn_blocking(move || {
            let run = worktree.writing(&worktree.repo)?;
            let args = [
                "worktree",
                "add",
                "-q",
                "-b",
                &worktree.branch,
                &shown,
                "HEAD",
            ];
            run.git
                .launch(&run.writable, &run.filters, &args)
                .map_err(|e| git_failed("worktree", e.to_string()))
        })
        .await
        .map_err(|e| git_failed("worktree", e.to_string()))??
    };
    let mut git = GroupChild::spawn(
        &launch.program,
        &launch.args,
        &worktree.repo,
        &worktree.git.env,
        &launch.env,
        ADD_OUTPUT,
        ADD_OUTPUT,
    )
    .map_err(|e| git_failed("worktree", e.to_string()))?;
    let status = tokio::select! {
        status = git.wait() => status,
        () = cancel.cancelled() => {
            git.stop().await;
            git.finish().await;
            let worktree = worktree.clone();
            let _ = tokio::task::spawn_blocking(move || discard(&worktree)).await;
            return Err(WorktreeError::Cancelled);
        }
    };
    let output = git.finish().await.finish();
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(git_failed(
            "worktree",
            format!("{} ({})", output.trim(), describe_status(status)),
        )),
        Err(error) => Err(git_failed("worktree", error.to_string())),
    }
}

/// Removes whatever a stopped `git worktree add` left: the worktree's registration and
/// directory, and its branch. Each step may find nothing to remove.
fn discard(worktree: &Worktree) {
    let shown = worktree.dir.display().to_string();
    let repo = &worktree.repo;
    if let Ok(run) = worktree.writing(repo) {
        let _ = run.run(repo, &["worktree", "remove", "--force", &shown]);
    }
    if worktree.dir.exists() {
        let _ = std::fs::remove_dir_all(&worktree.dir);
    }
    let run = Run {
        writable: worktree.git_dir(),
        ..Run::reading(&worktree.git)
    };
    let _ = run.run(repo, &["worktree", "prune"]);
    let _ = run.run(repo, &["branch", "-D", &worktree.branch]);
}

/// The worktree recorded for a stored child at `dir`: still there, or made again (it was
/// removed when its last activation changed nothing).
pub(crate) async fn reopen(
    dir: &Path,
    repo_cwd: &Path,
    cancel: &CancellationToken,
    git: &Git,
) -> Result<Worktree, WorktreeError> {
    let id = dir
        .file_name()
        .and_then(|name| name.to_str())
        .unwrap_or_default()
        .to_owned();
    if dir.is_dir() {
        let repo = Run::reading(git)
            .run(repo_cwd, &["rev-parse", "--show-toplevel"])
            .map_err(|_| WorktreeError::NotARepository(repo_cwd.display().to_string()))?;
        return Ok(Worktree {
            dir: dir.to_owned(),
            branch: format!("kin/{id}"),
            repo: PathBuf::from(repo),
            git: git.clone(),
        });
    }
    create(repo_cwd, &id, cancel, git).await
}

/// What a settled activation left in its worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Nothing changed: the worktree and its branch are gone.
    Removed,
    /// Kept, with the changed files and the diffstat against the branch's start.
    Kept {
        branch: String,
        files: Vec<String>,
        diffstat: String,
    },
}

impl Settled {
    /// The lines appended to the child's answer.
    pub(crate) fn report(&self, worktree: &Worktree) -> String {
        match self {
            Self::Removed => "[worktree: no changes; worktree and branch removed]".into(),
            Self::Kept {
                branch,
                files,
                diffstat,
            } => format!(
                "[worktree: {} on branch {branch}]\nchanged files:\n{}\n{diffstat}",
                worktree.dir.display(),
                files
                    .iter()
                    .map(|f| format!("  {f}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        }
    }
}

/// [`settle`]s `worktree` off the async threads; the lines that report what became of it
/// (appended to the answer of the activation or task that worked in it).
pub(crate) async fn settle_and_report(worktree: Worktree) -> String {
    tokio::task::spawn_blocking(move || match settle(&worktree) {
        Ok(settled) => settled.report(&worktree),
        Err(error) => format!("[worktree: {}: {error}]", worktree.dir.display()),
    })
    .await
    .unwrap_or_else(|_| "[worktree: could not be settled]".into())
}

/// Stages everything in the worktree (untracked files count as changes) and reports it; an
/// unchanged worktree is removed with its branch.
pub(crate) fn settle(worktree: &Worktree) -> Result<Settled, WorktreeError> {
    let dir = &worktree.dir;
    let run = worktree.writing(dir)?;
    run.run(dir, &["add", "-A"])?;
    let names = run.run(dir, &[&DIFF[..], &["--name-only", "HEAD"]].concat())?;
    if names.is_empty() && !has_commits(&run, worktree)? {
        let shown = dir.display().to_string();
        run.run(&worktree.repo, &["worktree", "remove", "--force", &shown])?;
        run.run(&worktree.repo, &["branch", "-D", &worktree.branch])?;
        return Ok(Settled::Removed);
    }
    let base = base(&run, worktree)?;
    let files = run.run(dir, &[&DIFF[..], &["--name-only", &base]].concat())?;
    let diffstat = run.run(dir, &[&DIFF[..], &["--stat", &base]].concat())?;
    Ok(Settled::Kept {
        branch: worktree.branch.clone(),
        files: files.lines().map(str::to_owned).collect(),
        diffstat,
    })
}

/// Where the branch started: its fork point from the main checkout's `HEAD`.
fn base(run: &Run<'_>, worktree: &Worktree) -> Result<String, WorktreeError> {
    let main_head = run.run(&worktree.repo, &["rev-parse", "HEAD"])?;
    run.run(&worktree.dir, &["merge-base", "HEAD", &main_head])
}

/// Whether the child committed on its branch.
fn has_commits(run: &Run<'_>, worktree: &Worktree) -> Result<bool, WorktreeError> {
    let base = base(run, worktree)?;
    let head = run.run(&worktree.dir, &["rev-parse", "HEAD"])?;
    Ok(base != head)
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use crate::process::child_env::ChildEnv;
    use crate::process::sandbox::Sandbox;

    /// `git -C dir args`, as the test sets a repository up (the repository's own settings
    /// apply).
    fn git_in(dir: &Path, args: &[&str]) -> String {
        let output = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// kin's own git with the default scrub, unconfined (the kernel's part is tested through
    /// the binary).
    fn own_git() -> Git {
        Git {
            env: ChildEnv::default(),
            sandbox: Arc::new(Sandbox::off()),
        }
    }

    /// [`create`] with the default scrub.
    async fn create_in(
        cwd: &Path,
        id: &str,
        cancel: &CancellationToken,
    ) -> Result<Worktree, WorktreeError> {
        create(cwd, id, cancel, &own_git()).await
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for args in [
            &["init", "-q", "-b", "main"][..],
            &[
                "-c",
                "user.email=k@k",
                "-c",
                "user.name=k",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "first",
            ],
        ] {
            git_in(dir.path(), args);
        }
        dir
    }

    async fn made(repo: &Path, id: &str) -> Worktree {
        create_in(repo, id, &CancellationToken::new())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn an_unchanged_worktree_is_removed_with_its_branch() {
        let repo = repo();
        let worktree = made(repo.path(), "c1").await;
        assert!(is_kin_worktree(&worktree.dir));
        assert_eq!(checkout_of(&worktree.dir), Some(worktree.repo.clone()));
        assert_eq!(checkout_of(repo.path()), None);
        assert!(worktree.dir.is_dir());
        assert_eq!(settle(&worktree).unwrap(), Settled::Removed);
        assert!(!worktree.dir.exists());
        let branches = git_in(repo.path(), &["branch", "--list", "kin/*"]);
        assert_eq!(branches, "");
    }

    #[tokio::test]
    async fn a_changed_worktree_is_kept_and_reported() {
        let repo = repo();
        let worktree = made(repo.path(), "c2").await;
        std::fs::write(worktree.dir.join("new.txt"), "one\ntwo\n").unwrap();
        let Settled::Kept {
            branch,
            files,
            diffstat,
        } = settle(&worktree).unwrap()
        else {
            panic!("kept");
        };
        assert_eq!(branch, "kin/c2");
        assert_eq!(files, ["new.txt"]);
        assert!(
            diffstat.contains("1 file changed, 2 insertions(+)"),
            "{diffstat}"
        );
        assert!(!repo.path().join("new.txt").exists());
        assert_eq!(git_in(repo.path(), &["status", "--porcelain"]), "");
    }

    #[tokio::test]
    async fn outside_a_repository_it_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let error = create_in(dir.path(), "c3", &CancellationToken::new())
            .await
            .unwrap_err();
        assert!(error
            .to_string()
            .starts_with("isolation \"worktree\" needs a git repository"));
    }

    #[tokio::test]
    async fn a_cancelled_add_stops_git_and_leaves_nothing_behind() {
        let repo = repo();
        // `git worktree add` copies the sparse-checkout patterns, here a FIFO nobody writes:
        // git is held half-way (branch and worktree made) once it opened it.
        git_in(repo.path(), &["config", "core.sparseCheckout", "true"]);
        let fifo = repo.path().join(".git/info/sparse-checkout");
        std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let cancel = CancellationToken::new();
        let adding = {
            let (repo, cancel) = (repo.path().to_owned(), cancel.clone());
            tokio::spawn(async move { create_in(&repo, "c4", &cancel).await })
        };
        // Opening the FIFO for writing returns once git opened it for reading.
        let held = tokio::task::spawn_blocking(move || std::fs::File::create(&fifo).unwrap());
        let held = held.await.unwrap();
        cancel.cancel();
        let error = adding.await.unwrap().unwrap_err();
        drop(held);
        assert!(matches!(error, WorktreeError::Cancelled), "{error}");
        let common = repo.path().join(".git").join(DIR).join("c4");
        assert!(!common.exists(), "the half-made worktree is gone");
        let branches = git_in(repo.path(), &["branch", "--list", "kin/*"]);
        assert_eq!(branches, "");
        let listed = git_in(repo.path(), &["worktree", "list", "--porcelain"]);
        assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    }

    #[tokio::test]
    async fn nothing_the_repository_configures_runs() {
        use std::os::unix::fs::PermissionsExt;
        let repo = repo();
        let marks = tempfile::tempdir().unwrap();
        let mark = |name: &str| marks.path().join(name);
        let script = |name: &str| format!("touch '{}'; true", mark(name).display());
        let hook = repo.path().join(".git/hooks/post-checkout");
        std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
        std::fs::write(&hook, format!("#!/bin/sh\n{}\n", script("hook"))).unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        for (key, value) in [
            ("core.fsmonitor", script("fsmonitor")),
            ("filter.evil.clean", format!("{}; cat", script("clean"))),
            ("filter.evil.smudge", format!("{}; cat", script("smudge"))),
            ("filter.evil.required", "true".into()),
            ("diff.external", script("external")),
        ] {
            git_in(repo.path(), &["config", key, &value]);
        }
        std::fs::write(repo.path().join(".gitattributes"), "* filter=evil\n").unwrap();
        git_in(repo.path(), &["add", ".gitattributes"]);
        git_in(
            repo.path(),
            &[
                "-c",
                "user.email=k@k",
                "-c",
                "user.name=k",
                "commit",
                "-qm",
                "a",
            ],
        );
        // The setup's own git ran the filter: the marks start over.
        assert!(mark("clean").exists());
        for entry in std::fs::read_dir(marks.path()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        let worktree = made(repo.path(), "c5").await;
        std::fs::write(worktree.dir.join("new.txt"), "one\n").unwrap();
        let settled = settle(&worktree).unwrap();
        assert!(matches!(settled, Settled::Kept { .. }), "{settled:?}");
        let ran: Vec<_> = std::fs::read_dir(marks.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert!(ran.is_empty(), "the repository's commands ran: {ran:?}");
    }
}

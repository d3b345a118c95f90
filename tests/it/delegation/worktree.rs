//! Worktree isolation: in-process children in a fresh `git worktree` of the session's
//! repository, against the real runtime with the coding tools and a real `git`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kin::agent::{Agent, StopReason};
use kin::delegation::Delivery;
use kin::model::ModelRequest;
use kin::runtime::{Runtime, RuntimeOptions};
use kin::session::history::HistoryItem;
use kin::tools::PermissionMode;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::support::{
    calls, last_tool_result, last_user_text, prompt, request, start_continuable, text,
    ScriptedModel,
};

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// A repository with one commit.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q", "-b", "main"]);
    std::fs::write(dir.path().join("README"), "hello\n").unwrap();
    git(dir.path(), &["add", "README"]);
    git(
        dir.path(),
        &[
            "-c",
            "user.email=k@k",
            "-c",
            "user.name=k",
            "commit",
            "-q",
            "-m",
            "first",
        ],
    );
    dir
}

struct Setup {
    runtime: Arc<Runtime>,
    _home: tempfile::TempDir,
    cwd: tempfile::TempDir,
    model: Arc<ScriptedModel>,
}

/// The parent calls `subagent` with `args` once, then answers "done". A child asked to
/// "edit: <file>" writes that file, then answers "edited"; any other child answers "looked".
fn setup(cwd: tempfile::TempDir, args: Value) -> Setup {
    let model = ScriptedModel::new(move |req: &ModelRequest| {
        let asked = last_user_text(req);
        if asked.starts_with("parent:") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("done"),
                _ => calls(&[("subagent", args.clone())]),
            };
        }
        match (asked.strip_prefix("edit: "), req.history.last()) {
            (_, Some(HistoryItem::ToolResult { .. })) => text("edited"),
            (Some(file), _) => calls(&[("write", json!({"path": file, "content": "new\n"}))]),
            (None, _) => text("looked"),
        }
    });
    let home = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(
        home.path(),
        model.clone(),
        kin::tools::builtin(),
        RuntimeOptions::default(),
    )
    .unwrap();
    Setup {
        runtime,
        _home: home,
        cwd,
        model,
    }
}

impl Setup {
    fn session(&self) -> Arc<Agent> {
        let agent = self
            .runtime
            .host()
            .create_session(self.cwd.path().to_owned(), Vec::new(), 0)
            .unwrap();
        agent.set_permission_mode(PermissionMode::Allow).unwrap();
        agent
    }

    async fn prompt(&self, agent: &Arc<Agent>) -> StopReason {
        let cancel = CancellationToken::new();
        self.runtime
            .host()
            .start_turn(agent.clone(), prompt("parent: go"), None, cancel)
            .await
            .unwrap()
    }

    fn parent_result(&self, parent: &str) -> (String, bool) {
        self.model
            .requests()
            .iter()
            .filter(|r| r.session_id == parent)
            .find_map(last_tool_result)
            .unwrap()
    }

    /// The working directories the children's model calls were made in.
    fn child_cwds(&self, parent: &str) -> Vec<PathBuf> {
        let requests = self.model.requests().into_iter();
        let children = requests.filter(|r| r.session_id != parent);
        children.map(|r| r.cwd.unwrap()).collect()
    }
}

fn kin_branches(repo: &Path) -> String {
    git(
        repo,
        &["branch", "--list", "--format=%(refname:short)", "kin/*"],
    )
}

#[tokio::test]
async fn a_worktree_child_that_edits_reports_its_branch_and_diffstat_and_leaves_main_alone() {
    let world = setup(
        repository(),
        json!({"description": "x", "prompt": "edit: new.txt", "isolation": "worktree"}),
    );
    let parent = world.session();
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);
    let (answer, is_error) = world.parent_result(&parent.id);
    assert!(!is_error, "{answer}");
    let cwds = world.child_cwds(&parent.id);
    let child_dir = &cwds[0];
    let child_id = child_dir.file_name().unwrap().to_str().unwrap();
    assert!(answer.starts_with("edited\n[worktree: "), "{answer}");
    assert!(
        answer.contains(&format!("on branch kin/{child_id}]")),
        "{answer}"
    );
    assert!(answer.contains("changed files:\n  new.txt\n"), "{answer}");
    assert!(
        answer.contains("1 file changed, 1 insertion(+)"),
        "{answer}"
    );
    // The edit is in the worktree, on its branch; the main checkout is untouched.
    let repo = world.cwd.path();
    assert_eq!(
        std::fs::read_to_string(child_dir.join("new.txt")).unwrap(),
        "new\n"
    );
    assert!(!repo.join("new.txt").exists());
    assert_eq!(git(repo, &["status", "--porcelain"]), "");
    assert_eq!(kin_branches(repo), format!("kin/{child_id}"));
}

#[tokio::test]
async fn a_worktree_child_that_changes_nothing_leaves_no_worktree_or_branch() {
    let world = setup(
        repository(),
        json!({"description": "x", "prompt": "just look", "isolation": "worktree"}),
    );
    let parent = world.session();
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);
    let (answer, is_error) = world.parent_result(&parent.id);
    assert!(!is_error, "{answer}");
    assert_eq!(
        answer,
        "looked\n[worktree: no changes; worktree and branch removed]"
    );
    let child_dir = &world.child_cwds(&parent.id)[0];
    assert!(child_dir.starts_with(world.cwd.path().join(".git/kin-worktrees")));
    assert!(!child_dir.exists());
    assert_eq!(kin_branches(world.cwd.path()), "");
    assert_eq!(
        git(world.cwd.path(), &["worktree", "list"]).lines().count(),
        1
    );
}

#[tokio::test]
async fn a_follow_up_continues_in_the_same_worktree() {
    let world = setup(repository(), json!({}));
    let parent = world.session();
    let mut edit = request("spawn", "edit: one.txt");
    edit.worktree = true;
    let (child_id, task_id) = start_continuable(&world.runtime, &parent, edit).await;
    let delegation = world.runtime.delegation();
    let wait = |task: String| {
        let tasks = world.runtime.tasks().clone();
        let owner = parent.id.clone();
        async move {
            let cancel = CancellationToken::new();
            let waited = tasks.wait(&task, Duration::from_secs(60), &owner, &cancel);
            waited.await.unwrap()
        }
    };
    let first = wait(task_id.to_string()).await;
    assert!(first.output.unwrap().contains("one.txt"));
    let delivered = delegation
        .send_message(&parent.id, &child_id, prompt("edit: two.txt"), None)
        .await
        .unwrap();
    let Delivery::Started(task) = delivered else {
        panic!("expected a new activation");
    };
    let second = wait(task.to_string()).await.output.unwrap();
    let cwds = world.child_cwds(&parent.id);
    assert!(cwds.iter().all(|cwd| cwd == &cwds[0]), "{cwds:?}");
    assert!(cwds[0].join("one.txt").exists() && cwds[0].join("two.txt").exists());
    assert!(
        second.contains("changed files:\n  one.txt\n  two.txt\n"),
        "{second}"
    );
    assert!(!world.cwd.path().join("two.txt").exists());
}

#[tokio::test]
async fn isolation_outside_a_git_repository_is_refused() {
    let world = setup(
        tempfile::tempdir().unwrap(),
        json!({"description": "x", "prompt": "edit: new.txt", "isolation": "worktree"}),
    );
    let parent = world.session();
    assert_eq!(world.prompt(&parent).await, StopReason::Completed);
    let (error, is_error) = world.parent_result(&parent.id);
    assert!(is_error);
    assert!(
        error.contains("isolation \"worktree\" needs a git repository;"),
        "{error}"
    );
    assert!(world.child_cwds(&parent.id).is_empty());
    assert!(!world.cwd.path().join("new.txt").exists());
}

#[tokio::test]
async fn a_continuable_worktree_child_killed_while_its_worktree_is_made_is_stored_and_continues() {
    let world = setup(repository(), json!({}));
    let repo = world.cwd.path().to_owned();
    // `git worktree add` copies the sparse-checkout patterns, here a FIFO nobody writes: it
    // is held half-way once it opened it (kin's git runs no hook that could hold it).
    git(&repo, &["config", "core.sparseCheckout", "true"]);
    let fifo = repo.join(".git/info/sparse-checkout");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();

    let parent = world.session();
    let mut edit = request("spawn", "edit: one.txt");
    edit.worktree = true;
    let (child_id, task_id) = start_continuable(&world.runtime, &parent, edit).await;
    let delegation = world.runtime.delegation();
    // Opening the FIFO for writing returns once git opened it for reading.
    let writing = fifo.clone();
    let held = tokio::task::spawn_blocking(move || std::fs::File::create(&writing).unwrap());
    let held = held.await.unwrap();
    let tasks = world.runtime.tasks().clone();
    let task = task_id.to_string();
    tasks.kill(&task, &parent.id, None).unwrap();
    let cancel = CancellationToken::new();
    let killed = tasks
        .wait(&task, Duration::from_secs(60), &parent.id, &cancel)
        .await
        .unwrap();
    assert_eq!(killed.status, kin::tasks::TaskStatus::Killed);
    drop(held);
    // Stored, in the state the kill left it: its one turn cancelled before it ran.
    let listed = delegation.list(&parent.id);
    let child = listed
        .iter()
        .find(|child| child.id == child_id)
        .expect("the killed child is stored");
    assert_eq!(child.last_stop.as_deref(), Some("aborted"), "{child:?}");
    assert_eq!(kin_branches(&repo), "", "the half-made worktree is gone");
    assert!(world.model.requests().is_empty(), "it never ran");

    // Continued: the worktree is made again and the child works in it.
    git(&repo, &["config", "--unset", "core.sparseCheckout"]);
    std::fs::remove_file(&fifo).unwrap();
    let delivered = delegation
        .send_message(&parent.id, &child_id, prompt("edit: two.txt"), None)
        .await
        .unwrap();
    let Delivery::Started(next) = delivered else {
        panic!("expected a new activation");
    };
    let answer = tasks
        .wait(next.as_str(), Duration::from_secs(60), &parent.id, &cancel)
        .await
        .unwrap();
    let output = answer.output.unwrap();
    assert!(output.contains("changed files:\n  two.txt\n"), "{output}");
    let cwds = world.child_cwds(&parent.id);
    assert_eq!(cwds.len(), 2, "a write, then its answer: {cwds:?}");
    assert!(
        cwds[0].starts_with(repo.join(".git/kin-worktrees")),
        "{cwds:?}"
    );
    assert!(cwds[0].join("two.txt").exists());
    assert_eq!(kin_branches(&repo), format!("kin/{}", child_id));
}

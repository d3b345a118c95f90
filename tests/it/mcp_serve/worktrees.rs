//! Tasks in their own git worktree (`isolation: worktree`, from a definition or the call):
//! the result names branch and changes, a restart continues there, a worktree without changes
//! is removed, outside a repository the call fails, and a call cancelled mid-checkout leaves
//! nothing behind.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::{header, session_id, World};
use crate::common::mock_openai::{text_reply, tool_calls_reply};

/// Runs `git args` in `dir` (a commit needs no configured identity).
fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(["-c", "user.email=k@k", "-c", "user.name=k", "-C"])
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

impl World {
    /// Makes the server's cwd a git repository with one commit.
    fn git_init(&self) {
        let cwd = self.cwd.path();
        git(cwd, &["init", "-q", "-b", "main"]);
        std::fs::write(cwd.join("README"), "a repository\n").unwrap();
        git(cwd, &["add", "README"]);
        git(cwd, &["commit", "-q", "-m", "first"]);
    }

    /// The `kin/*` branches of the server's cwd, one a line.
    fn kin_branches(&self) -> String {
        let list = ["branch", "--list", "--format=%(refname:short)", "kin/*"];
        git(self.cwd.path(), &list)
    }

    /// The number of stored sessions.
    fn stored(&self) -> usize {
        std::fs::read_dir(self.home.path().join("sessions"))
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|entry| entry.path().extension().is_some_and(|e| e == "jsonl"))
                    .count()
            })
            .unwrap_or(0)
    }
}

/// The `cwd` a session's header records.
fn recorded_cwd(log: &str) -> PathBuf {
    PathBuf::from(header(log)["cwd"].as_str().unwrap())
}

#[tokio::test]
async fn a_definitions_worktree_isolation_runs_the_task_in_its_own_worktree() {
    let Some(world) = World::new() else { return };
    world.git_init();
    // Not committed: found in the checkout, also when the session is reopened in its worktree.
    world.define(
        "isolated",
        "---\ndescription: Works apart\nisolation: worktree\n---\nWork carefully.\n",
    );
    world.model.push(tool_calls_reply(&[(
        "c1",
        "write",
        r#"{"path":"made.txt","content":"one\ntwo\n"}"#,
    )]));
    world.model.push(text_reply(&["wrote it"]));
    let found = world
        .client(&[
            "allowed",
            "kin",
            r#"{"prompt": "write made.txt", "agent": "isolated", "mode": "allow"}"#,
        ])
        .await;
    let result = &found[0];
    assert_eq!(result["isError"], false, "{result}");
    let id = session_id(result);
    // The file is in the session's worktree (its recorded cwd), not in the main checkout.
    let dir = recorded_cwd(&world.log(&id));
    assert!(
        dir.ends_with(format!(".git/kin-worktrees/{id}")),
        "{}",
        dir.display()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("made.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(!world.cwd.path().join("made.txt").exists());
    assert_eq!(
        git(world.cwd.path(), &["status", "--porcelain"]),
        "?? .kin/"
    );
    // The result names the branch, the changed file and the diffstat, after the answer.
    let branch = format!("kin/{id}");
    let answer = result["structured"]["answer"].as_str().unwrap();
    assert!(answer.starts_with("wrote it\n[worktree: "), "{answer}");
    assert!(answer.contains(&format!("on branch {branch}]")), "{answer}");
    assert!(answer.contains("  made.txt"), "{answer}");
    assert!(
        answer.contains("1 file changed, 2 insertions(+)"),
        "{answer}"
    );
    assert!(result["text"].as_str().unwrap().contains(&branch));
    assert_eq!(world.kin_branches(), branch);

    // A restarted server continues in the same worktree, as the same definition.
    world.model.push(tool_calls_reply(&[(
        "c1",
        "read",
        r#"{"path":"made.txt"}"#,
    )]));
    world.model.push(text_reply(&["read it"]));
    let result = world.reply(&id, "read it back", "read-only").await;
    assert_eq!(result["isError"], false, "{result}");
    assert!(result["structured"].get("notice").is_none(), "{result}");
    let answer = result["structured"]["answer"].as_str().unwrap();
    assert!(answer.starts_with("read it\n[worktree: "), "{answer}");
    assert!(answer.contains(&branch), "{answer}");
    let requests = world.model.requests();
    let read = requests[3].body.to_string();
    assert!(read.contains(r"1\tone\n"), "{read}");
    assert!(read.contains("Work carefully."), "{read}");
    // kin_output in a later server reads the log and reports the worktree too.
    let arguments = json!({"session_id": id}).to_string();
    let output = world.call("kin_output", &arguments).await;
    let answer = output["structured"]["answer"].as_str().unwrap();
    assert_eq!(output["structured"]["fromLog"], true, "{output}");
    assert!(answer.starts_with("read it\n[worktree: "), "{answer}");
    assert!(answer.contains("  made.txt"), "{answer}");
}

#[tokio::test]
async fn a_worktree_task_without_changes_reports_it_removed_and_outside_a_repository_fails() {
    let Some(world) = World::new() else { return };
    world.git_init();
    // The call's own `isolation`: a task that changes nothing.
    world.model.push(text_reply(&["nothing to change"]));
    let result = world
        .call(
            "kin",
            r#"{"prompt": "look around", "isolation": "worktree"}"#,
        )
        .await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structured"]["answer"],
        "nothing to change\n[worktree: no changes; worktree and branch removed]",
        "{result}"
    );
    let id = session_id(&result);
    let dir = recorded_cwd(&world.log(&id));
    assert!(dir.ends_with(format!(".git/kin-worktrees/{id}")));
    assert!(!dir.exists());
    assert_eq!(world.kin_branches(), "");
    // kin_reply makes it again where it was, and the task runs there.
    world.model.push(text_reply(&["still nothing"]));
    let result = world.reply(&id, "and now?", "read-only").await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(
        result["structured"]["answer"],
        "still nothing\n[worktree: no changes; worktree and branch removed]",
        "{result}"
    );

    // Not a git repository: a definite error naming why, and no session left behind.
    let elsewhere = tempfile::tempdir().unwrap();
    let before = world.stored();
    let call = json!({"prompt": "x", "cwd": elsewhere.path(), "isolation": "worktree"});
    let result = world.call("kin", &call.to_string()).await;
    assert_eq!(result["isError"], true, "{result}");
    let text = result["text"].as_str().unwrap();
    assert!(
        text.starts_with("isolation \"worktree\" needs a git repository;")
            && text.contains(&elsewhere.path().display().to_string()),
        "{text}"
    );
    assert_eq!(world.stored(), before);
    assert_eq!(world.model.requests().len(), 2);
}

#[tokio::test]
async fn a_call_cancelled_while_its_worktree_is_checked_out_leaves_nothing_behind() {
    let Some(world) = World::new() else { return };
    world.git_init();
    // `git worktree add` copies the sparse-checkout patterns, here a FIFO nobody writes: git
    // is held half-way once it opened it (kin's git runs no hook that could hold it). Then
    // `started` says so to the client, which cancels.
    git(world.cwd.path(), &["config", "core.sparseCheckout", "true"]);
    let sparse = world.cwd.path().join(".git/info/sparse-checkout");
    std::fs::create_dir_all(sparse.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&sparse, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let fifo = world.home.path().join("started");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let relay = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let held = std::fs::File::create(&sparse).unwrap();
            std::fs::write(&fifo, "started\n").unwrap();
            held
        })
    };
    let fifo = fifo.display().to_string();
    let found = world
        .client(&[
            "cancel-when",
            &fifo,
            r#"{"prompt": "x", "isolation": "worktree"}"#,
        ])
        .await;
    assert_eq!(found, [json!({"hook": "started"})]);
    drop(relay.join().unwrap());
    // No session, worktree or branch: the server removed what git had made before it ended.
    assert_eq!(world.stored(), 0);
    let kept = world.cwd.path().join(".git/kin-worktrees");
    let entries = std::fs::read_dir(&kept).map_or(0, |dir| dir.count());
    assert_eq!(entries, 0, "{}", kept.display());
    let listed = git(world.cwd.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    assert_eq!(world.kin_branches(), "");
    assert!(world.model.requests().is_empty());
}

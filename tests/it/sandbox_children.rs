//! ACP children under kin's sandbox (`[sandbox] mode = "auto"`, `allow` mode), through the real
//! binary: a child refused a write says so, naming the path and its `[acp_agents]` setting;
//! a missing `writable` directory is made (0700) and then written, for a child and for
//! `[sandbox] writable` alike; a kin child whose `KIN_HOME` lies outside the workspace keeps
//! its sessions there. (The real agents from npm are in `acp_children::peers`.)

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{prompt_in_mode, Dirs, Script};
use serde_json::json;

use crate::sandbox::{landlock, logged_results};

/// Runs a parent in `allow` mode whose model calls `subagent_probe` once; returns the
/// text of every tool result it logged.
async fn delegate_to_probe(dirs: &Dirs) -> String {
    let parent = Script::new()
        .call(
            "ask",
            "subagent_probe",
            json!({"description": "Ask the probe", "prompt": "Go."}),
        )
        .text("PARENT_DONE");
    let replay = parent.dir();
    let mut runner = dirs.runner(replay.path(), &[]);
    prompt_in_mode(&mut runner, None, "allow", "Delegate.").await;
    runner.finish().await.unwrap();
    logged_results(&dirs.home).join("\n")
}

/// The agent `probe`: `sh` making `state` (a directory of its own), then kin answering from
/// `child_replay`; `extra` goes at the end of its table.
fn probe_table(state: &Path, child_replay: &Path, extra: &str) -> String {
    let script = format!(
        "mkdir -p {}/db || exit 3; exec \"$0\" acp --replay \"$1\"",
        state.display()
    );
    format!(
        "[acp_agents.probe]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}, {:?}, {:?}]\npermission = \"allow\"\n{extra}",
        common::kin_binary().display().to_string(),
        child_replay.display().to_string(),
    )
}

#[tokio::test]
async fn a_child_refused_a_write_names_the_path_and_its_setting_and_writable_fixes_it() {
    if !landlock("a_child_refused_a_write_names_the_path_and_its_setting_and_writable_fixes_it") {
        return;
    }
    let dirs = Dirs::new();
    let state = dirs.outside.join("state");
    let child = Script::new().text("CHILD_DONE").dir();
    dirs.configure(&probe_table(&state, child.path(), ""));
    let results = delegate_to_probe(&dirs).await;
    assert!(
        results.contains(&format!("kin's sandbox refused this: {}", state.display()))
            && results.contains("`[acp_agents.probe]`"),
        "{results}"
    );
    assert!(!state.exists());
    // Listed in `writable` (missing): made 0700 before the child is confined, then written.
    // (The kin it execs is not known by name: its KIN_HOME is listed too.)
    let extra = format!(
        "writable = [{:?}, {:?}]\n",
        state.display().to_string(),
        dirs.home.display().to_string()
    );
    dirs.configure(&probe_table(&state, child.path(), &extra));
    let results = delegate_to_probe(&dirs).await;
    assert!(results.contains("CHILD_DONE"), "{results}");
    assert!(state.join("db").is_dir());
    let mode = std::fs::metadata(&state).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[tokio::test]
async fn a_kin_child_keeps_its_sessions_in_its_own_kin_home_outside_the_workspace() {
    if !landlock("a_kin_child_keeps_its_sessions_in_its_own_kin_home_outside_the_workspace") {
        return;
    }
    let dirs = Dirs::new();
    let child_home = dirs.outside.join("child-home");
    let child = Script::new().text("CHILD_DONE").dir();
    dirs.configure(&format!(
        "[acp_agents.kin]\ncommand = {:?}\nargs = [\"acp\", \"--replay\", {:?}]\npermission = \"allow\"\nenv = {{ KIN_HOME = {:?} }}\n",
        common::kin_binary().display().to_string(),
        child.path().display().to_string(),
        child_home.display().to_string(),
    ));
    let parent = Script::new()
        .call(
            "ask",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Go."}),
        )
        .text("PARENT_DONE");
    let replay = parent.dir();
    let mut runner = dirs.runner(replay.path(), &[]);
    prompt_in_mode(&mut runner, None, "allow", "Delegate.").await;
    runner.finish().await.unwrap();
    let results = logged_results(&dirs.home).join("\n");
    assert!(results.contains("CHILD_DONE"), "{results}");
    assert_eq!(common::session_files(&child_home).len(), 1, "{results}");
}

#[tokio::test]
async fn a_missing_sandbox_writable_directory_is_made_and_commands_write_it() {
    if !landlock("a_missing_sandbox_writable_directory_is_made_and_commands_write_it") {
        return;
    }
    let dirs = Dirs::new();
    let cache = dirs.outside.join("cache/deep");
    dirs.configure(&format!(
        "[sandbox]\nwritable = [{:?}]\n",
        cache.display().to_string()
    ));
    let script = Script::new()
        .call(
            "run",
            "bash",
            json!({"command": format!("echo cached > {}/x", cache.display())}),
        )
        .text("done");
    let replay = script.dir();
    let mut runner = dirs.runner(replay.path(), &[]);
    prompt_in_mode(&mut runner, None, "allow", "Run it.").await;
    runner.finish().await.unwrap();
    let results = logged_results(&dirs.home).join("\n");
    assert_eq!(
        std::fs::read_to_string(cache.join("x")).unwrap_or_default(),
        "cached\n",
        "{results}"
    );
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

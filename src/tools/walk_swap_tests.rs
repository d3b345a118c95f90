//! The symlink-swap race for the walking tools: while another thread keeps exchanging a
//! workspace directory with a symlink to a directory outside, `glob` and `grep` must never name
//! a file that lies outside (the walk reads each directory through its parent's handle).

use std::os::unix::fs::symlink;

use serde_json::json;

use super::swap_tests::Swapper;
use super::testing::{call, Workspace};
use super::{glob::GlobTool, grep::GrepTool, PermissionMode, Tool};

/// Calls of `glob`, which listed outside names before its walk was confined (415 of 10,000).
const TRIES: usize = 10_000;
/// Calls of `grep`, whose old walk listed outside names too but opened each file confined, so
/// none reached its output; kept as a guard for the new walk.
const GREP_TRIES: usize = 2_000;

/// `ws/d` holds `inside.txt`; `outside/` (where `ws/swap` points) holds `OUTSIDE.txt`; both
/// contain the word the grep test looks for.
fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("d/inside.txt", "needle\n");
    std::fs::write(ws.outside("OUTSIDE.txt"), "needle\n").unwrap();
    symlink(ws.outside(""), ws.path("swap")).unwrap();
    ws
}

/// Calls `tool` `tries` times in read-only mode while the swapper runs; returns how many
/// outputs named the outside file, how many named the inside one, and how many swaps ran.
async fn race(
    tool: &(impl Tool + Clone + 'static),
    arguments: serde_json::Value,
    tries: usize,
) -> (usize, usize, usize) {
    let ws = workspace();
    let cx = ws.cx_in_mode(PermissionMode::ReadOnly);
    let swapper = Swapper::start(&ws);
    let (mut escapes, mut inside) = (0, 0);
    for _ in 0..tries {
        let out = call(tool, arguments.clone(), &cx).await;
        if out.text.contains("OUTSIDE") {
            escapes += 1;
        } else if out.text.contains("inside.txt") {
            inside += 1;
        }
    }
    (escapes, inside, swapper.finish())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_during_a_glob_never_lists_outside_names() {
    let (escapes, inside, swaps) = race(&GlobTool, json!({"pattern": "**"}), TRIES).await;
    assert_eq!(
        escapes, 0,
        "{escapes} of {TRIES} globs listed outside names"
    );
    assert!(
        swaps > 100 && inside > 0,
        "the race ran: {swaps} swaps, {inside} globs listed the inside file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_during_a_grep_never_names_outside_files() {
    let (escapes, inside, swaps) = race(&GrepTool, json!({"pattern": "needle"}), GREP_TRIES).await;
    assert_eq!(
        escapes, 0,
        "{escapes} of {GREP_TRIES} greps named outside files"
    );
    assert!(
        swaps > 100 && inside > 0,
        "the race ran: {swaps} swaps, {inside} greps found the inside file"
    );
}

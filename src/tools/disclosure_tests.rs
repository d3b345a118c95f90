//! Nothing outside the roots is told before the call is allowed: `edit` quotes no line of an
//! outside file it was not allowed to edit, and `write`, `edit`, `grep` and `glob` answer an
//! outside path the same way whether it exists, is a directory, is binary or is missing.

use serde_json::{json, Value};

use super::client::PermissionAnswer;
use super::testing::{call, Workspace};
use super::{edit::EditTool, glob::GlobTool, grep::GrepTool, write::WriteTool};
use super::{PermissionMode, Tool, ToolContext};

const SECRET: &str = "AWS_SECRET=hunter2";

/// `outside/` holds a text file, a binary file and a directory; `missing` is not there.
fn workspace() -> Workspace {
    let ws = Workspace::new();
    std::fs::write(ws.outside("text"), format!("{SECRET}\n")).unwrap();
    std::fs::write(ws.outside("binary"), b"\0\x01\x02").unwrap();
    std::fs::create_dir(ws.outside("dir")).unwrap();
    ws
}

const NAMES: [&str; 4] = ["text", "binary", "dir", "missing"];

/// The model's view of a call on `../outside/NAME`, with the name blanked out.
async fn seen(
    tool: &(impl Tool + Clone + 'static),
    args: Value,
    name: &str,
    cx: &ToolContext,
) -> String {
    let out = call(tool, args, cx).await;
    assert!(out.is_error, "{name}: {}", out.text);
    assert!(
        !out.text.contains("hunter2"),
        "{name} disclosed: {}",
        out.text
    );
    out.text.replace(name, "NAME")
}

/// Every outside name gets the same answer from `tool` with the arguments `args(path)`.
async fn same_for_every_name(
    tool: &(impl Tool + Clone + 'static),
    args: impl Fn(&str) -> Value,
    cx: impl Fn() -> ToolContext,
) -> String {
    let mut answers = Vec::new();
    for name in NAMES {
        let path = format!("../outside/{name}");
        answers.push(seen(tool, args(&path), name, &cx()).await);
    }
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:#?}");
    answers.remove(0)
}

fn patch(path: &str) -> Value {
    json!({"path": path, "patch": "@@ -1 +1 @@\n-AWS_SECRET=guess\n+x\n"})
}

fn replace(path: &str) -> Value {
    json!({"path": path, "old_string": "aws_secret=", "new_string": "x"})
}

#[tokio::test]
async fn edit_outside_in_read_only_mode_is_refused_before_the_file_is_read() {
    let ws = workspace();
    let cx = || ws.cx_in_mode(PermissionMode::ReadOnly);
    let text = same_for_every_name(&EditTool, patch, cx).await;
    assert!(text.contains("read-only"), "{text}");
    same_for_every_name(&EditTool, replace, cx).await;
    assert_eq!(
        std::fs::read_to_string(ws.outside("text")).unwrap(),
        format!("{SECRET}\n")
    );
}

#[tokio::test]
async fn edit_outside_rejected_by_the_user_tells_nothing_of_the_file() {
    let ws = workspace();
    let editor = ws.editor();
    let cx = || {
        editor.answer(PermissionAnswer::RejectOnce);
        ws.cx_with(&editor)
    };
    let text = same_for_every_name(&EditTool, patch, cx).await;
    assert!(text.contains("the user rejected this call"), "{text}");
    same_for_every_name(&EditTool, replace, cx).await;
    // Asked each time, and the editor was never asked for the file.
    assert_eq!(editor.permission_prompts(), 2 * NAMES.len());
    assert!(
        editor.calls().iter().all(|c| c.starts_with("permission")),
        "{:?}",
        editor.calls()
    );
}

#[tokio::test]
async fn edit_outside_without_an_editor_to_ask_tells_nothing_of_the_file() {
    let ws = workspace();
    let text = same_for_every_name(&EditTool, patch, || ws.cx()).await;
    assert!(text.contains("needs the user's permission"), "{text}");
}

#[tokio::test]
async fn write_outside_tells_nothing_of_what_is_there() {
    let ws = workspace();
    let write = |path: &str| json!({"path": path, "content": "x"});
    let text = same_for_every_name(&WriteTool, write, || {
        ws.cx_in_mode(PermissionMode::ReadOnly)
    })
    .await;
    assert!(text.contains("read-only"), "{text}");
    same_for_every_name(&WriteTool, write, || ws.cx()).await;
    let editor = ws.editor();
    let rejected = || {
        editor.answer(PermissionAnswer::RejectOnce);
        ws.cx_with(&editor)
    };
    let text = same_for_every_name(&WriteTool, write, rejected).await;
    assert!(text.contains("the user rejected this call"), "{text}");
    assert!(!ws.outside("missing").exists());
}

#[tokio::test]
async fn grep_and_glob_outside_tell_nothing_of_what_is_there() {
    let ws = workspace();
    let grep = |path: &str| json!({"pattern": "AWS", "path": path});
    let glob = |path: &str| json!({"pattern": "*", "path": path});
    for mode in [PermissionMode::Ask, PermissionMode::ReadOnly] {
        let text = same_for_every_name(&GrepTool, grep, || ws.cx_in_mode(mode)).await;
        assert!(text.contains("needs the user's permission"), "{text}");
        same_for_every_name(&GlobTool, glob, || ws.cx_in_mode(mode)).await;
    }
}

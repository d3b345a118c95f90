//! `write`: creates or replaces a whole text file. The change is shown (and, in `ask` mode,
//! approved) as a diff before it is made; through the editor when it offers `writeTextFile`.

use schemars::JsonSchema;
use serde::Deserialize;

use super::display::{file_diffs, Location};
use super::file_stamps::StaleFile;
use super::fs::{self, FsError};
use super::permission::Scope;
use super::typed::{titled, TypedTool};
use super::{ToolContext, ToolDisplay, ToolKind, ToolOutput};

pub(crate) const NAME: &str = "write";

/// The arguments of a `write` call.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The file to write, absolute or relative to the working directory.
    path: String,
    /// The complete new text of the file.
    content: String,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WriteTool;

impl TypedTool for WriteTool {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Create a text file, or replace all of an existing one, \
        with `content`. Missing parent directories are created. To change part of a file, use \
        `edit`.";
    type Args = WriteArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn title(&self, args: Option<&WriteArgs>) -> String {
        titled("Write", args.map(|a| a.path.as_str()))
    }

    async fn run(&self, args: WriteArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let path = args.path.clone();
        let result = run(args, &cx).await;
        cx.name_path_as_given(Some(&path), result)
    }
}

/// An error result for a failed file operation (shared by `write` and `edit`).
/// A write refused because the file changed since the agent last saw it.
pub(crate) fn stale_error(stale: StaleFile) -> ToolOutput {
    ToolOutput::error("FileChanged", "FILE_CHANGED", format!("Error: {stale}"))
}

pub(crate) fn write_error(error: FsError) -> ToolOutput {
    if error.is_cancelled() {
        return ToolOutput::cancelled();
    }
    let (name, code) = match &error {
        FsError::NotFound { .. } => ("NotFound", "NOT_FOUND"),
        FsError::IsDirectory { .. } => ("IsDirectory", "IS_DIRECTORY"),
        FsError::NotText { .. } => ("NotText", "NOT_TEXT"),
        _ => ("WriteFailed", "WRITE_FAILED"),
    };
    ToolOutput::error(name, code, format!("Error: {error}"))
}

async fn run(params: WriteArgs, cx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let cx = cx.clone();
    let target = cx.resolve(&params.path)?;
    let shown = cx.roots.display(&target.path);
    // Outside the roots the call is decided before anything there is looked at (whether the
    // file exists, is a directory or is text), so a refusal tells the model nothing about it.
    // kin's own directories count as outside, wherever they are.
    let outside = !target.inside || cx.private.keeps_from_writes(&target.path);
    if outside {
        let display = ToolDisplay {
            locations: vec![Location::new(&target.path, None)],
            diffs: file_diffs(&target.path, None, &params.content),
            terminal_id: None,
            hidden: false,
        };
        cx.authorize(
            Scope::Outside,
            cx.prompt(ToolKind::Edit, format!("Write {shown}"), display),
        )
        .await?;
    }
    let old = match fs::read_text(&cx, &target.path).await {
        Ok(old) => old,
        // A binary file is replaced wholesale; there is no text diff to show.
        Err(FsError::NotText { .. } | FsError::TooLarge { .. }) => None,
        Err(error) => return Err(write_error(error)),
    };
    let display = ToolDisplay {
        locations: vec![Location::new(&target.path, None)],
        diffs: file_diffs(&target.path, old.as_deref(), &params.content),
        terminal_id: None,
        hidden: false,
    };
    if !outside {
        let verb = if old.is_some() { "Overwrite" } else { "Create" };
        cx.authorize(
            Scope::Workspace,
            cx.prompt(ToolKind::Edit, format!("{verb} {shown}"), display.clone()),
        )
        .await?;
    }
    let lines = params.content.lines().count();
    let bytes = params.content.len();
    let writing = cx.roots.writing().await;
    cx.files.check(&target.path, &shown).map_err(stale_error)?;
    fs::write_text(&cx, &target.path, params.content)
        .await
        .map_err(write_error)?;
    cx.files.wrote(&target.path);
    drop(writing);
    let text = match old {
        Some(_) => format!("Replaced {shown} ({lines} lines, {bytes} bytes)"),
        None => format!("Created {shown} ({lines} lines, {bytes} bytes)"),
    };
    Ok(ToolOutput::ok(text).with_display(display))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::client::PermissionAnswer;
    use crate::tools::testing::{call, Workspace};
    use crate::tools::PermissionMode;

    #[tokio::test]
    async fn creates_files_and_directories_and_shows_a_diff() {
        let ws = Workspace::new();
        let cx = ws.cx_in_mode(PermissionMode::Allow);
        let out = call(
            &WriteTool,
            json!({"path": "new/dir/a.txt", "content": "hi\n"}),
            &cx,
        )
        .await;
        assert_eq!(out.text, "Created new/dir/a.txt (1 lines, 3 bytes)");
        assert_eq!(ws.read("new/dir/a.txt"), "hi\n");
        assert_eq!(out.display.diffs[0].old_text, None);

        let out = call(
            &WriteTool,
            json!({"path": "new/dir/a.txt", "content": "bye\n"}),
            &cx,
        )
        .await;
        assert!(out.text.starts_with("Replaced"));
        assert_eq!(out.display.diffs[0].old_text.as_deref(), Some("hi\n"));
        assert_eq!(ws.read("new/dir/a.txt"), "bye\n");
    }

    #[tokio::test]
    async fn each_permission_outcome() {
        let ws = Workspace::new();
        let editor = ws.editor();
        let cx = ws.cx_with(&editor);
        let write = |content: &str| json!({"path": "a.txt", "content": content});

        editor.answer(PermissionAnswer::RejectOnce);
        let out = call(&WriteTool, write("1"), &cx).await;
        assert!(
            out.text
                .contains("the user rejected this call (Create a.txt)"),
            "{}",
            out.text
        );
        assert!(!ws.path("a.txt").exists());

        editor.answer(PermissionAnswer::AllowOnce);
        assert!(!call(&WriteTool, write("2"), &cx).await.is_error);
        assert_eq!(ws.read("a.txt"), "2");

        editor.answer(PermissionAnswer::AllowAlways);
        assert!(!call(&WriteTool, write("3"), &cx).await.is_error);
        // Remembered: no question this time.
        assert!(!call(&WriteTool, write("4"), &cx).await.is_error);
        assert_eq!(editor.permission_prompts(), 3);
        assert_eq!(ws.read("a.txt"), "4");
        let records = cx.permissions.take_unlogged();
        assert_eq!(records.len(), 3);

        // Cancelled: the call ends as cancelled, nothing is written.
        let ws = Workspace::new();
        let editor = ws.editor();
        editor.answer(PermissionAnswer::Cancelled);
        let out = call(&WriteTool, write("5"), &ws.cx_with(&editor)).await;
        assert!(out.is_cancelled());
        assert!(!ws.path("a.txt").exists());

        editor.answer(PermissionAnswer::RejectAlways);
        let cx = ws.cx_with(&editor);
        assert!(call(&WriteTool, write("6"), &cx).await.is_error);
        let out = call(&WriteTool, write("7"), &cx).await;
        assert!(out.text.contains("always reject edit"), "{}", out.text);
        assert_eq!(editor.permission_prompts(), 2);
    }

    #[tokio::test]
    async fn read_only_refuses_and_outside_paths_ask_even_when_always_allowed_inside() {
        let ws = Workspace::new();
        let out = call(
            &WriteTool,
            json!({"path": "a.txt", "content": "x"}),
            &ws.cx_in_mode(PermissionMode::ReadOnly),
        )
        .await;
        assert!(out.text.contains("read-only"), "{}", out.text);
        assert!(!ws.path("a.txt").exists());

        let editor = ws.editor();
        let cx = ws.cx_with(&editor);
        editor.answer(PermissionAnswer::AllowAlways);
        assert!(
            !call(&WriteTool, json!({"path": "a.txt", "content": "x"}), &cx)
                .await
                .is_error
        );
        editor.answer(PermissionAnswer::RejectOnce);
        let out = call(
            &WriteTool,
            json!({"path": "../outside/x", "content": "x"}),
            &cx,
        )
        .await;
        assert!(out.is_error);
        assert!(!ws.outside("x").exists());
        assert_eq!(editor.permission_prompts(), 2);
    }

    #[tokio::test]
    async fn writes_through_the_editor_when_it_offers_files() {
        let ws = Workspace::new();
        let editor = ws.editor();
        editor.answer(PermissionAnswer::AllowOnce);
        let out = call(
            &WriteTool,
            json!({"path": "a.txt", "content": "x"}),
            &ws.cx_with(&editor),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            editor.calls(),
            vec!["permission edit Create a.txt", "write a.txt"]
        );
        assert_eq!(ws.read("a.txt"), "x");
    }
}

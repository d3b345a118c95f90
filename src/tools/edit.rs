//! `edit`: changes part of a text file, either by replacing an exact string that must occur
//! exactly once (or everywhere, when asked), or by applying a unified patch. A mismatch is an
//! error that says what did not match and where. The change is shown as a diff and, in `ask`
//! mode, approved before it is written.

use schemars::JsonSchema;
use serde::Deserialize;

use super::display::{file_diffs, Location};
use super::file_stamps::{StaleFile, Stamp};
use super::fs::{self, FsError};
use super::permission::Scope;
use super::typed::{titled, TypedTool};
use super::write::{stale_error, write_error};
use super::{ToolContext, ToolDisplay, ToolKind, ToolOutput};

pub(crate) const NAME: &str = "edit";
/// Line numbers listed when a string matches more than once.
const MAX_LISTED: usize = 10;

/// The arguments of an `edit` call.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct EditArgs {
    /// The file to change, absolute or relative to the working directory.
    path: String,
    /// Exact text to replace; must occur exactly once unless replace_all is true.
    #[serde(default)]
    old_string: Option<String>,
    /// The text to put in its place.
    #[serde(default)]
    new_string: Option<String>,
    /// Replace every occurrence of old_string. Default false.
    #[serde(default)]
    replace_all: bool,
    /// A unified diff of this file, used instead of old_string/new_string.
    #[serde(default)]
    patch: Option<String>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EditTool;

impl TypedTool for EditTool {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Change part of a text file. Either give `old_string` \
        (exact text, including whitespace, that must occur exactly once; add surrounding lines \
        to make it unique, or set `replace_all`) and `new_string`, or give `patch`: a unified \
        diff of this one file (hunks starting with `@@`). Read the file first.";
    type Args = EditArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }

    fn title(&self, args: Option<&EditArgs>) -> String {
        titled("Edit", args.map(|a| a.path.as_str()))
    }

    async fn run(&self, args: EditArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let path = args.path.clone();
        let result = run(args, &cx).await;
        cx.name_path_as_given(Some(&path), result)
    }
}

/// Why an edit could not be made; told to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EditError {
    #[error("give either `patch`, or `old_string` and `new_string`")]
    NoChange,
    #[error("give either `patch` or `old_string`/`new_string`, not both")]
    Both,
    #[error("`old_string` is empty; to write a whole file use `write`")]
    EmptyOld,
    #[error("`old_string` and `new_string` are the same; nothing would change")]
    Same,
    #[error("`old_string` was not found in {path}{hint}")]
    NotFound { path: String, hint: String },
    #[error("`old_string` occurs {count} times in {path} (at lines {lines}); include more surrounding text to pick one, or set `replace_all`")]
    Ambiguous {
        path: String,
        count: usize,
        lines: String,
    },
    #[error("the patch is not a valid unified diff: {0}")]
    BadPatch(String),
    #[error("the patch has no hunks")]
    EmptyPatch,
    #[error("hunk {hunk} ({header}) does not match {path}: {detail}")]
    HunkMismatch {
        hunk: usize,
        header: String,
        path: String,
        detail: String,
    },
}

impl EditError {
    fn output(&self) -> ToolOutput {
        let (name, code) = match self {
            Self::NotFound { .. } | Self::HunkMismatch { .. } => ("EditMismatch", "EDIT_MISMATCH"),
            Self::Ambiguous { .. } => ("EditAmbiguous", "EDIT_AMBIGUOUS"),
            _ => ("InvalidArguments", "INVALID_ARGUMENTS"),
        };
        ToolOutput::error(name, code, format!("Error: {self}"))
    }
}

async fn run(params: EditArgs, cx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let cx = cx.clone();
    let change = Change::from_params(&params).map_err(|e| e.output())?;
    let target = cx.resolve(&params.path)?;
    let shown = cx.roots.display(&target.path);
    // Outside the roots the call is decided before the file is read or matched: a mismatch
    // (which quotes the file) or a missing file is only reported once the user allowed it.
    let outside = !target.inside || cx.private.keeps_from_writes(&target.path);
    if outside {
        cx.authorize(
            Scope::Outside,
            cx.prompt(
                ToolKind::Edit,
                format!("Edit {shown}"),
                ToolDisplay::at(&target.path, None),
            ),
        )
        .await?;
    }
    // What this call reads: the file must still be that when the edit is written.
    let read_stamp = Stamp::of(&target.path);
    let old = fs::read_text(&cx, &target.path)
        .await
        .map_err(write_error)?
        .ok_or_else(|| {
            write_error(FsError::NotFound {
                path: shown.clone(),
            })
        })?;
    // A file that changed since the agent saw it (or while it was read) is refused before its
    // text is matched: the model's old text may be what it saw, not what is there.
    let read_stamp = match Stamp::of(&target.path) {
        after if after == read_stamp => after,
        _ => return Err(stale_error(StaleFile::Changed { shown })),
    };
    cx.files
        .check_against(&target.path, read_stamp, &shown)
        .map_err(stale_error)?;
    let edited = change.apply(&old, &shown).map_err(|e| e.output())?;
    let display = ToolDisplay {
        locations: vec![Location::new(&target.path, Some(edited.first_line))],
        diffs: file_diffs(&target.path, Some(&old), &edited.text),
        terminal_id: None,
        hidden: false,
    };
    if !outside {
        cx.authorize(
            Scope::Workspace,
            cx.prompt(ToolKind::Edit, format!("Edit {shown}"), display.clone()),
        )
        .await?;
    }
    let writing = cx.roots.writing().await;
    cx.files.check(&target.path, &shown).map_err(stale_error)?;
    if Stamp::of(&target.path) != read_stamp {
        return Err(stale_error(StaleFile::Changed { shown }));
    }
    fs::write_text(&cx, &target.path, edited.text)
        .await
        .map_err(write_error)?;
    cx.files.wrote(&target.path);
    drop(writing);
    Ok(ToolOutput::ok(format!("Edited {shown}: {}", edited.summary)).with_display(display))
}

enum Change<'a> {
    Replace {
        old: &'a str,
        new: &'a str,
        all: bool,
    },
    Patch(&'a str),
}

#[derive(Debug)]
struct Edited {
    text: String,
    /// The first changed line (1-based), for the editor to show.
    first_line: u32,
    summary: String,
}

impl<'a> Change<'a> {
    fn from_params(params: &'a EditArgs) -> Result<Self, EditError> {
        match (&params.patch, &params.old_string, &params.new_string) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => Err(EditError::Both),
            (Some(patch), None, None) => Ok(Self::Patch(patch)),
            (None, Some(old), Some(new)) => {
                if old.is_empty() {
                    Err(EditError::EmptyOld)
                } else if old == new {
                    Err(EditError::Same)
                } else {
                    Ok(Self::Replace {
                        old,
                        new,
                        all: params.replace_all,
                    })
                }
            }
            _ => Err(EditError::NoChange),
        }
    }

    fn apply(&self, text: &str, path: &str) -> Result<Edited, EditError> {
        match self {
            Self::Replace { old, new, all } => replace(text, old, new, *all, path),
            Self::Patch(patch) => apply_patch(text, patch, path),
        }
    }
}

fn line_of(text: &str, byte: usize) -> u32 {
    u32::try_from(text[..byte].matches('\n').count() + 1).unwrap_or(u32::MAX)
}

fn replace(text: &str, old: &str, new: &str, all: bool, path: &str) -> Result<Edited, EditError> {
    let starts: Vec<usize> = text.match_indices(old).map(|(at, _)| at).collect();
    let Some(&first) = starts.first() else {
        return Err(EditError::NotFound {
            path: path.into(),
            hint: not_found_hint(text, old),
        });
    };
    if starts.len() > 1 && !all {
        let mut lines: Vec<String> = starts
            .iter()
            .take(MAX_LISTED)
            .map(|at| line_of(text, *at).to_string())
            .collect();
        if starts.len() > MAX_LISTED {
            lines.push("...".into());
        }
        return Err(EditError::Ambiguous {
            path: path.into(),
            count: starts.len(),
            lines: lines.join(", "),
        });
    }
    let text_out = if all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    let summary = match starts.len() {
        1 => format!("replaced 1 occurrence at line {}", line_of(text, first)),
        n => format!("replaced {n} occurrences"),
    };
    Ok(Edited {
        text: text_out,
        first_line: line_of(text, first),
        summary,
    })
}

/// A hint for a string that was not found: the common near misses.
fn not_found_hint(text: &str, old: &str) -> String {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if squash(text).contains(&squash(old)) {
        return " (it matches when whitespace is ignored: copy the exact indentation and line breaks from the file)".into();
    }
    if text.to_lowercase().contains(&old.to_lowercase()) {
        return " (it matches when case is ignored)".into();
    }
    let first = old.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    match text.lines().position(|l| l.contains(first.trim())) {
        Some(i) if !first.trim().is_empty() => format!(
            " (its first line occurs at line {}, but the following lines differ; read the file again)",
            i + 1
        ),
        _ => " (read the file again to see its current text)".into(),
    }
}

/// Applies a unified diff. Each hunk must match the file exactly (context and removed lines);
/// it is looked for at the line its header names first, then anywhere after the previous hunk.
fn apply_patch(text: &str, patch: &str, path: &str) -> Result<Edited, EditError> {
    let with_headers;
    let patch = if patch.trim_start().starts_with("@@") {
        with_headers = format!("--- a\n+++ b\n{patch}");
        with_headers.as_str()
    } else {
        patch
    };
    let patch = if patch.ends_with('\n') {
        std::borrow::Cow::Borrowed(patch)
    } else {
        std::borrow::Cow::Owned(format!("{patch}\n"))
    };
    let parsed = diffy::Patch::from_str(&patch).map_err(|e| EditError::BadPatch(e.to_string()))?;
    if parsed.hunks().is_empty() {
        return Err(EditError::EmptyPatch);
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let same =
        |a: &str, b: &str| a.trim_end_matches(['\n', '\r']) == b.trim_end_matches(['\n', '\r']);
    let mut out = String::with_capacity(text.len());
    let mut cursor = 0;
    let mut first_line = None;
    for (index, hunk) in parsed.hunks().iter().enumerate() {
        let (mut old, mut new) = (Vec::new(), Vec::new());
        for line in hunk.lines() {
            match line {
                diffy::Line::Context(l) => {
                    old.push(*l);
                    new.push(*l);
                }
                diffy::Line::Delete(l) => old.push(*l),
                diffy::Line::Insert(l) => new.push(*l),
            }
        }
        let wanted = hunk.old_range().start().saturating_sub(1);
        let fits = |at: usize| {
            at + old.len() <= lines.len() && old.iter().zip(&lines[at..]).all(|(a, b)| same(a, b))
        };
        let at = if old.is_empty() {
            Some(wanted.clamp(cursor, lines.len()))
        } else if wanted >= cursor && fits(wanted) {
            Some(wanted)
        } else {
            (cursor..lines.len())
                .filter(|at| fits(*at))
                .min_by_key(|at| at.abs_diff(wanted))
        };
        let Some(at) = at else {
            return Err(EditError::HunkMismatch {
                hunk: index + 1,
                header: format!("@@ -{} +{} @@", hunk.old_range(), hunk.new_range()),
                path: path.into(),
                detail: mismatch_detail(&lines, &old, wanted),
            });
        };
        for line in &lines[cursor..at] {
            out.push_str(line);
        }
        for line in &new {
            out.push_str(line);
        }
        first_line.get_or_insert(at + 1);
        cursor = at + old.len();
    }
    for line in &lines[cursor..] {
        out.push_str(line);
    }
    let hunks = parsed.hunks().len();
    Ok(Edited {
        text: out,
        first_line: u32::try_from(first_line.unwrap_or(1)).unwrap_or(u32::MAX),
        summary: format!("applied {hunks} hunk{}", if hunks == 1 { "" } else { "s" }),
    })
}

/// Says where a hunk's old lines part from the file at the place its header names.
fn mismatch_detail(lines: &[&str], old: &[&str], wanted: usize) -> String {
    let show = |s: &str| format!("{:?}", s.trim_end_matches(['\n', '\r']));
    for (i, expected) in old.iter().enumerate() {
        let number = wanted + i + 1;
        match lines.get(wanted + i) {
            None => {
                return format!(
                    "the file has {} lines, but the hunk expects line {number} to be {}",
                    lines.len(),
                    show(expected)
                )
            }
            Some(actual)
                if actual.trim_end_matches(['\n', '\r'])
                    != expected.trim_end_matches(['\n', '\r']) =>
            {
                return format!(
                    "line {number} is {} but the hunk expects {}, and its lines occur nowhere else after the previous hunk",
                    show(actual),
                    show(expected)
                )
            }
            Some(_) => {}
        }
    }
    "its lines occur nowhere after the previous hunk".into()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::testing::{call, Workspace};
    use crate::tools::PermissionMode;

    const TEXT: &str = "fn main() {\n    log!(\"a\");\n    log!(\"b\");\n}\n";

    #[tokio::test]
    async fn replaces_an_exact_string_that_occurs_once() {
        let ws = Workspace::new();
        ws.write("m.rs", TEXT);
        let cx = ws.cx_in_mode(PermissionMode::Allow);
        let out = call(
            &EditTool,
            json!({"path": "m.rs", "old_string": "\"b\"", "new_string": "\"c\""}),
            &cx,
        )
        .await;
        assert_eq!(out.text, "Edited m.rs: replaced 1 occurrence at line 3");
        assert!(ws.read("m.rs").contains("\"c\""));
        assert_eq!(out.display.locations[0].line, Some(3));
        assert_eq!(out.display.diffs[0].old_text.as_deref(), Some(TEXT));
    }

    #[test]
    fn mismatches_are_named() {
        let err = replace(TEXT, "log!", "x", false, "m.rs").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`old_string` occurs 2 times in m.rs (at lines 2, 3); include more surrounding text to pick one, or set `replace_all`"
        );
        assert_eq!(
            replace(TEXT, "log!", "x", true, "m.rs").unwrap().summary,
            "replaced 2 occurrences"
        );
        let err = replace(TEXT, "log!(\"a\");\nlog!(\"b\");", "x", false, "m.rs").unwrap_err();
        assert!(
            err.to_string()
                .contains("matches when whitespace is ignored"),
            "{err}"
        );
        let err = replace(TEXT, "LOG!", "x", false, "m.rs").unwrap_err();
        assert!(err.to_string().contains("when case is ignored"), "{err}");
        let err = replace(TEXT, "nothing like it", "x", false, "m.rs").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("`old_string` was not found in m.rs"),
            "{err}"
        );
    }

    #[test]
    fn patches_apply_where_they_match_even_with_wrong_line_numbers() {
        let patch = "@@ -1,3 +1,3 @@\n fn main() {\n-    log!(\"a\");\n+    log!(\"z\");\n     log!(\"b\");\n";
        let edited = apply_patch(TEXT, patch, "m.rs").unwrap();
        assert_eq!(edited.text, TEXT.replace("\"a\"", "\"z\""));
        assert_eq!(edited.summary, "applied 1 hunk");

        let shifted = format!("// header\n// more\n{TEXT}");
        let edited = apply_patch(&shifted, patch, "m.rs").unwrap();
        assert!(edited.text.contains("\"z\""));
        assert_eq!(edited.first_line, 3);

        let full = "--- a/m.rs\n+++ b/m.rs\n@@ -2,2 +2,3 @@\n     log!(\"a\");\n+    log!(\"a2\");\n     log!(\"b\");\n";
        let edited = apply_patch(TEXT, full, "m.rs").unwrap();
        assert!(edited
            .text
            .contains("\"a\");\n    log!(\"a2\");\n    log!(\"b\")"));
    }

    #[test]
    fn a_hunk_that_does_not_match_says_which_line_differs() {
        let patch = "@@ -2,2 +2,2 @@\n     log!(\"a\");\n-    log!(\"q\");\n+    log!(\"r\");\n";
        let err = apply_patch(TEXT, patch, "m.rs").unwrap_err();
        assert_eq!(
            err.to_string(),
            "hunk 1 (@@ -2,2 +2,2 @@) does not match m.rs: line 3 is \"    log!(\\\"b\\\");\" but the hunk expects \"    log!(\\\"q\\\");\", and its lines occur nowhere else after the previous hunk"
        );
        assert!(matches!(
            apply_patch(TEXT, "garbage", "m.rs"),
            Err(EditError::EmptyPatch | EditError::BadPatch(_))
        ));
    }

    #[tokio::test]
    async fn argument_mistakes_and_missing_files_are_errors() {
        let ws = Workspace::new();
        ws.write("m.rs", TEXT);
        let cx = ws.cx_in_mode(PermissionMode::Allow);
        let out = call(&EditTool, json!({"path": "m.rs"}), &cx).await;
        assert!(out.text.contains("give either `patch`"), "{}", out.text);
        let out = call(
            &EditTool,
            json!({"path": "m.rs", "old_string": "a", "new_string": "a"}),
            &cx,
        )
        .await;
        assert!(out.text.contains("the same"), "{}", out.text);
        let out = call(
            &EditTool,
            json!({"path": "x.rs", "old_string": "a", "new_string": "b"}),
            &cx,
        )
        .await;
        assert!(out.text.contains("x.rs does not exist"), "{}", out.text);
        assert_eq!(ws.read("m.rs"), TEXT);
    }

    #[tokio::test]
    async fn edits_the_editor_buffer_when_it_offers_files() {
        let ws = Workspace::new();
        ws.write("m.rs", TEXT);
        let editor = ws.editor();
        editor.buffer(&ws.path("m.rs"), "let unsaved = 1;\n");
        editor.answer(crate::tools::client::PermissionAnswer::AllowOnce);
        let out = call(
            &EditTool,
            json!({"path": "m.rs", "old_string": "unsaved = 1", "new_string": "unsaved = 2"}),
            &ws.cx_with(&editor),
        )
        .await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(
            editor.calls(),
            vec!["read m.rs", "permission edit Edit m.rs", "write m.rs"]
        );
        assert_eq!(ws.read("m.rs"), "let unsaved = 2;\n");
    }
}

//! `read`: a window of a text file's lines, numbered, capped in lines and bytes. Through the
//! editor when it offers `readTextFile` (unsaved buffers count), else from disk.

use std::io::BufRead;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;

use super::file_stamps::Stamp;
use super::fs::{self, FsError};
use super::paths::Roots;
use super::private::PrivateFiles;
use super::typed::{titled, TypedTool};
use super::{ToolContext, ToolDisplay, ToolKind, ToolOutput};

pub(crate) const NAME: &str = "read";
/// Lines returned when the call gives no `limit`.
const DEFAULT_LINES: usize = 2000;
/// Bytes of file text returned at most, whatever the window.
const MAX_BYTES: usize = 50 * 1024;
/// Characters kept of one line.
const MAX_LINE_CHARS: usize = 2000;

/// The arguments of a `read` call.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    /// The file to read, absolute or relative to the working directory.
    path: String,
    /// The first line to return (1-based). Default 1.
    #[serde(default)]
    #[schemars(range(min = 1))]
    offset: Option<usize>,
    /// How many lines to return at most. Default 2000.
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ReadTool;

impl TypedTool for ReadTool {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Read a text file. Returns its lines prefixed with line \
        numbers (1-based). Long files come in windows: pass `offset` (first line) and `limit` \
        (number of lines) to read further. Relative paths are taken from the working directory.";
    type Args = ReadArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    /// Reads change nothing: they run beside their neighbours.
    fn overlaps(&self, _: &ReadArgs) -> bool {
        true
    }

    fn title(&self, args: Option<&ReadArgs>) -> String {
        titled("Read", args.map(|a| a.path.as_str()))
    }

    async fn run(&self, args: ReadArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let path = args.path.clone();
        let result = run(args, &cx).await;
        cx.name_path_as_given(Some(&path), result)
    }
}

fn fs_error(error: FsError) -> ToolOutput {
    if error.is_cancelled() {
        return ToolOutput::cancelled();
    }
    let (name, code) = match &error {
        FsError::NotFound { .. } => ("NotFound", "NOT_FOUND"),
        FsError::IsDirectory { .. } => ("IsDirectory", "IS_DIRECTORY"),
        FsError::NotText { .. } => ("NotText", "NOT_TEXT"),
        FsError::Private { .. } => ("Private", "PRIVATE"),
        _ => ("ReadFailed", "READ_FAILED"),
    };
    let hint = match &error {
        FsError::IsDirectory { .. } => "; use `glob` to list it",
        _ => "",
    };
    ToolOutput::error(name, code, format!("Error: {error}{hint}"))
}

async fn run(params: ReadArgs, cx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let cx = cx.clone();
    let target = cx.resolve(&params.path)?;
    let shown = cx.roots.display(&target.path);
    let offset = params.offset.unwrap_or(1).max(1);
    let limit = params.limit.unwrap_or(DEFAULT_LINES).max(1);
    let display = ToolDisplay::at(&target.path, u32::try_from(offset).ok());
    cx.authorize(
        ToolContext::scope_of(&target),
        cx.prompt(ToolKind::Read, format!("Read {shown}"), display.clone()),
    )
    .await?;
    refuse_credentials(&target.path)?;
    // Taken before the read: a change while it runs counts as one the model did not see.
    let stamp = Stamp::of(&target.path);
    let window = if cx.client_with(|f| f.read_text_file).is_some() {
        let text = fs::read_text(&cx, &target.path)
            .await
            .map_err(fs_error)?
            .ok_or_else(|| {
                fs_error(FsError::NotFound {
                    path: target.path.display().to_string(),
                })
            })?;
        let mut lines = text.split_inclusive('\n').map(|l| Ok(l.to_owned()));
        Window::collect(&mut lines, offset, limit)
    } else {
        let path = target.path.clone();
        let (roots, private) = (cx.roots.clone(), cx.private.clone());
        tokio::task::spawn_blocking(move || read_local(&roots, &private, &path, offset, limit))
            .await
            .map_err(|e| ToolOutput::error("ReadFailed", "READ_FAILED", format!("Error: {e}")))?
    }
    .map_err(fs_error)?;
    cx.files.saw(&target.path, stamp);
    Ok(ToolOutput::ok(window.render(&shown, offset)).with_display(display))
}

/// kin's own credential files (`kin login`'s key, `kin mcp login`'s tokens) are never read for the model, whatever the
/// permissions allow; checked once the permission is settled.
fn refuse_credentials(path: &Path) -> Result<(), ToolOutput> {
    match std::fs::metadata(path) {
        Ok(meta) if crate::config::is_credential_file(&meta) => Err(ToolOutput::error(
            "Refused",
            "REFUSED",
            format!(
                "Error: {} holds kin's credentials (its API key or an MCP server's login); kin never reads it",
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

fn read_local(
    roots: &Roots,
    private: &PrivateFiles,
    path: &Path,
    offset: usize,
    limit: usize,
) -> Result<Window, FsError> {
    let (file, _) = fs::open_file(roots, private, path)?;
    let mut reader = std::io::BufReader::new(file);
    let mut lines = std::iter::from_fn(move || {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) => Some(Ok(line)),
            Err(source) => Some(Err(source)),
        }
    })
    .map(|line| {
        let line = line.map_err(|source| FsError::Io {
            path: path.display().to_string(),
            source,
        })?;
        fs::text_of(path, line)
    });
    Window::collect(&mut lines, offset, limit)
}

/// The lines of a window and what lies around it.
struct Window {
    lines: Vec<String>,
    /// Lines in the whole file.
    total: usize,
    /// The window stopped early at the byte cap.
    byte_capped: bool,
}

impl Window {
    fn collect(
        lines: &mut dyn Iterator<Item = Result<String, FsError>>,
        offset: usize,
        limit: usize,
    ) -> Result<Self, FsError> {
        let mut window = Window {
            lines: Vec::new(),
            total: 0,
            byte_capped: false,
        };
        let mut bytes = 0;
        for line in lines {
            let line = line?;
            window.total += 1;
            let number = window.total;
            if number < offset || window.lines.len() >= limit || window.byte_capped {
                continue;
            }
            let mut text = line.trim_end_matches(['\n', '\r']).to_owned();
            if text.chars().count() > MAX_LINE_CHARS {
                text = text.chars().take(MAX_LINE_CHARS).collect();
                text.push_str(" [... line cut]");
            }
            // Each rendered line is its text plus a number column and a newline.
            let rendered = text.len() + 8;
            if bytes + rendered > MAX_BYTES && !window.lines.is_empty() {
                window.byte_capped = true;
                continue;
            }
            bytes += rendered;
            window.lines.push(text);
        }
        Ok(window)
    }

    fn render(&self, shown: &str, offset: usize) -> String {
        if self.total == 0 {
            return format!("({shown} is empty)");
        }
        if self.lines.is_empty() {
            return format!(
                "({shown} has {} lines; offset {offset} is past the end)",
                self.total
            );
        }
        let mut out = String::new();
        for (i, line) in self.lines.iter().enumerate() {
            out.push_str(&format!("{:>6}\t{line}\n", offset + i));
        }
        let last = offset + self.lines.len() - 1;
        if offset > 1 || last < self.total {
            let why = if self.byte_capped {
                format!(" (cut at {} KiB)", MAX_BYTES / 1024)
            } else {
                String::new()
            };
            out.push_str(&format!("\n(lines {offset}-{last} of {}{why}", self.total));
            if last < self.total {
                out.push_str(&format!("; read on with offset {}", last + 1));
            }
            out.push_str(")\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::testing::{call, Workspace};

    #[tokio::test]
    async fn numbers_lines_and_pages_through_long_files() {
        let ws = Workspace::new();
        let text: String = (1..=5).map(|i| format!("line {i}\n")).collect();
        ws.write("a.txt", &text);
        let out = call(&ReadTool, json!({"path": "a.txt"}), &ws.cx()).await;
        assert!(!out.is_error, "{}", out.text);
        assert_eq!(out.text.lines().next(), Some("     1\tline 1"));
        assert_eq!(out.display.locations[0].line, Some(1));

        let out = call(
            &ReadTool,
            json!({"path": "a.txt", "offset": 2, "limit": 2}),
            &ws.cx(),
        )
        .await;
        assert!(out.text.contains("     2\tline 2\n     3\tline 3\n"));
        assert!(!out.text.contains("line 4"));
        assert!(
            out.text.contains("(lines 2-3 of 5; read on with offset 4)"),
            "{}",
            out.text
        );
    }

    #[tokio::test]
    async fn caps_bytes_and_refuses_binary_missing_and_directories() {
        let ws = Workspace::new();
        let long: String = (0..10_000).map(|i| format!("{i:0>20}\n")).collect();
        ws.write("big.txt", &long);
        let out = call(&ReadTool, json!({"path": "big.txt"}), &ws.cx()).await;
        assert!(out.text.len() < MAX_BYTES + 1000);
        assert!(
            out.text.contains("cut at 50 KiB"),
            "{}",
            &out.text[out.text.len() - 200..]
        );

        std::fs::write(ws.path("bin"), b"a\0b").unwrap();
        let out = call(&ReadTool, json!({"path": "bin"}), &ws.cx()).await;
        assert_eq!(out.error.unwrap().name, "NotText");
        let out = call(&ReadTool, json!({"path": "nope"}), &ws.cx()).await;
        assert!(out.text.contains("does not exist"), "{}", out.text);
        let out = call(&ReadTool, json!({"path": "."}), &ws.cx()).await;
        assert!(out.text.contains("is a directory"), "{}", out.text);
        let out = call(&ReadTool, json!({"offset": 1}), &ws.cx()).await;
        assert!(out.text.contains("missing field `path`"), "{}", out.text);
    }

    #[tokio::test]
    async fn reads_through_the_editor_when_it_offers_files() {
        let ws = Workspace::new();
        ws.write("a.txt", "on disk\n");
        let editor = ws.editor();
        editor.buffer(&ws.path("a.txt"), "unsaved buffer\n");
        let out = call(&ReadTool, json!({"path": "a.txt"}), &ws.cx_with(&editor)).await;
        assert!(out.text.contains("unsaved buffer"), "{}", out.text);
        assert_eq!(editor.calls(), vec!["read a.txt"]);
    }

    #[tokio::test]
    async fn outside_the_roots_asks_and_a_rejection_is_an_error() {
        let ws = Workspace::new();
        std::fs::write(ws.outside("secret"), "s\n").unwrap();
        let editor = ws.editor();
        editor.answer(crate::tools::client::PermissionAnswer::RejectOnce);
        let out = call(
            &ReadTool,
            json!({"path": "../outside/secret"}),
            &ws.cx_with(&editor),
        )
        .await;
        assert!(out.is_error);
        assert!(out.text.contains("rejected"), "{}", out.text);
        assert_eq!(
            editor.calls(),
            vec!["permission read Read ../outside/secret".to_owned()]
                .into_iter()
                .map(|s| s.replace(
                    "../outside/secret",
                    &ws.outside("secret").display().to_string()
                ))
                .collect::<Vec<_>>()
        );

        // Without an editor there is nobody to ask: refused with a clear error.
        let out = call(&ReadTool, json!({"path": ws.outside("secret")}), &ws.cx()).await;
        assert!(
            out.text.contains("needs the user's permission"),
            "{}",
            out.text
        );
    }
}

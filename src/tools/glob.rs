//! `glob`: lists files and directories under a directory whose relative paths match a glob,
//! honouring `.gitignore` (and `.ignore`) files, over the confined walk of [`super::walk`].
//! Also the search base `grep` uses.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::confined;
use super::fs::FsError;
use super::paths::Roots;
use super::private::PrivateFiles;
use super::typed::{titled, TypedTool};
use super::walk::{Kind, Walk};
use super::{ToolContext, ToolDisplay, ToolKind, ToolOutput};

pub(crate) const NAME: &str = "glob";
const DEFAULT_LIMIT: usize = 500;

/// The arguments of a `glob` call.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct GlobArgs {
    /// Glob matched against paths relative to `path`, e.g. `*`, `**/*.rs`, `docs/*.md`.
    pattern: String,
    /// The directory to search. Default: the working directory.
    #[serde(default)]
    path: Option<String>,
    /// The most entries to return. Default 500.
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GlobTool;

impl TypedTool for GlobTool {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "List files and directories whose paths (relative to \
        `path`, default the working directory) match a glob: `*` stays within one directory, \
        `**` crosses directories, e.g. `*` lists the top level, `src/**/*.rs` finds Rust files \
        under src. Directories end with `/`. Files ignored by .gitignore are left out.";
    type Args = GlobArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    /// Reads change nothing: they run beside their neighbours.
    fn overlaps(&self, _: &GlobArgs) -> bool {
        true
    }

    fn title(&self, args: Option<&GlobArgs>) -> String {
        titled("Find", args.map(|a| a.pattern.as_str()))
    }

    async fn run(&self, args: GlobArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        run(args, cx).await
    }
}

/// Resolves the optional directory argument and checks it may be searched.
pub(crate) async fn search_base(
    cx: &ToolContext,
    path: Option<&str>,
) -> Result<(PathBuf, String), ToolOutput> {
    let target = cx.resolve(path.unwrap_or("."))?;
    let shown = cx.roots.display(&target.path);
    // Decided before the path is looked at: an outside path's existence is only told once
    // the search there is allowed.
    cx.authorize(
        ToolContext::scope_of(&target),
        cx.prompt(
            ToolKind::Search,
            format!("Search {shown}"),
            ToolDisplay::at(&target.path, None),
        ),
    )
    .await?;
    if !target.path.exists() {
        return Err(ToolOutput::error(
            "NotFound",
            "NOT_FOUND",
            format!("Error: {shown} does not exist"),
        ));
    }
    Ok((target.path, shown))
}

async fn run(params: GlobArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
    let matcher = globset::GlobBuilder::new(&params.pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| {
            ToolOutput::error(
                "InvalidPattern",
                "INVALID_PATTERN",
                format!("Error: invalid glob {:?}: {e}", params.pattern),
            )
        })?
        .compile_matcher();
    let (base, _) = search_base(&cx, params.path.as_deref()).await?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).max(1);
    let (roots, private) = (cx.roots.clone(), cx.private.clone());
    let cancel = cx.cancel.clone();
    let display = ToolDisplay::at(&base, None);
    let found = tokio::task::spawn_blocking(move || {
        list(&roots, &private, &base, &matcher, limit, &cancel)
    })
    .await
    .map_err(|e| ToolOutput::error("SearchFailed", "SEARCH_FAILED", format!("Error: {e}")))??;
    let mut text = found.entries.join("\n");
    if found.entries.is_empty() {
        text = format!("No paths match {:?}.", params.pattern);
    } else if found.total > found.entries.len() {
        text.push_str(&format!(
            "\n(showing the first {} of {} matches; narrow the pattern)",
            found.entries.len(),
            found.total
        ));
    }
    Ok(ToolOutput::ok(text).with_display(display))
}

struct Found {
    entries: Vec<String>,
    total: usize,
}

fn list(
    roots: &Roots,
    private: &PrivateFiles,
    base: &Path,
    matcher: &globset::GlobMatcher,
    limit: usize,
    cancel: &CancellationToken,
) -> Result<Found, ToolOutput> {
    let mut found = Found {
        entries: Vec::new(),
        total: 0,
    };
    let walk = match Walk::open(roots, private, base) {
        Ok(walk) => walk,
        Err(error) => return walk_failed(roots, base, error).map(|()| found),
    };
    walk.run(cancel, |entry| {
        if entry.relative.as_os_str().is_empty() || !matcher.is_match(entry.relative) {
            return ControlFlow::Continue(());
        }
        found.total += 1;
        if found.entries.len() < limit {
            let mut shown = roots.display(entry.path);
            if entry.kind == Kind::Dir {
                shown.push('/');
            }
            found.entries.push(shown);
        }
        ControlFlow::Continue(())
    });
    Ok(found)
}

/// When the search base cannot be opened: a symlink swapped in on the way is an error; anything
/// else (an unreadable directory) finds nothing, as before.
pub(crate) fn walk_failed(
    roots: &Roots,
    base: &Path,
    error: std::io::Error,
) -> Result<(), ToolOutput> {
    if confined::is_escape(&error) {
        let path = roots.display(base);
        return Err(ToolOutput::error(
            "SearchFailed",
            "SEARCH_FAILED",
            format!("Error: {}", FsError::Escaped { path }),
        ));
    }
    tracing::debug!(%error, path = %base.display(), "the search base could not be opened");
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::testing::{call, Workspace};

    #[tokio::test]
    async fn lists_matches_in_order_and_honours_gitignore() {
        let ws = Workspace::new();
        ws.write(".gitignore", "target/\n*.log\n");
        ws.write("src/main.rs", "");
        ws.write("src/lib/util.rs", "");
        ws.write("target/debug/x.rs", "");
        ws.write("run.log", "");
        ws.write("README.md", "");
        let out = call(&GlobTool, json!({"pattern": "*"}), &ws.cx()).await;
        assert_eq!(out.text, ".gitignore\nREADME.md\nsrc/");
        let out = call(&GlobTool, json!({"pattern": "**/*.rs"}), &ws.cx()).await;
        assert_eq!(out.text, "src/lib/util.rs\nsrc/main.rs");
        let out = call(
            &GlobTool,
            json!({"pattern": "*.rs", "path": "src"}),
            &ws.cx(),
        )
        .await;
        assert_eq!(out.text, "src/main.rs");
        let out = call(&GlobTool, json!({"pattern": "**", "limit": 2}), &ws.cx()).await;
        assert!(
            out.text
                .ends_with("(showing the first 2 of 6 matches; narrow the pattern)"),
            "{}",
            out.text
        );
        let out = call(&GlobTool, json!({"pattern": "*.none"}), &ws.cx()).await;
        assert_eq!(out.text, "No paths match \"*.none\".");
        let out = call(&GlobTool, json!({"pattern": "[", "path": "src"}), &ws.cx()).await;
        assert!(out.text.starts_with("Error: invalid glob"), "{}", out.text);
    }

    #[tokio::test]
    async fn searching_outside_the_roots_needs_permission() {
        let ws = Workspace::new();
        let out = call(&GlobTool, json!({"pattern": "*", "path": ".."}), &ws.cx()).await;
        assert!(
            out.text.contains("needs the user's permission"),
            "{}",
            out.text
        );
    }
}

//! `grep`: searches file contents for a regular expression with the ripgrep library crates
//! (`grep-regex`, `grep-searcher`), over the gitignore-aware confined walk of [`super::walk`];
//! each file is opened through the handle of the directory it was listed from. Binary files
//! are skipped.

use std::ops::ControlFlow;
use std::path::Path;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::glob::{search_base, walk_failed};
use super::paths::Roots;
use super::private::PrivateFiles;
use super::typed::{titled, TypedTool};
use super::walk::{Kind, Walk};
use super::{ToolContext, ToolDisplay, ToolKind, ToolOutput};

pub(crate) const NAME: &str = "grep";
const DEFAULT_LIMIT: usize = 200;
/// Characters of a matching line shown.
const MAX_LINE_CHARS: usize = 300;

/// The arguments of a `grep` call.
#[derive(Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub(crate) struct GrepArgs {
    /// The regular expression to look for.
    pattern: String,
    /// A file or directory to search. Default: the working directory.
    #[serde(default)]
    path: Option<String>,
    /// Only search files matching this glob; without a `/` it matches file names, e.g. `*.rs`.
    #[serde(default)]
    glob: Option<String>,
    /// Match case-insensitively. Default false.
    #[serde(default)]
    ignore_case: bool,
    /// The most matching lines to return. Default 200.
    #[serde(default)]
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GrepTool;

impl TypedTool for GrepTool {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Search file contents for a regular expression (Rust \
        regex syntax). Returns matching lines as `path:line:text`. Searches `path` (a file or a \
        directory, default the working directory), skipping binary files and files ignored by \
        .gitignore; `glob` filters the files searched (e.g. `*.rs`).";
    type Args = GrepArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Search
    }

    /// Reads change nothing: they run beside their neighbours.
    fn overlaps(&self, _: &GrepArgs) -> bool {
        true
    }

    fn title(&self, args: Option<&GrepArgs>) -> String {
        titled("Search for", args.map(|a| a.pattern.as_str()))
    }

    async fn run(&self, args: GrepArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        run(args, cx).await
    }
}

async fn run(params: GrepArgs, cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(params.ignore_case)
        .build(&params.pattern)
        .map_err(|e| {
            ToolOutput::error(
                "InvalidPattern",
                "INVALID_PATTERN",
                format!("Error: invalid regular expression: {e}"),
            )
        })?;
    let filter = match &params.glob {
        None => None,
        Some(glob) => Some(
            globset::Glob::new(glob)
                .map_err(|e| {
                    ToolOutput::error(
                        "InvalidPattern",
                        "INVALID_PATTERN",
                        format!("Error: invalid glob {glob:?}: {e}"),
                    )
                })?
                .compile_matcher(),
        ),
    };
    let by_name = params.glob.as_deref().is_some_and(|g| !g.contains('/'));
    let (base, _) = search_base(&cx, params.path.as_deref()).await?;
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).max(1);
    let (roots, private) = (cx.roots.clone(), cx.private.clone());
    let cancel = cx.cancel.clone();
    let display = ToolDisplay::at(&base, None);
    let search = Search {
        matcher,
        filter,
        by_name,
        limit,
    };
    let found = tokio::task::spawn_blocking(move || search.run(&base, &cancel, &roots, &private))
        .await
        .map_err(|e| ToolOutput::error("SearchFailed", "SEARCH_FAILED", format!("Error: {e}")))??;
    let mut text = found.lines.join("\n");
    if found.lines.is_empty() {
        text = format!("No matches for {:?}.", params.pattern);
    } else if found.more {
        text.push_str(&format!(
            "\n(stopped after {} matching lines; narrow the search)",
            found.lines.len()
        ));
    }
    Ok(ToolOutput::ok(text).with_display(display))
}

struct Search {
    matcher: grep_regex::RegexMatcher,
    filter: Option<globset::GlobMatcher>,
    by_name: bool,
    limit: usize,
}

struct Found {
    lines: Vec<String>,
    more: bool,
}

impl Search {
    fn wanted(&self, path: &Path, relative: &Path) -> bool {
        let Some(filter) = &self.filter else {
            return true;
        };
        if self.by_name {
            path.file_name().is_some_and(|name| filter.is_match(name))
        } else {
            filter.is_match(relative)
        }
    }

    fn run(
        &self,
        base: &Path,
        cancel: &CancellationToken,
        roots: &Roots,
        private: &PrivateFiles,
    ) -> Result<Found, ToolOutput> {
        let mut found = Found {
            lines: Vec::new(),
            more: false,
        };
        let walk = match Walk::open(roots, private, base) {
            Ok(walk) => walk,
            Err(error) => return walk_failed(roots, base, error).map(|()| found),
        };
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .build();
        walk.run(cancel, |entry| {
            if entry.kind != Kind::File || !self.wanted(entry.path, entry.relative) {
                return ControlFlow::Continue(());
            }
            // Opened through the handle the walk listed it from, never following a symlink:
            // a file swapped for a link since cannot lead the search out of the roots.
            let file = match entry.open() {
                Ok(file) if file.metadata().is_ok_and(|meta| meta.is_file()) => file,
                Ok(_) => return ControlFlow::Continue(()),
                Err(error) => {
                    tracing::debug!(%error, "grep skipped a file");
                    return ControlFlow::Continue(());
                }
            };
            let shown = roots.display(entry.path);
            let result = searcher.search_file(
                &self.matcher,
                &file,
                UTF8(|number, line| {
                    if found.lines.len() >= self.limit {
                        found.more = true;
                        return Ok(false);
                    }
                    let mut line = line.trim_end_matches(['\n', '\r']).to_owned();
                    if line.chars().count() > MAX_LINE_CHARS {
                        line = line.chars().take(MAX_LINE_CHARS).collect();
                        line.push_str(" [... line cut]");
                    }
                    found.lines.push(format!("{shown}:{number}:{line}"));
                    Ok(true)
                }),
            );
            if let Err(error) = result {
                tracing::debug!(%error, path = %entry.path.display(), "grep skipped a file");
            }
            if found.more {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::testing::{call, Workspace};

    #[tokio::test]
    async fn finds_lines_in_path_order_skipping_ignored_and_binary_files() {
        let ws = Workspace::new();
        ws.write(".gitignore", "out/\n");
        ws.write("b.rs", "fn beta() {}\n// TODO later\n");
        ws.write("a.rs", "// todo: lower\nfn alpha() {}\n");
        ws.write("out/gen.rs", "// TODO generated\n");
        std::fs::write(ws.path("blob.bin"), b"TODO\0\x01").unwrap();
        let out = call(&GrepTool, json!({"pattern": "TODO"}), &ws.cx()).await;
        assert_eq!(out.text, "b.rs:2:// TODO later");
        let out = call(
            &GrepTool,
            json!({"pattern": "todo", "ignore_case": true}),
            &ws.cx(),
        )
        .await;
        assert_eq!(out.text, "a.rs:1:// todo: lower\nb.rs:2:// TODO later");
        let out = call(
            &GrepTool,
            json!({"pattern": "fn \\w+", "glob": "a.*"}),
            &ws.cx(),
        )
        .await;
        assert_eq!(out.text, "a.rs:2:fn alpha() {}");
        let out = call(
            &GrepTool,
            json!({"pattern": "fn", "path": "b.rs"}),
            &ws.cx(),
        )
        .await;
        assert_eq!(out.text, "b.rs:1:fn beta() {}");
        let out = call(&GrepTool, json!({"pattern": ".", "limit": 1}), &ws.cx()).await;
        assert!(
            out.text
                .ends_with("(stopped after 1 matching lines; narrow the search)"),
            "{}",
            out.text
        );
        let out = call(&GrepTool, json!({"pattern": "("}), &ws.cx()).await;
        assert!(
            out.text.starts_with("Error: invalid regular expression"),
            "{}",
            out.text
        );
        let out = call(&GrepTool, json!({"pattern": "zzz"}), &ws.cx()).await;
        assert_eq!(out.text, "No matches for \"zzz\".");
    }
}

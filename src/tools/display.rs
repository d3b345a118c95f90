//! What an editor shows about a tool call besides its text: the files it touched (locations),
//! the changes it made (diffs) and the terminal it ran in. Kept in the `tool/result` event's
//! `meta`, so live updates and `session/load` replays show the same thing. Knows nothing of ACP.

use serde::{Deserialize, Serialize};

/// Diffs bigger than this (old plus new text) are cut down to their changed hunks.
const FULL_DIFF_BYTES: usize = 64 * 1024;
/// Hunks kept for one file when the diff is cut down.
const MAX_HUNKS: usize = 50;
/// Lines of unchanged context around each kept hunk.
const HUNK_CONTEXT: usize = 3;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolDisplay {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) locations: Vec<Location>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) diffs: Vec<FileDiff>,
    /// The editor terminal the command ran in (only valid during the live turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) terminal_id: Option<String>,
    /// Not shown as a tool call at all (`update_plan`: editors are shown a plan instead).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) hidden: bool,
}

impl ToolDisplay {
    pub(crate) fn is_empty(&self) -> bool {
        self.locations.is_empty()
            && self.diffs.is_empty()
            && self.terminal_id.is_none()
            && !self.hidden
    }

    pub(crate) fn at(path: &std::path::Path, line: Option<u32>) -> Self {
        Self {
            locations: vec![Location::new(path, line)],
            ..Self::default()
        }
    }

    /// The display as the `meta` object of a `tool/result` (None when there is nothing).
    pub(crate) fn to_meta(&self) -> Option<serde_json::Value> {
        if self.is_empty() {
            return None;
        }
        serde_json::to_value(self).ok()
    }

    /// Reads the display back from a `tool/result` `meta`; unknown shapes give an empty one.
    pub(crate) fn from_meta(meta: Option<&serde_json::Value>) -> Self {
        meta.and_then(|meta| serde_json::from_value(meta.clone()).ok())
            .unwrap_or_default()
    }
}

/// A permission or tool-call title as it may be shown: control characters (newlines, terminal
/// escapes) and bidi overrides from paths, commands or the model made visible.
pub(crate) fn safe_title(title: &str) -> String {
    crate::text::visible(title).into_owned()
}

/// A file (and line, 1-based) a tool call touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Location {
    /// Absolute path.
    pub(crate) path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u32>,
}

impl Location {
    pub(crate) fn new(path: &std::path::Path, line: Option<u32>) -> Self {
        Self {
            path: path.to_string_lossy().into_owned(),
            line,
        }
    }
}

/// A change to one file: the text before (None for a new file) and after. For large files only
/// the changed regions are kept, one `FileDiff` per region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileDiff {
    /// Absolute path.
    pub(crate) path: String,
    pub(crate) old_text: Option<String>,
    pub(crate) new_text: String,
}

/// The diffs that show `old` (None: the file is new) becoming `new` at `path`.
pub(crate) fn file_diffs(path: &std::path::Path, old: Option<&str>, new: &str) -> Vec<FileDiff> {
    let path_text = path.to_string_lossy().into_owned();
    let whole = |old: Option<&str>| {
        vec![FileDiff {
            path: path_text.clone(),
            old_text: old.map(str::to_owned),
            new_text: new.to_owned(),
        }]
    };
    let Some(old) = old else {
        return whole(None);
    };
    if old.len() + new.len() <= FULL_DIFF_BYTES {
        return whole(Some(old));
    }
    let patch = diffy::DiffOptions::new()
        .set_context_len(HUNK_CONTEXT)
        .create_patch(old, new);
    patch
        .hunks()
        .iter()
        .take(MAX_HUNKS)
        .map(|hunk| {
            let (mut before, mut after) = (String::new(), String::new());
            for line in hunk.lines() {
                match line {
                    diffy::Line::Context(text) => {
                        before.push_str(text);
                        after.push_str(text);
                    }
                    diffy::Line::Delete(text) => before.push_str(text),
                    diffy::Line::Insert(text) => after.push_str(text),
                }
            }
            FileDiff {
                path: path_text.clone(),
                old_text: Some(before),
                new_text: after,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn small_changes_keep_whole_texts_and_large_ones_keep_hunks() {
        let small = file_diffs(Path::new("/w/a"), Some("x\n"), "y\n");
        assert_eq!(small.len(), 1);
        assert_eq!(small[0].old_text.as_deref(), Some("x\n"));
        assert_eq!(file_diffs(Path::new("/w/a"), None, "y")[0].old_text, None);

        let old: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "LINE TEN\n");
        let big = file_diffs(Path::new("/w/a"), Some(&old), &new);
        assert_eq!(big.len(), 1);
        assert!(big[0].old_text.as_deref().unwrap().contains("line 10\n"));
        assert!(big[0].new_text.contains("LINE TEN\n"));
        assert!(big[0].new_text.len() < 200);
    }

    #[test]
    fn titles_show_newlines_escapes_and_bidi_overrides() {
        assert_eq!(safe_title("Read /w/a.txt"), "Read /w/a.txt");
        assert_eq!(
            safe_title("Read /w/x\nEdit /etc/passwd"),
            "Read /w/x\\nEdit /etc/passwd"
        );
        assert_eq!(
            safe_title("Write /w/\u{202E}txt.exe"),
            "Write /w/\\u{202e}txt.exe"
        );
        assert_eq!(safe_title("\u{1b}]0;x\u{7}"), "\\u{1b}]0;x\\u{7}");
    }

    #[test]
    fn meta_round_trips_and_empty_is_none() {
        assert_eq!(ToolDisplay::default().to_meta(), None);
        let display = ToolDisplay {
            terminal_id: Some("t1".into()),
            ..ToolDisplay::at(Path::new("/w/a"), Some(3))
        };
        let meta = display.to_meta().unwrap();
        assert_eq!(meta["locations"][0]["line"], 3);
        assert_eq!(ToolDisplay::from_meta(Some(&meta)), display);
        assert_eq!(
            ToolDisplay::from_meta(Some(&serde_json::json!("junk"))),
            ToolDisplay::default()
        );
    }
}

//! Making text from outside (the model, files, child agents, endpoints) safe to show: control
//! characters and bidi overrides made visible, and long text cut with a note saying how much.
//! Uses nothing else of kin.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters that reorder what follows them on screen (bidi embeddings, overrides, isolates
/// and marks): shown escaped so a title reads in the order it runs.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

fn needs_escape(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `text` with every control character (terminal escapes, newlines, tabs, C1 controls) and
/// every bidi control written as a visible escape: `\n`, `\t`, `\r`, else `\u{..}`.
pub(crate) fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` for a terminal that shows it as the answer: as [`visible`], but newlines and tabs
/// (the answer's own layout) are kept.
pub(crate) fn visible_lines(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| needs_escape(c) && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        for (m, cell) in line.split('\t').enumerate() {
            if m > 0 {
                out.push('\t');
            }
            out.push_str(&visible(cell));
        }
    }
    Cow::Owned(out)
}

/// The longest start of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` itself if it has at most `max` bytes, else its start followed by a note saying how
/// many bytes were cut, e.g. `[kin: 1200 of 5000 bytes cut]`.
pub(crate) fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let kept = prefix(text, max);
    Cow::Owned(format!(
        "{kept}\n[kin: {} of {} bytes cut]",
        text.len() - kept.len(),
        text.len()
    ))
}

/// Text from a server (an error description, a question) for one line on a terminal or in a
/// title: cut to `max` bytes, with a note saying how much was cut, and made [`visible`].
pub(crate) fn visible_capped(text: &str, max: usize) -> String {
    let kept = prefix(text, max);
    let mut shown = visible(kept).into_owned();
    if kept.len() < text.len() {
        let _ = write!(
            shown,
            " [kin: {} of {} bytes cut]",
            text.len() - kept.len(),
            text.len()
        );
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_is_cut_and_escaped() {
        assert_eq!(visible_capped("plain", 10), "plain");
        let shown = visible_capped(&format!("\u{1b}]0;t\u{7}{}", "x".repeat(100)), 10);
        assert_eq!(shown, "\\u{1b}]0;t\\u{7}xxxx [kin: 96 of 106 bytes cut]");
    }

    #[test]
    fn answer_text_keeps_its_lines_and_loses_its_escapes() {
        assert_eq!(visible_lines("a\n\tb"), "a\n\tb");
        assert_eq!(
            visible_lines("\u{1b}]0;owned\u{7}x\r\n"),
            "\\u{1b}]0;owned\\u{7}x\\r\n"
        );
    }

    #[test]
    fn controls_and_bidi_overrides_become_visible() {
        assert!(matches!(visible("plain ünïcode"), Cow::Borrowed(_)));
        assert_eq!(
            visible("\u{1b}[31mred\u{1b}[0m\n\tx\r"),
            "\\u{1b}[31mred\\u{1b}[0m\\n\\tx\\r"
        );
        assert_eq!(visible("a\u{7}\u{9b}b"), "a\\u{7}\\u{9b}b");
        assert_eq!(visible("evil\u{202E}txt.sh"), "evil\\u{202e}txt.sh");
        assert_eq!(visible("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
    }

    #[test]
    fn bounded_text_says_how_much_was_cut() {
        assert!(matches!(bounded("short", 10), Cow::Borrowed("short")));
        let cut = bounded("0123456789", 4);
        assert_eq!(cut, "0123\n[kin: 6 of 10 bytes cut]");
        // Never inside a character.
        assert_eq!(prefix("éé", 3), "é");
        assert_eq!(bounded("ééé", 3), "é\n[kin: 4 of 6 bytes cut]");
    }
}

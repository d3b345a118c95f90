//! The long strings of a long line, taken out before the line is parsed.
//!
//! A pasted image comes as megabytes of base64 in one JSON string. Parsed into a `Value` it is
//! copied, and the model request built from it copies it again. So the long strings that need
//! no unescaping (printable ASCII, no `\`), found and hashed while the line was read
//! (`string_scan`), each become a short marker string, and the shortened line is parsed as any
//! other. A handler that asked for them ([`super::Handler::keeps_long_strings`]) takes a
//! marker's string as a slice of the line itself, with its hash ([`LongStrings::take`]);
//! everywhere else the strings are put back ([`LongStrings::restore`]) before anyone sees the
//! message, which then reads as the line did.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use serde_json::Value;

use super::message::{classify_with, Incoming, Rejected};
use super::string_scan::Found;
use crate::sync::lock;

/// Lines shorter than this are parsed as they are.
const LIFT_FROM: usize = 1024 * 1024;
/// How a marker starts, as parsed: a NUL (which a JSON text can only hold escaped, and an
/// editor never sends) and a name. Its number says which string it stands for.
const MARKER: &str = "\u{0}kin-long-string:";
/// The same, as written in the shortened line.
const MARKER_JSON: &str = "\\u0000kin-long-string:";

/// The strings taken out of one line, each taken at most once (so a marker repeated in the
/// line cannot make one string many). Cheap to clone; clones share the strings.
#[derive(Clone, Default, Debug)]
pub(crate) struct LongStrings(Arc<Mutex<Vec<Option<LongString>>>>);

/// One string taken out of a line.
#[derive(Debug, Clone)]
pub(crate) struct LongString {
    /// Its text (printable ASCII), a slice of the line.
    pub(crate) text: Bytes,
    /// The BLAKE3 hash of `text`.
    pub(crate) hash: blake3::Hash,
}

/// A long line with its long strings taken out.
struct Lifted {
    /// The line, each long string replaced by its marker.
    line: Vec<u8>,
    strings: LongStrings,
}

/// Takes the strings `found` in `line` (by `string_scan`) out of it, but for object keys;
/// `None` when the line is short or none is left.
fn lift(line: &Bytes, found: &[Found]) -> Option<Lifted> {
    if line.len() < LIFT_FROM {
        return None;
    }
    let mut short = Vec::new();
    let mut strings = Vec::new();
    // `line[..copied]` is in `short` already.
    let mut copied = 0;
    for string in found.iter().filter(|s| s.end < line.len()) {
        if is_key(&line[string.end + 1..]) {
            continue;
        }
        short.extend_from_slice(&line[copied..string.start]);
        short.extend_from_slice(format!("{MARKER_JSON}{}", strings.len()).as_bytes());
        strings.push(Some(LongString {
            text: line.slice(string.start..string.end),
            hash: string.hash,
        }));
        copied = string.end;
    }
    if strings.is_empty() {
        return None;
    }
    short.extend_from_slice(&line[copied..]);
    Some(Lifted {
        line: short,
        strings: LongStrings(Arc::new(Mutex::new(strings))),
    })
}

/// Whether the string that ended just before `after` is an object key.
fn is_key(after: &[u8]) -> bool {
    after
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .is_some_and(|&b| b == b':')
}

/// Classifies `line`, the long strings `found` in it taken out first: put back at once,
/// unless it is a request of a method `keeps` names, whose strings then come with it. A line
/// whose shortened form does not classify is classified whole, so its error is its own.
pub(crate) fn classify(
    line: &Bytes,
    found: &[Found],
    keeps: impl Fn(&str) -> bool,
) -> (Result<Option<Incoming>, Box<Rejected>>, LongStrings) {
    if let Some(lifted) = lift(line, found) {
        let mut kept = LongStrings::default();
        let classified = classify_with(&lifted.line, |message| {
            let kept_here = message.get("id").is_some()
                && message
                    .get("method")
                    .and_then(Value::as_str)
                    .is_some_and(&keeps);
            match kept_here {
                true => kept = lifted.strings.clone(),
                false => lifted.strings.restore(message),
            }
        });
        if classified.is_ok() {
            return (classified, kept);
        }
    }
    (super::classify(line), LongStrings::default())
}

impl LongStrings {
    /// The string `text` marks, taken out; `None` when `text` is no marker of these strings
    /// (or its string was taken already).
    pub(crate) fn take(&self, text: &str) -> Option<LongString> {
        let at = index(text)?;
        lock(&self.0).get_mut(at)?.take()
    }

    /// The length of the string `text` marks, if it marks one still here.
    pub(crate) fn len_of(&self, text: &str) -> Option<usize> {
        let at = index(text)?;
        lock(&self.0)
            .get(at)?
            .as_ref()
            .map(|string| string.text.len())
    }

    /// Puts each string still here back in place of its marker in `value`.
    pub(crate) fn restore(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                if let Some(string) = self.take(text) {
                    // Printable ASCII (see `string_scan`), so always UTF-8.
                    *text = String::from_utf8_lossy(&string.text).into_owned();
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.restore(item)),
            Value::Object(map) => map.values_mut().for_each(|item| self.restore(item)),
            _ => {}
        }
    }
}

fn index(text: &str) -> Option<usize> {
    text.strip_prefix(MARKER)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::string_scan::{Scanner, LONG};
    use super::*;

    fn long(fill: char, len: usize) -> String {
        std::iter::repeat_n(fill, len).collect()
    }

    /// `line` scanned as it would be read, then lifted.
    fn scan_and_lift(line: &str) -> (Bytes, Option<Lifted>) {
        let line = Bytes::from(line.to_owned());
        let mut scanner = Scanner::default();
        scanner.feed(&line);
        let lifted = lift(&line, &scanner.finish());
        (line, lifted)
    }

    #[test]
    fn long_plain_strings_are_taken_out_and_read_the_same_once_put_back() {
        let data = long('A', LIFT_FROM);
        let escaped = format!("{}\\n", long('b', LONG));
        let line = serde_json::json!({
            "method": "m", "short": "x", "data": data, "escaped": escaped,
            "list": [long('C', LONG)], "tab": format!("{}\t", long('d', LONG)),
        })
        .to_string();
        let (line, lifted) = scan_and_lift(&line);
        let lifted = lifted.unwrap();
        assert!(
            lifted.line.len() < 4 * LONG,
            "only what needs escaping stays"
        );
        let mut parsed: Value = serde_json::from_slice(&lifted.line).unwrap();
        let marker = parsed["data"].as_str().unwrap().to_owned();
        assert_eq!(lifted.strings.len_of(&marker), Some(data.len()));
        lifted.strings.restore(&mut parsed);
        let whole: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(parsed, whole);
        assert!(lifted.strings.take(&marker).is_none(), "each is taken once");
    }

    #[test]
    fn a_taken_string_is_a_slice_of_the_line_with_its_hash() {
        let data = long('Q', LIFT_FROM);
        let (line, lifted) = scan_and_lift(&format!(r#"{{"a":"{data}"}}"#));
        let lifted = lifted.unwrap();
        let parsed: Value = serde_json::from_slice(&lifted.line).unwrap();
        let taken = lifted.strings.take(parsed["a"].as_str().unwrap()).unwrap();
        assert_eq!(taken.text, data.as_bytes());
        assert_eq!(taken.text.as_ptr(), line[6..].as_ptr(), "not copied");
        assert_eq!(taken.hash, blake3::hash(data.as_bytes()));
    }

    #[test]
    fn keys_and_short_lines_are_left_alone() {
        let key = long('k', LIFT_FROM);
        assert!(scan_and_lift(&format!(r#"{{"{key}" : 1}}"#)).1.is_none());
        let short = format!(r#"{{"a":"{}"}}"#, long('A', LONG));
        assert!(scan_and_lift(&short).1.is_none());
    }

    #[test]
    fn text_that_is_no_marker_of_these_strings_stays_as_it_is() {
        let strings = LongStrings::default();
        let mut value = serde_json::json!({"a": format!("{MARKER}0"), "b": "plain"});
        let before = value.clone();
        strings.restore(&mut value);
        assert_eq!(value, before);
        assert!(strings.take(&format!("{MARKER}x")).is_none());
    }
}

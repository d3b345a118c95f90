//! Tool-call arguments as a model sends them: a JSON object in text, which small models get
//! wrong (cut off at the output limit, a raw newline inside a string). [`parse`] reads what
//! can be read; [`sendable`] is the form sent back to the model in later requests, which every
//! server parses (llama-server answers HTTP 500 to a history whose arguments it cannot parse,
//! so one bad call would fail every later request). The log keeps what the model sent.

use std::borrow::Cow;

use serde_json::Value;

/// The arguments `text` as JSON: empty text is `{}`, and raw control characters inside strings
/// are taken as the escapes they mean. Not necessarily an object.
pub(crate) fn parse(text: &str) -> Result<Value, serde_json::Error> {
    match text.trim() {
        "" => Ok(Value::Object(Default::default())),
        text => serde_json::from_str::<Value>(text).or_else(|error| {
            escape_raw_controls(text)
                .and_then(|fixed| serde_json::from_str(&fixed).ok())
                .ok_or(error)
        }),
    }
}

/// The arguments as sent back to the model: `text` itself when it is a JSON object, repaired
/// when [`parse`] can read it as one, else `{}` (the call's error result says why).
pub(crate) fn sendable(text: &str) -> Cow<'_, str> {
    let is_object = |text: &str| matches!(serde_json::from_str(text), Ok(Value::Object(_)));
    if is_object(text) {
        return Cow::Borrowed(text);
    }
    match escape_raw_controls(text) {
        Some(fixed) if is_object(&fixed) => Cow::Owned(fixed),
        _ => Cow::Borrowed("{}"),
    }
}

/// `text` with the raw control characters inside its JSON strings escaped (`\n`, `\t`,
/// `\u0001`...), or `None` when it has none there. Outside strings nothing changes.
fn escape_raw_controls(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    for c in text.chars() {
        if in_string && !escaped && c.is_control() && (c as u32) < 0x20 {
            changed = true;
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                other => out.push_str(&format!("\\u{:04x}", other as u32)),
            }
            continue;
        }
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_newlines_inside_strings_are_escaped_and_nothing_else() {
        let raw = "{\"content\": \"line one\nline\ttwo\", \"n\":\n 1}";
        let fixed = escape_raw_controls(raw).unwrap();
        let value: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(value["content"], "line one\nline\ttwo");
        assert_eq!(value["n"], 1);
        assert_eq!(escape_raw_controls("{\"a\": \"b\\n\"}"), None);
        assert_eq!(
            escape_raw_controls("{\"a\": \"quote \\\" then\nnewline\"}").as_deref(),
            Some("{\"a\": \"quote \\\" then\\nnewline\"}")
        );
    }

    #[test]
    fn what_is_sent_back_always_parses_as_an_object() {
        assert_eq!(sendable("{\"a\": 1}"), "{\"a\": 1}", "kept byte for byte");
        assert_eq!(sendable(""), "{}");
        assert_eq!(sendable("  "), "{}");
        assert_eq!(sendable("{\"path\": \"a.rs\", \"content\": \"one"), "{}");
        assert_eq!(sendable("[1, 2]"), "{}");
        assert_eq!(sendable("\"text\""), "{}");
        let repaired = sendable("{\"content\": \"one\ntwo\"}");
        let value: Value = serde_json::from_str(&repaired).unwrap();
        assert_eq!(value["content"], "one\ntwo");
    }
}

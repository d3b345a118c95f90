//! Help for a model that got a call slightly wrong (small local models often do): the tool
//! name closest to an unknown one, and arguments whose strings hold raw control characters
//! (a literal newline inside a JSON string), which strict JSON refuses but whose meaning is
//! plain.

/// The name in `names` closest to `wanted` (fewest single-character edits, case ignored),
/// when it is close enough to be a likely slip.
pub(crate) fn closest<'a>(wanted: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let wanted = wanted.to_ascii_lowercase();
    names
        .map(|name| (edits(&wanted, &name.to_ascii_lowercase()), name))
        .filter(|(distance, name)| *distance <= name.len().max(wanted.len()) / 2 + 1)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// The Levenshtein distance of `a` and `b`, over characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb))
                .min(above + 1)
                .min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// `text` with the raw control characters inside its JSON strings escaped (`\n`, `\t`,
/// `\u0001`...), or `None` when it has none there. Outside strings nothing changes.
pub(crate) fn escape_raw_controls(text: &str) -> Option<String> {
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
    fn the_closest_name_is_a_likely_slip_or_nothing() {
        let names = ["read", "write", "edit", "glob", "grep", "bash"];
        assert_eq!(closest("read_file", names.iter().copied()), Some("read"));
        assert_eq!(closest("Bash", names.iter().copied()), Some("bash"));
        assert_eq!(closest("greb", names.iter().copied()), Some("grep"));
        assert_eq!(closest("launch_rockets_now", names.iter().copied()), None);
    }

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
}

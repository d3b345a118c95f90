//! Making runs comparable: volatile values (paths, ids, times) become placeholders.
//!
//! - the workspace and the kin home, wherever they occur in a string -> `{{cwd}}`, `{{home}}`;
//! - every UUID -> `{{id:N}}`: the sessions' ids first, in creation order, then every other
//!   UUID by first appearance across the whole run (stdout first, then the logs in order), so
//!   a session id in stdout and in its log get the same number whatever order siblings run in;
//! - ISO timestamps under `updatedAt` -> `{{time}}`; log `time`, header `createdAt` -> 0;
//! - a `session/list` page (`sessions`) is sorted by normalized id: its newest-first order
//!   rests on file times, which the file system keeps only to a few milliseconds;
//! - a command started through kin's sandbox launcher (`kin sandbox-exec --policy P -- CMD`,
//!   in a `terminal/create`) -> `CMD`, without the variables the sandbox adds: the launcher's
//!   path, its policy and the private temp directory differ from machine to machine and run
//!   to run (tests/it/sandbox.rs checks the sandbox itself).

use std::collections::HashMap;

use serde_json::Value;

pub struct Normalizer {
    paths: Vec<(String, &'static str)>,
    ids: HashMap<String, usize>,
}

impl Normalizer {
    pub fn new(cwd: &std::path::Path, home: &std::path::Path) -> Self {
        let mut paths = Vec::new();
        for (path, name) in [(cwd, "{{cwd}}"), (home, "{{home}}")] {
            paths.push((path.to_string_lossy().into_owned(), name));
            if let Ok(real) = path.canonicalize() {
                paths.push((real.to_string_lossy().into_owned(), name));
            }
        }
        // Longest first, so a path inside another is replaced by its own name.
        paths.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        paths.dedup();
        Self {
            paths,
            ids: HashMap::new(),
        }
    }

    /// Numbers these UUIDs first, in this order.
    pub fn number_first<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            let next = self.ids.len() + 1;
            self.ids.entry(id.to_owned()).or_insert(next);
        }
    }

    fn string(&mut self, text: &str) -> String {
        let mut out = text.to_owned();
        for (path, name) in &self.paths {
            if !path.is_empty() && out.contains(path.as_str()) {
                out = out.replace(path.as_str(), name);
            }
        }
        self.replace_uuids(&out)
    }

    fn replace_uuids(&mut self, text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < bytes.len() {
            if i + 36 <= bytes.len() && is_uuid(&bytes[i..i + 36]) {
                let uuid = &text[i..i + 36];
                let next = self.ids.len() + 1;
                let n = *self.ids.entry(uuid.to_owned()).or_insert(next);
                out.push_str(&format!("{{{{id:{n}}}}}"));
                i += 36;
            } else {
                let ch = text[i..].chars().next().unwrap_or_default();
                out.push(ch);
                i += ch.len_utf8().max(1);
            }
        }
        out
    }

    pub fn value(&mut self, value: &mut Value) {
        match value {
            Value::String(s) => *s = self.string(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => {
                unwrap_sandbox_launcher(map);
                for (key, v) in map.iter_mut() {
                    if key == "updatedAt" && v.is_string() {
                        *v = Value::from("{{time}}");
                    } else {
                        self.value(v);
                    }
                }
                if let Some(Value::Array(sessions)) = map.get_mut("sessions") {
                    sessions.sort_by_key(|s| s.get("sessionId").map(Value::to_string));
                }
            }
            _ => {}
        }
    }

    /// One stdout line, re-serialized in normal form.
    pub fn stdout_line(&mut self, line: &str) -> String {
        match serde_json::from_str::<Value>(line) {
            Ok(mut value) => {
                self.value(&mut value);
                value.to_string()
            }
            Err(_) => line.to_owned(),
        }
    }

    /// A whole session log in normal form: one string per line.
    pub fn log(&mut self, text: &str) -> Vec<String> {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| match serde_json::from_str::<Value>(line) {
                Ok(mut value) => {
                    if let Some(map) = value.as_object_mut() {
                        for key in ["time", "createdAt", "time0"] {
                            if map.contains_key(key) {
                                map.insert(key.into(), Value::from(0));
                            }
                        }
                    }
                    self.value(&mut value);
                    value.to_string()
                }
                Err(_) => line.to_owned(),
            })
            .collect()
    }
}

/// `{"command": kin, "args": ["sandbox-exec", "--policy", P, "--", CMD, ARGS...], "env": [...]}`
/// -> `{"command": CMD, "args": [ARGS...]}`, the sandbox's variables dropped from `env`.
fn unwrap_sandbox_launcher(map: &mut serde_json::Map<String, Value>) {
    const ADDED: [&str; 4] = ["TMPDIR", "TMP", "TEMP", "KIN_SANDBOX_CEILING"];
    let Some(Value::Array(args)) = map.get("args") else {
        return;
    };
    let launched = args.first().and_then(Value::as_str) == Some("sandbox-exec")
        && args.get(3).and_then(Value::as_str) == Some("--")
        && args.len() > 4;
    if !launched || !map.contains_key("command") {
        return;
    }
    let inner: Vec<Value> = args[4..].to_vec();
    map.insert("command".into(), inner[0].clone());
    map.insert("args".into(), Value::Array(inner[1..].to_vec()));
    if let Some(Value::Array(env)) = map.get_mut("env") {
        env.retain(|var| !ADDED.iter().any(|name| var["name"] == *name));
        if env.is_empty() {
            map.shift_remove("env");
        }
    }
}

fn is_uuid(bytes: &[u8]) -> bool {
    bytes.iter().enumerate().all(|(i, &b)| match i {
        8 | 13 | 18 | 23 => b == b'-',
        _ => b.is_ascii_hexdigit(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn replaces_paths_ids_and_times() {
        let mut n = Normalizer::new(Path::new("/tmp/ws"), Path::new("/tmp/home"));
        let line = r#"{"id":1,"result":{"sessionId":"0b8e8a6e-2a3c-4b0e-9d2e-0d5f5c0e9a11","cwd":"/tmp/ws/a","updatedAt":"2026-01-01T00:00:00Z"}}"#;
        assert_eq!(
            n.stdout_line(line),
            r#"{"id":1,"result":{"sessionId":"{{id:1}}","cwd":"{{cwd}}/a","updatedAt":"{{time}}"}}"#
        );
        let log = "{\"type\":\"session\",\"id\":\"0b8e8a6e-2a3c-4b0e-9d2e-0d5f5c0e9a11\",\"createdAt\":17}\n";
        assert_eq!(
            n.log(log),
            vec![r#"{"type":"session","id":"{{id:1}}","createdAt":0}"#]
        );
    }
}

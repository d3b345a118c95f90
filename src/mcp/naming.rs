//! The names server tools get for the model: `mcp__<server>__<tool>`, each part cut down to
//! what model APIs accept (`^[a-zA-Z0-9_-]{1,64}$`), and collisions made distinct in a fixed
//! way: the first taker keeps the name, later ones get `_2`, `_3`, ... (in server order, then
//! the server's tool order).

use std::collections::HashSet;

/// The longest name OpenAI-compatible APIs take.
const MAX_NAME: usize = 64;
pub(crate) const PREFIX: &str = "mcp__";

/// `text` with every character outside `[a-zA-Z0-9_-]` replaced by `_` (never empty).
pub(crate) fn sanitize(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "_".into()
    } else {
        clean
    }
}

/// Hands out model-facing names, each once.
#[derive(Default)]
pub(crate) struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// The name of `tool` of `server`, distinct from every name handed out before.
    pub(crate) fn assign(&mut self, server: &str, tool: &str) -> String {
        let base = cut(
            &format!("{PREFIX}{}__{}", sanitize(server), sanitize(tool)),
            MAX_NAME,
        );
        let mut name = base.clone();
        let mut n = 2;
        while self.taken.contains(&name) {
            let suffix = format!("_{n}");
            name = format!("{}{suffix}", cut(&base, MAX_NAME - suffix.len()));
            n += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

/// The first `max` bytes (all ASCII after sanitising).
fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Whether a tool list (an agent definition's `tools`) names the MCP tool `name`: by the name
/// the model sees (`mcp__files__read_file`), or by its server's prefix (`mcp__files`: every
/// tool of that server).
pub(crate) fn listed(entries: &[String], name: &str) -> bool {
    entries.iter().any(|entry| {
        entry == name
            || (entry.starts_with(PREFIX)
                && !entry[PREFIX.len()..].contains("__")
                && name
                    .strip_prefix(entry.as_str())
                    .is_some_and(|rest| rest.starts_with("__")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_names_a_tool_exactly_or_by_its_server() {
        let list = vec![
            "read".to_owned(),
            "mcp__files".into(),
            "mcp__db__query".into(),
        ];
        assert!(listed(&list, "read"));
        assert!(listed(&list, "mcp__files__read_file"));
        assert!(listed(&list, "mcp__db__query"));
        assert!(!listed(&list, "mcp__db__drop"));
        assert!(!listed(&list, "mcp__filesystem__read"));
        assert!(!listed(&list, "mcp__db__query_2"));
    }

    #[test]
    fn names_follow_the_model_rules() {
        let mut names = Names::default();
        assert_eq!(names.assign("files", "read_file"), "mcp__files__read_file");
        assert_eq!(names.assign("my db", "run.query"), "mcp__my_db__run_query");
        assert_eq!(names.assign("", "é"), "mcp______");
        let long = names.assign("s", &"x".repeat(100));
        assert_eq!(long.len(), 64);
    }

    #[test]
    fn collisions_get_numbered_in_order() {
        let mut names = Names::default();
        assert_eq!(names.assign("a b", "t"), "mcp__a_b__t");
        assert_eq!(names.assign("a.b", "t"), "mcp__a_b__t_2");
        assert_eq!(names.assign("a?b", "t"), "mcp__a_b__t_3");
        let long = "y".repeat(100);
        let first = names.assign("s", &long);
        let second = names.assign("s", &long);
        assert_ne!(first, second);
        assert_eq!(second.len(), 64);
        assert!(second.ends_with("_2"));
    }
}

//! The lean request for small windows: when the system prompt and tool schemas would take
//! more than a quarter of the window, kin sends them shortened (each description cut to its
//! first sentence, parameters' too) and without the tools a small model rarely needs. Every
//! tool it offers keeps its name and parameters (the delegation tools' wire contract), and a
//! tool left out still answers if called.

use std::sync::Arc;

use serde_json::Value;

use crate::model::ToolSpec;

/// When to send the lean request (`[tools] lean`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeanMode {
    /// When the full fixed part would take more than [`LEAN_SHARE`] of a known window.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl LeanMode {
    /// The setting's name in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::On => "on",
            Self::Off => "off",
        }
    }

    /// Whether a request whose full fixed part is `fixed_tokens` goes lean in `window`.
    pub(crate) fn applies(self, fixed_tokens: u64, window: Option<u64>) -> bool {
        match self {
            Self::On => true,
            Self::Off => false,
            Self::Auto => window.is_some_and(|w| fixed_tokens as f64 > w as f64 * LEAN_SHARE),
        }
    }
}

/// The share of the window the full fixed part may take before `auto` goes lean.
pub const LEAN_SHARE: f64 = 0.25;

/// The tools a lean request leaves out: forks copy a history a small window cannot hold twice;
/// the agent list is in the workspace preamble; tasks are listed by `task_output`'s ids; plans
/// are for long work.
pub(crate) const LEFT_OUT: [&str; 4] = ["subagent_fork", "list_agents", "task_list", "update_plan"];

/// Bytes of the fixed part of a top-level session's request (system prompt and tool schemas),
/// whole and lean (see `agent::fixed_cost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedCost {
    /// The whole form.
    pub full_bytes: usize,
    /// The lean form.
    pub lean_bytes: usize,
}

/// The lean form of `specs`: see the module docs.
pub(crate) fn lean_specs(specs: &[ToolSpec]) -> Vec<ToolSpec> {
    specs
        .iter()
        .filter(|spec| !LEFT_OUT.contains(&spec.name.as_str()))
        .map(|spec| ToolSpec {
            name: spec.name.clone(),
            description: first_sentence(&spec.description).to_owned(),
            parameters: Arc::new(shortened(&spec.parameters)),
        })
        .collect()
}

/// `schema` with every property's description cut to its first sentence; nothing else changes.
fn shortened(schema: &Value) -> Value {
    let mut schema = schema.clone();
    shorten_in(&mut schema);
    schema
}

fn shorten_in(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::String(text)) = object.get_mut("description") {
        let first = first_sentence(text).len();
        text.truncate(first);
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(shorten_in);
    }
    if let Some(items) = object.get_mut("items") {
        shorten_in(items);
    }
}

/// `text` up to the end of its first sentence: a `.` followed by a space or a line break and
/// then a capital letter (so `e.g. `*`` does not end it); all of it when there is none.
fn first_sentence(text: &str) -> &str {
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices('.') {
        let next = bytes.get(at + 1);
        let after = bytes.get(at + 2);
        if matches!(next, Some(b' ' | b'\n')) && after.is_some_and(u8::is_ascii_uppercase) {
            return &text[..=at];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_description_keeps_its_first_sentence() {
        assert_eq!(
            first_sentence("Read a text file. Returns its lines."),
            "Read a text file."
        );
        assert_eq!(
            first_sentence("Match a glob, e.g. `*` lists the top level. Directories end in /."),
            "Match a glob, e.g. `*` lists the top level."
        );
        assert_eq!(first_sentence("One sentence only."), "One sentence only.");
        assert_eq!(first_sentence("v1.2 is out. Yes"), "v1.2 is out.");
    }

    #[test]
    fn lean_specs_keep_names_and_parameters_and_leave_out_the_rare_tools() {
        let parameters = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file. Absolute or relative."},
                "entries": {"type": "array", "items": {"type": "object", "properties": {
                    "content": {"type": "string", "description": "What. More."}}}}
            },
            "required": ["path"],
            "additionalProperties": false
        });
        let spec = |name: &str| ToolSpec {
            name: name.into(),
            description: "Does a thing. In detail.".into(),
            parameters: Arc::new(parameters.clone()),
        };
        let lean = lean_specs(&[spec("read"), spec("subagent_fork"), spec("update_plan")]);
        assert_eq!(lean.len(), 1);
        assert_eq!(lean[0].name, "read");
        assert_eq!(lean[0].description, "Does a thing.");
        let p = &lean[0].parameters;
        assert_eq!(p["properties"]["path"]["description"], "The file.");
        assert_eq!(
            p["properties"]["entries"]["items"]["properties"]["content"]["description"],
            "What."
        );
        assert_eq!(p["required"], parameters["required"]);
        assert_eq!(p["additionalProperties"], false);
    }

    #[test]
    fn auto_goes_lean_past_a_quarter_of_a_known_window() {
        assert!(LeanMode::Auto.applies(2_100, Some(8_192)));
        assert!(!LeanMode::Auto.applies(2_000, Some(8_192)));
        assert!(!LeanMode::Auto.applies(100_000, None));
        assert!(LeanMode::On.applies(1, None));
        assert!(!LeanMode::Off.applies(100_000, Some(4_096)));
    }
}

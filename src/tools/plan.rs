//! `update_plan`: the model's plan for multi-step work, as a list of entries in ACP's
//! `PlanEntry` shape. Each call replaces the whole plan. The call's arguments are the plan:
//! editors are shown them as a plan (see `acp::updates`), not as a tool call, live and on
//! replay alike, so the tool itself only checks them and answers.

use futures::future::BoxFuture;
use futures::FutureExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::typed::parse_arguments;
use super::{Tool, ToolContext, ToolDisplay, ToolKind, ToolOutput};
use crate::model::ToolSpec;

pub const NAME: &str = "update_plan";

/// Most entries a plan may have (a plan is for a person to read).
const MAX_ENTRIES: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    High,
    Medium,
    Low,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Completed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub content: String,
    pub priority: Priority,
    pub status: Status,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    entries: Vec<Entry>,
}

/// The plan in a call's arguments (as logged), if they are a valid plan.
pub fn entries(arguments: &str) -> Option<Vec<Entry>> {
    let parsed: Arguments = serde_json::from_str(arguments).ok()?;
    (parsed.entries.len() <= MAX_ENTRIES).then_some(parsed.entries)
}

pub struct PlanTool;

pub fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "maxItems": MAX_ENTRIES,
                "description": "The whole plan, in order; each call replaces the previous plan.",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "What this step does, in a short sentence."},
                        "priority": {"type": "string", "enum": ["high", "medium", "low"]},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                    },
                    "required": ["content", "priority", "status"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["entries"],
        "additionalProperties": false
    })
}

impl Tool for PlanTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Shows the user your plan for multi-step work and how far along it is. \
                Call it with every step when you start a task of three or more steps, and again \
                (with the whole list) whenever a step starts or finishes. Skip it for simple \
                questions and one-step changes."
                .into(),
            parameters: parameters(),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn title(&self, _arguments: &Value) -> String {
        "Update plan".into()
    }

    fn call(&self, arguments: Value, _cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        let hidden = ToolDisplay {
            hidden: true,
            ..ToolDisplay::default()
        };
        let output = match parse_arguments::<Arguments>(NAME, arguments) {
            Ok(args) if args.entries.len() > MAX_ENTRIES => ToolOutput::error(
                "InvalidArguments",
                "INVALID_ARGUMENTS",
                format!("Error: a plan has at most {MAX_ENTRIES} entries"),
            ),
            Ok(args) => {
                let done = args
                    .entries
                    .iter()
                    .filter(|e| e.status == Status::Completed)
                    .count();
                ToolOutput::ok(format!(
                    "Plan updated: {} entries, {done} completed.",
                    args.entries.len()
                ))
            }
            Err(error) => error,
        };
        std::future::ready(output.with_display(hidden)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_is_read_from_its_arguments_and_checked() {
        let args = r#"{"entries":[{"content":"a","priority":"high","status":"in_progress"}]}"#;
        let plan = entries(args).unwrap();
        assert_eq!(plan[0].status, Status::InProgress);
        assert!(
            entries(r#"{"entries":[{"content":"a","priority":"urgent","status":"pending"}]}"#)
                .is_none()
        );
        assert!(entries("not json").is_none());
    }

    #[tokio::test]
    async fn the_tool_answers_with_a_count_and_hides_itself() {
        let cx = ToolContext::new(
            "s",
            std::env::temp_dir(),
            tokio_util::sync::CancellationToken::new(),
        );
        let args = json!({"entries": [{"content": "a", "priority": "low", "status": "completed"}]});
        let output = PlanTool.call(args, cx.clone()).await;
        assert_eq!(output.text, "Plan updated: 1 entries, 1 completed.");
        assert!(output.display.hidden);
        let bad = PlanTool.call(json!({"entries": 3}), cx).await;
        assert!(bad.is_error && bad.display.hidden);
    }
}

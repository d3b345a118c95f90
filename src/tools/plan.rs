//! `update_plan`: the model's plan for multi-step work, as a list of entries in ACP's
//! `PlanEntry` shape. Each call replaces the whole plan. The call's arguments are the plan:
//! editors are shown them as a plan (see `acp::updates`), not as a tool call, live and on
//! replay alike, so the tool itself only checks them and answers.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::typed::TypedTool;
use super::{ToolContext, ToolKind, ToolOutput};

pub(crate) const NAME: &str = "update_plan";

const MAX_ENTRIES: usize = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Priority {
    High,
    Medium,
    Low,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Pending,
    InProgress,
    Completed,
}

// One step of the plan (ACP's `PlanEntry`); no doc comment, which would enter the schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    /// What this step does, in a short sentence.
    pub(crate) content: String,
    pub(crate) priority: Priority,
    pub(crate) status: Status,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanArgs {
    /// The whole plan, in order; each call replaces the previous plan.
    #[schemars(length(max = 50))]
    entries: Vec<Entry>,
}

/// The plan in a logged `update_plan` call's arguments, if they are a valid plan.
pub(crate) fn entries(arguments: &str) -> Option<Vec<Entry>> {
    let parsed: PlanArgs = serde_json::from_str(arguments).ok()?;
    (parsed.entries.len() <= MAX_ENTRIES).then_some(parsed.entries)
}

#[derive(Clone)]
pub(crate) struct PlanTool;

impl TypedTool for PlanTool {
    const NAME: &'static str = NAME;
    const DESCRIPTION: &'static str = "Shows the user your plan for multi-step work and how far \
        along it is. Call it with every step when you start a task of three or more steps, and \
        again (with the whole list) whenever a step starts or finishes. Skip it for simple \
        questions and one-step changes.";
    type Args = PlanArgs;

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn hidden(&self) -> bool {
        true
    }

    fn title(&self, _args: Option<&PlanArgs>) -> String {
        "Update plan".into()
    }

    async fn run(&self, args: PlanArgs, _cx: ToolContext) -> Result<ToolOutput, ToolOutput> {
        let output = if args.entries.len() > MAX_ENTRIES {
            ToolOutput::error(
                "InvalidArguments",
                "INVALID_ARGUMENTS",
                format!("Error: a plan has at most {MAX_ENTRIES} entries"),
            )
        } else {
            let done = args
                .entries
                .iter()
                .filter(|e| e.status == Status::Completed)
                .count();
            ToolOutput::ok(format!(
                "Plan updated: {} entries, {done} completed.",
                args.entries.len()
            ))
        };
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Tool;
    use serde_json::json;

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

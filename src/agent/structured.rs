//! Structured results: a child asked for an output schema reports its answer by calling the
//! `structured_output` tool. The first valid call is the result and ends the turn; any tool
//! call after it is refused.

use std::sync::Mutex;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;

use crate::model::ToolSpec;
use crate::sync::lock;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutput};

/// The name of the tool a child calls to hand back its structured result.
pub const STRUCTURED_TOOL: &str = "structured_output";

/// Appended to the system prompt of a child that must report a structured result.
pub(crate) const STRUCTURED_INSTRUCTION: &str = "Your final answer must be delivered through the \
`structured_output` tool, with arguments that match its parameter schema. A plain text reply does \
not count as a result: call the tool once your answer is complete.";

#[derive(Debug, thiserror::Error)]
pub(crate) enum SchemaError {
    #[error("output schema must be a JSON object schema with \"type\": \"object\" at its root")]
    NotObject,
    #[error("output schema is not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// The requested schema and, once the model reported it, the captured value.
pub struct StructuredCapture {
    schema: std::sync::Arc<Value>,
    validator: jsonschema::Validator,
    captured: Mutex<Option<Value>>,
}

impl std::fmt::Debug for StructuredCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StructuredCapture")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl StructuredCapture {
    /// Accepts object-rooted schemas that compile; anything else fails before a child exists.
    pub(crate) fn new(schema: Value) -> Result<Self, SchemaError> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(SchemaError::NotObject);
        }
        let validator =
            jsonschema::validator_for(&schema).map_err(|e| SchemaError::Invalid(e.to_string()))?;
        Ok(Self {
            schema: schema.into(),
            validator,
            captured: Mutex::new(None),
        })
    }

    pub(crate) fn captured(&self) -> Option<Value> {
        lock(&self.captured).clone()
    }

    pub(crate) fn is_captured(&self) -> bool {
        self.captured().is_some()
    }

    /// The refusal a tool call gets once the result is in.
    pub(crate) fn refusal(tool: &str) -> ToolOutput {
        ToolOutput::error(
            "StructuredOutputRecorded",
            "STRUCTURED_OUTPUT_RECORDED",
            format!(
                "Error: structured output already recorded: the run is complete, so `{tool}` is not executed"
            ),
        )
    }

    fn record(&self, value: Value) -> ToolOutput {
        let problems: Vec<String> = self
            .validator
            .iter_errors(&value)
            .map(|e| format!("{e} (at {})", e.instance_path))
            .collect();
        if !problems.is_empty() {
            return ToolOutput::error(
                "ToolArgsError",
                "INVALID_ARGS",
                format!(
                    "Error: the arguments do not match the output schema: {}",
                    problems.join("; ")
                ),
            );
        }
        let mut captured = lock(&self.captured);
        if captured.is_some() {
            return Self::refusal(STRUCTURED_TOOL);
        }
        *captured = Some(value);
        ToolOutput::ok("Structured output recorded.")
    }
}

/// The `structured_output` tool of one child; its parameters are the requested schema.
pub(crate) struct StructuredOutputTool(pub std::sync::Arc<StructuredCapture>);

impl Tool for StructuredOutputTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: STRUCTURED_TOOL.into(),
            description: "Deliver your final result. Call it exactly once, when the answer is \
                          complete, with arguments that satisfy this tool's parameter schema."
                .into(),
            parameters: self.0.schema.clone(),
        }
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    fn title(&self, _arguments: &Value) -> String {
        "Report the structured result".into()
    }

    fn call(&self, arguments: Value, _cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        std::future::ready(self.0.record(arguments)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_only_object_schemas_and_validates_values() {
        assert!(matches!(
            StructuredCapture::new(json!({"type": "string"})),
            Err(SchemaError::NotObject)
        ));
        let capture = StructuredCapture::new(json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n"]
        }))
        .unwrap();
        let bad = capture.record(json!({"n": "x"}));
        assert!(bad.is_error);
        assert_eq!(bad.error.unwrap().code, "INVALID_ARGS");
        assert!(!capture.is_captured());
        assert!(!capture.record(json!({"n": 3})).is_error);
        assert_eq!(capture.captured(), Some(json!({"n": 3})));
        assert!(
            capture.record(json!({"n": 4})).is_error,
            "only the first capture counts"
        );
    }
}

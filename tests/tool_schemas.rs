//! `protocol/schemas/tools/<name>.json` documents each model-facing tool's parameters; this
//! keeps the files and the tools kin actually offers identical. `KIN_SNAPSHOT=refresh` rewrites
//! the files from the tools.

use std::sync::Arc;

use kin::model::UnconfiguredModel;
use kin::runtime::{Runtime, RuntimeOptions};
use kin::tools::ToolRegistry;
use serde_json::Value;

#[test]
fn every_tool_has_its_schema_file_and_they_agree() {
    let home = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(
        home.path(),
        Arc::new(UnconfiguredModel::new("none")),
        ToolRegistry::new(),
        RuntimeOptions::default(),
    )
    .unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol/schemas/tools");
    let refresh = std::env::var("KIN_SNAPSHOT").is_ok_and(|v| v == "refresh");
    let specs = runtime.tools.specs();
    assert!(specs.len() >= 5);
    for spec in specs {
        let path = dir.join(format!("{}.json", spec.name));
        let documented = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": spec.name,
            "description": spec.description,
            "type": "object",
            "properties": spec.parameters["properties"],
            "required": spec.parameters.get("required").cloned().unwrap_or(Value::Array(vec![])),
        });
        if refresh {
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&documented).unwrap() + "\n",
            )
            .unwrap();
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with KIN_SNAPSHOT=refresh)", path.display()));
        let file: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            file,
            documented,
            "{} differs from the tool kin offers",
            path.display()
        );
        jsonschema::validator_for(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

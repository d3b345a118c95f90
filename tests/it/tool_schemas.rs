//! Each model-facing tool has a JSON Schema in `protocol/schemas/tools/<name>.json`: its
//! `parameters` plus `$schema`, `$id`, `title` (the tool name) and `description` (what the
//! model is told). The files must match what the tools really offer, and must be valid schemas
//! that accept and refuse the expected arguments. `KIN_SCHEMAS=refresh cargo test --test
//! tool_schemas` rewrites them from the code.

use crate::common;

use serde_json::{json, Value};

fn schema_dir() -> std::path::PathBuf {
    common::repo().join("protocol/schemas/tools")
}

fn expected_file(spec: &kin::model::ToolSpec) -> Value {
    let mut file = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": format!("urn:kin:tool:{}", spec.name),
        "title": spec.name,
        "description": spec.description,
    });
    for (key, value) in spec.parameters.as_object().unwrap() {
        file[key] = value.clone();
    }
    file
}

/// Every tool a top-level session offers: the coding tools plus delegation and tasks.
fn all_specs() -> Vec<kin::model::ToolSpec> {
    let home = tempfile::tempdir().unwrap();
    let model = std::sync::Arc::new(kin::model::UnconfiguredModel::new("none"));
    let runtime = kin::runtime::Runtime::new(
        home.path(),
        model,
        kin::tools::builtin(),
        Default::default(),
    )
    .unwrap();
    runtime.host().tools().specs()
}

#[test]
fn every_tool_has_a_schema_file_matching_its_parameters() {
    let specs = all_specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "bash",
            "edit",
            "glob",
            "grep",
            "list_agents",
            "read",
            "send_message",
            "subagent",
            "subagent_fork",
            "task_kill",
            "task_list",
            "task_output",
            "update_plan",
            "write"
        ]
    );
    if std::env::var("KIN_SCHEMAS").is_ok_and(|v| v == "refresh") {
        for spec in &specs {
            let text = serde_json::to_string_pretty(&expected_file(spec)).unwrap() + "\n";
            std::fs::write(schema_dir().join(format!("{}.json", spec.name)), text).unwrap();
        }
    }
    for spec in &specs {
        let path = schema_dir().join(format!("{}.json", spec.name));
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            file,
            expected_file(spec),
            "{} is out of date",
            path.display()
        );
        jsonschema::validator_for(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let mut files: Vec<String> = std::fs::read_dir(schema_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    // Beside them, the tools `kin mcp` serves (checked by tests/it/mcp_serve.rs).
    let served = ["kin", "kin_cancel", "kin_list", "kin_output", "kin_reply"];
    let mut wanted: Vec<String> = names
        .iter()
        .chain(served.iter())
        .map(|n| format!("{n}.json"))
        .collect();
    wanted.sort();
    assert_eq!(files, wanted, "a schema file without a tool");
}

#[test]
fn the_schemas_accept_and_refuse_the_expected_arguments() {
    let cases = [
        (
            "read",
            json!({"path": "a.rs", "offset": 3, "limit": 10}),
            true,
        ),
        ("read", json!({"path": "a.rs", "offset": 0}), false),
        ("read", json!({}), false),
        ("write", json!({"path": "a.rs", "content": ""}), true),
        ("write", json!({"path": "a.rs"}), false),
        (
            "edit",
            json!({"path": "a.rs", "old_string": "a", "new_string": "b"}),
            true,
        ),
        (
            "edit",
            json!({"path": "a.rs", "patch": "@@ -1 +1 @@\n-a\n+b\n"}),
            true,
        ),
        ("edit", json!({"path": "a.rs", "replace_all": "yes"}), false),
        ("glob", json!({"pattern": "**/*.rs", "path": "src"}), true),
        ("glob", json!({"path": "src"}), false),
        (
            "grep",
            json!({"pattern": "fn main", "glob": "*.rs", "ignore_case": true}),
            true,
        ),
        ("grep", json!({"pattern": "x", "extra": 1}), false),
        ("bash", json!({"command": "ls", "timeout": 5}), true),
        ("bash", json!({"command": "ls", "timeout": 0}), false),
        ("subagent", json!({"description": "d", "prompt": "p"}), true),
        ("subagent", json!({"prompt": "p"}), false),
        (
            "subagent_fork",
            json!({"description": "d", "prompt": "p", "run_in_background": "yes"}),
            false,
        ),
        (
            "task_output",
            json!({"task_id": "subagent-1", "wait": true, "timeout_ms": 5}),
            true,
        ),
        ("task_output", json!({"wait": true}), false),
        (
            "task_kill",
            json!({"task_id": "subagent-1", "reason": "r"}),
            true,
        ),
        ("task_list", json!({}), true),
        (
            "send_message",
            json!({"subagent_id": "22222222-2222-4222-8222-222222222222", "message": "more"}),
            true,
        ),
        ("send_message", json!({"subagent_id": "x"}), false),
        (
            "send_message",
            json!({"subagent_id": 1, "message": "m"}),
            false,
        ),
        ("list_agents", json!({}), true),
        (
            "update_plan",
            json!({"entries": [{"content": "c", "priority": "high", "status": "in_progress"}]}),
            true,
        ),
        (
            "update_plan",
            json!({"entries": [{"content": "c", "priority": "urgent", "status": "pending"}]}),
            false,
        ),
        ("update_plan", json!({}), false),
    ];
    for (tool, arguments, valid) in cases {
        let path = schema_dir().join(format!("{tool}.json"));
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert_eq!(validator.is_valid(&arguments), valid, "{tool} {arguments}");
    }
}

//! Structured output: a child asked for a schema reports through `structured_output`.

use kin::agent::StopReason;
use kin::delegation::StartRequest;
use kin::session::history::HistoryItem;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::start_child;
use super::support::{calls, last_tool_result, prompt, text, ScriptedModel, World};

fn schema() -> Value {
    json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})
}

async fn run_structured(
    model: std::sync::Arc<ScriptedModel>,
) -> (World, kin::delegation::SubagentResult, String) {
    let world = World::new(model);
    let parent = world.session();
    let mut request = StartRequest::new(prompt("compute"), parent, CancellationToken::new());
    request.output_schema = Some(schema());
    let run = start_child(world.runtime.delegation(), "spawn", request)
        .await
        .unwrap();
    let result = run.result().await;
    run.dispose().await;
    (world, result, run.id)
}

fn tool_results(world: &World, id: &str) -> Vec<(String, bool)> {
    world
        .log(id)
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| {
            let part = &e["data"]["message"]["content"][0];
            (
                part["content"][0]["text"].as_str().unwrap().to_owned(),
                part["isError"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_valid_capture_is_the_result_and_ends_the_turn() {
    let model = ScriptedModel::new(|_| calls(&[("structured_output", json!({"answer": 42}))]));
    let (world, result, id) = run_structured(model.clone()).await;
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.structured, Some(json!({"answer": 42})));
    assert_eq!(model.calls_for(&id), 1, "no model step after the capture");
    assert_eq!(
        tool_results(&world, &id),
        [("Structured output recorded.".to_owned(), false)]
    );
}

#[tokio::test]
async fn calls_after_the_capture_are_refused_and_calls_before_it_run() {
    let model = ScriptedModel::new(|_| {
        calls(&[
            ("task_list", json!({})),
            ("structured_output", json!({"answer": 1})),
            ("task_list", json!({})),
        ])
    });
    let (world, result, id) = run_structured(model).await;
    assert_eq!(result.structured, Some(json!({"answer": 1})));
    let results = tool_results(&world, &id);
    assert_eq!(
        results[0],
        ("(no background tasks)".to_owned(), false),
        "the earlier call ran"
    );
    assert_eq!(
        results[2],
        (
            "Error: structured output already recorded: the run is complete, so `task_list` is not executed".to_owned(),
            true
        )
    );
}

#[tokio::test]
async fn an_invalid_call_is_an_error_the_model_can_retry_in_turn() {
    let model = ScriptedModel::new(|req| match last_tool_result(req) {
        Some((_, true)) => calls(&[("structured_output", json!({"answer": 7}))]),
        _ => calls(&[("structured_output", json!({"answer": "seven"}))]),
    });
    let (world, result, id) = run_structured(model).await;
    assert_eq!(result.structured, Some(json!({"answer": 7})));
    let results = tool_results(&world, &id);
    assert!(results[0].1 && results[0].0.contains("do not match the output schema"));
    let log = world.log(&id);
    let first = log.iter().find(|e| e["type"] == "tool/result").unwrap();
    assert_eq!(first["data"]["error"]["code"], "INVALID_ARGS");
}

#[tokio::test]
async fn a_clean_finish_without_a_capture_is_an_error_without_a_re_prompt() {
    let model = ScriptedModel::new(|_| text("here is my answer in prose"));
    let (_world, result, id) = run_structured(model.clone()).await;
    assert_eq!(result.stop_reason, StopReason::Error);
    assert!(result.structured.is_none());
    assert_eq!(model.calls_for(&id), 1);
}

#[tokio::test]
async fn only_structured_children_see_the_tool_and_the_instruction_each_with_its_schema() {
    let model = ScriptedModel::new(|req| {
        let tool = req.tools.iter().find(|t| t.name == "structured_output");
        match tool {
            Some(t) if t.parameters["required"] == json!(["a"]) => {
                calls(&[("structured_output", json!({"a": 1}))])
            }
            Some(_) => calls(&[("structured_output", json!({"b": 2}))]),
            None => text("plain"),
        }
    });
    let world = World::new(model.clone());
    let parent = world.session();
    let start = |schema: Value| {
        let mut request = StartRequest::new(prompt("go"), parent.clone(), CancellationToken::new());
        request.output_schema = Some(schema);
        start_child(world.runtime.delegation(), "spawn", request)
    };
    let a = start(json!({"type": "object", "required": ["a"]}))
        .await
        .unwrap();
    let b = start(json!({"type": "object", "required": ["b"]}))
        .await
        .unwrap();
    assert_eq!(a.result().await.structured, Some(json!({"a": 1})));
    assert_eq!(b.result().await.structured, Some(json!({"b": 2})));
    world.prompt(&parent, "hello").await;
    let requests = model.requests();
    let parent_request = requests.iter().find(|r| r.session_id == parent.id).unwrap();
    assert!(parent_request
        .tools
        .iter()
        .all(|t| t.name != "structured_output"));
    assert!(!parent_request.system.contains("structured_output"));
    let child_request = requests.iter().find(|r| r.session_id == a.id).unwrap();
    assert!(
        child_request.system.contains("structured_output"),
        "the instruction rides only structured requests"
    );
    assert!(
        child_request.system.starts_with("You are kin"),
        "the base prompt is kept"
    );
}

#[tokio::test]
async fn a_schema_outside_the_subset_fails_before_any_child_exists() {
    let world = World::new(ScriptedModel::new(|_| text("x")));
    let parent = world.session();
    let before = world.stored();
    for schema in [
        json!({"type": "string"}),
        json!({"type": "object", "properties": 5}),
    ] {
        let mut request = StartRequest::new(prompt("go"), parent.clone(), CancellationToken::new());
        request.output_schema = Some(schema);
        let error = start_child(world.runtime.delegation(), "spawn", request)
            .await
            .err()
            .unwrap();
        assert_eq!(error.code(), "INVALID_SCHEMA");
    }
    assert_eq!(world.stored(), before);
}

#[tokio::test]
async fn structured_output_from_an_agent_without_a_structured_run_is_an_unknown_tool() {
    let model = ScriptedModel::new(|req| match req.history.last() {
        Some(HistoryItem::ToolResult { .. }) => text("ok"),
        _ => calls(&[("structured_output", json!({"answer": 1}))]),
    });
    let world = World::new(model);
    let parent = world.session();
    world.prompt(&parent, "try it").await;
    let result = world
        .log(&parent.id)
        .into_iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert_eq!(result["data"]["error"]["code"], "UNKNOWN_TOOL");
}

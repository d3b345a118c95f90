//! Budgets: a child that reaches its own token budget stops `budget_exhausted` after that
//! step; a tree that has spent its budget refuses the next start.

use std::time::Duration;

use kin::config::DelegationSettings;
use kin::runtime::RuntimeOptions;
use kin::session::history::HistoryItem;
use serde_json::{json, Value};

use crate::support::{calls, last_user_text, text, ScriptedModel, World};

fn budgeted(settings: DelegationSettings) -> RuntimeOptions {
    RuntimeOptions {
        delegation: settings,
        ..Default::default()
    }
}

fn results(world: &World, id: &str) -> Vec<(String, bool)> {
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
async fn a_child_at_its_budget_stops_after_that_step() {
    let model = ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        if asked.starts_with("parent:") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("done"),
                _ => calls(&[(
                    "subagent",
                    json!({"description": "spender", "prompt": "spend", "budget_tokens": 5}),
                )]),
            };
        }
        // The child would loop forever on tool calls.
        calls(&[("task_list", json!({}))])
    });
    let world = World::with_options(model.clone(), budgeted(DelegationSettings::default()));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let child = world.only_child(&parent.id);
    assert_eq!(
        model.calls_for(&child),
        1,
        "one step, then the budget stops it"
    );
    assert_eq!(
        results(&world, &parent.id),
        [("Error: subagent run budget_exhausted".to_owned(), true)]
    );
    let ends: Vec<Value> = world
        .log(&child)
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].clone())
        .collect();
    assert_eq!(ends, [json!("budget_exhausted")]);
}

#[tokio::test]
async fn a_tree_that_spent_its_budget_refuses_the_next_spawn() {
    let model = ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        if asked.starts_with("parent:") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("done"),
                _ => calls(&[
                    (
                        "subagent",
                        json!({"description": "first", "prompt": "first"}),
                    ),
                    (
                        "subagent",
                        json!({"description": "second", "prompt": "second"}),
                    ),
                ]),
            };
        }
        text("an answer of some length, worth a few tokens")
    });
    let settings = DelegationSettings {
        budget_tokens: Some(10),
        timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    let world = World::with_options(model.clone(), budgeted(settings));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let results = results(&world, &parent.id);
    assert_eq!(
        results[0],
        (
            "an answer of some length, worth a few tokens".to_owned(),
            false
        )
    );
    assert!(results[1].1);
    assert!(
        results[1].0.starts_with("Error: the delegation budget_tokens of 10 is spent (")
            && results[1]
                .0
                .ends_with("tokens used by this session's subagents); no subagent can be started or continued in this session's tree"),
        "{}",
        results[1].0
    );
    // Only the first child ever ran.
    assert_eq!(world.stored().len(), 2);
}

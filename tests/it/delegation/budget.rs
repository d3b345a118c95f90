//! Budgets: a child that reaches its own token budget stops `budget_exhausted` after that
//! step; a tree that has spent its budget refuses the next start.

use std::time::Duration;

use kin::config::DelegationSettings;
use kin::runtime::RuntimeOptions;
use kin::session::history::HistoryItem;
use serde_json::{json, Value};

use super::support::{calls, last_user_text, text, Reply, ScriptedModel, World};

fn budgeted(settings: DelegationSettings) -> RuntimeOptions {
    RuntimeOptions {
        delegation: settings,
        ..Default::default()
    }
}

/// `reply` with the endpoint's figures: `tokens` in, none out.
fn costing(reply: Reply, tokens: u64) -> Reply {
    let Reply::Chunks(mut chunks) = reply else {
        return reply;
    };
    let usage = kin::session::Usage {
        input_tokens: tokens,
        ..Default::default()
    };
    chunks.insert(chunks.len() - 1, kin::session::Chunk::Usage { usage });
    Reply::Chunks(chunks)
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
    // The scripted model reports no usage: the step is kin's estimate of the request (its
    // system prompt and tool schemas included), far over 5.
    let results = world.tool_results(&parent.id);
    let [(text, true)] = &results[..] else {
        panic!("one failed result: {results:?}")
    };
    let spent = text
        .strip_prefix(
            "Error: subagent run budget_exhausted\nDiagnostic: its token budget of 5 was reached (",
        )
        .and_then(|rest| rest.strip_suffix(" tokens spent)"))
        .and_then(|spent| spent.parse::<u64>().ok());
    assert!(spent.is_some_and(|spent| spent > 1_000), "{text}");
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
                // The root's own call counts: 4 of the 10.
                _ => costing(
                    calls(&[
                        (
                            "subagent",
                            json!({"description": "first", "prompt": "first"}),
                        ),
                        (
                            "subagent",
                            json!({"description": "second", "prompt": "second"}),
                        ),
                    ]),
                    4,
                ),
            };
        }
        costing(text("an answer of some length, worth a few tokens"), 6)
    });
    let settings = DelegationSettings {
        budget_tokens: Some(10),
        timeout: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    // One call at a time: the second starts once the first has spent its tokens (side by
    // side, a child without a budget of its own sets nothing aside).
    let options = RuntimeOptions {
        max_parallel: 1,
        ..budgeted(settings)
    };
    let world = World::with_options(model.clone(), options);
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let results = world.tool_results(&parent.id);
    assert_eq!(
        results[0],
        (
            "an answer of some length, worth a few tokens".to_owned(),
            false
        )
    );
    assert!(results[1].1);
    assert!(
        results[1].0.starts_with("Error: the delegation budget_tokens of 10 is spent (10 tokens")
            && results[1]
                .0
                .ends_with("tokens used by this session and its subagents); no subagent can be started or continued in this session's tree"),
        "{}",
        results[1].0
    );
    // Only the first child ever ran.
    assert_eq!(world.stored().len(), 2);
}

/// How many tool results the running turn of `req` has seen (its last user message onward).
fn results_this_turn(req: &kin::model::ModelRequest) -> usize {
    req.history
        .iter()
        .rev()
        .take_while(|item| !matches!(item, HistoryItem::User(_)))
        .filter(|item| matches!(item, HistoryItem::ToolResult { .. }))
        .count()
}

#[tokio::test]
async fn a_continuation_runs_under_the_limits_of_the_call_that_started_the_child() {
    let model = ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        if asked.starts_with("parent:") || asked.starts_with("background task") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("started"),
                _ if asked.starts_with("background task") => text("noted"),
                _ => calls(&[(
                    "subagent",
                    json!({"description": "bg", "prompt": "first", "run_in_background": true,
                           "budget_tokens": 5, "timeout": 30}),
                )]),
            };
        }
        // Three tool steps, then an answer: a budget of 5 tokens stops it after one.
        match results_this_turn(req) {
            0..=2 => calls(&[("task_list", json!({}))]),
            _ => text("child answer"),
        }
    });
    let world = World::with_options(model.clone(), budgeted(DelegationSettings::default()));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    world.runtime.tasks().until_settled("subagent-1").await;
    let child = world.only_child(&parent.id);
    let descriptor = world
        .log(&child)
        .into_iter()
        .find(|e| e["type"] == "subagent/descriptor")
        .unwrap();
    assert_eq!(descriptor["data"]["timeoutMs"], json!(30_000));
    assert_eq!(descriptor["data"]["budgetTokens"], json!(5));
    let delivered = world
        .runtime
        .delegation()
        .send_message(&parent.id, &child, super::support::prompt("again"), None)
        .await
        .unwrap();
    assert!(matches!(delivered, kin::delegation::Delivery::Started(_)));
    world.runtime.tasks().until_settled("subagent-2").await;
    let ends: Vec<Value> = world
        .log(&child)
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].clone())
        .collect();
    assert_eq!(
        ends,
        [json!("budget_exhausted"), json!("budget_exhausted")],
        "the continuation keeps the call's budget"
    );
    assert_eq!(model.calls_for(&child), 2, "one step per activation");
}

#[tokio::test]
async fn task_output_shows_what_the_tree_spent_and_has_left() {
    let model = ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        if asked.starts_with("parent:") {
            return match results_this_turn(req) {
                0 => calls(&[(
                    "subagent",
                    json!({"description": "bg", "prompt": "child", "run_in_background": true}),
                )]),
                1 => calls(&[(
                    "task_output",
                    json!({"task_id": "subagent-1", "wait": true}),
                )]),
                _ => text("done"),
            };
        }
        if asked.starts_with("background task") {
            return text("noted");
        }
        text("child answer")
    });
    let settings = DelegationSettings {
        budget_tokens: Some(100_000),
        ..Default::default()
    };
    let world = World::with_options(model, budgeted(settings));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let (output, is_error) = world.tool_results(&parent.id).pop().unwrap();
    assert!(!is_error, "{output}");
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines[0], "child answer");
    assert!(
        lines[1].starts_with("budget: ") && lines[1].contains(" of 100000 tokens spent, "),
        "{output}"
    );
    assert_eq!(lines[2], "[status: completed]");
}

#[tokio::test]
async fn a_background_childs_cost_counts_for_the_turn_that_started_it() {
    use kin::model::{ModelCatalog, ModelChoice, ModelProfile, Prices};

    // One token costs 1 (a price of a million per million input tokens).
    let model = ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        if asked.starts_with("parent: go") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => costing(text("started"), 1),
                _ => costing(
                    calls(&[(
                        "subagent",
                        json!({"description": "bg", "prompt": "child", "run_in_background": true}),
                    )]),
                    1,
                ),
            };
        }
        if asked == "child" {
            return costing(text("child answer"), 10);
        }
        costing(text("noted"), 1)
    });
    let profile = ModelProfile {
        id: "default".into(),
        prices: Some(Prices {
            input: 1e6,
            cached_input: 0.0,
            output: 0.0,
            currency: "USD".into(),
        }),
        ..ModelProfile::default()
    };
    let catalog = ModelCatalog::new(
        ModelChoice {
            profile,
            model: model.clone(),
        },
        Vec::new(),
        0.9,
    );
    let options = RuntimeOptions {
        models: Some(catalog),
        ..Default::default()
    };
    let world = World::with_options(model, options);
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    world.runtime.tasks().until_settled("subagent-1").await;
    world.prompt(&parent, "parent: next").await;
    let log = world.log(&parent.id);
    let turn_costs: Vec<f64> = log
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["usage"]["cost"].as_f64().unwrap())
        .collect();
    assert_eq!(turn_costs, [2.0, 1.0], "each turn its own calls only");
    let task_end = log.iter().find(|e| e["type"] == "task/end").unwrap();
    assert_eq!(task_end["data"]["cost"], json!(10.0), "{task_end}");
    assert_eq!(
        parent.context.usage().cost,
        13.0,
        "the session's cost has it all"
    );
}

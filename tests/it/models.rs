//! Models, usage and compaction through the real binary on the mock endpoint: the `model`
//! config option listed, switched and restored on load; `usage_update` figures from the mock's
//! usage and the configured prices; compaction on the threshold and on a context-length error,
//! and `session/load` after a compaction.

use crate::common;

use common::mock_openai::{
    chunk, done, error_reply, event, text_reply, tool_calls_reply, usage, MockServer, Reply,
};
use common::{AcpSchema, Wire};
use serde_json::{json, Value};

const CONFIG: &str = r#"
context_window = 1000
input_price = 2.0
output_price = 8.0
currency = "EUR"

[models.small]
name = "Small one"
model = "mock-small"
context_window = 500
input_price = 1.0
output_price = 1.0
"#;

fn start(server: &MockServer, home: tempfile::TempDir) -> Wire {
    Wire::on_mock(server, home, "sk-models-test-0001")
}

fn kinds(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|u| u.pointer("/params/update/sessionUpdate"))
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

fn of_kind<'a>(updates: &'a [Value], kind: &str) -> Vec<&'a Value> {
    updates
        .iter()
        .filter(|u| u.pointer("/params/update/sessionUpdate") == Some(&json!(kind)))
        .map(|u| &u["params"]["update"])
        .collect()
}

fn model_option(options: &Value) -> Value {
    options
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["id"] == "model")
        .cloned()
        .unwrap_or_else(|| panic!("no model option in {options}"))
}

/// A text answer with the given usage figures.
fn answer_with_usage(text: &str, prompt_tokens: u64, completion: u64) -> Reply {
    Reply::Stream(vec![
        event(&chunk(json!({"role": "assistant", "content": text}), None)),
        event(&chunk(json!({}), Some("stop"))),
        event(&usage(prompt_tokens, completion)),
        done(),
    ])
}

#[tokio::test]
async fn the_model_option_is_listed_switched_priced_and_restored_on_load() {
    let server = MockServer::start();
    let mut kin = start(&server, common::home_with(CONFIG));
    kin.initialize_with_compaction().await;
    let cwd = kin.cwd();
    let (_, created) = kin
        .request(1, "session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    let option = model_option(&created["result"]["configOptions"]);
    assert_eq!(option["category"], "model");
    assert_eq!(option["currentValue"], "default");
    let ids: Vec<&str> = option["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["value"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["default", "small"]);

    // On the default model: 300 in, 50 out at 2 and 8 EUR per million (and under the small
    // model's compaction threshold, 400).
    server.push(answer_with_usage("one", 300, 50));
    let updates = kin.turn(2, &session, "a").await;
    let usage_updates = of_kind(&updates, "usage_update");
    assert_eq!(usage_updates.len(), 1, "{updates:?}");
    assert_eq!(usage_updates[0]["used"], 350);
    assert_eq!(usage_updates[0]["size"], 1000);
    assert_eq!(usage_updates[0]["cost"]["currency"], "EUR");
    let first_cost = usage_updates[0]["cost"]["amount"].as_f64().unwrap();
    assert!((first_cost - 0.001).abs() < 1e-12, "{first_cost}");

    // Switched: the next call goes to the other endpoint model; the cost keeps adding up.
    let set = json!({"sessionId": session, "configId": "model", "value": "small"});
    let (_, switched) = kin.request(3, "session/set_config_option", set).await;
    assert_eq!(
        model_option(&switched["result"]["configOptions"])["currentValue"],
        "small",
        "{switched}"
    );
    let unknown = json!({"sessionId": session, "configId": "model", "value": "huge"});
    let (_, refused) = kin.request(4, "session/set_config_option", unknown).await;
    assert_eq!(refused["error"]["code"], -32602);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("default, small"), "{message}");

    server.push(answer_with_usage("two", 1000, 0));
    let updates = kin.turn(5, &session, "b").await;
    let requests = server.requests();
    assert_eq!(requests[0].body["model"], "mock-model");
    assert_eq!(requests[1].body["model"], "mock-small");
    let usage_updates = of_kind(&updates, "usage_update");
    assert_eq!(usage_updates[0]["size"], 500);
    let total = usage_updates[0]["cost"]["amount"].as_f64().unwrap();
    assert!((total - (0.001 + 0.001)).abs() < 1e-12, "{total}");

    let log = kin.log(&session);
    let switches: Vec<&Value> = log.iter().filter(|e| e["type"] == "model/set").collect();
    assert_eq!(switches.len(), 1);
    assert_eq!(switches[0]["data"]["model"], "small");
    let turn_ends: Vec<&Value> = log.iter().filter(|e| e["type"] == "turn/end").collect();
    assert_eq!(turn_ends[0]["data"]["usage"]["inputTokens"], 300);
    assert_eq!(turn_ends[0]["data"]["usage"]["outputTokens"], 50);
    let turn_cost = turn_ends[0]["data"]["usage"]["cost"].as_f64().unwrap();
    assert!((turn_cost - 0.001).abs() < 1e-12, "{turn_cost}");

    // Another process loads it: the switch is restored.
    let home = kin.stop().await;
    let mut again = start(&server, home);
    again.initialize_with_compaction().await;
    let (_, loaded) = again.load(1, &session).await;
    assert_eq!(
        model_option(&loaded["result"]["configOptions"])["currentValue"],
        "small",
        "{loaded}"
    );
}

#[tokio::test]
async fn a_session_over_the_threshold_is_compacted_and_loads_with_its_summary() {
    let server = MockServer::start();
    // The first answer alone passes half the window (the system prompt and tools are
    // ~3,500 tokens of it, so compacting the first turn makes room).
    let mut kin = start(
        &server,
        common::home_with("context_window = 40000\ncompact_at = 0.5\n"),
    );
    kin.initialize_with_compaction().await;
    let session = kin.new_session().await;
    let first = format!("first answer {}", "y".repeat(70_000));
    server.push(answer_with_usage(&first, 3_500, 17_500));
    let (_, answer) = kin.prompt(2, &session, "first").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    server.push(text_reply(&["SUMMARY-OF-TURN-1"]));
    server.push(answer_with_usage("second answer", 200, 10));
    let (updates, answer) = kin.prompt(3, &session, "second").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "one summary call, then the step");
    let summary_request = requests[1].body["messages"].to_string();
    assert!(
        summary_request.contains("is being compacted"),
        "{summary_request}"
    );
    assert!(summary_request.contains("first answer"));
    let step = requests[2].body["messages"].to_string();
    assert!(step.contains("SUMMARY-OF-TURN-1"), "{step}");
    assert!(
        !step.contains("first answer"),
        "the summarised turn is gone: {step}"
    );
    let seen = kinds(&updates);
    let at = |kind: &str| seen.iter().position(|k| k == kind).unwrap();
    assert!(
        at("compaction_update") < at("compaction_summary_chunk"),
        "{seen:?}"
    );
    let chunks = of_kind(&updates, "compaction_summary_chunk");
    assert_eq!(chunks[0]["content"]["text"], "SUMMARY-OF-TURN-1");
    let statuses: Vec<&Value> = of_kind(&updates, "compaction_update")
        .iter()
        .map(|u| &u["status"])
        .collect();
    assert_eq!(statuses, [&json!("in_progress"), &json!("completed")]);

    let log = kin.log(&session);
    let began = log
        .iter()
        .find(|e| e["type"] == "compaction/start")
        .unwrap();
    assert_eq!(began["data"]["throughTurn"], 1);
    assert_eq!(began["data"]["trigger"], "threshold");
    let end = log.iter().find(|e| e["type"] == "compaction/end").unwrap();
    assert_eq!(end["data"]["summary"], "SUMMARY-OF-TURN-1");

    // Loaded elsewhere: the full history and the compaction are replayed.
    let home = kin.stop().await;
    let mut again = start(&server, home);
    again.initialize_with_compaction().await;
    let (replayed, loaded) = again.load(1, &session).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let text: String = of_kind(&replayed, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert!(
        text.contains("first answer") && text.contains("second answer"),
        "{text}"
    );
    assert_eq!(of_kind(&replayed, "compaction_summary_chunk").len(), 1);
    let mut schema = AcpSchema::load();
    for update in &replayed {
        schema
            .check_agent_message(update, &Default::default())
            .unwrap_or_else(|e| panic!("{e}: {update}"));
    }
}

#[tokio::test]
async fn a_context_length_error_compacts_and_the_turn_goes_on() {
    let server = MockServer::start();
    // The whole request each time: with the window learned from the refusal, kin would first
    // try the lean request, which fits (local_models::small_windows covers that path).
    let mut kin = start(&server, common::home_with("[tools]\nlean = \"off\"\n"));
    kin.initialize_with_compaction().await;
    let session = kin.new_session().await;
    server.push(text_reply(&["first answer"]));
    kin.prompt(2, &session, "first").await;

    server.push(error_reply(
        400,
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    ));
    server.push(text_reply(&["SHORT-SUMMARY"]));
    server.push(text_reply(&["second answer"]));
    let updates = kin.turn(3, &session, "second").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests[3].body["messages"]
        .to_string()
        .contains("SHORT-SUMMARY"));
    // No context window is configured, but the endpoint's refusal named it: the usage
    // updates after it carry that size.
    let sizes: Vec<&Value> = of_kind(&updates, "usage_update")
        .iter()
        .map(|u| &u["size"])
        .collect();
    assert_eq!(sizes, [&json!(8192)]);
    let log = kin.log(&session);
    let began = log
        .iter()
        .find(|e| e["type"] == "compaction/start")
        .unwrap();
    assert_eq!(began["data"]["trigger"], "overflow");
}

#[tokio::test]
async fn a_child_runs_on_the_model_it_names_and_its_cost_reaches_the_parent() {
    let server = MockServer::start();
    let mut kin = start(&server, common::home_with(CONFIG));
    kin.initialize_with_compaction().await;
    let session = kin.new_session().await;
    let call = r#"{"description":"cheap work","prompt":"do it","model":"small"}"#;
    // Parent: 20 in, 5 out (2 and 8 per M); child on small: 100 in (1 per M); parent: 50 in.
    server.push(tool_calls_reply(&[("call_1", "subagent", call)]));
    server.push(answer_with_usage("child result", 100, 0));
    server.push(answer_with_usage("all done", 50, 0));
    let updates = kin.turn(2, &session, "go").await;
    let requests = server.requests();
    assert_eq!(requests[0].body["model"], "mock-model");
    assert_eq!(requests[1].body["model"], "mock-small", "the child's call");
    assert_eq!(requests[2].body["model"], "mock-model");
    let last = of_kind(&updates, "usage_update")
        .last()
        .cloned()
        .unwrap()
        .clone();
    let cost = last["cost"]["amount"].as_f64().unwrap();
    let expected = (20.0 * 2.0 + 5.0 * 8.0 + 100.0 * 1.0 + 50.0 * 2.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");

    // An unknown id is told to the model, with the ids it may use.
    let bad = r#"{"description":"x","prompt":"y","model":"huge"}"#;
    server.push(tool_calls_reply(&[("call_2", "subagent", bad)]));
    server.push(text_reply(&["ok"]));
    kin.prompt(3, &session, "again").await;
    let told = server.requests()[4].body["messages"].to_string();
    assert!(
        told.contains("unknown model") && told.contains("default, small"),
        "{told}"
    );
}

#[tokio::test]
async fn slash_compact_and_slash_model_act_through_the_binary() {
    let server = MockServer::start();
    let mut kin = start(&server, common::home_with(CONFIG));
    kin.initialize_with_compaction().await;
    let session = kin.new_session().await;
    server.push(answer_with_usage("first answer", 100, 10));
    kin.turn(2, &session, "first").await;

    // `/compact`: one summary call, its updates, its log events; no turn of its own.
    server.push(text_reply(&["SUMMARY-ON-REQUEST"]));
    let updates = kin.turn(3, &session, "/compact").await;
    assert_eq!(server.requests().len(), 2, "one summary call");
    let chunks = of_kind(&updates, "compaction_summary_chunk");
    assert_eq!(chunks[0]["content"]["text"], "SUMMARY-ON-REQUEST");
    let log = kin.log(&session);
    let end = log.iter().find(|e| e["type"] == "compaction/end").unwrap();
    assert_eq!(end["data"]["summary"], "SUMMARY-ON-REQUEST");

    // `/model small`: logged, and the next call goes to that model.
    kin.turn(4, &session, "/model small").await;
    assert_eq!(server.requests().len(), 2, "no model call for /model");
    server.push(answer_with_usage("on the small one", 50, 5));
    kin.turn(5, &session, "hello").await;
    let requests = server.requests();
    assert_eq!(requests.last().unwrap().body["model"], "mock-small");
    let log = kin.log(&session);
    assert!(
        log.iter()
            .any(|e| e["type"] == "model/set" && e["data"]["model"] == "small"),
        "{log:?}"
    );
    // An unknown model is refused with the known ones named.
    let (_, answer) = kin.prompt(6, &session, "/model nope").await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("small"),
        "{answer}"
    );
}

#[tokio::test]
async fn the_roots_usage_update_shows_its_trees_budget_and_a_restart_keeps_the_spend() {
    let server = MockServer::start();
    let config = format!("{CONFIG}\n[delegation]\nbudget_tokens = 200\n");
    let mut kin = start(&server, common::home_with(&config));
    kin.initialize_with_compaction().await;
    let session = kin.new_session().await;
    let call = r#"{"description":"work","prompt":"do it"}"#;
    // Parent: 20 + 5 tokens; child: 100; parent: 50. The tree spent 175 of 200.
    server.push(tool_calls_reply(&[("call_1", "subagent", call)]));
    server.push(answer_with_usage("child result", 100, 0));
    server.push(answer_with_usage("all done", 50, 0));
    let updates = kin.turn(2, &session, "go").await;
    let budgets: Vec<Value> = of_kind(&updates, "usage_update")
        .into_iter()
        .filter(|u| u.pointer("/_meta/kin.budget").is_some())
        .map(|u| u["_meta"]["kin.budget"]["tokens"].clone())
        .collect();
    assert_eq!(
        budgets,
        [
            json!({"spent": 25, "limit": 200, "remaining": 175}),
            json!({"spent": 175, "limit": 200, "remaining": 25}),
        ],
        "the root's own calls count, and the child's"
    );

    // A new process: the spend is read back from the logs; 25 more reach the budget, and
    // the next spawn is refused.
    let home = kin.stop().await;
    let mut again = start(&server, home);
    again.initialize_with_compaction().await;
    let (_, loaded) = again.load(1, &session).await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    server.push(tool_calls_reply(&[("call_2", "subagent", call)]));
    server.push(text_reply(&["refused, then"]));
    again.turn(2, &session, "more").await;
    let requests = server.requests();
    assert_eq!(requests.len(), 5, "no child ran after the restart");
    let told = requests[4].body["messages"].to_string();
    assert!(
        told.contains("the delegation budget_tokens of 200 is spent (200 tokens"),
        "{told}"
    );
}

#[tokio::test]
async fn a_cancelled_slash_compact_answers_cancelled() {
    let server = MockServer::start();
    let mut kin = start(&server, common::home_with(CONFIG));
    kin.initialize_with_compaction().await;
    let session = kin.new_session().await;
    server.push(answer_with_usage("first answer", 100, 10));
    kin.prompt(2, &session, "first").await;
    // The summary call never answers; the client cancels once the compaction has begun.
    server.push(Reply::Hang(Vec::new()));
    kin.send_prompt(3, &session, "/compact").await;
    loop {
        let message = kin.read().await.expect("kin answers");
        let update = message.pointer("/params/update");
        if update.is_some_and(|u| u["sessionUpdate"] == "compaction_update") {
            break;
        }
    }
    let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel",
                        "params": {"sessionId": session}});
    kin.send(&cancel).await;
    let (_, answer) = kin.answer(&json!(3)).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    let log = kin.log(&session);
    let end = log.iter().find(|e| e["type"] == "compaction/end").unwrap();
    assert!(end["data"].get("summary").is_none(), "{end}");
}

//! Time limits of delegated children: the idle watchdog, the wall clock with its wrap-up
//! message, and `timed_out` as the one stop reason they report, told to the parent once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kin::config::DelegationSettings;
use kin::runtime::RuntimeOptions;
use kin::session::history::HistoryItem;
use serde_json::{json, Value};

use super::support::{calls, last_user_text, text, Reply, ScriptedModel, World};

fn limited(timeout: Option<f64>, idle: Option<f64>) -> RuntimeOptions {
    RuntimeOptions {
        delegation: DelegationSettings {
            timeout: timeout.map(Duration::from_secs_f64),
            idle_timeout: idle.map(Duration::from_secs_f64),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn turn_end_kinds(world: &World, id: &str) -> Vec<Value> {
    world
        .log(id)
        .iter()
        .filter(|e| e["type"] == "turn/end")
        .map(|e| e["data"]["reason"]["kind"].clone())
        .collect()
}

/// A parent that makes one call with `arguments`, then answers "done"; its children's
/// replies come from `child`.
fn parent_and(
    tool: &'static str,
    arguments: Value,
    child: impl Fn(&kin::model::ModelRequest) -> Reply + Send + Sync + 'static,
) -> Arc<ScriptedModel> {
    ScriptedModel::new(move |req| {
        if last_user_text(req).starts_with("parent:") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("done"),
                _ => calls(&[(tool, arguments.clone())]),
            };
        }
        child(req)
    })
}

#[tokio::test]
async fn a_stalled_child_times_out_once_and_the_parent_is_told_once() {
    let model = parent_and(
        "subagent",
        json!({"description": "stall", "prompt": "stall"}),
        |_| Reply::Hang,
    );
    let world = World::with_options(model, limited(None, Some(0.3)));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let child = world.only_child(&parent.id);
    assert_eq!(
        world.tool_results(&parent.id),
        [(
            "Error: subagent run timed_out\nDiagnostic: no model output or tool progress for 0.3s"
                .to_owned(),
            true
        )]
    );
    assert_eq!(turn_end_kinds(&world, &child), [json!("timed_out")]);
}

#[tokio::test]
async fn a_looping_child_gets_the_wrap_up_message_then_times_out() {
    let wrap_ups = Arc::new(AtomicUsize::new(0));
    let seen = wrap_ups.clone();
    let model = parent_and(
        "subagent",
        json!({"description": "loop", "prompt": "loop", "timeout": 1}),
        move |req| {
            let told = req
                .history
                .iter()
                .any(|item| format!("{item:?}").contains("Wrap up now"));
            if told {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            // Ignores the advice: keeps calling a tool, one slow step after another.
            match calls(&[("task_list", json!({}))]) {
                Reply::Chunks(chunks) => Reply::Slow(Duration::from_millis(40), chunks),
                other => other,
            }
        },
    );
    // The configured idle watchdog never fires: the child makes progress all along.
    let world = World::with_options(model, limited(Some(60.0), Some(30.0)));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let child = world.only_child(&parent.id);
    assert_eq!(
        world.tool_results(&parent.id),
        [(
            "Error: subagent run timed_out\nDiagnostic: the time limit of 1s was reached"
                .to_owned(),
            true
        )]
    );
    let steering: Vec<Value> = world
        .log(&child)
        .into_iter()
        .filter(|e| e["type"] == "steering/message")
        .collect();
    assert_eq!(steering.len(), 1, "one wrap-up message");
    assert!(wrap_ups.load(Ordering::SeqCst) >= 1, "the model saw it");
    assert_eq!(turn_end_kinds(&world, &child), [json!("timed_out")]);
}

#[tokio::test]
async fn a_background_child_that_times_out_settles_timed_out_with_one_notice() {
    let model = ScriptedModel::new(move |req| {
        let asked = last_user_text(req);
        if asked == "stall" {
            return Reply::Hang;
        }
        if asked.starts_with("background task subagent-1") || asked == "parent: next" {
            return text("noted");
        }
        match req.history.last() {
            Some(HistoryItem::ToolResult { .. }) => text("started it"),
            _ => calls(&[(
                "subagent",
                json!({"description": "bg", "prompt": "stall", "run_in_background": true}),
            )]),
        }
    });
    let world = World::with_options(model, limited(Some(0.3), None));
    let parent = world.session();
    world.prompt(&parent, "parent: start").await;
    world.runtime.tasks().until_settled("subagent-1").await;
    world.prompt(&parent, "parent: next").await;
    let notices: Vec<String> = world
        .log(&parent.id)
        .into_iter()
        .filter(|e| e["type"] == "user/message" && e["data"]["source"]["kind"] == "plugin")
        .map(|e| e["data"]["content"][0]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        notices,
        [
            "background task subagent-1 (subagent: bg) finished [status: failed, timed_out: \
          the time limit of 0.3s was reached]. Read its output with task_output."
        ]
    );
    let child = world.only_child(&parent.id);
    assert_eq!(turn_end_kinds(&world, &child), [json!("timed_out")]);
    let listed = world.runtime.delegation().list(&parent.id);
    assert_eq!(listed[0].last_stop.as_deref(), Some("timed_out"));
}

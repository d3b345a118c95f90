//! The concurrency cap: background activations past `[delegation] max_running` wait in line,
//! show as `queued`, start in arrival order as slots free, and can be killed while waiting.

use std::sync::{Arc, Mutex};

use kin::config::DelegationSettings;
use kin::runtime::RuntimeOptions;
use kin::session::history::HistoryItem;
use kin::tasks::{KillResult, TaskStatus};
use serde_json::json;

use super::support::{calls, last_user_text, text, text_chunks, Gate, Reply, ScriptedModel, World};

const CAP: usize = 3;
const CHILDREN: usize = 20;

fn running(world: &World, parent: &str) -> usize {
    world
        .runtime
        .tasks()
        .list(parent)
        .iter()
        .filter(|t| t.status == TaskStatus::Running)
        .count()
}

#[tokio::test]
async fn twenty_children_under_a_cap_of_three_run_in_order_and_a_queued_one_can_be_killed() {
    let gate = Gate::new();
    let entered: Arc<Mutex<Vec<String>>> = Arc::default();
    let (child_gate, order) = (gate.clone(), entered.clone());
    let model = ScriptedModel::new(move |req| {
        let asked = last_user_text(req);
        if let Some(n) = asked.strip_prefix("child ") {
            order.lock().unwrap().push(n.to_owned());
            return Reply::Gated(child_gate.clone(), text_chunks(&format!("answer {n}")));
        }
        if asked.starts_with("parent:") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("started them"),
                _ => {
                    let starts: Vec<(&str, serde_json::Value)> = (1..=CHILDREN)
                        .map(|n| {
                            (
                                "subagent",
                                json!({"description": format!("job {n}"), "prompt": format!("child {n}"), "run_in_background": true}),
                            )
                        })
                        .collect();
                    calls(&starts)
                }
            };
        }
        text("noted")
    });
    let options = RuntimeOptions {
        delegation: DelegationSettings {
            max_running: CAP,
            ..Default::default()
        },
        ..Default::default()
    };
    let world = World::with_options(model, options);
    let parent = world.session();
    world.prompt(&parent, "parent: start").await;
    for _ in 0..CAP {
        gate.wait_entered().await;
    }
    let tasks = world.runtime.tasks().list(&parent.id);
    assert_eq!(running(&world, &parent.id), CAP);
    assert_eq!(
        tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Queued)
            .count(),
        CHILDREN - CAP
    );
    // What the model was told and what it can list say so too.
    let listed = world.runtime.delegation().list(&parent.id);
    assert_eq!(listed.iter().filter(|c| c.queued).count(), CHILDREN - CAP);
    let log = std::fs::read_to_string(
        world
            .home
            .path()
            .join(format!("sessions/{}.jsonl", parent.id)),
    )
    .unwrap();
    assert!(
        log.contains("as task subagent-4\\n(queued: 3 background subagents"),
        "{log}"
    );

    // A queued one is killed: it never reaches the model, the rest move up.
    let killed = world
        .runtime
        .tasks()
        .kill("subagent-10", &parent.id, None)
        .unwrap();
    assert_eq!(killed, KillResult::Requested);
    world.runtime.tasks().until_settled("subagent-10").await;

    for _ in CAP..CHILDREN - 1 {
        gate.release();
        gate.wait_entered().await;
        assert!(
            running(&world, &parent.id) <= CAP,
            "never more than the cap"
        );
    }
    for _ in 0..CAP {
        gate.release();
    }
    for n in 1..=CHILDREN {
        world
            .runtime
            .tasks()
            .until_settled(&format!("subagent-{n}"))
            .await;
    }
    let expected: Vec<String> = (1..=CHILDREN)
        .filter(|n| *n != 10)
        .map(|n| n.to_string())
        .collect();
    assert_eq!(
        *entered.lock().unwrap(),
        expected,
        "first come, first served"
    );
    for task in world.runtime.tasks().list(&parent.id) {
        let want = if task.id.as_str() == "subagent-10" {
            TaskStatus::Killed
        } else {
            TaskStatus::Completed
        };
        assert_eq!(task.status, want, "{}", task.id.as_str());
    }
}

#[tokio::test]
async fn a_foreground_child_is_not_queued_behind_background_ones() {
    let gate = Gate::new();
    let child_gate = gate.clone();
    let model = ScriptedModel::new(move |req| {
        let asked = last_user_text(req);
        match asked.as_str() {
            "background" => return Reply::Gated(child_gate.clone(), text_chunks("late")),
            "foreground" => return text("FOREGROUND_OK"),
            _ => {}
        }
        match req.history.last() {
            Some(HistoryItem::ToolResult { .. }) => text("done"),
            _ => calls(&[
                (
                    "subagent",
                    json!({"description": "bg", "prompt": "background", "run_in_background": true}),
                ),
                (
                    "subagent",
                    json!({"description": "fg", "prompt": "foreground"}),
                ),
            ]),
        }
    });
    let options = RuntimeOptions {
        delegation: DelegationSettings {
            max_running: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let world = World::with_options(model, options);
    let parent = world.session();
    // The background child holds the only slot until released; the foreground one answers.
    world.prompt(&parent, "parent: go").await;
    let log = std::fs::read_to_string(
        world
            .home
            .path()
            .join(format!("sessions/{}.jsonl", parent.id)),
    )
    .unwrap();
    assert!(log.contains("FOREGROUND_OK"), "{log}");
    gate.release();
    world.runtime.tasks().until_settled("subagent-1").await;
}

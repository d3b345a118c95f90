//! `Delegation`, the front door: the caller looked up by session id, provider names,
//! validation before any child exists, and the route chosen once.

use kin::delegation::{Delegated, Mode};
use serde_json::json;

use super::support::{request, text, ScriptedModel, World};

fn world() -> World {
    World::new(ScriptedModel::new(|_| text("answer")))
}

#[tokio::test]
async fn the_caller_is_the_live_session_the_tool_context_names() {
    let world = world();
    let delegation = world.runtime.delegation();
    let parent = world.session();
    let error = delegation
        .delegate("no-such-session", request("spawn", "x"), Mode::Foreground)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "NO_CALLER");
    assert_eq!(
        world.stored(),
        vec![parent.id.clone()],
        "nothing was started"
    );

    let Delegated::Answer(result) = delegation
        .delegate(&parent.id, request("spawn", "x"), Mode::Foreground)
        .await
        .unwrap()
    else {
        panic!("a foreground delegation answers");
    };
    assert_eq!(result.text(), "answer");
    let child = world.only_child(&parent.id);
    assert_eq!(
        world.log(&child)[0]["parentSession"],
        json!(parent.id.clone())
    );
    assert!(world.runtime.host().live(&child).is_none(), "disposed");
}

#[tokio::test]
async fn rejects_absent_provider_names() {
    let world = world();
    let parent = world.session();
    let error = world
        .runtime
        .delegation()
        .delegate(&parent.id, request("nope", "x"), Mode::Foreground)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "NO_PROVIDER");
    assert_eq!(
        error.to_string(),
        "no subagent provider registered for \"nope\""
    );
}

#[tokio::test]
async fn in_process_background_children_are_continuable_and_their_task_is_recorded() {
    let world = world();
    let parent = world.session();
    let Delegated::Continuable { child, task } = world
        .runtime
        .delegation()
        .delegate(&parent.id, request("spawn", "x"), Mode::Background)
        .await
        .unwrap()
    else {
        panic!("spawn children are continuable");
    };
    // The parent is idle: its log holds the task's start at once.
    let starts: Vec<_> = world
        .log(&parent.id)
        .into_iter()
        .filter(|line| line["type"] == "task/start")
        .collect();
    assert_eq!(
        starts,
        [
            json!({"type": "task/start", "seq": starts[0]["seq"], "time": starts[0]["time"],
            "data": {"task": task.as_str(), "kind": "subagent", "label": "a task", "child": child}})
        ]
    );
}

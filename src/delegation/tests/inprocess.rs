//! The in-process driver through the `spawn` and `fork` providers.

use std::sync::Arc;

use kin::agent::StopReason;
use kin::agent::{Agent, AgentOptions};
use kin::delegation::{DelegationError, StartRequest, ToolFilter};
use kin::session::{FinishKind, UserPart};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::start_child;
use super::support::{calls, last_user_text, prompt, text, text_with, Reply, ScriptedModel, World};

fn request(parent: &Arc<Agent>, text: &str) -> StartRequest {
    StartRequest::new(prompt(text), parent.clone(), CancellationToken::new())
}

/// Children (session id != parent) answer with their prompt in upper case.
fn echo_model() -> Arc<ScriptedModel> {
    ScriptedModel::new(|req| text(&last_user_text(req).to_uppercase()))
}

#[tokio::test]
async fn spawn_publishes_a_fresh_child_runs_it_and_disposes_it() {
    let world = World::new(echo_model());
    let parent = world.session();
    let service = world.runtime.delegation().clone();
    let run = start_child(&service, "spawn", request(&parent, "child ok"))
        .await
        .unwrap();
    let child = run.local_agent.clone().unwrap();
    assert!(
        world.runtime.host().live(&run.id).is_some(),
        "published when start returns"
    );
    assert_eq!(child.options.subagent_depth, Some(1));
    let result = run.result().await;
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert_eq!(result.text(), "CHILD OK");
    run.dispose().await;
    run.dispose().await;
    assert!(
        world.runtime.host().live(&run.id).is_none(),
        "disposed: no longer live"
    );
    let log = world.log(&run.id);
    assert_eq!(log[0]["parentSession"], Value::from(parent.id.clone()));
    assert_eq!(log[0]["delegationDepth"], 1);
    assert_eq!(log[0]["cwd"], log_of_parent_cwd(&world, &parent));
    assert_eq!(log[1]["type"], "turn/start", "a fresh child starts empty");
    assert_eq!(log.last().unwrap()["type"], "turn/end");
    assert_eq!(
        world.log(&parent.id).len(),
        1,
        "the parent log is untouched"
    );
    assert_eq!(child.cwd, parent.cwd, "the child inherits the cwd");
}

/// The `cwd` recorded in the parent's header.
fn log_of_parent_cwd(world: &World, parent: &Agent) -> Value {
    world.log(&parent.id)[0]["cwd"].clone()
}

#[tokio::test]
async fn a_disposed_child_is_freed() {
    let world = World::new(echo_model());
    let parent = world.session();
    for provider in ["spawn", "fork"] {
        let run = start_child(
            world.runtime.delegation(),
            provider,
            request(&parent, "child ok"),
        )
        .await
        .unwrap();
        let child = Arc::downgrade(run.local_agent.as_ref().unwrap());
        assert_eq!(run.result().await.stop_reason, StopReason::Completed);
        run.dispose().await;
        drop(run);
        assert!(
            child.upgrade().is_none(),
            "{provider}: nothing holds a disposed child once its run is dropped"
        );
    }
}

#[tokio::test]
async fn depth_is_parent_depth_plus_one_and_capped_by_max_depth() {
    let world = World::new(echo_model());
    let parent = world.session();
    let service = world.runtime.delegation().clone();
    let mut capped = request(&parent, "x");
    capped.max_depth = Some(0);
    let before = world.stored();
    let error = start_child(&service, "spawn", capped).await.err().unwrap();
    assert_eq!(error.to_string(), "subagent depth 1 exceeds maxDepth 0");
    assert_eq!(world.stored(), before, "nothing left behind");

    // A child whose header says depth 1 (e.g. loaded from disk) delegates at depth 2.
    let make = |depth: u32, runtime_depth: Option<u32>| {
        let options = AgentOptions {
            subagent_depth: runtime_depth,
            ..Default::default()
        };
        world.published_agent(depth, options)
    };
    let resumed = make(1, None);
    let mut req = request(&resumed, "x");
    req.max_depth = Some(1);
    assert_eq!(
        start_child(&service, "spawn", req).await.err().unwrap(),
        DelegationError::Depth {
            attempted: 2,
            max: 1
        }
    );
    // Runtime depth can deepen but never lower the header's.
    let deep = make(2, Some(1));
    let mut req = request(&deep, "x");
    req.max_depth = Some(2);
    assert_eq!(
        start_child(&service, "spawn", req).await.err().unwrap(),
        DelegationError::Depth {
            attempted: 3,
            max: 2
        }
    );
}

#[tokio::test]
async fn an_already_cancelled_request_publishes_nothing() {
    let world = World::new(echo_model());
    let parent = world.session();
    let before = world.stored();
    let req = StartRequest::new(prompt("x"), parent, CancellationToken::new());
    req.cancel.cancel();
    let error = start_child(world.runtime.delegation(), "spawn", req)
        .await
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "subagent request was aborted before child publication"
    );
    assert_eq!(world.stored(), before);
}

#[tokio::test]
async fn cancelling_or_disposing_a_running_child_settles_it_as_aborted() {
    let model = ScriptedModel::new(|_| Reply::Hang);
    let world = World::new(model.clone());
    let parent = world.session();
    for use_dispose in [false, true] {
        let req = request(&parent, "work forever");
        let cancel = req.cancel.clone();
        let run = start_child(world.runtime.delegation(), "spawn", req)
            .await
            .unwrap();
        if use_dispose {
            run.dispose().await;
        } else {
            cancel.cancel();
        }
        let result = run.result().await;
        assert_eq!(result.stop_reason, StopReason::Cancelled);
        assert!(result.output.is_empty());
        run.dispose().await;
        let log = world.log(&run.id);
        assert_eq!(log.last().unwrap()["data"]["reason"]["kind"], "aborted");
    }
}

#[tokio::test]
async fn maps_token_limits_refusals_and_failures() {
    let model = ScriptedModel::new(|req| match last_user_text(req).as_str() {
        "long" => text_with("cut o", FinishKind::MaxTokens),
        "rude" => text_with("no", FinishKind::Refusal),
        _ => Reply::Fail("endpoint exploded"),
    });
    let world = World::new(model);
    let parent = world.session();
    for (ask, expected) in [
        ("long", StopReason::MaxTokens),
        ("rude", StopReason::Refusal),
        ("boom", StopReason::Error),
    ] {
        let run = start_child(world.runtime.delegation(), "spawn", request(&parent, ask))
            .await
            .unwrap();
        let result = run.result().await;
        run.dispose().await;
        assert_eq!(result.stop_reason, expected, "{ask}");
        if expected == StopReason::Error {
            assert!(result.output.is_empty(), "no partial output on failure");
        }
    }
}

#[tokio::test]
async fn inherits_the_token_cap_and_accepts_an_override() {
    let model = echo_model();
    let world = World::new(model.clone());
    let parent = world.published_agent(
        0,
        AgentOptions {
            max_tokens: Some(111),
            ..Default::default()
        },
    );
    let inherited = start_child(world.runtime.delegation(), "spawn", request(&parent, "a"))
        .await
        .unwrap();
    inherited.result().await;
    let mut req = request(&parent, "b");
    req.agent_options = Some(AgentOptions {
        max_tokens: Some(222),
        ..Default::default()
    });
    let overridden = start_child(world.runtime.delegation(), "spawn", req)
        .await
        .unwrap();
    overridden.result().await;
    let caps: Vec<_> = model
        .requests()
        .iter()
        .map(|r| (r.session_id.clone(), r.max_tokens))
        .collect();
    assert!(caps.contains(&(inherited.id.clone(), Some(111))));
    assert!(caps.contains(&(overridden.id.clone(), Some(222))));
}

#[tokio::test]
async fn persona_and_tool_filter_shape_only_the_child() {
    let model = ScriptedModel::new(|req| {
        if last_user_text(req) == "use task_list" {
            calls(&[("task_list", json!({}))])
        } else {
            text("done")
        }
    });
    let world = World::new(model.clone());
    let parent = world.session();
    let mut req = request(&parent, "use task_list");
    req.persona = Some("You are a meticulous reviewer.".into());
    req.tool_filter = Some(ToolFilter {
        allow: None,
        deny: Some(vec!["task_list".into()]),
    });
    let run = start_child(world.runtime.delegation(), "spawn", req)
        .await
        .unwrap();
    run.result().await;
    run.dispose().await;
    let child_requests: Vec<_> = model
        .requests()
        .into_iter()
        .filter(|r| r.session_id == run.id)
        .collect();
    assert!(child_requests[0]
        .system
        .starts_with("You are a meticulous reviewer."));
    assert!(
        child_requests[0]
            .tools
            .iter()
            .all(|t| t.name != "task_list"),
        "denied tools are hidden"
    );
    let result = world
        .log(&run.id)
        .into_iter()
        .find(|e| e["type"] == "tool/result")
        .unwrap();
    assert_eq!(
        result["data"]["error"]["code"], "UNKNOWN_TOOL",
        "and refused if called anyway"
    );

    // The parent's own requests keep the default persona and every tool.
    world.prompt(&parent, "hello").await;
    let parent_request = model
        .requests()
        .into_iter()
        .find(|r| r.session_id == parent.id)
        .unwrap();
    assert!(parent_request.system.starts_with("You are kin"));
    assert!(parent_request.tools.iter().any(|t| t.name == "task_list"));
}

#[tokio::test]
async fn an_unknown_tool_filter_name_fails_the_start_with_nothing_left() {
    let world = World::new(echo_model());
    let parent = world.session();
    let before = world.stored();
    let mut req = request(&parent, "x");
    req.tool_filter = Some(ToolFilter {
        allow: Some(vec!["no_such_tool".into()]),
        deny: None,
    });
    let error = start_child(world.runtime.delegation(), "spawn", req)
        .await
        .err()
        .unwrap();
    assert!(error
        .to_string()
        .contains("unknown global tool \"no_such_tool\""));
    assert_eq!(world.stored(), before);
}

#[tokio::test]
async fn steer_is_strict_a_settled_child_refuses() {
    let world = World::new(echo_model());
    let parent = world.session();
    let run = start_child(world.runtime.delegation(), "spawn", request(&parent, "x"))
        .await
        .unwrap();
    run.result().await;
    let error = run
        .steer(vec![UserPart::Text {
            text: "more".into(),
        }])
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("is not running; the message was not delivered"),
        "{error}"
    );
    run.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steering_lands_in_the_running_turn() {
    // The child's first model call tells the test it is running, then holds until released.
    let (called_tx, called_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let first = std::sync::Mutex::new(Some((called_tx, release_rx)));
    let model = ScriptedModel::new(move |req| {
        if last_user_text(req) == "also say HI" {
            return text("HI");
        }
        if let Some((called, release)) = first.lock().unwrap().take() {
            called.send(()).unwrap();
            release.recv().unwrap();
            return text("first answer");
        }
        text("plain")
    });
    let world = World::new(model.clone());
    let parent = world.session();
    let run = start_child(
        world.runtime.delegation(),
        "spawn",
        request(&parent, "start"),
    )
    .await
    .unwrap();
    called_rx.await.unwrap();
    run.steer(vec![UserPart::Text {
        text: "also say HI".into(),
    }])
    .await
    .unwrap();
    release_tx.send(()).unwrap();
    let result = run.result().await;
    run.dispose().await;
    assert_eq!(
        result.text(),
        "HI",
        "a message steered after the last call still gets an answer"
    );
    let log = world.log(&run.id);
    let steering = log
        .iter()
        .find(|e| e["type"] == "steering/message")
        .unwrap();
    assert_eq!(steering["data"]["turn"], 1);
    assert_eq!(
        log.iter().filter(|e| e["type"] == "turn/start").count(),
        1,
        "same turn"
    );
}

#[tokio::test]
async fn fork_seeds_the_completed_turns_and_reads_only_its_own_output() {
    let model = ScriptedModel::new(|req| match last_user_text(req).as_str() {
        "remember MARMALADE" => text("OK"),
        "what was it?" => text("MARMALADE"),
        _ => Reply::Chunks(vec![super::support::finish(FinishKind::Stop)]),
    });
    let world = World::new(model.clone());
    let parent = world.session();

    // No completed turn yet: the fork is a fresh child.
    let fresh = start_child(
        world.runtime.delegation(),
        "fork",
        request(&parent, "what was it?"),
    )
    .await
    .unwrap();
    fresh.result().await;
    fresh.dispose().await;
    assert!(world.log(&fresh.id)[0].get("seedLength").is_none());

    world.prompt(&parent, "remember MARMALADE").await;
    let parent_events = world.log(&parent.id).len() - 1;
    let run = start_child(
        world.runtime.delegation(),
        "fork",
        request(&parent, "what was it?"),
    )
    .await
    .unwrap();
    let result = run.result().await;
    run.dispose().await;
    assert_eq!(result.text(), "MARMALADE");
    let log = world.log(&run.id);
    assert_eq!(log[0]["seedLength"], parent_events);
    assert_eq!(log[0]["parentSession"], Value::from(parent.id.clone()));
    assert_eq!(
        &log[1..=parent_events],
        &world.log(&parent.id)[1..],
        "the seed is copied verbatim"
    );
    assert_eq!(log[parent_events + 1]["type"], "session/end-seed");
    assert_eq!(log[parent_events + 1]["seq"], parent_events);
    assert_eq!(
        log[parent_events + 2]["data"]["turn"],
        2,
        "the child's turn follows the parent's"
    );
    let child_request = model
        .requests()
        .into_iter()
        .rfind(|r| r.session_id == run.id)
        .unwrap();
    assert!(
        child_request.history.len() >= 3,
        "the child sees the parent's conversation"
    );

    // A child that says nothing does not hand back the parent's seeded words.
    let silent = start_child(
        world.runtime.delegation(),
        "fork",
        request(&parent, "say nothing"),
    )
    .await
    .unwrap();
    let result = silent.result().await;
    silent.dispose().await;
    assert_eq!(result.stop_reason, StopReason::Completed);
    assert!(result.output.is_empty());
}

#[tokio::test]
async fn a_fork_from_inside_a_turn_excludes_the_turn_in_flight() {
    let model = ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        if req
            .history
            .iter()
            .any(|h| matches!(h, kin::session::history::HistoryItem::ToolResult { .. }))
        {
            return text("parent done");
        }
        match asked.as_str() {
            "first" => text("one"),
            "fork now" => calls(&[(
                "subagent_fork",
                json!({"description": "fork", "prompt": "child question"}),
            )]),
            _ => text("child answer"),
        }
    });
    let world = World::new(model);
    let parent = world.session();
    world.prompt(&parent, "first").await;
    let completed = world.log(&parent.id).len() - 1;
    world.prompt(&parent, "fork now").await;
    let child = world
        .stored()
        .into_iter()
        .find(|id| *id != parent.id)
        .unwrap();
    let log = world.log(&child);
    assert_eq!(
        log[0]["seedLength"], completed,
        "only the completed first turn is seeded"
    );
    let seeded_turns: Vec<_> = log[1..=completed]
        .iter()
        .filter(|e| e["type"] == "turn/start")
        .collect();
    assert_eq!(seeded_turns.len(), 1);
}

/// A model that answers with its own name, and can become another one.
struct NamedModel(String);

impl kin::model::Model for NamedModel {
    fn provider(&self) -> String {
        "named".into()
    }
    fn name(&self) -> String {
        self.0.clone()
    }
    fn stream(&self, _request: kin::model::ModelRequest) -> kin::model::ChunkStream {
        match text(&self.0) {
            Reply::Chunks(chunks) => Box::pin(futures::stream::iter(chunks.into_iter().map(Ok))),
            _ => unreachable!(),
        }
    }
    fn with_model_name(&self, name: &str) -> Option<Arc<dyn kin::model::Model>> {
        Some(Arc::new(NamedModel(name.to_owned())))
    }
}

#[tokio::test]
async fn a_child_runs_on_the_parent_model_unless_it_names_another() {
    let world = World::new(Arc::new(NamedModel("base-model".into())));
    let parent = world.session();
    let inherited = start_child(world.runtime.delegation(), "spawn", request(&parent, "a"))
        .await
        .unwrap();
    assert_eq!(inherited.result().await.text(), "base-model");
    let mut req = request(&parent, "b");
    req.agent_options = Some(AgentOptions {
        model: Some("other-model".into()),
        ..Default::default()
    });
    let overridden = start_child(world.runtime.delegation(), "spawn", req)
        .await
        .unwrap();
    assert_eq!(overridden.result().await.text(), "other-model");
    let message = world
        .log(&overridden.id)
        .into_iter()
        .find(|e| e["type"] == "assistant/message")
        .unwrap();
    assert_eq!(message["data"]["message"]["source"]["model"], "other-model");
}

#[tokio::test]
async fn deleting_a_session_deletes_the_sessions_it_delegated_to() {
    let world = World::new(ScriptedModel::new(|req| {
        match (last_user_text(req).as_str(), req.history.last()) {
            (_, Some(kin::session::history::HistoryItem::ToolResult { .. })) => text("done"),
            ("parent: go", _) => {
                calls(&[("subagent", json!({"description": "c", "prompt": "child"}))])
            }
            _ => text("child answer"),
        }
    }));
    let parent = world.session();
    let bystander = world.session();
    world.prompt(&parent, "parent: go").await;
    assert_eq!(world.stored().len(), 3);
    world
        .runtime
        .host()
        .delete_session(&parent.id)
        .await
        .unwrap();
    assert_eq!(world.stored(), std::slice::from_ref(&bystander.id));
    world
        .runtime
        .host()
        .delete_session("never-existed")
        .await
        .unwrap();
}

//! Continuable background children (`SubagentControl`): stable ids, the descriptor, steering,
//! cold resume, and the races of the catalogue — against the real loop, store and tasks.

use std::sync::Arc;
use std::time::Duration;

use kin::agent::{Agent, AgentOptions};
use kin::delegation::{DelegationError, Delivery};
use kin::runtime::RuntimeOptions;
use kin::tasks::{TaskSnapshot, TaskStatus};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{
    calls, last_tool_result, last_user_text, prompt, request, start_continuable, text, text_chunks,
    Gate, Reply, ScriptedModel, World,
};

/// Children answer "first answer" to "child task" and "second answer" to anything else.
fn answers() -> Arc<ScriptedModel> {
    ScriptedModel::new(|req| match last_user_text(req).as_str() {
        "child task" => text("first answer"),
        _ => text("second answer"),
    })
}

/// Starts a continuable `spawn` child of `parent` for `text`: its id and task.
async fn start(world: &World, parent: &Agent, text: &str) -> (String, String) {
    start_continuable(&world.runtime, parent, request("spawn", text)).await
}

/// A child of `parent` started for "child task" whose first turn has settled: its id.
async fn settled(world: &World, parent: &Agent) -> String {
    let (child, task) = start(world, parent, "child task").await;
    wait(world, &task, &parent.id).await;
    child
}

async fn wait(world: &World, task: &str, owner: &str) -> TaskSnapshot {
    world
        .runtime
        .tasks()
        .wait(
            task,
            Duration::from_secs(60),
            owner,
            &CancellationToken::new(),
        )
        .await
        .unwrap()
}

async fn send(
    world: &World,
    parent: &Arc<Agent>,
    child: &str,
    message: &str,
) -> Result<Delivery, DelegationError> {
    world
        .runtime
        .delegation()
        .send_message(&parent.id, child, prompt(message), None)
        .await
}

/// A world whose model holds every call at the returned gate (answering "never" if let go).
fn held_world() -> (World, Arc<Gate>) {
    let gate = Gate::new();
    let held = gate.clone();
    let world = World::new(ScriptedModel::new(move |_| {
        Reply::Gated(held.clone(), text_chunks("never"))
    }));
    (world, gate)
}

fn started(delivery: Result<Delivery, DelegationError>) -> String {
    match delivery {
        Ok(Delivery::Started(task)) => task.to_string(),
        other => panic!("expected a started task, got {other:?}"),
    }
}

fn types(world: &World, id: &str) -> Vec<String> {
    world
        .log(id)
        .iter()
        .skip(1)
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

/// The texts of the child's durable prompts and follow-ups.
fn user_texts(world: &World, id: &str) -> Vec<String> {
    world
        .log(id)
        .iter()
        .filter(|e| e["type"] == "user/message" && e["data"]["source"]["kind"] == "user")
        .map(|e| e["data"]["content"][0]["text"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn start_returns_both_ids_at_once_and_the_task_settles_after_disposal() {
    let world = World::new(answers());
    let parent = world.session();
    let (child, task) = start(&world, &parent, "child task").await;
    assert!(uuid::Uuid::parse_str(&child).is_ok());
    assert_eq!(task, "subagent-1");
    let done = wait(&world, &task, &parent.id).await;
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.output.as_deref(), Some("first answer"));
    assert!(
        world.runtime.host().live(&child).is_none(),
        "disposed before settling"
    );
    let listed = world.runtime.delegation().list(&parent.id);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id.as_str(), listed[0].task.as_ref()),
        (child.as_str(), None)
    );
}

#[tokio::test]
async fn the_child_is_stored_under_its_id_with_a_turn_enclosed_descriptor() {
    let model = answers();
    let world = World::new(model.clone());
    let parent = world.published_agent(
        0,
        AgentOptions {
            provider: Some("mock".into()),
            model: Some("mock".into()),
            ..Default::default()
        },
    );
    let child = settled(&world, &parent).await;
    let log = world.log(&child);
    assert_eq!(log[0]["id"], child.as_str());
    assert_eq!(log[0]["parentSession"], parent.id.as_str());
    let kinds = types(&world, &child);
    let at = |kind: &str| kinds.iter().position(|k| k == kind).unwrap();
    assert!(at("turn/start") < at("subagent/descriptor"));
    assert!(at("subagent/descriptor") < at("assistant/message"));
    let descriptor = &log[1 + at("subagent/descriptor")];
    assert_eq!(
        descriptor["data"],
        json!({"version": 1, "provider": "spawn", "agentProvider": "mock", "agentModel": "mock"})
    );
    assert!(descriptor.get("surfaceOp").is_none());
    // Never part of what the model sees.
    let request = model
        .requests()
        .into_iter()
        .find(|r| r.session_id == child)
        .unwrap();
    assert!(!format!("{:?}", request.history).contains("agentModel"));
}

#[tokio::test]
async fn a_start_that_fails_after_the_ids_were_returned_settles_failed() {
    // Children may not exist at all: the start fails once the ids are out.
    let options = RuntimeOptions {
        subagent_max_depth: 0,
        ..RuntimeOptions::default()
    };
    let world = World::with_options(answers(), options);
    let parent = world.session();
    let (child, task) = start(&world, &parent, "child task").await;
    let done = wait(&world, &task, &parent.id).await;
    assert_eq!(done.status, TaskStatus::Failed);
    assert!(done.detail.unwrap().contains("maxDepth"));
    // Never stored: a follow-up finds it unavailable.
    let again = started(send(&world, &parent, &child, "hello").await);
    let done = wait(&world, &again, &parent.id).await;
    assert_eq!(done.status, TaskStatus::Failed);
    assert_eq!(
        done.detail.unwrap(),
        format!("SubagentControlError: subagent \"{child}\" is unavailable")
    );
}

#[tokio::test]
async fn task_kill_during_the_run_settles_killed_after_the_child_is_quiet() {
    let (world, gate) = held_world();
    let parent = world.session();
    let (child, task) = start(&world, &parent, "child task").await;
    gate.wait_entered().await;
    assert!(world.runtime.host().live(&child).is_some());
    let killed = world.runtime.tasks().kill(&task, &parent.id, None).unwrap();
    assert_eq!(killed, kin::tasks::KillResult::Requested);
    let done = wait(&world, &task, &parent.id).await;
    assert_eq!(done.status, TaskStatus::Killed);
    assert!(world.runtime.host().live(&child).is_none());
}

#[tokio::test(flavor = "current_thread")]
async fn a_child_whose_task_is_cancelled_before_it_ran_is_still_stored_ended_aborted() {
    let model = answers();
    let world = World::new(model.clone());
    let parent = world.session();
    // In one frame: the ids are given out, then kin shuts down before the task first runs.
    let (child, task) = start(&world, &parent, "child task").await;
    world.runtime.shutdown().await;
    let done = world.runtime.tasks().peek(&task, &parent.id).unwrap();
    assert_eq!(done.status, TaskStatus::Killed);
    assert_eq!(
        types(&world, &child).last().map(String::as_str),
        Some("turn/end")
    );
    assert_eq!(
        world.log(&child).last().unwrap()["data"]["reason"]["kind"],
        "aborted"
    );
    assert_eq!(user_texts(&world, &child), ["child task"]);
    assert_eq!(model.calls_for(&child), 0);
}

#[tokio::test]
async fn a_message_to_a_running_child_joins_its_task() {
    let gate = Gate::new();
    let held = gate.clone();
    let world = World::new(ScriptedModel::new(move |req| {
        match last_user_text(req).as_str() {
            "child task" => Reply::Gated(held.clone(), text_chunks("first answer")),
            "also this" => text("steered answer"),
            _ => text("unexpected"),
        }
    }));
    let parent = world.session();
    let (child, task) = start(&world, &parent, "child task").await;
    gate.wait_entered().await;
    let delivery = send(&world, &parent, &child, "also this").await.unwrap();
    assert!(matches!(&delivery, Delivery::Steered(t) if *t == task.as_str()));
    gate.release();
    let done = wait(&world, &task, &parent.id).await;
    assert_eq!(done.output.as_deref(), Some("steered answer"));
    assert_eq!(
        world.runtime.tasks().list(&parent.id).len(),
        1,
        "no second task"
    );
    assert!(types(&world, &child).contains(&"steering/message".to_owned()));
}

#[tokio::test]
async fn a_message_to_a_settled_child_cold_resumes_it_in_a_new_task() {
    let model = answers();
    let world = World::new(model.clone());
    let parent = world.session();
    let child = settled(&world, &parent).await;
    let next = started(send(&world, &parent, &child, "and then?").await);
    assert_eq!(next, "subagent-2");
    let done = wait(&world, &next, &parent.id).await;
    assert_eq!(done.output.as_deref(), Some("second answer"));
    assert!(world.runtime.host().live(&child).is_none());
    assert_eq!(user_texts(&world, &child), ["child task", "and then?"]);
    // The resumed request carries the first activation's history.
    let last = model
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.session_id == child)
        .unwrap();
    assert!(format!("{:?}", last.history).contains("first answer"));
}

#[tokio::test]
async fn cold_resume_rebuilds_persona_and_tool_filter() {
    let model = answers();
    let world = World::new(model.clone());
    let parent = world.session();
    let mut req = request("spawn", "child task");
    req.persona = Some("You are the archivist.".into());
    req.tools = Some(vec!["task_output".into()]);
    let (child, task) = start_continuable(&world.runtime, &parent, req).await;
    wait(&world, &task, &parent.id).await;
    let descriptor = world
        .log(&child)
        .into_iter()
        .find(|e| e["type"] == "subagent/descriptor")
        .unwrap();
    assert_eq!(descriptor["data"]["persona"], "You are the archivist.");
    assert_eq!(
        descriptor["data"]["toolFilter"],
        json!({"allow": ["task_output"]})
    );
    let next = started(send(&world, &parent, &child, "and then?").await);
    wait(&world, &next, &parent.id).await;
    let last = model
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.session_id == child)
        .unwrap();
    assert!(last.system.contains("You are the archivist."));
    let names: Vec<String> = last.tools.iter().map(|t| t.name.clone()).collect();
    assert!(!names.contains(&"task_list".to_owned()), "{names:?}");
    assert!(names.contains(&"task_output".to_owned()));
}

#[tokio::test]
async fn a_fork_child_resumes_its_own_transcript_without_re_forking() {
    let model = ScriptedModel::new(|req| match last_user_text(req).as_str() {
        "parent: remember MARMALADE" => text("noted"),
        "parent: later question" => text("later answer"),
        "recall" => text("MARMALADE"),
        _ => text("more"),
    });
    let world = World::new(model.clone());
    let parent = world.session();
    world.prompt(&parent, "parent: remember MARMALADE").await;
    let mut fork = request("fork", "recall");
    fork.label = "fork".into();
    let (child, task) = start_continuable(&world.runtime, &parent, fork).await;
    wait(&world, &task, &parent.id).await;
    let seed = world.log(&child)[0]["seedLength"].clone();
    assert!(seed.as_u64().unwrap() > 0);
    world.prompt(&parent, "parent: later question").await;
    let next = started(send(&world, &parent, &child, "and then?").await);
    wait(&world, &next, &parent.id).await;
    assert_eq!(world.log(&child)[0]["seedLength"], seed);
    let last = model
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.session_id == child)
        .unwrap();
    let seen = format!("{:?}", last.history);
    assert!(seen.contains("MARMALADE"));
    assert!(
        !seen.contains("later question"),
        "the parent's newer turn leaked"
    );
}

#[tokio::test]
async fn a_resumed_child_keeps_its_header_depth() {
    // The resumed child tries to delegate; depth 2 exceeds the default maxDepth 1.
    let world = World::new(ScriptedModel::new(|req| {
        if let Some((text_seen, _)) = last_tool_result(req) {
            return text(&format!("saw: {text_seen}"));
        }
        match last_user_text(req).as_str() {
            "child task" => text("first answer"),
            _ => calls(&[(
                "subagent",
                json!({"description": "g", "prompt": "grandchild"}),
            )]),
        }
    }));
    let parent = world.session();
    let child = settled(&world, &parent).await;
    let next = started(send(&world, &parent, &child, "delegate").await);
    let done = wait(&world, &next, &parent.id).await;
    assert_eq!(world.log(&child)[0]["delegationDepth"], 1);
    assert_eq!(
        done.output.as_deref(),
        Some("saw: Error: subagent depth 2 exceeds maxDepth 1")
    );
}

#[tokio::test]
async fn another_parent_cannot_continue_a_child() {
    let world = World::new(answers());
    let parent = world.session();
    let stranger = world.session();
    let child = settled(&world, &parent).await;
    let before = world.log(&child).len();
    let next = started(send(&world, &stranger, &child, "and then?").await);
    let done = wait(&world, &next, &stranger.id).await;
    assert_eq!(done.status, TaskStatus::Failed);
    assert!(done
        .detail
        .unwrap()
        .contains("belongs to another parent session"));
    assert_eq!(world.log(&child).len(), before, "nothing delivered");
    // The follow-up task is fenced to the session that sent it.
    let error = world.runtime.tasks().read(&next, &parent.id).unwrap_err();
    assert!(error.to_string().contains("belongs to another session"));
}

#[tokio::test]
async fn a_child_without_a_descriptor_is_not_resumable() {
    let world = World::new(ScriptedModel::new(|req| {
        if last_tool_result(req).is_some() {
            return text("done");
        }
        match last_user_text(req).as_str() {
            "parent: go" => calls(&[(
                "subagent",
                json!({"description": "fg", "prompt": "child task"}),
            )]),
            _ => text("first answer"),
        }
    }));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let child = world.only_child(&parent.id);
    let next = started(send(&world, &parent, &child, "and then?").await);
    let done = wait(&world, &next, &parent.id).await;
    assert_eq!(done.status, TaskStatus::Failed);
    assert!(done.detail.unwrap().contains("continuation descriptor"));
}

#[tokio::test]
async fn a_live_agent_outside_the_service_is_an_ownership_conflict() {
    let world = World::new(answers());
    let parent = world.session();
    let other = world.session();
    let error = send(&world, &parent, &other.id, "hi").await.unwrap_err();
    assert!(matches!(error, DelegationError::OutsideControl(_)));
    let text = error.to_string();
    assert!(text.contains("outside control-service ownership"));
    assert!(text.ends_with("the message was not delivered"));
    assert!(world.runtime.tasks().list(&parent.id).is_empty());
}

#[tokio::test]
async fn a_steer_into_a_stopping_task_fails_without_falling_through() {
    let gate = Gate::new();
    let held = gate.clone();
    let world = World::new(ScriptedModel::new(move |req| {
        match last_user_text(req).as_str() {
            "child task" => Reply::Gated(held.clone(), text_chunks("never")),
            _ => text("second answer"),
        }
    }));
    let parent = world.session();
    let (child, task) = start(&world, &parent, "child task").await;
    gate.wait_entered().await;
    world.runtime.tasks().kill(&task, &parent.id, None).unwrap();
    let error = send(&world, &parent, &child, "and then?")
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "subagent \"{child}\" task {task} is stopping; the message was not delivered — retry \
             after it settles to start the next activation"
        )
    );
    assert_eq!(
        world.runtime.tasks().list(&parent.id).len(),
        1,
        "no second task"
    );
    wait(&world, &task, &parent.id).await;
    let next = started(send(&world, &parent, &child, "and then?").await);
    assert_eq!(
        wait(&world, &next, &parent.id).await.output.as_deref(),
        Some("second answer")
    );
}

#[tokio::test]
async fn a_stranger_cannot_steer_a_running_child() {
    let gate = Gate::new();
    let held = gate.clone();
    let world = World::new(ScriptedModel::new(move |_| {
        Reply::Gated(held.clone(), text_chunks("first answer"))
    }));
    let parent = world.session();
    let stranger = world.session();
    let (child, task) = start(&world, &parent, "child task").await;
    gate.wait_entered().await;
    let error = send(&world, &stranger, &child, "psst").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("task {task} belongs to another session; the message was not delivered")
    );
    gate.release();
    wait(&world, &task, &parent.id).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_kill_during_lookup_settles_killed_without_child_work() {
    let model = answers();
    let world = World::new(model.clone());
    let parent = world.session();
    let child = settled(&world, &parent).await;
    let before = world.log(&child).len();
    let calls_before = model.calls_for(&child);
    // In one frame: the task exists, its lookup has not run yet.
    let next = started(send(&world, &parent, &child, "and then?").await);
    world.runtime.tasks().kill(&next, &parent.id, None).unwrap();
    let done = wait(&world, &next, &parent.id).await;
    assert_eq!(done.status, TaskStatus::Killed);
    assert!(world.runtime.host().live(&child).is_none());
    assert_eq!(world.log(&child).len(), before);
    assert_eq!(model.calls_for(&child), calls_before);
}

#[tokio::test(flavor = "current_thread")]
async fn two_sends_during_one_resume_load_admit_one_activation() {
    let world = World::new(answers());
    let parent = world.session();
    let child = settled(&world, &parent).await;
    let first = started(send(&world, &parent, &child, "and then?").await);
    let error = send(&world, &parent, &child, "and more?")
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("subagent \"{child}\" activation is starting; the message was not delivered")
    );
    assert_eq!(world.runtime.tasks().list(&parent.id).len(), 2);
    wait(&world, &first, &parent.id).await;
    assert_eq!(user_texts(&world, &child), ["child task", "and then?"]);
}

#[tokio::test]
async fn wait_then_send_always_takes_the_cold_path() {
    let world = World::new(answers());
    let parent = world.session();
    let (child, mut task) = start(&world, &parent, "child task").await;
    for round in 0..5 {
        wait(&world, &task, &parent.id).await;
        task = started(send(&world, &parent, &child, &format!("round {round}")).await);
    }
    wait(&world, &task, &parent.id).await;
    assert_eq!(user_texts(&world, &child).len(), 6);
}

#[tokio::test]
async fn list_children_reports_this_parents_continuable_children() {
    let world = World::new(answers());
    let parent = world.session();
    let other = world.session();
    let child = settled(&world, &parent).await;
    let next = started(send(&world, &parent, &child, "and then?").await);
    wait(&world, &next, &parent.id).await;
    let (_, elsewhere) = start(&world, &other, "child task").await;
    wait(&world, &elsewhere, &other.id).await;
    let listed = world.runtime.delegation().list(&parent.id);
    assert_eq!(listed.len(), 1);
    let summary = &listed[0];
    assert_eq!(summary.id, child);
    assert_eq!(summary.kind, "spawn");
    assert_eq!(summary.turns, 2);
    assert_eq!(summary.last_stop.as_deref(), Some("completed"));
    assert_eq!(summary.task, None);
    assert_eq!(summary.description.as_deref(), Some("child task"));

    // Listed from the index: the child's file is not read.
    let sessions = world.home.path().join("sessions/children");
    let file = sessions.join(format!("{child}.jsonl"));
    let kept = std::fs::read(&file).unwrap();
    std::fs::write(&file, "not a log").unwrap();
    assert_eq!(world.runtime.delegation().list(&parent.id), listed);

    // An index written by an older kin (no child records): the child is read from its file.
    std::fs::write(&file, kept).unwrap();
    let index = sessions.join(".index");
    let old: String = std::fs::read_to_string(&index)
        .unwrap()
        .lines()
        .map(|line| {
            let mut record: serde_json::Value = serde_json::from_str(line).unwrap();
            record.as_object_mut().unwrap().remove("child");
            format!("{record}\n")
        })
        .collect();
    assert!(!old.contains("\"child\""));
    std::fs::write(sessions.join("old-index"), old).unwrap();
    std::fs::rename(sessions.join("old-index"), &index).unwrap();
    assert_eq!(world.runtime.delegation().list(&parent.id), listed);
}

#[tokio::test]
async fn after_a_restart_a_running_child_shows_interrupted_and_can_be_continued() {
    let gate = Gate::new();
    let held = gate.clone();
    let first = ScriptedModel::new(move |req| {
        if last_tool_result(req).is_some() {
            return text("started it");
        }
        match last_user_text(req).as_str() {
            "parent: go" => calls(&[(
                "subagent",
                json!({"description": "bg", "prompt": "child task", "run_in_background": true}),
            )]),
            _ => Reply::Gated(held.clone(), text_chunks("never")),
        }
    });
    let world = World::new(first);
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    gate.wait_entered().await;
    let child = world.only_child(&parent.id);
    world.runtime.shutdown().await;

    // A new process on the same home: the editor loads the parent again.
    let second = kin::runtime::Runtime::new(
        world.home.path(),
        answers(),
        kin::tools::ToolRegistry::new(),
        Default::default(),
    )
    .unwrap();
    // What `session/load` and `kin run --session` do: open it, restoring its tasks.
    let parent = second
        .open_session(&parent.id, world.cwd.path().to_owned(), None)
        .unwrap();
    let task = second.tasks().read("subagent-1", &parent.id).unwrap();
    assert_eq!(task.status, TaskStatus::Interrupted);
    assert_eq!(
        task.status_line(),
        format!(
            "[status: interrupted, started by an earlier kin process; send_message to subagent \
             {child} continues it]"
        )
    );
    let next = second
        .delegation()
        .send_message(&parent.id, &child, prompt("and then?"), None)
        .await
        .unwrap();
    assert!(matches!(&next, Delivery::Started(t) if *t == "subagent-2"));
    let done = second
        .tasks()
        .wait(
            "subagent-2",
            Duration::from_secs(60),
            &parent.id,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(done.output.as_deref(), Some("second answer"));
}

#[tokio::test]
async fn closing_a_session_cancels_the_tasks_it_owns() {
    let (world, gate) = held_world();
    let parent = world.session();
    let (child, task) = start(&world, &parent, "child task").await;
    gate.wait_entered().await;
    world.runtime.tasks().cancel_owned(&parent.id);
    world.runtime.tasks().until_settled(&task).await;
    let done = world.runtime.tasks().peek(&task, &parent.id).unwrap();
    assert_eq!(done.status, TaskStatus::Killed);
    assert!(world.runtime.host().live(&child).is_none());
}

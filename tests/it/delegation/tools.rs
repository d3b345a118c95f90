//! The model-facing delegation and task tools, driven through the real agent loop.

use kin::runtime::RuntimeOptions;
use kin::session::history::HistoryItem;
use kin::session::FinishKind;
use serde_json::{json, Value};

use super::support::{
    calls, last_tool_result, last_user_text, text, text_with, Reply, ScriptedModel, World,
};

/// The tool results of a session's log: (tool name, text, isError).
fn results(world: &World, id: &str) -> Vec<(String, String, bool)> {
    let log = world.log(id);
    log.iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| {
            let part = &e["data"]["message"]["content"][0];
            let call = log
                .iter()
                .find(|c| c["type"] == "tool/call" && c["data"]["callId"] == part["toolCallId"])
                .unwrap();
            (
                call["data"]["name"].as_str().unwrap().to_owned(),
                part["content"][0]["text"].as_str().unwrap().to_owned(),
                part["isError"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// A parent that makes `first` calls, then answers "done"; children answer per `child`.
fn model(
    first: Vec<(&'static str, Value)>,
    child: impl Fn(&str) -> Reply + Send + Sync + 'static,
) -> std::sync::Arc<ScriptedModel> {
    ScriptedModel::new(move |req| {
        let asked = last_user_text(req);
        if asked.starts_with("parent:") {
            return match req.history.last() {
                Some(HistoryItem::ToolResult { .. }) => text("done"),
                _ => calls(&first),
            };
        }
        child(&asked)
    })
}

#[tokio::test]
async fn tools_are_offered_sorted_with_the_contracted_parameters() {
    let world = World::new(ScriptedModel::new(|_| text("x")));
    let specs = world.runtime.host().tools().specs();
    let names: Vec<&str> = specs.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "list_agents",
            "send_message",
            "subagent",
            "subagent_fork",
            "task_kill",
            "task_list",
            "task_output"
        ]
    );
    assert_eq!(
        specs[1].parameters["required"],
        json!(["subagent_id", "message"])
    );
    for spec in &specs[2..4] {
        let properties: Vec<&String> = spec.parameters["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            properties,
            [
                "description",
                "prompt",
                "run_in_background",
                "model",
                "timeout",
                "budget_tokens",
                "agent",
                "isolation"
            ]
        );
        assert_eq!(
            spec.parameters["required"],
            json!(["description", "prompt"])
        );
    }
    assert_eq!(specs[6].parameters["required"], json!(["task_id"]));
}

#[tokio::test]
async fn a_foreground_child_returns_its_final_text() {
    let world = World::new(model(
        vec![(
            "subagent",
            json!({"description": "ask", "prompt": "say CHILD_OK"}),
        )],
        |_| text("CHILD_OK"),
    ));
    let parent = world.session();
    world.prompt(&parent, "parent: delegate").await;
    assert_eq!(
        results(&world, &parent.id),
        [("subagent".into(), "CHILD_OK".into(), false)]
    );
}

#[tokio::test]
async fn failed_children_become_errors_never_empty_successes() {
    let cases = [
        (
            "fail",
            "Error: subagent run failed\nDiagnostic: model request failed: boom",
        ),
        (
            "long",
            "Error: subagent run hit its token limit before finishing\nDiagnostic: the model's \
             output stopped at its token limit\nPartial output before the run ended:\ncut o",
        ),
        (
            "rude",
            "Error: subagent declined the task\nPartial output before the run ended:\nno",
        ),
    ];
    for (ask, expected) in cases {
        let world = World::new(model(
            vec![("subagent", json!({"description": "ask", "prompt": ask}))],
            |asked| match asked {
                "long" => text_with("cut o", FinishKind::MaxTokens),
                "rude" => text_with("no", FinishKind::Refusal),
                _ => Reply::Fail("boom"),
            },
        ));
        let parent = world.session();
        world.prompt(&parent, "parent: delegate").await;
        assert_eq!(
            results(&world, &parent.id),
            [("subagent".into(), expected.into(), true)],
            "{ask}"
        );
    }
}

#[tokio::test]
async fn a_child_cannot_delegate_past_the_default_depth() {
    let world = World::new(ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        match (asked.as_str(), last_tool_result(req)) {
            (_, Some(_)) => text("done"),
            ("parent: go", None) => calls(&[(
                "subagent",
                json!({"description": "child", "prompt": "nest"}),
            )]),
            _ => calls(&[(
                "subagent",
                json!({"description": "grandchild", "prompt": "deep"}),
            )]),
        }
    }));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let child = world
        .stored()
        .into_iter()
        .find(|id| *id != parent.id)
        .unwrap();
    assert_eq!(
        results(&world, &child),
        [(
            "subagent".into(),
            "Error: subagent depth 2 exceeds maxDepth 1".into(),
            true
        )]
    );
    assert_eq!(world.stored().len(), 2, "no grandchild session");
}

#[tokio::test]
async fn a_background_child_is_collected_with_task_output() {
    let world = World::new(model(
        vec![
            (
                "subagent",
                json!({"description": "bg", "prompt": "work", "run_in_background": true}),
            ),
            (
                "task_output",
                json!({"task_id": "subagent-1", "wait": true}),
            ),
            ("task_list", json!({})),
        ],
        |_| text("CHILD_OK"),
    ));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let child = world.only_child(&parent.id);
    assert_eq!(
        results(&world, &parent.id),
        [
            (
                "subagent".into(),
                format!("started subagent {child} as task subagent-1"),
                false
            ),
            (
                "task_output".into(),
                "CHILD_OK\n[status: completed]".into(),
                false
            ),
            (
                "task_list".into(),
                "subagent-1 [subagent] completed — bg".into(),
                false
            ),
        ]
    );
}

#[tokio::test]
async fn an_uncollected_background_child_leaves_one_notice_for_the_next_turn() {
    let world = World::new(ScriptedModel::new(move |req| {
        let asked = last_user_text(req);
        if asked == "work" {
            return text("CHILD_OK");
        }
        if asked.starts_with("background task subagent-1") || asked == "parent: next" {
            return text("noted");
        }
        match req.history.last() {
            Some(HistoryItem::ToolResult { .. }) => text("started it"),
            _ => calls(&[(
                "subagent",
                json!({"description": "bg", "prompt": "work", "run_in_background": true}),
            )]),
        }
    }));
    let parent = world.session();
    world.prompt(&parent, "parent: start").await;
    // Wait for the task to settle without looking at it (a look would count as seen).
    world.runtime.tasks().until_settled("subagent-1").await;
    world.prompt(&parent, "parent: next").await;
    let notices: Vec<Value> = world
        .log(&parent.id)
        .into_iter()
        .filter(|e| e["type"] == "user/message" && e["data"]["source"]["kind"] == "plugin")
        .collect();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0]["data"]["source"]["plugin"], "tool-tasks");
    assert_eq!(
        notices[0]["data"]["content"][0]["text"],
        "background task subagent-1 (subagent: bg) finished [status: completed]. Read its output with task_output."
    );
}

#[tokio::test]
async fn a_background_start_that_fails_reports_the_error_in_the_task() {
    let options = RuntimeOptions {
        subagent_max_depth: 0,
        ..Default::default()
    };
    let world = World::with_options(
        model(
            vec![
                (
                    "subagent",
                    json!({"description": "bg", "prompt": "work", "run_in_background": true}),
                ),
                (
                    "task_output",
                    json!({"task_id": "subagent-1", "wait": true}),
                ),
            ],
            |_| text("never"),
        ),
        options,
    );
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    assert_eq!(
        results(&world, &parent.id)[1].1,
        "(no new output)\n[status: failed, SubagentDepthError: subagent depth 1 exceeds maxDepth 0]"
    );
}

#[tokio::test]
async fn task_kill_stops_a_background_child() {
    let world = World::new(model(
        vec![
            (
                "subagent",
                json!({"description": "bg", "prompt": "hang", "run_in_background": true}),
            ),
            (
                "task_kill",
                json!({"task_id": "subagent-1", "reason": "changed my mind"}),
            ),
            (
                "task_output",
                json!({"task_id": "subagent-1", "wait": true}),
            ),
            ("task_kill", json!({"task_id": "subagent-1"})),
            ("task_output", json!({"task_id": "subagent-9"})),
        ],
        |_| Reply::Hang,
    ));
    let parent = world.session();
    world.prompt(&parent, "parent: go").await;
    let mut texts: Vec<String> = results(&world, &parent.id)
        .into_iter()
        .map(|(_, t, _)| t)
        .collect();
    // Killed before it first ran: the child the model was given still reached the store,
    // its turn ended at once as aborted.
    let started = texts.remove(0);
    let child = started
        .strip_prefix("started subagent ")
        .and_then(|rest| rest.strip_suffix(" as task subagent-1"))
        .unwrap();
    assert!(uuid::Uuid::parse_str(child).is_ok(), "{started}");
    let mut expected = vec![parent.id.clone(), child.to_owned()];
    expected.sort();
    assert_eq!(world.stored(), expected);
    let log = world.log(child);
    assert_eq!(log.last().unwrap()["data"]["reason"]["kind"], "aborted");
    assert_eq!(
        texts,
        [
            "requested cancellation of task subagent-1",
            "(no new output)\n[status: killed]",
            "task subagent-1 had already finished [status: killed]",
            "Error: unknown task subagent-9",
        ]
    );
}

#[tokio::test]
async fn another_session_cannot_read_a_task() {
    let world = World::new(model(
        vec![(
            "subagent",
            json!({"description": "bg", "prompt": "work", "run_in_background": true}),
        )],
        |_| text("CHILD_OK"),
    ));
    let owner = world.session();
    world.prompt(&owner, "parent: go").await;
    let stranger = world.session();
    let error = world
        .runtime
        .tasks()
        .read("subagent-1", &stranger.id)
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "task subagent-1 belongs to another session"
    );
}

#[tokio::test]
async fn send_message_and_list_agents_render_their_routes() {
    let world = World::new(ScriptedModel::new(|req| {
        let asked = last_user_text(req);
        match asked.as_str() {
            "work" => return text("CHILD_OK"),
            "more" => return text("CHILD_MORE"),
            _ => {}
        }
        if let Some(HistoryItem::ToolResult { .. }) = req.history.last() {
            return text("done");
        }
        if asked == "parent: start" {
            return calls(&[
                (
                    "subagent",
                    json!({"description": "bg", "prompt": "work", "run_in_background": true}),
                ),
                (
                    "task_output",
                    json!({"task_id": "subagent-1", "wait": true}),
                ),
            ]);
        }
        // The child id, from the first turn's tool result.
        let child = req
            .history
            .iter()
            .find_map(|item| match item {
                HistoryItem::ToolResult { text, .. } => text
                    .strip_prefix("started subagent ")
                    .and_then(|rest| rest.split(' ').next())
                    .map(str::to_owned),
                _ => None,
            })
            .unwrap();
        calls(&[
            (
                "send_message",
                json!({"subagent_id": child, "message": "more"}),
            ),
            (
                "task_output",
                json!({"task_id": "subagent-2", "wait": true}),
            ),
            ("list_agents", json!({})),
            ("send_message", json!({"subagent_id": child})),
        ])
    }));
    let parent = world.session();
    world.prompt(&parent, "parent: start").await;
    world.prompt(&parent, "parent: again").await;
    let child = world.only_child(&parent.id);
    // (The scripted call ids repeat across turns, so compare texts only.)
    let results: Vec<(String, bool)> = results(&world, &parent.id)
        .into_iter()
        .map(|(_, text, error)| (text, error))
        .collect();
    assert_eq!(
        results[2..],
        [
            (
                format!("message started task subagent-2 continuing subagent {child}"),
                false
            ),
            ("CHILD_MORE\n[status: completed]".into(), false),
            (
                format!(
                    "{child} [spawn] idle, turns: 2, last stop: completed, model: default — work"
                ),
                false
            ),
            (
                "Error: `subagent_id` and `message` must be strings; the message was not delivered"
                    .into(),
                true
            ),
        ]
    );
}

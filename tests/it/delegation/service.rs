//! `Delegation`, the front door: the caller looked up by session id, provider names,
//! validation before any child exists, and the route chosen once.

use kin::config::AcpAgentConfig;
use kin::delegation::{Delegated, Mode, Request, StartRequest};
use kin::runtime::RuntimeOptions;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::support::{prompt, text, ScriptedModel, World};

fn world() -> World {
    World::new(ScriptedModel::new(|_| text("answer")))
}

fn request(provider: &str) -> Request {
    Request {
        provider: provider.into(),
        prompt: prompt("x"),
        label: "a task".into(),
        client: None,
        cancel: CancellationToken::new(),
        model: None,
        call_id: None,
        timeout: None,
        budget_tokens: None,
        persona: None,
        tools: None,
        permission: None,
        worktree: false,
    }
}

#[tokio::test]
async fn the_caller_is_the_live_session_the_tool_context_names() {
    let world = world();
    let delegation = world.runtime.delegation();
    let parent = world.session();
    let error = delegation
        .delegate("no-such-session", request("spawn"), Mode::Foreground)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "NO_CALLER");
    assert_eq!(
        world.stored(),
        vec![parent.id.clone()],
        "nothing was started"
    );

    let Delegated::Answer(result) = delegation
        .delegate(&parent.id, request("spawn"), Mode::Foreground)
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
        .delegate(&parent.id, request("nope"), Mode::Foreground)
        .await
        .unwrap_err();
    assert_eq!(error.code(), "NO_PROVIDER");
    assert_eq!(
        error.to_string(),
        "no subagent provider registered for \"nope\""
    );
}

#[tokio::test]
async fn rejects_unsupported_capabilities_in_order_before_provider_startup() {
    // An ACP child honours only the depth limit; its command is never run here.
    let options = RuntimeOptions {
        acp_agents: vec![AcpAgentConfig::new("bare", "/nonexistent/kin-test", vec![])],
        ..RuntimeOptions::default()
    };
    let world = World::with_options(ScriptedModel::new(|_| text("unused")), options);
    let parent = world.session();
    type Set = fn(&mut StartRequest);
    let cases: [(&str, Set); 3] = [
        ("outputSchema", |r| {
            r.output_schema = Some(json!({"type": "object"}))
        }),
        ("toolFilter", |r| r.tool_filter = Some(Default::default())),
        ("persona", |r| r.persona = Some("p".into())),
    ];
    for (capability, set) in cases {
        let mut request = StartRequest::new(prompt("x"), parent.clone(), CancellationToken::new());
        set(&mut request);
        // Also ask for everything after it: the first missing capability in order is reported.
        request.persona = Some("p".into());
        let error = world
            .runtime
            .delegation()
            .start_with("acp:bare", request)
            .await
            .err()
            .unwrap();
        assert_eq!(error.code(), "UNSUPPORTED_CAPABILITY");
        assert_eq!(
            error.to_string(),
            format!(
                "subagent provider \"acp:bare\" does not support the \"{capability}\" capability"
            )
        );
    }
    assert_eq!(
        world.stored(),
        vec![parent.id.clone()],
        "no child was started"
    );
}

#[tokio::test]
async fn validates_the_schema_before_provider_startup() {
    let world = world();
    let parent = world.session();
    let mut request = StartRequest::new(prompt("x"), parent.clone(), CancellationToken::new());
    request.output_schema = Some(json!({"type": "array"}));
    let error = world
        .runtime
        .delegation()
        .start_with("spawn", request)
        .await
        .err()
        .unwrap();
    assert_eq!(error.code(), "INVALID_SCHEMA");
    assert_eq!(world.stored(), vec![parent.id.clone()]);
}

#[tokio::test]
async fn in_process_background_children_are_continuable_and_their_task_is_recorded() {
    let world = world();
    let parent = world.session();
    let Delegated::Continuable { child, task } = world
        .runtime
        .delegation()
        .delegate(&parent.id, request("spawn"), Mode::Background)
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

//! The service's checks before any child exists, on the start path the routes share: the
//! capabilities a provider lacks and the output schema.

use kin::config::AcpAgentConfig;
use kin::delegation::StartRequest;
use kin::runtime::RuntimeOptions;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::start_child;
use super::support::{prompt, text, ScriptedModel, World};

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
        let error = start_child(world.runtime.delegation(), "acp:bare", request)
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
    let world = World::new(ScriptedModel::new(|_| text("answer")));
    let parent = world.session();
    let mut request = StartRequest::new(prompt("x"), parent.clone(), CancellationToken::new());
    request.output_schema = Some(json!({"type": "array"}));
    let error = start_child(world.runtime.delegation(), "spawn", request)
        .await
        .err()
        .unwrap();
    assert_eq!(error.code(), "INVALID_SCHEMA");
    assert_eq!(world.stored(), vec![parent.id.clone()]);
}

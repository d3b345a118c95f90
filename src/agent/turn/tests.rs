//! Unit tests of the turn loop: how a fatal tool error is logged and ends the turn.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, AgentOptions, AgentSpec, TurnDeps, TurnError};
use crate::model::{ChunkStream, Model, ModelRequest, ToolSpec};
use crate::session::*;
use crate::tools::{Tool, ToolContext, ToolKind, ToolOutput, ToolRegistry};

/// Asks for the `broken` tool once, then would answer with text.
struct CallsBroken;

impl Model for CallsBroken {
    fn provider(&self) -> String {
        "test".into()
    }
    fn name(&self) -> String {
        "test".into()
    }
    fn stream(&self, _request: ModelRequest) -> ChunkStream {
        let call = AssistantBlock::ToolCall {
            id: "c1".into(),
            name: "broken".into(),
            arguments: "{}".into(),
        };
        let chunks = [
            Chunk::BlockStart {
                index: 0,
                block_type: BlockType::ToolCall,
            },
            Chunk::BlockEnd {
                index: 0,
                block: call,
            },
            Chunk::Finish {
                reason: FinishReason {
                    kind: FinishKind::ToolCalls,
                    failure: None,
                },
            },
        ];
        Box::pin(futures::stream::iter(chunks.into_iter().map(Ok)))
    }
}

struct Broken;

impl Tool for Broken {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "broken".into(),
            description: "fails fatally".into(),
            parameters: serde_json::json!({"type": "object"}).into(),
        }
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }
    fn title(&self, _arguments: &Value) -> String {
        "broken".into()
    }
    fn call(&self, _arguments: Value, _cx: ToolContext) -> BoxFuture<'static, ToolOutput> {
        std::future::ready(ToolOutput::fatal("Broken", "BROKEN", "Error: gone")).boxed()
    }
}

#[tokio::test]
async fn a_fatal_tool_error_is_logged_then_ends_the_turn_as_failed() {
    let home = tempfile::tempdir().unwrap();
    let store = SessionStore::open(home.path()).unwrap();
    let header = Header::new("s1".into(), 1, "/".into(), Vec::new());
    let log = store.create(&header).unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Broken));
    let agent = Arc::new(Agent::new(AgentSpec {
        header,
        cwd: "/".into(),
        log,
        events: Vec::new(),
        options: AgentOptions::default(),
        persona: None,
        tools: Arc::new(tools),
        structured: None,
        roots: None,
    }));
    let model: Arc<dyn Model> = Arc::new(CallsBroken);
    let deps = TurnDeps {
        models: Arc::new(crate::model::ModelCatalog::single(model.clone())),
        model,
        system: String::new(),
        lean_system: String::new(),
        lean: Default::default(),
        max_steps: 5,
        tool_argument_bytes: crate::limits::DEFAULT_TOOL_ARGUMENT_BYTES,
        max_parallel: 8,
        client: None,
        child_env: Default::default(),
        private: Default::default(),
    };
    let prompt = vec![UserPart::Text { text: "go".into() }];
    let outcome = agent
        .run_turn(prompt, &deps, &|_| {}, CancellationToken::new())
        .await;
    assert!(
        matches!(outcome, Err(TurnError::Tool { ref name, .. }) if name == "broken"),
        "{outcome:?}"
    );
    agent.with_events(|events| {
        let result = events.iter().find_map(|e| match &e.body {
            EventBody::ToolResult(result) => Some(result),
            _ => None,
        });
        assert_eq!(result.unwrap().error.as_ref().unwrap().code, "BROKEN");
        let steps = events
            .iter()
            .filter(|e| matches!(e.body, EventBody::StepStart(_)))
            .count();
        assert_eq!(steps, 1, "no model call after a fatal tool error");
        assert!(matches!(
            events.last().unwrap().body,
            EventBody::TurnEnd(TurnEnd {
                reason: TurnEndReason::Error { .. },
                ..
            })
        ));
    });
}

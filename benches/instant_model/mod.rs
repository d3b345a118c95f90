//! What the in-process benchmarks share: a model that answers every request at once with "OK"
//! (they measure kin's own work, not a model's), and the runtime they run in.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use futures::stream;
use kin::agent::Agent;
use kin::delegation::{Delegated, Mode, Request, SubagentResult};
use kin::model::{ChunkStream, Model, ModelRequest};
use kin::runtime::{Runtime, RuntimeOptions};
use kin::session::{AssistantBlock, BlockType, Chunk, FinishKind, FinishReason, UserPart};
use kin::tasks::TaskId;
use kin::tools::ToolRegistry;
use tokio_util::sync::CancellationToken;

#[allow(dead_code)] // not every bench uses it
pub struct InstantModel;

impl Model for InstantModel {
    fn provider(&self) -> String {
        "instant".into()
    }
    fn name(&self) -> String {
        "instant".into()
    }
    fn stream(&self, _request: ModelRequest) -> ChunkStream {
        answer_ok()
    }
}

/// The instant answer: one text block, "OK", then a normal stop.
pub fn answer_ok() -> ChunkStream {
    let text = "OK".to_owned();
    Box::pin(stream::iter(
        [
            Chunk::BlockStart {
                index: 0,
                block_type: BlockType::Text,
            },
            Chunk::TextDelta {
                index: 0,
                text: text.clone(),
            },
            Chunk::BlockEnd {
                index: 0,
                block: AssistantBlock::Text { text },
            },
            Chunk::Finish {
                reason: FinishReason {
                    kind: FinishKind::Stop,
                    failure: None,
                },
            },
        ]
        .into_iter()
        .map(Ok),
    ))
}

/// Runs `body` on a 2-worker tokio runtime with a kin `Runtime` over `model` (no base tools) in
/// a temporary home, given a temporary working directory; shuts the runtime down after.
#[allow(dead_code)]
pub fn in_process<F: Future<Output = ()>>(
    model: Arc<dyn Model>,
    body: impl FnOnce(Arc<Runtime>, PathBuf) -> F,
) {
    in_process_with(model, RuntimeOptions::default(), body)
}

/// [`in_process`] with the runtime's options given.
#[allow(dead_code)]
pub fn in_process_with<F: Future<Output = ()>>(
    model: Arc<dyn Model>,
    options: RuntimeOptions,
    body: impl FnOnce(Arc<Runtime>, PathBuf) -> F,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let runtime = Runtime::new(home.path(), model, ToolRegistry::new(), options).unwrap();
        body(runtime.clone(), cwd.path().to_owned()).await;
        runtime.shutdown().await;
    });
}

/// What a `provider` delegation tool hands the service: `text` as the prompt, `label` as the
/// child's description, every option unset.
#[allow(dead_code)]
pub fn request(provider: &str, text: &str, label: &str) -> Request {
    Request {
        provider: provider.into(),
        prompt: vec![UserPart::Text { text: text.into() }],
        label: label.into(),
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

/// Delegates `request` for `parent` in the foreground, as the tools do: the child's result
/// (the child already disposed).
#[allow(dead_code)]
pub async fn answer(runtime: &Runtime, parent: &Agent, request: Request) -> SubagentResult {
    let delegated = runtime
        .delegation()
        .delegate(&parent.id, request, Mode::Foreground);
    match delegated.await.unwrap() {
        Delegated::Answer(result) => result,
        _ => panic!("a foreground delegation answers"),
    }
}

/// Delegates `request` for `parent` in the background: the continuable child's id and task.
#[allow(dead_code)]
pub async fn start_continuable(
    runtime: &Runtime,
    parent: &Agent,
    request: Request,
) -> (String, TaskId) {
    let delegated = runtime
        .delegation()
        .delegate(&parent.id, request, Mode::Background);
    match delegated.await.unwrap() {
        Delegated::Continuable { child, task } => (child, task),
        _ => panic!("in-process background children are continuable"),
    }
}

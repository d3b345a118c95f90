//! A scripted model and helpers for driving the real runtime in-process.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use futures::stream;
use kin::agent::Agent;
use kin::delegation::{Delegated, Mode, Request, SubagentResult};
use kin::model::{ChunkStream, Model, ModelError, ModelRequest};
use kin::runtime::{Runtime, RuntimeOptions};
use kin::session::history::HistoryItem;
use kin::session::{AssistantBlock, BlockType, Chunk, FinishKind, FinishReason, UserPart};
use kin::tools::ToolRegistry;
use serde_json::Value;

/// What the scripted model does for one call.
pub enum Reply {
    Chunks(Vec<Chunk>),
    /// Never answers (until the caller cancels).
    Hang,
    Fail(&'static str),
    /// Signals `gate.entered`, then answers once `gate.open` gives a permit.
    Gated(Arc<Gate>, Vec<Chunk>),
    /// A slow model: answers after the delay.
    Slow(std::time::Duration, Vec<Chunk>),
}

/// Holds a model call open until the test lets it go.
pub struct Gate {
    pub entered: tokio::sync::Semaphore,
    pub open: tokio::sync::Semaphore,
}

impl Gate {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            entered: tokio::sync::Semaphore::new(0),
            open: tokio::sync::Semaphore::new(0),
        })
    }

    /// Waits until a gated call has started.
    pub async fn wait_entered(&self) {
        self.entered.acquire().await.unwrap().forget();
    }

    pub fn release(&self) {
        self.open.add_permits(1);
    }
}

/// The chunks of a plain text answer.
pub fn text_chunks(answer: &str) -> Vec<Chunk> {
    match text(answer) {
        Reply::Chunks(chunks) => chunks,
        _ => unreachable!(),
    }
}

type Script = Box<dyn Fn(&ModelRequest) -> Reply + Send + Sync>;

/// A model whose answer is computed from the request; records every request.
pub struct ScriptedModel {
    script: Script,
    pub requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedModel {
    pub fn new(script: impl Fn(&ModelRequest) -> Reply + Send + Sync + 'static) -> Arc<Self> {
        Arc::new(Self {
            script: Box::new(script),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }

    pub fn calls_for(&self, session: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.session_id == session)
            .count()
    }
}

impl Model for ScriptedModel {
    fn provider(&self) -> String {
        "scripted".into()
    }

    fn name(&self) -> String {
        "scripted".into()
    }

    fn stream(&self, request: ModelRequest) -> ChunkStream {
        let reply = (self.script)(&request);
        self.requests.lock().unwrap().push(request);
        match reply {
            Reply::Chunks(chunks) => Box::pin(stream::iter(chunks.into_iter().map(Ok))),
            Reply::Hang => Box::pin(stream::pending()),
            Reply::Fail(message) => {
                Box::pin(stream::iter([Err(ModelError::Failed(message.into()))]))
            }
            Reply::Gated(gate, chunks) => {
                use futures::StreamExt;
                let opened = async move {
                    gate.entered.add_permits(1);
                    gate.open.acquire().await.unwrap().forget();
                    stream::iter(chunks.into_iter().map(Ok))
                };
                Box::pin(stream::once(opened).flatten())
            }
            Reply::Slow(delay, chunks) => {
                use futures::StreamExt;
                let later = async move {
                    tokio::time::sleep(delay).await;
                    stream::iter(chunks.into_iter().map(Ok))
                };
                Box::pin(stream::once(later).flatten())
            }
        }
    }
}

pub fn finish(kind: FinishKind) -> Chunk {
    Chunk::Finish {
        reason: FinishReason {
            kind,
            failure: None,
        },
    }
}

/// A plain text answer.
pub fn text(answer: &str) -> Reply {
    text_with(answer, FinishKind::Stop)
}

pub fn text_with(answer: &str, kind: FinishKind) -> Reply {
    Reply::Chunks(vec![
        Chunk::BlockStart {
            index: 0,
            block_type: BlockType::Text,
        },
        Chunk::TextDelta {
            index: 0,
            text: answer.into(),
        },
        Chunk::BlockEnd {
            index: 0,
            block: AssistantBlock::Text {
                text: answer.into(),
            },
        },
        finish(kind),
    ])
}

/// One response calling the given tools, in order.
pub fn calls(list: &[(&str, Value)]) -> Reply {
    let mut chunks = Vec::new();
    for (i, (name, args)) in list.iter().enumerate() {
        let index = i as u32;
        let id = format!("call_{i}");
        chunks.push(Chunk::ToolCallDelta {
            index,
            id: id.clone(),
            name: Some((*name).into()),
            arguments_delta: args.to_string(),
        });
        chunks.push(Chunk::BlockEnd {
            index,
            block: AssistantBlock::ToolCall {
                id,
                name: (*name).into(),
                arguments: args.to_string(),
            },
        });
    }
    chunks.push(finish(FinishKind::ToolCalls));
    Reply::Chunks(chunks)
}

/// The text of the last user message, the last tool result, or "" — what the script keys on.
pub fn last_user_text(request: &ModelRequest) -> String {
    request
        .history
        .iter()
        .rev()
        .find_map(|item| match item {
            HistoryItem::User(parts) => Some(
                parts
                    .iter()
                    .filter_map(|p| match p {
                        UserPart::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .unwrap_or_default()
}

/// The result text of the last tool call in the request's history, if the last item is one.
pub fn last_tool_result(request: &ModelRequest) -> Option<(String, bool)> {
    match request.history.last() {
        Some(HistoryItem::ToolResult { text, is_error, .. }) => Some((text.clone(), *is_error)),
        _ => None,
    }
}

/// A runtime over `model` in a fresh home, with a workspace; keep the guards alive.
pub struct World {
    pub runtime: Arc<Runtime>,
    pub home: tempfile::TempDir,
    pub cwd: tempfile::TempDir,
}

impl World {
    pub fn new(model: Arc<dyn Model>) -> Self {
        Self::with_options(model, RuntimeOptions::default())
    }

    pub fn with_options(model: Arc<dyn Model>, options: RuntimeOptions) -> Self {
        let home = tempfile::tempdir().unwrap();
        let cwd = tempfile::tempdir().unwrap();
        let runtime = Runtime::new(home.path(), model, ToolRegistry::new(), options).unwrap();
        Self { runtime, home, cwd }
    }

    pub fn session(&self) -> Arc<Agent> {
        self.runtime
            .host()
            .create_session(self.cwd.path().to_owned(), Vec::new(), 0)
            .unwrap()
    }

    /// A stored, published top-level agent with the given header depth and options.
    pub fn published_agent(
        &self,
        header_depth: u32,
        options: kin::agent::AgentOptions,
    ) -> Arc<Agent> {
        let mut header = kin::session::Header::new(
            uuid::Uuid::new_v4().to_string(),
            1,
            self.cwd.path().display().to_string(),
            vec![],
        );
        header.delegation_depth = header_depth;
        let log = self.runtime.host().store().create(&header).unwrap();
        let agent = Arc::new(Agent::new(kin::agent::AgentSpec {
            header,
            cwd: self.cwd.path().to_owned(),
            log,
            events: vec![],
            options,
            persona: None,
            tools: self.runtime.host().tools().clone(),
            structured: None,
            roots: None,
        }));
        self.runtime.host().publish(agent.clone()).unwrap();
        agent
    }

    /// Ids of every stored session.
    pub fn stored(&self) -> Vec<String> {
        let sessions = self.home.path().join("sessions");
        let mut ids: Vec<String> = [sessions.clone(), sessions.join("children")]
            .iter()
            .filter_map(|dir| std::fs::read_dir(dir).ok())
            .flatten()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        ids.sort();
        ids
    }

    /// The one stored session other than `parent`.
    pub fn only_child(&self, parent: &str) -> String {
        let others: Vec<String> = self
            .stored()
            .into_iter()
            .filter(|id| id != parent)
            .collect();
        assert_eq!(others.len(), 1, "expected exactly one child: {others:?}");
        others[0].clone()
    }

    /// A session's log lines as JSON.
    pub fn log(&self, id: &str) -> Vec<Value> {
        let top = self.home.path().join(format!("sessions/{id}.jsonl"));
        let child = self
            .home
            .path()
            .join(format!("sessions/children/{id}.jsonl"));
        std::fs::read_to_string(if top.exists() { top } else { child })
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The (text, isError) of every tool result in a session's log.
    pub fn tool_results(&self, id: &str) -> Vec<(String, bool)> {
        self.log(id)
            .iter()
            .filter(|e| e["type"] == "tool/result")
            .map(|e| {
                let part = &e["data"]["message"]["content"][0];
                (
                    part["content"][0]["text"].as_str().unwrap().to_owned(),
                    part["isError"].as_bool().unwrap(),
                )
            })
            .collect()
    }

    /// Runs one turn of `agent` for `prompt` through the host.
    pub async fn prompt(&self, agent: &Arc<Agent>, prompt: &str) -> kin::agent::StopReason {
        let prompt = vec![UserPart::Text {
            text: prompt.into(),
        }];
        let cancel = tokio_util::sync::CancellationToken::new();
        self.runtime
            .host()
            .start_turn(agent.clone(), prompt, None, cancel)
            .await
            .unwrap()
    }
}

pub fn prompt(text: &str) -> Vec<UserPart> {
    vec![UserPart::Text { text: text.into() }]
}

/// What a delegation tool bound to `provider` hands the service for `text`, every option unset.
pub fn request(provider: &str, text: &str) -> Request {
    Request {
        provider: provider.into(),
        prompt: prompt(text),
        label: "a task".into(),
        client: None,
        cancel: tokio_util::sync::CancellationToken::new(),
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

/// Delegates `request` for `parent` in the foreground: the child's result.
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
pub async fn start_continuable(
    runtime: &Runtime,
    parent: &Agent,
    request: Request,
) -> (String, String) {
    let delegated = runtime
        .delegation()
        .delegate(&parent.id, request, Mode::Background);
    match delegated.await.unwrap() {
        Delegated::Continuable { child, task } => (child, task.to_string()),
        _ => panic!("in-process background children are continuable"),
    }
}

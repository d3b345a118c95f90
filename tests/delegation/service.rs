//! `SubagentService`: registry, validation order, lifecycle.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt;
use kin::session::AssistantBlock;
use kin::subagent::{
    Capabilities, Lifecycle, Provider, ResumeRequest, Run, RunControl, StartRequest, StopReason,
    SubagentError, SubagentResult, SubagentService,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::support::{prompt, text, ScriptedModel, World};

/// A provider that counts starts and answers with a fixed child id and text.
struct FakeProvider {
    name: &'static str,
    caps: Capabilities,
    starts: Arc<AtomicUsize>,
    fail: bool,
    resumable: bool,
}

struct NoopControl;

impl RunControl for NoopControl {
    fn dispose(&self) -> BoxFuture<'static, ()> {
        std::future::ready(()).boxed()
    }
    fn steer(
        &self,
        _content: Vec<kin::session::UserPart>,
    ) -> Option<BoxFuture<'static, Result<(), kin::subagent::SteerRefusal>>> {
        None
    }
}

fn fake_run(id: &str) -> Run {
    let result = SubagentResult {
        output: vec![AssistantBlock::Text {
            text: "DONE".into(),
        }],
        structured: None,
        stop_reason: StopReason::Completed,
        error: None,
    };
    Run::new(
        id.into(),
        None,
        std::future::ready(result).boxed(),
        Arc::new(NoopControl),
    )
}

impl Provider for FakeProvider {
    fn name(&self) -> &str {
        self.name
    }
    fn capabilities(&self) -> Capabilities {
        self.caps
    }
    fn inherits_parent_context(&self) -> bool {
        false
    }
    fn start(&self, _request: StartRequest) -> BoxFuture<'static, Result<Run, SubagentError>> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        let result = if self.fail {
            Err(SubagentError::Setup("setup failed".into()))
        } else {
            Ok(fake_run("child-1"))
        };
        std::future::ready(result).boxed()
    }
    fn can_resume(&self) -> bool {
        self.resumable
    }
    fn resume(&self, request: ResumeRequest) -> BoxFuture<'static, Result<Run, SubagentError>> {
        std::future::ready(Ok(fake_run(&request.session_id))).boxed()
    }
}

fn fake(name: &'static str, caps: Capabilities) -> (Arc<FakeProvider>, Arc<AtomicUsize>) {
    let starts = Arc::new(AtomicUsize::new(0));
    let provider = Arc::new(FakeProvider {
        name,
        caps,
        starts: starts.clone(),
        fail: false,
        resumable: false,
    });
    (provider, starts)
}

fn world() -> World {
    World::new(ScriptedModel::new(|_| text("unused")))
}

/// Lifecycle events as they arrive, with a wake-up for each.
#[derive(Clone)]
struct Recorder {
    seen: Arc<Mutex<Vec<Lifecycle>>>,
    arrived: Arc<tokio::sync::Notify>,
}

impl Recorder {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Lifecycle>> {
        self.seen.lock().unwrap()
    }
}

fn record(service: &SubagentService) -> Recorder {
    let recorder = Recorder {
        seen: Arc::new(Mutex::new(Vec::new())),
        arrived: Arc::new(tokio::sync::Notify::new()),
    };
    let sink = recorder.clone();
    service.subscribe(move |event| {
        sink.seen.lock().unwrap().push(event.clone());
        sink.arrived.notify_one();
    });
    recorder
}

/// Waits until `count` end events arrived (they come from a task awaiting each result).
async fn ended(recorder: &Recorder, count: usize) {
    while recorder
        .lock()
        .iter()
        .filter(|e| matches!(e, Lifecycle::End { .. }))
        .count()
        < count
    {
        recorder.arrived.notified().await;
    }
}

#[tokio::test]
async fn registers_lists_looks_up_and_removes_providers() {
    let service = SubagentService::new();
    let (a, _) = fake("alpha", Capabilities::ALL);
    let (b, _) = fake("beta", Capabilities::default());
    service.register(a).unwrap();
    service.register(b).unwrap();
    assert_eq!(service.list(), ["alpha", "beta"]);
    assert!(service.get("alpha").is_some());
    assert!(service.unregister("alpha"));
    assert!(service.get("alpha").is_none());
    assert!(!service.unregister("alpha"));
    assert_eq!(service.list(), ["beta"]);
}

#[tokio::test]
async fn rejects_duplicate_and_absent_provider_names() {
    let world = world();
    let service = Arc::new(SubagentService::new());
    let (a, _) = fake("alpha", Capabilities::ALL);
    service.register(a.clone()).unwrap();
    let duplicate = service.register(a).unwrap_err();
    assert_eq!(duplicate.code(), "DUPLICATE_PROVIDER");
    assert_eq!(
        duplicate.to_string(),
        "a subagent provider named \"alpha\" is already registered"
    );
    let parent = world.session();
    let missing = service
        .start(
            "nope",
            StartRequest::new(prompt("x"), parent, CancellationToken::new()),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(missing.code(), "NO_PROVIDER");
    assert_eq!(
        missing.to_string(),
        "no subagent provider registered for \"nope\""
    );
}

#[tokio::test]
async fn rejects_unsupported_capabilities_in_order_before_provider_startup() {
    let world = world();
    let parent = world.session();
    let service = Arc::new(SubagentService::new());
    let (provider, starts) = fake("bare", Capabilities::default());
    service.register(provider).unwrap();
    type Set = fn(&mut StartRequest);
    let cases: [(&str, Set); 4] = [
        ("outputSchema", |r| {
            r.output_schema = Some(json!({"type": "object"}))
        }),
        ("depthLimit", |r| r.max_depth = Some(1)),
        ("toolFilter", |r| r.tool_filter = Some(Default::default())),
        ("persona", |r| r.persona = Some("p".into())),
    ];
    for (capability, set) in cases {
        let mut request = StartRequest::new(prompt("x"), parent.clone(), CancellationToken::new());
        set(&mut request);
        // Also ask for everything after it: the first missing capability in order is reported.
        request.persona = Some("p".into());
        let error = service.start("bare", request).await.err().unwrap();
        assert_eq!(error.code(), "UNSUPPORTED_CAPABILITY");
        assert_eq!(
            error.to_string(),
            format!("subagent provider \"bare\" does not support the \"{capability}\" capability")
        );
    }
    assert_eq!(
        starts.load(Ordering::SeqCst),
        0,
        "the provider was never started"
    );
}

#[tokio::test]
async fn validates_the_schema_before_provider_startup() {
    let world = world();
    let parent = world.session();
    let service = Arc::new(SubagentService::new());
    let (provider, starts) = fake("full", Capabilities::ALL);
    service.register(provider).unwrap();
    let mut request = StartRequest::new(prompt("x"), parent, CancellationToken::new());
    request.output_schema = Some(json!({"type": "array"}));
    let error = service.start("full", request).await.err().unwrap();
    assert_eq!(error.code(), "INVALID_SCHEMA");
    assert_eq!(starts.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn publishes_lifecycle_after_start_with_fresh_run_ids_and_the_parent() {
    let world = world();
    let parent = world.session();
    let service = Arc::new(SubagentService::new());
    let (provider, _) = fake("full", Capabilities::ALL);
    service.register(provider).unwrap();
    let seen = record(&service);
    for _ in 0..2 {
        let run = service
            .start(
                "full",
                StartRequest::new(prompt("x"), parent.clone(), CancellationToken::new()),
            )
            .await
            .unwrap();
        run.result().await;
    }
    ended(&seen, 2).await;
    let events = seen.lock().clone();
    let starts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Lifecycle::Start(identity) => Some(identity.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(starts.len(), 2);
    assert_ne!(
        starts[0].run_id, starts[1].run_id,
        "run ids are fresh even for the same child id"
    );
    assert_eq!(starts[0].id, "child-1");
    assert_eq!(starts[0].parent, parent.id);
    assert_eq!(starts[0].provider, "full");
    assert!(
        matches!(&events[0], Lifecycle::Start(_)),
        "start comes before end"
    );
    let Some(Lifecycle::End {
        identity,
        stop_reason,
        last_message,
    }) = events.iter().find(|e| matches!(e, Lifecycle::End { .. }))
    else {
        panic!("no end event");
    };
    assert_eq!(identity.run_id, starts[0].run_id);
    assert_eq!(*stop_reason, StopReason::Completed);
    assert_eq!(
        last_message,
        &vec![AssistantBlock::Text {
            text: "DONE".into()
        }]
    );
}

#[tokio::test]
async fn emits_no_lifecycle_when_provider_startup_fails_and_contains_panicking_listeners() {
    let world = world();
    let parent = world.session();
    let service = Arc::new(SubagentService::new());
    let starts = Arc::new(AtomicUsize::new(0));
    service
        .register(Arc::new(FakeProvider {
            name: "bad",
            caps: Capabilities::ALL,
            starts,
            fail: true,
            resumable: false,
        }))
        .unwrap();
    let (good, _) = fake("good", Capabilities::ALL);
    service.register(good).unwrap();
    service.subscribe(|_| panic!("a broken listener"));
    let seen = record(&service);
    let error = service
        .start(
            "bad",
            StartRequest::new(prompt("x"), parent.clone(), CancellationToken::new()),
        )
        .await
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "could not set up the subagent: setup failed"
    );
    assert!(seen.lock().is_empty());
    service
        .start(
            "good",
            StartRequest::new(prompt("x"), parent, CancellationToken::new()),
        )
        .await
        .unwrap();
    assert_eq!(
        seen.lock().len(),
        1,
        "the listener after the panicking one still ran"
    );
}

#[tokio::test]
async fn resume_dispatches_only_to_providers_that_can_resume() {
    let world = world();
    let parent = world.session();
    let service = Arc::new(SubagentService::new());
    let (plain, _) = fake("plain", Capabilities::ALL);
    service.register(plain).unwrap();
    let starts = Arc::new(AtomicUsize::new(0));
    service
        .register(Arc::new(FakeProvider {
            name: "resumable",
            caps: Capabilities::ALL,
            starts,
            fail: false,
            resumable: true,
        }))
        .unwrap();
    let request = |id: &str| ResumeRequest {
        session_id: id.into(),
        prompt: prompt("again"),
        parent: parent.clone(),
        cancel: CancellationToken::new(),
        descriptor: kin::subagent::Descriptor {
            version: 1,
            provider: "resumable".into(),
            agent_provider: None,
            agent_model: None,
            persona: None,
            tool_filter: None,
            provider_data: None,
        },
        client: None,
    };
    let error = service.resume("plain", request("c")).await.err().unwrap();
    assert_eq!(
        error.to_string(),
        "subagent provider \"plain\" does not support resuming persisted children (no resume capability)"
    );
    let run = service.resume("resumable", request("c2")).await.unwrap();
    assert_eq!(run.id, "c2");
}

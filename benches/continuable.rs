//! Continuable-children benchmarks, in-process against the real runtime and store with an
//! instant model:
//! 1. cold resume of a child whose log holds 10,000 events: `send_message` -> the child's
//!    first model request;
//! 2. steering a message into a running child (the `send_message` call itself);
//! 3. `list_agents` over 10,000 stored children of one parent.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream;
use kin::agent::Agent;
use kin::delegation::Delivery;
use kin::model::{ChunkStream, Model, ModelRequest};
use kin::runtime::Runtime;
use kin::session::UserPart;
use tokio_util::sync::CancellationToken;

#[allow(dead_code)] // this bench has its own model around the shared answer
mod instant_model;

/// Answers at once with a one-word text, or holds the call while `hold` is set; records when
/// each call arrived.
#[derive(Default)]
struct InstantModel {
    calls: Mutex<Vec<Instant>>,
    hold: std::sync::atomic::AtomicBool,
}

impl Model for InstantModel {
    fn provider(&self) -> String {
        "instant".into()
    }
    fn name(&self) -> String {
        "instant".into()
    }
    fn stream(&self, _request: ModelRequest) -> ChunkStream {
        self.calls.lock().unwrap().push(Instant::now());
        if self.hold.load(std::sync::atomic::Ordering::SeqCst) {
            return Box::pin(stream::pending());
        }
        instant_model::answer_ok()
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn prompt(text: &str) -> Vec<UserPart> {
    vec![UserPart::Text { text: text.into() }]
}

async fn wait(runtime: &Runtime, task: &str, owner: &str) {
    runtime
        .tasks()
        .wait(
            task,
            Duration::from_secs(120),
            owner,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
}

fn started(delivery: Delivery) -> String {
    match delivery {
        Delivery::Started(task) | Delivery::Steered(task) => task.to_string(),
    }
}

/// A continuable child of `parent` that has settled after its first turn.
async fn settled_child(runtime: &Arc<Runtime>, parent: &Arc<Agent>) -> String {
    let request = instant_model::request("spawn", "go", "bench child");
    let (child, task) = instant_model::start_continuable(runtime, parent, request).await;
    wait(runtime, &task, &parent.id).await;
    child
}

async fn cold_resume(runtime: &Arc<Runtime>, model: &InstantModel, parent: &Arc<Agent>) {
    let child = settled_child(runtime, parent).await;
    // Each activation of the instant model writes 10 events.
    for _ in 0..999 {
        let task = started(
            runtime
                .delegation()
                .send_message(&parent.id, &child, prompt("grow"), None)
                .await
                .unwrap(),
        );
        wait(runtime, &task, &parent.id).await;
    }
    let events = runtime.host().store().load(&child).unwrap().events.len();
    let mut samples = Vec::new();
    for i in 0..35 {
        let sent = Instant::now();
        let task = started(
            runtime
                .delegation()
                .send_message(&parent.id, &child, prompt("again"), None)
                .await
                .unwrap(),
        );
        wait(runtime, &task, &parent.id).await;
        let called = *model.calls.lock().unwrap().last().unwrap();
        if i >= 5 {
            samples.push(called.duration_since(sent));
        }
    }
    println!(
        "continuable: cold resume of a child with a {events}-event log: send_message -> first model request median {:.3} ms (30 runs after 5 warm-ups)",
        ms(median(samples))
    );
}

async fn steering(runtime: &Arc<Runtime>, model: &InstantModel, parent: &Arc<Agent>) {
    model.hold.store(true, std::sync::atomic::Ordering::SeqCst);
    let before = model.calls.lock().unwrap().len();
    let request = instant_model::request("spawn", "hold", "held child");
    let (child, task) = instant_model::start_continuable(runtime, parent, request).await;
    // The child is in its model call once the model saw it (no event reaches us otherwise).
    while model.calls.lock().unwrap().len() == before {
        tokio::task::yield_now().await;
    }
    let mut samples = Vec::new();
    for i in 0..1100 {
        let sent = Instant::now();
        let delivery = runtime
            .delegation()
            .send_message(&parent.id, &child, prompt("steer"), None)
            .await
            .unwrap();
        let took = sent.elapsed();
        assert_eq!(delivery, Delivery::Steered(task.clone()));
        if i >= 100 {
            samples.push(took);
        }
    }
    println!(
        "continuable: steering into a running child: send_message median {:.4} ms (1000 runs after 100 warm-ups)",
        ms(median(samples))
    );
    runtime.tasks().kill(&task, &parent.id, None).unwrap();
    wait(runtime, &task, &parent.id).await;
    model.hold.store(false, std::sync::atomic::Ordering::SeqCst);
}

async fn list_many(runtime: &Arc<Runtime>, parent: &Arc<Agent>) {
    // One real child, copied under 10,000 ids (plus 10,000 sessions of another parent).
    let child = settled_child(runtime, parent).await;
    let text = std::fs::read_to_string(runtime.host().store().path(&child).unwrap()).unwrap();
    let other = uuid::Uuid::new_v4().to_string();
    // The copies go beside the real child (children have their own directory), and the
    // directory's index is dropped so the store rebuilds it from the files, as after a crash.
    let child_dir = runtime.host().store().path(&child).unwrap();
    let child_dir = child_dir.parent().unwrap().to_owned();
    for n in 0..20_000 {
        let id = uuid::Uuid::new_v4().to_string();
        let copy = text.replace(&child, &id);
        let copy = if n % 2 == 0 {
            copy
        } else {
            copy.replace(&parent.id, &other)
        };
        std::fs::write(child_dir.join(format!("{id}.jsonl")), copy).unwrap();
    }
    std::fs::remove_file(child_dir.join(".index")).unwrap();
    let mut samples = Vec::new();
    let mut listed = 0;
    for i in 0..13 {
        let started = Instant::now();
        listed = runtime.delegation().list(&parent.id).len();
        if i >= 3 {
            samples.push(started.elapsed());
        }
    }
    println!(
        "continuable: list_agents over {listed} stored children of one parent, in a store of 20,000+ sessions (half another parent's children): median {:.1} ms (10 runs after 3 warm-ups, warm page cache)",
        ms(median(samples))
    );
}

fn main() {
    let model = Arc::new(InstantModel::default());
    instant_model::in_process(model.clone(), |runtime, cwd| async move {
        let parent = runtime.host().create_session(cwd, vec![], 0).unwrap();
        cold_resume(&runtime, &model, &parent).await;
        steering(&runtime, &model, &parent).await;
        list_many(&runtime, &parent).await;
    });
}

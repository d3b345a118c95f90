//! The session host: one turn driver, one ordered event stream.

use std::sync::{Arc, Mutex};

use kin::agent::host::HostEvent;
use kin::agent::StopReason;

use super::support::{answer, last_user_text, request, text, ScriptedModel, World};

/// What a listener saw, as short strings: `appended <session>`, `started <child> on <parent>`,
/// `ended <session> <stop>`.
fn record(world: &World) -> (Arc<Mutex<Vec<String>>>, kin::agent::host::Subscription) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let subscription = world.runtime.host().events().subscribe(move |event| {
        let line = match event {
            HostEvent::Appended { agent, .. } => format!("appended {}", agent.id),
            HostEvent::ChildStarted { parent, child, .. } => {
                format!("started {} on {parent}", child.id)
            }
            HostEvent::TurnEnded { agent, stop, .. } => format!("ended {} {stop:?}", agent.id),
            HostEvent::ChildUpdate { session, .. } => format!("child update {session}"),
            HostEvent::ChildSummary { call_id, .. } => format!("child summary {call_id}"),
        };
        sink.lock().unwrap().push(line);
    });
    (seen, subscription)
}

#[tokio::test]
async fn a_turn_reports_every_appended_event_then_its_end() {
    let world = World::new(ScriptedModel::new(|_| text("hello")));
    let session = world.session();
    let (seen, subscription) = record(&world);
    assert_eq!(world.prompt(&session, "hi").await, StopReason::Completed);
    let lines = seen.lock().unwrap().clone();
    let appended = lines.iter().filter(|l| l.starts_with("appended")).count();
    assert_eq!(
        appended,
        world.log(&session.id).len() - 1,
        "every line after the header"
    );
    assert_eq!(
        lines.last().unwrap(),
        &format!("ended {} Completed", session.id)
    );

    drop(subscription);
    world.prompt(&session, "again").await;
    assert_eq!(
        seen.lock().unwrap().len(),
        lines.len(),
        "a dropped subscription hears nothing"
    );
}

#[tokio::test]
async fn a_child_is_announced_before_its_events_and_its_end_is_reported() {
    let model = ScriptedModel::new(|req| text(&last_user_text(req).to_uppercase()));
    let world = World::new(model);
    let parent = world.session();
    let (seen, _subscription) = record(&world);
    answer(&world.runtime, &parent, request("spawn", "go")).await;
    let lines = seen.lock().unwrap().clone();
    let child = &world.only_child(&parent.id);
    assert_eq!(lines[0], format!("started {child} on {}", parent.id));
    assert!(lines[1..].iter().all(|l| l.contains(child.as_str())));
    assert_eq!(lines.last().unwrap(), &format!("ended {child} Completed"));
}

#[test]
fn cancellation_owns_every_end_but_a_completed_one() {
    let failed = Err(kin::agent::TurnError::Stopped);
    assert_eq!(StopReason::of(&failed, false), StopReason::Error);
    assert_eq!(StopReason::of(&failed, true), StopReason::Cancelled);
    let limit = Ok(StopReason::MaxSteps);
    assert_eq!(StopReason::of(&limit, false), StopReason::MaxSteps);
    assert_eq!(StopReason::of(&limit, true), StopReason::Cancelled);
    let done = Ok(StopReason::Completed);
    assert_eq!(StopReason::of(&done, true), StopReason::Completed);
}

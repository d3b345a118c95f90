//! The background task service: ids, fencing, waits, kills and completion notices.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use kin::tasks::{KillResult, Notice, TaskId, TaskOutcome, TaskService, TaskStatus};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

type Notices = Arc<Mutex<Vec<(String, String)>>>;

fn service() -> (Arc<TaskService>, Notices) {
    let tasks = Arc::new(TaskService::new(CancellationToken::new()));
    let notices: Notices = Arc::new(Mutex::new(Vec::new()));
    let sink = notices.clone();
    tasks.set_notice_sink(Box::new(move |notice| {
        if let Notice::Post { owner, text, .. } = notice {
            sink.lock().unwrap().push((owner, text))
        }
    }));
    (tasks, notices)
}

/// A task that finishes with `outcome` when the returned sender fires.
fn controlled(
    tasks: &Arc<TaskService>,
    kind: &str,
    owner: &str,
) -> (TaskId, oneshot::Sender<TaskOutcome>) {
    let (tx, rx) = oneshot::channel::<TaskOutcome>();
    let id = tasks
        .start(kind, "a label", Some(owner.into()), move |cancel| {
            async move {
                tokio::select! {
                    outcome = rx => outcome.unwrap_or_else(|_| TaskOutcome::failed("dropped")),
                    _ = cancel.cancelled() => TaskOutcome::killed(),
                }
            }
            .boxed()
        })
        .unwrap();
    (id, tx)
}

async fn settled(tasks: &TaskService, id: &str, owner: &str) -> kin::tasks::TaskSnapshot {
    // A wait far longer than any settlement; it returns as soon as the task settles.
    tasks
        .wait(
            id,
            Duration::from_secs(60),
            owner,
            &CancellationToken::new(),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn ids_count_per_kind_and_tasks_are_fenced_by_owner() {
    let (tasks, _) = service();
    let (a, _a) = controlled(&tasks, "subagent", "s1");
    let (b, _b) = controlled(&tasks, "subagent", "s1");
    let (c, _c) = controlled(&tasks, "shell", "s1");
    assert_eq!(
        [a.as_str(), b.as_str(), c.as_str()],
        ["subagent-1", "subagent-2", "shell-1"]
    );
    assert_eq!(
        tasks.read("subagent-1", "s2").unwrap_err().to_string(),
        "task subagent-1 belongs to another session"
    );
    assert_eq!(
        tasks.read("subagent-9", "s1").unwrap_err().to_string(),
        "unknown task subagent-9"
    );
    assert_eq!(
        tasks.read("", "s1").unwrap_err().to_string(),
        "invalid task_id: expected a non-empty string, got \"\""
    );
    assert_eq!(tasks.list("s1").len(), 3);
    assert!(tasks.list("s2").is_empty());
}

#[tokio::test]
async fn a_timed_out_wait_leaves_the_task_running() {
    let (tasks, notices) = service();
    let (id, done) = controlled(&tasks, "subagent", "s1");
    let snapshot = tasks
        .wait(
            &id,
            Duration::from_millis(1),
            "s1",
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    assert_eq!(snapshot.status, TaskStatus::Running);
    done.send(TaskOutcome::completed("OUT".into())).unwrap();
    let snapshot = settled(&tasks, &id, "s1").await;
    assert_eq!(snapshot.status, TaskStatus::Completed);
    assert_eq!(snapshot.output.as_deref(), Some("OUT"));
    assert!(
        notices.lock().unwrap().is_empty(),
        "a terminal wait saw the result: no notice"
    );
}

#[tokio::test]
async fn an_unseen_settlement_notifies_the_owner_once() {
    let tasks = Arc::new(TaskService::new(CancellationToken::new()));
    let (notice_tx, mut notice_rx) = tokio::sync::mpsc::unbounded_channel();
    tasks.set_notice_sink(Box::new(move |notice| {
        if let Notice::Post { owner, text, .. } = notice {
            let _ = notice_tx.send((owner, text));
        }
    }));
    let (id, done) = controlled(&tasks, "subagent", "s1");
    done.send(TaskOutcome::failed("Error: setup failed"))
        .unwrap();
    let notice = notice_rx.recv().await.unwrap();
    assert_eq!(
        notice,
        (
            "s1".to_owned(),
            "background task subagent-1 (subagent: a label) finished [status: failed, Error: setup failed]. Read its output with task_output.".to_owned()
        )
    );
    assert_eq!(tasks.read(&id, "s1").unwrap().status, TaskStatus::Failed);
    tasks.shutdown().await;
    assert!(notice_rx.try_recv().is_err(), "exactly one notice");
}

#[tokio::test]
async fn kill_stops_a_running_task_and_suppresses_its_notice() {
    let (tasks, notices) = service();
    let (id, _never) = controlled(&tasks, "subagent", "s1");
    assert_eq!(
        tasks.kill(&id, "s1", Some("not needed")).unwrap(),
        KillResult::Requested
    );
    assert_eq!(tasks.read(&id, "s1").unwrap().status, TaskStatus::Stopping);
    let snapshot = settled(&tasks, &id, "s1").await;
    assert_eq!(snapshot.status, TaskStatus::Killed);
    assert!(
        matches!(tasks.kill(&id, "s1", None).unwrap(), KillResult::AlreadyFinished(s) if s.status == TaskStatus::Killed)
    );
    assert!(notices.lock().unwrap().is_empty());
}

#[tokio::test]
async fn shutdown_cancels_and_settles_every_task() {
    let (tasks, _) = service();
    let (id, _never) = controlled(&tasks, "subagent", "s1");
    tasks.shutdown().await;
    assert_eq!(
        tasks
            .list("s1")
            .into_iter()
            .find(|t| t.id == id)
            .unwrap()
            .status,
        TaskStatus::Killed
    );
    assert!(tasks
        .start("subagent", "late", None, |_| std::future::ready(
            TaskOutcome::killed()
        )
        .boxed())
        .is_err());
}

#[tokio::test]
async fn a_panicking_task_settles_as_failed() {
    let (tasks, _) = service();
    let id = tasks
        .start("subagent", "doomed", Some("s1".into()), |_| {
            async { panic!("boom") }.boxed()
        })
        .unwrap();
    let snapshot = settled(&tasks, &id, "s1").await;
    assert_eq!(snapshot.status, TaskStatus::Failed);
    assert_eq!(snapshot.detail.as_deref(), Some("Error: the task panicked"));
}

#[tokio::test]
async fn reading_a_result_takes_back_the_notice_it_had_left() {
    let tasks = Arc::new(TaskService::new(CancellationToken::new()));
    let (notice_tx, mut notice_rx) = tokio::sync::mpsc::unbounded_channel();
    tasks.set_notice_sink(Box::new(move |notice| {
        let _ = notice_tx.send(notice);
    }));
    let (id, done) = controlled(&tasks, "subagent", "s1");
    done.send(TaskOutcome::completed("answer".into())).unwrap();
    let Notice::Post {
        owner, id: posted, ..
    } = notice_rx.recv().await.unwrap()
    else {
        panic!("the first notice posts");
    };
    assert_eq!(owner, "s1");
    assert_eq!(tasks.read(&id, "s1").unwrap().status, TaskStatus::Completed);
    assert_eq!(
        notice_rx.recv().await.unwrap(),
        Notice::Withdraw {
            owner: "s1".into(),
            id: posted
        }
    );
    // Only the first read takes it back.
    tasks.read(&id, "s1").unwrap();
    assert!(notice_rx.try_recv().is_err());
}

#[tokio::test]
async fn owners_hear_each_start_and_learn_each_end_once() {
    use kin::tasks::Record;
    let (tasks, _) = service();
    let (record_tx, mut records) = tokio::sync::mpsc::unbounded_channel();
    tasks.set_record_sink(Box::new(move |record| {
        let _ = record_tx.send(record);
    }));
    let (read, done) = controlled(&tasks, "subagent", "s1");
    assert!(matches!(
        records.try_recv().unwrap(),
        Record::Started { owner, task, subject: None, .. } if owner == "s1" && task == read
    ));
    done.send(TaskOutcome::completed("answer".into())).unwrap();
    settled(&tasks, &read, "s1").await;
    tasks.read(&read, "s1").unwrap();
    tasks.kill(&read, "s1", None).unwrap();
    let ended = |task: &TaskId, status| Record::Ended {
        owner: "s1".into(),
        task: task.clone(),
        status,
    };
    assert_eq!(
        records.try_recv().unwrap(),
        ended(&read, TaskStatus::Completed)
    );
    assert!(records.try_recv().is_err(), "told once");

    let (killed, _running) = controlled(&tasks, "subagent", "s1");
    records.try_recv().unwrap();
    tasks.kill(&killed, "s1", None).unwrap();
    assert_eq!(
        records.try_recv().unwrap(),
        ended(&killed, TaskStatus::Killed)
    );
    // Unowned tasks have nobody to tell.
    tasks
        .start("subagent", "free", None, |_| {
            async { TaskOutcome::killed() }.boxed()
        })
        .unwrap();
    assert!(records.try_recv().is_err());
}

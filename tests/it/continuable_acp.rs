//! Continuable children across kin processes sharing one `KIN_HOME`: a child started by one
//! process is continued by the next after a restart, and two processes never run the same
//! child at once (the parent's writer lock refuses the second process first; a child locked
//! elsewhere fails the loser's task, which says so).

use crate::common;

use std::path::Path;

use common::{Script, Wire};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{json, Value};

/// A replay child script (`session.1.jsonl`): one model call per answer; `None` hangs.
fn write_child_script(dir: &Path, answers: &[Option<&str>]) {
    let mut lines = vec![
        json!({"type":"session","version":0,"id":"00000000-0000-4000-8000-000000000001","createdAt":0,"cwd":"/","parentSession":"00000000-0000-4000-8000-000000000000","delegationDepth":1}),
    ];
    for (turn, answer) in answers.iter().enumerate() {
        let turn = turn + 1;
        let mut chunks = vec![json!({"type":"block-start","index":0,"blockType":"text"})];
        if let Some(text) = answer {
            chunks.push(json!({"type":"text-delta","index":0,"text":text}));
            chunks.push(json!({"type":"block-end","index":0,"block":{"type":"text","text":text}}));
            chunks.push(json!({"type":"finish","reason":{"kind":"stop"}}));
        }
        for chunk in chunks {
            let seq = lines.len() - 1;
            lines.push(json!({"type":"assistant/chunk","seq":seq,"time":0,"data":{"turn":turn,"step":1,"chunk":chunk}}));
        }
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("session.1.jsonl"), text).unwrap();
}

/// Adds a recorded tool result to the parent script, so replay learns what `{{id:2}}` (the
/// child id the model echoes) is in this run.
fn teach_child_id(dir: &Path) {
    let result = json!({"type":"tool/result","seq":0,"time":0,"data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"c"},"content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"started subagent {{id:2}} as task subagent-1"}],"isError":false}],"role":"user","id":"r"}}});
    let path = dir.join("session.jsonl");
    let mut text = std::fs::read_to_string(&path).unwrap();
    // Placed after the header so seqs stay increasing (the chunks are renumbered by position).
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines.insert(1, result.to_string());
    for (seq, line) in lines.iter_mut().enumerate().skip(1) {
        let mut event: Value = serde_json::from_str(line).unwrap();
        event["seq"] = json!(seq - 1);
        *line = event.to_string();
    }
    text = lines.join("\n") + "\n";
    std::fs::write(path, text).unwrap();
}

/// Texts of the tool results in a session's log, in order.
fn tool_results(home: &Path, session: &str) -> Vec<String> {
    let top = home.join(format!("sessions/{session}.jsonl"));
    let path = if top.exists() {
        top
    } else {
        common::child_log_path(home, session)
    };
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool/result")
        .map(|e| {
            e["data"]["message"]["content"][0]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

/// Ids of the session logs in `home` other than `parent`'s (the store also keeps files that
/// are not logs, such as its `.index`).
fn children_of(home: &Path, parent: &str) -> Vec<String> {
    common::session_files(home)
        .into_iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|id| id != parent)
        .collect()
}

/// Whether some process holds a `flock` on a session file (the activation lock). Read from
/// `/proc/locks` rather than by trying the lock, which could make the holder's own try fail.
fn is_locked(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(inode) = std::fs::metadata(path).map(|m| m.ino()) else {
        return false;
    };
    let locks = std::fs::read_to_string("/proc/locks").unwrap();
    locks.lines().any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF"
        fields.get(1) == Some(&"FLOCK")
            && fields
                .get(5)
                .and_then(|device_inode| device_inode.rsplit(':').next())
                .is_some_and(|found| found == inode.to_string())
    })
}

fn child_of(home: &Path, parent: &str) -> String {
    let children = children_of(home, parent);
    assert_eq!(children.len(), 1, "{children:?}");
    children[0].clone()
}

async fn load(kin: &mut Wire, session: &str) {
    let (_, answer) = kin.load(2, session).await;
    assert!(answer.get("result").is_some(), "{answer}");
}

#[tokio::test]
async fn after_a_restart_send_message_continues_a_known_child() {
    let first = Script::new()
        .call("c1", "subagent", json!({"description": "child", "prompt": "Reply with CHILD_OK.", "run_in_background": true}))
        .call("c2", "task_output", json!({"task_id": "subagent-1", "wait": true}))
        .text("collected")
        .dir();
    write_child_script(first.path(), &[Some("CHILD_OK")]);
    let mut kin = Wire::start(Some(first.path()));
    let parent = kin.open_session().await;
    kin.turn(3, &parent, "start a child").await;
    let home = kin.stop().await;
    let child = child_of(home.path(), &parent);

    let second = Script::new()
        .call(
            "c3",
            "send_message",
            json!({"subagent_id": "{{id:2}}", "message": "Now reply with CHILD_AGAIN."}),
        )
        .wait_for("c4", "subagent-1")
        .text("continued")
        .dir();
    teach_child_id(second.path());
    write_child_script(second.path(), &[Some("CHILD_AGAIN")]);
    let mut kin = Wire::start_in(Some(second.path()), home);
    kin.initialize().await;
    load(&mut kin, &parent).await;
    kin.turn(4, &parent, "follow up").await;
    assert_eq!(
        tool_results(kin.home.path(), &parent),
        [
            format!("started subagent {child} as task subagent-1"),
            "CHILD_OK\n[status: completed]".to_owned(),
            format!("message started task subagent-1 continuing subagent {child}"),
            "CHILD_AGAIN\n[status: completed]".to_owned(),
        ]
    );
    let child_log =
        std::fs::read_to_string(common::child_log_path(kin.home.path(), &child)).unwrap();
    assert_eq!(child_log.matches(r#""type":"turn/end""#).count(), 2);
}

#[tokio::test]
async fn a_child_running_in_one_process_is_refused_by_another() {
    let first = Script::new()
        .call("c1", "subagent", json!({"description": "child", "prompt": "Work for a long time.", "run_in_background": true}))
        .text("started")
        .dir();
    write_child_script(first.path(), &[None]);
    let mut holder = Wire::start(Some(first.path()));
    let parent = holder.open_session().await;
    holder.prompt(3, &parent, "start a child").await;
    let home = holder.home.path().to_owned();
    // No event reaches the client when the child is created (its task runs on after the
    // parent's turn): wait until its file exists and the holder has locked it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !children_of(&home, &parent)
        .iter()
        .any(|child| is_locked(&common::child_log_path(&home, child)))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let child = child_of(&home, &parent);
    let child_log = common::child_log_path(&home, &child);

    let second = Script::new()
        .call(
            "c2",
            "send_message",
            json!({"subagent_id": "{{id:2}}", "message": "Are you there?"}),
        )
        .wait_for("c3", "subagent-2")
        .text("refused")
        .dir();
    teach_child_id(second.path());
    let shared = tempfile::TempDir::new().unwrap();
    // The second process uses the same home (the first keeps its own guard).
    let mut other = Wire::start_with(
        Some(second.path()),
        shared,
        &[("KIN_HOME", home.to_str().unwrap())],
    );
    other.initialize().await;
    // The holder has the parent open: here it is only replayed, and a prompt is refused.
    let holder_pid = holder.child.id().unwrap();
    let (_, answer) = other.load(2, &parent).await;
    assert_eq!(
        answer["result"]["_meta"]["kin.readOnly"]["writerPid"],
        holder_pid
    );
    let (_, answer) = other.prompt(3, &parent, "follow up").await;
    assert_eq!(answer["error"]["code"], -32001, "{answer}");
    assert_eq!(answer["error"]["data"]["pid"], holder_pid, "{answer}");
    // The holder's child is untouched and still running.
    assert!(!std::fs::read_to_string(&child_log)
        .unwrap()
        .contains(r#""type":"turn/end""#));
    holder.close_stdin();
    holder.child.wait().await.unwrap();

    // The parent is free now, but another process (this test) runs the child: a message to
    // it is refused, and says so.
    let file = std::fs::File::open(&child_log).unwrap();
    let running = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| e)
        .expect("the holder's lock went with it");
    load(&mut other, &parent).await;
    other.prompt(4, &parent, "follow up").await;
    let results = tool_results(&home, &parent);
    assert_eq!(
        results[results.len() - 2..],
        [
            // subagent-1 is the holder's task, known here only as interrupted.
            format!("message started task subagent-2 continuing subagent {child}"),
            format!(
                "(no new output)\n[status: failed, SubagentControlError: subagent \"{child}\" is \
                 active in another kin process; the message was not delivered]"
            ),
        ]
    );
    drop(running);
}

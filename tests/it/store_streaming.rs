//! `session/load` of a log of a few MB, read as a stream: the updates kin sends, in order,
//! are exactly those the whole-file path gives (the log parsed from its bytes, then replayed),
//! for a session opened for writing and for one another process holds (replayed read-only
//! straight from the file). The streamed reader itself gives the same events, set-aside lines
//! and torn tail as the whole-file parse. The log holds a compaction near its end: the
//! session opened for writing keeps only what its model sees, yet the replay is the whole log;
//! one step was cut off before its message, so its streamed text is replayed.

use crate::common;

use std::fmt::Write as _;
use std::io::BufReader;
use std::path::Path;

use common::Wire;
use kin::session::{parse_log, read_log};
use nix::fcntl::{Flock, FlockArg};
use serde_json::{json, Value};

const ID: &str = "5d1c2b3a-0f4e-4a7b-8c9d-112233445566";
const TURNS: u64 = 300;

/// A log of `TURNS` turns (a prompt, streamed reasoning and text, the message, a title after
/// the first), with one corrupt interior line and a torn last line.
fn write_log(path: &Path, cwd: &str) -> Vec<u8> {
    let header = json!({"type": "session", "version": 0, "id": ID, "createdAt": 1_767_225_600_000u64,
        "cwd": cwd, "delegationDepth": 0});
    let mut text = format!("{header}\n");
    let mut seq = 0u64;
    let mut line = |text: &mut String, kind: &str, data: Value, append: bool| {
        let mut value =
            json!({"type": kind, "seq": seq, "time": 1_767_225_600_000u64 + seq, "data": data});
        if append {
            value["surfaceOp"] = json!("append");
        }
        writeln!(text, "{value}").unwrap();
        seq += 1;
    };
    for turn in 1..=TURNS {
        line(
            &mut text,
            "turn/start",
            json!({"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
            false,
        );
        line(
            &mut text,
            "user/message",
            json!({"content": [{"type": "text", "text": format!("Question {turn}: {}", "why? ".repeat(40))}],
            "source": {"kind": "user"}, "role": "user", "id": format!("u{turn}")}),
            true,
        );
        if turn == 1 {
            line(
                &mut text,
                "session/title",
                json!({"title": "Question 1", "messageSeqs": [1], "source": {"kind": "fallback"}}),
                false,
            );
        }
        line(
            &mut text,
            "step/start",
            json!({"turn": turn, "step": 1}),
            false,
        );
        let chunk = |chunk: Value| json!({"turn": turn, "step": 1, "chunk": chunk});
        line(
            &mut text,
            "assistant/chunk",
            chunk(json!({"type": "block-start", "index": 0, "blockType": "reasoning"})),
            false,
        );
        for i in 0..10 {
            line(
                &mut text,
                "assistant/chunk",
                chunk(
                    json!({"type": "reasoning-delta", "index": 0, "text": format!("thinking {i} ")}),
                ),
                false,
            );
        }
        line(
            &mut text,
            "assistant/chunk",
            chunk(
                json!({"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "thinking"}}),
            ),
            false,
        );
        line(
            &mut text,
            "assistant/chunk",
            chunk(json!({"type": "block-start", "index": 1, "blockType": "text"})),
            false,
        );
        for i in 0..30 {
            line(
                &mut text,
                "assistant/chunk",
                chunk(
                    json!({"type": "text-delta", "index": 1, "text": format!("answer part {i} of turn {turn}. ")}),
                ),
                false,
            );
        }
        line(
            &mut text,
            "assistant/chunk",
            chunk(
                json!({"type": "block-end", "index": 1, "block": {"type": "text", "text": "answer"}}),
            ),
            false,
        );
        // One step is cut off before its message: its streamed text is replayed instead.
        if turn != TURNS - 5 {
            line(
                &mut text,
                "assistant/message",
                json!({"turn": turn, "step": 1, "message": {"role": "assistant",
            "content": [{"type": "reasoning", "text": "thinking"}, {"type": "text", "text": format!("The answer to {turn}.")}],
            "source": {"kind": "model", "provider": "p", "model": "m"}, "id": format!("a{turn}")}}),
                true,
            );
        }
        line(
            &mut text,
            "step/end",
            json!({"turn": turn, "step": 1}),
            false,
        );
        line(
            &mut text,
            "turn/end",
            json!({"turn": turn, "reason": {"kind": "completed"}}),
            false,
        );
        if turn == TURNS / 2 {
            text.push_str("{\"type\":\"turn/start\",\"seq\":\n");
        }
        if turn == TURNS - 20 {
            // The model's view is then the summary and the last 20 turns; the replay is
            // still the whole conversation.
            line(
                &mut text,
                "compaction/start",
                json!({"compactionId": "c1", "throughTurn": turn, "trigger": "threshold"}),
                false,
            );
            line(
                &mut text,
                "compaction/end",
                json!({"compactionId": "c1", "summary": "Questions were answered."}),
                false,
            );
        }
    }
    text.push_str("{\"type\":\"turn/st");
    std::fs::write(path, &text).unwrap();
    text.into_bytes()
}

#[test]
fn the_streamed_reader_gives_what_the_whole_file_parse_gives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{ID}.jsonl"));
    let bytes = write_log(&path, "/w");
    assert!(
        bytes.len() > 2_000_000,
        "a log of a few MB: {}",
        bytes.len()
    );
    let whole = parse_log(&path, &bytes).unwrap();
    let mut events = Vec::new();
    let file = std::fs::File::open(&path).unwrap();
    // A small buffer: lines straddle many refills.
    let streamed = read_log(&path, BufReader::with_capacity(1000, file), |e| {
        events.push(e)
    })
    .unwrap();
    assert_eq!(events, whole.events);
    assert_eq!(streamed.header, whole.header);
    assert_eq!(streamed.torn_tail, whole.torn_tail);
    assert_eq!(streamed.set_aside, whole.set_aside);
    let reasons: Vec<_> = whole.set_aside.iter().map(|s| &s.reason).take(2).collect();
    assert_eq!(whole.set_aside.len(), 1, "{reasons:?}");
    assert!(whole.torn_tail.is_some());
}

/// The `session/update`s of a `session/load`, in order, and its answer.
async fn load(kin: &mut Wire, id: i64) -> (Vec<Value>, Value) {
    let (notes, answer) = kin.load(id, ID).await;
    let updates = notes
        .into_iter()
        .filter(|n| n["method"] == "session/update")
        .map(|n| n["params"]["update"].clone())
        .filter(|u| u["sessionUpdate"] != "available_commands_update")
        .collect();
    (updates, answer)
}

#[tokio::test]
async fn session_load_streams_the_same_updates_in_the_same_order() {
    let mut kin = Wire::start(None);
    let sessions = kin.home.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let path = sessions.join(format!("{ID}.jsonl"));
    let bytes = write_log(&path, &kin.cwd());
    let whole = parse_log(&path, &bytes).unwrap();
    let expected: Vec<Value> =
        kin::acp::updates::replay(&whole.events, &kin::tools::builtin(), None)
            .into_iter()
            // The client does not take compaction updates.
            .filter(|update| !kin::acp::models::is_compaction(update))
            .map(|update| serde_json::to_value(update).unwrap())
            .collect();
    assert!(expected.len() > 3 * TURNS as usize);
    kin.initialize().await;

    // Another process holds the session: replayed read-only, straight from the file.
    let file = std::fs::File::open(&path).unwrap();
    let held = Flock::lock(file, FlockArg::LockExclusive)
        .map_err(|(_, e)| e)
        .unwrap();
    let (updates, answer) = load(&mut kin, 2).await;
    assert!(
        answer["result"]["_meta"]["kin.readOnly"].is_object(),
        "{answer}"
    );
    assert_eq!(updates.len(), expected.len());
    assert!(updates == expected, "read-only replay differs");
    // Unlock before closing: a process another test forks at this moment shares the open
    // file (until it execs), and closing alone would leave the lock with that copy.
    let file = held.unlock().map_err(|(_, e)| e).unwrap();
    drop(file);

    // Opened for writing here.
    let (updates, answer) = load(&mut kin, 3).await;
    assert!(
        answer["result"]["_meta"]["kin.readOnly"].is_null(),
        "{answer}"
    );
    assert_eq!(updates.len(), expected.len());
    assert!(updates == expected, "replay differs");
}

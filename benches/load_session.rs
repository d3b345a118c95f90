//! `load_session`: `session/load` of a 100,000-event and of a 10,000-event log, and the
//! library parse alone.
//!
//! The logs are 2,000 (200) complete turns of 50 events each (turn/start, user/message, step/start,
//! block-start, 41 text-deltas, block-end, finish, assistant/message, step/end, turn/end),
//! seqs contiguous from 0. `session/load` is timed from writing the request to reading its
//! response, the `session/update` replay in between read and discarded, once per fresh
//! process; `kin::session::parse_log` is timed in-process on the same bytes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{summary, temp_dir, Kin};
use serde_json::{json, Value};

const TURNS: u64 = 2_000;
const SMALL_TURNS: u64 = 200;
/// Updates a load sends besides the replay: the session's slash commands (`available_commands_update`).
const SESSION_UPDATES: u64 = 1;
const DELTAS: u64 = 41;
const EVENTS_PER_TURN: u64 = DELTAS + 9;
const EVENTS: u64 = TURNS * EVENTS_PER_TURN;
const LOADS: usize = 5;
const SMALL_LOADS: usize = 11;
const PARSES: usize = 10;

/// Writes a session log of `turns` turns; returns its bytes.
fn write_log(path: &Path, id: &str, cwd: &Path, turns: u64) -> Vec<u8> {
    let header = json!({
        "type": "session", "version": 0, "id": id, "createdAt": 1_767_225_600_000u64,
        "cwd": cwd.to_str().expect("UTF-8 temp path"), "delegationDepth": 0,
    });
    let mut text = format!("{header}\n");
    let mut seq = 0u64;
    let mut time = 1_767_225_600_000u64;
    let mut push = |text: &mut String, kind: &str, data: Value, extra: Option<Value>| -> u64 {
        let mut line = json!({"type": kind, "seq": seq, "time": time, "data": data});
        if let Some(Value::Object(extra)) = extra {
            line.as_object_mut().expect("an object").extend(extra);
        }
        writeln!(text, "{line}").expect("writing to a String");
        seq += 1;
        time += 1;
        seq - 1
    };
    for turn in 1..=turns {
        push(
            &mut text,
            "turn/start",
            json!({"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
            None,
        );
        push(
            &mut text,
            "user/message",
            json!({
                "content": [{"type": "text", "text": format!("Please continue with part {turn} of the task.")}],
                "source": {"kind": "user"}, "role": "user", "id": uuid::Uuid::new_v4().to_string(),
            }),
            Some(json!({"surfaceOp": "append"})),
        );
        push(
            &mut text,
            "step/start",
            json!({"turn": turn, "step": 1}),
            None,
        );
        let chunk = |chunk: Value| json!({"turn": turn, "step": 1, "chunk": chunk});
        let mut chunk_seqs = vec![push(
            &mut text,
            "assistant/chunk",
            chunk(json!({"type": "block-start", "index": 0, "blockType": "text"})),
            None,
        )];
        let mut full = String::new();
        for i in 0..DELTAS {
            let delta = format!("token{i} of turn {turn}; ");
            full.push_str(&delta);
            chunk_seqs.push(push(
                &mut text,
                "assistant/chunk",
                chunk(json!({"type": "text-delta", "index": 0, "text": delta})),
                None,
            ));
        }
        chunk_seqs.push(push(
            &mut text,
            "assistant/chunk",
            chunk(
                json!({"type": "block-end", "index": 0, "block": {"type": "text", "text": full}}),
            ),
            None,
        ));
        chunk_seqs.push(push(
            &mut text,
            "assistant/chunk",
            chunk(json!({"type": "finish", "reason": {"kind": "stop"}})),
            None,
        ));
        push(
            &mut text,
            "assistant/message",
            json!({
                "turn": turn, "step": 1,
                "message": {
                    "role": "assistant", "content": [{"type": "text", "text": full}],
                    "source": {"kind": "model", "provider": "replay", "model": "replay"},
                    "id": uuid::Uuid::new_v4().to_string(),
                },
            }),
            Some(json!({"sourceEventSeqs": chunk_seqs, "surfaceOp": "append"})),
        );
        push(
            &mut text,
            "step/end",
            json!({"turn": turn, "step": 1}),
            None,
        );
        push(
            &mut text,
            "turn/end",
            json!({"turn": turn, "reason": {"kind": "completed"}}),
            None,
        );
    }
    assert_eq!(seq, turns * EVENTS_PER_TURN);
    std::fs::write(path, &text).expect("writing the session log");
    text.into_bytes()
}

fn main() {
    common::watchdog("load_session", Duration::from_secs(60));
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let id = uuid::Uuid::new_v4().to_string();
    let sessions = home.path().join("sessions");
    std::fs::create_dir_all(&sessions).expect("creating the sessions dir");
    let path = sessions.join(format!("{id}.jsonl"));
    let bytes = write_log(&path, &id, cwd.path(), TURNS);

    // The library parse alone, on bytes already in memory.
    let mut parse_rates = Vec::with_capacity(PARSES);
    for _ in 0..PARSES {
        let start = Instant::now();
        let loaded = kin::session::parse_log(&path, &bytes).expect("kin parses the log");
        let elapsed = start.elapsed();
        assert_eq!(loaded.events.len() as u64, EVENTS);
        assert!(loaded.torn_tail.is_none());
        drop(loaded);
        parse_rates.push(EVENTS as f64 / elapsed.as_secs_f64());
    }

    // `session/load` end to end, one load per fresh process.
    let mut load_rates = Vec::with_capacity(LOADS);
    let mut load_ms = Vec::with_capacity(LOADS);
    let mut updates_seen = 0;
    let mut peak_kib = Vec::with_capacity(LOADS);
    let params = json!({"sessionId": id, "cwd": cwd.path().to_str(), "mcpServers": []});
    let request =
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": params}).to_string();
    for _ in 0..LOADS {
        let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
        kin.initialize();
        let start = Instant::now();
        kin.send(&request);
        let (_, updates) = kin.wait_response(2);
        let elapsed = start.elapsed();
        peak_kib.push(common::proc_status_kb(kin.pid(), "VmHWM") as f64);
        kin.finish();
        assert_eq!(
            updates as u64,
            2 * TURNS + SESSION_UPDATES,
            "one user and one agent chunk per turn, and the session's own updates"
        );
        updates_seen = updates;
        load_rates.push(EVENTS as f64 / elapsed.as_secs_f64());
        load_ms.push(common::ms(elapsed));
    }
    let unchanged = std::fs::read(&path).expect("re-reading the log") == bytes;
    assert!(unchanged, "session/load changed the log file");

    // The same for a 10,000-event log.
    let small_id = uuid::Uuid::new_v4().to_string();
    let small_path = sessions.join(format!("{small_id}.jsonl"));
    write_log(&small_path, &small_id, cwd.path(), SMALL_TURNS);
    let params = json!({"sessionId": small_id, "cwd": cwd.path().to_str(), "mcpServers": []});
    let mut small_ms = Vec::with_capacity(SMALL_LOADS);
    for _ in 0..SMALL_LOADS {
        let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
        kin.initialize();
        let start = Instant::now();
        let (_, updates) = kin.call(3, "session/load", params.clone());
        small_ms.push(common::ms(start.elapsed()));
        kin.finish();
        assert_eq!(updates as u64, 2 * SMALL_TURNS + SESSION_UPDATES);
    }

    let mb = bytes.len() as f64 / (1024.0 * 1024.0);
    let (load_rate, _, _) = summary(&mut load_rates);
    let (load_time, _, _) = summary(&mut load_ms);
    let (peak, _, _) = summary(&mut peak_kib);
    println!(
        "load_session: session/load of {EVENTS} events ({mb:.1} MiB) answered in median \
         {load_time:.1} ms = {:.0} events/s (min {:.0}, max {:.0}; {LOADS} fresh processes, \
         {updates_seen} session/update lines each, peak RSS median {:.1} MiB; release build; \
         target >= 200,000 events/s)",
        load_rate,
        load_rates[0],
        load_rates[LOADS - 1],
        peak / 1024.0,
    );
    let (small, small_p10, small_p90) = summary(&mut small_ms);
    println!(
        "load_session: session/load of {} events answered in median {small:.1} ms (p10 \
         {small_p10:.1}, p90 {small_p90:.1}; {SMALL_LOADS} fresh processes; release build; target <= \
         10 ms)",
        SMALL_TURNS * EVENTS_PER_TURN,
    );
    let (parse_rate, _, _) = summary(&mut parse_rates);
    println!(
        "load_session: kin::session::parse_log alone: median {:.1} ms = {parse_rate:.0} events/s \
         (min {:.0}, max {:.0}; {PARSES} runs in-process on the same bytes)",
        EVENTS as f64 / parse_rate * 1e3,
        parse_rates[0],
        parse_rates[PARSES - 1],
    );
}

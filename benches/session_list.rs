//! `session_list`: `session/list` over 10,000 stored sessions.
//!
//! The store holds 10,000 one-turn session logs (header, turn/start, user/message,
//! session/title, step, a short streamed answer, turn/end; ~2 KiB each) and no index. One
//! `kin acp` process lists once (that first listing builds the index from every file, timed
//! and reported), then the first page is timed `SAMPLES` times, each from writing the request
//! to reading its response; then every page is read once, cursor by cursor. Finally
//! `FRESH` new processes each time their first page (index present, process cold).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use serde_json::{json, Value};

const SESSIONS: usize = 10_000;
const SAMPLES: usize = 30;
const FRESH: usize = 5;

fn write_sessions(dir: &Path, cwd: &str) {
    std::fs::create_dir_all(dir).expect("creating the sessions dir");
    for n in 0..SESSIONS {
        let id = format!("00000000-0000-4000-8000-{n:012}");
        let mut text = String::new();
        let mut line = |value: Value| writeln!(text, "{value}").expect("writing to a String");
        line(
            json!({"type": "session", "version": 0, "id": id, "createdAt": 1_767_225_600_000u64 + n as u64,
            "cwd": cwd, "delegationDepth": 0}),
        );
        line(json!({"type": "turn/start", "seq": 0, "time": 0,
            "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}}));
        line(
            json!({"type": "user/message", "seq": 1, "time": 0, "surfaceOp": "append",
            "data": {"content": [{"type": "text", "text": format!("Question number {n} about the code")}],
                "source": {"kind": "user"}, "role": "user", "id": format!("u{n}")}}),
        );
        line(json!({"type": "session/title", "seq": 2, "time": 0,
            "data": {"title": format!("Question number {n} about"), "messageSeqs": [1], "source": {"kind": "fallback"}}}));
        line(json!({"type": "step/start", "seq": 3, "time": 0, "data": {"turn": 1, "step": 1}}));
        let mut seq = 4;
        for i in 0..10 {
            line(
                json!({"type": "assistant/chunk", "seq": seq, "time": 0, "data": {"turn": 1, "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": format!("piece {i} ")}}}),
            );
            seq += 1;
        }
        line(json!({"type": "step/end", "seq": seq, "time": 0, "data": {"turn": 1, "step": 1}}));
        line(json!({"type": "turn/end", "seq": seq + 1, "time": 0,
            "data": {"turn": 1, "reason": {"kind": "completed"}}}));
        std::fs::write(dir.join(format!("{id}.jsonl")), text).expect("writing a session log");
    }
}

/// `session/list` (the page after `cursor`); returns (sessions on the page, next cursor, ms).
fn list(kin: &mut Kin, id: u64, cursor: Option<&str>) -> (usize, Option<String>, f64) {
    let params = match cursor {
        Some(cursor) => json!({"cursor": cursor}),
        None => json!({}),
    };
    let start = Instant::now();
    let (answer, _) = kin.call(id, "session/list", params);
    let elapsed = ms(start.elapsed());
    let result = &answer["result"];
    let count = result["sessions"].as_array().map_or(0, Vec::len);
    let next = result["nextCursor"].as_str().map(str::to_owned);
    (count, next, elapsed)
}

fn main() {
    common::watchdog("session_list", Duration::from_secs(300));
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let cwd_text = cwd.path().to_str().expect("UTF-8 temp path");
    write_sessions(&home.path().join("sessions"), cwd_text);

    let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
    kin.initialize();
    let (first_count, _, rebuild_ms) = list(&mut kin, 2, None);
    assert!(first_count > 0, "the first page lists sessions");

    let mut samples = Vec::with_capacity(SAMPLES);
    for n in 0..SAMPLES {
        let (count, _, elapsed) = list(&mut kin, 10 + n as u64, None);
        assert_eq!(count, first_count);
        samples.push(elapsed);
    }

    let start = Instant::now();
    let (mut listed, mut pages, mut cursor) = (0, 0, None);
    loop {
        let (count, next, _) = list(&mut kin, 1000 + pages, cursor.as_deref());
        listed += count;
        pages += 1;
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let all_pages_ms = ms(start.elapsed());
    assert_eq!(listed, SESSIONS, "paging lists every session once");
    kin.finish();

    let mut fresh = Vec::with_capacity(FRESH);
    for _ in 0..FRESH {
        let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
        kin.initialize();
        fresh.push(list(&mut kin, 2, None).2);
        kin.finish();
    }

    let (median, p10, p90) = summary(&mut samples);
    let (fresh_median, _, _) = summary(&mut fresh);
    println!(
        "session_list: first page ({first_count} sessions) of {SESSIONS} in median {median:.1} ms \
         (p10 {p10:.1}, p90 {p90:.1}; {SAMPLES} requests on one warm process; release build; \
         target <= 50 ms)"
    );
    println!(
        "session_list: first page in a fresh process: median {fresh_median:.1} ms ({FRESH} \
         processes); all {pages} pages in {all_pages_ms:.0} ms; the first listing, which built \
         the index from the {SESSIONS} files, took {rebuild_ms:.0} ms"
    );
}

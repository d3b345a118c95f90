//! `store_scale`: the session store at scale (issue 25 targets, release build).
//!
//! 1. 100,000 top-level sessions (one-turn logs of a few lines each, written here). A first
//!    `kin acp` process builds the index (reported, not a target). Then `FRESH` new processes
//!    each time their first `session/list` page (target < 100 ms), every later page (target
//!    < 10 ms each) and the whole walk (target < 10 s).
//! 2. The same store plus `KIN_BENCH_CHILDREN` (default 1,000,000) child sessions in
//!    `sessions/children/` (header-only logs, indexed as kin would index them). `FRESH`
//!    processes time their first page (target < 100 ms), and `SAMPLES` `session/new` calls on
//!    one process are timed (target < 1 ms median).
//!
//! Everything is written to a temporary directory and deleted at the end.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use serde_json::{json, Value};

const SESSIONS: usize = 100_000;
const FRESH: usize = 5;
const SAMPLES: usize = 200;

fn write_top(dir: &Path, cwd: &str) {
    std::fs::create_dir_all(dir).expect("creating the sessions dir");
    for n in 0..SESSIONS {
        let id = format!("00000000-0000-4000-8000-{n:012}");
        let mut text = String::new();
        let mut line = |value: Value| writeln!(text, "{value}").expect("writing to a String");
        line(json!({"type": "session", "version": 0, "id": id,
            "createdAt": 1_767_225_600_000u64 + n as u64, "cwd": cwd, "delegationDepth": 0}));
        line(json!({"type": "turn/start", "seq": 0, "time": 0,
            "data": {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}}));
        line(
            json!({"type": "user/message", "seq": 1, "time": 0, "surfaceOp": "append",
            "data": {"content": [{"type": "text", "text": format!("Question number {n}")}],
                "source": {"kind": "user"}, "role": "user", "id": format!("u{n}")}}),
        );
        line(json!({"type": "session/title", "seq": 2, "time": 0,
            "data": {"title": format!("Question number {n}"), "messageSeqs": [1], "source": {"kind": "fallback"}}}));
        line(json!({"type": "turn/end", "seq": 3, "time": 0,
            "data": {"turn": 1, "reason": {"kind": "completed"}}}));
        std::fs::write(dir.join(format!("{id}.jsonl")), text).expect("writing a session log");
    }
}

/// Header-only child logs, and their index records as kin writes them.
fn write_children(dir: &Path, cwd: &str, count: usize) {
    let children = dir.join("children");
    std::fs::create_dir_all(&children).expect("creating the children dir");
    let mut index = std::io::BufWriter::new(
        std::fs::File::create(children.join(".index")).expect("creating the children index"),
    );
    let parent = "00000000-0000-4000-8000-000000000000";
    for n in 0..count {
        let id = format!("10000000-0000-4000-8000-{n:012}");
        let header = json!({"type": "session", "version": 0, "id": id, "createdAt": 1_767_225_600_000u64,
            "cwd": cwd, "parentSession": parent, "delegationDepth": 1});
        std::fs::write(children.join(format!("{id}.jsonl")), format!("{header}\n"))
            .expect("writing a child log");
        let record = json!({"id": id, "cwd": cwd, "parentSession": parent, "updatedNs": n,
            "child": {"createdAt": 1_767_225_600_000u64, "turns": 0}});
        writeln!(index, "{record}").expect("writing the children index");
    }
    index.flush().expect("writing the children index");
}

/// `session/list` after `cursor`: (sessions on the page, next cursor, ms).
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
    (
        count,
        result["nextCursor"].as_str().map(str::to_owned),
        elapsed,
    )
}

/// One fresh process: (first page ms, later pages ms each, whole walk ms, sessions listed).
fn walk(home: &Path, cwd: &Path) -> (f64, Vec<f64>, f64, usize) {
    let mut kin = Kin::spawn(home, cwd, &[]);
    kin.initialize();
    let start = Instant::now();
    let (mut listed, mut cursor, first) = list(&mut kin, 2, None);
    let mut later = Vec::new();
    let mut id = 3;
    while let Some(next) = cursor {
        let (count, after, elapsed) = list(&mut kin, id, Some(&next));
        listed += count;
        later.push(elapsed);
        cursor = after;
        id += 1;
    }
    let whole = ms(start.elapsed());
    kin.finish();
    (first, later, whole, listed)
}

fn main() {
    let children: usize = std::env::var("KIN_BENCH_CHILDREN")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    common::watchdog("store_scale", Duration::from_secs(1800));
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let cwd_text = cwd.path().to_str().expect("UTF-8 temp path");
    let sessions = home.path().join("sessions");
    write_top(&sessions, cwd_text);

    let build = Instant::now();
    let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
    kin.initialize();
    list(&mut kin, 2, None);
    kin.finish();
    let build_ms = ms(build.elapsed());

    let (mut firsts, mut laters, mut wholes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..FRESH {
        let (first, later, whole, listed) = walk(home.path(), cwd.path());
        assert_eq!(listed, SESSIONS, "the walk lists every session once");
        firsts.push(first);
        laters.extend(later);
        wholes.push(whole);
    }
    let (first, _, _) = summary(&mut firsts);
    let (later, _, later_p90) = summary(&mut laters);
    let (whole, _, _) = summary(&mut wholes);
    println!(
        "store_scale: {SESSIONS} sessions: first page in a fresh process median {first:.1} ms \
         (target < 100); later pages median {later:.2} ms, p90 {later_p90:.2} (target < 10); \
         whole walk median {whole:.0} ms (target < 10000); {FRESH} processes; building the \
         index from the files took {build_ms:.0} ms once"
    );

    let written = Instant::now();
    write_children(&sessions, cwd_text, children);
    let written_s = written.elapsed().as_secs_f64();
    let mut firsts = Vec::new();
    for _ in 0..FRESH {
        let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
        kin.initialize();
        firsts.push(list(&mut kin, 2, None).2);
        kin.finish();
    }
    let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
    kin.initialize();
    let mut news = Vec::with_capacity(SAMPLES);
    for n in 0..SAMPLES {
        let start = Instant::now();
        kin.new_session(100 + n as u64, cwd.path());
        news.push(ms(start.elapsed()));
    }
    kin.finish();
    let (first, _, _) = summary(&mut firsts);
    let (new, _, new_p90) = summary(&mut news);
    println!(
        "store_scale: with {children} children also stored (written in {written_s:.0} s): first \
         page in a fresh process median {first:.1} ms (target < 100); session/new median \
         {new:.3} ms, p90 {new_p90:.3} ({SAMPLES} calls, one process; target < 1)"
    );
    // Explicitly, to hear of a store that could not be removed (it is large).
    home.close().expect("removing the bench store");
    cwd.close().expect("removing the bench cwd");
}

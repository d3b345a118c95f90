//! `load_big`: `session/load` and `session/resume` of a session log of `KIN_BENCH_LOG_MB` MiB
//! (default 1024), and the peak RSS of the process that loads it (issue 25 targets: load
//! < 3 s and < 256 MiB; resume < 200 ms when the log holds a compaction).
//!
//! The log is one-step turns of a prompt, 40 text deltas of ~100 bytes, the message and the
//! turn's end, written to a temporary directory (deleted at the end); a successful compaction
//! is written when 1 MiB is left to write, so the model's view is its summary and the last
//! MiB of turns. Each of `LOADS` fresh `kin acp` processes answers `initialize`, then
//! `session/load` is timed from writing the request to reading its answer (the replayed
//! updates read and discarded on the way), and the process's VmHWM read before it exits; then
//! `LOADS` more fresh processes time `session/resume` the same way.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use serde_json::json;

const LOADS: usize = 3;
const ID: &str = "7e57b16a-0000-4000-8000-000000000001";

fn write_log(path: &Path, cwd: &str, bytes: u64) -> u64 {
    let mut out = BufWriter::new(std::fs::File::create(path).expect("creating the log"));
    let header = json!({"type": "session", "version": 0, "id": ID, "createdAt": 1_767_225_600_000u64,
        "cwd": cwd, "delegationDepth": 0});
    writeln!(out, "{header}").expect("writing the log");
    let (mut written, mut seq, mut turn) = (0u64, 0u64, 0u64);
    let filler = "lorem ipsum dolor sit amet ".repeat(4);
    let mut compacted = false;
    while written < bytes {
        turn += 1;
        let mut lines = Vec::new();
        if !compacted && written + (1 << 20) >= bytes {
            compacted = true;
            lines.push(json!({"type": "compaction/start", "seq": 0, "time": 0, "data": {"compactionId": "c1",
                "throughTurn": turn - 1, "trigger": "threshold"}}));
            lines.push(
                json!({"type": "compaction/end", "seq": 0, "time": 0, "data": {"compactionId": "c1",
                "summary": "The user asked for the parts one by one and each was done."}}),
            );
        }
        lines.extend([
            json!({"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}}),
            json!({"type": "user/message", "seq": 0, "time": 0, "surfaceOp": "append", "data": {"content": [{"type": "text", "text": format!("Part {turn}, please.")}],
                "source": {"kind": "user"}, "role": "user", "id": format!("u{turn}")}}),
            json!({"type": "step/start", "seq": 0, "time": 0, "data": {"turn": turn, "step": 1}}),
        ]);
        for _ in 0..40 {
            lines.push(json!({"type": "assistant/chunk", "seq": 0, "time": 0, "data": {"turn": turn, "step": 1,
                "chunk": {"type": "text-delta", "index": 0, "text": filler}}}));
        }
        lines.push(json!({"type": "assistant/message", "seq": 0, "time": 0, "surfaceOp": "append", "data": {"turn": turn, "step": 1,
            "message": {"role": "assistant", "content": [{"type": "text", "text": format!("Done with part {turn}.")}],
            "source": {"kind": "model"}, "id": format!("a{turn}")}}}));
        lines.push(
            json!({"type": "step/end", "seq": 0, "time": 0, "data": {"turn": turn, "step": 1}}),
        );
        lines.push(json!({"type": "turn/end", "seq": 0, "time": 0, "data": {"turn": turn, "reason": {"kind": "completed"}}}));
        for mut line in lines {
            line["seq"] = json!(seq);
            seq += 1;
            let text = line.to_string();
            writeln!(out, "{text}").expect("writing the log");
            written += text.len() as u64 + 1;
        }
    }
    out.flush().expect("writing the log");
    seq
}

fn main() {
    let mib: u64 = std::env::var("KIN_BENCH_LOG_MB")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1024);
    common::watchdog("load_big", Duration::from_secs(1800));
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let cwd_text = cwd.path().to_str().expect("UTF-8 temp path");
    let sessions = home.path().join("sessions");
    std::fs::create_dir_all(&sessions).expect("creating the sessions dir");
    let events = write_log(&sessions.join(format!("{ID}.jsonl")), cwd_text, mib << 20);

    let (mut times, mut peaks) = (Vec::new(), Vec::new());
    for _ in 0..LOADS {
        let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
        kin.initialize();
        let start = Instant::now();
        let (_, updates) = kin.call(
            2,
            "session/load",
            json!({"sessionId": ID, "cwd": cwd_text, "mcpServers": []}),
        );
        times.push(ms(start.elapsed()));
        assert!(updates > 0, "the conversation is replayed");
        peaks.push(common::proc_status_kb(kin.pid(), "VmHWM") as f64 / 1024.0);
        kin.finish();
    }
    let (mut resumes, mut resume_peaks) = (Vec::new(), Vec::new());
    for _ in 0..LOADS {
        let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
        kin.initialize();
        let start = Instant::now();
        let (answer, _) = kin.call(
            2,
            "session/resume",
            json!({"sessionId": ID, "cwd": cwd_text, "mcpServers": []}),
        );
        resumes.push(ms(start.elapsed()));
        assert!(answer.get("result").is_some(), "{answer}");
        resume_peaks.push(common::proc_status_kb(kin.pid(), "VmHWM") as f64 / 1024.0);
        kin.finish();
    }
    // The first load finds no view sidecar yet and writes it; the later ones read it.
    let first = times.first().copied().unwrap_or(f64::NAN);
    let (time, _, _) = summary(&mut times);
    let (peak, _, _) = summary(&mut peaks);
    let (resume, _, _) = summary(&mut resumes);
    let (resume_peak, _, _) = summary(&mut resume_peaks);
    println!(
        "load_big: session/load of a {mib} MiB log ({events} events, a compaction 1 MiB before \
         the end): median {time:.0} ms (target < 3000), peak RSS median {peak:.0} MiB (target \
         < 256); session/resume median {resume:.0} ms (target < 200), peak RSS median \
         {resume_peak:.0} MiB; {LOADS} fresh processes each"
    );
    println!(
        "load_big: the first session/load, before the view sidecar exists: {first:.0} ms \
         (target < 3000)"
    );
    // Explicitly, to hear of a store that could not be removed (it is large).
    home.close().expect("removing the bench store");
    cwd.close().expect("removing the bench cwd");
}

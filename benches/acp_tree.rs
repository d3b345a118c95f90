//! `acp_tree`: an ACP child's updates passed on to an editor that opted into subagents.
//!
//! The bench binary is also the child: run with `KIN_BENCH_TREE_CHILD=N` it answers the
//! handshake, and each prompt with N `agent_message_chunk`s written back to back, each
//! carrying the wall-clock time it was written (ns since the epoch), then `end_turn`. The
//! parent is the release `kin acp --replay`, whose recorded model delegates to it once a turn.
//! - per update: (editor reads the last chunk - child wrote the first) / N, per run: an upper
//!   bound on kin's cost per passed-on update (the child's writing and both pipes included);
//! - first chunk: editor reads the first chunk - child wrote it, per run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::io::{BufRead, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{summary, temp_dir, Kin};
use serde_json::{json, Value};

const CHILD: &str = "KIN_BENCH_TREE_CHILD";
const UPDATES: usize = 2000;
const WARMUP: usize = 2;
const RUNS: usize = 20;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// The child side (see the module doc); returns at stdin's end.
fn serve_child_if_asked() {
    let Some(count) = std::env::var(CHILD)
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    else {
        return;
    };
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let reply =
            |result: Value| json!({"jsonrpc": "2.0", "id": message["id"], "result": result});
        let answer = match message["method"].as_str() {
            Some("initialize") => reply(json!({"protocolVersion": 1, "agentCapabilities": {}})),
            Some("session/new") => reply(json!({"sessionId": "bench-child"})),
            Some("session/prompt") => {
                for _ in 0..count {
                    let chunk = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                        "sessionId": "bench-child", "update": {"sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": now_ns().to_string()}}}});
                    writeln!(out, "{chunk}").expect("writing");
                    out.flush().expect("flushing");
                }
                reply(json!({"stopReason": "end_turn"}))
            }
            _ => continue,
        };
        writeln!(out, "{answer}").expect("writing");
        out.flush().expect("flushing");
    }
    std::process::exit(0);
}

/// A replay script: each of `turns` turns delegates once to `subagent_bench`, then answers.
fn script(turns: usize) -> tempfile::TempDir {
    let dir = temp_dir("kin-bench-tree-");
    let mut lines = vec![
        json!({"type":"session","version":0,"id":"00000000-0000-4000-8000-000000000000","createdAt":0,"cwd":"/","delegationDepth":0}),
    ];
    for turn in 1..=turns {
        let args = json!({"description": "bench", "prompt": "Stream."}).to_string();
        let call = [
            json!({"type":"block-start","index":0,"blockType":"tool-call"}),
            json!({"type":"tool-call-delta","index":0,"id":format!("c{turn}"),"name":"subagent_bench","argumentsDelta":args}),
            json!({"type":"block-end","index":0,"block":{"type":"tool-call","id":format!("c{turn}"),"name":"subagent_bench","arguments":args}}),
            json!({"type":"finish","reason":{"kind":"tool-calls"}}),
        ];
        let text = [
            json!({"type":"block-start","index":0,"blockType":"text"}),
            json!({"type":"text-delta","index":0,"text":"done"}),
            json!({"type":"block-end","index":0,"block":{"type":"text","text":"done"}}),
            json!({"type":"finish","reason":{"kind":"stop"}}),
        ];
        for (step, chunks) in [(1, &call), (2, &text)] {
            for chunk in chunks {
                let seq = lines.len() - 1;
                lines.push(json!({"type":"assistant/chunk","seq":seq,"time":0,"data":{"turn":turn,"step":step,"chunk":chunk}}));
            }
        }
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.path().join("session.jsonl"), text).expect("writing the script");
    dir
}

fn main() {
    serve_child_if_asked();
    common::watchdog("acp_tree", Duration::from_secs(600));
    let (home, cwd, config) = (
        temp_dir("kin-bench-home-"),
        temp_dir("kin-bench-cwd-"),
        temp_dir("kin-bench-config-"),
    );
    let me = std::env::current_exe().expect("the bench's own path");
    std::fs::create_dir_all(config.path().join("kin")).expect("config dir");
    std::fs::write(
        config.path().join("kin/config.toml"),
        format!(
            "[acp_agents.bench]\ncommand = {:?}\nenv = {{ {CHILD} = \"{UPDATES}\" }}\n",
            me.display().to_string()
        ),
    )
    .expect("writing the config");
    let script = script(WARMUP + RUNS);
    let config_dir = config.path().display().to_string();
    let mut kin = Kin::spawn_with(
        home.path(),
        cwd.path(),
        &["--replay".as_ref(), script.path().as_os_str()],
        &[("XDG_CONFIG_HOME", &config_dir)],
    );
    kin.call(
        1,
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"subagents": {}}}),
    );
    let parent = kin.new_session(2, cwd.path());
    let (mut per_update, mut first) = (Vec::new(), Vec::new());
    for run in 0..WARMUP + RUNS {
        let id = 10 + run as u64;
        let prompt = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": parent, "prompt": [{"type": "text", "text": "go"}]}});
        kin.send(&prompt.to_string());
        let (mut written, mut read) = (Vec::new(), Vec::new());
        loop {
            let line = kin.read_line().to_owned();
            let at = now_ns();
            let message: Value = serde_json::from_str(&line).expect("JSON from kin");
            if message["id"] == id {
                break;
            }
            let update = &message["params"]["update"];
            if message["params"]["sessionId"] != parent.as_str()
                && update["sessionUpdate"] == "agent_message_chunk"
            {
                if let Some(ns) = update["content"]["text"]
                    .as_str()
                    .and_then(|t| t.parse::<u128>().ok())
                {
                    written.push(ns);
                    read.push(at);
                }
            }
        }
        assert_eq!(written.len(), UPDATES, "every update reached the editor");
        if run >= WARMUP {
            let span = read[UPDATES - 1].saturating_sub(written[0]) as f64;
            per_update.push(span / UPDATES as f64 / 1e3);
            first.push(read[0].saturating_sub(written[0]) as f64 / 1e3);
        }
    }
    kin.finish();
    let (median, p10, p90) = summary(&mut per_update);
    println!("acp_tree per passed-on update (us): median {median:.2} p10 {p10:.2} p90 {p90:.2} ({UPDATES} updates x {RUNS} runs)");
    let (median, p10, p90) = summary(&mut first);
    println!("acp_tree first chunk, child write -> editor read (us): median {median:.1} p10 {p10:.1} p90 {p90:.1}");
}

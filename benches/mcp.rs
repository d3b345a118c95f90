//! `mcp`: what kin adds around MCP servers.
//!
//! - round trip: one `tools/call` through kin's tool path (registry -> permission -> rmcp ->
//!   stdio pipes -> server -> result mapping), minus the server's own time, which the server
//!   reports in its answer; the server is this bench binary re-run as a minimal stdio MCP
//!   server (`KIN_BENCH_MCP_SERVER`), so its time is a few microseconds;
//! - `session/new`: the answer's latency through the release `kin acp` with three stdio servers
//!   configured against none (they start in the background);
//! - memory: kin's own RSS growth per connected server (20 servers in this process);
//! - 10 children: 10 concurrent calls on one session's server (what 10 in-process children
//!   sharing the parent's connection do): every call answered, one server process.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use kin::mcp::{ServerSpec, SessionServers, Transport};
use kin::tools::{PermissionMode, SessionPermissions, ToolContext};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const SERVER: &str = "KIN_BENCH_MCP_SERVER";
const RUNS: usize = 500;
const WARMUP: usize = 50;

/// The minimal MCP server: `initialize`, `tools/list` (one tool, `ping`), `tools/call` (answers
/// `pong <nanoseconds spent on this request>`).
fn serve_if_asked() {
    if std::env::var_os(SERVER).is_none() {
        return;
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let start = Instant::now();
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let result = match request["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "bench", "version": "0"}}),
            Some("tools/list") => json!({"tools": [{"name": "ping", "description": "Answers pong.",
                "inputSchema": {"type": "object"}}]}),
            Some("tools/call") => Value::Null,
            _ => continue,
        };
        let result = if result.is_null() {
            let nanos = start.elapsed().as_nanos() + 1;
            json!({"content": [{"type": "text", "text": format!("pong {nanos}")}]})
        } else {
            result
        };
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
    std::process::exit(0);
}

fn spec(name: &str) -> ServerSpec {
    let me = std::env::current_exe().expect("the bench's own path");
    ServerSpec {
        name: name.into(),
        transport: Transport::Stdio {
            command: me.to_string_lossy().into_owned(),
            args: vec![],
            env: vec![(SERVER.into(), "1".into())],
        },
        call_timeout: None,
    }
}

fn context(cwd: &Path) -> ToolContext {
    let mut cx = ToolContext::new("bench", cwd.to_owned(), CancellationToken::new());
    cx.permissions = Arc::new(SessionPermissions::new(PermissionMode::Allow));
    cx
}

async fn connected(specs: Vec<ServerSpec>, cwd: &Path) -> Arc<SessionServers> {
    let servers = SessionServers::start(
        specs,
        cwd.to_owned(),
        Duration::from_secs(30),
        kin::mcp::DEFAULT_MAX_TOOLS,
        kin::process::child_env::ChildEnv::default(),
        None,
    );
    let missing = servers.wait_started().await;
    assert!(missing.is_empty(), "servers not ready: {missing:?}");
    servers
}

/// One call; returns (round trip, server's own time).
async fn call(servers: &SessionServers, cwd: &Path) -> (Duration, Duration) {
    let registry = servers.registry();
    let name = registry
        .specs()
        .first()
        .map(|s| s.name.clone())
        .unwrap_or_default();
    let start = Instant::now();
    let output = registry.call(&name, "{}", context(cwd)).await;
    let elapsed = start.elapsed();
    let nanos: u64 = output
        .text
        .strip_prefix("pong ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected answer: {}", output.text));
    (elapsed, Duration::from_nanos(nanos))
}

async fn round_trip(cwd: &Path) {
    let servers = connected(vec![spec("bench")], cwd).await;
    for _ in 0..WARMUP {
        call(&servers, cwd).await;
    }
    let mut samples: Vec<f64> = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let (total, server) = call(&servers, cwd).await;
        samples.push(ms(total.saturating_sub(server)));
    }
    let (median, p10, p90) = summary(&mut samples);
    println!(
        "mcp: tool call round trip minus the server's time: median {median:.3} ms (p10 {p10:.3}, \
         p90 {p90:.3}); method: registry call of an MCP tool over stdio, {RUNS} runs after \
         {WARMUP} warm-ups, target < 0.5 ms"
    );
    servers.stop().await;
}

async fn ten_children(cwd: &Path) {
    let servers = connected(vec![spec("bench")], cwd).await;
    let calls = (0..10).map(|_| call(&servers, cwd));
    let answered = futures::future::join_all(calls).await.len();
    let processes = common_processes();
    println!(
        "mcp: 10 concurrent calls on one session's server: {answered}/10 answered, \
         {processes} server process(es)"
    );
    assert_eq!(answered, 10);
    servers.stop().await;
}

/// The bench server processes now running (their environment marks them; their guards,
/// which have it too, are not counted).
fn common_processes() -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !String::from_utf8_lossy(&cmdline).contains("__guard")
        })
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.windows(SERVER.len()).any(|w| w == SERVER.as_bytes()))
        })
        .count()
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn memory(cwd: &Path) {
    const N: usize = 20;
    // One server first, so the one-time costs (rmcp's statics, thread stacks) are not counted.
    let first = connected(vec![spec("warm")], cwd).await;
    call(&first, cwd).await;
    let before = rss_kb();
    let specs = (0..N).map(|i| spec(&format!("s{i}"))).collect();
    let servers = connected(specs, cwd).await;
    let after = rss_kb();
    println!(
        "mcp: kin's memory per connected server: {} KiB (RSS {before} -> {after} KiB for {N} \
         servers, after one warm-up server; target < 256 KiB)",
        after.saturating_sub(before) / N as u64
    );
    servers.stop().await;
    first.stop().await;
}

/// `session/new` latency through the release binary, with `servers` in its `mcpServers`.
fn session_new(servers: &Value, runs: usize) -> f64 {
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
    kin.initialize();
    let mut samples = Vec::with_capacity(runs);
    for i in 0..runs {
        let params = json!({"cwd": cwd.path(), "mcpServers": servers});
        let start = Instant::now();
        let (answer, _) = kin.call(100 + i as u64, "session/new", params);
        samples.push(ms(start.elapsed()));
        assert!(answer["result"]["sessionId"].is_string(), "{answer}");
        let id = answer["result"]["sessionId"].clone();
        kin.call(10_000 + i as u64, "session/close", json!({"sessionId": id}));
    }
    kin.finish();
    summary(&mut samples).0
}

fn main() {
    serve_if_asked();
    common::watchdog("mcp", Duration::from_secs(600));
    let cwd = temp_dir("kin-bench-cwd-");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    kin::process::guard::enable(common::KIN.into());
    runtime.block_on(round_trip(cwd.path()));
    runtime.block_on(ten_children(cwd.path()));
    runtime.block_on(memory(cwd.path()));
    let me = std::env::current_exe().expect("the bench's own path");
    let three: Vec<Value> = (0..3)
        .map(|i| json!({"name": format!("s{i}"), "command": me, "args": [], "env": [{"name": SERVER, "value": "1"}]}))
        .collect();
    let without = session_new(&json!([]), 100);
    let with = session_new(&Value::Array(three), 100);
    println!(
        "mcp: session/new median {without:.3} ms without servers, {with:.3} ms with three stdio \
         servers: {:.3} ms more (target < 1 ms); method: 100 session/new + session/close each \
         through the release kin acp",
        with - without
    );
}

//! `mcp_serve`: kin as an MCP server.
//!
//! - start-up: process start -> MCP `initialize` answered, on the release `kin mcp`, against
//!   the floor program the `startup` bench uses (`common::serve_floor_if_asked`), runs of the
//!   two interleaved; target <= 1.2x the floor;
//! - a foreground `kin` call: `tools/call kin` -> its answer, through `kin mcp`'s server
//!   (`mcp_server::serve_io`) on in-process pipes, on the instant model (answers "OK" from
//!   memory, so the model's time is ~0); target < 5 ms beyond the model's time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;
mod instant_model;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use instant_model::InstantModel;
use kin::mcp_server::{serve_io, ServeOptions};
use kin::tools::PermissionMode;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

const WARMUP: usize = 10;
const RUNS: usize = 200;
const CALLS: usize = 300;

const MCP_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;

/// Spawn -> `initialize` answered, for `kin mcp` or the floor.
fn startup(floor: bool) -> f64 {
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let start = Instant::now();
    let mut kin = if floor {
        Kin::spawn_floor(cwd.path())
    } else {
        Kin::spawn_subcommand(home.path(), cwd.path(), &["mcp"])
    };
    kin.send(if floor {
        common::INITIALIZE
    } else {
        MCP_INITIALIZE
    });
    let (answer, _) = kin.wait_response(1);
    let elapsed = start.elapsed();
    assert!(
        answer["result"].get("protocolVersion").is_some(),
        "unexpected initialize answer: {answer}"
    );
    kin.finish();
    ms(elapsed)
}

/// Writes one JSON-RPC line.
async fn send(pipe: &mut (impl AsyncWriteExt + Unpin), message: Value) {
    let mut line = message.to_string();
    line.push('\n');
    pipe.write_all(line.as_bytes()).await.unwrap();
    pipe.flush().await.unwrap();
}

/// Reads lines until the response to `id`.
async fn response(
    lines: &mut tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    id: u64,
) -> Value {
    loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the server hung up");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"].as_u64() == Some(id) {
            return message;
        }
    }
}

/// Round trips of foreground `kin` calls, in milliseconds.
fn foreground_calls() -> Vec<f64> {
    let mut samples = Vec::with_capacity(CALLS);
    let samples_out = &mut samples;
    instant_model::in_process(Arc::new(InstantModel), |runtime, cwd| async move {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server);
        let shutdown = CancellationToken::new();
        let options = ServeOptions {
            ceiling: PermissionMode::Ask,
            cwd,
        };
        let serving = tokio::spawn(serve_io(
            runtime,
            options,
            server_read,
            server_write,
            shutdown.clone(),
        ));
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut lines = BufReader::new(client_read).lines();
        send(
            &mut client_write,
            serde_json::from_str(MCP_INITIALIZE).unwrap(),
        )
        .await;
        response(&mut lines, 1).await;
        send(
            &mut client_write,
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        for call in 0..(CALLS + WARMUP) as u64 {
            let id = call + 2;
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "kin", "arguments": {"prompt": "say OK"}}});
            let start = Instant::now();
            send(&mut client_write, request).await;
            let answer = response(&mut lines, id).await;
            let elapsed = start.elapsed();
            assert_eq!(
                answer["result"]["structuredContent"]["answer"], "OK",
                "unexpected answer: {answer}"
            );
            if call >= WARMUP as u64 {
                samples_out.push(ms(elapsed));
            }
        }
        shutdown.cancel();
        drop(client_write);
        let _ = serving.await;
    });
    samples
}

fn main() {
    common::serve_floor_if_asked();
    common::watchdog("mcp_serve", Duration::from_secs(600));
    for round in 0..WARMUP {
        startup(round % 2 == 0);
        startup(round % 2 == 1);
    }
    let wall = Instant::now();
    let (mut floor, mut kin) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    for round in 0..RUNS {
        let floor_first = round % 2 == 0;
        let first = startup(floor_first);
        let second = startup(!floor_first);
        let (f, k) = if floor_first {
            (first, second)
        } else {
            (second, first)
        };
        floor.push(f);
        kin.push(k);
    }
    let startup_wall = wall.elapsed();
    let (floor_median, _, _) = summary(&mut floor);
    let (median, p10, p90) = summary(&mut kin);
    println!(
        "mcp_serve: startup: kin mcp initialize answered in median {median:.2} ms (p10 \
         {p10:.2}, p90 {p90:.2}) = {:.2}x the floor ({floor_median:.2} ms); target <= 1.2x",
        median / floor_median
    );
    println!(
        "mcp_serve: startup: method: spawn (fresh KIN_HOME, stderr null) -> write initialize -> \
         read its response line; {RUNS} interleaved runs of each (the order alternating) after \
         {WARMUP} warm-ups, release build, {:.1} s wall",
        startup_wall.as_secs_f64()
    );
    let mut calls = foreground_calls();
    let (median, p10, p90) = summary(&mut calls);
    println!(
        "mcp_serve: foreground kin call: tools/call -> answer median {median:.3} ms (p10 \
         {p10:.3}, p90 {p90:.3}) on the instant model (model time ~0); target < 5 ms"
    );
    println!(
        "mcp_serve: foreground kin call: method: kin mcp's server (serve_io) on in-process \
         pipes, raw JSON-RPC client; each call creates a session (store write), runs one turn \
         and waits for the task; {CALLS} sequential calls after {WARMUP} warm-ups"
    );
}

//! A small ACP agent that misbehaves on request, for kin's child-process tests and benches
//! (an example target: built by `cargo test`, never installed).
//!
//! `fake_acp_child MARKER MODE`: MARKER only tags the process (tests find it in /proc by its
//! command line); MODE is one of
//! - `ok`: answers; the prompt's answer is `depth <_meta depth> env <KIN_DELEGATION_DEPTH>`,
//!   streamed after a thought (which is not part of the answer);
//! - `slow`: waits 300 ms before reading anything, then as `ok`;
//! - `crash`: writes a line to stderr and exits with code 3 on `initialize`;
//! - `partial-crash`: answers the handshake; a prompt streams `Half an answer`, then the child
//!   writes a line holding a bearer token to stderr and exits with code 3;
//! - `hang`: never answers, ignores stdin's end and SIGTERM (only SIGKILL ends it);
//! - `garbage`: answers `initialize` with a line that is not JSON;
//! - `flood`: answers the handshake, then floods the prompt with message chunks;
//! - `wait`: answers the handshake; a prompt waits for `session/cancel`, then ends `cancelled`;
//!   a second prompt meanwhile is refused with an error, as kin refuses one;
//! - `usage`: as `wait`, but the prompt first reports a `usage_update` whose cost is 0.5 USD;
//! - `priced`: advertises `loadSession`; a prompt reports a `usage_update` whose cost is 0.5 USD
//!   and answers `priced`;
//! - `steer`: a prompt waits for a second one, answers it with `took: <its text>` and then
//!   ends both `end_turn` (a child that accepts a prompt while busy);
//! - `permission`: a prompt asks for permission and answers with the outcome it got;
//! - `fs-escape`: a prompt writes `inside.txt`, `../escaped.txt` and `link/escaped.txt` under
//!   its cwd through its client's `fs/write_text_file` and answers with what each got
//!   (`ok` or `error`), space-separated.
//! - `terminal`: a prompt runs `sh -c 'echo TERM_OK; exit 3'` in its cwd through its client's
//!   `terminal/*` (create, wait_for_exit, output, release), tries one in `/` (outside its cwd),
//!   and starts `sleep` (tagged with MARKER) that it never releases; answers
//!   `offered=<clientCapabilities.terminal> exit=<code> output=<text> outside=<ok|error>
//!   left=<ok|error>`, or `create=error:<message>` when the first create fails.
//! - `mcp`: advertises `mcpCapabilities: {http: false}`; the prompt's answer is `mcp <the names
//!   of the MCP servers its session/new got, comma-separated>`.
//! - `rich`: advertises `promptCapabilities: {image: true, embeddedContext: true}`; the
//!   prompt's answer is `blocks <each block's type, and an image's data or a resource's uri
//!   after a colon, comma-separated>`.
//! - `foreign`: a prompt sends message text under another session's id (`INJECTED`) and a
//!   permission request under it, then answers `own answer, foreign request <refused|served>`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

use std::io::{BufRead, Write};
use std::time::Duration;

use serde_json::{json, Value};

fn send(out: &mut impl Write, message: &Value) -> std::io::Result<()> {
    writeln!(out, "{message}")?;
    out.flush()
}

fn chunk(session: &str, kind: &str, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session,
        "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}}})
}

fn main() -> std::io::Result<()> {
    let mode = std::env::args().nth(2).unwrap_or_default();
    if mode == "hang" {
        // SAFETY: ignoring a signal installs no handler code.
        unsafe {
            nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGTERM,
                nix::sys::signal::SigHandler::SigIgn,
            )
        }
        .map_err(std::io::Error::other)?;
        loop {
            std::thread::sleep(Duration::from_secs(60));
        }
    }
    if mode == "slow" {
        std::thread::sleep(Duration::from_millis(300));
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut depth = Value::Null;
    let mut cwd = String::new();
    let mut mcp_names = String::new();
    let mut terminal_offered = Value::Null;
    let mut lines = stdin.lock().lines();
    while let Some(line) = lines.next() {
        let message: Value = serde_json::from_str(&line?).unwrap_or(Value::Null);
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        let reply = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        match message.get("method").and_then(Value::as_str) {
            Some("initialize") if mode == "terminal" => {
                terminal_offered = message
                    .pointer("/params/clientCapabilities/terminal")
                    .cloned()
                    .unwrap_or(Value::Null);
                send(
                    &mut out,
                    &reply(json!({"protocolVersion": 1, "agentCapabilities": {}})),
                )?
            }
            Some("initialize") => match mode.as_str() {
                "crash" => {
                    eprintln!("fake child: crashing on purpose");
                    std::process::exit(3);
                }
                "garbage" => {
                    writeln!(out, "this is not JSON-RPC")?;
                    out.flush()?;
                }
                "mcp" => send(
                    &mut out,
                    &reply(json!({"protocolVersion": 1,
                        "agentCapabilities": {"mcpCapabilities": {"http": false}}})),
                )?,
                "priced" => send(
                    &mut out,
                    &reply(json!({"protocolVersion": 1,
                        "agentCapabilities": {"loadSession": true}})),
                )?,
                "rich" => send(
                    &mut out,
                    &reply(json!({"protocolVersion": 1, "agentCapabilities":
                        {"promptCapabilities": {"image": true, "embeddedContext": true}}})),
                )?,
                _ => send(
                    &mut out,
                    &reply(json!({"protocolVersion": 1, "agentCapabilities": {}})),
                )?,
            },
            Some("session/new") => {
                cwd = message
                    .pointer("/params/cwd")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                depth = message
                    .pointer("/params/_meta/kin.delegationDepth")
                    .cloned()
                    .unwrap_or(Value::Null);
                let servers = message
                    .pointer("/params/mcpServers")
                    .and_then(Value::as_array);
                mcp_names = servers
                    .into_iter()
                    .flatten()
                    .filter_map(|s| s.get("name")?.as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
                    .join(",");
                send(&mut out, &reply(json!({"sessionId": "fake-session"})))?;
            }
            Some("session/prompt") => match mode.as_str() {
                "partial-crash" => {
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", "Half an answer"),
                    )?;
                    eprintln!("fake child: starting");
                    eprintln!("fake child: lost the model, Authorization: Bearer fake-secret-0042");
                    std::process::exit(3);
                }
                "flood" => {
                    let text = "x".repeat(64 * 1024);
                    loop {
                        send(
                            &mut out,
                            &chunk("fake-session", "agent_message_chunk", &text),
                        )?;
                    }
                }
                "wait" | "usage" => {
                    if mode == "usage" {
                        let usage = json!({"jsonrpc": "2.0", "method": "session/update",
                            "params": {"sessionId": "fake-session", "update": {
                                "sessionUpdate": "usage_update", "used": 10, "size": 1000,
                                "cost": {"amount": 0.5, "currency": "USD"}}}});
                        send(&mut out, &usage)?;
                    }
                    for line in lines.by_ref() {
                        let message: Value = serde_json::from_str(&line?).unwrap_or(Value::Null);
                        match message.get("method").and_then(Value::as_str) {
                            Some("session/cancel") => break,
                            Some("session/prompt") => send(
                                &mut out,
                                &json!({"jsonrpc": "2.0", "id": message["id"], "error":
                                    {"code": -32600, "message": "busy with another prompt"}}),
                            )?,
                            _ => {}
                        }
                    }
                    send(&mut out, &reply(json!({"stopReason": "cancelled"})))?;
                }
                "steer" => {
                    let second = lines.by_ref().find_map(|line| {
                        let message: Value = serde_json::from_str(&line.ok()?).ok()?;
                        (message.get("method").and_then(Value::as_str) == Some("session/prompt"))
                            .then_some(message)
                    });
                    let Some(second) = second else {
                        return Ok(());
                    };
                    let text = second
                        .pointer("/params/prompt/0/text")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let took = format!("took: {text}");
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", &took),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                    send(
                        &mut out,
                        &json!({"jsonrpc": "2.0", "id": second["id"], "result": {"stopReason": "end_turn"}}),
                    )?;
                }
                "priced" => {
                    let usage = json!({"jsonrpc": "2.0", "method": "session/update",
                        "params": {"sessionId": "fake-session", "update": {
                            "sessionUpdate": "usage_update", "used": 10, "size": 1000,
                            "cost": {"amount": 0.5, "currency": "USD"}}}});
                    send(&mut out, &usage)?;
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", "priced"),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
                "foreign" => {
                    send(
                        &mut out,
                        &chunk("someone-elses-session", "agent_message_chunk", "INJECTED "),
                    )?;
                    send(
                        &mut out,
                        &json!({"jsonrpc": "2.0", "id": "perm-foreign", "method": "session/request_permission",
                            "params": {"sessionId": "someone-elses-session", "toolCall": {"toolCallId": "t1"},
                                "options": [{"optionId": "yes", "name": "Yes", "kind": "allow_once"}]}}),
                    )?;
                    let answer = lines.next().transpose()?.unwrap_or_default();
                    let answer: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
                    let asked = if answer.get("error").is_some() {
                        "refused"
                    } else {
                        "served"
                    };
                    let text = format!("own answer, foreign request {asked}");
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", &text),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
                "bad-stop" => {
                    send(&mut out, &reply(json!({"stopReason": "paused"})))?;
                }
                "fs-escape" => {
                    let mut got = Vec::new();
                    for (n, name) in ["inside.txt", "../escaped.txt", "link/escaped.txt"]
                        .iter()
                        .enumerate()
                    {
                        send(
                            &mut out,
                            &json!({"jsonrpc": "2.0", "id": format!("fs-{n}"), "method": "fs/write_text_file",
                                "params": {"sessionId": "fake-session", "path": format!("{cwd}/{name}"), "content": "x"}}),
                        )?;
                        let answer = lines.next().transpose()?.unwrap_or_default();
                        let answer: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
                        got.push(if answer.get("result").is_some() {
                            "ok"
                        } else {
                            "error"
                        });
                    }
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", &got.join(" ")),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
                "permission" => {
                    send(
                        &mut out,
                        &json!({"jsonrpc": "2.0", "id": "perm-1", "method": "session/request_permission",
                            "params": {"sessionId": "fake-session", "toolCall": {"toolCallId": "t1"},
                            "options": [{"optionId": "no", "name": "No", "kind": "reject_once"},
                                        {"optionId": "yes", "name": "Yes", "kind": "allow_once"}]}}),
                    )?;
                    let answer = lines.next().transpose()?.unwrap_or_default();
                    let answer: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
                    let outcome = answer
                        .pointer("/result/outcome")
                        .cloned()
                        .unwrap_or(Value::Null);
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", &outcome.to_string()),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
                "terminal" => {
                    let marker = std::env::args().nth(1).unwrap_or_default();
                    let mut ask = |n: usize,
                                   method: &str,
                                   params: Value|
                     -> std::io::Result<Value> {
                        send(
                            &mut out,
                            &json!({"jsonrpc": "2.0", "id": format!("t-{n}"), "method": method, "params": params}),
                        )?;
                        let answer = lines.next().transpose()?.unwrap_or_default();
                        Ok(serde_json::from_str(&answer).unwrap_or(Value::Null))
                    };
                    let session = "fake-session";
                    let created = ask(
                        0,
                        "terminal/create",
                        json!({"sessionId": session, "command": "sh",
                        "args": ["-c", "echo TERM_OK; exit 3"], "cwd": cwd}),
                    )?;
                    let text = match created.pointer("/result/terminalId").cloned() {
                        None => format!(
                            "create=error:{}",
                            created["error"]["message"].as_str().unwrap_or("?")
                        ),
                        Some(id) => {
                            let exit = ask(
                                1,
                                "terminal/wait_for_exit",
                                json!({"sessionId": session, "terminalId": id}),
                            )?;
                            let output = ask(
                                2,
                                "terminal/output",
                                json!({"sessionId": session, "terminalId": id}),
                            )?;
                            ask(
                                3,
                                "terminal/release",
                                json!({"sessionId": session, "terminalId": id}),
                            )?;
                            let outside = ask(
                                4,
                                "terminal/create",
                                json!({"sessionId": session, "command": "true", "cwd": "/"}),
                            )?;
                            let left = ask(
                                5,
                                "terminal/create",
                                json!({"sessionId": session, "command": "sh",
                                "args": ["-c", "sleep 600; true", marker]}),
                            )?;
                            let verdict = |answer: &Value| {
                                if answer.get("result").is_some() {
                                    "ok"
                                } else {
                                    "error"
                                }
                            };
                            format!(
                                "offered={terminal_offered} exit={} output={} outside={} left={}",
                                exit["result"]["exitCode"],
                                output["result"]["output"].as_str().unwrap_or("?").trim(),
                                verdict(&outside),
                                verdict(&left),
                            )
                        }
                    };
                    send(&mut out, &chunk(session, "agent_message_chunk", &text))?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
                "rich" => {
                    let blocks = message.pointer("/params/prompt").and_then(Value::as_array);
                    let described: Vec<String> = blocks
                        .into_iter()
                        .flatten()
                        .map(|block| {
                            let kind = block["type"].as_str().unwrap_or("?");
                            let detail = block["data"]
                                .as_str()
                                .or_else(|| block.pointer("/resource/uri")?.as_str());
                            match detail {
                                Some(detail) => format!("{kind}:{detail}"),
                                None => kind.to_owned(),
                            }
                        })
                        .collect();
                    let text = format!("blocks {}", described.join(","));
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", &text),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
                "mcp" => {
                    let text = format!("mcp {mcp_names}");
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", &text),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
                _ => {
                    let env = std::env::var("KIN_DELEGATION_DEPTH").unwrap_or_default();
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_thought_chunk", "thinking"),
                    )?;
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", "depth "),
                    )?;
                    let rest = format!("{depth} env {env}");
                    send(
                        &mut out,
                        &chunk("fake-session", "agent_message_chunk", &rest),
                    )?;
                    send(&mut out, &reply(json!({"stopReason": "end_turn"})))?;
                }
            },
            _ => {}
        }
    }
    Ok(())
}

//! `kin demo`: plays the bundled scenario through `kin acp` (this very binary, as a child over
//! pipes, acting as its ACP client) with the replay model, and prints a readable transcript.
//! No key, no network.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

use super::{Input, RunEvent, RunOptions, Runner};

const INPUT: &str = include_str!("../../snapshots/demo/input.json");
const SCRIPT: &str = include_str!("../../snapshots/demo/session.jsonl");

struct Style {
    color: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

#[derive(PartialEq)]
enum Last {
    Nothing,
    Thought,
    Message,
}

/// Turns the protocol traffic into a transcript.
struct Transcript {
    style: Style,
    last: Last,
    out: std::io::Stdout,
}

impl Transcript {
    fn print(&mut self, text: &str) {
        let mut out = self.out.lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    fn switch(&mut self, to: Last, label: &str) {
        if self.last != to {
            let label = self.style.paint("1;36", label);
            self.print(&format!("\n{label} "));
            self.last = to;
        }
    }

    fn sent(&mut self, message: &Value) {
        match message.get("method").and_then(Value::as_str) {
            Some("session/prompt") => {
                let text = message
                    .pointer("/params/prompt/0/text")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let label = self.style.paint("1;32", "you ›");
                self.print(&format!("\n{label} {text}\n"));
                self.last = Last::Nothing;
            }
            Some("session/cancel") => self.print(&self.style.paint("33", "\n  (cancel sent)")),
            _ => {}
        }
    }

    fn received(&mut self, message: &Value) {
        if let Some(update) = message.pointer("/params/update") {
            let text = update
                .pointer("/content/text")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match update.get("sessionUpdate").and_then(Value::as_str) {
                Some("agent_thought_chunk") => {
                    self.switch(Last::Thought, "kin (thinking) ›");
                    let text = self.style.paint("2;3", text);
                    self.print(&text);
                }
                Some("agent_message_chunk") => {
                    self.switch(Last::Message, "kin ›");
                    self.print(text);
                }
                Some("tool_call") => {
                    let title = update
                        .get("title")
                        .and_then(Value::as_str)
                        .unwrap_or("tool");
                    let kind = update
                        .get("kind")
                        .and_then(Value::as_str)
                        .unwrap_or("other");
                    let line = self.style.paint("35", &format!("⚙ {title} [{kind}]"));
                    self.print(&format!("\n  {line}"));
                    self.last = Last::Nothing;
                }
                Some("tool_call_update") => {
                    let status = update
                        .get("status")
                        .and_then(Value::as_str)
                        .unwrap_or("updated");
                    let output = update
                        .pointer("/content/0/content/text")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .lines()
                        .next()
                        .unwrap_or_default();
                    let line = self.style.paint("35", &format!("  ↳ {status}: {output}"));
                    self.print(&format!("\n  {line}"));
                    self.last = Last::Nothing;
                }
                Some("session_info_update") => {
                    if let Some(title) = update.get("title").and_then(Value::as_str) {
                        let line = self
                            .style
                            .paint("2", &format!("(session titled \"{title}\")"));
                        self.print(&format!("\n  {line}"));
                        self.last = Last::Nothing;
                    }
                }
                _ => {}
            }
        } else if let Some(stop) = message
            .pointer("/result/stopReason")
            .and_then(Value::as_str)
        {
            let line = self.style.paint("2", &format!("[turn ended: {stop}]"));
            self.print(&format!("\n{line}\n"));
            self.last = Last::Nothing;
        } else if let Some(id) = message.pointer("/result/sessionId").and_then(Value::as_str) {
            let line = self.style.paint("2", &format!("[session {id} created]"));
            self.print(&format!("{line}\n"));
        } else if let Some(error) = message.pointer("/error/message").and_then(Value::as_str) {
            let line = self.style.paint("31", &format!("[error: {error}]"));
            self.print(&format!("\n{line}\n"));
        }
    }
}

pub async fn run() -> anyhow::Result<()> {
    let input: Input = serde_json::from_str(INPUT).context("the bundled demo input is invalid")?;
    let root = std::env::temp_dir().join(format!("kin-demo-{}", uuid::Uuid::new_v4()));
    let result = play(&input, &root).await;
    let _ = std::fs::remove_dir_all(&root);
    result
}

async fn play(input: &Input, root: &std::path::Path) -> anyhow::Result<()> {
    let (scenario, home, cwd) = (
        root.join("scenario"),
        root.join("home"),
        root.join("workspace"),
    );
    for dir in [&scenario, &home, &cwd] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(scenario.join("session.jsonl"), SCRIPT).context("writing the demo script")?;
    let options = RunOptions {
        binary: std::env::current_exe().context("locating the kin binary")?,
        replay_dir: Some(scenario),
        env: Vec::new(),
        home,
        cwd: PathBuf::from(&cwd),
    };
    let out = std::io::stdout();
    let color = out.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut transcript = Transcript {
        style: Style { color },
        last: Last::Nothing,
        out,
    };
    let header = transcript.style.paint("1", "kin demo");
    transcript.print(&format!(
        "{header}: kin launches `kin acp` as a child, speaks ACP to it over pipes, and replays a recorded model.\n"
    ));
    let runner = Runner::start(&options, |event| match event {
        RunEvent::Sent(message) => transcript.sent(message),
        RunEvent::Received(message) => transcript.received(message),
    })?;
    let (_stdout, stderr) = runner
        .run(input)
        .await
        .context("playing the demo scenario")?;
    if !stderr.trim().is_empty() {
        tracing::debug!(%stderr, "kin acp wrote to stderr during the demo");
    }
    Ok(())
}

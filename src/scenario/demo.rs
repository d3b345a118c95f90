//! `kin demo`: plays the bundled scenario through `kin acp` (this very binary, as a child over
//! pipes, acting as its ACP client) with the replay model, and prints a readable transcript.
//! No key, no network.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

use super::{Input, RunEvent, RunOptions, Runner};

const INPUT: &str = include_str!("../../snapshots/demo/input.json");
/// The recorded sessions: the parent, then its children.
const SCRIPTS: [(&str, &str); 4] = [
    (
        "session.jsonl",
        include_str!("../../snapshots/demo/session.jsonl"),
    ),
    (
        "session.1.jsonl",
        include_str!("../../snapshots/demo/session.1.jsonl"),
    ),
    (
        "session.2.jsonl",
        include_str!("../../snapshots/demo/session.2.jsonl"),
    ),
    (
        "session.3.jsonl",
        include_str!("../../snapshots/demo/session.3.jsonl"),
    ),
];

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

#[derive(PartialEq, Clone)]
enum Last {
    Nothing,
    Thought(String),
    Message(String),
}

/// Turns the protocol traffic into a transcript.
struct Transcript {
    style: Style,
    last: Last,
    out: std::io::Stdout,
    /// The session the user talks to; updates of other sessions are its children's.
    top: Option<String>,
    /// Child session id -> its label, for nesting.
    children: std::collections::HashMap<String, String>,
}

impl Transcript {
    fn print(&mut self, text: &str) {
        let mut out = self.out.lock();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }

    /// The margin of a session's lines: none for the top session, a bar for children.
    fn margin(&self, session: &str) -> &'static str {
        if self.top.as_deref() == Some(session) || self.top.is_none() {
            ""
        } else {
            "    │ "
        }
    }

    fn switch(&mut self, to: Last, label: &str, session: &str) {
        if self.last != to {
            let margin = self.margin(session);
            let label = self.style.paint("1;36", label);
            self.print(&format!("\n{margin}{label} "));
            self.last = to;
        }
    }

    /// Prints streamed text, keeping a child's continuation lines inside its margin.
    fn stream(&mut self, session: &str, text: &str) {
        let margin = self.margin(session);
        let text = text.replace('\n', &format!("\n{margin}"));
        self.print(&text);
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
            let session = message
                .pointer("/params/sessionId")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            self.update(&session, update);
        } else if let Some(stop) = message
            .pointer("/result/stopReason")
            .and_then(Value::as_str)
        {
            let line = self.style.paint("2", &format!("[turn ended: {stop}]"));
            self.print(&format!("\n{line}\n"));
            self.last = Last::Nothing;
        } else if let Some(id) = message.pointer("/result/sessionId").and_then(Value::as_str) {
            self.top.get_or_insert_with(|| id.to_owned());
            let line = self.style.paint("2", &format!("[session {id} created]"));
            self.print(&format!("{line}\n"));
        } else if let Some(error) = message.pointer("/error/message").and_then(Value::as_str) {
            let line = self.style.paint("31", &format!("[error: {error}]"));
            self.print(&format!("\n{line}\n"));
        }
    }

    fn update(&mut self, session: &str, update: &Value) {
        let text = update
            .pointer("/content/text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let margin = self.margin(session);
        let who = match self.children.get(session) {
            Some(label) => format!("child \u{201c}{label}\u{201d}"),
            None => "kin".to_owned(),
        };
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("agent_thought_chunk") => {
                self.switch(
                    Last::Thought(session.into()),
                    &format!("{who} (thinking) ›"),
                    session,
                );
                let text = self.style.paint("2;3", text);
                self.stream(session, &text);
            }
            Some("agent_message_chunk") => {
                self.switch(Last::Message(session.into()), &format!("{who} ›"), session);
                self.stream(session, text);
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
                self.print(&format!("\n{margin}  {line}"));
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
                self.print(&format!("\n{margin}  {line}"));
                self.last = Last::Nothing;
            }
            Some("subagent_update") => {
                let child = update
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let state = update
                    .pointer("/state/state")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if let Some(title) = update.get("title").and_then(Value::as_str) {
                    self.children.insert(child.to_owned(), title.to_owned());
                }
                let label = self.children.get(child).cloned().unwrap_or_default();
                let line = match state {
                    "running" => {
                        format!("┌ child \u{201c}{label}\u{201d} started (session {child})")
                    }
                    _ => {
                        let stop = update
                            .pointer("/state/stopReason")
                            .and_then(Value::as_str)
                            .unwrap_or("done");
                        format!("└ child \u{201c}{label}\u{201d} finished: {stop}")
                    }
                };
                let line = self.style.paint("33", &line);
                self.print(&format!("\n    {line}"));
                self.last = Last::Nothing;
            }
            Some("session_info_update") if self.margin(session).is_empty() => {
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
    for (name, text) in SCRIPTS {
        std::fs::write(scenario.join(name), text).context("writing the demo script")?;
    }
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
        top: None,
        children: Default::default(),
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

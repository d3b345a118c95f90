//! `kin demo`: plays the bundled scenario through `kin acp` (this very binary, as a child over
//! pipes, acting as its ACP client) with the replay model, and prints a readable transcript.
//! No key, no network. The session logs are kept in a temporary directory the demo names at
//! the end, so the user can open them afterwards.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use super::{Input, RunEvent, RunOptions, Runner};
use crate::session::SessionStore;

const INPUT: &str = include_str!("../../snapshots/demo/input.json");
/// The recorded sessions: the parent, then its three children.
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
    /// (child session id, its label) in the order the children started.
    children: Vec<(String, String)>,
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

    fn child_label(&self, session: &str) -> Option<&str> {
        self.children
            .iter()
            .find(|(id, _)| id == session)
            .map(|(_, label)| label.as_str())
    }

    /// (session id, who it is) for the top session and each child, in order.
    fn sessions(&self) -> Vec<(String, String)> {
        let top = self.top.iter().map(|id| (id.clone(), "kin".to_owned()));
        let children = self
            .children
            .iter()
            .map(|(id, label)| (id.clone(), format!("child \u{201c}{label}\u{201d}")));
        top.chain(children).collect()
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
        let who = match self.child_label(session) {
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
                    .unwrap_or_default();
                // The whole result (a child's full answer), later lines aligned under the first.
                let head = format!("  ↳ {status}: ");
                let indent = " ".repeat(head.chars().count());
                for (index, line) in output.trim_end().split('\n').enumerate() {
                    let text = if index == 0 {
                        format!("{head}{line}")
                    } else {
                        format!("{indent}{line}")
                    };
                    let text = self.style.paint("35", text.trim_end());
                    self.print(&format!("\n{margin}  {text}"));
                }
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
                // A child seen before is being continued (a new activation of the same child).
                let continued = self.child_label(child).is_some();
                if let Some(title) = update.get("title").and_then(Value::as_str) {
                    match self.children.iter_mut().find(|(id, _)| id == child) {
                        Some(known) => known.1 = title.to_owned(),
                        None => self.children.push((child.to_owned(), title.to_owned())),
                    }
                }
                let label = self.child_label(child).unwrap_or_default().to_owned();
                let line = match state {
                    "running" => {
                        let verb = if continued { "continued" } else { "started" };
                        format!("┌ child \u{201c}{label}\u{201d} {verb} (session {child})")
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

/// Runs the bundled demo scenario (`kin demo`) and prints what happened.
pub async fn run() -> anyhow::Result<()> {
    let input: Input = serde_json::from_str(INPUT).context("the bundled demo input is invalid")?;
    // Kept afterwards (also on failure): the user is told where the session logs are.
    let root = std::env::temp_dir().join(format!("kin-demo-{}", uuid::Uuid::new_v4()));
    // `create_dir`, not `create_dir_all`: a TMPDIR that does not exist is reported, never made.
    std::fs::create_dir(&root).with_context(|| {
        format!(
            "creating the demo's directory {} (TMPDIR must be an existing directory)",
            root.display()
        )
    })?;
    play(&input, &root)
        .await
        .with_context(|| format!("the demo's files are kept in {}", root.display()))
}

async fn play(input: &Input, root: &Path) -> anyhow::Result<()> {
    let (scenario, home, cwd) = (
        root.join("scenario"),
        root.join("home"),
        root.join("workspace"),
    );
    for dir in [&scenario, &home, &cwd] {
        std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    for (name, text) in SCRIPTS {
        std::fs::write(scenario.join(name), text).context("writing the demo script")?;
    }
    let options = RunOptions {
        binary: std::env::current_exe().context("locating the kin binary")?,
        replay_dir: Some(scenario),
        env: Vec::new(),
        home: home.clone(),
        cwd: PathBuf::from(&cwd),
    };
    let out = std::io::stdout();
    let color = out.is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let mut transcript = Transcript {
        style: Style { color },
        last: Last::Nothing,
        out,
        top: None,
        children: Vec::new(),
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
    print_logs(&mut transcript, &home, root)
}

/// Lists the session log of each session the demo showed.
fn print_logs(transcript: &mut Transcript, home: &Path, root: &Path) -> anyhow::Result<()> {
    let store = SessionStore::open(home)?;
    let logs: Vec<(String, PathBuf)> = transcript
        .sessions()
        .into_iter()
        .filter_map(|(id, who)| Some((who, store.path(&id).ok()?)))
        .filter(|(_, path)| path.is_file())
        .collect();
    let width = logs
        .iter()
        .map(|(who, _)| who.chars().count())
        .max()
        .unwrap_or_default();
    let heading = transcript.style.paint("1", "Session logs");
    let mut text = format!("\n{heading} (kept; delete {} when done):\n", root.display());
    for (who, path) in &logs {
        text.push_str(&format!("  {who:<width$}  {}\n", path.display()));
    }
    transcript.print(&text);
    Ok(())
}

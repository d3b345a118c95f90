//! ACP child agents through real processes: the fake misbehaving child
//! (`examples/fake_acp_child.rs`) for each fault, each named and leaving no process
//! (`fake_child`), and under a kin parent (`under_kin`); kin as the child of kin, the
//! delegation depth crossing the process boundary (`kin_child`); and, when they are on PATH,
//! the real peers codex-acp and claude-agent-acp answering from a local mock model (`peers`).

mod fake_child;
mod kin_child;
mod peers;
mod under_kin;

use crate::common::{self, assert_none_left, Script};

use std::path::Path;
use std::time::Duration;

use kin::acp_client::{AcpChild, ChildCommand, ChildError, PromptOutcome};
use kin::config::AcpPermission;
use kin::scenario::{RunOptions, Runner, Step};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// A string unique to this test process and `name`: it tags the processes of one test.
fn marker(name: &str) -> String {
    format!("acp-child-marker-{}-{name}", std::process::id())
}

fn command_for(mode: &str, marker: &str, cwd: &Path) -> ChildCommand {
    // Children run under the process guard, as in kin.
    kin::process::guard::enable(common::kin_binary());
    ChildCommand {
        program: common::fake_acp_child().display().to_string(),
        args: vec![marker.to_owned(), mode.to_owned()],
        env: Vec::new(),
        child_env: Default::default(),
        private: Default::default(),
        cwd: cwd.to_owned(),
        permission: AcpPermission::Reject,
        ceiling: None,
        depth: 1,
        initialize_timeout: Duration::from_secs(20),
        eof_grace: Duration::from_millis(200),
        term_grace: Duration::from_millis(200),
        link: None,
        remote_cwd: None,
        mcp_servers: Vec::new(),
        sandbox: None,
    }
}

/// One prompt with nothing steered into it.
async fn prompt(
    child: &mut AcpChild,
    text: &str,
    cancel: &CancellationToken,
) -> Result<PromptOutcome, ChildError> {
    let (_, mut no_steers) = tokio::sync::mpsc::unbounded_channel();
    child.prompt_steered(text, cancel, &mut no_steers).await
}

/// Starts the fake child in `mode` and prompts it once; returns the answer text or the error,
/// after the teardown.
async fn run(command: ChildCommand) -> Result<String, ChildError> {
    let cancel = CancellationToken::new();
    let mut child = AcpChild::start(command, &cancel).await?;
    let outcome = prompt(&mut child, "hello", &cancel).await;
    child.shutdown().await;
    outcome.map(|outcome| outcome.text)
}
/// Writes `text` as `$dir/kin/config.toml`.
fn write_config(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join("kin")).unwrap();
    std::fs::write(dir.join("kin/config.toml"), text).unwrap();
}

/// Every session log under `home`: (header, whole text).
fn session_logs(home: &Path) -> Vec<(Value, String)> {
    let mut found = Vec::new();
    let mut pending = vec![home.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&path).unwrap();
                if let Some(header) = text
                    .lines()
                    .next()
                    .and_then(|l| serde_json::from_str(l).ok())
                {
                    found.push((header, text));
                }
            }
        }
    }
    found
}

/// Runs `kin acp --replay parent` with one prompt; its config names `kin acp --replay child`
/// as the ACP agent `kin`. Returns the session logs and checks that no child kin is left.
async fn kin_parent_of_kin(parent: Script, child: Script, extra: &str) -> Vec<(Value, String)> {
    let child_dir = child.dir();
    let table = format!(
        "[acp_agents.kin]\ncommand = {:?}\nargs = [\"acp\", \"--replay\", {:?}]\n{extra}",
        common::kin_binary().display().to_string(),
        child_dir.path().display().to_string(),
    );
    kin_parent_of(parent, &table, &child_dir.path().display().to_string()).await
}

/// Runs `kin acp --replay parent` with one prompt and `config` as its config file. Returns the
/// session logs and checks that no process carrying `marker` is left.
async fn kin_parent_of(parent: Script, config_text: &str, marker: &str) -> Vec<(Value, String)> {
    let root = tempfile::tempdir().unwrap();
    let (home, cwd, config) = (
        root.path().join("home"),
        root.path().join("cwd"),
        root.path().join("config"),
    );
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let parent_dir = parent.dir();
    write_config(&config, config_text);
    let options = RunOptions {
        binary: common::kin_binary(),
        replay_dir: Some(parent_dir.path().to_owned()),
        env: vec![("XDG_CONFIG_HOME".into(), config.display().to_string())],
        home: home.clone(),
        cwd: cwd.clone(),
    };
    let mut runner = Runner::start(&options, |_| {}).unwrap();
    for step in ask_kin_steps() {
        runner.play(&step).await.unwrap();
    }
    let (stdout, _) = runner.finish().await.unwrap();
    assert!(
        stdout.iter().any(|line| line.contains("PARENT_DONE")),
        "the parent finished its turn"
    );
    assert_none_left(marker).await;
    session_logs(&home)
}

/// The log of the session at `depth` that ran a model (there is one; the parent's record of
/// an ACP child, at the same depth as the child's own session, ran none).
fn log_at_depth(logs: &[(Value, String)], depth: u32) -> &str {
    let found: Vec<&str> = logs
        .iter()
        .filter(|(header, _)| header["delegationDepth"] == depth)
        .filter(|(_, text)| text.contains(r#""type":"step/start""#))
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one session at depth {depth}");
    found[0]
}

/// The config table of the ACP agent `fake`: the fake child in `mode`, its processes tagged
/// with `marker`, after `before` (a `[delegation]` table, or nothing).
fn fake_agent(before: &str, marker: &str, mode: &str) -> String {
    format!(
        "{before}[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, {mode:?}]\n",
        common::fake_acp_child().display().to_string(),
    )
}

/// A parent whose first call (`ask`) asks the fake child "Hello.", in the background if
/// `background` says so.
fn ask_fake(background: bool) -> Script {
    let mut arguments = json!({"description": "Ask fake", "prompt": "Hello."});
    if background {
        arguments["run_in_background"] = json!(true);
    }
    Script::new().call("ask", "subagent_fake", arguments)
}

/// What a parent does with one prompt: initialize, a new session, "Ask kin.".
fn ask_kin_steps() -> [Step; 3] {
    [
        Step::Initialize {
            client_capabilities: None,
        },
        Step::NewSession { cwd: None },
        Step::Prompt {
            text: "Ask kin.".into(),
            session: None,
        },
    ]
}

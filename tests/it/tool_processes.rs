//! Tool processes through the real binary: their environment holds no model key and no
//! credential-like variable unless passed (in a session and in a delegated child), and nothing
//! they start outlives the call or a kill -9 of kin. The file tools of both leave kin's own
//! files alone.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Dirs, Script, Wire};
use kin::scenario::{RunOptions, Runner};
use serde_json::{json, Value};

/// A guard against a broken kin, not a timing assertion.
const DEADLINE: Duration = Duration::from_secs(60);

/// A number for `sleep` unique to this test process and `n`, e.g. `1000.123457`: its command
/// line marks the processes of one test.
fn marker(n: u32) -> String {
    format!("1000.{}{n}", std::process::id())
}

/// Polls until `done` holds: for process exits and execs, which have no event to wait on.
async fn poll_until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < DEADLINE, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sleeping(marker: &str) -> usize {
    common::marked(marker)
        .iter()
        .filter(|(_, line)| line.starts_with(&format!("sleep {marker}")))
        .count()
}

fn subagent_call(id: &str) -> (&str, &str, Value) {
    (
        id,
        "subagent",
        json!({"description": "Run a command", "prompt": "Run the command."}),
    )
}

/// A replay directory: `parent` for the session, `child` for the child it delegates to.
fn scenario(parent: Script, child: Option<Script>) -> tempfile::TempDir {
    let dir = parent.dir();
    if let Some(child) = child {
        let child_dir = child.dir();
        std::fs::copy(
            child_dir.path().join("session.jsonl"),
            dir.path().join("session.1.jsonl"),
        )
        .unwrap();
    }
    dir
}

/// Runs `kin acp --replay replay` in `dirs` with `env` added: a session in `allow` mode
/// (commands run without asking; children inherit it) and a prompt; kin's stdout.
async fn prompt_allowed(dirs: &Dirs, replay: &Path, env: &[(&str, &str)]) -> Vec<String> {
    let mut runner = dirs.runner(replay, env);
    common::prompt_in_mode(&mut runner, None, "allow", "Go.").await;
    runner.finish().await.unwrap().0
}

/// Every file under `dir`, as text.
fn texts_under(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
                found.push((path, text));
            }
        }
    }
    found
}

#[tokio::test]
async fn tool_commands_see_no_keys_or_credentials_in_a_session_or_a_child() {
    let dirs = Dirs::new();
    dirs.configure(
        "api_key_env = \"KIN_TEST_LLM_CREDENTIAL\"\npass_env = [\"KIN_TEST_GH_TOKEN\"]\n",
    );
    let secrets = [
        ("KIN_API_KEY", "sk-kin-model-key-0001"),
        ("DEEPSEEK_API_KEY", "sk-deepseek-0002"),
        ("OPENAI_API_KEY", "sk-openai-0003"),
        ("KIN_TEST_LLM_CREDENTIAL", "custom-credential-0004"),
        ("FOO_TOKEN", "foo-token-0005"),
        ("db_password", "db-password-0006"),
        // Named innocently, but holding the model key.
        ("KIN_TEST_COPY", "sk-kin-model-key-0001"),
    ];
    let mut env = secrets.to_vec();
    env.push(("KIN_TEST_GH_TOKEN", "passed-through-0007"));
    env.push(("KIN_PASS_ENV", ""));

    let env_call = |id| (id, "bash", json!({"command": "env"}));
    let parent = Script::new()
        .calls(&[env_call("parent-env")])
        .calls(&[subagent_call("delegate")])
        .text("done");
    let child = Script::new().calls(&[env_call("child-env")]).text("ran");
    let replay = scenario(parent, Some(child));
    let stdout = prompt_allowed(&dirs, replay.path(), &env).await;

    // What the commands printed went into the session logs, the child's too.
    let logs = texts_under(&dirs.home);
    let with_env_output: Vec<&(PathBuf, String)> = logs
        .iter()
        .filter(|(_, text)| text.contains("passed-through-0007"))
        .collect();
    assert_eq!(
        with_env_output.len(),
        2,
        "the parent's and the child's `env` both ran and show the passed variable"
    );
    for (path, text) in &logs {
        for (name, value) in &secrets {
            assert!(
                !text.contains(value) && !text.contains(&format!("{name}=")),
                "{name} reached a tool: {}",
                path.display()
            );
        }
    }
    assert!(
        stdout.iter().all(|line| !line.contains("sk-kin-model-key")),
        "the key reached the editor"
    );
}

#[tokio::test]
async fn file_tools_in_a_session_and_a_child_leave_kins_own_files_alone() {
    // kin's data directory and config file both inside the workspace.
    let cwd = tempfile::tempdir().unwrap();
    let (home, config) = (cwd.path().join("kin-home"), cwd.path().join("config"));
    std::fs::create_dir_all(config.join("kin")).unwrap();
    let config_file = config.join("kin/config.toml");
    std::fs::write(&config_file, "# OWN-FILE-MARKER\n").unwrap();
    let env = vec![("XDG_CONFIG_HOME".into(), config.display().to_string())];

    let read = json!({"path": config_file.display().to_string()});
    // The logs in kin-home hold the pattern too (in these calls' arguments).
    let grep = json!({"pattern": "OWN-FILE-MARKER"});
    let glob = json!({"pattern": "**/config.toml"});
    let parent = Script::new()
        .calls(&[
            ("p-read", "read", read.clone()),
            ("p-grep", "grep", grep.clone()),
            ("p-glob", "glob", glob.clone()),
        ])
        .calls(&[subagent_call("delegate")])
        .text("done");
    let child = Script::new()
        .calls(&[
            ("c-read", "read", read),
            ("c-grep", "grep", grep),
            ("c-glob", "glob", glob),
        ])
        .text("ran");
    let replay = scenario(parent, Some(child));
    let options = RunOptions {
        binary: common::kin_binary(),
        replay_dir: Some(replay.path().to_owned()),
        env,
        home: home.clone(),
        cwd: cwd.path().to_owned(),
    };
    let mut runner = Runner::start(&options, |_| {}).unwrap();
    common::prompt_in_mode(&mut runner, None, "allow", "Go.").await;
    runner.finish().await.unwrap();

    let logs: Vec<(PathBuf, String)> = texts_under(&home)
        .into_iter()
        .filter(|(path, _)| path.extension().is_some_and(|ext| ext == "jsonl"))
        .collect();
    let answered = |what: &str| logs.iter().filter(|(_, text)| text.contains(what)).count();
    assert_eq!(
        answered("is one of kin's own files"),
        2,
        "both reads refused"
    );
    assert_eq!(answered("No matches for"), 2, "both greps skip kin's files");
    assert_eq!(answered("No paths match"), 2, "both globs skip kin's files");
    assert_eq!(
        answered("# OWN-FILE-MARKER"),
        0,
        "the config's text reached a tool"
    );
}

#[tokio::test]
async fn nothing_a_command_starts_outlives_its_call() {
    let marker = marker(1);
    // Two escapes into sessions of their own (each reports through a FIFO once it is in its
    // session, so the command cannot end before they got away) and one in the group.
    let command = format!(
        "mkfifo a b; setsid sh -c 'echo > a; exec sleep {marker}' & \
         (setsid sh -c 'sleep {marker} & echo > b' &); read < a; read < b; \
         sleep {marker} & echo started"
    );
    let script = Script::new()
        .call("run", "bash", json!({"command": command}))
        .text("done");
    let replay = script.dir();
    let dirs = Dirs::new();
    let mut runner = dirs.runner(replay.path(), &[]);
    common::prompt_in_mode(&mut runner, None, "allow", "Go.").await;
    // The call has returned: its guard killed and reaped everything before it did.
    let left = common::marked(&marker);
    let (stdout, _) = runner.finish().await.unwrap();
    assert!(left.is_empty(), "still running after the call: {left:?}");
    assert!(
        stdout.iter().any(|line| line.contains("started")),
        "the command ran"
    );
}

#[tokio::test]
async fn the_guard_reports_the_commands_own_exit() {
    let script = Script::new()
        .calls(&[
            ("code", "bash", json!({"command": "echo out; exit 3"})),
            ("signal", "bash", json!({"command": "kill -KILL $$"})),
            (
                "missing",
                "bash",
                json!({"command": "no-such-command-kin-test"}),
            ),
        ])
        .text("done");
    let replay = script.dir();
    let stdout = prompt_allowed(&Dirs::new(), replay.path(), &[]).await;
    let result = |id: &str| -> String {
        stdout
            .iter()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter_map(|m| m.pointer("/params/update").cloned())
            .filter(|u| u["toolCallId"] == id && u.get("status").is_some())
            .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c.pointer("/content/text")?.as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(result("code"), "out\n\n[exit code 3]");
    assert_eq!(result("signal"), "\n[killed by signal SIGKILL]");
    assert!(
        result("missing").ends_with("[exit code 127]"),
        "{}",
        result("missing")
    );
}

/// Starts `kin acp` on `replay`, prompts, waits until two `sleep`s carrying `marker` run (one
/// escaped into its own session), kills kin with SIGKILL and waits until none of the command's
/// processes is left.
async fn kill_9_during_a_call(replay: &Path, marker: &str) {
    let mut wire = Wire::start(Some(replay));
    let session = wire.open_session().await;
    wire.set_mode(2, &session, "allow").await;
    wire.send_prompt(3, &session, "Run it.").await;
    poll_until("the command's sleeps to start", || sleeping(marker) == 2).await;
    wire.child.start_kill().unwrap();
    wire.child.wait().await.unwrap();
    poll_until("the command's processes to end", || {
        common::marked(marker).is_empty()
    })
    .await;
}

fn long_command(marker: &str) -> Value {
    json!({"command": format!("setsid sleep {marker} & sleep {marker}; echo never")})
}

#[tokio::test]
async fn a_kill_9_of_kin_takes_a_running_command_down() {
    let marker = marker(2);
    let script = Script::new()
        .calls(&[("run", "bash", long_command(&marker))])
        .text("done");
    kill_9_during_a_call(script.dir().path(), &marker).await;
}

#[tokio::test]
async fn a_kill_9_of_kin_takes_a_delegated_childs_command_down() {
    let marker = marker(3);
    let parent = Script::new()
        .calls(&[subagent_call("delegate")])
        .text("done");
    let child = Script::new()
        .calls(&[("run", "bash", long_command(&marker))])
        .text("ran");
    let replay = scenario(parent, Some(child));
    kill_9_during_a_call(replay.path(), &marker).await;
}

/// `id` with `args`, as a number.
fn id(args: &[&str]) -> Option<u32> {
    let out = std::process::Command::new("id").args(args).output().ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

fn is_root() -> bool {
    id(&["-u"]) == Some(0)
}

/// The uid and gid of the unprivileged test user `.ci/run` creates, when this test runs as
/// root and the user exists; otherwise prints why the part is skipped (a failure under CI).
fn other_user(what: &str) -> Option<(u32, u32)> {
    let skip = |why: &str| {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what}: {why} (required under CI)"
        );
        println!("SKIPPED {what}: {why}");
        None
    };
    if !is_root() {
        return skip("not running as root, so no second uid can be used");
    }
    match (id(&["-u", "kin-test-other"]), id(&["-g", "kin-test-other"])) {
        (Some(uid), Some(gid)) => Some((uid, gid)),
        _ => skip("the user kin-test-other is missing (`.ci/run` creates it)"),
    }
}

/// Runs `kin run --json --mode allow` on a script whose one command prints kin's own
/// environment block: the command's parent is the guard, and the guard's parent is kin. With
/// `user`, kin runs under that uid (its files copied where that user can reach them).
fn grandparent_environ(user: Option<(u32, u32)>, env: &[(&str, String)]) -> String {
    use std::os::unix::process::CommandExt;
    // The verdicts are spelled through variables, so the command's own text (in the logged
    // call) never holds them.
    let command = "r=READ; d=DENIED; gp=$(awk '{print $4}' /proc/$PPID/stat); \
        echo \"GRANDPARENT: $(tr '\\0' ' ' < /proc/$gp/cmdline)\"; \
        if tr '\\0' '\\n' < /proc/$gp/environ; then echo KIN_ENVIRON_$r; else echo KIN_ENVIRON_$d; fi; \
        if cat /proc/$PPID/environ >/dev/null; then echo GUARD_ENVIRON_$r; else echo GUARD_ENVIRON_$d; fi";
    let script = Script::new()
        .call("environ", "bash", json!({"command": command}))
        .text("done");
    let replay = script.dir();
    let root = tempfile::tempdir().unwrap();
    let (home, cwd) = (root.path().join("home"), root.path().join("cwd"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let binary = root.path().join("kin");
    std::fs::copy(common::kin_binary(), &binary).unwrap();
    let mut run = std::process::Command::new(&binary);
    run.args(["run", "--json", "--mode", "allow", "--replay"])
        .arg(replay.path())
        .arg("Go.")
        .env("KIN_HOME", &home)
        .env("XDG_CONFIG_HOME", root.path().join("config"))
        .env("KIN_API_KEY", "sk-grandparent-key-0042")
        .env("OTHER_SERVICE_TOKEN", "token-grandparent-0043")
        .envs(env.iter().map(|(name, value)| (name, value)))
        .current_dir(&cwd)
        .stdin(std::process::Stdio::null());
    if let Some((uid, gid)) = user {
        for path in [root.path(), &home, &cwd, replay.path()] {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
        }
        run.uid(uid).gid(gid);
    }
    let out = output_within(&mut run, std::time::Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `command`'s output; a kin that has not finished within `limit` hangs: killed, and the test
/// fails.
fn output_within(
    command: &mut std::process::Command,
    limit: std::time::Duration,
) -> std::process::Output {
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    match finished.recv_timeout(limit) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("kin did not finish within {limit:?}: its start hangs");
        }
    }
}

/// `KIN_ENV_HANDOFF_FD` set by someone else, naming a pipe they keep open: kin neither waits
/// on it nor keeps the key in its environment block.
#[test]
fn a_handoff_variable_set_by_someone_else_neither_hangs_nor_keeps_the_key() {
    let (read, write) = nix::unistd::pipe().unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&read).to_string();
    let seen = grandparent_environ(None, &[("KIN_ENV_HANDOFF_FD", fd)]);
    drop((read, write));
    assert!(seen.contains("GRANDPARENT: "), "{seen}");
    assert!(
        !seen.contains("sk-grandparent-key") && !seen.contains("token-grandparent"),
        "{seen}"
    );
}

#[tokio::test]
async fn a_tool_command_finds_no_key_in_kins_own_environ() {
    let as_me = grandparent_environ(None, &[]);
    assert!(
        as_me.contains("GRANDPARENT: ") && as_me.contains(" run --json"),
        "{as_me}"
    );
    assert!(
        !as_me.contains("sk-grandparent-key") && !as_me.contains("token-grandparent"),
        "{as_me}"
    );
    // As root the block is readable: it is there, without the credentials.
    if is_root() {
        assert!(
            as_me.contains("KIN_ENVIRON_READ") && as_me.contains("KIN_HOME="),
            "{as_me}"
        );
    }
    let Some(user) = other_user("kin's environ as an ordinary user") else {
        return;
    };
    let as_other = grandparent_environ(Some(user), &[]);
    assert!(as_other.contains(" run --json"), "{as_other}");
    assert!(
        !as_other.contains("sk-grandparent-key") && !as_other.contains("token-grandparent"),
        "{as_other}"
    );
    // Not root: kin and the guard are not dumpable, so the commands of their own user cannot
    // open their blocks at all.
    assert!(as_other.contains("KIN_ENVIRON_DENIED"), "{as_other}");
    assert!(as_other.contains("GUARD_ENVIRON_DENIED"), "{as_other}");
}

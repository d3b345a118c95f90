//! kin's kernel sandbox through the real binary, in `allow` mode (nothing asks): a command,
//! its grandchildren, a symlink, a hard link or a rename cannot change a file outside the
//! writable set, while work inside (a write, `git commit`) goes on; the network can be turned
//! off; the editor's terminal runs kin's launcher and is confined the same; an ACP child of a
//! read-only parent cannot write; and `required` refuses to run commands where the kernel has
//! no Landlock (simulated).
//!
//! The tests that need Landlock print `SKIPPED` where the kernel lacks it, and fail where it is
//! required: under CI (`CI` set, or `KIN_REQUIRE_SANDBOX`, which `.ci/run` sets), whose kernel
//! has it.

use crate::common;

use std::path::Path;

use common::{prompt_in_mode, Dirs, Script};
use kin::process::sandbox::{Support, NO_LANDLOCK_ENV};
use kin::scenario::Step;
use serde_json::{json, Value};

/// Whether the kernel confines; prints a visible skip when it does not (a failure where the
/// sandbox is required: under CI).
pub(crate) fn landlock(test: &str) -> bool {
    match Support::probe() {
        Support::Landlock { .. } => true,
        Support::Missing(why) => {
            let required = ["CI", "KIN_REQUIRE_SANDBOX"]
                .iter()
                .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()));
            assert!(
                !required,
                "{test}: Landlock is required under CI, but: {why}"
            );
            eprintln!("SKIPPED {test}: this kernel cannot confine ({why})");
            false
        }
    }
}

/// The run's directories, with a file `outside/keep.txt` that nothing may change.
pub(crate) fn dirs_with_keep() -> Dirs {
    let dirs = Dirs::new();
    std::fs::write(dirs.outside.join("keep.txt"), "kept\n").unwrap();
    dirs
}

/// Runs one `bash` call of `command` in `mode`; returns its result text and the client traffic.
async fn bash(
    dirs: &Dirs,
    mode: &str,
    command: &str,
    capabilities: Option<Value>,
    env: &[(&str, &str)],
) -> (String, Vec<Value>) {
    let script = Script::new()
        .call("run", "bash", json!({ "command": command }))
        .text("done");
    let replay = script.dir();
    let mut runner = dirs.runner(replay.path(), env);
    prompt_in_mode(&mut runner, capabilities, mode, "Run it.").await;
    let (stdout, stderr) = runner.finish().await.unwrap();
    if std::env::var_os("SANDBOX_TEST_DEBUG").is_some() {
        eprintln!("{}\n{stderr}", stdout.join("\n"));
    }
    let messages: Vec<Value> = stdout
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let text = messages
        .iter()
        .filter_map(|m| m.pointer("/params/update"))
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u.get("status").is_some())
        .flat_map(|u| u["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| {
            c.pointer("/content/text")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    (text, messages)
}

/// The text of every tool result in the session logs under `home`.
pub(crate) fn logged_results(home: &Path) -> Vec<String> {
    common::session_files(home)
        .iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .filter(|event| event["type"] == "tool/result")
                .filter_map(|event| {
                    let text = event.pointer("/data/message/content/0/content/0/text")?;
                    text.as_str().map(str::to_owned)
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Each attempt to change something outside, with its exit status echoed.
fn escapes(outside: &Path) -> String {
    let out = outside.display();
    [
        format!("echo direct > {out}/direct.txt; echo direct=$?"),
        format!("ln -s {out}/via-link.txt link.txt; echo linked > link.txt; echo symlink=$?"),
        format!("sh -c 'sh -c \"echo deep > {out}/grandchild.txt\"'; echo grandchild=$?"),
        format!("ln {out}/keep.txt hard.txt; echo hardlink=$?"),
        format!("echo mine > mine.txt; mv mine.txt {out}/moved.txt; echo rename=$?"),
        format!("rm -f {out}/keep.txt; echo delete=$?"),
        format!("echo changed >> {out}/keep.txt; echo append=$?"),
    ]
    .join("\n")
}

fn assert_outside_untouched(outside: &Path, result: &str) {
    let mut left: Vec<String> = std::fs::read_dir(outside)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["keep.txt"], "{result}");
    assert_eq!(
        std::fs::read_to_string(outside.join("keep.txt")).unwrap(),
        "kept\n",
        "{result}"
    );
    for attempt in [
        "direct",
        "symlink",
        "grandchild",
        "hardlink",
        "rename",
        "delete",
        "append",
    ] {
        let status = result
            .split(&format!("{attempt}="))
            .nth(1)
            .and_then(|rest| rest.lines().next());
        assert!(
            status.is_some_and(|code| code != "0"),
            "{attempt} was not refused: {result}"
        );
    }
}

#[tokio::test]
async fn allow_mode_commands_cannot_change_anything_outside_the_workspace() {
    if !landlock("allow_mode_commands_cannot_change_anything_outside_the_workspace") {
        return;
    }
    let dirs = dirs_with_keep();
    let inside = "echo in > inside.txt && git init -q && git add inside.txt && \
        git -c user.name=t -c user.email=t@t commit -qm first && echo committed";
    let command = format!("{}\n{inside}", escapes(&dirs.outside));
    let (result, _) = bash(&dirs, "allow", &command, None, &[]).await;
    assert_outside_untouched(&dirs.outside, &result);
    // The refusal names the sandbox and the path, so it is not taken for a file mode.
    assert!(
        result.contains(&format!(
            "kin's sandbox refused this: {}",
            dirs.outside.display()
        )),
        "{result}"
    );
    // Work inside goes on: the write and the commit.
    assert!(result.contains("committed"), "{result}");
    assert_eq!(
        std::fs::read_to_string(dirs.cwd.join("inside.txt")).unwrap(),
        "in\n"
    );
    let log = std::process::Command::new("git")
        .args(["log", "--format=%s"])
        .current_dir(&dirs.cwd)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&log.stdout), "first\n");
}

#[tokio::test]
async fn commands_in_the_editors_terminal_are_confined_too() {
    if !landlock("commands_in_the_editors_terminal_are_confined_too") {
        return;
    }
    let dirs = dirs_with_keep();
    let command = format!("{}\necho in > inside.txt", escapes(&dirs.outside));
    let terminal = Some(json!({"terminal": true}));
    let (_, messages) = bash(&dirs, "allow", &command, terminal, &[]).await;
    // The editor shows the terminal; the result the model got is in the log.
    let result = logged_results(&dirs.home).join("\n");
    let created: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "terminal/create")
        .collect();
    assert_eq!(created.len(), 1, "{messages:?}");
    // The editor is handed kin's launcher, which confines itself and execs the shell.
    let params = &created[0]["params"];
    assert_eq!(params["args"][0], "sandbox-exec", "{params}");
    assert_outside_untouched(&dirs.outside, &result);
    assert!(dirs.cwd.join("inside.txt").is_file(), "{result}");
}

#[tokio::test]
async fn with_the_network_off_a_loopback_connect_is_refused() {
    if !landlock("with_the_network_off_a_loopback_connect_is_refused") {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let command = format!("(exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected || echo refused");
    let dirs = dirs_with_keep();
    let (result, _) = bash(&dirs, "allow", &command, None, &[]).await;
    assert!(
        result.contains("connected"),
        "the network is on by default: {result}"
    );
    dirs.configure("[sandbox]\nnetwork = false\n");
    let (result, _) = bash(&dirs, "allow", &command, None, &[]).await;
    assert!(result.contains("refused"), "{result}");
    assert!(!result.contains("connected"), "{result}");
}

#[tokio::test]
async fn required_refuses_commands_where_the_kernel_cannot_confine() {
    let dirs = dirs_with_keep();
    dirs.configure("[sandbox]\nmode = \"required\"\n");
    let simulated = [(NO_LANDLOCK_ENV, "1")];
    let (result, _) = bash(&dirs, "allow", "touch made", None, &simulated).await;
    assert!(
        result.contains("kin's sandbox is required")
            && result.contains("cannot confine processes here")
            && result.contains("the command was not run"),
        "{result}"
    );
    assert!(!dirs.cwd.join("made").exists());
    // `auto` runs it, unconfined, and says so once.
    dirs.configure("[sandbox]\nmode = \"auto\"\n");
    let (result, messages) = bash(&dirs, "allow", "touch made", None, &simulated).await;
    assert!(result.contains("exit code 0"), "{result}");
    assert!(dirs.cwd.join("made").exists());
    let told = messages
        .iter()
        .filter(|m| m.to_string().contains("Commands run without a sandbox"))
        .count();
    assert_eq!(told, 1, "{messages:?}");
}

/// A child agent that is kin, started through `sh`, which first tries to write into the
/// workspace: the child process itself is inside the sandbox.
fn child_config(dirs: &Dirs, child_replay: &Path) -> String {
    let script = format!(
        "echo child > {}/from-child.txt; exec \"$0\" acp --replay \"$1\"",
        dirs.cwd.display()
    );
    format!(
        "[acp_agents.kin]\ncommand = \"sh\"\nargs = [\"-c\", {:?}, {:?}, {:?}]\npermission = \"allow\"\n",
        script,
        common::kin_binary().display().to_string(),
        child_replay.display().to_string(),
    )
}

async fn delegate(dirs: &Dirs, mode: &str) {
    let child = Script::new().text("CHILD_DONE");
    let child_dir = child.dir();
    dirs.configure(&child_config(dirs, child_dir.path()));
    let parent = Script::new()
        .call(
            "ask-kin",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Go."}),
        )
        .text("PARENT_DONE");
    let replay = parent.dir();
    let mut runner = dirs.runner(replay.path(), &[]);
    prompt_in_mode(&mut runner, None, mode, "Delegate.").await;
    runner.finish().await.unwrap();
}

#[tokio::test]
async fn an_acp_child_of_a_read_only_parent_cannot_write() {
    if !landlock("an_acp_child_of_a_read_only_parent_cannot_write") {
        return;
    }
    let dirs = dirs_with_keep();
    delegate(&dirs, "read-only").await;
    assert!(
        !dirs.cwd.join("from-child.txt").exists(),
        "a read-only parent's ACP child wrote into the workspace"
    );
    // The same child under an `allow` parent writes there: the test can fail.
    delegate(&dirs, "allow").await;
    assert_eq!(
        std::fs::read_to_string(dirs.cwd.join("from-child.txt")).unwrap(),
        "child\n"
    );
}

/// Starts a session whose configured MCP server is `sh` writing outside, then inside (the
/// mark that it ran), then waiting; `sandboxed`: the server opted into the sandbox.
async fn start_mcp_server(dirs: &Dirs, sandboxed: bool) {
    let script = format!(
        "echo server > {}/from-server.txt; echo ran > ran.txt; exec sleep 600",
        dirs.outside.display()
    );
    dirs.configure(&format!(
        "mcp_startup_timeout = \"200ms\"\n[mcp_servers.probe]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\nsandbox = {sandboxed}\n"
    ));
    let _ = std::fs::remove_file(dirs.cwd.join("ran.txt"));
    let replay = Script::new().text("done").dir();
    let mut runner = dirs.runner(replay.path(), &[]);
    for step in [
        Step::Initialize {
            client_capabilities: None,
        },
        Step::NewSession { cwd: None },
    ] {
        runner.play(&step).await.unwrap();
    }
    // A process start has no event to wait on: poll for the mark, within a generous bound.
    let start = std::time::Instant::now();
    while !dirs.cwd.join("ran.txt").exists() {
        assert!(start.elapsed().as_secs() < 60, "the MCP server never ran");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    runner.finish().await.unwrap();
}

#[tokio::test]
async fn an_mcp_server_that_opts_in_runs_in_the_sandbox() {
    if !landlock("an_mcp_server_that_opts_in_runs_in_the_sandbox") {
        return;
    }
    let dirs = dirs_with_keep();
    start_mcp_server(&dirs, true).await;
    assert!(!dirs.outside.join("from-server.txt").exists());
    // Not opted in: the server keeps the user's reach (many keep state of their own).
    start_mcp_server(&dirs, false).await;
    assert!(dirs.outside.join("from-server.txt").exists());
}

/// Starts `kin mcp --socket SOCKET` with `dirs.home` as its data directory (where the confined
/// commands' kin keeps its own), and waits until it says where its token is.
async fn start_listener(dirs: &Dirs, socket: &Path) -> tokio::process::Child {
    use tokio::io::AsyncBufReadExt;
    let mut command = tokio::process::Command::new(common::kin_binary());
    for name in common::MODEL_ENV {
        command.env_remove(name);
    }
    let mut child = command
        .args(["mcp", "--socket"])
        .arg(socket)
        .env("KIN_HOME", &dirs.home)
        .env("XDG_CONFIG_HOME", &dirs.config)
        .env("KIN_BASE_URL", "http://127.0.0.1:9")
        .env("KIN_API_KEY", "sk-test")
        .env("KIN_MODEL", "mock-model")
        .current_dir(&dirs.cwd)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next_line().await.unwrap().expect("kin mcp exited");
        if line.contains("the bearer token is in") {
            break;
        }
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

/// A confined command can neither read `mcp-token` nor, even holding the token, get a
/// listener on a Unix socket to start a task (in any cwd): its peer is refused with 403.
#[tokio::test]
async fn a_confined_command_can_neither_read_the_listen_token_nor_drive_the_listener() {
    if !landlock("a_confined_command_can_neither_read_the_listen_token_nor_drive_the_listener") {
        return;
    }
    let dirs = dirs_with_keep();
    let socket = dirs.outside.join("kin.sock");
    let mut listener = start_listener(&dirs, &socket).await;
    let token_file = dirs.home.join("mcp-token");
    let token = std::fs::read_to_string(&token_file).unwrap();
    let initialize = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "escape", "version": "1"}}
    });
    // The token is handed over in the command, as if it had leaked some other way.
    let command = format!(
        "cat {token_file}; echo read=$?\n\
         curl -sS -o answer.txt -w 'status=%{{http_code}}\\n' --unix-socket {socket} \
         -H 'authorization: Bearer {token}' -H 'content-type: application/json' \
         -H 'accept: application/json, text/event-stream' -d '{initialize}' http://localhost/mcp\n\
         cat answer.txt; ls {home}",
        token_file = token_file.display(),
        socket = socket.display(),
        token = token.trim(),
        home = dirs.home.display(),
    );
    let (result, _) = bash(&dirs, "allow", &command, None, &[]).await;
    assert!(
        !result.contains(token.trim()),
        "the token was read: {result}"
    );
    assert!(result.contains("Permission denied"), "{result}");
    assert!(!result.contains("read=0"), "{result}");
    assert!(result.contains("status=403"), "{result}");
    assert!(result.contains("no_new_privs"), "{result}");
    // A refused read is not taken for a refused write.
    assert!(
        !result.contains("outside what commands may write"),
        "{result}"
    );
    // The rest of kin's data directory stays readable (listed here).
    assert!(result.contains("sessions"), "{result}");
    // The same request from outside the sandbox is served.
    let outside = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--unix-socket",
        ])
        .arg(&socket)
        .args(["-H", &format!("authorization: Bearer {}", token.trim())])
        .args(["-H", "content-type: application/json"])
        .args(["-H", "accept: application/json, text/event-stream"])
        .args(["-d", &initialize.to_string(), "http://localhost/mcp"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&outside.stdout), "200");
    listener.start_kill().unwrap();
    let _ = listener.wait().await;
}

/// A write the sandbox did not refuse (a kernel file no one may write, root included) gets no
/// "kin's sandbox refused this" note; one it refused does.
#[tokio::test]
async fn the_refusal_note_is_only_for_writes_the_sandbox_refused() {
    if !landlock("the_refusal_note_is_only_for_writes_the_sandbox_refused") {
        return;
    }
    let kernel = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size";
    if !Path::new(kernel).is_file() {
        eprintln!("SKIPPED: no {kernel} here");
        return;
    }
    let dirs = dirs_with_keep();
    let (result, _) = bash(&dirs, "allow", &format!("echo 1 > {kernel}"), None, &[]).await;
    assert!(result.contains("Permission denied"), "{result}");
    assert!(!result.contains("sandbox refused this"), "{result}");
    let keep = dirs.outside.join("keep.txt");
    let command = format!("echo 1 >> {}", keep.display());
    let (result, _) = bash(&dirs, "allow", &command, None, &[]).await;
    assert!(result.contains("sandbox refused this"), "{result}");
}

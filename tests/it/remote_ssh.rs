//! A remote child over a real OpenSSH connection: an `sshd` of the test's own on 127.0.0.1 (a
//! free high port, a throwaway host key and user key in a temporary directory, its own config,
//! not a system service) and kin on the "other host" as the ACP child, reached with
//! `command = "ssh"` and a `remote_cwd`. Foreground, background and a `send_message` follow-up
//! (a second connection continuing the child's session) all answer.
//!
//! Without `sshd` this is skipped with a `SKIPPED` line on stderr; under CI (`CI` set) it is
//! required (`.ci/run` installs it).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;

use common::Script;
use kin::scenario::{RunOptions, Runner, Step};
use serde_json::json;
use tokio::io::AsyncBufReadExt;

/// `sshd`, if installed (it lives in sbin, often not on PATH).
fn sshd() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(["/usr/sbin".into(), "/usr/local/sbin".into(), "/sbin".into()])
        .map(|dir: PathBuf| dir.join("sshd"))
        .find(|path| path.is_file())
}

fn keygen(path: &Path) {
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success());
}

/// A free port on 127.0.0.1 (another process could take it before sshd does; then sshd
/// says so and the test fails loudly rather than hanging).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The test's own sshd, killed on drop.
struct Sshd {
    child: tokio::process::Child,
    port: u16,
}

impl Sshd {
    async fn start(sshd: &Path, dir: &Path) -> Self {
        keygen(&dir.join("host_key"));
        keygen(&dir.join("user_key"));
        std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).unwrap();
        // Privilege separation needs this directory when sshd runs as root.
        if rustix::process::geteuid().is_root() {
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\nPidFile {dir}/sshd.pid\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nStrictModes no\nPermitRootLogin yes\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("sshd_config"), config).unwrap();
        let mut child = tokio::process::Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("sshd starts");
        // Wait for the line that says it listens (no sleeps).
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let deadline = std::time::Duration::from_secs(30);
        let listening = tokio::time::timeout(deadline, async {
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("Server listening") {
                    return Ok(());
                }
                if line.contains("fatal") || line.contains("error") {
                    return Err(line);
                }
            }
            Err("sshd exited".to_owned())
        })
        .await
        .expect("sshd listens within 30 s");
        listening.unwrap_or_else(|line| panic!("sshd did not start: {line}"));
        // Keep draining its log so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self { child, port }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

fn user() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn kin_on_the_other_side_of_ssh_answers_foreground_background_and_a_follow_up() {
    let Some(sshd) = sshd() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "sshd is required under CI (.ci/run installs openssh-server)"
        );
        eprintln!("SKIPPED kin_on_the_other_side_of_ssh: sshd is not installed");
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let keys = root.path().join("ssh");
    std::fs::create_dir_all(&keys).unwrap();
    let server = Sshd::start(&sshd, &keys).await;
    // The "other host": its own home and working directory, which kin checks nowhere locally.
    let remote_home = root.path().join("remote-home");
    let remote_cwd = root.path().join("remote-work");
    std::fs::create_dir_all(&remote_home).unwrap();
    std::fs::create_dir_all(&remote_cwd).unwrap();
    let child = Script::new().text("REMOTE_ANSWER").dir();
    let remote_command = format!(
        "env KIN_HOME={} XDG_CONFIG_HOME={}/config {} acp --replay {}",
        remote_home.display(),
        remote_home.display(),
        common::kin_binary().display(),
        child.path().display(),
    );
    let args = vec![
        "-T".to_owned(),
        "-F".into(),
        "/dev/null".into(),
        "-p".into(),
        server.port.to_string(),
        "-i".into(),
        keys.join("user_key").display().to_string(),
        "-o".into(),
        "IdentitiesOnly=yes".into(),
        "-o".into(),
        "BatchMode=yes".into(),
        "-o".into(),
        "StrictHostKeyChecking=no".into(),
        "-o".into(),
        format!("UserKnownHostsFile={}", keys.join("known_hosts").display()),
        format!("{}@127.0.0.1", user()),
        remote_command,
    ];
    let config = root.path().join("config");
    std::fs::create_dir_all(config.join("kin")).unwrap();
    std::fs::write(
        config.join("kin/config.toml"),
        format!(
            "[acp_agents.remote]\ncommand = \"ssh\"\nargs = {args:?}\nremote_cwd = {:?}\n",
            remote_cwd.display().to_string()
        ),
    )
    .unwrap();
    let parent = Script::new()
        .call(
            "fg",
            "subagent_remote",
            json!({"description": "Remote fg", "prompt": "Say it."}),
        )
        .call(
            "bg",
            "subagent_remote",
            json!({"description": "Remote bg", "prompt": "Say it.", "run_in_background": true}),
        )
        .result("bg", "started subagent {{id:1}} as task subagent-1")
        .wait_for("first", "subagent-1")
        .call(
            "again",
            "send_message",
            json!({"subagent_id": "{{id:1}}", "message": "Say it again."}),
        )
        .wait_for("second", "subagent-2")
        .text("PARENT_DONE");
    let parent_dir = parent.dir();
    let (home, cwd) = (root.path().join("home"), root.path().join("cwd"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    let options = RunOptions {
        binary: common::kin_binary(),
        replay_dir: Some(parent_dir.path().to_owned()),
        env: vec![("XDG_CONFIG_HOME".into(), config.display().to_string())],
        home: home.clone(),
        cwd,
    };
    let mut runner = Runner::start(&options, |_| {}).unwrap();
    for step in [
        Step::Initialize {
            client_capabilities: Some(json!({"subagents": {}})),
        },
        Step::NewSession { cwd: None },
        Step::Prompt {
            text: "Ask the remote kin.".into(),
            session: None,
        },
    ] {
        runner.play(&step).await.unwrap();
    }
    let (stdout, stderr) = runner.finish().await.unwrap();
    assert!(
        stdout.iter().any(|line| line.contains("PARENT_DONE")),
        "the parent finished: {stderr}"
    );
    let parent_log = std::fs::read_dir(home.join("sessions"))
        .unwrap()
        .filter_map(|entry| std::fs::read_to_string(entry.unwrap().path()).ok())
        .find(|text| {
            text.lines()
                .next()
                .is_some_and(|h| h.contains(r#""delegationDepth":0"#))
        })
        .expect("the parent's log");
    let results: Vec<&str> = parent_log
        .lines()
        .filter(|line| line.contains(r#""type":"tool/result""#))
        .collect();
    let answered = |call: &str| {
        results.iter().any(|line| {
            line.contains(&format!(r#""callId":"{call}""#)) && line.contains("REMOTE_ANSWER")
        })
    };
    for call in ["fg", "first", "second"] {
        assert!(answered(call), "{call} answered: {parent_log}");
    }
    assert!(
        parent_log.contains("message started task subagent-2 continuing subagent"),
        "{parent_log}"
    );
    // The remote kin ran in the remote cwd and kept its session on its own side.
    let remote_sessions: Vec<String> = common::session_files(&remote_home)
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .filter(|text| text.starts_with(r#"{"type":"session""#))
        .collect();
    assert_eq!(
        remote_sessions.len(),
        2,
        "one foreground, one background session"
    );
    let cwd_field = format!(r#""cwd":"{}""#, remote_cwd.display());
    assert!(remote_sessions.iter().all(|text| text.contains(&cwd_field)));
}

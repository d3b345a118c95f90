//! `remote_ssh`: what a remote ACP child costs beyond the ssh connection itself. A throwaway
//! `sshd` of the bench's own on 127.0.0.1 (a free high port, fresh host and user keys in a
//! temporary directory; the same setup as `tests/it/remote_ssh.rs`), and the release `kin acp
//! --replay` as the parent, whose recorded model delegates once a turn, alternating between
//! - `subagent_remote`: `ssh ... kin acp --replay <child>` (kin on the "other host"), and
//! - `subagent_local`: the same kin child launched directly;
//!
//! and, in the same rounds, `ssh ... true` alone (connection, key exchange, auth, a remote
//! command and teardown). Reported: medians of each, and the overhead: remote - local - ssh.
//! Without `sshd` it prints a `SKIPPED` line and exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use serde_json::{json, Value};

const WARMUP: usize = 2;
const RUNS: usize = 15;

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
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success(), "ssh-keygen failed");
}

/// Starts the bench's sshd in `dir` and waits for its "Server listening" line.
fn start_sshd(sshd: &Path, dir: &Path) -> (std::process::Child, u16) {
    keygen(&dir.join("host_key"));
    keygen(&dir.join("user_key"));
    std::fs::copy(dir.join("user_key.pub"), dir.join("authorized_keys")).expect("keys");
    if rustix::process::geteuid().is_root() {
        std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {dir}/host_key\nAuthorizedKeysFile {dir}/authorized_keys\nPidFile {dir}/sshd.pid\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nStrictModes no\nPermitRootLogin yes\n",
        dir = dir.display()
    );
    std::fs::write(dir.join("sshd_config"), config).expect("sshd_config");
    let mut child = Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(dir.join("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sshd starts");
    let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    for line in lines.by_ref() {
        let line = line.expect("sshd's log");
        if line.contains("Server listening") {
            break;
        }
        assert!(!line.contains("fatal"), "sshd did not start: {line}");
    }
    // Keep draining its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, port)
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `kin acp --replay` scripts: one answer (the child), or `turns` turns each delegating once to
/// `subagent_remote` (odd turns) or `subagent_local` (even turns), then answering (the parent).
fn script(dir: &Path, turns: Option<usize>) {
    let mut lines = vec![
        json!({"type":"session","version":0,"id":"00000000-0000-4000-8000-000000000000","createdAt":0,"cwd":"/","delegationDepth":0}),
    ];
    let text = |answer: &str| {
        vec![
            json!({"type":"block-start","index":0,"blockType":"text"}),
            json!({"type":"text-delta","index":0,"text":answer}),
            json!({"type":"block-end","index":0,"block":{"type":"text","text":answer}}),
            json!({"type":"finish","reason":{"kind":"stop"}}),
        ]
    };
    let mut push = |turn: usize, step: usize, chunks: Vec<Value>| {
        for chunk in chunks {
            let seq = lines.len() - 1;
            lines.push(json!({"type":"assistant/chunk","seq":seq,"time":0,"data":{"turn":turn,"step":step,"chunk":chunk}}));
        }
    };
    match turns {
        None => push(1, 1, text("CHILD_ANSWER")),
        Some(turns) => {
            for turn in 1..=turns {
                let tool = match turn % 2 {
                    1 => "subagent_remote",
                    _ => "subagent_local",
                };
                let args = json!({"description": "bench", "prompt": "Answer."}).to_string();
                let id = format!("c{turn}");
                push(
                    turn,
                    1,
                    vec![
                        json!({"type":"block-start","index":0,"blockType":"tool-call"}),
                        json!({"type":"tool-call-delta","index":0,"id":id,"name":tool,"argumentsDelta":args}),
                        json!({"type":"block-end","index":0,"block":{"type":"tool-call","id":id,"name":tool,"arguments":args}}),
                        json!({"type":"finish","reason":{"kind":"tool-calls"}}),
                    ],
                );
                push(turn, 2, text("done"));
            }
        }
    }
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("session.jsonl"), text).expect("writing a script");
}

fn main() {
    common::watchdog("remote_ssh", Duration::from_secs(900));
    let Some(sshd) = sshd() else {
        println!("SKIPPED remote_ssh: sshd is not installed");
        return;
    };
    let (keys, home, cwd, config) = (
        temp_dir("kin-bench-ssh-"),
        temp_dir("kin-bench-home-"),
        temp_dir("kin-bench-cwd-"),
        temp_dir("kin-bench-config-"),
    );
    let (remote_home, child_script, parent_script) = (
        temp_dir("kin-bench-remote-home-"),
        temp_dir("kin-bench-child-"),
        temp_dir("kin-bench-parent-"),
    );
    let (mut server, port) = start_sshd(&sshd, keys.path());
    let kin = PathBuf::from(common::kin_binary());
    let rounds = WARMUP + RUNS;
    script(child_script.path(), None);
    script(parent_script.path(), Some(2 * rounds));
    let ssh_args: Vec<String> = [
        "-T",
        "-F",
        "/dev/null",
        "-p",
        &port.to_string(),
        "-i",
        &keys.path().join("user_key").display().to_string(),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        &format!(
            "UserKnownHostsFile={}",
            keys.path().join("known_hosts").display()
        ),
        &format!("{}@127.0.0.1", user()),
    ]
    .iter()
    .map(|arg| arg.to_string())
    .collect();
    let remote_env = format!(
        "KIN_HOME={home} XDG_CONFIG_HOME={home}/config",
        home = remote_home.path().display()
    );
    let child_command = format!(
        "env {remote_env} {} acp --replay {}",
        kin.display(),
        child_script.path().display()
    );
    let mut remote_args = ssh_args.clone();
    remote_args.push(child_command);
    let local_args = [
        "acp".to_owned(),
        "--replay".to_owned(),
        child_script.path().display().to_string(),
    ];
    std::fs::create_dir_all(config.path().join("kin")).expect("config dir");
    std::fs::write(
        config.path().join("kin/config.toml"),
        format!(
            "[acp_agents.remote]\ncommand = \"ssh\"\nargs = {remote_args:?}\nremote_cwd = {:?}\n\n\
             [acp_agents.local]\ncommand = {:?}\nargs = {local_args:?}\nenv = {{ KIN_HOME = {:?} }}\n",
            cwd.path().display().to_string(),
            kin.display().to_string(),
            remote_home.path().display().to_string(),
        ),
    )
    .expect("writing the config");
    let config_dir = config.path().display().to_string();
    let mut parent = Kin::spawn_with(
        home.path(),
        cwd.path(),
        &["--replay".as_ref(), parent_script.path().as_os_str()],
        &[("XDG_CONFIG_HOME", &config_dir)],
    );
    parent.initialize();
    let session = parent.new_session(2, cwd.path());
    let (mut remote, mut local, mut handshake) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let started = Instant::now();
        let status = Command::new("ssh")
            .args(&ssh_args)
            .arg("true")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("ssh runs");
        assert!(status.success(), "ssh to the bench's sshd failed");
        let ssh_alone = ms(started.elapsed());
        let mut prompt = |id: u64| {
            let started = Instant::now();
            let (answer, _) = parent.call(
                id,
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}),
            );
            assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
            ms(started.elapsed())
        };
        let remote_turn = prompt(10 + 2 * round as u64);
        let local_turn = prompt(11 + 2 * round as u64);
        if round >= WARMUP {
            handshake.push(ssh_alone);
            remote.push(remote_turn);
            local.push(local_turn);
        }
    }
    parent.finish();
    let _ = server.kill();
    let _ = server.wait();
    let (ssh_median, ssh_p10, ssh_p90) = summary(&mut handshake);
    let (remote_median, remote_p10, remote_p90) = summary(&mut remote);
    let (local_median, local_p10, local_p90) = summary(&mut local);
    println!("remote_ssh ssh alone (ms): median {ssh_median:.1} p10 {ssh_p10:.1} p90 {ssh_p90:.1} ({RUNS} runs)");
    println!("remote_ssh prompt, remote kin child (ms): median {remote_median:.1} p10 {remote_p10:.1} p90 {remote_p90:.1}");
    println!("remote_ssh prompt, local kin child (ms): median {local_median:.1} p10 {local_p10:.1} p90 {local_p90:.1}");
    let overhead = remote_median - local_median - ssh_median;
    println!("remote_ssh overhead beyond the ssh handshake (ms, medians: remote - local - ssh): {overhead:.1} (target < 20)");
}

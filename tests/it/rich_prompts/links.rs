//! Files linked in a prompt outside the roots or swapped under kin: attached only when the
//! user allows, never /proc/self/environ or kin's own config, a FIFO never blocks, a symlink
//! swapped in is not followed, a command file symlinked out is not a command.

use serde_json::{json, Value};

use super::{live, log_text, user_content, Checked};
use crate::common;
use crate::common::mock_openai::{text_reply, MockServer};

#[tokio::test]
async fn a_linked_file_outside_the_roots_is_attached_once_the_user_allows_it() {
    let server = MockServer::start();
    server.push(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let outside_dir = tempfile::tempdir().unwrap();
    let outside = outside_dir.path().join("elsewhere.md");
    std::fs::write(&outside, "text from elsewhere").unwrap();
    let uri = format!("file://{}", outside.display());
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "Read this"},
        {"type": "resource_link", "uri": uri, "name": "elsewhere.md"},
    ]});
    let (_, asked, answer) = wire
        .prompt_answering(&mut kin, 3, prompt, "allow_once")
        .await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(asked.len(), 1, "{asked:?}");
    let text = user_content(&server, 0);
    let text = text.as_str().unwrap();
    assert!(
        text.contains(&format!(
            "<attached-file uri=\"{uri}\">\ntext from elsewhere\n</attached-file>"
        )),
        "{text}"
    );
    let log = log_text(&kin, &session);
    assert!(log.contains("permission/decision"), "the answer is logged");
}

/// The notices among `updates`, as text.
fn notices(updates: &[Value]) -> Vec<String> {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "notice")
        .map(|u| u["params"]["update"].to_string())
        .collect()
}

fn link(path: &std::path::Path, name: &str) -> Value {
    json!({"type": "resource_link", "uri": format!("file://{}", path.display()), "name": name})
}

#[tokio::test]
async fn a_link_to_proc_self_environ_is_refused_even_in_allow_mode() {
    let server = MockServer::start();
    server.push(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let mode = json!({"sessionId": session, "modeId": "allow"});
    wire.request(&mut kin, 3, "session/set_mode", mode).await;
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "Look"},
        link(std::path::Path::new("/proc/self/environ"), "environ"),
    ]});
    let (updates, answer) = wire.request(&mut kin, 4, "session/prompt", prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notices = notices(&updates);
    assert!(
        notices
            .iter()
            .any(|n| n.contains("/proc/self/environ") && n.contains("not attached")),
        "{notices:?}"
    );
    let sent = user_content(&server, 0).to_string();
    assert!(
        !sent.contains("KIN_HOME=") && !sent.contains("sk-rich"),
        "{sent}"
    );
    assert!(!log_text(&kin, &session).contains("KIN_HOME="));
}

#[tokio::test]
async fn kins_own_config_file_is_refused_to_read_and_attach_inside_a_root() {
    let server = MockServer::start();
    let mut kin = live(&server, Some("# KIN-CONFIG-SECRET\n"));
    let config_dir = kin.home.path().join("config/kin");
    let config = config_dir.join("config.toml");
    let args = json!({"path": config.display().to_string()}).to_string();
    // `read` names the file; `grep` searches the root that holds it (its pattern does not
    // spell the secret, so only a match could bring it into a request).
    let grep = json!({"pattern": "CONFIG-S[E]CRET", "path": config_dir.display().to_string()});
    server.push(common::mock_openai::tool_calls_reply(&[
        ("r1", "read", &args),
        ("g1", "grep", &grep.to_string()),
    ]));
    server.push(text_reply(&["ok"]));
    let mut wire = Checked::new();
    let init = json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}}}});
    wire.request(&mut kin, 0, "initialize", init).await;
    // The config directory is one of the session's roots.
    let new = json!({"cwd": kin.cwd(), "mcpServers": [],
        "additionalDirectories": [config_dir.display().to_string()]});
    let (_, answer) = wire.request(&mut kin, 1, "session/new", new).await;
    let session = answer["result"]["sessionId"].as_str().unwrap().to_owned();
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "Read the config"},
        link(&config, "config.toml"),
    ]});
    let (updates, answer) = wire.request(&mut kin, 2, "session/prompt", prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let notices = notices(&updates);
    assert!(
        notices.iter().any(|n| n.contains("kin's own files")),
        "{notices:?}"
    );
    let requests = server.requests();
    let everything: String = requests.iter().map(|r| r.body.to_string()).collect();
    assert!(!everything.contains("KIN-CONFIG-SECRET"), "{everything}");
    assert!(
        requests[1].body.to_string().contains("kin's own files"),
        "the read tool refuses it too"
    );
}

#[tokio::test]
async fn a_fifo_linked_in_a_prompt_never_blocks_kin_and_cancel_still_works() {
    let server = MockServer::start();
    server.set_default(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let fifo = kin.cwd.path().join("pipe");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let links = || {
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "Read these"},
            link(&fifo, "a"), link(&fifo, "b"), link(&fifo, "c"),
        ]})
    };
    let (updates, answer) = wire.request(&mut kin, 3, "session/prompt", links()).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        notices(&updates)
            .iter()
            .any(|n| n.contains("not a regular file")),
        "{updates:?}"
    );
    // Cancelled right away, the prompt still settles and kin goes on serving.
    kin.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": links()}))
        .await;
    kin.send(&json!({"jsonrpc": "2.0", "method": "session/cancel",
        "params": {"sessionId": session}}))
        .await;
    let (_, answer) = kin.answer(&json!(4)).await;
    let stop = &answer["result"]["stopReason"];
    assert!(stop == "cancelled" || stop == "end_turn", "{answer}");
    let (_, listed) = kin
        .request(5, "session/list", json!({"cwd": kin.cwd()}))
        .await;
    assert!(listed["result"]["sessions"].is_array(), "{listed}");
}

#[tokio::test]
async fn a_link_swapped_for_a_symlink_never_attaches_the_outside_file() {
    const TRIES: usize = 100;
    let server = MockServer::start();
    server.set_default(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "OUTSIDE-SECRET").unwrap();
    let cwd = kin.cwd.path().canonicalize().unwrap();
    let target = cwd.join("notes.txt");
    std::fs::write(&target, "inside text").unwrap();
    let mut wire = Checked::new();
    let (session, _) = wire.open(&mut kin).await;
    let mode = json!({"sessionId": session, "modeId": "read-only"});
    wire.request(&mut kin, 3, "session/set_mode", mode).await;
    // Swaps `notes.txt` with a symlink leading out, atomically and as fast as the kernel
    // allows (one `renameat2(RENAME_EXCHANGE)` a swap), until the prompts are done.
    let other = cwd.join(".other");
    std::os::unix::fs::symlink(&secret, &other).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (stop, other, target) = (stop.clone(), other.clone(), target.clone());
        std::thread::spawn(move || {
            use nix::fcntl::{renameat2, RenameFlags};
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                renameat2(
                    nix::fcntl::AT_FDCWD,
                    &target,
                    nix::fcntl::AT_FDCWD,
                    &other,
                    RenameFlags::RENAME_EXCHANGE,
                )
                .unwrap();
            }
        })
    };
    for n in 0..TRIES {
        let prompt = json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "Read it"}, link(&target, "notes.txt"),
        ]});
        let id = 10 + n as i64;
        let (_, _, answer) = wire
            .prompt_answering(&mut kin, id, prompt, "reject_once")
            .await;
        assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), TRIES);
    let attached = requests
        .iter()
        .filter(|r| r.body.to_string().contains("OUTSIDE-SECRET"))
        .count();
    let inside = requests
        .iter()
        .filter(|r| r.body.to_string().contains("inside text"))
        .count();
    assert_eq!(
        attached, 0,
        "{attached} of {TRIES} prompts attached the outside file"
    );
    assert!(
        inside > 0,
        "the swap was raced: some prompts attached the inside file"
    );
}

#[tokio::test]
async fn a_command_file_symlinked_out_of_the_workspace_is_not_a_command() {
    let server = MockServer::start();
    server.push(text_reply(&["ok"]));
    let mut kin = live(&server, None);
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.md");
    std::fs::write(&secret, "OUTSIDE-COMMAND-SECRET first line\nmore").unwrap();
    let commands = kin.cwd.path().join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::os::unix::fs::symlink(&secret, commands.join("review.md")).unwrap();
    std::fs::write(commands.join("fine.md"), "A fine command").unwrap();
    let mut wire = Checked::new();
    let (session, opened) = wire.open(&mut kin).await;
    let announced = opened
        .iter()
        .find(|u| u["params"]["update"]["sessionUpdate"] == "available_commands_update")
        .expect("the commands are announced");
    let text = announced.to_string();
    assert!(text.contains("\"fine\""), "{text}");
    assert!(
        !text.contains("review") && !text.contains("OUTSIDE-COMMAND-SECRET"),
        "{text}"
    );
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "/review"}]});
    wire.request(&mut kin, 3, "session/prompt", prompt).await;
    assert_eq!(user_content(&server, 0), "/review");
}

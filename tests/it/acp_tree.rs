//! The whole tree in the editor: kin delegating to kin over ACP, the child delegating to an
//! in-process grandchild and running `bash` (which asks for permission). A client that opted
//! into subagents sees the child and the grandchild announced before their traffic, every
//! update under their ids, the child's permission request attributed to it; one that did not
//! sees no child text, only a summary on the delegating tool call. Every message kin writes is
//! valid against the ACP schema.

use crate::common;

use std::collections::HashMap;

use common::{AcpSchema, Script, Wire};
use kin::scenario::{PermissionAnswerEntry, RunOptions, Runner, Step};
use serde_json::{json, Value};

/// The child's script: a grandchild, then `bash`, then its answer. The grandchild's own
/// script is the replay's second session.
fn child_dir() -> tempfile::TempDir {
    let child = Script::new()
        .call(
            "deeper",
            "subagent",
            json!({"description": "Go deeper", "prompt": "Say GRANDCHILD_SAYS."}),
        )
        .call("sh", "bash", json!({"command": "echo CHILD_RAN_BASH"}))
        .text("ANSWER_FROM_THE_CHILD");
    let dir = child.dir();
    let grandchild = Script::new().text("GRANDCHILD_SAYS").dir();
    std::fs::copy(
        grandchild.path().join("session.jsonl"),
        dir.path().join("session.1.jsonl"),
    )
    .unwrap();
    dir
}

/// Runs the parent with one prompt under `capabilities`, the editor answering permission
/// prompts with `answers`; returns kin's stdout, one JSON message a line.
async fn run_tree(capabilities: Value, answers: &[&str], then: Vec<Step>) -> Vec<Value> {
    let parent = Script::new()
        .call(
            "ask-kin",
            "subagent_kin",
            json!({"description": "Ask kin", "prompt": "Say CHILD_OK."}),
        )
        .text("PARENT_DONE");
    let parent_dir = parent.dir();
    let child = child_dir();
    let root = tempfile::tempdir().unwrap();
    let (home, cwd, config) = (
        root.path().join("home"),
        root.path().join("cwd"),
        root.path().join("config"),
    );
    for dir in [&home, &cwd, &config.join("kin")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(
        config.join("kin/config.toml"),
        format!(
            "[acp_agents.kin]\ncommand = {:?}\nargs = [\"acp\", \"--replay\", {:?}]\nenv = {{ KIN_SUBAGENT_MAX_DEPTH = \"2\" }}\n",
            common::kin_binary().display().to_string(),
            child.path().display().to_string(),
        ),
    )
    .unwrap();
    let options = RunOptions {
        binary: common::kin_binary(),
        replay_dir: Some(parent_dir.path().to_owned()),
        env: vec![("XDG_CONFIG_HOME".into(), config.display().to_string())],
        home,
        cwd,
    };
    let mut runner = Runner::start(&options, |_| {}).unwrap();
    let answers: Vec<PermissionAnswerEntry> = answers
        .iter()
        .map(|kind| serde_json::from_value(json!({"kind": kind})).unwrap())
        .collect();
    runner.script_permissions(Some(&answers));
    for step in [
        Step::Initialize {
            client_capabilities: Some(capabilities),
        },
        Step::NewSession { cwd: None },
        Step::Prompt {
            text: "Ask kin.".into(),
            session: None,
        },
    ]
    .into_iter()
    .chain(then)
    {
        runner.play(&step).await.unwrap();
    }
    let (stdout, stderr) = runner.finish().await.unwrap();
    let messages: Vec<Value> = stdout
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let mut schema = AcpSchema::load();
    for message in &messages {
        if message.get("method").is_some() {
            schema
                .check_agent_message(message, &HashMap::new())
                .unwrap_or_else(|error| panic!("{error}: {message}"));
        }
    }
    assert!(
        stdout.iter().any(|line| line.contains("PARENT_DONE")),
        "the parent finished its turn: {stderr}"
    );
    messages
}

fn update_of(message: &Value) -> Option<(&str, &Value)> {
    (message["method"] == "session/update").then(|| {
        (
            message["params"]["sessionId"].as_str().unwrap_or(""),
            &message["params"]["update"],
        )
    })
}

/// The session a `subagent_update` on `parent` announced first.
fn announced_on(messages: &[Value], parent: &str) -> Option<(usize, String)> {
    messages.iter().enumerate().find_map(|(at, message)| {
        let (session, update) = update_of(message)?;
        (session == parent && update["sessionUpdate"] == "subagent_update")
            .then(|| (at, update["sessionId"].as_str().unwrap_or("").to_owned()))
    })
}

/// Where the first message carrying `session` (as the update's or the request's session) is.
fn first_traffic(messages: &[Value], session: &str) -> Option<usize> {
    messages
        .iter()
        .position(|message| message["params"]["sessionId"] == session)
}

fn texts_in(messages: &[Value], session: &str) -> String {
    messages
        .iter()
        .filter_map(update_of)
        .filter(|(id, _)| *id == session)
        .filter_map(|(_, update)| update["content"]["text"].as_str())
        .collect()
}

fn parent_session(messages: &[Value]) -> String {
    messages
        .iter()
        .find_map(|message| message["result"]["sessionId"].as_str())
        .unwrap()
        .to_owned()
}

/// kin on a parent script whose first step calls the fake ACP child (marked `marker`, told to
/// wait) with `call`, then answers PARENT_DONE; initialized as an editor that takes subagents,
/// with a new session. (kin, that session, the script's directory.)
async fn on_fake_child(call: Value, marker: &str) -> (Wire, String, tempfile::TempDir) {
    let script = Script::new()
        .call("ask-fake", "subagent_fake", call)
        .text("PARENT_DONE")
        .dir();
    let home = common::home_with(&format!(
        "[acp_agents.fake]\ncommand = {:?}\nargs = [{marker:?}, \"wait\"]\n",
        common::fake_acp_child().display().to_string()
    ));
    let mut kin = Wire::start_in(Some(script.path()), home);
    kin.initialize_with(json!({"subagents": {}})).await;
    let parent = kin.new_session().await;
    (kin, parent, script)
}

/// The child announced on `parent`: in `before`, else in what kin writes next.
async fn announced_child(kin: &mut Wire, before: &[Value], parent: &str) -> String {
    if let Some((_, child)) = announced_on(before, parent) {
        return child;
    }
    loop {
        let message = kin.read().await.expect("kin announces the child");
        if let Some((_, child)) = announced_on(std::slice::from_ref(&message), parent) {
            return child;
        }
    }
}

#[tokio::test]
async fn a_client_with_subagents_sees_the_kin_child_and_its_grandchild_as_sessions() {
    for answer in ["allow_once", "reject_once"] {
        let messages = run_tree(json!({"subagents": {}}), &[answer], Vec::new()).await;
        let parent = parent_session(&messages);
        let (announced, child) = announced_on(&messages, &parent).expect("the child is announced");
        assert!(first_traffic(&messages, &child) > Some(announced));
        let announcement = update_of(&messages[announced]).unwrap().1;
        assert_eq!(announcement["title"], "Ask kin");
        assert_eq!(announcement["capabilities"], json!({"cancel": {}}));
        let (re_announced, grandchild) =
            announced_on(&messages, &child).expect("the grandchild is re-announced under it");
        assert!(first_traffic(&messages, &grandchild) > Some(re_announced));
        assert!(texts_in(&messages, &grandchild).contains("GRANDCHILD_SAYS"));
        let child_text = texts_in(&messages, &child);
        assert!(child_text.contains("ANSWER_FROM_THE_CHILD"), "{child_text}");
        let prompted = messages.iter().filter_map(update_of).any(|(id, u)| {
            id == child
                && u["sessionUpdate"] == "session_message"
                && u["senderSessionId"] == parent.as_str()
                && u["content"][0]["text"] == "Say CHILD_OK."
        });
        assert!(
            prompted,
            "the parent's prompt is a session_message in the child"
        );
        assert!(!texts_in(&messages, &parent).contains("ANSWER_FROM_THE_CHILD"));
        // The child's permission request was the editor's to answer, attributed to the child.
        let asked: Vec<&Value> = messages
            .iter()
            .filter(|m| m["method"] == "session/request_permission")
            .collect();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0]["params"]["sessionId"], child.as_str());
        // Attributed to the child's session, its title need not name the child.
        let title = asked[0]["params"]["toolCall"]["title"].as_str().unwrap();
        assert!(!title.starts_with("Ask kin: "), "{title}");
        assert!(title.contains("echo CHILD_RAN_BASH"), "{title}");
        // Allowed or rejected, the child finishes its run.
        let last_state = messages
            .iter()
            .filter_map(update_of)
            .filter(|(id, u)| {
                *id == parent
                    && u["sessionUpdate"] == "subagent_update"
                    && u["sessionId"] == child.as_str()
            })
            .filter_map(|(_, u)| u.get("state"))
            .next_back()
            .cloned();
        assert_eq!(
            last_state,
            Some(json!({"state": "idle", "stopReason": "end_turn"})),
            "{answer}"
        );
    }
}

#[tokio::test]
async fn a_client_without_subagents_sees_no_child_text_only_a_summary_on_the_tool_call() {
    let messages = run_tree(json!({}), &["allow_once"], Vec::new()).await;
    let parent = parent_session(&messages);
    for message in &messages {
        if let Some(session) = message["params"]["sessionId"].as_str() {
            assert_eq!(session, parent, "only the parent's session: {message}");
        }
        if let Some((_, update)) = update_of(message) {
            assert_ne!(update["sessionUpdate"], "subagent_update");
        }
    }
    assert!(!texts_in(&messages, &parent).contains("ANSWER_FROM_THE_CHILD"));
    assert!(!texts_in(&messages, &parent).contains("GRANDCHILD_SAYS"));
    let summaries: Vec<&str> = messages
        .iter()
        .filter_map(update_of)
        .filter(|(_, u)| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "ask-kin")
        .filter_map(|(_, u)| u.pointer("/content/0/content/text").and_then(Value::as_str))
        .filter(|text| text.starts_with("- "))
        .collect();
    let last = summaries.last().expect("a summary on the delegating call");
    assert!(last.contains("Go deeper"), "{last}");
    assert!(last.contains("echo CHILD_RAN_BASH"), "{last}");
    assert!(last.ends_with("ANSWER_FROM_THE_CHILD"), "{last}");
    let asked: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert_eq!(
        asked.len(),
        1,
        "the child's bash was asked about on the parent (once, though it ran in kin's terminal)"
    );
    // Shown on the parent, the prompt names the child.
    let title = asked[0]["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.starts_with("Ask kin: "), "{title}");
}

/// The terminal ids and the texts in the tool calls of `session`.
fn tool_call_content(messages: &[Value], session: &str) -> (Vec<String>, String) {
    let mut ids = Vec::new();
    let mut texts = String::new();
    let calls = messages.iter().filter_map(update_of).filter(|(id, u)| {
        *id == session
            && (u["sessionUpdate"] == "tool_call" || u["sessionUpdate"] == "tool_call_update")
    });
    for (_, update) in calls {
        for item in update["content"].as_array().into_iter().flatten() {
            match item["type"].as_str() {
                Some("terminal") => ids.push(item["terminalId"].as_str().unwrap().to_owned()),
                Some("content") => texts.push_str(item["content"]["text"].as_str().unwrap_or("")),
                _ => {}
            }
        }
    }
    (ids, texts)
}

#[tokio::test]
async fn a_kin_childs_terminal_shows_as_its_output_unless_the_editor_runs_it() {
    // No terminals in the editor: kin runs the child's command itself, and the child's tool
    // call shows its output, not an id the editor never gave.
    let messages = run_tree(json!({"subagents": {}}), &["allow_once"], Vec::new()).await;
    let parent = parent_session(&messages);
    let (_, child) = announced_on(&messages, &parent).unwrap();
    let (ids, texts) = tool_call_content(&messages, &child);
    assert!(
        ids.is_empty(),
        "terminal ids the editor does not know: {ids:?}"
    );
    assert!(texts.contains("CHILD_RAN_BASH"), "{texts}");
    // The editor's terminals (the scenario client's ids are `term-<n>`): the child's tool call
    // names the one the editor created.
    let capabilities = json!({"subagents": {}, "terminal": true});
    let messages = run_tree(capabilities, &["allow_once"], Vec::new()).await;
    let parent = parent_session(&messages);
    let (_, child) = announced_on(&messages, &parent).unwrap();
    let (ids, _) = tool_call_content(&messages, &child);
    assert!(
        !ids.is_empty(),
        "the child's call shows the editor's terminal"
    );
    assert!(ids.iter().all(|id| id.starts_with("term-")), "{ids:?}");
}

#[tokio::test]
async fn the_editor_cancels_the_acp_child_alone_and_the_parent_goes_on() {
    let call = json!({"description": "Wait", "prompt": "Wait for a cancel."});
    let (mut kin, parent, _script) = on_fake_child(call, "tree-cancel").await;
    kin.send_prompt(1, &parent, "go").await;
    let child = announced_child(&mut kin, &[], &parent).await;
    kin.send(
        &json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": child}}),
    )
    .await;
    let (before, answer) = kin.answer(&json!(1)).await;
    assert_eq!(
        answer["result"]["stopReason"], "end_turn",
        "the parent was not cancelled"
    );
    let idle = before
        .iter()
        .filter_map(update_of)
        .find_map(|(session, update)| {
            (session == parent && update["sessionId"] == child.as_str())
                .then(|| update.get("state").cloned())
                .flatten()
        });
    assert_eq!(
        idle,
        Some(json!({"state": "idle", "stopReason": "cancelled"}))
    );
    assert!(before.iter().any(|m| m.to_string().contains("PARENT_DONE")));
}

#[tokio::test]
async fn a_reloaded_parent_replays_its_tree_and_the_kin_childs_session_is_not_top_level() {
    let then = vec![
        Step::LoadSession { session: None },
        Step::ListSessions {
            filter_cwd: false,
            cursor: None,
        },
    ];
    let messages = run_tree(json!({"subagents": {}}), &["allow_once"], then).await;
    let parent = parent_session(&messages);
    let (_, child) = announced_on(&messages, &parent).unwrap();
    // After the prompt's answer, the load: its replay ends with the child's announcement.
    let prompt_answered = messages
        .iter()
        .position(|m| m["result"]["stopReason"] == "end_turn")
        .unwrap();
    let replayed: Vec<&Value> = messages[prompt_answered..]
        .iter()
        .filter_map(update_of)
        .filter(|(id, u)| *id == parent && u["sessionUpdate"] == "subagent_update")
        .map(|(_, u)| u)
        .collect();
    assert_eq!(replayed.len(), 1, "{replayed:?}");
    assert_eq!(replayed[0]["sessionId"], child.as_str());
    assert_eq!(replayed[0]["title"], "Ask kin");
    assert_eq!(
        replayed[0]["state"],
        json!({"state": "idle", "stopReason": "end_turn"})
    );
    // The kin child's own session is listed under its parent, not at the top level.
    let listed = messages
        .iter()
        .rev()
        .find_map(|m| m["result"]["sessions"].as_array())
        .unwrap();
    let ids: Vec<&str> = listed
        .iter()
        .filter_map(|s| s["sessionId"].as_str())
        .collect();
    assert_eq!(ids, [parent.as_str()], "only the parent is top-level");
}

#[tokio::test]
async fn closing_a_parent_with_a_running_background_child_sends_nothing_after_the_answer() {
    let call = json!({"description": "Wait", "prompt": "Wait.", "run_in_background": true});
    let (mut kin, parent, _script) = on_fake_child(call, "tree-close").await;
    let (before, _) = kin.prompt(1, &parent, "go").await;
    // The child runs on in the background (announced perhaps after the answer), not idle.
    let child = announced_child(&mut kin, &before, &parent).await;
    let (closing, answer) = kin
        .request(2, "session/close", json!({"sessionId": parent}))
        .await;
    assert_eq!(answer["result"], json!({}));
    let idle = closing
        .iter()
        .filter_map(update_of)
        .any(|(session, update)| {
            session == parent
                && update["sessionId"] == child.as_str()
                && update["state"]["state"] == "idle"
        });
    assert!(
        idle,
        "the child's end is reported before the answer: {closing:?}"
    );
    kin.close_stdin();
    while let Some(message) = kin.read().await {
        let session = message["params"]["sessionId"].as_str().unwrap_or_default();
        assert!(
            session != parent && session != child,
            "nothing about the closed tree after the answer: {message}"
        );
    }
}

#[tokio::test]
async fn a_reloaded_parent_replays_a_child_that_is_still_running_as_running() {
    let call = json!({"description": "Wait", "prompt": "Wait.", "run_in_background": true});
    let (mut kin, parent, _script) = on_fake_child(call, "tree-running").await;
    let (before, _) = kin.prompt(1, &parent, "go").await;
    let child = announced_child(&mut kin, &before, &parent).await;
    let (replayed, answer) = kin.load(2, &parent).await;
    assert!(answer.get("result").is_some(), "{answer}");
    let states: Vec<Value> = replayed
        .iter()
        .filter_map(update_of)
        .filter(|(session, update)| *session == parent && update["sessionId"] == child.as_str())
        .filter_map(|(_, update)| update.get("state").cloned())
        .collect();
    assert_eq!(
        states.last(),
        Some(&json!({"state": "running"})),
        "the child still runs: {states:?}"
    );
    kin.close_stdin();
    while kin.read().await.is_some() {}
}

/// Every `subagent_update` in `messages`, as (the session it is on, the child it announces).
fn announcements(messages: &[Value]) -> std::collections::BTreeSet<(String, String)> {
    messages
        .iter()
        .filter_map(update_of)
        .filter(|(_, update)| update["sessionUpdate"] == "subagent_update")
        .map(|(on, update)| {
            let child = update["sessionId"].as_str().unwrap_or_default();
            (on.to_owned(), child.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_reloaded_tree_with_a_kin_child_sharing_the_store_is_the_live_tree() {
    let then = vec![Step::LoadSession { session: None }];
    let messages = run_tree(json!({"subagents": {}}), &["allow_once"], then).await;
    let answered = messages
        .iter()
        .position(|m| m["result"]["stopReason"] == "end_turn")
        .unwrap();
    let live = announcements(&messages[..answered]);
    let reloaded = announcements(&messages[answered..]);
    assert_eq!(live.len(), 2, "the kin child and its grandchild: {live:?}");
    assert_eq!(reloaded, live, "same ids, same levels");
}

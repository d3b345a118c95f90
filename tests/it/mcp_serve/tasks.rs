//! Tasks over time: `kin_reply` continuing a session after a restart and steering a running
//! task, a cancelled call, the delegation time limit, a failed task's partial output, and
//! `kin_output`/`kin_cancel` answering from the log.

use serde_json::json;

use super::{session_id, World};
use crate::common::mock_openai::{hang_after, text_reply, tool_calls_reply};

/// A session id no `kin mcp` started.
const UNKNOWN: &str = "00000000-0000-4000-8000-000000000000";

#[tokio::test]
async fn kin_reply_continues_a_session_after_the_server_restarted() {
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["first answer"]));
    world.model.push(text_reply(&["second answer"]));
    let first = world
        .call("kin", r#"{"prompt": "remember the number 41"}"#)
        .await;
    let id = session_id(&first);
    // A new `kin mcp` process: the session comes from disk.
    let arguments = json!({"session_id": id, "prompt": "and add one"}).to_string();
    let result = world.call("kin_reply", &arguments).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["sessionId"], id.as_str());
    assert_eq!(result["structured"]["answer"], "second answer");
    // The model saw the whole conversation, and both turns are in the one log.
    let request = world.model.requests()[1].body.to_string();
    assert!(request.contains("remember the number 41"), "{request}");
    assert!(request.contains("first answer"), "{request}");
    let log = world.log(&id);
    assert!(
        log.contains("and add one") && log.contains("second answer"),
        "{log}"
    );
    // A session that was not started over MCP is refused.
    let other = json!({"session_id": UNKNOWN, "prompt": "x"});
    let refused = world.call("kin_reply", &other.to_string()).await;
    assert_eq!(refused["isError"], true);
    assert!(refused["text"]
        .as_str()
        .unwrap()
        .contains("unknown session"));
}

#[tokio::test]
async fn a_cancelled_call_cancels_the_run_and_it_settles_cancelled() {
    let Some(world) = World::new() else { return };
    // The model starts answering, then holds the response open until kin hangs up.
    world.model.push(hang_after(&["thinking about it"]));
    let found = world.client(&["cancel", "take your time"]).await;
    assert!(
        found.iter().all(|line| line.get("unexpected").is_none()),
        "{found:?}"
    );
    let listed = &found[0]["structured"]["sessions"];
    // Listed at once after the cancellation: stopping, or already settled.
    let state = listed[0]["state"].as_str().unwrap();
    assert!(["stopping", "cancelled"].contains(&state), "{listed}");
    let output = &found[1];
    assert_eq!(output["isError"], true, "{output}");
    assert_eq!(output["structured"]["state"], "cancelled");
    // kin hung up on the model: the request does not outlive the call.
    world.assert_model_hung_up().await;
}

#[tokio::test]
async fn kin_reply_steers_a_task_that_is_mid_turn() {
    let Some(world) = World::new() else { return };
    let fifo = world.cwd.path().join("gate");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    // The model's command blocks reading the FIFO: the task is mid-turn until the client
    // writes to it, which it does only after kin_reply answered.
    let command =
        json!({"command": format!("read -r line < {} && echo got $line", fifo.display())});
    world
        .model
        .push(tool_calls_reply(&[("c1", "bash", &command.to_string())]));
    world
        .model
        .push(text_reply(&["Counting in French: un, deux, trois."]));
    let fifo_arg = fifo.to_string_lossy().into_owned();
    let found = world
        .client(&["steer", &fifo_arg, "count to three", "answer in French"])
        .await;
    let started = &found[0]["structured"];
    let replied = &found[1];
    assert_eq!(replied["isError"], false, "{replied}");
    assert_eq!(replied["structured"]["delivered"], "into the running task");
    assert_eq!(replied["structured"]["taskId"], started["taskId"]);
    let output = &found[2];
    assert_eq!(output["structured"]["state"], "completed", "{output}");
    assert_eq!(
        output["structured"]["answer"],
        "Counting in French: un, deux, trois."
    );
    // The model's second request, in the same task, carried the steering message after the
    // command's result.
    let requests = world.model.requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body.to_string();
    assert!(second.contains("answer in French"), "{second}");
    assert!(second.contains("got go"), "{second}");
}

#[tokio::test]
async fn the_delegation_time_limit_bounds_a_plain_kin_task() {
    let Some(world) = World::new() else { return };
    world.configure("[delegation]\ntimeout = \"1s\"\n");
    world.model.push(hang_after(&[]));
    let result = world.call("kin", r#"{"prompt": "stall"}"#).await;
    assert_eq!(result["isError"], true, "{result}");
    let error = result["structured"]["error"].as_str().unwrap();
    assert!(error.starts_with("timed_out"), "{result}");
    world.assert_model_hung_up().await;
}

#[tokio::test]
async fn a_failed_kin_task_hands_back_what_it_wrote_so_far() {
    let Some(world) = World::new() else { return };
    world.configure("[delegation]\ntimeout = \"1s\"\n");
    world.model.push(hang_after(&["half an answer"]));
    let result = world.call("kin", r#"{"prompt": "stall"}"#).await;
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(result["structured"]["state"], "failed", "{result}");
    assert_eq!(result["structured"]["partialOutput"], "half an answer");
    assert!(result["structured"].get("answer").is_none(), "{result}");
    let text = result["text"].as_str().unwrap();
    assert!(
        text.ends_with("\nPartial output before the run ended:\nhalf an answer"),
        "{text}"
    );
}

#[tokio::test]
async fn kin_output_after_a_restart_answers_from_the_log() {
    let Some(world) = World::new() else { return };
    world.model.push(text_reply(&["the answer ", "is 42"]));
    let id = session_id(&world.call("kin", r#"{"prompt": "what is it?"}"#).await);
    // A new server never ran a task on it: the last turn is read from the log.
    let arguments = json!({"session_id": id}).to_string();
    let result = world.call("kin_output", &arguments).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["state"], "completed", "{result}");
    assert_eq!(result["structured"]["answer"], "the answer is 42");
    assert_eq!(result["structured"]["fromLog"], true);
    assert!(result["text"]
        .as_str()
        .unwrap()
        .contains("the answer is 42"));
    // Nothing of it runs in this server: kin_cancel says so from the log, and stops nothing.
    let result = world.call("kin_cancel", &arguments).await;
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["structured"]["cancelled"], false, "{result}");
    assert_eq!(result["structured"]["fromLog"], true, "{result}");
    assert_eq!(result["structured"]["state"], "completed", "{result}");
    // A session kin mcp does not know is still refused.
    let other = json!({"session_id": UNKNOWN}).to_string();
    let refused = world.call("kin_output", &other).await;
    assert_eq!(refused["isError"], true);
    assert!(refused["text"]
        .as_str()
        .unwrap()
        .contains("unknown session"));
}

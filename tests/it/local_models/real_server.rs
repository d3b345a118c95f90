//! A real llama-server (opt-in, `KIN_TEST_LLAMA_URL`).

use serde_json::json;

use super::{of_type, ready, usage_update};
use crate::common::{self, Wire};

/// Against a real llama-server (`KIN_TEST_LLAMA_URL`, its API root), started with a small
/// window and the strict-alternation template: plain chat, a cancel, a prompt over the window
/// and the prompts after them all work. Skipped (passes) when the variable is unset.
#[tokio::test]
async fn a_real_llama_server_keeps_working() {
    let Ok(url) = std::env::var("KIN_TEST_LLAMA_URL") else {
        eprintln!("KIN_TEST_LLAMA_URL is not set: skipped");
        return;
    };
    let model = std::env::var("KIN_TEST_LLAMA_MODEL").unwrap_or_else(|_| "smollm2".into());
    let env = [
        ("KIN_BASE_URL", url.as_str()),
        ("KIN_MODEL", model.as_str()),
        ("KIN_API_KEY", "local"),
        ("KIN_STALL_TIMEOUT", "120s"),
    ];
    let mut kin = Wire::start_with(None, common::home_with("max_output = 64\n"), &env);
    let session = ready(&mut kin).await;
    let started = std::time::Instant::now();
    let (updates, answer) = kin.prompt(2, &session, "What is 2+2?").await;
    eprintln!(
        "plain prompt: {:?}, {:?}",
        started.elapsed(),
        answer["result"]
    );
    assert!(answer["result"]["stopReason"].is_string(), "{answer}");
    let window = usage_update(&updates).map(|u| (u["used"].clone(), u["size"].clone()));
    eprintln!("usage_update (used, size): {window:?}");
    // Cancelled while it answers.
    kin.send_prompt(3, &session, "Write a long story about a lighthouse.")
        .await;
    loop {
        let update = kin.read().await.expect("kin streams");
        if update.to_string().contains("agent_message_chunk") {
            break;
        }
    }
    let cancel =
        json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}});
    let cancelled = std::time::Instant::now();
    kin.send(&cancel).await;
    let (_, answer) = kin.answer(&json!(3)).await;
    eprintln!(
        "cancelled after the first chunk: answered in {:?}, {}",
        cancelled.elapsed(),
        answer["result"]
    );
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    // Over the window, then a short one.
    let huge = "Please read this. ".repeat(6_000);
    let started = std::time::Instant::now();
    let (_, answer) = kin.prompt(4, &session, &huge).await;
    eprintln!("over the window: {:?}, {answer}", started.elapsed());
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("alone"),
        "{answer}"
    );
    let started = std::time::Instant::now();
    let (_, answer) = kin.prompt(5, &session, "Say hi.").await;
    eprintln!("after it: {:?}, {}", started.elapsed(), answer["result"]);
    assert!(answer["result"]["stopReason"].is_string(), "{answer}");
    let log = kin.log(&session);
    for end in of_type(&log, "turn/end") {
        eprintln!("turn/end: {}", end["data"]);
    }
}

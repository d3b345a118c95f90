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

/// A long prompt of about `tokens` tokens, different for each `turn` (so nothing repeats).
fn long_prompt(turn: u32, tokens: usize) -> String {
    let mut text = format!("Part {turn} of my notes. Reply with one short sentence.\n");
    let mut n = 0u64;
    while text.len() < tokens * 4 {
        n += 1;
        text.push_str(&format!(
            "Note {turn}.{n}: the value of item {n} is {}. ",
            n * 7 + u64::from(turn)
        ));
    }
    text
}

/// What the turns of `session` came to: (turns completed, compactions, the largest request
/// the server counted, the first request's count).
fn figures(kin: &Wire, session: &str) -> (usize, usize, u64, u64) {
    let log = kin.log(session);
    let completed = of_type(&log, "turn/end")
        .iter()
        .filter(|end| end["data"]["reason"]["kind"] != "error")
        .count();
    let compactions = of_type(&log, "compaction/start").len();
    let counted: Vec<u64> = of_type(&log, "assistant/message")
        .iter()
        .filter_map(|m| m["data"]["usage"]["inputTokens"].as_u64())
        .collect();
    let largest = counted.iter().copied().max().unwrap_or(0);
    (
        completed,
        compactions,
        largest,
        counted.first().copied().unwrap_or(0),
    )
}

fn real_env(url: &str) -> Vec<(&'static str, String)> {
    let model = std::env::var("KIN_TEST_LLAMA_MODEL").unwrap_or_else(|_| "smollm2".into());
    vec![
        ("KIN_BASE_URL", url.to_owned()),
        ("KIN_MODEL", model),
        ("KIN_API_KEY", "local".to_owned()),
        ("KIN_STALL_TIMEOUT", "300s".to_owned()),
    ]
}

fn start_real(url: &str, home: tempfile::TempDir) -> Wire {
    let env = real_env(url);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Wire::start_with(None, home, &env)
}

/// Against a real llama-server started with `-c 8192` (`KIN_TEST_LLAMA_8K_URL`; a template
/// that renders tools, `hermes-tools.jinja`): ten prompts of ~1,500 tokens each all get
/// answers, every request the server counted fits its window, and the figures are printed
/// (turns completed, compactions, largest request, kin's estimate of the first request
/// against the server's count). Skipped (passes) when the variable is unset.
#[tokio::test]
async fn a_real_llama_server_holds_ten_long_turns_in_8k() {
    let Ok(url) = std::env::var("KIN_TEST_LLAMA_8K_URL") else {
        eprintln!("KIN_TEST_LLAMA_8K_URL is not set: skipped");
        return;
    };
    let mut kin = start_real(&url, common::home_with("max_output = 64\n"));
    let session = ready(&mut kin).await;
    let mut failures = Vec::new();
    for turn in 1..=10u32 {
        let prompt = long_prompt(turn, 1_500);
        let started = std::time::Instant::now();
        let (updates, answer) = kin.prompt(i64::from(turn) + 1, &session, &prompt).await;
        let used = usage_update(&updates).map(|u| (u["used"].clone(), u["size"].clone()));
        eprintln!(
            "turn {turn}: {:?}, {}, usage_update (used, size) {used:?}",
            started.elapsed(),
            answer.get("result").unwrap_or(&answer["error"])
        );
        if answer["error"].is_object() {
            failures.push((turn, answer["error"]["message"].clone()));
        }
    }
    let (completed, compactions, largest, first) = figures(&kin, &session);
    let estimate = (13_438 + long_prompt(1, 1_500).len()) / 4;
    eprintln!(
        "8k: {completed} of 10 turns completed, {compactions} compactions, largest request \
         {largest} of 8192 tokens; first request: kin estimated ~{estimate} tokens whole \
         (the lean form is smaller), the server counted {first}"
    );
    assert!(failures.is_empty(), "{failures:?}");
    assert!(largest <= 8_192, "{largest}");
}

/// A history grown on a 16k server (`KIN_TEST_LLAMA_16K_URL`) continued by a new kin process
/// on a 4k one (`KIN_TEST_LLAMA_4K_URL`, the same model): the session is not dead, a short
/// prompt is answered. Skipped (passes) when either variable is unset.
#[tokio::test]
async fn a_real_llama_server_that_shrinks_from_16k_to_4k_keeps_the_session() {
    let (Ok(big), Ok(small)) = (
        std::env::var("KIN_TEST_LLAMA_16K_URL"),
        std::env::var("KIN_TEST_LLAMA_4K_URL"),
    ) else {
        eprintln!("KIN_TEST_LLAMA_16K_URL and KIN_TEST_LLAMA_4K_URL are not set: skipped");
        return;
    };
    let home = common::home_with("max_output = 64\n");
    let kin_home = home.path().to_owned();
    let mut kin = start_real(&big, home);
    let session = ready(&mut kin).await;
    for turn in 1..=6u32 {
        let (_, answer) = kin
            .prompt(i64::from(turn) + 1, &session, &long_prompt(turn, 1_500))
            .await;
        eprintln!(
            "16k turn {turn}: {}",
            answer.get("result").unwrap_or(&answer["error"])
        );
    }
    let (grown, _, largest, _) = figures(&kin, &session);
    eprintln!("16k: {grown} turns completed, largest request {largest} tokens");
    let home = kin.stop().await;
    assert_eq!(home.path(), kin_home);
    // The same store, the server back with `-c 4096`.
    let env = real_env(&small);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut kin = Wire::start_with(None, home, &env);
    kin.initialize_with_compaction().await;
    let workspace = tempfile::tempdir().unwrap();
    let cwd = workspace.path().to_string_lossy().into_owned();
    let params = json!({"sessionId": session, "cwd": cwd, "mcpServers": []});
    let (_, loaded) = kin.request(20, "session/load", params).await;
    assert!(loaded["result"].is_object(), "{loaded}");
    let mut answers = Vec::new();
    for id in 21..=23 {
        let (_, answer) = kin.prompt(id, &session, "Say hi.").await;
        eprintln!("4k: {}", answer.get("result").unwrap_or(&answer["error"]));
        answers.push(answer);
    }
    let (_, compactions, largest, _) = figures(&kin, &session);
    eprintln!("4k: {compactions} compactions in all, largest request {largest} tokens");
    assert!(
        answers
            .iter()
            .any(|a| a["result"]["stopReason"].is_string()),
        "the session is dead at 4k: {answers:?}"
    );
    assert!(answers.last().unwrap()["result"]["stopReason"].is_string());
}

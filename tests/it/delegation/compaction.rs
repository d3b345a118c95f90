//! Compaction inside one long turn: a tool loop that alone outgrows the context window keeps
//! going, its older steps summarised while its prompt and latest steps stay.

use kin::model::{ModelCatalog, ModelChoice, ModelProfile};
use kin::runtime::RuntimeOptions;
use kin::session::history::HistoryItem;
use kin::session::AssistantBlock;
use serde_json::json;

use super::support::{calls, last_user_text, text, ScriptedModel, World};

// Room for the system prompt and tools (~2,000 tokens) beside the summary and kept steps.
const WINDOW: u64 = 24000;
// Enough steps to outgrow the window twice: one threshold compaction a turn, then another
// only when a request would not fit.
const STEPS: usize = 36;

#[tokio::test]
async fn a_long_tool_loop_is_compacted_within_its_turn_and_finishes() {
    let model = ScriptedModel::new(|req| {
        if last_user_text(req).starts_with("The conversation above is being compacted") {
            return text("SUMMARY of the loop so far");
        }
        // The step the last call named (kept steps survive a compaction).
        let step = req
            .history
            .iter()
            .rev()
            .find_map(|item| match item {
                HistoryItem::Assistant(blocks) => blocks.iter().find_map(|block| match block {
                    AssistantBlock::ToolCall { arguments, .. } => {
                        let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
                        args["step"].as_u64()
                    }
                    _ => None,
                }),
                _ => None,
            })
            .unwrap_or(0) as usize;
        if step >= STEPS {
            return text("done");
        }
        // Each step carries ~1000 tokens: the loop alone is more than the window.
        let pad = "x".repeat(4000);
        calls(&[("task_list", json!({"step": step + 1, "pad": pad}))])
    });
    let profile = ModelProfile {
        id: "default".into(),
        context_window: Some(WINDOW),
        ..ModelProfile::default()
    };
    let choice = ModelChoice {
        profile,
        model: model.clone(),
    };
    let options = RuntimeOptions {
        models: Some(ModelCatalog::new(choice, Vec::new(), 0.5)),
        max_steps: 100,
        ..Default::default()
    };
    let world = World::with_options(model.clone(), options);
    let agent = world.session();
    let stop = world.prompt(&agent, "loop: go").await;
    assert_eq!(stop, kin::agent::StopReason::Completed);
    let log = world.log(&agent.id);
    let starts: Vec<&serde_json::Value> = log
        .iter()
        .filter(|e| e["type"] == "compaction/start")
        .collect();
    assert!(
        starts.len() >= 2,
        "it compacted at each crossing: {}",
        starts.len()
    );
    assert!(
        starts.iter().all(|s| s["data"]["throughStep"].is_u64()),
        "within the turn: {starts:?}"
    );
    let answered = log
        .iter()
        .filter(|e| e["type"] == "assistant/message")
        .count();
    assert_eq!(answered, STEPS + 1, "every step ran, then the answer");
    // Every request of the loop fits the window, and keeps the user's prompt.
    for request in model.requests() {
        let bytes: usize = request.history.iter().map(HistoryItem::text_len).sum();
        assert!((bytes as u64).div_ceil(4) <= WINDOW, "{bytes} bytes");
        if !last_user_text(&request).starts_with("The conversation above") {
            let prompt = request.history.iter().any(|item| {
                matches!(item, HistoryItem::User(parts) if format!("{parts:?}").contains("loop: go"))
            });
            assert!(prompt, "the prompt stays");
        }
    }
}

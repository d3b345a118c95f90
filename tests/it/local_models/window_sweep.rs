//! The window sweep (issue 49): sessions driven through the llama.cpp imitation at windows of
//! 4,096 to 32,768 tokens, known from the config, from `/props`, or only from the first
//! refusal, under templates that render the tools and that drop them, with prompts, tool
//! results, malformed tool calls and children of sizes drawn from a seeded generator. For
//! every turn: each request fits the window (bar the refusal that names an unknown window,
//! and a prompt too long by itself), roles alternate, a turn fails only when its own prompt
//! cannot fit, and the short prompt after any failure succeeds; at most one compaction a
//! turn.

use serde_json::{json, Value};

use super::{answer_of, of_type, prompt_of, ready, start};
use crate::common::mock_openai::{tool_calls_reply, LlamaLike, MockServer};

/// A small seeded generator (xorshift64*): the same cases on every run.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `low..=high`.
    fn within(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high.saturating_sub(low) + 1)
    }
}

#[derive(Clone, Copy, Debug)]
enum Source {
    Configured,
    Props,
    Unknown,
}

/// One turn of a case.
#[derive(Debug)]
enum Step {
    Prompt { prompt: u64, answer: u64 },
    Read { file: &'static str },
    Malformed,
    Child { answer: u64 },
    TooLong,
}

/// The roles of `body`'s messages, the system prompt left out.
fn alternates(body: &Value) -> bool {
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["role"].as_str()).collect())
        .unwrap_or_default();
    let roles: Vec<&str> = roles.into_iter().filter(|r| *r != "system").collect();
    roles.first().is_none_or(|r| *r == "user")
        && !roles
            .windows(2)
            .any(|w| w[0] == w[1] && (w[0] == "user" || w[0] == "assistant"))
}

/// Runs one case: `turns` turns drawn from `seed` on a `window`-token server.
async fn sweep(window: u64, source: Source, drops_tools: bool, seed: u64) {
    let case = format!("{window} {source:?} drops_tools={drops_tools} seed={seed}");
    let server = MockServer::start();
    let mut llama = LlamaLike::llama_server(window);
    llama.drops_tools = drops_tools;
    llama.props = matches!(source, Source::Props);
    server.behave_like(llama.clone());
    server.answer_compactions_with(answer_of(40));
    let config = match source {
        Source::Configured => format!("context_window = {window}\n"),
        _ => String::new(),
    };
    let mut kin = start(&server, &config, &[]);
    for (name, kib) in [("small.txt", 2), ("mid.txt", 16), ("big.txt", 64)] {
        let text: String = (1..=kib * 1024 / 32)
            .map(|n| format!("{n:>8} is a line of the file.\n"))
            .collect();
        std::fs::write(kin.cwd.path().join(name), text).unwrap();
    }
    let session = ready(&mut kin).await;
    server.push(answer_of(5));
    kin.turn(2, &session, "hello").await;
    // The room the conversation has beside the fixed part, as this server counts it.
    let room = window.saturating_sub(llama.count(&server.requests()[0].body));
    assert!(room > 400, "{case}: the fixed part leaves {room} tokens");
    let mut draw = Draw(seed);
    // An unknown window is named by a refusal; the lean retry that follows may be refused
    // too (a tool result taken before the window was known).
    let mut refusals_allowed = 2 * usize::from(matches!(source, Source::Unknown));
    let mut after_failure = false;
    let mut compactions_before = 0;
    for id in 3..13 {
        let step = match (after_failure, id, draw.within(0, 5)) {
            (true, _, _) => Step::Prompt {
                prompt: 5,
                answer: 5,
            },
            (_, 7, _) => Step::TooLong,
            (_, _, 0 | 1) => Step::Prompt {
                prompt: draw.within(5, room / 3),
                answer: draw.within(5, room / 8),
            },
            (_, _, 2) => Step::Read {
                file: ["small.txt", "mid.txt", "big.txt"][draw.within(0, 2) as usize],
            },
            (_, _, 3) => Step::Malformed,
            _ => Step::Child {
                answer: draw.within(5, room / 4),
            },
        };
        let seen = server.request_count();
        let prompt = match &step {
            Step::Prompt { prompt, answer } => {
                server.push(answer_of(*answer));
                prompt_of(*prompt)
            }
            Step::Read { file } => {
                let args = json!({ "path": file }).to_string();
                server.push(tool_calls_reply(&[("call_r", "read", &args)]));
                server.push(answer_of(10));
                format!("read {file}")
            }
            Step::Malformed => {
                server.push(tool_calls_reply(&[(
                    "call_m",
                    "read",
                    r#"{"path": "small"#,
                )]));
                server.push(answer_of(10));
                "read a file".to_owned()
            }
            Step::Child { answer } => {
                let args = json!({"description": "look around", "prompt": "Look around."});
                server.push(tool_calls_reply(&[(
                    "call_c",
                    "subagent",
                    &args.to_string(),
                )]));
                server.push(answer_of(*answer));
                server.push(answer_of(10));
                "delegate".to_owned()
            }
            Step::TooLong => prompt_of(window + window / 4),
        };
        let (_, answer) = kin.prompt(id, &session, &prompt).await;
        let requests = server.requests();
        let sent = &requests[seen..];
        let what = format!("{case}, turn {id} ({step:?})");
        let ended = answer["result"]["stopReason"].clone();
        match step {
            Step::TooLong => {
                assert!(answer["error"].is_object(), "{what}: {answer}");
                compactions_before = of_type(&kin.log(&session), "compaction/start").len();
                after_failure = true;
                continue;
            }
            _ => assert_eq!(ended, "end_turn", "{what}: {answer}"),
        }
        after_failure = false;
        // Counted in the log: one compaction may take several requests (pieces).
        let compactions = of_type(&kin.log(&session), "compaction/start").len();
        let this_turn = compactions - std::mem::replace(&mut compactions_before, compactions);
        assert!(this_turn <= 1, "{what}: {this_turn} compactions");
        for request in sent {
            assert!(alternates(&request.body), "{what}: {}", request.body);
            let counted = llama.count(&request.body);
            if counted > window {
                assert!(
                    refusals_allowed > 0,
                    "{what}: a request of {counted} tokens"
                );
                refusals_allowed -= 1;
            }
        }
    }
    // Whatever came before, a short prompt still works.
    server.push(answer_of(5));
    kin.turn(20, &session, "one more").await;
}

#[tokio::test]
async fn sessions_keep_working_at_every_window_from_4k() {
    let sources = [Source::Configured, Source::Props, Source::Unknown];
    let mut seed = 0x5eed_0049_u64;
    for (w, window) in [4_096, 8_192, 16_384, 32_768].into_iter().enumerate() {
        for (s, source) in sources.into_iter().enumerate() {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            sweep(window, source, (w + s) % 2 == 1, seed | 1).await;
        }
    }
}

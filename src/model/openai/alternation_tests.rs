//! The property behind strict chat templates: for logs of any mix of turns (answers, tool
//! calls, cancels with and without streamed text, failures, empty and reasoning-only answers,
//! steering, notices, compactions, prompts refused for their length), every request kin
//! builds from the fold, the turn's and the compaction's, alternates user and assistant turns,
//! for every way of encoding it (images or not, a system prompt or not, reasoning sent back).

use serde_json::{json, Value};

use super::request;
use crate::model::ModelRequest;
use crate::session::history::{HistoryFold, HistoryItem, ModelHistory};
use crate::session::{parse_event_line, Event, UserPart};

/// A small deterministic generator (xorshift64*): the same seeds give the same logs.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

struct Log {
    lines: Vec<(String, Value)>,
    turn: u32,
    calls: u32,
}

impl Log {
    fn push(&mut self, kind: &str, data: Value) {
        self.lines.push((kind.to_owned(), data));
    }

    fn user(text: &str, kind: &str) -> Value {
        json!({"content": [{"type": "text", "text": text}], "source": {"kind": kind},
               "role": "user", "id": "u"})
    }

    fn message(&mut self, step: u32, content: Value) {
        let turn = self.turn;
        self.push(
            "assistant/message",
            json!({"turn": turn, "step": step, "message": {"role": "assistant",
                   "content": content, "source": {}, "id": "a"}}),
        );
    }

    fn chunk(&mut self, step: u32, text: &str) {
        let turn = self.turn;
        self.push(
            "assistant/chunk",
            json!({"turn": turn, "step": step,
                   "chunk": {"type": "text-delta", "index": 0, "text": text}}),
        );
    }

    /// One step of the model calling a tool, and its result.
    fn tool_step(&mut self, step: u32, rng: &mut Rng) {
        self.calls += 1;
        let id = format!("call{}", self.calls);
        let reasoning = rng.below(2) == 0;
        let mut content = Vec::new();
        if reasoning {
            content.push(json!({"type": "reasoning", "text": "think"}));
        }
        content.push(json!({"type": "tool-call", "id": id, "name": "read", "arguments": "{}"}));
        self.message(step, Value::Array(content));
        let turn = self.turn;
        if rng.below(4) > 0 {
            self.push(
                "tool/result",
                json!({"turn": turn, "step": step, "message": {"source": {}, "content": [
                    {"type": "tool-result", "toolCallId": id,
                     "content": [{"type": "text", "text": "out"}], "isError": false}],
                    "role": "user", "id": "r"}}),
            );
        }
    }

    /// One turn of a random shape.
    fn turn(&mut self, rng: &mut Rng) {
        self.turn += 1;
        let turn = self.turn;
        self.push("turn/start", json!({"turn": turn, "trigger": {}}));
        if rng.below(5) == 0 {
            self.push("user/message", Self::user("a notice", "runtime"));
        }
        self.push(
            "user/message",
            Self::user(&format!("prompt {turn}"), "user"),
        );
        let tool_steps = rng.below(3) as u32;
        for step in 1..=tool_steps {
            self.push("step/start", json!({"turn": turn, "step": step}));
            self.tool_step(step, rng);
            self.push("step/end", json!({"turn": turn, "step": step}));
            if rng.below(6) == 0 {
                self.push(
                    "steering/message",
                    json!({"turn": turn, "message": Self::user("steer", "user")}),
                );
            }
        }
        let step = tool_steps + 1;
        self.push("step/start", json!({"turn": turn, "step": step}));
        let reason = match rng.below(8) {
            // A complete answer.
            0 | 1 => {
                self.chunk(step, "answer");
                self.message(step, json!([{"type": "text", "text": "answer"}]));
                json!({"kind": "completed"})
            }
            // An empty answer.
            2 => {
                self.message(step, json!([]));
                json!({"kind": "completed"})
            }
            // Reasoning only.
            3 => {
                self.message(step, json!([{"type": "reasoning", "text": "hm"}]));
                json!({"kind": "completed"})
            }
            // Cancelled after some text.
            4 => {
                self.chunk(step, "part");
                json!({"kind": "aborted"})
            }
            // Cancelled before any text.
            5 => json!({"kind": "aborted"}),
            // Failed.
            6 => json!({"kind": "error", "message": "model request failed"}),
            // Refused for its length.
            _ => json!({"kind": "error", "message": "too long", "code": "context_overflow"}),
        };
        self.push("step/end", json!({"turn": turn, "step": step}));
        self.push("turn/end", json!({"turn": turn, "reason": reason}));
        if rng.below(5) == 0 {
            let id = format!("c{turn}");
            self.push(
                "compaction/start",
                json!({"compactionId": id, "throughTurn": turn, "trigger": "threshold"}),
            );
            self.push(
                "compaction/end",
                json!({"compactionId": id, "summary": "what happened"}),
            );
        }
    }

    fn events(&self) -> Vec<Event> {
        let mut events = Vec::new();
        for (seq, (kind, data)) in self.lines.iter().enumerate() {
            let line = json!({"type": kind, "seq": seq, "time": 0, "data": data}).to_string();
            parse_event_line(&line, &mut events).unwrap();
        }
        events
    }
}

/// Why the messages of `body` would be refused by a strict template, if they would.
fn alternation_fault(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap_or("?"))
        .filter(|role| *role != "system")
        .collect();
    if roles.first().is_some_and(|first| *first != "user") {
        return Some(format!("opens with {roles:?}"));
    }
    for pair in roles.windows(2) {
        match (pair[0], pair[1]) {
            ("user", "user") | ("assistant", "assistant") => {
                return Some(format!("{} twice in {roles:?}", pair[0]))
            }
            (before, "tool") if before != "assistant" && before != "tool" => {
                return Some(format!("a tool result after {before} in {roles:?}"))
            }
            _ => {}
        }
    }
    None
}

fn check(history: ModelHistory, system: &str, what: &str) {
    for images in [false, true] {
        let request = ModelRequest {
            session_id: "s".into(),
            cwd: None,
            system: system.into(),
            preamble: String::new(),
            history: history.clone(),
            tools: Vec::new(),
            max_tokens: Some(100),
            blobs: None,
        };
        let body: Value = serde_json::from_slice(&request::body("m", &request, images))
            .expect("the body is JSON");
        if let Some(fault) = alternation_fault(&body) {
            panic!("{what}: {fault}\n{:#?}", history.items());
        }
    }
}

#[test]
fn every_request_alternates_whatever_the_log_holds() {
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut log = Log {
            lines: Vec::new(),
            turn: 0,
            calls: 0,
        };
        let turns = 1 + rng.below(8);
        for _ in 0..turns {
            log.turn(&mut rng);
        }
        let events = log.events();
        // After every event, as the agent folds it; the request of a turn opens with its
        // prompt, so check the fold where each turn's first step starts.
        let mut fold = HistoryFold::default();
        for (at, event) in events.iter().enumerate() {
            fold.push(event);
            if event.body.kind() == "step/start" || event.body.kind() == "turn/end" {
                let what = format!("seed {seed}, after event {at}");
                check(fold.history(), "system", &what);
                check(fold.history(), "", &what);
            }
        }
        // The compaction's request: the completed prefix and the instruction.
        let prefix = fold.completed_prefix();
        if !prefix.is_empty() {
            let mut items: Vec<HistoryItem> = prefix.iter().map(|i| (**i).clone()).collect();
            items.push(HistoryItem::User(vec![UserPart::Text {
                text: "summarise".into(),
            }]));
            check(
                ModelHistory::from(items),
                "",
                &format!("seed {seed}, compaction"),
            );
        }
    }
}

#[test]
fn the_checker_catches_what_strict_templates_refuse() {
    let body = json!({"messages": [{"role": "system"}, {"role": "user"}, {"role": "user"}]});
    assert!(alternation_fault(&body).is_some());
    let body = json!({"messages": [{"role": "user"}, {"role": "assistant"}, {"role": "tool"},
                                   {"role": "assistant"}, {"role": "user"}]});
    assert_eq!(alternation_fault(&body), None);
}

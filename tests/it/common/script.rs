//! Model scripts (replay `session.jsonl` files) built in code.

use serde_json::{json, Value};

/// Builds a model script (a replay `session.jsonl`) in code: turns of steps, each step either
/// tool calls or a final text.
#[derive(Default)]
pub struct Script {
    lines: Vec<Value>,
    turn: u32,
    step: u32,
}

impl Script {
    pub fn new() -> Self {
        let mut script = Self::default();
        script.lines.push(json!({"type":"session","version":0,"id":"00000000-0000-4000-8000-000000000000","createdAt":0,"cwd":"/","delegationDepth":0}));
        script.turn = 1;
        script
    }

    fn chunk(&mut self, chunk: Value) {
        let seq = self.lines.len() - 1;
        self.lines.push(json!({"type":"assistant/chunk","seq":seq,"time":0,"data":{"turn":self.turn,"step":self.step,"chunk":chunk}}));
    }

    /// One model call asking for these tool calls: (call id, tool name, arguments).
    pub fn calls(mut self, calls: &[(&str, &str, Value)]) -> Self {
        self.step += 1;
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            let arguments = arguments.to_string();
            self.chunk(json!({"type":"block-start","index":index,"blockType":"tool-call"}));
            self.chunk(json!({"type":"tool-call-delta","index":index,"id":id,"name":name,"argumentsDelta":arguments}));
            self.chunk(json!({"type":"block-end","index":index,"block":{"type":"tool-call","id":id,"name":name,"arguments":arguments}}));
        }
        self.chunk(json!({"type":"finish","reason":{"kind":"tool-calls"}}));
        self
    }

    /// The recorded result of the last call's tool call `call_id`: replay matches texts with
    /// `{{id:N}}` placeholders against live results to learn ids minted at run time.
    pub fn result(mut self, call_id: &str, text: &str) -> Self {
        let seq = self.lines.len() - 1;
        self.lines.push(json!({"type":"tool/result","seq":seq,"time":0,"data":{"turn":self.turn,"step":self.step,"message":{"source":{"kind":"tool","callId":call_id},"content":[{"type":"tool-result","toolCallId":call_id,"content":[{"type":"text","text":text}],"isError":false}],"role":"user","id":"00000000-0000-4000-8000-000000000001"}}}));
        self
    }

    /// One model call asking for one tool call.
    pub fn call(self, call_id: &str, tool: &str, arguments: Value) -> Self {
        self.calls(&[(call_id, tool, arguments)])
    }

    /// One model call waiting for background task `task` (`task_output` with `wait`).
    pub fn wait_for(self, call_id: &str, task: &str) -> Self {
        self.call(
            call_id,
            "task_output",
            json!({"task_id": task, "wait": true}),
        )
    }

    /// One model call answering with text; ends the turn.
    pub fn text(mut self, text: &str) -> Self {
        self.step += 1;
        self.chunk(json!({"type":"block-start","index":0,"blockType":"text"}));
        self.chunk(json!({"type":"text-delta","index":0,"text":text}));
        self.chunk(json!({"type":"block-end","index":0,"block":{"type":"text","text":text}}));
        self.chunk(json!({"type":"finish","reason":{"kind":"stop"}}));
        self.turn += 1;
        self.step = 0;
        self
    }

    /// Writes the script into a fresh directory usable with `kin acp --replay`.
    pub fn dir(&self) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let text: String = self.lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(dir.path().join("session.jsonl"), text).unwrap();
        dir
    }
}

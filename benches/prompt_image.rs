//! `prompt_image`: what a pasted 5 MB image costs, release `kin acp` on the tests' mock
//! OpenAI-compatible server (a model configured with `images = true`).
//!
//! - time before the model request: `session/prompt` written -> the request's head at the
//!   server (kin has read the prompt, stored the image and built the body), for the first
//!   prompt of a new session with a 5 MB image (6.7 MB of base64), and for the same prompt
//!   without it; the difference is what the image costs. Also to the request's last byte,
//!   which adds sending the 6.7 MB body over loopback;
//! - log growth: bytes the image prompt's `user/message` line takes in the JSONL log (the
//!   image itself goes to `<id>.blobs/`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

#[path = "../tests/it/common/mock_openai.rs"]
mod mock_openai;

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use mock_openai::{text_reply, MockServer};
use serde_json::json;

const PROCESSES: usize = 5;
const PROMPTS: usize = 4;
const IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// Base64 text of the length `IMAGE_BYTES` encode to (every such string of the alphabet is
/// valid base64; the content does not matter to kin).
fn image_base64() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let len = IMAGE_BYTES.div_ceil(3) * 4;
    let mut state = 0x2545_f491_u32;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            ALPHABET[(state % 64) as usize] as char
        })
        .collect()
}

/// Sends a prompt and waits for its answer; returns when the line was written.
fn prompt(kin: &mut Kin, id: u64, line: &str) -> Instant {
    let sent = Instant::now();
    kin.send(line);
    let (answer, _) = kin.wait_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    sent
}

fn log_len(home: &Path, session: &str) -> u64 {
    std::fs::metadata(home.join(format!("sessions/{session}.jsonl")))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// A floor program's median time from writing the image prompt to its answer.
fn floor_ms(data: &str, spawn: fn(&Path) -> Kin) -> f64 {
    let cwd = temp_dir("kin-bench-cwd-");
    let mut floor = spawn(cwd.path());
    floor.initialize();
    let mut times = Vec::new();
    for id in 0..(PROCESSES * PROMPTS) as u64 {
        let line = json!({"jsonrpc": "2.0", "id": 100 + id, "method": "session/prompt",
            "params": {"sessionId": "floor", "prompt": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image", "mimeType": "image/png", "data": data}]}})
        .to_string();
        let sent = Instant::now();
        floor.send(&line);
        floor.wait_response(100 + id);
        if id > 0 {
            times.push(ms(sent.elapsed()));
        }
    }
    floor.finish();
    summary(&mut times).0
}

fn main() {
    common::serve_floor_if_asked();
    common::watchdog("prompt_image", Duration::from_secs(300));
    let server = MockServer::start();
    server.set_default(text_reply(&["ok"]));
    let data = image_base64();
    let (mut with_image, mut without, mut log_growth) = (Vec::new(), Vec::new(), Vec::new());
    let (mut sent_with, mut sent_without) = (Vec::new(), Vec::new());
    let mut id = 10;
    for _ in 0..PROCESSES {
        let (home, cwd) = (temp_dir("kin-bench-home-"), temp_dir("kin-bench-cwd-"));
        let config = home.path().join("config/kin");
        std::fs::create_dir_all(&config).expect("creating the config dir");
        std::fs::write(config.join("config.toml"), "images = true\n").expect("writing config");
        let url = server.base_url();
        let config_home = home.path().join("config");
        let env = [
            ("KIN_BASE_URL", url.as_str()),
            ("KIN_API_KEY", "sk-bench-0000000000000000"),
            (
                "XDG_CONFIG_HOME",
                config_home.to_str().expect("UTF-8 temp path"),
            ),
        ];
        let mut kin = Kin::spawn_with(home.path(), cwd.path(), &[], &env);
        kin.initialize();
        for n in 0..PROMPTS {
            for image in [false, true] {
                // A fresh session each time: the request then holds this prompt alone.
                let session = kin.new_session(id, cwd.path());
                id += 1;
                let mut blocks = vec![json!({"type": "text", "text": "What is in this picture?"})];
                if image {
                    blocks.push(json!({"type": "image", "mimeType": "image/png", "data": data}));
                }
                let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
                    "params": {"sessionId": session, "prompt": blocks}})
                .to_string();
                let before_log = log_len(home.path(), &session);
                let before = server.request_count();
                let sent = prompt(&mut kin, id, &line);
                id += 1;
                assert_eq!(
                    server.request_count(),
                    before + 1,
                    "one model request per prompt"
                );
                let request = server.request(before).expect("the prompt's model request");
                let body = &request.body;
                if image {
                    let last = &body["messages"].as_array().expect("messages")
                        [body["messages"].as_array().map_or(0, |m| m.len() - 1)];
                    assert_eq!(
                        last["content"][1]["type"], "image_url",
                        "the image was sent"
                    );
                    let text = std::fs::read_to_string(
                        home.path().join(format!("sessions/{session}.jsonl")),
                    )
                    .expect("reading the log");
                    let grown = &text[before_log as usize..];
                    let user_line = grown
                        .lines()
                        .find(|l| l.contains(r#""type":"user/message""#))
                        .expect("the prompt's user/message line");
                    log_growth.push(user_line.len() as f64);
                }
                let head = ms(request.started.duration_since(sent));
                let whole = ms(request.received.duration_since(sent));
                if n > 0 {
                    if image { &mut with_image } else { &mut without }.push(head);
                    if image {
                        &mut sent_with
                    } else {
                        &mut sent_without
                    }
                    .push(whole);
                }
            }
        }
        kin.finish();
    }
    let floor = floor_ms(&data, Kin::spawn_floor);
    let pipe = floor_ms(&data, Kin::spawn_pipe_floor);
    let (image_median, image_p10, image_p90) = summary(&mut with_image);
    let (text_median, _, _) = summary(&mut without);
    let (whole_image, _, _) = summary(&mut sent_with);
    let (whole_text, _, _) = summary(&mut sent_without);
    let line_max = log_growth.iter().copied().fold(0.0, f64::max);
    let (line_median, _, _) = summary(&mut log_growth);
    println!(
        "prompt_image: 5 MB image -> model request's head: median {image_median:.2} ms (p10 \
         {image_p10:.2}, p90 {image_p90:.2}); same prompt without the image {text_median:.2} ms; \
         the image costs {:.2} ms before the model request (target < 5 ms)",
        image_median - text_median
    );
    println!(
        "prompt_image: to the request's last byte (the 6.7 MB body sent over loopback too): \
         median {whole_image:.2} ms with the image, {whole_text:.2} ms without: {:.2} ms",
        whole_image - whole_text
    );
    println!(
        "prompt_image: the floor program (reads the line, parses it, answers at once) takes \
         {floor:.2} ms for the same image prompt: what moving 6.7 MB through a pipe and parsing \
         it costs any agent; kin's image cost beyond it {:.2} ms",
        image_median - text_median - floor
    );
    println!(
        "prompt_image: the pipe floor (blocking reads into a buffer it keeps, the newline \
         found, nothing parsed) takes {pipe:.2} ms: what moving the line alone costs; kin's \
         image cost beyond it {:.2} ms",
        image_median - text_median - pipe
    );
    println!(
        "prompt_image: its user/message log line: median {line_median:.0} bytes, at most \
         {line_max:.0} (target < 1024)"
    );
    println!(
        "prompt_image: method: {PROCESSES} processes x {PROMPTS} rounds (the first round of \
         each process left out) of a text prompt then the same prompt with the image, each in a new \
         session; timed from writing session/prompt to the model request's head (and last byte) at \
         the server"
    );
}

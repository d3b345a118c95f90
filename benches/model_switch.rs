//! `model_switch`: what switching a session's model costs the next prompt, release `kin acp`
//! on two mock OpenAI-compatible endpoints (each on its own thread, loopback HTTP/1.1), the
//! default model on one, `[models.other]` on the other.
//!
//! Timed from writing `session/prompt` to the model request's last byte at the server:
//! - steady: prompts on the default model once its connection is up;
//! - first after switch: the first prompt after `session/set_config_option model=other`
//!   (the new endpoint's connect included);
//! - later after switch: the prompts after that;
//! - cold start, for reference: the first prompt of a fresh process (a first connect too).
//!
//! Target: the first prompt after a switch costs no more than a first connect (cold start);
//! later ones cost what steady prompts do.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

#[path = "../tests/it/common/mock_openai.rs"]
mod mock_openai;

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin};
use mock_openai::{text_reply, MockServer};
use serde_json::json;

const PROCESSES: usize = 20;
const PROMPTS: usize = 4;

fn start(default: &MockServer, other: &MockServer, home: &Path, cwd: &Path) -> Kin {
    let config = home.join("config/kin");
    std::fs::create_dir_all(&config).expect("creating the config dir");
    let file = format!(
        "[models.other]\nmodel = \"other-model\"\nbase_url = \"{}\"\n",
        other.base_url()
    );
    std::fs::write(config.join("config.toml"), file).expect("writing the config file");
    let url = default.base_url();
    let config_home = home.join("config");
    let env = [
        ("KIN_BASE_URL", url.as_str()),
        ("KIN_API_KEY", "sk-bench-0000000000000000"),
        (
            "XDG_CONFIG_HOME",
            config_home.to_str().expect("UTF-8 temp path"),
        ),
    ];
    let mut kin = Kin::spawn_with(home, cwd, &[], &env);
    kin.initialize();
    kin
}

/// One prompt; returns how long until `server` had the model request.
fn request_latency(kin: &mut Kin, id: u64, session: &str, server: &MockServer) -> f64 {
    let before = server.requests().len();
    let line = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "Say ok."}]}})
    .to_string();
    let sent = Instant::now();
    kin.send(&line);
    let (answer, _) = kin.wait_response(id);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let requests = server.requests();
    assert_eq!(requests.len(), before + 1, "one model request per prompt");
    ms(requests[before].received.duration_since(sent))
}

fn main() {
    common::serve_floor_if_asked();
    common::watchdog("model_switch", Duration::from_secs(300));
    let (default, other) = (MockServer::start(), MockServer::start());
    default.set_default(text_reply(&["ok"]));
    other.set_default(text_reply(&["ok"]));
    let (mut cold, mut steady, mut first, mut later) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut id = 10;
    for _ in 0..PROCESSES {
        let (home, cwd) = (temp_dir("kin-bench-home-"), temp_dir("kin-bench-cwd-"));
        let mut kin = start(&default, &other, home.path(), cwd.path());
        let session = kin.new_session(2, cwd.path());
        for n in 0..PROMPTS {
            id += 1;
            let took = request_latency(&mut kin, id, &session, &default);
            if n == 0 { &mut cold } else { &mut steady }.push(took);
        }
        id += 1;
        let (answer, _) = kin.call(
            id,
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "other"}),
        );
        assert!(answer["result"].is_object(), "{answer}");
        for n in 0..PROMPTS {
            id += 1;
            let took = request_latency(&mut kin, id, &session, &other);
            if n == 0 { &mut first } else { &mut later }.push(took);
        }
        kin.finish();
    }
    for (name, samples) in [
        ("cold start (first connect)", &mut cold),
        ("steady, default model", &mut steady),
        ("first after switch (new endpoint's connect)", &mut first),
        ("later after switch", &mut later),
    ] {
        let (median, p10, p90) = summary(samples);
        println!(
            "model_switch: {name}: prompt -> model request median {median:.2} ms (p10 {p10:.2}, \
             p90 {p90:.2}; {} samples)",
            samples.len()
        );
    }
    println!(
        "model_switch: method: {PROCESSES} fresh `kin acp` processes, each {PROMPTS} prompts on \
         the default model, set_config_option model=other, {PROMPTS} prompts on it; timed from \
         writing session/prompt to the request's last byte at the server"
    );
}

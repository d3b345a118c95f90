//! `startup`: process start -> `initialize` answered, on the release `kin acp`.
//!
//! Each run gets a fresh, empty `KIN_HOME` (so kin creates its store, as on a first launch);
//! the clock starts just before `spawn` and stops when the response line has been read.

mod common;

use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin, INITIALIZE};

const WARMUP: usize = 10;
const RUNS: usize = 200;

fn one_run() -> Duration {
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let start = Instant::now();
    let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
    kin.send(INITIALIZE);
    let (answer, _) = kin.wait_response(1);
    let elapsed = start.elapsed();
    assert!(
        answer["result"]["protocolVersion"] == 1,
        "unexpected initialize answer: {answer}"
    );
    kin.finish();
    elapsed
}

fn main() {
    common::watchdog("startup", Duration::from_secs(120));
    for _ in 0..WARMUP {
        one_run();
    }
    let wall = Instant::now();
    let mut samples: Vec<f64> = (0..RUNS).map(|_| ms(one_run())).collect();
    let wall = wall.elapsed();
    let (median, p10, p90) = summary(&mut samples);
    let (min, max) = (samples[0], samples[RUNS - 1]);
    println!(
        "startup: initialize answered in median {median:.2} ms (p10 {p10:.2}, p90 {p90:.2}, \
         min {min:.2}, max {max:.2}; {RUNS} runs after {WARMUP} warm-ups, release build; \
         target < 5 ms)"
    );
    println!(
        "startup: method: spawn `kin acp` (fresh KIN_HOME, stderr null) -> write initialize \
         -> read its response line; then close stdin and wait for exit (untimed); \
         {:.1} s wall for the timed runs",
        wall.as_secs_f64()
    );
}

//! `startup`: process start -> `initialize` answered, on the release `kin acp`, against the
//! floor program (see `common::serve_floor_if_asked`) measured in the same run.
//!
//! Each kin run gets a fresh, empty `KIN_HOME` (a first launch); the clock starts just before
//! `spawn` and stops when the response line has been read. Runs of the three programs are
//! interleaved, so drift in the machine's load falls on all of them alike.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::time::{Duration, Instant};

use common::{ms, summary, temp_dir, Kin, INITIALIZE};

const WARMUP: usize = 10;
const RUNS: usize = 200;

#[derive(Clone, Copy)]
enum Program {
    Floor,
    /// No key: nothing to prepare after `initialize`.
    Kin,
    /// An `https://` endpoint and a key: the HTTP client (system roots) is built in the
    /// background once `initialize` is answered.
    KinHttps,
}

/// Wall time to the answer, and the CPU time the program had used by then.
fn one_run(program: Program) -> (Duration, f64) {
    let home = temp_dir("kin-bench-home-");
    let cwd = temp_dir("kin-bench-cwd-");
    let https = [
        ("KIN_BASE_URL", "https://127.0.0.1:9/v1"),
        ("KIN_API_KEY", "sk-bench-0000000000000000"),
    ];
    let start = Instant::now();
    let mut kin = match program {
        Program::Floor => Kin::spawn_floor(cwd.path()),
        Program::Kin => Kin::spawn(home.path(), cwd.path(), &[]),
        Program::KinHttps => Kin::spawn_with(home.path(), cwd.path(), &[], &https),
    };
    kin.send(INITIALIZE);
    let (answer, _) = kin.wait_response(1);
    let elapsed = start.elapsed();
    let cpu = common::cpu_ms(kin.pid());
    assert!(
        answer["result"]["protocolVersion"] == 1,
        "unexpected initialize answer: {answer}"
    );
    kin.finish();
    (elapsed, cpu)
}

fn main() {
    common::serve_floor_if_asked();
    common::watchdog("startup", Duration::from_secs(300));
    let programs = [Program::Floor, Program::Kin, Program::KinHttps];
    for _ in 0..WARMUP {
        for &program in &programs {
            one_run(program);
        }
    }
    let wall = Instant::now();
    let mut samples = [(); 3].map(|()| (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS)));
    // Each round starts with the next program: a run right after a run of the other binary was
    // measured ~0.05x slower than one after its own binary, so no program keeps that place.
    for round in 0..RUNS {
        for step in 0..programs.len() {
            let at = (round + step) % programs.len();
            let (elapsed, cpu) = one_run(programs[at]);
            samples[at].0.push(ms(elapsed));
            samples[at].1.push(cpu);
        }
    }
    let wall = wall.elapsed();
    let [floor, kin, https] = &mut samples;
    let (floor_wall, _, _) = summary(&mut floor.0);
    let (floor_cpu, _, _) = summary(&mut floor.1);
    for (name, (walls, cpus)) in [
        ("floor", floor),
        ("kin", kin),
        ("kin, https endpoint + key", https),
    ] {
        let (median, p10, p90) = summary(walls);
        let (cpu, cpu_p10, cpu_p90) = summary(cpus);
        println!(
            "startup: {name}: initialize answered in median {median:.2} ms (p10 {p10:.2}, p90 \
             {p90:.2}) = {:.2}x the floor; CPU used by then median {cpu:.2} ms (p10 \
             {cpu_p10:.2}, p90 {cpu_p90:.2}) = {:.2}x the floor",
            median / floor_wall,
            cpu / floor_cpu
        );
    }
    println!(
        "startup: method: spawn (fresh KIN_HOME, stderr null) -> write initialize -> read its \
         response line (CPU: all threads' schedstat run time, read then); then close stdin and \
         wait for exit (untimed); {RUNS} interleaved runs of each (the order rotating every \
         round) after {WARMUP} warm-ups, release build, {:.1} s wall; target kin <= 1.2x the \
         floor",
        wall.as_secs_f64()
    );
}

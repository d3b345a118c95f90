//! `idle_rss`: peak resident memory of an idle `kin acp` holding one fresh session, against
//! the floor program (see `common::serve_floor_if_asked`) after its `initialize`.
//!
//! Spawn, `initialize`, `session/new` (cwd a temp dir, no MCP servers), wait for the answer,
//! then read `VmHWM` (peak RSS), `VmRSS` and `RssAnon` (private memory: heap and stacks, what
//! the process costs beyond the code and files it shares) from `/proc/<pid>/status`.
//!
//! Both binaries are read in full first. The kernel maps the code pages around each page a
//! program touches when they are in the page cache (fault-around), so without this the figure
//! depended on which parts of a freshly linked binary happened to be cached (7.3 vs 8.1 MiB for
//! the same kin); fully cached is the state of an installed binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::time::Duration;

use common::{summary, temp_dir, Kin};

const RUNS: usize = 20;

fn main() {
    common::serve_floor_if_asked();
    common::watchdog("idle_rss", Duration::from_secs(120));
    let mut peak = Vec::with_capacity(RUNS);
    let mut current = Vec::with_capacity(RUNS);
    let mut private = Vec::with_capacity(RUNS);
    let mut floor = Vec::with_capacity(RUNS);
    let mut floor_private = Vec::with_capacity(RUNS);
    for binary in [
        common::kin_binary(),
        std::env::current_exe().expect("own path").into(),
    ] {
        std::fs::read(&binary).unwrap_or_else(|e| panic!("reading {binary:?}: {e}"));
    }
    for _ in 0..RUNS {
        let home = temp_dir("kin-bench-home-");
        let cwd = temp_dir("kin-bench-cwd-");
        let mut kin = Kin::spawn(home.path(), cwd.path(), &[]);
        kin.initialize();
        kin.new_session(2, cwd.path());
        let pid = kin.pid();
        peak.push(common::proc_status_kb(pid, "VmHWM") as f64 / 1024.0);
        current.push(common::proc_status_kb(pid, "VmRSS") as f64 / 1024.0);
        private.push(common::proc_status_kb(pid, "RssAnon") as f64 / 1024.0);
        kin.finish();

        let mut program = Kin::spawn_floor(cwd.path());
        program.initialize();
        floor.push(common::proc_status_kb(program.pid(), "VmHWM") as f64 / 1024.0);
        floor_private.push(common::proc_status_kb(program.pid(), "RssAnon") as f64 / 1024.0);
        program.finish();
    }
    let (median, p10, p90) = summary(&mut peak);
    let (rss, _, _) = summary(&mut current);
    let (anon, anon_p10, anon_p90) = summary(&mut private);
    let (floor, floor_p10, floor_p90) = summary(&mut floor);
    let (floor_anon, _, _) = summary(&mut floor_private);
    println!(
        "idle_rss: peak RSS (VmHWM) median {median:.2} MiB (p10 {p10:.2}, p90 {p90:.2}; \
         VmRSS median {rss:.2} MiB; {RUNS} runs, release build; target <= 6 MiB)"
    );
    println!(
        "idle_rss: private memory (RssAnon) median {anon:.2} MiB (p10 {anon_p10:.2}, p90 \
         {anon_p90:.2}; target <= 2 MiB)"
    );
    println!(
        "idle_rss: floor peak RSS median {floor:.2} MiB (p10 {floor_p10:.2}, p90 {floor_p90:.2}); \
         floor RssAnon median {floor_anon:.2} MiB"
    );
    println!(
        "idle_rss: method: both binaries read in full (page cache), then spawn `kin acp` -> \
         initialize -> session/new answered -> read /proc/<pid>/status; the floor: spawn -> \
         initialize answered -> read"
    );
}

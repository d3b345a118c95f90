//! `confined_open`: what opening a workspace file confined beneath its root costs
//! (`tools::confined`: the root's handle, then `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS)`), next to a plain `File::open` of the same path; also the
//! `O_NOFOLLOW`-per-component walk used where `openat2` is missing, and a confined write
//! (temporary file + `renameat`) next to `std::fs::write`. Target: a confined open under 10 us.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use common::summary;
use kin::tools::confined;

const WARMUP: usize = 1_000;
const OPENS: usize = 50_000;
const WRITES: usize = 5_000;
/// Three directories deep, as a typical source file.
const FILE: &str = "src/tools/deep/file.rs";

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Median, p10 and p90 of `runs` timed calls of `one` (after warm-ups), in microseconds.
fn measure(runs: usize, mut one: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..WARMUP.min(runs) {
        one();
    }
    let mut samples: Vec<f64> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            one();
            us(start.elapsed())
        })
        .collect();
    summary(&mut samples)
}

fn report(what: &str, (median, p10, p90): (f64, f64, f64)) -> f64 {
    println!("confined_open: {what}: median {median:.2} us (p10 {p10:.2}, p90 {p90:.2})");
    median
}

fn main() {
    common::watchdog("confined_open", Duration::from_secs(300));
    let dir = common::temp_dir("kin-bench-confined-");
    let root = dir.path().canonicalize().expect("the temp dir");
    let relative = Path::new(FILE);
    std::fs::create_dir_all(root.join(relative).parent().expect("a parent")).expect("dirs");
    std::fs::write(root.join(relative), "fn main() {}\n").expect("the file");
    let absolute = root.join(relative);

    let plain = report(
        "File::open",
        measure(OPENS, || drop(File::open(&absolute).expect("open"))),
    );
    let confined = report(
        "confined open (openat2)",
        measure(OPENS, || {
            drop(confined::open_beneath(&root, relative).expect("confined open"))
        }),
    );
    let walk = report(
        "confined open (O_NOFOLLOW walk)",
        measure(OPENS, || {
            drop(confined::open_beneath_by_walk(&root, relative).expect("walk open"))
        }),
    );
    let content = vec![b'x'; 4096];
    let written = root.join("src/written.rs");
    let std_write = report(
        "std::fs::write 4 KiB",
        measure(WRITES, || {
            std::fs::write(&written, &content).expect("write")
        }),
    );
    let confined_write = report(
        "confined write 4 KiB (temp + renameat)",
        measure(WRITES, || {
            confined::write_beneath(&root, Path::new("src/written.rs"), &content)
                .expect("confined write")
        }),
    );
    println!(
        "confined_open: a confined open costs {confined:.2} us ({:.1}x File::open; the walk \
         fallback {walk:.2} us, {:.1}x); a confined write {:.1}x std::fs::write; method: \
         {OPENS} timed opens (and closes) of {FILE} after {WARMUP} warm-ups, {WRITES} writes; \
         release build; target: under 10 us per confined open",
        confined / plain,
        walk / plain,
        confined_write / std_write,
    );
    assert!(
        confined < 10.0,
        "a confined open costs {confined:.2} us, over 10 us"
    );
}

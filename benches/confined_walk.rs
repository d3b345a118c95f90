//! `confined_walk`: what the directory walk under `glob` and `grep` costs
//! (`tools::walk`: every directory opened from its parent's handle with `O_NOFOLLOW` and listed
//! through it, ignore rules read through the same handles) next to the `ignore` crate's walk it
//! replaced (directories opened by name), on a tree of 10,000 files in 110 directories with a
//! few `.gitignore` files. Both walks list the same entries (checked).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic fails the run

mod common;

use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{ms, summary};
use kin::tools::paths::Roots;
use kin::tools::private::PrivateFiles;
use kin::tools::walk::Walk;
use tokio_util::sync::CancellationToken;

const WARMUP: usize = 3;
const RUNS: usize = 40;
/// 10 top directories of 10 subdirectories of 100 files.
const TOP: usize = 10;
const SUB: usize = 10;
const FILES: usize = 100;

fn build(root: &Path) {
    std::fs::write(root.join(".gitignore"), "*.log\ntarget/\n").expect(".gitignore");
    for top in 0..TOP {
        let top_dir = root.join(format!("dir{top}"));
        std::fs::create_dir_all(&top_dir).expect("dir");
        std::fs::write(top_dir.join(".gitignore"), "*.tmp\n").expect(".gitignore");
        for sub in 0..SUB {
            let dir = top_dir.join(format!("sub{sub}"));
            std::fs::create_dir_all(&dir).expect("dir");
            for file in 0..FILES {
                std::fs::write(dir.join(format!("file{file}.rs")), "").expect("file");
            }
        }
    }
}

fn old_walk(root: &Path) -> usize {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .require_git(false)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_path(|a, b| a.cmp(b))
        .build()
        .flatten()
        .count()
}

fn confined_walk(roots: &Roots, root: &Path) -> usize {
    let mut count = 0;
    Walk::open(roots, &PrivateFiles::default(), root)
        .expect("open the walk")
        .run(&CancellationToken::new(), |_| {
            count += 1;
            ControlFlow::Continue(())
        });
    count
}

/// Median, p10 and p90 of `RUNS` timed walks (after warm-ups), in milliseconds.
fn measure(mut one: impl FnMut() -> usize) -> (f64, f64, f64) {
    for _ in 0..WARMUP {
        one();
    }
    let mut samples: Vec<f64> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(one());
            ms(start.elapsed())
        })
        .collect();
    summary(&mut samples)
}

fn report(what: &str, (median, p10, p90): (f64, f64, f64)) -> f64 {
    println!("confined_walk: {what}: median {median:.2} ms (p10 {p10:.2}, p90 {p90:.2})");
    median
}

fn main() {
    common::watchdog("confined_walk", Duration::from_secs(300));
    let dir = common::temp_dir("kin-bench-walk-");
    let root = dir.path().canonicalize().expect("the temp dir");
    build(&root);
    let roots = Roots::new(root.clone(), Vec::new());
    let entries = old_walk(&root);
    assert_eq!(
        entries,
        confined_walk(&roots, &root),
        "both walks list the same"
    );
    let old = report("ignore crate walk (by name)", measure(|| old_walk(&root)));
    let new = report(
        "confined walk (by handle)",
        measure(|| confined_walk(&roots, &root)),
    );
    println!(
        "confined_walk: the confined walk costs {new:.2} ms for {entries} entries ({:.2}x the \
         ignore crate's {old:.2} ms, {:.2} us per entry); method: {RUNS} timed walks of a tree of \
         {} files after {WARMUP} warm-ups, release build",
        new / old,
        new * 1e3 / entries as f64,
        TOP * SUB * FILES,
    );
}

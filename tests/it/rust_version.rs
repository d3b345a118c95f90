//! `rust-version` in Cargo.toml must be at least what every locked dependency declares:
//! otherwise a user on the stated minimum toolchain gets a build that cargo refuses.
//! Reads Cargo.lock through `cargo metadata --locked --offline` (the registry copies the
//! build already downloaded), for the host platform's dependency tree.

use std::process::Command;

use serde_json::Value;

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `1.89` or `1.89.0` as comparable numbers (a missing patch is 0).
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

#[test]
fn rust_version_covers_every_locked_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let host = run(&rustc, &["-vV"])
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc -vV names the host");
    let metadata: Value = serde_json::from_str(&run(
        &cargo,
        &[
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--offline",
            "--filter-platform",
            &host,
        ],
    ))
    .expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("a package list");
    let ours = packages
        .iter()
        .find(|p| p["name"] == env!("CARGO_PKG_NAME"))
        .expect("the kin package");
    let declared = ours["rust_version"]
        .as_str()
        .expect("Cargo.toml sets rust-version");
    let newer: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let needs = p["rust_version"].as_str()?;
            (version(needs) > version(declared))
                .then(|| format!("{} {} needs {needs}", p["name"], p["version"]))
        })
        .collect();
    assert!(
        newer.is_empty(),
        "Cargo.toml says rust-version = {declared:?}, but locked dependencies need more: {}",
        newer.join("; ")
    );
}

#[test]
fn versions_compare_numerically() {
    assert!(version("1.89") > version("1.88.0"));
    assert!(version("1.100") > version("1.99.9"));
    assert_eq!(version("1.89"), version("1.89.0"));
}

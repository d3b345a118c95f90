//! Link settings for the `kin` binary that need a look at the build machine.
//!
//! Release builds for Linux with glibc 2.36 or newer pack the executable's relative
//! relocations (`-z pack-relative-relocs`, DT_RELR): the dynamic loader then reads a few KiB
//! of relocation data at every start instead of ~0.7 MB. Older glibc cannot load such a
//! binary, so elsewhere (other systems, cross builds, unknown glibc) nothing changes.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native_glibc = var("TARGET") == var("HOST")
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if var("PROFILE") == "release" && native_glibc && glibc_has_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// Whether the build machine's glibc (`getconf GNU_LIBC_VERSION`, e.g. `glibc 2.36`) is 2.36+.
fn glibc_has_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("glibc ").unwrap_or("");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}

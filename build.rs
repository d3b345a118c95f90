//! Link settings for the `kin` binary that need a look at the build machine.
//!
//! Release builds for Linux with glibc 2.36 or newer pack the executable's relative
//! relocations (`-z pack-relative-relocs`, DT_RELR): the dynamic loader then reads a few KiB
//! of relocation data at every start instead of ~0.7 MB. Older glibc cannot load such a
//! binary, so elsewhere (other systems, cross builds, unknown glibc) nothing changes; nor when
//! a linker is chosen for the target (`cargo zigbuild` linking against an older glibc for the
//! release archives: the build machine's glibc then says nothing of the target's).
//!
//! Release builds linked by rustc's bundled `lld` (the default for x86_64 Linux since Rust
//! 1.90) also place the functions listed in `link/startup-symbols.txt` side by side
//! (`--symbol-ordering-file`). Those are the few hundred functions kin runs up to an answered
//! `session/new`; left where the compiler emits them they are spread over almost every 64 KiB
//! of the 7.5 MB of code, and the kernel maps code in 64 KiB steps (fault-around), so an idle
//! kin had ~4.6 MB of its code resident and took ~75 page faults for it. Side by side they
//! fill ~15 such steps. Names the list has but the binary lacks (after a toolchain or
//! dependency upgrade) are skipped silently; `link/startup-symbols.sh` regenerates the list.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/startup-symbols.txt");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let native_glibc = var("TARGET") == var("HOST")
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if var("PROFILE") != "release" {
        return;
    }
    if native_glibc && var("RUSTC_LINKER").is_empty() && glibc_has_relr() {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join("link/startup-symbols.txt");
    if list.is_file() && links_with_bundled_lld(&var) {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether the build machine's glibc (`getconf GNU_LIBC_VERSION`, e.g. `glibc 2.36`) is 2.36+.
fn glibc_has_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("glibc ").unwrap_or("");
    version_at_least(version, (2, 36))
}

/// Whether the binary is linked by the `lld` rustc ships (which understands
/// `--symbol-ordering-file`; GNU ld does not): x86_64 Linux with rustc 1.90 or newer, and no
/// linker chosen by the user (`target.<triple>.linker`, `-C linker=`, `-C linker-features=`,
/// `-C link-arg=-fuse-ld=...`).
fn links_with_bundled_lld(var: &dyn Fn(&str) -> String) -> bool {
    if var("TARGET") != "x86_64-unknown-linux-gnu"
        || !var("RUSTC_LINKER").is_empty()
        || ["linker", "fuse-ld"]
            .iter()
            .any(|flag| var("CARGO_ENCODED_RUSTFLAGS").contains(flag))
    {
        return false;
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // `rustc 1.95.0 (59807616e 2026-04-14)`
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().nth(1).unwrap_or("");
    version_at_least(version, (1, 90))
}

/// Whether a dotted version (`2.36`, `1.95.0-nightly`) is at least `(major, minor)`.
fn version_at_least(version: &str, least: (u32, u32)) -> bool {
    let mut parts = version
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= least
}

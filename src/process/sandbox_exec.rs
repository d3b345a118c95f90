//! The sandbox launcher: `kin sandbox-exec --policy JSON -- PROGRAM ARGS...` confines itself
//! with Landlock as the [`Policy`] says and then execs the program, which (with everything it
//! starts) stays confined for good: a Landlock domain is inherited across fork and exec and
//! can only be narrowed. kin starts every confined process through it, locally and in an
//! editor's terminal alike, so no code runs between fork and exec in kin itself.
//!
//! What is confined: creating, writing, truncating, renaming, linking and removing files
//! (Landlock's write rights) outside the policy's writable paths; reading the policy's
//! unreadable files (kin's `mcp-token`; other reads and execution stay as the user's); when
//! the policy turns the network off, TCP connect and bind; and, where the kernel has Landlock
//! ABI 6, connecting to abstract Unix sockets and signalling processes outside the sandbox.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use std::path::PathBuf;

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath,
    RestrictionStatus, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetError, RulesetStatus,
    Scope, ABI,
};

use super::sandbox_policy::{Policy, DEVICES};
use super::sandbox_unreadable::{open_for_rule, readable_except};

/// The hidden subcommand.
pub(crate) const ARG: &str = "sandbox-exec";
/// The launcher's exit code when it did not run the program (a shell's "cannot execute").
const NOT_RUN: i32 = 126;

/// The write rights kin takes away outside the writable set: every right that changes the
/// file tree (Landlock ABI 4's set; device ioctls are not writes and stay as they are).
pub(crate) fn write_rights() -> landlock::BitFlags<AccessFs> {
    AccessFs::from_write(ABI::V4)
}

/// Called early in `main`: when this process was started as the launcher, confines itself and
/// execs the program (or exits with an error); otherwise returns.
pub fn init() {
    let mut args = std::env::args_os().skip(1);
    if args.next().is_none_or(|arg| arg != ARG) {
        return;
    }
    let args: Vec<OsString> = args.collect();
    std::process::exit(launch(&args));
}

/// Parses `--policy JSON -- PROGRAM ARGS...`, confines, execs; returns only on failure.
fn launch(args: &[OsString]) -> i32 {
    let (policy, command) = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("kin {ARG}: {message}");
            return NOT_RUN;
        }
    };
    match confine(&policy) {
        Ok(status) if status.ruleset == RulesetStatus::NotEnforced && policy.required => {
            eprintln!(
                "kin: refused to run {}: the sandbox is required (`[sandbox] mode = \"required\"`) \
                 but this kernel does not enforce Landlock",
                command[0].to_string_lossy()
            );
            return NOT_RUN;
        }
        Ok(status) if status.ruleset == RulesetStatus::NotEnforced => {
            eprintln!("kin: this kernel does not enforce Landlock: running unconfined");
        }
        Ok(_) => {}
        Err(error) => {
            eprintln!(
                "kin: refused to run {}: the sandbox could not be set up: {error}",
                command[0].to_string_lossy()
            );
            return NOT_RUN;
        }
    }
    let error = std::process::Command::new(&command[0])
        .args(&command[1..])
        .exec();
    eprintln!(
        "kin: could not run {}: {error}",
        command[0].to_string_lossy()
    );
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        NOT_RUN
    }
}

fn parse(args: &[OsString]) -> Result<(Policy, &[OsString]), String> {
    let usage = "usage: kin sandbox-exec --policy JSON -- PROGRAM [ARGS...]";
    match args {
        [flag, json, dashes, command @ ..]
            if flag == "--policy" && dashes == "--" && !command.is_empty() =>
        {
            let json = json.to_str().ok_or("the policy is not UTF-8")?;
            let policy = serde_json::from_str(json)
                .map_err(|error| format!("the policy is not valid: {error}"))?;
            Ok((policy, command))
        }
        _ => Err(usage.to_owned()),
    }
}

/// Restricts this thread, and so everything it execs and starts, to `policy`: its writes,
/// its network, the files it may not read, and (Landlock ABI 6, where the kernel has it)
/// abstract Unix sockets and signals outside its own sandbox.
pub(crate) fn confine(policy: &Policy) -> Result<RestrictionStatus, RulesetError> {
    let write = write_rights();
    let level = if policy.required {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(write)?;
    if !policy.network {
        ruleset = ruleset.handle_access(AccessNet::from_all(ABI::V4))?;
    }
    let readable = (!policy.unreadable.is_empty()).then(|| readable_paths(policy));
    if readable.is_some() {
        ruleset = ruleset.handle_access(AccessFs::ReadFile)?;
    }
    // Scopes are an addition of ABI 6: used where the kernel has them, in either mode.
    let ruleset = ruleset
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .set_compatibility(level);
    let mut created = ruleset
        .create()?
        .add_rules(path_beneath_rules(&policy.writable, write))?
        .add_rules(path_beneath_rules(DEVICES, write))?;
    for path in readable.iter().flatten() {
        // Gone or swapped for a symlink since it was listed: nothing to grant.
        if let Some(file) = open_for_rule(path) {
            created = created.add_rule(PathBeneath::new(file, AccessFs::ReadFile))?;
        }
    }
    created.restrict_self()
}

/// Where `policy` may read: everything but its unreadable files, and its writable paths that
/// hold none of them (so that files made there later are readable too).
fn readable_paths(policy: &Policy) -> Vec<PathBuf> {
    let (mut readable, warnings) = readable_except(&policy.unreadable);
    for warning in warnings {
        eprintln!("{warning}");
    }
    readable.extend(
        policy
            .writable
            .iter()
            .filter(|top| {
                !policy
                    .unreadable
                    .iter()
                    .any(|secret| secret.starts_with(top))
            })
            .cloned(),
    );
    readable
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn parses_the_policy_and_the_command() {
        let given = args(&[
            "--policy",
            r#"{"writable":["/w"],"network":false,"required":true}"#,
            "--",
            "bash",
            "-c",
            "true",
        ]);
        let (policy, command) = parse(&given).unwrap();
        assert_eq!(policy.writable, vec![std::path::PathBuf::from("/w")]);
        assert!(!policy.network && policy.required);
        assert_eq!(command, &args(&["bash", "-c", "true"])[..]);
    }

    #[test]
    fn refuses_what_is_not_a_launch() {
        assert!(parse(&args(&["--policy", "{}", "--"])).is_err());
        assert!(parse(&args(&["bash"])).is_err());
        let error = parse(&args(&["--policy", "nope", "--", "x"])).unwrap_err();
        assert!(error.contains("not valid"), "{error}");
    }
}

//! Telling a sandbox refusal from an ordinary permission error. The kernel answers a confined
//! write with the same EACCES as a file mode would, so a failed command's output is read for
//! "Permission denied" lines that name a path outside the writable set (or, with the network
//! off, a refused connection) and that kin itself could write (so a file's own mode, or a
//! kernel file no one may write, gets no note); the note added to its result says it was
//! kin's sandbox, names the path, and says how to allow it.

use std::path::{Path, PathBuf};

use super::sandbox_policy::Policy;

/// Error texts a refused write or connect shows up as.
const DENIED: [&str; 2] = ["Permission denied", "Operation not permitted"];

/// The note for a failed command's `output`, run in `cwd` under `policy`; `None` when nothing
/// in it points at the sandbox.
pub(crate) fn explain(output: &str, policy: &Policy, cwd: &Path) -> Option<String> {
    let denied = denied_lines(output);
    if let Some(path) = refused(&denied, policy, cwd).first() {
        return Some(format!(
            "[kin's sandbox refused this: {} is outside what commands may write ({}). This is \
             not a file permission problem; if the user wants commands to write there, they \
             can add it to `[sandbox] writable` in kin's config.]",
            path.display(),
            listed(policy)
        ));
    }
    let connect = denied
        .iter()
        .any(|line| line.to_ascii_lowercase().contains("connect"));
    (!policy.network && connect).then(|| {
        "[kin's sandbox refused this: the network is off for commands in this session (TCP \
         connect and bind are refused); `[sandbox] network = true` in kin's config turns it on.]"
            .to_owned()
    })
}

/// The note for what a child agent `agent`, confined to `policy` and started in `cwd`, wrote
/// before it failed (its stderr, an error it answered); `None` when nothing in it names a
/// path the sandbox refused.
pub(crate) fn explain_child(
    output: &str,
    policy: &Policy,
    cwd: &Path,
    agent: &str,
) -> Option<String> {
    let denied = denied_lines(output);
    let setting = format!(
        "add it to `writable` in `[acp_agents.{agent}]` of kin's config, or set `sandbox = \
         false` there to leave the child to its own sandbox"
    );
    match refused(&denied, policy, cwd).first() {
        Some(path) => Some(format!(
            "[kin's sandbox refused this: {} is outside what the ACP child `{agent}` may write; \
             {setting}.]",
            path.display(),
        )),
        // An error that names no path (`Permission denied (os error 13)`): the sandbox may be
        // the cause, and what the child may write is all kin can say.
        None if denied.iter().any(|line| candidates(line).is_empty()) => Some(format!(
            "[kin's sandbox may have refused this: the ACP child `{agent}` may write only \
             beneath {}; if it keeps state elsewhere, {setting}.]",
            listed(policy)
        )),
        None => None,
    }
}

fn denied_lines(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|line| DENIED.iter().any(|text| line.contains(text)))
        .collect()
}

/// The paths the `denied` lines name that `policy` does not let be written, once each.
fn refused(denied: &[&str], policy: &Policy, cwd: &Path) -> Vec<PathBuf> {
    denied
        .iter()
        .flat_map(|line| candidates(line))
        .map(|path| cwd.join(path))
        // A file commands may not read (kin's `mcp-token`) was refused for its reading.
        .filter(|path| {
            !policy
                .unreadable
                .contains(&super::sandbox_policy::canonical(path))
        })
        .filter(|path| !policy.allows_write(path) && unconfined_may_write(path))
        .fold(Vec::new(), |mut paths, path| {
            if !paths.contains(&path) {
                paths.push(path);
            }
            paths
        })
}

fn listed(policy: &Policy) -> String {
    let writable: Vec<String> = policy
        .writable
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    writable.join(", ")
}

/// Whether kin itself, unconfined, may write `path`: else the refusal was the file's own
/// (its mode, a read-only file of the kernel's), not the sandbox's. An existing regular file
/// is opened for writing (nothing is written or truncated: `access` would say yes to root for
/// a read-only sysfs file); otherwise the nearest existing directory is asked whether entries
/// may be made in it.
fn unconfined_may_write(path: &Path) -> bool {
    use nix::unistd::{access, AccessFlags};
    use std::os::unix::fs::OpenOptionsExt;
    let path = super::sandbox_policy::canonical(path);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.is_file() => std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
            .open(&path)
            .is_ok(),
        Ok(meta) if meta.is_dir() => access(&path, AccessFlags::W_OK | AccessFlags::X_OK).is_ok(),
        Ok(_) => false,
        Err(_) => path
            .ancestors()
            .skip(1)
            .find(|dir| dir.is_dir())
            .is_some_and(|dir| access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_ok()),
    }
}

/// The paths a "Permission denied" line may name: quoted text, and words that look like paths,
/// as in `bash: /x/y: Permission denied` or `touch: cannot touch '/x/y': Permission denied`.
fn candidates(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    // Each kind of quote, `‘…’` as one pair.
    for quotes in [&['\''][..], &['"'], &['`'], &['‘', '’']] {
        let parts: Vec<&str> = line.split(quotes).collect();
        found.extend(parts.iter().skip(1).step_by(2).copied());
    }
    found.extend(
        line.split([':', ' ']).map(str::trim).filter(|word| {
            word.starts_with('/') || word.starts_with("./") || word.starts_with("../")
        }),
    );
    found.retain(|path| !path.is_empty() && !path.contains('\n'));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(network: bool) -> Policy {
        Policy {
            writable: vec!["/ws".into(), "/tmp/kin-1/s".into()],
            network,
            required: false,
            unreadable: Vec::new(),
        }
    }

    #[test]
    fn names_a_refused_path_outside_the_writable_set() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().canonicalize().unwrap();
        let cwd = outside.join("ws");
        std::fs::create_dir(&cwd).unwrap();
        let output = format!("bash: {}/out.txt: Permission denied\n", outside.display());
        let note = explain(&output, &policy(true), &cwd).unwrap();
        let expected = format!("sandbox refused this: {}/out.txt", outside.display());
        assert!(note.contains(&expected), "{note}");
        assert!(note.contains("/ws, /tmp/kin-1/s"), "{note}");
        let output = format!(
            "mkdir: cannot create directory ‘{}/d’: Permission denied",
            outside.display()
        );
        let note = explain(&output, &policy(true), &cwd).unwrap();
        let expected = format!("refused this: {}/d is outside", outside.display());
        assert!(note.contains(&expected), "{note}");
        let output = "touch: cannot touch '../up.txt': Permission denied";
        let note = explain(output, &policy(true), &cwd).unwrap();
        assert!(note.contains("/ws/../up.txt"), "{note}");
    }

    #[test]
    fn says_nothing_of_a_file_kin_itself_could_not_write() {
        // A kernel file no one may write (root included): the refusal is not the sandbox's.
        let kernel = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size";
        if Path::new(kernel).is_file() {
            let output = format!("bash: {kernel}: Permission denied");
            assert_eq!(explain(&output, &policy(true), Path::new("/ws")), None);
        }
    }

    #[test]
    fn says_nothing_of_an_ordinary_permission_error_inside() {
        let cwd = Path::new("/ws");
        let output = "bash: ./locked.txt: Permission denied\nbash: /dev/null: Permission denied";
        assert_eq!(explain(output, &policy(true), cwd), None);
        assert_eq!(explain("all fine", &policy(false), cwd), None);
    }

    #[test]
    fn a_child_is_told_the_path_and_its_own_setting() {
        let output = "Error: failed to initialize sqlite state runtime under /home/u/.codex: \
            mkdir /home/u/.codex/tmp: Permission denied (os error 13)";
        let note = explain_child(output, &policy(true), Path::new("/ws"), "codex").unwrap();
        assert!(note.contains("refused this: /home/u/.codex"), "{note}");
        assert!(note.contains("`[acp_agents.codex]`"), "{note}");
        assert!(note.contains("sandbox = false"), "{note}");
        let inside = "open /ws/x: Permission denied";
        assert_eq!(
            explain_child(inside, &policy(true), Path::new("/ws"), "c"),
            None
        );
        let pathless = "Error: Permission denied (os error 13)";
        let note = explain_child(pathless, &policy(true), Path::new("/ws"), "c").unwrap();
        assert!(note.contains("may have refused this"), "{note}");
        assert!(note.contains("beneath /ws, /tmp/kin-1/s"), "{note}");
    }

    #[test]
    fn names_the_network_when_it_is_off() {
        let output = "connect: Permission denied\n";
        let note = explain(output, &policy(false), Path::new("/ws")).unwrap();
        assert!(note.contains("network is off"), "{note}");
        assert_eq!(explain(output, &policy(true), Path::new("/ws")), None);
    }
}

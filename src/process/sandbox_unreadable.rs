//! Files a confined process may not read (kin's `mcp-token`: whoever holds it can start
//! unconfined tasks). Landlock only grants, so "everything but X" is built as grants: read
//! beneath every entry of `/` except the one leading to X, and so on down to X's siblings.
//! Entries are opened without following symlinks, and a symlink is never granted: a link is
//! read where it points, which is granted (or not) by its own place in the tree.

use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An ancestor with more entries than this is not split (its whole tree stays readable and a
/// warning says so): the launcher's cost per command must stay small.
const MAX_ENTRIES: usize = 20_000;

/// The paths beneath which reading stays allowed so that everything but `hidden` (resolved,
/// absolute) is readable, and the warnings for hidden paths that could not be split off.
pub(crate) fn readable_except(hidden: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
    let mut granted = vec![PathBuf::from("/")];
    let mut warnings = Vec::new();
    for secret in hidden.iter().filter(|path| path.is_absolute()) {
        while let Some(at) = granted.iter().position(|top| secret.starts_with(top)) {
            let top = granted.swap_remove(at);
            if top == *secret {
                break;
            }
            match entries(&top) {
                Ok(children) => granted.extend(children),
                Err(why) => {
                    warnings.push(format!(
                        "kin: {} stays readable to this command: {why}",
                        secret.display()
                    ));
                    granted.push(top);
                    break;
                }
            }
        }
    }
    (granted, warnings)
}

/// The entries of `dir` that are not symlinks.
fn entries(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let listing =
        std::fs::read_dir(dir).map_err(|error| format!("listing {}: {error}", dir.display()))?;
    let mut found = Vec::new();
    for entry in listing.flatten() {
        if found.len() == MAX_ENTRIES {
            return Err(format!("{} has over {MAX_ENTRIES} entries", dir.display()));
        }
        if entry.file_type().is_ok_and(|kind| !kind.is_symlink()) {
            found.push(entry.path());
        }
    }
    Ok(found)
}

/// `path` opened as a handle for a Landlock rule, without following a symlink; `None` when it
/// is gone or is a symlink (swapped in since it was listed) or a socket (nothing to read).
pub(crate) fn open_for_rule(path: &Path) -> Option<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let kind = file.metadata().ok()?.file_type();
    (!kind.is_symlink() && !kind.is_socket()).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_but_the_hidden_file_stays_granted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let data = root.join("home/.local/share/kin");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(root.join("home/project")).unwrap();
        std::fs::write(data.join("mcp-token"), "t").unwrap();
        std::fs::write(data.join("index"), "i").unwrap();
        std::os::unix::fs::symlink("/", root.join("home/to-root")).unwrap();
        let (granted, warnings) = readable_except(&[data.join("mcp-token")]);
        assert!(warnings.is_empty(), "{warnings:?}");
        let covers = |path: &Path| granted.iter().any(|top| path.starts_with(top));
        assert!(!covers(&data.join("mcp-token")));
        assert!(covers(&data.join("index")));
        assert!(covers(&root.join("home/project/src/main.rs")));
        assert!(covers(Path::new("/usr/lib")));
        assert!(
            !granted.contains(&root.join("home/to-root")),
            "a symlink is never granted"
        );
        assert!(!granted.iter().any(|top| data.starts_with(top)));
    }
}

//! Writable directories that do not exist yet, made (0700) before a process is confined: a
//! Landlock rule needs a path that exists, so a `[sandbox] writable` entry or a child's state
//! directory (`~/.claude` on a first run) would otherwise never be writable.

use std::path::{Path, PathBuf};

/// Makes each of `paths` that is missing a directory, with its missing parents, mode 0700. A
/// directory that cannot be made is left out with a warning: the process then meets the
/// sandbox's refusal, which names the path.
pub(crate) fn make_missing(paths: &[impl AsRef<Path>]) {
    use std::os::unix::fs::DirBuilderExt;
    for path in paths.iter().map(AsRef::as_ref) {
        // A dangling symlink is not followed to make its target.
        if path.symlink_metadata().is_ok() {
            continue;
        }
        let made = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path);
        if let Err(error) = made {
            tracing::warn!(path = %path.display(), %error, "could not make a writable directory");
        }
    }
}

/// `paths` without those another user owns (by the entry itself, a symlink not followed): a
/// fixed name in a shared directory (`/tmp/cc-socks-<uid>`) that someone else made first, as a
/// directory or as a link to a place of yours, is not made writable.
pub(crate) fn owned(paths: &[PathBuf]) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::getuid().as_raw();
    paths
        .iter()
        .filter(|path| match path.symlink_metadata() {
            Ok(meta) if meta.uid() != me => {
                tracing::warn!(path = %path.display(), "not made writable: another user owns it");
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keeps_what_this_user_owns() {
        let dir = tempfile::tempdir().unwrap();
        let mine = dir.path().join("mine");
        let missing = dir.path().join("missing");
        std::fs::create_dir(&mine).unwrap();
        let paths = vec![mine, missing];
        assert_eq!(owned(&paths), paths);
        // The root directory is root's: kept only when the tests run as root.
        let root = owned(&[PathBuf::from("/")]);
        assert_eq!(root.is_empty(), !nix::unistd::getuid().is_root());
    }

    #[test]
    fn makes_missing_directories_private_and_leaves_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b");
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        make_missing(&[&deep, &file]);
        assert!(deep.is_dir() && file.is_file());
        for made in [&deep, &dir.path().join("a")] {
            let mode = std::fs::metadata(made).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", made.display());
        }
    }
}

//! Writable directories that do not exist yet, made (0700) before a process is confined: a
//! Landlock rule needs a path that exists, so a `[sandbox] writable` entry or a child's state
//! directory (`~/.claude` on a first run) would otherwise never be writable.

use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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

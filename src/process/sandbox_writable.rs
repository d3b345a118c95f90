//! The writable set of a confined process, as Landlock is given it: the roots as they were
//! resolved when the session or child opened, and kin's own directories (its config and data
//! directories) carved out of them.
//!
//! Landlock grants by allow-list and cannot take a directory back out of one it grants. So a
//! root that holds one of kin's directories (a session opened in `$HOME`, a dotfiles
//! repository) is not granted whole: its entries are granted one by one, except the one that
//! leads to kin's directory, which is split the same way, down to kin's directory, which is
//! left out. Symbolic links among those entries are not granted (a rule on a link would grant
//! whatever it points to). The limit: the split directories themselves are not writable, so a
//! confined process cannot create, rename or delete entries directly in them (a new file at
//! the top of `$HOME`); entries made there later by someone else become writable from the next
//! command on.

use std::path::{Path, PathBuf};

use super::sandbox_policy::canonical;

/// `top` (resolved) as writable paths, without `own` (kin's directories, resolved) and
/// whatever lies beneath them, appended to `out`.
pub(crate) fn carve(top: &Path, own: &[PathBuf], out: &mut Vec<PathBuf>) {
    if own.iter().any(|dir| top.starts_with(dir)) {
        return;
    }
    if !own.iter().any(|dir| dir.starts_with(top)) {
        push_new(out, top.to_owned());
        return;
    }
    // `top` holds one of kin's directories: each entry but the way there.
    let Ok(entries) = std::fs::read_dir(top) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_symlink() => continue,
            Ok(kind) if kind.is_dir() => carve(&path, own, out),
            Ok(_) => push_new(out, path),
            Err(_) => continue,
        }
    }
}

fn push_new(out: &mut Vec<PathBuf>, path: PathBuf) {
    if !out.contains(&path) {
        out.push(path);
    }
}

/// A root as fixed when its session or child opened (`fixed`, already resolved) still resolves
/// to itself: `false` once it, or a directory on the way to it, was swapped for a symbolic
/// link (a grant by name would follow the link).
pub(crate) fn still_fixed(fixed: &Path) -> bool {
    canonical(fixed) == fixed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_holding_kins_directory_is_granted_around_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = canonical(dir.path());
        let data = home.join(".local/share/kin");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(home.join(".local/bin")).unwrap();
        std::fs::create_dir_all(home.join("src")).unwrap();
        std::fs::write(home.join(".bashrc"), "").unwrap();
        std::os::unix::fs::symlink("/etc", home.join("link")).unwrap();
        let mut out = Vec::new();
        carve(&home, std::slice::from_ref(&data), &mut out);
        out.sort();
        assert_eq!(
            out,
            [
                home.join(".bashrc"),
                home.join(".local/bin"),
                home.join("src")
            ]
        );
        // Beneath kin's directory, nothing; beside it, the whole root.
        let mut out = Vec::new();
        carve(
            &data.join("sessions"),
            std::slice::from_ref(&data),
            &mut out,
        );
        assert!(out.is_empty());
        carve(&home.join("src"), std::slice::from_ref(&data), &mut out);
        assert_eq!(out, [home.join("src")]);
    }

    #[test]
    fn a_root_swapped_for_a_link_is_no_longer_fixed() {
        let dir = tempfile::tempdir().unwrap();
        let base = canonical(dir.path());
        let root = base.join("ws");
        std::fs::create_dir(&root).unwrap();
        assert!(still_fixed(&root));
        std::fs::remove_dir(&root).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), &root).unwrap();
        assert!(!still_fixed(&root));
    }
}

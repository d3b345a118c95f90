//! Large prompt payloads (images, attached files) beside the session log, in
//! `<id>.blobs/<name>`, the name the BLAKE3 hash of the bytes: content-addressed, so the JSONL
//! log names them in a few bytes and the same payload sent twice is stored once. (Logs written
//! before named them by SHA-256; such a name reads the same.)

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The blob directory of the log at `log_path` (`<id>.jsonl` -> `<id>.blobs`).
pub(crate) fn dir_of(log_path: &Path) -> PathBuf {
    log_path.with_extension("blobs")
}

/// The name of a blob holding `bytes`: their BLAKE3 hash in lowercase hex.
pub(crate) fn name_of(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Stores `bytes` in `dir` and returns its name ([`name_of`]). Written to a temporary file and
/// renamed, so a blob file is always whole; one that exists already is left as it is. Blocks
/// (async callers run it on the blocking pool); the line that names the blob is logged only
/// after it returns, so a log never names a blob that was not written.
pub(crate) fn put(dir: &Path, bytes: &[u8]) -> io::Result<String> {
    let name = name_of(bytes);
    let path = dir.join(&name);
    if path.exists() {
        return Ok(name);
    }
    fs::create_dir_all(dir)?;
    // A random name, made anew: two stores of the same bytes at once never share one.
    let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut file = fs::File::create_new(&tmp)?;
    let written = file.write_all(bytes).and_then(|()| fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map(|()| name)
}

fn is_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Gives `to` every blob of `from` (hard links, else copies), for a fork whose seed names the
/// parent's blobs. Best effort: a blob that cannot be shared becomes a placeholder later.
pub(crate) fn share(from: &Path, to: &Path) {
    let Ok(entries) = fs::read_dir(from) else {
        return;
    };
    if fs::create_dir_all(to).is_err() {
        return;
    }
    for entry in entries.flatten() {
        let name = entry.file_name();
        let target = to.join(&name);
        if name.to_string_lossy().starts_with('.') || target.exists() {
            continue;
        }
        if fs::hard_link(entry.path(), &target).is_err() {
            let _ = fs::copy(entry.path(), &target);
        }
    }
}

/// Reads blob `name` from `dir`, which its record says holds `size` bytes; `None` when it is
/// missing or the name is not 64 hex digits (a log edited by hand must not reach outside the
/// directory), or when it is not a regular file of `dir` (a symlink put there is not followed)
/// or is larger than its record says (a blob is named by its content, so a larger file is
/// not the one recorded; it is not read at all).
pub(crate) fn get(dir: &Path, name: &str, size: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if !is_name(name) {
        return None;
    }
    let path = dir.join(name);
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > size {
        tracing::warn!(
            "blob {} is not a regular file of at most the {size} bytes its record says; not read",
            path.display()
        );
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(size).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Reads blob `name` (of `size` bytes) as text (`None` when missing or not UTF-8).
pub(crate) fn get_text(dir: &Path, name: &str, size: u64) -> Option<String> {
    get(dir, name, size).and_then(|bytes| String::from_utf8(bytes).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_stored_once_under_its_hash_and_read_back() {
        let home = tempfile::tempdir().unwrap();
        let dir = dir_of(&home.path().join("s1.jsonl"));
        let name = put(&dir, b"abc").unwrap();
        assert_eq!(
            name,
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_eq!(put(&dir, b"abc").unwrap(), name);
        assert_eq!(get(&dir, &name, 3).unwrap(), b"abc");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(get(&dir, "../s1.jsonl", 3).is_none());
        assert!(get(&dir, &"0".repeat(64), 3).is_none());
        // A blob swapped for a symlink is not followed.
        let secret = home.path().join("secret");
        std::fs::write(&secret, "secret").unwrap();
        let swapped = "1".repeat(64);
        std::os::unix::fs::symlink(&secret, dir.join(&swapped)).unwrap();
        assert!(get(&dir, &swapped, 3).is_none());
        let fork = dir_of(&home.path().join("s2.jsonl"));
        share(&dir, &fork);
        assert_eq!(get(&fork, &name, 3).unwrap(), b"abc");
    }

    #[test]
    fn a_blob_larger_than_its_record_says_is_not_read() {
        let home = tempfile::tempdir().unwrap();
        let dir = dir_of(&home.path().join("s1.jsonl"));
        let name = put(&dir, b"abc").unwrap();
        // Grown since (by hand, or by another program): not the blob its record names.
        std::fs::write(dir.join(&name), vec![b'x'; 1024 * 1024]).unwrap();
        assert_eq!(get(&dir, &name, 3), None);
        assert!(
            get(&dir, &name, 1024 * 1024).is_some(),
            "a record of that size reads it"
        );
    }
}

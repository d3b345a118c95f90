//! Large prompt payloads (images, attached files) beside the session log, in
//! `<id>.blobs/<sha256>`: content-addressed, so the JSONL log names them in a few bytes and
//! the same payload sent twice is stored once.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use ring::digest::{digest, SHA256};

/// The blob directory of the log at `log_path` (`<id>.jsonl` -> `<id>.blobs`).
pub(crate) fn dir_of(log_path: &Path) -> PathBuf {
    log_path.with_extension("blobs")
}

/// The lowercase hex SHA-256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let hash = digest(&SHA256, bytes);
    let mut hex = String::with_capacity(64);
    for byte in hash.as_ref() {
        hex.push_str(&format!("{byte:02x}"));
    }
    hex
}

/// Stores `bytes` in `dir` and returns its name (its SHA-256). Written to a temporary file and
/// renamed, so a blob file is always whole; one that exists already is left as it is.
pub(crate) fn put(dir: &Path, bytes: &[u8]) -> io::Result<String> {
    let name = sha256_hex(bytes);
    let path = dir.join(&name);
    if path.exists() {
        return Ok(name);
    }
    fs::create_dir_all(dir)?;
    let mut tmp = tempfile_in(dir, &name)?;
    tmp.1.write_all(bytes)?;
    drop(tmp.1);
    fs::rename(&tmp.0, &path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp.0);
    })?;
    Ok(name)
}

fn tempfile_in(dir: &Path, name: &str) -> io::Result<(PathBuf, fs::File)> {
    let path = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let file = fs::File::create(&path)?;
    Ok((path, file))
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

/// Reads blob `name` from `dir`; `None` when it is missing or the name is not a SHA-256 (a
/// log edited by hand must not reach outside the directory).
pub(crate) fn get(dir: &Path, name: &str) -> Option<Vec<u8>> {
    if name.len() != 64 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    fs::read(dir.join(name)).ok()
}

/// Reads blob `name` as text (`None` when missing or not UTF-8).
pub(crate) fn get_text(dir: &Path, name: &str) -> Option<String> {
    get(dir, name).and_then(|bytes| String::from_utf8(bytes).ok())
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
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(put(&dir, b"abc").unwrap(), name);
        assert_eq!(get(&dir, &name).unwrap(), b"abc");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(get(&dir, "../s1.jsonl").is_none());
        assert!(get(&dir, &"0".repeat(64)).is_none());
        let fork = dir_of(&home.path().join("s2.jsonl"));
        share(&dir, &fork);
        assert_eq!(get(&fork, &name).unwrap(), b"abc");
    }
}

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
    let tag = format!("{name}.{}", next_tmp());
    let (tmp, mut file) = tempfile_in(dir, &tag)?;
    let written = file.write_all(bytes).and_then(|()| fs::rename(&tmp, &path));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map(|()| name)
}

/// A number for this process's next temporary file: two stores at once never share one.
fn next_tmp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn is_name(name: &str) -> bool {
    name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit())
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

/// Reads blob `name` from `dir`; `None` when it is missing or the name is
/// not 64 hex digits (a log edited by hand must not reach outside the directory).
pub(crate) fn get(dir: &Path, name: &str) -> Option<Vec<u8>> {
    if !is_name(name) {
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
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
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

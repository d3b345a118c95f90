//! Large prompt payloads (images, attached files) beside the session log, in
//! `<id>.blobs/<name>`, the name the BLAKE3 hash of the bytes: content-addressed, so the JSONL
//! log names them in a few bytes and the same payload sent twice is stored once. (Logs written
//! before named them by SHA-256; such a name reads the same.)

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;

use super::blob_writes;
use crate::sync::lock;

/// The blob directory of the log at `log_path` (`<id>.jsonl` -> `<id>.blobs`).
pub(crate) fn dir_of(log_path: &Path) -> PathBuf {
    log_path.with_extension("blobs")
}

/// The name of a blob holding `bytes`: their BLAKE3 hash in lowercase hex. BLAKE3 rather than
/// SHA-256 because a pasted image is megabytes and the prompt waits for its name: ~1.3-1.6 ms for
/// 6.7 MB here, against ~4.8 ms.
pub(crate) fn name_of(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Payloads at least this long are hashed while they are written (on another thread), not
/// before: a pasted image is megabytes, and the prompt waits for both.
const OVERLAP_FROM: usize = 256 * 1024;

/// Stores `bytes` in `dir` and returns its name ([`name_of`]). Written to a temporary file and
/// renamed, so a blob file is always whole; one that exists already is left as it is.
pub(crate) fn put(dir: &Path, bytes: &[u8]) -> io::Result<String> {
    fs::create_dir_all(dir)?;
    let tag = format!("{}.{}", bytes.len(), next_tmp());
    let (name, tmp) = if bytes.len() >= OVERLAP_FROM {
        std::thread::scope(|scope| {
            let writing = scope.spawn(|| write_tmp(dir, &tag, bytes));
            let name = name_of(bytes);
            let tmp = writing
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the blob writer panicked")));
            (name, tmp)
        })
    } else {
        let name = name_of(bytes);
        if dir.join(&name).exists() {
            return Ok(name);
        }
        let tmp = write_tmp(dir, &tag, bytes);
        (name, tmp)
    };
    move_into_place(tmp?, &dir.join(&name))?;
    Ok(name)
}

/// Renames the written temporary file `tmp` to `path`, unless `path` is there already.
fn move_into_place(tmp: PathBuf, path: &Path) -> io::Result<()> {
    if path.exists() {
        let _ = fs::remove_file(&tmp);
        return Ok(());
    }
    fs::rename(&tmp, path).inspect_err(|_| {
        let _ = fs::remove_file(&tmp);
    })
}

/// A number for this process's next temporary file: two stores at once never share one.
fn next_tmp() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn write_tmp(dir: &Path, tag: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    let (path, mut file) = tempfile_in(dir, tag)?;
    file.write_all(bytes).inspect_err(|_| {
        let _ = fs::remove_file(&path);
    })?;
    Ok(path)
}

/// Text blobs (UTF-8) this process stored and nobody has read yet, kept in memory: the model
/// request that follows a prompt reads its image back at once, and megabytes need not be read
/// (and checked as UTF-8) again. The first read takes the entry (later reads go to the file),
/// so an idle kin holds none of them. Content-addressed, so an entry is never stale; bounded
/// by [`RECENT_BYTES`].
static RECENT: Mutex<Vec<(PathBuf, Text)>> = Mutex::new(Vec::new());
const RECENT_BYTES: usize = 64 * 1024 * 1024;

/// A text blob in memory: UTF-8, with what is known of it already.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    pub(crate) bytes: Bytes,
    /// Its BLAKE3 hash (its name), when it was computed as the text was read.
    pub(crate) hash: Option<blake3::Hash>,
    /// Printable ASCII without `"` or `\`: it goes into a JSON string as it is.
    pub(crate) plain: bool,
}

impl Text {
    /// Text nothing is known of yet.
    pub(crate) fn new(bytes: Bytes) -> Self {
        Self {
            bytes,
            hash: None,
            plain: false,
        }
    }
}

/// [`put`] for text that is read back soon (a prompt's image): it is kept in memory (as given:
/// a prompt's image is a slice of the line it came in), and the file is written on another
/// thread ([`blob_writes`]), so the model request need not wait for it. A write that fails is
/// reported by [`blob_writes::take_failed`].
pub(crate) fn put_text(dir: &Path, text: Text) -> io::Result<String> {
    fs::create_dir_all(dir)?;
    let name = match text.hash {
        Some(hash) => hash.to_hex().to_string(),
        None => name_of(&text.bytes),
    };
    let path = dir.join(&name);
    if !path.exists() {
        let (dir, text, target) = (dir.to_owned(), text.clone(), path.clone());
        blob_writes::spawn(path.clone(), move || {
            let tag = format!("{}.{}", text.bytes.len(), next_tmp());
            move_into_place(write_tmp(&dir, &tag, &text.bytes)?, &target)
        });
    }
    let mut recent = lock(&RECENT);
    recent.retain(|(kept, _)| *kept != path);
    recent.push((path, text));
    let mut total: usize = recent.iter().map(|(_, text)| text.bytes.len()).sum();
    while total > RECENT_BYTES && recent.len() > 1 {
        total -= recent.remove(0).1.bytes.len();
    }
    Ok(name)
}

/// Reads text blob `name` of `dir` (UTF-8), from memory when this process stored it lately.
pub(crate) fn get_shared(dir: &Path, name: &str) -> Option<Text> {
    if !is_name(name) {
        return None;
    }
    let path = dir.join(name);
    let mut recent = lock(&RECENT);
    if let Some(at) = recent.iter().position(|(kept, _)| *kept == path) {
        return Some(recent.remove(at).1);
    }
    drop(recent);
    get_text(dir, name).map(|text| Text::new(Bytes::from(text.into_bytes())))
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
    blob_writes::wait_dir(from);
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

/// Blobs larger than this are not read: no prompt or tool result kin takes comes near it.
const MIN_READ_CAP: usize = 64 * 1024 * 1024;

/// Reads blob `name` from `dir` (once it is written); `None` when it is missing or the name is
/// not 64 hex digits (a log edited by hand must not reach outside the directory), or when it
/// is not a regular file of `dir` (a symlink put there is not followed) or is too large.
pub(crate) fn get(dir: &Path, name: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    if !is_name(name) {
        return None;
    }
    let path = dir.join(name);
    blob_writes::wait_for(&path);
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&path)
        .ok()?;
    let meta = file.metadata().ok()?;
    let cap = MIN_READ_CAP.max(crate::limits::current().prompt_bytes) as u64;
    if !meta.is_file() || meta.len() > cap {
        tracing::warn!(
            "blob {} is not a regular file within {cap} bytes; not read",
            path.display()
        );
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(cap).read_to_end(&mut bytes).ok()?;
    Some(bytes)
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
        // A blob swapped for a symlink is not followed.
        let secret = home.path().join("secret");
        std::fs::write(&secret, "secret").unwrap();
        let swapped = "1".repeat(64);
        std::os::unix::fs::symlink(&secret, dir.join(&swapped)).unwrap();
        assert!(get(&dir, &swapped).is_none());
        let fork = dir_of(&home.path().join("s2.jsonl"));
        share(&dir, &fork);
        assert_eq!(get(&fork, &name).unwrap(), b"abc");
    }

    #[test]
    fn a_large_text_blob_is_written_in_the_background_and_read_back_from_memory() {
        let home = tempfile::tempdir().unwrap();
        let text = Bytes::from("A".repeat(OVERLAP_FROM + 1));
        let name = put_text(home.path(), Text::new(text.clone())).unwrap();
        let known = Text {
            hash: Some(blake3::hash(&text)),
            ..Text::new(text.clone())
        };
        assert_eq!(put_text(home.path(), known).unwrap(), name);
        assert_eq!(name, name_of(&text));
        assert_eq!(get(home.path(), &name).unwrap(), text);
        let shared = get_shared(home.path(), &name).unwrap();
        assert_eq!(shared.bytes.as_ptr(), text.as_ptr(), "from memory");
        let again = get_shared(home.path(), &name).unwrap();
        assert!(
            again.bytes.as_ptr() != text.as_ptr(),
            "the first read took it: the file serves later ones"
        );
        assert_eq!(again.bytes, text);
        let names: Vec<_> = std::fs::read_dir(home.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no temporary file is left");
        assert!(get_shared(home.path(), "../x").is_none());
    }
}

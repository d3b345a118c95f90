//! What one confined process may do (a [`Policy`]: its writable paths and its network), the
//! devices every process may write, and paths as Landlock sees them. Shared by the sandbox
//! (which builds policies), its launcher (which enforces them) and the refusal notes.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Devices every program writes to (the null device, terminals, shared memory), writable
/// whatever the policy: no file a user keeps is among them.
pub(crate) const DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/pts",
    "/dev/ptmx",
    "/dev/shm",
];

/// What one confined process may do: the launcher's argument, and the ceiling a kin started
/// inside it keeps for its own commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Beneath these (and the devices everything needs), writes are allowed.
    pub writable: Vec<PathBuf>,
    /// TCP connect and bind allowed.
    pub network: bool,
    /// Refuse to run rather than run unconfined.
    #[serde(default)]
    pub required: bool,
    /// Files it may not read (resolved): kin's secrets a confined process could use to act
    /// outside its confinement, such as the `kin mcp` token.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<PathBuf>,
}

impl Policy {
    /// Narrowed to what `ceiling` allows: each path kept where it lies beneath a ceiling path,
    /// a ceiling path kept where it lies beneath it.
    pub(crate) fn within(mut self, ceiling: &Policy) -> Self {
        let mut kept = Vec::new();
        for path in &self.writable {
            for top in &ceiling.writable {
                let narrower = if path.starts_with(top) {
                    path
                } else if top.starts_with(path) {
                    top
                } else {
                    continue;
                };
                if !kept.contains(narrower) {
                    kept.push(narrower.clone());
                }
            }
        }
        self.writable = kept;
        self.network &= ceiling.network;
        for path in &ceiling.unreadable {
            if !self.unreadable.contains(path) {
                self.unreadable.push(path.clone());
            }
        }
        self
    }

    /// Whether a write to `path` (absolute) is allowed.
    pub(crate) fn allows_write(&self, path: &Path) -> bool {
        let path = canonical(path);
        self.writable.iter().any(|top| path.starts_with(top))
            || DEVICES.iter().any(|device| path.starts_with(device))
    }
}

/// `path` with its symlinks resolved as far as it exists (what Landlock sees).
pub(crate) fn canonical(path: &Path) -> PathBuf {
    canonical_within(path, 8)
}

fn canonical_within(path: &Path, links: u8) -> PathBuf {
    use std::path::Component;
    if let Ok(path) = path.canonicalize() {
        return path;
    }
    // A dangling symlink: where a write through it would land.
    if let (Ok(target), Some(parent), true) = (std::fs::read_link(path), path.parent(), links > 0) {
        return canonical_within(&parent.join(target), links - 1);
    }
    // Not there (yet): `..` taken lexically, the part that exists resolved.
    let mut lexical = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::CurDir => {}
            other => lexical.push(other),
        }
    }
    match (lexical.parent(), lexical.file_name()) {
        (Some(parent), Some(name)) => canonical_within(parent, links).join(name),
        _ => lexical,
    }
}

//! Where session files live: top-level sessions in the sessions directory, child sessions
//! (those with a `parentSession`) in its `children/` subdirectory, each directory with its own
//! index. Listing the top level thus never reads a child's file name or index record, however
//! many children there are.
//!
//! Stores written before this layout keep children beside the top-level sessions. The first
//! listing of such a store moves them (see [`Layout::migrate`]) and then writes the marker
//! file `.layout`, so each store goes through it once. Until then every session is still
//! found: a path is looked up in both directories.

use std::fs;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::event::Header;
use super::index::{self, IndexCache};

/// The subdirectory of the sessions directory that holds child sessions.
pub(crate) const CHILDREN_DIR: &str = "children";
/// Present once the store has this layout; holds its version.
const MARKER: &str = ".layout";
const VERSION: &str = "1";
/// A header line is short; a longer first line is no kin header.
const MAX_HEADER: u64 = 64 * 1024;

/// One directory of session files and what the store has read of its index.
#[derive(Debug)]
pub(crate) struct Shelf {
    pub(crate) dir: PathBuf,
    pub(crate) index: Arc<IndexCache>,
}

impl Shelf {
    fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            index: Arc::default(),
        }
    }

    pub(crate) fn file(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.jsonl"))
    }
}

#[derive(Debug)]
pub(crate) struct Layout {
    pub(crate) top: Shelf,
    pub(crate) children: Shelf,
    migrated: OnceLock<()>,
}

impl Layout {
    pub(crate) fn new(dir: PathBuf) -> Self {
        Self {
            children: Shelf::new(dir.join(CHILDREN_DIR)),
            top: Shelf::new(dir),
            migrated: OnceLock::new(),
        }
    }

    /// Where a session with this header is kept.
    pub(crate) fn shelf_of(&self, header: &Header) -> &Shelf {
        if header.parent_session.is_some() {
            &self.children
        } else {
            &self.top
        }
    }

    /// The shelf whose directory holds `path`.
    pub(crate) fn shelf_holding(&self, path: &Path) -> &Shelf {
        if path.parent() == Some(self.children.dir.as_path()) {
            &self.children
        } else {
            &self.top
        }
    }

    /// Session `id`'s file: where it is, else where a top-level session would be.
    pub(crate) fn find(&self, id: &str) -> PathBuf {
        let top = self.top.file(id);
        if top.exists() {
            return top;
        }
        let child = self.children.file(id);
        if child.exists() {
            child
        } else {
            top
        }
    }

    /// Makes `shelf`'s directory; a new store is marked with the layout at once, so it never
    /// needs the migration.
    pub(crate) fn make_dir(&self, shelf: &Shelf) -> io::Result<()> {
        if !self.top.dir.is_dir() {
            fs::create_dir_all(&self.top.dir)?;
            fs::write(self.top.dir.join(MARKER), format!("{VERSION}\n"))?;
        }
        fs::create_dir_all(&shelf.dir)
    }

    /// Moves the children of an old flat store into `children/` (once per store and
    /// process; a store with the marker is left alone). Their index records move with them,
    /// so no child's file is read again. A failure is logged and tried again next time.
    pub(crate) fn migrate(&self) {
        if self.migrated.get().is_some() {
            return;
        }
        let marker = self.top.dir.join(MARKER);
        if marker.exists() || !self.top.dir.is_dir() {
            let _ = self.migrated.set(());
            return;
        }
        match self.move_children() {
            Ok(moved) => {
                if moved > 0 {
                    tracing::info!(moved, dir = %self.top.dir.display(), "moved child sessions into their own directory");
                }
                match fs::write(&marker, format!("{VERSION}\n")) {
                    Ok(()) => {
                        let _ = self.migrated.set(());
                    }
                    Err(error) => {
                        tracing::warn!(%error, "could not mark the session store as migrated")
                    }
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not move child sessions into their own directory")
            }
        }
    }

    fn move_children(&self) -> io::Result<usize> {
        let mut moved = Vec::new();
        for entry in fs::read_dir(&self.top.dir)? {
            let path = entry?.path();
            let Some(id) = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_suffix(".jsonl"))
            else {
                continue;
            };
            if id.is_empty() || id.starts_with('.') || !is_child(&path) {
                continue;
            }
            fs::create_dir_all(&self.children.dir)?;
            // The log last: until it moves, the session is found where it was.
            for suffix in [
                "jsonl.torn",
                "jsonl.set-aside",
                "jsonl.view",
                "blobs",
                "jsonl",
            ] {
                let from = self.top.dir.join(format!("{id}.{suffix}"));
                let to = self.children.dir.join(format!("{id}.{suffix}"));
                match fs::rename(&from, &to) {
                    Ok(()) => {}
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error),
                }
            }
            moved.push(id.to_owned());
        }
        if !moved.is_empty() {
            index::move_records(
                (&self.top.index, &self.top.dir),
                (&self.children.index, &self.children.dir),
                &moved,
            )?;
        }
        Ok(moved.len())
    }
}

/// Whether the log at `path` has a header naming a parent session.
fn is_child(path: &Path) -> bool {
    let Ok(file) = fs::File::open(path) else {
        return false;
    };
    let mut first = Vec::new();
    let mut reader = BufReader::new(io::Read::take(file, MAX_HEADER));
    if reader.read_until(b'\n', &mut first).is_err() {
        return false;
    }
    serde_json::from_slice::<Header>(first.trim_ascii_end())
        .is_ok_and(|header| header.parent_session.is_some())
}

//! The symlink-swap race: while another thread keeps exchanging a workspace directory with a
//! symlink to a directory outside, `read` (read-only mode) and `write` (edits inside allowed
//! always, nothing outside) must never reach outside.

use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use nix::fcntl::{renameat2, RenameFlags};
use serde_json::json;

use super::permission::{Decision, PermissionRecord, Scope};
use super::testing::{call, Workspace};
use super::{read::ReadTool, write::WriteTool, PermissionMode, SessionPermissions, ToolKind};

/// Reads and writes each; 10,000 tries in all.
const TRIES: usize = 5_000;

/// Swaps `ws/d` (a directory) and `ws/swap` (a symlink to outside) until stopped.
pub(super) struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swapper {
    pub(super) fn start(ws: &Workspace) -> Self {
        let dir = std::fs::File::open(ws.path("")).unwrap();
        let (stop, swaps) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
        );
        let (stopped, counted) = (stop.clone(), swaps.clone());
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                renameat2(&dir, "d", &dir, "swap", RenameFlags::RENAME_EXCHANGE).unwrap();
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        Self {
            stop,
            swaps,
            thread: Some(thread),
        }
    }

    /// Stops the thread; how many swaps it made.
    pub(super) fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.swaps.load(Ordering::Relaxed)
    }
}

fn workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("d/f", "inside\n");
    std::fs::write(ws.outside("f"), "OUTSIDE\n").unwrap();
    symlink(ws.outside(""), ws.path("swap")).unwrap();
    ws
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_during_a_read_never_leads_outside() {
    let ws = workspace();
    let cx = ws.cx_in_mode(PermissionMode::ReadOnly);
    let swapper = Swapper::start(&ws);
    let (mut escapes, mut inside) = (0, 0);
    for _ in 0..TRIES {
        let out = call(&ReadTool, json!({"path": "d/f"}), &cx).await;
        if out.text.contains("OUTSIDE") {
            escapes += 1;
        } else if out.text.contains("inside") {
            inside += 1;
        }
    }
    let swaps = swapper.finish();
    assert_eq!(
        escapes, 0,
        "{escapes} of {TRIES} reads returned outside content"
    );
    assert!(
        swaps > 100 && inside > 0,
        "the race ran: {swaps} swaps, {inside} reads inside"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_swapped_in_during_an_approved_write_never_lands_outside() {
    let ws = workspace();
    let mut cx = ws.cx();
    let permissions = SessionPermissions::new(PermissionMode::Ask);
    permissions.restore(&PermissionRecord::Decision(Decision {
        call_id: "earlier".into(),
        kind: ToolKind::Edit,
        scope: Scope::Workspace,
        allow: true,
        always: true,
        server_tool: None,
    }));
    cx.permissions = Arc::new(permissions);
    let swapper = Swapper::start(&ws);
    let mut written = 0;
    for i in 0..TRIES {
        let path = format!("d/new-{i}");
        let out = call(&WriteTool, json!({"path": path, "content": "x"}), &cx).await;
        written += usize::from(!out.is_error);
    }
    let swaps = swapper.finish();
    let escapes = std::fs::read_dir(ws.outside(""))
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name() != "f")
        .count();
    assert_eq!(
        escapes, 0,
        "{escapes} of {TRIES} approved writes landed outside"
    );
    assert!(
        swaps > 100 && written > 0,
        "the race ran: {swaps} swaps, {written} written"
    );
}

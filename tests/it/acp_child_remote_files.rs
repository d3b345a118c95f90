//! File services for a remote ACP child (`remote_cwd`): the fake child
//! (`examples/fake_acp_child.rs`, `fs-escape` mode) writes under the cwd it was told. kin serves
//! it through the editor, confined to the `remote_cwd`, only when the editor's workspace (the
//! local `cwd`) covers that path; otherwise it refuses and touches nothing on this machine.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use kin::acp_client::{AcpChild, ChildCommand, ChildLink};
use kin::config::AcpPermission;
use kin::tools::client::{
    ClientError, ClientFeatures, ClientResult, PermissionAnswer, PermissionPrompt, TerminalExit,
    TerminalOutput, TerminalSpec,
};
use kin::tools::ClientBridge;
use tokio_util::sync::CancellationToken;

/// An editor that reads and writes the local disk and records each request.
#[derive(Default)]
struct DiskEditor {
    calls: Mutex<Vec<String>>,
}

fn not_here<T: Send + 'static>() -> ClientResult<T> {
    futures::future::ready(Err(ClientError::Failed {
        method: "terminal".into(),
        message: "no terminals".into(),
    }))
    .boxed()
}

impl ClientBridge for DiskEditor {
    fn features(&self) -> ClientFeatures {
        ClientFeatures {
            read_text_file: true,
            write_text_file: true,
            terminal: false,
            ..ClientFeatures::default()
        }
    }
    fn for_child(self: Arc<Self>, _: &str) -> Arc<dyn ClientBridge> {
        self
    }
    fn read_text_file(&self, path: PathBuf, _: CancellationToken) -> ClientResult<String> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("read {}", path.display()));
        let read = std::fs::read_to_string(&path).map_err(|error| ClientError::Failed {
            method: "fs/read_text_file".into(),
            message: error.to_string(),
        });
        futures::future::ready(read).boxed()
    }
    fn write_text_file(
        &self,
        path: PathBuf,
        content: String,
        _: CancellationToken,
    ) -> ClientResult<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("write {}", path.display()));
        let written = std::fs::write(&path, content).map_err(|error| ClientError::Failed {
            method: "fs/write_text_file".into(),
            message: error.to_string(),
        });
        futures::future::ready(written).boxed()
    }
    fn request_permission(
        &self,
        _: PermissionPrompt,
        _: CancellationToken,
    ) -> ClientResult<PermissionAnswer> {
        futures::future::ready(Ok(PermissionAnswer::RejectOnce)).boxed()
    }
    fn create_terminal(
        &self,
        _: String,
        _: TerminalSpec,
        _: CancellationToken,
    ) -> ClientResult<String> {
        not_here()
    }
    fn terminal_output(&self, _: String) -> ClientResult<TerminalOutput> {
        not_here()
    }
    fn wait_for_terminal_exit(
        &self,
        _: String,
        _: CancellationToken,
    ) -> ClientResult<TerminalExit> {
        not_here()
    }
    fn kill_terminal(&self, _: String) -> ClientResult<()> {
        not_here()
    }
    fn release_terminal(&self, _: String) -> ClientResult<()> {
        not_here()
    }
}

/// The fake child in `fs-escape` mode told `remote` as its cwd, launched in `local`.
async fn run(local: &Path, remote: &str, editor: Option<Arc<DiskEditor>>) -> String {
    kin::process::guard::enable(common::kin_binary());
    let command = ChildCommand {
        program: common::fake_acp_child().display().to_string(),
        args: vec!["remote-files-marker".into(), "fs-escape".into()],
        env: Vec::new(),
        child_env: Default::default(),
        private: Default::default(),
        cwd: local.to_owned(),
        remote_cwd: Some(remote.to_owned()),
        permission: AcpPermission::Allow,
        ceiling: None,
        depth: 1,
        initialize_timeout: Duration::from_secs(20),
        eof_grace: Duration::from_millis(200),
        term_grace: Duration::from_millis(200),
        link: Some(ChildLink {
            parent: "parent".into(),
            child: "child".into(),
            call_id: None,
            title: None,
            sink: Arc::new(common::Nowhere),
            client: editor.map(|editor| editor as Arc<dyn ClientBridge>),
        }),
        mcp_servers: Vec::new(),
        sandbox: None,
    };
    let cancel = CancellationToken::new();
    let mut child = AcpChild::start(command, &cancel).await.unwrap();
    let (_, mut no_steers) = tokio::sync::mpsc::unbounded_channel();
    let outcome = child.prompt_steered("write", &cancel, &mut no_steers).await;
    child.shutdown().await;
    outcome.unwrap().text
}

/// A workspace `root` with `work/` (the child's cwd) holding `link` to `elsewhere/`.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    std::fs::create_dir_all(base.join("work")).unwrap();
    std::fs::create_dir_all(base.join("elsewhere")).unwrap();
    std::os::unix::fs::symlink(base.join("elsewhere"), base.join("work/link")).unwrap();
    (root, base)
}

#[tokio::test]
async fn a_remote_childs_paths_inside_the_editors_workspace_are_served_through_the_editor() {
    let (_root, base) = workspace();
    let editor = Arc::new(DiskEditor::default());
    let remote = base.join("work").display().to_string();
    let answer = run(&base, &remote, Some(editor.clone())).await;
    assert_eq!(answer, "ok error error", "confined to the remote cwd");
    assert_eq!(
        *editor.calls.lock().unwrap(),
        [format!("write {}", base.join("work/inside.txt").display())],
        "through the editor"
    );
    assert!(!base.join("escaped.txt").exists());
    assert!(!base.join("elsewhere/escaped.txt").exists());
}

#[tokio::test]
async fn a_remote_childs_paths_outside_the_editors_workspace_or_without_an_editor_are_refused() {
    let (_root, base) = workspace();
    let editor = Arc::new(DiskEditor::default());
    let elsewhere = format!("/kin-remote-{}/work", std::process::id());
    assert_eq!(
        run(&base.join("work"), &elsewhere, Some(editor.clone())).await,
        "error error error"
    );
    assert!(editor.calls.lock().unwrap().is_empty());
    // Covered, but no editor to serve it: this machine's disk is not used.
    let remote = base.join("work").display().to_string();
    assert_eq!(run(&base, &remote, None).await, "error error error");
    assert!(!base.join("work/inside.txt").exists());
}

#[tokio::test]
async fn a_remote_cwd_spelled_inside_the_workspace_that_leads_out_through_a_symlink_is_refused() {
    let (_root, base) = workspace();
    let editor = Arc::new(DiskEditor::default());
    // `work/link` points at `elsewhere/`, outside the local cwd `work/`.
    let remote = base.join("work/link").display().to_string();
    assert_eq!(
        run(&base.join("work"), &remote, Some(editor.clone())).await,
        "error error error"
    );
    assert!(editor.calls.lock().unwrap().is_empty());
    assert!(!base.join("elsewhere/inside.txt").exists());
    assert!(!base.join("elsewhere/link").exists());
}

#[tokio::test]
async fn a_local_cwd_reached_through_a_symlink_covers_the_directory_it_points_to() {
    let (_root, base) = workspace();
    std::os::unix::fs::symlink(base.join("work"), base.join("alias")).unwrap();
    let editor = Arc::new(DiskEditor::default());
    let remote = base.join("work").display().to_string();
    let answer = run(&base.join("alias"), &remote, Some(editor.clone())).await;
    assert_eq!(answer, "ok error error");
    assert!(base.join("work/inside.txt").exists());
}

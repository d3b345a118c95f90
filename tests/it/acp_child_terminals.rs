//! Terminals for ACP children: the fake child (`examples/fake_acp_child.rs`, `terminal` mode)
//! runs commands through `terminal/*`, which kin serves locally (no editor here) in the
//! child's cwd and within the delegating session's mode; a terminal the child leaves open is
//! gone with its session.

use crate::common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kin::acp_client::{AcpChild, ChildCommand, ChildLink};
use kin::config::AcpPermission;
use kin::tools::{PermissionMode, SessionPermissions};
use tokio_util::sync::CancellationToken;

fn command(
    marker: &str,
    cwd: &Path,
    permission: AcpPermission,
    mode: PermissionMode,
) -> ChildCommand {
    kin::process::guard::enable(common::kin_binary());
    ChildCommand {
        program: common::fake_acp_child().display().to_string(),
        args: vec![marker.to_owned(), "terminal".to_owned()],
        env: Vec::new(),
        child_env: Default::default(),
        private: Default::default(),
        cwd: cwd.to_owned(),
        remote_cwd: None,
        permission,
        ceiling: Some(Arc::new(SessionPermissions::new(mode))),
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
            client: None,
        }),
        mcp_servers: Vec::new(),
        sandbox: None,
    }
}

/// One prompt to the fake child; its answer, after the teardown.
async fn run(command: ChildCommand) -> String {
    let cancel = CancellationToken::new();
    let mut child = AcpChild::start(command, &cancel).await.unwrap();
    let (_, mut no_steers) = tokio::sync::mpsc::unbounded_channel();
    let outcome = child.prompt_steered("run", &cancel, &mut no_steers).await;
    child.shutdown().await;
    outcome.unwrap().text
}

#[tokio::test]
async fn a_child_runs_commands_in_its_cwd_through_kins_terminals_and_leaves_none_behind() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = format!("terminal-marker-{}-allowed", std::process::id());
    let command = command(
        &marker,
        cwd.path(),
        AcpPermission::Allow,
        PermissionMode::Ask,
    );
    let answer = run(command).await;
    assert_eq!(
        answer,
        "offered=true exit=3 output=TERM_OK outside=error left=ok"
    );
    // The `sleep` the child never released went with its session.
    common::assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_child_of_a_read_only_session_cannot_run_commands() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = format!("terminal-marker-{}-read-only", std::process::id());
    let command = command(
        &marker,
        cwd.path(),
        AcpPermission::Allow,
        PermissionMode::ReadOnly,
    );
    let answer = run(command).await;
    assert_eq!(
        answer,
        "create=error:the delegating session is read-only: the child agent may not run commands"
    );
    common::assert_none_left(&marker).await;
}

#[tokio::test]
async fn a_child_that_must_ask_with_no_editor_to_ask_runs_nothing() {
    let cwd = tempfile::tempdir().unwrap();
    let marker = format!("terminal-marker-{}-ask", std::process::id());
    let command = command(&marker, cwd.path(), AcpPermission::Ask, PermissionMode::Ask);
    let answer = run(command).await;
    assert_eq!(
        answer,
        "create=error:no editor can be asked to allow the child agent's command"
    );
}

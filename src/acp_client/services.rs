//! The file services kin offers a child (`fs/read_text_file`, `fs/write_text_file`): served
//! through the delegating session's editor when it has them (so unsaved buffers count), else
//! on the local disk, and only inside the child's roots (its cwd): a path that resolves
//! outside, through `..` or a symlink, is refused. Writes are refused under a `read-only`
//! parent, and in kin's own directories (config, data) wherever the child's cwd is.
//!
//! A remote child (`remote_cwd`) names paths on its own machine. They are served only when the
//! editor's workspace covers them (its `remote_cwd`, resolved on this machine, lies inside the
//! local `cwd`, as when both sides see one shared path) and the editor reads and writes files
//! itself: then through the editor, confined to the `remote_cwd`. Otherwise its file requests are refused with a reason
//! and the local disk is never touched at those paths ([`for_command`]).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol_schema::v1::{
    ReadTextFileRequest, ReadTextFileResponse, WriteTextFileRequest, WriteTextFileResponse,
};
use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::command::ChildCommand;
use crate::rpc::{Reply, RpcError};
use crate::tools::fs::{read_text, write_text};
use crate::tools::private::PrivateFiles;
use crate::tools::{ClientBridge, PermissionMode, Roots, ToolContext};

/// Where one child's file requests are served.
#[derive(Clone)]
pub(super) struct FileServices {
    pub(crate) roots: Arc<Roots>,
    /// The editor, as the child's session (kin's id for it).
    pub(crate) client: Option<Arc<dyn ClientBridge>>,
    pub(crate) session: String,
    /// kin's own files, never read for the child.
    pub(crate) private: PrivateFiles,
}

impl FileServices {
    fn context(&self, cancel: CancellationToken) -> ToolContext {
        let mut cx = ToolContext::new(self.session.clone(), self.roots.cwd().to_owned(), cancel);
        cx.roots = self.roots.clone();
        cx.client = self.client.clone();
        cx.private = self.private.clone();
        cx
    }

    fn confine(&self, path: &std::path::Path) -> Result<PathBuf, RpcError> {
        confine(&self.roots, path)
    }

    pub(crate) fn read(&self, request: ReadTextFileRequest, cancel: CancellationToken) -> Reply {
        let path = match self.confine(&request.path) {
            Ok(path) => path,
            Err(error) => return Reply::Now(Err(error)),
        };
        let cx = self.context(cancel);
        Reply::Later(
            async move {
                let text = read_text(&cx, &path)
                    .await
                    .map_err(|error| RpcError::internal(error.to_string()))?
                    .ok_or_else(|| {
                        RpcError::internal(format!("{} does not exist", path.display()))
                    })?;
                let text = lines(&text, request.line, request.limit);
                serde_json::to_value(ReadTextFileResponse::new(text))
                    .map_err(|error| RpcError::internal(error.to_string()))
            }
            .boxed(),
        )
    }

    pub(crate) fn write(
        &self,
        request: WriteTextFileRequest,
        mode: PermissionMode,
        cancel: CancellationToken,
    ) -> Reply {
        if mode == PermissionMode::ReadOnly {
            return Reply::Now(Err(RpcError::invalid_params(
                "the delegating session is read-only: the child agent may not write files",
            )));
        }
        let path = match self.confine(&request.path) {
            Ok(path) if self.private.keeps_from_writes(&path) => {
                return Reply::Now(Err(RpcError::invalid_params(format!(
                    "{} is in kin's own configuration or data directory, which child agents \
                     may not write",
                    path.display()
                ))))
            }
            Ok(path) => path,
            Err(error) => return Reply::Now(Err(error)),
        };
        let cx = self.context(cancel);
        Reply::Later(
            async move {
                write_text(&cx, &path, request.content)
                    .await
                    .map_err(|error| RpcError::internal(error.to_string()))?;
                serde_json::to_value(WriteTextFileResponse::new())
                    .map_err(|error| RpcError::internal(error.to_string()))
            }
            .boxed(),
        )
    }
}

/// What serves the file requests of the child `command` launches: its services, or why a
/// remote child's requests are refused (neither for a child with no place in the tree).
pub(super) fn for_command(command: &ChildCommand) -> (Option<FileServices>, Option<String>) {
    let Some(link) = &command.link else {
        return (None, None);
    };
    let client = link
        .client
        .clone()
        .map(|client| client.for_child(&link.child));
    let services = |root: PathBuf, client| FileServices {
        roots: Arc::new(Roots::new(root, Vec::new())),
        client,
        session: link.child.clone(),
        private: command.private.clone(),
    };
    let Some(remote) = &command.remote_cwd else {
        return (Some(services(command.cwd.clone(), client)), None);
    };
    let remote = Path::new(remote);
    let covered = covers(&command.cwd, remote);
    let editor_files = client.as_ref().is_some_and(|client| {
        let features = client.features();
        features.read_text_file && features.write_text_file
    });
    match (covered, editor_files) {
        (true, true) => (Some(services(remote.to_owned(), client)), None),
        (false, _) => (
            None,
            Some(format!(
                "the ACP child runs on another machine and its working directory {} is not \
                 inside this machine's workspace {}: kin does not serve its paths",
                remote.display(),
                command.cwd.display()
            )),
        ),
        (true, false) => (
            None,
            Some(
                "the ACP child runs on another machine and the editor offers no file services: \
                 kin does not serve its paths from this machine's disk"
                    .to_owned(),
            ),
        ),
    }
}

/// Whether the local `cwd` (the editor's workspace) covers the remote child's `remote` cwd:
/// `remote` is absolute and plainly spelled (no `.` or `..`), and, resolved on this machine
/// against `cwd`, lies inside it. Both sides count: a `remote` spelled inside `cwd` that
/// leads out through a symlink is not covered, and one inside the directory a symlinked
/// `cwd` points to is. The resolution looks at nothing outside `cwd`.
fn covers(cwd: &Path, remote: &Path) -> bool {
    let plain = remote.is_absolute()
        && remote
            .components()
            .all(|part| matches!(part, Component::RootDir | Component::Normal(_)));
    plain
        && Roots::new(cwd.to_owned(), Vec::new())
            .resolve(&remote.to_string_lossy())
            .is_ok_and(|resolved| resolved.inside)
}

/// The path as the child named it, if it lies inside the child's roots.
pub(super) fn confine(roots: &Roots, path: &std::path::Path) -> Result<PathBuf, RpcError> {
    let raw = path.to_string_lossy();
    if !path.is_absolute() {
        return Err(RpcError::invalid_params(format!(
            "the path must be absolute: {raw}"
        )));
    }
    let resolved = roots
        .resolve(&raw)
        .map_err(|error| RpcError::invalid_params(error.to_string()))?;
    if !resolved.inside {
        return Err(RpcError::invalid_params(format!(
            "{raw} is outside the child agent's working directory"
        )));
    }
    Ok(resolved.path)
}

/// `limit` lines from line `line` (1-based), as `fs/read_text_file` asks.
fn lines(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = line.map_or(0, |line| line.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |limit| limit as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn services(dir: &std::path::Path) -> FileServices {
        FileServices {
            roots: Arc::new(Roots::new(dir.to_owned(), Vec::new())),
            client: None,
            session: "child".into(),
            private: PrivateFiles::default(),
        }
    }

    async fn answer(reply: Reply) -> Result<serde_json::Value, RpcError> {
        match reply {
            Reply::Now(answer) | Reply::NowThen(answer, _) => answer,
            Reply::Later(answer) => answer.await,
        }
    }

    #[tokio::test]
    async fn reads_and_writes_inside_the_roots_only() {
        let root = tempfile::tempdir().unwrap();
        let work = root.path().join("work");
        std::fs::create_dir(&work).unwrap();
        std::os::unix::fs::symlink(root.path(), work.join("out")).unwrap();
        let services = services(&work);
        let write = |path: PathBuf| {
            let request = WriteTextFileRequest::new("s", path, "text");
            services.write(request, PermissionMode::Ask, CancellationToken::new())
        };
        answer(write(work.join("a.txt"))).await.unwrap();
        let read = services.read(
            ReadTextFileRequest::new("s", work.join("a.txt")),
            CancellationToken::new(),
        );
        assert_eq!(answer(read).await.unwrap()["content"], "text");
        for outside in [
            work.join("../b.txt"),
            work.join("out/c.txt"),
            "/etc/passwd".into(),
        ] {
            let error = answer(write(outside.clone())).await.unwrap_err();
            assert!(error.message.contains("outside"), "{outside:?}: {error:?}");
        }
        assert!(!root.path().join("b.txt").exists());
        assert!(!root.path().join("c.txt").exists());
        let read_only = services.write(
            WriteTextFileRequest::new("s", work.join("a.txt"), "new"),
            PermissionMode::ReadOnly,
            CancellationToken::new(),
        );
        assert!(answer(read_only).await.is_err());
        assert_eq!(std::fs::read_to_string(work.join("a.txt")).unwrap(), "text");
    }

    #[test]
    fn the_local_cwd_covers_a_remote_cwd_only_where_it_resolves_inside() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("work/sub")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("work/out")).unwrap();
        std::os::unix::fs::symlink(base.join("work"), base.join("alias")).unwrap();
        let work = base.join("work");
        assert!(covers(&work, &work.join("sub")));
        assert!(covers(&work, &work.join("not-here-yet")));
        assert!(!covers(&work, &work.join("out")), "a symlink leading out");
        assert!(!covers(&work, &work.join("out/deeper")));
        assert!(!covers(&work, &work.join("sub/../../elsewhere")));
        assert!(!covers(&work, &base.join("elsewhere")));
        assert!(!covers(&work, Path::new("sub")), "relative");
        // A cwd reached through a symlink covers what it points to.
        assert!(covers(&base.join("alias"), &work.join("sub")));
    }

    #[test]
    fn line_windows() {
        assert_eq!(lines("a\nb\nc\n", Some(2), Some(1)), "b\n");
        assert_eq!(lines("a\nb\nc", None, Some(2)), "a\nb\n");
        assert_eq!(lines("a\nb", None, None), "a\nb");
    }
}

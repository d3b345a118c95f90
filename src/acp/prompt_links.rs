//! Links in a prompt to local files. One inside the session's roots is attached; one outside
//! is a `read` outside the workspace, so the permission rules decide first (`allow` attaches,
//! `ask` and `read-only` ask the user through the normal permission flow) before anything at
//! the path is looked at.
//!
//! The files are read as the tools read them ([`read_linked`]): confined beneath their root, a
//! FIFO or device never opened for a blocking read, capped, none of kin's own files; and on a
//! blocking thread, so a slow disk holds no runtime worker and a cancel ends the wait. A link
//! left unattached stays a link, and the user gets a notice saying why.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::prompt_content::{read_linked, FileLink};
use crate::agent::Agent;
use crate::rpc::RpcError;
use crate::session::UserPart;
use crate::tools::client::ClientBridge;
use crate::tools::permission::Scope;
use crate::tools::private::PrivateFiles;
use crate::tools::{ToolContext, ToolDisplay, ToolKind};

/// Asks about each outside link in turn, reads the allowed files and those inside the roots,
/// and inserts them into `parts` after their links; returns a notice for each link left
/// unattached.
pub(crate) async fn attach(
    agent: &Agent,
    private: &PrivateFiles,
    links: Vec<FileLink>,
    parts: &mut Vec<UserPart>,
    client: Arc<dyn ClientBridge>,
    cancel: &CancellationToken,
    blob_dir: &std::path::Path,
) -> Result<Vec<String>, RpcError> {
    let mut notices = Vec::new();
    let mut allowed = Vec::new();
    for (n, link) in links.into_iter().enumerate() {
        if !link.outside {
            allowed.push(link);
            continue;
        }
        match ask(agent, &link, n, client.clone(), cancel).await {
            Ok(()) => allowed.push(link),
            Err(Some(why)) => notices.push(format!(
                "The linked file {} was not attached (it is outside the workspace): {why}",
                link.path.display()
            )),
            Err(None) => {}
        }
    }
    if allowed.is_empty() {
        return Ok(notices);
    }
    let (roots, private) = (agent.roots().clone(), private.clone());
    let blob_dir: PathBuf = blob_dir.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        allowed
            .into_iter()
            .map(|link| {
                let confine = (!link.outside).then_some(&*roots);
                let read = read_linked(confine, &private, &link.path, &link.uri, &blob_dir)?;
                Ok((link, read))
            })
            .collect::<Result<Vec<_>, RpcError>>()
    });
    let read = tokio::select! {
        read = read => read.map_err(|e| RpcError::internal(format!("reading linked files: {e}")))??,
        // The turn sees the cancel and ends; the read finishes on its thread unheeded.
        () = cancel.cancelled() => return Ok(notices),
    };
    let mut attached = Vec::new();
    for (link, read) in read {
        match read {
            Ok(part) => attached.push((link.at, part)),
            Err(why) => notices.push(format!(
                "The linked file {} was not attached: {why}",
                link.path.display()
            )),
        }
    }
    // From the last link back, so the earlier indices stay right.
    for (at, part) in attached.into_iter().rev() {
        parts.insert(at + 1, part);
    }
    Ok(notices)
}

/// Puts an outside link to the permission rules: `Err(Some(why))` when refused, `Err(None)`
/// when the ask was cancelled.
async fn ask(
    agent: &Agent,
    link: &FileLink,
    n: usize,
    client: Arc<dyn ClientBridge>,
    cancel: &CancellationToken,
) -> Result<(), Option<String>> {
    let shown = link.path.display().to_string();
    // Only for the permission rules: it reads nothing and starts nothing.
    let mut cx = ToolContext::new(agent.id.clone(), agent.cwd.clone(), cancel.child_token());
    cx.call_id = format!("prompt-link-{}", n + 1);
    cx.roots = agent.roots().clone();
    cx.permissions = agent.permissions().clone();
    cx.client = Some(client);
    cx.files = agent.files().clone();
    let mut display = ToolDisplay::default();
    display
        .locations
        .push(crate::tools::display::Location::new(&link.path, None));
    let prompt = cx.prompt(
        ToolKind::Read,
        format!("Attach {shown} (outside the workspace) to the prompt"),
        display,
    );
    match cx.authorize(Scope::Outside, prompt).await {
        Ok(()) => Ok(()),
        Err(refused) if refused.is_cancelled() => Err(None),
        Err(refused) => Err(Some(refused.text.trim_start_matches("Error: ").to_owned())),
    }
}

//! Links in a prompt to files outside the session's roots: each is a `read` outside the
//! workspace, so the permission rules decide (`allow` attaches, `ask` and `read-only` ask the
//! user through the normal permission flow) before anything at the path is looked at. An
//! allowed file is attached as a link inside the roots would be; otherwise the link stays a
//! link and the user gets a notice saying why.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::prompt_content::{read_linked, OutsideLink};
use crate::agent::Agent;
use crate::rpc::RpcError;
use crate::session::UserPart;
use crate::tools::client::ClientBridge;
use crate::tools::permission::Scope;
use crate::tools::{ToolContext, ToolDisplay, ToolKind};

/// Asks about each of `links` in turn and inserts the allowed files into `parts` after their
/// links; returns a notice for each link left unattached.
pub(crate) async fn attach_outside(
    agent: &Agent,
    links: Vec<OutsideLink>,
    parts: &mut Vec<UserPart>,
    client: Arc<dyn ClientBridge>,
    cancel: &CancellationToken,
    blob_dir: &std::path::Path,
) -> Result<Vec<String>, RpcError> {
    let mut notices = Vec::new();
    let mut attached = Vec::new();
    for (n, link) in links.into_iter().enumerate() {
        let shown = link.path.display().to_string();
        let cx = ToolContext {
            session_id: agent.id.clone().into(),
            cwd: agent.cwd.clone(),
            cancel: cancel.child_token(),
            call_id: format!("prompt-link-{}", n + 1),
            roots: agent.roots().clone(),
            permissions: agent.permissions().clone(),
            client: Some(client.clone()),
            files: agent.files().clone(),
        };
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
            Ok(()) => match read_linked(&link.path, &link.uri, blob_dir)? {
                Some(part) => attached.push((link.at, part)),
                None => notices.push(format!(
                    "The linked file {shown} was not attached: it is not a readable text file"
                )),
            },
            Err(refused) if refused.is_cancelled() => {}
            Err(refused) => notices.push(format!(
                "The linked file {shown} was not attached (it is outside the workspace): {}",
                refused.text.trim_start_matches("Error: ")
            )),
        }
    }
    // From the last link back, so the earlier indices stay right.
    for (at, part) in attached.into_iter().rev() {
        parts.insert(at + 1, part);
    }
    Ok(notices)
}

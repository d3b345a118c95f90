//! A server's tools, listed page by page within bounds: at most [`MAX_PAGES`] pages,
//! [`MAX_TOOLS`] tools and [`MAX_BYTES`] of definitions, within [`LIST_TIMEOUT`], and no
//! cursor twice. A server past any of them is not listed further: kin stops using it and
//! says why (rmcp's own list-all loop follows a server's cursors for ever).

use std::collections::HashSet;
use std::time::Duration;

use rmcp::model::{PaginatedRequestParams, Tool};
use rmcp::service::{Peer, RoleClient};

/// The most pages of one listing.
pub(crate) const MAX_PAGES: usize = 100;
/// The most tools one server may list.
pub(crate) const MAX_TOOLS: usize = 5_000;
/// The most bytes (as JSON) of one server's tool definitions.
pub(crate) const MAX_BYTES: usize = 8 * 1024 * 1024;
/// How long one whole listing may take.
pub(crate) const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a listing stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    /// The server went away or answered with an error: worth connecting again.
    #[error("listing its tools failed: {0}")]
    Failed(String),
    #[error("its tools/list sent the cursor {0:?} a second time; kin stopped listing its tools")]
    RepeatedCursor(String),
    #[error("its tool list runs over {MAX_PAGES} pages; kin stopped listing its tools")]
    TooManyPages,
    #[error("it lists over {MAX_TOOLS} tools; kin stopped listing its tools")]
    TooManyTools,
    #[error(
        "its tool definitions are over {} MiB; kin stopped listing its tools",
        MAX_BYTES / (1024 * 1024)
    )]
    TooLarge,
    #[error(
        "listing its tools took over {} s; kin stopped listing its tools",
        LIST_TIMEOUT.as_secs()
    )]
    TimedOut,
}

impl ListError {
    /// Whether the server broke a bound (kin stops using it) rather than the connection.
    pub(crate) fn is_misbehaviour(&self) -> bool {
        !matches!(self, Self::Failed(_))
    }
}

/// Every tool of the server behind `peer`, within the bounds.
pub(crate) async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ListError> {
    tokio::time::timeout(LIST_TIMEOUT, pages(peer))
        .await
        .unwrap_or(Err(ListError::TimedOut))
}

async fn pages(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, ListError> {
    let mut tools = Vec::new();
    let mut bytes = 0;
    let mut cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let page = peer
            .list_tools(params)
            .await
            .map_err(|error| ListError::Failed(error.to_string()))?;
        for tool in page.tools {
            bytes += serde_json::to_vec(&tool).map_or(0, |json| json.len());
            if bytes > MAX_BYTES {
                return Err(ListError::TooLarge);
            }
            if tools.len() == MAX_TOOLS {
                return Err(ListError::TooManyTools);
            }
            tools.push(tool);
        }
        let Some(next) = page.next_cursor else {
            return Ok(tools);
        };
        let next = next.to_string();
        if !cursors.insert(next.clone()) {
            // Quoted in a notice: a server's cursor may be any length.
            return Err(ListError::RepeatedCursor(next.chars().take(40).collect()));
        }
        cursor = Some(next);
    }
    Err(ListError::TooManyPages)
}

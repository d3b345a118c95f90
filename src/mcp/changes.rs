//! Hearing that a server's tools changed. A server on a revision with the `initialize`
//! handshake sends `notifications/tools/list_changed` whenever it likes (the client handler
//! hears it); one on the stateless revision (2026-07-28) sends it only within a
//! `subscriptions/listen` request the client keeps open, which this opens and reads.

use std::time::Duration;

use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::service::{Peer, RoleClient, Subscription};

/// How long the server may take to acknowledge the subscription.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(10);

/// A subscription to tool-list changes, for a stateless server that announces them (`None`
/// for any other, or when the server would not open one: kin then relists on reconnection
/// only, and says so in the log).
pub(crate) async fn subscribe(server: &str, peer: &Peer<RoleClient>) -> Option<Subscription> {
    let info = peer.peer_info()?;
    let announces = info
        .capabilities
        .tools
        .as_ref()
        .and_then(|tools| tools.list_changed)
        == Some(true);
    if info.protocol_version < ProtocolVersion::V_2026_07_28 || !announces {
        return None;
    }
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    match tokio::time::timeout(LISTEN_TIMEOUT, peer.listen(filter)).await {
        Ok(Ok(subscription)) => Some(subscription),
        Ok(Err(error)) => {
            tracing::warn!(server, %error, "MCP server refused a tool-change subscription");
            None
        }
        Err(_) => {
            tracing::warn!(
                server,
                "MCP server did not acknowledge a tool-change subscription"
            );
            None
        }
    }
}

/// Resolves when the subscription says the tools changed; never without one. A subscription
/// that ends is dropped (the next connection opens another).
pub(crate) async fn tools_changed(subscription: &mut Option<Subscription>) {
    let Some(open) = subscription else {
        return std::future::pending().await;
    };
    loop {
        match open.next().await {
            Ok(Some(ServerNotification::ToolListChangedNotification(_))) => return,
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        }
    }
    *subscription = None;
    std::future::pending().await
}

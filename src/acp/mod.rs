//! The ACP boundary: editor-facing requests become session-host calls, host events become
//! `session/update` notifications ([`updates`]), tools reach the editor through [`bridge`], and
//! the permission mode is shown as session modes and a config option ([`modes`]), the model,
//! usage and compactions as [`models`] says. With
//! [`crate::acp_client`] (the other direction: kin as the client of child agents), the only
//! module that knows ACP types.

mod agent;
mod answers;
mod auth;
pub(crate) mod bridge;
mod commands;
mod elicit;
mod mcp;
pub mod models;
pub(crate) mod modes;
pub(crate) mod notice;
mod open;
mod prompt;
mod prompt_content;
mod prompt_links;
mod prompt_size;
mod replay_log;
mod request_params;
mod subagents;
mod tree_replay;
pub mod updates;

pub(crate) use agent::AcpAgent;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::rpc::Peer;
use crate::runtime::Runtime;

/// Serves ACP on stdin/stdout until stdin closes or `shutdown` trips; returns once every
/// request has been answered and the output flushed.
pub async fn serve_stdio(runtime: Arc<Runtime>, shutdown: CancellationToken) {
    let (input, output, flags) = crate::rpc::stdio();
    let (peer, writer) = Peer::new(output);
    let agent = Arc::new(AcpAgent::new(runtime.clone()));
    peer.serve(input, agent.clone(), shutdown).await;
    // Background children settle while their last reports can still be written (the agent,
    // kept until then, holds the subscription that forwards them).
    runtime.shutdown().await;
    drop(agent);
    peer.close(writer).await;
    flags.restore();
}
